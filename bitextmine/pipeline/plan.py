r"""Stage plan: line-exact chunks of an input file, read back one at a time.

A chunk is ``chunk_lines`` consecutive lines (the last may be shorter): byte range, first line number
(1-based) and line count. ``\n`` is the only line break, a ``\r`` before it is dropped and a UTF-8 byte
order mark at the start is skipped, as :func:`bitextmine.corpus.iter_lines` reads files, so line i of
the plan is line i everywhere. A compressed input (gzip, xz, zstd) or standard input (``-``) cannot be read
by byte range: its chunks are written out decompressed into the work directory while planning.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

from ..corpus import GZIP_MAGIC, XZ_MAGIC, ZSTD_MAGIC, decode_block, iter_blocks, open_binary
from .workdir import WorkDir, atomic_path, commit, load_json, save_json, verifies

PLAN_FILE = "plan.json"


def _compressed(path: str) -> bool:
    with open(path, "rb") as f:
        head = f.read(6)
    return head[:2] == GZIP_MAGIC or head[:6] == XZ_MAGIC or head[:4] == ZSTD_MAGIC


def _split(block: bytes, need: int) -> int:
    """Byte length of the first ``need`` lines of ``block`` (every line ending with a newline)."""
    ends = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
    return int(ends[need - 1]) + 1


def plan_side(work: WorkDir, side: str, path: str, chunk_lines: int) -> dict:
    """Plan ``path`` into chunks of ``chunk_lines`` lines under ``side``; returns the plan (also written to
    ``side/plan.json``): {"input": {"path": absolute path or "-", "sha256": of the decompressed text},
    "lines": n, "chunks": [{"start", "end", "first_line", "lines", "file"}]} ("file": the decompressed chunk
    inside the work directory, or null). A plan already there that verifies, with its chunk files, is returned
    as it is: the caller checks that the input is the one it was made from (:meth:`WorkDir.begin`)."""
    out = work.path(side, PLAN_FILE)
    if verifies(out):
        plan = load_json(out)
        if all(verifies(work.path(c["file"])) for c in plan["chunks"] if c["file"]):
            return plan
    stdin = path == "-"
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
            with open(tmp, "wb") as g:
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
    fp = {"path": "-" if stdin else os.path.abspath(path), "sha256": h.hexdigest()}
    plan = {"input": fp, "lines": first_line - 1, "chunks": chunks}
    save_json(out, plan)
    return plan


def read_chunk(work: WorkDir, plan: dict, c: int) -> list[str]:
    """The lines of chunk ``c`` of ``plan``, without line ends (CorpusError naming the line for bad UTF-8)."""
    chunk = plan["chunks"][c]
    if chunk["file"]:
        with open(work.path(chunk["file"]), "rb") as f:
            data = f.read()
    else:
        with open(plan["input"]["path"], "rb") as f:
            f.seek(chunk["start"])
            data = f.read(chunk["end"] - chunk["start"])
    return decode_block(data, name=plan["input"]["path"], first_line=chunk["first_line"])
