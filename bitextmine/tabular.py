"""Parquet and JSONL inputs and Parquet outputs: a text column (or two, and an id column) streamed from
files, folders of shards or globs, without loading a file whole.

An input is *tabular* when its name ends in ``.parquet`` or ``.jsonl``/``.ndjson`` (JSONL also
compressed: ``.gz``, ``.xz``, ``.zst``, read as :func:`bitextmine.corpus.open_binary` reads text), when
it is a folder holding such files (its shards, in name order), or a glob matching them (``'data/*.parquet'``,
in name order). Everything else is text, read as before. Parquet is read one row group at a time
(pyarrow, ``pip install 'bitextmine[parquet]'``); JSONL one line at a time, one JSON object per line.

Rows are numbered from 1 in each file (for JSONL, row = line). A text or id column must hold a value on
every row: a null (JSON ``null`` or a missing key) is refused, never dropped, as is a non-string text
column (ids may be strings or integers), a column that is not there, or a line that is not a JSON object;
each a :class:`bitextmine.errors.CorpusError` of one line naming the file, the row or line and the column.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass
from typing import BinaryIO, Iterator, Sequence

from .errors import ConfigError, CorpusError, MissingDependencyError

JSONL_SUFFIXES = (".jsonl", ".ndjson")
COMPRESSED = ("", ".gz", ".xz", ".zst")
BATCH_ROWS = 8192  # JSONL rows per batch (Parquet batches are its row groups)


def _suffix_kind(name: str) -> str | None:
    name = name.lower()
    if name.endswith(".parquet"):
        return "parquet"
    if any(name.endswith(s + c) for s in JSONL_SUFFIXES for c in COMPRESSED):
        return "jsonl"
    return None


def _is_glob(path: str) -> bool:
    return any(ch in path for ch in "*?[") and not os.path.exists(path)


def table_kind(path: str) -> str | None:
    """"parquet" or "jsonl" for a tabular input (a file by its suffix, a folder of such files, a glob of
    them), None for text (and for ``-``, standard input, always text)."""
    if path == "-":
        return None
    if os.path.isdir(path):
        kinds = {_suffix_kind(n) for n in os.listdir(path)} - {None}
        return kinds.pop() if len(kinds) == 1 else ("mixed" if kinds else None)
    if _is_glob(path):
        kinds = {_suffix_kind(p) for p in glob.glob(path)}
        return _suffix_kind(path) or (kinds.pop() if len(kinds) == 1 else None)
    return _suffix_kind(path)


def check_pair_options(path: str, columns, scol: int, tcol: int) -> None:
    """ConfigError when the column options given for the pairs input ``path`` do not fit its kind: named columns
    (``columns``: a ColumnsConfig or None; --src-col, --tgt-col, --id-col) for a text TSV, or column numbers
    (``scol``, ``tcol``) other than 1 and 2 for a Parquet or JSONL input; either would be ignored."""
    if table_kind(path) is None:
        named = [f"--{o.replace('_', '-')} {getattr(columns, o)}" for o in ("src_col", "tgt_col", "id_col")
                 if columns is not None and getattr(columns, o)]
        if named:
            raise ConfigError(f"{path}: {', '.join(named)}: named columns need a Parquet or JSONL input; a text "
                              "file's pairs are its tab-separated columns (filter: --scol and --tcol; score: the first "
                              "two)")
    elif (scol, tcol) != (1, 2):
        raise ConfigError(f"{path}: --scol and --tcol number a TSV's columns; a Parquet or JSONL input names its "
                          "columns with --src-col and --tgt-col")
    elif columns is not None:
        option_of: dict = {}
        for o in ("src_col", "tgt_col", "id_col"):
            name = getattr(columns, o)
            if name in option_of:
                raise ConfigError(f"{path}: {option_of[name]} and --{o.replace('_', '-')} both name the column "
                                  f"{name!r}; expected a column each")
            if name:
                option_of[name] = f"--{o.replace('_', '-')}"


def shards(path: str) -> list[str]:
    """The files of a tabular input in reading order: the file itself, a folder's Parquet or JSONL files
    (hidden files and others skipped) or a glob's matches, sorted by name. CorpusError when there are none
    or a folder mixes Parquet and JSONL."""
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if not n.startswith((".", "_")) and _suffix_kind(n))
        kinds = {_suffix_kind(n) for n in names}
        if len(kinds) > 1:
            raise CorpusError(f"{path}: a folder with both Parquet and JSONL files; expected shards of one format")
        if not names:
            raise CorpusError(f"{path}: no .parquet or .jsonl files in this folder; expected shards of a table")
        return [os.path.join(path, n) for n in names]
    if _is_glob(path):
        found = sorted(p for p in glob.glob(path) if os.path.isfile(p))
        if not found:
            raise CorpusError(f"{path}: no file matches this pattern; expected Parquet or JSONL shards")
        kinds = {_suffix_kind(p) for p in found}
        if len(kinds) != 1 or None in kinds:
            raise CorpusError(f"{path}: matches {', '.join(os.path.basename(p) for p in found[:3])}...; expected "
                              "only Parquet or only JSONL files")
        return found
    if not os.path.exists(path):
        raise CorpusError(f"{path}: no such file; expected a readable Parquet or JSONL file")
    return [path]


def check_tabular(path: str) -> str:
    """The kind of a tabular input (ConfigError for text)."""
    kind = table_kind(path)
    if kind not in ("parquet", "jsonl"):
        shards(path)  # a folder or glob's own error first
        raise ConfigError(f"{path}: not a Parquet or JSONL input; expected a name ending in .parquet or .jsonl")
    return kind


def pyarrow():
    """The pyarrow package, or MissingDependencyError naming the pip command."""
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise MissingDependencyError("Parquet input and output need pyarrow: pip install 'bitextmine[parquet]'") \
            from None
    return pyarrow


@dataclass
class Batch:
    """Consecutive rows of one file: ``columns`` maps each asked column to its values (list of str; ids
    str or int), ``first_row`` the 1-based row of the first in its file."""

    file: str
    first_row: int
    columns: dict

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0


def iter_batches(path: str, text_columns: Sequence[str], id_column: str | None = None) -> Iterator[Batch]:
    """Batches of the ``text_columns`` (strings) and ``id_column`` (strings or integers) of every shard of
    ``path`` in order: one per Parquet row group, or per BATCH_ROWS JSONL lines. CorpusError (one line:
    file, row or line, column) for a missing column, a null, a value of another type, bad JSON."""
    kind = check_tabular(path)
    cols = list(dict.fromkeys([*text_columns, *([id_column] if id_column else [])]))
    for f in shards(path):
        if kind == "parquet":
            yield from _parquet_batches(f, cols, set(text_columns))
        else:
            yield from _jsonl_batches(f, cols, set(text_columns))


def iter_column(path: str, column: str) -> Iterator[str]:
    """The values of the string ``column`` of a tabular input, row by row (:func:`iter_batches`)."""
    for b in iter_batches(path, [column]):
        yield from b.columns[column]


def iter_texts(path: str, column: str) -> Iterator[str]:
    """The texts of an input: ``column`` of a tabular one, else the lines of a text file."""
    if table_kind(path) is None:
        from .corpus import iter_lines

        return iter_lines(path)
    return iter_column(path, column)


def tsv_lines(path: str, columns: Sequence[str], id_column: str | None = None) -> Iterator[str]:
    """Each row as one TSV line without its end: the id (when ``id_column``) then ``columns``. CorpusError
    for a value holding a line break, or a tab when there are several columns, which a TSV line cannot carry."""
    return (line for line, _, _ in _placed_lines(path, columns, id_column))


def _placed_lines(path: str, columns: Sequence[str], id_column: str | None = None) -> Iterator[tuple[str, str, int]]:
    """(:func:`tsv_lines`' line, its shard's file, its row there from 1) of each row."""
    names = ([id_column] if id_column else []) + list(columns)
    for b in iter_batches(path, columns, id_column):
        vals = [[str(v) for v in b.columns[c]] if c == id_column else b.columns[c] for c in names]
        for i, row in enumerate(zip(*vals)):
            line = "\t".join(row)
            if (len(row) > 1 and line.count("\t") != len(row) - 1) or "\n" in line or "\r" in line:
                bad = next(c for c, v in zip(names, row) if (len(row) > 1 and "\t" in v) or "\n" in v or "\r" in v)
                raise CorpusError(f"{b.file} row {b.first_row + i} column {bad!r}: a tab or line break inside the "
                                  "value, which a TSV line cannot hold; expected single-line text without tabs")
            yield line, b.file, b.first_row + i


def line_blocks(path: str, column: str, hasher=None, block_lines: int = BATCH_ROWS
                ) -> Iterator[tuple[bytes, int, str]]:
    r"""(block, the row of its first line in its shard, that shard's file) of the column as UTF-8 text, one value
    per ``\n``-ended line, as :func:`bitextmine.corpus.iter_blocks` gives a text file's: the bytes of the
    equivalent text file (``hasher`` updated with them), so its sha256 is that file's. A block holds rows of one
    shard, so that an error in it names the shard and its row. CorpusError for a value with a line break."""
    lines: list[str] = []
    first, file = 1, ""

    def block() -> bytes:
        data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
        if hasher is not None:
            hasher.update(data)
        return data

    for line, f, row in _placed_lines(path, [column]):
        if lines and (len(lines) >= block_lines or f != file):
            yield block(), first, file
            lines = []
        if not lines:
            first, file = row, f
        lines.append(line)
    if lines:
        yield block(), first, file


# --- Parquet ---------------------------------------------------------------------------------------------

def _string_type(t) -> bool:
    pa = pyarrow()
    return pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view",
                                                                            lambda _: False)(t)


def _usable(t, text: bool) -> bool:
    pa = pyarrow()
    if pa.types.is_dictionary(t):
        t = t.value_type
    return _string_type(t) or (not text and pa.types.is_integer(t))


def parquet_file(f: str):
    """An open pyarrow ParquetFile (CorpusError for a file that is not Parquet)."""
    pa = pyarrow()
    try:
        return pa.parquet.ParquetFile(f)
    except (pa.ArrowInvalid, OSError) as e:
        raise CorpusError(f"{f}: not a readable Parquet file ({e}); expected Parquet data") from None


def check_parquet_columns(f: str, schema, cols: Sequence[str], text_columns: set) -> None:
    """CorpusError naming file and column for a column ``schema`` lacks, holds twice or holds in another type."""
    names = schema.names
    for c in cols:
        if names.count(c) > 1:
            raise CorpusError(f"{f} column {c!r}: {names.count(c)} columns of that name; expected one")
        if c not in names:
            raise CorpusError(f"{f} row 1 column {c!r}: no such column (columns: {', '.join(names)}); expected "
                              "the column named by --column/--src-col/--tgt-col/--id-col")
        t = schema.field(c).type
        if not _usable(t, c in text_columns):
            want = "a string column" if c in text_columns else "a string or integer column"
            raise CorpusError(f"{f} row 1 column {c!r}: type {t}; expected {want}")


def read_parquet_rows(f: str, pf, group: int, cols: Sequence[str], first_row: int,
                      text_columns: set) -> dict:
    """Columns ``cols`` of row group ``group`` of the ParquetFile ``pf`` as lists (``first_row``: the
    1-based row of the group's first row, for errors). CorpusError for a null, or a row group that cannot be read
    (corrupt pages, a string that is not UTF-8)."""
    import pyarrow as pa

    try:
        t = pf.read_row_group(group, columns=list(cols))
        return _rows_of(f, t, cols, first_row, text_columns)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as e:
        last = first_row + pf.metadata.row_group(group).num_rows - 1
        raise CorpusError(f"{f} rows {first_row}-{last}: row group {group} cannot be read ({e}); expected a complete "
                          "Parquet file with UTF-8 strings") from None


def _rows_of(f: str, t, cols: Sequence[str], first_row: int, text_columns: set) -> dict:
    out = {}
    for c in cols:
        a = t.column(c)
        if a.null_count:
            import numpy as np

            i = int(np.flatnonzero(a.is_null().to_numpy(zero_copy_only=False))[0])
            kind = "text" if c in text_columns else "id"
            raise CorpusError(f"{f} row {first_row + i} column {c!r}: null; expected a {kind} on every row "
                              "(drop or fill the nulls first)")
        out[c] = a.to_pylist()
    return out


def _parquet_batches(f: str, cols: list, text_columns: set) -> Iterator[Batch]:
    pf = parquet_file(f)
    check_parquet_columns(f, pf.schema_arrow, cols, text_columns)
    row = 1
    for g in range(pf.metadata.num_row_groups):
        values = read_parquet_rows(f, pf, g, cols, row, text_columns)
        batch = Batch(f, row, values)
        row += pf.metadata.row_group(g).num_rows
        if len(batch):
            yield batch


def parquet_groups(f: str) -> list[int]:
    """Rows per row group of the Parquet file ``f``."""
    md = parquet_file(f).metadata
    return [md.row_group(g).num_rows for g in range(md.num_row_groups)]


# --- JSONL -----------------------------------------------------------------------------------------------

_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
               float: "a number", type(None): "null"}


def parse_jsonl_line(line: str, *, name: str, lineno: int, cols: Sequence[str], text_columns: set) -> list:
    """The values of ``cols`` in one JSONL line (CorpusError naming file, line and column otherwise)."""
    try:
        obj = json.loads(line)
    except ValueError as e:
        what = "an empty line" if not line.strip() else f"invalid JSON ({e})"
        raise CorpusError(f"{name} line {lineno}: {what}; expected one JSON object per line") from None
    except RecursionError:
        raise CorpusError(f"{name} line {lineno}: a JSON value nested too deeply to read; expected one flat JSON "
                          "object per line") from None
    if not isinstance(obj, dict):
        raise CorpusError(f"{name} line {lineno}: {_JSON_TYPES.get(type(obj), type(obj).__name__)}; expected one "
                          "JSON object per line")
    out = []
    for c in cols:
        if c not in obj:
            keys = ", ".join(list(obj)[:10])
            raise CorpusError(f"{name} line {lineno} column {c!r}: no such key (keys: {keys}); expected the column "
                              "named by --column/--src-col/--tgt-col/--id-col on every line")
        v = obj[c]
        text = c in text_columns
        if not isinstance(v, str) and (text or not isinstance(v, int) or isinstance(v, bool)):
            kind = "text" if text else "id"
            want = "a string" if text else "a string or integer"
            if v is None:
                raise CorpusError(f"{name} line {lineno} column {c!r}: null; expected a {kind} on every line "
                                  "(drop or fill the nulls first)")
            raise CorpusError(f"{name} line {lineno} column {c!r}: {_JSON_TYPES.get(type(v), type(v).__name__)}; "
                              f"expected {want}")
        if isinstance(v, str) and not v.isascii():
            _check_surrogates(v, f"{name} line {lineno} column {c!r}")
        out.append(v)
    return out


def _check_surrogates(v: str, where: str) -> None:
    """CorpusError naming ``where`` for a lone surrogate in ``v`` (a JSON escape such as \\ud800 decodes to one):
    no UTF-8 text holds it, and writing it out fails later."""
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as e:
        raise CorpusError(f"{where}: a lone surrogate \\u{ord(v[e.start]):04x} at character {e.start + 1}; expected "
                          "valid Unicode text") from None


def _jsonl_batches(f: str, cols: list, text_columns: set) -> Iterator[Batch]:
    from .corpus import decode_block, iter_blocks

    pending: list[list] = []
    first = 1
    for block, first_line in iter_blocks(f, block_bytes=1 << 20):
        for i, line in enumerate(decode_block(block, name=f, first_line=first_line)):
            pending.append(parse_jsonl_line(line, name=f, lineno=first_line + i, cols=cols, text_columns=text_columns))
            if len(pending) >= BATCH_ROWS:
                yield Batch(f, first, dict(zip(cols, map(list, zip(*pending)))))
                first += len(pending)
                pending = []
    if pending:
        yield Batch(f, first, dict(zip(cols, map(list, zip(*pending)))))


# --- Parquet output --------------------------------------------------------------------------------------

def output_format(path: str | None) -> str:
    """"parquet" for an output name ending in .parquet, else "tsv"."""
    return "parquet" if path not in (None, "-") and str(path).lower().endswith(".parquet") else "tsv"


class ParquetRows:
    """Rows written to a binary stream as Parquet with a fixed schema, ``rows`` rows per row group.

    ``fields``: (name, type) with type one of "string", "float32", "float64", "int64", "list<int64>",
    "list<string>". :meth:`add` takes a dict of equal-length lists; :meth:`close` writes the footer
    (an empty table still gets its schema)."""

    TYPES = ("string", "float32", "float64", "int64", "list<int64>", "list<string>", "binary")

    def __init__(self, out: BinaryIO, fields: Sequence[tuple[str, str]], rows: int = 65536):
        pa = pyarrow()
        self.pa = pa
        types = {"string": pa.string(), "float32": pa.float32(), "float64": pa.float64(), "int64": pa.int64(),
                 "list<int64>": pa.list_(pa.int64()), "list<string>": pa.list_(pa.string()), "binary": pa.binary()}
        self.schema = pa.schema([(n, types[t]) for n, t in fields])
        self.writer = pa.parquet.ParquetWriter(out, self.schema)
        self.rows = rows
        self.buf: dict = {n: [] for n, _ in fields}

    def add(self, columns: dict) -> None:
        for n, v in columns.items():
            self.buf[n].extend(v)
        if len(next(iter(self.buf.values()))) >= self.rows:
            self._flush()

    def _flush(self) -> None:
        n = len(next(iter(self.buf.values())))
        if n:
            self.writer.write_table(self.pa.table(self.buf, schema=self.schema), row_group_size=self.rows)
            self.buf = {k: [] for k in self.buf}

    def close(self) -> None:
        self._flush()
        self.writer.close()
