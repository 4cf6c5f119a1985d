"""``bitextmine bench``: sentences per second and peak memory of each stage on a given corpus and device.

Stages, each run in a forked child process so that its peak resident memory (``ru_maxrss`` of the
child and the worker processes it waited for) is its own:

- tokenize: the model's tokenizer over the corpus in worker processes (as ``encode`` does);
- encode: tokenising and embedding (L2-normalised float32 rows);
- knn: exact or approximate k-NN of the source half among the target half (one direction);
- mine: margin mining (both directions, scores, 1:1 selection) of the two halves.

The corpus is one text file split into halves, or two files (source and target).
"""

from __future__ import annotations

import os
import pickle
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from .config import EncodeConfig, MineConfig
from .corpus import read_lines
from .errors import ConfigError


@dataclass
class StageResult:
    stage: str
    items: int  # sentences (tokenize, encode) or query rows (knn, mine: both sides)
    seconds: float
    peak_gb: float

    @property
    def per_second(self) -> float:
        return self.items / self.seconds if self.seconds > 0 else float("inf")


@dataclass
class BenchReport:
    device: str
    lines: tuple[int, int]
    results: list[StageResult] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"device": self.device, "lines": list(self.lines),
                "stages": [{"stage": r.stage, "items": r.items, "seconds": r.seconds, "per_second": r.per_second,
                            "peak_gb": r.peak_gb} for r in self.results]}

    def to_table(self) -> str:
        from .benchmarks import table

        rows = [[r.stage, r.items, f"{r.seconds:.2f}", f"{r.per_second:,.0f}", f"{r.peak_gb:.2f}"] for r in self.results]
        return (f"device {self.device}; {self.lines[0]:,} source and {self.lines[1]:,} target lines; {os.cpu_count()} cores\n"
                + table(["stage", "items", "seconds", "items/s", "peak GB"], rows))


def _in_child(fn: Callable[[], int]) -> tuple[int, float, float]:
    """Run ``fn`` (returns an item count) in a forked child: (items, seconds, peak RSS GB)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        code = 0
        try:
            t = time.perf_counter()
            items = fn()
            payload = pickle.dumps(("ok", items, time.perf_counter() - t))
        except BaseException as e:  # reported by the parent
            payload = pickle.dumps(("error", f"{type(e).__name__}: {e}", 0.0))
            code = 1
        with os.fdopen(w, "wb") as f:
            f.write(payload)
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, _, usage = os.wait4(pid, 0)
    status, items, seconds = pickle.loads(data)
    if status != "ok":
        raise ConfigError(f"bench stage failed: {items}")
    return items, seconds, usage.ru_maxrss / 1e6


def run_bench(paths: Sequence[str], model, *, device: str = "auto", mine: MineConfig = MineConfig(),
              max_lines: int = 0, stages: Sequence[str] = ("tokenize", "encode", "knn", "mine")) -> BenchReport:
    """Measure each of ``stages`` on ``paths`` (one file split in halves, or source and target files;
    at most ``max_lines`` lines of each side when > 0). Returns a BenchReport."""
    from .encoding import encode, resolve_device
    from .index import knn, resolve_index
    from .mining import mine_embeddings

    if len(paths) not in (1, 2):
        raise ConfigError("expected one corpus file (split in halves) or two (source and target)")
    if len(paths) == 1:
        lines = read_lines(paths[0])
        src, tgt = lines[: len(lines) // 2], lines[len(lines) // 2 :]
    else:
        src, tgt = read_lines(paths[0]), read_lines(paths[1])
    if max_lines:
        src, tgt = src[:max_lines], tgt[:max_lines]
    if not src or not tgt:
        raise ConfigError("the corpus needs at least one line on each side")
    dev = resolve_device(device)
    cfg = EncodeConfig(device=dev)
    report = BenchReport(dev, (len(src), len(tgt)))
    texts = src + tgt

    def tokenize() -> int:
        batches = [texts[a : a + cfg.batch_size] for a in range(0, len(texts), cfg.batch_size)]
        return sum(len(off) for _, off in model.tokenizer.encode_stream(batches))

    def encode_all() -> int:
        return len(encode(texts, model, config=cfg))

    x = y = None
    if "knn" in stages or "mine" in stages:
        x, y = encode(src, model, config=cfg), encode(tgt, model, config=cfg)
    kind = resolve_index(mine.index, len(y) if y is not None else 0, mine.auto_flat_max)
    run = {
        "tokenize": tokenize,
        "encode": encode_all,
        "knn": lambda: len(knn(x, y, mine.k, device=mine.device if mine.device != "auto" else dev, index=kind,
                               nlist=mine.nlist, nprobe=mine.nprobe, block_size=mine.block_size)[0]),
        "mine": lambda: (mine_embeddings(x, y, config=mine), len(x) + len(y))[1],
    }
    for stage in stages:
        if stage not in run:
            raise ConfigError(f"stage {stage!r}: expected tokenize, encode, knn or mine")
        items, seconds, peak = _in_child(run[stage])
        name = f"{stage} ({kind})" if stage in ("knn", "mine") else stage
        report.results.append(StageResult(name, items, seconds, peak))
    return report
