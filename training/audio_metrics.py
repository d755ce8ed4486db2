"""Objective audio metrics on float mono audio at 22 050 Hz (or on :func:`wavern.dsp.log_mel`
frames): STOI, wideband PESQ, mel-cepstral distortion after DTW, log-spectral distance, and the
voicing and pitch errors.

- :func:`stoi_score`: STOI (Taal et al. 2011) via ``pystoi`` (which resamples to 10 kHz itself).
- :func:`pesq_wb`: wideband PESQ (ITU-T P.862.2) via ``pesq``, after a polyphase resampling
  22 050 → 16 000 Hz (``scipy.signal.resample_poly(x, 320, 441)``).
- :func:`mcd_dtw` / :func:`mcd_dtw_mel`: mel-cepstral distortion after DTW alignment. ``x`` (T, N = 80)
  is the project's natural-log mel magnitude. Its cepstrum is the cosine series
  ``c_m = (1/N) Σ_k x_k cos(π m (k + ½) / N)``, so that ``x_k ≈ c_0 + 2 Σ_{m≥1} c_m cos(π m (k + ½) / N)``
  (a DCT-II scaled by 1/N, not the orthonormal DCT of MFCCs). c_0 (the level) is dropped; c_1..c_D
  are kept (D = 24 by default). Frames are aligned by DTW (steps (1,0), (0,1), (1,1), equal weight)
  with the Euclidean distance of the cepstra as local cost, and
  ``MCD = mean over the path of (10 / ln 10) · sqrt(2 Σ_{m=1}^{D} (c_m − ĉ_m)²)`` dB: by Parseval the
  RMS (over mel bands) difference of the two liftered log-mel magnitudes in units of ``10 log10``
  of a magnitude ratio, invariant to a gain. Comparable between runs of this module, not with SPTK
  mel-cepstrum MCDs in papers.
- :func:`log_spectral_distance`: per-frame RMS over STFT bins of the dB difference of the power
  spectra (magnitudes floored at 1e-3), mean over frames, no alignment (copy synthesis).
- :func:`pitch_errors`: voicing decision error (VDE, the share of frames whose voiced/unvoiced
  decision differs) and gross pitch error (GPE, the share of frames voiced in both whose f0 differs
  by more than 20 %), from :func:`wavern.dsp.pitch_track`, no alignment.
"""

from __future__ import annotations

import functools
import logging
import math

import numba
import numpy as np

from wavern.dsp import DEFAULT_MEL, MelConfig, log_mel
from wavern.errors import ParameterError

__all__ = ["SAMPLE_RATE", "MCD_CONSTANT", "stoi_score", "pesq_wb", "mel_cepstra", "dtw_align", "mcd_dtw_mel", "mcd_dtw",
           "pitch_errors", "log_spectral_distance", "as_audio", "match_lengths"]

log = logging.getLogger(__name__)

SAMPLE_RATE = 22050
PESQ_RATE = 16000
MCD_CONSTANT = 10.0 * math.sqrt(2.0) / math.log(10.0)  # ≈ 6.1418 dB per unit of cepstral distance
DEFAULT_N_CEPS = 24  # c1..c24, the usual mel-cepstral order in TTS evaluation
LSD_FLOOR = 1e-3  # STFT magnitude floor for LSD (Hann 1024: 16-bit quantisation noise is ~6e-4)


# =========================================================================== audio metrics


def as_audio(x: np.ndarray, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1:
        raise ParameterError(f"{name} must be mono audio of shape (n_samples,), found shape {a.shape}")
    if not np.issubdtype(a.dtype, np.floating):
        raise ParameterError(f"{name} must be float audio in [-1, 1], found dtype {a.dtype}")
    if a.size == 0:
        raise ParameterError(f"{name} is empty")
    return a.astype(np.float64, copy=False)


def match_lengths(reference: np.ndarray, degraded: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both signals as float64, the degraded one cut or zero-padded to the reference's length."""
    ref = as_audio(reference, "reference")
    deg = as_audio(degraded, "degraded")
    if deg.size >= ref.size:
        return ref, deg[: ref.size]
    return ref, np.pad(deg, (0, ref.size - deg.size))


def stoi_score(reference: np.ndarray, degraded: np.ndarray, *, sample_rate: int = SAMPLE_RATE,
               extended: bool = False) -> float:
    """Short-time objective intelligibility (0..1, higher is better) of ``degraded`` against ``reference``.

    Args:
        reference, degraded: (n_samples,) float audio; the degraded one is cut or zero-padded to
            the reference's length.
        sample_rate: Hz of both signals.
        extended: ESTOI instead of STOI.
    """
    from pystoi import stoi

    ref, deg = match_lengths(reference, degraded)
    return float(stoi(ref, deg, sample_rate, extended=extended))


def _resample_to_16k(x: np.ndarray, sample_rate: int) -> np.ndarray:
    from scipy.signal import resample_poly

    if sample_rate == PESQ_RATE:
        return x
    g = math.gcd(PESQ_RATE, sample_rate)
    return resample_poly(x, PESQ_RATE // g, sample_rate // g)


def pesq_wb(reference: np.ndarray, degraded: np.ndarray, *, sample_rate: int = SAMPLE_RATE) -> float:
    """Wideband PESQ MOS-LQO (about 1.0..4.64, higher is better), both signals resampled to 16 kHz.

    Returns NaN (with a logged warning) when PESQ finds no utterance in the reference.
    """
    from pesq import NoUtterancesError, pesq

    ref, deg = match_lengths(reference, degraded)
    ref16 = _resample_to_16k(ref, sample_rate)
    deg16 = _resample_to_16k(deg, sample_rate)
    try:
        return float(pesq(PESQ_RATE, ref16, deg16, "wb"))
    except NoUtterancesError:
        log.warning("PESQ found no utterance in a %.2f s reference; scored NaN", ref.size / sample_rate)
        return float("nan")


@functools.lru_cache(maxsize=8)
def _cepstral_basis(n_mels: int, n_ceps: int) -> np.ndarray:
    """(n_mels, n_ceps) matrix B with ``c[1:] = x @ B``: ``B[k, m-1] = cos(π m (k + ½) / N) / N``."""
    k = np.arange(n_mels)[:, None] + 0.5
    m = np.arange(1, n_ceps + 1)[None, :]
    basis = np.cos(np.pi * m * k / n_mels) / n_mels
    basis.setflags(write=False)
    return basis


def mel_cepstra(mel: np.ndarray, *, n_ceps: int = DEFAULT_N_CEPS) -> np.ndarray:
    """Cepstra c_1..c_D of natural-log mel frames (c_0 dropped), in the convention of the module docstring.

    Args:
        mel: (frames, n_mels) natural-log mel magnitudes (:func:`wavern.dsp.log_mel`).
        n_ceps: D, the number of coefficients kept (1 <= D < n_mels).

    Returns:
        (frames, D) float64.
    """
    x = np.asarray(mel, np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ParameterError(f"mel must have shape (frames >= 1, n_mels), found {x.shape}")
    if not 1 <= n_ceps < x.shape[1]:
        raise ParameterError(f"n_ceps must be in [1, {x.shape[1] - 1}] for {x.shape[1]} mel bands, found {n_ceps}")
    return x @ _cepstral_basis(x.shape[1], n_ceps)


@numba.njit(cache=True, nogil=True)
def _dtw_kernel(cost, acc, path):  # pragma: no cover - compiled
    """Fill ``acc`` (n+1, m+1; inf except acc[0, 0] = 0) and write the path backwards into ``path``.

    ``acc[i, j] = cost[i-1, j-1] + min(acc[i-1, j-1], acc[i-1, j], acc[i, j-1])`` (Sakoe & Chiba's
    symmetric steps with equal weights); ties on the way back prefer the diagonal, then the
    step in i. Returns the path length.
    """
    n, m = cost.shape
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            best = acc[i - 1, j - 1]
            if acc[i - 1, j] < best:
                best = acc[i - 1, j]
            if acc[i, j - 1] < best:
                best = acc[i, j - 1]
            acc[i, j] = cost[i - 1, j - 1] + best
    i, j, k = n, m, 0
    while True:
        path[k, 0] = i - 1
        path[k, 1] = j - 1
        k += 1
        if i == 1 and j == 1:
            break
        diag, up, left = acc[i - 1, j - 1], acc[i - 1, j], acc[i, j - 1]
        if diag <= up and diag <= left:
            i -= 1
            j -= 1
        elif up <= left:
            i -= 1
        else:
            j -= 1
    return k


def dtw_align(cost: np.ndarray) -> tuple[np.ndarray, float]:
    """Minimum-cost monotone alignment of two sequences from their local cost matrix.

    Args:
        cost: (n, m) non-negative finite local costs.

    Returns:
        ``(path, total)``: path (L, 2) int64 index pairs from (0, 0) to (n-1, m-1), steps
        (1, 0), (0, 1) or (1, 1); total, the sum of ``cost`` along it (the minimum).
    """
    c = np.ascontiguousarray(cost, np.float64)
    if c.ndim != 2 or c.shape[0] == 0 or c.shape[1] == 0:
        raise ParameterError(f"cost must be a non-empty (n, m) matrix, found shape {c.shape}")
    if not np.all(np.isfinite(c)):
        raise ParameterError("cost holds NaN or infinite values")
    n, m = c.shape
    acc = np.full((n + 1, m + 1), np.inf)
    acc[0, 0] = 0.0
    path = np.empty((n + m, 2), np.int64)
    length = _dtw_kernel(c, acc, path)
    return path[:length][::-1].copy(), float(acc[n, m])


def mcd_dtw_mel(reference_mel: np.ndarray, test_mel: np.ndarray, *, n_ceps: int = DEFAULT_N_CEPS) -> float:
    """Mel-cepstral distortion in dB between two log-mel sequences after DTW (module docstring)."""
    a = mel_cepstra(reference_mel, n_ceps=n_ceps)
    b = mel_cepstra(test_mel, n_ceps=n_ceps)
    if a.shape[1] != b.shape[1]:
        raise ParameterError(f"mel band counts differ: {np.shape(reference_mel)[1]} != {np.shape(test_mel)[1]}")
    from scipy.spatial.distance import cdist

    path, total = dtw_align(cdist(a, b))  # (n, m) Euclidean distances, exact (no |a|²+|b|²-2ab cancellation)
    return MCD_CONSTANT * total / len(path)


def mcd_dtw(reference: np.ndarray, degraded: np.ndarray, *, cfg: MelConfig = DEFAULT_MEL,
            n_ceps: int = DEFAULT_N_CEPS) -> float:
    """Mel-cepstral distortion in dB between two float signals (their :func:`log_mel` frames, DTW)."""
    ref = as_audio(reference, "reference").astype(np.float32)
    deg = as_audio(degraded, "degraded").astype(np.float32)
    return mcd_dtw_mel(log_mel(ref, cfg), log_mel(deg, cfg), n_ceps=n_ceps)


def _power_db(x: np.ndarray, cfg: MelConfig, floor: float) -> np.ndarray:
    """(frames, n_fft/2 + 1) dB power of the same centred Hann STFT that :func:`log_mel` uses."""
    pad = cfg.n_fft // 2
    xp = np.pad(x, pad, mode="reflect" if x.size > pad else "constant")
    n_frames = 1 + x.size // cfg.hop_length
    idx = np.arange(cfg.n_fft)[None, :] + cfg.hop_length * np.arange(n_frames)[:, None]
    win = np.hanning(cfg.win_length + 1)[:-1]
    lpad = (cfg.n_fft - cfg.win_length) // 2
    win = np.pad(win, (lpad, cfg.n_fft - cfg.win_length - lpad))
    mag = np.abs(np.fft.rfft(xp[idx] * win, axis=1))
    return 20.0 * np.log10(np.maximum(mag, floor))


def log_spectral_distance(reference: np.ndarray, degraded: np.ndarray, *, cfg: MelConfig = DEFAULT_MEL,
                          floor: float = LSD_FLOOR) -> float:
    """Log-spectral distance in dB: per-frame RMS over bins of the dB power difference, mean over frames.

    No alignment: for sample-aligned signals (the degraded one is cut or zero-padded to the
    reference's length). Magnitudes are floored at ``floor`` before the log.
    """
    ref, deg = match_lengths(reference, degraded)
    d = _power_db(ref, cfg, floor) - _power_db(deg, cfg, floor)
    return float(np.sqrt((d * d).mean(axis=1)).mean())


def pitch_errors(reference: np.ndarray, degraded: np.ndarray, *, cfg: MelConfig = DEFAULT_MEL) -> tuple[float, float]:
    """(VDE, GPE) of sample-aligned signals: see the module docstring. GPE is NaN when no frame
    is voiced in both."""
    from wavern.dsp import pitch_track

    ref, deg = match_lengths(reference, degraded)
    r, d = pitch_track(ref, cfg)[:, 0], pitch_track(deg, cfg)[:, 0]
    vde = float(np.mean((r > 0) != (d > 0)))
    both = (r > 0) & (d > 0)
    gpe = float(np.mean(np.abs(d[both] / r[both] - 1.0) > 0.2)) if both.any() else float("nan")
    return vde, gpe


