"""Models: the encoders of Wieting et al. (2016, 2019) behind one on-disk format.

Encoders (``config.json`` ``encoder``):

- ``sp``: a sentence is the mean of its SentencePiece piece embeddings (the default);
- ``word``, ``trigram``: the mean of word / character-trigram embeddings (:class:`VocabTokenizer`);
- ``blstm-sp``: a bidirectional LSTM over SentencePiece piece embeddings, its states mean-pooled;
- ``static``: a sentence-transformers StaticEmbedding or model2vec model read in place
  (:mod:`bitextmine.interop.load`, through :func:`bitextmine.loading.load_model`): the mean of its token
  rows, its ``tokenizer.json`` tokenizer.

A model is a directory, format version 2 (version 1, SP only, is still read)::

    config.json              format_version, encoder, tokenizer, dim, vocab_size, dtype, ...
    sentencepiece.model      the tokenizer (SentencePiece), or
    vocab.txt                the tokenizer (word / trigram vocabulary)
    embeddings.safetensors   "embeddings" (vocab_size, emb_dim) float16/float32; for blstm-sp also
                             "lstm.*" weights; when known, "piece_counts" int64 (vocab_size,)
                             (token frequencies in the training data) and "sif_pc" float32 (dim,)
                             (the common component for SIF, see :mod:`bitextmine.sif`). A model
                             trained with separate vocabularies (``separate_vocab`` in config.json)
                             has 2 x vocab_size rows: the second half holds the marked language's
                             tokens (the papers' "language prefix" on non-English pieces)

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

from .config import ENCODERS
from .errors import ModelFormatError, is_version, regular_file
from .tokenizer import Tokenizer, VocabTokenizer, make_tokenizer

FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
CONFIG_FILE = "config.json"
TOKENIZER_FILE = "sentencepiece.model"
EMBEDDINGS_FILE = "embeddings.safetensors"
TOKENIZER_OF = {"sp": "sentencepiece", "blstm-sp": "sentencepiece", "word": "word", "trigram": "trigram"}


def default_model_dir() -> str:
    """Path of the model that ships inside the package."""
    return str(resources.files("bitextmine") / "models" / "default")


@dataclass
class Model:
    """A loaded model: tokenizer, token embeddings float32 (vocab_size, emb_dim), other tensors (the
    BiLSTM's ``lstm.*`` weights, ``piece_counts``, ``sif_pc``) and its config dict."""

    tokenizer: "Tokenizer | VocabTokenizer"
    embeddings: np.ndarray
    config: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    tensors: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def encoder(self) -> str:
        return self.config.get("encoder", "sp")

    @property
    def mining(self) -> dict | None:
        """The mining settings calibrated per language (:mod:`bitextmine.mining.calibrated`), or None."""
        return self.config.get("mining")

    @property
    def second_stage(self):
        """The model's second stage (:class:`bitextmine.judge.SecondStage`), or None; read once, with the settings
        (min_prob, max_lines) of the model's calibration where it holds them."""
        if "_second_stage" not in self.__dict__:
            from .judge import load_second_stage
            from .lexicon import vocabulary_fingerprint

            from .tokenizer import Tokenizer

            # the tables name the SentencePiece vocabulary; an export read back (interop) has the same piece ids
            # in its tokenizer.json, checked when it was written
            fp = vocabulary_fingerprint(self.tokenizer.proto) if isinstance(self.tokenizer, Tokenizer) else None
            from .mining.calibrated import calibrated_stage

            stage = load_second_stage(self.path, fp, self.embeddings, self.config.get("unk_id")) if self.path else None
            self.__dict__["_second_stage"] = calibrated_stage(stage, self.mining)
        return self.__dict__["_second_stage"]

    @property
    def is_bag(self) -> bool:
        """True for the averaging encoders (sp, word, trigram): a sentence is a mean of table rows."""
        return self.encoder != "blstm-sp"

    @property
    def marked_offset(self) -> int:
        """For a model with separate vocabularies (``train --separate-vocab``): the id offset of the marked
        language's tokens (its vectors are rows offset..2*offset-1); 0 for a shared vocabulary."""
        return self.tokenizer.vocab_size if self.config.get("separate_vocab") else 0

    @property
    def stored_dtype(self) -> str:
        """The dtype the token table is stored in (float16 or float32; it is loaded as float32)."""
        return str(self.config.get("dtype", "float32"))

    @property
    def dim(self) -> int:
        """Dimension of the sentence embeddings."""
        if self.is_bag:
            return int(self.embeddings.shape[1])
        return 2 * int(self.tensors["lstm.weight_hh_l0"].shape[1])

    @property
    def fingerprint(self) -> str:
        """First 16 hex digits of sha256 over the tokenizer and every stored tensor."""
        fp = self.config.get("fingerprint")
        if fp:
            return fp
        return compute_fingerprint(self.tokenizer.proto, self.embeddings, self.tensors)

    def save(self, path: str, *, dtype: str = "float16") -> None:
        """Write the model directory (see module docstring). ``dtype`` (float16 or float32) applies to
        the embedding table and the LSTM weights."""
        from safetensors.numpy import save_file

        if dtype not in ("float16", "float32"):
            raise ModelFormatError(f"dtype {dtype!r}: expected float16 or float32")
        if self.encoder not in ENCODERS:
            raise ModelFormatError(f"encoder {self.encoder!r}; expected one of {', '.join(ENCODERS)}")
        os.makedirs(path, exist_ok=True)
        emb = np.ascontiguousarray(self.embeddings.astype(dtype))
        extra = {k: np.ascontiguousarray(v.astype(dtype) if k.startswith("lstm.") else v)
                 for k, v in self.tensors.items()}
        cfg = dict(self.config)
        cfg.update(
            format_version=FORMAT_VERSION,
            encoder=self.encoder,
            tokenizer=self.tokenizer.kind,
            dim=self.dim,
            emb_dim=int(emb.shape[1]),
            vocab_size=int(emb.shape[0]),
            dtype=dtype,
            fingerprint=compute_fingerprint(self.tokenizer.proto, emb, extra),
        )
        for name in (TOKENIZER_FILE, VocabTokenizer.filename):  # a rewritten model keeps one tokenizer file
            if os.path.exists(os.path.join(path, name)):
                os.remove(os.path.join(path, name))
        with open(os.path.join(path, self.tokenizer.filename), "wb") as f:
            f.write(self.tokenizer.proto)
        save_file({"embeddings": emb, **extra}, os.path.join(path, EMBEDDINGS_FILE))
        with open(os.path.join(path, CONFIG_FILE), "w", encoding="utf-8") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
            f.write("\n")
        self.config = cfg
        self.path = path


def compute_fingerprint(tokenizer_proto: bytes, embeddings: np.ndarray, tensors: dict | None = None) -> str:
    h = hashlib.sha256()
    h.update(tokenizer_proto)
    h.update(str(embeddings.dtype).encode())
    h.update(np.ascontiguousarray(embeddings).tobytes())
    for name in sorted(tensors or {}):  # a model without extra tensors keeps its format-1 fingerprint
        h.update(name.encode())
        h.update(str(tensors[name].dtype).encode())
        h.update(np.ascontiguousarray(tensors[name]).tobytes())
    return h.hexdigest()[:16]


def read_versioned_json(path: str, *, version: "int | tuple[int, ...]", what: str, retired: dict | None = None
                        ) -> dict:
    """Read a JSON object carrying ``format_version``; raise ModelFormatError unless it is ``version``
    (or one of them).

    ``what`` completes the message for a missing file ("expected ..."); ``retired`` {older version: why files of it
    are no longer read} gives the message for those.
    """
    versions = (version,) if isinstance(version, int) else tuple(version)
    regular_file(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ModelFormatError(f"{path}: missing; expected {what}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelFormatError(f"{path}: not valid JSON ({e})") from None
    found = data.get("format_version") if isinstance(data, dict) else None
    if not is_version(found, versions):
        if is_version(found, tuple(retired or ())):
            raise ModelFormatError(f"{path}: format_version {found}, {retired[found]}")
        wanted = " or ".join(str(v) for v in versions)
        raise ModelFormatError(f"{path}: format_version {found!r}; this bitextmine reads format_version {wanted}")
    return data


def load_native_model(path: str) -> Model:
    """Load a bitextmine model directory (module docstring); :func:`bitextmine.loading.load_model` reads any
    model directory, this format or another. Raises ModelFormatError."""
    cfg_path = os.path.join(path, CONFIG_FILE)
    cfg = read_versioned_json(cfg_path, version=READABLE_VERSIONS, what="a model directory made by 'bitextmine train'")
    encoder = cfg.get("encoder")
    if encoder not in ENCODERS:
        raise ModelFormatError(f"{cfg_path}: encoder {encoder!r}; expected one of {', '.join(ENCODERS)}")
    kind = TOKENIZER_OF[encoder]
    tok_file = TOKENIZER_FILE if kind == "sentencepiece" else VocabTokenizer.filename
    tok_path = os.path.join(path, tok_file)
    regular_file(tok_path)
    try:
        with open(tok_path, "rb") as f:
            tok = make_tokenizer(kind, f.read(), tok_path)
    except OSError as e:
        raise ModelFormatError(f"{tok_path}: cannot read the tokenizer ({e.strerror}); expected {tok_file}") from None
    emb_path = os.path.join(path, EMBEDDINGS_FILE)
    regular_file(emb_path)
    try:
        from safetensors import SafetensorError
        from safetensors.numpy import load_file

        tensors = load_file(emb_path)
    except FileNotFoundError:
        raise ModelFormatError(f"{emb_path}: missing; expected the piece embeddings") from None
    except (SafetensorError, OSError, ValueError) as e:
        raise ModelFormatError(f"{emb_path}: not a readable safetensors file ({e})") from None
    emb = tensors.pop("embeddings", None)
    if emb is None or emb.ndim != 2:
        raise ModelFormatError(f"{emb_path}: expected one 2-d tensor named 'embeddings'")
    emb_dim = cfg.get("emb_dim", cfg.get("dim"))
    if emb.shape != (cfg.get("vocab_size"), emb_dim):
        raise ModelFormatError(
            f"{emb_path}: embeddings of shape {tuple(emb.shape)}; config.json says "
            f"({cfg.get('vocab_size')}, {emb_dim})"
        )
    rows = tok.vocab_size * (2 if cfg.get("separate_vocab") else 1)
    if emb.shape[0] != rows:
        raise ModelFormatError(
            f"{path}: tokenizer has {tok.vocab_size} pieces, so the embeddings should have {rows} rows, "
            f"not {emb.shape[0]}"
        )
    _check_fingerprint(cfg, cfg_path, tok.proto, emb, tensors)
    tensors = {k: (v.astype(np.float32) if v.dtype == np.float16 else v) for k, v in tensors.items()}
    model = Model(tokenizer=tok, embeddings=emb.astype(np.float32), config=cfg, path=path, tensors=tensors)
    if encoder == "blstm-sp" and "lstm.weight_hh_l0" not in tensors:
        raise ModelFormatError(f"{emb_path}: a blstm-sp model without its lstm.* weights")
    if model.dim != cfg.get("dim"):
        raise ModelFormatError(f"{cfg_path}: dim {cfg.get('dim')} but the stored weights give {model.dim}")
    for name, shape in (("piece_counts", (rows,)), ("sif_pc", (model.dim,))):
        if name in tensors and tensors[name].shape != shape:
            raise ModelFormatError(f"{emb_path}: {name} of shape {tensors[name].shape}; expected {shape}")
    if "mining" in cfg:
        from .mining.calibrated import check_section

        check_section(cfg["mining"], cfg_path)
    return model


def _check_fingerprint(cfg: dict, cfg_path: str, proto: bytes, emb: np.ndarray, tensors: dict) -> None:
    """ModelFormatError when the model's files, as stored, do not give the fingerprint ``config.json`` records (a
    tokenizer or a table replaced after saving): the fingerprint names the model's embeddings and caches, so a
    model that is not the one it names would reuse another model's vectors. A config without one: no check."""
    said = cfg.get("fingerprint")
    if not said:
        return
    given = compute_fingerprint(proto, emb, tensors)
    if given != said:
        raise ModelFormatError(f"{cfg_path}: fingerprint {said}, but the model's tokenizer and tensors give "
                               f"{given}: a file of the model changed after it was saved; save the changed model "
                               "again (Model.save) or restore its files")


# --- the trainable torch modules ------------------------------------------------------------


def lstm_in_dtype(lstm, packed, dtype):
    """Run ``lstm`` (torch.nn.LSTM) over the PackedSequence ``packed`` in ``dtype``: input and a copy of
    the weights cast to it, autocast off inside; returns (output PackedSequence with float32 data, state).
    Gradients reach the float32 weights through the cast. The cast weights are separate tensors, so cuDNN
    copies them into one buffer on each call (what the cast costs anyway); its warning that the weights are
    "not part of single contiguous chunk of memory" is expected here and silenced."""
    import warnings

    import torch

    dev = packed.data.device.type
    params = {k: v.to(dtype) for k, v in lstm.named_parameters()}
    with torch.autocast(dev, enabled=False), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="RNN module weights are not part of single contiguous chunk")
        out, h = torch.func.functional_call(lstm, params, (packed._replace(data=packed.data.to(dtype)),))
    return out._replace(data=out.data.float()), h


def make_encoder(encoder: str, vocab_size: int, dim: int):
    """A torch module for ``encoder``: forward(ids, offsets, keep=None, token_weights=None) -> (n, dim).

    ``ids`` int64 (total,), ``offsets`` int64 (n,) (flat layout); ``keep`` float (total,) 0/1 piece
    dropout mask; ``token_weights`` float (total,) multiplies each token's vector before the mean
    (SIF). The bag encoders (sp, word, trigram) have one parameter ``weight`` (vocab_size, dim); the
    BiLSTM (blstm-sp) has ``weight`` (vocab_size, dim) and an LSTM of dim // 2 units per direction, so
    its sentence embedding also has ``dim`` dimensions. Imported lazily (the CLI's help needs no torch).
    """
    import torch
    import torch.nn.functional as F

    def bags(ids, offsets):
        n = offsets.shape[0]
        lengths = torch.diff(offsets, append=offsets.new_tensor([ids.shape[0]]))
        return n, lengths, torch.repeat_interleave(torch.arange(n, device=ids.device), lengths)

    class BagEncoder(torch.nn.Module):
        """Mean of token embeddings (SP, WORD, TRIGRAM), with piece dropout during training."""

        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.empty(vocab_size, dim))

        def forward(self, ids, offsets, keep=None, token_weights=None):
            if keep is None and token_weights is None:
                return F.embedding_bag(ids, self.weight, offsets, mode="mean")
            n, lengths, bag = bags(ids, offsets)
            w = keep if token_weights is None else (token_weights if keep is None else keep * token_weights)
            sums = F.embedding_bag(ids, self.weight, offsets, mode="sum", per_sample_weights=w)
            counts = lengths.to(sums.dtype) if keep is None else \
                torch.zeros(n, device=ids.device, dtype=keep.dtype).index_add_(0, bag, keep)
            return sums / counts.clamp(min=1.0).unsqueeze(1)

    class BLSTMEncoder(torch.nn.Module):
        """A bidirectional LSTM over piece embeddings; the sentence is the mean of its output states."""

        def __init__(self) -> None:
            super().__init__()
            if dim % 2:
                from .errors import ConfigError

                raise ConfigError(f"dim {dim}: blstm-sp needs an even dimension (two directions of dim/2)")
            self.weight = torch.nn.Parameter(torch.empty(vocab_size, dim))
            self.lstm = torch.nn.LSTM(dim, dim // 2, batch_first=True, bidirectional=True)

        def forward(self, ids, offsets, keep=None, token_weights=None):
            from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

            n, lengths, bag = bags(ids, offsets)
            if n == 0:
                return torch.zeros(0, dim, device=ids.device)
            pos = torch.arange(ids.shape[0], device=ids.device) - torch.repeat_interleave(offsets, lengths)
            L = max(1, int(lengths.max()))
            x = self.weight.new_zeros(n, L, self.weight.shape[1])
            e = F.embedding(ids, self.weight)
            if keep is not None:  # dropout on the input vectors
                e = e * keep.unsqueeze(1)
            x = x.index_put((bag, pos), e)
            packed = pack_padded_sequence(x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
            out, _ = self._lstm(packed)
            out, _ = pad_packed_sequence(out, batch_first=True, total_length=L)
            h = out[bag, pos]
            if token_weights is not None:
                h = h * token_weights.unsqueeze(1)
            sums = h.new_zeros(n, h.shape[1]).index_add_(0, bag, h)
            return sums / lengths.clamp(min=1).to(h.dtype).unsqueeze(1)

        def _lstm(self, packed):
            """The LSTM over a PackedSequence. Under CUDA autocast (training's amp: bf16) it runs explicitly
            in the autocast dtype (:func:`lstm_in_dtype`): CUDA's autocast would otherwise run cuDNN's LSTM
            in float16 without a gradient scaler. On a CPU the LSTM runs as CPU autocast decides (an explicit
            bf16 LSTM over packed sequences takes a slow path there)."""
            if packed.data.device.type != "cuda" or not torch.is_autocast_enabled("cuda"):
                return self.lstm(packed)
            return lstm_in_dtype(self.lstm, packed, torch.get_autocast_dtype("cuda"))

    if encoder == "blstm-sp":
        return BLSTMEncoder()
    if encoder in ENCODERS:
        return BagEncoder()
    raise ModelFormatError(f"encoder {encoder!r}; expected one of {', '.join(ENCODERS)}")


def embed_in_chunks(enc, ids: np.ndarray, offsets: np.ndarray, *, chunk: int = 2048, token_weights=None,
                    post=None):
    """Sentence vectors of a module from :func:`make_encoder` for flat (ids, offsets), ``chunk`` sentences
    at a time, without gradients and in eval mode (the module's mode is restored): torch float (n, dim)
    on the module's device. ``token_weights`` (torch (vocab,)) weight each token (SIF); ``post`` maps
    each chunk's (m, dim) vectors before they are joined (normalising, removing a component).
    """
    import torch

    dev = enc.weight.device
    n = len(offsets)
    if n == 0:
        return torch.zeros(0, enc.weight.shape[1], device=dev)
    ends = np.append(np.asarray(offsets[1:], np.int64), len(ids))
    parts = []
    was_training = enc.training
    enc.eval()
    try:
        with torch.no_grad():
            for a in range(0, n, chunk):
                b = min(n, a + chunk)
                lo, hi = int(offsets[a]), int(ends[b - 1])
                i = torch.from_numpy(np.asarray(ids[lo:hi], np.int64)).to(dev)
                o = torch.from_numpy(np.asarray(offsets[a:b], np.int64) - lo).to(dev)
                x = enc(i, o, token_weights=None if token_weights is None else token_weights[i])
                parts.append(x if post is None else post(x))
    finally:
        enc.train(was_training)
    return torch.cat(parts)


def module_from_model(model: Model, device: str = "cpu"):
    """The torch module of ``model`` with its stored weights, on ``device``."""
    import torch

    enc = make_encoder(model.encoder, model.embeddings.shape[0], model.embeddings.shape[1])
    state = {"weight": torch.from_numpy(model.embeddings)}
    state.update({k: torch.from_numpy(np.asarray(v, np.float32)) for k, v in model.tensors.items() if k.startswith("lstm.")})
    enc.load_state_dict(state)
    return enc.to(device)


def tensors_from_module(enc) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(embeddings float32 (vocab, emb_dim), other weights by name) of a module from :func:`make_encoder`."""
    sd = {k: v.detach().float().cpu().numpy() for k, v in enc.state_dict().items()}
    return sd.pop("weight"), sd


def shuffle_words(ids, offsets, word_start, p: float, generator):
    """Training noise for the BiLSTM (Wieting et al. 2019): each sentence, with probability ``p``, has
    its words (runs of pieces from one word-initial piece to the next) put in random order.

    ids int64 (total,), offsets int64 (n,) on the CPU; word_start bool (vocab,); ``generator`` a CPU
    torch.Generator. Returns new ids int64 (total,); the offsets do not change.
    """
    import torch

    n, total = offsets.shape[0], ids.shape[0]
    chosen = (torch.rand(n, generator=generator) < p).nonzero().flatten().tolist()
    if not chosen:
        return ids
    ids = ids.clone()
    ends = offsets.tolist()[1:] + [total]
    starts_all = offsets.tolist()
    for i in chosen:
        a, b = starts_all[i], ends[i]
        seg = ids[a:b].clone()
        starts = word_start[seg].nonzero().flatten().tolist()
        if not starts or starts[0] != 0:
            starts = [0] + starts
        if len(starts) < 2:
            continue
        bounds = starts + [b - a]
        order = torch.randperm(len(starts), generator=generator).tolist()
        ids[a:b] = torch.cat([seg[bounds[k] : bounds[k + 1]] for k in order])
    return ids


def piece_dropout(ids, offsets, p: float, generator):
    """Keep mask float32 (total,) on ids' device: each piece kept with probability 1-p, at least one per
    non-empty sentence.

    ids int64 (total,), offsets int64 (n,) on one device; ``generator`` a CPU torch.Generator: the
    ``total`` uniforms are drawn on the CPU and moved to the device, so a seeded run drops the same
    pieces on every device.
    """
    import torch

    total = ids.shape[0]
    keep = (torch.rand(total, generator=generator).to(ids.device) >= p).float()
    n = offsets.shape[0]
    lengths = torch.diff(offsets, append=offsets.new_tensor([total]))
    bag = torch.repeat_interleave(torch.arange(n, device=ids.device), lengths)
    counts = torch.zeros(n, device=ids.device).index_add_(0, bag, keep)
    none_left = (counts == 0)[bag]
    return torch.where(none_left, torch.ones_like(keep), keep)
