"""Where audio goes: the sound card, a file, raw s16le on stdout, or nowhere (tests, benchmarks).

Every sink takes float32 mono chunks through ``write`` and is finished with ``close``.
:func:`play` drives a chunk generator into a sink and measures it: time to first audio,
real-time factor, underruns.

The :class:`DeviceSink` callback follows the real-time rules: it only copies from a
preallocated :class:`~wavern.engine.ring.AudioRing` into ``outdata``, zero-fills a
shortfall and counts it; it never prints, logs, allocates, locks or raises.
:class:`PacedSink` is the same ring drained by a clock thread instead of a sound card
(benchmarks, machines without audio), so it counts underruns exactly as the device does.

Both are idle (``ring.finished``) until the first ``write``: the wait for the first audio
is latency, not an underrun. ``end_request`` makes them idle again between requests. Both
pre-roll ``prefill_s`` (40 ms, under the first two chunks of a stream, see
``engine.voice.RAMP_SAMPLES``) before they start playing a stream, so playback starts with two
chunks of margin at the cost of making the second chunk (a few ms).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import threading
import time
from math import gcd
from pathlib import Path
from typing import BinaryIO, Iterable

import numpy as np

from wavern.engine.audio_io import format_for
from wavern.engine.chunk import AudioChunk
from wavern.engine.ring import AudioRing
from wavern.errors import AudioDeviceError, DiskFullError, ParameterError
from wavern.fileio import is_disk_full, why_unwritable

__all__ = ["Sink", "NullSink", "FileSink", "RawStdoutSink", "DeviceSink", "PacedSink", "StreamingResampler",
           "PlaybackStats", "play", "list_output_devices"]

log = logging.getLogger(__name__)


class Sink:
    """Base class: ``write`` float32 mono samples, then ``close``. Sinks are context managers."""

    sample_rate: int

    def write(self, samples: np.ndarray) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def abort(self) -> None:
        """Stop as fast as possible, dropping anything queued; default: close."""
        self.close()

    @property
    def underruns(self) -> int:
        return 0

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()


class NullSink(Sink):
    """Counts samples; with ``keep=True`` also keeps them (for tests)."""

    def __init__(self, sample_rate: int = 22050, *, keep: bool = False):
        self.sample_rate = sample_rate
        self.samples_written = 0
        self._keep = keep
        self._parts: list[np.ndarray] = []

    def write(self, samples: np.ndarray) -> None:
        self.samples_written += len(samples)
        if self._keep:
            self._parts.append(np.array(samples, np.float32))

    @property
    def audio(self) -> np.ndarray:
        return np.concatenate(self._parts) if self._parts else np.zeros(0, np.float32)


class FileSink(Sink):
    """Streams to ``path`` (WAV/FLAC/OGG by suffix) through a temp file renamed on close.

    Raises:
        ParameterError: the file cannot be created (its folder is missing, not a folder, not
            writable; the message says which). DiskFullError: no space, here or while writing
            (nothing is left behind).
    """

    def __init__(self, path: Path, *, sample_rate: int):
        import soundfile as sf

        self.path = Path(path)
        self.sample_rate = sample_rate
        fmt, subtype = format_for(self.path)
        self._tmp = self.path.with_name(f".{self.path.name}.part")
        try:
            self._f = sf.SoundFile(os.fsencode(self._tmp), "w", samplerate=sample_rate, channels=1, format=fmt,
                                   subtype=subtype)
        except (OSError, sf.LibsndfileError) as e:
            with contextlib.suppress(OSError):  # (a read-only folder refuses the unlink too)
                self._tmp.unlink(missing_ok=True)
            if is_disk_full(e, self.path):
                raise DiskFullError(f"disk full: cannot create {self.path}") from None
            raise ParameterError(f"cannot write {self.path}: {why_unwritable(self.path) or e}") from None

    def write(self, samples: np.ndarray) -> None:
        try:
            self._f.write(np.asarray(samples, np.float32))
        except Exception as e:
            self.abort()
            if is_disk_full(e, self.path):
                raise DiskFullError(f"disk full while writing {self.path}; nothing was left behind") from None
            raise

    def close(self) -> None:
        if self._f is None:
            return
        try:
            self._f.close()
            os.replace(self._tmp, self.path)
        except Exception as e:
            self._tmp.unlink(missing_ok=True)
            if is_disk_full(e, self.path):
                raise DiskFullError(f"disk full while finishing {self.path}") from None
            raise
        finally:
            self._f = None

    def abort(self) -> None:
        if self._f is not None:
            try:
                self._f.close()
            except Exception:  # noqa: BLE001 - we are already failing; the temp file goes
                pass
            self._f = None
        self._tmp.unlink(missing_ok=True)


class RawStdoutSink(Sink):
    """Raw signed 16-bit little-endian mono PCM to a binary stream (``--out -``)."""

    def __init__(self, stream: BinaryIO, *, sample_rate: int = 22050):
        self._stream = stream
        self.sample_rate = sample_rate

    def write(self, samples: np.ndarray) -> None:
        x = np.clip(np.round(np.asarray(samples, np.float64) * 32768.0), -32768, 32767).astype("<i2")
        self._io(self._stream.write, x.tobytes())

    def close(self) -> None:
        self._io(self._stream.flush)

    @staticmethod
    def _io(call, *args) -> None:
        try:
            call(*args)
        except BrokenPipeError:
            raise  # the reader went away (`| head -c 100`): the CLI ends quietly
        except OSError as e:
            if is_disk_full(e):
                raise DiskFullError("disk full while writing the audio to stdout") from None
            raise AudioDeviceError(f"cannot write the audio to stdout ({e.strerror or e})") from None


class StreamingResampler:
    """Polyphase resampling of a stream in pieces, equal to resampling the whole at once.

    Keeps ``pad`` input samples of history on each side so every output sample sees its
    full filter support; the last ``pad`` input samples wait for the next piece (or ``flush``).
    """

    def __init__(self, rate_in: int, rate_out: int):
        g = gcd(rate_in, rate_out)
        self.up, self.down = rate_out // g, rate_in // g
        # resample_poly's filter spans 10·max(up, down) upsampled samples each side, i.e.
        # 10·max(up, down)/up input samples; round the context up to a multiple of `down`
        # so every piece starts on the output grid.
        half = -(-10 * max(self.up, self.down) // self.up) + 2
        self.pad = self.down * -(-half // self.down)
        self._hist = np.zeros(0, np.float32)  # input not yet fully consumed (plus left context)
        self._left = 0  # how many leading samples of _hist are context only
        self._started = False
        self._in = 0  # input samples seen in this stream
        self._out = 0  # output samples returned

    def _run(self, x: np.ndarray) -> np.ndarray:
        from scipy.signal import resample_poly

        return resample_poly(x, self.up, self.down).astype(np.float32)

    def process(self, x: np.ndarray, *, final: bool = False) -> np.ndarray:
        x = np.asarray(x, np.float32)
        self._in += x.shape[0]
        buf = np.concatenate([self._hist, x])
        if not self._started:
            buf = np.concatenate([np.zeros(self.pad, np.float32), buf])
            self._left = self.pad
            self._started = True
        if final:
            # Everything left: outputs up to ceil(total_in · up / down), zeros beyond the end.
            buf = np.concatenate([buf, np.zeros(2 * self.pad, np.float32)])
            n_out = -(-self._in * self.up // self.down) - self._out
            a = self._left * self.up // self.down
            out = self._run(buf)[a:a + n_out]
            self._hist, self._started, self._in, self._out = np.zeros(0, np.float32), False, 0, 0
            return out
        usable = buf.shape[0] - self.pad  # input samples whose outputs are final
        n_new = usable - self._left
        n_new -= n_new % self.down  # whole output samples only
        if n_new <= 0:
            self._hist = buf
            return np.zeros(0, np.float32)
        y = self._run(buf[: self._left + n_new + self.pad])
        a = self._left * self.up // self.down
        out = y[a: a + n_new * self.up // self.down]
        self._hist = buf[self._left + n_new - self.pad:]
        self._left = self.pad
        self._out += out.shape[0]
        return out

    def flush(self) -> np.ndarray:
        return self.process(np.zeros(0, np.float32), final=True)


def list_output_devices() -> list[dict]:
    """Output-capable devices as sounddevice reports them; [] when PortAudio is missing."""
    try:
        import sounddevice as sd

        return [dict(d, index=i) for i, d in enumerate(sd.query_devices()) if d.get("max_output_channels", 0) > 0]
    except Exception:  # noqa: BLE001 - OSError when PortAudio is missing, PortAudioError otherwise
        return []


#: How long a device may go without a callback, while wavern waits for room in its ring, before
#: it counts as gone (a callback comes every ~12 ms; a busy machine may delay some by 100s of ms).
DEVICE_STALL_S = 2.0


class DeviceSink(Sink):
    """Plays through a sounddevice ``OutputStream`` fed from a preallocated ring buffer.

    Args:
        sample_rate: rate of the audio given to ``write``.
        device: sounddevice device name or index; None = the system default.
        buffer_s: ring capacity in seconds (how far generation may run ahead).
        blocksize: frames per callback (256 ≈ 12 ms at 22.05 kHz: stop acts within a block).
        prefill_s: pre-roll before a stream starts playing (see the module docstring).

    Raises:
        AudioDeviceError: PortAudio missing, no output device, or the device refused every rate.
    """

    def __init__(self, *, sample_rate: int, device: str | int | None = None, buffer_s: float = 4.0,
                 blocksize: int = 256, prefill_s: float = 0.04):
        try:
            import sounddevice as sd
        except OSError as e:
            raise AudioDeviceError(f"PortAudio library not available ({e}); install libportaudio2") from None
        if not list_output_devices():
            raise AudioDeviceError("no audio output device found")
        if isinstance(device, str) and device.isdigit():
            device = int(device)
        self.sample_rate = sample_rate
        self._resampler: StreamingResampler | None = None
        try:
            sd.check_output_settings(device=device, samplerate=sample_rate, channels=1, dtype="float32")
            device_rate = sample_rate
        except Exception:  # noqa: BLE001 - the device cannot do our rate: resample to its default
            try:
                info = sd.query_devices(device, "output")
            except Exception as e:  # noqa: BLE001
                raise AudioDeviceError(f"audio device {device!r} not usable: {e}") from None
            device_rate = int(info["default_samplerate"])
            self._resampler = StreamingResampler(sample_rate, device_rate)
            log.info("device does not take %d Hz; resampling to %d Hz", sample_rate, device_rate)
        self.device_rate = device_rate
        self.ring = AudioRing(int(buffer_s * device_rate), prefill=int(prefill_s * device_rate))
        self.ring.finished = True  # idle until the first samples: waiting for them is latency, not underrun
        ring = self.ring

        def callback(outdata, frames, time_info, status):  # real-time: copy only
            ring.read_into(outdata[:, 0])

        try:
            self._stream = sd.OutputStream(samplerate=device_rate, channels=1, dtype="float32", device=device,
                                           blocksize=blocksize, callback=callback)
            self._stream.start()
        except Exception as e:  # noqa: BLE001 - PortAudioError and friends
            raise AudioDeviceError(f"cannot open audio device {device!r}: {e}") from None

    @property
    def underruns(self) -> int:
        return self.ring.underruns

    def write(self, samples: np.ndarray) -> None:
        """Queue ``samples``, waiting while the ring is full.

        Raises:
            AudioDeviceError: the device stopped asking for audio (unplugged, suspended): no
                callback for :data:`DEVICE_STALL_S` while the ring was full. (Paused, the card
                still calls back, reading silence.)
        """
        x = np.asarray(samples, np.float32)
        if self._resampler is not None:
            x = self._resampler.process(x)
        ring = self.ring
        x = x.reshape(-1)
        if ring.prefill and x.size:
            ring.finished = False  # before the copy, as _write_playing
        done, seen, since = 0, ring.callbacks, time.monotonic()
        while True:
            n = ring.write(x[done:], timeout_s=0.05)
            done += n
            if n:
                ring.finished = False
            if done >= x.size or ring.closed:
                return
            if ring.callbacks != seen:
                seen, since = ring.callbacks, time.monotonic()
            elif time.monotonic() - since > DEVICE_STALL_S:
                raise AudioDeviceError(f"the audio device stopped taking audio (no callback for "
                                       f"{DEVICE_STALL_S:g} s): unplugged or suspended?")

    def end_request(self) -> None:
        """The request's audio is all written: running dry after it is not an underrun."""
        self.ring.finished = True

    def pause(self, paused: bool = True) -> None:
        self.ring.paused = paused

    def close(self) -> None:
        """Play out what is queued (unless paused: then it is dropped), then close the stream."""
        if self._resampler is not None:
            self.ring.write(self._resampler.flush())
        self.ring.finished = True
        while self.ring.queued > 0 and self._stream.active and not self.ring.paused:
            time.sleep(0.01)
        self._stream.stop()
        self._stream.close()

    def abort(self) -> None:
        """Silence within one callback block: drop the queue and stop."""
        self.ring.clear()
        self.ring.close()
        try:
            self._stream.abort()
            self._stream.close()
        except Exception:  # noqa: BLE001
            pass


class PacedSink(Sink):
    """Plays nothing but consumes like a sound card: a clock thread drains the ring in real time.

    The "card" takes ``blocksize`` samples every ``blocksize / sample_rate`` seconds from the
    moment the sink is made: block ``k`` is read at ``t0 + k · blocksize / sample_rate``.
    A thread wakes every ``wake_s`` (~10 ms) and reads every block due by then with
    :meth:`AudioRing.read_into`, the device callback's own code, so a shortfall is zero-filled
    and counted as an underrun exactly as on the device. Before each read it records the
    samples queued (the headroom) in a preallocated array.

    Like a device with a hardware buffer, a block read late (the thread woke late) still
    counts as played on time when its data was there by the time it was read; ``max_late_s``
    says how late the thread ever was while audio was expected, so the resolution of the count
    is known. "Audio expected" (the blocks :meth:`headroom_samples` keeps by default) runs from
    the end of the pre-roll until ``end_request``/``close``: the producer is still at work, the
    sink is not paused.

    Args:
        sample_rate: Hz.
        buffer_s: ring capacity in seconds (how far generation may run ahead).
        blocksize: samples per simulated callback (256 ≈ 11.6 ms at 22.05 kHz, as DeviceSink).
        prefill_s: pre-roll before a stream starts playing, as DeviceSink.
        wake_s: how often the clock thread wakes.
        keep: keep everything played (tests).
        clock: seconds, monotonic; injectable for tests.
        start: start the clock thread; with False, call :meth:`pump` yourself (tests).
        max_records: headroom entries kept (later blocks overwrite the oldest).
    """

    def __init__(self, *, sample_rate: int, buffer_s: float = 4.0, blocksize: int = 256, prefill_s: float = 0.04,
                 wake_s: float = 0.010, keep: bool = False, clock=time.perf_counter, start: bool = True,
                 max_records: int = 1 << 20):
        if blocksize < 1 or wake_s <= 0 or buffer_s <= 0:
            raise ParameterError(f"PacedSink needs blocksize >= 1, wake_s > 0 and buffer_s > 0, found {blocksize}, "
                                 f"{wake_s}, {buffer_s}")
        self.sample_rate = self.device_rate = sample_rate
        self.blocksize = blocksize
        self.ring = AudioRing(max(int(buffer_s * sample_rate), 2 * blocksize), prefill=int(prefill_s * sample_rate))
        self.ring.finished = True  # idle until the first write
        self._clock = clock
        self._wake_s = wake_s
        self._block = np.zeros(blocksize, np.float32)
        self._headroom = np.zeros(max_records, np.int32)  # samples queued when block k was read
        self._playing = np.zeros(max_records, np.bool_)  # whether block k fell inside a request
        self.blocks = 0  # blocks consumed so far
        self.played_samples = 0
        self.max_late_s = 0.0
        self._keep = keep
        self._played: list[np.ndarray] = []
        self._t0 = clock()
        self._quit = threading.Event()
        self._thread = None
        if start:
            self._thread = threading.Thread(target=self._run, name="wavern-paced-sink", daemon=True)
            self._thread.start()

    # ---- consumer (the simulated card)
    def pump(self, now: float) -> int:
        """Consume every block due by ``now`` (clock seconds); returns how many were read."""
        elapsed = (now - self._t0) * self.sample_rate  # samples of clock time; 1e-6: float rounding of exact times
        due = int(math.floor(elapsed + 1e-6)) // self.blocksize + 1 if elapsed > -1e-6 else 0
        n_read = 0
        while self.blocks < due:
            k = self.blocks
            i = k % self._headroom.shape[0]
            self._headroom[i] = self.ring.queued
            n = self.ring.read_into(self._block)
            playing = not (self.ring.finished or self.ring.paused or self.ring.priming)
            self._playing[i] = playing
            late = now - (self._t0 + k * self.blocksize / self.sample_rate)
            if playing and late > self.max_late_s:
                self.max_late_s = late
            self.played_samples += n
            if self._keep and n:
                self._played.append(self._block[:n].copy())
            self.blocks += 1
            n_read += 1
        return n_read

    def _run(self) -> None:
        while not self._quit.wait(self._wake_s):
            self.pump(self._clock())

    # ---- what it measured
    def headroom_samples(self, *, playing_only: bool = True) -> np.ndarray:
        """Samples queued at each block read (the last ``max_records``), optionally only inside requests."""
        n = min(self.blocks, self._headroom.shape[0])
        h = self._headroom[:n].copy()
        return h[self._playing[:n]] if playing_only else h

    @property
    def underruns(self) -> int:
        return self.ring.underruns

    @property
    def played(self) -> np.ndarray:
        """Everything consumed (``keep=True`` only)."""
        return np.concatenate(self._played) if self._played else np.zeros(0, np.float32)

    # ---- producer
    def write(self, samples: np.ndarray) -> None:
        _write_playing(self.ring, samples)

    def end_request(self) -> None:
        """The request's audio is all written: running dry after it is not an underrun."""
        self.ring.finished = True

    def pause(self, paused: bool = True) -> None:
        self.ring.paused = paused

    def _halt(self) -> None:
        self._quit.set()
        if self._thread is not None and threading.current_thread() is not self._thread:
            self._thread.join()

    def close(self) -> None:
        """Play out what is queued (in clock time; unless paused: then it is dropped), then stop the clock."""
        self.ring.finished = True
        if self._thread is not None:
            while self.ring.queued > 0 and self._thread.is_alive() and not self.ring.paused:
                time.sleep(self._wake_s)
        self._halt()

    def abort(self) -> None:
        """Drop the queue and stop the clock."""
        self.ring.clear()
        self.ring.close()
        self._halt()


def _write_playing(ring: AudioRing, samples: np.ndarray) -> None:
    """Write ``samples`` and mark the ring as playing: a shortfall from then on is an underrun.

    With a pre-roll, ``finished`` goes False before the copy: a card reading between the copy
    and the flag would otherwise take a first write shorter than the pre-roll for a whole
    (finished) request and start playing it without the pre-roll. A pre-rolling card reads
    an empty ring as silence, not an underrun, so the early flag costs nothing. Without a
    pre-roll it goes False after the copy, as the card would count the empty ring as underrun.
    """
    x = np.asarray(samples, np.float32).reshape(-1)
    if ring.prefill and x.size:
        ring.finished = False
    if ring.write(x):
        ring.finished = False


@dataclasses.dataclass
class PlaybackStats:
    audio_seconds: float = 0.0
    compute_seconds: float = 0.0
    first_audio_s: float | None = None  # from the call to the first chunk's arrival
    chunks: int = 0
    underruns: int = 0

    @property
    def rtf(self) -> float:
        """Compute time over audio time (below 1 = faster than real time)."""
        return self.compute_seconds / self.audio_seconds if self.audio_seconds else float("nan")


def play(chunks: Iterable[AudioChunk], sink: Sink) -> PlaybackStats:
    """Drive ``chunks`` into ``sink``; close it at the end (abort on error). Returns measurements."""
    stats = PlaybackStats()
    t0 = time.perf_counter()
    compute = 0.0
    it = iter(chunks)
    try:
        while True:
            t = time.perf_counter()
            try:
                chunk = next(it)
            except StopIteration:
                break
            compute += time.perf_counter() - t
            if stats.first_audio_s is None:
                stats.first_audio_s = time.perf_counter() - t0
            sink.write(chunk.samples)
            stats.chunks += 1
            stats.audio_seconds += chunk.duration_s
    except BaseException:
        sink.abort()
        raise
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()
    sink.close()
    stats.compute_seconds = compute
    stats.underruns = sink.underruns
    return stats
