"""Negatives within a mega-batch, the symmetric hinge loss (Wieting et al. 2019, 2021) and the
in-batch softmax (InfoNCE) loss offered beside it (:func:`infonce_loss`).

For pair i with embeddings s_i (source) and t_i (target):
  t_neg(i) = argmax_j cos(s_i, t_j) over j whose target text differs from t_i's (so never j = i),
  s_neg(i) = argmax_j cos(s_j, t_i) over j whose source text differs from s_i's,
  loss_i   = max(0, delta - cos(s_i, t_i) + cos(s_i, t_neg(i))) + max(0, delta - cos(s_i, t_i) + cos(s_neg(i), t_i)).

:func:`choose_negatives` also draws random negatives (``random``) or mixes them with the hardest
(``mix``); :func:`paraphrase_negatives` searches a pool of both sides (monolingual pairs). The
searches are :func:`bitextmine.search.topk.topk` with k = 1: one product s @ t.T in row blocks, ties
to the lower index, excluded entries by text keys.
"""

from __future__ import annotations

import torch

from ..config import TrainConfig
from ..search.topk import topk


@torch.no_grad()
def hardest_negatives(s, t, src_text_ids, tgt_text_ids, *, chunk: int = 4096):
    """Indices of the hardest other-language negatives within a mega-batch.

    s, t: float (n, d), L2-normalised rows; src_text_ids, tgt_text_ids: int64 (n,), equal ids for equal texts.
    Returns (t_neg int64 (n,), s_neg int64 (n,), t_valid bool (n,), s_valid bool (n,)); a negative is
    invalid when every candidate shares the positive's text (e.g. n = 1; its index is then 0).
    One matrix product s @ t.T, computed in row blocks of ``chunk`` to bound memory: each row's argmax
    gives t_neg, each column's s_neg.
    """
    r = topk(s, t, 1, block=chunk, exclude=[(tgt_text_ids, tgt_text_ids)], columns=True,
             col_exclude=[(src_text_ids, src_text_ids)])
    return r.I[:, 0], r.Ic[:, 0], r.D[:, 0] > -float("inf"), r.Dc[:, 0] > -float("inf")


def choose_negatives(es, et, s_text, t_text, config: TrainConfig, gen):
    """Negatives for a mega-batch by ``config.negatives``: max = the hardest (:func:`hardest_negatives`);
    random = a uniformly drawn other pair; mix = per pair, the hardest with probability ``mix_prob``,
    else the random one.

    es, et float32 (n, d) L2-normalised; s_text, t_text int64 (n,); ``gen`` a CPU torch.Generator (the
    draws are made on the CPU and moved to es's device, so a seeded run picks the same negatives on
    every device). The draws, in order: offsets 1..n-1 for t then s (randint), then for mix the
    uniforms for t then s (rand). Returns (t_neg, s_neg) int64 (n,) and (t_valid, s_valid) bool (n,);
    a random pick sharing the positive's text is invalid (its loss term is switched off).
    """
    t_neg, s_neg, t_ok, s_ok = hardest_negatives(es, et, s_text, t_text)
    if config.negatives == "max":
        return t_neg, s_neg, t_ok, s_ok
    n = es.shape[0]
    if n < 2:
        return t_neg, s_neg, t_ok & False, s_ok & False
    ar = torch.arange(n, device=es.device)
    rt = (ar + torch.randint(1, n, (n,), generator=gen).to(es.device)) % n
    rs = (ar + torch.randint(1, n, (n,), generator=gen).to(es.device)) % n
    if config.negatives == "mix":
        use_t = torch.rand(n, generator=gen).to(es.device) < config.mix_prob
        use_s = torch.rand(n, generator=gen).to(es.device) < config.mix_prob
        rt = torch.where(use_t, t_neg, rt)
        rs = torch.where(use_s, s_neg, rs)
    return rt, rs, t_text[rt] != t_text, s_text[rs] != s_text


@torch.no_grad()
def paraphrase_negatives(es, et, s_text, t_text, *, chunk: int = 2048):
    """Monolingual pairs: each sentence's negative is the most similar sentence of the pooled mega-batch
    [sources; targets] (positions 0..n-1 sources, n..2n-1 targets) whose text is neither side of its pair.

    es, et float (n, d) L2-normalised; s_text, t_text int64 (n,) text ids shared across the sides.
    Returns (neg_for_s, neg_for_t) int64 (n,) pool positions and their validity masks bool (n,)
    (invalid: every pooled sentence is one of the pair's texts).
    """
    pool = torch.cat([es, et])
    pool_text = torch.cat([s_text, t_text])
    out = [topk(x, pool, 1, block=chunk, exclude=[(s_text, pool_text), (t_text, pool_text)]) for x in (es, et)]
    return out[0].I[:, 0], out[1].I[:, 0], out[0].D[:, 0] > -float("inf"), out[1].D[:, 0] > -float("inf")


def hinge_loss(s, t, s_neg, t_neg, *, margin: float, s_valid=None, t_valid=None):
    """Mean symmetric hinge loss over the batch (a float scalar tensor).

    s, t, s_neg, t_neg: float (n, d) sentence embeddings (any norm; cosines are taken);
    s_valid, t_valid: optional bool (n,) masks that switch off a term without a valid negative.
    """
    import torch.nn.functional as F

    s, t, s_neg, t_neg = (F.normalize(x, dim=1) for x in (s, t, s_neg, t_neg))
    pos = (s * t).sum(1)
    l_t = F.relu(margin - pos + (s * t_neg).sum(1))
    l_s = F.relu(margin - pos + (s_neg * t).sum(1))
    if t_valid is not None:
        l_t = l_t * t_valid.to(l_t.dtype)
    if s_valid is not None:
        l_s = l_s * s_valid.to(l_s.dtype)
    return (l_t + l_s).mean()


def infonce_loss(s, t, s_neg, t_neg, s_text, t_text, s_neg_text, t_neg_text, *, scale: float):
    """Mean symmetric in-batch softmax loss (InfoNCE; sentence-transformers' MultipleNegativesRankingLoss
    made symmetric, with the mega-batch's hardest negatives as extra candidates; s_neg, t_neg may
    have no rows, as with negatives none).

    s, t, s_neg, t_neg: float (m, d) embeddings (cosines are taken). Source i is scored against every
    candidate target [t; t_neg] (2m), target i against [s; s_neg]; the right candidate is i. A candidate
    other than i with the same text (int64 (m,) ids s_text, t_text, s_neg_text, t_neg_text) as the
    positive is masked out, so repeated sentences are never pushed apart. Cosines are multiplied by
    ``scale`` before the softmax; the loss is the mean of both directions' cross-entropies.
    """
    import torch.nn.functional as F

    s, t, s_neg, t_neg = (F.normalize(x, dim=1) for x in (s, t, s_neg, t_neg))
    m = s.shape[0]
    target = torch.arange(m, device=s.device)

    def direction(q, cand, q_pos_text, cand_text):
        logits = scale * (q @ cand.T)  # (m, 2m)
        same = q_pos_text[:, None] == cand_text[None, :]
        same[target, target] = False
        return F.cross_entropy(logits.masked_fill(same, float("-inf")), target)

    return 0.5 * (direction(s, torch.cat([t, t_neg]), t_text, torch.cat([t_text, t_neg_text]))
                  + direction(t, torch.cat([s, s_neg]), s_text, torch.cat([s_text, s_neg_text])))


def pair_loss(config: TrainConfig, s, t, s_neg, t_neg, *, s_valid=None, t_valid=None, texts=None):
    """The training loss ``config.loss`` of a mini-batch (a float scalar tensor): the hinge loss, or InfoNCE
    plus ``config.hinge_weight`` times the hinge loss over the same negatives. Arguments as
    :func:`hinge_loss`; ``texts``: the four text-id tensors that :func:`infonce_loss` takes."""
    if config.loss == "hinge":
        return hinge_loss(s, t, s_neg, t_neg, margin=config.margin, s_valid=s_valid, t_valid=t_valid)
    loss = infonce_loss(s, t, s_neg, t_neg, *texts, scale=config.scale)
    if config.hinge_weight > 0:
        loss = loss + config.hinge_weight * hinge_loss(s, t, s_neg, t_neg, margin=config.margin, s_valid=s_valid,
                                                       t_valid=t_valid)
    return loss
