"""Pieces every trainer needs: device choice, per-step seeding, atomic checkpoints, a SIGTERM
flag, a checkpoint timer and the metrics JSONL file.

Conventions (shared by ``acoustic_trainer``, ``vocoder_trainer`` and ``pretrain``):

- **Determinism without saved RNG state.** Step ``t`` draws its batch from
  ``numpy.random.default_rng([seed, t])`` and seeds torch with :func:`step_seed` before its
  forward pass, so a run resumed at step ``t`` draws exactly what the straight run drew; the
  checkpoint only needs the model, the optimiser state and ``t``. Under ``torchrun``
  (``wavern.training.distributed``) every rank draws that same global batch and keeps its rows;
  only the torch seed (dropout) differs per rank.
- **Checkpoints** are written to a temporary file and renamed, so a kill mid-write leaves the
  previous checkpoint intact.
- **Metrics** are JSON lines ``{"kind": "train" | "eval" | ..., "step": t, ...}``; on resume,
  rows past the checkpoint's step (written after the last save) are dropped first.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import logging
import math
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wavern.errors import DiskFullError, ParameterError
from wavern.fileio import atomic_write

__all__ = ["resolve_device", "step_seed", "seed_step", "atomic_save", "compact_checkpoint", "StopFlag", "CheckpointTimer", "MetricsLog"]

log = logging.getLogger(__name__)


def resolve_device(name: str) -> torch.device:
    """``"auto"`` -> cuda if available, else cpu; otherwise ``torch.device(name)`` (checked).

    Asking for ``cuda`` on a machine without a GPU is an error, not a silent fall-back to the CPU.
    (``wavern.training.distributed.pick_device`` is this function.)
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise ParameterError(f"device {name!r} is not a torch device; use 'auto', 'cpu' or 'cuda'") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ParameterError(f"device {name!r} was requested, but this machine has no CUDA GPU; use 'auto' or 'cpu'")
    return dev


def step_seed(seed: int, step: int, rank: int = 0) -> int:
    """A 63-bit torch seed for step ``step`` of a run seeded ``seed`` (SeedSequence mixing).

    Data-parallel rank ``rank`` > 0 gets its own seed (its dropout differs from rank 0's);
    rank 0's is the one-process seed.
    """
    entropy = [seed, step] if rank == 0 else [seed, step, rank]
    return int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0]) >> 1


def seed_step(seed: int, step: int, rank: int = 0) -> np.random.Generator:
    """Seed torch for ``step`` (of data-parallel ``rank``) and return the numpy generator of that
    step's data draws: the global batch, the same on every rank."""
    torch.manual_seed(step_seed(seed, step, rank))
    return np.random.default_rng([seed, step])


def load_torch(path: str | os.PathLike, what: str, **kwargs) -> Any:
    """``torch.load``, with a truncated, empty or foreign file as a ParameterError naming ``what``
    (a killed copy or a full disk can leave one; the trainers themselves replace files atomically)."""
    import pickle

    try:
        return torch.load(path, **kwargs)
    except FileNotFoundError:
        raise ParameterError(f"{what} not found: {path}") from None
    except (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError, AttributeError) as e:
        raise ParameterError(f"{path} is not a readable {what} ({type(e).__name__}: {str(e)[:200]}); it may be "
                             f"truncated: restore it (compact checkpoints in git) or start afresh") from None


def atomic_save(obj: Any, path: str | os.PathLike) -> Path:
    """``torch.save`` to ``path`` via a temporary file and a rename (:func:`wavern.fileio.atomic_write`:
    a full disk raises DiskFullError and leaves no temporary behind)."""
    return atomic_write(path, lambda tmp: torch.save(obj, tmp))


class StopFlag:
    """Context manager turning SIGTERM (and SIGINT) into a flag the training loop polls.

    Outside the main thread (where Python cannot install handlers) it only offers the flag.
    """

    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> None:
        self.signals = signals
        self.requested: int | None = None  # the signal number once one arrived
        self._old: dict[int, Any] = {}

    def _handle(self, signum, frame) -> None:
        log.warning("signal %d received: checkpointing and stopping", signum)
        self.requested = signum

    def __enter__(self) -> "StopFlag":
        if threading.current_thread() is threading.main_thread():
            for s in self.signals:
                self._old[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)
        self._old.clear()


class CheckpointTimer:
    """``due()`` is True once every ``every_s`` seconds of wall time (never when ``every_s`` is inf)."""

    def __init__(self, every_s: float) -> None:
        self.every_s = float(every_s)
        self._last = time.monotonic()

    def due(self) -> bool:
        if math.isinf(self.every_s):
            return False
        return time.monotonic() - self._last >= self.every_s

    def reset(self) -> None:
        self._last = time.monotonic()


class MetricsLog:
    """Append-only JSON-lines metrics file, mirrored to TensorBoard event files when the
    ``tensorboard`` package is installed (``<folder of path>/tensorboard``, one scalar per numeric
    field, tagged ``<kind>/<field>`` at the row's step).

    ``tensorboard=None`` mirrors when the package imports, ``False`` never, ``True`` always
    (an ImportError then says what to install).
    """

    def __init__(self, path: str | os.PathLike, *, tensorboard: bool | None = None) -> None:
        self.path = Path(path)
        if tensorboard is None:
            tensorboard = importlib.util.find_spec("tensorboard") is not None
        self.tensorboard_dir: Path | None = self.path.parent / "tensorboard" if tensorboard else None
        self._writer = None
        self._purge_step: int | None = None

    def truncate_after(self, step: int) -> None:
        """Drop rows with ``step > step`` (written after the checkpoint a run resumes from);
        TensorBoard is told to purge its events after ``step`` too."""
        self._purge_step = step + 1
        if not self.path.is_file():
            return
        kept = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a kill
            if int(row.get("step", 0)) <= step:
                kept.append(line)
        self.path.write_text("".join(k + "\n" for k in kept), encoding="utf-8")

    def write(self, row: dict[str, Any]) -> None:
        try:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row, sort_keys=True) + "\n")
            if self.tensorboard_dir is not None and "step" in row:
                self._tensorboard(row)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskFullError(f"disk full while writing metrics to {self.path.parent}; free space and "
                                    f"resume (the last checkpoint is kept)") from None
            raise

    def _tensorboard(self, row: dict[str, Any]) -> None:
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(str(self.tensorboard_dir), purge_step=self._purge_step, flush_secs=30)
        kind, step = row.get("kind", "metrics"), int(row["step"])
        for key, value in row.items():
            if key in ("kind", "step") or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if math.isfinite(value):
                self._writer.add_scalar(f"{kind}/{key}", value, step)
        if kind != "train":
            self._writer.flush()

    def close(self) -> None:
        """Flush and close the TensorBoard writer (the JSONL file needs nothing)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def eval_at(self, step: int) -> dict[str, Any] | None:
        """The numbers of the last ``"eval"`` row at ``step`` (without kind and step), or None: a run
        that reaches its end at a step it has evaluated already (a resumed finished run, an eval
        step that is also the last) reuses that evaluation rather than writing a second row."""
        rows = [r for r in self.read() if isinstance(r, dict) and r.get("kind") == "eval" and r.get("step") == step]
        return {k: v for k, v in rows[-1].items() if k not in ("kind", "step")} if rows else None

    def read(self) -> list[dict[str, Any]]:
        """The rows, in order; a line cut short by a kill is left out (as :meth:`truncate_after` does)."""
        if not self.path.is_file():
            return []
        rows = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return rows


def compact_checkpoint(src: str | os.PathLike, dst: str | os.PathLike) -> Path:
    """Shrink a full checkpoint for git: every floating tensor of rank >= 1 becomes bfloat16.

    bfloat16 keeps float32's exponent range, so Adam's tiny second moments survive (float16
    would flush them to zero). Loading it back works through the trainers' normal resume path
    (``load_state_dict`` casts to each parameter's dtype); the run continues, not bit-exactly.
    RNG states are dropped (the trainers reseed per step).
    """

    def shrink(x: Any) -> Any:
        if torch.is_tensor(x):
            return x.to(torch.bfloat16) if x.is_floating_point() and x.ndim >= 1 else x
        if isinstance(x, dict):
            return {k: shrink(v) for k, v in x.items() if k != "rng"}
        if isinstance(x, (list, tuple)):
            return type(x)(shrink(v) for v in x)
        return x

    ckpt = load_torch(src, "checkpoint", map_location="cpu", weights_only=False)
    return atomic_save(shrink(ckpt), dst)
