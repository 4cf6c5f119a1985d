"""One joint SentencePiece model for all languages (Wieting et al. 2019): training and batched encoding;
also the word / trigram vocabularies. Other kinds of tokenizer (the Hugging Face ``tokenizer.json`` of
sentence-transformers and model2vec models, :mod:`bitextmine.interop.hf_tokenizer`) register how they are
rebuilt from their stored bytes (:func:`register_tokenizer`), so that worker processes and
:func:`make_tokenizer` build them by kind.

Encoded batches are *flat*: ``ids`` (int64, total pieces) and ``offsets`` (int64, n) where sentence
``i`` is ``ids[offsets[i]:offsets[i+1]]``, the layout ``torch.nn.EmbeddingBag`` takes directly.

Streams of batches are tokenised in worker processes (:meth:`Tokenizer.encode_stream`): SentencePiece
holds the GIL while it builds Python results, so threads scale poorly (measured 1.36x for two threads
on two cores), while processes each run one single-threaded SentencePiece and send back two compact
arrays per batch.
"""

from __future__ import annotations

import io
import itertools
import re
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence

import numpy as np

from .config import TokenizerConfig
from .corpus import decode_block
from .parallel import gc_paused, ordered_map, usable_cores
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
        normalization_rule_name=config.normalization,
        character_coverage=config.character_coverage,
        # every sentence given (0: no cap; SentencePiece refuses a cap of 1 to 100, i.e. a corpus that small)
        input_sentence_size=len(sentences) if len(sentences) > 100 else 0,
        shuffle_input_sentence=False,  # the sample is already shuffled with our seed
        hard_vocab_limit=False,  # small corpora get a smaller vocabulary instead of an error
        num_threads=usable_cores(),
        bos_id=-1,
        eos_id=-1,
        unk_id=0,
        minloglevel=2,
    )
    return buf.getvalue()


def says_nothing(piece: str) -> bool:
    """Whether a piece (a U+2581 word start left out) is empty or punctuation alone: with ``<unk>``, what a text in a
    script the vocabulary lacks is made of (:meth:`Tokenizer.blank_ids`)."""
    import unicodedata

    return all(unicodedata.category(c).startswith("P") for c in piece.replace("\u2581", ""))


class Tokenizer:
    """A SentencePiece model with batched, multi-threaded encoding into flat id arrays."""

    kind = "sentencepiece"
    filename = "sentencepiece.model"

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
        """Piece ids per sentence: a list of int32 arrays (the raw SentencePiece call, with the cyclic
        garbage collector paused: its many small results would trigger collections)."""
        with gc_paused():
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
        decodes and checks (so the caller does no per-line work). A stream of at most
        ``inline_batches`` batches is encoded here (small inputs never pay for starting processes);
        longer ones by ``workers`` processes (0 = one per core), at most ``2 * workers`` batches ahead,
        so memory is bounded whatever the input size. Equal to :meth:`encode` per batch.
        """
        return ordered_map(worker_encode, batches, init=worker_init, init_args=(self.kind, self.proto),
                           workers=workers, inline=inline_batches)

    def blank_ids(self) -> np.ndarray:
        """int64 (b,): the ids that say nothing of a text: ``<unk>``, the bare word start U+2581 (what an emoji or
        a script the vocabulary lacks becomes with it) and pieces of punctuation alone (:func:`says_nothing`). A
        text of these alone is embedded as an empty one."""
        if not hasattr(self, "_blank"):
            pieces = (self.sp.id_to_piece(i) for i in range(self.vocab_size))
            self._blank = np.array([self.sp.unk_id()] + [i for i, p in enumerate(pieces) if i != self.sp.unk_id()
                                                         and not self.sp.is_control(i) and says_nothing(p)], np.int64)
        return self._blank

    def pieces_start_words(self) -> np.ndarray:
        """bool (vocab_size,): pieces that begin a word (SentencePiece's U+2581 prefix)."""
        return np.array([self.sp.id_to_piece(i).startswith("\u2581") for i in range(self.vocab_size)])


class VocabTokenizer:
    """Word or character-trigram tokens looked up in a fixed vocabulary (the WORD and TRIGRAM baselines
    of Wieting et al. 2016/2019). Text is lowercased; tokens outside the vocabulary map to id 0 (``<unk>``).

    - ``word``: runs of word characters, and runs of other non-space characters (punctuation);
    - ``trigram``: the character trigrams of each whitespace-separated word written as ``#word#``
      (``#`` marks the word's boundaries; a one-letter word gives one trigram ``#a#``).

    ``proto`` (the bytes stored in a model as ``vocab.txt``) is a header line
    ``bitextmine-vocab 1 KIND`` followed by one token per line, id order, ``<unk>`` first.
    """

    filename = "vocab.txt"
    KINDS = ("word", "trigram")
    _WORD = re.compile(r"\w+|[^\w\s]+")

    def __init__(self, kind: str, tokens: Sequence[str]):
        if kind not in self.KINDS:
            raise ModelFormatError(f"vocabulary kind {kind!r}; expected one of {', '.join(self.KINDS)}")
        self.kind = kind
        self.tokens = list(tokens)
        self.index = {t: i for i, t in enumerate(self.tokens)}
        self.proto = (f"bitextmine-vocab 1 {kind}\n" + "".join(t + "\n" for t in self.tokens)).encode("utf-8")

    @classmethod
    def from_proto(cls, proto: bytes, name: str = "vocab.txt") -> "VocabTokenizer":
        try:
            lines = proto.decode("utf-8").split("\n")
        except UnicodeDecodeError:
            raise ModelFormatError(f"{name}: not UTF-8; expected a bitextmine vocabulary") from None
        head = lines[0].split(" ")
        if len(head) != 3 or head[0] != "bitextmine-vocab" or head[1] != "1":
            raise ModelFormatError(f"{name} line 1: {lines[0][:60]!r}; expected 'bitextmine-vocab 1 KIND'")
        if lines[-1] != "":
            raise ModelFormatError(f"{name}: truncated (no final newline)")
        return cls(head[2], lines[1:-1])

    @classmethod
    def build(cls, kind: str, texts: Iterable[str], size: int) -> "VocabTokenizer":
        """The ``size - 1`` most frequent tokens of ``texts`` (ties broken by first occurrence) plus ``<unk>``."""
        from collections import Counter

        split = cls._splitter(kind)
        counts: Counter = Counter()
        for t in texts:
            counts.update(split(t))
        return cls(kind, ["<unk>"] + [tok for tok, _ in counts.most_common(max(0, size - 1))])

    @classmethod
    def _splitter(cls, kind: str):
        if kind == "word":
            return lambda text: cls._WORD.findall(text.lower())
        return lambda text: [w[i : i + 3] for w in ("#" + x + "#" for x in text.lower().split())
                             for i in range(max(1, len(w) - 2))]

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def blank_ids(self) -> np.ndarray:
        """int64 (1,): ``<unk>`` (id 0), what every token outside the vocabulary becomes (:meth:`Tokenizer.blank_ids`)."""
        return np.zeros(1, np.int64)

    def split(self, text: str) -> list[str]:
        """The tokens of one text, before vocabulary lookup."""
        return self._splitter(self.kind)(text)

    def encode_lists(self, texts: Sequence[str], *, threads: int = 0) -> list[np.ndarray]:
        """Token ids per text: a list of int32 arrays."""
        split, get = self._splitter(self.kind), self.index.get
        return [np.fromiter((get(t, 0) for t in split(x)), np.int32) for x in texts]

    def encode(self, texts: Sequence[str], *, threads: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(ids int64 (total,), offsets int64 (n,)), as :meth:`Tokenizer.encode`."""
        return flatten(self.encode_lists(texts))

    def encode_stream(self, batches, *, workers: int = 0, inline_batches: int = 2):
        """As :meth:`Tokenizer.encode_stream`."""
        return ordered_map(worker_encode, batches, init=worker_init, init_args=(self.kind, self.proto),
                           workers=workers, inline=inline_batches)

    def pieces_start_words(self) -> np.ndarray:
        return np.ones(self.vocab_size, bool) if self.kind == "word" else np.array([t.startswith("#") for t in self.tokens])


_KINDS: dict[str, Callable[[bytes, str], Any]] = {}  # kind -> from_proto(proto, name), beyond the ones here


def register_tokenizer(kind: str, from_proto: Callable[[bytes, str], Any]) -> None:
    """Let :func:`make_tokenizer` (and so the worker processes of ``encode_stream``) build tokenizers of ``kind``
    with ``from_proto(proto, name)``."""
    _KINDS[kind] = from_proto


def make_tokenizer(kind: str, proto: bytes, name: str = "tokenizer"):
    """A tokenizer of ``kind`` (sentencepiece | word | trigram, or a registered kind such as tokenizers) from its
    stored bytes."""
    if kind == "sentencepiece":
        try:
            return Tokenizer(proto)
        except RuntimeError as e:
            raise ModelFormatError(f"{name}: not a SentencePiece model ({e})") from None
    if kind in _KINDS:
        return _KINDS[kind](proto, name)
    tok = VocabTokenizer.from_proto(proto, name)
    if tok.kind != kind:
        raise ModelFormatError(f"{name}: a {tok.kind} vocabulary; expected {kind}")
    return tok


_WORKER_TOK = None


def worker_init(kind: str, proto: bytes, child: bool) -> None:
    """Set up this process's tokenizer for :func:`worker_encode` (an ``ordered_map`` init)."""
    global _WORKER_TOK
    _WORKER_TOK = make_tokenizer(kind, proto)


def worker_encode(batch: "Sequence[str] | RawBlock") -> tuple[np.ndarray, np.ndarray]:
    """Decode (a RawBlock) and tokenise one batch with one thread: (ids int32 (total,), offsets int32 (n,))."""
    tok = _WORKER_TOK
    if isinstance(tok, Tokenizer):
        # lists of ints, flattened with fromiter: cheaper than an array per sentence (0.4 us less per UI string)
        pieces = tok.sp.encode(_texts(batch), num_threads=1)
        lengths = np.fromiter(map(len, pieces), np.int64, len(pieces))
        offsets = np.zeros(len(pieces), np.int32)
        np.cumsum(lengths[:-1], out=offsets[1:], dtype=np.int32)
        return np.fromiter(itertools.chain.from_iterable(pieces), np.int32, int(lengths.sum())), offsets
    return _flatten32(tok.encode_lists(_texts(batch), threads=1))


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
    """As :func:`flatten`, in int32 (the pieces are int32 arrays already: no round trip through int64)."""
    n = len(pieces)
    if n == 0:
        return np.zeros(0, np.int32), np.zeros(0, np.int32)
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=n)
    offsets = np.zeros(n, np.int32)
    np.cumsum(lengths[:-1], out=offsets[1:], dtype=np.int32)
    ids = np.concatenate(pieces).astype(np.int32, copy=False) if lengths.sum() else np.zeros(0, np.int32)
    return ids, offsets


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
