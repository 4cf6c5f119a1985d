"""Readers of the benchmark files: Tatoeba folders, STS (SemEval, STS Benchmark TSV, CSV, cross-lingual
pairs) and BUCC 2018. Every bad line is a CorpusError naming the file and line."""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass

import numpy as np

from ..corpus import iter_lines, read_lines
from ..errors import CorpusError


def find_tatoeba(folder: str) -> list[tuple[str, str, str]]:
    """(language, path of its side, path of the English side) for every ``tatoeba.xxx-eng.xxx`` in ``folder``."""
    found = []
    for name in sorted(os.listdir(folder)):
        m = re.fullmatch(r"tatoeba\.([a-z_]+)-eng\.\1", name)
        if m and os.path.exists(os.path.join(folder, name[: -len(m.group(1))] + "eng")):
            found.append((m.group(1), os.path.join(folder, name), os.path.join(folder, name[: -len(m.group(1))] + "eng")))
    if not found:
        raise CorpusError(f"{folder}: no Tatoeba files; expected pairs named tatoeba.xxx-eng.xxx and tatoeba.xxx-eng.eng")
    return found


@dataclass
class STSData:
    s1: list[str]
    s2: list[str]
    gold: np.ndarray  # float64 (n,)
    name: str = ""
    year: str | None = None  # "STS12".."STS16" for the SemEval sets
    dropped: int = 0  # unscored pairs left out


def _float(text: str, path: str, line: int, what: str = "score") -> float:
    try:
        return float(text)
    except ValueError:
        raise CorpusError(f"{path} line {line}: {what} {text[:40]!r} is not a number") from None


def read_stsbenchmark(path: str) -> STSData:
    """STS Benchmark TSV: genre, file, year, id, score, s1, s2[, extra]; or the companion sets' layout
    without the genre (file, year, id, score, s1, s2). Split on tabs, no quoting."""
    s1, s2, gold = [], [], []
    for i, line in enumerate(iter_lines(path), 1):
        cols = line.split("\t")
        if len(cols) >= 7:
            sc, a = 4, 5
        elif len(cols) == 6:
            sc, a = 3, 4
        else:
            raise CorpusError(f"{path} line {i}: {len(cols)} columns; expected at least 6 (STS Benchmark TSV)")
        gold.append(_float(cols[sc], path, i))
        s1.append(cols[a])
        s2.append(cols[a + 1])
    return STSData(s1, s2, np.asarray(gold), name=os.path.basename(path))


def read_sts_csv(path: str) -> STSData:
    """CSV ``sentence1,sentence2,score`` (a header line naming the columns is skipped)."""
    s1, s2, gold = [], [], []
    with open(path, encoding="utf-8", newline="") as f:
        for i, row in enumerate(csv.reader(f), 1):
            if i == 1 and len(row) == 3 and row[2].strip().lower() == "score":
                continue
            if len(row) != 3:
                raise CorpusError(f"{path} line {i}: {len(row)} fields; expected 3 (sentence1,sentence2,score)")
            gold.append(_float(row[2], path, i))
            s1.append(row[0])
            s2.append(row[1])
    return STSData(s1, s2, np.asarray(gold), name=os.path.basename(path))


def _semeval_gold_path(path: str) -> str:
    d, base = os.path.split(path)
    return os.path.join(d, base.replace(".input.", ".gs.", 1))


def _semeval_year(path: str) -> str | None:
    text = os.path.basename(os.path.dirname(os.path.abspath(path))) + " " + os.path.basename(path)
    m = re.search(r"STS(?:20)?(1[2-6])", text)
    return f"STS{m.group(1)}" if m else None


def read_semeval(path: str) -> STSData:
    """SemEval STS: ``STS.input.X.txt`` (s1<TAB>s2[<TAB>...]) with its gold ``STS.gs.X.txt`` beside it;
    pairs whose gold line is empty are unscored and dropped (counted in ``dropped``)."""
    gold_path = _semeval_gold_path(path)
    if not os.path.exists(gold_path):
        raise CorpusError(f"{path}: no gold file {os.path.basename(gold_path)} beside it")
    inputs = read_lines(path)
    golds = read_lines(gold_path)
    if len(inputs) != len(golds):
        raise CorpusError(f"{gold_path}: {len(golds)} lines but {os.path.basename(path)} has {len(inputs)}")
    s1, s2, gold, dropped = [], [], [], 0
    for i, (line, g) in enumerate(zip(inputs, golds), 1):
        if not g.strip():
            dropped += 1
            continue
        cols = line.split("\t")
        if len(cols) < 2:
            raise CorpusError(f"{path} line {i}: {len(cols)} column; expected s1<TAB>s2")
        gold.append(_float(g.strip(), gold_path, i))
        s1.append(cols[0])
        s2.append(cols[1])
    name = re.sub(r"^STS(2016)?\.input\.|\.txt$", "", os.path.basename(path))
    return STSData(s1, s2, np.asarray(gold), name=name, year=_semeval_year(path), dropped=dropped)


def read_sts(path: str) -> STSData:
    """Any supported STS file, recognised by name and content: SemEval (``*.input.*``), CSV
    (``sentence1,sentence2,score``) or STS Benchmark TSV."""
    base = os.path.basename(path)
    if ".input." in base:
        return read_semeval(path)
    first = next(iter(iter_lines(path)), None)
    if first is None:
        raise CorpusError(f"{path}: empty; expected STS pairs")
    if first.count("\t") >= 5:
        return read_stsbenchmark(path)
    return read_sts_csv(path)


def read_sts_crosslingual(path1: str, path2: str) -> STSData:
    """Cross-lingual STS from two languages' row-aligned files: s1 from ``path1``, s2 from ``path2``;
    the gold scores must agree."""
    a, b = read_sts(path1), read_sts(path2)
    if len(a.gold) != len(b.gold):
        raise CorpusError(f"{path2}: {len(b.gold)} pairs but {path1} has {len(a.gold)}; expected row-aligned files")
    bad = np.flatnonzero(np.abs(a.gold - b.gold) > 1e-6)
    if len(bad):
        raise CorpusError(f"{path2} pair {bad[0] + 1}: gold {b.gold[bad[0]]} differs from {a.gold[bad[0]]} in {path1}")
    return STSData(a.s1, b.s2, a.gold, name=f"{a.name}+{b.name}")


def read_bucc_sentences(path: str) -> tuple[list[str], list[str]]:
    """BUCC ``<id><TAB><sentence>`` lines -> (ids, sentences)."""
    ids, sents = [], []
    seen: set[str] = set()
    for i, line in enumerate(iter_lines(path), 1):
        k, tab, text = line.partition("\t")
        if not tab or not k:
            raise CorpusError(f"{path} line {i}: expected <id><TAB><sentence>")
        if k in seen:
            raise CorpusError(f"{path} line {i}: id {k!r} repeated; expected unique ids")
        seen.add(k)
        ids.append(k)
        sents.append(text)
    return ids, sents


def read_bucc_gold(path: str) -> set[tuple[str, str]]:
    """BUCC gold ``<src-id><TAB><tgt-id>`` lines -> set of pairs."""
    gold = set()
    for i, line in enumerate(iter_lines(path), 1):
        cols = line.split("\t")
        if len(cols) != 2 or not cols[0] or not cols[1]:
            raise CorpusError(f"{path} line {i}: expected <src-id><TAB><tgt-id>")
        gold.add((cols[0], cols[1]))
    return gold
