"""Write a bitextmine SP model as a sentence-transformers StaticEmbedding model or a model2vec model.

Both formats hold what the ``sp`` encoder computes: a ``tokenizer.json`` that segments text into the
SentencePiece ids (:mod:`bitextmine.interop.spm_json`), the piece table in float32 (the stored float16
values, exactly), mean pooling and L2 normalisation (sentence-transformers: a ``Normalize`` module;
model2vec: ``normalize: true``). Neither library needs bitextmine or the network to load them::

    sentence-transformers                     model2vec
    modules.json                              config.json       model_type model2vec, normalize, max_length null
    config_sentence_transformers.json         model.safetensors "embeddings" float32 (vocab, dim)
    0_StaticEmbedding/tokenizer.json          tokenizer.json
    0_StaticEmbedding/model.safetensors       README.md
        "embedding.weight" float32 (vocab, dim)
    1_Normalize/config.json                   bitextmine.json
    README.md                                 (and bitextmine.json)

``bitextmine.json`` (format version 1) keeps what only bitextmine reads: the source model's fingerprint,
languages and calibrated mining settings, so ``--model`` on the export mines as the source model did, and the
``<unk>`` piece's id (``unk_id``), as which the second stage copied with the export reads the model2vec
tokenizer's unknown-run token (older exports without it: that token is an error there); and the export's own
fingerprint as bitextmine reads it (``export_fingerprint``), checked on load: files changed since (a table fine-tuned
in the other library and saved in place) are refused rather than given the source model's settings. The export
is written beside ``out_dir`` and moved into place whole.

model2vec removes its unknown token from every sentence before averaging, where bitextmine averages
SentencePiece's ``<unk>`` piece in (one per run of characters outside the vocabulary). So the model2vec
tokenizer.json turns each such run into one extra token (id vocab_size, the private-use character
:data:`bitextmine.interop.hf_tokenizer.UNKNOWN_RUN`) whose row is the ``<unk>`` row: model2vec then averages the same rows.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError, ModelFormatError
from .card import card_body, front_matter
from .hf_tokenizer import UNKNOWN_RUN
from .spm_json import characters_without_own_piece, tokenizer_json_from_sentencepiece

EXPORT_FORMATS = ("sentence-transformers", "model2vec")
ST_MODULES = [
    {"idx": 0, "name": "0", "path": "0_StaticEmbedding", "type": "sentence_transformers.models.StaticEmbedding"},
    {"idx": 1, "name": "1", "path": "1_Normalize", "type": "sentence_transformers.models.Normalize"},
]  # the module names every sentence-transformers release since 3.3 resolves (newer ones map them)
M2V_UNK_NOTE = ("some characters occur in pieces but are no piece alone ({chars}); where one of them becomes <unk> "
                "next to another unknown character, model2vec averages one more row than bitextmine")


@dataclass
class ExportResult:
    """What :func:`export_model` wrote: the directory, its format, the files (relative paths), notes."""

    path: str
    format: str
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def export_model(model, out_dir: str, *, fmt: str) -> ExportResult:
    """Write ``model`` (a bitextmine ``sp`` model with one shared vocabulary) to the new or empty directory
    ``out_dir`` in format ``fmt`` (sentence-transformers | model2vec). Raises ConfigError, ModelFormatError;
    MissingDependencyError without the ``tokenizers`` package."""
    from ..tokenizer import Tokenizer

    if fmt not in EXPORT_FORMATS:
        raise ConfigError(f"format {fmt!r}; expected one of {', '.join(EXPORT_FORMATS)}")
    name = model.path or "model"
    if model.encoder != "sp" or not isinstance(model.tokenizer, Tokenizer):
        raise ModelFormatError(f"{name}: a {model.encoder} model; only sp models (mean of SentencePiece pieces) "
                               "export to sentence-transformers or model2vec")
    if model.marked_offset:
        raise ModelFormatError(f"{name}: trained with separate vocabularies (--separate-vocab); only a shared "
                               "vocabulary exports (those libraries have no marked language)")
    if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)):
        raise ConfigError(f"{out_dir}: exists and is not an empty directory; choose a new one")
    proto, notes = model.tokenizer.proto, []
    table = np.ascontiguousarray(model.embeddings[: model.tokenizer.vocab_size], np.float32)
    if fmt == "sentence-transformers":
        tokenizer_json, write = tokenizer_json_from_sentencepiece(proto), _write_st
    else:
        try:
            tokenizer_json, write = tokenizer_json_from_sentencepiece(proto, unknown_as=UNKNOWN_RUN), _write_m2v
        except ModelFormatError as e:
            raise ModelFormatError(f"{name}: {e}") from None
        table = np.concatenate([table, table[model.tokenizer.sp.unk_id()][None]])  # the unknown run's row
        odd = characters_without_own_piece(proto)
        if odd:
            notes.append(M2V_UNK_NOTE.format(chars=" ".join(sorted(odd))))
    target = os.path.realpath(out_dir)  # "." or a link to an empty directory: the directory itself
    partial = f"{target}.partial-{os.getpid()}"  # moved into place whole: an interrupted export leaves no
    shutil.rmtree(partial, ignore_errors=True)  # directory that loads as a complete model
    try:
        files = write(model, partial, tokenizer_json, table) + _second_stage(model, partial)
        _seal(partial)
        _readable(partial)
        if os.path.isdir(target):  # empty (checked above): its files go in, bitextmine.json last (without it the
            for name in sorted(os.listdir(partial), key=lambda n: n == "bitextmine.json"):  # rest reads as a plain model)
                os.replace(os.path.join(partial, name), os.path.join(target, name))
        else:
            os.replace(partial, target)
    except OSError as e:  # a write that failed (disk full) names no file: the export being written
        if e.filename is None:
            raise OSError(e.errno, e.strerror, partial) from None
        raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return ExportResult(path=out_dir, format=fmt, files=files, notes=notes)


def _readable(folder: str) -> None:
    """Every file of the export with the permissions a new file gets here (the safetensors library writes its
    files readable by their owner only, so other users could not load the model)."""
    mask = os.umask(0)
    os.umask(mask)
    for root, _, names in os.walk(folder):
        for name in names:
            os.chmod(os.path.join(root, name), 0o666 & ~mask)


def _seal(folder: str) -> None:
    """Add to ``folder``'s bitextmine.json the export's table and vocabulary as a later read finds them
    (:func:`bitextmine.interop.load.export_seal`), which that read compares: a table or vocabulary changed after the
    export (fine-tuned in the other library and saved in place) no longer carries the source model's mining
    settings and second stage as if they were its own; saved again unchanged, it does."""
    from .load import detect_format, export_seal, load_static_model

    path = os.path.join(folder, "bitextmine.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    back = load_static_model(folder, detect_format(folder))
    data["export_fingerprint"] = export_seal(back.tokenizer, back.embeddings)
    _write_texts(folder, {"bitextmine.json": json.dumps(data, indent=2)})


def _second_stage(model, out: str) -> list[str]:
    """Copy the model's second stage (``second_stage/``: same piece ids in the export's tokenizer.json), so
    that ``--model`` on the export mines as the model does; returns the files copied."""
    from ..judge.store import FOLDER

    src = os.path.join(model.path or "", FOLDER)
    if not model.path or not os.path.isdir(src):
        return []
    shutil.copytree(src, os.path.join(out, FOLDER))
    return sorted(f"{FOLDER}/{name}" for name in os.listdir(src))


def _write_st(model, out: str, tokenizer_json: str, table: np.ndarray) -> list[str]:
    from safetensors.numpy import save_file

    from .. import __version__

    files = {
        "modules.json": json.dumps(ST_MODULES, indent=2),
        "config_sentence_transformers.json": json.dumps(
            {"__version__": {"bitextmine": __version__}, "model_type": "SentenceTransformer", "prompts": {},
             "default_prompt_name": None, "similarity_fn_name": "cosine"}, indent=2),
        "0_StaticEmbedding/tokenizer.json": tokenizer_json,
        "1_Normalize/config.json": json.dumps({"module_input_name": "sentence_embedding",
                                               "module_output_name": "sentence_embedding"}, indent=2),
        "README.md": _card(model, "sentence-transformers"),
        "bitextmine.json": bitextmine_json(model),
    }
    _write_texts(out, files)
    save_file({"embedding.weight": table}, os.path.join(out, "0_StaticEmbedding", "model.safetensors"))
    return sorted([*files, "0_StaticEmbedding/model.safetensors"])


def _write_m2v(model, out: str, tokenizer_json: str, table: np.ndarray) -> list[str]:
    from safetensors.numpy import save_file

    cfg = {"model_type": "model2vec", "architectures": ["StaticModel"], "tokenizer_name": None, "apply_pca": None,
           "apply_zipf": None, "hidden_dim": int(table.shape[1]), "seq_length": 1000000, "normalize": True,
           "max_length": None,  # no truncation: bitextmine encodes every piece of a sentence
           "embedding_dtype": "float32"}
    files = {"config.json": json.dumps(cfg, indent=2), "tokenizer.json": tokenizer_json,
             "README.md": _card(model, "model2vec"), "bitextmine.json": bitextmine_json(model)}
    _write_texts(out, files)
    save_file({"embeddings": table}, os.path.join(out, "model.safetensors"))
    return sorted([*files, "model.safetensors"])


def bitextmine_json(model) -> str:
    """The ``bitextmine.json`` of an export (see module docstring)."""
    from .load import SIDECAR_VERSION

    keep = {k: model.config[k] for k in ("languages", "mining") if model.config.get(k)}
    unk = {"unk_id": int(model.tokenizer.sp.unk_id())} if hasattr(model.tokenizer, "sp") else {}
    return json.dumps({"format_version": SIDECAR_VERSION, "source_fingerprint": model.fingerprint, **keep, **unk},
                      indent=2)


def _write_texts(out: str, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = os.path.join(out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text if text.endswith("\n") else text + "\n")


USAGE = {
    "sentence-transformers": ("```python\nfrom sentence_transformers import SentenceTransformer\n\n"
                              "model = SentenceTransformer(\"PATH\", device=\"cpu\")\n"
                              "vectors = model.encode([\"A sentence.\", \"Une phrase.\"])  # float32 (2, {dim}), unit length\n```"),
    "model2vec": ("```python\nfrom model2vec import StaticModel\n\n"
                  "model = StaticModel.from_pretrained(\"PATH\")\n"
                  "vectors = model.encode([\"A sentence.\", \"Une phrase.\"])  # float32 (2, {dim}), unit length\n```"),
}


READ_BACK = {
    "sentence-transformers": "bitextmine reads this directory with `--model PATH`: the vectors of the model it was "
                             "exported from, byte for byte.",
    "model2vec": "bitextmine reads this directory with `--model PATH` as model2vec reads it: the vectors of the "
                 "model it was exported from.",
}


def _card(model, fmt: str) -> str:
    langs = list(model.config.get("languages") or [])
    meta = {"library_name": fmt, "tags": ["sentence-similarity", "bitext-mining", "static-embeddings",
                                           "bitextmine"]}
    if fmt == "sentence-transformers":
        meta["tags"] = ["sentence-transformers", "feature-extraction", *meta["tags"]]
        meta["pipeline_tag"] = "sentence-similarity"
    if langs:
        meta["language"] = langs
    same = ("Tokenisation (a tokenizer.json that gives SentencePiece's piece ids), mean pooling and L2 "
            "normalisation are those of `bitextmine encode`, so the vectors are the same (float32 rounding aside).")
    if fmt == "model2vec":
        same += (" model2vec leaves its unknown token out of the mean, so each run of characters outside the "
                 f"vocabulary is the extra token {model.tokenizer.vocab_size} "
                 "here, whose row is the <unk> row that bitextmine averages in.")
    usage = (f"## Use with {fmt}\n\nExported by `bitextmine export MODEL PATH --format {fmt}` from bitextmine model "
             f"`{model.fingerprint}`. {same}\n\n" + USAGE[fmt].format(dim=model.dim) + "\n\n" + READ_BACK[fmt] + "\n")
    return front_matter(meta) + card_body(model).rstrip("\n") + "\n\n" + usage
