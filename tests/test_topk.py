"""The blockwise top-k (bitextmine.search.topk) against a brute-force reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bitextmine.search.topk import topk


def reference(x, y, k, exclude=()):
    """Every row's k best by a float64 product and Python sorting: value descending, then index ascending."""
    sim = x.astype(np.float64) @ y.astype(np.float64).T
    for a, b in exclude:
        sim[np.asarray(a)[:, None] == np.asarray(b)[None, :]] = -np.inf
    D, I = [], []
    for row in sim:
        best = sorted(range(len(row)), key=lambda j: (-row[j], j))[: min(k, len(row))]
        D.append(row[best])
        I.append(best)
    return np.array(D), np.array(I)


def data(seed, n, m, d=8, levels=None):
    rng = np.random.default_rng(seed)
    if levels:  # few distinct values: many exact ties
        return (rng.integers(-levels, levels + 1, (n, d)).astype(np.float32),
                rng.integers(-levels, levels + 1, (m, d)).astype(np.float32))
    return rng.standard_normal((n, d)).astype(np.float32), rng.standard_normal((m, d)).astype(np.float32)


@pytest.mark.parametrize("n, m, k, block, levels", [
    (37, 53, 1, 8, None), (37, 53, 4, 8, None), (37, 53, 4, 100, None), (5, 3, 4, 2, None),
    (40, 60, 1, 7, 1), (40, 60, 3, 7, 1), (40, 60, 5, 64, 2), (1, 1, 1, 1, None),
])
def test_both_directions_equal_brute_force(n, m, k, block, levels):
    x, y = data(n * 7 + m, n, m, levels=levels)
    r = topk(x, y, k, block=block, columns=True)
    D, I = reference(x, y, k)
    Dc, Ic = reference(y, x, k)
    np.testing.assert_array_equal(r.I, I)
    np.testing.assert_array_equal(r.Ic, Ic)
    np.testing.assert_allclose(r.D, D, atol=1e-5)
    np.testing.assert_allclose(r.Dc, Dc, atol=1e-5)
    assert r.D.dtype == np.float32 and r.I.dtype == np.int64


def test_exclusion_by_keys_and_a_row_with_nothing_left():
    x, y = data(3, 20, 20, levels=1)
    a = np.arange(20) // 2  # equal keys: entries (i, j) of the same pair of rows are left out
    a[19] = 99
    b = np.arange(20) // 2
    r = topk(x, y, 2, block=6, exclude=[(a, b)], columns=True, col_exclude=[(b, a)])
    D, I = reference(x, y, 2, exclude=[(a, b)])
    Dc, Ic = reference(y, x, 2, exclude=[(b, a)])
    np.testing.assert_array_equal(r.I, I)
    np.testing.assert_array_equal(r.Ic, Ic)
    one = topk(x[:1], y[:2], 1, exclude=[(np.zeros(1), np.zeros(2))])  # every entry excluded
    assert one.D[0, 0] == -np.inf and one.I[0, 0] == 0


def test_torch_inputs_give_torch_outputs_on_their_device():
    x, y = data(5, 30, 40)
    r = topk(torch.from_numpy(x), torch.from_numpy(y), 3, block=9, columns=True, col_k=2)
    assert isinstance(r.D, torch.Tensor) and r.Dc.shape == (40, 2)
    np.testing.assert_array_equal(r.I.numpy(), reference(x, y, 3)[1])
    np.testing.assert_array_equal(r.Ic.numpy(), reference(y, x, 2)[1])


@pytest.mark.parametrize("k", [1, 3, 7])
def test_merge_topk_numpy_and_torch_equal_sorting(k):
    from bitextmine.search.topk import merge_topk

    rng = np.random.default_rng(k)
    widths = [2, 1, 3, 3] if k > 1 else [1, 1, 1]
    D, I, first = [], [], 0
    for w in widths:  # parts in ascending id order, each row sorted by value (ties by id): as searches give them
        v = rng.integers(0, 4, (30, w)).astype(np.float32)  # few values: many ties across parts
        ids = np.tile(np.arange(first, first + w), (30, 1))
        order = np.argsort(-v, axis=1, kind="stable")
        D.append(np.take_along_axis(v, order, 1))
        I.append(np.take_along_axis(ids, order, 1))
        first += w
    allv, alli = np.concatenate(D, 1), np.concatenate(I, 1)
    want = [sorted(zip(-row_v, row_i))[:k] for row_v, row_i in zip(allv, alli)]  # value desc, then lower id
    for got_v, got_i in (merge_topk(D, I, k), [t.numpy() for t in merge_topk([torch.from_numpy(a) for a in D],
                                                                              [torch.from_numpy(a) for a in I], k)]):
        assert [list(zip(-v, i)) for v, i in zip(got_v, got_i)] == want
    running = (None, None)  # a running merge from None, one part at a time, gives the same
    for d, i in zip(D, I):
        running = merge_topk([running[0], d], [running[1], i], k)
    np.testing.assert_array_equal(running[1], merge_topk(D, I, k)[1])
