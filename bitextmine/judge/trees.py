"""Gradient-boosted trees: the second stage's classifier since format 3.

Fitted by scikit-learn's HistGradientBoostingClassifier (needed only to train a stage), stored as flat arrays
and evaluated here in numpy (needed to mine, filter and score): each tree sends a row left where its feature
is at most the node's threshold, and the probability is the sigmoid of the baseline plus the leaves reached.

Arrays (one entry per node of every tree, trees one after the other):

  feature    int32 (nodes,)    the feature a split reads (0 at a leaf)
  threshold  float64 (nodes,)  left where X[feature] <= threshold
  left       int32 (nodes,)    the children, as indexes into these arrays (0 at a leaf)
  right      int32 (nodes,)
  value      float64 (nodes,)  what a leaf adds to the log-odds (0 elsewhere)
  leaf       bool (nodes,)
  roots      int32 (trees,)    each tree's first node
  baseline   float64 ()        the log-odds before any tree
  depth      int32 ()          the most splits on a path from a root to a leaf
"""

from __future__ import annotations

import numpy as np

ARRAYS = ("feature", "threshold", "left", "right", "value", "leaf", "roots", "baseline", "depth")
ROWS = 8192  # rows evaluated at once (memory: ROWS x trees indexes)


def fit_trees(X: np.ndarray, y: np.ndarray, iters: int, leaves: int, depth: int, rate: float, l2: float,
              seed: int) -> dict:
    """Gradient-boosted trees on X float (n, p), y bool (n,): {name: array} of :data:`ARRAYS`."""
    try:
        from sklearn.ensemble import HistGradientBoostingClassifier
    except ImportError:
        from ..errors import ConfigError

        raise ConfigError("training the second stage's trees needs scikit-learn: pip install scikit-learn") from None
    clf = HistGradientBoostingClassifier(max_iter=iters, max_leaf_nodes=leaves, max_depth=depth, learning_rate=rate,
                                         l2_regularization=l2, early_stopping=False, random_state=seed)
    clf.fit(np.asarray(X, np.float64), np.asarray(y, bool))
    return export(clf)


def export(clf) -> dict:
    """The :data:`ARRAYS` of a fitted binary HistGradientBoostingClassifier."""
    parts, roots, at, depth = [], [], 0, 0
    for (tree,) in clf._predictors:
        nodes = tree.nodes
        roots.append(at)
        depth = max(depth, int(nodes["depth"].max()))
        parts.append({"feature": nodes["feature_idx"], "threshold": nodes["num_threshold"],
                      "left": np.where(nodes["is_leaf"], 0, nodes["left"] + at),
                      "right": np.where(nodes["is_leaf"], 0, nodes["right"] + at),
                      "value": np.where(nodes["is_leaf"], nodes["value"], 0.0), "leaf": nodes["is_leaf"]})
        at += len(nodes)
    kinds = {"feature": np.int32, "threshold": np.float64, "left": np.int32, "right": np.int32, "value": np.float64,
             "leaf": bool}
    out = {k: np.concatenate([p[k] for p in parts]).astype(t) for k, t in kinds.items()}
    out["roots"] = np.asarray(roots, np.int32)
    out["baseline"] = np.float64(np.ravel(clf._baseline_prediction)[0])
    out["depth"] = np.int32(depth)
    return out


def log_odds(trees: dict, X: np.ndarray) -> np.ndarray:
    """The trees' log-odds float64 (n,) of the rows of X float (n, p). Every tree is walked ``depth`` steps at once,
    a leaf leading to itself (an infinite threshold)."""
    X = np.asarray(X, np.float64)
    lf, at = trees["leaf"], np.arange(len(trees["leaf"]))
    feature, threshold = np.where(lf, 0, trees["feature"]), np.where(lf, np.inf, trees["threshold"])
    left, right = np.where(lf, at, trees["left"]), np.where(lf, at, trees["right"])
    out = np.empty(len(X))
    for a in range(0, len(X), ROWS):
        part = X[a:a + ROWS]
        flat, base = part.ravel(), (np.arange(len(part)) * X.shape[1])[:, None]
        node = np.broadcast_to(trees["roots"], (len(part), len(trees["roots"])))
        for _ in range(int(trees["depth"])):
            node = np.where(flat[base + feature[node]] <= threshold[node], left[node], right[node])
        out[a:a + ROWS] = trees["value"][node].sum(1) + float(trees["baseline"])
    return out


def predict_trees(trees: dict, X: np.ndarray) -> np.ndarray:
    """P(translation) float64 (n,) of the rows of X float (n, p)."""
    return 1 / (1 + np.exp(-np.clip(log_odds(trees, X), -500, 500)))


MAX_DEPTH = 64  # deeper trees are refused: a walk costs a step per level (the bundled model's: 6)


def check_trees(trees: dict, n_features: int) -> str | None:
    """What is wrong with arrays read from a file (None: nothing): missing arrays, arrays of another kind (1-D
    integer links and features, 1-D float thresholds and values, scalar baseline and depth), lengths that
    differ, a value that is not finite, a depth outside 1..MAX_DEPTH, a child or root outside the nodes, a
    feature outside 0..n_features-1, a path longer than the depth."""
    missing = [k for k in ARRAYS if k not in trees]
    if missing:
        return f"missing arrays {', '.join(missing)}"
    kinds = {"feature": "iu", "left": "iu", "right": "iu", "roots": "iu", "depth": "iu", "leaf": "bui",
             "threshold": "f", "value": "f", "baseline": "f"}
    wrong = [k for k, want in kinds.items() if trees[k].dtype.kind not in want or
             trees[k].ndim != (0 if k in ("baseline", "depth") else 1)]
    if wrong:
        return f"arrays of another kind or shape: {', '.join(wrong)}"
    n = len(trees["feature"])
    if any(len(trees[k]) != n for k in ("threshold", "left", "right", "value", "leaf")):
        return "arrays of different lengths"
    if not (np.isfinite(trees["value"]).all() and np.isfinite(trees["baseline"])
            and np.isfinite(trees["threshold"][~trees["leaf"].astype(bool)]).all()):
        return "a threshold, value or baseline that is not a finite number"
    if not 0 <= int(trees["depth"]) <= MAX_DEPTH:
        return f"depth {int(trees['depth'])}; expected 0 to {MAX_DEPTH}"
    inner = ~trees["leaf"].astype(bool)
    links = np.r_[trees["left"][inner], trees["right"][inner], trees["roots"]]
    if n == 0 or len(trees["roots"]) == 0 or links.min(initial=0) < 0 or links.max(initial=0) >= n:
        return "a tree links outside its nodes"
    if (trees["feature"][inner] < 0).any() or (trees["feature"][inner] >= n_features).any():
        return f"a split reads a feature outside 0..{n_features - 1}"
    node = trees["roots"].astype(np.int64)
    for _ in range(max(0, int(trees["depth"]))):
        node = np.where(inner[node], trees["left"][node], node)  # the leftmost path of each tree
    if inner[node].any():
        return f"a path longer than its depth {int(trees['depth'])}"
    return None
