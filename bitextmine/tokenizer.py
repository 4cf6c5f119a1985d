"""One joint SentencePiece model for all languages (Wieting et al. 2019): training and batched encoding.

Encoded batches are *flat*: ``ids`` (int64, total pieces) and ``offsets`` (int64, n) where sentence
``i`` is ``ids[offsets[i]:offsets[i+1]]``, the layout ``torch.nn.EmbeddingBag`` takes directly.

Streams of batches are tokenised in worker processes (:meth:`Tokenizer.encode_stream`): SentencePiece
holds the GIL while it builds Python results, so threads scale poorly (measured 1.36x for two threads
on two cores), while processes each run one single-threaded SentencePiece and send back two compact
arrays per batch.
"""

from __future__ import annotations

import io
import os
from typing import Iterable, Iterator, NamedTuple, Sequence

import numpy as np

from .config import TokenizerConfig
from .corpus import decode_block
from .parallel import ordered_map
from .errors import CorpusError, ModelFormatError


def _spm():
    import sentencepiece as spm

    return spm


def sample_sentences(src: Sequence[str], tgt: Sequence[str], *, size: int, seed: int) -> list[str]:
    """A shuffled sample of at most ``size`` sentences drawn from both sides (half from each)."""
    rng = np.random.default_rng(seed)
    per_side = max(1, size // 2)
    out: list[str] = []
    for side in (src, tgt):
        idx = rng.permutation(len(side))[:per_side]
        out.extend(side[i] for i in idx)
    order = rng.permutation(len(out))
    return [out[i] for i in order]


def train_sentencepiece(sentences: Sequence[str], config: TokenizerConfig = TokenizerConfig()) -> bytes:
    """Train a SentencePiece model on ``sentences``; returns the serialized model proto (bytes)."""
    if not sentences:
        raise CorpusError("no sentences to train the SentencePiece model on")
    spm = _spm()
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=buf,
        vocab_size=config.vocab_size,
        model_type=config.model_type,
        character_coverage=config.character_coverage,
        input_sentence_size=len(sentences),
        shuffle_input_sentence=False,  # the sample is already shuffled with our seed
        hard_vocab_limit=False,  # small corpora get a smaller vocabulary instead of an error
        num_threads=os.cpu_count() or 1,
        bos_id=-1,
        eos_id=-1,
        unk_id=0,
        minloglevel=2,
    )
    return buf.getvalue()


class Tokenizer:
    """A SentencePiece model with batched, multi-threaded encoding into flat id arrays."""

    def __init__(self, model_proto: bytes):
        spm = _spm()
        self.proto = model_proto
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)

    @classmethod
    def load(cls, path: str) -> "Tokenizer":
        try:
            with open(path, "rb") as f:
                return cls(f.read())
        except OSError as e:
            raise ModelFormatError(f"{path}: cannot read SentencePiece model ({e.strerror})") from None
        except RuntimeError as e:
            raise ModelFormatError(f"{path}: not a SentencePiece model ({e})") from None

    @property
    def vocab_size(self) -> int:
        return self.sp.piece_size()

    def encode_lists(self, texts: Sequence[str], *, threads: int = 0) -> list[np.ndarray]:
        """Piece ids per sentence: a list of int32 arrays (the raw SentencePiece call)."""
        return self.sp.encode(list(texts), return_type="numpy", num_threads=threads or -1)

    def encode(self, texts: Sequence[str], *, threads: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Encode a batch. Returns (ids int64 (total,), offsets int64 (n,)); see module docstring.

        Equal to encoding each text alone and concatenating.
        """
        pieces = self.encode_lists(texts, threads=threads)
        return flatten(pieces)

    def encode_stream(self, batches: Iterable["Sequence[str] | RawBlock"], *, workers: int = 0,
                      inline_batches: int = 2) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Encode a stream of batches; yields (ids int32 (total,), offsets int32 (n,)) per batch, in order.

        A batch is a sequence of texts or a :class:`RawBlock` of undecoded lines, which the worker
        decodes and checks (so the caller does no per-line work). The first ``inline_batches``
        batches are encoded here (small inputs never pay for starting processes); later ones by
        ``workers`` processes (0 = one per core), at most ``2 * workers`` batches ahead, so memory is
        bounded whatever the input size. Equal to :meth:`encode` per batch.
        """
        return ordered_map(worker_encode, batches, init=worker_init, init_args=(self.proto,), workers=workers,
                           inline=inline_batches)


_WORKER_SP = None


def worker_init(proto: bytes, child: bool) -> None:
    """Set up this process's SentencePiece for :func:`worker_encode` (an ``ordered_map`` init)."""
    global _WORKER_SP
    _WORKER_SP = _spm().SentencePieceProcessor(model_proto=proto)


def worker_encode(batch: "Sequence[str] | RawBlock") -> tuple[np.ndarray, np.ndarray]:
    """Decode (a RawBlock) and tokenise one batch with one thread: (ids int32 (total,), offsets int32 (n,))."""
    return _flatten32(_WORKER_SP.encode(_texts(batch), return_type="numpy", num_threads=1))


class RawBlock(NamedTuple):
    """Undecoded lines from :func:`bitextmine.corpus.iter_blocks`, with where they come from."""

    data: bytes
    first_line: int
    name: str


def _texts(batch: "Sequence[str] | RawBlock") -> list[str]:
    if isinstance(batch, RawBlock):
        return decode_block(batch.data, name=batch.name, first_line=batch.first_line)
    return batch if isinstance(batch, list) else list(batch)


def _flatten32(pieces: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    ids, offsets = flatten(pieces)
    return ids.astype(np.int32), offsets.astype(np.int32)


def flatten(pieces: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate per-sentence id arrays into (ids int64 (total,), offsets int64 (n,))."""
    n = len(pieces)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    lengths = np.fromiter((len(p) for p in pieces), dtype=np.int64, count=n)
    offsets = np.zeros(n, np.int64)
    np.cumsum(lengths[:-1], out=offsets[1:])
    ids = np.concatenate(pieces).astype(np.int64, copy=False) if lengths.sum() else np.zeros(0, np.int64)
    return ids, offsets


def ragged_gather(flat: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Concatenate ``flat[starts[i]:starts[i]+lens[i]]`` for all i, without a Python loop."""
    out_off = np.zeros(len(lens), np.int64)
    np.cumsum(lens[:-1], out=out_off[1:])
    total = int(lens.sum())
    pos = np.repeat(starts - out_off, lens) + np.arange(total, dtype=np.int64)
    return flat[pos]
