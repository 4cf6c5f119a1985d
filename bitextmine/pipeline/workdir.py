"""The work directory of a staged mining run: what each stage wrote, and whether a run may resume.

Layout (every file written under a temporary name and renamed, so a file that exists is whole)::

    run.json                      format version, settings, the inputs' fingerprints
    src/plan.json, tgt/plan.json  line-exact chunks of each input
    src/chunk-000000.txt          (compressed inputs only) the chunk's decompressed bytes
    src/hash-000000.npy ...       stage outputs, one file per chunk, block or cell

A stage's output that exists and loads is not computed again. ``run.json`` records the settings that
change any result and each input's size, modification time and sha256; resuming with a changed input is
refused, naming it. A changed setting is refused too, unless the run names the files that depend on it
(``begin``'s ``redo``): those are removed and computed again, the rest (chunks, embeddings, a trained
index) reused, so one work directory serves runs at several thresholds, nprobe values or margins.
"""

from __future__ import annotations

import fnmatch
import json
import os
from typing import Any

import numpy as np

from ..errors import ConfigError, ModelFormatError

FORMAT_VERSION = 1
RUN_FILE = "run.json"


def atomic_path(path: str) -> str:
    """A temporary name beside ``path`` for this process (rename it onto ``path`` when written)."""
    return f"{path}.tmp-{os.getpid()}"


def save_json(path: str, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically."""
    tmp = atomic_path(path)
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
    os.replace(tmp, path)


def load_json(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def save_arrays(path: str, **arrays: np.ndarray) -> None:
    """Write named arrays to ``path`` (.npz, uncompressed) atomically."""
    tmp = atomic_path(path)
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)


def load_arrays(path: str) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def save_npy(path: str, a: np.ndarray) -> None:
    """Write one array to ``path`` (.npy) atomically."""
    tmp = atomic_path(path)
    with open(tmp, "wb") as f:
        np.save(f, a)
    os.replace(tmp, path)


def verifies(path: str) -> bool:
    """Whether a stage output exists and loads (.npy and .npz: header and size; .json: parses)."""
    if not os.path.exists(path):
        return False
    try:
        if path.endswith(".npy"):
            np.load(path, mmap_mode="r")
        elif path.endswith(".npz"):
            with np.load(path) as z:
                for k in z.files:
                    z[k]
        elif path.endswith(".json"):
            load_json(path)
        return True
    except (OSError, ValueError, EOFError):
        return False


def input_fingerprint(path: str, sha256: str) -> dict:
    st = os.stat(path)
    return {"path": os.path.abspath(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256}


def input_changed(fp: dict, checksum) -> bool:
    """Whether the file of fingerprint ``fp`` changed since (a new size, or a new time and other bytes;
    ``checksum(path)`` gives the sha256 when only the time differs)."""
    if fp["path"] == "-":
        return True  # standard input cannot be read again
    try:
        st = os.stat(fp["path"])
    except OSError:
        return True
    if st.st_size != fp["size"]:
        return True
    return st.st_mtime_ns != fp["mtime_ns"] and checksum(fp["path"]) != fp["sha256"]


class WorkDir:
    """A work directory: ``path(name)`` for a stage file, and the run's record (:data:`RUN_FILE`)."""

    def __init__(self, root: str):
        self.root = root
        os.makedirs(root, exist_ok=True)

    def path(self, *parts: str) -> str:
        p = os.path.join(self.root, *parts)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    def begin(self, settings: dict, resume: bool, redo: dict[str, tuple[str, ...]] | None = None) -> list[str]:
        """Start a run with ``settings`` (JSON-able; what changes a result). Without ``resume`` the directory
        must hold no earlier run; with it, a setting that differs from the earlier run's is refused unless
        ``redo`` maps it to the glob patterns (relative paths) of the files that depend on it: those files are
        removed and the new settings recorded. Returns the changed settings' names (sorted)."""
        run = os.path.join(self.root, RUN_FILE)
        if os.path.exists(run):
            if not resume:
                raise ConfigError(f"{self.root}: holds an earlier run ({RUN_FILE}); pass --resume to continue it "
                                  "or choose an empty work directory")
            old = load_json(run)
            if old.get("format_version") != FORMAT_VERSION:
                raise ModelFormatError(f"{run}: format_version {old.get('format_version')}; expected {FORMAT_VERSION}")
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
        elif resume and any(os.scandir(self.root)):
            raise ConfigError(f"{self.root}: no {RUN_FILE}; not a bitextmine work directory")
        save_json(run, {"format_version": FORMAT_VERSION, "settings": settings})
        return []

    def remove(self, patterns: list[str]) -> None:
        """Remove the files whose paths relative to the root match any of the glob ``patterns``."""
        for folder, _, files in os.walk(self.root):
            for name in files:
                rel = os.path.relpath(os.path.join(folder, name), self.root).replace(os.sep, "/")
                if any(fnmatch.fnmatch(rel, p) for p in patterns):
                    os.remove(os.path.join(folder, name))
