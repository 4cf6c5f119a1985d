"""GPU figures at scale, each through the CLI end to end, on synthetic aligned text; prints one table.

    python tools/gpu_scale.py --prepare --pairs gpu_data/pairs          # where ../shared/data is: de-en pairs
    python tools/gpu_scale.py --pairs gpu_data/pairs encode --lines 5000000
    python tools/gpu_scale.py --pairs gpu_data/pairs mine --lines 1000000
    python tools/gpu_scale.py --pairs gpu_data/pairs pipeline --lines 10000000 --index ivf --recall-check 2000

The text: German-English pairs from ../shared/data/train (``--prepare``); each synthetic line joins two
pairs' sentences (``a b`` on both sides, pairs drawn with a seeded generator), so a side of millions of
distinct lines keeps real piece statistics. The target side holds the translations of ``--gold`` of the
source lines (shuffled) among lines built from other pairs (sharing no sentence with any source line); the
table gives precision and recall against those translations.

Figures: ``encode`` (sentences/s from a file, start-up included), ``mine`` (encode both sides, then
``mine --src-emb --tgt-emb``: exact search, timed alone), ``pipeline`` (the same with ``--work-dir``,
``--index``, ``--recall-check``). Each line says what it timed.
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "data", "train"))
CORPORA = ("tatoeba_anki", "wmt_newstest", "debian_gettext_apps", "debian_libreoffice_help", "multi30k", "mlqe_pe")


def prepare(out: str) -> None:
    """out.de.gz / out.en.gz: the en-de pairs of CORPORA, one side each, tabs and empty pairs dropped."""
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with gzip.open(out + ".de.gz", "wt", encoding="utf-8") as fd, gzip.open(out + ".en.gz", "wt", encoding="utf-8") as fe:
        for corpus in CORPORA:
            base = os.path.join(SHARED, corpus, "en-de.")
            if not os.path.exists(base + "de.gz"):
                continue
            with gzip.open(base + "de.gz", "rt", encoding="utf-8") as d, gzip.open(base + "en.gz", "rt", encoding="utf-8") as e:
                for a, b in zip(d, e):
                    a, b = a.strip().replace("\t", " "), b.strip().replace("\t", " ")
                    if a and b:
                        fd.write(a + "\n")
                        fe.write(b + "\n")


def read_pairs(prefix: str) -> tuple[list[str], list[str]]:
    sides = []
    for lang in ("de", "en"):
        with gzip.open(f"{prefix}.{lang}.gz", "rt", encoding="utf-8") as f:
            sides.append(f.read().splitlines())
    return sides[0], sides[1]


def synth(prefix: str, lines: int, gold: float, out_dir: str, seed: int = 1) -> tuple[str, str, int]:
    """Write src.txt (German) and tgt.txt (English), ``lines`` each; the target holds the translations of
    ``gold`` x lines source lines, shuffled. Returns (src path, tgt path, gold pairs)."""
    de, en = read_pairs(prefix)
    p = len(de)
    rng = np.random.default_rng(seed)
    # rows 0 .. lines - 1 (the source's) join pairs of one half of the pool, the target's own lines the other
    # half: a target line that translates no source line shares no sentence with one
    perm = rng.permutation(p)
    pool = np.concatenate([rng.choice(perm[: p // 2], (lines, 2)), rng.choice(perm[p // 2 :], (lines, 2))])
    a, b = pool[:, 0], pool[:, 1]
    n_gold = int(gold * lines)
    src_rows = np.arange(lines)
    tgt_rows = np.concatenate([rng.choice(lines, n_gold, replace=False), lines + np.arange(lines - n_gold)])
    rng.shuffle(tgt_rows)
    os.makedirs(out_dir, exist_ok=True)
    paths = (os.path.join(out_dir, "src.txt"), os.path.join(out_dir, "tgt.txt"))
    for path, rows, side in zip(paths, (src_rows, tgt_rows), (de, en)):
        with open(path, "w", encoding="utf-8") as f:
            for s in range(0, len(rows), 100_000):
                r = rows[s : s + 100_000]
                f.write("".join(f"{side[i]} {side[j]}\n" for i, j in zip(a[r], b[r])))
    with open(os.path.join(out_dir, "gold.txt"), "w") as f:  # 1-based src line, tgt line
        pos = np.empty(2 * lines, np.int64)
        pos[tgt_rows] = np.arange(lines)
        hit = np.sort(tgt_rows[tgt_rows < lines])
        f.writelines(f"{i + 1}\t{pos[i] + 1}\n" for i in hit)
    return paths[0], paths[1], n_gold


PROFILE = {"dir": "", "log": ""}


def run(args: list[str], what: str) -> float:
    prof = ["-m", "cProfile", "-o", os.path.join(PROFILE["dir"], what.replace(" ", "_") + ".prof")] if PROFILE["dir"] else []
    start = time.perf_counter()
    if PROFILE["log"]:  # stderr as it comes (progress of a long run survives a kill)
        with open(PROFILE["log"], "a") as log:
            r = subprocess.run([sys.executable, *prof, "-m", "bitextmine", *args], stdout=subprocess.PIPE, stderr=log,
                               text=True)
        r.stderr = open(PROFILE["log"]).read()
    else:
        r = subprocess.run([sys.executable, *prof, "-m", "bitextmine", *args], capture_output=True, text=True)
    sec = time.perf_counter() - start
    if r.returncode:
        sys.stderr.write(r.stderr[-4000:])
        raise SystemExit(f"{what} failed ({r.returncode}): bitextmine {' '.join(args)}")
    tail = [ln for ln in r.stderr.splitlines() if ln.strip()][-3:]
    print(f"# {what}: {sec:.1f} s; stderr tail: {' | '.join(tail)}", file=sys.stderr, flush=True)
    return sec


def recall(out_tsv: str, gold_path: str) -> tuple[int, float, float]:
    """(pairs printed, precision, recall) of --ids output against gold.txt."""
    gold = {tuple(map(int, ln.split())) for ln in open(gold_path)}
    got = set()
    with open(out_tsv, encoding="utf-8") as f:
        for ln in f:
            parts = ln.rstrip("\n").split("\t")
            got.add((int(parts[3].split(",")[0]), int(parts[4].split(",")[0])))
    hit = len(got & gold)
    return len(got), hit / max(1, len(got)), hit / max(1, len(gold))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="?", choices=("encode", "mine", "pipeline"))
    ap.add_argument("--prepare", action="store_true")
    ap.add_argument("--pairs", default="gpu_data/pairs", help="prefix of PREFIX.de.gz / PREFIX.en.gz")
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--gold", type=float, default=0.1)
    ap.add_argument("--work", default="/tmp/gpu_scale")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--index", default="flat")
    ap.add_argument("--recall-check", type=int, default=0)
    ap.add_argument("--chunk-lines", type=int, default=1_000_000)
    ap.add_argument("--extra", default="", help="more mine options, space-separated")
    ap.add_argument("--profile", default="", help="write a cProfile of each command into this folder")
    ap.add_argument("--log", default="", help="append the commands' stderr to this file as it comes")
    a = ap.parse_args(argv)
    PROFILE["dir"], PROFILE["log"] = a.profile, a.log
    if a.prepare:
        prepare(a.pairs)
        return 0
    dev = ["--device", a.device]
    t0 = time.perf_counter()
    src, tgt, n_gold = synth(a.pairs, a.lines, a.gold, a.work)
    print(f"# text: {a.lines:,} lines a side, {n_gold:,} gold pairs, written in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr, flush=True)
    rows = []
    if a.what == "encode":
        sec = run(["encode", src, "-o", os.path.join(a.work, "src.npy"), "--fp16", "-q", *dev], "encode")
        rows.append((f"encode {a.lines:,} lines from a file (CLI, --fp16, start-up included)", f"{a.lines / sec:,.0f} sentences/s", f"{sec:.1f} s"))
    else:
        emb = []
        for side, path in (("src", src), ("tgt", tgt)):
            out = os.path.join(a.work, side + ".npy")
            sec = run(["encode", path, "-o", out, "--fp16", "-q", *dev], f"encode {side}")
            rows.append((f"encode {side}: {a.lines:,} lines (CLI, --fp16)", f"{a.lines / sec:,.0f} sentences/s", f"{sec:.1f} s"))
            emb.append(out)
        out_tsv = os.path.join(a.work, "mined.tsv")
        opts = ["mine", src, tgt, "--src-emb", emb[0], "--tgt-emb", emb[1], "--ids", "--no-per-language", "-o", out_tsv,
                "--index", a.index, "--chunk-lines", str(a.chunk_lines), *dev, *a.extra.split()]
        if a.what == "pipeline":
            opts += ["--work-dir", os.path.join(a.work, "wd"), "--recall-check", str(a.recall_check)]
        sec = run(opts, "mine")
        n, p, r = recall(out_tsv, os.path.join(a.work, "gold.txt"))
        rows.append((f"mine {a.lines:,} x {a.lines:,} from embeddings, index {a.index} (CLI, end to end)", f"{sec:.1f} s",
                     f"{n:,} pairs, P {100 * p:.1f} R {100 * r:.1f} of {n_gold:,} gold"))
    for r in rows:
        print(" | ".join(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
