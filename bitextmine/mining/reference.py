"""Margins as a side of a given size would give them: the second stage above the sizes it was calibrated on.

A margin divides a pair's cosine by its sentences' neighbour means, and those means rise as the sides grow:
at 200,000 lines a side a translation's margin is lower than at 3,000, and a second stage whose probability
floor was chosen on tasks of up to R lines a side (its ``max_lines``) drops translations of larger runs. So a
run with a side of more than R distinct lines gives the stage (its margin feature, its margin floor and the
run's margin floors) the *reference margin* of each candidate pair (x, y):

    m_x = the mean of the k best cosines of x among R rows of the other side drawn at random and y,
          y counted once (y is a line of the run: a task of R lines holding the pair holds y)
    m_y = the same of y among R rows of x's side and x
    reference margin = cos(x, y) / ((m_x + m_y) / 2)      (ratio; distance: cos - (m_x + m_y) / 2)

which is the margin the pair has in a run of R + 1 lines a side drawn from the same sides. A side's sample is
drawn by its lines' texts (:func:`sample_by_keys` over :func:`line_keys`: the R lines whose hashes, mixed with
the seed, are smallest), so it is the same whichever side is named first, in whatever order the lines come and
however often a line repeats. Cost: one search of
every candidate's lines among R rows, (n + m) x R products, against n x m for the run's own search; none when
the run's own exact pass keeps each line's best among the sample as well (:class:`bitextmine.search.exact.Sample`,
the staged run's flat search), which only adds a selection to it.
"""

from __future__ import annotations

import hashlib
from typing import Callable

import numpy as np

from .margin import margin_scores, neighbour_means

# rows int64 (r,) -> their embeddings float32 (r, d)
RowsOf = Callable[[np.ndarray], np.ndarray]
QUERY_BLOCK = 65_536  # candidate lines searched at a time (memory: QUERY_BLOCK x d floats)


SAMPLE_DRAW = "smallest-line-hashes"  # the work directory's record of how the samples are drawn


def line_keys(texts) -> np.ndarray:
    """uint64 (n,): each text's key, the second half of the staged run's line hash
    (:func:`bitextmine.pipeline.dedup.line_hashes`), as the sample stage reads it from the dedup stage's files."""
    from ..pipeline.dedup import line_hashes  # the staged run builds on this module: imported when used

    return line_hashes(texts)[:, 1].copy()


def seed_mask(seed: int) -> np.uint64:
    """The 64 bits a seed mixes into the keys (XOR): another seed, another random order of the lines."""
    return np.frombuffer(hashlib.blake2b(f"reference-sample:{seed}".encode(), digest_size=8).digest(), np.uint64)[0]


def smallest_keys(keys: np.ndarray, rows: np.ndarray, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``size`` of rows int64 (n,) whose keys uint64 (n,) mixed with ``seed`` are smallest (all when n <=
    size), as (keys, rows) in the order of their mixed keys (ties, between equal lines only: by row)."""
    mixed = keys ^ seed_mask(seed)
    order = np.lexsort((rows, mixed))[:size]
    return keys[order], rows[order]


def sample_by_keys(keys: np.ndarray, size: int, seed: int) -> np.ndarray:
    """int64 ascending: the ``size`` rows (0..n-1) of the lines with keys uint64 (n,) (:func:`line_keys`) that
    the seed's order puts first; all n rows when n <= size."""
    keys = np.asarray(keys, np.uint64)
    return np.sort(smallest_keys(keys, np.arange(len(keys), dtype=np.int64), size, seed)[1])


def partner_means(D: np.ndarray, I: np.ndarray, partner: np.ndarray, partner_cos: np.ndarray, k: int) -> np.ndarray:
    """float32 (c,): for each row, the mean of the k best among its found cosines D float (c, j) (rows ids I int
    (c, j); -inf where none) other than its partner's, and its partner's cosine ``partner_cos`` float (c,)
    (``partner`` int (c,): the partner's row id)."""
    V = np.where(np.asarray(I) == np.asarray(partner)[:, None], -np.inf, np.asarray(D, np.float32))
    V = np.concatenate([V, np.asarray(partner_cos, np.float32)[:, None]], 1)
    return neighbour_means(-np.sort(-V, axis=1)[:, :k])


def _side_lists(q: np.ndarray, rows_of: RowsOf, sample: np.ndarray, Y: np.ndarray, k: int,
                search: dict) -> tuple[np.ndarray, np.ndarray]:
    """The k best cosines (D float32 (c, k), -inf where none) and their row ids (I int64) of each line q int (c,)
    among the sample rows Y (ids ``sample``)."""
    from ..search.exact import knn_both

    lines, at = np.unique(q, return_inverse=True)
    D = np.full((len(lines), k), -np.inf, np.float32)
    I = np.full((len(lines), k), -1, np.int64)
    for a in range(0, len(lines), QUERY_BLOCK):
        Da, Ia, _, _, _ = knn_both(rows_of(lines[a:a + QUERY_BLOCK]), Y, k, direction="xy", **search)
        D[a:a + len(Da), :Da.shape[1]], I[a:a + len(Da), :Da.shape[1]] = Da, sample[Ia]
    return D[at.reshape(-1)], I[at.reshape(-1)]


def listed_margins(s: np.ndarray, t: np.ndarray, cos: np.ndarray, lists: dict, k: int, kind: str = "ratio") -> np.ndarray:
    """The reference margin float32 (c,) of the candidate pairs (s[i], t[i]) int (c,) with cosine cos float (c,),
    from ``lists`` {"src": (D float (c, k + 1), I int (c, k + 1)) the k + 1 best cosines and row ids of each
    pair's source line among the target side's sample (-inf / -1 where none), "tgt": the same of its
    target line}."""
    means = [partner_means(*lists["src"], t, cos, k), partner_means(*lists["tgt"], s, cos, k)]
    return margin_scores(np.asarray(cos, np.float32), means[0], means[1], kind)


def reference_margins(s: np.ndarray, t: np.ndarray, cos: np.ndarray, rows_of: dict, samples: dict, k: int,
                      kind: str = "ratio", **search) -> np.ndarray:
    """The reference margin float32 (c,) (module doc) of the candidate pairs (s[i], t[i]) int (c,) with cosine
    cos float (c,): ``rows_of`` {"src", "tgt": :data:`RowsOf`}, ``samples`` {"src", "tgt": int64 ascending, the
    side's sampled rows (:func:`sample_by_keys`)}: a source line is compared with the target side's sample and
    the other way round; ``search`` :func:`bitextmine.search.exact.knn_both`'s options."""
    s, t, cos = np.asarray(s, np.int64), np.asarray(t, np.int64), np.asarray(cos, np.float32)
    if len(s) == 0:
        return np.zeros(0, np.float32)
    lists = {}
    for side, other, q in (("src", "tgt", s), ("tgt", "src", t)):
        sample = np.asarray(samples[other], np.int64)
        lists[side] = _side_lists(q, rows_of[side], sample, rows_of[other](sample), k + 1, search)
    return listed_margins(s, t, cos, lists, k, kind)
