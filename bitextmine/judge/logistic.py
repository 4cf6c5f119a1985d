"""Logistic regression by Newton's method: the second stage's classifier (small, exact, no dependency)."""

from __future__ import annotations

import numpy as np


def fit_logistic(X: np.ndarray, y: np.ndarray, l2: float = 1.0, iters: int = 50, tol: float = 1e-10) -> dict:
    """Logistic regression (IRLS) on standardised features.

    X float (n, p), y bool/0-1 (n,). Minimises the sum of log-losses + l2 / 2 * |w|^2 (the intercept is not
    penalised) over the features standardised by X's mean and standard deviation (a constant column: 1).
    Returns {"mean", "std": float64 (p,), "w": float64 (p,), "b": float}, what :func:`predict` takes."""
    X, y = np.asarray(X, np.float64), np.asarray(y, np.float64)
    mean, std = X.mean(0), X.std(0)
    std = np.where(std > 0, std, 1.0)
    Z = np.c_[(X - mean) / std, np.ones(len(X))]
    theta = np.zeros(Z.shape[1])
    reg = np.r_[np.full(Z.shape[1] - 1, l2), 0.0]
    for _ in range(iters):
        p = 1 / (1 + np.exp(-(Z @ theta)))
        grad = Z.T @ (p - y) + reg * theta
        hess = (Z * (p * (1 - p))[:, None]).T @ Z + np.diag(reg) + 1e-12 * np.eye(len(theta))
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


def _posterior(p: np.ndarray, prior: float, q: float) -> np.ndarray:
    """p (made under ``prior``) under the prior q instead."""
    a = q / prior * p
    return a / (a + (1 - q) / (1 - prior) * (1 - p))
