"""`bitextmine filter` with declared languages on real pairs with shuffled pairs mixed in: good pairs kept, shuffled
pairs kept, and the rules that rejected the good ones.

    python tools/bench_filter_mix.py [--langs de fr ...] [--seed 0]

Per language: *manuals*, 2,000 random pairs of train/debian_docs (technical prose, never trained on) of the half
whose English key hashes odd (``hashlib.md5(key(English)).digest()[0] % 2 == 1``), with 600 shuffled pairs made
from other pairs of that half (each foreign line with the English line of another pair); *Tatoeba*, the 1,000
pairs of Tatoeba v1 with 500 shuffled pairs made from them. The mixture is shuffled and filtered in this process
(:func:`bitextmine.filtering.pipeline.filter_tsv`) with every setting at its default.
"""

from __future__ import annotations

import argparse
import collections
import io
import os
import random
import tempfile

from bitextmine.evaluation.devdata import manuals_half
from bitextmine.evaluation.sparse_tasks import ISO3, LANGS

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")


def tatoeba(lang: str, data: str) -> list[tuple[str, str]]:
    base = os.path.join(data, "dev", "tatoeba", "v1", f"tatoeba.{ISO3[lang]}-eng")
    with open(f"{base}.{ISO3[lang]}", encoding="utf-8") as a, open(f"{base}.eng", encoding="utf-8") as b:
        return [(x.rstrip("\n"), y.rstrip("\n")) for x, y in zip(a, b)]


def mixture(pairs: list, good: int, bad: int, rng: random.Random) -> list[tuple[str, str, bool]]:
    """``good`` pairs drawn from ``pairs`` and ``bad`` shuffled ones (foreign lines of pairs not drawn as good,
    where there are enough, with the English line of the next), shuffled: (foreign, English, good or not)."""
    order = rng.sample(range(len(pairs)), len(pairs))
    kept = order[:good]
    rest = order[good:good + bad] if len(order) >= good + bad + 1 else rng.sample(kept, bad)
    shuffled = [(pairs[i][0], pairs[j][1], False) for i, j in zip(rest, rest[1:] + rest[:1])]
    out = [(pairs[i][0], pairs[i][1], True) for i in kept] + shuffled
    rng.shuffle(out)
    return out


def run(rows: list, lang: str, model) -> tuple[int, int, collections.Counter]:
    """(good kept, shuffled kept, the reasons of the good pairs rejected) of filter on ``rows``."""
    from bitextmine.config import FilterConfig
    from bitextmine.filtering.pipeline import filter_tsv

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "in.tsv")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(f"{a}\t{b}\n" for a, b, _ in rows)
        out, rejects = io.BytesIO(), io.BytesIO()
        filter_tsv(path, out, model=model, config=FilterConfig(), rejects=rejects, src_lang=lang, tgt_lang="en")
    kept = {"\t".join(line.split("\t")[:2]) for line in out.getvalue().decode("utf-8").splitlines()}
    why = {"\t".join(line.split("\t")[:2]): line.split("\t")[-1]
           for line in rejects.getvalue().decode("utf-8").splitlines()}
    good = sum(g and f"{a}\t{b}" in kept for a, b, g in rows)
    bad = sum(not g and f"{a}\t{b}" in kept for a, b, g in rows)
    lost = collections.Counter(why.get(f"{a}\t{b}", "?") for a, b, g in rows if g and f"{a}\t{b}" not in kept)
    return good, bad, lost


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--langs", nargs="+", default=LANGS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=DATA)
    args = ap.parse_args()
    from bitextmine.loading import load_model

    model = load_model()
    print("| language | tasks | good kept | shuffled kept | good pairs lost to |")
    print("|---|---|---|---|---|")
    for lang in args.langs:
        for name, pairs, good, bad in (("manuals", manuals_half(args.data, lang), 2000, 600),
                                       ("Tatoeba", tatoeba(lang, args.data), 1000, 500)):
            if len(pairs) < good:
                print(f"| {lang} | {name} | - | - | {len(pairs):,} pairs: too few |")
                continue
            rows = mixture(pairs, good, bad, random.Random(args.seed))
            g, b, why = run(rows, lang, model)
            lost = ", ".join(f"{k} {v}" for k, v in why.most_common())
            print(f"| {lang} | {name} | {g / good:.1%} | {b / bad:.2%} | {lost or '-'} |", flush=True)


if __name__ == "__main__":
    main()
