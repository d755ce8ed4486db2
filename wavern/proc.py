"""Processes that stop cleanly: workers that do not outlive their driver, and SIGTERM as Ctrl-C.

A pool's workers are stopped by their driver on an error, Ctrl-C or SIGTERM; a driver killed
outright (SIGKILL, the OOM killer) cannot do that, and its workers would go on with their
task for nobody, writing files. :func:`exit_with_parent` ends such a worker within a second.
:func:`sigterm_interrupts` makes SIGTERM unwind like Ctrl-C, so temp files are removed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

__all__ = ["exit_with_parent", "sigterm_interrupts"]


def exit_with_parent(poll_s: float = 1.0) -> None:
    """In a worker process: start a daemon thread that exits the process (``os._exit(1)``) once
    its parent has gone (the worker is re-parented). Call it from the pool's initializer."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, name="wavern-exit-with-parent", daemon=True).start()


@contextlib.contextmanager
def sigterm_interrupts():
    """Within the block, SIGTERM raises KeyboardInterrupt in the main thread (as Ctrl-C does), so
    the code unwinds: half-written outputs are removed, finished work is kept. Elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

