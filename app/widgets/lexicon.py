"""The user lexicon editor: "fix this word" (word → respelling, or IPA) saved to ``lexicon.json``."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from wavern.app.widgets.palette import error_colour
from wavern.conditioning.frontend.lexicon import Lexicon
from wavern.errors import ParameterError

__all__ = ["LexiconDialog"]


class LexiconDialog(QDialog):
    """A table of word / respelling / IPA. ``lexicon()`` builds the edited :class:`Lexicon`.

    Args:
        lexicon: the entries to start from.
        word: if given, a row for it is selected (added when missing) and its respelling
            cell opened for editing: the "fix this word" path.
    """

    def __init__(self, lexicon: Lexicon, *, word: str | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Pronunciations")
        self.resize(520, 360)
        self.table = QTableWidget(0, 3)
        self.table.setHorizontalHeaderLabels(["Word", "Say it as", "IPA (optional)"])
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.setTabKeyNavigation(False)  # Tab leaves the table for Add, Remove, Save (arrows move in it)
        self.table.setAccessibleName("pronunciations")
        for key, value in sorted(lexicon.to_json().items()):
            if isinstance(value, str):
                self.add_row(key, value, "")
            else:
                self.add_row(key, value.get("respelling", ""), value.get("phonemes", ""))
        self.error = QLabel("")
        self.error.setStyleSheet(f"color: {error_colour(self)}")
        self.error.setWordWrap(True)
        add, remove = QPushButton("Add"), QPushButton("Remove")
        add.clicked.connect(lambda: self._edit(self.add_row("", "", "")))
        remove.clicked.connect(self._remove)
        delete = QShortcut(QKeySequence(QKeySequence.StandardKey.Delete), self.table)
        delete.setContext(Qt.ShortcutContext.WidgetShortcut)  # in the table, not while a cell is being edited
        delete.activated.connect(self._remove)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        row = QHBoxLayout()
        row.addWidget(add)
        row.addWidget(remove)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Words the voice gets wrong: write how to say them (\"engine x\"), "
                                "or give IPA phonemes."))
        layout.addWidget(self.table)
        layout.addLayout(row)
        layout.addWidget(self.error)
        layout.addWidget(buttons)
        if word:
            self.fix(word)

    def add_row(self, word: str, respelling: str, phonemes: str) -> int:
        r = self.table.rowCount()
        self.table.insertRow(r)
        for c, text in enumerate((word, respelling, phonemes)):
            self.table.setItem(r, c, QTableWidgetItem(text))
        return r

    def fix(self, word: str) -> int:
        """Select the row of ``word`` (adding it) and start editing its respelling."""
        key = word.strip().casefold()
        for r in range(self.table.rowCount()):
            if self.table.item(r, 0).text().strip().casefold() == key:
                break
        else:
            r = self.add_row(word.strip(), "", "")
        self._edit(r)
        return r

    def set_row(self, row: int, *, respelling: str = "", phonemes: str = "") -> None:
        self.table.item(row, 1).setText(respelling)
        self.table.item(row, 2).setText(phonemes)

    def _edit(self, row: int) -> None:
        self.table.setCurrentCell(row, 1 if self.table.item(row, 0).text() else 0)
        self.table.editItem(self.table.currentItem())

    def _remove(self) -> None:
        rows = sorted({i.row() for i in self.table.selectedIndexes()}, reverse=True)
        for r in rows:
            self.table.removeRow(r)

    def lexicon(self) -> Lexicon:
        """The table as a Lexicon; rows without a word, or without a respelling and IPA, are left out.

        Raises:
            ParameterError: an entry the front end refuses (the message names it).
        """
        lex = Lexicon()
        for r in range(self.table.rowCount()):
            word, say, ipa = (self.table.item(r, c).text().strip() for c in range(3))
            if word and (say or ipa):
                lex.set(word, say or None, phonemes=ipa or None)
        return lex

    def accept(self) -> None:
        try:
            self.lexicon()
        except ParameterError as e:
            self.error.setText(str(e))
            return
        super().accept()
