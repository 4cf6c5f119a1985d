"""Probe (not product code): a second stage that scores only the candidates `mine` proposes and tells a
translation from a same-topic sentence, on the sparse dev tasks (tools/sparse_tasks.py), with what each group
of features adds.

    python tools/probe_second_stage.py [--langs fr ru] [--shares 0.01 0.1] [--draws 3] [--max-pairs 0]

Tasks: tools/sparse_tasks.py's builder with its defaults (1,000 lines a side, its seeds), ``--draws`` draws per
gold share. Candidates: every pair `mine` would consider in mode max with every floor off (threshold, min-z and
min-cosine 0: :func:`bitextmine.mining.mine.candidates` then :func:`bitextmine.mining.select.finish` with the
standout z computed), labelled against the gold pairs. Features per candidate (s, t):

  margin        the ratio margin (k = 4), mine's score
  cosine, z     the cosine and the standout z
  length        |log(pieces of s / pieces of t)|
  raw IBM1      IBM model 1 over the bundled model's pieces both ways (bitextmine.lexicon.score), trained on the
                language's training corpora less every pair sharing a text with a held-apart pair
                (tools/probe_lexicon.py's training_pairs; a seeded subsample of --max-pairs)
  normalised    each raw IBM1 score minus the mean of (the same score over s's 4 nearest targets by cosine and
                over t's 4 nearest sources), averaged: the margin's normalisation applied to the lexicon

A logistic regression (standardised features, L2, Newton's method: :func:`fit_logistic`) per language and
feature set is trained on the candidates of every draw but one (both shares together) and tested on the
left-out draw, each draw in turn, so a task is never scored by a model trained on it. Cells: best-threshold F1
on the test draws (mean over the draws), and in brackets the best precision at recall >= 0.95, the mean over
the draws whose candidates reach that recall, with how many do when not all (a dash: none); recall counts every
gold pair, also those the candidates miss (the first row: the share of gold pairs among the candidates). The last row
applies one probability threshold, chosen on the training draws (the best mean F1 over their tasks of both
shares), to the test draws with the full feature set.

The core (the product's logistic regression, :func:`neighbourhood_normalised`, :func:`precision_at_recall`)
needs only numpy; tests/test_probe_second_stage.py checks it against slow references.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from sparse_tasks import best_f1, build_task, clean_pool, read_pairs

sys.path.insert(0, os.path.join(HERE, ".."))
from bitextmine.judge.logistic import fit_logistic, predict  # noqa: E402

K = 4
FEATURE_SETS = {
    "margin alone": ["margin"],
    "+ cosine, z, length ratio": ["margin", "cosine", "z", "length"],
    "+ raw IBM1 both ways": ["margin", "cosine", "z", "length", "ibm_fx", "ibm_en"],
    "+ IBM1 normalised by the neighbourhood": ["margin", "cosine", "z", "length", "ibm_fx", "ibm_en",
                                               "norm_fx", "norm_en"],
}


# ---------------------------------------------------------------------------------------------- the core


def neighbourhood_normalised(pair_score, s: np.ndarray, t: np.ndarray, I_st: np.ndarray,
                             I_ts: np.ndarray) -> np.ndarray:
    """Scores of the candidate pairs (s, t) int (c,) minus their neighbourhood mean.

    ``pair_score(i, j)``: scores float (...) of source rows i with target rows j (int arrays of one shape).
    ``I_st`` int (n, k): each source row's k nearest target rows; ``I_ts`` int (m, k): each target row's k
    nearest source rows. Returns float64 (c,): score(s, t) - (mean_j score(s, I_st[s, j]) +
    mean_i score(I_ts[t, i], t)) / 2, as the margin normalises the cosine (over the finite entries of a
    neighbourhood; an index slot of -1 counts as missing)."""
    s, t = np.asarray(s, np.int64), np.asarray(t, np.int64)
    own = np.asarray(pair_score(s, t), np.float64)
    ns, nt = I_st[s], I_ts[t]
    a = np.asarray(pair_score(np.repeat(s[:, None], ns.shape[1], 1), np.maximum(ns, 0)), np.float64)
    b = np.asarray(pair_score(np.maximum(nt, 0), np.repeat(t[:, None], nt.shape[1], 1)), np.float64)
    mean_a = np.where(ns >= 0, a, 0).sum(1) / np.maximum((ns >= 0).sum(1), 1)
    mean_b = np.where(nt >= 0, b, 0).sum(1) / np.maximum((nt >= 0).sum(1), 1)
    return own - (mean_a + mean_b) / 2


def precision_at_recall(scores: np.ndarray, hit: np.ndarray, n_gold: int, recall: float = 0.95) -> float:
    """The best precision of any threshold on ``scores`` float (c,) (keeping pairs scoring at least it) whose
    recall over ``n_gold`` gold pairs is at least ``recall``; ``hit`` bool (c,): which candidates are gold.
    NaN when no threshold reaches that recall."""
    order = np.argsort(-scores, kind="stable")
    sc, h = scores[order], hit[order]
    tp = np.cumsum(h)
    n = np.arange(1, len(sc) + 1)
    last = np.r_[sc[1:] != sc[:-1], True] if len(sc) else np.zeros(0, bool)
    ok = last & (tp >= recall * n_gold - 1e-9)
    return float((tp / n)[ok].max()) if ok.any() else float("nan")


def f1_at(scores: np.ndarray, hit: np.ndarray, n_gold: int, threshold: float) -> float:
    """F1 of the candidates scoring at least ``threshold``."""
    keep = scores >= threshold
    tp = int(hit[keep].sum())
    return 2 * tp / (int(keep.sum()) + n_gold) if tp else 0.0


# ---------------------------------------------------------------------------------------------- candidates


def task_candidates(task, model, fwd, bwd) -> dict:
    """Every feature of the candidates of one task (module docstring) and their labels: {name: array (c,)},
    "hit" bool, and "n_gold"."""
    from probe_lexicon import subset

    from bitextmine.config import MineConfig
    from bitextmine.encoding import encode
    from bitextmine.lexicon import score
    from bitextmine.mining.margin import (
        best_candidates,
        candidate_scores,
        neighbour_means,
    )
    from bitextmine.mining.mine import neighbours
    from bitextmine.mining.select import finish
    from bitextmine.mining.standout import moments_of, pair_standout

    config = MineConfig(threshold=-np.inf, min_z=0.0, min_cosine=0.0, mode="max", per_language=False)
    x, y = encode(task.src, model), encode(task.tgt, model)
    Dxy, Ixy, Dyx, Iyx, _ = neighbours(x, y, config)
    mx, my = neighbour_means(Dxy), neighbour_means(Dyx)
    f = best_candidates(Dxy, Ixy, candidate_scores(Dxy, Ixy, mx, my[Ixy], config.margin))
    tgt, src, sc, cos = best_candidates(Dyx, Iyx, candidate_scores(Dyx, Iyx, my, mx[Iyx], config.margin))
    mox, moy = moments_of(x), moments_of(y)

    def standout(s, t, c):
        return pair_standout(c, s, t, lambda i: x[i], lambda i: y[i], mox, moy)

    s, t, sc, cos, _, z, _ = finish(f, (src, tgt, sc, cos), config, standout)
    tok = model.tokenizer
    fx_flat, en_flat = tok.encode(task.src), tok.encode(task.tgt)
    fx_len = np.diff(fx_flat[1], append=len(fx_flat[0]))
    en_len = np.diff(en_flat[1], append=len(en_flat[0]))

    def ibm(direction):
        def pair_score(i, j):  # foreign rows i, English rows j
            e, fr = subset(en_flat, j.ravel()), subset(fx_flat, i.ravel())
            out = score(fwd, e, fr) if direction == "fx" else score(bwd, fr, e)
            return np.asarray(out).reshape(i.shape)
        return pair_score

    feats = {"margin": sc, "cosine": cos, "z": z,
             "length": np.abs(np.log(np.maximum(fx_len[s], 1) / np.maximum(en_len[t], 1)))}
    for d in ("fx", "en"):
        feats[f"ibm_{d}"] = ibm(d)(s, t)
        feats[f"norm_{d}"] = neighbourhood_normalised(ibm(d), s, t, Ixy, Iyx)
    gold = task.gold
    feats = {k: np.asarray(v, np.float64) for k, v in feats.items()}
    feats["hit"] = np.array([(int(a) + 1, int(b) + 1) in gold for a, b in zip(s, t)], bool)
    feats["n_gold"] = len(gold)
    return feats


def train_tables(lang: str, max_pairs: int, seed: int, model):
    """IBM model 1 both ways over the bundled model's pieces: (t(foreign|English), t(English|foreign))."""
    from probe_lexicon import training_pairs
    from train_default import DATA, corpora

    from bitextmine.lexicon import train_ibm1, vocabulary_fingerprint

    tok = model.tokenizer
    with tempfile.TemporaryDirectory(prefix="probe-second-stage-") as tmp:
        en, fx, dropped = training_pairs(corpora(os.path.join(DATA, "train"), tmp), lang,
                                         os.path.join(HERE, "..", ".bench", "holdout"))
    rng = np.random.default_rng([seed, sum(map(ord, lang))])
    take = np.sort(rng.permutation(len(en))[: max_pairs or len(en)])
    e, f = tok.encode([en[i] for i in take]), tok.encode([fx[i] for i in take])
    fp = vocabulary_fingerprint(tok.proto)
    t0 = time.perf_counter()
    fwd = train_ibm1(*e, *f, tok.vocab_size, tok.vocab_size, fingerprint=fp)
    bwd = train_ibm1(*f, *e, tok.vocab_size, tok.vocab_size, fingerprint=fp)
    print(f"{lang}: IBM1 both ways on {len(take):,} of {len(en):,} training pairs ({dropped} left out for sharing a "
          f"text with a held-apart pair) in {time.perf_counter() - t0:.0f} s", flush=True)
    return fwd, bwd


# ---------------------------------------------------------------------------------------------- the table


def matrix(cands: list[dict], names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    return np.concatenate([np.c_[tuple(c[n] for n in names)] for c in cands]), np.concatenate([c["hit"] for c in cands])


def evaluate_language(tasks: dict, l2: float) -> dict:
    """{(row, share): (mean best F1, mean precision at recall 0.95)} over the left-out draws; ``tasks``
    {(share, draw): candidates}."""
    shares = sorted({s for s, _ in tasks})
    draws = sorted({d for _, d in tasks})
    out = {}
    for row, names in FEATURE_SETS.items():
        cells = {s: [] for s in shares}
        for d in draws:
            model = fit_logistic(*matrix([c for (s, e), c in tasks.items() if e != d], names), l2=l2)
            for s in shares:
                c = tasks[(s, d)]
                p = predict(model, np.c_[tuple(c[n] for n in names)])
                cells[s].append((best_f1(p, c["hit"], c["n_gold"])[0], precision_at_recall(p, c["hit"], c["n_gold"])))
        for s in shares:
            out[(row, s)] = (float(np.mean([v[0] for v in cells[s]])), [v[1] for v in cells[s]])
    for s in shares:
        out[("gold pairs among the candidates (the recall any stage can reach)", s)] = (
            float(np.mean([tasks[(s, d)]["hit"].sum() / tasks[(s, d)]["n_gold"] for d in draws])), None)
    names = list(FEATURE_SETS.values())[-1]
    cells = {s: [] for s in shares}
    chosen = []
    for d in draws:
        train = [c for (s, e), c in tasks.items() if e != d]
        model = fit_logistic(*matrix(train, names), l2=l2)
        probs = [predict(model, np.c_[tuple(c[n] for n in names)]) for c in train]
        grid = np.unique(np.concatenate(probs))
        mean_f1 = [np.mean([f1_at(p, c["hit"], c["n_gold"], g) for p, c in zip(probs, train)]) for g in grid]
        g = float(grid[int(np.argmax(mean_f1))])
        chosen.append(g)
        for s in shares:
            c = tasks[(s, d)]
            cells[s].append(f1_at(predict(model, np.c_[tuple(c[n] for n in names)]), c["hit"], c["n_gold"], g))
    for s in shares:
        out[("one probability threshold, chosen on the training draws (all features)", s)] = (np.mean(cells[s]), None)
    out["chosen"] = chosen
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--langs", nargs="+", default=["fr", "ru"])
    ap.add_argument("--shares", type=float, nargs="+", default=[0.01, 0.1])
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--size", type=int, default=1000, help="lines a side")
    ap.add_argument("--seed", type=int, default=0, help="sparse_tasks' seed")
    ap.add_argument("--max-pairs", type=int, default=0, help="IBM1: a seeded subsample of the training pairs (0: all)")
    ap.add_argument("--l2", type=float, default=1.0, help="the logistic regression's L2 weight")
    ap.add_argument("--json", default="", help="also write the cells to this file")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(HERE, ".."))
    from bitextmine.model import load_model

    model = load_model()
    results = {}
    for lang in args.langs:
        pool, _ = clean_pool(read_pairs(lang))
        fwd, bwd = train_tables(lang, args.max_pairs, args.seed, model)
        tasks = {}
        for share in args.shares:
            for d in range(args.draws):
                seed = [args.seed, sum(map(ord, lang)), int(share * 1000), d]  # sparse_tasks.build_all's
                task = build_task(pool, args.size, share, np.random.default_rng(seed))
                tasks[(share, d)] = c = task_candidates(task, model, fwd, bwd)
                print(f"  {lang} {share:.0%} draw {d}: {len(c['hit'])} candidates, {int(c['hit'].sum())} of "
                      f"{c['n_gold']} gold pairs among them", flush=True)
        results[lang] = evaluate_language(tasks, args.l2)
        print(f"  {lang}: probability thresholds chosen per left-out draw: "
              + ", ".join(f"{g:.3f}" for g in results[lang]["chosen"]), flush=True)
    cols = [(lang, s) for lang in args.langs for s in args.shares]
    print(f"\nbest-threshold F1 on the left-out draws, mean of {args.draws} (precision at recall 0.95); "
          f"{args.size:,} lines a side")
    print("| features | " + " | ".join(f"{lang} {s:.0%}" for lang, s in cols) + " |")
    print("|---|" + "---|" * len(cols))
    rows = (["gold pairs among the candidates (the recall any stage can reach)"] + list(FEATURE_SETS)
            + ["one probability threshold, chosen on the training draws (all features)"])
    for row in rows:
        print(f"| {row} | " + " | ".join(cell(*results[lang][(row, s)]) for lang, s in cols) + " |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({lang: {f"{row} @ {s}": v for (row, s), v in r.items()} for lang, r in
                       ((lang, {k: v for k, v in r.items() if k != "chosen"}) for lang, r in results.items())},
                      f, indent=1)


def cell(f1: float, precisions: list[float] | None) -> str:
    """F1 in %, and the mean precision at recall 0.95 over the draws reaching it (with their count when not
    all; a dash when none)."""
    if precisions is None:
        return f"{100 * f1:.1f}"
    ok = [p for p in precisions if not np.isnan(p)]
    if not ok:
        return f"{100 * f1:.1f} (-)"
    more = "" if len(ok) == len(precisions) else f", {len(ok)}/{len(precisions)}"
    return f"{100 * f1:.1f} ({100 * np.mean(ok):.1f}{more})"


if __name__ == "__main__":
    main()
