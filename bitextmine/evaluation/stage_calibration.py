"""Choose the second stage's settings for a language paired with English on dev tasks: the score a pair needs
(``min_prob``) and the largest side whose own margins it judges (``max_lines``: the largest task it was chosen on,
or ``own_lines`` where that is more).

Each task is mined as `mine` mines it with the stage (every floor off but the stage's margin floor:
:func:`bitextmine.judge.train.task_features`); for each score floor of :data:`GRID`, the candidates that reach it
and pass the pair's floors (threshold, min-z, min-cosine, which `mine` applies with the stage) go through the 1:1
selection by margin (or, where `mine`'s fail safe would print the floors' pairs instead, those count), and give
precision, recall and F1 against the gold pairs. The floor chosen has the best mean
F-beta (F1 by default; beta < 1 weighs precision more) over the shares of translations (each share weighs the same)
among the floors whose F1 at the densest share is at most ``dense_loss`` below the floors alone
(`mine --no-second-stage`). Before the floor is chosen, the stage's score may be mapped so that it follows the
share of translations among candidates given it, at every share of the tasks (:func:`fit_cells_map`): the stage's
own prior step follows a run's share only in part, so its scores are too high where translations are rare and too
low where they are common. The floor then applies to the mapped score, as `mine` gives it. Nothing here prints.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GRID = np.round(np.r_[0.002, 0.005, 0.01, 0.02, 0.03, 0.04, np.arange(0.05, 0.95, 0.025),
                      np.arange(0.95, 0.996, 0.005)], 3)
DENSE_LOSS = 0.005  # the F1 at the densest share may fall at most this much below the floors alone


@dataclass(frozen=True)
class StageChoice:
    """The stage's settings chosen for a language: ``min_prob``, ``max_lines``, what they measured on the tasks
    they were chosen on, ``measured`` [{lines, share, precision, recall, f1}] (means over the draws),
    ``chosen_on``, those tasks in words, and ``score_map``, the map of the stage's score that min_prob applies to
    (:func:`fit_cells_map`; None: the score as the stage gives it)."""

    min_prob: float
    max_lines: int
    measured: list
    chosen_on: str = ""
    score_map: dict | None = None  # the map from the stage's score to the one min_prob applies to, or None

    def entry(self) -> dict:
        """The "second_stage" object of a pair's entry in a model's calibration."""
        return {"min_prob": self.min_prob, "max_lines": self.max_lines, "measured": self.measured,
                "chosen_on": self.chosen_on, **({"score_map": self.score_map} if self.score_map else {})}


def task_cells(task, model, stage, lang: str, floors: dict, mapped: bool = True) -> dict:
    """The candidates of one task (a :class:`bitextmine.judge.tasks.Task`, foreign against English): ``pairs``
    int64 (c, 2), ``margin`` float64 (c,), ``prob`` the stage's score float64 (c,) (as `mine` gives it, or, not
    ``mapped``, before the calibration's score map: :meth:`bitextmine.judge.SecondStage.adjust`), ``hit`` bool
    (c,) (a gold pair), ``floors`` bool (c,) (passes ``floors`` {threshold, min_z, min_cosine}); ``n_gold``,
    ``lines`` and ``share``, the stage's estimate of the share of translations among the candidates (their mean
    score before its prior step, as `mine`'s fail safe reads it; None without candidates)."""
    from ..judge.train import labels, task_features

    cands, X = task_features(task.src, task.tgt, model, stage, lang, float(stage.languages[lang]["floor"]))
    gold = np.array(sorted(task.gold), np.int64).reshape(-1, 2) - 1
    ok = (X[:, 0] >= floors["threshold"]) & (X[:, 1] >= floors["min_cosine"]) & (X[:, 2] >= floors["min_z"])
    raw = stage.probability(lang, X)
    return {"pairs": cands, "margin": X[:, 0], "prob": stage.adjust(lang, raw, mapped), "hit": labels(cands, gold),
            "floors": ok, "n_gold": len(gold), "lines": len(task.src),
            "share": float(raw.mean()) if len(X) else None}


def prf_at(cells: dict, p: float) -> tuple[float, float, float]:
    """(precision, recall, F1) of the pairs the 1:1 selection by margin keeps among the candidates of
    :func:`task_cells` that pass the floors and whose score reaches p (p < 0: the floors alone), or, where `mine`'s
    fail safe would print the floors' pairs instead (the stage's ``share`` at MineConfig.fail_safe_share or more
    and it keeping fewer than MineConfig.fail_safe_keep of them: :func:`bitextmine.mining.calibrated.fail_safe`),
    those. Precision is 1 where none is kept."""
    from ..config import MineConfig

    keep = _kept(cells, p)
    if p >= 0 and cells.get("share") is not None and cells["share"] >= MineConfig.fail_safe_share:
        floors = _kept(cells, -1.0)
        keep = floors if len(keep) < MineConfig.fail_safe_keep * len(floors) else keep
    tp = int(cells["hit"][keep].sum())
    precision = tp / len(keep) if len(keep) else 1.0
    return precision, tp / max(cells["n_gold"], 1), 2 * tp / (len(keep) + cells["n_gold"]) if tp else 0.0


def _kept(cells: dict, p: float) -> np.ndarray:
    """The candidates (indexes) the 1:1 selection by margin keeps among those of ``cells`` that pass the floors
    and whose score reaches p."""
    from ..mining.select import greedy_one_to_one

    ok = np.flatnonzero(cells["floors"] & (cells["prob"] >= p))
    return ok[greedy_one_to_one(cells["pairs"][ok, 0], cells["pairs"][ok, 1], cells["margin"][ok])]


def f_beta(precision: float, recall: float, beta: float = 1.0) -> float:
    """The weighted harmonic mean of precision and recall (beta 1: F1; beta < 1 weighs precision more); 0 where
    both are 0."""
    b2 = beta * beta
    return (1 + b2) * precision * recall / (b2 * precision + recall) if precision + recall > 0 else 0.0


def mean_f1(tasks: list, p: float, beta: float = 1.0) -> float:
    """The mean over the groups of ``tasks`` [(group, cells)] of their mean F1 (with ``beta``: F-beta) at score
    floor p: each group (a share of translations, or a kind and share) weighs the same."""
    groups: dict = {}
    for group, cells in tasks:
        got = prf_at(cells, p)
        groups.setdefault(group, []).append(got[2] if beta == 1.0 else f_beta(got[0], got[1], beta))
    return float(np.mean([np.mean(v) for v in groups.values()]))


def best_floor(tasks: list, dense: list, dense_loss: float = DENSE_LOSS, grid=GRID, beta: float = 1.0) -> float:
    """The score floor of ``grid`` with the best :func:`mean_f1` (F-beta with ``beta``) over ``tasks`` [(group,
    cells)] among those whose mean F1 on the ``dense`` tasks [cells] is at most ``dense_loss`` below the floors
    alone (all of the grid when none is); ties go to the floor nearer 0.5."""
    alone = np.mean([prf_at(c, -1.0)[2] for c in dense]) if dense else 0.0
    keeps = [p for p in grid if not dense or np.mean([prf_at(c, p)[2] for c in dense]) >= alone - dense_loss]
    return float(max(keeps or grid, key=lambda p: (mean_f1(tasks, p, beta), -abs(p - 0.5))))


def choose_stage(model, lang: str, tasks: list, floors: dict, dense_loss: float = DENSE_LOSS,
                 own_lines: int = 1, beta: float = 1.0, score_map: bool = True) -> StageChoice:
    """The stage's settings for ``lang`` with English (:class:`StageChoice`) chosen on ``tasks`` [(kind: a dev set's
    number, or ("context", number) for a set of documents, lines a side asked, share of translations, Task)]
    (foreign against English) with the pair's ``floors`` {threshold, min_z, min_cosine}: with ``score_map``, the
    map of the stage's score fitted on every candidate of the tasks (:func:`fit_cells_map`); the score floor (on
    the mapped score) by :func:`best_floor` with ``beta`` (each kind and share a group; the densest share's tasks as
    the dense ones), ``max_lines`` the largest task's lines a side or ``own_lines``, whichever is more."""
    cells = [(kind, size, share, task_cells(task, model, model.second_stage, lang, floors, mapped=False))
             for kind, size, share, task in tasks]
    found = fit_cells_map([((kind, share), c) for kind, _, share, c in cells]) if score_map else None
    if found:
        cells = [(kind, size, share, mapped_cells(c, found)) for kind, size, share, c in cells]
    densest = max(share for _, _, share, _ in cells)
    groups = [((kind, share), c) for kind, _, share, c in cells]
    p = best_floor(groups, [c for _, _, share, c in cells if share == densest], dense_loss, beta=beta)
    measured = measured_at([(size, share, c) for _, size, share, c in cells], p)
    largest = int(max(c["lines"] for *_, c in cells))
    shares = ", ".join(f"{s:.0%}" for s in sorted({share for _, _, share, _ in cells}))
    sizes = ", ".join(f"{s:,}" for s in sorted({size for _, size, _, _ in cells}))
    kinds = {kind for kind, *_ in cells}
    sets, docs = sum(not isinstance(k, tuple) for k in kinds), sum(isinstance(k, tuple) for k in kinds)
    how = (f"calibrate-mining: tasks at {shares} translated, {sizes} lines a side asked (up to {largest:,}), "
           f"{len(cells)} tasks from {sets} dev set{'s' if sets != 1 else ''}"
           + (f" and {docs} set{'s' if docs > 1 else ''} of documents (distractors: the lines around each gold "
              "pair)" if docs else "") + (f"; the best mean F-beta, beta {beta:g}" if beta != 1.0 else "")
           + ("; the score mapped by a fit on the tasks' candidates" if found else ""))
    return StageChoice(p, max(largest, own_lines), measured, how, found)


def fit_cells_map(groups: list) -> dict | None:
    """The score map (:func:`bitextmine.judge.logistic.fit_score_map`) fitted on every candidate of ``groups``
    [(group, cells of a task: :func:`task_cells`, not mapped)], each group (a kind of task and share) weighing the
    same; None where the candidates hold no translation or nothing else, or the fit would reverse the scores'
    order."""
    from ..judge.logistic import fit_score_map

    judged = [(g, c) for g, c in groups if len(c["prob"])]
    y = np.concatenate([c["hit"] for _, c in judged]) if judged else np.zeros(0, bool)
    if y.all() or not y.any():
        return None
    sizes: dict = {}
    for g, c in judged:
        sizes[g] = sizes.get(g, 0) + len(c["prob"])
    total = sum(sizes.values())
    weight = np.concatenate([np.full(len(c["prob"]), total / (len(sizes) * sizes[g])) for g, c in judged])
    p = np.concatenate([c["prob"] for _, c in judged])
    share = np.concatenate([np.full(len(c["prob"]), c["share"]) for _, c in judged])
    found = fit_score_map(p, share, y, weight)
    return found if found["score"] > 0 else None


def mapped_cells(cells: dict, score_map: dict) -> dict:
    """``cells`` (:func:`task_cells`, not mapped) with their scores mapped by ``score_map`` and the task's share."""
    from ..judge.logistic import map_score

    if not len(cells["prob"]):
        return cells
    return {**cells, "prob": map_score(cells["prob"], cells["share"], score_map)}


def measured_at(cells: list, p: float) -> list[dict]:
    """What score floor p measures on ``cells`` [(lines asked, share, cells of a task)]: [{lines (the fewest of
    the tasks), share, precision, recall, f1}] per size asked and share, means over its tasks."""
    out = []
    for size, share in sorted({(size, share) for size, share, _ in cells}):
        mine = [c for n, s, c in cells if (n, s) == (size, share)]
        prf = np.mean([prf_at(c, p) for c in mine], 0)
        out.append({"lines": int(min(c["lines"] for c in mine)), "share": float(share),
                    **dict(zip(("precision", "recall", "f1"), map(float, prf)))})
    return out
