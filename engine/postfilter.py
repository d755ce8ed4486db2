"""Formant post-filter: deepen the spectral valleys of the vocoder's output, frame by frame.

The vocoder's sampling noise is close to white, so it fills the valleys between formants that
the target spectrum leaves nearly empty. The classic speech-codec remedy (Chen & Gersho's
adaptive post-filter) filters the output with

    H_t(z) = g_t * A_t(z / gamma_num) / A_t(z / gamma_den) * (1 - tilt z^-1)   (0.8, 0.97, 0.3)

where ``A_t`` is the order-``order`` (56) linear-prediction polynomial of frame ``t``. Here ``A_t``
comes from the *conditioning* log-mel (the spectrum the audio should have), not from the noisy
output: band magnitudes → a linear power spectrum (bands interpolated at their centres) →
autocorrelation → Levinson-Durbin. ``g_t`` makes the filter keep the energy of a signal with the
target spectrum. Frame ``t`` filters samples ``[t hop, (t + 1) hop)``; the filter memories carry
across frames and chunks, so chunked filtering equals one pass over the whole utterance.

What it does to held-out copy synthesis, for several orders, and what it costs:
docs/bench/postfilter.md (``bench/postfilter.py --quality``).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from wavern.dsp import MelConfig
from wavern.errors import ParameterError

__all__ = ["PostfilterConfig", "PostfilterState", "postfilter_coefficients", "Postfilter"]


@dataclasses.dataclass(frozen=True)
class PostfilterConfig:
    """The post-filter's settings (stored in a voice's ``voice.json``, ``inference.postfilter``)."""

    gamma_num: float = 0.8  # bandwidth expansion of the zeros
    gamma_den: float = 0.97  # ... and of the poles; the closer the two, the milder the filter
    tilt: float = 0.3  # first-order compensation of the low-pass tilt A(z/g1)/A(z/g2) adds
    order: int = 56  # linear-prediction order: high, so A follows the 80-band mel envelope closely

    def __post_init__(self) -> None:
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                   for v in (self.gamma_num, self.gamma_den, self.tilt)):
            raise ParameterError(f"post-filter gammas and tilt must be numbers, found {self.gamma_num!r}, "
                                 f"{self.gamma_den!r}, {self.tilt!r}")
        if not 0.0 <= self.gamma_num < self.gamma_den < 1.0:
            raise ParameterError(f"post-filter gammas must satisfy 0 <= gamma_num < gamma_den < 1, "
                                 f"found {self.gamma_num} and {self.gamma_den}")
        if not 0.0 <= self.tilt < 1.0:
            raise ParameterError(f"post-filter tilt must be in [0, 1), found {self.tilt}")
        if not isinstance(self.order, int) or isinstance(self.order, bool) or not 2 <= self.order <= 96:
            raise ParameterError(f"post-filter order must be in [2, 96], found {self.order}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "PostfilterConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(d, dict) or set(d) - names:
            raise ParameterError(f"post-filter settings must be a dict with keys from {sorted(names)}, found {d!r}")
        return cls(**d)


def _hz_to_mel(f: np.ndarray) -> np.ndarray:
    """Slaney's mel scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above."""
    f = np.asarray(f, np.float64)
    log_part = 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0)
    return np.where(f >= 1000.0, log_part, f / (200.0 / 3.0))


def _mel_to_hz(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, np.float64)
    return np.where(m >= 15.0, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)), m * (200.0 / 3.0))


def slaney_filterbank(cfg: MelConfig) -> np.ndarray:
    """The Slaney-normalised mel filterbank of :func:`wavern.dsp.mel_filterbank` (librosa's), in
    float64 numpy: importing librosa would add half a second to the engine's cold start."""
    freqs = np.fft.rfftfreq(cfg.n_fft, 1.0 / cfg.sample_rate)
    edges = _mel_to_hz(np.linspace(_hz_to_mel(cfg.fmin), _hz_to_mel(cfg.fmax), cfg.n_mels + 2))
    width = np.diff(edges)
    ramps = edges[:, None] - freqs[None, :]
    lower = -ramps[:-2] / width[:-1, None]
    upper = ramps[2:] / width[1:, None]
    fb = np.maximum(0.0, np.minimum(lower, upper))
    return fb * (2.0 / (edges[2:] - edges[:-2]))[:, None]


@functools.lru_cache(maxsize=4)
def _interpolation(cfg: MelConfig) -> tuple[np.ndarray, np.ndarray]:
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


def _levinson(r: np.ndarray) -> np.ndarray:
    """Prediction polynomials (T, p + 1), a[:, 0] = 1, from autocorrelations r (T, p + 1)."""
    t, p1 = r.shape
    a = np.zeros((t, p1))
    a[:, 0] = 1.0
    err = r[:, 0].copy()
    for i in range(1, p1):
        acc = r[:, i] + np.einsum("tj,tj->t", a[:, 1:i], r[:, i - 1:0:-1])
        k = -acc / err
        a[:, 1:i + 1] += k[:, None] * a[:, i - 1::-1][:, :i]
        err *= 1.0 - k * k
    return a


def postfilter_coefficients(mel: np.ndarray, config: PostfilterConfig = PostfilterConfig(),
                            mel_config: MelConfig = MelConfig()) -> np.ndarray:
    """Per-frame filter coefficients from a log-mel.

    Args:
        mel: (T, n_mels) natural-log magnitude mel (``wavern.dsp.log_mel``'s).
    Returns:
        (T, 3, order + 1) float64: row 0 the numerator ``g_t A(z / gamma_num)``, row 1 the
        denominator ``A(z / gamma_den)``, row 2 ``[1, -tilt, 0, ...]``.
    """
    mel = np.asarray(mel, np.float64)
    if mel.ndim != 2 or mel.shape[1] != mel_config.n_mels:
        raise ParameterError(f"mel must have shape (frames, {mel_config.n_mels}), found {mel.shape}")
    p = config.order
    floor = np.log(mel_config.log_floor)
    # a non-finite or absurd frame becomes silence, not a NaN that would stick in the filter memory
    mel = np.clip(np.nan_to_num(mel, nan=floor, neginf=floor, posinf=floor), floor, 20.0)
    interp, _ = _interpolation(mel_config)
    mag = np.exp(mel)
    # Row by row: a frame's coefficients must not depend on how many frames are computed
    # together (BLAS blocks a matrix product differently), so that the stream, which computes
    # them window by window, and the offline renderer, which does a whole utterance, agree.
    power = np.empty((mel.shape[0], interp.shape[1]))
    for t in range(mel.shape[0]):
        power[t] = mag[t] @ interp
    power **= 2  # (T, n_bins)
    r = np.fft.irfft(power, n=mel_config.n_fft, axis=1)[:, :p + 1]
    lag = np.arange(p + 1)
    r = r * np.exp(-0.5 * (2 * np.pi * 40.0 / mel_config.sample_rate * lag) ** 2)  # 40 Hz lag window
    r[:, 0] = r[:, 0] * 1.0001 + 1e-12  # white-noise correction: keeps Levinson stable
    a = _levinson(r)
    num, den = a * config.gamma_num ** lag, a * config.gamma_den ** lag
    tilt = np.zeros(p + 1)
    tilt[:2] = 1.0, -config.tilt
    # energy of a target-spectrum signal through the filter, per frame
    h2 = np.abs(np.fft.rfft(num, n=mel_config.n_fft) / np.fft.rfft(den, n=mel_config.n_fft)
                * np.fft.rfft(tilt, n=mel_config.n_fft)) ** 2
    gain = np.sqrt(power.sum(axis=1) / np.maximum((power * h2).sum(axis=1), 1e-30))
    out = np.empty((mel.shape[0], 3, p + 1))
    out[:, 0], out[:, 1], out[:, 2] = num * gain[:, None], den, tilt
    return out


@dataclasses.dataclass
class PostfilterState:
    """The filter memories one stream carries (updated in place): ``x`` the last ``order`` inputs
    and ``w`` the last ``order`` outputs of the pole-zero part, newest first; ``z`` (1,) the last
    of those outputs again, for the tilt; ``position`` the index of the next sample."""

    x: np.ndarray
    w: np.ndarray
    z: np.ndarray
    position: int = 0


class Postfilter:
    """Applies :func:`postfilter_coefficients` to audio in any chunking (sample by sample, so
    chunked filtering is bit-identical to one pass)."""

    def __init__(self, config: PostfilterConfig = PostfilterConfig(), *, hop: int = 256) -> None:
        self.config, self.hop = config, int(hop)

    def load(self) -> None:
        """Compile (or load from numba's cache) the filter loop: a few milliseconds from a cache."""
        self.apply(np.zeros(1, np.int16), np.zeros((1, 3, self.config.order + 1)), self.new_state())

    def new_state(self) -> PostfilterState:
        p = self.config.order
        return PostfilterState(np.zeros(p), np.zeros(p), np.zeros(1))

    def coefficients(self, mel: np.ndarray, mel_config: MelConfig = MelConfig()) -> np.ndarray:
        return postfilter_coefficients(mel, self.config, mel_config)

    def apply(self, audio: np.ndarray, coefs: np.ndarray, state: PostfilterState, *, frame0: int = 0) -> np.ndarray:
        """Filter the next ``len(audio)`` samples of a stream (int16 in, int16 out; float in, float32 out).

        ``coefs`` holds the frames from ``frame0`` on; sample ``state.position`` belongs to frame
        ``state.position // hop``. Frames before or past ``coefs`` use its first or last frame.
        """
        x = np.asarray(audio)
        if x.ndim != 1:
            raise ParameterError(f"audio must be mono (n,), found shape {x.shape}")
        if coefs.ndim != 3 or coefs.shape[0] == 0 or coefs.shape[1:] != (3, self.config.order + 1):
            raise ParameterError(f"coefs must have shape (frames, 3, {self.config.order + 1}), found {coefs.shape}")
        is_int = x.dtype == np.int16
        xf = x.astype(np.float64) / 32768.0 if is_int else x.astype(np.float64)
        out = np.empty_like(xf)
        _filter(xf, out, np.ascontiguousarray(coefs, np.float64), int(frame0), int(state.position), self.hop,
                state.x, state.w, state.z)
        state.position += xf.size
        if is_int:
            return np.clip(np.rint(out * 32768.0), -32768, 32767).astype(np.int16)
        return out.astype(np.float32)


def _filter_py(x, out, coefs, frame0, pos0, hop, hx, hw, z):  # pragma: no cover - compiled below
    n_frames, _, p1 = coefs.shape
    p = p1 - 1
    for i in range(x.size):
        f = (pos0 + i) // hop - frame0
        f = 0 if f < 0 else (n_frames - 1 if f >= n_frames else f)
        v = coefs[f, 0, 0] * x[i]
        for k in range(p):
            v += coefs[f, 0, k + 1] * hx[k]
        w = v
        for k in range(p):
            w -= coefs[f, 1, k + 1] * hw[k]
        out[i] = w + coefs[f, 2, 1] * z[0]
        z[0] = w
        for k in range(p - 1, 0, -1):
            hx[k] = hx[k - 1]
            hw[k] = hw[k - 1]
        hx[0] = x[i]
        hw[0] = w


def _compile():
    from wavern.engine import kernels  # noqa: F401 - sets numba's vectoriser flag before numba loads
    import numba

    return numba.njit(cache=True, nogil=True)(_filter_py)


class _Lazy:
    fn = None

    def __call__(self, *args):
        if _Lazy.fn is None:
            _Lazy.fn = _compile()
        return _Lazy.fn(*args)


_filter = _Lazy()
