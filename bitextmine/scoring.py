"""Scoring given pairs: each ``src<TAB>tgt`` line gets a score of its two sides appended as a last column.

The score is the cosine (streaming: lines are read, scored and written in batches, so memory does not
grow with the input), or LASER's "score" mode (Artetxe & Schwenk 2019): the margin of each pair's cosine
against the k nearest neighbours of its source among all targets of the file and of its target among all
sources. The margin needs every line before the first score, so both columns are encoded batch by batch
into float32 ``.npy`` files in a temporary directory (``TMPDIR``; 2 x lines x dim x 4 bytes, removed
afterwards), searched memory-mapped in one exact pass for both directions
(:func:`bitextmine.search.exact.knn_both`), and the input is read a second time to write the lines in
order (stdin is kept in the temporary directory for that). Memory holds a few numbers per line, never
the texts.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from contextlib import nullcontext
from typing import Callable, Iterable, Iterator, TextIO

import numpy as np

from .config import SCORE_MARGINS, ColumnsConfig, EncodeConfig, MineConfig, ScoreConfig, options_set
from .corpus import iter_lines, parse_tsv_line, read_once
from .encoding.npyfile import finish_npy, new_npy
from .encoding.pipeline import Encoder
from .errors import ConfigError, CorpusError
from .model import Model


def cosine_pairs(src: list[str], tgt: list[str], encoder: Encoder) -> np.ndarray:
    """Cosine similarity of aligned texts: float32 (n,)."""
    xs = encoder.encode_batch(src)
    xt = encoder.encode_batch(tgt)
    return (xs * xt).sum(1)


def score_lines(lines: Iterable[str], model: Model, *, name: str = "<stdin>", scol: int = 1, tcol: int = 2,
                config: EncodeConfig = EncodeConfig()) -> Iterable[tuple[str, float]]:
    """Yield (line, cosine) for each TSV line, in order. Raises CorpusError for a line without the columns."""
    enc = Encoder(model, config)
    batch: list[str] = []
    src: list[str] = []
    tgt: list[str] = []
    for i, line in enumerate(lines, 1):
        s, t = parse_tsv_line(line, name=name, lineno=i, scol=scol, tcol=tcol)
        batch.append(line)
        src.append(s)
        tgt.append(t)
        if len(batch) >= config.batch_size:
            yield from zip(batch, cosine_pairs(src, tgt, enc).tolist())
            batch, src, tgt = [], [], []
    if batch:
        yield from zip(batch, cosine_pairs(src, tgt, enc).tolist())


def margin_score_lines(path: str, model: Model, *, scol: int = 1, tcol: int = 2,
                       config: EncodeConfig = EncodeConfig(), score: ScoreConfig = ScoreConfig(margin="ratio"),
                       mine: MineConfig = MineConfig(), columns: ColumnsConfig | None = None
                       ) -> Iterator[tuple[str, float]]:
    """Yield (line, margin score) for each TSV line of ``path`` (``-`` = stdin), in order: LASER's "score" mode.

    For line i with sides x_i, y_i: ``margin_scores(cos(x_i, y_i), m_x[i], m_y[i], score.margin)``, where
    m_x[i] is the mean cosine of x_i's ``score.k`` nearest neighbours among the distinct targets of the file and
    m_y[i] that of y_i's among the distinct sources (float32 embeddings, exact search; ``mine`` gives its block and
    candidate sizes): copies of a line do not crowd each other's neighbourhoods, as in ``mine`` and ``filter``
    (four copies of a pair gave it a ratio margin of exactly 1). A Parquet or JSONL ``path`` gives its rows as TSV lines (:func:`input_lines`, with
    ``columns``; then scol and tcol are ignored). Raises CorpusError for a line without the columns (before
    anything is yielded), ConfigError for a margin other than ratio or distance.
    """
    from .device import resolve_device
    from .mining.margin import both_neighbour_means, margin_scores

    if score.margin not in SCORE_MARGINS[1:]:
        raise ConfigError(f"margin {score.margin!r}: expected {' or '.join(SCORE_MARGINS[1:])} (or none: the cosine)")
    if score.k < 1:
        raise ConfigError(f"k {score.k}: expected at least 1 neighbour")
    with tempfile.TemporaryDirectory(prefix="bitextmine-score-") as tmp:
        spool = os.path.join(tmp, "input.txt") if read_once(path) else None  # stdin, a pipe: read once
        xs_path, xt_path = os.path.join(tmp, "src.npy"), os.path.join(tmp, "tgt.npy")
        lines, scol, tcol = input_lines(path, columns, scol, tcol)
        cos, keys = _encode_columns(path, lines(), model, xs_path, xt_path, spool, scol=scol, tcol=tcol,
                                    config=config)
        if len(cos) == 0:
            return
        (x, inv_x), (y, inv_y) = (_distinct(p, k, tmp) for p, k in ((xs_path, keys[0]), (xt_path, keys[1])))
        mean_x, mean_y = both_neighbour_means(x, y, score.k, candidates=mine.candidates, block_rows=mine.block_size,
                                              device=resolve_device(config.device))
        mean_x, mean_y = mean_x[inv_x], mean_y[inv_y]
        del x, y
        scores = margin_scores(cos, mean_x, mean_y, score.margin).tolist()
        yield from _paired(lines() if spool is None else _spooled(spool), scores, path)


def _distinct(path: str, keys: np.ndarray, tmp: str, block: int = 65536) -> tuple[np.ndarray, np.ndarray]:
    """(the rows of the .npy ``path`` of distinct lines, memory-mapped: ``path`` itself when every line is distinct,
    else a copy of each line's first row written to ``tmp`` block by block; int64 (n,): each row's index among them)
    from the lines' ``keys`` uint64 (n,) (:func:`_line_key`)."""
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    x = np.load(path, mmap_mode="r")
    if len(first) == len(keys):
        return x, np.arange(len(keys))
    order = np.argsort(first)  # the distinct lines in the order of their first rows
    rows = first[order]
    out = os.path.join(tmp, "distinct-" + os.path.basename(path))
    new_npy(out, x.shape[1], x.dtype)
    with open(out, "ab") as f:
        for a in range(0, len(rows), block):
            f.write(np.ascontiguousarray(x[rows[a:a + block]]).tobytes())
    finish_npy(out, len(rows), x.shape[1], x.dtype)
    position = np.empty(len(order), np.int64)
    position[order] = np.arange(len(order))
    return np.load(out, mmap_mode="r"), position[inverse.reshape(-1)]


def _line_key(text: str) -> int:
    """A 64-bit digest of a side's text: lines are distinct when their texts differ (compared exactly, as `mine`
    compares them), at 8 bytes a line whatever their length."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def _paired(lines: Iterable[str], scores: list, path: str) -> Iterator[tuple[str, float]]:
    """(line, score) for the lines of the second read of ``path``; CorpusError when it gives another number of lines
    than the first read did (the input changed between the two reads)."""
    n = 0
    for n, line in enumerate(lines, 1):
        if n > len(scores):
            break
        yield line, scores[n - 1]
    if n != len(scores):
        more = "more" if n > len(scores) else f"{n:,}"
        raise CorpusError(f"{'<stdin>' if path == '-' else path}: {len(scores):,} lines were scored, the second read "
                          f"gave {more}: the input changed while it was scored; score a file that stays as it is")


def input_lines(path: str, columns: ColumnsConfig | None, scol: int = 1, tcol: int = 2):
    """(a function giving the TSV lines of ``path``, source column, target column): a text file's lines
    with ``scol``/``tcol``; a Parquet or JSONL input's rows as ``[id<TAB>]src<TAB>tgt`` lines
    (:func:`bitextmine.tabular.tsv_lines`: the id with ``columns.id_col``) with the columns they land in."""
    from .tabular import check_pair_options, table_kind, tsv_lines

    check_pair_options(path, columns, scol, tcol)
    if table_kind(path) is None:
        return (lambda: iter_lines(path)), scol, tcol
    columns = columns or ColumnsConfig()
    pair, id_col = columns.pair(path), columns.id_col or None
    return (lambda: tsv_lines(path, pair, id_col)), 1 + bool(id_col), 2 + bool(id_col)


def _encode_columns(path: str, lines: Iterable[str], model: Model, xs_path: str, xt_path: str, spool: str | None, *, scol: int, tcol: int,
                    config: EncodeConfig) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Encode the source and target columns of ``lines`` (the TSV lines of ``path``) batch by batch into float32 .npy files
    ``xs_path``/``xt_path`` (n, dim), copying the lines to ``spool`` when given; returns (the pairs' cosines float32 (n,),
    (each source's and each target's :func:`_line_key` uint64 (n,)))."""
    enc = Encoder(model, config)
    name = "<stdin>" if path == "-" else path
    dim, dtype = model.dim, np.dtype(np.float32)
    cos: list[np.ndarray] = []
    keys: tuple[list, list] = ([], [])
    n = 0
    new_npy(xs_path, dim, dtype)  # headers rewritten with the count at the end; rows appended after them
    new_npy(xt_path, dim, dtype)
    with open(xs_path, "ab") as fs, open(xt_path, "ab") as ft, \
            (open(spool, "w", encoding="utf-8", newline="\n") if spool else nullcontext()) as fl:

        def flush(src: list[str], tgt: list[str]) -> None:
            xs, xt = enc.encode_batch(src), enc.encode_batch(tgt)
            fs.write(np.ascontiguousarray(xs, np.float32).tobytes())
            ft.write(np.ascontiguousarray(xt, np.float32).tobytes())
            cos.append((xs * xt).sum(1))
            keys[0].append(np.fromiter(map(_line_key, src), np.uint64, len(src)))
            keys[1].append(np.fromiter(map(_line_key, tgt), np.uint64, len(tgt)))

        src: list[str] = []
        tgt: list[str] = []
        for i, line in enumerate(lines, 1):
            s, t = parse_tsv_line(line, name=name, lineno=i, scol=scol, tcol=tcol)
            src.append(s)
            tgt.append(t)
            if spool:
                fl.write(line + "\n")
            if len(src) >= config.batch_size:
                flush(src, tgt)
                n += len(src)
                src, tgt = [], []
        if src:
            flush(src, tgt)
            n += len(src)
    finish_npy(xs_path, n, dim, dtype)
    finish_npy(xt_path, n, dim, dtype)
    if not cos:
        return np.zeros(0, np.float32), (np.zeros(0, np.uint64), np.zeros(0, np.uint64))
    return np.concatenate(cos), (np.concatenate(keys[0]), np.concatenate(keys[1]))


def _spooled(path: str) -> Iterator[str]:
    """The lines :func:`_encode_columns` copied to ``path``, without their line ends."""
    with open(path, encoding="utf-8", newline="\n") as f:
        for line in f:
            yield line[:-1]


def prob_score_lines(path: str, model: Model, *, config: EncodeConfig = EncodeConfig(),
                     score: ScoreConfig = ScoreConfig(margin="prob"),
                     columns: ColumnsConfig | None = None) -> Iterator[tuple[str, float]]:
    """Yield (line, probability of translation) for each TSV line of ``path`` (``-`` = stdin), in order: the
    model's second stage for score.src_lang/score.tgt_lang (:func:`bitextmine.judge.aligned.aligned_probability`)
    over chunks of score.chunk_lines lines (a last chunk of fewer than half that joins the one before), as ``filter
    --score prob`` judges them. Raises CorpusError for a line without the columns or an input of fewer than
    PROB_MIN_PAIRS lines, ConfigError when the model has no second stage for the languages, or for --sif, another
    k, chunks or blocks too small (:func:`bitextmine.judge.aligned.check_prob_options`)."""
    from .filtering.pipeline import judged_language
    from .judge.aligned import aligned_probability, check_prob_options
    from .mining.calibrated import PIVOT
    from .parallel import joined_tail, numbered_chunks

    check_prob_options(score.chunk_lines, score.judge_lines, score.k, config.sif, "--margin prob")
    lang = judged_language(model, score.src_lang or None, score.tgt_lang or None, "--margin prob")
    assist = None
    if score.assist:
        from .assist import assist_for

        assist = assist_for(score.assist, (score.src_lang or None, score.tgt_lang or None))
    stage = model.second_stage if assist is None else model.second_stage.unmapped()  # what the assist joins
    read, scol, tcol = input_lines(path, columns)
    enc = Encoder(model, config)
    name = "<stdin>" if path == "-" else path
    for lines, start in joined_tail(numbered_chunks(read(), score.chunk_lines), score.chunk_lines // 2):
        cols = [parse_tsv_line(line, name=name, lineno=start + i, scol=scol, tcol=tcol) for i, line in enumerate(lines)]
        src, tgt = [c[0] for c in cols], [c[1] for c in cols]
        pieces = [model.tokenizer.encode(side, threads=config.threads) for side in (src, tgt)]
        p = aligned_probability(enc.embed_flat(*pieces[0]), enc.embed_flat(*pieces[1]), *pieces, (src, tgt),
                                stage, lang, score.src_lang == PIVOT, score.k, score.judge_lines)
        if assist is not None:
            from .assist import join_aligned

            p = join_aligned(p, src, tgt, assist)
        yield from zip(lines, p.tolist())


MARGIN_USES = {"none": (), "ratio": ("k",), "distance": ("k",),
         "prob": ("k", "chunk_lines", "judge_lines", "src_lang", "tgt_lang", "assist")}  # ScoreConfig's fields per margin


def check_score_options(score: ScoreConfig) -> None:
    """ConfigError for a ScoreConfig field set (not its default) that ``score.margin`` does not use, which would
    be ignored without a word (--k with the cosine, --src-lang without --margin prob)."""
    if score.margin not in MARGIN_USES:
        raise ConfigError(f"--margin {score.margin}: expected one of {', '.join(MARGIN_USES)}")
    unused = options_set(score, [n for n in MARGIN_USES["prob"] if n not in MARGIN_USES[score.margin]])
    if unused:
        raise ConfigError(f"{', '.join(unused)}: not used by --margin {score.margin}; drop them or choose the margin "
                          "that uses them (k: ratio, distance, prob; the others: prob)")


def score_file(path: str, out: TextIO, model: Model, *, config: EncodeConfig = EncodeConfig(),
               score: ScoreConfig = ScoreConfig(), columns: ColumnsConfig | None = None,
               progress: Callable[[int], None] | None = None) -> int:
    """Score ``path`` (``-`` = stdin, gzip transparent) into ``out`` as ``line<TAB>score`` (6 decimals); returns
    the number of lines written. ``score.margin`` none: the cosine (:func:`score_lines`, streaming); ratio or
    distance: the margin score (:func:`margin_score_lines`). A Parquet or JSONL ``path`` is read as the
    lines ``[id<TAB>]src<TAB>tgt`` of its ``columns`` (src_col, tgt_col, id_col: :func:`input_lines`)."""
    check_score_options(score)
    n = 0
    name = "<stdin>" if path == "-" else path
    if score.margin == "none":
        lines, scol, tcol = input_lines(path, columns)
        scored = score_lines(lines(), model, name=name, scol=scol, tcol=tcol, config=config)
    elif score.margin == "prob":
        scored = prob_score_lines(path, model, config=config, score=score, columns=columns)
    else:
        scored = margin_score_lines(path, model, config=config, score=score, columns=columns)
    for line, cos in scored:
        out.write(f"{line}\t{cos:.6f}\n")
        n += 1
        if progress and n % 10000 == 0:
            progress(10000)
    return n
