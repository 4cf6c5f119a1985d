"""IVF-Flat k-NN by inner product with torch alone: for CUDA machines whose FAISS has no GPU support.

An inverted file (Sivic & Zisserman 2003; Jégou, Douze & Schmid 2011 for its use in k-NN search) splits
the searched rows into ``nlist`` lists by their nearest centroid and compares each query with the rows
of its ``nprobe`` nearest lists only. Here:

- :func:`train`: spherical k-means by inner product (Dhillon & Modha 2001), as FAISS trains an
  inner-product IVF quantizer (10 iterations, unit centroids), seeded and deterministic;
- :func:`assign`: each row's list (its nearest centroid);
- :func:`search`: exact float32 products of each query with the rows of its probed lists. The
  (query, list) probe pairs are sorted by list, and one step per list compares ALL queries probing it
  with its rows (one matrix product), so the work is a few thousand dense products, not one per query.

Everything runs on a torch ``device`` ("cuda" or "cpu", where the tests run it), in float32 with TF32
off (:func:`bitextmine.device.exact_matmul`). Inputs may be float16 / float32 numpy arrays or memory
maps: they move to the device in blocks, and every temporary is bounded (``sim_elems``, ``pairs_max``).
:func:`bitextmine.search.index.knn` and the staged pipeline use it when
:func:`bitextmine.device.knn_backend` says "torch" for ``index`` ivf.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..device import exact_matmul
from ..errors import ConfigError
from .exact import to_device
from .topk import _best

ITERATIONS = 10  # k-means iterations: FAISS's for an IVF quantizer (Level1Quantizer's ClusteringParameters)
SIM_ELEMS = 1 << 26  # float32 similarities (256 MiB) of one block against centroids or one list's rows
PAIRS_MAX = 1 << 28  # (query, list) probe pairs sorted at once: 5M queries x nprobe 32 (160M) in one pass
LOAD_ROWS = 1 << 16  # rows assigned to lists at a time


def _unit(C):
    return C / C.norm(dim=1, keepdim=True).clamp_min(1e-12)


def _nearest(X, C, nprobe: int, sim_elems: int):
    """The ``nprobe`` lists of largest inner product with each row of X (torch (r, d)) among centroids C
    (torch (nlist, d)): (scores float32 (r, nprobe), lists int64 (r, nprobe)), blocks of sim_elems values."""
    import torch

    block = max(1, sim_elems // len(C))
    V, J = [], []
    for a in range(0, len(X), block):
        S = X[a : a + block] @ C.T
        v, j = S.max(1, keepdim=True) if nprobe == 1 else S.topk(nprobe, dim=1)  # max: the first best on a tie
        V.append(v)
        J.append(j)
    if not V:
        return X.new_zeros((0, nprobe)), torch.zeros((0, nprobe), dtype=torch.int64, device=X.device)
    return torch.cat(V), torch.cat(J)


def _cluster_sums(X, labels, nlist: int, sim_elems: int):
    """Sum of the rows of X (torch (s, d)) in each cluster, float32 (nlist, d), as one-hot products per
    block of rows: deterministic on CUDA too (index_add_ adds in no fixed order there)."""
    import torch

    sums = X.new_zeros((nlist, X.shape[1]))
    cells = torch.arange(nlist, device=X.device)[:, None]
    block = max(1, sim_elems // nlist)
    for a in range(0, len(X), block):
        onehot = (labels[None, a : a + block] == cells).to(X.dtype)
        sums += onehot @ X[a : a + block]
    return sums


def train(sample: np.ndarray, nlist: int, *, seed: int, iters: int = ITERATIONS, device: str = "cpu",
          sim_elems: int = SIM_ELEMS) -> np.ndarray:
    """Centroids float32 (nlist, d), L2-normalised, of spherical k-means by inner product on ``sample``
    float (s, d) (s >= nlist; normally the L2-normalised rows of :func:`bitextmine.search.index.ivf_recipe`).

    Starts from ``nlist`` distinct sample rows drawn with ``seed``; each of ``iters`` iterations assigns every
    row to its nearest centroid and replaces each centroid by its rows' normalised sum. A cluster left empty
    takes the worst-served rows (lowest inner product with their centroid, lower row first on a tie), one each,
    as its centroid. The same seed, sample and device give the same centroids."""
    import torch

    s = len(sample)
    if not 0 < nlist <= s:
        raise ConfigError(f"IVF training: {nlist} lists from {s} sample rows; expected 1 to {s} lists")
    first = np.random.default_rng(seed).choice(s, nlist, replace=False)
    with exact_matmul(), torch.no_grad():
        X = to_device(sample, device)
        C = _unit(X[torch.from_numpy(first).to(device)])
        for _ in range(iters):
            score, labels = (t[:, 0] for t in _nearest(X, C, 1, sim_elems))
            sums = _cluster_sums(X, labels, nlist, sim_elems)
            empty = torch.nonzero(torch.bincount(labels, minlength=nlist) == 0).flatten()
            if len(empty):
                worst = torch.sort(score, stable=True).indices[: len(empty)]
                sums[empty] = X[worst]
            C = _unit(sums)
        return C.cpu().numpy()


def assign(rows: np.ndarray, centroids: np.ndarray, *, device: str = "cpu", sim_elems: int = SIM_ELEMS) -> np.ndarray:
    """The list of each row: int32 (r,), the index of the centroid (float32 (nlist, d)) of largest inner
    product with the row (float (r, d)), the lower index on a tie."""
    import torch

    out = np.empty(len(rows), np.int32)
    with exact_matmul(), torch.no_grad():
        C = torch.from_numpy(np.ascontiguousarray(centroids, np.float32)).to(device)
        for a in range(0, len(rows), LOAD_ROWS):
            X = to_device(rows[a : a + LOAD_ROWS], device)
            out[a : a + len(X)] = _nearest(X, C, 1, sim_elems)[1][:, 0].cpu().numpy()
    return out


def _merge(V, J, v, j, k: int):
    """The k best of running (V float32 (q, w), J int64 ids) and new (v, j): by value, the lower id on a tie
    (padding: -inf, id -1)."""
    import torch

    both_v, both_j = torch.cat([V, v], 1), torch.cat([J, j], 1)
    by_id = torch.sort(both_j, dim=1, stable=True).indices
    both_v, both_j = both_v.gather(1, by_id), both_j.gather(1, by_id)
    order = torch.sort(both_v, dim=1, descending=True, stable=True).indices[:, :k]
    return both_v.gather(1, order), both_j.gather(1, order)


def _starts(keys, nlist: int) -> np.ndarray:
    """int64 (nlist + 1,): where each list's entries start once ``keys`` (torch int64 list ids) are sorted, then
    the end."""
    import torch

    counts = torch.bincount(keys, minlength=nlist).cpu().numpy()
    return np.concatenate([[0], np.cumsum(counts)])


def search(queries: np.ndarray, rows: np.ndarray, row_lists: np.ndarray, row_ids: np.ndarray,
           centroids: np.ndarray, k: int, nprobe: int, *, device: str = "cpu", sim_elems: int = SIM_ELEMS,
           pairs_max: int = PAIRS_MAX, progress: Callable[[int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` rows of largest inner product with each query among the rows of its ``nprobe`` nearest lists.

    queries float (n, d); rows float (m, d), their lists ``row_lists`` int32 (m,) (:func:`assign`) and ids
    ``row_ids`` int64 (m,); centroids float32 (nlist, d). Returns (D float32 (n, k), I int64 (n, k)): exact
    float32 products, each row by decreasing value, the lower id on a tie; where the probed lists hold fewer
    than k rows the rest is D -inf, I -1. With nprobe >= nlist this is exact search.

    Memory on ``device``: the rows (m x d float32), up to pairs_max / nprobe queries at a time with their probe
    pairs, and similarity blocks of at most ``sim_elems`` values. ``progress(queries done)`` after each pass."""
    import torch

    n, m, nlist = len(queries), len(rows), len(centroids)
    nprobe = max(1, min(nprobe, nlist))
    D, I = np.full((n, k), -np.inf, np.float32), np.full((n, k), -1, np.int64)
    if n == 0 or m == 0 or k == 0:
        return D, I
    with exact_matmul(), torch.no_grad():
        C = torch.from_numpy(np.ascontiguousarray(centroids, np.float32)).to(device)
        Y = to_device(rows, device)
        ids = torch.from_numpy(np.ascontiguousarray(row_ids, np.int64)).to(device)
        lists = torch.from_numpy(np.asarray(row_lists, np.int64)).to(device)
        by_id = torch.sort(ids, stable=True).indices
        row_order = by_id[torch.sort(lists[by_id], stable=True).indices]  # by list, then by id
        row_at = _starts(lists, nlist)
        per_pass = max(1, pairs_max // nprobe)
        for a in range(0, n, per_pass):
            X = to_device(queries[a : a + per_pass], device)
            V, J = _probe_all(X, Y, ids, row_order, row_at, C, k, nprobe, sim_elems)
            D[a : a + len(X)], I[a : a + len(X)] = V.cpu().numpy(), J.cpu().numpy()
            if progress:
                progress(len(X))
    return D, I


def _probe_all(X, Y, ids, row_order, row_at: np.ndarray, C, k: int, nprobe: int, sim_elems: int):
    """One pass of :func:`search` for the queries X (torch (p, d)) on the device: (V float32 (p, k), J int64)."""
    import torch

    p, nlist = len(X), len(C)
    probes = _nearest(X, C, nprobe, sim_elems)[1].flatten()  # (p * nprobe,): query q's lists at q * nprobe...
    pair_order = torch.sort(probes, stable=True).indices  # by list, queries ascending within a list
    pair_query = pair_order // nprobe
    pair_at = _starts(probes, nlist)
    V = X.new_full((p, k), -float("inf"))
    J = torch.full((p, k), -1, dtype=torch.int64, device=X.device)
    for lst in np.flatnonzero((np.diff(pair_at) > 0) & (np.diff(row_at) > 0)):
        members = row_order[row_at[lst] : row_at[lst + 1]]
        Yl, ids_l = Y[members], ids[members]
        step = max(1, sim_elems // max(len(members), X.shape[1]))  # bounds the products and the gathered queries
        for b in range(pair_at[lst], pair_at[lst + 1], step):
            q = pair_query[b : min(b + step, pair_at[lst + 1])]  # distinct: a query probes a list once
            S = X[q] @ Yl.T
            if len(members) > k:
                S, j = _best(S, k)  # ties to the lower position, which is the lower id
                found = ids_l[j]
            else:  # all of the list's rows: _merge orders them
                found = ids_l.expand(len(q), -1)
            V[q], J[q] = _merge(V[q], J[q], S, found, k)
    return V, J
