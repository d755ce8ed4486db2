"""Many streams in lanes (:func:`_generate_lanes`): every vector is stored stream-minor, (rows, L)
flattened, stream s in lane s, L = B rounded up to 8 (:func:`lanes`; lanes >= B are padding,
computed on zeros and never drawn). Each block weight is broadcast and fused-multiply-added into
32 / 24 / 16 / 8 lanes at a time (:func:`~.intrinsics._lane_fma`), the gates and the softmax exps run
as flat loops over (rows x L), and only the inverse-CDF scan is per stream. It pays from about 24
streams on (:func:`wavern.engine.vocoder.lane_split`, measured).
"""

from __future__ import annotations

import numpy as np

from wavern.engine.kernels.blocks import _check_mat
from wavern.engine.kernels.fastexp import _exp_parts
from wavern.engine.kernels.gru import _last_possible, _sigmoid, _update
from wavern.engine.kernels.intrinsics import _LANE_4x3, _LANE_4x4, _LANE_8x1, _LANE_8x4, _LANE_16x4, _f32_bits
from wavern.engine.kernels.jit import _BYTE, _FM_ARITH, _JIT, _ONE, _ZERO, LANE_MULTIPLE, N_CLASSES, U, kernel
from wavern.engine.kernels.rng import _next_uniform
from wavern.errors import ParameterError

__all__ = ["lanes", "lane_spmm", "lane_work_size"]

# --------------------------------------------------------------------------------------------
# A batch in lanes: every vector (rows,) of B streams is stored (rows, L) flattened, row-major,
# stream s in lane s (module notes). Each function below does, lane by lane, exactly the float
# operations of its one-stream counterpart above.

@kernel(**_JIT)
def _lane_spmm(mat, X, xoff, Y, L):
    """Y[r, :] += sum_c M[r, c] X[xoff + c, :] over the stored blocks (:func:`_spmv` in lanes).

    X (>= xoff + cols, L) and Y (rows, L) flattened; ``mat`` = (data, rowoff, colptr, kind).
    Blocks are taken in the matvec's order and each output lane gets the matvec's fused
    multiply-adds in the matvec's order.
    """
    data, rowoff, colptr, kind = mat
    n = U(L)
    for j in range(U(colptr.shape[0] - 1)):
        k0 = U(colptr[j])
        k1 = U(colptr[j + U(1)])
        if kind == 0:  # 8x4: weight (i, c) at k*32 + i + 8c
            xo = (U(xoff) + j * U(4)) * n
            for k in range(k0, k1):
                _LANE_8x4(Y, U(rowoff[k]) * n, n, X, xo, n, data, k * U(32), U(1), U(8), n)
        elif kind == 1:  # 4x4: weight (i, c) at k*16 + i + 4c
            xo = (U(xoff) + j * U(4)) * n
            for k in range(k0, k1):
                _LANE_4x4(Y, U(rowoff[k]) * n, n, X, xo, n, data, k * U(16), U(1), U(4), n)
        elif kind == 2:  # 8x1: weight i at k*8 + i
            xo = (U(xoff) + j) * n
            for k in range(k0, k1):
                _LANE_8x1(Y, U(rowoff[k]) * n, n, X, xo, n, data, k * U(8), U(1), U(1), n)
        else:  # 16x4: weight (i, c) at k*64 + i + 16c
            xo = (U(xoff) + j * U(4)) * n
            for k in range(k0, k1):
                _LANE_16x4(Y, U(rowoff[k]) * n, n, X, xo, n, data, k * U(64), U(1), U(16), n)


@kernel(**_JIT)
def _lane_bias(b, Y, L):
    """Y[r, :] <- b[r] for every row r of Y (len(b), L)."""
    n = U(L)
    for r in range(U(b.shape[0])):
        v = b[r]
        o = r * n
        for q in range(n):
            Y[o + q] = v


@kernel(**_JIT)
def _lane_inputs(GI, w_in, XS, XI, lo, hi, H, L):
    """XI <- GI + w_in[0] xc + w_in[1] xf + w_in[2] xct on the rows g H + i (g = r, z, n gates,
    lo <= i < hi) of one half: the input part of :func:`_gru_half`, same fused order.

    GI, XI (3H, L) flattened; w_in (3 * 3H) flattened (3, 3H); XS (3, L) flattened: the scaled
    c_{t-1}, f_{t-1}, c_t of every lane. hi - lo must be a multiple of 4.
    """
    n = U(L)
    for g in range(U(3)):
        r0 = g * U(H) + U(lo)
        r1 = g * U(H) + U(hi)
        for p in range(r0 * n, r1 * n):
            XI[p] = GI[p]
        for r in range(r0, r1, U(4)):
            _LANE_4x3(XI, r * n, n, XS, U(0), n, w_in, r, U(1), U(3) * U(H), n)


@kernel(fastmath=_FM_ARITH, **_JIT)
def _lane_gates(XI, GH, Hs, lo, hi, H, L):
    """State rows lo..hi-1 of every lane <- the GRU update of their r, z, n inputs (XI, GH (3H, L)
    flattened), as :func:`_gru_half` does for one stream: flat loops over (rows x lanes), r and z
    first (into GH's r and z rows), then n and h'."""
    n = U(L)
    HL = U(H) * n
    o = U(lo) * n
    for p in range((U(hi) - U(lo)) * n):
        ir = o + p
        iz = HL + ir
        GH[ir] = _sigmoid(XI[ir] + GH[ir])
        GH[iz] = _sigmoid(XI[iz] + GH[iz])
    for p in range((U(hi) - U(lo)) * n):
        ir = o + p
        iz = HL + ir
        inn = HL + iz
        Hs[ir] = _update(XI[inn], GH[ir], GH[iz], GH[inn], Hs[ir])


@kernel(fastmath=_FM_ARITH, **_JIT)
def _lane_softmax(LG, inv_temp, P, MX, S8, G, TOT, L):
    """For every lane of the logits LG (n, L): the softmax numerators P (n, L), their total TOT (L)
    and their sums over groups of 8 classes G (n/8, L), in the order of :func:`_draw`.

    MX, S8: (8, L) scratch. n must be a multiple of 8. The max is exact in any order; the exps,
    the 8-chain total (:func:`_sum8`) and the group sums repeat the one-stream arithmetic.
    """
    n = U(L)
    L8 = U(8) * n
    ng = U(LG.shape[0]) // L8
    for p in range(L8):  # 8 running maxima per lane, then their max, copied to all 8 rows
        MX[p] = LG[p]
    for g in range(U(1), ng):
        for p in range(L8):
            MX[p] = max(MX[p], LG[g * L8 + p])
    for q in range(n):
        m = MX[q]
        for r in range(U(1), U(8)):
            m = max(m, MX[r * n + q])
        for r in range(U(8)):
            MX[r * n + q] = m
    for g in range(ng):
        for p in range(L8):
            e, bits = _exp_parts((LG[g * L8 + p] - MX[p]) * inv_temp)
            P[g * L8 + p] = e * _f32_bits(bits)
    for p in range(L8):  # chain r of each lane adds classes r, r + 8, r + 16, ...
        S8[p] = P[p]
    for g in range(U(1), ng):
        for p in range(L8):
            S8[p] += P[g * L8 + p]
    for q in range(n):
        TOT[q] = ((S8[q] + S8[n + q]) + (S8[U(2) * n + q] + S8[U(3) * n + q])) + \
                 ((S8[U(4) * n + q] + S8[U(5) * n + q]) + (S8[U(6) * n + q] + S8[U(7) * n + q]))
    for g in range(ng):
        o = g * L8
        for q in range(n):
            G[g * n + q] = ((P[o + q] + P[o + n + q]) + (P[o + U(2) * n + q] + P[o + U(3) * n + q])) + \
                           ((P[o + U(4) * n + q] + P[o + U(5) * n + q]) + (P[o + U(6) * n + q] + P[o + U(7) * n + q]))


@kernel(fastmath=_FM_ARITH, **_JIT)
def _lane_scan(P, G, tot, u, q, L):
    """The inverse-CDF scan of :func:`_draw` on lane q of P (n, L) with its group sums G."""
    thr = u * np.float64(tot)
    acc = _ZERO
    n = P.shape[0] // L
    for g in range(0, n, 8):
        s8 = G[(g // 8) * L + q]
        if acc + s8 > thr:
            for k in range(g, g + 8):
                acc += P[k * L + q]
                if acc > thr:
                    return k
            return _last_possible(P, L, q, g + 8)
        acc += s8
    return _last_possible(P, L, q, n)


@kernel(fastmath=_FM_ARITH, **_JIT)
def _lane_relu(x):
    for i in range(U(x.shape[0])):
        x[i] = max(x[i], _ZERO)


def lane_work_size(hidden_size: int, n_lanes: int) -> int:
    """float32 scratch :func:`_generate_lanes` needs for H = ``hidden_size`` and L lanes."""
    H, L = int(hidden_size), int(n_lanes)
    return L * (9 * H + 3 + H // 2 + 2 * N_CLASSES + 16 + N_CLASSES // 8 + 1)


@kernel(**_JIT)
def _generate_lanes(gi, frame0, start, hop, net, inv_temp, hs, prev, rng, out, logits, work):
    """Generate ``out.shape[1]`` samples of B streams at once, in lanes (module notes).

    Like :func:`_generate` with a stream axis: gi (B, F, 3H); hs (H * L) float32 the states in
    lanes (:func:`lanes` (B) lanes); prev (B, 2) int64; rng (B) uint64; out (B, n) int16; logits
    (B, n, 2, 256) or (B, 0, 2, 256); work float32 of at least :func:`lane_work_size` (H, L),
    zero on the first call. Stream s reproduces :func:`_generate` on gi[s], its state and
    rng[s:s+1] exactly. Padding lanes hold zero inputs; they are never drawn.
    """
    w_in, b_hh, R, O1, b1, O2, b2, O3, b3, O4, b4 = net
    z0 = np.int64(0)
    B = prev.shape[0]
    H = b_hh.shape[0] // 3
    hh = H // 2
    nc = b2.shape[0]
    L = hs.shape[0] // H
    H3L = 3 * H * L
    GI = work[:H3L]  # the frame's gate inputs, refreshed when the frame changes
    GH = work[H3L:2 * H3L]  # W_hh h + b_hh
    XI = work[2 * H3L:3 * H3L]  # W_ih x + b_ih
    o = 3 * H3L
    XS = work[o:o + 3 * L]  # scaled c_{t-1}, f_{t-1}, c_t
    o += 3 * L
    A = work[o:o + hh * L]
    o += hh * L
    LG = work[o:o + nc * L]
    o += nc * L
    P = work[o:o + nc * L]
    o += nc * L
    MX = work[o:o + 8 * L]
    S8 = work[o + 8 * L:o + 16 * L]
    o += 16 * L
    G = work[o:o + (nc // 8) * L]
    o += (nc // 8) * L
    TOT = work[o:o + L]
    w_flat = w_in.reshape(-1)
    record = logits.shape[1] > 0
    frame = -1
    for t in range(out.shape[1]):
        fi = (start + t) // hop - frame0
        if fi != frame:
            for q in range(B):
                src = gi[q, fi]
                for r in range(3 * H):
                    GI[r * L + q] = src[r]
            frame = fi
        for q in range(B):
            XS[q] = np.float32(prev[q, 0]) / _BYTE - _ONE
            XS[L + q] = np.float32(prev[q, 1]) / _BYTE - _ONE
            XS[2 * L + q] = _ZERO
        # gh = W_hh h + b_hh, all 3H rows from the old states
        _lane_bias(b_hh, GH, L)
        _lane_spmm(R, hs, z0, GH, L)
        # coarse half, then P(c_t) = softmax(O2 relu(O1 h_c + b1) + b2)
        _lane_inputs(GI, w_flat, XS, XI, z0, hh, H, L)
        _lane_gates(XI, GH, hs, z0, hh, H, L)
        _lane_bias(b1, A, L)
        _lane_spmm(O1, hs, z0, A, L)
        _lane_relu(A)
        _lane_bias(b2, LG, L)
        _lane_spmm(O2, A, z0, LG, L)
        _lane_softmax(LG, inv_temp, P, MX, S8, G, TOT, L)
        for q in range(B):
            if record:
                for k in range(nc):
                    logits[q, t, 0, k] = LG[k * L + q]
            c = _lane_scan(P, G, TOT[q], _next_uniform(rng, q), q, L)
            prev[q, 0] = c
            XS[2 * L + q] = np.float32(c) / _BYTE - _ONE
        # fine half with c_t in its input, then P(f_t) from O3, O4
        _lane_inputs(GI, w_flat, XS, XI, hh, H, H, L)
        _lane_gates(XI, GH, hs, hh, H, H, L)
        _lane_bias(b3, A, L)
        _lane_spmm(O3, hs, hh, A, L)
        _lane_relu(A)
        _lane_bias(b4, LG, L)
        _lane_spmm(O4, A, z0, LG, L)
        _lane_softmax(LG, inv_temp, P, MX, S8, G, TOT, L)
        for q in range(B):
            if record:
                for k in range(nc):
                    logits[q, t, 1, k] = LG[k * L + q]
            f = _lane_scan(P, G, TOT[q], _next_uniform(rng, q), q, L)
            prev[q, 1] = f
            out[q, t] = np.int16(prev[q, 0] * 256 + f - 32768)



def lanes(batch_size: int) -> int:
    """Lanes L that a batch of ``batch_size`` streams occupies: rounded up to :data:`LANE_MULTIPLE`."""
    if batch_size < 1:
        raise ParameterError(f"batch size must be >= 1, found {batch_size}")
    return -(-int(batch_size) // LANE_MULTIPLE) * LANE_MULTIPLE


def lane_spmm(mat: tuple, X: np.ndarray, Y: np.ndarray, *, xoff: int = 0) -> np.ndarray:
    """Y[r, :] += sum_c M[r, c] X[xoff + c, :]: the product for a batch in lanes; returns Y.

    Parameters
    ----------
    mat : (data, rowoff, colptr, kind), see the module notes.
    X : (n, L) float32, C-contiguous: column s holds stream s's input vector.
    Y : (rows, L) float32, C-contiguous, updated in place. Column s equals
        ``spmv(mat, X[:, s], Y[:, s], xoff=xoff)`` bit for bit.
    """
    _check_mat(mat, X.shape[0], xoff, Y.shape[0])
    for name, arr in (("X", X), ("Y", Y)):
        if arr.dtype != np.float32 or arr.ndim != 2 or not arr.flags.c_contiguous:
            raise ParameterError(f"{name} must be a C-contiguous 2-D float32 array, found {arr.dtype} {arr.shape}")
    if X.shape[1] != Y.shape[1]:
        raise ParameterError(f"X and Y must have the same number of lanes, found {X.shape[1]} and {Y.shape[1]}")
    _lane_spmm(mat, X.reshape(-1), xoff, Y.reshape(-1), Y.shape[1])
    return Y


