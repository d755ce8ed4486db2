"""Every compiled loop of the engine: block-sparse products, the GRU step, sampling, the RNG.

The WaveRNN per-sample loop (Kalchbrenner et al. 2018, eqns 2-3; the exact maths is in
docs/ARCHITECTURE.md, "The WaveRNN") runs here whole, for a chunk of samples per call; Python
touches only chunks. Public wrappers (``spmv``, ``spmm``, ``uniforms``, ``sample_class``) validate
and allocate; the private ``_name`` kernels take arrays and scalars, write into preallocated
buffers and never raise. :mod:`wavern.engine.vocoder` is the runtime that drives them.

Speed notes (measured, see docs/bench/engine.md and REFERENCES section 7):

- numba vectorises these loops only with ``NUMBA_SLP_VECTORIZE=1`` set before numba is first
  imported; we set it below if nobody did. If numba was imported earlier without it, the
  kernels still run correctly but 3-5x slower, and :data:`SLP_ACTIVE` is False.
- ``error_model='numpy'`` (no branch per division), unsigned index arithmetic (no negative
  index wraparound), no ``reassoc`` fast-math on the block kernels.
- Block products are written out row by row: every load of a block (the output rows and the
  weights) happens before its stores, so LLVM may vectorise them without proving that the
  output does not alias the weights. Loops that interleave loads and stores stayed scalar
  (5-8 GFLOP/s against 45-90 for the unrolled form at H = 512).
- No SVML in this numba build, so ``exp`` is our own vectorisable one (Cody-Waite range
  reduction, Taylor polynomial of degree 7, 2**k built in the exponent bits); relative error
  below 1e-7 over the clamped range.

Engine block layout (converted at load from the file's, see :func:`wavern.engine.vocoder.to_engine`):
a matrix is a tuple ``(data, rowoff, colptr, kind)``: ``data`` float32 flat, block ``k`` at
``data[k*br*bc : (k+1)*br*bc]`` stored column by column (``bc`` columns of ``br`` rows);
``rowoff[k]`` uint32 first row of block ``k``; blocks of block column ``j`` are
``colptr[j] : colptr[j+1]`` (uint32); ``kind`` selects the block shape in :data:`BLOCK_SHAPES`.
"""

from __future__ import annotations

import logging
import os
import sys

if "numba" in sys.modules and os.environ.get("NUMBA_SLP_VECTORIZE") != "1":
    _LATE = True  # numba read its config already; setting the variable now changes nothing
else:
    _LATE = False
    os.environ.setdefault("NUMBA_SLP_VECTORIZE", "1")

import numba  # noqa: E402
import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

from wavern.errors import ParameterError  # noqa: E402

log = logging.getLogger(__name__)

#: True when numba compiles with the SLP vectoriser (see the module notes).
SLP_ACTIVE: bool = bool(numba.core.config.SLP_VECTORIZE)
if not SLP_ACTIVE:
    log.warning("numba SLP vectoriser is off (%s): the vocoder kernels will run 3-5x slower; "
                "set NUMBA_SLP_VECTORIZE=1 before anything imports numba",
                "numba was imported before wavern.engine.kernels" if _LATE else "NUMBA_SLP_VECTORIZE != 1")

__all__ = [
    "BLOCK_SHAPES", "MEASURED_GFLOPS", "SLP_ACTIVE", "HOP", "N_CLASSES",
    "spmv", "spmm", "vexp", "sample_class", "rng_state", "rng_states", "uniforms", "warmup",
]

# jit options, chosen once: cached, GIL released, numpy's error model (no branch per division).
_JIT = dict(nogil=True, cache=True, error_model="numpy")
# Block products: FMA contraction only (no reassoc: it kept LLVM from vectorising, REFERENCES 7).
_FM_BLOCK = {"contract"}
# Guard-free arithmetic (gates, exp, softmax): contraction, no signed zeros, reciprocal.
_FM_ARITH = {"contract", "nsz", "arcp"}
# Pure reductions (sum, max of finite values) may be reordered.
_FM_REDUCE = {"contract", "nsz", "arcp", "reassoc", "nnan", "ninf"}

U = np.uint64  # unsigned index arithmetic: numba then skips the negative-index wraparound

#: Block shapes the kernels support, by ``kind``: (rows, cols) of one block.
BLOCK_SHAPES: tuple[tuple[int, int], ...] = ((8, 4), (4, 4), (8, 1))
#: Effective GFLOP/s of one block-sparse matvec (3H x H, H = 512, 10 % density, one core),
#: measured by ``bench/engine.py --blocks`` (docs/bench/engine.md); only their ratios matter:
#: they choose the engine block shape of each matrix at load (vocoder.choose_block_kind).
MEASURED_GFLOPS: dict[tuple[int, int], float] = {(8, 4): 60.0, (4, 4): 37.0, (8, 1): 29.0}

HOP = 256  # samples per mel frame (wavern.dsp)
N_CLASSES = 256  # classes of each softmax (one byte)

# exp(x) = 2**k * exp(r), x = k ln2 + r, |r| <= ln2/2 (Cody-Waite split of ln2).
_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693359375)  # 355/512, exact in float32
_LN2_LO = np.float32(-2.12194440054e-4)  # ln2 - _LN2_HI
_EXP_LO = np.float32(-87.0)  # 2**k stays a normal float32
_EXP_HI = np.float32(88.0)
# Gate pre-activations are clamped to [-30, 30] before exp: sigmoid/tanh there are within 1e-13
# of their limits, and no denormal (10-100x slower arithmetic) can arise from exp(+-88).
_GATE_LO = np.float32(-30.0)
_GATE_HI = np.float32(30.0)
_ONE = np.float32(1.0)
_TWO = np.float32(2.0)
_HALF = np.float32(0.5)
_ZERO = np.float32(0.0)

# splitmix64 (Steele, Lea, Flood 2014): state += gamma; output = mix(state).
_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TWO_M53 = 1.0 / 9007199254740992.0  # 2**-53


# --------------------------------------------------------------------------------------------
# Random numbers: splitmix64 with explicit state, uniforms in [0, 1) with 53 random bits.

@njit(**_JIT)
def _next_uniform(state, i):
    """Advance ``state[i]`` (uint64) and return a float64 uniform in [0, 1)."""
    s = state[i] + _GAMMA
    state[i] = s
    z = (s ^ (s >> U(30))) * _MIX1
    z = (z ^ (z >> U(27))) * _MIX2
    z = z ^ (z >> U(31))
    return np.float64(z >> U(11)) * _TWO_M53


@njit(**_JIT)
def _fill_uniforms(state, out):
    """out (n, 2) float64 <- the next 2n uniforms of ``state[0]``, row by row."""
    z0 = np.int64(0)
    for t in range(out.shape[0]):
        out[t, 0] = _next_uniform(state, z0)
        out[t, 1] = _next_uniform(state, z0)


# --------------------------------------------------------------------------------------------
# exp, sigmoid, tanh in vectorisable form.

@njit(fastmath=_FM_ARITH, **_JIT)
def _exp_parts(v):
    """Split exp(v) into (p, bits): exp(v) = p * float32_from_bits(bits).

    v is clamped to [-87, 88] (2**k stays a normal float32); below -87 p is 0, so exp flushes
    to 0 there (a class that far below the maximum logit is never drawn, as in float64).
    """
    p0 = _ONE if v >= _EXP_LO else _ZERO
    v = min(max(v, _EXP_LO), _EXP_HI)
    k = np.floor(v * _LOG2E + _HALF)
    r = v - k * _LN2_HI - k * _LN2_LO
    p = np.float32(1.0 / 5040.0)
    p = p * r + np.float32(1.0 / 720.0)
    p = p * r + np.float32(1.0 / 120.0)
    p = p * r + np.float32(1.0 / 24.0)
    p = p * r + np.float32(1.0 / 6.0)
    p = p * r + _HALF
    p = p * r + _ONE
    p = (p * r + _ONE) * p0
    # 2**k as float32 bits: (k + 127) << 23, computed exactly in float32 then converted.
    bits = np.int32((k + np.float32(127.0)) * np.float32(8388608.0))
    return p, bits


@njit(fastmath=_FM_ARITH, **_JIT)
def _vexp(x, out, ib):
    """out[i] <- exp(x[i]) for i < len(out); ``ib`` int32 scratch at least as long."""
    fb = ib.view(np.float32)
    for i in range(U(out.shape[0])):
        p, bits = _exp_parts(x[i])
        ib[i] = bits
        out[i] = p * fb[i]


# --------------------------------------------------------------------------------------------
# Block-sparse matrix x vector: y += M x[xoff : xoff + cols]. One kernel per block shape,
# written out so all loads of a block precede its stores (module notes).

@njit(fastmath=_FM_BLOCK, **_JIT)
def _spmv_8x4(data, rowoff, colptr, x, xoff, y):
    for j in range(U(colptr.shape[0] - 1)):
        xj = U(xoff) + j * U(4)
        x0 = x[xj]
        x1 = x[xj + U(1)]
        x2 = x[xj + U(2)]
        x3 = x[xj + U(3)]
        for k in range(U(colptr[j]), U(colptr[j + U(1)])):
            r = U(rowoff[k])
            b = k * U(32)
            s0 = y[r] + data[b] * x0 + data[b + U(8)] * x1 + data[b + U(16)] * x2 + data[b + U(24)] * x3
            s1 = y[r + U(1)] + data[b + U(1)] * x0 + data[b + U(9)] * x1 + data[b + U(17)] * x2 + data[b + U(25)] * x3
            s2 = y[r + U(2)] + data[b + U(2)] * x0 + data[b + U(10)] * x1 + data[b + U(18)] * x2 + data[b + U(26)] * x3
            s3 = y[r + U(3)] + data[b + U(3)] * x0 + data[b + U(11)] * x1 + data[b + U(19)] * x2 + data[b + U(27)] * x3
            s4 = y[r + U(4)] + data[b + U(4)] * x0 + data[b + U(12)] * x1 + data[b + U(20)] * x2 + data[b + U(28)] * x3
            s5 = y[r + U(5)] + data[b + U(5)] * x0 + data[b + U(13)] * x1 + data[b + U(21)] * x2 + data[b + U(29)] * x3
            s6 = y[r + U(6)] + data[b + U(6)] * x0 + data[b + U(14)] * x1 + data[b + U(22)] * x2 + data[b + U(30)] * x3
            s7 = y[r + U(7)] + data[b + U(7)] * x0 + data[b + U(15)] * x1 + data[b + U(23)] * x2 + data[b + U(31)] * x3
            y[r] = s0
            y[r + U(1)] = s1
            y[r + U(2)] = s2
            y[r + U(3)] = s3
            y[r + U(4)] = s4
            y[r + U(5)] = s5
            y[r + U(6)] = s6
            y[r + U(7)] = s7


@njit(fastmath=_FM_BLOCK, **_JIT)
def _spmv_4x4(data, rowoff, colptr, x, xoff, y):
    for j in range(U(colptr.shape[0] - 1)):
        xj = U(xoff) + j * U(4)
        x0 = x[xj]
        x1 = x[xj + U(1)]
        x2 = x[xj + U(2)]
        x3 = x[xj + U(3)]
        for k in range(U(colptr[j]), U(colptr[j + U(1)])):
            r = U(rowoff[k])
            b = k * U(16)
            s0 = y[r] + data[b] * x0 + data[b + U(4)] * x1 + data[b + U(8)] * x2 + data[b + U(12)] * x3
            s1 = y[r + U(1)] + data[b + U(1)] * x0 + data[b + U(5)] * x1 + data[b + U(9)] * x2 + data[b + U(13)] * x3
            s2 = y[r + U(2)] + data[b + U(2)] * x0 + data[b + U(6)] * x1 + data[b + U(10)] * x2 + data[b + U(14)] * x3
            s3 = y[r + U(3)] + data[b + U(3)] * x0 + data[b + U(7)] * x1 + data[b + U(11)] * x2 + data[b + U(15)] * x3
            y[r] = s0
            y[r + U(1)] = s1
            y[r + U(2)] = s2
            y[r + U(3)] = s3


@njit(fastmath=_FM_BLOCK, **_JIT)
def _spmv_8x1(data, rowoff, colptr, x, xoff, y):
    for j in range(U(colptr.shape[0] - 1)):
        x0 = x[U(xoff) + j]
        for k in range(U(colptr[j]), U(colptr[j + U(1)])):
            r = U(rowoff[k])
            b = k * U(8)
            s0 = y[r] + data[b] * x0
            s1 = y[r + U(1)] + data[b + U(1)] * x0
            s2 = y[r + U(2)] + data[b + U(2)] * x0
            s3 = y[r + U(3)] + data[b + U(3)] * x0
            s4 = y[r + U(4)] + data[b + U(4)] * x0
            s5 = y[r + U(5)] + data[b + U(5)] * x0
            s6 = y[r + U(6)] + data[b + U(6)] * x0
            s7 = y[r + U(7)] + data[b + U(7)] * x0
            y[r] = s0
            y[r + U(1)] = s1
            y[r + U(2)] = s2
            y[r + U(3)] = s3
            y[r + U(4)] = s4
            y[r + U(5)] = s5
            y[r + U(6)] = s6
            y[r + U(7)] = s7


@njit(**_JIT)
def _spmv(mat, x, xoff, y):
    """y += M x[xoff:]; ``mat`` = (data, rowoff, colptr, kind)."""
    data, rowoff, colptr, kind = mat
    if kind == 0:
        _spmv_8x4(data, rowoff, colptr, x, xoff, y)
    elif kind == 1:
        _spmv_4x4(data, rowoff, colptr, x, xoff, y)
    else:
        _spmv_8x1(data, rowoff, colptr, x, xoff, y)


# Block-sparse matrix x B vectors: Y[s] += M X[s, xoff:]. Streams go four at a time through
# one block column (each weight loaded once for four streams: 1.8x faster than four matvecs at
# H = 512, 10 %, 2.2-2.6x dense at H = 768); the B % 4 left over, and 8x1 blocks, take the
# matvec. Every row sums in the same order as the matvec, so a batch reproduces single streams
# bit for bit.

@njit(fastmath=_FM_BLOCK, **_JIT)
def _spmm4_8x4(data, rowoff, colptr, X, xoff, Y):
    """Streams 0 .. 4*(B//4)-1 of Y += M X[:, xoff:], four at a time (8x4 blocks): each weight
    is loaded once for four streams."""
    for j in range(U(colptr.shape[0] - 1)):
        xj = U(xoff) + j * U(4)
        for q in range(U(0), U(X.shape[0] // 4 * 4), U(4)):
            q1 = q + U(1)
            q2 = q + U(2)
            q3 = q + U(3)
            a0 = X[q, xj]
            a1 = X[q, xj + U(1)]
            a2 = X[q, xj + U(2)]
            a3 = X[q, xj + U(3)]
            b0 = X[q1, xj]
            b1 = X[q1, xj + U(1)]
            b2 = X[q1, xj + U(2)]
            b3 = X[q1, xj + U(3)]
            c0 = X[q2, xj]
            c1 = X[q2, xj + U(1)]
            c2 = X[q2, xj + U(2)]
            c3 = X[q2, xj + U(3)]
            e0 = X[q3, xj]
            e1 = X[q3, xj + U(1)]
            e2 = X[q3, xj + U(2)]
            e3 = X[q3, xj + U(3)]
            for k in range(U(colptr[j]), U(colptr[j + U(1)])):
                r = U(rowoff[k])
                o = k * U(32)
                as0 = Y[q, r] + data[o] * a0 + data[o + U(8)] * a1 + data[o + U(16)] * a2 + data[o + U(24)] * a3
                as1 = Y[q, r + U(1)] + data[o + U(1)] * a0 + data[o + U(9)] * a1 + data[o + U(17)] * a2 + data[o + U(25)] * a3
                as2 = Y[q, r + U(2)] + data[o + U(2)] * a0 + data[o + U(10)] * a1 + data[o + U(18)] * a2 + data[o + U(26)] * a3
                as3 = Y[q, r + U(3)] + data[o + U(3)] * a0 + data[o + U(11)] * a1 + data[o + U(19)] * a2 + data[o + U(27)] * a3
                as4 = Y[q, r + U(4)] + data[o + U(4)] * a0 + data[o + U(12)] * a1 + data[o + U(20)] * a2 + data[o + U(28)] * a3
                as5 = Y[q, r + U(5)] + data[o + U(5)] * a0 + data[o + U(13)] * a1 + data[o + U(21)] * a2 + data[o + U(29)] * a3
                as6 = Y[q, r + U(6)] + data[o + U(6)] * a0 + data[o + U(14)] * a1 + data[o + U(22)] * a2 + data[o + U(30)] * a3
                as7 = Y[q, r + U(7)] + data[o + U(7)] * a0 + data[o + U(15)] * a1 + data[o + U(23)] * a2 + data[o + U(31)] * a3
                bs0 = Y[q1, r] + data[o] * b0 + data[o + U(8)] * b1 + data[o + U(16)] * b2 + data[o + U(24)] * b3
                bs1 = Y[q1, r + U(1)] + data[o + U(1)] * b0 + data[o + U(9)] * b1 + data[o + U(17)] * b2 + data[o + U(25)] * b3
                bs2 = Y[q1, r + U(2)] + data[o + U(2)] * b0 + data[o + U(10)] * b1 + data[o + U(18)] * b2 + data[o + U(26)] * b3
                bs3 = Y[q1, r + U(3)] + data[o + U(3)] * b0 + data[o + U(11)] * b1 + data[o + U(19)] * b2 + data[o + U(27)] * b3
                bs4 = Y[q1, r + U(4)] + data[o + U(4)] * b0 + data[o + U(12)] * b1 + data[o + U(20)] * b2 + data[o + U(28)] * b3
                bs5 = Y[q1, r + U(5)] + data[o + U(5)] * b0 + data[o + U(13)] * b1 + data[o + U(21)] * b2 + data[o + U(29)] * b3
                bs6 = Y[q1, r + U(6)] + data[o + U(6)] * b0 + data[o + U(14)] * b1 + data[o + U(22)] * b2 + data[o + U(30)] * b3
                bs7 = Y[q1, r + U(7)] + data[o + U(7)] * b0 + data[o + U(15)] * b1 + data[o + U(23)] * b2 + data[o + U(31)] * b3
                cs0 = Y[q2, r] + data[o] * c0 + data[o + U(8)] * c1 + data[o + U(16)] * c2 + data[o + U(24)] * c3
                cs1 = Y[q2, r + U(1)] + data[o + U(1)] * c0 + data[o + U(9)] * c1 + data[o + U(17)] * c2 + data[o + U(25)] * c3
                cs2 = Y[q2, r + U(2)] + data[o + U(2)] * c0 + data[o + U(10)] * c1 + data[o + U(18)] * c2 + data[o + U(26)] * c3
                cs3 = Y[q2, r + U(3)] + data[o + U(3)] * c0 + data[o + U(11)] * c1 + data[o + U(19)] * c2 + data[o + U(27)] * c3
                cs4 = Y[q2, r + U(4)] + data[o + U(4)] * c0 + data[o + U(12)] * c1 + data[o + U(20)] * c2 + data[o + U(28)] * c3
                cs5 = Y[q2, r + U(5)] + data[o + U(5)] * c0 + data[o + U(13)] * c1 + data[o + U(21)] * c2 + data[o + U(29)] * c3
                cs6 = Y[q2, r + U(6)] + data[o + U(6)] * c0 + data[o + U(14)] * c1 + data[o + U(22)] * c2 + data[o + U(30)] * c3
                cs7 = Y[q2, r + U(7)] + data[o + U(7)] * c0 + data[o + U(15)] * c1 + data[o + U(23)] * c2 + data[o + U(31)] * c3
                es0 = Y[q3, r] + data[o] * e0 + data[o + U(8)] * e1 + data[o + U(16)] * e2 + data[o + U(24)] * e3
                es1 = Y[q3, r + U(1)] + data[o + U(1)] * e0 + data[o + U(9)] * e1 + data[o + U(17)] * e2 + data[o + U(25)] * e3
                es2 = Y[q3, r + U(2)] + data[o + U(2)] * e0 + data[o + U(10)] * e1 + data[o + U(18)] * e2 + data[o + U(26)] * e3
                es3 = Y[q3, r + U(3)] + data[o + U(3)] * e0 + data[o + U(11)] * e1 + data[o + U(19)] * e2 + data[o + U(27)] * e3
                es4 = Y[q3, r + U(4)] + data[o + U(4)] * e0 + data[o + U(12)] * e1 + data[o + U(20)] * e2 + data[o + U(28)] * e3
                es5 = Y[q3, r + U(5)] + data[o + U(5)] * e0 + data[o + U(13)] * e1 + data[o + U(21)] * e2 + data[o + U(29)] * e3
                es6 = Y[q3, r + U(6)] + data[o + U(6)] * e0 + data[o + U(14)] * e1 + data[o + U(22)] * e2 + data[o + U(30)] * e3
                es7 = Y[q3, r + U(7)] + data[o + U(7)] * e0 + data[o + U(15)] * e1 + data[o + U(23)] * e2 + data[o + U(31)] * e3
                Y[q, r] = as0
                Y[q, r + U(1)] = as1
                Y[q, r + U(2)] = as2
                Y[q, r + U(3)] = as3
                Y[q, r + U(4)] = as4
                Y[q, r + U(5)] = as5
                Y[q, r + U(6)] = as6
                Y[q, r + U(7)] = as7
                Y[q1, r] = bs0
                Y[q1, r + U(1)] = bs1
                Y[q1, r + U(2)] = bs2
                Y[q1, r + U(3)] = bs3
                Y[q1, r + U(4)] = bs4
                Y[q1, r + U(5)] = bs5
                Y[q1, r + U(6)] = bs6
                Y[q1, r + U(7)] = bs7
                Y[q2, r] = cs0
                Y[q2, r + U(1)] = cs1
                Y[q2, r + U(2)] = cs2
                Y[q2, r + U(3)] = cs3
                Y[q2, r + U(4)] = cs4
                Y[q2, r + U(5)] = cs5
                Y[q2, r + U(6)] = cs6
                Y[q2, r + U(7)] = cs7
                Y[q3, r] = es0
                Y[q3, r + U(1)] = es1
                Y[q3, r + U(2)] = es2
                Y[q3, r + U(3)] = es3
                Y[q3, r + U(4)] = es4
                Y[q3, r + U(5)] = es5
                Y[q3, r + U(6)] = es6
                Y[q3, r + U(7)] = es7


@njit(fastmath=_FM_BLOCK, **_JIT)
def _spmm4_4x4(data, rowoff, colptr, X, xoff, Y):
    """Streams 0 .. 4*(B//4)-1 of Y += M X[:, xoff:], four at a time (4x4 blocks): each weight
    is loaded once for four streams."""
    for j in range(U(colptr.shape[0] - 1)):
        xj = U(xoff) + j * U(4)
        for q in range(U(0), U(X.shape[0] // 4 * 4), U(4)):
            q1 = q + U(1)
            q2 = q + U(2)
            q3 = q + U(3)
            a0 = X[q, xj]
            a1 = X[q, xj + U(1)]
            a2 = X[q, xj + U(2)]
            a3 = X[q, xj + U(3)]
            b0 = X[q1, xj]
            b1 = X[q1, xj + U(1)]
            b2 = X[q1, xj + U(2)]
            b3 = X[q1, xj + U(3)]
            c0 = X[q2, xj]
            c1 = X[q2, xj + U(1)]
            c2 = X[q2, xj + U(2)]
            c3 = X[q2, xj + U(3)]
            e0 = X[q3, xj]
            e1 = X[q3, xj + U(1)]
            e2 = X[q3, xj + U(2)]
            e3 = X[q3, xj + U(3)]
            for k in range(U(colptr[j]), U(colptr[j + U(1)])):
                r = U(rowoff[k])
                o = k * U(16)
                as0 = Y[q, r] + data[o] * a0 + data[o + U(4)] * a1 + data[o + U(8)] * a2 + data[o + U(12)] * a3
                as1 = Y[q, r + U(1)] + data[o + U(1)] * a0 + data[o + U(5)] * a1 + data[o + U(9)] * a2 + data[o + U(13)] * a3
                as2 = Y[q, r + U(2)] + data[o + U(2)] * a0 + data[o + U(6)] * a1 + data[o + U(10)] * a2 + data[o + U(14)] * a3
                as3 = Y[q, r + U(3)] + data[o + U(3)] * a0 + data[o + U(7)] * a1 + data[o + U(11)] * a2 + data[o + U(15)] * a3
                bs0 = Y[q1, r] + data[o] * b0 + data[o + U(4)] * b1 + data[o + U(8)] * b2 + data[o + U(12)] * b3
                bs1 = Y[q1, r + U(1)] + data[o + U(1)] * b0 + data[o + U(5)] * b1 + data[o + U(9)] * b2 + data[o + U(13)] * b3
                bs2 = Y[q1, r + U(2)] + data[o + U(2)] * b0 + data[o + U(6)] * b1 + data[o + U(10)] * b2 + data[o + U(14)] * b3
                bs3 = Y[q1, r + U(3)] + data[o + U(3)] * b0 + data[o + U(7)] * b1 + data[o + U(11)] * b2 + data[o + U(15)] * b3
                cs0 = Y[q2, r] + data[o] * c0 + data[o + U(4)] * c1 + data[o + U(8)] * c2 + data[o + U(12)] * c3
                cs1 = Y[q2, r + U(1)] + data[o + U(1)] * c0 + data[o + U(5)] * c1 + data[o + U(9)] * c2 + data[o + U(13)] * c3
                cs2 = Y[q2, r + U(2)] + data[o + U(2)] * c0 + data[o + U(6)] * c1 + data[o + U(10)] * c2 + data[o + U(14)] * c3
                cs3 = Y[q2, r + U(3)] + data[o + U(3)] * c0 + data[o + U(7)] * c1 + data[o + U(11)] * c2 + data[o + U(15)] * c3
                es0 = Y[q3, r] + data[o] * e0 + data[o + U(4)] * e1 + data[o + U(8)] * e2 + data[o + U(12)] * e3
                es1 = Y[q3, r + U(1)] + data[o + U(1)] * e0 + data[o + U(5)] * e1 + data[o + U(9)] * e2 + data[o + U(13)] * e3
                es2 = Y[q3, r + U(2)] + data[o + U(2)] * e0 + data[o + U(6)] * e1 + data[o + U(10)] * e2 + data[o + U(14)] * e3
                es3 = Y[q3, r + U(3)] + data[o + U(3)] * e0 + data[o + U(7)] * e1 + data[o + U(11)] * e2 + data[o + U(15)] * e3
                Y[q, r] = as0
                Y[q, r + U(1)] = as1
                Y[q, r + U(2)] = as2
                Y[q, r + U(3)] = as3
                Y[q1, r] = bs0
                Y[q1, r + U(1)] = bs1
                Y[q1, r + U(2)] = bs2
                Y[q1, r + U(3)] = bs3
                Y[q2, r] = cs0
                Y[q2, r + U(1)] = cs1
                Y[q2, r + U(2)] = cs2
                Y[q2, r + U(3)] = cs3
                Y[q3, r] = es0
                Y[q3, r + U(1)] = es1
                Y[q3, r + U(2)] = es2
                Y[q3, r + U(3)] = es3


@njit(**_JIT)
def _spmm(mat, X, xoff, Y):
    """Y[s] += M X[s, xoff:] for every stream s; ``mat`` = (data, rowoff, colptr, kind)."""
    data, rowoff, colptr, kind = mat
    done = 0
    if kind == 0:
        _spmm4_8x4(data, rowoff, colptr, X, xoff, Y)
        done = X.shape[0] // 4 * 4
    elif kind == 1:
        _spmm4_4x4(data, rowoff, colptr, X, xoff, Y)
        done = X.shape[0] // 4 * 4
    for q in range(done, X.shape[0]):
        _spmv(mat, X[q], xoff, Y[q])


# --------------------------------------------------------------------------------------------
# One half of the GRU update and one softmax draw.

@njit(fastmath=_FM_ARITH, **_JIT)
def _gru_half(gi, w_in, gh, h, lo, hi, xc, xf, xct, ib):
    """GRU update of state rows ``lo:hi`` (one half), as torch.nn.GRU (gate order r, z, n).

    gi (3H) frame part of W_ih x + b_ih; w_in (3, 3H) the sample columns of W_ih (c_{t-1},
    f_{t-1}, c_t); gh (3H) W_hh h + b_hh from the old state; xc, xf, xct the scaled bytes
    (xct = 0 for the coarse half, whose c_t column is masked to 0 anyway). h updated in place.
    ib: int32 scratch of at least 3 (hi - lo).
    """
    fb = ib.view(np.float32)
    H = U(h.shape[0])
    n = U(hi) - U(lo)
    for i in range(n):
        ir = U(lo) + i
        iz = H + ir
        inn = H + iz
        xr = gi[ir] + w_in[0, ir] * xc + w_in[1, ir] * xf + w_in[2, ir] * xct
        xz = gi[iz] + w_in[0, iz] * xc + w_in[1, iz] * xf + w_in[2, iz] * xct
        xn = gi[inn] + w_in[0, inn] * xc + w_in[1, inn] * xf + w_in[2, inn] * xct
        pr, br = _exp_parts(min(max(-(xr + gh[ir]), _GATE_LO), _GATE_HI))
        pz, bz = _exp_parts(min(max(-(xz + gh[iz]), _GATE_LO), _GATE_HI))
        ib[i] = br
        ib[n + i] = bz
        r = _ONE / (_ONE + pr * fb[i])  # sigmoid
        z = _ONE / (_ONE + pz * fb[n + i])
        pn, bn = _exp_parts(min(max(_TWO * (xn + r * gh[inn]), _GATE_LO), _GATE_HI))
        ib[n + n + i] = bn
        nn = _ONE - _TWO / (pn * fb[n + n + i] + _ONE)  # tanh
        h[ir] = (_ONE - z) * nn + z * h[ir]


@njit(fastmath=_FM_REDUCE, **_JIT)
def _max(x):
    """max of x (length a multiple of 8), in 8 independent chains."""
    m0, m1, m2, m3 = x[0], x[1], x[2], x[3]
    m4, m5, m6, m7 = x[4], x[5], x[6], x[7]
    for i in range(U(8), U(x.shape[0]), U(8)):
        m0 = max(m0, x[i])
        m1 = max(m1, x[i + U(1)])
        m2 = max(m2, x[i + U(2)])
        m3 = max(m3, x[i + U(3)])
        m4 = max(m4, x[i + U(4)])
        m5 = max(m5, x[i + U(5)])
        m6 = max(m6, x[i + U(6)])
        m7 = max(m7, x[i + U(7)])
    return max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))


@njit(fastmath=_FM_ARITH, **_JIT)
def _copy(src, dst):
    """dst[:] = src (same length), as a loop LLVM vectorises."""
    for i in range(U(dst.shape[0])):
        dst[i] = src[i]


@njit(fastmath=_FM_ARITH, **_JIT)
def _relu(x):
    for i in range(U(x.shape[0])):
        x[i] = max(x[i], _ZERO)


@njit(fastmath=_FM_REDUCE, **_JIT)
def _sum(x):
    s = _ZERO
    for i in range(U(x.shape[0])):
        s += x[i]
    return s


@njit(fastmath=_FM_ARITH, **_JIT)
def _scaled_exp(logits, m, inv_temp, probs, ib):
    """probs[k] <- exp((logits[k] - m) * inv_temp): softmax numerators with temperature."""
    fb = ib.view(np.float32)
    for k in range(U(probs.shape[0])):
        p, bits = _exp_parts((logits[k] - m) * inv_temp)
        ib[k] = bits
        probs[k] = p * fb[k]


@njit(**_JIT)
def _draw(logits, inv_temp, u, probs, ib):
    """The class k of ``softmax(logits * inv_temp)`` by inverse CDF (docs/ARCHITECTURE.md):
    the first k with cumsum(p)[k] > u * sum(p), clamped to the last class.

    The scan skips ahead 8 classes at a time (their sum) and walks one by one only inside the
    group where the threshold falls. len(logits) must be a multiple of 8.
    """
    _scaled_exp(logits, _max(logits), inv_temp, probs, ib)
    thr = u * np.float64(_sum(probs))
    acc = _ZERO
    n = probs.shape[0]
    for g in range(0, n, 8):
        s8 = ((probs[g] + probs[g + 1]) + (probs[g + 2] + probs[g + 3])) + \
             ((probs[g + 4] + probs[g + 5]) + (probs[g + 6] + probs[g + 7]))
        if acc + s8 > thr:
            for k in range(g, g + 8):
                acc += probs[k]
                if acc > thr:
                    return k
        else:
            acc += s8
    return n - 1


# --------------------------------------------------------------------------------------------
# The generators.

@njit(**_JIT)
def _generate(gi, frame0, start, hop, net, inv_temp, h, prev, rng, out, logits, work, ib):
    """Generate ``len(out)`` samples of one stream; successive calls continue one long call.

    gi (F, 3H) float32: per-frame ``W_ih[:, 3:] cond + b_ih`` for frames frame0 .. frame0+F-1;
    sample s = start + t uses frame s // hop. net = (w_in (3, 3H), b_hh (3H), R, O1, b1, O2,
    b2, O3, b3, O4, b4) with R, O* block-sparse tuples. State: h (H) float32, prev (2) int64
    (c_{t-1}, f_{t-1}), rng (1) uint64; all updated in place. out (n) int16. logits: (n, 2, 256)
    float32 to record the logits of every draw, or (0, 2, 256) not to. work float32 of at least
    3H + H/2 + 2*256; ib int32 of at least max(3H/2, 256).
    """
    w_in, b_hh, R, O1, b1, O2, b2, O3, b3, O4, b4 = net
    z0 = np.int64(0)  # not a literal: literals would compile every callee a second time
    H = h.shape[0]
    hh = H // 2
    nc = b2.shape[0]
    gh = work[:3 * H]
    a = work[3 * H:3 * H + hh]
    lg = work[3 * H + hh:3 * H + hh + nc]
    probs = work[3 * H + hh + nc:3 * H + hh + 2 * nc]
    record = logits.shape[0] > 0
    c = prev[0]
    f = prev[1]
    for t in range(out.shape[0]):
        fr = gi[(start + t) // hop - frame0]
        xc = np.float32(c) / np.float32(127.5) - _ONE
        xf = np.float32(f) / np.float32(127.5) - _ONE
        # gh = W_hh h + b_hh, all 3H rows from the old state (one block-sparse matvec)
        _copy(b_hh, gh)
        _spmv(R, h, z0, gh)
        # coarse half, then P(c_t) = softmax(O2 relu(O1 h_c + b1) + b2)
        _gru_half(fr, w_in, gh, h, z0, hh, xc, xf, _ZERO, ib)
        _copy(b1, a)
        _spmv(O1, h, z0, a)
        _relu(a)
        _copy(b2, lg)
        _spmv(O2, a, z0, lg)
        if record:
            logits[t, 0, :] = lg
        c = _draw(lg, inv_temp, _next_uniform(rng, z0), probs, ib)
        # fine half with c_t in its input, then P(f_t) from O3, O4
        xct = np.float32(c) / np.float32(127.5) - _ONE
        _gru_half(fr, w_in, gh, h, hh, H, xc, xf, xct, ib)
        _copy(b3, a)
        _spmv(O3, h, hh, a)
        _relu(a)
        _copy(b4, lg)
        _spmv(O4, a, z0, lg)
        if record:
            logits[t, 1, :] = lg
        f = _draw(lg, inv_temp, _next_uniform(rng, z0), probs, ib)
        out[t] = np.int16(c * 256 + f - 32768)
    prev[0] = c
    prev[1] = f


@njit(**_JIT)
def _generate_batch(gi, frame0, start, hop, net, inv_temp, h, prev, rng, out, logits, work, ib):
    """Generate ``out.shape[1]`` samples for B streams at once (weights read once per step).

    Like :func:`_generate` with a stream axis first: gi (B, F, 3H), h (B, H), prev (B, 2),
    rng (B), out (B, n), logits (B, n, 2, 256) or (B, 0, 2, 256). work float32 of at least
    B (3H + H/2 + 256 + 2) + 256; ib int32 of at least max(3H/2, 256). Stream s reproduces
    :func:`_generate` on gi[s], h[s], prev[s], rng[s:s+1] exactly.
    """
    w_in, b_hh, R, O1, b1, O2, b2, O3, b3, O4, b4 = net
    z0 = np.int64(0)  # not a literal: literals would compile every callee a second time
    B = h.shape[0]
    H = h.shape[1]
    hh = H // 2
    nc = b2.shape[0]
    GH = work[:B * 3 * H].reshape((B, 3 * H))
    o = B * 3 * H
    A = work[o:o + B * hh].reshape((B, hh))
    o += B * hh
    LG = work[o:o + B * nc].reshape((B, nc))
    o += B * nc
    xc = work[o:o + B]  # scaled c_{t-1}, f_{t-1} of each stream
    xf = work[o + B:o + 2 * B]
    o += 2 * B
    probs = work[o:o + nc]
    record = logits.shape[1] > 0
    for t in range(out.shape[1]):
        fi = (start + t) // hop - frame0
        for q in range(B):
            xc[q] = np.float32(prev[q, 0]) / np.float32(127.5) - _ONE
            xf[q] = np.float32(prev[q, 1]) / np.float32(127.5) - _ONE
            _copy(b_hh, GH[q])
        _spmm(R, h, z0, GH)
        for q in range(B):
            _gru_half(gi[q, fi], w_in, GH[q], h[q], z0, hh, xc[q], xf[q], _ZERO, ib)
            _copy(b1, A[q])
        _spmm(O1, h, z0, A)
        for q in range(B):
            _relu(A[q])
            _copy(b2, LG[q])
        _spmm(O2, A, z0, LG)
        for q in range(B):
            if record:
                logits[q, t, 0, :] = LG[q]
            c = _draw(LG[q], inv_temp, _next_uniform(rng, q), probs, ib)
            prev[q, 0] = c
            xct = np.float32(c) / np.float32(127.5) - _ONE
            _gru_half(gi[q, fi], w_in, GH[q], h[q], hh, H, xc[q], xf[q], xct, ib)
            _copy(b3, A[q])
        _spmm(O3, h, hh, A)
        for q in range(B):
            _relu(A[q])
            _copy(b4, LG[q])
        _spmm(O4, A, z0, LG)
        for q in range(B):
            if record:
                logits[q, t, 1, :] = LG[q]
            f = _draw(LG[q], inv_temp, _next_uniform(rng, q), probs, ib)
            prev[q, 1] = f
            out[q, t] = np.int16(prev[q, 0] * 256 + f - 32768)


# --------------------------------------------------------------------------------------------
# Public wrappers: validate, allocate, call.

def _check_mat(mat: tuple, x_len: int, xoff: int, y_len: int) -> None:
    data, rowoff, colptr, kind = mat
    if not 0 <= kind < len(BLOCK_SHAPES):
        raise ParameterError(f"block kind {kind} is not one of 0..{len(BLOCK_SHAPES) - 1}")
    br, bc = BLOCK_SHAPES[kind]
    nnzb = rowoff.shape[0]
    if data.dtype != np.float32 or rowoff.dtype != np.uint32 or colptr.dtype != np.uint32:
        raise ParameterError(f"engine matrix dtypes must be float32/uint32/uint32, found "
                             f"{data.dtype}/{rowoff.dtype}/{colptr.dtype}")
    if data.shape != (nnzb * br * bc,):
        raise ParameterError(f"data must hold {nnzb} blocks of {br}x{bc}, found shape {data.shape}")
    if colptr.shape[0] < 1 or int(colptr[-1]) != nnzb:
        raise ParameterError(f"colptr must end at the block count {nnzb}")
    cols = (colptr.shape[0] - 1) * bc
    if xoff < 0 or xoff + cols > x_len:
        raise ParameterError(f"x[{xoff}:{xoff + cols}] is outside x of length {x_len}")
    if nnzb and int(rowoff.max()) + br > y_len:
        raise ParameterError(f"block rows reach {int(rowoff.max()) + br}, beyond y of length {y_len}")


def spmv(mat: tuple, x: np.ndarray, y: np.ndarray, *, xoff: int = 0) -> np.ndarray:
    """y += M @ x[xoff : xoff + cols] for an engine block-sparse matrix; returns y.

    Parameters
    ----------
    mat : (data, rowoff, colptr, kind), see the module notes.
    x : (n,) float32, C-contiguous.
    y : (rows,) float32, C-contiguous, updated in place.
    """
    _check_mat(mat, x.shape[0], xoff, y.shape[0])
    for name, arr in (("x", x), ("y", y)):
        if arr.dtype != np.float32 or arr.ndim != 1 or not arr.flags.c_contiguous:
            raise ParameterError(f"{name} must be a C-contiguous 1-D float32 array, found {arr.dtype} {arr.shape}")
    _spmv(mat, x, xoff, y)
    return y


def spmm(mat: tuple, X: np.ndarray, Y: np.ndarray, *, xoff: int = 0) -> np.ndarray:
    """Y[s] += M @ X[s, xoff : xoff + cols] for every row s (B streams at once); returns Y."""
    _check_mat(mat, X.shape[1], xoff, Y.shape[1])
    for name, arr in (("X", X), ("Y", Y)):
        if arr.dtype != np.float32 or arr.ndim != 2 or not arr.flags.c_contiguous:
            raise ParameterError(f"{name} must be a C-contiguous 2-D float32 array, found {arr.dtype} {arr.shape}")
    if X.shape[0] != Y.shape[0]:
        raise ParameterError(f"X and Y must have the same number of streams, found {X.shape[0]} and {Y.shape[0]}")
    _spmm(mat, X, xoff, Y)
    return Y


def vexp(x: np.ndarray) -> np.ndarray:
    """exp of a float32 array with the kernels' own exp (0 below -87, exp(88) above 88)."""
    x = np.ascontiguousarray(x, dtype=np.float32).ravel()
    out = np.empty_like(x)
    _vexp(x, out, np.empty(x.shape[0], np.int32))
    return out


def sample_class(logits: np.ndarray, u: float, *, temperature: float = 1.0) -> int:
    """The class the kernels draw from ``logits`` (256,) with uniform ``u`` in [0, 1)."""
    logits = np.ascontiguousarray(logits, dtype=np.float32)
    if logits.ndim != 1 or logits.shape[0] < 8 or logits.shape[0] % 8:
        raise ParameterError(f"logits must be 1-D with a multiple of 8 classes, found shape {logits.shape}")
    if not 0.0 <= u < 1.0:
        raise ParameterError(f"u must lie in [0, 1), found {u}")
    inv = np.float32(1.0 / check_temperature(temperature))
    n = logits.shape[0]
    return int(_draw(logits, inv, float(u), np.empty(n, np.float32), np.empty(n, np.int32)))


def check_temperature(temperature: float) -> float:
    """Validate a sampling temperature; returns it as float."""
    t = float(temperature)
    if not (0.01 <= t <= 10.0):
        raise ParameterError(f"temperature must lie in [0.01, 10], found {temperature}")
    return t


def rng_state(seed: int) -> np.ndarray:
    """A fresh RNG state (1,) uint64 for ``seed`` (any int; taken modulo 2**64)."""
    return np.array([int(seed) % (1 << 64)], dtype=np.uint64)


def rng_states(seed: int, count: int) -> np.ndarray:
    """``count`` independent stream states (count,) uint64 derived from one seed.

    Stream i starts at the i-th splitmix64 output of ``seed``, so its stream is fixed by
    (seed, i) alone.
    """
    if count < 0:
        raise ParameterError(f"count must be >= 0, found {count}")
    mask = (1 << 64) - 1
    s = int(seed) & mask
    out = np.empty(count, dtype=np.uint64)
    for i in range(count):
        s = (s + int(_GAMMA)) & mask
        z = ((s ^ (s >> 30)) * int(_MIX1)) & mask
        z = ((z ^ (z >> 27)) * int(_MIX2)) & mask
        out[i] = z ^ (z >> 31)
    return out


def uniforms(state: np.ndarray, n: int) -> np.ndarray:
    """The next ``n`` sample draws of an RNG state as (n, 2) float64; advances ``state``.

    Row t is (u_coarse, u_fine) of sample t, exactly what the generators consume from the same
    state, so ``WaveRNN.infer(mel, uniforms(rng_state(seed), n))`` sees identical draws.
    """
    if state.dtype != np.uint64 or state.shape != (1,):
        raise ParameterError(f"state must be a (1,) uint64 array, found {state.dtype} {state.shape}")
    if n < 0:
        raise ParameterError(f"n must be >= 0, found {n}")
    out = np.empty((n, 2), dtype=np.float64)
    _fill_uniforms(state, out)
    return out


def warmup() -> None:
    """Compile (or load from numba's cache) every kernel on tiny shapes of the runtime types.

    Call before a stream opens so the first chunk does not pay the compile. Types match what
    :mod:`wavern.engine.vocoder` passes, so no later call compiles again.
    """
    rs = np.random.default_rng(0)
    H, hh, nc = 8, 4, N_CLASSES
    for kind, (br, bc) in enumerate(BLOCK_SHAPES):
        mat = _tiny_mat(H, H, br, bc, kind, rs)
        spmv(mat, np.ones(H, np.float32), np.zeros(H, np.float32))
        spmm(mat, np.ones((2, H), np.float32), np.zeros((2, H), np.float32))
    vexp(np.zeros(4, np.float32))
    sample_class(np.zeros(nc, np.float32), 0.5)
    uniforms(rng_state(0), 2)

    def net(kind: int) -> tuple:
        br, bc = BLOCK_SHAPES[kind]
        return (np.zeros((3, 3 * H), np.float32), np.zeros(3 * H, np.float32),
                _tiny_mat(3 * H, H, br, bc, kind, rs), _tiny_mat(hh, hh, br, bc, kind, rs),
                np.zeros(hh, np.float32), _tiny_mat(nc, hh, br, bc, kind, rs), np.zeros(nc, np.float32),
                _tiny_mat(hh, hh, br, bc, kind, rs), np.zeros(hh, np.float32),
                _tiny_mat(nc, hh, br, bc, kind, rs), np.zeros(nc, np.float32))

    inv = np.float32(1.0)
    work = np.zeros(2 * (3 * H + hh + nc + 2) + 2 * nc, np.float32)
    ib = np.zeros(max(3 * hh, nc), np.int32)
    gi = np.zeros((1, 3 * H), np.float32)
    _generate(gi, 0, 0, HOP, net(0), inv, np.zeros(H, np.float32), np.array([128, 0], np.int64),
              rng_state(0), np.zeros(2, np.int16), np.zeros((0, 2, nc), np.float32), work, ib)
    _generate_batch(gi[None].repeat(2, 0), 0, 0, HOP, net(0), inv, np.zeros((2, H), np.float32),
                    np.zeros((2, 2), np.int64), rng_states(0, 2), np.zeros((2, 2), np.int16),
                    np.zeros((2, 0, 2, nc), np.float32), work, ib)


def _tiny_mat(rows: int, cols: int, br: int, bc: int, kind: int, rs: np.random.Generator) -> tuple:
    """A dense (every block stored) engine matrix of small random values."""
    nrb, ncb = rows // br, cols // bc
    data = (rs.standard_normal(nrb * ncb * br * bc) * 0.1).astype(np.float32)
    rowoff = np.tile(np.arange(nrb, dtype=np.uint32) * br, ncb)
    colptr = (np.arange(ncb + 1, dtype=np.uint32) * nrb).astype(np.uint32)
    return data, rowoff, colptr, kind
