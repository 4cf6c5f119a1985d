"""Mining settings calibrated for a model and a language pair.

How high a margin, a standout z or a cosine a translation reaches depends on how well the model knows
the language: a weak language's translations score lower, so one threshold for every language is set
by the weakest and lets near misses through in the strong ones. A model directory can carry, in its
config.json, the settings chosen for each of its languages with English on dev data
(tools/calibrate_threshold.py --write):

    "mining": {"version": 1, "chosen_on": "...",
               "languages": {"de": {"threshold": 1.2, "min_z": 4.0, "min_cosine": 0.35}, ...}}

``mine`` uses them (:func:`choose`) when both sides' languages are known (given, or the identifier's
best guess for a sample of lines: :func:`bitextmine.language.side_language`), one of them is English
and the model holds settings for the other, and the vectors are the model's plain embeddings (the
settings were chosen on them: not with SIF weighting, a marked side, or another encoder's embeddings),
for the settings the caller left None; a number set in the MineConfig is used as given. Otherwise the global
defaults apply (:class:`bitextmine.config.Floors`).
:class:`Choice` says which settings a run used and why, in one line.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from typing import Callable, Iterable

from ..config import Floors, MineConfig
from ..errors import ConfigError, ModelFormatError, is_finite_number

# 1: "languages" keyed by the language paired with English; 2: keyed by the pair ("de-en", codes sorted), each
# entry with what its settings measured on the dev pairs they were chosen on ("measured", optional), and what mine's
# defaults measured end to end there, second stage included where the model has one ("defaults_measured" and
# "defaults_second_stage", optional), and with an assist joining the stage ("assist_measured": {the assist's
# fingerprint: {"assist": its name, "measured": [...]}}, optional); 3: as 2, and for a pair of English and a
# language of the model's second stage, the stage's settings ("second_stage": {"min_prob", "max_lines",
# "measured"[, "kept", "chosen_on"]}, optional: where absent, those of the stage's own file apply); an entry of
# version 3 may also say how its settings were chosen ("chosen_on", text, optional: where absent, the section's
# "chosen_on" says it; readers that do not know it pass it by); 4: as 3, and the second stage's settings may hold
# the map from its score to the one mine uses ("score_map": {"score", "share", "bias"}, numbers, "score" above 0:
# bitextmine.judge.logistic.map_score), so that a reader that would apply "min_prob" to the unmapped score refuses it
SECTION_VERSION = 4
READS = (1, 2, 3, 4)
SCORE_MAP = ("score", "share", "bias")
KEYS = ("threshold", "min_z", "min_cosine")  # the MineConfig fields a calibration sets
PIVOT = "en"
MEASURED = ("lines", "share", "precision", "recall", "f1")  # the numbers of each "measured" entry
# what an entry may hold besides KEYS
OPTIONAL = ("measured", "defaults_measured", "defaults_second_stage", "assist_measured", "second_stage", "chosen_on")


def pair_key(a: str, b: str) -> str:
    """The key of a language pair in a section of version 2 or later: the two codes sorted, joined by '-'."""
    return "-".join(sorted((a, b)))


def entries(section: dict | None) -> dict:
    """{pair key: settings} of a section of either version (version 1's languages paired with English)."""
    if not section:
        return {}
    langs = section["languages"]
    return dict(langs) if section.get("version") != 1 else {pair_key(k, PIVOT): v for k, v in langs.items()}


def check_section(section: dict, where: str) -> None:
    """ModelFormatError naming ``where`` unless ``section`` is a "mining" section of a version this reads whose
    entries each give a finite number for every key of :data:`KEYS` (versions 2 and 3: keyed by a pair of codes, and
    each "measured" entry numbers for :data:`MEASURED`)."""
    version = section.get("version") if isinstance(section, dict) else section
    if version not in READS or isinstance(version, bool):
        raise ModelFormatError(f"{where}: \"mining\" version {version!r}; this bitextmine reads versions "
                               f"{', '.join(map(str, READS))}")
    langs = section.get("languages")
    if not isinstance(langs, dict):
        raise ModelFormatError(f"{where}: \"mining\" has no \"languages\" object")
    for key, s in langs.items():
        if version != 1 and (not isinstance(key, str) or key.count("-") != 1 or key != pair_key(*key.split("-"))):
            raise ModelFormatError(f"{where}: \"mining\" key {key!r}: expected a pair of codes, sorted (\"de-en\")")
        if not isinstance(s, dict) or any(not is_finite_number(s.get(k)) for k in KEYS):
            raise ModelFormatError(f"{where}: \"mining\" language {key!r}: expected finite numbers for "
                                   f"{', '.join(KEYS)}")
        for name in ("measured", "defaults_measured"):
            if not _measured_list(s.get(name, [])):
                raise ModelFormatError(f"{where}: \"mining\" {key!r}: \"{name}\" must be a list of objects with "
                                       f"numbers for {', '.join(MEASURED)}")
        _check_assist_measured(s.get("assist_measured", {}), f"{where}: \"mining\" {key!r}")
        if not isinstance(s.get("chosen_on", ""), str):
            raise ModelFormatError(f"{where}: \"mining\" {key!r}: \"chosen_on\" must be text")
        if "second_stage" in s and version not in (3, 4):
            raise ModelFormatError(f"{where}: \"mining\" {key!r}: \"second_stage\" in a section of version "
                                   f"{version}; it came with version 3")
        if "score_map" in (s.get("second_stage") or {}) and version != 4:
            raise ModelFormatError(f"{where}: \"mining\" {key!r}: \"score_map\" in a section of version "
                                   f"{version}; it came with version 4")
        _check_stage_settings(s.get("second_stage"), key, f"{where}: \"mining\" {key!r}")
        if "defaults_measured" in s and not isinstance(s.get("defaults_second_stage"), bool):
            raise ModelFormatError(f"{where}: \"mining\" {key!r}: \"defaults_measured\" without "
                                   "\"defaults_second_stage\" (true or false)")


def _check_assist_measured(found, where: str) -> None:
    """ModelFormatError naming ``where`` unless ``found`` is {fingerprint: {"assist": name, "measured": [entries
    with numbers for MEASURED]}}."""
    ok = isinstance(found, dict) and all(
        isinstance(k, str) and isinstance(v, dict) and isinstance(v.get("assist"), str)
        and _measured_list(v.get("measured")) for k, v in found.items())
    if not ok:
        raise ModelFormatError(f"{where}: \"assist_measured\" must map an assist's fingerprint to {{\"assist\": its "
                               f"name, \"measured\": a list of objects with numbers for {', '.join(MEASURED)}}}")


def _check_stage_settings(found, key: str, where: str) -> None:
    """ModelFormatError naming ``where`` unless ``found`` is None or the second stage's settings of a pair with
    English: {"min_prob": a number from 0 to 1, "max_lines": a whole number from 1, "measured": [entries with
    numbers for MEASURED][, "kept": true or false][, "chosen_on": text]}."""
    if found is None:
        return
    ok = (isinstance(found, dict) and PIVOT in key.split("-") and is_finite_number(found.get("min_prob"))
          and 0 <= found["min_prob"] <= 1 and isinstance(found.get("max_lines"), int)
          and not isinstance(found["max_lines"], bool) and found["max_lines"] >= 1
          and _measured_list(found.get("measured")) and isinstance(found.get("kept", False), bool)
          and isinstance(found.get("chosen_on", ""), str) and _score_map_ok(found.get("score_map", SCORE_MAP_OFF)))
    if not ok:
        raise ModelFormatError(f"{where}: \"second_stage\" must be, for a pair with {PIVOT}, {{\"min_prob\": a number "
                               "from 0 to 1, \"max_lines\": a whole number from 1, \"measured\": a list of objects "
                               f"with numbers for {', '.join(MEASURED)}, optionally \"kept\" (true or false), "
                               "\"chosen_on\" (text) and \"score_map\" ({\"score\": a number above 0, \"share\", "
                               "\"bias\": numbers})}")


SCORE_MAP_OFF = {"score": 1.0, "share": 0.0, "bias": 0.0}  # the map that leaves a score as it is


def _score_map_ok(found) -> bool:
    """Whether ``found`` is a score map: {"score": a number above 0, "share", "bias": numbers}, nothing else."""
    return (isinstance(found, dict) and set(found) == set(SCORE_MAP)
            and all(is_finite_number(found[k]) for k in SCORE_MAP) and found["score"] > 0)


def stage_entry_for(section: dict | None, src_lang: str | None, tgt_lang: str | None) -> dict | None:
    """The "second_stage" object the calibration holds for the pair ({min_prob, max_lines, measured[, kept]}), or
    None."""
    return _entry(section, src_lang, tgt_lang).get("second_stage")


def stage_settings_for(section: dict | None, lang: str) -> dict | None:
    """The second stage's settings {min_prob, max_lines[, score_map]} that the calibration holds for ``lang`` with
    English, or None (the stage's own file's then apply, with no score map)."""
    found = stage_entry_for(section, lang, PIVOT) if lang != PIVOT else None
    if not found:
        return None
    return {"min_prob": float(found["min_prob"]), "max_lines": int(found["max_lines"]),
            **({"score_map": dict(found["score_map"])} if "score_map" in found else {})}


def calibrated_stage(stage, section: dict | None):
    """``stage`` (a :class:`bitextmine.judge.SecondStage`, or None) with each language's min_prob, max_lines and
    score map those of the model's calibration where it holds them (:func:`stage_settings_for`; a score map the
    calibration does not hold is dropped): the one place a run's stage settings are resolved."""
    if stage is None:
        return None
    plain = stage.unmapped()
    return replace(plain, languages={lang: {**c, **(stage_settings_for(section, lang) or {})}
                                     for lang, c in plain.languages.items()})


def _measured_list(found) -> bool:
    """Whether ``found`` is a list of objects with a finite number for each of :data:`MEASURED`."""
    return isinstance(found, list) and all(
        isinstance(m, dict) and all(is_finite_number(m.get(k)) for k in MEASURED) for m in found)


def _entry(section: dict | None, src_lang: str | None, tgt_lang: str | None) -> dict:
    """The section's entry for the pair of languages, or {} (no section, a language unknown, no entry)."""
    if not section or not src_lang or not tgt_lang:
        return {}
    return entries(section).get(pair_key(src_lang, tgt_lang), {})


def assist_measured_for(section: dict | None, langs: tuple, fingerprint: str) -> list[dict]:
    """What mine measured end to end on the pair's dev pairs with the assist of ``fingerprint`` joining the
    second stage ([{lines, share, precision, recall, f1}]), or []."""
    return list(_entry(section, *langs).get("assist_measured", {}).get(fingerprint, {}).get("measured", []))


def settings_for(section: dict | None, src_lang: str | None, tgt_lang: str | None) -> dict | None:
    """The calibrated {threshold, min_z, min_cosine} for a pair of languages (ISO 639-1, either order), or
    None: no section, a language unknown, or a pair the section does not hold."""
    if not section or not src_lang or not tgt_lang or src_lang == tgt_lang:
        return None
    found = entries(section).get(pair_key(src_lang, tgt_lang))
    return {k: float(found[k]) for k in KEYS} if found else None


def measured_for(section: dict | None, src_lang: str | None, tgt_lang: str | None) -> list[dict]:
    """What the pair's calibrated settings measured on their dev pairs ([{lines, share, precision, recall,
    f1}], :data:`MEASURED`), or []."""
    return list(_entry(section, src_lang, tgt_lang).get("measured", []))


def defaults_measured_for(section: dict | None, src_lang: str | None, tgt_lang: str | None) -> tuple[list, bool]:
    """(what mine's defaults measured end to end on the pair's dev pairs ([{lines, share, precision, recall,
    f1}], or []), whether its second stage judged those runs)."""
    found = _entry(section, src_lang, tgt_lang)
    return list(found.get("defaults_measured", [])), bool(found.get("defaults_second_stage", False))


def apply(config: MineConfig, section: dict | None, src_lang: str | None, tgt_lang: str | None) -> tuple[MineConfig, bool]:
    """(``config`` resolved: its settings left None from the calibrated ones for the languages, the rest from
    :class:`bitextmine.config.Floors`; whether any calibrated setting applied). Calibrated settings apply only
    when ``config.per_language`` is on and :func:`settings_for` finds them; a setting given keeps its value."""
    found = settings_for(section, src_lang, tgt_lang) if config.per_language else None
    found = {k: v for k, v in (found or {}).items() if getattr(config, k) is None}
    return config.resolved(found), bool(found)


@dataclass(frozen=True)
class Choice:
    """The settings a run uses: ``config``, whether they are the model's calibrated ones, the sides'
    languages ((src, tgt): ISO 639-1 code or None), how each was found ("given", "detected", "not detected"
    or "not looked for"), why the calibration applies or not (``reason``), and whether per-language settings
    were looked for at all (``looked``: False when turned off, all three given, or the model has none)."""

    config: MineConfig  # resolved: every selection setting a number
    calibrated: bool
    languages: tuple[str | None, str | None]
    found: tuple[str, str]
    reason: str
    looked: bool = True
    judged: str | None = None  # the language (with English) whose second stage judges the candidates, or None
    fell_back: str = ""  # why the floors' pairs were printed instead of the stage's (:func:`fail_safe`), or ""
    measured: tuple = ()  # calibrated: what the settings measured on their dev pairs (:func:`measured_for`)
    # calibrated: what mine's defaults measured end to end there, and whether the second stage judged those runs
    defaults_measured: tuple = ()
    defaults_judged: bool = False
    not_judged: str = ""  # why a second stage the model has for the languages was not applied ("": it was, or none)
    reference_lines: int = 0  # > 0: the stage gets margins as sides of this many lines give them (mining/reference.py)
    side_lines: int = 0  # with reference_lines: the run's larger side, distinct lines
    given: tuple[str, ...] = ()  # the selection settings the caller set (MineConfig.given), kept as set
    # with the second stage: candidates are kept from this margin up (those below the threshold only to estimate
    # the share of translations its scores adjust to); None: from the threshold up
    judged_floor: float | None = None

    def describe(self) -> str:
        """One line: the settings, which they are (calibrated for a pair, the global defaults, or given) and
        why, and the sides' languages."""
        c, d = self.config, Floors()
        values = f"threshold {c.threshold:g}, min-z {c.min_z:g}, min-cosine {c.min_cosine:g}"
        sides = "; ".join(f"{side} {lang or '?'} ({how})" for side, lang, how in
                          zip(("source", "target"), self.languages, self.found) if lang or how == "not detected")
        sides = f"; languages: {sides}" if sides else ""
        sampled = "" if not self.reference_lines else (
            f", margins against samples of {self.reference_lines:,} lines a side (a side has {self.side_lines:,} "
            "distinct lines, more than the stage was calibrated on)")
        judged = f"; second stage: min-prob {c.min_prob:g}{sampled}" if self.judged else (
            f"; second stage not applied: {self.fell_back}" if self.fell_back else
            f"; second stage not applied: {self.not_judged}" if self.not_judged else "")
        if self.calibrated:
            return (f"settings calibrated for {self.languages[0]}-{self.languages[1]}: {values}{judged}"
                    f"{self._expected()}{sides}")
        which = "global defaults" if (c.threshold, c.min_z, c.min_cosine) == (d.threshold, d.min_z, d.min_cosine) \
            else "settings given"
        return f"{which}: {values}{judged}, not per language: {self.reason}{sides}"


    def _expected(self) -> str:
        """What the settings line says the run may expect: what mine's defaults measured end to end on the dev
        pairs where this run is judged as those runs were (second stage or not), else what the floors measured
        there where no second stage judges this run, else nothing."""
        if self.defaults_measured and bool(self.judged) == self.defaults_judged:
            return _expected(self.defaults_measured, "end to end on its dev pairs")
        return "" if self.judged else _expected(self.measured)


def _expected(measured: tuple, where: str = "on its dev pairs") -> str:
    """What calibrated settings measured on their dev pairs, as the settings line says it ("" when unknown): per
    share of translations, the range of precision and recall over the task sizes."""
    if not measured:
        return ""
    parts = []
    for share in sorted({m["share"] for m in measured}, reverse=True):
        of = [m for m in measured if m["share"] == share]
        span = lambda k: _span([m[k] for m in of], "{:.2f}")  # noqa: E731
        lines = _span([int(m["lines"]) for m in of], "{:,}")
        parts.append(f"{share:.0%} translated, {lines} lines: precision {span('precision')}, recall {span('recall')}")
    return f"; {where}: " + ", ".join(parts)


def _span(values: list, form: str) -> str:
    """The range of ``values`` ("lo-hi"), or its one value, each written with ``form``."""
    lo, hi = form.format(min(values)), form.format(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


Detect = Callable[[int], "str | None"]  # side 0 (source) or 1 (target) -> its detected language, or None


def choose(config: MineConfig, section: dict | None, langs: tuple[str | None, str | None], detect: Detect, *,
           plain: bool = True, why_not_plain: str = "") -> Choice:
    """The settings for a run: ``config`` with the calibrated threshold, min_z and min_cosine of ``section``
    (a model's "mining" section, or None) for the sides' languages, or ``config`` unchanged with the reason.

    ``langs``: the declared (src, tgt) languages; a side without one is detected by ``detect(side)`` (called
    only when the settings could apply). ``plain``: whether the vectors are the model's plain embeddings,
    on which the section was calibrated; else ``why_not_plain`` is the reason given."""
    found = tuple("given" if lang else "not looked for" for lang in langs)
    given, plain_config = config.given(), config.resolved()
    if not plain:
        return Choice(plain_config, False, langs, found, f"{why_not_plain}; the per-language settings were "
                      "chosen on the model's plain embeddings", given=given)
    # the second stage is its own switch: without per-language floors it still needs the sides' languages
    stage = config.second_stage
    off = ("per-language settings off" if not config.per_language else
           "threshold, min-z and min-cosine all given" if set(KEYS) <= set(given) else
           "the model carries no per-language settings" if not section else "")
    if off:
        known, found = _sides(langs, detect) if stage else (langs, found)
        return Choice(plain_config, False, known, found, off, False, given=given)
    other = other_margin(config)
    if other:
        known, found = _sides(langs, detect) if stage else (langs, found)
        return Choice(plain_config, False, known, found, f"{other}; the per-language settings were chosen with "
                      f"the default {MineConfig.margin} margin over {MineConfig.k} neighbours", given=given)
    known, found = _sides(langs, detect)
    reason = _why_not(section, *known)
    if reason:
        return Choice(plain_config, False, known, found, reason, given=given)
    defaults, judged = defaults_measured_for(section, *known) if not given else ([], False)
    return Choice(apply(config, section, *known)[0], True, known, found, "", given=given,
                  measured=tuple(measured_for(section, *known)) if not given else (),
                  defaults_measured=tuple(defaults), defaults_judged=judged)


def check_declared(langs: tuple[str | None, str | None], detect: Detect, paths: tuple[str, str]) -> None:
    """ConfigError when a declared language (``langs``: src, tgt) is contradicted by its side's text: ``detect``
    (side -> the one language most of its first lines read as, or None when none does) names another one.
    A side that cannot be read twice (standard input) detects None and passes."""
    for side, (option, lang) in enumerate(zip(("--src-lang", "--tgt-lang"), langs)):
        seen = detect(side) if lang else None
        if seen and seen != lang:
            raise ConfigError(f"{option} {lang}: {paths[side]} reads as {seen}, not {lang}, on most of its first "
                              f"lines; declare {option} {seen}, or give --trust-lang to mine it as {lang}")


def _sides(langs: tuple[str | None, str | None], detect: Detect) -> tuple[tuple, tuple[str, str]]:
    """(the sides' languages: declared, else detected, else None; how each was found)."""
    known = tuple(lang or detect(i) for i, lang in enumerate(langs))
    return known, tuple("given" if lang else ("detected" if k else "not detected") for lang, k in zip(langs, known))


def other_margin(config: MineConfig) -> str:
    """How config's margin differs from the one the model's settings and second stage were chosen with
    (MineConfig's default margin and k), or "" when it does not."""
    d = MineConfig()
    parts = [f"--margin {config.margin}"] * (config.margin != d.margin) + [f"--k {config.k}"] * (config.k != d.k)
    return " and ".join(parts)


def with_second_stage(choice: Choice, stage) -> Choice:
    """``choice`` with the second stage (a :class:`bitextmine.judge.SecondStage`, or None) of the sides'
    languages when config.second_stage is on, both languages are known, one is English and the stage holds the
    other (for the model's plain embeddings only, on which it was trained: the caller's to check): its min_prob
    replaces config's unless given (choice.given), and its margin floor is where candidates are judged from
    (choice.judged_floor); the threshold, min_z and min_cosine stay as chosen."""
    c, (src, tgt) = choice.config, choice.languages
    if not c.second_stage or stage is None:
        return choice
    if not src or not tgt:
        return replace(choice, not_judged="a side's language is not known (give --src-lang and --tgt-lang)")
    if src == tgt or PIVOT not in (src, tgt):
        return replace(choice, not_judged=f"it judges pairs of English and another language, not {src}-{tgt}")
    other = tgt if src == PIVOT else src
    if other not in stage.languages:
        return replace(choice, not_judged=f"the model has none for {other}-en")
    margin = other_margin(c)
    if margin:
        return replace(choice, not_judged=f"{margin}; it was trained on the default {MineConfig.margin} margin "
                                          f"over {MineConfig.k} neighbours")
    found = stage.languages[other]
    min_prob = c.min_prob if "min_prob" in choice.given else float(found["min_prob"])
    return replace(choice, config=replace(c, min_prob=min_prob), judged_floor=float(found["floor"]), judged=other)


def may_fall_back(config: MineConfig, share: float | None) -> bool:
    """Whether a run whose stage puts the share of translations among the candidates it judged at ``share``
    (None: it judged none) is one the fail safe looks at: config.fail_safe_share or more."""
    return share is not None and share >= config.fail_safe_share


def fail_safe(choice: Choice, kept: int, floors_kept: int, share: float | None) -> Choice:
    """``choice`` without its second stage, saying why (``fell_back``), when the stage is out of its depth: its
    own estimate of the share of translations among the candidates it judged (``share``: their mean score
    before its prior step) reaches config.fail_safe_share, and it keeps (``kept`` pairs) fewer than
    config.fail_safe_keep of the ``floors_kept`` pairs the floors alone print. Else ``choice`` as it is."""
    c = choice.config
    if not may_fall_back(c, share) or kept >= c.fail_safe_keep * floors_kept:
        return choice
    why = (f"it kept {kept:,} of the {floors_kept:,} pairs the floors print where it puts the share of translations "
           f"at {share:.0%}, so the floors' pairs are printed (fail safe)")
    return replace(choice, judged=None, judged_floor=None, fell_back=why)


def within_second_stage(choice: Choice, stage, rows: tuple[int, int], min_lines: int) -> Choice:
    """``choice`` without its second stage when a side has fewer distinct lines (``rows``: both sides) than
    ``min_lines`` (MineConfig.second_stage_min_lines), however large the other; else with ``reference_lines``
    set to the stage's ``max_lines`` when a side has more than it: margins fall as the sides grow, and beyond the
    sizes its probability floor was chosen on, the stage given a run's own margins drops translations (a stage
    calibrated up to 3,000 lines kept 12 % of the translations at 200,000 lines a side, against 61 % without it:
    docs/benchmarks.md), so it is given margins as sides of ``max_lines`` give them
    (:mod:`bitextmine.mining.reference`)."""
    if min(rows) < min_lines:  # whatever the other side's size
        why = f"{min(rows):,} distinct lines on a side, below the {min_lines:,} it applies from"
        return replace(choice, judged=None, judged_floor=None, not_judged=why)
    limit = stage.reference_lines(choice.judged, rows)
    return replace(choice, reference_lines=limit, side_lines=max(rows)) if limit else choice


def _why_not(section: dict, src: str | None, tgt: str | None) -> str:
    """Why :func:`settings_for` finds nothing for the pair, or "" when it finds settings."""
    if not src or not tgt:
        return "the language of the " + ("source" if not src else "target") + " side is not known"
    if src == tgt:
        return f"both sides are {src}"
    held = entries(section)
    if pair_key(src, tgt) in held:
        return ""
    if section.get("version") == 1 and PIVOT not in (src, tgt):
        return f"the settings are for a language with {PIVOT}; this pair is {src}-{tgt}"
    if section.get("version") == 1:
        other = tgt if src == PIVOT else src
        return f"the model holds no settings for {other} (it holds {', '.join(sorted(section['languages']))})"
    return f"the model holds no settings for {src}-{tgt} (it holds {', '.join(sorted(held))})"


def write_section(model_dir: str, languages: dict[str, dict], chosen_on: str) -> None:
    """Store ``languages`` ({pair key "de-en", or a code meaning that language with English: {threshold, min_z,
    min_cosine[, measured, defaults_measured, defaults_second_stage, assist_measured, second_stage, chosen_on]}})
    in the "mining" section of ``model_dir``/config.json, beside the pairs it already holds (the model's weights
    and fingerprint unchanged), with ``chosen_on`` as the section's; written as version 4, replaced atomically.
    A pair already held without a "chosen_on" of its own keeps the section's earlier one."""
    path = os.path.join(model_dir, "config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    new = {(k if "-" in k else pair_key(k, PIVOT)): v for k, v in languages.items()}
    old = config.get("mining") or {}
    stamp = old.get("chosen_on") if old.get("chosen_on") not in ("", None, chosen_on) else None
    held = {**{k: {"chosen_on": stamp, **v} if stamp else v for k, v in entries(old).items()}, **new}
    section = {"version": SECTION_VERSION, "chosen_on": chosen_on,
               "languages": {key: {**{k: float(s[k]) for k in KEYS},
                                   **{k: s[k] for k in OPTIONAL if s.get(k, []) != []}}
                             for key, s in sorted(held.items())}}
    check_section(section, path)
    config["mining"] = section
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


# what an entry holds that was chosen or measured with the model's second stage
STAGE_FIGURES = ("second_stage", "defaults_measured", "defaults_second_stage", "assist_measured")


def forget_stage(model_dir: str, langs: Iterable[str]) -> list[str]:
    """Remove :data:`STAGE_FIGURES` from the calibration's entry of each of ``langs`` paired with English, in
    ``model_dir``/config.json, when its second stage is built anew: they were chosen or measured with another
    classifier. The floors stay. Returns the pair keys changed."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        section = json.load(f).get("mining")
    held = entries(section)
    keys = [pair_key(lang, PIVOT) for lang in langs]
    cleaned = {k: {name: v for name, v in held[k].items() if name not in STAGE_FIGURES}
               for k in keys if set(held.get(k, {})) & set(STAGE_FIGURES)}
    if cleaned:
        write_section(model_dir, cleaned, section.get("chosen_on", ""))
    return sorted(cleaned)


def first_lines(lines: Iterable[str], n: int) -> list[str]:
    """Up to ``n`` of the first non-blank lines (stripped)."""
    out = []
    for line in lines:
        if line.strip():
            out.append(line.strip())
            if len(out) >= n:
                break
    return out
