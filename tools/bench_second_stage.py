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
import os
import re
import subprocess
import sys
import tempfile
import time

from bitextmine.evaluation.planted import is_planted, raised, read_pairs, side_paths, sides, write_pairs

TRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "train")


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lang", default="fr")
    ap.add_argument("--train", default=TRAIN, help="the training corpora (../shared/data/train)")
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
        write_pairs(read_pairs(args.lang, args.train), args.write_pairs, args.max_pairs, args.seed)
        return
    made = dict(join=args.join, pairs_file=args.pairs, train_dir=args.train)
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
