"""Evaluation of a vocoder or a voice on held-out corpus utterances: copy synthesis, the
yardsticks, and the metrics of :mod:`.audio_metrics` and :mod:`.phone_classifier` in one table.

    rows = evaluate_copy_synthesis(vocode_fn, "data/corpus", n_utts=20)   # vocode_fn(mel) -> audio

:func:`evaluate_copy_synthesis` vocodes the true mel of held-out utterances with any
``vocode_fn(mel) -> audio`` and scores the result against the true audio;
:func:`evaluate_griffin_lim` (32 iterations) is the yardstick, :func:`evaluate_coarse_only` (the true
signal with its fine byte replaced by 128) and :func:`evaluate_true_audio` bound what a vocoder can
reach. Every metric's name is importable from here as before.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from wavern.dsp import DEFAULT_MEL, int16_to_float, join_coarse_fine, log_mel, split_coarse_fine  # noqa: F401 - ev.DEFAULT_MEL
from wavern.errors import ParameterError
from wavern.training.audio_metrics import (MCD_CONSTANT, SAMPLE_RATE, as_audio, dtw_align, log_spectral_distance,
                                           match_lengths, mcd_dtw, mcd_dtw_mel, mel_cepstra, pesq_wb, pitch_errors,
                                           stoi_score)
from wavern.training.phone_classifier import (SILENCE, PhoneClassifier, PhoneClassifierConfig, base_phone,
                                              default_classifier_path, fit_phone_classifier, frame_labels,
                                              load_phone_classifier, load_timed_corpus, phone_accuracy,
                                              phone_accuracy_mel, phone_counts, save_phone_classifier,
                                              train_phone_classifier)

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


def _utterance(record) -> EvalUtterance:
    """A :class:`wavern.training.corpus.CorpusRecord` read into memory."""
    return EvalUtterance(id=record.id, audio=int16_to_float(record.audio()), mel=record.mel(),
                         phonemes=tuple(record.phonemes), durations=np.asarray(record.durations, np.int64))


def held_out_utterances(corpus_dir: str | Path, n_utts: int = 20, *, seed: int = 0) -> list[EvalUtterance]:
    """``n_utts`` utterances of the corpus's held-out split, drawn without replacement under ``seed``.

    The split is the corpus's own rule (:func:`wavern.training.corpus.is_held_out`); the draw
    is from the held-out records sorted by id, and the result is sorted by id.
    """
    held = sorted(load_timed_corpus(corpus_dir).held_out, key=lambda r: r.id)
    if not 1 <= n_utts <= len(held):
        raise ParameterError(f"n_utts must be in [1, {len(held)}] (held-out utterances of {corpus_dir}), found {n_utts}")
    pick = np.sort(np.random.default_rng(seed).choice(len(held), size=n_utts, replace=False))
    return [_utterance(held[i]) for i in pick]


def coarse_only(audio: np.ndarray) -> np.ndarray:
    """The signal with only its coarse byte kept: fine byte set to 128 (the middle of its bin).

    Float in, float out (through int16, as the vocoder's samples are).
    """
    from wavern.dsp import float_to_int16

    coarse, _ = split_coarse_fine(float_to_int16(as_audio(audio, "audio")))
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
        _, y = match_lengths(u.audio, as_audio(y, f"render({u.id})"))
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
                counts[:2] += phone_counts(mel, u.phonemes, u.durations, clf, exclude_silence=False)
                counts[2:] += phone_counts(mel, u.phonemes, u.durations, clf, exclude_silence=True)
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
