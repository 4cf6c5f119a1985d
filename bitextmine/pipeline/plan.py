r"""Stage plan: line-exact chunks of an input file, read back one at a time.

A chunk is ``chunk_lines`` consecutive lines (the last may be shorter): byte range, first line number
(1-based) and line count. ``\n`` is the only line break, a ``\r`` before it is dropped and a UTF-8 byte
order mark at the start is skipped, as :func:`bitextmine.corpus.iter_lines` reads files, so line i of
the plan is line i everywhere. A compressed input (gzip, xz, zstd) or standard input (``-``) cannot be read
by byte range: its chunks are written out decompressed into the work directory while planning.

A Parquet input (a file, folder of shards or glob, :mod:`bitextmine.tabular`) is planned from its row groups:
a chunk is ``chunk_lines`` consecutive rows, as pieces [shard, row group, first, end] read in place (so Ray
workers read the shards themselves); a JSONL input's chunks are written out as JSON lists of the column's
values. Row i of a table is line i of its plan, and its sha256 that of the equivalent text file (each value
followed by ``\n``).
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np

from ..corpus import GZIP_MAGIC, XZ_MAGIC, ZSTD_MAGIC, decode_block, iter_blocks, open_binary, read_once
from .workdir import WorkDir, atomic_path, commit, load_json, save_json, verifies, writing

PLAN_FILE = "plan.json"


def _compressed(path: str) -> bool:
    with open(path, "rb") as f:
        head = f.read(6)
    return head[:2] == GZIP_MAGIC or head[:6] == XZ_MAGIC or head[:4] == ZSTD_MAGIC


def _split(block: bytes, need: int) -> int:
    """Byte length of the first ``need`` lines of ``block`` (every line ending with a newline)."""
    ends = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
    return int(ends[need - 1]) + 1


def plan_side(work: WorkDir, side: str, path: str, chunk_lines: int, column: str = "text",
              id_column: str | None = None) -> dict:
    """Plan ``path`` into chunks of ``chunk_lines`` lines under ``side``; returns the plan (also written to
    ``side/plan.json``): {"input": {"path": absolute path or "-", "sha256": of the decompressed text},
    "lines": n, "chunks": [{"start", "end", "first_line", "lines", "file"}]} ("file": the decompressed chunk
    inside the work directory, or null). A plan already there that verifies, with its chunk files, is returned
    as it is: the caller checks that the input is the one it was made from (:meth:`WorkDir.begin`).
    A Parquet or JSONL input gives its ``column`` (and ``id_column``, read back by :func:`read_chunk_ids`);
    its plan's "input" also has "kind", "shards", "column", "id_column"; Parquet chunks have "parts"."""
    from ..tabular import table_kind

    out = work.path(side, PLAN_FILE)
    if verifies(out):
        plan = load_json(out)
        if all(verifies(work.path(c["file"])) for c in plan["chunks"] if c["file"]):
            return plan
    kind = table_kind(path)
    if kind is not None:
        plan = _plan_table(work, side, path, chunk_lines, column, id_column)
        save_json(out, plan)
        return plan
    if id_column:
        from ..errors import ConfigError

        raise ConfigError(f"{path}: --id-col {id_column} needs a Parquet or JSONL input; a text file has no columns")
    stdin = read_once(path)  # standard input or a pipe: its chunks are copied into the work directory
    if not stdin:
        open_binary(path).close()  # the corpus reader's errors for a missing or unreadable file
    compressed = stdin or _compressed(path)
    h = hashlib.sha256()
    bom = False
    if not compressed:
        with open(path, "rb") as f:
            bom = f.read(3) == b"\xef\xbb\xbf"
    chunks: list[dict] = []
    pos = 3 if bom else 0
    cur: list[bytes] = []
    cur_lines, cur_start, first_line = 0, pos, 1

    def close(end: int) -> None:
        nonlocal cur, cur_lines, cur_start, first_line
        c = {"start": cur_start, "end": end, "first_line": first_line, "lines": cur_lines, "file": None}
        if compressed:
            c["file"] = os.path.join(side, f"chunk-{len(chunks):06d}.txt")
            tmp = atomic_path(work.path(c["file"]))
            with writing(tmp) as g:
                g.writelines(cur)
            commit(tmp, work.path(c["file"]))
        chunks.append(c)
        first_line += cur_lines
        cur, cur_lines, cur_start = [], 0, end

    for block, _ in iter_blocks(path, hasher=h):
        while block:
            n = block.count(b"\n") + (not block.endswith(b"\n"))
            take = min(n, chunk_lines - cur_lines)
            cut = len(block) if take == n else _split(block, take)
            cur.append(block[:cut]) if compressed else None
            cur_lines += take
            pos += cut
            block = block[cut:]
            if cur_lines == chunk_lines:
                close(pos)
    if cur_lines:
        close(pos)
    fp = {"path": "-" if path == "-" else os.path.abspath(path), "sha256": h.hexdigest()}
    plan = {"input": fp, "lines": first_line - 1, "chunks": chunks}
    save_json(out, plan)
    return plan


def read_chunk(work: WorkDir, plan: dict, c: int) -> list[str]:
    """The lines of chunk ``c`` of ``plan``, without line ends (CorpusError naming the line for bad UTF-8); for a
    Parquet or JSONL plan, the values of its text column."""
    if plan["input"].get("kind"):
        return _table_column(work, plan, c, plan["input"]["column"])
    chunk = plan["chunks"][c]
    if chunk["file"]:
        with open(work.path(chunk["file"]), "rb") as f:
            data = f.read()
    else:
        with open(plan["input"]["path"], "rb") as f:
            f.seek(chunk["start"])
            data = f.read(chunk["end"] - chunk["start"])
    return decode_block(data, name=plan["input"]["path"], first_line=chunk["first_line"])


def _plan_table(work: WorkDir, side: str, path: str, chunk_lines: int, column: str, id_column: str | None) -> dict:
    """The plan of a Parquet or JSONL input (see :func:`plan_side`); every row's text and id checked here."""
    from ..tabular import check_parquet_columns, check_tabular, iter_batches, parquet_file, read_parquet_rows, shards

    kind = check_tabular(path)
    files = [os.path.abspath(f) for f in shards(path)]
    cols = [column] + ([id_column] if id_column else [])
    h = hashlib.sha256()
    chunks: list[dict] = []
    parts: list[list] = []
    filled = 0
    first_line = 1

    def hash_texts(texts: list[str]) -> None:
        h.update(("\n".join(texts) + "\n").encode("utf-8", "surrogatepass"))

    def close(file: str | None) -> None:
        nonlocal parts, filled, first_line
        chunks.append({"start": 0, "end": 0, "first_line": first_line, "lines": filled, "file": file,
                       **({"parts": parts} if kind == "parquet" else {})})
        first_line += filled
        parts, filled = [], 0

    if kind == "parquet":
        for fi, f in enumerate(files):
            pf = parquet_file(f)
            check_parquet_columns(f, pf.schema_arrow, cols, {column})
            row = 1
            for g in range(pf.metadata.num_row_groups):
                n = pf.metadata.row_group(g).num_rows
                if n:
                    hash_texts(read_parquet_rows(f, pf, g, cols, row, {column})[column])
                a = 0
                while a < n:
                    take = min(n - a, chunk_lines - filled)
                    parts.append([fi, g, a, a + take])
                    filled += take
                    a += take
                    if filled == chunk_lines:
                        close(None)
                row += n
        if filled:
            close(None)
    else:
        buf: dict = {"text": [], "id": []}

        def flush() -> None:
            name = os.path.join(side, f"chunk-{len(chunks):06d}.json")
            tmp = atomic_path(work.path(name))
            with open(tmp, "w", encoding="utf-8") as g:
                json.dump({k: v for k, v in buf.items() if k == "text" or id_column}, g, ensure_ascii=False)
            commit(tmp, work.path(name))
            buf["text"], buf["id"] = [], []
            close(name)

        for b in iter_batches(path, [column], id_column):
            texts, ids = b.columns[column], b.columns[id_column] if id_column else None
            hash_texts(texts)
            a = 0
            while a < len(texts):
                take = min(len(texts) - a, chunk_lines - filled)
                buf["text"].extend(texts[a:a + take])
                if ids is not None:
                    buf["id"].extend(ids[a:a + take])
                filled += take
                a += take
                if filled == chunk_lines:
                    flush()
        if filled:
            flush()
    fp = {"path": _source_path(path), "sha256": h.hexdigest(), "kind": kind, "shards": files, "column": column,
          "id_column": id_column}
    return {"input": fp, "lines": first_line - 1, "chunks": chunks}


def _source_path(path: str) -> str:
    """The input as written, made absolute (a glob stays a glob)."""
    return os.path.abspath(path)


def _table_column(work: WorkDir, plan: dict, c: int, column: str) -> list:
    """The values of ``column`` in chunk ``c`` of a Parquet or JSONL plan."""
    chunk, src = plan["chunks"][c], plan["input"]
    if src["kind"] == "jsonl":
        with open(work.path(chunk["file"]), encoding="utf-8") as f:
            return json.load(f)["text" if column == src["column"] else "id"]
    from ..tabular import parquet_file

    out: list = []
    files: dict = {}
    for fi, g, a, b in chunk["parts"]:
        if fi not in files:
            files[fi] = parquet_file(src["shards"][fi])
        col = files[fi].read_row_group(g, columns=[column]).column(0)
        out.extend(col.slice(a, b - a).to_pylist())
    return out


def read_chunk_ids(work: WorkDir, plan: dict, c: int) -> list:
    """The id column's values (str or int) of chunk ``c`` of a plan made with an id column."""
    return _table_column(work, plan, c, plan["input"]["id_column"])
