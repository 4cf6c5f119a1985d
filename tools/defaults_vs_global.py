"""A model's calibrated defaults against the global defaults on Tatoeba v1 tasks of one language with English.

    python tools/defaults_vs_global.py --model DIR --lang de [--lines 400] [--draws 3]

Tasks: the Tatoeba v1 pairs of the language (../shared/data/dev/tatoeba/v1, never trained on by the bundled model's
corpora nor by `train` on train/tatoeba_anki, from which they were removed), built by the project's task builder
(:func:`bitextmine.judge.tasks.build_task`: same-domain distractors) at 1, 5, 10 and 50 % translated. Each task is
mined with `mine`'s defaults (the model's calibration and second stage) and with the global defaults
(`--no-per-language --no-second-stage`); the table gives precision / recall / F1, means over the draws.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

from bitextmine.config import MineConfig
from bitextmine.evaluation.sparse_tasks import ISO3, mined, prf, write_task
from bitextmine.judge.tasks import build_task, clean_pool

TATOEBA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "dev", "tatoeba", "v1")
RUNS = {"defaults": MineConfig(), "global defaults": MineConfig(per_language=False, second_stage=False)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--lang", required=True)
    ap.add_argument("--lines", type=int, default=400)
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--tatoeba", default=TATOEBA)
    args = ap.parse_args()
    from bitextmine.loading import load_model

    model, iso = load_model(args.model), ISO3[args.lang]
    with open(f"{args.tatoeba}/tatoeba.{iso}-eng.{iso}", encoding="utf-8") as a, \
            open(f"{args.tatoeba}/tatoeba.{iso}-eng.eng", encoding="utf-8") as b:
        pool, _ = clean_pool([(x.strip(), y.strip()) for x, y in zip(a, b)])
    print("| translated | " + " | ".join(f"{name}: P / R / F1" for name in RUNS) + " |")
    print("|---|" + "---|" * len(RUNS))
    for share in (0.01, 0.05, 0.1, 0.5):
        got = {name: [] for name in RUNS}
        for d in range(args.draws):
            task = build_task(pool, args.lines, share, np.random.default_rng([d, int(share * 100)]))
            with tempfile.TemporaryDirectory() as tmp:
                write_task(task, tmp)
                for name, config in RUNS.items():
                    printed, _, _ = mined(tmp, model, config, (args.lang, "en"))
                    got[name].append(prf(printed, task.gold) if printed else (1.0, 0.0, 0.0))
        print(f"| {share:.0%} | " + " | ".join(" / ".join(f"{x:.2f}" for x in np.mean(v, 0)) for v in got.values())
              + " |", flush=True)


if __name__ == "__main__":
    main()
