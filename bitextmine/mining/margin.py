"""Margin-based scores (Artetxe & Schwenk 2019, "Margin-based parallel corpus mining").

For a candidate pair (x, y) with cosine c, and m_x, m_y the mean cosine of x's k nearest neighbours
among the targets and of y's k nearest neighbours among the sources:
  ratio:    c / ((m_x + m_y) / 2)
  distance: c - (m_x + m_y) / 2
  absolute: c
"""

from __future__ import annotations

import numpy as np

from ..config import MARGINS
from ..errors import ConfigError


def margin_scores(cos: np.ndarray, mean_x: np.ndarray, mean_y: np.ndarray, kind: str = "ratio") -> np.ndarray:
    """Element-wise margin score; all arguments broadcast together. Returns float32 of the broadcast shape."""
    cos = np.asarray(cos, np.float32)
    if kind == "absolute":
        return cos.copy()
    avg = (np.asarray(mean_x, np.float32) + np.asarray(mean_y, np.float32)) / 2
    if kind == "ratio":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(avg > 0, cos / np.where(avg > 0, avg, 1), cos).astype(np.float32)
    if kind == "distance":
        return (cos - avg).astype(np.float32)
    raise ConfigError(f"margin {kind!r}: expected one of {', '.join(MARGINS)}")


def candidate_scores(D: np.ndarray, I: np.ndarray, mean_q: np.ndarray, mean_other: np.ndarray, kind: str) -> np.ndarray:
    """Margin scores of each query's k candidates.

    D float32 (n, k) cosines of query i with candidate I[i, j] (int64 (n, k)); mean_q float32 (n,) the
    queries' neighbour means; mean_other float32 (m,) the candidates' neighbour means. Returns float32 (n, k).
    """
    return margin_scores(D, mean_q[:, None], mean_other[I], kind)
