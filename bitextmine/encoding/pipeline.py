"""Sentence embeddings: batched tokenisation in worker processes, mean of piece embeddings, L2 normalisation.

Embedding files are ``.npy`` (float32 or float16, one row per input line, in input order) written
as a stream, with a JSON sidecar ``OUT.npy.json`` naming the model that made them::

    {"format_version": 1, "model_fingerprint": ..., "dim": ..., "dtype": ..., "count": ...,
     "input_sha256": ..., "inputs": [...]}
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from ..config import EncodeConfig
from ..device import resolve_device, table_precision
from ..corpus import iter_blocks
from ..errors import ConfigError, ModelFormatError
from ..model import Model, read_versioned_json
from .npyfile import RowWriter, finish_npy, new_npy, npy_header
from ..parallel import ordered_map
from ..tokenizer import RawBlock

SIDECAR_VERSION = 1


def embed_pieces(weight, ids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Mean of piece embeddings, L2-normalised: float32 (n, dim); an empty sentence gives zeros.

    weight: torch tensor (vocab, dim) on the device to use; ids int (total,), offsets int (n,) (flat
    layout, see bitextmine.tokenizer). The one implementation behind every encoding path.
    """
    import torch
    import torch.nn.functional as F

    if len(offsets) == 0:
        return np.zeros((0, weight.shape[1]), np.float32)
    with torch.no_grad():
        dev = weight.device
        x = F.embedding_bag(torch.from_numpy(ids).to(dev), weight, torch.from_numpy(offsets).to(dev), mode="mean")
        x = x.float()  # a half-precision table still gives float32 rows (no copy for a float32 table)
        x.div_(torch.linalg.vector_norm(x, dim=1, keepdim=True).clamp_min_(1e-12))  # in place: no copy
    return x.cpu().numpy()


def vectors_fingerprint(model: Model, *, sif: bool = False, marked: bool = False) -> str:
    """The model's fingerprint, with ``+sif`` when SIF is applied and ``+marked`` for text encoded as the
    marked language of a separate-vocabulary model: what an embedding sidecar records and is checked against."""
    return model.fingerprint + ("+sif" if sif else "") + ("+marked" if marked else "")


def side_configs(config: EncodeConfig, marked: str | None, names: tuple[str, str]) -> tuple[EncodeConfig, EncodeConfig]:
    """The encode configs of two sides named ``names``; ``marked`` names the side in the marked language
    (models trained with ``--separate-vocab``), or is None. Raises ConfigError for another name."""
    from dataclasses import replace

    if marked not in (None, "", *names):
        raise ConfigError(f"marked side {marked!r}: expected {' or '.join(names)}")
    return replace(config, marked=marked == names[0]), replace(config, marked=marked == names[1])


class SentenceEmbedder:
    """Callable (ids, offsets) -> float32 (n, dim) L2-normalised sentence embeddings for one model.

    Averaging encoders go through :func:`embed_pieces` with the token table (with ``sif``, the SIF
    table of :func:`bitextmine.sif.sif_table`), held on the device at ``precision`` (fp32 | fp16 | bf16;
    see :func:`bitextmine.device.table_precision`); the BiLSTM runs its torch module in chunks of
    ``chunk`` sentences, weighting states and removing the common component when ``sif`` is set.
    """

    def __init__(self, model: Model, *, sif: bool = False, device: str = "cpu", chunk: int = 2048,
                 marked: bool = False, precision: str = "fp32", batch_tokens: int = 0):
        import torch

        from ..model import module_from_model
        from ..sif import sif_parts, sif_table

        self.dim = model.dim
        self.offset = 0
        if marked:
            if not model.marked_offset:
                raise ConfigError(f"{model.path or 'model'}: has one shared vocabulary; marking a language needs a "
                                  "model trained with --separate-vocab")
            self.offset = model.marked_offset
        self.module = None
        self.chunk = chunk
        self.batch_tokens = batch_tokens
        self.token_weights = self.pc = None
        if model.is_bag:
            table = model.embeddings
            if sif:
                w, pc, _ = sif_parts(model)
                table = sif_table(table, model.tensors["piece_counts"], pc, float(model.config.get("sif_a", 1e-3)))
            dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
            self.weight = torch.from_numpy(np.ascontiguousarray(table, np.float32)).to(device, dtype)
        else:
            self.module = module_from_model(model, device).eval()
            self.weight = self.module.weight
            if sif:
                w, pc, _ = sif_parts(model)
                self.token_weights = torch.from_numpy(w).to(device)
                self.pc = torch.from_numpy(pc).to(device)

    def __call__(self, ids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """ids int (total,), offsets int (n,) (flat layout) -> float32 (n, dim). With ``batch_tokens``,
        embedded in runs of whole sentences of at most that many pieces (a longer sentence alone)."""
        budget = self.batch_tokens
        if not budget or len(ids) <= budget:
            return self._embed(ids, offsets)
        offsets = np.asarray(offsets, np.int64)
        ends = np.append(offsets[1:], len(ids))
        parts, a = [], 0
        while a < len(offsets):
            b = max(a + 1, int(np.searchsorted(ends, offsets[a] + budget, side="right")))
            parts.append(self._embed(ids[offsets[a] : ends[b - 1]], offsets[a:b] - offsets[a]))
            a = b
        return np.concatenate(parts)

    def _embed(self, ids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        if self.offset:
            ids = np.asarray(ids, np.int64) + self.offset
        if self.module is None:
            return embed_pieces(self.weight, ids, offsets)
        import torch

        from ..model import embed_in_chunks

        def post(x):
            if self.pc is not None:
                x = x - (x @ self.pc).unsqueeze(1) * self.pc
            return x / torch.linalg.vector_norm(x, dim=1, keepdim=True).clamp_min(1e-12)

        x = embed_in_chunks(self.module, ids, offsets, chunk=self.chunk, token_weights=self.token_weights, post=post)
        return x.float().cpu().numpy()


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

    def embed_flat(self, ids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Sentence embeddings, L2-normalised: float32 (n, dim). Empty sentences give zeros."""
        return self.embedder(ids, offsets)

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

    def map_batches(self, batches: Iterable["Sequence[str] | RawBlock"],
                    job: Callable[[np.ndarray, int], Any]) -> Iterator[Any]:
        """Encode each batch (texts, or a RawBlock of undecoded lines) and yield ``job(block, first_row)``
        for each, in input order; ``block`` is float32 (rows, dim).

        Tokenisation runs in worker processes a few batches ahead (:meth:`Tokenizer.encode_stream`)
        while this thread embeds and hands each block to ``job``; memory stays bounded whatever the
        input size.
        """
        import torch

        row = 0
        workers = self.config.threads or os.cpu_count() or 1
        saved = torch.get_num_threads()
        if self.device == "cpu":
            # the tokenizer processes hold the cores; more torch threads would spin-wait against them
            torch.set_num_threads(1)
        try:
            for ids, offsets in self.model.tokenizer.encode_stream(batches, workers=workers):
                block = self.embed_flat(ids, offsets)
                yield job(block, row)
                row += len(block)
        finally:
            torch.set_num_threads(saved)


def _batches(texts: Iterable[str], size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for t in texts:
        batch.append(t)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


_SHARED: dict = {}  # the texts and output of Encoder.encode_all, inherited by its forked workers


def _range_worker(item: tuple[int, int]) -> int:
    """Tokenise, embed and store texts a:b of Encoder.encode_all's input; returns b - a."""
    from ..tokenizer import worker_encode

    a, b = item
    _SHARED["out"][a:b] = _WORKER["embedder"](*worker_encode(_SHARED["texts"][a:b]))
    return b - a


def encode(texts: Sequence[str], model: Model, *, config: EncodeConfig = EncodeConfig()) -> np.ndarray:
    """Encode texts: float32 (n, dim), L2-normalised rows, in input order (:meth:`Encoder.encode_all`)."""
    return Encoder(model, config).encode_all(texts)


# --- streaming .npy output (written in place by the workers, see bitextmine.npyfile) ---------------

@dataclass
class EncodeResult:
    count: int
    dim: int
    dtype: str
    input_sha256: str
    path: str


def encode_files(
    inputs: Sequence[str],
    out_path: str,
    model: Model,
    *,
    config: EncodeConfig = EncodeConfig(),
    progress: Callable[[int], None] | None = None,
) -> EncodeResult:
    """Encode the lines of ``inputs`` (paths, ``-`` = stdin, gzip read transparently) into ``out_path``.

    Writes a ``.npy`` of shape (lines, dim), float32 or float16 (``config.fp16``), streaming, plus the
    sidecar ``out_path + '.json'``. ``progress(n)`` is called with the number of lines just encoded.

    On the CPU, this process only reads raw blocks of lines, hashes them and counts their lines
    (which fixes each block's rows in the output); worker processes decode, tokenise, embed and
    write their rows in place (:func:`_file_worker`), so nothing per line runs here. On CUDA, blocks
    are tokenised by workers and embedded on the GPU here.
    """
    dtype = np.dtype(np.float16 if config.fp16 else np.float32)
    hasher = hashlib.sha256()
    enc = Encoder(model, config)
    tmp = out_path + ".partial"
    header_len = new_npy(tmp, model.dim, dtype)

    def items() -> Iterator[tuple[RawBlock, int, str]]:
        row = 0  # rows of the inputs already read
        for block in _raw_blocks(inputs, hasher, config):
            yield block, row, tmp
            row += _count_lines(block.data)

    count = 0
    try:
        for n in _encode_items(enc, items(), dtype, header_len):
            count += n
            if progress:
                progress(n)
        finish_npy(tmp, count, model.dim, dtype)
        os.replace(tmp, out_path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    result = EncodeResult(count=count, dim=model.dim, dtype=str(dtype), input_sha256=hasher.hexdigest(), path=out_path)
    write_sidecar(out_path, enc.fingerprint, result, inputs)
    return result


def _raw_blocks(inputs: Sequence[str], hasher: Any, config: EncodeConfig) -> Iterator[RawBlock]:
    """The raw blocks of lines of ``inputs`` in order (about ``batch_size`` lines of typical text each);
    ``hasher`` is updated with all their bytes."""
    block_bytes = config.batch_size * 128
    for p in inputs:
        name = "<stdin>" if p == "-" else p
        for data, first_line in iter_blocks(p, hasher=hasher, block_bytes=block_bytes):
            yield RawBlock(data, first_line, name)


def _count_lines(data: bytes) -> int:
    """Lines in a raw block (the last one may lack its newline)."""
    return data.count(b"\n") + (len(data) > 0 and not data.endswith(b"\n"))


def _encode_items(enc: Encoder, items: Iterable[tuple[RawBlock, int, str]], dtype: np.dtype,
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
        yield from enc.map_batches(blocks(), write)
    finally:
        for w in writers.values():
            w.close()


_WORKER: dict = {}  # this process's embedder (and, encoding files, the output it writes) in an ordered_map


def _embed_worker_init(kind: str, proto: bytes, embedder: "SentenceEmbedder", child: bool) -> None:
    """Set up a process that tokenises and embeds (an ``ordered_map`` init)."""
    import torch

    from ..tokenizer import worker_init

    if child:
        # one thread: ATen then never enters OpenMP, which a forked child must not (as in torch's
        # DataLoader workers); the processes are the parallelism
        torch.set_num_threads(1)
    worker_init(kind, proto, child)
    _WORKER["embedder"] = embedder


def _file_worker_init(kind: str, proto: bytes, embedder: "SentenceEmbedder", dtype: str, header_len: int,
                      child: bool) -> None:
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
    writer = _WORKER.pop("writer", None)
    if writer is not None:
        writer.close()
    _WORKER["path"] = None


# --- chunked, resumable output --------------------------------------------------------------------

MANIFEST_VERSION = 1
MANIFEST_FILE = "manifest.json"


def encode_chunked(
    inputs: Sequence[str],
    out_dir: str,
    model: Model,
    *,
    config: EncodeConfig = EncodeConfig(),
    chunk_lines: int = 1_000_000,
    resume: bool = False,
    max_chunks: int = 0,
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
    ``progress(n)`` is called with the lines just encoded. Raises ConfigError, CorpusError.
    """
    if chunk_lines < 1:
        raise ConfigError("chunk size must be >= 1 line")
    enc = Encoder(model, config)
    dtype = np.dtype(np.float16 if config.fp16 else np.float32)
    settings = {"format_version": MANIFEST_VERSION, "model_fingerprint": enc.fingerprint, "dim": model.dim,
                "dtype": str(dtype), "chunk_lines": chunk_lines, "table_precision": enc.precision,
                "inputs": [("<stdin>" if p == "-" else os.path.basename(p)) for p in inputs]}
    man_path = os.path.join(out_dir, MANIFEST_FILE)
    done: list[dict] = []
    if os.path.exists(man_path):
        if not resume:
            raise ConfigError(f"{out_dir}: holds a chunked encoding already; continue it with --resume, or choose "
                              "another output")
        old = read_versioned_json(man_path, version=MANIFEST_VERSION, what="a manifest of 'bitextmine encode'")
        old.setdefault("table_precision", "fp32")  # manifests from before the option: float32 tables
        for key, value in settings.items():
            if old.get(key) != value:
                raise ConfigError(f"--resume: {out_dir} was made with {key} {old.get(key)!r}, this run has {value!r}")
        if old.get("complete"):
            return EncodeResult(old["count"], model.dim, str(dtype), old["input_sha256"], out_dir)
        done = old.get("chunks", [])
    elif resume:
        raise ConfigError(f"--resume: no {MANIFEST_FILE} in {out_dir}")
    os.makedirs(out_dir, exist_ok=True)

    def write_manifest(chunks: list[dict], extra: dict) -> None:
        tmp = man_path + ".partial"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({**settings, "chunks": chunks, **extra}, f, indent=1)
            f.write("\n")
        os.replace(tmp, man_path)

    hasher = hashlib.sha256()
    chunks = list(done)
    header_len = len(npy_header(0, model.dim, dtype))
    writing: dict[int, list] = {}  # chunks being written, in order: index -> [partial path, blocks sent, done, end]
    owner: deque = deque()  # the chunk of each block handed out, in order
    state = {"rows": 0, "checked": 0, "stopped": False}  # done chunks' rows and number checked; max_chunks reached

    def items() -> Iterator[tuple[RawBlock, int, str]]:
        for index, block, first_row, end in _chunk_pieces(_raw_blocks(inputs, hasher, config), chunk_lines):
            name = f"chunk-{index:06d}.npy"
            if index < len(done):  # already encoded: only check that its lines are the same
                if end is not None:
                    d, (rows, digest) = done[index], end
                    if d["input_sha256"] != digest or d["rows"] != rows or d["file"] != name:
                        raise ConfigError(f"--resume: lines {state['rows'] + 1}-{state['rows'] + rows} differ from "
                                          f"those encoded in {out_dir}/{d['file']}; the input changed")
                    if not os.path.exists(os.path.join(out_dir, name)):
                        raise ConfigError(f"--resume: {out_dir}/{name} is missing")
                    state["rows"] += rows
                    state["checked"] += 1
                continue
            if index not in writing:
                if max_chunks and index - len(done) >= max_chunks:
                    state["stopped"] = True
                    return
                path = os.path.join(out_dir, name + ".partial")
                new_npy(path, model.dim, dtype)
                writing[index] = [path, 0, 0, None]
            chunk = writing[index]
            if end is not None:
                chunk[3] = end
                continue
            chunk[1] += 1
            owner.append(index)
            yield block, first_row, chunk[0]

    def finish_ready() -> None:
        while writing:
            index = next(iter(writing))  # the oldest: chunks are finished in order
            path, sent, written, end = writing[index]
            if end is None or written < sent:
                return
            del writing[index]
            rows, digest = end
            finish_npy(path, rows, model.dim, dtype)
            name = f"chunk-{index:06d}.npy"
            os.replace(path, os.path.join(out_dir, name))
            first = sum(c["rows"] for c in chunks)
            chunks.append({"file": name, "first_row": first, "rows": rows, "input_sha256": digest})
            write_manifest(chunks, {"complete": False})

    try:
        for n in _encode_items(enc, items(), dtype, header_len):
            writing[owner.popleft()][2] += 1
            if progress:
                progress(n)
            finish_ready()
        finish_ready()
    finally:
        for path, *_ in writing.values():
            if os.path.exists(path):
                os.remove(path)
    if state["stopped"]:
        return None
    if state["checked"] < len(done):
        raise ConfigError(f"--resume: the input has fewer lines than {out_dir} already holds; the input changed")
    count = sum(c["rows"] for c in chunks)
    write_manifest(chunks, {"complete": True, "count": count, "input_sha256": hasher.hexdigest()})
    return EncodeResult(count, model.dim, str(dtype), hasher.hexdigest(), out_dir)


def _chunk_pieces(blocks: Iterable[RawBlock], chunk_lines: int
                  ) -> Iterator[tuple[int, "RawBlock | None", int, "tuple[int, str] | None"]]:
    """Split raw blocks at every ``chunk_lines`` lines. Yields (chunk index, piece, its first row in the
    chunk, None) for the pieces of a chunk, then (chunk index, None, 0, (rows, sha256 of its lines)) when
    the chunk ends. The sha256 covers each line with its line end normalised to one newline."""
    index, rows, h = 0, 0, hashlib.sha256()
    for block in blocks:
        data, first_line = block.data, block.first_line
        left = _count_lines(data)
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
    r"""The lines of a raw block, each ended by ``
`` (a ``
`` before a line end dropped, a missing
    final newline added): the bytes of the lines as :func:`bitextmine.corpus.decode_block` reads them."""
    if b"\r" not in data:
        return data if data.endswith(b"\n") or not data else data + b"\n"
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    return b"".join((line[:-1] if line.endswith(b"\r") else line) + b"\n" for line in lines)


def _load_chunked(path: str) -> tuple[dict, np.ndarray]:
    meta = read_versioned_json(os.path.join(path, MANIFEST_FILE), version=MANIFEST_VERSION,
                               what="the manifest that 'bitextmine encode --chunk-lines' writes")
    if not meta.get("complete"):
        raise ModelFormatError(f"{path}: the chunked encoding is not complete; finish it with 'encode --resume'")
    parts = []
    for c in meta["chunks"]:
        try:
            x = np.load(os.path.join(path, c["file"]), mmap_mode="r")
        except (OSError, ValueError) as e:
            raise ModelFormatError(f"{path}/{c['file']}: not a readable .npy file ({e})") from None
        if x.shape != (c["rows"], meta["dim"]):
            raise ModelFormatError(f"{path}/{c['file']}: shape {x.shape}; the manifest says ({c['rows']}, {meta['dim']})")
        parts.append(x)
    x = np.concatenate(parts) if parts else np.zeros((0, meta["dim"]), meta["dtype"])
    return meta, x


def write_sidecar(out_path: str, fingerprint: str, result: EncodeResult, inputs: Sequence[str]) -> None:
    """Write ``out_path + '.json'``; ``fingerprint`` is :attr:`Encoder.fingerprint`."""
    meta = {
        "format_version": SIDECAR_VERSION,
        "model_fingerprint": fingerprint,
        "dim": result.dim,
        "dtype": result.dtype,
        "count": result.count,
        "input_sha256": result.input_sha256,
        "inputs": [("<stdin>" if p == "-" else os.path.basename(p)) for p in inputs],
    }
    with open(out_path + ".json", "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")


def load_embeddings(path: str, *, model: Model | None = None, text_sha256: str | None = None,
                    count: int | None = None, sif: bool = False, marked: bool = False) -> np.ndarray:
    """Load an embedding ``.npy`` (memory-mapped) and check its sidecar, or a chunked encoding directory
    (``encode --chunk-lines``; its manifest is checked the same way).

    Returns float32 or float16 (count, dim). Raises ModelFormatError when the sidecar is missing,
    has another format version, or does not match ``model``, ``text_sha256`` or ``count``.
    """
    if os.path.isdir(path):  # a chunked encoding (encode --chunk-lines): the chunks, concatenated in memory
        meta, x = _load_chunked(path)
    else:
        meta = read_versioned_json(path + ".json", version=SIDECAR_VERSION,
                                   what="the sidecar that 'bitextmine encode' writes beside its .npy")
        x = None
    expected = None if model is None else vectors_fingerprint(model, sif=sif, marked=marked)
    if expected is not None and meta.get("model_fingerprint") != expected:
        raise ModelFormatError(
            f"{path}: made by model {meta.get('model_fingerprint')}, but the model in use is {expected}; "
            "re-encode with the same --model (and --sif / --marked)"
        )
    if text_sha256 is not None and meta.get("input_sha256") != text_sha256:
        raise ModelFormatError(f"{path}: encodes another text than the one given (input checksum differs)")
    if x is None:
        try:
            x = np.load(path, mmap_mode="r")
        except (OSError, ValueError) as e:
            raise ModelFormatError(f"{path}: not a readable .npy file ({e})") from None
    if x.ndim != 2 or x.shape[0] != meta.get("count") or x.shape[1] != meta.get("dim"):
        raise ModelFormatError(f"{path}: shape {x.shape} does not match its sidecar ({meta.get('count')}, {meta.get('dim')})")
    if count is not None and x.shape[0] != count:
        raise ModelFormatError(f"{path}: {x.shape[0]} rows but the text has {count} lines")
    return x
