"""Sparse self-attention for the text encoder: Longformer window + global, and strided.

Two patterns, each as a function on already-projected tensors ``(B, heads, N, head_dim)``
and as a module that owns its projections (REFERENCES.md §2 and §3):

* :func:`longformer_attention`, :class:`LongformerSelfAttention` -- Beltagy et al. 2020,
  with the semantics of Hugging Face ``LongformerSelfAttention`` so that weights carry over.
* :func:`strided_attention`, :class:`StridedSelfAttention` -- Child et al. 2019, the
  per-head split of seed 000 (half the heads local, half strided).

The band
--------
Both local patterns are one band: query ``i`` sees key ``j`` when ``-lo <= j - i <= hi``
(Longformer: ``lo = hi = window / 2``; causal strided-local: ``lo = stride - 1, hi = 0``).
:class:`_BandAttention` computes it without any ``N x N`` tensor. All ``B * heads``
sequences are laid end to end in one flat ``(rows, head_dim)`` buffer, each padded to a
multiple of the query block ``c`` plus a gap of at least ``max(lo, hi)`` masked keys, so
that no window reaches into a neighbouring sequence's valid keys. Query block ``t`` (rows
``[t c, (t + 1) c)``) meets the key window ``[t c - lo, t c - lo + W)`` with
``W = c * ceil((c + lo + hi) / c)``; the windows of all blocks are one strided view of the
flat keys (``unfold``, no copy), so the scores of a group of blocks are one ``bmm``
``(g, c, d) @ (g, d, W)``. A fixed ``(c, W)`` pattern cuts the band out of each window (it
is the bmm's initial value), a per-key bias removes padding, gap and (Longformer) global
keys in the few windows that hold any. The softmax is taken jointly with the scores against
the global keys, in base 2 (``exp2`` is several times faster than ``exp`` on the CPU), and
only the row's log-sum-exp is kept, as in FlashAttention: backward recomputes the scores
group by group, so memory is O(N * d) plus one group's scores (plus one byte per score for
the dropout mask when training with dropout), and time O(N * W * d). Each group gathers its
sequences' global keys for itself (a copy per block of all G of them took N G d / c). A band
wider than the sequence is cut to it. Half-precision inputs are attended in float32.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from wavern.errors import ParameterError

__all__ = [
    "LongformerSelfAttention",
    "StridedSelfAttention",
    "longformer_attention",
    "strided_attention",
]

log = logging.getLogger(__name__)

# The kernel works in base 2 (exp2 runs several times faster than exp on the CPU): it scales q
# by log2(e) / sqrt(d), so exp2 of its scores is exp of the natural ones.
_LOG2E = 1.0 / math.log(2.0)

# Scores per group of query blocks on the CPU (float32: 1 MiB, one L2), small enough that the
# softmax passes run from cache, large enough that one bmm amortises its call. Elsewhere
# (untuned) a group is larger, to keep the number of kernel launches down.
_GROUP_SCORES = {"cpu": 1 << 18}
_GROUP_SCORES_OTHER = 1 << 24


# ---------------------------------------------------------------------------------------
# The band kernel
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Band:
    """Geometry of the flat band layout (see the module docstring)."""

    n: int  # sequence length N
    lo: int  # keys up to lo positions before the query
    hi: int  # keys up to hi positions after the query
    n_seq: int  # B * heads
    block: int  # query block c
    width: int  # key window W, a multiple of c, >= c + lo + hi
    seq_stride: int  # rows per sequence in the flat layout, a multiple of c, >= N + max(lo, hi)
    group: int  # query blocks per bmm

    @property
    def n_blocks(self) -> int:
        return self.n_seq * self.seq_stride // self.block


def _band(n: int, lo: int, hi: int, n_seq: int, device: torch.device) -> _Band:
    # Blocks of 64 rows keep bmm efficient; a narrow band takes smaller blocks so that the
    # window does not waste most of its columns.
    block = 64
    while block > 16 and 2 * block > lo + hi:
        block //= 2
    width = block * (-(-(block + lo + hi) // block))
    seq_stride = block * (-(-(n + max(lo, hi)) // block))
    group = max(1, _GROUP_SCORES.get(device.type, _GROUP_SCORES_OTHER) // (block * width))
    return _Band(n, lo, hi, n_seq, block, width, seq_stride, group)


def _to_flat(x: Tensor, band: _Band, dtype: torch.dtype, *, left: int, right: int) -> Tensor:
    """(B, h, N, d) -> (left + n_seq * seq_stride + right, d), zeros around each sequence."""
    b, h, n, d = x.shape
    rows = band.n_seq * band.seq_stride
    flat = x.new_empty(left + rows + right, d, dtype=dtype)
    flat[:left].zero_()
    flat[left + rows :].zero_()
    seqs = flat[left : left + rows].view(b, h, band.seq_stride, d)
    seqs[:, :, :n] = x
    seqs[:, :, n:].zero_()
    return flat


def _from_flat(flat: Tensor, band: _Band, shape: torch.Size, *, left: int) -> Tensor:
    """Inverse of :func:`_to_flat`: (rows, d) -> contiguous (B, h, N, d)."""
    b, h, n, d = shape
    rows = flat[left : left + band.n_seq * band.seq_stride].view(b, h, band.seq_stride, d)
    return rows[:, :, :n].contiguous()


def _key_bias(key_ok: Tensor, band: _Band, heads: int, dtype: torch.dtype) -> Tensor:
    """Additive key bias of the flat key buffer: 0 for usable keys, -inf elsewhere. (key_rows,)"""
    b, n = key_ok.shape
    per_seq = torch.full((b, band.seq_stride), -math.inf, dtype=dtype, device=key_ok.device)
    per_seq[:, :n].masked_fill_(key_ok, 0.0)
    flat = per_seq[:, None, :].expand(b, heads, band.seq_stride).reshape(-1)
    return F.pad(flat, (band.lo, band.width - band.block - band.lo), value=-math.inf)


def _band_pattern(band: _Band, dtype: torch.dtype, device: torch.device) -> Tensor:
    """(c, W) additive mask of one window: row r, column s is key j - i = s - lo - r."""
    r = torch.arange(band.block, device=device)[:, None]
    s = torch.arange(band.width, device=device)[None, :]
    inside = (s >= r) & (s <= r + band.lo + band.hi)
    pattern = torch.zeros(band.block, band.width, dtype=dtype, device=device)
    return pattern.masked_fill_(~inside, -math.inf)


def _dirty_blocks(bias_w: Tensor) -> Tensor:
    """Sorted indices of the blocks whose key window holds a masked key. (T, W) -> (n_dirty,)"""
    return (bias_w == -math.inf).any(1).nonzero()[:, 0]


def _scores(qb, kw, pattern, bias_w, dirty, t0: int, t1: int) -> Tensor:
    """Masked base-2 band scores of blocks [t0, t1): (g, c, W).

    The band pattern enters as the bmm's initial value; the key bias is added only to the
    blocks whose window holds a masked key (padding, gap or global keys are rare).
    """
    s = torch.baddbmm(pattern, qb[t0:t1], kw[t0:t1])
    lo, hi = torch.searchsorted(dirty, torch.tensor([t0, t1], device=dirty.device)).tolist()
    if hi > lo:
        idx = dirty[lo:hi]
        s[idx - t0] += bias_w[idx, None, :]
    return s


def _global_keys(k_glob, v_glob, glob_ok, band: _Band, dtype: torch.dtype):
    """The extra keys per sequence: k (n_seq, G, d), v (n_seq, G, d), their bias (n_seq, 1, G),
    and each block's sequence (T,). A group of blocks gathers its own rows (g, G, d) from these:
    one copy per block of all the global keys would take T G d memory."""
    b, h, g, d = k_glob.shape
    bias = torch.zeros(b, g, dtype=dtype, device=glob_ok.device).masked_fill_(~glob_ok, -math.inf)
    bias = bias[:, None, None, :].expand(b, h, 1, g).reshape(b * h, 1, g)
    seq_of = torch.arange(band.n_blocks, device=k_glob.device) // (band.seq_stride // band.block)
    return k_glob.to(dtype).reshape(b * h, g, d), v_glob.to(dtype).reshape(b * h, g, d), bias, seq_of


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Half-precision inputs (autocast) are attended in float32: exp2 and the sums need it."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


class _BandAttention(torch.autograd.Function):
    """Band attention plus extra (global) keys, one joint softmax; see the module docstring.

    Inputs: q, k, v (B, h, N, d); k_glob, v_glob (B, h, G, d) keys every row also sees;
    key_ok (B, N) bool, keys usable inside the band; glob_ok (B, G) bool, usable extra keys;
    band; dropout_p on the attention probabilities. Output (B, h, N, d); rows whose keys are
    all masked output 0.
    """

    @staticmethod
    def forward(ctx, q, k, v, k_glob, v_glob, key_ok, glob_ok, band: _Band, dropout_p: float):
        shape = q.shape
        b, h, n, d = shape
        c, width, t_all = band.block, band.width, band.n_blocks
        right = width - c - band.lo
        dt = _compute_dtype(q.dtype)
        qf = _to_flat(q, band, dt, left=0, right=0).mul_(_LOG2E * d**-0.5)  # after the bias
        kf = _to_flat(k, band, dt, left=band.lo, right=right)
        vf = _to_flat(v, band, dt, left=band.lo, right=right)
        key_bias = _key_bias(key_ok, band, h, dt)
        n_glob = k_glob.shape[2]
        if n_glob:
            kg, vg, glob_bias, seq_of = _global_keys(k_glob, v_glob, glob_ok, band, dt)
        pattern = _band_pattern(band, dt, q.device)
        qb = qf.view(t_all, c, d)
        kw = kf.unfold(0, width, c)  # (T, d, W) view
        vw = vf.unfold(0, width, c).transpose(1, 2)  # (T, W, d) view
        bias_w = key_bias.unfold(0, width, c)  # (T, W) view
        dirty = _dirty_blocks(bias_w)
        out = torch.empty_like(qb)
        lse = torch.empty(t_all, c, 1, dtype=dt, device=q.device)
        keeps = []
        for t0 in range(0, t_all, band.group):
            t1 = min(t0 + band.group, t_all)
            s = _scores(qb, kw, pattern, bias_w, dirty, t0, t1)  # (g, c, W)
            m = s.amax(-1, keepdim=True)
            if n_glob:
                seqs = seq_of[t0:t1]
                vg_g = vg.index_select(0, seqs)
                sg = torch.baddbmm(glob_bias.index_select(0, seqs), qb[t0:t1], kg.index_select(0, seqs).transpose(1, 2))
                m = torch.maximum(m, sg.amax(-1, keepdim=True))
            m.masked_fill_(m == -math.inf, 0.0)  # a row with no usable key outputs 0
            p = s.sub_(m).exp2_()
            denom = p.sum(-1, keepdim=True)
            if n_glob:
                pg = sg.sub_(m).exp2_()
                denom += pg.sum(-1, keepdim=True)
            denom.clamp_min_(1.0)  # >= 1 for any row with a usable key (its max gives exp(0))
            lse[t0:t1] = m + denom.log2()
            if dropout_p > 0.0:
                keep = torch.rand_like(p) >= dropout_p
                keep_g = torch.rand_like(pg) >= dropout_p if n_glob else None
                keeps.append((keep, keep_g))
                p.masked_fill_(~keep, 0.0).mul_(1.0 / (1.0 - dropout_p))
                if n_glob:
                    pg.masked_fill_(~keep_g, 0.0).mul_(1.0 / (1.0 - dropout_p))
            o = torch.bmm(p, vw[t0:t1], out=out[t0:t1])
            if n_glob:
                o.baddbmm_(pg, vg_g)
            o.div_(denom)
        ctx.save_for_backward(qf, kf, vf, k_glob, v_glob, key_ok, glob_ok, out, lse)
        ctx.band, ctx.dropout_p, ctx.keeps, ctx.shape = band, dropout_p, keeps, shape
        ctx.dtypes = (q.dtype, k.dtype, v.dtype)
        return _from_flat(out.view(-1, d), band, shape, left=0).to(q.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        qf, kf, vf, k_glob, v_glob, key_ok, glob_ok, out, lse = ctx.saved_tensors
        band, dropout_p, shape = ctx.band, ctx.dropout_p, ctx.shape
        b, h, n, d = shape
        c, width, t_all = band.block, band.width, band.n_blocks
        n_sub = width // c
        dt = qf.dtype
        dob = _to_flat(grad_out, band, dt, left=0, right=0).view(t_all, c, d)
        delta = (dob * out).sum(-1, keepdim=True)  # (T, c, 1): rowsum(dO * O)
        key_bias = _key_bias(key_ok, band, h, dt)
        n_glob = k_glob.shape[2]
        if n_glob:
            kg, vg, glob_bias, seq_of = _global_keys(k_glob, v_glob, glob_ok, band, dt)
            dkg = torch.zeros_like(kg)
            dvg = torch.zeros_like(vg)
        pattern = _band_pattern(band, dt, qf.device)
        qb = qf.view(t_all, c, d)
        kw = kf.unfold(0, width, c)  # (T, d, W)
        vw_t = vf.unfold(0, width, c)  # (T, d, W): V window, transposed
        bias_w = key_bias.unfold(0, width, c)
        dirty = _dirty_blocks(bias_w)
        dq = torch.empty_like(qb)
        dk_blocks = torch.zeros_like(kf).view(-1, c, d)  # T + n_sub - 1 blocks
        dv_blocks = torch.zeros_like(vf).view(-1, c, d)
        scale = 1.0 / (1.0 - dropout_p) if dropout_p > 0.0 else 1.0
        for i, t0 in enumerate(range(0, t_all, band.group)):
            t1 = min(t0 + band.group, t_all)
            g = t1 - t0
            p = _scores(qb, kw, pattern, bias_w, dirty, t0, t1)
            p.sub_(lse[t0:t1]).exp2_()  # probabilities before dropout
            do = dob[t0:t1]
            if dropout_p > 0.0:
                keep, keep_g = ctx.keeps[i]
                p_drop = p.masked_fill(~keep, 0.0).mul_(scale)
            else:
                p_drop = p
            dvw = torch.bmm(p_drop.transpose(1, 2), do)  # (g, W, d)
            dp = torch.bmm(do, vw_t[t0:t1])  # (g, c, W)
            if dropout_p > 0.0:
                dp.masked_fill_(~keep, 0.0).mul_(scale)
            ds = dp.sub_(delta[t0:t1]).mul_(p)  # dS = P * (dP - rowsum(dO * O)), natural scores
            torch.bmm(ds, kw[t0:t1].transpose(1, 2), out=dq[t0:t1])
            dkw = torch.bmm(ds.transpose(1, 2), qb[t0:t1])  # (g, W, d)
            for o, (dk_o, dv_o) in enumerate(
                zip(dkw.view(g, n_sub, c, d).unbind(1), dvw.view(g, n_sub, c, d).unbind(1))
            ):
                dk_blocks[t0 + o : t1 + o] += dk_o
                dv_blocks[t0 + o : t1 + o] += dv_o
            if n_glob:
                seqs = seq_of[t0:t1]
                kg_g = kg.index_select(0, seqs)
                pg = torch.baddbmm(glob_bias.index_select(0, seqs), qb[t0:t1], kg_g.transpose(1, 2))
                pg.sub_(lse[t0:t1]).exp2_()
                if dropout_p > 0.0:
                    pg_drop = pg.masked_fill(~keep_g, 0.0).mul_(scale)
                else:
                    pg_drop = pg
                dvg.index_add_(0, seqs, torch.bmm(pg_drop.transpose(1, 2), do))
                dpg = torch.bmm(do, vg.index_select(0, seqs).transpose(1, 2))
                if dropout_p > 0.0:
                    dpg.masked_fill_(~keep_g, 0.0).mul_(scale)
                dsg = dpg.sub_(delta[t0:t1]).mul_(pg)
                dq[t0:t1].baddbmm_(dsg, kg_g)
                dkg.index_add_(0, seqs, torch.bmm(dsg.transpose(1, 2), qb[t0:t1]))
        # natural scores S = (q / sqrt(d)) k = qb k / log2(e)
        dq.mul_(d**-0.5)
        dk_blocks.mul_(1.0 / _LOG2E)
        q_dtype, k_dtype, v_dtype = ctx.dtypes
        grad_q = _from_flat(dq.view(-1, d), band, shape, left=0).to(q_dtype)
        grad_k = _from_flat(dk_blocks.view(-1, d), band, shape, left=band.lo).to(k_dtype)
        grad_v = _from_flat(dv_blocks.view(-1, d), band, shape, left=band.lo).to(v_dtype)
        if n_glob:
            grad_kg = dkg.view(b, h, n_glob, d).mul_(1.0 / _LOG2E).to(k_glob.dtype)
            grad_vg = dvg.view(b, h, n_glob, d).to(v_glob.dtype)
        else:
            grad_kg = torch.zeros_like(k_glob)
            grad_vg = torch.zeros_like(v_glob)
        return grad_q, grad_k, grad_v, grad_kg, grad_vg, None, None, None, None


def _band_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    lo: int,
    hi: int,
    key_ok: Tensor,
    k_glob: Tensor | None = None,
    v_glob: Tensor | None = None,
    glob_ok: Tensor | None = None,
    dropout_p: float = 0.0,
) -> Tensor:
    """Band attention ``-lo <= j - i <= hi`` over keys with ``key_ok``, plus global keys."""
    b, h, n, d = q.shape
    if k_glob is None:
        k_glob = v_glob = q.new_zeros(b, h, 0, d)
        glob_ok = torch.zeros(b, 0, dtype=torch.bool, device=q.device)
    # A band wider than the sequence sees the same keys as one of N - 1 each side (and would
    # cost (N + w) w: a 4096 window on 100 tokens was 37x slower, 10^9 asked for gigabytes).
    lo, hi = min(lo, max(n - 1, 0)), min(hi, max(n - 1, 0))
    band = _band(n, lo, hi, b * h, q.device)
    return _BandAttention.apply(q, k, v, k_glob, v_glob, key_ok, glob_ok, band, dropout_p)


# ---------------------------------------------------------------------------------------
# Longformer
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _GlobalIndex:
    """Where the global tokens are: K tokens in all, at most G per sequence."""

    batch: Tensor  # (K,) sequence of each global token
    pos: Tensor  # (K,) its position
    slot: Tensor  # (K,) its rank among its sequence's global tokens
    slot_pos: Tensor  # (B, G) position of each slot (0 where unused)
    slot_ok: Tensor  # (B, G) slot is used

    @property
    def n_slots(self) -> int:
        return self.slot_pos.shape[1]


def _global_index(global_mask: Tensor, padding_mask: Tensor) -> _GlobalIndex:
    is_global = global_mask & ~padding_mask  # padding wins over global
    counts = is_global.sum(1)
    n_slots = int(counts.max()) if counts.numel() else 0
    batch, pos = is_global.nonzero(as_tuple=True)  # row-major: sorted by batch, then position
    device = global_mask.device
    slot = torch.arange(batch.numel(), device=device) - (counts.cumsum(0) - counts)[batch]
    slot_pos = torch.zeros(global_mask.shape[0], n_slots, dtype=torch.long, device=device)
    slot_pos[batch, slot] = pos
    slot_ok = torch.zeros(global_mask.shape[0], n_slots, dtype=torch.bool, device=device)
    slot_ok[batch, slot] = True
    return _GlobalIndex(batch, pos, slot, slot_pos, slot_ok)


def _gather_slots(x: Tensor, index: _GlobalIndex) -> Tensor:
    """(B, h, N, d) -> (B, h, G, d), the rows of the global slots."""
    b, h, _, d = x.shape
    idx = index.slot_pos[:, None, :, None].expand(b, h, index.n_slots, d)
    return x.gather(2, idx)


def _check_masks(
    b: int, n: int, device: torch.device, global_mask: Tensor | None, padding_mask: Tensor | None
) -> tuple[Tensor, Tensor]:
    """The two (B, N) bool masks; None stands for all False."""
    masks = []
    for name, mask in (("global_mask", global_mask), ("padding_mask", padding_mask)):
        if mask is None:
            mask = torch.zeros(b, n, dtype=torch.bool, device=device)
        elif mask.shape != (b, n) or mask.dtype != torch.bool:
            raise ParameterError(
                f"{name} must be a bool tensor of shape (batch, N) = ({b}, {n}), "
                f"got {mask.dtype} {tuple(mask.shape)}"
            )
        masks.append(mask)
    return masks[0], masks[1]


def _check_qkv(*tensors: Tensor) -> None:
    shape = tensors[0].shape
    if len(shape) != 4:
        raise ParameterError(f"expected (B, heads, N, head_dim) tensors, got shape {tuple(shape)}")
    for x in tensors[1:]:
        if x.shape != shape:
            raise ParameterError(f"q, k, v shapes differ: {tuple(shape)} vs {tuple(x.shape)}")


def _is_int(x) -> bool:
    return not isinstance(x, (bool, float)) and hasattr(type(x), "__index__")


def _check_dropout(p: float) -> None:
    if not (isinstance(p, (int, float)) and 0.0 <= p < 1.0):
        raise ParameterError(f"dropout_p must be in [0, 1), got {p!r}")


def _check_window(window: int) -> None:
    if not _is_int(window) or window < 2 or window % 2:
        raise ParameterError(
            f"window must be an even number >= 2 (two-sided: |i - j| <= window / 2), got {window}"
        )


def _global_probs(
    scores: Tensor, index: _GlobalIndex, padding_mask: Tensor, dropout_p: float
) -> Tensor:
    """Softmax of the global rows' scores (B, h, G, N) over the non-padding keys, dropout."""
    s = scores.masked_fill(padding_mask[:, None, None, :], -math.inf)
    s = s.masked_fill(~index.slot_ok[:, None, :, None], 0.0)  # unused slots stay finite
    return F.dropout(torch.softmax(s, dim=-1), p=dropout_p, training=dropout_p > 0.0)


def _longformer(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    global_rows: Tensor | None,
    *,
    index: _GlobalIndex,
    padding_mask: Tensor,
    window: int,
    dropout_p: float,
) -> Tensor:
    """Longformer attention given the outputs of the global rows, (B, h, G, d) per slot."""
    is_global = torch.zeros_like(padding_mask)
    is_global[index.batch, index.pos] = True
    # Local rows: the band without global keys (they are counted once, among the extra keys).
    out = _band_attention(
        q,
        k,
        v,
        lo=window // 2,
        hi=window // 2,
        key_ok=~(padding_mask | is_global),
        k_glob=_gather_slots(k, index),
        v_glob=_gather_slots(v, index),
        glob_ok=index.slot_ok,
        dropout_p=dropout_p,
    )
    if index.n_slots:
        # Global rows replace the local result.
        rows = global_rows.transpose(1, 2)[index.batch, index.slot]  # (K, h, d)
        out = out.transpose(1, 2).index_put((index.batch, index.pos), rows).transpose(1, 2)
    return out.masked_fill(padding_mask[:, None, :, None], 0.0)


def longformer_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_g: Tensor,
    k_g: Tensor,
    v_g: Tensor,
    *,
    window: int,
    global_mask: Tensor | None = None,
    padding_mask: Tensor | None = None,
    dropout_p: float = 0.0,
) -> Tensor:
    """Longformer sliding-window + global self-attention (Beltagy et al. 2020, §3.1).

    Semantics of Hugging Face ``LongformerSelfAttention``:

    * an ordinary row i: one softmax over the keys j with ``|i - j| <= window / 2`` plus
      every global token (ordinary q, k, v; a global token inside the window counts once);
    * a global row: ``q_g[i]`` against ``k_g`` of every non-padding token, values ``v_g``;
      it replaces the local result;
    * scores use ``q / sqrt(head_dim)``; padding keys are excluded everywhere, padding rows
      output 0, and a token that is both padding and global is padding.

    Memory and time are O(N * window); no N x N tensor is built.

    Parameters
    ----------
    q, k, v, q_g, k_g, v_g : Tensor
        (B, heads, N, head_dim) projected queries, keys, values (with their biases) and their
        global counterparts. ``q_g`` is read only at global positions. ``q_g``, ``k_g``,
        ``v_g`` always receive a gradient (zero when no token is global).
    window : int
        Two-sided window w, even and >= 2: w + 1 keys per row including itself.
    global_mask : Tensor, optional
        (B, N) bool, True where a token attends and is attended globally. Default: none.
    padding_mask : Tensor, optional
        (B, N) bool, True where a token is padding. Default: none.
    dropout_p : float
        Dropout on the attention probabilities (0 at inference).

    Returns
    -------
    Tensor
        (B, heads, N, head_dim).
    """
    _check_qkv(q, k, v, q_g, k_g, v_g)
    _check_window(window)
    _check_dropout(dropout_p)
    b, _, n, d = q.shape
    global_mask, padding_mask = _check_masks(b, n, q.device, global_mask, padding_mask)
    index = _global_index(global_mask, padding_mask)
    global_rows = None
    if index.n_slots:
        q_glob = _gather_slots(q_g, index) * d**-0.5  # (B, h, G, d)
        probs = _global_probs(q_glob @ k_g.transpose(-1, -2), index, padding_mask, dropout_p)
        global_rows = probs @ v_g
    out = _longformer(
        q,
        k,
        v,
        global_rows,
        index=index,
        padding_mask=padding_mask,
        window=window,
        dropout_p=dropout_p,
    )
    if not index.n_slots:
        # Keep a (zero) gradient path to the global projections, as when tokens are global.
        out = out + (q_g[..., :0].sum() + k_g[..., :0].sum() + v_g[..., :0].sum())
    return out


def _heads(x: Tensor, n_heads: int) -> Tensor:
    """(B, N, D) -> (B, heads, N, D / heads) view."""
    b, n, dim = x.shape
    return x.view(b, n, n_heads, dim // n_heads).transpose(1, 2)


def _merge_heads(x: Tensor) -> Tensor:
    """(B, heads, N, d) -> (B, N, heads * d)."""
    b, h, n, d = x.shape
    return x.transpose(1, 2).reshape(b, n, h * d)


def _check_input(x: Tensor, d_model: int) -> None:
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ParameterError(f"expected x of shape (B, N, {d_model}), got {tuple(x.shape)}")


def _check_heads(d_model: int, n_heads: int) -> None:
    if n_heads < 1 or d_model % n_heads:
        raise ParameterError(
            f"d_model must be a multiple of n_heads >= 1, got d_model {d_model}, n_heads {n_heads}"
        )


class LongformerSelfAttention(nn.Module):
    """Longformer self-attention layer: six projections, :func:`longformer_attention`, output.

    The projection names (``query``, ``key``, ``value``, ``query_global``, ``key_global``,
    ``value_global``) are Hugging Face's, so its weights load by name; ``out`` is the output
    projection (Hugging Face keeps it in ``LongformerSelfOutput.dense``).

    Parameters
    ----------
    d_model : int
        Model width D, a multiple of ``n_heads``.
    n_heads : int
        Attention heads.
    window : int
        Two-sided window, even (see :func:`longformer_attention`).
    dropout : float
        Dropout on the attention probabilities while training.
    """

    def __init__(self, d_model: int, n_heads: int, window: int, dropout: float = 0.0):
        super().__init__()
        _check_heads(d_model, n_heads)
        _check_window(window)
        if not 0.0 <= dropout < 1.0:
            raise ParameterError(f"dropout must be in [0, 1), got {dropout}")
        self.d_model, self.n_heads, self.window, self.dropout = d_model, n_heads, window, dropout
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.query_global = nn.Linear(d_model, d_model)
        self.key_global = nn.Linear(d_model, d_model)
        self.value_global = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(
        self,
        x: Tensor,
        *,
        global_mask: Tensor | None = None,
        padding_mask: Tensor | None = None,
    ) -> Tensor:
        """Attend over ``x``.

        Parameters
        ----------
        x : Tensor
            (B, N, D).
        global_mask, padding_mask : Tensor, optional
            (B, N) bool, as in :func:`longformer_attention`.

        Returns
        -------
        Tensor
            (B, N, D); padding rows are the output projection's bias.
        """
        _check_input(x, self.d_model)
        b, n, _ = x.shape
        global_mask, padding_mask = _check_masks(b, n, x.device, global_mask, padding_mask)
        index = _global_index(global_mask, padding_mask)
        h = self.n_heads
        q, k, v = (_heads(proj(x), h) for proj in (self.query, self.key, self.value))
        dropout_p = self.dropout if self.training else 0.0
        global_rows, unused = None, [self.query_global, self.key_global, self.value_global]
        if index.n_slots:
            global_rows, unused = self._global_rows(x, index, padding_mask, dropout_p)
        out = _longformer(
            q,
            k,
            v,
            global_rows,
            index=index,
            padding_mask=padding_mask,
            window=self.window,
            dropout_p=dropout_p,
        )
        y = self.out(_merge_heads(out))
        # Zero gradients for what this batch did not use, so that every parameter gets a
        # gradient whatever the batch (distributed training requires it).
        return y + sum(p[:0].sum() for m in unused for p in m.parameters(recurse=False))

    def _global_rows(
        self, x: Tensor, index: _GlobalIndex, padding_mask: Tensor, dropout_p: float
    ) -> tuple[Tensor, list[nn.Module]]:
        """Outputs of the global rows (B, h, G, d), and the projections left unused.

        Only the G global rows need Q_g. With few global tokens (2 G h <= D), K_g and V_g are
        never formed for all N tokens: ``q . (W_k x_n + b_k) = (W_k^T q) . x_n + q . b_k``,
        where the last term shifts a whole row of scores and so drops out of the softmax, and
        ``sum_n p_n (W_v x_n + b_v) = W_v (sum_n p_n x_n) + (sum_n p_n) b_v``. That is
        O(N D G h) instead of two O(N D^2) projections.
        """
        b, n, dim = x.shape
        h, d, g = self.n_heads, dim // self.n_heads, index.n_slots
        x_glob = x.gather(1, index.slot_pos[:, :, None].expand(b, g, dim))
        q_glob = _heads(self.query_global(x_glob), h) * d**-0.5  # (B, h, G, d)
        if 2 * g * h > dim:
            k_g, v_g = _heads(self.key_global(x), h), _heads(self.value_global(x), h)
            probs = _global_probs(q_glob @ k_g.transpose(-1, -2), index, padding_mask, dropout_p)
            return probs @ v_g, []
        w_k = self.key_global.weight.view(h, d, dim)
        w_v = self.value_global.weight.view(h, d, dim)
        q_x = (q_glob @ w_k).reshape(b, h * g, dim)  # (B, h G, D): W_k^T q per head
        scores = (q_x @ x.transpose(1, 2)).view(b, h, g, n)
        probs = _global_probs(scores, index, padding_mask, dropout_p)
        p_x = (probs.reshape(b, h * g, n) @ x).view(b, h, g, dim)  # sum_n p_n x_n
        bias_v = self.value_global.bias.view(h, 1, d)
        rows = p_x @ w_v.transpose(1, 2) + probs.sum(-1, keepdim=True) * bias_v
        return rows, [self.key_global]  # for its bias, which the softmax drops


# ---------------------------------------------------------------------------------------
# Strided (Sparse Transformer)
# ---------------------------------------------------------------------------------------


def _residue_attention(
    q: Tensor, k: Tensor, v: Tensor, *, stride: int, causal: bool, padding_mask: Tensor
) -> Tensor:
    """Strided pattern: i sees j with (i - j) mod stride == 0 (and j <= i when causal).

    Positions are regrouped by residue ``i mod stride``: (B, h, N, d) -> (B * stride, h, M, d)
    with M = ceil(N / stride); within a residue it is plain (causal) attention over M steps,
    O(N * M) in all, run by the fused CPU kernel of ``scaled_dot_product_attention``.
    """
    b, h, n, d = q.shape
    m = -(-n // stride)
    pad = m * stride - n

    def by_residue(x: Tensor) -> Tensor:
        x = F.pad(x, (0, 0, 0, pad)).view(b, h, m, stride, d)
        return x.permute(0, 3, 1, 2, 4).reshape(b * stride, h, m, d)

    qr, kr, vr = by_residue(q), by_residue(k), by_residue(v)
    if (causal or pad == 0) and not padding_mask.any():
        # Tail padding sits after every real query, so causality already hides it.
        out = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)
    else:
        key_ok = F.pad(~padding_mask, (0, pad), value=False).view(b, m, stride).transpose(1, 2)
        allow = key_ok.reshape(b * stride, 1, 1, m)
        if causal:
            allow = allow & torch.ones(m, m, dtype=torch.bool, device=q.device).tril()
        # A row always sees itself, so no row is empty (padding rows are zeroed later).
        allow = allow | torch.eye(m, dtype=torch.bool, device=q.device)
        out = F.scaled_dot_product_attention(qr, kr, vr, attn_mask=allow)
    out = out.view(b, stride, h, m, d).permute(0, 2, 3, 1, 4).reshape(b, h, m * stride, d)
    return out[:, :, :n]


def strided_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    stride: int,
    causal: bool = True,
    padding_mask: Tensor | None = None,
) -> Tensor:
    """Sparse Transformer strided attention, split across heads (Child et al. 2019, §4.2).

    The first ``ceil(heads / 2)`` heads use the local pattern, the others the strided one
    (an odd head goes to the local pattern; a single head is local only):

    * causal: local ``A1(i) = {j : 0 <= i - j < stride}``,
      strided ``A2(i) = {j <= i : (i - j) mod stride = 0}``;
    * ``causal=False`` (encoder) mirrors both sets: local ``{j : |i - j| < stride}``,
      strided ``{j : (i - j) mod stride = 0}``, keys on both sides.

    A layer thus combines the two patterns by concatenating its heads before the output
    projection; stacking two layers lets every position reach every earlier one. Cost
    O(N * (stride + N / stride)); choose ``stride`` near ``sqrt(N)``.

    Parameters
    ----------
    q, k, v : Tensor
        (B, heads, N, head_dim) projected queries, keys and values.
    stride : int
        Stride l >= 1.
    causal : bool
        Only keys j <= i (decoder) or both sides (encoder).
    padding_mask : Tensor, optional
        (B, N) bool, True at padding: never a key; padding rows output 0.

    Returns
    -------
    Tensor
        (B, heads, N, head_dim).
    """
    _check_qkv(q, k, v)
    if not _is_int(stride) or stride < 1:
        raise ParameterError(f"stride must be an integer >= 1, got {stride!r}")
    b, h, n, _ = q.shape
    stride = min(int(stride), max(n, 1))  # a longer stride has the same pattern: each token alone
    _, padding_mask = _check_masks(b, n, q.device, None, padding_mask)
    n_local = (h + 1) // 2
    parts = [
        _band_attention(
            q[:, :n_local],
            k[:, :n_local],
            v[:, :n_local],
            lo=stride - 1,
            hi=0 if causal else stride - 1,
            key_ok=~padding_mask,
        )
    ]
    if n_local < h:
        parts.append(
            _residue_attention(
                q[:, n_local:],
                k[:, n_local:],
                v[:, n_local:],
                stride=stride,
                causal=causal,
                padding_mask=padding_mask,
            )
        )
    out = torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]
    return out.masked_fill(padding_mask[:, None, :, None], 0.0)


class StridedSelfAttention(nn.Module):
    """Strided self-attention layer: q, k, v projections, :func:`strided_attention`, output.

    Parameters
    ----------
    d_model : int
        Model width D, a multiple of ``n_heads``.
    n_heads : int
        Attention heads; the first ``ceil(n_heads / 2)`` are local, the rest strided.
    stride : int
        Stride l (near sqrt of the typical length).
    causal : bool
        Decoder (j <= i) or encoder (mirrored) patterns.
    """

    def __init__(self, d_model: int, n_heads: int, stride: int, causal: bool = True):
        super().__init__()
        _check_heads(d_model, n_heads)
        if stride < 1:
            raise ParameterError(f"stride must be >= 1, got {stride}")
        if n_heads == 1:
            log.warning("StridedSelfAttention with one head uses the local pattern only")
        self.d_model, self.n_heads, self.stride, self.causal = d_model, n_heads, stride, causal
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, *, padding_mask: Tensor | None = None) -> Tensor:
        """(B, N, D) -> (B, N, D); ``padding_mask`` (B, N) bool, True at padding."""
        _check_input(x, self.d_model)
        h = self.n_heads
        q, k, v = (_heads(proj(x), h) for proj in (self.query, self.key, self.value))
        out = strided_attention(
            q, k, v, stride=self.stride, causal=self.causal, padding_mask=padding_mask
        )
        return self.out(_merge_heads(out))
