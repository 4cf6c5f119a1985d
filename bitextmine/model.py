"""The "SP" encoder (Wieting et al. 2019): a sentence is the mean of its SentencePiece piece embeddings.

A model is a directory, format version 1::

    config.json              format_version, encoder, dim, vocab_size, dtype, languages, training
    sentencepiece.model      the joint SentencePiece model
    embeddings.safetensors   one tensor "embeddings", (vocab_size, dim), float16 or float32

Loading checks the version and every part; nothing is unpickled.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import numpy as np

from .errors import ModelFormatError
from .tokenizer import Tokenizer

FORMAT_VERSION = 1
CONFIG_FILE = "config.json"
TOKENIZER_FILE = "sentencepiece.model"
EMBEDDINGS_FILE = "embeddings.safetensors"
ENCODERS = ("sp",)


def default_model_dir() -> str:
    """Path of the model that ships inside the package."""
    return str(resources.files("bitextmine") / "models" / "default")


@dataclass
class Model:
    """A loaded model: tokenizer, piece embeddings float32 (vocab_size, dim), and its config dict."""

    tokenizer: Tokenizer
    embeddings: np.ndarray
    config: dict[str, Any] = field(default_factory=dict)
    path: str | None = None

    @property
    def dim(self) -> int:
        return int(self.embeddings.shape[1])

    @property
    def fingerprint(self) -> str:
        """First 16 hex digits of sha256 over the tokenizer and the stored embeddings."""
        fp = self.config.get("fingerprint")
        if fp:
            return fp
        return compute_fingerprint(self.tokenizer.proto, self.embeddings)

    def save(self, path: str, *, dtype: str = "float16") -> None:
        """Write the model directory (see module docstring). ``dtype`` is float16 or float32."""
        from safetensors.numpy import save_file

        if dtype not in ("float16", "float32"):
            raise ModelFormatError(f"dtype {dtype!r}: expected float16 or float32")
        os.makedirs(path, exist_ok=True)
        emb = np.ascontiguousarray(self.embeddings.astype(dtype))
        cfg = dict(self.config)
        cfg.update(
            format_version=FORMAT_VERSION,
            encoder=cfg.get("encoder", "sp"),
            dim=int(emb.shape[1]),
            vocab_size=int(emb.shape[0]),
            dtype=dtype,
            fingerprint=compute_fingerprint(self.tokenizer.proto, emb),
        )
        with open(os.path.join(path, TOKENIZER_FILE), "wb") as f:
            f.write(self.tokenizer.proto)
        save_file({"embeddings": emb}, os.path.join(path, EMBEDDINGS_FILE))
        with open(os.path.join(path, CONFIG_FILE), "w", encoding="utf-8") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
            f.write("\n")
        self.config = cfg
        self.path = path


def compute_fingerprint(tokenizer_proto: bytes, embeddings: np.ndarray) -> str:
    h = hashlib.sha256()
    h.update(tokenizer_proto)
    h.update(str(embeddings.dtype).encode())
    h.update(np.ascontiguousarray(embeddings).tobytes())
    return h.hexdigest()[:16]


def read_versioned_json(path: str, *, version: int, what: str) -> dict:
    """Read a JSON object carrying ``format_version``; raise ModelFormatError unless it is ``version``.

    ``what`` completes the message for a missing file ("expected ...").
    """
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ModelFormatError(f"{path}: missing; expected {what}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelFormatError(f"{path}: not valid JSON ({e})") from None
    found = data.get("format_version") if isinstance(data, dict) else None
    if found != version:
        raise ModelFormatError(f"{path}: format_version {found!r}; this bitextmine reads format_version {version}")
    return data


def load_model(path: str | None = None) -> Model:
    """Load a model directory (``None`` = the bundled default model). Raises ModelFormatError."""
    path = path or default_model_dir()
    if not os.path.isdir(path):
        raise ModelFormatError(f"{path}: not a model directory; expected a folder made by 'bitextmine train'")
    cfg_path = os.path.join(path, CONFIG_FILE)
    cfg = read_versioned_json(cfg_path, version=FORMAT_VERSION, what="a model directory made by 'bitextmine train'")
    if cfg.get("encoder") not in ENCODERS:
        raise ModelFormatError(f"{cfg_path}: encoder {cfg.get('encoder')!r}; expected one of {', '.join(ENCODERS)}")
    tok = Tokenizer.load(os.path.join(path, TOKENIZER_FILE))
    emb_path = os.path.join(path, EMBEDDINGS_FILE)
    try:
        from safetensors import SafetensorError
        from safetensors.numpy import load_file

        tensors = load_file(emb_path)
    except FileNotFoundError:
        raise ModelFormatError(f"{emb_path}: missing; expected the piece embeddings") from None
    except (SafetensorError, OSError, ValueError) as e:
        raise ModelFormatError(f"{emb_path}: not a readable safetensors file ({e})") from None
    emb = tensors.get("embeddings")
    if emb is None or emb.ndim != 2:
        raise ModelFormatError(f"{emb_path}: expected one 2-d tensor named 'embeddings'")
    if emb.shape != (cfg.get("vocab_size"), cfg.get("dim")):
        raise ModelFormatError(
            f"{emb_path}: embeddings of shape {tuple(emb.shape)}; config.json says "
            f"({cfg.get('vocab_size')}, {cfg.get('dim')})"
        )
    if emb.shape[0] != tok.vocab_size:
        raise ModelFormatError(
            f"{path}: tokenizer has {tok.vocab_size} pieces but embeddings have {emb.shape[0]} rows"
        )
    return Model(tokenizer=tok, embeddings=emb.astype(np.float32), config=cfg, path=path)


# --- the trainable torch module -------------------------------------------------------------


def make_encoder(vocab_size: int, dim: int):
    """A torch ``SPEncoder`` (imported lazily so that the CLI's help does not import torch)."""
    import torch
    import torch.nn.functional as F

    class SPEncoder(torch.nn.Module):
        """Mean of piece embeddings, with piece dropout during training."""

        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.empty(vocab_size, dim))

        def forward(self, ids, offsets, keep=None):
            """ids int64 (total,), offsets int64 (n,), keep float (total,) 0/1 or None -> (n, dim)."""
            if keep is None:
                return F.embedding_bag(ids, self.weight, offsets, mode="mean")
            sums = F.embedding_bag(ids, self.weight, offsets, mode="sum", per_sample_weights=keep)
            n = offsets.shape[0]
            lengths = torch.diff(offsets, append=offsets.new_tensor([ids.shape[0]]))
            bag = torch.repeat_interleave(torch.arange(n, device=ids.device), lengths)
            counts = torch.zeros(n, device=ids.device, dtype=keep.dtype).index_add_(0, bag, keep)
            return sums / counts.clamp(min=1.0).unsqueeze(1)

    return SPEncoder()


def piece_dropout(ids, offsets, p: float, generator):
    """Keep mask float32 (total,): each piece kept with probability 1-p, at least one per non-empty sentence."""
    import torch

    total = ids.shape[0]
    keep = (torch.rand(total, generator=generator, device=ids.device) >= p).float()
    n = offsets.shape[0]
    lengths = torch.diff(offsets, append=offsets.new_tensor([total]))
    bag = torch.repeat_interleave(torch.arange(n, device=ids.device), lengths)
    counts = torch.zeros(n, device=ids.device).index_add_(0, bag, keep)
    none_left = (counts == 0)[bag]
    return torch.where(none_left, torch.ones_like(keep), keep)
