"""Block magnitude pruning of the WaveRNN's recurrent and output matrices (WaveRNN paper §4).

The sparsity ramps from 0 at step ``t0`` to the target ``Z`` over ``S`` steps,
``z_t = Z (1 - (1 - (t - t0)/S)^3)``; every ``prune_every_steps`` the masks are recomputed
by keeping the blocks with the largest L2 norm, and after every optimiser step the masked
weights are set back to zero (:meth:`BlockPruner.apply`).

``gru.weight_hh`` (3H × H) is pruned **per gate**: each of the r, z and n slabs (H × H) keeps
the same fraction of its own blocks. The gates have different weight scales (the n slab is
multiplied by r), so one global ranking over the whole matrix would starve whichever gate has
the smaller weights; per-gate pruning keeps all three gates alive and gives the engine an
equal amount of work in each third. O1..O4 are each pruned as one matrix.

The masks are ordinary tensors in :meth:`BlockPruner.state_dict`, stored in checkpoints.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math

import torch

from wavern.errors import ParameterError
from wavern.vocoder.config import VocoderConfig

__all__ = ["sparsity_at", "block_mask", "block_mask_rows", "regrow_mask", "BlockPruner", "PRUNED_PARAMETERS",
           "HEADS", "unit_group", "hold_at_mean", "shrink_hidden"]

log = logging.getLogger(__name__)

#: Parameter names (in ``WaveRNN.named_parameters()``) that are pruned, with their slab count.
PRUNED_PARAMETERS = {"gru.weight_hh_l0": 3, "O1.weight": 1, "O2.weight": 1, "O3.weight": 1, "O4.weight": 1}


def sparsity_at(step: int, *, target: float, start: int, ramp: int) -> float:
    """Fraction of blocks to remove at ``step``: 0 before ``start``, ``target`` after ``start + ramp``.

    ``z_t = Z (1 - (1 - (t - t0)/S)^3)`` (WaveRNN §4.1), with ``Z = target`` (a sparsity, i.e.
    1 - density), ``t0 = start``, ``S = ramp``.
    """
    if step <= start:
        return 0.0
    frac = min(1.0, (step - start) / ramp)
    return target * (1.0 - (1.0 - frac) ** 3)


def block_mask(weight: torch.Tensor, block_shape: tuple[int, int], sparsity: float) -> torch.Tensor:
    """Boolean mask (same shape as ``weight``) keeping the largest-norm blocks.

    Removes ``floor(sparsity * n_blocks)`` blocks, those with the smallest L2 norm (ties broken
    by block position, so the result is deterministic).
    """
    br, bc = block_shape
    rows, cols = weight.shape
    blocks = weight.detach().float().reshape(rows // br, br, cols // bc, bc)
    norms = blocks.pow(2).sum(dim=(1, 3)).flatten()  # (n_blocks,) row-major over (block_row, block_col)
    n_drop = int(math.floor(sparsity * norms.numel() + 1e-9))
    keep = torch.ones_like(norms, dtype=torch.bool)
    if n_drop > 0:
        order = torch.argsort(norms, stable=True)
        keep[order[:n_drop]] = False
    keep = keep.reshape(rows // br, 1, cols // bc, 1).expand(rows // br, br, cols // bc, bc)
    return keep.reshape(rows, cols).clone()


def block_mask_rows(weight: torch.Tensor, block_shape: tuple[int, int], sparsity: float) -> torch.Tensor:
    """Like :func:`block_mask`, but every row of blocks keeps the same number of blocks,
    ``max(1, round((1 - sparsity) * block_columns))``, its largest-norm ones (ties by position)."""
    br, bc = block_shape
    rows, cols = weight.shape
    nr, nc = rows // br, cols // bc
    norms = weight.detach().float().reshape(nr, br, nc, bc).pow(2).sum(dim=(1, 3))  # (nr, nc)
    k = max(1, min(nc, int(round((1.0 - sparsity) * nc))))
    order = torch.argsort(-norms, dim=1, stable=True)
    keep = torch.zeros(nr, nc, dtype=torch.bool, device=norms.device)  # (on a GPU: scatter needs one device)
    keep.scatter_(1, order[:, :k], True)
    keep = keep.reshape(nr, 1, nc, 1).expand(nr, br, nc, bc)
    return keep.reshape(rows, cols).clone()


def regrow_mask(mask: torch.Tensor, score: torch.Tensor, block_shape: tuple[int, int], sparsity: float, *,
                rows: bool = False) -> torch.Tensor:
    """``mask`` with pruned blocks revived, those of largest ``score`` (summed over the block; ties by
    position), until it keeps as many blocks as :func:`block_mask` (``rows``: :func:`block_mask_rows`)
    keeps at ``sparsity``. Blocks kept in ``mask`` stay kept; a mask already that dense is returned as is.

    This is the growing half of RigL (Evci et al. 2020) run once: with ``score`` the squared gradient
    of the weights (Adam's second moment), the blocks revived are those the loss would most like to move.
    """
    br, bc = block_shape
    nr, nc = mask.shape[0] // br, mask.shape[1] // bc
    kept = mask.reshape(nr, br, nc, bc).any(dim=3).any(dim=1)  # (nr, nc)
    gain = score.detach().float().reshape(nr, br, nc, bc).sum(dim=(1, 3))
    gain = torch.where(kept, torch.full_like(gain, -math.inf), gain)  # only pruned blocks can come back
    if rows:
        k = max(1, min(nc, int(round((1.0 - sparsity) * nc))))
        for i in range(nr):
            need = k - int(kept[i].sum())
            if need > 0:
                kept[i, torch.argsort(-gain[i], stable=True)[:need]] = True
    else:
        n_keep = kept.numel() - int(math.floor(sparsity * kept.numel() + 1e-9))
        need = n_keep - int(kept.sum())
        if need > 0:
            flat = kept.flatten()
            flat[torch.argsort(-gain.flatten(), stable=True)[:need]] = True
            kept = flat.reshape(nr, nc)
    return kept.reshape(nr, 1, nc, 1).expand(nr, br, nc, bc).reshape(mask.shape).clone()


#: Output layers whose rows are classes (``VocoderConfig.head_pruning`` applies to them).
HEADS = ("O2.weight", "O4.weight")


class BlockPruner:
    """Owns the pruning masks of one :class:`~wavern.vocoder.model.WaveRNN`.

    Usage per training step: ``optimizer.step(); pruner.step(step)`` — ``step`` refreshes the
    masks when due and always re-applies them.
    """

    def __init__(self, model: torch.nn.Module, config: VocoderConfig) -> None:
        self.config = config
        params = dict(model.named_parameters())
        self.params = {name: params[name] for name in PRUNED_PARAMETERS}
        self.masks = {name: torch.ones_like(p, dtype=torch.bool) for name, p in self.params.items()}
        self.sparsity = 0.0  # sparsity of the current masks

    def target_sparsity(self, step: int) -> float:
        c = self.config
        return sparsity_at(step, target=1.0 - c.target_density, start=c.prune_start_step, ramp=c.prune_ramp_steps)

    def due(self, step: int) -> bool:
        c = self.config
        return step > c.prune_start_step and (step % c.prune_every_steps == 0
                                              or step >= c.prune_start_step + c.prune_ramp_steps)

    @torch.no_grad()
    def update_masks(self, sparsity: float) -> None:
        """Recompute every mask for ``sparsity`` from the current (masked) weights."""
        for name, p in self.params.items():
            slabs = PRUNED_PARAMETERS[name]
            rows = p.shape[0] // slabs
            rule = block_mask_rows if name in HEADS and self.config.head_pruning == "rows" else block_mask
            parts = [rule(p[i * rows:(i + 1) * rows], self.config.block_shape, sparsity) for i in range(slabs)]
            self.masks[name] = torch.cat(parts, dim=0).to(p.device)
        self.sparsity = sparsity

    @torch.no_grad()
    def regrow(self, sparsity: float, scores: dict[str, torch.Tensor]) -> None:
        """Lower the sparsity of finished masks to ``sparsity`` by reviving pruned blocks
        (:func:`regrow_mask`, per gate slab of ``weight_hh`` like the pruning, by rows for the heads
        under ``head_pruning="rows"``), ranked by ``scores[name]`` (same shape as the weight). The
        revived weights are zero, so the model computes the same function until the next step."""
        if sparsity >= self.sparsity:
            raise ValueError(f"regrow to sparsity {sparsity} from {self.sparsity}: it can only go down")
        for name, p in self.params.items():
            slabs = PRUNED_PARAMETERS[name]
            n = p.shape[0] // slabs
            by_rows = name in HEADS and self.config.head_pruning == "rows"
            mask, score = self.masks[name].cpu(), scores[name].cpu()
            parts = [regrow_mask(mask[i * n:(i + 1) * n], score[i * n:(i + 1) * n], self.config.block_shape,
                                 sparsity, rows=by_rows) for i in range(slabs)]
            self.masks[name] = torch.cat(parts, dim=0).to(p.device)
        self.sparsity = sparsity

    @torch.no_grad()
    def apply(self) -> None:
        """Zero the pruned weights (call after every optimiser step)."""
        if self.sparsity <= 0.0:
            return
        for name, p in self.params.items():
            p.mul_(self.masks[name])

    def step(self, step: int) -> None:
        """Refresh the masks if due at ``step`` (1-based count of finished steps), then apply them."""
        if self.due(step):
            # never below the masks' own sparsity: a run carried to a sparser target with a new
            # schedule (VocoderTrainer.load) prunes on from where it was once the schedule passes
            # it, rather than reviving blocks at random; a from-nothing run's schedule only rises
            z = max(self.target_sparsity(step), self.sparsity)
            if z != self.sparsity:
                self.update_masks(z)
                log.debug("step %d: pruned to sparsity %.4f", step, z)
        self.apply()

    def density(self) -> float:
        """Fraction of pruned-matrix weights currently kept."""
        kept = sum(int(m.sum()) for m in self.masks.values())
        return kept / sum(m.numel() for m in self.masks.values())

    def state_dict(self) -> dict:
        return {"sparsity": self.sparsity, "masks": {k: v.clone().cpu() for k, v in self.masks.items()}}

    def load_state_dict(self, state: dict) -> None:
        for name, mask in state["masks"].items():
            if name not in self.masks or mask.shape != self.masks[name].shape:
                raise ValueError(f"pruning mask '{name}' of shape {tuple(mask.shape)} does not fit this model")
            self.masks[name] = mask.to(device=self.params[name].device, dtype=torch.bool)
        self.sparsity = float(state["sparsity"])


# ---- structured pruning: whole groups of hidden units out --------------------------------------

def unit_group(config: VocoderConfig) -> int:
    """The fewest hidden units :func:`shrink_hidden` removes at a time: a whole number of block rows
    and of block columns (16 for 16x4 blocks), so that every kept block stays a block."""
    br, bc = config.block_shape
    return br * bc // math.gcd(br, bc)


@torch.no_grad()
def hold_at_mean(model: torch.nn.Module, groups: list[int], h_mean: torch.Tensor) -> None:
    """In place: the hidden units of the unit groups ``groups`` send on their mean ``h_mean`` instead
    of their state. Their columns of W_hh and of O1 / O3 become 0 and what they sent on, ``W[:, G]
    h_mean[G]``, goes into ``b_hh`` (inside the reset gate, as ``b_hn`` is) and into O1's / O3's bias.
    The model then computes what the model without them computes (:func:`shrink_hidden`)."""
    g, half = unit_group(model.config), model.config.hidden_size // 2
    w = model.gru.weight_hh_l0
    for d in groups:
        s = slice(d * g, d * g + g)
        mean = h_mean[s].to(w)
        model.gru.bias_hh_l0 += w[:, s] @ mean
        w[:, s] = 0
        head, off = (model.O1, 0) if d * g < half else (model.O3, half)
        s_in = slice(d * g - off, d * g + g - off)
        head.bias += head.weight[:, s_in] @ mean
        head.weight[:, s_in] = 0


@torch.no_grad()
def shrink_hidden(model: torch.nn.Module, drop: list[int], stats: dict[str, torch.Tensor]) -> tuple:
    """A copy of the WaveRNN ``model`` with the hidden units of the groups ``drop`` removed.

    The hidden state has ``H / g`` groups of ``g = unit_group(config)`` units; the first half of
    them are the coarse half's. ``drop`` names as many coarse groups as fine ones, so the smaller
    model keeps the split. What the removed units sent on is replaced by its mean, folded into
    the biases (:func:`hold_at_mean`). Each head's hidden layer (O1, O3: H/2 wide) loses as many rows, the
    groups of least ``sd(ReLU output) * |next layer's columns|`` (row-pruned groups, dead, first),
    their mean output folded into O2's or O4's bias. Exact for units and rows that never vary;
    otherwise a first-order guess that fine-tuning then corrects.

    ``stats``: ``h_mean`` (H) the mean hidden state, ``o1_mean`` / ``o1_sd`` and ``o3_mean`` /
    ``o3_sd`` (H/2 each) those of the heads' ReLU outputs, over teacher-forced data.

    Returns ``(smaller_model, record)``; the record names the removed groups (for provenance).
    """
    from wavern.vocoder.model import WaveRNN

    cfg = model.config
    H, half, g = cfg.hidden_size, cfg.hidden_size // 2, unit_group(cfg)
    n_half = half // g
    drop = sorted(set(int(d) for d in drop))
    coarse = [d for d in drop if 0 <= d < n_half]
    fine = [d for d in drop if n_half <= d < 2 * n_half]
    if len(coarse) + len(fine) != len(drop) or len(coarse) != len(fine) or not coarse:
        raise ParameterError(f"drop {drop}: name as many coarse groups (0..{n_half - 1}) as fine ones "
                             f"({n_half}..{2 * n_half - 1}), at least one each")
    if len(coarse) >= n_half:
        raise ParameterError(f"drop {drop} leaves no hidden units")
    new_cfg = dataclasses.replace(cfg, hidden_size=H - 2 * len(coarse) * g)
    units = lambda groups: torch.cat([torch.arange(d * g, d * g + g) for d in groups])  # noqa: E731
    kept = lambda n, groups: torch.tensor([i for i in range(n) if i // g not in groups])  # noqa: E731
    keep = kept(H, drop)
    keep_c, keep_f = keep[keep < half], keep[keep >= half] - half
    rows = torch.cat([gate * H + keep for gate in range(3)])
    held = copy.deepcopy(model).float().cpu()
    hold_at_mean(held, drop, stats["h_mean"].float().cpu())
    sd = {k: v.detach() for k, v in held.state_dict().items()}

    out = {k: v for k, v in sd.items() if not k.startswith(("gru.", "O"))}
    out["gru.weight_hh_l0"] = sd["gru.weight_hh_l0"][rows][:, keep]
    out["gru.bias_hh_l0"] = sd["gru.bias_hh_l0"][rows]
    out["gru.weight_ih_l0"] = sd["gru.weight_ih_l0"][rows]
    out["gru.bias_ih_l0"] = sd["gru.bias_ih_l0"][rows]
    record = {"hidden_from": H, "hidden_to": new_cfg.hidden_size, "unit_groups": drop, "group_units": g}
    for hid, nxt, mean_key, keep_in, groups in (("O1", "O2", "o1", keep_c, coarse), ("O3", "O4", "o3", keep_f, fine)):
        a_mean, a_sd = stats[f"{mean_key}_mean"].float().cpu(), stats[f"{mean_key}_sd"].float().cpu()
        w_next, b_next = sd[f"{nxt}.weight"], sd[f"{nxt}.bias"].clone()
        score = [float(a_sd[r * g:r * g + g].sum() * w_next[:, r * g:r * g + g].norm()) for r in range(n_half)]
        out_rows = sorted(sorted(range(n_half), key=lambda r: (score[r], r))[:len(groups)])
        gone_out = units(out_rows)
        b_next += w_next[:, gone_out] @ a_mean[gone_out]
        kept_out = kept(half, out_rows)
        out[f"{hid}.weight"] = sd[f"{hid}.weight"][kept_out][:, keep_in]
        out[f"{hid}.bias"] = sd[f"{hid}.bias"][kept_out]
        out[f"{nxt}.weight"], out[f"{nxt}.bias"] = w_next[:, kept_out], b_next
        record[f"{hid}_row_groups"] = out_rows
    small = WaveRNN(new_cfg)
    small.load_state_dict(out)
    small.gru_impl = getattr(model, "gru_impl", "loop")
    return small, record
