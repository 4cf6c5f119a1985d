"""bitextmine <-> sentence-transformers / model2vec: tokenizer.json against SentencePiece, exported models
loaded offline in those libraries (max abs difference < 1e-5), their static models read with --model, the
round trip byte for byte, model cards. The libraries are in the ``test`` extra (the README's test command
installs it); without the ``interop`` extra the module is skipped."""

from __future__ import annotations

import importlib
import json
import os
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from bitextmine.cli import main
from bitextmine.errors import ConfigError, MissingDependencyError, ModelFormatError
from bitextmine.loading import load_model
from bitextmine.model import Model
from bitextmine.tokenizer import Tokenizer
from conftest import shared_path, toy_corpus

TOL = 1e-5
LANGS = ("deu", "fra", "spa", "ces", "rus", "cmn", "tur", "ara")
# spaces at the ends and inside, tabs, U+2581 itself, full-width and accented letters, characters no toy piece
# holds (alone, in runs, next to known ones, a whole text of them), an empty text
ODD_TEXTS = ["", " ", "kalo mire", "  kalo   mire  ", "\tkalo\tmire", "\u2581kalo", "kalo\u2581 mire", "ＫＡＬＯ ｍｉｒｅ",
             "Kàlö Mïré!", "kalo 🙂🙂 mire", "漢字", "ka漢lo", "🙂", "kalo\u3000mire", "x  x", "ß ﬁ Ⅸ ½",
             "Ka\u0300lo\u0308 MI\u0301RE", "U\u0308ber kalo", "<unk>", "kalo <unk> mire", "a<unk>b",
             "\u13a0\u0308x", "ab \ufdd0 cd"]  # decomposed capitals; a literal <unk>


# the interop extra itself: tokenizer.json is read and written by tokenizers, SentencePiece's model proto by protobuf
pytest.importorskip("tokenizers", reason="the interop extra is not installed: pip install 'bitextmine[interop]'")
pytest.importorskip("google.protobuf", reason="the interop extra is not installed: pip install 'bitextmine[interop]'")


def need(name: str):
    """Import a library a comparison loads the exported models in; absent, the test is skipped, naming the extra
    that brings it (``test``, which the README's test command installs)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        pytest.skip(f"{name} is not installed (pip install 'bitextmine[test]')")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # every model here is local: nothing may be fetched


def texts_sample() -> list[str]:
    s, t = toy_corpus(n=60, seed=5)
    return s + t + ODD_TEXTS


def vectors(model, texts):
    """bitextmine's sentence embeddings float32 (n, dim), as `encode` computes them."""
    from bitextmine.encoding.embed import SentenceEmbedder

    return SentenceEmbedder(model)(*model.tokenizer.encode(texts))


def assert_library_vectors(lib, model, texts, some_blank=True):
    """``lib`` (the other library's vectors of ``texts``) equal bitextmine's within TOL, except where a text has
    no known token: there bitextmine gives zeros (as for an empty text) and the library the mean of its unknown
    tokens' rows, which every such text shares."""
    from bitextmine.encoding.embed import nothing_known

    ours = vectors(model, texts)
    blank = nothing_known(*model.tokenizer.encode(texts), model.tokenizer.blank_ids())
    assert blank.any() == some_blank and not ours[blank].any()
    assert np.abs(ours[~blank] - lib[~blank]).max() < TOL


@pytest.fixture(scope="module")
def random_model(toy_model):
    """The toy model's SentencePiece tokenizer with a seeded random float16 table (dimension 24)."""
    rng = np.random.default_rng(7)
    emb = rng.normal(size=(toy_model.tokenizer.vocab_size, 24)).astype(np.float16).astype(np.float32)
    return Model(tokenizer=Tokenizer(toy_model.tokenizer.proto), embeddings=emb,
                 config={"encoder": "sp", "languages": ["xx", "yy"]})


@pytest.fixture(scope="module")
def saved_random(random_model, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("rand") / "m")
    random_model.save(path)
    return load_model(path)


@pytest.fixture(scope="module")
def exported(saved_random, tmp_path_factory):
    from bitextmine.interop.export import export_model

    base = tmp_path_factory.mktemp("exp")
    return {fmt: export_model(saved_random, str(base / fmt), fmt=fmt).path
            for fmt in ("sentence-transformers", "model2vec")}


# --- tokenizer.json against SentencePiece ---------------------------------------------------------------


def hf_ids(tok, texts):
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_tokenizer_json_gives_sentencepieces_ids(model_type, toy_model):
    from bitextmine.config import TokenizerConfig
    from bitextmine.interop.spm_json import tokenizer_from_sentencepiece
    from bitextmine.tokenizer import train_sentencepiece

    s, t = toy_corpus(n=2000, seed=3)
    proto = (toy_model.tokenizer.proto if model_type == "unigram" else
             train_sentencepiece(s + t, TokenizerConfig(vocab_size=400, model_type="bpe")))
    sp = Tokenizer(proto).sp
    texts = texts_sample()
    want = [list(x) for x in sp.encode(texts)]
    assert any(0 in x for x in want) and [] in want  # the sample has unknown characters and an empty text
    assert hf_ids(tokenizer_from_sentencepiece(proto), texts) == want
    if model_type == "bpe":  # named, with the format that takes it
        with pytest.raises(ModelFormatError, match="a SentencePiece bpe model; a model2vec export needs a unigram one"):
            tokenizer_from_sentencepiece(proto, unknown_as="\uf8ff")


def test_unknown_runs_become_one_extra_token_where_sentencepiece_gives_unk(toy_model):
    from bitextmine.interop.spm_json import characters_without_own_piece, tokenizer_from_sentencepiece

    proto, n = toy_model.tokenizer.proto, toy_model.tokenizer.vocab_size
    assert characters_without_own_piece(proto) == set()
    texts = texts_sample()
    want = [[n if i == 0 else i for i in x] for x in toy_model.tokenizer.sp.encode(texts)]
    assert hf_ids(tokenizer_from_sentencepiece(proto, unknown_as="\uf8ff"), texts) == want
    with pytest.raises(ModelFormatError, match="a piece holds 'k', the character that stands for a run of unknown characters"):
        tokenizer_from_sentencepiece(proto, unknown_as="k")


def test_json_tokenizer_batched_equals_one_at_a_time(exported):
    m = load_model(exported["sentence-transformers"])
    texts = texts_sample()
    one = m.tokenizer.encode_lists(texts, threads=1)
    batched = m.tokenizer.encode_lists(texts, threads=0)
    assert all(np.array_equal(a, b) for a, b in zip(one, batched)) and all(a.dtype == np.int32 for a in one)


def test_missing_tokenizers_names_the_pip_command(monkeypatch):
    import sys

    from bitextmine.interop.spm_json import tokenizers_module

    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'bitextmine\[interop\]'"):
        tokenizers_module()


# --- export: the libraries give bitextmine's vectors ----------------------------------------------------


def test_exported_sentence_transformers_model_gives_bitextmines_vectors(exported, saved_random):
    st = need("sentence_transformers")
    texts = texts_sample()
    got = st.SentenceTransformer(exported["sentence-transformers"], device="cpu").encode(texts)
    assert_library_vectors(got, saved_random, texts)


def test_exported_model2vec_model_gives_bitextmines_vectors(exported, saved_random):
    m2v = need("model2vec")
    texts = texts_sample()
    model = m2v.StaticModel.from_pretrained(exported["model2vec"])
    assert_library_vectors(model.encode(texts), saved_random, texts)
    assert model.language == ["xx", "yy"]  # read from the model card's metadata


def test_round_trip_through_either_library_is_byte_identical(exported, saved_random):
    texts = texts_sample()
    want = vectors(saved_random, texts)
    for fmt, path in exported.items():
        back = load_model(path)
        assert back.config["source_format"] == fmt and back.config["source_fingerprint"] == saved_random.fingerprint
        assert np.array_equal(vectors(back, texts), want), fmt


def test_round_trip_through_encode_files_worker_processes(exported, saved_random, tmp_path):
    """The imported tokenizer travels to forked workers (many batches): the .npy bytes are the source model's."""
    from bitextmine.config import EncodeConfig
    from bitextmine.encoding import encode_files
    from conftest import write_lines

    src = write_lines(tmp_path / "in.txt", [t for t in texts_sample() * 5 if t.strip()])
    cfg = EncodeConfig(batch_size=16, threads=2)
    encode_files([src], str(tmp_path / "a.npy"), saved_random, config=cfg)
    encode_files([src], str(tmp_path / "b.npy"), load_model(exported["sentence-transformers"]), config=cfg)
    assert np.array_equal(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))


def test_export_keeps_the_mining_settings(tmp_path, toy_model):
    from bitextmine.interop.export import export_model

    section = {"version": 1, "chosen_on": "a test", "languages": {"de": {"threshold": 1.2, "min_z": 4.0,
                                                                          "min_cosine": 0.4}}}
    m = Model(tokenizer=toy_model.tokenizer, embeddings=toy_model.embeddings, config={"encoder": "sp",
                                                                                       "mining": section})
    export_model(m, str(tmp_path / "st"), fmt="sentence-transformers")
    assert load_model(str(tmp_path / "st")).mining == section


@pytest.mark.parametrize("fmt", ["sentence-transformers", "model2vec"])
def test_export_cli_writes_the_files_and_a_card(fmt, saved_random, tmp_path):
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["export", saved_random.path, str(out), "--format", fmt])
    assert r.exit_code == 0, r.output
    assert r.output == (f"wrote {fmt} model {out} ({5 if fmt == 'model2vec' else 7} files) of the model "
                        f"{saved_random.fingerprint}\n")
    names = {os.path.relpath(os.path.join(d, f), out) for d, _, fs in os.walk(out) for f in fs}
    if fmt == "model2vec":
        assert names == {"config.json", "model.safetensors", "tokenizer.json", "README.md", "bitextmine.json"}
    else:
        assert names == {"modules.json", "config_sentence_transformers.json", "0_StaticEmbedding/tokenizer.json",
                         "0_StaticEmbedding/model.safetensors", "1_Normalize/config.json", "README.md",
                         "bitextmine.json"}
    card = (out / "README.md").read_text(encoding="utf-8")
    assert card.startswith(f"---\nlibrary_name: {fmt}\n") and f"`{saved_random.fingerprint}`" in card
    assert "language:\n- xx\n- yy\n" in card


def test_export_refuses_a_used_directory_and_models_it_cannot_write(saved_random, toy_model, tmp_path, monkeypatch):
    from bitextmine.interop.export import export_model
    from bitextmine.tokenizer import VocabTokenizer

    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("x")
    r = CliRunner().invoke(main, ["export", saved_random.path, str(tmp_path / "used"), "--format", "model2vec"])
    assert r.exit_code != 0
    assert r.output == f"Error: {tmp_path / 'used'}: exists and is not an empty directory; choose a new one\n"
    monkeypatch.chdir(tmp_path)  # a directory named like the bundled model's alias: which one was meant is not guessed
    shutil.copytree(saved_random.path, "default")
    r = CliRunner().invoke(main, ["export", "default", str(tmp_path / "d"), "--format", "model2vec"])
    assert r.exit_code != 0 and "a directory ./default exists here; write ./default" in r.output
    r = CliRunner().invoke(main, ["export", "./default", str(tmp_path / "d"), "--format", "model2vec"])
    assert r.exit_code == 0 and saved_random.fingerprint in r.output
    word = Model(tokenizer=VocabTokenizer("word", ["<unk>", "a"]), embeddings=np.zeros((2, 4), np.float32),
                 config={"encoder": "word"})
    with pytest.raises(ModelFormatError, match="a word model; only sp models"):
        export_model(word, str(tmp_path / "w"), fmt="model2vec")
    separate = Model(tokenizer=toy_model.tokenizer, embeddings=np.zeros((2 * toy_model.tokenizer.vocab_size, 4)),
                     config={"encoder": "sp", "separate_vocab": True})
    with pytest.raises(ModelFormatError, match="separate vocabularies"):
        export_model(separate, str(tmp_path / "s"), fmt="sentence-transformers")
    with pytest.raises(ConfigError, match="format 'onnx'"):
        export_model(saved_random, str(tmp_path / "o"), fmt="onnx")


# --- import: the libraries' own static models read with --model ------------------------------------------


def word_tokenizer(words):
    from tokenizers import Tokenizer as HF
    from tokenizers import models, normalizers, pre_tokenizers

    tok = HF(models.WordLevel({w: i for i, w in enumerate(["[UNK]", *words])}, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


IMPORT_TEXTS = ["kalo mire tusa", "Kalo unknown mire", "nothing known here", "", "kalo " * 40, "mire, kalo!"]


@pytest.mark.parametrize("normalize", [True, False])
def test_a_sentence_transformers_static_model_reads_with_its_vectors(normalize, tmp_path):
    st = need("sentence_transformers")
    from sentence_transformers.sentence_transformer.modules import Normalize, StaticEmbedding

    words = sorted(set(" ".join(toy_corpus(n=200, seed=1)[0]).split()))
    weights = np.random.default_rng(3).normal(size=(len(words) + 1, 16)).astype(np.float32)
    modules = [StaticEmbedding(word_tokenizer(words), embedding_weights=weights)] + ([Normalize()] if normalize else [])
    st.SentenceTransformer(modules=modules, device="cpu").save(str(tmp_path / "m"))
    texts = [" ".join(words[:3]), f"{words[0].upper()} unknown {words[1]}", *IMPORT_TEXTS]
    lib = st.SentenceTransformer(str(tmp_path / "m"), device="cpu").encode(texts)
    model = load_model(str(tmp_path / "m"))
    assert model.config["source_format"] == "sentence-transformers" and model.config["normalize"] is normalize
    if not normalize:  # bitextmine's vectors are unit length: the library's divided by their norm
        lib = lib / np.maximum(np.linalg.norm(lib, axis=1, keepdims=True), 1e-12)
    assert_library_vectors(lib, model, texts)


@pytest.mark.parametrize("kind", ["plain", "quantized", "max_length"])
def test_a_model2vec_model_reads_with_its_vectors(kind, tmp_path):
    m2v = need("model2vec")
    words = sorted(set(" ".join(toy_corpus(n=200, seed=1)[0]).split()))
    rng = np.random.default_rng(4)
    vecs = rng.normal(size=(len(words) + 1, 16)).astype(np.float32)
    extra = {}
    if kind == "quantized":  # vocabulary quantization: rows shared through a mapping, per-token weights
        extra = {"token_mapping": rng.integers(0, 10, len(words) + 1), "weights": rng.uniform(0.5, 2, len(words) + 1)}
        vecs = vecs[:10]
    m = m2v.StaticModel(vecs, word_tokenizer(words), normalize=True,
                        max_length=5 if kind == "max_length" else None, **extra)
    m.save_pretrained(str(tmp_path / "m"))
    texts = [" ".join(words[:3]), f"{words[0]} unknown {words[1]}", *IMPORT_TEXTS]
    lib = m2v.StaticModel.from_pretrained(str(tmp_path / "m")).encode(texts)
    model = load_model(str(tmp_path / "m"))
    assert model.config["source_format"] == "model2vec"
    assert_library_vectors(lib, model, texts, some_blank=False)  # model2vec drops its unknown token itself


def test_an_unsupported_sentence_transformers_model_is_one_error_line(tmp_path):
    d = tmp_path / "tr"
    d.mkdir()
    (d / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    r = CliRunner().invoke(main, ["encode", "examples/de.txt", "-o", str(tmp_path / "x.npy"), "--model", str(d)])
    assert r.exit_code != 0
    assert r.output == (f"Error: {d / 'modules.json'}: modules sentence_transformers.models.Transformer, "
                        "sentence_transformers.models.Pooling; bitextmine reads sentence-transformers models made "
                        "of a StaticEmbedding module, optionally followed by Normalize\n")


@pytest.mark.parametrize("files, fmt", [
    ({"config.json": {"format_version": 2}}, "bitextmine"),
    ({"modules.json": []}, "sentence-transformers"),
    ({"config.json": {"model_type": "model2vec"}, "modules.json": [], "model.safetensors": "", "tokenizer.json": ""},
     "model2vec"),
    ({"config.json": {}, "model.safetensors": "", "tokenizer.json": ""}, "model2vec"),
    ({"modules.json": [], "model.safetensors": "", "tokenizer.json": ""}, "sentence-transformers"),
    # a transformer saved by sentence-transformers: its own config.json, weights and tokenizer beside modules.json
    ({"config.json": {"model_type": "bert"}, "model.safetensors": "", "tokenizer.json": "",
      "modules.json": [{"type": "sentence_transformers.models.Transformer"}]}, "sentence-transformers"),
    ({"config.json": {}, "model.safetensors": "", "tokenizer.json": "",  # as model2vec saves one
      "modules.json": [{"type": "sentence_transformers.models.StaticEmbedding", "path": "."}]}, "model2vec"),
    ({}, "bitextmine"),
])
def test_format_is_read_from_the_files(files, fmt, tmp_path):
    from bitextmine.interop.load import detect_format

    for name, content in files.items():
        (tmp_path / name).write_text(content if isinstance(content, str) else json.dumps(content))
    assert detect_format(str(tmp_path)) == fmt


# --- model cards ---------------------------------------------------------------------------------------


def test_train_writes_a_model_card(toy_model_dir, toy_model):
    card = open(os.path.join(toy_model_dir, "README.md"), encoding="utf-8").read()
    assert card.startswith("---\nlibrary_name: bitextmine\n")
    assert f"# bitextmine model `{toy_model.fingerprint}`" in card
    for part in ("## Training data", "train.src", "## Recipe", "| epochs | 2 |", "## Dev figures measured during training"):
        assert part in card, part
    best = toy_model.config["training"]["best_dev_score"]
    assert f"({best:.2f})" in card


def test_the_bundled_model_has_a_card_with_its_figures_and_commands():
    from bitextmine.model import default_model_dir

    model = load_model(None)
    card = open(os.path.join(default_model_dir(), "README.md"), encoding="utf-8").read()
    assert f"`{model.fingerprint}`" in card
    for lang in model.config["languages"]:
        assert f"- {lang}\n" in card
    for part in ("python tools/train_default.py", "python tools/eval_default.py", "87.2", "74.8"):
        assert part in card, part


# --- the bundled model on the dev sentences of all nine languages (slow) ---------------------------------


def dev_sentences() -> list[str]:
    out = []
    for lang in LANGS:
        for side in (lang, "eng"):
            with open(shared_path("dev", "tatoeba", "v1", f"tatoeba.{lang}-eng.{side}"), encoding="utf-8") as f:
                out += f.read().split("\n")[:-1]
    return out


@pytest.fixture(scope="module")
def bundled_exports(tmp_path_factory):
    from bitextmine.interop.export import export_model

    base, model = tmp_path_factory.mktemp("bundled"), load_model(None)
    return model, {fmt: export_model(model, str(base / fmt), fmt=fmt).path
                   for fmt in ("sentence-transformers", "model2vec")}


@pytest.mark.slow
def test_bundled_model_tokenizer_json_agrees_with_sentencepiece_on_dev_sentences(bundled_exports):
    from bitextmine.interop.load import load_static_model

    model, paths = bundled_exports
    import unicodedata

    texts = dev_sentences()
    assert len(texts) == 16000
    # and decomposed capitals, which the precompiled map alone folded to the bare letter ("U" + U+0308 to "u")
    texts += [unicodedata.normalize("NFD", t.upper()) for t in texts[::4]]
    want = model.tokenizer.encode_lists(texts)
    assert sum(0 in x for x in want) > 0  # some dev sentences hold characters outside the vocabulary
    for fmt, path in paths.items():
        got = load_static_model(path).tokenizer
        got.drop_ids = []  # compare the tokenizer.json's own ids (model2vec's reading drops <unk>)
        n = model.tokenizer.vocab_size
        same = [np.array_equal(np.where(w == 0, n, w) if fmt == "model2vec" else w, g)
                for w, g in zip(want, got.encode_lists(texts))]
        assert all(same), f"{fmt}: {same.count(False)} of {len(texts)} dev sentences tokenised differently"


@pytest.mark.slow
def test_bundled_model_exports_give_its_vectors_on_dev_sentences(bundled_exports):
    st, m2v = need("sentence_transformers"), need("model2vec")
    model, paths = bundled_exports
    texts = dev_sentences()
    want = vectors(model, texts)
    got = st.SentenceTransformer(paths["sentence-transformers"], device="cpu").encode(texts, batch_size=512)
    assert np.abs(got - want).max() < TOL
    assert np.abs(m2v.StaticModel.from_pretrained(paths["model2vec"]).encode(texts) - want).max() < TOL
    for path in paths.values():
        assert np.array_equal(vectors(load_model(path), texts), want)


@pytest.mark.slow
def test_the_exports_second_stage_judges_lines_with_unknown_characters_as_the_model_does(bundled_exports, tmp_path):
    """The model2vec export reads a run of unknown characters as one token past the vocabulary (its row the <unk>
    row); the second stage copied with it reads that token as <unk>, as the tables know it: both exports give the
    model's probabilities, where the model2vec one stopped with an error at the first such line."""
    import io

    from bitextmine.config import ScoreConfig
    from bitextmine.scoring import score_file

    model, paths = bundled_exports
    de = open(shared_path("dev", "tatoeba", "v1", "tatoeba.deu-eng.deu"), encoding="utf-8").read().split("\n")[:60]
    en = open(shared_path("dev", "tatoeba", "v1", "tatoeba.deu-eng.eng"), encoding="utf-8").read().split("\n")[:60]
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("".join(f"{a}\t{b} \U00013000\n" for a, b in zip(de, en)), encoding="utf-8")
    assert any(0 in ids for ids in model.tokenizer.encode_lists([f"{en[0]} \U00013000"]))

    def probs(m) -> str:
        out = io.StringIO()
        score_file(str(tsv), out, m, score=ScoreConfig(margin="prob", src_lang="de", tgt_lang="en"))
        return out.getvalue()

    want = probs(model)
    assert want.count("\n") == 60
    for path in paths.values():
        assert probs(load_model(path)) == want


def test_an_export_changed_after_it_was_written_is_refused_and_an_interrupted_one_leaves_nothing(
        saved_random, tmp_path, monkeypatch):
    need("tokenizers")
    from safetensors.numpy import load_file, save_file

    from bitextmine.interop import export as ex

    out = tmp_path / "st"
    ex.export_model(saved_random, str(out), fmt="sentence-transformers")
    assert load_model(str(out)).config["source_fingerprint"] == saved_random.fingerprint
    again = tmp_path / "again"
    ex.export_model(saved_random, str(again), fmt="sentence-transformers")
    st = need("sentence_transformers")
    st.SentenceTransformer(str(again), device="cpu").save(str(again))  # saved unchanged: tokenizer.json rewritten
    assert load_model(str(again)).config["source_fingerprint"] == saved_random.fingerprint
    weights = out / "0_StaticEmbedding" / "model.safetensors"
    table = load_file(str(weights))["embedding.weight"]
    save_file({"embedding.weight": table * 1.01}, str(weights))  # as a fine-tuned model saved in place
    with pytest.raises(ModelFormatError, match=r"bitextmine.json: written for the exported model .*changed since the export"):
        load_model(str(out))

    def stop(*a):
        raise KeyboardInterrupt

    monkeypatch.setattr(ex, "_seal", stop)
    with pytest.raises(KeyboardInterrupt):
        ex.export_model(saved_random, str(tmp_path / "cut"), fmt="model2vec")
    assert sorted(os.listdir(tmp_path)) == ["again", "st"]  # neither the export nor its partial folder
    monkeypatch.undo()
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")  # into the current, empty directory, as "."
    ex.export_model(saved_random, ".", fmt="model2vec")
    assert load_model(".").config["source_fingerprint"] == saved_random.fingerprint


def test_the_card_quotes_what_yaml_would_read_as_another_type():
    """Norwegian "no" written bare read back as false (model2vec's StaticModel.language among the readers)."""
    yaml = need("yaml")
    from bitextmine.interop.card import front_matter

    meta = {"language": ["en", "no", "nb", "yes", "ON", "1e3", "zh-TW", 'a"b\\c'], "library_name": "null"}
    assert yaml.safe_load(front_matter(meta).strip().strip("-")) == meta


def test_a_sentence_transformers_model_with_a_default_prompt_is_refused(exported, tmp_path):
    """sentence-transformers puts the default prompt before every text; read without it, the vectors differed
    (cosine 0.87-0.94) without a word."""
    import shutil

    d = tmp_path / "prompted"
    shutil.copytree(exported["sentence-transformers"], d)
    cfg = json.loads((d / "config_sentence_transformers.json").read_text())
    (d / "bitextmine.json").unlink()
    cfg.update(prompts={"query": "query: "}, default_prompt_name="query")
    (d / "config_sentence_transformers.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelFormatError, match="default_prompt_name 'query': sentence-transformers puts 'query: '"):
        load_model(str(d))
    cfg.update(default_prompt_name=None)  # prompts to choose from, none by default: read as before
    (d / "config_sentence_transformers.json").write_text(json.dumps(cfg))
    assert load_model(str(d)).dim == 24


@pytest.mark.parametrize("value", ["abc", -1, 0, 1e30, True, 2.5])
def test_a_model2vec_max_length_out_of_form_is_refused(exported, tmp_path, value):
    bad = str(tmp_path / "m2v")
    shutil.copytree(exported["model2vec"], bad)
    path = os.path.join(bad, "config.json")
    cfg = json.load(open(path))
    cfg["max_length"] = value
    json.dump(cfg, open(path, "w"))
    with pytest.raises(ModelFormatError, match=r"config.json: max_length .*expected null or a whole number"):
        load_model(bad)


def test_a_foreign_table_with_a_value_that_is_not_finite_is_refused(exported, tmp_path):
    from safetensors.numpy import load_file, save_file

    bad = str(tmp_path / "m2v")
    shutil.copytree(exported["model2vec"], bad)
    path = os.path.join(bad, "model.safetensors")
    tensors = load_file(path)
    tensors["embeddings"] = tensors["embeddings"].copy()
    tensors["embeddings"][3, 1] = np.nan
    save_file(tensors, path)
    with pytest.raises(ModelFormatError, match="row 3 of the table holds a value that is not a finite number"):
        load_model(bad)
