import gzip

import pytest

from bitextmine.corpus import CorpusSpec, clean_pairs, file_checksum, iter_lines, load_corpora, read_parallel, read_tsv
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
