"""Mining from Parquet shards against mining the same lines from text files.

    python tools/bench_parquet.py --work DIR --n 20000
    python tools/bench_parquet.py --work DIR --n 1000000 --shard-rows 100000 --row-group 20000 --chunk-lines 250000

Lines: real sentences from ../shared/data/train (the English-German pairs of every corpus that has
them, in file order, repeated when there are fewer than n), the first n German lines against n English
lines rotated by n/2 (about half the sources have their translation among the targets). Each side is
written as a text file and as Parquet shards (--shard-rows rows per file, --row-group rows per row group;
column "text"). Each run is `bitextmine mine` in its own process with the bundled model, the same
settings both ways (--chunk-lines, --engine); the table gives wall time, peak resident memory
(ru_maxrss of the child) and whether the pair outputs are byte-identical. --repeat N times each run N
times and reports the fastest.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DATA = os.path.join(ROOT, "..", "shared", "data", "train")


def sentences(n: int) -> tuple[list[str], list[str]]:
    """n German and n English lines (aligned before rotation) from the training data's en-de files."""
    from bitextmine.corpus import read_parallel

    de, en = [], []
    for path in sorted(glob.glob(os.path.join(DATA, "*", "en-de.de*"))):
        other = path.replace("en-de.de", "en-de.en")
        if os.path.exists(other) and not path.endswith("_in_any_tatoeba_eval.gz"):
            d, e = read_parallel(path, other)
            de += d
            en += e
    if not de:
        raise SystemExit(f"no en-de files under {DATA}")
    while len(de) < n:
        de, en = de + de, en + en
    de, en = de[:n], en[:n]
    return de, en[n // 2:] + en[:n // 2]


def write_side(work: str, name: str, lines: list[str], shard_rows: int, row_group: int) -> tuple[str, str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    txt = os.path.join(work, f"{name}.txt")
    with open(txt, "w", encoding="utf-8") as f:
        f.writelines(s.replace("\n", " ") + "\n" for s in lines)
    folder = os.path.join(work, f"{name}_parquet")
    os.makedirs(folder, exist_ok=True)
    for k, a in enumerate(range(0, len(lines), shard_rows)):
        pq.write_table(pa.table({"text": [s.replace("\n", " ") for s in lines[a:a + shard_rows]]}),
                       os.path.join(folder, f"part-{k:05d}.parquet"), row_group_size=row_group)
    return txt, folder


def run(args: list[str], out: str) -> tuple[float, float]:
    """(seconds, peak resident MiB) of one `bitextmine mine` child process."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t = time.perf_counter()
    pid = subprocess.Popen([sys.executable, "-m", "bitextmine", "mine", *args, "-o", out, "-q"], env=env).pid
    _, status, usage = os.wait4(pid, 0)
    if status:
        raise SystemExit(f"bitextmine mine {' '.join(args)} failed ({status})")
    return time.perf_counter() - t, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, help="folder for the inputs and outputs")
    ap.add_argument("--n", type=int, default=20000, help="lines per side")
    ap.add_argument("--shard-rows", type=int, default=100_000, help="rows per Parquet file")
    ap.add_argument("--row-group", type=int, default=20_000, help="rows per Parquet row group")
    ap.add_argument("--chunk-lines", type=int, default=250_000, help="mine --chunk-lines")
    ap.add_argument("--engine", default="local", help="mine --engine")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each; the fastest is reported")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    de, en = sentences(a.n)
    (de_txt, de_pq), (en_txt, en_pq) = (write_side(a.work, "de", de, a.shard_rows, a.row_group),
                                        write_side(a.work, "en", en, a.shard_rows, a.row_group))
    common = ["--chunk-lines", str(a.chunk_lines), "--engine", a.engine]
    rows = []
    for name, (s, t) in (("text", (de_txt, en_txt)), ("parquet", (de_pq, en_pq))):
        out = os.path.join(a.work, f"pairs.{name}.tsv")
        best = min((run([s, t, *common], out) for _ in range(a.repeat)), key=lambda r: r[0])
        rows.append((name, *best, out))
    same = open(rows[0][3], "rb").read() == open(rows[1][3], "rb").read()
    pairs = open(rows[0][3], "rb").read().count(b"\n")
    print(f"{a.n:,} x {a.n:,} lines; Parquet: {a.shard_rows:,} rows per file, row groups of {a.row_group:,}; "
          f"--chunk-lines {a.chunk_lines:,} --engine {a.engine}; {os.cpu_count()} CPUs; best of {a.repeat}")
    print(f"{'input':<8} {'seconds':>9} {'peak MiB':>9} {'vs text':>8}")
    for name, sec, mib, _ in rows:
        print(f"{name:<8} {sec:9.1f} {mib:9.0f} {sec / rows[0][1]:8.3f}")
    print(f"pairs: {pairs:,}; byte-identical outputs: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
