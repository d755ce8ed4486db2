"""Atomic file writes: write to a temporary sibling, then rename over the target.

A reader (or a resumed run) sees either the old file or the complete new one, never a torn
one; a full disk becomes :class:`~wavern.errors.DiskFullError` and leaves no temporary behind.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Callable

from wavern.errors import DiskFullError, ParameterError

__all__ = ["atomic_write", "check_output_file", "is_disk_full", "why_unwritable"]


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_path)`` and rename the result to ``path``.

    Raises:
        DiskFullError: the disk or quota filled up while writing (the temporary is removed).
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        try:  # the file replaced keeps its mode; a new one gets the umask's (safetensors writes 0600)
            os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
        except OSError:
            pass
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


def _umask() -> int:
    """The process's umask, read without setting it (os.umask would change it for every thread
    for a moment); 0o022 where /proc does not say."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def why_unwritable(path: str | os.PathLike) -> str | None:
    """Why a file cannot be created at ``path`` in words (its folder is missing, not a folder or not
    writable), or None when none of these: for messages after a library's bare "System error."."""
    parent = Path(path).parent
    if not parent.exists():
        return f"folder {parent} does not exist"
    if not parent.is_dir():
        return f"{parent} is not a folder"
    if not os.access(parent, os.W_OK):
        return f"folder {parent} is not writable"
    return None


def check_output_file(what: str, path: str | os.PathLike) -> Path:
    """``path`` as a file a command may write, refused before the work that would fill it:
    a folder, a missing folder, or a folder that cannot be written. ``what`` names it in the
    message (``"--json"``, ``"output"``)."""
    p = Path(path)
    if p.is_dir():
        raise ParameterError(f"{what} {p} is a folder; give a file name such as {p / 'out.wav'}")
    why = why_unwritable(p)
    if why is not None:
        raise ParameterError(f"{what} {p}: {why}")
    if p.exists() and not p.is_file():  # a pipe or a device: the temp file renamed over it would replace it
        raise ParameterError(f"{what} {p} is not a regular file (a pipe or a device?); it is left alone")
    return p


_NOT_SPACE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENAMETOOLONG, errno.EISDIR, errno.ENOTDIR,
              errno.ENOENT, errno.EEXIST, errno.EINVAL)


def is_disk_full(e: BaseException, path: str | os.PathLike | None = None) -> bool:
    """Whether ``e`` means "no space left": ENOSPC/EDQUOT, or a library's wording of it, or (the
    error says nothing: libsndfile's bare "System error.", numpy's "N requested and M written")
    less than 1 MiB free where ``path`` is written."""
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if isinstance(e, OSError) and e.errno in _NOT_SPACE:  # says what it is: a read-only folder on a
        return False  # nearly full volume is a permission problem, not a full disk
    if "space" in str(e).lower() or "requested and" in str(e):
        return True
    if path is not None:
        p = Path(path)
        try:
            return shutil.disk_usage(p if p.is_dir() else p.parent).free < (1 << 20)
        except OSError:
            return False
    return False

