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
    assert bad.output == (f"Error: {other}.npy: encodes another text than {sp} (input checksum differs); expected "
                          "the embeddings of that text's lines\n")


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

    from conftest import toy_corpus, write_lines

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
        # each stage's own peak: a child process with at least numpy and the model loaded (> 0.02 GB resident;
        # torch too but for tokenize), far below the memory of a machine (a toy corpus of 600 lines)
        assert 0.02 < s["peak_gb"] < 8
    table = CliRunner().invoke(main, ["bench", str(f), "--model", toy_model_dir, "--device", "cpu"])
    assert table.exit_code == 0, table.output
    assert "300 source and 300 target lines" in table.output
    for name in ("tokenize", "encode", "knn (flat)", "mine (flat)"):
        assert re.search(rf"{re.escape(name)}\s.*\b600\b", table.output), name


def _commands(group=main, path=()):
    """(path of names, command) for every command under ``group``."""
    import click

    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, path + (name,))
        else:
            yield path + (name,), cmd


def _help_sections(text: str) -> dict[str, list[str]]:
    """{heading: [option terms]} of a help page: headings are unindented 'Name:' lines, option terms the
    lines indented by two spaces that start with '-', up to two spaces or the end of the line."""
    sections, heading = {}, None
    for line in text.splitlines():
        if re.fullmatch(r"\S[^:]*:", line):
            heading = line[:-1]
            sections[heading] = []
        elif heading and re.match(r"  -", line):
            sections[heading].append(re.match(r"  (\S+(?: \S+)*)", line).group(1))
    return sections


def test_help_lists_every_option_of_every_command_once_under_its_group():
    import click

    from bitextmine.cli.help import GroupedCommand

    for path, cmd in _commands():
        assert isinstance(cmd, GroupedCommand), path
        sections = _help_sections(run(*path, "--help").output)
        ctx = click.Context(cmd, info_name=path[-1])
        want = {heading: [p.get_help_record(ctx)[0] for p in params if p.get_help_record(ctx)]
                for heading, params in cmd.sections(ctx)}
        assert sections == {h: terms for h, terms in want.items() if terms}, path
        terms = [t for ts in sections.values() for t in ts]
        options = [p for p in cmd.get_params(ctx) if isinstance(p, click.Option) and not p.hidden]
        assert len(terms) == len(set(terms)) == len(options), path  # each option once


def test_mine_names_the_rule_options_it_hides_and_filter_describes_each():
    from bitextmine.cli.common import RULE_NAMES

    rules_help = run("mine", "--help").output.split("\n  --rules ", 1)[1]
    rules_help = " ".join(rules_help.split()).replace("- ", "-")  # joined where click wrapped a flag at its hyphen
    filter_terms = [t.split()[0] for ts in _help_sections(run("filter", "--help").output).values() for t in ts]
    for name in RULE_NAMES:
        flag = "--" + name.replace("_", "-")
        assert flag in rules_help, flag  # named in --rules' help
        assert any(t == flag or t.startswith(flag + " ") or t.startswith(flag + "/") for t in filter_terms), flag
    # accepted by mine all the same
    r = run("mine", "X", "Y", "--min-words", "3")
    assert r.output == "Error: --min-words: needs --rules (the rules apply to mined candidates only with it)\n"


def test_mine_and_train_help_show_the_common_options_first_and_the_rest_in_named_groups():
    mine = _help_sections(run("mine", "--help").output)
    assert list(mine) == ["Options", "Selection", "Parquet and JSONL", "Embeddings", "Search", "Pipeline", "Rules"]
    assert [t.split()[0] for t in mine["Parquet and JSONL"]] == ["--column", "--src-col", "--tgt-col", "--id-col"]
    assert len(mine["Options"]) <= 10 and "--src-lang CODE" in mine["Options"] and "--ids" in mine["Options"]
    assert "--threshold FLOAT" in mine["Selection"] and "--min-prob FLOAT RANGE" in mine["Selection"]
    assert mine["Rules"] == ["--rules"] and "--k INTEGER RANGE" in mine["Search"] and "--work-dir DIR" in mine["Pipeline"]
    assert len(run("mine", "--help").output.splitlines()) < 180  # was 272 with the rule options described
    train = _help_sections(run("train", "--help").output)
    assert list(train) == ["Options", "Data", "Model", "Recipe and loss", "Schedule", "Evaluation", "Second stage", "Run"]
    assert len(train["Options"]) <= 10 and "-o, --out DIR" in train["Options"]


def test_option_groups_must_name_parameters_of_the_command_once():
    import click

    from bitextmine.cli.help import GroupedCommand

    params = [click.Option(["--a"]), click.Option(["--b"])]
    with pytest.raises(ValueError, match=r"unknown parameters \['c'\]"):
        GroupedCommand("x", params=params, option_groups=(("G", ("a", "c")),))
    with pytest.raises(ValueError, match=r"twice \['a'\]"):
        GroupedCommand("x", params=params, option_groups=(("G", ("a",)), ("H", ("a", "b"))))


def test_mine_languages_alone_switch_on_no_rule(tmp_path, toy_model_dir):
    from conftest import toy_corpus, write_lines

    s, t = toy_corpus(n=30, seed=12)
    sp, tp = write_lines(tmp_path / "s.txt", s), write_lines(tmp_path / "t.txt", t)
    base = ["mine", sp, tp, "--model", toy_model_dir, "--threshold", "0", "--min-z", "0"]
    plain = run(*base, "-q")
    assert plain.exit_code == 0 and len(plain.output.splitlines()) >= 20
    langs = run(*base, "-q", "--src-lang", "en", "--tgt-lang", "de")  # every side has more than 1 word
    assert langs.exit_code == 0 and langs.output == plain.output
    ruled = CliRunner().invoke(main, base + ["--max-words", "1", "--rules", "--src-lang", "en", "--tgt-lang", "de"])
    assert ruled.exit_code == 0 and ruled.stdout == "" and "dropped by rules: too-long" in ruled.stderr


def test_mine_output_that_cannot_be_written_is_refused_before_any_work(tmp_path, toy_model_dir):
    from conftest import toy_corpus, write_lines

    s, t = toy_corpus(n=20, seed=13)
    sp, tp = write_lines(tmp_path / "s.txt", s), write_lines(tmp_path / "t.txt", t)
    folder, work = tmp_path / "out", tmp_path / "work"
    folder.mkdir()
    r = run("mine", sp, tp, "--model", toy_model_dir, "-o", str(folder), "--work-dir", str(work), "-q")
    assert r.exit_code == 1
    assert r.output == f"Error: --output {folder}: is a directory; expected the name of a file to write\n"
    assert not work.exists() and list(folder.iterdir()) == [] and not os.path.exists(f"{folder}.partial")
    for out in (tmp_path / "none" / "o.tsv", tmp_path / "s.txt" / "o.tsv"):  # no such folder; a file, not a folder
        r = run("mine", sp, tp, "--model", toy_model_dir, "-o", str(out), "--work-dir", str(work), "-q")
        assert r.exit_code == 1 and not work.exists()
        assert r.output == f"Error: --output {out}: no folder {out.parent}; expected a file in an existing folder\n"


def test_score_output_in_a_missing_folder_is_one_line(tmp_path, toy_model_dir):
    out = tmp_path / "none" / "o.tsv"
    r = run("score", "--model", toy_model_dir, "-o", str(out), "-q", input="a\tb\n")
    assert r.exit_code == 1
    assert r.output == f"Error: --output {out}: no folder {out.parent}; expected a file in an existing folder\n"


def test_encode_output_and_plots_that_cannot_be_written_are_one_line(tmp_path, toy_model_dir):
    from conftest import toy_corpus, write_lines

    s, t = toy_corpus(n=20, seed=14)
    sp = write_lines(tmp_path / "s.txt", s)
    gold = write_lines(tmp_path / "gold.tsv", [f"{a}\t{b}" for a, b in zip(s, t)])
    folder, plot = tmp_path / "d", tmp_path / "none" / "p.png"
    folder.mkdir()
    r = run("encode", sp, "-o", str(folder), "--model", toy_model_dir, "-q")
    assert r.exit_code == 1
    assert r.output == f"Error: --output {folder}: is a directory; expected the name of a file to write\n"
    assert list(folder.iterdir()) == [] and not os.path.exists(f"{folder}.partial")
    r = run("calibrate", gold, "--model", toy_model_dir, "--plot", str(plot))
    assert r.exit_code == 1
    assert r.output == f"Error: --plot {plot}: no folder {plot.parent}; expected a file in an existing folder\n"


@pytest.mark.parametrize("option", ["-o", "--rejects", "--stats"])
def test_filter_outputs_that_cannot_be_written_are_refused_before_any_output(tmp_path, option):
    data = tmp_path / "in.tsv"
    data.write_text("ein Haus\ta house\n")
    paths = {"-o": tmp_path / "kept.tsv", "--rejects": tmp_path / "rejects.tsv", "--stats": tmp_path / "stats.json"}
    paths[option] = tmp_path / "none" / "x"
    args = [a for o, p in paths.items() for a in (o, str(p))]
    r = run("filter", str(data), "--score", "none", "-q", *args)
    name = "--output" if option == "-o" else option
    assert r.exit_code == 1
    assert r.output == f"Error: {name} {paths[option]}: no folder {tmp_path / 'none'}; expected a file in an existing folder\n"
    assert sorted(os.listdir(tmp_path)) == ["in.tsv"]  # nothing written


def test_a_finished_result_that_cannot_be_renamed_is_kept(tmp_path):
    from bitextmine.cli.common import atomic_output
    from bitextmine.errors import ConfigError

    target = tmp_path / "d"
    target.mkdir()  # the rename onto a directory fails after the result is complete
    with pytest.raises(ConfigError, match=rf"the result is in {re.escape(str(target))}\.partial$"):
        with atomic_output(str(target)) as f:
            f.write("the result\n")
    assert (tmp_path / "d.partial").read_text() == "the result\n"
    with pytest.raises(RuntimeError):  # a block that fails leaves nothing
        with atomic_output(str(tmp_path / "e.tsv")) as f:
            f.write("half")
            raise RuntimeError
    assert sorted(os.listdir(tmp_path)) == ["d", "d.partial"]


def test_mine_resume_without_work_dir_is_one_line(tmp_path):
    r = run("mine", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "--resume")
    assert r.exit_code == 1
    assert r.output == "Error: --resume needs --work-dir DIR, the work directory of the run to continue\n"


def test_options_a_command_would_ignore_are_refused(tmp_path, toy_model_dir):
    """Rule options without --rules, embedding format options without --src-emb/--tgt-emb, and training options
    with --second-stage-only were accepted and ignored; each is a one-line error naming the options."""
    de, en = "examples/de.txt", "examples/en.txt"
    r = run("mine", de, en, "--model", toy_model_dir, "-q", "--max-words", "1", "--no-digits")
    assert r.exit_code == 1
    assert r.output == ("Error: --max-words, --digits/--no-digits: need --rules (the rules apply to mined candidates "
                        "only with it)\n")
    r = run("mine", de, en, "--model", toy_model_dir, "-q", "--dim", "8")
    assert r.exit_code == 1 and r.output == "Error: --dim: needs --src-emb or --tgt-emb (how those files are stored)\n"
    r = run("train", "--second-stage-only", "--out", str(tmp_path / "m"), "--src", de, "--tgt", en, "--epochs", "3",
            "--lr", "0.1")
    assert r.exit_code == 1
    assert r.output == ("Error: --epochs, --lr: need training a model, not --second-stage-only (which reads the "
                        "corpora, --out and --seed)\n")
    assert not os.path.exists(tmp_path / "m")


@pytest.mark.parametrize("args, message", [
    (["mine", "DE", "EN", "--index", "flat", "--nprobe", "8"], "--nprobe: needs --index ivf, ivfpq or auto"),
    (["mine", "DE", "EN", "--index", "ivf", "--pq-m", "8"], "--pq-m: needs --index ivfpq"),
    (["mine", "DE", "EN", "--src-emb", "DE.npy", "--tgt-emb", "EN.npy", "--fp16"], "--fp16: needs --emb-format raw"),
    (["eval", "tatoeba", "DE", "EN", "--dim", "8"], "--dim: needs --src-emb and --tgt-emb"),
    (["eval", "bucc", "DE", "EN", "EN", "--oracle", "--index", "flat", "--nlist", "4"], "--nlist: needs --index ivf"),
    (["mine", "DE", "EN", "--rules", "--langid", "full"], "--langid: needs --src-lang or --tgt-lang"),
    (["filter", "TSV", "--score", "none", "--no-script", "--min-script", "0.5", "--tgt-lang", "en"],
     "--min-script: needs --script"),
    (["filter", "TSV", "--score", "none", "--max-ratio", "0", "--ratio-min-bytes", "5"], "--ratio-min-bytes: needs "
                                                                                          "--max-ratio above 0"),
    (["filter", "TSV", "--score", "none", "--tgt-lang", "en", "--langid", "off", "--langid-model", "fasttext"],
     "--langid-model: needs --langid probs"),
    (["filter", "TSV", "--score", "none", "--tgt-lang", "en", "--langid-min-prob", "0.5"],
     "--langid-min-prob: needs --langid pair or full"),
    (["filter", "TSV", "--score", "none", "--tgt-lang", "en", "--langid", "full", "--langid-max-prob", "*=0.5"],
     "--langid-max-prob: needs --langid probs"),
    (["mine", "DE", "EN", "--column", "text2"], "--column: needs a Parquet or JSONL input"),
    (["encode", "DE", "-o", "OUT.npy", "--column", "text2"], "--column: needs a Parquet or JSONL input"),
    (["calibrate", "--src", "DE", "--tgt", "EN", "--scol", "2"], "--scol: needs GOLD"),
    (["calibrate", "--src", "DE", "--tgt", "EN", "--k", "2"], "--k: needs --score margin"),
    (["train", "--src", "DE", "--tgt", "EN", "--out", "OUT", "--tcol", "3"], "--tcol: needs --tsv"),
    (["train", "--src", "DE", "--tgt", "EN", "--out", "OUT", "--spm-model", "SPM", "--vocab-size", "500"],
     "--vocab-size: needs a SentencePiece model trained here, not --spm-model"),
    (["train", "--src", "DE", "--tgt", "EN", "--out", "OUT", "--init-from", "MODEL", "--init-scale", "0.5"],
     "--init-scale: needs a model trained from scratch, not --init-from"),
    (["train", "--src", "DE", "--tgt", "EN", "--out", "OUT", "--untrained", "--lr", "0.1"], "--lr: needs training"),
    (["train", "--src", "DE", "--tgt", "EN", "--out", "OUT", "--loss", "hinge", "--scale", "3"],
     "--scale: needs --loss infonce"),
    (["train", "--src", "DE", "--tgt", "EN", "--out", "OUT", "--loss", "infonce", "--hinge-weight", "0", "--margin",
      "0.9"], "--margin: needs --loss hinge, or a --hinge-weight above 0"),
    (["train", "--src", "DE", "--tgt", "EN", "--out", "OUT", "--shuffle-words", "0.5"],
     "--shuffle-words: needs --encoder blstm-sp"),
    (["train", "--src", "DE", "--tgt", "EN", "--out", "OUT", "--encoder", "blstm-sp", "--dropout", "0.1"],
     "--dropout: needs an averaging encoder"),
    (["train", "--src", "DE", "--tgt", "EN", "--out", "OUT", "--sts-min-score", "4"], "--sts-min-score: needs --sts-pairs"),
    (["train", "--src", "DE", "--tgt", "EN", "--out", "OUT", "--dev-pairs", "0", "--eval-every", "5"],
     "--eval-every: needs dev data"),
])
def test_options_ignored_in_some_combinations_are_refused(tmp_path, toy_model_dir, args, message):
    """Each option here was accepted and changed nothing in this combination (same bytes out, exit status 0)."""
    de, en = "examples/de.txt", "examples/en.txt"
    tsv = tmp_path / "p.tsv"
    tsv.write_text("a b c\tx y z\n")
    np.save(tmp_path / "de.npy", np.ones((30, 4), np.float32))
    np.save(tmp_path / "en.npy", np.ones((30, 4), np.float32))
    names = {"DE": de, "EN": en, "TSV": str(tsv), "DE.npy": str(tmp_path / "de.npy"), "EN.npy": str(tmp_path / "en.npy"),
             "OUT.npy": str(tmp_path / "o.npy"), "OUT": str(tmp_path / "m"), "MODEL": toy_model_dir,
             "SPM": os.path.join(toy_model_dir, "sentencepiece.model")}
    r = run(*[names.get(a, a) for a in args])
    assert r.exit_code == 1 and r.output.startswith("Error: " + message) and r.output.count("\n") == 1, r.output
    assert not os.path.exists(tmp_path / "m") and not os.path.exists(tmp_path / "o.npy")

@pytest.mark.parametrize("args", [
    ["mine", "MISSING", "EN", "--column", "text", "--index", "flat", "--nprobe", "32", "--pq-m", "0", "--dim", "0",
     "--min-words", "1", "--no-digits", "--digits"],
    ["encode", "MISSING", "-o", "OUT.npy", "--column", "text"],
    ["calibrate", "--src", "MISSING", "--tgt", "EN", "--k", "4"],
])
def test_options_given_at_their_default_where_they_do_not_apply_are_accepted(tmp_path, args):
    """A wrapper script that always passes an option at its default value is not refused for it (a value other
    than the default still is: the test above); the run goes on to the next check, here the missing input."""
    names = {"MISSING": str(tmp_path / "missing.txt"), "EN": "examples/en.txt", "OUT.npy": str(tmp_path / "o.npy")}
    r = run(*[names.get(a, a) for a in args])
    assert r.exit_code == 1 and r.output.startswith(f"Error: {tmp_path / 'missing.txt'}: no such file"), r.output


def test_a_bench_stage_reports_its_own_peak_not_its_parents():
    """A program started by a large process keeps that process's peak in ru_maxrss; a stage's peak is its own."""
    held = np.ones(700 * 2**20 // 8)  # this process holds 700 MiB more when the child starts
    code = ("import resource; from bitextmine.bench import own_peak_bytes; "
            "print(own_peak_bytes(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)")
    own, inherited = map(int, subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                             check=True).stdout.split())
    assert held.sum() > 0 and inherited > 700 * 2**20 > 4 * own


def test_bench_names_each_directions_index(toy_model, tmp_path):
    """With --index auto, each direction's index follows the size of the side it searches, as mining's does."""
    from conftest import toy_corpus, write_lines

    from bitextmine.bench import run_bench
    from bitextmine.config import MineConfig

    src, tgt = toy_corpus(300, seed=5)
    paths = [write_lines(tmp_path / "s.txt", src), write_lines(tmp_path / "t.txt", tgt[:200])]
    report = run_bench(paths, toy_model, device="cpu", mine=MineConfig(auto_flat_max=250), stages=("knn",))
    assert [r.stage for r in report.results] == ["knn (flat/ivf)"]


def test_an_output_that_is_an_input_is_refused_and_the_input_kept(tmp_path, toy_model_dir):
    from conftest import toy_corpus, write_lines

    s, t = toy_corpus(n=30, seed=4)
    src, tgt = write_lines(tmp_path / "s.txt", s), write_lines(tmp_path / "t.txt", t)
    pairs = write_lines(tmp_path / "p.tsv", [f"{a}\t{b}" for a, b in zip(s, t)])
    before = {p: open(p, "rb").read() for p in (src, tgt, pairs)}
    link = tmp_path / "also-s.txt"
    os.symlink(src, link)
    m = ["--model", toy_model_dir]
    cases = [(["encode", src, "-o", src, *m], "--output .*s.txt: is the input"),
             (["encode", src, tgt, "-o", str(link), *m], "is the input .*s.txt"),
             (["mine", src, tgt, "-o", tgt, *m], "--output .*t.txt: is the input"),
             (["score", pairs, "-o", pairs, *m], "--output .*p.tsv: is the input"),
             (["filter", pairs, "-o", str(tmp_path / "kept.tsv"), "--rejects", pairs, "--score", "none"],
              "--rejects .*p.tsv: is the input"),
             (["encode", src, "-o", "-", *m], "--output -: embeddings are written to a file"),
             (["encode", src, "-o", pairs, "--chunk-lines", "10", *m], "--output .*p.tsv: is a file; --chunk-lines")]
    for args, says in cases:
        r = CliRunner().invoke(main, args)
        assert r.exit_code != 0 and re.search(says, r.output), (args, r.output)
    assert {p: open(p, "rb").read() for p in (src, tgt, pairs)} == before
    assert not os.path.exists("-")


def test_an_output_among_an_inputs_shards_or_on_standard_input_is_refused(tmp_path, monkeypatch):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    monkeypatch.chdir(tmp_path)
    os.mkdir("data")
    for i in range(2):
        pq.write_table(pa.table({"de": [f"Haus {i}"], "en": [f"house {i}"]}), f"data/part-{i}.parquet")
    base = ["filter", "--src-col", "de", "--tgt-col", "en", "--score", "none", "--langid", "off"]
    for inp, out, says in (("data", "data/part-1.parquet", "is the input data/part-1.parquet \\(of data\\)"),
                           ("data/*.parquet", "data/clean.parquet", "would be a shard of the input data/\\*.parquet"),
                           ("data", "data/clean.parquet", "would be a shard of the input data")):
        r = CliRunner().invoke(main, [*base, inp, "-o", out])
        assert r.exit_code != 0 and re.search(says, r.output), (inp, out, r.output)
    assert sorted(os.listdir("data")) == ["part-0.parquet", "part-1.parquet"]
    with open("p.tsv", "w") as f:
        f.write("Das Haus.\tThe house.\n")
    script = ("import sys; from bitextmine.cli import main; sys.argv = ['bitextmine', 'filter', '-o', 'p.tsv', "
              "'--score', 'none']; main()")
    with open("p.tsv", "rb") as stdin:  # filter -o p.tsv < p.tsv
        r = subprocess.run([sys.executable, "-c", script], stdin=stdin, capture_output=True, text=True)
    assert r.returncode != 0 and "--output p.tsv: is the input standard input" in r.stderr, r.stderr
    assert open("p.tsv").read() == "Das Haus.\tThe house.\n"


def test_options_other_than_their_default_that_the_input_leaves_unread_are_refused(tmp_path):
    (tmp_path / "t.jsonl").write_text('{"de": "Das Haus.", "en": "The house."}\n', encoding="utf-8")
    ex = os.path.join(os.path.dirname(__file__), "..", "examples")
    r = CliRunner().invoke(main, ["mine", os.path.join(ex, "de.txt"), os.path.join(ex, "en.txt"), "--column", "txt"])
    assert r.exit_code != 0 and "--column: needs a Parquet or JSONL input" in r.output
    table = ["filter", str(tmp_path / "t.jsonl"), "--src-col", "de", "--tgt-col", "en", "--score", "none"]
    r = CliRunner().invoke(main, [*table, "--scol", "2"])
    assert r.exit_code != 0 and "--scol: needs a TSV input" in r.output
    # a check turned off asks nothing of a language: accepted without one
    r = CliRunner().invoke(main, [*table, "--langid", "off", "--no-script"])
    assert r.exit_code == 0 and "1 kept" in r.output
    r = CliRunner().invoke(main, [*table, "--langid", "full"])
    assert r.exit_code != 0 and "--langid: needs --src-lang or --tgt-lang" in r.output


@pytest.mark.parametrize("args, option", [
    (["mine", "A", "B", "--threshold", "nan"], "--threshold"),
    (["mine", "A", "B", "--min-prob", "nan"], "--min-prob"),
    (["mine", "A", "B", "--min-z", "inf"], "--min-z"),
    (["filter", "A", "--min-score", "nan"], "--min-score"),
    (["filter", "A", "--max-ratio", "nan"], "--max-ratio"),
    (["train", "--src", "A", "--tgt", "B", "--out", "O", "--lr", "nan"], "--lr"),
])
def test_numeric_options_refuse_nan_and_infinities(args, option):
    r = run(*args)
    assert r.exit_code == 2 and f"Invalid value for '{option}'" in r.output and "is not a finite number" in r.output


def test_both_sides_from_standard_input_is_refused():
    r = run("mine", "-", "-", input="a\nb\n")
    assert r.exit_code == 1 and r.output == ("Error: SRC and TGT are both standard input ('-'): one stream cannot give "
                                             "both sides; give at least one of them as a file\n")


def test_a_work_dir_that_is_a_file_is_a_one_line_error(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    r = run("mine", "examples/de.txt", "examples/en.txt", "--work-dir", str(f))
    assert r.exit_code == 1 and r.output == f"Error: --work-dir {f}: not a directory; expected a directory (new or of " \
                                            "an earlier run)\n"


def test_what_the_system_refuses_is_one_line_naming_the_file(monkeypatch, tmp_path):
    """Disk full (ENOSPC) wherever it strikes: the file and the system's reason, no traceback."""
    import errno

    import bitextmine.mining as mining

    def full(*a, **kw):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "w" / "emb.npy"))

    monkeypatch.setattr(mining, "mine_files", full)
    r = run("mine", "examples/de.txt", "examples/en.txt", "-q")
    assert r.exit_code == 1 and r.output == f"Error: {tmp_path / 'w' / 'emb.npy'}: No space left on device\n"


def test_ids_a_tsv_cannot_carry_are_refused_before_any_row_is_written(tmp_path):
    src = tmp_path / "de.jsonl"
    src.write_text('{"id": "a\\tb", "text": "Das Haus ist groß."}\n{"id": "c", "text": "Der Hund schläft."}\n')
    tgt = tmp_path / "en.jsonl"
    tgt.write_text('{"id": "x", "text": "The house is big."}\n{"id": "y", "text": "The dog sleeps."}\n')
    r = run("mine", str(src), str(tgt), "--id-col", "id", "--threshold", "0", "--min-z", "0", "-q")
    assert r.exit_code == 1 and r.output.startswith("Error: --id-col: the id 'a\\tb' holds a tab") and \
        r.output.count("\n") == 1


@pytest.mark.slow  # subprocesses that load the bundled model
def test_output_is_utf8_under_the_c_locale():
    env = {**os.environ, "LANG": "C", "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0",
           "PYTHONIOENCODING": ""}
    p = subprocess.run([sys.executable, "-m", "bitextmine", "mine", "examples/de.txt", "examples/en.txt", "-q"],
                       capture_output=True, env=env)
    assert p.returncode == 0, p.stderr
    assert "Das Passwort muss mindestens zwölf Zeichen lang sein." in p.stdout.decode("utf-8")


@pytest.mark.slow
@pytest.mark.parametrize("sig, code, line", [("SIGTERM", 143, "Error: terminated"),
                                              ("SIGHUP", 129, "Error: terminated (the terminal closed: SIGHUP)")])
def test_sigterm_ends_a_run_with_one_line_and_leaves_nothing_behind(tmp_path, sig, code, line):
    """Stopped while it encodes: exit 128 + the signal with one line, its temporary work directory and partial
    output gone (SIGHUP, a terminal closed, left both)."""
    import signal
    import time

    from conftest import toy_corpus, write_lines

    s, t = toy_corpus(60000, seed=3)
    a, b = write_lines(tmp_path / "a.txt", s), write_lines(tmp_path / "b.txt", t)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "out.tsv"
    # started as from a terminal, with SIGHUP at its default: under nohup the suite and its children ignore it, and
    # so does mine, by design (it stays ignored)
    p = subprocess.Popen([sys.executable, "-m", "bitextmine", "mine", a, b, "-o", str(out), "-q"],
                         env={**os.environ, "TMPDIR": str(tmp)}, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not list(tmp.glob("bitextmine-*")) and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    assert p.poll() is None, "the run ended before its work directory could be seen"
    time.sleep(0.5)
    p.send_signal(getattr(signal, sig))
    err = p.communicate(timeout=120)[1]
    assert p.returncode == code and err.strip().splitlines()[-1] == line, err
    assert not list(tmp.glob("bitextmine-*")) and not out.exists() and not (tmp_path / "out.tsv.partial").exists()


def test_a_command_run_in_process_leaves_the_signal_handlers_as_it_found_them(tmp_path):
    """The commands turn SIGTERM into a clean stop while they run; left installed, the handler was inherited by
    every process a caller forked afterwards (a test suite's worker pools among them)."""
    import signal

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)
    p = tmp_path / "in.tsv"
    p.write_text("The house is small.\tDas Haus ist klein.\n")
    r = CliRunner().invoke(main, ["filter", str(p), "--score", "none"])
    assert r.exit_code == 0, r.output
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)) == before
