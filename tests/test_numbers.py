"""Numbers in digits and in words for the digits rule."""

from collections import Counter

import pytest

from bitextmine.config import RuleConfig
from bitextmine.filtering.numbers import digit_numbers, numbers_agree, word_numbers
from bitextmine.filtering.rules import check_pair


@pytest.mark.parametrize("text, want", [
    ("Page 12 of 30", {"12": 1, "30": 1}),
    ("$2,000 and 1.000.000", {"2000": 1, "1000000": 1}),
    ("4.3 % or 4,3 %", {"43": 2}),
    ("1 200 units, 1\u202f200 units", {"1200": 2}),
    ("2 3", {"2": 1, "3": 1}),  # a plain space before fewer than three digits: two numbers
    ("٣ and ３", {"3": 2}),  # Arabic-Indic and full-width digits
    ("%1$s of %2$d", {}),  # positional placeholders hold no number
    ("10:30", {"1030": 1}),
    ("007 and 0 and 000", {"7": 1, "0": 2}),  # leading zeros dropped
    ("1" * 5000, {"1" * 5000: 1}),  # longer than int() converts
    ("0.5 mg, not 5 mg or 0.05 mg", {"5<1": 2, "5": 1}),  # a fraction of one is not the whole number
    ("is .08 %, %.1f, %2$.1f, 0.0, 0:30, Nr.5", {"8<1": 1, "1": 2, "0": 1, "30": 1, "5": 1}),
    (",5 as 0,5 and 0'05", {"5<1": 3}),  # a comma starting the text, the decimal comma and apostrophe
    ("In 2019 100 people", {"2019": 1, "100": 1}),  # a first group of four digits: no thousands grouping
    ("٣٫٥ ٪ and ١٬٢٠٠", {"35": 1, "1200": 1}),  # the Arabic decimal and thousands separators
])
def test_digit_numbers(text, want):
    assert digit_numbers(text) == Counter(want)


def _slow_digit_numbers(text):
    """The obvious reference: int() of each run (fine below 4,300 digits)."""
    import re

    text = re.sub(r"%\d+\$", "%", text)
    out = Counter()
    for m in re.finditer(r"(?:\d{1,3}(?:[\u00a0\u202f ]\d{3}(?!\d))+|\d+)(?:[.,'’:\u066b\u066c]\d+)*", text):
        first, rest = re.match(r"(\d+)(.*)", m.group(0), re.S).groups()
        digits = [int(c) for c in re.findall(r"\d", m.group(0))]
        fraction = int(first) == 0 and rest[:1] in (".", ",", "'", "’", "\u066b") and any(digits)
        before = text[max(0, m.start() - 2):m.start()]
        lone = before in (".", ",") or len(before) == 2 and before[1] == "." and before[0] in " \t("
        out[str(int("".join(map(str, digits)))) + ("<1" if (fraction or lone and any(digits)) else "")] += 1
    return out


@pytest.mark.parametrize("seed", range(5))
def test_digit_numbers_equal_int_conversion_on_random_text(seed):
    import random

    rng = random.Random(seed)
    pieces = ["0", "00", "7", "٣", "３", "12", "1,200", "4.3", " ", "a", "%1$s", "1 200", "000123", "\u202f", "0.5",
              "٣٫٥", "2019 100", "\u066c", ".", "(", ",", "0'5", "%2$.1f"]
    for _ in range(200):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert digit_numbers(text) == _slow_digit_numbers(text), text


@pytest.mark.parametrize("text, lang, value", [
    ("We have thirty employees.", "en", 30), ("Tenemos treinta.", "es", 30), ("als dreißigjährige", "de", 30),
    ("Трёхмерные эффекты", "ru", 3), ("twenty-one", "en", 21), ("dix-sept ans", "fr", 17), ("二十五只猫", "zh", 25),
    ("两千", "zh", 2000), ("一九九九年", "zh", 1999), ("Ein Titel", "de", 1), ("on iki ay", "tr", 12),
    ("ثلاثة أيام", "ar", 3), ("tři dny", "cs", 3), ("zweimal", "de", 2), ("die vierte Woche", "de", 4),
    ("ein Viertel", "de", 4), ("die zwanzigste", "de", 20), ("пятилетний план", "ru", 5), ("тысячи", "ru", 1000),
    ("三十万居民", "zh", 300_000), ("一百万", "zh", 1_000_000), ("一万五千", "zh", 15_000), ("一千零五", "zh", 1005),
    ("однокомнатная", "ru", 1), ("ein Zehner", "de", 10), ("eine Zweierpotenz", "de", 2),
])
def test_word_numbers(text, lang, value):
    assert value in word_numbers(text, lang)


@pytest.mark.parametrize("text, lang", [
    ("Achtung!", "de"), ("Er achtet darauf.", "de"), ("ohne Zweifel", "de"), ("der Zweig", "de"),
    ("die dreiste Lüge", "de"), ("Achterbahn", "de"), ("однако", "ru"), ("одновременно", "ru"),
    ("семинар", "ru"), ("depends on the weather", "en"), ("I am in the bin.", "en"), ("once upon a time", "en"),
    ("an elf", "en"), ("per cent", "en"), ("Thirty", None), ("二十", "en"), ("thirty", "pt"),
])
def test_words_that_are_no_numbers_here(text, lang):
    assert word_numbers(text, lang) == set()  # other words, other languages' words, or no language


@pytest.mark.parametrize("src, tgt, agree", [
    ("His debts amount to $2,000.", "Seine Schulden belaufen sich auf 2000 Dollar.", True),
    ("A boy of seventeen.", "Un adolescent de 17 ans.", True),
    ("in the past three months", "过去3个月", True),
    ("3D Effects", "Трёхмерные эффекты", True),
    ("function %d for (%s,%s)", "函数 (%2$s,%3$s) 编号 %1$d", True),
    ("Page 12 of 30", "Seite 13 von 30", False),
    ("Room 1.", "Zimmer 2.", False),
    ("In 432 cases", "V 423 případech", False),
    ("We have 30 employees.", "Tenemos trece empleados.", False),  # 13 in words is not 30
    ("Take 2 pills.", "Nimm Tabletten.", False),  # a number with no counterpart
    ("Take 0.5 mg daily.", "Nehmen Sie 5 mg täglich.", False),  # ten times the dose
    ("Take 0.5 mg daily.", "Nehmen Sie 0,5 mg täglich.", True),
    ("Growth of 3.5% in 2020.", "نمو بنسبة ٣٫٥٪ في عام ٢٠٢٠.", True),  # the Arabic decimal separator
    ("1,200 people.", "١٬٢٠٠ شخص.", True),  # and the thousands one
    ("The city has 300000 residents.", "该市有三十万居民。", True),  # 万 multiplies all before it
    ("In 2019 100 people came.", "2019 kamen 100 Menschen.", True),  # two numbers, not 2019100
])
def test_numbers_agree(src, tgt, agree):
    assert numbers_agree(src, tgt) is agree
    assert numbers_agree(tgt, src) is agree
    assert (check_pair(src, tgt, RuleConfig(min_words=0)) == "digits") is (not agree)


@pytest.mark.parametrize("src, tgt, langs", [
    ("um 10 Uhr", "depends on the weather", ("de", "en")),  # "on" is 10 in Turkish only
    ("um 10 Uhr", "depends on the weather", (None, None)),  # English detected
    ("I walked 1000 metres.", "Ich bin müde.", ("en", "de")),  # "bin" is 1000 in Turkish only
    ("Er war damals 11.", "He was once there.", ("de", "en")),  # "once" is 11 in Spanish only
    ("Es sind 11 Spieler.", "The elf is playing.", ("de", "en")),  # "elf" is 11 in German only
    ("Es kostet 100 Euro.", "It costs a cent.", ("de", "en")),  # "cent" is 100 in French only
    ("Gate 8 is closed.", "Achtung, das Tor ist zu.", ("en", "de")),  # "Achtung" is no 8
    ("Room 1 is free.", "Однако комната свободна.", ("en", "ru")),  # "однако" is no 1
    ("Take 2 pills.", "Nimm zwei Tabletten.", ("en", "xx")),  # a language without number words
])
def test_only_the_sides_own_number_words_count(src, tgt, langs):
    assert check_pair(src, tgt, RuleConfig(min_words=0, script=False, langid="off"), *langs) == "digits"
    assert not numbers_agree(src, tgt, *langs)


def test_long_digit_runs_are_compared_not_converted():
    a, b = "1" * 4400, "1" * 4399 + "2"  # int() refuses runs over 4,300 digits; --max-chars is 5,000
    r = RuleConfig(min_words=0)
    assert check_pair(f"Code {a}", f"Kode {a}", r) is None
    assert check_pair(f"Code {a}", f"Kode {b}", r) == "digits"
    assert check_pair(f"Code 00{a}", f"Kode {a}", r) is None
    assert check_pair(f"Code {a}", "Kode eins", RuleConfig(min_words=0, max_ratio=0), "en", "de") == "digits"
    assert check_pair("x " + "9" * 20000, "y " + "9" * 20000, RuleConfig(min_words=0, max_chars=0)) is None


def test_thin_spaces_group_digits_and_any_scripts_zero_starts_a_fraction():
    assert digit_numbers("1\u2009200 km") == digit_numbers("1,200 km") == Counter({"1200": 1})
    for zero_point_five in ("०.५", "٠٫٥", "০.৫", "０.５"):  # Devanagari, Arabic-Indic, Bengali, full-width
        assert digit_numbers(zero_point_five) == digit_numbers("0.5") == Counter({"5<1": 1})


def both_ways(src: str, tgt: str, langs: tuple) -> tuple[bool, bool]:
    """numbers_agree of the pair and of the pair with its sides swapped."""
    return numbers_agree(src, tgt, *langs), numbers_agree(tgt, src, *langs[::-1])


@pytest.mark.parametrize("src, tgt, langs, agree", [
    ("Llegué a las dos y media.", "I arrived at 2:30.", ("es", "en"), True),  # a half hour in a word
    ("Llegué a las dos.", "I arrived at 2:30.", ("es", "en"), False),  # the half is missing
    ("Nos esperan a las 14:30h.", "They expect us at 2:30.", ("es", "en"), True),  # 24- and 12-hour clocks
    ("Despiértame a las cuatro de la mañana.", "Wake me up at 4:00 a.m.", ("es", "en"), True),  # o'clock
    ("Wir treffen uns um halb drei.", "We meet at 2:30.", ("de", "en"), True),  # half to the next hour
    ("Wir treffen uns um 14.30 Uhr.", "We meet at 2:30 p.m.", ("de", "en"), True),
    ("Le train part à 14h30.", "The train leaves at 2:30 pm.", ("fr", "en"), True),
    ("Le train part à 15h30.", "The train leaves at 2:30 pm.", ("fr", "en"), False),  # another hour
    ("Es ist Viertel vor drei.", "It is 2:45.", ("de", "en"), True),
    ("我两点半到。", "I arrive at 2:30.", ("zh", "en"), True),
    ("最佳就寝时间是22时至23时，起床时间是5时30分。", "The best time to sleep is 22:00-23:00, to rise 5:30.", ("zh", "en"), True),
    ("最佳就寝时间是22时至23时，起床时间是5时40分。", "The best time to sleep is 22:00-23:00, to rise 5:30.", ("zh", "en"), False),
    ("Der Preis ist 14.30 Euro.", "The price is 2.30 euros.", ("de", "en"), False),  # a price, not a time
    ("It costs 5 dollars at 2:30.", "Cuesta 6 dólares a las dos y media.", ("en", "es"), False),  # 5 is not 6
])
def test_clock_times_agree_in_either_clock_and_in_words(src, tgt, langs, agree):
    assert both_ways(src, tgt, langs) == (agree, agree)


@pytest.mark.parametrize("src, tgt, langs, agree", [
    ("The United States said in May it had received reports.", "美国表示，今年 5 月份，美国收到大量报告。", ("en", "zh"), True),
    ("The pictures were released on August 12.", "8月12日发布了一组图集。", ("en", "zh"), True),
    ("The pictures were released on August 12.", "9月12日发布了一组图集。", ("en", "zh"), False),  # September
    ("Выпуск вышел в мае 2020 года.", "The issue came out in 5/2020.", ("ru", "en"), True),
    ("Выпуск вышел в июне 2020 года.", "The issue came out in 5/2020.", ("ru", "en"), False),
    ("Am 5. März.", "On the 5th of 3.", ("de", "en"), True),
])
def test_month_names_are_the_months_numbers(src, tgt, langs, agree):
    assert both_ways(src, tgt, langs) == (agree, agree)


@pytest.mark.parametrize("src, tgt, langs, agree", [
    ("Wuhan offers up to 20 million yuan in subsidies.", "武汉最高给予2000万元补助。", ("en", "zh"), True),
    ("Wuhan offers up to 30 million yuan in subsidies.", "武汉最高给予2000万元补助。", ("en", "zh"), False),
    ("One million people lost their lives in the war.", "100万人在战争中失去了生命。", ("en", "zh"), True),
    ("Sales reached RMB168.2 billion.", "销售额达到1682亿元。", ("en", "zh"), True),  # a decimal point
    ("It grew to over $1 billion.", "市值增长到超过 10 亿美元。", ("en", "zh"), True),
    ("The population is 1,000,000.", "人口为100万。", ("en", "zh"), True),  # the value in digits
    ("The distance is 3 km.", "距离是3千米。", ("en", "zh"), True),  # 千米 is a kilometre, no 3,000
    ("Es kostet 2 Milliarden Euro.", "It costs 2 billion euros.", ("de", "en"), True),
])
def test_numbers_a_scale_word_multiplies_agree_by_their_value(src, tgt, langs, agree):
    assert both_ways(src, tgt, langs) == (agree, agree)


@pytest.mark.parametrize("src, tgt", [
    ("Součet z pěti a třech je osm.", "The sum of 5 and 3 is 8."),  # Czech numbers in their cases
    ("Bydlí se dvěma kočkami.", "She lives with 2 cats."),
    ("Ve čtyřech městech.", "In 4 cities."),
])
def test_czech_number_words_in_their_cases(src, tgt):
    assert both_ways(src, tgt, ("cs", "en")) == (True, True)
    assert not numbers_agree(src, tgt.replace("5", "6").replace("2", "7").replace("4", "9"), "cs", "en")


@pytest.mark.parametrize("src, tgt, agree", [
    ("12th", "الثّاني عشر", True),  # a short vowel mark, the article, a teen
    ("15th", "الخامس عشر", True),
    ("16th", "الخامس عشر", False),
    ("3D View", "منظور ثلاثيّ الأبعاد", True),  # three-dimensional
    ("4th List Level", "مستوى القائمة الرابع", True),
    ("2 Dots 1 Dash", "نقطتان شَرْطة واحدة", True),  # a dual is two
    ("3 Dots 1 Dash", "نقطتان شَرْطة واحدة", False),
])
def test_arabic_number_words_with_marks_prefixes_teens_and_duals(src, tgt, agree):
    assert both_ways(src, tgt, ("en", "ar")) == (agree, agree)


@pytest.mark.parametrize("src, tgt, langs, agree", [
    ("What date is a month before 2001-03-31?", "Welches Datum ist ein Monat vor dem 31.03.2001?", ("en", "de"), True),
    ("What date is a month before 2001-03-31?", "Welches Datum ist ein Monat vor dem 30.03.2001?", ("en", "de"), False),
    ("It was bought on 2001-01-25 and matures on 2001-11-15.", "Acquis le 25/1/2001, échu le 15/11/2001.", ("en", "fr"),
     True),
    ("It happened on 2001-03-31.", "Es geschah am 31. März 2001.", ("en", "de"), True),  # the month by its name
    ("It happened on 2001-03-31.", "Es geschah am 31. April 2001.", ("en", "de"), False),
    ("I wanted to do that before 2:30.", "Je voulais faire ça avant 14 h 30.", ("en", "fr"), True),
    ("Version 1.2.3 is out.", "Version 1.2.4 ist da.", ("en", "de"), False),  # no date
])
def test_dates_agree_in_any_order_of_their_parts(src, tgt, langs, agree):
    assert both_ways(src, tgt, langs) == (agree, agree)
