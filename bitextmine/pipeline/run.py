"""The staged mining run: plan, dedup, encode, k-NN, margins, selection, output (see the package docstring)."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, TextIO

import numpy as np

from .. import __version__
from ..config import FLOOR_KEYS, ColumnsConfig, EmbeddingsConfig, EncodeConfig, Floors, MineConfig, PipelineConfig
from ..errors import ConfigError
from ..mining.reference import SAMPLE_DRAW
from . import dedup, stages
from .engine import make_engine
from .plan import plan_side, read_chunk_ids
from .stages import SIDES
from ..assist import AssistedJudge, assist_for
from .workdir import Lock, WorkDir, input_files, input_record, load_arrays, verifies

Progress = Callable[[str, int, int], None]  # (stage, tasks done so far, tasks in all)


@dataclass
class MineStats:
    """What :func:`mine_files` read and wrote: lines, distinct and blank lines per side, pairs written, the
    signature of the settings."""

    src_lines: int
    tgt_lines: int
    src_unique: int
    tgt_unique: int
    src_empty: int
    tgt_empty: int
    pairs: int
    signature: str
    rejected: dict = field(default_factory=dict)  # candidates dropped by the rules, per reason
    info: dict = field(default_factory=dict)  # index per direction, recall@k when checked, stages computed


class _Run:
    """One run's state: work directory, engine, plans, row offsets and the tasks each stage computed."""

    def __init__(self, work: WorkDir, engine, progress: Progress | None):
        self.work, self.engine, self.progress = work, engine, progress
        self.plans: dict = {}
        self.offsets: dict = {}
        self.computed: dict[str, int] = {}
        self.live: dict = {}
        self.recall: list | None = None
        self.sample: dict | None = None  # the cells' samples (stages.knn_cell), when the search keeps lists among them
        self.samples: dict = {}  # each side's reference sample, rows int64 (stages.side_sample)
        self.assist_lines = 0  # lines the assist encoded in this run (both sides)
        self.stamps: dict = {}  # each input file's (size, mtime, inode) when the run began (:func:`input_stamps`)

    def stage(self, name: str, fn, tasks: list[tuple[str | tuple | None, tuple]], gpu: bool = False) -> list:
        """Run ``fn(*args)`` for each (output file or files, args) whose outputs do not all exist and verify yet
        (:func:`bitextmine.pipeline.workdir.verifies`: their bytes match the checksums written with them)."""
        def whole(out) -> bool:
            outs = (out,) if isinstance(out, str) else out or ()
            return bool(outs) and all(verifies(self.work.path(o)) for o in outs)

        check_stamps(self.stamps)
        todo = [args for out, args in tasks if not whole(out)]
        total, count = len(todo), [0]

        def done() -> None:
            count[0] += 1
            if self.progress:
                self.progress(name, count[0], total)

        self.computed[name] = self.computed.get(name, 0) + total
        out = self.engine.map(fn, todo, gpu=gpu, done=done)
        check_stamps(self.stamps)  # what the stage read was the input the run began with
        return out


def input_stamps(paths) -> dict:
    """{file: (size, mtime in ns, inode)} of every file the inputs ``paths`` name (a folder or glob of shards:
    its files; standard input and pipes, read once, have none)."""
    from ..corpus import read_once

    files = [f for p in paths if p and p != "-" and not read_once(p) for f in input_files(p)]
    return {f: _stamp(f) for f in files}


def _stamp(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


def check_stamps(stamps: dict) -> None:
    """ConfigError naming the first input file that changed (size, time, or replaced) since ``stamps`` were taken:
    a run reads its inputs more than once, and lines of two versions would be paired."""
    for path, was in stamps.items():
        if _stamp(path) != was:
            raise ConfigError(f"{path}: changed while the run read it (written, replaced or removed); nothing was "
                              "written; run again on an input that stays as it is")


def _settings(config: MineConfig, pconf: PipelineConfig, vectors: str, sources: dict, judged_floor) -> dict:
    from ..device import torch_search

    keep = {k: v for k, v in asdict(config).items()
            if k not in ("device", "block_size", "precision", "recall_check", "per_language", "detect_lines",
                         "lang_check_share", "trust_langs")}
    keep["judged_floor"] = judged_floor  # the second stage's margin floor (where candidates are kept from)
    # IVF by torch (a CUDA device without FAISS GPUs) finds other neighbours than FAISS: recorded, so that a
    # resume with the other backend searches again rather than mixing their files
    torch_ivf = config.index in ("auto", "ivf") and torch_search(config.device)
    return {"bitextmine": __version__, "vectors": vectors, "chunk_lines": pconf.chunk_lines,
            "bucket_lines": pconf.bucket_lines, **keep, "src_emb": sources["src"], "tgt_emb": sources["tgt"],
            **({"ivf_backend": "torch"} if torch_ivf else {}), "sample_draw": SAMPLE_DRAW}


# the files each setting's results live in: resuming with it changed removes them and computes them again
_MARGINS = ("*/cand-*",)
_KNN = ("knn/*", "*/nn-*", "*/mean-*", "*/sample*", *_MARGINS)
_INDEX = ("index/*", *_KNN)
_ROWS = ("*/emb-*", "*/moments*", *_INDEX)
REDO = {**dict.fromkeys(("index", "auto_flat_max", "nlist", "train_sample", "pq_m", "seed", "ivf_backend"), _INDEX),
        **dict.fromkeys(("k", "nprobe", "candidates", "shard_rows"), _KNN),
        "margin": _MARGINS, "threshold": _MARGINS, "mode": (), "min_cosine": (), "min_z": (),
        "second_stage": (), "min_prob": (), "judged_floor": _MARGINS, "assist": ("*/assist-*",), "assist_pick": (),
        "table": _ROWS,
        "sample_draw": _KNN}  # how the reference samples are drawn (a work directory of an earlier version: another way)


def _table(encode_config: EncodeConfig, model, pipeline: PipelineConfig) -> str:
    """The piece table's precision the encode stage embeds with (:func:`bitextmine.device.table_precision`): rows
    of another precision differ (a GPU's fp16 table from a CPU's float32 one by up to 7.7e-5), so a run resumed on
    another device or with another --precision embeds its rows again rather than mixing them. On Ray the workers
    choose their device: the run records the settings it gives them. With it, how lines of no known piece are
    embedded (zeros: :func:`bitextmine.encoding.embed.nothing_known`), which a work directory of an earlier version
    did not do: its rows are embedded again."""
    from ..device import resolve_device, table_precision

    if pipeline.engine != "local":
        return f"{pipeline.engine}:{encode_config.device}:{encode_config.precision}|{BLANK_RULE}"
    return table_precision(encode_config.precision, model.stored_dtype, resolve_device(encode_config.device)) + \
        f"|{BLANK_RULE}"


BLANK_RULE = "nothing-known:zeros"  # the work directory's record of how lines of no known piece are embedded


def _dedup(run: _Run, pconf: PipelineConfig) -> None:
    w = run.work
    for side in SIDES:
        plan = run.plans[side]
        nc = len(plan["chunks"])
        buckets = max(1, -(-plan["lines"] // pconf.bucket_lines))
        run.stage("hash", dedup.hash_chunk, [(dedup.hash_file(side, c), (w, side, plan, c)) for c in range(nc)])
        run.stage("dedup", dedup.dedup_bucket,
                  [(dedup.bucket_file(side, b), (w, side, plan, b, buckets)) for b in range(buckets)])
        run.stage("rows", dedup.chunk_reps, [(dedup.rep_file(side, c), (w, side, plan, c, buckets)) for c in range(nc)])
        run.offsets[side] = dedup.row_offsets(w, side, plan)


def _encode(run: _Run, sources: dict, model, encode_configs: dict) -> None:
    for side in SIDES:
        plan = run.plans[side]
        if sources[side] is not None:
            if not sources[side]["sidecar"]:
                run.stage("import", stages.import_chunk, [(stages.emb_file(side, c), (run.work, side, plan, c,
                                                           sources[side])) for c in range(len(plan["chunks"]))])
            continue
        if model.path is None:  # the stage's workers load the model from its directory
            raise ConfigError("mining text needs a model saved in a directory (Model.save); this one is in memory "
                              "only")
        run.stage("encode", stages.encode_chunk,
                  [(stages.emb_file(side, c), (run.work, side, plan, c, (model.path, model.fingerprint),
                                               encode_configs[side])) for c in range(len(plan["chunks"]))], gpu=True)


def _search(run: _Run, sources: dict, config: MineConfig, kinds: dict, reference: int = 0,
            judged_floor: float | None = None) -> None:
    """k-NN both ways, each direction searched once: exact cells (:func:`stages.knn_cell`, one pass for both
    directions when both search a flat side) for directions searching a flat side, IVF shards for the others
    (``kinds``: the index of each searched side); then reduce and margins per chunk. ``reference`` > 0 with
    both sides flat: the cells' pass also keeps each row's best among samples of that many rows of the other
    side (run.sample: the lists :func:`_reference` reads)."""
    from ..device import knn_backend, resolve_device

    w, off = run.work, run.offsets
    live = {s: [c for c in range(len(off[s]) - 1) if off[s][c + 1] > off[s][c]] for s in SIDES}
    flat = [s for s in SIDES if kinds[s] == "flat"]
    if reference:  # each side's sample, by its lines' hashes
        sample = {"lines": reference, "seed": config.seed, "k": config.k + 1}
        run.stage("sample", stages.side_sample, [(stages.sample_rows_file(side, sample),
                                                  (w, side, run.plans[side], off[side], sample)) for side in SIDES])
        run.samples = {side: stages.sample_rows(w, side, sample) for side in SIDES}
        run.sample = sample if len(flat) == 2 else None
    if flat:  # x = a source chunk, y = a target chunk: xy searches the targets
        search = {"k": config.k, "candidates": config.candidates, "block_rows": config.block_size,
                  "shard_rows": config.shard_rows, "device": resolve_device(config.device),
                  "precision": config.precision, "direction": "both" if len(flat) == 2 else
                  ("xy" if flat == ["tgt"] else "yx")}
        run.stage("knn", stages.knn_cell, [(stages.cell_file(i, j, run.sample),
                                            (w, run.plans, i, j, off, sources, search, run.sample))
                                           for i in live["src"] for j in live["tgt"]], gpu=True)
    for side in (s for s in SIDES if kinds[s] != "flat"):  # the searched side's index
        backend = "torch" if knn_backend(kinds[side], config.device) == "torch" else "faiss"  # FAISS: on the CPU
        ivf = {"kind": kinds[side], "nlist": config.nlist, "train_sample": config.train_sample, "pq_m": config.pq_m,
               "seed": config.seed, "backend": backend, "device": resolve_device(config.device)}
        gpu = backend == "torch"
        run.stage("index", stages.train_index, [(stages.index_file(side, backend=backend),
                                                 (w, side, run.plans, off, sources, ivf))], gpu=gpu)
        run.stage("shards", stages.fill_shard, [(stages.index_file(side, c, backend),
                                                 (w, side, c, run.plans, off, sources, ivf)) for c in live[side]], gpu=gpu)
        q = "tgt" if side == "src" else "src"
        k = min(config.k, int(off[side][-1]))
        run.stage("knn", stages.search_shard,
                  [(stages.ivf_cell_file(q, i, j), (w, q, i, j, run.plans, off, sources, k, config.nprobe,
                                                    config.block_size, ivf)) for i in live[q] for j in live[side]], gpu=gpu)
    for side, other in (("src", "tgt"), ("tgt", "src")):
        run.stage("reduce", stages.reduce_chunk,
                  [((stages.nn_file(side, c), stages.mean_file(side, c),
                     *([stages.sample_file(side, c, run.sample)] if run.sample else [])),
                    (w, side, c, live[other], config.k, kinds[other] != "flat", run.sample))
                   for c in live[side]])
    if config.recall_check:
        run.recall = [_recall(run, side, sources, config) for side in SIDES]
    # candidates below the threshold are kept only for the second stage's estimate of the share of translations
    kept_from = config.threshold if judged_floor is None else min(config.threshold, judged_floor)
    for side in SIDES:
        run.stage("margins", stages.margins_chunk,
                  [(stages.cand_file(side, c), (w, side, c, off, config.margin, kept_from)) for c in live[side]])
    run.live = live


def _recall(run: _Run, side: str, sources: dict, config: MineConfig) -> float:
    """recall@k of ``side``'s neighbour lists on config.recall_check seeded sampled rows (exact search: 1), the
    queries :func:`bitextmine.search.index.recall_at_k` takes for the same side."""
    from ..device import resolve_device
    from ..search.index import sample_queries

    rows = sample_queries(int(run.offsets[side][-1]), config.recall_check, config.seed)
    return run.stage("recall", stages.recall_sample, [(None, (run.work, side, run.plans, run.offsets, sources, rows,
                                                              resolve_device(config.device)))])[0]


def _candidates(run: _Run, side: str) -> dict[str, np.ndarray]:
    parts = [load_arrays(run.work.path(stages.cand_file(side, c))) for c in run.live[side]]
    keys = ("row", "other", "score", "cos", "mean_q", "mean_o")
    if not parts:
        return {k: np.zeros(0, np.float32 if k not in ("row", "other") else np.int64) for k in keys}
    return {k: np.concatenate([p[k] for p in parts]) for k in keys}


def _select(run: _Run, config: MineConfig, sources: dict, explain: bool, judge=None, reference: int = 0,
            screen=None):
    """The pairs config keeps of both sides' candidates (:func:`bitextmine.mining.select.finish`: every floor,
    the second stage ``judge`` when given, the rules' ``screen`` (:func:`_screen`), then the mode), best first,
    with what ``explain`` prints of them. ``reference`` > 0: the candidates' margins are taken as sides of that
    many lines give them (:func:`_reference`). With config.assist_pick, ``judge`` (then the assist's) picks them
    instead (:func:`_picked`)."""
    from ..mining.select import finish

    if judge is not None and config.assist_pick:  # the assist's judge: its cosine picks (never with reference)
        fc, bc = _picked(run, judge.cosine)
    else:
        fc, bc = _candidates(run, "src"), _candidates(run, "tgt")
        if reference:
            fc, bc = _reference(run, sources, config, reference, fc, bc)
    f = (fc["row"], fc["other"], fc["score"], fc["cos"])
    b = (bc["other"], bc["row"], bc["score"], bc["cos"])
    standout = _standout(run, sources) if config.min_z > 0 or explain or judge else None
    s, t, sc, cos, origin, z, prob = finish(f, b, config, standout, judge, screen)
    # neighbour means and whether the other direction proposed the same pair (for --explain)
    mean_s = np.concatenate([fc["mean_q"], bc["mean_o"]])[_lookup(np.concatenate([fc["row"], bc["other"]]), s)]
    mean_t = np.concatenate([fc["mean_o"], bc["mean_q"]])[_lookup(np.concatenate([fc["other"], bc["row"]]), t)]
    in_f = _pair_in(fc["row"], fc["other"], s, t)
    in_b = _pair_in(bc["other"], bc["row"], s, t)
    direction = np.where(in_f & in_b, 2, origin)
    return s, t, sc, cos, mean_s, mean_t, direction, z, prob


def _neighbours(run: _Run, side: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(rows int64 (r,), D float32 (r, k), I int64 (r, k), fast neighbour means float32 (r,)): ``side``'s
    neighbour lists as the search reduced them (global row ids; I -1 in empty slots)."""
    parts = [(run.offsets[side][c], load_arrays(run.work.path(stages.nn_file(side, c))),
              np.load(run.work.path(stages.mean_file(side, c)))) for c in run.live[side]]
    if not parts:
        return np.zeros(0, np.int64), np.zeros((0, 1), np.float32), np.zeros((0, 1), np.int64), np.zeros(0, np.float32)
    return (np.concatenate([a + np.arange(len(z["D"])) for a, z, _ in parts]),
            np.concatenate([z["D"] for _, z, _ in parts]), np.concatenate([z["I"] for _, z, _ in parts]),
            np.concatenate([m for _, _, m in parts]))


def _picked(run: _Run, cosine: Callable) -> tuple[dict, dict]:
    """Both sides' candidates (as :func:`_candidates`) chosen by the assist's ``cosine`` among each row's fast
    neighbours (:func:`bitextmine.assist.pick.candidates`)."""
    from ..assist import pick

    sizes = {side: int(run.offsets[side][-1]) for side in SIDES}
    return pick.candidates({side: _neighbours(run, side) for side in SIDES}, sizes, cosine)


def _fail_safe(run: _Run, config: MineConfig, sources: dict, explain: bool, judge, choice, pairs: tuple,
               rejected: dict, rules: tuple | None) -> tuple:
    """(pairs, choice, rejected): the second stage's pairs, or where it is out of its depth
    (:func:`bitextmine.mining.calibrated.fail_safe`) those of the floors alone, as --no-second-stage selects
    them (the run's own margins; the rules' counts of that selection). Those are selected only where the share of
    translations the stage estimates lets it fall back at all: most runs, where translations are rare, skip it."""
    from ..mining.calibrated import fail_safe, may_fall_back

    if not may_fall_back(config, judge.share):
        return pairs, choice, rejected
    counts: dict = {}
    screen = None if rules is None else _screen(run, rules[0], rules[1], counts)
    floors = _select(run, config, sources, explain, None, 0, screen)
    safe = fail_safe(choice, len(pairs[0]), len(floors[0]), judge.share)
    return (floors, safe, counts) if safe.fell_back else (pairs, choice, rejected)


def _screen(run: _Run, rules, langs: tuple, rejected: dict):
    """The rules as :func:`bitextmine.mining.select.finish`'s screen: bool (p,) of the distinct candidate pairs
    (src, tgt row ids) that pass :func:`bitextmine.filtering.rules.check_pair`; each refused pair is counted in
    ``rejected`` under its reason."""
    from ..filtering.rules import check_pair

    def screen(s: np.ndarray, t: np.ndarray) -> np.ndarray:
        src, tgt = _texts(run, "src", s, False)[0], _texts(run, "tgt", t, False)[0]
        keep = np.ones(len(s), bool)
        for i, (a, b) in enumerate(zip(s.tolist(), t.tolist())):
            why = check_pair(src[a], tgt[b], rules, *langs)
            if why:
                rejected[why] = rejected.get(why, 0) + 1
                keep[i] = False
        return keep
    return screen


def _reference(run: _Run, sources: dict, config: MineConfig, lines: int, fc: dict, bc: dict) -> tuple[dict, dict]:
    """fc and bc with each candidate's score replaced by its reference margin (samples of ``lines`` rows a side,
    config.seed): from the lists the cells kept among the samples (run.sample, :func:`_search`), else by a
    search of its own (:func:`bitextmine.mining.reference.reference_margins`; IVF runs)."""
    from ..device import resolve_device
    from ..mining.reference import listed_margins, reference_margins

    s, t = np.concatenate([fc["row"], bc["other"]]), np.concatenate([fc["other"], bc["row"]])
    cos = np.concatenate([fc["cos"], bc["cos"]])
    if run.sample:  # the search kept each line's best among the samples
        lists = {side: stages.gather_sample_lists(run.work, side, run.offsets, run.sample, q)
                 for side, q in (("src", s), ("tgt", t))}
        score = listed_margins(s, t, cos, lists, config.k, config.margin)
    else:
        rows = {side: _rows_of(run, sources, side) for side in SIDES}
        score = reference_margins(s, t, cos, rows, run.samples, config.k, config.margin,
                                  device=resolve_device(config.device), precision=config.precision)
    n = len(fc["row"])
    return {**fc, "score": score[:n]}, {**bc, "score": score[n:]}


def _judge(run: _Run, model, choice, workers: int, mapped: bool = True):
    """The second stage (:class:`bitextmine.judge.judge.Judge`) of ``choice.judged`` over the run's rows, their
    texts read from the chunks; ``workers`` processes judge many candidates (0 = one per core); not ``mapped``:
    its score before the calibration's map (where the assist joins it: :meth:`SecondStage.unmapped`)."""
    from ..judge.features import Pieces
    from ..judge.judge import Judge

    def pieces(side):
        def of(rows: np.ndarray) -> Pieces:
            text = _texts(run, side, rows, False)[0]
            return Pieces.of(rows, [text[r] for r in rows.tolist()], model.tokenizer)
        return of

    stage = model.second_stage if mapped else model.second_stage.unmapped()
    return Judge(stage, choice.judged, choice.languages[0] == "en", {side: pieces(side) for side in SIDES},
                 workers=workers)


def _standout(run: _Run, sources: dict):
    """The standout z of pairs (:mod:`bitextmine.mining.standout`) from each side's moments, as a function of
    (src, tgt, cosine) (:data:`bitextmine.mining.select.Standout`)."""
    from ..mining.standout import pair_standout

    w = run.work
    run.stage("moments", stages.side_moments,
              [(stages.moments_file(side), (w, side, run.plans, run.offsets, sources)) for side in SIDES])

    moments = stages.load_moments(w, "src"), stages.load_moments(w, "tgt")
    return lambda s, t, cos: pair_standout(cos, s, t, _rows_of(run, sources, "src"), _rows_of(run, sources, "tgt"),
                                           *moments)


def _rows_of(run: _Run, sources: dict, side: str) -> Callable[[np.ndarray], np.ndarray]:
    """A function giving ``side``'s embeddings float32 (r, d) of row ids int (r,), in that order (any order,
    repeats allowed)."""
    def rows(ids: np.ndarray) -> np.ndarray:
        u, inv = np.unique(ids, return_inverse=True)
        return stages.gather_rows(run.work, side, run.plans, run.offsets, sources, u)[inv.reshape(-1)]
    return rows


def _lookup(keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Positions in ``keys`` of each of ``wanted`` (every wanted key occurs in keys)."""
    order = np.argsort(keys, kind="stable")
    return order[np.searchsorted(keys[order], wanted)]


def _pair_in(a: np.ndarray, b: np.ndarray, s: np.ndarray, t: np.ndarray) -> np.ndarray:
    big = np.int64(max(int(b.max(initial=0)), int(t.max(initial=0))) + 1)
    return np.isin(s * big + t, a * big + b)


def _texts(run: _Run, side: str, rows: np.ndarray, ids: bool) -> tuple[dict, dict, dict | None]:
    """{row id: text}, {row id: [1-based line numbers]} for the distinct rows ``rows`` and, for a table
    planned with an id column, {row id: [the ids of those lines]} (else None)."""
    w, plan, off = run.work, run.plans[side], run.offsets[side]
    want = np.unique(rows)
    first_of = np.empty(len(want), np.int64)
    holding = []
    for c, sel, local in stages.by_chunk(off, want):
        first_of[sel] = dedup.firsts(w, side, plan, c)[local]
        holding.append(c)
    wanted = np.sort(first_of)
    chunks = range(len(plan["chunks"])) if ids else holding
    parts = run.stage("texts", stages.texts_chunk, [(None, (w, side, plan, int(c), wanted)) for c in chunks])
    row_of = dict(zip(first_of.tolist(), want.tolist()))
    text, lines = {}, {}
    for firsts, texts, reps in parts:
        for f, s in zip(firsts, texts):
            text[row_of[f]] = s
        for f, line in reps:
            lines.setdefault(row_of[f], []).append(line)
    lines = {r: sorted(v) for r, v in lines.items()}
    return text, lines, _ids(run, side, lines) if ids and plan["input"].get("id_column") else None


def _ids(run: _Run, side: str, lines: dict) -> dict:
    """{row id: [ids]} for {row id: [1-based lines]}: the id column read from the chunks holding them."""
    plan = run.plans[side]
    starts = np.array([c["first_line"] for c in plan["chunks"]], np.int64)
    every = np.array(sorted({n for v in lines.values() for n in v}), np.int64)
    holding = np.unique(np.searchsorted(starts, every, side="right") - 1)
    parts = run.stage("ids", read_chunk_ids, [(None, (run.work, plan, int(c))) for c in holding])
    id_of: dict = {}
    for c, values in zip(holding.tolist(), parts):
        a = plan["chunks"][c]["first_line"]
        for n in every[(every >= a) & (every < a + len(values))].tolist():
            id_of[n] = values[n - a]
    return {r: [id_of[n] for n in v] for r, v in lines.items()}


DIRECTIONS = ("fwd", "bwd", "both")


def _write(out: TextIO, pairs, src: tuple, tgt: tuple, ids: bool, explain: bool) -> int:
    """Write the TSV rows of the pairs; the ids columns hold the id column's values when the inputs have one
    (src[2], tgt[2]), else line numbers. Returns the rows written."""
    written = 0
    rows = list(zip(*(a.tolist() for a in pairs)))
    sid, tid = (src[2] or src[1]), (tgt[2] or tgt[1])
    cells = [(_id_cell(sid[r[0]]), _id_cell(tid[r[1]])) for r in rows] if ids or explain else []
    for r in rows:  # checked before the first row is written: no output stops halfway
        _check_tsv(src[0][r[0]], tgt[0][r[1]])
    for k, (s, t, sc, cos, ms, mt, d, z, prob) in enumerate(rows):
        a, b = src[0][s], tgt[0][t]
        row = f"{sc:.6f}\t{a}\t{b}"
        if ids or explain:
            row += "\t" + cells[k][0] + "\t" + cells[k][1]
        if explain:
            row += f"\t{cos:.6f}\t{ms:.6f}\t{mt:.6f}\t{DIRECTIONS[d]}\t{z:.3f}\t{prob:.4f}"
        out.write(row + "\n")
        written += 1
    return written


def _id_cell(values) -> str:
    """The ids of a line (its copies'), comma-separated; an id holding a tab, line break or comma, which the
    TSV's ids column cannot carry unambiguously, is a ConfigError."""
    cell = [str(v) for v in values]
    bad = next((v for v in cell if any(c in v for c in "\t\n\r,")), None)
    if bad is not None:
        raise ConfigError(f"--id-col: the id {bad[:40]!r} holds a tab, line break or comma, which the TSV's ids "
                          "column cannot carry; write Parquet instead (an output named *.parquet)")
    return ",".join(cell)


def _check_tsv(a: str, b: str) -> None:
    for text in (a, b):
        if "\t" in text or "\n" in text or "\r" in text:
            raise ConfigError(f"a mined text holds a tab or line break, which a TSV line cannot carry ({text[:40]!r}...); "
                              "write Parquet instead (an output named *.parquet)")


def _write_parquet(out, pairs, src: tuple, tgt: tuple, ids: bool, explain: bool) -> int:
    """:func:`_write` as Parquet: score float32, src, tgt string; with ``ids`` or ``explain`` src_lines, tgt_lines
    list<int64> (1-based) and, with an id column, src_ids, tgt_ids (list<int64> when every id is an integer within int64,
    else list<string>); with ``explain`` cosine, src_mean, tgt_mean float32, direction string, z float32, prob
    float32 (NaN where the second stage did not judge)."""
    from ..tabular import ParquetRows

    rows = list(zip(*(a.tolist() for a in pairs)))
    cols: dict = {"score": [r[2] for r in rows], "src": [src[0][r[0]] for r in rows],
                  "tgt": [tgt[0][r[1]] for r in rows]}
    fields = [("score", "float32"), ("src", "string"), ("tgt", "string")]
    if ids or explain:
        cols["src_lines"], cols["tgt_lines"] = [src[1][r[0]] for r in rows], [tgt[1][r[1]] for r in rows]
        fields += [("src_lines", "list<int64>"), ("tgt_lines", "list<int64>")]
        for name, side, k in (("src_ids", src, 0), ("tgt_ids", tgt, 1)):
            if side[2] is not None:
                values = [side[2][r[k]] for r in rows]
                ints = all(isinstance(v, int) and -2**63 <= v < 2**63 for vs in values for v in vs)  # else text
                cols[name] = values if ints else [[str(v) for v in vs] for vs in values]
                fields.append((name, "list<int64>" if ints else "list<string>"))
    if explain:
        for i, name in ((3, "cosine"), (4, "src_mean"), (5, "tgt_mean")):
            cols[name] = [r[i] for r in rows]
            fields.append((name, "float32"))
        cols["direction"] = [DIRECTIONS[r[6]] for r in rows]
        cols["z"], cols["prob"] = [r[7] for r in rows], [r[8] for r in rows]
        fields += [("direction", "string"), ("z", "float32"), ("prob", "float32")]
    sink = ParquetRows(out, fields)
    sink.add(cols)
    sink.close()
    return len(rows)


def mine_files(
    src_path: str,
    tgt_path: str,
    out: TextIO,
    *,
    model=None,
    config: MineConfig = MineConfig(),
    encode_config: EncodeConfig = EncodeConfig(),
    pipeline: PipelineConfig = PipelineConfig(),
    embeddings: EmbeddingsConfig = EmbeddingsConfig(),
    src_emb: str | None = None,
    tgt_emb: str | None = None,
    ids: bool = False,
    explain: bool = False,
    marked: str | None = None,
    rules=None,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    columns: ColumnsConfig | None = None,
    output_format: str = "tsv",
    progress: Progress | None = None,
    assist_emb: tuple[str, str] | None = None,
):
    """Mine two text files in stages through a work directory and write ``score<TAB>src<TAB>tgt`` lines
    (``ids``: plus ``<TAB>src_ids<TAB>tgt_ids``; ``explain``: ids plus ``<TAB>cosine<TAB>src_mean<TAB>tgt_mean
    <TAB>fwd|bwd|both<TAB>z<TAB>prob``, z the pair's standout, :mod:`bitextmine.mining.standout`, prob its probability
    of translation from the second stage, nan where the stage did not judge) to ``out``, best
    score first. Returns :class:`MineStats`.

    The result equals :func:`bitextmine.mining.mine.mine_embeddings` on the distinct lines' embeddings with
    the config this function settled on (the same unless per-language settings applied: see below), for
    any chunk size and engine. ``pipeline.work_dir`` keeps the stages' files (empty: a temporary directory,
    removed after); ``pipeline.resume`` continues a stopped run there, or reruns it with other search, margin or
    selection settings, reusing the chunks, embeddings and trained index (info "changed": the settings that
    differ). ``src_emb``/``tgt_emb``: embeddings of every line from any encoder (``embeddings``: npy or
    LASER's raw format); then no model is needed, unless a file has a ``bitextmine encode`` sidecar, which is
    checked against the text and ``model``. Blank lines cannot be mined and are counted in the stats.
    ``marked`` ("src" or "tgt") names the side in the marked language of a separate-vocabulary model.
    A work directory serves one run at a time (a second is refused, naming the first's pid) and is resumed
    only with the same inputs, byte for byte (ConfigError naming the one that changed: each input is read
    once more to fingerprint it); standard input (``-``) is read once, so a run reading it cannot be resumed.
    ``rules`` (a RuleConfig) drops pairs that break a rule of :func:`bitextmine.filtering.rules.check_pair`
    (with the languages), counted per reason in the stats. ``src_lang``/``tgt_lang`` must be codes that the
    language checks know (ConfigError listing them). With ``config.per_language`` the model's settings
    for the two sides' languages (``src_lang``/``tgt_lang``, or the identifier's best guess) replace the
    threshold, min_z and min_cosine, when the vectors are the model's plain embeddings (not ``--sif``,
    ``marked`` or another encoder's); other languages and vectors keep ``config``'s
    (:func:`bitextmine.mining.calibrated.choose`; info "calibrated_for": the languages, or None; info
    "settings": one line saying which settings were used and why, for the user to see; "settings_looked":
    whether per-language settings were looked for).
    :func:`bitextmine.mining.mine.mine_embeddings` uses its config as given (it knows no languages).
    Parquet and JSONL inputs (:mod:`bitextmine.tabular`) give the rows of ``columns.side(side)``: row i is
    line i (planned by row group, read in place: :func:`bitextmine.pipeline.plan.plan_side`); with
    ``columns.id_col`` the ids columns hold the ids of the lines instead of their numbers (and are written
    without ``ids``). ``output_format`` "parquet": ``out`` is a binary stream receiving Parquet
    (:func:`_write_parquet`), else TSV, where a text with a tab or line break is a ConfigError.
    ``progress(stage, done, total)`` after each task. ``config.assist`` (or ``assist_emb``: two embeddings files
    of every line of each side, any encoder's) joins an assisting encoder's judgement of each pair the second
    stage judges to its score (:mod:`bitextmine.assist`; info "assist_lines": the lines it encoded).
    """
    from ..encoding import side_configs
    from ..search.index import resolve_index

    from ..tabular import table_kind

    _check_languages(rules, src_lang, tgt_lang)
    _check_mine_options(config)
    _check_resume(pipeline, (src_path, tgt_path))
    columns = columns or ColumnsConfig()
    tables = any(table_kind(p) is not None for p in (src_path, tgt_path))
    text_cols = {s: columns.side(s) for s in SIDES}
    for side, path, col in ((s, p, getattr(columns, f"{s}_col")) for s, p in zip(SIDES, (src_path, tgt_path))):
        if col and path and table_kind(path) is None:  # --column may name the table side of a table and a text
            raise ConfigError(f"{path}: --{side}-col {col} needs a Parquet or JSONL input; a text file has no columns")
    if not tables and columns.column != ColumnsConfig.column:
        raise ConfigError(f"--column {columns.column} needs a Parquet or JSONL input; {src_path} and {tgt_path} are "
                          "text files, which have no columns")
    id_col = columns.id_col or None
    ids = ids or bool(id_col)
    temp = not pipeline.work_dir
    work = WorkDir(tempfile.mkdtemp(prefix="bitextmine-") if temp else pipeline.work_dir)
    engine = None
    lock = Lock(work.root)
    try:
        lock.acquire()  # released in finally
        stamps = input_stamps((src_path, tgt_path, src_emb, tgt_emb, *(assist_emb or ())))  # checked before and after every stage
        sources, vectors, model = _sources({"src": src_emb, "tgt": tgt_emb}, embeddings, model, encode_config, marked)
        not_plain = _not_plain(sources, encode_config, marked)
        choice = _per_language(config, model, (src_path, tgt_path), (src_lang, tgt_lang), not_plain,
                               (text_cols["src"], text_cols["tgt"]))
        if not not_plain and model is not None:
            from ..mining.calibrated import with_second_stage

            choice = with_second_stage(choice, model.second_stage)
        _check_min_prob(choice, not_plain, model)
        assist = asked = _assist(config, assist_emb, choice.languages)
        pick_asked = config.assist_pick
        config = choice.config
        calibrated_for = choice.languages if choice.calibrated else None
        inputs = {} if temp else _inputs({"src": src_path, "tgt": tgt_path, "src_emb": src_emb, "tgt_emb": tgt_emb})
        settings = _settings(config, pipeline, vectors, sources, choice.judged_floor)
        settings["assist"] = assist.fingerprint if assist is not None else ""
        if model is not None and any(sources[s] is None for s in SIDES):  # the encode stage embeds a side
            settings["table"] = _table(encode_config, model, pipeline)
        if tables:  # another column is another input
            settings["columns"] = {**text_cols, "id": id_col}
        changed = work.begin(settings, inputs, pipeline.resume, REDO)
        engine = make_engine(pipeline.engine, pipeline.ray_address or None)
        run = _Run(work, engine, progress)
        run.stamps = stamps
        for side, path in zip(SIDES, (src_path, tgt_path)):
            run.plans[side] = plan_side(work, side, path, pipeline.chunk_lines, text_cols[side], id_col)
        check_stamps(stamps)
        _check_rows(run, sources, model, encode_config, marked)
        _dedup(run, pipeline)
        n_rows = {s: int(run.offsets[s][-1]) for s in SIDES}
        if choice.judged:
            from ..mining.calibrated import within_second_stage

            choice = within_second_stage(choice, model.second_stage, tuple(n_rows.values()),
                                         config.second_stage_min_lines)
            _check_min_prob(choice, not_plain, model)
            if choice.reference_lines:  # every row's candidate is kept: the stage's floor applies to reference margins
                choice = replace(choice, judged_floor=-float("inf"))
        if assist is not None:
            choice, assist = _with_assist(choice, assist, model.mining)
            config = choice.config
        kinds = {s: resolve_index(config.index, n_rows[s], config.auto_flat_max) for s in SIDES}
        _encode(run, sources, model, dict(zip(SIDES, side_configs(encode_config, marked, SIDES))))
        written, rejected = 0, {}
        write = _write_parquet if output_format == "parquet" else _write
        if n_rows["src"] and n_rows["tgt"]:
            _search(run, sources, config, kinds, choice.reference_lines, choice.judged_floor)
            judge = _judge(run, model, choice, encode_config.threads, assist is None) if choice.judged else None
            if assist is not None:
                judge = AssistedJudge(judge, _assist_cosine(run, assist))
            screen = None if rules is None else _screen(run, rules, (src_lang, tgt_lang), rejected)
            pairs = _select(run, config, sources, explain, judge, choice.reference_lines, screen)
            if judge is not None:
                pairs, choice, rejected = _fail_safe(run, config, sources, explain, judge, choice, pairs, rejected,
                                                     None if rules is None else (rules, (src_lang, tgt_lang)))
            src, tgt = _texts(run, "src", pairs[0], ids or explain), _texts(run, "tgt", pairs[1], ids or explain)
            written = write(out, pairs, src, tgt, ids, explain)
        elif output_format == "parquet":  # no pairs: a table with its columns and no rows
            none = tuple(np.zeros(0, np.int64) for _ in range(9))
            write(out, none, ({}, {}, None), ({}, {}, None), ids, explain)
        sig = (f"bitextmine {__version__}|{vectors}|k:{config.k}|margin:{config.margin}|"
               f"mode:{config.mode}|threshold:{config.threshold:g}|min-cosine:{config.min_cosine:g}|min-z:{config.min_z:g}")
        if choice.judged:
            sig += f"|second-stage:{choice.judged}:min-prob{config.min_prob:g}"
        if assist is not None:
            sig += f"|assist:{assist.fingerprint}" + ("|assist-pick" if config.assist_pick else "")
        if calibrated_for:
            sig += f"|calibrated:{calibrated_for[0]}-{calibrated_for[1]}"
        if rules is not None:
            sig += f"|rules:{src_lang or '-'}-{tgt_lang or '-'}"
        index = [kinds["tgt"], kinds["src"]]
        if index != ["flat", "flat"]:
            sig += f"|index:{'/'.join(index)}:nprobe{config.nprobe}"
        lines = {s: run.plans[s]["lines"] for s in SIDES}
        blank = {s: dedup.blank_count(work, s, run.plans[s]) for s in SIDES}
        return MineStats(lines["src"], lines["tgt"], n_rows["src"], n_rows["tgt"], blank["src"], blank["tgt"],
                         written, sig, rejected, {"index": index, "computed": run.computed,
                                                  "changed": changed, "calibrated_for": calibrated_for,
                                                  "assist_lines": run.assist_lines,
                                                  "settings": choice.describe()
                                                  + _assist_line(asked, assist, choice, pick_asked),
                                                  "settings_looked": choice.looked,
                                                  **({"recall": run.recall} if run.recall else {})})
    finally:
        if engine is not None:
            engine.close()
        lock.release()
        if temp:
            shutil.rmtree(work.root, ignore_errors=True)


def _assist(config: MineConfig, assist_emb: tuple[str, str] | None, langs: tuple):
    """The run's assist: config.assist's encoder for the sides' languages ``langs``
    (:func:`bitextmine.assist.assist_for`: ConfigError where it does not know one), or the embeddings files
    ``assist_emb`` (src, tgt), or None."""
    if config.assist_pick and not (assist_emb or config.assist):
        raise ConfigError("--assist-pick chooses candidates with the assist: give --assist (or assist embeddings "
                          "files)")
    if assist_emb and config.assist:
        raise ConfigError(f"--assist {config.assist} and assist embeddings files: give one of them")
    if assist_emb:
        from ..assist import precomputed_assist

        return precomputed_assist(*assist_emb)
    return assist_for(config.assist, langs) if config.assist else None


def _with_assist(choice, assist, section: dict | None):
    """(choice, assist or None): with the assist's score floor (the joined score's --min-prob, unless given), and
    for the settings line what the model's calibration ``section`` holds of mine measured with this assist (not
    the figures without it). A run no second stage judges has no score for the assist to join: it runs without it
    (the settings line says why), unless the stage was turned off (ConfigError)."""
    from ..assist import JOINED
    from ..mining.calibrated import assist_measured_for

    if not choice.judged:
        if not choice.config.second_stage:
            raise ConfigError("--assist joins the second stage's score: drop --no-second-stage")
        return choice, None
    from ..assist.pick import wanted

    # margins against samples (a side larger than the stage was calibrated on) are the stage's scale, which the
    # joint margin over the run's own neighbours is not: there the fast model's best candidate is judged
    pick = wanted(choice.config.assist_pick, choice.languages) and not choice.reference_lines
    choice = replace(choice, config=replace(choice.config, assist_pick=pick))
    # the calibration measured runs without the pick: its figures are not this run's
    figures = () if choice.given or pick else tuple(assist_measured_for(section, choice.languages, assist.fingerprint))
    choice = replace(choice, defaults_measured=figures, defaults_judged=True)
    if "min_prob" in choice.given:
        return choice, assist
    cut = float(JOINED["min_score_pick" if pick else "min_score"])
    return replace(choice, config=replace(choice.config, min_prob=cut)), assist


def _assist_line(asked, assist, choice, pick_asked: bool | None) -> str:
    """What the settings line says of the assist: none asked for, applied, or why not; and why it did not pick
    where ``pick_asked`` (MineConfig.assist_pick as given) or the languages' default asked it to."""
    from ..assist.pick import wanted

    if asked is None:
        return ""
    if assist is None:
        why = choice.not_judged or "the model has none for the sides' languages"
        return f"; assist {asked.kind} not applied: no second stage judges this run ({why})"
    picks = " picks each line's candidate among the fast model's neighbours and" if choice.config.assist_pick else ""
    line = f"; assist {assist.kind}{picks} joins the second stage's score (min-prob {choice.config.min_prob:g})"
    if choice.reference_lines and wanted(pick_asked, choice.languages):
        line += f", without picking candidates (sides above {choice.reference_lines:,} lines)"
    return line


ASSIST_BLOCK = 8192  # lines the assist encodes between two files written: a stopped run resumes from the last


def _assist_cosine(run: _Run, assist):
    """The assist's cosine of pairs (src rows, tgt rows int64 (c,)) -> float32 (c,): each side's distinct rows
    encoded once, ASSIST_BLOCK at a time, each block a task of the run's engine (in this process, or a Ray task)
    kept in the work directory ({side}/assist-NNNNNN.npz: rows, x) as it is done, so a stopped or resumed run
    encodes only rows it has not (progress: stage "assist")."""
    def vectors(side: str, rows: np.ndarray) -> np.ndarray:
        if assist.kind == "npy":  # any encoder's embeddings of every line: read, not encoded
            return assist.rows(side, _row_lines(run, side, rows))
        have_rows, have_x, blocks = _assist_blocks(run, side)
        new = np.setdiff1d(rows, have_rows)
        if len(new):
            text = _texts(run, side, new, False)[0]
            parts = [new[a:a + ASSIST_BLOCK] for a in range(0, len(new), ASSIST_BLOCK)]
            tasks = [(stages.assist_file(side, blocks + k),
                      (run.work, side, blocks + k, part, [text[r] for r in part.tolist()], assist))
                     for k, part in enumerate(parts)]
            run.assist_lines += sum(run.stage("assist", stages.assist_block, tasks))
            held = [{"rows": have_rows, "x": have_x}] if have_x is not None else []
            have_rows, have_x = _in_row_order(held + [load_arrays(run.work.path(out)) for out, _ in tasks])
        return have_x[np.searchsorted(have_rows, rows)]

    def cosine(s: np.ndarray, t: np.ndarray) -> np.ndarray:
        us, si = np.unique(s, return_inverse=True)
        ut, ti = np.unique(t, return_inverse=True)
        xs, xt = vectors("src", us), vectors("tgt", ut)
        return np.einsum("ij,ij->i", xs[si.reshape(-1)], xt[ti.reshape(-1)]).astype(np.float32)
    return cosine


def _assist_blocks(run: _Run, side: str) -> tuple[np.ndarray, np.ndarray | None, int]:
    """(rows int64 ascending, their vectors float32 (r, d) or None, the number the next file takes): every whole
    block the assist wrote for ``side`` (a file without its checksum, from a run stopped while writing it, is
    left out and its rows encoded again)."""
    import glob

    files = sorted(glob.glob(run.work.path(f"{side}/assist-*.npz")))  # stages.assist_file's
    nxt = 1 + max((int(os.path.basename(f)[7:13]) for f in files), default=-1)
    parts = [load_arrays(f) for f in files if verifies(f)]
    if not parts:
        return np.zeros(0, np.int64), None, nxt
    return (*_in_row_order(parts), nxt)


def _in_row_order(parts: list) -> tuple[np.ndarray, np.ndarray]:
    """(rows int64 ascending, their vectors float32 (r, d)) of assist blocks [{"rows", "x"}]."""
    rows = np.concatenate([p["rows"] for p in parts])
    order = np.argsort(rows)
    return rows[order], np.concatenate([p["x"] for p in parts])[order]


def _row_lines(run: _Run, side: str, rows: np.ndarray) -> np.ndarray:
    """int64 (r,): the 0-based line of each of ``side``'s rows ``rows`` (global row ids, any order): where each
    distinct line first occurs."""
    out = np.zeros(len(rows), np.int64)
    for c, sel, local in stages.by_chunk(run.offsets[side], rows):
        out[sel] = dedup.firsts(run.work, side, run.plans[side], c)[local]
    return out


def _check_languages(rules, src_lang: str | None, tgt_lang: str | None) -> None:
    """ConfigError before any work for malformed rules or a declared language that no check knows (with
    ``rules``: the checks they use, :func:`bitextmine.filtering.rules.check_rules`)."""
    from ..filtering.rules import check_rules
    from ..language import check_codes, known_codes

    if rules is not None:
        check_rules(rules, src_lang, tgt_lang)
    elif src_lang or tgt_lang:  # no identifier is loaded when no language is named
        check_codes({"--src-lang": src_lang, "--tgt-lang": tgt_lang}, known_codes(), "bitextmine's language checks")


def _check_mine_options(config: MineConfig) -> None:
    """ConfigError for options that would print nothing or ignore one without a word: a min_prob given with
    the second stage off, and a margin other than the default one with no threshold given: the default
    threshold is that margin's (a distance or absolute score never reaches it)."""
    d = MineConfig()
    for name in FLOOR_KEYS:
        value = getattr(config, name)
        if value is not None and not math.isfinite(value):
            raise ConfigError(f"--{name.replace('_', '-')} {value}: expected a finite number")
    if not config.second_stage and config.min_prob is not None:
        raise ConfigError("--min-prob with --no-second-stage: the probability is the second stage's; drop one of "
                          "them")
    if config.margin != d.margin and config.threshold is None:
        raise ConfigError(f"--margin {config.margin} with the default threshold {Floors().threshold:g}, a {d.margin} "
                          f"margin's (as are the model's calibrated thresholds): give --threshold for {config.margin} "
                          "scores")


def _check_min_prob(choice, not_plain: str, model) -> None:
    """ConfigError when --min-prob was given (choice.given) and the run's second stage does not judge its pairs
    (``choice``: a :class:`bitextmine.mining.calibrated.Choice`), naming why: the floor would be ignored."""
    config = choice.config
    if choice.judged or "min_prob" not in choice.given:
        return
    why = (f"{not_plain}, and it was trained on the model's plain embeddings" if not_plain else choice.not_judged or
           (f"the model {model.path or 'in use'} has no second stage" if model is None or model.second_stage is None
            else "it does not apply"))
    raise ConfigError(f"--min-prob {config.min_prob:g}: the second stage does not judge this run's pairs ({why}); "
                      "drop --min-prob to mine without it")


def _check_resume(pipeline: PipelineConfig, paths: tuple[str, str]) -> None:
    if paths[0] == paths[1] == "-":
        raise ConfigError("SRC and TGT are both standard input ('-'): one stream cannot give both sides; give at "
                          "least one of them as a file")
    if pipeline.resume and not pipeline.work_dir:
        raise ConfigError("--resume needs --work-dir DIR, the work directory of the run to continue")
    if pipeline.resume and "-" in paths:
        raise ConfigError("standard input ('-') cannot be resumed: it is read once; save it to a file and mine "
                          "the file")
    from ..corpus import read_once

    pipe = next((p for p in paths if p and read_once(p)), None) if pipeline.resume else None
    if pipe:
        raise ConfigError(f"{pipe}: a pipe cannot be resumed: it is read once; save it to a file and mine the file")


def _inputs(paths: dict) -> dict:
    """The fingerprint (:func:`bitextmine.pipeline.workdir.input_record`) of each input given (None: not given)."""
    return {name: None if path is None else input_record(path) for name, path in paths.items()}


def _per_language(config: MineConfig, model, paths: tuple[str, str], langs: tuple, not_plain: str,
                  columns: tuple[str, str] = ("text", "text")):
    """The run's :class:`bitextmine.mining.calibrated.Choice`: ``config`` with the model's threshold, min_z and
    min_cosine for the two sides' languages, or unchanged with the reason (per_language off, no calibration
    in the model, vectors other than its plain embeddings, ``not_plain`` saying which; no settings for these
    languages). A language not given is the identifier's best guess for the side's first
    ``config.detect_lines`` non-blank lines (:func:`bitextmine.language.side_language`; not for standard
    input or a pipe, which are read once; a table's ``columns``)."""
    from ..corpus import read_once
    from ..language import side_language
    from ..mining import calibrated
    from ..tabular import iter_texts

    def detect(side: int, min_share: float = 0.6) -> str | None:
        if read_once(paths[side]):  # standard input or a pipe: its first lines are not read twice
            return None
        lines = calibrated.first_lines(iter_texts(paths[side], columns[side]), config.detect_lines)
        return side_language(lines, min_share)[0]

    if not config.trust_langs:
        calibrated.check_declared(langs, lambda side: detect(side, config.lang_check_share), paths)
    section = model.mining if model is not None else None
    return calibrated.choose(config, section, langs, detect, plain=not not_plain, why_not_plain=not_plain)


def _not_plain(sources: dict, encode_config: EncodeConfig, marked) -> str:
    """Why the vectors are not the model's plain embeddings (on which its per-language settings were chosen),
    or "" when they are: encoded here or by ``bitextmine encode`` (a sidecar, checked), without SIF or a marked side."""
    if any(src is not None and not src["sidecar"] for src in sources.values()):
        return "external embeddings (--src-emb/--tgt-emb from another encoder)"
    if encode_config.sif:
        return "SIF-weighted embeddings (--sif)"
    if marked:
        return f"a marked side (--marked {marked})"
    return ""


def _sources(embs: dict, econf: EmbeddingsConfig, model, encode_config: EncodeConfig, marked):
    """Where each side's vectors come from (None: the encode stage; else open_embeddings' arguments), the
    signature's vectors field and the model (loaded only when a side is encoded or has a sidecar)."""
    from ..encoding import has_sidecar, vectors_fingerprint
    from ..loading import load_model

    sources = {side: None if embs[side] is None else
               {"path": os.path.abspath(embs[side]), "format": econf.format, "dim": econf.dim, "fp16": econf.fp16,
                "sidecar": has_sidecar(embs[side])} for side in SIDES}
    if all(embs[s] is not None and not has_sidecar(embs[s]) for s in SIDES):
        return sources, "vectors:external", model
    model = model or load_model(None)
    fp = vectors_fingerprint(model, sif=encode_config.sif) + (f"+marked-{marked}" if marked else "")
    return sources, f"model:{fp}", model


def _check_rows(run: _Run, sources: dict, model, encode_config: EncodeConfig, marked) -> None:
    """Each embeddings file has one row per line of its text; a sidecar names the model in use and the text;
    both sides' rows have one dimension."""
    from ..encoding import load_embeddings, open_embeddings, side_configs
    from ..encoding.external import check_finite

    cfgs = dict(zip(SIDES, side_configs(encode_config, marked, SIDES)))
    dims = {}
    for side in SIDES:
        src, plan = sources[side], run.plans[side]
        if src is None:
            dims[side] = (model.dim, f"the model {model.path or 'in use'}")
        elif src["sidecar"]:
            x = load_embeddings(src["path"], model=model, text_sha256=plan["input"]["sha256"], count=plan["lines"],
                                sif=cfgs[side].sif, marked=cfgs[side].marked, text=plan["input"]["path"])
            check_finite(x, src["path"])  # a file edited after `bitextmine encode` wrote it
            dims[side] = (x.shape[1], src["path"])
        else:
            x = open_embeddings(src["path"], fmt=src["format"], dim=src["dim"], fp16=src["fp16"], rows=plan["lines"],
                                text=plan["input"]["path"])
            dims[side] = (x.shape[1], src["path"])
    (a, where_a), (b, where_b) = dims["src"], dims["tgt"]
    if a != b:
        raise ConfigError(f"source embeddings from {where_a} have {a} values per row, target embeddings from "
                          f"{where_b} {b}; both sides need embeddings of one encoder (one dimension)")
