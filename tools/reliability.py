"""How far the second stage's score is from a probability of translation: reliability bins and expected calibration
error (ECE) of the score the stage gives every candidate it judges, on dev tasks of several kinds, shares and sizes.

    python tools/reliability.py [--model DIR] [--kinds pool manuals news] [--sizes 1000 10000] \\
        [--shares 0.01 0.05 0.1 0.5] [--draws 2] [--langs ...] [--json out.json] [--svg plot.svg]
    python tools/reliability.py --from-json out.json --svg plot.svg

Kinds of task (each built by the project's task builder, :mod:`bitextmine.judge.tasks`: same-domain distractors,
none a near repeat of a line it could translate):
- pool: tools/sparse_tasks.py's pool, pairs held apart from the bundled model's training (.bench/holdout) then
  Tatoeba v1; a size above what the pool gives takes its distractors from the training corpora;
- manuals: train/debian_docs (technical prose, never trained on), the pairs whose English key hashes odd
  (``hashlib.md5(key(English)).digest()[0] % 2 == 1``; the other half is the one the fail safe's figures were
  chosen on), of the size asked for or the largest the pool fills (Turkish: 250 lines);
- news: tools/sparse_tasks.py --news (de, fr, cs, ru, zh): held-apart news pairs among the sentences of their
  articles, 1,500 lines a side at every share but 50 %.
Each task is mined as `mine` mines it with the stage (:func:`bitextmine.evaluation.stage_calibration.task_cells`:
every candidate from the stage's margin floor up, its score adjusted to the share of translations among them).
ECE: over 10 equal bins of the score, the mean over candidates of |the bin's mean score - its share of
translations|.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from bitextmine.evaluation.devdata import manuals_half
from bitextmine.evaluation.sparse_tasks import LANGS, build_context_task, draw_tasks, read_news, read_pairs
from bitextmine.evaluation.stage_calibration import task_cells
from bitextmine.judge.tasks import PoolTooSmall, build_task, clean_pool

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data")
HOLDOUT = os.path.join(HERE, "..", ".bench", "holdout")
BINS = 10
NEWS_LANGS = ("de", "fr", "cs", "ru", "zh")


def ece(p: np.ndarray, y: np.ndarray, bins: int = BINS) -> float:
    """Expected calibration error of scores p float (n,) against labels y bool (n,)."""
    idx = np.minimum((p * bins).astype(int), bins - 1)
    return float(sum((idx == b).sum() / len(p) * abs(p[idx == b].mean() - y[idx == b].mean())
                     for b in range(bins) if (idx == b).any()))


def manuals_pool(lang: str, data: str) -> list[tuple[str, str]]:
    """The (foreign, English) pairs of train/debian_docs whose English key hashes odd, cleaned."""
    return clean_pool([(x.strip(), e.strip()) for x, e in manuals_half(data, lang)])[0]


def manuals_tasks(pool: list, size: int, share: float, seeds: list) -> list:
    """One task per seed of ``size`` lines a side, or of the largest size (in steps of a tenth) the pool fills
    for every seed."""
    lines = min(size, int(len(pool) / (2 - share)))
    while lines >= 50:
        try:
            return [build_task(pool, lines, share, np.random.default_rng(s)) for s in seeds]
        except PoolTooSmall:
            lines = int(lines * 0.9)
    return []


def tasks_for(kind: str, lang: str, share: float, size: str, draws: int, seed: int, data: str) -> list:
    """The tasks of one cell (none where the data cannot give them)."""
    seeds = [[seed, sum(map(ord, lang)), int(share * 1000), d] for d in range(draws)]
    try:
        if kind == "pool":
            pool = clean_pool(read_pairs(lang, HOLDOUT, os.path.join(data, "dev", "tatoeba", "v1")))[0]
            return draw_tasks(pool, lang, size, share, seeds, train_dir=os.path.join(data, "train"))[1]
        if kind == "manuals":
            return manuals_tasks(manuals_pool(lang, data), int(size), share, seeds)
        if lang not in NEWS_LANGS or share >= 0.5:
            return []
        pool = clean_pool(read_pairs(lang, HOLDOUT, os.path.join(data, "dev", "tatoeba", "v1")))[0]
        articles = read_news(lang, pool, os.path.join(data, "train", "wmt_newstest"))
        return [build_context_task(*articles, 1500, share, np.random.default_rng(s)) for s in seeds]
    except PoolTooSmall:
        return []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="model directory (default: the bundled model)")
    ap.add_argument("--kinds", nargs="+", default=["pool", "manuals", "news"])
    ap.add_argument("--langs", nargs="+", default=LANGS)
    ap.add_argument("--shares", type=float, nargs="+", default=[0.01, 0.05, 0.1, 0.5])
    ap.add_argument("--sizes", nargs="+", default=["1000", "10000"], help="lines a side (news: 1,500 always)")
    ap.add_argument("--draws", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--json", default="", help="also write every cell's scores and labels' bins here")
    ap.add_argument("--svg", default="", help="also draw the reliability diagram of each kind of task here")
    ap.add_argument("--from-json", default="", metavar="FILE", help="draw --svg from a --json file instead")
    args = ap.parse_args()
    if args.from_json:
        with open(args.from_json, encoding="utf-8") as f:
            found = json.load(f)
        with open(args.svg, "w", encoding="utf-8") as f:
            f.write(svg(pooled_bins(found)))
        return
    from bitextmine.loading import load_model
    from bitextmine.mining.calibrated import settings_for

    model = load_model(args.model)
    stage = model.second_stage
    cells = {}
    for kind in args.kinds:
        for size in (args.sizes if kind != "news" else ["1500"]):
            for share in args.shares:
                for lang in args.langs:
                    floors = settings_for(model.mining, lang, "en")
                    got = [task_cells(t, model, stage, lang, floors)
                           for t in tasks_for(kind, lang, share, size, args.draws, args.seed, args.data)]
                    if got:
                        cells[(kind, size, share, lang)] = (np.concatenate([c["prob"] for c in got]),
                                                            np.concatenate([c["hit"] for c in got]),
                                                            int(np.mean([c["lines"] for c in got])))
                        p, y, n = cells[(kind, size, share, lang)]
                        print(f"{kind} {size} {share} {lang}: {len(p)} candidates, {n} lines, ECE {ece(p, y):.3f}",
                              flush=True)
    report(cells)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({" ".join(map(str, k)): {"lines": n, "ece": ece(p, y), "bins": bins(p, y)}
                       for k, (p, y, n) in cells.items()}, f, indent=1)
    if args.svg:
        found = {" ".join(map(str, k)): {"bins": bins(p, y)} for k, (p, y, _) in cells.items()}
        with open(args.svg, "w", encoding="utf-8") as f:
            f.write(svg(pooled_bins(found)))


def pooled_bins(found: dict) -> dict:
    """{(kind, share): [(mean score, share of translations, candidates)] per bin}, the languages and sizes pooled,
    from --json's {"kind size share lang": {"bins": [[bin, candidates, mean score, share of translations]]}}."""
    sums: dict = {}
    for key, cell in found.items():
        kind, _, share, _ = key.split()
        for b, n, mean, hit in cell["bins"]:
            acc = sums.setdefault((kind, float(share)), {}).setdefault(b, [0, 0.0, 0.0])
            acc[0], acc[1], acc[2] = acc[0] + n, acc[1] + n * mean, acc[2] + n * hit
    return {k: [(s / n, h / n, n) for _, (n, s, h) in sorted(v.items())] for k, v in sorted(sums.items())}


def svg(pooled: dict, side: int = 220, pad: int = 34) -> str:
    """A reliability diagram, one panel a kind of task: each share's bins as a line from mean score (x) to share
    of translations (y), the diagonal where a score would be a probability. SVG text."""
    kinds = sorted({k for k, _ in pooled})
    colours = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e"]
    shares = sorted({s for _, s in pooled})
    width, height = len(kinds) * (side + pad) + pad, side + 2 * pad + 18
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           'font-size="11">', f'<rect width="{width}" height="{height}" fill="white"/>']
    for i, kind in enumerate(kinds):
        x0, y0 = pad + i * (side + pad), pad
        at = lambda u, v: (x0 + u * side, y0 + (1 - v) * side)  # noqa: E731
        out += [f'<rect x="{x0}" y="{y0}" width="{side}" height="{side}" fill="none" stroke="#444"/>',
                f'<line x1="{x0}" y1="{y0 + side}" x2="{x0 + side}" y2="{y0}" stroke="#aaa" stroke-dasharray="4 3"/>',
                f'<text x="{x0 + side / 2}" y="{y0 - 8}" text-anchor="middle" font-weight="bold">{kind}</text>',
                f'<text x="{x0 + side / 2}" y="{y0 + side + 26}" text-anchor="middle">mean score of the bin</text>']
        out += [f'<text x="{x0 + t * side}" y="{y0 + side + 13}" text-anchor="middle">{t:g}</text>'
                f'<text x="{x0 - 4}" y="{y0 + (1 - t) * side + 4}" text-anchor="end">{t:g}</text>'
                for t in (0, 0.5, 1)]
        for j, share in enumerate(shares):
            points = pooled.get((kind, share))
            if points:
                path = " ".join("%.1f,%.1f" % at(m, h) for m, h, _ in points)
                out.append(f'<polyline points="{path}" fill="none" stroke="{colours[j % len(colours)]}" '
                           'stroke-width="1.8"/>')
    legend = " ".join(f'<tspan fill="{colours[j % len(colours)]}">{share:.0%} translated</tspan>'
                      for j, share in enumerate(shares))
    out += [f'<text x="{pad}" y="{height - 6}">share of translations (y) against the score (x); dashed: a '
            f'probability. {legend}</text>', "</svg>\n"]
    return "\n".join(out)


def bins(p: np.ndarray, y: np.ndarray) -> list[list]:
    """[[bin, candidates, mean score, share of translations]] of the bins that hold candidates."""
    idx = np.minimum((p * BINS).astype(int), BINS - 1)
    return [[b, int((idx == b).sum()), float(p[idx == b].mean()), float(y[idx == b].mean())]
            for b in range(BINS) if (idx == b).any()]


def report(cells: dict) -> None:
    """Markdown: ECE per cell (the languages pooled, and the worst language), then the reliability bins of each
    kind and share, the languages and sizes pooled."""
    print("\n| tasks | lines a side | share | candidates | ECE | worst language (ECE) "
          "| score >= 0.5: mean / translations |")
    print("|---|---|---|---|---|---|---|")
    for kind, size, share in sorted({k[:3] for k in cells}, key=lambda k: (k[0], int(k[1]), k[2])):
        mine = {k[3]: v for k, v in cells.items() if k[:3] == (kind, size, share)}
        p, y = np.concatenate([v[0] for v in mine.values()]), np.concatenate([v[1] for v in mine.values()])
        worst = max(mine, key=lambda lang: ece(*mine[lang][:2]))
        hi = p >= 0.5
        print(f"| {kind} | {size} | {share:.0%} | {len(p):,} | {ece(p, y):.3f} | {worst} ({ece(*mine[worst][:2]):.3f}) "
              f"| {p[hi].mean():.2f} / {y[hi].mean():.2f} |")
    print("\n| tasks | share | " + " | ".join(f"{b / BINS:.1f}-{(b + 1) / BINS:.1f}" for b in range(BINS)) + " |")
    print("|---|---|" + "---|" * BINS)
    for kind, share in sorted({(k[0], k[2]) for k in cells}):
        p = np.concatenate([v[0] for k, v in cells.items() if (k[0], k[2]) == (kind, share)])
        y = np.concatenate([v[1] for k, v in cells.items() if (k[0], k[2]) == (kind, share)])
        row = {b: f"{m:.2f} / {t:.2f} ({n:,})" for b, n, m, t in bins(p, y)}
        print(f"| {kind} | {share:.0%} | " + " | ".join(row.get(b, "-") for b in range(BINS)) + " |")


if __name__ == "__main__":
    main()
