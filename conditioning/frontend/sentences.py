"""Split text into sentences and words, keeping exact spans in the original text.

:func:`segment` is the front end's entry point: it finds the words (the written tokens
with surrounding punctuation peeled off), reads each one with
:func:`~wavern.conditioning.frontend.tokens.read_token`, and groups them into
sentences whose ``spoken`` text is what espeak is asked to say.

Sentence boundaries (documented rules):

- after ``.``, ``?``, ``!`` (and ``。！？``), including any closing quotes or brackets
  that follow them; an ellipsis (``...``, ``…``) is a pause, not a boundary;
- not after an abbreviation that keeps its period ("Dr.", "e.g.", "vs."), nor after a
  decimal point or an initial ("J. R. R. Tolkien"); abbreviations that can also end a
  sentence ("U.S.", "etc.", "Jr.", an initial) end one when the next word is a capitalised
  common sentence opener ("The", "He", "I", ...);
- at a blank line; at a single line break when the next line starts with a bullet
  (``-``, ``*``, ``•``) or a numbered marker ("1.", "2)"), when the line ends in a colon,
  or when the line is shorter than ``SHORT_LINE_CHARS`` and the next begins with a
  capital or a digit (list items, headings), but not inside hard-wrapped prose; a line
  break between two such short lines that ends no sentence is a pause ("milk\neggs") when
  the next line's first word would have fitted on the line (the writer broke it; wrapped
  prose breaks where it would not);
- forced: a sentence longer than ``MAX_SENTENCE_WORDS`` spoken words, or than
  ``MAX_SENTENCE_CHARS`` characters of spoken text, is cut at its last comma, semicolon or
  colon that leaves at least ``MIN_SPLIT_WORDS`` words before it, or, failing that, right
  at the limit. A single written token longer than
  ``MAX_TOKEN_CHARS`` is cut into pieces of that size first, so every sentence's spoken
  text is bounded.

Dropped input: control characters (newline and tab are whitespace), lone surrogates,
private-use and unassigned code points, emoji and other pictographs (with their joiners,
variation selectors and skin-tone modifiers) and combining marks with no letter to sit
on, and letters of the scripts espeak's English voice can only name ("Chinese letter",
"Arabic mim": Han, kana, Arabic, Hebrew, Thai, ..., see ``_UNREAD_SCRIPTS``; a warning is logged).
They stay inside ``Sentence.text`` (which is an exact slice of the input) but are
never part of a word or of the spoken text. Letters of other scripts are kept (Cyrillic
transliterated to Latin by ``characters.prepare``).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
import unicodedata
from dataclasses import dataclass

from wavern.errors import ParameterError

from .lexicon import Lexicon
from .characters import prepare
from .number_words import digits
from .token_context import Context, Reading
from .tokens import read_token
from .words import is_abbreviation, is_plain_word

log = logging.getLogger(__name__)

__all__ = [
    "MAX_SENTENCE_WORDS",
    "MAX_SENTENCE_CHARS",
    "MIN_SPLIT_WORDS",
    "MAX_TOKEN_CHARS",
    "SHORT_LINE_CHARS",
    "Word",
    "Sentence",
    "segment",
    "normalize_text",
]

MAX_SENTENCE_WORDS = 40
"""Most spoken words in one sentence before it is cut (a long sentence read aloud runs
15-25 words; 40 leaves room while keeping encoder inputs short)."""
MAX_SENTENCE_CHARS = 1000
"""Most characters of spoken text in one sentence before it is cut, whatever its word count:
40 words of long gibberish (100 x's each) made 4930 phoneme tokens, over the acoustic model's
4096 (``max_infer_tokens``); 40 words of speech run ~250."""
MIN_SPLIT_WORDS = 10
"""A forced cut at a comma leaves at least this many words before it."""
MAX_TOKEN_CHARS = 100
"""A run of non-space text longer than this is cut into pieces (a URL fits; a pasted
hash or a wall of digits does not)."""
SHORT_LINE_CHARS = 50
"""A line shorter than this, followed by a line break and a capital, ends a sentence."""


@dataclass(frozen=True)
class Word:
    """One written token and how it is said.

    Attributes
    ----------
    text:
        As written: ``text == original[start:end]``.
    start, end:
        Character span in the original text.
    spoken:
        Normalised spoken form ("$12.50" -> "twelve dollars and fifty cents").
    spoken_start, spoken_end:
        Span of `spoken` inside ``Sentence.spoken``.
    phonemes:
        IPA override from the lexicon, else None.
    """

    text: str
    start: int
    end: int
    spoken: str
    spoken_start: int
    spoken_end: int
    phonemes: str | None = None


@dataclass(frozen=True)
class Sentence:
    """One sentence: its span in the original text, its words and its spoken text.

    Attributes
    ----------
    text:
        ``original[start:end]``, from its first to its last non-space character
        (opening quotes, closing quotes and final punctuation included).
    start, end:
        Character span in the original text.
    words:
        The words, in order, each with spans in the original and in `spoken`.
    spoken:
        The spoken words joined by single spaces, with pauses kept as ``, ; :`` after
        the word they follow, ending in ``.``, ``?`` or ``!`` (a forced cut ends in the
        comma it was cut at, or in nothing).
    """

    text: str
    start: int
    end: int
    words: tuple[Word, ...]
    spoken: str


# --------------------------------------------------------------------------- characters

_LEAD = frozenset("\"'\u201c\u201d\u2018\u2019\u00ab\u00bb\u2039\u203a\u201e\u201a([{\u00a1\u00bf*_"
                  "\uff08\u300c\u300e\u3010\u3008\u300a\uff3b\uff5b")
_TRAIL = frozenset("\"'\u201c\u201d\u2018\u2019\u00ab\u00bb\u2039\u203a)]}.,;:!?\u2026*_"
                   "\u3002\uff01\uff1f\uff0c\u3001\uff1b\uff1a\uff09\u300d\u300f\u3011\u3009\u300b"
                   "\uff0e\uff3d\uff5d")
_DASHES = frozenset("-\u2010\u2011\u2012\u2013\u2014\u2015\u2212")
_CLOSERS = frozenset("\"'\u201d\u2019\u00bb\u203a)]}\uff09\u300d\u300f\u3011\u3009\u300b\uff3d\uff5d")
_BULLETS = frozenset("-*\u2022\u2023\u25e6\u00b7\u2043\u25aa\u25ab\u25b8\u25ba\u2013\u2014+")
_FOLLOWING_RE = re.compile(r"[\s" + re.escape("".join(sorted(_LEAD))) + r"]*(\w[\w']*)")
_KEEP_SYMBOLS = frozenset("\u00b0\u00a9\u00a7\u00b6\u00ae")  # the symbols read_plain names

# Breaks inside a run of non-space text: dashes, ellipses, commas and semicolons not
# between digits, and full stops of scripts that write no spaces.
_INNER_BREAK_RE = re.compile(
    r"[\u2014\u2015]+|-{2,}|\u2026+|\.{3,}|(?<![0-9])\u2013|\u2013(?![0-9])"
    r"|(?<![0-9]),|,(?![0-9])|;|[\u3002\uff01\uff1f\u3001\uff1b]")
# ... but not the en dash of a range of days or months, "Mon–Fri", "Jan.–Mar." (read as "Monday to
# Friday" like "Mon-Fri"; tokens._date_range)
_ABBREV = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun|Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\.?"
_ABBREV_RANGE_RE = re.compile(rf"[(\[\"'\u2018\u201c]*{_ABBREV}\u2013{_ABBREV}[.,;:!?)\]\"'\u2019\u201d]*")
_GAP_RE = re.compile(
    r"(?P<ell>\.{2,}|\u2026+)|(?P<stop>[.\u3002\uff0e])|(?P<q>[?\uff1f])|(?P<ex>[!\uff01])"
    r"|(?P<comma>[,\uff0c\u3001()\[\]{}\uff08\uff09\u2014\u2015\u2013]|-+)|(?P<semi>[;\uff1b])"
    r"|(?P<colon>[:\uff1a])|(?P<br>\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029])")
# "He left.She stayed.": a full stop with no space after it, between a lower-case word and a
# capitalised one, ends a sentence (not in "Mrs.Smith", "e.g.The" or a URL or address).
_JOINED_STOP_RE = re.compile(
    r"(?<![\w.@/:'-])(?P<w>[a-z][a-z']*[a-z])\.(?=[A-Z][a-z]*(?:'[a-z]+)?(?![\w@/:-]|\.\w))")
_QUOTE_CLOSERS = frozenset("\"'\u201d\u2019\u00bb\u203a")
_AMPM_END_RE = re.compile(r"[aApP]\.[mM]$")
_LIST_MARKER_RE = re.compile(r"\d{1,2}|[A-Za-z]")
_AREA_CODE_RE = re.compile(r"\d{3}")
_LOCAL_NUMBER_RE = re.compile(r"\d{3}-\d{4}")
_COUNTRY_CODE_RE = re.compile(r"\+\d{1,3}")
_PHONE_GROUP_RE = re.compile(r"\d{2,4}")

_STARTERS = frozenset(
    "the a an he she it we they i you this that these those there here but and so then in on "
    "at after before when if as his her its our their my your what why how who where however "
    "meanwhile also yet some many most all no not now today later finally first still while "
    "since because although though once everyone everybody someone somebody nobody nothing everything "
    "each every both another such let please thanks yes maybe perhaps next soon tomorrow yesterday "
    "tonight afterwards instead otherwise indeed unfortunately luckily sadly".split())

# Words a line of prose does not end on unless it was wrapped there
_LEANS_ON_NEXT = frozenset(
    "a an the to of and or but in on at for with by from into onto that which who is are was were be been "
    "because if as than so not no my your his her its our their this these those".split())

_IGNORE, _KEEP, _ATTACH = 0, 1, 2


# Scripts whose letters espeak's English voice reads as "Chinese letter", "Arabic mim", "Thai
# letter e two a": dropped (with a warning) rather than spelled as noise. Cyrillic is
# transliterated (characters.prepare); Greek letters keep their names ("pi", "alpha").
_UNREAD_SCRIPTS = ("CJK ", "HIRAGANA", "KATAKANA", "HALFWIDTH KATAKANA", "BOPOMOFO", "ARABIC", "HEBREW", "THAI",
                   "SYRIAC", "THAANA", "NKO", "YI ")


@functools.lru_cache(maxsize=65536)
def _is_unread_letter(c: str) -> bool:
    return unicodedata.category(c)[0] == "L" and unicodedata.name(c, "").startswith(_UNREAD_SCRIPTS)


@functools.lru_cache(maxsize=65536)
def _char_kind(c: str) -> int:
    """_IGNORE: dropped and splits words; _ATTACH: combining mark or format character,
    dropped when it follows a dropped character; _KEEP: everything else."""
    cat = unicodedata.category(c)
    if cat in ("Cc", "Cs", "Co", "Cn") or c == "\u200b" or _is_unread_letter(c):  # a zero-width space parts words
        return _IGNORE
    if cat[0] == "M" or cat == "Cf":
        return _ATTACH
    if cat in ("So", "Sk") and c not in _KEEP_SYMBOLS and not c.isascii():
        folded = unicodedata.normalize("NFKC", c)
        return _KEEP if folded != c and any(x.isalnum() for x in folded) else _IGNORE
    return _KEEP


def _keep_spans(text: str, a: int, b: int) -> list[tuple[int, int]]:
    """Sub-spans of text[a:b] (no whitespace) with dropped characters cut out."""
    chunk = text[a:b]
    if chunk.isascii() and chunk.isprintable():
        return [(a, b)]
    spans = []
    start = None
    dropping = True  # an orphan mark at the start of the chunk is dropped too
    for i in range(a, b):
        kind = _char_kind(text[i])
        if kind == _IGNORE or (kind == _ATTACH and dropping):
            if start is not None:
                spans.append((start, i))
                start = None
            dropping = True
        else:
            if start is None:
                start = i
            dropping = False
    if start is not None:
        spans.append((start, b))
    return spans


def _pieces(text: str, a: int, b: int) -> list[tuple[int, int]]:
    """Split a whitespace-free run into pieces at dropped characters, inner breaks and
    ``MAX_TOKEN_CHARS``."""
    out = []
    for s, e in _keep_spans(text, a, b):
        pos = s
        for m in _INNER_BREAK_RE.finditer(text, s, e):
            if m.group() == "\u2013" and _ABBREV_RANGE_RE.fullmatch(text, s, e):
                continue
            if m.start() > pos:
                out.append((pos, m.start()))
            pos = m.end()
        if e > pos:
            out.append((pos, e))
    out = [p for s, e in out for p in _split_joined_stops(text, s, e)]
    if any(e - s > MAX_TOKEN_CHARS for s, e in out):
        out = [(p, min(p + MAX_TOKEN_CHARS, e)) for s, e in out for p in range(s, e, MAX_TOKEN_CHARS)]
    return out


def _following_word(text: str, pos: int) -> str:
    """The word after ``pos``, past white space and opening brackets or quotes ("" if none): what
    the next token's core will be, for :func:`is_abbreviation` ("Rev.\nSmith", "Fig. (3)")."""
    m = _FOLLOWING_RE.match(text, pos, min(len(text), pos + 256))
    return m.group(1) if m else ""


def _split_joined_stops(text: str, a: int, b: int) -> list[tuple[int, int]]:
    """text[a:b] cut at each full stop that ends a sentence with no space after it."""
    piece = text[a:b]
    if "." not in piece or "://" in piece or "@" in piece or piece[:4].lower() == "www.":
        return [(a, b)]
    out, pos = [], a
    for m in _JOINED_STOP_RE.finditer(piece):
        if not is_abbreviation(m["w"] + ".", _following_word(text, a + m.end())):
            dot = a + m.end("w")
            out.append((pos, dot + 1))  # the stop stays with the word, as "left." would
            pos = dot + 1
    out.append((pos, b))
    return out


def _peel(text: str, a: int, b: int) -> tuple[int, int]:
    """The core of text[a:b] without leading/trailing punctuation, an abbreviation's own
    period kept ("Dr." stays "Dr.", "end." becomes "end")."""
    end = b
    while a < b:
        c = text[a]
        nxt = text[a + 1] if a + 1 < b else ""
        if c in _LEAD and not (c == "'" and nxt.isdigit()):
            a += 1
        elif c in _DASHES and not (nxt.isdigit() or nxt == "." or nxt in "$\u00a3\u20ac\u00a5"):
            a += 1
        else:
            break
    while b > a and (text[b - 1] in _TRAIL or text[b - 1] in _DASHES):
        b -= 1
    if a < b < end and text[b] in ".\uff0e" and text[b + 1: b + 2] not in (".", "\uff0e"):
        core = prepare(text[a:b + 1])
        if is_abbreviation(core, _following_word(text, b + 1)) or _AMPM_END_RE.search(core[:-1]):
            b += 1
    return a, b


# --------------------------------------------------------------------------- tokens and gaps

@dataclass
class _Token:
    start: int
    end: int
    norm: str  # prepared text of the core
    chunk_end: int  # end of the run of non-space text the core came from
    reading: Reading = Reading("")
    spoken: str = ""  # reading.spoken, cleaned
    list_marker: bool = False


@dataclass(frozen=True)
class _Gap:
    breaks: int = 0
    end_mark: str | None = None  # "." "?" "!"
    end_pos: int = -1  # absolute index just after the last end mark
    pause: str | None = None  # "," ";" ":"
    bullet: bool = False

    @property
    def joined(self) -> bool:
        return self.breaks == 0 and self.end_mark is None and self.pause is None


_SPACE_GAP = _Gap()
_PAUSE_RANK = {None: 0, ",": 1, ":": 2, ";": 3}


def _gap(text: str, a: int, b: int) -> _Gap:
    """Describe text[a:b], the stretch between two words."""
    if b - a == 1 and text[a] == " ":
        return _SPACE_GAP
    breaks = 0
    end_mark = None
    end_pos = -1
    pause = None
    last_break = -1
    for m in _GAP_RE.finditer(text, a, b):
        kind = m.lastgroup
        if kind == "br":
            breaks += 1
            last_break = m.end()
        elif kind in ("stop", "q", "ex"):
            mark = {"stop": ".", "q": "?", "ex": "!"}[kind]
            if end_mark is None or mark == "?" or (mark == "!" and end_mark == "."):
                end_mark = mark
            end_pos = m.end()
        else:
            mark = {"ell": ",", "comma": ",", "semi": ";", "colon": ":"}[kind]
            if _PAUSE_RANK[mark] > _PAUSE_RANK[pause]:
                pause = mark
    bullet = False
    if last_break >= 0:
        rest = text[last_break:b].lstrip()
        bullet = bool(rest) and rest[0] in _BULLETS
    return _Gap(breaks, end_mark, end_pos, pause, bullet)


_CHUNK_RE = re.compile(r"\S+")


# An operator standing alone between two numbers: "5 - 3 = 2", "10 / 2", "3 * 4". A hyphen or
# dash is "minus" on a line with an "=" and a range otherwise ("pages 5 - 10"); a slash is
# "divided by" on such a line and "over" otherwise ("8 / 10").
_OPERATOR_WORDS = {"-": ("minus", "to"), "\u2013": ("minus", "to"), "\u2212": ("minus", "minus"),
                   "/": ("divided by", "over"), "*": ("times", "times")}
# the token before is a number ("5", "$5", "1,000", "2.5"; a percent or degrees sign after it allowed)
_RE_WHOLE_NUMBER = re.compile(r"[-+]?[$\u00a3\u20ac\u00a5]?(?:\d[\d,]*)?\.?\d+")
_NUMBER_NEXT_RE = re.compile(r"[ \t]+[-+\u2212]?[$\u00a3\u20ac\u00a5]?\.?\d")


def _operator_word(text: str, m: re.Match, tokens: list[_Token], equations: dict[int, bool]) -> str | None:
    """The word for the chunk ``m`` when it is an operator between two numbers, else None."""
    words = _OPERATOR_WORDS.get(m.group())
    if words is None or not tokens:
        return None
    prev = tokens[-1]
    if (prev.end != prev.chunk_end or not _RE_WHOLE_NUMBER.fullmatch(prev.norm.rstrip("%\u00b0"))
            or text[prev.end:m.start()].strip(" \t") or not _NUMBER_NEXT_RE.match(text, m.end())):
        return None
    line = _line_start(text, m.start())
    if line not in equations:
        equations[line] = "=" in text[line:_line_end(text, line)]
    return words[0] if equations[line] else words[1]


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    equations: dict[int, bool] = {}  # line start -> the line has an "="
    for m in _CHUNK_RE.finditer(text):
        chunk = m.group()
        if chunk.isalpha() and chunk.isascii() and len(chunk) <= MAX_TOKEN_CHARS:  # a plain word
            tokens.append(_Token(m.start(), m.end(), chunk, m.end()))
            continue
        if len(chunk) == 1 and (word := _operator_word(text, m, tokens, equations)) is not None:
            tokens.append(_Token(m.start(), m.end(), word, m.end()))
            continue
        for s, e in _pieces(text, m.start(), m.end()):
            a, b = _peel(text, s, e)
            if a < b:
                norm = prepare(text[a:b])
                if norm:
                    tokens.append(_Token(a, b, norm, e))
    return tokens


def _line_start(text: str, pos: int) -> int:
    return max(text.rfind("\n", 0, pos), text.rfind("\r", 0, pos)) + 1


@functools.lru_cache(maxsize=65536)
def _plain_reading(word: str) -> Reading:
    return Reading(word)


def _spaced_phone_numbers(text: str, tokens: list[_Token], gaps: list[_Gap]) -> set[int]:
    """Indices of the tokens of phone numbers written in spaced groups after a country code:
    "+1 555 123 4567", "+44 20 7946 0958" (a "+" and 1-3 digits, then 2-4 groups of 2-4 digits
    separated by single spaces, 7+ digits after the code)."""
    out: set[int] = set()
    i = 0
    while i < len(tokens):
        if _COUNTRY_CODE_RE.fullmatch(text[tokens[i].start:tokens[i].end]):
            j = i
            while j + 1 < len(tokens) and j - i < 4 and gaps[j].joined and _PHONE_GROUP_RE.fullmatch(tokens[j + 1].norm):
                j += 1
            if j - i >= 2 and sum(len(tokens[k].norm) for k in range(i + 1, j + 1)) >= 7:
                out.update(range(i, j + 1))
                i = j
        i += 1
    return out


def _read_all(text: str, tokens: list[_Token], gaps: list[_Gap], lexicon: Lexicon | None) -> None:
    """Read every token in context (sets ``reading``, ``spoken`` and ``list_marker``)."""
    n = len(tokens)
    initial = [True] + [g.breaks > 0 or g.end_mark is not None for g in gaps]
    phone = _spaced_phone_numbers(text, tokens, gaps)
    for i, tok in enumerate(tokens):
        before = gaps[i - 1] if i > 0 else None
        after = gaps[i] if i < n - 1 else None
        tok.list_marker = (
            initial[i] and (before is None or before.breaks > 0)
            and _LIST_MARKER_RE.fullmatch(tok.norm) is not None
            and text[tok.end:tok.chunk_end] in (".", ")")
            and after is not None and after.breaks == 0
            and not text[tok.start - 1: tok.start].strip()
        )
        if lexicon is None and is_plain_word(tok.norm):
            tok.reading = _plain_reading(tok.norm)
            tok.spoken = tok.norm
            continue
        ctx = Context(
            prev=tokens[i - 1].norm if before is not None and before.joined else None,
            next=tokens[i + 1].norm if after is not None and after.joined else None,
            prev2=(tokens[i - 2].norm if before is not None and before.joined and i > 1
                   and gaps[i - 2].joined else None),
            is_initial=initial[i],
            prev_is_initial=i > 0 and initial[i - 1],
            following=tokens[i + 1].norm if i < n - 1 else None,
            line_start=not text[_line_start(text, tok.start):tok.start].strip(),
        )
        tok.reading = read_token(tok.norm, ctx, lexicon=lexicon)
        if (_AREA_CODE_RE.fullmatch(tok.norm) and text[tok.start - 1: tok.start] == "("
                and text[tok.end: tok.end + 1] == ")" and i < n - 1
                and _LOCAL_NUMBER_RE.fullmatch(tokens[i + 1].norm)):
            tok.reading = Reading(digits(tok.norm))  # "(555) 123-4567"
        if i in phone:  # "+1 555 123 4567": digit by digit
            tok.reading = Reading(("plus " if tok.norm[0] == "+" else "") + digits(tok.norm.lstrip("+")))
        tok.spoken = _clean(tok.reading.spoken)
        if tok.list_marker and not tok.spoken:
            tok.list_marker = False


_SAFE_RE = re.compile(r"[A-Za-z][A-Za-z'\-]*(?:,? [A-Za-z][A-Za-z'\-]*)*")


def _clean(spoken: str) -> str:
    """Keep letters (with marks), apostrophes, hyphens, commas and single spaces only."""
    if spoken.isalpha() or _SAFE_RE.fullmatch(spoken):
        return spoken
    out = []
    prev_letter = False
    for c in spoken:
        if c.isalpha():
            out.append(c)
            prev_letter = True
        elif not c.isascii() and unicodedata.category(c)[0] == "M":
            if prev_letter:
                out.append(c)
        else:
            out.append(c if c in "',-" else " ")
            prev_letter = False
    return " ".join("".join(out).split()).strip(" ,")


# --------------------------------------------------------------------------- sentences

def _is_boundary(text: str, t: _Token, u: _Token, g: _Gap) -> bool:
    if t.list_marker:
        return False
    if g.breaks >= 2 or g.end_mark is not None and not _quoted_mark_goes_on(text, u, g):
        return True
    starts_big = u.norm[:1].isupper() or u.norm[:1].isdigit()
    if g.breaks == 1:
        if g.bullet or u.list_marker or g.pause == ":" or (t.reading.may_end and starts_big):
            return True
        return starts_big and t.end - _line_start(text, t.start) < SHORT_LINE_CHARS
    return (t.reading.may_end and g.pause is None and u.norm[:1].isupper()
            and u.norm.lower() in _STARTERS)


def _line_end(text: str, pos: int) -> int:
    return min((k for k in (text.find("\n", pos), text.find("\r", pos)) if k >= 0), default=len(text))


def _line_pauses(text: str, toks: list[_Token], gaps: list[_Gap]) -> list[_Gap]:
    """A single line break between two short lines with no punctuation at it is a pause (",")
    when the writer broke the line: the next line's first word would have fitted on it (within
    the longest line of its paragraph, or 25 characters) and the line does not end in a word
    that needs the next ("the", "to", "and"). A list, a verse or an address written one item a
    line ("milk\neggs\nbread") is read with a breath between the lines rather than run together;
    prose wrapped at 40-48 columns breaks where the next word would not fit, and runs on."""
    out = gaps
    widths: dict[int, int] = {}  # paragraph start -> its longest line
    for i, g in enumerate(gaps):
        if g.breaks != 1 or g.pause is not None or g.end_mark is not None:
            continue
        t, u = toks[i], toks[i + 1]
        a0, b0 = _line_start(text, t.start), _line_start(text, u.start)
        line_a = text[a0:_line_end(text, a0)].rstrip()
        line_b = text[b0:_line_end(text, b0)].rstrip()
        if len(line_a) >= SHORT_LINE_CHARS or len(line_b) >= SHORT_LINE_CHARS:
            continue
        start = text.rfind("\n\n", 0, a0) + 2 if "\n\n" in text[:a0] else 0  # the paragraph (a blank line parts them)
        if start not in widths:
            stop = text.find("\n\n", start)
            widths[start] = max(len(x.rstrip()) for x in text[start:None if stop < 0 else stop].splitlines() or [""])
        last = line_a.rsplit(None, 1)[-1].strip("\"'()[]*_").lower() if line_a.split() else ""
        if last not in _LEANS_ON_NEXT and len(line_a) + 1 + len(line_b.split(None, 1)[0]) <= max(widths[start], 25):
            if out is gaps:
                out = list(gaps)
            out[i] = dataclasses.replace(g, pause=",")
    return out


def _quoted_mark_goes_on(text: str, u: _Token, g: _Gap) -> bool:
    """'"Stop!" she cried.': a ? or ! before a closing quote, then a lower-case word on the same
    line, ends no sentence (it is read as a pause)."""
    return (g.end_mark in ("?", "!") and g.breaks == 0 and u.norm[:1].islower()
            and any(c in _QUOTE_CLOSERS for c in text[g.end_pos:u.start]))


def _cut(text: str, t: _Token, u: _Token, g: _Gap) -> int:
    """Where the sentence ending with `t` stops: after its final mark and closing quotes."""
    pos = t.end
    while pos < u.start and not text[pos].isspace():
        pos += 1
    if g.end_mark is not None and g.end_pos > pos:
        pos = g.end_pos
        while pos < u.start and text[pos] in _CLOSERS:
            pos += 1
    return pos


def _nwords(tok: _Token) -> int:
    return tok.spoken.count(" ") + 1


def _force_splits(toks: list[_Token], gaps: list[_Gap], lo: int, hi: int) -> list[int]:
    """Indices k in (lo, hi) before which the sentence toks[lo:hi] is cut for length."""
    cuts = []
    start = lo
    count = chars = 0
    last_pause = None
    j = lo
    while j < hi:
        w = _nwords(toks[j])
        c = len(toks[j].spoken) + 1
        if (count + w > MAX_SENTENCE_WORDS or chars + c > MAX_SENTENCE_CHARS) and j > start:
            split = last_pause + 1 if last_pause is not None else j
            cuts.append(split)
            start = split
            count = chars = 0
            last_pause = None
            j = split
            continue
        count += w
        chars += c
        if j < hi - 1 and gaps[j].pause is not None and count >= MIN_SPLIT_WORDS:
            last_pause = j
        j += 1
    return cuts


def _build(text: str, toks: list[_Token], gaps: list[_Gap], lo: int, hi: int,
           start: int, end: int, final: str) -> Sentence:
    parts: list[str] = []
    words = []
    pos = 0
    for k in range(lo, hi):
        tok = toks[k]
        spoken = tok.spoken
        if k > lo:
            parts.append(" ")
            pos += 1
        words.append(Word(text[tok.start:tok.end], tok.start, tok.end, spoken, pos, pos + len(spoken),
                          tok.reading.phonemes))
        parts.append(spoken)
        pos += len(spoken)
        gap = gaps[k] if k < hi - 1 else None
        mark = final if gap is None else ("," if tok.list_marker or gap.pause is None and gap.end_mark else gap.pause)
        if mark:
            parts.append(mark)
            pos += len(mark)
    return Sentence(text[start:end], start, end, tuple(words), "".join(parts))


def _check(text: str, max_chars: int) -> None:
    if not isinstance(text, str):
        raise ParameterError(f"text must be a string, got {type(text).__name__}")
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
        raise ParameterError(f"max_chars must be a positive integer, got {max_chars!r}")
    if len(text) > max_chars:
        raise ParameterError(
            f"text is {len(text):,} characters long; the limit is {max_chars:,}: split it into pieces "
            "(a stream of each, or `wavern render` for a long document)")
    if not text.strip():
        raise ParameterError("nothing to say: the text is empty or only whitespace")


def segment(text: str, *, lexicon: Lexicon | None = None, max_chars: int = 1_000_000) -> list[Sentence]:
    """Split `text` into sentences of normalised words with spans in the original text.

    Parameters
    ----------
    text:
        Any Unicode text (lone surrogates and control characters are tolerated).
    lexicon:
        User pronunciations, consulted before every rule.
    max_chars:
        Longest accepted text, in code points.

    Returns
    -------
    list[Sentence]
        In order, non-overlapping, each with at least one word;
        ``text[s.start:s.end] == s.text`` and ``text[w.start:w.end] == w.text``.

    Raises
    ------
    ParameterError
        The text is empty, whitespace only, has nothing speakable (only punctuation,
        symbols, emoji or control characters), or is longer than `max_chars`.
    """
    _check(text, max_chars)
    unread = [c for c in text if not c.isascii() and _is_unread_letter(c)] if not text.isascii() else []
    if unread:
        log.warning("skipped %d letter(s) in scripts the English voice does not read (%s...)", len(unread),
                    "".join(unread[:8]))
    toks = _tokens(text)
    gaps = [_gap(text, toks[i].end, toks[i + 1].start) for i in range(len(toks) - 1)]
    _read_all(text, toks, gaps, lexicon)
    if not all(t.spoken for t in toks):  # silent tokens ("*", "$ " before a number) leave
        toks = [t for t in toks if t.spoken]
        gaps = [_gap(text, toks[i].end, toks[i + 1].start) for i in range(len(toks) - 1)]
    gaps = _line_pauses(text, toks, gaps)
    if not toks:
        raise ParameterError(
            "nothing to say: the text has no speakable words (only punctuation, symbols, emoji, control "
            f"characters or letters of scripts the English voice does not read in {len(text):,} characters)")
    n = len(toks)
    sentences: list[Sentence] = []
    first = len(text) - len(text.lstrip())
    last = len(text.rstrip())
    sent_lo, sent_start = 0, first
    for i in range(n):
        if i < n - 1 and not _is_boundary(text, toks[i], toks[i + 1], gaps[i]):
            continue
        if i == n - 1:
            tail = _gap(text, toks[i].end, last)
            final = tail.end_mark or "."
            cut = last
        else:
            final = gaps[i].end_mark or "."
            cut = _cut(text, toks[i], toks[i + 1], gaps[i])
        hi = i + 1
        bounds = [sent_lo, *_force_splits(toks, gaps, sent_lo, hi), hi]
        for lo, up in zip(bounds, bounds[1:]):
            if up == hi:
                end, mark = cut, final
            else:
                end, mark = _cut(text, toks[up - 1], toks[up], gaps[up - 1]), gaps[up - 1].pause
            stop = end
            while stop > toks[up - 1].end and text[stop - 1].isspace():
                stop -= 1
            sentences.append(_build(text, toks, gaps, lo, up, sent_start, stop, mark or ""))
            sent_start = end
            while sent_start < len(text) and text[sent_start].isspace():
                sent_start += 1
        sent_lo = hi
    return sentences


def normalize_text(text: str, *, lexicon: Lexicon | None = None) -> str:
    """The whole text as espeak should say it: ``" ".join(s.spoken for s in segment(text))``."""
    return " ".join(s.spoken for s in segment(text, lexicon=lexicon))
