"""A tiny filesystem for the tests of full disks and read-only folders (root only)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest


@contextlib.contextmanager
def tmpfs(path: Path, size_kb: int, *, read_only: bool = False) -> Iterator[Path]:
    """A tmpfs of ``size_kb`` KiB mounted at ``path`` for the block, unmounted after; the test is
    skipped where it cannot be mounted (not root, no mount permission)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tiny filesystem needs root")
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size_kb}k" + (",ro" if read_only else "")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)
