"""Exact k-nearest-neighbour search by inner product (cosine on L2-normalised rows), in query blocks.

Backends, in order of preference for ``device='auto'``: FAISS on GPU (faiss built with CUDA), torch
matmul + top-k on CUDA, FAISS on CPU (``IndexFlatIP``).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .errors import ConfigError, MissingDependencyError


def _faiss():
    try:
        import faiss
    except ImportError:
        raise MissingDependencyError(
            "FAISS is not installed; run: pip install faiss-cpu   (or: pip install 'bitextmine[gpu]' for faiss-gpu)"
        ) from None
    return faiss


def choose_backend(device: str) -> str:
    """'faiss-gpu', 'torch-cuda' or 'faiss-cpu' for device auto|cpu|cuda."""
    if device == "cpu":
        return "faiss-cpu"
    try:
        import faiss

        n_gpu = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
    except ImportError:
        n_gpu = 0
    if n_gpu > 0:
        return "faiss-gpu"
    import torch

    if torch.cuda.is_available():
        return "torch-cuda"
    if device == "cuda":
        raise ConfigError("--device cuda: neither FAISS nor torch sees a CUDA GPU; use --device cpu or auto")
    return "faiss-cpu"


def knn(
    x: np.ndarray,
    y: np.ndarray,
    k: int,
    *,
    block_size: int = 16384,
    device: str = "auto",
    progress: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` rows of ``y`` with the largest inner product with each row of ``x``.

    x: float (n, d); y: float (m, d). Returns (D float32 (n, k'), I int64 (n, k')) with k' = min(k, m),
    each row sorted by decreasing similarity. Queries run in blocks of ``block_size`` rows.
    """
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ConfigError(f"knn: dimensions differ ({x.shape} vs {y.shape})")
    n, m = len(x), len(y)
    k = min(k, m)
    if n == 0 or k == 0:
        return np.zeros((n, k), np.float32), np.zeros((n, k), np.int64)
    backend = choose_backend(device)
    D = np.empty((n, k), np.float32)
    I = np.empty((n, k), np.int64)
    if backend == "torch-cuda":
        import torch

        yt = torch.from_numpy(np.ascontiguousarray(y, np.float32)).cuda().half()
        for a in range(0, n, block_size):
            xb = torch.from_numpy(np.ascontiguousarray(x[a : a + block_size], np.float32)).cuda().half()
            v, i = torch.topk((xb @ yt.T).float(), k, dim=1)
            D[a : a + len(xb)], I[a : a + len(xb)] = v.cpu().numpy(), i.cpu().numpy()
            if progress:
                progress(len(xb))
        return D, I
    faiss = _faiss()
    index = faiss.IndexFlatIP(y.shape[1])
    if backend == "faiss-gpu":
        index = faiss.index_cpu_to_all_gpus(index)
    index.add(np.ascontiguousarray(y, np.float32))
    for a in range(0, n, block_size):
        xb = np.ascontiguousarray(x[a : a + block_size], np.float32)
        D[a : a + len(xb)], I[a : a + len(xb)] = index.search(xb, k)
        if progress:
            progress(len(xb))
    return D, I
