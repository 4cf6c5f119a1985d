"""Device and precision decisions (bitextmine.device), with the GPU and CPU reports faked: tests of the
policy, run on any CPU."""

from __future__ import annotations

import types

import pytest
import torch

from bitextmine import device as D
from bitextmine.errors import ConfigError


@pytest.fixture
def fake_gpu(monkeypatch):
    """A CUDA GPU of the given compute capability and free memory, as torch would report it."""
    def install(capability=(9, 0), free=80 << 30):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, free))
    return install


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def cpu_with(monkeypatch):
    def install(*flags):
        monkeypatch.setattr(D, "cpu_flags", lambda: frozenset(flags))
    return install


def test_device_resolution(fake_gpu, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert D.resolve_device("auto") == "cpu"
    with pytest.raises(ConfigError, match="torch sees no CUDA GPU"):
        D.resolve_device("cuda")
    with pytest.raises(ConfigError, match="expected auto, cpu or cuda"):
        D.resolve_device("tpu")
    fake_gpu()
    assert D.resolve_device("auto") == "cuda" and D.resolve_device("cpu") == "cpu"


@pytest.mark.parametrize("request_, stored, device, expected", [
    ("auto", "float16", "cuda", "fp16"),   # the stored dtype, not the float32 table it is loaded as
    ("auto", "float32", "cuda", "fp32"),
    ("auto", "float16", "cpu", "fp32"),
    ("bf16", "float16", "cpu", "bf16"),
    ("fp16", "float32", "cuda", "fp16"),
])
def test_table_precision(request_, stored, device, expected):
    assert D.table_precision(request_, stored, device) == expected


def test_table_precision_auto_on_cuda_reads_the_bundled_models_stored_dtype():
    from bitextmine.loading import load_model

    model = load_model()
    assert model.embeddings.dtype.name == "float32" and model.stored_dtype == "float16"
    assert D.table_precision("auto", model.stored_dtype, "cuda") == "fp16"
    with pytest.raises(ConfigError, match="expected auto, fp32, fp16, bf16"):
        D.table_precision("int8", "float16", "cuda")


def test_search_precision(fake_gpu, cpu_with):
    cpu_with("avx2", "avx512_bf16")
    assert D.search_precision("auto", "cpu") == "bf16"
    cpu_with("avx2", "amx_bf16")
    assert D.search_precision("auto", "cpu") == "bf16"
    cpu_with("avx2", "avx512f")
    assert D.search_precision("auto", "cpu") == "fp32"
    assert D.search_precision("bf16", "cpu") == "bf16"  # asked for: kept (the certification still guards it)
    fake_gpu((8, 0))
    assert D.search_precision("auto", "cuda") == "bf16"
    fake_gpu((7, 5))
    assert D.search_precision("auto", "cuda") == "fp32"
    with pytest.raises(ConfigError, match="expected auto, bf16, fp32"):
        D.search_precision("fp8", "cpu")


def test_a_onednn_isa_cap_below_bf16_means_float32_tiles(cpu_with, monkeypatch):
    cpu_with("avx2", "avx512_bf16")
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    for cap, want in (("AVX2", "fp32"), ("avx512_core_vnni", "fp32"), ("AVX512_CORE_BF16", "bf16"), ("", "bf16")):
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
        assert D.search_precision("auto", "cpu") == want, cap


def test_cpu_fp32_matmul_names_a_backend_once_per_shape():
    D.cpu_fp32_matmul.cache_clear()
    first = D.cpu_fp32_matmul(32, 64, 16)
    assert first in ("torch", "numpy")
    assert D.cpu_fp32_matmul(32, 64, 16) == first and D.cpu_fp32_matmul.cache_info().hits == 1


def test_amp_dtype(fake_gpu, no_gpu):
    assert D.amp_dtype("auto", "cpu") is None and D.amp_dtype("off", "cpu") is None
    assert D.amp_dtype("bf16", "cpu") is torch.bfloat16
    fake_gpu((8, 6))
    assert D.amp_dtype("auto", "cuda") is torch.bfloat16 and D.amp_dtype("off", "cuda") is None
    fake_gpu((7, 0))  # no native bf16: auto stays off; float16 is never chosen (it would need a gradient scaler)
    assert D.amp_dtype("auto", "cuda") is None
    with pytest.raises(ConfigError, match="expected auto, off, bf16"):
        D.amp_dtype("fp16", "cuda")


def test_resident_rows_by_hand(fake_gpu):
    # CPU: 32 MiB of rows, 600 bytes a bf16 row of 300 values, 1,200 a float32 row
    assert D.resident_rows(10**7, 10, 300, 16, "cpu", 2) == 33_554_432 // 600 == 55_924
    assert D.resident_rows(10**7, 10, 300, 16, "cpu", 4) == 27_962
    assert D.resident_rows(5000, 10, 300, 16, "cpu", 2) == 5000
    assert D.resident_rows(3, 10, 300, 16, "cpu", 2, align=16) == 16
    # GPU with 80 GiB free: half of it, less the candidates (101M rows x 16 x 8 bytes) and two tiles
    fake_gpu(free=80 << 30)
    free = (40 << 30) - 101_000_000 * 16 * 8 - 2 * 8192 * 32768 * 6
    assert D.resident_rows(10**8, 10**6, 300, 16, "cuda", 2) == free // 600 == 44_667_412
    assert D.resident_rows(10**6, 10**6, 300, 16, "cuda", 2) == 10**6  # the whole side fits
    fake_gpu(free=1 << 30)  # too little for the tiles: a 1M-row shard rather than none
    assert D.resident_rows(10**8, 10**6, 300, 16, "cuda", 2) == 1 << 20


def test_faiss_index_device(monkeypatch):
    fake = types.SimpleNamespace(get_num_gpus=lambda: 0)
    monkeypatch.setitem(__import__("sys").modules, "faiss", fake)
    assert D.index_device("ivf", "cpu") == "cpu"
    assert D.index_device("ivf", "auto") == "cpu"
    with pytest.raises(ConfigError, match="no GPU support; run: pip uninstall -y faiss-cpu"):
        D.index_device("ivf", "cuda")
    fake.get_num_gpus = lambda: 2
    assert D.index_device("ivf", "auto") == "cuda" and D.index_device("ivfpq", "cuda") == "cuda"
    assert D.index_device("ivf", "cpu") == "cpu"


def test_exact_matmul_switches_reduced_precision_off_and_restores_it():
    cuda = torch.backends.cuda.matmul
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    cuda.allow_tf32 = True
    try:
        with D.exact_matmul():
            assert torch.get_float32_matmul_precision() == "highest"
            assert not cuda.allow_tf32 and not cuda.allow_bf16_reduced_precision_reduction
        assert torch.get_float32_matmul_precision() == "high" and cuda.allow_tf32
    finally:
        torch.set_float32_matmul_precision(old)
        cuda.allow_tf32 = False
