"""bitextmine's miner against the usual approach (tools/baseline_mine.py) on the same embeddings.

    python tools/bench_mine.py --work DIR --n 200000 --index flat     # exact search on both sides
    python tools/bench_mine.py --work DIR --n 1000000 --index ivf --no-baseline --recall-check 2000

Embeddings: real sentences from ../shared/data/train (all 8 language pairs, pairs shuffled with a
seed): the first n distinct foreign sentences against n distinct English sentences taken from halfway
through the sources on (wrapping around; if there are fewer than n distinct English sentences, the
rest are foreign sentences not on the source side), so about half of the sources have their
translation among the targets; encoded with the bundled model (float32, cached
in DIR). Each miner runs in its own process; the table gives wall time (loading the embeddings,
search, scoring, selection, writing pairs) and peak resident memory (ru_maxrss) of that process, and
how many pairs the two share.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np

from bitextmine.bench import mining_inputs

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "..", "..", "shared", "data", "train")


def run_ours(src: str, tgt: str, out: str, index: str, nprobe: int, recall_check: int) -> None:
    from bitextmine.config import MineConfig
    from bitextmine.mining.mine import mine_embeddings

    t = time.perf_counter()
    x = np.load(src, mmap_mode="r")
    y = np.load(tgt, mmap_mode="r")
    p = mine_embeddings(x, y, config=MineConfig(threshold=0.0, min_cosine=-1.0, min_z=0.0, index=index, nprobe=nprobe, device="cpu",
                                                recall_check=recall_check))
    with open(out, "w") as f:
        for s, a, b in zip(p.score, p.src, p.tgt):
            f.write(f"{s:.6f}\t{a}\t{b}\n")
    print(f"{len(p)} pairs in {time.perf_counter() - t:.1f}s; {p.info}", flush=True)


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """(seconds, peak RSS in GB, stdout) of a child process."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({status})")
    return time.perf_counter() - t, usage.ru_maxrss / 1e6, out.strip()


def pairs_of(path: str) -> set[tuple[int, int]]:
    with open(path) as f:
        return {(int(a), int(b)) for _, a, b in (line.rstrip("\n").split("\t") for line in f)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True)
    ap.add_argument("--train", default=TRAIN, help="the training corpora (../shared/data/train)")
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--index", choices=["flat", "ivf"], default="flat")
    ap.add_argument("--nprobe", type=int, default=32)
    ap.add_argument("--recall-check", type=int, default=0)
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--run-ours", nargs=3, metavar=("SRC", "TGT", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.run_ours:
        run_ours(*args.run_ours, args.index, args.nprobe, args.recall_check)
        return
    os.makedirs(args.work, exist_ok=True)
    src, tgt = mining_inputs(args.train, args.work, args.n)
    ours_out = os.path.join(args.work, f"ours.{args.n}.{args.index}.tsv")
    rows = []
    t, mem, msg = timed([sys.executable, __file__, "--work", args.work, "--index", args.index, "--nprobe",
                         str(args.nprobe), "--recall-check", str(args.recall_check), "--run-ours", src, tgt, ours_out])
    rows.append(("bitextmine", t, mem, msg))
    if not args.no_baseline:
        base_out = os.path.join(args.work, f"baseline.{args.n}.{args.index}.tsv")
        t, mem, msg = timed([sys.executable, os.path.join(HERE, "baseline_mine.py"), src, tgt, base_out, "--index",
                             args.index, "--nprobe", str(args.nprobe)])
        rows.append(("baseline (LASER-style)", t, mem, msg))
    dim = np.load(src, mmap_mode="r").shape[1]
    print(f"{args.n:,} x {args.n:,} sentences, dim {dim}, index {args.index}"
          + (f" (nprobe {args.nprobe})" if args.index == "ivf" else "") + f", {os.cpu_count()} cores")
    print("| miner | seconds | peak memory GB | result |")
    print("|---|---|---|---|")
    for name, t, mem, msg in rows:
        print(f"| {name} | {t:.1f} | {mem:.2f} | {msg} |")
    if len(rows) == 2:
        a, b = pairs_of(ours_out), pairs_of(base_out)
        print(f"\ntime ratio baseline/bitextmine {rows[1][1] / rows[0][1]:.2f}x, memory ratio bitextmine/baseline "
              f"{rows[0][2] / rows[1][2]:.2f}; pairs: {len(a)} vs {len(b)}, {len(a & b)} shared")


if __name__ == "__main__":
    main()
