"""Atomic file writes: write to a temporary sibling, then rename over the target.

A reader (or a resumed run) sees either the old file or the complete new one, never a torn
one; a full disk becomes :class:`~wavern.errors.DiskFullError` and leaves no temporary behind.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Callable

from wavern.errors import DiskFullError

__all__ = ["atomic_write"]


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_path)`` and rename the result to ``path``.

    Raises:
        DiskFullError: the disk or quota filled up while writing (the temporary is removed).
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFullError(f"no space left writing {path}: free some disk space and retry") from None
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
