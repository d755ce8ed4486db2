"""Reading and writing audio files: atomic writes, clear errors, a full disk reported as such."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from pathlib import Path

import numpy as np

from wavern.errors import DiskFullError, ParameterError

__all__ = ["read_audio", "write_audio", "encode_audio", "FORMATS", "format_for"]

log = logging.getLogger(__name__)

FORMATS = {".wav": ("WAV", "PCM_16"), ".flac": ("FLAC", "PCM_16"), ".ogg": ("OGG", "VORBIS")}


def format_for(path: Path) -> tuple[str, str]:
    try:
        return FORMATS[path.suffix.lower()]
    except KeyError:
        raise ParameterError(f"unsupported audio file type '{path.suffix}' for {path}; use one of "
                             f"{', '.join(FORMATS)}") from None


#: Input sample rates read_audio accepts (what audio files use in practice).
MIN_INPUT_RATE, MAX_INPUT_RATE = 4000, 384000


def read_audio(path: Path, *, sample_rate: int) -> np.ndarray:
    """Read an audio file as mono float32 at ``sample_rate`` (downmixes, resamples).

    Raises:
        ParameterError: missing, unreadable or truncated file, no samples, NaN or infinite samples,
            or a sample rate outside [MIN_INPUT_RATE, MAX_INPUT_RATE].
    """
    import soundfile as sf

    path = Path(path)
    if not path.is_file():
        raise ParameterError(f"{path}: no such file")
    try:
        data, sr = sf.read(os.fsencode(path), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, ValueError) as e:
        raise ParameterError(f"{path}: not a readable audio file ({e})") from None
    if data.shape[0] == 0:
        raise ParameterError(f"{path}: the file holds no samples")
    if not np.isfinite(data).all():  # a float file can; it failed later as "mel contains NaN"
        raise ParameterError(f"{path}: the file holds NaN or infinite samples")
    if not MIN_INPUT_RATE <= sr <= MAX_INPUT_RATE:  # a 6 kB file at 1 Hz resampled to 3000 s asked for GBs
        raise ParameterError(f"{path}: sample rate {sr} Hz is outside [{MIN_INPUT_RATE}, {MAX_INPUT_RATE}] Hz")
    if data.shape[1] > 1:
        log.warning("%s has %d channels; mixing down to mono", path, data.shape[1])
    x = data.mean(axis=1).astype(np.float32)
    if sr != sample_rate:
        from math import gcd

        from scipy.signal import resample_poly

        log.info("%s is %d Hz; resampling to %d Hz", path, sr, sample_rate)
        g = gcd(sr, sample_rate)
        x = resample_poly(x, sample_rate // g, sr // g).astype(np.float32)
    return np.clip(x, -1.0, 1.0)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def encode_audio(samples: np.ndarray, sample_rate: int, *, format: str = "wav") -> bytes:
    """Mono audio (float in [-1, 1] or int16) as the bytes of a ``format`` file ("wav": 16-bit
    PCM, "flac", "ogg": Vorbis), for a web response or a database rather than a path.

    Raises:
        ParameterError: unknown format.
    """
    import io

    import soundfile as sf

    fmt, subtype = format_for(Path("audio." + str(format).lstrip(".")))
    x = np.asarray(samples)
    if x.dtype == np.int16:
        x = x.astype(np.float32) / 32768.0
    buf = io.BytesIO()
    with sf.SoundFile(buf, "w", samplerate=sample_rate, channels=1, format=fmt, subtype=subtype) as f:
        f.write(np.asarray(x, np.float32))
    return buf.getvalue()


def write_audio(path: Path, samples: np.ndarray, sample_rate: int) -> Path:
    """Write mono audio (float in [-1, 1] or int16) atomically: a temp file renamed into place.

    Raises:
        DiskFullError: the disk or quota is full; no partial file is left at ``path``.
        ParameterError: unknown file type.
    """
    import soundfile as sf

    path = Path(path)
    fmt, subtype = format_for(path)
    x = np.asarray(samples)
    if x.dtype == np.int16:
        x = x.astype(np.float32) / 32768.0
    tmp = path.with_name(f".{path.name}.part")
    try:
        with sf.SoundFile(os.fsencode(tmp), "w", samplerate=sample_rate, channels=1, format=fmt, subtype=subtype) as f:
            f.write(np.asarray(x, np.float32))
        _fsync(tmp)  # the data is on disk before the name is: a crash leaves the old file or the whole new one
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):  # keep the first error (a read-only folder fails this too)
            tmp.unlink(missing_ok=True)
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFullError(f"disk full while writing {path}; free space and run again") from None
        raise
    except sf.LibsndfileError as e:
        with contextlib.suppress(OSError):  # keep the first error (a read-only folder fails this too)
            tmp.unlink(missing_ok=True)
        from wavern.fileio import is_disk_full

        if is_disk_full(e, path):
            raise DiskFullError(f"disk full while writing {path}; free space and run again") from None
        from wavern.fileio import why_unwritable

        raise ParameterError(f"cannot write {path}: {why_unwritable(path) or e}") from None
    return path
