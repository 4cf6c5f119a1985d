"""Shared fixtures: a seeded toy parallel corpus and a tiny model trained once per test session."""

from __future__ import annotations

import os

import numpy as np
import pytest

SHARED = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))


def _toy_words() -> list[str]:
    rng = np.random.default_rng(0)  # one vocabulary for every toy corpus, whatever its seed
    syll = ["ka", "lo", "mi", "re", "tu", "sa", "ne", "po", "di", "gu", "fe", "ba"]
    return sorted({"".join(rng.choice(syll, rng.integers(2, 4))) for _ in range(2000)})[:400]


TOY_WORDS = _toy_words()


def toy_corpus(n: int = 3000, seed: int = 0) -> tuple[list[str], list[str]]:
    """Two made-up languages: target words are source words rewritten (reversed, suffixed), so a
    trained encoder must learn the mapping. Sentences are 3-9 words from a 400-word vocabulary."""
    words = TOY_WORDS
    rng = np.random.default_rng(seed)
    trans = {w: w[::-1] + "x" for w in words}
    src, tgt = [], []
    for _ in range(n):
        ws = list(rng.choice(words, rng.integers(3, 10)))
        src.append(" ".join(ws))
        tgt.append(" ".join(trans[w] for w in ws))
    return src, tgt


def write_lines(path, lines) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return str(path)


def model_with_dev_pairs(model_dir: str, tmp_path, pairs: int, seed: int) -> tuple[str, tuple[str, str]]:
    """(a copy of ``model_dir`` in ``tmp_path``/m, two files of ``pairs`` German-English toy dev pairs)."""
    import shutil

    copy = str(tmp_path / "m")
    shutil.copytree(model_dir, copy)
    s, t = toy_corpus(pairs, seed=seed)
    return copy, (write_lines(tmp_path / "dev.de", s), write_lines(tmp_path / "dev.en", t))


def calibrate_mining_cli(model_dir: str, files: tuple[str, str], *extra: str):
    """``bitextmine calibrate-mining --model model_dir --pair de en FILES *extra`` in process: click's Result."""
    from click.testing import CliRunner

    from bitextmine.cli import main

    return CliRunner().invoke(main, ["calibrate-mining", "--model", model_dir, "--pair", "de", "en", *files, *extra])


def train_toy_pair(tmp_path, pairs: int, seed: int, dev_pairs: int, logs: list, out: str = "m",
                   languages: tuple = ("de", "en"), **kw) -> str:
    """A one-epoch toy German-English model of ``pairs`` pairs (``seed``) trained with ``languages`` recorded
    (``kw``: more of train's arguments) into ``tmp_path``/``out``, its log lines appended to ``logs``; returns
    its directory."""
    from bitextmine.config import TokenizerConfig, TrainConfig
    from bitextmine.corpus import CorpusSpec
    from bitextmine.training.loop import train

    s, t = toy_corpus(pairs, seed=seed)
    spec = CorpusSpec(src=write_lines(tmp_path / "c.de", s), tgt=write_lines(tmp_path / "c.en", t))
    config = TrainConfig(dim=32, epochs=1, batch_size=32, megabatch_max=2, megabatch_every=20, dev_pairs=dev_pairs,
                         device="cpu")
    out = str(tmp_path / out)
    train([spec], out, config=config, tokenizer_config=TokenizerConfig(vocab_size=800), languages=languages,
          progress=lambda e: logs.append(e.get("message", "")), **kw)
    return out


@pytest.fixture(scope="session")
def toy_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("toy")
    src, tgt = toy_corpus()
    return write_lines(d / "train.src", src), write_lines(d / "train.tgt", tgt)


@pytest.fixture(scope="session")
def toy_model_dir(tmp_path_factory, toy_files):
    """A tiny SP model (vocabulary 1000, dimension 32) trained for 2 epochs on the toy corpus."""
    from bitextmine.config import TokenizerConfig, TrainConfig
    from bitextmine.corpus import CorpusSpec
    from bitextmine.training.loop import train

    out = str(tmp_path_factory.mktemp("model") / "m")
    train([CorpusSpec(src=toy_files[0], tgt=toy_files[1])], out,
          config=TrainConfig(dim=32, epochs=2, batch_size=32, megabatch_max=4, megabatch_every=20, dev_pairs=200,
                             device="cpu"),
          tokenizer_config=TokenizerConfig(vocab_size=1000, sample_sentences=6000))
    return out


@pytest.fixture(scope="session")
def toy_stage_dir(tmp_path_factory, toy_model_dir):
    """The toy model with a second stage for "de" built from two toy corpora (named as German-English)."""
    import shutil

    from bitextmine.config import SecondStageConfig
    from bitextmine.corpus import CorpusSpec
    from bitextmine.judge.build import build_second_stage

    d = tmp_path_factory.mktemp("stage")
    out = str(d / "m")
    shutil.copytree(toy_model_dir, out)
    specs = []
    for k in range(2):
        src, tgt = toy_corpus(1200, seed=10 + k)
        specs.append(CorpusSpec(src=write_lines(d / f"c{k}.de", src), tgt=write_lines(d / f"c{k}.en", tgt)))
    report = build_second_stage(out, specs, SecondStageConfig(sizes=(200,), shares=(0.05, 0.5), task_pairs=500))
    assert set(report) == {"de"} and report["de"]["translations"] > 0
    return out


@pytest.fixture(scope="session")
def toy_model(toy_model_dir):
    from bitextmine.loading import load_model

    return load_model(toy_model_dir)


def shared_path(*parts: str) -> str:
    path = os.path.join(SHARED, *parts)
    if not os.path.exists(path):
        if os.environ.get("CI"):  # CI always has ../shared beside the checkout: missing data is a failure
            pytest.fail(f"real data not found at {path}")
        pytest.skip(f"real data not found at {path}")
    return path
