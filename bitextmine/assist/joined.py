"""The assist's cosine joined with the second stage's score: one logistic function of the stage's adjusted score
(as a log-odds) and how far the assist's cosine of the pair stands above the assist's cosines of random pairs of
the same lines (in their standard deviations: encoders whose cosines lie on other scales give comparable
numbers), fitted on dev tasks (:data:`JOINED`, docs/assist.md).

The fast model's search proposes the candidates (with --assist-pick, the assist chooses among each line's
neighbours: :mod:`.pick`) and the stage judges them as without the assist; the joined score replaces the stage's
where the stage judged a pair (0 elsewhere), and --min-prob applies to it."""

from __future__ import annotations

from typing import Callable

import numpy as np

# Fitted (Newton's method, L2 1e-3, standardised features) on the candidates the second stage judged on 96 tasks of
# Debian manuals (train/debian_docs), the half of its sentence pairs chosen by a hash of the English side: 8
# languages paired with English, 1,000 lines a side, 1/5/10/50 % translated, 3 draws; assist: use.
JOINED = {
    "features": ("stage_log_odds", "assist_standout"),
    "mean": (-6.220831, 3.538207),
    "std": (5.541551, 2.321715),
    "weights": (4.814374, 0.937993),
    "bias": -5.129993,
    "min_score": 0.5,  # the --min-prob the joined score was fitted for
    "min_score_pick": 0.5,  # the --min-prob with --assist-pick, chosen on the same half's tasks (docs/assist.md)
    "fitted_with": "use",
    "null_pairs": 4000,  # random pairs of the judged pairs' lines whose cosines give the mean and deviation
}
_EPS = 1e-6


def joined_score(stage: np.ndarray, standout: np.ndarray, params: dict = JOINED) -> np.ndarray:
    """float32 (c,): the joined score of pairs with the stage's adjusted score ``stage`` (c,) in [0, 1] and the
    assist's standout ``standout`` (c,) (:func:`standout`)."""
    p = np.clip(np.asarray(stage, np.float64), _EPS, 1 - _EPS)
    x = np.stack([np.log(p / (1 - p)), np.asarray(standout, np.float64)], 1)
    z = ((x - params["mean"]) / params["std"]) @ np.asarray(params["weights"]) + params["bias"]
    return (1 / (1 + np.exp(-z))).astype(np.float32)


def standout(cosine: Callable, s: np.ndarray, t: np.ndarray, pairs: int = JOINED["null_pairs"],
             seed: int = 0) -> np.ndarray:
    """float64 (c,): the assist's cosine of each pair (s, t) int64 (c,) less the mean of its cosines of ``pairs``
    random pairs of the same source and target lines (drawn with ``seed``), over their standard deviation."""
    if len(s) == 0:
        return np.zeros(0)
    rng = np.random.default_rng(seed)
    us, ut = np.unique(s), np.unique(t)
    c = np.asarray(cosine(np.concatenate([s, rng.choice(us, pairs)]), np.concatenate([t, rng.choice(ut, pairs)])),
                   np.float64)
    null = c[len(s):]
    return (c[:len(s)] - null.mean()) / max(float(null.std()), 1e-6)


class AssistedJudge:
    """A :class:`bitextmine.judge.judge.Judge` whose scores are joined with the assist's standout of each pair it
    judged (:func:`standout`). ``cosine(s, t)``: the assist's cosine float (c,) of the pairs (src row, tgt row)
    int64 (c,)."""

    def __init__(self, judge, cosine: Callable[[np.ndarray, np.ndarray], np.ndarray]):
        self.judge, self.cosine = judge, cosine

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
            s, t = np.asarray(s, np.int64)[ok], np.asarray(t, np.int64)[ok]
            out[ok] = joined_score(stage[ok], standout(self.cosine, s, t))
        return out


def join_aligned(p: np.ndarray, src: list[str], tgt: list[str], assist) -> np.ndarray:
    """float32 (n,): the second stage's scores ``p`` (n,) of the given pairs (src[i], tgt[i]) (``filter --score
    prob``, ``score --margin prob``) joined with ``assist``'s standout of each pair the stage judged (p > 0); the
    assist encodes each distinct line of those pairs once."""
    p = np.asarray(p, np.float32)
    judged = np.flatnonzero(p > 0)
    out = np.zeros(len(p), np.float32)
    if len(judged) == 0:
        return out
    lines = {}
    s = np.array([lines.setdefault(("s", src[i]), len(lines)) for i in judged.tolist()], np.int64)
    t = np.array([lines.setdefault(("t", tgt[i]), len(lines)) for i in judged.tolist()], np.int64)
    x = assist.encode([text for _, text in lines])  # keys in insertion order: row r is the r-th line met
    cosine = lambda a, b: np.einsum("ij,ij->i", x[a], x[b])
    out[judged] = joined_score(p[judged], standout(cosine, s, t))
    return out
