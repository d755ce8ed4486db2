"""Worker processes that do not outlive their driver.

A pool's workers are stopped by their driver on an error, Ctrl-C or SIGTERM; a driver killed
outright (SIGKILL, the OOM killer) cannot do that, and its workers would go on with their
task for nobody, writing files. :func:`exit_with_parent` ends such a worker within a second.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["exit_with_parent"]


def exit_with_parent(poll_s: float = 1.0) -> None:
    """In a worker process: start a daemon thread that exits the process (``os._exit(1)``) once
    its parent has gone (the worker is re-parented). Call it from the pool's initializer."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, name="wavern-exit-with-parent", daemon=True).start()
