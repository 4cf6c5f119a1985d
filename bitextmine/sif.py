"""SIF (Arora et al. 2017): frequency weighting and common-component removal, for any encoder.

A sentence vector becomes ``v = 1/|s| * sum_w a / (a + p(w)) * v_w`` and then ``v - (v . u) u``, where
``p(w)`` is the token's relative frequency in the training data (``piece_counts``, counted when the
model is trained) and ``u`` the first singular vector of the weighted vectors of a sample of training
sentences (``sif_pc``, estimated when the model is trained, with the weights it ends with). Both are
stored in the model; ``a`` is stored in its config (``sif_a``).

For the averaging encoders both steps are linear in the token table, so SIF costs nothing at encode
time: the mean over the rows of ``diag(a / (a + p)) E (I - u u^T)`` (:func:`sif_table`) is the SIF vector.
"""

from __future__ import annotations

import numpy as np

from .errors import ModelFormatError


def sif_weights(counts: np.ndarray, a: float) -> np.ndarray:
    """float32 (vocab,): a / (a + p(w)) with p = counts / counts.sum(); unseen tokens get weight 1."""
    counts = np.asarray(counts, np.float64)
    total = counts.sum()
    p = counts / total if total > 0 else np.zeros_like(counts)
    return (a / (a + p)).astype(np.float32)


def first_component(x: np.ndarray) -> np.ndarray:
    """float32 (d,): the first right singular vector of x (n, d) (no centring, as in SIF), with its
    largest-magnitude coordinate made positive so that the sign is deterministic."""
    x = np.asarray(x, np.float64)
    if len(x) == 0:
        return np.zeros(x.shape[1], np.float32)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    u = vt[0]
    if u[np.argmax(np.abs(u))] < 0:
        u = -u
    return u.astype(np.float32)


def remove_component(x: np.ndarray, u: np.ndarray) -> np.ndarray:
    """x (n, d) minus its projection on the unit vector u (d,): float32 (n, d)."""
    x = np.asarray(x, np.float32)
    return x - np.outer(x @ u, u).astype(np.float32)


def sif_table(embeddings: np.ndarray, counts: np.ndarray, pc: np.ndarray, a: float) -> np.ndarray:
    """float32 (vocab, dim): the token table whose row mean is the SIF vector (module docstring)."""
    return remove_component(np.asarray(embeddings, np.float32) * sif_weights(counts, a)[:, None], pc)


def sif_parts(model) -> tuple[np.ndarray, np.ndarray, float]:
    """(token weights float32 (vocab,), component float32 (dim,), a) stored in ``model``; raises
    ModelFormatError for a model trained without them."""
    if "piece_counts" not in model.tensors or "sif_pc" not in model.tensors:
        raise ModelFormatError(
            f"{model.path or 'model'}: has no token frequencies or SIF component; SIF needs a model trained "
            "with this version of 'bitextmine train' (which stores both)"
        )
    a = model.config.get("sif_a", 1e-3)
    if type(a) not in (int, float) or not 0 < a < float("inf"):  # 0 weighs every seen piece 0: every score 0
        raise ModelFormatError(f"{model.path or 'model'}: config.json sif_a {a!r}; expected a positive number")
    return sif_weights(model.tensors["piece_counts"], a), np.asarray(model.tensors["sif_pc"], np.float32), a
