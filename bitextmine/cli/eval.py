"""``bitextmine eval``: STS, Tatoeba and BUCC benchmarks (:mod:`bitextmine.evaluation.runners`)."""

from __future__ import annotations

import click

from ..config import EncodeConfig, MineConfig
from .common import (CONTEXT, EMBEDDING_NAMES, SEARCH_FIELDS, Group, both_or_neither, check_output, device_option,
                     embedding_options, embeddings_from, json_option, marked_option, model_option, progress_bar,
                     refuse_unused_embedding_options, search_from, search_options, show_report, sif_option, FINITE)

E = EncodeConfig


@click.group(name="eval", cls=Group, context_settings=CONTEXT)
def eval_group() -> None:
    """Standard benchmarks: STS correlation, Tatoeba retrieval, BUCC mining F1.

    Each evaluator encodes with --model (the bundled model when omitted) or reads precomputed
    embeddings from 'bitextmine encode' (tatoeba and bucc: from any encoder, --emb-format), and
    prints a plain table (--json for machines).

    \b
    Examples:
      bitextmine eval tatoeba --all tatoeba/v1
      bitextmine eval sts stsbenchmark/sts-test.csv --model my-model --sif
    """


def _eval_options(marked_sides: tuple[str, str]):
    """The options every evaluator shares: --sif, --marked, --device, --json."""
    def wrap(f):
        f = json_option(f)
        f = device_option(E.device)(f)
        f = marked_option(marked_sides)(f)
        return sif_option(f)
    return wrap


@eval_group.command(name="sts")
@click.argument("files", nargs=-1, metavar="FILE...")
@click.option("--pair", "pairs", nargs=2, multiple=True, metavar="FILE1 FILE2",
              help="Cross-lingual STS: s1 from FILE1, s2 from FILE2 (row-aligned files of two languages; repeatable).")
@model_option
@click.option("--emb1", default=None, metavar="FILE.npy", help="Precomputed embeddings of the s1 column (one dataset).")
@click.option("--emb2", default=None, metavar="FILE.npy", help="Precomputed embeddings of the s2 column.")
@_eval_options(("s1", "s2"))
def eval_sts(files, pairs, model_dir, emb1, emb2, sif, marked, device, as_json):
    """Pearson and Spearman x 100 of cosine vs gold for STS files.

    FILE: SemEval STS.input.X.txt (gold STS.gs.X.txt found beside it; unscored pairs dropped;
    per-year averages for STS12-16), STS Benchmark TSV, or CSV sentence1,sentence2,score.

    \b
    Examples:
      bitextmine eval sts sts12-16_en/STS12-en-test/STS.input.*.txt stsbenchmark/sts-test.csv
      bitextmine eval sts --pair stsb_multi_mt/stsb-en-test.csv stsb_multi_mt/stsb-de-test.csv
    """
    from ..evaluation.runners import run_sts
    from ..loading import load_model

    report = run_sts(files, pairs, model=load_model(model_dir), config=EncodeConfig(device=device, sif=sif),
                     emb=both_or_neither(emb1, emb2, "--emb1 and --emb2"), marked=marked)
    show_report(report, as_json)


@eval_group.command(name="tatoeba", option_groups=(("Embeddings", ("src_emb", "tgt_emb", *EMBEDDING_NAMES)),))
@click.argument("src", required=False)
@click.argument("tgt", required=False)
@click.option("--all", "folder", default=None, metavar="DIR", help="Every tatoeba.xxx-eng.{xxx,eng} pair in a Tatoeba v1 folder.")
@click.option("--lang", "languages", multiple=True, metavar="CODE", help="With --all: only these languages (repeatable).")
@model_option
@click.option("--src-emb", default=None, metavar="FILE", help="Precomputed embeddings of SRC (any encoder; --emb-format).")
@click.option("--tgt-emb", default=None, metavar="FILE", help="Precomputed embeddings of TGT.")
@embedding_options
@_eval_options(("src", "tgt"))
def eval_tatoeba(src, tgt, folder, languages, model_dir, src_emb, tgt_emb, sif, marked, device, as_json, **kw):
    """Tatoeba similarity search: nearest-neighbour error rate (xsim) both ways, and accuracy.

    With --src-emb/--tgt-emb from another encoder (a .npy without sidecar, or --emb-format raw) no
    model is loaded.

    \b
    Examples:
      bitextmine eval tatoeba tatoeba.deu-eng.deu tatoeba.deu-eng.eng
      bitextmine eval tatoeba --all tatoeba/v1 --lang deu --lang fra
      bitextmine eval tatoeba deu.txt eng.txt --src-emb deu.raw --tgt-emb eng.raw --emb-format raw --dim 1024
    """
    from ..encoding.external import embeddings_need_model
    from ..evaluation.runners import run_tatoeba
    from ..errors import ConfigError
    from ..loading import load_model

    if folder and (src or tgt):
        raise ConfigError("give SRC TGT or --all DIR, not both")
    emb = both_or_neither(src_emb, tgt_emb, "--src-emb and --tgt-emb")
    refuse_unused_embedding_options(emb is not None, kw, "--src-emb and --tgt-emb")
    emb_config = embeddings_from(kw)
    model = load_model(model_dir) if emb is None or embeddings_need_model(emb, emb_config.format) else None
    report = run_tatoeba(src, tgt, folder=folder, languages=languages, model=model,
                         config=EncodeConfig(device=device, sif=sif), emb=emb, emb_config=emb_config, marked=marked)
    show_report(report, as_json)


@eval_group.command(name="bucc", option_groups=(("Embeddings", ("src_emb", "tgt_emb", *EMBEDDING_NAMES)),
                                                ("Search", SEARCH_FIELDS)))
@click.argument("src")
@click.argument("tgt")
@click.argument("gold")
@click.option("--tune-on", nargs=3, default=None, metavar="SRC TGT GOLD",
              help="Choose the threshold that maximises F1 on this set (the official protocol).")
@click.option("--oracle", is_flag=True, help="Tune the threshold on the evaluated set itself (reported as ORACLE).")
@click.option("--threshold", type=FINITE, default=None, help="Use this margin threshold.")
@model_option
@click.option("--src-emb", default=None, metavar="FILE",
              help="Precomputed embeddings of SRC's sentences (any encoder; --emb-format).")
@click.option("--tgt-emb", default=None, metavar="FILE", help="Precomputed embeddings of TGT's sentences.")
@embedding_options
@search_options
@click.option("--plot", default=None, metavar="FILE.png", help="Plot precision, recall and F1 against the threshold.")
@_eval_options(("src", "tgt"))
def eval_bucc(src, tgt, gold, tune_on, oracle, threshold, model_dir, src_emb, tgt_emb, plot, sif, marked, device, as_json,
              **kw):
    """BUCC 2018 bitext mining: precision, recall and F1 of mined pairs against the gold pairs.

    SRC and TGT hold <id><TAB><sentence> lines; GOLD holds <src-id><TAB><tgt-id> lines. With
    --src-emb/--tgt-emb from another encoder (a .npy without sidecar, or --emb-format raw) and
    --oracle or --threshold, no model is loaded (--tune-on encodes its set with the model).

    \b
    Example:
      bitextmine eval bucc de-en.test.de de-en.test.en de-en.test.gold \\
          --tune-on de-en.training.de de-en.training.en de-en.training.gold --plot bucc.png
    """
    from ..encoding.external import embeddings_need_model
    from ..evaluation.runners import plot_bucc, run_bucc
    from ..loading import load_model

    check_output(plot, "--plot")
    emb = both_or_neither(src_emb, tgt_emb, "--src-emb and --tgt-emb")
    refuse_unused_embedding_options(emb is not None, kw, "--src-emb and --tgt-emb")
    emb_config = embeddings_from(kw)
    need_model = emb is None or tune_on or embeddings_need_model(emb, emb_config.format)
    model = load_model(model_dir) if need_model else None
    bars: dict = {}

    def progress(name: str, n: int) -> None:
        if name not in bars:
            bars[name] = progress_bar(False, unit="sent", desc=f"search {name}")
        bars[name].update(n)

    report = run_bucc((src, tgt, gold), tune_on=tuple(tune_on) if tune_on else None, oracle=oracle,
                      threshold=threshold, model=model, config=EncodeConfig(device=device, sif=sif),
                      mine=MineConfig(**search_from(kw), device=device), emb=emb, emb_config=emb_config,
                      marked=marked, progress=progress)
    for b in bars.values():
        b.close()
    if plot:
        plot_bucc(report, plot)
    show_report(report, as_json)
