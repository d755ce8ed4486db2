"""Mel matching: give the vocoder's output the band energies its conditioning mel asks for.

The WaveRNN's sampling noise spreads energy where the mel has none (35 dB above the truth in
the pauses of held-out copy synthesis, docs/bench/melmatch.md) and its bands drift from the
mel's. This stage analyses the output with the features' own transform (centred STFT, Hann
window of ``n_fft``, ``hop``, as :func:`wavern.dsp.log_mel`), measures each frame's mel band
magnitudes ``m̂_tb``, and scales the frame's spectrum bin by bin by the band gains

    g_tb = clip(m_tb / m̂_tb, floor, cap),    m_tb = exp(log-mel of the conditioning)

spread over the FFT bins through the filterbank (a bin's gain: its bands' gains weighted by
the bin's filter values; bins above ``fmax`` take the top band's). The frames are overlap-added
with the window again, divided by the summed squared windows. The vocoder keeps the phase and
the fine structure inside each band; the band magnitudes become the mel's. It is one pass of
Griffin-Lim's magnitude projection, started from the vocoder's phase rather than a random one.

A segment (one sentence) is reflect-padded at both ends as ``log_mel`` pads (zero-padded when
it is too short to reflect). Streaming (:class:`MelMatchStream`): frame ``t`` needs the samples
up to ``t·hop + n_fft/2``, and a sample is final once every frame over it is done, so the output
trails the input by about ``n_fft`` samples (46 ms of audio at 22 050 Hz, a few milliseconds of
the vocoder's time); pushing a segment in any chunking gives what :meth:`MelMatch.apply` gives
for the whole (tested).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from wavern.dsp import DEFAULT_MEL, MelConfig, mel_filterbank
from wavern.errors import ParameterError

__all__ = ["MelMatchConfig", "MelMatch", "MelMatchStream"]

Rows = Callable[[int, int], np.ndarray]  # (first, end) -> mel rows [first, end) of the segment's part


@dataclasses.dataclass(frozen=True)
class MelMatchConfig:
    """Mel matching's settings (a voice's ``voice.json``, ``inference.melmatch``)."""

    cap: float = 4.0  # largest band gain (+12 dB): how far a band the vocoder left too quiet is lifted
    floor: float = 1e-3  # smallest band gain (-60 dB): how far noise where the mel is silent is cut

    def __post_init__(self) -> None:
        for name in ("cap", "floor"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not np.isfinite(v):
                raise ParameterError(f"mel matching {name} must be a finite number, found {v!r}")
        if not 0.0 < self.floor <= 1.0 <= self.cap <= 1000.0:
            raise ParameterError(f"mel matching needs 0 < floor <= 1 <= cap <= 1000, found floor {self.floor} "
                                 f"and cap {self.cap}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "MelMatchConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(d, dict) or set(d) - names:
            raise ParameterError(f"mel matching settings must be a dict with keys from {sorted(names)}, found {d!r}")
        return cls(**d)


class MelMatch:
    """The transform of one feature configuration: :meth:`apply` for a whole segment,
    :meth:`stream` for one pushed chunk by chunk."""

    def __init__(self, config: MelMatchConfig = MelMatchConfig(), mel_config: MelConfig = DEFAULT_MEL) -> None:
        if mel_config.win_length != mel_config.n_fft or mel_config.n_fft % 2:
            raise ParameterError(f"mel matching needs win_length == n_fft (even), found {mel_config.win_length} "
                                 f"and {mel_config.n_fft}")
        self.config, self.mel_config = config, mel_config
        self.n_fft, self.hop, self.n_mels = mel_config.n_fft, mel_config.hop_length, mel_config.n_mels
        fb = mel_filterbank(mel_config).astype(np.float64)  # (n_mels, n_bins)
        self._fb_t = np.ascontiguousarray(fb.T)  # (n_bins, n_mels)
        cover = fb.sum(axis=0)
        spread = fb / np.where(cover > 0, cover, 1.0)  # each bin: weights over its bands, summing to 1
        top = np.zeros(self.n_mels)
        top[-1] = 1.0
        spread[:, cover <= 0] = top[:, None]  # bins no band covers (above fmax): the top band's gain
        self._spread = np.ascontiguousarray(spread)  # (n_mels, n_bins)
        n = np.arange(self.n_fft)
        self.window = 0.5 - 0.5 * np.cos(2.0 * np.pi * n / self.n_fft)  # periodic Hann, as log_mel's

    def _filter_frames(self, frames: np.ndarray, mel: np.ndarray) -> np.ndarray:
        """Windowed frames (k, n_fft) and their mel rows (k, >= n_mels) → the frames to overlap-add."""
        spec = np.fft.rfft(frames * self.window, axis=1)
        have = np.empty((frames.shape[0], self.n_mels))
        gains = np.empty((frames.shape[0], spec.shape[1]))
        mag = np.abs(spec)
        want = np.exp(np.asarray(mel, np.float64)[:, :self.n_mels])
        for i in range(frames.shape[0]):  # row by row: the same arithmetic whatever the chunking
            have[i] = mag[i] @ self._fb_t
            g = np.clip(want[i] / np.maximum(have[i], 1e-30), self.config.floor, self.config.cap)
            gains[i] = g @ self._spread
        return np.fft.irfft(spec * gains, n=self.n_fft, axis=1) * self.window

    def n_frames(self, n_samples: int, n_rows: int) -> int:
        """Frames a segment of ``n_samples`` with ``n_rows`` mel rows has: those of its STFT that have a row."""
        return min(1 + n_samples // self.hop, n_rows)

    def apply(self, audio: np.ndarray, mel: np.ndarray) -> np.ndarray:
        """One whole segment: int16 in, int16 out; float in, float32 out. ``mel`` (T, >= n_mels)
        holds the segment's frames from its first (a pitch voice's extra columns are ignored)."""
        s = self.stream(lambda a, b: np.asarray(mel)[a:b], len(audio), n_rows=len(mel))
        return s.push(audio)

    def stream(self, rows: Rows, n_samples: int, *, n_rows: int | None = None, frame0: int = 0) -> "MelMatchStream":
        """A segment of ``n_samples`` samples whose frame ``t`` has the mel row ``rows(frame0 + t, ...)``
        (``n_rows``: how many rows from ``frame0`` exist; default ``n_samples // hop``)."""
        return MelMatchStream(self, rows, int(n_samples), n_samples // self.hop if n_rows is None else int(n_rows),
                              int(frame0))


class MelMatchStream:
    """One segment pushed chunk by chunk (:meth:`push`); once all its samples are in, every output
    sample has come out. The output is as long as the input, delayed by up to ~``n_fft`` samples."""

    def __init__(self, mm: MelMatch, rows: Rows, n_samples: int, n_rows: int, frame0: int = 0) -> None:
        if n_samples < 0 or n_rows < 0:
            raise ParameterError(f"a segment needs n_samples, n_rows >= 0, found {n_samples}, {n_rows}")
        self.mm, self.rows, self.frame0 = mm, rows, frame0
        self.n = n_samples
        self.total_frames = mm.n_frames(n_samples, n_rows) if n_samples else 0
        half = mm.n_fft // 2
        self.reflect = n_samples > half  # log_mel's rule: reflect when it can, else zeros
        self.x = np.zeros(n_samples)
        self.acc = np.zeros(n_samples + mm.n_fft)  # index i holds sample i - n_fft/2
        self.norm = np.zeros(n_samples + mm.n_fft)
        self.n_in = 0  # samples pushed
        self.next_frame = 0  # first frame not yet filtered
        self.n_out = 0  # samples returned
        self._int16: bool | None = None

    @property
    def done(self) -> bool:
        return self.n_out == self.n

    def cut(self) -> np.ndarray:
        """End the segment at the samples pushed so far (a change of speed re-renders the rest of a
        sentence): as if it had been made that long, with the rows of its whole frames; returns the
        output not yet returned."""
        n = self.n_in
        self.n, self.x = n, self.x[:n]
        self.total_frames = min(self.total_frames, self.mm.n_frames(n, n // self.mm.hop)) if n else 0
        self.next_frame = min(self.next_frame, self.total_frames)
        self.reflect = n > self.mm.n_fft // 2
        return self.push(np.zeros(0, np.float32 if self._int16 is False else np.int16))

    def _ready(self, k: int) -> bool:
        half, hop = self.mm.n_fft // 2, self.mm.hop
        if self.n_in == self.n:
            return True
        return k * hop + half <= self.n_in and half - k * hop < self.n_in  # no right edge yet; left reflection in

    def _windows(self, k0: int, k1: int) -> np.ndarray:
        half, hop = self.mm.n_fft // 2, self.mm.hop
        idx = (np.arange(k0, k1) * hop - half)[:, None] + np.arange(self.mm.n_fft)  # sample indices
        if self.reflect:
            idx = np.where(idx < 0, -idx, idx)
            idx = np.where(idx > self.n - 1, 2 * (self.n - 1) - idx, idx)
            return self.x[idx]
        inside = (idx >= 0) & (idx < self.n)
        return np.where(inside, self.x[np.clip(idx, 0, max(self.n - 1, 0))], 0.0)

    def push(self, audio: np.ndarray) -> np.ndarray:
        """The next samples of the segment in; the output samples now final out (possibly none)."""
        a = np.asarray(audio)
        if a.ndim != 1:
            raise ParameterError(f"audio must be mono (n,), found shape {a.shape}")
        is_int = a.dtype == np.int16
        if self._int16 is None:
            self._int16 = is_int
        elif self._int16 != is_int:
            raise ParameterError("a mel-matching segment takes int16 or float chunks, not both")
        if self.n_in + a.size > self.n:
            raise ParameterError(f"the segment has {self.n} samples; {self.n_in + a.size} pushed")
        self.x[self.n_in:self.n_in + a.size] = a.astype(np.float64) / 32768.0 if is_int else a
        self.n_in += a.size
        k1 = self.next_frame
        while k1 < self.total_frames and self._ready(k1):
            k1 += 1
        mm, hop = self.mm, self.mm.hop
        if k1 > self.next_frame:
            k0 = self.next_frame
            mel = np.asarray(self.rows(self.frame0 + k0, self.frame0 + k1))
            if mel.shape[0] != k1 - k0 or mel.ndim != 2 or mel.shape[1] < mm.n_mels:
                raise ParameterError(f"mel rows {self.frame0 + k0}..{self.frame0 + k1} of the segment: expected "
                                     f"({k1 - k0}, >= {mm.n_mels}), found {mel.shape}")
            out = mm._filter_frames(self._windows(k0, k1), mel)
            w2 = mm.window ** 2
            for j, k in enumerate(range(k0, k1)):  # in frame order, as a whole-segment pass
                self.acc[k * hop:k * hop + mm.n_fft] += out[j]
                self.norm[k * hop:k * hop + mm.n_fft] += w2
            self.next_frame = k1
        half = mm.n_fft // 2
        if self.n_in == self.n:  # every frame is in: the rest is final
            final = self.n
        else:  # frames from next_frame on cover samples from next_frame * hop - n_fft / 2 on
            final = max(0, min(self.n_in, self.next_frame * hop - half))
        lo, hi = self.n_out, max(self.n_out, final)
        y = self.acc[lo + half:hi + half] / np.maximum(self.norm[lo + half:hi + half], 1e-3)
        self.n_out = hi
        if self._int16:
            return np.clip(np.rint(y * 32768.0), -32768, 32767).astype(np.int16)
        return y.astype(np.float32)
