"""Calibrate a model's mining settings for a language pair on dev pairs: the threshold, standout floor and cosine
floor that `mine` applies to that pair by default, with what they measured.

Dev pairs are line-aligned pairs of the two languages that the model never trained on (``train`` holds some
apart; a user may bring their own). A task of N lines draws N source lines; half of them (``keep``) keep their
translation on the other side, the other half's places go to translations of dev pairs not drawn, so that no
distractor has a partner in the task; both sides are shuffled. Over every draw and size, precision, recall and
F1 of the mined pairs are computed for each point of the grid of :mod:`bitextmine.evaluation.threshold_grid`
(the floors apply before the 1:1 selection, as in `mine`), and the settings chosen are the broad top of the mean
F1 (:func:`bitextmine.evaluation.threshold_grid.best`), as for the bundled model. Nothing here prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..config import Floors
from ..errors import ConfigError
from .threshold_grid import FLOORS, GRID, ZS, best, prf_table, settings

SIZES = (30, 100, 300, 1000)  # source lines of the tasks, where the dev pairs allow (a task needs 1.5 N pairs)
DRAWS = {30: 20, 100: 10, 300: 5, 1000: 3}  # draws per size (fewer at large sizes: their mean moves less)
KEEP = 0.5  # share of a task's source lines whose translation is on the other side (the tasks the choice is made on)
SPARSE = 0.1  # what the settings chosen give where translations are rarer is measured too, from 100 lines
MIN_PAIRS = 45  # the fewest dev pairs that give a task of 30 lines


@dataclass(frozen=True)
class PairCalibration:
    """The settings chosen for a language pair and what they measured: ``settings`` {threshold, min_z,
    min_cosine}; ``measured`` [{lines, share, precision, recall, f1}] per task size (mean over its draws);
    ``global_f1`` the mean F1 of the global defaults (:class:`bitextmine.config.Floors`) on the same tasks,
    ``f1`` that of the settings chosen; ``pairs`` the dev pairs used."""

    settings: dict
    measured: list = field(default_factory=list)
    f1: float = 0.0
    global_f1: float = 0.0
    pairs: int = 0

    def entry(self) -> dict:
        """The pair's entry of a model's "mining" section (:func:`bitextmine.mining.calibrated.write_section`)."""
        return {**self.settings, "measured": self.measured}


def draw_task(x: np.ndarray, y: np.ndarray, size: int, keep: float, rng: np.random.Generator):
    """One task from aligned rows x, y float32 (n, d): (source rows (size, d), target rows (size, d), gold
    {(source i, target j)}). The target side holds the translations of a ``keep`` share of the source rows and,
    in the others' places, translations of rows not drawn; both orders are shuffled."""
    n = len(x)
    order = rng.permutation(n)
    pick, rest = order[:size], order[size:]
    kept = rng.random(size) < keep
    fill = rest[: int((~kept).sum())]
    tgt = np.concatenate([pick[kept], fill])
    perm = rng.permutation(len(tgt))
    at = np.argsort(perm)  # the new position of each target row
    gold = {(int(i), int(at[j])) for j, i in enumerate(np.flatnonzero(kept))}
    return x[pick], y[tgt[perm]], gold


def sizes_for(n: int, sizes=SIZES, keep: float = KEEP) -> list[int]:
    """The task sizes ``n`` dev pairs allow (a task of N lines at a share ``keep`` takes up to (2 - keep) N pairs)."""
    return [s for s in sizes if int(s * (1 + (1 - keep))) <= n]


def calibrate_pair(x: np.ndarray, y: np.ndarray, *, sizes=SIZES, seed: int = 0) -> PairCalibration:
    """Settings for mining rows like x against rows like y (aligned dev pairs, float32 (n, d), L2-normalised),
    chosen on tasks drawn from them (:func:`draw_task`), with what they measured. ConfigError when there are too
    few pairs for the smallest task."""
    if len(x) != len(y):
        raise ConfigError(f"dev pairs: {len(x)} source rows against {len(y)} target rows; expected aligned pairs")
    usable = sizes_for(len(x), sizes)
    if not usable:
        raise ConfigError(f"{len(x)} dev pairs: too few to calibrate on (at least {MIN_PAIRS} for tasks of "
                          f"{min(sizes)} lines)")
    rng = np.random.default_rng(seed)
    grids = {s: np.mean([prf_table(*draw_task(x, y, s, KEEP, rng)) for _ in range(DRAWS.get(s, 3))], 0)
             for s in usable}  # each (floors, zs, thresholds, 3)
    f1 = np.mean([g[..., 2] for g in grids.values()], 0)
    index = best(f1)
    measured = [_measured(s, KEEP, g[index]) for s, g in grids.items()]
    sparse = np.random.default_rng(seed + 1)  # its own draws: the choice above is the same with or without them
    for s in (s for s in sizes_for(len(x), sizes, SPARSE) if s >= 100):
        g = np.mean([prf_table(*draw_task(x, y, s, SPARSE, sparse)) for _ in range(DRAWS.get(s, 3))], 0)
        measured.append(_measured(s, SPARSE, g[index]))
    return PairCalibration(settings(index), measured, float(f1[index]), float(f1[_global_index()]), len(x))


def _measured(lines: int, share: float, prf: np.ndarray) -> dict:
    """One entry of what settings measured: {lines, share, precision, recall, f1}."""
    return {"lines": lines, "share": share, **dict(zip(("precision", "recall", "f1"), map(float, prf)))}


def _global_index() -> tuple:
    """The grid point of the global defaults (Floors: threshold 1.18, min-z 4.5, no cosine floor)."""
    d = Floors()
    return (int(np.argmin(abs(FLOORS - d.min_cosine))), int(np.argmin(abs(ZS - d.min_z))),
            int(np.argmin(abs(GRID - d.threshold))))


def distinct_pairs(src: list[str], tgt: list[str]) -> tuple[list[str], list[str]]:
    """The pairs whose source and target texts are each the first of their kind (stripped; blank sides left
    out): a repeated text would make two gold pairs of one line."""
    seen_s, seen_t, out_s, out_t = set(), set(), [], []
    for s, t in zip(src, tgt):
        ks, kt = s.strip(), t.strip()
        if ks and kt and ks not in seen_s and kt not in seen_t:
            seen_s.add(ks)
            seen_t.add(kt)
            out_s.append(s)
            out_t.append(t)
    return out_s, out_t


def calibrate_mining(model, pairs, *, sizes=SIZES, seed: int = 0, write: bool = True,
                     chosen_on: str = "") -> dict[str, PairCalibration]:
    """Calibrate ``model``'s mining settings for each of ``pairs`` ((language, language, file, file): line-aligned
    dev pairs of those two ISO 639-1 codes, never trained on) and, with ``write``, store them with what they
    measured in the model directory's "mining" section (:func:`bitextmine.mining.calibrated.write_section`:
    beside the pairs it already holds; the bundled model is read-only: ConfigError). Returns {pair key "de-en":
    :class:`PairCalibration`}."""
    from ..corpus import read_parallel
    from ..encoding import encode
    from ..mining.calibrated import pair_key, write_section

    if write and not model.path:
        raise ConfigError("the model has no directory to store its calibration in")
    if write and _is_bundled(model.path):
        raise ConfigError("the bundled model is part of the package and is not rewritten; calibrate a model "
                          "directory of your own (a copy: cp -r, or one from 'bitextmine train')")
    out = {}
    for a, b, path_a, path_b in pairs:
        if a == b:
            raise ConfigError(f"--pair {a} {b}: expected two different languages")
        src, tgt = distinct_pairs(*read_parallel(path_a, path_b))
        out[pair_key(a, b)] = calibrate_pair(encode(src, model), encode(tgt, model), sizes=sizes, seed=seed)
    if write:
        write_section(model.path, {k: c.entry() for k, c in out.items()},
                      chosen_on or f"bitextmine calibrate-mining on dev pairs, seed {seed}")
    return out


def _is_bundled(path: str) -> bool:
    import os
    from importlib import resources

    bundled = str(resources.files("bitextmine") / "models" / "default")
    return os.path.realpath(path) == os.path.realpath(bundled)
