"""Audio format and the one log-mel function of the project.

Every part of wavern (corpus building, training, evaluation, copy synthesis) computes
features through :func:`log_mel` with a :class:`MelConfig`; a voice stores its
``MelConfig`` and loading refuses one that differs from the runtime's.

Audio is 22 050 Hz mono 16-bit. A 16-bit sample ``x`` is split into a coarse byte
``c = (x + 32768) // 256`` and a fine byte ``f = (x + 32768) % 256`` (WaveRNN §3).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading

import numpy as np

from wavern.errors import ParameterError

__all__ = [
    "MelConfig",
    "DEFAULT_MEL",
    "log_mel",
    "mel_filterbank",
    "split_coarse_fine",
    "join_coarse_fine",
    "float_to_int16",
    "int16_to_float",
    "byte_to_unit",
    "griffin_lim",
    "frames_for_samples",
    "slaney_filterbank",
    "LazyJit",
    "load_loops",
    "levinson",
    "mel_power_spectrum",
    "lpc_from_power",
    "mel_lpc",
    "lpc_prediction",
    "pitch_track",
    "pitch_features",
    "audio_pitch_features",
    "copy_features",
    "MU_LAW",
    "MU_CODE_SCALE",
    "mulaw_compress",
    "mulaw_expand",
    "mulaw_log_slope",
    "LTP_MAX_LAG",
    "LTP_MAX_TAPS",
    "soft_limit",
    "LTP_INPUT_SCALE",
    "ltp_params",
    "PHASE_INPUT_GAIN",
    "pulse_phase",
    "phase_step",
]


@dataclasses.dataclass(frozen=True)
class MelConfig:
    """Feature parameters; stored in every voice and compared on load."""

    sample_rate: int = 22050  # Hz; espeak-ng renders at this rate natively
    n_fft: int = 1024  # ~46 ms window: resolves harmonics of voices above ~45 Hz
    win_length: int = 1024
    hop_length: int = 256  # ~11.6 ms per frame; the vocoder upsamples by exactly this
    n_mels: int = 80
    fmin: float = 0.0
    fmax: float = 8000.0  # little speech energy above; keeps mel bins dense where it matters
    log_floor: float = 1e-5  # natural-log clamp: log(1e-5) ≈ -11.5 is "silence"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "MelConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ParameterError(f"unknown mel parameters {sorted(unknown)}; expected a subset of {sorted(names)}")
        return cls(**d)


DEFAULT_MEL = MelConfig()


@functools.lru_cache(maxsize=8)
def mel_filterbank(cfg: MelConfig = DEFAULT_MEL) -> np.ndarray:
    """Slaney-normalised mel filterbank, shape (n_mels, n_fft // 2 + 1), float32 (librosa's)."""
    import librosa  # imported lazily: it is slow to import and only needed here

    fb = librosa.filters.mel(
        sr=cfg.sample_rate, n_fft=cfg.n_fft, n_mels=cfg.n_mels, fmin=cfg.fmin, fmax=cfg.fmax
    )
    fb = fb.astype(np.float32)
    fb.setflags(write=False)
    return fb


@functools.lru_cache(maxsize=8)
def _window(win_length: int, n_fft: int) -> np.ndarray:
    w = np.hanning(win_length + 1)[:-1].astype(np.float32)  # periodic Hann, as librosa/scipy use
    pad = (n_fft - win_length) // 2
    return np.pad(w, (pad, n_fft - win_length - pad))


def _hz_to_mel(f: np.ndarray) -> np.ndarray:
    """Slaney's mel scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above."""
    f = np.asarray(f, np.float64)
    log_part = 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0)
    return np.where(f >= 1000.0, log_part, f / (200.0 / 3.0))


def _mel_to_hz(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, np.float64)
    return np.where(m >= 15.0, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)), m * (200.0 / 3.0))


def slaney_filterbank(cfg: MelConfig = DEFAULT_MEL) -> np.ndarray:
    """The Slaney-normalised mel filterbank of :func:`mel_filterbank` (librosa's), in float64
    numpy: importing librosa would add half a second to the engine's cold start."""
    freqs = np.fft.rfftfreq(cfg.n_fft, 1.0 / cfg.sample_rate)
    edges = _mel_to_hz(np.linspace(_hz_to_mel(cfg.fmin), _hz_to_mel(cfg.fmax), cfg.n_mels + 2))
    width = np.diff(edges)
    ramps = edges[:, None] - freqs[None, :]
    lower = -ramps[:-2] / width[:-1, None]
    upper = ramps[2:] / width[1:, None]
    fb = np.maximum(0.0, np.minimum(lower, upper))
    return fb * (2.0 / (edges[2:] - edges[:-2]))[:, None]


@functools.lru_cache(maxsize=4)
def _band_interpolation(cfg: MelConfig) -> tuple[np.ndarray, np.ndarray]:
    """(n_mels, n_bins) matrix taking band magnitude densities to linear bins, and the bin freqs."""
    fb = slaney_filterbank(cfg)
    area = fb.sum(axis=1)
    freqs = np.fft.rfftfreq(cfg.n_fft, 1.0 / cfg.sample_rate)
    centres = fb @ freqs / area
    eye = np.eye(cfg.n_mels)
    # column m: the linear interpolation (flat beyond the outer centres) of the m-th unit vector
    interp = np.stack([np.interp(freqs, centres, eye[m]) for m in range(cfg.n_mels)])
    interp /= area[:, None]  # band value exp(mel) / area = mean magnitude per bin in the band
    return interp, freqs


#: Unsigned index arithmetic for the compiled loops (here and in the engine): numba then skips the
#: negative-index wraparound of every index.
U = np.uint64


class LazyJit:
    """``py_fn`` compiled by numba (cached on disk) at its first call, so importing the module
    costs nothing: here :func:`levinson`'s and :func:`mel_power_spectrum`'s loops (a stream window
    of a few frames spent most of its Levinson time in numpy's dispatch, a call per order), in the
    engine its small loops outside ``kernels`` (``engine.postfilter.LazyJit``)."""

    def __init__(self, py_fn) -> None:
        self.py_fn, self.fn = py_fn, None
        functools.update_wrapper(self, py_fn)

    def __call__(self, *args):
        if self.fn is None:
            from wavern.numba_cache import cached_njit  # the root package has set numba's switches

            self.fn = cached_njit(self.py_fn, nogil=True)
        return self.fn(*args)


def _levinson_py(r, a, prev):  # pragma: no cover - compiled by LazyJit
    # (``prev``, p + 1 scratch, comes from the caller: an np.empty here would tie numba's array
    # helpers to the cached loop, imported with it in every process, ~14 ms)
    t, p1 = r.shape
    for row in range(t):
        a[row, 0] = 1.0
        for j in range(1, p1):
            a[row, j] = 0.0
        err = r[row, 0]
        for i in range(1, p1):
            acc = r[row, i]
            for j in range(1, i):
                acc += a[row, j] * r[row, i - j]
            k = -acc / err
            for j in range(i + 1):
                prev[j] = a[row, j]
            for j in range(1, i + 1):
                a[row, j] = prev[j] + k * prev[i - j]
            err *= 1.0 - k * k


_levinson = LazyJit(_levinson_py)


def levinson(r: np.ndarray) -> np.ndarray:
    """Prediction polynomials (T, p + 1), a[:, 0] = 1, from autocorrelations r (T, p + 1), by the
    Levinson-Durbin recursion, frame by frame (a frame's result does not depend on the others)."""
    r = np.ascontiguousarray(r, np.float64)
    if r.ndim != 2 or r.shape[1] < 1:
        raise ParameterError(f"autocorrelations must have shape (frames, order + 1), found {r.shape}")
    a = np.empty_like(r)
    _levinson(r, a, np.empty(r.shape[1]))
    return a


def _band_power_py(mag, idx, w, out):  # pragma: no cover - compiled by LazyJit
    t, n_bins = out.shape
    width = idx.shape[1]
    for row in range(t):
        for b in range(n_bins):
            acc = 0.0
            for q in range(width):
                acc += w[b, q] * mag[row, idx[b, q]]
            out[row, b] = acc * acc


_band_power = LazyJit(_band_power_py)


@functools.lru_cache(maxsize=4)
def _band_interpolation_sparse(cfg: MelConfig) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_band_interpolation`'s matrix by bin: (n_bins, k) band indices and weights, k the
    most bands any bin reads (2: the centres either side), unused places weight 0 on band 0."""
    interp, _ = _band_interpolation(cfg)
    live = interp != 0.0
    k = max(int(live.sum(axis=0).max()), 1)
    idx = np.zeros((interp.shape[1], k), np.int64)
    w = np.zeros((interp.shape[1], k))
    for b in range(interp.shape[1]):
        bands = np.flatnonzero(live[:, b])
        idx[b, :bands.size], w[b, :bands.size] = bands, interp[bands, b]
    return idx, w


def load_loops() -> None:
    """Compile (or load from numba's cache) the loops of :func:`levinson` and
    :func:`mel_power_spectrum` now: ~25 ms from a cache, far more without, which a stream's first
    chunk would otherwise pay (``engine.voice.Voice`` calls this as it loads an LPC vocoder or a
    post-filter)."""
    r = np.zeros((1, 2))
    r[0, 0] = 1.0
    _levinson(r, np.empty_like(r), np.empty(2))
    idx, w = _band_interpolation_sparse(DEFAULT_MEL)
    _band_power(np.ones((1, DEFAULT_MEL.n_mels)), idx, w, np.empty((1, idx.shape[0])))


def mel_power_spectrum(mel: np.ndarray, cfg: MelConfig = DEFAULT_MEL) -> np.ndarray:
    """(T, n_mels) log-mel → (T, n_fft // 2 + 1) linear power spectrum (float64), the bands'
    mean magnitudes interpolated between their centres.

    Row by row, in a compiled loop over each bin's (at most two) bands: a frame's result must not
    depend on how many frames are computed together (a BLAS product would block them differently),
    so that the stream, which works window by window, and the offline renderer, which does a whole
    utterance, agree. A non-finite or absurd value
    becomes the log floor (silence), not a NaN that would stick in a filter memory.
    """
    mel = np.asarray(mel, np.float64)
    if mel.ndim != 2 or mel.shape[1] != cfg.n_mels:
        raise ParameterError(f"mel must have shape (frames, {cfg.n_mels}), found {mel.shape}")
    floor = np.log(cfg.log_floor)
    mel = np.clip(np.nan_to_num(mel, nan=floor, neginf=floor, posinf=floor), floor, 20.0)
    idx, w = _band_interpolation_sparse(cfg)
    power = np.empty((mel.shape[0], idx.shape[0]))
    _band_power(np.exp(mel), idx, w, power)
    return power


def lpc_from_power(power: np.ndarray, order: int, cfg: MelConfig = DEFAULT_MEL, *,
                   lag_window_hz: float = 40.0) -> np.ndarray:
    """Linear-prediction polynomials (T, order + 1), ``a[:, 0] = 1``, of power spectra (T, n_bins):
    autocorrelation (inverse FFT), a Gaussian lag window of ``lag_window_hz``, a 1e-4 white-noise
    correction, then Levinson-Durbin. The predictor is ``p_t = -sum_k a_k s_{t-k}``."""
    r = np.fft.irfft(power, n=cfg.n_fft, axis=1)[:, :order + 1]
    lag = np.arange(order + 1)
    r = r * np.exp(-0.5 * (2 * np.pi * lag_window_hz / cfg.sample_rate * lag) ** 2)
    r[:, 0] = r[:, 0] * 1.0001 + 1e-12  # keeps Levinson stable
    return levinson(r)


def mel_lpc(mel: np.ndarray, order: int, cfg: MelConfig = DEFAULT_MEL) -> np.ndarray:
    """The order-``order`` predictor of every frame of a log-mel: (T, order + 1) float64."""
    return lpc_from_power(mel_power_spectrum(mel, cfg), order, cfg)


def lpc_prediction(samples: np.ndarray, a: np.ndarray, hop: int) -> np.ndarray:
    """The short-term prediction ``p_t = -sum_k a_k s_{t-k}`` of every sample, (n,) float64, from
    int or float samples (n,) and per-frame predictors ``a`` (T, P + 1) (:func:`mel_lpc`; sample t
    uses frame t // hop, the last one past the end), silence before the first sample; summed in
    the order k = 1 .. P. The residual is ``samples - lpc_prediction(...)``."""
    s = np.asarray(samples, np.float64)
    a = np.asarray(a, np.float64)
    order, n = a.shape[1] - 1, s.size
    frames = np.minimum(np.arange(n) // hop, a.shape[0] - 1)
    padded = np.concatenate([np.zeros(order), s])  # silence before the utterance
    pred = np.zeros(n)
    for k in range(1, order + 1):
        pred -= a[frames, k] * padded[order - k:order - k + n]
    return pred


def pitch_track(audio: np.ndarray, cfg: MelConfig = DEFAULT_MEL, *, fmin: float = 60.0, fmax: float = 400.0,
                threshold: float = 0.15, voicing_limit: float = 0.35) -> np.ndarray:
    """Fundamental frequency and periodicity of every :func:`log_mel` frame, (T, 2) float32.

    YIN (de Cheveigné & Kawahara 2002) on an ``n_fft`` window centred on sample ``t * hop``
    (zeros beyond the ends): the cumulative-mean-normalised difference ``d'(tau)`` over lags
    ``sr / fmax .. sr / fmin``, the first lag under ``threshold`` followed down to its local
    minimum (the global minimum when none is under it), refined by a parabola. Column 0 is f0 in
    Hz, 0 where ``d'`` at the chosen lag is above ``voicing_limit`` or the window is silent;
    column 1 the periodicity ``1 - d'`` clipped to [0, 1] (0 where silent).

    Args:
        audio: mono float audio in [-1, 1], shape (n_samples,).
    """
    x = np.asarray(audio)
    if x.ndim != 1 or not np.issubdtype(x.dtype, np.floating):
        raise ParameterError(f"pitch_track expects mono float audio (n_samples,), found {x.dtype} {x.shape}")
    if not 0 < fmin < fmax < cfg.sample_rate / 4:
        raise ParameterError(f"need 0 < fmin < fmax < sample_rate / 4, found fmin {fmin}, fmax {fmax}")
    sr, hop, length = cfg.sample_rate, cfg.hop_length, cfg.n_fft
    lag_lo, lag_hi = int(sr / fmax), int(np.ceil(sr / fmin))
    width = length - lag_hi  # integration window of the difference function
    if width < lag_hi // 2:
        raise ParameterError(f"n_fft {length} is too short for fmin {fmin} Hz")
    n_frames = frames_for_samples(x.size, cfg)
    xp = np.pad(x.astype(np.float64), (length // 2, length))
    out = np.zeros((n_frames, 2), np.float32)
    n_fft2 = 1 << int(np.ceil(np.log2(length + 2 + width)))
    lags = np.arange(lag_hi + 2)
    for lo in range(0, n_frames, 2048):  # bounded memory for long inputs
        idx = np.arange(lo, min(lo + 2048, n_frames))
        frames = xp[idx[:, None] * hop + np.arange(length + 2)[None, :]]  # + the lags' overhang
        cross = np.fft.irfft(np.conj(np.fft.rfft(frames[:, :width], n_fft2)) * np.fft.rfft(frames, n_fft2),
                             n_fft2)[:, :lag_hi + 2]
        energy = np.concatenate([np.zeros((len(idx), 1)), np.cumsum(frames ** 2, axis=1)], axis=1)
        e0 = energy[:, width]
        diff = np.maximum(e0[:, None] + energy[:, lags + width] - energy[:, lags] - 2 * cross, 0.0)
        cum = np.cumsum(diff[:, 1:], axis=1)
        cmnd = np.ones_like(diff)
        cmnd[:, 1:] = diff[:, 1:] * lags[1:] / np.maximum(cum, 1e-300)
        band = cmnd[:, lag_lo:lag_hi + 1]
        below = band < threshold
        lag = np.where(below.any(axis=1), below.argmax(axis=1), band.argmin(axis=1)) + lag_lo
        rows = np.arange(len(idx))
        for _ in range(lag_hi - lag_lo):  # follow each dip down to its local minimum
            step = (lag < lag_hi) & (cmnd[rows, np.minimum(lag + 1, lag_hi + 1)] < cmnd[rows, lag])
            if not step.any():
                break
            lag = lag + step
        left, mid, right = cmnd[rows, lag - 1], cmnd[rows, lag], cmnd[rows, lag + 1]
        curve = left - 2 * mid + right
        shift = np.where(curve > 0, 0.5 * (left - right) / np.where(curve > 0, curve, 1.0), 0.0)
        period = lag + np.clip(shift, -0.5, 0.5)
        silent = e0 < width * 1e-8  # below about -80 dBFS
        periodicity = np.where(silent, 0.0, np.clip(1.0 - mid, 0.0, 1.0))
        voiced = ~silent & (mid < voicing_limit)
        out[idx, 0] = np.where(voiced, sr / period, 0.0)
        out[idx, 1] = periodicity
    return out


PITCH_REFERENCE_HZ = 120.0  # log-f0 features are octaves above this


def pitch_features(track: np.ndarray) -> np.ndarray:
    """Conditioning features of a :func:`pitch_track`, (T, 2) float32: log2(f0 / 120 Hz) with
    unvoiced frames filled in linearly from their voiced neighbours (0 when nothing is voiced),
    and the periodicity."""
    track = np.asarray(track, np.float32)
    if track.ndim != 2 or track.shape[1] != 2:
        raise ParameterError(f"expected a pitch track (frames, 2), found shape {track.shape}")
    f0 = track[:, 0]
    voiced = np.nonzero(f0 > 0)[0]
    feats = np.zeros(track.shape, np.float32)
    if voiced.size:
        octaves = np.log2(f0[voiced] / PITCH_REFERENCE_HZ)
        feats[:, 0] = np.interp(np.arange(len(f0)), voiced, octaves)
    feats[:, 1] = track[:, 1]
    return feats


def audio_pitch_features(audio: np.ndarray, cfg: MelConfig = DEFAULT_MEL) -> np.ndarray:
    """:func:`pitch_features` of :func:`pitch_track` of mono float audio: (1 + n // hop, 2) float32,
    frame-aligned with :func:`log_mel` (the one definition every trainer, evaluation and the
    engine's copy synthesis uses)."""
    return pitch_features(pitch_track(audio, cfg))


def copy_features(audio: np.ndarray, cfg: MelConfig = DEFAULT_MEL, *, pitch: bool = False) -> np.ndarray:
    """What copy synthesis gives a vocoder from audio: its :func:`log_mel` (T, n_mels), followed by
    its :func:`audio_pitch_features` with ``pitch`` (a pitch voice), (T, n_mels + 2) float32."""
    mel = log_mel(audio, cfg)
    if not pitch:
        return mel
    return np.ascontiguousarray(np.concatenate([mel, audio_pitch_features(audio, cfg)], axis=1), np.float32)


MU_LAW = 255.0  # the companding constant of an LPC vocoder's "mulaw" excitation (G.711's)
MU_CODE_SCALE = 32767.0 / float(np.log1p(MU_LAW))  # code = MU_CODE_SCALE * sign(x) ln(1 + mu |x| / 32768)


def mulaw_compress(x: np.ndarray) -> np.ndarray:
    """Real excitation values (int16 scale) -> int64 codes in [-32768, 32767]:
    ``rint(sign(x) * 32767 * ln(1 + mu |x| / 32768) / ln(1 + mu))``, mu = 255.

    Small values get most of the codes: a unit of x is 46 codes near 0, |x| = 80 (a median LPC
    excitation sample on the corpus) is code 2 860 and 1 940 (its 99th percentile) code 16 419,
    so the high byte resolves the excitation that a linear code keeps in 2-3 of its 256 values.
    Integer x with |x| < 2000 come back exactly from :func:`mulaw_expand` and rounding."""
    x = np.asarray(x, np.float64)
    y = np.rint(np.sign(x) * MU_CODE_SCALE * np.log1p(MU_LAW * np.abs(x) / 32768.0))
    return np.clip(y, -32768, 32767).astype(np.int64)


def mulaw_expand(y: np.ndarray) -> np.ndarray:
    """Codes -> real values, the inverse of :func:`mulaw_compress` up to its rounding (float64)."""
    y = np.asarray(y, np.float64)
    return np.sign(y) * (32768.0 / MU_LAW) * np.expm1(np.abs(y) / MU_CODE_SCALE)


def mulaw_log_slope(y: np.ndarray) -> np.ndarray:
    """``ln dy/dx`` of :func:`mulaw_compress` at codes ``y``: codes per unit of x, in nats.

    A distribution over codes puts ``P(y)`` where one over values would put ``P(y) dy/dx`` per
    unit, so ``NLL_x = NLL_y - E[ln dy/dx]`` compares a mu-law model's loss with a linear one's.
    """
    x = np.abs(mulaw_expand(y))
    return np.log(MU_CODE_SCALE * MU_LAW / 32768.0) - np.log1p(MU_LAW * x / 32768.0)


LTP_MAX_LAG = 400  # samples: the residual history a long-term predictor keeps (55 Hz at 22 050 Hz)
#: The most residuals around one period back a vocoder reads (``VocoderConfig.ltp_input_taps``):
#: r_{t-T-9} .. r_{t-T+9}, so a lag stops LTP_MAX_TAPS // 2 short of LTP_MAX_LAG (56.4 Hz) and
#: the window stays inside the history.
LTP_MAX_TAPS = 19
#: A vocoder with the period input (``VocoderConfig.ltp_input``) reads r_{t-T} divided by this: the
#: residual (rms ~550 on the corpus) near 1 and its pulses several times that, so a new input with
#: zero weights soon matters at Adam's step size.
LTP_INPUT_SCALE = 512.0


# The long-term predictor's gain against periodicity q: the mean least-squares gain of the LPC
# residual at the YIN lag over voiced frames of 10 held-out corpus sentences, per q bin (0 below
# q 0.45, where it was 0.06; docs/TRAINING.md). A larger gain than the residual supports makes the synthesis
# filter amplify the net's unpredictable part by 1 / (1 - beta^2) in voiced stretches.
LTP_GAIN_Q = (0.45, 0.55, 0.65, 0.75, 0.85, 0.95)
LTP_GAIN = (0.0, 0.14, 0.2, 0.25, 0.3, 0.48)
#: ``ltp_params(gain_scale=)``: the range of the factor (a voice's ``inference.ltp_gain_scale``) and the
#: cap on the scaled gain (below 1, so the synthesis filter's pitch loop 1 / (1 - beta z^-T) stays stable).
LTP_GAIN_SCALE_RANGE = (0.0, 3.0)
LTP_GAIN_MAX = 0.95


def ltp_params(features: np.ndarray, cfg: MelConfig = DEFAULT_MEL, *, gain_scale: float = 1.0) -> np.ndarray:
    """Long-term (pitch) predictor of every frame from its :func:`pitch_features`, (T, 2) float32:
    the lag ``T_f = rint(sr / f0)`` in samples (in [20, LTP_MAX_LAG - LTP_MAX_TAPS // 2]) and the gain ``beta_f``,
    piecewise linear in the periodicity q through (LTP_GAIN_Q, LTP_GAIN) (0 below 0.45, 0.48 from
    0.95 on); a frame with gain 0 has lag 0.

    ``gain_scale``: a sampling-time factor on every gain, capped at :data:`LTP_GAIN_MAX` (training and
    the model's targets use 1); the lags stay those of the unscaled gains, so a period input reads
    the same residuals whatever the factor. More of the period in the synthesis filter keeps a free-running
    vocoder voiced; without mel matching it also costs intelligibility (docs/TRAINING.md).

    An LPC vocoder with ``ltp`` predicts its residual ``r_t = s_t - p_t`` by ``beta r_{t - T}``
    (CELP's adaptive codebook), so a voiced stretch keeps its period in the synthesis filter
    instead of in the network's free-running memory.
    """
    features = np.asarray(features, np.float32)
    if features.ndim != 2 or features.shape[1] != 2:
        raise ParameterError(f"expected pitch features (frames, 2), found shape {features.shape}")
    f0 = PITCH_REFERENCE_HZ * np.exp2(np.clip(features[:, 0].astype(np.float64), -4.0, 4.0))
    lag = np.clip(np.rint(cfg.sample_rate / f0), 20, LTP_MAX_LAG - LTP_MAX_TAPS // 2)
    gain = np.interp(features[:, 1].astype(np.float64), LTP_GAIN_Q, LTP_GAIN)
    lag = np.where(gain > 0, lag, 0.0)
    if gain_scale != 1.0:
        lo, hi = LTP_GAIN_SCALE_RANGE
        if not lo <= gain_scale <= hi:
            raise ParameterError(f"LTP gain scale must be in [{lo:g}, {hi:g}], found {gain_scale!r}")
        gain = np.minimum(gain * gain_scale, LTP_GAIN_MAX)
    return np.stack([lag, gain], axis=1).astype(np.float32)


#: A vocoder with the phase input (``VocoderConfig.phase_input``) reads ``PHASE_INPUT_GAIN * sin(2 pi k phi)``
#: and ``* cos``: about the size of the period input's pulses, so weights that start at zero (a
#: model gaining the input) move its gates as fast as the others' at Adam's step size.
PHASE_INPUT_GAIN = 8.0
PULSE_SEARCH = (0.75, 1.25)  # where pulse_phase looks for the next pulse, in periods after the last one
PULSE_SMOOTH = 33  # samples (1.5 ms): the Hann window pulse_phase smooths r^2 with


def pulse_phase(residual: np.ndarray, lags: np.ndarray, hop: int) -> np.ndarray:
    """The glottal phase of every sample, in cycles [0, 1), from a residual's pulses: (n,) float32.

    Voiced samples are those whose frame (``t // hop``) has a lag ``lags[f] > 0`` (the lags of
    :func:`ltp_params`). In each voiced run the pulses are the peaks of ``r^2`` smoothed by a
    PULSE_SMOOTH-sample Hann window: the first the largest within one period of the run's
    start, each next the largest between PULSE_SEARCH periods after the last (the period of that
    pulse's frame), so the count keeps to the pitch track and the positions to the signal. The
    phase is 0 at each pulse and rises linearly to the next; before the first and after the last
    it runs at one cycle per period. Unvoiced samples get 0. A vocoder with ``phase_input`` is
    trained on this phase and generates with :func:`phase_step`'s.
    """
    r = np.asarray(residual, np.float64)
    lags = np.asarray(lags)
    n = r.size
    if r.ndim != 1 or lags.ndim != 1 or hop <= 0:
        raise ParameterError(f"pulse_phase expects a 1-d residual and 1-d lags, found {r.shape} and {lags.shape}")
    if not lags.size:
        lags = np.zeros(1)
    lag_t = lags[np.minimum(np.arange(n) // hop, lags.size - 1)].astype(np.int64)
    phase = np.zeros(n, np.float64)
    voiced = lag_t > 0
    if not voiced.any():
        return phase.astype(np.float32)
    win = np.hanning(PULSE_SMOOTH + 2)[1:-1]
    env = np.convolve(r * r, win, mode="same")
    edges = np.flatnonzero(np.diff(np.concatenate([[0], voiced.view(np.int8), [0]])))
    lo_f, hi_f = PULSE_SEARCH
    for a, b in zip(edges[::2], edges[1::2]):
        p = a + int(np.argmax(env[a:min(a + lag_t[a], b)]))
        pulses = [p]
        while True:
            per = lag_t[p]
            lo, hi = p + int(round(lo_f * per)), min(p + int(round(hi_f * per)) + 1, b)
            if lo >= hi:
                break
            p = lo + int(np.argmax(env[lo:hi]))
            pulses.append(p)
        t = np.arange(a, b)
        pk = np.asarray(pulses)
        cyc = np.interp(t, pk, np.arange(pk.size, dtype=np.float64))
        first, last = t < pk[0], t > pk[-1]
        cyc[first] = (t[first] - pk[0]) / lag_t[pk[0]]
        cyc[last] = pk.size - 1 + (t[last] - pk[-1]) / lag_t[pk[-1]]
        phase[a:b] = np.mod(cyc, 1.0)
    return phase.astype(np.float32)


def phase_step(phase: float, lag: float) -> float:
    """The generation-time phase rule: the phase of the next sample after one at ``phase`` in a
    frame with ``lag`` (> 0: advance a 1 / lag cycle, wrapped to [0, 1); 0: unvoiced, restart at
    0). The engine's kernel and the reference loop implement exactly this (float64)."""
    if lag > 0:
        phase += 1.0 / lag
        return phase - 1.0 if phase >= 1.0 else phase
    return 0.0


def frames_for_samples(n_samples: int, cfg: MelConfig = DEFAULT_MEL) -> int:
    """Number of mel frames :func:`log_mel` returns for ``n_samples`` of audio (centred STFT)."""
    return 1 + n_samples // cfg.hop_length


@functools.lru_cache(maxsize=1)
def _blas_controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()  # inspecting the loaded libraries costs ~ms: once per process


_BLAS_LOCK = threading.Lock()


@contextlib.contextmanager
def _one_blas_thread():
    """BLAS limited to one thread for a block, so a log-mel has the same bytes whatever thread
    count the process runs BLAS with (the corpus builder's workers and a test process differ).
    One thread at a time: each sets the limit (it must be set from the computing thread to hold
    there) and restores what it found, and interleaved, a thread found another's limit and
    restored it, leaving the process at one thread (2 -> 1 in 3 of 3 runs of a reviewer's script)."""
    with _BLAS_LOCK, _blas_controller().limit(limits=1, user_api="blas"):
        yield


def log_mel(audio: np.ndarray, cfg: MelConfig = DEFAULT_MEL) -> np.ndarray:
    """Log-mel spectrogram of mono float audio in [-1, 1].

    Centred STFT (reflect padding of n_fft // 2), magnitude (not power), mel projection,
    natural log clamped at ``cfg.log_floor``. Frame ``t`` is centred on sample
    ``t * hop_length``; the vocoder renders frame ``t`` as samples
    ``[t * hop, (t + 1) * hop)``.

    Args:
        audio: shape (n_samples,), float32/float64 in [-1, 1]. Int16 input is rejected.
        cfg: feature parameters.

    Returns:
        float32 array of shape (1 + n_samples // hop_length, n_mels).
    """
    x = np.asarray(audio)
    if x.ndim != 1:
        raise ParameterError(f"log_mel expects mono audio of shape (n_samples,), found shape {x.shape}")
    if not np.issubdtype(x.dtype, np.floating):
        raise ParameterError(f"log_mel expects float audio in [-1, 1], found dtype {x.dtype}; use int16_to_float")
    x = x.astype(np.float32, copy=False)
    if x.size == 0:
        return np.zeros((1, cfg.n_mels), np.float32) + np.float32(np.log(cfg.log_floor))
    pad = cfg.n_fft // 2
    mode = "reflect" if x.size > pad else "constant"
    xp = np.pad(x, pad, mode=mode)
    n_frames = frames_for_samples(x.size, cfg)
    frames = np.lib.stride_tricks.as_strided(
        xp, shape=(n_frames, cfg.n_fft), strides=(xp.strides[0] * cfg.hop_length, xp.strides[0]), writeable=False
    )
    spec = np.abs(np.fft.rfft(frames * _window(cfg.win_length, cfg.n_fft), axis=1)).astype(np.float32)
    with _one_blas_thread():  # OpenBLAS rounds sgemm differently with 1 and 2 threads
        mel = spec @ mel_filterbank(cfg).T
    return np.log(np.maximum(mel, cfg.log_floor)).astype(np.float32)


def griffin_lim(mel: np.ndarray, cfg: MelConfig = DEFAULT_MEL, *, n_iter: int = 32, seed: int = 0) -> np.ndarray:
    """Invert a log-mel (frames, n_mels) to float audio with Griffin-Lim (the evaluation yardstick)."""
    import librosa

    mag_mel = np.exp(np.asarray(mel, np.float32)).T  # (n_mels, frames)
    spec = librosa.feature.inverse.mel_to_stft(
        mag_mel, sr=cfg.sample_rate, n_fft=cfg.n_fft, power=1.0, fmin=cfg.fmin, fmax=cfg.fmax
    )
    rng = np.random.default_rng(seed)
    y = librosa.griffinlim(
        spec, n_iter=n_iter, hop_length=cfg.hop_length, win_length=cfg.win_length, n_fft=cfg.n_fft,
        init="random", random_state=rng,
    )
    return y.astype(np.float32)


def float_to_int16(x: np.ndarray) -> np.ndarray:
    """Float audio in [-1, 1] → int16 (clipped, rounded)."""
    return np.clip(np.round(np.asarray(x, np.float64) * 32768.0), -32768, 32767).astype(np.int16)


def soft_limit(x: np.ndarray, knee: float = 0.9) -> np.ndarray:
    """Float audio with peaks above ``knee`` bent smoothly towards full scale instead of clipped:
    ``|x| <= knee`` unchanged; above, ``knee + (1 - knee) tanh((|x| - knee) / (1 - knee))`` (slope 1
    at the knee, never reaching 1), so loud passages (a volume above 1, mel matching's gains) do not
    square off. float64 out."""
    x = np.asarray(x, np.float64)
    a = np.abs(x)
    over = a > knee
    if not over.any():
        return x
    out = x.copy()
    out[over] = np.sign(x[over]) * (knee + (1.0 - knee) * np.tanh((a[over] - knee) / (1.0 - knee)))
    return out


def int16_to_float(x: np.ndarray) -> np.ndarray:
    """int16 → float32 in [-1, 1)."""
    return np.asarray(x, np.int16).astype(np.float32) / 32768.0


def split_coarse_fine(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int16 samples → (coarse, fine) bytes as int64 arrays in [0, 255]."""
    u = np.asarray(x, np.int16).astype(np.int64) + 32768
    return u >> 8, u & 255


def join_coarse_fine(coarse: np.ndarray, fine: np.ndarray) -> np.ndarray:
    """(coarse, fine) bytes → int16 samples (inverse of :func:`split_coarse_fine`)."""
    u = np.asarray(coarse, np.int64) * 256 + np.asarray(fine, np.int64)
    return (u - 32768).astype(np.int16)


def byte_to_unit(b: np.ndarray) -> np.ndarray:
    """A byte in [0, 255] → network input in [-1, 1] (``b / 127.5 - 1``)."""
    return np.asarray(b, np.float32) / np.float32(127.5) - np.float32(1.0)
