"""The baseline a user would pick instead: sentence-transformers' StaticEmbedding trained with
MultipleNegativesRankingLoss inside MatryoshkaLoss, the recipe of static-similarity-mrl-multilingual-v1,
on the same training pairs as tools/train_default.py, and evaluated with `bitextmine eval` on exported
embeddings.

    pip install -e '.[baseline]'   # sentence-transformers, datasets, accelerate: development only
    python tools/baseline_static.py --out .bench/static [--cpu-minutes 25 | --epochs 3] [--dim 1024] [--vocab 32000]

The recipe as published: an uncased multilingual WordPiece tokenizer, embedding dimension 1,024,
MatryoshkaLoss over MNRL (scale 20) at dimensions 32 ... 1,024, batch 2,048 without duplicates in a
batch, learning rate 0.2 with 10 % warm-up and linear decay, one epoch. Here the tokenizer is
trained on the same training data (HF tokenizers WordPiece, lowercased, accents stripped, CJK
characters split as in BERT; --vocab pieces, 2,000,000 sampled sentences, nothing downloaded). The
training pairs are those of tools/train_default.py, with the same 1,000 pairs held apart (seed 1);
with --cpu-minutes, the epoch is a seeded random subset sized so that training takes about that much
CPU time (measured on 20 batches first), so the baseline gets the same CPU time as the model it is
compared with.

Evaluation: the Tatoeba v1 files of the 8 languages and the STS Benchmark dev and test sets are
encoded (float32 .npy, L2-normalised) and scored by `bitextmine eval tatoeba --src-emb/--tgt-emb` and
`bitextmine eval sts --emb1/--emb2`; the commands are printed with the table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import tempfile
import time

from bitextmine.config import TrainConfig
from bitextmine.corpus import read_parallel
from bitextmine.evaluation.devdata import LANGS, corpora
from bitextmine.evaluation.readers import read_stsbenchmark
from bitextmine.training.data import read_training_pairs

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")
MATRYOSHKA = [32, 64, 128, 256, 512, 768, 1024]


def train_tokenizer(src: list[str], tgt: list[str], vocab: int, out: str, seed: int = 1234):
    """An uncased WordPiece tokenizer (BERT normalisation and pre-tokenisation) trained on a sample of
    both sides, saved as ``out``/tokenizer.json; returns it."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    rng = random.Random(seed)
    sample = src + tgt
    if len(sample) > 2_000_000:
        sample = rng.sample(sample, 2_000_000)
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True, handle_chinese_chars=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    tok.train_from_iterator(sample, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single="$A", special_tokens=[])
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    return tok


def make_model(tok, dim: int):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import StaticEmbedding
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]")
    return SentenceTransformer(modules=[StaticEmbedding(fast, embedding_dim=dim)], device="cpu")


def fit(model, src: list[str], tgt: list[str], out: str, *, max_steps: int = -1, seed: int = 12, epochs: int = 1):
    """``epochs`` epochs (the published recipe: one; the learning rate decays over all of them) or ``max_steps``
    batches; returns (wall seconds, CPU seconds of this process, all threads)."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.losses import MatryoshkaLoss, MultipleNegativesRankingLoss
    from sentence_transformers.training_args import BatchSamplers

    data = Dataset.from_dict({"anchor": src, "positive": tgt})
    loss = MatryoshkaLoss(model, MultipleNegativesRankingLoss(model),
                          matryoshka_dims=[d for d in MATRYOSHKA if d <= model.get_sentence_embedding_dimension()])
    args = SentenceTransformerTrainingArguments(
        output_dir=out, num_train_epochs=epochs, max_steps=max_steps, per_device_train_batch_size=2048,
        learning_rate=2e-1, warmup_ratio=0.1, lr_scheduler_type="linear", batch_sampler=BatchSamplers.NO_DUPLICATES,
        save_strategy="no", logging_steps=50, report_to="none", seed=seed, use_cpu=True, dataloader_num_workers=0)
    t0, c0 = time.time(), time.process_time()
    SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=loss).train()
    return time.time() - t0, time.process_time() - c0


def export(model, out: str, dev: str) -> dict:
    """Encode the dev benchmarks to ``out``/*.npy; returns name -> (text files, npy files)."""
    import numpy as np

    files = {}
    tat = os.path.join(dev, "tatoeba", "v1")
    for code in LANGS.values():
        x, y = (f"{tat}/tatoeba.{code}-eng.{code}", f"{tat}/tatoeba.{code}-eng.eng")
        a, b = read_parallel(x, y)
        npys = (os.path.join(out, f"tatoeba.{code}.npy"), os.path.join(out, f"tatoeba.{code}-eng.npy"))
        for texts, path in zip((a, b), npys):
            np.save(path, model.encode(texts, batch_size=1024, normalize_embeddings=True).astype(np.float32))
        files[code] = ((x, y), npys)
    for split in ("dev", "test"):
        path = os.path.join(dev, "stsbenchmark", f"sts-{split}.csv")
        d = read_stsbenchmark(path)
        npys = (os.path.join(out, f"sts-{split}.s1.npy"), os.path.join(out, f"sts-{split}.s2.npy"))
        for texts, p in zip((d.s1, d.s2), npys):
            np.save(p, model.encode(list(texts), batch_size=1024, normalize_embeddings=True).astype(np.float32))
        files[f"stsb-{split}"] = ((path,), npys)
    return files


def evaluate(files: dict) -> tuple[dict, list[str]]:
    """Score the exported embeddings with `bitextmine eval`; returns (scores, the commands run)."""
    scores, commands = {}, []
    for name, (texts, npys) in files.items():
        if name.startswith("stsb"):
            cmd = ["bitextmine", "eval", "sts", texts[0], "--emb1", npys[0], "--emb2", npys[1], "--json"]
        else:
            cmd = ["bitextmine", "eval", "tatoeba", texts[0], texts[1], "--src-emb", npys[0], "--tgt-emb", npys[1],
                   "--json"]
        commands.append(" ".join(cmd))
        scores[name] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return scores, commands


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--dim", type=int, default=1024, help="the published recipe's dimension")
    ap.add_argument("--vocab", type=int, default=32000, help="the bundled model's vocabulary size")
    ap.add_argument("--cpu-minutes", type=float, default=0,
                    help="training budget in CPU minutes of this process, all threads (0 = one full epoch); CPU "
                         "time, not wall time, so a shared machine does not shrink the budget")
    ap.add_argument("--epochs", type=int, default=1,
                    help="epochs over the training pairs (the published recipe: 1); more to give the baseline the CPU "
                         "time of a longer run of the model it is compared with")
    args = ap.parse_args()
    import torch

    torch.manual_seed(12)
    t0 = time.time()
    src, tgt, *_ = read_training_pairs(corpora(os.path.join(args.data, "train"), tempfile.mkdtemp()), [],
                                       TrainConfig(), lambda m: print(m, flush=True))
    tok = train_tokenizer(src, tgt, args.vocab, args.out)
    t_tok = time.time() - t0
    print(f"{len(src)} training pairs; tokenizer of {tok.get_vocab_size()} pieces in {t_tok:.0f}s", flush=True)
    model = make_model(tok, args.dim)
    if args.cpu_minutes:
        _, probe = fit(make_model(tok, args.dim), src[:2048 * 20], tgt[:2048 * 20], os.path.join(args.out, "probe"),
                       max_steps=20)
        n = min(len(src), int(args.cpu_minutes * 60 / probe * 20 * 2048))
        keep = sorted(random.Random(1).sample(range(len(src)), n))
        src, tgt = [src[i] for i in keep], [tgt[i] for i in keep]
        print(f"{probe / 20:.2f} CPU s per batch of 2048: training on {n} pairs for ~{args.cpu_minutes:g} CPU min",
              flush=True)
    seconds, cpu = fit(model, src, tgt, os.path.join(args.out, "trainer"), epochs=args.epochs)
    model.save(os.path.join(args.out, "model"))
    scores, commands = evaluate(export(model, args.out, os.path.join(args.data, "dev")))
    tat = {c: scores[c]["languages"][0]["accuracy"] for c in LANGS.values()}
    sts = {k: scores[k]["datasets"][0]["pearson"] for k in ("stsb-dev", "stsb-test")}
    print("\n".join(commands))
    print(json.dumps({"epochs": args.epochs, "seconds_training": round(seconds), "cpu_seconds_training": round(cpu),
                      "seconds_tokenizer": round(t_tok), "pairs": len(src),
                      "tatoeba": tat, "sts": sts}, indent=1))
    print("| " + " | ".join(tat) + " | mean | STSb dev | STSb test | training (CPU) |")
    print("|---" * (len(tat) + 4) + "|")
    print("| " + " | ".join(f"{a:.1f}" for a in tat.values()) + f" | {sum(tat.values()) / len(tat):.1f} | "
          f"{sts['stsb-dev']:.1f} | {sts['stsb-test']:.1f} | {cpu / 60:.0f} min |")

if __name__ == "__main__":
    main()
