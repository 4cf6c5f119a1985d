"""The second stage's settings in a model's calibration: chosen on dev tasks, stored, checked on load, and used."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest

from bitextmine.config import MineConfig
from bitextmine.errors import ModelFormatError
from bitextmine.evaluation.stage_calibration import GRID, best_floor, f_beta, mean_f1, prf_at
from bitextmine.loading import load_model
from bitextmine.mining.calibrated import check_section
from bitextmine.pipeline import mine_files
from conftest import calibrate_mining_cli, model_with_dev_pairs, toy_corpus, train_toy_pair, write_lines


def random_cells(rng, n=40, lines=12, gold=5) -> dict:
    """Candidates of a made-up task: pairs of ``lines`` rows a side (distinct), the pairs (i, i) for i < gold the
    translations, random margins, scores, and floors."""
    pairs = np.unique(rng.integers(0, lines, (n, 2)), axis=0)
    pairs = np.r_[pairs, [[i, i] for i in range(gold)]]
    pairs = np.unique(pairs, axis=0)
    return {"pairs": pairs.astype(np.int64), "margin": rng.random(len(pairs)).round(2) + 1.0,
            "prob": rng.random(len(pairs)), "hit": (pairs[:, 0] == pairs[:, 1]) & (pairs[:, 0] < gold),
            "floors": rng.random(len(pairs)) < 0.8, "n_gold": gold, "lines": lines}


def slow_prf(c: dict, p: float) -> tuple[float, float, float]:
    """The obvious reference: candidates in descending margin (ties: the earlier first), each kept when it passes
    the floors, reaches p and both its rows are still free."""
    used_s, used_t, kept = set(), set(), []
    for i in sorted(range(len(c["pairs"])), key=lambda i: (-c["margin"][i], i)):
        s, t = c["pairs"][i]
        if c["floors"][i] and c["prob"][i] >= p and s not in used_s and t not in used_t:
            used_s.add(s), used_t.add(t), kept.append(i)
    tp = sum(bool(c["hit"][i]) for i in kept)
    precision = tp / len(kept) if kept else 1.0
    recall = tp / c["n_gold"]
    return precision, recall, (2 * precision * recall / (precision + recall) if tp else 0.0)


def test_prf_at_a_floor_against_the_obvious_selection():
    rng = np.random.default_rng(0)
    for _ in range(30):
        c = random_cells(rng)
        for p in (-1.0, 0.0, 0.3, 0.7, 1.0):
            assert prf_at(c, p) == pytest.approx(slow_prf(c, p))


def test_prf_at_prints_the_floors_pairs_where_mines_fail_safe_would():
    """Against the obvious selection: where the stage's share is 0.15 or more and it keeps fewer than 80 % of the
    floors' pairs, the floors' pairs count (as mine prints them); below that share, or keeping more, the stage's."""
    from bitextmine.config import MineConfig

    rng = np.random.default_rng(2)
    seen = set()
    for _ in range(40):
        c = random_cells(rng)
        for share in (None, 0.1, 0.15, 0.4):
            cells = {**c, "share": share}
            for p in (-1.0, 0.3, 0.7):
                stage, floors = slow_prf(c, p), slow_prf(c, -1.0)
                kept = sum(1 for _ in _slow_kept(c, p))
                falls = (p >= 0 and share is not None and share >= MineConfig.fail_safe_share
                         and kept < MineConfig.fail_safe_keep * sum(1 for _ in _slow_kept(c, -1.0)))
                seen.add(falls)
                assert prf_at(cells, p) == pytest.approx(floors if falls else stage)
    assert seen == {True, False}


def _slow_kept(c: dict, p: float):
    used_s, used_t = set(), set()
    for i in sorted(range(len(c["pairs"])), key=lambda i: (-c["margin"][i], i)):
        s, t = c["pairs"][i]
        if c["floors"][i] and c["prob"][i] >= p and s not in used_s and t not in used_t:
            used_s.add(s), used_t.add(t)
            yield i


def test_f_beta_weighs_precision_more_below_one():
    assert f_beta(0.6, 0.9) == pytest.approx(2 * 0.6 * 0.9 / 1.5) and f_beta(1.0, 0.0, 0.5) == 0.0
    assert f_beta(0.5, 1.0, 0.5) == pytest.approx(1.25 * 0.5 / (0.25 * 0.5 + 1.0))
    assert f_beta(0.5, 1.0, 0.5) < f_beta(1.0, 0.5, 0.5)  # the same two figures the other way round score higher
    assert 0.002 in GRID and GRID.max() < 1


@pytest.mark.parametrize("beta, seed, golds", [(1.0, 1, ((0.01, 1), (0.01, 2), (0.5, 6), (0.5, 6))),
                                              (0.5, 3, ((0.01, 1), (0.01, 2), (0.1, 3), (0.5, 6)))])
def test_the_floor_chosen_is_the_best_mean_f_beta_among_those_the_dense_tasks_allow(beta, seed, golds):
    rng = np.random.default_rng(seed)
    tasks = [(share, random_cells(rng, gold=g)) for share, g in golds]
    dense = [c for share, c in tasks if share == 0.5]
    grid = np.round(np.arange(0.0, 1.0, 0.05), 2)
    alone = np.mean([slow_prf(c, -1.0)[2] for c in dense])
    allowed = [p for p in grid if np.mean([slow_prf(c, p)[2] for c in dense]) >= alone - 0.01]
    b2 = beta * beta

    def by_hand(p):  # each share weighs the same; F-beta from the obvious selection's precision and recall
        return np.mean([np.mean([((1 + b2) * a * r / (b2 * a + r) if a + r else 0.0)
                                 for a, r, _ in (slow_prf(c, p) for s, c in tasks if s == share)])
                        for share in sorted({s for s, _ in golds})])

    chosen = best_floor(tasks, dense, 0.01, grid, beta=beta)
    assert chosen in allowed and by_hand(chosen) == pytest.approx(max(by_hand(p) for p in allowed))
    assert mean_f1(tasks, chosen, beta) == pytest.approx(by_hand(chosen))


def test_the_stage_settings_of_a_calibration_are_checked_on_load():
    ok = {"threshold": 1.2, "min_z": 4.0, "min_cosine": 0.4}
    m = {"lines": 1000, "share": 0.01, "precision": 0.9, "recall": 0.8, "f1": 0.85}
    stage = {"min_prob": 0.4, "max_lines": 1000, "measured": [m], "chosen_on": "here"}
    check_section({"version": 3, "languages": {"de-en": {**ok, "second_stage": stage}}}, "x")
    check_section({"version": 3, "languages": {"de-en": {**ok, "second_stage": {**stage, "kept": True}}}}, "x")
    for bad in ({**stage, "min_prob": 1.5}, {**stage, "max_lines": 0}, {**stage, "max_lines": 10.5},
                {**stage, "measured": [{**m, "f1": None}]}, {**stage, "kept": "yes"}, {"min_prob": 0.4}):
        with pytest.raises(ModelFormatError, match="\"second_stage\" must be, for a pair with en"):
            check_section({"version": 3, "languages": {"de-en": {**ok, "second_stage": bad}}}, "x")
    with pytest.raises(ModelFormatError, match="\"second_stage\" must be, for a pair with en"):
        check_section({"version": 3, "languages": {"de-fr": {**ok, "second_stage": stage}}}, "x")
    with pytest.raises(ModelFormatError, match="\"second_stage\" in a section of version 2; it came with version 3"):
        check_section({"version": 2, "languages": {"de-en": {**ok, "second_stage": stage}}}, "x")
    score_map = {"score": 1.2, "share": 0.4, "bias": -0.3}
    check_section({"version": 4, "languages": {"de-en": {**ok, "second_stage": {**stage, "score_map": score_map}}}},
                  "x")
    for bad in ({**score_map, "score": 0.0}, {**score_map, "bias": None}, {"score": 1.0, "share": 0.0},
                {**score_map, "extra": 1.0}, [1.0, 0.0, 0.0]):
        with pytest.raises(ModelFormatError, match="\"score_map\" \\({\"score\": a number above 0"):
            check_section({"version": 4, "languages": {"de-en": {**ok, "second_stage": {**stage, "score_map": bad}}}},
                          "x")
    with pytest.raises(ModelFormatError, match="\"score_map\" in a section of version 3; it came with version 4"):
        check_section({"version": 3, "languages": {"de-en": {**ok, "second_stage": {**stage, "score_map": score_map}}}},
                      "x")
    with pytest.raises(ModelFormatError, match="reads versions 1, 2, 3, 4"):
        check_section({"version": 5, "languages": {}}, "x")


@pytest.fixture
def calibrated_stage_dir(toy_stage_dir, tmp_path):
    """A copy of the toy model with a second stage, calibrated on German-English dev pairs by the command."""
    model_dir, files = model_with_dev_pairs(toy_stage_dir, tmp_path, 700, 31)
    r = calibrate_mining_cli(model_dir, files)
    assert r.exit_code == 0, r.output
    return model_dir, files, r.output


def test_calibrate_mining_chooses_the_stage_settings_and_mine_uses_them(calibrated_stage_dir, tmp_path):
    model_dir, dev, output = calibrated_stage_dir
    entry = json.load(open(os.path.join(model_dir, "config.json")))["mining"]["languages"]["de-en"]
    got = entry["second_stage"]
    assert got["min_prob"] in GRID and [m["share"] for m in got["measured"]] == [0.01, 0.05, 0.1, 0.5]
    assert got["max_lines"] == 30000 and got["chosen_on"].startswith(
        "calibrate-mining: tasks at 1%, 5%, 10%, 50% translated, 1,000 lines a side asked")
    m = got["score_map"]
    assert got["chosen_on"].endswith("; the score mapped by a fit on the tasks' candidates") and m["score"] > 0
    assert (f"second stage: --min-prob {got['min_prob']:g} (chosen on tasks from the dev pairs, on its score mapped by "
            f"{m['score']:.3f} logit(score) + {m['share']:.3f} logit(share) + {m['bias']:.3f})") in output
    assert entry["defaults_second_stage"] is True

    stage = load_model(model_dir).second_stage
    assert (stage.languages["de"]["min_prob"], stage.languages["de"]["max_lines"],
            stage.languages["de"]["score_map"]) == (got["min_prob"], got["max_lines"], got["score_map"])
    s, t = toy_corpus(2400, seed=32)  # sides of 1,100 lines: larger than the tasks, own margins up to 30,000
    files = write_lines(tmp_path / "a.de", s[:1100]), write_lines(tmp_path / "b.en", t[1000:2100])
    run = lambda: mine_files(*files, io.StringIO(), model=load_model(model_dir),  # noqa: E731
                             config=MineConfig(trust_langs=True), src_lang="de", tgt_lang="en")
    stats = run()
    assert f"|second-stage:de:min-prob{got['min_prob']:g}|" in stats.signature
    assert "margins against samples" not in stats.info["settings"]

    r = calibrate_mining_cli(model_dir, dev, "--stage-own-lines", "1", "--no-measure-defaults")
    assert r.exit_code == 0, r.output
    got = json.load(open(os.path.join(model_dir, "config.json")))["mining"]["languages"]["de-en"]["second_stage"]
    assert got["max_lines"] == max(m["lines"] for m in got["measured"]) <= 1000  # the largest task
    assert f"margins against samples of {got['max_lines']:,} lines a side" in run().info["settings"]


def test_keep_settings_keeps_the_stage_settings_and_marks_them_kept(calibrated_stage_dir):
    model_dir, files, _ = calibrated_stage_dir
    before = json.load(open(os.path.join(model_dir, "config.json")))["mining"]["languages"]["de-en"]["second_stage"]
    r = calibrate_mining_cli(model_dir, files, "--keep-settings")
    assert r.exit_code == 0 and f"--min-prob {before['min_prob']:g} (kept, the model's, on its score mapped by" in r.output, r.output
    after = json.load(open(os.path.join(model_dir, "config.json")))["mining"]["languages"]["de-en"]["second_stage"]
    assert after == {**before, "kept": True}


def test_keep_floors_keeps_the_floors_and_chooses_the_stage_settings_with_them(calibrated_stage_dir):
    model_dir, files, _ = calibrated_stage_dir
    path = os.path.join(model_dir, "config.json")
    config = json.load(open(path))
    held = {"threshold": 1.1, "min_z": 0.0, "min_cosine": 0.2}  # floors the command would not choose
    config["mining"]["languages"]["de-en"].update(held)
    json.dump(config, open(path, "w"))
    r = calibrate_mining_cli(model_dir, files, "--keep-floors", "--stage-beta", "0.5", "--no-measure-defaults")
    assert r.exit_code == 0, r.output
    assert "de-en: --threshold 1.1 --min-z 0 --min-cosine 0.2 (kept, the model's" in r.output
    assert "(chosen on tasks from the dev pairs, on its score mapped by" in r.output
    section = json.load(open(path))["mining"]
    entry = section["languages"]["de-en"]
    assert {k: entry[k] for k in held} == held and "kept" not in entry["second_stage"]
    assert entry["second_stage"]["chosen_on"].endswith(
        "; the best mean F-beta, beta 0.5; the score mapped by a fit on the tasks' candidates")
    assert section["chosen_on"].endswith("stage beta 0.5 (--keep-floors)")  # nothing measured: no such words
    assert "; the second stage's settings chosen by bitextmine calibrate-mining" in section["chosen_on"]
    r = calibrate_mining_cli(model_dir, files, "--keep-floors", "--keep-settings")
    assert r.exit_code == 1 and r.output.strip().splitlines()[-1] == (
        "Error: --keep-settings keeps the floors too: give --keep-settings or --keep-floors, not both")


def test_a_model_whose_calibration_holds_no_stage_settings_uses_the_stage_files(toy_stage_dir):
    model = load_model(toy_stage_dir)
    on_disk = json.load(open(os.path.join(toy_stage_dir, "second_stage", "second_stage.json")))["languages"]["de"]
    assert model.second_stage.languages["de"]["min_prob"] == on_disk["min_prob"]
    assert model.second_stage.languages["de"]["max_lines"] == on_disk["max_lines"]


def test_train_with_two_languages_and_a_second_stage_comes_out_with_its_settings_chosen(tmp_path, monkeypatch):
    """train --lang de --lang en --second-stage: the stage's min_prob and max_lines are chosen on the held-apart
    pairs (not the 0.5 the stage's file holds) and mine's defaults measured with them, score map included."""
    from bitextmine.config import SecondStageConfig
    from bitextmine.evaluation import mining_calibration

    seen, measure = [], mining_calibration.measure_pair
    monkeypatch.setattr(mining_calibration, "measure_pair", lambda model, langs, *a, **k: (
        seen.append(dict(model.second_stage.languages["de"])), measure(model, langs, *a, **k))[1])
    logs = []
    train_toy_pair(tmp_path, 3000, 33, 600, logs,
                   second_stage=SecondStageConfig(sizes=(200,), shares=(0.05, 0.5), task_pairs=500))
    entry = json.load(open(tmp_path / "m" / "config.json"))["mining"]["languages"]["de-en"]
    got = entry["second_stage"]
    assert got["min_prob"] in GRID and got["max_lines"] == 30000  # own margins up to 30,000 lines (calibrate)
    assert entry["defaults_second_stage"] is True
    assert any(m.startswith(f"second stage for de-en on held-apart tasks: min-prob {got['min_prob']:g}")
               for m in logs)
    on_disk = json.load(open(tmp_path / "m" / "second_stage" / "second_stage.json"))["languages"]["de"]
    assert on_disk["min_prob"] == 0.5 and load_model(str(tmp_path / "m")).second_stage.languages["de"][
        "min_prob"] == got["min_prob"]
    assert [(s["min_prob"], s.get("score_map")) for s in seen] == [(got["min_prob"], got.get("score_map"))]


def test_keep_settings_on_a_calibration_without_stage_settings_takes_the_stage_files(toy_stage_dir, tmp_path):
    from bitextmine.mining.calibrated import write_section

    model_dir, files = model_with_dev_pairs(toy_stage_dir, tmp_path, 400, 34)
    write_section(model_dir, {"de-en": {"threshold": 1.1, "min_z": 0.0, "min_cosine": 0.2}}, "by hand")
    r = calibrate_mining_cli(model_dir, files, "--keep-settings")
    assert r.exit_code == 0, r.output
    on_disk = json.load(open(os.path.join(model_dir, "second_stage", "second_stage.json")))
    got = json.load(open(os.path.join(model_dir, "config.json")))["mining"]["languages"]["de-en"]["second_stage"]
    assert got == {"min_prob": on_disk["languages"]["de"]["min_prob"], "kept": True, "measured": [],
                   "max_lines": on_disk["languages"]["de"]["max_lines"], "chosen_on": on_disk["chosen_on"]}


def test_a_stage_built_anew_clears_what_the_calibration_chose_and_measured_with_the_old_one(calibrated_stage_dir,
                                                                                           tmp_path):
    model_dir, _, _ = calibrated_stage_dir
    before = json.load(open(os.path.join(model_dir, "config.json")))["mining"]["languages"]["de-en"]
    assert {"second_stage", "defaults_measured"} <= set(before)
    from bitextmine.config import SecondStageConfig
    from bitextmine.corpus import CorpusSpec
    from bitextmine.judge.build import build_second_stage

    specs = []
    for k in range(2):
        src, tgt = toy_corpus(1200, seed=40 + k)
        specs.append(CorpusSpec(src=write_lines(tmp_path / f"c{k}.de", src),
                                tgt=write_lines(tmp_path / f"c{k}.en", tgt)))
    report = build_second_stage(model_dir, specs, SecondStageConfig(sizes=(200,), shares=(0.05, 0.5), task_pairs=500))
    assert report["de"]["calibration_cleared"] is True
    after = json.load(open(os.path.join(model_dir, "config.json")))["mining"]["languages"]["de-en"]
    assert after == {k: v for k, v in before.items() if k not in ("second_stage", "defaults_measured",
                                                                   "defaults_second_stage", "assist_measured")}
    on_disk = json.load(open(os.path.join(model_dir, "second_stage", "second_stage.json")))["languages"]["de"]
    assert load_model(model_dir).second_stage.languages["de"]["min_prob"] == on_disk["min_prob"] == 0.5
