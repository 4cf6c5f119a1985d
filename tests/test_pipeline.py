"""The staged mining run: dedup against a dictionary, the same pairs for any chunk size, engine and
source of embeddings, resume after a removed part or a kill, and refusal to resume a changed run."""

import dataclasses
import gzip
import io
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import shared_path, toy_corpus, write_lines

from bitextmine.config import EmbeddingsConfig, MineConfig, PipelineConfig
from bitextmine.errors import ConfigError, MissingDependencyError
from bitextmine.mining.mine import mine_embeddings
from bitextmine.pipeline import mine_files
from bitextmine.pipeline import dedup
from bitextmine.pipeline.plan import plan_side, read_chunk
from bitextmine.pipeline.workdir import WorkDir


def _lines(seed: int, n: int) -> list[str]:
    rng = np.random.default_rng(seed)
    pool = [f"line {i} " + "x" * int(rng.integers(0, 5)) for i in range(n // 3)] + ["", "  ", "\t"]
    return [pool[int(i)] for i in rng.integers(0, len(pool), n)]


def _reference(lines: list[str]):
    """Distinct non-blank lines in first-occurrence order with their 1-based line numbers: a dictionary."""
    seen: dict[str, list[int]] = {}
    for i, s in enumerate(lines, 1):
        if s.strip():
            seen.setdefault(s, []).append(i)
    return list(seen), list(seen.values())


@pytest.mark.parametrize("chunk_lines,bucket_lines", [(1000, 10**6), (7, 10), (1, 3)])
def test_dedup_matches_a_dictionary(tmp_path, chunk_lines, bucket_lines):
    lines = _lines(3, 200)
    path = write_lines(tmp_path / "a.txt", lines)
    work = WorkDir(str(tmp_path / "w"))
    plan = plan_side(work, "src", path, chunk_lines)
    assert [s for c in range(len(plan["chunks"])) for s in read_chunk(work, plan, c)] == lines
    buckets = max(1, -(-plan["lines"] // bucket_lines))
    for c in range(len(plan["chunks"])):
        dedup.hash_chunk(work, "src", plan, c)
    for b in range(buckets):
        dedup.dedup_bucket(work, "src", plan, b, buckets)
    for c in range(len(plan["chunks"])):
        dedup.chunk_reps(work, "src", plan, c, buckets)
    texts, ids = _reference(lines)
    first = np.concatenate([dedup.firsts(work, "src", plan, c) for c in range(len(plan["chunks"]))])
    assert [lines[i] for i in first] == texts
    assert dedup.row_offsets(work, "src", plan)[-1] == len(texts)
    rep = np.concatenate([np.load(work.path(dedup.rep_file("src", c))) for c in range(len(plan["chunks"]))])
    assert [(np.flatnonzero(rep == f) + 1).tolist() for f in first] == ids
    assert dedup.blank_count(work, "src", plan) == sum(1 for s in lines if not s.strip())


def test_plan_reads_lines_as_the_corpus_reader(tmp_path):
    from bitextmine.corpus import read_lines

    raw = "\ufeffa\r\nb\n\nc\u2028d\x0ce\n last".encode()
    (tmp_path / "a.txt").write_bytes(raw)
    with gzip.open(tmp_path / "a.txt.gz", "wb") as f:
        f.write(raw)
    for name in ("a.txt", "a.txt.gz"):
        for chunk_lines in (1, 2, 10):
            work = WorkDir(str(tmp_path / f"w-{name}-{chunk_lines}"))
            plan = plan_side(work, "src", str(tmp_path / name), chunk_lines)
            got = [s for c in range(len(plan["chunks"])) for s in read_chunk(work, plan, c)]
            assert got == read_lines(str(tmp_path / name)) and plan["lines"] == 5


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    """Two toy sides with planted translations, duplicates and blank lines."""
    d = tmp_path_factory.mktemp("sides")
    src, tgt = toy_corpus(n=160, seed=7)
    s_lines = src[:100] + [src[3], "", src[50]] + src[100:130]
    t_lines = tgt[:70][::-1] + ["  ", tgt[10]] + tgt[130:160]
    return write_lines(d / "s.txt", s_lines), write_lines(d / "t.txt", t_lines)


def _mine(sides, model, **kw) -> tuple[str, object]:
    out = io.StringIO()
    kw.setdefault("config", MineConfig(threshold=0))
    stats = mine_files(*sides, out, model=model, **kw)
    return out.getvalue(), stats


def _by_embeddings(sides, model, config: MineConfig) -> str:
    """The reference: mine_embeddings on the distinct lines, written with every line number."""
    from bitextmine.corpus import read_lines
    from bitextmine.encoding import encode

    rows = []
    for path in sides:
        texts, ids = _reference(read_lines(path))
        rows.append((texts, ids, encode(texts, model)))
    (st, si, sx), (tt, ti, tx) = rows
    p = mine_embeddings(sx, tx, config=config)
    return "".join(f"{sc:.6f}\t{st[s]}\t{tt[t]}\t{','.join(map(str, si[s]))}\t{','.join(map(str, ti[t]))}\n"
                   for s, t, sc in zip(p.src, p.tgt, p.score))


@pytest.mark.parametrize("mode", ["max", "forward", "backward", "intersect", "union"])
def test_any_chunk_size_gives_the_pairs_of_mine_embeddings(sides, toy_model, mode):
    config = MineConfig(threshold=0.9, mode=mode, min_z=3.0)  # the standout floor drops some pairs
    want = _by_embeddings(sides, toy_model, config)
    assert want.count("\n") > 20
    assert want.count("\n") < _by_embeddings(sides, toy_model, dataclasses.replace(config, min_z=0)).count("\n")
    for chunk_lines in (1000, 17):
        got, stats = _mine(sides, toy_model, config=config, ids=True, pipeline=PipelineConfig(chunk_lines=chunk_lines))
        assert got == want, chunk_lines
    assert (stats.src_lines, stats.src_unique, stats.src_empty) == (133, 130, 1)
    assert (stats.tgt_lines, stats.tgt_unique, stats.tgt_empty) == (102, 100, 1)


def test_explain_columns(sides, toy_model):
    from bitextmine.encoding import encode

    got, _ = _mine(sides, toy_model, explain=True, pipeline=PipelineConfig(chunk_lines=13))
    rows = [r.split("\t") for r in got.splitlines()]
    assert rows and all(len(r) == 11 for r in rows) and {r[10] for r in rows} == {"nan"}  # no stage: no probability
    plain, _ = _mine(sides, toy_model, ids=True)
    assert ["\t".join(r[:5]) for r in rows] == plain.splitlines()
    for r in rows[:10]:
        x, y = encode([r[1], r[2]], toy_model)
        cos, ms, mt = float(r[5]), float(r[6]), float(r[7])
        assert abs(cos - float(x @ y)) < 1e-5
        assert abs(float(r[0]) - cos / ((ms + mt) / 2)) < 1e-4  # ratio margin from the printed parts
        assert r[8] in ("fwd", "bwd", "both")
    assert {r[8] for r in rows} & {"both"}
    # z: the standout of the pair (its own tests compare it with a reference), here from the distinct rows
    from bitextmine.corpus import read_lines
    from bitextmine.mining.standout import moments_of, standout

    X, Y = (encode(list(dict.fromkeys(t for t in read_lines(p) if t.strip())), toy_model) for p in sides)
    for r in rows[:10]:
        x, y = encode([r[1], r[2]], toy_model)
        z = standout(np.array([x @ y]), x[None], y[None], moments_of(X), moments_of(Y))[0]
        assert abs(float(r[9]) - z) < 2e-3


def test_ivf_chunks_equal_one_index(sides, toy_model):
    config = MineConfig(threshold=0, index="ivf", nlist=4, nprobe=2)
    one, s1 = _mine(sides, toy_model, config=config, ids=True)
    for chunk_lines in (40, 9):
        got, _ = _mine(sides, toy_model, config=config, ids=True, pipeline=PipelineConfig(chunk_lines=chunk_lines))
        assert got == one
    assert s1.info["index"] == ["ivf", "ivf"] and "index:ivf/ivf" in s1.signature
    _, s2 = _mine(sides, toy_model, config=MineConfig(threshold=0, index="ivf", nlist=4, nprobe=4, recall_check=50))
    assert s2.info["recall"] == [1.0, 1.0]  # every cell probed: exact


def test_ivf_chunks_equal_one_index_with_tied_rows(toy_model, tmp_path):
    """A bag-of-pieces model gives a sentence and its words reordered the same embedding: equal neighbours, whose
    order FAISS does not fix. The pairs stay those of one index for any chunk size."""
    src, tgt = toy_corpus(n=120, seed=11)
    rng = np.random.default_rng(2)
    shuffled = [" ".join(rng.permutation(t.split())) for t in tgt[:60]]
    sides = (write_lines(tmp_path / "s.txt", src[:60] + src[60:90]),
             write_lines(tmp_path / "t.txt", tgt[:60] + shuffled + tgt[90:120]))
    config = MineConfig(threshold=0, min_z=0, index="ivf", nlist=4, nprobe=2)
    one, _ = _mine(sides, toy_model, config=config, ids=True)
    assert len(one.splitlines()) > 40
    for chunk_lines in (50, 7):
        got, _ = _mine(sides, toy_model, config=config, ids=True, pipeline=PipelineConfig(chunk_lines=chunk_lines))
        assert got == one


def test_embeddings_from_any_encoder(sides, toy_model, tmp_path):
    """Raw LASER-format and sidecar-less .npy embeddings of every line give the pairs of the model itself."""
    from bitextmine.corpus import read_lines
    from bitextmine.encoding import encode

    want, _ = _mine(sides, toy_model, ids=True)
    paths = {}
    for name, path in zip(("s", "t"), sides):
        x = encode(read_lines(path), toy_model)
        (3 * x).astype(np.float32).tofile(tmp_path / f"{name}.raw")
        np.save(tmp_path / f"{name}.npy", 3 * x)
        paths[name] = str(tmp_path / name)
    def rows(tsv: str) -> tuple[list, np.ndarray]:
        cols = [r.split("\t") for r in tsv.splitlines()]
        return [r[1:] for r in cols], np.array([float(r[0]) for r in cols])

    want_pairs, want_scores = rows(want)
    for fmt, ext in (("raw", ".raw"), ("npy", ".npy")):  # rows scaled by 3: normalised again as they are read
        got, stats = _mine(sides, None, ids=True, src_emb=paths["s"] + ext, tgt_emb=paths["t"] + ext,
                           embeddings=EmbeddingsConfig(format=fmt, dim=32), pipeline=PipelineConfig(chunk_lines=11))
        got_pairs, got_scores = rows(got)
        assert got_pairs == want_pairs and np.abs(got_scores - want_scores).max() < 1e-5
        assert "vectors:external" in stats.signature
    with pytest.raises(ConfigError, match=r"133 rows, but .*t.txt has 102 lines"):
        _mine(sides, None, src_emb=paths["s"] + ".raw", tgt_emb=paths["s"] + ".raw",
              embeddings=EmbeddingsConfig(format="raw", dim=32))


def test_resume_recomputes_only_a_removed_part(sides, toy_model, tmp_path):
    work = str(tmp_path / "w")
    pipe = PipelineConfig(work_dir=work, chunk_lines=30)
    first, s1 = _mine(sides, toy_model, ids=True, pipeline=pipe)
    assert s1.info["computed"]["encode"] == 5 + 4 and s1.info["computed"]["knn"] == 5 * 4
    with pytest.raises(ConfigError, match="--resume"):
        _mine(sides, toy_model, ids=True, pipeline=pipe)
    os.remove(os.path.join(work, "tgt", "emb-000002.npy"))
    resumed = PipelineConfig(work_dir=work, chunk_lines=30, resume=True)
    again, s2 = _mine(sides, toy_model, ids=True, pipeline=resumed)
    assert again == first
    computed = {k: v for k, v in s2.info["computed"].items() if v and k != "texts"}
    assert computed == {"encode": 1}
    with pytest.raises(ConfigError, match="chunk_lines was 30"):
        _mine(sides, toy_model, pipeline=PipelineConfig(work_dir=work, chunk_lines=31, resume=True))


@pytest.mark.parametrize("change, redone", [
    ({"threshold": 1.05}, {"margins"}),
    ({"mode": "intersect", "min_cosine": 0.2}, set()),
    ({"k": 3, "margin": "distance"}, {"knn", "reduce", "margins"}),
])
def test_resume_with_other_settings_reuses_the_rest(sides, toy_model, tmp_path, change, redone):
    """A resumed run with changed later-stage settings recomputes only what depends on them and writes what a
    fresh run with those settings writes."""
    work = str(tmp_path / "w")
    _mine(sides, toy_model, ids=True, pipeline=PipelineConfig(work_dir=work, chunk_lines=30))
    config = dataclasses.replace(MineConfig(threshold=0), **change)
    want, _ = _mine(sides, toy_model, ids=True, config=config, pipeline=PipelineConfig(chunk_lines=30))
    got, stats = _mine(sides, toy_model, ids=True, config=config,
                       pipeline=PipelineConfig(work_dir=work, chunk_lines=30, resume=True))
    assert got == want
    assert stats.info["changed"] == sorted(change)
    assert {k for k, v in stats.info["computed"].items() if v and k != "texts"} == redone


def test_a_run_resumed_with_another_piece_table_embeds_its_rows_again(sides, toy_model, tmp_path):
    """Rows embedded with another table precision (a GPU's fp16 table, a CPU's float32 one, or --precision) differ
    slightly: a resumed run records the table and embeds again rather than mixing the two."""
    from bitextmine.config import EncodeConfig

    work = str(tmp_path / "w")
    _mine(sides, toy_model, ids=True, pipeline=PipelineConfig(work_dir=work, chunk_lines=30))
    bf16 = EncodeConfig(precision="bf16")
    want, _ = _mine(sides, toy_model, ids=True, encode_config=bf16, pipeline=PipelineConfig(chunk_lines=30))
    got, stats = _mine(sides, toy_model, ids=True, encode_config=bf16,
                       pipeline=PipelineConfig(work_dir=work, chunk_lines=30, resume=True))
    assert got == want and stats.info["changed"] == ["table"] and stats.info["computed"]["encode"] > 0
    assert want != _mine(sides, toy_model, ids=True, pipeline=PipelineConfig(chunk_lines=30))[0]  # rows differ

def test_resume_ivf_with_another_nprobe_keeps_the_trained_index(sides, toy_model, tmp_path):
    work = str(tmp_path / "w")
    ivf = dict(index="ivf", nlist=4, train_sample=100)
    _mine(sides, toy_model, config=MineConfig(**ivf, nprobe=1), pipeline=PipelineConfig(work_dir=work, chunk_lines=30))
    config = MineConfig(**ivf, nprobe=3)
    want, _ = _mine(sides, toy_model, config=config, pipeline=PipelineConfig(chunk_lines=30))
    got, stats = _mine(sides, toy_model, config=config, pipeline=PipelineConfig(work_dir=work, chunk_lines=30,
                                                                                resume=True))
    assert got == want and stats.info["changed"] == ["nprobe"]
    assert not stats.info["computed"].get("index") and not stats.info["computed"].get("shards")
    assert stats.info["computed"]["knn"] > 0


def test_a_changed_input_refuses_to_resume(tmp_path, toy_model):
    src, tgt = toy_corpus(n=40, seed=1)
    sp, tp = write_lines(tmp_path / "s.txt", src), write_lines(tmp_path / "t.txt", tgt)
    pipe = PipelineConfig(work_dir=str(tmp_path / "w"), chunk_lines=10)
    _mine((sp, tp), toy_model, pipeline=pipe)
    write_lines(tmp_path / "t.txt", tgt[:-1] + ["changed"])
    with pytest.raises(ConfigError, match=r"t\.txt: changed since"):
        _mine((sp, tp), toy_model, pipeline=PipelineConfig(work_dir=str(tmp_path / "w"), chunk_lines=10, resume=True))


def test_ray_missing_is_one_line_error(monkeypatch):
    from bitextmine.pipeline.engine import make_engine

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'bitextmine\[ray\]'"):
        make_engine("ray")


@pytest.mark.slow
def test_ray_gives_the_same_bytes(sides, toy_model, tmp_path):
    ray = pytest.importorskip("ray", reason="the ray extra: pip install 'bitextmine[ray]' (.ci/run installs it)")
    want, _ = _mine(sides, toy_model, ids=True, pipeline=PipelineConfig(chunk_lines=1000))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        for chunk_lines in (1000, 23):
            got, stats = _mine(sides, toy_model, ids=True, pipeline=PipelineConfig(engine="ray", chunk_lines=chunk_lines))
            assert got == want
        ivf = MineConfig(threshold=0, index="ivf", nlist=4, nprobe=2)
        local, _ = _mine(sides, toy_model, config=ivf, pipeline=PipelineConfig(chunk_lines=40))
        on_ray, _ = _mine(sides, toy_model, config=ivf, pipeline=PipelineConfig(chunk_lines=40, engine="ray"))
        assert on_ray == local
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_kill_and_resume_on_real_data(tmp_path):
    """kill -9 in the middle of a run on real sentences (15,000 news lines a side, 5 chunks); --resume writes the
    bytes of an uninterrupted run."""
    sides = []
    for lang in ("de", "en"):
        with gzip.open(shared_path("train", "wmt_newstest", f"en-de.{lang}.gz"), "rt", encoding="utf-8") as f:
            lines = [line.rstrip("\n") for _, line in zip(range(15000), f)]
        sides.append(write_lines(tmp_path / f"news.{lang}", lines))
    base = [sys.executable, "-m", "bitextmine", "mine", *sides, "--ids", "--chunk-lines", "3000", "-q"]
    whole = subprocess.run(base, capture_output=True, text=True, check=True).stdout
    assert whole.count("\n") > 100
    work = str(tmp_path / "w")
    p = subprocess.Popen(base + ["--work-dir", work, "-o", str(tmp_path / "a.tsv")])
    deadline = time.time() + 120
    knn = os.path.join(work, "knn")
    while time.time() < deadline and not (os.path.isdir(knn) and any(f.endswith(".npz") for f in os.listdir(knn))):
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert not os.path.exists(tmp_path / "a.tsv") or (tmp_path / "a.tsv").read_text() != whole
    subprocess.run(base + ["--work-dir", work, "--resume", "-o", str(tmp_path / "a.tsv")], check=True)
    assert (tmp_path / "a.tsv").read_text() == whole


def _clustered_sides(tmp_path, n=300, m=400, d=16):
    """Two sides of clustered unit rows, written as .npy embeddings and as distinct text lines."""
    rng = np.random.default_rng(6)
    centres = rng.normal(size=(40, d))
    x, y = (centres[rng.integers(0, 40, r)] + 0.3 * rng.normal(size=(r, d)) for r in (n, m))
    x, y = ((a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32) for a in (x, y))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    sides = (write_lines(tmp_path / "s.txt", [f"s{i}" for i in range(n)]),
             write_lines(tmp_path / "t.txt", [f"t{j}" for j in range(m)]))
    return x, y, sides, {"src_emb": str(tmp_path / "x.npy"), "tgt_emb": str(tmp_path / "y.npy")}


def test_ivf_neighbour_means_average_the_neighbours_found(tmp_path):
    """With one probed cell of about 8 rows, many rows find fewer than k = 8 neighbours: the printed means
    are those of the neighbours FAISS found (slow reference), whatever the chunks."""
    from bitextmine.search.index import ivf_recipe, ivf_untrained

    x, y, sides, emb = _clustered_sides(tmp_path)
    means = []
    for q, o in ((x, y), (y, x)):
        cells, rows = ivf_recipe(len(o), 50, 0, 1)  # the index the run trains (cells capped at rows / 8)
        index = ivf_untrained(o.shape[1], cells, "ivf", 0, "cpu")
        index.train(o[rows])
        index.add(o)
        index.nprobe = 1
        _, I = index.search(q, 8)
        assert (I < 0).any(axis=1).sum() > 20
        means.append([np.mean([float(q[i] @ o[j]) for j in row if j >= 0]) for i, row in enumerate(I)])
    config = MineConfig(k=8, index="ivf", nlist=50, nprobe=1, threshold=0, min_z=0)
    for chunk_lines in (1000, 70):
        pipe = PipelineConfig(chunk_lines=chunk_lines)
        out, _ = _mine(sides, None, config=config, explain=True, pipeline=pipe, **emb)
        rows = [r.split("\t") for r in out.splitlines()]
        assert len(rows) > 100
        for r in rows:
            s, t = int(r[1][1:]), int(r[2][1:])
            assert float(r[6]) == pytest.approx(means[0][s], abs=2e-6)
            assert float(r[7]) == pytest.approx(means[1][t], abs=2e-6)


def test_one_side_flat_the_other_ivf_searches_each_direction_once(tmp_path):
    """auto with 350 rows flat: the targets (400) are searched by IVF, the sources (300) exactly, each direction
    once (the exact cells hold only the target-to-source lists), and the pairs are mine_embeddings'."""
    from bitextmine.corpus import read_lines

    x, y, sides, emb = _clustered_sides(tmp_path)
    config = MineConfig(k=4, auto_flat_max=350, nlist=50, nprobe=2, threshold=1.0, min_z=0, device="cpu")
    work = str(tmp_path / "w")
    got, stats = _mine(sides, None, config=config, ids=True, pipeline=PipelineConfig(chunk_lines=130, work_dir=work),
                       **emb)
    assert stats.info["index"] == ["ivf", "flat"]
    cells = [f for f in os.listdir(os.path.join(work, "knn")) if f.startswith("cell-") and f.endswith(".npz")]
    assert cells and all(sorted(np.load(os.path.join(work, "knn", f)).files) == ["Db", "Ib"] for f in cells)
    from bitextmine.search.exact import RowView

    x, y = (RowView(a, np.arange(len(a)), normalise=True)[:] for a in (x, y))  # as the run reads them
    p = mine_embeddings(x, y, config=config)
    assert p.info["index"] == ["ivf", "flat"] and len(p) > 50
    st, tt = read_lines(sides[0]), read_lines(sides[1])
    want = "".join(f"{sc:.6f}\t{st[s]}\t{tt[t]}\t{s + 1}\t{t + 1}\n" for s, t, sc in zip(p.src, p.tgt, p.score))
    assert got == want


def test_the_text_is_embedded_by_the_runs_own_model(tmp_path, sides, toy_model):
    """The encode stage loads the model from its directory: a model in memory only is refused (the bundled
    model would embed instead), and a directory saved again with other weights in the same process embeds with
    the new weights, as a fresh process would, not with the copy loaded before."""
    from bitextmine.loading import load_model
    from bitextmine.model import Model

    d, other = str(tmp_path / "m"), str(tmp_path / "other")
    dataclasses.replace(toy_model, config=dict(toy_model.config)).save(d)  # a copy: save moves what it saves
    rng = np.random.default_rng(9)
    changed = Model(tokenizer=toy_model.tokenizer, config=dict(toy_model.config), tensors=dict(toy_model.tensors),
                    embeddings=rng.normal(size=toy_model.embeddings.shape).astype(np.float32))
    changed.save(other)
    config = MineConfig(threshold=0, min_z=0, min_cosine=-1)
    first, _ = _mine(sides, load_model(d), config=config)
    with pytest.raises(ConfigError, match="a model saved in a directory"):
        _mine(sides, Model(tokenizer=changed.tokenizer, embeddings=changed.embeddings, config=dict(changed.config),
                           tensors=dict(changed.tensors)), config=config)
    changed.save(d)  # the same directory, other weights
    again, _ = _mine(sides, load_model(d), config=config)
    want, _ = _mine(sides, load_model(other), config=config)
    assert again == want != first


def test_each_stage_bar_counts_every_task_of_both_sides(sides, toy_model):
    """`mine` draws one bar a stage; a stage run for each side (or read again) reports each run's own total."""
    from bitextmine.cli.mine import stage_progress

    bars: dict = {}
    calls: dict = {}
    show = stage_progress(bars, quiet=True)

    def progress(stage, done, total):
        calls[stage] = calls.get(stage, 0) + 1
        show(stage, done, total)

    _mine(sides, toy_model, pipeline=PipelineConfig(chunk_lines=40), progress=progress)
    assert calls["encode"] > 2 and bars.keys() == calls.keys()
    assert {s: b.total for s, b in bars.items()} == calls
