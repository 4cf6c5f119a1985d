"""Train the bundled default model on every corpus in ../shared/data/train (English with 8 languages).

    python tools/train_default.py --out bitextmine/models/default            # the shipped model
    python tools/train_default.py --vocab 20000 --epochs 2 --out /tmp/v20k   # a comparison run
    python tools/train_default.py --out - --holdout 5000 --holdout-only      # only the held-apart pairs (.bench/holdout)

The shipped model departs from the paper's defaults in two measured or practical ways (see
docs/benchmarks.md): a 32,000-piece vocabulary for nine languages (better on every dev benchmark
than 20,000) and 8 epochs instead of 10 (the time budget). Anki pairs whose English side occurs in a
Tatoeba test set are left out, so that the Tatoeba figures measure unseen sentences. Model selection
(the best epoch) uses the Tatoeba v1 files of the 8 languages and the STS Benchmark dev set, as the
shared data's dev/ folder intends; tools/eval_default.py measures the model afterwards.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bitextmine.config import BATCH_ORDERS, LR_DECAYS, NEGATIVES, TokenizerConfig, TrainConfig  # noqa: E402
from bitextmine.corpus import CorpusSpec, read_lines, read_parallel  # noqa: E402
from bitextmine.training.loop import train  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
LANGS = {"de": "deu", "fr": "fra", "es": "spa", "cs": "ces", "ru": "rus", "zh": "cmn", "tr": "tur", "ar": "ara"}


def without_tatoeba_eval(en: str, other: str, tmp: str) -> CorpusSpec:
    """The Anki pairs whose English side does not occur in any Tatoeba test set (flag file beside them),
    written to ``tmp`` so that the Tatoeba figures measure unseen sentences."""
    flags = read_lines(en.replace(".en.gz", ".en_in_any_tatoeba_eval.gz"))
    src, tgt = read_parallel(en, other)
    keep = [i for i, f in enumerate(flags) if f.strip() == "0"]
    name = os.path.basename(en).split(".")[0]
    folder = os.path.join(tmp, "tatoeba_anki (without Tatoeba test English)")  # the model records this name
    os.makedirs(folder, exist_ok=True)
    paths = (os.path.join(folder, f"{name}.en"), os.path.join(folder, f"{name}.xx"))
    for path, side in zip(paths, (src, tgt)):
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(side[i] + "\n" for i in keep)
    return CorpusSpec(src=paths[0], tgt=paths[1], group=name.split("-")[1])


def corpora(train_dir: str, tmp: str) -> list[CorpusSpec]:
    """Every aligned pair of files under train/ (English first, except MLQE-PE's ru-en), grouped by the
    language that is not English."""
    specs = []
    for en in sorted(glob.glob(os.path.join(train_dir, "*", "en-*.en.gz"))):
        lang = os.path.basename(en).split(".")[0].split("-")[1]
        other = en.replace(".en.gz", f".{lang}.gz")
        if os.path.exists(en.replace(".en.gz", ".en_in_any_tatoeba_eval.gz")):
            specs.append(without_tatoeba_eval(en, other, tmp))
        else:
            specs.append(CorpusSpec(src=en, tgt=other))
    for src in sorted(glob.glob(os.path.join(train_dir, "mlqe_pe", "*.src.gz"))):
        pair = os.path.basename(src).split(".")[0].split("-")
        specs.append(CorpusSpec(src=src, tgt=src.replace(".src.gz", ".pe.gz"), group=[x for x in pair if x != "en"][0]))
    for en in sorted(glob.glob(os.path.join(train_dir, "multi30k", "*.en.gz"))):
        for lang in ("de", "fr", "cs"):
            other = en.replace(".en.gz", f".{lang}.gz")
            if os.path.exists(other):
                specs.append(CorpusSpec(src=en, tgt=other))
    for en in sorted(glob.glob(os.path.join(train_dir, "turkish_parallel_corpora", "*.en.gz"))):
        specs.append(CorpusSpec(src=en, tgt=en.replace(".en.gz", ".tr.gz")))
    return specs


def english_first(spec: CorpusSpec) -> bool:
    """Whether the corpus's source side is English (its file name ends in .en or .en.gz)."""
    return str(spec.src).removesuffix(".gz").endswith(".en")


def hold_apart(specs: list[CorpusSpec], n: int, seed: int, out_dir: str, tmp: str,
               min_corpus: int = 10_000) -> list[CorpusSpec]:
    """Hold apart ``n`` random pairs per language (seeded) for mining tasks that the model never trained
    on: written to ``out_dir``/en-XX.en and en-XX.XX, drawn from the corpora with English as source and
    at least ``min_corpus`` pairs (a small corpus can be a language's only source of one kind of text:
    Arabic's 7,298 Anki sentences), among pairs whose two texts occur nowhere else in the training data
    (so each text has exactly one gold partner, and holding it apart removes nothing else). Returns the
    specs rewritten to ``tmp`` without the held-apart pairs (and anything sharing a text with them)."""
    import numpy as np

    from collections import Counter

    data = [(spec, *spec.read()) for spec in specs]
    counts = Counter(t.strip() for _, src, tgt in data for side in (src, tgt) for t in side)
    pools: dict[str, list] = {}
    for spec, src, tgt in data:
        if not english_first(spec) or len(src) < min_corpus:
            continue
        for a, b in zip(src, tgt):
            a, b = a.strip(), b.strip()
            if a and b and a != b and "\t" not in a + b and counts[a] == 1 and counts[b] == 1:
                pools.setdefault(spec.group_name(), []).append((a, b))
    held: set[str] = set()
    os.makedirs(out_dir, exist_ok=True)
    for group, pairs in sorted(pools.items()):
        rng = np.random.default_rng([seed, 13, sum(map(ord, group))])
        chosen = [pairs[i] for i in np.sort(rng.choice(len(pairs), min(n, len(pairs)), replace=False))]
        kept = chosen
        for side, k in (("en", 0), (group, 1)):
            with open(os.path.join(out_dir, f"en-{group}.{side}"), "w", encoding="utf-8") as f:
                f.writelines(p[k] + "\n" for p in kept)
        held.update(t for p in kept for t in p)
        print(f"held apart {len(kept)} {group} pairs in {out_dir}", flush=True)
    out, dropped = [], 0
    for i, (spec, src, tgt) in enumerate(data):
        keep = [j for j, (a, b) in enumerate(zip(src, tgt)) if a.strip() not in held and b.strip() not in held]
        dropped += len(src) - len(keep)
        paths = tuple(kept_path(p, i, tmp) for p in (spec.src, spec.tgt))
        for path, side in zip(paths, (src, tgt)):
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(side[j] + "\n" for j in keep)
        out.append(CorpusSpec(src=paths[0], tgt=paths[1], group=spec.group_name()))
    print(f"dropped {dropped} training pairs sharing a text with a held-apart pair", flush=True)
    return out


def kept_path(path: str, i: int, tmp: str) -> str:
    """Where corpus ``i``'s side ``path`` is rewritten without the held-apart pairs: tmp/i/FOLDER (held-apart
    pairs removed)/NAME, so that the model's record of its corpora (folder and file name) still names it."""
    folder = os.path.basename(os.path.dirname(os.path.abspath(path)))
    name = os.path.basename(str(path)).removesuffix(".gz")
    out = os.path.join(tmp, str(i), f"{folder} (held-apart pairs removed)")
    os.makedirs(out, exist_ok=True)
    return os.path.join(out, name)


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
        specs = hold_apart(specs, args.holdout, args.seed, args.holdout_dir, tmp, args.holdout_min_corpus)
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
