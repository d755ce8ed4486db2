"""How the window is laid out: its widgets, menus, toolbar and shortcuts (:class:`WindowLayout`,
a part of :class:`~wavern.app.window.MainWindow`)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QComboBox, QFormLayout, QFrame, QGroupBox, QLabel, QPushButton, QScrollArea, QSplitter,
                               QVBoxLayout, QWidget)

from wavern.app.widgets import LatencyDashboard, PreviewView, SpectrogramView, SpeechEditor, WaveformView, quiet_colour
from wavern.app.widgets.editor import TEXT_POINTS
from wavern.app.widgets.slider import Slider, buddy_sliders
from wavern.conditioning.config import PROSODY_DEFAULT, PROSODY_LIMITS

__all__ = ["WindowLayout", "SILENT"]

SILENT = -1  # device-combo value of "Silent playback"


class WindowLayout:
    """Builds :class:`~wavern.app.window.MainWindow`'s widgets and actions; the window's behaviour
    is in that class."""

    def _build_ui(self) -> None:
        self.editor = SpeechEditor()
        self.text_points = TEXT_POINTS
        self.preview = PreviewView()
        self.waveform = WaveformView(self.history)
        self.spectrogram = SpectrogramView(self.history)
        self.waveform.setMinimumHeight(90)
        self.spectrogram.setMinimumHeight(110)
        self.dashboard = LatencyDashboard()

        self.voice_combo = QComboBox()
        self.card = QLabel("")
        self.card.setWordWrap(True)
        self.card.setStyleSheet(f"color: {quiet_colour(self.card)}")
        self.speaker_combo = QComboBox()
        self.device_combo = QComboBox()
        self.device_combo.addItem("Silent playback (no sound)", SILENT)
        for d in self.devices:
            self.device_combo.addItem(f"{d.name}" + (f" (resampled to {d.rate} Hz)" if d.resampled else ""), d.index)
        self.speed = Slider(0.5, 2.0, 0.05, 1.0, "{:.2f}×")
        self.volume = Slider(0.0, 2.0, 0.05, 1.0, "{:.2f}")
        self.pause = Slider(0.0, 1.5, 0.05, 0.0, "{:.2f} s")
        # espeak-ng's units, over the ranges the voice was trained on (PROSODY_LIMITS); the next request
        self.pitch = Slider(*PROSODY_LIMITS[1], 1.0, PROSODY_DEFAULT[1], "{:.0f}")
        self.pitch_range = Slider(*PROSODY_LIMITS[2], 1.0, PROSODY_DEFAULT[2], "{:.0f}")
        for s in (self.pitch, self.pitch_range):
            s.setEnabled(False)  # until a voice that reads them loads
            s.setToolTip("Needs a voice trained with the prosody input")
        self.passes = Slider(0, 16, 1, 0, "{:.0f}")  # set to the voice's own on load; the next request
        self.passes.setToolTip("Mel-matching passes (engine/melmatch.py): more, a cleaner copy of the mel; "
                               "fewer, earlier first audio and more of the vocoder's own sound")

        self.editor.setTabChangesFocus(True)  # (Tab inserted a tab and focus could not leave forwards)
        self.editor.setAccessibleName("text to speak")
        self.preview.setAccessibleName("what will be spoken")
        self.waveform.setAccessibleName("waveform of the audio played")
        self.spectrogram.setAccessibleName("spectrogram of the audio played")
        for widget, name, tip in (
                (self.speed, "speed", "Speaking rate; acts on the next chunk"),
                (self.volume, "volume", "Output gain; acts on the next chunk"),
                (self.pause, "sentence pause", "Silence between sentences; acts on the next chunk"),
                (self.pitch, "pitch", None), (self.pitch_range, "intonation", None),
                (self.passes, "mel passes", None)):
            widget.set_name(name)
            if tip:
                widget.setToolTip(tip)
        self.voice_combo.setAccessibleName("voice")
        self.voice_combo.setToolTip("The voice: installed voices and the one given with --voice")
        self.speaker_combo.setAccessibleName("speaker")
        self.speaker_combo.setToolTip("One of the voice's speakers (remembered per voice)")
        self.device_combo.setAccessibleName("output device")
        self.device_combo.setToolTip("Where speech plays; silent playback paces it in real time")

        # Alt + the underlined letter reaches each control (the menus hold S, F, V and T)
        voice_box = QGroupBox("Voi&ce")
        v = QVBoxLayout(voice_box)  # the card in a box layout: a form row cut its wrapped lines
        v.addWidget(self.voice_combo)
        v.addWidget(self.card)
        f = QFormLayout()
        v.addLayout(f)
        f.addRow("spea&ker", self.speaker_combo)
        f.addRow("&pitch", self.pitch)
        f.addRow("&intonation", self.pitch_range)
        f.addRow("&mel passes", self.passes)
        f.addRow("&output", self.device_combo)
        buddy_sliders(f)
        controls = QGroupBox("Delivery (acts on the next chunk)")
        f = QFormLayout(controls)
        f.addRow("spee&d", self.speed)
        f.addRow("vo&lume", self.volume)
        f.addRow("sentence p&ause", self.pause)
        buddy_sliders(f)
        side = QWidget()
        col = QVBoxLayout(side)
        col.addWidget(voice_box)
        col.addWidget(controls)
        col.addWidget(self.dashboard)
        col.addStretch(1)
        # in a scroll area, so the window fits a 768-pixel-high screen (the column alone is ~600 px
        # tall: the window could not be made shorter than 856 px)
        side_scroll = QScrollArea()
        side_scroll.setWidget(side)
        side_scroll.setWidgetResizable(True)
        side_scroll.setFrameShape(QFrame.Shape.NoFrame)
        # (a scroll bar only when a large desktop font makes the column wider than its room: the
        # combos and slider values were cut off at 14-16 pt, out of reach)
        side_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        # wide enough for its content at the desktop's font (it was 14 px short at the default one)
        fit = side.minimumSizeHint().width() + side_scroll.verticalScrollBar().sizeHint().width() + 4
        side_scroll.setMinimumWidth(max(300, fit))
        side_scroll.setMaximumWidth(max(400, fit))
        side_scroll.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # a Tab stop with no name and nothing to show

        text_split = QSplitter(Qt.Orientation.Vertical)
        text_split.addWidget(self.editor)
        box = QGroupBox("What will be spoken")
        QVBoxLayout(box).addWidget(self.preview)
        text_split.addWidget(box)
        text_split.setSizes([300, 160])
        top = QSplitter(Qt.Orientation.Horizontal)
        top.addWidget(text_split)
        top.addWidget(side_scroll)
        top.setStretchFactor(0, 1)
        scopes = QWidget()
        sc = QVBoxLayout(scopes)
        sc.setContentsMargins(0, 0, 0, 0)
        sc.addWidget(self.waveform, 2)
        sc.addWidget(self.spectrogram, 3)
        self.main_split = QSplitter(Qt.Orientation.Vertical)
        self.main_split.addWidget(top)
        self.main_split.addWidget(scopes)
        self.main_split.setSizes([600, 200])  # the scopes at their minimum to start: the side column fits
        self.setCentralWidget(self.main_split)

        # a problem stays in view until dismissed (a status message lasted until the next one: an
        # export error under a queued "Speaking: ..." showed for 0.02 s)
        self.problem_button = QPushButton("")
        self.problem_button.setFlat(True)
        self.problem_button.setVisible(False)
        self.problem_button.setAccessibleName("problem")
        self.problem_button.clicked.connect(lambda: self.report_problem(None))
        self.statusBar().addPermanentWidget(self.problem_button)
        self.output_label = QLabel("")
        self.statusBar().addPermanentWidget(self.output_label)
        room = self.screen().availableGeometry() if self.screen() is not None else None
        self.resize(min(1200, room.width() - 40) if room else 1200, min(820, room.height() - 60) if room else 820)

    def _build_actions(self) -> None:
        def action(text: str, keys: str, slot, *, checkable: bool = False) -> QAction:
            a = QAction(text, self)
            a.setShortcut(QKeySequence(keys))
            a.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            a.setToolTip(f"{text} ({QKeySequence(keys).toString(QKeySequence.SequenceFormat.NativeText)})")
            a.setCheckable(checkable)
            (a.toggled if checkable else a.triggered).connect(slot)
            return a

        self.speak_action = action("Speak", "Ctrl+Return", lambda: self.speak(now=True))
        self.queue_action = action("Queue", "Ctrl+Shift+Return", lambda: self.speak(now=False))
        self.speak_action.setShortcuts([QKeySequence("Ctrl+Return"), QKeySequence("Ctrl+Enter")])  # + keypad Enter
        self.queue_action.setShortcuts([QKeySequence("Ctrl+Shift+Return"), QKeySequence("Ctrl+Shift+Enter")])
        self.pause_action = action("Pause", "Ctrl+Space", self.set_paused, checkable=True)
        self.stop_action = action("Stop", "Escape", self.stop)
        self.sayt_action = action("Speak as you type", "Ctrl+T", self.set_speak_as_you_type, checkable=True)
        self.fix_action = action("Fix word…", "Ctrl+L", self.fix_word)
        self.export_last_action = action("Export last…", "Ctrl+E", self._ask_export_last)
        self.export_all_action = action("Export text…", "Ctrl+Shift+E", self._ask_export_text)
        self.quit_action = action("Quit", "Ctrl+Q", self.close)
        self.larger_action = action("Larger text", "Ctrl++", lambda: self.set_text_points(self.text_points + 2))
        self.larger_action.setShortcuts([QKeySequence("Ctrl++"), QKeySequence("Ctrl+=")])  # (+ is shifted on many layouts)
        self.smaller_action = action("Smaller text", "Ctrl+-", lambda: self.set_text_points(self.text_points - 2))
        self.reset_text_action = action("Normal text size", "Ctrl+0", lambda: self.set_text_points(TEXT_POINTS))
        menus = self.menuBar()  # every command, with its keys, found from the keyboard (Alt, F10)
        for title, actions in (("&Speech", (self.speak_action, self.queue_action, self.pause_action, self.stop_action,
                                            None, self.sayt_action)),
                               ("&File", (self.export_last_action, self.export_all_action, None, self.quit_action)),
                               ("&View", (self.larger_action, self.smaller_action, self.reset_text_action)),
                               ("&Tools", (self.fix_action,))):
            menu = menus.addMenu(title)
            for a in actions:
                menu.addSeparator() if a is None else menu.addAction(a)
        bar = self.addToolBar("Transport")
        bar.setObjectName("transport")
        for a in (self.speak_action, self.queue_action, self.pause_action, self.stop_action):
            bar.addAction(a)
        bar.addSeparator()
        for a in (self.sayt_action, self.fix_action, self.export_last_action, self.export_all_action):
            bar.addAction(a)
        self._set_voice_ready(False)

