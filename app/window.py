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
import logging
import math
import re
import sys
import tempfile
from pathlib import Path

import numpy as np
from PySide6.QtCore import QSettings, QStandardPaths, Qt, QTimer
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QApplication, QFileDialog, QMainWindow

from wavern.app.take import Take as _Take
from wavern.app.text_positions import astral_indices, committed_end, qt_position, text_index
from wavern.app.widgets import LexiconDialog, ScopeHistory
from wavern.app.widgets.editor import TEXT_POINTS
from wavern.app.window_layout import SILENT, WindowLayout
from wavern.app.worker import ChunkView, SpeechWorker, UtteranceStats, VoiceState, usable_output_devices
from wavern.conditioning.config import PROSODY_DEFAULT
from wavern.conditioning.frontend.lexicon import Lexicon
from wavern.conditioning.frontend.ssml import looks_like_ssml
from wavern.engine.chunk import SpeakConfig
from wavern.errors import ParameterError, WavernError

__all__ = ["MainWindow", "run_window", "committed_end", "SILENT"]

log = logging.getLogger(__name__)

AUTOSAVE_MS = 5000  # settings and the text are saved this often (and on close)
TICK_MS = 33  # meter / view refresh period
BUFFER_S = 1.0  # generation runs at most this far ahead of playback: controls are heard within it
PREVIEW_DELAY_MS = 250  # typing pause before the preview is refreshed
SSML_OPEN = "<speak>"  # put around a part of an SSML document spoken alone
VOICE_CHOICE_MS = 500  # a voice chosen in the list loads once the choice has rested this long
SPOOL_AFTER_S = 600  # a request's audio (kept for Export last) goes to a temporary file past this
STATS_KEPT = 500  # finished utterances' stats the window keeps

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


def audio_path(path: str, chosen_filter: str = "") -> str:
    """An export path with an audio suffix: one the user typed (.wav, .flac) is kept; otherwise the
    chosen file type's is added ("chapter.1" with FLAC chosen -> "chapter.1.flac"; a name with a
    dot was refused, and the FLAC filter without a typed suffix still wrote a WAV)."""
    if Path(path).suffix.lower() in (".wav", ".flac"):
        return path
    return path + (".flac" if "flac" in chosen_filter.lower() else ".wav")


class MainWindow(WindowLayout, QMainWindow):
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
            self.voice_combo.setItemData(i, v.error or v.description, Qt.ItemDataRole.ToolTipRole)
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
        self.card.setText(self._voice_infos[index].description)
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
            self.card.setText(self._voice_infos[i].description)

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
