"""Reading text and parallel corpora: plain or gzip files, or stdin, strictly UTF-8, one segment per line.

Lines are split on ``\\n`` only (a trailing ``\\r`` is removed), never on the other characters that
``str.splitlines`` treats as breaks, so line *i* of a file is always row *i* of what we return.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import sys
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterable, Iterator

import numpy as np

from .errors import CorpusError

GZIP_MAGIC = b"\x1f\x8b"
XZ_MAGIC = b"\xfd7zXZ\x00"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _name(path: str) -> str:
    return "<stdin>" if path == "-" else str(path)


def open_binary(path: str) -> BinaryIO:
    """Open ``path`` (``-`` = stdin) for binary reading, decompressing gzip, xz and zstd by their magic bytes."""
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
    head = raw.peek(6)[:6] if hasattr(raw, "peek") else b""
    if head[:2] == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if head[:6] == XZ_MAGIC:
        import lzma

        return lzma.LZMAFile(raw, mode="rb")  # type: ignore[return-value]
    if head[:4] == ZSTD_MAGIC:
        import io

        try:
            import zstandard
        except ImportError:
            from .errors import MissingDependencyError

            raise MissingDependencyError(f"{_name(path)}: zstd input needs zstandard: pip install zstandard") from None
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True))  # type: ignore
    return raw


def open_output(path: str, name: str | None = None) -> BinaryIO:
    """A binary stream writing ``path`` (``-`` = stdout), compressed by the extension of ``name``
    (default ``path``): .gz, .xz, .zst."""
    if path == "-":
        return sys.stdout.buffer
    try:
        raw = open(path, "wb")
    except OSError as e:
        raise CorpusError(f"{path}: cannot write ({e.strerror})") from None
    path = name or path
    if path.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="wb", mtime=0)  # type: ignore[return-value]
    if path.endswith(".xz"):
        import lzma

        return lzma.LZMAFile(raw, mode="wb")  # type: ignore[return-value]
    if path.endswith(".zst"):
        try:
            import zstandard
        except ImportError:
            from .errors import MissingDependencyError

            raise MissingDependencyError(f"{path}: zstd output needs zstandard: pip install zstandard") from None
        return zstandard.ZstdCompressor().stream_writer(raw, closefd=True)  # type: ignore[return-value]
    return raw


BLOCK_BYTES = 1 << 20  # bytes read at a time; blocks always end at a line end


def iter_blocks(path: str, *, hasher: "hashlib._Hash | None" = None,
                block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[bytes, int]]:
    r"""Yield (block, number of its first line) for ``path``: raw bytes, each block ending at a ``\n``
    (the last may not), a UTF-8 byte order mark at the start removed.

    ``hasher``, when given, is updated with the decompressed bytes. Raises CorpusError for a
    truncated or corrupt gzip stream, naming the line where the damage starts.
    """
    name = _name(path)
    f = open_binary(path)
    lineno = 1
    rest = b""
    bom_checked = False
    try:
        while True:
            try:
                data = f.read(block_bytes)
            except (EOFError, zlib.error, gzip.BadGzipFile) as e:
                damaged = lineno + rest.count(b"\n")
                raise CorpusError(f"{name} line {damaged}: corrupt or truncated gzip data ({e})") from None
            if hasher is not None:
                hasher.update(data)
            if not data:
                if not bom_checked and rest.startswith(b"\xef\xbb\xbf"):
                    rest = rest[3:]
                if rest:
                    yield rest, lineno
                return
            data = rest + data
            if not bom_checked and len(data) >= 3:
                bom_checked = True
                if data.startswith(b"\xef\xbb\xbf"):
                    data = data[3:]
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                rest = data
                continue
            block, rest = data[:cut], data[cut:]
            yield block, lineno
            lineno += block.count(b"\n")
    finally:
        if path != "-":
            f.close()


def decode_block(block: bytes, *, name: str, first_line: int) -> list[str]:
    r"""The lines of a block from :func:`iter_blocks`, without line ends (a ``\r`` before ``\n`` removed).

    Raises CorpusError naming the file, 1-based line and column for invalid UTF-8 or a NUL byte.
    """
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError as e:
        line_start = block.rfind(b"\n", 0, e.start) + 1
        lineno = first_line + block.count(b"\n", 0, e.start)
        raise CorpusError(
            f"{name} line {lineno}: invalid UTF-8 (byte 0x{block[e.start]:02x} at column {e.start - line_start + 1}); "
            "expected UTF-8 text"
        ) from None
    if "\x00" in text:
        lineno = first_line + text.count("\n", 0, text.index("\x00"))
        raise CorpusError(f"{name} line {lineno}: NUL byte; expected text, not binary data")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return lines


def iter_lines(path: str, *, hasher: "hashlib._Hash | None" = None) -> Iterator[str]:
    """Yield the lines of a UTF-8 text file without their line ends, streaming.

    ``hasher`` (e.g. ``hashlib.sha256()``), when given, is updated with the decompressed bytes.
    Raises CorpusError naming the file and 1-based line for invalid UTF-8, NUL bytes or a
    truncated/corrupt gzip stream.
    """
    name = _name(path)
    for block, first_line in iter_blocks(path, hasher=hasher):
        yield from decode_block(block, name=name, first_line=first_line)


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
    out_s, out_t, _, stats = clean_pairs_indexed(src, tgt)
    return out_s, out_t, stats


def clean_pairs_indexed(src: Iterable[str], tgt: Iterable[str]) -> tuple[list[str], list[str], np.ndarray, CleanStats]:
    """:func:`clean_pairs`, also returning the input positions of the kept pairs (int64 (kept,))."""
    stats = CleanStats()
    seen: set[tuple[str, str]] = set()
    out_s: list[str] = []
    out_t: list[str] = []
    kept: list[int] = []
    for i, (s, t) in enumerate(zip(src, tgt)):
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
            kept.append(i)
    stats.kept = len(out_s)
    return out_s, out_t, np.asarray(kept, np.int64), stats


@dataclass(frozen=True)
class CorpusSpec:
    """One training corpus: two aligned files, or a TSV with 1-based source/target columns."""

    src: str | None = None
    tgt: str | None = None
    tsv: str | None = None
    scol: int = 1
    tcol: int = 2
    group: str = ""  # sampling group (language pair); empty: :meth:`group_name` derives it from the file name

    def read(self) -> tuple[list[str], list[str]]:
        if self.tsv is not None:
            return read_tsv(self.tsv, scol=self.scol, tcol=self.tcol)
        assert self.src is not None and self.tgt is not None
        return read_parallel(self.src, self.tgt)

    def __str__(self) -> str:
        return self.tsv if self.tsv is not None else f"{self.src} + {self.tgt}"

    def group_name(self) -> str:
        """The corpus's sampling group: ``group`` if set, else the language suffix of the target file
        (``train.de.gz`` and ``en-de.de`` -> ``de``), else the TSV file's name."""
        if self.group:
            return self.group
        if self.tsv is not None:
            return os.path.basename(self.tsv)
        name = os.path.basename(str(self.tgt))
        for ext in (".gz", ".xz", ".bz2"):
            name = name[: -len(ext)] if name.endswith(ext) else name
        return name.rsplit(".", 1)[-1] if "." in name else name

    def describe(self) -> str:
        """The corpus by its files' names and parent folders, without the rest of the path."""
        def short(p: str) -> str:
            return os.path.join(os.path.basename(os.path.dirname(os.path.abspath(p))), os.path.basename(p))

        if self.tsv is not None:
            return f"{short(self.tsv)} (columns {self.scol}, {self.tcol})"
        return f"{short(str(self.src))} + {short(str(self.tgt))}"


def load_corpora(specs: Iterable[CorpusSpec], extra: Iterable[tuple[str, list[str], list[str]]] = ()
                 ) -> tuple[list[str], list[str], CleanStats]:
    """Read and concatenate every corpus, and the (name, src, tgt) pairs of ``extra``, then
    :func:`clean_pairs` the whole. Raises on an empty result."""
    src, tgt, _, _, stats = load_grouped_corpora(specs, extra)
    return src, tgt, stats


def load_grouped_corpora(specs: Iterable[CorpusSpec], extra: Iterable[tuple[str, list[str], list[str]]] = ()
                         ) -> tuple[list[str], list[str], np.ndarray, list[str], CleanStats]:
    """:func:`load_corpora`, also returning each kept pair's sampling group: (src, tgt, groups int64
    (n,) indexing group_names, group_names, stats). ``extra`` pairs form the group of their name;
    a corpus's group is :meth:`CorpusSpec.group_name`."""
    src: list[str] = []
    tgt: list[str] = []
    names, sizes, group_names = [], [], []
    for name, s, t in extra:
        src.extend(s)
        tgt.extend(t)
        names.append(name)
        sizes.append((name, len(s)))
    for spec in specs:
        s, t = spec.read()
        if not s:
            raise CorpusError(f"{spec}: empty corpus; expected at least one line-aligned pair")
        src.extend(s)
        tgt.extend(t)
        names.append(str(spec))
        sizes.append((spec.group_name(), len(s)))
    if not names:
        raise CorpusError("no training corpus given; expected --src F --tgt F, --tsv F or --sts-pairs F")
    for g, _ in sizes:
        if g not in group_names:
            group_names.append(g)
    per_line = np.repeat(np.array([group_names.index(g) for g, _ in sizes], np.int64), [n for _, n in sizes])
    src, tgt, kept, stats = clean_pairs_indexed(src, tgt)
    if not src:
        raise CorpusError(f"{', '.join(names)}: no usable pairs left after cleaning ({stats.summary()})")
    return src, tgt, per_line[kept], group_names, stats

