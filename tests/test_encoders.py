"""Every encoder of the seed papers trains, saves and loads; training options; SIF against numpy."""

import os

import numpy as np
import pytest
import torch

from bitextmine.config import EncodeConfig, TokenizerConfig, TrainConfig
from bitextmine.corpus import CorpusSpec
from bitextmine.encoding.pipeline import encode
from bitextmine.errors import ConfigError, ModelFormatError
from bitextmine.evaluation.metrics import retrieval_accuracy
from bitextmine.loading import load_model
from bitextmine.model import shuffle_words
from bitextmine.sif import first_component, sif_weights
from bitextmine.tokenizer import VocabTokenizer
from bitextmine.training import train

from conftest import toy_corpus

FEW = dict(dim=16, epochs=1, batch_size=16, megabatch_max=3, megabatch_every=5, dev_pairs=100, device="cpu",
           checkpoint_every=0, max_steps=0, sif_sample=400)
TOK = TokenizerConfig(vocab_size=600, sample_sentences=4000, token_vocab_size=5000)


@pytest.fixture(scope="module")
def small_files(tmp_path_factory):
    from conftest import write_lines

    d = tmp_path_factory.mktemp("enc")
    src, tgt = toy_corpus(600, seed=3)
    return write_lines(d / "s", src), write_lines(d / "t", tgt)


@pytest.mark.parametrize("encoder", ["sp", "word", "trigram", "blstm-sp"])
@pytest.mark.parametrize("untrained", [False, True])
def test_every_encoder_trains_saves_and_loads(tmp_path, small_files, encoder, untrained):
    out = str(tmp_path / encoder)
    res = train([CorpusSpec(src=small_files[0], tgt=small_files[1])], out,
                config=TrainConfig(**FEW, encoder=encoder, untrained=untrained), tokenizer_config=TOK)
    assert (res.steps == 0) if untrained else (res.steps >= 540 // 16)  # 540 training pairs, 16 per mini-batch
    m = load_model(out)
    assert m.encoder == encoder and m.dim == 16 and m.config["training"]["untrained"] == untrained
    tok_file = "vocab.txt" if encoder in ("word", "trigram") else "sentencepiece.model"
    assert os.path.exists(os.path.join(out, tok_file))
    assert m.tensors["piece_counts"].sum() > 0 and m.tensors["sif_pc"].shape == (16,)
    if untrained:  # normal(0, 1) initialisation
        assert 0.8 < float(m.embeddings.std()) < 1.2
    words = open(small_files[0], encoding="utf-8").readline().split()
    texts = [" ".join(words[:3]), "", " ".join(words[-4:]), "xqzv wvqx"]
    x = encode(texts, m, config=EncodeConfig(device="cpu", batch_size=2))
    assert x.shape == (4, 16) and x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x[[0, 2]], axis=1), 1, rtol=1e-5)
    np.testing.assert_array_equal(x[1], 0)
    if encoder == "word":  # every token unknown: embedded as an empty line
        np.testing.assert_array_equal(x[3], 0)
    # batching does not change vectors
    one = np.concatenate([encode([t], m, config=EncodeConfig(device="cpu")) for t in texts])
    np.testing.assert_allclose(one, x, atol=1e-5)
    xs = encode(texts, m, config=EncodeConfig(device="cpu", sif=True))
    assert xs.shape == (4, 16) and not np.allclose(xs, x)


def test_trained_encoders_learn_the_toy_mapping(toy_files, tmp_path):
    # the toy target language rewrites each word, so word and trigram models must learn it from pairs
    src, tgt = toy_corpus(300, seed=9)
    for encoder in ("word", "blstm-sp"):
        out = str(tmp_path / encoder)
        train([CorpusSpec(src=toy_files[0], tgt=toy_files[1])], out,
              config=TrainConfig(**{**FEW, "dim": 32, "epochs": 2}, encoder=encoder), tokenizer_config=TOK)
        m = load_model(out)
        acc = retrieval_accuracy(encode(src, m, config=EncodeConfig(device="cpu")),
                                 encode(tgt, m, config=EncodeConfig(device="cpu")))
        assert min(acc) > 0.3, (encoder, acc)  # chance: 1/300 (measured: word ~0.9, blstm-sp ~0.45 after 2 epochs)


def test_word_and_trigram_tokens():
    w = VocabTokenizer.build("word", ["Hello, world!", "hello again"], 10)
    assert w.tokens[0] == "<unk>" and w.tokens[1] == "hello"
    assert w.split("Hello, world!") == ["hello", ",", "world", "!"]
    ids = w.encode_lists(["hello there"])[0]
    assert ids[0] == 1 and ids[1] == 0  # "there" is unknown
    t = VocabTokenizer.build("trigram", ["ab cde"], 100)
    assert t.split("ab Cde") == ["#ab", "ab#", "#cd", "cde", "de#"]
    assert t.split("a") == ["#a#"]
    assert VocabTokenizer.from_proto(t.proto).tokens == t.tokens
    with pytest.raises(ModelFormatError, match="expected 'bitextmine-vocab 1 KIND'"):
        VocabTokenizer.from_proto(b"nonsense\n")


def test_sif_matches_a_direct_numpy_computation(toy_model_dir, tmp_path, small_files):
    out = str(tmp_path / "m")
    train([CorpusSpec(src=small_files[0], tgt=small_files[1])], out,
          config=TrainConfig(**{**FEW, "fp16": False}, encoder="sp"), tokenizer_config=TOK)
    m = load_model(out)
    texts = ["ka lo mi re", "tu sa", "ne po di gu fe ba", "lo lo lo"]
    got = encode(texts, m, config=EncodeConfig(device="cpu", sif=True))
    a = m.config["sif_a"]
    counts = m.tensors["piece_counts"].astype(np.float64)
    p = counts / counts.sum()
    u = m.tensors["sif_pc"].astype(np.float64)
    want = []
    for t in texts:
        ids = m.tokenizer.sp.encode(t)
        v = sum(a / (a + p[i]) * m.embeddings[i].astype(np.float64) for i in ids) / len(ids)
        v = v - (v @ u) * u
        want.append(v / np.linalg.norm(v))
    np.testing.assert_allclose(got, np.array(want), atol=1e-5)
    # the stored component is the first singular vector of weighted training sentences
    assert abs(np.linalg.norm(u) - 1) < 1e-5


def test_sif_helpers_on_a_hand_case():
    np.testing.assert_allclose(sif_weights(np.array([0, 1, 3]), 0.25), [1.0, 0.25 / 0.5, 0.25 / 1.0])
    x = np.array([[3.0, 0.0], [4.0, 0.1], [-5.0, 0.0]])
    np.testing.assert_allclose(first_component(x), [1.0, 0.0], atol=1e-2)


def test_sif_on_a_model_without_counts_is_a_clear_error(toy_model):
    from dataclasses import replace

    bare = replace(toy_model, tensors={})  # as models of format version 1
    with pytest.raises(ModelFormatError, match="SIF needs a model trained"):
        encode(["a"], bare, config=EncodeConfig(device="cpu", sif=True))


def test_bundled_model_has_sif_statistics():
    m = load_model(None)
    assert m.tensors["piece_counts"].shape == (m.embeddings.shape[0],) and m.tensors["piece_counts"].sum() > 10**7
    x = encode(["Der Schlüssel liegt unter der Fußmatte.", "The key is under the doormat."], m,
               config=EncodeConfig(device="cpu", sif=True))
    assert float(x[0] @ x[1]) > 0.5


def _tiny_mega_batch(n=12, d=5, seed=0, dup=3):
    """Seeded L2-normalised (es, et) and text ids with a few repeated texts."""
    g = torch.Generator().manual_seed(seed)
    es = torch.nn.functional.normalize(torch.randn(n, d, generator=g), dim=1)
    et = torch.nn.functional.normalize(es + 0.7 * torch.randn(n, d, generator=g), dim=1)
    s_text, t_text = torch.arange(n), torch.arange(n)
    s_text[:dup], t_text[n - dup:] = s_text[dup : 2 * dup], t_text[:dup]  # equal texts in other pairs
    return es, et, s_text, t_text


def _brute_hardest(es, et, s_text, t_text):
    sim = (es.double() @ et.double().T).numpy()
    n = len(sim)
    t_neg = [max((j for j in range(n) if t_text[j] != t_text[i]), key=lambda j: (sim[i, j], -j)) for i in range(n)]
    s_neg = [max((j for j in range(n) if s_text[j] != s_text[i]), key=lambda j: (sim[j, i], -j)) for i in range(n)]
    return np.array(t_neg), np.array(s_neg)


@pytest.mark.parametrize("mode", ["max", "random", "mix"])
def test_chosen_negatives_match_a_reference(mode):
    from bitextmine.training.negatives import choose_negatives

    n, seed = 12, 4
    es, et, s_text, t_text = _tiny_mega_batch(n)
    hard_t, hard_s = _brute_hardest(es, et, s_text, t_text)
    cfg = TrainConfig(negatives=mode, mix_prob=0.5)
    t_neg, s_neg, t_ok, s_ok = choose_negatives(es, et, s_text, t_text, cfg, torch.Generator().manual_seed(seed))
    # the reference: the documented draws of a generator with the same seed, in order
    g = torch.Generator().manual_seed(seed)
    off_t, off_s = torch.randint(1, n, (n,), generator=g).numpy(), torch.randint(1, n, (n,), generator=g).numpy()
    rand_t, rand_s = (np.arange(n) + off_t) % n, (np.arange(n) + off_s) % n
    if mode == "max":
        want_t, want_s = hard_t, hard_s
    elif mode == "random":
        want_t, want_s = rand_t, rand_s
    else:
        use_t, use_s = (torch.rand(n, generator=g) < 0.5).numpy(), (torch.rand(n, generator=g) < 0.5).numpy()
        assert 0 < use_t.sum() < n and 0 < use_s.sum() < n  # both kinds occur in this seeded case
        want_t, want_s = np.where(use_t, hard_t, rand_t), np.where(use_s, hard_s, rand_s)
    np.testing.assert_array_equal(t_neg.numpy(), want_t)
    np.testing.assert_array_equal(s_neg.numpy(), want_s)
    assert (want_t != np.arange(n)).all() and (want_s != np.arange(n)).all()  # never the pair itself
    # a negative sharing the positive's text is switched off; hardest ones never do
    np.testing.assert_array_equal(t_ok.numpy(), t_text.numpy()[want_t] != t_text.numpy())
    np.testing.assert_array_equal(s_ok.numpy(), s_text.numpy()[want_s] != s_text.numpy())
    if mode == "random":
        assert not t_ok.all() and not s_ok.all()  # the seeded draws hit repeated texts: the check is not vacuous


def test_negative_modes_are_recorded(tmp_path, small_files):
    out = str(tmp_path / "mix")
    res = train([CorpusSpec(src=small_files[0], tgt=small_files[1])], out,
                config=TrainConfig(**FEW, negatives="mix"), tokenizer_config=TOK)
    assert res.steps >= 33 and load_model(out).config["training"]["negatives"] == "mix"


def test_paraphrase_training(tmp_path):
    from conftest import write_lines

    rng = np.random.default_rng(4)
    src, _ = toy_corpus(400, seed=5)
    # monolingual paraphrases: the same words, one dropped
    para = [" ".join(w for k, w in enumerate(s.split()) if k != rng.integers(len(s.split()))) for s in src]
    a, b = write_lines(tmp_path / "a", src), write_lines(tmp_path / "b", para)
    out = str(tmp_path / "m")
    res = train([CorpusSpec(src=a, tgt=b)], out, config=TrainConfig(**FEW, paraphrase=True), tokenizer_config=TOK)
    assert res.steps > 0 and load_model(out).config["training"]["paraphrase"]


@pytest.mark.parametrize("chunk", [3, 4, 64])
def test_paraphrase_negatives_match_brute_force(chunk):
    from bitextmine.training.negatives import paraphrase_negatives

    n = 10
    g = torch.Generator().manual_seed(0)
    es = torch.nn.functional.normalize(torch.randn(n, 4, generator=g), dim=1)
    et = torch.nn.functional.normalize(es + 0.1 * torch.randn(n, 4, generator=g), dim=1)  # pairs most similar
    s_text = torch.arange(n)
    t_text = torch.arange(n) + 100
    t_text[3] = s_text[7]  # a target equal to another pair's source: excluded for pair 3 in both places
    et[3] = es[7]  # ... with an equal vector, so the exclusion by text is what keeps it out
    ns, nt, oks, okt = paraphrase_negatives(es, et, s_text, t_text, chunk=chunk)
    pool, pool_text = torch.cat([es, et]).double(), torch.cat([s_text, t_text])
    for negs, ok, x in ((ns, oks, es), (nt, okt, et)):
        for i in range(n):
            own = {int(s_text[i]), int(t_text[i])}
            allowed = [j for j in range(2 * n) if int(pool_text[j]) not in own]
            sims = pool @ x[i].double()
            want = max(allowed, key=lambda j: (float(sims[j]), -j))
            assert int(pool_text[negs[i]]) not in own and int(negs[i]) == want and bool(ok[i])
    # every pooled sentence one of the pair's texts: invalid
    one = torch.ones(1, 4) / 2
    _, _, oks, okt = paraphrase_negatives(one, one, torch.tensor([0]), torch.tensor([1]))
    assert not oks.any() and not okt.any()


def test_init_from_with_regularisation_stays_closer(tmp_path, small_files, toy_model_dir):
    spec = [CorpusSpec(src=small_files[0], tgt=small_files[1])]
    init = load_model(toy_model_dir)
    dists = {}
    for lam in (0.0, 10.0):
        out = str(tmp_path / f"r{lam}")
        said = []
        train(spec, out, config=TrainConfig(**{**FEW, "dim": init.dim + 16, "fp16": False}, reg_to_init=lam),
              init_from=toy_model_dir, progress=lambda e: said.append(e.get("message", "")))
        m = load_model(out)
        assert m.tokenizer.proto == init.tokenizer.proto
        assert m.config["training"]["init_fingerprint"] == init.fingerprint
        # the model's own dimension and tokenizer, recorded as such (--dim does not apply to its weights)
        assert m.dim == init.dim == m.config["training"]["dim"]
        assert f"--init-from: the model's own dimension, {init.dim} (not {init.dim + 16})" in said
        assert m.config["training"]["tokenizer"] == {"init_from": os.path.basename(toy_model_dir)}
        dists[lam] = float(np.linalg.norm(m.embeddings - init.embeddings))
    assert 0 < dists[10.0] < dists[0.0]
    with pytest.raises(ConfigError, match="needs --init-from"):
        train(spec, str(tmp_path / "x"), config=TrainConfig(**FEW, reg_to_init=1.0), tokenizer_config=TOK)


def test_sts_pairs_above_the_cutoff_are_the_positives(tmp_path, toy_model_dir):
    from conftest import write_lines

    src, tgt = toy_corpus(200, seed=6)
    rows = [f"{s},{t},{4.0 if i % 2 else 2.0}" for i, (s, t) in enumerate(zip(src, tgt))]
    csv = write_lines(tmp_path / "sts.csv", rows)
    logs = []
    out = str(tmp_path / "m")
    train([], out, config=TrainConfig(**{**FEW, "dim": 32, "dev_pairs": 0}, sts_min_score=3.8), init_from=toy_model_dir,
          sts_pairs=[csv], progress=lambda e: logs.append(e.get("message", "")))
    assert any("100 of 200 STS pairs scored >= 3.8" in m for m in logs)
    assert load_model(out).config["training"]["pairs"] == 100


def test_shuffle_words_permutes_whole_words():
    # pieces 1 and 2 start words, 3 continues one: sentence 1 = [1 3][2][2], sentence 2 = [3][1]
    word_start = torch.tensor([False, True, True, False])
    ids = torch.tensor([1, 3, 2, 2, 3, 1])
    offsets = torch.tensor([0, 4])
    g = torch.Generator().manual_seed(0)
    seen1, seen2 = set(), set()
    for _ in range(40):
        out = shuffle_words(ids, offsets, word_start, 1.0, g).tolist()
        seen1.add(tuple(out[:4]))
        seen2.add(tuple(out[4:]))
    assert seen1 == {(1, 3, 2, 2), (2, 1, 3, 2), (2, 2, 1, 3)}
    assert seen2 == {(3, 1), (1, 3)}
    assert shuffle_words(ids, offsets, word_start, 0.0, g).tolist() == ids.tolist()


def test_separate_vocabularies(tmp_path, small_files):
    out = str(tmp_path / "sep")
    train([CorpusSpec(src=small_files[0], tgt=small_files[1])], out,
          config=TrainConfig(**FEW, separate_vocab="tgt"), tokenizer_config=TOK)
    m = load_model(out)
    V = m.tokenizer.vocab_size
    assert m.config["separate_vocab"] and m.embeddings.shape == (2 * V, 16) and m.marked_offset == V
    # target-side pieces were counted in the second half of the table, source pieces in the first
    counts = m.tensors["piece_counts"]
    assert counts[:V].sum() > 0 and counts[V:].sum() > 0
    text = ["lo ka mi"]
    plain = encode(text, m, config=EncodeConfig(device="cpu"))
    marked = encode(text, m, config=EncodeConfig(device="cpu", marked=True))
    ids = m.tokenizer.sp.encode(text[0])
    want = m.embeddings[np.array(ids) + V].mean(0)
    np.testing.assert_allclose(marked[0], want / np.linalg.norm(want), atol=1e-5)
    assert not np.allclose(plain, marked)
    with pytest.raises(ConfigError, match="shared vocabulary"):
        encode(text, load_model(None), config=EncodeConfig(device="cpu", marked=True))


def test_separate_vocabulary_cli_round_trip(tmp_path, small_files):
    from click.testing import CliRunner

    from bitextmine.cli import main

    out = str(tmp_path / "sep")
    r = CliRunner().invoke(main, ["train", "--src", small_files[0], "--tgt", small_files[1], "--out", out,
                                  "--separate-vocab", "tgt", "--dim", "16", "--epochs", "1", "--vocab-size", "600",
                                  "--dev-pairs", "50", "--device", "cpu", "-q"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["eval", "tatoeba", small_files[0], small_files[1], "--model", out, "--marked", "tgt",
                                  "--json"])
    assert r.exit_code == 0, r.output
    import json

    marked = json.loads(r.output)["mean_accuracy"]
    unmarked = json.loads(CliRunner().invoke(main, ["eval", "tatoeba", small_files[0], small_files[1], "--model", out,
                                                    "--json"]).output)["mean_accuracy"]
    assert marked > unmarked  # the target side was trained with its own vectors


def test_blstm_resume_gives_the_same_model(tmp_path, small_files):
    """Checkpoints hold every parameter, Adam state and both random generators (dropout, word shuffling)."""
    spec = [CorpusSpec(src=small_files[0], tgt=small_files[1])]
    cfg = dict(FEW, epochs=2, dim=8, checkpoint_every=0)
    full, part = str(tmp_path / "full"), str(tmp_path / "part")
    train(spec, full, config=TrainConfig(**cfg, encoder="blstm-sp"), tokenizer_config=TOK)
    spm = os.path.join(full, "sentencepiece.model")
    train(spec, part, config=TrainConfig(**{**cfg, "max_steps": 20}, encoder="blstm-sp"), tokenizer_path=spm)
    train(spec, part, config=TrainConfig(**cfg, encoder="blstm-sp"), tokenizer_path=spm, resume=True)
    a = open(os.path.join(full, "embeddings.safetensors"), "rb").read()
    b = open(os.path.join(part, "embeddings.safetensors"), "rb").read()
    assert a == b


def test_amp_policy_bf16_for_the_lstm_only(monkeypatch):
    """auto = bf16 on CUDA GPUs of capability >= 8 (faked here) for blstm-sp; the averaging encoders never."""
    import bitextmine.device as device
    from bitextmine.training.loop import amp_dtype_for

    monkeypatch.setattr(device, "cuda_capability", lambda d="cuda": (8, 0))
    assert amp_dtype_for("auto", "blstm-sp", "cuda") is torch.bfloat16
    assert amp_dtype_for("bf16", "blstm-sp", "cpu") is torch.bfloat16
    assert all(amp_dtype_for(a, e, "cuda") is None for a in ("auto", "bf16", "off") for e in ("sp", "word", "trigram"))
    assert amp_dtype_for("auto", "blstm-sp", "cpu") is None and amp_dtype_for("off", "blstm-sp", "cuda") is None
    monkeypatch.setattr(device, "cuda_capability", lambda d="cuda": (7, 5))
    assert amp_dtype_for("auto", "blstm-sp", "cuda") is None
    with pytest.raises(ConfigError, match="amp 'fp16'"):
        amp_dtype_for("fp16", "blstm-sp", "cpu")


def test_amp_runs_the_lstm_in_bf16_with_float32_master_weights():
    """The CUDA amp path of the BiLSTM (lstm_in_dtype), run on the CPU: bf16 input and weights inside,
    float32 output, float32 gradients on the float32 weights."""
    from torch.nn.utils.rnn import pack_padded_sequence

    from bitextmine.model import lstm_in_dtype

    lstm = torch.nn.LSTM(6, 4, bidirectional=True, batch_first=True)
    seen = []
    lstm.register_forward_pre_hook(lambda m, args: seen.append((args[0].data.dtype, m.weight_ih_l0.dtype)))
    x = torch.randn(3, 5, 6, generator=torch.Generator().manual_seed(0))
    packed = pack_padded_sequence(x, torch.tensor([5, 2, 3]), batch_first=True, enforce_sorted=False)
    out, _ = lstm_in_dtype(lstm, packed, torch.bfloat16)
    assert seen == [(torch.bfloat16, torch.bfloat16)] and out.data.dtype == torch.float32
    out.data.sum().backward()
    assert lstm.weight_ih_l0.dtype == torch.float32 and lstm.weight_ih_l0.grad.dtype == torch.float32
    assert lstm.weight_ih_l0.grad.abs().sum() > 0
    seen.clear()
    ref, _ = lstm(packed)  # float32 as usual: the bf16 run is close to it
    assert seen == [(torch.float32, torch.float32)]
    np.testing.assert_allclose(out.data.detach().numpy(), ref.data.detach().numpy(), atol=3e-2)


def test_amp_leaves_averaging_encoders_float32(tmp_path, small_files):
    """--amp bf16 with an averaging encoder changes nothing (same model bytes) and says so."""
    spec = [CorpusSpec(src=small_files[0], tgt=small_files[1])]
    spm, logs, paths = None, [], []
    for amp in ("off", "bf16"):
        paths.append(str(tmp_path / amp))
        train(spec, paths[-1], config=TrainConfig(**{**FEW, "fp16": False}, amp=amp), tokenizer_config=TOK,
              tokenizer_path=spm, progress=lambda e: logs.append(e.get("message", "")))
        spm = os.path.join(paths[0], "sentencepiece.model")
    read = lambda p: open(os.path.join(p, "embeddings.safetensors"), "rb").read()  # noqa: E731
    assert read(paths[0]) == read(paths[1])
    assert any("amp applies to blstm-sp only" in m for m in logs)


@pytest.mark.slow  # bf16 LSTM steps on a CPU without native bf16 (AVX2 only) take minutes
def test_bf16_autocast_training_runs_and_learns(tmp_path):
    """--amp bf16 (the CUDA default; CPU autocast here) trains to a working model (bf16 LSTM; sp stays float32):
    250 steps on 1,000 toy pairs (retrieval 0.6-0.7 measured; 0.3 asked)."""
    from conftest import write_lines

    files = [write_lines(tmp_path / name, side) for name, side in zip(("s", "t"), toy_corpus(1000, seed=0))]
    src, tgt = toy_corpus(300, seed=9)
    for encoder in ("sp", "blstm-sp"):
        out = str(tmp_path / encoder)
        train([CorpusSpec(src=files[0], tgt=files[1])], out,
              config=TrainConfig(**{**FEW, "dim": 32, "epochs": 4}, encoder=encoder, amp="bf16"), tokenizer_config=TOK)
        m = load_model(out)
        acc = retrieval_accuracy(encode(src, m, config=EncodeConfig(device="cpu")),
                                 encode(tgt, m, config=EncodeConfig(device="cpu")))
        assert min(acc) > 0.3, (encoder, acc)


def test_spm_normalization_nmt_nfkc_cf_folds_case_in_the_stored_model(tmp_path):
    import random

    from bitextmine.config import TokenizerConfig
    from bitextmine.tokenizer import Tokenizer, train_sentencepiece

    rng = random.Random(0)
    words = ["The", "house", "Haus", "das", "is", "ist", "big", "Gross", "LAKE", "See"]
    sentences = [" ".join(rng.choice(words) for _ in range(8)) for _ in range(3000)]
    folded = Tokenizer(train_sentencepiece(sentences, TokenizerConfig(vocab_size=60, normalization="nmt_nfkc_cf")))
    plain = Tokenizer(train_sentencepiece(sentences, TokenizerConfig(vocab_size=60)))
    assert list(folded.encode_lists(["The HOUSE"])[0]) == list(folded.encode_lists(["the house"])[0])
    assert list(plain.encode_lists(["The HOUSE"])[0]) != list(plain.encode_lists(["the house"])[0])


def test_character_coverage_keeps_rare_characters_as_pieces():
    import random

    from bitextmine.config import TokenizerConfig
    from bitextmine.tokenizer import Tokenizer, train_sentencepiece

    rng = random.Random(0)
    words = ["the", "house", "haus", "das", "is", "ist", "big", "gross", "lake", "see"]
    sentences = [" ".join(rng.choice(words) for _ in range(8)) for _ in range(3000)]
    sentences += ["書 話 見"] * 5  # 15 of about 100,000 characters: under SentencePiece's 0.9995 cut
    unknown = lambda tok: sum(int(i) == 0 for i in tok.encode_lists(["書"])[0])  # noqa: E731 (unk_id 0)
    assert unknown(Tokenizer(train_sentencepiece(sentences, TokenizerConfig(vocab_size=80)))) == 1
    assert unknown(Tokenizer(train_sentencepiece(sentences, TokenizerConfig(vocab_size=80,
                                                                            character_coverage=1.0)))) == 0


def test_train_cli_passes_the_tokenizer_options_to_sentencepiece(tmp_path, small_files):
    from click.testing import CliRunner

    from bitextmine.cli import main

    out = str(tmp_path / "cf")
    r = CliRunner().invoke(main, ["train", "--src", small_files[0], "--tgt", small_files[1], "--out", out,
                                  "--spm-normalization", "nmt_nfkc_cf", "--character-coverage", "1.0", "--dim", "16",
                                  "--epochs", "1", "--vocab-size", "600", "--dev-pairs", "50", "--device", "cpu", "-q"])
    assert r.exit_code == 0, r.output
    tok = load_model(out).tokenizer
    chars = sorted(set("".join(open(small_files[0], encoding="utf-8").read().split())))
    assert all(0 not in list(tok.encode_lists([c])[0]) for c in chars)  # every character has a piece
    assert list(tok.encode_lists(["HAUS"])[0]) == list(tok.encode_lists(["haus"])[0])


def test_sentencepiece_trains_on_a_corpus_of_a_few_lines():
    """SentencePiece refuses an input cap of 1 to 100 sentences: a corpus that small trains with no cap (it was a
    traceback from its C++ trainer)."""
    from bitextmine.tokenizer import Tokenizer, train_sentencepiece

    sentences = toy_corpus(30, seed=4)[0]
    tok = Tokenizer(train_sentencepiece(sentences, TokenizerConfig(vocab_size=200)))
    assert tok.vocab_size > 10 and all(len(ids) for ids in tok.encode_lists(sentences[:3]))
