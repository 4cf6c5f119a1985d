"""The map of the second stage's score that a model's calibration holds: fitted with weights, each kind of task and
share weighing the same, and applied wherever the stage scores a run's candidates."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from bitextmine.evaluation.stage_calibration import fit_cells_map, mapped_cells
from bitextmine.judge.logistic import adjust_to_prior, fit_logistic, fit_score_map, logit, map_score
from bitextmine.loading import load_model
from bitextmine.mining.calibrated import SCORE_MAP_OFF, calibrated_stage


def test_a_weight_of_two_counts_as_two_copies_of_the_row():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 2)), rng.random(300) < 0.3
    weight = rng.integers(1, 4, 300)
    weighted = fit_logistic(X, y, l2=0.5, weight=weight.astype(float))
    copies = fit_logistic(np.repeat(X, weight, 0), np.repeat(y, weight), l2=0.5)
    for k in ("mean", "std", "w", "b"):
        assert np.allclose(weighted[k], copies[k], atol=1e-8), k


def known_runs(n_runs: int, seed: int, true: dict) -> tuple:
    """Runs of candidates whose translations follow ``true`` (a score map): scores p (after the prior step),
    each run's share, labels."""
    rng = np.random.default_rng(seed)
    ps, shares, ys = [], [], []
    for _ in range(n_runs):
        share = rng.uniform(0.01, 0.6)
        p = rng.beta(0.5, 2, 2000)
        ps.append(p)
        shares.append(np.full(len(p), share))
        ys.append(rng.random(len(p)) < map_score(p, share, true))
    return np.concatenate(ps), np.concatenate(shares), np.concatenate(ys)


def test_the_fit_finds_the_map_the_labels_follow():
    true = {"score": 0.8, "share": 0.5, "bias": 0.7}
    p, share, y = known_runs(60, 1, true)
    found = fit_score_map(p, share, y)
    assert set(found) == {"score", "share", "bias"}
    for k in true:
        assert found[k] == pytest.approx(true[k], abs=0.08), k
    mapped = map_score(p[:2000], share[0], found)
    assert np.array_equal(np.argsort(mapped, kind="stable"), np.argsort(p[:2000], kind="stable"))  # order kept
    q = np.array([0.0, 1e-9, 0.2, 0.7, 1.0])
    assert np.allclose(map_score(q, 0.3, SCORE_MAP_OFF), np.clip(q, 1e-6, 1 - 1e-6))  # the map that leaves it
    assert np.allclose(1 / (1 + np.exp(-logit(q))), np.clip(q, 1e-6, 1 - 1e-6))


def test_each_kind_and_share_weighs_the_same_in_the_fit():
    rng = np.random.default_rng(2)

    def cells(n, share):
        p = rng.beta(0.5, 2, n)
        return {"prob": p, "share": share, "hit": rng.random(n) < p}

    small, large = cells(300, 0.05), cells(1200, 0.4)  # the large group is 4 times the small
    found = fit_cells_map([(("a", 0.05), small), (("a", 0.4), large)])
    # the small group's rows 4 times over; every row weighs 1,500 / 2,400, as the candidates' weights sum to 1,500
    by_hand = fit_score_map(np.r_[np.tile(small["prob"], 4), large["prob"]],
                            np.r_[np.full(1200, 0.05), np.full(1200, 0.4)], np.r_[np.tile(small["hit"], 4), large["hit"]],
                            np.full(2400, 1500 / 2400))
    for k in by_hand:
        assert found[k] == pytest.approx(by_hand[k], abs=1e-6), k
    got = mapped_cells(small, found)
    assert np.allclose(got["prob"], map_score(small["prob"], 0.05, found)) and got["hit"] is small["hit"]
    none = {"prob": np.zeros(0), "share": None, "hit": np.zeros(0, bool)}
    assert mapped_cells(none, found) is none
    assert fit_cells_map([(("a", 0.5), none)]) is None
    assert fit_cells_map([(("a", 0.5), {**small, "hit": np.zeros(300, bool)})]) is None  # no translation


def test_the_stage_applies_the_map_its_calibration_holds(toy_stage_dir):
    model = load_model(toy_stage_dir)
    stage = model.second_stage
    assert "score_map" not in stage.languages["de"]
    p = np.random.default_rng(3).beta(0.5, 2, 500)
    plain = adjust_to_prior(p, float(stage.languages["de"]["prior"]))[0]
    assert np.allclose(stage.adjust("de", p), plain)
    score_map = {"score": 1.3, "share": 0.6, "bias": 0.2}
    entry = {"threshold": 1.2, "min_z": 4.0, "min_cosine": 0.4,
             "second_stage": {"min_prob": 0.3, "max_lines": 1000, "measured": [], "score_map": score_map}}
    section = {"version": 4, "languages": {"de-en": entry}}
    mapped = calibrated_stage(stage, section)
    assert mapped.languages["de"]["score_map"] == score_map and mapped.languages["de"]["min_prob"] == 0.3
    assert np.allclose(mapped.adjust("de", p), map_score(plain, float(p.mean()), score_map))
    assert np.allclose(mapped.adjust("de", p, mapped=False), plain)
    assert len(mapped.adjust("de", np.zeros(0))) == 0
    without = {"version": 4, "languages": {"de-en": {**entry, "second_stage": {
        k: v for k, v in entry["second_stage"].items() if k != "score_map"}}}}
    assert "score_map" not in calibrated_stage(mapped, without).languages["de"]  # a map it no longer holds: dropped
    plain_again = mapped.unmapped()  # what the assist's joined score takes
    assert "score_map" not in plain_again.languages["de"] and plain_again.languages["de"]["min_prob"] == 0.3
    assert np.allclose(plain_again.adjust("de", p), plain) and plain_again._tables is mapped._tables


def test_the_defaults_are_measured_with_the_map_just_chosen(toy_stage_dir):
    from bitextmine.evaluation.mining_calibration import PairCalibration, with_entry

    model = load_model(toy_stage_dir)
    held = json.load(open(os.path.join(toy_stage_dir, "config.json"))).get("mining")
    score_map = {"score": 0.9, "share": 0.3, "bias": -0.1}
    c = PairCalibration({"threshold": 1.2, "min_z": 4.0, "min_cosine": 0.4},
                        stage={"min_prob": 0.35, "max_lines": 2000, "measured": [], "score_map": score_map})
    got = with_entry(model, ("de", "en"), c)
    assert got.second_stage.languages["de"]["score_map"] == score_map
    assert got.second_stage.languages["de"]["min_prob"] == 0.35 and got.mining["languages"]["de-en"] == c.entry()
    assert "score_map" not in model.second_stage.languages["de"] and model.mining == held  # the model untouched
    assert with_entry(model, ("de", "en"), PairCalibration(c.settings)) is model


def test_the_model_card_says_where_the_score_is_mapped(toy_stage_dir):
    from bitextmine.interop.card import second_stage_section

    stage = load_model(toy_stage_dir).second_stage
    assert "pairs whose score (not a calibrated probability), adjusted" in second_stage_section(stage)
    entry = {"threshold": 1.2, "min_z": 4.0, "min_cosine": 0.4, "second_stage": {
        "min_prob": 0.3, "max_lines": 1000, "measured": [], "score_map": {"score": 1.0, "share": 0.5, "bias": 0.0}}}
    mapped = calibrated_stage(stage, {"version": 4, "languages": {"de-en": entry}})
    assert "and, for de, mapped by the calibration to follow the share of translations" in second_stage_section(mapped)
