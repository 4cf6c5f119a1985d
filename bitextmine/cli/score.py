"""``bitextmine score``: the cosine or margin of each src<TAB>tgt line (:func:`bitextmine.scoring.score_file`)."""

from __future__ import annotations

from dataclasses import replace

import click

from ..config import SCORE_MARGINS, EncodeConfig, ScoreConfig
from .common import (atomic_output, check_not_inputs, check_output, column_options, columns_from, device_option, info,
                     model_option, progress_bar, quiet_option, refuse_unused, sif_option, assist_option)
from .help import GroupedCommand

E = EncodeConfig


@click.command(cls=GroupedCommand)
@click.argument("file", default="-", required=False)
@click.option("--output", "-o", default=None, metavar="OUT.tsv", help="Output  [default: stdout]")
@model_option
@click.option("--batch-size", type=click.IntRange(1), default=E.batch_size, show_default=True, help="Lines per batch.")
@click.option("--margin", type=click.Choice(SCORE_MARGINS), default=ScoreConfig.margin, show_default=True,
              help="none = the cosine; ratio | distance = LASER's score mode: the margin of each pair against the k "
                   "nearest neighbours of its sides among the distinct lines of the other side of the file (exact search; "
                   "embeddings kept in temporary files in TMPDIR, the input read twice); prob = the model's second "
                   "stage's score (0-1; a calibrated probability only where the model's calibration maps it) within "
                   "chunks of --chunk-lines lines, as 'filter --score prob' (needs --src-lang/--tgt-lang).")
@click.option("--chunk-lines", type=click.IntRange(1), default=ScoreConfig.chunk_lines, show_default=True,
              help="--margin prob: lines per chunk, the neighbourhood of each pair's margin.")
@click.option("--judge-lines", type=click.IntRange(1), default=ScoreConfig.judge_lines, show_default=True,
              help="--margin prob: pairs the second stage judges together, each pair's margin taken among them (within "
                   "a chunk, at most the stage's max_lines).")
@assist_option("--margin prob")
@click.option("--src-lang", default="", help="--margin prob: the source column's language (ISO 639-1).")
@click.option("--tgt-lang", default="", help="--margin prob: the target column's language (ISO 639-1).")
@click.option("-k", "--k", type=click.IntRange(1), default=ScoreConfig.k, show_default=True,
              help="Neighbours per side for --margin.")
@sif_option
@column_options("src_col", "tgt_col", "id_col")
@device_option(E.device)
@quiet_option
def score(file, output, model_dir, batch_size, margin, k, chunk_lines, judge_lines, assist, src_lang, tgt_lang, sif, device,
          quiet, **kw):
    """Append the cosine similarity (or --margin score) of src<TAB>tgt to each line (FILE or '-' = stdin).

    A Parquet or JSONL FILE (.parquet, .jsonl[.gz], a folder or glob of shards) gives pairs from its
    --src-col and --tgt-col; each row is written as [id<TAB>]src<TAB>tgt<TAB>score (the id with --id-col).

    \b
    Examples:
      paste examples/de.txt examples/en.txt | bitextmine score | sort -t$'\\t' -k3,3gr | head
      paste examples/de.txt examples/en.txt | bitextmine score --margin ratio
      bitextmine score pairs.parquet --src-col de --tgt-col en --id-col id -o scored.tsv
    """
    from ..errors import ConfigError
    from ..loading import load_model
    from ..scoring import score_file
    from ..tabular import output_format

    check_output(output, "--output")
    check_not_inputs({"--output": output}, (file,))
    # given on the command line at another value than its default, an option the margin does not read is refused
    from ..scoring import MARGIN_USES

    for names, needs in ((("k",), "--margin ratio, distance or prob"),
                         (("chunk_lines", "judge_lines", "assist", "src_lang", "tgt_lang"), "--margin prob")):
        refuse_unused([n for n in names if n not in MARGIN_USES[margin]], needs)
    if output_format(output) == "parquet":
        raise ConfigError(f"--output {output}: score writes TSV lines; name the output .tsv (filter --annotate "
                          "writes Parquet with the score column)")
    model = load_model(model_dir)
    bar = progress_bar(quiet, unit="line", desc="score")
    with atomic_output(output) as out:
        n = score_file(file, out, model, config=replace(EncodeConfig(), batch_size=batch_size, device=device, sif=sif),
                       score=ScoreConfig(margin=margin, k=k, chunk_lines=chunk_lines, judge_lines=judge_lines,
                                         src_lang=src_lang, tgt_lang=tgt_lang, assist=assist or ""),
                       columns=columns_from(kw),
                       progress=bar.update)
    bar.close()
    info(quiet, f"scored {n} lines")
