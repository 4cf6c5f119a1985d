import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from bitextmine.config import EncodeConfig
from bitextmine.encoding import Encoder, encode, encode_files, load_embeddings
from bitextmine.errors import ConfigError, ModelFormatError


def test_batched_equals_one_at_a_time(toy_model):
    from conftest import toy_corpus

    texts = toy_corpus(n=50, seed=3)[0] + ["", "kalo"]
    batched = encode(texts, toy_model, config=EncodeConfig(batch_size=16))
    single = np.concatenate([encode([t], toy_model) for t in texts])
    np.testing.assert_allclose(batched, single, atol=1e-6)
    assert batched.dtype == np.float32 and batched.shape == (52, toy_model.dim)
    norms = np.linalg.norm(batched, axis=1)
    np.testing.assert_allclose(norms[:-2], 1, atol=1e-5)
    assert norms[-2] == 0  # an empty line has no pieces: a zero row, still in its place


def test_mean_of_piece_embeddings_reference(toy_model):
    text = "kalo mire tusa"
    ids = toy_model.tokenizer.sp.encode(text)
    v = toy_model.embeddings[ids].mean(0)
    v /= np.linalg.norm(v)
    np.testing.assert_allclose(Encoder(toy_model).encode_batch([text])[0], v, atol=1e-6)


@pytest.mark.parametrize("fp16", [False, True])
def test_encode_files_writes_npy_and_sidecar(tmp_path, toy_model, fp16):
    from conftest import toy_corpus, write_lines

    texts = toy_corpus(n=37, seed=5)[0]
    a = write_lines(tmp_path / "a.txt", texts[:20])
    b = tmp_path / "b.txt.gz"
    b.write_bytes(gzip.compress("".join(t + "\n" for t in texts[20:]).encode()))
    out = str(tmp_path / "x.npy")
    res = encode_files([a, str(b)], out, toy_model, config=EncodeConfig(batch_size=8, fp16=fp16))
    x = np.load(out)
    assert x.shape == (37, toy_model.dim) and res.count == 37
    assert x.dtype == (np.float16 if fp16 else np.float32)
    np.testing.assert_allclose(x.astype(np.float32), encode(texts, toy_model), atol=2e-3 if fp16 else 1e-6)
    meta = json.load(open(out + ".json"))
    assert meta["model_fingerprint"] == toy_model.fingerprint and meta["count"] == 37 and meta["format_version"] == 2
    assert load_embeddings(out, model=toy_model, count=37).shape == (37, toy_model.dim)


def test_a_stop_before_the_new_sidecar_leaves_no_old_sidecar_over_new_rows(tmp_path, toy_model, monkeypatch):
    """Encoding again into the same file (here with --sif: other vectors) and stopping after the rows are in
    place leaves rows without a sidecar, which loading refuses, never the earlier sidecar over the new rows."""
    from conftest import toy_corpus, write_lines

    from bitextmine.encoding import pipeline

    a = write_lines(tmp_path / "a.txt", toy_corpus(n=20, seed=2)[0])
    out = str(tmp_path / "x.npy")
    encode_files([a], out, toy_model)

    def stop(*args, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "write_sidecar", stop)
    with pytest.raises(KeyboardInterrupt):
        encode_files([a], out, toy_model, config=EncodeConfig(sif=True))
    with pytest.raises(ModelFormatError, match="sidecar"):
        load_embeddings(out, model=toy_model, count=20)
    assert not any(n.endswith(".partial") for n in os.listdir(tmp_path))

def test_empty_input_gives_empty_array(tmp_path, toy_model):
    p = tmp_path / "e.txt"
    p.write_text("")
    out = str(tmp_path / "e.npy")
    encode_files([str(p)], out, toy_model)
    assert np.load(out).shape == (0, toy_model.dim)


def test_load_embeddings_refuses_mismatches(tmp_path, toy_model):
    from conftest import write_lines

    a = write_lines(tmp_path / "a.txt", ["kalo mire", "tusa"])
    out = str(tmp_path / "a.npy")
    encode_files([a], out, toy_model)
    with pytest.raises(ModelFormatError, match="encodes another text"):
        load_embeddings(out, model=toy_model, text_sha256="0" * 64)
    with pytest.raises(ModelFormatError, match="rows but the text has 3 lines"):
        load_embeddings(out, count=3)
    meta = json.load(open(out + ".json"))
    meta["model_fingerprint"] = "deadbeef"
    json.dump(meta, open(out + ".json", "w"))
    with pytest.raises(ModelFormatError, match="made by model deadbeef"):
        load_embeddings(out, model=toy_model)
    meta["format_version"] = 99
    json.dump(meta, open(out + ".json", "w"))
    with pytest.raises(ModelFormatError, match="format_version 99"):
        load_embeddings(out)
    meta["format_version"] = 1  # before lines of no known piece were zero rows: mining paired them
    json.dump(meta, open(out + ".json", "w"))
    with pytest.raises(ModelFormatError, match="written by an earlier bitextmine, .* encode the text again"):
        load_embeddings(out)


def test_encode_reads_stdin(tmp_path, toy_model_dir):
    out = str(tmp_path / "s.npy")
    r = subprocess.run([sys.executable, "-m", "bitextmine", "encode", "--model", toy_model_dir, "-", "-o", out, "-q"],
                       input="kalo mire\ntusa\n".encode(), capture_output=True)
    assert r.returncode == 0, r.stderr
    assert np.load(out).shape[0] == 2


def test_bad_line_mid_stream_stops_workers_with_the_line_number(tmp_path, toy_model):
    from bitextmine.errors import CorpusError

    p = tmp_path / "bad.txt"
    p.write_bytes(b"kalo mire\n" * 40 + b"\xff\n" + b"tusa\n" * 10)
    out = str(tmp_path / "bad.npy")
    with pytest.raises(CorpusError, match="line 41: invalid UTF-8"):
        encode_files([str(p)], out, toy_model, config=EncodeConfig(batch_size=4))
    assert not (tmp_path / "bad.npy").exists() and not (tmp_path / "bad.npy.partial").exists()


def test_main_process_embedding_path_writes_the_same_rows(tmp_path, toy_model):
    """The path encode_files takes on a GPU (workers tokenise, this process embeds and writes),
    run on the CPU: same rows as the worker path."""
    from conftest import toy_corpus, write_lines

    from bitextmine.corpus import iter_blocks
    from bitextmine.encoding.npyfile import RowWriter
    from bitextmine.tokenizer import RawBlock

    texts = toy_corpus(n=300, seed=12)[0]
    p = write_lines(tmp_path / "t.txt", texts)
    ref = str(tmp_path / "ref.npy")
    encode_files([p], ref, toy_model, config=EncodeConfig(batch_size=16))
    want = np.load(ref)
    blocks = [RawBlock(data, first, p) for data, first in iter_blocks(p, block_bytes=300)]
    enc = Encoder(toy_model, EncodeConfig(device="cpu"))
    out = tmp_path / "rows.bin"
    out.write_bytes(b"")
    writer = RowWriter(str(out), 0)
    n = sum(enc.map_batches(blocks, lambda x, row: writer.write(row, x)))
    writer.close()
    got = np.fromfile(out, np.float32).reshape(-1, toy_model.dim)
    assert n == len(texts) == len(got)
    np.testing.assert_array_equal(got, want)


def test_chunked_encoding_resumes_to_the_same_bytes(tmp_path, toy_model_dir, toy_model):
    import hashlib
    import os

    from click.testing import CliRunner

    from bitextmine.cli import main
    from bitextmine.encoding import encode, load_embeddings
    from conftest import toy_corpus

    src, _ = toy_corpus(230, seed=51)
    src[7] = ""  # an empty line gives a zero row
    text = tmp_path / "in.txt"
    text.write_text("\n".join(src) + "\n")
    full, part = str(tmp_path / "full"), str(tmp_path / "part")
    base = ["encode", str(text), "--model", toy_model_dir, "--chunk-lines", "50", "-q"]
    r = CliRunner().invoke(main, base + ["-o", full])
    assert r.exit_code == 0, r.output
    # a run stopped after 2 chunks, resumed and stopped again after 1, then resumed to the end
    assert CliRunner().invoke(main, base + ["-o", part, "--max-chunks", "2"]).exit_code == 0
    assert sorted(os.listdir(part)) == ["chunk-000000.npy", "chunk-000001.npy", "manifest.json"]
    again = CliRunner().invoke(main, base + ["-o", part])
    assert again.exit_code == 1 and "use --resume" not in again.output and "--resume" in again.output
    assert CliRunner().invoke(main, base + ["-o", part, "--resume", "--max-chunks", "1"]).exit_code == 0
    assert CliRunner().invoke(main, base + ["-o", part, "--resume"]).exit_code == 0

    def digest(d):
        return {n: hashlib.sha256(open(os.path.join(d, n), "rb").read()).hexdigest() for n in sorted(os.listdir(d))}

    assert digest(full) == digest(part) and len(digest(full)) == 6  # 5 chunks + manifest
    x = load_embeddings(full, model=toy_model)
    np.testing.assert_allclose(x, encode(src, toy_model), atol=1e-6)
    assert not x[7].any()
    # a changed input is refused on resume
    text.write_text("\n".join(["changed"] + src[1:]) + "\n")
    os.remove(os.path.join(part, "manifest.json"))
    r = CliRunner().invoke(main, base + ["-o", str(tmp_path / "p2"), "--max-chunks", "1"])
    assert r.exit_code == 0
    text.write_text("\n".join(src) + "\n")
    r = CliRunner().invoke(main, base + ["-o", str(tmp_path / "p2"), "--resume"])
    assert r.exit_code == 1 and "lines 1-50 differ" in r.output


def test_resuming_a_complete_chunked_encoding_checks_the_input(tmp_path, toy_model_dir):
    """A complete chunked encoding resumed is returned as it is only while its input is unchanged: an input
    rewritten under the same name (other lines, another count) is refused, not reported as encoded."""
    from click.testing import CliRunner

    from bitextmine.cli import main
    from conftest import toy_corpus

    src, _ = toy_corpus(25, seed=52)
    text = tmp_path / "in.txt"
    text.write_text("\n".join(src) + "\n")
    out = str(tmp_path / "chunks")
    base = ["encode", str(text), "--model", toy_model_dir, "--chunk-lines", "10", "-q", "-o", out]
    assert CliRunner().invoke(main, base).exit_code == 0
    again = CliRunner().invoke(main, base + ["--resume"])
    assert again.exit_code == 0, again.output
    text.write_text("\n".join(toy_corpus(40, seed=53)[0]) + "\n")
    changed = CliRunner().invoke(main, base + ["--resume"])
    assert changed.exit_code == 1
    assert changed.output == (f"Error: --resume: the input changed since {out} was completed (its sha256 differs "
                              "from the manifest's); encode it into a new directory\n")


def test_mine_reads_chunked_embeddings(tmp_path, toy_model_dir):
    from click.testing import CliRunner

    from bitextmine.cli import main
    from conftest import toy_corpus

    src, tgt = toy_corpus(60, seed=52)
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("\n".join(src) + "\n")
    b.write_text("\n".join(tgt) + "\n")
    r = CliRunner().invoke(main, ["encode", str(a), "-o", str(tmp_path / "a.emb"), "--chunk-lines", "25",
                                  "--model", toy_model_dir, "-q"])
    assert r.exit_code == 0, r.output
    plain = CliRunner().invoke(main, ["mine", str(a), str(b), "--model", toy_model_dir])
    pre = CliRunner().invoke(main, ["mine", str(a), str(b), "--model", toy_model_dir, "--src-emb", str(tmp_path / "a.emb")])
    assert pre.exit_code == 0, pre.output
    assert pre.stdout == plain.stdout


def test_batch_tokens_and_table_precision(toy_model):
    """--batch-tokens splits embedding calls by pieces (same rows); half-precision tables stay close."""
    from bitextmine.config import EncodeConfig
    from bitextmine.encoding import Encoder
    from conftest import toy_corpus

    src, _ = toy_corpus(300, seed=12)
    texts = src + ["", src[0] * 40]  # an empty line and one longer than the budget
    base = Encoder(toy_model, EncodeConfig(device="cpu", threads=1)).encode_batch(texts)
    budgeted = Encoder(toy_model, EncodeConfig(device="cpu", threads=1, batch_tokens=7)).encode_batch(texts)
    np.testing.assert_allclose(budgeted, base, atol=1e-6)
    for precision, tol in (("fp16", 2e-3), ("bf16", 2e-2)):
        enc = Encoder(toy_model, EncodeConfig(device="cpu", threads=1, precision=precision))
        half = enc.encode_batch(texts)
        assert half.dtype == np.float32
        np.testing.assert_allclose(half, base, atol=tol)
        np.testing.assert_allclose(np.linalg.norm(half[:-2], axis=1), 1, atol=1e-5)


def test_batch_tokens_in_the_file_workers(tmp_path, toy_model):
    from conftest import toy_corpus, write_lines

    src, _ = toy_corpus(500, seed=13)
    path = write_lines(tmp_path / "in.txt", src)
    encode_files([str(path)], str(tmp_path / "a.npy"), toy_model, config=EncodeConfig(device="cpu", batch_size=64))
    encode_files([str(path)], str(tmp_path / "b.npy"), toy_model,
                 config=EncodeConfig(device="cpu", batch_size=64, batch_tokens=5))
    np.testing.assert_allclose(np.load(tmp_path / "b.npy"), np.load(tmp_path / "a.npy"), atol=1e-6)


@pytest.mark.parametrize("dtype,direct", [(np.float32, True), (np.float16, True), (np.float32, False)])
def test_row_writer_writes_every_byte_once_in_any_order(tmp_path, dtype, direct):
    """Blocks of random sizes (some long enough for direct writes, some inside one page) written in a
    shuffled order by two writers of the same file give exactly the rows, after an untouched header."""
    from bitextmine.encoding.npyfile import RowWriter

    rng = np.random.default_rng(5)
    x = rng.standard_normal((3000, 300)).astype(dtype)
    header = bytes(range(128))
    cuts = np.unique(np.concatenate([[0, len(x)], rng.integers(0, len(x), 40), [1, 2, 3, 1000, 1001]]))
    blocks = list(zip(cuts[:-1], cuts[1:]))
    rng.shuffle(blocks)
    out = tmp_path / "rows.npy"
    out.write_bytes(header)
    writers = [RowWriter(str(out), len(header), direct=direct) for _ in range(2)]
    for i, (a, b) in enumerate(blocks):
        assert writers[i % 2].write(int(a), x[a:b]) == b - a
    for w in writers:
        w.close()
    assert out.read_bytes() == header + x.tobytes()


def test_row_writer_falls_back_to_the_page_cache(tmp_path, monkeypatch):
    """A file system that refuses a direct write (EINVAL) gets the rows through the page cache."""
    import errno

    import bitextmine.encoding.npyfile as E

    x = np.random.default_rng(6).standard_normal((500, 300)).astype(np.float32)
    out = tmp_path / "rows.npy"
    out.write_bytes(b"h" * 128)
    w = E.RowWriter(str(out), 128)
    refused = []
    real = E._pwrite_all
    if w.dfd < 0:  # this file system has no O_DIRECT: stand in a descriptor that refuses like one
        w.dfd = os.open(out, os.O_WRONLY)

    def pwrite_all(fd, data, offset):
        if fd == w.dfd:
            refused.append(offset)
            raise OSError(errno.EINVAL, "Invalid argument")
        real(fd, data, offset)

    monkeypatch.setattr(E, "_pwrite_all", pwrite_all)
    w.write(0, x[:200])
    assert refused and w.dfd == -1
    w.write(200, x[200:])
    w.close()
    assert out.read_bytes() == b"h" * 128 + x.tobytes()


@pytest.mark.parametrize("chunk_lines", [1, 7, 50, 1000])
def test_chunked_encoding_equals_one_file_for_any_chunk_and_block_size(tmp_path, toy_model, chunk_lines):
    """Chunks cut inside blocks, across files (one without its final newline, one with CRLF line ends
    and a byte order mark) hold the rows of the single-file encoding; the manifest's per-chunk sha256
    is that of the chunk's lines; a shorter input is refused on resume."""
    import hashlib

    from bitextmine.encoding.chunks import encode_chunked
    from bitextmine.encoding.store import MANIFEST_FILE
    from conftest import toy_corpus

    src, tgt = toy_corpus(120, seed=52)
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_bytes(("\n".join(src[:70])).encode())  # no final newline
    b.write_bytes(b"\xef\xbb\xbf" + ("\r\n".join(src[70:]) + "\r\n").encode())
    config = EncodeConfig(batch_size=4, device="cpu")  # blocks of ~512 bytes: many blocks, many workers' items
    one = str(tmp_path / "one.npy")
    encode_files([str(a), str(b)], one, toy_model, config=config)
    out = str(tmp_path / "chunks")
    res = encode_chunked([str(a), str(b)], out, toy_model, config=config, chunk_lines=chunk_lines)
    assert res.count == len(src)
    np.testing.assert_array_equal(load_embeddings(out), np.load(one))
    meta = json.load(open(os.path.join(out, MANIFEST_FILE)))
    assert [c["rows"] for c in meta["chunks"]] == [min(chunk_lines, len(src) - r) for r in range(0, len(src), chunk_lines)]
    for c in meta["chunks"]:
        lines = src[c["first_row"] : c["first_row"] + c["rows"]]
        assert c["input_sha256"] == hashlib.sha256("".join(t + "\n" for t in lines).encode()).hexdigest()
    if len(meta["chunks"]) > 1:
        meta["complete"] = False
        meta["chunks"] = meta["chunks"][: len(meta["chunks"]) - 1]
        json.dump(meta, open(os.path.join(out, MANIFEST_FILE), "w"))
        last = meta["chunks"][-1]["first_row"]
        b.write_text("")
        for lines, why in ((last, "fewer lines than"), (last + 1, "differ")):  # ends at a chunk's start / inside
            if lines != last and chunk_lines == 1:
                continue
            a.write_text("".join(t + "\n" for t in src[:lines]))
            with pytest.raises(ConfigError, match=why):
                encode_chunked([str(a), str(b)], out, toy_model, config=config, chunk_lines=chunk_lines, resume=True)


def test_encode_all_in_workers_equals_the_streaming_path(toy_model):
    """Many batches (so worker processes write into the shared output) give the rows of the streaming
    path and of encoding each text alone; progress counts every row once."""
    from conftest import toy_corpus

    texts = toy_corpus(n=500, seed=13)[0] + [""]
    enc = Encoder(toy_model, EncodeConfig(batch_size=16, device="cpu"))
    seen = []
    x = enc.encode_all(texts, seen.append)
    assert x.dtype == np.float32 and x.shape == (len(texts), toy_model.dim) and sum(seen) == len(texts)
    np.testing.assert_array_equal(x, np.concatenate(list(enc.encode_iter(texts))))
    np.testing.assert_allclose(x[:5], np.stack([encode([t], toy_model)[0] for t in texts[:5]]), atol=1e-6)
    assert not x[-1].any()
    assert enc.encode_all([]).shape == (0, toy_model.dim)


def test_device_path_writes_chunks_like_the_workers(tmp_path, toy_model):
    """The path a GPU takes (workers tokenise, this process embeds and writes, switching files between
    chunks), run on the CPU: the same bytes as the worker path, for blocks spread over three files."""
    from conftest import toy_corpus

    from bitextmine.encoding.pipeline import encode_items, raw_blocks
    from bitextmine.encoding.npyfile import finish_npy, new_npy

    texts = toy_corpus(n=200, seed=14)[0]
    p = tmp_path / "t.txt"
    p.write_text("".join(t + "\n" for t in texts))
    config = EncodeConfig(batch_size=4, device="cpu")
    enc = Encoder(toy_model, config)
    dtype = np.dtype(np.float32)
    outs = {}
    for in_workers in (True, False):
        paths = [str(tmp_path / f"{in_workers}.{i}.npy") for i in range(3)]
        header_len = [new_npy(q, toy_model.dim, dtype) for q in paths][0]
        blocks = list(raw_blocks([str(p)], None, config))
        third = -(-len(blocks) // 3)
        items, rows = [], [0, 0, 0]
        for i, b in enumerate(blocks):
            f = i // third
            items.append((b, rows[f], paths[f]))
            rows[f] += b.data.count(b"\n")
        assert len(blocks) > 6 and sum(encode_items(enc, items, dtype, header_len, embed_in_workers=in_workers)) == 200
        for q, r in zip(paths, rows):
            finish_npy(q, r, toy_model.dim, dtype)
        outs[in_workers] = [open(q, "rb").read() for q in paths]
    assert outs[True] == outs[False]
    got = np.concatenate([np.load(q) for q in [str(tmp_path / f"False.{i}.npy") for i in range(3)]])
    np.testing.assert_allclose(got, encode(texts, toy_model), atol=1e-6)


def test_nothing_known_against_a_loop():
    from bitextmine.encoding.embed import nothing_known

    rng = np.random.default_rng(3)
    blank = np.array([0, 6, 9])
    for _ in range(50):
        lists = [rng.choice([0, 6, 9, 11, 12], size=rng.integers(0, 5)) for _ in range(rng.integers(1, 8))]
        ids = np.concatenate(lists + [np.zeros(0, np.int64)]).astype(np.int64)
        offsets = np.cumsum([0] + [len(x) for x in lists[:-1]]).astype(np.int64)
        want = [len(x) > 0 and all(int(v) in (0, 6, 9) for v in x) for x in lists]
        assert nothing_known(ids, offsets, blank).tolist() == want


def test_lines_of_no_known_piece_embed_as_empty_ones_and_are_not_mined(tmp_path):
    """Emoji and scripts the vocabulary lacks become <unk> (with a bare word start and punctuation): such lines
    would share one vector, and two of them scored as a sure translation (cosine 1, probability 0.98)."""
    import io

    from bitextmine.loading import load_model
    from bitextmine.pipeline import mine_files

    model = load_model(None)
    texts = ["😀😀🎉", "❤️", "ᐊᐃᓐᖓᐃ", "გამარჯობა, როგორ ხარ?", "?!", "Hallo 😀", ""]
    x = encode(texts, model)
    assert not np.abs(x[[0, 1, 2, 3, 4, 6]]).any() and abs(float(np.linalg.norm(x[5])) - 1) < 1e-5
    here = os.path.join(os.path.dirname(__file__), "..", "examples")
    de = open(os.path.join(here, "de.txt"), encoding="utf-8").read().splitlines() + ["😀😀🎉"]
    en = open(os.path.join(here, "en.txt"), encoding="utf-8").read().splitlines() + ["❤️"]
    paths = [tmp_path / "de.txt", tmp_path / "en.txt"]
    for p, lines in zip(paths, (de, en)):
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = io.StringIO()
    mine_files(str(paths[0]), str(paths[1]), out, model=model)
    assert out.getvalue().count("\n") == 14 and "😀" not in out.getvalue()


def test_a_disk_full_while_encoding_names_the_file_and_leaves_no_partial(toy_model, tmp_path, monkeypatch):
    import errno

    import bitextmine.encoding.pipeline as pipeline
    from conftest import toy_corpus, write_lines

    src = write_lines(tmp_path / "s.txt", toy_corpus(50, seed=2)[0])
    out = str(tmp_path / "e.npy")

    def full(*a, **kw):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as a failed write raises it: no file named

    monkeypatch.setattr(pipeline, "finish_npy", full)
    with pytest.raises(OSError) as e:
        encode_files([src], out, toy_model, config=EncodeConfig(device="cpu"))
    assert e.value.filename == out + ".partial" and e.value.errno == errno.ENOSPC
    assert sorted(os.listdir(tmp_path)) == ["s.txt"]


def test_encode_refuses_an_output_it_would_replace_wrongly(toy_model, tmp_path):
    """A pipe or device as -o was replaced by a regular file (root's /dev/null among them); an input in the
    sidecar's place was overwritten; standard input named twice gave its lines once."""
    from conftest import toy_corpus, write_lines

    src = write_lines(tmp_path / "s.txt", toy_corpus(20, seed=2)[0])
    fifo = str(tmp_path / "pipe")
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="the output is not a regular file"):
        encode_files([src], fifo, toy_model, config=EncodeConfig(device="cpu"))
    side = write_lines(tmp_path / "in.npy.json", toy_corpus(20, seed=3)[0])
    with pytest.raises(ConfigError, match="the output's sidecar is an input"):
        encode_files([side], str(tmp_path / "in.npy"), toy_model, config=EncodeConfig(device="cpu"))
    assert open(side).read().count("\n") == 20
    with pytest.raises(ConfigError, match="named twice"):
        encode_files(["-", "-"], str(tmp_path / "x.npy"), toy_model, config=EncodeConfig(device="cpu"))


@pytest.mark.parametrize("command", [["score", "/dev/zero"], ["encode", "/dev/zero", "-o", "OUT"],
                                     ["mine", "/dev/zero", "examples/en.txt"]])
def test_an_endless_line_stops_every_reader(command, tmp_path, monkeypatch):
    from click.testing import CliRunner

    import bitextmine.corpus as corpus
    from bitextmine.cli import main

    monkeypatch.setattr(corpus, "MAX_LINE_BYTES", 2**20)
    r = CliRunner().invoke(main, [str(tmp_path / "o.npy") if a == "OUT" else a for a in command] + ["-q"])
    assert r.exit_code == 1 and "Error: /dev/zero line 1: longer than 1 MiB" in r.output, r.output
