"""``bitextmine encode``: embeddings of text files (:func:`bitextmine.encoding.encode_files`, or
:func:`bitextmine.encoding.encode_chunked` for resumable chunks)."""

from __future__ import annotations

import os

import click

from ..config import TABLE_PRECISIONS, EncodeConfig
from .common import (check_not_inputs, check_output, column_options, device_option, info, model_option, progress_bar,
                     quiet_option, refuse_unused, sif_option)
from .help import GroupedCommand

E = EncodeConfig


OPTION_GROUPS = (
    ("Speed and memory", ("batch_size", "threads", "batch_tokens", "precision")),
    ("Large inputs", ("chunk_lines", "resume", "max_chunks")),
    ("Parquet and JSONL", ("column",)),
)


@click.command(cls=GroupedCommand, option_groups=OPTION_GROUPS)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("--output", "-o", required=True, metavar="OUT.npy", help="Embeddings file; OUT.npy.json is written beside it.")
@model_option
@click.option("--fp16", is_flag=True, default=E.fp16, help="Store float16 instead of float32.")
@click.option("--batch-size", type=click.IntRange(1), default=E.batch_size, show_default=True, help="Sentences per batch.")
@click.option("--threads", type=click.IntRange(0), default=E.threads, show_default=True, help="Worker processes for reading, tokenising and embedding (0 = one per core).")
@click.option("--batch-tokens", type=click.IntRange(0), default=E.batch_tokens, show_default=True,
              help="At most N pieces per embedding call, whole sentences (bounds device memory; 0 = no limit).")
@click.option("--precision", type=click.Choice(TABLE_PRECISIONS), default=E.precision, show_default=True,
              help="Piece table on the device (sums and norms stay float32); auto = the model's stored dtype on "
                   "CUDA (fp16 for the bundled model: lossless), fp32 on CPU. BiLSTM models run in fp32.")
@sif_option
@click.option("--marked", is_flag=True, help="Models trained with --separate-vocab: the text is in the marked language.")
@click.option("--chunk-lines", type=click.IntRange(0), default=0, show_default=True,
              help="Write OUT as a directory of chunks of N rows with a manifest, resumable (0 = one .npy file).")
@click.option("--resume", is_flag=True, help="With --chunk-lines: continue a stopped run after its last complete chunk.")
@click.option("--max-chunks", type=click.IntRange(0), default=0, show_default=True,
              help="With --chunk-lines: stop after N new chunks (continue later with --resume).")
@column_options("column")
@device_option(E.device)
@quiet_option
def encode(inputs, output, model_dir, fp16, batch_size, threads, batch_tokens, precision, sif, marked, chunk_lines, resume,
           max_chunks, column, device, quiet):
    """Encode text files (one sentence per line; '-' = stdin; .gz read transparently).

    Parquet and JSONL inputs (.parquet, .jsonl[.gz], a folder or glob of shards) give the rows of
    their --column, in order.

    Writes one L2-normalised row per input line, in input order. For huge inputs, --chunk-lines
    writes a directory of chunks that a killed run continues with --resume, ending with the same
    bytes; 'mine --src-emb' and 'eval' read either form.

    \b
    Examples:
      bitextmine encode examples/de.txt -o de.npy
      bitextmine encode big.txt.gz -o big.emb --chunk-lines 1000000 --fp16   # rerun with --resume if stopped
      bitextmine encode 'shards/*.parquet' --column text -o shards.npy
    """
    from ..encoding import encode_chunked, encode_files
    from ..errors import ConfigError
    from ..loading import load_model
    from ..tabular import table_kind

    if output == "-":
        raise ConfigError("--output -: embeddings are written to a file (.npy, or a directory with --chunk-lines); "
                          "expected a file name")
    if not chunk_lines:  # with --chunk-lines OUT is a directory
        check_output(output, "--output")
        check_not_inputs({"--output": output}, inputs)
    elif os.path.exists(output) and not os.path.isdir(output):
        raise ConfigError(f"--output {output}: is a file; --chunk-lines writes a directory of chunks there; expected "
                          "a new name or the directory of a chunked run")
    if not any(table_kind(p) for p in inputs):
        refuse_unused(("column",), "a Parquet or JSONL input (a text file has no columns)")
    model = load_model(model_dir)
    config = EncodeConfig(batch_size=batch_size, threads=threads, fp16=fp16, device=device, sif=sif, marked=marked,
                          batch_tokens=batch_tokens, precision=precision)
    bar = progress_bar(quiet, unit="sent", desc="encode")
    if chunk_lines:
        result = encode_chunked(inputs, output, model, config=config, chunk_lines=chunk_lines, resume=resume,
                                max_chunks=max_chunks, column=column, progress=bar.update)
    elif resume or max_chunks:
        raise ConfigError("--resume and --max-chunks go with --chunk-lines")
    else:
        result = encode_files(inputs, output, model, config=config, column=column, progress=bar.update)
    bar.close()
    if result is None:
        info(quiet, f"stopped after {max_chunks} new chunk(s) in {output}; continue with --resume")
    else:
        info(quiet, f"wrote {result.count} x {result.dim} {result.dtype} to {output}")
