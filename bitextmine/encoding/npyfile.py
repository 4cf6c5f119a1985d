"""Streaming ``.npy`` files written in place: a header whose row count is rewritten at the end, and rows
written at any offset by several processes at once (each with its own :class:`RowWriter`)."""

from __future__ import annotations

import errno
import os
from typing import Any

import numpy as np

_COUNT_WIDTH = 20  # digits reserved for the row count so the header can be rewritten in place


def npy_header(count: int, dim: int, dtype: np.dtype) -> bytes:
    """An .npy (version 1.0) header for a C-order (count, dim) array of ``dtype``; its length does not depend
    on ``count`` (so it can be rewritten in place once the count is known)."""
    descr = np.lib.format.dtype_to_descr(np.dtype(dtype))
    shape = f"({str(count).rjust(_COUNT_WIDTH)}, {dim})"
    d = "{'descr': %r, 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    body_len = len(d) + 1
    total = 10 + body_len
    pad = (64 - total % 64) % 64
    d = d + " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + len(d).to_bytes(2, "little") + d.encode("latin1")


def new_npy(path: str, dim: int, dtype: np.dtype) -> int:
    """Create ``path`` with an .npy header for rows of ``dim`` (its count rewritten by :func:`finish_npy`);
    returns the header length, where the rows start."""
    header = npy_header(0, dim, dtype)
    with open(path, "wb") as f:
        f.write(header)
    return len(header)


def finish_npy(path: str, count: int, dim: int, dtype: np.dtype) -> None:
    """Rewrite the header of a file made by :func:`new_npy` with its final row count."""
    with open(path, "r+b") as f:
        f.write(npy_header(count, dim, dtype))


_ALIGN = 4096  # O_DIRECT offsets, lengths and buffers: a multiple of the device's block size (4096 covers 512)
_STAGE_BYTES = 4 << 20  # page-aligned staging buffer for direct writes
_DIRECT_MIN = 16 * _ALIGN  # shorter writes go through the page cache


class RowWriter:
    """Writes rows of an ``.npy`` body in place (at any row, from any number of processes, each with its
    own writer), every byte exactly once.

    The page-aligned middle of each write goes straight to the disk (``O_DIRECT``): on a CPU that is
    also tokenising, copying 1.2 KB per sentence into freshly allocated page-cache pages costs as much as
    a quarter of the work (measured 2.9 us/sentence buffered vs 0.2 us direct, docs/benchmarks.md). The
    unaligned ends (at most a page each, shared with the neighbouring rows) go through the page cache,
    so no page is written both ways. File systems without ``O_DIRECT`` (tmpfs, some network file
    systems) or with larger blocks are written through the page cache, detected on the first failure.
    """

    def __init__(self, path: str, header_len: int, *, direct: bool = True):
        self.header_len = header_len
        self.fd = os.open(path, os.O_WRONLY)
        self.dfd = -1
        if direct and hasattr(os, "O_DIRECT"):
            try:
                self.dfd = os.open(path, os.O_WRONLY | os.O_DIRECT)
            except OSError:
                self.dfd = -1
        self._stage: Any = None

    def write(self, row: int, x: np.ndarray) -> int:
        """Write ``x`` (n, dim) at row ``row``; returns n."""
        x = np.ascontiguousarray(x)
        data = memoryview(x).cast("B")
        start = self.header_len + row * (x.shape[1] * x.itemsize if x.ndim == 2 else 0)
        end = start + len(data)
        a, b = -(-start // _ALIGN) * _ALIGN, end // _ALIGN * _ALIGN
        if self.dfd < 0 or b - a < _DIRECT_MIN:
            _pwrite_all(self.fd, data, start)
            return len(x)
        _pwrite_all(self.fd, data[: a - start], start)
        _pwrite_all(self.fd, data[b - start :], b)
        if self._stage is None:
            import mmap

            self._stage = mmap.mmap(-1, _STAGE_BYTES)  # anonymous maps are page-aligned
        with memoryview(self._stage) as stage:  # released whatever happens: close() can then unmap the stage
            pos = a
            while pos < b:
                n = min(b - pos, _STAGE_BYTES)
                stage[:n] = data[pos - start : pos - start + n]
                try:
                    with stage[:n] as part:
                        _pwrite_all(self.dfd, part, pos)
                except OSError as e:
                    if e.errno != errno.EINVAL:
                        raise
                    os.close(self.dfd)  # this file system takes no direct writes of this alignment
                    self.dfd = -1
                    _pwrite_all(self.fd, data[pos - start : b - start], pos)
                    break
                pos += n
        return len(x)

    def close(self) -> None:
        for fd in (self.fd, self.dfd):
            if fd >= 0:
                os.close(fd)
        self.fd = self.dfd = -1
        if self._stage is not None:
            try:
                self._stage.close()
            except BufferError:  # a failed write's traceback still holds a view of it: freed with the traceback
                pass
            self._stage = None


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while len(data):
        n = os.pwrite(fd, data, offset)
        data, offset = data[n:], offset + n
