"""Where the module's audio goes, and when its events are told.

- :class:`ServerOutput`: newer servers (0.11 on) offer to play what the module sends
  (``AUDIO`` with ``audio_output_method=server``); audio goes up the pipe as ``705`` events and
  index marks go in between, at their sample, so the server tells each mark when its own
  playback reaches it. Nothing is held here: a stop is the server's to do (it drops its queue).
- :class:`PlayerOutput`: older servers, or ``WavernAudio device``: the engine's
  :class:`~wavern.engine.sinks.DeviceSink` plays, or a :class:`~wavern.engine.sinks.PacedSink`
  (a sound card that plays nothing, in real time) where there is no device. A clock thread
  reads what the card has played and tells each mark as the card reaches it.
- :class:`NullOutput`: nothing plays and nothing waits (tests).
- :class:`Recorder`: a copy of every sample and event an output handles, in a folder
  (``audio.s16``, raw 16-bit; ``events.jsonl``, one line per event with its monotonic time):
  the end-to-end test's and the benchmark's view of the module.

Events reach the server through a :class:`Channel`, the one writer of the module's standard
output, so an event never splits a reply.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from pathlib import Path
from typing import BinaryIO, Callable

import numpy as np

from wavern.app.speechd import protocol
from wavern.dsp import float_to_int16

__all__ = ["Channel", "Output", "ServerOutput", "PlayerOutput", "NullOutput", "Recorder", "click"]

log = logging.getLogger(__name__)

#: How often the player's clock thread looks at what the card has played (seconds).
CLOCK_S = 0.004
#: The player is written in pieces of this many samples (~23 ms), a stop honoured between them: a
#: write waits while the card's ring is full, and a whole chunk written after the ring was cleared
#: would be heard.
PIECE_SAMPLES = 512


class Channel:
    """The module's standard output: whole replies and events, one writer at a time."""

    def __init__(self, stream: BinaryIO):
        self._stream = stream
        self._lock = threading.Lock()
        self.closed = False

    def send(self, data: bytes) -> None:
        with self._lock:
            if self.closed:
                return
            try:
                self._stream.write(data)
                self._stream.flush()
            except (BrokenPipeError, ValueError, OSError):  # the server is gone: the input will end too
                self.closed = True

    def reply(self, text: str) -> None:
        self.send((text + "\n").encode("utf-8", "replace"))

    @property
    def lock(self) -> threading.Lock:
        """Held while a reply and the events after it must go out in that order."""
        return self._lock


def click(sample_rate: int, *, gain: float = 1.0) -> np.ndarray:
    """A short click (25 ms of 2 kHz under a Hann window, then 25 ms of silence): a capital letter's
    sound in ``cap_let_recogn=icon`` mode. float32."""
    n = int(0.025 * sample_rate)
    t = np.arange(n) / sample_rate
    tone = 0.3 * gain * np.sin(2 * np.pi * 2000.0 * t) * np.hanning(n)
    return np.concatenate([tone, np.zeros(n)]).astype(np.float32)


class Output:
    """One message's audio: :meth:`play` it in order, :meth:`mark` where index marks fall,
    :meth:`finish` when it is all made; :meth:`silence` (from the command thread) stops it."""

    name = "output"
    sample_rate: int

    def begin(self) -> None:
        """A message starts (before its first :meth:`play`)."""

    def play(self, samples: np.ndarray) -> None:
        raise NotImplementedError

    def mark(self, name: str, on_reached: Callable[[str], bool] | None = None) -> bool:
        """Tell the mark ``name`` when the audio played so far is heard. ``on_reached(name)``, called
        as it is told, returns True to cut the message there (a pause). Returns True when the mark
        was told (and cut) right now."""
        raise NotImplementedError

    def icon(self, name: str) -> bool:
        """Have the server play its sound icon ``name``; False where it cannot (no server audio)."""
        return False

    def finish(self, stopped: Callable[[], bool]) -> None:
        """Wait until everything played has been heard (or ``stopped()``, or a pause cut it)."""

    def silence(self) -> None:
        """Drop what is queued, now (STOP). Called from the thread reading commands."""

    @property
    def cut(self) -> bool:
        """A mark's ``on_reached`` cut the current message."""
        return False

    def close(self) -> None:
        pass


class ServerOutput(Output):
    """Audio as ``705`` events: the server plays it, and tells each mark as its playback reaches it."""

    name = "server"

    def __init__(self, channel: Channel, sample_rate: int):
        self.channel, self.sample_rate = channel, sample_rate

    def play(self, samples: np.ndarray) -> None:
        if samples.size:
            self.channel.send(protocol.encode_audio(float_to_int16(samples), self.sample_rate))

    def mark(self, name: str, on_reached=None) -> bool:
        self.channel.send(protocol.mark_event(name))
        if on_reached is not None:
            on_reached(name)
        return True

    def icon(self, name: str) -> bool:
        self.channel.send(protocol.icon_event(name))
        return True


class NullOutput(ServerOutput):
    """Nothing plays, nothing waits; marks are told as they are passed."""

    name = "null"

    def play(self, samples: np.ndarray) -> None:
        pass

    def icon(self, name: str) -> bool:
        return False


class PlayerOutput(Output):
    """The engine's sink plays (a sound card, or a paced stand-in); marks are told as it reaches them.

    Args:
        sink: a :class:`~wavern.engine.sinks.DeviceSink` or :class:`~wavern.engine.sinks.PacedSink`
            (anything with ``write``, ``end_request`` and an ``AudioRing`` as ``ring``).
        channel: where marks are told.
    """

    def __init__(self, sink, channel: Channel, *, name: str = "device"):
        self.sink, self.channel, self.name = sink, channel, name
        self.sample_rate = sink.sample_rate
        self._events: deque = deque()  # (ring position, name, on_reached), in order
        self._lock = threading.Lock()
        self._cut = False
        self._silenced = False  # a STOP dropped the message's audio: play no more of it
        self._quit = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wavern-speechd-clock", daemon=True)
        self._thread.start()

    def _written(self) -> int:
        ring = self.sink.ring
        q = ring.queued  # (queued first: the sum can only be late, never early)
        return q + ring.consumed

    def begin(self) -> None:
        with self._lock:
            self._events.clear()
            self._cut = self._silenced = False

    def play(self, samples: np.ndarray) -> None:
        for i in range(0, samples.size, PIECE_SAMPLES):  # a stop or a cut is honoured between pieces
            if self._cut or self._silenced:
                return
            self.sink.write(samples[i:i + PIECE_SAMPLES])

    def mark(self, name: str, on_reached=None) -> bool:
        with self._lock:
            self._events.append((self._written(), name, on_reached))
        self._wake.set()
        return False

    def _run(self) -> None:
        while not self._quit.is_set():
            self._wake.wait(CLOCK_S)
            self._wake.clear()
            self._tell_due()

    def _tell_due(self) -> None:
        played = self.sink.ring.consumed
        while True:
            with self._lock:
                if not self._events or self._events[0][0] > played:
                    return
                _, name, on_reached = self._events.popleft()
                self.channel.send(protocol.mark_event(name))
                if on_reached is not None and on_reached(name):
                    self._cut = True
                    self._events.clear()
                    self.sink.ring.clear()
                    return

    @property
    def cut(self) -> bool:
        return self._cut

    def finish(self, stopped: Callable[[], bool]) -> None:
        self.sink.end_request()  # a last piece shorter than the pre-roll plays, and running dry is no underrun
        end = self._written()
        while not stopped() and not self._cut:
            with self._lock:
                pending = bool(self._events)
            if not pending and self.sink.ring.consumed >= end:
                return
            time.sleep(CLOCK_S)

    def silence(self) -> None:
        with self._lock:  # marks first: once the ring jumps ahead, they would all look reached
            self._silenced = True
            self._events.clear()
            self.sink.ring.clear()

    def close(self) -> None:
        self._quit.set()
        self._wake.set()
        self._thread.join(timeout=1.0)
        try:
            self.sink.abort()
        except Exception as e:  # noqa: BLE001 - a device that vanished while closing
            log.warning("closing the audio output failed: %s", e)


class Recorder(Output):
    """A copy of every sample another output plays, and every event, appended to ``folder``.

    Made before the output is known (:meth:`attach` gives it one), so that a message's arrival is
    noted even before the first output exists."""

    def __init__(self, folder: str | Path):
        self.inner: Output | None = None
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._audio = open(self.folder / "audio.s16", "ab")
        self._events = open(self.folder / "events.jsonl", "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._samples = self._audio.tell() // 2

    def attach(self, inner: Output) -> "Recorder":
        self.inner, self.name, self.sample_rate = inner, inner.name, inner.sample_rate
        return self

    def note(self, event: str, **fields) -> None:
        """Append one event line (``t``: ``time.monotonic()``, ``sample``: samples recorded before it)."""
        with self._lock:
            if self._events.closed:
                return
            row = {"t": time.monotonic(), "event": event, "sample": self._samples, **fields}
            self._events.write(json.dumps(row) + "\n")
            self._events.flush()

    def begin(self) -> None:
        self.inner.begin()

    def play(self, samples: np.ndarray) -> None:
        if samples.size:
            self.note("audio", n=int(samples.size))
            with self._lock:
                self._audio.write(float_to_int16(samples).astype("<i2").tobytes())
                self._audio.flush()
                self._samples += samples.size
        self.inner.play(samples)

    def mark(self, name: str, on_reached=None) -> bool:
        self.note("mark", name=name)
        return self.inner.mark(name, on_reached)

    def icon(self, name: str) -> bool:
        self.note("icon", name=name)
        return self.inner.icon(name)

    def finish(self, stopped) -> None:
        self.inner.finish(stopped)

    def silence(self) -> None:
        self.inner.silence()

    @property
    def cut(self) -> bool:
        return self.inner.cut

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()
        with self._lock:
            self._audio.close()
            self._events.close()
