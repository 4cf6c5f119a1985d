"""Hardest negatives in a mega-batch and the symmetric hinge loss (Wieting et al. 2019, 2021).

For pair i with embeddings s_i (source) and t_i (target):
  t_neg(i) = argmax_j cos(s_i, t_j) over j whose target text differs from t_i's (so never j = i),
  s_neg(i) = argmax_j cos(s_j, t_i) over j whose source text differs from s_i's,
  loss_i   = max(0, delta - cos(s_i, t_i) + cos(s_i, t_neg(i))) + max(0, delta - cos(s_i, t_i) + cos(s_neg(i), t_i)).
"""

from __future__ import annotations

import torch


@torch.no_grad()
def hardest_negatives(s, t, src_text_ids, tgt_text_ids, *, chunk: int = 4096):
    """Indices of the hardest other-language negatives within a mega-batch.

    s, t: float (n, d), L2-normalised rows; src_text_ids, tgt_text_ids: int64 (n,), equal ids for equal texts.
    Returns (t_neg int64 (n,), s_neg int64 (n,), t_valid bool (n,), s_valid bool (n,)); a negative is
    invalid when every candidate shares the positive's text (e.g. n = 1).
    One matrix product s @ t.T, computed in row blocks of ``chunk`` to bound memory.
    """
    n = s.shape[0]
    neg_inf = torch.finfo(s.dtype).min
    t_best = torch.empty(n, dtype=s.dtype, device=s.device)
    t_neg = torch.empty(n, dtype=torch.int64, device=s.device)
    col_best = torch.full((n,), neg_inf, dtype=s.dtype, device=s.device)
    s_neg = torch.zeros(n, dtype=torch.int64, device=s.device)
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        sim = s[a:b] @ t.T  # (b-a, n): rows = sources a..b, columns = all targets
        # row i, column j: j is a valid target negative for source i if tgt text j != tgt text i
        row_mask = tgt_text_ids[a:b, None] == tgt_text_ids[None, :]
        v, j = sim.masked_fill(row_mask, neg_inf).max(dim=1)
        t_best[a:b], t_neg[a:b] = v, j
        # column j, row i: i is a valid source negative for target j if src text i != src text j
        col_mask = src_text_ids[a:b, None] == src_text_ids[None, :]
        v, i = sim.masked_fill(col_mask, neg_inf).max(dim=0)
        better = v > col_best  # strict: the first (lowest) index wins ties, as in one argmax
        col_best = torch.where(better, v, col_best)
        s_neg = torch.where(better, i + a, s_neg)
    return t_neg, s_neg, t_best > neg_inf, col_best > neg_inf


def hinge_loss(s, t, s_neg, t_neg, *, margin: float, s_valid=None, t_valid=None):
    """Mean symmetric hinge loss over the batch.

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
