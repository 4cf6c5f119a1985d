"""Calibrate the second stage's probability floor (``min_prob``) on the sparse dev tasks, and measure it.

    python tools/calibrate_second_stage.py --model DIR [--langs fr ru] [--draws 3] [--write]

Tasks: tools/sparse_tasks.py's builder on its dev pools (pairs held apart from the bundled model's training,
then Tatoeba v1: dev data only), its seeds, gold shares 1/3/10/50 %, sizes (--sizes) 1,000 lines a side, the
largest the pool allows, and 10,000 and 30,000, whose gold pairs still come from the dev pool and whose
distractors are filled up from the training corpora (sparse_tasks.draw_tasks); and, for the languages whose
held-apart pairs include news (de, fr, cs, ru, zh), news tasks of 1,500 lines at 1, 4 and 10 % (sparse_tasks
--news: the distractors are the sentences around the gold pairs in their articles). Each task is mined as
`mine` does with the model's second stage for the language (every floor off but the stage's margin floor;
:func:`bitextmine.judge.train.task_features`), and for each probability floor of a grid the candidates
reaching it go through mode max's 1:1 selection by margin; P/R/F1 against the gold. The floor chosen maximises
the mean F1 over the groups of tasks (each kind and share weighs the same) among the floors whose F1 at the
densest share is at most --dense-loss below mining without the second stage (the language's calibrated floors
alone, which `mine` also applies with it). The table: per language, kind, share and size, F1 (precision /
recall) at the chosen floor, and the best F1 of any floor chosen after the fact for that cell alone.
``--write`` stores the floors in the model's calibration (config.json, "mining": each pair's "second_stage"), and
as each language's ``max_lines`` the largest task it was calibrated on (the stage judges a run's own margins up to
what was measured, reference margins above it), or ``--max-lines`` R: tasks with a side of more than R lines are
then mined with reference margins from samples of R rows (:mod:`bitextmine.mining.reference`), as `mine` mines
them.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from bitextmine.evaluation.sparse_tasks import LANGS, build_context_task, draw_tasks, read_news, read_pairs
from bitextmine.evaluation.stage_calibration import GRID, best_floor, mean_f1, prf_at
from bitextmine.evaluation.stage_calibration import task_cells as stage_cells
from bitextmine.judge.tasks import PoolTooSmall, clean_pool

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data")
HOLDOUT = os.path.join(HERE, "..", ".bench", "holdout")



def task_cells(task, model, stage, lang: str) -> dict:
    """The candidates of one task with the language's calibrated floors (stage_calibration.task_cells)."""
    from bitextmine.mining.calibrated import settings_for

    floors = settings_for(model.mining, lang, "en") or {"threshold": 0.0, "min_z": 0.0, "min_cosine": -1.0}
    return stage_cells(task, model, stage, lang, floors)


def tasks_of(lang: str, shares, draws: int, seed: int, sizes=("1000", "max"), news_shares=(), news_size: int = 1500,
             data: str = DATA, holdout: str = HOLDOUT) -> list[tuple[str, float, str, object]]:
    """(kind, share, size label, task) for each size label (sparse_tasks.draw_tasks: "max" is the largest the dev pool
    gives; a size above it takes its distractors from the training corpora too) and share, kind "pool"; and, where
    the language's held-apart pairs include news, the news tasks (sparse_tasks.build_context_task) of ``news_size``
    lines at each of ``news_shares``, kind "news"; with sparse_tasks.build_all's seeds. ``data``: the shared data
    (Tatoeba v1, the training corpora, the news test sets), ``holdout``: the pairs held apart from the model."""
    pool, _ = clean_pool(read_pairs(lang, holdout, os.path.join(data, "dev", "tatoeba", "v1")))
    out = []
    for share in shares:
        seeds = [[seed, sum(map(ord, lang)), int(share * 1000), d] for d in range(draws)]
        for label in sizes:
            try:
                _, drawn, _ = draw_tasks(pool, lang, label, share, seeds, train_dir=os.path.join(data, "train"))
            except PoolTooSmall:
                continue
            out += [("pool", share, label, t) for t in drawn]
    articles = read_news(lang, pool, os.path.join(data, "train", "wmt_newstest")) if news_shares else ([], [], [])
    for share in news_shares if articles[2] else ():
        for d in range(draws):
            try:
                task = build_context_task(*articles, news_size, share, np.random.default_rng(
                    [seed, sum(map(ord, lang)), int(share * 1000), d]))
            except PoolTooSmall:
                continue
            out.append(("news", share, str(news_size), task))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model directory with a second stage")
    ap.add_argument("--langs", nargs="+", default=LANGS)
    ap.add_argument("--shares", type=float, nargs="+", default=[0.01, 0.03, 0.1, 0.5])
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--sizes", nargs="+", default=["1000", "max", "10000", "30000"],
                    help="lines a side (max: the largest the dev pool gives; larger: distractors filled from the "
                         "training corpora)")
    ap.add_argument("--news-shares", type=float, nargs="*", default=[0.01, 0.04, 0.1],
                    help="gold shares of the news tasks (sparse_tasks --news; none: no news tasks)")
    ap.add_argument("--news-size", type=int, default=1500, help="lines a side of the news tasks")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dense-loss", type=float, default=0.005,
                    help="the F1 at the densest share may fall at most this much below mining without the stage")
    ap.add_argument("--max-lines", type=int, default=0,
                    help="the stage judges own margins up to this many lines a side and reference margins above it, "
                         "as mine does (0: the model's max_lines); --write stores it")
    ap.add_argument("--write", action="store_true", help="store each language's chosen floor in the model")
    ap.add_argument("--json", default="", help="also write the cells here")
    args = ap.parse_args()
    from bitextmine.loading import load_model

    model = load_model(args.model)
    stage = model.second_stage
    for lang in args.langs if args.max_lines else ():
        stage.languages[lang]["max_lines"] = args.max_lines
    chosen, cells, largest = {}, {}, {}
    print("| language | tasks | gold share | lines a side | draws | F1 (P / R) at the chosen min-prob | best F1 of any "
          "min-prob for the cell | F1 without the second stage |")
    print("|---|---|---|---|---|---|---|---|")
    for lang in args.langs:
        tasks = [(k, share, label, task_cells(t, model, stage, lang)) for k, share, label, t in
                 tasks_of(lang, args.shares, args.draws, args.seed, args.sizes, args.news_shares, args.news_size)]
        groups = [((k, share), c) for k, share, _, c in tasks]  # each kind and share weighs the same
        dense = [c for k, s, _, c in tasks if k == "pool" and s == max(args.shares)]
        best = best_floor(groups, dense, args.dense_loss)
        f1 = {best: mean_f1(groups, best)}
        chosen[lang] = float(best)
        largest[lang] = args.max_lines or max(c["lines"] for _, _, _, c in tasks)
        for kind, share, label in sorted({(k, s, lb) for k, s, lb, _ in tasks}, key=lambda x: (x[0] != "pool", x[1])):
            mine = [c for k, s, lb, c in tasks if (k, s, lb) == (kind, share, label)]
            at = np.mean([prf_at(c, best) for c in mine], axis=0)
            oracle = max(np.mean([prf_at(c, p)[2] for c in mine]) for p in GRID)
            name = f"{lang} {kind} {share} {label}"
            cells[name] = {"f1": at[2], "p": at[0], "r": at[1], "oracle": oracle, "min_prob": best,
                           "lines": int(np.mean([c["lines"] for c in mine]))}
            alone = np.mean([prf_at(c, -1.0)[2] for c in mine])
            print(f"| {lang} | {kind} | {share:.0%} | {cells[name]['lines']:,} | {len(mine)} | "
                  f"{100 * at[2]:.1f} ({100 * at[0]:.1f} / {100 * at[1]:.1f}) | {100 * oracle:.1f} | {100 * alone:.1f} |",
                  flush=True)
        print(f"  {lang}: min-prob {best:g} (mean F1 over the groups {100 * f1[best]:.1f})", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"chosen": chosen, "cells": cells, "largest": largest}, f, indent=1)
    if args.write:
        write(model, chosen, largest, cells, (
            "tools/calibrate_second_stage.py on the sparse dev tasks (gold pairs held apart from the model's training "
            "or from Tatoeba v1; above the dev pool's size, distractors from the training corpora), shares "
            f"{args.shares}, sizes {args.sizes}, and news tasks of {args.news_size} lines at shares {args.news_shares} "
            f"(de, fr, cs, ru, zh), {args.draws} draws, seed {args.seed}"
            + (f"; reference margins above {args.max_lines} lines a side" if args.max_lines else "")))
        print(f"wrote {model.path}/config.json")


def write(model, chosen: dict, largest: dict, cells: dict, how: str) -> None:
    """Store each language's chosen min_prob and max_lines in the model's calibration (config.json, "mining": the
    pair's "second_stage", with what the floor measured on the pool tasks of 1,000 lines), beside its floors."""
    from bitextmine.mining.calibrated import entries, pair_key, write_section

    held = entries(model.mining)
    new = {}
    for lang, p in chosen.items():
        key = pair_key(lang, "en")
        if key not in held:
            raise SystemExit(f"{model.path}: no mining settings for {key}; calibrate them first (calibrate-mining)")
        measured = [{"lines": c["lines"], "share": float(name.split()[2]), "precision": c["p"], "recall": c["r"],
                     "f1": c["f1"]} for name, c in cells.items() if name.startswith(f"{lang} pool ") and
                    name.endswith(" 1000")]
        new[key] = {**held[key], "second_stage": {"min_prob": p, "max_lines": int(largest[lang]), "measured": measured,
                                                  "chosen_on": how}}
    write_section(model.path, new, model.mining.get("chosen_on", ""))


if __name__ == "__main__":
    main()
