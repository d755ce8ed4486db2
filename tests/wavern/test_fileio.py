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
