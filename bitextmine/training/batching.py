"""Mega-batches of one topic (``--batch-order topic``): pairs whose sentences are near share a mega-batch, so
the hardest negative in it and the in-batch negatives are same-topic sentences, the near misses that mining
among same-domain lines has to reject.

At each epoch's start the pairs are embedded with the current weights (each pair as the normalised sum of its
two sides' normalised embeddings), clustered by spherical k-means into groups of about one mega-batch, and the
epoch's order is rearranged cluster by cluster (clusters in a random order, pairs shuffled within each). A pair
drawn more than once in the epoch (temperature sampling) has each copy in another segment of the epoch, so its
copies do not meet in one mega-batch. The epoch's draws stay the same: only their order changes. Text ids then
compare a loose key (case-folded, spaces collapsed, punctuation at either end dropped): two lines that differ
only there are one text, never each other's negative (same-topic batches hold many such repeats in UI text).

The clusters come from float computations: another device type (rounding) can move a pair to another cluster and
so reorder the epoch; runs on one device type are reproducible.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable

import numpy as np

_SPACES = re.compile(r"\s+")


def loose_key(text: str) -> str:
    """``text`` NFKC-normalised, case-folded, runs of spaces made one, and punctuation (Unicode category P) and
    spaces dropped at both ends; letters, marks, digits, symbols and inner punctuation stay ("1.5" is not "15").
    A text that nothing is left of is its own key ("..." is not "?!")."""
    t = _SPACES.sub(" ", unicodedata.normalize("NFKC", text).casefold())
    a, b = 0, len(t)
    while a < b and (t[a] == " " or (unicodedata.category(t[a])[0] == "P" and not t[a + 1 : a + 2].isdigit())):
        a += 1  # a sign before a number stays ("-5" is not "5")
    while b > a and (t[b - 1] == " " or unicodedata.category(t[b - 1])[0] == "P"):
        b -= 1
    return t[a:b] or text


def pair_embeddings(embed_side: Callable[[str, np.ndarray], np.ndarray], n: int, chunk: int = 100_000) -> np.ndarray:
    """float32 (n, d): for each pair, the normalised sum of its two sides' normalised embeddings (filled chunk by
    chunk into one array: n * d * 4 bytes).

    ``embed_side(side, rows)`` returns float32 (len(rows), d) L2-normalised embeddings of ``side`` ("src" or
    "tgt") rows ``rows`` (int64)."""
    out = None
    for a in range(0, n, chunk):
        rows = np.arange(a, min(n, a + chunk), dtype=np.int64)
        x = embed_side("src", rows) + embed_side("tgt", rows)
        x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        if out is None:
            out = np.empty((n, x.shape[1]), np.float32)
        out[a : a + len(rows)] = x
    return out if out is not None else np.zeros((0, 0), np.float32)


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


def largest_repeat(perm: np.ndarray) -> int:
    """How many times the most drawn pair occurs in ``perm`` (int64 pair indices; 1 when none repeats)."""
    return int(np.bincount(perm).max()) if len(perm) else 1


def topic_order(perm: np.ndarray, labels: np.ndarray, seed: int) -> np.ndarray:
    """int64 (len(perm),): the draws of ``perm`` (int64 pair indices, repeats allowed) in S segments, S =
    :func:`largest_repeat`: each pair's copies go to consecutive segments from a random first one (mod S), so no two
    copies share a segment; within a segment the draws are grouped by cluster ``labels[pair]`` (labels int64
    (n_pairs,)), the clusters in one random order, each cluster's draws shuffled. Seeded by ``seed``."""
    rng = np.random.default_rng(seed)
    n_segments = largest_repeat(perm)
    rank = rng.permutation(int(labels.max()) + 1 if len(labels) else 0)
    first = rng.integers(0, n_segments, size=int(perm.max()) + 1 if len(perm) else 0)
    shuffled = perm[rng.permutation(len(perm))]
    by_pair = np.argsort(shuffled, kind="stable")
    run_start = np.r_[0, np.flatnonzero(np.diff(shuffled[by_pair])) + 1]
    copy = np.empty(len(perm), np.int64)  # the how-many-th draw of its pair each draw is, in shuffled order
    copy[by_pair] = np.arange(len(perm)) - np.repeat(run_start, np.diff(np.r_[run_start, len(perm)]))
    segment = (first[shuffled] + copy) % n_segments
    return shuffled[np.lexsort((rank[labels[shuffled]], segment))]
