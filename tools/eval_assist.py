"""mine's defaults with and without --assist (or either: --runs) on task folders (src.txt, tgt.txt, gold.tsv: 1-based line pairs),
with the languages given as the folders name them (.../LANG/SHARE/DRAW, English on the target side):

    python tools/eval_assist.py --out assist.jsonl TASKS/eval/*/*/d[01] TASKS/tatoeba/*/*/d[01]

--pick on | off runs the assist with --assist-pick or --no-assist-pick (default: mine's, per language).

One JSON line per task and run as it goes, then P/R/F1 in % per folder group, language and share (means over
draws), with the lines the assist encoded and the seconds each run took."""

from __future__ import annotations

import argparse
import collections
import io
import json
import os
import time
from dataclasses import replace

import numpy as np

from bitextmine.config import MineConfig
from bitextmine.errors import ConfigError
from bitextmine.evaluation.sparse_tasks import prf
from bitextmine.loading import load_model
from bitextmine.pipeline import mine_files


def run(folder: str, model, config: MineConfig, lang: str) -> tuple[list, float, object]:
    out = io.StringIO()
    t0 = time.perf_counter()
    stats = mine_files(f"{folder}/src.txt", f"{folder}/tgt.txt", out, model=model, config=config, ids=True,
                       src_lang=lang, tgt_lang="en")
    pairs = [(int(r.split("\t")[-2].split(",")[0]), int(r.split("\t")[-1].split(",")[0]))
             for r in out.getvalue().splitlines()]
    return pairs, time.perf_counter() - t0, stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--out", required=True, help="JSON lines, one per task and run")
    ap.add_argument("--assist", default="use")
    ap.add_argument("--model", default=None, help="a model directory  [default: the bundled model]")
    ap.add_argument("--runs", nargs="+", default=["defaults", "assist"], choices=["defaults", "assist"])
    ap.add_argument("--pick", choices=["default", "on", "off"], default="default")
    args = ap.parse_args()
    model = load_model(args.model)
    table = collections.defaultdict(list)
    with open(args.out, "a", encoding="utf-8") as log:
        for folder in args.folders:
            group, lang, share, draw = folder.rstrip("/").split("/")[-4:]
            with open(f"{folder}/gold.tsv", encoding="utf-8") as f:
                gold = {tuple(int(x) for x in line.split("\t")) for line in f if line.strip()}
            pick = {"default": None, "on": True, "off": False}[args.pick]
            runs = {"defaults": MineConfig(), "assist": replace(MineConfig(), assist=args.assist, assist_pick=pick)}
            for name, config in ((n, runs[n]) for n in args.runs):
                try:
                    pairs, secs, stats = run(folder, model, config, lang)
                except ConfigError as e:  # e.g. an assist that does not know the language
                    log.write(json.dumps({"folder": folder, "run": name, "refused": str(e)}) + "\n")
                    continue
                p, r, f1 = prf(pairs, gold)
                row = {"folder": folder, "run": name, "p": p, "r": r, "f1": f1, "secs": secs,
                       "assist_lines": stats.info.get("assist_lines", 0), "lines": stats.src_lines + stats.tgt_lines}
                log.write(json.dumps(row) + "\n")
                log.flush()
                table[group, share, name, lang].append((p, r, f1))
    for key in sorted({k[:3] for k in table}):
        cells = [f"{lang} " + "/".join(f"{100 * v:5.1f}" for v in np.mean(table[(*key, lang)], 0))
                 for lang in sorted({k[3] for k in table if k[:3] == key})]
        mean_f1 = 100 * np.mean([v[2] for k in table if k[:3] == key for v in table[k]])
        print(f"{key[0]} {key[1]} {key[2]:8s} F1 {mean_f1:5.1f} | " + " ".join(cells))


if __name__ == "__main__":
    main()
