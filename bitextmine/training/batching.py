"""Mega-batches of one topic (``--batch-order topic``): pairs whose sentences are near share a mega-batch, so
the hardest negative in it and the in-batch negatives are same-topic sentences, the near misses that mining
among same-domain lines has to reject.

At each epoch's start the pairs are embedded with the current weights (each pair as the normalised sum of its
two sides' normalised embeddings), clustered by spherical k-means into groups of about one mega-batch, and the
epoch's order is rearranged cluster by cluster (clusters in a random order, pairs shuffled within each). The
epoch's pairs stay the same: only their order changes. Text ids then compare a loose key (letters and digits,
case-folded): two lines that differ only in case, spaces or punctuation are one text, never each other's
negative (same-topic batches hold many such repeats in UI text).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable, Sequence

import numpy as np

_NOT_ALNUM = re.compile(r"[\W_]+")


def loose_key(text: str) -> str:
    """``text`` NFKC-normalised, case-folded, with everything but letters and digits removed."""
    return _NOT_ALNUM.sub("", unicodedata.normalize("NFKC", text).casefold())


def loose_text_ids(texts: Sequence[str]) -> np.ndarray:
    """int64 (n,): equal ids for texts with equal :func:`loose_key` (an empty key keeps the text itself)."""
    table: dict[str, int] = {}
    return np.fromiter((table.setdefault(loose_key(t) or t, len(table)) for t in texts), np.int64, count=len(texts))


def pair_embeddings(embed_side: Callable[[str, np.ndarray], np.ndarray], n: int, chunk: int = 100_000) -> np.ndarray:
    """float32 (n, d): for each pair, the normalised sum of its two sides' normalised embeddings.

    ``embed_side(side, rows)`` returns float32 (len(rows), d) L2-normalised embeddings of ``side`` ("src" or
    "tgt") rows ``rows`` (int64)."""
    parts = []
    for a in range(0, n, chunk):
        rows = np.arange(a, min(n, a + chunk), dtype=np.int64)
        x = embed_side("src", rows) + embed_side("tgt", rows)
        x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        parts.append(x.astype(np.float32, copy=False))
    return np.concatenate(parts) if parts else np.zeros((0, 0), np.float32)


def cluster_labels(x: np.ndarray, k: int, seed: int, *, niter: int = 10, sample: int = 256) -> np.ndarray:
    """int64 (n,): the spherical k-means cluster (0..k-1) of each row of ``x`` float32 (n, d), trained on at most
    ``sample`` rows per cluster (a seeded draw) and assigned to every row."""
    import faiss

    n, d = x.shape
    if k <= 1 or n <= k:
        return np.zeros(n, np.int64)
    rng = np.random.default_rng(seed)
    train = x[np.sort(rng.choice(n, size=min(n, k * sample), replace=False))]
    km = faiss.Kmeans(d, k, niter=niter, spherical=True, seed=int(seed) % (2 ** 31), max_points_per_centroid=sample,
                      verbose=False)
    km.train(np.ascontiguousarray(train))
    labels = np.empty(n, np.int64)
    for a in range(0, n, 200_000):
        labels[a : a + 200_000] = km.index.search(np.ascontiguousarray(x[a : a + 200_000]), 1)[1][:, 0]
    return labels


def topic_order(perm: np.ndarray, labels: np.ndarray, seed: int) -> np.ndarray:
    """int64 (len(perm),): the pairs of ``perm`` (int64 pair indices, repeats allowed) grouped by their cluster
    ``labels[perm]`` (labels int64 (n_pairs,)), the clusters in a random order and each cluster's pairs shuffled
    (a draw seeded by ``seed``)."""
    rng = np.random.default_rng(seed)
    rank = rng.permutation(int(labels.max()) + 1 if len(labels) else 0)
    shuffled = perm[rng.permutation(len(perm))]
    return shuffled[np.argsort(rank[labels[shuffled]], kind="stable")]
