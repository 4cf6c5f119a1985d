"""k-nearest-neighbour search by inner product (cosine on L2-normalised rows), in query blocks.

Exact (``index`` flat) search backends (:func:`bitextmine.device.knn_backend`): FAISS on GPU (faiss built
with CUDA), exact float32 torch products + top-k on a CUDA device (y in column shards so that one block's
similarities stay within device.FLAT_SIM_BYTES), FAISS ``IndexFlatIP`` on the CPU. Approximate search
(``index`` ivf / ivfpq, or auto for large sides): FAISS ``IndexIVFFlat`` / ``IndexIVFPQ`` with inner
product, trained on a seeded sample of the searched rows, on a FAISS GPU where :func:`bitextmine.device.index_device`
says so (trained there too); ivf on a CUDA device without FAISS GPUs: the same recipe with torch alone
(:mod:`bitextmine.search.torch_ivf`). :func:`recall_at_k` measures them against exact float32 search.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..device import FLAT_SIM_BYTES, exact_matmul, faiss_module, knn_backend, pq_subquantizers, resolve_device
from ..errors import ConfigError
from .exact import rows_f32
from .topk import merge_topk, topk


def resolve_index(kind: str, rows: int, auto_flat_max: int) -> str:
    """flat | ivf | ivfpq for ``kind`` (auto: flat up to ``auto_flat_max`` searched rows, ivf above)."""
    if kind == "auto":
        return "flat" if rows <= auto_flat_max else "ivf"
    if kind not in ("flat", "ivf", "ivfpq"):
        raise ConfigError(f"index {kind!r}: expected auto, flat, ivf or ivfpq")
    return kind


def ivf_recipe(m: int, nlist: int, train_sample: int, seed: int) -> tuple[int, np.ndarray]:
    """(cells, training rows int64 ascending) of an IVF index over m rows: ``nlist`` (0 = 4 sqrt(m), at least 16),
    at most m / 8, trained on a seeded sample of ``train_sample`` rows (0 = 64 per cell)."""
    nlist = nlist or max(16, int(4 * np.sqrt(m)))
    nlist = min(nlist, max(1, m // 8))  # at least a few rows per cell
    sample = min(m, train_sample or 64 * nlist)
    rows = np.sort(np.random.default_rng(seed).choice(m, sample, replace=False)) if sample < m else np.arange(m)
    return nlist, rows


def ivf_untrained(d: int, nlist: int, kind: str, pq_m: int, where: str):
    """An empty FAISS IVF (``kind`` ivf) or IVF-PQ (ivfpq) index by inner product, ``nlist`` cells, dimension d."""
    faiss = faiss_module()
    quantizer = faiss.IndexFlatIP(d)
    if kind == "ivfpq":
        return faiss.IndexIVFPQ(quantizer, d, nlist, pq_subquantizers(d, pq_m, where), 8, faiss.METRIC_INNER_PRODUCT)
    return faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)


def _ivf_index(y: np.ndarray, kind: str, *, nlist: int, nprobe: int, train_sample: int, pq_m: int, seed: int,
               where: str):
    """A trained and filled FAISS IVF (``kind`` ivf) or IVF-PQ (ivfpq) index by inner product over y float (m, d),
    on ``where`` (cpu | cuda: moved to the FAISS GPUs before training, so the k-means runs there)."""
    faiss = faiss_module()
    m, d = y.shape
    nlist, rows = ivf_recipe(m, nlist, train_sample, seed)
    index = ivf_untrained(d, nlist, kind, pq_m, where)
    gpu = where == "cuda"
    if gpu:
        index = faiss.index_cpu_to_all_gpus(index)
    index.train(np.ascontiguousarray(y[rows], np.float32))
    add_rows(index, y)
    if gpu:
        faiss.GpuParameterSpace().set_index_parameter(index, "nprobe", nprobe)
    else:
        index.nprobe = nprobe
    return index


def add_rows(index, y: np.ndarray, first_id: int | None = None) -> None:
    """Add y's rows in slices (the float32 copy of a memory-mapped side stays small); with ``first_id``,
    under the ids first_id, first_id + 1, ... (``add_with_ids``)."""
    for a in range(0, len(y), 262_144):
        block = np.ascontiguousarray(y[a : a + 262_144], np.float32)
        if first_id is None:
            index.add(block)
        else:
            index.add_with_ids(block, np.arange(first_id + a, first_id + a + len(block), dtype=np.int64))


def knn(
    x: np.ndarray,
    y: np.ndarray,
    k: int,
    *,
    block_size: int = 16384,
    device: str = "auto",
    index: str = "flat",
    nlist: int = 0,
    nprobe: int = 32,
    train_sample: int = 0,
    pq_m: int = 0,
    seed: int = 1,
    shard_rows: int = 0,
    progress: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` rows of ``y`` with the largest inner product with each row of ``x``.

    x: float (n, d); y: float (m, d) (memory-mapped arrays are fine). Returns (D float32 (n, k'),
    I int64 (n, k')) with k' = min(k, m), each row sorted by decreasing similarity. Queries run in
    blocks of ``block_size`` rows. ``index`` flat is exact; ivf / ivfpq are approximate (see module
    docstring; ``nlist``, ``nprobe``, ``train_sample``, ``pq_m``, ``seed``) and may find fewer than k'
    rows in the cells they probe: the slots left empty have D -inf and I -1 (at the end of the row).

    ``shard_rows`` > 0 searches y in shards of that many rows, one index in memory at a time, and
    merges each query's k best over the shards: for sides larger than memory (with memory-mapped y).
    With exact search the result does not depend on the shard size (up to the order of exact ties).
    """
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ConfigError(f"knn: dimensions differ ({x.shape} vs {y.shape})")
    n, m = len(x), len(y)
    k = min(k, m)
    if n == 0 or k == 0:
        return np.zeros((n, k), np.float32), np.zeros((n, k), np.int64)
    if shard_rows and m > shard_rows:
        return _sharded(x, y, k, shard_rows, progress=progress, block_size=block_size, device=device, index=index,
                        nlist=nlist, nprobe=nprobe, train_sample=train_sample, pq_m=pq_m, seed=seed)
    backend = knn_backend(index, device)
    if index == "ivf" and backend == "torch":
        return torch_ivf_knn(x, y, k, nlist=nlist, nprobe=nprobe, train_sample=train_sample, seed=seed,
                             device=resolve_device(device), progress=progress)
    if index in ("ivf", "ivfpq"):
        ivf = _ivf_index(y, index, nlist=nlist, nprobe=nprobe, train_sample=train_sample, pq_m=pq_m, seed=seed,
                         where="cuda" if backend == "faiss-gpu" else "cpu")
        return faiss_search(ivf, x, k, block_size, progress)
    if backend == "torch":
        return exact_knn(x, y, k, device=resolve_device(device), block_size=block_size, progress=progress)
    faiss = faiss_module()
    flat = faiss.IndexFlatIP(y.shape[1])
    if backend == "faiss-gpu":
        flat = faiss.index_cpu_to_all_gpus(flat)
    add_rows(flat, y)
    return faiss_search(flat, x, k, block_size, progress)


def torch_ivf_knn(x: np.ndarray, y: np.ndarray, k: int, *, nlist: int, nprobe: int, train_sample: int, seed: int,
                  device: str, progress: Callable[[int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """IVF-Flat k-NN of x float (n, d) among y float (m, d) with torch on ``device``: the cells and seeded
    training sample of :func:`ivf_recipe` (as the FAISS index), :mod:`bitextmine.search.torch_ivf`'s k-means,
    lists and search. Returns (D float32 (n, k), I int64 (n, k)); slots not found: D -inf, I -1."""
    from . import torch_ivf

    nlist, rows = ivf_recipe(len(y), nlist, train_sample, seed)
    centroids = torch_ivf.train(np.asarray(y[rows], np.float32), nlist, seed=seed, device=device)
    lists = torch_ivf.assign(y, centroids, device=device)
    return torch_ivf.search(x, y, lists, np.arange(len(y), dtype=np.int64), centroids, k, nprobe, device=device,
                            progress=progress)


def exact_knn(x: np.ndarray, y: np.ndarray, k: int, *, device: str = "cpu", block_size: int = 16384,
              sim_bytes: int = FLAT_SIM_BYTES, progress: Callable[[int], None] | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Exact float32 k-NN by torch products on ``device`` (under :func:`bitextmine.device.exact_matmul`).

    x float (n, d), y float (m, d); returns (D float32 (n, k'), I int64 (n, k')), k' = min(k, m), rows sorted
    by decreasing value, ties to the lower row of y. y is held on the device in float32 and searched in
    column shards so that one query block's similarities (block x shard float32) stay within ``sim_bytes``;
    each query's k best are merged over the shards (:func:`bitextmine.search.topk.merge_topk`)."""
    import torch

    n, m = len(x), len(y)
    k = min(k, m)
    block = max(1, min(block_size, n))
    cols = max(k, sim_bytes // (4 * block))
    D, I = np.empty((n, k), np.float32), np.empty((n, k), np.int64)
    with exact_matmul(), torch.no_grad():
        Y = [torch.from_numpy(np.ascontiguousarray(y[s : s + cols], np.float32)).to(device) for s in range(0, m, cols)]
        for a in range(0, n, block):
            xb = torch.from_numpy(np.ascontiguousarray(x[a : a + block], np.float32)).to(device)
            V = J = None
            for s, ys in zip(range(0, m, cols), Y):  # earlier shards hold lower rows: merged ties keep them
                r = topk(xb, ys, k, block=block)
                V, J = merge_topk([V, r.D], [J, r.I + s], k)
            D[a : a + len(xb)], I[a : a + len(xb)] = V.cpu().numpy(), J.cpu().numpy()
            if progress:
                progress(len(xb))
    return D, I


def _sharded(x: np.ndarray, y: np.ndarray, k: int, shard_rows: int, *, progress, **kw) -> tuple[np.ndarray, np.ndarray]:
    """k-NN against y in shards of ``shard_rows`` rows, merged per query (see :func:`knn`)."""
    n, m = len(x), len(y)
    D = I = None
    shards = range(0, m, shard_rows)
    share = np.diff(np.linspace(0, n, len(shards) + 1).astype(np.int64))  # progress: queries per shard, summing to n
    for s, a in enumerate(shards):
        Ds, Is = knn(x, y[a : a + shard_rows], k, **kw)
        # on a tie the earlier shard (lower row) stays first, as in one search
        D, I = merge_topk([D, Ds], [I, np.where(Is >= 0, Is + a, -1)], k)
        if progress:
            progress(int(share[s]))
    return D, I


TIE_SLACK = 2  # neighbours asked of FAISS past k, so that rows tied at the k-th place are all seen
FAISS_K_MAX = 2048  # the most neighbours a FAISS GPU index returns


def faiss_search(index, x: np.ndarray, k: int, block_size: int, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """The k nearest rows of a FAISS ``index`` to each row of x float (n, d), ``block_size`` rows at a time:
    D float32 (n, k) best first, I int64 (n, k), with ties by lower id as every other search here returns
    them (:func:`bitextmine.search.topk.merge_topk` relies on it: FAISS orders equal values its own way, so
    shards or chunks would otherwise change which of two equal rows is kept); -inf and -1 where the probed
    lists hold fewer than k rows. ``progress(rows)`` after each block."""
    n = len(x)
    D = np.empty((n, k), np.float32)
    I = np.empty((n, k), np.int64)
    for a in range(0, n, block_size):
        xb = np.ascontiguousarray(x[a : a + block_size], np.float32)
        D[a : a + len(xb)], I[a : a + len(xb)] = _ties_closed(index, xb, k)
        if progress:
            progress(len(xb))
    return D, I


def _ties_closed(index, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """k best of each row of x in ``index``, ties by lower id: rows whose k-th value is still tied at the last
    place asked for are asked again for twice as many, until the tie ends or the index has no more rows."""
    D = np.empty((len(x), k), np.float32)
    I = np.empty((len(x), k), np.int64)
    rows, want = np.arange(len(x)), k + TIE_SLACK
    while len(rows):
        d, i = ties_by_id(*index.search(x[rows], want))
        D[rows], I[rows] = d[:, :k], i[:, :k]
        if want >= min(index.ntotal, FAISS_K_MAX):
            break
        still = (i[:, -1] >= 0) & (d[:, -1] == d[:, k - 1])  # the tie may go on past what was asked
        rows, want = rows[still], min(2 * want, index.ntotal, FAISS_K_MAX)
    return D, I


def ties_by_id(D: np.ndarray, I: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of (D float (n, c), I int64 (n, c)) sorted by value, best first, equal values by lower id; an entry
    with id -1 (nothing found) gets -inf and goes last."""
    D = np.where(I < 0, -np.inf, D).astype(np.float32)
    by_id = np.argsort(I, axis=1, kind="stable")
    D, I = np.take_along_axis(D, by_id, 1), np.take_along_axis(I, by_id, 1)
    by_value = np.argsort(-D, axis=1, kind="stable")
    return np.take_along_axis(D, by_value, 1), np.take_along_axis(I, by_value, 1)


def sample_queries(n: int, sample: int, seed: int) -> np.ndarray:
    """The queries of a recall check: ``sample`` seeded random rows of n (all when sample >= n), int64 ascending."""
    return np.sort(np.random.default_rng(seed).choice(n, min(sample, n), replace=False))


def recall_at_k(x: np.ndarray, y: np.ndarray, I: np.ndarray, sample: int, *, seed: int = 1,
                device: str = "cpu") -> float:
    """:func:`recall` of the neighbour lists ``I`` int64 (n, k) of x's rows (n, d) among y (m, d), on
    ``sample`` seeded random queries (:func:`sample_queries`)."""
    n, k = I.shape
    if n == 0 or k == 0:
        return 1.0
    rows = sample_queries(n, sample, seed)
    return recall(I[rows], np.asarray(x[rows], np.float32), [y], device=device)


def recall(found: np.ndarray, q: np.ndarray, parts, *, device: str = "cpu", block: int = 262_144) -> float:
    """recall@k: the share of the exact k nearest neighbours of the queries q float (r, d) that their
    neighbour lists ``found`` int64 (r, k) hold (-1: an empty slot), over all queries. The searched side is
    ``parts``, arrays or memory maps of rows whose ids run on from one to the next (a side's chunks, or
    [y]), searched ``block`` rows at a time by exact float32 products (:func:`exact_knn` on ``device``)
    and merged (:func:`bitextmine.search.topk.merge_topk`)."""
    r, k = found.shape
    if r == 0 or k == 0:
        return 1.0
    device = resolve_device(device)
    D = J = None
    first = 0
    for part in parts:
        for a in range(0, len(part), block):
            d, i = exact_knn(q, rows_f32(part, a, a + block), k, device=device)
            D, J = merge_topk([D, d], [J, i + first + a], k)
        first += len(part)
    hits = [len(set(a.tolist()) & set(b.tolist())) for a, b in zip(found, J)]
    return float(np.sum(hits) / (r * k))
