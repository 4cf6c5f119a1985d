"""What a pair's two texts share on their surface, whatever the languages: numbers, words copied across
(names, identifiers), punctuation marks, length in characters. A translation keeps them; a same-topic
sentence shares the topic's words and loses the rest.

  numbers_shared     |A & B| / |A | B| of the numbers of the two lines (NFKC, any script's digits); 1 when
                     neither has a number
  numbers_unmatched  |A ^ B|, capped at 5
  copied_fx          the share of the foreign line's words (letters only, 3 or more, case-folded) that the
                     English line has too
  copied_en          the same share of the English line's words
  punctuation        sum over the marks ? ! : ( ) % and quotes (with their CJK, Arabic and typographic
                     forms) of the difference in their counts
  chars              |log(characters of the foreign line / characters of the English line)|
"""

from __future__ import annotations

import math
import re
import unicodedata
from functools import lru_cache

import numpy as np

SURFACE = ("numbers_shared", "numbers_unmatched", "copied_fx", "copied_en", "punctuation", "chars")

_NUMBER = re.compile(r"\d+")
_WORD = re.compile(r"[^\W\d_]{3,}")
_MARKS = ("?？؟", "!！", ":：", "(（", ")）", "%％٪", "\"“”«»„「」")
_GROUP = {ch: k for k, group in enumerate(_MARKS) for ch in group}
_MARK = re.compile("[" + re.escape("".join(_MARKS)) + "]")
_UNMATCHED_CAP = 5


@lru_cache(maxsize=65536)
def _line(text: str) -> tuple[frozenset, frozenset, tuple, int]:
    """(numbers, words, counts of each of _MARKS, characters) of one line (plain Python: a numpy call per line
    cost more than the counting)."""
    numbers = frozenset(int(x) for x in _NUMBER.findall(unicodedata.normalize("NFKC", text)) if len(x) < 19)
    words = frozenset(_WORD.findall(text.casefold()))
    marks = [0] * len(_MARKS)
    for ch in _MARK.findall(text):
        marks[_GROUP[ch]] += 1
    return numbers, words, tuple(marks), len(text)


def pair_surface(fx: str, en: str) -> tuple[float, ...]:
    """The :data:`SURFACE` features of one pair (a foreign line, an English line)."""
    na, wa, ma, ca = _line(fx)
    nb, wb, mb, cb = _line(en)
    union = len(na | nb)
    shared = len(wa & wb)
    return (len(na & nb) / union if union else 1.0, float(min(len(na ^ nb), _UNMATCHED_CAP)),
            shared / max(len(wa), 1), shared / max(len(wb), 1), float(sum(abs(a - b) for a, b in zip(ma, mb))),
            abs(math.log(max(ca, 1) / max(cb, 1))))


def surface_features(fx: list[str], en: list[str]) -> np.ndarray:
    """The :data:`SURFACE` features float64 (n, 6) of the pairs (fx[i], en[i]), two lists of n strings."""
    if len(fx) != len(en):
        raise ValueError(f"{len(fx)} foreign and {len(en)} English lines; expected pairs")
    return np.array([pair_surface(a, b) for a, b in zip(fx, en)], np.float64).reshape(len(fx), len(SURFACE))
