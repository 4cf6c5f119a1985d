"""The second stage at work: :class:`Judge` gives candidate pairs their probability of translation, as
:func:`bitextmine.mining.select.finish` asks for it, from whatever holds the sides (in memory for
:func:`bitextmine.judge.train.task_features`, a work directory for the staged run)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..parallel import ordered_map
from .features import Pieces
from .store import SecondStage

# rows int64 (r,) ascending distinct -> Pieces of those rows (a side's texts, tokenised)
PiecesOf = Callable[[np.ndarray], Pieces]
CHUNK_PAIRS = 20000  # pairs per worker task: features and trees are per pair, so chunks change no result


class Judge:
    """The probability of translation of candidate pairs (src row, tgt row) for ``lang`` paired with English.

    ``src_is_english``: the orientation of the run; ``pieces``: one :data:`PiecesOf` per side ("src", "tgt");
    ``workers``: processes that share the features and trees of more than ``chunk_pairs`` pairs (0 = one per
    core)."""

    def __init__(self, stage: SecondStage, lang: str, src_is_english: bool, pieces: dict, workers: int = 0,
                 chunk_pairs: int = CHUNK_PAIRS):
        self.stage, self.lang, self.swap = stage, lang, src_is_english
        self.pieces, self.workers, self.chunk_pairs = pieces, workers, chunk_pairs
        self.share: float | None = None  # after a call: the mean score of those judged, before the prior step

    @property
    def floor(self) -> float:
        """The margin below which a candidate is not judged (a probability of 0)."""
        return float(self.stage.languages[self.lang]["floor"])

    def features(self, s: np.ndarray, t: np.ndarray, score: np.ndarray, cos: np.ndarray, z: np.ndarray) -> np.ndarray:
        """The features float64 (c, f) (:attr:`SecondStage.features`) of the pairs (s, t) int (c,)."""
        s, t = np.asarray(s, np.int64), np.asarray(t, np.int64)
        return self._features(self._pieces(s, t), s, t, score, cos, z)

    def _pieces(self, s: np.ndarray, t: np.ndarray) -> tuple[Pieces, Pieces]:
        return self.pieces["src"](np.unique(s)), self.pieces["tgt"](np.unique(t))

    def _features(self, pieces: tuple, s, t, score, cos, z) -> np.ndarray:
        return self.stage.pair_features(self.lang, *pieces, s, t, score, cos, z, self.swap)

    def probability(self, s: np.ndarray, t: np.ndarray, score: np.ndarray, cos: np.ndarray,
                    z: np.ndarray) -> np.ndarray:
        """P(translation) float64 (c,) of the pairs (s, t) int (c,) at the share of translations the classifier
        was trained with: chunks of ``chunk_pairs`` pairs over ``workers`` processes when there are more (the
        sides' pieces, tables and trees made here first and inherited, not copied, by the forked workers; where
        processes are spawned, they are pickled: no closure goes along)."""
        s, t = np.asarray(s, np.int64), np.asarray(t, np.int64)
        pieces = self._pieces(s, t)
        self.stage.tables(self.lang)
        self.stage.expected(self.lang)
        self.stage.vectors()
        self.stage.probability(self.lang, np.zeros((0, len(self.stage.features))))  # loads the classifier
        cols = [s, t] + [np.asarray(a) for a in (score, cos, z)]
        step = max(1, self.chunk_pairs)
        chunks = (tuple(a[i:i + step] for a in cols) for i in range(0, len(s), step))
        parts = ordered_map(_chunk_probability, chunks, init=_hold,
                            init_args=(self.stage, self.lang, self.swap, pieces), workers=self.workers,
                            inline=1 if self.workers != 1 else len(s))  # one worker: all here, none forked
        try:
            return np.concatenate([np.zeros(0), *parts])
        finally:
            _hold(None, None, False, None)

    def __call__(self, s: np.ndarray, t: np.ndarray, score: np.ndarray, cos: np.ndarray, z: np.ndarray) -> np.ndarray:
        """P(translation) float32 (c,) of the pairs (s, t) int (c,) with their margin score, cosine and z float (c,):
        every candidate of a run in one call, distinct, for the probabilities are adjusted to the share of
        translations among those judged (:meth:`SecondStage.adjusted`); 0 below the margin floor (not judged)."""
        out = np.zeros(len(s), np.float32)
        ok = np.asarray(score) >= self.floor
        if ok.any():
            p = self.probability(*(np.asarray(a)[ok] for a in (s, t, score, cos, z)))
            self.share = float(p.mean())
            out[ok] = self.stage.adjust(self.lang, p)
        return out


_HELD: tuple = (None, None, False, None)  # (stage, lang, swap, pieces) of the judging under way, here or in a worker


def _hold(stage: SecondStage | None, lang: str | None, swap: bool, pieces: tuple | None, child: bool = False) -> None:
    global _HELD
    _HELD = (stage, lang, swap, pieces)


def _chunk_probability(cols: tuple) -> np.ndarray:
    stage, lang, swap, pieces = _HELD
    return stage.probability(lang, stage.pair_features(lang, *pieces, *cols, swap))
