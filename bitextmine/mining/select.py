"""From each sentence's best candidate to the mined pairs: the floors, then the retrieval mode.

Every floor comes first (margin score >= threshold, cosine >= min_cosine, standout z >= min_z): a
candidate that a floor drops must not take a sentence's place in the 1:1 selection of mode max, or the
sentence's real pair, proposed by the other direction, would be lost with it. Then the mode (see
:mod:`bitextmine.mining.mine`), then the order of the output. :func:`finish` does all three for both
:func:`bitextmine.mining.mine.mine_embeddings` and the staged run (:mod:`bitextmine.pipeline`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..config import MineConfig

# the standout z of pairs: (src int64 (p,), tgt int64 (p,), cosine float32 (p,)) -> float32 (p,)
Standout = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
# the second stage's probability of translation: (src, tgt, score, cosine, z) (p,) each -> float32 (p,)
# (:class:`bitextmine.judge.judge.Judge`)
Judgement = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def finish(f: tuple, b: tuple, config: MineConfig, standout: Standout | None = None,
           judge: Judgement | None = None, screen: Callable | None = None) -> tuple:
    """The pairs ``config`` keeps of the forward candidates f = (src, tgt, score, cos) (one per source row,
    ascending src) and the backward ones b (one per target row, ascending tgt); int64 / float32 (c,) arrays.

    Candidates below config.threshold or config.min_cosine are dropped, then (``standout`` given) each
    remaining one gets its z, and with config.min_z > 0 those below it are dropped; then config.mode's
    selection (:func:`select_pairs`). With ``judge`` (the second stage, which needs ``standout``), every
    candidate from the judge's own margin floor up is judged first, then those below config.min_prob or a
    floor are dropped (:func:`_judged_then_floors`). ``screen(src, tgt)`` (int64 (p,) each: distinct pairs)
    gives bool (p,), whether a pair may be chosen (filter's rules): those it refuses are dropped after the
    floors and before the mode, so in mode max a refused pair does not take its sentences. Returns (src, tgt,
    score, cos, origin int8: 0 forward, 1 backward, z float32: NaN without ``standout``, prob float32: NaN
    without ``judge``), sorted by score descending, ties by source, then target row. Settings left None take
    the global defaults (:meth:`bitextmine.config.MineConfig.resolved`).
    """
    config = config.resolved()
    if judge is not None:
        f, b = _judged_then_floors(f, b, config, standout, judge)
    else:
        f, b = _floors(f, config), _floors(b, config)
        if standout is None:
            f, b = (*f, np.full(len(f[0]), np.nan, np.float32)), (*b, np.full(len(b[0]), np.nan, np.float32))
        else:
            f, b = _stand_out(f, b, standout, config.min_z)
        f, b = (*f, np.full(len(f[0]), np.nan, np.float32)), (*b, np.full(len(b[0]), np.nan, np.float32))
    if screen is not None and len(f[0]) + len(b[0]):
        kf, kb = _per_distinct_pair(f, b, lambda s, t, *rest: screen(s, t))
        f, b = tuple(a[kf > 0] for a in f), tuple(a[kb > 0] for a in b)
    s, t, sc, cos, z, prob, origin = select_pairs(f, b, config)
    order = np.lexsort((t, s, -sc.astype(np.float64)))
    return s[order], t[order], sc[order], cos[order], origin[order], z[order], prob[order]


def _floors(c: tuple, config: MineConfig) -> tuple:
    ok = (c[2] >= config.threshold) & (c[3] >= config.min_cosine)
    return tuple(a[ok] for a in c)


def _stand_out(f: tuple, b: tuple, standout: Standout, min_z: float) -> tuple[tuple, tuple]:
    """f and b with each candidate's z appended, less those below ``min_z`` (> 0). A pair proposed by both
    directions is scored once."""
    zf, zb = _per_distinct_pair(f, b, lambda s, t, score, cos: standout(s, t, cos))
    keep_f, keep_b = (zf >= min_z, zb >= min_z) if min_z > 0 else (slice(None), slice(None))
    return tuple(a[keep_f] for a in (*f, zf)), tuple(a[keep_b] for a in (*b, zb))


def _judged_then_floors(f: tuple, b: tuple, config: MineConfig, standout: Standout | None, judge) -> tuple:
    """f and b with z and probability appended: every candidate from the judge's margin floor (``judge.floor``)
    up gets its z and is judged (the share of translations it adjusts to is estimated over all of them), then
    those below config.min_prob, config.threshold, config.min_cosine or config.min_z are dropped."""
    if standout is None:
        raise ValueError("the second stage needs the standout z")
    floor = getattr(judge, "floor", -np.inf)
    loose = tuple(tuple(a[c[2] >= floor] for a in c) for c in (f, b))
    f, b = _judged(*_stand_out(*loose, standout, 0.0), judge, config.min_prob)
    return tuple(tuple(a[_passes(c, config)] for a in c) for c in (f, b))


def _passes(c: tuple, config: MineConfig) -> np.ndarray:
    """bool (c,): the candidates (src, tgt, score, cos, z, ...) at or above config's three floors."""
    ok = (c[2] >= config.threshold) & (c[3] >= config.min_cosine)
    return ok & (c[4] >= config.min_z) if config.min_z > 0 else ok


def _judged(f: tuple, b: tuple, judge: Judgement, min_prob: float) -> tuple[tuple, tuple]:
    """f and b (src, tgt, score, cos, z) with each candidate's probability appended, less those below
    ``min_prob``. A pair proposed by both directions is judged once."""
    pf, pb = _per_distinct_pair(f, b, judge)
    keep_f, keep_b = pf >= min_prob, pb >= min_prob
    return tuple(a[keep_f] for a in (*f, pf)), tuple(a[keep_b] for a in (*b, pb))


def _per_distinct_pair(f: tuple, b: tuple, value: Callable) -> tuple[np.ndarray, np.ndarray]:
    """``value`` float32 of each candidate of f and of b, tuples of columns (src, tgt, ...) (c,) each; ``value``
    gets those columns of the distinct pairs only, so a pair proposed by both directions is valued once."""
    cols = [np.concatenate([u, v]) for u, v in zip(f, b)]
    s, t = cols[:2]
    key = s.astype(np.int64) * (int(t.max(initial=0)) + 1) + t
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    v = np.asarray(value(*(c[first] for c in cols)), np.float32)[inverse.reshape(-1)]
    return v[: len(f[0])], v[len(f[0]) :]


def select_pairs(f: tuple, b: tuple, config: MineConfig) -> tuple:
    """Apply config.mode to the forward candidates f = (src, tgt, score, cos, *more) (one per source row,
    ascending src) and the backward ones b (one per target row, ascending tgt): arrays (c,) each, ``more``
    carried along (e.g. z).

    Returns (src, tgt, score, cos, *more, origin int8: 0 forward, 1 backward), in no particular order. The
    floors come before (:func:`finish`); for forward, backward, intersect and union they could as well come
    after (a pair in both f and b has the same values in both), for max they cannot.
    """
    if config.mode == "forward":
        return (*f, np.zeros(len(f[0]), np.int8))
    if config.mode == "backward":
        return (*b, np.ones(len(b[0]), np.int8))
    if config.mode == "intersect":
        pos = np.minimum(np.searchsorted(b[1], f[1]), max(len(b[1]) - 1, 0))
        both = (b[1][pos] == f[1]) & (b[0][pos] == f[0]) if len(b[1]) else np.zeros(len(f[0]), bool)
        return (*(a[both] for a in f), np.zeros(int(both.sum()), np.int8))
    cols = [np.concatenate([u, v]) for u, v in zip(f, b)]
    s, t, sc = cols[:3]
    origin = np.repeat(np.array([0, 1], np.int8), [len(f[0]), len(b[0])])
    if config.mode == "union":
        _, keep = np.unique(s.astype(np.int64) * (int(t.max(initial=0)) + 1) + t, return_index=True)
    else:  # max
        keep = greedy_one_to_one(s, t, sc)
    return (*(a[keep] for a in cols), origin[keep])


def greedy_one_to_one(src: np.ndarray, tgt: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Indices (int64, ascending) of the candidates that greedy 1:1 selection keeps: candidates in descending
    score (ties: lower candidate index first), each kept when both its endpoints are still unused.

    src, tgt int (c,) (non-negative), score float (c,). O(c log c): one sort, then one vectorised step keeps
    the candidates that rank first at both their endpoints (in mining, most of those kept) and drops those
    they block; one pass in rank order decides the rest, whatever chains of candidates the input holds.
    """
    c = len(score)
    if c == 0:
        return np.zeros(0, np.int64)
    order = np.lexsort((np.arange(c), -np.asarray(score, np.float64)))
    s, t = np.asarray(src, np.int64)[order], np.asarray(tgt, np.int64)[order]
    first = _first_at(s) & _first_at(t)  # nothing ranked above them shares an endpoint: kept whatever follows
    used_s, used_t = np.zeros(s.max() + 1, bool), np.zeros(t.max() + 1, bool)
    used_s[s[first]] = used_t[t[first]] = True
    keep = list(np.flatnonzero(first))
    rest = np.flatnonzero(~used_s[s] & ~used_t[t])  # neither endpoint taken by the candidates kept so far
    taken_s, taken_t = bytearray(used_s.size), bytearray(used_t.size)
    for p, a, b in zip(rest.tolist(), s[rest].tolist(), t[rest].tolist()):
        if not taken_s[a] and not taken_t[b]:
            taken_s[a] = taken_t[b] = 1
            keep.append(p)
    return np.sort(order[np.asarray(keep, np.int64)])


def _first_at(v: np.ndarray) -> np.ndarray:
    """bool (c,): where v (in rank order) holds a value for the first time."""
    out = np.zeros(len(v), bool)
    out[np.unique(v, return_index=True)[1]] = True
    return out
