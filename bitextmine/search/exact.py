"""Exact k nearest neighbours in both directions from one pass over the similarity matrix.

Mining needs the k best targets of every source and the k best sources of every target: two searches
over the same matrix x @ y.T. Here that matrix is computed once, tile by tile, and every tile serves
both directions: each x row keeps its ``candidates`` best columns so far, each y row its best rows.

The tiles are computed in bfloat16 (on CPUs with AVX512-BF16 and on GPUs several times the float32
rate) and the candidates rescored in float32. A row's answer is *certified* exact when its k-th exact
cosine exceeds the value of its last (weakest) candidate by more than the rounding bound

    eps = 1.05 (3u + u^2 + 3 d 2^-24) |q| max|o|      (u = 2^-8 for bfloat16, 2^-24 for float32)

(bfloat16 rounding of both inputs and of the output, float32 accumulation over d terms): then no row
outside the candidates can reach it. On real sentence embeddings with 16 candidates more than 99.9 % of
rows are certified; the rest are searched again in float32. A check on a sample tile before the pass
confirms the bound holds on this device (else the pass runs in float32). So the result is that of exact
float32 search whatever the tile, block or shard sizes, ties going to the lower row index.

Within a tile, entries are tested in groups of G = 16 (strided) entries through the group's maximum:
each row (and column) has a floor, its c-th best value so far, and only groups whose maximum exceeds it
are looked at; a few per cent of groups on the first tiles, fewer as the floors rise. A row with no
floor yet takes its c best from the tile directly: they lie in its c groups with the largest maxima.

A pass can also keep each row's best among a sample of the other side's rows (:class:`Sample`; the second
stage's reference margins): each side's sampled rows are read first (the pass reads the rows in that order
and names every candidate by its row number before rescoring), so the sample's part of the matrix is the
first tiles of every row and column of tiles, which get one more selection into the lists among the sample,
rescored and certified as the k-NN are. That costs a selection on those tiles, not their products.

Memory: one side (or one shard of it, ``shard_rows``) resident in bfloat16, the other streamed in blocks,
the candidates (n + m, c) and one tile; memory-mapped inputs are read block by block without keeping
their pages resident.
"""

from __future__ import annotations

import mmap
import warnings
from typing import Callable, NamedTuple

import numpy as np

from ..device import cpu_fp32_matmul, exact_matmul, resident_rows, search_precision
from ..errors import ConfigError
from .topk import merge_topk

G = 16  # entries per group in the in-tile selection
UNIT_ROUNDOFF = {"bf16": 2.0**-8, "fp32": 2.0**-24}


def _release(a) -> None:
    """Drop a read-only memory map's pages from this process's resident set (they stay in the page cache)."""
    mm = getattr(a, "_mmap", None)
    if mm is not None and getattr(a, "mode", None) == "r":
        try:
            mm.madvise(mmap.MADV_DONTNEED)
        except (AttributeError, OSError, ValueError):
            pass


def rows_f32(a: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Rows lo:hi of ``a`` (an array or memory map, (n, d)) as a float32 (hi - lo, d) copy."""
    out = np.array(a[lo:hi], dtype=np.float32)
    _release(a)
    return out


def to_device(a: np.ndarray, device: str, dtype=np.float32, block: int = 1 << 16):
    """Rows of ``a`` (r, d), a numpy array, memory map or :class:`RowView`, as a torch tensor (r, d) on ``device``
    of ``dtype`` (float32; None: a's own float16 or float32, which keeps every value), copied ``block`` rows at
    a time: a float16 memory map is never converted whole in host memory, and its pages are let go after
    each block."""
    import torch

    dt = np.dtype(dtype if dtype is not None else (np.float16 if a.dtype == np.float16 else np.float32))
    out = torch.empty((len(a), a.shape[1]), dtype=getattr(torch, dt.name), device=device)
    with warnings.catch_warnings():  # read-only memory maps: torch warns, but nothing here writes to them
        warnings.simplefilter("ignore", UserWarning)
        for s in range(0, len(a), block):
            out[s : s + block] = torch.from_numpy(np.ascontiguousarray(a[s : s + block], dt))
            _release(a)
    return out


def _in_order(a: np.ndarray, idx: np.ndarray, chunk: int = 2048):
    """Yield (positions int64 (<= chunk,), rows float32 (<= chunk, d)): the rows ``idx`` int (r,) of ``a``,
    read ``chunk`` at a time in ascending order, ``rows[i]`` being ``a[idx[positions[i]]]`` (a memory
    map's pages are let go after each chunk: random rows touch a page each)."""
    order = np.argsort(idx, kind="stable")
    for c in range(0, len(idx), chunk):
        part = order[c : c + chunk]
        rows = np.asarray(a[idx[part]], np.float32)
        _release(a)
        yield part, rows


def _gather_f32(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Rows ``idx`` int (r,) of ``a`` as float32 (r, d), read in ascending order (:func:`_in_order`)."""
    out = np.empty((len(idx), a.shape[1]), np.float32)
    for part, rows in _in_order(a, idx):
        out[part] = rows
    return out


def eps_factor(precision: str, d: int) -> float:
    """eps / (|q| max|o|) for tiles computed at ``precision`` (see the module docstring)."""
    u = UNIT_ROUNDOFF[precision]
    return 1.05 * (3 * u + u * u + 3 * d * 2.0**-24)


def _pad(t, mult: int):
    """t (r, d) with zero rows appended up to a multiple of ``mult``."""
    import torch

    extra = -len(t) % mult
    return torch.cat([t, t.new_zeros((extra, t.shape[1]))]) if extra else t


def _dense(S, c: int, axis: int):
    """Each row's (axis 0) or column's (axis 1) c largest entries of the tile S (R, C), R and C multiples
    of G: (key int64 (e,), other int64 (e,), value float32 (e,)) as :func:`_entries` gives them.

    A row's c best entries lie in its c groups (of G strided entries) with the largest maxima."""
    import torch

    R, C = S.shape
    ar = torch.arange(G, device=S.device)
    if axis == 0:
        ng = C // G
        grp = S.view(R, G, ng).amax(1).topk(min(c, ng), 1, sorted=False).indices  # (R, c')
        other = (grp.unsqueeze(2) + ng * ar).reshape(R, -1)
        top = S.gather(1, other).topk(min(c, other.shape[1]), 1, sorted=False)
    else:
        ng = R // G
        grp = S.view(G, ng, C).amax(0).topk(min(c, ng), 0, sorted=False).indices.T  # (C, c')
        other = (grp.unsqueeze(2) + ng * ar).reshape(C, -1)
        top = S.T.gather(1, other).topk(min(c, other.shape[1]), 1, sorted=False)
    key = torch.arange(len(other), device=S.device)[:, None].expand_as(top.indices)
    return key.reshape(-1), other.gather(1, top.indices).reshape(-1), top.values.float().reshape(-1)


def _entries(S, floor, axis: int):
    """Entries of the tile S (R, C) above the ``floor`` of their row (axis 0; floor (R,)) or column (axis 1;
    floor (C,)): (key int64 (e,) ascending, other int64 (e,) column or row, value float32 (e,)).

    Groups of G strided entries are tested by their maximum first; only groups that pass are looked at.
    R and C are multiples of G."""
    import torch

    R, C = S.shape
    ar = torch.arange(G, device=S.device)
    low = floor.to(S.dtype)  # floors are values of S: exact in its dtype
    M = S
    if S.dtype == torch.bfloat16 and bool((low >= 0).all()):
        # bfloat16 bits read as int16 keep the order of non-negative values, and negative values (sign
        # bit set) fall below them: with floors >= 0 the group test is the same, and int16 maxima are fast
        M, low = S.view(torch.int16), low.view(torch.int16)
    if axis == 0:
        ng = C // G
        key, grp = torch.nonzero(M.view(R, G, ng).amax(1) > low[:, None], as_tuple=True)
        other = grp[:, None] + ng * ar
        val = S.view(-1)[(key * C)[:, None] + other]
    else:
        ng = R // G
        grp, key = torch.nonzero(M.view(G, ng, C).amax(0) > low[None, :], as_tuple=True)  # by group
        other = grp[:, None] + ng * ar
        val = S.view(-1)[other * C + key[:, None]]
    keep = val > floor[key][:, None]
    key, other, val = key[:, None].expand_as(other)[keep], other[keep], val[keep].float()
    if axis == 1:  # to key order (a stable sort of the few entries left is cheaper than a transposed nonzero)
        order = torch.argsort(key, stable=True)
        key, other, val = key[order], other[order], val[order]
    return key, other, val


def _merge(V, I, key, idx, val):
    """Each key's c best of V float32 (K, c) / I int32 or int64 (K, c) (rows sorted by decreasing value) and the
    entries (key int64 (e,) ascending in 0..K-1, idx int64 (e,), val float32 (e,)). Returns the new (V, I)."""
    import torch

    if len(key) == 0:
        return V, I
    K, c = V.shape
    counts = torch.bincount(key, minlength=K)
    width = int(counts.max())
    if K * width > 1 << 25:  # a few keys with very many entries: merge them in slices of keys
        cut = int(torch.searchsorted(key, torch.tensor(K // 2, device=key.device)))
        if K > 1 and 0 < cut < len(key):
            V1, I1 = _merge(V[: K // 2], I[: K // 2], key[:cut], idx[:cut], val[:cut])
            V2, I2 = _merge(V[K // 2 :], I[K // 2 :], key[cut:] - K // 2, idx[cut:], val[cut:])
            return torch.cat([V1, V2]), torch.cat([I1, I2])
    pos = torch.arange(len(key), device=key.device) - (torch.cumsum(counts, 0) - counts)[key]
    bv = torch.full((K, width), -torch.inf, device=V.device)
    bi = torch.full((K, width), -1, dtype=I.dtype, device=V.device)
    bv[key, pos] = val
    bi[key, pos] = idx.to(I.dtype)
    top = torch.cat([V, bv], 1).topk(c, 1)
    return top.values, torch.cat([I, bi], 1).gather(1, top.indices)


def _precision_holds(x, y, precision: str, device) -> bool:
    """Whether tiles at ``precision`` stay within eps of float32 on a sample (64 x 256) of x and y (run it
    under :func:`bitextmine.device.exact_matmul`, as the pass it guards)."""
    import torch

    if precision == "fp32":
        return True
    xs = torch.from_numpy(rows_f32(x, 0, 64))
    ys = torch.from_numpy(rows_f32(y, 0, 256))
    exact = xs @ ys.T
    low = (xs.to(device, torch.bfloat16) @ ys.to(device, torch.bfloat16).T).float().cpu()
    bound = eps_factor(precision, x.shape[1]) * xs.norm(dim=1)[:, None] * ys.norm(dim=1)[None, :] / 1.05
    return bool(((low - exact).abs() <= bound + 1e-30).all())


def _dots(Q: np.ndarray, r: np.ndarray, o, idx: np.ndarray) -> np.ndarray:
    """float32 (len(idx),): the inner products Q[r[i]] . o[idx[i]] (Q float32 (b, d), r and idx int (p,)),
    computed chunk by chunk as :func:`_in_order` reads o, so neither the gathered rows of ``o`` nor the
    repeated rows of Q are ever held whole. ``o`` may be a :class:`DeviceRows` (the products run there)."""
    if isinstance(o, DeviceRows):
        return o.dots(Q, r, idx)
    out = np.empty(len(idx), np.float32)
    for part, rows in _in_order(o, idx):
        out[part] = np.einsum("ij,ij->i", Q[r[part]], rows)
    return out


class DeviceRows:
    """The rows of ``a`` (m, d) float16 or float32 (arrays and memory maps) held on a CUDA device in their own
    dtype (exact: float16 widens to float32 without rounding, :func:`to_device`), for rescoring candidates
    there (:func:`rescore`): gathering random rows of a memory map on the CPU cost most of the time of exact
    search on a GPU (measured on an H100: 57 of 88 s at 250k x 1M)."""

    def __init__(self, a: np.ndarray, device: str):
        self.shape, self.device = a.shape, device
        self.t = to_device(a, device, dtype=None)

    def __len__(self) -> int:
        return self.shape[0]

    def dots(self, Q: np.ndarray, r: np.ndarray, idx: np.ndarray, chunk: int = 1 << 18) -> np.ndarray:
        """float32 (len(idx),): Q[r[i]] . a[idx[i]] in float32 on the device (Q float32 (b, d))."""
        import torch

        Qd = torch.from_numpy(np.ascontiguousarray(Q, np.float32)).to(self.device)
        rd = torch.from_numpy(np.asarray(r, np.int64)).to(self.device)
        od = torch.from_numpy(np.asarray(idx, np.int64)).to(self.device)
        out = torch.empty(len(idx), dtype=torch.float32, device=self.device)
        for s in range(0, len(idx), chunk):
            out[s : s + chunk] = (Qd[rd[s : s + chunk]] * self.t[od[s : s + chunk]].float()).sum(1)
        return out.cpu().numpy()


def device_rows(a: np.ndarray, device: str):
    """``a`` as :class:`DeviceRows` on a CUDA ``device`` when it is a float16/float32 array (or array-like such as
    :class:`RowView`) that fits in a quarter of the free device memory; else ``a`` itself (rescoring then
    reads it on the CPU)."""
    from ..device import is_cuda

    if not is_cuda(device) or getattr(a, "dtype", None) not in (np.float16, np.float32):
        return a
    import torch

    torch.cuda.empty_cache()  # the pass's tiles and shards, cached by torch, count as used
    nbytes = a.shape[0] * a.shape[1] * np.dtype(a.dtype).itemsize
    return DeviceRows(a, device) if nbytes < torch.cuda.mem_get_info(device)[0] // 4 else a


class _Plan(NamedTuple):
    """Sizes and dtype of one pass: tiles tile_rows x tile_cols, x streamed in blocks of block_rows, y resident
    ``shard`` rows at a time, c candidates per row, on ``dev`` (a torch.device) with tiles of ``dtype``,
    multiplied by ``matmul`` (torch, or numpy's BLAS for float32 tiles on CPUs where it is faster)."""

    dev: object
    dtype: object
    c: int
    tile_rows: int
    tile_cols: int
    block_rows: int
    shard: int
    matmul: str = "torch"
    rows: bool = True  # keep x's rows' candidates (the direction x -> y)
    cols: bool = True  # keep y's rows' candidates (y -> x)


class Sample(NamedTuple):
    """Lists a pass can keep besides the k-NN (the second stage's reference margins,
    :mod:`bitextmine.mining.reference`): each x row's k best among y's rows ``cols`` and each y row's k best
    among x's rows ``rows`` (int64, ascending, row numbers within y and x)."""

    cols: np.ndarray
    rows: np.ndarray
    k: int


class _Best(NamedTuple):
    """The running candidates: row_v float32 (n, c) / row_i int32 (n, c) for x's rows, col_v / col_i (m, c)
    for y's rows (sorted by decreasing value; -inf / -1 where none yet), and the float32 row norms;
    ``sampled``: the same among a :class:`Sample`'s rows (:class:`_Sampled`), or None."""

    row_v: object
    row_i: object
    col_v: object
    col_i: object
    x_norm: np.ndarray
    y_norm: np.ndarray
    sampled: object = None


class _Sampled(NamedTuple):
    """The running candidates among a :class:`Sample`'s rows, which the pass reads first (its rows ``x_rows`` of x
    and ``y_rows`` of y are the first of each side in the pass's order): row_v / row_i (n, c) of x's rows among
    y's first y_rows, col_v / col_i (m, c) of y's rows among x's first x_rows."""

    x_rows: int
    y_rows: int
    row_v: object
    row_i: object
    col_v: object
    col_i: object


def knn_both(
    x: np.ndarray,
    y: np.ndarray,
    k: int,
    *,
    candidates: int = 16,
    block_rows: int = 8192,
    tile_rows: int = 0,
    tile_cols: int = 0,
    shard_rows: int = 0,
    device: str = "cpu",
    precision: str = "auto",
    direction: str = "both",
    sample: Sample | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
    """Exact k-NN by inner product of x's rows among y's and of y's among x's, in one pass.

    x float (n, d), y float (m, d) (memory maps are fine). Returns (Dxy float32 (n, min(k, m)), Ixy int64,
    Dyx float32 (m, min(k, n)), Iyx int64, info); rows sorted by decreasing similarity, ties by lower index.
    ``direction`` both | xy | yx: xy keeps only x's rows' neighbours (Dyx, Iyx None), yx only y's (Dxy, Ixy
    None); the other direction's results are what "both" gives.
    ``sample`` (:class:`Sample`): the same pass also finds each x row's sample.k best among y's rows sample.cols
    and each y row's among x's sample.rows, exact and certified in the same way: info["sample"] = (Dxs float32
    (n, min(sample.k, len(cols))), Ixs int64 row numbers within y, Dys (m, min(sample.k, len(rows))), Iys within
    x), None for a direction not kept; their products are the pass's own, so they cost a selection, not a search.
    info: precision used, rows searched again (``refined``: [x side, y side]), the tiles' ``matmul`` (torch
    or numpy: the faster on this CPU, :func:`bitextmine.device.cpu_fp32_matmul`). ``block_rows`` x rows per
    streamed block, tiles of ``tile_rows`` x ``tile_cols`` (0: by device), ``shard_rows`` y rows resident
    at a time (0 = 32 MiB of them on a CPU, what fits on a GPU); ``candidates`` per row (>= k);
    ``precision`` auto | bf16 | fp32 for the tiles (:func:`bitextmine.device.search_precision`). ``progress`` gets n + m
    in all. The safety check, the pass and the rescoring all run under :func:`bitextmine.device.exact_matmul`
    (no TF32, float32 accumulation), whatever the caller's matmul settings.
    """
    import torch

    n, m = len(x), len(y)
    if n == 0 or m == 0 or k < 1:
        raise ConfigError("knn_both: both sides need rows and k >= 1")
    if direction not in ("both", "xy", "yx"):
        raise ConfigError(f"knn_both: direction {direction!r}: expected both, xy or yx")
    dev = torch.device(device)
    with exact_matmul():
        precision = search_precision(precision, str(dev))
        if not _precision_holds(x, y, precision, dev):
            precision = "fp32"
        c = max(candidates, k, sample.k if sample is not None else 0)  # the sample's lists need sample.k of them
        plan = _plan(n, m, x.shape[1], c, dev, precision, block_rows, tile_rows, tile_cols, shard_rows)
        plan = plan._replace(rows=direction != "yx", cols=direction != "xy")
        if sample is None:
            best = _pass(x, y, plan, progress)
        else:  # each side's sampled rows first: the lists among them are those of the first tiles
            px, py = _sample_first(len(x), sample.rows), _sample_first(len(y), sample.cols)
            best = _pass(RowView(x, px), RowView(y, py), plan, progress, (len(sample.rows), len(sample.cols)))
            best = _in_row_order(best, px, py)
        D1, I1, D2, I2, info = _certified(x, y, best, k, precision, device, plan, sample)
        return D1, I1, D2, I2, {**info, "matmul": plan.matmul}


def _sample_first(n: int, rows: np.ndarray) -> np.ndarray:
    """The order int64 (n,) of 0..n-1 that reads the rows ``rows`` (ascending) first, then the others ascending."""
    rest = np.ones(n, bool)
    rest[rows] = False
    return np.concatenate([np.asarray(rows, np.int64), np.flatnonzero(rest)])


def _in_row_order(best: _Best, px: np.ndarray, py: np.ndarray) -> _Best:
    """``best`` of a pass over x's rows in the order px and y's in the order py, back in row order, its
    candidates as row numbers of x and y."""
    import torch

    dev = best.row_v.device
    # per side: the position each row was read at, and the row read at each position (int32, as candidates are)
    at = {side: torch.from_numpy(np.argsort(order)).to(dev) for side, order in (("x", px), ("y", py))}
    named = {side: torch.from_numpy(order.astype(np.int32)).to(dev) for side, order in (("x", px), ("y", py))}

    def back(V, I, rows: str, ids: str):
        if len(V) == 0:
            return V, I
        I = I[at[rows]]
        real = (I >= 0) & (I < len(named[ids]))  # a list longer than the other side keeps slots past its rows
        return V[at[rows]], torch.where(real, named[ids][I.clamp(0, len(named[ids]) - 1).long()], I)

    sm = best.sampled
    row_v, row_i = back(best.row_v, best.row_i, "x", "y")
    col_v, col_i = back(best.col_v, best.col_i, "y", "x")
    srv, sri = back(sm.row_v, sm.row_i, "x", "y")
    scv, sci = back(sm.col_v, sm.col_i, "y", "x")
    x_norm, y_norm = np.empty_like(best.x_norm), np.empty_like(best.y_norm)
    x_norm[px], y_norm[py] = best.x_norm, best.y_norm
    return _Best(row_v, row_i, col_v, col_i, x_norm, y_norm, sm._replace(row_v=srv, row_i=sri, col_v=scv, col_i=sci))


def _plan(n: int, m: int, d: int, c: int, dev, precision: str, block_rows: int, tile_rows: int, tile_cols: int,
          shard_rows: int) -> _Plan:
    """The :class:`_Plan` of a pass (see :func:`knn_both` for the arguments; 0 = by device)."""
    import torch

    # a CPU tile (1024 x 4096 bf16, 8 MB) stays in cache: both faster products and faster passes over it
    tile_rows = tile_rows or (1024 if dev.type == "cpu" else 8192)
    tile_cols = tile_cols or (4096 if dev.type == "cpu" else 32768)
    tile_rows, tile_cols = (max(G, t - t % G) for t in (tile_rows, tile_cols))
    block_rows = max(tile_rows, block_rows - block_rows % tile_rows)
    itemsize = 2 if precision == "bf16" else 4
    shard = shard_rows if 0 < shard_rows < m else resident_rows(m, n, d, c, str(dev), itemsize, align=G)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    matmul = cpu_fp32_matmul(256, tile_cols, d) if dev.type == "cpu" and precision == "fp32" else "torch"
    return _Plan(dev, dtype, c, tile_rows, tile_cols, block_rows, shard, matmul)


def _lists(n: int, m: int, plan: _Plan) -> tuple:
    """Empty running candidates (row_v, row_i, col_v, col_i), plan.c a row, of n x rows and m y rows (none for a
    direction the plan does not keep); row numbers < 2^31 in int32."""
    import torch

    dev, c = plan.dev, plan.c
    n_, m_ = n if plan.rows else 0, m if plan.cols else 0
    return (torch.full((n_, c), -torch.inf, device=dev), torch.full((n_, c), -1, dtype=torch.int32, device=dev),
            torch.full((m_, c), -torch.inf, device=dev), torch.full((m_, c), -1, dtype=torch.int32, device=dev))


def _pass(x: np.ndarray, y: np.ndarray, plan: _Plan, progress, sampled: tuple[int, int] | None = None) -> _Best:
    """The pass over x @ y.T: y in resident shards, x streamed in blocks; every tile updates both sides'
    candidates (and with ``sampled`` (x rows, y rows) the candidates among x's and y's first rows). Returns
    them (:class:`_Best`)."""
    import torch

    n, m = len(x), len(y)
    if sampled is not None:
        # as many candidates as the k-NN's: with 8, a quarter of the rows had to be searched again
        sampled = _Sampled(*sampled, *_lists(n, m, plan))
    best = _Best(*_lists(n, m, plan), np.zeros(n, np.float32), np.zeros(m, np.float32), sampled)
    done = 0.0
    with torch.inference_mode():
        for s0 in range(0, m, plan.shard):
            s1 = min(m, s0 + plan.shard)
            Y = _shard(y, s0, s1, plan, best.y_norm)
            for a in range(0, n, plan.block_rows):
                Xf = rows_f32(x, a, a + plan.block_rows)
                if s0 == 0:
                    best.x_norm[a : a + len(Xf)] = np.linalg.norm(Xf, axis=1)
                _block(_pad(torch.from_numpy(Xf).to(plan.dev, plan.dtype), G), len(Xf), a, Y, s0, s1, plan, best)
                done += len(Xf) / n * (s1 - s0) / m * (n + m)
                if progress and int(done) > 0:
                    progress(int(done))
                    done -= int(done)
            del Y
    return best


def _shard(y: np.ndarray, s0: int, s1: int, plan: _Plan, y_norm: np.ndarray):
    """Rows s0:s1 of y on the device in the tiles' dtype, zero rows padding them to a multiple of G, converted
    block by block (no float32 copy of the whole shard); their norms go to y_norm[s0:s1]."""
    import torch

    Y = torch.zeros((_ceil(s1 - s0), y.shape[1]), dtype=plan.dtype, device=plan.dev)  # padding rows stay 0
    for a in range(s0, s1, plan.block_rows):
        Yf = rows_f32(y, a, min(s1, a + plan.block_rows))
        y_norm[a : a + len(Yf)] = np.linalg.norm(Yf, axis=1)
        Y[a - s0 : a - s0 + len(Yf)] = torch.from_numpy(Yf).to(plan.dev, plan.dtype)
    return Y


def _block(X, rows: int, a: int, Y, s0: int, s1: int, plan: _Plan, best: _Best) -> None:
    """Merge the tiles of X (rows ``rows`` of x from row a, padded) @ Y (y's shard s0:s1) into ``best``:
    each x row's and each y row's c best (tiles small enough to stay in cache on a CPU)."""
    import torch

    c = plan.c
    sv, si = best.col_v[s0:s1], best.col_i[s0:s1]  # views: merged in place
    for r0 in range(0, rows, plan.tile_rows):
        r1 = min(rows, r0 + plan.tile_rows)
        Xt = X[r0 : r0 + _ceil(r1 - r0)]
        rv, ri = best.row_v[a + r0 : a + r1], best.row_i[a + r0 : a + r1]
        for t0 in range(0, s1 - s0, plan.tile_cols):
            t1 = min(s1 - s0, t0 + plan.tile_cols)
            S = _product(Xt, Y[t0 : t0 + _ceil(t1 - t0)], plan.matmul)
            if len(S) > r1 - r0:  # padding rows and columns never pass a floor
                S[r1 - r0 :] = -torch.inf
            if S.shape[1] > t1 - t0:
                S[:, t1 - t0 :] = -torch.inf
            # a row's floor is its c-th best so far (rows are kept sorted); none yet: the c best here
            if plan.rows:
                r, j, v = _candidates(S, rv[:, -1], r1 - r0, 0, c)
                rv, ri = _merge(rv, ri, r, j + s0 + t0, v)
            if plan.cols:
                j, r, v = _candidates(S, sv[t0:t1, -1], t1 - t0, 1, c)
                sv[t0:t1], si[t0:t1] = _merge(sv[t0:t1], si[t0:t1], j, r + a + r0, v)
            if best.sampled is not None:
                _sampled_tile(S, a + r0, r1 - r0, s0 + t0, t1 - t0, plan, best.sampled)
        if plan.rows:
            best.row_v[a + r0 : a + r1], best.row_i[a + r0 : a + r1] = rv, ri


def _sampled_tile(S, x0: int, nx: int, y0: int, ny: int, plan: _Plan, sm: _Sampled) -> None:
    """Merge the entries of tile S (x rows x0 .. x0 + nx, y rows y0 .. y0 + ny; padding at -inf) among the
    sampled rows (x's first sm.x_rows, y's first sm.y_rows) into the x rows' and y rows' lists among them, in
    place. A tile only partly among them is masked in a copy."""
    import torch

    wy, wx = min(ny, sm.y_rows - y0), min(nx, sm.x_rows - x0)  # sampled columns, rows of the tile
    for keep, axis, w, whole, V, I, k0, nk, first in ((plan.rows, 0, wy, ny, sm.row_v, sm.row_i, x0, nx, y0),
                                                      (plan.cols, 1, wx, nx, sm.col_v, sm.col_i, y0, ny, x0)):
        if not keep or w <= 0:
            continue
        T = S
        if w < whole:
            T = S.clone()
            (T[:, w:] if axis == 0 else T[w:]).fill_(-torch.inf)
        key, other, val = _candidates(T, V[k0 : k0 + nk, -1], nk, axis, plan.c)
        real = val > -torch.inf  # a masked entry taken while a list is not full yet
        V[k0 : k0 + nk], I[k0 : k0 + nk] = _merge(V[k0 : k0 + nk], I[k0 : k0 + nk], key[real], other[real] + first,
                                                   val[real])


def _product(A, B, matmul: str):
    """The tile A @ B.T (torch tensors (r, d) and (t, d)): by torch, or (``matmul`` numpy; CPU float32) by
    numpy's BLAS."""
    import torch

    if matmul == "numpy":
        return torch.from_numpy(A.numpy() @ B.numpy().T)
    return A @ B.T


def _certified(x: np.ndarray, y: np.ndarray, best: _Best, k: int, precision: str, device: str, plan: _Plan,
               sample: Sample | None = None):
    """Rescore each kept direction's candidates in float32 (:func:`rescore`) and search its uncertified rows
    again (:func:`exact_rows`); the same for the lists among a sample (info["sample"], info["sample_refined"]).
    Returns knn_both's (Dxy, Ixy, Dyx, Iyx, info) (None for a direction not kept)."""
    f = eps_factor(precision, x.shape[1])
    sm = best.sampled
    out: list = [None] * 4
    sampled: list = [None] * 4
    refined, sample_refined = [0, 0], [0, 0]
    for side, (q, o, V, I) in enumerate(((x, y, best.row_v, best.row_i), (y, x, best.col_v, best.col_i))):
        if not (plan.rows, plan.cols)[side]:
            continue
        eps = f * (best.x_norm, best.y_norm)[side] * (best.y_norm, best.x_norm)[side].max()
        # on a GPU the candidates' rows are read there (each side uploaded once, freed before the other's)
        od = device_rows(o, device)
        D, J, refined[side] = _exact_lists(q, o, od, V, I, min(k, len(o)), eps, plan.c, device)
        out[2 * side : 2 * side + 2] = D, J
        if sm is not None:
            among = (sample.cols, sample.rows)[side]
            Vs, Is = ((sm.row_v, sm.row_i), (sm.col_v, sm.col_i))[side]
            Ds, Js, sample_refined[side] = _exact_lists(q, o, od, Vs, Is, min(sample.k, len(among)), eps, plan.c,
                                                        device, among)
            sampled[2 * side : 2 * side + 2] = Ds, Js
        del od
    info = {"precision": precision, "refined": refined}
    if sm is not None:
        info.update(sample=tuple(sampled), sample_refined=sample_refined)
    return (*out, info)


def _exact_lists(q, o, od, V, I, k: int, eps: np.ndarray, c: int, device: str, among: np.ndarray | None = None):
    """The k best of o's rows (of its rows ``among`` int64 ascending, if given) for each q row from its running
    candidates V / I (torch (len(q), c)): rescored in float32 (``od``: o, or its rows on the device), rows not
    certified searched again. Returns (D float32 (len(q), k), J int64 row numbers of o, rows searched again)."""
    if k == 0:
        return np.zeros((len(q), 0), np.float32), np.zeros((len(q), 0), np.int64), 0
    D, J, ok = rescore(q, od, V.cpu().numpy(), I.cpu().numpy(), k, eps)
    redo = np.flatnonzero(~ok)
    if len(redo):
        within = o if among is None else RowView(o, among)
        D[redo], J[redo] = exact_rows(q, within, redo, k, c, device=device)
        if among is not None:
            J[redo] = among[J[redo]]
    return D, J, len(redo)


def _candidates(S, floor, keys: int, axis: int, c: int):
    """Entries of tile S for the first ``keys`` rows (axis 0) or columns (axis 1) that may enter their c best
    (floor float32 (keys,), the c-th best so far): above the floor, or with any floor at -inf the c best of
    each (:func:`_dense`). Returns (key, other, value) with keys ascending."""
    import torch

    if bool(torch.isneginf(floor).any()):
        key, other, val = _dense(S, c, axis)
        keep = key < keys
        return key[keep], other[keep], val[keep]
    return _entries(S, _pad_vec(floor, S.shape[axis]), axis)


def _pad_vec(v, size: int):
    """v (r,) padded with +inf up to ``size`` (padding never passes)."""
    import torch

    return torch.cat([v, v.new_full((size - len(v),), torch.inf)]) if size > len(v) else v


def _ceil(r: int) -> int:
    return r + (-r % G)


def rescore(q: np.ndarray, o: np.ndarray, approx: np.ndarray, cand: np.ndarray, k: int, eps: np.ndarray,
            block: int = 4096) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact float32 cosines of each q row's candidates, and its k best.

    q (n, d), o (m, d) float arrays (o also a :class:`DeviceRows`: products on its device); approx float32
    (n, c) approximate values of the candidate rows cand int32 or int64 (n, c) of o (-1: none); eps float (n,) the bound on |approx - exact|; rows of o that are not
    candidates have approximate values at most the weakest candidate's. Returns (D float32 (n, k),
    I int64 (n, k), certified bool (n,)): D/I sorted by decreasing cosine, ties by lower index; certified
    where no row of o outside the candidates can be among the k best. Candidates whose approximate value
    is more than 2 eps below the k-th best approximate value cannot be among the k best and are skipped.
    """
    n = len(q)
    D = np.empty((n, k), np.float32)
    I = np.empty((n, k), np.int64)
    ok = np.empty(n, bool)
    for a in range(0, n, block):
        b = min(n, a + block)
        av, ci = approx[a:b], cand[a:b].astype(np.int64)
        kth = -np.partition(-av, k - 1, axis=1)[:, k - 1]
        need = (ci >= 0) & (av >= (kth - 2 * eps[a:b])[:, None])
        r, j = np.nonzero(need)
        E = np.full(av.shape, -np.inf, np.float32)
        E[r, j] = _dots(rows_f32(q, a, b), r, o, ci[r, j])
        D[a:b], I[a:b] = _best(E, np.where(ci >= 0, ci, np.iinfo(np.int64).max), k)
        weakest = av.min(1)
        ok[a:b] = (weakest == -np.inf) | (D[a:b, k - 1] > weakest + eps[a:b])
    return D, I, ok


def _best(E: np.ndarray, idx: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best (E desc, then idx asc) of each row of E float32 (r, c) with ids idx int64 (r, c)."""
    by_id = np.argsort(idx, axis=1, kind="stable")
    E, idx = np.take_along_axis(E, by_id, 1), np.take_along_axis(idx, by_id, 1)
    order = np.argsort(-E, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(E, order, 1), np.take_along_axis(idx, order, 1)


def exact_rows(q: np.ndarray, o: np.ndarray, rows: np.ndarray, k: int, c: int, *, device: str = "cpu",
               block: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """The k best rows of o for the q rows ``rows`` int64 (r,), by float32 search over o in blocks (equal
    values: lower rows first, also beyond c tied rows), then :func:`rescore` (so values match the
    bfloat16 path's). Returns (D float32 (r, k), I int64 (r, k))."""
    import torch

    Q = torch.from_numpy(_gather_f32(q, rows)).to(device)
    c = min(max(c, k), len(o))
    v = torch.full((len(rows), c), -torch.inf, device=device)
    i = torch.full((len(rows), c), -1, dtype=torch.int64, device=device)
    o_max = 0.0
    with exact_matmul(), torch.inference_mode():
        for a in range(0, len(o), block):
            Of = rows_f32(o, a, a + block)
            o_max = max(o_max, float(np.linalg.norm(Of, axis=1).max()))
            sim = Q @ torch.from_numpy(Of).to(device).T
            ids = torch.arange(a, a + len(Of), device=device).expand_as(sim)
            # stable: among equal values the earlier (lower) rows stay, whatever the block size
            v, i = merge_topk([v, sim], [i, ids], c)
    sub = RowView(q, rows)
    eps = eps_factor("fp32", q.shape[1]) * np.linalg.norm(Q.cpu().numpy(), axis=1) * o_max
    D, I, _ = rescore(sub, o, v.cpu().numpy(), i.cpu().numpy(), k, eps)
    return D, I


class RowView:
    """The rows ``rows`` int (r,) of ``a`` (n, d) as an (r, d) array-like: len, shape and indexing by a slice or
    an index array give float32 copies (what :func:`knn_both` and :func:`rescore` read); ``normalise``: each
    row divided by its L2 norm (zero rows stay zero), the same values whichever way a row is read."""

    def __init__(self, a: np.ndarray, rows: np.ndarray, *, normalise: bool = False):
        self.a, self.rows, self.shape, self.normalise = a, rows, (len(rows), a.shape[1]), normalise
        self.ndim, self.dtype = 2, np.dtype(np.float32)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, s) -> np.ndarray:
        x = _gather_f32(self.a, self.rows[s])
        if self.normalise:
            norm = np.sqrt(np.einsum("ij,ij->i", x, x))[:, None]
            np.divide(x, norm, out=x, where=norm > 0)
        return x
