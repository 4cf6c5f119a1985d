"""The encoding pipeline: texts and files through worker processes into embeddings.

:class:`Encoder` holds one model's :class:`~bitextmine.encoding.embed.SentenceEmbedder` on one device
(:mod:`bitextmine.device` decides which, and the table precision) and encodes batches, sequences and
streams of texts; :func:`encode_files` streams the lines of files into a ``.npy`` with its sidecar
(:mod:`bitextmine.encoding.store`). :func:`encode_items` is the block loop shared with the chunked
encoding (:mod:`bitextmine.encoding.chunks`).

On the CPU, forked worker processes tokenise, embed and write rows in place. Their state is this
module's alone: ``_SHARED`` (the texts and output of :meth:`Encoder.encode_all`, set before the fork and
inherited) and ``_WORKER`` (each worker's embedder and, encoding files, its output writer, set by the
``ordered_map`` inits).
"""

from __future__ import annotations

import hashlib
import os
from collections import deque
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from ..config import EncodeConfig
from ..corpus import iter_blocks
from ..device import resolve_device, table_precision
from ..errors import ConfigError
from ..model import Model
from ..parallel import ordered_map, usable_cores
from ..tokenizer import RawBlock
from .embed import SentenceEmbedder
from .npyfile import RowWriter, finish_npy, new_npy
from .store import EncodeResult, vectors_fingerprint, write_sidecar

# Worker-process state, used by this module's worker functions only (never imported elsewhere):
_SHARED: dict = {}  # texts, out: the input and the shared output of Encoder.encode_all, set before the workers fork
_WORKER: dict = {}  # embedder (and, encoding files, dtype, header_len, path, writer): this process's, set by the inits


def side_configs(config: EncodeConfig, marked: str | None, names: tuple[str, str]) -> tuple[EncodeConfig, EncodeConfig]:
    """The encode configs of two sides named ``names``; ``marked`` names the side in the marked language
    (models trained with ``--separate-vocab``), or is None. Raises ConfigError for another name."""
    from dataclasses import replace

    if marked not in (None, "", *names):
        raise ConfigError(f"marked side {marked!r}: expected {' or '.join(names)}")
    return replace(config, marked=marked == names[0]), replace(config, marked=marked == names[1])


class Encoder:
    """Encodes batches of text with one model on one device; keeps the weights resident."""

    def __init__(self, model: Model, config: EncodeConfig = EncodeConfig()):
        self.model = model
        self.config = config
        self.device = resolve_device(config.device)
        self.precision = table_precision(config.precision, model.stored_dtype, self.device)
        self.embedder = SentenceEmbedder(model, sif=config.sif, device=self.device, marked=config.marked,
                                         precision=self.precision, batch_tokens=config.batch_tokens)
        self.weight = self.embedder.weight

    @property
    def fingerprint(self) -> str:
        """What made the vectors (:func:`vectors_fingerprint`)."""
        return vectors_fingerprint(self.model, sif=self.config.sif, marked=self.config.marked)

    def embed_flat(self, ids: np.ndarray, offsets: np.ndarray, dtype=np.float32) -> np.ndarray:
        """Sentence embeddings, L2-normalised: (n, dim) of ``dtype`` (float32, or float16 rounded from them on
        the device). Empty sentences give zeros."""
        return self.embedder(ids, offsets, dtype)

    def encode_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Encode one batch: float32 (len(texts), dim), L2-normalised rows in the order of ``texts``.

        Equal to encoding each text alone. The batch is embedded as flat bags (no padding), so unlike
        padded encoders it gains nothing from sorting by length and is embedded in input order.
        """
        return self.embed_flat(*self.model.tokenizer.encode(texts, threads=self.config.threads))

    def encode_all(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Encode a sequence of texts: float32 (len(texts), dim), L2-normalised rows in input order.

        On the CPU, worker processes tokenise and embed batches and write their rows straight into a
        shared output; the texts reach them through the fork, not a pipe (twice the rate of embedding
        here what workers tokenised: 290k vs 146k news sentences/s on two cores). ``progress(n)`` is called
        with each batch's rows.
        """
        import multiprocessing as mp

        n = len(texts)
        if self.device != "cpu" or n == 0 or "fork" not in mp.get_all_start_methods():
            blocks = []
            for block in self.encode_iter(texts):
                blocks.append(block)
                if progress:
                    progress(len(block))
            return np.concatenate(blocks) if blocks else np.zeros((0, self.model.dim), np.float32)
        import mmap

        out = np.frombuffer(mmap.mmap(-1, n * self.model.dim * 4), np.float32).reshape(n, self.model.dim)
        size = self.config.batch_size
        tok = self.model.tokenizer
        _SHARED.update(texts=texts, out=out)  # before the workers fork: they see both
        try:
            for rows in ordered_map(_range_worker, ((a, min(n, a + size)) for a in range(0, n, size)),
                                    init=_embed_worker_init, init_args=(tok.kind, tok.proto, self.embedder),
                                    workers=self.config.threads):
                if progress:
                    progress(rows)
        finally:
            _SHARED.clear()
        return out

    def encode_iter(self, texts: Iterable[str]) -> Iterator[np.ndarray]:
        """Yield float32 (<= batch_size, dim) blocks for a stream of texts, in order."""
        yield from self.map_batches(_batches(texts, self.config.batch_size), lambda block, row: block)

    def map_batches(self, batches: Iterable[Sequence[str] | RawBlock],
                    job: Callable[[np.ndarray, int], Any], dtype=np.float32) -> Iterator[Any]:
        """Encode each batch (texts, or a RawBlock of undecoded lines) and yield ``job(block, first_row)``
        for each, in input order; ``block`` is (rows, dim) of ``dtype`` (float32 or float16).

        Tokenisation runs in worker processes a few batches ahead (:meth:`Tokenizer.encode_stream`)
        while this thread embeds and hands each block to ``job``; memory stays bounded whatever the
        input size.
        """
        import torch

        row = 0
        workers = self.config.threads or usable_cores()
        saved = torch.get_num_threads()
        if self.device == "cpu":
            # the tokenizer processes hold the cores; more torch threads would spin-wait against them
            torch.set_num_threads(1)
        try:
            for ids, offsets in self.model.tokenizer.encode_stream(batches, workers=workers):
                block = self.embed_flat(ids, offsets, dtype)
                yield job(block, row)
                row += len(block)
        finally:
            torch.set_num_threads(saved)


def _batches(texts: Iterable[str], size: int) -> Iterator[list[str]]:
    """``texts`` in lists of ``size`` (the last one shorter)."""
    batch: list[str] = []
    for t in texts:
        batch.append(t)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _range_worker(item: tuple[int, int]) -> int:
    """Tokenise, embed and store texts a:b of Encoder.encode_all's input; returns b - a."""
    from ..tokenizer import worker_encode

    a, b = item
    _SHARED["out"][a:b] = _WORKER["embedder"](*worker_encode(_SHARED["texts"][a:b]))
    return b - a


def encode(texts: Sequence[str], model: Model, *, config: EncodeConfig = EncodeConfig()) -> np.ndarray:
    """Encode texts: float32 (n, dim), L2-normalised rows, in input order (:meth:`Encoder.encode_all`)."""
    return Encoder(model, config).encode_all(texts)


def encode_files(
    inputs: Sequence[str],
    out_path: str,
    model: Model,
    *,
    config: EncodeConfig = EncodeConfig(),
    column: str = "text",
    progress: Callable[[int], None] | None = None,
) -> EncodeResult:
    """Encode the lines of ``inputs`` (paths, ``-`` = stdin, gzip read transparently) into ``out_path``.

    Writes a ``.npy`` of shape (lines, dim), float32 or float16 (``config.fp16``), streaming, plus the
    sidecar ``out_path + '.json'``. ``progress(n)`` is called with the number of lines just encoded.
    Parquet and JSONL inputs give the rows of their string ``column`` (:func:`raw_blocks`).

    On the CPU, this process only reads raw blocks of lines, hashes them and counts their lines
    (which fixes each block's rows in the output); worker processes decode, tokenise, embed and
    write their rows in place (:func:`_file_worker`), so nothing per line runs here. On CUDA, blocks
    are tokenised by workers and embedded on the GPU here.
    """
    _check_outputs(inputs, out_path)
    dtype = np.dtype(np.float16 if config.fp16 else np.float32)
    hasher = hashlib.sha256()
    enc = Encoder(model, config)
    tmp = out_path + ".partial"

    def items() -> Iterator[tuple[RawBlock, int, str]]:
        row = 0  # rows of the inputs already read
        for block in raw_blocks(inputs, hasher, config, column):
            yield block, row, tmp
            row += count_lines(block.data)

    count = 0
    try:
        header_len = new_npy(tmp, model.dim, dtype)
        for n in encode_items(enc, items(), dtype, header_len):
            count += n
            if progress:
                progress(n)
        finish_npy(tmp, count, model.dim, dtype)
        if os.path.exists(out_path + ".json"):  # an earlier encoding's sidecar must not describe these rows
            os.remove(out_path + ".json")
        os.replace(tmp, out_path)
    except OSError as e:  # a write that failed (disk full) names no file: this is the one being written
        if e.filename is None:
            raise OSError(e.errno, e.strerror, tmp) from None
        raise
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    result = EncodeResult(count=count, dim=model.dim, dtype=str(dtype), input_sha256=hasher.hexdigest(), path=out_path)
    write_sidecar(out_path, enc.fingerprint, result, inputs)
    return result


def _check_outputs(inputs: Sequence[str], out_path: str) -> None:
    """ConfigError before any work for an output that is not a file to replace (a device or pipe: the .npy is
    written to a partial file and renamed over it, which would replace the device), one whose sidecar
    (``out_path + '.json'``) is an input, or standard input named twice."""
    import stat

    for path, what in ((out_path, "the output"), (out_path + ".json", "the output's sidecar")):
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode):
            raise ConfigError(f"{path}: {what} is not a regular file (a device, pipe or folder); expected a .npy file "
                              "to write (encode writes a file and renames it into place)")
        if any(p != "-" and os.path.exists(p) and os.path.samefile(p, path) for p in inputs):
            raise ConfigError(f"{path}: {what} is an input, which encoding would replace; write it elsewhere")
    if sum(p == "-" for p in inputs) > 1:
        raise ConfigError("standard input ('-') named twice: it is read once; give it once")


def raw_blocks(inputs: Sequence[str], hasher: Any, config: EncodeConfig, column: str = "text") -> Iterator[RawBlock]:
    """The raw blocks of lines of ``inputs`` in order (about ``batch_size`` lines of typical text each);
    ``hasher`` is updated with all their bytes. A Parquet or JSONL input (:mod:`bitextmine.tabular`) gives
    its ``column``, one value per line, as the equivalent text file would."""
    from ..tabular import line_blocks, table_kind

    block_bytes = config.batch_size * 128
    for p in inputs:
        if table_kind(p) is None:
            name = "<stdin>" if p == "-" else p
            yield from (RawBlock(data, first, name) for data, first in iter_blocks(p, hasher=hasher,
                                                                                  block_bytes=block_bytes))
        else:  # each block of one shard, numbered by its rows there
            yield from (RawBlock(data, first, shard) for data, first, shard in line_blocks(p, column, hasher,
                                                                                         config.batch_size))


def count_lines(data: bytes) -> int:
    """Lines in a raw block (the last one may lack its newline)."""
    return data.count(b"\n") + (len(data) > 0 and not data.endswith(b"\n"))


def encode_items(enc: Encoder, items: Iterable[tuple[RawBlock, int, str]], dtype: np.dtype,
                  header_len: int, *, embed_in_workers: bool | None = None) -> Iterator[int]:
    """Encode raw blocks and write their rows: each item is (block, its first row, the .npy file it
    goes to, whose rows start at ``header_len``). Yields the rows of each item, in order.

    On the CPU (``embed_in_workers`` None or True), worker processes decode, tokenise, embed and write
    (:func:`_file_worker`); on a GPU (or False), workers tokenise and this process embeds on the device
    and writes.
    """
    if embed_in_workers if embed_in_workers is not None else enc.device == "cpu":
        model = enc.model
        args = (model.tokenizer.kind, model.tokenizer.proto, enc.embedder, dtype.str, header_len)
        try:
            yield from ordered_map(_file_worker, items, init=_file_worker_init, init_args=args,
                                   workers=enc.config.threads)
        finally:
            _close_file_writer()  # this process's own, when it encoded a small input itself
        return
    where: deque = deque()  # (first row, path) of the blocks handed to the device, in order
    writers: dict[str, RowWriter] = {}

    def blocks() -> Iterator[RawBlock]:
        for block, row, path in items:
            where.append((row, path))
            yield block

    def write(x: np.ndarray, _: int) -> int:
        row, path = where.popleft()
        if path not in writers:
            for w in writers.values():
                w.close()
            writers.clear()
            writers[path] = RowWriter(path, header_len)
        return writers[path].write(row, x.astype(dtype, copy=False))

    try:
        yield from enc.map_batches(blocks(), write, dtype)
    finally:
        for w in writers.values():
            w.close()


def _embed_worker_init(kind: str, proto: bytes, embedder: SentenceEmbedder, child: bool) -> None:
    """Set up a process that tokenises and embeds (an ``ordered_map`` init)."""
    import torch

    from ..tokenizer import worker_init

    if child:
        # one thread: ATen then never enters OpenMP, which a forked child must not (as in torch's
        # DataLoader workers); the processes are the parallelism
        torch.set_num_threads(1)
    worker_init(kind, proto, child)
    _WORKER["embedder"] = embedder


def _file_worker_init(kind: str, proto: bytes, embedder: SentenceEmbedder, dtype: str, header_len: int,
                      child: bool) -> None:
    """Set up a process that tokenises, embeds and writes rows of ``dtype`` into .npy files whose rows
    start at ``header_len`` (an ``ordered_map`` init)."""
    _embed_worker_init(kind, proto, embedder, child)
    _WORKER.update(dtype=np.dtype(dtype), header_len=header_len, path=None, writer=None)


def _file_worker(item: tuple[RawBlock, int, str]) -> int:
    """Decode, tokenise, embed and write one block's rows in place; returns the number of rows."""
    from ..tokenizer import worker_encode

    block, row, path = item
    w = _WORKER
    x = w["embedder"](*worker_encode(block)).astype(w["dtype"], copy=False)
    if w["path"] != path:  # blocks come file after file: one writer open at a time
        _close_file_writer()
        w.update(path=path, writer=RowWriter(path, w["header_len"]))
    return w["writer"].write(row, x)


def _close_file_writer() -> None:
    """Close this process's output writer, if one is open."""
    writer = _WORKER.pop("writer", None)
    if writer is not None:
        writer.close()
    _WORKER["path"] = None
