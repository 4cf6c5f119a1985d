"""Choose `mine`'s default --threshold and --min-z for a model, and each language's own settings
(--threshold, --min-z, --min-cosine; stored in the model with --write and used by `mine --per-language`),
on dev data never trained on, at several input sizes.

    python tools/calibrate_threshold.py [--model DIR] [--sizes 30 100 300 1000] [--keep 0.5]
    python tools/calibrate_threshold.py --model DIR --tasks tatoeba holdout --write

Task, for each of the 8 languages and each size N: N source sentences drawn at random from
tatoeba.L-eng.L; the target side keeps the English translations of a random half (--keep) and replaces
the others with English lines of other languages' Tatoeba files (distractors, none equal to an English
line of this file), shuffled. Several draws per size (20 at 30 lines, 10 at 100, 5 at 300, 3 at 1,000;
the 1,000 draws are the whole file with another half kept). With --tasks holdout the tasks come from
the training pairs held apart from the model (tools/train_default.py --holdout: UI strings, help text,
news, Anki sentences; up to about 5,000 per language), the distractors from the other languages'
held-apart English sides; with both, every figure is the mean of the two. Pairs are mined with the
default k, margin and mode for each standout floor (--min-z, bitextmine/mining/standout.py) and cosine floor,
which apply before the 1:1 selection as in `mine` (the margin threshold commutes with it); precision,
recall and F1 of the gold pairs are computed for each margin threshold, standout floor and cosine floor.
Suggested default: the threshold and standout floor with the best F1 averaged over sizes and languages
(no cosine floor); each language's own: its best F1 averaged over the sizes. "Best" is the top of the F1
surface smoothed over neighbouring grid points (:func:`plateau`), not a lone peak.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from bitextmine.config import MineConfig
from bitextmine.corpus import read_lines, read_parallel
from bitextmine.encoding import encode
from bitextmine.evaluation.mining_calibration import DRAWS, draw_distracted
from bitextmine.evaluation.threshold_grid import GRID, ZS, best, prf_table, settings
from bitextmine.mining.calibrated import write_section
from bitextmine.loading import load_model

DEV = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "dev", "tatoeba", "v1")
LANGS = ["deu", "fra", "spa", "ces", "rus", "cmn", "tur", "ara"]


ISO = {"deu": "de", "fra": "fr", "spa": "es", "ces": "cs", "rus": "ru", "cmn": "zh", "tur": "tr", "ara": "ar"}


def task_files(lang: str, holdout: str | None) -> tuple[str, str, list[str]]:
    """(foreign file, its English file, the other languages' English files) of Tatoeba v1, or of the
    training pairs held apart by tools/train_default.py --holdout (``holdout``: their folder)."""
    if holdout is None:
        return (f"{DEV}/tatoeba.{lang}-eng.{lang}", f"{DEV}/tatoeba.{lang}-eng.eng",
                [f"{DEV}/tatoeba.{o}-eng.eng" for o in LANGS if o != lang])
    code = ISO[lang]
    return (f"{holdout}/en-{code}.{code}", f"{holdout}/en-{code}.en",
            [f"{holdout}/en-{ISO[o]}.en" for o in LANGS if o != lang])


def encoded_task(lang: str, model, holdout: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(source rows, their English translations' rows, distractor rows) of one language, encoded once."""
    src, eng, others = task_files(lang, holdout)
    x, y = read_parallel(src, eng)
    pool = sorted({e for o in others for e in read_lines(o)} - set(y))
    return encode(x, model), encode(y, model), encode(pool, model)


def show_grid(title: str, f1: np.ndarray) -> None:
    print(f"\n{title} (rows: --min-z; columns: --threshold)")
    cols = list(range(0, len(GRID), 5))
    print("| min-z | " + " | ".join(f"{GRID[j]:.2f}" for j in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for i, z0 in enumerate(ZS):
        print(f"| {z0:g} | " + " | ".join(f"{f1[i, j]:.3f}" for j in cols) + " |")


def flags(s: dict) -> str:
    return f"--threshold {s['threshold']:.2f} --min-z {s['min_z']:g} --min-cosine {s['min_cosine']:g}"


def measure(model, tasks: list[str], holdout: str, sizes: list[int], keep: float, seed: int) -> dict:
    """{(language, size): mean P/R/F1 grid over the draws and the task sources that have at least half that
    many source sentences (a draw takes at most all of them; Tatoeba v1: 1,000 a language; held-apart pairs:
    5,000, Arabic 1,519)}."""
    res: dict = {}
    for lang in LANGS:
        for source in tasks:
            X, Y, P = encoded_task(lang, model, holdout if source == "holdout" else None)
            rng = np.random.default_rng(seed)
            for size in sizes:
                if len(X) < size / 2:  # a task of this size cannot be drawn from this source
                    continue
                grid = np.mean([prf_table(*draw_distracted(X, Y, P, size, keep, rng))
                                for _ in range(DRAWS.get(size, 3))], 0)
                res.setdefault((lang, size), []).append(grid)
    return {k: np.mean(v, 0) for k, v in res.items()}


def print_table(title: str, res: dict, sizes: list[int], index_of) -> None:
    print(f"\n{title}: F1 per language, mean precision, recall and F1 over the languages")
    print("\n| size | " + " | ".join(LANGS) + " | mean P | mean R | mean F1 |")
    print("|---" * (len(LANGS) + 4) + "|")
    for s in sizes:
        prf = np.array([res[lang, s][index_of(lang)] for lang in LANGS])
        p, r, f = prf.mean(0)
        print(f"| {s} | " + " | ".join(f"{x:.3f}" for x in prf[:, 2]) + f" | {p:.3f} | {r:.3f} | {f:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--keep", type=float, default=0.5)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(DRAWS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tasks", nargs="+", choices=["tatoeba", "holdout"], default=["tatoeba"],
                    help="task sources, averaged: Tatoeba v1 and/or the held-apart training pairs (--holdout)")
    ap.add_argument("--holdout", default=os.path.join(os.path.dirname(__file__), "..", ".bench", "holdout"),
                    metavar="DIR", help="the pairs held apart by tools/train_default.py --holdout (a model trained "
                    "without them)")
    ap.add_argument("--write", action="store_true",
                    help="store each language's own best settings in the model's config.json ('mining' section, "
                         "used by mine --per-language)")
    args = ap.parse_args()
    model = load_model(args.model)
    print(f"model {model.fingerprint}; k={MineConfig.k}, margin={MineConfig.margin}, mode={MineConfig.mode}; "
          f"tasks: {' + '.join(args.tasks)}")
    res = measure(model, args.tasks, args.holdout, args.sizes, args.keep, args.seed)
    per_size = {s: np.mean([res[lang, s] for lang in LANGS], axis=0) for s in args.sizes}
    for s in args.sizes:
        show_grid(f"mean F1, {s} source lines, over the 8 languages, no cosine floor", per_size[s][0, ..., 2])
    overall = np.mean([per_size[s][..., 2] for s in args.sizes], axis=0)  # (floors, zs, thresholds)
    show_grid("mean F1 over the sizes, no cosine floor", overall[0])
    glob = (0, *best(overall[0]))
    j0 = best(overall[0, 0])[0]
    anyf = best(overall)
    print(f"\nsuggested default: {flags(settings(glob))}: mean F1 {overall[glob]:.3f} (margin alone: --threshold "
          f"{GRID[j0]:.2f}, {overall[0, 0, j0]:.3f}; with a cosine floor: {flags(settings(anyf))}, {overall[anyf]:.3f})")
    own = {}
    print("\neach language's own best (mean F1 over the sizes; the suggested default's F1 beside it)")
    print("\n| language | --threshold | --min-z | --min-cosine | F1 | F1 with the default |\n|---|---|---|---|---|---|")
    for lang in LANGS:
        f1 = np.mean([res[lang, s][..., 2] for s in args.sizes], axis=0)
        own[lang] = best(f1)
        s = settings(own[lang])
        print(f"| {lang} | {s['threshold']:.2f} | {s['min_z']:g} | {s['min_cosine']:g} | {f1[own[lang]]:.3f} "
              f"| {f1[glob]:.3f} |")
    print_table(f"default {flags(settings(glob))}", res, args.sizes, lambda lang: glob)
    print_table("each language's own settings", res, args.sizes, lambda lang: own[lang])
    print_table(f"margin alone, --threshold {GRID[j0]:.2f}", res, args.sizes, lambda lang: (0, 0, j0))
    if args.write:
        names = {"tatoeba": "Tatoeba v1", "holdout": "training pairs held apart from the model"}
        chosen = (f"tools/calibrate_threshold.py on dev data never trained on ({' and '.join(names[t] for t in args.tasks)}),"
                  f" {', '.join(map(str, args.sizes))} lines, seed {args.seed}: each language's best mean F1")
        write_section(model.path, {ISO[lang]: settings(own[lang]) for lang in LANGS}, chosen)
        print(f"\nwrote the per-language settings to {model.path}/config.json")


if __name__ == "__main__":
    main()
