"""Choose the default `mine --threshold` and `--min-z` for a model on held-out Tatoeba v1 data (never
trained on), at several input sizes.

    python tools/calibrate_threshold.py [--model DIR] [--sizes 30 100 300 1000] [--keep 0.5]
    python tools/calibrate_threshold.py --model DIR --holdout .bench/holdout --sizes 30 300 3000 5000

Task, for each of the 8 languages and each size N: N source sentences drawn at random from
tatoeba.L-eng.L; the target side keeps the English translations of a random half (--keep) and replaces
the others with English lines of other languages' Tatoeba files (distractors, none equal to an English
line of this file), shuffled. Several draws per size (--draws: 20 at 30 lines, 10 at 100, 5 at 300,
3 at 1,000; the 1,000 draws are the whole file with another half kept). Pairs are mined with the
default k, margin and mode and no threshold; precision, recall and F1 of the gold pairs are computed for
each margin threshold and standout floor (--min-z, bitextmine/mining/standout.py). Suggested: the pair
with the best F1 averaged over sizes and languages; then the precision, recall and F1 of that default
per size and language. With --holdout the tasks come from training pairs held apart from the model
(UI strings, help text, news, Anki sentences; up to about 5,000 per language), the distractors from
the other languages' held-apart English sides.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bitextmine.config import MineConfig  # noqa: E402
from bitextmine.corpus import read_lines, read_parallel  # noqa: E402
from bitextmine.encoding import encode  # noqa: E402
from bitextmine.mining import mine_embeddings  # noqa: E402
from bitextmine.mining.standout import moments_of, pair_standout  # noqa: E402
from bitextmine.model import load_model  # noqa: E402

DEV = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "dev", "tatoeba", "v1")
LANGS = ["deu", "fra", "spa", "ces", "rus", "cmn", "tur", "ara"]
DRAWS = {30: 20, 100: 10, 300: 5, 1000: 3}
GRID = np.round(np.arange(0.90, 2.01, 0.02), 2)  # margin thresholds
ZS = np.array([0.0, 3.0, 4.0, 4.5, 5.0, 5.5, 6.0, 7.0])  # standout floors (0: off)


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


def draw(X, Y, P, size: int, keep: float, rng: np.random.Generator):
    """One task: (source rows, target rows, gold pairs {(source i, target j)})."""
    pick = rng.choice(len(X), min(size, len(X)), replace=False)
    kept = rng.random(len(pick)) < keep
    tgt = np.concatenate([Y[pick[kept]], P[rng.choice(len(P), int((~kept).sum()), replace=False)]])
    perm = rng.permutation(len(tgt))
    at = np.argsort(perm)  # new position of each target row
    return X[pick], tgt[perm], {(int(i), int(at[j])) for j, i in enumerate(np.flatnonzero(kept))}


def candidates(x, y):
    """mine's candidate pairs with its default search and selection and no threshold, and each one's
    standout z float (c,)."""
    pairs = mine_embeddings(x, y, config=MineConfig(threshold=-np.inf, min_cosine=-np.inf, min_z=0))
    z = pair_standout(pairs.cosine, pairs.src, pairs.tgt, lambda i: x[i], lambda i: y[i], moments_of(x), moments_of(y))
    return pairs, z


def prf_table(x, y, gold) -> np.ndarray:
    """Precision, recall, F1 for every (standout floor, threshold): float (len(ZS), len(GRID), 3)."""
    pairs, z = candidates(x, y)
    hit = np.array([(int(s), int(t)) in gold for s, t in zip(pairs.src, pairs.tgt)], bool)
    out = np.zeros((len(ZS), len(GRID), 3))
    for i, z0 in enumerate(ZS):
        for j, th in enumerate(GRID):
            sel = (pairs.score >= th) & (z >= z0)
            tp = int((hit & sel).sum())
            p, r = tp / max(1, int(sel.sum())), tp / max(1, len(gold))
            out[i, j] = p, r, 2 * p * r / max(1e-9, p + r)
    return out


def show_grid(title: str, f1: np.ndarray) -> None:
    print(f"\n{title} (rows: --min-z; columns: --threshold)")
    cols = list(range(0, len(GRID), 5))
    print("| min-z | " + " | ".join(f"{GRID[j]:.2f}" for j in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for i, z0 in enumerate(ZS):
        print(f"| {z0:g} | " + " | ".join(f"{f1[i, j]:.3f}" for j in cols) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--keep", type=float, default=0.5)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(DRAWS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--holdout", default=None, metavar="DIR",
                    help="tasks from the pairs held apart by tools/train_default.py --holdout (a model trained "
                         "without them) instead of Tatoeba v1")
    args = ap.parse_args()
    model = load_model(args.model)
    print(f"model {model.fingerprint}; k={MineConfig.k}, margin={MineConfig.margin}, mode={MineConfig.mode}")
    res = {}  # (lang, size) -> mean (len(ZS), len(GRID), 3) over the draws
    for lang in LANGS:
        X, Y, P = encoded_task(lang, model, args.holdout)
        rng = np.random.default_rng(args.seed)
        for size in args.sizes:
            res[lang, size] = np.mean([prf_table(*draw(X, Y, P, size, args.keep, rng))
                                       for _ in range(DRAWS.get(size, 3))], axis=0)
    per_size = {s: np.mean([res[lang, s] for lang in LANGS], axis=0) for s in args.sizes}
    for s in args.sizes:
        show_grid(f"mean F1, {s} source lines, over the 8 languages", per_size[s][..., 2])
    overall = np.mean([per_size[s][..., 2] for s in args.sizes], axis=0)
    show_grid("mean F1 over the sizes", overall)
    i, j = np.unravel_index(overall.argmax(), overall.shape)
    j0 = int(overall[0].argmax())
    print(f"\nsuggested: --threshold {GRID[j]:.2f} --min-z {ZS[i]:g}: mean F1 {overall[i, j]:.3f} "
          f"(margin alone: --threshold {GRID[j0]:.2f}, {overall[0, j0]:.3f})")
    for title, (a, b) in ((f"--threshold {GRID[j]:.2f} --min-z {ZS[i]:g}", (i, j)),
                          (f"margin alone, --threshold {GRID[j0]:.2f}", (0, j0))):
        print(f"\n{title}: F1 per language, mean precision, recall and F1 over the languages")
        print("\n| size | " + " | ".join(LANGS) + " | mean P | mean R | mean F1 |")
        print("|---" * (len(LANGS) + 4) + "|")
        for s in args.sizes:
            p, r, f = per_size[s][a, b]
            print(f"| {s} | " + " | ".join(f"{res[lang, s][a, b, 2]:.3f}" for lang in LANGS)
                  + f" | {p:.3f} | {r:.3f} | {f:.3f} |")


if __name__ == "__main__":
    main()
