"""Mining settings calibrated on dev pairs: the tasks, the choice, what is stored, and train doing it."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from bitextmine.cli import main
from bitextmine.errors import ConfigError
from bitextmine.evaluation.mining_calibration import (MIN_PAIRS, calibrate_mining, calibrate_pair, distinct_pairs,
                                                      draw_task, sizes_for)
from bitextmine.evaluation.threshold_grid import FLOORS, GRID, ZS
from bitextmine.loading import load_model
from conftest import toy_corpus, write_lines

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
    settings line says what the settings measured."""
    model_dir = str(tmp_path / "m")
    shutil.copytree(toy_model_dir, model_dir)
    s, t = toy_corpus(300, seed=22)
    files = write_lines(tmp_path / "dev.de", s), write_lines(tmp_path / "dev.en", t)
    r = CliRunner().invoke(main, ["calibrate-mining", "--model", model_dir, "--pair", "de", "en", *files])
    assert r.exit_code == 0, r.output
    section = json.load(open(os.path.join(model_dir, "config.json")))["mining"]
    assert section["version"] == 2 and list(section["languages"]) == ["de-en"]
    assert [m["lines"] for m in section["languages"]["de-en"]["measured"]] == [30, 100, 100]
    model = load_model(model_dir)
    assert model.fingerprint == load_model(toy_model_dir).fingerprint

    from bitextmine.config import MineConfig
    from bitextmine.mining.calibrated import choose

    choice = choose(MineConfig(), model.mining, ("en", "de"), lambda side: None)
    assert choice.calibrated and choice.config.threshold == section["languages"]["de-en"]["threshold"]
    assert "on its dev pairs: 50% translated, 30-100 lines: precision" in choice.describe()
    assert ", 10% translated, 100-100 lines: precision" in choice.describe()


def test_the_bundled_model_is_not_rewritten(tmp_path):
    s, t = toy_corpus(100, seed=23)
    files = write_lines(tmp_path / "a", s), write_lines(tmp_path / "b", t)
    with pytest.raises(ConfigError, match="the bundled model is part of the package"):
        calibrate_mining(load_model(), [("de", "en", *files)])


def test_train_with_two_languages_comes_out_calibrated(tmp_path):
    from bitextmine.config import TokenizerConfig, TrainConfig
    from bitextmine.corpus import CorpusSpec
    from bitextmine.training.loop import train

    s, t = toy_corpus(1500, seed=24)
    spec = CorpusSpec(src=write_lines(tmp_path / "c.de", s), tgt=write_lines(tmp_path / "c.en", t))
    logs = []
    config = TrainConfig(dim=32, epochs=1, batch_size=32, megabatch_max=2, megabatch_every=20, dev_pairs=200,
                         device="cpu")
    train([spec], str(tmp_path / "m"), config=config, tokenizer_config=TokenizerConfig(vocab_size=800),
          languages=("de", "en"), progress=lambda e: logs.append(e.get("message", "")))
    section = json.load(open(tmp_path / "m" / "config.json"))["mining"]
    n = int(section["chosen_on"].split(": ")[1].split()[0])  # the distinct ones of the 200 held apart
    assert list(section["languages"]) == ["de-en"] and 45 <= n <= 200
    assert any(m.startswith(f"mining settings for de-en on {n} held-apart pairs") for m in logs)
    train([spec], str(tmp_path / "one"), config=config, tokenizer_config=TokenizerConfig(vocab_size=800),
          progress=lambda e: logs.append(e.get("message", "")))
    assert "mining" not in json.load(open(tmp_path / "one" / "config.json"))
    assert any("record the model's two languages" in m for m in logs)
