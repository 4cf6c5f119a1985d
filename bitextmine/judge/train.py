"""Training the second stage for a model and the parallel pairs of one language with English.

Tasks are drawn from the pairs as mining meets them (:func:`bitextmine.judge.tasks.build_task`): ``size``
lines a side, a ``share`` of them gold pairs, the rest the foreign side of some pairs and the English side of
others, so no distractor has a partner, and none nearly repeats a line it could be a translation of (a
paraphrase labelled a non-translation would teach the classifier to reject translations). Each task is mined
with the model (every floor off but the second stage's margin floor) and each candidate pair, before the 1:1
selection, is labelled gold or not: the negatives are the model's own nearest non-translations. Gradient-boosted
trees (:mod:`.trees`; or a logistic regression, :mod:`.logistic`) over their
:data:`bitextmine.judge.features.FEATURES` give the probability of translation.
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from ..config import MineConfig, SecondStageConfig
from .features import Pieces
from .judge import Judge
from .logistic import fit_logistic
from .store import SecondStage
from .tasks import PoolTooSmall, Task, build_task, clean_pool


def task_features(fx: list[str], en: list[str], model, stage: SecondStage, lang: str, floor: float,
                  config: MineConfig = MineConfig()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mine foreign lines ``fx`` against English lines ``en`` with ``model`` (config's search, every floor off
    but the margin ``floor``) and return the candidates before the 1:1 selection: (foreign row, English row)
    int64 (c, 2) and their features float64 (c, f) (the stage's), each distinct pair once. A side of more lines
    than the stage's ``max_lines`` for ``lang``: the margins (floor and feature) are reference margins, as in
    `mine` (:func:`bitextmine.mining.calibrated.within_second_stage`)."""
    from ..encoding import encode
    from ..mining.mine import candidates
    from ..mining.standout import moments_of, pair_standout

    x, y = encode(fx, model), encode(en, model)
    f, b, _ = candidates(x, y, config)
    s, t, sc, cos = (np.concatenate(p) for p in zip(f, b))
    _, first = np.unique(s.astype(np.int64) * (len(en) + 1) + t, return_index=True)
    s, t, sc, cos = s[first], t[first], sc[first], cos[first]
    limit = stage.reference_lines(lang, (len(x), len(y))) if lang in stage.languages else 0  # none while training it
    if limit:  # as mine does above the stage's max_lines
        sc = _reference(x, y, s, t, cos, (fx, en), limit, config)
    keep = sc >= floor
    s, t, sc, cos = s[keep], t[keep], sc[keep], cos[keep]
    z = pair_standout(cos, s, t, lambda i: x[i], lambda i: y[i], moments_of(x), moments_of(y))
    judge = Judge(stage, lang, False, {"src": _pieces_of(fx, model), "tgt": _pieces_of(en, model)})
    return np.c_[s, t].astype(np.int64), judge.features(s, t, sc, cos, z)


def _reference(x: np.ndarray, y: np.ndarray, s: np.ndarray, t: np.ndarray, cos: np.ndarray, texts: tuple,
               lines: int, config: MineConfig) -> np.ndarray:
    """The reference margins float32 (c,) of the pairs (x row s, y row t) int (c,) with cosines cos float (c,), as
    the staged run gives them (:func:`bitextmine.mining.reference.reference_margins`, samples of ``lines`` rows
    drawn by the sides' ``texts`` (x's, y's))."""
    from ..device import resolve_device
    from ..mining.reference import line_keys, reference_margins, sample_by_keys

    rows = {"src": lambda r: x[r], "tgt": lambda r: y[r]}
    samples = {side: sample_by_keys(line_keys(text), lines, config.seed) for side, text in zip(("src", "tgt"), texts)}
    return reference_margins(s, t, cos, rows, samples, config.k, config.margin, device=resolve_device(config.device),
                             precision=config.precision)


def _pieces_of(texts: list[str], model) -> Callable[[np.ndarray], Pieces]:
    return lambda rows: Pieces.of(rows, [texts[i] for i in rows], model.tokenizer)


def labels(cands: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """bool (c,): which candidate pairs int (c, 2) are among the gold pairs int (g, 2)."""
    big = int(max(cands.max(initial=0), gold.max(initial=0))) + 1
    return np.isin(cands[:, 0] * big + cands[:, 1], gold[:, 0] * big + gold[:, 1])


def split_pairs(corpora: dict[str, list], per_corpus: int, seed: int) -> tuple[list, dict]:
    """(pairs for the lexical tables, {corpus: pairs for the classifier's tasks}) of ``corpora`` {name:
    [(foreign, English)]}: a seeded sample of up to ``per_corpus`` distinct pairs of each corpus (at most half of
    them; pairs equal up to :func:`bitextmine.judge.tasks.key` are one) goes to the tasks, and every pair of any
    corpus that shares a text with one of them (up to the key) is left out of the tables, so that the tables have
    not seen the tasks' pairs, as they will not have seen a user's. Corpora repeat pairs, within and across them:
    drawn by position, 7.9 % of the French task pairs were also table pairs. Empty pairs are left out of both."""
    from .tasks import key

    cleaned = {name: [(a.strip(), b.strip()) for a, b in pairs if a.strip() and b.strip()]
               for name, pairs in sorted(corpora.items())}
    tasks = {}
    for name, pairs in cleaned.items():
        distinct = list({(key(a), key(b)): (a, b) for a, b in reversed(pairs)}.values())[::-1]  # first of each
        rng = np.random.default_rng([seed, *name.encode()])
        order = rng.permutation(len(distinct))
        tasks[name] = [distinct[i] for i in np.sort(order[:min(per_corpus, len(distinct) // 2)])]
    held = ({key(a) for pairs in tasks.values() for a, _ in pairs}, {key(b) for pairs in tasks.values() for _, b in pairs})
    lexicon = [(a, b) for pairs in cleaned.values() for a, b in pairs if key(a) not in held[0] and key(b) not in held[1]]
    return lexicon, tasks


def training_tasks(pools: dict[str, list], config: SecondStageConfig = SecondStageConfig()) -> Iterator[Task]:
    """config's tasks (sizes x shares x draws, seeded) drawn from each pool of ``pools`` {corpus: [(foreign,
    English)]} on its own (a task's lines share its corpus's domain, as in mining), at the sizes its pairs allow
    (twice the size at least, and what the repeat rules leave)."""
    for name, pairs in sorted(pools.items()):
        pairs = clean_pool(pairs)[0]
        for size in config.sizes:
            if len(pairs) < 2 * size:
                continue
            for share in config.shares:
                for d in range(config.draws):
                    rng = np.random.default_rng([config.seed, *name.encode(), size, int(share * 1000), d])
                    try:
                        yield build_task(pairs, size, share, rng)
                    except PoolTooSmall:  # the repeat rules left too few lines: a smaller size may still fit
                        continue


def training_set(pools: dict[str, list], model, stage: SecondStage, lang: str,
                 config: SecondStageConfig = SecondStageConfig(), progress: Callable[[int], None] | None = None):
    """Features float64 (n, f) (the stage's) and labels bool (n,) of the candidates of :func:`training_tasks`.
    progress gets 1 per task."""
    X, y = [], []
    for task in training_tasks(pools, config):
        cands, feats = task_features(task.src, task.tgt, model, stage, lang, config.floor)
        X.append(feats)
        y.append(labels(cands, np.array(sorted(task.gold), np.int64).reshape(-1, 2) - 1))
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


def expected_of(pairs: list, tables: tuple, tokenizer, config: SecondStageConfig = SecondStageConfig()) -> tuple:
    """(each foreign piece's usual log best link given English float32 (V,), each English piece's given the foreign)
    under ``tables`` (t(foreign|English), t(English|foreign)) over up to config's ``expected_pairs`` of ``pairs``
    [(foreign, English)] drawn with its seed (:func:`bitextmine.lexicon.expected_links`)."""
    from ..lexicon import expected_links

    rng = np.random.default_rng([config.seed, 7])
    pick = np.sort(rng.permutation(len(pairs))[:config.expected_pairs])
    f = tokenizer.encode([pairs[i][0] for i in pick])
    e = tokenizer.encode([pairs[i][1] for i in pick])
    return (expected_links(tables[0], e, f, shrink=config.expected_shrink),
            expected_links(tables[1], f, e, shrink=config.expected_shrink))


def fit(X: np.ndarray, y: np.ndarray, config: SecondStageConfig = SecondStageConfig()) -> dict:
    """The classifier of config (``classifier``: "trees", :func:`bitextmine.judge.trees.fit_trees`; "logistic",
    :func:`bitextmine.judge.logistic.fit_logistic`) on a :func:`training_set`."""
    if not y.any() or y.all():
        from ..errors import ConfigError

        raise ConfigError("the second stage's training tasks gave no translations or no non-translations among "
                          "the candidates; expected both (more pairs, or a lower floor)")
    if config.classifier == "trees":
        from .trees import fit_trees

        return fit_trees(X, y, config.trees, config.leaves, config.depth, config.rate, config.l2, config.seed)
    return fit_logistic(X, y, l2=config.l2)
