"""Block-sparse products: ``spmv`` (y += M x, one stream) and ``_spmm`` (four streams per weight
load), for every block shape in :data:`BLOCK_SHAPES`.

Engine block layout (converted at load from the file's, :func:`wavern.engine.vocoder.to_engine`):
a matrix is a tuple ``(data, rowoff, colptr, kind)``: ``data`` flat, float32 or the bits of
float16 weights as uint16 (:func:`_w` widens them as it loads; half the bytes), block ``k`` at
``data[k*br*bc : (k+1)*br*bc]`` stored column by column (``bc`` columns of ``br`` rows);
``rowoff[k]`` uint32 first row of block ``k``; blocks of block column ``j`` are
``colptr[j] : colptr[j+1]`` (uint32); ``kind`` selects the block shape in :data:`BLOCK_SHAPES`.
The one-stream matvec also takes a flat form (:func:`flat`): ``(data, rowoff, colidx, kind + FLAT)``
with ``colidx[k]`` the block column of block ``k``.
"""

from __future__ import annotations

import numpy as np

from wavern.engine.kernels.intrinsics import _w
from wavern.engine.kernels.jit import _FM_ARITH, _FM_BLOCK, _JIT, BLOCK_SHAPES, FLAT, U, kernel
from wavern.errors import ParameterError

__all__ = ["spmv", "flat"]

# Block products are written out row by row: every load of a block (the output rows and the
# weights) happens before its stores, so LLVM may vectorise them without proving that the output
# does not alias the weights. Loops that interleave loads and stores stayed scalar (5-8 GFLOP/s
# against 45-90 for the unrolled form at H = 512).

@kernel(fastmath=_FM_ARITH, **_JIT)
def _copy(src, dst):
    """dst[:] = src (same length), as a loop LLVM vectorises (a product's bias, before its sums)."""
    for i in range(U(dst.shape[0])):
        dst[i] = src[i]


# --------------------------------------------------------------------------------------------
# Block-sparse matrix x vector: y += M x[xoff : xoff + cols]. One block body per block shape,
# written out so all loads of a block precede its stores (module notes), and two loops over the
# blocks that call it: by block column (the column's inputs loaded once for all its blocks; the
# GRU's W_hh), or flat, each block with its own column index (no inner loop to leave: faster where
# most columns hold zero to two blocks, as in a row-pruned output layer, see :func:`flat`). Both
# take the blocks in the same order, so they give the same sums.

@kernel(fastmath=_FM_BLOCK, inline="always", **_JIT)
def _block_8x4(data, b, x0, x1, x2, x3, y, r):
    """y[r + i] += sum_c w(i, c) x_c for the block whose weights start at data[b] (weight (i, c)
    at b + i + 8c), each row one chain y + w0 x0 + w1 x1 + ... (FMAs under contraction)."""
    s0 = y[r] + _w(data, b) * x0 + _w(data, b + U(8)) * x1 + _w(data, b + U(16)) * x2 + _w(data, b + U(24)) * x3
    s1 = y[r + U(1)] + _w(data, b + U(1)) * x0 + _w(data, b + U(9)) * x1 + _w(data, b + U(17)) * x2 + _w(data, b + U(25)) * x3
    s2 = y[r + U(2)] + _w(data, b + U(2)) * x0 + _w(data, b + U(10)) * x1 + _w(data, b + U(18)) * x2 + _w(data, b + U(26)) * x3
    s3 = y[r + U(3)] + _w(data, b + U(3)) * x0 + _w(data, b + U(11)) * x1 + _w(data, b + U(19)) * x2 + _w(data, b + U(27)) * x3
    s4 = y[r + U(4)] + _w(data, b + U(4)) * x0 + _w(data, b + U(12)) * x1 + _w(data, b + U(20)) * x2 + _w(data, b + U(28)) * x3
    s5 = y[r + U(5)] + _w(data, b + U(5)) * x0 + _w(data, b + U(13)) * x1 + _w(data, b + U(21)) * x2 + _w(data, b + U(29)) * x3
    s6 = y[r + U(6)] + _w(data, b + U(6)) * x0 + _w(data, b + U(14)) * x1 + _w(data, b + U(22)) * x2 + _w(data, b + U(30)) * x3
    s7 = y[r + U(7)] + _w(data, b + U(7)) * x0 + _w(data, b + U(15)) * x1 + _w(data, b + U(23)) * x2 + _w(data, b + U(31)) * x3
    y[r] = s0
    y[r + U(1)] = s1
    y[r + U(2)] = s2
    y[r + U(3)] = s3
    y[r + U(4)] = s4
    y[r + U(5)] = s5
    y[r + U(6)] = s6
    y[r + U(7)] = s7


@kernel(fastmath=_FM_BLOCK, **_JIT)
def _spmv_8x4(data, rowoff, colptr, x, xoff, y):
    for j in range(U(colptr.shape[0] - 1)):
        xj = U(xoff) + j * U(4)
        x0 = x[xj]
        x1 = x[xj + U(1)]
        x2 = x[xj + U(2)]
        x3 = x[xj + U(3)]
        for k in range(U(colptr[j]), U(colptr[j + U(1)])):
            _block_8x4(data, k * U(32), x0, x1, x2, x3, y, U(rowoff[k]))


@kernel(fastmath=_FM_BLOCK, **_JIT)
def _flat_8x4(data, rowoff, colidx, x, xoff, y):
    for k in range(U(rowoff.shape[0])):
        xj = U(xoff) + U(colidx[k]) * U(4)
        x0 = x[xj]
        x1 = x[xj + U(1)]
        x2 = x[xj + U(2)]
        x3 = x[xj + U(3)]
        _block_8x4(data, k * U(32), x0, x1, x2, x3, y, U(rowoff[k]))


@kernel(fastmath=_FM_BLOCK, inline="always", **_JIT)
def _block_4x4(data, b, x0, x1, x2, x3, y, r):
    s0 = y[r] + _w(data, b) * x0 + _w(data, b + U(4)) * x1 + _w(data, b + U(8)) * x2 + _w(data, b + U(12)) * x3
    s1 = y[r + U(1)] + _w(data, b + U(1)) * x0 + _w(data, b + U(5)) * x1 + _w(data, b + U(9)) * x2 + _w(data, b + U(13)) * x3
    s2 = y[r + U(2)] + _w(data, b + U(2)) * x0 + _w(data, b + U(6)) * x1 + _w(data, b + U(10)) * x2 + _w(data, b + U(14)) * x3
    s3 = y[r + U(3)] + _w(data, b + U(3)) * x0 + _w(data, b + U(7)) * x1 + _w(data, b + U(11)) * x2 + _w(data, b + U(15)) * x3
    y[r] = s0
    y[r + U(1)] = s1
    y[r + U(2)] = s2
    y[r + U(3)] = s3


@kernel(fastmath=_FM_BLOCK, **_JIT)
def _spmv_4x4(data, rowoff, colptr, x, xoff, y):
    for j in range(U(colptr.shape[0] - 1)):
        xj = U(xoff) + j * U(4)
        x0 = x[xj]
        x1 = x[xj + U(1)]
        x2 = x[xj + U(2)]
        x3 = x[xj + U(3)]
        for k in range(U(colptr[j]), U(colptr[j + U(1)])):
            _block_4x4(data, k * U(16), x0, x1, x2, x3, y, U(rowoff[k]))


@kernel(fastmath=_FM_BLOCK, **_JIT)
def _flat_4x4(data, rowoff, colidx, x, xoff, y):
    for k in range(U(rowoff.shape[0])):
        xj = U(xoff) + U(colidx[k]) * U(4)
        x0 = x[xj]
        x1 = x[xj + U(1)]
        x2 = x[xj + U(2)]
        x3 = x[xj + U(3)]
        _block_4x4(data, k * U(16), x0, x1, x2, x3, y, U(rowoff[k]))


@kernel(fastmath=_FM_BLOCK, inline="always", **_JIT)
def _block_8x1(data, b, x0, y, r):
    s0 = y[r] + _w(data, b) * x0
    s1 = y[r + U(1)] + _w(data, b + U(1)) * x0
    s2 = y[r + U(2)] + _w(data, b + U(2)) * x0
    s3 = y[r + U(3)] + _w(data, b + U(3)) * x0
    s4 = y[r + U(4)] + _w(data, b + U(4)) * x0
    s5 = y[r + U(5)] + _w(data, b + U(5)) * x0
    s6 = y[r + U(6)] + _w(data, b + U(6)) * x0
    s7 = y[r + U(7)] + _w(data, b + U(7)) * x0
    y[r] = s0
    y[r + U(1)] = s1
    y[r + U(2)] = s2
    y[r + U(3)] = s3
    y[r + U(4)] = s4
    y[r + U(5)] = s5
    y[r + U(6)] = s6
    y[r + U(7)] = s7


@kernel(fastmath=_FM_BLOCK, **_JIT)
def _spmv_8x1(data, rowoff, colptr, x, xoff, y):
    for j in range(U(colptr.shape[0] - 1)):
        xj = U(xoff) + j
        x0 = x[xj]
        for k in range(U(colptr[j]), U(colptr[j + U(1)])):
            _block_8x1(data, k * U(8), x0, y, U(rowoff[k]))


@kernel(fastmath=_FM_BLOCK, **_JIT)
def _flat_8x1(data, rowoff, colidx, x, xoff, y):
    for k in range(U(rowoff.shape[0])):
        xj = U(xoff) + U(colidx[k])
        x0 = x[xj]
        _block_8x1(data, k * U(8), x0, y, U(rowoff[k]))


@kernel(fastmath=_FM_BLOCK, inline="always", **_JIT)
def _block_16x4(data, b, x0, x1, x2, x3, y, r):
    """16x4 blocks (weight (i, c) at b + i + 16c): one 512-bit vector per block column where
    the CPU has them, half the block overhead of two 8x4 blocks."""
    s0 = y[r] + _w(data, b) * x0 + _w(data, b + U(16)) * x1 + _w(data, b + U(32)) * x2 + _w(data, b + U(48)) * x3
    s1 = y[r + U(1)] + _w(data, b + U(1)) * x0 + _w(data, b + U(17)) * x1 + _w(data, b + U(33)) * x2 + _w(data, b + U(49)) * x3
    s2 = y[r + U(2)] + _w(data, b + U(2)) * x0 + _w(data, b + U(18)) * x1 + _w(data, b + U(34)) * x2 + _w(data, b + U(50)) * x3
    s3 = y[r + U(3)] + _w(data, b + U(3)) * x0 + _w(data, b + U(19)) * x1 + _w(data, b + U(35)) * x2 + _w(data, b + U(51)) * x3
    s4 = y[r + U(4)] + _w(data, b + U(4)) * x0 + _w(data, b + U(20)) * x1 + _w(data, b + U(36)) * x2 + _w(data, b + U(52)) * x3
    s5 = y[r + U(5)] + _w(data, b + U(5)) * x0 + _w(data, b + U(21)) * x1 + _w(data, b + U(37)) * x2 + _w(data, b + U(53)) * x3
    s6 = y[r + U(6)] + _w(data, b + U(6)) * x0 + _w(data, b + U(22)) * x1 + _w(data, b + U(38)) * x2 + _w(data, b + U(54)) * x3
    s7 = y[r + U(7)] + _w(data, b + U(7)) * x0 + _w(data, b + U(23)) * x1 + _w(data, b + U(39)) * x2 + _w(data, b + U(55)) * x3
    s8 = y[r + U(8)] + _w(data, b + U(8)) * x0 + _w(data, b + U(24)) * x1 + _w(data, b + U(40)) * x2 + _w(data, b + U(56)) * x3
    s9 = y[r + U(9)] + _w(data, b + U(9)) * x0 + _w(data, b + U(25)) * x1 + _w(data, b + U(41)) * x2 + _w(data, b + U(57)) * x3
    s10 = y[r + U(10)] + _w(data, b + U(10)) * x0 + _w(data, b + U(26)) * x1 + _w(data, b + U(42)) * x2 + _w(data, b + U(58)) * x3
    s11 = y[r + U(11)] + _w(data, b + U(11)) * x0 + _w(data, b + U(27)) * x1 + _w(data, b + U(43)) * x2 + _w(data, b + U(59)) * x3
    s12 = y[r + U(12)] + _w(data, b + U(12)) * x0 + _w(data, b + U(28)) * x1 + _w(data, b + U(44)) * x2 + _w(data, b + U(60)) * x3
    s13 = y[r + U(13)] + _w(data, b + U(13)) * x0 + _w(data, b + U(29)) * x1 + _w(data, b + U(45)) * x2 + _w(data, b + U(61)) * x3
    s14 = y[r + U(14)] + _w(data, b + U(14)) * x0 + _w(data, b + U(30)) * x1 + _w(data, b + U(46)) * x2 + _w(data, b + U(62)) * x3
    s15 = y[r + U(15)] + _w(data, b + U(15)) * x0 + _w(data, b + U(31)) * x1 + _w(data, b + U(47)) * x2 + _w(data, b + U(63)) * x3
    y[r] = s0
    y[r + U(1)] = s1
    y[r + U(2)] = s2
    y[r + U(3)] = s3
    y[r + U(4)] = s4
    y[r + U(5)] = s5
    y[r + U(6)] = s6
    y[r + U(7)] = s7
    y[r + U(8)] = s8
    y[r + U(9)] = s9
    y[r + U(10)] = s10
    y[r + U(11)] = s11
    y[r + U(12)] = s12
    y[r + U(13)] = s13
    y[r + U(14)] = s14
    y[r + U(15)] = s15


@kernel(fastmath=_FM_BLOCK, **_JIT)
def _spmv_16x4(data, rowoff, colptr, x, xoff, y):
    for j in range(U(colptr.shape[0] - 1)):
        xj = U(xoff) + j * U(4)
        x0 = x[xj]
        x1 = x[xj + U(1)]
        x2 = x[xj + U(2)]
        x3 = x[xj + U(3)]
        for k in range(U(colptr[j]), U(colptr[j + U(1)])):
            _block_16x4(data, k * U(64), x0, x1, x2, x3, y, U(rowoff[k]))


@kernel(fastmath=_FM_BLOCK, **_JIT)
def _flat_16x4(data, rowoff, colidx, x, xoff, y):
    for k in range(U(rowoff.shape[0])):
        xj = U(xoff) + U(colidx[k]) * U(4)
        x0 = x[xj]
        x1 = x[xj + U(1)]
        x2 = x[xj + U(2)]
        x3 = x[xj + U(3)]
        _block_16x4(data, k * U(64), x0, x1, x2, x3, y, U(rowoff[k]))


@kernel(**_JIT)
def _spmv(mat, x, xoff, y):
    """y += M x[xoff:]; ``mat`` = (data, rowoff, colptr, kind), or flat (:func:`flat`): (data,
    rowoff, colidx, kind + FLAT)."""
    data, rowoff, colptr, kind = mat
    if kind == 0:
        _spmv_8x4(data, rowoff, colptr, x, xoff, y)
    elif kind == 1:
        _spmv_4x4(data, rowoff, colptr, x, xoff, y)
    elif kind == 2:
        _spmv_8x1(data, rowoff, colptr, x, xoff, y)
    elif kind == 3:
        _spmv_16x4(data, rowoff, colptr, x, xoff, y)
    elif kind == 4:
        _flat_8x4(data, rowoff, colptr, x, xoff, y)
    elif kind == 5:
        _flat_4x4(data, rowoff, colptr, x, xoff, y)
    elif kind == 6:
        _flat_8x1(data, rowoff, colptr, x, xoff, y)
    else:
        _flat_16x4(data, rowoff, colptr, x, xoff, y)


# Block-sparse matrix x B vectors: Y[s] += M X[s, xoff:]. Streams go four at a time through
# one block column (each weight loaded once for four streams: 1.8x faster than four matvecs at
# H = 512, 10 %, 2.2-2.6x dense at H = 768); the B % 4 left over, and 8x1 blocks, take the
# matvec. Every row sums in the same order as the matvec, so a batch reproduces single streams
# bit for bit.

@kernel(fastmath=_FM_BLOCK, inline="always", **_JIT)
def _spmm4_rows8(data, rowoff, colptr, X, xoff, Y, bw, cw, halves):
    """Streams 0 .. 4*(B//4)-1 of Y += M X[:, xoff:], four at a time, for blocks of ``halves`` x 8
    rows and 4 columns (``bw`` weights each, column c of row group g at ``g*8 + c*cw``): each
    weight is loaded once for four streams. Inlined with constant shapes (:func:`_spmm4_8x4`,
    :func:`_spmm4_16x4`), so LLVM sees the 8x4 body it vectorises."""
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
                for g in range(halves):
                    r = U(rowoff[k]) + g * U(8)
                    o = k * bw + g * U(8)
                    o1 = o + cw
                    o2 = o1 + cw
                    o3 = o2 + cw
                    as0 = Y[q, r] + _w(data, o) * a0 + _w(data, o1) * a1 + _w(data, o2) * a2 + _w(data, o3) * a3
                    as1 = Y[q, r + U(1)] + _w(data, o + U(1)) * a0 + _w(data, o1 + U(1)) * a1 + _w(data, o2 + U(1)) * a2 + _w(data, o3 + U(1)) * a3
                    as2 = Y[q, r + U(2)] + _w(data, o + U(2)) * a0 + _w(data, o1 + U(2)) * a1 + _w(data, o2 + U(2)) * a2 + _w(data, o3 + U(2)) * a3
                    as3 = Y[q, r + U(3)] + _w(data, o + U(3)) * a0 + _w(data, o1 + U(3)) * a1 + _w(data, o2 + U(3)) * a2 + _w(data, o3 + U(3)) * a3
                    as4 = Y[q, r + U(4)] + _w(data, o + U(4)) * a0 + _w(data, o1 + U(4)) * a1 + _w(data, o2 + U(4)) * a2 + _w(data, o3 + U(4)) * a3
                    as5 = Y[q, r + U(5)] + _w(data, o + U(5)) * a0 + _w(data, o1 + U(5)) * a1 + _w(data, o2 + U(5)) * a2 + _w(data, o3 + U(5)) * a3
                    as6 = Y[q, r + U(6)] + _w(data, o + U(6)) * a0 + _w(data, o1 + U(6)) * a1 + _w(data, o2 + U(6)) * a2 + _w(data, o3 + U(6)) * a3
                    as7 = Y[q, r + U(7)] + _w(data, o + U(7)) * a0 + _w(data, o1 + U(7)) * a1 + _w(data, o2 + U(7)) * a2 + _w(data, o3 + U(7)) * a3
                    bs0 = Y[q1, r] + _w(data, o) * b0 + _w(data, o1) * b1 + _w(data, o2) * b2 + _w(data, o3) * b3
                    bs1 = Y[q1, r + U(1)] + _w(data, o + U(1)) * b0 + _w(data, o1 + U(1)) * b1 + _w(data, o2 + U(1)) * b2 + _w(data, o3 + U(1)) * b3
                    bs2 = Y[q1, r + U(2)] + _w(data, o + U(2)) * b0 + _w(data, o1 + U(2)) * b1 + _w(data, o2 + U(2)) * b2 + _w(data, o3 + U(2)) * b3
                    bs3 = Y[q1, r + U(3)] + _w(data, o + U(3)) * b0 + _w(data, o1 + U(3)) * b1 + _w(data, o2 + U(3)) * b2 + _w(data, o3 + U(3)) * b3
                    bs4 = Y[q1, r + U(4)] + _w(data, o + U(4)) * b0 + _w(data, o1 + U(4)) * b1 + _w(data, o2 + U(4)) * b2 + _w(data, o3 + U(4)) * b3
                    bs5 = Y[q1, r + U(5)] + _w(data, o + U(5)) * b0 + _w(data, o1 + U(5)) * b1 + _w(data, o2 + U(5)) * b2 + _w(data, o3 + U(5)) * b3
                    bs6 = Y[q1, r + U(6)] + _w(data, o + U(6)) * b0 + _w(data, o1 + U(6)) * b1 + _w(data, o2 + U(6)) * b2 + _w(data, o3 + U(6)) * b3
                    bs7 = Y[q1, r + U(7)] + _w(data, o + U(7)) * b0 + _w(data, o1 + U(7)) * b1 + _w(data, o2 + U(7)) * b2 + _w(data, o3 + U(7)) * b3
                    cs0 = Y[q2, r] + _w(data, o) * c0 + _w(data, o1) * c1 + _w(data, o2) * c2 + _w(data, o3) * c3
                    cs1 = Y[q2, r + U(1)] + _w(data, o + U(1)) * c0 + _w(data, o1 + U(1)) * c1 + _w(data, o2 + U(1)) * c2 + _w(data, o3 + U(1)) * c3
                    cs2 = Y[q2, r + U(2)] + _w(data, o + U(2)) * c0 + _w(data, o1 + U(2)) * c1 + _w(data, o2 + U(2)) * c2 + _w(data, o3 + U(2)) * c3
                    cs3 = Y[q2, r + U(3)] + _w(data, o + U(3)) * c0 + _w(data, o1 + U(3)) * c1 + _w(data, o2 + U(3)) * c2 + _w(data, o3 + U(3)) * c3
                    cs4 = Y[q2, r + U(4)] + _w(data, o + U(4)) * c0 + _w(data, o1 + U(4)) * c1 + _w(data, o2 + U(4)) * c2 + _w(data, o3 + U(4)) * c3
                    cs5 = Y[q2, r + U(5)] + _w(data, o + U(5)) * c0 + _w(data, o1 + U(5)) * c1 + _w(data, o2 + U(5)) * c2 + _w(data, o3 + U(5)) * c3
                    cs6 = Y[q2, r + U(6)] + _w(data, o + U(6)) * c0 + _w(data, o1 + U(6)) * c1 + _w(data, o2 + U(6)) * c2 + _w(data, o3 + U(6)) * c3
                    cs7 = Y[q2, r + U(7)] + _w(data, o + U(7)) * c0 + _w(data, o1 + U(7)) * c1 + _w(data, o2 + U(7)) * c2 + _w(data, o3 + U(7)) * c3
                    es0 = Y[q3, r] + _w(data, o) * e0 + _w(data, o1) * e1 + _w(data, o2) * e2 + _w(data, o3) * e3
                    es1 = Y[q3, r + U(1)] + _w(data, o + U(1)) * e0 + _w(data, o1 + U(1)) * e1 + _w(data, o2 + U(1)) * e2 + _w(data, o3 + U(1)) * e3
                    es2 = Y[q3, r + U(2)] + _w(data, o + U(2)) * e0 + _w(data, o1 + U(2)) * e1 + _w(data, o2 + U(2)) * e2 + _w(data, o3 + U(2)) * e3
                    es3 = Y[q3, r + U(3)] + _w(data, o + U(3)) * e0 + _w(data, o1 + U(3)) * e1 + _w(data, o2 + U(3)) * e2 + _w(data, o3 + U(3)) * e3
                    es4 = Y[q3, r + U(4)] + _w(data, o + U(4)) * e0 + _w(data, o1 + U(4)) * e1 + _w(data, o2 + U(4)) * e2 + _w(data, o3 + U(4)) * e3
                    es5 = Y[q3, r + U(5)] + _w(data, o + U(5)) * e0 + _w(data, o1 + U(5)) * e1 + _w(data, o2 + U(5)) * e2 + _w(data, o3 + U(5)) * e3
                    es6 = Y[q3, r + U(6)] + _w(data, o + U(6)) * e0 + _w(data, o1 + U(6)) * e1 + _w(data, o2 + U(6)) * e2 + _w(data, o3 + U(6)) * e3
                    es7 = Y[q3, r + U(7)] + _w(data, o + U(7)) * e0 + _w(data, o1 + U(7)) * e1 + _w(data, o2 + U(7)) * e2 + _w(data, o3 + U(7)) * e3
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


@kernel(fastmath=_FM_BLOCK, **_JIT)
def _spmm4_8x4(data, rowoff, colptr, X, xoff, Y):
    """:func:`_spmm4_rows8` for 8x4 blocks (weight (i, c) at k*32 + i + 8c)."""
    _spmm4_rows8(data, rowoff, colptr, X, xoff, Y, U(32), U(8), U(1))


@kernel(fastmath=_FM_BLOCK, **_JIT)
def _spmm4_16x4(data, rowoff, colptr, X, xoff, Y):
    """:func:`_spmm4_rows8` for 16x4 blocks (weight (i, c) at k*64 + i + 16c), as two 8-row halves."""
    _spmm4_rows8(data, rowoff, colptr, X, xoff, Y, U(64), U(16), U(2))


@kernel(fastmath=_FM_BLOCK, **_JIT)
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
                as0 = Y[q, r] + _w(data, o) * a0 + _w(data, o + U(4)) * a1 + _w(data, o + U(8)) * a2 + _w(data, o + U(12)) * a3
                as1 = Y[q, r + U(1)] + _w(data, o + U(1)) * a0 + _w(data, o + U(5)) * a1 + _w(data, o + U(9)) * a2 + _w(data, o + U(13)) * a3
                as2 = Y[q, r + U(2)] + _w(data, o + U(2)) * a0 + _w(data, o + U(6)) * a1 + _w(data, o + U(10)) * a2 + _w(data, o + U(14)) * a3
                as3 = Y[q, r + U(3)] + _w(data, o + U(3)) * a0 + _w(data, o + U(7)) * a1 + _w(data, o + U(11)) * a2 + _w(data, o + U(15)) * a3
                bs0 = Y[q1, r] + _w(data, o) * b0 + _w(data, o + U(4)) * b1 + _w(data, o + U(8)) * b2 + _w(data, o + U(12)) * b3
                bs1 = Y[q1, r + U(1)] + _w(data, o + U(1)) * b0 + _w(data, o + U(5)) * b1 + _w(data, o + U(9)) * b2 + _w(data, o + U(13)) * b3
                bs2 = Y[q1, r + U(2)] + _w(data, o + U(2)) * b0 + _w(data, o + U(6)) * b1 + _w(data, o + U(10)) * b2 + _w(data, o + U(14)) * b3
                bs3 = Y[q1, r + U(3)] + _w(data, o + U(3)) * b0 + _w(data, o + U(7)) * b1 + _w(data, o + U(11)) * b2 + _w(data, o + U(15)) * b3
                cs0 = Y[q2, r] + _w(data, o) * c0 + _w(data, o + U(4)) * c1 + _w(data, o + U(8)) * c2 + _w(data, o + U(12)) * c3
                cs1 = Y[q2, r + U(1)] + _w(data, o + U(1)) * c0 + _w(data, o + U(5)) * c1 + _w(data, o + U(9)) * c2 + _w(data, o + U(13)) * c3
                cs2 = Y[q2, r + U(2)] + _w(data, o + U(2)) * c0 + _w(data, o + U(6)) * c1 + _w(data, o + U(10)) * c2 + _w(data, o + U(14)) * c3
                cs3 = Y[q2, r + U(3)] + _w(data, o + U(3)) * c0 + _w(data, o + U(7)) * c1 + _w(data, o + U(11)) * c2 + _w(data, o + U(15)) * c3
                es0 = Y[q3, r] + _w(data, o) * e0 + _w(data, o + U(4)) * e1 + _w(data, o + U(8)) * e2 + _w(data, o + U(12)) * e3
                es1 = Y[q3, r + U(1)] + _w(data, o + U(1)) * e0 + _w(data, o + U(5)) * e1 + _w(data, o + U(9)) * e2 + _w(data, o + U(13)) * e3
                es2 = Y[q3, r + U(2)] + _w(data, o + U(2)) * e0 + _w(data, o + U(6)) * e1 + _w(data, o + U(10)) * e2 + _w(data, o + U(14)) * e3
                es3 = Y[q3, r + U(3)] + _w(data, o + U(3)) * e0 + _w(data, o + U(7)) * e1 + _w(data, o + U(11)) * e2 + _w(data, o + U(15)) * e3
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


@kernel(**_JIT)
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
    elif kind == 3:
        _spmm4_16x4(data, rowoff, colptr, X, xoff, Y)
        done = X.shape[0] // 4 * 4
    for q in range(done, X.shape[0]):
        _spmv(mat, X[q], xoff, Y[q])



# --------------------------------------------------------------------------------------------
# Public wrappers: validate, allocate, call.

def _check_mat(mat: tuple, x_len: int, xoff: int, y_len: int, *, allow_flat: bool = False) -> None:
    data, rowoff, colptr, kind = mat
    kinds = len(BLOCK_SHAPES) + (FLAT if allow_flat else 0)
    if not 0 <= kind < kinds:
        raise ParameterError(f"block kind {kind} is not one of 0..{kinds - 1}")
    br, bc = BLOCK_SHAPES[kind % FLAT]
    nnzb = rowoff.shape[0]
    if data.dtype not in (np.float32, np.uint16) or rowoff.dtype != np.uint32 or colptr.dtype != np.uint32:
        raise ParameterError(f"engine matrix dtypes must be float32 (or uint16 float16 bits)/uint32/uint32, found "
                             f"{data.dtype}/{rowoff.dtype}/{colptr.dtype}")
    if data.shape != (nnzb * br * bc,):
        raise ParameterError(f"data must hold {nnzb} blocks of {br}x{bc}, found shape {data.shape}")
    if kind >= FLAT:  # one column index per block
        if colptr.shape != (nnzb,):
            raise ParameterError(f"a flat matrix needs one column index per block ({nnzb}), found {colptr.shape}")
        cols = (int(colptr.max()) + 1) * bc if nnzb else 0
    elif colptr.shape[0] < 1 or int(colptr[-1]) != nnzb:
        raise ParameterError(f"colptr must end at the block count {nnzb}")
    else:
        cols = (colptr.shape[0] - 1) * bc
    if xoff < 0 or xoff + cols > x_len:
        raise ParameterError(f"x[{xoff}:{xoff + cols}] is outside x of length {x_len}")
    if nnzb and int(rowoff.max()) + br > y_len:
        raise ParameterError(f"block rows reach {int(rowoff.max()) + br}, beyond y of length {y_len}")


def spmv(mat: tuple, x: np.ndarray, y: np.ndarray, *, xoff: int = 0) -> np.ndarray:
    """y += M @ x[xoff : xoff + cols] for an engine block-sparse matrix; returns y.

    Parameters
    ----------
    mat : (data, rowoff, colptr, kind), see the module notes, or its :func:`flat` form.
    x : (n,) float32, C-contiguous.
    y : (rows,) float32, C-contiguous, updated in place.
    """
    _check_mat(mat, x.shape[0], xoff, y.shape[0], allow_flat=True)
    for name, arr in (("x", x), ("y", y)):
        if arr.dtype != np.float32 or arr.ndim != 1 or not arr.flags.c_contiguous:
            raise ParameterError(f"{name} must be a C-contiguous 1-D float32 array, found {arr.dtype} {arr.shape}")
    _spmv(mat, x, xoff, y)
    return y




def flat(mat: tuple) -> tuple:
    """``mat`` for the one-stream matvec with the blocks in a flat loop: ``(data, rowoff, colidx,
    kind + FLAT)``, ``colidx[k]`` the block column of block k; the same blocks in the same order,
    so :func:`spmv` gives the same sums. Only the matvec takes it (the batch products read block
    columns). For the output layers: with most block columns holding zero to two blocks, the
    column loop's inner loop costs more than it saves (the shipped voice's four output matvecs
    alone: 0.41 against 0.58 us a sample on a Zen 3, min of 9; its W_hh, 3.6 blocks a column, took
    0.98 flat against 0.85 by column)."""
    data, rowoff, colptr, kind = mat
    if kind >= FLAT:
        return mat
    colidx = np.repeat(np.arange(colptr.shape[0] - 1, dtype=np.uint32), np.diff(colptr.astype(np.int64)))
    return data, rowoff, colidx.astype(np.uint32), int(kind) + FLAT


