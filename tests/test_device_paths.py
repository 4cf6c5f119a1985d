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


def test_mine_embeddings_refuses_a_non_finite_row_naming_it():
    from bitextmine.config import MineConfig
    from bitextmine.errors import ConfigError
    from bitextmine.mining import mine_embeddings

    x, y = _unit(40, 16, 6), _unit(30, 16, 7)
    y[12, 3] = np.nan
    with pytest.raises(ConfigError, match=r"target embeddings row 13: NaN or infinite"):
        mine_embeddings(x, y, config=MineConfig(device="cpu"))
    x[0, 0] = np.inf
    with pytest.raises(ConfigError, match=r"source embeddings row 1: NaN or infinite"):
        mine_embeddings(x, y, config=MineConfig(device="cpu"))


def test_mine_refuses_an_edited_sidecar_embeddings_file(tmp_path, toy_model_dir):
    from click.testing import CliRunner

    from bitextmine.cli import main
    from conftest import toy_corpus, write_lines

    s, t = toy_corpus(n=30, seed=3)
    sp, tp = write_lines(tmp_path / "s.txt", s), write_lines(tmp_path / "t.txt", t)
    run = CliRunner().invoke
    for side, path in (("s", sp), ("t", tp)):
        assert run(main, ["encode", path, "-o", str(tmp_path / f"{side}.npy"), "--model", toy_model_dir, "-q"]).exit_code == 0
    e = np.load(tmp_path / "t.npy", mmap_mode="r+")
    e[4, 0] = np.inf
    e.flush()
    del e
    r = run(main, ["mine", sp, tp, "--model", toy_model_dir, "--src-emb", str(tmp_path / "s.npy"),
                   "--tgt-emb", str(tmp_path / "t.npy"), "-q"])
    assert r.exit_code == 1 and "t.npy row 5: NaN or infinite values" in r.output
