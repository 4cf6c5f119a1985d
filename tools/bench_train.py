"""Training speed: one epoch over N real pairs (default 400,000) with the paper's settings.

    python tools/bench_train.py [--pairs 400000] [--spm MODEL] [--device cpu]

The pairs are a seeded sample of all corpora in ../shared/data/train. SentencePiece training is not
timed (pass --spm to reuse a model, default: the bundled model's); tokenising the corpus is timed
separately from the training loop. Prints a table.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from bitextmine.config import TrainConfig
from bitextmine.corpus import CorpusSpec, load_corpora
from bitextmine.evaluation.devdata import corpora
from bitextmine.model import default_model_dir
from bitextmine.training.loop import train

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=400_000)
    ap.add_argument("--spm", default=os.path.join(default_model_dir(), "sentencepiece.model"))
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src, tgt, _ = load_corpora(corpora(os.path.join(DATA, "train"), tmp))
        idx = np.random.default_rng(0).permutation(len(src))[: args.pairs]
        paths = (os.path.join(tmp, "s.txt"), os.path.join(tmp, "t.txt"))
        for p, side in zip(paths, (src, tgt)):
            with open(p, "w", encoding="utf-8") as f:
                f.writelines(side[i] + "\n" for i in idx)
        times: dict = {}

        def progress(e: dict) -> None:
            if e["event"] == "start":
                times["start"] = time.perf_counter()
                times["pairs"] = e["pairs"]  # trained pairs: the sample less the held-apart dev pairs
            elif e["event"] == "eval":
                times.setdefault("end", time.perf_counter())

        t0 = time.perf_counter()
        result = train([CorpusSpec(src=paths[0], tgt=paths[1])], os.path.join(tmp, "m"),
                       config=TrainConfig(epochs=1, device=args.device, checkpoint_every=0),
                       tokenizer_path=args.spm, progress=progress)
        total = time.perf_counter() - t0
    loop = times["end"] - times["start"]
    n = times["pairs"]
    print(f"{len(idx)} pairs sampled, {n} trained (the rest held apart for dev), 1 epoch, {result.steps} "
          f"mini-batches of 128, mega-batch up to 60; device {args.device}, {os.cpu_count()} cores")
    print("| stage | seconds | pairs/s |")
    print("|---|---|---|")
    print(f"| read, clean, tokenise, set up | {times['start'] - t0:.1f} | |")
    print(f"| training loop (1 epoch) | {loop:.1f} | {n / loop:,.0f} |")
    print(f"| whole command | {total:.1f} | {n / total:,.0f} |")


if __name__ == "__main__":
    main()
