"""Margin-based scores (Artetxe & Schwenk 2019, "Margin-based parallel corpus mining").

For a candidate pair (x, y) with cosine c, and m_x, m_y the mean cosine of x's k nearest neighbours
among the targets and of y's k nearest neighbours among the sources:
  ratio:    c / ((m_x + m_y) / 2)
  distance: c - (m_x + m_y) / 2
  absolute: c

The neighbour means of every command (mining, the pipeline's reduce stage, ``score``'s margins, the
filter's margins within a chunk, calibration within the gold set) come from :func:`neighbour_means`.
A neighbour list from an approximate index may hold fewer than k rows (empty slots at -inf): the mean
is over the rows found. A sentence whose search found none has no mean (NaN); a margin with it uses
the other sentence's mean alone.
"""

from __future__ import annotations

import numpy as np

from ..config import MARGINS
from ..errors import ConfigError


def neighbour_means(D: np.ndarray) -> np.ndarray:
    """The neighbour mean of each row of D float32 (n, k), its neighbours' cosines (summed in the order given;
    every search here gives them best first): the mean of its finite entries (slots an approximate index
    left empty are -inf), NaN for a row with none. Returns float32 (n,); with every slot found, D.mean(1)."""
    D = np.asarray(D, np.float32)
    found = np.isfinite(D)
    if found.all():
        return D.mean(1)
    with np.errstate(invalid="ignore"):  # a row with nothing found: 0 / 0
        return (np.where(found, D, 0).sum(1) / found.sum(1).astype(np.float32)).astype(np.float32)


def both_neighbour_means(x: np.ndarray, y: np.ndarray, k: int, **search) -> tuple[np.ndarray, np.ndarray]:
    """(mean_x float32 (n,), mean_y float32 (m,)): the neighbour mean of each row of x (n, d) among y's rows
    (m, d) and of each row of y among x's, from one exact pass over x @ y.T
    (:func:`bitextmine.search.exact.knn_both`: bf16 tiles where this device multiplies them fast, float32
    results). ``search``: knn_both's options (candidates, block_rows, device, ...)."""
    from ..search.exact import knn_both

    Dxy, _, Dyx, _, _ = knn_both(x, y, k, **search)
    return neighbour_means(Dxy), neighbour_means(Dyx)


def distinct_rows(texts) -> tuple[np.ndarray, np.ndarray]:
    """(first int64 (u,): the first row of each distinct text, ascending; inverse int64 (n,): each row's distinct
    text as an index into ``first``) of ``texts`` (n strings, compared exactly, as mining's dedup compares
    lines)."""
    seen: dict = {}
    inverse = np.fromiter((seen.setdefault(t, len(seen)) for t in texts), np.int64, len(texts))
    return np.unique(inverse, return_index=True)[1].astype(np.int64), inverse  # texts numbered as first met


def distinct_neighbour_means(x: np.ndarray, y: np.ndarray, src_texts, tgt_texts, k: int,
                             **search) -> tuple[np.ndarray, np.ndarray]:
    """:func:`both_neighbour_means` of the pairs (x[i], y[i]) given together (a chunk of a corpus), taken among
    each side's distinct lines (``src_texts``, ``tgt_texts``: the rows' lines, n each), as `mine` takes them
    after its dedup (LASER's --unify): copies of a line do not crowd each other's neighbourhoods (four copies
    of a pair would give it a ratio margin of exactly 1), and every copy gets its line's mean. x, y float32
    (n, d) L2-normalised; returns float32 (n,) each."""
    (fx, ix), (fy, iy) = distinct_rows(src_texts), distinct_rows(tgt_texts)
    mean_x, mean_y = both_neighbour_means(x[fx], y[fy], k, **search)
    return mean_x[ix], mean_y[iy]


def margin_scores(cos: np.ndarray, mean_x: np.ndarray, mean_y: np.ndarray, kind: str = "ratio") -> np.ndarray:
    """Element-wise margin score; all arguments broadcast together. Returns float32 of the broadcast shape.
    A NaN mean (a sentence without neighbours) leaves the other sentence's mean alone in the margin."""
    cos = np.asarray(cos, np.float32)
    if kind == "absolute":
        return cos.copy()
    mean_x, mean_y = np.asarray(mean_x, np.float32), np.asarray(mean_y, np.float32)
    avg = (mean_x + mean_y) / 2
    if np.isnan(avg).any():
        avg = np.where(np.isnan(mean_x), mean_y, np.where(np.isnan(mean_y), mean_x, avg))
    if kind == "ratio":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(avg > 0, cos / np.where(avg > 0, avg, 1), cos).astype(np.float32)
    if kind == "distance":
        return (cos - avg).astype(np.float32)
    raise ConfigError(f"margin {kind!r}: expected one of {', '.join(MARGINS)}")


def candidate_scores(D: np.ndarray, I: np.ndarray, mean_q: np.ndarray, mean_o: np.ndarray, kind: str) -> np.ndarray:
    """Margin scores of each query's k candidates.

    D float32 (n, k) cosines of query i with candidate I[i, j] (int64 (n, k); -1: an empty slot); mean_q
    float32 (n,) the queries' neighbour means; mean_o float32 (n, k) the candidates' neighbour means, slot
    by slot (any value at empty slots). Returns float32 (n, k), -inf at empty slots.
    """
    score = margin_scores(D, mean_q[:, None], mean_o, kind)
    return np.where(I >= 0, score, np.float32(-np.inf)) if (I < 0).any() else score


def best_candidates(D: np.ndarray, I: np.ndarray, score: np.ndarray) -> tuple:
    """Each query's best candidate by ``score`` float32 (n, k) (:func:`candidate_scores` of the neighbours
    I int64 (n, k) at cosines D float32 (n, k)), for the queries whose search found any neighbour: (query
    row int64 (c,), candidate int64, score float32, cosine float32). Ties: the earlier slot (higher cosine)."""
    if D.shape[1] == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros(0, np.float32)
    j = score.argmax(1)
    rows = np.flatnonzero(I[np.arange(len(I)), j] >= 0)
    at = (rows, j[rows])
    return rows, I[at], score[at], D[at]
