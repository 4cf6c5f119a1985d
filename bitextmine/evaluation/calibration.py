"""Choosing a score threshold for a model: good pairs from a small gold set, bad pairs generated from it.

Bad pairs are of two kinds: *shuffled* (each source with the target of another random pair) and
*near-miss* (each source with the most similar target that is not its own: the hard case). Every
good and bad pair is scored (cosine, or ratio margin against the k nearest neighbours within the gold
set), and precision, recall and F1 of "score >= threshold" are reported over a grid of thresholds; the
suggested threshold maximises F1 (good pairs are the positives).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..config import EncodeConfig
from ..errors import ConfigError
from .metrics import best_threshold, evaluate_threshold


@dataclass
class CalibrationReport:
    score: str
    suggested: float
    best: dict  # precision, recall, f1 at the suggested threshold
    rows: list[dict]  # threshold, precision, recall, f1 per grid point
    scores: dict = field(default_factory=dict)  # good, shuffled, near-miss: float arrays
    blank: list = field(default_factory=list)  # the gold pairs (1-based) left out: a side empty or blank

    def to_json(self) -> dict:
        return {"score": self.score, "suggested_threshold": self.suggested, "at_suggested": self.best,
                "pairs": {k: int(len(v)) for k, v in self.scores.items()}, "left_out_blank": self.blank,
                "grid": self.rows}

    def to_table(self) -> str:
        from ..report import table

        rows = [[f"{r['threshold']:.3f}", 100 * r["precision"], 100 * r["recall"], 100 * r["f1"]] for r in self.rows]
        n = {k: len(v) for k, v in self.scores.items()}
        head = (f"{n['good']} good pairs; bad: {n['shuffled']} shuffled, {n['near-miss']} near-miss; "
                f"score: {self.score}\n")
        if self.blank:
            shown = ", ".join(map(str, self.blank[:10])) + (", ..." if len(self.blank) > 10 else "")
            head += f"left out: {len(self.blank)} gold pairs with a blank side (pairs {shown})\n"
        tail = (f"\nsuggested threshold: {self.suggested:.4f} (precision {100 * self.best['precision']:.1f}, "
                f"recall {100 * self.best['recall']:.1f}, F1 {100 * self.best['f1']:.1f})")
        return head + table(["threshold", "precision %", "recall %", "F1 %"], rows) + tail


def calibrate(src: Sequence[str], tgt: Sequence[str], model, *, score: str = "cosine", k: int = 4, seed: int = 1,
              grid: int = 21, config: EncodeConfig = EncodeConfig()) -> CalibrationReport:
    """Calibrate on gold pairs (src[i], tgt[i]). Returns a CalibrationReport (see module docstring). A pair with a
    blank side is no translation to learn a threshold from: it is left out, and the report names it."""
    from ..encoding.pipeline import encode
    from ..mining.margin import margin_scores

    if len(tgt) != len(src):
        raise ConfigError(f"calibration needs aligned gold pairs, got {len(src)} sources and {len(tgt)} targets")
    kept = [bool(s.strip() and t.strip()) for s, t in zip(src, tgt)]
    blank = [i + 1 for i, k in enumerate(kept) if not k]
    src, tgt = [s for s, k in zip(src, kept) if k], [t for t, k in zip(tgt, kept) if k]
    n = len(src)
    if n < 3:
        raise ConfigError(f"calibration needs at least 3 gold pairs with text on both sides, got {n}"
                          + (f" ({len(blank)} with a blank side)" if blank else ""))
    if score not in ("cosine", "margin"):
        raise ConfigError(f"score {score!r}: expected cosine or margin")
    x = encode(list(src), model, config=config)
    y = encode(list(tgt), model, config=config)
    rng = np.random.default_rng(seed)
    rows = np.arange(n)
    shuffled = (rows + rng.integers(1, n, n)) % n  # never the pair itself
    near, (good, shuffled_cos, near_cos), mx, my = _neighbours(x, y, shuffled, k)
    gold = set(zip(src, tgt))  # a pair of a gold source and another gold target may be a gold pair too: not bad
    same = np.array([(src[i], tgt[j]) in gold for i, j in enumerate(near)])  # (repeated sides, alternative
    twin = np.array([(src[i], tgt[j]) in gold for i, j in enumerate(shuffled)])  # translations, equal texts)
    pairs = {"good": (rows, rows, good), "shuffled": (rows[~twin], shuffled[~twin], shuffled_cos[~twin]),
             "near-miss": (rows[~same], near[~same], near_cos[~same])}
    if score == "margin":
        scores = {name: margin_scores(v, mx[i], my[j], "ratio") for name, (i, j, v) in pairs.items()}
    else:
        scores = {name: v for name, (i, j, v) in pairs.items()}
    allv = np.concatenate(list(scores.values())).astype(np.float64)
    correct = np.concatenate([np.ones(n, bool), np.zeros(len(allv) - n, bool)])
    t = best_threshold(allv, correct, n)
    best = evaluate_threshold(allv, correct, n, t)
    lo, hi = np.percentile(allv, [1, 99])
    out_rows = []
    for th in np.linspace(lo, hi, grid):
        r = evaluate_threshold(allv, correct, n, float(th))
        out_rows.append({"threshold": float(th), "precision": r.precision, "recall": r.recall, "f1": r.f1})
    return CalibrationReport(score, float(t), {"precision": best.precision, "recall": best.recall, "f1": best.f1},
                             out_rows, scores, blank)


def _neighbours(x: np.ndarray, y: np.ndarray, shuffled: np.ndarray, k: int):
    """From one blockwise pass over x @ y.T (x, y float32 (n, d), aligned gold pairs, n >= 3): near int64 (n,),
    each row's best column other than its own (ties: the lower column); the cosines float32 (n,) of the pairs
    (i, i), (i, shuffled[i]) and (i, near[i]); the means float32 (n,) of each row's (mx) and each column's
    (my) min(k, n) best cosines."""
    from ..mining.margin import neighbour_means
    from ..search.topk import topk

    n = len(x)
    rows = np.arange(n)
    kk = min(k, n)
    best = topk(x, y, max(kk, 2), columns=True, col_k=kk,
                pairs=(np.concatenate([rows, rows]), np.concatenate([rows, shuffled])))
    own = best.I[:, 0] == rows  # then the best other column is the second (same order: value, then index)
    near = np.where(own, best.I[:, 1], best.I[:, 0])
    near_cos = np.where(own, best.D[:, 1], best.D[:, 0])
    # summed from the k-th best up, as this command always has (its figures stay those it printed)
    mx, my = neighbour_means(best.D[:, kk - 1 :: -1]), neighbour_means(best.Dc[:, ::-1])
    return near, (best.P[:n], best.P[n:], near_cos), mx, my


def plot_calibration(report: CalibrationReport, path: str) -> None:
    """PNG of the score distributions of good and bad pairs, with the suggested threshold (matplotlib)."""
    from ..report import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    allv = np.concatenate(list(report.scores.values()))
    bins = np.linspace(allv.min(), allv.max(), 50)
    for name, v in report.scores.items():
        ax.hist(v, bins=bins, alpha=0.5, label=f"{name} ({len(v)})")
    ax.axvline(report.suggested, color="black", linestyle="--", label=f"suggested {report.suggested:.3f}")
    ax.set_xlabel(f"{report.score} score")
    ax.set_ylabel("pairs")
    ax.legend()
    ax.set_title(f"F1 {100 * report.best['f1']:.1f} at the suggested threshold")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
