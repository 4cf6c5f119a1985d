"""Mining tasks drawn from parallel pairs as mining meets them: ``size`` lines a side, a ``share`` of them gold pairs,
the other lines the foreign side of some pairs and the English side of others, so that no distractor has a partner
on the other side; and the rules that keep a real translation from counting as a distractor (news and UI text
repeat themselves: a headline and its lead, agency copy, one string in two programs, near-paraphrases).

Used to train the second stage (:mod:`bitextmine.judge.train`: its candidates labelled gold or not) and by the
sparse dev tasks (tools/sparse_tasks.py). Everything here needs only numpy.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

NEAR = 0.8  # a near repeat shares at least this share of the word tokens of each line
CONTAIN = 0.75  # ... or the one with fewer content words shares this share of them with the other
MIN_CONTENT = 4  # ... where both have at least this many
SPAN = 0.5  # ... and the one with fewer has at least this share of the other's


def key(text: str) -> str:
    """What tells two texts apart for the task: NFKC, case-folded, every run of digits one 0, every run of
    punctuation, symbols and spaces one space. The bundled model folds case; texts equal up to this key are
    one text to a reader of mined pairs."""
    text = re.sub(r"\d+", "0", unicodedata.normalize("NFKC", text).casefold())
    return " ".join(re.sub(r"[\W_]+", " ", text).split())


# English spellings of one word, after contractions are expanded (what're, can't, you've; okay, everybody)
CONTRACTIONS = {"n't": " not", "'re": " are", "'m": " am", "'ll": " will", "'ve": " have", "'d": " would"}
VARIANTS = {"ca": "can", "wo": "will", "sha": "shall", "okay": "ok", "everybody": "everyone",
            "somebody": "someone", "anybody": "anyone", "nobody": "noone"}
ARTICLES = frozenset({"a", "an", "the"})


def tokens(text: str) -> frozenset[str]:
    """The distinct word tokens of ``text`` (those of :func:`key`) that tell English sentences apart: contractions
    expanded, a few variant spellings made one, articles left out ("What're you watching?" and "What are you
    watching?", "Is everybody OK?" and "Is everybody okay?" have the same tokens)."""
    text = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    text = re.sub(r"(n't|'re|'m|'ll|'ve|'d)\b", lambda m: CONTRACTIONS[m.group(1)], text.replace("cannot", "can not"))
    return frozenset(VARIANTS.get(w, w) for w in key(text).split() if w not in ARTICLES)


# English words that say little of what a sentence is about (left out of :func:`content`)
STOPWORDS = frozenset("""
i me my myself we our ours us you your yours he him his she her hers it its they them their theirs this that these
those who whom whose which what where when why how am is are was were be been being have has had having do does did
doing would should could can will shall may might must not no nor so than too very just also only then there here
of to in on at by for with about against between into through during before after above below from up down out off
over under again further once and but or if because as until while all any both each few more most other some such
own same s t d ll m o re ve y one said says say""".split())


def content(toks: frozenset[str]) -> frozenset[str]:
    """The tokens of :func:`tokens` that are neither :data:`STOPWORDS` nor numbers (every digit run is one 0)."""
    return toks - STOPWORDS - {"0"}


def contained(a: frozenset[str], b: frozenset[str], contain: float) -> bool:
    """The containment rule of :class:`Repeats` on two sets of content tokens."""
    small, large = sorted((len(a), len(b)))
    return (small >= MIN_CONTENT and small >= SPAN * large - 1e-9
            and len(a & b) >= contain * small - 1e-9)


class Repeats:
    """Which texts nearly repeat one of ``lines``: equal up to :func:`key`; or sharing at least ``near`` of the
    :func:`tokens` of each (|A & B| >= near * max(|A|, |B|), A and B the two token sets); or, where both have at
    least :data:`MIN_CONTENT` :func:`content` tokens and the one with fewer at least :data:`SPAN` as many as the
    other, the one with fewer sharing at least ``contain`` of its own with the other (|A' & B'| >= contain *
    min(|A'|, |B'|)): a headline and the lead sentence that tells the same news, two agencies' versions of one
    item ("Flood kills 12 people in Utah." / "In the US state of Utah, at least 12 people have died as a result of
    a flood."). ``contain`` 0: no such rule.

    Candidates come from prefix filters: a line sharing m of A's tokens holds at least one of any |A| - m + 1 of
    them, so only the lines holding one of A's rarest |A| - ceil(near |A|) + 1 tokens are compared; for the
    containment rule, each line is also filed under its own rarest |B'| - ceil(contain |B'|) + 1 content tokens
    (rarest when it was added), one of which a text containing enough of B' must hold."""

    def __init__(self, lines=(), near: float = NEAR, contain: float = CONTAIN):
        self.near, self.contain = near, contain
        self.keys: set[str] = set()
        self.sets: list[frozenset[str]] = []
        self.postings: dict[str, list[int]] = defaultdict(list)
        self.cores: list[frozenset[str]] = []
        self.core_postings: dict[str, list[int]] = defaultdict(list)
        self.signed: dict[str, list[int]] = defaultdict(list)
        for line in lines:
            self.add(line)

    def add(self, text: str) -> None:
        self.keys.add(key(text))
        toks = tokens(text)
        for t in toks:
            self.postings[t].append(len(self.sets))
        self.sets.append(toks)
        core = content(toks) if self.contain else frozenset()
        if len(core) >= MIN_CONTENT:
            for t in core:
                self.core_postings[t].append(len(self.cores))
            for t in sorted(core, key=lambda t: (len(self.core_postings[t]), t))[: self._spread(len(core))]:
                self.signed[t].append(len(self.cores))
        self.cores.append(core)

    def _spread(self, n: int) -> int:
        """How many of n tokens a prefix filter for the containment rule needs."""
        return n - math.ceil(self.contain * n - 1e-9) + 1

    def find(self, text: str) -> bool:
        """Whether ``text`` nearly repeats a line added so far."""
        if key(text) in self.keys:
            return True
        a = tokens(text)
        if not a:
            return False
        need = math.ceil(self.near * len(a) - 1e-9)
        rare = sorted(a, key=lambda t: (len(self.postings.get(t, ())), t))[: len(a) - need + 1]
        seen = {i for t in rare for i in self.postings.get(t, ())}
        if any(len(a & self.sets[i]) >= self.near * max(len(a), len(self.sets[i])) - 1e-9 for i in seen):
            return True
        return self.contains(content(a)) if self.contain else False

    def contains(self, core: frozenset[str]) -> bool:
        """Whether content tokens ``core`` and those of a line added so far meet the containment rule."""
        if len(core) < MIN_CONTENT:
            return False
        rare = sorted(core, key=lambda t: (len(self.core_postings.get(t, ())), t))[: self._spread(len(core))]
        seen = {i for t in rare for i in self.core_postings.get(t, ())}  # lines with as many tokens or more
        seen.update(i for t in core for i in self.signed.get(t, ()))  # lines with fewer
        return any(contained(core, self.cores[i], self.contain) for i in seen)


def clean_pool(pairs: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], int]:
    """(the (foreign, English) pairs whose two texts are non-empty up to :func:`key` and repeat no text of an
    earlier kept pair on the same side (up to the key), how many were left out): each text of the pool then has
    one partner."""
    seen_f, seen_e, out = set(), set(), []
    for f, e in pairs:
        kf, ke = key(f), key(e)
        if kf and ke and kf not in seen_f and ke not in seen_e:
            seen_f.add(kf)
            seen_e.add(ke)
            out.append((f, e))
    return out, len(pairs) - len(out)


def with_filler(pool: list[tuple[str, str]], filler: list[tuple[str, str]], size: int) -> list[tuple[str, str]]:
    """The pairs a task of ``size`` lines a side larger than ``pool`` (a :func:`clean_pool`) draws from: the pool
    first and whole, then up to 3 * size pairs of ``filler``, cleaned of repeats (:func:`clean_pool`); its gold
    pairs are the pool's (``build_task(..., gold_from=len(pool))``)."""
    return clean_pool(pool + filler[: 3 * size])[0]


@dataclass
class Task:
    """One mining task: foreign lines ``src``, English lines ``tgt``, ``gold`` {(src line, tgt line)} numbered
    from 1, ``dropped``: how many candidates each rule left out ({rule: count}), and ``src_en``: each foreign
    line's own English translation (to read the errors with)."""

    src: list[str]
    tgt: list[str]
    gold: set[tuple[int, int]]
    dropped: dict[str, int] = field(default_factory=dict)
    src_en: list[str] = field(default_factory=list)


DROPPED = ("gold English repeats a gold English", "English distractor repeats a gold text",
           "English distractor repeats an English line", "foreign distractor's English repeats an English line",
           "foreign distractor repeats an English line", "foreign distractor repeats a foreign line")


class PoolTooSmall(ValueError):
    """The pool cannot fill a task of the size asked for."""


def build_task(pairs: list[tuple[str, str]], size: int, share: float, rng: np.random.Generator,
               near: float = NEAR, gold_from: int | None = None) -> Task:
    """A task of ``size`` lines a side, round(share * size) of them gold pairs (module docstring), drawn from
    ``pairs`` (a :func:`clean_pool`) with ``rng``. ``gold_from`` n: the gold pairs come from the first n pairs
    only (the dev pool), the distractors from the rest of them and the pairs after (filler). Raises
    :class:`PoolTooSmall` when the pool runs out."""
    g = round(share * size)
    n = len(pairs) if gold_from is None else gold_from
    order = rng.permutation(n)
    if gold_from is not None:
        order = np.r_[order, n + rng.permutation(len(pairs) - n)].astype(np.int64)
    dropped = dict.fromkeys(DROPPED, 0)
    gold_idx, at = take_gold(pairs, order[:n], g, near, dropped)
    rest = order[at:] if gold_from is None else rng.permutation(order[at:])
    half = len(rest) // 2
    return fill_task(pairs, gold_idx, rest[half:], rest[:half], size, rng, near, dropped)


def take_gold(pairs, order, g: int, near: float, dropped: dict) -> tuple[list, int]:
    """(the first ``g`` pairs of ``order`` whose English does not nearly repeat the English of one taken before,
    how many of ``order`` were looked at); counts the skipped in ``dropped``. :class:`PoolTooSmall` if fewer."""
    gold_en, gold_idx, at = Repeats(near=near), [], 0
    while len(gold_idx) < g and at < len(order):
        i, at = order[at], at + 1
        if gold_en.find(pairs[i][1]):
            dropped["gold English repeats a gold English"] += 1
        else:
            gold_en.add(pairs[i][1])
            gold_idx.append(i)
    if len(gold_idx) < g:
        raise PoolTooSmall(f"{len(order)} pairs cannot give {g} gold pairs")
    return gold_idx, at


def fill_task(pairs, gold_idx: list, english_from, foreign_from, size: int, rng: np.random.Generator, near: float,
              dropped: dict) -> Task:
    """The task of the gold pairs ``gold_idx`` (indexes into ``pairs``), the English side filled up to ``size`` with
    the English texts of the pairs ``english_from`` and the foreign side with the foreign texts of ``foreign_from``
    (indexes, in the order given; the two must not share a pair), under the repeat rules (module docstring), both
    sides shuffled with ``rng``. :class:`PoolTooSmall` when either runs out."""
    g = len(gold_idx)
    gold_en = Repeats([pairs[i][1] for i in gold_idx], near)
    gold_fx = Repeats([pairs[i][0] for i in gold_idx], near)
    en = [pairs[i][1] for i in gold_idx]
    en_keys = {key(e) for e in en}
    for i in english_from:
        if len(en) == size:
            break
        e = pairs[i][1]
        if key(e) in en_keys:
            dropped["English distractor repeats an English line"] += 1
        elif gold_en.find(e) or gold_fx.find(e):
            dropped["English distractor repeats a gold text"] += 1
        else:
            en.append(e)
            en_keys.add(key(e))
    en_side = Repeats(en, near)
    fx, fx_en = [pairs[i][0] for i in gold_idx], [pairs[i][1] for i in gold_idx]
    fx_keys = {key(f) for f in fx}
    for i in foreign_from:
        if len(fx) == size:
            break
        f, e = pairs[i]
        if key(f) in fx_keys:
            dropped["foreign distractor repeats a foreign line"] += 1
        elif en_side.find(e):
            dropped["foreign distractor's English repeats an English line"] += 1
        elif en_side.find(f):
            dropped["foreign distractor repeats an English line"] += 1
        else:
            fx.append(f)
            fx_en.append(e)
            fx_keys.add(key(f))
    if len(en) < size or len(fx) < size:
        raise PoolTooSmall(f"{len(pairs)} pairs filled {len(fx)} foreign and {len(en)} English lines of {size}")
    ps, pt = rng.permutation(size), rng.permutation(size)
    new_s, new_t = np.argsort(ps), np.argsort(pt)  # new position of each line
    gold = {(int(new_s[i]) + 1, int(new_t[i]) + 1) for i in range(g)}
    return Task([fx[i] for i in ps], [en[i] for i in pt], gold, dropped, [fx_en[i] for i in ps])
