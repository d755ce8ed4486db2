"""The output module: one process, one warm voice, Speech Dispatcher's protocol on stdin/stdout.

Two threads. The *command* thread reads the server's commands and answers each at once; STOP
and PAUSE act on the message being spoken from there, without waiting for anything. The
*speech* thread loads and warms the voice (after INIT is answered, so the server's start does
not wait for it), then speaks one message at a time: it pulls chunks from
``voice.stream(text, SpeakConfig)``, hands them to the :mod:`output <wavern.app.speechd.output>`,
and places each ``<mark>`` at the first sample of the word after it (the stream's word
timings point into the SSML document, so the mark's offset in the document orders it among
the words). A stop goes through the stream's :class:`~wavern.engine.voice.StreamControl`, the
same control the window uses: the vocoder honours it between pieces of at most
``STOP_CHECK_SAMPLES``, a few ms of compute.

Every message gets ``701 BEGIN`` (just before its first audio) and exactly one of ``702 END``,
``703 STOP`` or ``704 PAUSE``, after its last index mark. A message that arrives while another
is speaking (the server waits for the end, but a client talking to the module directly might not)
stops the first, so two are never heard at once.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
from pathlib import Path
from typing import BinaryIO

import wavern
from wavern.app.speechd import protocol, settings as S, text as T
from wavern.app.speechd.output import Channel, NullOutput, Output, PlayerOutput, Recorder, ServerOutput, click
from wavern.app.speechd.protocol import Reply
from wavern.errors import ParameterError, WavernError

__all__ = ["ModuleConfig", "SpeechdModule", "AUDIO_METHODS"]

log = logging.getLogger(__name__)

#: ``WavernAudio``: where audio goes. auto: the server's player where the server offers it (0.11
#: on), else the sound card, else a silent stand-in paced in real time.
AUDIO_METHODS = ("auto", "server", "device", "paced", "null")
#: How long a new message waits for the one before it to stop (it stops in a few ms).
STOP_WAIT_S = 5.0


@dataclasses.dataclass
class ModuleConfig:
    """The module's own settings (``wavern.conf``, or ``wavern speechd`` options).

    voice: voice name or folder (None: the default voice).
    audio: one of :data:`AUDIO_METHODS`.
    device: the sound card for ``device`` (None: the system's).
    record: a folder that receives a copy of all audio sent and every event (tests, benchmarks).
    passes: mel-matching passes for messages (None: the voice's).
    char_passes: mel-matching passes for single characters and keys (0: the earliest audio).
    """

    voice: str | None = None
    audio: str = "auto"
    device: str | None = None
    record: Path | None = None
    passes: int | None = None
    char_passes: int | None = 0

    #: the configuration file's names (any case) for the fields
    _KEYS = {"wavernvoice": "voice", "wavernaudio": "audio", "waverndevice": "device", "wavernrecord": "record",
             "wavernpasses": "passes", "waverncharpasses": "char_passes"}

    def __post_init__(self):
        if self.audio not in AUDIO_METHODS:
            raise ParameterError(f"audio method {self.audio!r} is not one of {', '.join(AUDIO_METHODS)}")
        for name in ("passes", "char_passes"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, int) and 0 <= v <= 32):
                raise ParameterError(f"{name} must be an integer in [0, 32], found {v!r}")
        if self.record is not None:
            self.record = Path(self.record).expanduser()

    @classmethod
    def read(cls, path: str | Path | None, **overrides) -> "ModuleConfig":
        """The settings in a module configuration file (Speech Dispatcher's ``Name value`` lines,
        ``#`` comments; unknown names are logged and skipped), then ``overrides`` that are not None.

        Raises:
            ParameterError: a value of the wrong kind, or a file that cannot be read.
        """
        values: dict = {}
        if path:
            try:
                lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
            except FileNotFoundError:
                lines = []  # Speech Dispatcher names a file that may not exist: the defaults
            except OSError as e:
                raise ParameterError(f"cannot read the module configuration {path}: {e.strerror or e}") from None
            for n, line in enumerate(lines, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                name, _, value = line.partition(" ")
                key = cls._KEYS.get(name.lower())
                value = value.strip().strip('"')
                if key is None:
                    log.info("%s:%d: %s is not a wavern setting; skipped", path, n, name)
                    continue
                if key in ("passes", "char_passes"):
                    try:
                        values[key] = None if value.lower() in ("", "voice", "default") else int(value)
                    except ValueError:
                        raise ParameterError(f"{path}:{n}: {name} must be a whole number, found {value!r}") from None
                else:
                    values[key] = value or None
        values.update({k: v for k, v in overrides.items() if v is not None})
        if values.get("audio") is None:
            values.pop("audio", None)
        return cls(**values)


class _Ended(Exception):
    """The message has had its last event: nothing more of it goes out."""


class _Job:
    """One message being spoken."""

    def __init__(self, job_id: int, message: T.Message, settings: S.SpeechSettings):
        from wavern.engine.voice import StreamControl

        self.id = job_id
        self.message = message
        self.settings = settings
        self.control = StreamControl()
        self.pause = False
        self.reason: str | None = None  # "stop" or "pause" once either ends it early
        self.done = threading.Event()  # the speech thread is done with it
        self.lock = threading.Lock()  # held while its events and audio go out
        self.began = False  # 701 sent
        self.final: str | None = None  # its last event, once sent: "end", "stop" or "pause"

    def stop(self) -> None:
        if self.reason is None:
            self.reason = "stop"
        self.control.stop()

    def reached(self, name: str) -> bool:
        """A mark was heard: with a pause asked for, a ``__spd_`` mark ends the message there."""
        if self.pause and name.startswith("__spd_") and self.reason is None:
            self.reason = "pause"
            self.control.stop()
            return True
        return False


class SpeechdModule:
    """The module, reading commands from ``stdin`` and writing to ``stdout`` (binary streams).

    Args:
        stdin, stdout: the pipes from and to the server.
        config: the module's own settings.
        voice: a loaded :class:`~wavern.engine.voice.Voice` to use instead of loading
            ``config.voice`` (tests).
    """

    def __init__(self, stdin: BinaryIO, stdout: BinaryIO, *, config: ModuleConfig | None = None, voice=None):
        self.stdin = stdin
        self.channel = Channel(stdout)
        self.config = config or ModuleConfig()
        self.settings = S.SpeechSettings()
        self._voice = voice
        self._voice_path: Path | None = None
        self._voices: dict[Path, object] = {}  # voices this module loaded (and closes), by folder
        self._ready = threading.Event()  # the voice is loaded (or failed to)
        self._load_error: Exception | None = None
        self._output: Output | None = None
        self._server_audio = False
        self._audio_done = False  # the server's AUDIO came: the output can be chosen
        self._recorder = Recorder(self.config.record) if self.config.record is not None else None
        self._jobs: queue.Queue = queue.Queue()
        self._current: _Job | None = None
        self._lock = threading.Lock()
        self._next_id = 0
        self._debug_handler: logging.Handler | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ the command thread
    def run(self) -> int:
        """Serve until QUIT or the end of input; returns the process's exit code."""
        first = self._line()
        if first is None:
            return 1
        if first != "INIT":
            log.error("the server did not start with INIT (found %r)", first[:80])
            return 3
        try:
            self._init()
        except WavernError as e:
            self.channel.reply(Reply.with_reasons(Reply.CANT_INIT, [str(e)]))
            return 1
        name = self._voice.name if self._voice is not None else self._voice_path.name
        self.channel.reply(Reply.with_reasons(Reply.LOADED, [f"wavern {wavern.__version__}, voice {name}"]))
        self._thread = threading.Thread(target=self._speech_thread, name="wavern-speechd-speech", daemon=True)
        self._thread.start()
        try:
            while True:
                try:
                    line = self._line()
                except protocol.BlockTooLong as e:
                    self.channel.reply(Reply.with_reasons(Reply.UNKNOWN_COMMAND, [f"{e}: not a command"]))
                    continue
                if line is None:
                    log.info("the server closed the pipe")
                    return 0
                if not self._command(line):
                    return 0
        finally:
            self._shutdown()

    def _line(self) -> str | None:
        raw = protocol.read_line(self.stdin)
        return None if raw is None else raw.decode("utf-8", "replace")

    def _init(self) -> None:
        """Find the voice (a cheap check; the speech thread loads it): WavernError when there is none."""
        if self._voice is not None:  # (ready once the speech thread has warmed it and opened the output)
            return
        from wavern.app.voices import resolve_voice
        from wavern.engine.voicefile import read_voice_json

        self._voice_path = resolve_voice(self.config.voice)
        read_voice_json(self._voice_path)  # VoiceFileError naming the field

    def _command(self, line: str) -> bool:
        """Answer one command; False to quit."""
        word = line.strip()
        if word in protocol.TEXT_COMMANDS:
            self._speak_command(protocol.TEXT_COMMANDS[word])
        elif word == "STOP":
            job = self._current
            if job is not None:
                self._note("stop_received", id=job.id)
                job.stop()
                if self._output is not None:
                    self._output.silence()
                # answered from here: nothing more of the message goes out from now on (the speech
                # thread's last piece of compute, a few ms, is dropped), so the server need not wait
                self._final(job, 703, "STOP")
        elif word == "PAUSE":
            job = self._current
            if job is not None:
                job.pause = True
        elif word == "SET":
            self._set_command()
        elif word == "AUDIO":
            self._audio_command()
        elif word == "LOGLEVEL":
            self._loglevel_command()
        elif word.startswith("LIST VOICES"):
            self._list_voices(word.split()[2:])
        elif word.startswith("DEBUG"):
            self._debug_command(word.split()[1:])
        elif word == "QUIT":
            self._stop_current(wait=True)
            self.channel.reply(Reply.QUIT)
            return False
        elif word == "INIT":
            self.channel.reply(Reply.with_reasons(Reply.UNKNOWN_COMMAND, ["INIT was already done"]))
        else:
            shown = line if len(line) <= 60 else line[:60] + "..."
            self.channel.reply(Reply.with_reasons(Reply.UNKNOWN_COMMAND, [f"unknown command {shown!r}"]))
        return True

    def _block(self) -> list[bytes] | None:
        try:
            return protocol.read_block(self.stdin)
        except protocol.BlockTooLong as e:
            raise ParameterError(f"the data block is too long ({e})") from None

    def _speak_command(self, kind: str) -> None:
        self.channel.reply(Reply.RECEIVING_MESSAGE)
        try:
            lines = self._block()
        except ParameterError as e:
            self.channel.reply(Reply.with_reasons(Reply.CANT_SPEAK, [str(e)]))
            return
        if lines is None:
            return  # the input ended inside the message: the loop sees the end next
        received = time.monotonic()
        try:
            message = self._message(kind, lines)
        except ParameterError as e:
            self.channel.reply(Reply.with_reasons(Reply.MORE_THAN_ONE_LINE if "one line" in str(e)
                                                  else Reply.CANT_SPEAK, [str(e)]))
            return
        self._stop_current(wait=True)  # never two at once
        with self._lock:
            self._next_id += 1
            job = _Job(self._next_id, message, dataclasses.replace(self.settings))
            self._current = job
        self._note("receive", id=job.id, kind=kind, text=message.text, t_received=received)
        self.channel.reply(Reply.SPEAKING)  # before any event of this message
        self._jobs.put(job)

    def _message(self, kind: str, lines: list[bytes]) -> T.Message:
        """The message a text block asks for; ParameterError for one that cannot be spoken."""
        raw = b"\n".join(lines)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ParameterError(f"the message is not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset "
                                 f"{e.start})") from None
        if not text.strip() and kind == "text":
            raise ParameterError("the message is empty")
        if kind != "text" and len(lines) > 1:
            raise ParameterError(f"a {kind.upper()} message must be one line, found {len(lines)}")
        s = self.settings
        if kind == "char":
            return T.char_message(text, cap_let_recogn=s.cap_let_recogn)
        if kind == "key":
            return T.key_message(text)
        if kind == "icon":
            return T.icon_message(text)
        return T.speak_message(text, punctuation_mode=s.punctuation_mode, spelling=s.spelling_mode == "on")

    def _stop_current(self, *, wait: bool) -> None:
        job = self._current
        if job is None or job.done.is_set():
            return
        log.info("message %d is still speaking: stopping it first", job.id)
        job.stop()
        if self._output is not None:
            self._output.silence()
        self._final(job, 703, "STOP")
        if wait and not job.done.wait(STOP_WAIT_S):
            log.warning("message %d did not stop within %g s", job.id, STOP_WAIT_S)

    def _params(self, ack: str) -> list[tuple[int, str, str]] | None:
        """A ``name=value`` block after ``ack``: ``(line number, name, value)``s; None at the end of
        input. Lines not of that form are returned with ``name`` None."""
        self.channel.reply(ack)
        try:
            lines = self._block()
        except ParameterError as e:
            return [(0, None, str(e))]
        if lines is None:
            return None
        out = []
        for n, raw in enumerate(lines, 1):
            line = raw.decode("utf-8", "replace")
            pair = protocol.parse_assignment(line)
            out.append((n, None, line) if pair is None else (n, *pair))
        return out

    def _set_command(self) -> None:
        params = self._params(Reply.RECEIVING_SETTINGS)
        if params is None:
            return
        syntax, bad = [], []
        for n, name, value in params:
            if name is None:
                syntax.append(f"line {n} of SET is not name=value: {value[:60]!r}")
                continue
            try:
                self.settings.set(name, value)
            except ParameterError as e:
                bad.append(str(e))
        if syntax:
            self.channel.reply(Reply.with_reasons(Reply.BAD_SYNTAX, syntax + bad))
        elif bad:
            self.channel.reply(Reply.with_reasons(Reply.BAD_PARAM, bad))
        else:
            self.channel.reply(Reply.SETTINGS_RECEIVED)

    def _audio_command(self) -> None:
        params = self._params(Reply.RECEIVING_AUDIO)
        if params is None:
            return
        given = {name: value for _, name, value in params if name is not None}
        method = given.get("audio_output_method")
        if method == "server":
            if self.config.audio not in ("auto", "server"):
                self.channel.reply(Reply.with_reasons(Reply.BAD_PARAM, [
                    f"this module plays its audio itself (WavernAudio {self.config.audio})"]))
                return
            self._server_audio = True
            log.info("audio goes to the server")
        else:  # an older server, or one told not to play modules' audio: we play it ourselves
            if self.config.audio == "server":
                log.warning("WavernAudio server, but the server offers audio_output_method=%s: playing it here",
                            method)
            self._server_audio = False
        self._audio_done = True
        self.channel.reply(Reply.AUDIO_INITIALIZED)

    def _loglevel_command(self) -> None:
        params = self._params(Reply.RECEIVING_LOGLEVEL)
        if params is None:
            return
        for _, name, value in params:
            if name == "log_level" and value.strip().lstrip("-").isdigit():
                level = int(value)
                logging.getLogger("wavern").setLevel(
                    logging.WARNING if level <= 2 else logging.INFO if level <= 4 else logging.DEBUG)
        self.channel.reply(Reply.LOGLEVEL_SET)

    def _debug_command(self, args: list[str]) -> None:
        root = logging.getLogger("wavern")
        if args[:1] == ["ON"] and len(args) >= 2:
            try:
                handler = logging.FileHandler(args[1])
            except OSError:
                self.channel.reply(Reply.CANT_OPEN_DEBUG)
                return
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            if self._debug_handler is not None:
                root.removeHandler(self._debug_handler)
            self._debug_handler = handler
            root.addHandler(handler)
            root.setLevel(logging.DEBUG)
            self.channel.reply("200 OK DEBUGGING ON")
        elif args[:1] == ["OFF"]:
            if self._debug_handler is not None:
                root.removeHandler(self._debug_handler)
                self._debug_handler.close()
                self._debug_handler = None
            self.channel.reply("200 OK DEBUGGING OFF")
        else:
            self.channel.reply(Reply.with_reasons(Reply.BAD_SYNTAX, ["DEBUG takes ON FILE or OFF"]))

    def _list_voices(self, args: list[str]) -> None:
        from wavern.app.speechd.voices import list_voices

        own = self._voice.path if self._voice is not None else self._voice_path
        rows = list_voices(language=args[0] if args else None, variant=args[1] if len(args) > 1 else None,
                           also=own)
        if not rows:
            self.channel.reply(Reply.CANT_LIST_VOICES)
            return
        lines = [f"200-{name}\t{language}\t{variant}" for name, language, variant in rows]
        self.channel.reply("\n".join([*lines, Reply.VOICE_LIST_SENT]))

    def _note(self, event: str, **fields) -> None:
        if self._recorder is not None:
            self._recorder.note(event, **fields)

    def _shutdown(self) -> None:
        self._stop_current(wait=True)
        self._jobs.put(None)
        if self._thread is not None:
            self._thread.join(timeout=STOP_WAIT_S)
        if self._output is not None:
            self._output.close()
        for voice in self._voices.values():
            voice.close()

    # ------------------------------------------------------------------ the speech thread
    def _speech_thread(self) -> None:
        try:
            self._load()
        except Exception as e:  # noqa: BLE001 - reported on every message, the module stays up
            log.error("the voice could not be loaded: %s", e)
            self._load_error = e
        finally:
            self._ready.set()
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                self._speak(job)
            except Exception:  # noqa: BLE001 - one message failing must not take the module down (its
                log.exception("message %d failed", job.id)  # final event is out: _speak's finally)
            finally:
                job.done.set()

    def _load(self) -> None:
        from wavern.app.voices import load_lexicon

        if self._voice is None:
            from wavern.engine.voice import Voice

            t = time.perf_counter()
            self._voice = Voice.load(self._voice_path)
            log.info("voice %s loaded in %.2f s", self._voice.name, time.perf_counter() - t)
            self._voices[Path(self._voice.path).resolve()] = self._voice
        try:
            self._voice.lexicon = load_lexicon(None)  # the user's pronunciations, as `wavern say` reads them
        except WavernError as e:
            log.warning("the user's lexicon is not used: %s", e)
        t = time.perf_counter()
        self._voice.warmup()
        log.info("voice warmed up in %.2f s", time.perf_counter() - t)
        if self._audio_done:
            self._output_for()  # open the sound card now, not on the first message

    def _output_for(self) -> Output:
        """The output every message goes to, made on first use (after the server's AUDIO)."""
        if self._output is not None:
            return self._output
        rate = self._voice.sample_rate
        method = self.config.audio
        out: Output
        if method == "null":
            out = NullOutput(self.channel, rate)
        elif self._server_audio:
            out = ServerOutput(self.channel, rate)
        else:
            out = self._player(rate, paced=method == "paced")
        if self._recorder is not None:
            out = self._recorder.attach(out)
        log.info("audio output: %s", out.name)
        self._output = out
        return out

    def _player(self, rate: int, *, paced: bool) -> Output:
        from wavern.engine.sinks import DeviceSink, PacedSink
        from wavern.errors import AudioDeviceError

        if not paced:
            try:
                return PlayerOutput(DeviceSink(sample_rate=rate, device=self.config.device, buffer_s=2.0),
                                    self.channel)
            except AudioDeviceError as e:
                log.warning("no sound card (%s): messages are timed as if played, but nobody hears them", e)
        return PlayerOutput(PacedSink(sample_rate=rate, buffer_s=2.0), self.channel, name="paced")

    def _speak(self, job: _Job) -> None:
        self._ready.wait()
        out = self._output_for() if self._load_error is None else None
        try:
            if out is None:
                log.error("message %d not spoken: no voice (%s)", job.id, self._load_error)
                return
            out.begin()
            self._say(job, out)
        except _Ended:
            pass
        finally:
            if out is not None and (job.reason or job.control.stopped):
                out.silence()  # what was written while the stop or the pause took effect
            if job.reason == "pause" and (out is None or out.cut or job.control.stopped):
                self._final(job, 704, "PAUSE")
            elif job.control.stopped:
                self._final(job, 703, "STOP")
            else:
                self._final(job, 702, "END")
            self._note("idle", id=job.id)  # the speech thread is done with it (after a STOP: its last piece)
            with self._lock:
                if self._current is job:
                    self._current = None

    def _begin(self, job: _Job) -> None:
        """``701 BEGIN``, once per message (the caller holds ``job.lock``)."""
        if not job.began:
            job.began = True
            self._note("begin", id=job.id)
            self.channel.send(protocol.event(701, "BEGIN"))

    def _final(self, job: _Job, code: int, word: str) -> None:
        """The message's one last event (BEGIN first if it never began); later calls do nothing.
        After it nothing more of the message goes out: see :meth:`_act`."""
        with job.lock:
            if job.final is not None:
                return
            self._begin(job)
            job.final = word.lower()
            self._note(job.final, id=job.id)
            self.channel.send(protocol.event(code, word))

    def _act(self, job: _Job, fn, *args):
        """Do ``fn(*args)`` (audio or a mark for the output) unless the message has had its last
        event (a STOP answered from the command thread): then :class:`_Ended`. BEGIN goes first."""
        with job.lock:
            if job.final is not None:
                raise _Ended
            self._begin(job)
            return fn(*args)

    def _say(self, job: _Job, out: Output) -> None:
        message = job.message
        voice, config = self._config_for(job.settings, message)
        marks = T.find_marks(message.text) if message.ssml else []
        pending = list(marks)  # (offset in the document, name) not yet placed
        placed: list[tuple[int, str]] = []  # (sample, name), in order
        control = job.control
        if message.icon is not None and self._act(job, out.icon, message.icon):  # the server plays its icon
            return
        gen = self._stream(voice, message, config, control)
        try:
            if message.click and gen is not None:
                self._act(job, out.play, click(voice.sample_rate, gain=config.volume))
            for chunk in gen or ():
                if control.stopped:
                    return
                for w in chunk.word_timings:
                    while pending and pending[0][0] < w.char_start:
                        placed.append((w.start_sample, pending.pop(0)[1]))
                samples, a = chunk.samples, chunk.start_sample
                i = 0
                while placed and placed[0][0] < a + samples.size:
                    at = max(0, placed[0][0] - a)
                    if at > i:
                        self._act(job, out.play, samples[i:at])
                        i = at
                    self._act(job, out.mark, placed.pop(0)[1], job.reached)
                    if control.stopped:
                        return
                if i < samples.size:
                    self._act(job, out.play, samples[i:] if i else samples)
            for _, name in placed + [(0, n) for _, n in pending]:  # marks after the last word: at the end
                if control.stopped:
                    return
                self._act(job, out.mark, name, job.reached)
            out.finish(lambda: control.stopped)
        finally:
            if gen is not None:
                gen.close()

    def _config_for(self, s: S.SpeechSettings, message: T.Message):
        """The voice and :class:`SpeakConfig` a message is spoken with (settings.py's mapping)."""
        from wavern.conditioning.config import PROSODY_LIMITS
        from wavern.engine.chunk import SpeakConfig
        from wavern.app.speechd.voices import choose_speaker, split_voice_name

        voice, speaker = self._voice, None
        if s.synthesis_voice:
            name, speaker = split_voice_name(s.synthesis_voice)
            if name is not None and name != voice.name:
                voice = self._other_voice(name) or voice
            if speaker is not None and speaker not in voice.speakers:
                log.warning("voice %s has no speaker %s: choosing by language and voice type", voice.name, speaker)
                speaker = None
        if speaker is None:
            speaker = choose_speaker(voice.speakers, voice.default_speaker, language=s.language, voice_type=s.voice)
        pitch = pitch_range = None
        if voice.has_prosody and (s.pitch or s.pitch_range or message.pitch_up):
            lo, hi = PROSODY_LIMITS[1]
            pitch = min(max(S.pitch_of(s.pitch) + message.pitch_up, lo), hi)
            pitch_range = S.pitch_range_of(s.pitch_range)
        elif s.pitch or s.pitch_range:
            log.debug("voice %s cannot change its pitch: pitch=%d pitch_range=%d ignored", voice.name, s.pitch,
                      s.pitch_range)
        passes = self.config.passes if message.kind == "text" else self.config.char_passes
        return voice, SpeakConfig(speed=S.speed_of(s.rate), volume=S.gain_of(s.volume), speaker=speaker,
                                  pitch=pitch, pitch_range=pitch_range, passes=passes)

    def _other_voice(self, name: str):
        """Another installed voice, loaded once and kept (None, logged, where it cannot be loaded)."""
        from wavern.app.voices import resolve_voice
        from wavern.engine.voice import Voice

        try:
            path = resolve_voice(name).resolve()
            if path == Path(self._voice.path).resolve():
                return self._voice
            if path not in self._voices:
                t = time.perf_counter()
                self._voices[path] = Voice.load(path)
                log.info("voice %s loaded in %.2f s", name, time.perf_counter() - t)
            return self._voices[path]
        except WavernError as e:
            log.warning("synthesis voice %s: %s; using %s", name, e, self._voice.name)
            return None

    def _stream(self, voice, message: T.Message, config, control):
        """The message's chunk generator; None when there is nothing to say (punctuation alone);
        a document that is not well-formed SSML is read as its text."""
        try:
            return voice.stream(message.text, config, control=control, ssml=message.ssml)
        except ParameterError as e:
            if "nothing to say" in str(e):
                return None
            if not message.ssml:
                raise
            log.warning("reading the message as plain text: %s", e)
        try:
            return voice.stream(T.strip_markup(message.text), config, control=control, ssml=False)
        except ParameterError:
            return None
