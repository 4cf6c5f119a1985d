"""``bitextmine filter``: clean a noisy parallel TSV (:func:`bitextmine.filtering.pipeline.filter_tsv`)."""

from __future__ import annotations

import click

from ..config import SCORES, FilterConfig
from .common import (RULE_NAMES, atomic_output, cannot_write, check_distinct_outputs, check_not_inputs, check_output, column_options,
                     columns_from, info, lang_options, model_option, progress_bar, quiet_option, refuse_unused,
                     refuse_unused_rule_options, rule_options, rules_from, sif_option, assist_option, FINITE, FiniteRange)
from .help import GroupedCommand

F = FilterConfig
OPTION_GROUPS = (
    ("Input", ("scol", "tcol", "src_col", "tgt_col", "id_col")),
    ("Scoring", ("min_aligned", "score_column", "k", "judge_lines", "assist", "sif")),
    ("Parallel work", ("chunk_lines", "workers")),
    ("Rules", RULE_NAMES),
)


@click.command(name="filter", cls=GroupedCommand, option_groups=OPTION_GROUPS)
@click.argument("input", default="-", required=False)
@click.option("--output", "-o", default="-", metavar="OUT", help="Kept lines (.gz/.xz/.zst compressed by name; "
              ".parquet: Parquet with typed columns)  [default: stdout]")
@click.option("--rejects", default=None, metavar="FILE", help="Every rejected line, unchanged, plus a reason column "
              "(.parquet: Parquet).")
@click.option("--annotate", is_flag=True, help="Keep every line in the output, with a reason column ('keep' for kept lines).")
@click.option("--stats", "stats_path", default=None, metavar="FILE.json", help="Lines in, kept, rejected, and per reason ('-': stdout, beside -o FILE).")
@click.option("--scol", type=click.IntRange(1), default=F.scol, show_default=True, help="Source column (1-based).")
@click.option("--tcol", type=click.IntRange(1), default=F.tcol, show_default=True, help="Target column (1-based).")
@column_options("src_col", "tgt_col", "id_col")
@click.option("--score", type=click.Choice(SCORES), default=F.score, show_default=True,
              help="cosine of the two sides; margin = ratio margin against the k nearest neighbours of each side among "
                   "the other side's sentences in the same chunk that pass the rules (bigger chunks: denser "
                   "neighbourhoods, margins closer to whole-corpus mining; scores depend on --chunk-lines and the "
                   "rules); prob = the model's second stage's score (0-1; a calibrated probability only where the "
                   "model's calibration maps it) within the chunk, as 'mine --min-prob' judges (needs "
                   "--src-lang/--tgt-lang: English and a language the model's second stage holds); none = rules only.")
@click.option("--min-score", type=FINITE, default=None,
              help="Keep lines scoring at least this (written unchanged). Without it every line passing the rules is "
                   "kept with its score appended as a last column.")
@click.option("--min-aligned", type=FiniteRange(0), default=F.min_aligned, show_default=True,
              help="Where the model knows both --src-lang and --tgt-lang: reject as misaligned a pair whose ratio "
                   "margin within its chunk is below this (a shuffled pair's is far below 1), with --score cosine or "
                   "margin (prob judges it itself); 0 = off.")
@click.option("--score-column/--no-score-column", default=None,
              help="Append the score column  [default: only without --min-score]")
@click.option("--k", type=click.IntRange(1), default=F.k, show_default=True, help="Neighbours for --score margin.")
@click.option("--chunk-lines", type=click.IntRange(1), default=F.chunk_lines, show_default=True,
              help="Lines per chunk: bounds memory; the unit of parallel work and of margin neighbourhoods.")
@click.option("--judge-lines", type=click.IntRange(1), default=F.judge_lines, show_default=True,
              help="--score prob: pairs the second stage judges together, each pair's margin taken among them (within "
                   "a chunk, at most the stage's max_lines).")
@assist_option("--score prob")
@click.option("--workers", type=click.IntRange(0), default=F.workers, show_default=True,
              help="Worker processes (0 = one per core); the output is the same for any number.")
@lang_options("switches on this side's script rule and language-identifier check (--script, --langid).")
@rule_options
@model_option
@sif_option
@quiet_option
def filter_cmd(input, output, rejects, annotate, stats_path, scol, tcol, score, min_score, min_aligned, score_column, k,
               chunk_lines,
               judge_lines, assist, workers, src_lang, tgt_lang, model_dir, sif, quiet, **rule_kw):
    """Filter a noisy parallel TSV (stdin or INPUT; .gz/.xz/.zst read transparently).

    A Parquet or JSONL INPUT (.parquet, .jsonl[.gz], a folder or glob of shards) gives the lines
    [id<TAB>]src<TAB>tgt from --src-col, --tgt-col (and --id-col). An output or --rejects named
    *.parquet is written as Parquet: the line's columns, then score (float) and reason (string).

    Rules, language checks and a similarity score decide; kept lines are written unchanged, every
    rejected line goes to --rejects with its reason, and lines in = kept + rejected, always.

    \b
    Examples:
      paste noisy.en noisy.de | bitextmine filter --src-lang en --tgt-lang de --min-score 0.5 \\
          --rejects rejected.tsv --stats stats.json > clean.tsv
      bitextmine filter corpus.tsv.gz -o scored.tsv.zst --score margin
      bitextmine filter 'shards/*.parquet' --src-col en --tgt-col de --id-col id -o kept.parquet
    """
    from contextlib import nullcontext

    from ..filtering.pipeline import SCORE_USES, filter_tsv, stats_text
    from ..loading import load_model
    from ..tabular import output_format, table_kind

    for path, option in ((output, "--output"), (rejects, "--rejects"), (stats_path, "--stats")):
        check_output(path, option)
    outputs = {"--output": output, **({"--rejects": rejects} if rejects else {}),
               **({"--stats": stats_path} if stats_path else {})}
    check_distinct_outputs(outputs)
    check_not_inputs(outputs, (input,))
    if input not in (None, "-") and table_kind(input) is not None:  # given, even as 1 and 2: a table names columns
        refuse_unused(("scol", "tcol"), "a TSV input (a Parquet or JSONL input names its columns with --src-col and "
                                        "--tgt-col)")
    if score == "none":
        refuse_unused(("model_dir", "sif", "score_column"), "a --score (margin, cosine or prob)")
    for names, needs in ((("k",), "--score margin or prob"), (("judge_lines", "assist"), "--score prob")):
        refuse_unused([n for n in names if n not in SCORE_USES[score]], needs)  # given at another value than its default
    refuse_unused_rule_options(rule_kw, (src_lang, tgt_lang))
    rules = rules_from(rule_kw)
    columns = columns_from(rule_kw)
    config = FilterConfig(score=score, min_score=min_score, min_aligned=min_aligned, chunk_lines=chunk_lines,
                          judge_lines=judge_lines, k=k, assist=assist or "",
                          workers=workers, scol=scol, tcol=tcol)
    model = load_model(model_dir) if score != "none" else None
    bar = progress_bar(quiet, unit="line", desc="filter")
    try:
        with atomic_output(output, binary=True) as out, \
                (atomic_output(rejects, binary=True) if rejects else nullcontext(None)) as rej:
            stats = filter_tsv(input, out, model=model, rules=rules, config=config, src_lang=src_lang,
                               tgt_lang=tgt_lang, rejects=rej, annotate=annotate, score_column=score_column, sif=sif,
                               columns=columns, output_format=output_format(output),
                               rejects_format=output_format(rejects), progress=bar.update)
    finally:
        bar.close()
    if stats_path == "-":
        click.echo(stats_text(stats), nl=False)
    elif stats_path:
        try:  # through a partial file, as every output: a failed write leaves no file that looks complete
            with atomic_output(stats_path) as f:
                f.write(stats_text(stats))
        except OSError as e:
            raise cannot_write(stats_path, e) from None
    top = ", ".join(f"{k} {v}" for k, v in sorted(stats.reasons.items(), key=lambda kv: -kv[1]))
    check = (f"; misaligned: margin below {stats.min_aligned:g} within a chunk" if stats.min_aligned is not None else
             "; no misaligned check (it needs --src-lang and --tgt-lang that the model knows)" if score != "none" else "")
    info(quiet, f"{stats.lines_in} lines in, {stats.kept} kept, {stats.rejected} rejected" + (f" ({top})" if top else "")
         + check)
