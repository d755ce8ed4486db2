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
