"""Rebuild the bundled model's calibration with `bitextmine calibrate-mining`, on the dev data it was chosen on.

    python tools/calibrate_bundled.py --out /tmp/calibrated [--manuals DIR] [--langs de fr] [--install]

For each language L, the command gets two dev sets, never trained on: the pairs held apart from the bundled model's
training (.bench/holdout/en-L.*: `python tools/train_default.py --out - --holdout 5000 --holdout-only`) and
Tatoeba v1 (dev/tatoeba/v1); as filler for the second stage's tasks larger than those, every training corpus of L
with English (train/*/en-L.*.gz) but the Debian manuals (never trained on) and the ISO code lists (names); as
documents (--context) the WMT news test sets for de, fr, cs, ru and zh, whose held-apart lines are the gold pairs
of tasks with the sentences around them as distractors. With ``--manuals DIR``, the half of the Debian manuals that
settings are chosen on (English key hashing even; the odd half reports) is written to DIR and given as a third dev
set and as documents. The settings are chosen on a copy of the bundled model (``--out``), with floor tasks of 30 to
3,000 lines, stage tasks of ``--stage-lines`` lines a side, and `mine --assist use` measured end to end. With
``--distractors DIR`` the two dev sets are given as --distracted-pair, their floor tasks' untranslated English
lines the other languages' English of the same set (written to DIR), as the shipped floors' tasks were built. Several
runs on copies of their own (other ``--langs``) are joined with ``--join DIR``: that copy's entries for its
languages go into ``--out``'s calibration as the command stored them. ``--install`` copies ``--out``'s config.json
over the bundled model's. With ``--pivot DIR`` it calibrates the pairs of two --langs without English instead: their
dev pairs are the lines of the manuals' choosing half whose English text both languages translate
(:func:`bitextmine.evaluation.devdata.manuals_pivot`), written to DIR; the command chooses their floors (no second
stage judges a pair without English). This script only assembles the command's arguments.

The bundled model's calibration (2026-11-28; docs/benchmarks.md, "Settings per language", and docs/tried.md,
"Mining settings", for the other arguments measured):

    python tools/calibrate_bundled.py --out COPY --distractors DIR --stage-lines 1000 3000 10000
    python tools/calibrate_bundled.py --out COPY --keep-floors --joined DIR2 --manuals DIR3 --no-manuals-context \
        --stage-lines 1000 3000 10000 --no-assist --no-score-map

then `bitextmine calibrate-mining --model COPY --keep-settings --assist use` on the held-apart pairs of each
language, and ``--install``. (That calibration was made before the command mapped the stage's score; the same stage
run with the map, the command's default now, was measured and not installed: docs/tried.md, "Mining settings".)
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data")
HOLDOUT = os.path.join(HERE, "..", ".bench", "holdout")
BUNDLED = os.path.join(HERE, "..", "bitextmine", "models", "default")
ISO3 = {"de": "deu", "fr": "fra", "es": "spa", "cs": "ces", "ru": "rus", "zh": "cmn", "tr": "tur", "ar": "ara"}
NOT_FILLER = ("debian_docs", "debian_iso_codes")
NEWS = ("de", "fr", "cs", "ru", "zh")  # the languages whose held-apart pairs include WMT news test lines


def write_manuals(folder: str, langs: list[str], data: str = DATA) -> str:
    """Write each language's half of the Debian manuals that settings are chosen on (the pairs whose English key
    hashes even: :func:`bitextmine.evaluation.devdata.manuals_half_documents`; the odd half reports) to
    ``folder``/en-L.{L,en,docs}, in corpus order with each line's manual; returns ``folder``."""
    from bitextmine.evaluation.devdata import manuals_half_documents

    os.makedirs(folder, exist_ok=True)
    for lang in langs:
        pairs, names = manuals_half_documents(data, lang, odd=False)
        for suffix, lines in ((lang, [x for x, _ in pairs]), ("en", [e for _, e in pairs]), ("docs", names)):
            write_lines(os.path.join(folder, f"en-{lang}.{suffix}"), lines)
    return folder


def dev_files(lang: str, data: str = DATA, holdout: str = HOLDOUT) -> dict[str, tuple[str, str]]:
    """{source: (file of ``lang``, its English file)} of the two dev sets: the held-apart pairs and Tatoeba v1."""
    tatoeba = os.path.join(data, "dev", "tatoeba", "v1", f"tatoeba.{ISO3[lang]}-eng")
    return {"holdout": (f"{holdout}/en-{lang}.{lang}", f"{holdout}/en-{lang}.en"),
            "tatoeba": (f"{tatoeba}.{ISO3[lang]}", f"{tatoeba}.eng")}


def write_distractors(folder: str, langs: list[str], data: str = DATA, holdout: str = HOLDOUT) -> str:
    """Write, for each of ``langs`` and dev set, the English lines of the same set of the other languages (of
    ISO3) to ``folder``/SOURCE-L.en: the floor tasks' distractors, as the shipped floors had them; returns
    ``folder``."""
    from bitextmine.corpus import read_lines

    os.makedirs(folder, exist_ok=True)
    files = {lang: dev_files(lang, data, holdout) for lang in ISO3}
    for lang in langs:
        for source in ("holdout", "tatoeba"):
            lines = sorted({t.strip() for other in ISO3 if other != lang
                            for t in read_lines(files[other][source][1]) if t.strip()})
            write_lines(os.path.join(folder, f"{source}-{lang}.en"), lines)
    return folder


def write_joined(folder: str, langs: list[str], data: str = DATA, holdout: str = HOLDOUT) -> str:
    """Write each language's held-apart pairs followed by its Tatoeba v1 pairs to ``folder``/en-L.{L,en} (one dev
    set of both); returns ``folder``."""
    from bitextmine.corpus import read_lines

    os.makedirs(folder, exist_ok=True)
    for lang in langs:
        dev = dev_files(lang, data, holdout)
        for k, suffix in ((0, lang), (1, "en")):
            write_lines(os.path.join(folder, f"en-{lang}.{suffix}"), [t for s in ("holdout", "tatoeba")
                                                                      for t in read_lines(dev[s][k])])
    return folder


def arguments(lang: str, data: str = DATA, holdout: str = HOLDOUT, manuals: str = "", distractors: str = "",
              joined: str = "", manuals_context: bool = True) -> list[str]:
    """calibrate-mining's --pair, --filler and --context arguments for ``lang`` with English; with ``manuals`` (a
    folder :func:`write_manuals` wrote) the Debian manuals' choosing half as a third dev set and, with
    ``manuals_context``, as documents; with ``distractors`` (a folder :func:`write_distractors` wrote) the two dev
    sets as --distracted-pair with the other languages' English of the same set; with ``joined`` (a folder
    :func:`write_joined` wrote) the two as one set instead."""
    dev = dev_files(lang, data, holdout)
    out = []
    for source in ("holdout", "tatoeba") if not joined else ():
        extra = [f"{distractors}/{source}-{lang}.en"] if distractors else []
        out += ["--distracted-pair" if distractors else "--pair", lang, "en", *dev[source], *extra]
    if joined:
        out += ["--pair", lang, "en", f"{joined}/en-{lang}.{lang}", f"{joined}/en-{lang}.en"]
    if manuals:
        half = f"{manuals}/en-{lang}"
        out += ["--pair", lang, "en", f"{half}.{lang}", f"{half}.en"]
        out += ["--context", lang, "en", f"{half}.{lang}", f"{half}.en", f"{half}.docs"] * manuals_context
    if lang in NEWS:
        news = os.path.join(data, "train", "wmt_newstest", f"en-{lang}")
        out += ["--context", lang, "en", f"{news}.{lang}.gz", f"{news}.en.gz", f"{news}.origin.gz"]
    for en in sorted(glob.glob(os.path.join(data, "train", "*", f"en-{lang}.en.gz"))):
        if not any(f"/{name}/" in en for name in NOT_FILLER):
            out += ["--filler", lang, "en", en.replace(".en.gz", f".{lang}.gz"), en]
    for en in sorted(glob.glob(os.path.join(data, "train", "turkish_parallel_corpora", "*.en.gz"))) * (lang == "tr"):
        out += ["--filler", lang, "en", en.replace(".en.gz", ".tr.gz"), en]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the copy of the bundled model to calibrate (made if missing)")
    ap.add_argument("--langs", nargs="+", default=list(ISO3))
    ap.add_argument("--join", default="", metavar="DIR", help="take DIR's entries for --langs into --out instead")
    ap.add_argument("--install", action="store_true", help="copy --out's config.json over the bundled model's")
    ap.add_argument("--manuals", default="", metavar="DIR",
                    help="write the Debian manuals' choosing half to DIR and give it as a third dev set and as "
                         "documents (default: not used)")
    ap.add_argument("--distractors", default="", metavar="DIR",
                    help="give the held-apart pairs and Tatoeba v1 as --distracted-pair, the floor tasks' distractors "
                         "the other languages' English of the same set (written to DIR), as the shipped floors "
                         "were chosen")
    ap.add_argument("--joined", default="", metavar="DIR",
                    help="give the held-apart pairs and Tatoeba v1 as one dev set, written to DIR")
    ap.add_argument("--no-manuals-context", action="store_true",
                    help="with --manuals, give the manuals' half as a dev set only, not as documents")
    ap.add_argument("--stage-lines", type=int, nargs="+", default=[1000, 10000, 30000],
                    help="lines a side of the second stage's tasks (the 2026-11-28 runs with --manuals: 1000 10000)")
    ap.add_argument("--keep-floors", action="store_true",
                    help="keep the floors the bundled model holds and choose only the second stage's settings")
    ap.add_argument("--stage-beta", type=float, default=1.0,
                    help="the second stage's objective, mean F-beta over the shares (calibrate-mining --stage-beta)")
    ap.add_argument("--no-assist", action="store_true", help="do not measure mine --assist use end to end")
    ap.add_argument("--no-score-map", action="store_true",
                    help="choose the second stage's min-prob on its own score (calibrate-mining --no-score-map)")
    ap.add_argument("--pivot", default="", metavar="DIR",
                    help="calibrate the pairs of --langs without English instead, on the manuals' choosing half "
                         "joined on the English text (written to DIR)")
    args = ap.parse_args()
    if not os.path.exists(args.out):
        shutil.copytree(BUNDLED, args.out)
    if args.join:
        join(args.join, args.out, args.langs, pivot=bool(args.pivot))
    elif args.langs:
        command = [sys.executable, "-m", "bitextmine", "calibrate-mining", "--model", args.out,
                   *[a for n in (30, 100, 300, 1000, 3000) for a in ("--floor-lines", str(n))],
                   *(pivot_arguments(args.pivot, args.langs) if args.pivot else language_arguments(args))]
        print(" ".join(command), flush=True)
        subprocess.run(command, check=True)
    if args.install:
        shutil.copy(os.path.join(args.out, "config.json"), os.path.join(BUNDLED, "config.json"))


def language_arguments(args) -> list[str]:
    """calibrate-mining's arguments after the floor tasks' sizes for each of ``args.langs`` with English."""
    out = [*[a for n in args.stage_lines for a in ("--stage-lines", str(n))],
           *(["--keep-floors"] * args.keep_floors), "--stage-beta", str(args.stage_beta),
           *(["--no-score-map"] * args.no_score_map),
           *(["--assist", "use"] * (not args.no_assist))]
    manuals = write_manuals(args.manuals, args.langs) if args.manuals else ""
    distractors = write_distractors(args.distractors, args.langs) if args.distractors else ""
    joined = write_joined(args.joined, args.langs) if args.joined else ""
    for lang in args.langs:
        out += arguments(lang, manuals=manuals, distractors=distractors, joined=joined,
                         manuals_context=not args.no_manuals_context)
    return out


def pivot_arguments(folder: str, langs: list[str]) -> list[str]:
    """calibrate-mining's --pair arguments for each two of ``langs`` (no English), their pivot dev pairs written
    to ``folder`` (:func:`write_pivot`)."""
    return [x for a, b in itertools.combinations(langs, 2) for x in ("--pair", a, b, *write_pivot(folder, a, b))]


def write_pivot(folder: str, a: str, b: str, data: str = DATA) -> tuple[str, str]:
    """Write the pivot dev pairs of ``a`` and ``b`` from the manuals' choosing half (English key hashing even) to
    ``folder``/a-b.{a,b}; returns the two paths."""
    from bitextmine.evaluation.devdata import manuals_pivot

    os.makedirs(folder, exist_ok=True)
    pairs = manuals_pivot(data, a, b, odd=False)
    paths = tuple(os.path.join(folder, f"{a}-{b}.{lang}") for lang in (a, b))
    for path, side in zip(paths, zip(*pairs)):
        write_lines(path, side)
    return paths


def write_lines(path: str, lines) -> None:
    """``lines`` to ``path``, one a line."""
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def join(source: str, target: str, langs: list[str], pivot: bool = False) -> None:
    """``source``'s calibration entries for ``langs`` (each with English; ``pivot``: each two of them) stored into
    ``target``'s, each with its provenance."""
    from bitextmine.mining.calibrated import pair_key, write_section

    with open(os.path.join(source, "config.json"), encoding="utf-8") as f:
        section = json.load(f)["mining"]
    pairs = itertools.combinations(langs, 2) if pivot else [(x, "en") for x in langs]
    keys = [pair_key(a, b) for a, b in pairs]
    with open(os.path.join(target, "config.json"), encoding="utf-8") as f:
        held = json.load(f).get("mining", {}).get("chosen_on", "")
    write_section(target, {k: {"chosen_on": section["chosen_on"], **section["languages"][k]} for k in keys}, held)


if __name__ == "__main__":
    main()
