"""The assist choosing among the fast model's neighbours (``mine --assist-pick``): each line's k nearest lines of
the other side by the fast model are scored again by the mean of the two encoders' cosines, and the line's
candidate is the neighbour with the best ratio margin of that joint cosine (each side's mean joint cosine over
its own neighbours as the margin's neighbour means). The candidate's score is that joint margin; its cosine and
neighbour means stay the fast model's.

Without it the candidate is the fast model's best neighbour and the assist only judges it, so a translation the
fast model ranks second is never judged (docs/assist.md)."""

from __future__ import annotations

from typing import Callable

import numpy as np

# The languages (paired with English) whose runs with an assist pick by default: on the choosing half of the manual
# tasks (assist use, 1/5/10/50 % translated, 3 draws), mean F1 over the shares rose by at least 1 point and fell by
# no more than 2 at any share only for ar and zh; zh lost on every reporting set (manuals, Tatoeba, news) and was
# left out (docs/assist.md)
PICKED_FOR = frozenset({"ar"})


def picks_for(langs: tuple) -> bool:
    """Whether a run with an assist picks by default: one of the sides' languages ``langs`` is in PICKED_FOR."""
    return any(lang in PICKED_FOR for lang in langs)


def wanted(asked: bool | None, langs: tuple) -> bool:
    """Whether a run asks to pick: ``asked`` (MineConfig.assist_pick) as given, or by default for ``langs``."""
    return picks_for(langs) if asked is None else bool(asked)


def joint_cosines(D: np.ndarray, I: np.ndarray, A: np.ndarray) -> np.ndarray:
    """float32 (r, k): the mean of the fast model's cosines ``D`` (r, k) and the assist's ``A`` (r, k) of each
    row's neighbours ``I`` int64 (r, k); -inf in empty slots (I < 0)."""
    return np.where(I >= 0, (np.asarray(D, np.float32) + np.asarray(A, np.float32)) / 2, -np.inf).astype(np.float32)


def joint_means(J: np.ndarray) -> np.ndarray:
    """float32 (r,): each row's mean joint cosine over its filled slots of ``J`` (r, k) (0 where none)."""
    filled = np.isfinite(J)
    return (np.where(filled, J, 0).sum(1) / np.maximum(filled.sum(1), 1)).astype(np.float32)


def pick(J: np.ndarray, I: np.ndarray, mean_q: np.ndarray, mean_o: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(slot int64 (r,), joint margin float32 (r,)): the slot of each row's neighbour with the best ratio margin
    J / ((mean_q + mean of the neighbour) / 2), the first on ties. ``J`` (r, k): joint cosines (-inf: empty);
    ``I`` (r, k): neighbours (-1: none); ``mean_q`` (r,): the rows' joint means; ``mean_o``: the other side's
    joint means, indexed by I. A row with no neighbour gets slot 0 and margin -inf."""
    if J.shape[0] == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    mo = np.asarray(mean_o, np.float32)[np.where(I >= 0, I, 0)]
    margin = np.where(np.isfinite(J), J / ((np.asarray(mean_q, np.float32)[:, None] + mo) / 2), -np.inf)
    slot = margin.argmax(1)
    return slot.astype(np.int64), margin[np.arange(len(slot)), slot].astype(np.float32)


def candidates(nn: dict, sizes: dict, cosine: Callable) -> tuple[dict, dict]:
    """(forward, backward) candidates, one per row with a neighbour: dicts of row, other (int64 (c,) global row
    ids), score (the joint margin), cos, mean_q, mean_o (the fast model's cosine and neighbour means), float32.

    ``nn[side]`` for side "src" and "tgt": (rows int64 (r,), D float32 (r, k), I int64 (r, k) (-1: empty), the
    fast neighbour means float32 (r,)): the side's neighbour lists among the other side; ``sizes[side]``: its
    rows; ``cosine(s, t)``: the assist's cosines float (c,) of (src row, tgt row) int64 (c,) pairs."""
    joint, means, fast = {}, {}, {}
    for side in ("src", "tgt"):
        rows, D, I, fast_mean = nn[side]
        filled = I >= 0
        q = np.broadcast_to(rows[:, None], I.shape)[filled]
        A = np.zeros(D.shape, np.float32)
        if filled.any():
            A[filled] = cosine(q, I[filled]) if side == "src" else cosine(I[filled], q)
        joint[side] = joint_cosines(D, I, A)
        means[side], fast[side] = np.zeros(sizes[side], np.float32), np.zeros(sizes[side], np.float32)
        means[side][rows], fast[side][rows] = joint_means(joint[side]), fast_mean
    out = []
    for side, other in (("src", "tgt"), ("tgt", "src")):
        rows, D, I, _ = nn[side]
        slot, score = pick(joint[side], I, means[side][rows], means[other])
        at = np.arange(len(rows))
        o = I[at, slot] if len(rows) else np.zeros(0, np.int64)
        keep = o >= 0
        out.append({"row": rows[keep], "other": o[keep], "score": score[keep],
                    "cos": (D[at, slot] if len(rows) else np.zeros(0, np.float32))[keep],
                    "mean_q": fast[side][rows[keep]], "mean_o": fast[other][o[keep]]})
    return out[0], out[1]
