"""Run every CUDA path against its CPU result, then take GPU figures; prints one table.

    python tools/gpu_check.py --prepare --data gpu_data        # once, where ../shared/data is (small text files)
    python tools/gpu_check.py --data gpu_data                  # on the GPU machine (torch with CUDA; FAISS optional)
    python tools/gpu_check.py --device cpu --quick --data DIR  # the same code paths on a CPU, small sizes

Checks (device result vs the CPU result): encode at fp32 / fp16 / bf16 piece tables (max abs diff of rows);
a few training steps of each encoder with amp off and bf16 (loss curves, max relative diff); exact knn_both
and the one-direction flat k-NN (indices equal to the CPU's); IVF recall (FAISS, or torch where FAISS has no GPU);
checkpoint resume (max_steps then --resume equals an uninterrupted run); the second stage in `mine` (own and reference
margins) and `score --margin prob` (same pairs, close scores). Figures: encode sentences/s end to
end from a file (the CLI), exact mining of N x N random unit float16 embeddings, training pairs/s.
Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# this checkout's bitextmine in the commands this runs
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (ROOT, os.environ.get("PYTHONPATH"))))

ENCODERS = ("sp", "word", "trigram", "blstm-sp")
# Tolerances: fp32 tables differ only by summation order; fp16 is the bundled model's stored dtype
# (lossless); bf16 keeps 8 bits of mantissa. Loss curves: relative, per logged step.
ENCODE_TOL = {"fp32": 1e-4, "fp16": 1e-3, "bf16": 2e-2}
LOSS_TOL = {"off": 0.02, "bf16": 0.10}


def prepare(shared: str, data: str, pairs: int = 20000, encode_lines: int = 100000) -> None:
    """Small text files from the shared news data: train.de / train.en (aligned), encode.txt."""
    os.makedirs(data, exist_ok=True)
    base = os.path.join(shared, "train", "wmt_newstest", "en-de.")
    de = gzip.open(base + "de.gz", "rt", encoding="utf-8").read().splitlines()
    en = gzip.open(base + "en.gz", "rt", encoding="utf-8").read().splitlines()
    for name, lines in (("train.de", de[:pairs]), ("train.en", en[:pairs]), ("encode.txt", (en + de)[:encode_lines])):
        with open(os.path.join(data, name), "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)


class Table:
    def __init__(self):
        self.rows: list[tuple[str, str, str, str]] = []

    def add(self, check: str, status: str, value: str, bound: str = "") -> None:
        self.rows.append((check, status, value, bound))
        print(f"  {status:4}  {check}: {value} {bound}".rstrip(), file=sys.stderr, flush=True)

    def print(self) -> None:
        head = ("check", "result", "measured", "tolerance / note")
        w = [max(len(r[i]) for r in self.rows + [head]) for i in range(4)]
        order = (0, 1, 2, 3)
        for r in [head, tuple("-" * x for x in w)] + self.rows:
            print(" | ".join(r[i].ljust(w[i]) for i in order).rstrip())

    @property
    def failed(self) -> bool:
        return any(r[1] == "FAIL" for r in self.rows)


def _status(ok: bool) -> str:
    return "ok" if ok else "FAIL"


def _lines(path: str, n: int) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for _, line in zip(range(n), f)]


def check_encode(t: Table, device: str, texts: list[str]) -> None:
    from bitextmine.config import EncodeConfig
    from bitextmine.encoding import encode
    from bitextmine.loading import load_model

    model = load_model()
    ref = encode(texts, model, config=EncodeConfig(device="cpu", precision="fp32", threads=1))
    for p, tol in ENCODE_TOL.items():
        got = encode(texts, model, config=EncodeConfig(device=device, precision=p, threads=1))
        diff = float(np.abs(got.astype(np.float64) - ref).max())
        t.add(f"encode {p} table, {len(texts)} rows vs CPU fp32", _status(diff <= tol), f"max abs diff {diff:.2e}",
              f"<= {tol:g}")


def _train(data: str, out: str, device: str, encoder: str, amp: str, steps: int, pairs: int, resume: bool = False,
           epochs: int = 1):
    from bitextmine.config import TrainConfig
    from bitextmine.corpus import CorpusSpec
    from bitextmine.model import default_model_dir
    from bitextmine.training import train

    losses: list[float] = []
    cfg = TrainConfig(encoder=encoder, amp=amp, device=device, max_steps=steps, epochs=epochs, dim=64,
                      batch_size=32, megabatch_max=4, dev_pairs=min(200, pairs // 5), checkpoint_every=2, seed=1,
                      sif_sample=min(2000, pairs))
    spec = CorpusSpec(src=os.path.join(data, "train.de"), tgt=os.path.join(data, "train.en"))
    res = train([spec], out, config=cfg, resume=resume,
                tokenizer_path=os.path.join(default_model_dir(), "sentencepiece.model") if "sp" in encoder else None,
                progress=lambda e: losses.append(e["loss"]) if e.get("event") == "step" else None)
    return res, losses


def check_training(t: Table, device: str, data: str, tmp: str, steps: int, pairs: int) -> None:
    for enc in ENCODERS:
        _, ref = _train(data, os.path.join(tmp, f"cpu-{enc}"), "cpu", enc, "off", steps, pairs)
        for amp, tol in LOSS_TOL.items():
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                _, got = _train(data, os.path.join(tmp, f"{device}-{enc}-{amp}"), device, enc, amp, steps, pairs)
            ok = len(got) == len(ref) > 0
            rel = max((abs(a - b) / max(abs(b), 1e-9) for a, b in zip(got, ref)), default=float("inf"))
            t.add(f"train {enc} amp {amp}, {len(ref)} logged steps vs CPU fp32 losses", _status(ok and rel <= tol),
                  f"max rel diff {rel:.2e}", f"<= {tol:g}")
            texts = sorted({str(w.message)[:60] for w in said})
            t.add(f"train {enc} amp {amp}: warnings", _status(not said), f"{len(said)}: {'; '.join(texts)}"
                  if said else "none", "none")


def check_resume(t: Table, device: str, data: str, tmp: str, pairs: int) -> None:
    from bitextmine.config import EncodeConfig
    from bitextmine.encoding import encode
    from bitextmine.loading import load_model

    whole, cut = os.path.join(tmp, "whole"), os.path.join(tmp, "cut")
    _train(data, whole, device, "sp", "off", 0, pairs)
    first, _ = _train(data, cut, device, "sp", "off", 3, pairs)
    _train(data, cut, device, "sp", "off", 0, pairs, resume=True)
    texts = _lines(os.path.join(data, "train.en"), 200)
    a, b = (encode(texts, load_model(d), config=EncodeConfig(device="cpu", threads=1)) for d in (whole, cut))
    diff = float(np.abs(a - b).max())
    tol = 0.0 if device == "cpu" else 1e-3  # CUDA scatter-adds in the backward pass are not bit-reproducible
    t.add(f"resume: stop at step {first.steps}, resume == uninterrupted (encoded rows)", _status(diff <= tol),
          f"max abs diff {diff:.2e}", f"<= {tol:g}")


def _unit(n: int, d: int, seed: int, dtype=np.float32) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, d), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(dtype)


def _same_or_tied(I, ref_D, ref_I, x, y) -> tuple[int, int]:
    """(rows whose indices equal the reference's, rows that differ only where float32 rounding can reorder: each
    differing neighbour's exact cosine within 1e-5 of the reference's k-th)."""
    equal = (I == ref_I).all(axis=1)
    tied = 0
    for r in np.flatnonzero(~equal):
        cos = y[I[r]].astype(np.float64) @ x[r].astype(np.float64)
        tied += bool(np.all(cos >= ref_D[r, -1] - 1e-5))
    return int(equal.sum()), tied


def check_search(t: Table, device: str, n: int) -> None:
    from bitextmine.search import knn, knn_both

    x, y, k = _unit(n, 512, 1), _unit(n + 17, 512, 2), 4
    ref = knn_both(x, y, k, device="cpu", precision="fp32")
    got = knn_both(x, y, k, device=device)
    for name, I, (D0, I0, a, b) in (("x->y", got[1], (ref[0], ref[1], x, y)), ("y->x", got[3], (ref[2], ref[3], y, x))):
        eq, tied = _same_or_tied(I, D0, I0, a, b)
        t.add(f"knn_both exact {name}, {n} x {n + 17}, k={k}: indices == CPU fp32", _status(eq + tied == len(I)),
              f"{eq}/{len(I)} rows equal, {tied} differ by a float32 tie", f"precision {got[4].get('precision')}")
    _, I = knn(x, y, k, device=device, index="flat")
    eq, tied = _same_or_tied(I, ref[0], ref[1], x, y)
    t.add(f"knn one direction, flat, {n} rows: indices == knn_both CPU", _status(eq + tied == n),
          f"{eq}/{n} rows equal, {tied} differ by a float32 tie")
    from bitextmine.device import knn_backend

    backend = knn_backend("ivf", device)  # FAISS's GPU or CPU index, or torch's IVF where FAISS has no GPU
    try:
        import faiss  # noqa: F401
    except ImportError:
        if backend != "torch":
            t.add("IVF", "skip", "no faiss installed")
            return
    nlist = max(4, int(np.sqrt(n)))  # every list probed: IVF-flat must find the exact neighbours
    _, I = knn(x, y, k, device=device, index="ivf", nlist=nlist, nprobe=nlist)
    recall = float(np.mean([len(set(a) & set(b)) / k for a, b in zip(I, ref[1])]))
    t.add(f"IVF ({backend}), all {nlist} lists probed: recall@{k} vs exact, {n} rows", _status(recall >= 0.999),
          f"{recall:.4f}", ">= 0.999")


def _mine_rows(src: str, tgt: str, device: str, precision: str, model: str | None) -> dict[tuple[str, str], float]:
    """{(src id, tgt id): score} that `bitextmine mine --ids` prints (de-en, the defaults, the second stage)."""
    cmd = [sys.executable, "-m", "bitextmine", "mine", src, tgt, "--src-lang", "de", "--tgt-lang", "en", "--ids",
           "--device", device, "--precision", precision] + (["--model", model] if model else [])
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {run.stderr[-1500:]}")
    rows = [line.split("\t") for line in run.stdout.splitlines()]
    return {(r[-2], r[-1]): float(r[0]) for r in rows}


def _compare(t: Table, what: str, ref: dict, got: dict, tol: float) -> None:
    same = ref.keys() & got.keys()
    diff = max((abs(ref[p] - got[p]) for p in same), default=0.0)
    ok = ref.keys() == got.keys() and diff <= tol
    t.add(what, _status(ok), f"{len(same)} of {len(ref)} CPU / {len(got)} device pairs shared, max score diff "
          f"{diff:.1e}", f"same pairs, <= {tol:g}")


def check_stage(t: Table, device: str, data: str, tmp: str, n: int) -> None:
    """The second stage on the device vs the CPU in `mine`: the run's own margins, and reference margins through a
    copy of the model whose max_lines is below the sides' size."""
    from bitextmine.evaluation.planted import raised

    de, en = _lines(os.path.join(data, "train.de"), 2 * n), _lines(os.path.join(data, "train.en"), 2 * n)
    g = n // 10  # 10 % of the lines have their translation on the other side
    src, tgt = (os.path.join(tmp, f"stage.{x}") for x in ("de", "en"))
    for path, side in ((src, de[:n]), (tgt, en[:g] + en[n:2 * n - g])):
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in side)
    for model, regime in ((None, "own margins"), (raised(None, n // 3, os.path.join(tmp, "low")), "reference margins")):
        ref = _mine_rows(src, tgt, "cpu", "fp32", model)
        _compare(t, f"mine, second stage ({regime}), {n} x {n}, fp32: device vs CPU", ref,
                 _mine_rows(src, tgt, device, "fp32", model), 1e-4)
        got = _mine_rows(src, tgt, device, "auto", model)
        shared = len(ref.keys() & got.keys())
        t.add(f"mine, second stage ({regime}), device's default precision vs CPU fp32", "info",
              f"{shared} shared, {len(ref) - shared} only CPU, {len(got) - shared} only device")


def check_stage_score(t: Table, device: str, data: str, tmp: str, n: int) -> None:
    """`score --margin prob` on the device vs the CPU. The stage's trees are step functions of the features, so a
    margin moved by float32 summation order (or a bf16 near-tie among the neighbours) can move a probability by
    a leaf's step: the check is that no keep/drop decision at 0.5 differs outside 0.01 of it."""
    de, en = _lines(os.path.join(data, "train.de"), n + 1), _lines(os.path.join(data, "train.en"), n + 1)
    pairs = os.path.join(tmp, "stage.tsv")
    with open(pairs, "w", encoding="utf-8") as f:  # aligned pairs, every fifth target moved by one line
        f.writelines(f"{a}\t{en[i + 1 if i % 5 == 0 else i]}\n" for i, a in enumerate(de[:n]))
    probs = {}
    for dev in ("cpu", device):
        out = os.path.join(tmp, f"score-{dev}.tsv")
        subprocess.run([sys.executable, "-m", "bitextmine", "score", pairs, "-o", out, "--margin", "prob", "--src-lang",
                        "de", "--tgt-lang", "en", "--device", dev, "-q"], check=True, capture_output=True)
        probs[dev] = np.array([float(line.rsplit("\t", 1)[1]) for line in open(out, encoding="utf-8")])
    a, b = probs["cpu"], probs[device]
    diff = np.abs(a - b)
    flips = (a >= 0.5) != (b >= 0.5)
    far = int((flips & (np.minimum(np.abs(a - 0.5), np.abs(b - 0.5)) > 0.01)).sum())
    t.add(f"score --margin prob, {n} pairs: device vs CPU", _status(far == 0), f"{int((diff > 1e-6).sum())} probs "
          f"differ (max {diff.max():.1e}), {int(flips.sum())} decisions at 0.5 differ, {far} of them outside 0.01",
          "no decision outside 0.01 of 0.5")


def figure_encode(t: Table, device: str, data: str, tmp: str, n: int) -> None:
    src = os.path.join(tmp, "encode.txt")
    with open(src, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in _lines(os.path.join(data, "encode.txt"), n))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "bitextmine", "encode", src, "-o", os.path.join(tmp, "out.npy"),
                    "--device", device], check=True, capture_output=True)
    sec = time.perf_counter() - start
    t.add(f"figure: encode {n} sentences from a file (CLI, end to end)", "info", f"{n / sec:,.0f} sentences/s",
          f"{sec:.1f} s incl. start-up")


def figure_mine(t: Table, device: str, n: int) -> None:
    from bitextmine.config import MineConfig
    from bitextmine.mining import mine_embeddings

    x, y = _unit(n, 512, 3, np.float16), _unit(n, 512, 4, np.float16)
    start = time.perf_counter()
    pairs = mine_embeddings(x, y, config=MineConfig(device=device, index="flat", threshold=0.0))
    sec = time.perf_counter() - start
    t.add(f"figure: exact mining {n:,} x {n:,} random unit fp16, d=512 (mine_embeddings)", "info", f"{sec:.1f} s",
          f"{len(pairs.src):,} pairs")


def figure_train(t: Table, device: str, data: str, tmp: str, steps: int, pairs: int) -> None:
    for amp in LOSS_TOL:
        res, _ = _train(data, os.path.join(tmp, f"fig-{amp}"), device, "sp", amp, steps, pairs)
        t.add(f"figure: training sp, amp {amp}, {res.steps} mini-batches", "info",
              f"{res.pairs_per_second:,.0f} pairs/s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--quick", action="store_true", help="small sizes (a CPU can run it in a minute)")
    ap.add_argument("--data", default="gpu_data", help="train.de, train.en, encode.txt (see --prepare)")
    ap.add_argument("--prepare", action="store_true", help="fill --data from --shared and stop")
    ap.add_argument("--only", default="",
                    help="comma-separated: encode,train,search,resume,stage,score,figures (default: all)")
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))
    args = ap.parse_args(argv)
    if args.prepare:
        prepare(args.shared, args.data)
        return 0
    q = args.quick
    sizes = dict(encode=300 if q else 5000, steps=2 if q else 20, pairs=300 if q else 5000, search=1000 if q else 50000,
                 fig_encode=1000 if q else 100000, fig_mine=4000 if q else 1_000_000, fig_steps=4 if q else 300,
                 stage=600 if q else 3000)
    t = Table()
    only = set(filter(None, args.only.split(","))) or {"encode", "train", "search", "resume", "stage", "score",
                                                        "figures"}
    with tempfile.TemporaryDirectory() as tmp:
        if "encode" in only:
            check_encode(t, args.device, _lines(os.path.join(args.data, "encode.txt"), sizes["encode"]))
        if "train" in only:
            check_training(t, args.device, args.data, tmp, sizes["steps"], sizes["pairs"])
        if "search" in only:
            check_search(t, args.device, sizes["search"])
        if "resume" in only:
            check_resume(t, args.device, args.data, tmp, sizes["pairs"])
        if "stage" in only:
            check_stage(t, args.device, args.data, tmp, sizes["stage"])
        if "score" in only:
            check_stage_score(t, args.device, args.data, tmp, sizes["stage"])
        if "figures" in only:
            figure_encode(t, args.device, args.data, tmp, sizes["fig_encode"])
            figure_mine(t, args.device, sizes["fig_mine"])
            figure_train(t, args.device, args.data, tmp, sizes["fig_steps"], sizes["pairs"])
    t.print()
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
