"""Characters: :func:`prepare` gives a token its canonical form, :func:`read_plain` reads a string
with no special structure (letter runs as written, digit runs as numbers, a few symbols by name)."""

from __future__ import annotations

import functools
import unicodedata

from .number_words import cardinal, digits

__all__ = ["prepare", "read_plain", "read_digit_run", "is_letter"]

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


def read_digit_run(run: str) -> str:
    if len(run) > 1 and run[0] == "0" or len(run) > 15:
        return digits(run)
    return cardinal(int(run))


def is_letter(c: str) -> bool:
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
        if is_letter(c):
            cur.append(c)
            i += 1
            continue
        if not c.isascii() and unicodedata.category(c)[0] == "M":
            if cur:
                cur.append(c)  # a mark on a letter; orphan marks are dropped
            i += 1
            continue
        if c in "'-" and cur and i + 1 < n and is_letter(s[i + 1]):
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
            words.append(read_digit_run(s[i:j]))
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


