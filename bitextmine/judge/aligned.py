"""The second stage on given pairs (``filter --score prob``, ``score --margin prob``): row i of x with row i of
y, their neighbourhoods taken among the rows given together (a chunk of a corpus), as mining takes them among
a side's lines."""

from __future__ import annotations

import numpy as np

from ..config import PROB_MIN_PAIRS, MineConfig
from ..errors import ConfigError, CorpusError
from .features import Pieces
from .store import SecondStage


def aligned_probability(x: np.ndarray, y: np.ndarray, src_pieces: tuple, tgt_pieces: tuple, texts: tuple,
                        stage: SecondStage, lang: str, src_is_english: bool, k: int = MineConfig.k,
                        block_lines: int = 0) -> np.ndarray:
    """P(translation) float32 (n,) of the pairs (x[i], y[i]): x, y float32 (n, d) L2-normalised, ``src_pieces``
    and ``tgt_pieces`` the lines' pieces in the flat layout (ids (total,), offsets (n,)), ``texts`` (the n source
    lines, the n target lines). Each pair's margin
    (ratio, k nearest neighbours of each side among the other side's rows of its block), cosine, standout z and
    lexical scores, by ``lang``'s classifier, adjusted to the share of translations among the pairs judged; 0
    for a pair below the stage's margin floor (not judged). The rows are judged in equal consecutive blocks of
    at most ``block_lines`` (0: no limit) and at most the stage's ``max_lines``, the sizes its classifier was
    trained on. Raises CorpusError for 1 to PROB_MIN_PAIRS - 1 distinct pairs (a block that small is the caller's
    doing: :func:`check_prob_options`; copies of a pair count once, as they are judged once)."""
    n = len(x)
    distinct = len(set(zip(texts[0], texts[1])))
    if 0 < distinct < PROB_MIN_PAIRS:
        raise CorpusError(f"{distinct} distinct pair{'s' * (distinct > 1)} to judge: the second stage judges each "
                          f"pair among at least "
                          f"{PROB_MIN_PAIRS} pairs given together (its margins against their neighbours); give it "
                          f"more pairs, or score them by cosine")
    most = int(stage.languages[lang]["max_lines"])
    blocks = max(1, -(-n // (min(most, block_lines) if block_lines > 0 else most)))
    out = np.zeros(n, np.float32)
    ids = (np.asarray(src_pieces[0], np.int64), np.asarray(tgt_pieces[0], np.int64))
    offs = (np.asarray(src_pieces[1], np.int64), np.asarray(tgt_pieces[1], np.int64))
    for a, b in zip(*(lambda e: (e[:-1], e[1:]))(np.linspace(0, n, blocks + 1).astype(np.int64))):
        cut = [(i[o[a]:o[b] if b < n else len(i)], o[a:b] - o[a]) for i, o in zip(ids, offs)]
        lines = (texts[0][a:b], texts[1][a:b])
        out[a:b] = _block(x[a:b], y[a:b], cut[0], cut[1], lines, stage, lang, src_is_english, k)
    return out


def _block(x: np.ndarray, y: np.ndarray, src_pieces: tuple, tgt_pieces: tuple, texts: tuple, stage: SecondStage,
           lang: str, src_is_english: bool, k: int) -> np.ndarray:
    """:func:`aligned_probability` of one block of rows. As `mine` judges distinct lines, each side's repeated lines
    count once (neighbourhoods, the z's moments) and each distinct pair is judged once (the prior's share), its
    probability given to every copy: a pair gets the same probability however often the block repeats it."""
    from ..mining.margin import both_neighbour_means, distinct_rows, margin_scores
    from ..mining.standout import moments_of, pair_standout

    n = len(x)
    if n == 0:
        return np.zeros(0, np.float32)
    (fx, ix), (fy, iy) = distinct_rows(texts[0]), distinct_rows(texts[1])
    x, y = np.ascontiguousarray(x[fx], np.float32), np.ascontiguousarray(y[fy], np.float32)
    _, first, inverse = np.unique(ix * len(fy) + iy, return_index=True, return_inverse=True)
    s, t = ix[first], iy[first]  # the distinct pairs, as rows of the distinct lines x, y
    cos = (x[s] * y[t]).sum(1)
    mean_x, mean_y = both_neighbour_means(x, y, k)
    margin = margin_scores(cos, mean_x[s], mean_y[t], "ratio")
    p = np.zeros(len(first), np.float32)
    ok = margin >= float(stage.languages[lang]["floor"])
    if ok.any():
        s, t = s[ok], t[ok]
        z = pair_standout(cos[ok], s, t, lambda i: x[i], lambda i: y[i], moments_of(x), moments_of(y))
        rows = np.arange(n, dtype=np.int64)
        ps, pt = Pieces.of(rows, texts[0], None, src_pieces), Pieces.of(rows, texts[1], None, tgt_pieces)
        X = stage.pair_features(lang, ps, pt, fx[s], fy[t], margin[ok], cos[ok], z, src_is_english)
        p[ok] = stage.adjusted(lang, X)
    return p[inverse.reshape(-1)]


def check_prob_options(chunk_lines: int, judge_lines: int, k: int, sif: bool, option: str) -> None:
    """ConfigError, before any work, for options the second stage's probability (``option``, as the command names
    it) cannot take: ``sif`` (it judges the model's plain embeddings), ``k`` neighbours other than the k its
    margins were trained with (MineConfig's), or chunks and blocks of sizes that do not hold PROB_MIN_PAIRS pairs
    or more whenever the input does: a chunk's blocks are at least half of ``judge_lines``, and the last chunk at
    least half of ``chunk_lines`` (:func:`bitextmine.parallel.joined_tail`)."""
    if sif:
        raise ConfigError(f"--sif with {option}: the second stage judges the model's plain embeddings, on which it "
                          "was trained; drop --sif (it weighs the cosine and margin scores only)")
    if k != MineConfig.k:
        raise ConfigError(f"--k {k} with the second stage's probability: it was trained on margins over "
                          f"{MineConfig.k} neighbours; leave --k at {MineConfig.k}")

    for option, value in (("--chunk-lines", chunk_lines), ("--judge-lines", judge_lines)):
        if value < 2 * PROB_MIN_PAIRS:
            raise ConfigError(f"{option} {value}: the second stage judges each pair among at least {PROB_MIN_PAIRS} "
                              f"pairs given together; expected {2 * PROB_MIN_PAIRS} or more")
