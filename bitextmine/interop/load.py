"""Read a sentence-transformers StaticEmbedding model or a model2vec model as a bitextmine :class:`Model`.

A sentence is encoded as those libraries encode it: their ``tokenizer.json`` (Hugging Face ``tokenizers``,
no special tokens, no padding), the mean of the token rows, then (always, in bitextmine) L2 normalisation.
The token rows are the stored table with a model2vec token ``mapping`` and per-token ``weights`` folded in
(row ``i`` = ``embeddings[mapping[i]] * weights[i]``, as sentence-transformers folds them). So the vectors
equal the library's where the library normalises (a ``Normalize`` module; model2vec's ``normalize``), and
equal the library's divided by their norm where it does not: bitextmine's search and margins need unit
vectors, and cosine similarities are the same either way.

model2vec specifics, followed so the ids are the ones that library averages: its unknown token is removed
from every sentence, and with ``max_length`` (config.json; 512 when absent, none when null) a text is first
cut to ``max_length x`` the median token length in characters and then to ``max_length`` tokens.

Which library a directory belongs to is read from its files (:func:`detect_format`). A ``bitextmine.json``
beside them (written by ``bitextmine export``) adds the source model's languages and calibrated mining
settings.
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..errors import ModelFormatError
from .hf_tokenizer import JsonTokenizer, model2vec_unk_id

ST_MODULES = "modules.json"
ST_WEIGHTS = "model.safetensors"
ST_TOKENIZER = "tokenizer.json"
M2V_CONFIG = "config.json"
M2V_DEFAULT_MAX_LENGTH = 512  # model2vec's DEFAULT_MAX_LENGTH, used when config.json has no max_length
M2V_MAX_LENGTH_LIMIT = 10_000_000  # a larger max_length is a damaged config (a text is cut at max_length x chars)
FORMATS = ("bitextmine", "sentence-transformers", "model2vec")
SUPPORTED_ST = "a StaticEmbedding module, optionally followed by Normalize"
SIDECAR = "bitextmine.json"
SIDECAR_VERSION = 1


def detect_format(path: str) -> str:
    """Which kind of model directory ``path`` is: bitextmine (config.json with ``format_version``), model2vec
    (another config.json beside model.safetensors and tokenizer.json, unless a modules.json names modules other
    than StaticEmbedding and Normalize: model2vec writes one of those, sentence-transformers one naming a
    Transformer beside that transformer's own config.json), sentence-transformers (modules.json);
    bitextmine when none fits, so that its loader reports what is missing."""
    cfg = _json_or_none(os.path.join(path, M2V_CONFIG))
    if isinstance(cfg, dict) and "format_version" in cfg:
        return "bitextmine"
    has = lambda name: os.path.exists(os.path.join(path, name))  # noqa: E731
    if isinstance(cfg, dict) and has(ST_WEIGHTS) and has(ST_TOKENIZER) and not _other_modules(path):
        return "model2vec"
    if has(ST_MODULES):
        return "sentence-transformers"
    return "bitextmine"


def _other_modules(path: str) -> bool:
    """Whether ``path``'s modules.json names a module other than StaticEmbedding and Normalize."""
    modules = _json_or_none(os.path.join(path, ST_MODULES))
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules if isinstance(m, dict)] \
        if isinstance(modules, list) else []
    return any(k not in ("StaticEmbedding", "Normalize") for k in kinds)


def load_static_model(path: str, fmt: str | None = None):
    """A :class:`bitextmine.model.Model` from a sentence-transformers or model2vec directory (``fmt`` None:
    :func:`detect_format`). Raises ModelFormatError; MissingDependencyError without ``tokenizers``."""
    fmt = fmt or detect_format(path)
    if fmt == "sentence-transformers":
        return load_sentence_transformers(path)
    if fmt == "model2vec":
        return load_model2vec(path)
    raise ModelFormatError(f"{path}: a {fmt} model directory; expected a sentence-transformers or model2vec one")


def load_sentence_transformers(path: str):
    """A sentence-transformers model made of one StaticEmbedding module (and optionally Normalize) as a
    bitextmine Model; another architecture raises ModelFormatError."""

    modules_path = os.path.join(path, ST_MODULES)
    modules = _json_or_none(modules_path)
    if not isinstance(modules, list) or not all(isinstance(m, dict) and "type" in m for m in modules):
        raise ModelFormatError(f"{modules_path}: expected a JSON list of modules with a 'type' each")
    kinds = [str(m["type"]).rsplit(".", 1)[-1] for m in modules]
    if not kinds or kinds[0] != "StaticEmbedding" or any(k != "Normalize" for k in kinds[1:]):
        shown = ", ".join(str(m["type"]) for m in modules) or "no modules"
        raise ModelFormatError(f"{modules_path}: modules {shown}; bitextmine reads sentence-transformers models "
                               f"made of {SUPPORTED_ST}")
    _refuse_default_prompt(path)
    folder = os.path.join(path, str(modules[0].get("path") or ""))
    tok_path = os.path.join(folder, ST_TOKENIZER)
    tokenizer = JsonTokenizer(_read_text(tok_path, "the StaticEmbedding's tokenizer.json"), name=tok_path)
    weights_path = os.path.join(folder, ST_WEIGHTS)
    tensors = _read_tensors(weights_path, "the StaticEmbedding's weights (pickled pytorch_model.bin is not read)")
    if "embedding.weight" in tensors:
        table = tensors["embedding.weight"]
    elif "embeddings" in tensors:  # a model2vec model saved in place of the module, as sentence-transformers reads it
        table = fold_model2vec(tensors["embeddings"], tensors.get("mapping"), tensors.get("weights"), weights_path)
    else:
        raise ModelFormatError(f"{weights_path}: expected a tensor 'embedding.weight' (or model2vec's 'embeddings')")
    return _model(path, "sentence-transformers", tokenizer, table, weights_path, normalize=len(kinds) > 1)


def _refuse_default_prompt(path: str) -> None:
    """ModelFormatError when the model's config_sentence_transformers.json names a default prompt: the library
    puts it before every text, which bitextmine does not, so the vectors would differ without a word."""
    p = os.path.join(path, "config_sentence_transformers.json")
    cfg = _json_or_none(p)
    name = cfg.get("default_prompt_name") if isinstance(cfg, dict) else None
    prompt = (cfg.get("prompts") or {}).get(name) if name else None
    if prompt:
        raise ModelFormatError(f"{p}: default_prompt_name {name!r}: sentence-transformers puts {prompt!r} before every "
                               "text, which bitextmine does not; expected a model without a default prompt")


def load_model2vec(path: str):
    """A model2vec model directory (config.json, model.safetensors, tokenizer.json) as a bitextmine Model."""

    cfg_path = os.path.join(path, M2V_CONFIG)
    cfg = _json_or_none(cfg_path)
    if not isinstance(cfg, dict):
        raise ModelFormatError(f"{cfg_path}: missing or not a JSON object; expected model2vec's config.json")
    tok_path = os.path.join(path, ST_TOKENIZER)
    text = _read_text(tok_path, "model2vec's tokenizer.json")
    max_length = cfg.get("max_length", M2V_DEFAULT_MAX_LENGTH)
    if max_length is not None and (not isinstance(max_length, int) or isinstance(max_length, bool)
                                   or not 1 <= max_length <= M2V_MAX_LENGTH_LIMIT):
        raise ModelFormatError(f"{cfg_path}: max_length {max_length!r}; expected null or a whole number of tokens "
                               f"from 1 to {M2V_MAX_LENGTH_LIMIT:,}")
    probe = JsonTokenizer(text, name=tok_path)
    unk = model2vec_unk_id(probe.tk)
    max_chars = None if max_length is None else int(max_length) * median_token_length(probe.tk)
    tokenizer = JsonTokenizer(text, drop_ids=() if unk is None else (unk,), max_tokens=max_length,
                              max_chars=max_chars, name=tok_path)
    weights_path = os.path.join(path, ST_WEIGHTS)
    tensors = _read_tensors(weights_path, "model2vec's embeddings")
    if "embeddings" not in tensors:
        raise ModelFormatError(f"{weights_path}: expected a tensor 'embeddings'")
    table = fold_model2vec(tensors["embeddings"], tensors.get("mapping"), tensors.get("weights"), weights_path)
    return _model(path, "model2vec", tokenizer, table, weights_path, normalize=bool(cfg.get("normalize", False)))


def fold_model2vec(embeddings: np.ndarray, mapping: "np.ndarray | None", weights: "np.ndarray | None",
                   name: str) -> np.ndarray:
    """float32 (vocab, dim): row i = ``embeddings[mapping[i]] * weights[i]`` (mapping and weights optional)."""
    table = np.asarray(embeddings).astype(np.float32)
    if table.ndim != 2:
        raise ModelFormatError(f"{name}: embeddings of shape {table.shape}; expected (vocab, dim)")
    if mapping is not None:
        mapping = np.asarray(mapping).astype(np.int64)
        if mapping.ndim != 1 or (mapping.size and (mapping.min() < 0 or mapping.max() >= len(table))):
            raise ModelFormatError(f"{name}: 'mapping' must be 1-d and index the {len(table)} embedding rows")
        table = table[mapping]
    if weights is not None:
        weights = np.asarray(weights).astype(np.float32)
        if weights.shape != (len(table),):
            raise ModelFormatError(f"{name}: 'weights' of shape {weights.shape}; expected ({len(table)},)")
        table = table * weights[:, None]
    return np.ascontiguousarray(table)


def median_token_length(tk) -> int:
    """int(median length of the vocabulary's tokens), as model2vec computes it for its character cut."""
    return int(np.median([len(t) for t in tk.get_vocab()]))


def _model(path: str, fmt: str, tokenizer, table: np.ndarray, weights_path: str, *, normalize: bool):
    from ..model import Model, compute_fingerprint

    if table.ndim != 2 or table.shape[0] < tokenizer.vocab_size or table.shape[1] < 1:
        raise ModelFormatError(f"{weights_path}: a table of shape {table.shape}; the tokenizer has "
                               f"{tokenizer.vocab_size} tokens, so it needs at least that many rows, of 1 or more "
                               "values")
    if not np.isfinite(table).all():
        row = int(np.flatnonzero(~np.isfinite(table).all(1))[0])
        raise ModelFormatError(f"{weights_path}: row {row} of the table holds a value that is not a finite number")
    if not table.any():
        raise ModelFormatError(f"{weights_path}: every row of the table is zero; no sentence would have a vector")
    table = np.ascontiguousarray(table, np.float32)
    config = {"encoder": "static", "tokenizer": tokenizer.kind, "source_format": fmt, "normalize": normalize,
              "dim": int(table.shape[1]), "emb_dim": int(table.shape[1]), "vocab_size": int(table.shape[0]),
              "dtype": "float32", "fingerprint": compute_fingerprint(tokenizer.proto, table)}
    config.update(_sidecar(path, lambda: export_seal(tokenizer, table)))
    return Model(tokenizer=tokenizer, embeddings=table, config=config, path=path)


def export_seal(tokenizer, table: np.ndarray) -> str:
    """What an export's ``export_fingerprint`` records: a hash of the table (float32) and of the vocabulary's tokens
    in id order. Not the files' bytes: a library that saves a model again writes its tokenizer.json anew (scores
    printed otherwise, modules moved) without changing what the model computes."""
    import hashlib

    vocab = tokenizer.tk.get_vocab(with_added_tokens=True)
    h = hashlib.sha256(np.ascontiguousarray(table, np.float32).tobytes())
    h.update("\n".join(sorted(vocab, key=vocab.get)).encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:16]


def _sidecar(path: str, seal) -> dict:
    """Languages and mining settings from ``bitextmine.json`` (none when the file is absent). ModelFormatError when
    it records the export's own fingerprint and the model's table and vocabulary (``seal()``, :func:`export_seal`)
    no longer give it: changed since the export, the model is not the one its mining settings and second stage
    were made for."""
    from ..model import read_versioned_json

    p = os.path.join(path, SIDECAR)
    if not os.path.exists(p):
        return {}
    data = read_versioned_json(p, version=SIDECAR_VERSION, what="bitextmine.json written by 'bitextmine export'")
    sealed = data.get("export_fingerprint")
    found = seal() if sealed is not None else None
    if sealed is not None and sealed != found:
        raise ModelFormatError(f"{p}: written for the exported model {sealed}; its files now give {found} (changed "
                               "since the export), so its mining settings and second stage are not this model's: "
                               "remove bitextmine.json and second_stage/ to use the files as a plain model")
    out = {k: data[k] for k in ("languages", "mining", "source_fingerprint", "unk_id") if k in data}
    if "mining" in out:
        from ..mining.calibrated import check_section

        check_section(out["mining"], p)
    return out


def _json_or_none(path: str):
    from ..errors import regular_file

    regular_file(path)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _read_text(path: str, what: str) -> str:
    from ..errors import regular_file

    regular_file(path)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise ModelFormatError(f"{path}: missing; expected {what}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ModelFormatError(f"{path}: cannot read {what} ({e})") from None


def _read_tensors(path: str, what: str) -> dict:
    from ..errors import regular_file

    regular_file(path)
    try:
        from safetensors import SafetensorError
        from safetensors.numpy import load_file

        return load_file(path)
    except FileNotFoundError:
        raise ModelFormatError(f"{path}: missing; expected {what}") from None
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        raise ModelFormatError(f"{path}: not a readable safetensors file ({e})") from None
