"""How a written English word is spoken, for a forced aligner that hears letters only.

A CTC aligner's vocabulary holds letters (wav2vec2 English: A-Z and the apostrophe), so a word written with
digits or symbols ("$3.50", "7:45", "555-0123", "100%", "&") has no token to place and would get no time.
`spoken_form` gives the words such a token is read as ("three dollars fifty cents"), which the aligner's
transcript spells instead; the times stay with the caller's original word. Only English readings are known;
a word of another script keeps its own letters.

Why not num2words: the project's environment does not ship it, and the aligner needs only English cardinals,
ordinals, years, times, money, percentages and digit strings, which fit in this file.
"""

from __future__ import annotations

import re

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
         "seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (1000, "thousand"))
_ORDINAL_ENDS = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth", "nine": "ninth",
                 "twelve": "twelfth"}
_DIGITS = ("oh", *_ONES[1:10])
"""Digits read one by one, as in phone numbers ("oh" for zero)."""
SYMBOLS = {"&": "and", "%": "percent", "#": "number", "@": "at", "+": "plus", "=": "equals", "°": "degrees"}
"""Symbols read aloud, as words of their own or inside one."""
_CURRENCIES = {"$": ("dollar", "cent"), "€": ("euro", "cent"), "£": ("pound", "penny"), "¥": ("yen", "")}

_NUMBER = r"\d{1,3}(?:,\d{3})+|\d+"
_MONEY = re.compile(rf"([$€£¥])({_NUMBER})(?:\.(\d{{1,2}}))?")
_PERCENT = re.compile(rf"({_NUMBER}(?:\.\d+)?)%")
_TIME = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?")
_ORDINAL = re.compile(r"(\d+)(st|nd|rd|th)", re.IGNORECASE)
_DIGIT_GROUPS = re.compile(r"\d+(?:[-.]\d+){1,}")
_DECIMAL = re.compile(rf"({_NUMBER})\.(\d+)")
_YEAR = re.compile(r"1[1-9]\d\d|20\d\d")
_PIECES = re.compile(rf"{_NUMBER}|[^\W\d_]+(?:'[^\W\d_]+)*|[{re.escape(''.join(SYMBOLS))}]")


def cardinal(number: int) -> str:
    """`number` in words: 1234 -> "one thousand two hundred thirty four"."""
    if number < 20:
        return _ONES[number]
    if number < 100:
        tens, ones = divmod(number, 10)
        return _TENS[tens] + (f" {_ONES[ones]}" if ones else "")
    if number < 1000:
        hundreds, rest = divmod(number, 100)
        return f"{_ONES[hundreds]} hundred" + (f" {cardinal(rest)}" if rest else "")
    for scale, name in _SCALES:
        if number >= scale:
            high, rest = divmod(number, scale)
            return f"{cardinal(high)} {name}" + (f" {cardinal(rest)}" if rest else "")
    raise AssertionError("unreachable")


def ordinal(number: int) -> str:
    """`number` as an ordinal: 21 -> "twenty first"."""
    words = cardinal(number).split()
    last = words[-1]
    if last in _ORDINAL_ENDS:
        words[-1] = _ORDINAL_ENDS[last]
    elif last.endswith("y"):
        words[-1] = last[:-1] + "ieth"
    else:
        words[-1] = last + "th"
    return " ".join(words)


def year(number: int) -> str:
    """A year as it is said: 1999 -> "nineteen ninety nine", 2024 -> "twenty twenty four", 2005 -> "two thousand five"."""
    high, low = divmod(number, 100)
    if number % 1000 < 10 or (2000 <= number < 2010):
        return cardinal(number)
    return f"{cardinal(high)} " + (f"oh {_ONES[low]}" if low < 10 else cardinal(low)) if low else f"{cardinal(high)} hundred"


def digits(text: str) -> str:
    """Each digit of `text` alone: "0123" -> "oh one two three"."""
    return " ".join(_DIGITS[int(c)] for c in text if c.isdigit())


def _number(text: str) -> str:
    return cardinal(int(text.replace(",", "")))


def spoken_form(word: str) -> str:
    """The words `word` is read as, when it holds digits or symbols read aloud; else `word` itself."""
    if not any(c.isdigit() or c in SYMBOLS or c in _CURRENCIES for c in word):
        return word
    if match := _MONEY.fullmatch(word):
        unit, sub_unit = _CURRENCIES[match[1]]
        whole = int(match[2].replace(",", ""))
        said = f"{cardinal(whole)} {unit}{'' if whole == 1 or unit == 'yen' else 's'}"
        cents = int(match[3].ljust(2, "0")) if match[3] else 0
        if cents and sub_unit:
            said += f" {cardinal(cents)} {sub_unit if cents == 1 else ('pence' if sub_unit == 'penny' else sub_unit + 's')}"
        return said
    if match := _PERCENT.fullmatch(word):
        return f"{spoken_form(match[1])} percent"
    if match := _TIME.fullmatch(word):
        hours, minutes = int(match[1]), int(match[2])
        said = cardinal(hours) + ("" if minutes == 0 else f" oh {_ONES[minutes]}" if minutes < 10 else f" {cardinal(minutes)}")
        return said + (f" and {cardinal(int(match[3]))} seconds" if match[3] and int(match[3]) else "")
    if match := _ORDINAL.fullmatch(word):
        return ordinal(int(match[1]))
    if _YEAR.fullmatch(word):
        return year(int(word))
    if match := _DECIMAL.fullmatch(word):
        return f"{_number(match[1])} point {digits(match[2])}"
    if _DIGIT_GROUPS.fullmatch(word):  # phone numbers, scores, codes: 555-0123, 2-1, 1.2.3
        return " ".join(digits(group) if len(group) > 2 else cardinal(int(group)) for group in re.split(r"[-.]", word))
    pieces = []
    for piece in _PIECES.findall(word):
        if piece in SYMBOLS:
            pieces.append(SYMBOLS[piece])
        elif piece[0].isdigit():
            pieces.append(_number(piece))
        else:
            pieces.append(piece)
    return " ".join(pieces)
