"""Precision, recall and F1 of mined pairs over a grid of margin thresholds, standout floors and cosine floors,
and the choice of a broad top of that surface: how tools/calibrate_threshold.py chooses `mine`'s defaults and each
language's settings (and tools/f1_by_size.py its oracle).
"""

from __future__ import annotations

import numpy as np

from ..config import MineConfig
from ..mining.mine import candidates as mine_candidates
from ..mining.select import finish
from ..mining.standout import moments_of, pair_standout

GRID = np.round(np.arange(0.90, 2.01, 0.02), 2)  # margin thresholds
ZS = np.array([0.0, 3.0, 4.0, 4.5, 5.0, 5.5, 6.0, 7.0])  # standout floors (0: off)
FLOORS = np.array([0.0, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5])  # cosine floors (0: off)


def candidates(x, y):
    """mine's candidates of each row with its default search and margin, before any floor (f, b as
    :func:`bitextmine.mining.mine.candidates` gives them), and their standout z as the function
    :func:`bitextmine.mining.select.finish` takes (each candidate's z computed once)."""
    f, b, _ = mine_candidates(x, y, MineConfig())
    s, t, cos = (np.concatenate([u, v]) for u, v in zip((f[0], f[1], f[3]), (b[0], b[1], b[3])))
    z = pair_standout(cos, s, t, lambda i: x[i], lambda i: y[i], moments_of(x), moments_of(y))
    table = dict(zip(zip(s.tolist(), t.tolist()), z.tolist()))

    def standout(src, tgt, _cos):
        return np.array([table[p] for p in zip(src.tolist(), tgt.tolist())], np.float32)

    return f, b, standout


def prf_table(x, y, gold, floors: np.ndarray = FLOORS) -> np.ndarray:
    """Precision, recall, F1 for every (cosine floor, standout floor, threshold): float
    (len(floors), len(ZS), len(GRID), 3). The floors select before the 1:1 selection, as in `mine`; the
    threshold can be applied after it (a candidate at or above it is only ever blocked by a better one)."""
    f, b, standout = candidates(x, y)
    out = np.zeros((len(floors), len(ZS), len(GRID), 3))
    for a, fl in enumerate(floors):
        for i, z0 in enumerate(ZS):
            config = MineConfig(threshold=-np.inf, min_cosine=float(fl), min_z=float(z0))
            s, t, score, *_ = finish(f, b, config, standout if z0 > 0 else None)
            hit = np.array([(int(p), int(q)) in gold for p, q in zip(s, t)], bool)
            sel = score[:, None] >= GRID[None, :]  # (pairs, thresholds)
            tp, n = (sel & hit[:, None]).sum(0), sel.sum(0)
            p, r = tp / np.maximum(1, n), tp / max(1, len(gold))
            out[a, i] = np.stack([p, r, 2 * p * r / np.maximum(1e-9, p + r)], axis=1)
    return out


def plateau(f1: np.ndarray) -> np.ndarray:
    """Each grid point's F1 averaged with its neighbours (one step along each axis, the edges repeated):
    choosing its maximum prefers settings whose neighbours are as good, so that the choice does not hang on
    one draw of the tasks or one sentence's score."""
    padded = np.pad(f1, 1, mode="edge")
    out = np.zeros_like(f1)
    for shift in np.ndindex(*(3,) * f1.ndim):
        out += padded[tuple(slice(d, d + n) for d, n in zip(shift, f1.shape))]
    return out / 3 ** f1.ndim


def best(f1: np.ndarray) -> tuple:
    """The grid index of :func:`plateau`'s maximum."""
    return tuple(int(i) for i in np.unravel_index(plateau(f1).argmax(), f1.shape))


def settings(index: tuple) -> dict:
    """{threshold, min_z, min_cosine} of a grid index (floor, z, threshold)."""
    a, i, j = index
    return {"threshold": float(GRID[j]), "min_z": float(ZS[i]), "min_cosine": float(FLOORS[a])}
