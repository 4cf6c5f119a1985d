"""Choose the default `mine --threshold` for a model on held-out Tatoeba v1 data (never trained on).

    python tools/calibrate_threshold.py [--model DIR] [--keep 0.5]

For each of the 8 languages: the source side is all of tatoeba.L-eng.L; the target side keeps the
English translations of a random half (--keep) and replaces the others with English lines of other
languages' Tatoeba files (distractors, none equal to an English line of this file), shuffled. Pairs
are mined with the default k, margin and mode and threshold 0; precision, recall and F1 of the gold
pairs are computed for each threshold and cosine floor (--min-cosine). The same task is also run on
small inputs (50 source sentences, 20 random draws per language), where margins run higher because
every sentence's neighbours are unrelated. Suggested: the threshold with the best F1 averaged over
languages and both sizes without a cosine floor (the default), and the best threshold and floor
together (for `--min-cosine`).
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
from bitextmine.model import load_model  # noqa: E402

DEV = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "dev", "tatoeba", "v1")
LANGS = ["deu", "fra", "spa", "ces", "rus", "cmn", "tur", "ara"]


def task(lang: str, keep: float, rng: np.random.Generator, size: int | None = None):
    """(source texts, target texts, gold pairs) for one language; ``size`` sources sampled, or all."""
    x, y = read_parallel(f"{DEV}/tatoeba.{lang}-eng.{lang}", f"{DEV}/tatoeba.{lang}-eng.eng")
    if size is not None:
        pick = rng.choice(len(x), size, replace=False)
        x, y = [x[i] for i in pick], [y[i] for i in pick]
    own = set(y)
    pool = sorted({e for other in LANGS if other != lang for e in read_lines(f"{DEV}/tatoeba.{other}-eng.eng")} - own)
    kept = rng.random(len(x)) < keep
    n_dis = int((~kept).sum())
    tgt = [y[i] for i in np.flatnonzero(kept)] + list(rng.choice(pool, n_dis, replace=False))
    order = rng.permutation(len(tgt))
    tgt = [tgt[i] for i in order]
    pos = {t: i for i, t in enumerate(tgt)}
    gold = {(i, pos[y[i]]) for i in np.flatnonzero(kept)}
    return x, tgt, gold


GRID = np.round(np.arange(0.90, 2.01, 0.01), 2)
FLOORS = np.round(np.arange(0.0, 0.61, 0.05), 2)


def f1_table(model, x, tgt, gold) -> np.ndarray:
    """F1 for every (cosine floor, threshold): float (len(FLOORS), len(GRID))."""
    pairs = mine_embeddings(encode(x, model), encode(tgt, model), config=MineConfig(threshold=-np.inf, min_cosine=-np.inf))
    hit = np.array([(int(s), int(t)) in gold for s, t in zip(pairs.src, pairs.tgt)], bool)
    f1 = np.zeros((len(FLOORS), len(GRID)))
    for i, fl in enumerate(FLOORS):
        for j, th in enumerate(GRID):
            sel = (pairs.score >= th) & (pairs.cosine >= fl)
            tp = int((hit & sel).sum())
            p, r = tp / max(1, int(sel.sum())), tp / max(1, len(gold))
            f1[i, j] = 2 * p * r / max(1e-9, p + r)
    return f1


def show(title: str, mean: np.ndarray) -> None:
    print(f"\n{title} (rows: min-cosine; columns: threshold)")
    cols = list(range(0, len(GRID), 10))
    print("| min-cosine | " + " | ".join(f"{GRID[j]:.2f}" for j in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for i, fl in enumerate(FLOORS):
        print(f"| {fl:.2f} | " + " | ".join(f"{mean[i, j]:.3f}" for j in cols) + " |")
    i, j = np.unravel_index(mean.argmax(), mean.shape)
    print(f"best: threshold {GRID[j]:.2f}, min-cosine {FLOORS[i]:.2f}: F1 {mean[i, j]:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--keep", type=float, default=0.5)
    ap.add_argument("--small", type=int, default=50, help="source sentences of the small tasks")
    ap.add_argument("--draws", type=int, default=20, help="small tasks per language")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    model = load_model(args.model)
    rng = np.random.default_rng(args.seed)
    print(f"model {model.fingerprint}; k={MineConfig.k}, margin={MineConfig.margin}, mode={MineConfig.mode}")
    large = np.mean([f1_table(model, *task(lang, args.keep, rng)) for lang in LANGS], axis=0)
    small = np.mean([f1_table(model, *task(lang, args.keep, rng, args.small))
                     for lang in LANGS for _ in range(args.draws)], axis=0)
    show("mean F1, 1000 sentences per side, over the 8 languages", large)
    show(f"mean F1, {args.small} sentences per side, over the 8 languages x {args.draws} draws", small)
    both = (large + small) / 2
    show("mean F1 over both sizes", both)
    # the default threshold is chosen without a cosine floor: margin mining as the literature does it
    j0 = int(both[0].argmax())
    print(f"\nsuggested default: threshold {GRID[j0]:.2f} with no cosine floor "
          f"(F1 {large[0, j0]:.3f} at 1000 sentences, {small[0, j0]:.3f} at {args.small})")
    i, j = np.unravel_index(both.argmax(), both.shape)
    print(f"with a cosine floor: threshold {GRID[j]:.2f}, --min-cosine {FLOORS[i]:.2f} "
          f"(F1 {large[i, j]:.3f} at 1000 sentences, {small[i, j]:.3f} at {args.small})")


if __name__ == "__main__":
    main()
