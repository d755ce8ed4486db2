"""The desktop window: type, hear it at once, watch it, control it.

``run_window(voice=...)`` is what ``wavern gui`` calls. The window only paints and forwards:
a :class:`~wavern.app.worker.SpeechWorker` owns the voice and the output and runs every
request on its own thread; its results come back as signals; a 30 Hz ``QTimer`` reads the
playback position and buffer counters to move the scrolling views, the word highlight and
the latency meters.

Without an audio device (or with "Silent playback" chosen) speech goes to
:class:`~wavern.app.worker.SilentPlayback`, paced in real time, so the views, highlighting and
dashboard work the same; the status bar says so and Export writes the audio to a file.

Shortcuts: Ctrl+Enter speak now (the selection, or all), Ctrl+Shift+Enter queue, Ctrl+Space
pause/resume, Esc stop, Ctrl+T speak as you type, Ctrl+L fix a word's pronunciation, Ctrl+E
export the last utterance, Ctrl+Shift+E export the whole text.
"""

from __future__ import annotations

import bisect
import json
import math
import logging
import re
import sys
import tempfile
from pathlib import Path

import numpy as np
from PySide6.QtCore import QSettings, QStandardPaths, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence, QTextCursor
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QPushButton,
    QScrollArea,
    QSlider,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from wavern.app.widgets import (
    LatencyDashboard,
    LexiconDialog,
    PreviewView,
    ScopeHistory,
    SpectrogramView,
    SpeechEditor,
    WaveformView,
    quiet_colour,
)
from wavern.app.widgets.editor import TEXT_POINTS
from wavern.app.worker import ChunkView, SpeechWorker, UtteranceStats, VoiceState, usable_output_devices
from wavern.conditioning.config import PROSODY_DEFAULT, PROSODY_LIMITS
from wavern.conditioning.frontend.lexicon import Lexicon
from wavern.conditioning.frontend.normalize import is_abbreviation
from wavern.conditioning.frontend.ssml import looks_like_ssml
from wavern.engine.chunk import SpeakConfig
from wavern.errors import ParameterError, WavernError

__all__ = ["MainWindow", "run_window", "committed_end", "SILENT"]

log = logging.getLogger(__name__)

SILENT = -1  # device-combo value of "Silent playback"
AUTOSAVE_MS = 5000  # settings and the text are saved this often (and on close)
TICK_MS = 33  # meter / view refresh period
BUFFER_S = 1.0  # generation runs at most this far ahead of playback: controls are heard within it
PREVIEW_DELAY_MS = 250  # typing pause before the preview is refreshed
SSML_OPEN = "<speak>"  # put around a part of an SSML document spoken alone
VOICE_CHOICE_MS = 500  # a voice chosen in the list loads once the choice has rested this long
SPOOL_AFTER_S = 600  # a request's audio (kept for Export last) goes to a temporary file past this
STATS_KEPT = 500  # finished utterances' stats the window keeps

# A clause is committed once its end mark (. ! ? , ;), with any closing quote or bracket, is
# followed by white space: "3.5" or "1,000" are not clause ends.
_COMMIT_RE = re.compile(r"[.!?,;][\"'\u201d\u2019)\]]*(?=\s)")


class _Take:
    """One request's audio as generated, for Export last: in memory up to ``spool_after`` samples
    (the usual request), beyond that in an unnamed temporary file, read back as a memory map (an
    hour-long request held ~320 MB of float32 chunks and twice that while they were joined; soak
    review). A temp folder that cannot take it (or fills up) keeps the audio in memory after all.
    The file is unbuffered, so a full disk shows at the write that meets it."""

    def __init__(self, spool_after: int) -> None:
        self._parts: list[np.ndarray] = []
        self._file = None
        self._n = 0  # samples in the take
        self._spool_after = spool_after

    def __bool__(self) -> bool:
        return self._n > 0

    def append(self, samples: np.ndarray) -> None:
        x = np.ascontiguousarray(samples, np.float32)
        if self._file is None and self._n + x.size > self._spool_after:
            f = None
            try:
                f = tempfile.TemporaryFile(prefix="wavern-take-", buffering=0)
                for part in self._parts:
                    _write_all(f, part)
            except OSError as e:
                self._keep_in_memory(e, f)
            else:
                self._file, self._parts = f, []
        if self._file is not None:
            try:
                _write_all(self._file, x)
            except OSError as e:  # the temp folder filled up: what it holds comes back to memory
                self._keep_in_memory(e, self._file)
        if self._file is None:
            self._parts.append(x)
        self._n += x.size

    def _keep_in_memory(self, e: OSError, f) -> None:
        log.warning("keeping the utterance in memory for Export last (%s)", e)
        if f is not None and self._file is f:  # spooled so far: read what it holds back
            f.seek(0)
            self._parts = [np.frombuffer(f.read(self._n * 4), np.float32).copy()]
        if f is not None:
            f.close()
        self._file, self._spool_after = None, math.inf

    def audio(self) -> np.ndarray:
        """All of it, in order (a read-only memory map when spooled); the take is empty after."""
        f, n, parts = self._file, self._n, self._parts
        self._parts, self._file, self._n = [], None, 0
        if f is None:
            return np.concatenate(parts) if parts else np.zeros(0, np.float32)
        try:
            return np.memmap(f, np.float32, mode="r", shape=(n,)) if n else np.zeros(0, np.float32)
        finally:
            f.close()  # the map keeps the (unnamed) file's data until it is dropped


def _write_all(f, x: np.ndarray) -> None:
    """Write ``x``'s bytes to the unbuffered file ``f`` (a short write is a full disk)."""
    data = memoryview(x).cast("B")
    while data:
        n = f.write(data)
        if not n:
            raise OSError(28, "No space left on device (short write)")
        data = data[n:]


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


def _config_dir() -> Path:
    """``~/.config/wavern`` (:func:`wavern.app.voices.user_config_dir`, shared with `say` and `render`);
    a lexicon saved by an older window in Qt's per-application folder (``~/.config/wavern/wavern``)
    moves there."""
    from wavern.app.voices import user_config_dir

    new = user_config_dir()
    old = Path(QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppConfigLocation))
    if old != new and (old / "lexicon.json").is_file() and not (new / "lexicon.json").exists():
        try:
            new.mkdir(parents=True, exist_ok=True)
            (old / "lexicon.json").replace(new / "lexicon.json")
            log.info("moved %s to %s", old / "lexicon.json", new / "lexicon.json")
        except OSError as e:
            log.warning("could not move %s to %s (%s); using it where it is", old / "lexicon.json", new, e)
            return old
    return new


def _buddy_sliders(form: QFormLayout) -> None:
    """A label's Alt + letter focuses its buddy only where the buddy takes focus itself: a
    :class:`_Slider` row passes focus on to its slider but takes none, so its label names the slider."""
    for i in range(form.rowCount()):
        field = form.itemAt(i, QFormLayout.ItemRole.FieldRole)
        label = form.itemAt(i, QFormLayout.ItemRole.LabelRole)
        if field is not None and label is not None and isinstance(field.widget(), _Slider):
            label.widget().setBuddy(field.widget().slider)


class _Slider(QWidget):
    """A horizontal slider over [lo, hi] in ``step``s with its value shown beside it."""

    def __init__(self, lo: float, hi: float, step: float, value: float, fmt: str):
        super().__init__()
        self.step, self.fmt = step, fmt
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(round(lo / step), round(hi / step))
        self.label = QLabel()
        self.label.setMinimumWidth(48)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.slider)
        row.addWidget(self.label)
        self.setFocusProxy(self.slider)  # a form label's buddy, and focus given to the row, reach the slider
        self.name = ""
        self.slider.valueChanged.connect(lambda _: self._show())
        self.set_value(value)
        self._show()

    def _show(self) -> None:
        text = self.fmt.format(self.value())
        self.label.setText(text)
        # a screen reader reads QSlider's value as its step count (speed 1.00x was "20"): the name says it
        self.slider.setAccessibleName(f"{self.name} {text}".strip())
        self.slider.setAccessibleDescription(text)

    def set_name(self, name: str) -> None:
        """What a screen reader calls it: the name and the value as shown ("speed 1.00×")."""
        self.name = name
        self.setAccessibleName(name)
        self._show()

    def value(self) -> float:
        return self.slider.value() * self.step

    def set_value(self, x: float) -> None:
        self.slider.setValue(round(float(x) / self.step))


def audio_path(path: str, chosen_filter: str = "") -> str:
    """An export path with an audio suffix: one the user typed (.wav, .flac) is kept; otherwise the
    chosen file type's is added ("chapter.1" with FLAC chosen -> "chapter.1.flac"; a name with a
    dot was refused, and the FLAC filter without a typed suffix still wrote a WAV)."""
    if Path(path).suffix.lower() in (".wav", ".flac"):
        return path
    return path + (".flac" if "flac" in chosen_filter.lower() else ".wav")


class MainWindow(QMainWindow):
    """The wavern window.

    Args:
        voice_path: voice folder to load; None = the one in the settings, else the default.
        settings: where settings persist (default ``QSettings("wavern", "wavern")``).
        config_dir: folder of ``lexicon.json`` (default: the user's config folder for wavern).
        silent: never open a sound card (SilentPlayback only).
        clock_speed, keep_played: passed to the worker (tests).
    """

    def __init__(self, *, voice_path: str | Path | None = None, settings: QSettings | None = None,
                 config_dir: str | Path | None = None, silent: bool = False, buffer_s: float = BUFFER_S,
                 clock_speed: float = 1.0, keep_played: bool = False):
        super().__init__()
        self.setWindowTitle("wavern")
        self.settings = settings or QSettings("wavern", "wavern")
        self.config_dir = Path(config_dir) if config_dir is not None else _config_dir()
        self.buffer_s = buffer_s
        self.sample_rate = 22050
        self.voice_state: VoiceState | None = None
        self._lexicon_problem: str | None = None  # why lexicon.json could not be used, until it is replaced
        self._voice_problem: str | None = None  # why the asked-for voice was not the one loaded (said once)
        self._job_start: dict[int, int] = {}  # stream-clock position of each request's first chunk
        self._heard_until: int | None = None  # the stream clock when Stop was last pressed
        self.lexicon = self._load_lexicon()
        self.devices = [] if silent else usable_output_devices(self.sample_rate)
        self.worker = SpeechWorker(silent=silent or not self.devices, buffer_s=buffer_s, clock_speed=clock_speed,
                                   keep_played=keep_played, parent=self)
        self.worker.set_lexicon(self.lexicon)
        self.history = ScopeHistory(sample_rate=self.sample_rate)
        self.stats: list[UtteranceStats] = []  # the last STATS_KEPT finished utterances, in order
        self.last_audio: np.ndarray | None = None
        # id -> (anchor, chunks, where the request's text has code points the editor counts twice)
        self._jobs: dict[int, tuple[QTextCursor, _Take, list[int]]] = {}
        self._words: list[tuple[int, int, int, int, int]] = []  # (start, end, job, char a, char b)
        self._word_starts: list[int] = []
        self._chunks: list[tuple[int, int, int, tuple[int, int]]] = []  # (start, end, job, text span)
        self._preview_id = 0
        self._sayt: QTextCursor | None = None  # speak-as-you-type: start of the uncommitted text
        self._sayt_ssml_said = False  # that it waits while the text is SSML, told once
        self._build_ui()
        self._build_actions()
        self._connect()
        self._restore_settings()
        self._pick_voice(voice_path)
        self.timer = QTimer(self)
        self.timer.setInterval(TICK_MS)
        self.timer.timeout.connect(self._tick)
        self.timer.start()
        self.autosave = QTimer(self)  # settings and text kept through a kill or crash, not only a close
        self.autosave.setInterval(AUTOSAVE_MS)
        self.autosave.timeout.connect(self.save_settings)
        self.autosave.start()

    # ------------------------------------------------------------------ construction
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
        self.speed = _Slider(0.5, 2.0, 0.05, 1.0, "{:.2f}×")
        self.volume = _Slider(0.0, 2.0, 0.05, 1.0, "{:.2f}")
        self.pause = _Slider(0.0, 1.5, 0.05, 0.0, "{:.2f} s")
        # espeak-ng's units, over the ranges the voice was trained on (PROSODY_LIMITS); the next request
        self.pitch = _Slider(*PROSODY_LIMITS[1], 1.0, PROSODY_DEFAULT[1], "{:.0f}")
        self.pitch_range = _Slider(*PROSODY_LIMITS[2], 1.0, PROSODY_DEFAULT[2], "{:.0f}")
        for s in (self.pitch, self.pitch_range):
            s.setEnabled(False)  # until a voice that reads them loads
            s.setToolTip("Needs a voice trained with the prosody input")
        self.passes = _Slider(0, 16, 1, 0, "{:.0f}")  # set to the voice's own on load; the next request
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
        _buddy_sliders(f)
        controls = QGroupBox("Delivery (acts on the next chunk)")
        f = QFormLayout(controls)
        f.addRow("spee&d", self.speed)
        f.addRow("vo&lume", self.volume)
        f.addRow("sentence p&ause", self.pause)
        _buddy_sliders(f)
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

    def _connect(self) -> None:
        w = self.worker
        w.voiceLoaded.connect(self._on_voice_loaded)
        w.voiceFailed.connect(self._on_voice_failed)
        w.outputChanged.connect(self._on_output_changed)
        w.started.connect(self._on_started)
        w.chunkReady.connect(self._on_chunk)
        w.finished.connect(self._on_finished)
        w.exported.connect(self._on_exported)
        w.failed.connect(lambda job, msg: self.report_problem(msg))
        w.previewReady.connect(self._on_preview)
        w.idle.connect(lambda: self.editor.highlight(sentence=None, word=None))
        self.preview_timer = QTimer(self)
        self.preview_timer.setSingleShot(True)
        self.preview_timer.setInterval(PREVIEW_DELAY_MS)
        self.preview_timer.timeout.connect(self.refresh_preview)
        self.editor.textChanged.connect(self.preview_timer.start)
        self.editor.textChanged.connect(self._on_text_changed)
        self._loading: str | None = None  # the voice folder the worker is loading, if any
        self._voice_timer = QTimer(self)
        self._voice_timer.setSingleShot(True)
        self._voice_timer.setInterval(VOICE_CHOICE_MS)
        self._voice_timer.timeout.connect(lambda: self._on_voice_chosen(self.voice_combo.currentIndex(), now=True))
        self.voice_combo.currentIndexChanged.connect(self._on_voice_chosen)
        self.device_combo.currentIndexChanged.connect(self._on_device_chosen)
        for s in (self.speed, self.volume, self.pause):
            s.slider.valueChanged.connect(self._on_live_changed)

    # ------------------------------------------------------------------ voices and output
    def _pick_voice(self, voice_path: str | Path | None) -> None:
        from wavern.app.voices import find_voices

        voices = find_voices()
        wanted = Path(voice_path) if voice_path else None
        if wanted is None and self.settings.value("voice"):
            saved = Path(str(self.settings.value("voice")))
            wanted = saved if (saved / "voice.json").is_file() else None
        if wanted is not None and all(v.path.resolve() != wanted.resolve() for v in voices):
            from wavern.app.voices import voice_info

            voices.insert(0, voice_info(wanted))
        self.voice_combo.blockSignals(True)
        self.voice_combo.clear()
        self._voice_infos = voices
        pick = -1
        for i, v in enumerate(voices):
            self.voice_combo.addItem(v.name if v.error is None else f"{v.name} (invalid)", str(v.path))
            self.voice_combo.setItemData(i, v.error or v.card, Qt.ItemDataRole.ToolTipRole)
            if v.error is not None:
                self.voice_combo.model().item(i).setEnabled(False)
            elif pick < 0 and (wanted is None or v.path.resolve() == wanted.resolve()):
                pick = i
        self.voice_combo.blockSignals(False)
        problem = None
        if pick < 0 and wanted is not None:  # the asked-for (or saved) voice is broken: the first good one
            bad = next((v for v in voices if v.path.resolve() == wanted.resolve()), None)
            problem = f"Voice {wanted} could not be used ({bad.error if bad else 'not found'})"
            pick = next((i for i, v in enumerate(voices) if v.error is None), -1)
        if pick < 0:
            self.card.setText("")
            self.report_problem((problem + ". " if problem else "") +
                                "No voice installed: build one with ./setup.sh (see the README), "
                                "or start with `wavern gui --voice PATH`.")
            return
        self.voice_combo.setCurrentIndex(pick)
        self._on_voice_chosen(pick, now=True)
        if problem:
            self._voice_problem = f"{problem}; using {voices[pick].name}."
            self.report_problem(self._voice_problem)

    def _on_voice_chosen(self, index: int, *, now: bool = False) -> None:
        """Show the chosen voice's card at once; load it once the choice has rested for
        ``VOICE_CHOICE_MS`` (arrowing through the list stopped the speech and loaded every voice)."""
        if index < 0:
            return
        self.card.setText(self._voice_infos[index].card)
        if not now:
            self._set_voice_ready(False)  # until it rests: Speak now would speak with the voice being left
            self._voice_timer.start()
            return
        self._voice_timer.stop()
        info = self._voice_infos[index]
        loaded = self.voice_state is not None and str(self.voice_state.path) == str(info.path)
        if loaded and self._loading is None:  # back to the voice in use: nothing to stop or load
            self._set_voice_ready(True)
            return
        self._set_voice_ready(False)
        m = self.worker.meters()
        if m.busy or m.queued_ms > 0:  # the load would wait behind the speech (hours for a long text)
            self.stop()
            self.statusBar().showMessage(f"Stopped speaking to load voice {info.name}…")
        else:
            self.statusBar().showMessage(f"Loading voice {info.name}…")
        self._loading = str(info.path)
        self.worker.load_voice(info.path)

    def _on_voice_loaded(self, state: VoiceState) -> None:
        if self._loading == str(state.path):
            self._loading = None
        self.voice_state = state
        self.report_problem(None, only_if="Voice not loaded")  # an earlier choice's failure is old news
        if self._loading is None and not self._voice_timer.isActive():  # (a newer choice, loading or
            self._show_voice_in_list(state.path)  # waiting, keeps the list where the user left it)
        self.sample_rate = state.sample_rate
        self.speaker_combo.clear()
        self.speaker_combo.addItems(list(state.speakers))
        saved = self._saved_speakers().get(str(state.path))
        if saved in state.speakers:  # the user's choice for this voice, kept across restarts
            self.speaker_combo.setCurrentText(saved)
        elif state.default_speaker in state.speakers:  # what `wavern say` uses, not the alphabet's first
            self.speaker_combo.setCurrentText(state.default_speaker)
        self.speaker_combo.setEnabled(len(state.speakers) > 1)
        for s in (self.pitch, self.pitch_range):
            s.setEnabled(state.prosody)
            s.setToolTip("" if state.prosody else "This voice was trained without the prosody input")
        self.passes.set_value(state.melmatch_passes)
        self._set_voice_ready(True)
        if self._lexicon_problem:  # said now: the loading message would have hidden it at start-up
            self.report_problem(f"{self._lexicon_problem} (Fix word keeps it as lexicon.json.bad)")
        elif self._voice_problem:
            self.report_problem(self._voice_problem)
            self._voice_problem = None
        else:
            self.statusBar().showMessage(f"Voice {state.name} ready (warm-up {state.warmup_s:.1f} s)", 8000)

    def _on_voice_failed(self, message: str) -> None:
        self._loading = None
        if self.voice_state is not None:  # the worker still has the voice it had: back to it
            if not self._voice_timer.isActive():  # unless the user has chosen another since
                self._show_voice_in_list(self.voice_state.path)
                self._set_voice_ready(True)
            self.report_problem(f"Voice not loaded: {message}; still speaking with {self.voice_state.name}")
            return
        self._set_voice_ready(False)
        self.report_problem(f"Voice not loaded: {message}")

    def _show_voice_in_list(self, path) -> None:
        """Select ``path`` in the voice list without loading it (it is the one loaded)."""
        i = self.voice_combo.findData(str(path))
        if i >= 0 and i != self.voice_combo.currentIndex():
            self.voice_combo.blockSignals(True)
            self.voice_combo.setCurrentIndex(i)
            self.voice_combo.blockSignals(False)
            self.card.setText(self._voice_infos[i].card)

    def report_problem(self, message: str | None, *, only_if: str = "") -> None:
        """Show ``message`` beside the status line until it is dismissed (a click, Space on it) or
        replaced, and announce it to screen readers; None dismisses (with ``only_if``: only a problem
        starting with those words, as a later export that worked dismisses an export's failure)."""
        if message is None:
            if self.problem_button.text()[2:].startswith(only_if):
                self.problem_button.setVisible(False)
                self.problem_button.setText("")
            return
        self.problem_button.setText("\u26a0 " + (message if len(message) <= 90 else message[:89] + "…"))
        self.problem_button.setToolTip(message + "\n(click to dismiss)")
        self.problem_button.setAccessibleDescription(message)
        self.problem_button.setVisible(True)
        self.statusBar().showMessage(message, 10000)
        try:  # Qt 6.8+: a screen reader says it without moving focus
            from PySide6.QtGui import QAccessible, QAccessibleAnnouncementEvent

            QAccessible.updateAccessibility(QAccessibleAnnouncementEvent(self.problem_button, message))
        except (ImportError, AttributeError, RuntimeError):
            pass

    def _on_exported(self, job: int, path: str) -> None:
        self.statusBar().showMessage(f"Wrote {path}", 8000)
        self.report_problem(None, only_if="Export")  # an export that worked: an earlier one's failure is old news

    def set_text_points(self, points: int) -> None:
        """The text size of the editor and of what will be spoken (the rest follows the desktop's font)."""
        self.text_points = self.editor.set_text_points(points)
        font = self.preview.font()
        font.setPointSize(max(6, self.text_points - 2))
        self.preview.setFont(font)

    def _set_voice_ready(self, ready: bool) -> None:
        for a in (self.speak_action, self.queue_action, self.export_all_action, self.sayt_action):
            a.setEnabled(ready)

    def _on_device_chosen(self, index: int) -> None:
        device = self.device_combo.itemData(index)
        silent = device == SILENT
        self.worker.set_output(None if silent else int(device), silent=silent)
        self._on_output_changed("Output: silent playback, paced in real time (use Export to hear it)" if silent
                                else f"Output: {self.device_combo.itemText(index)}")

    def _on_output_changed(self, text: str) -> None:
        """The worker fell back to silent playback (the device failed to open), or the user chose."""
        if "No audio device" in text:
            self.device_combo.blockSignals(True)
            self.device_combo.setCurrentIndex(0)
            self.device_combo.blockSignals(False)
        self._set_output_label(text)

    def _set_output_label(self, text: str) -> None:
        """The status bar's permanent output note, short (a long one cut every message off below ~1000
        px of width); the whole of it in its tooltip."""
        short = text
        if "No audio device" in text:
            short = "No audio device: silent playback"
        elif text.startswith("Output: silent playback"):
            short = "Output: silent playback"
        elif len(text) > 48:
            short = text[:45] + "…"
        self.output_label.setText(short)
        self.output_label.setToolTip(text)

    def _on_live_changed(self) -> None:
        self.worker.set_live(speed=self.speed.value(), volume=self.volume.value(), pause_s=self.pause.value())

    # ------------------------------------------------------------------ transport
    def speak_config(self) -> SpeakConfig:
        speaker = self.speaker_combo.currentText() or None
        prosody = self.voice_state is not None and self.voice_state.prosody
        return SpeakConfig(speed=self.speed.value(), volume=self.volume.value(), pause_s=self.pause.value(),
                           speaker=speaker, pitch=self.pitch.value() if prosody else None,
                           pitch_range=self.pitch_range.value() if prosody else None,
                           passes=round(self.passes.value()) if self.voice_state is not None else None)

    def speak(self, *, now: bool = True, text: str | None = None, start: int | None = None) -> int | None:
        """Speak the selection (or the whole text, or ``text`` found at ``start``); returns the job id."""
        if text is None:
            cur = self.editor.textCursor()
            if cur.hasSelection():
                text, start = cur.selectedText().replace("\u2029", "\n"), cur.selectionStart()
            else:
                text, start = self.editor.toPlainText(), 0
        if not text.strip():
            self.statusBar().showMessage("Nothing to say: type some text first.", 5000)
            return None
        text, start = self._as_ssml_part(text, start or 0)
        if now:  # what plays now stops: as Stop
            self._heard_until = self.worker.meters().position
            self.pause_action.setChecked(False)
            self.editor.highlight(sentence=None, word=None)
        job = self.worker.speak(text, self.speak_config(), now=now)
        anchor = QTextCursor(self.editor.document())
        anchor.setPosition(start or 0)
        self._jobs[job] = (anchor, _Take(SPOOL_AFTER_S * self.sample_rate),  # spans count code points,
                           astral_indices(text))                               # the editor UTF-16 units
        return job

    def _as_ssml_part(self, text: str, start: int) -> tuple[str, int]:
        """A part of an SSML document (a selection, a clause) as a document of its own, so its
        markup acts and is not read out: ``<speak>`` around it, and ``start`` moved back by as
        much, so the spans still land on the editor's characters."""
        if start < len(SSML_OPEN) or looks_like_ssml(text) or not looks_like_ssml(self.editor.toPlainText()):
            return text, start
        return SSML_OPEN + text + "</speak>", start - len(SSML_OPEN)

    def stop(self) -> None:
        self._heard_until = self.worker.meters().position  # Export last keeps only what was heard
        self.worker.stop()
        self.pause_action.setChecked(False)
        self.editor.highlight(sentence=None, word=None)

    def set_paused(self, paused: bool) -> None:
        m = self.worker.meters()
        if paused and not (m.busy or m.queued_ms > 0):  # nothing playing: a latched pause silenced what came next
            self.pause_action.blockSignals(True)
            self.pause_action.setChecked(False)
            self.pause_action.blockSignals(False)
            self.statusBar().showMessage("Nothing is playing: nothing to pause.", 4000)
            return
        self.worker.set_paused(paused)
        self.pause_action.setText("Resume" if paused else "Pause")
        self.statusBar().showMessage("Paused (Ctrl+Space resumes)" if paused else "Resumed", 4000)  # said, not only shown

    def set_speak_as_you_type(self, on: bool) -> None:
        """Committed clauses typed from now on are queued as they are finished."""
        if on:
            self._sayt = QTextCursor(self.editor.document())
            self._sayt.setPosition(self.editor.document().characterCount() - 1)
            self._sayt.setKeepPositionOnInsert(True)  # text typed at the mark is still uncommitted
        else:
            self._sayt = None
        if self.sayt_action.isChecked() != on:
            self.sayt_action.setChecked(on)
        self.statusBar().showMessage("Speak as you type: on, each clause once it is finished" if on
                                     else "Speak as you type: off", 4000)

    def _on_text_changed(self) -> None:
        if self._sayt is None or not self.sayt_action.isEnabled():
            return
        text = self.editor.toPlainText()
        if looks_like_ssml(text):  # markup's clauses are not whole documents: it is spoken whole
            if not self._sayt_ssml_said:
                self._sayt_ssml_said = True
                self.statusBar().showMessage("Speak as you type waits: SSML is spoken whole (Ctrl+Enter)", 6000)
            self._sayt.setPosition(self.editor.document().characterCount() - 1)
            return
        self._sayt_ssml_said = False
        start = text_index(text, self._sayt.position())
        end = committed_end(text, start)
        if end > start:
            self._sayt.setPosition(qt_position(text, end))
            if text[start:end].strip() and re.search(r"\w", text[start:end]):
                self.speak(now=False, text=text[start:end], start=qt_position(text, start))

    # ------------------------------------------------------------------ results from the worker
    def _on_started(self, job: int, text: str) -> None:
        self.statusBar().showMessage(f"Speaking: {text[:60]}" + ("…" if len(text) > 60 else ""), 4000)

    def _on_chunk(self, view: ChunkView) -> None:
        self.history.add(view)
        entry = self._jobs.get(view.job_id)
        if entry is not None:
            if not entry[1]:
                self._job_start[view.job_id] = view.position
            entry[1].append(view.samples)
        end = view.position + view.samples.shape[0]
        # Listed words timed at or after this chunk's start were never heard: made before a stop (the
        # clock went back), or timed by an earlier request that was stopped once all it had made had
        # played (a sentence's word timings come with its first chunk, so they run past a stop)
        went_back = bool(self._chunks) and self._chunks[-1][1] > view.position
        if went_back or (self._chunks and self._chunks[-1][2] != view.job_id):
            k = bisect.bisect_left(self._word_starts, view.position)
            del self._words[k:], self._word_starts[k:]
        while went_back and self._chunks and self._chunks[-1][1] > view.position:
            self._chunks.pop()
        self._chunks.append((view.position, end, view.job_id, view.text_span))
        if view.words:  # timings sent again (after a change of speed) replace those still to come
            k = self._resent_from(view)
            del self._words[k:], self._word_starts[k:]
        for w in view.words:
            self._words.append((w.start, w.end, view.job_id, w.char_start, w.char_end))
            self._word_starts.append(w.start)
        if len(self._chunks) > 4000:
            self._chunks = self._chunks[-2000:]
        if len(self._words) > 4000:
            self._words, self._word_starts = self._words[-2000:], self._word_starts[-2000:]

    def _resent_from(self, view: ChunkView) -> int:
        """Index in ``_words`` of the first word whose timing ``view`` sends again, else the end.
        The engine re-sends the words not yet begun where a change of speed lands, a suffix of the
        request's words, so they are found by their characters: by sample position, a slower voice
        sends a word later than its old start, and the old timing would stay beside the new."""
        first = view.words[0].char_start
        for k in range(len(self._words) - 1, -1, -1):
            job, ca = self._words[k][2], self._words[k][3]
            if job != view.job_id:
                break
            if ca == first:
                return k
        return len(self._words)

    def _on_finished(self, stats: UtteranceStats) -> None:
        self.stats.append(stats)
        if len(self.stats) > 2 * STATS_KEPT:  # (a window open all day: not every text it spoke)
            del self.stats[:-STATS_KEPT]
        self.dashboard.add(stats)
        entry = self._jobs.get(stats.job_id)
        if entry is not None and entry[1]:
            audio = entry[1].audio()
            start = self._job_start.pop(stats.job_id, None)
            if stats.stopped and start is not None and self._heard_until is not None:
                audio = audio[:max(0, self._heard_until - start)]  # made, but stopped before it was heard
            self.last_audio = audio if audio.size else self.last_audio
        if len(self._jobs) > 200:  # forget anchors of long-finished requests
            for k in sorted(self._jobs)[:-100]:
                del self._jobs[k]
                self._job_start.pop(k, None)  # (a request that failed after its first chunk left one)

    def _tick(self) -> None:
        m = self.worker.meters()
        self.waveform.set_position(m.position)
        self.spectrogram.set_position(m.position)
        sink = self.worker.sink  # the ring rounds its capacity up to a power of two: scale the bar to it
        capacity_ms = sink.ring.capacity * 1000.0 / sink.device_rate if sink is not None else self.buffer_s * 1000.0
        self.dashboard.set_live(m, capacity_ms=capacity_ms)
        if m.busy or m.queued_ms > 0:
            self.highlight_at(m.position)

    def highlight_at(self, position: int) -> None:
        """Mark the sentence and word heard at stream-clock ``position`` in the editor."""
        sentence = word = None
        for a, b, job, span in reversed(self._chunks[-64:]):
            if a <= position < b:
                anchor = self._jobs.get(job)
                if anchor is not None:
                    off, astral = anchor[0].position(), anchor[2]  # (once per request, not per tick)
                    sentence = tuple(off + i + bisect.bisect_left(astral, i) for i in span)
                break
        i = bisect.bisect_right(self._word_starts, position) - 1
        if i >= 0:
            a, b, job, ca, cb = self._words[i]
            anchor = self._jobs.get(job)
            if a <= position < b and anchor is not None:
                off, astral = anchor[0].position(), anchor[2]
                word = tuple(off + i + bisect.bisect_left(astral, i) for i in (ca, cb))
        self.editor.highlight(sentence=sentence, word=word)

    # ------------------------------------------------------------------ preview and lexicon
    def refresh_preview(self) -> None:
        text = self.editor.toPlainText()
        if not text.strip():
            self.preview.show_message("Nothing typed yet.")
            return
        self._preview_id += 1
        self.worker.preview(text, self._preview_id)

    def _on_preview(self, request: int, result) -> None:
        if request != self._preview_id:
            return  # an older text
        if isinstance(result, str):
            self.preview.show_message(result)
        else:
            self.preview.show_sentences(result)

    @property
    def lexicon_path(self) -> Path:
        return self.config_dir / "lexicon.json"

    def _load_lexicon(self) -> Lexicon:
        if not self.lexicon_path.is_file():
            return Lexicon()
        try:
            return Lexicon.load(self.lexicon_path)
        except WavernError as e:
            self._lexicon_problem = f"User lexicon ignored: {e}"  # shown once the voice has loaded
            log.warning("%s", self._lexicon_problem)
            return Lexicon()

    def set_lexicon(self, lexicon: Lexicon) -> None:
        """Save ``lexicon`` to lexicon.json and use it for the next requests and the preview. A file that
        could not be read at start-up is kept beside it (lexicon.json.bad) rather than overwritten."""
        try:
            self.config_dir.mkdir(parents=True, exist_ok=True)
            if self._lexicon_problem and self.lexicon_path.is_file():
                self.lexicon_path.replace(self.lexicon_path.with_name("lexicon.json.bad"))
                self._lexicon_problem = None
        except OSError as e:
            raise ParameterError(f"cannot save the lexicon in {self.config_dir}: {e.strerror or e}") from None
        lexicon.save(self.lexicon_path)
        self.lexicon = lexicon
        self.worker.set_lexicon(lexicon)
        self.refresh_preview()

    def fix_word(self) -> None:
        dialog = LexiconDialog(self.lexicon, word=self.editor.word_under_cursor() or None, parent=self)
        try:
            if dialog.exec():
                self.set_lexicon(dialog.lexicon())
                self.statusBar().showMessage(f"Saved {len(self.lexicon)} pronunciations to {self.lexicon_path}", 6000)
        except WavernError as e:
            self.report_problem(str(e))
        finally:
            dialog.deleteLater()

    # ------------------------------------------------------------------ export
    def export_last(self, path: str | Path) -> bool:
        """Write the last utterance's audio (as played) to ``path`` (.wav or .flac) off the GUI thread."""
        if self.last_audio is None:
            self.statusBar().showMessage("Nothing spoken yet to export.", 5000)
            return False
        self.worker.export_audio(self.last_audio, self.sample_rate, path)
        return True

    def export_text(self, path: str | Path) -> int | None:
        """Render the whole text to ``path`` (after anything queued); returns the job id."""
        text = self.editor.toPlainText()
        if not text.strip():
            self.statusBar().showMessage("Nothing to export: the text is empty.", 5000)
            return None
        self.statusBar().showMessage(f"Exporting to {path}…")
        return self.worker.export(text, path, self.speak_config())

    def _ask_path(self, title: str) -> str:
        path, chosen = QFileDialog.getSaveFileName(self, title, str(Path.home() / "wavern.wav"),
                                                   "WAV audio (*.wav);;FLAC audio (*.flac)")
        return audio_path(path, chosen) if path else path

    def _ask_export_last(self) -> None:
        path = self._ask_path("Export the last utterance")
        if path:
            self.export_last(path)

    def _ask_export_text(self) -> None:
        path = self._ask_path("Export the whole text")
        if path:
            self.export_text(path)

    # ------------------------------------------------------------------ settings and closing
    def _restore_settings(self) -> None:
        s = self.settings
        geometry = s.value("geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)

        def number(key: str, default, kind=float):
            try:  # a settings file edited by hand (or damaged) falls back to the default
                value = kind(s.value(key, default))
                return value if math.isfinite(value) else default
            except (TypeError, ValueError):
                log.warning("setting %s=%r is not a number; using %r", key, s.value(key), default)
                return default

        self.speed.set_value(number("speed", 1.0))
        self.volume.set_value(number("volume", 1.0))
        self.pause.set_value(number("pause_s", 0.0))
        self.pitch.set_value(number("pitch", PROSODY_DEFAULT[1]))
        self.pitch_range.set_value(number("pitch_range", PROSODY_DEFAULT[2]))
        self.editor.setPlainText(str(s.value("text", "")))
        self.set_text_points(number("text_points", TEXT_POINTS, int))
        device = number("device", SILENT, int)
        i = self.device_combo.findData(device)
        self.device_combo.setCurrentIndex(i if i >= 0 else (1 if self.devices else 0))
        self._on_device_chosen(self.device_combo.currentIndex())
        if not self.devices:
            self._set_output_label("No audio device: speech plays silently in real time; use Export to hear it")
        self.sayt_action.setChecked(str(s.value("speak_as_you_type", "false")).lower() == "true")
        self._on_live_changed()

    def _saved_speakers(self) -> dict:
        """{voice folder: speaker} the user chose (settings "speakers", JSON; a damaged one is empty)."""
        try:
            d = json.loads(str(self.settings.value("speakers", "{}")))
        except ValueError:
            return {}
        return d if isinstance(d, dict) else {}

    def save_settings(self) -> None:
        s = self.settings
        if self.voice_state is not None and self.speaker_combo.currentText():
            speakers = self._saved_speakers()
            speakers[str(self.voice_state.path)] = self.speaker_combo.currentText()
            s.setValue("speakers", json.dumps(speakers))
        s.setValue("geometry", self.saveGeometry())
        s.setValue("speed", self.speed.value())
        s.setValue("volume", self.volume.value())
        s.setValue("pause_s", self.pause.value())
        s.setValue("pitch", self.pitch.value())
        s.setValue("pitch_range", self.pitch_range.value())
        s.setValue("text", self.editor.toPlainText())
        s.setValue("text_points", self.text_points)
        s.setValue("device", int(self.device_combo.currentData()))
        s.setValue("speak_as_you_type", self.sayt_action.isChecked())
        if self.voice_combo.currentIndex() >= 0:
            s.setValue("voice", self.voice_combo.currentData())
        s.sync()

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        self.save_settings()
        self.autosave.stop()
        self.timer.stop()
        self.preview_timer.stop()
        self.worker.shutdown()
        super().closeEvent(event)


def run_window(voice: str | None = None) -> int:
    """Open the window (``wavern gui``); returns the application's exit code.

    Args:
        voice: a voice name, folder, or None for the last used / default voice.

    Raises:
        ParameterError, VoiceFileError: ``voice`` names no usable voice.
    """
    path = None
    if voice:
        from wavern.app.voices import resolve_voice

        path = resolve_voice(voice)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setOrganizationName("wavern")
    app.setApplicationName("wavern")
    window = MainWindow(voice_path=path)
    window.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)  # tear Qt objects down inside the event loop
    window.show()
    return int(app.exec())


def _main(argv: list[str] | None = None) -> int:
    """``python -m wavern.app.window --voice V --screenshot docs/screenshot.png [--text T]``:
    speak a sentence into silent playback and save a grab of the window while it plays out."""
    import argparse
    import tempfile

    p = argparse.ArgumentParser(prog="python -m wavern.app.window")
    p.add_argument("--voice", required=True)
    p.add_argument("--screenshot", required=True)
    p.add_argument("--text", default="The quick brown fox jumps over the lazy dog. Then, at 3:30 p.m., "
                                     "Dr. Smith paid $12.50 for coffee!")
    args = p.parse_args(argv)
    from wavern.app.voices import resolve_voice

    app = QApplication.instance() or QApplication(sys.argv[:1])
    tmp = Path(tempfile.mkdtemp(prefix="wavern-shot-"))
    window = MainWindow(voice_path=resolve_voice(args.voice), config_dir=tmp, silent=True,
                        settings=QSettings(str(tmp / "settings.ini"), QSettings.Format.IniFormat))
    window.resize(1280, 820)
    window.show()
    window.editor.setPlainText(args.text)
    state = {"done": False}

    def go() -> None:
        window.refresh_preview()
        window.speak(now=False, text="Hello.", start=0)  # a second bar in the latency history
        window.speak(now=False)
        poll.start(40)

    def grab() -> None:
        if state["done"]:
            return
        poll.stop()
        window.grab().save(args.screenshot)
        state["done"] = True
        window.close()

    def maybe_grab() -> None:  # in the second half of the text, while a word is lit
        word = window.editor.current_word
        if word is not None and word[0] >= len(args.text) // 2:
            grab()

    poll = QTimer(window)
    poll.timeout.connect(maybe_grab)
    window.worker.voiceLoaded.connect(lambda _: QTimer.singleShot(300, go))
    window.worker.idle.connect(lambda: QTimer.singleShot(0, grab) if len(window.stats) >= 2 else None)
    app.exec()
    return 0 if state["done"] else 1


if __name__ == "__main__":
    sys.exit(_main())
