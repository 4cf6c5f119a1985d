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

    def to_json(self) -> dict:
        return {"score": self.score, "suggested_threshold": self.suggested, "at_suggested": self.best,
                "pairs": {k: int(len(v)) for k, v in self.scores.items()}, "grid": self.rows}

    def to_table(self) -> str:
        from ..report import table

        rows = [[f"{r['threshold']:.3f}", 100 * r["precision"], 100 * r["recall"], 100 * r["f1"]] for r in self.rows]
        n = {k: len(v) for k, v in self.scores.items()}
        head = (f"{n['good']} good pairs; bad: {n['shuffled']} shuffled, {n['near-miss']} near-miss; score: {self.score}\n")
        tail = (f"\nsuggested threshold: {self.suggested:.4f} (precision {100 * self.best['precision']:.1f}, "
                f"recall {100 * self.best['recall']:.1f}, F1 {100 * self.best['f1']:.1f})")
        return head + table(["threshold", "precision %", "recall %", "F1 %"], rows) + tail


def calibrate(src: Sequence[str], tgt: Sequence[str], model, *, score: str = "cosine", k: int = 4, seed: int = 1,
              grid: int = 21, config: EncodeConfig = EncodeConfig()) -> CalibrationReport:
    """Calibrate on gold pairs (src[i], tgt[i]). Returns a CalibrationReport (see module docstring)."""
    from ..encoding.pipeline import encode
    from ..mining.margin import margin_scores

    n = len(src)
    if n < 3 or len(tgt) != n:
        raise ConfigError(f"calibration needs at least 3 aligned gold pairs, got {n} and {len(tgt)}")
    if score not in ("cosine", "margin"):
        raise ConfigError(f"score {score!r}: expected cosine or margin")
    x = encode(list(src), model, config=config)
    y = encode(list(tgt), model, config=config)
    sim = x @ y.T
    if score == "margin":
        kk = min(k, n)
        mx = np.sort(sim, axis=1)[:, -kk:].mean(1)
        my = np.sort(sim, axis=0)[-kk:, :].mean(0)
        scored = lambda i, j: margin_scores(sim[i, j], mx[i], my[j], "ratio")  # noqa: E731
    else:
        scored = lambda i, j: sim[i, j]  # noqa: E731
    rng = np.random.default_rng(seed)
    rows = np.arange(n)
    shuffled = (rows + rng.integers(1, n, n)) % n  # never the pair itself
    masked = sim.copy()
    masked[rows, rows] = -np.inf
    near = masked.argmax(1)
    same = np.array([tgt[j] == tgt[i] for i, j in enumerate(near)])  # an equal text is not a bad pair
    scores = {"good": scored(rows, rows), "shuffled": scored(rows, shuffled),
              "near-miss": scored(rows[~same], near[~same])}
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
                             out_rows, scores)


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
