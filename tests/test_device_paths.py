"""The paths written for GPUs, run on the CPU against the paths they replace: rescoring with the candidates'
rows held by torch (DeviceRows), and float16 rows rounded by torch instead of numpy."""

import numpy as np
import pytest

from bitextmine.encoding.embed import embed_pieces
from bitextmine.search.exact import DeviceRows, device_rows, eps_factor, rescore


def _unit(n, d, seed, dtype=np.float32):
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_rescore_with_rows_in_torch_equals_numpy(dtype):
    q, o = _unit(300, 48, 1, dtype), _unit(500, 48, 2, dtype)
    exact = q.astype(np.float32) @ o.astype(np.float32).T
    c, k = 12, 4
    cand = np.argsort(-exact, axis=1)[:, :c].astype(np.int64)
    cand[::7, -3:] = -1  # rows with fewer candidates
    approx = np.take_along_axis(exact, np.where(cand >= 0, cand, 0), 1) + 1e-4
    approx[cand < 0] = -np.inf
    eps = np.full(len(q), eps_factor("bf16", 48))
    D1, I1, ok1 = rescore(q, o, approx, cand, k, eps)
    D2, I2, ok2 = rescore(q, DeviceRows(o, "cpu"), approx, cand, k, eps)
    assert (I1 == I2).all() and (ok1 == ok2).all()
    np.testing.assert_allclose(D1, D2, rtol=0, atol=1e-6)
    ref = np.sort(np.where(cand >= 0, np.take_along_axis(exact, np.where(cand >= 0, cand, 0), 1), -np.inf), 1)[:, ::-1]
    np.testing.assert_allclose(D2, ref[:, :k], rtol=0, atol=1e-6)


def test_device_rows_only_for_cuda():
    a = _unit(10, 8, 3)
    assert device_rows(a, "cpu") is a


def test_float16_rows_rounded_by_torch_equal_numpy_astype():
    import torch

    weight = torch.from_numpy(np.random.default_rng(4).standard_normal((50, 32)).astype(np.float32))
    rng = np.random.default_rng(5)
    lengths = rng.integers(0, 9, 200)
    ids = rng.integers(0, 50, lengths.sum()).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    full = embed_pieces(weight, ids, offsets)
    half = embed_pieces(weight, ids, offsets, np.float16)
    assert half.dtype == np.float16
    assert half.tobytes() == full.astype(np.float16).tobytes()
