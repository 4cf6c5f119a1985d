"""Parquet and JSONL inputs and Parquet outputs (bitextmine.tabular, and the commands that read and write them)."""

from __future__ import annotations

import gzip
import io
import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import shared_path, toy_corpus, write_lines

from bitextmine.cli import main
from bitextmine.config import ColumnsConfig, MineConfig, PipelineConfig
from bitextmine.errors import ConfigError, CorpusError
from bitextmine.pipeline import mine_files
from bitextmine import tabular

pa = pytest.importorskip("pyarrow", reason="the parquet extra: pip install 'bitextmine[parquet]' (.ci/run installs it)")
pq = pytest.importorskip("pyarrow.parquet")


def _parquet(path, columns: dict, row_group: int = 4) -> str:
    pq.write_table(pa.table(columns), str(path), row_group_size=row_group)
    return str(path)


def _jsonl(path, rows: list, opener=open) -> str:
    with opener(str(path), "wt", encoding="utf-8") as f:
        for r in rows:
            f.write((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n")
    return str(path)


def _shards(folder, texts: list[str], ids: list, per_file: int, row_group: int) -> str:
    """Parquet shards part-000.parquet, ... of ``per_file`` rows in row groups of ``row_group``."""
    os.makedirs(folder, exist_ok=True)
    for k, a in enumerate(range(0, len(texts), per_file)):
        _parquet(os.path.join(folder, f"part-{k:03d}.parquet"),
                 {"text": texts[a:a + per_file], "id": ids[a:a + per_file]}, row_group)
    return str(folder)


# --- reading -----------------------------------------------------------------------------------------------

def test_parquet_is_read_by_row_group(tmp_path):
    rng = np.random.default_rng(0)
    texts = [f"line {i} {rng.integers(1000)}" for i in range(10)]
    p = _parquet(tmp_path / "a.parquet", {"text": texts, "id": list(range(100, 110))}, row_group=4)
    batches = list(tabular.iter_batches(p, ["text"], "id"))
    assert [(b.first_row, len(b)) for b in batches] == [(1, 4), (5, 4), (9, 2)]
    assert [t for b in batches for t in b.columns["text"]] == texts
    assert [i for b in batches for i in b.columns["id"]] == list(range(100, 110))
    assert tabular.table_kind(p) == "parquet" and tabular.table_kind(str(tmp_path / "a.txt")) is None


@pytest.mark.parametrize("opener, suffix", [(open, ".jsonl"), (gzip.open, ".jsonl.gz")])
def test_jsonl_plain_and_gzip(tmp_path, opener, suffix):
    rows = [{"text": f"Zeile {i} ä", "id": f"r{i}", "other": i} for i in range(20000)]  # more than one batch
    p = _jsonl(tmp_path / f"a{suffix}", rows, opener)
    assert list(tabular.iter_column(p, "text")) == [r["text"] for r in rows]
    assert list(tabular.tsv_lines(p, ["text"], "id"))[:2] == ["r0\tZeile 0 ä", "r1\tZeile 1 ä"]


def test_folder_and_glob_of_shards_in_name_order(tmp_path):
    texts = [f"s{i}" for i in range(23)]
    folder = _shards(tmp_path / "d", texts, list(range(23)), per_file=10, row_group=3)
    (tmp_path / "d" / "_SUCCESS").write_text("")  # a marker file beside the shards is not a shard
    assert list(tabular.iter_column(folder, "text")) == texts
    assert list(tabular.iter_column(str(tmp_path / "d" / "part-*.parquet"), "text")) == texts
    _jsonl(tmp_path / "d" / "x.jsonl", [{"text": "a"}])
    with pytest.raises(CorpusError, match="both Parquet and JSONL"):
        list(tabular.iter_column(folder, "text"))
    with pytest.raises(CorpusError, match=r"nothing\*\.parquet: no file matches"):
        list(tabular.iter_column(str(tmp_path / "nothing*.parquet"), "text"))


def _error(path, columns, id_col=None) -> str:
    with pytest.raises(CorpusError) as e:
        list(tabular.iter_batches(path, columns, id_col))
    assert "\n" not in str(e.value)
    return str(e.value)


def test_parquet_errors_name_file_row_and_column(tmp_path):
    p = _parquet(tmp_path / "a.parquet", {"text": ["a", "b", "c", "d", None, "f"], "n": [1, 2, 3, 4, 5, 6],
                                          "i": ["x", None, "z", "w", "v", "u"]}, row_group=3)
    assert _error(p, ["text"]) == (f"{p} row 5 column 'text': null; expected a text on every row "
                                   "(drop or fill the nulls first)")
    assert _error(p, ["nope"]).startswith(f"{p} row 1 column 'nope': no such column (columns: text, n, i)")
    assert _error(p, ["n"]) == f"{p} row 1 column 'n': type int64; expected a string column"
    assert _error(p, ["n"], "i").startswith(f"{p} row 1 column 'n': type int64")
    assert _error(_parquet(tmp_path / "b.parquet", {"text": ["a", "b"], "i": ["x", None]}), ["text"], "i") == (
        f"{tmp_path / 'b.parquet'} row 2 column 'i': null; expected a id on every row (drop or fill the nulls first)")
    bad = tmp_path / "c.parquet"
    bad.write_bytes(b"not parquet at all")
    assert _error(str(bad), ["text"]).startswith(f"{bad}: not a readable Parquet file")


def test_jsonl_errors_name_file_line_and_column(tmp_path):
    def err(rows, columns=("text",), id_col=None):
        return _error(_jsonl(tmp_path / "a.jsonl", rows), list(columns), id_col)

    p = tmp_path / "a.jsonl"
    assert err([{"text": "a"}, "{bad json"]).startswith(f"{p} line 2: invalid JSON (")
    assert err([{"text": "a"}, ""]) == f"{p} line 2: an empty line; expected one JSON object per line"
    assert err(['["text"]']) == f"{p} line 1: an array; expected one JSON object per line"
    assert err([{"text": "a"}, {"text": None}]) == (f"{p} line 2 column 'text': null; expected a text on every line "
                                                    "(drop or fill the nulls first)")
    assert err([{"text": 3}]) == f"{p} line 1 column 'text': a number; expected a string"
    assert err([{"txt": "a"}]).startswith(f"{p} line 1 column 'text': no such key (keys: txt)")
    assert err([{"text": "a", "id": 1.5}], id_col="id") == f"{p} line 1 column 'id': a number; expected a string or integer"
    assert list(tabular.iter_batches(_jsonl(p, [{"text": "a", "id": 7}]), ["text"], "id"))[0].columns["id"] == [7]


def test_tsv_lines_refuse_a_tab_or_line_break(tmp_path):
    p = _parquet(tmp_path / "a.parquet", {"s": ["ok", "a\tb"], "t": ["x", "y"]})
    with pytest.raises(CorpusError, match=r"a.parquet row 2 column 's': a tab or line break"):
        list(tabular.tsv_lines(p, ["s", "t"]))
    assert list(tabular.tsv_lines(p, ["s"])) == ["ok", "a\tb"]  # one column: a tab is text


# --- commands ----------------------------------------------------------------------------------------------

def test_encode_column_equals_the_text_file(tmp_path, toy_model_dir):
    src, _ = toy_corpus(n=50, seed=3)
    txt = write_lines(tmp_path / "a.txt", src)
    pqf = _parquet(tmp_path / "a.parquet", {"id": list(range(50)), "sent": src}, row_group=7)
    r = CliRunner()
    for inp, extra, out in ((txt, [], "t.npy"), (pqf, ["--column", "sent"], "p.npy")):
        res = r.invoke(main, ["encode", inp, "-o", str(tmp_path / out), "--model", toy_model_dir, "-q", *extra])
        assert res.exit_code == 0, res.output
    assert np.array_equal(np.load(tmp_path / "t.npy"), np.load(tmp_path / "p.npy"))
    for name in ("t.npy.json", "p.npy.json"):  # the same text: the same checksum in the sidecar
        side = json.load(open(tmp_path / name))
        assert side.get("input_sha256") or side.get("text_sha256")
    sha = [json.load(open(tmp_path / n)).get("input_sha256") for n in ("t.npy.json", "p.npy.json")]
    assert sha[0] == sha[1]
    res = r.invoke(main, ["encode", pqf, "-o", str(tmp_path / "x.npy"), "--model", toy_model_dir, "-q"])
    assert res.exit_code == 1 and res.output.startswith(f"Error: {pqf} row 1 column 'text': no such column")


def _pairs_file(tmp_path, n=40):
    src, tgt = toy_corpus(n=n, seed=5)
    src[7], tgt[7] = src[3], tgt[3]  # a repeated pair
    return src, tgt, _parquet(tmp_path / "pairs.parquet", {"id": [f"p{i}" for i in range(n)], "s": src, "t": tgt},
                              row_group=6)


def test_score_pairs_from_parquet_equal_the_tsv(tmp_path, toy_model_dir):
    src, tgt, p = _pairs_file(tmp_path)
    tsv = write_lines(tmp_path / "pairs.tsv", [f"{s}\t{t}" for s, t in zip(src, tgt)])
    r = CliRunner()
    want = r.invoke(main, ["score", tsv, "--model", toy_model_dir, "-q"]).output
    got = r.invoke(main, ["score", p, "--src-col", "s", "--tgt-col", "t", "--model", toy_model_dir, "-q"]).output
    assert got == want and got.count("\n") == 40
    with_id = r.invoke(main, ["score", p, "--src-col", "s", "--tgt-col", "t", "--id-col", "id", "--model",
                              toy_model_dir, "-q", "--margin", "ratio"]).output.splitlines()
    assert [line.split("\t")[0] for line in with_id] == [f"p{i}" for i in range(40)]
    res = r.invoke(main, ["score", p, "--model", toy_model_dir, "-q"])
    assert res.exit_code == 1 and "needs --src-col NAME and --tgt-col NAME" in res.output


def test_filter_writes_parquet_with_typed_columns(tmp_path, toy_model_dir):
    src, tgt, p = _pairs_file(tmp_path)
    out, rej = tmp_path / "kept.parquet", tmp_path / "rej.parquet"
    res = CliRunner().invoke(main, ["filter", p, "--src-col", "s", "--tgt-col", "t", "--id-col", "id", "-o", str(out),
                                    "--rejects", str(rej), "--model", toy_model_dir, "--workers", "1", "-q"])
    assert res.exit_code == 0, res.output
    kept, rejected = pq.read_table(out), pq.read_table(rej)
    assert kept.schema.names == ["id", "s", "t", "score"] and rejected.schema.names == ["id", "s", "t", "reason", "raw"]
    assert str(kept.schema.field("score").type) == "double" and str(rejected.schema.field("reason").type) == "string"
    assert kept.num_rows + rejected.num_rows == 40
    assert rejected.to_pydict()["id"] == ["p7"] and rejected.to_pydict()["reason"] == ["duplicate-pair"]
    assert kept.column("s").to_pylist() == [s for i, s in enumerate(src) if i != 7]
    assert np.isfinite(kept.column("score").to_numpy()).all()
    tsv = CliRunner().invoke(main, ["filter", p, "--src-col", "s", "--tgt-col", "t", "--model", toy_model_dir,
                                    "--workers", "1", "-q"]).output.splitlines()
    assert [float(line.split("\t")[2]) for line in tsv] == kept.column("score").to_pylist()


@pytest.mark.parametrize("command", ["filter", "score", "mine"])
def test_column_options_that_do_not_fit_the_input_are_refused(tmp_path, toy_model_dir, command):
    """Named columns for a text file, or column numbers for a Parquet input, would be ignored: a TSV of id, source
    and target filtered with --src-col/--tgt-col/--id-col paired the id with the source and rejected every line.
    Each command refuses them in one line, before any output."""
    src, tgt, p = _pairs_file(tmp_path)
    tsv = write_lines(tmp_path / "pairs.tsv", [f"p{i}\t{s}\t{t}" for i, (s, t) in enumerate(zip(src, tgt))])
    out = tmp_path / "out.tsv"
    base = ["--model", toy_model_dir, "-q", "-o", str(out)]
    r = CliRunner()
    if command == "mine":
        s_txt, t_txt = write_lines(tmp_path / "s.txt", src), write_lines(tmp_path / "t.txt", tgt)
        res = r.invoke(main, ["mine", s_txt, t_txt, "--src-col", "de", *base])
        assert res.exit_code == 1
        assert res.output == (f"Error: {s_txt}: --src-col de needs a Parquet or JSONL input; a text file has no "
                              "columns\n")
    else:
        res = r.invoke(main, [command, tsv, "--src-col", "s", "--tgt-col", "t", "--id-col", "id", *base])
        assert res.exit_code == 1
        assert res.output == (f"Error: {tsv}: --src-col s, --tgt-col t, --id-col id: named columns need a Parquet or "
                              "JSONL input; a text file's pairs are its tab-separated columns (filter: --scol and --tcol; "
                              "score: the first two)\n")
    assert not out.exists()
    if command == "filter":
        res = r.invoke(main, ["filter", p, "--src-col", "s", "--tgt-col", "t", "--scol", "2", "--tcol", "3", *base])
        assert res.exit_code == 1 and "--scol, --tcol: need a TSV input" in res.output


def test_filter_annotate_parquet_from_a_tsv(tmp_path):
    tsv = write_lines(tmp_path / "a.tsv", ["a b c\tx y z", "same\tsame", "d e f\tu v w"])
    out = tmp_path / "o.parquet"
    res = CliRunner().invoke(main, ["filter", tsv, "--score", "none", "--annotate", "-o", str(out), "--workers", "1"])
    assert res.exit_code == 0, res.output
    t = pq.read_table(out).to_pydict()
    assert t == {"col1": ["a b c", "same", "d e f"], "col2": ["x y z", "same", "u v w"],
                 "reason": ["keep", "identical", "keep"], "raw": [None, None, None]}  # raw: lines not UTF-8 only


@pytest.mark.parametrize("first", ["kept", "rejected", "rejected, annotated"])
def test_a_byte_order_mark_is_no_part_of_the_first_parquet_value(tmp_path, first):
    line1 = "a b c\tx y z" if first == "kept" else "same\tsame"
    tsv = tmp_path / "a.tsv"
    tsv.write_bytes(b"\xef\xbb\xbf" + f"{line1}\nd e f\tu v w\n".encode())
    out, rej = tmp_path / "o.parquet", tmp_path / "r.parquet"
    where = ["--annotate"] if "annotated" in first else ["--rejects", str(rej)]  # annotate: rejects in the output
    res = CliRunner().invoke(main, ["filter", str(tsv), "--score", "none", "-o", str(out), "--workers", "1", *where])
    assert res.exit_code == 0, res.output
    for path in [out] * (first != "rejected") + [rej] * (first == "rejected"):  # the Parquet file holding line 1
        assert pq.read_table(path).to_pydict()["col1"][0] == line1.split("\t")[0]


def test_an_id_column_that_is_also_a_text_column_is_refused(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"en": "a", "de": "b"}\n')
    for cmd in ("filter", "score"):
        res = CliRunner().invoke(main, [cmd, str(path), "--src-col", "en", "--tgt-col", "de", "--id-col", "en"])
        assert res.exit_code != 0 and "--src-col and --id-col both name the column 'en'" in res.output, res.output

# --- mining: the staged pipeline -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    d = tmp_path_factory.mktemp("tab")
    src, tgt = toy_corpus(n=120, seed=11)
    s_lines = src[:90] + [src[4], src[40]] + src[90:110]
    t_lines = tgt[:60][::-1] + [tgt[2]] + tgt[110:120]
    return d, s_lines, t_lines, write_lines(d / "s.txt", s_lines), write_lines(d / "t.txt", t_lines)


def _mine(src, tgt, model, **kw) -> str:
    out = io.StringIO() if kw.get("output_format", "tsv") == "tsv" else io.BytesIO()
    kw.setdefault("config", MineConfig(threshold=0, min_z=0, min_cosine=-1.0))
    mine_files(src, tgt, out, model=model, **kw)
    return out.getvalue()


def test_parquet_shards_and_jsonl_mine_the_pairs_of_the_text_files(sides, toy_model):
    d, s_lines, t_lines, s_txt, t_txt = sides
    want = _mine(s_txt, t_txt, toy_model, ids=True)
    assert want.count("\n") > 5
    s_pq = _shards(d / "s_pq", s_lines, [f"s{i}" for i in range(len(s_lines))], per_file=25, row_group=7)
    t_pq = _shards(d / "t_pq", t_lines, list(range(len(t_lines))), per_file=40, row_group=9)
    t_jl = _jsonl(d / "t.jsonl.gz", [{"text": t} for t in t_lines], gzip.open)
    for chunk_lines in (1000, 11):  # chunks across row groups and shards
        pipe = PipelineConfig(chunk_lines=chunk_lines)
        assert _mine(s_pq, t_pq, toy_model, ids=True, pipeline=pipe) == want
        assert _mine(str(d / "s_pq" / "*.parquet"), t_jl, toy_model, ids=True, pipeline=pipe) == want


def test_id_column_is_carried_to_tsv_and_parquet_output(sides, toy_model):
    d, s_lines, t_lines, s_txt, t_txt = sides
    s_pq = _shards(d / "s_id", s_lines, [f"s{i}" for i in range(len(s_lines))], per_file=30, row_group=8)
    t_pq = _shards(d / "t_id", t_lines, [1000 + i for i in range(len(t_lines))], per_file=30, row_group=8)
    with_lines = _mine(s_txt, t_txt, toy_model, ids=True).splitlines()
    pipe = PipelineConfig(chunk_lines=13)
    with_ids = _mine(s_pq, t_pq, toy_model, columns=ColumnsConfig(id_col="id"), pipeline=pipe).splitlines()
    assert len(with_ids) == len(with_lines)
    for a, b in zip(with_lines, with_ids):
        a, b = a.split("\t"), b.split("\t")
        assert a[:3] == b[:3]
        assert b[3] == ",".join(f"s{int(n) - 1}" for n in a[3].split(","))
        assert b[4] == ",".join(str(1000 + int(n) - 1) for n in a[4].split(","))
    assert any("," in line.split("\t")[3] for line in with_ids)  # a repeated line carries both its ids
    data = _mine(s_pq, t_pq, toy_model, columns=ColumnsConfig(id_col="id"), explain=True, output_format="parquet",
                 pipeline=pipe)
    t = pq.read_table(pa.BufferReader(data))
    types = {f.name: str(f.type) for f in t.schema}
    assert types == {"score": "float", "src": "string", "tgt": "string", "src_lines": "list<element: int64>",
                     "tgt_lines": "list<element: int64>", "src_ids": "list<element: string>",
                     "tgt_ids": "list<element: int64>", "cosine": "float", "src_mean": "float", "tgt_mean": "float",
                     "direction": "string", "z": "float", "prob": "float"}
    rows = t.to_pylist()
    assert [f"{r['score']:.6f}\t{r['src']}\t{r['tgt']}" for r in rows] == ["\t".join(x.split("\t")[:3])
                                                                            for x in with_lines]
    assert [",".join(f"s{n - 1}" for n in r["src_lines"]) for r in rows] == [",".join(r["src_ids"]) for r in rows]
    with pytest.raises(ConfigError, match="--id-col id needs a Parquet or JSONL input"):
        _mine(s_txt, t_txt, toy_model, columns=ColumnsConfig(id_col="id"))


def test_mine_cli_columns_and_parquet_output(sides, toy_model_dir, tmp_path):
    d, s_lines, t_lines, s_txt, t_txt = sides
    s_pq = _parquet(tmp_path / "s.parquet", {"de": s_lines}, row_group=10)
    t_jl = _jsonl(tmp_path / "t.jsonl", [{"en": t} for t in t_lines])
    r = CliRunner()
    base = ["--model", toy_model_dir, "--threshold", "0", "--no-per-language", "-q"]
    want = r.invoke(main, ["mine", s_txt, t_txt, *base]).output
    got = r.invoke(main, ["mine", s_pq, t_jl, "--src-col", "de", "--tgt-col", "en", *base])
    assert got.exit_code == 0 and got.output == want
    out = tmp_path / "pairs.parquet"
    res = r.invoke(main, ["mine", s_pq, t_jl, "--src-col", "de", "--tgt-col", "en", "-o", str(out), *base])
    assert res.exit_code == 0 and pq.read_table(out).num_rows == want.count("\n")
    assert not os.path.exists(str(out) + ".partial")
    res = r.invoke(main, ["mine", s_pq, t_jl, "--column", "de", *base])
    assert res.exit_code == 1 and res.output.startswith(f"Error: {t_jl} line 1 column 'de': no such key (keys: en)")


def test_resume_with_another_column_is_refused(sides, toy_model, tmp_path):
    d, s_lines, t_lines, _, _ = sides
    s_pq = _parquet(tmp_path / "s.parquet", {"text": s_lines, "b": s_lines}, row_group=10)
    t_pq = _parquet(tmp_path / "t.parquet", {"text": t_lines}, row_group=10)
    work = str(tmp_path / "w")
    first = _mine(s_pq, t_pq, toy_model, pipeline=PipelineConfig(work_dir=work, chunk_lines=30))
    again = _mine(s_pq, t_pq, toy_model, pipeline=PipelineConfig(work_dir=work, chunk_lines=30, resume=True))
    assert again == first
    with pytest.raises(ConfigError, match="cannot resume: columns"):
        _mine(s_pq, t_pq, toy_model, columns=ColumnsConfig(src_col="b"),
              pipeline=PipelineConfig(work_dir=work, chunk_lines=30, resume=True))


@pytest.mark.slow
def test_ray_reads_parquet_shards_in_place(sides, toy_model):
    ray = pytest.importorskip("ray", reason="the ray extra: pip install 'bitextmine[ray]' (.ci/run installs it)")
    d, s_lines, t_lines, s_txt, t_txt = sides
    want = _mine(s_txt, t_txt, toy_model, ids=True)
    s_pq = _shards(d / "s_ray", s_lines, list(range(len(s_lines))), per_file=25, row_group=7)
    t_pq = _shards(d / "t_ray", t_lines, list(range(len(t_lines))), per_file=25, row_group=7)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        assert _mine(s_pq, t_pq, toy_model, ids=True, pipeline=PipelineConfig(engine="ray", chunk_lines=20)) == want
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_real_text_mined_from_parquet_and_jsonl_shards(tmp_path):
    """Real sentences: the bundled model mines the same bytes from Parquet shards and gzip JSONL as from text."""
    from bitextmine.corpus import read_lines

    de = read_lines(shared_path("train", "wmt_newstest", "en-de.de.gz"))[:3000]
    en = read_lines(shared_path("train", "wmt_newstest", "en-de.en.gz"))[:3000][::-1]
    de_txt, en_txt = write_lines(tmp_path / "de.txt", de), write_lines(tmp_path / "en.txt", en)
    want = _mine(de_txt, en_txt, None, ids=True, config=MineConfig())
    assert want.count("\n") > 1000
    de_pq = _shards(tmp_path / "de", de, list(range(len(de))), per_file=1000, row_group=300)
    en_jl = _jsonl(tmp_path / "en.jsonl.gz", [{"text": t} for t in en], gzip.open)
    got = _mine(de_pq, en_jl, None, ids=True, config=MineConfig(), pipeline=PipelineConfig(chunk_lines=1100))
    assert got == want


def test_damaged_inputs_are_one_error_line_naming_file_and_rows(tmp_path):
    """A lone surrogate escaped in JSONL, a string column that is not UTF-8, a corrupt row group and a column name
    given twice ended in tracebacks (or, for the surrogate, an error about UTF-8 bytes the file does not hold)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bitextmine.tabular import iter_texts

    (tmp_path / "a.jsonl").write_text('{"text": "fine"}\n{"text": "x\\ud800y"}\n', encoding="utf-8")
    bad = pa.Array.from_buffers(pa.string(), 2, [None, pa.py_buffer(np.array([0, 2, 5], np.int32).tobytes()),
                                                 pa.py_buffer(b"ok\xffab")])
    pq.write_table(pa.table({"text": bad}), tmp_path / "utf8.parquet")
    pq.write_table(pa.table({"text": [f"Satz {i}" for i in range(1000)]}), tmp_path / "ok.parquet", row_group_size=100)
    b = bytearray((tmp_path / "ok.parquet").read_bytes())
    for i in range(200, 2000):
        b[i] ^= 0x5A
    (tmp_path / "corrupt.parquet").write_bytes(bytes(b))
    pq.write_table(pa.Table.from_arrays([pa.array(["a"]), pa.array(["b"])], names=["text", "text"]),
                   tmp_path / "twice.parquet")
    cases = {"a.jsonl": r"a.jsonl line 2 column 'text': a lone surrogate \\ud800 at character 2",
             "utf8.parquet": r"utf8.parquet rows 1-2: row group 0 cannot be read",
             "corrupt.parquet": r"corrupt.parquet rows 1-100: row group 0 cannot be read",
             "twice.parquet": r"twice.parquet column 'text': 2 columns of that name"}
    for name, says in cases.items():
        with pytest.raises(CorpusError, match=says):
            list(iter_texts(str(tmp_path / name), "text"))


def test_an_error_in_a_shard_of_a_folder_names_the_shard_and_its_row(tmp_path, toy_model_dir):
    """The folder and a line counted across all shards were named ("shards line 5")."""
    d = tmp_path / "shards"
    d.mkdir()
    pq.write_table(pa.table({"text": ["kalo", "mire", "tusa"]}), d / "part-0.parquet")
    pq.write_table(pa.table({"text": ["fela", "mo\x00re"]}), d / "part-1.parquet")
    r = CliRunner().invoke(main, ["encode", str(d), "-o", str(tmp_path / "x.npy"), "--model", toy_model_dir, "-q"])
    assert r.exit_code != 0 and f"{d / 'part-1.parquet'} line 2: NUL byte" in r.output, r.output
    pq.write_table(pa.table({"text": ["fela", "more"]}), d / "part-1.parquet")
    r = CliRunner().invoke(main, ["encode", str(d), "-o", str(tmp_path / "x.npy"), "--model", toy_model_dir, "-q",
                                  "--batch-size", "2"])
    assert r.exit_code == 0 and np.load(tmp_path / "x.npy").shape[0] == 5


def test_a_rejected_line_that_is_not_utf8_is_kept_byte_for_byte_in_parquet_rejects(tmp_path):
    """The columns read U+FFFD where the bytes are not UTF-8; the raw column holds the line as it was."""
    line = b"Das Haus ist gro\xdf.\tThe house is big."
    src = tmp_path / "n.tsv"
    src.write_bytes(line + b"\nDer Hund schl\xc3\xa4ft.\tThe dog sleeps.\n")
    r = CliRunner().invoke(main, ["filter", str(src), "--score", "none", "--rejects", str(tmp_path / "r.parquet"),
                                  "-o", str(tmp_path / "k.tsv")])
    assert r.exit_code == 0, r.output
    rows = pq.read_table(tmp_path / "r.parquet").to_pylist()
    assert [(x["reason"], x["raw"]) for x in rows] == [("invalid-utf8", line)]
    assert rows[0]["col1"] == "Das Haus ist gro\ufffd."


def test_integer_ids_beyond_int64_are_written_as_text(tmp_path):
    src = tmp_path / "de.jsonl"
    src.write_text('{"id": 18446744073709551615, "text": "kalo mire"}\n{"id": 2, "text": "tuka sane"}\n')
    tgt = tmp_path / "en.jsonl"
    tgt.write_text('{"id": 1, "text": "kalo mire"}\n{"id": 3, "text": "tuka sane"}\n')
    r = CliRunner().invoke(main, ["mine", str(src), str(tgt), "--id-col", "id", "--threshold", "0", "--min-z", "0",
                                  "--min-cosine", "0", "-o", str(tmp_path / "o.parquet"), "-q"])
    assert r.exit_code == 0, r.output
    t = pq.read_table(tmp_path / "o.parquet")
    assert str(t.schema.field("src_ids").type) == "list<element: string>"
    assert "18446744073709551615" in [i for ids in t.to_pydict()["src_ids"] for i in ids]


def test_a_jsonl_line_nested_too_deeply_is_one_line_error(tmp_path):
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"text": ' + "[" * 100000 + "]" * 100000 + "}\n")
    ok = tmp_path / "ok.jsonl"
    ok.write_text('{"text": "kalo"}\n')
    r = CliRunner().invoke(main, ["mine", str(deep), str(ok)])
    assert r.exit_code == 1 and r.output == (f"Error: {deep} line 1: a JSON value nested too deeply to read; expected "
                                             "one flat JSON object per line\n")
