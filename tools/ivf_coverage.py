"""How much of the exact neighbourhood an inverted index can reach on real embeddings, and at what cost.

    python tools/ivf_coverage.py --work DIR [--n 200000] [--nlist 256 1024] [--nprobe 8 16 32 64] [--center]

Uses the embeddings that tools/bench_mine.py caches in DIR (src.N.npy, tgt.N.npy). Finds the exact 4
nearest targets of every source (bitextmine.search.exact.knn_both), clusters both sides with spherical k-means
(seeded sample of 64 rows per cell), assigns each target to its nearest centroid and lets each source
probe its nprobe nearest centroids. Prints, per setting, recall@4 of that probing (the share of the exact
4 neighbours that lie in a probed cell: what an IVF index with exact in-cell search finds) and the share
of all source-target products it computes. --center subtracts each side's mean before clustering.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import torch

from bitextmine.search.exact import knn_both


def kmeans(data: torch.Tensor, nlist: int, iters: int = 10, seed: int = 0) -> torch.Tensor:
    """Spherical k-means: unit centroids float32 (nlist, d) of the rows of data (bf16 (r, d))."""
    gen = torch.Generator().manual_seed(seed)
    C = data[torch.randperm(len(data), generator=gen)[:nlist]].float()
    for _ in range(iters):
        C = torch.nn.functional.normalize(C, dim=1)
        a = assign(data, C, 1)[:, 0]
        sums = torch.zeros_like(C).index_add_(0, a, data.float())
        C = torch.where(torch.bincount(a, minlength=nlist)[:, None] > 0, sums, C)
    return torch.nn.functional.normalize(C, dim=1)


def assign(data: torch.Tensor, C: torch.Tensor, top: int, block: int = 65536) -> torch.Tensor:
    """The ``top`` nearest centroids of each row: int64 (r, top) (ties to the lower centroid)."""
    from bitextmine.search.topk import topk

    return topk(data, C.to(data.dtype), top, block=block).I


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--nlist", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--nprobe", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--center", action="store_true")
    args = ap.parse_args()
    x = np.load(os.path.join(args.work, f"src.{args.n}.npy"))
    y = np.load(os.path.join(args.work, f"tgt.{args.n}.npy"))
    _, exact, *_ = knn_both(x, y, 4)
    if args.center:
        x, y = x - x.mean(0), y - y.mean(0)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        y /= np.linalg.norm(y, axis=1, keepdims=True)
    X, Y = torch.from_numpy(x).bfloat16(), torch.from_numpy(y).bfloat16()
    rng = np.random.default_rng(1)
    print(f"{args.n:,} x {args.n:,}" + (", centred" if args.center else ""))
    print("| cells | probed | recall@4 | share of products |")
    print("|---|---|---|---|")
    for nlist in args.nlist:
        half = 32 * nlist
        sample = torch.cat([X[rng.choice(len(X), min(half, len(X)), replace=False)],
                            Y[rng.choice(len(Y), min(half, len(Y)), replace=False)]])
        C = kmeans(sample, nlist)
        cell = assign(Y, C, 1)[:, 0].numpy()
        sizes = np.bincount(cell, minlength=nlist)
        for nprobe in args.nprobe:
            if nprobe >= nlist:
                continue
            probe = assign(X, C, nprobe).numpy()
            covered = (cell[exact][:, :, None] == probe[:, None, :]).any(2).mean()
            work = sizes[probe].sum() / (len(x) * len(y))
            print(f"| {nlist} | {nprobe} | {covered:.3f} | {work:.3f} |")


if __name__ == "__main__":
    main()
