"""Probe: does an IBM model 1 table over the bundled model's pieces tell a translation from its nearest
non-translation better than the cosine and the margin do?

    python tools/probe_lexicon.py --langs fr ru tr ar      # all training pairs: about 6 minutes on 2 cores

Per language: the training corpora of ../shared/data/train (English first), leaving out every pair that
shares a text with a held-apart pair (tools/train_default.py --holdout; compared by f1_by_size.key, so
case and punctuation variants count as the same text) and every pair with an empty side. These pairs
(or a seeded subsample of --max-pairs) are tokenised with the bundled model's SentencePiece model, and
IBM model 1 is trained both ways (t(foreign|English) and t(English|foreign); bitextmine.lexicon), with
the time and the peak memory of each direction (tracemalloc's peak of the training call, which counts
numpy's buffers, and the process's peak resident size afterwards).

On the held-apart pairs (never trained on, neither by the model nor by the tables): for each English
line, its 4 nearest wrong foreign lines by the bundled model's cosine among the other held-apart pairs.
A score "wins" a line when the gold pair scores strictly above the best of those 4. Reported per score:
the share of lines won. Scores: cosine; ratio margin (k = 4 over the held-apart sets, as mine's);
IBM1 one way and the other (the normalised log-likelihood of bitextmine.lexicon.score); their sum; and
the sum normalised by the neighbourhood (minus the mean of the two sides' sums over their 4 nearest
candidates by cosine, as the margin does for the cosine). Last, the share that this normalised sum wins
among the lines the margin loses: what the lexicon could add to it. Also the rate of scoring pairs both
ways (the 4 wrong candidates of every line, in one process). --floor and --min-prob try other values of
the table's pruning floor and the score's floor per token.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from f1_by_size import key  # noqa: E402
from train_default import DATA, corpora, english_first  # noqa: E402

from bitextmine.corpus import read_parallel  # noqa: E402
from bitextmine.encoding import encode  # noqa: E402
from bitextmine.lexicon import score, train_ibm1, vocabulary_fingerprint  # noqa: E402
from bitextmine.mining.margin import margin_scores  # noqa: E402
from bitextmine.model import load_model  # noqa: E402

K = 4
INFO = ("lines", "pairs/s", "pieces")  # what separation() returns beside the shares


def training_pairs(specs, lang: str, holdout: str) -> tuple[list[str], list[str], int]:
    """(English, foreign) training pairs of ``lang`` without a text of a held-apart pair, and how many
    pairs that left out."""
    fx, en = read_parallel(os.path.join(holdout, f"en-{lang}.{lang}"), os.path.join(holdout, f"en-{lang}.en"))
    held = {key(t) for t in fx + en}
    out_en, out_fx, dropped = [], [], 0
    for spec in specs:
        if spec.group_name() != lang:
            continue
        src, tgt = spec.read()
        for a, b in zip(src, tgt) if english_first(spec) else zip(tgt, src):
            a, b = a.strip(), b.strip()
            if not a or not b:
                continue
            if key(a) in held or key(b) in held:
                dropped += 1
                continue
            out_en.append(a)
            out_fx.append(b)
    return out_en, out_fx, dropped


def timed_training(src, tgt, vocab: int, fingerprint: str, iters: int, floor: float | None) -> tuple:
    """The table, seconds, tracemalloc's peak (bytes) of the training call."""
    tracemalloc.start()
    t0 = time.perf_counter()
    table = train_ibm1(*src, *tgt, vocab, vocab, iters=iters, floor=floor, fingerprint=fingerprint)
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return table, seconds, peak


def subset(flat: tuple[np.ndarray, np.ndarray], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sentences ``rows`` of a flat (ids, offsets) batch, in the flat layout."""
    ids, off = flat
    lengths = np.diff(off, append=len(ids))[rows]
    starts = np.repeat(off[rows], lengths) + np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return ids[starts], np.cumsum(lengths) - lengths


def pair_scores(fwd, bwd, en_flat, fx_flat, i: np.ndarray, j: np.ndarray, min_prob: float | None) -> np.ndarray:
    """IBM1 scores of English lines ``i`` with foreign lines ``j`` (int64, same shape): float32 (..., 2),
    t(foreign|English) then t(English|foreign)."""
    e, f = subset(en_flat, i.ravel()), subset(fx_flat, j.ravel())
    return np.stack([score(fwd, e, f, min_prob=min_prob), score(bwd, f, e, min_prob=min_prob)],
                    axis=-1).reshape(*i.shape, 2)


def separation(model, fwd, bwd, holdout: str, lang: str, min_prob: float | None = None) -> dict[str, float]:
    """Share of held-apart English lines whose gold pair beats its 4 nearest wrong candidates, per score."""
    fx, en = read_parallel(os.path.join(holdout, f"en-{lang}.{lang}"), os.path.join(holdout, f"en-{lang}.en"))
    x, y = encode(en, model), encode(fx, model)
    cos = x @ y.T
    n = len(en)
    nn_en = np.argsort(-cos, axis=1, kind="stable")[:, :K]  # each English line's nearest foreign lines
    nn_fx = np.argsort(-cos.T, axis=1, kind="stable")[:, :K]
    wrong = np.argsort(-np.where(np.eye(n, dtype=bool), -np.inf, cos), axis=1, kind="stable")[:, :K]
    rows = np.arange(n)
    mean_en = np.take_along_axis(cos, nn_en, 1).mean(1)
    mean_fx = np.take_along_axis(cos.T, nn_fx, 1).mean(1)
    tok = model.tokenizer
    en_flat, fx_flat = tok.encode(en), tok.encode(fx)
    gold_ibm = pair_scores(fwd, bwd, en_flat, fx_flat, rows, rows, min_prob)
    t0 = time.perf_counter()
    wrong_ibm = pair_scores(fwd, bwd, en_flat, fx_flat, np.repeat(rows[:, None], K, 1), wrong, min_prob)
    rate = n * K / (time.perf_counter() - t0)
    # neighbourhood means of the summed IBM1 score: each English line over its K nearest foreign lines,
    # each foreign line over its K nearest English lines
    R = np.repeat(rows[:, None], K, 1)
    ibm_mean_en = pair_scores(fwd, bwd, en_flat, fx_flat, R, nn_en, min_prob).sum(-1).mean(1)
    ibm_mean_fx = pair_scores(fwd, bwd, en_flat, fx_flat, nn_fx, R, min_prob).sum(-1).mean(1)

    def normalised(s, i, j):
        return s - (ibm_mean_en[i] + ibm_mean_fx[j]) / 2

    scores = {
        "cosine": (cos[rows, rows], cos[R, wrong]),
        "margin (ratio, k=4)": (margin_scores(cos[rows, rows], mean_en, mean_fx),
                                margin_scores(cos[R, wrong], mean_en[:, None], mean_fx[wrong])),
        "IBM1 t(xx|en)": (gold_ibm[:, 0], wrong_ibm[..., 0]),
        "IBM1 t(en|xx)": (gold_ibm[:, 1], wrong_ibm[..., 1]),
        "IBM1 both (sum)": (gold_ibm.sum(-1), wrong_ibm.sum(-1)),
        "IBM1 both, minus neighbourhood mean": (normalised(gold_ibm.sum(-1), rows, rows),
                                                normalised(wrong_ibm.sum(-1), R, wrong)),
    }
    wins = {name: g > w.max(1) for name, (g, w) in scores.items()}
    lost = ~wins["margin (ratio, k=4)"]
    out = {name: float(won.mean()) for name, won in wins.items()}
    out["IBM1 normalised, of the margin's losses"] = float(wins["IBM1 both, minus neighbourhood mean"][lost].mean())
    pieces = f"{len(en_flat[0]) / n:.1f} / {len(fx_flat[0]) / n:.1f}"
    return out | {"lines": n, "pairs/s": rate, "pieces": pieces}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--langs", nargs="+", default=["fr", "ru"])
    ap.add_argument("--holdout", default=os.path.join(os.path.dirname(__file__), "..", ".bench", "holdout"))
    ap.add_argument("--max-pairs", type=int, default=0, help="a seeded subsample of the training pairs (0: all)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--floor", type=float, default=None, help="pruning floor (default: LexiconConfig's)")
    ap.add_argument("--min-prob", type=float, default=None, help="scoring's floor (default: LexiconConfig's)")
    args = ap.parse_args()
    model = load_model()
    tok = model.tokenizer
    fp = vocabulary_fingerprint(tok.proto)
    with tempfile.TemporaryDirectory(prefix="probe-lexicon-") as tmp:
        specs = corpora(os.path.join(DATA, "train"), tmp)
        results = defaultdict(dict)
        for lang in args.langs:
            en, fx, dropped = training_pairs(specs, lang, args.holdout)
            rng = np.random.default_rng([args.seed, sum(map(ord, lang))])
            take = np.sort(rng.permutation(len(en))[: args.max_pairs or len(en)])
            en_t, fx_t = [en[i] for i in take], [fx[i] for i in take]
            e, f = tok.encode(en_t), tok.encode(fx_t)
            print(f"{lang}: {len(en)} training pairs ({dropped} left out for sharing a text with a held-apart "
                  f"pair), {len(take)} used; pieces per line en {len(e[0]) / len(take):.1f}, "
                  f"{lang} {len(f[0]) / len(take):.1f}", flush=True)
            fwd, s1, m1 = timed_training(e, f, tok.vocab_size, fp, args.iters, args.floor)
            bwd, s2, m2 = timed_training(f, e, tok.vocab_size, fp, args.iters, args.floor)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
            print(f"  trained t({lang}|en) in {s1:.0f}s (peak {m1 / 2**30:.2f} GiB, {len(fwd):,} entries), "
                  f"t(en|{lang}) in {s2:.0f}s (peak {m2 / 2**30:.2f} GiB, {len(bwd):,} entries); "
                  f"process peak RSS {rss:.1f} GiB", flush=True)
            sep = separation(model, fwd, bwd, args.holdout, lang, args.min_prob)
            results[lang] = sep
            print(f"  held-apart pieces per line en / {lang} {sep['pieces']}; scored {sep['pairs/s']:,.0f} pairs/s "
                  f"both ways (one process); gold beats its {K} nearest wrong candidates (of {sep['lines']} held-apart "
                  "lines):", flush=True)
            for name, share in sep.items():
                if name not in INFO:
                    print(f"    {name:40s} {100 * share:5.1f} %", flush=True)
    names = [k for k in next(iter(results.values())) if k not in INFO]
    print("\n| score | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{100 * results[lang][name]:.1f}" for lang in results) + " |")


if __name__ == "__main__":
    main()
