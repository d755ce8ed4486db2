"""Positions in the editor's text: where typed text commits to speech (:func:`committed_end`), and
code points against Qt's UTF-16 units (:func:`qt_position`, :func:`text_index`)."""

from __future__ import annotations

import bisect
import re

from wavern.conditioning.frontend.words import is_abbreviation

__all__ = ["committed_end", "qt_position", "astral_indices", "text_index"]

# A clause is committed once its end mark (. ! ? , ;), with any closing quote or bracket, is
# followed by white space: "3.5" or "1,000" are not clause ends.
_COMMIT_RE = re.compile(r"[.!?,;][\"'\u201d\u2019)\]]*(?=\s)")


def committed_end(text: str, start: int) -> int:
    """End of the last committed clause of ``text[start:]`` (``start`` if none).

    A full stop after an abbreviation or initial ("Dr.", "J.") does not commit; after a word that
    is one only before a name or a number ("Rev.", "sat.") it waits for the next word's first
    character to tell ("Rev. S" waits, "The cat sat. T" commits).
    """
    end = start
    for m in _COMMIT_RE.finditer(text, start):
        if text[m.start()] == ".":
            k = m.start()  # the token ending in this full stop: back to the white space before it
            while k > start and not text[k - 1].isspace():
                k -= 1
            token, nxt = text[k:m.start() + 1], text[m.end():m.end() + 64].lstrip()[:1]
            if is_abbreviation(token, nxt) if nxt else (is_abbreviation(token, "A") or is_abbreviation(token, "1")):
                continue
        end = m.end()
    return end


def qt_position(text: str, index: int) -> int:
    """The editor position (UTF-16 code units, as Qt counts) of code point ``index`` of ``text``."""
    return index + bisect.bisect_left(astral_indices(text), index)


def astral_indices(text: str) -> list[int]:
    """Where ``text`` has code points outside the BMP (two UTF-16 units each in the editor), sorted."""
    return [] if text.isascii() else [i for i, c in enumerate(text) if c > "\uffff"]


def text_index(text: str, position: int) -> int:
    """The code point index of editor position ``position`` in ``text`` (the inverse of :func:`qt_position`)."""
    if text.isascii():
        return position
    units = 0
    for i, c in enumerate(text):
        if units >= position:
            return i
        units += 2 if c > "\uffff" else 1
    return len(text)


