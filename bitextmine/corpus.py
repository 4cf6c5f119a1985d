"""Reading text and parallel corpora: plain or gzip files, or stdin, strictly UTF-8, one segment per line.

Lines are split on ``\\n`` only (a trailing ``\\r`` is removed), never on the other characters that
``str.splitlines`` treats as breaks, so line *i* of a file is always row *i* of what we return.
"""

from __future__ import annotations

import gzip
import hashlib
import sys
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterable, Iterator

from .errors import CorpusError

GZIP_MAGIC = b"\x1f\x8b"


def _name(path: str) -> str:
    return "<stdin>" if path == "-" else str(path)


def open_binary(path: str) -> BinaryIO:
    """Open ``path`` (``-`` = stdin) for binary reading, decompressing gzip by its magic bytes."""
    if path == "-":
        raw: BinaryIO = sys.stdin.buffer
    else:
        try:
            raw = open(path, "rb")
        except FileNotFoundError:
            raise CorpusError(f"{path}: no such file; expected a readable text file") from None
        except IsADirectoryError:
            raise CorpusError(f"{path}: is a directory; expected a text file") from None
        except OSError as e:
            raise CorpusError(f"{path}: cannot open ({e.strerror})") from None
    head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
    if head == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def iter_lines(path: str, *, hasher: "hashlib._Hash | None" = None) -> Iterator[str]:
    """Yield the lines of a UTF-8 text file without their line ends, streaming.

    ``hasher`` (e.g. ``hashlib.sha256()``), when given, is updated with the decompressed bytes.
    Raises CorpusError naming the file and 1-based line for invalid UTF-8, NUL bytes or a
    truncated/corrupt gzip stream.
    """
    name = _name(path)
    f = open_binary(path)
    lineno = 0
    try:
        for raw in f:
            lineno += 1
            if hasher is not None:
                hasher.update(raw)
            if raw.endswith(b"\n"):
                raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # UTF-8 byte order mark
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise CorpusError(
                    f"{name} line {lineno}: invalid UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1}); "
                    "expected UTF-8 text"
                ) from None
            if "\x00" in line:
                raise CorpusError(f"{name} line {lineno}: NUL byte; expected text, not binary data")
            yield line
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise CorpusError(f"{name} line {lineno + 1}: corrupt or truncated gzip data ({e})") from None
    finally:
        if path != "-":
            f.close()


def read_lines(path: str) -> list[str]:
    """All lines of ``path`` as a list of str (see :func:`iter_lines`)."""
    return list(iter_lines(path))


def file_checksum(path: str) -> str:
    """sha256 hex digest of the decompressed bytes of ``path``."""
    h = hashlib.sha256()
    f = open_binary(path)
    try:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise CorpusError(f"{_name(path)}: corrupt or truncated gzip data ({e})") from None
    finally:
        if path != "-":
            f.close()
    return h.hexdigest()


def read_parallel(src_path: str, tgt_path: str) -> tuple[list[str], list[str]]:
    """Read two line-aligned files. Returns (src, tgt) lists of equal length.

    Raises CorpusError when the line counts differ, naming the first line without a partner.
    """
    src = read_lines(src_path)
    tgt = read_lines(tgt_path)
    if len(src) != len(tgt):
        short, long_ = (src_path, tgt_path) if len(src) < len(tgt) else (tgt_path, src_path)
        n = min(len(src), len(tgt))
        raise CorpusError(
            f"{long_} line {n + 1}: no partner line in {short}, which has {n} lines "
            f"(the other has {max(len(src), len(tgt))}); expected line-aligned files"
        )
    return src, tgt


def parse_tsv_line(line: str, *, name: str, lineno: int, scol: int, tcol: int) -> tuple[str, str]:
    """Return the (source, target) columns (1-based ``scol``/``tcol``) of one TSV line."""
    cols = line.split("\t")
    need = max(scol, tcol)
    if len(cols) < need:
        raise CorpusError(
            f"{name} line {lineno}: {len(cols)} tab-separated column(s); expected at least {need} "
            f"(source column {scol}, target column {tcol})"
        )
    return cols[scol - 1], cols[tcol - 1]


def read_tsv(path: str, *, scol: int = 1, tcol: int = 2) -> tuple[list[str], list[str]]:
    """Read a TSV of parallel sentences; returns (src, tgt) lists from 1-based columns scol/tcol."""
    src: list[str] = []
    tgt: list[str] = []
    name = _name(path)
    for i, line in enumerate(iter_lines(path), 1):
        s, t = parse_tsv_line(line, name=name, lineno=i, scol=scol, tcol=tcol)
        src.append(s)
        tgt.append(t)
    return src, tgt


@dataclass
class CleanStats:
    """What :func:`clean_pairs` removed; ``read == kept + empty + identical + duplicate``."""

    read: int = 0
    kept: int = 0
    empty: int = 0
    identical: int = 0
    duplicate: int = 0

    def summary(self) -> str:
        return (
            f"{self.read} pairs read, {self.kept} kept; dropped {self.empty} with an empty side, "
            f"{self.identical} with identical sides, {self.duplicate} exact duplicates"
        )


def clean_pairs(src: Iterable[str], tgt: Iterable[str]) -> tuple[list[str], list[str], CleanStats]:
    """Drop pairs with an empty side (after stripping), identical sides, and repeated pairs (first kept).

    Returns (src, tgt, stats) with the kept pairs in input order.
    """
    stats = CleanStats()
    seen: set[tuple[str, str]] = set()
    out_s: list[str] = []
    out_t: list[str] = []
    for s, t in zip(src, tgt):
        stats.read += 1
        s2, t2 = s.strip(), t.strip()
        if not s2 or not t2:
            stats.empty += 1
        elif s2 == t2:
            stats.identical += 1
        elif (s2, t2) in seen:
            stats.duplicate += 1
        else:
            seen.add((s2, t2))
            out_s.append(s2)
            out_t.append(t2)
    stats.kept = len(out_s)
    return out_s, out_t, stats


@dataclass(frozen=True)
class CorpusSpec:
    """One training corpus: two aligned files, or a TSV with 1-based source/target columns."""

    src: str | None = None
    tgt: str | None = None
    tsv: str | None = None
    scol: int = 1
    tcol: int = 2

    def read(self) -> tuple[list[str], list[str]]:
        if self.tsv is not None:
            return read_tsv(self.tsv, scol=self.scol, tcol=self.tcol)
        assert self.src is not None and self.tgt is not None
        return read_parallel(self.src, self.tgt)

    def __str__(self) -> str:
        return self.tsv if self.tsv is not None else f"{self.src} + {self.tgt}"


def load_corpora(specs: Iterable[CorpusSpec]) -> tuple[list[str], list[str], CleanStats]:
    """Read and concatenate every corpus, then :func:`clean_pairs` the whole. Raises on an empty result."""
    src: list[str] = []
    tgt: list[str] = []
    names = []
    for spec in specs:
        s, t = spec.read()
        if not s:
            raise CorpusError(f"{spec}: empty corpus; expected at least one line-aligned pair")
        src.extend(s)
        tgt.extend(t)
        names.append(str(spec))
    if not names:
        raise CorpusError("no training corpus given; expected --src F --tgt F or --tsv F")
    src, tgt, stats = clean_pairs(src, tgt)
    if not src:
        raise CorpusError(f"{', '.join(names)}: no usable pairs left after cleaning ({stats.summary()})")
    return src, tgt, stats

