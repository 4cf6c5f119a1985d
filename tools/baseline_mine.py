"""The usual way to mine, written plainly as a baseline for `bitextmine mine` (as LASER's mine.py does it).

    python tools/baseline_mine.py SRC.npy TGT.npy OUT.tsv [--k 4] [--index flat|ivf] [--nprobe 32]

Loads both embedding matrices into memory, searches k nearest neighbours in both directions with a
FAISS index in query blocks, then scores every candidate in a Python loop (ratio margin: cosine over
the mean of the two sides' neighbour means) and selects pairs with LASER's "max" retrieval: the best
candidate of each source and of each target, taken best score first, each sentence used once.
Writes ``score<TAB>src_row<TAB>tgt_row`` for pairs scoring at least --threshold.
"""

from __future__ import annotations

import argparse
import time

import faiss
import numpy as np


def knn(x: np.ndarray, y: np.ndarray, k: int, index: str, nlist: int, nprobe: int, block: int = 16384):
    d = y.shape[1]
    if index == "flat":
        idx = faiss.IndexFlatIP(d)
    else:
        idx = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
        rows = np.sort(np.random.default_rng(1).choice(len(y), min(len(y), 64 * nlist), replace=False))
        idx.train(y[rows])
        idx.nprobe = nprobe
    idx.add(y)
    sims, inds = [], []
    for a in range(0, len(x), block):
        s, i = idx.search(x[a : a + block], k)
        sims.append(s)
        inds.append(i)
    return np.concatenate(sims), np.concatenate(inds)


def score_candidates(x, y, candidate_inds, fwd_mean, bwd_mean):
    scores = np.zeros(candidate_inds.shape)
    for i in range(scores.shape[0]):
        for j in range(scores.shape[1]):
            k = candidate_inds[i, j]
            scores[i, j] = x[i].dot(y[k]) / ((fwd_mean[i] + bwd_mean[k]) / 2)
    return scores


def mine(x: np.ndarray, y: np.ndarray, k: int, threshold: float, index: str, nlist: int, nprobe: int):
    x2y_sim, x2y_ind = knn(x, y, k, index, nlist, nprobe)
    y2x_sim, y2x_ind = knn(y, x, k, index, nlist, nprobe)
    x2y_mean = x2y_sim.mean(axis=1)
    y2x_mean = y2x_sim.mean(axis=1)
    fwd_scores = score_candidates(x, y, x2y_ind, x2y_mean, y2x_mean)
    bwd_scores = score_candidates(y, x, y2x_ind, y2x_mean, x2y_mean)
    fwd_best = x2y_ind[np.arange(x.shape[0]), fwd_scores.argmax(axis=1)]
    bwd_best = y2x_ind[np.arange(y.shape[0]), bwd_scores.argmax(axis=1)]
    indices = np.stack((np.concatenate((np.arange(x.shape[0]), bwd_best)),
                        np.concatenate((fwd_best, np.arange(y.shape[0])))), axis=1)
    scores = np.concatenate((fwd_scores.max(axis=1), bwd_scores.max(axis=1)))
    seen_src, seen_trg = set(), set()
    out = []
    for i in np.argsort(-scores):
        src_ind, trg_ind = indices[i]
        if src_ind not in seen_src and trg_ind not in seen_trg:
            seen_src.add(src_ind)
            seen_trg.add(trg_ind)
            if scores[i] >= threshold:
                out.append((scores[i], src_ind, trg_ind))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("tgt")
    ap.add_argument("out")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--threshold", type=float, default=0.0)
    ap.add_argument("--index", choices=["flat", "ivf"], default="flat")
    ap.add_argument("--nlist", type=int, default=0)
    ap.add_argument("--nprobe", type=int, default=32)
    args = ap.parse_args()
    t = time.perf_counter()
    x = np.load(args.src).astype(np.float32)
    y = np.load(args.tgt).astype(np.float32)
    nlist = args.nlist or max(16, int(4 * np.sqrt(len(y))))
    pairs = mine(x, y, args.k, args.threshold, args.index, nlist, args.nprobe)
    with open(args.out, "w") as f:
        for s, a, b in pairs:
            f.write(f"{s:.6f}\t{a}\t{b}\n")
    print(f"{len(pairs)} pairs in {time.perf_counter() - t:.1f}s")


if __name__ == "__main__":
    main()
