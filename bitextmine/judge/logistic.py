"""Logistic regression by Newton's method: the second stage's classifier (small, exact, no dependency)."""

from __future__ import annotations

import numpy as np

SCORE_CLIP = 1e-6  # scores and shares are kept this far from 0 and 1 before their logit (:func:`map_score`)


def fit_logistic(X: np.ndarray, y: np.ndarray, l2: float = 1.0, iters: int = 50, tol: float = 1e-10,
                 weight: np.ndarray | None = None) -> dict:
    """Logistic regression (IRLS) on standardised features.

    X float (n, p), y bool/0-1 (n,), ``weight`` float (n,) or None (each row 1). Minimises the weighted sum of
    log-losses + l2 / 2 * |w|^2 (the intercept is not penalised) over the features standardised by X's mean and
    standard deviation (a constant column: 1); a row of weight 2 counts as two copies of it.
    Returns {"mean", "std": float64 (p,), "w": float64 (p,), "b": float}, what :func:`predict` takes."""
    X, y = np.asarray(X, np.float64), np.asarray(y, np.float64)
    v = np.ones(len(X)) if weight is None else np.asarray(weight, np.float64)
    mean = X.mean(0) if weight is None else (X * v[:, None]).sum(0) / v.sum()
    std = X.std(0) if weight is None else np.sqrt(((X - mean) ** 2 * v[:, None]).sum(0) / v.sum())
    std = np.where(std > 0, std, 1.0)
    Z = np.c_[(X - mean) / std, np.ones(len(X))]
    theta = np.zeros(Z.shape[1])
    reg = np.r_[np.full(Z.shape[1] - 1, l2), 0.0]
    for _ in range(iters):
        p = 1 / (1 + np.exp(-(Z @ theta)))
        grad = Z.T @ (v * (p - y)) + reg * theta
        hess = (Z * (v * p * (1 - p))[:, None]).T @ Z + np.diag(reg) + 1e-12 * np.eye(len(theta))
        step = np.linalg.solve(hess, grad)
        theta -= step
        if np.abs(step).max() < tol:
            break
    return {"mean": mean, "std": std, "w": theta[:-1], "b": float(theta[-1])}


def predict(model: dict, X: np.ndarray) -> np.ndarray:
    """P(translation) float64 (n,) of the rows of X float (n, p) under :func:`fit_logistic`'s model."""
    z = ((np.asarray(X, np.float64) - model["mean"]) / model["std"]) @ model["w"] + model["b"]
    return 1 / (1 + np.exp(-np.clip(z, -500, 500)))


def adjust_to_prior(p: np.ndarray, prior: float, iters: int = 1, tol: float = 1e-7) -> tuple[np.ndarray, float]:
    """Probabilities p float (n,), made under the class prior ``prior`` (the share of positives the classifier
    was trained with), re-estimated for the prior of the set they come from (Saerens, Latinne & Decaestecker
    2002, "Adjusting the outputs of a classifier to new a priori probabilities"): EM alternates the set's prior
    (the mean of the adjusted probabilities) and the probabilities under it. Returns (float64 (n,), the prior
    found). A set where positives are rare gets lower probabilities than one where they are common.

    ``iters`` 1 (the default) takes one step: the set's prior is the mean of p. Run to convergence, EM finds
    the maximum-likelihood prior, which collapses toward 0 when positives are rare and the classifier is
    confident about the negatives (on the sparse dev tasks at 1 % translations, Russian F1 12 against 67 with
    one step: docs/tried.md, "The second stage")."""
    p = np.clip(np.asarray(p, np.float64), 1e-12, 1 - 1e-12)
    if len(p) == 0:
        return p, prior
    q = prior
    for _ in range(iters):
        new = float(np.clip(_posterior(p, prior, q).mean(), 1e-9, 1 - 1e-9))
        done, q = abs(new - q) < tol, new
        if done:
            break
    return _posterior(p, prior, q), q


def logit(p: np.ndarray) -> np.ndarray:
    """log(p / (1 - p)) float64 of p float (n,), p clipped to [SCORE_CLIP, 1 - SCORE_CLIP]."""
    p = np.clip(np.asarray(p, np.float64), SCORE_CLIP, 1 - SCORE_CLIP)
    return np.log(p / (1 - p))


def fit_score_map(p: np.ndarray, share: np.ndarray, y: np.ndarray, weight: np.ndarray | None = None,
                  l2: float = 1e-3) -> dict:
    """The map :func:`map_score` applies, fitted on candidates whose label is known: p float (n,) the stage's
    scores after its prior step, share float (n,) the share of translations the stage estimated for the run each
    came from (the mean score before that step), y bool (n,) whether it is a translation, ``weight`` float (n,)
    or None (see :func:`fit_logistic`). A logistic regression of y on logit(p) and logit(share): {"score",
    "share", "bias"} (floats), so that a run's scores follow its share of translations, which the prior step
    alone follows only in part."""
    m = fit_logistic(np.c_[logit(p), logit(share)], y, l2=l2, weight=weight)
    w = m["w"] / m["std"]
    return {"score": float(w[0]), "share": float(w[1]), "bias": float(m["b"] - (w * m["mean"]).sum())}


def map_score(p: np.ndarray, share: float, score_map: dict) -> np.ndarray:
    """Scores p float (n,) of one run (after the prior step), its estimated ``share`` of translations (the mean
    score before that step), mapped by ``score_map`` ({"score", "share", "bias"}: :func:`fit_score_map`):
    sigmoid(score * logit(p) + share * logit(share) + bias), float64 (n,). For a "score" above 0 the order of
    a run's scores is kept."""
    z = score_map["score"] * logit(p) + score_map["share"] * logit(np.float64(share)) + score_map["bias"]
    return 1 / (1 + np.exp(-np.clip(z, -500, 500)))


def _posterior(p: np.ndarray, prior: float, q: float) -> np.ndarray:
    """p (made under ``prior``) under the prior q instead."""
    a = q / prior * p
    return a / (a + (1 - q) / (1 - prior) * (1 - p))
