"""bitextmine's `mine` beside LASER's mine_bitexts.py on the same embeddings (tools/bench_laser.py, tools/bench_memory.py):
LASER's raw embedding format, the stub modules that let LASER's script run without its encoder, the lift of
embeddings to LASER's 1024 dimensions (cosines kept), the inputs of one size, the two commands, LASER's stages from
its --verbose lines, mined-pair files compared, and a command's wall time and peak memory measured over its whole
process tree.

``python -m bitextmine.laser --measure-spec SPEC OUT`` is the helper process of :func:`measure`.
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from .errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout (or site-packages) holding bitextmine
GB = 1e9

# --- LASER's raw embedding format -------------------------------------------------------------------


def write_raw(path, x: np.ndarray, *, fp16: bool = False) -> None:
    """Write ``x`` (n, d) as LASER writes embeddings (``encoded.tofile``): headerless rows, little-endian
    float32, or float16 with ``fp16``. ``path``: a file name, or a binary file open for writing (appended)."""
    np.ascontiguousarray(x, dtype="<f2" if fp16 else "<f4").tofile(path)


def raw_rows(path: str, dim: int, *, fp16: bool = False) -> np.ndarray:
    """A raw file's rows as a read-only memory map (n, dim)."""
    dtype = np.dtype("<f2" if fp16 else "<f4")
    return np.memmap(path, dtype=dtype, mode="r", shape=(os.path.getsize(path) // (dim * dtype.itemsize), dim))


def read_raw(path: str, dim: int, *, fp16: bool = False) -> np.ndarray:
    """Read a raw file as LASER's ``EmbedLoad`` does: (size // dim, dim), float16 with ``fp16`` else float32."""
    x = np.fromfile(path, dtype=np.float16 if fp16 else np.float32, count=-1)
    return x[: x.shape[0] // dim * dim].reshape(-1, dim)


def lift_matrix(d_in: int, d_out: int = 1024, *, seed: int = 0) -> np.ndarray:
    """A seeded random float64 (d_in, d_out) matrix with orthonormal rows: ``x @ W`` keeps every inner
    product (W W^T = I), so cosines, neighbours and margins are those of ``x``."""
    if d_out < d_in:
        raise ValueError(f"cannot lift {d_in} dimensions to {d_out}: expected d_out >= d_in")
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((d_out, d_in)))
    return (q * np.sign(np.diag(r))).T  # signs fixed: a unique (Haar-distributed) Q for the seed


def lift(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """float32 (n, d_out) = ``x`` (n, d_in) @ ``w`` (d_in, d_out), the product in float64."""
    out = np.empty((len(x), w.shape[1]), np.float32)
    for i in range(0, len(x), 65536):
        out[i:i + 65536] = np.asarray(x[i:i + 65536], np.float64) @ w
    return out


# --- stub modules for LASER's encoder imports --------------------------------------------------------

EMBED_STUB = '''"""Stub of LASER's source/embed.py written by bitextmine's tools/bench_laser.py.

mine_bitexts.py imports SentenceEncoder, EncodeLoad, EncodeFile and EmbedLoad; mining from precomputed
embeddings only calls EmbedLoad, which is LASER's own (source/embed.py, BSD licence). The encoder
names refuse to run.
"""

import numpy as np


def _no_encoder(*args, **kwargs):
    raise NotImplementedError("bench_laser stub: no LASER encoder here; embeddings are precomputed")


class SentenceEncoder:
    def __init__(self, *args, **kwargs):
        _no_encoder()


EncodeLoad = EncodeFile = _no_encoder


# Load existing embeddings (LASER source/embed.py)
def EmbedLoad(fname, dim=1024, verbose=False, fp16=False):
    x = np.fromfile(fname, dtype=(np.float16 if fp16 else np.float32), count=-1)
    x.resize(x.shape[0] // dim, dim)
    if verbose:
        print(" - Embeddings: {:s}, {:d}x{:d}".format(fname, x.shape[0], dim))
    return x
'''

TEXT_PROCESSING_STUB = '''"""Stub of LASER's source/lib/text_processing.py written by bitextmine's tools/bench_laser.py:
mine_bitexts.py imports Token and BPEfastApply but never calls them when mining precomputed embeddings."""


def _no_preprocessing(*args, **kwargs):
    raise NotImplementedError("bench_laser stub: no LASER tokenisation here; embeddings are precomputed")


Token = BPEfastApply = _no_preprocessing
'''


def write_laser_stubs(root: str) -> str:
    """Write the stub LASER tree under ``root``; returns the folder to export as $LASER."""
    laser = os.path.join(root, "LASER")
    os.makedirs(os.path.join(laser, "source", "lib"), exist_ok=True)
    os.makedirs(os.path.join(laser, "source", "tools"), exist_ok=True)
    for rel, text in (("source/embed.py", EMBED_STUB), ("source/lib/__init__.py", ""),
                      ("source/lib/text_processing.py", TEXT_PROCESSING_STUB)):
        with open(os.path.join(laser, rel), "w", encoding="utf-8") as f:
            f.write(text)
    return laser


# --- pair files ---------------------------------------------------------------------------------------


def read_pairs(path: str, src_texts: set | None = None, tgt_texts: set | None = None) -> dict[tuple[str, str], float]:
    """{(src text, tgt text): score} of a ``score<TAB>src<TAB>tgt`` file (LASER's and bitextmine's mined
    output). A line with more tabs (a text containing one) is split where both sides are known texts of
    ``src_texts``/``tgt_texts``; without them, or when no split fits, at the first tab after the score."""
    pairs = {}
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                raise ValueError(f"{path} line {n}: {len(parts)} columns; expected score<TAB>src<TAB>tgt")
            score = float(parts[0])
            rest = parts[1:]
            cut = 1
            if len(rest) > 2 and src_texts is not None and tgt_texts is not None:
                for c in range(1, len(rest)):
                    if "\t".join(rest[:c]) in src_texts and "\t".join(rest[c:]) in tgt_texts:
                        cut = c
                        break
            pairs[("\t".join(rest[:cut]), "\t".join(rest[cut:]))] = score
    return pairs


def compare_pairs(a: dict, b: dict) -> dict:
    """Pairs each, shared pairs (same src and tgt text), % identical (shared / max of the two counts), and
    the largest absolute score difference among the shared pairs (None when none is shared)."""
    shared = a.keys() & b.keys()
    return {"pairs_a": len(a), "pairs_b": len(b), "shared": len(shared),
            "identical_pct": 100.0 * len(shared) / max(len(a), len(b)) if (a or b) else 100.0,
            "max_abs_score_diff": max((abs(a[p] - b[p]) for p in shared), default=None)}


# --- measuring a process tree -------------------------------------------------------------------------

PAGE = os.sysconf("SC_PAGE_SIZE")


def _children_map() -> dict[int, list[int]]:
    """{ppid: [pid, ...]} of every process (a scan of /proc/*/stat)."""
    kids: dict[int, list[int]] = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat", "rb") as f:
                    s = f.read()
            except OSError:
                continue
            ppid = int(s[s.rindex(b")") + 2:].split(None, 2)[1])
            kids.setdefault(ppid, []).append(int(p))
    return kids


def tree_pids(pid: int) -> list[int]:
    """``pid`` and its descendants (from /proc/PID/task/*/children where the kernel has it, else a scan)."""
    try:
        out, todo = [], [pid]
        while todo:
            q = todo.pop()
            out.append(q)
            for t in os.listdir(f"/proc/{q}/task"):
                with open(f"/proc/{q}/task/{t}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        return out
    except FileNotFoundError:
        if not os.path.exists(f"/proc/{pid}"):
            return []
    kids = _children_map()
    out, todo = [], [pid]
    while todo:
        q = todo.pop()
        out.append(q)
        todo.extend(kids.get(q, ()))
    return out


def tree_rss(pid: int) -> int:
    """Bytes resident in ``pid`` and its descendants, summed (/proc/PID/statm; 0 once it is gone)."""
    total = 0
    for p in tree_pids(pid):
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            pass
    return total


def _measure_here(spec: dict) -> dict:
    """Run ``spec['cmd']`` (in its own session), timestamping each output line, sampling the tree's RSS
    every 0.05 s, stopping it after ``spec['timeout']`` seconds; then the helper's RUSAGE_CHILDREN."""
    env = dict(os.environ, **spec.get("env", {}))
    lines: list[tuple[float, str]] = []
    log = open(spec["log"], "w", encoding="utf-8", errors="replace")  # noqa: SIM115 (written by a thread, closed below)
    t0 = time.perf_counter()
    p = subprocess.Popen(spec["cmd"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         env=env, cwd=spec.get("cwd"), text=True, errors="replace", start_new_session=True)
    peak = [0]
    stopped = [None]
    done = threading.Event()

    def read() -> None:
        for line in p.stdout:
            lines.append((time.perf_counter() - t0, line.rstrip("\n")))
            log.write(f"{lines[-1][0]:10.3f}  {line}")

    def sample() -> None:
        timeout = spec.get("timeout")
        while not done.is_set():
            peak[0] = max(peak[0], tree_rss(p.pid))
            now = time.perf_counter() - t0
            try:
                if timeout and stopped[0] is None and now > timeout:
                    stopped[0] = now
                    os.killpg(p.pid, signal.SIGTERM)
                elif stopped[0] is not None and now > stopped[0] + 5:
                    os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            done.wait(0.05)

    threads = [threading.Thread(target=read, daemon=True), threading.Thread(target=sample, daemon=True)]
    for t in threads:
        t.start()
    _, status, _ = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    for t in threads:
        t.join(timeout=10)
    log.close()
    return {"cmd": spec["cmd"], "wall_s": wall, "returncode": p.returncode, "stopped_at_s": stopped[0],
            "peak_tree_rss_bytes": peak[0],
            "ru_maxrss_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, "lines": lines}


def measure(cmd: list[str], *, log: str, env: dict | None = None, timeout: float | None = None,
            cwd: str | None = None) -> dict:
    """Run ``cmd`` under a fresh helper process (``python -m bitextmine.laser --measure-spec``), so that its RUSAGE_CHILDREN
    is this command's alone. Returns wall_s, peak_tree_rss_bytes, ru_maxrss_bytes, returncode,
    stopped_at_s (None unless stopped by ``timeout``) and lines [(seconds, text)] of its output."""
    with tempfile.TemporaryDirectory(prefix="bench_laser.") as tmp:
        spec_path, out_path = os.path.join(tmp, "spec.json"), os.path.join(tmp, "result.json")
        with open(spec_path, "w") as f:
            json.dump({"cmd": cmd, "env": env or {}, "timeout": timeout, "cwd": cwd, "log": log}, f)
        subprocess.run([sys.executable, "-m", "bitextmine.laser", "--measure-spec", spec_path, out_path], check=True)
        with open(out_path) as f:
            return json.load(f)


# --- LASER's stages, from its --verbose lines ---------------------------------------------------------

# the --verbose lines of mine_bitexts.py that open each stage, in order; a stage ends where the next begins
LASER_MARKS = [(" - perform", "knn_fwd"), (" - perform", "knn_bwd"), (" - mining for parallel data", "score_fwd"),
               (" - scoring", None), (" - scoring", "score_bwd"), (" - writing alignments", "select")]
STAGES = {"load": "start-up, imports, texts and embeddings loaded", "knn_fwd": "k-NN src->tgt (FAISS IndexFlatIP)",
          "knn_bwd": "k-NN tgt->src", "score_fwd": "margin scores src->tgt (Python loop)",
          "score_bwd": "margin scores tgt->src", "select": "1:1 selection (Python loop), writing and exit"}


def laser_stages(lines: list, wall: float, finished: bool) -> tuple[dict[str, float], str | None]:
    """({stage: seconds} of the stages LASER completed, the stage it was in when stopped or None) from
    its timestamped --verbose output."""
    starts = {"load": 0.0}
    i = 0
    for t, text in lines:
        if i < len(LASER_MARKS) and text.startswith(LASER_MARKS[i][0]):
            if LASER_MARKS[i][1]:
                starts[LASER_MARKS[i][1]] = t
            i += 1
    order = [s for s in STAGES if s in starts]
    done = {}
    for a, b in itertools.pairwise(order):
        done[a] = starts[b] - starts[a]
    if finished and order[-1] == "select":
        done["select"] = wall - starts["select"]
        return done, None
    return done, order[-1]


def fit_at(ms: list[float], ts: list[float], m: float) -> float:
    """Least-squares line a + b m through (ms, ts), evaluated at ``m`` (proportional through 0 for one point)."""
    if len(set(ms)) < 2:
        return ts[0] * m / ms[0]
    b, a = np.polyfit(np.asarray(ms, float), np.asarray(ts, float), 1)
    return float(a + b * m)


# --- data ---------------------------------------------------------------------------------------------


def prepared(cache: str, n: int, train_dir: str = "") -> tuple[str, str]:
    """(src, tgt) .npy paths of tools/bench_mine.py's sentences for ``n`` in ``cache`` (made there from the training
    corpora in ``train_dir`` when absent; the temporary corpus folder is removed)."""
    from .bench import mining_inputs

    os.makedirs(cache, exist_ok=True)
    before = set(os.listdir(cache))
    try:
        return mining_inputs(train_dir, cache, n)
    finally:
        for name in set(os.listdir(cache)) - before:
            if name.startswith("tmp") and os.path.isdir(os.path.join(cache, name)):
                shutil.rmtree(os.path.join(cache, name))


def model_dim() -> int:
    """The bundled model's embedding dimension."""
    from .loading import load_model

    return load_model(None).dim


def make_inputs(cache: str, run_dir: str, n: int, *, dim: int, fp16: bool, lift_seed: int, want_npy: bool,
                model_dim: int, train_dir: str = "") -> dict:
    """src/tgt .txt, .raw (and .npy with a sidecar when ``want_npy``) in ``run_dir``, of ``dim`` values per
    row: the cached embeddings (``model_dim`` values, the model's; made from ``train_dir`` when not cached)
    lifted when ``dim`` is larger; returns their paths."""
    src_npy, tgt_npy = prepared(cache, n, train_dir)
    # what the files in run_dir were made from: made again when it changes (another cache, seed or embeddings)
    stamp = {"cache": os.path.abspath(cache), "lift_seed": lift_seed if dim != model_dim else None,
             "embeddings": [os.path.getmtime(src_npy), os.path.getmtime(tgt_npy)]}
    stamp_path = os.path.join(run_dir, "made-from.json")
    if os.path.isdir(run_dir):
        try:
            with open(stamp_path) as f:
                same = json.load(f) == stamp
        except (OSError, ValueError):
            same = False
        if not same:
            shutil.rmtree(run_dir)
    os.makedirs(run_dir, exist_ok=True)
    with open(stamp_path, "w") as f:
        json.dump(stamp, f)
    w = lift_matrix(model_dim, dim, seed=lift_seed) if dim != model_dim else None
    paths = {}
    for side, npy in (("src", src_npy), ("tgt", tgt_npy)):
        txt = os.path.join(run_dir, f"{side}.txt")
        if not os.path.exists(txt):
            shutil.copyfile(npy[:-4] + ".txt", txt)
        x = np.load(npy, mmap_mode="r")
        if x.shape[1] != model_dim:
            raise ConfigError(f"{npy}: rows of {x.shape[1]}; expected the bundled model's {model_dim} (cached by "
                             "another model: remove it or choose another --work)")
        raw = os.path.join(run_dir, f"{side}.raw")
        if not os.path.exists(raw):
            with open(raw + ".partial", "wb") as f:  # block by block: a lifted 1M side is 4 GB
                for i in range(0, len(x), 65536):
                    write_raw(f, lift(x[i:i + 65536], w) if w is not None else x[i:i + 65536], fp16=fp16)
            os.replace(raw + ".partial", raw)
        paths[f"{side}_txt"], paths[f"{side}_raw"], paths[f"{side}_npy"] = txt, raw, ""
        if want_npy:
            out = os.path.join(run_dir, f"{side}.npy")
            if not os.path.exists(out + ".json"):
                y = raw_rows(raw, dim, fp16=fp16)
                z = np.lib.format.open_memmap(out, mode="w+", dtype=y.dtype, shape=y.shape)
                for i in range(0, len(y), 65536):
                    z[i:i + 65536] = y[i:i + 65536]
                z.flush()
                del z
                with open(npy + ".json") as f:  # bench_mine's sidecar: the model and the text's sha256
                    meta = json.load(f)
                meta.update(dim=dim, dtype="float16" if fp16 else "float32")
                with open(out + ".json", "w") as f:
                    json.dump(meta, f, indent=2)
            paths[f"{side}_npy"] = out
    return paths


def write_prefix(run_dir: str, paths: dict, m: int, *, dim: int, fp16: bool) -> dict:
    """The first ``m`` source lines and rows in run_dir/prefix-m (the targets unchanged)."""
    d = os.path.join(run_dir, f"prefix-{m}")
    os.makedirs(d, exist_ok=True)
    out = dict(paths, src_txt=os.path.join(d, "src.txt"), src_raw=os.path.join(d, "src.raw"), dir=d)
    with open(paths["src_txt"], encoding="utf-8") as f, open(out["src_txt"], "w", encoding="utf-8") as g:
        g.writelines(itertools.islice(f, m))
    write_raw(out["src_raw"], raw_rows(paths["src_raw"], dim, fp16=fp16)[:m], fp16=fp16)
    return out


# --- the two commands ---------------------------------------------------------------------------------

RAW_TEMPLATE = ("{python} -m bitextmine mine {src_txt} {tgt_txt} --src-emb {src_raw} --tgt-emb {tgt_raw} "
                "--emb-format raw --dim {dim} {fp16_flag} --threshold {threshold} --min-cosine -1 --k {k} "
                "--margin ratio --mode max --index flat --device cpu -o {out}")
NPY_TEMPLATE = ("{python} -m bitextmine mine {src_txt} {tgt_txt} --src-emb {src_npy} --tgt-emb {tgt_npy} "
                "--threshold {threshold} --min-cosine -1 --k {k} --margin ratio --mode max --index flat "
                "--device cpu -o {out}")


AVX2_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "OPENBLAS_CORETYPE": "Haswell",
            "ATEN_CPU_CAPABILITY": "avx2", "FAISS_OPT_LEVEL": "avx2"}


def ours_env() -> dict:
    """This checkout first on PYTHONPATH, so `python -m bitextmine` runs it (the folder above this package)."""
    return {"PYTHONPATH": ROOT + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")}


def laser_cmd(script: str, p: dict, *, out: str, dim: int, threshold: float, k: int, fp16: bool) -> list[str]:
    return ([sys.executable, script, p["src_txt"], p["tgt_txt"], "--src-lang", "xx", "--trg-lang", "en",
             "--src-embeddings", p["src_raw"], "--trg-embeddings", p["tgt_raw"], "--output", out,
             "--mode", "mine", "--retrieval", "max", "--margin", "ratio", "-k", str(k), "--unify",
             "--dim", str(dim), "--threshold", f"{threshold:g}", "--verbose"] + (["--fp16"] if fp16 else []))


def ours_cmd(template: str, p: dict, *, out: str, dim: int, threshold: float, k: int, fp16_flag: str) -> list[str]:
    q = {key: shlex.quote(v) for key, v in p.items() if isinstance(v, str)}
    return shlex.split(template.format(python=shlex.quote(sys.executable), out=shlex.quote(out), dim=dim,
                                       threshold=f"{threshold:g}", k=k, fp16_flag=fp16_flag, **q))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--measure-spec":
        with open(sys.argv[2]) as f:
            result = _measure_here(json.load(f))
        with open(sys.argv[3], "w") as f:
            json.dump(result, f)
