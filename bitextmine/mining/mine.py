"""Mining translation pairs from two monolingual sides (Artetxe & Schwenk 2019).

k nearest neighbours in both directions, margin scores, then one of the retrieval modes:
  forward    each source with its best-scoring target candidate
  backward   each target with its best-scoring source candidate
  intersect  pairs found by both forward and backward
  union      pairs found by either
  max        forward and backward candidates together, best score first, each sentence used at most once
The threshold applies in every mode. Mining files runs in stages (:mod:`bitextmine.pipeline`): exact
duplicate lines on a side are embedded once and keep all their line numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..config import MODES, MineConfig
from ..errors import ConfigError
from ..search.exact import knn_both
from ..search.index import knn, recall_at_k, resolve_index
from .margin import candidate_scores
from .standout import moments_of, pair_standout


@dataclass
class Pairs:
    """Mined pairs sorted by score descending: src, tgt int64 (m,) row indices; score, cosine float32 (m,)."""

    src: np.ndarray
    tgt: np.ndarray
    score: np.ndarray
    cosine: np.ndarray
    info: dict = field(default_factory=dict)  # the index used per direction; recall@k when checked

    def __len__(self) -> int:
        return len(self.score)


def _sorted(src: np.ndarray, tgt: np.ndarray, score: np.ndarray, cos: np.ndarray) -> Pairs:
    # descending score; ties by source then target index so the order is reproducible
    order = np.lexsort((tgt, src, -score.astype(np.float64)))
    return Pairs(src[order].astype(np.int64), tgt[order].astype(np.int64), score[order].astype(np.float32),
                 cos[order].astype(np.float32))


def greedy_one_to_one(src: np.ndarray, tgt: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Indices of the candidates that greedy 1:1 selection keeps (best score first, each endpoint once).

    src, tgt int64 (c,), score float (c,). Equal to looping over candidates in descending score (ties:
    lower candidate index first) and keeping those whose two endpoints are both unused. Vectorised:
    each round keeps every remaining candidate that ranks first at both of its endpoints.
    """
    order = np.lexsort((np.arange(len(score)), -np.asarray(score, np.float64)))
    s, t = src[order], tgt[order]
    alive = np.ones(len(order), bool)
    keep: list[np.ndarray] = []
    while alive.any():
        pos = np.flatnonzero(alive)  # ascending rank
        _, first_s = np.unique(s[pos], return_index=True)
        _, first_t = np.unique(t[pos], return_index=True)
        best_s = np.zeros(len(pos), bool)
        best_s[first_s] = True
        best_t = np.zeros(len(pos), bool)
        best_t[first_t] = True
        chosen = pos[best_s & best_t]
        keep.append(chosen)
        used_s = np.zeros(s.max() + 1, bool)
        used_t = np.zeros(t.max() + 1, bool)
        used_s[s[chosen]] = True
        used_t[t[chosen]] = True
        alive[pos[used_s[s[pos]] | used_t[t[pos]]]] = False
    return np.sort(order[np.concatenate(keep)]) if keep else np.zeros(0, np.int64)


def mine_embeddings(x: np.ndarray, y: np.ndarray, *, config: MineConfig = MineConfig(),
                    progress: Callable[[int], None] | None = None) -> Pairs:
    """Mine pairs between source rows x float (n, d) and target rows y float (m, d), L2-normalised.

    Returns Pairs (indices into x and y) with score >= config.threshold, cosine >= config.min_cosine and
    standout z >= config.min_z (:mod:`bitextmine.mining.standout`), sorted by score descending.
    These three are config's as given: ``config.per_language`` is not applied here (the rows carry no
    language). :func:`bitextmine.pipeline.run.mine_files` picks a model's per-language settings first
    (:func:`bitextmine.mining.calibrated.choose`); pass its ``choose(...).config`` to get the same pairs.
    """
    if config.mode not in MODES:
        raise ConfigError(f"mode {config.mode!r}: expected one of {', '.join(MODES)}")
    if config.k < 1:
        raise ConfigError(f"k {config.k}: expected k >= 1")
    n, m = len(x), len(y)
    empty = Pairs(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros(0, np.float32))
    if n == 0 or m == 0:
        return empty
    Dxy, Ixy, Dyx, Iyx, info = neighbours(x, y, config, progress)
    if config.recall_check:
        info["recall"] = [recall_at_k(x, y, Ixy, config.recall_check, seed=config.seed, device=config.device),
                          recall_at_k(y, x, Iyx, config.recall_check, seed=config.seed, device=config.device)]
    mean_x = Dxy.mean(1)
    mean_y = Dyx.mean(1)
    fwd = candidate_scores(Dxy, Ixy, mean_x, mean_y, config.margin)  # (n, k)
    bwd = candidate_scores(Dyx, Iyx, mean_y, mean_x, config.margin)  # (m, k)
    fj = fwd.argmax(1)
    rows_f = np.arange(n)
    f = (rows_f, Ixy[rows_f, fj], fwd[rows_f, fj], Dxy[rows_f, fj])  # src, tgt, score, cosine
    bj = bwd.argmax(1)
    rows_b = np.arange(m)
    b = (Iyx[rows_b, bj], rows_b, bwd[rows_b, bj], Dyx[rows_b, bj])
    s, t, sc, cos, _ = select_pairs(f, b, config)
    ok = np.flatnonzero((sc >= config.threshold) & (cos >= config.min_cosine))
    if config.min_z > 0:
        z = pair_standout(cos[ok], s[ok], t[ok], lambda i: x[i], lambda i: y[i], moments_of(x), moments_of(y))
        ok = ok[z >= config.min_z]
    pairs = _sorted(s[ok], t[ok], sc[ok], cos[ok])
    pairs.info = info
    return pairs


def select_pairs(f: tuple, b: tuple, config: MineConfig) -> tuple:
    """Apply config.mode to the forward candidates f = (src, tgt, score, cos) (one per source row, ascending
    src) and the backward ones b (one per target row, ascending tgt); int64 / float32 (c,) arrays.

    Returns (src, tgt, score, cos, origin int8: 0 forward, 1 backward), before the threshold. Candidates
    scoring below config.threshold may be left out of f and b beforehand: what remains at or above it is
    the same (intersect: a pair's backward twin has its score; max: the greedy choice among candidates at
    or above the threshold never looks further down). The cosine floor must not be applied beforehand.
    """
    if config.mode == "forward":
        return (*f, np.zeros(len(f[0]), np.int8))
    if config.mode == "backward":
        return (*b, np.ones(len(b[0]), np.int8))
    if config.mode == "intersect":
        pos = np.minimum(np.searchsorted(b[1], f[1]), max(len(b[1]) - 1, 0))
        both = (b[1][pos] == f[1]) & (b[0][pos] == f[0]) if len(b[1]) else np.zeros(len(f[0]), bool)
        return (*(a[both] for a in f), np.zeros(int(both.sum()), np.int8))
    s, t, sc, cos = (np.concatenate([u, v]) for u, v in zip(f, b))
    origin = np.repeat(np.array([0, 1], np.int8), [len(f[0]), len(b[0])])
    if config.mode == "union":
        _, keep = np.unique(s.astype(np.int64) * (int(t.max(initial=0)) + 1) + t, return_index=True)
    else:  # max
        keep = greedy_one_to_one(s, t, sc)
    return s[keep], t[keep], sc[keep], cos[keep], origin[keep]


def neighbours(x: np.ndarray, y: np.ndarray, config: MineConfig = MineConfig(), progress=None):
    """k nearest neighbours of x's rows among y's and of y's among x's, with the index config asks for.

    x float (n, d), y float (m, d). Returns (Dxy float32 (n, k'), Ixy int64, Dyx float32 (m, k''), Iyx int64,
    info) as :func:`bitextmine.index.knn` gives them per direction; info: the index per direction, and for
    exact search the precision of its tiles and the rows searched again. Exact search on both sides is
    one pass over the similarity matrix (:func:`bitextmine.exact.knn_both`); progress gets n + m in all.
    """
    info: dict = {"index": [resolve_index(config.index, len(y), config.auto_flat_max),
                            resolve_index(config.index, len(x), config.auto_flat_max)]}
    if info["index"] == ["flat", "flat"]:
        from ..device import resolve_device

        Dxy, Ixy, Dyx, Iyx, more = knn_both(
            x, y, config.k, candidates=config.candidates, block_rows=config.block_size, shard_rows=config.shard_rows,
            device=resolve_device(config.device), precision=config.precision, progress=progress)
        info.update(more)
        return Dxy, Ixy, Dyx, Iyx, info
    Dxy, Ixy = _knn(x, y, info["index"][0], config, progress)
    Dyx, Iyx = _knn(y, x, info["index"][1], config, progress)
    return Dxy, Ixy, Dyx, Iyx, info


def _knn(q: np.ndarray, d: np.ndarray, index: str, config: MineConfig, progress) -> tuple[np.ndarray, np.ndarray]:
    """k-NN of q's rows among d's with ``index`` and config's index settings."""
    return knn(q, d, config.k, block_size=config.block_size, device=config.device, index=index, nlist=config.nlist,
               nprobe=config.nprobe, train_sample=config.train_sample, pq_m=config.pq_m, seed=config.seed,
               shard_rows=config.shard_rows, progress=progress)


@dataclass
class MineStats:
    src_lines: int
    tgt_lines: int
    src_unique: int
    tgt_unique: int
    src_empty: int
    tgt_empty: int
    pairs: int
    signature: str
    rejected: dict = field(default_factory=dict)  # candidates dropped by the rules, per reason
    info: dict = field(default_factory=dict)  # index per direction, recall@k when checked (Pairs.info)


# mining two files runs in stages; it lives with them and is re-exported here, beside mine_embeddings
from ..pipeline.run import mine_files  # noqa: E402, F401
