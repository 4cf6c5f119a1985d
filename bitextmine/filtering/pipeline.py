"""Filtering noisy parallel TSV: rules, language checks, similarity scores; nothing lost.

Every input line ends in exactly one place: the output (kept, unchanged byte for byte, optionally with
appended columns) or the rejects (unchanged, with a reason column), so ``lines in = kept + rejected``.
With ``annotate`` every line goes to the output with its reason (``keep`` for kept lines), and there
are no rejects.

The input is read in chunks of ``chunk_lines`` lines. Each chunk is checked and scored by a worker
process (decoding, rules, language checks, tokenising, embedding, scoring); this process keeps the
input order, drops repeated pairs (first kept wins), and writes. Chunks depend only on the input, so
the output is the same for any number of workers. Margin scores compare each pair with the k nearest
neighbours of its sides among the other side's sentences *of the same chunk*: a larger chunk gives a
denser neighbourhood and margins closer to mining over the whole corpus; the same chunk size gives the
same scores. With a margin or probability score, a last chunk of fewer than half ``chunk_lines`` lines joins
the chunk before it, so that no pair is judged among a few last lines.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter, deque
from dataclasses import asdict, dataclass, field, replace
from typing import BinaryIO, Callable, Iterator

import numpy as np

from ..config import PROB_MIN_PAIRS, SCORES, ColumnsConfig, FilterConfig, RuleConfig, options_set
from ..corpus import MAX_LINE_BYTES, DamagedInput, open_binary
from ..errors import ConfigError, CorpusError
from ..mining.calibrated import PIVOT
from ..parallel import joined_tail, ordered_map
from .rules import Deduplicator, check_pair, check_rules, text_key

BOM = b"\xef\xbb\xbf"


@dataclass
class FilterStats:
    """Counts of one run; ``lines_in == kept + rejected`` and ``rejected == sum(reasons.values())``."""

    lines_in: int = 0
    kept: int = 0
    rejected: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    score: str = "cosine"
    min_score: float | None = None
    min_aligned: float | None = None  # the misaligned check's margin floor, None where it did not apply

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class _Chunk:
    lines: list[bytes]  # raw lines with their line ends
    first_line: int
    columns: int  # expected number of columns (most of the first clean lines')
    first_of_file: bool


@dataclass
class _Checked:
    reasons: list  # str or None per line
    scores: np.ndarray  # float32 (n,), nan where not scored
    keys: list  # (src_key, tgt_key) or None per line


def _split(raw: bytes) -> tuple[bytes, bytes]:
    """(body, line end) of a raw line; the end is b"\\r\\n", b"\\n" or b"" (a last line without one)."""
    if raw.endswith(b"\r\n"):
        return raw[:-2], b"\r\n"
    if raw.endswith(b"\n"):
        return raw[:-1], b"\n"
    return raw, b""


def _decode(raw: bytes, first_of_file: bool) -> tuple[str | None, str | None]:
    """(text of the line without its end, None), or (None, the damage reason: nul-byte or invalid-utf8).
    A byte order mark is removed from the first line of a file."""
    body, _ = _split(raw)
    if first_of_file and body.startswith(BOM):
        body = body[3:]
    if b"\x00" in body:
        return None, "nul-byte"
    try:
        return body.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, "invalid-utf8"


def _read_chunks(path: str, n: int, name: str) -> Iterator[tuple[list[bytes], int]]:
    """Chunks of ``n`` raw lines (with their line ends) of ``path`` and the first one's line number; CorpusError
    for a line longer than MAX_LINE_BYTES, read no further than that."""
    f = open_binary(path)
    chunk: list[bytes] = []
    first = 1
    lineno = 0
    try:
        while True:
            try:
                raw = f.readline(MAX_LINE_BYTES + 1)
            except DamagedInput as e:
                raise e.at_line(lineno + 1) from None
            if not raw:
                break
            if len(raw) > MAX_LINE_BYTES:
                raise CorpusError(f"{name} line {lineno + 1}: longer than {MAX_LINE_BYTES // 2**20} MiB; expected "
                                  "one pair of sentences per line (a text file)")
            lineno += 1
            chunk.append(raw)
            if len(chunk) >= n:
                yield chunk, first
                first += len(chunk)
                chunk = []
        if chunk:
            yield chunk, first
    finally:
        if path != "-":
            f.close()


_W: dict = {}


def _worker_init(model, rules: RuleConfig, config: FilterConfig, src_lang, tgt_lang, sif: bool, child: bool) -> None:
    import torch

    if child:
        torch.set_num_threads(1)  # the processes are the parallelism (see parallel.ordered_map)
    embedder = None
    if config.score != "none":
        from ..encoding.embed import SentenceEmbedder

        embedder = SentenceEmbedder(model, sif=sif, device="cpu")
    judged = judged_language(model, src_lang, tgt_lang) if config.score == "prob" else None
    assist = None
    if config.assist:
        from ..assist import choose_assist, resolve_assist

        assist = resolve_assist(choose_assist(config.assist, (src_lang, tgt_lang)))
    _W.update(model=model, rules=rules, config=config, langs=(src_lang, tgt_lang), embedder=embedder, judged=judged,
              aligned=checks_alignment(model, config, src_lang, tgt_lang), assist=assist)


def _check_chunk(chunk: _Chunk) -> _Checked:
    """Decode, apply the rules and score one chunk (runs in a worker)."""
    rules, config = _W["rules"], _W["config"]
    src_lang, tgt_lang = _W["langs"]
    n = len(chunk.lines)
    reasons: list = [None] * n
    keys: list = [None] * n
    texts: list[tuple[int, str, str]] = []
    need = max(config.scol, config.tcol)
    for i, raw in enumerate(chunk.lines):
        text, damage = _decode(raw, i == 0 and chunk.first_of_file)
        if damage:
            reasons[i] = damage
            continue
        cols = text.split("\t")
        if len(cols) < need:
            reasons[i] = "missing-column"
            continue
        if len(cols) != chunk.columns:
            reasons[i] = "column-count"
            continue
        s, t = cols[config.scol - 1], cols[config.tcol - 1]
        why = check_pair(s, t, rules, src_lang, tgt_lang)
        if why:
            reasons[i] = why
            continue
        texts.append((i, s, t))
        keys[i] = (text_key(s), text_key(t))
    scores = np.full(n, np.nan, np.float32)
    if config.score == "prob" and len({(s, t) for _, s, t in texts}) < PROB_MIN_PAIRS:  # too few distinct pairs
        for i, _, _ in texts:
            reasons[i], keys[i] = "unjudged", None
        texts = []
    if texts and _W["embedder"] is not None:
        rows = np.array([i for i, _, _ in texts])
        sc, aligned = _score([s for _, s, _ in texts], [t for _, _, t in texts])
        scores[rows] = sc
        for i, v, a in zip(rows.tolist(), sc.tolist(), aligned.tolist()):
            why = "misaligned" if not a else (
                "low-score" if config.min_score is not None and not v >= config.min_score else None)
            if why:
                reasons[i], keys[i] = why, None
    return _Checked(reasons, scores, keys)


def checks_alignment(model, config: FilterConfig, src_lang: str | None, tgt_lang: str | None) -> bool:
    """Whether misaligned pairs are rejected (config.min_aligned): the score is the cosine or a margin (with
    --score prob the second stage judges the alignment itself, from these margins among its features), and
    the model knows both declared languages (its config's "languages")."""
    known = set(model.config.get("languages") or ()) if model is not None else set()
    return bool(config.min_aligned > 0 and config.score in ("cosine", "margin") and src_lang and tgt_lang and
                src_lang != tgt_lang and {src_lang, tgt_lang} <= known)


SCORE_USES = {"cosine": (), "none": (), "margin": ("k",), "prob": ("k", "judge_lines", "assist")}  # FilterConfig's per score


def _score(src: list[str], tgt: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(the score of each pair: cosine, ratio margin within these pairs (among each side's distinct lines) or
    the second stage's, float32 (n,); whether each is aligned, bool (n,): its ratio margin reaches
    config.min_aligned where the alignment is checked, else True)."""
    model, embedder, config = _W["model"], _W["embedder"], _W["config"]
    src_pieces, tgt_pieces = model.tokenizer.encode(src, threads=1), model.tokenizer.encode(tgt, threads=1)
    x, y = embedder(*src_pieces), embedder(*tgt_pieces)
    cos = (x * y).sum(1)
    margin = None
    if config.score == "margin" or _W["aligned"]:
        from ..mining.margin import distinct_neighbour_means, margin_scores

        margin = margin_scores(cos, *distinct_neighbour_means(x, y, src, tgt, config.k), "ratio")
    aligned = margin >= config.min_aligned if _W["aligned"] else np.ones(len(cos), bool)
    if config.score == "prob":
        from ..judge.aligned import aligned_probability

        stage = model.second_stage if _W["assist"] is None else model.second_stage.unmapped()  # what it joins
        p = aligned_probability(x, y, src_pieces, tgt_pieces, (src, tgt), stage, _W["judged"],
                                _W["langs"][0] == PIVOT, config.k, config.judge_lines)
        if _W["assist"] is not None:
            from ..assist import join_aligned

            p = join_aligned(p, src, tgt, _W["assist"])
        return p, aligned
    return (cos if config.score == "cosine" else margin), aligned


BINARY_MIN_LINES = 8  # an input is refused as binary when at least this many of its first 1,000 lines,
# and more than half of them, are not UTF-8 text (NUL bytes or invalid UTF-8); fewer damaged lines are rejected one by one


HEAD_LINES = 1000  # the first lines that fix a tab-separated input's column count


def _expected_columns(lines: list[bytes], name: str, need: int) -> int:
    """The column count of most of the first HEAD_LINES lines that decode cleanly, among those with ``need``
    columns or more (a stray tab on one line, the first included, makes that line the odd one out; ties: the
    count seen first); a one-line error when the input is binary (see BINARY_MIN_LINES) or when more than half of
    the lines that decode cleanly have too few columns for source and target (fewer are rejected one by one)."""
    head = lines[:HEAD_LINES]
    damaged, counts, first_with = 0, Counter(), {}
    for i, raw in enumerate(head):
        text, damage = _decode(raw, i == 0)
        if damage:
            damaged += 1
            continue
        cols = text.count("\t") + 1
        counts[cols] += 1
        first_with.setdefault(cols, i + 1)
    if damaged >= BINARY_MIN_LINES and damaged * 2 > len(head):
        raise CorpusError(f"{name}: binary data ({damaged} of the first {len(head)} lines are not UTF-8 text); "
                          "expected UTF-8 text, one tab-separated pair per line")
    if not counts:
        return need
    short = {c: n for c, n in counts.items() if c < need}
    if 2 * sum(short.values()) > sum(counts.values()):
        cols = next(c for c in first_with if short.get(c) == max(short.values()))
        raise CorpusError(f"{name} line {first_with[cols]}: {cols} column(s), as most of the first lines; expected at "
                          f"least {need} (the source and target columns; see --scol/--tcol)")
    top = max(n for c, n in counts.items() if c >= need)
    return next(c for c in first_with if c >= need and counts[c] == top)  # ties: the count seen first


def filter_tsv(
    input_path: str,
    out: BinaryIO,
    *,
    model=None,
    rules: RuleConfig = RuleConfig(),
    config: FilterConfig = FilterConfig(),
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    rejects: BinaryIO | None = None,
    annotate: bool = False,
    score_column: bool | None = None,
    sif: bool = False,
    columns: ColumnsConfig | None = None,
    output_format: str = "tsv",
    rejects_format: str = "tsv",
    progress: Callable[[int], None] | None = None,
) -> FilterStats:
    """Filter the TSV ``input_path`` (``-`` = stdin; gz/xz/zst read transparently) into ``out``.

    Kept lines are written unchanged, with the score appended as a last column when ``score_column``
    (default: when there is a score and no ``config.min_score``); rejected lines go to ``rejects``
    with a reason column (see :data:`bitextmine.filtering.rules.REASONS`), or with ``annotate`` to ``out``
    with a reason column (``keep`` for kept lines; ``rejects`` must then be None: ConfigError). A line with
    a column count other than most of the first lines' is rejected as ``column-count``. ``src_lang``/
    ``tgt_lang`` must be codes the language checks in use know (ConfigError listing them). Returns
    FilterStats. Raises CorpusError when the whole input is unusable (binary data, too few columns,
    corrupt or truncated compression), naming the line.

    A Parquet or JSONL input (:mod:`bitextmine.tabular`) is read as the TSV lines ``[id<TAB>]src<TAB>tgt``
    of its ``columns`` (src_col and tgt_col required, id_col optional; config.scol/tcol are then ignored).
    ``output_format`` "parquet" writes ``out`` (``rejects_format``: ``rejects``) as Parquet (:class:`_ParquetLines`): the
    line's columns as strings (named by the input's columns, else col1, col2, ...), then ``score`` (float64,
    with the score column; null where a rejected line has none) and ``reason`` (string: annotate's column,
    and in the rejects).
    """
    if config.score not in SCORES:
        raise ConfigError(f"score {config.score!r}: expected one of {', '.join(SCORES)}")
    if config.min_score is not None and config.score == "none":
        raise ConfigError("--min-score needs a score (--score cosine, margin or prob)")
    if config.chunk_lines < 1:
        raise ConfigError("chunk size must be >= 1 line")
    unused = options_set(config, [n for n in SCORE_USES["prob"] if n not in SCORE_USES[config.score]])
    if unused:
        raise ConfigError(f"{', '.join(unused)}: not used by --score {config.score}; drop them or choose the score "
                          "that uses them (k: margin, prob; judge-lines, assist: prob)")
    if config.scol == config.tcol:
        raise ConfigError(f"--scol and --tcol are both {config.scol}; expected two different columns")
    if annotate and rejects is not None:
        raise ConfigError("--annotate writes every line, rejected ones with their reason, to the output; "
                          "--rejects cannot be used with it (choose one)")
    check_rules(rules, src_lang, tgt_lang)
    if config.score != "none" and model is None:
        from ..loading import load_model

        model = load_model(None)
    if config.score == "prob":
        from ..judge.aligned import check_prob_options

        check_prob_options(config.chunk_lines, config.judge_lines, config.k, sif, "--score prob")
        judged_language(model, src_lang, tgt_lang)
    if config.assist:
        _check_assist(config, src_lang, tgt_lang)
    if score_column is None:
        score_column = config.score != "none" and config.min_score is None
    name = "<stdin>" if input_path == "-" else input_path
    table, names, config = _table_input(input_path, columns, config)
    need = max(config.scol, config.tcol)
    aligned = checks_alignment(model, config, src_lang, tgt_lang)
    stats = FilterStats(score=config.score, min_score=config.min_score, min_aligned=config.min_aligned if aligned else None)
    dedup = Deduplicator(rules)
    read = _read_table_chunks(input_path, config.chunk_lines, table) if table else \
        _read_chunks(input_path, config.chunk_lines, name)
    if config.score in ("margin", "prob") or aligned:  # a neighbourhood of a few last lines: joined to the one before
        read = joined_tail(read, config.chunk_lines // 2)

    def chunks() -> Iterator[_Chunk]:
        head, ahead = [], iter(read)
        if not table:  # the column count looks at the first HEAD_LINES lines, whatever the chunk size
            for item in ahead:
                head.append(item)
                if sum(len(lines) for lines, _ in head) >= HEAD_LINES:
                    break
        columns = len(names) if table else _expected_columns([x for lines, _ in head for x in lines], name, need)
        for lines, first in itertools.chain(head, ahead):
            yield _Chunk(lines, first, columns, first == 1)

    sinks: list = []

    def sink(columns: int):
        if not sinks:
            body = names or [f"col{i}" for i in range(1, columns + 1)]
            sinks.extend([_ParquetLines(out, body, score_column, annotate) if output_format == "parquet" else out,
                          _ParquetLines(rejects, body, False, True) if rejects is not None and
                          rejects_format == "parquet" else rejects])
        return sinks

    import torch

    saved_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for chunk, checked in _pairs_with_results(chunks(), model, rules, config, src_lang, tgt_lang, sif):
            _write(chunk, checked, *sink(chunk.columns), annotate, score_column, dedup, stats)
            if progress:
                progress(len(chunk.lines))
        for s in sink(len(names) or need):
            if s is not None and s is not out and s is not rejects:
                s.close()
    finally:
        torch.set_num_threads(saved_threads)
    return stats


def _check_assist(config: FilterConfig, src_lang: str | None, tgt_lang: str | None) -> None:
    """ConfigError unless the assist joins a second stage's score (--score prob) and knows both languages; the
    assist loaded once here, so a broken one fails before any line is read."""
    from ..assist import assist_for

    if config.score != "prob":
        raise ConfigError(f"--assist {config.assist} joins the second stage's score: it needs --score prob")
    assist_for(config.assist, (src_lang, tgt_lang))


def judged_language(model, src_lang: str | None, tgt_lang: str | None, option: str = "--score prob") -> str:
    """The language (with English) whose second stage scores the pairs; ConfigError, naming the command's
    ``option``, when the languages are not given, neither is English, or the model has no second stage for the
    other."""
    stage = model.second_stage
    if not src_lang or not tgt_lang or PIVOT not in (src_lang, tgt_lang) or src_lang == tgt_lang:
        raise ConfigError(f"{option} needs --src-lang and --tgt-lang, English and another language "
                          f"(given: {src_lang or '-'} and {tgt_lang or '-'})")
    other = tgt_lang if src_lang == PIVOT else src_lang
    if stage is None or other not in stage.languages:
        held = ", ".join(sorted(stage.languages)) if stage else "none"
        raise ConfigError(f"{option}: the model {model.path or ''} has no second stage for {other}-en "
                          f"(it has: {held}); build one with 'bitextmine train --second-stage-only'")
    return other


def _table_input(path: str, columns: ColumnsConfig | None, config: FilterConfig):
    """(the tabular input's (pair columns, id column) or None for text, its column names in line order
    (empty for text), config with scol/tcol pointing at the pair in those lines)."""
    from ..tabular import check_pair_options, table_kind

    check_pair_options(path, columns, config.scol, config.tcol)
    if table_kind(path) is None:
        return None, [], config
    columns = columns or ColumnsConfig()
    pair, id_col = columns.pair(path), columns.id_col or None
    names = ([id_col] if id_col else []) + list(pair)
    return (pair, id_col), names, replace(config, scol=1 + bool(id_col), tcol=2 + bool(id_col))


def _read_table_chunks(path: str, n: int, table) -> Iterator[tuple[list[bytes], int]]:
    """The rows of a tabular input as raw TSV lines (:func:`bitextmine.tabular.tsv_lines`), ``n`` a chunk."""
    from ..parallel import numbered_chunks
    from ..tabular import tsv_lines

    return numbered_chunks((line.encode("utf-8", "surrogatepass") + b"\n" for line in tsv_lines(path, *table)), n)


class _ParquetLines:
    """A binary stream of the lines :func:`_write` writes, stored as Parquet rows: the body's tab-separated
    columns as strings (``names``; a line with fewer columns gets nulls, one with more keeps the rest, tabs
    and all, in the last), then ``score`` float64 (with ``score``; empty = null) and ``reason`` (with
    ``reason``). Bytes that are not UTF-8 (lines rejected as such) are stored as U+FFFD in the columns, and with
    ``reason`` the line's own bytes (its line end left out) in ``raw`` (binary; null for lines that are UTF-8),
    so that such a rejected line can be recovered byte for byte."""

    def __init__(self, out: BinaryIO, names: list[str], score: bool, reason: bool):
        from ..tabular import ParquetRows

        fields = [(c, "string") for c in names] + [("score", "float64")] * score + [("reason", "string")] * reason \
            + [("raw", "binary")] * reason
        self.rows = ParquetRows(out, fields)
        self.names, self.score, self.reason = names, score, reason
        self.buf: list[list] = []

    def write(self, line: bytes) -> None:
        body, _ = _split(line)
        try:
            text, raw = body.decode("utf-8"), None
        except UnicodeDecodeError:
            text, raw = body.decode("utf-8", "replace"), body
        cols: list = text.split("\t")
        tail = []
        if self.reason:
            tail.insert(0, cols.pop())
            # the line as it was read: without the columns written after it (score, reason)
            tail.append(None if raw is None else raw.rsplit(b"\t", int(self.score) + 1)[0])
        if self.score:
            v = cols.pop()
            tail.insert(0, float(v) if v else None)
        k = len(self.names)
        cols = cols[:k - 1] + ["\t".join(cols[k - 1:])] if len(cols) > k else cols + [None] * (k - len(cols))
        self.buf.append(cols + tail)
        if len(self.buf) >= 8192:
            self._flush()

    def _flush(self) -> None:
        if self.buf:
            self.rows.add(dict(zip(self.rows.schema.names, map(list, zip(*self.buf)))))
            self.buf = []

    def close(self) -> None:
        self._flush()
        self.rows.close()


def _pairs_with_results(chunks: Iterator[_Chunk], model, rules, config, src_lang, tgt_lang, sif):
    """(chunk, its _Checked) in input order, checked by worker processes."""
    pending: deque[_Chunk] = deque()

    def feed() -> Iterator[_Chunk]:
        for c in chunks:
            pending.append(c)
            yield c

    results = ordered_map(_check_chunk, feed(), init=_worker_init,
                          init_args=(model, rules, config, src_lang, tgt_lang, sif), workers=config.workers)
    for checked in results:
        yield pending.popleft(), checked


def _write(chunk: _Chunk, checked: _Checked, out: BinaryIO, rejects: BinaryIO | None, annotate: bool,
           score_column: bool, dedup: Deduplicator, stats: FilterStats) -> None:
    reasons = stats.reasons
    for i, raw in enumerate(chunk.lines):
        why = checked.reasons[i]
        if why is None:
            key = checked.keys[i]
            why = dedup.check(*key)
        first = i == 0 and chunk.first_of_file
        stats.lines_in += 1
        if why is None:
            stats.kept += 1
            if score_column or annotate:
                body, end = _split(raw)
                extra = b""
                if score_column:
                    extra += b"\t" + f"{float(checked.scores[i]):.4f}".encode()
                if annotate:
                    extra += b"\tkeep"
                _put(out, body + extra + (end or b"\n"), first)
            else:
                _put(out, raw, first)
            continue
        stats.rejected += 1
        reasons[why] = reasons.get(why, 0) + 1
        body, end = _split(raw)
        tag = b"\t" + why.encode()
        if annotate:
            extra = b""
            if score_column:
                s = checked.scores[i]
                extra = b"\t" + (f"{float(s):.4f}".encode() if np.isfinite(s) else b"")
            _put(out, body + extra + tag + (end or b"\n"), first)
        if rejects is not None:
            _put(rejects, body + tag + (end or b"\n"), first)


def _put(sink: BinaryIO, line: bytes, first_of_file: bool) -> None:
    """Write ``line`` to ``sink``: TSV byte for byte; to Parquet (:class:`_ParquetLines`) the first line of a text
    file without its byte order mark, which is no part of its first value."""
    sink.write(line.removeprefix(BOM) if first_of_file and isinstance(sink, _ParquetLines) else line)


def stats_text(stats: FilterStats) -> str:
    """The run's counts as JSON text (what ``--stats`` writes)."""
    return json.dumps(stats.to_json(), indent=2) + "\n"


def write_stats(stats: FilterStats, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(stats_text(stats))
