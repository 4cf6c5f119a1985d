"""Calibrate a model's mining settings for a language pair on dev pairs: the threshold, standout floor and cosine
floor that `mine` applies to that pair by default, with what they measured.

Dev pairs are line-aligned pairs of the two languages that the model never trained on (``train`` holds some
apart; a user may bring their own). A task of N lines draws N source lines; half of them (``keep``) keep their
translation on the other side, the other half's places go to translations of dev pairs not drawn, so that no
distractor has a partner in the task (or, for a set given with distractors, lines of the target's language
from them: :func:`draw_distracted`); both sides are shuffled. Over every draw and size, precision, recall and
F1 of the mined pairs are computed for each point of the grid of :mod:`bitextmine.evaluation.threshold_grid`
(the floors apply before the 1:1 selection, as in `mine`), and the settings chosen are the broad top of the mean
F1 (:func:`bitextmine.evaluation.threshold_grid.best`); where no second stage judges the pair, the mean over those
tasks and tasks with a tenth of the lines translated, since the floors alone then decide what is printed where
translations are rare (:attr:`bitextmine.config.CalibrationConfig.floor_shares_alone`). A pair may come with
several dev sets (say one a domain): each weighs the same. The second stage's settings are chosen on tasks with
same-domain distractors (:func:`stage_tasks`), up to sizes whose distractors come from filler pairs. Nothing here
prints.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from ..config import CalibrationConfig, Floors
from ..errors import ConfigError
from .threshold_grid import FLOORS, GRID, ZS, best, prf_table, settings

DRAWS = {30: 20, 100: 10, 300: 5, 1000: 3}  # draws per size (fewer at large sizes: their mean moves less)
KEEP = 0.5  # share of a task's source lines whose translation is on the other side (the tasks the choice is made on)
SPARSE = 0.1  # what the settings chosen give where translations are rarer is measured too, from 100 lines
MIN_PAIRS = 45  # the fewest dev pairs that give a task of 30 lines
# mine's defaults (the settings chosen, and the second stage where the model has one) are measured end to end on
# tasks of English and another language drawn from the same dev pairs (bitextmine.judge.tasks: same-domain
# distractors), of CalibrationConfig.measure_lines lines a side, fewer (down to this) where the pairs run out
DEFAULTS_MIN_LINES = 50
MEASURED_BY = "; mine's defaults measured by "  # what --keep-settings adds to the provenance of the settings kept
STAGE_BY = "; the second stage's settings chosen by "  # what --keep-floors adds (and MEASURED_BY where it measures)


@dataclass(frozen=True)
class PairCalibration:
    """The settings chosen for a language pair and what they measured: ``settings`` {threshold, min_z,
    min_cosine}; ``measured`` [{lines, share, precision, recall, f1}] per task size (mean over its draws);
    ``global_f1`` the mean F1 of the global defaults (:class:`bitextmine.config.Floors`) on the same tasks,
    ``f1`` that of the settings chosen; ``pairs`` the dev pairs used; ``defaults_measured`` what mine's defaults
    measured end to end (:func:`measure_defaults`, [] when not measured) and ``defaults_second_stage`` whether
    the second stage judged those runs; ``kept``: the settings are those the model held, not chosen here (no F1
    surface: ``f1`` and ``global_f1`` are NaN); ``stage``: the second stage's settings for the pair
    ({min_prob, max_lines, measured, chosen_on[, kept]}: :func:`with_stage`), {} where it has none."""

    settings: dict
    measured: list = field(default_factory=list)
    f1: float = 0.0
    global_f1: float = 0.0
    pairs: int = 0
    defaults_measured: list = field(default_factory=list)
    defaults_second_stage: bool = False
    kept: bool = False
    assist_measured: dict = field(default_factory=dict)  # {fingerprint: {"assist": name, "measured": [...]}}
    assist_note: str = ""  # why the assist asked for was not measured on this pair, or ""
    stage: dict = field(default_factory=dict)  # the second stage's settings for the pair ({} where it has none)

    def entry(self) -> dict:
        """The pair's entry of a model's "mining" section (:func:`bitextmine.mining.calibrated.write_section`)."""
        extra = {"defaults_measured": self.defaults_measured, "defaults_second_stage": self.defaults_second_stage}
        return {**self.settings, "measured": self.measured, **(extra if self.defaults_measured else {}),
                **({"assist_measured": self.assist_measured} if self.assist_measured else {}),
                **({"second_stage": self.stage} if self.stage else {})}


def draw_task(x: np.ndarray, y: np.ndarray, size: int, keep: float, rng: np.random.Generator,
              pool: np.ndarray | None = None):
    """One task from aligned rows x, y float32 (n, d): (source rows (size, d), target rows (size, d), gold
    {(source i, target j)}). The target side holds the translations of a ``keep`` share of the source rows and,
    in the others' places, translations of rows not drawn, or with ``pool`` (float32 (m, d): lines of the
    target's language with no partner among x) rows of it (:func:`draw_distracted`); both orders are
    shuffled."""
    if pool is not None:
        return draw_distracted(x, y, pool, size, keep, rng)
    n = len(x)
    order = rng.permutation(n)
    pick, rest = order[:size], order[size:]
    kept = rng.random(size) < keep
    fill = rest[: int((~kept).sum())]
    tgt = np.concatenate([pick[kept], fill])
    return _shuffled(x[pick], y[tgt], np.flatnonzero(kept), rng)


def draw_distracted(x: np.ndarray, y: np.ndarray, pool: np.ndarray, size: int, keep: float,
                    rng: np.random.Generator):
    """One task as :func:`draw_task`, whose target lines without a partner are rows of ``pool`` float32 (m, d)
    (m >= size): ``size`` source rows of x (all of them where x has fewer), the translations of a ``keep``
    share of them, pool rows in the others' places."""
    pick = rng.choice(len(x), min(size, len(x)), replace=False)
    kept = rng.random(len(pick)) < keep
    fill = pool[rng.choice(len(pool), int((~kept).sum()), replace=False)]
    return _shuffled(x[pick], np.concatenate([y[pick[kept]], fill]), np.flatnonzero(kept), rng)


def _shuffled(src: np.ndarray, tgt: np.ndarray, sources: np.ndarray, rng: np.random.Generator):
    """(src, tgt in a random order, gold {(source i, new position of its translation)}): the first len(sources)
    target rows are the translations of the source rows ``sources``, in that order."""
    perm = rng.permutation(len(tgt))
    at = np.argsort(perm)  # the new position of each target row
    return src, tgt[perm], {(int(i), int(at[j])) for j, i in enumerate(sources)}


def sizes_for(n: int, sizes=CalibrationConfig.floor_lines, keep: float = KEEP, pooled: bool = False) -> list[int]:
    """The task sizes ``n`` dev pairs allow (a task of N lines at a share ``keep`` takes up to (2 - keep) N pairs;
    ``pooled``, its distractors from a pool (:func:`draw_distracted`), N pairs)."""
    return [s for s in sizes if (s if pooled else int(s * (1 + (1 - keep)))) <= n]


def calibrate_pair(x: np.ndarray, y: np.ndarray, *, sizes=CalibrationConfig.floor_lines, seed: int = 0
                   ) -> PairCalibration:
    """Settings for mining rows like x against rows like y (aligned dev pairs, float32 (n, d), L2-normalised),
    chosen on tasks drawn from them (:func:`draw_task`), with what they measured: :func:`calibrate_sets` of one
    set."""
    return calibrate_sets([(x, y)], sizes=sizes, seed=seed)


def calibrate_sets(sets: list, *, sizes=CalibrationConfig.floor_lines, seed: int = 0, shares=(KEEP,)
                   ) -> PairCalibration:
    """Settings for mining one language pair, chosen on tasks drawn from each of ``sets`` [(x, y) or (x, y,
    pool): aligned dev pairs, float32 (n, d), L2-normalised, e.g. one set a domain; ``pool`` float32 (m, d) or
    None: lines of y's language with no partner in x, the distractors of the set's tasks (:func:`draw_task`)]:
    the top of the F1 surface averaged over the ``shares`` of translations (each weighs the same; KEEP and
    SPARSE, SPARSE from tasks of 100 lines), within a share over the sets (each weighs the same) and, within a
    set, over the task sizes it allows; ``measured`` per share and size, means over the sets that allow it.
    ConfigError when a set has unaligned rows or none has enough pairs."""
    sets = [(*s, None) if len(s) == 2 else tuple(s) for s in sets]
    for x, y, _ in sets:
        if len(x) != len(y):
            raise ConfigError(f"dev pairs: {len(x)} source rows against {len(y)} target rows; expected aligned pairs")
    if not shares or set(shares) - {KEEP, SPARSE}:
        raise ConfigError(f"floor shares {shares}: the floors' tasks are drawn at {KEEP} and {SPARSE} translated")
    usable = [s for s in sets if _set_sizes(s, sizes, KEEP)]
    if not usable:
        raise ConfigError(f"{max(len(x) for x, *_ in sets)} dev pairs: too few to calibrate on (at least "
                          f"{MIN_PAIRS} for tasks of {min(sizes)} lines)")
    grids = {KEEP: [task_grids(x, y, _set_sizes((x, y, p), sizes, KEEP), KEEP, np.random.default_rng(seed), p)
                    for x, y, p in usable],
             SPARSE: [task_grids(x, y, [s for s in _set_sizes((x, y, p), sizes, SPARSE) if s >= 100], SPARSE,
                                 np.random.default_rng(seed + 1), p) for x, y, p in usable]}  # own draws
    f1 = np.mean([np.mean([np.mean([g[..., 2] for g in set_grids.values()], 0)
                           for set_grids in grids[share] if set_grids], 0)
                  for share in shares if any(grids[share])], 0)
    index = best(f1)
    measured = _measured_over(grids[KEEP], KEEP, index) + _measured_over(grids[SPARSE], SPARSE, index)
    return PairCalibration(settings(index), measured, float(f1[index]), float(f1[_global_index()]),
                           sum(len(x) for x, *_ in sets))


def _set_sizes(dev: tuple, sizes, keep: float) -> list[int]:
    """The task sizes a dev set (x, y, pool or None) allows at share ``keep``: :func:`sizes_for`; with a pool, only
    sizes N it holds N rows for (a task's untranslated lines are drawn at random, up to all N)."""
    x, _, pool = dev
    return [s for s in sizes_for(len(x), sizes, keep, pool is not None) if pool is None or s <= len(pool)]


def task_grids(x: np.ndarray, y: np.ndarray, sizes: list, keep: float, rng: np.random.Generator,
               pool: np.ndarray | None = None) -> dict:
    """{size: the P/R/F1 grid float (floors, zs, thresholds, 3) averaged over DRAWS[size] tasks drawn from x, y
    (:func:`draw_task`, a ``keep`` share translated, distractors from ``pool`` where given) with ``rng``, for each
    of ``sizes`` in order}."""
    return {s: np.mean([prf_table(*draw_task(x, y, s, keep, rng, pool)) for _ in range(DRAWS.get(s, 3))], 0)
            for s in sizes}


def _measured_over(grids: list, share: float, index: tuple) -> list[dict]:
    """What the grid point ``index`` measured per size ([{lines, share, precision, recall, f1}]), means over the
    sets' ``grids`` [{size: grid}] that hold the size."""
    sizes = sorted({s for g in grids for s in g})
    return [_measured(s, share, np.mean([g[s][index] for g in grids if s in g], 0)) for s in sizes]


def _measured(lines: int, share: float, prf: np.ndarray) -> dict:
    """One entry of what settings measured: {lines, share, precision, recall, f1}."""
    return {"lines": lines, "share": share, **dict(zip(("precision", "recall", "f1"), map(float, prf)))}


def _global_index() -> tuple:
    """The grid point of the global defaults (Floors: threshold 1.18, min-z 4.5, no cosine floor)."""
    d = Floors()
    return (int(np.argmin(abs(FLOORS - d.min_cosine))), int(np.argmin(abs(ZS - d.min_z))),
            int(np.argmin(abs(GRID - d.threshold))))


def distinct_pairs(src: list[str], tgt: list[str]) -> tuple[list[str], list[str]]:
    """The pairs whose source and target texts are each the first of their kind (stripped; blank sides left
    out): a repeated text would make two gold pairs of one line."""
    seen_s, seen_t, out_s, out_t = set(), set(), [], []
    for s, t in zip(src, tgt):
        ks, kt = s.strip(), t.strip()
        if ks and kt and ks not in seen_s and kt not in seen_t:
            seen_s.add(ks)
            seen_t.add(kt)
            out_s.append(s)
            out_t.append(t)
    return out_s, out_t


def measure_defaults(model, langs: tuple[str, str], src: list[str], tgt: list[str], settings: dict, *,
                     config: CalibrationConfig = CalibrationConfig(), assist: str = "") -> tuple[list[dict], bool]:
    """What ``mine`` measures end to end with ``settings`` ({threshold, min_z, min_cosine}[, min_prob: the second
    stage's]) and the model's second stage for ``langs`` where it has one, on tasks drawn from the dev pairs
    (``src``, ``tgt``: line-aligned texts in ``langs``, one of them English) with ``config.seed``: per share of
    translations (``config.stage_shares``), ``config.stage_draws`` tasks of ``config.measure_lines`` lines a side
    (fewer where the pairs cannot fill them) built by
    :func:`bitextmine.judge.tasks.build_task`. Returns ([{lines, share, precision, recall, f1}] means over the
    draws, whether the second stage judged the runs); ([], False) for a pair without English or pairs too few for
    a task of DEFAULTS_MIN_LINES lines. ``assist``: mine --assist (MineConfig.assist) in every run, and the flag
    returned says whether it joined the stage's score."""
    if "en" not in langs or langs[0] == langs[1]:
        return [], False
    other, pool = _foreign_pool(langs, src, tgt)
    rng = np.random.default_rng(config.seed)
    out, judged = [], False
    for share in config.stage_shares:
        runs = [r for r in (_run_task(model, other, pool, share, config.measure_lines, rng, settings, assist)
                            for _ in range(config.stage_draws)) if r]
        if runs:
            judged = judged or any(r[1] for r in runs)
            prf = np.mean([r[2] for r in runs], 0)
            out.append(_measured(int(min(r[0] for r in runs)), share, prf))
    return out, judged


def _run_task(model, lang: str, pool: list, share: float, lines: int, rng, settings: dict, assist: str = ""):
    """(lines a side, whether the second stage (with ``assist``: the assist) judged, (precision, recall, F1)) of
    mine on one task drawn from ``pool`` ((``lang`` text, English text) pairs), or None when the pool fills no task
    of DEFAULTS_MIN_LINES. Precision is 1 where nothing was printed."""
    from ..config import MineConfig
    from .sparse_tasks import mined, prf, write_task

    task = _draw(pool, share, lines, rng)
    if task is None:
        return None
    min_prob = float(settings["min_prob"]) if settings.get("min_prob") is not None else None
    # with an assist, runs without the pick: mine shows these figures only to runs that do not pick
    config = MineConfig(**{k: float(settings[k]) for k in ("threshold", "min_z", "min_cosine")}, trust_langs=True,
                        assist=assist, min_prob=min_prob, assist_pick=False if assist else None)
    with tempfile.TemporaryDirectory(prefix="bitextmine-calibrate-") as d:
        write_task(task, d)
        printed, _, stats = mined(d, model, config, (lang, "en"))
    judged = ("|assist:" if assist else "second-stage:") in stats.signature
    return len(task.src), judged, prf(printed, task.gold) if printed else (1.0, 0.0, 0.0)


def _foreign_pool(langs: tuple[str, str], src: list[str], tgt: list[str]) -> tuple[str, list]:
    """(the language paired with English, the dev pairs as a task pool of (its text, English text):
    :func:`bitextmine.judge.tasks.clean_pool`)."""
    from ..judge.tasks import clean_pool

    en_first = langs[0] == "en"
    return langs[1] if en_first else langs[0], clean_pool(list(zip(tgt, src)) if en_first else list(zip(src, tgt)))[0]


def _staged(model, langs: tuple[str, str]) -> str | None:
    """The language paired with English in ``langs`` where the model's second stage holds it, else None."""
    stage = model.second_stage
    other = langs[1] if langs[0] == "en" else langs[0]
    return other if "en" in langs and other != "en" and stage is not None and other in stage.languages else None


def _draw(pool: list, share: float, lines: int, rng):
    """A task (:func:`bitextmine.judge.tasks.build_task`) of ``lines`` lines a side, fewer (down to
    DEFAULTS_MIN_LINES) where ``pool`` cannot fill it, with gold pairs; or None."""
    from ..judge.tasks import build_task

    task = _shrinking(lambda n: build_task(pool, n, share, rng), lines)
    return task if task is not None and task.gold else None


def _shrinking(build, lines: int):
    """``build(n)`` for the largest n from ``lines`` down (by a fifth at a time, to DEFAULTS_MIN_LINES) at which
    it raises no :class:`bitextmine.judge.tasks.PoolTooSmall`; None where none."""
    from ..judge.tasks import PoolTooSmall

    while lines >= DEFAULTS_MIN_LINES:
        try:
            return build(lines)
        except PoolTooSmall:
            lines = int(lines * 0.8)
    return None


def stage_tasks(pool: list, filler: list, config: CalibrationConfig, rng: np.random.Generator) -> list[tuple]:
    """[(lines asked, share, Task)]: ``config.stage_draws`` tasks (:func:`bitextmine.judge.tasks.build_task`) for
    each of ``config.stage_shares`` and ``config.stage_lines`` drawn from ``pool`` ((foreign, English) dev pairs,
    a clean pool): the smallest size shrinks to what the pool fills (:func:`_draw`); a larger one the pool cannot
    fill takes its gold pairs from the pool and its distractors from the rest of it and then from ``filler`` (pairs
    of the same languages, which the model may have trained on), and is left out without filler."""
    smallest = min(config.stage_lines)
    out = []
    for share in config.stage_shares:
        for size in sorted(config.stage_lines):
            if size == smallest and (_fits(pool, share, size) or not filler):
                drawn = [_draw(pool, share, size, rng) for _ in range(config.stage_draws)]
            else:
                drawn = _filled(pool, filler, share, size, config.stage_draws, rng)
            out += [(size, share, t) for t in drawn if t is not None and t.gold]
    return out


def _filled(pool: list, filler: list, share: float, size: int, draws: int, rng: np.random.Generator) -> list:
    """Up to ``draws`` tasks of ``size`` lines a side whose gold pairs come from ``pool`` and distractors from the
    rest of it, then, where the pool cannot fill the size, from ``filler`` (a draw the pairs cannot fill is left
    out); none where the pool cannot fill the size and there is no filler."""
    from ..judge.tasks import NEAR, PoolTooSmall, build_task, with_filler

    fits = _fits(pool, share, size)
    if not fits and not filler:
        return []
    pairs = pool if fits else with_filler(pool, filler, size)
    out = []
    for _ in range(draws):
        try:
            out.append(build_task(pairs, size, share, rng, NEAR, None if fits else len(pool)))
        except PoolTooSmall:
            pass
    return out


def _fits(pool: list, share: float, size: int) -> bool:
    """Whether ``pool`` holds the pairs a task of ``size`` lines a side at ``share`` takes (size * (2 - share))."""
    return size * (2 - share) <= len(pool)


def context_tasks(documents: tuple, gold: set, config: CalibrationConfig, rng: np.random.Generator) -> list[tuple]:
    """[(lines asked, share, Task)]: ``config.stage_draws`` tasks of ``config.context_lines`` lines a side for each
    of ``config.context_shares`` (:func:`bitextmine.evaluation.sparse_tasks.build_context_task`) from
    ``documents`` ((foreign, English) pairs in document order, each line's document name): their gold pairs are
    pairs of ``documents`` that ``gold`` holds (dev pairs, (foreign, English)), their distractors the lines
    nearest them in their documents, the foreign side's and the English side's from other lines. A task the
    documents cannot fill shrinks to what they fill (down to DEFAULTS_MIN_LINES lines, else it is left out)."""
    from .sparse_tasks import build_context_task

    pairs, names = documents
    held = [i for i, p in enumerate(pairs) if p in gold]
    out = []
    for share in config.context_shares:
        for _ in range(config.stage_draws):
            task = _shrinking(lambda n: build_context_task(pairs, names, held, n, share, rng), config.context_lines)
            out += [(config.context_lines, share, task)] if task is not None and task.gold else []
    return out


def choose_stage(model, langs: tuple[str, str], sets: list, floors: dict, *,
                 config: CalibrationConfig = CalibrationConfig(), filler: list = (), contexts: list = ()):
    """The second stage's settings for ``langs`` (a :class:`bitextmine.evaluation.stage_calibration.StageChoice`)
    chosen with the pair's ``floors`` on tasks drawn by :func:`stage_tasks` from each dev set of ``sets``
    [(src, tgt): line-aligned texts in ``langs``] with ``filler`` [(src, tgt) pairs in ``langs``], and by
    :func:`context_tasks` from each of ``contexts`` [((src, tgt) pairs in ``langs`` in document order, each
    line's document name)] with the dev pairs as gold, from a seed of their own (config.seed + 1: other draws than
    those measured); each set, context and share weighs the same. None where the model has no stage for the pair
    or the pairs fill no task."""
    from .stage_calibration import choose_stage as choose

    other = _staged(model, langs)
    if other is None:
        return None
    rng = np.random.default_rng(config.seed + 1)
    fill = _foreign_pool(langs, [s for s, _ in filler], [t for _, t in filler])[1] if filler else []
    tasks, gold = [], set()
    for i, (src, tgt) in enumerate(sets):
        pool = _foreign_pool(langs, src, tgt)[1]
        gold.update((f.strip(), e.strip()) for f, e in pool)
        tasks += [(i, size, share, t) for size, share, t in stage_tasks(pool, fill, config, rng)]
    for i, (pairs, names) in enumerate(contexts):
        oriented = [(t, s) for s, t in pairs] if langs[0] == "en" else list(pairs)
        tasks += [(("context", i), size, share, t)
                  for size, share, t in context_tasks((oriented, names), gold, config, rng)]
    if not tasks:
        return None
    return choose(model, other, tasks, floors, own_lines=config.stage_own_lines, beta=config.stage_beta,
                  score_map=config.stage_score_map)


def with_stage(model, langs: tuple[str, str], sets: list, c: PairCalibration, *,
               config: CalibrationConfig = CalibrationConfig(), filler: list = (), contexts: list = (),
               keep: bool = False) -> PairCalibration:
    """``c`` with the second stage's settings for the pair: chosen by :func:`choose_stage` on the dev ``sets``
    [(src, tgt)], ``filler`` and ``contexts``, or with ``keep`` those the model holds (marked kept); unchanged
    where the model has no stage for the pair."""
    if not keep:
        chosen = choose_stage(model, langs, sets, c.settings, config=config, filler=filler, contexts=contexts)
        return replace(c, stage=chosen.entry()) if chosen else c
    other = _staged(model, langs)
    if other is None:
        return c
    from ..mining.calibrated import stage_entry_for

    stage = model.second_stage
    held = stage_entry_for(model.mining, *langs) or {**{k: stage.languages[other][k] for k in (
        "min_prob", "max_lines")}, "measured": [], "chosen_on": stage.chosen_on}  # the calibration's, else the file's
    return replace(c, stage={**held, "min_prob": float(held["min_prob"]), "max_lines": int(held["max_lines"]),
                             "kept": True})


def measure_pair(model, langs: tuple[str, str], src: list[str], tgt: list[str], c: PairCalibration, *,
                 config: CalibrationConfig = CalibrationConfig()) -> PairCalibration:
    """``c`` with what mine's defaults measure end to end with its settings and its second stage's
    (:func:`measure_defaults`)."""
    settings = {**c.settings, **({"min_prob": c.stage["min_prob"]} if c.stage else {})}
    got, judged = measure_defaults(model, langs, src, tgt, settings, config=config)
    return replace(c, defaults_measured=got, defaults_second_stage=judged)


def calibrate_mining(model, pairs, *, config: CalibrationConfig = CalibrationConfig(), fillers=(), contexts=(),
                     write: bool = True, chosen_on: str = "", defaults: bool = True, keep: bool = False,
                     keep_floors: bool = False, assist: str = "", log=lambda message: None
                     ) -> dict[str, PairCalibration]:
    """Calibrate ``model``'s mining settings for each language pair of ``pairs`` ((language, language, file, file):
    line-aligned dev pairs of those two ISO 639-1 codes, never trained on; a pair given more than once: dev sets,
    e.g. of other domains, that weigh the same; a fifth file: lines of the second language with no partner among the
    set, from which the set's floor tasks take their distractors, :func:`draw_distracted`) on the tasks ``config``
    describes, and, with ``write``, store them with what they measured (with ``defaults``, also what mine's defaults
    measured end to end on the pair's first dev set: :func:`measure_defaults`, pairs with English) in the model
    directory's "mining" section (:func:`bitextmine.mining.calibrated.write_section`: beside the pairs it already
    holds; the bundled model is read-only: ConfigError). ``fillers`` (same form as ``pairs``): pairs of the same
    languages (the model may have trained on them) from which the second stage's tasks larger than the dev pairs
    fill take their distractors. ``contexts`` ((language, language, file, file, file of document names)): pairs of a
    pair's languages in document order, one document name a line; the dev pairs among them are the gold pairs of
    further tasks for the second stage whose distractors are the lines around them in their documents
    (:func:`context_tasks`). With ``keep``, the settings the model holds for each pair are kept (ConfigError where
    it holds none) and only what mine's defaults measure with them is added; with ``keep_floors``, only the floors
    are kept and the second stage's settings are chosen with them. With ``assist`` (mine --assist), also what mine
    measures with it, where it knows the pair's languages and joins the second stage. Returns {pair key "de-en":
    :class:`PairCalibration`}. ``log`` gets a line as each step of a pair begins."""
    from ..corpus import read_parallel
    from ..mining.calibrated import pair_key, write_section

    if keep and not defaults:
        raise ConfigError("--keep-settings measures mine's defaults with the settings the model holds: drop "
                          "--no-measure-defaults")
    if not pairs:
        raise ConfigError("no dev pairs: give --pair or --distracted-pair")
    if keep and keep_floors:
        raise ConfigError("--keep-settings keeps the floors too: give --keep-settings or --keep-floors, not both")
    if write and not model.path:
        raise ConfigError("the model has no directory to store its calibration in")
    if write and _is_bundled(model.path):
        raise ConfigError("the bundled model is part of the package and is not rewritten; calibrate a model "
                          "directory of your own (a copy: cp -r, or one from 'bitextmine train')")
    grouped, filled = _grouped(pairs), _grouped(fillers, "--filler")
    for key in filled.keys() - grouped.keys():
        raise ConfigError(f"--filler {key}: no --pair of those languages to fill tasks for")
    documents = _contexts(model, contexts, grouped, keep)
    mode = "settings" if keep else "floors" if keep_floors else ""  # what the model holds is kept
    out = {}
    for key, ((a, b), given) in grouped.items():
        sets = [distinct_pairs(*read_parallel(files.a, files.b)) for files in given]
        pools = [_pool(files, dev) for files, dev in zip(given, sets)]
        filler = _filler(filled.get(key), (a, b), config.seed)
        found = _documents(documents.get(key, ()), (a, b), sets)
        log(f"{key}: {sum(len(src) for src, _ in sets):,} distinct dev pairs in {len(sets)} set(s)"
            + (f", {sum(len(p) for _, p in filter(None, pools)):,} floor distractors" if any(pools) else "")
            + (f", {len(filler):,} filler pairs" if filler else "")
            + (f", {sum(len(p) for p, _ in found):,} lines of documents" if found else ""))
        out[key] = _calibrated(model, (a, b), sets, (filler, found, pools), config, mode, defaults, assist, log)
    if write:
        made = f"bitextmine calibrate-mining on dev pairs, seed {config.seed}"
        made += f", stage beta {config.stage_beta:g}" if config.stage_beta != 1 and not keep else ""
        how = {k: chosen_on or _provenance(model.mining, k, made, mode, bool(c.defaults_measured))
               for k, c in out.items()}
        write_section(model.path, {k: {**c.entry(), "chosen_on": how[k]} for k, c in out.items()},
                      chosen_on or (next(iter(how.values())) if len(set(how.values())) == 1 else made))
    return out


def _provenance(section: dict, key: str, made: str, keep: str, measured: bool) -> str:
    """How pair ``key``'s entry came to be: ``made``, or with ``keep`` ("settings", "floors") the provenance of
    the settings kept (the pair's own in ``section``, else the section's, without what an earlier run added), then
    ``made`` as what chose the second stage's settings (``keep`` "floors") and measured mine's defaults
    (``measured``)."""
    from ..mining.calibrated import entries

    if not keep:
        return made
    held = entries(section).get(key, {}).get("chosen_on") or (section or {}).get("chosen_on", "")
    own = held.split(MEASURED_BY)[0].split(STAGE_BY)[0]
    if keep == "settings":
        return f"{own}{MEASURED_BY}{made} (--keep-settings)"
    return f"{own}{STAGE_BY}{made}" + (f"{MEASURED_BY}the same" if measured else "") + " (--keep-floors)"


def _calibrated(model, langs: tuple, sets: list, extra: tuple, config: CalibrationConfig, keep: str,
                defaults: bool, assist: str, log) -> PairCalibration:
    """One language pair's calibration (:func:`calibrate_mining`) from its dev ``sets`` [(src texts, tgt texts)]
    and ``extra``: for the second stage, filler pairs and documents (:func:`choose_stage`); for the floors, each
    set's distractors or None (:func:`_pool`); ``keep``: what the model holds is kept, "settings" (floors and the
    stage's), "floors", or "" (nothing)."""
    filler, contexts, pools = extra
    pairs, staged = sum(len(src) for src, _ in sets), _staged(model, langs)
    if not keep:
        log("  choosing the floors")
    c = (_kept(model, *langs, pairs, f"--keep-{keep}") if keep else
         calibrate_sets([_encoded(model, dev, pool) for dev, pool in zip(sets, pools)], sizes=config.floor_lines,
                        seed=config.seed, shares=config.floor_shares if staged else config.floor_shares_alone))
    stage_kept = keep == "settings"
    if not stage_kept and staged:
        log(f"  choosing the second stage's settings on tasks of {', '.join(map(str, config.stage_lines))} lines"
            + (f" and context tasks of {config.context_lines:,}" if contexts else ""))
    c = with_stage(model, langs, sets, c, config=config, filler=filler, contexts=contexts, keep=stage_kept)
    measuring = with_entry(model, langs, c)
    if defaults and "en" in langs:
        log("  measuring mine's defaults end to end")
        c = measure_pair(measuring, langs, *sets[0], c, config=config)
    if assist:
        log(f"  measuring mine --assist {assist} end to end")
        c = _with_assist_measured(c, measuring, langs, *sets[0], assist, config)
    return c


def with_entry(model, langs: tuple[str, str], c: PairCalibration):
    """``model`` as `mine` would load it with ``c`` as the pair's entry of its calibration (the second stage's
    min_prob, max_lines and score map among it): a copy in memory, the model directory untouched; ``model`` itself
    where ``c`` holds no second stage's settings."""
    from ..mining.calibrated import SECTION_VERSION, calibrated_stage, entries, pair_key

    if not c.stage or model.second_stage is None:
        return model
    section = {"version": SECTION_VERSION, "languages": {**entries(model.mining), pair_key(*langs): c.entry()}}
    copy = replace(model, config={**model.config, "mining": section})
    copy.__dict__["_second_stage"] = calibrated_stage(model.second_stage, section)
    return copy


class DevFiles(NamedTuple):
    """A dev set's two line-aligned files in its pair's order and, for a set given with distractors, their file and
    the index (0, 1) of the side whose language they are in."""

    a: str
    b: str
    distractors: str | None = None
    side: int | None = None


def _grouped(pairs, option: str = "--pair") -> dict:
    """{pair key: ((language, language) as first given, [:class:`DevFiles`])}: each (a, b, file, file[, file of
    b's lines]) of ``pairs`` under its key, a pair given as (b, a) with its files swapped. ConfigError naming
    ``option`` for a == b."""
    from ..mining.calibrated import pair_key

    out: dict = {}
    for a, b, path_a, path_b, *distractors in pairs:
        if a == b:
            raise ConfigError(f"{option} {a} {b}: expected two different languages")
        langs, sets = out.setdefault(pair_key(a, b), ((a, b), []))
        files = (path_a, path_b) if langs == (a, b) else (path_b, path_a)
        sets.append(DevFiles(*files, distractors[0], int(langs == (a, b))) if distractors else DevFiles(*files))
    return out


def _pool(files: DevFiles, dev: tuple) -> tuple[int, list[str]] | None:
    """(the index of its language, the distinct lines of a dev set's distractors file (stripped, blank lines
    and the set's own texts in that language left out)) for ``files`` with a distractors file, else None;
    ``dev``: the set's (texts, texts)."""
    from ..corpus import read_lines

    if files.distractors is None:
        return None
    own = {t.strip() for t in dev[files.side]}
    return files.side, sorted({t.strip() for t in read_lines(files.distractors) if t.strip()} - own)


def _encoded(model, dev: tuple, pool: tuple | None) -> tuple:
    """A dev set as :func:`calibrate_sets` takes it: (source rows, target rows) of its (texts, texts), or with a
    ``pool`` (side, lines) the side's language as the target and the pool's rows as the distractors."""
    from ..encoding import encode

    if pool is None:
        return encode(dev[0], model), encode(dev[1], model)
    side, lines = pool
    return encode(dev[1 - side], model), encode(dev[side], model), encode(lines, model)


def _contexts(model, contexts, grouped: dict, keep: bool) -> dict:
    """{pair key: [((language, language) as given, (file, file, names file))]} of ``contexts``; ConfigError for
    one whose languages no --pair has, one with --keep-settings, or one the model's second stage does not
    judge."""
    from ..mining.calibrated import pair_key

    out: dict = {}
    for a, b, *files in contexts:
        key = pair_key(a, b)
        if a == b or key not in grouped:
            raise ConfigError(f"--context {a} {b}: expected the two languages of a --pair (its dev pairs are the "
                              "gold pairs of the context tasks)")
        if keep:
            raise ConfigError("--context chooses the second stage's settings, which --keep-settings keeps: give one")
        if _staged(model, (a, b)) is None:
            raise ConfigError(f"--context {a} {b}: the model has no second stage for {key}, whose settings context "
                              "tasks choose")
        out.setdefault(key, []).append(((a, b), tuple(files)))
    return out


def _documents(given: list, langs: tuple, sets: list) -> list:
    """[(pairs in ``langs``' order, each line's document name)] of the documents ``given`` [((languages as
    given), (file, file, names file))] (:func:`read_documents`); ConfigError naming the first whose pairs hold no
    dev pair of ``sets`` [(src, tgt)]: a context task's gold pairs are dev pairs."""
    dev = {(s.strip(), t.strip()) for src, tgt in sets for s, t in zip(src, tgt)}
    out = []
    for order, files in given:
        pairs, names = read_documents(*files, tuple(order) != tuple(langs))
        if dev.isdisjoint(pairs):
            raise ConfigError(f"--context {files[0]}: none of its {len(pairs):,} pairs is a dev pair of the --pair "
                              "of its languages; the gold pairs of context tasks are dev pairs found in documents")
        out.append((pairs, names))
    return out


def read_documents(path_a: str, path_b: str, names: str, swap: bool = False) -> tuple[list, list[str]]:
    """(the pairs of two line-aligned files in document order [(text of a, text of b)], stripped; with ``swap``
    (text of b, text of a)), each line's document name from ``names``, one a line). CorpusError where the files'
    lines differ in number."""
    from ..corpus import read_lines, read_parallel
    from ..errors import CorpusError

    x, y = read_parallel(path_a, path_b)
    docs = [d.strip() for d in read_lines(names)]
    if len(docs) != len(x):
        raise CorpusError(f"{names}: {len(docs)} lines of document names against {len(x)} lines in {path_a}; "
                          "expected one name for each line")
    pairs = [(t.strip(), s.strip()) if swap else (s.strip(), t.strip()) for s, t in zip(x, y)]
    return pairs, docs


def _filler(found, langs: tuple, seed: int) -> list:
    """The filler pairs [(text in langs[0], text in langs[1])] of the files ``found`` ((the languages in their
    files' order, [:class:`DevFiles`]) or None: :func:`_grouped`), stripped, blank sides left out, shuffled with
    ``seed``."""
    from ..corpus import read_parallel

    if not found:
        return []
    pairs = [(x.strip(), y.strip()) for f in found[1] for x, y in zip(*read_parallel(f.a, f.b))
             if x.strip() and y.strip()]
    if tuple(found[0]) != tuple(langs):  # the --filler gave the languages the other way round
        pairs = [(y, x) for x, y in pairs]
    return [pairs[i] for i in np.random.default_rng(seed).permutation(len(pairs))]


def _with_assist_measured(c: PairCalibration, model, langs: tuple, src: list, tgt: list, assist: str,
                          config: CalibrationConfig) -> PairCalibration:
    """``c`` with what mine measures end to end with ``assist`` (:func:`measure_defaults`), or with the reason it
    was not measured (an assist that does not know a language, a pair without English, no second stage)."""
    from ..assist import assist_for

    try:
        encoder = assist_for(assist, langs)
    except ConfigError as e:
        return replace(c, assist_note=str(e))
    got, joined = measure_defaults(model, langs, src, tgt, c.settings, config=config, assist=assist)
    if not joined:
        return replace(c, assist_note=f"--assist {assist} joins the second stage, which judged none of these runs "
                                      "(a pair without English, or a model without a stage for it)")
    return replace(c, assist_measured={encoder.fingerprint: {"assist": encoder.kind, "measured": got}})


def _kept(model, a: str, b: str, pairs: int, option: str = "--keep-settings") -> PairCalibration:
    """The settings ``model`` holds for a-b, with what they measured, as a PairCalibration (``kept``); ConfigError
    naming ``option`` where it holds none."""
    from ..mining.calibrated import measured_for, pair_key, settings_for

    held = settings_for(model.mining, a, b)
    if held is None:
        raise ConfigError(f"{option}: the model holds no settings for {pair_key(a, b)} to keep")
    return PairCalibration(held, measured_for(model.mining, a, b), float("nan"), float("nan"), pairs, kept=True)


def _is_bundled(path: str) -> bool:
    from importlib import resources

    bundled = str(resources.files("bitextmine") / "models" / "default")
    return os.path.realpath(path) == os.path.realpath(bundled)
