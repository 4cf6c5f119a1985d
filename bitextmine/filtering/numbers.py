"""Numbers in a sentence, for the ``digits`` rule: the values written in digits, and the values written
as words, so that "thirty" and "30", "2,000" and "2000", "drei" and "3" agree.

Digits: any Unicode digits (Arabic-Indic and full-width ones included). Separators inside a number
(``.``, ``,``, ``'``, ``’``, ``:``) and spaces (plain, thin or no-break) before a group of exactly three
digits are dropped, so a number reads the same whatever the locale writes ("4.3" and "4,3" both give 43,
"1 200" and "1,200" both 1200). A positional printf placeholder ("%1$s") holds no number.

Words: cardinal numbers from 0 to 20, the tens, 100 and 1000 (and a few ordinals) in the languages of
the bundled model (en, de, fr, es, cs, ru, tr, ar), matched as whole words or, for the languages that
compound or inflect them, as the start of a word ("dreißigjährige", "трёхмерные"); Chinese numerals
(一 to 九 with 十, 百, 千, 万, 两) read as values. A word that is also an article ("ein", "un", "una")
reads as 1: the rule then forgives a 1 more often, it never rejects more.
"""

from __future__ import annotations

import re
from collections import Counter

_PLACEHOLDER = re.compile(r"%\d+\$")
_NUMBER = re.compile(r"\d+(?:(?:[.,'’:]|[\u00a0\u202f ](?=\d{3}(?!\d)))\d+)*")
_SEPARATOR = re.compile(r"\D")

# value: words (whole words) ; a trailing "-" marks a stem matched at the start of a word
_WORDS = {
    0: "zero null zéro cero nula ноль нуль sıfır صفر",
    1: "one first ein eine eins einen einem einer erste un une premier uno una primero primera jeden jedna "
       "jedno první один одна одно один- одн- bir birinci واحد واحدة الأول أول",
    2: "two second zwei zweite deux deuxième dos segundo segunda dva dvě druhý два две двух- двум- второй "
       "iki ikinci اثنان اثنين اثنتان ثاني الثاني",
    3: "three third drei dritte trois troisième tres tercero tercera tři třetí три трёх- трех- третий üç "
       "üçüncü ثلاثة ثلاث ثالث الثالث",
    4: "four fourth vier vierte quatre quatrième cuatro cuarto cuarta čtyři čtvrtý четыре четырёх- четырех- "
       "четвёртый dört dördüncü أربعة أربع رابع",
    5: "five fifth fünf fünfte cinq cinquième cinco quinto pět pátý пять пяти- пятый beş beşinci خمسة خمس "
       "خامس",
    6: "six sixth sechs sechste sixième seis sexto šest šestý шесть шести- шестой altı altıncı ستة ست سادس",
    7: "seven seventh sieben siebte sept septième siete séptimo sedm sedmý семь семи- седьмой yedi yedinci "
       "سبعة سبع سابع",
    8: "eight eighth acht achte huit huitième ocho octavo osm osmý восемь восьми- восьмой sekiz sekizinci "
       "ثمانية ثماني ثمان ثامن",
    9: "nine ninth neun neunte neuf neuvième nueve noveno devět devátý девять девяти- девятый dokuz "
       "dokuzuncu تسعة تسع تاسع",
    10: "ten tenth zehn zehnte dix dixième diez décimo deset desátý десять десяти- десятый on onuncu عشرة "
        "عشر عاشر",
    11: "eleven elf onze once jedenáct одиннадцать- on_bir أحد_عشر",
    12: "twelve zwölf douze doce dvanáct двенадцать- on_iki اثنا_عشر",
    13: "thirteen dreizehn treize trece třináct тринадцать-",
    14: "fourteen vierzehn quatorze catorce čtrnáct четырнадцать-",
    15: "fifteen fünfzehn quinze quince patnáct пятнадцать-",
    16: "sixteen sechzehn seize dieciséis šestnáct шестнадцать-",
    17: "seventeen siebzehn dix-sept diecisiete sedmnáct семнадцать-",
    18: "eighteen achtzehn dix-huit dieciocho osmnáct восемнадцать-",
    19: "nineteen neunzehn dix-neuf diecinueve devatenáct девятнадцать-",
    20: "twenty zwanzig vingt veinte dvacet двадцать- yirmi عشرون عشرين",
    30: "thirty dreißig dreissig trente treinta třicet тридцать- otuz ثلاثون ثلاثين",
    40: "forty vierzig quarante cuarenta čtyřicet сорок- kırk أربعون أربعين",
    50: "fifty fünfzig cinquante cincuenta padesát пятьдесят- elli خمسون خمسين",
    60: "sixty sechzig soixante sesenta šedesát шестьдесят- altmış ستون ستين",
    70: "seventy siebzig soixante-dix setenta sedmdesát семьдесят- yetmiş سبعون سبعين",
    80: "eighty achtzig quatre-vingts quatre-vingt ochenta osmdesát восемьдесят- seksen ثمانون ثمانين",
    90: "ninety neunzig quatre-vingt-dix noventa devadesát девяносто- doksan تسعون تسعين",
    100: "hundred hundert cent cien ciento sto сто сотн- yüz مائة مئة",
    1000: "thousand tausend mille mil tisíc tisíce тысяч- bin ألف",
}
# German compounds its number words ("dreißigjährige", "zweimal"): these also match the start of a word
_GERMAN_COMPOUNDING = {"zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn", "zwölf",
                       "zwanzig", "dreissig", "vierzig", "fünfzig", "sechzig", "siebzig", "achtzig", "neunzig",
                       "hundert", "tausend"}


def _tables() -> tuple[dict[str, int], list[tuple[str, int]], dict[str, int]]:
    """(whole words, word starts longest first, phrases of two words) with their values."""
    whole, stems, phrases = {}, [], {}
    for value, words in _WORDS.items():
        for w in words.casefold().split():
            if "_" in w:
                phrases[w.replace("_", " ")] = value
            elif w.endswith("-"):
                stems.append((w[:-1], value))
            else:
                whole[w] = value
                if w in _GERMAN_COMPOUNDING:  # casefolded: "dreißig" is "dreissig"
                    stems.append((w, value))
    return whole, sorted(stems, key=lambda s: -len(s[0])), phrases


_WHOLE, _STEMS, _PHRASES = _tables()
_STEM_VALUE = dict(_STEMS)
_STEM = re.compile("|".join(re.escape(st) for st, _ in _STEMS))  # longest first: the longest stem matches
_WORD = re.compile(r"[^\W\d_]+(?:[-'][^\W\d_]+)*")
_CJK_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "兩": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
               "八": 8, "九": 9}
_CJK_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10000, "萬": 10000}
_CJK = re.compile(f"[{''.join(_CJK_DIGITS)}{''.join(_CJK_UNITS)}]+")


def digit_numbers(text: str) -> Counter:
    """The numbers written in digits, as int values (a Counter: how often each occurs)."""
    text = _PLACEHOLDER.sub(" ", text)
    return Counter(int(_SEPARATOR.sub("", m.group(0))) for m in _NUMBER.finditer(text))


def word_numbers(text: str) -> set[int]:
    """The values of the number words (see the module docstring) and Chinese numerals in the text."""
    found = set()
    low = text.casefold()
    for m in _WORD.finditer(low):
        found.update(_word_values(m.group(0)))
    found.update(v for p, v in _PHRASES.items() if p in low)
    found.update(_cjk_value(m.group(0)) for m in _CJK.finditer(text))
    return found


def _word_values(w: str) -> set[int]:
    """Values a word may stand for: itself, its start (stems), or the sum of its hyphenated parts
    ("twenty-one" 21)."""
    if w in _WHOLE:
        return {_WHOLE[w]}
    m = _STEM.match(w)
    found = {_STEM_VALUE[m.group(0)]} if m else set()
    parts = w.split("-")
    if len(parts) > 1 and all(p in _WHOLE for p in parts):
        found.add(sum(_WHOLE[p] for p in parts))
    return found


def _cjk_value(s: str) -> int:
    """The value of a run of Chinese numerals ("三" 3, "十五" 15, "二十" 20, "两千" 2000, "一九九九" 1999)."""
    if not any(c in _CJK_UNITS for c in s):
        return int("".join(str(_CJK_DIGITS[c]) for c in s))
    total, digit = 0, 0
    for c in s:
        if c in _CJK_DIGITS:
            digit = _CJK_DIGITS[c]
        else:
            total += (digit or 1) * _CJK_UNITS[c]
            digit = 0
    return total + digit


def numbers_agree(src: str, tgt: str) -> bool:
    """Whether each number written in digits on one side is on the other, in digits or in words."""
    a, b = digit_numbers(src), digit_numbers(tgt)
    if a == b:
        return True
    only_a, only_b = a - b, b - a
    return (not only_a or set(only_a) <= word_numbers(tgt)) and (not only_b or set(only_b) <= word_numbers(src))
