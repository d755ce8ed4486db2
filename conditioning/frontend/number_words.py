"""Number words: ``cardinal(1234)``, ``ordinal(21)``, ``year(1999)``, ``digits("007")``.

American English without "and" (123 -> "one hundred twenty-three").
"""

from __future__ import annotations

__all__ = ["MAX_CARDINAL", "ONES", "cardinal", "ordinal", "year", "year_plural", "digits"]

MAX_CARDINAL = 10**15 - 1
"""Largest integer read as a cardinal ("nine hundred ninety-nine trillion ..."); larger
integers are read digit by digit, which is how people read such strings anyway."""

# --------------------------------------------------------------------------- numbers

ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (10**3, "thousand"))
_ORDINAL_IRREGULAR = {
    "one": "first", "two": "second", "three": "third", "five": "fifth",
    "eight": "eighth", "nine": "ninth", "twelve": "twelfth",
}


def cardinal(n: int) -> str:
    """Read an integer: ``1234567`` -> "one million two hundred thirty-four thousand ...".

    Negative numbers get "minus"; beyond ``MAX_CARDINAL`` the digits are read one by one.
    """
    if n < 0:
        return "minus " + cardinal(-n)
    if n > MAX_CARDINAL:
        return digits(str(n))
    if n < 20:
        return ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + ("-" + ONES[ones] if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return ONES[hundreds] + " hundred" + (" " + cardinal(rest) if rest else "")
    for value, name in _SCALES:
        if n >= value:
            high, rest = divmod(n, value)
            return cardinal(high) + " " + name + (" " + cardinal(rest) if rest else "")
    raise AssertionError(n)  # unreachable: every n >= 1000 meets a scale


def _last_word(words: str) -> tuple[str, str]:
    """Split "twenty-one" into ("twenty-", "one") and "one hundred" into ("one ", "hundred")."""
    cut = max(words.rfind(" "), words.rfind("-")) + 1
    return words[:cut], words[cut:]


def ordinal(n: int) -> str:
    """Read an integer as an ordinal: ``21`` -> "twenty-first", ``100`` -> "one hundredth"."""
    head, last = _last_word(cardinal(n))
    if last in _ORDINAL_IRREGULAR:
        return head + _ORDINAL_IRREGULAR[last]
    if last.endswith("y"):
        return head + last[:-1] + "ieth"
    return head + last + "th"


def _plural(words: str) -> str:
    """Plural of a number phrase: "nineteen ninety" -> "nineteen nineties"."""
    head, last = _last_word(words)
    if last.endswith("y"):
        return head + last[:-1] + "ies"
    if last == "six":
        return head + "sixes"
    return head + last + "s"


def digits(s: str) -> str:
    """Read ASCII digits one by one: ``"007"`` -> "zero zero seven"."""
    return " ".join(ONES[ord(c) - 48] for c in s)


def year(n: int, *, paired_from: int = 1100) -> str:
    """Read a year: 1999 -> "nineteen ninety-nine", 2005 -> "two thousand five",
    1905 -> "nineteen oh five", 1900 -> "nineteen hundred", 2021 -> "twenty twenty-one".

    Only ``paired_from``..9999 use the paired reading (1100: "1066" alone may be a count; "in 1066"
    passes 1000); other values are plain cardinals.
    """
    if n < paired_from or n > 9999 or 2000 <= n <= 2009 or n % 1000 == 0:
        return cardinal(n)
    high, low = divmod(n, 100)
    if low == 0:
        return cardinal(high) + " hundred"
    if low < 10:
        return cardinal(high) + " oh " + ONES[low]
    return cardinal(high) + " " + cardinal(low)


def year_plural(n: int) -> str:
    """Decades and centuries: 1990 -> "nineteen nineties", 1800 -> "eighteen hundreds"."""
    return _plural(year(n) if n >= 1000 else cardinal(n))

