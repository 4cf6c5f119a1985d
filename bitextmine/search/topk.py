"""The blockwise top-k by inner product behind every small exact search: the filter's margins, the
evaluators' retrieval, calibration's near misses and training's hardest negatives.

The product x @ y.T is computed ``block`` rows of x at a time (memory: block x m values), and each
block serves both directions: the k best columns of each row and, with ``columns``, the k best rows of
each column, merged over the blocks. Equal values go to the lower index, as one argmax would. Entries
can be excluded by keys: (a, b) excludes entry (i, j) where a[i] == b[j] (e.g. equal texts).

Mining's large exact search (both directions, bf16 tiles with certified float32 rescoring) is
:mod:`bitextmine.search.exact`; FAISS indexes are :mod:`bitextmine.search.index`.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple, Sequence

import numpy as np


class TopK(NamedTuple):
    """D float32 (n, k) and I int64 (n, k) per row of x; Dc (m, kc) and Ic per row of y (columns=True),
    else None. Rows sorted by decreasing value, ties by lower index; an entry with nothing left to
    choose (all excluded) has value -inf and the index of an excluded entry (a caller reads no index of value
    -inf). numpy arrays for numpy inputs, else torch tensors."""

    D: object
    I: object
    Dc: object = None
    Ic: object = None
    P: object = None  # float32 (p,): the entries x_i . y_j of ``pairs`` (i int (p,), j int (p,)), else None


def topk(x, y, k: int, *, block: int = 4096, exclude: Sequence = (), columns: bool = False,
         col_exclude: Sequence = (), col_k: int | None = None, pairs: tuple | None = None) -> TopK:
    """The k largest x_i . y_j for each row i of x (and with ``columns`` the ``col_k`` (default k) largest
    over i for each row j of y), from one blockwise pass over x @ y.T.

    x float32 (n, d), y float32 (m, d): numpy arrays (each block's product by numpy, on the CPU) or torch
    tensors (by torch, on their device). The product of a block is one matrix product, so its entries are
    those of one x @ y.T by the same library (CPU BLAS results depend on the library).
    ``exclude`` / ``col_exclude``: pairs (a int (n,), b int (m,)) of keys; entry (i, j) is left out of row
    i's choice where a[i] == b[j] for any pair (of column j's choice for ``col_exclude``). k is capped at
    m (col_k at n). ``pairs`` (i int (p,), j int (p,)): entries to return as P. Returns :class:`TopK`.
    """
    import torch

    as_numpy = isinstance(x, np.ndarray)
    if as_numpy:
        x, y = (np.ascontiguousarray(a, np.float32) for a in (x, y))
    with warnings.catch_warnings():  # read-only memory maps: torch warns, but nothing here writes to them
        warnings.simplefilter("ignore", UserWarning)
        xt, yt = [torch.from_numpy(a) if as_numpy else a for a in (x, y)]
    ex = [tuple(_tensor(v, xt.device) for v in pair) for pair in exclude]
    cex = [tuple(_tensor(v, xt.device) for v in pair) for pair in col_exclude]
    n, m = len(xt), len(yt)
    k, kc = min(k, m), min(col_k or k, n)
    rows_v, rows_i, col_v, col_i = [], [], None, None
    if pairs is not None:
        pi, pj = (_tensor(v if isinstance(v, torch.Tensor) else np.asarray(v, np.int64), xt.device).long() for v in pairs)
        P = xt.new_empty(len(pi))
    with torch.no_grad():
        for a in range(0, n, block):
            b = min(n, a + block)
            sim = torch.from_numpy(x[a:b] @ y.T) if as_numpy else xt[a:b] @ yt.T
            if pairs is not None:
                sel = torch.nonzero((pi >= a) & (pi < b)).flatten()
                P[sel] = sim[pi[sel] - a, pj[sel]]
            v, i = _best(_masked(sim, ex, slice(a, b)), k)
            rows_v.append(v)
            rows_i.append(i)
            if columns:
                cv, ci = _best(_masked(sim, cex, slice(a, b)).T, kc)
                col_v, col_i = merge_topk([col_v, cv], [col_i, ci + a], kc)
    D = torch.cat(rows_v) if rows_v else xt.new_zeros((0, k))
    I = torch.cat(rows_i) if rows_i else torch.zeros((0, k), dtype=torch.int64)
    out = TopK(D, I, col_v, col_i, P if pairs is not None else None)
    if as_numpy:
        out = TopK(*(None if t is None else t.cpu().numpy() for t in out))
    return out


def _tensor(v, device):
    import torch

    return (torch.from_numpy(np.asarray(v)) if isinstance(v, np.ndarray) else v).to(device)


def _masked(sim, pairs, rows: slice):
    """sim (r, m) with the entries that a pair of keys excludes set to -inf (rows ``rows`` of x)."""
    for a, b in pairs:
        sim = sim.masked_fill(a[rows, None] == b[None, :], -float("inf"))
    return sim


def _best(sim, k: int):
    """The k largest of each row of sim (r, m) as (values, int64 indices), ties to the lower index."""
    import torch

    k = min(k, sim.shape[1])  # a block of columns narrower than k: its all, merged with the other blocks
    if k == 1:  # max returns the first maximum of each row
        v, i = sim.max(dim=1)
        return v[:, None], i[:, None]
    v, i = sim.topk(k, dim=1)
    tied = (sim >= v[:, -1:]).sum(1) > k  # rows with more entries equal to their k-th than places left
    order = torch.argsort(i, dim=1)  # the rest: equal values in index order
    v, i = v.gather(1, order), i.gather(1, order)
    order = torch.sort(v, dim=1, descending=True, stable=True).indices
    v, i = v.gather(1, order), i.gather(1, order)
    if bool(tied.any()):
        rows = torch.nonzero(tied).flatten()
        sv, si = torch.sort(sim[rows], dim=1, descending=True, stable=True)
        v[rows], i[rows] = sv[:, :k], si[:, :k]
    return v, i


def merge_topk(D: Sequence, I: Sequence, k: int):
    """The k best of each row over parts D[p] (r, k_p) values and I[p] (r, k_p) int64 ids, numpy arrays or
    torch tensors (the result is of the same library and device; a part None is left out: a running merge
    starts from None): best value first, ties to the earlier part, then the earlier column. Parts given in
    ascending id order, each row sorted by value with ties by lower id (as every search here returns them),
    so ties go to the lower id. Every merge of neighbour lists (shards, chunks, blocks) is this one.
    Returns (values (r, min(k, sum of k_p)), ids)."""
    D, I = [d for d in D if d is not None], [i for i in I if i is not None]
    if len(D) == 1:
        return D[0][:, :k], I[0][:, :k]
    if isinstance(D[0], np.ndarray):
        Dc, Ic = np.concatenate(D, 1), np.concatenate(I, 1)
        order = np.argsort(-Dc, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(Dc, order, 1), np.take_along_axis(Ic, order, 1)
    import torch

    if k == 1 and len(D) == 2 and D[0].shape[1] == D[1].shape[1] == 1:
        better = D[1] > D[0]  # strict: the earlier part keeps a tie
        return torch.where(better, D[1], D[0]), torch.where(better, I[1], I[0])
    Dc, Ic = torch.cat(D, 1), torch.cat(I, 1)
    order = torch.sort(Dc, dim=1, descending=True, stable=True).indices[:, : min(k, Dc.shape[1])]
    return Dc.gather(1, order), Ic.gather(1, order)
