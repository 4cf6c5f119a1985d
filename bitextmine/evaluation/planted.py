"""Mining sides of real sentences with planted translations, for timing `mine` end to end (tools/bench_second_stage.py,
tools/gpu_check.py).

Sides: ``lines`` foreign and English lines from the training corpora of one language (shuffled with a seed): a
``share`` of them translations of each other (line i of one side with line i of the other), the rest the foreign
side of some pairs and the English side of others. ``join`` N makes each line of N pairs' sentences joined by a
space (drawn with the seed: the planted lines from one third of the pairs, each side's other lines from a third of
its own, every line once), so that a side can have more lines than the language has pairs.
"""

from __future__ import annotations

import json
import lzma
import os
import shutil

import numpy as np

from ..errors import ConfigError
from .devdata import language_pairs


def read_pairs(lang: str, train_dir: str = "", path: str = "") -> list[tuple[str, str]]:
    """(foreign, English) pairs of ``lang``'s training corpora in ``train_dir``, or of a file that
    :func:`write_pairs` wrote (``path``)."""
    if path:
        with lzma.open(path, "rt", encoding="utf-8") as f:
            return [tuple(line.rstrip("\n").split("\t")) for line in f]
    return language_pairs(train_dir, lang)


def write_pairs(pairs: list[tuple[str, str]], path: str, most: int, seed: int) -> None:
    """Up to ``most`` of ``pairs`` (a seeded sample, whitespace runs made one space), foreign TAB English, xz."""
    keep = np.sort(np.random.default_rng(seed).permutation(len(pairs))[:most or len(pairs)])
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with lzma.open(path, "wt", encoding="utf-8") as f:
        f.writelines(f"{' '.join(pairs[i][0].split())}\t{' '.join(pairs[i][1].split())}\n" for i in keep.tolist())


def joined(pool: np.ndarray, count: int, join: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """``count`` distinct tuples of ``join`` indices drawn from ``pool`` int (p,)."""
    if len(pool) ** join < 2 * count:
        raise ConfigError(f"{len(pool):,} pairs joined {join} at a time cannot give {count:,} distinct lines")
    seen: dict = {}
    while len(seen) < count:
        for combo in map(tuple, pool[rng.integers(0, len(pool), (count - len(seen), join))].tolist()):
            seen.setdefault(combo, None)
    return list(seen)


def line_orders(n_pairs: int, lines: int, g: int, join: int, rng: np.random.Generator) -> tuple[list, list]:
    """(foreign side, English side): each line a tuple of ``join`` pair indices; line i < g of both sides the same
    tuple (the planted translations), no pair in two lines' tuples of different sides otherwise."""
    order = rng.permutation(n_pairs)
    if join == 1:
        if n_pairs < 2 * lines - g:
            raise ConfigError(f"{n_pairs:,} pairs; {2 * lines - g:,} needed (or --join 2)")
        fx = [(i,) for i in order[:lines].tolist()]
        return fx, fx[:g] + [(i,) for i in order[lines:2 * lines - g].tolist()]
    third = n_pairs // 3
    planted = joined(order[:third], g, join, rng)
    return (planted + joined(order[third:2 * third], lines - g, join, rng),
            planted + joined(order[2 * third:3 * third], lines - g, join, rng))


def sides(lang: str, lines: int, share: float, seed: int, folder: str, join: int = 1, pairs_file: str = "",
          train_dir: str = "") -> tuple[str, str]:
    """Write the two sides (module docstring) to ``folder``: xz text files, line i of one side the translation of
    line i of the other for i < share * lines; pairs from ``pairs_file`` or else the training corpora in
    ``train_dir``. Returns their paths."""
    pairs = read_pairs(lang, train_dir, pairs_file)
    fx, en = line_orders(len(pairs), lines, int(share * lines), join, np.random.default_rng(seed))
    paths = side_paths(folder, lang)
    os.makedirs(folder, exist_ok=True)
    for path, side, k in zip(paths, (fx, en), (0, 1)):
        with lzma.open(path, "wt", encoding="utf-8") as f:
            f.writelines(" ".join(" ".join(pairs[i][k].split()) for i in combo) + "\n" for combo in side)
    return paths


def side_paths(folder: str, lang: str) -> tuple[str, str]:
    return os.path.join(folder, f"src.{lang}.xz"), os.path.join(folder, "tgt.en.xz")


def is_planted(src_ids: str, tgt_ids: str, planted: int) -> bool:
    """Whether a printed pair (its ``--ids`` columns: every line number of the text on each side, "1,5") is a planted
    translation: line i with line i, i <= planted. A text that repeats elsewhere on its side carries several line
    numbers; comparing the columns as strings missed those (16.7 % of the planted pairs of the fr 200,000-line sides)."""
    tgt = {int(t) for t in tgt_ids.split(",")}
    return any(int(s) <= planted and int(s) in tgt for s in src_ids.split(","))


def raised(model_dir: str | None, max_lines: int, tmp: str) -> str:
    """A copy of the model (default: the bundled one) in ``tmp`` whose second stage applies up to ``max_lines``."""
    from ..model import default_model_dir

    out = os.path.join(tmp, "model")
    shutil.copytree(model_dir or default_model_dir(), out)
    path = os.path.join(out, "second_stage", "second_stage.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    for lang in data["languages"].values():
        lang["max_lines"] = max_lines
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return out
