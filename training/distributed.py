"""Data-parallel training with torch.distributed, shared by every trainer.

Run any trainer under ``torchrun`` and it becomes data-parallel: each process takes its own
slice of every batch's examples, gradients are averaged across processes after ``backward``
(DDP semantics), and only rank 0 writes checkpoints, metrics and progress bars.

    torchrun --nproc-per-node 2 -m wavern.app.cli train vocoder --corpus data/corpus ...
    torchrun --nnodes 2 --node-rank 0 --master-addr host0 --nproc-per-node 8 -m wavern.app.cli train ...

Backends: gloo on CPU, nccl when the process has a CUDA device. Without torchrun (no
``WORLD_SIZE`` in the environment) everything here is a no-op and the trainer runs alone.
"""

from __future__ import annotations

import dataclasses
import logging
import os

import torch
import torch.distributed as dist

__all__ = ["DistInfo", "init_distributed", "is_main", "average_gradients", "broadcast_parameters",
           "shutdown", "pick_device"]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def pick_device(requested: str = "auto") -> torch.device:
    """``auto`` → CUDA when present, else CPU. ``cuda`` without a GPU is an error, not a fallback."""
    from wavern.errors import ParameterError

    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise ParameterError(f"device '{requested}' asked for, but this machine has no CUDA GPU; use 'cpu' or 'auto'")
    if requested not in ("cpu",) and not requested.startswith("cuda"):
        raise ParameterError(f"unknown device '{requested}'; use cpu, cuda, cuda:N or auto")
    return torch.device(requested)


def init_distributed(device: torch.device | None = None) -> DistInfo:
    """Join the process group torchrun describes in the environment; no-op when run alone."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        backend = "nccl" if device is not None and device.type == "cuda" else "gloo"
        if device is not None and device.type == "cuda":
            torch.cuda.set_device(local_rank)
        dist.init_process_group(backend=backend)
        log.info("joined process group: rank %d of %d (%s)", rank, world, backend)
    return DistInfo(rank=rank, world_size=world, local_rank=local_rank)


def is_main() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0


def broadcast_parameters(module: torch.nn.Module, info: DistInfo) -> None:
    """Make every process start from rank 0's weights (and buffers)."""
    if not info.enabled:
        return
    with torch.no_grad():
        for t in list(module.parameters()) + list(module.buffers()):
            dist.broadcast(t.data, src=0)


def average_gradients(module: torch.nn.Module, info: DistInfo) -> None:
    """All-reduce every gradient and divide by the world size (what DDP does), bucketed.

    Parameters without a gradient on some rank take part with zeros, so the collective
    calls match on every process.
    """
    if not info.enabled:
        return
    params = [p for p in module.parameters() if p.requires_grad]
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1).float() for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= info.world_size
    offset = 0
    for p, g in zip(params, grads):
        n = g.numel()
        new = flat[offset:offset + n].view_as(g).to(g.dtype)
        if p.grad is None:
            p.grad = new.clone()
        else:
            p.grad.copy_(new)
        offset += n


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
