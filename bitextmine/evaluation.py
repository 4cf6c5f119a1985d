"""Benchmarks used for model selection and reporting: Tatoeba retrieval and STS correlation.

Tatoeba (Artetxe & Schwenk 2019): for aligned sides x, y, the accuracy of cosine nearest-neighbour
retrieval of the aligned row, both directions. STS: Pearson's r x 100 between cosine and gold score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .corpus import iter_lines
from .errors import CorpusError


def retrieval_accuracy(x: np.ndarray, y: np.ndarray, *, block: int = 4096) -> tuple[float, float]:
    """Nearest-neighbour accuracy x->y and y->x for aligned rows.

    x, y: float (n, d) L2-normalised. Returns (acc_xy, acc_yx) as fractions in [0, 1].
    Ties count as errors unless the aligned row is the first maximum.
    """
    n = len(x)
    if n == 0 or len(y) != n:
        raise ValueError(f"retrieval_accuracy needs two non-empty aligned sides, got {len(x)} and {len(y)}")
    x = np.asarray(x, np.float32)
    y = np.asarray(y, np.float32)
    hits_xy = 0
    col_best = np.full(n, -np.inf, np.float32)
    col_arg = np.zeros(n, np.int64)
    for a in range(0, n, block):
        sim = x[a : a + block] @ y.T
        hits_xy += int((sim.argmax(1) == np.arange(a, a + len(sim))).sum())
        v = sim.max(0)
        i = sim.argmax(0) + a
        better = v > col_best
        col_best = np.where(better, v, col_best)
        col_arg = np.where(better, i, col_arg)
    hits_yx = int((col_arg == np.arange(n)).sum())
    return hits_xy / n, hits_yx / n


def pearson(a: Sequence[float], b: Sequence[float]) -> float:
    """Pearson's r of two equal-length sequences."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    a = a - a.mean()
    b = b - b.mean()
    denom = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / denom) if denom > 0 else 0.0


@dataclass
class STSData:
    s1: list[str]
    s2: list[str]
    gold: np.ndarray  # float64 (n,)


def read_stsbenchmark(path: str) -> STSData:
    """STS Benchmark TSV: genre, file, year, id, score, s1, s2[, extra]; split on tabs, no quoting."""
    s1, s2, gold = [], [], []
    for i, line in enumerate(iter_lines(path), 1):
        cols = line.split("\t")
        if len(cols) < 7:
            raise CorpusError(f"{path} line {i}: {len(cols)} columns; expected at least 7 (STS Benchmark TSV)")
        try:
            gold.append(float(cols[4]))
        except ValueError:
            raise CorpusError(f"{path} line {i}: score {cols[4]!r} is not a number") from None
        s1.append(cols[5])
        s2.append(cols[6])
    return STSData(s1, s2, np.asarray(gold))


def sts_pearson(x1: np.ndarray, x2: np.ndarray, gold: np.ndarray) -> float:
    """Pearson r x 100 between row-wise cosine of L2-normalised x1, x2 (n, d) and gold (n,)."""
    cos = (np.asarray(x1, np.float32) * np.asarray(x2, np.float32)).sum(1)
    return 100.0 * pearson(cos, gold)
