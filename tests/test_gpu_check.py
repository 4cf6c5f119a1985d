"""tools/gpu_check.py in its CPU mode on tiny data, and the FAISS double-install detection (faked distributions)."""

import os
import subprocess
import sys

import pytest

from bitextmine.device import check_faiss_install, faiss_distributions
from bitextmine.errors import MissingDependencyError
from conftest import toy_corpus, write_lines

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_faiss_cpu_and_gpu_installed_together_is_an_error_naming_the_fix():
    with pytest.raises(MissingDependencyError, match=r"pip uninstall -y faiss-cpu faiss-gpu-cu12 && pip install faiss-gpu-cu12"):
        check_faiss_install(["numpy", "faiss-cpu", "faiss_gpu_cu12"])


@pytest.mark.parametrize("installed", [["faiss-cpu", "torch"], ["faiss-gpu-cu12"], ["numpy"], []])
def test_one_faiss_or_none_is_fine(installed):
    check_faiss_install(installed)
    assert faiss_distributions(installed) == [n for n in installed if n.startswith("faiss")]


@pytest.mark.slow
def test_gpu_check_quick_cpu_mode_prints_every_check_passing(tmp_path):
    src, tgt = toy_corpus(400, seed=5)
    write_lines(tmp_path / "train.de", src)
    write_lines(tmp_path / "train.en", tgt)
    write_lines(tmp_path / "encode.txt", src + tgt)
    res = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gpu_check.py"), "--device", "cpu", "--quick",
                          "--data", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = [line.split(" | ") for line in res.stdout.splitlines()[2:]]
    status = {r[0].strip(): r[1].strip() for r in rows}
    checks = [c for c in status if not c.startswith("figure:")]
    for name in ("encode fp32", "encode fp16", "encode bf16", "knn_both exact", "knn one direction", "resume:",
                 "mine, second stage (own margins)", "mine, second stage (reference margins)", "score --margin prob"):
        assert any(c.startswith(name) for c in checks), name
    for enc in ("sp", "word", "trigram", "blstm-sp"):
        for amp in ("off", "bf16"):
            assert any(c.startswith(f"train {enc} amp {amp},") for c in checks), (enc, amp)
    own = [c for c in checks if "device's default precision" in c]  # informative: no tolerance
    assert len(own) == 2 and {status[c] for c in own} == {"info"}
    assert {status[c] for c in checks if not c.startswith("IVF") and c not in own} == {"ok"}
    assert all(status[c] in ("ok", "skip") for c in checks if c.startswith("IVF"))
    assert sum(c.startswith("figure:") for c in status) == 4
