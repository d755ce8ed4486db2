"""LLVM code numba does not write for us: a float32 from its bits (:func:`_f32_bits`), a weight
stored as float16 bits widened as it loads (:func:`_w`), and the lane product (:func:`_lane_fma`:
one weight broadcast into a vector of streams)."""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir as llir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

# --------------------------------------------------------------------------------------------
# Two pieces of LLVM code numba does not write for us: a float32 from its bits, and the lane
# product (one weight broadcast into a vector of streams). Under NUMBA_DISABLE_JIT=1 both are
# plain Python with the same float32 rounding as the rest of the uncompiled kernels.

if numba.config.DISABLE_JIT:
    def _f32_bits(bits):
        """The float32 whose IEEE bits are the int32 ``bits``."""
        return np.array(bits, np.int32).view(np.float32)[()]
else:
    @intrinsic
    def _f32_bits(typingctx, bits):
        """The float32 whose IEEE bits are the int32 ``bits``."""
        if bits != types.int32:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], llir.FloatType())

        return types.float32(types.int32), codegen


def _half_to_float(bits):
    """The float32 value of the IEEE half whose bits are the uint16 ``bits`` (exact)."""
    return np.float32(np.array(bits, np.uint16).view(np.float16)[()])


def _w(data, i):
    """Weight ``i`` of an engine matrix's ``data`` as float32: float32 data as stored, uint16 data
    as the IEEE half its bits are (every half is a float32, so both give the same products).
    Under NUMBA_DISABLE_JIT this plain function runs; compiled, the overload below."""
    v = data[i]
    return _half_to_float(v) if data.dtype == np.uint16 else v


def _widen_half(builder, bits):
    """LLVM: the float of the i16 half-precision ``bits`` (an exact widening; vcvtph2ps)."""
    return builder.fpext(builder.bitcast(bits, llir.HalfType()), llir.FloatType())


if not numba.config.DISABLE_JIT:
    @intrinsic
    def _half_bits(typingctx, bits):
        """The float32 value of the IEEE half whose bits are the uint16 ``bits`` (one vcvtph2ps)."""
        if bits != types.uint16:
            return None

        def codegen(context, builder, signature, args):
            return _widen_half(builder, args[0])

        return types.float32(types.uint16), codegen

    @overload(_w, inline="always")
    def _w_compiled(data, i):
        if isinstance(data, types.Array) and data.dtype == types.float32:
            return lambda data, i: data[i]
        if isinstance(data, types.Array) and data.dtype == types.uint16:
            return lambda data, i: _half_bits(data[i])
        return None


def _lane_fma(br: int, bc: int):
    """The lane product for a ``br`` x ``bc`` block of weights, as a numba intrinsic.

    ``f(Y, yo, ys, X, xo, xs, w, wo, wr, wc, L)`` (arrays 1-D float32, offsets and strides in
    elements) does, for rows i < br and lanes q < L::

        Y[yo + i ys + q] = fma(w[i, bc-1], X[bc-1, q], ... fma(w[i, 0], X[0, q], Y[yo + i ys + q]))

    with w[i, c] = w[wo + i wr + c wc] and X[c, q] = X[xo + c xs + q]: exactly the fused
    multiply-adds, in the same order, that the one-stream kernels (FMA-contracted
    ``y + w0 x0 + w1 x1 + ...``) do per output. Lanes go 32 at a time (two 16-float vectors per
    row sharing each broadcast weight), then 16, 8 and one by one; the ``bc`` input vectors of a
    lane group are loaded before the first output row is stored.
    """
    if numba.config.DISABLE_JIT:
        def lane_fma(Y, yo, ys, X, xo, xs, w, wo, wr, wc, L):
            yo, ys, xo, xs, wo, wr, wc, L = (int(v) for v in (yo, ys, xo, xs, wo, wr, wc, L))
            xv = [X[xo + c * xs:xo + c * xs + L].copy() for c in range(bc)]
            for i in range(br):
                acc = Y[yo + i * ys:yo + i * ys + L].copy()
                for c in range(bc):
                    acc = acc + _w(w, wo + i * wr + c * wc) * xv[c]
                Y[yo + i * ys:yo + i * ys + L] = acc
        return lane_fma

    @intrinsic
    def lane_fma(typingctx, Y, yo, ys, X, xo, xs, w, wo, wr, wc, L):
        if not all(isinstance(a, types.Array) and a.dtype == types.float32 and a.ndim == 1 for a in (Y, X)):
            return None
        if not (isinstance(w, types.Array) and w.dtype in (types.float32, types.uint16) and w.ndim == 1):
            return None
        half = w.dtype == types.uint16  # float16 bits, widened at the load (:func:`_w`)
        sig = types.void(Y, yo, ys, X, xo, xs, w, wo, wr, wc, L)

        def codegen(context, builder, signature, args):
            st = signature.args
            i64 = llir.IntType(64)
            const = lambda v: llir.Constant(i64, v)  # noqa: E731
            idx = [None if isinstance(st[k], types.Array) else context.cast(builder, args[k], st[k], types.int64)
                   for k in range(len(args))]
            _, yo_, ys_, _, xo_, xs_, _, wo_, wr_, wc_, n_ = idx
            y_ptr = context.make_array(st[0])(context, builder, args[0]).data
            x_ptr = context.make_array(st[3])(context, builder, args[3]).data
            w_ptr = context.make_array(st[6])(context, builder, args[6]).data
            def group(q, widths):
                """Rows 0..br-1, lanes q .. q + sum(widths) - 1, one vector of each width per row."""
                offs = [sum(widths[:v]) for v in range(len(widths))]
                vts = [llir.VectorType(llir.FloatType(), w) for w in widths]
                fmas = [cgutils.get_or_insert_function(builder.module, llir.FunctionType(vt, [vt, vt, vt]),
                                                       f"llvm.fma.v{w}f32") for w, vt in zip(widths, vts)]
                zero32 = llir.Constant(llir.IntType(32), 0)

                def vec(ptr, off, v):
                    return builder.bitcast(builder.gep(ptr, [builder.add(off, const(offs[v]))]), vts[v].as_pointer())

                def splat(value, v):
                    w = widths[v]
                    undef = llir.Constant(vts[v], llir.Undefined)
                    mask = llir.Constant(llir.VectorType(llir.IntType(32), w), [0] * w)
                    return builder.shuffle_vector(builder.insert_element(undef, value, zero32), undef, mask)

                x_rows = [builder.add(builder.add(xo_, builder.mul(xs_, const(c))), q) for c in range(bc)]
                xv = [[builder.load(vec(x_ptr, x_rows[c], v), align=4) for v in range(len(widths))] for c in range(bc)]
                for i in range(br):
                    row = builder.add(builder.add(yo_, builder.mul(ys_, const(i))), q)
                    ptrs = [vec(y_ptr, row, v) for v in range(len(widths))]
                    acc = [builder.load(p, align=4) for p in ptrs]
                    for c in range(bc):
                        w_off = builder.add(wo_, builder.add(builder.mul(wr_, const(i)), builder.mul(wc_, const(c))))
                        w_ic = builder.load(builder.gep(w_ptr, [w_off]), align=2 if half else 4)
                        if half:
                            w_ic = _widen_half(builder, w_ic)
                        acc = [builder.call(fmas[v], [splat(w_ic, v), xv[c][v], acc[v]]) for v in range(len(widths))]
                    for p, a in zip(ptrs, acc):
                        builder.store(a, p, align=4)

            # 32 lanes at a time, then the rest as one group (24 = 16 + 8, 16, 8), then one by one.
            n32 = builder.udiv(n_, const(32))
            with cgutils.for_range(builder, n32) as loop:
                group(builder.mul(loop.index, const(32)), [16, 16])
            q = builder.mul(n32, const(32))
            rest = builder.sub(n_, q)
            with builder.if_else(builder.icmp_unsigned(">=", rest, const(16))) as (ge16, lt16):
                with ge16:
                    with builder.if_else(builder.icmp_unsigned(">=", rest, const(24))) as (ge24, lt24):
                        with ge24:
                            group(q, [16, 8])
                        with lt24:
                            group(q, [16])
                with lt16:
                    with builder.if_then(builder.icmp_unsigned(">=", rest, const(8))):
                        group(q, [8])
            q1 = builder.add(q, builder.and_(rest, const(~7 & 0xFFFFFFFF)))
            with cgutils.for_range(builder, builder.and_(rest, const(7))) as loop:
                group(builder.add(q1, loop.index), [1])
            return context.get_dummy_value()

        return sig, codegen

    return lane_fma


# The shapes in use: engine blocks (rows x columns), the GRU input columns (4 rows x c_{t-1},
# f_{t-1}, c_t), and the dense products of the conditioning (4 or 1 rows x 4 or 1 inputs).
_LANE_8x4 = _lane_fma(8, 4)
_LANE_4x4 = _lane_fma(4, 4)
_LANE_8x1 = _lane_fma(8, 1)
_LANE_16x4 = _lane_fma(16, 4)
_LANE_4x3 = _lane_fma(4, 3)
_LANE_1x4 = _lane_fma(1, 4)
_LANE_4x1 = _lane_fma(4, 1)
_LANE_1x1 = _lane_fma(1, 1)




# --------------------------------------------------------------------------------------------
# The int8 block product (:mod:`.int8`): a group of 8 or 16 rows, its blocks of 4 columns of int8
# weights times 4 bytes of the quantised state each, summed in int32. The sums land in a float32
# array's memory as their bits (the one-stream kernel's gh, which the dequantisation then
# overwrites in place with floats).

if numba.config.DISABLE_JIT:
    def _i32_bits(x):
        """The int32 whose bits are the float32 ``x``."""
        return np.array(x, np.float32).view(np.int32)[()]
else:
    @intrinsic
    def _i32_bits(typingctx, x):
        """The int32 whose bits are the float32 ``x``."""
        if x != types.float32:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], llir.IntType(32))

        return types.int32(types.float32), codegen


def _q8_group(rows: int, avx2: bool):
    """The int8 product of one group of ``rows`` rows, as a numba intrinsic.

    ``f(acc, r, w, colidx, xw, k0, k1, fix)``: for i < rows, the int32 in ``acc[r + i]``'s bits
    becomes ``fix[r + i] + sum_{k0 <= k < k1} sum_c w[rows*4*k + 4i + c] * byte_c(xw[colidx[k]])``:
    blocks k0..k1-1 of the group, ``w`` int8 (row i's four weights side by side, |w| <= 63), ``xw``
    int32 words of four state bytes (uint8, little-endian), ``colidx`` uint32, ``fix`` int32,
    ``acc`` float32. The sums stay in registers over the group's blocks and are stored once. With
    ``avx2`` each eight rows are vpmaddubsw (bytes x weights, adjacent pairs summed into int16)
    then vpmaddwd by ones (pairs into int32): exact, since |w| <= 63 keeps each pair within
    2 * 255 * 63 = 32130 (no saturation). Without it, the same sums in portable LLVM vector code
    (in a scratch loop of the column-order form, 2026-12-06: 2.1x the AVX2 code's time on x86).
    """
    if numba.config.DISABLE_JIT:
        def q8_group(acc, r, w, colidx, xw, k0, k1, fix):
            r = int(r)
            total = fix[r:r + rows].astype(np.int64)
            for k in range(int(k0), int(k1)):
                x = np.array(xw[int(colidx[k])], np.int32).reshape(1).view(np.uint8).astype(np.int64)
                total += w[rows * 4 * k:rows * 4 * (k + 1)].reshape(rows, 4).astype(np.int64) @ x
            acc[r:r + rows].view(np.int32)[:] = total.astype(np.int32)
        return q8_group

    @intrinsic
    def q8_group(typingctx, acc, r, w, colidx, xw, k0, k1, fix):
        if not (isinstance(acc, types.Array) and acc.dtype == types.float32 and acc.ndim == 1):
            return None
        if not (isinstance(w, types.Array) and w.dtype == types.int8 and w.ndim == 1):
            return None
        if not all(isinstance(a, types.Array) and a.ndim == 1 for a in (colidx, xw, fix)) or \
                xw.dtype != types.int32 or fix.dtype != types.int32 or colidx.dtype != types.uint32:
            return None
        sig = types.void(acc, r, w, colidx, xw, k0, k1, fix)

        def codegen(context, builder, signature, args):
            st = signature.args
            i8, i16, i32, i64 = (llir.IntType(n) for n in (8, 16, 32, 64))
            v32i8, v16i16, v8i32 = llir.VectorType(i8, 32), llir.VectorType(i16, 16), llir.VectorType(i32, 8)
            r_ = context.cast(builder, args[1], st[1], types.int64)
            k0_ = context.cast(builder, args[5], st[5], types.int64)
            k1_ = context.cast(builder, args[6], st[6], types.int64)
            ptr = lambda k: context.make_array(st[k])(context, builder, args[k]).data  # noqa: E731
            acc_ptr, w_ptr, c_ptr, x_ptr, f_ptr = builder.bitcast(ptr(0), i32.as_pointer()), ptr(2), ptr(3), ptr(4), ptr(7)

            def rows8(base, g):  # the int32 vector of rows r + 8g .. r + 8g + 7 at base
                return builder.bitcast(builder.gep(base, [builder.add(r_, llir.Constant(i64, 8 * g))]),
                                       v8i32.as_pointer())

            if avx2:
                mod = builder.module
                maddubs = mod.declare_intrinsic("llvm.x86.avx2.pmadd.ub.sw", fnty=llir.FunctionType(v16i16, [v32i8, v32i8]))
                maddwd = mod.declare_intrinsic("llvm.x86.avx2.pmadd.wd", fnty=llir.FunctionType(v8i32, [v16i16, v16i16]))
            else:
                v32i16, v16i32 = llir.VectorType(i16, 32), llir.VectorType(i32, 16)

                def pairs(v, n):  # adjacent lanes summed: (n,) -> (n / 2,)
                    idx = llir.VectorType(i32, n // 2)
                    even = builder.shuffle_vector(v, v, llir.Constant(idx, list(range(0, n, 2))))
                    odd = builder.shuffle_vector(v, v, llir.Constant(idx, list(range(1, n, 2))))
                    return builder.add(even, odd)
            sums = [cgutils.alloca_once(builder, v8i32) for _ in range(rows // 8)]
            for g, sp in enumerate(sums):
                builder.store(builder.load(rows8(f_ptr, g), align=4), sp)
            with cgutils.for_range(builder, builder.sub(k1_, k0_)) as loop:
                k = builder.add(k0_, loop.index)
                x = builder.load(builder.gep(x_ptr, [builder.zext(builder.load(builder.gep(c_ptr, [k])), i64)]))
                xs = builder.insert_element(llir.Constant(v8i32, llir.Undefined), x, llir.Constant(i32, 0))
                xv = builder.bitcast(builder.shuffle_vector(xs, xs, llir.Constant(v8i32, [0] * 8)), v32i8)
                if not avx2:
                    xw16 = builder.zext(xv, v32i16)
                base = builder.mul(k, llir.Constant(i64, rows * 4))
                for g, sp in enumerate(sums):  # eight rows (32 weights) at a time
                    wp = builder.bitcast(builder.gep(w_ptr, [builder.add(base, llir.Constant(i64, 32 * g))]),
                                         v32i8.as_pointer())
                    wv = builder.load(wp, align=1)
                    if avx2:
                        part = builder.call(maddwd, [builder.call(maddubs, [xv, wv]), llir.Constant(v16i16, [1] * 16)])
                    else:
                        p16 = pairs(builder.mul(xw16, builder.sext(wv, v32i16)), 32)  # |pair| <= 32130: no overflow
                        part = pairs(builder.sext(p16, v16i32), 16)
                    builder.store(builder.add(builder.load(sp), part), sp)
            for g, sp in enumerate(sums):
                builder.store(builder.load(sp), rows8(acc_ptr, g), align=4)
            return context.get_dummy_value()

        return sig, codegen

    return q8_group
