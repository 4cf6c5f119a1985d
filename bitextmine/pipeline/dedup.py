"""Stage dedup: the distinct non-empty lines of a side, corpus-wide, with every line number of each.

1. per chunk, a 128-bit hash (BLAKE2b) of each line; blank lines (only whitespace) flagged, never mined;
2. per bucket (lines whose hash falls in it: 1/P of the corpus), each line's first occurrence;
3. per chunk, ``rep``: each line's first occurrence (0-based line; -1 for blank lines), gathered from
   the buckets.

A line is a distinct row when it is its own first occurrence; distinct rows are numbered in line order
(row ids). No process holds more than one chunk or one bucket. Two different lines share a hash with
probability about n^2 / 2^129 (10^-20 for 10^9 lines).
"""

from __future__ import annotations

import hashlib

import numpy as np

from .plan import read_chunk
from .workdir import WorkDir, load_arrays, save_arrays, save_npy


def hash_file(side: str, c: int) -> str:
    return f"{side}/hash-{c:06d}.npz"


def bucket_file(side: str, b: int) -> str:
    return f"{side}/bucket-{b:06d}.npz"


def rep_file(side: str, c: int) -> str:
    return f"{side}/rep-{c:06d}.npy"


def line_hashes(lines) -> np.ndarray:
    """uint64 (n, 2): each line's 128-bit BLAKE2b digest (UTF-8, lone surrogates kept), in two little-endian
    halves: the hashes the dedup stage keeps."""
    digest = b"".join(hashlib.blake2b(s.encode("utf-8", "surrogatepass"), digest_size=16).digest() for s in lines)
    return np.frombuffer(digest, np.uint64).reshape(-1, 2)


def hash_chunk(work: WorkDir, side: str, plan: dict, c: int) -> None:
    """Write chunk c's line hashes: hash uint64 (lines, 2) (:func:`line_hashes`) and blank bool (lines,)."""
    lines = read_chunk(work, plan, c)
    blank = np.fromiter((not s.strip() for s in lines), bool, len(lines))
    save_arrays(work.path(hash_file(side, c)), hash=line_hashes(lines), blank=blank)


def dedup_bucket(work: WorkDir, side: str, plan: dict, b: int, buckets: int) -> None:
    """Write bucket b's lines (int64 (r,), ascending, 0-based) and their first occurrences rep (int64 (r,))."""
    hs, ls = [], []
    for c, chunk in enumerate(plan["chunks"]):
        z = load_arrays(work.path(hash_file(side, c)))
        sel = ~z["blank"] & (z["hash"][:, 0] % np.uint64(buckets) == b)
        hs.append(z["hash"][sel])
        ls.append(chunk["first_line"] - 1 + np.flatnonzero(sel))
    h = np.concatenate(hs) if hs else np.zeros((0, 2), np.uint64)
    line = np.concatenate(ls) if ls else np.zeros(0, np.int64)
    order = np.lexsort((line, h[:, 1], h[:, 0]))  # by hash, then line: each group starts at its first line
    hs_, line_ = h[order], line[order]
    start = np.ones(len(order), bool)
    start[1:] = (hs_[1:] != hs_[:-1]).any(1)
    rep = line_[np.flatnonzero(start)[np.cumsum(start) - 1]]
    back = np.argsort(line_, kind="stable")
    save_arrays(work.path(bucket_file(side, b)), line=line_[back].astype(np.int64), rep=rep[back].astype(np.int64))


def chunk_reps(work: WorkDir, side: str, plan: dict, c: int, buckets: int) -> None:
    """Write chunk c's rep: int64 (lines,), each line's first occurrence (0-based), -1 for blank lines."""
    chunk = plan["chunks"][c]
    a = chunk["first_line"] - 1
    rep = np.full(chunk["lines"], -1, np.int64)
    for b in range(buckets):
        z = load_arrays(work.path(bucket_file(side, b)))
        lo, hi = np.searchsorted(z["line"], [a, a + chunk["lines"]])
        rep[z["line"][lo:hi] - a] = z["rep"][lo:hi]
    save_npy(work.path(rep_file(side, c)), rep)


def firsts(work: WorkDir, side: str, plan: dict, c: int) -> np.ndarray:
    """Chunk c's distinct rows: the 0-based lines, int64 (u,) ascending, that are their own first occurrence."""
    rep = np.load(work.path(rep_file(side, c)))
    lines = plan["chunks"][c]["first_line"] - 1 + np.arange(len(rep))
    return lines[rep == lines]


def row_offsets(work: WorkDir, side: str, plan: dict) -> np.ndarray:
    """int64 (chunks + 1,): the first row id of each chunk (row ids number distinct rows in line order)."""
    counts = [len(firsts(work, side, plan, c)) for c in range(len(plan["chunks"]))]
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def blank_count(work: WorkDir, side: str, plan: dict) -> int:
    return int(sum((np.load(work.path(rep_file(side, c)), mmap_mode="r") < 0).sum() for c in range(len(plan["chunks"]))))
