import json
import os

import numpy as np
import pytest
import torch

from bitextmine.config import TokenizerConfig, TrainConfig
from bitextmine.corpus import CorpusSpec
from bitextmine.errors import ConfigError
from bitextmine.loading import load_model
from bitextmine.model import piece_dropout
from bitextmine.training import train
from bitextmine.training.data import Side

SMALL = dict(dim=16, epochs=2, batch_size=16, megabatch_max=3, megabatch_every=5, dev_pairs=100, device="cpu",
             checkpoint_every=0)


def test_resume_gives_the_same_model_as_an_uninterrupted_run(tmp_path, toy_files):
    from bitextmine.tokenizer import Tokenizer

    spec = [CorpusSpec(src=toy_files[0], tgt=toy_files[1])]
    tok_cfg = TokenizerConfig(vocab_size=1000, sample_sentences=6000)
    full = str(tmp_path / "full")
    train(spec, full, config=TrainConfig(**SMALL, eval_every=30), tokenizer_config=tok_cfg)
    spm = os.path.join(full, "sentencepiece.model")
    part = str(tmp_path / "part")
    # stop mid-epoch 1 (the epoch has 169 mini-batches), then resume twice: mid-epoch and across an epoch end
    train(spec, part, config=TrainConfig(**SMALL, eval_every=30, max_steps=70), tokenizer_path=spm)
    assert os.path.isdir(os.path.join(part, "checkpoint"))
    state = json.load(open(os.path.join(part, "checkpoint", "state.json")))
    assert state["epoch"] == 0 and 0 < state["pos"] and state["step"] >= 70
    train(spec, part, config=TrainConfig(**SMALL, eval_every=30, max_steps=200), tokenizer_path=spm, resume=True)
    train(spec, part, config=TrainConfig(**SMALL, eval_every=30), tokenizer_path=spm, resume=True)
    assert not os.path.exists(os.path.join(part, "checkpoint"))
    a, b = load_model(full), load_model(part)
    assert Tokenizer.load(spm).proto == a.tokenizer.proto == b.tokenizer.proto
    np.testing.assert_array_equal(a.embeddings, b.embeddings)
    assert open(os.path.join(full, "embeddings.safetensors"), "rb").read() == \
        open(os.path.join(part, "embeddings.safetensors"), "rb").read()
    assert a.config["training"]["dev_history"] == b.config["training"]["dev_history"]


def test_same_seed_same_bytes_and_training_helps(tmp_path, toy_files, toy_model):
    spec = [CorpusSpec(src=toy_files[0], tgt=toy_files[1])]
    spm = os.path.join(toy_model.path, "sentencepiece.model")
    paths = []
    for name in ("a", "b"):
        paths.append(str(tmp_path / name))
        train(spec, paths[-1], config=TrainConfig(**{**SMALL, "epochs": 1}), tokenizer_path=spm)
    assert open(paths[0] + "/embeddings.safetensors", "rb").read() == open(paths[1] + "/embeddings.safetensors", "rb").read()
    history = toy_model.config["training"]["dev_history"]
    assert history[-1]["scores"]["heldout"] > 80  # the toy model (trained once per test run) learned the mapping
    assert history[-1]["scores"]["heldout"] > history[0]["scores"]["heldout"]


def test_resume_without_checkpoint_is_an_error(tmp_path, toy_files):
    with pytest.raises(ConfigError, match="no checkpoint"):
        train([CorpusSpec(src=toy_files[0], tgt=toy_files[1])], str(tmp_path / "x"), resume=True)


def test_piece_dropout_keeps_at_least_one_piece_per_sentence():
    g = torch.Generator().manual_seed(0)
    ids = torch.arange(30)
    offsets = torch.tensor([0, 1, 3, 10, 10, 29])  # includes a one-piece and an empty sentence
    for _ in range(50):
        keep = piece_dropout(ids, offsets, 0.9, g)
        bags = np.split(keep.numpy(), offsets.numpy()[1:])
        assert all(b.sum() >= 1 for b in bags if len(b))
    keep = piece_dropout(torch.arange(100000), torch.tensor([0]), 0.3, g)
    assert abs(keep.mean().item() - 0.7) < 0.01


def test_side_gather_matches_slices(toy_model):
    texts = ["kalo mire", "", "tusa ne po", "kalo mire"]
    s = Side.build(texts, toy_model.tokenizer)
    assert s.text_ids.tolist() == [0, 1, 2, 0]
    ids, off = s.gather(np.array([2, 0, 1]))
    want = [toy_model.tokenizer.sp.encode(texts[i]) for i in (2, 0, 1)]
    assert ids.tolist() == sum(want, [])
    assert off.tolist() == [0, len(want[0]), len(want[0]) + len(want[1])]


def test_piece_dropout_draws_its_uniforms_from_the_cpu_generator():
    """The mask is the documented draws of a CPU generator (so every device drops the same pieces), made on
    the ids' device, with an empty bag's pieces put back."""
    ids = torch.arange(40)
    offsets = torch.tensor([0, 2, 3, 17, 17, 25])
    gen, fresh = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    keep = piece_dropout(ids, offsets, 0.6, gen)
    want = (torch.rand(40, generator=fresh) >= 0.6).float()
    for a, b in zip(offsets.tolist(), offsets.tolist()[1:] + [40]):
        if want[a:b].sum() == 0:
            want[a:b] = 1
    assert keep.device == ids.device and keep.dtype == torch.float32
    torch.testing.assert_close(keep, want, rtol=0, atol=0)
    assert torch.equal(gen.get_state(), fresh.get_state())  # exactly 40 uniforms drawn, nothing else


@pytest.mark.parametrize("fake", ["state_json", "generator_size"])
def test_resume_of_a_cuda_generator_checkpoint_is_a_config_error(tmp_path, toy_files, fake):
    """Checkpoints hold a CPU generator state (any device type resumes them); one an earlier version wrote
    on CUDA holds a Philox state that no CPU generator continues: a ConfigError saying to start anew."""
    from safetensors.torch import load_file, save_file

    spec = [CorpusSpec(src=toy_files[0], tgt=toy_files[1])]
    tok_cfg = TokenizerConfig(vocab_size=600, sample_sentences=3000)
    out = str(tmp_path / "m")
    train(spec, out, config=TrainConfig(**{**SMALL, "epochs": 1}, max_steps=3), tokenizer_config=tok_cfg)
    ck = os.path.join(out, "checkpoint")
    meta = json.load(open(os.path.join(ck, "state.json")))
    assert meta["generator_device"] == "cpu"
    if fake == "state_json":
        meta["generator_device"] = "cuda"
    else:  # a checkpoint without the key: a CUDA (Philox) state is 16 bytes, a CPU one 5056
        del meta["generator_device"]
    tensors = load_file(os.path.join(ck, "tensors.safetensors"))
    tensors["generator"] = torch.zeros(16, dtype=torch.uint8)
    save_file(tensors, os.path.join(ck, "tensors.safetensors"))
    json.dump(meta, open(os.path.join(ck, "state.json"), "w"))
    with pytest.raises(ConfigError, match="holds the state of a cuda random generator.*start a new run"):
        train(spec, out, config=TrainConfig(**{**SMALL, "epochs": 1}), tokenizer_config=tok_cfg, resume=True)


def test_group_draws_follow_the_temperature_and_sum_to_the_epoch():
    from bitextmine.training.data import group_draws

    sizes = np.array([1000, 100, 10, 0])
    for temperature in (1.0, 2.0, 5.0):
        counts = group_draws(sizes, temperature, 1110)
        assert counts.sum() == 1110 and counts[3] == 0
        w = sizes[:3] ** (1 / temperature)
        np.testing.assert_allclose(counts[:3], 1110 * w / w.sum(), atol=1)
    assert list(group_draws(sizes, 1.0, 1110)[:3]) == [1000, 100, 10]


def test_epoch_order_with_temperature_resamples_groups_deterministically():
    from bitextmine.training.data import epoch_order, group_draws

    groups = np.array([0] * 900 + [1] * 90 + [2] * 10)
    np.testing.assert_array_equal(epoch_order(3, 1, 1000, groups, 1.0), np.random.default_rng([3, 1]).permutation(1000))
    a = epoch_order(3, 1, 1000, groups, 3.0)
    np.testing.assert_array_equal(a, epoch_order(3, 1, 1000, groups, 3.0))
    assert len(a) == 1000 and not np.array_equal(a, epoch_order(3, 2, 1000, groups, 3.0))
    np.testing.assert_array_equal(np.bincount(groups[a], minlength=3), group_draws(np.array([900, 90, 10]), 3.0, 1000))
    small = a[groups[a] == 2]  # drawn more often than its size: whole passes, every pair as often as the others +-1
    counts = np.bincount(small, minlength=1000)[990:]
    assert counts.max() - counts.min() <= 1
    big = a[groups[a] == 0]  # drawn less often: a subset without repeats
    assert len(np.unique(big)) == len(big)


def test_corpus_groups_come_from_the_target_suffix_and_survive_cleaning(tmp_path):
    from bitextmine.corpus import load_grouped_corpora

    def write(name, lines):
        p = tmp_path / name
        p.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
        return str(p)

    a = CorpusSpec(src=write("x.en", ["a", "b", "b", ""]), tgt=write("x.de", ["A", "B", "B", "C"]))
    b = CorpusSpec(src=write("y.en", ["c", "d"]), tgt=write("y.fr", ["C", "D"]))
    c = CorpusSpec(src=write("z.en", ["e"]), tgt=write("z.xx", ["E"]), group="de")
    assert (a.group_name(), b.group_name(), c.group_name()) == ("de", "fr", "de")
    src, tgt, groups, names, stats = load_grouped_corpora([a, b, c])
    assert src == ["a", "b", "c", "d", "e"] and names == ["de", "fr"]
    assert [names[g] for g in groups] == ["de", "de", "fr", "fr", "de"]
    assert stats.duplicate == 1 and stats.empty == 1


def test_infonce_and_temperature_train_and_reach_the_hinge_models_accuracy(tmp_path, toy_files, toy_model):
    spec = []
    src, tgt = (open(f, encoding="utf-8").read().splitlines() for f in toy_files)
    for name, part in (("a", slice(0, 400)), ("b", slice(400, None))):  # a small and a large group
        paths = [str(tmp_path / f"{name}.{side}") for side in ("src", "tgt")]
        for path, lines in zip(paths, (src[part], tgt[part])):
            open(path, "w", encoding="utf-8").write("".join(x + "\n" for x in lines))
        spec.append(CorpusSpec(src=paths[0], tgt=paths[1], group=name))
    spm = os.path.join(toy_model.path, "sentencepiece.model")
    out = str(tmp_path / "nce")
    train(spec, out, config=TrainConfig(**{**SMALL, "loss": "infonce", "sampling_temperature": 2.0}),
          tokenizer_path=spm)
    training = load_model(out).config["training"]
    assert training["loss"] == "infonce" and training["sampling_temperature"] == 2.0
    assert training["dev_history"][-1]["scores"]["heldout"] > 80
    with pytest.raises(ConfigError, match="loss"):
        train(spec, str(tmp_path / "bad"), config=TrainConfig(**{**SMALL, "loss": "softmax"}), tokenizer_path=spm)
    with pytest.raises(ConfigError, match="temperature"):
        train(spec, str(tmp_path / "bad"), config=TrainConfig(**{**SMALL, "sampling_temperature": 0.5}),
              tokenizer_path=spm)


def reference_learning_rate(lr, warmup, decay, step, total):
    """The schedule spelled out: warm-up steps 0..w-1 reach lr in w + 1 equal rises, then constant or a
    straight line from lr (at the warm-up's end) to 0 (at ``total``)."""
    w = warmup * total
    if step < w:
        return lr * (step + 1) / (w + 1)
    if decay == "none":
        return lr
    return lr * (total - step) / (total - w)


@pytest.mark.parametrize("warmup,decay", [(0.0, "none"), (0.1, "none"), (0.0, "linear"), (0.25, "linear")])
def test_learning_rate_schedule_matches_reference(warmup, decay):
    from bitextmine.training.loop import learning_rate

    config = TrainConfig(lr=0.2, warmup=warmup, lr_decay=decay)
    got = [learning_rate(config, step, 40) for step in range(40)]
    want = [reference_learning_rate(0.2, warmup, decay, step, 40) for step in range(40)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert max(got) == pytest.approx(0.2) and min(got) > 0
    assert learning_rate(TrainConfig(), 123, 1000) == TrainConfig().lr  # the paper's default: constant


def test_in_batch_infonce_with_schedule_trains_and_resumes_to_the_same_model(tmp_path, toy_files, toy_model):
    spec = [CorpusSpec(src=toy_files[0], tgt=toy_files[1])]
    spm = os.path.join(toy_model.path, "sentencepiece.model")
    cfg = {**SMALL, "loss": "infonce", "negatives": "none", "batch_size": 64, "megabatch_max": 1, "lr": 0.01,
           "warmup": 0.1, "lr_decay": "linear", "dropout": 0.0}
    full, part = str(tmp_path / "full"), str(tmp_path / "part")
    train(spec, full, config=TrainConfig(**cfg), tokenizer_path=spm)
    train(spec, part, config=TrainConfig(**cfg, max_steps=30), tokenizer_path=spm)
    train(spec, part, config=TrainConfig(**cfg), tokenizer_path=spm, resume=True)
    a, b = load_model(full), load_model(part)
    np.testing.assert_array_equal(a.embeddings, b.embeddings)
    training = a.config["training"]
    assert training["negatives"] == "none" and training["lr_decay"] == "linear"
    assert training["dev_history"][-1]["scores"]["heldout"] > 80
    with pytest.raises(ConfigError, match="negatives none"):
        train(spec, str(tmp_path / "bad"), config=TrainConfig(**{**cfg, "loss": "hinge"}), tokenizer_path=spm)
    with pytest.raises(ConfigError, match="lr_decay"):
        train(spec, str(tmp_path / "bad"), config=TrainConfig(**{**cfg, "lr_decay": "cosine"}), tokenizer_path=spm)
    with pytest.raises(ConfigError, match="hinge weight"):  # negatives none: no negatives for the hinge term
        train(spec, str(tmp_path / "bad"), config=TrainConfig(**{**cfg, "hinge_weight": 1.0}), tokenizer_path=spm)
    with pytest.raises(ConfigError, match="hinge weight"):  # the hinge loss has no second term to weigh
        train(spec, str(tmp_path / "bad"), config=TrainConfig(**{**SMALL, "hinge_weight": 1.0}), tokenizer_path=spm)


def test_infonce_with_hinge_term_trains_records_and_resume_checks_the_weight(tmp_path, toy_files, toy_model):
    spec = [CorpusSpec(src=toy_files[0], tgt=toy_files[1])]
    spm = os.path.join(toy_model.path, "sentencepiece.model")
    cfg = {**SMALL, "loss": "infonce", "hinge_weight": 2.0, "max_steps": 20}
    out = str(tmp_path / "m")
    train(spec, out, config=TrainConfig(**cfg), tokenizer_path=spm)
    with pytest.raises(ConfigError, match="hinge_weight"):
        train(spec, out, config=TrainConfig(**{**cfg, "hinge_weight": 0.0, "max_steps": 0}), tokenizer_path=spm,
              resume=True)
    train(spec, out, config=TrainConfig(**{**cfg, "max_steps": 0}), tokenizer_path=spm, resume=True)
    training = load_model(out).config["training"]
    assert training["hinge_weight"] == 2.0 and training["dev_history"][-1]["scores"]["heldout"] > 50


def test_resume_with_another_sampling_temperature_is_a_config_error(tmp_path, toy_files, toy_model):
    spec = [CorpusSpec(src=toy_files[0], tgt=toy_files[1])]
    spm = os.path.join(toy_model.path, "sentencepiece.model")
    out = str(tmp_path / "m")
    train(spec, out, config=TrainConfig(**{**SMALL, "max_steps": 10}), tokenizer_path=spm)
    with pytest.raises(ConfigError, match="sampling_temperature"):
        train(spec, out, config=TrainConfig(**{**SMALL, "sampling_temperature": 2.0}), tokenizer_path=spm, resume=True)


def test_resume_with_relabelled_sampling_groups_is_a_config_error(tmp_path, toy_files):
    src, tgt = (open(f, encoding="utf-8").read().splitlines() for f in toy_files)
    paths = {}
    for name, part in (("a", slice(0, 400)), ("b", slice(400, None))):
        paths[name] = [str(tmp_path / f"{name}.{side}") for side in ("src", "tgt")]
        for path, lines in zip(paths[name], (src[part], tgt[part])):
            open(path, "w", encoding="utf-8").write("".join(x + "\n" for x in lines))
    spec = lambda ga, gb: [CorpusSpec(src=paths["a"][0], tgt=paths["a"][1], group=ga),  # noqa: E731
                           CorpusSpec(src=paths["b"][0], tgt=paths["b"][1], group=gb)]
    config = TrainConfig(**{**SMALL, "sampling_temperature": 2.0})
    out = str(tmp_path / "m")
    tok = TokenizerConfig(vocab_size=600, sample_sentences=3000)
    train(spec("a", "b"), out, config=TrainConfig(**{**SMALL, "sampling_temperature": 2.0, "max_steps": 6}),
          tokenizer_config=tok)
    with pytest.raises(ConfigError, match="sampling groups"):  # the same pairs, one group: another epoch order
        train(spec("x", "x"), out, config=config, tokenizer_config=tok, resume=True)
    state = os.path.join(out, "checkpoint", "state.json")
    meta = json.load(open(state))
    pairs_fp, groups_fp = meta["data_fingerprint"].split("/")
    assert len(groups_fp) == 16
    meta["data_fingerprint"] = pairs_fp  # a checkpoint written before the groups were fingerprinted
    json.dump(meta, open(state, "w"))
    train(spec("a", "b"), out, config=config, tokenizer_config=tok, resume=True)
    assert load_model(out).config["training"]["complete"]


def test_clean_drops_pairs_that_break_the_filter_rules_and_keeps_their_groups():
    from bitextmine.training.data import clean_with_rules

    src = ["Page 12 of 40", "The cat sleeps.", "Wait!!!!!!!!!!!!", "Hello", "See www.a.org now"]
    tgt = ["Seite 13 von 40", "Die Katze schläft.", "Warte!", "Hallo", "Siehe www.b.org jetzt"]
    logs = []
    s, t, g = clean_with_rules(src, tgt, np.arange(5, dtype=np.int64), logs.append)
    assert s == ["The cat sleeps.", "Hello"] and t == ["Die Katze schläft.", "Hallo"] and list(g) == [1, 3]
    assert "kept 2 of 5" in logs[0] and "digits" in logs[0] and "repeats" in logs[0] and "urls" in logs[0]


def test_recipes_set_their_fields_and_given_options_win():
    from dataclasses import fields

    from bitextmine.config import RECIPES, TokenizerConfig, recipe_configs

    train_cfg, tok_cfg = recipe_configs("paper")
    assert train_cfg == TrainConfig() and tok_cfg == TokenizerConfig()  # the paper is the dataclass defaults
    train_cfg, tok_cfg = recipe_configs("inbatch", lr=None, dim=64, vocab_size=None, normalization="nmt_nfkc")
    for name, value in RECIPES["inbatch"]["train"].items():
        assert getattr(train_cfg, name) == (64 if name == "dim" else value)
    assert tok_cfg.vocab_size == 32000 and tok_cfg.normalization == "nmt_nfkc"  # given wins, None does not
    assert {f.name for f in fields(TrainConfig)} >= set(RECIPES["inbatch"]["train"])
    with pytest.raises(KeyError, match="warmpu"):
        recipe_configs("inbatch", warmpu=0.1)
    # auto: inbatch only where it was measured (sp, bilingual, from scratch)
    assert recipe_configs("auto", encoder="sp")[0].loss == "infonce"
    assert recipe_configs("auto", encoder="blstm-sp")[0] == TrainConfig(encoder="blstm-sp")
    assert recipe_configs("auto", encoder="sp", paraphrase=True)[0].loss == "hinge"
    assert recipe_configs("auto", init_from=True, encoder="sp")[0].lr == TrainConfig().lr


def test_a_recipes_hinge_term_gives_way_to_options_that_leave_no_place_for_it():
    from bitextmine.config import RECIPES, recipe_configs

    weight = RECIPES["inbatch"]["train"]["hinge_weight"]
    assert weight > 0 and recipe_configs("inbatch")[0].hinge_weight == weight
    assert recipe_configs("inbatch", negatives="none")[0].hinge_weight == 0  # in-batch candidates only
    assert recipe_configs("inbatch", loss="hinge")[0].hinge_weight == 0  # the hinge alone
    assert recipe_configs("inbatch", negatives="random")[0].hinge_weight == weight  # still negatives to hinge on
    # a weight given explicitly is kept, for training to refuse with its own message
    assert recipe_configs("inbatch", negatives="none", hinge_weight=2.0)[0].hinge_weight == 2.0


def test_cli_train_takes_the_recipe_and_explicit_options(tmp_path, toy_files, toy_model):
    from click.testing import CliRunner

    from bitextmine.cli import main
    from bitextmine.config import RECIPES

    base = ["train", "--src", toy_files[0], "--tgt", toy_files[1], "--epochs", "1", "--dev-pairs", "50", "--device",
            "cpu", "-q", "--dim", "16", "--spm-model", os.path.join(toy_model.path, "sentencepiece.model")]
    r = CliRunner().invoke(main, [*base, "--out", str(tmp_path / "auto"), "--batch-size", "256"])
    assert r.exit_code == 0, r.output
    t = load_model(str(tmp_path / "auto")).config["training"]
    assert (t["loss"], t["negatives"], t["lr"], t["batch_size"], t["dim"], t["epochs"]) == ("infonce", "max", 0.2, 256, 16, 1)
    assert t["hinge_weight"] == RECIPES["inbatch"]["train"]["hinge_weight"] > 0
    r = CliRunner().invoke(main, [*base, "--out", str(tmp_path / "none"), "--batch-size", "256", "--negatives", "none"])
    assert r.exit_code == 0, r.output
    t = load_model(str(tmp_path / "none")).config["training"]
    assert (t["loss"], t["negatives"], t["hinge_weight"]) == ("infonce", "none", 0.0)
    r = CliRunner().invoke(main, [*base, "--out", str(tmp_path / "paper"), "--recipe", "paper", "--lr", "0.002"])
    assert r.exit_code == 0, r.output
    t = load_model(str(tmp_path / "paper")).config["training"]
    assert (t["loss"], t["negatives"], t["lr"], t["batch_size"]) == ("hinge", "max", 0.002, 128)


@pytest.mark.parametrize("change", [{"lr": 0.01}, {"dropout": 0.1}, {"margin": 0.2}, {"mix_prob": 0.9},
                                    {"epochs": 3, "lr_decay": "linear"}, {"eval_every": 7}])
def test_resume_with_a_setting_that_changes_what_is_learned_is_a_config_error(tmp_path, toy_files, toy_model,
                                                                             change):
    """A resumed run must train as the checkpoint's run did: another learning rate, dropout, margin or mixing
    share, or another number of epochs under a decaying rate, is refused with both values named."""
    spec = [CorpusSpec(src=toy_files[0], tgt=toy_files[1])]
    spm = os.path.join(toy_model.path, "sentencepiece.model")
    first = {**SMALL, "negatives": "mix", "lr_decay": change.get("lr_decay", "none")}
    out = str(tmp_path / "m")
    train(spec, out, config=TrainConfig(**{**first, "max_steps": 5}), tokenizer_path=spm)
    key = next(k for k in change if k != "lr_decay")
    with pytest.raises(ConfigError, match=f"was trained with {key}=.*this run has {key}="):
        train(spec, out, config=TrainConfig(**{**first, **change}), tokenizer_path=spm, resume=True)
    assert os.path.isdir(os.path.join(out, "checkpoint"))  # the checkpoint is left as it was


def test_resume_with_another_tokenizer_init_model_or_dev_sets_is_a_config_error(tmp_path, toy_files, toy_model):
    """The model records the tokenizer's settings and the init model, and the dev sets choose the best weights:
    a resume that changes any of them would save a model unlike the uninterrupted run's, or describe it wrongly."""
    from conftest import toy_corpus, write_lines

    spec = [CorpusSpec(src=toy_files[0], tgt=toy_files[1])]
    spm = os.path.join(toy_model.path, "sentencepiece.model")
    src, _ = toy_corpus(30, seed=3)
    sts = [write_lines(tmp_path / f"sts{i}.csv", [f"{src[j]},{src[(j + i) % 30]},{j % 6}" for j in range(28)])
           for i in (1, 2)]
    cfg = TrainConfig(**{**SMALL, "max_steps": 5})
    out = str(tmp_path / "m")
    train(spec, out, config=cfg, tokenizer_path=spm, dev_sts=sts[:1])
    again = dict(config=TrainConfig(**SMALL), resume=True)
    with pytest.raises(ConfigError, match="other tokenizer settings"):
        train(spec, out, **again, tokenizer_config=TokenizerConfig(vocab_size=800), dev_sts=sts[:1])
    with pytest.raises(ConfigError, match="other dev sets"):
        train(spec, out, **again, tokenizer_path=spm, dev_sts=sts)
    write_lines(sts[0], [f"{src[j]},{src[j]},5" for j in range(28)])  # the same file name, other pairs
    with pytest.raises(ConfigError, match="other dev sets"):
        train(spec, out, **again, tokenizer_path=spm, dev_sts=sts[:1])
    init = str(tmp_path / "init")
    train(spec, init, config=TrainConfig(**{**SMALL, "dim": 32, "epochs": 1}), tokenizer_path=spm)
    train(spec, str(tmp_path / "i"), config=TrainConfig(**{**cfg.__dict__, "dim": 32}), init_from=toy_model.path)
    with pytest.raises(ConfigError, match=r"other --init-from model"):
        train(spec, str(tmp_path / "i"), config=TrainConfig(**{**SMALL, "dim": 32}), init_from=init, resume=True)


def test_a_checkpoint_stopped_while_being_replaced_is_recovered(tmp_path, toy_files, toy_model, monkeypatch):
    """save_checkpoint sets the old checkpoint aside before putting the new one in place: a stop in between
    leaves both, and --resume takes the new one when it is whole, else the old one."""
    import shutil

    from bitextmine.training import checkpoint as ck

    spec = [CorpusSpec(src=toy_files[0], tgt=toy_files[1])]
    spm = os.path.join(toy_model.path, "sentencepiece.model")
    out = str(tmp_path / "m")
    train(spec, out, config=TrainConfig(**{**SMALL, "max_steps": 5}), tokenizer_path=spm)
    ckpt = os.path.join(out, "checkpoint")
    step = json.load(open(os.path.join(ckpt, "state.json")))["step"]
    shutil.copytree(ckpt, ckpt + ".tmp")  # as if the new one was written and the stop came after setting aside
    os.replace(ckpt, ckpt + ".old")
    ck.recover_checkpoint(ckpt)
    assert json.load(open(os.path.join(ckpt, "state.json")))["step"] == step and not os.path.exists(ckpt + ".tmp")
    os.replace(ckpt, ckpt + ".old")  # no whole new one: the old one comes back
    os.makedirs(ckpt + ".tmp")
    ck.recover_checkpoint(ckpt)
    assert ck.has_checkpoint(ckpt) and not os.path.exists(ckpt + ".old")
    whole = str(tmp_path / "whole")
    train(spec, whole, config=TrainConfig(**SMALL), tokenizer_path=spm)
    train(spec, out, config=TrainConfig(**SMALL), tokenizer_path=spm, resume=True)
    np.testing.assert_array_equal(load_model(whole).embeddings, load_model(out).embeddings)

def test_resume_may_add_epochs_under_a_constant_learning_rate(tmp_path, toy_files, toy_model):
    """With a constant rate (the paper's), the epochs do not change the schedule: a one-epoch run stopped part-way
    resumes as a two-epoch run and ends with the model of an uninterrupted two-epoch run."""
    spec = [CorpusSpec(src=toy_files[0], tgt=toy_files[1])]
    spm = os.path.join(toy_model.path, "sentencepiece.model")
    whole, part = str(tmp_path / "whole"), str(tmp_path / "part")
    train(spec, whole, config=TrainConfig(**SMALL), tokenizer_path=spm)
    train(spec, part, config=TrainConfig(**{**SMALL, "epochs": 1, "max_steps": 50}), tokenizer_path=spm)
    train(spec, part, config=TrainConfig(**SMALL), tokenizer_path=spm, resume=True)
    np.testing.assert_array_equal(load_model(whole).embeddings, load_model(part).embeddings)


def test_dev_sets_of_the_same_file_name_are_each_scored(tmp_path, toy_files, toy_model):
    """STS13 and STS14 both hold STS.input.headlines.txt: two dev sets of one file name were kept under one name,
    so one was dropped from the history and from the mean that picks the weights. Each is scored now."""
    from conftest import toy_corpus, write_lines

    src, _ = toy_corpus(30, seed=71)
    paths = []
    for year, rows in (("13", [f"{src[i]},{src[i]},5" if i % 2 else f"{src[i]},{src[i + 1]},0" for i in range(28)]),
                       ("14", [f"{src[i]},{src[(i + 3) % 30]},{i % 6}" for i in range(28)])):
        (tmp_path / year).mkdir()
        paths.append(write_lines(tmp_path / year / "test.csv", rows))
    spec = [CorpusSpec(src=toy_files[0], tgt=toy_files[1])]
    out = str(tmp_path / "m")
    train(spec, out, config=TrainConfig(**{**SMALL, "epochs": 1}), dev_sts=paths,
          tokenizer_path=os.path.join(toy_model.path, "sentencepiece.model"))
    last = load_model(out).config["training"]["dev_history"][-1]
    assert sorted(last["scores"]) == ["heldout", "sts:13/test.csv", "sts:14/test.csv"]
    assert last["score"] == pytest.approx(np.mean(list(last["scores"].values())), abs=1e-3)


def test_training_into_a_folder_removes_the_second_stage_of_the_model_there_before(tmp_path, toy_files, toy_model):
    """A second stage left in OUT by an earlier model was fitted on that model's margins; training new weights
    there removes it (and says so), rather than leave it to judge the new model without a word."""
    spec = [CorpusSpec(src=toy_files[0], tgt=toy_files[1])]
    out = tmp_path / "m"
    (out / "second_stage").mkdir(parents=True)
    (out / "second_stage" / "second_stage.json").write_text("{}")
    said = []
    train(spec, str(out), config=TrainConfig(**{**SMALL, "epochs": 1, "max_steps": 5}),
          tokenizer_path=os.path.join(toy_model.path, "sentencepiece.model"),
          progress=lambda e: said.append(e.get("message", "")))
    assert not (out / "second_stage").exists()
    assert any("the second stage of the model trained there before" in m for m in said)
    assert load_model(str(out)).second_stage is None


def test_max_steps_at_an_epochs_end_evaluates_that_epoch(tmp_path, toy_files, toy_model):
    """--max-steps equal to the whole schedule is the whole run: the last epoch is evaluated and its weights
    can be kept, the run is complete and no checkpoint is left; at the end of an earlier epoch, that epoch is
    evaluated before the run stops for --resume."""
    spec = [CorpusSpec(src=toy_files[0], tgt=toy_files[1])]
    spm = os.path.join(toy_model.path, "sentencepiece.model")
    whole, capped, half = (str(tmp_path / n) for n in ("whole", "capped", "half"))
    train(spec, whole, config=TrainConfig(**SMALL), tokenizer_path=spm)
    steps = load_model(whole).config["training"]["steps"]
    train(spec, capped, config=TrainConfig(**{**SMALL, "max_steps": steps}), tokenizer_path=spm)
    a, b = load_model(whole).config["training"], load_model(capped).config["training"]
    assert b["complete"] and b["dev_history"] == a["dev_history"] and len(b["dev_history"]) == 2
    assert not os.path.exists(os.path.join(capped, "checkpoint"))
    np.testing.assert_array_equal(load_model(whole).embeddings, load_model(capped).embeddings)
    train(spec, half, config=TrainConfig(**{**SMALL, "max_steps": steps // 2}), tokenizer_path=spm)
    c = load_model(half).config["training"]
    assert not c["complete"] and c["dev_history"] == a["dev_history"][:1]
    assert os.path.exists(os.path.join(half, "checkpoint"))


def test_a_run_that_diverges_is_one_error_naming_the_learning_rate(toy_files, tmp_path):
    """--lr 1e6 blew the weights up; the SIF estimate then ended in numpy's LinAlgError traceback."""
    from bitextmine.config import TokenizerConfig, TrainConfig
    from bitextmine.corpus import CorpusSpec
    from bitextmine.errors import ConfigError
    from bitextmine.training.loop import train

    config = TrainConfig(dim=16, epochs=2, batch_size=16, megabatch_max=2, megabatch_every=5, dev_pairs=50,
                         device="cpu", lr=1e6, max_steps=0)
    with pytest.raises(ConfigError, match=r"^training diverged: .*learning rate 1e\+06.*lower --lr"):
        train([CorpusSpec(src=toy_files[0], tgt=toy_files[1])], str(tmp_path / "m"), config=config,
              tokenizer_config=TokenizerConfig(vocab_size=400))
