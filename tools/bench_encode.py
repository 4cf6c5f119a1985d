"""Encoding speed against the raw SentencePiece tokenizer on a real corpus, in one run.

    python tools/bench_encode.py [--model DIR] [--precision fp32 fp16] [FILE ...]

Prints a table: the raw batched SentencePiece rate (``encode(batch, num_threads=all)`` on lines already in
memory), as a user's script calls it and with Python's cyclic garbage collector off during the calls
(SentencePiece's best: its many small results otherwise trigger collections), and the end-to-end
``bitextmine encode`` rate (read + decode + tokenise + embed + normalise + write .npy), in sentences per
second, and the ratios; and ``encode()`` of the texts already in memory (what ``mine`` does with its
distinct lines). Best of --repeat runs each. The raw rates are measured before torch is imported
(its 150,000 objects make every collection slower).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time

from bitextmine.config import EncodeConfig
from bitextmine.corpus import read_lines
from bitextmine.encoding import encode, encode_files
from bitextmine.loading import load_model

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "train")
# ~1M real sentences in 9 languages: news, UI strings, documentation, everyday sentences
DEFAULT_FILES = [os.path.join(DATA, c, f"en-{x}.{y}.gz") for c in ("wmt_newstest", "debian_gettext_apps")
                 for x in ("de", "fr", "es", "cs", "ru", "zh", "tr") for y in (x, "en")] + \
                [os.path.join(DATA, "tatoeba_anki", f"en-{x}.{x}.gz") for x in ("de", "fr", "es")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", default=DEFAULT_FILES)
    ap.add_argument("--model", default=None)
    ap.add_argument("--batch-size", type=int, default=EncodeConfig.batch_size)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--precision", nargs="+", default=["fp32"], choices=["fp32", "fp16", "bf16"],
                    help="piece-table precision(s) of the end-to-end runs (each measured in the same run)")
    args = ap.parse_args()
    model = load_model(args.model)
    lines = [line for f in args.files for line in read_lines(f)]
    n = len(lines)
    sp = model.tokenizer.sp
    B = args.batch_size
    raw_best = {"default": float("inf"), "gc off": float("inf")}
    for _ in range(args.repeat):
        for mode in raw_best:
            if mode == "gc off":
                gc.disable()
            t = time.perf_counter()
            for a in range(0, n, B):
                sp.encode(lines[a : a + B], num_threads=-1)
            raw_best[mode] = min(raw_best[mode], time.perf_counter() - t)
            gc.enable()
    assert "torch" not in sys.modules, "the raw rates must be measured before torch is imported"
    e2e_best = {p: float("inf") for p in args.precision}
    mem_best = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
        for _ in range(args.repeat):
            for p in args.precision:
                out = os.path.join(tmp, "x.npy")
                if os.path.exists(out):  # a fresh output each time: freeing the last one is not encoding
                    os.remove(out)
                t = time.perf_counter()
                encode_files([corpus], out, model,
                             config=EncodeConfig(batch_size=B, device="cpu", precision=p))
                e2e_best[p] = min(e2e_best[p], time.perf_counter() - t)
            t = time.perf_counter()  # texts already in memory, as `mine` encodes its distinct lines
            encode(lines, model, config=EncodeConfig(batch_size=B, device="cpu"))
            mem_best = min(mem_best, time.perf_counter() - t)
    raw = {mode: n / best for mode, best in raw_best.items()}
    print(f"corpus: {n} sentences from {len(args.files)} file(s); model {model.fingerprint} (dim {model.dim}); "
          f"{os.cpu_count()} CPU cores; batch {B}; best of {args.repeat}")
    print(f"| {'stage':<52} | {'sentences/s':>12} |")
    print(f"|{'-' * 54}|{'-' * 14}|")
    print(f"| {'raw SentencePiece encode (batched, threaded)':<52} | {raw['default']:>12,.0f} |")
    print(f"| {'raw SentencePiece encode, cyclic GC off':<52} | {raw['gc off']:>12,.0f} |")
    for p, best in e2e_best.items():
        e2e = n / best
        print(f"| {'bitextmine encode end-to-end, ' + p + ' table':<52} | {e2e:>12,.0f} |")
        print(f"| {'  ratio to the raw tokenizer':<52} | {e2e / raw['default']:>12.2f} |")
        print(f"| {'  ratio to the raw tokenizer with GC off':<52} | {e2e / raw['gc off']:>12.2f} |")
    print(f"| {'bitextmine encode() of texts in memory (as mine)':<52} | {n / mem_best:>12,.0f} |")


if __name__ == "__main__":
    main()
