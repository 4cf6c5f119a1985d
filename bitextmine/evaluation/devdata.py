"""The shared training and dev data, read by path: the training corpora under ``train/`` (English with 8
languages), the pairs held apart from the bundled model's training, and each language's training pairs.

What the tools that build and measure the bundled model read (tools/train_default.py and the benchmarks); every
function takes the folder it reads (a tool's ``--data`` default is ../shared/data) and prints nothing.
"""

from __future__ import annotations

import glob
import hashlib
import os
import tempfile
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ..corpus import CorpusSpec, read_lines, read_parallel

# The 8 languages of the shared data with English, and their Tatoeba (ISO 639-3) codes
LANGS = {"de": "deu", "fr": "fra", "es": "spa", "cs": "ces", "ru": "rus", "zh": "cmn", "tr": "tur", "ar": "ara"}


def without_tatoeba_eval(en: str, other: str, tmp: str) -> CorpusSpec:
    """The Anki pairs whose English side does not occur in any Tatoeba test set (flag file beside them),
    written to ``tmp`` so that the Tatoeba figures measure unseen sentences."""
    flags = read_lines(en.replace(".en.gz", ".en_in_any_tatoeba_eval.gz"))
    src, tgt = read_parallel(en, other)
    keep = [i for i, f in enumerate(flags) if f.strip() == "0"]
    name = os.path.basename(en).split(".")[0]
    folder = os.path.join(tmp, "tatoeba_anki (without Tatoeba test English)")  # the model records this name
    os.makedirs(folder, exist_ok=True)
    paths = (os.path.join(folder, f"{name}.en"), os.path.join(folder, f"{name}.xx"))
    for path, side in zip(paths, (src, tgt)):
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(side[i] + "\n" for i in keep)
    return CorpusSpec(src=paths[0], tgt=paths[1], group=name.split("-")[1])


def corpora(train_dir: str, tmp: str) -> list[CorpusSpec]:
    """Every aligned pair of files under train/ (English first, except MLQE-PE's ru-en), grouped by the
    language that is not English."""
    specs = []
    for en in sorted(glob.glob(os.path.join(train_dir, "*", "en-*.en.gz"))):
        lang = os.path.basename(en).split(".")[0].split("-")[1]
        other = en.replace(".en.gz", f".{lang}.gz")
        if os.path.exists(en.replace(".en.gz", ".en_in_any_tatoeba_eval.gz")):
            specs.append(without_tatoeba_eval(en, other, tmp))
        else:
            specs.append(CorpusSpec(src=en, tgt=other))
    for src in sorted(glob.glob(os.path.join(train_dir, "mlqe_pe", "*.src.gz"))):
        pair = os.path.basename(src).split(".")[0].split("-")
        specs.append(CorpusSpec(src=src, tgt=src.replace(".src.gz", ".pe.gz"), group=[x for x in pair if x != "en"][0]))
    for en in sorted(glob.glob(os.path.join(train_dir, "multi30k", "*.en.gz"))):
        for lang in ("de", "fr", "cs"):
            other = en.replace(".en.gz", f".{lang}.gz")
            if os.path.exists(other):
                specs.append(CorpusSpec(src=en, tgt=other))
    for en in sorted(glob.glob(os.path.join(train_dir, "turkish_parallel_corpora", "*.en.gz"))):
        specs.append(CorpusSpec(src=en, tgt=en.replace(".en.gz", ".tr.gz")))
    return specs


def english_first(spec: CorpusSpec) -> bool:
    """Whether the corpus's source side is English (its file name ends in .en or .en.gz)."""
    return str(spec.src).removesuffix(".gz").endswith(".en")


def language_pairs(train_dir: str, lang: str) -> list[tuple[str, str]]:
    """(foreign, English) pairs of ``lang``'s training corpora (:func:`corpora` of ``train_dir``), as read."""
    pairs = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in corpora(train_dir, tmp):
            if spec.group_name() == lang:
                a, b = spec.read()
                pairs += [(y, x) if english_first(spec) else (x, y) for x, y in zip(a, b)]
    return pairs


def english_pairs(train_dir: str, lang: str, skip: tuple[str, ...] = ("debian_iso_codes",)) -> list[tuple[str, str]]:
    """(English, foreign) pairs of every train/*/en-``lang``.en.gz with its foreign file, but those whose path
    holds a name of ``skip`` (ISO code lists: names, not sentences)."""
    import gzip

    pairs = []
    for en in sorted(glob.glob(os.path.join(train_dir, "*", f"en-{lang}.en.gz"))):
        if any(name in en for name in skip):
            continue
        with gzip.open(en, "rt", encoding="utf-8") as f, \
                gzip.open(en.replace(".en.gz", f".{lang}.gz"), "rt", encoding="utf-8") as g:
            pairs += [(a.rstrip("\n"), b.rstrip("\n")) for a, b in zip(f, g)]
    return pairs


@dataclass(frozen=True)
class HeldApart:
    """What :func:`hold_apart` did: the specs without the held-apart pairs, the pairs held apart per language,
    and how many training pairs were dropped for sharing a text with one."""
    specs: list[CorpusSpec]
    held: dict[str, int]
    dropped: int


def hold_apart(specs: list[CorpusSpec], n: int, seed: int, out_dir: str, tmp: str,
               min_corpus: int = 10_000) -> HeldApart:
    """Hold apart ``n`` random pairs per language (seeded) for mining tasks that the model never trained
    on: written to ``out_dir``/en-XX.en and en-XX.XX, drawn from the corpora with English as source and
    at least ``min_corpus`` pairs (a small corpus can be a language's only source of one kind of text:
    Arabic's 7,298 Anki sentences), among pairs whose two texts occur nowhere else in the training data
    (so each text has exactly one gold partner, and holding it apart removes nothing else). Returns the
    specs rewritten to ``tmp`` without the held-apart pairs (and anything sharing a text with them)."""
    data = [(spec, *spec.read()) for spec in specs]
    counts = Counter(t.strip() for _, src, tgt in data for side in (src, tgt) for t in side)
    pools: dict[str, list] = {}
    for spec, src, tgt in data:
        if not english_first(spec) or len(src) < min_corpus:
            continue
        for a, b in zip(src, tgt):
            a, b = a.strip(), b.strip()
            if a and b and a != b and "\t" not in a + b and counts[a] == 1 and counts[b] == 1:
                pools.setdefault(spec.group_name(), []).append((a, b))
    held: set[str] = set()
    sizes: dict[str, int] = {}
    os.makedirs(out_dir, exist_ok=True)
    for group, pairs in sorted(pools.items()):
        rng = np.random.default_rng([seed, 13, sum(map(ord, group))])
        kept = [pairs[i] for i in np.sort(rng.choice(len(pairs), min(n, len(pairs)), replace=False))]
        for side, k in (("en", 0), (group, 1)):
            with open(os.path.join(out_dir, f"en-{group}.{side}"), "w", encoding="utf-8") as f:
                f.writelines(p[k] + "\n" for p in kept)
        held.update(t for p in kept for t in p)
        sizes[group] = len(kept)
    out, dropped = [], 0
    for i, (spec, src, tgt) in enumerate(data):
        keep = [j for j, (a, b) in enumerate(zip(src, tgt)) if a.strip() not in held and b.strip() not in held]
        dropped += len(src) - len(keep)
        paths = tuple(kept_path(p, i, tmp) for p in (spec.src, spec.tgt))
        for path, side in zip(paths, (src, tgt)):
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(side[j] + "\n" for j in keep)
        out.append(CorpusSpec(src=paths[0], tgt=paths[1], group=spec.group_name()))
    return HeldApart(out, sizes, dropped)


def kept_path(path: str, i: int, tmp: str) -> str:
    """Where corpus ``i``'s side ``path`` is rewritten without the held-apart pairs: tmp/i/FOLDER (held-apart
    pairs removed)/NAME, so that the model's record of its corpora (folder and file name) still names it."""
    folder = os.path.basename(os.path.dirname(os.path.abspath(path)))
    name = os.path.basename(str(path)).removesuffix(".gz")
    out = os.path.join(tmp, str(i), f"{folder} (held-apart pairs removed)")
    os.makedirs(out, exist_ok=True)
    return os.path.join(out, name)


def manuals_half(data_dir: str, lang: str, odd: bool = True) -> list[tuple[str, str]]:
    """(foreign, English) pairs of ``lang``'s Debian manuals (``data_dir``/train/debian_docs, which the bundled
    model never trained on) in the half whose English key (:func:`bitextmine.judge.tasks.key`) hashes odd
    (``hashlib.md5(key).digest()[0] % 2 == 1``; ``odd`` False: the other half), in corpus order."""
    fx, en = read_parallel(*_manuals(data_dir, lang)[:2])
    return [(fx[i], en[i]) for i in _half(en, odd)]


def manuals_half_documents(data_dir: str, lang: str, odd: bool = True) -> tuple[list[tuple[str, str]], list[str]]:
    """(the pairs of :func:`manuals_half`, the manual each comes from: the corpus's .origin file)."""
    path_fx, path_en, origin = _manuals(data_dir, lang)
    fx, en = read_parallel(path_fx, path_en)
    names, half = read_lines(origin), _half(en, odd)
    return [(fx[i], en[i]) for i in half], [names[i] for i in half]


def _manuals(data_dir: str, lang: str) -> tuple[str, str, str]:
    base = os.path.join(data_dir, "train", "debian_docs", f"en-{lang}")
    return f"{base}.{lang}.gz", f"{base}.en.gz", f"{base}.origin.gz"


def _half(en: list[str], odd: bool) -> list[int]:
    """The positions of the English texts ``en`` whose key hashes odd (``odd`` False: even)."""
    from ..judge.tasks import key

    return [i for i, e in enumerate(en) if (hashlib.md5(key(e).encode()).digest()[0] % 2 == 1) == odd]


def manuals_pivot(data_dir: str, a: str, b: str, odd: bool = True) -> list[tuple[str, str]]:
    """(``a`` text, ``b`` text) pairs of two languages of the Debian manuals, neither English: the lines of
    :func:`manuals_half` (the same half of the English keys) whose English text is the same in both corpora, each
    English text once, and only where each corpus gives it one translation; in the order of ``a``'s corpus."""
    sides = [_one_translation(manuals_half(data_dir, lang, odd)) for lang in (a, b)]
    return [(x, sides[1][e]) for e, x in sides[0].items() if e in sides[1]]


def _one_translation(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """{English text: its translation} of (foreign, English) ``pairs``, stripped, in their order, without the
    English texts given more than one translation."""
    found: dict[str, set] = {}
    for x, e in pairs:
        found.setdefault(e.strip(), set()).add(x.strip())
    return {e: next(iter(xs)) for e, xs in found.items() if len(xs) == 1 and e}
