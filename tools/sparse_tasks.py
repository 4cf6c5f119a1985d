"""Mining tasks in which translations are rare, built from pairs the bundled model never trained on, and the
precision, recall and F1 of `bitextmine mine` (the bundled model, its defaults) on them.

    python tools/sparse_tasks.py [--out .bench/sparse] [--sizes 1000 max 10000] [--shares 0.01 0.03 0.1 0.5] [--draws 5]
    python tools/sparse_tasks.py --news --sizes 1500 --shares 0.01 0.04 0.1 --draws 3 --langs de fr cs ru zh

Pairs (per language L): the pairs held apart from the model's training (tools/train_default.py --holdout:
.bench/holdout/en-L.en + en-L.L; UI strings, help text, news, everyday sentences) and Tatoeba v1
(../shared/data/dev/tatoeba/v1, everyday sentences, removed from training), one pool; a pair whose foreign or
English text repeats one of an earlier pair (up to :func:`key`) is left out of it.

Task (L, size N lines a side, gold share s, draw d): G = round(s * N) pairs of the pool are the gold pairs; the
other pairs are shuffled and split into halves; the English side is filled up to N lines with English texts of
the second half, the foreign side with foreign texts of the first half, so no distractor has a partner on the
other side. Real translations must not count as errors, so (:func:`build_task`) a gold pair is skipped when its
English nearly repeats (:class:`Repeats`) a gold English already taken; an English distractor when it nearly
repeats a gold text (English or foreign) or repeats (up to :func:`key`) a line already on its side; a foreign
distractor when its own English translation, or its own text (names, identifiers and code are copied across
languages), nearly repeats any line on the English side, or its text repeats a foreign line already taken. Both
sides are shuffled; each task is a folder with src.txt (foreign), tgt.txt (English) and gold.tsv (source line,
target line; from 1), src.en.txt (each foreign line's own English translation, to read the errors with) and
dropped.json (how many candidates each rule left out). ``max`` as a size: the largest N at which the pool gives
every draw at that share. A size N larger than the pool allows (N * (2 - share) > its pairs) still takes its gold
pairs from the pool, and its distractors from the rest of the pool and then from the training corpora of the
language (:func:`read_filler`: lines the model trained on, paired there with their own translations, never with
a line of the task), under the same repeat rules. A near repeat (:class:`Repeats`): equal up to :func:`key`, 80 %
of the word tokens of each shared, or (since the news tasks) 75 % of the content words of the line with fewer
shared with the other, where both have 3 or more (a headline and its lead, two agencies' versions of one item).
The task core lives in :mod:`bitextmine.judge.tasks`, which also draws the second stage's training tasks.

News tasks (``--news``, :func:`build_context_task`; de, fr, cs, ru, zh: the languages whose held-apart pairs include
news): the gold pairs are held-apart pairs of the WMT news test sets, the distractors the sentences around them
in their articles (the test sets' own order; lines the model trained on, each with its own translation, never
with a line of the task): other sentences of the same story and the stories beside it, as in mining
comparable news.

The output folder also gets results.json (every task's scores and wrong pairs) and
wrong-L.tsv (the wrong pairs at the smallest share and first size: foreign line, its English, the English line
it was paired with) for the languages of --wrong.

Evaluation: :func:`bitextmine.pipeline.mine_files` (what `bitextmine mine SRC TGT --ids` runs) with the model's
defaults, per-language settings detected as a user gets them; precision = printed gold pairs / printed pairs,
recall = printed gold pairs / G. Beside it, two oracles, chosen after the fact on the same task: the best F1 of any
margin threshold alone (no standout or cosine floor), and of any threshold with the language's calibrated floors.

The core (:mod:`bitextmine.judge.tasks`, :mod:`bitextmine.evaluation.sparse_tasks`) needs only numpy;
tests/test_sparse_tasks.py calls it on tiny data.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from bitextmine.evaluation.sparse_tasks import (
    LANGS,
    build_context_task,
    draw_tasks,
    evaluate,
    read_news,
    read_pairs,
    write_task,
)
from bitextmine.judge.tasks import DROPPED, NEAR, PoolTooSmall, clean_pool
from bitextmine.loading import load_model

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data")
HOLDOUT = os.path.join(HERE, "..", ".bench", "holdout")
TATOEBA = os.path.join("dev", "tatoeba", "v1")  # under --data
NEWS = os.path.join("train", "wmt_newstest")  # under --data


def build_all(out: str, langs, sizes, shares, draws: int, seed: int, near: float, news: bool = False,
              data: str = DATA, holdout: str = HOLDOUT) -> dict:
    """Write every task under ``out``/L/sS-nN-dD (``news``: the tasks of :func:`build_context_task` instead, under
    ``out``/L/news-sS-nN-dD, for the languages with held-apart news pairs); returns {(lang, share, size label):
    [(folder, task), ...]} and prints the pools' sizes."""
    tasks = {}
    for lang in langs:
        pool, left_out = clean_pool(read_pairs(lang, holdout, os.path.join(data, TATOEBA)))
        print(f"{lang}: {len(pool)} pairs in the pool ({left_out} left out: a text repeating another pair's)", flush=True)
        if news:
            articles = read_news(lang, pool, os.path.join(data, NEWS))
            print(f"{lang}: {len(articles[2])} of them in the news test sets", flush=True)
            if not articles[2]:
                continue
        for share in shares:
            seeds = [[seed, sum(map(ord, lang)), int(share * 1000), d] for d in range(draws)]
            for label in sizes:
                try:
                    if news:
                        size, filled = int(label), False
                        drawn = [build_context_task(*articles, size, share, np.random.default_rng(s), near)
                                 for s in seeds]
                    else:
                        size, drawn, filled = draw_tasks(pool, lang, label, share, seeds, near,
                                                         train_dir=os.path.join(data, "train"))
                    if filled:
                        print(f"{lang}: {size:,} lines at {share:.0%} gold: distractors filled from the training corpora")
                except PoolTooSmall:
                    print(f"{lang}: no task of {label} lines at {share:.0%} gold")
                    continue
                for d, task in enumerate(drawn):
                    folder = os.path.join(out, lang, f"{'news-' if news else ''}s{share:g}-n{size}-d{d}")
                    write_task(task, folder)
                    tasks.setdefault((lang, share, label), []).append((folder, task))
    return tasks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "..", ".bench", "sparse"), help="where the tasks are written")
    ap.add_argument("--model", default=None, help="model directory (default: the bundled model)")
    ap.add_argument("--data", default=DATA, help="the shared data (train/, dev/tatoeba/v1)")
    ap.add_argument("--holdout", default=HOLDOUT, help="the pairs held apart by tools/train_default.py --holdout")
    ap.add_argument("--langs", nargs="+", default=LANGS)
    ap.add_argument("--sizes", nargs="+", default=["1000", "max"], help="lines a side; max: as many as the pool allows")
    ap.add_argument("--shares", type=float, nargs="+", default=[0.01, 0.03, 0.1, 0.5], help="gold share of each side")
    ap.add_argument("--draws", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--near", type=float, default=NEAR, help="share of word tokens that makes a near repeat")
    ap.add_argument("--build-only", action="store_true", help="write the tasks, do not mine them")
    ap.add_argument("--wrong", nargs="*", default=["fr", "ru"], metavar="LANG",
                    help="print the wrong pairs at the smallest gold share and size for these languages")
    ap.add_argument("--no-second-stage", action="store_true", help="mine without the model's second stage")
    ap.add_argument("--news", action="store_true", help="tasks whose distractors are the sentences around the gold "
                    "pairs in their news articles (build_context_task; sizes in lines, no max)")
    ap.add_argument("--no-oracles", action="store_true", help="mine each task once, with the defaults (the oracle "
                    "columns then read 0)")
    args = ap.parse_args()
    t0 = time.process_time()
    tasks = build_all(args.out, args.langs, args.sizes, args.shares, args.draws, args.seed, args.near, args.news,
                      args.data, args.holdout)
    print("\nrepeats dropped (sum over the draws):")
    print("| language | gold share | lines a side | " + " | ".join(DROPPED) + " |")
    print("|---|---|---|" + "---|" * len(DROPPED))
    for (lang, share, label), runs in tasks.items():
        print(f"| {lang} | {share:.0%} | {len(runs[0][1].src):,} | "
              + " | ".join(str(sum(t.dropped[k] for _, t in runs)) for k in DROPPED) + " |")
    print(f"built in {time.process_time() - t0:.0f} s of CPU", flush=True)
    if args.build_only:
        return
    model = load_model(args.model)
    print(f"\nmodel {model.fingerprint}; mine's defaults (per-language settings detected"
          f"{', no second stage' if args.no_second_stage else ''}); {args.draws} draws")
    print("| language | gold share | lines a side | gold pairs | precision | recall | F1 | oracle: margin alone | "
          "oracle: threshold with the language's floors | printed |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    wrong, record, settings = {}, [], {}
    for (lang, share, label), runs in tasks.items():
        res = [evaluate(folder, task, model, not args.no_oracles, not args.no_second_stage) for folder, task in runs]
        record += [dict(x, task=folder, gold=len(task.gold), lines=len(task.src)) for (folder, task), x in zip(runs, res)]
        m = {k: float(np.mean([x[k] for x in res])) for k in ("p", "r", "f1", "printed")}
        om = np.mean([x["oracle_margin"][0] for x in res])
        of = np.mean([x["oracle_floors"][0] for x in res])
        settings.setdefault(lang, set()).update(
            x["settings"] + (f" ({'-'.join(x['calibrated_for'])})" if x["calibrated_for"] else "") for x in res)
        print(f"| {lang} | {share:.0%} | {len(runs[0][1].src):,} | {len(runs[0][1].gold)} | {100 * m['p']:.1f} | "
              f"{100 * m['r']:.1f} | {100 * m['f1']:.1f} | {100 * om:.1f} | {100 * of:.1f} | {m['printed']:.0f} |",
              flush=True)
        if lang in args.wrong and share == min(args.shares) and label == args.sizes[0]:
            wrong[lang] = [w for x in res for w in x["wrong"]]
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(record, f, ensure_ascii=False, indent=1)
    print("\nsettings used: " + "; ".join(f"{lang}: {' / '.join(sorted(s))}" for lang, s in settings.items()))
    for lang, pairs in wrong.items():
        path = os.path.join(args.out, f"wrong-{lang}.tsv")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines("\t".join(w) + "\n" for w in pairs)
        print(f"\n{len(pairs)} wrong pairs, {lang}, {min(args.shares):.0%} gold, {args.sizes[0]} lines a side, all draws "
              f"({path}); every {max(1, len(pairs) // 20)}th:")
        for a, a_en, b in pairs[:: max(1, len(pairs) // 20)]:
            print(f"  {a}  ({a_en})  |||  {b}")
    print(f"\nCPU time of the whole run: {time.process_time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
