"""``bitextmine mine``: translation pairs between two text files (:func:`bitextmine.mining.mine_files`)."""

from __future__ import annotations

import functools

import click

from ..assist.pick import PICKED_FOR
from ..config import ENGINES, EncodeConfig, Floors, MineConfig, PipelineConfig
from .common import (COLUMN_NAMES, EMBEDDING_NAMES, LANG_NAMES, RULE_NAMES, SEARCH_FIELDS, atomic_output,
                     check_not_inputs, check_output, column_options, columns_from, device_option, embedding_options, embeddings_from,
                     info, lang_options, marked_option, model_option, progress_bar, quiet_option, refuse_unused,
                     refuse_unused_embedding_options, refuse_unused_rule_options, rule_flags, rule_options, rules_from,
                     search_from, search_options, sif_option, assist_option, FINITE, FiniteRange)
from .help import GroupedCommand

M = MineConfig
F = Floors()


def _calibrated(value: float) -> str:
    """The help's default of a selection setting that the model's calibration sets (MineConfig: None)."""
    return f"calibrated per language; {value:g} where none is"
PIPELINE_NAMES = ("work_dir", "resume", "chunk_lines", "engine", "ray_address")
# "Options" (what most runs set) are those no group names: -o, --model, --src-lang/--tgt-lang, --ids, --explain,
# --device, -q; the rule options are accepted but hidden (filter's help describes them; --rules names them)
OPTION_GROUPS = (
    ("Selection", ("threshold", "min_z", "min_cosine", "per_language", "second_stage", "min_prob", "assist",
                   "assist_pick")),
    ("Parquet and JSONL", COLUMN_NAMES),
    ("Embeddings", ("src_emb", "tgt_emb", *EMBEDDING_NAMES, "sif", "marked", "src_assist_emb", "tgt_assist_emb")),
    ("Search", (*SEARCH_FIELDS, "block_size")),
    ("Pipeline", PIPELINE_NAMES),
    ("Rules", ("use_rules", *RULE_NAMES)),
)


def _pipeline_options(f):
    """--work-dir, --resume, --chunk-lines, --engine, --ray-address (PipelineConfig)."""
    P = PipelineConfig
    f = click.option("--ray-address", default=P.ray_address, metavar="ADDR",
                     help="--engine ray: the address of a running cluster  [default: start a local one]")(f)
    f = click.option("--engine", type=click.Choice(ENGINES), default=P.engine, show_default=True,
                     help="Run the stages in this process, or as Ray tasks (pip install 'bitextmine[ray]').")(f)
    f = click.option("--chunk-lines", type=click.IntRange(1), default=P.chunk_lines, show_default=True,
                     help="Lines per chunk: the unit of dedup, encoding and the k-NN grid.")(f)
    f = click.option("--resume", is_flag=True,
                     help="Continue the run recorded in --work-dir (same inputs; changed search, margin or selection "
                          "settings recompute only what depends on them).")(f)
    return click.option("--work-dir", default=P.work_dir, metavar="DIR",
                        help="Keep every stage's files here, so a stopped run continues with --resume  "
                             "[default: a temporary directory, removed after]")(f)


@click.command(cls=GroupedCommand, option_groups=OPTION_GROUPS)
@click.argument("src")
@click.argument("tgt")
@click.option("--output", "-o", default=None, metavar="OUT.tsv", help="Output TSV (a name ending in .parquet: "
              "Parquet with typed columns)  [default: stdout]")
@model_option
@click.option("--src-emb", default=None, metavar="FILE", help="Embeddings of every line of SRC: 'bitextmine encode' "
              "output or any encoder's (no model is loaded for files without encode's sidecar).")
@click.option("--tgt-emb", default=None, metavar="FILE", help="Embeddings of every line of TGT.")
@embedding_options
@search_options
@click.option("--threshold", type=FINITE, default=None, show_default=_calibrated(F.threshold),
              help="Keep pairs scoring at least this margin.")
@click.option("--min-cosine", type=FINITE, default=None, show_default=_calibrated(F.min_cosine),
              help="Keep pairs with at least this cosine.")
@click.option("--min-z", type=FINITE, default=None, show_default=_calibrated(F.min_z),
              help="Keep pairs whose cosine stands out by this many standard deviations from both sentences' "
              "cosines with the other side's lines (0: off, LASER's margin mining).")
@click.option("--per-language/--no-per-language", default=M.per_language, show_default=True,
              help="Use the model's --threshold, --min-z and --min-cosine calibrated for the sides' languages "
              f"(declared, or detected on each side's first {M.detect_lines} lines); one of those options given "
              "replaces its calibrated value. The run's summary names the settings used.")
@click.option("--second-stage/--no-second-stage", default=M.second_stage, show_default=True,
              help="Where the model has a second stage for the sides' languages, judge each candidate with it "
              "and keep those that reach --min-prob (docs/second-stage.md); the floors above still apply.")
@click.option("--min-prob", type=FiniteRange(0, 1), default=None, show_default=_calibrated(F.min_prob),
              help="With the second stage: the score a pair needs.")
@assist_option()
@click.option("--assist-pick/--no-assist-pick", default=M.assist_pick,
              help="With the assist: each line's candidate is the neighbour the two encoders rank first together "
              "among the fast model's k nearest, instead of the fast model's best (docs/assist.md).  [default: for "
              "the languages where it was measured to help: " + " ".join(sorted(PICKED_FOR)) + "]")
@click.option("--src-assist-emb", default=None, metavar="FILE.npy",
              help="The assist as any encoder's embeddings of every line of SRC (.npy), with --tgt-assist-emb; "
              "instead of --assist.")
@click.option("--tgt-assist-emb", default=None, metavar="FILE.npy", help="The assist's embeddings of every line of TGT.")
@click.option("--ids", is_flag=True, help="Append the 1-based line numbers of each side (comma-separated for duplicates).")
@click.option("--explain", is_flag=True, help="Append the ids, the cosine, both neighbour means, the direction that "
              "proposed the pair (fwd, bwd, both), its z and the second stage's score (nan: not judged).")
@column_options("column", "src_col", "tgt_col", "id_col")
@click.option("--block-size", type=click.IntRange(1), default=M.block_size, show_default=True, help="Query rows per k-NN block.")
@_pipeline_options
@sif_option
@marked_option(("src", "tgt"))
@click.option("--rules", "use_rules", is_flag=True,
              help="Drop candidates that break a rule of 'bitextmine filter', set with its options (described in "
              "'bitextmine filter --help'): " + rule_flags() + ".")
@lang_options("used by --per-language and --rules instead of detecting it; refused when the text reads as "
              "another language.")
@click.option("--trust-lang", "trust_langs", is_flag=True, default=M.trust_langs,
              help="Take --src-lang/--tgt-lang as given, without checking them against the text.")
@rule_options(hidden=True)
@device_option(M.device)
@functools.partial(quiet_option, help="No progress bar or summary on stderr; the line naming the settings used stays when "
                                     "per-language settings were looked for.")
def mine(src, tgt, output, model_dir, src_emb, tgt_emb, threshold, min_cosine, min_z, per_language, second_stage,
         min_prob, assist, assist_pick, src_assist_emb, tgt_assist_emb, ids, explain,
         block_size, sif, marked, use_rules, src_lang, tgt_lang, trust_langs, device, quiet, work_dir, resume, chunk_lines, engine,
         ray_address, **kw):
    """Mine translation pairs between two text files (one sentence per line), or Parquet/JSONL inputs (.parquet,
    .jsonl[.gz], a folder or glob of shards; see --column).

    Output: score<TAB>src<TAB>tgt[<TAB>src_ids<TAB>tgt_ids], best first; -o NAME.parquet writes Parquet. A run
    goes in resumable stages through a work directory, here or on Ray. Reference: docs/mining.md.

    \b
    Example:
      bitextmine mine examples/de.txt examples/en.txt --ids
      bitextmine mine 'de/*.parquet' 'en/*.parquet' --column text --id-col id -o pairs.parquet
    """
    from ..mining import mine_files
    from ..loading import load_model
    from ..tabular import output_format, table_kind

    check_output(output, "--output")
    check_not_inputs({"--output": output}, (src, tgt, src_emb, tgt_emb, src_assist_emb, tgt_assist_emb))
    if bool(src_assist_emb) != bool(tgt_assist_emb):
        raise click.UsageError("--src-assist-emb and --tgt-assist-emb go together: give both")
    if not any(table_kind(p) for p in (src, tgt)):  # a text file has no columns
        refuse_unused(("column",), "a Parquet or JSONL input (a text file has no columns)")
    columns = columns_from(kw)
    fmt = output_format(output)
    if not use_rules:
        refuse_unused(RULE_NAMES, "--rules (the rules apply to mined candidates only with it)")
    else:
        refuse_unused_rule_options(kw, (src_lang, tgt_lang))
    refuse_unused_embedding_options(bool(src_emb or tgt_emb), kw)
    rules = rules_from(kw)
    embeddings = embeddings_from(kw)
    config = MineConfig(**search_from(kw), threshold=threshold, min_cosine=min_cosine, min_z=min_z,
                        per_language=per_language, second_stage=second_stage, min_prob=min_prob,
                        trust_langs=trust_langs, assist=assist or "", assist_pick=assist_pick,
                        block_size=block_size, device=device)
    pipeline = PipelineConfig(work_dir=work_dir or "", resume=resume, chunk_lines=chunk_lines, engine=engine,
                              ray_address=ray_address or "")
    bars: dict = {}
    progress = stage_progress(bars, quiet)
    with atomic_output(output, binary=fmt == "parquet") as out:
        stats = mine_files(src, tgt, out, model=load_model(model_dir) if model_dir else None, config=config,
                          encode_config=EncodeConfig(device=device, sif=sif), pipeline=pipeline, embeddings=embeddings,
                          src_emb=src_emb, tgt_emb=tgt_emb, ids=ids, explain=explain, marked=marked,
                          rules=rules if use_rules else None, src_lang=src_lang, tgt_lang=tgt_lang,
                          columns=columns, output_format=fmt, progress=progress,
                          assist_emb=(src_assist_emb, tgt_assist_emb) if src_assist_emb else None)
    for b in bars.values():
        b.close()
    summary = (f"{stats.pairs} pairs from {stats.src_lines} x {stats.tgt_lines} lines "
               f"({stats.src_unique} x {stats.tgt_unique} distinct, {stats.src_empty} + {stats.tgt_empty} empty "
               f"lines skipped)")
    if stats.info.get("assist_lines"):
        summary += f"; the assist encoded {stats.info['assist_lines']} lines"
    if stats.rejected:
        summary += "; dropped by rules: " + ", ".join(f"{k} {v}" for k, v in stats.rejected.items())
    if "recall" in stats.info:
        summary += f"; recall@{config.k} of the {stats.info['index']} search: " + " / ".join(
            f"{r:.3f}" for r in stats.info["recall"])
    if stats.info.get("changed"):
        summary += "; resumed with new " + ", ".join(stats.info["changed"]) + " (what depends on them recomputed)"
    if stats.info.get("settings") and (not quiet or stats.info.get("settings_looked")):
        # which settings were used and why: even with -q when per-language settings were looked for
        click.echo(stats.info["settings"], err=True)
    info(quiet, f"{summary}  [{stats.signature}]")


def stage_progress(bars: dict, quiet: bool):
    """The run's progress callback (stage, done, total): one bar a stage in ``bars``. A stage run again (for the
    other side, or another read of texts) counts from 1 again with its own total, which the bar adds."""
    def progress(stage: str, done: int, total: int) -> None:
        if stage not in bars:
            bars[stage] = progress_bar(quiet, unit="task", desc=stage, total=total)
        elif done == 1:
            bars[stage].total += total
            bars[stage].refresh()
        bars[stage].update(1)
    return progress

