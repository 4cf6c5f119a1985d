"""Mining translation pairs from two monolingual sides (Artetxe & Schwenk 2019).

k nearest neighbours in both directions, margin scores, then one of the retrieval modes:
  forward    each source with its best-scoring target candidate
  backward   each target with its best-scoring source candidate
  intersect  pairs found by both forward and backward
  union      pairs found by either
  max        forward and backward candidates together, best score first, each sentence used at most once
The threshold applies in every mode. Exact duplicate lines on a side are embedded once and keep all
their line numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence, TextIO

import numpy as np

from .. import __version__
from ..config import MODES, EncodeConfig, MineConfig
from ..corpus import file_checksum, read_lines
from ..errors import ConfigError
from ..search.exact import knn_both
from ..search.index import knn, recall_at_k, resolve_index
from .margin import candidate_scores
from ..filtering.rules import check_pair


@dataclass
class Pairs:
    """Mined pairs sorted by score descending: src, tgt int64 (m,) row indices; score, cosine float32 (m,)."""

    src: np.ndarray
    tgt: np.ndarray
    score: np.ndarray
    cosine: np.ndarray
    info: dict = field(default_factory=dict)  # the index used per direction; recall@k when checked

    def __len__(self) -> int:
        return len(self.score)


def _sorted(src: np.ndarray, tgt: np.ndarray, score: np.ndarray, cos: np.ndarray) -> Pairs:
    # descending score; ties by source then target index so the order is reproducible
    order = np.lexsort((tgt, src, -score.astype(np.float64)))
    return Pairs(src[order].astype(np.int64), tgt[order].astype(np.int64), score[order].astype(np.float32),
                 cos[order].astype(np.float32))


def greedy_one_to_one(src: np.ndarray, tgt: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Indices of the candidates that greedy 1:1 selection keeps (best score first, each endpoint once).

    src, tgt int64 (c,), score float (c,). Equal to looping over candidates in descending score (ties:
    lower candidate index first) and keeping those whose two endpoints are both unused. Vectorised:
    each round keeps every remaining candidate that ranks first at both of its endpoints.
    """
    order = np.lexsort((np.arange(len(score)), -np.asarray(score, np.float64)))
    s, t = src[order], tgt[order]
    alive = np.ones(len(order), bool)
    keep: list[np.ndarray] = []
    while alive.any():
        pos = np.flatnonzero(alive)  # ascending rank
        _, first_s = np.unique(s[pos], return_index=True)
        _, first_t = np.unique(t[pos], return_index=True)
        best_s = np.zeros(len(pos), bool)
        best_s[first_s] = True
        best_t = np.zeros(len(pos), bool)
        best_t[first_t] = True
        chosen = pos[best_s & best_t]
        keep.append(chosen)
        used_s = np.zeros(s.max() + 1, bool)
        used_t = np.zeros(t.max() + 1, bool)
        used_s[s[chosen]] = True
        used_t[t[chosen]] = True
        alive[pos[used_s[s[pos]] | used_t[t[pos]]]] = False
    return np.sort(order[np.concatenate(keep)]) if keep else np.zeros(0, np.int64)


def mine_embeddings(x: np.ndarray, y: np.ndarray, *, config: MineConfig = MineConfig(),
                    progress: Callable[[int], None] | None = None) -> Pairs:
    """Mine pairs between source rows x float (n, d) and target rows y float (m, d), L2-normalised.

    Returns Pairs (indices into x and y) with score >= config.threshold, sorted by score descending.
    """
    if config.mode not in MODES:
        raise ConfigError(f"mode {config.mode!r}: expected one of {', '.join(MODES)}")
    if config.k < 1:
        raise ConfigError(f"k {config.k}: expected k >= 1")
    n, m = len(x), len(y)
    empty = Pairs(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros(0, np.float32))
    if n == 0 or m == 0:
        return empty
    Dxy, Ixy, Dyx, Iyx, info = neighbours(x, y, config, progress)
    if config.recall_check:
        info["recall"] = [recall_at_k(x, y, Ixy, config.recall_check, seed=config.seed, device=config.device),
                          recall_at_k(y, x, Iyx, config.recall_check, seed=config.seed, device=config.device)]
    mean_x = Dxy.mean(1)
    mean_y = Dyx.mean(1)
    fwd = candidate_scores(Dxy, Ixy, mean_x, mean_y, config.margin)  # (n, k)
    bwd = candidate_scores(Dyx, Iyx, mean_y, mean_x, config.margin)  # (m, k)
    fj = fwd.argmax(1)
    rows_f = np.arange(n)
    f = (rows_f, Ixy[rows_f, fj], fwd[rows_f, fj], Dxy[rows_f, fj])  # src, tgt, score, cosine
    bj = bwd.argmax(1)
    rows_b = np.arange(m)
    b = (Iyx[rows_b, bj], rows_b, bwd[rows_b, bj], Dyx[rows_b, bj])
    if config.mode == "forward":
        s, t, sc, cos = f
    elif config.mode == "backward":
        s, t, sc, cos = b
    elif config.mode == "intersect":
        # a target is the backward choice of one source only, so this map is one-to-one
        back_of_tgt = np.full(m, -1, np.int64)
        back_of_tgt[b[1]] = b[0]
        both = back_of_tgt[f[1]] == f[0]
        s, t, sc, cos = (a[both] for a in f)
    else:
        s, t, sc, cos = (np.concatenate([u, v]) for u, v in zip(f, b))
        if config.mode == "union":
            _, keep = np.unique(s.astype(np.int64) * m + t, return_index=True)
        else:  # max
            keep = greedy_one_to_one(s, t, sc)
        s, t, sc, cos = s[keep], t[keep], sc[keep], cos[keep]
    ok = (sc >= config.threshold) & (cos >= config.min_cosine)
    pairs = _sorted(s[ok], t[ok], sc[ok], cos[ok])
    pairs.info = info
    return pairs


def neighbours(x: np.ndarray, y: np.ndarray, config: MineConfig = MineConfig(), progress=None):
    """k nearest neighbours of x's rows among y's and of y's among x's, with the index config asks for.

    x float (n, d), y float (m, d). Returns (Dxy float32 (n, k'), Ixy int64, Dyx float32 (m, k''), Iyx int64,
    info) as :func:`bitextmine.index.knn` gives them per direction; info: the index per direction, and for
    exact search the precision of its tiles and the rows searched again. Exact search on both sides is
    one pass over the similarity matrix (:func:`bitextmine.exact.knn_both`); progress gets n + m in all.
    """
    info: dict = {"index": [resolve_index(config.index, len(y), config.auto_flat_max),
                            resolve_index(config.index, len(x), config.auto_flat_max)]}
    if info["index"] == ["flat", "flat"]:
        from ..device import resolve_device

        Dxy, Ixy, Dyx, Iyx, more = knn_both(
            x, y, config.k, candidates=config.candidates, block_rows=config.block_size, shard_rows=config.shard_rows,
            device=resolve_device(config.device), precision=config.precision, progress=progress)
        info.update(more)
        return Dxy, Ixy, Dyx, Iyx, info
    Dxy, Ixy = _knn(x, y, info["index"][0], config, progress)
    Dyx, Iyx = _knn(y, x, info["index"][1], config, progress)
    return Dxy, Ixy, Dyx, Iyx, info


def _knn(q: np.ndarray, d: np.ndarray, index: str, config: MineConfig, progress) -> tuple[np.ndarray, np.ndarray]:
    """k-NN of q's rows among d's with ``index`` and config's index settings."""
    return knn(q, d, config.k, block_size=config.block_size, device=config.device, index=index, nlist=config.nlist,
               nprobe=config.nprobe, train_sample=config.train_sample, pq_m=config.pq_m, seed=config.seed,
               shard_rows=config.shard_rows, progress=progress)


@dataclass
class UniqueLines:
    """Distinct non-empty lines of a side: texts (u,), first row int64 (u,), all 1-based line numbers."""

    texts: list[str]
    first: np.ndarray
    line_ids: list[list[int]] = field(default_factory=list)
    n_lines: int = 0
    n_empty: int = 0

    @classmethod
    def of(cls, lines: Sequence[str]) -> "UniqueLines":
        index: dict[str, int] = {}
        texts: list[str] = []
        first: list[int] = []
        ids: list[list[int]] = []
        n_empty = 0
        for i, line in enumerate(lines):
            if not line.strip():
                n_empty += 1
                continue
            u = index.get(line)
            if u is None:
                index[line] = len(texts)
                texts.append(line)
                first.append(i)
                ids.append([i + 1])
            else:
                ids[u].append(i + 1)
        return cls(texts, np.asarray(first, np.int64), ids, len(lines), n_empty)


@dataclass
class MineStats:
    src_lines: int
    tgt_lines: int
    src_unique: int
    tgt_unique: int
    src_empty: int
    tgt_empty: int
    pairs: int
    signature: str
    rejected: dict = field(default_factory=dict)  # candidates dropped by the rules, per reason
    info: dict = field(default_factory=dict)  # index per direction, recall@k when checked (Pairs.info)


def mine_files(
    src_path: str,
    tgt_path: str,
    out: TextIO,
    *,
    model=None,
    config: MineConfig = MineConfig(),
    encode_config: EncodeConfig = EncodeConfig(),
    src_emb: str | None = None,
    tgt_emb: str | None = None,
    ids: bool = False,
    marked: str | None = None,
    rules=None,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> MineStats:
    """Mine two text files and write ``score<TAB>src<TAB>tgt`` lines (plus ``<TAB>src_ids<TAB>tgt_ids``
    with comma-separated 1-based line numbers when ``ids``) to ``out``, best score first.

    ``src_emb``/``tgt_emb`` are precomputed embedding files from ``bitextmine encode`` for the same
    text and model; they are checked against the text's checksum and the model's fingerprint.
    Empty lines cannot be mined and are counted in the returned stats. ``marked`` ("src" or "tgt")
    names the side in the marked language of a separate-vocabulary model. ``rules`` (a RuleConfig)
    drops candidates that break a rule of :func:`bitextmine.rules.check_pair` (with the languages for
    the script and langdetect rules); the drops are counted per reason in the stats.
    """
    from ..encoding import Encoder, load_embeddings, side_configs, vectors_fingerprint
    from ..model import load_model

    side_cfgs = side_configs(encode_config, marked, ("src", "tgt"))
    model = model or load_model(None)
    sides = []
    for side_config, path, emb_path in zip(side_cfgs, (src_path, tgt_path), (src_emb, tgt_emb)):
        lines = read_lines(path)
        u = UniqueLines.of(lines)
        if emb_path:
            x = load_embeddings(emb_path, model=model, text_sha256=file_checksum(path), count=len(lines),
                                sif=side_config.sif, marked=side_config.marked)
            if len(u.first) != len(x) or np.any(u.first != np.arange(len(x))):  # else: stays memory-mapped
                x = np.asarray(x[u.first], np.float32)
        else:
            x = Encoder(model, side_config).encode_all(u.texts, (lambda n: progress("encode", n)) if progress else None)
        sides.append((u, x))
    (us, xs), (ut, xt) = sides
    pairs = mine_embeddings(xs, xt, config=config, progress=(lambda n: progress("search", n)) if progress else None)
    rejected: dict[str, int] = {}
    written = 0
    for s, t, sc in zip(pairs.src, pairs.tgt, pairs.score):
        if rules is not None:
            why = check_pair(us.texts[s], ut.texts[t], rules, src_lang, tgt_lang)
            if why:
                rejected[why] = rejected.get(why, 0) + 1
                continue
        written += 1
        row = f"{sc:.6f}\t{us.texts[s]}\t{ut.texts[t]}"
        if ids:
            row += "\t" + ",".join(map(str, us.line_ids[s])) + "\t" + ",".join(map(str, ut.line_ids[t]))
        out.write(row + "\n")
    fp = vectors_fingerprint(model, sif=encode_config.sif) + (f"+marked-{marked}" if marked else "")
    sig = (f"bitextmine {__version__}|model:{fp}|k:{config.k}|margin:{config.margin}|"
           f"mode:{config.mode}|threshold:{config.threshold:g}|min-cosine:{config.min_cosine:g}")
    if rules is not None:
        sig += f"|rules:{src_lang or '-'}-{tgt_lang or '-'}"
    if pairs.info.get("index") != ["flat", "flat"]:
        sig += f"|index:{'/'.join(pairs.info['index'])}:nprobe{config.nprobe}"
    return MineStats(us.n_lines, ut.n_lines, len(us.texts), len(ut.texts), us.n_empty, ut.n_empty,
                     written, sig, rejected, pairs.info)

