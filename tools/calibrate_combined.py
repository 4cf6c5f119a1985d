"""Measure a calibrated combination of margin, cosine and standout for `mine`, with one threshold for
all languages or one per language, on the dev tasks of tools/calibrate_threshold.py (Tatoeba v1, or
the held-apart pairs with --holdout).

    python tools/calibrate_combined.py [--model DIR] [--holdout .bench/holdout]

Every candidate pair that `mine`'s default search and selection produce (no threshold) gets three
features: its ratio margin, its cosine and its standout z (capped at 12). A logistic regression on
them, fitted on whether the pair is gold (each language and size weighted alike), gives one score
per pair. Printed: the F1 of the current defaults (--threshold / --min-z), of the combined score at
its best single threshold, and at the best threshold of each language (chosen on that language's
tasks), per language averaged over sizes and draws; and how many pairs each of them keeps on the
README's example (examples/de.txt, examples/en.txt: 14 translations). This measures a possible next
default; `mine` does not use the combined score.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from calibrate_threshold import DRAWS, LANGS, candidates, draw, encoded_task  # noqa: E402

from bitextmine.config import MineConfig  # noqa: E402
from bitextmine.corpus import read_lines  # noqa: E402
from bitextmine.encoding import encode  # noqa: E402
from bitextmine.model import load_model  # noqa: E402

Z_CAP = 12.0
EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples")


def features(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Features of mine's candidate pairs before any threshold: float64 (c, 3) margin, cosine, z;
    and the (src, tgt) rows int64 (c, 2)."""
    pairs, z = candidates(x, y)
    feats = np.stack([pairs.score, pairs.cosine, np.minimum(z, Z_CAP)], 1).astype(np.float64)
    return feats, np.stack([pairs.src, pairs.tgt], 1)


def fit_logistic(f: np.ndarray, y: np.ndarray, w: np.ndarray, steps: int = 50) -> np.ndarray:
    """Weighted logistic regression by Newton's method: f float (n, d), y 0/1 (n,), w >= 0 (n,);
    returns the coefficients float64 (d + 1,), the intercept last."""
    a = np.hstack([f, np.ones((len(f), 1))])
    beta = np.zeros(a.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-a @ beta))
        grad = a.T @ (w * (p - y))
        hess = (a * (w * p * (1 - p))[:, None]).T @ a + 1e-9 * np.eye(len(beta))
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-10:
            break
    return beta


def combined(f: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """The combination's logit for features f float (n, 3)."""
    return f @ beta[:-1] + beta[-1]


def f1(keep: np.ndarray, hit: np.ndarray, n_gold: int) -> float:
    tp = int((keep & hit).sum())
    p, r = tp / max(1, int(keep.sum())), tp / max(1, n_gold)
    return 2 * p * r / max(1e-9, p + r)


def mean_f1(tasks: list, lang: str | None, keep_fn) -> float:
    """F1 averaged over the tasks of ``lang`` (None: all), sizes weighted alike."""
    by_size: dict[int, list] = {}
    for t_lang, size, feats, hit, n_gold in tasks:
        if lang is None or t_lang == lang:
            by_size.setdefault(size, []).append(f1(keep_fn(feats), hit, n_gold))
    return float(np.mean([np.mean(v) for v in by_size.values()]))


def build_tasks(model, holdout: str | None, sizes: list[int], seed: int) -> list:
    tasks = []
    for lang in LANGS:
        X, Y, P = encoded_task(lang, model, holdout)
        rng = np.random.default_rng(seed)
        for size in sizes:
            for _ in range(DRAWS.get(size, 3)):
                x, y, gold = draw(X, Y, P, size, 0.5, rng)
                feats, rows = features(x, y)
                hit = np.array([(int(s), int(t)) in gold for s, t in rows], bool)
                tasks.append((lang, size, feats, hit, len(gold)))
    return tasks


def best_threshold(tasks: list, lang: str | None, beta: np.ndarray) -> tuple[float, float]:
    grid = np.round(np.arange(-4, 6.01, 0.1), 1)
    scores = [mean_f1(tasks, lang, lambda f, t=t: combined(f, beta) >= t) for t in grid]
    i = int(np.argmax(scores))
    return float(grid[i]), scores[i]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--holdout", default=None, metavar="DIR")
    ap.add_argument("--sizes", type=int, nargs="+", default=list(DRAWS))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    model = load_model(args.model)
    tasks = build_tasks(model, args.holdout, args.sizes, args.seed)
    feats = np.vstack([t[2] for t in tasks])
    hits = np.concatenate([t[3] for t in tasks]).astype(np.float64)
    per_group = Counter()
    for t in tasks:
        per_group[t[:2]] += len(t[3])
    weights = np.concatenate([np.full(len(t[3]), 1.0 / per_group[t[:2]]) for t in tasks])
    beta = fit_logistic(feats, hits, weights)
    ex_feats, _ = features(*(encode(read_lines(os.path.join(EXAMPLE, f)), model) for f in ("de.txt", "en.txt")))
    default = MineConfig()
    keep_default = lambda f: (f[:, 0] >= default.threshold) & (f[:, 2] >= default.min_z)  # noqa: E731
    t_all, _ = best_threshold(tasks, None, beta)
    print(f"model {model.fingerprint}; combination logit = {beta[0]:.3f} margin + {beta[1]:.3f} cosine + "
          f"{beta[2]:.3f} min(z, {Z_CAP:g}) + {beta[3]:.3f}; one threshold for all: {t_all:.1f}")
    print("\n| language | defaults (--threshold %g --min-z %g) | combined, one threshold | combined, its own "
          "threshold | own threshold | README example pairs (defaults / one / own) |"
          % (default.threshold, default.min_z))
    print("|---|---|---|---|---|---|")
    for lang in LANGS:
        t_own, f_own = best_threshold(tasks, lang, beta)
        kept = (int(keep_default(ex_feats).sum()), int((combined(ex_feats, beta) >= t_all).sum()),
                int((combined(ex_feats, beta) >= t_own).sum()))
        print(f"| {lang} | {mean_f1(tasks, lang, keep_default):.3f} | "
              f"{mean_f1(tasks, lang, lambda f: combined(f, beta) >= t_all):.3f} | {f_own:.3f} | {t_own:.1f} | "
              f"{kept[0]} / {kept[1]} / {kept[2]} |")


if __name__ == "__main__":
    main()
