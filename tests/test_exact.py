"""The one-pass exact k-NN in both directions (bitextmine.search.exact) against brute force."""

import numpy as np
import pytest
import torch

from bitextmine.search import exact
from bitextmine.search.exact import G


def knn_both(*args, **kw):
    """bitextmine.search.exact.knn_both with bf16 tiles unless a test asks otherwise (auto could pick fp32)."""
    kw.setdefault("precision", "bf16")
    return exact.knn_both(*args, **kw)


def unit(rng, n, d=24):
    x = rng.normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def brute(q, o, k):
    """k best rows of o for each row of q in float64, ties by lower index."""
    sim = q.astype(np.float64) @ o.astype(np.float64).T
    idx = np.argsort(-sim, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sim, idx, 1), idx


@pytest.mark.parametrize("n, m, k, kw", [
    (100, 70, 4, {}),
    (300, 500, 4, dict(block_rows=64, tile_rows=32, tile_cols=96)),
    (50, 3, 4, {}),  # fewer targets than k
    (5, 40, 3, dict(tile_rows=16, tile_cols=16)),  # fewer rows than a group
    (97, 131, 4, dict(shard_rows=7, block_rows=32, tile_rows=32, tile_cols=32)),
    (600, 700, 4, dict(candidates=4, tile_rows=64, tile_cols=128)),  # few candidates: many rows searched again
    (200, 250, 2, dict(precision="fp32", tile_rows=48, tile_cols=80)),
])
def test_matches_brute_force_both_ways(n, m, k, kw):
    rng = np.random.default_rng(n * 7 + m)
    x, y = unit(rng, n), unit(rng, m)
    Dxy, Ixy, Dyx, Iyx, info = knn_both(x, y, k, **kw)
    for D, I, (want_D, want_I) in ((Dxy, Ixy, brute(x, y, min(k, m))), (Dyx, Iyx, brute(y, x, min(k, n)))):
        np.testing.assert_array_equal(I, want_I)
        np.testing.assert_allclose(D, want_D, atol=1e-6)
        assert D.dtype == np.float32 and I.dtype == np.int64
    if kw.get("candidates") == 4:
        assert info["refined"][0] > 0 and info["refined"][1] > 0  # the float32 re-search path ran


def test_same_arrays_for_any_tile_block_and_shard_size():
    rng = np.random.default_rng(5)
    x, y = unit(rng, 260), unit(rng, 190)
    x[7] = x[3]  # exact duplicates: ties must go to the lower row whatever the tiling
    y[11] = y[2]
    runs = [knn_both(x, y, 4, **kw)[:4] for kw in (
        {}, dict(tile_rows=16, tile_cols=16, block_rows=48), dict(shard_rows=50, tile_rows=32, tile_cols=64),
        dict(candidates=5, tile_rows=32, tile_cols=32))]
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            np.testing.assert_array_equal(a, b)


def test_reads_memory_maps(tmp_path):
    rng = np.random.default_rng(2)
    x, y = unit(rng, 120), unit(rng, 90)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y.astype(np.float16))
    xm = np.load(tmp_path / "x.npy", mmap_mode="r")
    ym = np.load(tmp_path / "y.npy", mmap_mode="r")
    got = knn_both(xm, ym, 4, tile_rows=32, tile_cols=32)
    want = knn_both(x, ym.astype(np.float32), 4, tile_rows=32, tile_cols=32)
    for a, b in zip(got[:4], want[:4]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype, lo", [(torch.bfloat16, 0.2), (torch.bfloat16, -0.5), (torch.float32, 0.1)])
def test_entries_are_exactly_those_above_the_floor(axis, dtype, lo):
    gen = torch.Generator().manual_seed(1)
    S = (torch.rand((4 * G, 6 * G), generator=gen) * 2 - 1).to(dtype)  # negative values too
    floor = (torch.rand(S.shape[axis], generator=gen) * (1 - lo) + lo).to(dtype).float()
    key, other, val = exact._entries(S, floor, axis)
    Sf = S.float() if axis == 0 else S.float().T
    want = {(i, j) for i, j in zip(*np.nonzero((Sf > floor[:, None]).numpy()))}
    assert set(zip(key.tolist(), other.tolist())) == want
    assert torch.equal(val, Sf[key, other])
    assert bool((key[1:] >= key[:-1]).all())  # keys ascending, as the merge needs


@pytest.mark.parametrize("axis", [0, 1])
def test_dense_gives_each_rows_best(axis):
    gen = torch.Generator().manual_seed(3)
    S = torch.rand((3 * G, 5 * G), generator=gen).to(torch.bfloat16)
    key, other, val = exact._dense(S, 6, axis)
    Sf = S.float() if axis == 0 else S.float().T
    for r in range(len(Sf)):
        got = sorted(val[key == r].tolist(), reverse=True)
        assert got == sorted(Sf[r].tolist(), reverse=True)[:6]


def test_merge_keeps_each_keys_best_sorted():
    gen = torch.Generator().manual_seed(4)
    K, c = 9, 4
    V = torch.sort(torch.rand((K, c), generator=gen), 1, descending=True).values
    V[2] = -torch.inf  # a key with nothing yet
    I = torch.arange(K * c).view(K, c)
    key = torch.sort(torch.randint(0, K, (40,), generator=gen)).values
    val = torch.rand(40, generator=gen)
    idx = 1000 + torch.arange(40)
    V2, I2 = exact._merge(V, I, key, idx, val)
    for r in range(K):
        pool = sorted([(v, i) for v, i in zip(V[r].tolist(), I[r].tolist())]
                      + [(v, i) for kk, v, i in zip(key.tolist(), val.tolist(), idx.tolist()) if kk == r], reverse=True)
        assert V2[r].tolist() == [v for v, _ in pool[:c]]
        assert set(I2[r][V2[r] > -torch.inf].tolist()) == {i for v, i in pool[:c] if v > -np.inf}


def test_the_rounding_bound_holds_on_this_machine():
    rng = np.random.default_rng(9)
    x, y = unit(rng, 64, 300), unit(rng, 256, 300)
    exact_sim = x.astype(np.float64) @ y.astype(np.float64).T
    low = (torch.from_numpy(x).bfloat16() @ torch.from_numpy(y).bfloat16().T).float().numpy()
    assert np.abs(low - exact_sim).max() <= exact.eps_factor("bf16", 300)


def test_many_identical_rows_resolve_to_the_lowest_ones_for_any_tiling():
    """More exact ties than candidates: the rows searched again in float32 still take the lowest rows."""
    rng = np.random.default_rng(11)
    x, y = unit(rng, 70), unit(rng, 300)
    y[40:140] = y[5]  # 101 identical rows
    x[:10] = y[5]  # queries whose best 4 are all tied
    runs = [knn_both(x, y, 4, **kw) for kw in ({}, dict(tile_rows=16, tile_cols=32, block_rows=32),
                                                  dict(shard_rows=60, tile_rows=32, tile_cols=64))]
    for Dxy, Ixy, *_ in runs:
        np.testing.assert_array_equal(Ixy[:10], np.tile([5, 40, 41, 42], (10, 1)))
    for other in runs[1:]:
        for a, b in zip(runs[0][:4], other[:4]):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("matmul", ["torch", "numpy"])
def test_float32_tiles_by_either_blas_match_brute_force(matmul, monkeypatch):
    """Float32 tiles take the faster of torch's and numpy's products on a CPU: either gives the exact answer."""
    monkeypatch.setattr(exact, "cpu_fp32_matmul", lambda *shape: matmul)
    rng = np.random.default_rng(5)
    x, y = unit(rng, 150), unit(rng, 260)
    x[7] = y[3]  # a tie with another exact copy
    y[9] = y[3]
    Dxy, Ixy, Dyx, Iyx, info = knn_both(x, y, 4, precision="fp32", tile_rows=32, tile_cols=64, block_rows=64)
    assert info["matmul"] == matmul
    for D, I, (want_D, want_I) in ((Dxy, Ixy, brute(x, y, 4)), (Dyx, Iyx, brute(y, x, 4))):
        np.testing.assert_array_equal(I, want_I)
        np.testing.assert_allclose(D, want_D, atol=1e-6)


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_a_callers_high_matmul_precision_does_not_void_the_certification(precision):
    rng = np.random.default_rng(11)
    x, y = unit(rng, 120, d=64), unit(rng, 90, d=64)
    torch.set_float32_matmul_precision("high")  # would allow TF32 / bf16 float32 products
    try:
        Dxy, Ixy, Dyx, Iyx, _ = knn_both(x, y, 3, precision=precision, tile_rows=32, tile_cols=48)
        assert torch.get_float32_matmul_precision() == "high"  # restored afterwards
    finally:
        torch.set_float32_matmul_precision("highest")
    for D, I, (want_D, want_I) in ((Dxy, Ixy, brute(x, y, 3)), (Dyx, Iyx, brute(y, x, 3))):
        np.testing.assert_array_equal(I, want_I)
        np.testing.assert_allclose(D, want_D, atol=1e-6)


@pytest.mark.parametrize("direction", ["xy", "yx"])
def test_one_direction_gives_what_both_give(direction):
    rng = np.random.default_rng(11)
    x, y = unit(rng, 230), unit(rng, 170)
    y[5] = y[1]  # a tie
    kw = dict(candidates=4, tile_rows=32, tile_cols=48, block_rows=64)  # rows searched again too
    both = knn_both(x, y, 4, **kw)
    one = knn_both(x, y, 4, direction=direction, **kw)
    keep = (0, 1) if direction == "xy" else (2, 3)
    for i in range(4):
        if i in keep:
            np.testing.assert_array_equal(one[i], both[i])
        else:
            assert one[i] is None
    side = keep[0] // 2
    assert one[4]["refined"][side] == both[4]["refined"][side] and one[4]["refined"][1 - side] == 0
    from bitextmine.errors import ConfigError

    with pytest.raises(ConfigError, match="direction"):
        knn_both(x, y, 4, direction="sideways")


@pytest.mark.parametrize("kw, cols, rows, direction", [
    (dict(tile_rows=32, tile_cols=48, block_rows=64), 40, 25, "both"),
    (dict(candidates=5, tile_rows=16, tile_cols=32, shard_rows=70), 60, 50, "both"),  # rows searched again
    (dict(tile_rows=32, tile_cols=48), 3, 0, "both"),  # fewer sampled rows than k, and none
    (dict(tile_rows=32, tile_cols=48), 40, 25, "xy"),
    (dict(precision="fp32", tile_rows=48, tile_cols=80), 40, 25, "yx"),
])
def test_lists_among_a_sample_match_brute_force_and_leave_the_knn_as_it_was(kw, cols, rows, direction):
    rng = np.random.default_rng(cols * 3 + rows)
    x, y = unit(rng, 230), unit(rng, 170)
    y[9] = y[4]  # a tie inside the sample
    cs = np.sort(np.append(rng.choice(np.arange(10, 170), max(cols - 2, 0), replace=False), [4, 9][:cols]))
    rs = np.sort(rng.choice(230, rows, replace=False)).astype(np.int64)
    sample = exact.Sample(cs.astype(np.int64), rs, 5)
    got = knn_both(x, y, 4, sample=sample, direction=direction, **kw)
    plain = knn_both(x, y, 4, direction=direction, **kw)
    for a, b in zip(got[:4], plain[:4]):
        assert (a is None and b is None) or np.array_equal(a, b)
    Dxs, Ixs, Dys, Iys = got[4]["sample"]
    for D, I, q, o, among, kept in ((Dxs, Ixs, x, y, sample.cols, direction != "yx"),
                                    (Dys, Iys, y, x, sample.rows, direction != "xy")):
        if not kept:
            assert D is None and I is None
            continue
        want_D, want_I = brute(q, o[among], min(5, len(among)))
        np.testing.assert_array_equal(I, among[want_I])
        np.testing.assert_allclose(D, want_D, atol=1e-6)
        assert D.shape == (len(q), min(5, len(among))) and D.dtype == np.float32 and I.dtype == np.int64
    if kw.get("candidates") == 5:
        assert sum(got[4]["sample_refined"]) > 0  # the float32 re-search among the sample ran


@pytest.mark.parametrize("n, m, k, candidates, sample_k", [
    (20, 10, 4, 16, 5),  # a side shorter than the lists: slots past its rows
    (10, 20, 4, 16, 5),
    (40, 40, 16, 16, 17),  # the sample's lists longer than the candidates asked for
])
def test_lists_among_a_sample_of_small_sides_and_long_lists(n, m, k, candidates, sample_k):
    rng = np.random.default_rng(n + m + sample_k)
    x, y = unit(rng, n), unit(rng, m)
    sample = exact.Sample(np.arange(0, m, 2, dtype=np.int64), np.arange(0, n, 2, dtype=np.int64), sample_k)
    got = knn_both(x, y, k, candidates=candidates, sample=sample)
    plain = knn_both(x, y, k, candidates=candidates)
    for a, b in zip(got[:4], plain[:4]):
        assert np.array_equal(a, b)
    Dxs, Ixs, Dys, Iys = got[4]["sample"]
    for D, I, q, o, among in ((Dxs, Ixs, x, y, sample.cols), (Dys, Iys, y, x, sample.rows)):
        want_D, want_I = brute(q, o[among], min(sample_k, len(among)))
        np.testing.assert_array_equal(I, among[want_I])
        np.testing.assert_allclose(D, want_D, atol=1e-6)

def test_the_tiles_precision_is_asked_of_the_gpu_that_searches(monkeypatch):
    """On a machine with several GPUs, cuda:1's own compute capability decides bf16 tiles, not the current GPU's."""
    from bitextmine.search import exact

    asked = []

    class Asked(Exception):
        pass

    def search_precision(precision, device):
        asked.append(device)
        raise Asked

    monkeypatch.setattr(exact, "search_precision", search_precision)
    x = np.ones((2, 4), np.float32)
    with pytest.raises(Asked):
        exact.knn_both(x, x, 1, device="cuda:1")
    assert asked == ["cuda:1"]
