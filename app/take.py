"""One request's audio as the window generated it, kept for Export last (:class:`Take`)."""

from __future__ import annotations

import logging
import math
import tempfile

import numpy as np

__all__ = ["Take"]

log = logging.getLogger(__name__)


class Take:
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


