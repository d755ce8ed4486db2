"""BLAS threads for the acoustic model: :func:`use_threads`, and the process's own counts given back
when the last voice that set them closes (:data:`PROCESS_THREADS`)."""

from __future__ import annotations

import logging
import threading

from wavern.errors import ParameterError

__all__ = ["use_threads", "PROCESS_THREADS"]

log = logging.getLogger(__name__)


def use_threads(n: int | None) -> None:
    """Run BLAS (numpy's, which runs the acoustic model) with ``n`` threads; None: leave it.

    The limit (threadpoolctl, ~1 ms) is process-wide and covers the libraries loaded now.
    """
    if n is None:
        return
    if n < 1:
        raise ParameterError(f"threads must be >= 1 or None, found {n}")
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn (librosa)
        log.warning("threadpoolctl missing: BLAS keeps its own thread count")
    else:
        threadpool_limits(limits=n, user_api="blas")


class _ProcessThreads:
    """The process's BLAS thread counts from before the first open voice set its own
    (:func:`use_threads`), put back when the last such voice closes: a program that loads a voice,
    speaks and closes it gets its own thread counts back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._before: list | None = None  # threadpoolctl's BLAS info

    def hold(self, n: int | None) -> bool:
        """use_threads(n) for a voice being opened; True when it holds the settings (n not None)."""
        if n is None:
            return False
        with self._lock:
            if self._holders == 0:
                from threadpoolctl import threadpool_info

                self._before = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
            use_threads(n)
            self._holders += 1
        return True

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders or self._before is None:
                return
            blas, self._before = self._before, None
            if blas:
                from threadpoolctl import threadpool_limits

                threadpool_limits(limits=blas)


PROCESS_THREADS = _ProcessThreads()

