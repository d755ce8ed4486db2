"""SSML: the W3C Speech Synthesis Markup Language, read into pieces of plain text.

A document is a ``<speak>`` element. What wavern does with each element:

================  ==========================================================================
``break``         silence: ``time="500ms"`` / ``"1.5s"`` (at most 60 s), or ``strength``
                  (none, x-weak, weak, medium, strong, x-strong); bare: medium
``p``, ``s``      a paragraph or sentence: it ends the sentence (a paragraph pauses longer)
``prosody``       ``rate`` (x-slow .. x-fast, ``150%``, ``+20%``, a number), ``pitch`` and
                  ``range`` (x-low .. x-high, ``+10%``, ``-2st``, ``+5`` in espeak's units),
                  ``volume`` (silent, x-soft .. x-loud, ``+6dB``, ``50%``); nested ones compose
``emphasis``      ``level`` strong / moderate (default) / reduced / none: a little slower and
                  livelier, or faster and flatter
``say-as``        ``interpret-as`` characters / spell-out / verbatim (letter by letter),
                  digits / telephone (digit by digit), ordinal (``3`` -> third); others read as
                  the text would be
``sub``           ``alias`` is read instead of the content
``phoneme``       ``alphabet="ipa"`` ``ph="..."``: the content is said with these phonemes
``voice``         ``name``: one of the voice's speakers for the content
``audio``         its fallback content is read (no audio is played)
``mark``, ``lang``, others   ignored, their text read (logged once)
``meta``, ``metadata``, ``desc``, ``lexicon``   skipped with their content
================  ==========================================================================

:func:`parse_ssml` cuts the document into :class:`SsmlPiece` s wherever a setting changes or a
break falls. Each piece's plain text goes through the ordinary front end (``segment``), and
every one of its characters remembers where it came from in the document
(:meth:`SsmlPiece.source_span`), so a caller highlighting the words heard highlights them in the
markup. A piece that ends inside a sentence (the next has other settings) is followed by no
pause; the ordinary front end still gives it a sentence's ending.

Refused with :class:`ParameterError` (naming line and column): markup that is not well-formed
XML, a root other than ``<speak>``, a document type or entity declaration (no entity expansion,
so no "billion laughs"), an attribute value wavern cannot read, and a document with nothing to say.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re

import numpy as np

from wavern.conditioning.config import PROSODY_LIMITS
from wavern.errors import ParameterError

from .lexicon import Lexicon
from .sentences import Sentence, segment

__all__ = ["SsmlPiece", "SsmlDocument", "parse_ssml", "looks_like_ssml", "BREAK_STRENGTHS", "MAX_BREAK_S"]

log = logging.getLogger(__name__)

MAX_BREAK_S = 60.0
"""Longest accepted ``<break time>``, seconds."""

MAX_GAIN = 4.0
"""The loudest a piece gets, as a factor on the request's volume (a request's own volume runs to 4)."""

BREAK_STRENGTHS = {"none": 0.0, "x-weak": 0.1, "weak": 0.25, "medium": 0.4, "strong": 0.7, "x-strong": 1.2}
"""Seconds of silence per ``<break strength>``."""

PARAGRAPH_PAUSE_S = 0.6
"""Silence after a ``</p>`` (at least; more where the request's sentence pause is longer)."""

RATES = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "default": 1.0, "fast": 1.35, "x-fast": 1.75}
PITCHES = {"x-low": 30.0, "low": 40.0, "medium": 50.0, "default": 50.0, "high": 60.0, "x-high": 70.0}
RANGES = {"x-low": 20.0, "low": 35.0, "medium": 50.0, "default": 50.0, "high": 70.0, "x-high": 90.0}
VOLUMES = {"silent": 0.0, "x-soft": 0.25, "soft": 0.5, "medium": 1.0, "default": 1.0, "loud": 1.41, "x-loud": 2.0}
EMPHASIS = {"strong": (0.85, 20.0), "moderate": (0.92, 10.0), "reduced": (1.08, -10.0), "none": (1.0, 0.0)}
"""``<emphasis level>`` -> (rate factor, pitch-range change in espeak units)."""

#: espeak-ng's pitch unit as a frequency ratio: the default voice's median f0 went 82 -> 99.5 ->
#: 121 Hz for pitch 30 -> 50 -> 70 (docs/bench/pitch_control.md), about 0.98 % a unit.
PITCH_UNIT_RATIO = 1.0098

_SKIPPED = frozenset({"meta", "metadata", "desc", "lexicon"})
_KNOWN = frozenset({"speak", "break", "p", "s", "paragraph", "sentence", "prosody", "emphasis", "say-as", "sub",
                    "phoneme", "voice", "audio", "mark", "lang", "token", "w"}) | _SKIPPED
_SENTENCE_END = re.compile(r"[.!?\u2026\u3002]['\")\]\u2019\u201d]*\s*$")
_WORD_REST = re.compile(r"\S*")
_PLACEHOLDER = "ssmlphoneme"


@dataclasses.dataclass(frozen=True)
class SsmlPiece:
    """A run of the document's text spoken with one set of settings.

    Attributes:
        text: the plain text, as the front end reads it.
        sentences: ``segment(text)`` (spans in ``text``; :meth:`source_span` maps them).
        starts, ends: (len(text),) the document's character span each character of ``text`` came
            from (a ``say-as`` or ``sub`` element's characters all map to the whole element).
        speed, volume: factors on the request's speed and volume.
        pitch, pitch_range: in espeak's units (None: the request's own).
        speaker: one of the voice's speakers (None: the request's).
        lexicon: the request's lexicon with this piece's ``<phoneme>`` entries (None: the request's).
        pause: what follows the piece: "none" (the next piece goes on the sentence), "sentence"
            (the request's sentence pause) or "paragraph" (that, at least :data:`PARAGRAPH_PAUSE_S`).
        break_s: the ``<break>`` silence after the piece, which replaces ``pause`` (None: no break).
    """

    text: str
    sentences: tuple[Sentence, ...]
    starts: np.ndarray
    ends: np.ndarray
    speed: float = 1.0
    volume: float = 1.0
    pitch: float | None = None
    pitch_range: float | None = None
    speaker: str | None = None
    lexicon: Lexicon | None = None
    pause: str = "sentence"
    break_s: float | None = None

    def silence_after(self, sentence_pause_s: float) -> float:
        """Seconds of silence after this piece, given the request's sentence pause."""
        if self.break_s is not None:
            return self.break_s
        return {"none": 0.0, "sentence": sentence_pause_s,
                "paragraph": max(sentence_pause_s, PARAGRAPH_PAUSE_S)}[self.pause]

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """The document's span of ``text[start:end]``."""
        n = len(self.text)
        if n == 0:
            return 0, 0
        a = int(self.starts[min(max(start, 0), n - 1)])
        if end <= start:
            return a, a
        return a, int(self.ends[min(end, n) - 1])


@dataclasses.dataclass(frozen=True)
class SsmlDocument:
    """The pieces of a document, in order, and the silence before the first (a leading ``<break>``)."""

    pieces: tuple[SsmlPiece, ...]
    lead_s: float = 0.0

    def sentences(self) -> list[Sentence]:
        """Every piece's sentences in order, for display (a preview of what will be said): a
        ``<phoneme>`` word's spoken form is its IPA between slashes; spans are the piece's text's."""
        out = []
        for p in self.pieces:
            ipa = {}
            if p.lexicon is not None:
                ipa = {w: f"/{p.lexicon.lookup(w).phonemes}/" for w in p.lexicon if w.startswith(_PLACEHOLDER)}
            for s in p.sentences:
                spoken = re.sub(rf"\b{_PLACEHOLDER}[a-z]+\b", lambda m: ipa.get(m.group(0), m.group(0)), s.spoken)
                out.append(dataclasses.replace(s, spoken=spoken))
        return out


def looks_like_ssml(text: str) -> bool:
    """Whether ``text`` is meant as SSML: its first markup is an XML declaration or ``<speak``."""
    head = text.lstrip("\ufeff \t\r\n")[:64]
    return bool(re.match(r"<\?xml\s|<(?:[\w.-]+:)?speak(?:[\s>/]|$)", head))


# --------------------------------------------------------------------------- attribute values

def _number(value: str, what: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise ParameterError(f"{what}: {value!r} is not a number") from None
    if not math.isfinite(x):
        raise ParameterError(f"{what}: {value!r} is not a finite number")
    return x


def parse_time(value: str, what: str = "break time") -> float:
    """``"500ms"``, ``"1.5s"`` (or a bare number of seconds) -> seconds in [0, :data:`MAX_BREAK_S`]."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s)?\s*", value.lower())
    if m is None:
        raise ParameterError(f"{what}: {value!r} is not a time such as '500ms' or '1.5s'")
    s = float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)
    if s > MAX_BREAK_S:
        raise ParameterError(f"{what}: {value!r} is longer than {MAX_BREAK_S:g} s")
    return s


def _relative(value: str) -> tuple[str, float, str] | None:
    """``"+20%"`` -> ('+', 20.0, '%'); ``"-2st"`` -> ('-', 2.0, 'st'); ``"1.5"`` -> ('', 1.5, '')."""
    m = re.fullmatch(r"\s*([+-]?)([0-9]*\.?[0-9]+)\s*(%|st|hz|db)?\s*", value.lower())
    return None if m is None else (m.group(1), float(m.group(2)), m.group(3) or "")


def rate_factor(value: str) -> float:
    """``<prosody rate>`` -> factor on the speed (1 = unchanged)."""
    v = value.strip().lower()
    if v in RATES:
        return RATES[v]
    r = _relative(v)
    if r is None or r[2] not in ("%", ""):
        raise ParameterError(f"prosody rate {value!r}: use x-slow .. x-fast, a percentage ('150%', '+20%') or a number")
    sign, x, unit = r
    if unit == "%":
        f = 1.0 + x / 100.0 if sign == "+" else 1.0 - x / 100.0 if sign == "-" else x / 100.0
    else:
        f = 1.0 + x if sign == "+" else 1.0 - x if sign == "-" else x
    if f <= 0.0:
        raise ParameterError(f"prosody rate {value!r} is not a positive rate")
    return f


def pitch_value(value: str, current: float, labels: dict[str, float], what: str) -> float:
    """``<prosody pitch>`` or ``range`` -> espeak units, from ``current`` for a relative change."""
    v = value.strip().lower()
    if v in labels:
        return labels[v]
    r = _relative(v)
    if r is None or r[2] in ("db",):
        raise ParameterError(f"prosody {what} {value!r}: use x-low .. x-high, or a change such as '+10%', "
                             "'-2st' or '+5' (espeak units)")
    sign, x, unit = r
    if unit == "hz":
        raise ParameterError(f"prosody {what} {value!r}: a pitch in Hz depends on the speaker; use a label or a "
                             "relative change ('+10%', '-2st')")
    step = {"%": math.log1p(x / 100.0) / math.log(PITCH_UNIT_RATIO) if sign != "-" else
            -math.log1p(-min(x, 99.0) / 100.0) / math.log(PITCH_UNIT_RATIO),
            "st": x * math.log(2.0) / 12.0 / math.log(PITCH_UNIT_RATIO), "": x}[unit]
    if not sign:
        if unit:
            raise ParameterError(f"prosody {what} {value!r}: a percentage or semitones needs a sign ('+10%')")
        return x  # an absolute value in espeak units
    return current + step if sign == "+" else current - step


def volume_factor(value: str) -> float:
    """``<prosody volume>`` -> factor on the request's volume (at most :data:`MAX_GAIN`)."""
    v = value.strip().lower()
    if v in VOLUMES:
        return VOLUMES[v]
    r = _relative(v)
    if r is None or (r[2] not in ("db", "%") and (r[0] or r[2])):
        raise ParameterError(f"prosody volume {value!r}: use silent, x-soft .. x-loud, decibels ('+6dB'), a "
                             "percentage ('50%') or a number from 0 to 100 (100: as loud as the request)")
    sign, x, unit = r
    if unit == "db":
        f = 10.0 ** (min(x, 60.0) / 20.0) if sign != "-" else 10.0 ** (-min(x, 200.0) / 20.0)
    elif unit == "%":
        f = 1.0 + x / 100.0 if sign == "+" else max(0.0, 1.0 - x / 100.0) if sign == "-" else x / 100.0
    else:  # SSML 1.1's plain number: 0 (silent) .. 100 (the default, loudest)
        if x > 100.0:
            raise ParameterError(f"prosody volume {value!r}: a plain number runs from 0 to 100")
        f = x / 100.0
    return min(f, MAX_GAIN)


def _say_as(text: str, kind: str, fmt: str) -> str:
    kind = kind.strip().lower()
    if kind in ("characters", "spell-out", "verbatim", "letters"):
        return " ".join(c.upper() if c.isalpha() else c for c in text if not c.isspace())
    if kind in ("digits", "telephone", "phone"):
        return " ".join(c for c in text if not c.isspace() and c not in "-().")
    if kind == "ordinal" or (kind in ("cardinal", "number") and fmt == "ordinal"):
        t = text.strip()
        if t.isdigit():
            n = int(t)
            suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
            return t + suffix
    return text


# --------------------------------------------------------------------------- the parse

@dataclasses.dataclass(frozen=True)
class _Style:
    speed: float
    volume: float
    pitch: float | None
    pitch_range: float | None
    speaker: str | None
    skip: bool = False


_PAUSES = ("none", "sentence", "paragraph")


class _Builder:
    """Collects the document's text, fragment by fragment, into pieces."""

    def __init__(self, base_pitch: float, base_range: float):
        self.base_pitch, self.base_range = base_pitch, base_range
        self.pieces: list[dict] = []
        self.lead_s = 0.0
        self.after_end = False  # the text now coming follows an end tag (not a start tag)
        self._new(None)

    def _new(self, style: _Style | None) -> None:
        self.text: list[str] = []
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.style = style
        self.phonemes: dict[str, str] = {}

    def has_text(self) -> bool:
        return any(not c.isspace() for t in self.text for c in t)

    def add(self, text: str, starts: list[int], ends: list[int], style: _Style) -> None:
        if style != self.style and self.has_text():
            # text right after an element, with no space between, ends the element's word or sentence
            # ("<prosody>...</prosody>.", "<emphasis>John</emphasis>'s"): it goes with what came before
            before = next((t for t in reversed(self.text) if t), " ")
            k = 0 if before[-1].isspace() or not self.after_end else len(_WORD_REST.match(text).group(0))
            if k:
                self.text.append(text[:k])
                self.starts += starts[:k]
                self.ends += ends[:k]
                text, starts, ends = text[k:], starts[k:], ends[k:]
            self.close()
        self.style = style
        self.text.append(text)
        self.starts += starts
        self.ends += ends

    def close(self, pause: str | None = None) -> None:
        """End the piece being collected, followed by ``pause`` (one of :data:`_PAUSES`; None: a
        sentence's where its text ends one, else none). With no text in it, a pause given raises
        the previous piece's."""
        if not self.has_text():
            if pause is not None and self.pieces:
                prev = self.pieces[-1]
                prev["pause"] = max(prev["pause"], pause, key=_PAUSES.index)
            self._new(self.style)
            return
        text = "".join(self.text)
        if pause is None:
            pause = "sentence" if _SENTENCE_END.search(text) else "none"
        self.pieces.append({"text": text, "starts": self.starts, "ends": self.ends, "style": self.style,
                            "phonemes": self.phonemes, "pause": pause, "break_s": None})
        self._new(self.style)

    def pause_for(self, seconds: float) -> None:
        """A ``<break>``: the piece so far ends, and exactly this much silence follows it (breaks in
        a row add up; before any text, silence before the first piece)."""
        self.close()
        if self.pieces:
            prev = self.pieces[-1]
            prev["break_s"] = (prev["break_s"] or 0.0) + seconds
        else:
            self.lead_s += seconds

    def placeholder(self, ipa: str) -> str:
        """A made-up word said with ``ipa``, for this piece only."""
        n = len(self.phonemes)
        letters = ""
        while True:
            n, r = divmod(n, 26)
            letters = chr(ord("a") + r) + letters
            if n == 0:
                break
        word = _PLACEHOLDER + letters
        self.phonemes[word] = ipa
        return word


def parse_ssml(source: str, *, lexicon: Lexicon | None = None, pitch: float = 50.0, pitch_range: float = 50.0,
               max_chars: int = 1_000_000,
               pitch_limits: tuple[tuple[float, float], tuple[float, float]] = PROSODY_LIMITS[1:]) -> SsmlDocument:
    """Read an SSML document into :class:`SsmlPiece` s (module docstring).

    Args:
        source: the document (a ``<speak>`` element, an XML declaration before it allowed).
        lexicon: the request's pronunciations (each piece's text is segmented with it).
        pitch, pitch_range: the request's own, in espeak units, from which relative changes count.
        max_chars: longest accepted document.
        pitch_limits: what ``pitch`` and ``range`` are clipped to (the acoustic model's training range).

    Raises:
        ParameterError: see the module docstring.
    """
    from xml.parsers import expat  # here, not at import: plain text is checked with looks_like_ssml alone

    if not isinstance(source, str):
        raise ParameterError(f"SSML must be a str, found {type(source).__name__}")
    if len(source) > max_chars:
        raise ParameterError(f"SSML document is {len(source):,} characters long; the limit is {max_chars:,}")
    lead = len(source) - len(source.lstrip("\ufeff \t\r\n"))  # (an XML declaration must come first)
    data = source[lead:].encode("utf-8", "surrogatepass")
    # character index of each byte offset (expat reports byte offsets into the UTF-8)
    widths = np.fromiter((len(c.encode("utf-8", "surrogatepass")) for c in source[lead:]), np.int64,
                         len(source) - lead)
    byte_of_char = np.concatenate([[0], np.cumsum(widths)])

    def char_at(b: int) -> int:
        return int(np.searchsorted(byte_of_char, b, side="right") - 1)

    parser = expat.ParserCreate(encoding="UTF-8")  # the text is already decoded: a declared encoding is moot
    b = _Builder(pitch, pitch_range)
    base = _Style(1.0, 1.0, None, None, None)
    stack: list[tuple[str, _Style, int]] = []  # element name, its style, where its start tag began (char)
    capture: list[dict] = []  # an open say-as / sub / phoneme element: its collected text and settings
    seen_root = [False]
    warned: set[str] = set()
    pending: list[tuple[str, int]] = []  # character data not yet placed: (text, byte offset)

    def where() -> str:
        return f"line {parser.CurrentLineNumber}, column {parser.CurrentColumnNumber + 1}"

    def fail(message: str) -> None:
        raise ParameterError(f"SSML {where()}: {message}")

    def flush(end_byte: int) -> None:
        """Place the character data collected before ``end_byte`` (the next event's start)."""
        placing, pending[:] = pending[:], []
        for k, (text, start_byte) in enumerate(placing):
            stop = placing[k + 1][1] if k + 1 < len(placing) else end_byte
            a, z = char_at(start_byte) + lead, char_at(stop) + lead
            if z - a == len(text):  # plain text: character for character
                starts = list(range(a, z))
                ends = list(range(a + 1, z + 1))
            else:  # an entity or a character reference: all its characters map to it
                starts, ends = [a] * len(text), [z] * len(text)
            style = stack[-1][1] if stack else base
            if style.skip:
                continue
            if capture:
                capture[-1]["text"].append(text)
                continue
            text = "".join(" " if c.isspace() else c for c in text)  # XML whitespace: no line-break pauses
            b.add(text, starts, ends, style)

    def element_end() -> int:
        """The character just past the end tag expat is reporting."""
        i = parser.CurrentByteIndex
        if data[i:i + 2] == b"</":
            i = data.index(b">", i) + 1
        # else an empty element <x/>: expat reports its end just past it
        return char_at(i) + lead

    def start(name: str, attrs: dict[str, str]) -> None:
        flush(parser.CurrentByteIndex)
        b.after_end = False
        tag = name.rsplit(":", 1)[-1]
        here = char_at(parser.CurrentByteIndex) + lead
        if not seen_root[0]:
            if tag != "speak":
                fail(f"the root element must be <speak>, found <{name}>")
            seen_root[0] = True
        style = stack[-1][1] if stack else base
        if capture and tag != "mark":
            fail(f"<{tag}> inside <{capture[-1]['tag']}>: that element holds plain text only"
                 + (" (put the break after it)" if tag == "break" else ""))
        if tag not in _KNOWN and tag not in warned:
            warned.add(tag)
            log.warning("SSML: <%s> is not supported; its text is read as it is", tag)
        if tag in _SKIPPED:
            style = dataclasses.replace(style, skip=True)
        elif tag == "break":
            if "time" in attrs:
                try:
                    seconds = parse_time(attrs["time"])
                except ParameterError as e:
                    fail(str(e))
            else:
                strength = attrs.get("strength", "medium").strip().lower()
                if strength not in BREAK_STRENGTHS:
                    fail(f"break strength {attrs['strength']!r}: use one of {', '.join(BREAK_STRENGTHS)}")
                seconds = BREAK_STRENGTHS[strength]
            if not style.skip:
                b.pause_for(seconds)
        elif tag in ("p", "s", "paragraph", "sentence"):
            b.close("sentence")  # what came before ends a sentence, full stop or not
        elif tag == "prosody":
            speed, volume = style.speed, style.volume
            p = style.pitch if style.pitch is not None else b.base_pitch
            r = style.pitch_range if style.pitch_range is not None else b.base_range
            new_p = new_r = None
            try:
                if "rate" in attrs:
                    speed = min(max(speed * rate_factor(attrs["rate"]), 1e-3), 1e3)  # (nested ones stay finite)
                if "volume" in attrs:
                    volume = min(volume * volume_factor(attrs["volume"]), MAX_GAIN)
                if "pitch" in attrs:
                    new_p = pitch_value(attrs["pitch"], p, PITCHES, "pitch")
                if "range" in attrs:
                    new_r = pitch_value(attrs["range"], r, RANGES, "range")
            except ParameterError as e:
                fail(str(e))
            for a in set(attrs) - {"rate", "volume", "pitch", "range"}:
                if f"prosody {a}" not in warned:
                    warned.add(f"prosody {a}")
                    log.warning("SSML: <prosody %s> is not supported; ignored", a)
            style = dataclasses.replace(
                style, speed=speed, volume=volume,
                pitch=style.pitch if new_p is None else float(np.clip(new_p, *pitch_limits[0])),
                pitch_range=style.pitch_range if new_r is None else float(np.clip(new_r, *pitch_limits[1])))
        elif tag == "emphasis":
            level = attrs.get("level", "moderate").strip().lower()
            if level not in EMPHASIS:
                fail(f"emphasis level {attrs['level']!r}: use one of {', '.join(EMPHASIS)}")
            factor, more = EMPHASIS[level]
            if more:
                r = style.pitch_range if style.pitch_range is not None else b.base_range
                style = dataclasses.replace(style, speed=style.speed * factor,
                                            pitch_range=float(np.clip(r + more, *pitch_limits[1])))
        elif tag == "voice":
            speaker = attrs.get("name", "").strip()
            if speaker:
                style = dataclasses.replace(style, speaker=speaker)
            elif "voice" not in warned:  # gender, age, variant: which speaker is whose is the voice's business
                warned.add("voice")
                log.warning("SSML: <voice> without a name keeps the speaker (name one of the voice's speakers)")
        elif tag in ("say-as", "sub", "phoneme"):
            if tag == "sub" and "alias" not in attrs:
                fail("<sub> needs an alias: the text read instead of its content")
            if tag == "say-as" and "interpret-as" not in attrs:
                fail("<say-as> needs interpret-as")
            if tag == "phoneme":
                if attrs.get("alphabet", "ipa").strip().lower() != "ipa":
                    fail(f"phoneme alphabet {attrs['alphabet']!r}: only 'ipa' is supported")
                if not attrs.get("ph", "").strip():
                    fail("<phoneme> needs ph: the IPA to say")
            capture.append({"tag": tag, "attrs": attrs, "text": [], "start": here, "where": where()})
        stack.append((tag, style, here))

    def end(name: str) -> None:
        flush(parser.CurrentByteIndex)
        b.after_end = True
        tag, style, _ = stack.pop()
        if tag in ("say-as", "sub", "phoneme") and capture and capture[-1]["tag"] == tag:
            c = capture.pop()
            content = "".join(c["text"])
            a, z = c["start"], element_end()
            if tag == "sub":
                said = c["attrs"]["alias"]
            elif tag == "say-as":
                said = _say_as(content, c["attrs"]["interpret-as"], c["attrs"].get("format", ""))
            else:
                if not content.strip():
                    raise ParameterError(f"SSML {c['where']}: <phoneme> has no text to say it for")
                ipa = c["attrs"]["ph"].strip()
                word = b.placeholder(ipa)
                probe = Lexicon()
                try:
                    probe.set(word, phonemes=ipa)
                except ParameterError as e:
                    raise ParameterError(f"SSML {c['where']}: phoneme ph {ipa!r}: "
                                         f"{str(e).split(': ', 2)[-1]}") from None
                said = word
            said = " " + " ".join(said.split()) + " "
            if not style.skip:
                b.add(said, [a] * len(said), [z] * len(said), stack[-1][1] if stack else base)
        elif tag in ("p", "paragraph"):
            b.close("paragraph")
        elif tag in ("s", "sentence", "speak"):
            b.close("sentence")

    def chars(text: str) -> None:
        pending.append((text, parser.CurrentByteIndex))

    def refuse_dtd(*_args) -> None:
        fail("a document type or entity declaration is not accepted in SSML")

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    parser.StartDoctypeDeclHandler = refuse_dtd
    parser.EntityDeclHandler = refuse_dtd
    parser.ProcessingInstructionHandler = lambda *a: flush(parser.CurrentByteIndex)
    parser.CommentHandler = lambda *a: flush(parser.CurrentByteIndex)
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        raise ParameterError(f"SSML is not well-formed XML: {expat.ErrorString(e.code)} at line {e.lineno}, "
                             f"column {e.offset + 1}") from None
    if not seen_root[0]:
        raise ParameterError("SSML must be a <speak> element; found no element")
    return _finish(b, lexicon)


def _finish(b: _Builder, lexicon: Lexicon | None) -> SsmlDocument:
    """Segment each piece's text; a piece with nothing to say (punctuation, say) passes its pause
    and breaks on to the piece before it."""
    out: list[SsmlPiece] = []
    lead = b.lead_s
    for raw in b.pieces:
        lex = lexicon
        if raw["phonemes"]:
            lex = Lexicon(lexicon.to_json() if lexicon is not None else None)
            for word, ipa in raw["phonemes"].items():
                lex.set(word, phonemes=ipa)
        try:
            sentences = tuple(segment(raw["text"], lexicon=lex))
        except ParameterError:
            if out:
                prev = out[-1]
                brk = prev.break_s if raw["break_s"] is None else (prev.break_s or 0.0) + raw["break_s"]
                out[-1] = dataclasses.replace(prev, pause=max(prev.pause, raw["pause"], key=_PAUSES.index),
                                              break_s=brk)
            else:
                lead += raw["break_s"] or 0.0
            continue
        st: _Style = raw["style"]
        out.append(SsmlPiece(
            text=raw["text"], sentences=sentences, starts=np.asarray(raw["starts"], np.int64),
            ends=np.asarray(raw["ends"], np.int64), speed=st.speed, volume=st.volume, pitch=st.pitch,
            pitch_range=st.pitch_range, speaker=st.speaker, lexicon=lex if raw["phonemes"] else None,
            pause=raw["pause"], break_s=raw["break_s"]))
    if not out:
        raise ParameterError("nothing to say: the SSML document holds no speakable text")
    return SsmlDocument(tuple(out), lead)
