"""Build the second stage of the bundled model (or --model) from ../shared/data/train.

    python tools/train_second_stage.py [--langs fr ru] [--out DIR] [--tables DIR] [--ship-floor 0.01]

Per language: every training corpus of ../shared/data/train with English (tools/train_default.py's corpora),
less each pair sharing a text with a pair held apart from the model's training (--holdout, compared as
bitextmine.evaluation.holdout_tasks.key compares), is one domain; :func:`bitextmine.judge.train.split_pairs` sets aside up to
8,000 pairs a corpus for the classifier's tasks, IBM model 1 is trained both ways on the rest (or read from
``--tables``, a folder of ibm1.en-XX.npz / ibm1.XX-en.npz made by an earlier run with --keep-tables, or the
model's own second_stage folder with ``--ship-floor 0`` to keep its shipped tables as they are), pruned to
``--ship-floor`` (what a model directory can carry: 0.01 keeps the entries that matter, docs/benchmarks.md),
and the classifier is fitted on the tasks' candidates scored with the pruned tables (and each piece's usual
best link under them, over up to 40,000 of the tables' pairs: :func:`bitextmine.judge.train.expected_of`). The
stage is written into ``--out`` (default: the model's own directory), its tables compact; min_prob is then
calibrated on dev data by tools/calibrate_second_stage.py --write.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from bitextmine.evaluation.devdata import LANGS, corpora, english_first
from bitextmine.evaluation.holdout_tasks import key

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data")


def corpora_of(lang: str, holdout: str) -> dict[str, list]:
    """{corpus: [(foreign, English)]} of ``lang``'s training corpora, less the held-apart texts."""
    from bitextmine.corpus import read_parallel

    fx, en = read_parallel(os.path.join(holdout, f"en-{lang}.{lang}"), os.path.join(holdout, f"en-{lang}.en"))
    held = {key(t) for t in fx + en}
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for spec in corpora(os.path.join(DATA, "train"), tmp):
            if spec.group_name() != lang:
                continue
            a, b = spec.read()
            pairs = [(y, x) if english_first(spec) else (x, y) for x, y in zip(a, b)]
            name = os.path.basename(os.path.dirname(str(spec.src)))
            out.setdefault(name, []).extend(p for p in pairs if key(p[0]) not in held and key(p[1]) not in held)
    return out


def classifier_of(stage, lang: str) -> dict:
    """The classifier of ``lang`` in a loaded second stage, as save_second_stage takes it."""
    from bitextmine.judge.store import kind

    v = stage.languages[lang]
    if kind(v) == "trees":
        return stage.trees(lang)
    return {n: np.array(v[n]) for n in ("mean", "std", "w")} | {"b": v["b"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="model directory (default: the bundled model)")
    ap.add_argument("--out", default=None, help="where to write the stage (default: the model's directory)")
    ap.add_argument("--langs", nargs="+", default=list(LANGS))
    ap.add_argument("--holdout", default=os.path.join(HERE, "..", ".bench", "holdout"))
    ap.add_argument("--tables", default="", help="read full tables from here instead of training them")
    ap.add_argument("--keep-tables", default="", help="also write the full tables here")
    ap.add_argument("--ship-floor", type=float, default=0.01)
    args = ap.parse_args()
    from bitextmine.config import SecondStageConfig
    from bitextmine.errors import ModelFormatError
    from bitextmine.judge.features import FEATURES
    from bitextmine.judge.store import SecondStage, load_second_stage, save_second_stage, table_file
    from bitextmine.judge.train import expected_of, fit, split_pairs, train_tables, training_set
    from bitextmine.lexicon import load_table, prune, save_table, vocabulary_fingerprint
    from bitextmine.loading import load_model
    from bitextmine.model import default_model_dir

    model = load_model(args.model)
    out = args.out or model.path or default_model_dir()
    fp = vocabulary_fingerprint(model.tokenizer.proto)
    cfg = SecondStageConfig()
    try:
        old = load_second_stage(out, fp) if os.path.isdir(os.path.join(out, "second_stage")) else None
    except ModelFormatError:  # unreadable: its languages are trained anew, not kept
        old = None
    if old is not None and old.features != FEATURES:  # of an older format: the same
        old = None
    languages = {k: {**v, "classifier": classifier_of(old, k)} for k, v in (old.languages.items() if old else [])}
    for lang in args.langs:
        t0 = time.perf_counter()
        lexicon, pools = split_pairs(corpora_of(lang, args.holdout), cfg.task_pairs, cfg.seed)
        if args.tables:
            full = tuple(load_table(os.path.join(args.tables, table_file(a, b)), fingerprint=fp)
                         for a, b in (("en", lang), (lang, "en")))
        else:
            full = train_tables(lexicon, model.tokenizer)
        if args.keep_tables:
            os.makedirs(args.keep_tables, exist_ok=True)
            for t, (a, b) in zip(full, (("en", lang), (lang, "en"))):
                save_table(t, os.path.join(args.keep_tables, table_file(a, b)))
        tables = tuple(prune(t, args.ship_floor) for t in full)
        expected = expected_of(lexicon, tables, model.tokenizer, cfg)
        t1 = time.perf_counter()
        stage = SecondStage(os.path.join(out, "second_stage"), {}, "", fp, {lang: tables},
                            embeddings=model.embeddings, _expected={lang: expected})
        X, y = training_set(pools, model, stage, lang, cfg)
        languages[lang] = {"classifier": fit(X, y, cfg), "min_prob": cfg.min_prob, "floor": cfg.floor,
                           "prior": float(y.mean()), "max_lines": cfg.max_lines,
                           "trained_on": f"../shared/data/train less the held-apart pairs: {len(lexicon):,} pairs for "
                                         f"the tables (pruned below {tables[0].floor:g}), tasks from {len(pools)} "
                                         f"corpora ({sum(map(len, pools.values())):,} pairs)"}
        save_second_stage(out, {lang: languages[lang]}, {lang: tables}, compact=True, expected={lang: expected})
        save_second_stage(out, languages, {}, "tools/train_second_stage.py (min_prob not calibrated yet)")
        print(f"{lang}: {len(tables[0]):,} + {len(tables[1]):,} table entries (of {len(full[0]):,} + {len(full[1]):,}), "
              f"{len(y):,} candidates ({int(y.sum()):,} translations); tables {t1 - t0:.0f} s, classifier "
              f"{time.perf_counter() - t1:.0f} s", flush=True)


if __name__ == "__main__":
    main()
