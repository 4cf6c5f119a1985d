"""open_embeddings: .npy with and without the sidecar of 'bitextmine encode', chunked directories, LASER's raw
format (float32 and float16), and the one-line errors for a wrong size, dim, dtype or row count."""

import os
from types import SimpleNamespace

import numpy as np
import pytest

from bitextmine.encoding import has_sidecar, open_embeddings
from bitextmine.encoding.external import embeddings_need_model
from bitextmine.encoding.store import EncodeResult, chunk_file, write_manifest, write_sidecar
from bitextmine.errors import ConfigError, ModelFormatError

MODEL = SimpleNamespace(fingerprint="0123456789abcdef")  # what the store checks: the model's fingerprint


def rows(n=10, d=8, seed=0):
    x = np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_npy_without_sidecar_is_a_read_only_map(tmp_path, dtype):
    x = rows().astype(dtype)
    p = str(tmp_path / "e.npy")
    np.save(p, x)
    assert not has_sidecar(p) and not embeddings_need_model([p])
    e = open_embeddings(p, rows=10, dim=8)
    assert isinstance(e, np.memmap) and e.dtype == dtype and not e.flags.writeable
    np.testing.assert_array_equal(e, x)
    with pytest.raises(ConfigError, match=r"e.npy: rows of 8 values; expected --dim 9$"):
        open_embeddings(p, dim=9)


def test_npy_with_sidecar_checks_the_model(tmp_path):
    x = rows()
    p = str(tmp_path / "e.npy")
    np.save(p, x)
    write_sidecar(p, MODEL.fingerprint, EncodeResult(10, 8, "float32", "0" * 64, p), ["e.txt"])
    assert has_sidecar(p) and embeddings_need_model(["other.npy", p]) and not embeddings_need_model([p], "raw")
    e = open_embeddings(p, model=MODEL, rows=10)
    assert not e.flags.writeable
    np.testing.assert_array_equal(e, x)
    with pytest.raises(ConfigError, match="its model is needed to check it"):
        open_embeddings(p)
    with pytest.raises(ModelFormatError, match="re-encode with the same --model"):
        open_embeddings(p, model=SimpleNamespace(fingerprint="fedcba9876543210"))
    with pytest.raises(ModelFormatError, match=r"re-encode with the same --model \(and --sif"):
        open_embeddings(p, model=MODEL, sif=True)
    with pytest.raises(ConfigError, match=r"e.npy: 10 rows, but e.txt has 11 lines"):
        open_embeddings(p, model=MODEL, rows=11, text="e.txt")


def test_chunked_directory_is_read_through_its_manifest(tmp_path):
    x = rows(7)
    d = tmp_path / "emb"
    d.mkdir()
    chunks = []
    for i, (a, b) in enumerate([(0, 4), (4, 7)]):
        np.save(d / chunk_file(i), x[a:b])
        chunks.append({"file": chunk_file(i), "first_row": a, "rows": b - a, "input_sha256": "0" * 64})
    write_manifest(str(d), {"format_version": 2, "model_fingerprint": MODEL.fingerprint, "dim": 8, "dtype": "float32",
                            "chunk_lines": 4, "inputs": ["t"], "chunks": chunks, "complete": True, "count": 7,
                            "input_sha256": "0" * 64})
    assert has_sidecar(str(d))
    e = open_embeddings(str(d), model=MODEL, rows=7)
    assert not e.flags.writeable
    np.testing.assert_array_equal(e, x)


@pytest.mark.parametrize("fp16", [False, True])
def test_raw_round_trip(tmp_path, fp16):
    x = rows(12, 6).astype(np.float16 if fp16 else np.float32)
    p = str(tmp_path / "e.raw")
    x.tofile(p)
    e = open_embeddings(p, fmt="raw", dim=6, fp16=fp16, rows=12)
    assert e.shape == (12, 6) and e.dtype == x.dtype and not e.flags.writeable
    np.testing.assert_array_equal(e, x)
    empty = str(tmp_path / "empty.raw")
    open(empty, "wb").close()
    assert open_embeddings(empty, fmt="raw", dim=6).shape == (0, 6)


@pytest.mark.parametrize("scale", [0.01, 0.05, 3.0])
def test_a_float16_raw_file_read_as_float32_at_half_the_dim_is_refused(tmp_path, scale):
    """LASER's --fp16 output of dim 64 read as float32 of dim 32 has whole rows and the right row count; its
    values are refused as float16 pairs, the message naming the options to give. The float32 file of the same
    embeddings opens, and so does the float16 file read as it is."""
    x = np.random.default_rng(3).normal(0, scale, (300, 64)).astype(np.float32)
    p32, p16 = str(tmp_path / "e32.raw"), str(tmp_path / "e16.raw")
    x.tofile(p32)
    x.astype(np.float16).tofile(p16)
    with pytest.raises(ConfigError) as e:
        open_embeddings(p16, fmt="raw", dim=32, rows=300)
    assert str(e.value) == (f"{p16}: its values read as float32 are pairs of float16 values (LASER's --fp16 output); "
                            "expected float32 rows of dim 32: give --fp16 and --dim 64")
    assert open_embeddings(p32, fmt="raw", dim=64, rows=300).shape == (300, 64)
    assert open_embeddings(p16, fmt="raw", dim=64, fp16=True, rows=300).shape == (300, 64)
    with pytest.raises(ConfigError, match="expected float32 rows of dim 64: give --fp16$"):  # the right dim, no --fp16
        open_embeddings(p16, fmt="raw", dim=64, rows=300)


def test_raw_wrong_size_dim_and_rows(tmp_path):
    p = str(tmp_path / "e.raw")
    rows(10, 8).tofile(p)  # 320 bytes
    with pytest.raises(ConfigError) as e:
        open_embeddings(p, fmt="raw", dim=7)
    assert str(e.value) == (f"{p}: 320 bytes is not a whole number of rows of dim 7 x float32 (28 bytes each); "
                            "check --dim and --fp16")
    with pytest.raises(ConfigError, match="raw embeddings need --dim"):
        open_embeddings(p, fmt="raw")
    assert open_embeddings(p, fmt="raw", dim=8, fp16=True).shape == (20, 8)  # a whole number of float16 rows
    with pytest.raises(ConfigError) as e:
        open_embeddings(p, fmt="raw", dim=8, rows=9, text="e.txt")
    assert str(e.value) == f"{p}: 10 rows, but e.txt has 9 lines; expected one row per line"
    with pytest.raises(ConfigError, match="no such file"):
        open_embeddings(str(tmp_path / "none.raw"), fmt="raw", dim=8)
    with pytest.raises(ConfigError, match="embedding format 'bin': expected one of npy, raw"):
        open_embeddings(p, fmt="bin")


def test_npy_wrong_shape_dtype_and_rows(tmp_path):
    one = str(tmp_path / "one.npy")
    np.save(one, np.zeros(5, np.float32))
    with pytest.raises(ConfigError, match=r"one.npy: shape \(5,\); expected 2-D"):
        open_embeddings(one)
    f64 = str(tmp_path / "f64.npy")
    np.save(f64, np.zeros((5, 2)))
    with pytest.raises(ConfigError, match="f64.npy: dtype float64; expected float16 or float32"):
        open_embeddings(f64)
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"not an npy file")
    with pytest.raises(ModelFormatError, match="not a readable .npy file"):
        open_embeddings(str(bad))
    p = str(tmp_path / "e.npy")
    np.save(p, rows(3))
    with pytest.raises(ConfigError) as e:
        open_embeddings(p, rows=4, text=os.path.join("data", "a.txt"))
    assert str(e.value) == f"{p}: 3 rows, but {os.path.join('data', 'a.txt')} has 4 lines; expected one row per line"


@pytest.mark.parametrize("fmt, dtype", [("npy", np.float32), ("npy", np.float16), ("raw", np.float32),
                                        ("raw", np.float16)])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_row_that_is_not_finite_is_refused_naming_it(tmp_path, fmt, dtype, bad):
    x = rows(50, 8).astype(dtype)
    x[37, 5] = bad
    x[44, 0] = np.nan
    p = str(tmp_path / f"e.{fmt}")
    np.save(p, x) if fmt == "npy" else x.tofile(p)
    kw = {"fmt": fmt, "dim": 8, "fp16": dtype == np.float16}
    with pytest.raises(ConfigError) as e:
        open_embeddings(p, rows=50, **kw)
    assert str(e.value) == (f"{p} row 38: NaN or infinite values; expected finite embeddings "
                            "(row 38 is line 38 of the text)")
    assert open_embeddings(p, **kw).shape == (50, 8)  # opened without rows (per chunk): not read through


def test_check_finite_reads_in_blocks_and_finds_the_first_bad_row():
    from bitextmine.encoding.external import check_finite

    x = rows(100, 4)
    check_finite(x, "x", block=7)
    for bad in (0, 6, 7, 50, 99):
        y = x.copy()
        y[bad, 1] = np.inf
        y[min(bad + 3, 99), 2] = np.nan
        with pytest.raises(ConfigError, match=rf"^x row {bad + 1}: "):
            check_finite(y, "x", block=7)


def test_mine_refuses_an_embeddings_file_with_a_nan_row(tmp_path):
    from click.testing import CliRunner

    from bitextmine.cli import main

    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("".join(f"line {i}\n" for i in range(20)))
    b.write_text("".join(f"Zeile {i}\n" for i in range(20)))
    x, y = rows(20, 8, seed=1), rows(20, 8, seed=2)
    x[11] = np.nan
    np.save(tmp_path / "a.npy", x)
    np.save(tmp_path / "b.npy", y)
    r = CliRunner().invoke(main, ["mine", str(a), str(b), "--src-emb", str(tmp_path / "a.npy"),
                                  "--tgt-emb", str(tmp_path / "b.npy"), "-q"])
    assert r.exit_code == 1 and r.stderr == (f"Error: {tmp_path / 'a.npy'} row 12: NaN or infinite values; expected "
                                             "finite embeddings (row 12 is line 12 of the text)\n")
