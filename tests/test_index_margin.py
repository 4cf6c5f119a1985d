import numpy as np
import pytest

from bitextmine.search.index import knn
from bitextmine.mining.margin import candidate_scores, margin_scores


def unit(rng, n, d=8):
    x = rng.normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("n, m, k, block", [(30, 50, 4, 7), (5, 3, 4, 2), (100, 100, 1, 1000)])
def test_knn_matches_brute_force(n, m, k, block):
    rng = np.random.default_rng(n + m)
    x, y = unit(rng, n), unit(rng, m)
    D, I = knn(x, y, k, block_size=block, device="cpu")
    sim = x @ y.T
    want_I = np.argsort(-sim, axis=1, kind="stable")[:, : min(k, m)]
    np.testing.assert_array_equal(I, want_I)
    np.testing.assert_allclose(D, np.take_along_axis(sim, want_I, 1), atol=1e-5)


def test_margin_scores_against_direct_formulas():
    cos = np.array([0.9, 0.5, 0.2], np.float32)
    mx = np.array([0.6, 0.5, 0.1], np.float32)
    my = np.array([0.4, 0.3, 0.3], np.float32)
    avg = (mx + my) / 2
    np.testing.assert_allclose(margin_scores(cos, mx, my, "ratio"), cos / avg, rtol=1e-6)
    np.testing.assert_allclose(margin_scores(cos, mx, my, "distance"), cos - avg, rtol=1e-6)
    np.testing.assert_allclose(margin_scores(cos, mx, my, "absolute"), cos)


def test_candidate_scores_loop_reference():
    rng = np.random.default_rng(3)
    x, y = unit(rng, 20), unit(rng, 25)
    k = 4
    Dxy, Ixy = knn(x, y, k, device="cpu")
    Dyx, _ = knn(y, x, k, device="cpu")
    mx, my = Dxy.mean(1), Dyx.mean(1)
    got = candidate_scores(Dxy, Ixy, mx, my, "ratio")
    for i in range(20):
        for j in range(k):
            c = float(x[i] @ y[Ixy[i, j]])
            assert got[i, j] == pytest.approx(c / ((mx[i] + my[Ixy[i, j]]) / 2), rel=1e-5)


def _clustered(n, d, seed):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(50, d))
    x = centres[rng.integers(0, 50, n)] + 0.3 * rng.normal(size=(n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_ivf_visiting_every_cell_is_exact_and_recall_is_measured():
    from bitextmine.search.index import recall_at_k

    x, y = _clustered(500, 16, 1), _clustered(3000, 16, 2)
    D, I = knn(x, y, 4, device="cpu", index="flat")
    Da, Ia = knn(x, y, 4, device="cpu", index="ivf", nlist=20, nprobe=20)
    np.testing.assert_array_equal(Ia, I)
    np.testing.assert_allclose(Da, D, atol=1e-5)
    assert recall_at_k(x, y, Ia, 100) == 1.0
    _, Ib = knn(x, y, 4, device="cpu", index="ivf", nlist=64, nprobe=1)
    r = recall_at_k(x, y, Ib, 500)
    want = np.mean([len(set(a) & set(b)) / 4 for a, b in zip(Ib.tolist(), I.tolist())])
    assert r == pytest.approx(want) and r < 1.0
    _, Ic = knn(x, y, 4, device="cpu", index="ivfpq", nlist=20, nprobe=20)
    assert recall_at_k(x, y, Ic, 500) > 0.2  # product quantisation (4 x 4 dims, 8 bits) approximates distances too


def test_auto_index_by_size():
    from bitextmine.search.index import resolve_index

    assert resolve_index("auto", 1000, 200_000) == "flat" and resolve_index("auto", 300_000, 200_000) == "ivf"
    assert resolve_index("ivfpq", 10, 200_000) == "ivfpq"
    with pytest.raises(Exception, match="expected auto, flat, ivf or ivfpq"):
        resolve_index("hnsw", 10, 200_000)
