"""Any model directory read as a :class:`bitextmine.model.Model`: a bitextmine model
(:func:`bitextmine.model.load_native_model`), or a local sentence-transformers StaticEmbedding or model2vec
model (:mod:`bitextmine.interop.load`), the format read from the directory's files. This module sits above both
formats: the model module knows nothing of the others, and interop builds its models from it.
"""

from __future__ import annotations

import os

from .errors import ModelFormatError
from .interop.load import detect_format, load_static_model
from .model import Model, default_model_dir, load_native_model


def load_model(path: str | None = None) -> Model:
    """Load a model directory (``None`` = the bundled default model): a bitextmine model, or a local
    sentence-transformers StaticEmbedding or model2vec model (:mod:`bitextmine.interop.load`; the format is
    read from the directory's files). Raises ModelFormatError."""
    path = path or default_model_dir()
    if not os.path.isdir(path):
        raise ModelFormatError(f"{path}: not a model directory; expected a folder made by 'bitextmine train'")
    fmt = detect_format(path)
    if fmt != "bitextmine":
        return load_static_model(path, fmt)
    return load_native_model(path)
