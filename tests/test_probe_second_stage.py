"""tools/probe_second_stage.py: the logistic regression, the neighbourhood normalisation and precision at a
recall, against slow references on tiny seeded data."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))

from probe_second_stage import (
    f1_at,
    fit_logistic,
    neighbourhood_normalised,
    precision_at_recall,
    predict,
)


def data(seed, n=60, p=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) * [1.0, 5.0, 0.2][:p] + [0.0, 3.0, -1.0][:p]
    u = X @ np.array([1.0, 0.3, -4.0][:p]) + 3 * rng.normal(size=n)
    y = (u > np.median(u)).astype(float)  # both classes, not separable
    return X, y


def slow_fit(X, y, l2, steps=60000, lr=0.01):
    """Gradient descent on the same objective (standardised features, intercept not penalised)."""
    mean, std = X.mean(0), X.std(0)
    Z = np.c_[(X - mean) / std, np.ones(len(X))]
    theta = np.zeros(Z.shape[1])
    reg = np.r_[np.full(Z.shape[1] - 1, l2), 0.0]
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(Z @ theta)))
        theta -= lr * (Z.T @ (p - y) + reg * theta) / len(X)
    return theta


def test_newton_matches_gradient_descent():
    for seed in range(3):
        X, y = data(seed)
        model = fit_logistic(X, y, l2=2.0)
        ref = slow_fit(X, y, 2.0)
        np.testing.assert_allclose(np.r_[model["w"], model["b"]], ref, atol=1e-4)
        z = (X - X.mean(0)) / X.std(0) @ ref[:-1] + ref[-1]
        np.testing.assert_allclose(predict(model, X), 1 / (1 + np.exp(-z)), atol=1e-5)


def test_closed_case_one_binary_feature():
    # one binary feature, no penalty: the fitted probability in each group is the group's share of positives
    x = np.r_[np.zeros(10), np.ones(10)][:, None]
    y = np.r_[np.ones(3), np.zeros(7), np.ones(8), np.zeros(2)]
    model = fit_logistic(x, y, l2=0.0)
    np.testing.assert_allclose(predict(model, np.array([[0.0], [1.0]])), [0.3, 0.8], atol=1e-9)


def test_penalty_shrinks_weights_not_intercept():
    X, y = data(4)
    w = [np.abs(fit_logistic(X, y, l2=l2)["w"]).sum() for l2 in (0.1, 10.0, 1e6)]
    assert w[0] > w[1] > w[2] and w[2] < 1e-3
    # with the weights at 0 the intercept alone fits the share of positives
    assert abs(1 / (1 + np.exp(-fit_logistic(X, y, l2=1e9)["b"])) - y.mean()) < 1e-6


def test_neighbourhood_normalised_against_loops():
    rng = np.random.default_rng(7)
    n, m, k = 6, 5, 3
    S = rng.normal(size=(n, m))
    I_st = np.array([rng.permutation(m)[:k] for _ in range(n)])
    I_ts = np.array([rng.permutation(n)[:k] for _ in range(m)])
    I_st[2, 1] = -1  # a missing neighbour is left out of the mean
    s, t = np.array([0, 2, 5, 3]), np.array([1, 4, 0, 0])
    got = neighbourhood_normalised(lambda i, j: S[i, j], s, t, I_st, I_ts)
    want = []
    for a, b in zip(s, t):
        na = [S[a, j] for j in I_st[a] if j >= 0]
        nb = [S[i, b] for i in I_ts[b] if i >= 0]
        want.append(S[a, b] - (sum(na) / len(na) + sum(nb) / len(nb)) / 2)
    np.testing.assert_allclose(got, want)


def test_precision_at_recall_against_every_threshold():
    rng = np.random.default_rng(3)
    scores = np.round(rng.random(40), 1)  # ties
    hit = rng.random(40) < 0.4
    n_gold = int(hit.sum()) + 2  # two gold pairs never proposed
    for recall in (0.5, 0.8, 0.95):
        best = np.nan
        for th in np.unique(scores):
            keep = scores >= th
            tp = hit[keep].sum()
            if tp >= recall * n_gold:
                best = np.nanmax([best, tp / keep.sum()])
        got = precision_at_recall(scores, hit, n_gold, recall)
        assert (np.isnan(got) and np.isnan(best)) or got == best
    assert np.isnan(precision_at_recall(scores, hit, n_gold + 100, 0.95))


def test_f1_at():
    scores, hit = np.array([0.9, 0.8, 0.3]), np.array([True, False, True])
    assert f1_at(scores, hit, 4, 0.5) == 2 * 1 / (2 + 4)
    assert f1_at(scores, hit, 4, 0.95) == 0.0
