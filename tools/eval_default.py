"""Tatoeba v1 accuracy (8 languages <-> English) and STS Benchmark Pearson r of a model, as a table.

    python tools/eval_default.py [--model DIR] [--json]

Tatoeba: nearest neighbour by cosine, both directions, accuracy in % (100 - error rate).
STS Benchmark: Pearson r x 100 between cosine and gold score, dev and test.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from bitextmine.corpus import read_parallel
from bitextmine.encoding import encode
from bitextmine.evaluation.metrics import retrieval_accuracy, sts_pearson
from bitextmine.evaluation.readers import read_stsbenchmark
from bitextmine.loading import load_model

DEV = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "dev")
LANGS = ["deu", "fra", "spa", "ces", "rus", "cmn", "tur", "ara"]


def evaluate(model, dev: str = DEV) -> dict:
    out: dict = {"tatoeba": {}, "sts": {}}
    for lang in LANGS:
        base = os.path.join(dev, "tatoeba", "v1", f"tatoeba.{lang}-eng")
        x, y = read_parallel(f"{base}.{lang}", f"{base}.eng")
        a_xy, a_yx = retrieval_accuracy(encode(x, model), encode(y, model))
        out["tatoeba"][lang] = {"xx->en": 100 * a_xy, "en->xx": 100 * a_yx, "mean": 50 * (a_xy + a_yx), "pairs": len(x)}
    for split in ("dev", "test"):
        d = read_stsbenchmark(os.path.join(dev, "stsbenchmark", f"sts-{split}.csv"))
        out["sts"][f"stsb-{split}"] = sts_pearson(encode(d.s1, model), encode(d.s2, model), d.gold)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="model directory (default: the bundled model)")
    ap.add_argument("--dev", default=DEV)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    model = load_model(args.model)
    t = time.time()
    res = evaluate(model, args.dev)
    if args.json:
        print(json.dumps(res, indent=1))
        return
    print(f"model {model.fingerprint} (vocabulary {model.config['vocab_size']}, dim {model.dim}); {time.time() - t:.0f}s")
    print("| Tatoeba v1 | xx->en | en->xx | mean acc % |")
    print("|---|---|---|---|")
    for lang, r in res["tatoeba"].items():
        print(f"| {lang}-eng | {r['xx->en']:.1f} | {r['en->xx']:.1f} | {r['mean']:.1f} |")
    tat = res["tatoeba"]
    print(f"| mean deu/fra/spa | | | {sum(tat[x]['mean'] for x in ('deu', 'fra', 'spa')) / 3:.1f} |")
    print(f"| mean of 8 | | | {sum(r['mean'] for r in tat.values()) / len(tat):.1f} |")
    for k, v in res["sts"].items():
        print(f"| {k} Pearson r x 100 | | | {v:.1f} |")


if __name__ == "__main__":
    main()
