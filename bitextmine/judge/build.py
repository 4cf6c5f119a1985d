"""Build a model's second stage from parallel corpora with English (``bitextmine train --second-stage``)."""

from __future__ import annotations

import os
from typing import Callable

import numpy as np

from ..config import SecondStageConfig
from ..corpus import without_compression
from ..errors import ConfigError
from ..mining.calibrated import PIVOT
from .store import SecondStage, save_second_stage
from .train import expected_of, fit, split_pairs, train_tables, training_set


def english_side(spec) -> str | None:
    """"src" or "tgt": the side of a CorpusSpec whose file name ends in .en (or .en.gz, .en.xz, .en.zst); None for
    neither."""
    for side in ("src", "tgt"):
        name = getattr(spec, side)
        if name and without_compression(str(name)).endswith("." + PIVOT):
            return side
    return None


def corpora_by_language(specs) -> dict[str, dict[str, list]]:
    """{language: {corpus: [(foreign, English)]}} of CorpusSpecs given as two files, one of them English (by
    its name: .en or .en.gz), the other's language their ``group`` or else its file's suffix (train.de.gz: de).
    ConfigError for a corpus with no English side."""
    out: dict = {}
    for spec in specs:
        side = english_side(spec)
        if spec.tsv is not None or side is None:
            raise ConfigError(f"{spec}: the second stage learns from pairs with English; expected two files, one "
                              "named *.en or *.en.gz")
        other = without_compression(str(spec.tgt if side == "src" else spec.src))
        lang = spec.group or os.path.splitext(other)[1].lstrip(".")
        src, tgt = spec.read()
        pairs = list(zip(src, tgt)) if side == "tgt" else list(zip(tgt, src))
        out.setdefault(lang, {})[str(spec)] = pairs
    return out


def build_second_stage(model_dir: str, specs, config: SecondStageConfig = SecondStageConfig(),
                       progress: Callable[[str, int], None] | None = None) -> dict:
    """Train the second stage of the model in ``model_dir`` on ``specs`` (CorpusSpecs with English, one
    language each) and write it there (:mod:`bitextmine.judge.store`), replacing any before. Per language:
    :func:`bitextmine.judge.train.split_pairs`, IBM model 1 both ways on the pairs the tasks leave, the tasks'
    candidates, a logistic regression. ``progress(language, tasks done)``. What the model's calibration held of
    the stage for those languages (its settings, the end-to-end figures) is removed
    (:func:`bitextmine.mining.calibrated.forget_stage`). Returns {language: {"pairs", "candidates",
    "translations"[, "calibration_cleared": True]}}."""
    from ..lexicon import vocabulary_fingerprint
    from ..loading import load_model

    model = load_model(model_dir)
    if not hasattr(model.tokenizer, "proto"):
        raise ConfigError(f"{model_dir}: the second stage needs a SentencePiece model (encoder sp or blstm-sp)")
    fp = vocabulary_fingerprint(model.tokenizer.proto)
    languages, tables, expected, report = {}, {}, {}, {}
    for lang, corpora in sorted(corpora_by_language(specs).items()):
        if lang == PIVOT:
            raise ConfigError("a corpus pairs English with English; expected English and another language")
        lexicon, pools = split_pairs(corpora, config.task_pairs, config.seed)
        tables[lang] = train_tables(lexicon, model.tokenizer)
        expected[lang] = expected_of(lexicon, tables[lang], model.tokenizer, config)
        stage = SecondStage(os.path.join(model_dir, "second_stage"), {}, "", fp, {lang: tables[lang]},
                            embeddings=model.embeddings, _expected={lang: expected[lang]})
        X, y = training_set(pools, model, stage, lang, config,
                            (lambda n, lang=lang: progress(lang, n)) if progress else None)
        languages[lang] = {"classifier": fit(X, y, config), "min_prob": config.min_prob, "floor": config.floor,
                           "prior": float(np.mean(y)), "max_lines": config.max_lines,
                           "trained_on": f"{len(lexicon):,} pairs for the tables, tasks from {len(pools)} corpora"}
        report[lang] = {"pairs": len(lexicon) + sum(map(len, pools.values())), "candidates": len(y),
                        "translations": int(y.sum())}
    save_second_stage(model_dir, languages, tables, "bitextmine train --second-stage (min_prob not calibrated)",
                      expected=expected)
    from ..mining.calibrated import forget_stage

    for key in forget_stage(model_dir, languages):  # the calibration's stage settings and figures were another's
        report[next(c for c in key.split("-") if c != PIVOT)]["calibration_cleared"] = True
    return report
