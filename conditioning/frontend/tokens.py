"""Reading one written token in its context: :func:`read_token` (the rules are listed in
:mod:`.normalize`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .characters import prepare, read_plain
from .numeric import day_number_follows, is_article, plain_number_value, read_numeric
from .token_context import Context, Reading
from .token_tables import (
    AMPM, BARE_DATE_ABBREV, CURRENCIES, MONTHS, NAMED_TOKENS, RE_CUR_PRE, RE_NUMBER, RE_TIME, SCALE_WORDS,
    TITLES_NO_PERIOD, UNITS,
)
from .words import is_plain_word, looks_like_url, read_abbreviation, read_roman, read_url

if TYPE_CHECKING:
    from .lexicon import Lexicon

__all__ = ["read_token"]


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
    if s in NAMED_TOKENS:
        return Reading(NAMED_TOKENS[s])
    if s in BARE_DATE_ABBREV and day_number_follows(s, ctx.next):
        return Reading(BARE_DATE_ABBREV[s])  # "Dec 25", "Jan 1st", "Sat 3rd"
    if (dates := _date_range(s)) is not None:
        return Reading(dates)  # "Mon-Fri", "Jan-Mar"
    if is_plain_word(s):
        return Reading(s)
    if ctx.line_start and s.strip("#") == "" and len(s) <= 6 and not (ctx.next or "")[:1].isdigit():
        return Reading("")  # a Markdown heading's marker ("# Title"), not "hash"
    key = s.lower()
    if key.endswith(".") or s in TITLES_NO_PERIOD:
        reading = read_abbreviation(s, key, ctx)
        if reading is not None:
            return reading
    if looks_like_url(s):
        return Reading(read_url(s))
    if any("0" <= c <= "9" for c in s):
        spoken = read_numeric(s, ctx)
        return Reading(read_plain(s) if spoken is None else spoken, may_end=s.endswith("."))
    prev_value = plain_number_value(ctx.prev)
    if re.fullmatch(AMPM, s) and (prev_value is not None or (ctx.prev and RE_TIME.fullmatch(ctx.prev))):
        return Reading("A M" if s[0] in "aA" else "P M", may_end=s.endswith("."))
    if prev_value is not None and s in UNITS:
        one, many = UNITS[s]
        single = prev_value == 1 and "." not in (ctx.prev or "") or is_article(ctx.prev2)  # "a 5 kg bag"
        return Reading(one if single else many)
    if key in SCALE_WORDS and ctx.prev is not None:
        cur = RE_CUR_PRE.fullmatch(ctx.prev)
        if cur is not None and cur["scale"] is None:
            return Reading(key + " " + CURRENCIES[cur["cur"]][1])
        if ctx.prev in CURRENCIES:
            return Reading(key + " " + CURRENCIES[ctx.prev][1])
        if ctx.prev2 in CURRENCIES and RE_NUMBER.fullmatch(ctx.prev):  # "$ 5 million"
            return Reading(key + " " + CURRENCIES[ctx.prev2][1])
    if s in CURRENCIES and ctx.next is not None and RE_NUMBER.fullmatch(ctx.next):
        return Reading("")  # "$ 5": the number reads the currency
    if s in CURRENCIES and prev_value is not None:
        return Reading("")  # "12.50 €": the number before read it
    if s in ("#", "No") and ctx.next is not None and ctx.next[:1].isdigit():
        return Reading("number")
    roman = read_roman(s, ctx) if s.isupper() else None
    if roman is not None:
        return Reading(roman)
    return Reading(read_plain(s))


def _date_range(s: str) -> str | None:
    """"Mon-Fri" or "Mon–Fri" -> "Monday to Friday", "Jan.-Mar." -> "January to March"; else None."""
    left, dash, right = s.replace("\u2013", "-").partition("-")
    if not dash:
        return None
    a = BARE_DATE_ABBREV.get(left.rstrip(".").capitalize())
    b = BARE_DATE_ABBREV.get(right.rstrip(".").capitalize())
    if a is None or b is None or (a in MONTHS) != (b in MONTHS):
        return None
    return a + " to " + b


def _possessive_ipa(ipa: str) -> str:
    """The 's ending after a word ending in ``ipa``: /ɪz/ after a sibilant, /s/ after another
    voiceless consonant, else /z/."""
    tail = ipa.rstrip("ˈˌː ")
    if tail.endswith(("s", "z", "ʃ", "ʒ", "tʃ", "dʒ")):
        return "ɪz"
    return "s" if tail.endswith(("p", "t", "k", "f", "θ")) else "z"


