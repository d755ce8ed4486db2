"""The int8 products on the state: ``W_hh h + b_hh``, and O1, O3 on its halves, with int8 weights and
the state in 8 bits (``Vocoder(int8=True)``).

A float16 weight costs a widening and a multiply-add, and the block loops are bound by their
instructions (docs/bench/engine.md, "Block shapes against the roofline"). Integer products do 32
weights in two instructions (vpmaddubsw, vpmaddwd): the recurrent product of the H 512 / 10 %
vocoder took 0.55-0.57 of the float16 product's time, natively and as haswell and znver2 code (a
scratch loop, 2026-12-06, Zen 4); by row groups (below) the whole goal row took 0.64-0.66 of
the float16 row's time as AVX2 code and 0.74 natively (``bench/engine.py --avx2``). The products
are compiled at first use (about 10 s), not by :func:`~.warmup.warmup`.

The arithmetic (docs/ARCHITECTURE.md, "The int8 products"):

- weights, per row i: ``s_i = max_c |w_ic| / 63`` and ``q_ic = round(w_ic / s_i)`` (half to
  even), float32 arithmetic; a row of zeros has ``s_i = 1``. 63 levels a side, not 127, so that
  vpmaddubsw's pair sums (at most 2 * 255 * 63) never saturate.
- the state: ``u_j = floor(clamp(h_j, -1, 1) * 127 + 128.5)``, a byte in [1, 255] (the product
  and the sum each rounded to float32, as the torch reference does them).
- ``acc_i = sum_c q_ic (u_c - 128)``, exact in int32: the products add ``q_ic u_c`` and start
  from ``-128 sum_c q_ic`` (the matrix's ``fix``).
- ``gh_i = b_i + d_i * float32(acc_i)`` with ``d_i = s_i / 127``: a product and a sum, each
  rounded to float32 (no fused multiply-add), so the torch reference loop
  (``WaveRNN.infer(..., int8=True)``) gets the same bits.

The engine matrix is a 6-tuple ``(data, colidx, rowptr, kind, fix, scale)``, by row groups (not
by block columns as the float layout, :mod:`.blocks`): the blocks of row group g are
``rowptr[g] : rowptr[g+1]`` (uint32), block k's column group ``colidx[k]`` (uint32) and its
weights ``data[k*br*4 : (k+1)*br*4]`` (int8) row by row (row i's four weights side by side);
``kind`` 0 (8x4 blocks, groups of 8 rows) or 3 (16x4, 16); ``fix`` int32 (rows); ``scale``
float32 (rows) the ``d_i``. A group's sums stay in registers over its blocks (an integer add's
chain is one cycle a block): 0.56-0.87 of the time of the column order with a store per block
(a scratch loop, 2026-12-06). Made by ``wavern.engine.vocoder.to_engine_int8``.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.extending import overload

from wavern.engine.kernels.blocks import _copy, _spmm, _spmv
from wavern.engine.kernels.intrinsics import _i32_bits, _q8_group
from wavern.engine.kernels.jit import _JIT, TARGET_AVX2, U, kernel
from wavern.errors import ParameterError

__all__ = ["Q_WEIGHT", "Q_STATE", "STATE_OFFSET", "INT8_LEN", "spmv_int8", "state_bytes"]

#: Weight levels a side (|q| <= 63: vpmaddubsw's pair sums stay below 2**15).
Q_WEIGHT = 63
#: State levels a side: u = floor(h * 127 + 128.5).
Q_STATE = 127
#: The byte of h = 0.
STATE_OFFSET = 128
#: Length of an int8 engine matrix tuple (a float one has 4).
INT8_LEN = 6

_Q = np.float32(Q_STATE)
_ROUND = np.float32(STATE_OFFSET + 0.5)
_LO = np.float32(-1.0)
_HI = np.float32(1.0)

_GROUP_8 = _q8_group(8, TARGET_AVX2)
_GROUP_16 = _q8_group(16, TARGET_AVX2)


@kernel(**_JIT)  # no fast-math: the product and the sum rounded apart, as the torch reference does
def _state_bytes(h, xq):
    """xq[j] = floor(clamp(h[j], -1, 1) * 127 + 128.5): the state as bytes in [1, 255]."""
    for j in range(U(h.shape[0])):
        v = min(max(h[j], _LO), _HI)
        xq[j] = np.uint8(np.int32(v * _Q + _ROUND))


@kernel(**_JIT)
def _spmv_int8(mat, xw, acc):
    """acc (float32 memory, int32 bits) = fix + sum over the blocks of q u: the exact integer
    sums, a row group at a time. ``xw`` int32, the state bytes four to a word (block column j's
    four in ``xw[j]``)."""
    data, colidx, rowptr, kind, fix, _scale = mat
    if kind == 3:
        for g in range(U(rowptr.shape[0] - 1)):
            _GROUP_16(acc, g * U(16), data, colidx, xw, U(rowptr[g]), U(rowptr[g + U(1)]), fix)
    else:
        for g in range(U(rowptr.shape[0] - 1)):
            _GROUP_8(acc, g * U(8), data, colidx, xw, U(rowptr[g]), U(rowptr[g + U(1)]), fix)


@kernel(**_JIT)  # no fast-math: b + d * acc as two roundings (no FMA), as the torch reference
def _dequantise(acc, b, scale):
    """acc[i] <- b[i] + scale[i] * float32(acc[i]'s int32 bits), in place."""
    for i in range(U(acc.shape[0])):
        acc[i] = b[i] + scale[i] * np.float32(_i32_bits(acc[i]))


def _affine(M, b, x, xoff, y, xw):
    """y = M x[xoff : xoff + cols] + b for one stream: the float block product (``M`` a 4-tuple,
    :mod:`.blocks`) or the int8 one (a 6-tuple: ``x`` a state, in [-1, 1]; ``xw`` float32 scratch of
    at least (len(x) - xoff) / 4 that receives x's bytes from xoff on). Compiled: the overload
    below picks the product by M's type."""
    if len(M) == INT8_LEN:
        _state_bytes(x[xoff:], xw.view(np.uint8))  # (all of x from xoff: the columns the blocks name)
        _spmv_int8(M, xw.view(np.int32), y)
        _dequantise(y, b, M[5])
    else:
        y[:] = b
        _spmv(M, x, np.int64(xoff), y)


def _affine_streams(M, b, X, xoff, Y, xw):
    """:func:`_affine` for streams X (B, ...) into Y (B, rows): the float product four streams a
    weight load (:func:`~.blocks._spmm`), the int8 one stream by stream (the same sums)."""
    if len(M) == INT8_LEN:
        for q in range(X.shape[0]):
            _affine(M, b, X[q], xoff, Y[q], xw)
    else:
        Y[:] = b
        _spmm(M, X, np.int64(xoff), Y)


if not numba.config.DISABLE_JIT:
    def _is_int8(M) -> bool:
        return isinstance(M, types.BaseTuple) and len(M) == INT8_LEN

    @overload(_affine, inline="always")
    def _affine_compiled(M, b, x, xoff, y, xw):
        if _is_int8(M):
            def int8(M, b, x, xoff, y, xw):
                _state_bytes(x[U(xoff):], xw.view(np.uint8))
                _spmv_int8(M, xw.view(np.int32), y)
                _dequantise(y, b, M[5])
            return int8

        def float_(M, b, x, xoff, y, xw):
            _copy(b, y)
            _spmv(M, x, xoff, y)
        return float_

    @overload(_affine_streams, inline="always")
    def _affine_streams_compiled(M, b, X, xoff, Y, xw):
        if _is_int8(M):
            def int8(M, b, X, xoff, Y, xw):
                for q in range(X.shape[0]):
                    _affine(M, b, X[q], xoff, Y[q], xw)
            return int8

        def float_(M, b, X, xoff, Y, xw):
            for q in range(X.shape[0]):
                _copy(b, Y[q])
            _spmm(M, X, xoff, Y)
        return float_


def _check_int8(mat: tuple, x_len: int, y_len: int) -> None:
    if not (isinstance(mat, tuple) and len(mat) == INT8_LEN):
        raise ParameterError(f"an int8 matrix is a {INT8_LEN}-tuple (data, colidx, rowptr, kind, fix, scale), "
                             f"found {type(mat).__name__} of length {len(mat) if isinstance(mat, tuple) else '?'}")
    data, colidx, rowptr, kind, fix, scale = mat
    if kind not in (0, 3):
        raise ParameterError(f"int8 blocks are 8x4 (kind 0) or 16x4 (kind 3), found kind {kind}")
    br = 16 if kind == 3 else 8
    if data.dtype != np.int8 or data.shape != (colidx.shape[0] * br * 4,):
        raise ParameterError(f"int8 matrix data must be int8 of {br * 4} per block, found {data.dtype} {data.shape}")
    if colidx.dtype != np.uint32 or rowptr.dtype != np.uint32:
        raise ParameterError("int8 matrix colidx and rowptr must be uint32")
    if fix.dtype != np.int32 or scale.dtype != np.float32 or fix.shape != (y_len,) or scale.shape != (y_len,):
        raise ParameterError(f"int8 matrix fix (int32) and scale (float32) must have the {y_len} rows of the output")
    if rowptr.shape != (y_len // br + 1,) or y_len % br or int(rowptr[-1]) != colidx.shape[0] \
            or np.any(np.diff(rowptr.astype(np.int64)) < 0):
        raise ParameterError(f"int8 matrix rowptr must run over the {y_len // br} groups of {br} rows to the block count")
    if x_len % 4 or (colidx.size and int(colidx.max()) >= x_len // 4):
        raise ParameterError(f"int8 matrix blocks name columns past the state's {x_len}")
    if data.size and int(np.abs(data.astype(np.int16)).max()) > Q_WEIGHT:
        raise ParameterError(f"int8 weights must lie in [-{Q_WEIGHT}, {Q_WEIGHT}] (the byte products would saturate)")


def state_bytes(h: np.ndarray) -> np.ndarray:
    """The state's bytes as the int8 product reads them (uint8, same length as ``h``)."""
    h = np.ascontiguousarray(h, dtype=np.float32)
    if h.ndim != 1:
        raise ParameterError(f"h must be 1-D, found shape {h.shape}")
    out = np.empty(h.shape[0], np.uint8)
    _state_bytes(h, out)
    return out


def spmv_int8(mat: tuple, h: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``b + W h`` with the int8 product (validated; a new float32 array)."""
    h = np.ascontiguousarray(h, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    if h.ndim != 1 or b.ndim != 1:
        raise ParameterError(f"h and b must be 1-D, found shapes {h.shape} and {b.shape}")
    _check_int8(mat, h.shape[0], b.shape[0])
    gh = np.empty(b.shape[0], np.float32)
    xw = np.zeros(h.shape[0] // 4, np.float32)
    _affine(mat, b, h, 0, gh, xw)
    return gh
