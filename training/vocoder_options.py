"""What a vocoder run is set to: :class:`VocoderTrainConfig` and the command line that fills it
(``python -m wavern.training.vocoder_trainer --help``)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from wavern.errors import ParameterError
from wavern.vocoder.config import VocoderConfig

__all__ = ["VocoderTrainConfig", "SCHEDULE_FIELDS", "OPTIMIZERS", "parse_args"]

#: VocoderConfig fields a run started with ``init_from`` may change: the density and its schedule.
SCHEDULE_FIELDS = ("target_density", "prune_start_step", "prune_ramp_steps", "prune_every_steps")

OPTIMIZERS = ("adam", "yellowfin")


@dataclasses.dataclass(frozen=True)
class VocoderTrainConfig:
    """How to train; what the vocoder *is* lives in ``vocoder`` (a :class:`VocoderConfig`)."""

    corpus_dir: str = "data/corpus"
    run_dir: str = "runs/vocoder"
    vocoder: VocoderConfig = dataclasses.field(default_factory=VocoderConfig)
    steps: int = 200_000  # total optimiser steps; a resumed run continues to this
    batch_size: int = 32  # segments per step; early on, steps matter more than batch (REFERENCES §7)
    segment_frames: int = 4  # frames per segment: 4 x 256 = 1024 samples
    lr: float = 1e-3  # Adam peak learning rate
    warmup_steps: int = 100  # linear warm-up from lr / 10
    lr_half_life_steps: int = 40_000  # then lr * 0.5 ** (step / half_life), never below lr_min
    lr_min: float = 5e-5
    optimizer: str = "adam"  # one of OPTIMIZERS
    grad_clip: float = 1.0  # global grad-norm clip (Adam)
    # largest std of the noise on the fed-back samples (int16 units; with LPC on the fed-back
    # excitation codes, so mu-law code units with excitation "mulaw"); 0: teacher forcing
    input_noise: float = 0.0
    # with a period input (ltp_input): each segment's period input multiplied by U(1 - fade, 1),
    # targets clean, so a weak pulse of the model's own still calls a full one (0: off)
    period_input_fade: float = 0.0
    # with a period input: the share of segments whose period input is dropped altogether (after the
    # fade), so the model learns to place a pulse without one (from its phase input, if it has one)
    period_input_drop: float = 0.0
    # with a period input and the linear code: the share of segments whose residuals one period back,
    # where the period reaches into the segment, are the model's own teacher-forced draws, in the
    # period input and the long-term prediction, targets leading back to the true signal (WaveRNN.hidden's
    # period_draws): free running's situation after a pulse of its own, one period deep (0: off)
    period_input_self: float = 0.0
    gta_prob: float = 0.0  # share of training segments conditioned on the acoustic model's GTA mel (training.gta)
    # knowledge distillation: a teacher vocoder (a voice folder, or a full or compact checkpoint) with this
    # run's inputs and targets (any size or sparsity), whose teacher-forced distributions on each batch
    # join the data as soft targets, weighted distill_weight (WaveRNN.loss's soft_logits; 0 / None: off)
    distill_from: str | None = None
    distill_weight: float = 0.5
    threads: int = 2  # torch intra-op threads on the CPU
    bf16: str = "auto"  # "auto" (bf16 autocast where the CPU has native bf16), "on", "off"
    seed: int = 0
    checkpoint_interval_s: float = 300.0
    resume: bool = False  # continue from run_dir/checkpoint.pt when it exists
    fresh: bool = False  # start over where run_dir holds a checkpoint (replaced at the first save); else refused
    # when not resuming, start (step and weights) from a compact or full checkpoint, or a voice folder.
    # It may carry a run into a wider model (new inputs join with zero weights), a denser one (with pruning
    # finished and a higher target_density the pruned blocks of largest squared gradient, Adam's second
    # moment, come back at zero: BlockPruner.regrow) or a sparser one (a lower target_density with the
    # schedule moved to the run's step prunes on once its cubic passes the masks' sparsity)
    init_from: str | None = None
    device: str = "cpu"  # "cpu", "cuda" or "auto"
    eval_every_steps: int = 500  # held-out loss interval (0: only at the end)
    eval_batches: int = 4  # fixed held-out batches of batch_size segments
    log_every_steps: int = 10  # metrics row interval
    cache_dir: str | None = None  # default: run_dir/cache
    progress: bool = True  # tqdm bar on stderr
    export_at_end: bool = True  # write run_dir/vocoder.safetensors when the run finishes

    def __post_init__(self) -> None:
        if isinstance(self.vocoder, dict):  # from JSON (`wavern train vocoder --set vocoder={...}`)
            object.__setattr__(self, "vocoder", VocoderConfig.from_dict({**VocoderConfig().to_dict(), **self.vocoder}))
        if self.resume and self.fresh:
            raise ParameterError("resume and fresh contradict each other")
        if self.optimizer not in OPTIMIZERS:
            raise ParameterError(f"optimizer {self.optimizer!r} is not one of {OPTIMIZERS}")
        if self.bf16 not in ("auto", "on", "off"):
            raise ParameterError(f"bf16 must be 'auto', 'on' or 'off', found {self.bf16!r}")
        for name in ("steps", "batch_size", "segment_frames", "threads", "log_every_steps", "lr_half_life_steps"):
            if getattr(self, name) < 1:
                raise ParameterError(f"{name} must be >= 1, found {getattr(self, name)}")
        if not 0.0 <= self.gta_prob <= 1.0:
            raise ParameterError(f"gta_prob must be in [0, 1], found {self.gta_prob}")
        if not 0 <= self.input_noise <= 8192:
            raise ParameterError(f"input_noise must be in [0, 8192] int16 units, found {self.input_noise}")
        if not 0 <= self.period_input_fade <= 1:
            raise ParameterError(f"period_input_fade must be in [0, 1], found {self.period_input_fade}")
        if self.period_input_fade and not self.vocoder.ltp_input:
            raise ParameterError("period_input_fade needs a vocoder with the period input (--ltp-input)")
        if not 0 <= self.period_input_drop <= 1:
            raise ParameterError(f"period_input_drop must be in [0, 1], found {self.period_input_drop}")
        if self.period_input_drop and not self.vocoder.ltp_input:
            raise ParameterError("period_input_drop needs a vocoder with the period input (--ltp-input)")
        if not 0 <= self.period_input_self <= 1:
            raise ParameterError(f"period_input_self must be in [0, 1], found {self.period_input_self}")
        if self.period_input_self and (not self.vocoder.ltp_input or self.vocoder.excitation != "linear"):
            raise ParameterError("period_input_self needs a vocoder with the period input (--ltp-input) "
                                 "and the linear excitation code")
        if not 0.0 <= self.distill_weight <= 1.0:
            raise ParameterError(f"distill_weight must be in [0, 1], found {self.distill_weight}")
        if not self.lr > 0 or self.lr_min < 0:
            raise ParameterError(f"lr must be > 0 and lr_min >= 0, found {self.lr} and {self.lr_min}")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["vocoder"] = self.vocoder.to_dict()
        return d



# ---------------------------------------------------------------------------- command line
def parse_args(argv: list[str] | None) -> VocoderTrainConfig:
    """The config of ``python -m wavern.training.vocoder_trainer ARGV``."""
    d = VocoderTrainConfig()
    v = VocoderConfig()
    p = argparse.ArgumentParser(prog="python -m wavern.training.vocoder_trainer",
                                description="Train the WaveRNN vocoder on a wavern corpus: fast on the CPU, "
                                            "resumable bit for bit.")
    p.add_argument("--corpus", default=d.corpus_dir)
    # --run-dir: under torchrun, a bare --run is taken as an abbreviation of torchrun's own --run-path
    p.add_argument("--run-dir", "--run", dest="run", default=d.run_dir)
    p.add_argument("--cache", default=None, help="corpus cache folder (default: RUN/cache)")
    p.add_argument("--hidden", type=int, default=v.hidden_size)
    p.add_argument("--cond-channels", type=int, default=v.cond_channels)
    p.add_argument("--cond-blocks", type=int, default=v.cond_blocks)
    p.add_argument("--block", default=f"{v.block_rows}x{v.block_cols}", help="pruning block shape, e.g. 16x4")
    p.add_argument("--density", type=float, default=v.target_density,
                   help="target block density; higher than an --init-from run's finished pruning: the pruned "
                        "blocks with the largest squared gradients come back (at zero)")
    p.add_argument("--prune-start", type=int, default=v.prune_start_step)
    p.add_argument("--prune-ramp", type=int, default=v.prune_ramp_steps)
    p.add_argument("--prune-every", type=int, default=v.prune_every_steps)
    p.add_argument("--lpc-order", type=int, default=v.lpc_order,
                   help="> 0: model the excitation of a predictor of this order from the mel (LPCNet's split)")
    p.add_argument("--head-pruning", default=v.head_pruning, choices=("global", "rows"),
                   help="O2/O4 blocks: largest in the whole matrix, or the same number in every row of blocks")
    p.add_argument("--excitation", choices=("linear", "mulaw"), default=v.excitation,
                   help="with --lpc-order: the excitation's code, linear or mu-law (LPCNet's)")
    p.add_argument("--no-lpc-input", action="store_true",
                   help="with --lpc-order: do not feed the prediction p_t to the GRU (an excitation-only net)")
    p.add_argument("--pitch", action="store_true",
                   help="condition on pitch features too (cache/pitch.npy, computed on first use); "
                        "--init-from a model without them widens its conditioning input with zero weights")
    p.add_argument("--ltp", action="store_true",
                   help="with --lpc-order --pitch: also take out a long-term (pitch) predictor of the residual")
    p.add_argument("--ltp-input", action="store_true",
                   help="with --ltp: feed the residual one period back, r_{t-T}, to the GRU as well "
                        "(--init-from a model without it adds the input with zero weights)")
    p.add_argument("--ltp-input-taps", type=int, default=v.ltp_input_taps,
                   help="with --ltp-input: read r_{t-T+d} for |d| <= taps // 2 (odd)")
    p.add_argument("--phase-input", type=int, default=v.phase_input,
                   help="with --ltp-input: also read the glottal phase, sin / cos of its first K harmonics "
                        "(cache/phase.npy, computed on first use; --init-from adds it with zero weights)")
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--batch", type=int, default=d.batch_size)
    p.add_argument("--segment-frames", type=int, default=d.segment_frames)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--warmup", type=int, default=d.warmup_steps)
    p.add_argument("--lr-half-life", type=int, default=d.lr_half_life_steps)
    p.add_argument("--lr-min", type=float, default=d.lr_min)
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=d.optimizer)
    p.add_argument("--grad-clip", type=float, default=d.grad_clip)
    p.add_argument("--gta-prob", type=float, default=d.gta_prob,
                   help="share of segments conditioned on the acoustic model's GTA mel (cache/gta_mels.npy, "
                        "python -m wavern.training.gta)")
    p.add_argument("--period-input-fade", type=float, default=d.period_input_fade,
                   help="with --ltp-input: scale each segment's period input by U(1 - fade, 1) (0: off)")
    p.add_argument("--period-input-drop", type=float, default=d.period_input_drop,
                   help="with --ltp-input: the share of segments trained without their period input (0: none)")
    p.add_argument("--period-input-self", type=float, default=d.period_input_self,
                   help="share of segments whose residuals one period back are the model's own teacher-forced "
                        "draws (period input and long-term prediction; needs --ltp-input, linear code)")
    p.add_argument("--distill-from", default=None, metavar="VOICE_OR_CHECKPOINT",
                   help="distil from this vocoder (a voice folder or a checkpoint with this run's inputs and "
                        "targets, any size or sparsity): its teacher-forced distributions join the data as soft "
                        "targets")
    p.add_argument("--distill-weight", type=float, default=d.distill_weight,
                   help="with --distill-from: the soft targets' share of the loss (0-1)")
    p.add_argument("--input-noise", type=float, default=d.input_noise,
                   help="largest std (int16 units) of Gaussian noise on the fed-back samples (0: none)")
    p.add_argument("--threads", type=int, default=d.threads)
    p.add_argument("--bf16", choices=("auto", "on", "off"), default=d.bf16)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--checkpoint-interval", type=float, default=d.checkpoint_interval_s)
    p.add_argument("--resume", action="store_true", help="continue from RUN/checkpoint.pt")
    p.add_argument("--fresh", action="store_true", help="start over where RUN holds a checkpoint")
    p.add_argument("--init-from", default=None)
    p.add_argument("--device", default=d.device)
    p.add_argument("--eval-every", type=int, default=d.eval_every_steps)
    p.add_argument("--eval-batches", type=int, default=d.eval_batches)
    p.add_argument("--log-every", type=int, default=d.log_every_steps)
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    try:
        br, bc = (int(x) for x in a.block.lower().split("x"))
    except ValueError:
        raise ParameterError(f"--block must look like 16x4, found {a.block!r}") from None
    voc = VocoderConfig(hidden_size=a.hidden, cond_channels=a.cond_channels, cond_blocks=a.cond_blocks,
                        block_rows=br, block_cols=bc, target_density=a.density, prune_start_step=a.prune_start,
                        prune_ramp_steps=a.prune_ramp, prune_every_steps=a.prune_every, lpc_order=a.lpc_order,
                        lpc_prediction_input=not a.no_lpc_input, head_pruning=a.head_pruning,
                        pitch=a.pitch, excitation=a.excitation, ltp=a.ltp, ltp_input=a.ltp_input,
                        ltp_input_taps=a.ltp_input_taps, phase_input=a.phase_input)
    return VocoderTrainConfig(
        corpus_dir=a.corpus, run_dir=a.run, vocoder=voc, steps=a.steps, batch_size=a.batch,
        segment_frames=a.segment_frames, lr=a.lr, warmup_steps=a.warmup, lr_half_life_steps=a.lr_half_life,
        lr_min=a.lr_min, optimizer=a.optimizer, grad_clip=a.grad_clip, input_noise=a.input_noise, gta_prob=a.gta_prob,
        period_input_fade=a.period_input_fade, period_input_drop=a.period_input_drop,
        period_input_self=a.period_input_self, distill_from=a.distill_from, distill_weight=a.distill_weight,
        threads=a.threads, bf16=a.bf16,
        seed=a.seed, checkpoint_interval_s=a.checkpoint_interval, resume=a.resume, fresh=a.fresh,
        init_from=a.init_from,
        device=a.device, eval_every_steps=a.eval_every, eval_batches=a.eval_batches, log_every_steps=a.log_every,
        cache_dir=a.cache, progress=not a.no_progress)

