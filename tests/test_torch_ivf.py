"""IVF-Flat search with torch alone (bitextmine.search.torch_ivf), run on the CPU: against slow numpy
references, its k-means, its place in knn() and in the staged pipeline, and the backend decision."""

from __future__ import annotations

import io
import os
import types

import numpy as np
import pytest
import torch
from conftest import write_lines

from bitextmine import device as D
from bitextmine.errors import ConfigError
from bitextmine.search import torch_ivf as T


def unit(rng, n, d=16):
    x = rng.normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def clustered(n, d, seed, centres=50, noise=0.3):
    rng = np.random.default_rng(seed)
    c = np.random.default_rng(0).normal(size=(centres, d))  # the same centres for every side
    x = c[rng.integers(0, centres, n)] + noise * rng.normal(size=(n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def reference_ivf(x, y, lists, ids, centroids, k, nprobe):
    """Brute force in float64: each query's k best rows (by value, then lower id) among the rows of its nprobe
    lists of largest inner product with the centroids; slots not filled: -inf, -1."""
    D = np.full((len(x), k), -np.inf)
    I = np.full((len(x), k), -1, np.int64)
    coarse = x.astype(np.float64) @ centroids.astype(np.float64).T
    for q in range(len(x)):
        probed = np.argsort(-coarse[q], kind="stable")[:nprobe]
        rows = np.flatnonzero(np.isin(lists, probed))
        sims = y[rows].astype(np.float64) @ x[q].astype(np.float64)
        best = np.lexsort((ids[rows], -sims))[:k]
        D[q, : len(best)], I[q, : len(best)] = sims[best], ids[rows][best]
    return D, I


def index_of(y, nlist, seed=1):
    centroids = T.train(y, nlist, seed=seed)
    return centroids, T.assign(y, centroids)


@pytest.mark.parametrize("k, sim_elems, pairs_max", [(4, T.SIM_ELEMS, T.PAIRS_MAX), (7, 60, 50), (1, 33, 7)])
def test_probing_every_list_is_exact_search(k, sim_elems, pairs_max):
    rng = np.random.default_rng(k)
    x, y = unit(rng, 70), unit(rng, 300)
    centroids, lists = index_of(y, 12)
    ids = 1000 + np.arange(len(y), dtype=np.int64)
    got_D, got_I = T.search(x, y, lists, ids, centroids, k, 12, sim_elems=sim_elems, pairs_max=pairs_max)
    sims = x.astype(np.float64) @ y.astype(np.float64).T
    want = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    np.testing.assert_array_equal(got_I, ids[want])
    np.testing.assert_allclose(got_D, np.take_along_axis(sims, want, 1), atol=1e-6)
    assert got_D.dtype == np.float32 and got_I.dtype == np.int64


@pytest.mark.parametrize("nprobe, k, sim_elems", [(1, 4, T.SIM_ELEMS), (3, 4, 50), (5, 9, 70), (1, 40, 70)])
def test_fewer_lists_equal_brute_force_over_the_probed_lists(nprobe, k, sim_elems):
    """Scattered ids (not the row order), float16 rows, k above some lists' rows: slots left -inf / -1."""
    rng = np.random.default_rng(nprobe)
    x, y = unit(rng, 90), unit(rng, 400).astype(np.float16)
    centroids, lists = index_of(y.astype(np.float32), 16)
    ids = rng.permutation(10_000)[: len(y)].astype(np.int64)
    got = T.search(x, y, lists, ids, centroids, k, nprobe, sim_elems=sim_elems, pairs_max=64)
    want = reference_ivf(x, y.astype(np.float32), lists, ids, centroids, k, nprobe)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0], atol=1e-6)
    if k == 40:
        assert (got[1] == -1).any() and np.isneginf(got[0][got[1] == -1]).all()


def test_ties_go_to_the_lower_id_across_lists():
    rng = np.random.default_rng(5)
    x = rng.integers(-1, 2, (40, 6)).astype(np.float32)  # few distinct values: many exact ties
    y = rng.integers(-1, 2, (120, 6)).astype(np.float32)
    y[np.abs(y).sum(1) == 0, 0] = 1  # no zero rows (the k-means normalises)
    centroids, lists = index_of(y, 8)
    ids = rng.permutation(len(y)).astype(np.int64)  # the lower id is not the lower row
    got = T.search(x, y, lists, ids, centroids, 5, 8, sim_elems=40)
    want = reference_ivf(x, y, lists, ids, centroids, 5, 8)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[0], want[0].astype(np.float32))


def test_assign_is_the_nearest_centroid():
    rng = np.random.default_rng(3)
    y, centroids = unit(rng, 500), unit(rng, 20)
    got = T.assign(y, centroids)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.argmax(y.astype(np.float64) @ centroids.astype(np.float64).T, 1))


def test_training_is_seeded_and_spherical():
    y = clustered(2000, 16, 1)
    a, b, c = T.train(y, 30, seed=1), T.train(y, 30, seed=1), T.train(y, 30, seed=2)
    assert a.dtype == np.float32 and a.shape == (30, 16)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1, atol=1e-6)
    # a fixed point: each centroid is the normalised mean of the rows nearest to it
    lists = T.assign(y, a)
    means = np.stack([y[lists == j].sum(0) for j in range(30)])
    again = means / np.linalg.norm(means, axis=1, keepdims=True)
    assert np.abs(again - a).max() < 0.05


@pytest.mark.parametrize("seed", range(6))
def test_empty_clusters_take_the_worst_served_rows(seed):
    """Three directions, 20 copies each: an initial draw of two copies of one direction leaves a cluster
    empty, and only taking the rows no centroid serves finds all three."""
    sample = np.repeat(np.eye(3, 8, dtype=np.float32), 20, axis=0)
    got = T.train(sample, 3, seed=seed)
    np.testing.assert_array_equal(got[np.argsort(np.argmax(got, 1))], np.eye(3, 8, dtype=np.float32))


def test_training_refuses_more_lists_than_rows():
    with pytest.raises(ConfigError, match="5 lists from 4 sample rows"):
        T.train(np.eye(4, 8, dtype=np.float32), 5, seed=1)


def test_knn_ivf_uses_torch_where_faiss_has_no_gpu(monkeypatch):
    """knn(index="ivf") with the torch backend (forced here, on the CPU): no FAISS call; every list probed is
    exact search; fewer lists equal the reference over the recipe's index; unfilled slots left empty as FAISS's."""
    from bitextmine.search import index as index_mod
    from bitextmine.search.index import ivf_recipe, knn

    monkeypatch.setattr(D, "torch_search", lambda device: True)
    monkeypatch.setattr(index_mod, "faiss_module", lambda: pytest.fail("FAISS used"))
    x, y = clustered(60, 16, 1), clustered(700, 16, 2)
    assert D.knn_backend("ivf", "auto") == "torch"
    flat_D, flat_I = knn(x, y, 4, device="cpu", index="flat")
    got_D, got_I = knn(x, y, 4, device="auto", index="ivf", nlist=10, nprobe=10)
    np.testing.assert_array_equal(got_I, flat_I)
    np.testing.assert_allclose(got_D, flat_D, atol=1e-6)
    nlist, rows = ivf_recipe(len(y), 40, 0, 1)
    centroids = T.train(y[rows], nlist, seed=1)
    lists = T.assign(y, centroids)
    want_D, want_I = reference_ivf(x, y, lists, np.arange(len(y)), centroids, 30, 1)
    got_D, got_I = knn(x, y, 30, device="auto", index="ivf", nlist=40, nprobe=1)
    assert (want_I == -1).any()
    np.testing.assert_array_equal(got_I, want_I)  # unfilled slots stay empty (-1, -inf), as FAISS's search leaves them
    np.testing.assert_allclose(got_D, want_D, atol=1e-6)


@pytest.fixture
def machine(monkeypatch):
    """A machine with ``gpus`` FAISS GPUs and, with ``cuda``, a CUDA GPU that torch sees."""
    def install(gpus: int, cuda: bool):
        monkeypatch.setitem(__import__("sys").modules, "faiss", types.SimpleNamespace(get_num_gpus=lambda: gpus))
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    return install


def test_backend_decision(machine):
    machine(0, cuda=True)  # torch with CUDA, faiss-cpu: flat and ivf run with torch; ivfpq cannot
    assert [D.knn_backend(i, dev) for i in ("flat", "ivf") for dev in ("cuda", "auto")] == ["torch"] * 4
    assert D.knn_backend("ivf", "cpu") == "faiss-cpu" and D.knn_backend("ivfpq", "auto") == "faiss-cpu"
    with pytest.raises(ConfigError, match="--index ivfpq: this FAISS has no GPU support; run: pip uninstall"):
        D.knn_backend("ivfpq", "cuda")
    machine(0, cuda=False)  # a CPU machine: FAISS as before; cuda asked for is an error
    assert D.knn_backend("ivf", "auto") == "faiss-cpu" and D.knn_backend("ivf", "cpu") == "faiss-cpu"
    with pytest.raises(ConfigError, match="torch sees no CUDA GPU"):
        D.knn_backend("ivf", "cuda")
    machine(2, cuda=True)  # FAISS GPUs: FAISS on them
    assert D.knn_backend("ivf", "cuda") == "faiss-gpu" and D.knn_backend("ivf", "auto") == "faiss-gpu"
    assert D.knn_backend("ivf", "cpu") == "faiss-cpu" and not D.torch_search("cuda")


# --- the staged pipeline with the torch backend ----------------------------------------------------------

@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """Two sides of distinct lines with clustered embeddings of every line (.npy, no sidecar)."""
    d = tmp_path_factory.mktemp("torch-ivf")
    paths = []
    for side, n, seed in (("s", 2600, 1), ("t", 2300, 2)):
        np.save(d / f"{side}.npy", clustered(n, 16, seed, centres=1000, noise=0.6))  # FAISS: recall@4 0.98
        paths += [write_lines(d / f"{side}.txt", [f"{side} {i}" for i in range(n)]), str(d / f"{side}.npy")]
    return paths


def _mine(synthetic, config, pipeline):
    from bitextmine.pipeline import mine_files

    s_txt, s_npy, t_txt, t_npy = synthetic
    out = io.StringIO()
    stats = mine_files(s_txt, t_txt, out, config=config, pipeline=pipeline, src_emb=s_npy, tgt_emb=t_npy, ids=True)
    return out.getvalue(), stats


def _index_files(folder) -> list:
    """The index files of a work directory, without their checksums."""
    return sorted(f for f in os.listdir(folder) if not f.endswith(".sha256"))


def test_pipeline_with_torch_ivf(synthetic, tmp_path, monkeypatch):
    """--index ivf on a CUDA device without FAISS GPUs (forced, on the CPU): centroids and list files instead of
    FAISS indexes, recall@4 >= 0.95 at nprobe 32 on clustered data, the neighbours of one torch index over the
    whole side; resuming a FAISS run with the torch backend searches again and gives a fresh run's pairs."""
    from bitextmine.config import MineConfig, PipelineConfig
    from bitextmine.pipeline import stages
    from bitextmine.search.index import torch_ivf_knn

    config = MineConfig(index="ivf", recall_check=400, threshold=1.0, min_z=0)
    work = str(tmp_path / "w")
    _mine(synthetic, config, PipelineConfig(work_dir=work, chunk_lines=1000))
    assert os.path.exists(os.path.join(work, "index", "src-trained.faiss"))
    monkeypatch.setattr(D, "torch_search", lambda device: True)
    monkeypatch.setattr(D, "faiss_module", lambda: pytest.fail("FAISS used"))
    fresh, stats = _mine(synthetic, config, PipelineConfig(work_dir=str(tmp_path / "t"), chunk_lines=1000))
    assert min(stats.info["recall"]) >= 0.95 and fresh.count("\n") > 500
    index = _index_files(tmp_path / "t" / "index")
    assert index == ["src-centroids.npy", *[f"src-lists-{c:06d}.npy" for c in range(3)],
                     "tgt-centroids.npy", *[f"tgt-lists-{c:06d}.npy" for c in range(3)]]
    # chunked search = one index over the whole side (up to float32 rounding of near ties)
    _, want = torch_ivf_knn(np.load(synthetic[1]), np.load(synthetic[3]), 4, nlist=0, nprobe=32, train_sample=0,
                            seed=1, device="cpu")
    got = np.concatenate([np.load(tmp_path / "t" / stages.nn_file("src", c))["I"] for c in range(3)])
    assert np.mean(got == want) > 0.999
    resumed, again = _mine(synthetic, config, PipelineConfig(work_dir=work, chunk_lines=1000, resume=True))
    assert again.info["changed"] == ["ivf_backend"] and resumed == fresh
    assert again.info["computed"]["index"] == 2 and _index_files(os.path.join(work, "index")) == index
