"""Speed of `bitextmine filter` on real noisy corpora (the debian_* sets of ../shared/data/train).

    python tools/bench_filter.py [--lines 200000] [--langid-lines 20000]

Builds a TSV of English<TAB>German lines from the debian_* corpora (in their order, up to --lines),
then times, in this process, the library call behind the command (reading, rules, scoring,
writing to /dev/null):
  1. default rules + cosine score (the target: >= 20,000 pairs/s on 2 cores),
  2. default rules + --src-lang en --tgt-lang de (script rule and the identifiers' probabilities:
     --langid probs, the default with declared languages), and the previous default (--langid pair),
  3. as 2 with --langid off (the script rule only),
  4. as 2 with --langid full (langdetect over all its languages) on the first --langid-lines lines,
  5. as 2 with --score margin, with --score prob (the model's second stage; the goal: >= 5,000 pairs/s on 2
     cores), and --score prob with --langid off,
and prints a table with pairs/s and the kept share.
"""

from __future__ import annotations

import argparse
import glob
import os
import tempfile
import time

from bitextmine.config import FilterConfig, RuleConfig
from bitextmine.corpus import read_parallel
from bitextmine.filtering.pipeline import filter_tsv
from bitextmine.loading import load_model

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "train")


def build_tsv(lines: int, lang: str, path: str) -> int:
    rows = []
    for en in sorted(glob.glob(os.path.join(DATA, "debian_*", f"en-{lang}.en.gz"))):
        src, tgt = read_parallel(en, en.replace(".en.gz", f".{lang}.gz"))
        rows += [f"{s}\t{t}" for s, t in zip(src, tgt) if "\t" not in s and "\t" not in t]
    rows = rows[:lines]
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(r + "\n" for r in rows)
    return len(rows)


def run(path: str, model, **kw) -> tuple[float, float, int]:
    with open(os.devnull, "wb") as out:
        t = time.perf_counter()
        st = filter_tsv(path, out, model=model, **kw)
        dt = time.perf_counter() - t
    return st.lines_in / dt, st.kept / max(1, st.lines_in), st.lines_in


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--langid-lines", type=int, default=20_000)
    ap.add_argument("--lang", default="de")
    ap.add_argument("--only-prob", action="store_true", help="time the --score margin and prob rows only")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "noisy.tsv")
    n = build_tsv(args.lines, args.lang, path)
    small = os.path.join(tmp, "noisy.small.tsv")
    with open(path, encoding="utf-8") as f, open(small, "w", encoding="utf-8") as g:
        for _, line in zip(range(args.langid_lines), f):
            g.write(line)
    model = load_model(None)
    run(small, model, config=FilterConfig())  # warm-up
    langs = dict(src_lang="en", tgt_lang=args.lang)
    runs = [
        ("default rules + cosine", lambda: run(path, model, config=FilterConfig())),
        (f"+ --src-lang en --tgt-lang {args.lang} (script rule, --langid probs: the default)",
         lambda: run(path, model, config=FilterConfig(), **langs)),
        (f"+ --src-lang en --tgt-lang {args.lang} --langid pair --min-script 0.5 (the previous default)",
         lambda: run(path, model, config=FilterConfig(), rules=RuleConfig(langid="pair", min_script=0.5), **langs)),
        (f"+ --src-lang en --tgt-lang {args.lang} --langid off (script rule only)",
         lambda: run(path, model, config=FilterConfig(), rules=RuleConfig(langid="off"), **langs)),
        (f"+ --src-lang en --tgt-lang {args.lang} --langid full",
         lambda: run(small, model, config=FilterConfig(), rules=RuleConfig(langid="full"), **langs)),
        ("rules only (--score none)", lambda: run(path, None, config=FilterConfig(score="none"))),
        (f"+ --src-lang en --tgt-lang {args.lang} --score margin",
         lambda: run(path, model, config=FilterConfig(score="margin"), **langs)),
        (f"+ --src-lang en --tgt-lang {args.lang} --score prob (the second stage, blocks of --judge-lines "
         f"{FilterConfig.judge_lines:,} pairs of each {FilterConfig.chunk_lines:,}-line chunk)",
         lambda: run(path, model, config=FilterConfig(score="prob"), **langs)),
        (f"+ --src-lang en --tgt-lang {args.lang} --score prob --langid off (script rule only)",
         lambda: run(path, model, config=FilterConfig(score="prob"), rules=RuleConfig(langid="off"), **langs)),
    ]
    rows = [(name, *thunk()) for name, thunk in (runs[-3:] if args.only_prob else runs)]
    print(f"{n} lines of debian_* en-{args.lang}, {os.cpu_count()} cores")
    print("| run | lines | pairs/s | kept |")
    print("|---|---|---|---|")
    for name, rate, kept, lines in rows:
        print(f"| {name} | {lines:,} | {rate:,.0f} | {100 * kept:.1f} % |")


if __name__ == "__main__":
    main()
