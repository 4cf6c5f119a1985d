"""Typed errors. Library code raises these; the CLI prints one ``Error: ...`` line and exits non-zero."""


class BitextmineError(Exception):
    """Base class of every error this package raises on purpose."""


class CorpusError(BitextmineError):
    """Input text is unusable: unreadable file, bad encoding, misaligned sides, missing column."""


class ModelFormatError(BitextmineError):
    """A model directory or embedding file is missing parts, has another format version or does not match."""


class ConfigError(BitextmineError):
    """An option or combination of options is invalid."""


class MissingDependencyError(BitextmineError):
    """An optional dependency is not installed; the message names the pip command that fixes it."""


class EngineError(BitextmineError):
    """The engine running a staged run's tasks failed (a Ray worker or node died, a task could not run)."""


def is_version(found, versions) -> bool:
    """Whether ``found`` (a format_version read from a file) is one of ``versions``: an integer, not a bool or float
    that compares equal (true == 1, 2.0 == 2)."""
    return type(found) is int and found in versions


def is_finite_number(value) -> bool:
    """Whether a value read from a JSON file is a finite number (a boolean is not one, nor NaN or an infinity)."""
    import math

    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def regular_file(path: str) -> None:
    """ModelFormatError when ``path`` exists and is not a regular file (a named pipe would block the read for
    ever; a folder or device is no model file). A missing file is left to the reader to name."""
    import os
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode):
        raise ModelFormatError(f"{path}: not a regular file (a pipe, folder or device); expected a model file")
