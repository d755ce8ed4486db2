"""Train the acoustic model (text -> log-mel) on a wavern corpus; evaluate it on held-out text.

>>> from wavern.training.acoustic_trainer import AcousticTrainConfig, train_acoustic
>>> result = train_acoustic(AcousticTrainConfig(corpus_dir="data/corpus", out_dir="runs/acoustic",
...                                             steps=3000, time_limit_s=1800))          # doctest: +SKIP

One step draws a batch of training utterances (similar lengths together, :func:`_draw_batch`),
each with a reference clip of the same voice (dropped with probability ``reference_drop``), runs
the teacher-forced model with the corpus durations and minimises ``mel L1 + duration_weight *
MSE(log(1 + frames))``. Seeding, checkpoints and metrics follow :mod:`wavern.training.common`;
under ``torchrun`` (:mod:`wavern.training.distributed`) ``batch_size`` is the global batch::

    torchrun --standalone --nproc-per-node 2 -m wavern.training.acoustic_trainer data/corpus runs/acoustic \\
        --batch-size 16 --threads 1

At the end (``steps`` reached or ``time_limit_s`` spent, not after a signal) ``out_dir`` holds
``acoustic.safetensors``, ``acoustic_config.json`` (what ``voice.json["acoustic"]`` holds) and
``fusion.json`` (the learned peer-fusion connection weights).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import pickle
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from wavern.conditioning.acoustic import AcousticModel, frames_from_samples
from wavern.conditioning.config import PROSODY_DEFAULT, AcousticConfig, EncoderConfig
from wavern.conditioning.export import save_acoustic
from wavern.conditioning.frontend.phonemes import BOS, EOS, PAUSE_SYMBOLS, SymbolTable
from wavern.errors import CorpusError, ParameterError
from wavern.training.common import CheckpointTimer, MetricsLog, StopFlag, atomic_save, load_torch, seed_step
from wavern.training.distributed import (DistInfo, all_sum, average_gradients, barrier, broadcast_parameters,
                                         check_same_step, loss_weights_and_any, run_distributed)

__all__ = ["AcousticTrainConfig", "TrainResult", "train_acoustic", "evaluate_acoustic", "load_checkpoint",
           "export_checkpoint", "corpus_global_mask", "OPTIMIZERS"]

log = logging.getLogger(__name__)

OPTIMIZERS = ("adam", "yellowfin")
CHECKPOINT = "checkpoint.pt"
CHECKPOINT_FORMAT = "wavern-acoustic-checkpoint"
_SENTENCE_END = frozenset(".?!")


@dataclasses.dataclass(frozen=True)
class AcousticTrainConfig:
    """How to train (what the model *is* lives in ``model``, an :class:`AcousticConfig`)."""

    corpus_dir: str
    out_dir: str = "runs/acoustic"
    model: AcousticConfig | None = None  # None: defaults, with the corpus's symbols and voices
    steps: int = 20000  # total optimiser steps of the run (a resumed run continues to this)
    batch_size: int = 16  # utterances per step
    lr: float = 1e-3  # Adam's peak learning rate (YellowFin tunes its own; this scales nothing there)
    warmup_steps: int = 400  # linear Adam warm-up: pre-norm layers are stable, but early steps are large
    lr_half_life_steps: int = 10000  # then lr * 0.5 ** (step / half_life): independent of `steps`
    optimizer: str = "adam"  # one of OPTIMIZERS
    grad_clip: float = 1.0  # global grad-norm clip for Adam (YellowFin clips adaptively itself)
    duration_weight: float = 1.0  # weight of the log-duration MSE against the mel L1
    reference_drop: float = 0.5  # probability a training item gets no reference clip
    reference_frames: int = 200  # random crop of the reference clip (~2.3 s): style, not content
    max_frames: int = 1200  # utterances longer than this (~14 s) are skipped
    seed: int = 0
    device: str = "auto"  # "auto": cuda if present, else cpu
    threads: int = 1  # torch intra-op threads on CPU
    checkpoint_every_s: float = 300.0
    log_every: int = 25  # steps between metrics rows
    eval_every: int = 0  # steps between held-out evaluations (0: only at the end)
    eval_utterances: int = 16
    resume: bool = True  # continue from out_dir/checkpoint.pt when it exists
    time_limit_s: float | None = None  # stop (with a checkpoint) after this much wall time in this call
    progress: bool = True  # tqdm bar on stderr
    export: bool = True  # write acoustic.safetensors etc. when the run reaches `steps`
    init_encoder: str | None = None  # encoder.safetensors from `wavern train pretrain`: initial encoder weights
    # a checkpoint.pt (or a voice folder: its acoustic model) whose model (config and weights) starts this
    # run at step 0 with a fresh optimiser; with `pitch` its missing pitch projection starts from its random init
    init_from: str | None = None
    pitch: bool = False  # also predict the pitch features (AcousticConfig.pitch) a pitch vocoder needs
    prosody: bool = False  # also read each utterance's espeak rate / pitch / range (AcousticConfig.prosody)
    # with init_from: speak the corpus's voices instead of the started-from model's (a voice it already has keeps
    # its embedding, a new one starts from their mean; the mel statistics are the corpus's), e.g. to carry the
    # espeak-trained model over to a teacher corpus's one voice
    speakers_from_corpus: bool = False
    pitch_weight: float = 1.0  # weight of the pitch features' L1 against the mel's

    def __post_init__(self) -> None:
        if isinstance(self.model, dict):
            object.__setattr__(self, "model", AcousticConfig.from_dict(self.model))
        if self.optimizer not in OPTIMIZERS:
            raise ParameterError(f"optimizer must be one of {OPTIMIZERS}, found {self.optimizer!r}")
        for name in ("steps", "batch_size", "warmup_steps", "lr_half_life_steps", "reference_frames", "max_frames",
                     "threads", "log_every", "eval_utterances"):
            if getattr(self, name) < 1:
                raise ParameterError(f"{name} must be >= 1, found {getattr(self, name)}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ParameterError(f"lr must be a positive finite number, found {self.lr}")
        if not (self.pitch_weight >= 0 and math.isfinite(self.pitch_weight)):
            raise ParameterError(f"pitch_weight must be a finite number >= 0, found {self.pitch_weight}")
        if not 0.0 <= self.reference_drop <= 1.0:
            raise ParameterError(f"reference_drop must be in [0, 1], found {self.reference_drop}")
        if self.eval_every < 0 or self.checkpoint_every_s <= 0 or self.grad_clip <= 0:
            raise ParameterError("eval_every must be >= 0, checkpoint_every_s and grad_clip > 0; found "
                                 f"{self.eval_every}, {self.checkpoint_every_s}, {self.grad_clip}")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["model"] = None if self.model is None else self.model.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "AcousticTrainConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ParameterError(f"unknown training config fields {sorted(unknown)}; expected a subset of {sorted(names)}")
        return cls(**d)


class TrainResult(NamedTuple):
    step: int  # steps done in total
    finished: bool  # reached cfg.steps (else stopped by a signal or the time limit)
    # evaluation and export happen at cfg.steps and at the time limit, not after a signal
    last_loss: dict[str, float]
    evaluation: dict[str, float] | None
    out_dir: Path


# ----------------------------------------------------------------------------- data
def corpus_global_mask(symbols) -> np.ndarray:
    """The front end's global tokens, recovered from a corpus token list.

    ``<bos>``, ``<eos>`` and pause tokens are global, and so is the first token of every
    sentence: the one after ``<bos>`` and after a sentence-final pause (``. ? !``). (A sentence
    that ends without punctuation ends in ``_``, which this cannot tell from a mid-sentence
    pause; the front end's ``analyze`` marks it — a small train/inference difference.)
    """
    out = np.zeros(len(symbols), bool)
    start = False
    for i, s in enumerate(symbols):
        if s in (BOS, EOS) or s in PAUSE_SYMBOLS:
            out[i] = True
            start = s == BOS or s in _SENTENCE_END
        else:
            out[i] = start
            start = False
    return out


@dataclasses.dataclass(frozen=True)
class _Item:
    ids: np.ndarray  # (N,) int64
    is_global: np.ndarray  # (N,) bool
    frames: np.ndarray  # (N,) int64, sum == n_frames
    speaker: int
    record: Any  # the CorpusRecord (mel on demand)

    @property
    def n_frames(self) -> int:
        return int(self.frames.sum())


def _items(records, table: SymbolTable, speakers: tuple[str, ...], hop: int, max_frames: int) -> list[_Item]:
    items = []
    for r in records:
        if r.phonemes is None or r.durations is None or r.voice is None:
            raise CorpusError(f"utterance {r.id!r} has no phonemes/durations/voice; the acoustic model "
                              f"needs an espeak-ng corpus (build_corpus), not recordings alone")
        if r.voice not in speakers:
            continue
        frames = frames_from_samples(r.durations, r.n_frames, hop=hop)
        if frames.sum() > max_frames:
            continue
        items.append(_Item(table.encode(r.phonemes), corpus_global_mask(r.phonemes), frames,
                           speakers.index(r.voice), r))
    return items


def _draw_batch(items: list[_Item], by_speaker: dict[int, list[int]], cfg: AcousticTrainConfig,
                rng: np.random.Generator, n_mels: int, device: torch.device, *,
                rows: np.ndarray | None = None, pitch: dict[str, np.ndarray] | None = None) -> dict[str, torch.Tensor]:
    """A padded batch. 4 x batch_size candidates are drawn, sorted by length and a random run of
    batch_size consecutive ones kept, so utterances of similar length share a batch.

    Every random draw of the whole batch is made (so ``rng`` advances the same way whatever
    ``rows`` is); only the rows ``rows`` of it (a data-parallel rank's share; default all) are
    read from disk and padded, to their own longest. ``pitch`` (utterance id -> (T, 2) pitch
    features): the targets' channels after the mel's ``n_mels`` are those.
    """
    n_cand = min(len(items), 4 * cfg.batch_size)
    cand = rng.choice(len(items), size=n_cand, replace=False)
    cand = cand[np.argsort([items[i].n_frames for i in cand], kind="stable")]
    b = min(cfg.batch_size, n_cand)
    s = int(rng.integers(0, n_cand - b + 1))
    plan = []  # per row: (item, its reference item, reference present, crop start)
    for i in cand[s:s + b]:
        it = items[i]
        pool = by_speaker[it.speaker]
        ref = items[pool[int(rng.integers(0, len(pool)))]]
        present = bool(rng.random() >= cfg.reference_drop)
        n_ref = ref.record.n_frames  # == len(ref.record.mel()), checked when the mel is read
        start = int(rng.integers(0, n_ref - cfg.reference_frames + 1)) if n_ref > cfg.reference_frames else 0
        plan.append((it, ref, present, start))
    if rows is not None:
        plan = [plan[k] for k in rows]
    b = len(plan)
    n_tok = max(len(p[0].ids) for p in plan)
    n_frm = max(p[0].n_frames for p in plan)
    ids = np.zeros((b, n_tok), np.int64)
    glob = np.zeros((b, n_tok), bool)
    pad = np.ones((b, n_tok), bool)
    frames = np.zeros((b, n_tok), np.int64)
    mel = np.zeros((b, n_frm, n_mels + (2 if pitch is not None else 0)), np.float32)
    refs = []
    for k, (it, ref, _, start) in enumerate(plan):
        n = len(it.ids)
        ids[k, :n], glob[k, :n], pad[k, :n], frames[k, :n] = it.ids, it.is_global, False, it.frames
        m = it.record.mel()
        mel[k, :m.shape[0], :n_mels] = m
        if pitch is not None:
            mel[k, :m.shape[0], n_mels:] = pitch[it.record.id]
        refs.append(ref.record.mel()[start:start + cfg.reference_frames])
    n_ref = max(r.shape[0] for r in refs)
    ref_mel = np.zeros((b, n_ref, n_mels), np.float32)
    ref_pad = np.ones((b, n_ref), bool)
    for k, r in enumerate(refs):
        ref_mel[k, :r.shape[0]], ref_pad[k, :r.shape[0]] = r, False
    t = {"ids": ids, "is_global": glob, "padding_mask": pad, "durations": frames, "mel": mel,
         "speaker": np.array([p[0].speaker for p in plan], np.int64), "reference": ref_mel,
         "reference_padding_mask": ref_pad, "reference_present": np.array([p[2] for p in plan], bool),
         "prosody": np.stack([prosody_of(p[0].record) for p in plan])}
    return {k: torch.from_numpy(v).to(device) for k, v in t.items()}


def prosody_of(record) -> np.ndarray:
    """(3,) float32 espeak rate, pitch and pitch range a corpus record was rendered with (an
    ``AcousticConfig.prosody`` model's input); espeak-ng's defaults where the record has none."""
    values = (record.rate, record.pitch, record.pitch_range)
    return np.array([d if v is None else v for v, d in zip(values, PROSODY_DEFAULT)], np.float32)


def _pitch_features_of(record) -> np.ndarray:
    """:func:`wavern.dsp.pitch_features` of a corpus record's audio: (n_frames, 2) float32."""
    import soundfile as sf

    from wavern.dsp import audio_pitch_features

    audio, _ = sf.read(str(record.wav_path), dtype="float32")
    feats = audio_pitch_features(audio)
    if feats.shape[0] != record.n_frames:
        raise CorpusError(f"utterance {record.id!r}: {feats.shape[0]} pitch frames for {record.n_frames} mel frames")
    return feats


def _pitch_targets(items: list[_Item]) -> dict[str, np.ndarray]:
    """The pitch features of every training item (about 30 s of CPU for the corpus's 197 minutes)."""
    return {it.record.id: _pitch_features_of(it.record) for it in items}


def _mel_stats(items: list[_Item], n_mels: int, limit: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Per-bin mean and std of the log-mel over (up to ``limit``) training utterances."""
    total = np.zeros(n_mels)
    sq = np.zeros(n_mels)
    count = 0
    for it in items[:limit]:
        m = it.record.mel().astype(np.float64)
        total += m.sum(0)
        sq += (m ** 2).sum(0)
        count += m.shape[0]
    mean = total / max(count, 1)
    std = np.sqrt(np.maximum(sq / max(count, 1) - mean ** 2, 1e-4))
    return mean.astype(np.float32), std.astype(np.float32)


# ----------------------------------------------------------------------------- model / optimiser
def _model_config(cfg: AcousticTrainConfig, corpus) -> AcousticConfig:
    symbols = corpus.symbols
    if symbols is None:
        raise CorpusError(f"corpus {corpus.root} has no symbol table (corpus.json 'symbols')")
    voices = tuple(sorted({r.voice for r in corpus.train if r.voice is not None}))
    if cfg.model is not None:
        if cfg.model.encoder.n_symbols != len(symbols):
            raise ParameterError(f"model n_symbols {cfg.model.encoder.n_symbols} differs from the corpus "
                                 f"symbol table ({len(symbols)})")
        return cfg.model
    return AcousticConfig(encoder=EncoderConfig(n_symbols=len(symbols)), speakers=voices)


def _optimizer(cfg: AcousticTrainConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    if cfg.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), eps=1e-9)
    from wavern.training.yellowfin import YellowFin

    return YellowFin(model.parameters())


def _lr_at(cfg: AcousticTrainConfig, step: int) -> float:
    return cfg.lr * min(1.0, (step + 1) / cfg.warmup_steps) * 0.5 ** (step / cfg.lr_half_life_steps)


def load_checkpoint(path: str | Path, *, device: str | torch.device = "cpu") -> tuple[AcousticModel, dict]:
    """Rebuild the model from a ``checkpoint.pt``; returns (model in eval mode, the checkpoint dict)."""
    path = Path(path)
    if not path.is_file():
        raise ParameterError(f"checkpoint not found: {path}")
    ckpt = load_torch(path, "acoustic checkpoint", map_location=device, weights_only=True)
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise ParameterError(f"{path} is not an acoustic checkpoint (format {ckpt.get('format')!r})")
    model = AcousticModel(AcousticConfig.from_dict(ckpt["model_config"]))
    model.load_state_dict(ckpt["model"])
    return model.to(device).eval(), ckpt


def export_checkpoint(checkpoint: str | Path, out_dir: str | Path, *, dtype: torch.dtype = torch.float32,
                      prune: bool = False) -> Path:
    """Write ``acoustic.safetensors`` + ``acoustic_config.json`` (+ ``fusion.json``) from a checkpoint.

    Args:
        checkpoint: a ``checkpoint.pt`` written by :func:`train_acoustic`.
        out_dir: destination folder (created).
        dtype: float32 or float16 storage.
        prune: prune the peer fusion first (argmax peers, weak edges dropped).

    Returns:
        The path of ``acoustic.safetensors``.
    """
    model, _ = load_checkpoint(checkpoint)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if prune:
        model.prune_fusion()
    path = save_acoustic(model, out / "acoustic.safetensors", dtype=dtype)
    (out / "acoustic_config.json").write_text(json.dumps(model.config.to_dict(), indent=1) + "\n", encoding="utf-8")
    (out / "fusion.json").write_text(json.dumps(model.connection_tables(), indent=1) + "\n", encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- evaluation
def evaluate_acoustic(model: AcousticModel, corpus, n: int = 16, *, phone_accuracy: bool = False,
                      classifier=None, table: SymbolTable | None = None) -> dict[str, float]:
    """Held-out metrics of ``model`` on the first ``n`` held-out utterances (by id) of its voices.

    - ``mel_l1``: mean |log-mel error| with the corpus durations (teacher-forced timing), the
      loss the model trains on, in natural-log units; no reference clip.
    - ``mcd_dtw``: free-running synthesis (predicted durations) against espeak's mel, mel-cepstral
      distortion after DTW (``wavern.training.evaluate.mcd_dtw_mel``), dB.
    - ``duration_mae``: mean |predicted - true| frames per token; ``length_ratio``: mean
      predicted / true frames per utterance.
    - ``phone_accuracy`` (optional): the phone classifier's frame accuracy on Griffin-Lim
      renderings of the free-running mel, against the model's own predicted timings.
    - ``pitch_l1`` (a pitch model): mean |error| of the pitch features, teacher-forced timing.

    Args:
        model: the model (any mode; evaluated in eval mode).
        corpus: a loaded :class:`~wavern.training.corpus.Corpus`.
        n: number of utterances.
        phone_accuracy: also run Griffin-Lim and the phone classifier (slow: seconds per utterance).
        classifier: a ``wavern.training.evaluate.PhoneClassifier`` (default: the shipped one).
        table: symbol table (default: the corpus's).
    """
    from wavern.training.evaluate import mcd_dtw_mel

    cfg = model.config
    table = table or SymbolTable.from_list(corpus.symbols)
    held = sorted((r for r in corpus.held_out if r.voice in cfg.speakers), key=lambda r: r.id)[:n]
    if not held:
        raise CorpusError(f"corpus {corpus.root} has no held-out utterances in the model's voices")
    items = _items(held, table, cfg.speakers, cfg.hop_length, max_frames=10 ** 9)
    was = model.training
    model.eval()
    device = model.mel_mean.device
    l1, mcd, mae, ratio, acc, p_l1 = [], [], [], [], [], []
    try:
        with torch.no_grad():
            for it in items:
                mel_true = it.record.mel()
                out = model(torch.as_tensor(it.ids)[None].to(device), torch.as_tensor(it.is_global)[None].to(device),
                            torch.as_tensor(it.frames)[None].to(device),
                            speaker=torch.tensor([it.speaker], device=device),
                            prosody=torch.as_tensor(prosody_of(it.record))[None].to(device))
                pred = out.mel[0].cpu()
                l1.append(float((pred[:, :cfg.n_mels] - torch.as_tensor(mel_true)).abs().mean()))
                if cfg.pitch:
                    p_l1.append(float((pred[:, cfg.n_mels:] - torch.as_tensor(_pitch_features_of(it.record))).abs().mean()))
                mel_pred, dur = model.infer(it.ids, it.is_global, speaker=it.speaker)
                mel_pred = mel_pred[:, :cfg.n_mels]
                mcd.append(mcd_dtw_mel(mel_true, mel_pred))
                mae.append(float(np.abs(dur - it.frames).mean()))
                ratio.append(dur.sum() / max(it.n_frames, 1))
                if phone_accuracy:
                    acc.append(_phone_accuracy(mel_pred, it.record.phonemes, dur * cfg.hop_length, classifier))
    finally:
        model.train(was)
    result = {"mel_l1": float(np.mean(l1)), "mcd_dtw": float(np.mean(mcd)), "duration_mae": float(np.mean(mae)),
              "length_ratio": float(np.mean(ratio)), "n": len(items)}
    if phone_accuracy:
        result["phone_accuracy"] = float(np.nanmean(acc))
    if cfg.pitch:
        result["pitch_l1"] = float(np.mean(p_l1))  # teacher-forced timing, like mel_l1
    return result


def _phone_accuracy(mel: np.ndarray, phonemes, durations_samples: np.ndarray, classifier=None) -> float:
    from wavern.dsp import griffin_lim
    from wavern.training.evaluate import phone_accuracy

    audio = griffin_lim(mel)
    return phone_accuracy(audio, list(phonemes), [int(d) for d in durations_samples], classifier=classifier)


# ----------------------------------------------------------------------------- training loop
def _init_source(path: str | Path, device: str | torch.device) -> dict:
    """What ``init_from`` starts from, as a checkpoint dict (``model_config``, ``model``, ``step``): a
    ``checkpoint.pt``, or a voice folder's acoustic model (its ``voice.json["acoustic"]`` config and the
    float16 weights of ``acoustic.safetensors``; the step its provenance records)."""
    path = Path(path)
    if path.is_dir():
        from wavern.conditioning.export import load_acoustic

        try:
            meta = json.loads((path / "voice.json").read_text(encoding="utf-8"))
            config = AcousticConfig.from_dict(meta["acoustic"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ParameterError(f"{path} is not a voice folder with an acoustic config ({exc})") from None
        model = load_acoustic(path / "acoustic.safetensors", config, device=device)
        return {"format": CHECKPOINT_FORMAT, "model_config": config.to_dict(), "model": model.state_dict(),
                "step": meta.get("provenance", {}).get("acoustic", {}).get("step")}
    try:
        init = torch.load(path, map_location=device, weights_only=True)
    except (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError) as exc:
        raise ParameterError(f"{path} is not an acoustic checkpoint ({exc})") from None
    if not isinstance(init, dict) or init.get("format") != CHECKPOINT_FORMAT:
        raise ParameterError(f"{path} is not an acoustic checkpoint (format {init.get('format')!r})")
    return init


def _with_speakers(init: dict, speakers: tuple[str, ...]) -> dict:
    """``init`` with its speaker embeddings re-indexed for ``speakers`` (a voice it lacks gets the mean
    of its embeddings) and without its mel statistics (the new corpus's are used)."""
    old = list(AcousticConfig.from_dict(init["model_config"]).speakers)
    state = {k: v for k, v in init["model"].items() if k not in ("mel_mean", "mel_std")}
    table = state["speaker_embed.weight"]  # (n_old, speaker_dim)
    state["speaker_embed.weight"] = torch.stack([table[old.index(n)] if n in old else table.mean(0) for n in speakers])
    return {**init, "model": state}


def _same_run(ckpt: dict, cfg: AcousticTrainConfig, model_cfg: AcousticConfig) -> None:
    if ckpt.get("format") != CHECKPOINT_FORMAT:
        raise ParameterError(f"{cfg.out_dir}/{CHECKPOINT} is not an acoustic checkpoint")
    if AcousticConfig.from_dict(ckpt["model_config"]) != model_cfg:
        raise ParameterError(f"{cfg.out_dir}/{CHECKPOINT} was trained with another model config; "
                             f"use a new out_dir or resume=False")
    old = ckpt["train_config"]
    for key in ("seed", "batch_size", "optimizer", "lr", "warmup_steps", "lr_half_life_steps", "corpus_dir"):
        if key == "corpus_dir" and old.get(key) is not None \
                and Path(old[key]).resolve() == Path(cfg.corpus_dir).resolve():
            continue  # the same folder spelled another way ("a/" or a relative path)
        if old.get(key) != getattr(cfg, key):
            raise ParameterError(f"cannot resume: {key} was {old.get(key)!r}, now {getattr(cfg, key)!r}; "
                                 f"use a new out_dir or resume=False")


def train_acoustic(cfg: AcousticTrainConfig) -> TrainResult:
    """Train (or resume) an acoustic model; see the module docstring. Returns a :class:`TrainResult`.

    Under ``torchrun`` every process calls this; only rank 0's result carries the evaluation.
    """
    return run_distributed(cfg.device, lambda device, dist_info: _train(cfg, device, dist_info))


def _train(cfg: AcousticTrainConfig, device: torch.device, dist_info: DistInfo) -> TrainResult:
    from tqdm import tqdm

    from wavern.training.corpus import load_corpus

    main = dist_info.is_main
    if device.type == "cpu":
        torch.set_num_threads(cfg.threads)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    corpus = load_corpus(cfg.corpus_dir)
    ckpt_path = out / CHECKPOINT
    init = None
    if cfg.init_from and not (cfg.resume and ckpt_path.is_file()):
        init = _init_source(cfg.init_from, device)
    model_cfg = _model_config(cfg, corpus)
    if cfg.init_from:  # the started-from model's shape (on resume too: the same config again)
        source = init if init is not None else _init_source(cfg.init_from, "cpu")
        model_cfg = AcousticConfig.from_dict(source["model_config"])
    if cfg.pitch:
        model_cfg = dataclasses.replace(model_cfg, pitch=True)
    if cfg.prosody:
        model_cfg = dataclasses.replace(model_cfg, prosody=True)
    if cfg.speakers_from_corpus:
        if not cfg.init_from:
            raise ParameterError("speakers_from_corpus carries a started-from model (init_from) to the corpus's voices")
        model_cfg = dataclasses.replace(model_cfg, speakers=tuple(sorted({r.voice for r in corpus.train if r.voice})))
    if init is not None and cfg.speakers_from_corpus:
        init = _with_speakers(init, model_cfg.speakers)
    table = SymbolTable.from_list(corpus.symbols)
    items = _items(corpus.train, table, model_cfg.speakers, model_cfg.hop_length, cfg.max_frames)
    if not items:
        hint = "; to carry the started-from model over to the corpus's voices, use speakers_from_corpus " \
               "(--speakers-from-corpus)" if cfg.init_from and not cfg.speakers_from_corpus else ""
        raise CorpusError(f"no usable training utterances in {cfg.corpus_dir} for voices {model_cfg.speakers}{hint}")
    by_speaker: dict[int, list[int]] = {}
    for i, it in enumerate(items):
        by_speaker.setdefault(it.speaker, []).append(i)

    torch.manual_seed(cfg.seed)
    model = AcousticModel(model_cfg)
    if cfg.init_encoder is not None:  # replaced-token-detection pre-training (wavern.training.pretrain)
        from wavern.training.encoder_file import load_encoder_into

        load_encoder_into(model.encoder, cfg.init_encoder, symbols=corpus.symbols)
    mean, std = _mel_stats(items, model_cfg.n_mels)
    model.mel_mean.copy_(torch.from_numpy(mean))
    model.mel_std.copy_(torch.from_numpy(std))
    if init is not None:
        missing, unexpected = model.load_state_dict(init["model"], strict=False)
        allowed = {"pitch_out.weight", "pitch_out.bias", "prosody_in.weight", "prosody_in.bias"}
        if cfg.speakers_from_corpus:
            allowed |= {"mel_mean", "mel_std"}
        if unexpected or set(missing) - allowed:
            raise ParameterError(f"{cfg.init_from} does not fit this model: missing {missing}, unexpected {unexpected}")
        log.info("initialised from %s (step %s)%s", cfg.init_from, init.get("step"),
                 f"; new: {sorted(missing)}" if missing else "")
    pitch = _pitch_targets(items) if model_cfg.pitch else None
    model.to(device)
    opt = _optimizer(cfg, model)
    metrics = MetricsLog(out / "metrics.jsonl")
    step, elapsed_before = 0, 0.0
    if cfg.resume and ckpt_path.is_file():  # every rank reads the same checkpoint
        ckpt = load_torch(ckpt_path, "acoustic checkpoint", map_location=device, weights_only=True)
        _same_run(ckpt, cfg, model_cfg)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        step, elapsed_before = int(ckpt["step"]), float(ckpt["elapsed_s"])
        if main:
            metrics.truncate_after(step)
        log.info("resumed from %s at step %d", ckpt_path, step)
    elif main:
        metrics.truncate_after(-1)  # a fresh run starts a fresh metrics file
        (out / "train_config.json").write_text(json.dumps(cfg.to_dict(), indent=1) + "\n", encoding="utf-8")
        log.info("training %d parameters on %d utterances (%d voices), device %s, %d process(es)",
                 sum(p.numel() for p in model.parameters()), len(items), len(model_cfg.speakers), device,
                 dist_info.world_size)
    check_same_step(step, dist_info)
    broadcast_parameters(model, dist_info)
    global_batch = min(cfg.batch_size, len(items))  # what _draw_batch draws
    if global_batch < dist_info.world_size:
        raise ParameterError(f"a batch of {global_batch} utterances cannot be split over {dist_info.world_size} "
                             f"data-parallel processes; use batch_size >= the number of processes")
    rows = dist_info.rows(global_batch) if dist_info.enabled else None

    def save() -> None:
        if main:
            atomic_save({"format": CHECKPOINT_FORMAT, "step": step, "model_config": model_cfg.to_dict(),
                         "train_config": cfg.to_dict(), "model": model.state_dict(), "optimizer": opt.state_dict(),
                         "elapsed_s": elapsed_before + time.monotonic() - t_start}, ckpt_path)

    t_start = time.monotonic()
    timer = CheckpointTimer(cfg.checkpoint_every_s)
    last: dict[str, float] = {}
    evaluation = None
    bar = tqdm(total=cfg.steps, initial=step, disable=not (cfg.progress and main), desc="acoustic", unit="step")
    stopped = False
    try:
        with StopFlag() as stop:
            while step < cfg.steps:
                rng = seed_step(cfg.seed, step, dist_info.rank)
                batch = _draw_batch(items, by_speaker, cfg, rng, model_cfg.n_mels, device, rows=rows, pitch=pitch)
                model.train()
                out_t = model(batch["ids"], batch["is_global"], batch["durations"], speaker=batch["speaker"],
                              padding_mask=batch["padding_mask"], reference=batch["reference"],
                              reference_padding_mask=batch["reference_padding_mask"],
                              reference_present=batch["reference_present"], prosody=batch["prosody"])
                loss = model.loss(out_t, batch["mel"][:, :out_t.mel.shape[1]], batch["durations"],
                                  padding_mask=batch["padding_mask"], duration_weight=cfg.duration_weight,
                                  n_pitch=2 if model_cfg.pitch else 0, pitch_weight=cfg.pitch_weight)
                objective = loss.total
                if dist_info.enabled:  # the global batch's mean: weight by this rank's share of frames, tokens
                    counts = [float(batch["durations"].sum()), float((~batch["padding_mask"]).sum())]
                    (w_mel, w_dur), bad = loss_weights_and_any(counts, not torch.isfinite(loss.total), dist_info)
                    objective = (w_mel * (loss.mel_l1 + cfg.pitch_weight * loss.pitch_l1)
                                 + cfg.duration_weight * w_dur * loss.duration_mse)
                    finite = not bad  # on every rank: one rank alone leaving hangs the others
                else:
                    w_mel = w_dur = 1.0
                    finite = bool(torch.isfinite(loss.total))
                if not finite:
                    raise FloatingPointError(f"loss became {float(loss.total)} at step {step}; lower lr")
                opt.zero_grad(set_to_none=True)
                objective.backward()
                average_gradients(model, dist_info)
                if cfg.optimizer == "adam":
                    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                    for g in opt.param_groups:
                        g["lr"] = _lr_at(cfg, step)
                opt.step()
                step += 1
                over_time = cfg.time_limit_s is not None and time.monotonic() - t_start >= cfg.time_limit_s
                mel_l1, dur_mse, signalled, over_time = all_sum(
                    [w_mel * float(loss.mel_l1.detach()), w_dur * float(loss.duration_mse.detach()),
                     float(stop.requested is not None), float(over_time)], dist_info)
                mel_l1, dur_mse = mel_l1 / dist_info.world_size, dur_mse / dist_info.world_size
                last = {"loss": mel_l1 + cfg.duration_weight * dur_mse, "mel_l1": mel_l1, "duration_mse": dur_mse}
                if not dist_info.enabled:
                    last["loss"] = float(loss.total.detach())
                    if model_cfg.pitch:
                        last["pitch_l1"] = float(loss.pitch_l1.detach())
                bar.update(1)
                if main and (step % cfg.log_every == 0 or step == cfg.steps):
                    bar.set_postfix(mel_l1=f"{last['mel_l1']:.3f}", dur=f"{last['duration_mse']:.3f}")
                    metrics.write({"kind": "train", "step": step, **last, "lr": float(opt.param_groups[0]["lr"]),
                                   "elapsed_s": round(elapsed_before + time.monotonic() - t_start, 1)})
                if main and cfg.eval_every and step % cfg.eval_every == 0 and step < cfg.steps:
                    row = evaluate_acoustic(model, corpus, cfg.eval_utterances, table=table)
                    metrics.write({"kind": "eval", "step": step, **row})
                if timer.due():
                    save()
                    timer.reset()
                if signalled or over_time:
                    stopped = bool(signalled)
                    log.info("stopping at step %d (%s)", step, "signal" if stopped else "time limit")
                    break
            save()
    finally:
        bar.close()
    finished = not stopped and step >= cfg.steps
    if main and not stopped and cfg.export:  # reached `steps` or the planned time limit (not a signal)
        evaluation = metrics.eval_at(step)  # this step's weights evaluated already (a rerun of a finished run)
        if evaluation is None:
            evaluation = evaluate_acoustic(model, corpus, cfg.eval_utterances, table=table)
            metrics.write({"kind": "eval", "step": step, **evaluation})
        export_checkpoint(ckpt_path, out)
    metrics.close()
    barrier(dist_info)  # every rank returns once rank 0's files are written (a resume right after reads them)
    return TrainResult(step, finished, last, evaluation, out)


# ----------------------------------------------------------------------------- command line
def main(argv: list[str] | None = None) -> int:
    """``python -m wavern.training.acoustic_trainer CORPUS OUT [options]``: train, then print the evaluation."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m wavern.training.acoustic_trainer", description=main.__doc__)
    p.add_argument("corpus_dir")
    p.add_argument("out_dir")
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup-steps", type=int, default=400)
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adam")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="auto")
    p.add_argument("--time-limit-min", type=float, default=None)
    p.add_argument("--d-model", type=int, default=None, help="encoder and decoder width (default: AcousticConfig's)")
    p.add_argument("--layers", type=int, default=None, help="encoder and decoder layers")
    p.add_argument("--ffn", type=int, default=None, help="FFN channels of encoder and decoder")
    p.add_argument("--decoder-kind", default=None)
    p.add_argument("--eval-every", type=int, default=0)
    p.add_argument("--init-from", default=None, help="a checkpoint.pt or a voice folder to start from (its model, step 0)")
    p.add_argument("--pitch", action="store_true", help="also predict the pitch features a pitch vocoder needs")
    p.add_argument("--pitch-weight", type=float, default=1.0, help="weight of the pitch features' L1")
    p.add_argument("--speakers-from-corpus", action="store_true",
                   help="with --init-from: speak the corpus's voices (new ones start from the mean speaker)")
    p.add_argument("--prosody", action="store_true",
                   help="also read each utterance's espeak rate, pitch and range (inference: espeak's defaults)")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    model = None
    if any(v is not None for v in (args.d_model, args.layers, args.ffn, args.decoder_kind)):
        from wavern.training.corpus import load_corpus

        corpus = load_corpus(args.corpus_dir)
        base = _model_config(AcousticTrainConfig(corpus_dir=args.corpus_dir), corpus)
        enc_kw, dec_kw = {}, {}
        if args.d_model is not None:
            enc_kw["d_model"] = dec_kw["decoder_d_model"] = dec_kw["duration_channels"] = args.d_model
        if args.layers is not None:
            enc_kw["n_layers"] = dec_kw["decoder_layers"] = args.layers
        if args.ffn is not None:
            enc_kw["ffn_channels"] = dec_kw["decoder_ffn_channels"] = args.ffn
        if args.decoder_kind is not None:
            dec_kw["decoder_kind"] = args.decoder_kind
        model = dataclasses.replace(base, encoder=dataclasses.replace(base.encoder, **enc_kw), **dec_kw)
    cfg = AcousticTrainConfig(
        corpus_dir=args.corpus_dir, out_dir=args.out_dir, model=model, steps=args.steps, batch_size=args.batch_size,
        lr=args.lr, warmup_steps=args.warmup_steps, optimizer=args.optimizer, seed=args.seed, threads=args.threads,
        device=args.device,
        time_limit_s=None if args.time_limit_min is None else 60.0 * args.time_limit_min,
        eval_every=args.eval_every, progress=not args.no_progress, init_from=args.init_from, pitch=args.pitch,
        prosody=args.prosody, pitch_weight=args.pitch_weight, speakers_from_corpus=args.speakers_from_corpus)
    result = train_acoustic(cfg)
    print(json.dumps({"step": result.step, "finished": result.finished, "last": result.last_loss,
                      "evaluation": result.evaluation}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
