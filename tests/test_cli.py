import os
import re
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from bitextmine.cli import main

ROOT = os.path.join(os.path.dirname(__file__), "..")


def run(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def test_every_command_is_documented_in_the_readme_and_has_an_example():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    for name, cmd in main.commands.items():
        assert f"bitextmine {name}" in readme, f"README does not mention 'bitextmine {name}'"
        assert "Example" in (cmd.help or ""), f"'bitextmine {name} --help' has no example"


def test_help_does_not_import_torch_or_faiss():
    code = "import sys; from bitextmine.cli import main\ntry: main(['mine', '--help'])\nexcept SystemExit: pass\n" \
           "print('torch' in sys.modules, 'faiss' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.strip().endswith("False False")


def test_python_dash_m_works():
    r = subprocess.run([sys.executable, "-m", "bitextmine", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("bitextmine")


def test_train_mismatched_files_one_line_error(tmp_path):
    a, b = tmp_path / "a.de", tmp_path / "b.en"
    a.write_text("eins\nzwei\n")
    b.write_text("one\n")
    r = run("train", "--src", str(a), "--tgt", str(b), "--out", str(tmp_path / "m"), "-q")
    assert r.exit_code == 1
    assert r.output == (f"Error: {a} line 2: no partner line in {b}, which has 1 lines (the other has 2); "
                        "expected line-aligned files\n")


def test_train_src_without_tgt(tmp_path):
    r = run("train", "--src", "x", "--out", str(tmp_path / "m"))
    assert r.exit_code == 1 and r.output == "Error: 1 --src but 0 --tgt; expected them in pairs\n"


def test_invalid_utf8_on_score_stdin(toy_model_dir):
    r = CliRunner().invoke(main, ["score", "--model", toy_model_dir, "-q"], input=b"a\tb\n\xc3\x28\tc\n")
    assert r.exit_code == 1
    assert r.output.endswith("Error: <stdin> line 2: invalid UTF-8 (byte 0xc3 at column 1); expected UTF-8 text\n")


def test_score_line_without_tab(tmp_path, toy_model_dir):
    p = tmp_path / "p.tsv"
    p.write_text("kalo\tolakx\nno tab here\n")
    r = run("score", str(p), "--model", toy_model_dir, "-q")
    assert r.exit_code == 1
    assert r.output.splitlines()[-1] == (f"Error: {p} line 2: 1 tab-separated column(s); expected at least 2 "
                                         "(source column 1, target column 2)")


def test_score_appends_cosine_and_keeps_lines(tmp_path, toy_model_dir, toy_model):
    from bitextmine.encoding.pipeline import encode

    lines = ["kalo mire\tolakx erimx\textra", "tusa\tasutx"]
    r = run("score", "--model", toy_model_dir, "-q", input="\n".join(lines) + "\n")
    out = r.output.splitlines()
    assert [o.rsplit("\t", 1)[0] for o in out] == lines
    x = encode(["kalo mire", "tusa"], toy_model)
    y = encode(["olakx erimx", "asutx"], toy_model)
    np.testing.assert_allclose([float(o.rsplit("\t", 1)[1]) for o in out], (x * y).sum(1), atol=1e-5)


def test_missing_model_directory(tmp_path):
    r = run("mine", "a", "b", "--model", str(tmp_path / "none"))
    assert r.exit_code == 1
    assert r.output == f"Error: {tmp_path / 'none'}: not a model directory; expected a folder made by 'bitextmine train'\n"


def test_missing_input_file(tmp_path, toy_model_dir):
    r = run("mine", str(tmp_path / "nope.txt"), str(tmp_path / "nope2.txt"), "--model", toy_model_dir, "-q")
    assert r.exit_code == 1 and r.output == f"Error: {tmp_path / 'nope.txt'}: no such file; expected a readable text file\n"


def test_mine_with_embeddings_refuses_other_text(tmp_path, toy_model_dir):
    from conftest import toy_corpus, write_lines

    s, t = toy_corpus(n=40, seed=9)
    sp, tp = write_lines(tmp_path / "s.txt", s), write_lines(tmp_path / "t.txt", t)
    other = write_lines(tmp_path / "o.txt", s[::-1])
    for p in (sp, tp, other):
        assert run("encode", p, "-o", p + ".npy", "--model", toy_model_dir, "-q").exit_code == 0
    ok = run("mine", sp, tp, "--src-emb", sp + ".npy", "--tgt-emb", tp + ".npy", "--model", toy_model_dir, "-q",
             "--threshold", "0", "--min-z", "0")
    direct = run("mine", sp, tp, "--model", toy_model_dir, "-q", "--threshold", "0", "--min-z", "0")
    assert ok.exit_code == 0 and ok.output == direct.output and len(ok.output.splitlines()) >= 30
    bad = run("mine", sp, tp, "--src-emb", other + ".npy", "--model", toy_model_dir, "-q")
    assert bad.exit_code == 1
    assert bad.output == f"Error: {other}.npy: encodes another text than the one given (input checksum differs)\n"


def test_mine_output_file_and_ids(tmp_path, toy_model_dir):
    from conftest import toy_corpus, write_lines

    s, t = toy_corpus(n=30, seed=11)
    sp, tp = write_lines(tmp_path / "s.txt", s), write_lines(tmp_path / "t.txt", t[::-1])
    out = tmp_path / "o.tsv"
    r = run("mine", sp, tp, "--model", toy_model_dir, "-o", str(out), "--ids", "--threshold", "0", "--min-z", "0", "-q")
    assert r.exit_code == 0 and r.output == ""
    rows = [line.split("\t") for line in out.read_text().splitlines()]
    assert all(len(row) == 5 for row in rows)
    scores = [float(row[0]) for row in rows]
    assert scores == sorted(scores, reverse=True)
    correct = [row for row in rows if int(row[3]) == 31 - int(row[4])]
    assert len(correct) >= 25
    assert all(s[int(row[3]) - 1] == row[1] and t[::-1][int(row[4]) - 1] == row[2] for row in rows)


def test_readme_python_example_runs(capsys):
    import re

    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    code = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    sims = [float(v) for v in re.findall(r"-?\d+\.\d+", printed)]
    assert len(sims) == 2 and sims[0] > sims[1]  # the translation is the most similar


def test_bench_reports_every_stage(tmp_path, toy_model_dir):
    import json as _json

    from conftest import toy_corpus

    src, tgt = toy_corpus(300, seed=41)
    f = tmp_path / "corpus.txt"
    f.write_text("\n".join(src + tgt) + "\n")
    r = CliRunner().invoke(main, ["bench", str(f), "--model", toy_model_dir, "--device", "cpu", "--json"])
    assert r.exit_code == 0, r.output
    res = _json.loads(r.output)
    assert [s["stage"] for s in res["stages"]] == ["tokenize", "encode", "knn (flat)", "mine (flat)"]
    assert [s["items"] for s in res["stages"]] == [600, 600, 600, 600] and res["lines"] == [300, 300]
    assert res["device"] == "cpu"
    for s in res["stages"]:  # the figures agree with each other: items/s is items over seconds
        assert s["per_second"] == pytest.approx(s["items"] / s["seconds"], rel=1e-9)
        # each stage runs in a child process that at least imports torch (> 0.05 GB resident) and stays far
        # below the memory of a machine (a toy corpus of 600 lines)
        assert 0.05 < s["peak_gb"] < 8
    table = CliRunner().invoke(main, ["bench", str(f), "--model", toy_model_dir, "--device", "cpu"])
    assert table.exit_code == 0, table.output
    assert "300 source and 300 target lines" in table.output
    for name in ("tokenize", "encode", "knn (flat)", "mine (flat)"):
        assert re.search(rf"{re.escape(name)}\s.*\b600\b", table.output), name
