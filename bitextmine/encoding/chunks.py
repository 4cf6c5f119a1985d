"""Chunked, resumable encoding: the lines of the inputs cut into chunks of ``chunk_lines`` rows, each
written whole and renamed into place, with the manifest rewritten after every chunk (the layout is
described in :mod:`bitextmine.encoding.store`). Blocks are encoded as in
:func:`bitextmine.encoding.pipeline.encode_files` and written into their chunk in place.
"""

from __future__ import annotations

import hashlib
import os
from collections import deque
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from ..config import EncodeConfig
from ..errors import ConfigError
from ..model import Model
from ..tokenizer import RawBlock
from .npyfile import finish_npy, new_npy, npy_header
from .pipeline import Encoder, count_lines, encode_items, raw_blocks
from .store import (
    MANIFEST_FILE,
    MANIFEST_VERSION,
    EncodeResult,
    chunk_file,
    input_names,
    read_manifest,
    write_manifest,
)

# one piece of _chunk_pieces: (chunk index, lines of the chunk or None, first row in the chunk, None or the
# (rows, sha256) that ends the chunk)
Piece = tuple[int, "RawBlock | None", int, "tuple[int, str] | None"]


def encode_chunked(
    inputs: Sequence[str],
    out_dir: str,
    model: Model,
    *,
    config: EncodeConfig = EncodeConfig(),
    chunk_lines: int = 1_000_000,
    resume: bool = False,
    max_chunks: int = 0,
    column: str = "text",
    progress: Callable[[int], None] | None = None,
) -> EncodeResult | None:
    """Encode the lines of ``inputs`` into ``out_dir`` as chunks of ``chunk_lines`` rows, resumably.

    ``out_dir`` holds ``chunk-000000.npy``, ... (each written whole, then renamed into place) and
    ``manifest.json`` (format_version, model_fingerprint, dim, dtype, chunk_lines, inputs, and per chunk
    its file, first row, rows and the sha256 of its lines, each ended by a newline; at the end complete,
    count and the sha256 of the whole input), rewritten after every chunk. With ``resume`` a run
    continues after the last complete chunk, checking that the settings and the lines of the done
    chunks are unchanged; it ends with the same files, byte for byte, as an uninterrupted run. Memory
    depends on the block size, not on the input or chunk size: blocks are encoded as in
    :func:`encode_files` and written into their chunk in place. ``max_chunks`` > 0 stops after that many
    new chunks (the run can be resumed) and returns None; otherwise returns the EncodeResult.
    ``progress(n)`` is called with the lines just encoded; ``column``: the text column of Parquet and JSONL
    inputs. Raises ConfigError, CorpusError.
    """
    if chunk_lines < 1:
        raise ConfigError("chunk size must be >= 1 line")
    enc = Encoder(model, config)
    dtype = np.dtype(np.float16 if config.fp16 else np.float32)
    settings = {"format_version": MANIFEST_VERSION, "model_fingerprint": enc.fingerprint, "dim": model.dim,
                "dtype": str(dtype), "chunk_lines": chunk_lines, "table_precision": enc.precision,
                "inputs": input_names(inputs)}
    old = _previous_run(out_dir, settings, resume)
    if old is not None and old.get("complete"):
        _check_unchanged(inputs, out_dir, old["input_sha256"], config, column)
        return EncodeResult(old["count"], model.dim, str(dtype), old["input_sha256"], out_dir)
    os.makedirs(out_dir, exist_ok=True)
    hasher = hashlib.sha256()
    run = _ChunkRun(out_dir, settings, [] if old is None else old.get("chunks", []), dtype, max_chunks)
    pieces = _chunk_pieces(raw_blocks(inputs, hasher, config, column), chunk_lines)
    header_len = len(npy_header(0, model.dim, dtype))
    try:
        for n in encode_items(enc, run.items(pieces), dtype, header_len):
            run.block_written()
            if progress:
                progress(n)
            run.finish_ready()
        run.finish_ready()
    finally:
        run.discard_partial()
    if run.stopped:
        return None
    if run.checked < len(run.done):
        raise ConfigError(f"--resume: the input has fewer lines than {out_dir} already holds; the input changed")
    count = sum(c["rows"] for c in run.chunks)
    write_manifest(out_dir, {**settings, "chunks": run.chunks, "complete": True, "count": count,
                             "input_sha256": hasher.hexdigest()})
    return EncodeResult(count, model.dim, str(dtype), hasher.hexdigest(), out_dir)


def _check_unchanged(inputs: Sequence[str], out_dir: str, sha256: str, config: EncodeConfig, column: str) -> None:
    """ConfigError unless ``inputs`` (read once, not encoded) still have the sha256 a complete ``out_dir`` holds."""
    hasher = hashlib.sha256()
    for _ in raw_blocks(inputs, hasher, config, column):
        pass
    if hasher.hexdigest() != sha256:
        raise ConfigError(f"--resume: the input changed since {out_dir} was completed (its sha256 differs from the "
                          "manifest's); encode it into a new directory")


def _previous_run(out_dir: str, settings: dict, resume: bool) -> dict | None:
    """The manifest already in ``out_dir`` (None when there is none), checked against this run's
    ``settings``. Raises ConfigError when there is one without ``resume``, none with it, or its settings differ."""
    if not os.path.exists(os.path.join(out_dir, MANIFEST_FILE)):
        if resume:
            raise ConfigError(f"--resume: no {MANIFEST_FILE} in {out_dir}")
        return None
    if not resume:
        raise ConfigError(f"{out_dir}: holds a chunked encoding already; continue it with --resume, or choose "
                          "another output")
    old = read_manifest(out_dir, what="a manifest of 'bitextmine encode'")
    old.setdefault("table_precision", "fp32")  # manifests from before the option: float32 tables
    for key, value in settings.items():
        if old.get(key) != value:
            raise ConfigError(f"--resume: {out_dir} was made with {key} {old.get(key)!r}, this run has {value!r}")
    return old


class _ChunkRun:
    """The chunks of one :func:`encode_chunked` run: those done by an earlier run (checked, not
    re-encoded), those being written (``.partial`` files, finished in order once all their blocks are
    written) and the manifest rewritten after each finished chunk."""

    def __init__(self, out_dir: str, settings: dict, done: list[dict], dtype: np.dtype, max_chunks: int):
        self.out_dir, self.settings, self.dtype, self.max_chunks = out_dir, settings, dtype, max_chunks
        self.dim = settings["dim"]
        self.done = done  # the chunks of the manifest resumed from
        self.chunks = list(done)  # the chunks finished, in order
        self.writing: dict[int, list] = {}  # chunks being written, in order: index -> [partial path, blocks sent, done, end]
        self.owner: deque = deque()  # the chunk of each block handed out, in order
        self.rows = 0  # the rows of the done chunks checked so far
        self.checked = 0  # the number of done chunks checked
        self.stopped = False  # max_chunks reached

    def items(self, pieces: Iterable[Piece]) -> Iterator[tuple[RawBlock, int, str]]:
        """The (block, first row, partial chunk file) items to encode, from :func:`_chunk_pieces`; the
        pieces of done chunks are only checked. Stops (setting ``stopped``) at ``max_chunks`` new chunks."""
        for index, block, first_row, end in pieces:
            if index < len(self.done):  # already encoded: only check that its lines are the same
                if end is not None:
                    self._check_done(index, end)
                continue
            if index not in self.writing:
                if self.max_chunks and index - len(self.done) >= self.max_chunks:
                    self.stopped = True
                    return
                path = os.path.join(self.out_dir, chunk_file(index) + ".partial")
                new_npy(path, self.dim, self.dtype)
                self.writing[index] = [path, 0, 0, None]
            chunk = self.writing[index]
            if end is not None:
                chunk[3] = end
                continue
            chunk[1] += 1
            self.owner.append(index)
            yield block, first_row, chunk[0]

    def _check_done(self, index: int, end: tuple[int, str]) -> None:
        """Check that done chunk ``index`` holds the lines that ended with (rows, sha256) ``end``; raises ConfigError."""
        name = chunk_file(index)
        d, (rows, digest) = self.done[index], end
        if d["input_sha256"] != digest or d["rows"] != rows or d["file"] != name:
            raise ConfigError(f"--resume: lines {self.rows + 1}-{self.rows + rows} differ from "
                              f"those encoded in {self.out_dir}/{d['file']}; the input changed")
        if not os.path.exists(os.path.join(self.out_dir, name)):
            raise ConfigError(f"--resume: {self.out_dir}/{name} is missing")
        self.rows += rows
        self.checked += 1

    def block_written(self) -> None:
        """Count the oldest block handed out as written."""
        self.writing[self.owner.popleft()][2] += 1

    def finish_ready(self) -> None:
        """Finish the oldest chunks whose blocks are all written: rename them into place and rewrite the manifest."""
        while self.writing:
            index = next(iter(self.writing))  # the oldest: chunks are finished in order
            path, sent, written, end = self.writing[index]
            if end is None or written < sent:
                return
            del self.writing[index]
            rows, digest = end
            finish_npy(path, rows, self.dim, self.dtype)
            name = chunk_file(index)
            os.replace(path, os.path.join(self.out_dir, name))
            first = sum(c["rows"] for c in self.chunks)
            self.chunks.append({"file": name, "first_row": first, "rows": rows, "input_sha256": digest})
            write_manifest(self.out_dir, {**self.settings, "chunks": self.chunks, "complete": False})

    def discard_partial(self) -> None:
        """Remove the files of the chunks left unfinished."""
        for path, *_ in self.writing.values():
            if os.path.exists(path):
                os.remove(path)


def _chunk_pieces(blocks: Iterable[RawBlock], chunk_lines: int) -> Iterator[Piece]:
    """Split raw blocks at every ``chunk_lines`` lines. Yields (chunk index, piece, its first row in the
    chunk, None) for the pieces of a chunk, then (chunk index, None, 0, (rows, sha256 of its lines)) when
    the chunk ends. The sha256 covers each line with its line end normalised to one newline."""
    index, rows, h = 0, 0, hashlib.sha256()
    for block in blocks:
        data, first_line = block.data, block.first_line
        left = count_lines(data)
        while left:
            n = min(left, chunk_lines - rows)
            cut = len(data)
            if n < left:
                cut = 0
                for _ in range(n):
                    cut = data.index(b"\n", cut) + 1
            piece, data = data[:cut], data[cut:]
            left -= n
            h.update(_normalised_lines(piece))
            yield index, RawBlock(piece, first_line, block.name), rows, None
            first_line += n
            rows += n
            if rows == chunk_lines:
                yield index, None, 0, (rows, h.hexdigest())
                index, rows, h = index + 1, 0, hashlib.sha256()
    if rows:
        yield index, None, 0, (rows, h.hexdigest())


def _normalised_lines(data: bytes) -> bytes:
    r"""The lines of a raw block, each ended by ``\n`` (a ``\r`` before a line end dropped, a missing
    final newline added): the bytes of the lines as :func:`bitextmine.corpus.decode_block` reads them."""
    if b"\r" not in data:
        return data if data.endswith(b"\n") or not data else data + b"\n"
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    return b"".join((line[:-1] if line.endswith(b"\r") else line) + b"\n" for line in lines)
