"""What the second stage adds to `mine`'s end-to-end time, on real sentences of one language pair.

    python tools/bench_second_stage.py --lang fr --lines 200000 [--share 0.05] [--precision bf16 fp32]
    python tools/bench_second_stage.py --lang fr --lines 200000 --write-sides gpu_data/fr200k   # where ../shared is
    python tools/bench_second_stage.py --lang fr --lines 200000 --sides gpu_data/fr200k --device cuda  # elsewhere
    python tools/bench_second_stage.py --lang fr --lines 1000000 --join 2                        # more lines than pairs
    python tools/bench_second_stage.py --lang fr --write-pairs gpu_data/fr.pairs.xz --max-pairs 150000  # ../shared
    python tools/bench_second_stage.py --lang fr --lines 1000000 --join 2 --pairs gpu_data/fr.pairs.xz --device cuda

Sides: ``--lines`` French (or ``--lang``) and English lines from the training corpora of ../shared/data/train
(shuffled with a seed): a ``--share`` of them translations of each other, the rest the foreign side of some
pairs and the English side of others. Each run mines the two text files with the bundled model (or ``--model``)
in its own process (on ``--device``), with the second stage on and off (``--no-second-stage``: the language's calibrated floors),
for each ``--precision`` of the exact search, and the table gives the wall time of the whole command (reading,
encoding, search, selection, writing), the pairs printed, how many of them are the planted translations (line i
of one side with line i of the other; the other lines come from the same corpora, so some unplanted pairs are
translations too), and the ratio of the times. ``--join N`` makes each line of N pairs' sentences joined by a space
(drawn with the seed: the planted lines from one third of the pairs, each side's other lines from a third of its own,
every line once), so that a side can have more lines than the language has pairs (1M x 1M needs about 2M pairs
otherwise); the sentences are real, their lengths N times. ``--pairs`` reads the pairs from a file that
``--write-pairs`` wrote (foreign TAB English a line, xz), for a machine without ../shared/data. Above the stage's
``max_lines`` the stage is given reference margins (:mod:`bitextmine.mining.reference`: one more search of the
candidates' lines among max_lines rows a side);
``--max-lines N`` raises the limit (a copy of the model), so that the stage judges the run's own margins. Run it
alone: it times.
"""

from __future__ import annotations

import argparse
import lzma
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))


def language_pairs(lang: str, path: str = "") -> list[tuple[str, str]]:
    """(foreign, English) pairs of ``lang``'s training corpora in ../shared/data/train, or of a file from
    --write-pairs."""
    if path:
        with lzma.open(path, "rt", encoding="utf-8") as f:
            return [tuple(line.rstrip("\n").split("\t")) for line in f]
    from train_default import DATA, corpora, english_first

    pairs = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in corpora(os.path.join(DATA, "train"), tmp):
            if spec.group_name() == lang:
                a, b = spec.read()
                pairs += [(y, x) if english_first(spec) else (x, y) for x, y in zip(a, b)]
    return pairs


def write_pairs(pairs: list[tuple[str, str]], path: str, most: int, seed: int) -> None:
    """Up to ``most`` of ``pairs`` (a seeded sample, whitespace runs made one space), foreign TAB English, xz."""
    keep = np.sort(np.random.default_rng(seed).permutation(len(pairs))[:most or len(pairs)])
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with lzma.open(path, "wt", encoding="utf-8") as f:
        f.writelines(f"{' '.join(pairs[i][0].split())}\t{' '.join(pairs[i][1].split())}\n" for i in keep.tolist())


def joined(pool: np.ndarray, count: int, join: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """``count`` distinct tuples of ``join`` indices drawn from ``pool`` int (p,)."""
    if len(pool) ** join < 2 * count:
        raise SystemExit(f"{len(pool):,} pairs joined {join} at a time cannot give {count:,} distinct lines")
    seen: dict = {}
    while len(seen) < count:
        for combo in map(tuple, pool[rng.integers(0, len(pool), (count - len(seen), join))].tolist()):
            seen.setdefault(combo, None)
    return list(seen)


def line_orders(n_pairs: int, lines: int, g: int, join: int, rng: np.random.Generator) -> tuple[list, list]:
    """(foreign side, English side): each line a tuple of ``join`` pair indices; line i < g of both sides the same
    tuple (the planted translations), no pair in two lines' tuples of different sides otherwise."""
    order = rng.permutation(n_pairs)
    if join == 1:
        if n_pairs < 2 * lines - g:
            raise SystemExit(f"{n_pairs:,} pairs; {2 * lines - g:,} needed (or --join 2)")
        fx = [(i,) for i in order[:lines].tolist()]
        return fx, fx[:g] + [(i,) for i in order[lines:2 * lines - g].tolist()]
    third = n_pairs // 3
    planted = joined(order[:third], g, join, rng)
    return (planted + joined(order[third:2 * third], lines - g, join, rng),
            planted + joined(order[2 * third:3 * third], lines - g, join, rng))


def sides(lang: str, lines: int, share: float, seed: int, folder: str, join: int = 1, pairs_file: str = ""
          ) -> tuple[str, str]:
    """Write the two sides (module docstring) to ``folder``; returns their paths."""
    pairs = language_pairs(lang, pairs_file)
    fx, en = line_orders(len(pairs), lines, int(share * lines), join, np.random.default_rng(seed))
    paths = side_paths(folder, lang)
    os.makedirs(folder, exist_ok=True)
    for path, side, k in zip(paths, (fx, en), (0, 1)):
        with lzma.open(path, "wt", encoding="utf-8") as f:
            f.writelines(" ".join(" ".join(pairs[i][k].split()) for i in combo) + "\n" for combo in side)
    return paths


def side_paths(folder: str, lang: str) -> tuple[str, str]:
    return os.path.join(folder, f"src.{lang}.xz"), os.path.join(folder, "tgt.en.xz")


def timed(cmd: list[str], planted: int) -> tuple[float, int, int, str]:
    """(seconds, pairs printed, how many of them are planted translations (line i with line i, i <= planted),
    the settings line) of one `mine --ids` command."""
    t0 = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if run.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{run.stderr[-2000:]}")
    rows = [line.split("\t") for line in run.stdout.splitlines()]
    hits = sum(1 for r in rows if is_planted(r[-2], r[-1], planted))
    return seconds, len(rows), hits, run.stderr.strip().splitlines()[0] if run.stderr.strip() else ""


def is_planted(src_ids: str, tgt_ids: str, planted: int) -> bool:
    """Whether a printed pair (its ``--ids`` columns: every line number of the text on each side, "1,5") is a planted
    translation: line i with line i, i <= planted. A text that repeats elsewhere on its side carries several line
    numbers; comparing the columns as strings missed those (16.7 % of the planted pairs of the fr 200,000-line sides)."""
    tgt = {int(t) for t in tgt_ids.split(",")}
    return any(int(s) <= planted and int(s) in tgt for s in src_ids.split(","))


def raised(model_dir: str | None, max_lines: int, tmp: str) -> str:
    """A copy of the model (default: the bundled one) in ``tmp`` whose second stage applies up to ``max_lines``."""
    import json
    import shutil

    from bitextmine.model import default_model_dir

    out = os.path.join(tmp, "model")
    shutil.copytree(model_dir or default_model_dir(), out)
    path = os.path.join(out, "second_stage", "second_stage.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    for lang in data["languages"].values():
        lang["max_lines"] = max_lines
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lang", default="fr")
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--share", type=float, default=0.05)
    ap.add_argument("--precision", nargs="+", default=["bf16", "fp32"])
    ap.add_argument("--model", default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="auto", help="mine's --device")
    ap.add_argument("--write-sides", default="", help="write the two sides (xz) into this folder and stop")
    ap.add_argument("--sides", default="", help="a folder from --write-sides (same --lang, --lines, --share) instead "
                                                "of ../shared/data")
    ap.add_argument("--join", type=int, default=1, help="pairs joined into each line (module docstring)")
    ap.add_argument("--pairs", default="",
                    help="read the pairs from this file (--write-pairs) instead of ../shared/data")
    ap.add_argument("--write-pairs", default="", help="write the language's pairs (xz) to this file and stop")
    ap.add_argument("--max-pairs", type=int, default=0, help="with --write-pairs: a seeded sample of this many")
    ap.add_argument("--max-lines", type=int, default=0,
                    help="a copy of the model with its max_lines raised to this: the stage judges the run's own margins "
                         "up to this many lines a side, without reference margins")
    args = ap.parse_args()
    with open("/proc/cpuinfo") as f:
        flags = sorted(set(re.findall(r"\b(avx512_bf16|amx_bf16|avx2)\b", f.read())))
    if args.write_pairs:
        write_pairs(language_pairs(args.lang), args.write_pairs, args.max_pairs, args.seed)
        return
    made = dict(join=args.join, pairs_file=args.pairs)
    if args.write_sides:
        sides(args.lang, args.lines, args.share, args.seed, args.write_sides, **made)
        return
    with tempfile.TemporaryDirectory(prefix="bench-second-stage-") as tmp:
        src, tgt = side_paths(args.sides, args.lang) if args.sides else sides(args.lang, args.lines, args.share,
                                                                              args.seed, tmp, **made)
        model = raised(args.model, args.max_lines, tmp) if args.max_lines else args.model
        base = [sys.executable, "-m", "bitextmine", "mine", src, tgt, "--src-lang", args.lang, "--tgt-lang", "en",
                "--ids", "--device", args.device]
        base += ["--model", model] if model else []
        joins = f" ({args.join} pairs a line)" if args.join > 1 else ""
        print(f"{args.lines:,} x {args.lines:,} lines{joins}, {args.lang}-en, {args.share:.0%} translations; "
              f"CPU flags: {' '.join(flags)}; {os.cpu_count()} cores; --device {args.device}")
        print("| precision | second stage | seconds | pairs | planted translations among them | time with / without |")
        print("|---|---|---|---|---|---|")
        for precision in args.precision:
            times = {}
            for on in (False, True):
                cmd = base + ["--precision", precision] + ([] if on else ["--no-second-stage"])
                times[on], pairs, planted, settings = timed(cmd, int(args.share * args.lines))
                ratio = f"{times[True] / times[False]:.2f}" if on else ""
                print(f"| {precision} | {'on' if on else 'off'} | {times[on]:.1f} | {pairs:,} | {planted:,} | {ratio} |",
                      flush=True)
                print(f"  {settings}", flush=True)


if __name__ == "__main__":
    main()
