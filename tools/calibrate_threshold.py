"""Choose the default `mine --threshold` for a model on held-out Tatoeba v1 data (never trained on).

    python tools/calibrate_threshold.py [--model DIR] [--keep 0.5]

For each of the 8 languages: the source side is all of tatoeba.L-eng.L; the target side keeps the
English translations of a random half (--keep) and replaces the others with English lines of other
languages' Tatoeba files (distractors, none equal to an English line of this file), shuffled. Pairs
are mined with the default k, margin and mode and threshold 0; precision, recall and F1 of the gold
pairs are computed for each threshold, and the threshold with the best F1 averaged over languages is
suggested.
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


def task(lang: str, keep: float, rng: np.random.Generator):
    x, y = read_parallel(f"{DEV}/tatoeba.{lang}-eng.{lang}", f"{DEV}/tatoeba.{lang}-eng.eng")
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--keep", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    model = load_model(args.model)
    rng = np.random.default_rng(args.seed)
    grid = np.round(np.arange(0.90, 1.50, 0.01), 2)
    f1s = []
    print(f"model {model.fingerprint}; k={MineConfig.k}, margin={MineConfig.margin}, mode={MineConfig.mode}")
    print("| lang | gold | best threshold | P | R | F1 |")
    print("|---|---|---|---|---|---|")
    for lang in LANGS:
        x, tgt, gold = task(lang, args.keep, rng)
        pairs = mine_embeddings(encode(x, model), encode(tgt, model), config=MineConfig(threshold=-np.inf))
        hit = np.array([(int(s), int(t)) in gold for s, t in zip(pairs.src, pairs.tgt)])
        rows = []
        for th in grid:
            sel = pairs.score >= th
            tp = int((hit & sel).sum())
            p = tp / max(1, int(sel.sum()))
            r = tp / len(gold)
            rows.append((p, r, 2 * p * r / max(1e-9, p + r)))
        rows = np.array(rows)
        f1s.append(rows[:, 2])
        b = int(rows[:, 2].argmax())
        print(f"| {lang} | {len(gold)} | {grid[b]:.2f} | {rows[b, 0]:.3f} | {rows[b, 1]:.3f} | {rows[b, 2]:.3f} |")
    mean = np.mean(f1s, axis=0)
    b = int(mean.argmax())
    print(f"\nmean F1 over languages by threshold: " + ", ".join(f"{t:.2f}:{f:.3f}" for t, f in zip(grid[::5], mean[::5])))
    print(f"suggested threshold {grid[b]:.2f} (mean F1 {mean[b]:.3f})")


if __name__ == "__main__":
    main()
