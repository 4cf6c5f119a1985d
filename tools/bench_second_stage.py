"""What the second stage adds to `mine`'s end-to-end time, on real sentences of one language pair.

    python tools/bench_second_stage.py --lang fr --lines 200000 [--share 0.05] [--precision bf16 fp32]

Sides: ``--lines`` French (or ``--lang``) and English lines from the training corpora of ../shared/data/train
(shuffled with a seed): a ``--share`` of them translations of each other, the rest the foreign side of some
pairs and the English side of others. Each run mines the two text files with the bundled model (or ``--model``)
in its own process, with the second stage on and off (``--no-second-stage``: the language's calibrated floors),
for each ``--precision`` of the exact search, and the table gives the wall time of the whole command (reading,
encoding, search, selection, writing), the pairs printed, and the ratio of the times. Run it alone: it times.
"""

from __future__ import annotations

import argparse
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


def sides(lang: str, lines: int, share: float, seed: int, folder: str) -> tuple[str, str]:
    """Write the two sides (module docstring) to ``folder``; returns their paths."""
    from train_default import DATA, corpora, english_first

    pairs = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in corpora(os.path.join(DATA, "train"), tmp):
            if spec.group_name() == lang:
                a, b = spec.read()
                pairs += [(y, x) if english_first(spec) else (x, y) for x, y in zip(a, b)]
    order = np.random.default_rng(seed).permutation(len(pairs))
    g = int(share * lines)
    if len(pairs) < 2 * lines - g:
        raise SystemExit(f"{lang}: {len(pairs):,} pairs; {2 * lines - g:,} needed")
    fx = [pairs[i][0] for i in order[:g]] + [pairs[i][0] for i in order[g:lines]]
    en = [pairs[i][1] for i in order[:g]] + [pairs[i][1] for i in order[lines:2 * lines - g]]
    paths = os.path.join(folder, f"src.{lang}"), os.path.join(folder, "tgt.en")
    for path, side in zip(paths, (fx, en)):
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(" ".join(t.split()) + "\n" for t in side)
    return paths


def timed(cmd: list[str]) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if run.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{run.stderr[-2000:]}")
    return seconds, len(run.stdout.splitlines()), run.stderr.strip().splitlines()[0] if run.stderr.strip() else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lang", default="fr")
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--share", type=float, default=0.05)
    ap.add_argument("--precision", nargs="+", default=["bf16", "fp32"])
    ap.add_argument("--model", default=None)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with open("/proc/cpuinfo") as f:
        flags = sorted(set(re.findall(r"\b(avx512_bf16|amx_bf16|avx2)\b", f.read())))
    with tempfile.TemporaryDirectory(prefix="bench-second-stage-") as tmp:
        src, tgt = sides(args.lang, args.lines, args.share, args.seed, tmp)
        base = [sys.executable, "-m", "bitextmine", "mine", src, tgt, "--src-lang", args.lang, "--tgt-lang", "en"]
        base += ["--model", args.model] if args.model else []
        print(f"{args.lines:,} x {args.lines:,} lines, {args.lang}-en, {args.share:.0%} translations; CPU flags: "
              f"{' '.join(flags)}; {os.cpu_count()} cores")
        print("| precision | second stage | seconds | pairs | time with / without |")
        print("|---|---|---|---|---|")
        for precision in args.precision:
            times = {}
            for on in (False, True):
                cmd = base + ["--precision", precision] + ([] if on else ["--no-second-stage"])
                times[on], pairs, _ = timed(cmd)
                ratio = f"{times[True] / times[False]:.2f}" if on else ""
                print(f"| {precision} | {'on' if on else 'off'} | {times[on]:.1f} | {pairs:,} | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
