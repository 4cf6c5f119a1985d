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
