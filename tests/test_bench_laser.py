"""bitextmine.laser (what tools/bench_laser.py runs): its pure helpers: LASER's raw format, the stub EmbedLoad, the lift to 1024
dimensions, inputs in the model's dimension, pair-file comparison, LASER's stages from its --verbose
lines, the linear fit; and the dimension tools/bench_mine.py reports. No LASER run."""

import importlib.util
import os
import sys

import numpy as np
import pytest

import bitextmine.laser as bl
from bitextmine.errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
@pytest.mark.parametrize("fp16", [False, True])
def test_raw_writer_round_trips_against_numpy_fromfile_and_laser_embedload(tmp_path, fp16):
    x = np.random.default_rng(0).standard_normal((37, 24)).astype(np.float32)
    path = str(tmp_path / "x.raw")
    bl.write_raw(path, x, fp16=fp16)
    dtype = np.float16 if fp16 else np.float32
    assert os.path.getsize(path) == x.size * np.dtype(dtype).itemsize  # headerless
    expected = x.astype(dtype)
    np.testing.assert_array_equal(np.fromfile(path, dtype=dtype).reshape(37, 24), expected)
    np.testing.assert_array_equal(bl.read_raw(path, 24, fp16=fp16), expected)
    # the EmbedLoad that LASER's script calls, as written into $LASER/source/embed.py
    laser = bl.write_laser_stubs(str(tmp_path))
    spec = importlib.util.spec_from_file_location("laser_embed_stub", os.path.join(laser, "source", "embed.py"))
    stub = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stub)
    got = stub.EmbedLoad(path, 24, fp16=fp16)
    assert got.dtype == dtype and got.shape == (37, 24)
    np.testing.assert_array_equal(got, expected)
    with pytest.raises(NotImplementedError):
        stub.EncodeLoad(None)
    blocks = str(tmp_path / "blocks.raw")  # written block by block into an open file: the same bytes
    with open(blocks, "wb") as f:
        for i in range(0, 37, 10):
            bl.write_raw(f, x[i:i + 10], fp16=fp16)
    with open(path, "rb") as f, open(blocks, "rb") as g:
        assert f.read() == g.read()
    np.testing.assert_array_equal(bl.raw_rows(path, 24, fp16=fp16), expected)


@pytest.mark.slow
def test_stub_tree_has_the_modules_mine_bitexts_imports(tmp_path):
    laser = bl.write_laser_stubs(str(tmp_path))
    sys.path.insert(0, os.path.join(laser, "source"))
    try:
        from embed import EmbedLoad, EncodeFile, EncodeLoad, SentenceEncoder  # noqa: F401
        from lib.text_processing import BPEfastApply, Token  # noqa: F401
    finally:
        sys.path.remove(os.path.join(laser, "source"))
        for name in ("embed", "lib", "lib.text_processing"):
            sys.modules.pop(name, None)


@pytest.mark.slow
def test_lift_preserves_cosines():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((200, 300)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    w = bl.lift_matrix(300, 1024, seed=0)
    assert w.shape == (300, 1024)
    np.testing.assert_allclose(w @ w.T, np.eye(300), atol=1e-12)  # orthonormal rows
    np.testing.assert_array_equal(w, bl.lift_matrix(300, 1024, seed=0))  # seeded
    y = bl.lift(x, w)
    assert y.dtype == np.float32 and y.shape == (200, 1024)
    np.testing.assert_allclose(np.linalg.norm(y, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(y @ y.T, x.astype(np.float64) @ x.T.astype(np.float64), atol=1e-5)


def _write(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return str(path)


@pytest.mark.slow
def test_pair_files_compare_by_text(tmp_path):
    # LASER prints numpy's repr of the score; bitextmine 6 decimals
    laser = _write(tmp_path / "laser.tsv", ["1.2345678901\tHallo Welt\tHello world", "1.1\tJa\tYes",
                                            "1.05\tNein\tMaybe"])
    ours = _write(tmp_path / "bm.tsv", ["1.234568\tHallo Welt\tHello world", "1.100001\tJa\tYes",
                                        "1.040000\tNein\tNo", "1.010000\tVielleicht\tMaybe"])
    a, b = bl.read_pairs(laser), bl.read_pairs(ours)
    assert a[("Ja", "Yes")] == 1.1
    r = bl.compare_pairs(a, b)
    assert (r["pairs_a"], r["pairs_b"], r["shared"]) == (3, 4, 2)
    assert r["identical_pct"] == pytest.approx(50.0)
    assert r["max_abs_score_diff"] == pytest.approx(1.0e-6, abs=1e-9)
    assert bl.compare_pairs({}, {})["max_abs_score_diff"] is None


@pytest.mark.slow
def test_a_tab_inside_a_text_is_split_where_both_sides_are_known(tmp_path):
    path = _write(tmp_path / "p.tsv", ["2.0\ta\tb\tc"])
    assert bl.read_pairs(path) == {("a", "b\tc"): 2.0}
    assert bl.read_pairs(path, {"a\tb"}, {"c"}) == {("a\tb", "c"): 2.0}
    with pytest.raises(ValueError, match="line 1: 2 columns"):
        bl.read_pairs(_write(tmp_path / "bad.tsv", ["1.0\tonly"]))


VERBOSE = [(1.0, "LASER: tool to search, score or mine bitexts"), (1.1, " - loading texts s.txt: 3 lines, 3 unique"),
           (2.0, " - perform 4-nn source against target"), (5.0, " - perform 4-nn target against source"),
           (9.0, " - mining for parallel data"), (9.0, " - scoring 3 candidates"), (9.5, " - scoring 3 candidates"),
           (10.5, " - writing alignments to out.tsv")]


@pytest.mark.slow
def test_laser_stages_from_its_verbose_lines():
    done, stopped = bl.laser_stages(VERBOSE, 12.0, True)
    assert stopped is None
    assert done == pytest.approx({"load": 2.0, "knn_fwd": 3.0, "knn_bwd": 4.0, "score_fwd": 0.5, "score_bwd": 1.0,
                                  "select": 1.5})
    done, stopped = bl.laser_stages(VERBOSE[:4], 7.0, False)  # stopped during the second search
    assert stopped == "knn_bwd" and done == pytest.approx({"load": 2.0, "knn_fwd": 3.0})


@pytest.mark.slow
def test_linear_fit_evaluates_the_line_at_m():
    assert bl.fit_at([1, 2, 4], [3.0, 5.0, 9.0], 10) == pytest.approx(21.0)
    assert bl.fit_at([5], [2.0], 10) == pytest.approx(4.0)


@pytest.mark.slow
def test_commands_have_laser_flags_and_fill_the_template():
    p = {"src_txt": "s.txt", "tgt_txt": "t t.txt", "src_raw": "s.raw", "tgt_raw": "t.raw", "src_npy": "", "tgt_npy": ""}
    cmd = bl.laser_cmd("mine_bitexts.py", p, out="o.tsv", dim=1024, threshold=1.1, k=4, fp16=True)
    for flags in (["--mode", "mine"], ["--retrieval", "max"], ["--margin", "ratio"], ["-k", "4"], ["--dim", "1024"],
                  ["--threshold", "1.1"], ["--src-embeddings", "s.raw"], ["--trg-embeddings", "t.raw"]):
        i = cmd.index(flags[0])
        assert cmd[i:i + len(flags)] == flags
    assert "--unify" in cmd and "--fp16" in cmd and "--gpu" not in cmd
    ours = bl.ours_cmd(bl.RAW_TEMPLATE, p, out="b.tsv", dim=1024, threshold=1.1, k=4, fp16_flag="--fp16")
    assert ours[1:4] == ["-m", "bitextmine", "mine"] and ours[4:6] == ["s.txt", "t t.txt"]
    assert "--fp16" in ours and ours[ours.index("--dim") + 1] == "1024" and ours[-2:] == ["-o", "b.tsv"]
    assert "--fp16" not in bl.ours_cmd(bl.RAW_TEMPLATE, p, out="b.tsv", dim=300, threshold=0, k=4, fp16_flag="")


def _cache(folder, n: int, dim: int, seed: int = 2) -> dict:
    """src.N.npy / tgt.N.npy (+ .txt) as tools/bench_mine.py caches them: n unit rows of ``dim`` per side."""
    rng = np.random.default_rng(seed)
    folder.mkdir(exist_ok=True)
    out = {}
    for side in ("src", "tgt"):
        x = rng.standard_normal((n, dim)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        np.save(folder / f"{side}.{n}.npy", x)
        (folder / f"{side}.{n}.txt").write_text("".join(f"{side} {i}\n" for i in range(n)))
        out[side] = x
    return out


@pytest.mark.parametrize("dim", [512, 1024])
def test_inputs_are_the_model_dimension_or_lifted_from_it(tmp_path, dim):
    rows = _cache(tmp_path / "cache", 6, 512)
    p = bl.make_inputs(str(tmp_path / "cache"), str(tmp_path / "run"), 6, dim=dim, fp16=False, lift_seed=0,
                       want_npy=False, model_dim=512)
    for side, x in rows.items():
        y = bl.read_raw(p[f"{side}_raw"], dim)
        assert y.shape == (6, dim)
        np.testing.assert_allclose(y @ y.T, x @ x.T, atol=1e-5)  # the same cosines


def test_inputs_of_another_dimension_are_refused(tmp_path):
    _cache(tmp_path / "cache", 6, 300)
    with pytest.raises(ConfigError, match="rows of 300; expected the bundled model's 512"):
        bl.make_inputs(str(tmp_path / "cache"), str(tmp_path / "run"), 6, dim=512, fp16=False, lift_seed=0,
                       want_npy=False, model_dim=512)


def test_bench_mine_names_the_dimension_of_its_embeddings(tmp_path):
    import subprocess

    _cache(tmp_path / "cache", 6, 24)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench_mine.py"), "--work", str(tmp_path / "cache"),
                        "--n", "6", "--no-baseline"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("6 x 6 sentences, dim 24, index flat")
