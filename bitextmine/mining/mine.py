"""Mining translation pairs from two monolingual sides (Artetxe & Schwenk 2019).

k nearest neighbours in both directions, margin scores, then one of the retrieval modes:
  forward    each source with its best-scoring target candidate
  backward   each target with its best-scoring source candidate
  intersect  pairs found by both forward and backward
  union      pairs found by either
  max        forward and backward candidates together, best score first, each sentence used at most once
The floors (threshold, cosine, standout) apply to the candidates before the mode selects among them
(:mod:`bitextmine.mining.select`). Mining files runs in stages (:func:`bitextmine.pipeline.mine_files`):
exact duplicate lines on a side are embedded once and keep all their line numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..config import MODES, MineConfig
from ..errors import ConfigError
from ..search.exact import knn_both
from ..search.index import knn, recall_at_k, resolve_index
from .margin import best_candidates, candidate_scores, neighbour_means
from .select import finish
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


def mine_embeddings(x: np.ndarray, y: np.ndarray, *, config: MineConfig = MineConfig(),
                    progress: Callable[[int], None] | None = None) -> Pairs:
    """Mine pairs between source rows x float (n, d) and target rows y float (m, d), L2-normalised.

    Returns Pairs (indices into x and y) with score >= config.threshold, cosine >= config.min_cosine and
    standout z >= config.min_z (:mod:`bitextmine.mining.standout`), sorted by score descending. The floors
    apply to each row's candidate before config.mode selects among them (:func:`bitextmine.mining.select.finish`).
    These three are config's as given, those left None the global defaults (:class:`bitextmine.config.Floors`):
    ``config.per_language`` is not applied here (the rows carry no language).
    :func:`bitextmine.pipeline.run.mine_files` picks a model's per-language settings first
    (:func:`bitextmine.mining.calibrated.choose`); pass its ``choose(...).config`` to get the same pairs.
    The second stage (:mod:`bitextmine.judge`) reads the lines' texts, so only ``mine_files`` applies it.
    """
    config = config.resolved()
    if config.mode not in MODES:
        raise ConfigError(f"mode {config.mode!r}: expected one of {', '.join(MODES)}")
    if config.k < 1:
        raise ConfigError(f"k {config.k}: expected k >= 1")
    if len(x) == 0 or len(y) == 0:
        return Pairs(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros(0, np.float32))
    from ..encoding.external import check_finite

    check_finite(x, "source embeddings")  # one NaN row would spoil every score it enters (ConfigError naming it)
    check_finite(y, "target embeddings")
    f, b, info = candidates(x, y, config, progress)
    standout = None
    if config.min_z > 0:
        mx, my = moments_of(x), moments_of(y)

        def standout(s: np.ndarray, t: np.ndarray, cos: np.ndarray) -> np.ndarray:
            return pair_standout(cos, s, t, lambda i: x[i], lambda i: y[i], mx, my)
    s, t, sc, cos, *_ = finish(f, b, config, standout)
    return Pairs(s.astype(np.int64), t.astype(np.int64), sc.astype(np.float32), cos.astype(np.float32), info)


def candidates(x: np.ndarray, y: np.ndarray, config: MineConfig = MineConfig(),
               progress: Callable[[int], None] | None = None) -> tuple[tuple, tuple, dict]:
    """Each row's best candidate by margin score (config.k neighbours, config.margin), before any floor.

    x float (n, d), y float (m, d). Returns (f, b, info): f = (src, tgt, score, cos) with one candidate per
    source row (ascending src), b the same with one per target row (ascending tgt), int64 / float32 (c,)
    arrays (a row whose search found no neighbour has none); info as :func:`neighbours` gives it, with
    recall@k per direction under config.recall_check. What :func:`bitextmine.mining.select.finish` takes.
    """
    Dxy, Ixy, Dyx, Iyx, info = neighbours(x, y, config, progress)
    if config.recall_check:
        info["recall"] = [recall_at_k(x, y, Ixy, config.recall_check, seed=config.seed, device=config.device),
                          recall_at_k(y, x, Iyx, config.recall_check, seed=config.seed, device=config.device)]
    mean_x, mean_y = neighbour_means(Dxy), neighbour_means(Dyx)
    src, tgt, score, cos = best_candidates(Dxy, Ixy, candidate_scores(Dxy, Ixy, mean_x, mean_y[Ixy], config.margin))
    f = (src, tgt, score, cos)
    tgt, src, score, cos = best_candidates(Dyx, Iyx, candidate_scores(Dyx, Iyx, mean_y, mean_x[Iyx], config.margin))
    return f, (src, tgt, score, cos), info


def neighbours(x: np.ndarray, y: np.ndarray, config: MineConfig = MineConfig(), progress=None):
    """k nearest neighbours of x's rows among y's and of y's among x's, with the index config asks for.

    x float (n, d), y float (m, d). Returns (Dxy float32 (n, k'), Ixy int64, Dyx float32 (m, k''), Iyx int64,
    info) as :func:`bitextmine.search.index.knn` gives them per direction (an approximate index's empty slots:
    -inf, -1); info: the index per direction, and for exact search the precision of its tiles and the rows
    searched again. Every direction searching a flat side is exact search from one pass over the similarity
    matrix (:func:`bitextmine.search.exact.knn_both`: both directions when both sides are flat, else the one);
    each direction is searched once. progress gets n + m in all.
    """
    kinds = [resolve_index(config.index, len(y), config.auto_flat_max),
             resolve_index(config.index, len(x), config.auto_flat_max)]
    info: dict = {"index": kinds}
    Dxy = Ixy = Dyx = Iyx = None
    if "flat" in kinds:
        from ..device import resolve_device

        direction = "both" if kinds == ["flat", "flat"] else ("xy" if kinds[0] == "flat" else "yx")
        Dxy, Ixy, Dyx, Iyx, more = knn_both(
            x, y, config.k, candidates=config.candidates, block_rows=config.block_size, shard_rows=config.shard_rows,
            device=resolve_device(config.device), precision=config.precision, direction=direction,
            progress=progress if direction == "both" else None)
        info.update(more)
        if progress and direction != "both":
            progress(len(x) if direction == "xy" else len(y))
    if kinds[0] != "flat":
        Dxy, Ixy = _knn(x, y, kinds[0], config, progress)
    if kinds[1] != "flat":
        Dyx, Iyx = _knn(y, x, kinds[1], config, progress)
    return Dxy, Ixy, Dyx, Iyx, info


def _knn(q: np.ndarray, d: np.ndarray, index: str, config: MineConfig, progress) -> tuple[np.ndarray, np.ndarray]:
    """k-NN of q's rows among d's with ``index`` and config's index settings."""
    return knn(q, d, config.k, block_size=config.block_size, device=config.device, index=index, nlist=config.nlist,
               nprobe=config.nprobe, train_sample=config.train_sample, pq_m=config.pq_m, seed=config.seed,
               shard_rows=config.shard_rows, progress=progress)
