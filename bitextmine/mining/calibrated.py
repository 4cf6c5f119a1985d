"""Mining settings calibrated for a model and a language pair.

How high a margin, a standout z or a cosine a translation reaches depends on how well the model knows
the language: a weak language's translations score lower, so one threshold for every language is set
by the weakest and lets near misses through in the strong ones. A model directory can carry, in its
config.json, the settings chosen for each of its languages with English on dev data
(tools/calibrate_threshold.py --write):

    "mining": {"version": 1, "chosen_on": "...",
               "languages": {"de": {"threshold": 1.2, "min_z": 4.0, "min_cosine": 0.35}, ...}}

``mine`` uses them when both sides' languages are known (given, or detected on a sample of lines)
and one of them is English; a threshold, standout floor or cosine floor the user sets keeps its value.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import Iterable

from ..config import MineConfig
from ..errors import ModelFormatError

SECTION_VERSION = 1
KEYS = ("threshold", "min_z", "min_cosine")  # the MineConfig fields a calibration sets
PIVOT = "en"


def check_section(section: dict, where: str) -> None:
    """ModelFormatError naming ``where`` unless ``section`` is a version-1 "mining" section whose languages
    each give a number for every key of :data:`KEYS`."""
    if not isinstance(section, dict) or section.get("version") != SECTION_VERSION:
        found = section.get("version") if isinstance(section, dict) else section
        raise ModelFormatError(f"{where}: \"mining\" version {found!r}; this bitextmine reads version {SECTION_VERSION}")
    langs = section.get("languages")
    if not isinstance(langs, dict):
        raise ModelFormatError(f"{where}: \"mining\" has no \"languages\" object")
    for lang, s in langs.items():
        if not isinstance(s, dict) or any(not isinstance(s.get(k), (int, float)) for k in KEYS):
            raise ModelFormatError(f"{where}: \"mining\" language {lang!r}: expected numbers for {', '.join(KEYS)}")


def settings_for(section: dict | None, src_lang: str | None, tgt_lang: str | None) -> dict | None:
    """The calibrated {threshold, min_z, min_cosine} for a pair of languages (ISO 639-1, either order), or
    None: no section, a language unknown, neither English, or a language the section does not hold."""
    if not section or not src_lang or not tgt_lang or PIVOT not in (src_lang, tgt_lang) or src_lang == tgt_lang:
        return None
    other = tgt_lang if src_lang == PIVOT else src_lang
    found = section["languages"].get(other)
    return {k: float(found[k]) for k in KEYS} if found else None


def apply(config: MineConfig, section: dict | None, src_lang: str | None, tgt_lang: str | None) -> tuple[MineConfig, bool]:
    """(``config`` with the calibrated settings for the languages, whether any applied): only when
    ``config.per_language`` is on and :func:`settings_for` finds them; the fields in ``config.pinned`` keep
    their values."""
    found = settings_for(section, src_lang, tgt_lang) if config.per_language else None
    found = {k: v for k, v in (found or {}).items() if k not in config.pinned}
    return (replace(config, **found), True) if found else (config, False)


def write_section(model_dir: str, languages: dict[str, dict], chosen_on: str) -> None:
    """Store ``languages`` ({ISO 639-1: {threshold, min_z, min_cosine}}) as the "mining" section of
    ``model_dir``/config.json (the model's weights and fingerprint unchanged); replaced atomically."""
    path = os.path.join(model_dir, "config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    section = {"version": SECTION_VERSION, "chosen_on": chosen_on,
               "languages": {lang: {k: float(s[k]) for k in KEYS} for lang, s in sorted(languages.items())}}
    check_section(section, path)
    config["mining"] = section
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def first_lines(lines: Iterable[str], n: int) -> list[str]:
    """Up to ``n`` of the first non-blank lines (stripped)."""
    out = []
    for line in lines:
        if line.strip():
            out.append(line.strip())
            if len(out) >= n:
                break
    return out
