"""One joint SentencePiece model for all languages (Wieting et al. 2019): training and batched encoding.

Encoded batches are *flat*: ``ids`` (int64, total pieces) and ``offsets`` (int64, n) where sentence
``i`` is ``ids[offsets[i]:offsets[i+1]]``, the layout ``torch.nn.EmbeddingBag`` takes directly.
"""

from __future__ import annotations

import io
import os
from typing import Sequence

import numpy as np

from .config import TokenizerConfig
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
