"""The intelligibility score: a small frame-level phone classifier (an MLP on ±5 stacked log-mel
frames) trained on the espeak-ng corpus with espeak's phoneme timings as frame labels
(:func:`train_phone_classifier`); :func:`phone_accuracy` is its frame accuracy on any audio against
the timings of the text it should say. The shipped classifier is
``assets/eval/phone_classifier.{safetensors,json}``.

Base phone set (:func:`base_phone`): a corpus token loses its stress marks (ˈ ˌ), length and
half-length marks (ː ˑ, and the ASCII ``:`` of ``"a:"``) and combining diacritics (category Mn), and
the Scottish voice's ``r`` becomes ``ɹ``; a token that then holds no letter, or a ``<...>`` token, is
silence ``"sil"``. Base phones with fewer than ``min_class_frames`` training frames are left out of
the class list; frames labelled with a phone outside it are ignored when scoring.
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
from typing import Sequence

import numpy as np

from wavern.dsp import DEFAULT_MEL, MelConfig, log_mel
from wavern.errors import CorpusError, ParameterError
from wavern.training.audio_metrics import as_audio

__all__ = ["SILENCE", "base_phone", "frame_labels", "PhoneClassifierConfig", "PhoneClassifier", "fit_phone_classifier",
           "train_phone_classifier", "save_phone_classifier", "load_phone_classifier", "default_classifier_path",
           "phone_accuracy", "phone_accuracy_mel", "phone_counts", "load_timed_corpus"]

log = logging.getLogger(__name__)

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


def phone_counts(mel: np.ndarray, phonemes: Sequence[str], durations: Sequence[int],
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
    correct, total = phone_counts(mel, phonemes, durations, clf, exclude_silence)
    return correct / total if total else float("nan")


def phone_accuracy(audio: np.ndarray, phonemes: Sequence[str], durations: Sequence[int], *,
                   classifier: PhoneClassifier | None = None, exclude_silence: bool = False) -> float:
    """Frame accuracy of the phone classifier on float audio at 22 050 Hz (see :func:`phone_accuracy_mel`)."""
    x = as_audio(audio, "audio").astype(np.float32)
    return phone_accuracy_mel(log_mel(x), phonemes, durations, classifier=classifier,
                              exclude_silence=exclude_silence)



def load_timed_corpus(corpus_dir: str | Path):
    """The corpus (validated by :func:`wavern.training.corpus.load_corpus`) and its espeak-timed records."""
    from wavern.training.corpus import load_corpus

    corpus = load_corpus(corpus_dir)
    untimed = [r.id for r in corpus if r.phonemes is None or r.durations is None]
    if untimed:
        raise CorpusError(f"{corpus_dir}: {len(untimed)} utterances have no phoneme timings (e.g. {untimed[0]!r}); "
                          "the phone classifier needs an espeak corpus")
    return corpus



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
    corpus = load_timed_corpus(corpus_dir)
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
        c, n = phone_counts(r.mel(), r.phonemes, r.durations, model, exclude_silence=False)
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


