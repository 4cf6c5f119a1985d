"""Reading text and parallel corpora: plain or gzip files, or stdin, strictly UTF-8, one segment per line.

Lines are split on ``\\n`` only (a trailing ``\\r`` is removed), never on the other characters that
``str.splitlines`` treats as breaks, so line *i* of a file is always row *i* of what we return.
"""

from __future__ import annotations

import gzip
import hashlib
import io
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
BZIP2_MAGIC = b"BZh"  # then the block size "1"-"9" and a block's or the end's magic (below)
_BZIP2_NEXT = (b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90")
COMPRESSED_SUFFIXES = (".gz", ".xz", ".zst", ".bz2")  # stripped from a file's name to find its language suffix


def without_compression(name: str) -> str:
    """``name`` without a compression suffix (``train.de.zst`` -> ``train.de``)."""
    return next((name[: -len(ext)] for ext in COMPRESSED_SUFFIXES if name.endswith(ext)), name)


def _first_bytes(raw: BinaryIO, n: int) -> bytes:
    """Up to ``n`` bytes of ``raw``, fewer only at its end (a pipe's reads return what has arrived)."""
    head = b""
    while len(head) < n:
        more = raw.read1(n - len(head))
        if not more:
            break
        head += more
    return head


class _Prefixed(io.RawIOBase):
    """``prefix`` (bytes already read) then the rest of the buffered stream ``raw``."""

    def __init__(self, prefix: bytes, raw: BinaryIO):
        self.prefix, self.raw = prefix, raw

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.prefix:
            n = min(len(b), len(self.prefix))
            b[:n], self.prefix = self.prefix[:n], self.prefix[n:]
            return n
        data = self.raw.read1(len(b))
        b[: len(data)] = data
        return len(data)


def _name(path: str) -> str:
    return "<stdin>" if path == "-" else str(path)


class DamagedInput(CorpusError):
    """A compressed input that is corrupt or ends before its end marker (a truncated download or copy).
    ``fmt``: gzip, xz or zstd; ``detail``: the decompressor's words. The readers that count lines
    (:func:`iter_blocks`, the filter's) raise a CorpusError naming the line where the damage starts."""

    def __init__(self, name: str, fmt: str, detail: str):
        self.name, self.fmt, self.detail = name, fmt, detail
        super().__init__(f"{name}: corrupt or truncated {fmt} data ({detail}); expected a complete {fmt} file")

    def at_line(self, line: int) -> CorpusError:
        """The error naming the first line not read whole: the lines before it were read."""
        return CorpusError(f"{self.name} line {line}: corrupt or truncated {self.fmt} data after {line - 1} "
                           f"complete lines ({self.detail}); expected a complete {self.fmt} file")


def read_once(path: str) -> bool:
    """Whether ``path`` can be read only once: ``-`` (standard input), a pipe (a shell's ``<(...)``, a FIFO) or
    another stream that is not a file. The commands that read an input more than once (``mine``: detecting the
    language, planning its chunks, reading them; ``score --margin``: embedding, then writing) copy such an input
    as they read it, as they copy standard input. A path that does not exist: False (the reader's own error)."""
    if path == "-":
        return True
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def open_binary(path: str) -> BinaryIO:
    """Open ``path`` (``-`` = stdin) for binary reading, decompressing gzip, xz and zstd by their magic bytes.

    A compressed stream that is corrupt or ends early (inside a gzip or xz stream or a zstd frame) raises
    :class:`DamagedInput` when the read reaches the damage: never fewer bytes without a word. bzip2 input
    is refused (CorpusError: decompress it first)."""
    name = _name(path)
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
    head = raw.peek(10)[:10] if hasattr(raw, "peek") else b""
    if 0 < len(head) < 10 and path == "-":  # a pipe gives what has arrived so far: wait for the first 10 bytes
        raw = io.BufferedReader(_Prefixed(_first_bytes(raw, 10), raw))
        head = raw.peek(10)[:10]
    if head[:2] == GZIP_MAGIC:
        return _decompressed(gzip.GzipFile(fileobj=raw, mode="rb"), raw, name, "gzip")
    if head[:6] == XZ_MAGIC:
        import lzma

        return _decompressed(lzma.LZMAFile(raw, mode="rb"), raw, name, "xz")
    if head[:4] == ZSTD_MAGIC:
        try:
            import zstandard
        except ImportError:
            from .errors import MissingDependencyError

            raise MissingDependencyError(f"{name}: zstd input needs zstandard: pip install zstandard") from None
        frames = _ZstdFrames(raw)
        return _decompressed(zstandard.ZstdDecompressor().stream_reader(frames, read_across_frames=True), raw, name,
                             "zstd", frames)
    if head[:3] == BZIP2_MAGIC and head[3:4].isdigit() and head[4:10] in _BZIP2_NEXT:
        if path != "-":
            raw.close()
        raise CorpusError(f"{name}: bzip2 data, which bitextmine does not read; expected plain, gzip, xz or zstd "
                          "input (decompress it first: bunzip2 -k FILE)")
    return raw


def _decompression_errors() -> tuple:
    import lzma

    errors: tuple = (EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError)
    try:
        import zstandard

        errors += (zstandard.ZstdError,)
    except ImportError:
        pass
    return errors


class _Decompressed(io.RawIOBase):
    """A decompressing reader whose failures, and a zstd stream ending inside a frame, are DamagedInput."""

    def __init__(self, inner, raw: BinaryIO, name: str, fmt: str, frames: "_ZstdFrames | None" = None):
        super().__init__()
        self.inner, self.raw, self.name, self.fmt, self.frames = inner, raw, name, fmt, frames
        self.errors = _decompression_errors()

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        try:
            data = self.inner.read1(len(b))  # what one step decodes: an error loses no more than that step
            n = len(data)
            b[:n] = data
        except self.errors as e:
            raise DamagedInput(self.name, self.fmt, str(e) or type(e).__name__) from None
        except ValueError as e:  # the frame walker: bytes that are no zstd frame
            raise DamagedInput(self.name, self.fmt, str(e)) from None
        if not n and self.frames is not None and not self.frames.at_boundary():
            raise DamagedInput(self.name, self.fmt, "the input ends inside a frame")
        return n

    def close(self) -> None:
        if not self.closed:
            self.inner.close()
            if self.raw is not sys.stdin.buffer:
                self.raw.close()
        super().close()


def _decompressed(inner, raw: BinaryIO, name: str, fmt: str, frames=None) -> BinaryIO:
    return io.BufferedReader(_Decompressed(inner, raw, name, fmt, frames), BLOCK_BYTES)  # type: ignore[return-value]


class _ZstdFrames:
    """The compressed bytes of a zstd input, read through while following its frame structure (RFC 8878,
    3.1: frame header, blocks with their sizes, optional checksum; skippable frames), so that an input
    ending inside a frame is told from one ending between frames: the decompressor returns what it has
    in both cases. Costs a few operations per 128 KiB block."""

    def __init__(self, raw: BinaryIO):
        self.raw = raw
        self.state, self.want, self.head, self.skip, self.checksum = "magic", 4, b"", 0, False

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self._feed(data)
        return data

    def _feed(self, data: bytes) -> None:
        i, n = 0, len(data)
        while i < n:
            if self.skip:
                k = min(self.skip, n - i)
                self.skip -= k
                i += k
                continue
            k = min(self.want - len(self.head), n - i)
            self.head += data[i:i + k]
            i += k
            if len(self.head) == self.want:
                h, self.head = self.head, b""
                self._step(h)

    def _step(self, h: bytes) -> None:
        if self.state == "magic":
            magic = int.from_bytes(h, "little")
            if magic == 0xFD2FB528:
                self.state, self.want = "header", 1
            elif magic & 0xFFFFFFF0 == 0x184D2A50:  # a skippable frame: its size, then its bytes
                self.state, self.want = "skippable", 4
            else:
                raise ValueError(f"bytes {h.hex()} where a zstd frame should start")
        elif self.state == "skippable":
            self.skip, self.state, self.want = int.from_bytes(h, "little"), "magic", 4
        elif self.state == "header":  # the frame header descriptor gives the sizes of the header's fields
            d = h[0]
            single, self.checksum = (d >> 5) & 1, bool((d >> 2) & 1)
            self.skip = (1 - single) + (0, 1, 2, 4)[d & 3] + (single, 2, 4, 8)[d >> 6]
            self.state, self.want = "block", 3
        else:  # a block header: last-block bit, type (raw, RLE, compressed, reserved), size
            b = int.from_bytes(h, "little")
            if (b >> 1) & 3 == 3:
                raise ValueError("a zstd block of the reserved type")
            self.skip = 1 if (b >> 1) & 3 == 1 else b >> 3
            if b & 1:
                self.skip += 4 * self.checksum
                self.state, self.want = "magic", 4

    def at_boundary(self) -> bool:
        """Whether the bytes so far end between frames."""
        return self.state == "magic" and not self.head and not self.skip


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


MAX_LINE_BYTES = 64 * 2**20  # a longer line is no sentence (/dev/zero, a binary file): refused, memory bounded


def iter_blocks(path: str, *, hasher: "hashlib._Hash | None" = None,
                block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[bytes, int]]:
    r"""Yield (block, number of its first line) for ``path``: raw bytes, each block ending at a ``\n``
    (the last may not), a UTF-8 byte order mark at the start removed.

    ``hasher``, when given, is updated with the decompressed bytes. Raises CorpusError for a
    truncated or corrupt compressed stream, naming the format and the line where the damage starts, and for a
    line longer than MAX_LINE_BYTES (read no further).
    """
    f = open_binary(path)
    lineno = 1
    rest = b""
    bom_checked = False
    try:
        while True:
            got: list[bytes] = []
            try:
                data = _read_block(f, block_bytes, got)
            except DamagedInput as e:
                raise e.at_line(lineno + rest.count(b"\n") + sum(p.count(b"\n") for p in got)) from None
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
                if len(data) > MAX_LINE_BYTES:
                    raise CorpusError(f"{'<stdin>' if path == '-' else path} line {lineno}: longer than "
                                      f"{MAX_LINE_BYTES // 2**20} MiB; expected one sentence per line (a text file)")
                rest = data
                continue
            block, rest = data[:cut], data[cut:]
            yield block, lineno
            lineno += block.count(b"\n")
    finally:
        if path != "-":
            f.close()


def _read_block(f: BinaryIO, n: int, got: list[bytes]) -> bytes:
    """Up to ``n`` bytes of ``f`` (fewer only at its end), appended to ``got`` as they come, so that a read
    failing part way still tells how far it got."""
    size = 0
    while size < n:
        data = f.read1(n - size)  # type: ignore[attr-defined]
        if not data:
            break
        got.append(data)
        size += len(data)
    return b"".join(got)


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
    truncated/corrupt compressed stream.
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
        (``train.de.gz``, ``train.de.zst`` and ``en-de.de`` -> ``de``), else the TSV file's name."""
        if self.group:
            return self.group
        if self.tsv is not None:
            return os.path.basename(self.tsv)
        name = without_compression(os.path.basename(str(self.tgt)))
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

