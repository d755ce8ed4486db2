"""The latency dashboard: live buffer headroom and underruns, and a history of utterances.

Per utterance (from :class:`~wavern.app.worker.UtteranceStats`): time to first audio, real-time
factor, fewest milliseconds buffered, underruns. Live (from :class:`~wavern.app.worker.Meters`,
polled by the window's timer): what is queued now and the underruns of the current utterance.
The history plot shows the last :data:`HISTORY` utterances: time to first audio as bars (left
scale, ms) and RTF as dots (right scale; the dashed line is RTF 1, real time).
"""

from __future__ import annotations

import collections
import math

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import QFormLayout, QGroupBox, QLabel, QProgressBar, QVBoxLayout, QWidget

from wavern.app.widgets.palette import quiet_colour
from wavern.app.worker import Meters, UtteranceStats

__all__ = ["LatencyDashboard", "HistoryPlot", "HISTORY"]

HISTORY = 24  # utterances kept in the plot

BAR = QColor(110, 200, 255)
DOT = QColor(250, 140, 30)
BAD = QColor(230, 70, 70)


def _fmt(x: float | None, unit: str = "", digits: int = 0) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{digits}f}{unit}"


class HistoryPlot(QWidget):
    """Bars: time to first audio (ms); dots: RTF; red bar top: the utterance had underruns."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.items: collections.deque[UtteranceStats] = collections.deque(maxlen=HISTORY)
        self.setMinimumHeight(90)
        self.setAccessibleName("latency history")

    def add(self, stats: UtteranceStats) -> None:
        self.items.append(stats)
        self.update()
        # what the bars show, for a screen reader (a painted plot exposes nothing else)
        late = sum(1 for s in self.items if s.underruns)
        first = "–" if stats.first_audio_ms is None else f"{stats.first_audio_ms:.0f} ms"
        self.setAccessibleDescription(f"{len(self.items)} utterances, {late} with underruns; the last: first audio "
                                      f"{first}, real-time factor {stats.rtf:.2f}, {stats.underruns} underruns")

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt's name
        p = QPainter(self)
        r = QRectF(self.rect()).adjusted(34, 6, -30, -14)
        p.fillRect(self.rect(), QColor(24, 26, 32))
        p.setPen(QColor(60, 64, 76))
        p.drawRect(r)
        ttfa = [s.first_audio_ms or 0.0 for s in self.items]
        rtf = [s.rtf for s in self.items]
        top_ms = max([100.0, *ttfa]) * 1.1
        top_rtf = max([1.5, *[x for x in rtf if not math.isnan(x)]]) * 1.1
        p.setPen(QColor(170, 176, 190))
        p.drawText(QRectF(0, r.top() - 6, 32, 14), Qt.AlignmentFlag.AlignRight, f"{top_ms:.0f}")
        p.drawText(QRectF(0, r.bottom() - 8, 32, 14), Qt.AlignmentFlag.AlignRight, "0 ms")
        p.drawText(QRectF(r.right() + 3, r.top() - 6, 30, 14), Qt.AlignmentFlag.AlignLeft, f"{top_rtf:.1f}")
        p.drawText(QRectF(r.left(), r.bottom() + 1, r.width(), 14), Qt.AlignmentFlag.AlignHCenter,
                   "first audio (bars) · RTF (dots)")
        y1 = r.bottom() - r.height() / top_rtf
        p.setPen(QPen(QColor(120, 120, 120), 1, Qt.PenStyle.DashLine))
        p.drawLine(QPointF(r.left(), y1), QPointF(r.right(), y1))
        slot = r.width() / HISTORY
        for i, s in enumerate(self.items):
            x = r.left() + i * slot
            h = r.height() * (s.first_audio_ms or 0.0) / top_ms
            p.fillRect(QRectF(x + 1, r.bottom() - h, slot - 2, h), BAR)
            if s.underruns:
                p.fillRect(QRectF(x + 1, r.bottom() - h - 3, slot - 2, 3), BAD)
            if not math.isnan(s.rtf):
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(DOT)
                p.drawEllipse(QPointF(x + slot / 2, r.bottom() - r.height() * min(s.rtf, top_rtf) / top_rtf), 3, 3)
        p.end()


def _heading(text: str) -> QLabel:
    label = QLabel(text)
    label.setStyleSheet(f"color: {quiet_colour(label)}; font-style: italic")
    return label


class LatencyDashboard(QGroupBox):
    """Numbers of the last utterance, live buffer meters, and the history plot."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Latency", parent)
        self.last: UtteranceStats | None = None
        # two groups, so a row never mixes the last finished utterance with the one playing
        self.labels = {k: QLabel("–") for k in ("first_audio", "rtf", "min_headroom", "underruns", "audio",
                                                  "headroom", "live_min_headroom", "live_underruns")}
        form = QFormLayout()
        form.addRow(_heading("last utterance"))
        form.addRow("time to first audio", self.labels["first_audio"])
        form.addRow("real-time factor", self.labels["rtf"])
        form.addRow("audio", self.labels["audio"])
        form.addRow("fewest buffered", self.labels["min_headroom"])
        form.addRow("underruns", self.labels["underruns"])
        form.addRow(_heading("now"))
        form.addRow("buffered", self.labels["headroom"])
        form.addRow("fewest buffered", self.labels["live_min_headroom"])
        form.addRow("underruns", self.labels["live_underruns"])
        self.buffer_bar = QProgressBar()
        self.buffer_bar.setTextVisible(False)
        self.buffer_bar.setMaximumHeight(8)
        self.plot = HistoryPlot()
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.buffer_bar)
        layout.addWidget(self.plot)

    def add(self, stats: UtteranceStats) -> None:
        """An utterance finished (or was stopped)."""
        self.last = stats
        self.labels["first_audio"].setText(_fmt(stats.first_audio_ms, " ms"))
        self.labels["rtf"].setText(_fmt(stats.rtf, "", 3))
        self.labels["min_headroom"].setText(_fmt(stats.min_headroom_ms, " ms"))
        self.labels["underruns"].setText(str(stats.underruns))
        self.labels["audio"].setText(f"{stats.audio_s:.2f} s" + (" (stopped)" if stats.stopped else ""))
        self.plot.add(stats)

    def set_live(self, meters: Meters, *, capacity_ms: float) -> None:
        """Called from the window's timer."""
        self.labels["headroom"].setText(_fmt(meters.queued_ms, " ms"))
        playing = meters.job_id is not None
        self.labels["live_underruns"].setText(str(meters.underruns) if playing else "–")
        self.labels["live_min_headroom"].setText(
            _fmt(meters.min_headroom_ms, " ms") if playing and meters.min_headroom_ms is not None else "–")
        self.buffer_bar.setMaximum(max(int(capacity_ms), 1))
        self.buffer_bar.setValue(int(min(meters.queued_ms, capacity_ms)))
