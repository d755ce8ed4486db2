"""A vocoder run's files: the checkpoint names and formats, :func:`load_vocoder_checkpoint` (a
full or compact checkpoint as a :class:`WaveRNN`) and :func:`load_teacher` (a frozen vocoder to
distil from, a voice folder or a checkpoint)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

from wavern.errors import ParameterError
from wavern.vocoder.config import VocoderConfig

if TYPE_CHECKING:
    from wavern.vocoder.model import WaveRNN

__all__ = ["CHECKPOINT", "COMPACT", "CHECKPOINT_FORMAT", "COMPACT_FORMAT", "TEACHER_FREE_FIELDS",
           "load_vocoder_checkpoint", "load_teacher"]

CHECKPOINT = "checkpoint.pt"
COMPACT = "compact.pt"
CHECKPOINT_FORMAT = "wavern-vocoder-checkpoint"
COMPACT_FORMAT = "wavern-vocoder-compact"


def load_vocoder_checkpoint(path: str | Path):
    """A :class:`WaveRNN` (masks applied) and its checkpoint dict from a full or compact vocoder checkpoint."""
    from wavern.training.common import load_torch
    from wavern.vocoder.model import WaveRNN

    ck = load_torch(path, "vocoder checkpoint", map_location="cpu", weights_only=False)
    if not isinstance(ck, dict) or ck.get("format") not in ("wavern-vocoder-checkpoint", "wavern-vocoder-compact"):
        raise ParameterError(f"{path} is not a vocoder checkpoint (format {ck.get('format')!r})")
    cfg = VocoderConfig.from_dict(ck["vocoder_config"])
    model = WaveRNN(cfg)
    model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in ck["model"].items()})
    return model.eval(), ck



#: VocoderConfig fields a distillation teacher may differ in: its size and sparsity. Every other field
#: (features, LPC, long-term predictor, period and phase inputs, excitation code, conditioning depth, so
#: the padding) sets the inputs and targets, which teacher and student must share.
TEACHER_FREE_FIELDS = ("hidden_size", "cond_channels", "block_rows", "block_cols", "target_density",
                       "prune_start_step", "prune_ramp_steps", "prune_every_steps", "head_pruning")


def load_teacher(path: str | Path, student: VocoderConfig) -> WaveRNN:
    """A frozen vocoder to distil from: a voice folder (``voice.json`` + ``vocoder.safetensors``) or a
    full or compact checkpoint. Refused (ParameterError) where it reads other inputs or predicts other
    targets than ``student`` (anything outside :data:`TEACHER_FREE_FIELDS`)."""
    from wavern.vocoder.export import load_vocoder

    path = Path(path)
    if path.is_dir():
        try:
            config = VocoderConfig.from_dict(json.loads((path / "voice.json").read_text())["vocoder"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ParameterError(f"teacher {path} is not a voice folder with a vocoder config ({exc})") from exc
        teacher = load_vocoder(path / "vocoder.safetensors", config)
    else:
        teacher, _ = load_vocoder_checkpoint(path)
        config = teacher.config
    diff = {f.name: (getattr(config, f.name), getattr(student, f.name)) for f in dataclasses.fields(config)
            if f.name not in TEACHER_FREE_FIELDS and getattr(config, f.name) != getattr(student, f.name)}
    if diff:
        raise ParameterError(f"teacher {path} reads other inputs or predicts other targets than this run "
                             f"(teacher, run): {diff}")
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher

