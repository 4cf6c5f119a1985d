"""Precision, recall and F1 of `bitextmine mine` as a user runs it (default settings, which apply the
model's settings for the detected languages, or the given --threshold / --min-z / --min-cosine for
every language), on mining tasks from 30 lines to as many as the data allows, per language.

    python tools/f1_by_size.py --model DIR --holdout .bench/holdout --sizes 30 300 3000 30000 200000

Task (language L, size N): the source side holds G = min(N // 2, held-apart pairs) foreign sentences
held apart from the model's training (tools/train_default.py --holdout), the target side their G
English translations; both sides are then filled up to N lines with distractors from L's training
pairs: foreign lines from one random half of the pairs, English lines from the other half, leaving out
every English line that is a known translation (a partner in any corpus) of a chosen foreign line,
and every held-apart text. Both sides are shuffled and mined by :func:`bitextmine.pipeline.mine_files`
(what `bitextmine mine --ids` runs: exact search up to 1M lines a side, IVF above). A printed pair is
right when it is a gold pair (by line numbers); precision = right pairs / printed pairs, recall =
right pairs / G. Distractors that translate each other without being a known pair count as errors, so
precision is a lower bound (in UI strings and help text many are translations or near-translations);
"precision on gold lines" counts only the printed pairs with a gold line on either side. Several draws at small sizes (--draws). The held-apart pairs are dev
data: never trained on, used to choose settings and to report them.

--oracle adds the best F1 that any threshold, standout floor and cosine floor of the calibration grid
reaches on the task (its first draw): how much a better choice of these settings could still gain.
--distractors draws the distractors from some corpora only (say, sentences rather than UI strings).
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
import time

import numpy as np

from bitextmine.config import MineConfig
from bitextmine.evaluation.devdata import LANGS, corpora
from bitextmine.evaluation.holdout_tasks import build_task, language_pairs
from bitextmine.loading import load_model
from bitextmine.pipeline import mine_files

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")


def score_task(src: list[str], tgt: list[str], gold: set, g: int, model, config: MineConfig):
    """(precision, recall, F1, printed pairs, seconds) of mine_files on the task, and its settings (the
    threshold, min-cosine and min-z fields of its signature, and the languages of a calibration)."""
    with tempfile.TemporaryDirectory() as d:
        paths = [os.path.join(d, name) for name in ("src.txt", "tgt.txt")]
        for path, lines in zip(paths, (src, tgt)):
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(line + "\n" for line in lines)
        out = io.StringIO()
        t0 = time.time()
        stats = mine_files(*paths, out, model=model, config=config, ids=True)
        seconds = time.time() - t0
    gold_src, gold_tgt = {s for s, _ in gold}, {t for _, t in gold}
    printed = right = on_gold = 0
    for row in out.getvalue().splitlines():
        cols = row.split("\t")
        s_ids, t_ids = (list(map(int, c.split(","))) for c in cols[-2:])  # a text may hold a TAB
        printed += 1
        right += any((s, t) in gold for s in s_ids for t in t_ids)
        on_gold += any(s in gold_src for s in s_ids) or any(t in gold_tgt for t in t_ids)
    p, r = right / max(1, printed), right / max(1, g)
    used = ", ".join(f.replace(":", " ") for f in stats.signature.split("|")
                     if f.split(":")[0] in ("threshold", "min-cosine", "min-z"))
    return ((p, r, 2 * p * r / max(1e-9, p + r), right / max(1, on_gold), printed, seconds),
            (used, stats.info.get("calibrated_for")))


ORACLE_FLOORS = np.round(np.arange(0.0, 0.71, 0.05), 2)  # cosine floors of the oracle (calibration's, and higher)


def oracle(src: list[str], tgt: list[str], gold: set, model) -> tuple:
    """The best (precision, recall, F1) of any --threshold, --min-z and --min-cosine of the calibration grid
    on this task (tools/calibrate_threshold.py, cosine floors up to 0.7), and those settings: the ceiling of
    what choosing these three can reach with the model; gold as :func:`build_task` gives it."""
    from bitextmine.encoding import encode
    from bitextmine.evaluation.threshold_grid import GRID, ZS, prf_table

    table = prf_table(encode(src, model), encode(tgt, model), {(s - 1, t - 1) for s, t in gold}, ORACLE_FLOORS)
    a, i, j = np.unravel_index(table[..., 2].argmax(), table.shape[:3])
    return tuple(table[a, i, j]), f"threshold {GRID[j]:g}, min-cosine {ORACLE_FLOORS[a]:g}, min-z {ZS[i]:g}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--holdout", default=os.path.join(os.path.dirname(__file__), "..", ".bench", "holdout"))
    ap.add_argument("--data", default=DATA, help="the shared data (its train/ folder)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[30, 300, 3000, 30000])
    ap.add_argument("--draws", type=int, default=5, help="draws per size up to 3,000 lines (one above)")
    ap.add_argument("--langs", nargs="+", default=list(LANGS))
    ap.add_argument("--threshold", type=float, default=None,
                    help="set the threshold, min-z and min-cosine for every language (the others at mine's defaults) "
                         "instead of mine's defaults: the model's settings for the detected languages (the second "
                         "stage still judges, as in mine; --no-second-stage for none)")
    ap.add_argument("--min-z", type=float, default=None)
    ap.add_argument("--min-cosine", type=float, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--distractors", nargs="+", default=[], metavar="NAME",
                    help="draw distractors only from the corpora whose path holds one of these names "
                         "(e.g. tatoeba_anki multi30k wmt_newstest mlqe_pe: sentences, no UI strings)")
    ap.add_argument("--no-second-stage", action="store_true", help="mine without the model's second stage")
    ap.add_argument("--oracle", action="store_true",
                    help="beside each row, the best F1 any --threshold / --min-z / --min-cosine of the calibration "
                         "grid reaches on the same task (first draw), and those settings")
    args = ap.parse_args()
    model = load_model(args.model)
    given = {k: v for k, v in (("threshold", args.threshold), ("min_z", args.min_z), ("min_cosine", args.min_cosine))
             if v is not None}
    config = MineConfig(**given, per_language=False) if given else MineConfig()
    if args.no_second_stage:
        from dataclasses import replace

        config = replace(config, second_stage=False)
    with tempfile.TemporaryDirectory() as tmp:
        data = language_pairs(corpora(os.path.join(args.data, "train"), tmp), args.holdout, tuple(args.distractors))
    print(f"model {model.fingerprint}; " + (" ".join(f"--{k.replace('_', '-')} {v:g}" for k, v in given.items())
                                           or "mine's defaults") + ", other settings default"
          + ("; no second stage" if args.no_second_stage else "")
          + (f"; distractors from {', '.join(args.distractors)}" if args.distractors else ""))
    extra = (" best F1 of any setting | its settings |", "---|---|") if args.oracle else ("", "")
    print("\n| language | lines a side | gold pairs | precision | recall | F1 | precision on gold lines | printed | "
          "seconds | settings |" + extra[0])
    print("|---|---|---|---|---|---|---|---|---|---|" + extra[1])
    for lang in args.langs:
        rng = np.random.default_rng([args.seed, sum(map(ord, lang))])
        for size in args.sizes:
            tasks = [build_task(data[lang], size, rng) for _ in range(args.draws if size <= 3000 else 1)]
            runs = [score_task(*task, model, config) for task in tasks]
            if args.oracle:
                (_, _, best_f1), best_at = oracle(*tasks[0][:3], model)
                used_extra = f" {best_f1:.3f} | {best_at} |"
            else:
                used_extra = ""
            p, r, f, pg, printed, sec = np.mean([run[0] for run in runs], axis=0)
            used, langs = runs[0][1]
            used += f" ({'-'.join(langs)})" if langs else ""
            src_n, gold_n = len(tasks[0][0]), tasks[0][3]  # what the first draw holds (a small pool gives fewer)
            print(f"| {lang} | {src_n:,} | {gold_n:,} | {p:.3f} | {r:.3f} | {f:.3f} | {pg:.3f} | "
                  f"{printed:.0f} | {sec:.1f} | {used} |{used_extra}", flush=True)


if __name__ == "__main__":
    main()
