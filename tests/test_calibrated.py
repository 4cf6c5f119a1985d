"""Mining settings calibrated per language: the model's "mining" section, language detection of a side,
and how `mine` applies them."""

import io
import json
import os
import shutil
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from bitextmine.cli import main
from bitextmine.config import Floors, MineConfig
from bitextmine.errors import ConfigError, ModelFormatError
from bitextmine.language import side_language
from bitextmine.mining.calibrated import apply, settings_for, write_section
from bitextmine.pipeline import mine_files
from bitextmine.loading import load_model

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")
SECTION = {"version": 1, "languages": {"de": {"threshold": 1.3, "min_z": 3.0, "min_cosine": 0.35}}}


def test_settings_for_a_language_with_english_in_either_order():
    want = {"threshold": 1.3, "min_z": 3.0, "min_cosine": 0.35}
    assert settings_for(SECTION, "de", "en") == want
    assert settings_for(SECTION, "en", "de") == want
    for pair in (("de", "fr"), ("fr", "en"), ("de", None), (None, None), ("en", "en")):
        assert settings_for(SECTION, *pair) is None
    assert settings_for(None, "de", "en") is None


def test_apply_only_when_per_language_is_on():
    config, applied = apply(MineConfig(), SECTION, "en", "de")
    assert applied and (config.threshold, config.min_z, config.min_cosine) == (1.3, 3.0, 0.35)
    assert config.k == MineConfig.k and config.min_prob == Floors().min_prob  # the rest is kept or the default
    off = MineConfig(per_language=False)
    assert apply(off, SECTION, "en", "de") == (off.resolved(), False)
    assert apply(MineConfig(), SECTION, "en", "fr") == (MineConfig().resolved(), False)


def test_apply_keeps_the_settings_given():
    config, applied = apply(MineConfig(threshold=2.0), SECTION, "en", "de")
    assert applied and (config.threshold, config.min_z, config.min_cosine) == (2.0, 3.0, 0.35)
    everything = MineConfig(threshold=1.18, min_z=4.5, min_cosine=0.0, min_prob=0.5)
    assert apply(everything, SECTION, "en", "de") == (everything, False)


def test_the_python_api_mines_with_the_settings_it_is_given(calibrated_dir):
    """A MineConfig with numbers is mined with those numbers, calibration or not; None takes the calibration."""
    given = MineConfig(threshold=1.5, min_z=0, min_cosine=0)
    rows, stats = _mine(calibrated_dir, config=given)
    assert "|threshold:1.5|min-cosine:0|min-z:0" in stats.signature and stats.info["calibrated_for"] is None
    assert stats.info["settings"].startswith("settings given: threshold 1.5, min-z 0, min-cosine 0")
    rows, stats = _mine(calibrated_dir, config=MineConfig(min_z=0))  # the threshold and cosine stay calibrated
    assert "|threshold:1e+09|" in stats.signature and "|min-z:0" in stats.signature


def _blocking_model(toy_model_dir, out: str, languages: list[str], lang: str) -> str:
    """A copy of the toy model at ``out`` with ``languages`` and settings for ``lang`` that keep no pair
    (threshold 1e9)."""
    shutil.copytree(toy_model_dir, out)
    path = os.path.join(out, "config.json")
    cfg = json.load(open(path))
    cfg["languages"] = languages
    json.dump(cfg, open(path, "w"))
    write_section(out, {lang: {"threshold": 1e9, "min_z": 0, "min_cosine": 0}}, "a test")
    return out


@pytest.fixture()
def calibrated_dir(tmp_path, toy_model_dir):
    """The toy model with languages and a calibration for German that keeps no pair (threshold 1e9)."""
    return _blocking_model(toy_model_dir, str(tmp_path / "m"), ["en", "de", "fr"], "de")


def test_write_section_round_trips_and_keeps_the_fingerprint(calibrated_dir, toy_model_dir):
    model = load_model(calibrated_dir)
    assert model.mining["version"] == 4
    assert model.mining["languages"]["de-en"] == {"threshold": 1e9, "min_z": 0.0, "min_cosine": 0.0}
    assert model.mining["chosen_on"] == "a test"
    assert model.fingerprint == load_model(toy_model_dir).fingerprint


def test_pairs_written_by_another_run_keep_the_provenance_they_came_with(calibrated_dir):
    floors = {"threshold": 1.2, "min_z": 0.0, "min_cosine": 0.3}
    write_section(calibrated_dir, {"en-fr": floors}, "a second test")
    write_section(calibrated_dir, {"de-fr": {**floors, "chosen_on": "pivot pairs"}}, "a third test")
    got = load_model(calibrated_dir).mining
    assert got["chosen_on"] == "a third test" and got["languages"]["de-fr"]["chosen_on"] == "pivot pairs"
    assert got["languages"]["de-en"]["chosen_on"] == "a test"  # each stamped when another run wrote
    assert got["languages"]["en-fr"] == {**floors, "chosen_on": "a second test"}
    write_section(calibrated_dir, {"de-fr": floors}, "a third test")  # the same run again: nothing to stamp
    assert "chosen_on" not in load_model(calibrated_dir).mining["languages"]["de-fr"]


@pytest.mark.parametrize("section, says", [({"version": 5, "languages": {}}, "version 5"),
                                           ({"version": 1}, "no \"languages\""),
                                           ({"version": 1, "languages": {"de": {"threshold": "x"}}}, "'de'"),
                                           ({"version": 2, "languages": {"en-de": {"threshold": 1, "min_z": 0,
                                                                                   "min_cosine": 0}}}, "sorted"),
                                           ({"version": 2, "languages": {"de-en": {"threshold": float("nan"),
                                                                                   "min_z": 0, "min_cosine": 0}}},
                                            "finite"),
                                           ({"version": 2, "languages": {"de-en": {"threshold": 1, "min_z": 0,
                                                                                   "min_cosine": 0,
                                                                                   "measured": [{"lines": 30}]}}},
                                            "measured"),
                                           ({"version": 3, "languages": {"de-en": {"threshold": 1, "min_z": 0,
                                                                                   "min_cosine": 0,
                                                                                   "chosen_on": 3}}},
                                            "\"chosen_on\" must be text")])
def test_a_bad_mining_section_is_refused_on_load(calibrated_dir, section, says):
    path = os.path.join(calibrated_dir, "config.json")
    cfg = json.load(open(path))
    cfg["mining"] = section
    json.dump(cfg, open(path, "w"))
    with pytest.raises(ModelFormatError, match="config.json") as e:
        load_model(calibrated_dir)
    assert says in str(e.value)


def test_side_language_votes_over_lines():
    de = open(os.path.join(EXAMPLES, "de.txt"), encoding="utf-8").read().splitlines()
    en = open(os.path.join(EXAMPLES, "en.txt"), encoding="utf-8").read().splitlines()
    assert side_language(de) == ("de", 1.0)
    assert side_language(en) == ("en", 1.0)
    lang, share = side_language(de[:10] + en[:10])
    assert lang is None and share == 0.5  # no language has 60 % of the lines
    assert side_language([]) == (None, 0.0)


PORTUGUESE = [
    "O comboio para Lisboa está atrasado vinte minutos hoje.", "A minha avó faz um bolo de maçã todos os domingos.",
    "Por favor, apaga a luz quando saíres do quarto.", "O museu está fechado às segundas-feiras.",
    "Ela aprende japonês há dois anos.", "A chave está debaixo do tapete.", "O café está muito quente.",
    "A impressora do segundo andar está avariada outra vez.", "Esqueci-me de regar as flores.",
    "O jantar fica pronto dentro de meia hora.", "A casa é muito grande e bonita.",
    "Eu gosto de comer peixe com arroz.", "Ela comprou um vestido novo para a festa.",
    "Preciso de ir ao médico esta semana.",
]


def test_a_language_the_model_has_no_settings_for_is_not_taken_for_a_close_one():
    assert side_language(PORTUGUESE) == ("pt", 1.0)  # the identifier's own guess, not Spanish


@pytest.fixture()
def spanish_dir(tmp_path, toy_model_dir):
    """The toy model with settings for Spanish that keep no pair (threshold 1e9)."""
    return _blocking_model(toy_model_dir, str(tmp_path / "es"), ["en", "es"], "es")


def test_portuguese_gets_the_global_defaults_not_spanish_settings(spanish_dir, tmp_path):
    src = tmp_path / "pt.txt"
    src.write_text("\n".join(PORTUGUESE) + "\n", encoding="utf-8")
    out = io.StringIO()
    low = MineConfig(threshold=0.0, min_z=0.0)
    stats = mine_files(str(src), os.path.join(EXAMPLES, "en.txt"), out, model=load_model(spanish_dir), config=low)
    assert out.getvalue() and stats.info["calibrated_for"] is None
    said = stats.info["settings"]
    assert said.startswith("settings given: threshold 0, min-z 0, min-cosine 0, not per language: the model holds "
                           "no settings for pt-en (it holds en-es)") and "source pt (detected); target en (detected)" in said


def _mine(model_dir, **kw):
    out = io.StringIO()
    stats = mine_files(os.path.join(EXAMPLES, "de.txt"), os.path.join(EXAMPLES, "en.txt"), out,
                       model=load_model(model_dir), **kw)
    return out.getvalue().splitlines(), stats


def test_mine_applies_the_calibration_of_the_detected_languages(calibrated_dir, toy_model_dir):
    low = MineConfig(threshold=0.0, min_z=0.0)  # the toy model knows no German: keep every candidate
    plain, plain_stats = _mine(toy_model_dir, config=low)
    assert plain and "calibrated" not in plain_stats.signature  # no section: the settings given
    rows, stats = _mine(calibrated_dir)  # the settings left to the model: its calibration (threshold 1e9)
    assert rows == [] and stats.info["calibrated_for"] == ("de", "en")
    assert "|threshold:1e+09|" in stats.signature and stats.signature.endswith("|calibrated:de-en")
    rows, stats = _mine(calibrated_dir, config=MineConfig(threshold=0.0, min_z=0.0, per_language=False))
    assert rows == plain and stats.info["calibrated_for"] is None
    # a pair the model has no settings for (German taken as French on purpose)
    rows, stats = _mine(calibrated_dir, config=replace(low, trust_langs=True), src_lang="fr")
    assert rows == plain and stats.info["calibrated_for"] is None


def test_a_declared_language_the_text_contradicts_is_refused_unless_insisted_on(calibrated_dir):
    de, en = os.path.join(EXAMPLES, "de.txt"), os.path.join(EXAMPLES, "en.txt")
    with pytest.raises(ConfigError, match=r"^--src-lang fr: .*de\.txt reads as de, not fr, on most of its first "
                                          r"lines; declare --src-lang de, or give --trust-lang to mine it as fr$"):
        _mine(calibrated_dir, src_lang="fr")
    with pytest.raises(ConfigError, match=r"^--tgt-lang de: .*en\.txt reads as en, not de"):
        _mine(calibrated_dir, src_lang="de", tgt_lang="de")
    rows, stats = _mine(calibrated_dir, src_lang="de", tgt_lang="en")  # declared right: taken
    assert stats.info["calibrated_for"] == ("de", "en")
    r = CliRunner().invoke(main, ["mine", de, en, "--model", calibrated_dir, "--src-lang", "fr", "-q"])
    assert r.exit_code == 1 and r.output.startswith("Error: --src-lang fr: ") and r.output.count("\n") == 1
    r = CliRunner().invoke(main, ["mine", de, en, "--model", calibrated_dir, "--src-lang", "fr", "--trust-lang", "-q"])
    assert r.exit_code == 0 and "source fr (given)" in r.output


def test_the_settings_used_are_said_in_one_line(calibrated_dir):
    rows, stats = _mine(calibrated_dir)
    assert stats.info["settings"] == ("settings calibrated for de-en: threshold 1e+09, min-z 0, min-cosine 0; "
                                      "languages: source de (detected); target en (detected)")
    rows, stats = _mine(calibrated_dir, src_lang="de", tgt_lang="en")
    assert stats.info["settings"].endswith("languages: source de (given); target en (given)")
    rows, stats = _mine(calibrated_dir, config=MineConfig(per_language=False))
    assert stats.info["settings"].startswith(f"global defaults: threshold {Floors().threshold:g}, "
                                             f"min-z {Floors().min_z:g}, min-cosine {Floors().min_cosine:g}, "
                                             "not per language: per-language settings off")


@pytest.mark.parametrize("how, says", [
    ("sif", "SIF-weighted embeddings (--sif)"),
    ("external", "external embeddings"),
])
def test_settings_calibrated_on_plain_embeddings_are_not_used_for_other_vectors(calibrated_dir, tmp_path, how, says):
    from bitextmine.config import EncodeConfig
    from bitextmine.encoding import encode

    low = MineConfig(threshold=0.0, min_z=0.0)
    kw = {}
    if how == "sif":
        kw["encode_config"] = EncodeConfig(device="cpu", sif=True)
    else:
        model = load_model(calibrated_dir)
        for side, name in (("src", "de.txt"), ("tgt", "en.txt")):
            lines = open(os.path.join(EXAMPLES, name), encoding="utf-8").read().splitlines()
            np.save(tmp_path / f"{side}.npy", encode(lines, model, config=EncodeConfig(device="cpu")))
        kw.update(src_emb=str(tmp_path / "src.npy"), tgt_emb=str(tmp_path / "tgt.npy"))
    rows, stats = _mine(calibrated_dir, config=low, **kw)
    assert rows and stats.info["calibrated_for"] is None  # the German settings (threshold 1e9) would keep none
    assert says in stats.info["settings"] and "plain embeddings" in stats.info["settings"]
    assert "calibrated" not in stats.signature


@pytest.mark.parametrize("config, says", [
    (MineConfig(threshold=0.0, min_z=0.0, k=8), "--k 8"),
    (MineConfig(threshold=0.0, min_z=0.0, margin="distance"), "--margin distance"),
    (MineConfig(threshold=0.0, min_z=0.0, margin="absolute", k=2), "--margin absolute and --k 2"),
])
def test_settings_calibrated_for_the_default_margin_are_not_used_for_another(calibrated_dir, config, says):
    rows, stats = _mine(calibrated_dir, config=config)
    assert rows and stats.info["calibrated_for"] is None  # the German settings (threshold 1e9) would keep none
    assert f"not per language: {says}; the per-language settings were chosen with the default ratio margin over 4 " \
           "neighbours" in stats.info["settings"]


def test_another_margin_with_the_default_threshold_is_a_config_error(calibrated_dir):
    from bitextmine.errors import ConfigError

    for margin in ("distance", "absolute"):
        with pytest.raises(ConfigError, match=f"--margin {margin} with the default threshold .* give --threshold"):
            _mine(calibrated_dir, config=MineConfig(margin=margin))
    rows, _ = _mine(calibrated_dir, config=MineConfig(margin="distance", threshold=Floors().threshold, min_z=0.0))
    assert rows == []  # given on purpose: taken as given
    with pytest.raises(ConfigError, match="--min-prob with --no-second-stage"):
        _mine(calibrated_dir, config=MineConfig(second_stage=False, min_prob=0.9))


def test_a_language_code_no_check_knows_is_a_config_error(calibrated_dir):
    from bitextmine.config import RuleConfig
    from bitextmine.errors import ConfigError

    for kw in ({"src_lang": "xx"}, {"tgt_lang": "english"}, {"src_lang": "xx", "rules": RuleConfig()}):
        with pytest.raises(ConfigError, match=r"--(src|tgt)-lang '(xx|english)': not a language .* one of: .*\bde\b"):
            _mine(calibrated_dir, **kw)


def test_cli_options_given_replace_only_their_own_calibrated_value(calibrated_dir):
    args = ["mine", os.path.join(EXAMPLES, "de.txt"), os.path.join(EXAMPLES, "en.txt"), "--model", calibrated_dir]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0 and r.stdout == "" and "|threshold:1e+09|" in r.stderr and "calibrated:de-en" in r.stderr
    for extra in (["--min-cosine", "0"], ["--min-z", "0"]):  # given, even at the default: the threshold stays calibrated
        r = CliRunner().invoke(main, args + extra)
        assert r.exit_code == 0 and r.stdout == "" and "|threshold:1e+09|" in r.stderr, extra
        assert "calibrated:de-en" in r.stderr, extra
    r = CliRunner().invoke(main, args + ["--threshold", "0"])  # min_z stays the calibrated 0, not the global 4.5
    assert r.exit_code == 0 and r.stdout and "|threshold:0|min-cosine:0|min-z:0|" in r.stderr
    assert "calibrated:de-en" in r.stderr
    for extra in (["--threshold", "0", "--min-z", "0", "--min-cosine", "0"], ["--no-per-language"]):
        r = CliRunner().invoke(main, args + extra)
        assert r.exit_code == 0 and "calibrated" not in r.stderr, extra
    assert f"|threshold:{Floors().threshold:g}|" in r.stderr  # --no-per-language: the global default


def test_plateau_prefers_a_broad_top_to_a_lone_peak():
    from bitextmine.evaluation.threshold_grid import best, plateau

    f1 = np.zeros((5, 7))
    f1[0, 0] = 1.0  # a lone peak
    f1[2:5, 3:6] = 0.9  # a broad top
    assert best(f1) == (3, 4)
    np.testing.assert_allclose(plateau(np.full((3, 4), 0.5)), 0.5)  # a flat surface stays flat


class _Stage:
    """A second stage as with_second_stage reads it: the languages it holds, each with its min_prob and floor."""
    languages = {"de": {"min_prob": 0.6, "floor": 1.05}}


@pytest.mark.parametrize("config, off", [
    (MineConfig(threshold=1.2, min_z=4, min_cosine=0.4),
     "threshold, min-z and min-cosine all given"),
    (MineConfig(per_language=False), "per-language settings off"),
])
def test_the_second_stage_applies_when_the_floors_are_given_or_not_per_language(config, off):
    """The second stage is its own switch: with the three floors given, or per-language settings off, the sides'
    languages are still detected and the stage judges (its min_prob unless given); the settings line says so."""
    from bitextmine.mining.calibrated import choose, with_second_stage

    asked = []

    def detect(side):
        asked.append(side)
        return ("de", "en")[side]

    choice = with_second_stage(choose(config, {"de-en": {}}, (None, None), detect), _Stage())
    assert asked == [0, 1] and choice.languages == ("de", "en") and choice.judged == "de"
    assert choice.config.min_prob == 0.6 and choice.judged_floor == 1.05
    assert f"second stage: min-prob 0.6, not per language: {off}; languages: source de (detected)" in \
        choice.describe()
    given = with_second_stage(choose(replace(config, min_prob=0.9), None, (None, None), detect), _Stage())
    assert given.judged == "de" and given.config.min_prob == 0.9
    off_stage = with_second_stage(choose(replace(config, second_stage=False), None, (None, None), detect), _Stage())
    assert off_stage.judged is None and off_stage.languages == (None, None)  # nothing detected for nothing


@pytest.mark.parametrize("langs, says", [
    ((None, None), "a side's language is not known (give --src-lang and --tgt-lang)"),
    (("de", "fr"), "it judges pairs of English and another language, not de-fr"),
    (("tr", "en"), "the model has none for tr-en"),
])
def test_a_second_stage_not_applied_says_why(langs, says):
    from bitextmine.mining.calibrated import choose, with_second_stage

    choice = with_second_stage(choose(MineConfig(per_language=False), None, langs, lambda side: None), _Stage())
    assert choice.judged is None and f"second stage not applied: {says}" in choice.describe()
