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

The core (:func:`key`, :class:`Repeats`, :func:`clean_pool`, :func:`build_task`, :func:`prf`, :func:`best_f1`)
needs only numpy; tests/test_sparse_tasks.py calls it on tiny data.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from functools import lru_cache

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from bitextmine.judge.tasks import (  # noqa: E402,F401  (the task core, also what tests import from here)
    CONTAIN, DROPPED, NEAR, STOPWORDS, PoolTooSmall, Repeats, Task, build_task, clean_pool, content, fill_task, key,
    take_gold, tokens,
)

HOLDOUT = os.path.join(HERE, "..", ".bench", "holdout")
TATOEBA = os.path.join(HERE, "..", "..", "shared", "data", "dev", "tatoeba", "v1")
LANGS = ["de", "fr", "es", "cs", "ru", "zh", "tr", "ar"]
ISO3 = {"de": "deu", "fr": "fra", "es": "spa", "cs": "ces", "ru": "rus", "zh": "cmn", "tr": "tur", "ar": "ara"}
SECOND_STAGE = True  # mine with the model's second stage (--no-second-stage: without)


# ---------------------------------------------------------------------------------------------- the core


def build_context_task(news: list[tuple[str, str]], origins: list[str], held: list[int], size: int, share: float,
                       rng: np.random.Generator, near: float = NEAR) -> Task:
    """A task whose distractors are the sentences around its gold pairs in their articles (:func:`read_news`): the
    gold pairs are round(share * size) of the ``held`` positions of ``news`` (pairs in document order, ``origins``
    naming each line's test set), the English side is filled with the English texts of the lines at odd
    positions nearest a gold pair, the foreign side with the foreign texts of those at even positions (so no
    distractor has its partner), both in the same test set as their gold pair, under the repeat rules."""
    dropped = dict.fromkeys(DROPPED, 0)
    gold_idx, _ = take_gold(news, rng.permutation(np.asarray(held, np.int64)), round(share * size), near, dropped)
    around = list(context(gold_idx, origins, size))
    return fill_task(news, gold_idx, [m for m in around if m % 2], [m for m in around if not m % 2], size, rng,
                     near, dropped)


def context(gold: list[int], origins: list[str], size: int):
    """Positions nearest the ``gold`` positions (distance 1 first, round the gold pairs in turn), each once, never
    a gold one, in the same test set as the gold pair, up to 4 * ``size`` of them."""
    seen, n = set(gold), 0
    for d in range(1, len(origins)):
        grew = False
        for k in gold:
            for m in (k - d, k + d):
                if 0 <= m < len(origins) and origins[m] == origins[k]:
                    grew = True
                    if m not in seen:
                        seen.add(m)
                        n += 1
                        yield m
                        if n >= 4 * size:
                            return
        if not grew:
            return


def largest_tasks(pairs, share: float, rng_seeds: list, near: float = NEAR) -> tuple[int, list[Task]]:
    """(N, one task per seed) for the largest N a side at which ``pairs`` give a task at ``share`` for every seed
    (``np.random.default_rng(seed)`` per task), searched downward in steps of 1 % from the size that ignores
    repeats (N * (2 - share) = len(pairs))."""
    size = int(len(pairs) / (2 - share))
    while size > 0:
        try:
            return size, [build_task(pairs, size, share, np.random.default_rng(s), near) for s in rng_seeds]
        except PoolTooSmall:
            size = int(size * 0.99)
    raise PoolTooSmall(f"{len(pairs)} pairs allow no task")


def prf(printed: list[tuple[int, int]], gold: set[tuple[int, int]]) -> tuple[float, float, float]:
    """(precision, recall, F1) of the ``printed`` pairs against ``gold``; 0 where undefined."""
    right = len(set(printed) & gold)
    p, r = right / max(1, len(printed)), right / max(1, len(gold))
    return p, r, 2 * p * r / (p + r) if p + r else 0.0


def best_f1(scores: np.ndarray, hit: np.ndarray, n_gold: int) -> tuple[float, float]:
    """(best F1, the threshold reaching it) over every threshold on ``scores``: float (n,), one per selected pair,
    ``hit`` bool (n,) whether it is gold; a threshold keeps the pairs scoring at least it. (0, inf) when none
    helps."""
    order = np.argsort(-scores, kind="stable")
    s, h = scores[order], hit[order]
    tp = np.cumsum(h)
    n = np.arange(1, len(s) + 1)
    last = np.r_[s[1:] != s[:-1], True] if len(s) else np.zeros(0, bool)  # cut only between distinct scores
    f1 = np.where(last, 2 * tp / (n + max(0, n_gold)), 0.0)
    if not len(f1) or f1.max() <= 0:
        return 0.0, float("inf")
    j = int(f1.argmax())
    return float(f1[j]), float(s[j])


# ---------------------------------------------------------------------------------------------- data and files


def read_pairs(lang: str, holdout: str = HOLDOUT, tatoeba: str = TATOEBA) -> list[tuple[str, str]]:
    """(foreign, English) pairs of the held-apart pairs then Tatoeba v1 for ``lang`` (a file that is missing is
    skipped)."""
    out = []
    for fx, en in ((f"{holdout}/en-{lang}.{lang}", f"{holdout}/en-{lang}.en"),
                   (f"{tatoeba}/tatoeba.{ISO3[lang]}-eng.{ISO3[lang]}", f"{tatoeba}/tatoeba.{ISO3[lang]}-eng.eng")):
        if os.path.exists(fx):
            with open(fx, encoding="utf-8") as a, open(en, encoding="utf-8") as b:
                out += [(x.rstrip("\n").strip(), y.rstrip("\n").strip()) for x, y in zip(a, b)]
    return out


@lru_cache(maxsize=1)
def read_filler(lang: str, seed: int = 0) -> list[tuple[str, str]]:
    """(foreign, English) pairs of ``lang``'s training corpora (../shared/data/train, tools/train_default.py's
    corpora), shuffled with ``seed``: distractor lines for tasks larger than the dev pool allows (the model
    trained on these pairs, never on a task's gold pairs)."""
    import tempfile

    sys.path.insert(0, HERE)
    from train_default import DATA, corpora, english_first

    pairs = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in corpora(os.path.join(DATA, "train"), tmp):
            if spec.group_name() == lang:
                a, b = spec.read()
                pairs += [(y.strip(), x.strip()) if english_first(spec) else (x.strip(), y.strip()) for x, y in zip(a, b)]
    return [pairs[i] for i in np.random.default_rng(seed).permutation(len(pairs))]


NEWS = os.path.join(HERE, "..", "..", "shared", "data", "train", "wmt_newstest")


def read_news(lang: str, pool: list[tuple[str, str]], folder: str = NEWS) -> tuple[list, list[str], list[int]]:
    """(the (foreign, English) pairs of ``lang``'s WMT news test sets in document order, each line's test set, the
    positions of the pairs of ``pool`` among them): the gold pairs of :func:`build_context_task` are pairs the
    model never trained on (the held-apart ones), the distractors the sentences of the same articles (which it
    trained on, each with its own translation, never with a line of the task). Empty when there are none."""
    from bitextmine.corpus import read_lines

    path = os.path.join(folder, f"en-{lang}")
    if not os.path.exists(f"{path}.en.gz"):
        return [], [], []
    en = [t.strip() for t in read_lines(f"{path}.en.gz")]
    fx = [t.strip() for t in read_lines(f"{path}.{lang}.gz")]
    origins = [t.strip() for t in read_lines(f"{path}.origin.gz")]
    news = list(zip(fx, en))
    wanted = set(pool)
    return news, origins, [i for i, p in enumerate(news) if p in wanted]


def draw_tasks(pool: list[tuple[str, str]], lang: str, label: str, share: float, seeds: list,
               near: float = NEAR, filler: list | None = None) -> tuple[int, list[Task], bool]:
    """(lines a side, one task per seed, filled or not) for a size ``label``: "max" (:func:`largest_tasks`), or N
    lines a side; when the pool cannot give N (N * (2 - share) > its pairs), the gold pairs still come from the
    pool and the distractors from the rest of it and then from ``filler`` (default: :func:`read_filler`)."""
    if label == "max":
        size, drawn = largest_tasks(pool, share, seeds, near)
        return size, drawn, False
    size = int(label)
    if size * (2 - share) <= len(pool):
        return size, [build_task(pool, size, share, np.random.default_rng(s), near) for s in seeds], False
    filler = read_filler(lang) if filler is None else filler
    pairs, _ = clean_pool(pool + filler[:3 * size])  # the pool (clean) first and whole, then filler
    return size, [build_task(pairs, size, share, np.random.default_rng(s), near, len(pool)) for s in seeds], True


def write_task(task: Task, folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    for name, lines in (("src.txt", task.src), ("tgt.txt", task.tgt), ("src.en.txt", task.src_en)):
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
    with open(os.path.join(folder, "gold.tsv"), "w", encoding="utf-8") as f:
        f.writelines(f"{s}\t{t}\n" for s, t in sorted(task.gold))
    with open(os.path.join(folder, "dropped.json"), "w", encoding="utf-8") as f:
        json.dump(task.dropped, f, indent=1)


def build_all(out: str, langs, sizes, shares, draws: int, seed: int, near: float, news: bool = False) -> dict:
    """Write every task under ``out``/L/sS-nN-dD (``news``: the tasks of :func:`build_context_task` instead, under
    ``out``/L/news-sS-nN-dD, for the languages with held-apart news pairs); returns {(lang, share, size label):
    [(folder, task), ...]} and prints the pools' sizes."""
    tasks = {}
    for lang in langs:
        pool, left_out = clean_pool(read_pairs(lang))
        print(f"{lang}: {len(pool)} pairs in the pool ({left_out} left out: a text repeating another pair's)", flush=True)
        if news:
            articles = read_news(lang, pool)
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
                        size, drawn, filled = draw_tasks(pool, lang, label, share, seeds, near)
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


# ---------------------------------------------------------------------------------------------- evaluation


def mined(folder: str, model, config) -> tuple[list[tuple[int, int]], np.ndarray, object]:
    """(printed pairs (src line, tgt line) from 1, their scores: float (n,), stats) of mine_files on a task."""
    from bitextmine.pipeline import mine_files

    out = io.StringIO()
    stats = mine_files(os.path.join(folder, "src.txt"), os.path.join(folder, "tgt.txt"), out, model=model,
                       config=config, ids=True)
    pairs, scores = [], []
    for row in out.getvalue().splitlines():
        cols = row.split("\t")
        pairs.append((int(cols[-2].split(",")[0]), int(cols[-1].split(",")[0])))  # lines of a side are distinct
        scores.append(float(cols[0]))
    return pairs, np.array(scores, np.float64), stats


def evaluate(folder: str, task: Task, model, oracles: bool = True) -> dict:
    """P/R/F1 of mine's defaults on one task, both oracles (0 when not ``oracles``), the settings used and the
    wrong printed pairs."""
    from dataclasses import replace

    from bitextmine.config import MineConfig

    printed, _, stats = mined(folder, model, replace(MineConfig(), second_stage=SECOND_STAGE))
    p, r, f = prf(printed, task.gold)
    used = ", ".join(x.replace(":", " ") for x in stats.signature.split("|")
                     if x.split(":")[0] in ("threshold", "min-cosine", "min-z"))
    wrong = [(task.src[s - 1], task.src_en[s - 1], task.tgt[t - 1]) for s, t in printed if (s, t) not in task.gold]
    out = {"p": p, "r": r, "f1": f, "printed": len(printed), "oracle_margin": (0.0, 0.0), "oracle_floors": (0.0, 0.0),
           "settings": used, "calibrated_for": stats.info.get("calibrated_for"), "wrong": wrong}
    if not oracles:
        return out
    everything = replace(MineConfig(), threshold=-1e9, min_z=0.0, min_cosine=0.0, per_language=False,
                         second_stage=False)  # the margin alone
    pairs, scores, _ = mined(folder, model, everything)
    margin_only = best_f1(scores, np.array([q in task.gold for q in pairs], bool), len(task.gold))
    floors = replace(MineConfig(), threshold=-1e9, pinned=("threshold",))
    pairs, scores, _ = mined(folder, model, floors)
    with_floors = best_f1(scores, np.array([q in task.gold for q in pairs], bool), len(task.gold))
    return dict(out, oracle_margin=margin_only, oracle_floors=with_floors)


def main() -> None:
    global SECOND_STAGE
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "..", ".bench", "sparse"), help="where the tasks are written")
    ap.add_argument("--model", default=None, help="model directory (default: the bundled model)")
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
    SECOND_STAGE = not args.no_second_stage
    t0 = time.process_time()
    tasks = build_all(args.out, args.langs, args.sizes, args.shares, args.draws, args.seed, args.near, args.news)
    print("\nrepeats dropped (sum over the draws):")
    print("| language | gold share | lines a side | " + " | ".join(DROPPED) + " |")
    print("|---|---|---|" + "---|" * len(DROPPED))
    for (lang, share, label), runs in tasks.items():
        print(f"| {lang} | {share:.0%} | {len(runs[0][1].src):,} | "
              + " | ".join(str(sum(t.dropped[k] for _, t in runs)) for k in DROPPED) + " |")
    print(f"built in {time.process_time() - t0:.0f} s of CPU", flush=True)
    if args.build_only:
        return
    from bitextmine.model import load_model

    model = load_model(args.model)
    print(f"\nmodel {model.fingerprint}; mine's defaults (per-language settings detected"
          f"{', no second stage' if args.no_second_stage else ''}); {args.draws} draws")
    print("| language | gold share | lines a side | gold pairs | precision | recall | F1 | oracle: margin alone | "
          "oracle: threshold with the language's floors | printed |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    wrong, record, settings = {}, [], {}
    for (lang, share, label), runs in tasks.items():
        res = [evaluate(folder, task, model, not args.no_oracles) for folder, task in runs]
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
