"""The text editor (with word and sentence highlighting) and the "what will be spoken" preview."""

from __future__ import annotations

import html
import re

from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QPlainTextEdit, QTextBrowser, QTextEdit, QWidget

from wavern.app.widgets.palette import ERROR_TEXT, is_dark, quiet_colour

__all__ = ["SpeechEditor", "PreviewView", "preview_html"]

SENTENCE_BG = QColor(255, 244, 200)
WORD_BG = QColor(255, 196, 60)
TEXT_POINTS = 12  # the editor's text size to start with (View > Larger / Smaller text changes it)
TEXT_POINTS_RANGE = (8, 40)
HIGHLIGHT_TEXT = QColor(0, 0, 0)  # on the pale highlights in any theme (a dark theme's white text vanished)
# The preview's marks, on a light and on a dark background (each at least 4.5:1 against it)
_MARKS = {False: ("#a04800", ERROR_TEXT[False]), True: ("#ffb060", ERROR_TEXT[True])}


_PAUSE_RE = re.compile(r"([,;:])(?=\s|$)")
_END_RE = re.compile(r"([.?!])\s*$")


class SpeechEditor(QPlainTextEdit):
    """Plain-text editor that can mark the sentence and the word being heard."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        font = QFont()
        font.setPointSize(TEXT_POINTS)
        self.setFont(font)
        self.setPlaceholderText("Type here. Ctrl+Enter speaks, Ctrl+Shift+Enter queues, Esc stops.")
        self.current_word: tuple[int, int] | None = None
        self.current_sentence: tuple[int, int] | None = None

    def _selection(self, span: tuple[int, int], colour: QColor) -> QTextEdit.ExtraSelection:
        n = self.document().characterCount() - 1
        a, b = max(0, min(span[0], n)), max(0, min(span[1], n))
        sel = QTextEdit.ExtraSelection()
        cur = QTextCursor(self.document())
        cur.setPosition(a)
        cur.setPosition(b, QTextCursor.MoveMode.KeepAnchor)
        sel.cursor = cur
        fmt = QTextCharFormat()
        fmt.setBackground(colour)
        fmt.setForeground(HIGHLIGHT_TEXT)
        if colour == WORD_BG:  # the word heard is underlined too, not told by a shade of yellow alone
            fmt.setFontUnderline(True)
        sel.format = fmt
        return sel

    def highlight(self, *, sentence: tuple[int, int] | None, word: tuple[int, int] | None) -> None:
        """Mark document character spans (None clears); cheap to call on every timer tick."""
        if sentence == self.current_sentence and word == self.current_word:
            return
        self.current_sentence, self.current_word = sentence, word
        sels = []
        if sentence is not None:
            sels.append(self._selection(sentence, SENTENCE_BG))
        if word is not None:
            sels.append(self._selection(word, WORD_BG))
        self.setExtraSelections(sels)
        if word is not None:
            self._show(word[0])

    def _show(self, position: int) -> None:
        """Scroll so that the character at ``position`` is in view (a third from the top), unless
        it is already: the highlight follows the speech down a long text."""
        cur = QTextCursor(self.document())
        cur.setPosition(max(0, min(position, self.document().characterCount() - 1)))
        rect, view = self.cursorRect(cur), self.viewport().rect()
        if view.contains(rect):
            return
        # QPlainTextEdit's scroll bar counts visual lines: put the word's line a third down
        block = cur.block()
        line = block.firstLineNumber()
        layout = block.layout()
        if layout is not None and layout.lineCount():
            at = layout.lineForTextPosition(cur.position() - block.position())
            if at.isValid():
                line += at.lineNumber()
        visible = view.height() // max(1, self.fontMetrics().lineSpacing())
        self.verticalScrollBar().setValue(max(0, line - visible // 3))

    def highlighted_text(self) -> str:
        """The text of the highlighted word, or ""."""
        if self.current_word is None:
            return ""
        cur = QTextCursor(self.document())  # positions count UTF-16 units, as the document does
        cur.setPosition(self.current_word[0])
        cur.setPosition(self.current_word[1], QTextCursor.MoveMode.KeepAnchor)
        return cur.selectedText()

    def set_text_points(self, points: int) -> int:
        """Set the text size (clamped to ``TEXT_POINTS_RANGE``); returns the size set."""
        points = max(TEXT_POINTS_RANGE[0], min(TEXT_POINTS_RANGE[1], int(points)))
        font = self.font()
        font.setPointSize(points)
        self.setFont(font)
        return points

    def word_under_cursor(self) -> str:
        """The selection if any, else the word at the text cursor."""
        cur = self.textCursor()
        if not cur.hasSelection():
            cur.select(QTextCursor.SelectionType.WordUnderCursor)
        return cur.selectedText().strip()


def preview_html(sentences, *, dark: bool = False, quiet: str = "#5c5c5c") -> str:
    """Numbered spoken forms: ``/`` marks a pause inside a sentence, ``//`` a sentence end (colours
    for a ``dark`` or light background; ``quiet`` the numbers' colour)."""
    pause, end = _MARKS[dark]
    rows = []
    for i, s in enumerate(sentences, 1):
        body = html.escape(s.spoken)
        body = _PAUSE_RE.sub(rf'\1 <span style="color:{pause}"><b>/</b></span>', body)
        body = _END_RE.sub(rf'\1 <span style="color:{end}"><b>//</b></span>', body)
        rows.append(f'<p style="margin:2px 0"><span style="color:{quiet}">{i}.</span> {body}</p>')
    return "".join(rows)


class PreviewView(QTextBrowser):
    """What will be spoken: normalised text, one sentence per line, pauses marked."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setPlaceholderText("What will be spoken appears here: normalised text, one sentence a line; "
                                "/ marks a pause, // a sentence end.")
        self.sentences: list = []

    def show_sentences(self, sentences) -> None:
        self.sentences = list(sentences)
        self.setHtml(preview_html(self.sentences, dark=is_dark(self), quiet=quiet_colour(self)))

    def show_message(self, message: str) -> None:
        self.sentences = []
        self.setHtml(f'<p style="color:{quiet_colour(self)}">{html.escape(message)}</p>')
