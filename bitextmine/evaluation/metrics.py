"""Benchmarks with their standard protocols: STS correlation, Tatoeba retrieval, BUCC mining F1.

- STS: Pearson's r and Spearman's rho x 100 between the cosine of the two sentences' embeddings and
  the gold score, per dataset; per-year averages (STS12-16) are the unweighted mean over that year's
  datasets, as in the SIF and paraphrastic-embedding papers.
- Tatoeba (Artetxe & Schwenk 2019): for aligned sides x, y, the error rate (xsim) of cosine
  nearest-neighbour retrieval of the aligned row, in both directions, and the accuracy.
- BUCC 2018: candidates from margin mining, a threshold chosen to maximise F1 on one set's gold and
  applied to another; precision, recall and F1 against the gold pairs.

The benchmark files are read by :mod:`bitextmine.evaluation.readers`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .readers import STSData


# --- Tatoeba -------------------------------------------------------------------------------------


def retrieval_accuracy(x: np.ndarray, y: np.ndarray, *, block: int = 4096) -> tuple[float, float]:
    """Nearest-neighbour accuracy x->y and y->x for aligned rows.

    x, y: float (n, d) L2-normalised. Returns (acc_xy, acc_yx) as fractions in [0, 1].
    Ties count as errors unless the aligned row is the first maximum.
    """
    n = len(x)
    if n == 0 or len(y) != n:
        raise ValueError(f"retrieval_accuracy needs two non-empty aligned sides, got {len(x)} and {len(y)}")
    from ..search.topk import topk

    best = topk(np.asarray(x, np.float32), np.asarray(y, np.float32), 1, block=block, columns=True)
    rows = np.arange(n)
    hits_xy = int((best.I[:, 0] == rows).sum())  # topk: ties to the lower index, the first maximum
    hits_yx = int((best.Ic[:, 0] == rows).sum())
    return hits_xy / n, hits_yx / n


@dataclass
class TatoebaResult:
    name: str
    n: int
    error_src_tgt: float  # % of source sentences whose nearest target is not their translation
    error_tgt_src: float

    @property
    def accuracy(self) -> float:
        """Mean accuracy of both directions, %."""
        return 100.0 - (self.error_src_tgt + self.error_tgt_src) / 2


def tatoeba_eval(x: np.ndarray, y: np.ndarray, name: str = "") -> TatoebaResult:
    """xsim error rates (%) for aligned L2-normalised x, y (n, d)."""
    a, b = retrieval_accuracy(x, y)
    return TatoebaResult(name, len(x), 100.0 * (1 - a), 100.0 * (1 - b))


# --- STS -----------------------------------------------------------------------------------------


def pearson(a: Sequence[float], b: Sequence[float]) -> float:
    """Pearson's r of two equal-length sequences."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    a = a - a.mean()
    b = b - b.mean()
    denom = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / denom) if denom > 0 else 0.0


def _ranks(a: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties given their mean rank."""
    order = np.argsort(a, kind="stable")
    sorted_a = a[order]
    ranks = np.empty(len(a), np.float64)
    i = 0
    while i < len(a):
        j = i
        while j + 1 < len(a) and sorted_a[j + 1] == sorted_a[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rho (Pearson's r of the ranks; ties get their mean rank)."""
    return pearson(_ranks(np.asarray(a, np.float64)), _ranks(np.asarray(b, np.float64)))


def sts_pearson(x1: np.ndarray, x2: np.ndarray, gold: np.ndarray) -> float:
    """Pearson r x 100 between row-wise cosine of L2-normalised x1, x2 (n, d) and gold (n,)."""
    cos = (np.asarray(x1, np.float32) * np.asarray(x2, np.float32)).sum(1)
    return 100.0 * pearson(cos, gold)


@dataclass
class STSResult:
    name: str
    year: str | None
    n: int
    pearson: float  # x 100
    spearman: float  # x 100


def sts_eval(x1: np.ndarray, x2: np.ndarray, data: STSData) -> STSResult:
    """Pearson and Spearman x 100 of the row-wise cosine of L2-normalised x1, x2 (n, d) with data.gold."""
    cos = (np.asarray(x1, np.float32) * np.asarray(x2, np.float32)).sum(1)
    return STSResult(data.name, data.year, len(cos), 100.0 * pearson(cos, data.gold), 100.0 * spearman(cos, data.gold))


def year_averages(results: Sequence[STSResult]) -> dict[str, tuple[float, float]]:
    """{year: (mean Pearson, mean Spearman)} over the results that belong to a SemEval year."""
    out: dict[str, tuple[float, float]] = {}
    for year in sorted({r.year for r in results if r.year}):
        rs = [r for r in results if r.year == year]
        out[year] = (float(np.mean([r.pearson for r in rs])), float(np.mean([r.spearman for r in rs])))
    return out


# --- BUCC ----------------------------------------------------------------------------------------


@dataclass
class PRF:
    threshold: float
    precision: float
    recall: float
    f1: float
    predicted: int
    correct: int
    gold: int


def prf_curve(scores: np.ndarray, correct: np.ndarray, n_gold: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Precision, recall, F1 (float64 (m,)) when keeping the top 1..m candidates.

    scores float (m,) sorted descending; correct bool (m,) whether each candidate is a gold pair.
    """
    tp = np.cumsum(np.asarray(correct, np.int64))
    k = np.arange(1, len(tp) + 1)
    p = tp / k
    r = tp / max(1, n_gold)
    f = np.where(p + r > 0, 2 * p * r / np.maximum(p + r, 1e-300), 0.0)
    return p, r, f


def best_threshold(scores: np.ndarray, correct: np.ndarray, n_gold: int) -> float:
    """The threshold maximising F1 (keep candidates with score >= it): halfway between the last kept
    score and the next one (as LASER's BUCC script does); +inf when no candidate is correct."""
    order = np.argsort(-np.asarray(scores, np.float64), kind="stable")
    s = np.asarray(scores, np.float64)[order]
    c = np.asarray(correct, bool)[order]
    if not c.any():
        return float("inf")
    _, _, f = prf_curve(s, c, n_gold)
    # only cut between distinct scores: a threshold keeps every candidate of a tied score
    last_of_run = np.append(s[1:] != s[:-1], True)
    f = np.where(last_of_run, f, -1.0)
    i = int(np.argmax(f))
    return float(s[i] if i + 1 == len(s) else (s[i] + s[i + 1]) / 2)


def evaluate_threshold(scores: np.ndarray, correct: np.ndarray, n_gold: int, threshold: float) -> PRF:
    """Precision, recall, F1 of the candidates with score >= threshold."""
    keep = np.asarray(scores, np.float64) >= threshold
    tp = int(np.asarray(correct, bool)[keep].sum())
    k = int(keep.sum())
    p = tp / k if k else 0.0
    r = tp / n_gold if n_gold else 0.0
    f = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return PRF(threshold, p, r, f, k, tp, n_gold)


@dataclass
class BuccCandidates:
    """Mined candidate pairs of one BUCC set with their scores and correctness."""

    src_ids: list[str]
    tgt_ids: list[str]
    scores: np.ndarray  # float64 (m,)
    correct: np.ndarray  # bool (m,)
    n_gold: int
    name: str = ""
    extra: dict = field(default_factory=dict)


def bucc_candidates(x: np.ndarray, y: np.ndarray, src_ids: Sequence[str], tgt_ids: Sequence[str],
                    gold: set[tuple[str, str]], *, config=None, name: str = "", progress=None,
                    texts: tuple[Sequence[str], Sequence[str]] | None = None) -> BuccCandidates:
    """Candidates of margin mining (``config``: a MineConfig; its threshold, min_cosine and min_z are ignored,
    every candidate of the mode is kept) between L2-normalised x (n, d) and y (m, d). ``progress(n)``
    is called as k-NN query rows are searched (both directions: n + m in all). With the sides' ``texts`` (one per
    id), a candidate is correct when its two texts are those of a gold pair: a sentence that occurs under two ids
    has one embedding, and the search keeps the lower id, whichever the gold file names (as LASER's bucc.py maps
    a mined text pair back to every id of those texts)."""
    from dataclasses import replace

    from ..config import MineConfig
    from ..mining.mine import mine_embeddings

    config = replace(config or MineConfig(), threshold=-np.inf, min_cosine=-np.inf, min_z=0.0)
    pairs = mine_embeddings(np.asarray(x, np.float32), np.asarray(y, np.float32), config=config, progress=progress)
    sids = [src_ids[i] for i in pairs.src]
    tids = [tgt_ids[j] for j in pairs.tgt]
    if texts is None:
        correct = np.fromiter(((a, b) in gold for a, b in zip(sids, tids)), bool, count=len(sids))
    else:
        stext, ttext = (dict(zip(ids, t)) for ids, t in zip((src_ids, tgt_ids), texts))
        gold_texts = {(stext[a], ttext[b]) for a, b in gold}
        correct = np.fromiter(((stext[a], ttext[b]) in gold_texts for a, b in zip(sids, tids)), bool,
                              count=len(sids))
    extra = {"recall": pairs.info["recall"]} if "recall" in (pairs.info or {}) else {}
    return BuccCandidates(sids, tids, np.asarray(pairs.score, np.float64), correct, len(gold), name, extra)
