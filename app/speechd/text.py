"""What a Speech Dispatcher message becomes before the voice reads it.

- ``SPEAK``: SSML (the server wraps plain text in ``<speak>`` and inserts ``<mark name="__spd_N"/>``
  after each sentence, for pausing and resuming); control characters become spaces; with a
  punctuation mode other than ``none``, punctuation of that level is said by name; with spelling
  on, the words are spelled. :func:`find_marks` says where each ``<mark>`` sits in the final
  document, whose character offsets the voice's word timings share.
- ``CHAR``: one character: a letter is said as a letter, a symbol by its name, a capital as
  ``cap_let_recogn`` asks.
- ``KEY``: a key name (``a``, ``shift_a``, ``control_alt_delete``, ``kp-enter``): its parts said
  as words.
- ``SOUND_ICON``: the icon's name (where the server cannot play icons itself).
"""

from __future__ import annotations

import dataclasses
import html
import re
import unicodedata

__all__ = ["Message", "clean_control", "find_marks", "char_message", "key_message", "speak_message",
           "icon_message", "symbol_name", "strip_markup", "SOME", "MOST"]

#: Punctuation said by name at each level ("all": every punctuation or symbol character).
SOME = set("#$%&*+/<=>@\\^_|~")
MOST = SOME | set("\"()[]{}:;`")

_NAMES = {
    " ": "space", "\t": "tab", "\n": "new line", "!": "exclamation mark", '"': "double quote", "#": "hash",
    "$": "dollar", "%": "percent", "&": "and", "'": "apostrophe", "(": "left paren", ")": "right paren",
    "*": "star", "+": "plus", ",": "comma", "-": "dash", ".": "dot", "/": "slash", ":": "colon",
    ";": "semicolon", "<": "less than", "=": "equals", ">": "greater than", "?": "question mark", "@": "at",
    "[": "left bracket", "\\": "backslash", "]": "right bracket", "^": "caret", "_": "underscore",
    "`": "grave", "{": "left brace", "|": "bar", "}": "right brace", "~": "tilde", "€": "euro",
    "£": "pound", "¥": "yen", "©": "copyright", "®": "registered", "°": "degree", "§": "section",
    "•": "bullet", "…": "ellipsis", "–": "en dash", "—": "em dash", "‘": "left quote", "’": "right quote",
    "“": "left double quote", "”": "right double quote", "\u00a0": "no-break space",
}

#: SSIP key names (Speech Dispatcher's manual, "Key Names") said otherwise than as written
_KEYS = {
    "kp-*": "keypad star", "kp-+": "keypad plus", "kp--": "keypad minus", "kp-.": "keypad dot",
    "kp-/": "keypad slash", "kp-enter": "keypad enter", "prior": "page up", "next": "page down",
    "num-lock": "num lock", "scroll-lock": "scroll lock", "double-quote": "double quote",
    "backspace": "backspace", "escape": "escape", "print": "print screen", "window": "windows key",
    "control": "control", "super": "super", "hyper": "hyper",
}


@dataclasses.dataclass(frozen=True)
class Message:
    """What the voice is asked to say for one message.

    text: the document (SSML where ``ssml``) or plain text.
    ssml: the text is an SSML document.
    kind: "text", "char", "key" or "icon" (the command it came in).
    click: play a short click before it (a capital letter, ``cap_let_recogn=icon``).
    pitch_up: raise the voice's pitch by this much (espeak-ng's units; a capital letter said alone).
    icon: a SOUND_ICON's name (the server plays its own sound where it can; else ``text`` is said).
    """

    text: str
    ssml: bool
    kind: str = "text"
    click: bool = False
    pitch_up: float = 0.0
    icon: str | None = None


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\ufeff]")


def clean_control(text: str) -> tuple[str, int]:
    """``text`` with its control and invisible formatting characters turned into spaces (tabs and
    line breaks stay), and how many there were."""
    out, n = _CONTROL.subn(" ", text)
    return out, n


def symbol_name(c: str) -> str:
    """The English name of a punctuation mark or symbol: the table's, else Unicode's (lower case)."""
    if c in _NAMES:
        return _NAMES[c]
    try:
        return unicodedata.name(c).lower()
    except ValueError:
        return f"character {ord(c):x}"


def _speakable_letter(c: str) -> bool:
    cat = unicodedata.category(c)
    return cat.startswith("L") or cat == "Nd"


def _said_alone(c: str) -> str:
    """One character as a word the front end reads: a letter or digit as itself, others by name."""
    return c if _speakable_letter(c) else symbol_name(c)


def char_message(c: str, *, cap_let_recogn: str = "none") -> Message:
    """A ``CHAR`` message (one character; ``space`` means a space)."""
    if c == "space":
        c = " "
    if len(c) != 1:
        return Message(_escape(c), True, "char")  # not one character after all: read as it is
    text = _said_alone(c)
    capital = c.isalpha() and c.isupper() and c.lower() != c
    if not capital:
        return Message(_escape(text), True, "char")
    if cap_let_recogn == "spell":
        return Message(_escape(f"capital {text}"), True, "char")
    if cap_let_recogn == "icon":
        return Message(_escape(text), True, "char", click=True)
    return Message(_escape(text), True, "char", pitch_up=12.0)  # espeak-ng's way: a higher pitch


def key_message(key: str) -> Message:
    """A ``KEY`` message: ``shift_kp-enter`` -> "shift keypad enter"."""
    if key in ("space", " "):
        return Message("space", True, "key")
    if len(key) == 1:  # any single character (the SSIP manual)
        return Message(_escape(_said_alone(key) if key != "_" else "underscore"), True, "key")
    words = []
    for part in key.split("_"):
        if not part:
            continue
        if part in _KEYS:
            words.append(_KEYS[part])
        elif len(part) == 1:
            words.append(_said_alone(part))
        elif re.fullmatch(r"f\d{1,2}", part):
            words.append(f"F {part[1:]}")
        elif part.startswith("kp-") and len(part) == 4:  # kp-5, kp-*: the keypad's keys
            words.append(f"keypad {_said_alone(part[3])}")
        else:
            words.append(part.replace("-", " "))
    return Message(_escape(" ".join(words) or key), True, "key")


def icon_message(name: str) -> Message:
    """A ``SOUND_ICON`` said as its name (``message-new`` -> "message new")."""
    return Message(_escape(name.replace("-", " ").replace("_", " ")), True, "icon", icon=name)


def _escape(text: str) -> str:
    return "<speak>" + html.escape(text, quote=False) + "</speak>"


# --------------------------------------------------------------------------- SPEAK

_TAG = re.compile(r"<[^>]*>")
_ENTITY = re.compile(r"&(#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")


def _map_text(doc: str, fn) -> str:
    """``doc`` with ``fn`` applied to each character of its text (outside tags; an entity counts as
    the character it stands for). ``fn(c)`` returns the markup to put in its place (escaped)."""
    out = []
    pos = 0
    for m in _TAG.finditer(doc):
        out.append(_map_chars(doc[pos:m.start()], fn))
        out.append(m.group(0))
        pos = m.end()
    out.append(_map_chars(doc[pos:], fn))
    return "".join(out)


def _map_chars(text: str, fn) -> str:
    out = []
    pos = 0
    for m in _ENTITY.finditer(text):
        out.extend(fn(c, html.escape(c, quote=False)) for c in text[pos:m.start()])
        ch = html.unescape(m.group(0))
        out.append(fn(ch, m.group(0)) if len(ch) == 1 else m.group(0))
        pos = m.end()
    out.extend(fn(c, html.escape(c, quote=False)) for c in text[pos:])
    return "".join(out)


def _punctuation(level: str):
    said = {"some": SOME, "most": MOST}.get(level)

    def fn(c: str, markup: str) -> str:
        if c.isspace() or _speakable_letter(c) or unicodedata.category(c)[0] not in "PS":
            return markup
        if said is not None and c not in said:
            return markup
        return f" {symbol_name(c)} {markup}" if c in ".,;:!?" else f" {symbol_name(c)} "

    return fn


def _spelled(c: str, markup: str) -> str:
    if c.isspace():
        return ", "  # a short pause between spelled words
    return f" {_said_alone(c)} " if _speakable_letter(c) else f" {html.escape(symbol_name(c), quote=False)} "


def speak_message(text: str, *, punctuation_mode: str = "none", spelling: bool = False) -> Message:
    """A ``SPEAK`` message (SSML as the server sends it, or plain text from another client)."""
    text, _ = clean_control(text)
    ssml = text.lstrip().startswith(("<speak", "<?xml"))
    doc = text if ssml else _escape(text)
    if spelling:
        doc = _map_text(doc, _spelled)
    elif punctuation_mode != "none":
        doc = _map_text(doc, _punctuation(punctuation_mode))
    return Message(doc, True, "text")


_MARK = re.compile(r"<mark\s+name\s*=\s*(?:\"([^\"]*)\"|'([^']*)')\s*/?>")


def find_marks(doc: str) -> list[tuple[int, str]]:
    """``(offset, name)`` of every ``<mark name=.../>`` in an SSML document, in order; offset:
    where the mark element begins (characters)."""
    return [(m.start(), html.unescape(m.group(1) if m.group(1) is not None else m.group(2)))
            for m in _MARK.finditer(doc)]


def strip_markup(doc: str) -> str:
    """The text of a document that is not well-formed SSML: its tags dropped, entities decoded."""
    return html.unescape(_TAG.sub(" ", doc)).strip()
