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

A pitch voice's frames also carry f0 and periodicity (``wavern.dsp.pitch_features``); with
``pitch_gain`` g > 0 a long-term (pitch) stage comes first, as in the codecs' post-filters
(G.729's long-term post-filter): ``c[n] = (x[n] + w_t x[n - T_t]) / (1 + w_t)``, ``T_t = sr / f0_t``
(fractional, linearly interpolated; f0 clipped to 60-400 Hz), ``w_t = g * periodicity_t``. A signal
periodic in ``T_t`` passes unchanged; between the harmonics the noise falls by up to
``20 log10((1 + w) / (1 - w))`` dB.

What it does to held-out copy synthesis, for several orders, and what it costs:
docs/bench/postfilter.md (``bench/postfilter.py --quality``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from wavern import dsp
from wavern.dsp import (PITCH_REFERENCE_HZ, MelConfig, U, lpc_from_power, mel_power_spectrum,  # noqa: F401
                        slaney_filterbank)
from wavern.errors import ParameterError

__all__ = ["PostfilterConfig", "PostfilterState", "postfilter_coefficients", "pitch_stage", "Postfilter", "LazyJit",
           "settings_from_dict"]


def settings_from_dict(cls, d, what: str):
    """A frozen settings dataclass from a ``voice.json`` dict: unknown keys are refused with ``what`` named."""
    names = {f.name for f in dataclasses.fields(cls)}
    if not isinstance(d, dict) or set(d) - names:
        raise ParameterError(f"{what} settings must be a dict with keys from {sorted(names)}, found {d!r}")
    return cls(**d)


@dataclasses.dataclass(frozen=True)
class PostfilterConfig:
    """The post-filter's settings (stored in a voice's ``voice.json``, ``inference.postfilter``)."""

    gamma_num: float = 0.8  # bandwidth expansion of the zeros
    gamma_den: float = 0.97  # ... and of the poles; the closer the two, the milder the filter
    tilt: float = 0.3  # first-order compensation of the low-pass tilt A(z/g1)/A(z/g2) adds
    order: int = 56  # linear-prediction order: high, so A follows the 80-band mel envelope closely
    pitch_gain: float = 0.0  # the long-term stage's weight at full periodicity (a pitch voice's); 0: none

    def __post_init__(self) -> None:
        if (not isinstance(self.pitch_gain, (int, float)) or isinstance(self.pitch_gain, bool)
                or not 0.0 <= self.pitch_gain <= 1.0):
            raise ParameterError(f"post-filter pitch_gain must be a number in [0, 1], found {self.pitch_gain!r}")
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
        return settings_from_dict(cls, d, "post-filter")


def postfilter_coefficients(mel: np.ndarray, config: PostfilterConfig = PostfilterConfig(),
                            mel_config: MelConfig = MelConfig()) -> np.ndarray:
    """Per-frame filter coefficients from a log-mel.

    Args:
        mel: (T, n_mels) natural-log magnitude mel (``wavern.dsp.log_mel``'s).
    Returns:
        (T, 4, order + 1) float64: row 0 the numerator ``g_t A(z / gamma_num)``, row 1 the
        denominator ``A(z / gamma_den)``, row 2 ``[1, -tilt, 0, ...]``, row 3 the long-term
        stage ``[T_t, w_t, 0, ...]`` (zeros: none; see :func:`pitch_stage` for a pitch voice's).
    """
    p = config.order
    power = mel_power_spectrum(mel, mel_config)  # (T, n_bins), row by row
    a = lpc_from_power(power, p, mel_config)
    lag = np.arange(p + 1)
    num, den = a * config.gamma_num ** lag, a * config.gamma_den ** lag
    tilt = np.zeros(p + 1)
    tilt[:2] = 1.0, -config.tilt
    # energy of a target-spectrum signal through the filter, per frame
    h2 = np.abs(np.fft.rfft(num, n=mel_config.n_fft) / np.fft.rfft(den, n=mel_config.n_fft)
                * np.fft.rfft(tilt, n=mel_config.n_fft)) ** 2
    gain = np.sqrt(power.sum(axis=1) / np.maximum((power * h2).sum(axis=1), 1e-30))
    out = np.zeros((power.shape[0], 4, p + 1))
    out[:, 0], out[:, 1], out[:, 2] = num * gain[:, None], den, tilt
    return out


PITCH_LAG_HZ = (60.0, 400.0)  # f0 range of the long-term stage (YIN's in wavern.dsp.pitch_track)


def pitch_stage(pitch: np.ndarray, gain: float, sample_rate: int) -> np.ndarray:
    """The long-term stage of each frame from its pitch features (T, 2) (log2(f0 / 120 Hz),
    periodicity): (T, 2) float64 ``[lag in samples, weight]``, weight = gain × periodicity in [0, 1]."""
    pitch = np.asarray(pitch, np.float64)
    f0 = np.clip(PITCH_REFERENCE_HZ * 2.0 ** pitch[:, 0], *PITCH_LAG_HZ)
    return np.stack([sample_rate / f0, gain * np.clip(pitch[:, 1], 0.0, 1.0)], axis=1)


@dataclasses.dataclass
class PostfilterState:
    """The filter memories one stream carries (updated in place): ``x`` the last ``order`` inputs
    and ``w`` the last ``order`` outputs of the pole-zero part, newest first; ``z`` (1,) the last
    of those outputs again, for the tilt; ``position`` the index of the next sample."""

    x: np.ndarray
    w: np.ndarray
    z: np.ndarray
    position: int = 0
    #: the last inputs of the long-term stage, the stream's ``i``-th sample at ``i % PITCH_HISTORY``
    #: (counted over all its sentences, so a sentence's start reads the last one's end, as one pass does)
    past: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(PITCH_HISTORY))
    seen: int = 0  # samples filtered so far


PITCH_HISTORY = 512  # > the longest lag (22050 / 60 = 368 samples) + 1


class Postfilter:
    """Applies :func:`postfilter_coefficients` to audio in any chunking (sample by sample, so
    chunked filtering is bit-identical to one pass)."""

    def __init__(self, config: PostfilterConfig = PostfilterConfig(), *, hop: int = 256) -> None:
        self.config, self.hop = config, int(hop)

    def load(self) -> None:
        """Compile (or load from numba's cache) the filter loop: a few milliseconds from a cache."""
        self.apply(np.zeros(1, np.int16), np.zeros((1, 4, self.config.order + 1)), self.new_state())

    def new_state(self) -> PostfilterState:
        p = self.config.order
        return PostfilterState(np.zeros(p), np.zeros(p), np.zeros(1))

    def coefficients(self, mel: np.ndarray, mel_config: MelConfig = MelConfig()) -> np.ndarray:
        """Each frame's filter from its log-mel; wider frames (a pitch voice's features: the mel,
        then its pitch features) are read for their first ``n_mels`` channels, and with a
        ``pitch_gain`` for their pitch features too (frames without: :class:`ParameterError`)."""
        mel = np.asarray(mel)
        out = postfilter_coefficients(mel[:, :mel_config.n_mels], self.config, mel_config)
        if self.config.pitch_gain > 0.0:
            if mel.ndim != 2 or mel.shape[1] < mel_config.n_mels + 2:
                raise ParameterError(f"the post-filter's pitch stage needs frames of {mel_config.n_mels} mel bands "
                                     f"and 2 pitch features, found shape {mel.shape}")
            out[:, 3, :2] = pitch_stage(mel[:, mel_config.n_mels:mel_config.n_mels + 2], self.config.pitch_gain,
                                        mel_config.sample_rate)
        return out

    def apply(self, audio: np.ndarray, coefs: np.ndarray, state: PostfilterState, *, frame0: int = 0) -> np.ndarray:
        """Filter the next ``len(audio)`` samples of a stream (int16 in, int16 out; float in, float32 out).

        ``coefs`` holds the frames from ``frame0`` on; sample ``state.position`` belongs to frame
        ``state.position // hop``. Frames before or past ``coefs`` use its first or last frame.
        """
        x = np.asarray(audio)
        if x.ndim != 1:
            raise ParameterError(f"audio must be mono (n,), found shape {x.shape}")
        if coefs.ndim != 3 or coefs.shape[0] == 0 or coefs.shape[1:] != (4, self.config.order + 1):
            raise ParameterError(f"coefs must have shape (frames, 4, {self.config.order + 1}), found {coefs.shape}")
        is_int = x.dtype == np.int16
        xf = x.astype(np.float64) / 32768.0 if is_int else x.astype(np.float64)
        out = np.empty_like(xf)
        rings = np.empty((2, 2 * self.config.order))
        _filter(xf, out, np.ascontiguousarray(coefs, np.float64), int(frame0), int(state.position), self.hop,
                state.x, state.w, state.z, state.past, int(state.seen), rings[0], rings[1])
        state.position += xf.size
        state.seen += xf.size
        if is_int:
            return np.clip(np.rint(out * 32768.0), -32768, 32767).astype(np.int16)
        return out.astype(np.float32)


def _filter_py(x, out, coefs, frame0, pos0, hop, hx, hw, z, past, seen0, rx, rw):  # pragma: no cover - compiled below
    n_frames, _, p1 = coefs.shape
    p = p1 - 1
    n_past = past.size
    # the memories newest first, in rings rx, rw (2p, the caller's scratch) written twice (at r and
    # r + p) so that the p newest are always the run rx[r:r + p]: nothing is shifted a sample.
    # Element loops, no array allocation or slice assignment: those would tie numba's array and
    # string helpers to the cached loop, imported with it in every process (~14 ms of Voice.load).
    for k in range(p):
        rx[k] = rx[k + p] = hx[k]
        rw[k] = rw[k + p] = hw[k]
    r = 0
    # the frame of sample pos0 + i and the place in ``past`` of input seen0 + i, carried from
    # sample to sample rather than divided out at every sample
    fa = pos0 // hop - frame0
    within = pos0 % hop
    wp = seen0 % n_past
    pk = U(p // 4 * 4)
    for i in range(x.size):
        f = U(0 if fa < 0 else (n_frames - 1 if fa >= n_frames else fa))
        xi = x[i]
        wt = coefs[f, 3, 1]
        if wt > 0.0:  # the long-term stage: (x[n] + w x[n - T]) / (1 + w), T fractional
            at = seen0 + i - coefs[f, 3, 0]
            j = int(np.floor(at))
            fr = at - j
            if j >= 0:  # the stream's first samples have no past
                xi = (xi + wt * ((1.0 - fr) * past[j % n_past] + fr * past[(j + 1) % n_past])) / (1.0 + wt)
        past[wp] = x[i]
        wp = wp + 1 if wp + 1 < n_past else 0
        # four partial sums a chain: one long chain of dependent adds was the loop's whole cost
        # (unsigned indices: no negative-index wraparound to test)
        a0 = a1 = a2 = a3 = 0.0
        b0 = b1 = b2 = b3 = 0.0
        ur = U(r)
        for k in range(U(0), pk, U(4)):
            a0 += coefs[f, 0, k + U(1)] * rx[ur + k]
            a1 += coefs[f, 0, k + U(2)] * rx[ur + k + U(1)]
            a2 += coefs[f, 0, k + U(3)] * rx[ur + k + U(2)]
            a3 += coefs[f, 0, k + U(4)] * rx[ur + k + U(3)]
            b0 += coefs[f, 1, k + U(1)] * rw[ur + k]
            b1 += coefs[f, 1, k + U(2)] * rw[ur + k + U(1)]
            b2 += coefs[f, 1, k + U(3)] * rw[ur + k + U(2)]
            b3 += coefs[f, 1, k + U(4)] * rw[ur + k + U(3)]
        for k in range(pk, U(p)):
            a0 += coefs[f, 0, k + U(1)] * rx[ur + k]
            b0 += coefs[f, 1, k + U(1)] * rw[ur + k]
        w = coefs[f, 0, 0] * xi + ((a0 + a1) + (a2 + a3)) - ((b0 + b1) + (b2 + b3))
        out[i] = w + coefs[f, 2, 1] * z[0]
        z[0] = w
        r = r - 1 if r > 0 else p - 1
        rx[r], rx[r + p], rw[r], rw[r + p] = xi, xi, w, w
        within += 1
        if within == hop:
            within = 0
            fa += 1
    for k in range(p):
        hx[k] = rx[r + k]
        hw[k] = rw[r + k]


class LazyJit(dsp.LazyJit):
    """:class:`wavern.dsp.LazyJit` for the engine's small loops outside ``kernels`` (this filter,
    mel matching): it loads ``kernels`` first, which sets numba's switches if nobody has."""

    def __call__(self, *args):
        if self.fn is None:
            from wavern.engine import kernels  # noqa: F401 - sets numba's vectoriser flag before numba loads
        return super().__call__(*args)


_filter = LazyJit(_filter_py)
