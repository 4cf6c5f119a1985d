"""Mining tasks in which translations are rare (tools/sparse_tasks.py builds and scores them; the second stage's
calibration draws them too), and their precision, recall and F1.

Pairs (per language L): the pairs held apart from the model's training (``holdout``/en-L.en + en-L.L) and
Tatoeba v1 (``tatoeba``), one pool (:func:`read_pairs`). The task core (:func:`bitextmine.judge.tasks.build_task`,
its repeat rules) lives in :mod:`bitextmine.judge.tasks`; here are the tasks that fill up a pool from the training
corpora (:func:`draw_tasks`), the news tasks whose distractors are the sentences around the gold pairs
(:func:`build_context_task`), the largest task a pool gives (:func:`largest_tasks`) and the scores of `mine` on a
task (:func:`evaluate`). Paths are arguments; nothing here prints.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import replace
from functools import lru_cache

import numpy as np

from ..judge.tasks import DROPPED, NEAR, PoolTooSmall, Task, build_task, fill_task, take_gold, with_filler
from .devdata import LANGS as ISO3
from .devdata import language_pairs

LANGS = list(ISO3)


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


def read_pairs(lang: str, holdout: str, tatoeba: str) -> list[tuple[str, str]]:
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
def read_filler(lang: str, train_dir: str, seed: int = 0) -> list[tuple[str, str]]:
    """(foreign, English) pairs of ``lang``'s training corpora (:func:`bitextmine.evaluation.devdata.corpora` of
    ``train_dir``), stripped, shuffled with ``seed``: distractor lines for tasks larger than the dev pool allows
    (the model trained on these pairs, never on a task's gold pairs)."""
    pairs = [(x.strip(), y.strip()) for x, y in language_pairs(train_dir, lang)]
    return [pairs[i] for i in np.random.default_rng(seed).permutation(len(pairs))]


def read_news(lang: str, pool: list[tuple[str, str]], folder: str) -> tuple[list, list[str], list[int]]:
    """(the (foreign, English) pairs of ``lang``'s WMT news test sets in document order, each line's test set, the
    positions of the pairs of ``pool`` among them): the gold pairs of :func:`build_context_task` are pairs the
    model never trained on (the held-apart ones), the distractors the sentences of the same articles (which it
    trained on, each with its own translation, never with a line of the task). Empty when there are none."""
    from ..corpus import read_lines

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
               near: float = NEAR, filler: list | None = None, train_dir: str | None = None
               ) -> tuple[int, list[Task], bool]:
    """(lines a side, one task per seed, filled or not) for a size ``label``: "max" (:func:`largest_tasks`), or N
    lines a side; when the pool cannot give N (N * (2 - share) > its pairs), the gold pairs still come from the
    pool and the distractors from the rest of it and then from ``filler`` (default: :func:`read_filler` of
    ``train_dir``)."""
    if label == "max":
        size, drawn = largest_tasks(pool, share, seeds, near)
        return size, drawn, False
    size = int(label)
    if size * (2 - share) <= len(pool):
        return size, [build_task(pool, size, share, np.random.default_rng(s), near) for s in seeds], False
    filler = read_filler(lang, train_dir) if filler is None else filler
    pairs = with_filler(pool, filler, size)
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


def mined(folder: str, model, config, langs: tuple = (None, None)) -> tuple[list[tuple[int, int]], np.ndarray, object]:
    """(printed pairs (src line, tgt line) from 1, their scores: float (n,), stats) of mine_files on a task, the
    sides' languages ``langs`` (src, tgt) given or (None) detected."""
    from ..pipeline import mine_files

    out = io.StringIO()
    stats = mine_files(os.path.join(folder, "src.txt"), os.path.join(folder, "tgt.txt"), out, model=model,
                       config=config, ids=True, src_lang=langs[0], tgt_lang=langs[1])
    pairs, scores = [], []
    for row in out.getvalue().splitlines():
        cols = row.split("\t")
        pairs.append((int(cols[-2].split(",")[0]), int(cols[-1].split(",")[0])))  # lines of a side are distinct
        scores.append(float(cols[0]))
    return pairs, np.array(scores, np.float64), stats


def evaluate(folder: str, task: Task, model, oracles: bool = True, second_stage: bool = True) -> dict:
    """P/R/F1 of mine's defaults (with the model's second stage unless not ``second_stage``) on one task, both
    oracles (0 when not ``oracles``), the settings used and the wrong printed pairs."""
    from ..config import MineConfig

    printed, _, stats = mined(folder, model, replace(MineConfig(), second_stage=second_stage))
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
    floors = replace(MineConfig(), threshold=-1e9)
    pairs, scores, _ = mined(folder, model, floors)
    with_floors = best_f1(scores, np.array([q in task.gold for q in pairs], bool), len(task.gold))
    return dict(out, oracle_margin=margin_only, oracle_floors=with_floors)
