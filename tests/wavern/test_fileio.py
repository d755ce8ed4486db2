"""wavern.fileio: the disk-full test."""

import errno

from wavern.fileio import is_disk_full


def test_an_error_that_says_what_it_is_is_not_a_full_disk_even_on_a_nearly_full_volume(tmp_path, monkeypatch):
    """A read-only folder on a volume with under 1 MiB free was reported as a full disk (the
    free-space fallback is for errors that say nothing)."""
    import shutil

    full = shutil.disk_usage(tmp_path)._replace(free=1000)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: full)
    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"), tmp_path)
    assert is_disk_full(RuntimeError("System error."), tmp_path)  # says nothing: the volume decides
    for code in (errno.EACCES, errno.EROFS, errno.EPERM, errno.ENAMETOOLONG):
        assert not is_disk_full(OSError(code, "no"), tmp_path), code
    assert not is_disk_full(RuntimeError("System error."), None)


# (mutation audit: atomic_write's promises were untested)

def test_atomic_write_leaves_no_temporary_behind_a_failed_or_interrupted_write(tmp_path):
    import pytest

    from wavern.errors import DiskFullError
    from wavern.fileio import atomic_write

    target = tmp_path / "model.bin"
    target.write_bytes(b"old")

    def fails(code):
        def write(tmp):
            tmp.write_bytes(b"half a file")
            raise OSError(code, "no")
        return write

    for code, err in ((errno.ENOSPC, DiskFullError), (errno.EDQUOT, DiskFullError), (errno.EIO, OSError)):
        with pytest.raises(err):
            atomic_write(target, fails(code))
        assert sorted(p.name for p in tmp_path.iterdir()) == ["model.bin"] and target.read_bytes() == b"old"

    def interrupted(tmp):
        tmp.write_bytes(b"half a file")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, interrupted)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.bin"] and target.read_bytes() == b"old"
    assert atomic_write(target, lambda tmp: tmp.write_bytes(b"new")) == target and target.read_bytes() == b"new"


def test_a_file_that_cannot_be_created_is_explained(tmp_path):
    """Exports to a missing folder said "Error opening b'...': System error." (GUI review)."""
    import numpy as np
    import pytest

    from wavern.engine.audio_io import write_audio
    from wavern.engine.sinks import FileSink
    from wavern.errors import ParameterError
    from wavern.fileio import why_unwritable

    (tmp_path / "file").write_text("x")
    assert why_unwritable(tmp_path / "missing" / "a.wav") == f"folder {tmp_path / 'missing'} does not exist"
    assert why_unwritable(tmp_path / "file" / "a.wav") == f"{tmp_path / 'file'} is not a folder"
    assert why_unwritable(tmp_path / "a.wav") is None
    with pytest.raises(ParameterError, match="does not exist"):
        write_audio(tmp_path / "missing" / "a.wav", np.zeros(10, np.float32), 22050)
    with pytest.raises(ParameterError, match="does not exist"):  # the same error as write_audio's (API review)
        FileSink(tmp_path / "missing" / "b.wav", sample_rate=22050)


def test_atomic_write_gives_a_new_file_the_umasks_mode_and_keeps_an_old_files(tmp_path):
    """A voice built from nothing had its weight files at 0600 (safetensors' temporary file mode):
    other users could not load it (a helper's from-nothing build)."""
    import os

    from wavern.fileio import _umask, atomic_write

    def write_private(tmp):
        tmp.write_bytes(b"w")
        os.chmod(tmp, 0o600)

    new = atomic_write(tmp_path / "new.bin", write_private)
    assert new.stat().st_mode & 0o777 == 0o666 & ~_umask()
    old = tmp_path / "old.bin"
    old.write_bytes(b"x")
    os.chmod(old, 0o640)
    atomic_write(old, write_private)
    assert old.stat().st_mode & 0o777 == 0o640
