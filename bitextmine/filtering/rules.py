"""Rules for noisy parallel pairs, each with a reason name; the first rule a pair breaks is its reason.

:func:`check_pair` is the one implementation used by ``filter`` and by ``mine`` for its candidates.
Duplicate rules need the pairs seen before and live in :class:`Deduplicator`.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

from ..config import RuleConfig
from ..language import (check_codes, detect, has_profile, identifier_languages, known_codes, known_language,
                        parse_max_probs, script_languages, script_share, wrong_language)
from .numbers import numbers_agree

REASONS = (
    "invalid-utf8", "nul-byte", "missing-column", "column-count",  # damage to the line itself
    "empty", "too-short", "too-long", "length-ratio", "identical", "digits", "urls", "repeats",
    "src-script", "tgt-script", "src-lang", "tgt-lang",
    "misaligned", "low-score", "unjudged", "duplicate-pair", "duplicate-src", "duplicate-tgt",
)

_NUMBER = re.compile(r"\d+")
# a URL ends at a space, a quote, < or >, or CJK text and punctuation ("https://example.com/docs。", "访问
# https://example.com了解"); an e-mail address is ASCII, so "请发邮件至support@example.com联系" gives support@example.com
_CJK = "\u3000-\u303f\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef"
_URL = re.compile(f"(?:https?://|www\\.)[^\\s<>\"'{_CJK}]+|[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\\.[A-Za-z0-9-]+)+",
                  re.IGNORECASE)
_SPACE = re.compile(r"\s+")


def _urls(text: str) -> set[str]:
    return {u.rstrip(".,;:!?)]}").lower() for u in _URL.findall(text)}


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()


# East Asian wide and full-width characters: CJK ideographs, kana, hangul, full-width forms
_WIDE = re.compile("[\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf\uac00-\ud7a3"
                   "\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6\U00020000-\U0003fffd]")


def text_length(text: str) -> int:
    """A side's length for the length-ratio rule: its characters, a wide one (CJK, kana, hangul) counting 3, as
    dense as about three letters of an alphabet. (UTF-8 bytes, the measure before, counted a Cyrillic, Greek or
    Arabic letter twice: good Russian pairs broke a ratio of 3 six times as often as others.)"""
    return len(text) if text.isascii() else len(text) + 2 * len(_WIDE.findall(text))


def check_pair(src: str, tgt: str, rules: RuleConfig, src_lang: str | None = None,
               tgt_lang: str | None = None) -> str | None:
    """The reason (see REASONS) why the pair breaks a rule, or None when it passes every rule.

    ``src_lang``/``tgt_lang``: the sides' declared languages (ISO 639-1; :func:`check_rules` checks them),
    which switch on the script and language rules and pick the number words of the digits rule (for a
    side without one, the identifier's best guess for that side: :func:`bitextmine.filtering.numbers.numbers_agree`)."""
    r = rules
    both = src + tgt
    if r.empty and (not src.strip() or not tgt.strip()):
        return "empty"
    if r.max_chars and (len(src) > r.max_chars or len(tgt) > r.max_chars):
        return "too-long"
    if r.repeats and _repeats(src, tgt, r.repeats):  # before the rules a damaged side breaks as a consequence
        return "repeats"
    ws, wt = len(src.split()), len(tgt.split())
    if r.min_words and (ws < r.min_words or wt < r.min_words):
        return "too-short"
    if r.max_words and (ws > r.max_words or wt > r.max_words):
        return "too-long"
    if r.max_ratio and max(len(src.encode("utf-8")), len(tgt.encode("utf-8"))) >= r.ratio_min_bytes:
        ls, lt = text_length(src), text_length(tgt)
        if max(ls, lt) / max(1, min(ls, lt)) > r.max_ratio:
            return "length-ratio"
    if r.identical and _norm(src) == _norm(tgt):
        return "identical"
    if r.digits and _NUMBER.search(both) and not numbers_agree(src, tgt, src_lang, tgt_lang):
        return "digits"
    if r.urls and ("@" in both or "www" in both or "://" in both) and _urls(src) != _urls(tgt):
        return "urls"
    for side, text, lang in (("src", src, src_lang), ("tgt", tgt, tgt_lang)):
        if lang and r.script and known_language(lang) and script_share(text, lang) < r.min_script:
            return f"{side}-script"
    if r.langid == "probs":
        limits = _max_probs(r.langid_max_prob)
        for side, text, lang in (("src", src, src_lang), ("tgt", tgt, tgt_lang)):
            if lang and len(text.strip()) >= r.langid_probs_min_chars and \
                    wrong_language(text, lang, r.langid_model, limits.get(lang, limits.get("*", 0.0))):
                return f"{side}-lang"
    elif r.langid == "pair" and src_lang and tgt_lang and src_lang != tgt_lang and _pairable(src_lang, tgt_lang):
        pair = (src_lang, tgt_lang)
        for side, text, lang, other in (("src", src, src_lang, tgt_lang), ("tgt", tgt, tgt_lang, src_lang)):
            if len(text) >= r.langid_pair_min_chars:
                found, prob = detect(text, pair)
                if found == other and prob >= r.langid_min_prob:
                    return f"{side}-lang"
    elif r.langid == "full":
        for side, text, lang in (("src", src, src_lang), ("tgt", tgt, tgt_lang)):
            if lang and len(text) >= r.langid_min_chars:
                found, prob = detect(text)
                if found != lang and found != "unknown" and prob >= r.langid_min_prob:
                    return f"{side}-lang"
    return None


def check_rules(rules: RuleConfig, src_lang: str | None = None, tgt_lang: str | None = None) -> None:
    """ConfigError, before any work, for a rule that :func:`check_pair` could not apply: a malformed
    ``langid_max_prob``, or a declared language that the language checks in use do not know (with the
    identifier every line would be rejected; see :func:`known_languages`). filter and mine call this first."""
    from ..errors import ConfigError

    limits: dict = {}
    if rules.langid == "probs":
        try:
            limits = _max_probs(rules.langid_max_prob)
        except ValueError as e:
            raise ConfigError(f"--langid-max-prob: {e}") from None
    keys = [k for k in limits if k != "*"]
    if not (keys or src_lang or tgt_lang):
        return
    known, by = known_languages(rules)
    unknown = sorted(k for k in keys if k not in known)
    if unknown:  # a key no identifier gives is never looked up: its line would get the '*' limit without a word
        raise ConfigError(f"--langid-max-prob {rules.langid_max_prob}: {', '.join(map(repr, unknown))} not a "
                          f"language that {by} knows; expected ISO 639-1 codes such as en, or *")
    if src_lang or tgt_lang:
        check_codes({"--src-lang": src_lang, "--tgt-lang": tgt_lang}, known, by)


def known_languages(rules: RuleConfig) -> tuple[frozenset[str], str]:
    """(the codes a declared language may take, what knows them): the identifier's with ``langid`` probs,
    langdetect's with pair or full, the script rule's with langid off, any check's with both off. The
    script rule applies to the languages whose script it knows (:func:`bitextmine.language.known_language`)."""
    if rules.langid == "probs":
        return identifier_languages(rules.langid_model), f"the language identifier ({rules.langid_model})"
    if rules.langid in ("pair", "full"):
        return identifier_languages("langdetect"), f"langdetect (--langid {rules.langid})"
    if rules.script:
        return script_languages(), "the script rule (--langid off)"
    return known_codes(), "bitextmine's language checks"


@lru_cache(maxsize=64)
def _max_probs(spec: str) -> dict[str, float]:
    return parse_max_probs(spec)


def _pairable(a: str, b: str) -> bool:
    return has_profile(a) and has_profile(b)


_CHAR_RE: dict[int, "re.Pattern[str]"] = {}
_NUMERIC = re.compile(r"[\d.,:/%+-]+")
_EDGE = "\"'()[]{}.,;:!?¡¿«»„“”‚‘’-–—*"


def _repeats(src: str, tgt: str, n: int) -> bool:
    """Repeat damage: a run of characters (:func:`char_repeats`) or of words (:func:`word_repeats`) on one
    side only, or a run of 2n characters on any side. A shorter repeat on both sides is the text's own
    ("ooooo", a quoted "stop, stop, stop").

    For n >= 3 a side with a run of 2n characters also has one of n (a run that a number's match cuts
    into keeps n characters), so the 2n runs are looked for only where both sides have a run of n: the
    common pair without runs costs two scans, not four (tests/test_filter.py checks this against the
    direct formula)."""
    cs, ct = char_repeats(src, n), char_repeats(tgt, n)
    if cs != ct:
        return True
    if (cs or n < 3) and (char_repeats(src, 2 * n) or char_repeats(tgt, 2 * n)):
        return True
    return word_repeats(src) != word_repeats(tgt)


def char_repeats(text: str, n: int) -> bool:
    """A character other than a digit or space n times in a row ("aaaaa", "!!!!!"), or a piece of 2-4
    characters n-1 times in a row ("lalalala", "abcabcabcabc"); runs with digits are numbers ("1.000.000.000.000")."""
    pat = _CHAR_RE.get(n)
    if pat is None:
        pat = _CHAR_RE[n] = re.compile(r"([^\s\d])\1{%d,}|(\S{2,4}?)\2{%d,}" % (n - 1, max(1, n - 2)))
    return any(not any(c.isdigit() for c in m.group(0)) for m in pat.finditer(text))


def word_repeats(text: str) -> bool:
    """A word or phrase three times in a row, or a phrase of three or more words twice in a row (a doubled
    side). Case and punctuation at word edges are ignored; a number alone is no repeat ("3 000 000 000").
    Work is quadratic in the words of the side (bounded by --max-chars, checked first)."""
    words = [w.strip(_EDGE).casefold() or w for w in text.split()]  # "-" stays "-"
    for w in _equal_word_shifts(words):
        run = 0
        for a, b in zip(words, words[w:]):
            run = run + 1 if a == b and (w > 1 or not _is_number(a)) else 0
            if run >= 2 * w or (w >= 3 and run >= w):
                return True
    return False


def _equal_word_shifts(words: list[str]) -> list[int]:
    """The distances w <= len(words) // 2, ascending, at which a repeat could be: a run of r equal pairs of
    words w apart (r = 2w for w < 3, else w) needs r such pairs, so only distances with that many are
    scanned (a side whose words are all distinct, the common case, none)."""
    if len(set(words)) == len(words):
        return []
    seen: dict[str, list[int]] = {}
    pairs: dict[int, int] = {}
    for j, w in enumerate(words):
        for i in seen.get(w, ()):
            if j - i <= len(words) // 2:
                pairs[j - i] = pairs.get(j - i, 0) + 1
        seen.setdefault(w, []).append(j)
    return sorted(d for d, count in pairs.items() if count >= (2 * d if d < 3 else d))


def _is_number(word: str) -> bool:
    return _NUMERIC.fullmatch(word) is not None and any(c.isdigit() for c in word)


def text_key(text: str) -> bytes:
    """A 16-byte digest of a text (duplicate detection keeps digests, not texts)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class Deduplicator:
    """Keeps the first occurrence: remembers digests of the pairs, sources and targets kept so far.
    Memory grows with the number of distinct kept lines (about 100 bytes per digest)."""

    def __init__(self, rules: RuleConfig):
        self.rules = rules
        self.pairs: set[bytes] = set()
        self.srcs: set[bytes] = set()
        self.tgts: set[bytes] = set()

    def check(self, src_key: bytes, tgt_key: bytes) -> str | None:
        """The duplicate reason for a pair about to be kept, or None (and the pair is remembered)."""
        r = self.rules
        pair = src_key + tgt_key
        if r.dedup_pairs and pair in self.pairs:
            return "duplicate-pair"
        if r.dedup_src and src_key in self.srcs:
            return "duplicate-src"
        if r.dedup_tgt and tgt_key in self.tgts:
            return "duplicate-tgt"
        if r.dedup_pairs:
            self.pairs.add(pair)
        if r.dedup_src:
            self.srcs.add(src_key)
        if r.dedup_tgt:
            self.tgts.add(tgt_key)
        return None
