"""The assist's cosine joined with the second stage's score: one logistic function of the stage's adjusted score
(as a log-odds) and the assist's cosine of the pair, fitted on dev tasks (:data:`JOINED`, docs/assist.md).

The fast model's search proposes the candidates and the stage judges them as without the assist; the joined score
replaces the stage's where the stage judged a pair (0 elsewhere), and --min-prob applies to it."""

from __future__ import annotations

from typing import Callable

import numpy as np

# Fitted (Newton's method, L2 1e-3, standardised features) on the candidates the second stage judged on 96 tasks of
# Debian manuals (train/debian_docs), the half of its sentence pairs chosen by a hash of the English side: 8
# languages paired with English, 1,000 lines a side, 1/5/10/50 % translated, 3 draws; assist: use.
JOINED = {
    "features": ("stage_log_odds", "assist_cosine"),
    "mean": (-6.220831, 0.391052),
    "std": (5.541551, 0.229404),
    "weights": (4.859519, 0.87626),
    "bias": -5.094292,
    "min_score": 0.5,  # the --min-prob the joined score was fitted for
    "fitted_with": "use",
}
_EPS = 1e-6


def joined_score(stage: np.ndarray, cosine: np.ndarray, params: dict = JOINED) -> np.ndarray:
    """float32 (c,): the joined score of pairs with the stage's adjusted score ``stage`` (c,) in [0, 1] and the
    assist's cosine ``cosine`` (c,)."""
    p = np.clip(np.asarray(stage, np.float64), _EPS, 1 - _EPS)
    x = np.stack([np.log(p / (1 - p)), np.asarray(cosine, np.float64)], 1)
    z = ((x - params["mean"]) / params["std"]) @ np.asarray(params["weights"]) + params["bias"]
    return (1 / (1 + np.exp(-z))).astype(np.float32)


class AssistedJudge:
    """A :class:`bitextmine.judge.judge.Judge` whose scores are joined with the assist's cosine of each pair it
    judged. ``cosine(s, t)``: the assist's cosine float (c,) of the pairs (src row, tgt row) int64 (c,)."""

    def __init__(self, judge, cosine: Callable[[np.ndarray, np.ndarray], np.ndarray]):
        self.judge, self.cosine = judge, cosine
        self.encoded = 0  # lines the assist encoded (both sides)

    @property
    def floor(self) -> float:
        return self.judge.floor

    @property
    def share(self):
        return self.judge.share

    def __call__(self, s: np.ndarray, t: np.ndarray, score: np.ndarray, cos: np.ndarray, z: np.ndarray) -> np.ndarray:
        """float32 (c,): the joined score of the pairs the judge judged (margin from its floor up), 0 elsewhere."""
        stage = self.judge(s, t, score, cos, z)
        out = np.zeros(len(s), np.float32)
        ok = np.asarray(score) >= self.floor
        if ok.any():
            out[ok] = joined_score(stage[ok], self.cosine(np.asarray(s)[ok], np.asarray(t)[ok]))
        return out
