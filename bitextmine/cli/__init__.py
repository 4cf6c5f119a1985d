"""The ``bitextmine`` command line: one module per command, each parsing its options and calling one
library function; :mod:`.common` holds what they share and :mod:`.help` the grouped help pages.

Heavy modules (torch, faiss, sentencepiece) are imported inside the commands, so ``--help`` is fast.
"""

from __future__ import annotations

import click

from .. import __version__
from .bench import bench
from .calibrate import calibrate
from .calibrate_mining import calibrate_mining
from .common import CONTEXT, Group
from .encode import encode
from .eval import eval_group
from .export import export
from .filter import filter_cmd
from .mine import mine
from .score import score
from .train import train


@click.group(cls=Group, context_settings=CONTEXT)
@click.version_option(__version__, prog_name="bitextmine")
def main() -> None:
    """Train cross-lingual sentence encoders on bitext, encode sentences fast, mine and score translation pairs.

    \b
    Examples:
      bitextmine mine examples/de.txt examples/en.txt
      bitextmine train --src corpus.de --tgt corpus.en --out my-model
    """


for command in (train, encode, mine, score, filter_cmd, calibrate, calibrate_mining, bench, eval_group, export):
    main.add_command(command)

__all__ = ["main"]
