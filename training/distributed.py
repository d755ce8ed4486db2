"""Data-parallel training with torch.distributed, shared by every trainer.

Run any trainer under ``torchrun`` and it becomes data-parallel::

    torchrun --standalone --nproc-per-node 2 -m wavern.app.cli train acoustic --corpus data/corpus --run-dir runs/ac
    torchrun --standalone --nproc-per-node 2 -m wavern.app.cli train vocoder --corpus data/corpus --run-dir runs/voc
    torchrun --standalone --nproc-per-node 2 -m wavern.app.cli train pretrain --corpus data/corpus --run-dir runs/pt
    torchrun --nnodes 2 --node-rank 0 --master-addr host0 --master-port 29500 --nproc-per-node 8 \\
        -m wavern.app.cli train acoustic ...       # and --node-rank 1 on the second host

(``python -m wavern.training.acoustic_trainer`` and ``-m wavern.training.vocoder_trainer`` work
under torchrun the same way.) ``--batch-size`` stays the *global* batch: each of the W
processes computes about batch/W examples per step, so the run follows the same trajectory as
one process with that batch, W times faster at best. On CPU give each process
``--threads`` = cores / W.

What every trainer does with the helpers here (the semantics of DDP, written out):

- :func:`setup_distributed` joins the process group torchrun describes (gloo on CPU, nccl on
  GPUs, one GPU per local rank) and :func:`broadcast_parameters` starts every rank from rank 0's
  weights.
- Step ``t`` still draws its *global* batch from ``default_rng([seed, t])`` on every rank; rank
  ``r`` of ``W`` keeps rows ``r::W`` (:meth:`DistInfo.rows`). So a run of any world size sees
  exactly the examples a one-process run sees, and per-step seeding (bit-exact resume) holds.
- A loss that is a mean over examples, frames or tokens is re-weighted with
  :func:`loss_weights` (each rank's share of the global count), so that the averaged gradient
  (:func:`average_gradients`, after ``backward``, before clipping) is the gradient of the
  global batch's mean loss, even when ranks hold unequal counts.
- Logged losses are summed over ranks (:func:`all_sum`); stop requests (a signal, the time
  limit) are agreed with :func:`any_rank`, and a non-finite loss on any rank with
  :func:`loss_weights_and_any` (in the step's own collective), so that all ranks leave the loop
  at the same step.
- Only rank 0 writes checkpoints, metrics, exports and shows progress bars; every rank reads
  the same checkpoint on resume.

Without torchrun (no ``WORLD_SIZE`` in the environment, or 1) every helper is a no-op or the
identity, and a trainer runs exactly as it did alone.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
from typing import Callable, TypeVar
from collections.abc import Sequence

import numpy as np
import torch
import torch.distributed as dist

from wavern.errors import ParameterError
from wavern.training.common import resolve_device

T = TypeVar("T")

__all__ = ["DistInfo", "setup_distributed", "run_distributed", "init_distributed", "is_main", "average_gradients",
           "broadcast_parameters", "check_same_step", "loss_weights", "loss_weights_and_any", "all_sum", "any_rank",
           "barrier", "shutdown", "pick_device"]

log = logging.getLogger(__name__)

# Rank 0 alone may spend a long while before the first collective (building the vocoder's data
# cache, phonemising the pre-training sentences) while the other ranks wait at a barrier.
DEFAULT_TIMEOUT_S = 2 * 3600.0

pick_device = resolve_device  # the one device rule lives in wavern.training.common


@dataclasses.dataclass(frozen=True)
class DistInfo:
    """Where this process stands in the data-parallel group (rank 0 of 1 when alone)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    owns_group: bool = False  # this process group was created by init_distributed (and shutdown ends it)

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def rows(self, n: int) -> np.ndarray:
        """Indices ``rank::world_size`` of a global batch of ``n`` rows: this rank's share."""
        return np.arange(self.rank, n, self.world_size)


def init_distributed(device: torch.device | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> DistInfo:
    """Join the process group torchrun describes in the environment; no-op when run alone.

    A group that already exists (the caller made it) is joined as it is and left alone by
    :func:`shutdown`.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    owns = False
    if not dist.is_initialized():
        backend = "nccl" if device is not None and device.type == "cuda" else "gloo"
        if device is not None and device.type == "cuda":
            torch.cuda.set_device(local_rank)
        dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout_s))
        owns = True
        log.info("joined process group: rank %d of %d (%s)", rank, world, backend)
    return DistInfo(rank=rank, world_size=world, local_rank=local_rank, owns_group=owns)


def setup_distributed(device: str = "auto") -> tuple[torch.device, DistInfo]:
    """Resolve a trainer's ``device`` option and join torchrun's group (if any).

    Under torchrun a CUDA device becomes ``cuda:LOCAL_RANK``: one GPU per process.

    Returns:
        (the device this process trains on, its :class:`DistInfo`).
    """
    dev = resolve_device(device)
    info = init_distributed(dev)
    if dev.type == "cuda" and info.enabled:
        dev = torch.device("cuda", info.local_rank)
    return dev, info


def is_main() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0


def _collective_device() -> torch.device:
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def broadcast_parameters(module: torch.nn.Module, info: DistInfo) -> None:
    """Make every process start from rank 0's weights (and buffers)."""
    if not info.enabled:
        return
    with torch.no_grad():
        for t in list(module.parameters()) + list(module.buffers()):
            dist.broadcast(t.data, src=0)


def average_gradients(module: torch.nn.Module, info: DistInfo) -> None:
    """All-reduce every gradient and divide by the world size (what DDP does), in one flat buffer.

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


def all_sum(values: Sequence[float], info: DistInfo) -> list[float]:
    """Element-wise sum of ``values`` over all ranks (float64; the values themselves when alone)."""
    if not info.enabled:
        return [float(v) for v in values]
    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=_collective_device())
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.cpu().tolist()


def loss_weights(local_counts: Sequence[float], info: DistInfo) -> list[float]:
    """Per-rank weights that turn local means into the global batch's mean under gradient averaging.

    A loss ``L_r = S_r / n_r`` (a sum over this rank's ``n_r`` frames, tokens or rows, divided
    by them) times ``world * n_r / N`` (``N`` = the count over all ranks) averages over the ranks
    to ``sum_r S_r / N``: the mean over the global batch. One weight per count; 0 where the
    global count is 0 (the term is then empty everywhere); all 1.0 when alone.
    """
    return loss_weights_and_any(local_counts, False, info)[0]


def loss_weights_and_any(local_counts: Sequence[float], flag: bool, info: DistInfo) -> tuple[list[float], bool]:
    """:func:`loss_weights` and :func:`any_rank` of ``flag`` in one collective (a step's loss
    weights and whether any rank's loss is non-finite: every rank must agree to stop)."""
    if not info.enabled:
        return [1.0] * len(local_counts), bool(flag)
    *totals, flags = all_sum(list(local_counts) + [1.0 if flag else 0.0], info)
    return [info.world_size * float(c) / t if t > 0 else 0.0 for c, t in zip(local_counts, totals)], flags > 0


def check_same_step(step: int, info: DistInfo) -> None:
    """Every rank resumed at the same step, or all raise (a collective). Each rank reads the run's
    checkpoint from its own disk: ranks on machines without a shared run folder would start over
    while rank 0 resumes, drift apart and hang in a later collective."""
    if not info.enabled:
        return
    total, squares = all_sum([float(step), float(step) ** 2], info)
    if total * total != info.world_size * squares:  # equal only when every step is the same (exact below 2**26)
        raise ParameterError(f"the ranks resumed at different steps (this rank: {step}, mean "
                             f"{total / info.world_size:g}): every rank must see the same run folder "
                             f"(a shared disk), or start every rank from the same checkpoint")


def any_rank(flag: bool, info: DistInfo) -> bool:
    """True on every rank when ``flag`` is True on at least one (a collective: call it on all ranks)."""
    if not info.enabled:
        return bool(flag)
    return all_sum([1.0 if flag else 0.0], info)[0] > 0


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def run_distributed(device: str, train: Callable[[torch.device, DistInfo], T]) -> T:
    """Join the group (:func:`setup_distributed`), call ``train(device, info)``, leave the group.

    Leaves after a barrier on success; on an error at once (the other ranks may never reach
    the barrier, and torchrun ends them when this process exits).
    """
    dev, info = setup_distributed(device)
    try:
        result = train(dev, info)
    except BaseException:
        shutdown(info, wait=False)
        raise
    shutdown(info)
    return result


def shutdown(info: DistInfo, *, wait: bool = True) -> None:
    """Leave the group if :func:`init_distributed` created it; after a barrier when ``wait``.

    On an error path pass ``wait=False``: the other ranks may never reach the barrier, and
    torchrun ends them once this process exits.
    """
    if info.enabled and info.owns_group and dist.is_initialized():
        if wait:
            dist.barrier()
        dist.destroy_process_group()
