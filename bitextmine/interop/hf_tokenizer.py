"""A Hugging Face ``tokenizers`` tokenizer (a ``tokenizer.json``), as sentence-transformers StaticEmbedding and
model2vec models carry it (:class:`JsonTokenizer`), and what both formats agree on about it: the ``tokenizers``
package (:func:`tokenizers_module`), the token model2vec drops (:func:`model2vec_unk_id`) and the token a model2vec
export gives each run of unknown characters (:data:`UNKNOWN_RUN`).

Importing this module registers the ``tokenizers`` kind with :func:`bitextmine.tokenizer.make_tokenizer`, so that
worker processes rebuild the tokenizer from its kind and bytes.
"""

from __future__ import annotations

import json
from typing import Sequence

import numpy as np

from ..errors import MissingDependencyError, ModelFormatError
from ..parallel import gc_paused, ordered_map
from ..tokenizer import flatten, register_tokenizer, says_nothing, worker_encode, worker_init

UNKNOWN_RUN = "\uf8ff"  # a private-use character: no SentencePiece model here holds it (checked on export)


def tokenizers_module():
    """The ``tokenizers`` package, or MissingDependencyError naming the pip command."""
    try:
        import tokenizers
    except ImportError:
        raise MissingDependencyError(
            "the Hugging Face tokenizers package is needed to read or write tokenizer.json; "
            "pip install 'bitextmine[interop]' (or pip install tokenizers)") from None
    return tokenizers


def model2vec_unk_id(tk) -> "int | None":
    """The token model2vec removes from every sentence: the model's ``unk_token`` (WordPiece, BPE,
    WordLevel) or the unigram model's ``unk_id``; None if it has none."""
    model = tk.model
    if hasattr(model, "unk_token"):
        return None if model.unk_token is None else tk.token_to_id(model.unk_token)
    return json.loads(tk.to_str())["model"].get("unk_id")


class JsonTokenizer:
    """A Hugging Face ``tokenizers`` tokenizer (a ``tokenizer.json``), as the sentence-transformers
    StaticEmbedding and model2vec models carry: texts are encoded without special tokens and without padding,
    truncated as the tokenizer.json says (``max_tokens="file"``), to ``max_tokens`` tokens, or not (None).

    For model2vec models, ``drop_ids`` (its unknown token) are removed from every sentence and ``max_chars``
    cuts each text first, as model2vec's ``StaticModel.encode`` does, so the ids are the ones that library
    averages. ``proto`` (what travels to worker processes and enters the model fingerprint) is a JSON object
    holding the tokenizer.json text and these settings.
    """

    kind = "tokenizers"
    filename = "tokenizer.json"

    def __init__(self, tokenizer_json: str, *, drop_ids: Sequence[int] = (), max_tokens: "int | None | str" = "file",
                 max_chars: "int | None" = None, name: str = "tokenizer.json"):
        tk = tokenizers_module()
        try:
            self.tk = tk.Tokenizer.from_str(tokenizer_json)
        except Exception as e:  # tokenizers raises a bare Exception for a malformed file
            raise ModelFormatError(f"{name}: not a tokenizers tokenizer.json ({e})") from None
        self.tk.no_padding()
        if max_tokens is None:
            self.tk.no_truncation()
        elif max_tokens != "file":  # "file": as the tokenizer.json says
            self.tk.enable_truncation(int(max_tokens))
        self.tokenizer_json = tokenizer_json
        self.drop_ids = sorted(set(int(i) for i in drop_ids))
        self.max_tokens, self.max_chars = max_tokens, max_chars
        self.proto = json.dumps({"tokenizer_json": tokenizer_json, "drop_ids": self.drop_ids,
                                 "max_tokens": max_tokens, "max_chars": max_chars}, sort_keys=True).encode("utf-8")

    @classmethod
    def from_proto(cls, proto: bytes, name: str = "tokenizer") -> "JsonTokenizer":
        try:
            d = json.loads(proto.decode("utf-8"))
            return cls(d["tokenizer_json"], drop_ids=d["drop_ids"], max_tokens=d["max_tokens"],
                       max_chars=d["max_chars"], name=name)
        except (UnicodeDecodeError, ValueError, KeyError, TypeError):
            raise ModelFormatError(f"{name}: not a bitextmine tokenizers wrapper") from None

    @property
    def vocab_size(self) -> int:
        return self.tk.get_vocab_size(with_added_tokens=True)

    def blank_ids(self) -> np.ndarray:
        """int64 (b,): the ids that say nothing of a text (:meth:`Tokenizer.blank_ids`): the unknown token, unless
        it is dropped anyway, tokens of punctuation alone or a bare U+2581, and the unknown run of a model2vec export
        (:data:`UNKNOWN_RUN`: what SentencePiece's ``<unk>`` is there)."""
        if not hasattr(self, "_blank"):
            unk = model2vec_unk_id(self.tk)
            ids = {unk} if unk is not None and unk not in self.drop_ids else set()
            ids |= {i for t, i in self.tk.get_vocab(with_added_tokens=False).items()
                    if says_nothing(t.removeprefix("##")) or t == UNKNOWN_RUN}
            self._blank = np.array(sorted(ids), np.int64)
        return self._blank

    def encode_lists(self, texts: Sequence[str], *, threads: int = 0) -> list[np.ndarray]:
        """Token ids per text: a list of int32 arrays. ``threads=1`` encodes one text at a time in this
        thread (the worker processes' way); otherwise the library's own threads encode the batch."""
        texts = [t[: self.max_chars] for t in texts] if self.max_chars is not None else list(texts)
        with gc_paused():
            if threads == 1:
                enc = self.tk.encode
                ids = [enc(t, add_special_tokens=False).ids for t in texts]
            else:
                ids = [e.ids for e in self.tk.encode_batch(texts, add_special_tokens=False)]
        out = [np.array(x, np.int32) for x in ids]
        if self.drop_ids:
            drop = np.array(self.drop_ids, np.int32)
            out = [x[~np.isin(x, drop)] for x in out]
        return out

    def encode(self, texts: Sequence[str], *, threads: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(ids int64 (total,), offsets int64 (n,)), as :meth:`Tokenizer.encode`."""
        return flatten(self.encode_lists(texts, threads=threads))

    def encode_stream(self, batches, *, workers: int = 0, inline_batches: int = 2):
        """As :meth:`Tokenizer.encode_stream`."""
        return ordered_map(worker_encode, batches, init=worker_init, init_args=(self.kind, self.proto),
                           workers=workers, inline=inline_batches)


register_tokenizer(JsonTokenizer.kind, JsonTokenizer.from_proto)
