"""score: the cosine (default output unchanged) and LASER's margin "score" mode against a brute-force float64
reference; stdin and files, batch sizes, the temporary files, errors."""

import io
import os

import numpy as np
import pytest
from click.testing import CliRunner

from bitextmine.cli import main
from bitextmine.config import EncodeConfig, ScoreConfig
from bitextmine.errors import ConfigError, CorpusError
from bitextmine.scoring import margin_score_lines, score_file, score_lines

from conftest import shared_path, toy_corpus, write_lines


def tsv_lines(n: int = 60, seed: int = 5) -> list[str]:
    """Pairs of the toy languages: two thirds translations, the rest a target of another line; an extra column."""
    src, tgt = toy_corpus(n, seed=seed)
    rng = np.random.default_rng(seed)
    wrong = rng.permutation(n)
    return [f"{s}\t{tgt[wrong[i]] if i % 3 == 2 else t}\tx{i}" for i, (s, t) in enumerate(zip(src, tgt))]


def reference(x: np.ndarray, y: np.ndarray, k: int, margin: str, src=None, tgt=None) -> np.ndarray:
    """Brute force in float64: each pair's margin against the k best of the similarity matrix of each side's
    distinct lines (``src``, ``tgt``: the rows' texts; None: every row distinct)."""
    x, y = x.astype(np.float64), y.astype(np.float64)
    firsts = [sorted({t: i for i, t in reversed(list(enumerate(texts)))}.values()) if texts else list(range(len(v)))
              for texts, v in ((src, x), (tgt, y))]
    ux, uy = x[firsts[0]], y[firsts[1]]
    k_x, k_y = min(k, len(uy)), min(k, len(ux))
    mean_x = -np.sort(-(x @ uy.T), axis=1)[:, :k_x].mean(1)  # x_i's k nearest distinct targets
    mean_y = -np.sort(-(ux @ y.T), axis=0)[:k_y, :].mean(0)  # y_i's k nearest distinct sources
    cos, avg = (x * y).sum(1), (mean_x + mean_y) / 2
    if margin == "distance":
        return cos - avg
    return np.where(avg > 0, cos / np.where(avg > 0, avg, 1), cos)  # margin.py: a mean <= 0 leaves the cosine


def scored(path, model, **kw) -> list[tuple[str, float]]:
    import io

    out = io.StringIO()
    score_file(path, out, model, **kw)
    return [(line.rsplit("\t", 1)[0], float(line.rsplit("\t", 1)[1])) for line in out.getvalue().splitlines()]


@pytest.mark.parametrize("margin,k", [("ratio", 4), ("distance", 4), ("ratio", 1), ("ratio", 100)])
def test_margin_scores_equal_brute_force(tmp_path, toy_model, margin, k):
    from bitextmine.encoding.pipeline import encode

    lines = tsv_lines()
    path = write_lines(tmp_path / "pairs.tsv", lines)
    cfg = EncodeConfig(device="cpu", batch_size=7)  # several batches, the last one short
    got = scored(path, toy_model, config=cfg, score=ScoreConfig(margin=margin, k=k))
    assert [g[0] for g in got] == lines
    src, tgt = [line.split("\t")[0] for line in lines], [line.split("\t")[1] for line in lines]
    assert len(set(tgt)) < len(tgt)  # the wrong pairs repeat other lines' targets: copies count once
    x, y = encode(src, toy_model, config=cfg), encode(tgt, toy_model, config=cfg)
    want = reference(x, y, k, margin, src, tgt)
    # printed with 6 decimals; ratios of the toy model's small neighbour means reach 100s: relative tolerance too
    np.testing.assert_allclose([g[1] for g in got], want, rtol=1e-5, atol=1e-5)
    raw = [s for _, s in margin_score_lines(path, toy_model, config=cfg, score=ScoreConfig(margin=margin, k=k))]
    np.testing.assert_allclose(raw, want, rtol=1e-5, atol=1e-6)
    assert np.mean(want[2::3]) < np.mean(want[0::3])  # wrong pairs score lower


def test_margin_from_stdin_equals_file_and_cleans_up(tmp_path, toy_model_dir, monkeypatch):
    import tempfile

    # empty sides; a line ending in CR CR LF keeps one CR (the reader drops one), and the copy of stdin keeps it too
    lines = tsv_lines(30) + ["kalo\t\t", "\tolakx", "mire  tusa\tasutx erimx\r"]
    path = tmp_path / "pairs.tsv"
    path.write_bytes(("\n".join(lines) + "\r\n").encode())
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    runner = CliRunner()
    from_file = runner.invoke(main, ["score", str(path), "--margin", "ratio", "--model", toy_model_dir, "-q"])
    assert from_file.exit_code == 0, from_file.output
    from_stdin = runner.invoke(main, ["score", "--margin", "ratio", "-k", "4", "--model", toy_model_dir, "-q",
                                      "--batch-size", "8"], input=path.read_bytes())
    assert from_stdin.exit_code == 0, from_stdin.output
    assert from_stdin.output == from_file.output
    assert [o.rsplit("\t", 1)[0] for o in from_file.output.split("\n")[:-1]] == lines
    assert os.listdir(tmp) == []  # the temporary embeddings and the stdin copy are gone


def test_default_output_is_the_cosine_unchanged(tmp_path, toy_model_dir, toy_model):
    lines = tsv_lines(20)
    path = write_lines(tmp_path / "pairs.tsv", lines)
    want = "".join(f"{line}\t{c:.6f}\n" for line, c in score_lines(lines, toy_model, config=EncodeConfig(device="cpu")))
    runner = CliRunner()
    default = runner.invoke(main, ["score", path, "--model", toy_model_dir, "--device", "cpu", "-q"])
    none = runner.invoke(main, ["score", path, "--margin", "none", "--model", toy_model_dir, "--device", "cpu", "-q"])
    assert default.exit_code == 0 and default.output == want and none.output == want
    # options the cosine does not use are refused, not ignored
    unused = runner.invoke(main, ["score", path, "-k", "9", "--src-lang", "de", "--model", toy_model_dir, "-q"])
    assert unused.exit_code == 1 and unused.output == "Error: --k: needs --margin ratio, distance or prob\n"
    for given, needs in ((["-k", "5"], "--k: needs --margin ratio"),
                         (["--judge-lines", "5001", "--margin", "ratio"], "--judge-lines: needs --margin prob")):
        r = runner.invoke(main, ["score", path, *given, "--model", toy_model_dir, "-q"])
        assert r.exit_code == 1 and needs in r.output, r.output
    at_default = runner.invoke(main, ["score", path, "-k", "4", "--model", toy_model_dir, "--device", "cpu", "-q"])
    assert at_default.exit_code == 0 and at_default.output == want  # the default's value, given: changes nothing
    from bitextmine.errors import ConfigError
    from bitextmine.scoring import score_file

    with pytest.raises(ConfigError, match=r"--k 9, --src-lang de: not used by --margin none; drop them"):
        score_file(path, io.StringIO(), toy_model, score=ScoreConfig(k=9, src_lang="de"))  # the library: by value


def test_margin_errors(tmp_path, toy_model_dir, toy_model):
    p = write_lines(tmp_path / "p.tsv", ["kalo\tolakx", "no tab here"])
    r = CliRunner().invoke(main, ["score", p, "--margin", "distance", "--model", toy_model_dir, "-q"])
    assert r.exit_code == 1 and r.output.splitlines()[-1] == (
        f"Error: {p} line 2: 1 tab-separated column(s); expected at least 2 (source column 1, target column 2)")
    with pytest.raises(CorpusError, match="line 2"):
        list(margin_score_lines(p, toy_model))
    with pytest.raises(ConfigError, match="margin 'absolute': expected ratio or distance"):
        list(margin_score_lines(p, toy_model, score=ScoreConfig(margin="absolute")))
    empty = write_lines(tmp_path / "empty.tsv", [])
    assert scored(empty, toy_model, score=ScoreConfig(margin="ratio")) == []


@pytest.mark.slow
def test_margin_on_real_pairs(tmp_path):
    """Tatoeba deu-eng with the bundled model: every third English side replaced; margins as the reference,
    and the translations ahead of the replaced pairs."""
    from bitextmine.corpus import read_lines
    from bitextmine.encoding.pipeline import encode
    from bitextmine.loading import load_model

    de = read_lines(shared_path("dev", "tatoeba", "v1", "tatoeba.deu-eng.deu"))[:300]
    en = read_lines(shared_path("dev", "tatoeba", "v1", "tatoeba.deu-eng.eng"))[:300]
    en = [en[(i + 100) % 300] if i % 3 == 2 else e for i, e in enumerate(en)]
    path = write_lines(tmp_path / "p.tsv", [f"{a}\t{b}" for a, b in zip(de, en)])
    model = load_model()
    cfg = EncodeConfig(device="cpu")
    got = np.array([s for _, s in scored(path, model, config=cfg, score=ScoreConfig(margin="ratio"))])
    want = reference(encode(de, model, config=cfg), encode(en, model, config=cfg), 4, "ratio", de, en)
    np.testing.assert_allclose(got, want, atol=1e-5)
    good, bad = np.delete(got, np.s_[2::3]), got[2::3]
    assert np.median(good) > 1.2 > np.median(bad)


def feed_fifo(path, data: bytes):
    """A FIFO at ``path`` (as a shell's ``<(...)`` gives) that a thread fills with ``data`` once; returns the thread."""
    import threading

    os.mkfifo(path)

    def write():
        with open(path, "wb") as f:
            f.write(data)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_margin_from_a_pipe_equals_file_and_a_changed_input_is_an_error(tmp_path, toy_model):
    from bitextmine.scoring import _paired

    path = write_lines(tmp_path / "pairs.tsv", tsv_lines(40))
    fifo = str(tmp_path / "pipe")
    thread = feed_fifo(fifo, open(path, "rb").read())
    from_pipe = scored(fifo, toy_model, score=ScoreConfig(margin="ratio"))  # read once, copied as it is read
    thread.join(5)
    assert from_pipe == scored(path, toy_model, score=ScoreConfig(margin="ratio")) and len(from_pipe) == 40
    assert list(_paired(iter(["a", "b"]), [0.5, 0.25], "f")) == [("a", 0.5), ("b", 0.25)]
    for lines in (["a"], ["a", "b", "c"]):  # the input changed between the reads: never a shorter output silently
        with pytest.raises(CorpusError, match="f: 2 lines were scored, the second read gave .*changed"):
            list(_paired(iter(lines), [0.5, 0.25], "f"))


@pytest.mark.parametrize("ext", [".gz", ".xz"])
def test_score_and_mine_compress_an_output_named_so(tmp_path, toy_model_dir, ext):
    """An output named *.gz or *.xz is compressed (it held plain text under the compressed name), the same
    bytes as the output to stdout once decompressed."""
    import gzip
    import lzma

    unpack = {".gz": gzip.decompress, ".xz": lzma.decompress}[ext]
    path = write_lines(tmp_path / "pairs.tsv", tsv_lines(20))
    runner = CliRunner()
    plain = runner.invoke(main, ["score", path, "--model", toy_model_dir, "--device", "cpu", "-q"]).output
    out = tmp_path / f"scored.tsv{ext}"
    assert runner.invoke(main, ["score", path, "--model", toy_model_dir, "--device", "cpu", "-q", "-o",
                                str(out)]).exit_code == 0
    assert unpack(out.read_bytes()).decode("utf-8") == plain
    s, t = toy_corpus(40, seed=61)
    a, b = write_lines(tmp_path / "a.txt", s), write_lines(tmp_path / "b.txt", t)
    args = ["mine", a, b, "--model", toy_model_dir, "-q", "--threshold", "0", "--min-z", "0"]
    mined, out = runner.invoke(main, args).output, tmp_path / f"pairs.tsv{ext}"
    assert runner.invoke(main, args + ["-o", str(out)]).exit_code == 0
    assert unpack(out.read_bytes()).decode("utf-8") == mined and mined.count("\n") >= 20


def test_a_lone_surrogate_in_jsonl_is_a_one_line_error(tmp_path, toy_model_dir):
    from click.testing import CliRunner

    from bitextmine.cli import main

    path = tmp_path / "p.jsonl"
    path.write_text('{"en": "x", "de": "y"}\n{"en": "a\\ud800b", "de": "c"}\n')
    r = CliRunner().invoke(main, ["score", str(path), "--src-col", "en", "--tgt-col", "de", "--model", toy_model_dir])
    assert r.exit_code == 1 and r.output.startswith(f"Error: {path} line 2 column 'en': a lone surrogate \\ud800 at "
                                                    "character 2")
    assert len(r.output.splitlines()) == 1


def test_a_pair_keeps_its_margin_however_often_the_file_repeats_it(tmp_path, toy_model):
    """Copies crowded their own neighbourhoods: a pair given 4 times scored a ratio margin of exactly 1 (distance 0)."""
    lines = tsv_lines()
    once = write_lines(tmp_path / "once.tsv", lines)
    four = write_lines(tmp_path / "four.tsv", lines[:1] * 3 + lines)
    for margin in ("ratio", "distance"):
        a = scored(once, toy_model, score=ScoreConfig(margin=margin))
        b = scored(four, toy_model, score=ScoreConfig(margin=margin))
        assert len(b) == len(a) + 3 and {s for _, s in b[:4]} == {a[0][1]}
        assert [s for _, s in b[3:]] == [s for _, s in a]
