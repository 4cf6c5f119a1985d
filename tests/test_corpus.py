import gzip
import io
import os

import pytest

from bitextmine.corpus import _ZstdFrames, CorpusSpec, clean_pairs, file_checksum, iter_lines, load_corpora, read_parallel, read_tsv
from bitextmine.errors import CorpusError


def write_bytes(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"a\nb\n", ["a", "b"]),
        (b"a\nb", ["a", "b"]),  # no final newline
        (b"a\r\nb\r\n", ["a", "b"]),  # CRLF
        (b"\xef\xbb\xbfa\nb\n", ["a", "b"]),  # BOM
        (b"a\xe2\x80\xa8b\n\n", ["a\u2028b", ""]),  # U+2028 is not a line break; empty line kept
        (b"", []),
    ],
)
def test_iter_lines(tmp_path, data, expected):
    assert list(iter_lines(write_bytes(tmp_path / "f.txt", data))) == expected


def test_gzip_read_transparently_and_checksum_of_decompressed_bytes(tmp_path):
    plain = write_bytes(tmp_path / "f.txt", "über\nzwei\n".encode())
    gz = tmp_path / "f.txt.gz"
    gz.write_bytes(gzip.compress("über\nzwei\n".encode()))
    assert list(iter_lines(str(gz))) == ["über", "zwei"]
    assert file_checksum(str(gz)) == file_checksum(plain)


def test_invalid_utf8_names_file_line_and_column(tmp_path):
    p = write_bytes(tmp_path / "bad.txt", b"ok\nfine\nab\xffc\n")
    with pytest.raises(CorpusError) as e:
        list(iter_lines(p))
    assert str(e.value) == f"{p} line 3: invalid UTF-8 (byte 0xff at column 3); expected UTF-8 text"


def test_nul_byte_is_an_error(tmp_path):
    p = write_bytes(tmp_path / "bin.txt", b"ok\n\x00\x01\x02\n")
    with pytest.raises(CorpusError, match=r"line 2: NUL byte"):
        list(iter_lines(p))


def test_truncated_gzip_is_an_error(tmp_path):
    data = gzip.compress(("line\n" * 10000).encode())
    p = write_bytes(tmp_path / "t.gz", data[: len(data) // 2])
    with pytest.raises(CorpusError, match="corrupt or truncated gzip"):
        list(iter_lines(p))


def _compress(fmt: str, data: bytes) -> bytes:
    import lzma

    import zstandard

    return {"gz": gzip.compress, "xz": lzma.compress, "zst": zstandard.ZstdCompressor().compress}[fmt](data)


@pytest.mark.parametrize("fmt, says", [("gz", "gzip"), ("xz", "xz"), ("zst", "zstd")])
def test_a_truncated_compressed_file_is_an_error_naming_format_and_line(tmp_path, fmt, says):
    lines = [f"line {i}" for i in range(100_000)]
    data = _compress(fmt, ("\n".join(lines) + "\n").encode())
    p = write_bytes(tmp_path / f"t.{fmt}", data[: len(data) * 2 // 3])
    got = []
    with pytest.raises(CorpusError, match=rf"t.{fmt} line (\d+): corrupt or truncated {says} data after \d+ complete") as e:
        for line in iter_lines(p):
            got.append(line)
    line = int(str(e.value).split(" line ")[1].split(":")[0])
    readable = len(lines) * 2 // 3 * 0.9  # about what the first two thirds of the stream hold
    assert readable < line <= len(lines) and got == lines[: len(got)] and len(got) < line  # how far it got
    with pytest.raises(CorpusError, match=f"t.{fmt}: corrupt or truncated {says} data"):
        file_checksum(p)


def test_zstd_cut_at_any_byte_inside_a_frame_is_an_error(tmp_path):
    import zstandard

    frames = [zstandard.ZstdCompressor().compress(b"a\nb\n"),
              zstandard.ZstdCompressor(write_checksum=True, write_content_size=False).compress(b"c\n" * 50),
              b"\x50\x2a\x4d\x18\x03\x00\x00\x00xyz",  # a skippable frame
              zstandard.ZstdCompressor(level=19).compress(b"".join(b"line %d\n" % i for i in range(3000)))]
    data = b"".join(frames)
    ends = {sum(map(len, frames[:i + 1])) for i in range(len(frames))}
    want = "a\nb\n" + "c\n" * 50 + "".join(f"line {i}\n" for i in range(3000))
    assert "\n".join(iter_lines(write_bytes(tmp_path / "all.zst", data))) + "\n" == want
    for cut in range(len(data) + 1):  # the frame walker at every byte, against the boundaries built above
        walker = _ZstdFrames(io.BytesIO(data[:cut]))
        while walker.read(7):
            pass
        assert walker.at_boundary() is (cut in ends or cut == 0), cut
    for cut in [*ends, *range(5, len(data), 53)]:  # whole reads at some of them
        p = write_bytes(tmp_path / "cut.zst", data[:cut])
        if cut in ends:
            assert want.startswith("\n".join(iter_lines(p)))
        else:
            with pytest.raises(CorpusError, match="corrupt or truncated zstd data"):
                list(iter_lines(p))


def test_bzip2_is_refused_in_one_line(tmp_path):
    import bz2

    p = write_bytes(tmp_path / "a.txt.bz2", bz2.compress(b"a\nb\n"))
    with pytest.raises(CorpusError, match=r"a.txt.bz2: bzip2 data, which bitextmine does not read; .*bunzip2"):
        list(iter_lines(p))
    assert list(iter_lines(write_bytes(tmp_path / "t.txt", b"BZh9 is a line of text\n"))) == ["BZh9 is a line of text"]


def test_missing_file(tmp_path):
    with pytest.raises(CorpusError, match="no such file"):
        list(iter_lines(str(tmp_path / "nope.txt")))


def test_mismatched_line_counts_name_the_first_unpartnered_line(tmp_path):
    a = write_bytes(tmp_path / "a.de", b"1\n2\n3\n")
    b = write_bytes(tmp_path / "b.en", b"1\n2\n")
    with pytest.raises(CorpusError) as e:
        read_parallel(a, b)
    assert str(e.value) == (f"{a} line 3: no partner line in {b}, which has 2 lines (the other has 3); "
                            "expected line-aligned files")


def test_tsv_columns_and_missing_column(tmp_path):
    p = write_bytes(tmp_path / "c.tsv", b"x\ta\tb\ny\tc\td\n")
    assert read_tsv(p, scol=2, tcol=3) == (["a", "c"], ["b", "d"])
    bad = write_bytes(tmp_path / "bad.tsv", b"a\tb\nonly-one\n")
    with pytest.raises(CorpusError) as e:
        read_tsv(bad)
    assert str(e.value) == (f"{bad} line 2: 1 tab-separated column(s); expected at least 2 "
                            "(source column 1, target column 2)")


def test_clean_pairs_accounts_for_every_pair():
    src = ["a", "", "same", "a", "b ", "c"]
    tgt = ["x", "y", "same", "x", "z", "  "]
    s, t, st = clean_pairs(src, tgt)
    assert (s, t) == (["a", "b"], ["x", "z"])
    assert (st.read, st.kept, st.empty, st.identical, st.duplicate) == (6, 2, 2, 1, 1)
    assert st.read == st.kept + st.empty + st.identical + st.duplicate


def test_empty_corpus_is_an_error(tmp_path):
    a = write_bytes(tmp_path / "a", b"")
    b = write_bytes(tmp_path / "b", b"")
    with pytest.raises(CorpusError, match="empty corpus"):
        load_corpora([CorpusSpec(src=a, tgt=b)])
    c = write_bytes(tmp_path / "c", b"same\n\n")
    d = write_bytes(tmp_path / "d", b"same\nx\n")
    with pytest.raises(CorpusError, match="no usable pairs left"):
        load_corpora([CorpusSpec(src=c, tgt=d)])


@pytest.mark.parametrize("block_bytes", [1, 3, 7, 64, 1 << 20])
def test_blocks_of_any_size_give_the_same_lines_and_line_numbers(tmp_path, block_bytes):
    from bitextmine.corpus import decode_block, iter_blocks

    lines = ["über", "", "a\r", "long line " * 20, "\u2028x", "z"]
    p = write_bytes(tmp_path / "f.txt", b"\xef\xbb\xbf" + "\n".join(lines).encode() + b"\n")
    got = [line for block, first in iter_blocks(p, block_bytes=block_bytes)
           for line in decode_block(block, name=p, first_line=first)]
    assert got == ["über", "", "a", "long line " * 20, "\u2028x", "z"]
    bad = write_bytes(tmp_path / "bad.txt", b"ok\n" * 9 + b"x\xc3(y\n" + b"ok\n")
    with pytest.raises(CorpusError, match=r"line 10: invalid UTF-8 \(byte 0xc3 at column 2\)"):
        for block, first in iter_blocks(bad, block_bytes=block_bytes):
            decode_block(block, name=bad, first_line=first)


@pytest.mark.parametrize("command", ["mine", "score", "filter"])
def test_commands_stop_with_one_line_on_a_truncated_zst(tmp_path, toy_model_dir, command):
    from click.testing import CliRunner

    from bitextmine.cli import main

    text = "".join(f"Line {i}.\tZeile {i}.\n" for i in range(20_000)).encode()
    data = _compress("zst", text)
    p = write_bytes(tmp_path / "in.zst", data[: len(data) // 2])
    other = write_bytes(tmp_path / "other.txt", b"a\nb\n")
    args = {"mine": ["mine", p, other, "--model", toy_model_dir], "score": ["score", p, "--model", toy_model_dir],
            "filter": ["filter", p, "--score", "none"]}[command]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1 and r.stderr.count("\n") == 1, r.output
    assert r.stderr.startswith(f"Error: {p} line ") and "corrupt or truncated zstd data after" in r.stderr


@pytest.mark.parametrize("ext", ["", ".gz", ".xz", ".zst", ".bz2"])
def test_a_compressed_corpus_is_named_by_its_language_not_its_compression(ext):
    """Sampling groups and the second stage's languages come from the file's language suffix: train.de.zst is
    de, as train.de.gz always was (it was "zst", so two languages shared a group and the stage a wrong name)."""
    from bitextmine.judge.build import english_side

    spec = CorpusSpec(src=f"train.en{ext}", tgt=f"train.de{ext}")
    assert spec.group_name() == "de" and english_side(spec) == "src"
    assert english_side(CorpusSpec(src=f"train.de{ext}", tgt=f"train.en{ext}")) == "tgt"


@pytest.mark.parametrize("fmt", ["gzip", "xz"])
def test_compressed_stdin_whose_first_write_is_short_is_still_decompressed(monkeypatch, fmt):
    """The format was told from one peek, which on a pipe holds what has arrived so far: a gzip stream whose first
    write was one byte was read as text (invalid UTF-8 at line 1)."""
    import gzip
    import io
    import lzma
    import threading
    import time

    from bitextmine.corpus import iter_lines

    lines = [f"Zeile {i} ä" for i in range(50)]
    data = (gzip.compress if fmt == "gzip" else lzma.compress)(("\n".join(lines) + "\n").encode())
    r, w = os.pipe()

    def slowly():
        os.write(w, data[:1])
        time.sleep(0.3)
        os.write(w, data[1:])
        os.close(w)

    threading.Thread(target=slowly, daemon=True).start()
    stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(r, "rb")))
    monkeypatch.setattr("sys.stdin", stdin)
    assert list(iter_lines("-")) == lines
