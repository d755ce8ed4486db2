"""Replaced-token-detection pre-training of the phoneme encoder (CodeBERT / ELECTRA, REFERENCES §6).

>>> from wavern.training.pretrain import PretrainConfig, pretrain_encoder
>>> result = pretrain_encoder(PretrainConfig(corpus_dir="data/corpus", run_dir="runs/pretrain"))  # doctest: +SKIP
>>> # then: AcousticTrainConfig(..., init_encoder=str(result.encoder_path))

The discriminator is the acoustic model's own encoder (:mod:`.rtd`: corruption and heads); it
reads phoneme sequences alone (the sentence file phonemised in each of ``text_voices``, cached as
``text_cache.npz``) and paired with the corpus's audio frames (:func:`_load_data`), and learns to
spot the tokens a bidirectional trigram replaced. Loss = ``text_weight * text_rtd + audio_weight *
audio_rtd + mlm_weight * mlm``. Held-out texts only evaluate. At the end the encoder's weights go
to ``encoder.safetensors`` (:mod:`.encoder_file`). Trainer conventions (per-step seeding,
checkpoints, metrics, torchrun data parallelism): :mod:`wavern.training.common`,
:mod:`wavern.training.distributed`::

    torchrun --standalone --nproc-per-node 2 -m wavern.app.cli train pretrain --corpus data/corpus \\
        --run-dir runs/pretrain --batch-size 32 --threads 1
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from wavern.conditioning.acoustic import frames_from_samples
from wavern.conditioning.config import EncoderConfig
from wavern.conditioning.frontend.phonemes import SymbolTable
from wavern.dsp import DEFAULT_MEL
from wavern.errors import CorpusError, ParameterError, WavernError
from wavern.training.acoustic_trainer import corpus_global_mask
from wavern.training.common import CheckpointTimer, MetricsLog, StopFlag, atomic_save, load_torch, seed_step
from wavern.training.distributed import (DistInfo, all_sum, average_gradients, barrier, broadcast_parameters,
                                         check_same_step, loss_weights_and_any, run_distributed)
from wavern.training.encoder_file import ENCODER_FILE, ENCODER_FORMAT, export_encoder, load_encoder_into
from wavern.training.ngram import BidirectionalTrigram
from wavern.training.rtd import (Corrupted, DonorBank, Example, ReplacedTokenDetector, RTDLoss, RTDOutput,
                                 choose_positions, collate, corrupt, pool_frames, special_ids)

__all__ = ["PretrainConfig", "PretrainResult", "pretrain_encoder", "ReplacedTokenDetector", "RTDOutput", "RTDLoss",
           "Example", "Corrupted", "DonorBank", "choose_positions", "corrupt", "collate", "special_ids",
           "phonemize_sentences", "export_encoder", "load_encoder_into", "evaluate_pretrain", "OPTIMIZERS",
           "ENCODER_FORMAT"]

log = logging.getLogger(__name__)

OPTIMIZERS = ("adam", "yellowfin")
CHECKPOINT = "checkpoint.pt"
CHECKPOINT_FORMAT = "wavern-pretrain-checkpoint"
TEXT_CACHE = "text_cache.npz"
_TEXT_CACHE_FORMAT = "wavern-pretrain-text-1"
_EVAL_SEED = 1 << 40  # evaluation masks come from default_rng([seed, _EVAL_SEED]): never a training step's


# ----------------------------------------------------------------------------- config
@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    """How to pre-train (what the encoder *is* lives in ``encoder``, an :class:`EncoderConfig`)."""

    corpus_dir: str
    run_dir: str = "runs/pretrain"
    encoder: EncoderConfig | None = None  # None: EncoderConfig defaults with the corpus's symbols (as train_acoustic)
    sentences_path: str | None = None  # unimodal text; None: assets/sentences/sotu.txt
    text_voices: tuple[str, ...] = ("en-us",)  # espeak voices that phonemise it; () = corpus text only
    steps: int = 3000
    batch_size: int = 32  # sequences per step (unimodal and bimodal together)
    bimodal_fraction: float = 0.5  # share of each batch drawn from the corpus (phonemes + frames)
    mask_rate: float = 0.15  # per modality, of the maskable positions (BERT / CodeBERT)
    ngram_k: float = 0.01  # add-k smoothing of the trigram; small: seen trigrams dominate
    temperature: float = 1.0  # proposals from q ** (1 / T); > 1 flattens them (more replacements differ)
    text_weight: float = 1.0  # loss weights: CodeBERT sums the objectives unweighted
    audio_weight: float = 1.0
    mlm_weight: float = 1.0
    lr: float = 5e-4  # Adam's peak learning rate
    warmup_steps: int = 200
    lr_half_life_steps: int = 10000
    optimizer: str = "adam"  # one of OPTIMIZERS
    grad_clip: float = 1.0  # Adam only; YellowFin clips adaptively itself
    max_tokens: int = 400  # longer sequences are skipped (a batch pads to its longest)
    seed: int = 0
    device: str = "auto"
    threads: int = 1
    checkpoint_every_s: float = 300.0
    log_every: int = 25
    eval_every: int = 0  # steps between held-out evaluations (0: only at the end)
    eval_sequences: int = 32  # held-out sequences of each kind per evaluation
    resume: bool = True  # continue from run_dir/checkpoint.pt when it exists
    time_limit_s: float | None = None
    progress: bool = True
    export: bool = True  # write encoder.safetensors at the end (steps reached or time limit)

    def __post_init__(self) -> None:
        if isinstance(self.encoder, dict):
            object.__setattr__(self, "encoder", EncoderConfig.from_dict(self.encoder))
        if isinstance(self.text_voices, (list, str)):
            voices = [self.text_voices] if isinstance(self.text_voices, str) else self.text_voices
            object.__setattr__(self, "text_voices", tuple(voices))
        if self.optimizer not in OPTIMIZERS:
            raise ParameterError(f"optimizer must be one of {OPTIMIZERS}, found {self.optimizer!r}")
        for name in ("steps", "batch_size", "warmup_steps", "lr_half_life_steps", "max_tokens", "threads",
                     "log_every", "eval_sequences"):
            if getattr(self, name) < 1:
                raise ParameterError(f"{name} must be >= 1, found {getattr(self, name)}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ParameterError(f"lr must be a positive finite number, found {self.lr}")
        if not 0.0 <= self.bimodal_fraction <= 1.0:
            raise ParameterError(f"bimodal_fraction must be in [0, 1], found {self.bimodal_fraction}")
        if not 0.0 < self.mask_rate < 1.0:
            raise ParameterError(f"mask_rate must be in (0, 1), found {self.mask_rate}")
        if not (self.ngram_k > 0 and self.temperature > 0):
            raise ParameterError(f"ngram_k and temperature must be > 0, found {self.ngram_k}, {self.temperature}")
        if min(self.text_weight, self.audio_weight, self.mlm_weight) < 0:
            raise ParameterError(f"loss weights must be >= 0, found {self.text_weight}, {self.audio_weight}, "
                                 f"{self.mlm_weight}")
        if self.eval_every < 0 or self.checkpoint_every_s <= 0 or self.grad_clip <= 0:
            raise ParameterError("eval_every must be >= 0, checkpoint_every_s and grad_clip > 0; found "
                                 f"{self.eval_every}, {self.checkpoint_every_s}, {self.grad_clip}")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["encoder"] = None if self.encoder is None else self.encoder.to_dict()
        d["text_voices"] = list(self.text_voices)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PretrainConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ParameterError(f"unknown pretrain config fields {sorted(unknown)}; "
                                 f"expected a subset of {sorted(names)}")
        return cls(**d)


class PretrainResult(NamedTuple):
    step: int
    finished: bool  # reached cfg.steps (else stopped by a signal or the time limit)
    last_loss: dict[str, float]
    evaluation: dict[str, float] | None
    run_dir: Path
    encoder_path: Path | None  # encoder.safetensors, when exported



def _bimodal(records, table: SymbolTable, voices: list[str], max_tokens: int, *, held: bool) -> list[Example]:
    """Corpus records -> examples with *raw* pooled log-mel (normalised later by ``_normalise``)."""
    seqs = []
    for i, r in enumerate(records):
        if r.phonemes is None or r.durations is None or r.voice is None:
            raise CorpusError(f"utterance {r.id!r} has no phonemes/durations/voice; pre-training needs an "
                              f"espeak-ng corpus (build_corpus)")
        if len(r.phonemes) > max_tokens:
            continue
        mel = r.mel()
        frames = frames_from_samples(r.durations, mel.shape[0], hop=DEFAULT_MEL.hop_length)
        utt = -1 - i if held else len(seqs)  # held-out ones never match a donor's utterance
        seqs.append(Example(table.encode(r.phonemes), corpus_global_mask(r.phonemes), pool_frames(mel, frames),
                             frames, voices.index(r.voice), utt))
    return seqs


def _normalise(seqs: list[Example], mean: np.ndarray, std: np.ndarray) -> list[Example]:
    out = []
    for s in seqs:
        a = ((s.audio - mean) / std) * (s.frames > 0)[:, None]
        out.append(dataclasses.replace(s, audio=a.astype(np.float32)))
    return out


def _pooled_stats(seqs: list[Example]) -> tuple[np.ndarray, np.ndarray]:
    """Per-bin mean and std of the log-mel frames, from the pooled means weighted by frames
    (the std is of the token means, the scale the network actually sees)."""
    w = np.concatenate([s.frames for s in seqs]).astype(np.float64)
    x = np.concatenate([s.audio for s in seqs]).astype(np.float64)
    mean = (x * w[:, None]).sum(0) / max(w.sum(), 1.0)
    var = ((x - mean) ** 2 * w[:, None]).sum(0) / max(w.sum(), 1.0)
    return mean.astype(np.float32), np.sqrt(np.maximum(var, 1e-4)).astype(np.float32)


def phonemize_sentences(sentences: list[str], voices: tuple[str, ...], table: SymbolTable, *,
                        progress: bool = False) -> list[tuple[np.ndarray, int, bool]]:
    """Run the front end over every sentence in every voice.

    Returns:
        ``(ids (N,), voice index, held_out)`` per sentence and voice; sentences the front end
        refuses (nothing speakable) are skipped with a log line.
    """
    from tqdm import tqdm

    from wavern.conditioning.frontend import analyze
    from wavern.training.corpus import is_held_out

    out = []
    skipped = 0
    with tqdm(total=len(sentences) * len(voices), disable=not progress, desc="phonemise", unit="sent") as bar:
        for v, voice in enumerate(voices):
            for text in sentences:
                try:
                    utt = analyze(text, voice=voice, table=table)
                except WavernError as exc:
                    skipped += 1
                    log.debug("skipped %r: %s", text[:60], exc)
                else:
                    out.append((utt.ids.astype(np.int64), v, is_held_out(text)))
                bar.update(1)
    if skipped:
        log.info("phonemise: %d of %d sentences skipped", skipped, len(sentences) * len(voices))
    return out


def _text_sequences(cfg: PretrainConfig, run_dir: Path, table: SymbolTable) -> tuple[list[Example], list[Example]]:
    """Unimodal (train, held-out) sequences, phonemised once and cached in ``run_dir``."""
    if not cfg.text_voices:
        return [], []
    from wavern.training.corpus import default_sentences_path, read_sentences

    path = Path(cfg.sentences_path) if cfg.sentences_path is not None else default_sentences_path()
    sentences = read_sentences(path)
    digest = hashlib.sha256("\n".join(sentences).encode("utf-8")).hexdigest()
    meta = {"format": _TEXT_CACHE_FORMAT, "sentences_sha256": digest, "voices": list(cfg.text_voices),
            "symbols": table.to_list()}
    cache = run_dir / TEXT_CACHE
    rows = None
    if cache.is_file():
        try:
            with np.load(cache, allow_pickle=False) as z:
                if json.loads(str(z["meta"])) == meta:
                    offsets = z["offsets"]
                    ids = z["ids"]
                    rows = [(ids[offsets[i]:offsets[i + 1]], int(v), bool(h))
                            for i, (v, h) in enumerate(zip(z["voice"], z["held"]))]
                else:
                    log.info("%s is for other sentences, voices or symbols: phonemising again", cache)
        except (OSError, ValueError, KeyError) as exc:
            log.warning("unreadable %s (%s): phonemising again", cache, exc)
    if rows is None:
        log.info("phonemising %d sentences in %s", len(sentences), ", ".join(cfg.text_voices))
        rows = phonemize_sentences(sentences, cfg.text_voices, table, progress=cfg.progress)
        lengths = [r[0].size for r in rows]
        tmp = cache.with_name(cache.name + ".tmp.npz")
        np.savez(tmp, meta=np.array(json.dumps(meta)),
                 ids=np.concatenate([r[0] for r in rows] or [np.zeros(0, np.int64)]),
                 offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                 voice=np.array([r[1] for r in rows], np.int64), held=np.array([r[2] for r in rows], bool))
        os.replace(tmp, cache)
    symbols = table.symbols
    train, held = [], []
    for ids, _, is_held in rows:
        if ids.size > cfg.max_tokens:
            continue
        seq = Example(ids, corpus_global_mask([symbols[i] for i in ids]))
        (held if is_held else train).append(seq)
    return train, held


# ----------------------------------------------------------------------------- evaluation
def _forward_loss(model: ReplacedTokenDetector, batch: dict[str, torch.Tensor], cfg: PretrainConfig):
    out = model(batch["ids"], batch["is_global"], batch["padding_mask"], audio=batch["audio"],
                has_audio=batch["has_audio"])
    return out, model.loss(out, batch, text_weight=cfg.text_weight, audio_weight=cfg.audio_weight,
                           mlm_weight=cfg.mlm_weight)


@torch.no_grad()
def evaluate_pretrain(model: ReplacedTokenDetector, seqs: list[Example], gen: BidirectionalTrigram,
                      bank: DonorBank | None, cfg: PretrainConfig, special: np.ndarray) -> dict[str, float]:
    """Held-out losses and detection quality on ``seqs`` with fixed masks (``[seed, 2**40]``).

    ``*_balanced_acc`` is the mean of the accuracy on replaced and on original tokens at logit 0
    (0.5 = chance); ``text_replaced_share`` is the share of masked text positions whose proposal
    differed from the original (how often the generator actually replaced something).
    """
    rng = np.random.default_rng([cfg.seed, _EVAL_SEED])
    device = next(model.parameters()).device
    rows = [corrupt(s, gen, bank, rng, special=special, mask_rate=cfg.mask_rate, temperature=cfg.temperature)
            for s in seqs]
    sums = {"text_rtd": 0.0, "audio_rtd": 0.0, "mlm": 0.0}
    weights = {"text_rtd": 0, "audio_rtd": 0, "mlm": 0}
    hits = {"text": [0, 0, 0, 0], "audio": [0, 0, 0, 0]}  # tp, positives, tn, negatives
    mlm_hit = 0
    was = model.training
    model.eval()
    try:
        for lo in range(0, len(seqs), cfg.batch_size):
            batch = collate(seqs[lo:lo + cfg.batch_size], rows[lo:lo + cfg.batch_size], model.n_mels, device)
            out, loss = _forward_loss(model, batch, cfg)
            real = ~batch["padding_mask"]
            areal = real & batch["has_audio"][:, None]
            mlm_mask = batch["mlm_target"] >= 0
            counts = {"text_rtd": int(real.sum()), "audio_rtd": int(areal.sum()), "mlm": int(mlm_mask.sum())}
            for key, n in counts.items():
                sums[key] += float(getattr(loss, key)) * n
                weights[key] += n
            for kind, logits, mask in (("text", out.text_logits, real), ("audio", out.audio_logits, areal)):
                label = batch[f"{kind}_label"] > 0.5
                pred = logits > 0
                h = hits[kind]
                h[0] += int((pred & label & mask).sum())
                h[1] += int((label & mask).sum())
                h[2] += int((~pred & ~label & mask).sum())
                h[3] += int((~label & mask).sum())
            mlm_hit += int(((out.mlm_logits.argmax(-1) == batch["mlm_target"]) & mlm_mask).sum())
    finally:
        model.train(was)
    result = {k: sums[k] / max(weights[k], 1) for k in sums}
    for kind, (tp, pos, tn, neg) in hits.items():
        if pos and neg:
            result[f"{kind}_balanced_acc"] = 0.5 * (tp / pos + tn / neg)
    result["mlm_acc"] = mlm_hit / max(weights["mlm"], 1)
    n_masked = sum(int(r.text_masked.sum()) for r in rows)
    result["text_replaced_share"] = sum(float(r.text_label.sum()) for r in rows) / max(n_masked, 1)
    result["n"] = len(seqs)
    return result


# ----------------------------------------------------------------------------- training loop
class _Data(NamedTuple):
    table: SymbolTable
    special: np.ndarray
    text_train: list[Example]
    text_held: list[Example]
    bi_train: list[Example]
    bi_held: list[Example]
    gen: BidirectionalTrigram
    bank: DonorBank | None


def _load_data(cfg: PretrainConfig, run_dir: Path) -> _Data:
    """Unimodal: the sentence file's phoneme sequences (``text_voices``, cached). Bimodal: the corpus's
    training utterances, phonemes paired with their log-mel frames aligned by the corpus's exact
    durations (``frames_from_samples``, as the acoustic trainer does). Held-out texts
    (``is_held_out``) are kept out of both and only evaluate. The trigram generator is fitted on
    every training phoneme sequence of both."""
    from wavern.training.corpus import load_corpus

    corpus = load_corpus(cfg.corpus_dir)
    if corpus.symbols is None:
        raise CorpusError(f"corpus {corpus.root} has no symbol table (corpus.json 'symbols')")
    table = SymbolTable.from_list(corpus.symbols)
    special = special_ids(table)
    voices = sorted({r.voice for r in corpus.records if r.voice is not None})
    bi_train = _bimodal(corpus.train, table, voices, cfg.max_tokens, held=False)
    bi_held = _bimodal(corpus.held_out, table, voices, cfg.max_tokens, held=True)
    if bi_train:
        mean, std = _pooled_stats(bi_train)
        bi_train, bi_held = _normalise(bi_train, mean, std), _normalise(bi_held, mean, std)
    text_train, text_held = _text_sequences(cfg, run_dir, table)
    if not text_train and not bi_train:
        raise CorpusError(f"no training sequences: the corpus {cfg.corpus_dir} has no usable utterances and "
                          f"no sentences were phonemised (text_voices={cfg.text_voices})")
    if cfg.bimodal_fraction > 0 and not bi_train:
        raise CorpusError(f"bimodal_fraction is {cfg.bimodal_fraction} but the corpus has no training utterances")
    if cfg.bimodal_fraction < 1 and not text_train:
        raise CorpusError(f"bimodal_fraction is {cfg.bimodal_fraction} but there is no unimodal text "
                          f"(text_voices={cfg.text_voices}); set bimodal_fraction=1 or add voices")
    gen = BidirectionalTrigram.fit((s.ids for s in text_train + bi_train), n_symbols=len(table), k=cfg.ngram_k,
                                   exclude=np.flatnonzero(special))
    bank = DonorBank(bi_train, len(table), special) if bi_train else None
    log.info("pre-training data: %d text-only + %d bimodal training sequences, %d + %d held out",
             len(text_train), len(bi_train), len(text_held), len(bi_held))
    return _Data(table, special, text_train, text_held, bi_train, bi_held, gen, bank)


def _draw(data: _Data, cfg: PretrainConfig, rng: np.random.Generator) -> list[Example]:
    n_bi = int(round(cfg.batch_size * cfg.bimodal_fraction))
    picked = [data.bi_train[i] for i in rng.integers(0, len(data.bi_train), n_bi)] if n_bi else []
    n_text = cfg.batch_size - n_bi
    if n_text:
        picked += [data.text_train[i] for i in rng.integers(0, len(data.text_train), n_text)]
    return picked


def _encoder_config(cfg: PretrainConfig, table: SymbolTable) -> EncoderConfig:
    if cfg.encoder is None:
        return EncoderConfig(n_symbols=len(table))
    if cfg.encoder.n_symbols != len(table):
        raise ParameterError(f"encoder n_symbols {cfg.encoder.n_symbols} differs from the corpus symbol table "
                             f"({len(table)})")
    return cfg.encoder


def _optimizer(cfg: PretrainConfig, model: nn.Module) -> torch.optim.Optimizer:
    if cfg.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), eps=1e-9)
    from wavern.training.yellowfin import YellowFin

    return YellowFin(model.parameters())


def _lr_at(cfg: PretrainConfig, step: int) -> float:
    return cfg.lr * min(1.0, (step + 1) / cfg.warmup_steps) * 0.5 ** (step / cfg.lr_half_life_steps)


_RESUME_KEYS = ("seed", "batch_size", "optimizer", "lr", "warmup_steps", "lr_half_life_steps", "corpus_dir",
                "bimodal_fraction", "mask_rate", "ngram_k", "temperature", "text_weight", "audio_weight", "mlm_weight",
                "text_voices", "sentences_path", "max_tokens")


def _same_run(ckpt: dict, cfg: PretrainConfig, enc_cfg: EncoderConfig, where: Path) -> None:
    if ckpt.get("format") != CHECKPOINT_FORMAT:
        raise ParameterError(f"{where} is not a pre-training checkpoint (format {ckpt.get('format')!r})")
    if EncoderConfig.from_dict(ckpt["encoder_config"]) != enc_cfg:
        raise ParameterError(f"{where} was trained with another encoder config; use a new run_dir or resume=False")
    old, new = ckpt["train_config"], cfg.to_dict()
    for key in _RESUME_KEYS:
        if old.get(key) != new[key]:
            raise ParameterError(f"cannot resume: {key} was {old.get(key)!r}, now {new[key]!r}; "
                                 f"use a new run_dir or resume=False")


def pretrain_encoder(cfg: PretrainConfig) -> PretrainResult:
    """Pre-train (or resume) the phoneme encoder; see the module docstring.

    Under ``torchrun`` every process calls this; only rank 0's result carries the evaluation and
    the encoder path.
    """
    return run_distributed(cfg.device, lambda device, dist_info: _pretrain(cfg, device, dist_info))


def _pretrain(cfg: PretrainConfig, device: torch.device, dist_info: DistInfo) -> PretrainResult:
    from tqdm import tqdm

    main = dist_info.is_main
    if cfg.batch_size < dist_info.world_size:
        raise ParameterError(f"batch_size {cfg.batch_size} cannot be split over {dist_info.world_size} "
                             f"data-parallel processes; use batch_size >= the number of processes")
    if device.type == "cpu":
        torch.set_num_threads(cfg.threads)
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not main:
        barrier(dist_info)  # rank 0 phonemises the sentences and writes the text cache first
    data = _load_data(cfg, run_dir)
    if main:
        barrier(dist_info)
    enc_cfg = _encoder_config(cfg, data.table)
    held = data.bi_held[:cfg.eval_sequences] + data.text_held[:cfg.eval_sequences]

    torch.manual_seed(cfg.seed)
    model = ReplacedTokenDetector(enc_cfg, n_mels=DEFAULT_MEL.n_mels).to(device)
    opt = _optimizer(cfg, model)
    metrics = MetricsLog(run_dir / "metrics.jsonl")
    ckpt_path = run_dir / CHECKPOINT
    step, elapsed_before = 0, 0.0
    if cfg.resume and ckpt_path.is_file():  # every rank reads the same checkpoint
        ckpt = load_torch(ckpt_path, "pre-training checkpoint", map_location=device, weights_only=True)
        _same_run(ckpt, cfg, enc_cfg, ckpt_path)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        step, elapsed_before = int(ckpt["step"]), float(ckpt["elapsed_s"])
        if main:
            metrics.truncate_after(step)
        log.info("resumed from %s at step %d", ckpt_path, step)
    elif main:
        metrics.truncate_after(-1)
        (run_dir / "train_config.json").write_text(json.dumps(cfg.to_dict(), indent=1) + "\n", encoding="utf-8")
        log.info("pre-training %d parameters (encoder %d), device %s, %d process(es)",
                 sum(p.numel() for p in model.parameters()), sum(p.numel() for p in model.encoder.parameters()),
                 device, dist_info.world_size)
    check_same_step(step, dist_info)
    broadcast_parameters(model, dist_info)
    rows = dist_info.rows(cfg.batch_size)  # this rank's share of every global batch

    def save() -> None:
        if main:
            atomic_save({"format": CHECKPOINT_FORMAT, "step": step, "encoder_config": enc_cfg.to_dict(),
                         "train_config": cfg.to_dict(), "model": model.state_dict(), "optimizer": opt.state_dict(),
                         "elapsed_s": elapsed_before + time.monotonic() - t_start}, ckpt_path)

    def evaluate() -> dict[str, float] | None:
        return evaluate_pretrain(model, held, data.gen, data.bank, cfg, data.special) if held else None

    weights = (cfg.text_weight, cfg.audio_weight, cfg.mlm_weight)
    t_start = time.monotonic()
    timer = CheckpointTimer(cfg.checkpoint_every_s)
    last: dict[str, float] = {}
    bar = tqdm(total=cfg.steps, initial=step, disable=not (cfg.progress and main), desc="pretrain", unit="step")
    stopped = False
    try:
        with StopFlag() as stop:
            while step < cfg.steps:
                rng = seed_step(cfg.seed, step, dist_info.rank)
                seqs = _draw(data, cfg, rng)  # the global batch; every rank corrupts all of it (same rng stream)
                corrupted = [corrupt(s, data.gen, data.bank, rng, special=data.special, mask_rate=cfg.mask_rate,
                                     temperature=cfg.temperature) for s in seqs]
                if dist_info.enabled:
                    seqs, corrupted = [seqs[k] for k in rows], [corrupted[k] for k in rows]
                batch = collate(seqs, corrupted, model.n_mels, device)
                model.train()
                _, loss = _forward_loss(model, batch, cfg)
                terms = (loss.text_rtd, loss.audio_rtd, loss.mlm)
                if dist_info.enabled:  # weight each mean by this rank's share of its global count
                    real = ~batch["padding_mask"]
                    counts = [float(real.sum()), float((real & batch["has_audio"][:, None]).sum()),
                              float((batch["mlm_target"] >= 0).sum())]
                    w, bad = loss_weights_and_any(counts, not torch.isfinite(loss.total), dist_info)
                    objective = sum(wt * wc * term for wt, wc, term in zip(weights, w, terms))
                    finite = not bad  # on every rank: one rank alone leaving hangs the others
                else:
                    w = [1.0, 1.0, 1.0]
                    objective = loss.total
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
                *sums, signalled, over_time = all_sum(
                    [wc * float(term.detach()) for wc, term in zip(w, terms)]
                    + [float(stop.requested is not None), float(over_time)], dist_info)
                means = [v / dist_info.world_size for v in sums]
                total = float(loss.total.detach()) if not dist_info.enabled else \
                    sum(wt * m for wt, m in zip(weights, means))
                last = {"total": total, "text_rtd": means[0], "audio_rtd": means[1], "mlm": means[2]}
                bar.update(1)
                if main and (step % cfg.log_every == 0 or step == cfg.steps):
                    bar.set_postfix(text=f"{last['text_rtd']:.3f}", audio=f"{last['audio_rtd']:.3f}",
                                    mlm=f"{last['mlm']:.2f}")
                    metrics.write({"kind": "train", "step": step, **last, "lr": float(opt.param_groups[0]["lr"]),
                                   "elapsed_s": round(elapsed_before + time.monotonic() - t_start, 1)})
                if main and cfg.eval_every and step % cfg.eval_every == 0 and step < cfg.steps and held:
                    metrics.write({"kind": "eval", "step": step, **evaluate()})
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
    evaluation, encoder_path = None, None
    if main and not stopped and cfg.export:
        evaluation = evaluate()
        if evaluation is not None:
            metrics.write({"kind": "eval", "step": step, **evaluation})
        encoder_path = export_encoder(model, run_dir / ENCODER_FILE, symbols=data.table.to_list())
    metrics.close()
    barrier(dist_info)  # every rank returns once rank 0's files are written
    return PretrainResult(step, not stopped and step >= cfg.steps, last, evaluation, run_dir, encoder_path)
