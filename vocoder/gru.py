"""A GRU recurrence with a hand-written backward, for fast teacher-forced training on the CPU.

Computes exactly what ``torch.nn.GRU`` computes (gate order r, z, n; ARCHITECTURE.md):

    r = σ(gi_r + gh_r),  z = σ(gi_z + gh_z),  n = tanh(gi_n + r ⊙ gh_n),  h' = (1 − z) ⊙ n + z ⊙ h
    with gh = W_hh h + b_hh,

but takes the input term ``gi`` precomputed, so the caller can add the per-frame conditioning
once per frame instead of once per sample. Why not ``nn.GRU``: on the CPU its backward
accumulates ``dW_hh`` with one skinny (H × B) @ (B × 3H) product per time step; here the
backward loop only propagates ``dh`` and ``dW_hh`` is one large matrix product at the end
(over all N·B rows). Measured on one core (docs/bench/train_vocoder.md): 1.25× nn.GRU's
samples per CPU-second at H 256, batch 16, float32, and 1.45× at H 384, batch 16, bfloat16;
at batch 64 the two are level. The matrix products can run in bfloat16 (weights and h cast,
float32 accumulation and state).
"""

from __future__ import annotations

import torch

__all__ = ["gru_sequence"]


class _GRUSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gi: torch.Tensor, w_hh: torch.Tensor, b_hh: torch.Tensor, h0: torch.Tensor,
                mm_dtype: torch.dtype):
        with torch.autocast("cpu", enabled=False), torch.autocast("cuda", enabled=False):
            n_steps, b, three_h = gi.shape
            h = three_h // 3
            gi = gi.float()
            w_t = w_hh.t().to(mm_dtype)  # (H, 3H)
            bias = b_hh.to(mm_dtype)
            hs = gi.new_empty(n_steps + 1, b, h)  # hs[0] = h0, hs[t + 1] = state after step t
            # The states as the matrix products read them (a view of hs when mm_dtype is float32);
            # kept for the backward's dW_hh product.
            hs_mm = hs if mm_dtype == torch.float32 else gi.new_empty(n_steps + 1, b, h, dtype=mm_dtype)
            gates_rz = gi.new_empty(n_steps, b, 2 * h)  # r | z
            cand = gi.new_empty(n_steps, b, h)  # n
            gh = gi.new_empty(n_steps, b, 3 * h, dtype=mm_dtype)  # W_hh h + b_hh, every step
            tmp = gi.new_empty(b, h)
            hs[0] = h0
            if hs_mm is not hs:
                hs_mm[0] = h0
            for t in range(n_steps):
                g = gh[t]
                torch.addmm(bias, hs_mm[t], w_t, out=g)  # (B, 3H)
                rz = gates_rz[t]
                torch.add(gi[t, :, :2 * h], g[:, :2 * h], out=rz)
                rz.sigmoid_()
                c = cand[t]
                torch.addcmul(gi[t, :, 2 * h:], rz[:, :h], g[:, 2 * h:], out=c)
                c.tanh_()
                torch.sub(hs[t], c, out=tmp)  # h' = n + z (h - n)
                torch.addcmul(c, rz[:, h:], tmp, out=hs[t + 1])
                if hs_mm is not hs:
                    hs_mm[t + 1].copy_(hs[t + 1])
        ctx.mm_dtype = mm_dtype
        ctx.save_for_backward(w_hh, hs, hs_mm, gates_rz, cand, gh)
        return hs[1:]

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        w_hh, hs, hs_mm, gates_rz, cand, gh = ctx.saved_tensors
        mm_dtype = ctx.mm_dtype
        with torch.autocast("cpu", enabled=False), torch.autocast("cuda", enabled=False):
            n_steps, b, h = cand.shape
            grad_out = grad_out.float()
            r, z = gates_rz[..., :h], gates_rz[..., h:]
            # Everything that does not depend on dh, for all steps at once (vectorised, outside the loop).
            coef_n = 1.0 - cand * cand
            coef_n *= 1.0 - z  # d pre_n / d h'
            coef_z = hs[:-1] - cand
            coef_z *= z * (1.0 - z)  # d pre_z / d h'
            coef_r = gh[..., 2 * h:].float() * (r * (1.0 - r))  # d pre_r / d pre_n (gh is saved: not in place)
            w = w_hh.to(mm_dtype)  # (3H, H)
            d_gh = grad_out.new_empty(n_steps, b, 3 * h)  # d(W_hh h + b_hh) per step
            d_gh_mm = d_gh if mm_dtype == torch.float32 else grad_out.new_empty(n_steps, b, 3 * h, dtype=mm_dtype)
            d_pre_n = grad_out.new_empty(n_steps, b, h)  # d(gi_n) per step
            dh = grad_out.new_zeros(b, h)
            dh_next = grad_out.new_empty(b, h)
            back = grad_out.new_empty(b, h, dtype=mm_dtype)
            for t in range(n_steps - 1, -1, -1):
                dh.add_(grad_out[t])
                pn = d_pre_n[t]
                torch.mul(dh, coef_n[t], out=pn)
                g = d_gh[t]
                torch.mul(pn, coef_r[t], out=g[:, :h])
                torch.mul(dh, coef_z[t], out=g[:, h:2 * h])
                torch.mul(pn, r[t], out=g[:, 2 * h:])
                if d_gh_mm is not d_gh:
                    d_gh_mm[t].copy_(g)
                torch.mm(d_gh_mm[t], w, out=back)
                torch.addcmul(back, dh, z[t], out=dh_next)  # dh_{t-1} = z ⊙ dh_t + d_gh W_hh
                dh, dh_next = dh_next, dh
            d_w = (d_gh_mm.reshape(-1, 3 * h).t() @ hs_mm[:-1].reshape(-1, h)).float()
            d_b = d_gh.reshape(-1, 3 * h).sum(0)
            d_gi = None
            if ctx.needs_input_grad[0]:  # d gi = d gh on the r, z rows; d pre_n on the n rows
                d_gh[..., 2 * h:] = d_pre_n
                d_gi = d_gh
        return d_gi, d_w.to(w_hh.dtype), d_b.to(w_hh.dtype), dh.to(hs.dtype), None


def gru_sequence(gi: torch.Tensor, w_hh: torch.Tensor, b_hh: torch.Tensor, h0: torch.Tensor | None = None,
                 *, matmul_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Run the GRU recurrence over precomputed input terms.

    Args:
        gi: (N, B, 3H) time-major input term ``W_ih x_t + b_ih`` (rows r, z, n).
        w_hh: (3H, H) recurrent weight; b_hh: (3H,) recurrent bias.
        h0: (B, H) initial state (default zeros).
        matmul_dtype: dtype of the two matrix products per step (float32 or bfloat16);
            states, gates and gradients stay float32.

    Returns:
        (N, B, H) float32 states h_1 .. h_N.
    """
    n_steps, b, three_h = gi.shape
    if three_h % 3 or w_hh.shape != (three_h, three_h // 3):
        raise ValueError(f"gi (N, B, 3H) and w_hh (3H, H) disagree: {tuple(gi.shape)} vs {tuple(w_hh.shape)}")
    if h0 is None:
        h0 = gi.new_zeros(b, three_h // 3, dtype=torch.float32)
    return _GRUSequence.apply(gi, w_hh, b_hh, h0, matmul_dtype)
