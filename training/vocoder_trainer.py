"""Train the WaveRNN vocoder on a wavern corpus: fast on the CPU, resumable bit for bit.

>>> from wavern.training.vocoder_trainer import VocoderTrainConfig, train_vocoder
>>> train_vocoder(VocoderTrainConfig(corpus_dir="data/corpus", run_dir="runs/vocoder"))   # doctest: +SKIP

Or from a shell (``--resume`` continues where the last run stopped; torchrun runs it data-parallel,
``--batch`` the global batch)::

    python -m wavern.training.vocoder_trainer --corpus data/corpus --run runs/vocoder --resume
    torchrun --standalone --nproc-per-node 2 -m wavern.training.vocoder_trainer ... --threads 1

One step: ``batch_size`` random segments of ``segment_frames`` frames (step ``t`` draws from
``default_rng([seed, t])``), teacher-forced ``CE(coarse) + CE(fine)`` (with ``distill_from``, mixed
with the teacher's distributions), gradient clipping, the optimiser, then the block pruner. The run
folder holds ``checkpoint.pt``, ``compact.pt`` (:mod:`.vocoder_checkpoint`), ``metrics.jsonl`` and, at
the end, ``vocoder.safetensors``. The options: :class:`~.vocoder_options.VocoderTrainConfig`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from wavern.dsp import mulaw_log_slope
from wavern.errors import ParameterError
from wavern.training.common import CheckpointTimer, MetricsLog, StopFlag, atomic_save, load_torch, seed_step
from wavern.training.distributed import (all_sum, any_rank, average_gradients, barrier, broadcast_parameters,
                                         check_same_step, loss_weights_and_any, setup_distributed, shutdown)
from wavern.training.vocoder_checkpoint import (CHECKPOINT, CHECKPOINT_FORMAT, COMPACT, COMPACT_FORMAT,
                                                TEACHER_FREE_FIELDS, load_teacher)
from wavern.training.vocoder_data import VocoderData, build_cache, build_phase, build_pitch
from wavern.training.vocoder_options import OPTIMIZERS, SCHEDULE_FIELDS, VocoderTrainConfig
from wavern.training.vocoder_options import parse_args as _parse
from wavern.vocoder.config import VocoderConfig
from wavern.vocoder.export import export_vocoder
from wavern.vocoder.model import WaveRNN
from wavern.vocoder.pruning import BlockPruner, sparsity_at

__all__ = ["VocoderTrainConfig", "VocoderTrainer", "train_vocoder", "bf16_supported", "keep_freed_memory", "lr_at",
           "OPTIMIZERS",
           # from vocoder_options and vocoder_checkpoint, importable here as before
           "SCHEDULE_FIELDS", "CHECKPOINT", "COMPACT", "TEACHER_FREE_FIELDS", "load_teacher"]

log = logging.getLogger(__name__)


def bf16_supported() -> bool:
    """True when this CPU has native bfloat16 dot products (AVX512-BF16 or AMX-BF16)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def keep_freed_memory(enable: bool = True) -> bool:
    """Make glibc keep freed memory in the process instead of returning it to the OS.

    A training step allocates and frees tensors of tens to hundreds of MB; glibc serves those
    with ``mmap`` and unmaps them on free, so the next step page-faults every page afresh.
    Measured (H 384, batch 64, 1 thread): 1.0 M page faults and 1.8 s of system time per step,
    3.2 s -> 1.5 s per step with this on. Costs resident memory (the peak stays mapped).
    ``enable=False`` restores glibc's defaults. Returns False where mallopt is unavailable.
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        mallopt = libc.mallopt if libc is not None else None
    except (OSError, AttributeError):
        return False
    if mallopt is None:
        return False
    m_trim_threshold, m_mmap_max = -1, -4
    if enable:
        ok = mallopt(m_mmap_max, 0) and mallopt(m_trim_threshold, 2**31 - 1)
    else:
        ok = mallopt(m_mmap_max, 65536) and mallopt(m_trim_threshold, 128 * 1024)
        libc.malloc_trim(0)
    return bool(ok)


def noisy_inputs(audio: np.ndarray, rng: np.random.Generator, max_std: float) -> np.ndarray:
    """A copy of int16 ``audio`` (B, N) with Gaussian noise, its std drawn per row from U(0, max_std).

    Fed back as the previous-sample inputs while the clean samples stay the targets, so the
    model learns to steer back after the sampling errors it makes when it runs free.
    """
    std = rng.uniform(0.0, max_std, size=(audio.shape[0], 1))
    noise = np.rint(rng.standard_normal(audio.shape) * std)
    return np.clip(audio.astype(np.float64) + noise, -32768, 32767).astype(np.int16)


def lr_at(step: int, cfg: VocoderTrainConfig) -> float:
    """Learning rate of step ``step`` (0-based): linear warm-up, then exponential decay with a floor."""
    if step < cfg.warmup_steps:
        return cfg.lr * (0.1 + 0.9 * step / cfg.warmup_steps)
    return max(cfg.lr_min, cfg.lr * 0.5 ** (step / cfg.lr_half_life_steps))


def _make_optimizer(name: str, params, lr: float) -> torch.optim.Optimizer:
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    from wavern.training.yellowfin import YellowFin  # lazily: only this path needs it

    return YellowFin(params)


def _insert_zero_columns(t: torch.Tensor, at: int, k: int) -> torch.Tensor:
    """``t`` with ``k`` zero columns (dim 1) inserted before column ``at``."""
    zeros = torch.zeros(t.shape[0], k, *t.shape[2:], dtype=t.dtype)
    return torch.cat([t[:, :at], zeros, t[:, at:]], dim=1)


class VocoderTrainer:
    """Model, optimiser, pruner and data of one run; :func:`train_vocoder` drives it."""

    def __init__(self, cfg: VocoderTrainConfig) -> None:
        self.cfg = cfg
        self.run_dir = Path(cfg.run_dir)
        self.device, self.dist = setup_distributed(cfg.device)  # torchrun: join the data-parallel group
        torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)  # the initial weights
        self.model = WaveRNN(cfg.vocoder).to(self.device)
        if self.device.type == "cuda":
            self.model.gru_impl = "nn"  # cuDNN's GRU beats a Python time loop there
        self.optimizer = _make_optimizer(cfg.optimizer, self.model.parameters(), cfg.lr)
        self.pruner = BlockPruner(self.model, cfg.vocoder)
        self.step = 0
        self.wall_s = 0.0  # training wall time over all sessions
        self.bf16 = self._resolve_bf16(cfg.bf16)
        self.mel_pad = 2 + cfg.vocoder.cond_blocks  # the conditioning net's receptive field
        self.data: VocoderData | None = None
        self._eval_batches: list | None = None
        #: Optional ``step -> lr`` that replaces :func:`lr_at` (``training.vocoder_gpu`` decays by wall time).
        self.lr_schedule: Callable[[int], float] | None = None
        #: The distillation teacher (``cfg.distill_from``), frozen, or None.
        self.teacher = load_teacher(cfg.distill_from, cfg.vocoder).to(self.device) if cfg.distill_from else None

    def _resolve_bf16(self, mode: str) -> bool:
        if mode == "off":
            return False
        if self.device.type == "cuda":
            return torch.cuda.is_bf16_supported()
        supported = bf16_supported()
        if mode == "on" and not supported:
            log.warning("bf16 requested but this CPU has no native bf16 dot products; training in float32")
        return supported

    # ---------------------------------------------------------------- data
    def open_data(self) -> VocoderData:
        cache = Path(self.cfg.cache_dir) if self.cfg.cache_dir else self.run_dir / "cache"
        if not self.dist.is_main:
            barrier(self.dist)  # rank 0 builds (or checks) the cache first
        build_cache(self.cfg.corpus_dir, cache, self.cfg.vocoder.mel)
        if self.cfg.vocoder.pitch:
            build_pitch(cache, self.cfg.vocoder.mel)
        if self.cfg.vocoder.phase_input:
            build_phase(cache, self.cfg.vocoder.mel, self.cfg.vocoder.lpc_order)
        if self.dist.is_main:
            barrier(self.dist)
        self.data = VocoderData.open(cache, hop=self.cfg.vocoder.hop_length)
        return self.data

    def _to_tensors(self, batch) -> tuple[torch.Tensor, ...]:
        """mel, audio, prev, past, lpc (None without LPC), phase (None without the phase input) on
        the training device."""
        return tuple(None if a is None else torch.from_numpy(a).to(self.device) for a in batch)

    def _batch(self, rng: np.random.Generator, *, held_out: bool = False, gta_prob: float = 0.0):
        cfg = self.cfg
        return self.data.batch(rng, batch_size=cfg.batch_size, segment_frames=cfg.segment_frames,
                               mel_pad=self.mel_pad, held_out=held_out, gta_prob=gta_prob,
                               lpc_order=cfg.vocoder.lpc_order, mel_config=cfg.vocoder.mel,
                               pitch=cfg.vocoder.pitch, ltp=cfg.vocoder.ltp, phase=cfg.vocoder.phase_input > 0)

    def _autocast(self):
        if not self.bf16:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    # ---------------------------------------------------------------- one step
    def train_step(self) -> dict[str, float]:
        """One optimiser step at ``self.step``; returns its losses; advances ``self.step``."""
        cfg = self.cfg
        rng = seed_step(cfg.seed, self.step, self.dist.rank)
        batch = self._batch(rng, gta_prob=cfg.gta_prob)
        noisy = noisy_inputs(batch.audio, rng, cfg.input_noise) if cfg.input_noise > 0 else None
        fade = (1.0 - rng.uniform(0.0, cfg.period_input_fade, size=batch.audio.shape[0])
                if cfg.period_input_fade > 0 else None)  # drawn only then: other runs draw as before
        if cfg.period_input_drop > 0:
            drop = rng.random(batch.audio.shape[0]) < cfg.period_input_drop
            fade = np.where(drop, 0.0, 1.0 if fade is None else fade)
        own = None
        if cfg.period_input_self > 0:  # drawn only then, after the others
            own = rng.random(batch.audio.shape[0]) < cfg.period_input_self
            draw_seed = int(rng.integers(2**62))
        if self.dist.enabled:  # this rank's rows of the global batch
            rows = self.dist.rows(cfg.batch_size)
            batch = type(batch)(*(None if a is None else a[rows] for a in batch))
            noisy = None if noisy is None else noisy[rows]
            fade = None if fade is None else fade[rows]
            own = None if own is None else own[rows]
        mel, audio, prev, past, lpc, phase = self._to_tensors(batch)
        inputs = None if noisy is None else torch.from_numpy(noisy).to(self.device)
        period_scale = None if fade is None else torch.from_numpy(fade).to(self.device)
        self.model.train()
        period_draws = None
        if own is not None and own.any():
            with self._autocast():
                drawn = self.model.draw(mel, audio, generator=torch.Generator(self.device).manual_seed(draw_seed),
                                        prev_audio=prev, mel_pad=self.mel_pad, past=past, lpc=lpc, phase=phase)
            true = self.model.targets(audio, prev_audio=prev, past=past, lpc=lpc)
            period_draws = torch.where(torch.from_numpy(own).to(self.device)[:, None], drawn, true)
        lr = self.lr_schedule(self.step) if self.lr_schedule is not None else lr_at(self.step, cfg)
        if cfg.optimizer == "adam":
            for group in self.optimizer.param_groups:
                group["lr"] = lr
        with self._autocast():
            soft = None
            if self.teacher is not None and cfg.distill_weight > 0:  # the same inputs, so the same situation
                with torch.no_grad():
                    soft = self.teacher.logits(mel, audio, prev_audio=prev, mel_pad=self.mel_pad, input_audio=inputs,
                                               past=past, lpc=lpc, period_scale=period_scale, phase=phase,
                                               period_draws=period_draws)
            loss = self.model.loss(mel, audio, prev_audio=prev, mel_pad=self.mel_pad, input_audio=inputs,
                                   past=past, lpc=lpc, period_scale=period_scale, phase=phase,
                                   period_draws=period_draws, soft_logits=soft, soft_weight=cfg.distill_weight)
        # 1.0 alone; else this rank's share of the rows. A non-finite loss on any rank stops every
        # rank before the step (the weights and the last checkpoint stay as they were).
        (w,), bad = loss_weights_and_any([audio.shape[0]], not torch.isfinite(loss.total), self.dist)
        if bad:
            raise FloatingPointError(f"vocoder loss became {float(loss.total)} at step {self.step} (on this rank or "
                                     f"another); the last checkpoint is kept: resume it with a lower lr")
        self.optimizer.zero_grad(set_to_none=True)
        (loss.objective * w if self.dist.enabled else loss.objective).backward()
        average_gradients(self.model, self.dist)
        grad_norm = float("nan")
        if cfg.optimizer == "adam" and cfg.grad_clip > 0:
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip))
        self.optimizer.step()
        self.step += 1
        self.pruner.step(self.step)
        parts = [loss.total, loss.coarse, loss.fine] + ([] if loss.soft is None else [loss.soft])
        means = [v / self.dist.world_size for v in all_sum([w * float(t.detach()) for t in parts], self.dist)]
        out = {"loss": means[0], "coarse": means[1], "fine": means[2], "grad_norm": grad_norm, "lr": lr}
        if loss.soft is not None:  # cross-entropy against the teacher (the global batch's mean)
            out["soft"] = means[3]
        return out

    def eval_batches(self) -> list:
        """The fixed held-out segments :meth:`evaluate` measures on, drawn from
        ``default_rng([seed, 2**32 - 1])`` on first use and the same from then on."""
        if self._eval_batches is None:
            rng = np.random.default_rng([self.cfg.seed, 2**32 - 1])
            held = self.data.split(True).size > 0
            self._eval_batches = [self._batch(rng, held_out=held) for _ in range(self.cfg.eval_batches)]
            self._eval_slope = 0.0
            if self.cfg.vocoder.excitation == "mulaw":
                slopes = []
                for b in self._eval_batches:
                    _, audio, _, past, lpc, _ = self._to_tensors(b)
                    slopes.append(mulaw_log_slope(self.model.targets(audio, past=past, lpc=lpc).cpu().numpy()).ravel())
                self._eval_slope = float(np.mean(np.concatenate(slopes)))
        return self._eval_batches

    @torch.no_grad()
    def evaluate(self, model=None) -> dict[str, float]:
        """Mean loss on the fixed held-out segments (:meth:`eval_batches`).

        ``model``: another vocoder of this run's code and conditioning (a pruned or shrunk copy,
        say) to measure on the same segments; by default the run's own.

        ``eval_sample_nll``: the loss in nats per *sample value*, comparable between runs of any
        excitation code: the loss itself, or for a mu-law code ``loss - E[ln dy/dx]`` over the
        batches' targets (:func:`wavern.dsp.mulaw_log_slope`).
        """
        batches = self.eval_batches()
        model = (self.model if model is None else model).eval()
        total = coarse = fine = 0.0
        for batch in batches:
            mel, audio, prev, past, lpc, phase = self._to_tensors(batch)
            with self._autocast():
                loss = model.loss(mel, audio, prev_audio=prev, mel_pad=self.mel_pad, past=past, lpc=lpc,
                                  phase=phase)
            total, coarse, fine = total + float(loss.total), coarse + float(loss.coarse), fine + float(loss.fine)
        k = max(1, len(batches))
        return {"eval_loss": total / k, "eval_coarse": coarse / k, "eval_fine": fine / k,
                "eval_sample_nll": total / k - self._eval_slope}

    # ---------------------------------------------------------------- checkpoints
    def _regrow(self, sparsity: float, source) -> None:
        """A denser model than the checkpoint's, pruning done: revive the pruned blocks whose weights
        have the largest mean squared gradient (Adam's second moment) until the masks reach
        ``sparsity`` (:meth:`BlockPruner.regrow`). The revived weights start at zero: the same function."""
        scores = {}
        for name, p in self.pruner.params.items():
            v = self.optimizer.state.get(p, {}).get("exp_avg_sq")
            if v is None:
                raise ParameterError(f"{source}: no optimiser moments for {name}, so there is nothing to rank the "
                                     "pruned blocks by; a denser model needs a checkpoint with Adam's state")
            scores[name] = v
        before = self.pruner.density()
        self.pruner.regrow(sparsity, scores)
        log.info("%s: regrew pruned blocks, density %.4f -> %.4f", source, before, self.pruner.density())

    def state(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT, "version": 1, "step": self.step, "wall_s": self.wall_s,
            "vocoder_config": self.cfg.vocoder.to_dict(), "train_config": self.cfg.to_dict(), "bf16": self.bf16,
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "pruner": self.pruner.state_dict(),
            "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()},
        }

    def save(self, path: str | Path | None = None) -> Path:
        """Full checkpoint (bit-exact resume), written atomically."""
        return atomic_save(self.state(), path or self.run_dir / CHECKPOINT)

    def save_compact(self, path: str | Path | None = None) -> Path:
        """Small checkpoint for git: float16 weights, bfloat16 Adam moments, masks as block bits, step, config.

        bfloat16 (not float16) for the moments: Adam's second moments are often below float16's
        smallest subnormal (6e-8) and would round to 0, blowing up the first update after loading.
        """
        opt = self.optimizer.state_dict()
        opt_state = {k: {n: (v.to(torch.bfloat16) if torch.is_tensor(v) and v.is_floating_point() and v.ndim else v)
                         for n, v in s.items()} for k, s in opt["state"].items()}
        br, bc = self.cfg.vocoder.block_shape
        masks = {n: m[::br, ::bc].clone() for n, m in self.pruner.masks.items()}  # one bit per block
        compact = {
            "format": COMPACT_FORMAT, "version": 1, "step": self.step, "wall_s": self.wall_s,
            "vocoder_config": self.cfg.vocoder.to_dict(), "train_config": self.cfg.to_dict(),
            "model": {k: v.half() if v.is_floating_point() else v for k, v in self.model.state_dict().items()},
            "optimizer": {"state": opt_state, "param_groups": opt["param_groups"]},
            "pruner": {"sparsity": self.pruner.sparsity, "block_masks": masks},
        }
        return atomic_save(compact, path or self.run_dir / COMPACT)

    def load(self, path: str | Path, *, exact: bool = True) -> None:
        """Restore from a full (``exact``: also RNG states) or compact checkpoint, or a voice folder
        (:meth:`load_voice`)."""
        if Path(path).is_dir():
            return self.load_voice(path)
        ck = load_torch(path, "vocoder checkpoint", map_location="cpu", weights_only=False)
        fmt = ck.get("format") if isinstance(ck, dict) else None
        if fmt not in (CHECKPOINT_FORMAT, COMPACT_FORMAT):
            raise ParameterError(f"{path} is not a vocoder checkpoint (format {fmt!r})")
        saved = VocoderConfig.from_dict(ck["vocoder_config"])
        model_state = ck["model"]
        want = self.cfg.vocoder
        coding = {"pitch": want.pitch, "excitation": want.excitation, "ltp": want.ltp,
                  "lpc_prediction_input": want.lpc_prediction_input, "ltp_input": want.ltp_input,
                  "ltp_input_taps": want.ltp_input_taps, "phase_input": want.phase_input,
                  **{k: getattr(want, k) for k in SCHEDULE_FIELDS}}
        try:
            recoded = dataclasses.replace(saved, **coding)
        except ParameterError:  # saved differs elsewhere too (e.g. no LPC): the check below reports it
            recoded = None
        widen: list[tuple[str, int, int]] = []  # (weight, column where zero columns go in, how many)
        if not exact and saved != want and not (saved.pitch and not want.pitch) \
                and set(saved.input_names) <= set(want.input_names) and recoded == want:
            # the same network goes on with another excitation code (its heads re-learn), and new
            # inputs (pitch features; the prediction) come in with zero weights: the same function
            if want.pitch and not saved.pitch:
                widen.append(("cond.conv_in.weight", saved.n_features, want.n_features - saved.n_features))
            for col, name in enumerate(want.input_names):  # new sample inputs (p_t, r_{t-T}) in their places
                if name not in saved.input_names:
                    widen.append(("gru.weight_ih_l0", col, 1))
            model_state = dict(model_state)
            for name, at, k in widen:  # in column order, so each lands where the wider model has it
                model_state[name] = _insert_zero_columns(model_state[name], at, k)
            log.info("%s: continuing with %s (was %s)", path, coding,
                     {k: getattr(saved, k) for k in coding})
            saved = want
        if saved != self.cfg.vocoder:
            diff = {k: (v, getattr(self.cfg.vocoder, k)) for k, v in dataclasses.asdict(saved).items()
                    if getattr(self.cfg.vocoder, k) != v}
            raise ParameterError(f"{path} was trained with a different vocoder config (saved, requested): {diff}; "
                                 "pass the same model options to resume")
        self.model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in model_state.items()})
        opt = ck["optimizer"]
        if fmt == COMPACT_FORMAT:
            opt = {"state": {k: {n: (v.float() if torch.is_tensor(v) and v.is_floating_point() and v.ndim else v)
                                 for n, v in s.items()} for k, s in opt["state"].items()},
                   "param_groups": opt["param_groups"]}
            br, bc = self.cfg.vocoder.block_shape
            masks = {n: m.repeat_interleave(br, 0).repeat_interleave(bc, 1)
                     for n, m in ck["pruner"]["block_masks"].items()}
            self.pruner.load_state_dict({"sparsity": ck["pruner"]["sparsity"], "masks": masks})
        else:
            self.pruner.load_state_dict(ck["pruner"])
        names = [n for n, _ in self.model.named_parameters()]
        for name, at, k in widen:  # Adam's moments of a widened weight: zeros for the new columns
            moments = opt["state"].get(names.index(name), {})
            for key in ("exp_avg", "exp_avg_sq"):
                if key in moments:
                    moments[key] = _insert_zero_columns(moments[key], at, k)
        try:
            self.optimizer.load_state_dict(opt)
        except (ValueError, KeyError) as exc:
            log.warning("optimiser state in %s does not fit (%s); starting the optimiser afresh", path, exc)
        self.step = int(ck["step"])
        if not exact and self.pruner.sparsity > 1.0 - want.target_density + 1e-9 \
                and self.step >= want.prune_start_step + want.prune_ramp_steps:
            self._regrow(1.0 - want.target_density, path)
        self.pruner.apply()
        self.wall_s = float(ck.get("wall_s", 0.0))
        if fmt == CHECKPOINT_FORMAT:
            self.bf16 = bool(ck["bf16"])  # keep the precision the run started with: bit-exact resume
            if exact:
                torch.set_rng_state(ck["rng"]["torch"])
                np.random.set_state(ck["rng"]["numpy"])
                random.setstate(ck["rng"]["python"])

    def load_voice(self, voice_dir: str | Path) -> None:
        """Start from the vocoder of a voice folder (``voice.json`` + ``vocoder.safetensors``): its float16
        weights, its pruning pattern (every block that holds a non-zero weight), the step its provenance
        records; a fresh optimiser (the voice has no moments). The vocoder config must be this run's."""
        from wavern.vocoder.export import load_vocoder

        voice_dir = Path(voice_dir)
        try:
            meta = json.loads((voice_dir / "voice.json").read_text())
            saved = VocoderConfig.from_dict(meta["vocoder"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ParameterError(f"{voice_dir} is not a voice folder with a vocoder config ({exc})") from exc
        # the density and the pruning schedule may change (a sparser fine-tune, VocoderTrainer.load)
        schedule = {k: getattr(self.cfg.vocoder, k) for k in SCHEDULE_FIELDS}
        if dataclasses.replace(saved, **schedule) != self.cfg.vocoder:
            diff = {k: (v, getattr(self.cfg.vocoder, k)) for k, v in dataclasses.asdict(saved).items()
                    if getattr(self.cfg.vocoder, k) != v}
            raise ParameterError(f"{voice_dir}'s vocoder has a different config (voice, requested): {diff}; "
                                 "pass the voice's model options")
        model = load_vocoder(voice_dir / "vocoder.safetensors", saved)
        self.model.load_state_dict(model.state_dict())
        br, bc = saved.block_shape
        masks = {}
        for name, p in self.pruner.params.items():  # a block is kept where any of its weights is non-zero
            w = p.detach()
            kept = (w != 0).reshape(w.shape[0] // br, br, w.shape[1] // bc, bc).any(dim=3).any(dim=1)
            masks[name] = kept.repeat_interleave(br, 0).repeat_interleave(bc, 1)
        kept_share = float(sum(m.sum() for m in masks.values())) / sum(m.numel() for m in masks.values())
        self.step = int(meta.get("provenance", {}).get("vocoder", {}).get("step", 0))
        # the sparsity the voice's own schedule had reached at this step: the masks stay as they are
        # (a sparser target prunes on from there once this run's schedule passes it, BlockPruner.step)
        reached = sparsity_at(self.step, target=1.0 - saved.target_density, start=saved.prune_start_step,
                              ramp=saved.prune_ramp_steps)
        self.pruner.load_state_dict({"sparsity": reached, "masks": masks})
        self.pruner.apply()
        log.info("%s: the voice's vocoder at step %d, %.3f of the pruned weights' blocks kept, optimiser afresh",
                 voice_dir, self.step, kept_share)


def train_vocoder(cfg: VocoderTrainConfig, *, on_step: Callable[[VocoderTrainer, dict], None] | None = None
                  ) -> VocoderTrainer:
    """Run (or resume) a vocoder training run until ``cfg.steps`` or a stop signal.

    Args:
        cfg: the run's configuration.
        on_step: called after every step with the trainer and the step's losses (tests, hooks).

    Returns:
        The trainer, at its final step (its ``step`` tells whether it finished).
    """
    keep_freed_memory()  # 1.5-2x faster CPU steps; see its docstring
    trainer = VocoderTrainer(cfg)
    try:
        _run(trainer, cfg, on_step)
    except BaseException:
        shutdown(trainer.dist, wait=False)  # no barrier: the other ranks may never reach it
        raise
    shutdown(trainer.dist)
    return trainer


def _run(trainer: VocoderTrainer, cfg: VocoderTrainConfig,
         on_step: Callable[[VocoderTrainer, dict], None] | None) -> None:
    main = trainer.dist.is_main
    run_dir = trainer.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    ck_path = run_dir / CHECKPOINT
    if ck_path.is_file() and not cfg.resume and not cfg.fresh:
        raise ParameterError(f"{run_dir} already holds a run ({CHECKPOINT}); resume it (--resume) or start it "
                             f"over (--fresh: its checkpoint is replaced at the first save)")
    if cfg.resume and ck_path.is_file():
        trainer.load(ck_path)
        log.info("resumed %s at step %d", ck_path, trainer.step)
    elif cfg.init_from:
        trainer.load(cfg.init_from, exact=False)
        log.info("initialised from %s at step %d", cfg.init_from, trainer.step)
    check_same_step(trainer.step, trainer.dist)
    broadcast_parameters(trainer.model, trainer.dist)
    metrics = MetricsLog(run_dir / "metrics.jsonl")
    if main:
        (run_dir / "train_config.json").write_text(json.dumps(cfg.to_dict(), indent=2))
        metrics.truncate_after(trainer.step)
    data = trainer.open_data()
    log.info("vocoder training: %d train / %d held-out utterances, bf16=%s, threads=%d, device=%s",
             data.split(False).size, data.split(True).size, trainer.bf16, cfg.threads, trainer.device)
    samples_per_step = cfg.batch_size * cfg.segment_frames * cfg.vocoder.hop_length
    timer = CheckpointTimer(cfg.checkpoint_interval_s)
    bar = None
    if cfg.progress and main:
        from tqdm import tqdm

        bar = tqdm(total=cfg.steps, initial=trainer.step, unit="step", dynamic_ncols=True,
                   mininterval=1.0 if sys.stderr.isatty() else 60.0)
    window: list[dict] = []
    t_window = time.perf_counter()
    stop_all = False  # a stop request on any rank, agreed after every step
    with StopFlag() as stop:
        while trainer.step < cfg.steps and not stop_all:
            t0 = time.perf_counter()
            row = trainer.train_step()
            trainer.wall_s += time.perf_counter() - t0
            window.append(row)
            if on_step is not None:
                on_step(trainer, row)
            step = trainer.step
            if step % cfg.log_every_steps == 0 or step == cfg.steps:
                dt = time.perf_counter() - t_window
                mean = {k: float(np.mean([r[k] for r in window])) for k in ("loss", "coarse", "fine", "soft")
                        if k in row}
                if cfg.optimizer == "adam":
                    mean["grad_norm"] = float(np.mean([r["grad_norm"] for r in window]))
                out = {"kind": "train", "step": step, **mean, "lr": row["lr"], "density": trainer.pruner.density(),
                       "steps_per_s": len(window) / dt, "samples_per_s": len(window) * samples_per_step / dt,
                       "wall_s": round(trainer.wall_s, 2)}
                if main:
                    metrics.write(out)
                if bar is not None:
                    bar.set_postfix(loss=f"{mean['loss']:.3f}", c=f"{mean['coarse']:.2f}", f=f"{mean['fine']:.2f}",
                                    sps=f"{out['samples_per_s']:.0f}", refresh=False)
                window, t_window = [], time.perf_counter()
            if bar is not None:
                bar.update(1)
            if main and cfg.eval_every_steps and step % cfg.eval_every_steps == 0:
                ev = trainer.evaluate()
                metrics.write({"kind": "eval", "step": step, **ev})
                log.info("step %d: held-out loss %.4f (coarse %.3f, fine %.3f; %.4f nats per sample value)", step,
                         ev["eval_loss"], ev["eval_coarse"], ev["eval_fine"], ev["eval_sample_nll"])
            if timer.due() and main:
                trainer.save()
                trainer.save_compact()
                timer.reset()
            stop_all = any_rank(stop.requested is not None, trainer.dist)
        if bar is not None:
            bar.close()
        if main:
            trainer.save()
            trainer.save_compact()
        if trainer.step >= cfg.steps and main:
            if metrics.eval_at(trainer.step) is None:  # not when the last step was an eval step, or a rerun
                metrics.write({"kind": "eval", "step": trainer.step, **trainer.evaluate()})
            if cfg.export_at_end and cfg.vocoder.n_inputs == 3:  # the engine cannot run a p_t input yet
                export_vocoder(trainer.model, run_dir / "vocoder.safetensors")
                (run_dir / "vocoder_config.json").write_text(json.dumps(cfg.vocoder.to_dict(), indent=2))
        elif trainer.step < cfg.steps:
            log.info("stopped at step %d (signal %s); checkpoint saved, resume with resume=True",
                     trainer.step, stop.requested)
    metrics.close()
    barrier(trainer.dist)  # every rank returns once rank 0's files are written



def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        cfg = _parse(argv)
        trainer = train_vocoder(cfg)
    except ParameterError as exc:
        print(f"vocoder_trainer: error: {exc}", file=sys.stderr)
        return 2
    return 0 if trainer.step >= cfg.steps else 3


if __name__ == "__main__":
    sys.exit(main())
