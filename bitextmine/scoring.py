"""Scoring given pairs: each ``src<TAB>tgt`` line gets the cosine of its two sides appended as a last column.

Streaming: lines are read, scored and written in batches, so memory does not grow with the input.
"""

from __future__ import annotations

from typing import Callable, Iterable, TextIO

import numpy as np

from .config import EncodeConfig
from .corpus import iter_lines, parse_tsv_line
from .encoding.pipeline import Encoder
from .model import Model


def cosine_pairs(src: list[str], tgt: list[str], encoder: Encoder) -> np.ndarray:
    """Cosine similarity of aligned texts: float32 (n,)."""
    xs = encoder.encode_batch(src)
    xt = encoder.encode_batch(tgt)
    return (xs * xt).sum(1)


def score_lines(lines: Iterable[str], model: Model, *, name: str = "<stdin>", scol: int = 1, tcol: int = 2,
                config: EncodeConfig = EncodeConfig()) -> Iterable[tuple[str, float]]:
    """Yield (line, cosine) for each TSV line, in order. Raises CorpusError for a line without the columns."""
    enc = Encoder(model, config)
    batch: list[str] = []
    src: list[str] = []
    tgt: list[str] = []
    for i, line in enumerate(lines, 1):
        s, t = parse_tsv_line(line, name=name, lineno=i, scol=scol, tcol=tcol)
        batch.append(line)
        src.append(s)
        tgt.append(t)
        if len(batch) >= config.batch_size:
            yield from zip(batch, cosine_pairs(src, tgt, enc).tolist())
            batch, src, tgt = [], [], []
    if batch:
        yield from zip(batch, cosine_pairs(src, tgt, enc).tolist())


def score_file(path: str, out: TextIO, model: Model, *, config: EncodeConfig = EncodeConfig(),
               progress: Callable[[int], None] | None = None) -> int:
    """Score ``path`` (``-`` = stdin, gzip transparent) into ``out``; returns the number of lines written."""
    n = 0
    name = "<stdin>" if path == "-" else path
    for line, cos in score_lines(iter_lines(path), model, name=name, config=config):
        out.write(f"{line}\t{cos:.6f}\n")
        n += 1
        if progress and n % 10000 == 0:
            progress(10000)
    return n
