"""Dense 1-D convolution for the conditioning network with a fixed summation order
(:func:`conv1d`), so frame inputs do not depend on BLAS threads or buffer alignment."""

from __future__ import annotations

import numpy as np

from wavern.engine.kernels.intrinsics import _LANE_1x1, _LANE_1x4, _LANE_4x1, _LANE_4x4
from wavern.engine.kernels.jit import _JIT, U, kernel
from wavern.errors import ParameterError

__all__ = ["conv_taps", "conv1d_taps", "conv1d"]

# --------------------------------------------------------------------------------------------
# Dense products for the conditioning: one output row at a time, inputs in a fixed order.

@kernel(**_JIT)
def _conv_rows(xf, T, Ci, wt, b, taps, of):
    """of (T * Co) <- b + sum over taps k, then inputs i, of x[t + k - pad, i] wt[k, i, :].

    xf (T * Ci) float32 = x (T, Ci) flattened; wt (taps * Ci * Co) float32 = the Conv1d weight
    (Co, Ci, taps) transposed to (taps, Ci, Co); of = out (T, Co) flattened; pad = (taps - 1) / 2,
    rows outside x are skipped (zero padding). Every output is one chain of fused multiply-adds in
    (tap, input) order, so row t depends only on x[t - pad : t + pad + 1], not on T, on threads or
    on alignment. (Flat arrays in: a reshape here would tie numba's array helpers to the cached
    loop, imported with it in every process.)
    """
    T = U(T)
    Ci = U(Ci)
    Co = U(b.shape[0])
    pad = (U(taps) - U(1)) // U(2)
    for t in range(T):
        for o in range(Co):
            of[t * Co + o] = b[o]
    t = U(0)
    while t < T:
        four = t + U(4) <= T and t >= pad and t + U(3) + pad < T  # 4 rows, every tap inside x
        for k in range(U(taps)):
            s = t + k - pad  # may wrap below 0 (unsigned) for the single-row path: checked below
            if four:
                i = U(0)
                while i + U(4) <= Ci:
                    _LANE_4x4(of, t * Co, Co, wt, (k * Ci + i) * Co, Co, xf, s * Ci + i, Ci, U(1), Co)
                    i += U(4)
                while i < Ci:
                    _LANE_4x1(of, t * Co, Co, wt, (k * Ci + i) * Co, Co, xf, s * Ci + i, Ci, U(1), Co)
                    i += U(1)
            elif t + k >= pad and s < T:
                i = U(0)
                while i + U(4) <= Ci:
                    _LANE_1x4(of, t * Co, Co, wt, (k * Ci + i) * Co, Co, xf, s * Ci + i, Ci, U(1), Co)
                    i += U(4)
                while i < Ci:
                    _LANE_1x1(of, t * Co, Co, wt, (k * Ci + i) * Co, Co, xf, s * Ci + i, Ci, U(1), Co)
                    i += U(1)
        t += U(4) if four else U(1)



def conv_taps(weight: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """A Conv1d weight (C_out, C_in, K), K odd, and bias (C_out,) in the layout of :func:`conv1d_taps`:
    (weights transposed to (K, C_in, C_out) and flattened, bias, K). Prepare once, convolve often."""
    weight = np.asarray(weight, np.float32)
    if weight.ndim != 3 or weight.shape[2] % 2 != 1:
        raise ParameterError(f"conv1d weight must be (C_out, C_in, K) with K odd, found shape {weight.shape}")
    bias = np.ascontiguousarray(bias, dtype=np.float32)
    if bias.shape != (weight.shape[0],):
        raise ParameterError(f"conv1d bias must have shape ({weight.shape[0]},), found {bias.shape}")
    return np.ascontiguousarray(weight.transpose(2, 1, 0)).reshape(-1), bias, int(weight.shape[2])


def conv1d_taps(x: np.ndarray, taps: tuple[np.ndarray, np.ndarray, int]) -> np.ndarray:
    """:func:`conv1d` with weights from :func:`conv_taps`: (T, C_in) -> (T, C_out) float32."""
    wt, b, k = taps
    c_out = b.shape[0]
    c_in = wt.shape[0] // (k * c_out)
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 2 or x.shape[1] != c_in:
        raise ParameterError(f"conv1d input must be (T, {c_in}), found {x.shape}")
    out = np.empty((x.shape[0], c_out), np.float32)
    _conv_rows(x.reshape(-1), x.shape[0], c_in, wt, b, k, out.reshape(-1))
    return out


def conv1d(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Same-length 1-D convolution over time with zero padding (torch Conv1d, odd kernel), with a
    fixed summation order: (T, C_in) -> (T, C_out) float32.

    ``y[t, o] = bias[o] + sum_{k, i} weight[o, i, k] x[t + k - pad, i]``, summed tap by tap, input
    by input, in fused multiply-adds; so row t is the same bytes whatever T, the thread count,
    the CPU's BLAS or the buffers' alignment (see :func:`_conv_rows`). weight (C_out, C_in, K),
    K odd; bias (C_out,).
    """
    return conv1d_taps(x, conv_taps(weight, bias))


