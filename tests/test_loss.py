import numpy as np
import pytest
import torch

from bitextmine.training.negatives import hardest_negatives, hinge_loss


def brute_force_negatives(s, t, sid, tid):
    """For each i: best target j with tid[j] != tid[i]; best source j with sid[j] != sid[i] (first on ties)."""
    n = len(s)
    sim = s @ t.T
    t_neg, s_neg = np.zeros(n, int), np.zeros(n, int)
    t_ok, s_ok = np.zeros(n, bool), np.zeros(n, bool)
    for i in range(n):
        best = -np.inf
        for j in range(n):
            if tid[j] != tid[i] and sim[i, j] > best:
                best, t_neg[i], t_ok[i] = sim[i, j], j, True
        best = -np.inf
        for j in range(n):
            if sid[j] != sid[i] and sim[j, i] > best:
                best, s_neg[i], s_ok[i] = sim[j, i], j, True
    return t_neg, s_neg, t_ok, s_ok


@pytest.mark.parametrize("n, chunk, dup", [(1, 8, 0), (2, 8, 0), (17, 4, 3), (40, 7, 10), (64, 64, 20)])
def test_hardest_negatives_match_brute_force(n, chunk, dup):
    rng = np.random.default_rng(n)
    s = rng.normal(size=(n, 6)).astype(np.float32)
    t = (s + rng.normal(scale=0.8, size=(n, 6))).astype(np.float32)
    s /= np.linalg.norm(s, axis=1, keepdims=True)
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    # some texts repeat: equal text ids must never be chosen as each other's negative
    sid = np.arange(n)
    tid = np.arange(n)
    for _ in range(dup):
        a, b = rng.integers(0, n, 2)
        sid[b] = sid[a]
        tid[rng.integers(0, n)] = tid[rng.integers(0, n)]
    got = hardest_negatives(torch.from_numpy(s), torch.from_numpy(t), torch.from_numpy(sid), torch.from_numpy(tid),
                            chunk=chunk)
    want = brute_force_negatives(s, t, sid, tid)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w)
    t_neg, s_neg, t_ok, s_ok = (g.numpy() for g in got)
    assert not np.any(t_ok & (tid[t_neg] == tid))  # never the positive's own text
    assert not np.any(s_ok & (sid[s_neg] == sid))


def test_single_pair_has_no_valid_negative():
    x = torch.ones(1, 3) / 3**0.5
    _, _, t_ok, s_ok = hardest_negatives(x, x, torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long))
    assert not t_ok.item() and not s_ok.item()


def test_hinge_loss_matches_formula():
    rng = np.random.default_rng(0)
    s, t, sn, tn = (rng.normal(size=(5, 4)) for _ in range(4))
    cos = lambda a, b: (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)  # noqa: E731
    d = 0.4
    want = (np.maximum(0, d - cos(s, t) + cos(s, tn)) + np.maximum(0, d - cos(s, t) + cos(sn, t))).mean()
    got = hinge_loss(*(torch.tensor(a) for a in (s, t, sn, tn)), margin=d)
    assert got.item() == pytest.approx(want, rel=1e-6)
    # switching a term off removes exactly that term
    valid = torch.tensor([True, False, True, True, True])
    got2 = hinge_loss(*(torch.tensor(a) for a in (s, t, sn, tn)), margin=d, t_valid=valid)
    want2 = (np.maximum(0, d - cos(s, t) + cos(s, tn)) * valid.numpy() + np.maximum(0, d - cos(s, t) + cos(sn, t))).mean()
    assert got2.item() == pytest.approx(want2, rel=1e-6)


def reference_infonce(s, t, sn, tn, st, tt, snt, tnt, scale):
    """Both directions' cross-entropies, one query at a time, candidates listed by hand."""
    import math

    S, T, SN, TN = (torch.nn.functional.normalize(x, dim=1) for x in (s, t, sn, tn))
    m, total = len(s), 0.0
    for q, cand, pos_text, cand_text in ((S, torch.cat([T, TN]), tt, torch.cat([tt, tnt])),
                                         (T, torch.cat([S, SN]), st, torch.cat([st, snt]))):
        for i in range(m):
            z = [scale * float(q[i] @ cand[j]) for j in range(len(cand)) if j == i or int(cand_text[j]) != int(pos_text[i])]
            total += math.log(sum(math.exp(v) for v in z)) - scale * float(q[i] @ cand[i])
    return total / (2 * m)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_infonce_loss_matches_reference_with_repeated_texts_masked(seed):
    from bitextmine.training.negatives import infonce_loss

    g = torch.Generator().manual_seed(seed)
    m, d = 6, 8
    s, t, sn, tn = (torch.randn(m, d, generator=g) for _ in range(4))
    st = torch.arange(m)
    tt = torch.tensor([0, 1, 1, 3, 4, 5])  # targets 1 and 2 share a text: never each other's negative
    snt = torch.arange(10, 10 + m)
    tnt = torch.tensor([20, 21, 22, 0, 24, 5])  # two hard negatives repeat a positive's text
    got = float(infonce_loss(s, t, sn, tn, st, tt, snt, tnt, scale=20.0))
    assert got == pytest.approx(reference_infonce(s, t, sn, tn, st, tt, snt, tnt, 20.0), rel=1e-5)


def test_infonce_loss_without_negatives_matches_reference():
    from bitextmine.training.negatives import infonce_loss

    g = torch.Generator().manual_seed(3)
    m, d = 7, 5
    s, t = torch.randn(m, d, generator=g), torch.randn(m, d, generator=g)
    no, no_ids = torch.empty(0, d), torch.empty(0, dtype=torch.int64)
    st, tt = torch.arange(m), torch.tensor([0, 1, 2, 2, 4, 5, 6])  # negatives none: in-batch candidates only
    got = float(infonce_loss(s, t, no, no, st, tt, no_ids, no_ids, scale=20.0))
    assert got == pytest.approx(reference_infonce(s, t, no, no, st, tt, no_ids, no_ids, 20.0), rel=1e-5)


def test_infonce_loss_is_small_when_positives_stand_out():
    from bitextmine.training.negatives import infonce_loss

    x = torch.eye(4)
    ids = torch.arange(4)
    low = float(infonce_loss(x, x, -x, -x, ids, ids, ids + 10, ids + 10, scale=20.0))
    high = float(infonce_loss(x, x.roll(1, 0), -x, -x, ids, ids, ids + 10, ids + 10, scale=20.0))
    assert low < 1e-6 < high


@pytest.mark.parametrize("weight", [0.0, 0.5, 3.0])
def test_pair_loss_is_infonce_plus_the_weighted_hinge_over_the_same_negatives(weight):
    from bitextmine.config import TrainConfig
    from bitextmine.training.negatives import pair_loss

    rng = np.random.default_rng(7)
    s, t, sn, tn = (rng.normal(size=(6, 5)) for _ in range(4))
    cos = lambda a, b: (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)  # noqa: E731
    valid = np.array([True, True, False, True, True, True])
    d = 0.4
    hinge = (np.maximum(0, d - cos(s, t) + cos(s, tn)) * valid + np.maximum(0, d - cos(s, t) + cos(sn, t))).mean()
    ids = [torch.arange(6), torch.arange(6), torch.arange(10, 16), torch.arange(20, 26)]
    ts = [torch.tensor(a) for a in (s, t, sn, tn)]
    want = reference_infonce(*ts, *ids, 20.0) + weight * hinge
    config = TrainConfig(loss="infonce", hinge_weight=weight, margin=d, scale=20.0)
    got = pair_loss(config, *ts, t_valid=torch.tensor(valid), texts=ids)
    assert got.item() == pytest.approx(want, rel=1e-6)
    # the hinge loss alone ignores the weight
    alone = pair_loss(TrainConfig(loss="hinge", margin=d), *ts, t_valid=torch.tensor(valid))
    assert alone.item() == pytest.approx(hinge, rel=1e-6)
