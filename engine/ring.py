"""A single-producer / single-consumer ring buffer for the audio callback.

Power-of-two capacity so positions wrap with a mask. Positions are monotonically growing
integers, each written by exactly one side: the producer owns ``_write``, the consumer
(the sound card callback) owns ``_read``. With the GIL, a Python int store is atomic, so no
lock is needed; the consumer never allocates, logs, locks or raises.

Counters for the GUI and benchmarks: ``underruns`` (callbacks that found too few samples),
``underrun_samples``, ``consumed``, ``min_headroom`` (fewest samples queued at a callback
since the last reset).

Pre-roll (``prefill``): after the ring has run dry at the end of a request (or before the
first one), the consumer plays silence until ``prefill`` samples are queued or the producer
says it is finished, so a stream starts with that much margin instead of one chunk's worth.
Streamed chunks arrive much faster than real time, so the pre-roll costs the compute time of
the chunks that fill it (a few ms), not its duration.
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["AudioRing"]


class AudioRing:
    """SPSC float32 ring. ``write`` waits (polling) when full; ``read_into`` never blocks or locks."""

    def __init__(self, capacity_samples: int, *, channels: int = 1, prefill: int = 0):
        if capacity_samples < 2:
            raise ValueError(f"capacity must be >= 2 samples, found {capacity_samples}")
        cap = 1 << (int(capacity_samples) - 1).bit_length()
        if not 0 <= prefill <= cap:
            raise ValueError(f"prefill must be in [0, capacity {cap}] samples, found {prefill}")
        self.prefill = int(prefill)
        self._priming = prefill > 0  # consumer-owned: waiting for the pre-roll
        self.capacity = cap
        self._mask = cap - 1
        self._buf = np.zeros(cap, np.float32)
        self._write = 0  # total samples ever written (producer-owned)
        self._read = 0  # total samples ever consumed (consumer-owned)
        self._flush_to = -1  # consumer jumps its read position here on the next callback (stop)
        self.paused = False
        self.underruns = 0
        self.underrun_samples = 0
        self.min_headroom = cap
        self.callbacks = 0
        self._closed = False
        self.finished = False  # producer says no more data will come

    # ----------------------------------------------------------------- producer side
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def queued(self) -> int:
        """Samples written but not yet played."""
        return self._write - self._read

    @property
    def consumed(self) -> int:
        """Samples the consumer has taken since the ring was made (played, not counting silence it
        filled in); a stop's dropped queue is not among them."""
        return self._read

    def write(self, samples: np.ndarray, *, timeout_s: float | None = None) -> int:
        """Copy ``samples`` in, waiting for space; returns how many were written (fewer if closed/timeout)."""
        x = np.asarray(samples, np.float32).reshape(-1)
        done = 0
        deadline = None
        while done < x.size and not self._closed:
            free = self.capacity - (self._write - self._read)
            if free == 0:
                # The consumer takes no locks, so the producer polls: a few ms is far below
                # the ring's depth (hundreds of ms), so this never starves the callback.
                if deadline is None:
                    deadline = time.monotonic() + timeout_s if timeout_s is not None else float("inf")
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.002)
                continue
            n = min(free, x.size - done)
            start = self._write & self._mask
            first = min(n, self.capacity - start)
            self._buf[start:start + first] = x[done:done + first]
            if n > first:
                self._buf[:n - first] = x[done + first:done + n]
            self._write += n  # publish after the copy
            done += n
        return done

    def clear(self) -> None:
        """Drop everything queued (stop): the consumer skips to the current write position."""
        self._flush_to = self._write

    def close(self) -> None:
        self._closed = True

    def reset_stats(self) -> None:
        self.underruns = 0
        self.underrun_samples = 0
        self.min_headroom = self.capacity
        self.callbacks = 0

    # ----------------------------------------------------------------- consumer side
    @property
    def priming(self) -> bool:
        """The consumer is playing silence until the pre-roll is queued (consumer-owned)."""
        return self._priming

    def read_into(self, out: np.ndarray) -> int:
        """Fill ``out`` (1-D float32 view) from the ring; zero-fill a shortfall. Real-time safe.

        Returns the number of real samples copied. Counts an underrun when data was expected
        (not paused, producer not finished) and fell short.
        """
        self.callbacks += 1
        flush = self._flush_to
        if flush >= 0:
            if flush > self._read:
                self._read = flush
            self._flush_to = -1
        n_out = out.shape[0]
        if self.paused:
            out[:] = 0.0
            return 0
        avail = self._write - self._read
        if self._priming:
            if avail < self.prefill and not (self.finished and avail > 0):
                out[:] = 0.0  # pre-roll: waiting for the stream to build its margin is not an underrun
                return 0
            self._priming = False
        if avail < self.min_headroom:
            self.min_headroom = avail
        n = avail if avail < n_out else n_out
        start = self._read & self._mask
        first = n if n < self.capacity - start else self.capacity - start
        out[:first] = self._buf[start:start + first]
        if n > first:
            out[first:n] = self._buf[:n - first]
        if n < n_out:
            out[n:] = 0.0
            if not self.finished:
                self.underruns += 1
                self.underrun_samples += n_out - n
            elif self.prefill:
                self._priming = True  # the request is over: the next one pre-rolls again
        self._read += n
        return n
