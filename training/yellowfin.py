"""YellowFin: momentum SGD whose learning rate and momentum are re-tuned every step.

Zhang & Mitliagkas, "YellowFin and the Art of Momentum Tuning" (2017), implemented as the
authors' PyTorch reference behaves (REFERENCES.md §5), not as the paper's pseudo-code.
With t counting completed steps from 0 and the debias factor d_t = 1 - beta**(t+1), one
:meth:`YellowFin.step` does, in this order:

1. adaptive clipping (t >= 2): clip the global gradient norm to sqrt(100 * h_max_{t-1});
2. g2 = ||g||^2 over every parameter with a gradient; exploding = t >= 1 and g2 >= h_max_{t-1};
3. curvature range: g2 goes into a ring of the last w values; EMAs, in log space, of
   log(min ring + eps) and log(max ring + eps); h_min, h_max = exp(ema / d_t);
4. variance: C = max(eps, avg(g2) / d_t - sum ||avg(g)||^2 / d_t^2);
5. distance: D = EMA(EMA(||g||) / (EMA(g2) + eps)) / d_t;
6. t >= 1: p = (D+eps)^2 (h_min+eps)^2 / (2 (C+eps)); x = the real root in (0, 1) of
   p x = (1 - x)^3 (Vieta); dr = max((h_max+eps)/(h_min+eps), 1+eps);
   mu = max(x^2, ((sqrt(dr)-1)/(sqrt(dr)+1))^2); lr = (1 - sqrt(mu))^2 / (h_min+eps) times the
   slow start min(1, (t+1)/(10 w)).  t = 0: the constructor's lr and mu.  The raw values are
   applied; the reference's smoothed lr/mu are never used, so they are not kept;
7. per group lr = tuned lr * lr_factor, clamped so that lr * ||g|| <= 100; if exploding, clip
   the gradient norm to sqrt(h_max_{t-1}); then torch SGD's momentum step.

Readings where §5 leaves a detail open (each one is what the reference code does):

- "h_max_{t-1}" is the h_max computed by the previous step; both clips and the exploding test
  use it, never the value being computed in this step.
- A clip to a norm N scales every gradient by min(1, (N + eps) / (||g|| + 1e-6)), in place on
  ``p.grad``, as ``torch.nn.utils.clip_grad_norm_(params, N + eps)`` does; the caller sees the
  clipped gradients after the step.
- g2 is measured after the adaptive clip; it feeds every statistic, the exploding test and the
  lr clamp.  The exploding clip comes after the statistics, so they see the unclipped g2.
- The clamp compares lr * lr_factor * sqrt(g2) >= 100 and then sets lr = 100 / sqrt(g2 + eps).
  ``adapt_clip=False`` turns off both clips and the clamp (the exploding flag is still reported).
- Weight decay (default 0) is added to the gradient inside the SGD step only, as the reference
  hands it to torch SGD: it changes the update, not the statistics.
- The SGD step is torch SGD's: with mu = 0 (step 0 by default) no momentum buffer is made, so
  the first step with mu > 0 starts the buffer at that step's gradient.
- ``zero_debias=False`` uses d_t = 1 throughout, as the reference does.
- Statistics are Python floats (float64), the ring included; the reference keeps the ring and
  some sums in float32, so the two agree to float32 rounding, not bit for bit.  The
  per-parameter mean gradient lives in the parameter's dtype, as in the reference.

Where the reference differs and wavern does not follow: a non-finite g2 raises
:class:`~wavern.errors.WavernError` before any state changes (the reference silently restores
a checkpoint of model and optimiser); sparse gradients raise
:class:`~wavern.errors.ParameterError`; a step in which no parameter has a gradient does
nothing (the step counter does not advance).

The root of the cubic is the reference's closed form, which loses accuracy when p is large
(x ~ 1/p and the form cancels two terms of size sqrt(p/3)): about 1e-16 * sqrt(p) absolute.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from wavern.errors import ParameterError, WavernError

__all__ = [
    "EPS",
    "YellowFin",
    "cubic_root",
    "cubic_p",
    "tuned_momentum",
    "tuned_lr",
]

logger = logging.getLogger(__name__)

EPS = 1e-6
"""The reference's eps for every guard in the tuner."""

_CLIP_NORM_EPS = 1e-6
"""torch.nn.utils.clip_grad_norm_ divides the target norm by (norm + 1e-6)."""

_TUNER = "yellowfin"
"""Key of the global statistics in ``optimizer.state`` (a string, so state_dict keeps it)."""

# Hyperparameters that must be one value for the whole optimiser (the statistics are global).
_GLOBAL_KEYS = ("beta", "curv_win_width", "zero_debias", "adapt_clip", "stat_protect_factor",
                "max_move")
# Keys a group may not override: the tuner sets them (use lr_factor for per-group scaling).
_TUNED_KEYS = ("lr", "momentum")


# --------------------------------------------------------------------------- tuning maths


def cubic_p(dist: float, h_min: float, variance: float, *, eps: float = EPS) -> float:
    """Coefficient p of the momentum cubic, eps-guarded as in the reference.

    p = (D + eps)^2 (h_min + eps)^2 / (2 (C + eps)).
    """
    return (dist + eps) ** 2 * (h_min + eps) ** 2 / 2.0 / (variance + eps)


def cubic_root(p: float, *, eps: float = EPS) -> float:
    """The real root x in (0, 1] of p * x = (1 - x)^3, by Vieta's substitution.

    With y = x - 1 the cubic is y^3 + p y + p = 0; y = w - p / (3 w) with
    w^3 = (-p - sqrt(p^2 + 4 p^3 / 27)) / 2, as the authors' reference solves it.  ``eps`` guards the division by w exactly where the reference puts it; pass 0
    for the exact closed form.

    Parameters
    ----------
    p : float
        Non-negative coefficient (see :func:`cubic_p`).  p = 0 gives x = 1.
    eps : float
        The reference's guard in y = w - p / 3 / (w + eps).

    Returns
    -------
    float
        x, whose square is the smallest momentum that the noise and distance allow.
    """
    if not p >= 0.0 or math.isinf(p):
        raise ParameterError(f"cubic_root needs a finite p >= 0, got p={p!r}")
    if p == 0.0:
        return 1.0
    w3 = (-math.sqrt(p * p + 4.0 / 27.0 * p ** 3) - p) / 2.0
    w = math.copysign(abs(w3) ** (1.0 / 3.0), w3)
    y = w - p / 3.0 / (w + eps)
    return y + 1.0


def tuned_momentum(root: float, h_min: float, h_max: float, *, eps: float = EPS) -> float:
    """Momentum from the cubic's root and the curvature range.

    mu = max(root^2, ((sqrt(dr) - 1) / (sqrt(dr) + 1))^2) with
    dr = max((h_max + eps) / (h_min + eps), 1 + eps): the larger of what the noise needs and
    what the condition number needs to keep every direction in the robust region.
    """
    dr = max((h_max + eps) / (h_min + eps), 1.0 + eps)
    sqrt_dr = math.sqrt(dr)
    return max(root * root, ((sqrt_dr - 1.0) / (sqrt_dr + 1.0)) ** 2)


def tuned_lr(mu: float, h_min: float, *, step: int, curv_win_width: int,
             eps: float = EPS) -> float:
    """Learning rate for momentum ``mu``: (1 - sqrt(mu))^2 / (h_min + eps), slow-started.

    The slow start multiplies by min(1, (step + 1) / (10 * curv_win_width)) so the first few
    hundred steps, whose estimates rest on a short window, do not take full-size steps.
    """
    lr = (1.0 - math.sqrt(mu)) ** 2 / (h_min + eps)
    return min(lr, lr * (step + 1) / float(10.0 * curv_win_width))


# --------------------------------------------------------------------------- helpers


def _sum_squares(tensors: list[torch.Tensor]) -> float:
    """sum_i ||tensors[i]||^2, accumulated in float64, one host sync per device."""
    per_device: dict[torch.device, list[torch.Tensor]] = {}
    for x in tensors:
        per_device.setdefault(x.device, []).append(torch.sum(torch.square(x.to(torch.float64))))
    return float(sum(torch.stack(v).sum().item() for v in per_device.values()))


def _clip_(grads: list[torch.Tensor], norm: float, max_norm: float) -> bool:
    """Scale ``grads`` in place as clip_grad_norm_(max_norm) would; True if they changed."""
    coef = max_norm / (norm + _CLIP_NORM_EPS)
    if coef >= 1.0:
        return False
    for g in grads:
        g.mul_(coef)
    return True


def _initial_tuner_state(*, lr: float, mu: float, curv_win_width: int) -> dict[str, Any]:
    return {
        "step": 0,                       # completed steps (t of the next step)
        "ring": (0.0,) * curv_win_width,  # last w values of g2, slot t % w
        "log_h_min_avg": 0.0,            # EMA of log(min ring + eps)
        "log_h_max_avg": 0.0,            # EMA of log(max ring + eps)
        "grad_sq_avg": 0.0,              # EMA of g2
        "grad_norm_avg": 0.0,            # EMA of ||g||
        "dist_avg": 0.0,                 # EMA of grad_norm_avg / (grad_sq_avg + eps)
        "h_min": 0.0, "h_max": 0.0, "C": 0.0, "D": 0.0,
        "lr_tuned": float(lr),           # raw tuned lr (the constructor's before step 1)
        "mu": float(mu),                 # raw tuned momentum (the constructor's before step 1)
        "lr": float(lr),                 # lr applied to the first group in the last step
        "grad_sq": 0.0,                  # g2 of the last step, after the adaptive clip
        "exploding": 0.0,                # 1.0 if the last step's gradient was exploding
    }


# --------------------------------------------------------------------------- optimiser


class YellowFin(torch.optim.Optimizer):
    """Momentum SGD with lr and momentum tuned every step (REFERENCES.md §5).

    Parameters
    ----------
    params : iterable of tensors or param-group dicts
        As for any torch optimiser.  A group may set its own ``lr_factor`` and
        ``weight_decay``; the tuned lr and momentum, and every key in the global list
        (beta, curv_win_width, zero_debias, adapt_clip, stat_protect_factor, max_move), are
        one value for all groups.
    lr, mu : float
        Learning rate and momentum of the first step (t = 0); tuned from then on.
    beta : float
        EMA factor of every statistic.
    curv_win_width : int
        Length w of the ring of recent g2 values for the curvature range.
    zero_debias : bool
        Divide EMAs by 1 - beta**(t+1).
    adapt_clip : bool
        The adaptive clip, the exploding-gradient clip and the lr * ||g|| clamp.
    weight_decay : float
        L2 penalty added to the gradient inside the SGD step (not seen by the statistics).
    stat_protect_factor : float
        The adaptive clip's bound is sqrt(stat_protect_factor * h_max_{t-1}).
    max_move : float
        The clamp keeps lr * ||g|| below this.

    Notes
    -----
    After each step ``group["lr"]`` and ``group["momentum"]`` hold the values that step
    applied.  Global statistics live in ``self.state["yellowfin"]`` (replaced, never mutated,
    each step); the per-parameter mean gradient and momentum buffer in ``self.state[p]``.
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-4, mu: float = 0.0, *,
                 beta: float = 0.999, curv_win_width: int = 20, zero_debias: bool = True,
                 adapt_clip: bool = True, weight_decay: float = 0.0,
                 stat_protect_factor: float = 100.0, max_move: float = 100.0) -> None:
        if not (math.isfinite(lr) and lr >= 0.0):
            raise ParameterError(f"lr must be finite and >= 0, got {lr!r}")
        if not 0.0 <= mu < 1.0:
            raise ParameterError(f"mu must be in [0, 1), got {mu!r}")
        if not 0.0 < beta < 1.0:
            raise ParameterError(f"beta must be in (0, 1), got {beta!r}")
        if isinstance(curv_win_width, bool) or not isinstance(curv_win_width, int) \
                or curv_win_width < 1:
            raise ParameterError(f"curv_win_width must be an int >= 1, got {curv_win_width!r}")
        if not weight_decay >= 0.0:
            raise ParameterError(f"weight_decay must be >= 0, got {weight_decay!r}")
        if not stat_protect_factor > 0.0:
            raise ParameterError(f"stat_protect_factor must be > 0, got {stat_protect_factor!r}")
        if not max_move > 0.0:
            raise ParameterError(f"max_move must be > 0, got {max_move!r}")
        defaults = dict(lr=float(lr), momentum=float(mu), lr_factor=1.0,
                        weight_decay=float(weight_decay), beta=float(beta),
                        curv_win_width=curv_win_width, zero_debias=bool(zero_debias),
                        adapt_clip=bool(adapt_clip),
                        stat_protect_factor=float(stat_protect_factor), max_move=float(max_move))
        super().__init__(params, defaults)
        self.state[_TUNER] = _initial_tuner_state(lr=lr, mu=mu, curv_win_width=curv_win_width)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group; it may set ``lr_factor`` and ``weight_decay`` but no tuned/global key."""
        for key in _GLOBAL_KEYS + _TUNED_KEYS:
            if key in param_group and param_group[key] != self.defaults[key]:
                hint = ("set the group's lr_factor instead" if key in _TUNED_KEYS
                        else "it is global to the optimiser")
                raise ParameterError(
                    f"YellowFin param group sets {key}={param_group[key]!r} but the optimiser "
                    f"uses {key}={self.defaults[key]!r}; {hint}")
        if "lr_factor" in param_group and not param_group["lr_factor"] >= 0.0:
            raise ParameterError(f"lr_factor must be >= 0, got {param_group['lr_factor']!r}")
        super().add_param_group(param_group)

    # ------------------------------------------------------------------ public surface

    @property
    def lr_factor(self) -> float:
        """Multiplier on the tuned lr (for schedules); the first group's, set on all groups."""
        return float(self.param_groups[0]["lr_factor"])

    @lr_factor.setter
    def lr_factor(self, value: float) -> None:
        if not (math.isfinite(value) and value >= 0.0):
            raise ParameterError(f"lr_factor must be finite and >= 0, got {value!r}")
        for group in self.param_groups:
            group["lr_factor"] = float(value)

    @property
    def step_count(self) -> int:
        """Completed steps (the t of the next step)."""
        return int(self.state[_TUNER]["step"])

    def tuner_stats(self) -> dict[str, float]:
        """Values of the last step (the constructor's lr, mu and zeros before any step).

        Keys: ``lr`` (applied to the first group: tuned lr * lr_factor, after the clamp),
        ``mu``, ``h_min``, ``h_max``, ``C`` (gradient variance), ``D`` (distance to the
        optimum), ``lr_tuned`` (before lr_factor and clamp), ``grad_sq`` (g2 after the adaptive
        clip) and ``exploding`` (1.0 or 0.0).
        """
        s = self.state[_TUNER]
        keys = ("lr", "mu", "h_min", "h_max", "C", "D", "lr_tuned", "grad_sq", "exploding")
        return {k: float(s[k]) for k in keys}

    # ------------------------------------------------------------------ the step

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        """One YellowFin step (module docstring, items 1-7).

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the model and returns the loss, as for torch SGD.

        Returns
        -------
        The closure's loss, or None.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        items = [(group, p) for group in self.param_groups for p in group["params"]
                 if p.grad is not None]
        if not items:
            return loss
        for _, p in items:
            if p.grad.is_sparse:
                raise ParameterError(
                    f"YellowFin does not support sparse gradients (a parameter of shape "
                    f"{tuple(p.shape)} has one); build embeddings with sparse=False")
        grads = [p.grad for _, p in items]

        hp = self.param_groups[0]
        beta, w = hp["beta"], hp["curv_win_width"]
        old = self.state[_TUNER]
        t = int(old["step"])
        h_max_prev = old["h_max"]

        # 1-2. adaptive clip (t >= 2), then g2 and the exploding test, both against h_max_{t-1}
        grad_sq = _sum_squares(grads)
        if not math.isfinite(grad_sq):
            raise WavernError(
                f"YellowFin step {t}: the squared gradient norm is {grad_sq}; the loss diverged "
                f"or the batch is bad. The optimiser state is unchanged: skip the batch or "
                f"lower lr_factor")
        if hp["adapt_clip"] and t >= 2:
            bound = math.sqrt(hp["stat_protect_factor"] * h_max_prev) + EPS
            if _clip_(grads, math.sqrt(grad_sq), bound):
                logger.debug("step %d: adaptive clip of ||g||=%.3g to %.3g", t,
                             math.sqrt(grad_sq), bound)
                grad_sq = _sum_squares(grads)
        exploding = t >= 1 and grad_sq >= h_max_prev
        debias = 1.0 - beta ** (t + 1) if hp["zero_debias"] else 1.0

        # 3. curvature range: log-space EMAs of the ring's min and max
        ring = list(old["ring"])
        ring[t % w] = grad_sq
        window = ring[:min(w, t + 1)]
        log_h_min_avg = beta * old["log_h_min_avg"] + (1 - beta) * math.log(min(window) + EPS)
        log_h_max_avg = beta * old["log_h_max_avg"] + (1 - beta) * math.log(max(window) + EPS)
        h_min = math.exp(log_h_min_avg / debias)
        h_max = math.exp(log_h_max_avg / debias)

        # 4. variance: EMA of g2 against the squared norm of the mean gradient
        grad_sq_avg = beta * old["grad_sq_avg"] + (1 - beta) * grad_sq
        means = []
        for _, p in items:
            state = self.state[p]
            if "grad_avg" not in state:
                state["grad_avg"] = torch.zeros_like(p.grad, memory_format=torch.preserve_format)
            state["grad_avg"].mul_(beta).add_(p.grad, alpha=1 - beta)
            means.append(state["grad_avg"])
        variance = max(EPS, grad_sq_avg / debias - _sum_squares(means) / debias ** 2)

        # 5. distance to the optimum
        grad_norm_avg = beta * old["grad_norm_avg"] + (1 - beta) * math.sqrt(grad_sq)
        dist_avg = beta * old["dist_avg"] + (1 - beta) * grad_norm_avg / (grad_sq_avg + EPS)
        dist = dist_avg / debias

        # 6. closed-form momentum and lr (the constructor's values at t = 0), applied raw
        if t >= 1:
            root = cubic_root(cubic_p(dist, h_min, variance))
            mu = tuned_momentum(root, h_min, h_max)
            lr_tuned = tuned_lr(mu, h_min, step=t, curv_win_width=w)
        else:
            mu, lr_tuned = old["mu"], old["lr_tuned"]

        # 7. per-group lr with the clamp, the exploding clip, then torch SGD's step
        grad_norm = math.sqrt(grad_sq)
        group_lrs = []
        for group in self.param_groups:
            lr = lr_tuned * group["lr_factor"]
            if hp["adapt_clip"] and lr * grad_norm >= hp["max_move"]:
                lr = hp["max_move"] / math.sqrt(grad_sq + EPS)
            group["lr"], group["momentum"] = lr, mu
            group_lrs.append(lr)
        if hp["adapt_clip"] and exploding:
            logger.debug("step %d: exploding gradient ||g||=%.3g, clipped to %.3g", t,
                         grad_norm, math.sqrt(h_max_prev))
            _clip_(grads, grad_norm, math.sqrt(h_max_prev) + EPS)
        for group in self.param_groups:
            self._sgd_step(group)

        self.state[_TUNER] = {
            "step": t + 1, "ring": tuple(ring),
            "log_h_min_avg": log_h_min_avg, "log_h_max_avg": log_h_max_avg,
            "grad_sq_avg": grad_sq_avg, "grad_norm_avg": grad_norm_avg, "dist_avg": dist_avg,
            "h_min": h_min, "h_max": h_max, "C": variance, "D": dist,
            "lr_tuned": lr_tuned, "mu": mu, "lr": group_lrs[0],
            "grad_sq": grad_sq, "exploding": 1.0 if exploding else 0.0,
        }
        return loss

    def _sgd_step(self, group: dict[str, Any]) -> None:
        """torch SGD (no dampening, no Nesterov): buf = g at first use, then mu*buf + g."""
        lr, mu, decay = group["lr"], group["momentum"], group["weight_decay"]
        for p in group["params"]:
            if p.grad is None:
                continue
            d_p = p.grad if decay == 0 else p.grad.add(p, alpha=decay)
            if mu != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = torch.clone(d_p).detach()
                    state["momentum_buffer"] = buf
                else:
                    buf.mul_(mu).add_(d_p)
                d_p = buf
            p.add_(d_p, alpha=-lr)
