"""Train the bundled default model on every corpus in ../shared/data/train (English with 8 languages).

    python tools/train_default.py --out bitextmine/models/default            # the shipped model
    python tools/train_default.py --vocab 20000 --epochs 2 --out /tmp/v20k   # a comparison run
    python tools/train_default.py --out - --holdout 5000 --holdout-only      # only the held-apart pairs (.bench/holdout)

The shipped model departs from the paper's defaults in two measured or practical ways (see
docs/tried.md, "The encoder"): a 32,000-piece vocabulary for nine languages (better on every dev benchmark
than 20,000) and 8 epochs instead of 10 (the time budget). Anki pairs whose English side occurs in a
Tatoeba test set are left out, so that the Tatoeba figures measure unseen sentences. Model selection
(the best epoch) uses the Tatoeba v1 files of the 8 languages and the STS Benchmark dev set, as the
shared data's dev/ folder intends; tools/eval_default.py measures the model afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from bitextmine.config import BATCH_ORDERS, LR_DECAYS, NEGATIVES, TokenizerConfig, TrainConfig
from bitextmine.evaluation.devdata import LANGS, corpora, hold_apart
from bitextmine.training.loop import train

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--vocab", type=int, default=32000, help="measured better than the paper's 20,000 here")
    ap.add_argument("--dim", type=int, default=TrainConfig.dim)
    ap.add_argument("--epochs", type=int, default=8, help="the paper's 10 did not fit the time budget")
    ap.add_argument("--seed", type=int, default=TrainConfig.seed)
    ap.add_argument("--loss", default=TrainConfig.loss, choices=["hinge", "infonce"])
    ap.add_argument("--scale", type=float, default=TrainConfig.scale)
    ap.add_argument("--hinge-weight", type=float, default=TrainConfig.hinge_weight)
    ap.add_argument("--sampling-temperature", type=float, default=TrainConfig.sampling_temperature)
    ap.add_argument("--spm-model", default=None, help="reuse this SentencePiece model (e.g. the shipped one's)")
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=TrainConfig.batch_size)
    ap.add_argument("--megabatch-max", type=int, default=TrainConfig.megabatch_max)
    ap.add_argument("--lr", type=float, default=TrainConfig.lr)
    ap.add_argument("--dropout", type=float, default=TrainConfig.dropout)
    ap.add_argument("--negatives", default=TrainConfig.negatives, choices=NEGATIVES)
    ap.add_argument("--warmup", type=float, default=TrainConfig.warmup)
    ap.add_argument("--lr-decay", default=TrainConfig.lr_decay, choices=LR_DECAYS)
    ap.add_argument("--init-scale", type=float, default=TrainConfig.init_scale)
    ap.add_argument("--eval-every", type=int, default=TrainConfig.eval_every)
    ap.add_argument("--spm-normalization", default=TokenizerConfig.normalization)
    ap.add_argument("--character-coverage", type=float, default=TokenizerConfig.character_coverage)
    ap.add_argument("--clean", action="store_true", help="drop pairs that break filter's default rules")
    ap.add_argument("--holdout", type=int, default=0, metavar="N",
                    help="hold apart N pairs per language for large mining tasks (0 = none, as the 2026-11-21 model)")
    ap.add_argument("--holdout-dir", default=os.path.join(os.path.dirname(__file__), "..", ".bench", "holdout"))
    ap.add_argument("--holdout-min-corpus", type=int, default=10_000, metavar="PAIRS",
                    help="draw held-apart pairs only from corpora of at least this many pairs")
    ap.add_argument("--holdout-only", action="store_true",
                    help="write the held-apart pairs (--holdout, --seed) to --holdout-dir and stop: the dev pools of "
                         "tools/sparse_tasks.py and tools/f1_by_size.py on a new machine")
    ap.add_argument("--init-from", default=None, metavar="MODEL", help="start from this model (its tokenizer and weights)")
    ap.add_argument("--batch-order", default=TrainConfig.batch_order, choices=BATCH_ORDERS)
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bitextmine-default-")
    specs = corpora(os.path.join(args.data, "train"), tmp)
    if args.holdout:
        done = hold_apart(specs, args.holdout, args.seed, args.holdout_dir, tmp, args.holdout_min_corpus)
        for group, n in done.held.items():
            print(f"held apart {n} {group} pairs in {args.holdout_dir}", flush=True)
        print(f"dropped {done.dropped} training pairs sharing a text with a held-apart pair", flush=True)
        specs = done.specs
    if args.holdout_only:
        return
    tat = os.path.join(args.data, "dev", "tatoeba", "v1")
    dev_tatoeba = [(f"{tat}/tatoeba.{c}-eng.{c}", f"{tat}/tatoeba.{c}-eng.eng") for c in LANGS.values()]
    dev_sts = [os.path.join(args.data, "dev", "stsbenchmark", "sts-dev.csv")]
    print(f"{len(specs)} corpora", flush=True)
    t0 = time.time()

    def progress(e: dict) -> None:
        if e["event"] == "step" and e["step"] % 500 >= e["advance"]:
            return
        print(f"[{time.time() - t0:7.0f}s] {json.dumps(e)}", flush=True)

    result = train(
        specs, args.out,
        config=TrainConfig(dim=args.dim, epochs=args.epochs, seed=args.seed, checkpoint_every=2000, loss=args.loss,
                           scale=args.scale, hinge_weight=args.hinge_weight,
                           sampling_temperature=args.sampling_temperature, max_steps=args.max_steps,
                           clean=args.clean, batch_size=args.batch_size, megabatch_max=args.megabatch_max, lr=args.lr,
                           dropout=args.dropout, negatives=args.negatives, warmup=args.warmup,
                           lr_decay=args.lr_decay, init_scale=args.init_scale, eval_every=args.eval_every,
                           batch_order=args.batch_order),
        tokenizer_config=TokenizerConfig(vocab_size=args.vocab, normalization=args.spm_normalization,
                                         character_coverage=args.character_coverage),
        tokenizer_path=args.spm_model, init_from=args.init_from,
        dev_tatoeba=dev_tatoeba, dev_sts=dev_sts, languages=["en", *LANGS], resume=args.resume, progress=progress,
    )
    print(f"done in {result.seconds:.0f}s, {result.steps} mini-batches, {result.pairs_per_second:.0f} pairs/s, "
          f"best dev score {result.best_score:.2f}", flush=True)


if __name__ == "__main__":
    main()
