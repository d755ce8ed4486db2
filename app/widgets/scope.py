"""Scrolling waveform and spectrogram of what is playing.

The worker prepares each chunk's min/max envelope and spectrogram columns
(:class:`~wavern.app.worker.ChunkView`); :class:`ScopeHistory` files them by their position on
the stream clock in ring buffers, and the views draw the last ``span_s`` seconds up to the
playback position, which the window sets from a timer. Slots remember which position they
hold, so stale data (older than the ring, or audio that a stop dropped) is never drawn.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QLineF, QRectF, Qt
from PySide6.QtGui import QColor, QImage, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from wavern.app.worker import ENVELOPE_SAMPLES, SPECTRUM_HOP, SPECTRUM_WINDOW, ChunkView

__all__ = ["ScopeHistory", "WaveformView", "SpectrogramView", "colour_table"]

BACKGROUND = QColor(24, 26, 32)
GRID = QColor(60, 64, 76)
TRACE = QColor(110, 200, 255)
TEXT = QColor(170, 176, 190)


class ScopeHistory:
    """The last ``seconds`` of envelope and spectrogram, indexed by stream-clock position."""

    def __init__(self, *, seconds: float = 8.0, sample_rate: int = 22050):
        self.sample_rate = sample_rate
        n_env = int(seconds * sample_rate) // ENVELOPE_SAMPLES
        n_spec = int(seconds * sample_rate) // SPECTRUM_HOP
        self._env = np.zeros((n_env, 2), np.float32)
        self._env_at = np.full(n_env, -1, np.int64)  # group index each slot holds
        self._spec = np.zeros((n_spec, SPECTRUM_WINDOW // 2 + 1), np.uint8)
        self._spec_at = np.full(n_spec, -1, np.int64)  # column index each slot holds

    @staticmethod
    def _store(buf: np.ndarray, at: np.ndarray, first: int, rows: np.ndarray) -> None:
        rows = rows[-buf.shape[0]:]
        first += max(0, len(rows) - buf.shape[0])
        idx = first + np.arange(rows.shape[0])
        slots = idx % buf.shape[0]
        buf[slots] = rows
        at[slots] = idx

    def add(self, view: ChunkView) -> None:
        self._store(self._env, self._env_at, view.position // ENVELOPE_SAMPLES, view.envelope)
        if view.spectrum.shape[0]:
            self._store(self._spec, self._spec_at, view.spectrum_position // SPECTRUM_HOP, view.spectrum)

    def envelope(self, end: int, n_groups: int) -> np.ndarray:
        """(n_groups, 2) min/max ending at stream position ``end``; NaN where nothing is known."""
        idx = end // ENVELOPE_SAMPLES - n_groups + np.arange(n_groups)
        slots = idx % self._env.shape[0]
        out = self._env[slots].copy()
        out[(self._env_at[slots] != idx) | (idx < 0)] = np.nan
        return out

    def spectrum(self, end: int, n_cols: int) -> np.ndarray:
        """(n_cols, bins) uint8 columns ending at stream position ``end``; 0 where unknown."""
        idx = end // SPECTRUM_HOP - n_cols + np.arange(n_cols)
        slots = idx % self._spec.shape[0]
        out = self._spec[slots].copy()
        out[(self._spec_at[slots] != idx) | (idx < 0)] = 0
        return out


def colour_table() -> list[int]:
    """256 ARGB values from near-black through purple and orange to pale yellow."""
    anchors = np.array([[0, 0, 4], [60, 15, 110], [180, 55, 90], [250, 140, 30], [252, 250, 180]], np.float64)
    x = np.linspace(0, len(anchors) - 1, 256)
    lo = np.floor(x).astype(int).clip(0, len(anchors) - 2)
    t = (x - lo)[:, None]
    rgb = np.round(anchors[lo] * (1 - t) + anchors[lo + 1] * t).astype(np.uint32)
    return [int(0xFF000000 | (r << 16) | (g << 8) | b) for r, g, b in rgb]


class _ScopeBase(QWidget):
    def __init__(self, history: ScopeHistory, *, span_s: float = 4.0, parent: QWidget | None = None):
        super().__init__(parent)
        self.history = history
        self.span_s = span_s
        self.position = 0
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def set_position(self, position: int) -> None:
        """Stream-clock sample now playing (the right edge)."""
        if position != self.position:
            self.position = position
            self.update()

    def _label(self, p: QPainter, text: str, align: Qt.AlignmentFlag) -> None:
        """``text`` in a corner, on a dark patch so it reads over any trace or colour."""
        box = p.fontMetrics().boundingRect(text).adjusted(-4, -2, 4, 2)
        r = self.rect().adjusted(3, 3, -3, -3)
        x = r.right() - box.width() if align & Qt.AlignmentFlag.AlignRight else r.left()
        y = r.bottom() - box.height() if align & Qt.AlignmentFlag.AlignBottom else r.top()
        patch = QRectF(x, y, box.width(), box.height())
        p.fillRect(patch, QColor(0, 0, 0, 150))
        p.setPen(TEXT)
        p.drawText(patch, Qt.AlignmentFlag.AlignCenter, text)


class WaveformView(_ScopeBase):
    """Min/max envelope of the last ``span_s`` seconds, scrolling right to left."""

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt's name
        p = QPainter(self)
        p.fillRect(self.rect(), BACKGROUND)
        w, h = self.width(), self.height()
        mid = h / 2
        p.setPen(QPen(GRID, 1))
        p.drawLine(QLineF(0, mid, w, mid))
        n = int(self.span_s * self.history.sample_rate) // ENVELOPE_SAMPLES
        env = self.history.envelope(self.position, n)
        edges = np.linspace(0, n, w + 1).astype(int)
        starts = edges[:-1][edges[1:] > edges[:-1]]
        cols = np.flatnonzero(edges[1:] > edges[:-1])
        with np.errstate(all="ignore"):
            lo = np.fmin.reduceat(env[:, 0], starts)
            hi = np.fmax.reduceat(env[:, 1], starts)
        keep = ~np.isnan(lo)
        scale = (h / 2 - 4)
        p.setPen(QPen(TRACE, 1))
        p.drawLines([QLineF(float(x), mid - float(b) * scale, float(x), mid - float(a) * scale - 0.5)
                     for x, a, b in zip(cols[keep], lo[keep], hi[keep])])
        self._label(p, "waveform", Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self._label(p, f"−{self.span_s:.0f} s", Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom)
        self._label(p, "now", Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignBottom)
        p.end()


class SpectrogramView(_ScopeBase):
    """Spectrogram of the last ``span_s`` seconds up to ``max_hz``, newest on the right."""

    def __init__(self, history: ScopeHistory, *, span_s: float = 4.0, max_hz: float = 8000.0,
                 parent: QWidget | None = None):
        super().__init__(history, span_s=span_s, parent=parent)
        self.bins = int(max_hz / (history.sample_rate / SPECTRUM_WINDOW)) + 1
        self._colours = colour_table()
        self._pixels = np.zeros((1, 1), np.uint8)  # kept alive while the QImage uses it

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt's name
        p = QPainter(self)
        p.fillRect(self.rect(), BACKGROUND)
        n = int(self.span_s * self.history.sample_rate) // SPECTRUM_HOP
        cols = self.history.spectrum(self.position, n)[:, :self.bins]
        self._pixels = np.ascontiguousarray(cols.T[::-1])  # (bins, n): low frequencies at the bottom
        img = QImage(self._pixels.data, n, self.bins, n, QImage.Format.Format_Indexed8)
        img.setColorTable(self._colours)
        p.drawImage(QRectF(self.rect()), img)
        top_khz = self.bins * self.history.sample_rate / SPECTRUM_WINDOW / 1000
        self._label(p, "spectrogram", Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self._label(p, f"{top_khz:.0f} kHz", Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        self._label(p, "0 Hz · now", Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignBottom)
        p.end()
