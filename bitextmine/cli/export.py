"""``bitextmine export``: a model written for sentence-transformers or model2vec
(:func:`bitextmine.interop.export.export_model`)."""

from __future__ import annotations

import click

from .common import info, quiet_option
from .help import GroupedCommand

FORMATS = ("sentence-transformers", "model2vec")  # bitextmine.interop.export.EXPORT_FORMATS (kept import-free)


@click.command(cls=GroupedCommand)
@click.argument("model_dir", metavar="MODEL")
@click.argument("out_dir", metavar="DIR")
@click.option("--format", "fmt", type=click.Choice(FORMATS), required=True,
              help="sentence-transformers: a StaticEmbedding + Normalize model; model2vec: a StaticModel.")
@quiet_option
def export(model_dir, out_dir, fmt, quiet):
    """Write MODEL (a model directory, or 'default' for the bundled model) to the new directory DIR as a
    sentence-transformers or model2vec model that loads offline in that library and gives the vectors of
    'bitextmine encode'. DIR gets a README.md model card. Needs the interop extra (tokenizers, protobuf:
    pip install 'bitextmine[interop]').

    \b
    Examples:
      bitextmine export default my-st --format sentence-transformers
      bitextmine export my-model my-m2v --format model2vec
    """
    from ..interop.export import export_model
    from ..loading import load_model

    import os

    from ..errors import ConfigError

    if model_dir == "default" and os.path.isdir("default"):
        raise ConfigError("MODEL default: names the bundled model, and a directory ./default exists here; write "
                          "./default for that directory")
    model = load_model(None if model_dir == "default" else model_dir)
    result = export_model(model, out_dir, fmt=fmt)
    info(quiet, f"wrote {result.format} model {result.path} ({len(result.files)} files) of the model "
                f"{model.fingerprint}")
    for note in result.notes:
        info(quiet, f"note: {note}")
