"""English text normalisation: read one written token the way a person says it.

:func:`read_token` turns the core of one written token (punctuation already peeled off
by :mod:`.sentences`) into its spoken form, using its neighbours for context
("March 3" -> "March third", "Henry VIII" -> "Henry the eighth", "$5 million" ->
"five million dollars"). Everything it returns is made only of letters (any script, with
their combining marks), apostrophes, hyphens, spaces and, inside phone numbers and dates,
commas: never digits or symbols.

Conventions (documented choices):

- Numbers are American English without "and": 123 -> "one hundred twenty-three".
  Integers above ``MAX_CARDINAL`` and digit runs with a leading zero ("007") are read
  digit by digit.
- A bare four-digit number from 1100 to 2099 without a comma is read as a year
  ("1999" -> "nineteen ninety-nine", "2005" -> "two thousand five"); with a comma or a
  currency sign it is a cardinal ("1,999", "$1999").
- Slash dates are US month/day/year ("3/4/2021" -> "March fourth, ..."); when the first
  field cannot be a month but the second can ("25/12/2021") they are read day/month. Dashed
  dates with the year last ("12-01-2026") are read the same; a four-digit year first is
  year/month/day ("2026/01/12", "2026-01-12").
- "3x" is "three times", "1920x1080" "nineteen twenty by ten eighty" (3-4 digit sides in
  pairs, as resolutions are said; "1080p" likewise), "10^6" "ten to the power of six", "~5"
  "about five", "FY2024" "F Y twenty twenty-four"; "24h" and "2in" are units only against
  the number. A bare month or day abbreviation is read out before a day's number or in a range
  ("Dec 25", "Mon-Fri"); "Jan", "Sat", "Sun", "Wed" only before an ordinal ("Jan 1st"; "Jan 2
  years ago" is a name).
- European formats are read as the numbers they mean where the text shows they are European (a
  currency sign or unit with the number, or dots grouping thousands before a decimal comma): a
  decimal comma with one, two or four and more digits after it ("1,5 kg" -> "one point five
  kilograms"; "1,500" stays one thousand five hundred; "Pick 1,2 or 3" stays a list), dots
  grouping thousands ("1.234,56", "1.234.567 €"; "192.168.100.200" stays an address) and
  day.month.year dates ("12.01.2026" -> "January twelfth, ...").
- After a number, "mn", "bn", "tn" are scales, and "M" before a counted noun ("5M users" ->
  "five million users"; "3M" stays); "m" (meters? minutes? million?), "k" and "B" stay letters
  ("a 10K run"). A currency sign after a number reads as money ("12,50 €" -> "twelve euros and
  fifty cents").
- Digit groups joined by hyphens with seven or more digits in all are phone numbers, read
  digit by digit with a comma between groups ("555-1234").
- Spelled letters keep their written case ("U.S." -> "U S", "www" -> "w w w"); "a.m." and
  "p.m." are spelled in capitals ("A M") so that a single "a" is not read as the article.
- An operator alone between two numbers is a word (:mod:`.sentences` reads it): "5 - 3 = 2"
  -> "five minus three equals two", "10 / 2" -> "ten over two"; without an "=" on the line a
  spaced hyphen or dash is a range ("pages 5 - 10" -> "pages five to ten").
- Roman numerals: after "Chapter", "Part", "War", "Apollo", ... a cardinal ("Chapter IV" -> "Chapter
  four"); after another capitalised word an ordinal up to XXXIX ("Henry VIII" -> "Henry the
  eighth"), except a lone "X"; a lone "I" only after a known regnal name, not after a
  sentence's first word and not before "think", "am", "said", ... (the pronoun stays "I").
- Words keep their written case ("Chapter four"); titles and abbreviations are expanded
  in lower case ("doctor Smith", "Main street").
- URLs drop their scheme ("https://") and read separators by name ("dot", "slash").
- Emoji and other pictographs are dropped (never read by name).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .lexicon import Lexicon

__all__ = [
    "MAX_CARDINAL",
    "Context",
    "Reading",
    "cardinal",
    "ordinal",
    "year",
    "digits",
    "prepare",
    "read_plain",
    "read_token",
    "is_plain_word",
    "is_abbreviation",
    "normalize_text",
]

MAX_CARDINAL = 10**15 - 1
"""Largest integer read as a cardinal ("nine hundred ninety-nine trillion ..."); larger
integers are read digit by digit, which is how people read such strings anyway."""

# --------------------------------------------------------------------------- numbers

_ONES = (
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
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + ("-" + _ONES[ones] if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return _ONES[hundreds] + " hundred" + (" " + cardinal(rest) if rest else "")
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
    return " ".join(_ONES[ord(c) - 48] for c in s)


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
        return cardinal(high) + " oh " + _ONES[low]
    return cardinal(high) + " " + cardinal(low)


def _year_plural(n: int) -> str:
    """Decades and centuries: 1990 -> "nineteen nineties", 1800 -> "eighteen hundreds"."""
    return _plural(year(n) if n >= 1000 else cardinal(n))


# --------------------------------------------------------------------------- preparing text

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'", "\u00b4": "'",
                              "\u2212": "-", "\u2010": "-", "\u2011": "-", "\u2044": "/",
                              "\u2215": "/", "\u00b7": "."})


_POWERS = {"\u00b2": " squared ", "\u00b3": " cubed "}
_FRACTION_MARK = "_"  # put before a vulgar fraction's digits by prepare ("3½" -> "3_1/2")


# Cyrillic letters as Latin (a plain romanisation: the English voice then reads "привет" as
# "privet", not letter by letter)
_CYRILLIC = dict(zip("абвгдеёжзийклмнопрстуфхцчшщъыьэюяіїєґўђјљњћџѓќѕ",
                     "a b v g d e yo zh z i y k l m n o p r s t u f kh ts ch sh shch _ y _ e yu ya i yi ye g w "
                     "dj j lj nj c dz gj kj dz".split()))


@functools.lru_cache(maxsize=4096)
def _prepare_char(c: str) -> str:
    """NFKC of one character, digits of any script as ASCII, format characters removed,
    Cyrillic romanised."""
    if c in _POWERS:
        return _POWERS[c]
    low = c.lower()
    if low in _CYRILLIC:
        latin = _CYRILLIC[low].strip("_")  # hard and soft signs: nothing
        return latin.capitalize() if c != low else latin
    cat = unicodedata.category(c)
    if cat == "Nd":
        return str(unicodedata.decimal(c))
    if cat in ("Cf", "Cc", "Cs", "Co", "Cn"):
        return ""
    out = unicodedata.normalize("NFKC", c)
    if cat == "No" and "\u2044" in out:  # "½" -> "_1⁄2": "3½" must not become "31/2"
        return _FRACTION_MARK + out
    if out != c:
        return "".join(_prepare_char(x) if x != c else x for x in out)
    return c


def prepare(raw: str) -> str:
    """Canonical form of a token for reading: NFKC (full-width digits, ligatures), digits
    of any script as ASCII, curly apostrophes as ``'``, the minus sign as ``-``, format and
    control characters and surrogates removed, then NFC so letters and marks compose."""
    if raw.isascii():
        out = raw if raw.isprintable() else "".join(c for c in raw if c.isprintable())
    else:
        out = unicodedata.normalize("NFC", "".join(_prepare_char(c) for c in raw))
        if out != raw and raw.isupper() and any(c.lower() in _CYRILLIC for c in raw):
            # an all-caps Cyrillic word: "США" an acronym as written, "ХОРОШО" a word ("KhOROShO" else)
            out = out.upper() if len(raw) <= 3 else out.capitalize()
    return out.translate(_APOSTROPHES)


# --------------------------------------------------------------------------- plain reading

_SYMBOL_NAMES = {
    "&": "and", "+": "plus", "=": "equals", "@": "at", "%": "percent", "<": "less than",
    ">": "greater than", "\u00d7": "times", "\u00f7": "divided by", "\u00b1": "plus or minus",
    "\u00b0": "degrees", "\u00a9": "copyright", "\u00a7": "section", "\u00b6": "paragraph",
    "$": "dollars", "\u00a3": "pounds", "\u20ac": "euros", "\u00a5": "yen", "\u00a2": "cents",
    "\u20b9": "rupees", "\u221e": "infinity", "\u2260": "is not equal to", "\u2264": "is less than or equal to",
    "\u2265": "is greater than or equal to", "\u2248": "is approximately", "\u221a": "the square root of",
    "\u00ae": "registered", "\u2211": "the sum of", "\u2192": "to",
}


def _read_digit_run(run: str) -> str:
    if len(run) > 1 and run[0] == "0" or len(run) > 15:
        return digits(run)
    return cardinal(int(run))


def _is_letter(c: str) -> bool:
    return c.isalpha()  # true exactly for the Unicode letter categories L*


def read_plain(s: str) -> str:
    """Read a prepared string with no special structure: letter runs are kept as written
    (apostrophes and hyphens inside words survive, combining marks stay on their letter),
    digit runs become numbers, a few symbols are named, anything else is a word break."""
    words: list[str] = []
    cur: list[str] = []
    n = len(s)
    i = 0
    while i < n:
        c = s[i]
        if _is_letter(c):
            cur.append(c)
            i += 1
            continue
        if not c.isascii() and unicodedata.category(c)[0] == "M":
            if cur:
                cur.append(c)  # a mark on a letter; orphan marks are dropped
            i += 1
            continue
        if c in "'-" and cur and i + 1 < n and _is_letter(s[i + 1]):
            cur.append(c)
            i += 1
            continue
        if cur:
            words.append("".join(cur))
            cur = []
        if "0" <= c <= "9":
            j = i
            while j < n and "0" <= s[j] <= "9":
                j += 1
            words.append(_read_digit_run(s[i:j]))
            # "1.2.3" -> "one point two point three"; "16:9" -> "sixteen to nine"
            if j + 1 < n and "0" <= s[j + 1] <= "9":
                if s[j] == ".":
                    words.append("point")
                elif s[j] == ":":
                    words.append("to")
            i = j
            continue
        name = _SYMBOL_NAMES.get(c)
        if name is not None:
            words.append(name)
        elif c == "#":
            words.append("number" if i + 1 < n and "0" <= s[i + 1] <= "9" else "hash")
        i += 1
    if cur:
        words.append("".join(cur))
    return " ".join(words)


# --------------------------------------------------------------------------- context

@dataclass(frozen=True)
class Context:
    """What a token's neighbours look like (prepared text; None across punctuation).

    Attributes
    ----------
    prev, next:
        The previous / next token when only spaces separate it from this one, else None.
    is_initial:
        This token starts a sentence (first token, or after . ? ! or a line break).
    prev_is_initial:
        The previous token starts a sentence.
    prev2:
        The token before `prev` when only spaces separate the three, else None.
    following:
        The next token whatever separates it (punctuation, a line break), or None at the end:
        what decides for the abbreviations that are also words ("Rev.\nSmith", "Fig. (3)").
    line_start:
        This token is the first on its line.
    """

    prev: str | None = None
    next: str | None = None
    prev2: str | None = None
    is_initial: bool = False
    prev_is_initial: bool = False
    following: str | None = None
    line_start: bool = False


@dataclass(frozen=True)
class Reading:
    """The spoken form of one token.

    Attributes
    ----------
    spoken:
        What to say; may be empty (the token is silent, e.g. a lone "*").
    phonemes:
        IPA from the lexicon, else None.
    may_end:
        The token ends in a period that may also end the sentence ("U.S.", "etc.", "J.").
    """

    spoken: str
    phonemes: str | None = None
    may_end: bool = False


# --------------------------------------------------------------------------- tables

_MONTHS = ("January February March April May June July August September October "
           "November December").split()
_MONTH_NAMES = {m.lower(): m for m in _MONTHS}
_MONTH_ABBREV = {m[:3].lower() + ".": m for m in _MONTHS if m != "May"}
_MONTH_ABBREV["sept."] = "September"
_DAY_ABBREV = {d[:3].lower() + ".": d for d in
               "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()}

# Before a name; their period never ends a sentence.
_TITLES = {
    "mr.": "mister", "mrs.": "missus", "ms.": "miz", "dr.": "doctor", "prof.": "professor",
    "st.": "saint", "rev.": "reverend", "gen.": "general", "capt.": "captain",
    "lt.": "lieutenant", "sgt.": "sergeant", "col.": "colonel", "gov.": "governor",
    "sen.": "senator", "rep.": "representative", "hon.": "honorable", "mt.": "mount",
}
_TITLES_NO_PERIOD = {"Mr": "mister", "Mrs": "missus", "Ms": "miz", "Dr": "doctor", "St": "saint",
                     "Prof": "professor", "Mt": "mount"}
# Inside a sentence; never end one.
_INLINE = {
    "e.g.": "for example", "i.e.": "that is", "vs.": "versus", "cf.": "compare",
    "approx.": "approximately", "ca.": "circa", "viz.": "namely", "dept.": "department",
}
# May end a sentence as well as abbreviate.
_MAY_END = {
    "etc.": "et cetera", "jr.": "junior", "sr.": "senior", "inc.": "incorporated",
    "ltd.": "limited", "co.": "company", "corp.": "corporation", "bros.": "brothers",
    "ave.": "avenue", "blvd.": "boulevard", "rd.": "road", "hwy.": "highway",
    "a.m.": "A M", "p.m.": "P M", "al.": "al",
}
# Read so only before a number.
_BEFORE_NUMBER = {"no.": "number", "p.": "page"}
_STREET = {"st.": "street", "dr.": "drive", "St": "street", "Dr": "drive"}

# Abbreviations that are also everyday words ("The cat sat.", "We watched the sun.", "a sec.", "a
# fig.", "the engine's rev."): each is one only where its context makes it one, a question the
# reading (_read_word_like) and the sentence splitter (is_abbreviation, given the text that
# follows) answer alike (_is_abbreviation_here). Elsewhere the word is itself and its period may
# end the sentence.
_WORD_TITLES = frozenset(("rev.", "gen.", "col.", "gov.", "sen.", "rep.", "hon."))  # before a capitalised name
_DATE_ABBREV = {**_MONTH_ABBREV, **_DAY_ABBREV}  # capitalised ("Sat.", "Mar."), or before a number
_WORD_BEFORE_NUMBER = {"fig.": "figure", "vol.": "volume", "ch.": "chapter", "est.": "established",
                       "pp.": "pages", "nos.": "numbers"}  # "Fig. 3", "vol. 2"
_WORD_AFTER_NUMBER = frozenset(("min.", "sec.", "hr.", "hrs.", "ft.", "lb.", "lbs.", "oz."))  # "5 min.": units
_WORD_LIKE = _WORD_TITLES | frozenset(_DATE_ABBREV) | frozenset(_WORD_BEFORE_NUMBER) | _WORD_AFTER_NUMBER

_ABBREVIATIONS = (frozenset(_TITLES) | frozenset(_INLINE) | frozenset(_MAY_END) | frozenset(_BEFORE_NUMBER)
                  | _WORD_LIKE)

_DIGIT_BY_DIGIT = frozenset(("911",))  # the emergency number, as said
_ABOUT_WORDS = frozenset(("about", "approx", "approximately", "around", "roughly", "circa", "ca"))
# A five-digit number after a US state's code is a ZIP code, read digit by digit ("IL 62704")
_US_STATES = frozenset(
    "AL AK AZ AR CA CO CT DE FL GA ID IL IA KS KY LA MD MA MI MN MS MO MT NE NV NH NJ NM NY NC ND "
    "OH PA RI SC SD TN TX UT VT VA WA WV WI WY DC PR".split())  # not HI, IN, ME, OK, OR: words too
# A four-digit number after these is a year, even out of 1100-2099 ("in 1066", "by 2150")
_YEAR_AFTER = frozenset("in since until till by circa ca. c. year around before after from".split())
# Tokens read as a whole ("C hash" otherwise)
_NAMED_TOKENS = {"C#": "C sharp", "F#": "F sharp", "C++": "C plus plus", "vs": "versus", "Vs": "versus",
                 "WWI": "World War One", "WWII": "World War Two", "WW1": "World War One", "WW2": "World War Two"}
# Month and day abbreviations without their period, read out before a number or in a range
# ("Jan 5", "Mon-Fri"); alone they stay as written ("Jan" may be a name)
_BARE_DATE_ABBREV = {k[:-1].capitalize(): v for k, v in {**_MONTH_ABBREV, **_DAY_ABBREV}.items()}
# Units read as such only when written against the number ("24h", "2in"; "5 in a row" is a word)
_ATTACHED_UNITS = {"h": ("hour", "hours"), "in": ("inch", "inches"), "yr": ("year", "years"),
                   "yrs": ("years", "years")}
# Video resolutions ("1080p"): read as said, "ten eighty p"
_RE_RESOLUTION = re.compile(r"(?P<n>480|576|720|1080|1440|2160|4320)(?P<s>[pi])")
_SCALE_WORDS = {"thousand", "million", "billion", "trillion"}
_SCALE_SUFFIX = {"k": "thousand", "K": "thousand", "m": "million", "M": "million",
                 "mn": "million", "bn": "billion", "b": "billion", "B": "billion",
                 "tn": "trillion", "T": "trillion"}
_SCALE_SUFFIX.update({w: w for w in _SCALE_WORDS})

# symbol: (singular, plural, minor singular, minor plural)
_CURRENCIES = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "\u00a3": ("pound", "pounds", "penny", "pence"),
    "\u20ac": ("euro", "euros", "cent", "cents"),
    "\u00a5": ("yen", "yen", None, None),
    "\u20b9": ("rupee", "rupees", "paisa", "paise"),
    "\u20a9": ("won", "won", None, None),
    "\u20bd": ("ruble", "rubles", "kopek", "kopeks"),
    "\u20bf": ("bitcoin", "bitcoins", None, None),
    "\u00a2": ("cent", "cents", None, None),
}
_CUR_CLASS = "[" + re.escape("".join(_CURRENCIES)) + "]"

# unit as written -> (singular, plural); only read so after a number
_UNITS = {
    "km": ("kilometer", "kilometers"), "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"), "mi": ("mile", "miles"), "ft": ("foot", "feet"),
    "kg": ("kilogram", "kilograms"), "mg": ("milligram", "milligrams"),
    "lb": ("pound", "pounds"), "lbs": ("pounds", "pounds"), "oz": ("ounce", "ounces"),
    "ml": ("milliliter", "milliliters"), "mL": ("milliliter", "milliliters"),
    "mph": ("mile per hour", "miles per hour"), "kph": ("kilometer per hour", "kilometers per hour"),
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "\u00b0C": ("degree Celsius", "degrees Celsius"), "\u00b0F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "\u00b0": ("degree", "degrees"),
    "Hz": ("hertz", "hertz"), "kHz": ("kilohertz", "kilohertz"), "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"), "KB": ("kilobyte", "kilobytes"), "kB": ("kilobyte", "kilobytes"),
    "MB": ("megabyte", "megabytes"), "GB": ("gigabyte", "gigabytes"), "TB": ("terabyte", "terabytes"),
    "ms": ("millisecond", "milliseconds"), "kW": ("kilowatt", "kilowatts"),
    "kWh": ("kilowatt hour", "kilowatt hours"), "mAh": ("milliamp hour", "milliamp hours"),
    "min": ("minute", "minutes"), "sec": ("second", "seconds"), "hr": ("hour", "hours"),
    "hrs": ("hours", "hours"),
}
_UNIT_ALT = "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))

_ROMAN_RE = re.compile(r"M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
# "Chapter IV" -> "chapter four" after these words; after other capitalised words
# ("Henry VIII") a numeral up to _MAX_REGNAL reads "the eighth".
_ROMAN_CARDINAL_AFTER = frozenset(
    "chapter ch part volume vol book act scene section article appendix war phase type class "
    "level stage episode round grade unit table figure fig season series".split()
    # sequels, missions, models, councils: "Apollo XI", "Super Bowl XL", "Rocky II", "Mark IV"
    + "apollo gemini rocky bowl fantasy mark vatican council olympiad".split())
_MAX_REGNAL = 39
# "I" after a name is read "the first" only after these names, and not before these words.
_REGNAL_NAMES = frozenset(
    "Elizabeth Henry Charles George Edward William James Richard John Mary Louis Peter Catherine "
    "Frederick Philip Alexander Nicholas Ferdinand Victoria Anne Leopold Pius Paul Gregory Leo "
    "Benedict Clement Boniface Urban Otto Wilhelm Alfonso Carlos Juan Ivan Constantine Justinian "
    "Selim Suleiman Mehmed Darius Ramesses Rudolf Sigismund Casimir Stephen Robert David Malcolm "
    "Harold Matilda Isabella Olaf Haakon Gustav Christian Umberto Napoleon Francis Joseph Maximilian "
    "Augustus Ptolemy Cyrus Xerxes Artaxerxes Innocent Sixtus Julius Hadrian Manuel Pedro Sancho".split())
_AFTER_PRONOUN_I = frozenset(
    "am think know guess mean hope believe said say thought have had will would can could do did "
    "don't didn't can't won't need want see saw like love feel felt went go".split())

_TLDS = frozenset("com org net edu gov io co uk de fr ai dev app info biz us ca au jp cn ru nl "
                  "eu me tv ly gg be ch es it se no fi pl in".split())

# --------------------------------------------------------------------------- patterns

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+"
_AMPM = r"(?P<ampm>[aApP]\.?[mM]\.?)"
_RE_CUR_PRE = re.compile(
    rf"(?P<sign>[-+]?)(?P<cur>{_CUR_CLASS})(?P<num>{_NUM})(?P<scale>[kKmMbBT]|mn|bn|tn|"
    r"thousand|million|billion|trillion)?")
_RE_CUR_POST = re.compile(
    rf"(?P<sign>[-+]?)(?P<num>{_NUM})(?P<scale>[kKmMbBT]|mn|bn|tn)?(?P<cur>{_CUR_CLASS})")
_RE_PERCENT = re.compile(rf"(?P<sign>[-+]?)(?P<num>{_NUM})%")
_RE_TIME_AMPM = re.compile(rf"(?P<h>\d{{1,2}})(?::(?P<m>\d{{2}}))?{_AMPM}")
_RE_TIME = re.compile(r"(?P<h>\d{1,2}):(?P<m>\d{2})(?::(?P<s>\d{2}))?")
_RE_ISO_DATE = re.compile(r"(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})")
_RE_SLASH_DATE = re.compile(r"(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<y>\d{4}|\d{2})")
_RE_DECADE = re.compile(r"'?(?P<n>\d{1,3}0)'?s")
_RE_POSSESSIVE = re.compile(r"(?P<num>\d+)'s")
_RE_ORDINAL = re.compile(r"(?P<n>\d{1,3}(?:,\d{3})+|\d+)(?P<suf>st|nd|rd|th|ST|ND|RD|TH)")
_RE_PHONE = re.compile(r"(?P<plus>\+?)\d+(?:[-.]\d+)+")
_RE_PHONE_PAREN = re.compile(r"\(?(?P<a>\d{3})\)(?P<b>\d{3})-(?P<c>\d{4})")
_RE_IP = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
_RE_RANGE = re.compile(rf"(?P<a>{_NUM})[-\u2013](?P<b>{_NUM})")
_RE_FRACTION = re.compile(r"(?:(?P<whole>\d+)?(?P<mark>_))?(?P<a>\d+)/(?P<b>\d+)")
_RE_PER = re.compile(r"(?P<amount>[^/]*\d[^/]*)/(?P<per>[A-Za-z]+)")
_RE_SHORT_YEAR = re.compile(r"'(?P<y>\d\d)")
# Denominators read as a fraction even where the numbers could be a month and a day
# ("3/4" three quarters, "5/16"); other month/day pairs are dates ("6/30" June thirtieth).
_COMMON_DENOMINATORS = frozenset((2, 3, 4, 5, 6, 8, 10, 16, 32, 64, 100))
# "$5/month", "60 km/h": the word after the slash, read after "per"
_PER_WORDS = {"hr": "hour", "h": "hour", "mo": "month", "yr": "year", "wk": "week", "min": "minute",
              "sec": "second", "s": "second", "d": "day", "ea": "each"}
_RE_NUM_UNIT = re.compile(rf"(?P<sign>[-+]?)(?P<num>{_NUM})(?P<unit>{_UNIT_ALT})")
_RE_NUMBER = re.compile(rf"(?P<sign>[-+]?)(?P<num>{_NUM})")
# "5M users", "2.5bn people": a scale letter with no currency ("M", "mn", "bn", "tn"; a lower-case
# "m" is meters, "5k" and "2B" stay as written: "ten K run", "a 2B pencil")
_RE_NUM_SCALE = re.compile(rf"(?P<sign>[-+]?)(?P<num>{_NUM})(?P<scale>M|mn|bn|tn)")
# European number formats, rewritten to English ones before reading: a decimal comma ("1,5",
# "12,50 €", not the English "1,500"), dots grouping thousands ("1.234,56", "1.234.567"), and
# day.month.year dates ("12.01.2026")
_RE_EURO_NUMBER = re.compile(
    r"(?P<head>\D*?)(?P<int>\d{1,3}(?:\.\d{3})+|\d+)(?:,(?P<frac>\d{1,2}|\d{4,}))?(?P<tail>\D*)")
_RE_DOTTED_DATE = re.compile(r"(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?P<y>\d{4})")
_RE_YMD_SLASH = re.compile(r"(?P<y>\d{4})/(?P<m>\d{1,2})/(?P<d>\d{1,2})")  # "2026/01/12"
_RE_DASH_DATE = re.compile(r"(?P<a>\d{1,2})-(?P<b>\d{1,2})-(?P<y>\d{4})")  # "12-01-2026", as slash dates
_RE_TIMES = re.compile(rf"(?P<num>{_NUM})[x\u00d7]")  # "3x faster"
_RE_BY = re.compile(r"(?P<a>\d+)[x\u00d7](?P<b>\d+)")  # "1920x1080", "2x4"
_RE_POWER = re.compile(r"(?P<a>\d+)\^(?P<b>-?\d+)")  # "10^6"
_RE_NUM_PLUS = re.compile(rf"(?P<num>{_NUM})\+")  # "10,000+"
_RE_NUM_ATTACHED = re.compile(rf"(?P<num>{_NUM})(?P<unit>[a-z]+)")  # "24h", "2in" (_ATTACHED_UNITS)
_RE_PREFIXED_YEAR = re.compile(r"(?P<p>[A-Z]{1,3})(?P<y>1[1-9]\d\d|20\d\d)")  # "FY2024", "RTX2080"
_RE_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_RE_DOMAIN = re.compile(r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.(?P<tld>[A-Za-z]{2,4})(?:[/:?#]\S*)?")
_RE_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_RE_DOTTED = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]?\.?")

_URL_SEPARATORS = {".": "dot", "/": "slash", "-": "dash", "_": "underscore", ":": "colon",
                   "@": "at", "?": "question mark", "=": "equals", "&": "and", "#": "hash",
                   "%": "percent", "~": "tilde", "+": "plus"}


# --------------------------------------------------------------------------- number helpers

def _number_words(num: str, *, as_year: bool = True) -> str:
    """Read a number as written (``"1,234.5"``, ``".5"``, ``"007"``, ``"1999"``)."""
    whole, _, frac = num.partition(".")
    if frac or num.startswith("."):
        head = _read_digit_run(whole.replace(",", "")) if whole else ""
        return (head + " point " if head else "point ") + digits(frac)
    if "," in whole:
        return cardinal(int(whole.replace(",", "")))
    if as_year and len(whole) == 4 and 1100 <= int(whole) <= 2099:
        return year(int(whole))
    return _read_digit_run(whole)


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
    m = _RE_EURO_NUMBER.fullmatch(s)
    if m is None or not (m["head"] == "" or m["head"] in "+-" or m["head"].lstrip("+-") in _CURRENCIES):
        return None
    grouped = "." in m["int"]
    if m["frac"] is None and not (grouped and m["int"].count(".") >= 2):
        return None  # "1.234" is an English decimal; "1,500" never reaches here (no comma match)
    if m["tail"] and not (m["tail"].lstrip() in _CURRENCIES or m["tail"] in _UNITS or m["tail"] == "%"):
        return None
    measured = m["head"].lstrip("+-") in _CURRENCIES or bool(m["tail"]) or (
        following is not None and (following in _CURRENCIES or following in _UNITS or following == "%"))
    if not (measured or lenient or (grouped and m["frac"] is not None)):
        return None
    number = m["int"].replace(".", "") + ("." + m["frac"] if m["frac"] is not None else "")
    return m["head"] + number + m["tail"]


def _plain_number_value(s: str | None) -> float | None:
    """Value of a token that is just a number ("1", "-2.5", "1,000", "1,5"), else None."""
    if s is None:
        return None
    s = _from_european(s, lenient=True) or s
    last_end = s.rpartition("-")[2].rpartition("\u2013")[2]  # a range's upper end: "5-10 kg" is 10 of them
    m = _RE_NUMBER.fullmatch(s) or _RE_NUMBER.fullmatch(last_end)
    if m is None or not s[:1].isdigit() and s[:1] not in "-+.":
        return None
    value = _number_value(m["num"])
    return -value if m["sign"] == "-" else value


def _money(cur: str, num: str, scale: str | None) -> str:
    """"$", "12.50" -> "twelve dollars and fifty cents"; "£", "1", "m" -> "one million pounds"."""
    one, many, minor_one, minor_many = _CURRENCIES[cur]
    if scale:
        return _number_words(num, as_year=False) + " " + _SCALE_SUFFIX[scale] + " " + many
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
    words = cardinal(h) + " " + ("oh " + _ONES[m] if m < 10 else cardinal(m))
    if m == 0:
        words = cardinal(h) + " hundred"
    if s is not None:
        words += " and " + cardinal(s) + (" second" if s == 1 else " seconds")
    return words


def _date(month: int, day: int, year_text: str) -> str:
    y = int(year_text)
    if len(year_text) == 2:
        year_words = ("oh " + _ONES[y]) if y < 10 else cardinal(y)
    else:
        year_words = year(y)
    return f"{_MONTHS[month - 1]} {ordinal(day)}, {year_words}"


def _is_article(word: str | None) -> bool:
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
    return cardinal(h) + " " + ("oh " + _ONES[r] if r < 10 else cardinal(r))


def _is_year_range(a: str, b: str) -> bool:
    """"1990-1995", not "555-1234"."""
    return (len(a) == len(b) == 4 and a.isdigit() and b.isdigit()
            and 1100 <= int(a) < int(b) <= 2099)


def _read_numeric(s: str, ctx: Context) -> str | None:
    """Spoken form of a token holding digits, or None when no number pattern fits."""
    if (english := _from_european(s, ctx.next)) is not None:
        return _read_numeric(english, ctx)
    if s[:1] == "~" and s[1:2].isdigit() and (amount := _read_numeric(s[1:], ctx)) is not None:
        if ctx.prev is not None and ctx.prev.lower().rstrip(".") in _ABOUT_WORDS:
            return amount  # "about ~5": said once
        return "about " + amount  # "~5 people"
    if m := _RE_CUR_PRE.fullmatch(s):
        if m["scale"] is None and ctx.next in _SCALE_WORDS:
            return _signed(m["sign"], _number_words(m["num"], as_year=False))
        return _signed(m["sign"], _money(m["cur"], m["num"], m["scale"]))
    if m := _RE_CUR_POST.fullmatch(s):
        return _signed(m["sign"], _money(m["cur"], m["num"], m["scale"]))
    if m := _RE_PERCENT.fullmatch(s):
        return _signed(m["sign"], _number_words(m["num"], as_year=False) + " percent")
    if m := _RE_TIME_AMPM.fullmatch(s):
        h, mins = int(m["h"]), int(m["m"] or 0)
        if h <= 12 and mins < 60:
            ampm = "A M" if m["ampm"][0] in "aA" else "P M"
            return _time(h, mins, None, with_ampm=True) + " " + ampm
    if m := _RE_TIME.fullmatch(s):
        h, mins, secs = int(m["h"]), int(m["m"]), m["s"]
        if h <= 24 and mins < 60 and (secs is None or int(secs) < 60):
            ampm = ctx.next is not None and re.fullmatch(_AMPM, ctx.next) is not None
            return _time(h, mins, None if secs is None else int(secs), with_ampm=ampm)
    if m := _RE_ISO_DATE.fullmatch(s) or _RE_YMD_SLASH.fullmatch(s) or _RE_DOTTED_DATE.fullmatch(s):
        mo, d = int(m["m"]), int(m["d"])
        if 1 <= mo <= 12 and 1 <= d <= 31:
            return _date(mo, d, m["y"])
    if m := _RE_SLASH_DATE.fullmatch(s) or _RE_DASH_DATE.fullmatch(s):
        a, b = int(m["a"]), int(m["b"])
        if 1 <= a <= 12 and 1 <= b <= 31:
            return _date(a, b, m["y"])
        if 1 <= b <= 12 and 1 <= a <= 31:
            return _date(b, a, m["y"])
    if m := _RE_DECADE.fullmatch(s):
        n = int(m["n"])
        if n >= 10 and (len(m["n"]) != 3 or n % 100 == 0):
            return _year_plural(n)
    if m := _RE_POSSESSIVE.fullmatch(s):
        return _number_words(m["num"]) + "'s"
    if m := _RE_ORDINAL.fullmatch(s):
        return ordinal(int(m["n"].replace(",", "")))
    if m := _RE_PHONE_PAREN.fullmatch(s):
        return ", ".join(digits(g) for g in (m["a"], m["b"], m["c"]))
    if _RE_IP.fullmatch(s):
        return " dot ".join(digits(g) for g in s.split("."))
    if (m := _RE_RANGE.fullmatch(s)) and _is_year_range(m["a"], m["b"]):
        return year(int(m["a"])) + " to " + year(int(m["b"]))
    if (m := _RE_PHONE.fullmatch(s)) and ("-" in s or s.count(".") >= 2):
        groups = re.findall(r"\d+", s)
        if sum(map(len, groups)) >= 7:
            return ("plus " if m["plus"] else "") + ", ".join(digits(g) for g in groups)
    if m := _RE_RANGE.fullmatch(s):
        return _number_words(m["a"]) + " to " + _number_words(m["b"])
    if m := _RE_FRACTION.fullmatch(s):
        return _read_slash(m, ctx)
    if m := _RE_NUM_UNIT.fullmatch(s):
        value = _number_value(m["num"])
        one, many = _UNITS[m["unit"]]
        single = value == 1 and "." not in m["num"] or _is_article(ctx.prev)  # "a 5km walk": five kilometer
        return _signed(m["sign"], _number_words(m["num"], as_year=False) + " " + (one if single else many))
    if m := _RE_NUMBER.fullmatch(s):
        return _read_number_in_context(m["sign"], m["num"], ctx)
    if m := _RE_NUM_PLUS.fullmatch(s):  # "10,000+ users"
        return _number_words(m["num"], as_year=False) + " plus"
    if m := _RE_TIMES.fullmatch(s):
        return _number_words(m["num"], as_year=False) + " times"
    if m := _RE_BY.fullmatch(s):  # "1920x1080": nineteen twenty by ten eighty; "2x4": two by four
        a, b = int(m["a"]), int(m["b"])
        if m["a"] == "0":  # "0x10": a hex literal, not a size
            return None
        if 100 <= min(a, b) and max(a, b) < 10000 and m["a"][0] != "0" and m["b"][0] != "0":
            return _in_pairs(a) + " by " + _in_pairs(b)
        return _number_words(m["a"], as_year=False) + " by " + _number_words(m["b"], as_year=False)
    if m := _RE_POWER.fullmatch(s):
        return _number_words(m["a"], as_year=False) + " to the power of " + _signed(
            "-" if m["b"].startswith("-") else "", _number_words(m["b"].lstrip("-"), as_year=False))
    if m := _RE_RESOLUTION.fullmatch(s):
        return _in_pairs(int(m["n"])) + " " + m["s"]
    if (m := _RE_PREFIXED_YEAR.fullmatch(s)) and not _ROMAN_RE.fullmatch(m["p"]):
        return " ".join(m["p"]) + " " + year(int(m["y"]))
    if (m := _RE_NUM_ATTACHED.fullmatch(s)) and m["unit"] in _ATTACHED_UNITS:
        one, many = _ATTACHED_UNITS[m["unit"]]
        return _number_words(m["num"], as_year=False) + " " + (one if m["num"] == "1" else many)
    if (m := _RE_NUM_SCALE.fullmatch(s)) and (m["scale"] != "M" or _counts_things(ctx.next)):
        return _signed(m["sign"], _number_words(m["num"], as_year=False) + " " + _SCALE_SUFFIX[m["scale"]])
    if m := _RE_SHORT_YEAR.fullmatch(s):  # "in '05", "the '99 season"
        y = int(m["y"])
        return "oh " + _ONES[y] if y < 10 else cardinal(y)
    if m := _RE_PER.fullmatch(s):  # "$5/month", "100/day"
        amount = _read_numeric(m["amount"], Context(prev=ctx.prev))
        if amount is not None:
            per = m["per"]
            return amount + " per " + (_UNITS[per][0] if per in _UNITS else _PER_WORDS.get(per.lower(), per))
    spoken = _read_range(s, ctx)
    parts = s.split("-")
    if spoken is None and len(parts) > 1 and all(parts) and any(_RE_ORDINAL.fullmatch(p) for p in parts):
        # "3rd-party", "21st-century", "2nd-hand": each part on its own (not "three ar-dee party")
        return "-".join(_read_numeric(p, Context()) or read_plain(p) for p in parts)
    return spoken


def _read_slash(m: re.Match, ctx: Context) -> str:
    """"1/2", "3½" (prepared "3_1/2"), "6/30" (a date), "24/7", "7/3"."""
    a, b = int(m["a"]), int(m["b"])
    proper = 0 < a < b <= 100 and m["a"][0] != "0"
    if m["whole"] is not None:  # a whole number and a vulgar fraction
        return _number_words(m["whole"], as_year=False) + " and " + _fraction(a, b)
    if proper and (m["mark"] or b in _COMMON_DENOMINATORS):
        after_whole = ctx.prev is not None and ctx.prev.isdigit()  # "1 1/2 cups"
        return ("and " if after_whole else "") + _fraction(a, b)
    if m.group(0) in ("24/7", "50/50", "9/11"):
        return cardinal(a) + " " + cardinal(b)
    if 1 <= a <= 12 and 1 <= b <= 31:  # month/day, as the dates with a year
        return _MONTHS[a - 1] + " " + ordinal(b)
    if proper:
        return _fraction(a, b)
    return _number_words(m["a"], as_year=False) + " slash " + _number_words(m["b"], as_year=False)


def _read_range(s: str, ctx: Context) -> str | None:
    """A range whose ends are not bare numbers: "5-10%", "$5-10", "9am-5pm", "5–10kg"."""
    cut = next((i for i, c in enumerate(s) if c in "-\u2013" and i > 0), None)
    if cut is None:
        return None
    left, right = s[:cut], s[cut + 1:]
    if not left[-1:].isalnum() or not right[:1].isalnum() and right[:1] not in _CURRENCIES:
        return None
    a = _read_numeric(left, Context(prev=ctx.prev))
    if (cur := _RE_CUR_PRE.fullmatch(left)) and _RE_NUMBER.fullmatch(right):  # "$5-10": five to ten dollars
        b = _read_numeric(cur["cur"] + right, Context(next=ctx.next))
        a = _signed(cur["sign"], _number_words(cur["num"], as_year=False))
    else:
        b = _read_numeric(right, Context(next=ctx.next))
    if a is None or b is None:
        return None
    return a + " to " + b


def _read_number_in_context(sign: str, num: str, ctx: Context) -> str:
    prev, nxt = ctx.prev, ctx.next
    if prev is not None and prev in _CURRENCIES:  # "$ 5"
        if nxt in _SCALE_WORDS:
            return _signed(sign, _number_words(num, as_year=False))
        return _signed(sign, _money(prev, num, None))
    if nxt is not None and nxt in _CURRENCIES:
        return _signed(sign, _money(nxt, num, None))  # "12.50 €", "1 €": the symbol after reads nothing
    plain_int = not sign and num.isdigit()
    if plain_int and (num in _DIGIT_BY_DIGIT or len(num) == 5 and prev in _US_STATES):  # "call 911", "IL 62704"
        return digits(num)
    if plain_int and 1 <= int(num) <= 31 and len(num) <= 2:
        if prev is not None and (prev in _MONTH_NAMES.values() or prev.lower() in _MONTH_ABBREV
                                 or (_BARE_DATE_ABBREV.get(prev) in _MONTH_NAMES.values()
                                     and _day_number_follows(prev, num))):
            return ordinal(int(num))
        if nxt is not None and nxt in _MONTH_NAMES.values():
            the = "" if prev is not None and prev.lower() == "the" else "the "  # "on the 4 July"
            return the + ordinal(int(num)) + " of"
    as_year = not sign and (nxt is None or nxt not in _UNITS)
    if (as_year and plain_int and len(num) == 4 and 1000 <= int(num) <= 2999 and prev is not None
            and prev.lower() in _YEAR_AFTER):  # "in 1066", "since 1010", "by 2150": years out of 1100-2099 too
        return year(int(num), paired_from=1000)
    return _signed(sign, _number_words(num, as_year=as_year))


# --------------------------------------------------------------------------- words

def _read_url(s: str) -> str:
    """"www.example.com" -> "w w w dot example dot com"; digits are read one by one."""
    s = _RE_SCHEME.sub("", s, count=1).rstrip("/")
    words: list[str] = []
    for part in re.findall(r"[^\W\d_]+|\d+|.", s):
        if part.isdigit():
            words.append(digits(part))
        elif _is_letter(part[0]):
            words.append(" ".join(part) if part.lower() == "www" else part)
        elif part in _URL_SEPARATORS:
            words.append(_URL_SEPARATORS[part])
    return read_plain(" ".join(words))


def _looks_like_url(s: str) -> bool:
    if "://" in s or s[:4].lower() == "www." or ("@" in s and _RE_EMAIL.fullmatch(s)):
        return True
    m = _RE_DOMAIN.fullmatch(s)
    return m is not None and m["tld"].lower() in _TLDS


def _is_capitalised_word(s: str | None) -> bool:
    return s is not None and s[:1].isupper() and s.isalpha() and not s.isupper()


def _read_roman(s: str, ctx: Context) -> str | None:
    if not s or _ROMAN_RE.fullmatch(s) is None:
        return None
    value = 0
    for c, nxt in zip(s, s[1:] + " "):
        v = _ROMAN_VALUES[c]
        value += -v if nxt != " " and _ROMAN_VALUES[nxt] > v else v
    prev = ctx.prev
    if prev is None:
        return None
    if prev.lower().rstrip(".") in _ROMAN_CARDINAL_AFTER:
        return cardinal(value) if len(s) > 1 or s in "IVX" else None  # "Appendix C", "Part D"
    if not _is_capitalised_word(prev) or value > _MAX_REGNAL or s == "X":
        return None
    if s == "I" and (ctx.prev_is_initial or prev not in _REGNAL_NAMES
                     or (ctx.next is not None and ctx.next.lower() in _AFTER_PRONOUN_I)):
        return None  # the pronoun: "Yesterday I left", "John I think"
    return "the " + ordinal(value)


def _read_abbreviation(s: str, key: str, ctx: Context) -> Reading | None:
    """Readings of "Dr.", "e.g.", "U.S.", "J." and their kin; None if `s` is none of them."""
    if key in ("st.", "dr.") or s in _TITLES_NO_PERIOD:
        # "St. John" / "Dr. Who": a title before a name; "Main St." / "12 Elm Dr": a street
        # after one (unless a name follows a sentence's first word: "Visit St. John").
        before_name = ctx.next is not None and ctx.next[:1].isupper()
        after_name = ctx.prev is not None and (ctx.prev[:1].isupper() or ctx.prev[:1].isdigit())
        street = _STREET.get(key) or _STREET.get(s)
        if street and after_name and not (before_name and ctx.prev_is_initial):
            return Reading(street, may_end=True)
        if key in _TITLES:
            return Reading(_TITLES[key])
        if s in _TITLES_NO_PERIOD and before_name:
            return Reading(_TITLES_NO_PERIOD[s])
        return None
    if key in _WORD_LIKE:
        return _read_word_like(s, key, ctx)
    if key in _TITLES and not _is_unit_not_title(s, key):
        return Reading(_TITLES[key])
    if key in _BEFORE_NUMBER:  # "No. 5", "p. 7"; otherwise the word "No" or a letter
        if ctx.next is not None and ctx.next[:1].isdigit():
            return Reading(_BEFORE_NUMBER[key])
        return Reading(s[:-1], may_end=True)
    if key in _INLINE:
        return Reading(_INLINE[key])
    if key in _MAY_END:
        return Reading(_MAY_END[key], may_end=True)
    if _RE_DOTTED.fullmatch(s) and (s.endswith(".") or len(s) > 2):
        # letter by letter; espeak reads a lone "A" before a word as the article ("A I" -> "uh eye"),
        # "eigh" as the letter's name
        letters = ["eigh" if c in "aA" else c for c in s if c != "."]
        return Reading(" ".join(letters), may_end=s.endswith("."))
    return None


def _is_label(word: str) -> bool:
    """A number's stand-in after "Fig.", "Vol.", "Ch.": a Roman numeral ("IV", "xii") or a letter
    with digits ("S1")."""
    return (word.isalpha() and _ROMAN_RE.fullmatch(word.upper()) is not None) or \
        (word[:1].isupper() and word[1:].isdigit() and len(word) > 1)


def _expands_here(s: str, key: str, following: str) -> bool:
    """Whether the word-like abbreviation ``s`` (key ``key`` in ``_WORD_LIKE``, not a unit) reads
    as its expansion before the word ``following`` ("" at the end)."""
    nxt = following[:1]
    if key in _WORD_TITLES:
        return s[:1].isupper() and nxt.isupper()  # "Rev. Smith", "Gen. Lee"
    if key in _DATE_ABBREV:
        return s[:1].isupper() or nxt.isdigit()  # "Sat. Dec. 5", "on Mar. 3", "dec. 5"
    return key in _WORD_BEFORE_NUMBER and (nxt.isdigit() or _is_label(following))  # "Fig. 3", "Vol. II"


def _read_word_like(s: str, key: str, ctx: Context) -> Reading:
    word = Reading(s[:-1], may_end=True)
    if key in _WORD_AFTER_NUMBER:  # "5 min." -> minutes; "a sec." -> sec
        value = _plain_number_value(ctx.prev)
        if value is None:
            return word
        one, many = _UNITS[key[:-1]]
        return Reading(one if value == 1 and "." not in (ctx.prev or "") else many, may_end=True)
    if not _expands_here(s, key, ctx.following or ""):
        return word
    if key in _WORD_TITLES:
        return Reading(_TITLES[key])
    if key in _DATE_ABBREV:
        return Reading(_DATE_ABBREV[key], may_end=True)
    return Reading(_WORD_BEFORE_NUMBER[key])


def _is_unit_not_title(s: str, key: str) -> bool:
    """"ms." in lower case is milliseconds ("It took 10 ms."), not the title "Ms."."""
    return key[:-1] in _UNITS and not s[:1].isupper()


def is_abbreviation(s: str, following: str | None = None) -> bool:
    """Whether a token ending in "." keeps its period as part of the word ("Dr.", "U.S.",
    "e.g.", an initial "J."). Used by the sentence splitter when peeling punctuation.
    ``following``: the next word (past any brackets, quotes or line break; None or "" at the
    end), which decides for the abbreviations that are also words: "Sat. Dec. 5" but "The cat
    sat.", "Fig. 3" but "a fig."; before a lower-case word the sentence goes on ("The gov.
    agencies", "5 min. later")."""
    key = s.lower()
    if key in _WORD_LIKE:
        nxt = (following or "")[:1]
        return (nxt.islower() or (key in _WORD_AFTER_NUMBER and nxt.isdigit())
                or (key not in _WORD_AFTER_NUMBER and _expands_here(s, key, following or "")))
    if key in _ABBREVIATIONS:
        return not (key in _TITLES and _is_unit_not_title(s, key))
    return len(s) >= 2 and _RE_DOTTED.fullmatch(s) is not None and (len(s) > 2 or s[0].isupper())


# Lower-cased words whose reading may depend on context; every other ASCII word reads as itself.
_SPECIAL_WORDS = (frozenset(k.rstrip(".") for k in _ABBREVIATIONS) | frozenset(_MONTH_NAMES)
                  | frozenset(u.lower() for u in _UNITS) | _SCALE_WORDS
                  | frozenset(w.lower() for w in _TITLES_NO_PERIOD) | {"am", "pm", "no"}
                  | frozenset(k.lower() for k in _NAMED_TOKENS) | frozenset(k.lower() for k in _BARE_DATE_ABBREV))


def is_plain_word(s: str) -> bool:
    """True for an ASCII word that reads as itself whatever its context ("fox", "Smith")."""
    return (s.isalpha() and s.isascii() and s.lower() not in _SPECIAL_WORDS
            and not (s.isupper() and _ROMAN_RE.fullmatch(s)))


def read_token(s: str, ctx: Context = Context(), *, lexicon: Lexicon | None = None) -> Reading:
    """Read one prepared token (see :func:`prepare`) in its context.

    Parameters
    ----------
    s:
        The token as written, prepared, with surrounding punctuation removed but an
        abbreviation's own period kept ("Dr.", "U.S.").
    ctx:
        The neighbouring tokens.
    lexicon:
        User pronunciations; an entry overrides every rule below.

    Returns
    -------
    Reading
        ``spoken`` holds only letters, marks, apostrophes, hyphens, spaces and commas.
    """
    if not s:
        return Reading("")
    if lexicon is not None:
        entry = lexicon.lookup(s)
        if entry is None and s.endswith("."):
            entry = lexicon.lookup(s[:-1])
        if entry is not None:
            base = entry.respelling if entry.respelling is not None else s
            return Reading(read_plain(prepare(base)), phonemes=entry.phonemes,
                           may_end=read_token(s, ctx).may_end)
        if s[-2:] in ("'s", "'S") and (entry := lexicon.lookup(s[:-2])) is not None:  # "Siobhan's"
            base = (entry.respelling if entry.respelling is not None else s[:-2]) + "'s"
            phonemes = None if entry.phonemes is None else entry.phonemes + _possessive_ipa(entry.phonemes)
            return Reading(read_plain(prepare(base)), phonemes=phonemes)
    if s in _NAMED_TOKENS:
        return Reading(_NAMED_TOKENS[s])
    if s in _BARE_DATE_ABBREV and _day_number_follows(s, ctx.next):
        return Reading(_BARE_DATE_ABBREV[s])  # "Dec 25", "Jan 1st", "Sat 3rd"
    if (dates := _date_range(s)) is not None:
        return Reading(dates)  # "Mon-Fri", "Jan-Mar"
    if is_plain_word(s):
        return Reading(s)
    if ctx.line_start and s.strip("#") == "" and len(s) <= 6 and not (ctx.next or "")[:1].isdigit():
        return Reading("")  # a Markdown heading's marker ("# Title"), not "hash"
    key = s.lower()
    if key.endswith(".") or s in _TITLES_NO_PERIOD:
        reading = _read_abbreviation(s, key, ctx)
        if reading is not None:
            return reading
    if _looks_like_url(s):
        return Reading(_read_url(s))
    if any("0" <= c <= "9" for c in s):
        spoken = _read_numeric(s, ctx)
        return Reading(read_plain(s) if spoken is None else spoken, may_end=s.endswith("."))
    prev_value = _plain_number_value(ctx.prev)
    if re.fullmatch(_AMPM, s) and (prev_value is not None or (ctx.prev and _RE_TIME.fullmatch(ctx.prev))):
        return Reading("A M" if s[0] in "aA" else "P M", may_end=s.endswith("."))
    if prev_value is not None and s in _UNITS:
        one, many = _UNITS[s]
        single = prev_value == 1 and "." not in (ctx.prev or "") or _is_article(ctx.prev2)  # "a 5 kg bag"
        return Reading(one if single else many)
    if key in _SCALE_WORDS and ctx.prev is not None:
        cur = _RE_CUR_PRE.fullmatch(ctx.prev)
        if cur is not None and cur["scale"] is None:
            return Reading(key + " " + _CURRENCIES[cur["cur"]][1])
        if ctx.prev in _CURRENCIES:
            return Reading(key + " " + _CURRENCIES[ctx.prev][1])
        if ctx.prev2 in _CURRENCIES and _RE_NUMBER.fullmatch(ctx.prev):  # "$ 5 million"
            return Reading(key + " " + _CURRENCIES[ctx.prev2][1])
    if s in _CURRENCIES and ctx.next is not None and _RE_NUMBER.fullmatch(ctx.next):
        return Reading("")  # "$ 5": the number reads the currency
    if s in _CURRENCIES and prev_value is not None:
        return Reading("")  # "12.50 €": the number before read it
    if s in ("#", "No") and ctx.next is not None and ctx.next[:1].isdigit():
        return Reading("number")
    roman = _read_roman(s, ctx) if s.isupper() else None
    if roman is not None:
        return Reading(roman)
    return Reading(read_plain(s))


# Bare abbreviations that are also names or words ("Jan 2 years ago", "Sat 5 minutes"): read out
# only before an ordinal ("Jan 1st")
_BARE_AMBIGUOUS = frozenset(("Jan", "Sat", "Sun", "Wed"))


def _day_number_follows(abbrev: str, nxt: str | None) -> bool:
    if nxt is None:
        return False
    if _RE_ORDINAL.fullmatch(nxt):
        return 1 <= int(_RE_ORDINAL.fullmatch(nxt)["n"].replace(",", "")) <= 31
    return abbrev not in _BARE_AMBIGUOUS and nxt.isdigit() and 1 <= int(nxt) <= 31 and len(nxt) <= 2


def _date_range(s: str) -> str | None:
    """"Mon-Fri" or "Mon–Fri" -> "Monday to Friday", "Jan.-Mar." -> "January to March"; else None."""
    left, dash, right = s.replace("\u2013", "-").partition("-")
    if not dash:
        return None
    a = _BARE_DATE_ABBREV.get(left.rstrip(".").capitalize())
    b = _BARE_DATE_ABBREV.get(right.rstrip(".").capitalize())
    if a is None or b is None or (a in _MONTHS) != (b in _MONTHS):
        return None
    return a + " to " + b


def _possessive_ipa(ipa: str) -> str:
    """The 's ending after a word ending in ``ipa``: /ɪz/ after a sibilant, /s/ after another
    voiceless consonant, else /z/."""
    tail = ipa.rstrip("ˈˌː ")
    if tail.endswith(("s", "z", "ʃ", "ʒ", "tʃ", "dʒ")):
        return "ɪz"
    return "s" if tail.endswith(("p", "t", "k", "f", "θ")) else "z"


def normalize_text(text: str, *, lexicon: Lexicon | None = None) -> str:
    """The whole text as espeak should say it: ``" ".join(s.spoken for s in segment(text))``.

    Raises
    ------
    ParameterError
        As :func:`~wavern.conditioning.frontend.sentences.segment`.
    """
    from .sentences import segment  # sentences imports this module

    return " ".join(s.spoken for s in segment(text, lexicon=lexicon))
