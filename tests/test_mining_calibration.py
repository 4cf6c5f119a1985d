"""Mining settings calibrated on dev pairs: the tasks, the choice, what is stored, and train doing it."""

from __future__ import annotations

import json
from dataclasses import replace
import os

import numpy as np
import pytest
from click.testing import CliRunner

from bitextmine.cli import main
from bitextmine.errors import ConfigError
from bitextmine.config import CalibrationConfig
from bitextmine.evaluation.mining_calibration import (MIN_PAIRS, calibrate_mining, calibrate_pair,
                                                      distinct_pairs, draw_task, measure_defaults, sizes_for)
from bitextmine.evaluation.threshold_grid import FLOORS, GRID, ZS
from bitextmine.loading import load_model
from conftest import calibrate_mining_cli, model_with_dev_pairs, toy_corpus, train_toy_pair, write_lines

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def test_a_task_holds_the_translations_of_half_its_lines_and_no_other():
    """Against a slow reading of the rows: each gold pair is a source row and its own translation, and no other
    source row's translation is on the target side."""
    rng = np.random.default_rng(0)
    n = 200
    x = np.arange(n, dtype=np.float32)[:, None] * np.ones((1, 3), np.float32)  # row i holds i
    y = x + 0.5  # the translation of row i holds i + 0.5
    xs, ys, gold = draw_task(x, y, 60, 0.5, rng)
    assert len(xs) == len(ys) == 60 and 15 < len(gold) < 45
    for i, j in gold:
        assert ys[j, 0] == xs[i, 0] + 0.5
    partners = {float(v) + 0.5 for v in xs[:, 0]}
    found = {(i, j) for j in range(60) for i in range(60) if ys[j, 0] == xs[i, 0] + 0.5}
    assert found == gold and sum(float(v) in partners for v in ys[:, 0]) == len(gold)


def test_a_distracted_task_fills_the_untranslated_places_from_the_pool():
    """Against a slow reading of the rows: each gold pair is a source row and its own translation, every other
    target row is a pool row, each once; a set smaller than the task gives all its rows."""
    from bitextmine.evaluation.mining_calibration import draw_distracted

    x = np.arange(100, dtype=np.float32)[:, None] * np.ones((1, 3), np.float32)  # row i holds i
    y, pool = x + 0.5, -1 - np.arange(500, dtype=np.float32)[:, None] * np.ones((1, 3), np.float32)
    for size, n in ((60, 100), (200, 100)):
        xs, ys, gold = draw_distracted(x[:n], y[:n], pool, size, 0.5, np.random.default_rng(size))
        assert len(xs) == len(ys) == min(size, n) and len(set(xs[:, 0])) == len(xs)
        found = {(i, j) for j in range(len(ys)) for i in range(len(xs)) if ys[j, 0] == xs[i, 0] + 0.5}
        assert found == gold and 0.3 * len(xs) < len(gold) < 0.7 * len(xs)
        others = [v for j, v in enumerate(ys[:, 0]) if j not in {b for _, b in gold}]
        assert all(v < 0 for v in others) and len(set(others)) == len(others)  # pool rows, none twice


def test_a_distracted_dev_set_needs_one_pair_a_line_and_a_pool_as_large():
    from bitextmine.evaluation.mining_calibration import _set_sizes

    x = np.zeros((300, 2), np.float32)
    assert sizes_for(300, (30, 100, 300, 1000), pooled=True) == [30, 100, 300]
    assert _set_sizes((x, x, np.zeros((100, 2), np.float32)), (30, 100, 300), 0.5) == [30, 100]
    assert _set_sizes((x, x, None), (30, 100, 300), 0.5) == [30, 100]


def test_calibrate_mining_draws_a_distracted_sets_floor_tasks_from_its_distractors(toy_model, toy_model_dir,
                                                                                    tmp_path):
    """--distracted-pair: the floors are those calibrate_sets chooses on the set's rows with the distractors'
    rows as the pool (the distractors file's lines that are not the set's own English), beside a set given
    English first; the distractors differ from the set's untaken translations, and so do the figures."""
    from bitextmine.encoding import encode
    from bitextmine.evaluation.mining_calibration import calibrate_sets

    model_dir, files = model_with_dev_pairs(toy_model_dir, tmp_path, 300, 22)
    s, t = toy_corpus(400, seed=23)
    dev_en = [line.rstrip("\n") for line in open(files[1], encoding="utf-8")]
    extra = write_lines(tmp_path / "d.en", t + dev_en[:5] + [""])
    x, y = distinct_pairs(*(open(f, encoding="utf-8").read().splitlines() for f in files))
    pool = sorted(set(t) - set(y))
    alone = dict(sizes=(30, 100), shares=CalibrationConfig.floor_shares_alone)  # the toy model has no stage
    want = calibrate_sets([(encode(x, toy_model), encode(y, toy_model), encode(pool, toy_model))], **alone)
    plain = calibrate_sets([(encode(x, toy_model), encode(y, toy_model))], **alone)
    o_de, o_en = toy_corpus(200, seed=24)
    other = write_lines(tmp_path / "o.en", o_en), write_lines(tmp_path / "o.de", o_de)
    o_en, o_de = distinct_pairs(o_en, o_de)
    both = calibrate_sets([(encode(o_en, toy_model), encode(o_de, toy_model)),
                           (encode(x, toy_model), encode(y, toy_model), encode(pool, toy_model))], **alone)
    runner = CliRunner()
    for first, expected in (([], want), (["--pair", "en", "de", *other], both)):  # English first: the set's order
        r = runner.invoke(main, ["calibrate-mining", "--model", model_dir, *first, "--distracted-pair", "de", "en",
                                 *files, extra, "--floor-lines", "30", "--floor-lines", "100",
                                 "--no-measure-defaults", "--dry-run"])
        assert r.exit_code == 0, r.output
        got = dict(zip(("threshold", "min_z", "min_cosine"), map(float, r.stdout.split()[2:7:2])))
        assert got == expected.settings and f"mean F1 {expected.f1:.3f}" in r.stdout, (r.stdout, expected)
    assert want.measured != plain.measured
    r = runner.invoke(main, ["calibrate-mining", "--model", model_dir, "--dry-run"])
    assert r.exit_code != 0 and "no dev pairs: give --pair or --distracted-pair" in r.output, r.output


def test_sizes_need_one_and_a_half_pairs_a_line():
    assert sizes_for(44) == [] and sizes_for(45) == [30] and sizes_for(1500) == [30, 100, 300, 1000]
    assert MIN_PAIRS == 45


def test_distinct_pairs_leave_out_repeats_and_blanks():
    assert distinct_pairs(["a", "b", "a", " ", "c"], ["x", "x", "y", "z", "w"]) == (["a", "c"], ["x", "w"])


def test_calibrate_pair_chooses_a_grid_point_and_says_what_it_measured(toy_model):
    from bitextmine.encoding import encode

    s, t = toy_corpus(400, seed=21)
    c = calibrate_pair(encode(s, toy_model), encode(t, toy_model), sizes=(30, 100))
    assert c.settings["threshold"] in GRID and c.settings["min_z"] in ZS and c.settings["min_cosine"] in FLOORS
    # chosen on half-translated tasks; measured there and, from 100 lines, where a tenth is translated
    assert [(m["lines"], m["share"]) for m in c.measured] == [(30, 0.5), (100, 0.5), (100, 0.1)]
    assert all(0 <= m[k] <= 1 for m in c.measured for k in ("precision", "recall", "f1"))
    assert c.f1 >= c.global_f1 - 1e-9 and c.pairs == 400  # the choice is the top of the surface it was chosen on
    with pytest.raises(ConfigError, match="too few to calibrate on"):
        calibrate_pair(encode(s[:40], toy_model), encode(t[:40], toy_model))


def test_calibrate_mining_stores_the_pair_and_mine_uses_and_reports_it(toy_model_dir, tmp_path):
    """Stored in the model directory beside what it held; mine applies it to that pair (either order) and its
    settings line says what the settings measured (the floors alone: --no-measure-defaults)."""
    model_dir, files = model_with_dev_pairs(toy_model_dir, tmp_path, 300, 22)
    r = calibrate_mining_cli(model_dir, files, "--no-measure-defaults")
    assert r.exit_code == 0, r.output
    section = json.load(open(os.path.join(model_dir, "config.json")))["mining"]
    assert section["version"] == 4 and list(section["languages"]) == ["de-en"]
    assert [m["lines"] for m in section["languages"]["de-en"]["measured"]] == [30, 100, 100]
    assert "defaults_measured" not in section["languages"]["de-en"]
    model = load_model(model_dir)
    assert model.fingerprint == load_model(toy_model_dir).fingerprint

    from bitextmine.config import MineConfig
    from bitextmine.mining.calibrated import choose

    choice = choose(MineConfig(), model.mining, ("en", "de"), lambda side: None)
    assert choice.calibrated and choice.config.threshold == section["languages"]["de-en"]["threshold"]
    assert "on its dev pairs: 50% translated, 30-100 lines: precision" in choice.describe()
    assert ", 10% translated, 100 lines: precision" in choice.describe()


def test_calibrate_mining_measures_mines_defaults_end_to_end_and_mine_says_it(toy_model_dir, tmp_path):
    """By default the command also runs mine with the settings chosen on tasks drawn from the dev pairs; the
    settings line of a run judged as those were (here: no second stage, the toy model has none) says it."""
    model_dir, files = model_with_dev_pairs(toy_model_dir, tmp_path, 700, 25)
    r = calibrate_mining_cli(model_dir, files)
    assert r.exit_code == 0, r.output
    assert "mine's defaults end to end (without the second stage):" in r.output
    entry = json.load(open(os.path.join(model_dir, "config.json")))["mining"]["languages"]["de-en"]
    got = entry["defaults_measured"]
    assert [m["share"] for m in got] == list(CalibrationConfig.stage_shares) and entry["defaults_second_stage"] is False
    assert all(100 <= m["lines"] <= 1000 and 0 <= m["precision"] <= 1 and 0 <= m["recall"] <= 1 for m in got)

    from bitextmine.config import MineConfig
    from bitextmine.mining.calibrated import choose

    said = choose(MineConfig(), load_model(model_dir).mining, ("de", "en"), lambda side: None).describe()
    assert f"end to end on its dev pairs: 50% translated, {got[-1]['lines']:,} lines: precision " \
           f"{got[-1]['precision']:.2f}, recall {got[-1]['recall']:.2f}" in said
    given = choose(MineConfig(threshold=1.1), load_model(model_dir).mining, ("de", "en"), lambda side: None)
    assert "on its dev pairs" not in given.describe()  # a setting given: the figures are not the run's


def test_measure_defaults_equals_mine_run_on_the_same_task_and_counted_by_hand(toy_model, toy_model_dir, tmp_path):
    """Against a slow, obvious reference: the same task drawn with the same seed, written out, mined by the
    command with the same settings, its pairs counted against the gold by hand."""
    from bitextmine.judge.tasks import build_task, clean_pool

    s, t = toy_corpus(700, seed=26)
    settings = {"threshold": 1.05, "min_z": 2.0, "min_cosine": 0.0}
    got, judged = measure_defaults(toy_model, ("de", "en"), s, t, settings,
                                   config=CalibrationConfig(stage_shares=(0.1,), measure_lines=200, stage_draws=1,
                                                            seed=3))
    task = build_task(clean_pool(list(zip(s, t)))[0], 200, 0.1, np.random.default_rng(3))
    files = write_lines(tmp_path / "s", task.src), write_lines(tmp_path / "t", task.tgt)
    r = CliRunner().invoke(main, ["mine", *files, "--model", toy_model_dir, "--src-lang", "de", "--tgt-lang", "en",
                                  "--trust-lang", "--threshold", "1.05", "--min-z", "2", "--min-cosine", "0", "--ids",
                                  "-q"])
    assert r.exit_code == 0, r.output
    pairs = {(int(line.split("\t")[-2]), int(line.split("\t")[-1])) for line in r.stdout.splitlines()}  # ids last
    right = sum(p in task.gold for p in pairs)
    precision, recall = right / len(pairs), right / len(task.gold)
    assert got == [{"lines": 200, "share": 0.1, "precision": pytest.approx(precision), "recall": pytest.approx(recall),
                    "f1": pytest.approx(2 * precision * recall / (precision + recall))}] and judged is False
    assert measure_defaults(toy_model, ("de", "fr"), s, t, settings) == ([], False)  # no English side


def test_a_stored_end_to_end_measurement_is_checked_on_load():
    from bitextmine.errors import ModelFormatError
    from bitextmine.mining.calibrated import check_section

    ok = {"threshold": 1.2, "min_z": 4.0, "min_cosine": 0.4}
    m = {"lines": 1000, "share": 0.01, "precision": 0.9, "recall": 0.8, "f1": 0.85}
    check_section({"version": 2, "languages": {"de-en": {**ok, "defaults_measured": [m],
                                                         "defaults_second_stage": True}}}, "x")
    with pytest.raises(ModelFormatError, match="\"defaults_measured\" without \"defaults_second_stage\""):
        check_section({"version": 2, "languages": {"de-en": {**ok, "defaults_measured": [m]}}}, "x")
    with pytest.raises(ModelFormatError, match="\"defaults_measured\" must be a list of objects"):
        check_section({"version": 2, "languages": {"de-en": {**ok, "defaults_measured": [{**m, "f1": "x"}],
                                                             "defaults_second_stage": False}}}, "x")


def test_the_bundled_model_is_not_rewritten(tmp_path):
    s, t = toy_corpus(100, seed=23)
    files = write_lines(tmp_path / "a", s), write_lines(tmp_path / "b", t)
    with pytest.raises(ConfigError, match="the bundled model is part of the package"):
        calibrate_mining(load_model(), [("de", "en", *files)])


def test_train_with_two_languages_comes_out_calibrated(tmp_path):
    logs = []
    train_toy_pair(tmp_path, 1500, 24, 200, logs)
    section = json.load(open(tmp_path / "m" / "config.json"))["mining"]
    n = int(section["chosen_on"].split(": ")[1].split()[0])  # the distinct ones of the 200 held apart
    assert list(section["languages"]) == ["de-en"] and 45 <= n <= 200
    assert any(m.startswith(f"mining settings for de-en on {n} held-apart pairs") for m in logs)
    assert [m["share"] for m in section["languages"]["de-en"]["defaults_measured"]] == list(CalibrationConfig.stage_shares)
    assert any(m.startswith("mine's defaults on held-apart tasks (without the second stage): 1% of") for m in logs)
    train_toy_pair(tmp_path, 1500, 24, 200, logs, out="one", languages=())
    assert "mining" not in json.load(open(tmp_path / "one" / "config.json"))
    assert any("record the model's two languages" in m for m in logs)


def test_keep_settings_adds_what_the_models_own_defaults_measure(toy_model_dir, tmp_path):
    """--keep-settings keeps the settings (and their provenance) and adds what mine measures with them; mine run
    with no setting given on the same task (the model's calibrated defaults) gives the same figures."""
    from bitextmine.judge.tasks import build_task, clean_pool

    model_dir, files = model_with_dev_pairs(toy_model_dir, tmp_path, 700, 27)
    s, t = (open(f, encoding="utf-8").read().splitlines() for f in files)
    invoke = lambda *extra: calibrate_mining_cli(model_dir, files, *extra)  # noqa: E731
    r = invoke("--keep-settings")
    last = r.output.splitlines()[-1]
    assert r.exit_code == 1 and last == "Error: --keep-settings: the model holds no settings for de-en to keep"
    assert invoke("--no-measure-defaults").exit_code == 0
    before = json.load(open(os.path.join(model_dir, "config.json")))["mining"]
    r = invoke("--keep-settings")
    assert r.exit_code == 0 and "(kept, the model's; 700 dev pairs)" in r.output, r.output
    after = json.load(open(os.path.join(model_dir, "config.json")))["mining"]
    assert after["chosen_on"].startswith(before["chosen_on"] + "; mine's defaults measured by")
    kept = {k: v for k, v in after["languages"]["de-en"].items() if not k.startswith("defaults") and k != "chosen_on"}
    assert kept == {k: v for k, v in before["languages"]["de-en"].items() if k != "chosen_on"}
    assert len(after["languages"]["de-en"]["defaults_measured"]) == 4
    assert after["languages"]["de-en"]["chosen_on"] == after["chosen_on"]  # the pair's own provenance too
    assert invoke("--keep-settings", "--no-measure-defaults").output.startswith("Error: --keep-settings measures")
    assert invoke("--keep-settings", "--dry-run").exit_code == 0 and invoke("--keep-settings").exit_code == 0
    again = json.load(open(os.path.join(model_dir, "config.json")))["mining"]["chosen_on"]
    assert again == after["chosen_on"]  # measured again: the provenance says it once

    model = load_model(model_dir)
    got, _ = measure_defaults(model, ("de", "en"), s, t, kept, config=CalibrationConfig(
        stage_shares=(0.1,), measure_lines=200, stage_draws=1, seed=5))
    task = build_task(clean_pool(list(zip(s, t)))[0], 200, 0.1, np.random.default_rng(5))
    paths = write_lines(tmp_path / "s", task.src), write_lines(tmp_path / "t", task.tgt)
    r = CliRunner().invoke(main, ["mine", *paths, "--model", model_dir, "--src-lang", "de", "--tgt-lang", "en",
                                  "--trust-lang", "--ids", "-q"])
    assert r.exit_code == 0, r.output
    pairs = {(int(line.split("\t")[-2]), int(line.split("\t")[-1])) for line in r.stdout.splitlines()}
    right = sum(p in task.gold for p in pairs)
    assert (got[0]["precision"], got[0]["recall"]) == pytest.approx((right / len(pairs), right / len(task.gold)))


def test_a_dev_set_given_twice_chooses_and_measures_what_it_does_alone(toy_model):
    """Each dev set weighs the same and draws its tasks from the same seed: one set twice is that set alone."""
    from bitextmine.encoding import encode
    from bitextmine.evaluation.mining_calibration import calibrate_sets

    s, t = toy_corpus(400, seed=27)
    x, y = encode(s, toy_model), encode(t, toy_model)
    alone, twice = calibrate_pair(x, y, sizes=(30, 100)), calibrate_sets([(x, y), (x, y)], sizes=(30, 100))
    assert (twice.settings, twice.measured, twice.f1, twice.global_f1) == (alone.settings, alone.measured, alone.f1,
                                                                          alone.global_f1)
    assert twice.pairs == 800
    small = calibrate_sets([(x, y), (x[:60], y[:60])], sizes=(30, 100))  # the small set allows 30 lines only
    assert [(m["lines"], m["share"]) for m in small.measured] == [(30, 0.5), (100, 0.5), (100, 0.1)]


def test_floors_chosen_on_dense_and_sparse_tasks_are_the_top_of_their_mean_surface(toy_model):
    """With shares (0.5, 0.1) the floors are the top of the mean of the two surfaces, each drawn as measured (0.5
    from the seed, 0.1 from the next, from 100 lines); a pair no second stage judges is calibrated so."""
    from bitextmine.encoding import encode
    from bitextmine.evaluation.mining_calibration import calibrate_sets, task_grids
    from bitextmine.evaluation.threshold_grid import best, settings

    s, t = toy_corpus(400, seed=29)
    x, y = encode(s, toy_model), encode(t, toy_model)
    both = calibrate_sets([(x, y)], sizes=(30, 100), shares=(0.5, 0.1))
    dense = task_grids(x, y, [30, 100], 0.5, np.random.default_rng(0))
    sparse = task_grids(x, y, [100], 0.1, np.random.default_rng(1))
    f1 = (np.mean([g[..., 2] for g in dense.values()], 0) + sparse[100][..., 2]) / 2
    assert both.settings == settings(best(f1)) and both.f1 == pytest.approx(f1[best(f1)])
    sparse_got = [m for m in both.measured if m["share"] == 0.1]  # what it measured is those tasks at that point
    assert len(sparse_got) == 1 and [sparse_got[0][k] for k in ("precision", "recall", "f1")] == pytest.approx(
        list(sparse[100][best(f1)]))
    with pytest.raises(ConfigError, match="floor shares"):
        calibrate_sets([(x, y)], sizes=(30, 100), shares=(0.3,))
    assert CalibrationConfig.floor_shares == (0.5,) and CalibrationConfig.floor_shares_alone == (0.5, 0.1)


def test_stage_tasks_take_their_gold_from_the_dev_pairs_and_distractors_from_the_filler():
    from bitextmine.evaluation.mining_calibration import stage_tasks

    from bitextmine.judge.tasks import clean_pool

    rng = np.random.default_rng(0)
    word = lambda i: "".join(chr(97 + int(d)) for d in str(i))  # noqa: E731 - distinct words, no digits
    pool = clean_pool([(f"fremd {word(i)} wort", f"english {word(i)} word") for i in range(300)])[0]
    filler = [(f"fuell {word(i)} satz", f"filler {word(i)} line") for i in range(3000)]
    assert len(pool) == 300
    config = CalibrationConfig(stage_lines=(100, 1000), stage_shares=(0.1,), stage_draws=2)
    got = stage_tasks(pool, filler, config, rng)
    assert [(size, share, len(t.src), len(t.tgt)) for size, share, t in got] == [
        (100, 0.1, 100, 100)] * 2 + [(1000, 0.1, 1000, 1000)] * 2
    dev = {f for f, _ in pool} | {e for _, e in pool}
    for _, _, t in got:
        assert all(t.src[i - 1] in dev and t.tgt[j - 1] in dev for i, j in t.gold)  # gold from the dev pairs
    assert sum(line.startswith("fuell") for line in got[-1][2].src) > 500  # the large task's distractors: filler
    no_filler = stage_tasks(pool, [], config, rng)  # the larger size is left out; the smallest is drawn
    assert [(size, len(t.src)) for size, _, t in no_filler] == [(100, 100)] * 2
    shrunk = stage_tasks(pool[:150], [], replace(config, stage_lines=(1000,)), rng)  # shrinks to what fits
    assert shrunk and all(50 <= len(t.src) < 100 for _, _, t in shrunk)


def test_calibrate_mining_takes_dev_sets_in_either_order_and_filler_for_large_stage_tasks(toy_stage_dir, tmp_path):
    """Two German-English dev sets (one given English first) and filler pairs: the stage's tasks of 1,000 lines
    come from the filler, and max_lines says so."""
    model_dir, files = model_with_dev_pairs(toy_stage_dir, tmp_path, 700, seed=41)
    s, t = toy_corpus(300, seed=42)
    other = write_lines(tmp_path / "o.en", t), write_lines(tmp_path / "o.de", s)
    s, t = toy_corpus(3000, seed=43)
    filler = write_lines(tmp_path / "f.de", s), write_lines(tmp_path / "f.en", t)
    r = calibrate_mining_cli(model_dir, files, "--pair", "en", "de", *other, "--filler", "de", "en", *filler,
                             "--stage-lines", "200", "--stage-lines", "1000", "--stage-draws", "1",
                             "--no-measure-defaults", "--floor-lines", "30", "--floor-lines", "100",
                             "--stage-own-lines", "1")
    assert r.exit_code == 0, r.output
    stage = json.load(open(os.path.join(model_dir, "config.json")))["mining"]["languages"]["de-en"]["second_stage"]
    assert stage["max_lines"] == 1000 and "from 2 dev sets" in stage["chosen_on"]
    assert sorted({m["lines"] for m in stage["measured"]}) == [200, 1000]
    r = calibrate_mining_cli(model_dir, files, "--filler", "fr", "en", *filler)
    assert r.exit_code != 0 and "--filler en-fr: no --pair of those languages" in r.output, r.output


def test_filler_given_in_the_other_order_of_the_languages_is_read_in_the_pairs_order(tmp_path):
    from bitextmine.evaluation.mining_calibration import _filler, _grouped

    de, en = write_lines(tmp_path / "f.de", ["eins", "zwei"]), write_lines(tmp_path / "f.en", ["one", "two"])
    for given in (("de", "en", de, en), ("en", "de", en, de)):
        assert sorted(_filler(_grouped([given]).get("de-en"), ("de", "en"), 0)) == [("eins", "one"), ("zwei", "two")]
    with pytest.raises(ConfigError, match="^--filler de de: expected two different languages$"):
        _grouped([("de", "de", de, en)], "--filler")


def _documents(n_docs: int, lines: int) -> tuple[list, list]:
    """(foreign, English) toy pairs in document order (``n_docs`` documents of ``lines`` lines), each line's
    document name."""
    word = lambda i: "".join(chr(97 + int(d)) for d in str(i))  # noqa: E731 - distinct words, no digits
    pairs = [(f"fremd {word(i)} wort", f"english {word(i)} word") for i in range(n_docs * lines)]
    return pairs, [f"doc{i // lines}" for i in range(n_docs * lines)]


def test_context_tasks_take_dev_pairs_as_gold_and_the_lines_around_them_as_distractors():
    """Against a slow reading of the task: every gold pair is a dev pair; every distractor is a line of the same
    document as a gold pair, nearer it than the document's far end; no distractor has its partner on the other
    side."""
    from bitextmine.evaluation.mining_calibration import context_tasks

    pairs, names = _documents(40, 60)
    dev = set(pairs[::7])  # every seventh line is a dev pair
    config = CalibrationConfig(context_lines=200, context_shares=(0.05, 0.1), stage_draws=2)
    got = context_tasks((pairs, names), dev, config, np.random.default_rng(0))
    assert [(size, share, len(t.src), len(t.tgt), len(t.gold)) for size, share, t in got] == [
        (200, 0.05, 200, 200, 10)] * 2 + [(200, 0.1, 200, 200, 20)] * 2
    at = {p: i for i, p in enumerate(pairs)}
    english = {e: i for i, (_, e) in enumerate(pairs)}
    foreign = {f: i for i, (f, _) in enumerate(pairs)}
    for _, _, t in got:
        gold_rows = {at[(t.src[i - 1], t.tgt[j - 1])] for i, j in t.gold}
        assert all(pairs[k] in dev for k in gold_rows) and len(gold_rows) == len(t.gold)
        gold_docs = {names[k] for k in gold_rows}
        rows = [foreign[f] for f in t.src] + [english[e] for e in t.tgt]
        assert {names[k] for k in rows} <= gold_docs  # the distractors come from the gold pairs' documents
        src_rows, tgt_rows = {foreign[f] for f in t.src}, {english[e] for e in t.tgt}
        assert src_rows & tgt_rows == gold_rows  # no distractor's partner is in the task
    assert context_tasks((pairs, names), set(), config, np.random.default_rng(0)) == []


def test_calibrate_mining_chooses_the_stage_on_context_tasks_too_and_refuses_bad_documents(toy_stage_dir, tmp_path):
    model_dir, files = model_with_dev_pairs(toy_stage_dir, tmp_path, 700, seed=51)
    s, t = toy_corpus(700, seed=51)
    docs = write_lines(tmp_path / "dev.docs", [f"d{i // 50}" for i in range(700)])
    base = ("--stage-lines", "200", "--stage-draws", "1", "--no-measure-defaults", "--floor-lines", "30")
    r = calibrate_mining_cli(model_dir, files, *base, "--context", "en", "de", files[1], files[0], docs)
    assert r.exit_code == 0, r.output
    stage = json.load(open(os.path.join(model_dir, "config.json")))["mining"]["languages"]["de-en"]["second_stage"]
    assert "from 1 dev set and 1 set of documents" in stage["chosen_on"]
    context = [m for m in stage["measured"] if m["share"] in (0.01, 0.04)]  # shares of the context tasks alone
    assert len(context) == 2 and all(50 <= m["lines"] < 700 for m in context)  # as large as the documents allow
    short = write_lines(tmp_path / "short.docs", ["d0"] * 699)
    other = write_lines(tmp_path / "other.de", ["ganz anders"] * 700)
    for extra, message in (
            (("--context", "de", "en", *files, short), "short.docs: 699 lines of document names against 700 lines"),
            (("--context", "fr", "en", *files, docs), "--context fr en: expected the two languages of a --pair"),
            (("--context", "de", "en", other, files[1], docs), "none of its 700 pairs is a dev pair"),
            (("--context", "de", "en", *files, docs, "--keep-settings"), "--context chooses the second stage's")):
        r = calibrate_mining_cli(model_dir, files, *[a for a in base if a != "--no-measure-defaults"], *extra)
        assert r.exit_code != 0 and message in r.output, (extra, r.output)
