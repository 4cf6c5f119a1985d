"""Numbers in digits and in words for the digits rule."""

from collections import Counter

import pytest

from bitextmine.config import RuleConfig
from bitextmine.filtering.numbers import digit_numbers, numbers_agree, word_numbers
from bitextmine.filtering.rules import check_pair


@pytest.mark.parametrize("text, want", [
    ("Page 12 of 30", {12: 1, 30: 1}),
    ("$2,000 and 1.000.000", {2000: 1, 1000000: 1}),
    ("4.3 % or 4,3 %", {43: 2}),
    ("1 200 units, 1\u202f200 units", {1200: 2}),
    ("2 3", {2: 1, 3: 1}),  # a plain space before fewer than three digits: two numbers
    ("٣ and ３", {3: 2}),  # Arabic-Indic and full-width digits
    ("%1$s of %2$d", {}),  # positional placeholders hold no number
    ("10:30", {1030: 1}),
])
def test_digit_numbers(text, want):
    assert digit_numbers(text) == Counter(want)


@pytest.mark.parametrize("text, value", [
    ("We have thirty employees.", 30), ("Tenemos treinta.", 30), ("als dreißigjährige", 30),
    ("Трёхмерные эффекты", 3), ("twenty-one", 21), ("dix-sept ans", 17), ("二十五只猫", 25), ("两千", 2000),
    ("一九九九年", 1999), ("Ein Titel", 1), ("on iki ay", 12), ("ثلاثة أيام", 3), ("tři dny", 3),
])
def test_word_numbers(text, value):
    assert value in word_numbers(text)


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
])
def test_numbers_agree(src, tgt, agree):
    assert numbers_agree(src, tgt) is agree
    assert numbers_agree(tgt, src) is agree
    assert (check_pair(src, tgt, RuleConfig(min_words=0)) == "digits") is (not agree)
