"""Peak memory of `bitextmine mine` as the corpus grows with the chunk size fixed: it should stay flat.

    python tools/bench_memory.py --src xx.txt --tgt en.txt --work DIR --lines 250000 500000 1000000 2000000 \\
        --chunk-lines 250000 -- --index ivf --nprobe 8

For each N, the first N lines of --src and --tgt (plain text, one sentence per line; written to --work)
are mined with the bundled model through a fresh work directory, in this process's engine (or with the
options after `--`, e.g. `--engine ray`). Each run is measured as tools/bench_laser.py measures: wall
seconds, the peak RSS of the largest single process (ru_maxrss) and the peak of the process tree's
summed RSS (sampled every 0.05 s). GB = 10^9 bytes. The table also gives the distinct lines per side
and the chunks per side.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import sys

from bench_laser import GB, measure, ours_env


def prefix(path: str, n: int, out: str) -> int:
    """Write the first n lines of ``path`` to ``out`` (unless done); return the lines written."""
    if not os.path.exists(out):
        with open(path, "rb") as f, open(out + ".tmp", "wb") as g:
            g.writelines(itertools.islice(f, n))
        os.replace(out + ".tmp", out)
    with open(out, "rb") as f:
        return sum(1 for _ in f)


def run(src: str, tgt: str, work: str, chunk_lines: int, extra: list[str]) -> dict:
    wd = os.path.join(work, "w")
    shutil.rmtree(wd, ignore_errors=True)
    cmd = [sys.executable, "-m", "bitextmine", "mine", src, tgt, "--work-dir", wd, "--chunk-lines", str(chunk_lines),
           "-o", os.path.join(work, "pairs.tsv"), *extra]
    r = measure(cmd, log=os.path.join(work, "mine.log"), env=dict(ours_env(), PYTHONUNBUFFERED="1"))
    if r["returncode"] != 0:
        raise SystemExit(f"{' '.join(cmd)} failed; see {os.path.join(work, 'mine.log')}")
    summary = next((t for _, t in reversed(r["lines"]) if " pairs from " in t), "")
    m = re.search(r"\((\d+) x (\d+) distinct", summary)
    r["distinct"] = (int(m.group(1)), int(m.group(2))) if m else None
    r["chunks"] = tuple(sum(f.startswith("rep-") and f.endswith(".npy") for f in os.listdir(os.path.join(wd, s)))
                        for s in ("src", "tgt"))
    shutil.rmtree(wd, ignore_errors=True)
    return r


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", required=True)
    ap.add_argument("--tgt", required=True)
    ap.add_argument("--work", required=True, metavar="DIR")
    ap.add_argument("--lines", type=int, nargs="+", required=True, metavar="N")
    ap.add_argument("--chunk-lines", type=int, default=250_000)
    args = ap.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    os.makedirs(args.work, exist_ok=True)
    rows = []
    for n in args.lines:
        d = os.path.join(args.work, f"n{n}")
        os.makedirs(d, exist_ok=True)
        got = [prefix(p, n, os.path.join(d, f"{s}.txt")) for s, p in (("src", args.src), ("tgt", args.tgt))]
        r = run(os.path.join(d, "src.txt"), os.path.join(d, "tgt.txt"), d, args.chunk_lines, extra)
        rows.append((got, r))
        print(f"{got[0]:,} x {got[1]:,} lines: {r['wall_s']:.1f} s, {r['ru_maxrss_bytes'] / GB:.2f} GB", flush=True)
    print(f"\n--chunk-lines {args.chunk_lines:,}; options: {' '.join(extra) or '(none)'}\n")
    print("| lines per side | distinct (src x tgt) | chunks per side | wall s | peak RSS, largest process GB "
          "| peak RSS, process tree GB |")
    print("|---|---|---|---|---|---|")
    for got, r in rows:
        dist = "{:,} x {:,}".format(*r["distinct"]) if r["distinct"] else "?"
        print(f"| {got[0]:,} x {got[1]:,} | {dist} | {r['chunks'][0]} / {r['chunks'][1]} | {r['wall_s']:,.1f} "
              f"| {r['ru_maxrss_bytes'] / GB:.2f} | {r['peak_tree_rss_bytes'] / GB:.2f} |")


if __name__ == "__main__":
    main()
