"""Numbers in a sentence, for the ``digits`` rule: the numbers written in digits, and the values written
as words, so that "thirty" and "30", "2,000" and "2000", "drei" and "3" agree.

Digits: any Unicode digits (Arabic-Indic and full-width ones included). Separators inside a number
(``.``, ``,``, ``'``, ``’``, ``:``, Arabic ``٫`` and ``٬``) and spaces (plain, thin or no-break) between
groups of three digits after a first group of one to three are dropped, so a number reads the same whatever
the locale writes ("4.3" and "4,3" both give 43, "1 200" and "1,200" both 1200, "٣٫٥" 35). A positional printf
placeholder ("%1$s") holds no number. Numbers are compared as strings of ASCII digits without leading zeros
("007" is "7"), so a run of any length is one number (no conversion to int, which Python refuses beyond 4,300
digits); a fraction of one is marked as such ("0.5" and ".5" are "5<1", not the "5" of "5"; "0.0" is "0").

Words: cardinal numbers from 0 to 20, the tens, 100 and 1000 (and a few ordinals) and the months (1 to 12:
"in May" and "5 月份") in the languages of the bundled model (en, de, fr, es, cs, ru, tr, ar), and Chinese
numerals (一 to 九 with 十, 百, 千, 万, 两, for zh and ja). Only the words of a side's own language count: "on"
is 10 in Turkish, not in English; "elf" is 11 in German, not in English. Where the numbers still disagree,
three more readings are tried: clock times as times (:func:`times_agree`: "2:30" / "dos y media", "14:30" /
"2:30 p.m."), numbers that a scale word multiplies as their value (:func:`scales_agree`: "20 million" /
"2000万", "1.5 billion" / "15亿") and dates as dates (:func:`dates_agree`: "2001-03-31" / "31.03.2001"). A
side's language is the one declared for it, or else the identifier's best guess
(:func:`bitextmine.language.best_language`); a language without a table here has no number words. Words match
whole, or for the languages that compound or inflect them as the start of a word followed by a known
continuation: German "dreißigjährige", "zweimal", "vierte", "Viertel";
Russian "трёхмерные", "пятилетний", "тысячи"; Arabic words are read without their short vowels and
other marks, as letters where written in presentation forms, with or without a prefix of conjunction,
preposition or article ("الثّاني" is "ثاني"), a unit before عشر as its teen, and a feminine dual as 2.
"Achtung" is not 8 and "однако" is not 1. A word that is also an article ("ein", "un", "una") reads as 1: the
rule then forgives a 1 more often, it never rejects more.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from functools import lru_cache

_PLACEHOLDER = re.compile(r"%\d+\$")
_MARK = "[.,'’:\u066b\u066c]"  # separators inside a number (U+066B, U+066C: the Arabic decimal and thousands ones)
# a number: groups of three digits after spaces when it starts with a group of 1 to 3 digits ("1 200 000"), and
# any groups after the separators ("4.3", "1,200.50"); "In 2019 100 people" is two numbers
_NUMBER = re.compile(f"\\d{{1,3}}(?:[\u00a0\u2009\u202f ]\\d{{3}}(?!\\d))+(?:{_MARK}\\d+)*|\\d+(?:{_MARK}\\d+)*")
_SEPARATOR = re.compile(r"\D")

# per language, value: words. A word matches whole; "w-" matches every word starting with w (long stems
# with no other reading); "w+" matches w whole or followed by one of the language's _JOINS; "a_b" is a
# phrase of two words.
_WORDS: dict[str, dict[int, str]] = {
    "en": {0: "zero", 1: "one first", 2: "two second", 3: "three third", 4: "four fourth", 5: "five fifth",
           6: "six sixth", 7: "seven seventh", 8: "eight eighth", 9: "nine ninth", 10: "ten tenth", 11: "eleven",
           12: "twelve", 13: "thirteen", 14: "fourteen", 15: "fifteen", 16: "sixteen", 17: "seventeen",
           18: "eighteen", 19: "nineteen", 20: "twenty", 30: "thirty", 40: "forty", 50: "fifty", 60: "sixty",
           70: "seventy", 80: "eighty", 90: "ninety", 100: "hundred", 1000: "thousand"},
    "de": {0: "null", 1: "ein eine eins einen einem einer erste", 2: "zwei+ zweite", 3: "drei+ dritte",
           4: "vier+", 5: "fünf+", 6: "sechs+", 7: "sieben+ siebte", 8: "acht+ achte achten achter achtes achtel",
           9: "neun+", 10: "zehn+", 11: "elf+", 12: "zwölf+", 13: "dreizehn+", 14: "vierzehn+", 15: "fünfzehn+",
           16: "sechzehn+", 17: "siebzehn+", 18: "achtzehn+", 19: "neunzehn+", 20: "zwanzig+",
           30: "dreißig+ dreissig+", 40: "vierzig+", 50: "fünfzig+", 60: "sechzig+", 70: "siebzig+",
           80: "achtzig+", 90: "neunzig+", 100: "hundert+", 1000: "tausend+"},
    "fr": {0: "zéro", 1: "un une premier première", 2: "deux deuxième", 3: "trois troisième",
           4: "quatre quatrième", 5: "cinq cinquième", 6: "six sixième", 7: "sept septième", 8: "huit huitième",
           9: "neuf neuvième", 10: "dix dixième", 11: "onze", 12: "douze", 13: "treize", 14: "quatorze",
           15: "quinze", 16: "seize", 17: "dix-sept", 18: "dix-huit", 19: "dix-neuf", 20: "vingt", 30: "trente",
           40: "quarante", 50: "cinquante", 60: "soixante", 70: "soixante-dix", 80: "quatre-vingts quatre-vingt",
           90: "quatre-vingt-dix", 100: "cent cents", 1000: "mille"},
    "es": {0: "cero", 1: "un uno una primero primera primer", 2: "dos segundo segunda", 3: "tres tercero tercera",
           4: "cuatro cuarto cuarta", 5: "cinco quinto", 6: "seis sexto", 7: "siete séptimo", 8: "ocho octavo",
           9: "nueve noveno", 10: "diez décimo", 11: "once", 12: "doce", 13: "trece", 14: "catorce", 15: "quince",
           16: "dieciséis", 17: "diecisiete", 18: "dieciocho", 19: "diecinueve", 20: "veinte", 30: "treinta",
           40: "cuarenta", 50: "cincuenta", 60: "sesenta", 70: "setenta", 80: "ochenta", 90: "noventa",
           100: "cien ciento", 1000: "mil"},
    "cs": {0: "nula", 1: "jeden jedna jedno první", 2: "dva dvě druhý dvou dvěma", 3: "tři třetí tří třech třem třemi",
           4: "čtyři čtvrtý čtyř čtyřech čtyřem čtyřmi", 5: "pět pátý pěti", 6: "šest šestý šesti",
           7: "sedm sedmý sedmi", 8: "osm osmý osmi", 9: "devět devátý devíti", 10: "deset desátý deseti",
           11: "jedenáct", 12: "dvanáct", 13: "třináct", 14: "čtrnáct", 15: "patnáct", 16: "šestnáct",
           17: "sedmnáct", 18: "osmnáct", 19: "devatenáct", 20: "dvacet", 30: "třicet", 40: "čtyřicet",
           50: "padesát", 60: "šedesát", 70: "sedmdesát", 80: "osmdesát", 90: "devadesát", 100: "sto",
           1000: "tisíc tisíce"},
    "ru": {0: "ноль нуль", 1: "один одна одно одну одной одного одному одним одних одни одном одно+",
           2: "два две двух+ двум двумя второй", 3: "три трёх+ трех+ трём трем тремя третий",
           4: "четыре четырёх+ четырех+ четырём четырем четырьмя четвёртый четвертый",
           5: "пять пяти+ пятью пятый", 6: "шесть шести+ шестью шестой", 7: "семь семи+ седьмой",
           8: "восемь восьми+ восемью восьмой", 9: "девять девяти+ девятью девятый",
           10: "десять десяти+ десятью десятый", 11: "одиннадцат-", 12: "двенадцат-", 13: "тринадцат-",
           14: "четырнадцат-", 15: "пятнадцат-", 16: "шестнадцат-", 17: "семнадцат-", 18: "восемнадцат-",
           19: "девятнадцат-", 20: "двадцат-", 30: "тридцат-", 40: "сорок сорока сороков-", 50: "пятьдесят-",
           60: "шестьдесят-", 70: "семьдесят-", 80: "восемьдесят-", 90: "девяност-", 100: "сто ста сотн-",
           1000: "тысяч-"},
    "tr": {0: "sıfır", 1: "bir birinci", 2: "iki ikinci", 3: "üç üçüncü", 4: "dört dördüncü", 5: "beş beşinci",
           6: "altı altıncı", 7: "yedi yedinci", 8: "sekiz sekizinci", 9: "dokuz dokuzuncu", 10: "on onuncu",
           11: "on_bir", 12: "on_iki", 20: "yirmi", 30: "otuz", 40: "kırk", 50: "elli", 60: "altmış",
           70: "yetmiş", 80: "seksen", 90: "doksan", 100: "yüz", 1000: "bin"},
    # Arabic: ثنائي, ثلاثي, رباعي also read as 2, 3, 4 ("2D", "3D": ثنائي الأبعاد, ثلاثي الأبعاد)
    "ar": {0: "صفر", 1: "واحد واحدة الأول أول أولى", 2: "اثنان اثنين اثنتان ثاني ثانية ثنائي ثنائية",
           3: "ثلاثة ثلاث ثالث ثالثة ثلاثي ثلاثية", 4: "أربعة أربع رابع رابعة رباعي رباعية", 5: "خمسة خمس خامس",
           6: "ستة ست سادس", 7: "سبعة سبع سابع",
           8: "ثمانية ثماني ثمان ثامن", 9: "تسعة تسع تاسع", 10: "عشرة عشر عاشر", 11: "أحد_عشر", 12: "اثنا_عشر",
           20: "عشرون عشرين", 30: "ثلاثون ثلاثين", 40: "أربعون أربعين", 50: "خمسون خمسين", 60: "ستون ستين",
           70: "سبعون سبعين", 80: "ثمانون ثمانين", 90: "تسعون تسعين", 100: "مائة مئة", 1000: "ألف"},
}
# the months, 1 to 12, as number words of each language ("in May" / "5 月份", "August 12" / "8月12日"); a month
# name that is also another word ("may", "march", Turkish "aralık" = "range") reads as the month, so the rule
# forgives a little more, never rejects more
_MONTHS: dict[str, dict[int, str]] = {
    "en": {1: "january jan", 2: "february feb", 3: "march mar", 4: "april apr", 5: "may", 6: "june jun",
           7: "july jul", 8: "august aug", 9: "september sep sept", 10: "october oct", 11: "november nov",
           12: "december dec"},
    "de": {1: "januar jänner", 2: "februar", 3: "märz", 4: "april", 5: "mai", 6: "juni", 7: "juli", 8: "august",
           9: "september", 10: "oktober", 11: "november", 12: "dezember"},
    "fr": {1: "janvier", 2: "février", 3: "mars", 4: "avril", 5: "mai", 6: "juin", 7: "juillet", 8: "août",
           9: "septembre", 10: "octobre", 11: "novembre", 12: "décembre"},
    "es": {1: "enero", 2: "febrero", 3: "marzo", 4: "abril", 5: "mayo", 6: "junio", 7: "julio", 8: "agosto",
           9: "septiembre setiembre", 10: "octubre", 11: "noviembre", 12: "diciembre"},
    "cs": {1: "leden ledna lednu", 2: "únor února únoru", 3: "březen března březnu", 4: "duben dubna dubnu",
           5: "květen května květnu", 6: "červen června červnu", 7: "červenec července červenci",
           8: "srpen srpna srpnu", 9: "září", 10: "říjen října říjnu", 11: "listopad listopadu",
           12: "prosinec prosince prosinci"},
    "ru": {1: "январ-", 2: "феврал-", 3: "март марта марте", 4: "апрел-", 5: "май мая мае", 6: "июн-", 7: "июл-",
           8: "август-", 9: "сентябр-", 10: "октябр-", 11: "ноябр-", 12: "декабр-"},
    "tr": {1: "ocak", 2: "şubat", 3: "mart", 4: "nisan", 5: "mayıs", 6: "haziran", 7: "temmuz", 8: "ağustos",
           9: "eylül", 10: "ekim", 11: "kasım", 12: "aralık"},
    "ar": {1: "يناير", 2: "فبراير", 3: "مارس", 4: "أبريل إبريل", 5: "مايو", 6: "يونيو", 7: "يوليو", 8: "أغسطس",
           9: "سبتمبر", 10: "أكتوبر", 11: "نوفمبر", 12: "ديسمبر"},
}
# what may follow a "w+" word inside one word (casefolded): German compounds ("dreißigjährige", "zweimal",
# "Dreieck") and ordinals and fractions ("vierte", "zwanzigste", "Viertel", "Zehner"); Russian compounds
# ("трёхмерные", "пятилетний", "однокомнатная"). Not "Achtung", "Zweifel", "Zweig", "dreist", "семинар".
_JOINS = {
    "de": r"(?:jähr|jahr|mal|fach|stellig|stünd|stund|tägig|tage|wöch|woch|monat|minüt|minut|sekünd|seitig|"
          r"teil|köpf|kopf|zimmer|sitz|spur|dimension|eck|stöck|stock|stuf|stimm|sprach|farb|rad|räd|stern|gang|"
          r"zylinder|hundert|tausend|prozent|punkt|erpotenz|ergruppe|erpack|erreihe)"
          r"|(?<![gtd])(?:te|tel)[nrsm]?$|(?<=[gtd])s?(?:te|tel)[nrsm]?$|er[ns]?$",
    "ru": r"(?:лет|летн|дневн|часов|минутн|секундн|месячн|недельн|этажн|комнатн|мерн|кратн|значн|местн|разов|"
          r"процентн|угольн|сторонн|ступенчат|колесн|дверн|звёздн|звездн|томн|серийн|ядерн|тонн|литров|метров|"
          r"километров|сот|тысячн|цилиндров|моторн|осн|головн)",
}
_CJK_LANGS = ("zh", "ja")


class _Table:
    """One language's number words: whole words, stems ("w-"), joined words ("w+"), phrases."""

    def __init__(self, lang: str, words: dict[int, str]):
        self.whole: dict[str, int] = {}
        stems: list[tuple[str, int, bool]] = []  # (start, value, needs a join)
        self.phrases: dict[str, int] = {}
        for value, text in words.items():
            for w in text.casefold().split():
                if "_" in w:
                    self.phrases[w.replace("_", " ")] = value
                elif w[-1] in "-+":
                    stems.append((w[:-1], value, w[-1] == "+"))
                    if w[-1] == "+":
                        self.whole[w[:-1]] = value
                else:
                    self.whole[w] = value
        self.stems = sorted(stems, key=lambda s: -len(s[0]))  # the longest start that fits wins
        self.joins = re.compile(_JOINS[lang]) if lang in _JOINS else None

    def values(self, w: str) -> set[int]:
        """Values a word may stand for: itself, its start (stems and joined words), or the sum of its
        hyphenated parts ("twenty-one" 21)."""
        if w in self.whole:
            return {self.whole[w]}
        found = set()
        for start, value, join in self.stems:
            if w.startswith(start) and len(w) > len(start):
                if not join or (self.joins is not None and self.joins.match(w, len(start))):
                    found.add(value)
                    break
        parts = w.split("-")
        if len(parts) > 1 and all(p in self.whole for p in parts):
            found.add(sum(self.whole[p] for p in parts))
        return found


@lru_cache(maxsize=None)
def _table(lang: str) -> _Table | None:
    if lang not in _WORDS:
        return None
    words = {v: " ".join(filter(None, (_WORDS[lang].get(v, ""), _MONTHS.get(lang, {}).get(v, ""))))
             for v in {*_WORDS[lang], *_MONTHS.get(lang, {})}}
    return _Table(lang, words)


_WORD = re.compile(r"[^\W\d_]+(?:[-'][^\W\d_]+)*")
_CJK_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "兩": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
               "八": 8, "九": 9}
_CJK_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10000, "萬": 10000}
_CJK = re.compile(f"[{''.join(_CJK_DIGITS)}{''.join(_CJK_UNITS)}]+")


def number_languages() -> tuple[str, ...]:
    """The languages whose number words are known (the others have none)."""
    return (*_WORDS, *_CJK_LANGS)


def _digits(run: str) -> str:
    """A run of Unicode digits as ASCII digits without leading zeros ("٠٠٣" -> "3", "000" -> "0")."""
    ascii_digits = run if run.isascii() else "".join(str(unicodedata.decimal(c)) for c in run)
    return ascii_digits.lstrip("0") or "0"


BELOW_ONE = "<1"  # the mark of a number below one: "0.5" is "5<1", not the "5" of "5"


def _below_one(text: str, m: re.Match) -> bool:
    """Whether the number ``m`` found in ``text`` is a fraction of one, not zero: a first group of zeros and a
    nonzero digit after a separator ("0.5", "0,05"), or digits after a lone point (" .08", "(.5"; not a printf
    precision, "%.1f", which placeholders become: "%6$.1f" is "%.1f"), or a comma that starts the text (",5")."""
    number = m.group(0)
    zeros = "".join("0" if c.isdigit() and unicodedata.decimal(c, 1) == 0 else c for c in number)  # any script's
    head = re.match("0+(?=[.,'’\u066b])", zeros)  # a decimal mark ("0'05"), not "0:30"
    if head is not None:
        return any(c.isdigit() and unicodedata.decimal(c) for c in number[head.end():])
    start = m.start()
    lone = start == 1 and text[0] in ".," or start > 1 and text[start - 1] == "." and text[start - 2] in " \t("
    return lone and any(unicodedata.decimal(c) for c in number if c.isdigit())


def digit_numbers(text: str) -> Counter:
    """The numbers written in digits, as ASCII digit strings without separators and leading zeros, a fraction
    of one marked BELOW_ONE (a Counter: how often each occurs)."""
    text = _PLACEHOLDER.sub("%", text)
    return Counter(_digits(_SEPARATOR.sub("", m.group(0))) + (BELOW_ONE if _below_one(text, m) else "")
                   for m in _NUMBER.finditer(text))


def word_numbers(text: str, lang: str | None) -> set[int]:
    """The values of ``lang``'s number words (see the module docstring) in the text; none for a language
    without a table or None."""
    found: set[int] = set()
    table = _table(lang) if lang else None
    if table is not None:
        low = _arabic_letters(text) if lang == "ar" else text.casefold()
        for m in _WORD.finditer(low):
            found.update(_arabic_values(m.group(0), table) if lang == "ar" else table.values(m.group(0)))
        found.update(v for p, v in table.phrases.items() if p in low)
        if lang == "ar":  # a unit and عشر: its teen ("الخامس عشر", 15th)
            found.update(v + 10 for m in _AR_TEEN.finditer(low) for v in _arabic_values(m.group(1), table) if v < 10)
    if lang in _CJK_LANGS:
        found.update(_cjk_value(m.group(0)) for m in _CJK.finditer(text))
    return found


_AR_MARKS = re.compile("[\u0610-\u061a\u064b-\u065f\u0670\u0640]")  # the short vowels and other marks, tatweel
_AR_PREFIXES = ("وال", "بال", "فال", "كال", "لل", "ال", "و", "ب", "ل", "ف")  # and, with, for, the
_AR_TEEN = re.compile(r"([^\W\d_]+)\s+عشرة?(?![^\W\d_])")


def _arabic_letters(text: str) -> str:
    """Arabic text with its presentation forms as letters (NFKC) and without short vowels, other marks and
    tatweel: "الثّاني" is "الثاني"."""
    return _AR_MARKS.sub("", unicodedata.normalize("NFKC", text))


def _arabic_values(word: str, table: _Table) -> set[int]:
    """The values an Arabic word may stand for: itself or without a prefix of conjunction, preposition or article
    ("والثلاثون", "الرابع"), or 2 for a feminine dual of five letters or more ("نقطتين", "ساعتان")."""
    for w in [word] + [word[len(p):] for p in _AR_PREFIXES if word.startswith(p) and len(word) - len(p) >= 2]:
        found = table.values(w)
        if found:
            return found
    return {2} if len(word) >= 5 and word.endswith(("تين", "تان")) else set()


def _cjk_value(s: str) -> int:
    """The value of a run of Chinese numerals ("三" 3, "十五" 15, "二十" 20, "两千" 2000, "一九九九" 1999, "三十万"
    300,000, "一万五千" 15,000)."""
    if not any(c in _CJK_UNITS for c in s):
        return int("".join(str(_CJK_DIGITS[c]) for c in s))
    total = section = digit = 0  # 万 multiplies the whole section before it: 三十万 = (30) x 10,000
    for c in s:
        if c in _CJK_DIGITS:
            digit = _CJK_DIGITS[c]
            continue
        unit = _CJK_UNITS[c]
        if unit >= 10_000:
            total += ((section + digit) or 1) * unit
            section = 0
        else:
            section += (digit or 1) * unit
        digit = 0
    return total + section + digit


def _side_language(text: str, lang: str | None) -> str | None:
    return lang or _guess(text)


@lru_cache(maxsize=4096)
def _guess(text: str) -> str | None:
    """The identifier's best guess for a side (deterministic), once per text however many readings ask."""
    from ..language import best_language

    return best_language(text)


def numbers_agree(src: str, tgt: str, src_lang: str | None = None, tgt_lang: str | None = None) -> bool:
    """Whether each number written in digits on one side is on the other, in digits or in that side's
    language's number words (``src_lang``/``tgt_lang``: ISO 639-1 codes; None: the identifier's best guess,
    asked only when the digits alone disagree); where they do not, whether they do once the clock times, the
    numbers a scale word multiplies or the dates are read as such (:func:`times_agree`, :func:`scales_agree`,
    :func:`dates_agree`)."""
    a, b = digit_numbers(src), digit_numbers(tgt)
    if a == b:
        return True
    if _rest_agree(a, b, src, tgt, src_lang, tgt_lang):
        return True
    return (times_agree(src, tgt, src_lang, tgt_lang) or scales_agree(src, tgt, src_lang, tgt_lang)
            or dates_agree(src, tgt, src_lang, tgt_lang))


# dates in digits: "2001-03-31" (year first), "31.03.2001", "3/31/2001", "31/3/01" (day or month first)
_DATE = re.compile(r"(?<![\d.,/-])(?:(\d{4})-(\d{1,2})-(\d{1,2})|(\d{1,2})([./])(\d{1,2})\5(\d{4}|\d{2}))"
                   r"(?![\d/-]|\.\d)")


def dates(text: str) -> list[frozenset[int]]:
    """The dates written in digits in ``text``, each as the set of its day, month and year (day and month in
    either order; a two-digit year as written)."""
    out = []
    for m in _DATE.finditer(text):
        if m.group(1):
            parts = [int(_digits(m.group(i))) for i in (1, 2, 3)]
        else:
            parts = [int(_digits(m.group(i))) for i in (4, 6, 7)]
        out.append(frozenset(parts))
    return out


def dates_agree(src: str, tgt: str, src_lang: str | None = None, tgt_lang: str | None = None) -> bool:
    """Whether the numbers of the two sides agree (:func:`numbers_agree` without dates) once each date in digits
    on either side (:func:`dates`: "2001-03-31", "31.03.2001") is found on the other: as a date of the same day,
    month and year, or as the numbers of its day and year with the month in digits or by its name."""
    da, db = dates(src), dates(tgt)
    if not da and not db:
        return False
    a, b = digit_numbers(_DATE.sub(" ", src)), digit_numbers(_DATE.sub(" ", tgt))
    for mine, theirs, numbers, text, lang in ((da, db, b, tgt, tgt_lang), (db, da, a, src, src_lang)):
        for date in mine:
            if date in theirs or _date_in(date, numbers, text, lang):
                continue
            return False
    a -= Counter(str(n) for d in db for n in d if str(n) in a)
    b -= Counter(str(n) for d in da for n in d if str(n) in b)
    return _rest_agree(a, b, src, tgt, src_lang, tgt_lang)


def _date_in(date: frozenset, numbers: Counter, text: str, lang: str | None) -> bool:
    """Whether each part of the date is on the other side: in digits (the year's last two digits also count), or
    a month by its name."""
    said = None
    for n in date:
        if str(n) in numbers or (n > 99 and str(n % 100) in numbers):
            continue
        if n <= 12:
            said = word_numbers(text, _side_language(text, lang)) if said is None else said
            if n in said:
                continue
        return False
    return True


# words that multiply the number before them ("20 million", "2000万", "1,5 Milliarden"), casefolded; a
# language's own only ("billion" is 10^12 in German and French)
_SCALES = {
    "en": {"thousand": 3, "million": 6, "millions": 6, "billion": 9, "billions": 9, "bn": 9, "trillion": 12},
    "de": {"tausend": 3, "million": 6, "millionen": 6, "mio": 6, "milliarde": 9, "milliarden": 9, "mrd": 9,
           "billion": 12, "billionen": 12},
    "fr": {"mille": 3, "million": 6, "millions": 6, "milliard": 9, "milliards": 9, "billion": 12},
    "es": {"mil": 3, "millón": 6, "millones": 6, "billón": 12, "billones": 12},
    "cs": {"tisíc": 3, "tisíce": 3, "milion": 6, "miliony": 6, "milionů": 6, "mil": 6, "miliarda": 9,
           "miliardy": 9, "miliard": 9, "mld": 9},
    "ru": {"тысяч": 3, "тысячи": 3, "тысяча": 3, "тыс": 3, "миллион": 6, "миллиона": 6, "миллионов": 6, "млн": 6,
           "миллиард": 9, "миллиарда": 9, "миллиардов": 9, "млрд": 9},
    "tr": {"bin": 3, "milyon": 6, "milyar": 9},
    "ar": {"ألف": 3, "آلاف": 3, "مليون": 6, "ملايين": 6, "مليار": 9, "مليارات": 9},
}
_CJK_SCALES = {"百万": 6, "千万": 7, "万": 4, "萬": 4, "亿": 8, "億": 8}  # not 千 alone: 千米 is a kilometre
_SCALED = re.compile("(" + _NUMBER.pattern + r")\s?([^\W\d_]+)")
_WORD_SCALED = re.compile(r"([^\W\d_]+)\s+([^\W\d_]+)")


def scaled_numbers(text: str, lang: str | None) -> list[tuple[str | None, str]]:
    """The numbers that a scale word of ``lang`` multiplies: [(the number as :func:`digit_numbers` writes it, or
    None for a number word ("one million"), the value as a digit string)]. In digits, a separator before exactly
    three last digits groups thousands ("1,500万"), any other marks the decimals ("3.2929 million")."""
    out = []
    for m in _SCALED.finditer(text):
        power = _scale(m.group(2), lang)
        if power is not None:
            out.append((_digits(_SEPARATOR.sub("", m.group(1))), _scaled_value(m.group(1), power)))
    table = _table(lang) if lang and lang in _SCALES else None
    for m in _WORD_SCALED.finditer(text.casefold()) if table is not None else ():
        power, values = _scale(m.group(2), lang), table.values(m.group(1))
        if power is not None and len(values) == 1:
            out.append((None, str(values.pop() * 10 ** power)))
    return out


_ANY_SCALE = frozenset(w for words in _SCALES.values() for w in words)


def _may_scale(text: str) -> bool:
    """Whether a scale word of some language follows a number or a word in ``text``."""
    low = text.casefold()
    return (any(w in _ANY_SCALE or w[:1] in "万萬亿億百千" for w in (m.group(2) for m in _SCALED.finditer(low)))
            or any(m.group(2) in _ANY_SCALE for m in _WORD_SCALED.finditer(low)))


def _scale(word: str, lang: str | None) -> int | None:
    """The power of ten of the scale word (for zh and ja: the scale characters a word starts with), or None."""
    if lang in _CJK_LANGS:
        return _CJK_SCALES.get(word[:2], _CJK_SCALES.get(word[:1]))
    return _SCALES.get(lang or "", {}).get(word.casefold())


def _scaled_value(number: str, power: int) -> str:
    """The number in digits (any script's, any separators) times 10^power, as a digit string."""
    from decimal import Decimal

    digits = "".join(str(unicodedata.decimal(c)) if c.isdigit() else c for c in re.sub(r"\s", "", number))
    parts = re.split(r"[.,'’\u066b\u066c:]", digits)
    whole, frac = (parts[:-1], parts[-1]) if len(parts) > 1 and len(parts[-1]) != 3 else (parts, "")
    value = (Decimal("".join(whole) or "0") + (Decimal("0." + frac) if frac else 0)).scaleb(power)
    return str(int(value)) if value == value.to_integral_value() else format(value.normalize(), "f")


def scales_agree(src: str, tgt: str, src_lang: str | None = None, tgt_lang: str | None = None) -> bool:
    """Whether the numbers of the two sides agree (:func:`numbers_agree` without them) once each number a scale
    word multiplies (:func:`scaled_numbers`: "20 million", "2000万") is read as its value, found on the other side
    as a scaled number of that value or as the value in digits."""
    if not (_may_scale(src) or _may_scale(tgt)):  # before the languages are looked for
        return False
    la, lb = _side_language(src, src_lang), _side_language(tgt, tgt_lang)
    sa, sb = scaled_numbers(src, la), scaled_numbers(tgt, lb)
    if not sa and not sb:
        return False
    a, b = digit_numbers(src), digit_numbers(tgt)
    va, vb = {v for _, v in sa}, {v for _, v in sb}
    if not all(v in vb or v in b for v in va) or not all(v in va or v in a for v in vb):
        return False
    a -= Counter(n for n, _ in sa if n) + Counter(v for v in vb if v in a)
    b -= Counter(n for n, _ in sb if n) + Counter(v for v in va if v in b)
    return _rest_agree(a, b, src, tgt, la, lb)


# clock times: "2:30", "14:30h", "14h30", "14 h 30", "9:00 a.m."; "14.30 Uhr" (a point only before Uhr, h or hod.)
_TIME = re.compile(r"(?<![\d:.,])(\d{1,2})(?::| ?h ?|\.(?=\d\d\s*(?:uhr|h\b|hod)))([0-5]\d)(?![\d:])", re.IGNORECASE)
# the words of a half hour and a quarter ("half past two", "dos y media", "halb drei", "两点半"), casefolded
_HALF = {"en": "half", "es": "media medio", "fr": "demie demi", "de": "halb halbe halben", "cs": "půl",
         "ru": "половина половине половину пол", "tr": "buçuk yarım", "ar": "نصف النصف والنصف ونصف",
         "zh": "半", "ja": "半"}
_QUARTER = {"en": "quarter", "es": "cuarto", "fr": "quart", "de": "viertel dreiviertel", "cs": "čtvrt třičtvrtě",
            "ru": "четверть четверти", "tr": "çeyrek", "ar": "ربع الربع والربع إلا", "zh": "刻", "ja": "刻"}


def clock_times(text: str) -> list[tuple[int, int]]:
    """The clock times written in digits in ``text``: [(hour, minute)]."""
    return [(int(_digits(h)), int(_digits(m))) for h, m in _TIME.findall(text)]


def times_agree(src: str, tgt: str, src_lang: str | None = None, tgt_lang: str | None = None) -> bool:
    """Whether the numbers of the two sides agree (:func:`numbers_agree` without times) once each clock time of
    either side (:func:`clock_times`) is found on the other: as a time with the same hour on a 12-hour clock and
    the same minutes ("14:30" and "2:30"), as its digits read as one number (its "230") or as numbers of their
    own ("14时30分"), or in the other side's words: the hour (or, at half past and a quarter to, the next one:
    "halb drei", "quarter to three") and the minutes, which o'clock needs none of, and a half or a quarter may
    say in a word ("dos y media")."""
    ta, tb = clock_times(src), clock_times(tgt)
    if not ta and not tb:
        return False
    if not (all(_time_in(t, tb, tgt, tgt_lang) for t in ta if t not in tb)
            and all(_time_in(t, ta, src, src_lang) for t in tb if t not in ta)):
        return False
    a = _without_times(digit_numbers(_TIME.sub(" ", src)), tb)
    b = _without_times(digit_numbers(_TIME.sub(" ", tgt)), ta)
    return _rest_agree(a, b, src, tgt, src_lang, tgt_lang)


def _without_times(numbers: Counter, times: list) -> Counter:
    """``numbers`` less one hour and one minute number for each clock time of the other side that they write in
    digits of their own ("22时", "5时30分")."""
    out = Counter(numbers)
    for hour, minute in times:
        for n in (str(hour), str(hour % 12 or 12)):
            if out[n]:
                out[n] -= 1
                if minute and out[str(minute)]:
                    out[str(minute)] -= 1
                break
    return +out


def _time_in(time: tuple[int, int], times: list, text: str, lang: str | None) -> bool:
    """Whether the clock time (hour, minute) is in ``text``, whose clock times are ``times``."""
    hour, minute = time
    if any(h % 12 == hour % 12 and m == minute for h, m in times):
        return True
    numbers = digit_numbers(text)
    if f"{hour}{minute:02d}" in numbers:
        return True
    if {str(hour), str(hour % 12 or 12)} & set(numbers) and (minute == 0 or str(minute) in numbers):
        return True  # the hour and minutes in digits of their own ("22时", "5时30分", "9 h 30")
    lang = _side_language(text, lang)
    said = word_numbers(text, lang)
    hours = {hour, hour % 12 or 12} | ({hour % 12 + 1} if minute in (30, 45) else set())
    if not hours & said:
        return False
    low = text.casefold()
    words = set(_WORD.findall(low)) | ({c for c in low if c in "半刻"} if lang in _CJK_LANGS else set())
    half = set(_HALF.get(lang or "", "").split()) & words
    quarter = set(_QUARTER.get(lang or "", "").split()) & words
    return minute == 0 or minute in said or (minute == 30 and bool(half)) or (minute in (15, 45) and bool(quarter))


def _rest_agree(a: Counter, b: Counter, src: str, tgt: str, src_lang: str | None, tgt_lang: str | None) -> bool:
    """Whether the numbers ``a`` of the source side missing from ``b`` are on the target in its words, and those of
    ``b`` missing from ``a`` on the source."""
    only_a, only_b = a - b, b - a
    return (not only_a or _in_words(only_a, tgt, tgt_lang)) and (not only_b or _in_words(only_b, src, src_lang))


def _in_words(numbers: Counter, text: str, lang: str | None) -> bool:
    """Whether every number (digit strings) is written as a word in ``text``."""
    words = {str(v) for v in word_numbers(text, _side_language(text, lang))}
    return all(n in words for n in numbers)
