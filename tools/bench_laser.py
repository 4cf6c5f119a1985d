"""LASER's own mining script (facebookresearch/LASER source/mine_bitexts.py) against `bitextmine mine`
on the same embeddings: time, peak memory and the pairs they write.

    git -C LASER show HEAD:source/mine_bitexts.py > .bench/mine_bitexts.py      # or any user copy
    python tools/bench_laser.py --laser-script .bench/mine_bitexts.py --work .bench/w --n 10000
    python tools/bench_laser.py --laser-script .bench/mine_bitexts.py --work .bench/w --n 10000 --lift
    python tools/bench_laser.py --laser-script .bench/mine_bitexts.py --work .bench/w --n 1000000 --lift \\
        --laser-timeout 600 --laser-prefix 0.005 0.01 0.02               # LASER stopped, its full time estimated

Sentences: those of tools/bench_mine.py (its `prepare`, cached in --work and shared with it): N distinct
foreign sentences from ../shared/data/train and N distinct English ones, about half of the sources with
their translation among the targets, encoded with the bundled model (float32, the model's dimension,
L2-normalised). `--lift` maps the rows to 1,024 dimensions (LASER's) with a fixed seeded random
d x 1024 matrix with orthonormal rows (d the model's dimension), which keeps every cosine (so neighbours, margins and pairs)
unchanged up to float32 rounding. Each size gets a folder --work/laser-N-dD with src.txt, tgt.txt and
src.raw, tgt.raw in LASER's raw format (headerless float32 rows, float16 with --fp16).

LASER's script runs unchanged, as a subprocess: a byte-identical copy of --laser-script is run from a
temporary folder, with $LASER pointing at stub modules written there (source/embed.py: SentenceEncoder,
EncodeLoad and EncodeFile that refuse to run, and LASER's own EmbedLoad, which reads the raw files;
source/lib/text_processing.py: Token, BPEfastApply). Its command line (printed with the table):

    python mine_bitexts.py src.txt tgt.txt --src-lang xx --trg-lang en --src-embeddings src.raw
        --trg-embeddings tgt.raw --output laser.tsv --mode mine --retrieval max --margin ratio -k 4
        --unify --dim D --threshold T --verbose [--fp16]         (no --gpu: FAISS on the CPU)

--verbose adds a dozen lines, timestamped as they arrive, which split LASER's time into its stages.
bitextmine runs `--ours-cmd` (default: `mine` on the raw files when this checkout's `mine` has
--emb-format, else on .npy copies with the sidecar of `bitextmine encode`; see --help).

Each miner runs as its own process tree, started by a small helper process: wall seconds from start
to exit, peak resident memory of the tree (the RSS of the process and all its descendants, summed,
sampled every 0.05 s from /proc) and getrusage(RUSAGE_CHILDREN).ru_maxrss in the helper (the
largest single process of the tree). GB = 10^9 bytes.

Pairs: both write score<TAB>src<TAB>tgt; pairs are compared by their texts: pairs each, shared pairs,
% identical = shared / max(pairs each), and the largest score difference among shared pairs
(bitextmine writes 6 decimals).

An AVX2-only CPU (--emulate-avx2) on a CPU with more: every library both miners use is capped at AVX2
through its own switch (AVX2_ENV: oneDNN, MKL, OpenBLAS of numpy and FAISS, torch's kernels, FAISS's
SIMD level), so bf16 products run emulated as they do on an AVX2-only CPU and bitextmine picks
float32 tiles. The caption says so; clock rates and caches stay those of the machine.

LASER estimate (--laser-prefix F ...): LASER runs on the first m = F x N source sentences against all
N targets. With N fixed every stage's work grows linearly in m (k-NN both ways: m x N products; the
margin loops: m x k and N x k scores; the 1:1 selection: m + N candidates; loading m + N rows), so
each stage's time is fitted as a + b m (least squares over the prefixes) and evaluated at m = N.
Stages that the full run completed before --laser-timeout stopped it are taken as measured. The
peak memory is fitted the same way.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from bitextmine.laser import (
    AVX2_ENV,
    GB,
    NPY_TEMPLATE,
    RAW_TEMPLATE,
    STAGES,
    compare_pairs,
    fit_at,
    laser_cmd,
    laser_stages,
    make_inputs,
    measure,
    model_dim,
    ours_cmd,
    ours_env,
    read_pairs,
    write_laser_stubs,
    write_prefix,
)

TRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "train")


# --- data ---------------------------------------------------------------------------------------------


def default_template(fp16: bool) -> tuple[str, str, str]:
    """(template, fp16 flag, note): raw files when this checkout's `mine` has --emb-format, else .npy."""
    r = subprocess.run([sys.executable, "-m", "bitextmine", "mine", "--help"], capture_output=True, text=True,
                       check=False, env=dict(os.environ, **ours_env()))
    if r.returncode != 0:
        raise SystemExit(f"`python -m bitextmine mine --help` failed:\n{r.stderr[-2000:]}")
    if "--emb-format" in r.stdout:
        flag = next((f for f in ("--emb-fp16", "--fp16") if re.search(rf"{f}\b", r.stdout)), None) if fp16 else ""
        if flag is None:
            raise SystemExit("this bitextmine's `mine --help` names no --emb-fp16 or --fp16 for raw float16 "
                             "files; give the command with --ours-cmd")
        template = RAW_TEMPLATE
        if "--min-z" in r.stdout:  # LASER has no standout floor: margin mining alone, as LASER does it
            template = template.replace("--min-cosine -1", "--min-cosine -1 --min-z 0")
        return template, flag, "bitextmine read the raw files (--emb-format raw)"
    return NPY_TEMPLATE, "", ("bitextmine read .npy copies of the same rows with the sidecar of `bitextmine encode` "
                              "(this checkout's `mine` has no --emb-format yet)")


# --- one size -------------------------------------------------------------------------------------------


def run_laser(script: str, laser_env: dict, p: dict, run_dir: str, args, tag: str = "laser", timeout=None) -> dict:
    out = os.path.join(p.get("dir", run_dir), f"{tag}.tsv")
    cmd = laser_cmd(script, p, out=out, dim=args.dim, threshold=args.threshold, k=args.k, fp16=args.fp16)
    r = measure(cmd, log=out[:-4] + ".log", env=laser_env, timeout=timeout)
    finished = r["returncode"] == 0
    if not finished and r["stopped_at_s"] is None:
        tail = "\n".join(t for _, t in r["lines"][-15:])
        raise SystemExit(f"LASER failed (exit {r['returncode']}):\n{tail}")
    r["stages"], r["stopped_in"] = laser_stages(r["lines"], r["wall_s"], finished)
    r["out"] = out if finished else None
    return r


def bench_size(n: int, cache: str, script: str, laser_env: dict, template: str, fp16_flag: str, args) -> dict:
    run_dir = os.path.join(args.work, f"laser-{n}-d{args.dim}" + ("-fp16" if args.fp16 else ""))
    p = make_inputs(cache, run_dir, n, dim=args.dim, fp16=args.fp16, lift_seed=args.lift_seed,
                    want_npy="{src_npy}" in template or "{tgt_npy}" in template, model_dim=args.model_dim,
                    train_dir=args.train)
    res: dict = {"n": n, "dim": args.dim, "fp16": args.fp16, "threshold": args.threshold, "k": args.k,
                 "run_dir": run_dir}
    ours, laser = [], []
    for rep in range(args.repeat):
        if not args.no_ours:
            out = os.path.join(run_dir, "bm.tsv")
            cmd = ours_cmd(template, p, out=out, dim=args.dim, threshold=args.threshold, k=args.k, fp16_flag=fp16_flag)
            r = measure(cmd, log=os.path.join(run_dir, "bm.log"), env=ours_env())
            if r["returncode"] != 0:
                tail = "\n".join(t for _, t in r["lines"][-15:])
                raise SystemExit(f"bitextmine failed (exit {r['returncode']}): {shlex.join(cmd)}\n{tail}")
            r["out"] = out
            ours.append(r)
            print(f"  [{n:,}] bitextmine run {rep + 1}: {r['wall_s']:.1f} s, "
                  f"{r['peak_tree_rss_bytes'] / GB:.2f} GB", file=sys.stderr, flush=True)
        if not args.no_laser_full and not (laser and laser[-1]["stopped_in"]):  # a stopped run is not repeated
            r = run_laser(script, laser_env, p, run_dir, args, timeout=args.laser_timeout)
            laser.append(r)
            print(f"  [{n:,}] LASER run {rep + 1}: {r['wall_s']:.1f} s"
                  + (f" (stopped in {r['stopped_in']})" if r["stopped_in"] else "")
                  + f", {r['peak_tree_rss_bytes'] / GB:.2f} GB", file=sys.stderr, flush=True)
    res["ours"] = min(ours, key=lambda r: r["wall_s"]) if ours else None
    res["laser"] = min(laser, key=lambda r: (r["stopped_in"] is not None, r["wall_s"])) if laser else None
    if args.laser_prefix:
        res["prefix"] = []
        for f in args.laser_prefix:
            m = max(1, round(f * n))
            q = write_prefix(run_dir, p, m, dim=args.dim, fp16=args.fp16)
            runs = []
            for rep in range(args.repeat):
                runs.append(run_laser(script, laser_env, q, run_dir, args, timeout=None))
                print(f"  [{n:,}] LASER on a prefix of {m:,} sources, run {rep + 1}: {runs[-1]['wall_s']:.1f} s",
                      file=sys.stderr, flush=True)
            # each stage's best over the repeats: the least disturbed by other work on the machine
            res["prefix"].append({"m": m, "wall_s": min(r["wall_s"] for r in runs),
                                  "stages": {s: min(r["stages"][s] for r in runs) for s in STAGES},
                                  "peak_tree_rss_bytes": max(r["peak_tree_rss_bytes"] for r in runs)})
        ms = [x["m"] for x in res["prefix"]]
        # a stage cannot take negative time; a fit that says so (noise at small sizes) is shown as 0
        fitted = {s: max(0.0, fit_at(ms, [x["stages"][s] for x in res["prefix"]], n)) for s in STAGES}
        res["knn_grows"] = all(np.polyfit(ms, [x["stages"][s] for x in res["prefix"]], 1)[0] > 0
                               for s in ("knn_fwd", "knn_bwd")) if len(set(ms)) > 1 else True
        measured = res["laser"]["stages"] if res["laser"] else {}
        res["estimate"] = {"stages_fitted": fitted, "total_fitted": sum(fitted.values()),
                           "total": sum(measured.get(s, fitted[s]) for s in STAGES),
                           "stages_measured": sorted(measured),
                           "peak_tree_rss_bytes": fit_at(ms, [x["peak_tree_rss_bytes"] for x in res["prefix"]], n)}
    if res["ours"] and res["laser"] and res["laser"]["out"]:
        texts = []
        for side in ("src", "tgt"):
            with open(p[f"{side}_txt"], encoding="utf-8") as f:
                texts.append(set(f.read().split("\n")))
        res["pairs"] = compare_pairs(read_pairs(res["laser"]["out"], *texts), read_pairs(res["ours"]["out"], *texts))
    return res


# --- report -------------------------------------------------------------------------------------------


def cpu_caption(args, note: str, script_sha: str, template: str) -> str:
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        info = ""
    flags = sorted(set(re.findall(r"\b(avx512_bf16|amx_bf16|avx2)\b", info)))
    if args.emulate_avx2:
        caps = " ".join(f"{k}={v}" for k, v in AVX2_ENV.items())
        flags = [f"{' '.join(flags)} capped at AVX2 (--emulate-avx2: {caps})"]
    model = re.search(r"^model name\s*:\s*(.*)$", info, re.MULTILINE)
    d = args.model_dim
    lift_note = (f" dim {args.dim}: the bundled model's {d}-d rows times a fixed random {d} x {args.dim} matrix with "
                 f"orthonormal rows (seed {args.lift_seed}): cosines preserved, so LASER's dimension with the same "
                 "neighbour structure." if args.dim != d else "")
    return (f"{datetime.date.today().isoformat()}, {os.cpu_count()} cores ({model.group(1) if model else 'CPU'}), "
            f"CPU flags: {' '.join(flags) or 'none of avx2/avx512_bf16/amx_bf16'}; LASER without --gpu (FAISS on the "
            f"CPU){', bitextmine --device cpu' if '--device cpu' in template else ''}. Real sentences encoded with the bundled model (float32, "
            f"{'stored as float16, ' if args.fp16 else ''}L2-normalised).{lift_note} Threshold {args.threshold:g}, "
            f"k {args.k}, ratio margin, max retrieval. LASER mine_bitexts.py sha256 {script_sha[:12]}; {note}."
            + (f" {args.note}" if args.note else ""))


def fmt_s(x: float | None) -> str:
    return "" if x is None else f"{x:,.1f}"


def row(res: dict) -> str:
    o, l_, est = res.get("ours"), res.get("laser"), res.get("estimate")
    lt = l_["wall_s"] if l_ and not l_["stopped_in"] else None
    lmem = l_["peak_tree_rss_bytes"] / GB if l_ else None
    lt_txt = fmt_s(lt)
    if lt is None and est:
        lt, lt_txt = est["total"], f"~{est['total']:,.0f} (est.)"
    elif lt is None and l_:
        lt_txt = f"> {l_['wall_s']:,.0f} (stopped in {l_['stopped_in']})"
    mem_est = bool(est) and (l_ is None or l_["stopped_in"] is not None)
    if mem_est:
        lmem = max(lmem or 0.0, est["peak_tree_rss_bytes"] / GB)
    ot = o["wall_s"] if o else None
    omem = o["peak_tree_rss_bytes"] / GB if o else None
    pr = res.get("pairs")
    cells = [f"{res['n']:,} x {res['n']:,}", str(res["dim"]), lt_txt, fmt_s(ot),
             f"{lt / ot:.2f}x" if lt and ot else "",
             ("" if lmem is None else f"{lmem:.2f}" + (" (est.)" if mem_est else "")),
             "" if omem is None else f"{omem:.2f}",
             f"{omem / lmem:.2f}" if omem and lmem else "",
             f"{pr['pairs_a']:,} / {pr['pairs_b']:,}" if pr else "",
             f"{pr['identical_pct']:.2f}" if pr else ""]
    return "| " + " | ".join(cells) + " |"


def details(res: dict) -> list[str]:
    out = [f"{res['n']:,} x {res['n']:,}, dim {res['dim']} ({res['run_dir']}):"]
    for name, key in (("LASER", "laser"), ("bitextmine", "ours")):
        r = res.get(key)
        if r:
            out.append(f"  {name}: {r['wall_s']:.2f} s, peak tree RSS {r['peak_tree_rss_bytes'] / GB:.3f} GB, "
                       f"ru_maxrss {r['ru_maxrss_bytes'] / GB:.3f} GB; {shlex.join(r['cmd'])}")
    l_ = res.get("laser")
    if l_:
        out.append("  LASER stages (s): " + ", ".join(f"{STAGES[s]} {t:.2f}" for s, t in l_["stages"].items())
                   + (f"; stopped after {l_['stopped_at_s']:.0f} s in: {STAGES[l_['stopped_in']]}"
                      if l_["stopped_in"] else ""))
    o = res.get("ours")
    if o:
        summary = [t for _, t in o["lines"] if " pairs from " in t]
        if summary:
            out.append(f"  bitextmine: {summary[-1].strip()}")
    est = res.get("estimate")
    if est:
        for x in res["prefix"]:
            out.append(f"  LASER on the first {x['m']:,} sources (best of each stage over the repeats, s): "
                       + ", ".join(f"{s} {t:.2f}" for s, t in x["stages"].items())
                       + f"; peak {x['peak_tree_rss_bytes'] / GB:.2f} GB")
        if not res.get("knn_grows", True):
            out.append("  WARNING: LASER's k-NN time did not grow with the prefix size: the timings are dominated by "
                       "noise (sizes too small, or other work on the machine); the estimate is not meaningful")
        ms = ", ".join(f"{x['m']:,} ({x['wall_s']:.1f} s)" for x in res["prefix"])
        out.append(f"  LASER estimate from source prefixes m = {ms} against all {res['n']:,} targets, each stage "
                   f"fitted as a + b m and taken at m = {res['n']:,}: "
                   + ", ".join(f"{STAGES[s]} {t:.1f}" for s, t in est["stages_fitted"].items())
                   + f"; total {est['total_fitted']:.1f} s"
                   + (f" ({est['total']:.1f} s with the stages the full run completed as measured: "
                      f"{', '.join(est['stages_measured'])})" if est["stages_measured"] else "")
                   + f"; peak memory {est['peak_tree_rss_bytes'] / GB:.2f} GB")
        if l_ and not l_["stopped_in"]:
            out.append(f"  check of the estimate: fitted {est['total_fitted']:.1f} s against "
                       f"{l_['wall_s']:.1f} s measured ({est['total_fitted'] / l_['wall_s'] - 1:+.1%})")
    pr = res.get("pairs")
    if pr:
        d = pr["max_abs_score_diff"]
        out.append(f"  pairs: LASER {pr['pairs_a']:,}, bitextmine {pr['pairs_b']:,}, shared {pr['shared']:,} "
                   f"({pr['identical_pct']:.2f} %), largest score difference of shared pairs "
                   + ("n/a" if d is None else f"{d:.2e}"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--laser-script", required=True, metavar="PATH", help="a copy of LASER's source/mine_bitexts.py")
    ap.add_argument("--work", required=True, metavar="DIR", help="sentences, embeddings and outputs (cached)")
    ap.add_argument("--train", default=TRAIN, help="the training corpora the sentences come from (../shared/data/train)")
    ap.add_argument("--n", type=int, action="append", default=[], metavar="N", help="sentences per side (repeatable)")
    ap.add_argument("--sizes-from", metavar="DIR", default=None,
                    help="also every size whose sentences and embeddings a tools/bench_mine.py (or bench_laser) "
                         "--work folder DIR holds (src.N.npy, tgt.N.npy and their .txt), taken from there")
    ap.add_argument("--dim", type=int, default=None, help="embedding dimension: the model's (the default) or more (lifted)")
    ap.add_argument("--lift", action="store_true", help="--dim 1024: LASER's dimension, cosines preserved")
    ap.add_argument("--lift-seed", type=int, default=0)
    ap.add_argument("--fp16", action="store_true", help="raw files of float16 (LASER --fp16)")
    ap.add_argument("--threshold", type=float, default=0.0, help="margin threshold for both (LASER's default 0)")
    ap.add_argument("-k", type=int, default=4, help="neighbours per direction")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each miner per size; the fastest is reported")
    ap.add_argument("--laser-timeout", type=float, default=None, metavar="S",
                    help="stop LASER's full run after S seconds and report the stage it reached")
    ap.add_argument("--laser-prefix", type=float, nargs="+", default=None, metavar="F",
                    help="also run LASER on the first F x N source sentences (against all N targets) for each "
                         "fraction F, and estimate its full time stage by stage (see the method above)")
    ap.add_argument("--no-laser-full", action="store_true", help="skip LASER's full run (with --laser-prefix: "
                    "estimate only)")
    ap.add_argument("--no-ours", action="store_true", help="skip bitextmine (test the LASER half alone)")
    ap.add_argument("--ours-cmd", default=None, metavar="TEMPLATE",
                    help="bitextmine's command, with {python} {src_txt} {tgt_txt} {src_raw} {tgt_raw} {src_npy} "
                         "{tgt_npy} (.npy copies with a sidecar, written when named) {dim} {threshold} {k} "
                         "{fp16_flag} {out}. Default: " + RAW_TEMPLATE + "; or, while `mine` has no "
                         "--emb-format: " + NPY_TEMPLATE)
    ap.add_argument("--fp16-flag", default=None, help="what {fp16_flag} becomes with --fp16 in --ours-cmd")
    ap.add_argument("--emulate-avx2", action="store_true", help="cap both miners' libraries at AVX2 (AVX2_ENV)")
    ap.add_argument("--note", default="", help="appended to the table caption (e.g. 'shared machine')")
    ap.add_argument("--json", default=None, metavar="FILE", help="also write every measurement here")
    args = ap.parse_args()
    args.model_dim = d = model_dim()
    if args.dim is None:
        args.dim = 1024 if args.lift else d
    if args.dim < d:
        ap.error(f"--dim {args.dim}: expected {d} (the bundled model's) or more (lifted)")
    if args.lift and args.dim == d:
        ap.error(f"--lift with --dim {d}: expected --dim 1024 (the default with --lift) or none")
    if not os.path.isfile(args.laser_script):
        ap.error(f"--laser-script {args.laser_script}: no such file")
    if args.no_laser_full and not args.laser_prefix and args.no_ours:
        ap.error("nothing to run")
    sizes = {n: args.work for n in args.n}
    if args.sizes_from:
        for name in sorted(os.listdir(args.sizes_from)):
            m = re.fullmatch(r"src\.(\d+)\.npy", name)
            n = int(m.group(1)) if m else 0
            if n and all(os.path.exists(os.path.join(args.sizes_from, f"{s}.{n}.{e}"))
                         for s in ("src", "tgt") for e in ("npy", "npy.json", "txt")):
                sizes[n] = args.sizes_from
    sizes = sorted(sizes.items())
    if not sizes:
        ap.error("no size: give --n N or --sizes-from DIR")
    os.makedirs(args.work, exist_ok=True)
    if args.emulate_avx2:
        os.environ.update(AVX2_ENV)  # inherited by both miners and the helpers measuring them

    if args.ours_cmd:
        template, note = args.ours_cmd, "bitextmine ran --ours-cmd"
        fp16_flag = (args.fp16_flag or "--fp16") if args.fp16 else ""
    elif args.no_ours:
        template, fp16_flag, note = "", "", "bitextmine not run"
    else:
        template, fp16_flag, note = default_template(args.fp16)
    with open(args.laser_script, "rb") as f:
        script_bytes = f.read()
    script_sha = hashlib.sha256(script_bytes).hexdigest()
    tmp = tempfile.mkdtemp(prefix="bench_laser.")
    try:
        # run from a folder of its own: a copy beside LASER's real embed.py would import that one first
        script = os.path.join(tmp, "mine_bitexts.py")
        with open(script, "wb") as f:
            f.write(script_bytes)
        laser_env = {"LASER": write_laser_stubs(tmp), "PYTHONUNBUFFERED": "1"}
        results = [bench_size(n, cache, script, laser_env, template, fp16_flag, args) for n, cache in sizes]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(cpu_caption(args, note, script_sha, template))
    print()
    print("| N x N | dim | LASER s | bitextmine s | speed ratio | LASER peak GB | bitextmine peak GB | memory ratio "
          "| pairs (LASER / bitextmine) | % identical |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for res in results:
        print(row(res))
    print("\nspeed ratio = LASER s / bitextmine s; memory ratio = bitextmine / LASER (peak RSS of the process tree); "
          "% identical = shared pairs (same source and target text) / the larger pair count.\n")
    for res in results:
        print("\n".join(details(res)))
    if any(r.get("estimate") for r in results):
        print("\nLASER estimates: LASER ran on the first m source sentences against all N targets for a few m. "
              "With N fixed, every stage's work grows linearly in m (k-NN both ways: m x N products; margin loops: "
              "m x k and N x k; 1:1 selection: m + N candidates; loading: m + N rows), so each stage's time was "
              "fitted as a + b m (least squares) and evaluated at m = N; stages that the full run completed before "
              "it was stopped are counted as measured. Peak memory was fitted the same way.")
    if args.json:
        for res in results:
            for key in ("ours", "laser"):
                if res.get(key):
                    res[key].pop("lines", None)
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
