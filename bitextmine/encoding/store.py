"""The embedding store: what encoding writes to disk and how it is read back and checked.

Two layouts, both versioned and checked on load:

* one ``.npy`` (float32 or float16, one row per input line, in input order) with a JSON sidecar
  ``OUT.npy.json`` naming the model that made it::

    {"format_version": 2, "model_fingerprint": ..., "dim": ..., "dtype": ..., "count": ...,
     "input_sha256": ..., "inputs": [...]}

* a chunked directory (``encode --chunk-lines``): ``chunk-000000.npy``, ... and ``manifest.json``
  (format_version, model_fingerprint, dim, dtype, chunk_lines, table_precision, inputs, chunks: file,
  first_row, rows, input_sha256; at the end complete, count and input_sha256), written by
  :func:`bitextmine.encoding.chunks.encode_chunked`.

:func:`vectors_fingerprint` is what both record and :func:`load_embeddings` checks against.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import ModelFormatError
from ..model import Model, read_versioned_json

# 2: a line with no piece the model knows is a zero row (bitextmine.encoding.embed.nothing_known); version 1 gave it
# the vector every such line shares, which mining paired as translations: refused, to be encoded again
SIDECAR_VERSION = 2
MANIFEST_VERSION = 2
RETIRED = {1: "written by an earlier bitextmine, which gave a line of no piece the model knows (emoji, another "
              "script) the one vector every such line shares, so mining paired them; encode the text again"}
MANIFEST_FILE = "manifest.json"


@dataclass
class EncodeResult:
    """What an encoding run wrote: ``count`` rows of ``dim`` (``dtype`` 'float32' | 'float16'), the
    sha256 of the input bytes, and the ``.npy`` (or chunk directory) ``path``."""

    count: int
    dim: int
    dtype: str
    input_sha256: str
    path: str


def vectors_fingerprint(model: Model, *, sif: bool = False, marked: bool = False) -> str:
    """The model's fingerprint, with ``+sif`` when SIF is applied and ``+marked`` for text encoded as the
    marked language of a separate-vocabulary model: what an embedding sidecar records and is checked against."""
    return model.fingerprint + ("+sif" if sif else "") + ("+marked" if marked else "")


def input_names(inputs: Sequence[str]) -> list[str]:
    """The input names a sidecar or manifest records: base names, ``-`` as ``<stdin>``."""
    return [("<stdin>" if p == "-" else os.path.basename(p)) for p in inputs]


def write_sidecar(out_path: str, fingerprint: str, result: EncodeResult, inputs: Sequence[str]) -> None:
    """Write ``out_path + '.json'``; ``fingerprint`` is :attr:`Encoder.fingerprint`."""
    meta = {
        "format_version": SIDECAR_VERSION,
        "model_fingerprint": fingerprint,
        "dim": result.dim,
        "dtype": result.dtype,
        "count": result.count,
        "input_sha256": result.input_sha256,
        "inputs": input_names(inputs),
    }
    tmp = out_path + ".json.partial"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    os.replace(tmp, out_path + ".json")


def chunk_file(index: int) -> str:
    """The file name of chunk ``index`` in a chunked encoding."""
    return f"chunk-{index:06d}.npy"


def read_manifest(out_dir: str, *, what: str = "the manifest that 'bitextmine encode --chunk-lines' writes") -> dict:
    """The manifest of the chunked encoding in ``out_dir``; raises ModelFormatError for another format version."""
    return read_versioned_json(os.path.join(out_dir, MANIFEST_FILE), version=MANIFEST_VERSION, what=what,
                               retired=RETIRED)


def write_manifest(out_dir: str, meta: dict[str, Any]) -> None:
    """Replace the manifest of ``out_dir`` with ``meta`` (written beside it, then renamed into place)."""
    man_path = os.path.join(out_dir, MANIFEST_FILE)
    tmp = man_path + ".partial"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    os.replace(tmp, man_path)


def load_chunked(path: str) -> tuple[dict, np.ndarray]:
    """The manifest and rows of a complete chunked encoding: the chunks (memory-mapped) concatenated,
    (count, dim) of the manifest's dtype. Raises ModelFormatError."""
    meta = read_manifest(path)
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


def load_embeddings(path: str, *, model: Model | None = None, text_sha256: str | tuple | None = None,
                    count: int | None = None, sif: bool = False, marked: bool = False, text: str = "") -> np.ndarray:
    """Load an embedding ``.npy`` (memory-mapped) and check its sidecar, or a chunked encoding directory
    (``encode --chunk-lines``; its manifest is checked the same way).

    Returns float32 or float16 (count, dim). Raises ModelFormatError when the sidecar is missing,
    has another format version, or does not match ``model``, ``text_sha256`` (the sha256 of the text encoded, or
    a tuple of those it may be; ``text`` names it in the message) or ``count``.
    """
    if os.path.isdir(path):  # a chunked encoding (encode --chunk-lines): the chunks, concatenated in memory
        meta, x = load_chunked(path)
    else:
        meta = read_versioned_json(path + ".json", version=SIDECAR_VERSION, retired=RETIRED,
                                   what="the sidecar that 'bitextmine encode' writes beside its .npy")
        x = None
    expected = None if model is None else vectors_fingerprint(model, sif=sif, marked=marked)
    if expected is not None and meta.get("model_fingerprint") != expected:
        raise ModelFormatError(
            f"{path}: made by model {meta.get('model_fingerprint')}, but the model in use is {expected}; "
            "re-encode with the same --model (and --sif / --marked)"
        )
    allowed = (text_sha256,) if isinstance(text_sha256, str) else text_sha256
    if allowed is not None and meta.get("input_sha256") not in allowed:
        raise ModelFormatError(f"{path}: encodes another text than {text or 'the one given'} (input checksum "
                               "differs); expected the embeddings of that text's lines")
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
