"""How well the pieces of one line find a counterpart among the other line's pieces, in the model's own space.

The sentence embedding is the mean of its pieces' vectors: two sentences of one story can have near means
while half of one's pieces have no counterpart in the other. Here every piece of the foreign line is compared
with every piece of the English line (cosine of the model's unit piece vectors) and keeps its best:

  align_fx   the mean over the foreign line's pieces of their best cosine to a piece of the English line
  align_en   the same of the English line's pieces
  close_fx   the share of the foreign line's pieces whose best cosine reaches 0.5
  close_en   the same of the English line's pieces
  worst_fx   the lowest best cosine of a foreign piece: the piece least explained
  worst_en   the same of the English line's pieces

A translation leaves few pieces unexplained; a same-topic sentence explains its topic and leaves the rest.
Measured on the sparse dev tasks (docs/benchmarks.md) as a token-level interaction beside the lexicon's.
"""

from __future__ import annotations

import numpy as np

INTERACTION = ("align_fx", "align_en", "close_fx", "close_en", "worst_fx", "worst_en")
CLOSE = 0.5  # close_*: a piece with a counterpart at least this near
BATCH_FLOATS = 1 << 23  # pairs x pieces x dimensions of one side of a batch (padded): bounds the memory


def unit_rows(table: np.ndarray) -> np.ndarray:
    """The rows of ``table`` float (V, d) scaled to unit length (zero rows stay zero): float32 (V, d)."""
    t = np.asarray(table, np.float32)
    norm = np.linalg.norm(t, axis=1, keepdims=True)
    return t / np.where(norm > 0, norm, 1)


def interaction_features(vectors: np.ndarray, fx: tuple, en: tuple) -> np.ndarray:
    """The :data:`INTERACTION` features float64 (c, 6) of c pairs: ``vectors`` float32 (V, d) unit piece
    vectors (:func:`unit_rows`), ``fx`` and ``en`` each the pairs' pieces in the flat layout (ids int (total,),
    offsets int (c,)) (:meth:`bitextmine.judge.features.Pieces.take`). A line without pieces has 0 throughout."""
    lf, le = _lengths(*fx), _lengths(*en)
    fx, en = _with_pad(*fx), _with_pad(*en)
    out = np.zeros((len(lf), len(INTERACTION)), np.float64)
    order = np.argsort(np.maximum(lf, le), kind="stable")  # batches of similar lengths: little padding
    longest = np.maximum(np.maximum(lf, le)[order], 1) * vectors.shape[1]
    start = 0
    while start < len(order):
        size = max(1, BATCH_FLOATS // int(longest[start]))
        while size > 1 and size * int(longest[min(len(order), start + size) - 1]) > BATCH_FLOATS:
            size //= 2
        rows = order[start:start + size]
        out[rows] = _batch(vectors, _padded(*fx, lf, rows), _padded(*en, le, rows))
        start += size
    return out


def _lengths(ids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    return np.diff(np.asarray(offsets, np.int64), append=len(ids))


def _with_pad(ids: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ids int64 (total + 1,) ending in the padding's id 0, offsets int64 (c,)): a side whose lines have no
    pieces at all still has an id to pad with."""
    return np.append(np.asarray(ids, np.int64), 0), np.asarray(offsets, np.int64)


def _padded(ids: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, rows: np.ndarray):
    """(ids int64 (b, L), mask bool (b, L)) of pairs ``rows``' pieces, L their longest (at least 1); ``ids`` with
    the padding's id last (:func:`_with_pad`)."""
    n = lengths[rows]
    width = max(1, int(n.max(initial=0)))
    mask = np.arange(width)[None, :] < n[:, None]
    at = np.where(mask, offsets[rows][:, None] + np.arange(width)[None, :], len(ids) - 1)
    return ids[at], mask


def _batch(vectors: np.ndarray, f: tuple, e: tuple) -> np.ndarray:
    """The features float64 (b, 6) of one batch of padded pairs ((ids, mask) of each side). numpy, not torch: the
    judge runs this in forked worker processes, where torch's thread pool may hang."""
    (fi, fm), (ei, em) = f, e
    S = np.matmul(vectors[fi], vectors[ei].transpose(0, 2, 1))  # (b, Lf, Le)
    S = np.where(em[:, None, :] & fm[:, :, None], S, -np.inf)
    both = (fm.any(1) & em.any(1))[:, None]
    cols = []
    for best, mask in ((S.max(2), fm), (S.max(1), em)):
        ok = mask & both
        n = np.maximum(ok.sum(1), 1)
        align = np.where(ok, best, 0).sum(1, dtype=np.float64) / n
        close = ((best >= CLOSE) & ok).sum(1) / n
        worst = np.where(ok.any(1), np.where(ok, best, np.inf).min(1), 0.0)
        cols.append((align, close, worst))
    (af, cf, wf), (ae, ce, we) = cols
    return np.stack([af, ae, cf, ce, wf, we], 1).astype(np.float64)
