"""Add SIF statistics (token frequencies and common component) to a model trained before models stored them.

    python tools/add_sif_stats.py --model bitextmine/models/default     # the bundled model, in place

Counts the model's tokens over the corpora it was trained on (here: every corpus in
../shared/data/train, as tools/train_default.py reads them, minus the same held-out dev pairs) and
estimates the component exactly as ``bitextmine train`` does at the end of training.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from bitextmine.config import TrainConfig
from bitextmine.corpus import load_corpora
from bitextmine.evaluation.devdata import corpora
from bitextmine.loading import load_model
from bitextmine.model import module_from_model
from bitextmine.training.data import Side, split_dev, token_counts
from bitextmine.training.loop import sif_component as _sif_component

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", default=DATA)
    args = ap.parse_args()
    model = load_model(args.model)
    tcfg = model.config.get("training", {})
    config = TrainConfig(seed=tcfg.get("seed", 1), dev_pairs=tcfg.get("dev_pairs", 1000),
                         fp16=model.config.get("dtype") == "float16")
    src, tgt, stats = load_corpora(corpora(os.path.join(args.data, "train"), tempfile.mkdtemp()))
    src, tgt, *_ = split_dev(src, tgt, config.dev_pairs, config.seed)
    print(f"{stats.summary()}; {len(src)} training pairs (trained on: {tcfg.get('pairs')})", flush=True)
    S, T = Side.build(src, model.tokenizer), Side.build(tgt, model.tokenizer)
    V = model.embeddings.shape[0]
    counts = token_counts(S, T, V)
    pc = _sif_component(module_from_model(model), S, T, counts, config, "cpu")
    model.tensors.update(piece_counts=counts, sif_pc=pc)
    model.config["sif_a"] = config.sif_a
    model.config.pop("fingerprint", None)
    model.save(args.model, dtype=model.config.get("dtype", "float16"))
    print(f"wrote {args.model}: fingerprint {model.fingerprint}, {counts.sum()} tokens counted", flush=True)


if __name__ == "__main__":
    main()
