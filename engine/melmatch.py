"""Mel matching: give the vocoder's output the band energies its conditioning mel asks for.

    mm = MelMatch(MelMatchConfig(iterations=8), DEFAULT_MEL)
    out = mm.apply(samples, mel)                       # one segment (a sentence) at once
    stream = mm.stream(rows, n_samples)                # rows(a, b): mel rows; push() chunks: the same samples

Each pass analyses the output with the features' own STFT, scales every frame's spectrum by the
band gains ``clip(exp(mel) / measured, floor, cap)`` (optionally smoothed across the bands) and
overlap-adds it back: a Griffin-Lim magnitude projection started from the vocoder's phase; the
exact definition is docs/ARCHITECTURE.md's "Post-processing". The WaveRNN's sampling noise spreads
energy where the mel has none (35 dB above the truth in the pauses of held-out copy synthesis) and
its bands drift from the mel's; this puts them back. Streamed, each pass trails the one before by
``n_fft - hop`` samples and keeps only a few windows, however long the segment.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Callable

import numpy as np

from wavern.dsp import DEFAULT_MEL, MelConfig, U, _window, slaney_filterbank, soft_limit
from wavern.engine.postfilter import LazyJit, settings_from_dict
from wavern.errors import ParameterError

__all__ = ["MelMatchConfig", "MelMatch", "MelMatchStream"]

Rows = Callable[[int, int], np.ndarray]  # (first, end) -> mel rows [first, end) of the segment's part


@dataclasses.dataclass(frozen=True)
class MelMatchConfig:
    """Mel matching's settings (a voice's ``voice.json``, ``inference.melmatch``)."""

    cap: float = 4.0  # largest band gain (+12 dB): how far a band the vocoder left too quiet is lifted
    floor: float = 1e-3  # smallest band gain (-60 dB): how far noise where the mel is silent is cut
    iterations: int = 1  # passes, each on the last one's output (Griffin-Lim's iterations); n_fft - hop of delay each
    smooth: float = 0.0  # Gaussian width (in mel bands) over which the log gains are averaged; 0: each band its own

    def __post_init__(self) -> None:
        if not isinstance(self.iterations, int) or isinstance(self.iterations, bool) or not 1 <= self.iterations <= 32:
            raise ParameterError(f"mel matching iterations must be an integer in [1, 32], found {self.iterations!r}")
        for name in ("cap", "floor"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not np.isfinite(v):
                raise ParameterError(f"mel matching {name} must be a finite number, found {v!r}")
        if not isinstance(self.smooth, (int, float)) or isinstance(self.smooth, bool) or not 0.0 <= self.smooth <= 40.0:
            raise ParameterError(f"mel matching smooth must be a number in [0, 40] (mel bands), found {self.smooth!r}")
        if not 0.0 < self.floor <= 1.0 <= self.cap <= 1000.0:
            raise ParameterError(f"mel matching needs 0 < floor <= 1 <= cap <= 1000, found floor {self.floor} "
                                 f"and cap {self.cap}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "MelMatchConfig":
        return settings_from_dict(cls, d, "mel matching")


class MelMatch:
    """The transform of one feature configuration: :meth:`apply` for a whole segment,
    :meth:`stream` for one pushed chunk by chunk."""

    def __init__(self, config: MelMatchConfig = MelMatchConfig(), mel_config: MelConfig = DEFAULT_MEL) -> None:
        n_fft = mel_config.n_fft
        if mel_config.win_length != n_fft or n_fft < 8 or n_fft & (n_fft - 1):
            raise ParameterError(f"mel matching needs win_length == n_fft, a power of two >= 8, found "
                                 f"{mel_config.win_length} and {n_fft}")
        self.config, self.mel_config = config, mel_config
        self.n_fft, self.hop, self.n_mels = mel_config.n_fft, mel_config.hop_length, mel_config.n_mels
        fb = slaney_filterbank(mel_config)  # (n_mels, n_bins), float64, librosa's without importing librosa
        cover = fb.sum(axis=0)
        spread = fb / np.where(cover > 0, cover, 1.0)  # each bin: weights over its bands, summing to 1
        first = int(np.argmax(cover > 0))
        spread[-1, first:][cover[first:] <= 0] = 1.0  # bins no band covers above fmax: the top band's gain
        # ... and below the first band (DC): the bottom band's, never above 1 (_spread). No
        # band measures them, so a gain above 1 grew a DC offset pass after pass (it took the top
        # band's gain: at temperature 0.5 the default voice's 8 passes made thumps of 0.6 full scale)
        spread[0, :first] = 1.0
        self._below = first
        # both matrices as (band, bin, weight) triples, band-major: each band's bins are a short range
        self._band, self._bin = (a.astype(np.int64) for a in np.nonzero(fb))
        self._w_fb = fb[self._band, self._bin]
        self._s_band, self._s_bin = (a.astype(np.int64) for a in np.nonzero(spread))
        self._w_spread = spread[self._s_band, self._s_bin]
        self.window = _window(mel_config.win_length, mel_config.n_fft).astype(np.float64)  # log_mel's own
        self._plan = None  # the transforms' tables (kernels.stft.RealFFTPlan), at the first frames filtered
        self._local = threading.local()
        self._kernel = _smoothing(self.n_mels, float(config.smooth))
        live = self._kernel > 0  # each band's smoothing weights: a run of bands around it
        self._k_lo = np.argmax(live, axis=1).astype(np.int64) if live.size else np.zeros(0, np.int64)
        self._k_hi = (live.shape[1] - np.argmax(live[:, ::-1], axis=1)).astype(np.int64) if live.size else self._k_lo

    def _filter_into(self, x: np.ndarray, x0: int, n: int, reflect: bool, k0: int, k1: int, mel: np.ndarray,
                     acc: np.ndarray, norm: np.ndarray, at: int) -> None:
        """Frames k0..k1 of a segment of ``n`` samples (``x`` from sample ``x0``), filtered by their
        mel rows (k1 - k0, >= n_mels) and overlap-added into ``acc`` and ``norm`` from ``at``; in
        blocks of :data:`FILTER_BLOCK` frames, the transforms eight frames at a time
        (:mod:`wavern.engine.kernels.stft`), the transcendental functions on a whole block in
        numpy (vectorised)."""
        from wavern.engine.kernels import stft

        if self._plan is None:
            self._plan = stft.RealFFTPlan(self.n_fft)
        s, plan = self._scratch(), self._plan.tables
        hop, width = self.hop, s.width
        mel = np.asarray(mel, np.float64)
        for b0 in range(k0, k1, s.block):
            count = min(s.block, k1 - b0)
            stft.analyse(x, x0, n, b0, count, hop, reflect, self.window, *plan, s.zr, s.zi, s.xr, s.xi, s.mag, width)
            want_t = np.exp(mel[b0 - k0:b0 - k0 + count, :self.n_mels].T)  # gains: bands by frames
            g_t = np.empty((self.n_mels, count))
            _band_gains(s.mag, width, want_t, self._band, self._bin, self._w_fb, float(self.config.floor),
                        float(self.config.cap), g_t)
            if self._kernel.size:
                lg_t = np.log(g_t)
                _smooth(lg_t, self._kernel, self._k_lo, self._k_hi, g_t)
                np.exp(g_t, out=g_t)
            _spread(g_t, self._s_band, self._s_bin, self._w_spread, self._below, width, s.gain)
            stft.synthesise(s.xr, s.xi, s.gain, width, count, *plan, s.zr, s.zi, s.frames, self.window, acc, norm,
                            at + (b0 - k0) * hop, hop)

    def _scratch(self) -> "_Scratch":
        """This thread's buffers (a voice's streams may run in several threads)."""
        s = getattr(self._local, "scratch", None)
        if s is None or s.block != FILTER_BLOCK:
            s = self._local.scratch = _Scratch(self._plan, FILTER_BLOCK)
        return s

    def load(self) -> None:
        """Compile (or load from numba's cache) its loops now, not in a request's first chunk."""
        self.apply(np.zeros(self.n_fft, np.float32), np.zeros((self.n_fft // self.hop, self.n_mels), np.float32))

    @property
    def lead_samples(self) -> int:
        """How many samples more than its output a stream takes in before that output is final:
        ``n_fft - hop`` a pass (the first ``m`` output samples, ``m`` whole hops, need ``m +
        lead_samples`` input; frame t is filtered once the samples up to t·hop + n_fft/2 are in, and
        a sample is final once the frame n_fft/2 after it is)."""
        return self.config.iterations * (self.n_fft - self.hop)

    def n_frames(self, n_samples: int, n_rows: int) -> int:
        """Frames a segment of ``n_samples`` with ``n_rows`` mel rows has: those of its STFT that have a row."""
        return min(1 + n_samples // self.hop, n_rows)

    def apply(self, audio: np.ndarray, mel: np.ndarray) -> np.ndarray:
        """One whole segment: int16 in, int16 out; float in, float32 out. ``mel`` (T, >= n_mels)
        holds the segment's frames from its first (a pitch voice's extra columns are ignored)."""
        s = self.stream(lambda a, b: np.asarray(mel)[a:b], len(audio), n_rows=len(mel))
        if len(audio) <= APPLY_BLOCK:
            return s.push(audio)
        # pushed in blocks, the same output (the stream's contract) with memory bounded by a block, not the
        # segment: one push of a long file held every frame's spectrum of every pass at once
        return np.concatenate([s.push(audio[i:i + APPLY_BLOCK]) for i in range(0, len(audio), APPLY_BLOCK)])

    def stream(self, rows: Rows, n_samples: int, *, n_rows: int | None = None, frame0: int = 0) -> "MelMatchStream":
        """A segment of ``n_samples`` samples whose frame ``t`` has the mel row ``rows(frame0 + t, ...)``
        (``n_rows``: how many rows from ``frame0`` exist; default ``n_samples // hop``)."""
        n_rows = n_samples // self.hop if n_rows is None else int(n_rows)
        return MelMatchStream([_Pass(self, rows, int(n_samples), n_rows, int(frame0))
                               for _ in range(self.config.iterations)])


#: Frames filtered at a time. A block costs about ten Python-level calls; 64 frames ran 1-14 % faster
#: than 32 and as fast as 128 or 256 (8 passes on 20 s, the sizes alternating in one process, three
#: runs), with its bins (real, imaginary, magnitude and gain: 4 x 513 x 64 float64, 1 MB a thread).
FILTER_BLOCK = 64

#: Samples :meth:`MelMatch.apply` pushes at a time (about 3 s at 22050 Hz).
APPLY_BLOCK = 1 << 16


class MelMatchStream:
    """One segment pushed chunk by chunk (:meth:`push`) through ``iterations`` passes in a row;
    once all its samples are in, every output sample has come out. The output is as long as the
    input, delayed by ``n_fft - hop`` samples a pass (:attr:`MelMatch.lead_samples`). Between
    passes the samples stay float."""

    def __init__(self, passes: list["_Pass"]) -> None:
        self.passes = passes
        self._int16: bool | None = None

    @property
    def done(self) -> bool:
        return all(p.done for p in self.passes)

    def push(self, audio: np.ndarray) -> np.ndarray:
        """The next samples of the segment in (int16 or float, not both); the output samples now final
        out (possibly none), in the input's type (float: float32)."""
        a = np.asarray(audio)
        if a.ndim != 1:
            raise ParameterError(f"audio must be mono (n,), found shape {a.shape}")
        is_int = a.dtype == np.int16
        if self._int16 is None:
            self._int16 = is_int
        elif self._int16 != is_int:
            raise ParameterError("a mel-matching segment takes int16 or float chunks, not both")
        y = a.astype(np.float64) / 32768.0 if is_int else a
        for p in self.passes:
            y = p.push(y)
        return self._out(y)

    def cut(self) -> np.ndarray:
        """End the segment at the samples pushed so far (a change of speed re-renders the rest of a
        sentence): as if it had been made that long, with the rows of its whole frames; returns the
        output not yet returned."""
        y = self.passes[0].cut()
        for p in self.passes[1:]:
            y = np.concatenate([p.push(y), p.cut()])
        return self._out(y)

    def _out(self, y: np.ndarray) -> np.ndarray:
        if self._int16 is not False:  # peaks the gains pushed past full scale bend rather than clip
            return np.clip(np.rint(soft_limit(y) * 32768.0), -32768, 32767).astype(np.int16)
        return np.asarray(y, np.float32)


class _Pass:
    """One pass over one segment (float samples in, float32 out). It keeps only the samples the
    frames still to filter need and the overlap-add sums not yet returned: a few windows, however
    long the sentence."""

    def __init__(self, mm: MelMatch, rows: Rows, n_samples: int, n_rows: int, frame0: int = 0) -> None:
        if n_samples < 0 or n_rows < 0:
            raise ParameterError(f"a segment needs n_samples, n_rows >= 0, found {n_samples}, {n_rows}")
        self.mm, self.rows, self.frame0 = mm, rows, frame0
        self.n = n_samples
        self.total_frames = mm.n_frames(n_samples, n_rows) if n_samples else 0
        half = mm.n_fft // 2
        self.reflect = n_samples > half  # log_mel's rule: reflect when it can, else zeros
        self.x, self.x0 = np.zeros(0), 0  # the input samples kept, from sample x0
        self.acc, self.norm, self.a0 = np.zeros(0), np.zeros(0), 0  # overlap-add sums from a0 (index i: sample i - n_fft/2)
        self.n_in = 0  # samples pushed
        self.next_frame = 0  # first frame not yet filtered
        self.n_out = 0  # samples returned

    @property
    def done(self) -> bool:
        return self.n_out == self.n

    def cut(self) -> np.ndarray:
        """End the segment at the samples pushed so far; returns the output not yet returned."""
        n = self.n_in
        self.n = n
        self.total_frames = min(self.total_frames, self.mm.n_frames(n, n // self.mm.hop)) if n else 0
        self.next_frame = min(self.next_frame, self.total_frames)
        self.reflect = n > self.mm.n_fft // 2
        return self.push(np.zeros(0))

    def _n_ready(self) -> int:
        """Frames that can be filtered with the samples in: all once the segment is complete; else
        those whose window ends by the last sample in (k hop + n_fft/2 <= n_in), and frame 0 only once
        the sample its left reflection reads last (n_fft/2) is in too, which every later one has then."""
        half, hop = self.mm.n_fft // 2, self.mm.hop
        if self.n_in == self.n:
            return self.total_frames
        if self.n_in <= half:
            return 0
        return min(self.total_frames, (self.n_in - half) // hop + 1)

    def push(self, a: np.ndarray) -> np.ndarray:
        """The next float samples of the segment in; the output samples now final out (possibly none)."""
        if self.n_in + a.size > self.n:
            raise ParameterError(f"the segment has {self.n} samples; {self.n_in + a.size} pushed")
        self.x = np.concatenate([self.x, np.asarray(a, np.float64)])
        self.n_in += a.size
        k1 = max(self.next_frame, self._n_ready())
        mm, hop, half = self.mm, self.mm.hop, self.mm.n_fft // 2
        if k1 > self.next_frame:
            k0 = self.next_frame
            mel = np.asarray(self.rows(self.frame0 + k0, self.frame0 + k1))
            if mel.shape[0] != k1 - k0 or mel.ndim != 2 or mel.shape[1] < mm.n_mels:
                raise ParameterError(f"mel rows {self.frame0 + k0}..{self.frame0 + k1} of the segment: expected "
                                     f"({k1 - k0}, >= {mm.n_mels}), found {mel.shape}")
            grow = (k1 - 1) * hop + mm.n_fft - self.a0 - self.acc.size
            if grow > 0:
                self.acc = np.concatenate([self.acc, np.zeros(grow)])
                self.norm = np.concatenate([self.norm, np.zeros(grow)])
            mm._filter_into(self.x, self.x0, self.n, self.reflect, k0, k1, mel, self.acc, self.norm, k0 * hop - self.a0)
            self.next_frame = k1
        if self.n_in == self.n:  # every frame is in: the rest is final
            final = self.n
        else:  # frames from next_frame on cover samples from next_frame * hop - n_fft / 2 on
            final = max(0, min(self.n_in, self.next_frame * hop - half))
        lo, hi = self.n_out, max(self.n_out, final)
        a0 = self.a0
        if hi > lo and hi + half - a0 > self.acc.size:  # samples no frame covers (a segment's end past its rows)
            self.acc = np.concatenate([self.acc, np.zeros(hi + half - a0 - self.acc.size)])
            self.norm = np.concatenate([self.norm, np.zeros(hi + half - a0 - self.norm.size)])
        y = self.acc[lo + half - a0:hi + half - a0] / np.maximum(self.norm[lo + half - a0:hi + half - a0], 1e-3)
        self.n_out = hi
        self._forget()
        return y.astype(np.float32)

    def _forget(self) -> None:
        """Drop the samples no frame still to filter reads (a segment's right edge reflects the
        last n_fft/2 + 1) and the sums already returned that no frame still adds to."""
        hop, half, n_fft = self.mm.hop, self.mm.n_fft // 2, self.mm.n_fft
        keep_x = max(0, min(self.next_frame * hop - half, self.n - n_fft))
        if keep_x > self.x0:
            self.x, self.x0 = self.x[keep_x - self.x0:], keep_x
        keep_a = min(self.next_frame * hop, self.n_out + half)
        if keep_a > self.a0:
            drop = min(keep_a - self.a0, self.acc.size)
            self.acc, self.norm, self.a0 = self.acc[drop:], self.norm[drop:], self.a0 + drop


def _smoothing(n_bands: int, width: float) -> np.ndarray:
    """Rows of a Gaussian of ``width`` bands over the band index, each summing to 1 (cut at the
    edges and renormalised; the weights below 1e-20 of the centre's, over 9.6 widths away, are
    dropped: they move no gain), an empty (0, 0) matrix for ``width`` 0 (no smoothing)."""
    if width <= 0.0:
        return np.zeros((0, 0))
    d = np.arange(n_bands)[:, None] - np.arange(n_bands)[None, :]
    k = np.exp(-0.5 * (d / width) ** 2)
    k[k < 1e-20] = 0.0
    return k / k.sum(axis=1, keepdims=True)


def _band_gains_py(mag, width, want_t, band, bins, w_fb, floor, cap, g_t):  # pragma: no cover
    """g_t[b, f] = clip(want_t[b, f] / (frame f's magnitude in band b), floor, cap), for the frames
    f < g_t.shape[1]: the band magnitudes through the filterbank's non-zeros, from ``mag`` (bins by
    frames, rows of ``width``). Bands by frames, so the loops over the frames vectorise; each sum
    runs over a band's bins in the same order whatever the blocking."""
    n_frames = U(g_t.shape[1])
    g_t[:, :] = 0.0
    for j in range(band.size):
        b, k, w = band[j], bins[j], w_fb[j]
        at = U(k * width)
        for f in range(n_frames):
            g_t[b, f] += w * mag[at + f]
    for b in range(g_t.shape[0]):
        for f in range(n_frames):
            v = want_t[b, f] / max(g_t[b, f], 1e-30)
            g_t[b, f] = floor if v < floor else (cap if v > cap else v)


def _smooth_py(lg_t, kernel, k_lo, k_hi, out_t):  # pragma: no cover
    """out_t[b, f] = sum of kernel[b, k] lg_t[k, f] over the bands k_lo[b] <= k < k_hi[b] (where
    the kernel's weights are not negligible), in the order of k; bands by frames (vectorised over f)."""
    for b in range(lg_t.shape[0]):
        for f in range(lg_t.shape[1]):
            out_t[b, f] = 0.0
        for k in range(k_lo[b], k_hi[b]):
            w = kernel[b, k]
            for f in range(lg_t.shape[1]):
                out_t[b, f] += w * lg_t[k, f]


def _spread_py(g_t, s_band, s_bin, w_spread, below, width, gain):  # pragma: no cover
    """``gain`` (bins by frames, rows of ``width``) = the band gains g_t (bands by frames) spread
    over the bins by the (band, bin, weight) triples, the bins below ``below`` never above 1; the
    columns past g_t's frames 0."""
    n_frames = U(g_t.shape[1])
    gain[:] = 0.0
    for j in range(s_band.size):
        b, k, w = s_band[j], s_bin[j], w_spread[j]
        at = U(k * width)
        for f in range(n_frames):
            gain[at + f] += w * g_t[b, f]
    for k in range(below):
        at = U(k * width)
        for f in range(n_frames):
            if gain[at + f] > 1.0:
                gain[at + f] = 1.0


_band_gains = LazyJit(_band_gains_py)
_smooth = LazyJit(_smooth_py)
_spread = LazyJit(_spread_py)


class _Scratch:
    """One thread's buffers for :meth:`MelMatch._filter_into`: a lane group's complex sequence
    (``zr``, ``zi``) and frames (``frames``), and the bins of a block of ``block`` frames, bins by frames in rows of
    ``width`` (whole lane groups): real and imaginary parts, magnitudes, gains."""

    def __init__(self, plan, block: int) -> None:
        from wavern.engine.kernels.stft import block_width

        self.block = max(1, int(block))
        self.width = block_width(self.block)
        self.zr, self.zi, self.frames = plan.scratch()
        n = (plan.m + 1) * self.width
        self.xr, self.xi, self.mag, self.gain = (np.zeros(n) for _ in range(4))
