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

from PySide6.QtCore import QEvent, QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFontMetricsF, QPainter, QPen
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
        self._fit_height()
        self.setAccessibleName("latency history")

    def add(self, stats: UtteranceStats) -> None:
        self.items.append(stats)
        self.update()
        # what the bars show, for a screen reader (a painted plot exposes nothing else)
        late = sum(1 for s in self.items if s.underruns)
        first = "–" if stats.first_audio_ms is None else f"{stats.first_audio_ms:.0f} ms"
        self.setAccessibleDescription(f"{len(self.items)} utterances, {late} with underruns; the last: first audio "
                                      f"{first}, real-time factor {stats.rtf:.2f}, {stats.underruns} underruns")

    CAPTION = "first audio (bars) · RTF (dots)"

    def scales(self) -> tuple[float, float]:
        """The tops of the two scales: first audio in ms (left) and RTF (right)."""
        ttfa = [s.first_audio_ms or 0.0 for s in self.items]
        rtf = [s.rtf for s in self.items if not math.isnan(s.rtf)]
        return max([100.0, *ttfa]) * 1.1, max([1.5, *rtf]) * 1.1

    def layout_boxes(self) -> dict[str, QRectF]:
        """Where the plot and its labels go, measured in the widget's own font: the scale labels
        and the caption each get a box their text fits (a fixed 34 px margin and 14 px line cut
        them off at 16 pt), and the plot takes the rest."""
        fm = QFontMetricsF(self.font())
        top_ms, top_rtf = self.scales()
        line = fm.height()
        left = max(fm.horizontalAdvance(t) for t in (f"{top_ms:.0f}", "0 ms")) + 4
        right = fm.horizontalAdvance(f"{top_rtf:.1f}") + 4
        w, h = float(self.width()), float(self.height())
        plot = QRectF(left, line / 2 + 1, max(1.0, w - left - right), max(1.0, h - line / 2 - 1 - line - 1))
        return {"plot": plot,
                "top_ms": QRectF(0, plot.top() - line / 2, left - 3, line),
                "zero_ms": QRectF(0, plot.bottom() - line / 2, left - 3, line),
                "top_rtf": QRectF(plot.right() + 3, plot.top() - line / 2, right - 3, line),
                "caption": QRectF(plot.left(), plot.bottom() + 1, plot.width(), line)}

    def _fit_height(self) -> None:
        self.setMinimumHeight(max(90, round(6 * QFontMetricsF(self.font()).height())))

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        if event.type() == QEvent.Type.FontChange:
            self._fit_height()
        super().changeEvent(event)

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt's name
        p = QPainter(self)
        boxes = self.layout_boxes()
        r = boxes["plot"]
        p.fillRect(self.rect(), QColor(24, 26, 32))
        p.setPen(QColor(60, 64, 76))
        p.drawRect(r)
        top_ms, top_rtf = self.scales()
        p.setPen(QColor(170, 176, 190))
        right, centre = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, Qt.AlignmentFlag.AlignCenter
        p.drawText(boxes["top_ms"], right, f"{top_ms:.0f}")
        p.drawText(boxes["zero_ms"], right, "0 ms")
        p.drawText(boxes["top_rtf"], Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, f"{top_rtf:.1f}")
        caption = QFontMetricsF(self.font()).elidedText(self.CAPTION, Qt.TextElideMode.ElideRight, boxes["caption"].width())
        p.drawText(boxes["caption"], centre, caption)
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
