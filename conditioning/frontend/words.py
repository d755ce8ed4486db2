"""Reading a token that is a word but not a plain one: URLs and e-mail addresses, Roman numerals,
abbreviations ("Dr.", "e.g.", "U.S."), and the tests the sentence splitter asks
(:func:`is_abbreviation`, :func:`is_plain_word`)."""

from __future__ import annotations

import re

from .characters import is_letter, read_plain
from .number_words import cardinal, digits, ordinal
from .numeric import plain_number_value
from .token_context import Context, Reading
from .token_tables import (
    ABBREVIATIONS, AFTER_PRONOUN_I, BARE_DATE_ABBREV, BEFORE_NUMBER, DATE_ABBREV, INLINE, MAX_REGNAL,
    MAY_END, MONTH_NAMES, NAMED_TOKENS, RE_DOMAIN, RE_DOTTED, RE_EMAIL, RE_SCHEME, REGNAL_NAMES,
    ROMAN_CARDINAL_AFTER, ROMAN_RE, ROMAN_VALUES, SCALE_WORDS, STREET, TITLES, TITLES_NO_PERIOD, TLDS,
    UNITS, URL_SEPARATORS, WORD_AFTER_NUMBER, WORD_BEFORE_NUMBER, WORD_LIKE, WORD_TITLES,
)

__all__ = ["read_url", "looks_like_url", "read_roman", "read_abbreviation", "is_abbreviation", "is_plain_word"]

# --------------------------------------------------------------------------- words

def read_url(s: str) -> str:
    """"www.example.com" -> "w w w dot example dot com"; digits are read one by one."""
    s = RE_SCHEME.sub("", s, count=1).rstrip("/")
    words: list[str] = []
    for part in re.findall(r"[^\W\d_]+|\d+|.", s):
        if part.isdigit():
            words.append(digits(part))
        elif is_letter(part[0]):
            words.append(" ".join(part) if part.lower() == "www" else part)
        elif part in URL_SEPARATORS:
            words.append(URL_SEPARATORS[part])
    return read_plain(" ".join(words))


def looks_like_url(s: str) -> bool:
    if "://" in s or s[:4].lower() == "www." or ("@" in s and RE_EMAIL.fullmatch(s)):
        return True
    m = RE_DOMAIN.fullmatch(s)
    return m is not None and m["tld"].lower() in TLDS


def _is_capitalised_word(s: str | None) -> bool:
    return s is not None and s[:1].isupper() and s.isalpha() and not s.isupper()


def read_roman(s: str, ctx: Context) -> str | None:
    if not s or ROMAN_RE.fullmatch(s) is None:
        return None
    value = 0
    for c, nxt in zip(s, s[1:] + " "):
        v = ROMAN_VALUES[c]
        value += -v if nxt != " " and ROMAN_VALUES[nxt] > v else v
    prev = ctx.prev
    if prev is None:
        return None
    if prev.lower().rstrip(".") in ROMAN_CARDINAL_AFTER:
        return cardinal(value) if len(s) > 1 or s in "IVX" else None  # "Appendix C", "Part D"
    if not _is_capitalised_word(prev) or value > MAX_REGNAL or s == "X":
        return None
    if s == "I" and (ctx.prev_is_initial or prev not in REGNAL_NAMES
                     or (ctx.next is not None and ctx.next.lower() in AFTER_PRONOUN_I)):
        return None  # the pronoun: "Yesterday I left", "John I think"
    return "the " + ordinal(value)


def read_abbreviation(s: str, key: str, ctx: Context) -> Reading | None:
    """Readings of "Dr.", "e.g.", "U.S.", "J." and their kin; None if `s` is none of them."""
    if key in ("st.", "dr.") or s in TITLES_NO_PERIOD:
        # "St. John" / "Dr. Who": a title before a name; "Main St." / "12 Elm Dr": a street
        # after one (unless a name follows a sentence's first word: "Visit St. John").
        before_name = ctx.next is not None and ctx.next[:1].isupper()
        after_name = ctx.prev is not None and (ctx.prev[:1].isupper() or ctx.prev[:1].isdigit())
        street = STREET.get(key) or STREET.get(s)
        if street and after_name and not (before_name and ctx.prev_is_initial):
            return Reading(street, may_end=True)
        if key in TITLES:
            return Reading(TITLES[key])
        if s in TITLES_NO_PERIOD and before_name:
            return Reading(TITLES_NO_PERIOD[s])
        return None
    if key in WORD_LIKE:
        return _read_word_like(s, key, ctx)
    if key in TITLES and not _is_unit_not_title(s, key):
        return Reading(TITLES[key])
    if key in BEFORE_NUMBER:  # "No. 5", "p. 7"; otherwise the word "No" or a letter
        if ctx.next is not None and ctx.next[:1].isdigit():
            return Reading(BEFORE_NUMBER[key])
        return Reading(s[:-1], may_end=True)
    if key in INLINE:
        return Reading(INLINE[key])
    if key in MAY_END:
        return Reading(MAY_END[key], may_end=True)
    if RE_DOTTED.fullmatch(s) and (s.endswith(".") or len(s) > 2):
        # letter by letter; espeak reads a lone "A" before a word as the article ("A I" -> "uh eye"),
        # "eigh" as the letter's name
        letters = ["eigh" if c in "aA" else c for c in s if c != "."]
        return Reading(" ".join(letters), may_end=s.endswith("."))
    return None


def _is_label(word: str) -> bool:
    """A number's stand-in after "Fig.", "Vol.", "Ch.": a Roman numeral ("IV", "xii") or a letter
    with digits ("S1")."""
    return (word.isalpha() and ROMAN_RE.fullmatch(word.upper()) is not None) or \
        (word[:1].isupper() and word[1:].isdigit() and len(word) > 1)


def _expands_here(s: str, key: str, following: str) -> bool:
    """Whether the word-like abbreviation ``s`` (key ``key`` in ``WORD_LIKE``, not a unit) reads
    as its expansion before the word ``following`` ("" at the end)."""
    nxt = following[:1]
    if key in WORD_TITLES:
        return s[:1].isupper() and nxt.isupper()  # "Rev. Smith", "Gen. Lee"
    if key in DATE_ABBREV:
        return s[:1].isupper() or nxt.isdigit()  # "Sat. Dec. 5", "on Mar. 3", "dec. 5"
    return key in WORD_BEFORE_NUMBER and (nxt.isdigit() or _is_label(following))  # "Fig. 3", "Vol. II"


def _read_word_like(s: str, key: str, ctx: Context) -> Reading:
    word = Reading(s[:-1], may_end=True)
    if key in WORD_AFTER_NUMBER:  # "5 min." -> minutes; "a sec." -> sec
        value = plain_number_value(ctx.prev)
        if value is None:
            return word
        one, many = UNITS[key[:-1]]
        return Reading(one if value == 1 and "." not in (ctx.prev or "") else many, may_end=True)
    if not _expands_here(s, key, ctx.following or ""):
        return word
    if key in WORD_TITLES:
        return Reading(TITLES[key])
    if key in DATE_ABBREV:
        return Reading(DATE_ABBREV[key], may_end=True)
    return Reading(WORD_BEFORE_NUMBER[key])


def _is_unit_not_title(s: str, key: str) -> bool:
    """"ms." in lower case is milliseconds ("It took 10 ms."), not the title "Ms."."""
    return key[:-1] in UNITS and not s[:1].isupper()


def is_abbreviation(s: str, following: str | None = None) -> bool:
    """Whether a token ending in "." keeps its period as part of the word ("Dr.", "U.S.",
    "e.g.", an initial "J."). Used by the sentence splitter when peeling punctuation.
    ``following``: the next word (past any brackets, quotes or line break; None or "" at the
    end), which decides for the abbreviations that are also words: "Sat. Dec. 5" but "The cat
    sat.", "Fig. 3" but "a fig."; before a lower-case word the sentence goes on ("The gov.
    agencies", "5 min. later")."""
    key = s.lower()
    if key in WORD_LIKE:
        nxt = (following or "")[:1]
        return (nxt.islower() or (key in WORD_AFTER_NUMBER and nxt.isdigit())
                or (key not in WORD_AFTER_NUMBER and _expands_here(s, key, following or "")))
    if key in ABBREVIATIONS:
        return not (key in TITLES and _is_unit_not_title(s, key))
    return len(s) >= 2 and RE_DOTTED.fullmatch(s) is not None and (len(s) > 2 or s[0].isupper())


# Lower-cased words whose reading may depend on context; every other ASCII word reads as itself.
_SPECIAL_WORDS = (frozenset(k.rstrip(".") for k in ABBREVIATIONS) | frozenset(MONTH_NAMES)
                  | frozenset(u.lower() for u in UNITS) | SCALE_WORDS
                  | frozenset(w.lower() for w in TITLES_NO_PERIOD) | {"am", "pm", "no"}
                  | frozenset(k.lower() for k in NAMED_TOKENS) | frozenset(k.lower() for k in BARE_DATE_ABBREV))


def is_plain_word(s: str) -> bool:
    """True for an ASCII word that reads as itself whatever its context ("fox", "Smith")."""
    return (s.isalpha() and s.isascii() and s.lower() not in _SPECIAL_WORDS
            and not (s.isupper() and ROMAN_RE.fullmatch(s)))

