"""Real FFTs of frames eight at a time, for mel matching (:mod:`wavern.engine.melmatch`).

Mel matching transforms every frame of the output forth and back in each of its passes (16
transforms a frame for the default voice's 8 passes). numpy's FFT takes one frame at a time; these
take :data:`LANES` frames side by side, one frame a vector lane, so every step of a transform is one
vector operation on whole rows, without shuffles.

Layout: a complex sequence of length m over the lanes is two float64 arrays (real, imaginary) of
``m * LANES``, element ``t`` of lane ``f`` at ``t * LANES + f``. An n-sample real frame is
transformed as the m = n/2 complex sequence z[t] = x[2t] + i x[2t+1] (:func:`rfft_post` turns
its transform into the real frame's n/2 + 1 bins; :func:`irfft_pre` the way back).

The complex transform (:func:`dif`) is an in-place radix-4 decimation in frequency (a radix-2
stage last when log2 m is odd), whose output lies in digit-reversed order (:func:`digit_reversal`);
its inverse (:func:`dit`, unnormalised) runs the transposed stages in reverse, from digit-reversed
input to natural order, so neither ever permutes. :func:`analyse` and :func:`synthesise` move eight
frames into lane rows and back with 8 x 8 transposes in registers, and overlap-add.

The butterflies, the real-FFT steps and the transposes are LLVM vector code written here: numba's
own loops were no faster (it cannot prove the rows a butterfly reads and writes distinct, and
checks at run time). Multiplies and adds stay separate (no fused ones) and every lane computes the
same operations, so a frame's result does not depend on its lane or on the CPU's vector width.
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir as llir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from wavern.engine.kernels.jit import U, kernel

__all__ = ["LANES", "RealFFTPlan", "digit_reversal", "dif", "dit", "rfft_post", "irfft_pre", "analyse", "synthesise",
           "block_width"]

#: Frames transformed side by side: one 512-bit vector of float64 (two 256-bit ones on AVX2).
LANES = 8


def digit_reversal(m: int) -> np.ndarray:
    """Where :func:`dif` leaves bin k of a length-``m`` transform (m a power of two): the row
    ``digit_reversal(m)[k]``. Radix-4 digits of k reversed, the last (radix-2) digit kept."""
    if m <= 2:
        return np.arange(m, dtype=np.int64)
    k = np.arange(m, dtype=np.int64)
    return (k % 4) * (m // 4) + digit_reversal(m // 4)[k // 4]


class RealFFTPlan:
    """The tables of an ``n``-sample real transform (n a power of two, >= 8): ``pos`` (the
    digit-reversed rows of the n/2-point complex transform), ``cr``, ``ci`` (its twiddles cos, -sin
    of 2 pi t / (n/2)), ``rc``, ``rs`` (cos, sin of pi k / (n/2), k = 0 .. n/2, exact at both ends)."""

    def __init__(self, n: int) -> None:
        if n < 8 or n & (n - 1):
            raise ValueError(f"a lane FFT needs a power of two >= 8 samples, found {n}")
        m = n // 2
        self.n, self.m = n, m
        self.pos = digit_reversal(m)
        t = np.arange(m)
        self.cr, self.ci = np.cos(2 * np.pi * t / m), -np.sin(2 * np.pi * t / m)
        k = np.arange(m + 1)
        self.rc, self.rs = np.cos(np.pi * k / m), np.sin(np.pi * k / m)
        self.rc[0], self.rs[0], self.rc[m], self.rs[m] = 1.0, 0.0, -1.0, 0.0  # X[0], X[m] exactly real
        #: the tables in the order :func:`analyse` and :func:`synthesise` take them
        self.tables = (self.pos, self.cr, self.ci, self.rc, self.rs)

    def scratch(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The two arrays (real, imaginary) of one lane group's complex sequence, and one for its
        frames in sample order (:func:`synthesise`)."""
        return np.empty(self.m * LANES), np.empty(self.m * LANES), np.empty(self.n * LANES)


# --------------------------------------------------------------------------------------------
# The vector butterflies. Offsets are in elements; each call reads and writes LANES consecutive
# float64 at each offset. Under NUMBA_DISABLE_JIT the plain-Python twins below run instead.

def _vec_type():
    return llir.VectorType(llir.DoubleType(), LANES)


def _vec_ptr(builder, base, off):
    return builder.bitcast(builder.gep(base, [off]), _vec_type().as_pointer())


def _splat(builder, value):
    vt = _vec_type()
    undef = llir.Constant(vt, llir.Undefined)
    mask = llir.Constant(llir.VectorType(llir.IntType(32), LANES), [0] * LANES)
    return builder.shuffle_vector(builder.insert_element(undef, value, llir.Constant(llir.IntType(32), 0)),
                                  undef, mask)


def _unpack(context, builder, signature, args, arrays=(), offsets=(), scalars=()):
    """An intrinsic's arguments by position: the data pointers of ``arrays``, ``offsets`` as int64,
    ``scalars`` as float64 broadcast to vectors."""
    st = signature.args
    return ([context.make_array(st[j])(context, builder, args[j]).data for j in arrays],
            [context.cast(builder, args[j], st[j], types.int64) for j in offsets],
            [_splat(builder, context.cast(builder, args[j], st[j], types.float64)) for j in scalars])


def _cmul(builder, ar, ai, br, bi):
    """(ar + i ai)(br + i bi), as (ar br - ai bi, ar bi + ai br)."""
    return (builder.fsub(builder.fmul(ar, br), builder.fmul(ai, bi)),
            builder.fadd(builder.fmul(ar, bi), builder.fmul(ai, br)))


def _butterfly4_py(inverse: bool):
    def butterfly4(re, im, o0, o1, o2, o3, w1r, w1i, w2r, w2i, w3r, w3i):
        rows = [slice(o, o + LANES) for o in (o0, o1, o2, o3)]
        x = [re[r] + 1j * im[r] for r in rows]
        w1, w2, w3 = complex(w1r, w1i), complex(w2r, w2i), complex(w3r, w3i)
        if inverse:
            u = [x[0], x[1] * w1, x[2] * w2, x[3] * w3]
            y = [u[0] + u[1] + u[2] + u[3], u[0] - u[2] + 1j * (u[1] - u[3]),
                 u[0] - u[1] + u[2] - u[3], u[0] - u[2] - 1j * (u[1] - u[3])]
        else:
            t1, t3 = x[0] - x[2], x[1] - x[3]
            y = [x[0] + x[1] + x[2] + x[3], (t1 - 1j * t3) * w1, (x[0] - x[1] + x[2] - x[3]) * w2, (t1 + 1j * t3) * w3]
        for r, v in zip(rows, y):
            re[r], im[r] = v.real, v.imag
    return butterfly4


def _butterfly4(inverse: bool):
    """The radix-4 butterfly on rows o0..o3 (in place), twiddles w1..w3 as (re, im) scalars.

    Forward (decimation in frequency), with t1 = x0 - x2, t3 = x1 - x3:
    y0 = x0 + x1 + x2 + x3, y1 = (t1 - i t3) w1, y2 = (x0 - x1 + x2 - x3) w2, y3 = (t1 + i t3) w3.
    Inverse (its conjugate transpose, decimation in time): u = (x0, x1 w1, x2 w2, x3 w3), then
    y0 = u0 + u1 + u2 + u3, y1 = u0 - u2 + i (u1 - u3), y2 = u0 - u1 + u2 - u3, y3 = u0 - u2 - i (u1 - u3).
    """
    if numba.config.DISABLE_JIT:
        return _butterfly4_py(inverse)

    @intrinsic
    def butterfly4(typingctx, re, im, o0, o1, o2, o3, w1r, w1i, w2r, w2i, w3r, w3i):
        sig = types.void(re, im, o0, o1, o2, o3, w1r, w1i, w2r, w2i, w3r, w3i)

        def codegen(context, builder, signature, args):
            (rp, ip), offs, w = _unpack(context, builder, signature, args, (0, 1), range(2, 6), range(6, 12))
            pr, pi = [_vec_ptr(builder, rp, o) for o in offs], [_vec_ptr(builder, ip, o) for o in offs]
            xr, xi = [builder.load(p, align=8) for p in pr], [builder.load(p, align=8) for p in pi]
            add, sub = builder.fadd, builder.fsub
            if inverse:
                ur, ui = [xr[0]], [xi[0]]
                for j in range(1, 4):
                    a, b = _cmul(builder, xr[j], xi[j], w[2 * j - 2], w[2 * j - 1])
                    ur.append(a)
                    ui.append(b)
                xr, xi = ur, ui
            t0r, t0i = add(xr[0], xr[2]), add(xi[0], xi[2])
            t1r, t1i = sub(xr[0], xr[2]), sub(xi[0], xi[2])
            t2r, t2i = add(xr[1], xr[3]), add(xi[1], xi[3])
            t3r, t3i = sub(xr[1], xr[3]), sub(xi[1], xi[3])
            if inverse:
                y = [(add(t0r, t2r), add(t0i, t2i)), (sub(t1r, t3i), add(t1i, t3r)),
                     (sub(t0r, t2r), sub(t0i, t2i)), (add(t1r, t3i), sub(t1i, t3r))]
            else:
                y = [(add(t0r, t2r), add(t0i, t2i)),
                     _cmul(builder, add(t1r, t3i), sub(t1i, t3r), w[0], w[1]),
                     _cmul(builder, sub(t0r, t2r), sub(t0i, t2i), w[2], w[3]),
                     _cmul(builder, sub(t1r, t3i), add(t1i, t3r), w[4], w[5])]
            for j in range(4):
                builder.store(y[j][0], pr[j], align=8)
                builder.store(y[j][1], pi[j], align=8)
            return context.get_dummy_value()

        return sig, codegen

    return butterfly4


_dif4 = _butterfly4(False)
_dit4 = _butterfly4(True)

if numba.config.DISABLE_JIT:
    def _butterfly2(re, im, o0, o1):
        for a in (re, im):
            x0, x1 = a[o0:o0 + LANES].copy(), a[o1:o1 + LANES].copy()
            a[o0:o0 + LANES], a[o1:o1 + LANES] = x0 + x1, x0 - x1

    def _post(zr, zi, ok, oc, xr, xi, mag, ox, c, s):
        a = zr[ok:ok + LANES] + 1j * zi[ok:ok + LANES]
        b = zr[oc:oc + LANES] - 1j * zi[oc:oc + LANES]
        e, o = (a + b) * 0.5, (a - b) * 0.5
        x = (e.real - s * o.real + c * o.imag) + 1j * (e.imag - s * o.imag - c * o.real)
        xr[ox:ox + LANES], xi[ox:ox + LANES] = x.real, x.imag
        mag[ox:ox + LANES] = np.sqrt(x.real * x.real + x.imag * x.imag)

    def _pre(xr, xi, g, ok, oc, zr, zi, oz, c, s):
        a = g[ok:ok + LANES] * (xr[ok:ok + LANES] + 1j * xi[ok:ok + LANES])
        b = g[oc:oc + LANES] * (xr[oc:oc + LANES] - 1j * xi[oc:oc + LANES])
        e, d = (a + b) * 0.5, (a - b) * 0.5
        zr[oz:oz + LANES] = e.real + (-s * d.real - c * d.imag)
        zi[oz:oz + LANES] = e.imag + (-s * d.imag + c * d.real)
else:
    @intrinsic
    def _butterfly2(typingctx, re, im, o0, o1):
        """y0 = x0 + x1, y1 = x0 - x1 on rows o0, o1 (in place): the last stage of an odd log2 m."""
        sig = types.void(re, im, o0, o1)

        def codegen(context, builder, signature, args):
            bases, o, _ = _unpack(context, builder, signature, args, (0, 1), (2, 3))
            for base in bases:
                p0, p1 = _vec_ptr(builder, base, o[0]), _vec_ptr(builder, base, o[1])
                x0, x1 = builder.load(p0, align=8), builder.load(p1, align=8)
                builder.store(builder.fadd(x0, x1), p0, align=8)
                builder.store(builder.fsub(x0, x1), p1, align=8)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def _post(typingctx, zr, zi, ok, oc, xr, xi, mag, ox, c, s):
        """Bin k of the real frames from the complex transform Z: with A = Z[k] (row ok), B =
        conj Z[m - k] (row oc), E = (A + B)/2, O = (A - B)/2, X = E - i e^{-i pi k/m} O, i.e.
        Re X = Re E - s Re O + c Im O, Im X = Im E - s Im O - c Re O (c, s: cos, sin of pi k / m);
        stores X and |X| at ``ox``."""
        sig = types.void(zr, zi, ok, oc, xr, xi, mag, ox, c, s)

        def codegen(context, builder, signature, args):
            data, (ok_, oc_, ox_), (c_, s_) = _unpack(context, builder, signature, args, (0, 1, 4, 5, 6), (2, 3, 7), (8, 9))
            half = _splat(builder, llir.Constant(llir.DoubleType(), 0.5))
            add, sub, mul = builder.fadd, builder.fsub, builder.fmul
            ar, ai = (builder.load(_vec_ptr(builder, data[j], ok_), align=8) for j in (0, 1))
            br, bi_neg = (builder.load(_vec_ptr(builder, data[j], oc_), align=8) for j in (0, 1))
            er, ei = mul(add(ar, br), half), mul(sub(ai, bi_neg), half)  # B = conj Z[m - k]
            or_, oi = mul(sub(ar, br), half), mul(add(ai, bi_neg), half)
            x_r = add(sub(er, mul(s_, or_)), mul(c_, oi))
            x_i = sub(sub(ei, mul(s_, oi)), mul(c_, or_))
            builder.store(x_r, _vec_ptr(builder, data[2], ox_), align=8)
            builder.store(x_i, _vec_ptr(builder, data[3], ox_), align=8)
            vt = _vec_type()
            sqrt = cgutils.get_or_insert_function(builder.module, llir.FunctionType(vt, [vt]), f"llvm.sqrt.v{LANES}f64")
            builder.store(builder.call(sqrt, [add(mul(x_r, x_r), mul(x_i, x_i))]), _vec_ptr(builder, data[4], ox_),
                          align=8)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def _pre(typingctx, xr, xi, g, ok, oc, zr, zi, oz, c, s):
        """Row ``oz`` of the complex sequence whose inverse transform is the real frames of bins
        X' = g X: with A = X'[k] (row ok), B = conj X'[m - k] (row oc), E = (A + B)/2, D = (A - B)/2,
        Z = E + i e^{i pi k/m} D, i.e. Re Z = Re E - s Re D - c Im D, Im Z = Im E - s Im D + c Re D."""
        sig = types.void(xr, xi, g, ok, oc, zr, zi, oz, c, s)

        def codegen(context, builder, signature, args):
            data, (ok_, oc_, oz_), (c_, s_) = _unpack(context, builder, signature, args, (0, 1, 2, 5, 6), (3, 4, 7), (8, 9))
            half = _splat(builder, llir.Constant(llir.DoubleType(), 0.5))
            add, sub, mul = builder.fadd, builder.fsub, builder.fmul
            gk, gc = (builder.load(_vec_ptr(builder, data[2], o), align=8) for o in (ok_, oc_))
            ar, ai = (mul(gk, builder.load(_vec_ptr(builder, data[j], ok_), align=8)) for j in (0, 1))
            br, bi_neg = (mul(gc, builder.load(_vec_ptr(builder, data[j], oc_), align=8)) for j in (0, 1))
            er, ei = mul(add(ar, br), half), mul(sub(ai, bi_neg), half)
            dr, di = mul(sub(ar, br), half), mul(add(ai, bi_neg), half)
            z_r = add(er, sub(mul(builder.fneg(s_), dr), mul(c_, di)))
            z_i = add(ei, add(mul(builder.fneg(s_), di), mul(c_, dr)))
            builder.store(z_r, _vec_ptr(builder, data[3], oz_), align=8)
            builder.store(z_i, _vec_ptr(builder, data[4], oz_), align=8)
            return context.get_dummy_value()

        return sig, codegen


# --------------------------------------------------------------------------------------------
# Frames to lane rows and back, eight frames by sixteen samples at a time: two 8 x 8 transposes in
# registers (three rounds of shuffles), the even and odd samples split or merged around them.

def _shuffle(builder, a, b, mask):
    return builder.shuffle_vector(a, b, llir.Constant(llir.VectorType(llir.IntType(32), len(mask)), mask))


def _transpose8(builder, rows):
    """Columns of the 8 x 8 matrix whose rows are the eight 8-vectors ``rows``."""
    t = []
    for p in range(4):  # pairs of elements, then pairs of pairs, then halves
        t += [_shuffle(builder, rows[2 * p], rows[2 * p + 1], [0, 8, 2, 10, 4, 12, 6, 14]),
              _shuffle(builder, rows[2 * p], rows[2 * p + 1], [1, 9, 3, 11, 5, 13, 7, 15])]
    u = [None] * 8
    for b in (0, 4):
        for j in (0, 1):
            u[b + j] = _shuffle(builder, t[b + j], t[b + j + 2], [0, 1, 8, 9, 4, 5, 12, 13])
            u[b + j + 2] = _shuffle(builder, t[b + j], t[b + j + 2], [2, 3, 10, 11, 6, 7, 14, 15])
    return ([_shuffle(builder, u[j], u[j + 4], [0, 1, 2, 3, 8, 9, 10, 11]) for j in range(4)]
            + [_shuffle(builder, u[j], u[j + 4], [4, 5, 6, 7, 12, 13, 14, 15]) for j in range(4)])


_EVENS, _ODDS = list(range(0, 16, 2)), list(range(1, 16, 2))

if numba.config.DISABLE_JIT:
    def _frames_to_lanes(x, xo, xs, window, wo, zr, zi, zo):
        for f in range(LANES):
            v = window[wo:wo + 16] * x[xo + f * xs:xo + f * xs + 16]
            zr[zo + f:zo + f + 8 * LANES:LANES], zi[zo + f:zo + f + 8 * LANES:LANES] = v[0::2], v[1::2]

    def _lanes_to_frames(zr, zi, zo, y, yo, ys):
        for f in range(LANES):
            y[yo + f * ys:yo + f * ys + 16:2] = zr[zo + f:zo + f + 8 * LANES:LANES]
            y[yo + f * ys + 1:yo + f * ys + 16:2] = zi[zo + f:zo + f + 8 * LANES:LANES]
else:
    @intrinsic
    def _frames_to_lanes(typingctx, x, xo, xs, window, wo, zr, zi, zo):
        """Eight frames' sixteen samples, frame f's from ``x[xo + f xs]``, times ``window[wo ..]``,
        into lane rows: row j of zr (at ``zo + j LANES``) holds the frames' samples 2j, of zi 2j + 1."""
        sig = types.void(x, xo, xs, window, wo, zr, zi, zo)

        def codegen(context, builder, signature, args):
            (xp, wp, rp, ip), (xo_, xs_, wo_, zo_), _ = _unpack(context, builder, signature, args, (0, 3, 5, 6),
                                                                (1, 2, 4, 7))
            i64 = llir.IntType(64)
            w = [builder.load(_vec_ptr(builder, wp, builder.add(wo_, llir.Constant(i64, h))), align=8) for h in (0, 8)]
            evens, odds = [], []
            for f in range(LANES):
                at = builder.add(xo_, builder.mul(xs_, llir.Constant(i64, f)))
                a, b = (builder.fmul(w[h], builder.load(_vec_ptr(builder, xp, builder.add(at, llir.Constant(i64, 8 * h))),
                                                        align=8)) for h in (0, 1))
                evens.append(_shuffle(builder, a, b, _EVENS))
                odds.append(_shuffle(builder, a, b, _ODDS))
            for base, rows in ((rp, evens), (ip, odds)):
                for j, col in enumerate(_transpose8(builder, rows)):
                    builder.store(col, _vec_ptr(builder, base, builder.add(zo_, llir.Constant(i64, j * LANES))), align=8)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def _lanes_to_frames(typingctx, zr, zi, zo, y, yo, ys):
        """The way back: eight lane rows of zr and of zi from ``zo`` into the frames' sixteen
        samples, frame f's at ``y[yo + f ys]`` (row j of zr its sample 2j, of zi 2j + 1)."""
        sig = types.void(zr, zi, zo, y, yo, ys)

        def codegen(context, builder, signature, args):
            (rp, ip, yp), (zo_, yo_, ys_), _ = _unpack(context, builder, signature, args, (0, 1, 3), (2, 4, 5))
            i64 = llir.IntType(64)
            cols = [_transpose8(builder, [builder.load(_vec_ptr(builder, base, builder.add(zo_, llir.Constant(i64, j * LANES))),
                                                       align=8) for j in range(8)]) for base in (rp, ip)]
            for f in range(LANES):
                at = builder.add(yo_, builder.mul(ys_, llir.Constant(i64, f)))
                e, o = cols[0][f], cols[1][f]
                builder.store(_shuffle(builder, e, o, [0, 8, 1, 9, 2, 10, 3, 11]), _vec_ptr(builder, yp, at), align=8)
                builder.store(_shuffle(builder, e, o, [4, 12, 5, 13, 6, 14, 7, 15]),
                              _vec_ptr(builder, yp, builder.add(at, llir.Constant(i64, 8))), align=8)
            return context.get_dummy_value()

        return sig, codegen


# --------------------------------------------------------------------------------------------
# The transforms, on one lane group (m rows of LANES).

_OPTS = dict(cache=True, nogil=True, error_model="numpy", boundscheck=False)


@kernel(inline="always", nogil=True, error_model="numpy", boundscheck=False)
def _radix4_stage(zr, zi, m, size, cr, ci, inverse):
    """Every block of ``size`` rows through its radix-4 butterflies: :func:`dif`'s stage of that
    size, or (``inverse``) its conjugate transpose, with conjugate twiddles."""
    q = size // 4
    step = m // size
    for base in range(0, m, size):
        for p in range(q):
            t = p * step
            r = (base + p) * LANES
            if inverse:
                _dit4(zr, zi, r, r + q * LANES, r + 2 * q * LANES, r + 3 * q * LANES,
                      cr[t], -ci[t], cr[2 * t], -ci[2 * t], cr[3 * t], -ci[3 * t])
            else:
                _dif4(zr, zi, r, r + q * LANES, r + 2 * q * LANES, r + 3 * q * LANES,
                      cr[t], ci[t], cr[2 * t], ci[2 * t], cr[3 * t], ci[3 * t])


@kernel(inline="always", nogil=True, error_model="numpy", boundscheck=False)
def _radix2_stage(zr, zi, m):
    """The radix-2 butterflies of neighbouring rows (the last stage of an odd log2 m, its own inverse)."""
    for base in range(0, m, 2):
        _butterfly2(zr, zi, base * LANES, (base + 1) * LANES)


@kernel(**_OPTS)
def dif(zr, zi, m, cr, ci):
    """The forward DFT of the m-row sequence (zr, zi), in place, into digit-reversed rows
    (:func:`digit_reversal`); ``cr``, ``ci``: cos, -sin of 2 pi t / m."""
    size = m
    while size >= 4:
        _radix4_stage(zr, zi, m, size, cr, ci, False)
        size //= 4
    if size == 2:
        _radix2_stage(zr, zi, m)


@kernel(**_OPTS)
def dit(zr, zi, m, cr, ci):
    """The inverse of :func:`dif` times m (the unnormalised inverse DFT), in place: digit-reversed
    rows in, natural order out (dif's stages, transposed, in reverse)."""
    size = 1
    while size * 4 <= m:
        size *= 4
    if m // size == 2:
        _radix2_stage(zr, zi, m)
    size = 4 * (m // size)  # the radix-4 stages from the smallest blocks to the whole
    while size <= m:
        _radix4_stage(zr, zi, m, size, cr, ci, True)
        size *= 4


@kernel(**_OPTS)
def rfft_post(zr, zi, pos, rc, rs, xr, xi, mag, at, stride):
    """The n/2 + 1 bins of the LANES real frames whose z sequence :func:`dif` transformed into (zr,
    zi): bin k into ``xr``, ``xi`` (real, imaginary) and ``mag`` (magnitude) at ``at + k stride``."""
    m = pos.size
    for k in range(m + 1):
        ok = pos[k] if k < m else pos[0]
        oc = pos[m - k] if k > 0 else pos[0]
        _post(zr, zi, ok * LANES, oc * LANES, xr, xi, mag, at + k * stride, rc[k], rs[k])


@kernel(**_OPTS)
def irfft_pre(xr, xi, g, at, stride, pos, rc, rs, zr, zi):
    """The z sequence, in digit-reversed rows, whose :func:`dit` gives m times the real frames of
    bins g X (bin k of ``xr``, ``xi``, ``g`` at ``at + k stride``). Bins 0 and m must be real, as
    :func:`rfft_post` leaves them (numpy's irfft drops their imaginary parts; this would not)."""
    m = pos.size
    for k in range(m):
        _pre(xr, xi, g, at + k * stride, at + (m - k) * stride, zr, zi, pos[k] * LANES, rc[k], rs[k])


# --------------------------------------------------------------------------------------------
# The short-time transform of a segment: frames in, bins out; bins times gains in, overlap-add out.
# A block of frames keeps its bins as rows of ``width`` frames (bins by frames: the loops over
# the frames of a bin vectorise), ``width`` its frames rounded up to whole lane groups.

def block_width(frames: int) -> int:
    """The row length of a block of ``frames`` frames: whole lane groups."""
    return -(-max(1, frames) // LANES) * LANES


@kernel(**_OPTS)
def analyse(x, x0, n, k0, count, hop, reflect, window, pos, cr, ci, rc, rs, zr, zi, xr, xi, mag, width):
    """Frames ``k0 .. k0 + count - 1`` (count <= width) of a segment of ``n`` samples, windowed and
    transformed: bin k of frame j into ``xr``, ``xi``, ``mag`` at k width + j. Frame k is
    centred on sample k hop; ``x`` holds the samples from ``x0``; outside [0, n) they are
    reflected when ``reflect``, else zeros (log_mel's padding)."""
    m = pos.size
    half = m  # n_fft / 2
    for g0 in range(0, count, LANES):
        s0 = (k0 + g0) * hop - half
        if m % 8 == 0 and g0 + LANES <= count and s0 >= 0 and s0 + (LANES - 1) * hop + 2 * m <= n:
            for u in range(m // 8):  # eight whole frames inside the segment: sixteen samples at a time
                _frames_to_lanes(x, s0 - x0 + 16 * u, hop, window, 16 * u, zr, zi, 8 * LANES * u)
            dif(zr, zi, m, cr, ci)
            rfft_post(zr, zi, pos, rc, rs, xr, xi, mag, g0, width)
            continue
        for f in range(LANES):
            if g0 + f >= count:  # lanes past the last frame: zeros
                for t in range(m):
                    zr[t * LANES + f] = 0.0
                    zi[t * LANES + f] = 0.0
                continue
            s0 = (k0 + g0 + f) * hop - half
            if s0 >= 0 and s0 + 2 * m <= n:  # inside the segment: a plain copy (unsigned indices: no wraparound)
                b, fu = U(s0 - x0), U(f)
                for t in range(U(m)):
                    zr[t * U(LANES) + fu] = window[U(2) * t] * x[b + U(2) * t]
                    zi[t * U(LANES) + fu] = window[U(2) * t + U(1)] * x[b + U(2) * t + U(1)]
                continue
            for i in range(2 * m):
                s = s0 + i
                v = 0.0
                if reflect:
                    if s < 0:
                        s = -s
                    if s > n - 1:
                        s = 2 * (n - 1) - s
                    v = window[i] * x[s - x0]
                elif 0 <= s < n:
                    v = window[i] * x[s - x0]
                if i % 2 == 0:
                    zr[(i // 2) * LANES + f] = v
                else:
                    zi[(i // 2) * LANES + f] = v
        dif(zr, zi, m, cr, ci)
        rfft_post(zr, zi, pos, rc, rs, xr, xi, mag, g0, width)


@kernel(**_OPTS)
def synthesise(xr, xi, g, width, count, pos, cr, ci, rc, rs, zr, zi, frames, window, acc, norm, at, hop):
    """The ``count`` frames of bins g X (bin k of frame j of ``xr``, ``xi``, ``g`` at k width + j)
    transformed back, windowed and added frame by frame in order: frame j's sample i into
    ``acc[at + j hop + i]``, its window squared into ``norm`` (so a sample's sums do not depend on
    how the frames were grouped). ``frames``: scratch of LANES n_fft."""
    m = pos.size
    n_fft = U(2 * m)
    scale = 1.0 / m
    for g0 in range(0, count, LANES):
        irfft_pre(xr, xi, g, g0, width, pos, rc, rs, zr, zi)
        dit(zr, zi, m, cr, ci)
        if m % 8 == 0:  # the frames back in sample order, then added in order
            for u in range(m // 8):
                _lanes_to_frames(zr, zi, 8 * LANES * u, frames, 16 * u, 2 * m)
            for f in range(min(LANES, count - g0)):
                a, y = U(at + (g0 + f) * hop), U(f) * n_fft
                for i in range(n_fft):
                    w = window[i]
                    acc[a + i] += w * (frames[y + i] * scale)
                    norm[a + i] += w * w
            continue
        for f in range(min(LANES, count - g0)):
            a, fu = U(at + (g0 + f) * hop), U(f)
            for t in range(U(m)):
                i = U(2) * t
                w0, w1 = window[i], window[i + U(1)]
                acc[a + i] += w0 * (zr[t * U(LANES) + fu] * scale)
                norm[a + i] += w0 * w0
                acc[a + i + U(1)] += w1 * (zi[t * U(LANES) + fu] * scale)
                norm[a + i + U(1)] += w1 * w1
