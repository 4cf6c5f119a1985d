"""``bitextmine bench``: the speed and memory of each stage (:func:`bitextmine.bench.run_bench`)."""

from __future__ import annotations

import click

from ..config import MineConfig
from .common import SEARCH_FIELDS, device_option, json_option, model_option, search_from, search_options, show_report
from .help import GroupedCommand

M = MineConfig


@click.command(cls=GroupedCommand, option_groups=(("Search", SEARCH_FIELDS),))
@click.argument("corpus", nargs=-1, required=True, metavar="FILE [FILE2]")
@model_option
@click.option("--max-lines", type=click.IntRange(0), default=0, show_default=True, help="Use at most N lines per side (0 = all).")
@click.option("--stage", "stages", multiple=True, type=click.Choice(["tokenize", "encode", "knn", "mine"]),
              help="Measure only these stages (repeatable)  [default: all]")
@search_options
@device_option(M.device)
@json_option
def bench(corpus, model_dir, max_lines, stages, device, as_json, **search):
    """Sentences/s and peak memory of tokenize, encode, kNN and mine on your corpus and device.

    FILE is split into halves (source, target), or FILE FILE2 are the two sides. Each stage runs in
    its own process, so its peak memory is its own.

    \b
    Example:
      bitextmine bench corpus.en --max-lines 200000 --device cpu
    """
    from ..bench import run_bench
    from ..loading import load_model

    report = run_bench(corpus, load_model(model_dir), device=device, max_lines=max_lines,
                       stages=stages or ("tokenize", "encode", "knn", "mine"),
                       mine=MineConfig(**search_from(search), device=device))
    show_report(report, as_json)
