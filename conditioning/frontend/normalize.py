"""English text normalisation: text as a person says it, ``normalize_text("$5 on 3/4")``.

The front door of the reading rules: :func:`normalize_text` reads a whole text (through
:func:`~.sentences.segment`), :func:`read_token` one written token in its context ("March 3" ->
"March third", "Henry VIII" -> "Henry the eighth", "$5 million" -> "five million dollars"). What
they return holds only letters (any script, with their marks), apostrophes, hyphens, spaces and,
inside phone numbers and dates, commas. The parts: :mod:`.characters` (preparing text, plain
reading), :mod:`.number_words`, :mod:`.numeric` (tokens with digits), :mod:`.words` (URLs, Roman
numerals, abbreviations), :mod:`.tokens` (:func:`read_token`), :mod:`.token_tables`.

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

from .characters import prepare, read_plain
from .number_words import MAX_CARDINAL, cardinal, digits, ordinal, year
from .sentences import normalize_text
from .token_context import Context, Reading
from .tokens import read_token
from .words import is_abbreviation, is_plain_word

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
