"""Evaluation: objective audio metrics, a phone-classifier intelligibility score, copy synthesis.

Metrics (all on float mono audio at 22 050 Hz, or on :func:`wavern.dsp.log_mel` frames):

- :func:`stoi_score`: STOI (Taal et al. 2011) via ``pystoi`` (which resamples to 10 kHz itself).
- :func:`pesq_wb`: wideband PESQ (ITU-T P.862.2) via ``pesq``, after a polyphase resampling
  22 050 → 16 000 Hz (``scipy.signal.resample_poly(x, 320, 441)``).
- :func:`mcd_dtw` / :func:`mcd_dtw_mel`: mel-cepstral distortion after DTW alignment. Defined
  exactly as follows. ``x`` (T, N = 80) is the project's natural-log mel magnitude. Its
  cepstrum is the cosine series ``c_m = (1/N) Σ_k x_k cos(π m (k + ½) / N)``, so that
  ``x_k ≈ c_0 + 2 Σ_{m≥1} c_m cos(π m (k + ½) / N)`` (the real-cepstrum convention: a DCT-II
  scaled by 1/N, not the orthonormal DCT of MFCCs). c_0 (the level) is dropped; c_1..c_D are
  kept (D = 24 by default). Frames are aligned by DTW (steps (1,0), (0,1), (1,1), equal
  weight) with the Euclidean distance of the cepstra as local cost, and
  ``MCD = mean over the path of (10 / ln 10) · sqrt(2 Σ_{m=1}^{D} (c_m − ĉ_m)²)`` dB.
  By Parseval, ``sqrt(2 Σ Δc_m²)`` is the RMS (over mel bands) difference of the two log-mel
  magnitudes after liftering to D coefficients, so the MCD is that RMS difference in units of
  ``10 log10`` of a magnitude ratio. It is invariant to a gain (which only moves c_0). Numbers
  are comparable between runs of this module, not with SPTK mel-cepstrum MCDs in papers.
- :func:`log_spectral_distance`: per-frame RMS over STFT bins of the dB difference of the
  power spectra (magnitudes floored at 1e-3, about 16-bit quantisation noise in this STFT),
  mean over frames, no alignment (for sample-aligned copy synthesis).
- :func:`pitch_errors`: voicing decision error (VDE, the share of frames whose voiced/unvoiced
  decision differs) and gross pitch error (GPE, the share of frames voiced in both whose f0
  differs by more than 20 %), both from :func:`wavern.dsp.pitch_track` of the two signals, no
  alignment (copy synthesis). They measure what a noise-excited vocoder misses: the voicing.

Intelligibility: a small frame-level phone classifier (an MLP on ±5 stacked log-mel frames)
trained on the espeak-ng corpus with espeak's phoneme timings as frame labels
(:func:`train_phone_classifier`); :func:`phone_accuracy` is its frame accuracy on any audio
against the timings of the text it should say. The shipped classifier is
``assets/eval/phone_classifier.{safetensors,json}``.

Base phone set (:func:`base_phone`): a corpus token is reduced to its base phone by removing
stress marks (ˈ ˌ), length and half-length marks (ː ˑ, and the ASCII ``:`` of ``"a:"``) and
combining diacritics (Unicode category Mn, e.g. the syllabic mark of ``n̩``, the dental mark
of ``t̪``), then mapping the Scottish voice's ``r`` to ``ɹ`` (one /r/, two notations); a token
that then holds no letter, or is a special ``<...>`` token, is silence ``"sil"`` (pauses,
punctuation, word boundaries, bos/eos).
Base phones with fewer than ``min_class_frames`` training frames are left out of the class
list; frames labelled with a phone outside the class list are ignored when scoring.

Copy synthesis: :func:`evaluate_copy_synthesis` vocodes the true mel of held-out corpus
utterances with any ``vocode_fn(mel) -> audio`` and scores the result against the true audio;
:func:`evaluate_griffin_lim` (32 iterations) is the yardstick, :func:`evaluate_coarse_only`
(the true signal with its fine byte replaced by 128) and :func:`evaluate_true_audio` bound
what a vocoder can reach.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import time
import unicodedata
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numba
import numpy as np

from wavern.dsp import DEFAULT_MEL, MelConfig, int16_to_float, join_coarse_fine, log_mel, split_coarse_fine
from wavern.errors import CorpusError, ParameterError

__all__ = [
    "SAMPLE_RATE",
    "MCD_CONSTANT",
    "stoi_score",
    "pesq_wb",
    "mel_cepstra",
    "dtw_align",
    "mcd_dtw_mel",
    "mcd_dtw",
    "pitch_errors",
    "log_spectral_distance",
    "SILENCE",
    "base_phone",
    "frame_labels",
    "PhoneClassifierConfig",
    "PhoneClassifier",
    "fit_phone_classifier",
    "train_phone_classifier",
    "save_phone_classifier",
    "load_phone_classifier",
    "default_classifier_path",
    "phone_accuracy",
    "phone_accuracy_mel",
    "EvalUtterance",
    "held_out_utterances",
    "evaluate_utterances",
    "evaluate_copy_synthesis",
    "evaluate_griffin_lim",
    "evaluate_coarse_only",
    "evaluate_true_audio",
    "coarse_only",
]

log = logging.getLogger(__name__)

SAMPLE_RATE = 22050
PESQ_RATE = 16000
MCD_CONSTANT = 10.0 * math.sqrt(2.0) / math.log(10.0)  # ≈ 6.1418 dB per unit of cepstral distance
DEFAULT_N_CEPS = 24  # c1..c24, the usual mel-cepstral order in TTS evaluation
LSD_FLOOR = 1e-3  # STFT magnitude floor for LSD (Hann 1024: 16-bit quantisation noise is ~6e-4)


# =========================================================================== audio metrics


def _as_audio(x: np.ndarray, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1:
        raise ParameterError(f"{name} must be mono audio of shape (n_samples,), found shape {a.shape}")
    if not np.issubdtype(a.dtype, np.floating):
        raise ParameterError(f"{name} must be float audio in [-1, 1], found dtype {a.dtype}")
    if a.size == 0:
        raise ParameterError(f"{name} is empty")
    return a.astype(np.float64, copy=False)


def _match(reference: np.ndarray, degraded: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both signals as float64, the degraded one cut or zero-padded to the reference's length."""
    ref = _as_audio(reference, "reference")
    deg = _as_audio(degraded, "degraded")
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

    ref, deg = _match(reference, degraded)
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

    ref, deg = _match(reference, degraded)
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
    ref = _as_audio(reference, "reference").astype(np.float32)
    deg = _as_audio(degraded, "degraded").astype(np.float32)
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
    ref, deg = _match(reference, degraded)
    d = _power_db(ref, cfg, floor) - _power_db(deg, cfg, floor)
    return float(np.sqrt((d * d).mean(axis=1)).mean())


def pitch_errors(reference: np.ndarray, degraded: np.ndarray, *, cfg: MelConfig = DEFAULT_MEL) -> tuple[float, float]:
    """(VDE, GPE) of sample-aligned signals: see the module docstring. GPE is NaN when no frame
    is voiced in both."""
    from wavern.dsp import pitch_track

    ref, deg = _match(reference, degraded)
    r, d = pitch_track(ref, cfg)[:, 0], pitch_track(deg, cfg)[:, 0]
    vde = float(np.mean((r > 0) != (d > 0)))
    both = (r > 0) & (d > 0)
    gpe = float(np.mean(np.abs(d[both] / r[both] - 1.0) > 0.2)) if both.any() else float("nan")
    return vde, gpe


# =========================================================================== phone labels

SILENCE = "sil"
_STRIP = {"ˈ", "ˌ", "ː", "ˑ", ":"}  # stress (primary, secondary), length (IPA, and ASCII in "a:"), half-length
# Notation that differs by accent for the same sound: en-gb-scotland writes every /r/ as "r", the
# other voices "ɹ" (the classifier confused the two in 63 % of held-out "r" frames).
_MERGE = {"r": "ɹ"}


def base_phone(token: str) -> str:
    """Map a corpus phoneme token to its base phone (module docstring): ``"ˈaɪ" -> "aɪ"``, ``"," -> "sil"``."""
    if token.startswith("<") and token.endswith(">"):
        return SILENCE
    kept = "".join(ch for ch in unicodedata.normalize("NFD", token)
                   if ch not in _STRIP and unicodedata.category(ch) != "Mn")
    if not any(unicodedata.category(ch).startswith("L") for ch in kept):
        return SILENCE
    kept = unicodedata.normalize("NFC", kept)
    return _MERGE.get(kept, kept)


def frame_labels(phonemes: Sequence[str], durations: Sequence[int], n_frames: int, *,
                 hop_length: int = DEFAULT_MEL.hop_length) -> list[str]:
    """Base-phone label of each mel frame: the token whose samples contain the frame's centre.

    Frame ``t`` is centred on sample ``t * hop_length`` (:func:`wavern.dsp.log_mel`); a centre
    at or past the end takes the last token. Zero-duration tokens label no frame.

    Args:
        phonemes: (n_tokens,) token strings.
        durations: (n_tokens,) samples per token, >= 0.
        n_frames: number of frames to label.
    """
    d = np.asarray(durations, np.int64)
    if len(phonemes) != d.size or d.size == 0:
        raise ParameterError(f"phonemes and durations must be non-empty and of equal length, "
                             f"found {len(phonemes)} and {d.size}")
    if np.any(d < 0):
        raise ParameterError(f"durations must be >= 0, found minimum {int(d.min())}")
    ends = np.cumsum(d)
    idx = np.searchsorted(ends, hop_length * np.arange(n_frames), side="right")
    idx = np.minimum(idx, d.size - 1)
    bases = [base_phone(p) for p in phonemes]
    return [bases[i] for i in idx]


# =========================================================================== phone classifier


@dataclasses.dataclass(frozen=True)
class PhoneClassifierConfig:
    """Shape of the frame-level phone classifier; stored in its json next to the weights."""

    classes: tuple[str, ...]  # base phones; index = class id
    context: int = 5  # ±5 frames: 11 × 11.6 ms ≈ 128 ms, a phone with its neighbours' edges
    hidden: int = 512  # held-out frame accuracy 0.942 at 256 (8 epochs), 0.957 at 512 (12); 1.5 MB in fp16
    n_layers: int = 2
    n_mels: int = DEFAULT_MEL.n_mels
    pad_value: float = math.log(DEFAULT_MEL.log_floor)  # frames beyond the ends read as silence
    dropout: float = 0.1  # after each hidden layer, training only: 72 espeak voices overfit quickly

    def __post_init__(self) -> None:
        if not 0.0 <= self.dropout < 1.0:
            raise ParameterError(f"dropout must be in [0, 1), found {self.dropout}")
        if len(self.classes) < 2 or len(set(self.classes)) != len(self.classes):
            raise ParameterError(f"classes must be >= 2 distinct names, found {list(self.classes)}")
        for name, value, lo in (("context", self.context, 0), ("hidden", self.hidden, 1),
                                ("n_layers", self.n_layers, 1), ("n_mels", self.n_mels, 1)):
            if value < lo:
                raise ParameterError(f"{name} must be >= {lo}, found {value}")

    @property
    def window(self) -> int:
        return 2 * self.context + 1

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["classes"] = list(self.classes)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "PhoneClassifierConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        if set(d) - names:
            raise ParameterError(f"unknown classifier fields {sorted(set(d) - names)}; expected {sorted(names)}")
        return cls(**{**d, "classes": tuple(d["classes"])})


def _torch():
    import torch  # lazily: the audio metrics above need no torch

    return torch


def _build_net(config: PhoneClassifierConfig):
    nn = _torch().nn
    layers, width = [], config.window * config.n_mels
    for _ in range(config.n_layers):
        layers += [nn.Linear(width, config.hidden), nn.ReLU(), nn.Dropout(config.dropout)]
        width = config.hidden
    layers.append(nn.Linear(width, len(config.classes)))
    return nn.Sequential(*layers)


class PhoneClassifier:
    """An MLP over ``2 * context + 1`` stacked, standardised log-mel frames → base-phone logits.

    A thin holder (config, per-band mean/std, a ``torch.nn.Sequential``); :meth:`predict` is
    the one inference path.
    """

    def __init__(self, config: PhoneClassifierConfig, mean: np.ndarray | None = None,
                 std: np.ndarray | None = None) -> None:
        self.config = config
        self.mean = np.zeros(config.n_mels, np.float32) if mean is None else np.asarray(mean, np.float32)
        self.std = np.ones(config.n_mels, np.float32) if std is None else np.asarray(std, np.float32)
        if self.mean.shape != (config.n_mels,) or self.std.shape != (config.n_mels,):
            raise ParameterError(f"mean/std must have shape ({config.n_mels},), found {self.mean.shape}, "
                                 f"{self.std.shape}")
        self.net = _build_net(config)
        self.class_index = {c: i for i, c in enumerate(config.classes)}

    def label_ids(self, labels: Sequence[str]) -> np.ndarray:
        """(n,) int64 class ids of base-phone labels; -1 for a phone outside the class list."""
        return np.array([self.class_index.get(x, -1) for x in labels], np.int64)

    def padded(self, mel: np.ndarray) -> np.ndarray:
        """(T + 2 context, n_mels) float32: ``mel`` with ``context`` silence frames at both ends."""
        x = np.asarray(mel, np.float32)
        if x.ndim != 2 or x.shape[1] != self.config.n_mels:
            raise ParameterError(f"mel must have shape (frames, {self.config.n_mels}), found {x.shape}")
        c = self.config.context
        return np.pad(x, ((c, c), (0, 0)), constant_values=self.config.pad_value)

    def logits(self, windows):
        """(B, window, n_mels) raw log-mel windows (tensor) → (B, n_classes) logits."""
        torch = _torch()
        mean = torch.from_numpy(self.mean)
        std = torch.from_numpy(self.std)
        return self.net(((windows - mean) / std).flatten(1))

    def predict(self, mel: np.ndarray) -> np.ndarray:
        """(T, n_mels) log-mel → (T,) int64 most likely class per frame."""
        torch = _torch()
        xp = torch.from_numpy(self.padded(mel))
        windows = xp.unfold(0, self.config.window, 1).transpose(1, 2)  # (T, window, n_mels)
        was_training = self.net.training
        self.net.eval()
        try:
            with torch.no_grad():
                return self.logits(windows).argmax(1).numpy().astype(np.int64)
        finally:
            self.net.train(was_training)


def fit_phone_classifier(mels: Sequence[np.ndarray], labels: Sequence[Sequence[str]], *,
                         context: int = 5, hidden: int = 512, n_layers: int = 2, dropout: float = 0.1,
                         epochs: int = 12,
                         batch_size: int = 512, lr: float = 2e-3, weight_decay: float = 1e-5,
                         gain_range_db: float = 6.0, min_class_frames: int = 100, seed: int = 0,
                         classes: Sequence[str] | None = None) -> PhoneClassifier:
    """Train a :class:`PhoneClassifier` on log-mel frames with one base-phone label per frame.

    Adam with a cosine learning-rate decay to 0; each training window gets a random gain,
    uniform in ±``gain_range_db`` (applied in the log domain and re-floored, which is exact
    for a gain), so the score does not depend on the loudness of a vocoder's output.

    Args:
        mels: per utterance (T_i, n_mels) natural-log mel frames.
        labels: per utterance T_i base-phone labels (:func:`frame_labels`).
        classes: the class list; by default every label with >= ``min_class_frames`` frames,
            sorted by frequency (ties by name). Frames of other labels are not trained on.
        seed: fixes initialisation, batch order and augmentation (one thread: bit-identical).

    Returns:
        the trained classifier (in eval mode).
    """
    torch = _torch()
    if len(mels) != len(labels) or not mels:
        raise ParameterError(f"need equal, non-zero numbers of mels and label lists, found {len(mels)} and {len(labels)}")
    for i, (m, lab) in enumerate(zip(mels, labels)):
        if np.shape(m)[0] != len(lab):
            raise ParameterError(f"utterance {i}: {np.shape(m)[0]} frames but {len(lab)} labels")
    if classes is None:
        counts: dict[str, int] = {}
        for lab in labels:
            for x in lab:
                counts[x] = counts.get(x, 0) + 1
        classes = [c for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if n >= min_class_frames]
        dropped = {c: n for c, n in counts.items() if n < min_class_frames}
        if dropped:
            log.info("phone classes left out (< %d frames): %s", min_class_frames, dropped)
    n_mels = int(np.shape(mels[0])[1])
    config = PhoneClassifierConfig(classes=tuple(classes), context=context, hidden=hidden, n_layers=n_layers,
                                   n_mels=n_mels, dropout=dropout)
    all_frames = np.concatenate([np.asarray(m, np.float32) for m in mels])
    mean, std = all_frames.mean(0), all_frames.std(0) + 1e-3
    del all_frames
    # Initialisation and dropout draw from torch's global RNG: seed it, and leave it as it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = PhoneClassifier(config, mean, std)
        frames, centres, targets = _training_frames(model, mels, labels)
        _train(model, frames, centres, targets, epochs=epochs, batch_size=batch_size, lr=lr,
               weight_decay=weight_decay, gain_range_db=gain_range_db, seed=seed)
    model.net.eval()
    return model


def _training_frames(model: PhoneClassifier, mels, labels):
    """One long padded frame array (a window is ``frames[centre - context : centre + context + 1]``),
    the centres of the labelled frames and their class ids, as tensors."""
    torch = _torch()
    context = model.config.context
    padded = [model.padded(m) for m in mels]
    offsets = np.cumsum([0] + [p.shape[0] for p in padded[:-1]])
    centres, targets = [], []
    for off, lab in zip(offsets, labels):
        ids = model.label_ids(lab)
        keep = ids >= 0
        centres.append(off + context + np.nonzero(keep)[0])
        targets.append(ids[keep])
    centres_t = torch.from_numpy(np.concatenate(centres))
    if centres_t.numel() == 0:
        raise ParameterError("no frame carries a label from the class list")
    return torch.from_numpy(np.concatenate(padded)), centres_t, torch.from_numpy(np.concatenate(targets))


def _train(model: PhoneClassifier, frames, centres, targets, *, epochs: int, batch_size: int, lr: float,
           weight_decay: float, gain_range_db: float, seed: int) -> None:
    """Adam + cosine decay over shuffled frames; batch order and gains from a generator seeded by ``seed``."""
    torch = _torch()
    config = model.config
    window = torch.arange(-config.context, config.context + 1)
    n = centres.numel()
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.net.parameters(), lr=lr, weight_decay=weight_decay)
    steps_per_epoch = math.ceil(n / batch_size)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, epochs * steps_per_epoch))
    gain = gain_range_db / 20.0 * math.log(10.0)  # dB of magnitude → natural-log units
    model.net.train()
    for epoch in range(epochs):
        perm = torch.randperm(n, generator=gen)
        total, correct = 0.0, 0
        for s in range(steps_per_epoch):
            b = perm[s * batch_size:(s + 1) * batch_size]
            x = frames[centres[b][:, None] + window]  # (B, window, n_mels)
            if gain > 0:
                g = (torch.rand(len(b), 1, 1, generator=gen) * 2 - 1) * gain
                x = torch.clamp(x + g, min=config.pad_value)
            y = targets[b]
            logits = model.logits(x)
            loss = torch.nn.functional.cross_entropy(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(b)
            correct += int((logits.argmax(1) == y).sum())
        log.info("phone classifier epoch %d/%d: loss %.4f, train frame accuracy %.4f",
                 epoch + 1, epochs, total / n, correct / n)


# --------------------------------------------------------------------------- classifier files

_FORMAT = "wavern-phone-classifier"
_FORMAT_VERSION = 1


def default_classifier_path() -> Path:
    """``assets/eval/phone_classifier.json`` inside the installed ``wavern.assets`` package."""
    import wavern.assets

    return Path(wavern.assets.__file__).resolve().parent / "eval" / "phone_classifier.json"


def _paths(path: str | Path) -> tuple[Path, Path]:
    p = Path(path)
    stem = p.with_suffix("") if p.suffix in (".json", ".safetensors") else p
    return stem.with_suffix(".json"), stem.with_suffix(".safetensors")


def save_phone_classifier(model: PhoneClassifier, path: str | Path, *, provenance: dict | None = None,
                          dtype: str = "float16") -> tuple[Path, Path]:
    """Write ``{stem}.safetensors`` (weights in ``dtype``, mean/std float32) and ``{stem}.json``.

    Args:
        path: ``stem``, ``stem.json`` or ``stem.safetensors``.
        provenance: free-form facts stored in the json (corpus, seed, accuracy, ...).

    Returns:
        (json path, safetensors path).
    """
    from safetensors.numpy import save_file

    if dtype not in ("float16", "float32"):
        raise ParameterError(f"dtype must be 'float16' or 'float32', found {dtype!r}")
    json_path, st_path = _paths(path)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {f"net.{k}": v.detach().cpu().numpy().astype(dtype) for k, v in model.net.state_dict().items()}
    tensors["mean"] = model.mean.astype(np.float32)
    tensors["std"] = model.std.astype(np.float32)
    save_file(tensors, str(st_path))
    meta = {"format": _FORMAT, "format_version": _FORMAT_VERSION, "config": model.config.to_dict(),
            "mel": DEFAULT_MEL.to_dict(), "weights": st_path.name, "provenance": provenance or {}}
    json_path.write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return json_path, st_path


def load_phone_classifier(path: str | Path | None = None) -> PhoneClassifier:
    """Load a classifier written by :func:`save_phone_classifier` (default: the shipped one).

    Refuses (``ParameterError``) a file of another format or version, a mel configuration
    other than the runtime's, or weights that do not match the stored config.
    """
    json_path, st_path = _paths(path if path is not None else default_classifier_path())
    return _load_cached(str(json_path), str(st_path))


@functools.lru_cache(maxsize=4)
def _load_cached(json_path: str, st_path: str) -> PhoneClassifier:
    from safetensors.numpy import load_file

    torch = _torch()
    if not Path(json_path).is_file() or not Path(st_path).is_file():
        raise ParameterError(f"phone classifier not found: need {json_path} and {st_path}; "
                             "train one with wavern.training.evaluate.train_phone_classifier")
    meta = json.loads(Path(json_path).read_text(encoding="utf-8"))
    if meta.get("format") != _FORMAT or meta.get("format_version") != _FORMAT_VERSION:
        raise ParameterError(f"{json_path}: expected format {_FORMAT!r} version {_FORMAT_VERSION}, "
                             f"found {meta.get('format')!r} version {meta.get('format_version')!r}")
    if MelConfig.from_dict(meta["mel"]) != DEFAULT_MEL:
        raise ParameterError(f"{json_path}: trained on mel settings {meta['mel']}, runtime uses {DEFAULT_MEL.to_dict()}")
    config = PhoneClassifierConfig.from_dict(meta["config"])
    tensors = load_file(st_path)
    model = PhoneClassifier(config, tensors.pop("mean"), tensors.pop("std"))
    state = {k[len("net."):]: torch.from_numpy(v.astype(np.float32)) for k, v in tensors.items()}
    try:
        model.net.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise ParameterError(f"{st_path}: weights do not match the config in {json_path}: {e}") from None
    model.net.eval()
    return model


# --------------------------------------------------------------------------- scoring


def _phone_counts(mel: np.ndarray, phonemes: Sequence[str], durations: Sequence[int],
                  classifier: PhoneClassifier, exclude_silence: bool) -> tuple[int, int]:
    """(correct, scored) frames of ``mel`` against the timings; frames past the timed audio are not scored."""
    n_timed = 1 + int(np.sum(durations)) // DEFAULT_MEL.hop_length
    n = min(np.shape(mel)[0], n_timed)
    target = classifier.label_ids(frame_labels(phonemes, durations, n))
    keep = target >= 0
    if exclude_silence and SILENCE in classifier.class_index:
        keep &= target != classifier.class_index[SILENCE]
    pred = classifier.predict(np.asarray(mel)[:n])
    return int((pred[keep] == target[keep]).sum()), int(keep.sum())


def phone_accuracy_mel(mel: np.ndarray, phonemes: Sequence[str], durations: Sequence[int], *,
                       classifier: PhoneClassifier | None = None, exclude_silence: bool = False) -> float:
    """Frame accuracy of the phone classifier on log-mel frames (T, 80) against the token timings.

    Args:
        mel: (T, n_mels) :func:`wavern.dsp.log_mel` frames.
        phonemes, durations: the tokens the audio should say and their lengths in samples.
        classifier: default :func:`load_phone_classifier` ().
        exclude_silence: score only frames labelled with a phone (not ``"sil"``).

    Returns:
        fraction of scored frames whose predicted class is the label (NaN if none is scored).
    """
    clf = classifier or load_phone_classifier()
    correct, total = _phone_counts(mel, phonemes, durations, clf, exclude_silence)
    return correct / total if total else float("nan")


def phone_accuracy(audio: np.ndarray, phonemes: Sequence[str], durations: Sequence[int], *,
                   classifier: PhoneClassifier | None = None, exclude_silence: bool = False) -> float:
    """Frame accuracy of the phone classifier on float audio at 22 050 Hz (see :func:`phone_accuracy_mel`)."""
    x = _as_audio(audio, "audio").astype(np.float32)
    return phone_accuracy_mel(log_mel(x), phonemes, durations, classifier=classifier,
                              exclude_silence=exclude_silence)


# =========================================================================== corpus and copy synthesis


@dataclasses.dataclass(frozen=True)
class EvalUtterance:
    """One corpus utterance as the evaluation uses it."""

    id: str
    audio: np.ndarray  # (n_samples,) float32 in [-1, 1]
    mel: np.ndarray  # (1 + n_samples // 256, 80) float32, the corpus's stored log-mel
    phonemes: tuple[str, ...]  # (n_tokens,)
    durations: np.ndarray  # (n_tokens,) int64 samples, sum == n_samples

    def features(self, pitch: bool = False) -> np.ndarray:
        """What copy synthesis gives a vocoder: the log-mel, then with ``pitch`` the pitch features
        (:func:`wavern.dsp.pitch_features` of :func:`wavern.dsp.pitch_track` of the true audio)."""
        if not pitch:
            return self.mel
        from wavern.dsp import audio_pitch_features

        feats = audio_pitch_features(self.audio)[:self.mel.shape[0]]
        return np.ascontiguousarray(np.concatenate([self.mel, feats], axis=1), np.float32)


def _load(corpus_dir: str | Path):
    """The corpus (validated by :func:`wavern.training.corpus.load_corpus`) and its espeak-timed records."""
    from wavern.training.corpus import load_corpus

    corpus = load_corpus(corpus_dir)
    untimed = [r.id for r in corpus if r.phonemes is None or r.durations is None]
    if untimed:
        raise CorpusError(f"{corpus_dir}: {len(untimed)} utterances have no phoneme timings (e.g. {untimed[0]!r}); "
                          "the phone classifier needs an espeak corpus")
    return corpus


def _utterance(record) -> EvalUtterance:
    """A :class:`wavern.training.corpus.CorpusRecord` read into memory."""
    return EvalUtterance(id=record.id, audio=int16_to_float(record.audio()), mel=record.mel(),
                         phonemes=tuple(record.phonemes), durations=np.asarray(record.durations, np.int64))


def held_out_utterances(corpus_dir: str | Path, n_utts: int = 20, *, seed: int = 0) -> list[EvalUtterance]:
    """``n_utts`` utterances of the corpus's held-out split, drawn without replacement under ``seed``.

    The split is the corpus's own rule (:func:`wavern.training.corpus.is_held_out`); the draw
    is from the held-out records sorted by id, and the result is sorted by id.
    """
    held = sorted(_load(corpus_dir).held_out, key=lambda r: r.id)
    if not 1 <= n_utts <= len(held):
        raise ParameterError(f"n_utts must be in [1, {len(held)}] (held-out utterances of {corpus_dir}), found {n_utts}")
    pick = np.sort(np.random.default_rng(seed).choice(len(held), size=n_utts, replace=False))
    return [_utterance(held[i]) for i in pick]


def train_phone_classifier(corpus_dir: str | Path, out: str | Path | None = None, *, max_utts: int | None = None,
                           epochs: int = 12, seed: int = 0, threads: int | None = 1,
                           dtype: str = "float16", **fit_options) -> tuple[PhoneClassifier, dict]:
    """Train the phone classifier on a corpus's training split, score its held-out split, save it.

    Args:
        corpus_dir: an espeak corpus (``metadata.jsonl``, ``mels/``, ``wavs/``).
        out: where to save (``stem``/``.json``/``.safetensors``); default the shipped asset path.
        max_utts: use at most this many training utterances (the first by id).
        epochs, seed, **fit_options: passed to :func:`fit_phone_classifier`.
        threads: torch threads while training (restored afterwards); None leaves it alone.

    Returns:
        (classifier, provenance) where provenance holds the corpus, counts, seconds and the
        held-out frame accuracy (also stored in the json).
    """
    torch = _torch()
    t0 = time.perf_counter()
    corpus = _load(corpus_dir)
    train = sorted(corpus.train, key=lambda r: r.id)[: max_utts or None]
    held = sorted(corpus.held_out, key=lambda r: r.id)
    if not train or not held:
        raise CorpusError(f"{corpus_dir}: need training and held-out utterances, found {len(train)} and {len(held)}")
    mels, labels = [], []
    for r in train:
        mel = r.mel()
        mels.append(mel)
        labels.append(frame_labels(r.phonemes, r.durations, mel.shape[0]))
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        model = fit_phone_classifier(mels, labels, epochs=epochs, seed=seed, **fit_options)
    finally:
        torch.set_num_threads(old_threads)
    correct = total = 0
    for r in held:
        c, n = _phone_counts(r.mel(), r.phonemes, r.durations, model, exclude_silence=False)
        correct, total = correct + c, total + n
    provenance = {
        "corpus": Path(corpus_dir).name, "corpus_info": {k: corpus.info.get(k) for k in ("seed", "utterances",
                                                                                      "espeak_version")}, "train_utterances": len(train), "train_frames": int(sum(len(x) for x in labels)),
        "held_out_utterances": len(held), "held_out_frames": total,
        "held_out_frame_accuracy": round(correct / max(total, 1), 4), "epochs": epochs, "seed": seed,
        "fit_options": fit_options, "train_seconds": round(time.perf_counter() - t0, 1),
    }
    log.info("phone classifier: held-out frame accuracy %.4f on %d frames", correct / max(total, 1), total)
    save_phone_classifier(model, out if out is not None else default_classifier_path(),
                          provenance=provenance, dtype=dtype)
    _load_cached.cache_clear()
    return model, provenance


def coarse_only(audio: np.ndarray) -> np.ndarray:
    """The signal with only its coarse byte kept: fine byte set to 128 (the middle of its bin).

    Float in, float out (through int16, as the vocoder's samples are).
    """
    from wavern.dsp import float_to_int16

    coarse, _ = split_coarse_fine(float_to_int16(_as_audio(audio, "audio")))
    return int16_to_float(join_coarse_fine(coarse, np.full_like(coarse, 128)))


_METRICS = ("stoi", "pesq_wb", "mcd_db", "lsd_db", "phone_acc", "vde", "gpe")


def evaluate_utterances(render: Callable[[EvalUtterance], np.ndarray], utterances: Sequence[EvalUtterance], *,
                        classifier: PhoneClassifier | None = None,
                        metrics: Iterable[str] = _METRICS) -> dict:
    """Render every utterance and score it against its true audio.

    Args:
        render: utterance → (n,) float audio at 22 050 Hz, sample-aligned with the true audio
            (cut or zero-padded to its length).
        metrics: any of ``stoi``, ``pesq_wb``, ``mcd_db``, ``lsd_db``, ``phone_acc``, ``vde``, ``gpe``.

    Returns:
        dict with ``n_utts``, ``ids``, ``audio_seconds`` (true audio), ``render_seconds``
        (wall time inside ``render``), the mean of each metric over utterances, and for
        ``phone_acc`` the pooled frame accuracy (all frames; ``phone_acc_no_sil``: phone
        frames only).
    """
    wanted = list(metrics)
    unknown = set(wanted) - set(_METRICS)
    if unknown:
        raise ParameterError(f"unknown metrics {sorted(unknown)}; choose from {list(_METRICS)}")
    clf = (classifier or load_phone_classifier()) if "phone_acc" in wanted else None
    per: dict[str, list[float]] = {m: [] for m in wanted if m != "phone_acc"}
    counts = np.zeros(4, np.int64)  # correct, scored, correct (no sil), scored (no sil)
    render_s = 0.0
    for u in utterances:
        t = time.perf_counter()
        y = np.asarray(render(u))
        render_s += time.perf_counter() - t
        _, y = _match(u.audio, _as_audio(y, f"render({u.id})"))
        y32 = y.astype(np.float32)
        if "stoi" in per:
            per["stoi"].append(stoi_score(u.audio, y))
        if "pesq_wb" in per:
            per["pesq_wb"].append(pesq_wb(u.audio, y))
        if "lsd_db" in per:
            per["lsd_db"].append(log_spectral_distance(u.audio, y))
        if "vde" in per or "gpe" in per:
            vde, gpe = pitch_errors(u.audio, y)
            for name, value in (("vde", vde), ("gpe", gpe)):
                if name in per:
                    per[name].append(value)
        if "mcd_db" in per or clf is not None:
            mel = log_mel(y32)
            if "mcd_db" in per:
                per["mcd_db"].append(mcd_dtw_mel(log_mel(u.audio), mel))
            if clf is not None:
                counts[:2] += _phone_counts(mel, u.phonemes, u.durations, clf, exclude_silence=False)
                counts[2:] += _phone_counts(mel, u.phonemes, u.durations, clf, exclude_silence=True)
    result: dict = {"n_utts": len(utterances), "ids": [u.id for u in utterances],
                    "audio_seconds": float(sum(u.audio.size for u in utterances) / SAMPLE_RATE),
                    "render_seconds": render_s}
    for m, values in per.items():
        result[m] = float(np.nanmean(values)) if values else float("nan")
    if clf is not None:
        result["phone_acc"] = float(counts[0] / counts[1]) if counts[1] else float("nan")
        result["phone_acc_no_sil"] = float(counts[2] / counts[3]) if counts[3] else float("nan")
    return result


def evaluate_copy_synthesis(vocode_fn: Callable[[np.ndarray], np.ndarray], corpus_dir: str | Path,
                            n_utts: int = 20, seed: int = 0, *, classifier: PhoneClassifier | None = None,
                            metrics: Iterable[str] = _METRICS, pitch: bool = False) -> dict:
    """Copy synthesis on held-out utterances: ``vocode_fn(true log-mel (T, 80)) -> float audio``, scored.

    ``pitch``: the vocoder reads pitch features too; it gets :meth:`EvalUtterance.features`
    (T, 82), the true audio's. See :func:`evaluate_utterances` for the returned dict.
    """
    utts = held_out_utterances(corpus_dir, n_utts, seed=seed)
    return evaluate_utterances(lambda u: vocode_fn(u.features(pitch)), utts, classifier=classifier, metrics=metrics)


def evaluate_griffin_lim(corpus_dir: str | Path, n_utts: int = 20, seed: int = 0, *, n_iter: int = 32,
                         classifier: PhoneClassifier | None = None) -> dict:
    """The yardstick: :func:`wavern.dsp.griffin_lim` (``n_iter`` iterations) from the true mel."""
    from wavern.dsp import griffin_lim

    return evaluate_copy_synthesis(lambda mel: griffin_lim(mel, n_iter=n_iter, seed=seed), corpus_dir, n_utts,
                                   seed, classifier=classifier)


def evaluate_coarse_only(corpus_dir: str | Path, n_utts: int = 20, seed: int = 0, *,
                         classifier: PhoneClassifier | None = None) -> dict:
    """What a perfect coarse softmax alone gives: the true signal with the fine byte set to 128."""
    utts = held_out_utterances(corpus_dir, n_utts, seed=seed)
    return evaluate_utterances(lambda u: coarse_only(u.audio), utts, classifier=classifier)


def evaluate_true_audio(corpus_dir: str | Path, n_utts: int = 20, seed: int = 0, *,
                        classifier: PhoneClassifier | None = None) -> dict:
    """The ceiling: the true audio scored against itself (phone accuracy is the classifier's own)."""
    utts = held_out_utterances(corpus_dir, n_utts, seed=seed)
    return evaluate_utterances(lambda u: u.audio, utts, classifier=classifier)
