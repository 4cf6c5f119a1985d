"""The second stage at work: :class:`Judge` gives candidate pairs their probability of translation, as
:func:`bitextmine.mining.select.finish` asks for it, from whatever holds the sides (in memory for
:func:`bitextmine.judge.train.task_features`, a work directory for the staged run)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .features import Pieces, pair_features
from .store import SecondStage

# rows int64 (r,) ascending distinct -> Pieces of those rows (a side's texts, tokenised)
PiecesOf = Callable[[np.ndarray], Pieces]


class Judge:
    """The probability of translation of candidate pairs (src row, tgt row) for ``lang`` paired with English.

    ``src_is_english``: the orientation of the run; ``pieces``: one :data:`PiecesOf` per side ("src", "tgt")."""

    def __init__(self, stage: SecondStage, lang: str, src_is_english: bool, pieces: dict):
        self.stage, self.lang, self.swap = stage, lang, src_is_english
        self.pieces = pieces

    @property
    def floor(self) -> float:
        """The margin below which a candidate is not judged (a probability of 0)."""
        return float(self.stage.languages[self.lang]["floor"])

    def features(self, s: np.ndarray, t: np.ndarray, score: np.ndarray, cos: np.ndarray, z: np.ndarray) -> np.ndarray:
        """The features float64 (c, 20) (:data:`bitextmine.judge.features.FEATURES`) of the pairs (s, t) int (c,)."""
        s, t = np.asarray(s, np.int64), np.asarray(t, np.int64)
        ps, pt = self.pieces["src"](np.unique(s)), self.pieces["tgt"](np.unique(t))
        if self.swap:  # English source: the foreign side is the target
            return pair_features(self.stage.tables(self.lang), pt, ps, t, s, score, cos, z)
        return pair_features(self.stage.tables(self.lang), ps, pt, s, t, score, cos, z)

    def __call__(self, s: np.ndarray, t: np.ndarray, score: np.ndarray, cos: np.ndarray, z: np.ndarray) -> np.ndarray:
        """P(translation) float32 (c,) of the pairs (s, t) int (c,) with their margin score, cosine and z float (c,):
        every candidate of a run in one call, distinct, for the probabilities are adjusted to the share of
        translations among those judged (:meth:`SecondStage.adjusted`); 0 below the margin floor (not judged)."""
        out = np.zeros(len(s), np.float32)
        ok = np.asarray(score) >= self.floor
        if ok.any():
            X = self.features(*(np.asarray(a)[ok] for a in (s, t, score, cos, z)))
            out[ok] = self.stage.adjusted(self.lang, X)
        return out
