"""The digits rule on real pairs: good pairs it rejects, misaligned pairs it catches, pairs/s.

    python tools/bench_digits.py [--pairs 20000] [--seed 0]

For each language of ../shared/data/train (English with de, fr, es, cs, ru, zh, tr, ar; every corpus
but debian_iso_codes, which holds names, not sentences): --pairs pairs drawn at random; those with a
digit on either side are the good pairs; the same pairs with their foreign sides shuffled are the
misaligned ones. Each rule is timed over both sets. "previous" is the rule before
bitextmine/filtering/numbers.py (the multisets of digit strings must be equal), written out here.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import time

from bitextmine.evaluation.devdata import LANGS, english_pairs
from bitextmine.filtering.numbers import numbers_agree

TRAIN = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "train")
_DIGITS = re.compile(r"\d+")


def previous(src: str, tgt: str) -> bool:
    """The previous rule: equal multisets of digit strings (leading zeros dropped)."""
    return sorted(str(int(n)) for n in _DIGITS.findall(src)) == sorted(str(int(n)) for n in _DIGITS.findall(tgt))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=20_000)
    ap.add_argument("--train", default=TRAIN, help="the training corpora (../shared/data/train)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print("| lang | good pairs with digits | previous: good rejected | previous: misaligned caught "
          "| now: good rejected | now: misaligned caught | pairs/s previous | pairs/s now |")
    print("|---" * 8 + "|")
    total = [0] * 5
    for lang in LANGS:
        rng = random.Random(args.seed)
        good = [p for p in rng.sample(english_pairs(args.train, lang), args.pairs) if _DIGITS.search(p[0] + p[1])]
        foreign = [x for _, x in good]
        rng.shuffle(foreign)
        wrong = [(e, x) for (e, _), x in zip(good, foreign)]
        row, speed = [len(good)], []
        for rule in (previous, numbers_agree):
            t = time.perf_counter()
            row += [sum(not rule(*p) for p in good), sum(not rule(*p) for p in wrong)]
            speed.append(2 * len(good) / (time.perf_counter() - t))
        n = row[0]
        print(f"| {lang} | {n:,} | " + " | ".join(f"{v:,} ({v / n:.1%})" for v in row[1:])
              + f" | {speed[0]:,.0f} | {speed[1]:,.0f} |")
        total = [a + b for a, b in zip(total, row)]
    n = total[0]
    print(f"| all | {n:,} | " + " | ".join(f"{v:,} ({v / n:.1%})" for v in total[1:]) + " | | |")


if __name__ == "__main__":
    main()
