"""Embeddings from any encoder: precomputed sentence embeddings read without loading them.

Two formats (:class:`bitextmine.config.EmbeddingsConfig`):

* ``npy``: a 2-D float16 or float32 ``.npy``, one row per line of its text. With the sidecar that
  ``bitextmine encode`` writes (``OUT.npy.json``), or a chunked ``encode --chunk-lines`` directory, it is
  read by :func:`bitextmine.encoding.store.load_embeddings`, which checks the model that made it; without a
  sidecar (another encoder's output, ``np.save``) no model is needed or checked.
* ``raw``: LASER's format, a headerless file of float32 rows (float16 with ``fp16``) of ``dim`` values.

Rows are not normalised here: a search by inner product is by cosine only for L2-normalised rows.
"""

from __future__ import annotations

import os

import numpy as np

from ..config import EMB_FORMATS
from ..errors import ConfigError, ModelFormatError
from .store import load_embeddings


def has_sidecar(path: str) -> bool:
    """True when ``path`` is an embedding store of ``bitextmine encode``: a ``.npy`` with its ``.npy.json``
    sidecar, or a chunked directory (its ``manifest.json``). Its model is then checked, so the caller must
    load it and pass it to :func:`open_embeddings`."""
    return os.path.isdir(path) or os.path.isfile(path + ".json")


def embeddings_need_model(paths, fmt: str = "npy") -> bool:
    """Whether any of ``paths`` (format ``fmt``) is checked against a model (:func:`has_sidecar`)."""
    return fmt == "npy" and any(has_sidecar(p) for p in paths)


def open_embeddings(path: str, *, fmt: str = "npy", dim: int = 0, fp16: bool = False, rows: int | None = None,
                    text: str | None = None, model=None, sif: bool = False, marked: bool = False,
                    text_sha256: tuple | None = None) -> np.ndarray:
    """Open precomputed embeddings as a read-only (n, d) array, memory-mapped (not read into memory).

    ``fmt`` "npy": a 2-D float16 or float32 ``.npy`` (its dtype and shape are in its header; ``fp16`` is
    ignored, ``dim`` checked when > 0). With a sidecar (:func:`has_sidecar`), ``model`` (a
    :class:`bitextmine.model.Model`, with ``sif``/``marked`` as encoded) is required and checked through
    :func:`bitextmine.encoding.store.load_embeddings`, which also checks the text it encodes when
    ``text_sha256`` (the sha256s that text may have) is given; a chunked directory is concatenated in memory.
    ``fmt`` "raw": headerless float32 rows (float16 with ``fp16``) of ``dim`` (> 0) values.

    ``rows``: the expected row count (the line count of the text file named ``text``); this opening, which
    checks the file against its text once per run, also reads every row, in blocks, for NaN and infinite
    values (:func:`check_finite`): one such row would otherwise spoil every score it enters. Returns
    float32 or float16 (n, d), read-only. Raises ConfigError for a wrong format, dim, file size or row
    count, or a row that is not finite, ModelFormatError for an unreadable ``.npy`` or a sidecar that does
    not match.
    """
    if fmt not in EMB_FORMATS:
        raise ConfigError(f"embedding format {fmt!r}: expected one of {', '.join(EMB_FORMATS)}")
    if fmt == "raw":
        x = _open_raw(path, dim, fp16, rows)
    elif has_sidecar(path):
        if model is None:
            raise ConfigError(f"{path}: has the sidecar of 'bitextmine encode'; its model is needed to check it")
        x = load_embeddings(path, model=model, sif=sif, marked=marked, text_sha256=text_sha256, text=text or "")
    else:
        x = _open_npy(path)
    if fmt == "npy" and dim > 0 and x.shape[1] != dim:
        raise ConfigError(f"{path}: rows of {x.shape[1]} values; expected --dim {dim}")
    if rows is not None and x.shape[0] != rows:
        raise ConfigError(f"{path}: {x.shape[0]} rows, but {text or 'the text'} has {rows} lines; "
                          "expected one row per line")
    if rows is not None:
        check_finite(x, path)
    if x.flags.writeable:  # a chunked encoding, concatenated in memory
        x.setflags(write=False)
    return x


CHECK_ROWS = 8192  # rows read at a time by check_finite (32 MiB of 1024-d float32)


def check_finite(x: np.ndarray, path: str, *, block: int = CHECK_ROWS) -> None:
    """ConfigError naming ``path`` and the first row (1-based, the line of its text) of x float (n, d) that
    holds a NaN or an infinity; x is read ``block`` rows at a time (a memory map stays on disk)."""
    for a in range(0, len(x), block):
        ok = np.isfinite(x[a:a + block]).all(axis=1)
        if not ok.all():
            row = a + int(np.argmin(ok)) + 1
            raise ConfigError(f"{path} row {row}: NaN or infinite values; expected finite embeddings "
                              f"(row {row} is line {row} of the text)")


def _missing(path: str) -> None:
    if not os.path.exists(path):
        raise ConfigError(f"{path}: no such file; expected embeddings")
    if os.path.isdir(path):
        raise ConfigError(f"{path}: is a directory; expected an embeddings file")


def _open_raw(path: str, dim: int, fp16: bool, rows: int | None = None) -> np.ndarray:
    """A raw file of ``dim``-value rows as a read-only memory map, float16 with ``fp16`` else float32 (``rows``: the
    lines of the text, when known, to tell which fix a float16 file read as float32 needs)."""
    if dim <= 0:
        raise ConfigError(f"{path}: raw embeddings need --dim (the values per row; the file has no header)")
    _missing(path)
    dtype = np.dtype(np.float16 if fp16 else np.float32)
    size = os.path.getsize(path)
    row_bytes = dim * dtype.itemsize
    if size % row_bytes:
        raise ConfigError(f"{path}: {size} bytes is not a whole number of rows of dim {dim} x {dtype.name} "
                          f"({row_bytes} bytes each); check --dim and --fp16")
    n = size // row_bytes
    if n == 0:  # an empty file cannot be memory-mapped
        x = np.zeros((0, dim), dtype)
        x.setflags(write=False)
        return x
    x = np.memmap(path, dtype=dtype, mode="r", shape=(n, dim))
    if not fp16 and looks_like_float16_pairs(x[:PROBE_ROWS]):
        fix = "--fp16" if rows is not None and size == rows * dim * 2 else f"--fp16 and --dim {2 * dim}"
        raise ConfigError(f"{path}: its values read as float32 are pairs of float16 values (LASER's --fp16 "
                          f"output); expected float32 rows of dim {dim}: give {fix}")
    return x


PROBE_ROWS = 256  # rows of a raw float32 file looked at by looks_like_float16_pairs


def looks_like_float16_pairs(x: np.ndarray) -> bool:
    """Whether x float32 (n, d) is float16 data read as float32: each value's low 16 bits, read as a float16,
    is then a finite value of an embedding's size (1e-6 to 100), where the low bits of real float32 values are
    near-random (a random float16 is that small or large, or not finite, a third of the time). Needs at least
    1,000 values whose low bits are not all zero (rounded values such as 0.5 have none); else False."""
    low = (np.ascontiguousarray(x, np.float32).view(np.uint32) & 0xFFFF).astype(np.uint16).view(np.float16)
    low = np.abs(low[low != 0].astype(np.float32))
    if low.size < 1000:
        return False
    return float(np.mean(np.isfinite(low) & (low >= 1e-6) & (low <= 100))) > 0.99


def _open_npy(path: str) -> np.ndarray:
    """A sidecar-less .npy as a read-only memory map; checks it is 2-D float16/float32."""
    _missing(path)
    try:
        x = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ModelFormatError(f"{path}: not a readable .npy file ({e})") from None
    if x.ndim != 2:
        raise ConfigError(f"{path}: shape {x.shape}; expected 2-D embeddings (rows, dim)")
    if x.dtype not in (np.float16, np.float32):
        raise ConfigError(f"{path}: dtype {x.dtype}; expected float16 or float32")
    return x
