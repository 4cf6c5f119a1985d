"""The staged run's work directory cannot mix runs: a resume must read the inputs of the run it continues
(byte for byte), stage outputs that do not match their checksums are computed again, damaged records
are one-line errors, one run at a time holds a directory, and Ray failures are one-line errors."""

import gzip
import io
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import toy_corpus, write_lines

from bitextmine.config import EmbeddingsConfig, MineConfig, PipelineConfig
from bitextmine.errors import BitextmineError, ConfigError
from bitextmine.pipeline import mine_files

CHUNK = 10


@pytest.fixture()
def files(tmp_path):
    """Two toy sides of 40 lines (4 chunks each), and a work directory path."""
    src, tgt = toy_corpus(n=40, seed=1)
    return write_lines(tmp_path / "s.txt", src), write_lines(tmp_path / "t.txt", tgt), str(tmp_path / "w")


def _mine(src, tgt, model, work="", resume=False, **kw) -> tuple[str, object]:
    out = io.StringIO()
    kw.setdefault("config", MineConfig(threshold=0, min_z=0))
    stats = mine_files(src, tgt, out, model=model, ids=True, **kw,
                       pipeline=PipelineConfig(work_dir=work, resume=resume, chunk_lines=CHUNK))
    return out.getvalue(), stats


def _same_size_other_bytes(path: str, at: int) -> None:
    """Change bytes of ``path`` in place, keeping its size and modification time."""
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(8)
        f.seek(at)
        f.write(bytes(x ^ 0x5A for x in b))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


# --- the inputs of a resumed run ---------------------------------------------------------------------------

def test_resume_with_another_input_file_is_refused(files, toy_model, tmp_path):
    s, t, w = files
    _mine(s, t, toy_model, w)
    other = write_lines(tmp_path / "s2.txt", toy_corpus(n=40, seed=2)[0])
    with pytest.raises(ConfigError, match=r"source text was .*s\.txt, now .*s2\.txt"):
        _mine(other, t, toy_model, w, resume=True)


def test_resume_with_same_size_and_time_but_other_bytes_is_refused(files, toy_model):
    s, t, w = files
    want, _ = _mine(s, t, toy_model, w)
    _same_size_other_bytes(t, 5)
    with pytest.raises(ConfigError, match=r"t\.txt: changed since .*same size, other bytes"):
        _mine(s, t, toy_model, w, resume=True)


def test_resume_with_the_same_inputs_gives_the_same_bytes(files, toy_model):
    s, t, w = files
    want, _ = _mine(s, t, toy_model, w)
    got, stats = _mine(s, t, toy_model, w, resume=True)
    assert got == want and want.count("\n") > 10
    assert not any(v for k, v in stats.info["computed"].items() if k != "texts")


def _raw(path, x: np.ndarray) -> str:
    x.astype(np.float32).tofile(path)
    return str(path)


def test_changed_external_embeddings_refuse_to_resume(files, toy_model, tmp_path):
    """A raw file rewritten with other rows of the same size would mix into the chunks imported before."""
    from bitextmine.corpus import read_lines
    from bitextmine.encoding import encode

    s, t, w = files
    xs = _raw(tmp_path / "s.f32", encode(read_lines(s), toy_model))
    xt = _raw(tmp_path / "t.f32", encode(read_lines(t), toy_model))
    kw = dict(src_emb=xs, tgt_emb=xt, embeddings=EmbeddingsConfig(format="raw", dim=32))
    _mine(s, t, None, w, **kw)
    _same_size_other_bytes(xt, 4 * 32 * 7)
    with pytest.raises(ConfigError, match=r"t\.f32: changed since .*same size, other bytes"):
        _mine(s, t, None, w, resume=True, **kw)


def test_resume_without_a_work_directory_is_refused(files, toy_model):
    s, t, _ = files
    with pytest.raises(ConfigError, match="--resume needs --work-dir"):
        _mine(s, t, toy_model, resume=True)


def test_standard_input_cannot_be_resumed(files, toy_model, monkeypatch):
    s, t, w = files
    with open(s, "rb") as f:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(f.read())))
    want, _ = _mine(s, t, toy_model)
    got, _ = _mine("-", t, toy_model, w)  # a fresh run from standard input works
    assert got == want
    with pytest.raises(ConfigError, match=r"standard input \('-'\) cannot be resumed"):
        _mine("-", t, toy_model, w, resume=True)
    with pytest.raises(ConfigError, match=r"source text was standard input, now .*s\.txt"):
        _mine(s, t, toy_model, w, resume=True)


def test_sides_of_different_dimensions_are_a_one_line_error(files, tmp_path):
    s, t, _ = files
    rng = np.random.default_rng(0)
    np.save(tmp_path / "s.npy", rng.normal(size=(40, 32)).astype(np.float32))
    np.save(tmp_path / "t.npy", rng.normal(size=(40, 16)).astype(np.float32))
    with pytest.raises(ConfigError, match=r"s\.npy have 32 values per row, .*t\.npy 16"):
        _mine(s, t, None, src_emb=str(tmp_path / "s.npy"), tgt_emb=str(tmp_path / "t.npy"))


# --- what the stages wrote --------------------------------------------------------------------------------

@pytest.mark.parametrize("name, stage, truncate", [
    ("src/emb-000001.npy", "encode", False),  # same size, other bytes: loads as well as before
    ("knn/cell-000001-000002.npz", "knn", False),
    ("knn/cell-000001-000002.npz", "knn", True),  # not a zip file any more
    ("tgt/plan.json", "plan", False),
])
def test_a_damaged_stage_output_is_computed_again(files, toy_model, name, stage, truncate):
    s, t, w = files
    want, _ = _mine(s, t, toy_model, w)
    path = os.path.join(w, name)
    if truncate:
        os.truncate(path, os.path.getsize(path) // 2)
    else:
        _same_size_other_bytes(path, os.path.getsize(path) - 40)
    got, stats = _mine(s, t, toy_model, w, resume=True)
    assert got == want
    if stage != "plan":
        assert stats.info["computed"][stage] == 1


def test_a_damaged_chunk_of_a_compressed_input_is_written_again(files, toy_model, tmp_path):
    s, t, w = files
    with open(s, "rb") as f, gzip.open(tmp_path / "s.txt.gz", "wb") as g:
        g.write(f.read())
    sz = str(tmp_path / "s.txt.gz")
    want, _ = _mine(sz, t, toy_model, w)
    _same_size_other_bytes(os.path.join(w, "src", "chunk-000002.txt"), 3)
    got, _ = _mine(sz, t, toy_model, w, resume=True)
    assert got == want


@pytest.mark.parametrize("damage", ["truncate", "same size"])
def test_a_damaged_run_record_is_a_one_line_error(files, toy_model, damage):
    s, t, w = files
    _mine(s, t, toy_model, w)
    run = os.path.join(w, "run.json")
    if damage == "truncate":
        with open(run, "r+b") as f:
            f.truncate(os.path.getsize(run) // 2)
    else:  # still JSON, with another k
        text = open(run, encoding="utf-8").read()
        assert '"k": 4' in text
        open(run, "w", encoding="utf-8").write(text.replace('"k": 4', '"k": 8'))
        json.loads(open(run, encoding="utf-8").read())
    with pytest.raises(ConfigError, match=r"run\.json: damaged .*delete the work directory"):
        _mine(s, t, toy_model, w, resume=True)


def test_a_directory_of_unknown_files_is_not_used(files, toy_model):
    s, t, w = files
    os.makedirs(os.path.join(w, "src"))
    open(os.path.join(w, "src", "emb-000000.npy"), "wb").close()
    with pytest.raises(ConfigError, match="not empty and no run.json"):
        _mine(s, t, toy_model, w)


# --- one run at a time -------------------------------------------------------------------------------------

def test_a_second_run_on_a_directory_in_use_is_refused(files, toy_model):
    from bitextmine.pipeline.workdir import Lock

    s, t, w = files
    os.makedirs(w)
    with Lock(w):
        with pytest.raises(ConfigError, match=rf"in use by another bitextmine run \(pid {os.getpid()}\)"):
            _mine(s, t, toy_model, w)
    assert _mine(s, t, toy_model, w)[0]  # released


def test_the_lock_of_a_killed_run_does_not_block(files, toy_model):
    s, t, w = files
    os.makedirs(w)
    code = ("import sys, time; from bitextmine.pipeline.workdir import Lock; Lock(sys.argv[1]).acquire(); "
            "print('locked', flush=True); time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", code, w], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert p.stdout.readline().strip() == "locked"
        with pytest.raises(ConfigError, match=rf"pid {p.pid}\)"):
            _mine(s, t, toy_model, w)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    got, _ = _mine(s, t, toy_model, w)
    assert got == _mine(s, t, toy_model)[0]


def test_workers_that_outlive_a_killed_run_do_not_hold_its_lock(files, toy_model):
    """A process forked while the lock is held (a worker) drops its copy of the lock: the run killed, the
    directory is free at once though the worker still runs. The worker names itself once it runs (its copy is
    closed before fork returns in it), so a slow start on a loaded machine cannot look like a held lock."""
    s, t, w = files
    os.makedirs(w)
    code = ("import os, sys, time; from bitextmine.pipeline.workdir import Lock; Lock(sys.argv[1]).acquire(); "
            "child = os.fork()\n"
            "if child == 0:\n    print(os.getpid(), flush=True); time.sleep(60); os._exit(0)\n"
            "time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", code, w], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    child = int(p.stdout.readline())
    try:
        p.send_signal(signal.SIGKILL)
        p.wait()
        os.kill(child, 0)  # the forked worker still runs
        got, _ = _mine(s, t, toy_model, w)
        assert got == _mine(s, t, toy_model)[0]
    finally:
        os.kill(child, signal.SIGKILL)


# --- Ray ----------------------------------------------------------------------------------------------------

def test_a_ray_address_where_nothing_answers_is_a_one_line_error():
    pytest.importorskip("ray", reason="the ray extra: pip install 'bitextmine[ray]'")
    from bitextmine.pipeline.engine import make_engine

    t0 = time.monotonic()
    with pytest.raises(ConfigError, match=r"--ray-address 127\.0\.0\.1:1: nothing answers there"):
        make_engine("ray", "127.0.0.1:1")
    assert time.monotonic() - t0 < 30



def test_a_ray_address_other_than_the_cluster_already_joined_is_refused(monkeypatch):
    ray = pytest.importorskip("ray", reason="the ray extra: pip install 'bitextmine[ray]'")
    from types import SimpleNamespace

    from bitextmine.pipeline.engine import RayEngine

    monkeypatch.setattr(ray, "is_initialized", lambda: True)  # a caller that ran ray.init itself
    monkeypatch.setattr(ray, "get_runtime_context", lambda: SimpleNamespace(gcs_address="127.0.0.1:6379"))
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    with pytest.raises(ConfigError, match=r"--ray-address 127\.0\.0\.1:1: this process is already connected to the "
                                          r"Ray cluster at 127\.0\.0\.1:6379"):
        RayEngine("127.0.0.1:1")
    for same in ("127.0.0.1:6379", "localhost:6379", "auto", None):
        assert not RayEngine(same).owned

class _FakeRay:
    """What the engine sees of Ray when the driver's raylet dies: ray.get raises LocalRayletDiedError."""

    def __init__(self, ray):
        self.exceptions = ray.exceptions
        self.cancelled = 0

    def remote(self, fn):
        class Remote:
            def options(self, **kw):
                return self

            def remote(self, *args):
                return object()

        return Remote()

    def wait(self, pending, num_returns):
        return pending[:1], pending[1:]

    def get(self, refs):
        raise self.exceptions.LocalRayletDiedError()

    def cancel(self, ref):
        self.cancelled += 1
        raise self.exceptions.RaySystemError("gone")


def test_a_dead_raylet_is_a_one_line_error():
    ray = pytest.importorskip("ray", reason="the ray extra: pip install 'bitextmine[ray]'")
    from bitextmine.errors import EngineError
    from bitextmine.pipeline.engine import RayEngine

    engine = RayEngine.__new__(RayEngine)
    engine.ray, engine.gpus, engine.owned = _FakeRay(ray), 0, False
    with pytest.raises(EngineError, match=r"Ray task hash_chunk failed: LocalRayletDiedError") as e:
        engine.map(_named("hash_chunk"), [(1,), (2,)])
    assert "\n" not in str(e.value) and engine.ray.cancelled == 1


def _named(name: str, kill: bool = False):
    """A task function called ``name`` (defined here: Ray ships it by value); ``kill``: it kills its worker."""
    def fn(*args):
        if kill:
            os.kill(os.getpid(), signal.SIGKILL)
    fn.__name__ = name
    return fn


@pytest.mark.slow
def test_a_ray_task_killed_twice_is_a_one_line_error():
    ray = pytest.importorskip("ray", reason="the ray extra: pip install 'bitextmine[ray]'")
    from bitextmine.errors import EngineError
    from bitextmine.pipeline.engine import RayEngine

    assert not ray.is_initialized()
    engine = RayEngine(num_cpus=1)
    try:
        with pytest.raises(EngineError, match=r"Ray task import_chunk failed: WorkerCrashedError") as e:
            engine.map(_named("import_chunk", kill=True), [(1,)])
        assert "\n" not in str(e.value)
        assert isinstance(e.value, BitextmineError)
    finally:
        engine.close()


def test_a_pipe_is_mined_as_its_file_and_cannot_be_resumed(files, toy_model, tmp_path):
    import threading

    s, t, w = files
    want, _ = _mine(s, t, toy_model)
    for run in ("fresh", "resume"):
        fifo = str(tmp_path / f"pipe-{run}")
        os.mkfifo(fifo)  # as a shell's <(...) gives: read once, copied into the work directory as it is read
        data = open(s, "rb").read()
        thread = threading.Thread(target=lambda: open(fifo, "wb").write(data), daemon=True)
        thread.start()
        if run == "fresh":
            got, _ = _mine(fifo, t, toy_model, w)
            assert got == want
        else:
            with pytest.raises(ConfigError, match="pipe-resume: a pipe cannot be resumed"):
                _mine(fifo, t, toy_model, w, resume=True)
            open(fifo, "rb").read()  # let the writer finish
        thread.join(5)


@pytest.mark.parametrize("stage_seen, how", [("dedup", "rewritten"), ("encode", "shuffled"), ("margins", "replaced")])
def test_an_input_changed_while_the_run_reads_it_stops_the_run(files, toy_model, stage_seen, how):
    """Whatever stage the change falls in, the run stops with one error naming the file, and nothing is written
    (a shard replaced, a text rewritten or shuffled mid-run printed unrelated pairs, old scores or an IndexError)."""
    s, t, _ = files
    lines = open(s, encoding="utf-8").read().splitlines()
    changed = []

    def change(stage: str, done: int, total: int) -> None:
        if changed or stage != stage_seen:
            return
        changed.append(stage)
        if how == "replaced":
            os.replace(write_lines(s + ".new", lines[::-1]), s)
        else:
            new = lines[::-1] if how == "shuffled" else [x + " x" for x in lines]
            time.sleep(0.05)  # past the file system's clock step: the time changes with the bytes
            write_lines(s, new)

    out = io.StringIO()
    with pytest.raises(ConfigError, match=f"^{re.escape(s)}: changed while the run read it"):
        mine_files(s, t, out, model=toy_model, ids=True, config=MineConfig(threshold=0, min_z=0),
                   pipeline=PipelineConfig(chunk_lines=CHUNK), progress=change)
    assert changed and out.getvalue() == ""


def test_a_short_write_in_the_work_directory_names_the_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    """numpy's short write on a full disk is an OSError with no file and no error number."""
    from bitextmine.pipeline.workdir import save_arrays, save_npy

    def short(*a, **kw):
        raise OSError("153600 requested and 17376 written")

    monkeypatch.setattr(np, "save", short)
    with pytest.raises(OSError) as e:
        save_npy(str(tmp_path / "a.npy"), np.zeros(3))
    assert e.value.filename.startswith(str(tmp_path / "a.npy.tmp-")) and "is the disk full?" in e.value.strerror
    assert os.listdir(tmp_path) == []
    monkeypatch.setattr(np, "savez", short)  # save_arrays writes through the same file
    with pytest.raises(OSError) as e:
        save_arrays(str(tmp_path / "a.npz"), a=np.zeros(3))
    assert e.value.filename.startswith(str(tmp_path / "a.npz.tmp-")) and "is the disk full?" in e.value.strerror
    assert os.listdir(tmp_path) == []
