"""Reading a token that holds digits: money, percentages, times, dates, ranges, fractions, units,
phone numbers, sizes ("1920x1080") and powers. :func:`read_numeric` is the entry point."""

from __future__ import annotations

import re

from .characters import read_digit_run, read_plain
from .number_words import ONES, cardinal, digits, ordinal, year, year_plural
from .token_context import Context
from .token_tables import (
    ABOUT_WORDS, AMPM, ATTACHED_UNITS, BARE_DATE_ABBREV, COMMON_DENOMINATORS, CURRENCIES, DIGIT_BY_DIGIT,
    MONTH_ABBREV, MONTH_NAMES, MONTHS, PER_WORDS, RE_BY, RE_CUR_POST, RE_CUR_PRE, RE_DASH_DATE, RE_DECADE,
    RE_DOTTED_DATE, RE_EURO_NUMBER, RE_FRACTION, RE_IP, RE_ISO_DATE, RE_NUM_ATTACHED, RE_NUM_PLUS,
    RE_NUM_SCALE, RE_NUM_UNIT, RE_NUMBER, RE_ORDINAL, RE_PER, RE_PERCENT, RE_PHONE, RE_PHONE_PAREN,
    RE_POSSESSIVE, RE_POWER, RE_PREFIXED_YEAR, RE_RANGE, RE_RESOLUTION, RE_SHORT_YEAR, RE_SLASH_DATE,
    RE_TIME, RE_TIME_AMPM, RE_TIMES, RE_YMD_SLASH, ROMAN_RE, SCALE_SUFFIX, SCALE_WORDS, UNITS, US_STATES,
    YEAR_AFTER,
)

__all__ = ["read_numeric", "plain_number_value", "is_article", "day_number_follows"]

# --------------------------------------------------------------------------- number helpers

def _number_words(num: str, *, as_year: bool = True) -> str:
    """Read a number as written (``"1,234.5"``, ``".5"``, ``"007"``, ``"1999"``)."""
    whole, _, frac = num.partition(".")
    if frac or num.startswith("."):
        head = read_digit_run(whole.replace(",", "")) if whole else ""
        return (head + " point " if head else "point ") + digits(frac)
    if "," in whole:
        return cardinal(int(whole.replace(",", "")))
    if as_year and len(whole) == 4 and 1100 <= int(whole) <= 2099:
        return year(int(whole))
    return read_digit_run(whole)


def _number_value(num: str) -> float:
    return float(num.replace(",", "") or 0)


def _signed(sign: str, words: str) -> str:
    return {"-": "minus ", "+": "plus "}.get(sign, "") + words


def _from_european(s: str, following: str | None = None, *, lenient: bool = False) -> str | None:
    """The token in English number format when it is written in a European one ("1,5 kg" ->
    "1.5", "€1.234,56" -> "€1234.56", "1.234.567 €" -> "1234567"), else None. Only with evidence
    that it is European: a currency sign or unit with it or as the ``following`` token, or dots
    grouping thousands before a decimal comma ("Pick 1,2 or 3" is a list, "192.168.100.200" an
    address). ``lenient``: a decimal comma alone is enough (the number before a unit token)."""
    m = RE_EURO_NUMBER.fullmatch(s)
    if m is None or not (m["head"] == "" or m["head"] in "+-" or m["head"].lstrip("+-") in CURRENCIES):
        return None
    grouped = "." in m["int"]
    if m["frac"] is None and not (grouped and m["int"].count(".") >= 2):
        return None  # "1.234" is an English decimal; "1,500" never reaches here (no comma match)
    if m["tail"] and not (m["tail"].lstrip() in CURRENCIES or m["tail"] in UNITS or m["tail"] == "%"):
        return None
    measured = m["head"].lstrip("+-") in CURRENCIES or bool(m["tail"]) or (
        following is not None and (following in CURRENCIES or following in UNITS or following == "%"))
    if not (measured or lenient or (grouped and m["frac"] is not None)):
        return None
    number = m["int"].replace(".", "") + ("." + m["frac"] if m["frac"] is not None else "")
    return m["head"] + number + m["tail"]


def plain_number_value(s: str | None) -> float | None:
    """Value of a token that is just a number ("1", "-2.5", "1,000", "1,5"), else None."""
    if s is None:
        return None
    s = _from_european(s, lenient=True) or s
    last_end = s.rpartition("-")[2].rpartition("\u2013")[2]  # a range's upper end: "5-10 kg" is 10 of them
    m = RE_NUMBER.fullmatch(s) or RE_NUMBER.fullmatch(last_end)
    if m is None or not s[:1].isdigit() and s[:1] not in "-+.":
        return None
    value = _number_value(m["num"])
    return -value if m["sign"] == "-" else value


def _money(cur: str, num: str, scale: str | None) -> str:
    """"$", "12.50" -> "twelve dollars and fifty cents"; "£", "1", "m" -> "one million pounds"."""
    one, many, minor_one, minor_many = CURRENCIES[cur]
    if scale:
        return _number_words(num, as_year=False) + " " + SCALE_SUFFIX[scale] + " " + many
    whole, _, frac = num.partition(".")
    whole_value = int(whole.replace(",", "") or "0")
    if frac and (len(frac) != 2 or minor_one is None):
        return _number_words(num, as_year=False) + " " + many
    major = cardinal(whole_value) + " " + (one if whole_value == 1 else many)
    cents = int(frac) if frac else 0
    if not cents:
        return major
    minor = cardinal(cents) + " " + (minor_one if cents == 1 else minor_many)
    return minor if whole_value == 0 else major + " and " + minor


def _fraction(a: int, b: int) -> str:
    if b == 2:
        den = "half" if a == 1 else "halves"
    elif b == 4:
        den = "quarter" if a == 1 else "quarters"
    else:
        den = ordinal(b) + ("s" if a != 1 else "")
    return cardinal(a) + " " + den


def _time(h: int, m: int, s: int | None, *, with_ampm: bool) -> str:
    if m == 0 and s is None:
        if with_ampm:
            return cardinal(h)
        return cardinal(h) + (" o'clock" if 1 <= h <= 12 else " hundred")
    words = cardinal(h) + " " + ("oh " + ONES[m] if m < 10 else cardinal(m))
    if m == 0:
        words = cardinal(h) + " hundred"
    if s is not None:
        words += " and " + cardinal(s) + (" second" if s == 1 else " seconds")
    return words


def _date(month: int, day: int, year_text: str) -> str:
    y = int(year_text)
    if len(year_text) == 2:
        year_words = ("oh " + ONES[y]) if y < 10 else cardinal(y)
    else:
        year_words = year(y)
    return f"{MONTHS[month - 1]} {ordinal(day)}, {year_words}"


def is_article(word: str | None) -> bool:
    """"a"/"an" before a quantity makes it a modifier, said with the unit singular: "a 5 km walk"
    ("a" cannot go with the plural "five kilometers")."""
    return word is not None and word.lower() in ("a", "an")


def _counts_things(word: str | None) -> bool:
    """Whether ``word`` after "5M" makes it a count ("5M users", "2M people"), not a name ("3M")."""
    return word is not None and word.islower() and (word.endswith("s") and not word.endswith("ss")
                                                   or word in ("people", "of", "more", "new"))


def _in_pairs(n: int) -> str:
    """A number of 3-4 digits read in pairs, as resolutions and model numbers are said: 1080 "ten
    eighty", 720 "seven twenty", 1905 "nineteen oh five"; whole hundreds as cardinals."""
    if n < 100 or n % 100 == 0:
        return cardinal(n)
    h, r = divmod(n, 100)
    return cardinal(h) + " " + ("oh " + ONES[r] if r < 10 else cardinal(r))


def _is_year_range(a: str, b: str) -> bool:
    """"1990-1995", not "555-1234"."""
    return (len(a) == len(b) == 4 and a.isdigit() and b.isdigit()
            and 1100 <= int(a) < int(b) <= 2099)


def read_numeric(s: str, ctx: Context) -> str | None:
    """Spoken form of a token holding digits, or None when no number pattern fits."""
    if (english := _from_european(s, ctx.next)) is not None:
        return read_numeric(english, ctx)
    if s[:1] == "~" and s[1:2].isdigit() and (amount := read_numeric(s[1:], ctx)) is not None:
        if ctx.prev is not None and ctx.prev.lower().rstrip(".") in ABOUT_WORDS:
            return amount  # "about ~5": said once
        return "about " + amount  # "~5 people"
    if m := RE_CUR_PRE.fullmatch(s):
        if m["scale"] is None and ctx.next in SCALE_WORDS:
            return _signed(m["sign"], _number_words(m["num"], as_year=False))
        return _signed(m["sign"], _money(m["cur"], m["num"], m["scale"]))
    if m := RE_CUR_POST.fullmatch(s):
        return _signed(m["sign"], _money(m["cur"], m["num"], m["scale"]))
    if m := RE_PERCENT.fullmatch(s):
        return _signed(m["sign"], _number_words(m["num"], as_year=False) + " percent")
    if m := RE_TIME_AMPM.fullmatch(s):
        h, mins = int(m["h"]), int(m["m"] or 0)
        if h <= 12 and mins < 60:
            ampm = "A M" if m["ampm"][0] in "aA" else "P M"
            return _time(h, mins, None, with_ampm=True) + " " + ampm
    if m := RE_TIME.fullmatch(s):
        h, mins, secs = int(m["h"]), int(m["m"]), m["s"]
        if h <= 24 and mins < 60 and (secs is None or int(secs) < 60):
            ampm = ctx.next is not None and re.fullmatch(AMPM, ctx.next) is not None
            return _time(h, mins, None if secs is None else int(secs), with_ampm=ampm)
    if m := RE_ISO_DATE.fullmatch(s) or RE_YMD_SLASH.fullmatch(s) or RE_DOTTED_DATE.fullmatch(s):
        mo, d = int(m["m"]), int(m["d"])
        if 1 <= mo <= 12 and 1 <= d <= 31:
            return _date(mo, d, m["y"])
    if m := RE_SLASH_DATE.fullmatch(s) or RE_DASH_DATE.fullmatch(s):
        a, b = int(m["a"]), int(m["b"])
        if 1 <= a <= 12 and 1 <= b <= 31:
            return _date(a, b, m["y"])
        if 1 <= b <= 12 and 1 <= a <= 31:
            return _date(b, a, m["y"])
    if m := RE_DECADE.fullmatch(s):
        n = int(m["n"])
        if n >= 10 and (len(m["n"]) != 3 or n % 100 == 0):
            return year_plural(n)
    if m := RE_POSSESSIVE.fullmatch(s):
        return _number_words(m["num"]) + "'s"
    if m := RE_ORDINAL.fullmatch(s):
        return ordinal(int(m["n"].replace(",", "")))
    if m := RE_PHONE_PAREN.fullmatch(s):
        return ", ".join(digits(g) for g in (m["a"], m["b"], m["c"]))
    if RE_IP.fullmatch(s):
        return " dot ".join(digits(g) for g in s.split("."))
    if (m := RE_RANGE.fullmatch(s)) and _is_year_range(m["a"], m["b"]):
        return year(int(m["a"])) + " to " + year(int(m["b"]))
    if (m := RE_PHONE.fullmatch(s)) and ("-" in s or s.count(".") >= 2):
        groups = re.findall(r"\d+", s)
        if sum(map(len, groups)) >= 7:
            return ("plus " if m["plus"] else "") + ", ".join(digits(g) for g in groups)
    if m := RE_RANGE.fullmatch(s):
        return _number_words(m["a"]) + " to " + _number_words(m["b"])
    if m := RE_FRACTION.fullmatch(s):
        return _read_slash(m, ctx)
    if m := RE_NUM_UNIT.fullmatch(s):
        value = _number_value(m["num"])
        one, many = UNITS[m["unit"]]
        single = value == 1 and "." not in m["num"] or is_article(ctx.prev)  # "a 5km walk": five kilometer
        return _signed(m["sign"], _number_words(m["num"], as_year=False) + " " + (one if single else many))
    if m := RE_NUMBER.fullmatch(s):
        return _read_number_in_context(m["sign"], m["num"], ctx)
    if m := RE_NUM_PLUS.fullmatch(s):  # "10,000+ users"
        return _number_words(m["num"], as_year=False) + " plus"
    if m := RE_TIMES.fullmatch(s):
        return _number_words(m["num"], as_year=False) + " times"
    if m := RE_BY.fullmatch(s):  # "1920x1080": nineteen twenty by ten eighty; "2x4": two by four
        a, b = int(m["a"]), int(m["b"])
        if m["a"] == "0":  # "0x10": a hex literal, not a size
            return None
        if 100 <= min(a, b) and max(a, b) < 10000 and m["a"][0] != "0" and m["b"][0] != "0":
            return _in_pairs(a) + " by " + _in_pairs(b)
        return _number_words(m["a"], as_year=False) + " by " + _number_words(m["b"], as_year=False)
    if m := RE_POWER.fullmatch(s):
        return _number_words(m["a"], as_year=False) + " to the power of " + _signed(
            "-" if m["b"].startswith("-") else "", _number_words(m["b"].lstrip("-"), as_year=False))
    if m := RE_RESOLUTION.fullmatch(s):
        return _in_pairs(int(m["n"])) + " " + m["s"]
    if (m := RE_PREFIXED_YEAR.fullmatch(s)) and not ROMAN_RE.fullmatch(m["p"]):
        return " ".join(m["p"]) + " " + year(int(m["y"]))
    if (m := RE_NUM_ATTACHED.fullmatch(s)) and m["unit"] in ATTACHED_UNITS:
        one, many = ATTACHED_UNITS[m["unit"]]
        return _number_words(m["num"], as_year=False) + " " + (one if m["num"] == "1" else many)
    if (m := RE_NUM_SCALE.fullmatch(s)) and (m["scale"] != "M" or _counts_things(ctx.next)):
        return _signed(m["sign"], _number_words(m["num"], as_year=False) + " " + SCALE_SUFFIX[m["scale"]])
    if m := RE_SHORT_YEAR.fullmatch(s):  # "in '05", "the '99 season"
        y = int(m["y"])
        return "oh " + ONES[y] if y < 10 else cardinal(y)
    if m := RE_PER.fullmatch(s):  # "$5/month", "100/day"
        amount = read_numeric(m["amount"], Context(prev=ctx.prev))
        if amount is not None:
            per = m["per"]
            return amount + " per " + (UNITS[per][0] if per in UNITS else PER_WORDS.get(per.lower(), per))
    spoken = _read_range(s, ctx)
    parts = s.split("-")
    if spoken is None and len(parts) > 1 and all(parts) and any(RE_ORDINAL.fullmatch(p) for p in parts):
        # "3rd-party", "21st-century", "2nd-hand": each part on its own (not "three ar-dee party")
        return "-".join(read_numeric(p, Context()) or read_plain(p) for p in parts)
    return spoken


def _read_slash(m: re.Match, ctx: Context) -> str:
    """"1/2", "3½" (prepared "3_1/2"), "6/30" (a date), "24/7", "7/3"."""
    a, b = int(m["a"]), int(m["b"])
    proper = 0 < a < b <= 100 and m["a"][0] != "0"
    if m["whole"] is not None:  # a whole number and a vulgar fraction
        return _number_words(m["whole"], as_year=False) + " and " + _fraction(a, b)
    if proper and (m["mark"] or b in COMMON_DENOMINATORS):
        after_whole = ctx.prev is not None and ctx.prev.isdigit()  # "1 1/2 cups"
        return ("and " if after_whole else "") + _fraction(a, b)
    if m.group(0) in ("24/7", "50/50", "9/11"):
        return cardinal(a) + " " + cardinal(b)
    if 1 <= a <= 12 and 1 <= b <= 31:  # month/day, as the dates with a year
        return MONTHS[a - 1] + " " + ordinal(b)
    if proper:
        return _fraction(a, b)
    return _number_words(m["a"], as_year=False) + " slash " + _number_words(m["b"], as_year=False)


def _read_range(s: str, ctx: Context) -> str | None:
    """A range whose ends are not bare numbers: "5-10%", "$5-10", "9am-5pm", "5–10kg"."""
    cut = next((i for i, c in enumerate(s) if c in "-\u2013" and i > 0), None)
    if cut is None:
        return None
    left, right = s[:cut], s[cut + 1:]
    if not left[-1:].isalnum() or not right[:1].isalnum() and right[:1] not in CURRENCIES:
        return None
    a = read_numeric(left, Context(prev=ctx.prev))
    if (cur := RE_CUR_PRE.fullmatch(left)) and RE_NUMBER.fullmatch(right):  # "$5-10": five to ten dollars
        b = read_numeric(cur["cur"] + right, Context(next=ctx.next))
        a = _signed(cur["sign"], _number_words(cur["num"], as_year=False))
    else:
        b = read_numeric(right, Context(next=ctx.next))
    if a is None or b is None:
        return None
    return a + " to " + b


def _read_number_in_context(sign: str, num: str, ctx: Context) -> str:
    prev, nxt = ctx.prev, ctx.next
    if prev is not None and prev in CURRENCIES:  # "$ 5"
        if nxt in SCALE_WORDS:
            return _signed(sign, _number_words(num, as_year=False))
        return _signed(sign, _money(prev, num, None))
    if nxt is not None and nxt in CURRENCIES:
        return _signed(sign, _money(nxt, num, None))  # "12.50 €", "1 €": the symbol after reads nothing
    plain_int = not sign and num.isdigit()
    if plain_int and (num in DIGIT_BY_DIGIT or len(num) == 5 and prev in US_STATES):  # "call 911", "IL 62704"
        return digits(num)
    if plain_int and 1 <= int(num) <= 31 and len(num) <= 2:
        if prev is not None and (prev in MONTH_NAMES.values() or prev.lower() in MONTH_ABBREV
                                 or (BARE_DATE_ABBREV.get(prev) in MONTH_NAMES.values()
                                     and day_number_follows(prev, num))):
            return ordinal(int(num))
        if nxt is not None and nxt in MONTH_NAMES.values():
            the = "" if prev is not None and prev.lower() == "the" else "the "  # "on the 4 July"
            return the + ordinal(int(num)) + " of"
    as_year = not sign and (nxt is None or nxt not in UNITS)
    if (as_year and plain_int and len(num) == 4 and 1000 <= int(num) <= 2999 and prev is not None
            and prev.lower() in YEAR_AFTER):  # "in 1066", "since 1010", "by 2150": years out of 1100-2099 too
        return year(int(num), paired_from=1000)
    return _signed(sign, _number_words(num, as_year=as_year))


# Bare abbreviations that are also names or words ("Jan 2 years ago", "Sat 5 minutes"): read out
# only before an ordinal ("Jan 1st")
_BARE_AMBIGUOUS = frozenset(("Jan", "Sat", "Sun", "Wed"))


def day_number_follows(abbrev: str, nxt: str | None) -> bool:
    if nxt is None:
        return False
    if RE_ORDINAL.fullmatch(nxt):
        return 1 <= int(RE_ORDINAL.fullmatch(nxt)["n"].replace(",", "")) <= 31
    return abbrev not in _BARE_AMBIGUOUS and nxt.isdigit() and 1 <= int(nxt) <= 31 and len(nxt) <= 2


