"""The work directory of a staged mining run: what each stage wrote, and whether a run may resume.

Layout (every file written under a temporary name and renamed, so a file that exists is whole)::

    run.json                      format version, settings, the inputs' fingerprints
    lock                          held (flock) by the run using the directory; names its pid
    src/plan.json, tgt/plan.json  line-exact chunks of each input
    src/chunk-000000.txt          (compressed inputs only) the chunk's decompressed bytes
    src/hash-000000.npz ...       stage outputs, one file per chunk, block or cell
    src/hash-000000.npz.sha256    the sha256 of each stage output, written after it

A stage's output is computed again unless it exists and its bytes match the checksum written beside it
(a stop between the two, or a damaged file, leaves it to be computed again). JSON records (run.json,
plan.json) carry their own checksum. ``run.json`` records the settings that change any result and each
input's fingerprint (:func:`input_record`); resuming with another or a changed input is refused, naming
it. A changed setting is refused too, unless the run names the files that depend on it (``begin``'s
``redo``): those are removed and computed again, the rest (chunks, embeddings, a trained index) reused,
so one work directory serves runs at several thresholds, nprobe values or margins. :class:`Lock` keeps
a second run out of a directory in use.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from contextlib import contextmanager, suppress

import numpy as np

from ..errors import ConfigError, ModelFormatError, is_version

FORMAT_VERSION = 2
RUN_FILE = "run.json"
LOCK_FILE = "lock"
SUM = ".sha256"  # suffix of a stage output's checksum file
_READ = 1 << 20


def atomic_path(path: str) -> str:
    """A temporary name beside ``path`` for this process (rename it onto ``path`` when written)."""
    return f"{path}.tmp-{os.getpid()}"


def file_sha256(path: str) -> str:
    """The sha256 (hex) of every byte of the file ``path``."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_READ), b""):
            h.update(block)
    return h.hexdigest()


def commit(tmp: str, path: str) -> None:
    """Rename the written temporary file ``tmp`` onto ``path``, then write its checksum beside it
    (``path`` + :data:`SUM`): an output without its checksum is computed again."""
    digest = file_sha256(tmp)
    if os.path.exists(path + SUM):
        os.remove(path + SUM)
    os.replace(tmp, path)
    sum_tmp = atomic_path(path + SUM)
    with open(sum_tmp, "w", encoding="ascii") as f:
        f.write(digest + "\n")
    os.replace(sum_tmp, path + SUM)


def _body_sha256(data: dict) -> str:
    body = {k: v for k, v in data.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def save_json(path: str, data: dict) -> None:
    """Write the record ``data`` as JSON to ``path`` atomically, with the checksum of its contents ("sha256")."""
    tmp = atomic_path(path)
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({**data, "sha256": _body_sha256(data)}, f, ensure_ascii=False)
    os.replace(tmp, path)


def load_json(path: str, fix: str = "delete the work directory and start again") -> dict:
    """The record :func:`save_json` wrote to ``path`` (without its "sha256"); ConfigError naming the file and
    ``fix`` (what to do) when it does not parse or does not match its checksum."""
    data = _parse_json(path, fix)
    if data.get("sha256") != _body_sha256(data):
        raise ConfigError(f"{path}: damaged (its contents do not match their checksum); {fix}")
    return {k: v for k, v in data.items() if k != "sha256"}


def _parse_json(path: str, fix: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: damaged (not JSON: {e}); {fix}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: damaged (not a JSON object); {fix}")
    return data


def save_arrays(path: str, **arrays: np.ndarray) -> None:
    """Write named arrays to ``path`` (.npz, uncompressed) atomically, with its checksum."""
    tmp = atomic_path(path)
    with writing(tmp) as f:
        np.savez(f, **arrays)
    commit(tmp, path)


def load_arrays(path: str) -> dict[str, np.ndarray]:
    """The arrays of the .npz ``path``; ConfigError naming the file when it cannot be read."""
    import zipfile

    try:
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise ConfigError(f"{path}: damaged ({e}); delete it and resume to compute it again") from None


@contextmanager
def writing(tmp: str):
    """The binary file ``tmp`` open for writing; a write that fails removes it and is raised naming it (numpy's
    short writes on a full disk name no file and no error number)."""
    import errno

    try:
        with open(tmp, "wb") as f:
            yield f
    except OSError as e:
        with suppress(OSError):
            os.remove(tmp)
        if e.filename is None:
            raise OSError(e.errno or errno.EIO, e.strerror or f"{e} (is the disk full?)", tmp) from None
        raise


def save_npy(path: str, a: np.ndarray) -> None:
    """Write one array to ``path`` (.npy) atomically, with its checksum."""
    tmp = atomic_path(path)
    with writing(tmp) as f:
        np.save(f, a)
    commit(tmp, path)


def verifies(path: str) -> bool:
    """Whether a stage output is whole: JSON records match their own checksum, other files the checksum
    written beside them (reads the whole file)."""
    if not os.path.exists(path):
        return False
    if path.endswith(".json"):
        try:
            load_json(path)
            return True
        except (OSError, ConfigError):
            return False
    try:
        with open(path + SUM, encoding="ascii") as f:
            want = f.read().strip()
        return file_sha256(path) == want
    except (OSError, UnicodeDecodeError):
        return False


def input_files(path: str) -> list[str]:
    """The files an input names: a directory's (such as a chunked encoding), in name order; a glob of Parquet or
    JSONL shards: the files it matches; else the path itself (absolute when ``path`` is)."""
    from ..tabular import shards, table_kind

    if os.path.isdir(path):
        return [os.path.join(folder, name) for folder, _, files in sorted(os.walk(path)) for name in sorted(files)]
    if not os.path.exists(path) and table_kind(path):
        return [os.path.abspath(f) for f in shards(path)]
    return [path]


def input_record(path: str) -> dict:
    """The fingerprint of an input that a resume compares: {"path": absolute path, "size": bytes, "sha256":
    of every byte} (a directory, such as a chunked encoding: its files' sizes summed and their relative
    names and bytes hashed in name order; a glob of Parquet or JSONL shards: the files it matches, likewise);
    standard input ("-"): {"path": "-"}, which no resume matches; a pipe: its path, size and sha256 None.
    Reads the whole input, so any change of its bytes, size or place is detected (a file of the same path,
    size and time with other bytes too)."""
    if path == "-":
        return {"path": "-"}
    from ..corpus import read_once

    if read_once(path):  # a pipe: its bytes are read once, by the run
        return {"path": os.path.abspath(path), "size": None, "sha256": None}

    path = os.path.abspath(path)
    every = input_files(path)
    if every == [path]:
        return {"path": path, "size": os.path.getsize(path), "sha256": file_sha256(path)}
    base = path if os.path.isdir(path) else os.path.dirname(path)
    h, size = hashlib.sha256(), 0
    for full in every:
        size += os.path.getsize(full)
        h.update(f"{os.path.relpath(full, base)}\0{file_sha256(full)}\n".encode("utf-8", "surrogateescape"))
    return {"path": path, "size": size, "sha256": h.hexdigest()}


_LABELS = {"src": "source text", "tgt": "target text", "src_emb": "source embeddings (--src-emb)",
           "tgt_emb": "target embeddings (--tgt-emb)"}


def _check_inputs(root: str, old: dict, new: dict) -> None:
    """ConfigError naming the first input of ``new`` whose record differs from ``old``'s."""
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        label = _LABELS.get(key, key)
        where = {None: "none", "-": "standard input"}
        was = where.get(a and a["path"], a and a["path"])
        now = where.get(b and b["path"], b and b["path"])
        if was != now:
            raise ConfigError(f"{root}: cannot resume: its run's {label} was {was}, now {now}; "
                              "give the same inputs or start a new work directory")
        detail = (f"{a['size']} bytes, now {b['size']}" if a["size"] != b["size"]
                  else f"same size, other bytes: sha256 {a['sha256'][:12]}..., now {b['sha256'][:12]}...")
        raise ConfigError(f"{now}: changed since this work directory's run began ({detail}); "
                          "cannot resume: start a new work directory")


_HELD: set[int] = set()  # the descriptors of the work-directory locks this process holds


def _close_held_locks() -> None:
    """In a process just forked: close the copies of the parent's lock descriptors (closing a copy leaves the
    parent's flock lock held; the lock ends when the last copy is closed, so a worker that kept one would hold
    a killed run's directory until it ended)."""
    for fd in list(_HELD):
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_held_locks)


class Lock:
    """An exclusive lock on the work directory ``root`` (``fcntl.flock`` on its :data:`LOCK_FILE`, which names
    the holder's pid), so two runs cannot interleave; the kernel releases it when the holder ends, even by
    kill -9, so a killed run never blocks the next. :meth:`acquire` raises ConfigError naming the holder
    when another process holds it (not for the directory's lock held by this process: flock locks belong
    to an open file, so a second Lock on one directory is refused in one process too). A process forked while
    the lock is held (a worker) closes its copy of the lock's descriptor at once (:func:`_close_held_locks`):
    workers that outlive a killed run do not hold its lock."""

    def __init__(self, root: str):
        self.path = os.path.join(root, LOCK_FILE)
        self.fd: int | None = None

    def acquire(self) -> None:
        import fcntl

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise ConfigError(f"{os.path.dirname(self.path)}: in use by another bitextmine run (pid {holder}); "
                              "wait for it to end or use another work directory") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        _HELD.add(fd)

    def release(self) -> None:
        if self.fd is not None:
            _HELD.discard(self.fd)
            os.close(self.fd)  # releases the lock; the file stays (removing it would race the next holder)
            self.fd = None

    def __enter__(self) -> "Lock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class WorkDir:
    """A work directory: ``path(name)`` for a stage file, and the run's record (:data:`RUN_FILE`)."""

    def __init__(self, root: str):
        self.root = root
        if os.path.exists(root) and not os.path.isdir(root):
            raise ConfigError(f"--work-dir {root}: not a directory; expected a directory (new or of an earlier run)")
        try:
            os.makedirs(root, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"--work-dir {root}: cannot create it ({e.strerror or e})") from None
        if not os.access(root, os.W_OK | os.X_OK):
            raise ConfigError(f"--work-dir {root}: not writable; expected a directory this user can write to")

    def path(self, *parts: str) -> str:
        p = os.path.join(self.root, *parts)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    def begin(self, settings: dict, inputs: dict, resume: bool,
              redo: dict[str, tuple[str, ...]] | None = None) -> list[str]:
        """Start a run with ``settings`` (JSON-able; what changes a result) and ``inputs`` (name: an
        :func:`input_record` or None). Without ``resume`` the directory must hold no earlier run; with it, an
        input that differs from the earlier run's is refused, naming it, and so is a setting that differs,
        unless ``redo`` maps it to the glob patterns (relative paths) of the files that depend on it: those
        files are removed and the new settings recorded. Returns the changed settings' names (sorted)."""
        run = os.path.join(self.root, RUN_FILE)
        if os.path.exists(run):
            if not resume:
                raise ConfigError(f"{self.root}: holds an earlier run ({RUN_FILE}); pass --resume to continue it "
                                  "or choose an empty work directory")
            version = _parse_json(run, "delete the work directory and start again").get("format_version")
            if not is_version(version, (FORMAT_VERSION,)):
                raise ModelFormatError(f"{run}: format_version {version}; expected {FORMAT_VERSION} (another "
                                       "version of bitextmine made it): start a new work directory")
            old = load_json(run)
            _check_inputs(self.root, old["inputs"], inputs)
            before = old["settings"]
            changed = sorted(k for k in set(before) | set(settings) if before.get(k) != settings.get(k))
            for key in changed:
                if key not in (redo or {}):
                    raise ConfigError(f"{self.root}: cannot resume: {key} was {before.get(key)!r}, "
                                      f"now {settings.get(key)!r}")
            if changed:  # remove before recording the new settings: a stop in between leaves nothing stale
                self.remove(sorted({p for k in changed for p in redo[k]}))
                save_json(run, {**old, "settings": settings})
            return changed
        elif any(e.name != LOCK_FILE and not e.name.startswith(RUN_FILE + ".tmp-") for e in os.scandir(self.root)):
            # files without the record of the run that made them cannot be trusted by any run
            raise ConfigError(f"{self.root}: not empty and no {RUN_FILE}, so not a bitextmine work directory; "
                              "choose an empty or new work directory")
        save_json(run, {"format_version": FORMAT_VERSION, "settings": settings, "inputs": inputs})
        return []

    def remove(self, patterns: list[str]) -> None:
        """Remove the files whose paths relative to the root match any of the glob ``patterns``."""
        for folder, _, files in os.walk(self.root):
            for name in files:
                rel = os.path.relpath(os.path.join(folder, name), self.root).replace(os.sep, "/")
                if any(fnmatch.fnmatch(rel, p) for p in patterns):
                    os.remove(os.path.join(folder, name))
