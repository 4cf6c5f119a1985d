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
    got = candidate_scores(Dxy, Ixy, mx, my[Ixy], "ratio")
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
    want = np.mean([len(set(a) & set(b)) / 4 for a, b in zip(Ic.tolist(), I.tolist())])
    assert recall_at_k(x, y, Ic, 500) == pytest.approx(want)  # 500 >= n: every query, against exact search


def test_recall_at_k_by_hand():
    from bitextmine.search.index import recall_at_k

    x = np.eye(3, dtype=np.float32)
    y = np.array([[1, 0, 0], [0.9, 0.1, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    # exact 2-NN: row 0 {0, 1}; row 1 {2, 1}; row 2 {3, 0} (y0, y1, y2 tie at 0: the lower row)
    found = np.array([[0, 1], [2, 3], [0, 2]])  # 2 + 1 + 1 of them
    assert recall_at_k(x, y, found, 3) == pytest.approx(4 / 6)


def brute_ties(x, y, k):
    """k best rows of y per row of x by float64 products, ties to the lower row."""
    sim = x.astype(np.float64) @ y.astype(np.float64).T
    I = np.argsort(-sim, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sim, I, 1), I


@pytest.mark.parametrize("sim_bytes, block", [(4 * 5 * 7, 5), (1 << 20, 64), (4 * 3, 3)])
def test_exact_torch_knn_equals_brute_force_over_column_shards(sim_bytes, block):
    from bitextmine.search.index import exact_knn

    rng = np.random.default_rng(5)
    x = rng.integers(-1, 2, (23, 6)).astype(np.float32)  # few distinct values: many exact ties across shards
    y = rng.integers(-1, 2, (41, 6)).astype(np.float32)
    D, I = exact_knn(x, y, 4, device="cpu", block_size=block, sim_bytes=sim_bytes)
    want_D, want_I = brute_ties(x, y, 4)
    np.testing.assert_array_equal(I, want_I)
    np.testing.assert_array_equal(D, want_D.astype(np.float32))


def test_flat_knn_without_faiss_gpus_runs_the_exact_torch_branch_on_cuda(monkeypatch):
    import torch

    from bitextmine.search import index as index_mod

    calls = []
    real = index_mod.exact_knn
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr("bitextmine.device.faiss_gpus", lambda: 0)

    def on_cpu(x, y, k, *, device, **kw):  # the same code path, with "cuda" tensors placed on the CPU
        calls.append(device)
        return real(x, y, k, device="cpu", **kw)

    monkeypatch.setattr(index_mod, "exact_knn", on_cpu)
    rng = np.random.default_rng(2)
    x, y = unit(rng, 30), unit(rng, 50)
    torch.set_float32_matmul_precision("high")  # exact_knn must not let products round to TF32 / bf16
    try:
        D, I = knn(x, y, 3, device="cuda", block_size=7)
    finally:
        torch.set_float32_matmul_precision("highest")
    assert calls == ["cuda"]
    want_D, want_I = brute_ties(x, y, 3)
    np.testing.assert_array_equal(I, want_I)
    np.testing.assert_allclose(D, want_D, atol=1e-6)


class FakeGpuFaiss:
    """The real faiss module with GPU calls that record what moves to a "GPU" (the CPU index, wrapped)."""

    def __init__(self, gpus: int):
        import faiss

        self._faiss, self.gpus, self.log = faiss, gpus, []

    def __getattr__(self, name):
        return getattr(self._faiss, name)

    def get_num_gpus(self):
        return self.gpus

    def index_cpu_to_all_gpus(self, index):
        self.log.append(("to_gpu", type(index).__name__, bool(index.is_trained)))
        self.moved = index
        return FakeGpuIndex(index, self.log)

    def GpuParameterSpace(self):
        log = self.log

        class Space:
            def set_index_parameter(self, index, name, value):
                log.append(("param", name, value))
                setattr(index.cpu, name, value)

        return Space()


class FakeGpuIndex:
    def __init__(self, cpu, log):
        self.cpu, self.log = cpu, log

    def train(self, x):
        self.log.append(("gpu_train", len(x)))
        self.cpu.train(x)

    def add(self, x):
        self.log.append(("gpu_add", len(x)))
        self.cpu.add(x)

    @property
    def ntotal(self):
        return self.cpu.ntotal

    def search(self, x, k):
        self.log.append(("gpu_search", len(x)))
        return self.cpu.search(x, k)


@pytest.mark.parametrize("kind", ["ivf", "ivfpq"])
def test_ivf_is_trained_and_searched_on_faiss_gpus(monkeypatch, kind):
    import sys

    fake = FakeGpuFaiss(1)
    monkeypatch.setitem(sys.modules, "faiss", fake)
    x, y = _clustered(50, 16, 1), _clustered(800, 16, 2)
    D, I = knn(x, y, 4, device="cuda", index=kind, nlist=10, nprobe=10, block_size=32)
    steps = [e[0] for e in fake.log]
    assert steps == ["to_gpu", "gpu_train", "gpu_add", "param", "gpu_search", "gpu_search"]
    assert fake.log[0][1:] == ("IndexIVFPQ" if kind == "ivfpq" else "IndexIVFFlat", False)  # moved before training
    monkeypatch.setitem(sys.modules, "faiss", fake._faiss)
    want = knn(x, y, 4, device="cpu", index=kind, nlist=10, nprobe=10, block_size=32)
    np.testing.assert_array_equal(I, want[1])  # same sample, same k-means: the same index
    if kind == "ivfpq":  # GPU sub-quantizers for 16 dims: 4 (a divisor <= d / 4 that FAISS GPU accepts)
        assert fake._faiss.downcast_index(fake.moved).pq.M == 4


def test_ivfpq_with_cuda_and_faiss_cpu_is_an_error_and_auto_stays_on_the_cpu(monkeypatch):
    """(ivf there runs with torch: tests/test_torch_ivf.py)"""
    import sys

    from bitextmine.errors import ConfigError

    fake = FakeGpuFaiss(0)
    monkeypatch.setitem(sys.modules, "faiss", fake)
    x, y = _clustered(20, 16, 1), _clustered(400, 16, 2)
    with pytest.raises(ConfigError, match="no GPU support"):
        knn(x, y, 4, device="cuda", index="ivfpq", nlist=8)
    knn(x, y, 4, device="auto", index="ivfpq", nlist=8)
    assert fake.log == []


def test_pq_subquantizers_for_cpu_and_gpu():
    from bitextmine.device import pq_subquantizers
    from bitextmine.errors import ConfigError

    assert pq_subquantizers(300, 0, "cpu") == 75  # largest divisor <= 300 / 4: the former default
    assert pq_subquantizers(300, 0, "cuda") == 20  # 75 is not a FAISS GPU code size; 20 is, and divides 300
    assert pq_subquantizers(256, 0, "cuda") == 32 and pq_subquantizers(16, 0, "cuda") == 4
    assert pq_subquantizers(300, 75, "cpu") == 75 and pq_subquantizers(300, 12, "cuda") == 12
    with pytest.raises(ConfigError, match="FAISS GPU IVF-PQ accepts only"):
        pq_subquantizers(300, 75, "cuda")
    with pytest.raises(ConfigError, match="must divide"):
        pq_subquantizers(300, 7, "cpu")


def test_auto_index_by_size():
    from bitextmine.search.index import resolve_index

    assert resolve_index("auto", 1000, 200_000) == "flat" and resolve_index("auto", 300_000, 200_000) == "ivf"
    assert resolve_index("ivfpq", 10, 200_000) == "ivfpq"
    with pytest.raises(Exception, match="expected auto, flat, ivf or ivfpq"):
        resolve_index("hnsw", 10, 200_000)


def test_neighbour_means_over_the_found_slots():
    from bitextmine.mining.margin import neighbour_means

    rng = np.random.default_rng(8)
    for k in (1, 3, 4, 5, 9, 16):  # every slot found: the plain mean, to the bit
        D = -np.sort(-rng.random((200, k)).astype(np.float32), 1)
        np.testing.assert_array_equal(neighbour_means(D), D.mean(1))
    D = -np.sort(-rng.random((50, 6)).astype(np.float32), 1)
    found = np.arange(6)[None, :] < rng.integers(0, 7, 50)[:, None]  # empty slots at the end of a row
    found[0], found[1] = False, True
    D[~found] = -np.inf
    got = neighbour_means(D)
    for row, f, g in zip(D, found, got):
        if f.any():
            assert g == pytest.approx(float(np.mean([float(v) for v in row[f]])), rel=1e-6)
        else:
            assert np.isnan(g)  # nothing found: no mean
    assert got.dtype == np.float32


def test_a_missing_mean_leaves_the_other_sentences_mean_alone():
    cos = np.array([0.6, 0.6, 0.6], np.float32)
    mx = np.array([0.2, np.nan, 0.2], np.float32)
    my = np.array([0.4, 0.4, np.nan], np.float32)
    np.testing.assert_allclose(margin_scores(cos, mx, my, "ratio"), [0.6 / 0.3, 0.6 / 0.4, 0.6 / 0.2], rtol=1e-6)
    np.testing.assert_allclose(margin_scores(cos, mx, my, "distance"), [0.3, 0.2, 0.4], rtol=1e-6)


def _ivf_reference(x, y, k, nlist, nprobe, seed=1):
    """The IVF index knn builds (same cells and training sample), searched by FAISS directly: D, I with
    FAISS's empty slots (I -1)."""
    from bitextmine.search.index import ivf_recipe, ivf_untrained

    nlist, rows = ivf_recipe(len(y), nlist, 0, seed)
    index = ivf_untrained(y.shape[1], nlist, "ivf", 0, "cpu")
    index.train(y[rows])
    index.add(y)
    index.nprobe = nprobe
    return index.search(x, k)


def test_ivf_slots_it_cannot_fill_are_empty():
    x, y = _clustered(300, 16, 3), _clustered(400, 16, 4)
    D, I = knn(x, y, 8, device="cpu", index="ivf", nlist=50, nprobe=1)
    _, want = _ivf_reference(x, y, 8, 50, 1)
    assert (want < 0).any(axis=1).sum() > 20  # many rows find fewer than 8 in their cell
    np.testing.assert_array_equal(I, want)
    assert np.isneginf(D[I < 0]).all() and np.isfinite(D[I >= 0]).all()


@pytest.mark.parametrize("mode", ["forward", "backward"])
def test_mining_with_ivf_averages_the_neighbours_found(mode):
    """Each row's candidate and margin from a slow reference: the means over the neighbours FAISS found."""
    from bitextmine.config import MineConfig
    from bitextmine.mining.mine import mine_embeddings

    x, y = _clustered(300, 16, 3), _clustered(400, 16, 4)
    lists = [_ivf_reference(x, y, 8, 50, 1), _ivf_reference(y, x, 8, 50, 1)]  # cells: 50 and 300 // 8
    means = [[float(np.mean([float(q[i] @ o[j]) for j in row if j >= 0])) if (row >= 0).any() else np.nan
              for i, row in enumerate(I)] for (_, I), q, o in zip(lists, (x, y), (y, x))]
    side = 0 if mode == "forward" else 1
    q, o, (_, I), mq, mo = ((x, y, lists[0], means[0], means[1]), (y, x, lists[1], means[1], means[0]))[side]
    want = {}
    for i, row in enumerate(I):
        scored = [(float(q[i] @ o[j]) / ((mq[i] + mo[j]) / 2), int(j)) for j in row if j >= 0]
        if scored:
            s, j = max(scored, key=lambda e: e[0])
            want[(i, j) if side == 0 else (j, i)] = s
    config = MineConfig(k=8, mode=mode, index="ivf", nlist=50, nprobe=1, threshold=-np.inf, min_cosine=-np.inf,
                        min_z=0, device="cpu")
    got = mine_embeddings(x, y, config=config)
    assert set(zip(got.src.tolist(), got.tgt.tolist())) == set(want)
    for s, t, sc in zip(got.src.tolist(), got.tgt.tolist(), got.score.tolist()):
        assert sc == pytest.approx(want[(s, t)], rel=1e-4)


def test_recall_over_parts_of_the_searched_side():
    from bitextmine.search.index import recall

    x = np.eye(3, dtype=np.float32)
    y = np.array([[1, 0, 0], [0.9, 0.1, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    found = np.array([[0, 1], [2, -1], [0, 2]])  # an empty slot finds nothing
    # exact 2-NN: row 0 {0, 1}; row 1 {2, 1}; row 2 {3, 0} (y0, y1, y2 tie at 0: the lower row)
    for parts, block in (([y], 100), ([y[:1], y[1:3], y[3:]], 100), ([y[:3], y[3:]], 2)):
        assert recall(found, x, parts, block=block) == pytest.approx(4 / 6)


def test_recall_of_the_staged_run_equals_recall_at_k(tmp_path):
    """Both measure recall with the same sampled queries and exact search: the same figure."""
    import io

    from conftest import write_lines

    from bitextmine.config import MineConfig, PipelineConfig
    from bitextmine.mining.mine import mine_embeddings
    from bitextmine.pipeline import mine_files
    from bitextmine.search.exact import RowView

    x, y = _clustered(300, 16, 5), _clustered(260, 16, 6)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    sides = [write_lines(tmp_path / f"{n}.txt", [f"{n}{i}" for i in range(len(a))]) for n, a in (("s", x), ("t", y))]
    config = MineConfig(index="ivf", nlist=30, nprobe=1, recall_check=120, device="cpu", threshold=0, min_z=0)
    # the rows as the run reads them (normalised again)
    want = mine_embeddings(*(RowView(a, np.arange(len(a)), normalise=True)[:] for a in (x, y)), config=config)
    stats = mine_files(*sides, io.StringIO(), config=config, src_emb=str(tmp_path / "x.npy"),
                       tgt_emb=str(tmp_path / "y.npy"), pipeline=PipelineConfig(chunk_lines=70))
    assert stats.info["recall"] == want.info["recall"] and max(want.info["recall"]) < 1


def test_neighbour_means_among_distinct_lines_against_the_obvious_computation():
    from bitextmine.mining.margin import distinct_neighbour_means, distinct_rows

    rng = np.random.default_rng(3)
    src_pool, tgt_pool = [f"s{i}" for i in range(12)], [f"t{i}" for i in range(9)]
    src = [src_pool[i] for i in rng.integers(0, 12, 30)]
    tgt = [tgt_pool[i] for i in rng.integers(0, 9, 30)]
    vec = {w: v / np.linalg.norm(v) for w, v in zip(src_pool + tgt_pool, rng.standard_normal((21, 8)))}
    x = np.array([vec[w] for w in src], np.float32)
    y = np.array([vec[w] for w in tgt], np.float32)
    first, inverse = distinct_rows(src)
    assert [src[i] for i in first] == list(dict.fromkeys(src)) and [src[first[j]] for j in inverse] == src
    mean_x, mean_y = distinct_neighbour_means(x, y, src, tgt, 4)
    xs = np.array([vec[w] for w in dict.fromkeys(src)])
    ys = np.array([vec[w] for w in dict.fromkeys(tgt)])
    for i in range(30):  # the mean of the 4 best cosines among the other side's distinct lines
        assert mean_x[i] == pytest.approx(np.sort(ys @ vec[src[i]])[-4:].mean(), abs=1e-5)
        assert mean_y[i] == pytest.approx(np.sort(xs @ vec[tgt[i]])[-4:].mean(), abs=1e-5)


def test_ties_by_id_against_a_sort_of_pairs():
    from bitextmine.search.index import ties_by_id

    rng = np.random.default_rng(3)
    D = rng.integers(0, 3, (40, 6)).astype(np.float32)
    I = np.stack([rng.permutation(9)[:6] for _ in range(40)]).astype(np.int64)
    I[::7, -2:] = -1  # nothing found in those slots
    got_D, got_I = ties_by_id(D, I)
    for d, i, gd, gi in zip(D, I, got_D, got_I):
        want = sorted(zip(np.where(i < 0, -np.inf, d).tolist(), i.tolist()), key=lambda p: (-p[0], p[1]))
        assert list(zip(gd.tolist(), gi.tolist())) == want


@pytest.mark.parametrize("kind", ["flat", "ivf"])
def test_faiss_searches_give_ties_to_the_lower_row(kind):
    """FAISS orders equal products its own way; every search here gives them to the lower row, which the merges
    over shards and chunks rely on, also when the tie falls on the k-th place."""
    import faiss

    from bitextmine.search.index import faiss_search

    rng = np.random.default_rng(5)
    x = rng.integers(-1, 2, (23, 6)).astype(np.float32)  # few distinct values: many exact ties
    y = rng.integers(-1, 2, (41, 6)).astype(np.float32)
    if kind == "flat":
        index = faiss.IndexFlatIP(6)
    else:
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(6), 6, 4, faiss.METRIC_INNER_PRODUCT)
        index.train(y)
        index.nprobe = 4  # every list: exact
    index.add(y)
    want_D, want_I = brute_ties(x, y, 4)
    assert (np.take_along_axis(x @ y.T, want_I[:, -1:], 1) == (x @ y.T)).sum(1).max() > 1  # ties at the k-th place
    D, I = faiss_search(index, x, 4, block_size=5)
    np.testing.assert_array_equal(I, want_I)
    np.testing.assert_array_equal(D, want_D.astype(np.float32))
