"""Training the second stage for a model and the parallel pairs of one language with English.

Tasks are drawn from the pairs as mining meets them: ``size`` lines a side, a ``share`` of them gold pairs,
the rest the foreign side of some pairs and the English side of others (so no distractor has a partner;
a distractor whose text repeats a line of the other side, compared case- and punctuation-blind, is skipped).
Each task is mined with the model (every floor off but the second stage's margin floor) and each candidate
pair, before the 1:1 selection, is labelled gold or not: the negatives are the model's own nearest
non-translations. A logistic regression over their :data:`bitextmine.judge.features.FEATURES` gives the
probability of translation.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

import numpy as np

from ..config import MineConfig, SecondStageConfig
from .features import Pieces
from .judge import Judge
from .logistic import fit_logistic
from .store import SecondStage

_KEY = re.compile(r"\W+")


def key(text: str) -> str:
    """A line compared case- and punctuation-blind."""
    return _KEY.sub(" ", text.lower()).strip()


def draw_task(pairs: Sequence[tuple[str, str]], size: int, share: float, rng: np.random.Generator):
    """(foreign lines, English lines, gold (foreign row, English row) int64 (g, 2)) of a task drawn from
    ``pairs`` [(foreign, English)] (module docstring); sides shuffled. Fewer lines when the pairs run out."""
    order = rng.permutation(len(pairs))
    g = round(share * size)
    gold = [pairs[i] for i in order[:g]]
    fx, en = [p[0] for p in gold], [p[1] for p in gold]
    seen = {key(t) for t in fx + en}
    rest = order[g:]
    half = len(rest) // 2
    for side, start in ((en, half), (fx, 0)):
        for i in rest[start:]:
            if len(side) == size:
                break
            text = pairs[i][1] if side is en else pairs[i][0]
            other = pairs[i][0] if side is en else pairs[i][1]
            if key(text) not in seen and key(other) not in seen:
                side.append(text)
                seen.add(key(text))
    pf, pe = rng.permutation(len(fx)), rng.permutation(len(en))
    gold_rows = np.c_[np.argsort(pf)[:g], np.argsort(pe)[:g]].astype(np.int64)
    return [fx[i] for i in pf], [en[i] for i in pe], gold_rows


def task_features(fx: list[str], en: list[str], model, stage: SecondStage, lang: str, floor: float,
                  config: MineConfig = MineConfig()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mine foreign lines ``fx`` against English lines ``en`` with ``model`` (config's search, every floor off
    but the margin ``floor``) and return the candidates before the 1:1 selection: (foreign row, English row)
    int64 (c, 2) and their features float64 (c, 20), each distinct pair once."""
    from ..encoding import encode
    from ..mining.mine import candidates
    from ..mining.standout import moments_of, pair_standout

    x, y = encode(fx, model), encode(en, model)
    f, b, _ = candidates(x, y, config)
    s, t, sc, cos = (np.concatenate(p) for p in zip(f, b))
    _, first = np.unique(s.astype(np.int64) * (len(en) + 1) + t, return_index=True)
    keep = first[sc[first] >= floor]
    s, t, sc, cos = s[keep], t[keep], sc[keep], cos[keep]
    z = pair_standout(cos, s, t, lambda i: x[i], lambda i: y[i], moments_of(x), moments_of(y))
    judge = Judge(stage, lang, False, {"src": _pieces_of(fx, model), "tgt": _pieces_of(en, model)})
    return np.c_[s, t].astype(np.int64), judge.features(s, t, sc, cos, z)


def _pieces_of(texts: list[str], model) -> Callable[[np.ndarray], Pieces]:
    return lambda rows: Pieces.of(rows, [texts[i] for i in rows], model.tokenizer)


def labels(cands: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """bool (c,): which candidate pairs int (c, 2) are among the gold pairs int (g, 2)."""
    big = int(max(cands.max(initial=0), gold.max(initial=0))) + 1
    return np.isin(cands[:, 0] * big + cands[:, 1], gold[:, 0] * big + gold[:, 1])


def split_pairs(corpora: dict[str, list], per_corpus: int, seed: int) -> tuple[list, dict]:
    """(pairs for the lexical tables, {corpus: pairs for the classifier's tasks}) of ``corpora`` {name:
    [(foreign, English)]}: a seeded sample of up to ``per_corpus`` pairs of each corpus (at most half of it)
    goes to the tasks and is left out of the tables, so that the tables have not seen the tasks' pairs, as
    they will not have seen a user's; empty pairs are left out of both."""
    lexicon, tasks = [], {}
    for name, pairs in sorted(corpora.items()):
        pairs = [(a.strip(), b.strip()) for a, b in pairs if a.strip() and b.strip()]
        rng = np.random.default_rng([seed, *name.encode()])
        order = rng.permutation(len(pairs))
        n = min(per_corpus, len(pairs) // 2)
        tasks[name] = [pairs[i] for i in np.sort(order[:n])]
        lexicon += [pairs[i] for i in np.sort(order[n:])]
    return lexicon, tasks


def training_set(pools: dict[str, list], model, stage: SecondStage, lang: str,
                 config: SecondStageConfig = SecondStageConfig(), progress: Callable[[int], None] | None = None):
    """Features float64 (n, 20) and labels bool (n,) of the candidates of config's tasks (sizes x shares x
    draws, seeded) drawn from each pool of ``pools`` {corpus: [(foreign, English)]} on its own (a task's lines
    share its corpus's domain, as in mining), at the sizes its pairs allow (twice the size at least). progress
    gets 1 per task."""
    X, y = [], []
    for name, pairs in sorted(pools.items()):
        for size in config.sizes:
            if len(pairs) < 2 * size:
                continue
            for share in config.shares:
                for d in range(config.draws):
                    rng = np.random.default_rng([config.seed, *name.encode(), size, int(share * 1000), d])
                    fx, en, gold = draw_task(pairs, size, share, rng)
                    cands, feats = task_features(fx, en, model, stage, lang, config.floor)
                    X.append(feats)
                    y.append(labels(cands, gold))
                    if progress:
                        progress(1)
    if not X:
        from ..errors import ConfigError

        raise ConfigError(f"{lang}: no corpus has the {2 * min(config.sizes)} pairs a training task needs")
    return np.concatenate(X), np.concatenate(y)


def train_tables(pairs: list, tokenizer, lexicon_config=None) -> tuple:
    """IBM model 1 both ways over ``tokenizer``'s pieces of ``pairs`` [(foreign, English)]: (t(foreign|English),
    t(English|foreign)) (:func:`bitextmine.lexicon.train_ibm1`)."""
    from ..config import LexiconConfig
    from ..lexicon import train_ibm1, vocabulary_fingerprint

    cfg = lexicon_config or LexiconConfig()
    fp = vocabulary_fingerprint(tokenizer.proto)
    f, e = tokenizer.encode([p[0] for p in pairs]), tokenizer.encode([p[1] for p in pairs])
    v = tokenizer.vocab_size
    options = dict(iters=cfg.iters, null=cfg.null, floor=cfg.floor, fingerprint=fp)
    fwd = train_ibm1(*e, *f, v, v, **options)
    return fwd, train_ibm1(*f, *e, v, v, **options)


def fit(X: np.ndarray, y: np.ndarray, config: SecondStageConfig = SecondStageConfig()) -> dict:
    """The classifier of :func:`bitextmine.judge.logistic.fit_logistic` on a :func:`training_set`."""
    if not y.any() or y.all():
        from ..errors import ConfigError

        raise ConfigError("the second stage's training tasks gave no translations or no non-translations among "
                          "the candidates; expected both (more pairs, or a lower floor)")
    return fit_logistic(X, y, l2=config.l2)
