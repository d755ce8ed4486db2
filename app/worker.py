"""The desktop window's worker: owns the :class:`~wavern.engine.Voice`, runs it off the GUI thread.

The window hands requests to a :class:`SpeechWorker` (speak, queue, export, load a voice, preview
the front end) and gets results back as Qt signals, queued onto the GUI thread; it polls the cheap
counters (:meth:`SpeechWorker.meters`) from a ``QTimer``. One worker thread runs the requests in
order, writes each chunk to the output in pieces of :data:`PIECE_SAMPLES` and prepares what the
views draw (:class:`ChunkView`), so painting is only painting. Without a sound card the output is
:class:`SilentPlayback`, which drains the same ring in real time with the device callback's code,
so first audio, underruns, the views and the word highlight behave as with a device.

The stream clock: every sample handed to an output gets an absolute index across requests and
sinks; ``stop()`` drops what was queued and rewinds the clock by as much, so the next request
continues where playback stopped.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import logging
import threading
import time
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, Signal

from wavern.engine.chunk import SpeakConfig
from wavern.engine.sinks import PacedSink, Sink
from wavern.errors import AudioDeviceError, ParameterError, VoiceFileError, WavernError

__all__ = ["SpeechWorker", "SilentPlayback", "OutputDevice", "usable_output_devices", "ChunkView",
           "WordSpan", "UtteranceStats", "Meters", "VoiceState", "SpectrumTap", "envelope",
           "PIECE_SAMPLES", "ENVELOPE_SAMPLES", "SPECTRUM_HOP", "SPECTRUM_WINDOW"]

log = logging.getLogger(__name__)

PIECE_SAMPLES = 256  # ~12 ms: sink writes are split so the clock and stop act at this grain
ENVELOPE_SAMPLES = 64  # one (min, max) pair per this many samples for the waveform view
SPECTRUM_WINDOW = 512  # Hann window of the spectrogram view (23 ms at 22.05 kHz)
SPECTRUM_HOP = 256  # one spectrogram column per this many samples
SPECTRUM_FLOOR_DB = -90.0  # the bottom of the colour scale


# ----------------------------------------------------------------------------- data sent to the GUI
@dataclasses.dataclass(frozen=True)
class WordSpan:
    """A word on the stream clock: characters ``[char_start, char_end)`` of the request's text
    are heard during samples ``[start, end)``."""

    char_start: int
    char_end: int
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class ChunkView:
    """One chunk as the views need it, prepared on the worker thread.

    Attributes:
        job_id: the request it belongs to.
        position: stream-clock index of ``samples[0]``.
        samples: (n,) float32 audio as played.
        envelope: (ceil(n / ENVELOPE_SAMPLES), 2) float32 min and max per group of samples.
        spectrum: (frames, SPECTRUM_WINDOW // 2 + 1) uint8 magnitude, 0 = SPECTRUM_FLOOR_DB,
            255 = 0 dB full scale; column ``k`` covers stream samples from
            ``spectrum_position + k * SPECTRUM_HOP``.
        spectrum_position: stream-clock start of the first column.
        text_span: (start, end) characters of the request's text this chunk voices.
        words: the words whose timings arrived with this chunk.
    """

    job_id: int
    position: int
    samples: np.ndarray
    envelope: np.ndarray
    spectrum: np.ndarray
    spectrum_position: int
    text_span: tuple[int, int]
    words: tuple[WordSpan, ...]


@dataclasses.dataclass(frozen=True)
class UtteranceStats:
    """Measurements of one spoken request.

    first_audio_ms: from the worker taking the request to its first samples reaching the output.
    rtf: generator compute seconds over audio seconds (below 1: faster than real time).
    min_headroom_ms: fewest milliseconds queued at any output callback while it was generated.
    chunks_after_stop: chunks the generator still produced after ``stop()`` (0 or 1).
    """

    job_id: int
    text: str
    first_audio_ms: float | None
    rtf: float
    audio_s: float
    underruns: int
    min_headroom_ms: float | None
    stopped: bool
    chunks_after_stop: int = 0


@dataclasses.dataclass(frozen=True)
class Meters:
    """Counters the GUI polls: reading them costs a few attribute loads."""

    position: int  # stream-clock sample being played now
    queued_ms: float  # generated but not yet played
    min_headroom_ms: float | None  # since the current request's first audio
    underruns: int  # in the current request
    paused: bool
    busy: bool  # a request is running or queued
    job_id: int | None  # the request being generated


@dataclasses.dataclass(frozen=True)
class VoiceState:
    name: str
    path: Path
    speakers: tuple[str, ...]
    sample_rate: int
    warmup_s: float
    prosody: bool = False  # the voice's pitch and pitch range can be set (SpeakConfig.pitch)
    melmatch_passes: int = 0  # the voice's own mel-matching passes (SpeakConfig.passes; 0: none)
    default_speaker: str | None = None  # the speaker a request without one gets (``inference.speaker``)


@dataclasses.dataclass(frozen=True)
class OutputDevice:
    """An output device that can play the voice, directly or through DeviceSink's resampler."""

    index: int
    name: str
    rate: int
    resampled: bool


def usable_output_devices(sample_rate: int) -> list[OutputDevice]:
    """Output devices that accept ``sample_rate`` mono float32, or their own default rate
    (DeviceSink then resamples); devices that accept neither are left out. [] without PortAudio."""
    from wavern.engine.sinks import list_output_devices

    devices = list_output_devices()
    if not devices:
        return []
    import sounddevice as sd

    out = []
    for d in devices:
        rate = None
        for r in (sample_rate, int(d.get("default_samplerate") or 0)):
            if r <= 0:
                continue
            try:
                sd.check_output_settings(device=d["index"], samplerate=r, channels=1, dtype="float32")
                rate = r
                break
            except Exception:  # noqa: BLE001 - PortAudioError / ValueError: this rate is refused
                continue
        if rate is not None:
            out.append(OutputDevice(int(d["index"]), str(d["name"]), rate, rate != sample_rate))
    return out


# ----------------------------------------------------------------------------- view preparation
def envelope(samples: np.ndarray, group: int = ENVELOPE_SAMPLES) -> np.ndarray:
    """(ceil(n / group), 2) min and max of each group of ``group`` samples (the last may be short)."""
    x = np.asarray(samples, np.float32)
    n = x.shape[0]
    if n == 0:
        return np.zeros((0, 2), np.float32)
    pad = (-n) % group
    padded = np.concatenate([x, np.full(pad, x[-1], np.float32)]) if pad else x
    g = padded.reshape(-1, group)
    return np.stack([g.min(axis=1), g.max(axis=1)], axis=1)


class SpectrumTap:
    """Spectrogram columns of a stream fed in arbitrary pieces, equal to framing the whole stream.

    Column ``k`` is ``|rfft(hann * x[o + k hop : o + k hop + window])|`` in dB relative to a
    full-scale sine, clipped to [SPECTRUM_FLOOR_DB, 0] and scaled to uint8; ``o`` is the
    stream position given to :meth:`reset`.
    """

    def __init__(self, *, window: int = SPECTRUM_WINDOW, hop: int = SPECTRUM_HOP):
        self.window, self.hop = window, hop
        self._hann = np.hanning(window + 1)[:-1].astype(np.float32)  # periodic Hann
        self._ref = float(self._hann.sum()) / 2.0  # a full-scale sine's peak magnitude
        self.reset(0)

    def reset(self, position: int) -> None:
        self._buf = np.zeros(0, np.float32)
        self._next = position  # stream position of the next column's first sample

    def feed(self, samples: np.ndarray) -> tuple[np.ndarray, int]:
        """Append samples; returns (columns (k, window // 2 + 1) uint8, position of the first)."""
        self._buf = np.concatenate([self._buf, np.asarray(samples, np.float32)])
        k = 0 if self._buf.shape[0] < self.window else 1 + (self._buf.shape[0] - self.window) // self.hop
        start = self._next
        if k == 0:
            return np.zeros((0, self.window // 2 + 1), np.uint8), start
        idx = np.arange(k)[:, None] * self.hop + np.arange(self.window)[None, :]
        mag = np.abs(np.fft.rfft(self._buf[idx] * self._hann, axis=1)) / self._ref
        db = 20.0 * np.log10(np.maximum(mag, 10.0 ** (SPECTRUM_FLOOR_DB / 20.0)))
        cols = np.round((db - SPECTRUM_FLOOR_DB) * (255.0 / -SPECTRUM_FLOOR_DB)).clip(0, 255).astype(np.uint8)
        self._buf = self._buf[k * self.hop:]
        self._next = start + k * self.hop
        return cols, start


# ----------------------------------------------------------------------------- silent output
class SilentPlayback(PacedSink):
    """An output that plays nothing, paced like a sound card: :class:`~wavern.engine.sinks.PacedSink`
    (the device callback's own reads of the ring, its pre-roll, underrun and headroom counters),
    its clock running ``clock_speed`` times real time (1 in the app; faster in tests).
    With ``keep=True`` the samples it "played" are kept (:attr:`played`).
    """

    def __init__(self, *, sample_rate: int, buffer_s: float = 4.0, blocksize: int = 256, clock_speed: float = 1.0,
                 keep: bool = False):
        if clock_speed <= 0:
            raise ParameterError(f"clock_speed must be > 0, found {clock_speed}")
        clock = time.perf_counter if clock_speed == 1.0 else (lambda: clock_speed * time.perf_counter())
        super().__init__(sample_rate=sample_rate, buffer_s=buffer_s, blocksize=blocksize, keep=keep, clock=clock)
        self.played_at_abort: int | None = None  # played_samples when abort() was called

    def abort(self) -> None:
        """Drop the queue and stop the clock at once (a block being read still completes)."""
        self.played_at_abort = self.played_samples
        super().abort()


# ----------------------------------------------------------------------------- requests
@dataclasses.dataclass
class _Job:
    id: int
    kind: str  # "speak" | "export" | "load"
    text: str = ""
    config: SpeakConfig = dataclasses.field(default_factory=SpeakConfig)
    path: Path | None = None
    seed: int = 0
    cancelled: bool = False  # stop() came while the job was starting


class SpeechWorker(QObject):
    """Owns the voice and the output; runs requests one at a time on its own thread.

    Args:
        device: output device index, or None for the system default; ignored with ``silent``.
        silent: always play through :class:`SilentPlayback` (no sound card).
        buffer_s: how far generation may run ahead of playback (the ring's capacity).
        clock_speed: pace of :class:`SilentPlayback` relative to real time.
        keep_played: SilentPlayback keeps what it played (tests).

    Public methods are called from the GUI thread and return at once.
    """

    voiceLoaded = Signal(object)  # VoiceState
    voiceFailed = Signal(str)
    outputChanged = Signal(str)  # a line for the status bar
    started = Signal(int, str)  # job id, text
    chunkReady = Signal(object)  # ChunkView
    finished = Signal(object)  # UtteranceStats
    exported = Signal(int, str)  # job id, path
    failed = Signal(int, str)  # job id, message
    previewReady = Signal(int, object)  # request id, list[Sentence] or an error message (str)
    idle = Signal()  # nothing queued and everything played

    def __init__(self, *, device: int | None = None, silent: bool = False, buffer_s: float = 4.0,
                 clock_speed: float = 1.0, keep_played: bool = False, parent: QObject | None = None):
        super().__init__(parent)
        self.device = device
        self.silent = silent
        self.buffer_s = buffer_s
        self.clock_speed = clock_speed
        self.keep_played = keep_played
        self.speed, self.volume, self.pause_s = 1.0, 1.0, None
        self._voice = None
        self._lexicon = None
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: collections.deque[_Job] = collections.deque()
        self._current: _Job | None = None
        self._control = None  # StreamControl of the running stream
        self._live = False  # whether set_live reaches it (speaking: yes; exporting: no)
        self._sink: Sink | None = None
        self._paused = False
        self._written = 0  # stream clock: samples handed to outputs, minus those dropped by stop
        self._sink_base = 0  # stream clock at the current output's first sample
        self._next_id = 1
        self._quit = False
        self._side = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="wavern-side")
        self._thread = threading.Thread(target=self._run, name="wavern-worker", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ requests (GUI thread)
    def _submit(self, job_kind: str, **kw) -> int:
        with self._lock:
            job = _Job(self._next_id, job_kind, **kw)
            self._next_id += 1
            self._queue.append(job)
            self._wake.notify()
        return job.id

    def load_voice(self, path: str | Path) -> int:
        """Load (and warm up) the voice at ``path``; ``voiceLoaded`` or ``voiceFailed`` follows."""
        return self._submit("load", path=Path(path))

    def speak(self, text: str, config: SpeakConfig | None = None, *, now: bool = False, seed: int = 0) -> int:
        """Queue ``text``; with ``now`` stop what is playing and drop the queue first."""
        if now:
            self.stop()
            self.set_paused(False)
        return self._submit("speak", text=text, config=config or SpeakConfig(), seed=seed)

    def export(self, text: str, path: str | Path, config: SpeakConfig | None = None, *, seed: int = 0) -> int:
        """Render ``text`` to an audio file (WAV/FLAC/OGG by suffix) after what is queued."""
        return self._submit("export", text=text, path=Path(path), config=config or SpeakConfig(), seed=seed)

    def export_audio(self, samples: np.ndarray, sample_rate: int, path: str | Path) -> None:
        """Write audio already made (the last utterance) on a side thread; ``exported`` or ``failed``."""
        from wavern.engine.audio_io import write_audio

        def work():
            try:
                write_audio(Path(path), samples, sample_rate)
                self.exported.emit(0, str(path))
            except Exception as e:  # noqa: BLE001 - whatever it is, the user hears of it (not a lost future)
                self.failed.emit(0, "Export failed: " + (str(e) or type(e).__name__))

        self._side.submit(work)

    def preview(self, text: str, request_id: int) -> None:
        """Segment ``text`` with the user lexicon on a side thread (an SSML document: its pieces'
        sentences, or what is wrong with its markup); ``previewReady`` follows."""
        lexicon = self._lexicon

        def work():
            from wavern.conditioning.frontend import segment
            from wavern.conditioning.frontend.ssml import looks_like_ssml, parse_ssml

            try:
                result = parse_ssml(text, lexicon=lexicon).sentences() if looks_like_ssml(text) else \
                    segment(text, lexicon=lexicon)
            except WavernError as e:
                result = str(e)
            self.previewReady.emit(request_id, result)

        self._side.submit(work)

    def set_lexicon(self, lexicon) -> None:
        """Use this Lexicon (or None) from the next request on; the object must not change later."""
        self._lexicon = lexicon

    def set_output(self, device: int | None, *, silent: bool) -> None:
        """Output for the next playback session (the current one plays out unchanged)."""
        self.device, self.silent = device, silent

    def set_live(self, *, speed: float | None = None, volume: float | None = None,
                 pause_s: float | None = None) -> None:
        """Change speed / volume / sentence pause; the running stream takes them at its next chunk."""
        with self._lock:  # with _new_control's: a change while a request's control is made is not lost
            if speed is not None:
                self.speed = float(speed)
            if volume is not None:
                self.volume = float(volume)
            if pause_s is not None:
                self.pause_s = float(pause_s)
            control = self._control if self._live else None
        if control is not None:
            control.speed, control.volume, control.pause_s = self.speed, self.volume, self.pause_s

    def set_paused(self, paused: bool) -> None:
        with self._lock:
            self._paused = paused
            if self._sink is not None:
                self._sink.pause(paused)

    @property
    def paused(self) -> bool:
        return self._paused

    def stop(self) -> None:
        """Silence now: drop queued speech, stop the stream at its next chunk, abort the output. Voice
        changes and exports (files, not sound) go on; closing the window stops those."""
        with self._lock:
            kept = [j for j in self._queue if j.kind in ("load", "export")]
            self._queue.clear()
            self._queue.extend(kept)
            if self._current is not None and self._current.kind != "export":
                self._current.cancelled = True
                if self._control is not None:
                    self._control.stop()
            sink, self._sink = self._sink, None
            if sink is not None:  # rewind past what will never play: to what the output played
                self._written = self._sink_base + self._played_samples(sink)
        if sink is not None:
            sink.abort()

    @property
    def sink(self) -> Sink | None:
        """The output of the current playback session (None when idle)."""
        return self._sink

    @property
    def voice(self):
        return self._voice

    def meters(self) -> Meters:
        with self._lock:
            sink, written, job, busy = self._sink, self._written, self._current, bool(self._queue)
            base = self._sink_base
        busy = busy or job is not None
        speaking = job.id if job is not None and job.kind == "speak" else None
        if sink is None:
            return Meters(written, 0.0, None, 0, self._paused, busy, speaking)
        ring = sink.ring
        queued = self._queued_samples(sink)
        ms = 1000.0 / sink.device_rate
        headroom = ring.min_headroom * ms if ring.callbacks and ring.min_headroom < ring.capacity else None
        return Meters(base + self._played_samples(sink), queued * 1000.0 / sink.sample_rate, headroom,
                      ring.underruns, self._paused, busy, speaking)

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop everything, exports included (a half-written one is removed), and join the threads
        (called from ``closeEvent``)."""
        self.stop()
        with self._lock:
            self._queue.clear()
            if self._current is not None:  # an export, which stop() leaves alone
                self._current.cancelled = True
                if self._control is not None:
                    self._control.stop()
            self._quit = True
            self._wake.notify()
        self._thread.join(timeout_s)
        self._side.shutdown(wait=True, cancel_futures=True)
        if self._voice is not None:
            self._voice.close()
            self._voice = None

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # ------------------------------------------------------------------ worker thread
    @staticmethod
    def _queued_samples(sink: Sink) -> int:
        """Samples (at the voice's rate) written to ``sink`` and not yet played."""
        q = sink.ring.queued
        return q if sink.device_rate == sink.sample_rate else int(round(q * sink.sample_rate / sink.device_rate))

    @staticmethod
    def _played_samples(sink: Sink) -> int:
        """Samples (at the voice's rate) ``sink`` has played. The stream clock is the output's base
        plus this, not what was written minus what is queued: a piece the worker has written but not
        yet counted (a stop between the two) would make that too small by the piece."""
        p = sink.ring.consumed
        return p if sink.device_rate == sink.sample_rate else int(round(p * sink.sample_rate / sink.device_rate))

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._quit:
                    self._wake.wait()
                if self._quit:
                    return
                job = self._current = self._queue.popleft()
            stats = None
            try:
                if job.kind == "load":
                    self._load(job)
                elif job.kind == "speak":
                    stats = self._speak(job)
                else:
                    self._export(job)
            except Exception as e:  # noqa: BLE001 - report it and keep the worker alive
                if isinstance(e, AudioDeviceError) and job.kind == "speak":  # the device went away mid-speech
                    with self._lock:
                        sink, self._sink = self._sink, None
                        self.silent = True
                    if sink is not None:
                        sink.abort()
                    self.outputChanged.emit(f"No audio device ({e}); playing silently in real time. "
                                            f"Export to hear it.")
                if not isinstance(e, WavernError):
                    log.exception("request %d (%s) failed", job.id, job.kind)
                message = str(e) if isinstance(e, WavernError) else f"internal error: {e!r}"
                if job.kind == "load":
                    self.voiceFailed.emit(message)
                else:
                    self.failed.emit(job.id, ("Export failed: " if job.kind != "speak" else "") + message)
            finally:
                with self._lock:
                    self._current, self._control = None, None
            if stats is not None:
                self.finished.emit(stats)  # after the bookkeeping: meters() no longer counts it
            self._drain()

    def _drain(self) -> None:
        """With nothing queued: let the output play out, close it and say ``idle``."""
        while True:
            with self._lock:
                if self._queue or self._quit:
                    return
                sink = self._sink
                if sink is None or sink.ring.queued == 0:
                    self._sink = None
                    break
                self._wake.wait(0.01)
        if sink is not None:
            try:
                sink.close()
            except Exception as e:  # noqa: BLE001 - a device that vanished while closing
                log.warning("closing the output failed: %s", e)
        self.idle.emit()

    def _open_sink(self, sample_rate: int) -> Sink:
        with self._lock:
            if self._sink is not None:
                return self._sink
        sink = None
        if not self.silent:
            from wavern.engine.sinks import DeviceSink

            try:
                sink = DeviceSink(sample_rate=sample_rate, device=self.device, buffer_s=self.buffer_s)
            except AudioDeviceError as e:
                self.silent = True
                self.outputChanged.emit(f"No audio device ({e}); playing silently in real time. Export to hear it.")
        if sink is None:
            sink = SilentPlayback(sample_rate=sample_rate, buffer_s=self.buffer_s, clock_speed=self.clock_speed,
                                  keep=self.keep_played)
        sink.ring.finished = True  # idle until the first samples: waiting is latency, not an underrun
        with self._lock:
            sink.pause(self._paused)
            self._sink = sink
            self._sink_base = self._written
        return sink

    def _load(self, job: _Job) -> None:
        from wavern.engine.voice import Voice

        voice = Voice.load(job.path)
        warm = voice.warmup()
        old, self._voice = self._voice, voice
        if old is not None:
            old.close()
        passes = voice.melmatch.config.iterations if voice.melmatch is not None else 0
        self.voiceLoaded.emit(VoiceState(voice.name, Path(job.path), voice.speakers, voice.sample_rate, warm,
                                         voice.has_prosody, passes, voice.default_speaker))

    def _new_control(self, job: _Job, *, live: bool):
        """The StreamControl of the request starting now; ``live``: it follows ``set_live``."""
        from wavern.engine.voice import StreamControl

        with self._lock:
            control = StreamControl(speed=self.speed, volume=self.volume, pause_s=self.pause_s)
            if job.cancelled:
                control.stop()
            self._control = control
            self._live = live
        return control

    def _stream(self, job: _Job, control):
        voice = self._voice
        if voice is None:
            raise VoiceFileError("no voice is loaded; pick one in the Voice list")
        voice.lexicon = self._lexicon
        return voice, voice.stream(job.text, job.config, control=control, seed=job.seed)

    def _speak(self, job: _Job) -> UtteranceStats:
        t0 = time.perf_counter()
        control = self._new_control(job, live=True)
        self.started.emit(job.id, job.text)
        voice, gen = self._stream(job, control)
        compute = time.perf_counter() - t0
        sink = self._open_sink(voice.sample_rate)
        with self._lock:
            base = self._written
        tap = SpectrumTap()
        tap.reset(base)
        first_ms = None
        audio_n = 0
        after_stop = 0
        headroom = underruns = None
        try:
            while not control.stopped:
                t = time.perf_counter()
                chunk = next(gen, None)
                compute += time.perf_counter() - t
                if chunk is None:
                    break
                if control.stopped:
                    after_stop += 1
                    break
                pos = base + chunk.start_sample
                cols, cpos = tap.feed(chunk.samples)
                words = tuple(WordSpan(w.char_start, w.char_end, base + w.start_sample, base + w.end_sample)
                              for w in chunk.word_timings)
                self.chunkReady.emit(ChunkView(job.id, pos, chunk.samples, envelope(chunk.samples), cols, cpos,
                                               tuple(chunk.text_span), words))
                if not self._play(sink, chunk.samples):
                    break
                if first_ms is None:
                    first_ms = (time.perf_counter() - t0) * 1000.0
                    sink.ring.reset_stats()
                    sink.ring.finished = False
                audio_n += chunk.samples.shape[0]
            if first_ms is not None:
                ring = sink.ring
                headroom = ring.min_headroom * 1000.0 / sink.device_rate if ring.callbacks else None
                underruns = ring.underruns
                ring.finished = True  # the wait for the next request is latency, not underrun
        finally:
            gen.close()
        audio_s = audio_n / voice.sample_rate
        return UtteranceStats(job.id, job.text, first_ms, compute / audio_s if audio_s else float("nan"), audio_s,
                              underruns or 0, headroom, control.stopped, after_stop)

    def _play(self, sink: Sink, samples: np.ndarray) -> bool:
        """Write in pieces, advancing the stream clock after each; False once the output is gone."""
        for i in range(0, samples.shape[0], PIECE_SAMPLES):
            piece = samples[i:i + PIECE_SAMPLES]
            sink.write(piece)
            with self._lock:
                if self._sink is not sink:
                    return False
                self._written += piece.shape[0]
        return True

    def _export(self, job: _Job) -> None:
        from wavern.engine.sinks import FileSink

        control = self._new_control(job, live=False)
        control.speed, control.volume = job.config.speed, job.config.volume
        voice, gen = self._stream(job, control)
        sink = FileSink(job.path, sample_rate=voice.sample_rate)
        try:
            for chunk in gen:
                if control.stopped:
                    break
                sink.write(chunk.samples)
        except BaseException:
            sink.abort()
            raise
        finally:
            gen.close()
        if control.stopped:
            sink.abort()
            self.failed.emit(job.id, f"export to {job.path} stopped; no file written")
            return
        sink.close()
        self.exported.emit(job.id, str(job.path))
