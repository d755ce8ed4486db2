"""Colours that stay readable in the desktop's palette, light or dark (each at least 4.5:1
against the background it is drawn on: tests/app/test_window.py computes the contrast)."""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QWidget

__all__ = ["is_dark", "quiet_colour", "error_colour", "ERROR_TEXT"]

# Error text (the lexicon dialog's message, the preview's sentence ends), on a light and a dark base
ERROR_TEXT = {False: "#b00000", True: "#ff8080"}


def is_dark(widget: QWidget) -> bool:
    """Whether the widget's palette draws text light on a dark base (a dark desktop theme)."""
    return widget.palette().color(QPalette.ColorRole.Base).lightness() < 128


def quiet_colour(widget: QWidget) -> str:
    """A secondary text colour for ``widget`` that stays readable in its palette: the text colour
    blended a third of the way to the background (the fixed #666 was 2.1:1 on a dark theme)."""
    fg = widget.palette().color(QPalette.ColorRole.WindowText)
    bg = widget.palette().color(QPalette.ColorRole.Window)
    mix = [round(a * 0.7 + b * 0.3) for a, b in zip(fg.getRgb()[:3], bg.getRgb()[:3])]
    return QColor(*mix).name()


def error_colour(widget: QWidget) -> str:
    """Error text for ``widget``'s palette."""
    return ERROR_TEXT[is_dark(widget)]
