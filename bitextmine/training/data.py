"""Training data: reading and cleaning the corpora, the held-apart dev split, the tokenised sides
(:class:`Side`, flat int64 token storage) and the order in which pairs are trained (mega-batches).

Everything here is deterministic given the seed: the dev split draws from ``default_rng([seed, 7])``,
each epoch's order from ``default_rng([seed, epoch])``.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..config import TrainConfig
from ..corpus import CorpusSpec, load_grouped_corpora, read_parallel
from ..evaluation.metrics import retrieval_accuracy, sts_pearson
from ..evaluation.readers import read_sts
from ..tokenizer import Tokenizer, ragged_gather


@dataclass
class Side:
    """One side of a tokenised corpus: flat ids int64 (total,), offsets int64 (n,), lengths int64 (n,),
    text ids int64 (n,) equal for equal strings."""

    ids: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    text_ids: np.ndarray

    @classmethod
    def build(cls, texts: Sequence[str], tok: Tokenizer, *, threads: int = 0, chunk: int = 200_000,
              key: Callable[[str], str] | None = None) -> "Side":
        """Tokenise ``texts``; their text ids compare the texts, or their ``key`` (:func:`text_ids`)."""
        id_parts, len_parts = [], []
        for a in range(0, len(texts), chunk):
            pieces = tok.encode_lists(texts[a : a + chunk], threads=threads)
            len_parts.append(np.fromiter((len(p) for p in pieces), np.int64, count=len(pieces)))
            id_parts.append(np.concatenate(pieces).astype(np.int32) if len(pieces) else np.zeros(0, np.int32))
        lengths = np.concatenate(len_parts) if len_parts else np.zeros(0, np.int64)
        ids = np.concatenate(id_parts).astype(np.int64) if id_parts else np.zeros(0, np.int64)
        offsets = np.zeros(len(lengths), np.int64)
        np.cumsum(lengths[:-1], out=offsets[1:])
        return cls(ids, offsets, lengths, text_ids(texts, key))

    def gather(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Flat (ids, offsets) of the sentences ``idx`` (int64 (m,)), without a Python loop."""
        lens = self.lengths[idx]
        off = np.zeros(len(idx), np.int64)
        np.cumsum(lens[:-1], out=off[1:])
        return ragged_gather(self.ids, self.offsets[idx], lens), off


def data_fingerprint(src: Sequence[str], tgt: Sequence[str]) -> str:
    """16 hex digits of SHA-256 over the training pairs (a checkpoint resumes only on the same data)."""
    h = hashlib.sha256()
    for s, t in zip(src, tgt):
        h.update(s.encode())
        h.update(b"\t")
        h.update(t.encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def groups_fingerprint(groups: np.ndarray | None, temperature: float) -> str:
    """"" or "/" + 16 hex digits over the pairs' sampling groups (int64 (n,)) when they shape the epoch
    order (a temperature other than 1); appended to :func:`data_fingerprint`."""
    if groups is None or temperature == 1:
        return ""
    return "/" + hashlib.sha256(np.ascontiguousarray(groups, dtype=np.int64).tobytes()).hexdigest()[:16]


def split_dev(src: list[str], tgt: list[str], n_dev: int, seed: int):
    """Hold apart ``n_dev`` random pairs; also drop training pairs sharing a text with a dev pair.

    Returns (train_src, train_tgt, dev_src, dev_tgt, n_dropped_overlap, kept): kept int64 (n_train,)
    the input positions of the training pairs.
    """
    n = len(src)
    n_dev = min(n_dev, n // 10)
    if n_dev < 2:
        return src, tgt, [], [], 0, np.arange(n, dtype=np.int64)
    rng = np.random.default_rng([seed, 7])
    dev_idx = np.sort(rng.choice(n, n_dev, replace=False))
    is_dev = np.zeros(n, bool)
    is_dev[dev_idx] = True
    dev_src = [src[i] for i in dev_idx]
    dev_tgt = [tgt[i] for i in dev_idx]
    ds, dt = set(dev_src), set(dev_tgt)
    tr_s, tr_t, kept, dropped = [], [], [], 0
    for i in range(n):
        if is_dev[i]:
            continue
        if src[i] in ds or tgt[i] in dt:
            dropped += 1
            continue
        tr_s.append(src[i])
        tr_t.append(tgt[i])
        kept.append(i)
    return tr_s, tr_t, dev_src, dev_tgt, dropped, np.asarray(kept, np.int64)


def read_training_pairs(corpora: Sequence[CorpusSpec], sts_pairs: Sequence[str], config: TrainConfig,
                        log: Callable[[str], None]):
    """Read and clean ``corpora`` plus the STS pairs scored >= ``config.sts_min_score``, then hold apart
    the dev pairs. Returns (train_src, train_tgt, groups int64 (n,), group_names, dev_src, dev_tgt,
    cleaning stats); groups index group_names (:meth:`CorpusSpec.group_name`)."""
    extra = []
    for p in sts_pairs:
        d = read_sts(p)
        keep = np.flatnonzero(d.gold >= config.sts_min_score)
        extra.append((p, [d.s1[i] for i in keep], [d.s2[i] for i in keep]))
        log(f"{p}: {len(keep)} of {len(d.gold)} STS pairs scored >= {config.sts_min_score:g} used as positives")
    src, tgt, groups, group_names, stats = load_grouped_corpora(corpora, extra=extra)
    log(f"corpora: {stats.summary()}")
    if config.clean:
        src, tgt, groups = clean_with_rules(src, tgt, groups, log)
    src, tgt, dev_src, dev_tgt, overlap, kept = split_dev(src, tgt, config.dev_pairs, config.seed)
    groups = groups[kept]
    log(f"held apart {len(dev_src)} dev pairs; dropped {overlap} training pairs sharing a text with them; "
        f"{len(src)} training pairs")
    sizes = np.bincount(groups, minlength=len(group_names))
    log("training pairs per group: " + ", ".join(f"{g} {n}" for g, n in zip(group_names, sizes)))
    return src, tgt, groups, group_names, dev_src, dev_tgt, stats


def clean_with_rules(src: list[str], tgt: list[str], groups: np.ndarray, log: Callable[[str], None]):
    """The pairs that pass `filter`'s default rules with no language declared (lengths, ratio,
    identical sides, digits, URLs, repeats; :func:`bitextmine.filtering.rules.check_pair`), with their
    groups (int64 (n,)); logs how many each rule dropped."""
    from collections import Counter

    from ..config import RuleConfig
    from ..filtering.rules import check_pair

    rules, why = RuleConfig(), Counter()
    keep = []
    for i, (s, t) in enumerate(zip(src, tgt)):
        reason = check_pair(s, t, rules)
        if reason is None:
            keep.append(i)
        else:
            why[reason] += 1
    log(f"--clean: kept {len(keep)} of {len(src)} pairs; dropped " +
        (", ".join(f"{n} {r}" for r, n in why.most_common()) or "none"))
    return [src[i] for i in keep], [tgt[i] for i in keep], groups[np.asarray(keep, np.int64)]


class DevSet:
    """A tokenised dev benchmark evaluated with the current weights: ``kind`` retrieval (a[i] <-> b[i])
    or sts (``gold`` float (n,) scores)."""

    def __init__(self, name: str, kind: str, a: Side, b: Side, gold: np.ndarray | None = None):
        self.name, self.kind, self.a, self.b, self.gold = name, kind, a, b, gold

    def score(self, embed: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> float:
        """The benchmark's score with ``embed(ids, offsets)`` -> L2-normalised float32 (n, dim)."""
        xa = embed(self.a.ids, self.a.offsets)
        xb = embed(self.b.ids, self.b.offsets)
        if self.kind == "sts":
            return sts_pearson(xa, xb, self.gold)
        acc = retrieval_accuracy(xa, xb)
        return 100.0 * (acc[0] + acc[1]) / 2


def build_devsets(build: Callable[..., Side], dev_src: list[str], dev_tgt: list[str],
                  dev_tatoeba: Sequence[tuple[str, str]], dev_sts: Sequence[str]) -> list[DevSet]:
    """The dev benchmarks: held-apart pairs, Tatoeba-style file pairs (SRC TGT in the training sides'
    order) and STS files (unmarked language). ``build(texts, side_name=None)`` tokenises a side."""
    devsets: list[DevSet] = []
    if dev_src:
        devsets.append(DevSet("heldout", "retrieval", build(dev_src, "src"), build(dev_tgt, "tgt")))
    names = _dev_names([("tatoeba", a) for a, _ in dev_tatoeba] + [("sts", p) for p in dev_sts])
    for (a, b), name in zip(dev_tatoeba, names):
        xa, xb = read_parallel(a, b)
        devsets.append(DevSet(name, "retrieval", build(xa, "src"), build(xb, "tgt")))
    for p, name in zip(dev_sts, names[len(dev_tatoeba):]):
        d = read_sts(p)
        devsets.append(DevSet(name, "sts", build(d.s1), build(d.s2), d.gold))
    return devsets


def _dev_names(sets: Sequence[tuple[str, str]]) -> list[str]:
    """A distinct name for each (kind, path) dev set: kind:file name, with its folder where two share a file
    name (STS13 and STS14 both hold STS.input.headlines.txt), then a number where that is not enough; the scores
    are kept under these names, and a name given twice would drop a set from the mean that picks the weights."""
    short = [f"{kind}:{os.path.basename(p)}" for kind, p in sets]
    names = [f"{kind}:{os.path.basename(os.path.dirname(os.path.abspath(p)))}/{os.path.basename(p)}"
             if short.count(s) > 1 else s for (kind, p), s in zip(sets, short)]
    return [n if names.count(n) == 1 else f"{n}#{names[:i + 1].count(n)}" for i, n in enumerate(names)]


def text_ids(texts: Sequence[str], key: Callable[[str], str] | None = None, table: dict | None = None) -> np.ndarray:
    """int64 (n,): equal ids for equal texts, or with ``key`` for texts of equal keys; a ``table`` shared across calls
    numbers texts across them (a text already in it keeps its id)."""
    table = {} if table is None else table
    return np.fromiter((table.setdefault(t, len(table)) for t in (texts if key is None else map(key, texts))),
                       np.int64, count=len(texts))


def shared_text_ids(src: Sequence[str], tgt: Sequence[str], key: Callable[[str], str] | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Text ids int64 over both sides together (equal strings on either side share an id; with ``key``, strings
    with equal keys)."""
    table: dict = {}
    return text_ids(src, key, table), text_ids(tgt, key, table)


def concat_sides(a: Side, b: Side, text_ids_a: np.ndarray, text_ids_b: np.ndarray) -> Side:
    """One Side holding a's sentences then b's (paraphrase pools)."""
    return Side(np.concatenate([a.ids, b.ids]), np.concatenate([a.offsets, b.offsets + len(a.ids)]),
                np.concatenate([a.lengths, b.lengths]), np.concatenate([text_ids_a, text_ids_b]))


def cat_flat(*parts: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate flat (ids int64 (total,), offsets int64 (n,)) batches into one."""
    ids = np.concatenate([p[0] for p in parts])
    shift = np.cumsum([0] + [len(p[0]) for p in parts[:-1]])
    return ids, np.concatenate([p[1] + s for p, s in zip(parts, shift)])


def token_counts(S: Side, T: Side, rows: int) -> np.ndarray:
    """int64 (rows,): how often each token id occurs on both sides (SIF's frequencies)."""
    return (np.bincount(S.ids, minlength=rows) + np.bincount(T.ids, minlength=rows)).astype(np.int64)


def epoch_order(seed: int, epoch: int, n_pairs: int, groups: np.ndarray | None = None,
                temperature: float = 1.0) -> np.ndarray:
    """int64 (n_pairs,): the training pairs epoch ``epoch`` (0-based) visits, in order.

    temperature 1 (or no groups): every pair once, in a random order. Otherwise each group g (groups
    int64 (n_pairs,)) gets a share of the epoch proportional to size_g ** (1 / temperature), so small
    groups (languages with little data) are drawn more often and large ones less: a group drawn more
    than its size repeats whole shuffled passes over its pairs, one drawn less takes a random subset,
    a new one each epoch. Shares are rounded by largest remainder so the epoch keeps n_pairs draws.
    """
    rng = np.random.default_rng([seed, epoch])
    if groups is None or temperature == 1.0:
        return rng.permutation(n_pairs)
    sizes = np.bincount(groups)
    counts = group_draws(sizes, temperature, n_pairs)
    order = np.argsort(groups, kind="stable")
    starts = np.concatenate([[0], np.cumsum(sizes)])
    parts = []
    for g in np.flatnonzero(counts):
        members = order[starts[g] : starts[g + 1]]
        passes = -(-counts[g] // len(members))
        parts.append(np.concatenate([rng.permutation(members) for _ in range(passes)])[: counts[g]])
    picked = np.concatenate(parts)
    return picked[rng.permutation(len(picked))]


def group_draws(sizes: np.ndarray, temperature: float, total: int) -> np.ndarray:
    """int64 (groups,): draws per group, proportional to sizes ** (1 / temperature) (empty groups get
    none), summing to ``total`` (largest-remainder rounding)."""
    w = np.where(sizes > 0, sizes.astype(np.float64) ** (1.0 / temperature), 0.0)
    exact = total * w / w.sum()
    counts = np.floor(exact).astype(np.int64)
    rest = total - int(counts.sum())
    counts[np.argsort(-(exact - counts), kind="stable")[:rest]] += 1
    return counts


def megabatch_pairs(config: TrainConfig, step: int) -> int:
    """Pairs in the next mega-batch after ``step`` mini-batches: k * batch_size, where k starts at
    ``megabatch_start`` and grows by one every ``megabatch_every`` mini-batches up to ``megabatch_max``."""
    k = min(config.megabatch_max, config.megabatch_start + step // config.megabatch_every)
    return k * config.batch_size
