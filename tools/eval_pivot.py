"""Each pair of two languages without English: the floors a model holds for it against the global defaults, on
dev pairs they were not chosen on.

    python tools/eval_pivot.py [--model DIR] [--langs de fr ...] [--sizes 100 300 1000] [--shares 0.5 0.1]

Dev pairs: the lines of the Debian manuals' reporting half (English key hashing odd; the choosing half is what
tools/calibrate_bundled.py --pivot gives calibrate-mining) whose English text both languages translate
(:func:`bitextmine.evaluation.devdata.manuals_pivot`). Tasks as calibrate-mining draws them
(:func:`bitextmine.evaluation.mining_calibration.draw_task`: N source lines, a share of them with their
translation on the other side, the rest's places filled by translations of pairs not drawn), seed 0; precision,
recall and F1 of `mine`'s selection with each set of floors (:func:`bitextmine.evaluation.threshold_grid.prf_table`).
Prints a markdown table: per pair, the held settings, mean F1 over the sizes at each share, held and global.
"""

from __future__ import annotations

import argparse
import itertools
import os

import numpy as np

from bitextmine.config import Floors
from bitextmine.encoding import encode
from bitextmine.evaluation.devdata import manuals_pivot
from bitextmine.evaluation.mining_calibration import sizes_for, task_grids
from bitextmine.evaluation.threshold_grid import FLOORS, GRID, ZS
from bitextmine.loading import load_model
from bitextmine.mining.calibrated import settings_for

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")


def index_of(settings: dict) -> tuple:
    """The grid index (cosine floor, z, threshold) of {threshold, min_z, min_cosine}."""
    near = lambda grid, v: int(np.abs(grid - v).argmin())  # noqa: E731
    return near(FLOORS, settings["min_cosine"]), near(ZS, settings["min_z"]), near(GRID, settings["threshold"])


def measure(x: np.ndarray, y: np.ndarray, sizes: list, share: float, points: list, seed: int = 0) -> list:
    """Mean (precision, recall, F1) over ``sizes`` (each a mean over DRAWS tasks: task_grids) at each grid point
    of ``points``; sizes the pairs cannot fill are left out (sizes_for)."""
    grids = task_grids(x, y, sizes_for(len(x), sizes, share), share, np.random.default_rng(seed)).values()
    return [np.mean([g[p] for g in grids], 0) for p in points] if grids else []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--langs", nargs="+", default=["ar", "cs", "de", "es", "fr", "ru", "tr", "zh"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000])
    ap.add_argument("--shares", type=float, nargs="+", default=[0.5, 0.1])
    ap.add_argument("--data", default=DATA)
    args = ap.parse_args()
    model = load_model(args.model)
    glob = {"threshold": Floors.threshold, "min_z": Floors.min_z, "min_cosine": Floors.min_cosine}
    print("| pair | dev pairs | settings held | " + " | ".join(f"F1 at {s:.0%}, held / global" for s in args.shares)
          + " |\n|---|---|---|" + "---|" * len(args.shares))
    sums, pairs_done = np.zeros((len(args.shares), 2)), 0
    for a, b in itertools.combinations(sorted(args.langs), 2):
        pairs_done += 1
        held = settings_for(model.mining, a, b)
        pairs = manuals_pivot(args.data, a, b, odd=True)
        x, y = encode([p[0] for p in pairs], model), encode([p[1] for p in pairs], model)
        cells = []
        for i, share in enumerate(args.shares):
            got = measure(x, y, args.sizes, share, [index_of(held or glob), index_of(glob)])
            f = [g[2] * 100 for g in got] if got else [float("nan")] * 2
            sums[i] += f
            cells.append(f"{f[0]:.1f} / {f[1]:.1f}")
        shown = "none" if held is None else f"{held['threshold']:g} / {held['min_z']:g} / {held['min_cosine']:g}"
        print(f"| {a}-{b} | {len(pairs):,} | {shown} | " + " | ".join(cells) + " |", flush=True)
    print("| mean | | | " + " | ".join(f"{h:.1f} / {g:.1f}" for h, g in sums / max(1, pairs_done)) + " |")


if __name__ == "__main__":
    main()
