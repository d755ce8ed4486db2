"""YellowFin against closed forms, numpy.roots, torch SGD and a naive numpy twin of §5."""

from __future__ import annotations

import copy
import io
import math

import numpy as np
import pytest
import torch

from wavern.errors import ParameterError, WavernError
from wavern.training.yellowfin import (
    EPS,
    YellowFin,
    cubic_p,
    cubic_root,
    tuned_lr,
    tuned_momentum,
)

torch.set_num_threads(1)


# --------------------------------------------------------------------------- naive twin


class NaiveYellowFin:
    """REFERENCES.md §5 written out again in plain numpy float64, one list entry per param.

    ``step(grads, lr_factor)`` takes a list with None for parameters without a gradient and
    updates ``self.params`` in place; it records which branches fired.
    """

    def __init__(self, params, *, lr=1e-4, mu=0.0, beta=0.999, w=20):
        self.params = [np.array(p, dtype=np.float64) for p in params]
        self.lr0, self.mu0, self.beta, self.w = lr, mu, beta, w
        self.t = 0
        self.ring = []                  # g2 of every step so far; the window is the last w
        self.ema_log_min = self.ema_log_max = 0.0
        self.ema_g2 = self.ema_gnorm = self.ema_dist = 0.0
        self.gbar = [np.zeros_like(p) for p in self.params]
        self.buf = [None] * len(self.params)
        self.h_max = 0.0
        self.fired = {"adaptive_clip": 0, "exploding": 0, "clamp": 0, "slow_start": 0}
        self.stats = {}

    @staticmethod
    def _clip(grads, max_norm):
        norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads if g is not None))
        coef = max_norm / (norm + 1e-6)
        if coef < 1.0:
            return [None if g is None else g * coef for g in grads], True
        return grads, False

    def step(self, grads, lr_factor=1.0):
        eps, beta, t, w = 1e-6, self.beta, self.t, self.w
        grads = [None if g is None else np.array(g, dtype=np.float64) for g in grads]
        d = 1.0 - beta ** (t + 1)
        if t >= 2:
            grads, hit = self._clip(grads, math.sqrt(100.0 * self.h_max) + eps)
            self.fired["adaptive_clip"] += hit
        g2 = sum(float(np.sum(g * g)) for g in grads if g is not None)
        exploding = t >= 1 and g2 >= self.h_max
        h_max_prev = self.h_max
        # curvature range
        self.ring.append(g2)
        window = self.ring[-w:]
        self.ema_log_min = beta * self.ema_log_min + (1 - beta) * np.log(min(window) + eps)
        self.ema_log_max = beta * self.ema_log_max + (1 - beta) * np.log(max(window) + eps)
        h_min = float(np.exp(self.ema_log_min / d))
        h_max = float(np.exp(self.ema_log_max / d))
        # variance
        self.ema_g2 = beta * self.ema_g2 + (1 - beta) * g2
        for i, g in enumerate(grads):
            if g is not None:
                self.gbar[i] = beta * self.gbar[i] + (1 - beta) * g
        gbar_sq = sum(float(np.sum(self.gbar[i] ** 2))
                      for i, g in enumerate(grads) if g is not None)
        C = max(eps, self.ema_g2 / d - gbar_sq / d ** 2)
        # distance
        self.ema_gnorm = beta * self.ema_gnorm + (1 - beta) * math.sqrt(g2)
        self.ema_dist = beta * self.ema_dist + (1 - beta) * self.ema_gnorm / (self.ema_g2 + eps)
        D = self.ema_dist / d
        # tuned values: Vieta on y^3 + p y + p = 0 (y = x - 1), with the reference's guard
        if t >= 1:
            p = (D + eps) ** 2 * (h_min + eps) ** 2 / (2 * (C + eps))
            w_cubed = -(p + math.sqrt(p * p + 4 * p ** 3 / 27)) / 2
            w_ = float(np.cbrt(w_cubed))
            x = 1 + w_ - p / (3 * (w_ + eps))
            dr = max((h_max + eps) / (h_min + eps), 1 + eps)
            mu = max(x * x, ((math.sqrt(dr) - 1) / (math.sqrt(dr) + 1)) ** 2)
            lr = (1 - math.sqrt(mu)) ** 2 / (h_min + eps)
            if (t + 1) < 10 * w:
                lr *= (t + 1) / (10 * w)
                self.fired["slow_start"] += 1
        else:
            mu, lr = self.mu0, self.lr0
        lr_tuned = lr
        lr = lr * lr_factor
        if lr * math.sqrt(g2) >= 100.0:
            lr = 100.0 / math.sqrt(g2 + eps)
            self.fired["clamp"] += 1
        if exploding:
            grads, _ = self._clip(grads, math.sqrt(h_max_prev) + eps)
            self.fired["exploding"] += 1
        # torch SGD: no buffer while mu == 0; buf = g on first use, then mu * buf + g
        for i, g in enumerate(grads):
            if g is None:
                continue
            step = g
            if mu != 0:
                self.buf[i] = g.copy() if self.buf[i] is None else mu * self.buf[i] + g
                step = self.buf[i]
            self.params[i] = self.params[i] - lr * step
        self.h_max = h_max
        self.t += 1
        self.stats = dict(lr=lr, mu=mu, h_min=h_min, h_max=h_max, C=C, D=D, lr_tuned=lr_tuned,
                          grad_sq=g2, exploding=float(exploding))
        return grads


def _numpy_cubic_root(p: float) -> float:
    """Real root in (0, 1] of p x = (1 - x)^3, i.e. -x^3 + 3x^2 - (3 + p) x + 1 = 0."""
    roots = np.roots([-1.0, 3.0, -(3.0 + p), 1.0])
    real = roots[np.abs(roots.imag) < 1e-7].real
    inside = real[(real > 0) & (real <= 1 + 1e-12)]
    assert inside.size == 1, (p, roots)
    return float(inside[0])


# --------------------------------------------------------------------------- pure maths


@pytest.mark.parametrize("p", np.logspace(-8, 4, 49))
def test_cubic_root_matches_numpy_roots(p):
    x = cubic_root(float(p), eps=0.0)
    ref = _numpy_cubic_root(float(p))
    assert 0.0 < x <= 1.0
    assert x == pytest.approx(ref, rel=1e-9)
    assert p * x == pytest.approx((1 - x) ** 3, rel=1e-9)
    # the reference's guard, y = w - p / 3 / (w + eps), moves x by at most about eps
    assert cubic_root(float(p)) == pytest.approx(ref, abs=1.5 * EPS)


@pytest.mark.parametrize("p", [1e5, 1e6, 1e8])
def test_cubic_root_large_p_accuracy_is_bounded(p):
    # x ~ 1/p and the closed form cancels two terms of size sqrt(p/3): the error is
    # about 1e-16 sqrt(p) absolute (module docstring), plus the guard's ~eps
    ref = _numpy_cubic_root(p)
    assert cubic_root(p, eps=0.0) == pytest.approx(ref, abs=1e-14 * math.sqrt(p))
    assert cubic_root(p) == pytest.approx(ref, abs=1.5 * EPS)


def test_cubic_root_edges():
    assert cubic_root(0.0) == 1.0
    with pytest.raises(ParameterError, match="p >= 0"):
        cubic_root(-1.0)
    with pytest.raises(ParameterError):
        cubic_root(float("nan"))


def test_momentum_and_lr_formulas_closed_forms():
    # condition number 100: the robust region needs mu >= ((10 - 1) / (10 + 1))^2
    assert tuned_momentum(0.1, 1.0, 100.0, eps=0.0) == pytest.approx((9 / 11) ** 2)
    # noise-dominated: the root wins
    assert tuned_momentum(0.9, 1.0, 1.0, eps=0.0) == pytest.approx(0.81)
    # h_max < h_min (possible with separate EMAs) is floored at dr = 1 + eps
    assert tuned_momentum(0.0, 2.0, 1.0) == pytest.approx(
        ((math.sqrt(1 + EPS) - 1) / (math.sqrt(1 + EPS) + 1)) ** 2)
    assert tuned_lr(0.25, 2.0, step=10 ** 6, curv_win_width=20, eps=0.0) == pytest.approx(0.125)
    assert tuned_lr(0.25, 2.0, step=19, curv_win_width=20, eps=0.0) == pytest.approx(0.0125)
    assert cubic_p(2.0, 3.0, 4.0, eps=0.0) == pytest.approx(4 * 9 / 8)


# --------------------------------------------------------------------------- closed forms on a frozen quadratic


def test_frozen_noiseless_quadratic_against_closed_forms():
    """f(x) = 1/2 x^T H x with the parameters frozen (lr_factor = 0): every step sees the same
    gradient g = H x, so h_min = h_max = |g|^2 + eps, C = eps, and D, mu, lr have closed forms.
    """
    # |g|^2 ~ 1e-4 puts p near 20, where the root is well inside (0, 1)
    H = torch.diag(torch.tensor([1.0, 3.0, 0.5], dtype=torch.float64))
    x0 = torch.tensor([7e-3, -2e-3, 1.5e-3], dtype=torch.float64)
    x = x0.clone().requires_grad_()
    beta, w, steps = 0.9, 5, 30          # small beta and w so debias and slow start matter
    opt = YellowFin([x], beta=beta, curv_win_width=w)
    opt.lr_factor = 0.0
    for _ in range(steps):
        opt.zero_grad()
        (0.5 * x @ H @ x).backward()
        opt.step()
    c = float((H @ x.detach()).square().sum())             # |g|^2, constant
    t = steps - 1
    d = [1 - beta ** (k + 1) for k in range(steps)]
    # D = (1/d_t) sum_k (1-beta) beta^(t-k) * (d_k sqrt(c)) / (d_k c + eps)
    D = sum((1 - beta) * beta ** (t - k) * d[k] * math.sqrt(c) / (d[k] * c + EPS)
            for k in range(steps)) / d[t]
    h = c + EPS
    p = (D + EPS) ** 2 * (h + EPS) ** 2 / (2 * (EPS + EPS))
    root = _numpy_cubic_root(p)
    assert 1.0 < p < 100.0 and root ** 2 > ((math.sqrt(1 + EPS) - 1) / (math.sqrt(1 + EPS) + 1)) ** 2
    lr = (1 - root) ** 2 / (h + EPS) * min(1.0, (t + 1) / (10 * w))
    s = opt.tuner_stats()
    assert s["h_min"] == pytest.approx(h, rel=1e-12)
    assert s["h_max"] == pytest.approx(h, rel=1e-12)
    assert s["C"] == EPS
    assert s["D"] == pytest.approx(D, rel=1e-12)
    # the reference's guard in the cubic moves sqrt(mu) by up to ~eps (test_cubic_root_*)
    assert math.sqrt(s["mu"]) == pytest.approx(root, abs=1.5 * EPS)
    assert s["lr_tuned"] == pytest.approx(lr, rel=1e-4)
    assert s["lr"] == 0.0
    assert torch.equal(x.detach(), x0)


# --------------------------------------------------------------------------- the naive twin, teacher-forced


def _seeded_problem(seed=0):
    """Noisy least squares in float64: params W (3, 4), b (3,), and an unused param."""
    gen = torch.Generator().manual_seed(seed)
    W = (0.3 * torch.randn(3, 4, generator=gen, dtype=torch.float64)).requires_grad_()
    b = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    unused = torch.ones(2, dtype=torch.float64, requires_grad=True)
    W_true = torch.randn(3, 4, generator=gen, dtype=torch.float64)

    def grads_at(step):
        X = torch.randn(16, 4, generator=gen, dtype=torch.float64)
        Y = X @ W_true.T + 0.1 * torch.randn(16, 3, generator=gen, dtype=torch.float64)
        loss = 0.5 * ((X @ W.T + b - Y) ** 2).mean()
        gW, gb = torch.autograd.grad(loss, [W, b])
        scale = 3e-3                                  # |g|^2 ~ 1e-5: the lr grows to the clamp
        if step in (12, 40):
            scale *= 1e3                              # spikes: adaptive clip and exploding clip
        if step == 1:
            scale *= 30.0                             # above 10 |g_0|, not clipped before t = 2
        if step == 2:
            scale *= 100.0                            # clipped: the first step that may be
        if step == 45:
            scale = 0.0                               # an all-zero gradient
        return [gW * scale, gb * scale, None]

    return [W, b, unused], grads_at


def test_teacher_forced_against_naive_twin():
    params, grads_at = _seeded_problem()
    opt = YellowFin(params, curv_win_width=4)
    twin = NaiveYellowFin([p.detach().numpy() for p in params], w=4)
    for step in range(50):
        grads = grads_at(step)
        # a schedule; the factor 1e3 at the spike pushes lr * |g| past the clamp
        lr_factor = 1e3 if step == 40 else (0.5 if step >= 47 else 1.0)
        for p, g in zip(params, grads):
            p.grad = None if g is None else g.clone()
        opt.lr_factor = lr_factor
        opt.step()
        used = twin.step([None if g is None else g.numpy() for g in grads], lr_factor)
        stats = opt.tuner_stats()
        for key, ref in twin.stats.items():
            assert stats[key] == pytest.approx(ref, rel=1e-9, abs=1e-300), (step, key)
        for p, ref in zip(params, twin.params):
            np.testing.assert_allclose(p.detach().numpy(), ref, rtol=1e-10, atol=1e-13)
        for p, g in zip(params, used):                # the clipped gradient is left in p.grad
            if g is not None:
                np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-10, atol=1e-300)
        # teacher forcing: the twin continues from the optimiser's parameters
        twin.params = [p.detach().numpy().copy() for p in params]
    assert all(n > 0 for n in twin.fired.values()), twin.fired
    assert opt.step_count == 50


def test_applied_lr_and_momentum_replay_through_torch_sgd():
    """Each step equals torch SGD with the step's applied lr, mu and clipped gradient."""
    params, grads_at = _seeded_problem(seed=1)
    replay = [p.detach().clone().requires_grad_() for p in params]
    opt = YellowFin(params, curv_win_width=4, weight_decay=1e-3)
    sgd = torch.optim.SGD(replay, lr=1.0, momentum=0.0, weight_decay=1e-3)
    for step in range(30):
        for p, g in zip(params, grads_at(step)):
            p.grad = g
        opt.step()
        for q, p in zip(replay, params):
            q.grad = None if p.grad is None else p.grad.clone()
        sgd.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
        sgd.param_groups[0]["momentum"] = opt.param_groups[0]["momentum"]
        sgd.step()
        for p, q in zip(params, replay):
            torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-12, atol=1e-15)
    assert opt.param_groups[0]["lr"] == opt.tuner_stats()["lr"]


def test_first_step_is_plain_sgd_with_constructor_values():
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    opt = YellowFin([x], lr=0.01, mu=0.5)
    x.grad = torch.tensor([3.0, 4.0])
    opt.step()
    torch.testing.assert_close(x.detach(), torch.tensor([1.0 - 0.03, -2.0 - 0.04]))
    s = opt.tuner_stats()
    assert (s["lr"], s["mu"]) == (0.01, 0.5)


# --------------------------------------------------------------------------- state


def test_state_dict_round_trip_mid_run_gives_identical_steps():
    params, grads_at = _seeded_problem(seed=2)
    opt = YellowFin(params, curv_win_width=4)
    for step in range(25):
        for p, g in zip(params, grads_at(step)):
            p.grad = g
        opt.step()
    opt.lr_factor = 0.7
    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)
    saved_params = [p.detach().clone() for p in params]
    future = [grads_at(step) for step in range(25, 40)]

    def run(optimiser, ps):
        history = []
        for grads in future:
            for p, g in zip(ps, grads):
                p.grad = None if g is None else g.clone()
            optimiser.step()
            history.append((optimiser.tuner_stats(), [p.detach().clone() for p in ps]))
        return history

    first = run(opt, params)
    buffer.seek(0)
    clones = [p.clone().requires_grad_() for p in saved_params]
    resumed = YellowFin(clones, curv_win_width=4)
    resumed.load_state_dict(torch.load(buffer))
    assert resumed.step_count == 25 and resumed.lr_factor == 0.7
    second = run(resumed, clones)
    for (s1, p1), (s2, p2) in zip(first, second):
        assert s1 == s2
        for a, b in zip(p1, p2):
            assert torch.equal(a, b)
    assert opt.state["yellowfin"]["ring"] == resumed.state["yellowfin"]["ring"]


def test_state_dict_is_not_mutated_by_later_steps():
    x = torch.zeros(3, requires_grad=True)
    opt = YellowFin([x])
    x.grad = torch.ones(3)
    opt.step()
    tuner = opt.state_dict()["state"]["yellowfin"]
    snapshot = copy.deepcopy(tuner)
    x.grad = torch.ones(3)
    opt.step()
    assert tuner == snapshot


# --------------------------------------------------------------------------- odd inputs


def test_params_without_grad_and_zero_gradients():
    a = torch.ones(4, requires_grad=True)
    b = torch.ones(2, requires_grad=True)
    opt = YellowFin([a, b])
    assert opt.step() is None and opt.step_count == 0      # nothing has a gradient yet
    for _ in range(5):
        a.grad = torch.zeros(4)
        opt.step()
    assert torch.equal(a.detach(), torch.ones(4)) and torch.equal(b.detach(), torch.ones(2))
    assert all(math.isfinite(v) for v in opt.tuner_stats().values())
    assert "momentum_buffer" not in opt.state[b] and "grad_avg" not in opt.state[b]
    b.grad = torch.ones(2)                                 # b joins late
    a.grad = None
    opt.step()
    assert not torch.equal(b.detach(), torch.ones(2))


def test_sparse_gradient_raises_clear_error():
    emb = torch.nn.Embedding(10, 3, sparse=True)
    opt = YellowFin(emb.parameters())
    emb(torch.tensor([1, 2])).sum().backward()
    with pytest.raises(ParameterError, match="sparse"):
        opt.step()


def test_non_finite_gradient_raises_and_leaves_state_alone():
    x = torch.zeros(2, requires_grad=True)
    opt = YellowFin([x])
    x.grad = torch.ones(2)
    opt.step()
    before = copy.deepcopy(opt.state_dict())
    x.grad = torch.tensor([float("inf"), 1.0])
    with pytest.raises(WavernError, match="inf"):
        opt.step()
    assert opt.state_dict()["state"]["yellowfin"] == before["state"]["yellowfin"]


def test_multiple_param_groups_match_one_group():
    params_a, grads_at = _seeded_problem(seed=3)
    params_b = [p.detach().clone().requires_grad_() for p in params_a]
    one = YellowFin(params_a, curv_win_width=4)
    two = YellowFin([{"params": params_b[:1]}, {"params": params_b[1:]}], curv_win_width=4)
    for step in range(20):
        grads = grads_at(step)
        for pa, pb, g in zip(params_a, params_b, grads):
            pa.grad = None if g is None else g.clone()
            pb.grad = None if g is None else g.clone()
        one.step()
        two.step()
        assert one.tuner_stats() == two.tuner_stats()
    for pa, pb in zip(params_a, params_b):
        assert torch.equal(pa.detach(), pb.detach())
    assert [g["lr"] for g in two.param_groups] == [one.param_groups[0]["lr"]] * 2


def test_group_lr_factor_scales_only_its_group():
    a = torch.zeros(3, requires_grad=True)
    b = torch.zeros(3, requires_grad=True)
    opt = YellowFin([{"params": [a]}, {"params": [b], "lr_factor": 0.25}], lr=0.1)
    a.grad, b.grad = torch.ones(3), torch.ones(3)
    opt.step()
    torch.testing.assert_close(a.detach(), torch.full((3,), -0.1))
    torch.testing.assert_close(b.detach(), torch.full((3,), -0.025))


def test_closure_is_evaluated_with_grad_like_sgd():
    x = torch.tensor([2.0], requires_grad=True)
    opt = YellowFin([x], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (x ** 2).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert float(loss.detach()) == 4.0
    torch.testing.assert_close(x.detach(), torch.tensor([2.0 - 0.1 * 4.0]))


@pytest.mark.parametrize("kwargs, match", [
    (dict(lr=-1.0), "lr"), (dict(mu=1.0), "mu"), (dict(beta=1.0), "beta"),
    (dict(curv_win_width=0), "curv_win_width"), (dict(weight_decay=-1.0), "weight_decay"),
])
def test_constructor_rejects_bad_values(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        YellowFin([torch.zeros(1, requires_grad=True)], **kwargs)


def test_group_may_not_override_tuned_or_global_keys():
    x, y = torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
    with pytest.raises(ParameterError, match="lr_factor"):
        YellowFin([{"params": [x]}, {"params": [y], "lr": 0.5}])
    with pytest.raises(ParameterError, match="global"):
        YellowFin([{"params": [x]}, {"params": [y], "beta": 0.9}])


# --------------------------------------------------------------------------- non-default global options


def test_zero_debias_off_uses_raw_emas_closed_form():
    """zero_debias=False: d_t = 1, so after one step with gradient g every statistic is a
    plain first EMA term: h = (g2 + eps)^(1 - beta), C = beta (1 - beta) g2 and
    D = (1 - beta)^2 |g| / ((1 - beta) g2 + eps).  (With debiasing h = g2 + eps and C = eps.)"""
    beta = 0.9
    x = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    opt = YellowFin([x], beta=beta, zero_debias=False)
    x.grad = torch.tensor([3.0, 4.0], dtype=torch.float64)   # g2 = 25, |g| = 5
    opt.step()
    s = opt.tuner_stats()
    h = (25.0 + EPS) ** (1 - beta)
    assert s["h_min"] == pytest.approx(h, rel=1e-12) and s["h_max"] == pytest.approx(h, rel=1e-12)
    assert s["C"] == pytest.approx(beta * (1 - beta) * 25.0, rel=1e-12)
    assert s["D"] == pytest.approx((1 - beta) ** 2 * 5.0 / ((1 - beta) * 25.0 + EPS), rel=1e-12)
    # the same step with the default (debiased) statistics, for contrast
    y = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    deb = YellowFin([y], beta=beta)
    y.grad = torch.tensor([3.0, 4.0], dtype=torch.float64)
    deb.step()
    assert deb.tuner_stats()["h_max"] == pytest.approx(25.0 + EPS, rel=1e-12)
    assert deb.tuner_stats()["C"] == EPS


def _two_unit_steps_then(opt, x, spike):
    """Steps 0 and 1 with |g| = 1 (so h_max_1 = 1 + eps), then step 2 with gradient ``spike``."""
    for g in ([1.0, 0.0], [0.0, 1.0]):
        x.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
    x.grad = torch.tensor(spike, dtype=torch.float64)
    opt.step()


def test_adapt_clip_off_leaves_a_spike_unclipped():
    """adapt_clip=False turns off the adaptive clip, the exploding clip and the lr clamp."""
    x = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    opt = YellowFin([x], curv_win_width=4, adapt_clip=False)
    opt.lr_factor = 0.0
    _two_unit_steps_then(opt, x, [600.0, 800.0])           # |g| = 1000 >> sqrt(100 h_max_1) = 10
    s = opt.tuner_stats()
    assert s["grad_sq"] == 1e6                              # measured unclipped
    assert s["exploding"] == 1.0                            # still reported
    assert torch.equal(x.grad, torch.tensor([600.0, 800.0], dtype=torch.float64))  # left as given
    # no clamp either: a huge lr_factor is applied as is
    opt.lr_factor = 1e9
    x.grad = torch.tensor([600.0, 800.0], dtype=torch.float64)
    opt.step()
    s = opt.tuner_stats()
    assert s["lr"] == pytest.approx(s["lr_tuned"] * 1e9, rel=1e-12) and s["lr"] * 1000.0 > 100.0


def test_adaptive_clip_bound_uses_stat_protect_factor():
    """The adaptive clip (t >= 2) scales the gradient to sqrt(stat_protect_factor h_max_{t-1}) + eps."""
    factor = 4.0
    x = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    opt = YellowFin([x], curv_win_width=4, stat_protect_factor=factor)
    opt.lr_factor = 0.0
    _two_unit_steps_then(opt, x, [3.0, 4.0])                # |g| = 5 > sqrt(4 (1 + eps)) ~ 2
    bound = math.sqrt(factor * (1.0 + EPS)) + EPS
    coef = bound / (5.0 + 1e-6)                             # clip_grad_norm_'s scale
    assert opt.tuner_stats()["grad_sq"] == pytest.approx(25.0 * coef ** 2, rel=1e-9)
    # a looser factor leaves the same gradient alone: 5 < sqrt(100 (1 + eps))
    y = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    loose = YellowFin([y], curv_win_width=4, stat_protect_factor=100.0)
    loose.lr_factor = 0.0
    _two_unit_steps_then(loose, y, [3.0, 4.0])
    assert loose.tuner_stats()["grad_sq"] == 25.0


def test_lr_clamp_uses_max_move():
    """Step 0 applies the constructor's lr unless lr * |g| >= max_move; then lr = max_move / |g|."""
    x = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    opt = YellowFin([x], lr=0.1, max_move=0.05)
    x.grad = torch.tensor([3.0, 4.0], dtype=torch.float64)  # lr |g| = 0.5 >= 0.05
    opt.step()
    lr = 0.05 / math.sqrt(25.0 + EPS)
    assert opt.tuner_stats()["lr"] == pytest.approx(lr, rel=1e-12)
    torch.testing.assert_close(x.detach(), torch.tensor([-3.0 * lr, -4.0 * lr], dtype=torch.float64),
                               rtol=1e-12, atol=0.0)
    # a move below max_move is not clamped
    y = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    free = YellowFin([y], lr=0.1, max_move=1.0)
    y.grad = torch.tensor([3.0, 4.0], dtype=torch.float64)
    free.step()
    torch.testing.assert_close(y.detach(), torch.tensor([-0.3, -0.4], dtype=torch.float64), rtol=1e-12, atol=0.0)


def test_negative_or_nan_group_lr_factor_is_refused():
    x, y = torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
    with pytest.raises(ParameterError, match="lr_factor"):
        YellowFin([{"params": [x]}, {"params": [y], "lr_factor": -1.0}])
    opt = YellowFin([x])
    for bad in (-0.5, float("nan")):
        with pytest.raises(ParameterError, match="lr_factor"):
            opt.add_param_group({"params": [y], "lr_factor": bad})
    assert len(opt.param_groups) == 1
    opt.add_param_group({"params": [y], "lr_factor": 0.0})  # zero freezes a group: allowed
    assert opt.param_groups[1]["lr_factor"] == 0.0
