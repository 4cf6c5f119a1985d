"""Save the outputs of every command on real data, to show that a change of code keeps behaviour.

Runs ``python -m bitextmine`` from a given checkout (``--code``, default: this one) on slices of
``../shared/data`` and writes each output file under OUT, then ``OUT/sha256.json`` with the sha256 of
every file. ``--compare A B`` lists the files whose bytes differ between two snapshots.

    python tools/behaviour_snapshot.py /tmp/before --code /tmp/old-checkout
    python tools/behaviour_snapshot.py /tmp/after
    python tools/behaviour_snapshot.py --compare /tmp/before /tmp/after

Covered: mine (exact bf16 and fp32 with shards, FAISS IVF and IVF-PQ, rules and languages, SIF,
distance margin, precomputed embeddings), encode (.npy, fp16, SIF, batch-tokens, chunks with
manifest), score, filter (cosine with rejects and stats, margin annotated, rules only), calibrate,
eval (tatoeba, sts, cross-lingual sts, bucc), and short seeded training runs of every encoder
(sp, word, trigram, blstm-sp; mix negatives, paraphrase, untrained, a stopped run resumed).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "data"))
TRAIN = os.path.join(DATA, "train")
TATOEBA = os.path.join(DATA, "dev", "tatoeba", "v1")


def head(path: str, n: int, skip: int = 0) -> list[str]:
    with (gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")) as f:
        return [line.rstrip("\n") for i, line in zip(range(skip + n), f) if i >= skip]


def write(path: str, lines) -> str:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(line + "\n" for line in lines)
    return path


def damaged_tsv(src: list[str], tgt: list[str], seed: int) -> list[str]:
    """Real pairs with a seeded share of typical damage: swapped and shuffled sides, repeats, URLs."""
    rng = random.Random(seed)
    rows = []
    for i, (s, t) in enumerate(zip(src, tgt)):
        r = rng.random()
        if r < 0.05:
            s, t = t, s
        elif r < 0.10:
            t = tgt[rng.randrange(len(tgt))]
        elif r < 0.12:
            s = s + " " + "!" * 12
        elif r < 0.13:
            t = "see https://example.org/" + str(i)
        elif r < 0.14:
            t = ""
        rows.append(f"{s}\t{t}")
    return rows


def prepare(work: str) -> dict:
    d = {}
    news = os.path.join(TRAIN, "wmt_newstest")
    d["de"] = write(os.path.join(work, "news.de"), head(os.path.join(news, "en-de.de.gz"), 12000))
    d["en"] = write(os.path.join(work, "news.en"), head(os.path.join(news, "en-de.en.gz"), 12000, skip=3000))
    apps = os.path.join(TRAIN, "debian_gettext_apps")
    d["noisy"] = write(os.path.join(work, "noisy.tsv"),
                       damaged_tsv(head(os.path.join(apps, "en-de.de.gz"), 20000),
                                   head(os.path.join(apps, "en-de.en.gz"), 20000), seed=3))
    anki = os.path.join(TRAIN, "tatoeba_anki")
    d["train_de"] = write(os.path.join(work, "train.de"), head(os.path.join(anki, "en-de.de.gz"), 6000))
    d["train_en"] = write(os.path.join(work, "train.en"), head(os.path.join(anki, "en-de.en.gz"), 6000))
    for lang in ("deu", "fra"):
        src = head(os.path.join(TATOEBA, f"tatoeba.{lang}-eng.{lang}"), 1000)
        eng = head(os.path.join(TATOEBA, f"tatoeba.{lang}-eng.eng"), 1000)
        extra = head(os.path.join(news, "en-de.en.gz"), 1500, skip=20000)
        keep = range(0, 1000, 2)  # half the pairs have a translation hidden among English news lines
        d[f"bucc_{lang}"] = (
            write(os.path.join(work, f"bucc.{lang}.src"), [f"{lang}-{i:06d}\t{s}" for i, s in enumerate(src)]),
            write(os.path.join(work, f"bucc.{lang}.tgt"),
                  [f"en-{i:06d}\t{eng[i]}" for i in keep] + [f"en-x{i:06d}\t{s}" for i, s in enumerate(extra)]),
            write(os.path.join(work, f"bucc.{lang}.gold"), [f"{lang}-{i:06d}\ten-{i:06d}" for i in keep]))
    return d


def commands(d: dict) -> list[tuple[str, list[str]]]:
    """(name, arguments of ``bitextmine``); outputs go to files named after the step."""
    de, en, noisy = d["de"], d["en"], d["noisy"]
    tr = ["--src", d["train_de"], "--tgt", d["train_en"], "--vocab-size", "1500", "--dim", "48", "--epochs", "1",
          "--dev-pairs", "200", "--threads", "1", "--device", "cpu", "--batch-size", "64", "--megabatch-max", "6",
          "--megabatch-every", "10", "--checkpoint-every", "20", "--spm-sample", "8000", "-q"]
    tdeu = [os.path.join(TATOEBA, "tatoeba.deu-eng.deu"), os.path.join(TATOEBA, "tatoeba.deu-eng.eng")]
    stsb = os.path.join(DATA, "dev", "stsbenchmark", "sts-test.csv")
    sts12 = os.path.join(DATA, "dev", "sts12-16_en", "STS12-en-test", "STS.input.MSRvid.txt")
    multi = os.path.join(DATA, "dev", "stsb_multi_mt")
    bd, bf = d["bucc_deu"], d["bucc_fra"]
    return [
        ("mine_exact", ["mine", de, en, "--ids", "-o", "{out}/mine_exact.tsv", "-q"]),
        ("mine_fp32_shards", ["mine", de, en, "--ids", "--precision", "fp32", "--shard-rows", "5000",
                              "--mode", "intersect", "-o", "{out}/mine_fp32_shards.tsv", "-q"]),
        ("mine_ivf", ["mine", de, en, "--ids", "--index", "ivf", "--nlist", "64", "--nprobe", "8",
                      "--recall-check", "300", "-o", "{out}/mine_ivf.tsv"]),
        ("mine_ivfpq", ["mine", de, en, "--ids", "--index", "ivfpq", "--nlist", "32", "--nprobe", "8",
                        "-o", "{out}/mine_ivfpq.tsv", "-q"]),
        ("mine_rules_sif", ["mine", de, en, "--ids", "--rules", "--src-lang", "de", "--tgt-lang", "en", "--sif",
                            "--margin", "distance", "--mode", "union", "--threshold", "0.05",
                            "-o", "{out}/mine_rules_sif.tsv"]),
        ("encode", ["encode", de, "-o", "{out}/de.npy", "-q"]),
        ("encode_en", ["encode", en, "-o", "{out}/en.npy", "-q"]),
        ("encode_fp16_sif", ["encode", de, "-o", "{out}/de_fp16_sif.npy", "--fp16", "--sif", "--batch-tokens",
                             "3000", "-q"]),
        ("encode_chunks", ["encode", de, en, "-o", "{out}/chunks", "--chunk-lines", "7000", "-q"]),
        ("mine_emb", ["mine", de, en, "--src-emb", "{out}/de.npy", "--tgt-emb", "{out}/en.npy", "--mode",
                      "forward", "--k", "6", "-o", "{out}/mine_emb.tsv", "-q"]),
        ("score", ["score", noisy, "-o", "{out}/score.tsv", "-q"]),
        ("filter_cosine", ["filter", noisy, "--src-lang", "de", "--tgt-lang", "en", "--min-score", "0.5",
                           "--rejects", "{out}/filter_rejects.tsv", "--stats", "{out}/filter_stats.json",
                           "-o", "{out}/filter_kept.tsv", "-q"]),
        ("filter_margin", ["filter", noisy, "--score", "margin", "--annotate", "--chunk-lines", "5000",
                           "--workers", "2", "-o", "{out}/filter_margin.tsv.gz", "-q"]),
        ("filter_rules", ["filter", noisy, "--score", "none", "--langid", "full", "--src-lang", "de", "--tgt-lang",
                          "en", "--dedup-src", "--rejects", "{out}/filter_rules_rejects.tsv",
                          "-o", "{out}/filter_rules.tsv", "-q"]),
        ("calibrate", ["calibrate", "--src", tdeu[0], "--tgt", tdeu[1], "--json", ">", "{out}/calibrate.json"]),
        ("calibrate_margin", ["calibrate", "--src", tdeu[0], "--tgt", tdeu[1], "--score", "margin", "--json",
                              ">", "{out}/calibrate_margin.json"]),
        ("eval_tatoeba", ["eval", "tatoeba", "--all", TATOEBA, "--lang", "deu", "--lang", "cmn", "--lang", "ara",
                          "--json", ">", "{out}/eval_tatoeba.json"]),
        ("eval_tatoeba_sif", ["eval", "tatoeba", *tdeu, "--sif", "--json", ">", "{out}/eval_tatoeba_sif.json"]),
        ("eval_sts", ["eval", "sts", stsb, sts12, "--json", ">", "{out}/eval_sts.json"]),
        ("eval_sts_pair", ["eval", "sts", "--pair", os.path.join(multi, "stsb-en-test.csv"),
                           os.path.join(multi, "stsb-de-test.csv"), "--json", ">", "{out}/eval_sts_pair.json"]),
        ("eval_bucc", ["eval", "bucc", *bd, "--tune-on", *bf, "--json", ">", "{out}/eval_bucc.json"]),
        ("eval_bucc_ivf", ["eval", "bucc", *bd, "--oracle", "--index", "ivf", "--nlist", "16", "--nprobe", "4",
                           "--json", ">", "{out}/eval_bucc_ivf.json"]),
        ("train_sp", ["train", *tr, "--out", "{out}/train_sp", "--dev-tatoeba", *tdeu, "--dev-sts", stsb]),
        ("train_sp_stop", ["train", *tr, "--out", "{out}/train_sp_resumed", "--max-steps", "40"]),
        ("train_sp_resume", ["train", *tr, "--out", "{out}/train_sp_resumed", "--resume"]),
        ("train_word", ["train", *tr, "--out", "{out}/train_word", "--encoder", "word", "--negatives", "mix"]),
        ("train_trigram", ["train", *tr, "--out", "{out}/train_trigram", "--encoder", "trigram",
                           "--negatives", "random"]),
        ("train_blstm", ["train", *tr, "--out", "{out}/train_blstm", "--encoder", "blstm-sp", "--max-steps", "25"]),
        ("train_paraphrase", ["train", *tr, "--out", "{out}/train_paraphrase", "--paraphrase", "--fp32"]),
        ("train_untrained", ["train", *tr, "--out", "{out}/train_untrained", "--untrained"]),
        ("mine_trained", ["mine", de, en, "--model", "{out}/train_sp", "--ids", "-o", "{out}/mine_trained.tsv", "-q"]),
    ]


def run(out: str, code: str, only: list[str]) -> None:
    os.makedirs(out, exist_ok=True)
    work = os.path.join(out, "_inputs")
    os.makedirs(work, exist_ok=True)
    d = prepare(work)
    env = dict(os.environ, PYTHONPATH=os.path.abspath(code), PYTHONHASHSEED="0")
    log = open(os.path.join(out, "_log.txt"), "a")
    for name, args in commands(d):
        if only and name not in only:
            continue
        args = [a.replace("{out}", out) for a in args]
        redirect = None
        if ">" in args:
            redirect, args = args[args.index(">") + 1], args[:args.index(">")]
        t = time.time()
        with open(redirect, "w") if redirect else open(os.path.join(out, f"{name}.stdout"), "w") as so:
            p = subprocess.run([sys.executable, "-m", "bitextmine", *args], stdout=so, stderr=subprocess.PIPE,
                               env=env, cwd=work, text=True)
        with open(os.path.join(out, f"{name}.stderr"), "w") as f:
            f.write(p.stderr)
        log.write(f"{name}\trc={p.returncode}\t{time.time() - t:.1f}s\n")
        log.flush()
        print(f"{name}: rc={p.returncode} {time.time() - t:.1f}s", flush=True)
    digests = {}
    for root, _, files in os.walk(out):
        for f in files:
            path = os.path.join(root, f)
            rel = os.path.relpath(path, out)
            if rel.startswith("_") or rel == "sha256.json" or (rel.startswith("train_") and rel.endswith(".stderr")):
                continue  # training's summary line holds its time
            with open(path, "rb") as fh:
                digests[rel] = hashlib.sha256(fh.read()).hexdigest()
    with open(os.path.join(out, "sha256.json"), "w") as f:
        json.dump(dict(sorted(digests.items())), f, indent=1)


def compare(a: str, b: str) -> int:
    da = json.load(open(os.path.join(a, "sha256.json")))
    db = json.load(open(os.path.join(b, "sha256.json")))
    names = sorted(set(da) & set(db))  # a snapshot made with --only holds a part of the files
    differ = [n for n in names if da[n] != db[n]]
    for n in differ:
        print(f"DIFFERS {n}: {da[n][:12]} vs {db[n][:12]}")
    for n in sorted(set(da) ^ set(db)):
        print(f"only in {'A' if n in da else 'B'}: {n}")
    print(f"{len(names) - len(differ)} of {len(names)} files in both identical")
    return 1 if differ else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?")
    ap.add_argument("--code", default=os.path.join(HERE, ".."), help="Checkout whose bitextmine runs.")
    ap.add_argument("--only", action="append", default=[], help="Run only this step (repeatable).")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    args = ap.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    if not args.out:
        ap.error("OUT or --compare A B")
    run(args.out, args.code, args.only)


if __name__ == "__main__":
    main()
