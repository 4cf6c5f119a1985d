"""Device and precision decisions, in one place: which device, which dtype for the piece table, the
similarity tiles and training's autocast, which k-NN backend, how much of a side fits on the device,
and the matrix-product settings under which float32 results can be trusted.

Every decision is a small function of the request (``auto`` or an explicit choice) and of what the
machine reports (CUDA capability, CPU flags, FAISS GPUs), so each can be tested on a CPU by faking
those reports.
"""

from __future__ import annotations

import contextlib
import functools
import os

from .config import AMP_MODES, PRECISIONS, TABLE_PRECISIONS
from .errors import ConfigError, MissingDependencyError

CPU_RESIDENT_BYTES = 32 << 20  # exact search: y rows held at once on a CPU (re-reading x per shard costs ~2 % at 1M)
GPU_TILE_BYTES = 2 * 8192 * 32768 * 6  # exact search: two CUDA tiles (bf16 products and their float32 copies)
FLAT_SIM_BYTES = 1 << 30  # torch flat k-NN: float32 similarities of one query block against one shard of y
# FAISS GPU IVF-PQ: code bytes (= sub-quantizers at 8 bits) that IVFPQ::isSupportedPQCodeLength accepts
# (faiss/gpu/impl/IVFPQ.cu; checked in GpuIndexIVFPQ::verifyPQSettings_, faiss/gpu/GpuIndexIVFPQ.cu), less
# 56, 64 and 96, which need float16 lookup tables (an index cloned with default options has float32 ones:
# 4 bytes x m x 256 codes must fit in 48 KiB of shared memory, so m <= 48)
GPU_PQ_SUBQUANTIZERS = (1, 2, 3, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48)


def resolve_device(device: str) -> str:
    """'auto' -> 'cuda' when torch sees a GPU, else 'cpu'; 'cuda' without a GPU is a ConfigError."""
    import torch

    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
        raise ConfigError(f"device {device!r}: expected auto, cpu or cuda")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("--device cuda: torch sees no CUDA GPU; use --device cpu or auto")
    return device


def is_cuda(device: str) -> bool:
    return str(device).startswith("cuda")


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset:
    """The CPU's feature flags from /proc/cpuinfo (empty where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            return frozenset(next((line for line in f if line.startswith("flags")), "").split())
    except OSError:
        return frozenset()


# oneDNN's instruction-set caps (ONEDNN_MAX_CPU_ISA) below AVX512_CORE_BF16: torch's bf16 products are then
# emulated in float32 (~8x slower), whatever the CPU has
_ISA_WITHOUT_BF16 = frozenset({"sse41", "avx", "avx2", "avx2_vnni", "avx2_vnni_2", "avx512_core", "avx512_core_vnni"})


def cpu_native_bf16() -> bool:
    """Whether torch multiplies bf16 natively on this CPU (AVX512-BF16 or AMX, not capped below them by
    ONEDNN_MAX_CPU_ISA): bf16 products then beat float32; without them (AVX2 only) they are ~8x slower."""
    cap = (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "").strip().lower()
    return cap not in _ISA_WITHOUT_BF16 and bool({"avx512_bf16", "amx_bf16"} & cpu_flags())


@functools.cache
def cpu_fp32_matmul(rows: int, cols: int, d: int) -> str:
    """torch | numpy: the faster float32 product of (rows, d) @ (d, cols) on this CPU, timed once per process
    and shape (best of three, ~0.1 s at d = 1024). torch's BLAS and numpy's are different libraries (MKL,
    OpenBLAS), and which is faster depends on the CPU (on an AVX2-only CPU numpy's ran at 98-140 GFLOPS
    where torch's ran at 82-93; on an AMD EPYC with AVX512 torch's was faster at d = 1024)."""
    import time

    import numpy as np
    import torch

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((rows, d), np.float32), rng.standard_normal((cols, d), np.float32)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)

    def best(f) -> float:
        f()
        times = []
        for _ in range(3):
            t = time.perf_counter()
            f()
            times.append(time.perf_counter() - t)
        return min(times)

    with torch.inference_mode():
        t_torch = best(lambda: ta @ tb.T)
    return "numpy" if best(lambda: a @ b.T) < t_torch else "torch"


def cuda_capability(device: str = "cuda") -> tuple[int, int]:
    import torch

    return tuple(torch.cuda.get_device_capability(device))


def table_precision(precision: str, stored_dtype: str, device: str) -> str:
    """fp32 | fp16 | bf16: the dtype of the piece table on ``device`` for EncodeConfig.precision.

    auto = the dtype the model is stored in (``stored_dtype``, "float16" or "float32", from the model
    directory, not the float32 table it is loaded as) on CUDA, where half the memory traffic is the
    gain and fp16 holds a stored fp16 table exactly; float32 on a CPU (its embedding_bag is fastest there).
    """
    if precision not in TABLE_PRECISIONS:
        raise ConfigError(f"precision {precision!r}: expected {', '.join(TABLE_PRECISIONS)}")
    if precision != "auto":
        return precision
    if is_cuda(device):
        return "fp16" if str(stored_dtype) in ("float16", "fp16") else "fp32"
    return "fp32"


def search_precision(precision: str, device: str) -> str:
    """bf16 | fp32 for exact search's similarity tiles (MineConfig.precision auto | bf16 | fp32): auto picks
    bf16 on CUDA GPUs of compute capability 8 or more and on CPUs with native bf16 dot products."""
    if precision not in PRECISIONS:
        raise ConfigError(f"precision {precision!r}: expected {', '.join(PRECISIONS)}")
    if precision != "auto":
        return precision
    if is_cuda(device):
        return "bf16" if cuda_capability(device)[0] >= 8 else "fp32"
    return "bf16" if cpu_native_bf16() else "fp32"


def amp_dtype(amp: str, device: str):
    """The autocast dtype of training's forward passes for TrainConfig.amp (auto | off | bf16), or None.

    bf16 only: it needs no gradient scaler (float16 would). auto = bf16 on CUDA GPUs with native bf16
    (compute capability >= 8), off on a CPU, where bf16 autocast is no faster for these models."""
    import torch

    if amp not in AMP_MODES:
        raise ConfigError(f"amp {amp!r}: expected {', '.join(AMP_MODES)}")
    if amp == "off" or (amp == "auto" and not (is_cuda(device) and cuda_capability(device)[0] >= 8)):
        return None
    return torch.bfloat16


def faiss_gpus() -> int:
    """GPUs FAISS can use (0 with faiss-cpu or without FAISS)."""
    try:
        import faiss
    except ImportError:
        return 0
    return faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0


def faiss_module():
    """The faiss module, or MissingDependencyError with the pip command."""
    try:
        import faiss
    except ImportError:
        raise MissingDependencyError(
            "FAISS is not installed; run: pip install faiss-cpu   (GPU indexes: pip install faiss-gpu-cu12, never beside faiss-cpu)"
        ) from None
    return faiss


def index_device(index: str, device: str) -> str:
    """cpu | cuda: where a FAISS index (flat, ivf, ivfpq) is trained and searched for ``device``.

    An explicit ``--device cuda`` with no FAISS GPU is a ConfigError naming the fix (it must not run on
    the CPU unannounced); ``auto`` uses the GPU only when FAISS has one. (:func:`knn_backend` sends flat
    and ivf to torch before asking here when a CUDA device has no FAISS GPU: only ivfpq meets the error.)"""
    if device == "cpu":
        return "cpu"
    check_faiss_install()
    if faiss_gpus() > 0:
        return "cuda"
    if is_cuda(device):
        raise ConfigError(f"--device cuda with --index {index}: this FAISS has no GPU support; "
                          "run: pip uninstall -y faiss-cpu && pip install faiss-gpu-cu12, or use --device cpu "
                          "(--index flat and ivf search on the GPU with torch alone)")
    return "cpu"


def knn_backend(index: str, device: str) -> str:
    """faiss-cpu | faiss-gpu | torch: what searches one direction with ``index`` (flat, ivf, ivfpq) for
    ``device``. Without FAISS GPUs, on a CUDA device (``cuda``, or ``auto`` where torch sees one), flat and
    ivf search run with torch (exact float32 search; :mod:`bitextmine.search.torch_ivf`); otherwise, and
    always for ivfpq, FAISS on :func:`index_device`. A CPU device always uses FAISS."""
    if index in TORCH_INDEXES and torch_search(device):
        return "torch"
    if index == "flat" and device != "cpu" and faiss_gpus() == 0:
        return "faiss-cpu"
    return "faiss-" + ("gpu" if index_device(index, device) == "cuda" else "cpu")


TORCH_INDEXES = ("flat", "ivf")  # the indexes torch searches where FAISS has no GPU


def torch_search(device: str) -> bool:
    """Whether ``device`` (auto | cpu | cuda...) is a CUDA device that FAISS cannot use (no FAISS GPUs): then
    flat and ivf search run with torch (:func:`knn_backend`)."""
    return device != "cpu" and faiss_gpus() == 0 and resolve_device(device) != "cpu"


def pq_subquantizers(d: int, pq_m: int, where: str) -> int:
    """Sub-quantizers of an IVF-PQ index of dimension d on ``where`` (cpu | cuda) for MineConfig.pq_m (0 = auto).

    auto: on a CPU the largest divisor of d up to d / 4 (75 for d = 300); on a GPU the largest of
    GPU_PQ_SUBQUANTIZERS dividing d up to d / 4 (20 for d = 300; 1 when none does). A given pq_m that does
    not divide d, or that FAISS's GPU IVF-PQ does not accept, is a ConfigError."""
    allowed = GPU_PQ_SUBQUANTIZERS if is_cuda(where) else range(1, d + 1)
    if pq_m:
        if d % pq_m:
            raise ConfigError(f"--pq-m {pq_m}: must divide the embedding dimension {d}")
        if pq_m not in allowed:
            raise ConfigError(f"--pq-m {pq_m}: FAISS GPU IVF-PQ accepts only {', '.join(map(str, allowed))} "
                              "sub-quantizers; choose one of them dividing the dimension, or use --device cpu")
        return pq_m
    return max((q for q in allowed if q <= max(1, d // 4) and d % q == 0), default=1)


def resident_rows(m: int, n: int, d: int, c: int, device: str, itemsize: int = 2, *, align: int = 16) -> int:
    """Exact search: rows of the searched side (m rows of d values of ``itemsize`` bytes) to hold on
    ``device`` at once. On a CPU, 32 MiB of them; on a GPU, as many as fit in half its free memory beside
    both sides' candidates (n + m rows of c float32 values and int32 ids) and two tiles. At least
    ``align`` rows."""
    if not is_cuda(device):
        return max(align, min(m, CPU_RESIDENT_BYTES // (d * itemsize)))
    import torch

    free = torch.cuda.mem_get_info(device)[0] // 2 - (n + m) * c * 8 - GPU_TILE_BYTES
    return max(align, min(m, free // (d * itemsize))) if free > 0 else max(align, min(m, 1 << 20))


@contextlib.contextmanager
def exact_matmul():
    """Matrix products as the float32 certification assumes them, restored afterwards: no TF32 and
    float32 ("highest") precision for float32 products (a caller's ``set_float32_matmul_precision("high")``
    would otherwise let them round to TF32 or bf16), and float32 accumulation of bf16 products on CUDA."""
    import torch

    cuda = torch.backends.cuda.matmul
    saved = (torch.get_float32_matmul_precision(), cuda.allow_tf32, cuda.allow_bf16_reduced_precision_reduction,
             torch.backends.cudnn.allow_tf32)
    torch.set_float32_matmul_precision("highest")
    cuda.allow_tf32 = False
    cuda.allow_bf16_reduced_precision_reduction = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(saved[0])
        cuda.allow_tf32, cuda.allow_bf16_reduced_precision_reduction, torch.backends.cudnn.allow_tf32 = saved[1:]


FAISS_CPU_DISTS = ("faiss-cpu",)
FAISS_GPU_DISTS = ("faiss-gpu", "faiss-gpu-cu11", "faiss-gpu-cu12")


def faiss_distributions(installed=None) -> list[str]:
    """The installed pip distributions that provide the ``faiss`` module (``installed``: names to use instead
    of asking importlib.metadata, for tests)."""
    if installed is None:
        from importlib import metadata
        installed = (d.metadata["Name"] or "" for d in metadata.distributions())
    known = FAISS_CPU_DISTS + FAISS_GPU_DISTS
    return sorted({n.lower().replace("_", "-") for n in installed} & set(known))


def check_faiss_install(installed=None) -> None:
    """MissingDependencyError when a CPU and a GPU FAISS distribution are both installed: both write the
    ``faiss`` module and the last one installed wins, so what runs depends on install order."""
    dists = faiss_distributions(installed)
    cpu = [d for d in dists if d in FAISS_CPU_DISTS]
    gpu = [d for d in dists if d in FAISS_GPU_DISTS]
    if cpu and gpu:
        raise MissingDependencyError(
            f"{' and '.join(cpu + gpu)} are installed together and each provides the faiss module (install order decides "
            f"which one runs); run: pip uninstall -y {' '.join(cpu + gpu)} && pip install {gpu[-1]}")
