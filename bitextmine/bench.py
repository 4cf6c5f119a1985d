"""``bitextmine bench``: sentences per second and peak memory of each stage on a given corpus and device.

Stages, each run in a fresh Python process (``python -m bitextmine.bench``; a fresh process rather than
a fork, since forking after OpenMP has started can hang) so that its peak resident memory is its own: the
process's high-water mark since it started (``VmHWM``; ``ru_maxrss`` would carry over the peak of the process
that started it) and that of the worker processes it waited for. It includes the interpreter with torch and
FAISS loaded. Times leave out loading the model and importing torch (start-up
costs of each command, about a second together):

- tokenize: the model's tokenizer over the corpus in worker processes (as ``encode`` does);
- encode: ``bitextmine encode`` of both sides, file to ``.npy`` (read, tokenise, embed, L2-normalise,
  write float32 rows);
- knn: exact or approximate k-NN of each half among the other (both directions, as mining needs);
- mine: margin mining (both directions, scores, 1:1 selection) of the two halves.

The corpus is one text file split into halves, or two files (source and target).
"""

from __future__ import annotations

import importlib
import os
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .config import EncodeConfig, MineConfig
from .corpus import read_lines
from .errors import ConfigError
from .parallel import usable_cores


@dataclass
class StageResult:
    stage: str
    items: int  # sentences (tokenize, encode) or rows of both sides (knn, mine)
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
        from .report import table

        rows = [[r.stage, r.items, f"{r.seconds:.2f}", f"{r.per_second:,.0f}", f"{r.peak_gb:.2f}"] for r in self.results]
        return (f"device {self.device}; {self.lines[0]:,} source and {self.lines[1]:,} target lines; {usable_cores()} cores\n"
                + table(["stage", "items", "seconds", "items/s", "peak GB"], rows))


def _in_child(args: list[str]) -> tuple[int, float, float]:
    """Run ``python -m bitextmine.bench ARGS`` (one stage): (items, seconds, peak RSS GB)."""
    import json
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-m", "bitextmine.bench", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out, err = p.communicate()
    if p.returncode:
        raise ConfigError(f"bench stage {args[0]} failed: {err.strip().splitlines()[-1] if err.strip() else p.returncode}")
    res = json.loads(out.strip().splitlines()[-1])
    return res["items"], res["seconds"], res["peak_gb"]


def _stage(stage: str, model_path: str, src_path: str, tgt_path: str, emb_dir: str, device: str, mine_json: str) -> dict:
    """One stage in this process (see module docstring); returns items, seconds and this process's peak GB."""
    import json

    from .encoding.pipeline import encode_files
    from .mining.mine import mine_embeddings, neighbours
    from .loading import load_model

    mine = MineConfig(**json.loads(mine_json))
    model = load_model(model_path or None)
    cfg = EncodeConfig(device=device)
    if stage != "tokenize":
        importlib.import_module("torch")  # a start-up cost of the command, like loading the model: not timed
    t = time.perf_counter()
    if stage == "tokenize":
        texts = read_lines(src_path) + read_lines(tgt_path)
        t = time.perf_counter()
        batches = [texts[a : a + cfg.batch_size] for a in range(0, len(texts), cfg.batch_size)]
        items = sum(len(off) for _, off in model.tokenizer.encode_stream(batches))
    elif stage == "encode":
        items = 0
        for side in (src_path, tgt_path):
            out = os.path.join(emb_dir, "encoded.npy")
            items += encode_files([side], out, model, config=cfg).count
            os.remove(out)
            os.remove(out + ".json")
    else:
        x = np.load(os.path.join(emb_dir, "src.npy"), mmap_mode="r")
        y = np.load(os.path.join(emb_dir, "tgt.npy"), mmap_mode="r")
        t = time.perf_counter()
        if stage == "knn":  # both directions, as mining needs them
            neighbours(x, y, mine)
            items = len(x) + len(y)
        else:
            mine_embeddings(x, y, config=mine)
            items = len(x) + len(y)
    seconds = time.perf_counter() - t
    return {"items": items, "seconds": seconds, "peak_gb": max(own_peak_bytes(), workers_peak_bytes()) / 1e9}


def own_peak_bytes() -> int:
    """This process's peak resident memory since it started, in bytes: ``VmHWM`` of /proc/self/status, which a
    new program starts afresh (``ru_maxrss`` keeps the peak of the process that started this one)."""
    import resource

    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return _maxrss_bytes(resource.RUSAGE_SELF)


def workers_peak_bytes() -> int:
    """The largest peak resident memory of the worker processes this one waited for, in bytes."""
    import resource

    return _maxrss_bytes(resource.RUSAGE_CHILDREN)


def _maxrss_bytes(who: int) -> int:
    import resource
    import sys

    peak = resource.getrusage(who).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere


def run_bench(paths: Sequence[str], model, *, device: str = "auto", mine: MineConfig = MineConfig(),
              max_lines: int = 0, stages: Sequence[str] = ("tokenize", "encode", "knn", "mine")) -> BenchReport:
    """Measure each of ``stages`` on ``paths`` (one file split in halves, or source and target files;
    at most ``max_lines`` lines of each side when > 0). Returns a BenchReport."""
    import json
    import tempfile
    from dataclasses import asdict, replace

    from .device import resolve_device
    from .encoding.pipeline import encode
    from .search.index import resolve_index

    if len(paths) not in (1, 2):
        raise ConfigError("expected one corpus file (split in halves) or two (source and target)")
    for stage in stages:
        if stage not in ("tokenize", "encode", "knn", "mine"):
            raise ConfigError(f"stage {stage!r}: expected tokenize, encode, knn or mine")
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
    mine = replace(mine, device=dev)
    report = BenchReport(dev, (len(src), len(tgt)))
    kinds = [resolve_index(mine.index, n, mine.auto_flat_max) for n in (len(tgt), len(src))]  # as neighbours()
    kind = kinds[0] if kinds[0] == kinds[1] else "/".join(kinds)
    with tempfile.TemporaryDirectory(prefix="bitextmine-bench-") as tmp:
        src_path, tgt_path = os.path.join(tmp, "src.txt"), os.path.join(tmp, "tgt.txt")
        for path, side in ((src_path, src), (tgt_path, tgt)):
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(t + "\n" for t in side)
        if "knn" in stages or "mine" in stages:
            cfg = EncodeConfig(device=dev)
            np.save(os.path.join(tmp, "src.npy"), encode(src, model, config=cfg))
            np.save(os.path.join(tmp, "tgt.npy"), encode(tgt, model, config=cfg))
        for stage in stages:
            items, seconds, peak = _in_child([stage, model.path or "", src_path, tgt_path, tmp, dev,
                                              json.dumps(asdict(mine))])
            name = f"{stage} ({kind})" if stage in ("knn", "mine") else stage
            report.results.append(StageResult(name, items, seconds, peak))
    return report


def mining_inputs(train_dir: str, work: str, n: int) -> tuple[str, str]:
    """(src, tgt) .npy paths in ``work`` of the mining benchmark's sentences (tools/bench_mine.py, tools/bench_laser.py),
    made there when absent (with their .txt and sidecar): of the training corpora in ``train_dir`` (all language pairs,
    shuffled with seed 0), the first ``n`` distinct foreign sentences and ``n`` distinct English sentences taken from
    halfway through the sources on, so that about half of the sources have their translation among the targets;
    encoded with the bundled model on the CPU (float32 (n, dim) each)."""
    import tempfile

    from .corpus import load_corpora
    from .encoding.pipeline import encode_files
    from .evaluation.devdata import corpora
    from .loading import load_model

    src_npy, tgt_npy = os.path.join(work, f"src.{n}.npy"), os.path.join(work, f"tgt.{n}.npy")
    if os.path.exists(src_npy) and os.path.exists(tgt_npy):
        return src_npy, tgt_npy
    en, xx, _ = load_corpora(corpora(train_dir, tempfile.mkdtemp(dir=work)))
    order = np.random.default_rng(0).permutation(len(en))
    # distinct texts on each side (as `mine` embeds each distinct line once): duplicates would give
    # exactly tied scores, which any two correct miners may break differently
    src_rows, seen = [], set()
    for i in order:
        if xx[i] not in seen:
            seen.add(xx[i])
            src_rows.append(i)
            if len(src_rows) == n:
                break
    start = int(np.flatnonzero(order == src_rows[n // 2])[0])  # targets start halfway through the sources
    tgt_texts, seen_t = [], set()
    for pos in range(start, start + len(order)):  # English sides, wrapping around
        t = en[order[pos % len(order)]]
        if t not in seen_t:
            seen_t.add(t)
            tgt_texts.append(t)
            if len(tgt_texts) == n:
                break
    used = set(src_rows)
    for i in order:  # too few distinct English sentences: fill with foreign sentences not on the source side
        if len(tgt_texts) == n:
            break
        if i not in used and xx[i] not in seen_t and xx[i] not in seen:
            seen_t.add(xx[i])
            tgt_texts.append(xx[i])
    if len(src_rows) < n or len(tgt_texts) < n:
        raise ConfigError(f"fewer than {n} distinct sentences on a side in {train_dir}; use a smaller n")
    model = load_model(None)
    for path, texts in ((src_npy, [xx[i] for i in src_rows]), (tgt_npy, tgt_texts)):
        txt = path[:-4] + ".txt"
        with open(txt, "w", encoding="utf-8") as f:
            f.writelines(t + "\n" for t in texts)
        encode_files([txt], path, model, config=EncodeConfig(device="cpu"))
    return src_npy, tgt_npy


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(_stage(*sys.argv[1:8])))
