"""``bitextmine calibrate``: a score threshold from good pairs (:func:`bitextmine.evaluation.calibration.calibrate`)."""

from __future__ import annotations

import click

from ..config import EncodeConfig, FilterConfig
from .common import check_output, json_option, model_option, refuse_unused, show_report, sif_option
from .help import GroupedCommand

F = FilterConfig


@click.command(cls=GroupedCommand)
@click.argument("gold", required=False)
@click.option("--src", default=None, metavar="FILE", help="Source side of the gold pairs (with --tgt, instead of GOLD).")
@click.option("--tgt", default=None, metavar="FILE", help="Target side of the gold pairs.")
@click.option("--scol", type=click.IntRange(1), default=F.scol, show_default=True, help="GOLD TSV source column.")
@click.option("--tcol", type=click.IntRange(1), default=F.tcol, show_default=True, help="GOLD TSV target column.")
@click.option("--score", type=click.Choice(["cosine", "margin"]), default="cosine", show_default=True,
              help="The score to calibrate (as in 'filter --score'; margin: neighbours within the gold set).")
@click.option("--k", type=click.IntRange(1), default=F.k, show_default=True, help="Neighbours for --score margin.")
@click.option("--plot", default=None, metavar="FILE.png", help="Plot the score distributions of good and bad pairs.")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the shuffled bad pairs.")
@model_option
@sif_option
@json_option
def calibrate(gold, src, tgt, scol, tcol, score, k, plot, seed, model_dir, sif, as_json):
    """Suggest a score threshold for a model from a small set of good pairs.

    Bad pairs are generated from the gold set (shuffled pairs, and near-miss pairs: each source with
    its most similar wrong target); precision, recall and F1 are printed per threshold.

    \b
    Example:
      bitextmine calibrate gold.tsv --plot scores.png
    """
    from ..evaluation.calibration import calibrate as run, plot_calibration
    from ..corpus import read_parallel, read_tsv
    from ..errors import ConfigError
    from ..loading import load_model

    check_output(plot, "--plot")
    if gold and (src or tgt):
        raise ConfigError("give GOLD or --src/--tgt, not both")
    if not gold:
        refuse_unused(("scol", "tcol"), "GOLD (the columns of a TSV of good pairs)")
    if score != "margin":
        refuse_unused(("k",), "--score margin (the neighbours of the margin)")
    if gold:
        s, t = read_tsv(gold, scol=scol, tcol=tcol)
    elif src and tgt:
        s, t = read_parallel(src, tgt)
    else:
        raise ConfigError("expected GOLD (a TSV of good pairs) or --src FILE --tgt FILE")
    report = run(s, t, load_model(model_dir), score=score, k=k, seed=seed, config=EncodeConfig(sif=sif))
    if plot:
        plot_calibration(report, plot)
    show_report(report, as_json)
