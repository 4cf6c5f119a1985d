"""Mining tasks of any size whose gold pairs are the pairs held apart from the model's training
(tools/train_default.py --holdout) and whose distractors are training pairs without any held-apart text
(tools/f1_by_size.py measures `mine` on them).
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections import defaultdict

import numpy as np

from ..corpus import read_parallel
from .devdata import english_first


def key(text: str) -> str:
    """What tells texts apart for the task: NFKC, case-folded, every run of punctuation, symbols (UI
    accelerators such as & and _) and spaces made one space. The bundled model folds case, so texts that
    differ only there are one text to it; a distractor equal to a gold text up to this key would be an
    unlabelled translation."""
    return " ".join(re.sub(r"[\W_]+", " ", unicodedata.normalize("NFKC", text).casefold()).split())


def language_pairs(specs, holdout: str, distractors: tuple[str, ...] = ()) -> dict[str, tuple]:
    """Per language: (gold foreign, gold English, distractor pool of (foreign, English) pairs without any
    held-apart text, English partners of each foreign text over all corpora: {key: {keys}}). The pool
    comes from the corpora whose path holds one of ``distractors`` (empty: every corpus)."""
    pool: dict[str, list] = defaultdict(list)
    partners: dict[str, dict] = defaultdict(lambda: defaultdict(set))
    for spec in specs:
        src, tgt = spec.read()
        en_first = english_first(spec)
        lang = spec.group_name()
        in_pool = not distractors or any(name in str(spec.src) for name in distractors)
        for a, b in zip(src, tgt):
            en, fx = (a.strip(), b.strip()) if en_first else (b.strip(), a.strip())
            if en and fx:
                if in_pool:
                    pool[lang].append((fx, en))
                partners[lang][key(fx)].add(key(en))
    out = {}
    for lang in pool:
        fx, en = read_parallel(os.path.join(holdout, f"en-{lang}.{lang}"), os.path.join(holdout, f"en-{lang}.en"))
        held = {key(t) for t in fx + en}
        clean = [(f, e) for f, e in pool[lang] if key(f) not in held and key(e) not in held]
        out[lang] = (fx, en, clean, partners[lang])
    return out


def build_task(lang_data: tuple, size: int, rng: np.random.Generator):
    """(source lines, target lines, gold {(source line no., target line no.)}, G), line numbers from 1.
    Lines on a side are distinct up to :func:`key`, and no English distractor is (up to the key) a known
    partner of a foreign line of the task."""
    gold_fx, gold_en, pool, partners = lang_data
    g = min(size // 2, len(gold_fx))
    pick = rng.choice(len(gold_fx), g, replace=False)
    order = rng.permutation(len(pool))
    half = len(order) // 2
    used_fx, used_en = {key(gold_fx[i]) for i in pick}, {key(gold_en[i]) for i in pick}
    fx = _distinct([pool[i][0] for i in order[:half]], size - g, used_fx)
    forbidden = used_en | {e for f in used_fx for e in partners.get(f, ())}  # used_fx: now every foreign key
    en = _distinct([pool[i][1] for i in order[half:]], size - g, forbidden)
    src = [gold_fx[i] for i in pick] + fx
    tgt = [gold_en[i] for i in pick] + en
    ps, pt = rng.permutation(len(src)), rng.permutation(len(tgt))
    at_s, at_t = np.argsort(ps), np.argsort(pt)
    gold = {(int(at_s[i]) + 1, int(at_t[i]) + 1) for i in range(g)}
    return [src[i] for i in ps], [tgt[i] for i in pt], gold, g


def _distinct(lines: list[str], n: int, exclude: set[str]) -> list[str]:
    """The first ``n`` lines whose :func:`key` is not in ``exclude`` (which grows by their keys)."""
    out = []
    for line in lines:
        if len(out) == n:
            break
        k = key(line)
        if k not in exclude:
            exclude.add(k)
            out.append(line)
    return out
