"""Every compiled loop of the engine: block-sparse products, the GRU step, sampling, the RNG.

The WaveRNN per-sample loop (Kalchbrenner et al. 2018, eqns 2-3; the exact maths is in
docs/ARCHITECTURE.md, "The WaveRNN") runs here whole, for a chunk of samples per call; Python
touches only chunks. Public wrappers (``spmv``, ``lane_spmm``, ``conv1d``/``conv1d_taps``, ``uniforms``,
``sample_class``) validate and allocate; the private ``_name`` kernels take arrays and scalars,
write into preallocated buffers and never raise. :mod:`wavern.engine.vocoder` is the runtime that
drives them.

Three layouts:

- one stream (:func:`_generate`): vectors are plain (H,) arrays; the block products vectorise
  over the rows of a block, the gates and softmaxes over H and the 256 classes. A vocoder whose
  GRU reads its own residual one pitch period back runs :func:`_generate_period` instead: the
  same step (:func:`_sample_step`) with the synthesis filter (:func:`_synth_sample`) inside the
  loop; the others add the prediction back afterwards (:func:`_lpc_synthesis`).
- a few streams, stream-major (:func:`_generate_streams`): (B, H) arrays; the block products
  load each weight once for four streams (:func:`_spmm`), the rest is the one-stream code.
- many streams in lanes (:func:`_generate_lanes`): every vector is stored stream-minor, (rows, L)
  flattened, stream s in lane s, L = B rounded up to 8 (:func:`lanes`; lanes >= B are padding,
  computed on zeros and never drawn). Each block weight is broadcast and fused-multiply-added
  into 32 / 24 / 16 / 8 lanes at a time (:func:`_lane_fma`), the gates and the softmax exps run
  as flat loops over (rows x L), and only the inverse-CDF scan is per stream. It pays from about
  24 streams on (:func:`wavern.engine.vocoder.lane_split`, measured).

Every output value is computed by the same sequence of float operations in all three (same
fused multiply-adds in the same order, sums in fixed chains, no ``reassoc``), so a batch
reproduces single streams bit for bit, and none depends on where numpy put the buffers.
The conditioning's dense products (:func:`_conv_rows`) use the same lane code, in a fixed
order, so frame inputs do not depend on BLAS threads either (vocoder.frame_inputs).

Speed notes (measured, see docs/bench/engine.md and REFERENCES section 7):

- numba vectorises these loops only with ``NUMBA_SLP_VECTORIZE=1`` set before numba is first
  imported; we set it below if nobody did. If numba was imported earlier without it, the
  kernels still run correctly but 3-5x slower, and :data:`SLP_ACTIVE` is False.
- On AVX-512 CPUs, wavern's import lets LLVM use 512-bit vectors (``wavern.wide_vector_features``;
  LLVM's tuning for Intel's server cores prefers 256): 16x4 blocks are then one vector per block
  column and a 16x4-pruned voice runs ~20 % faster (:data:`WIDE_VECTORS`).
- ``error_model='numpy'`` (no branch per division), unsigned index arithmetic (no negative
  index wraparound), no ``reassoc`` fast-math on the block kernels.
- Block products are written out row by row: every load of a block (the output rows and the
  weights) happens before its stores, so LLVM may vectorise them without proving that the
  output does not alias the weights. Loops that interleave loads and stores stayed scalar
  (5-8 GFLOP/s against 45-90 for the unrolled form at H = 512).
- A loop over the lanes of one row would make LLVM test every pair of pointers for overlap on
  each entry (hundreds of instructions per 8x4 block) and run a 16-wide body only from 32 lanes
  up; so the lane products are LLVM vector code we emit ourselves (:func:`_lane_fma`).
- The GRU update runs in two passes over the rows (r and z, then n and h'): with AVX2's 16 vector
  registers one pass holding three exps spilled to the stack, and the shipped voice's vocoder ran
  ~10 % slower on a Zen 3. The matvecs themselves stream their float16 weights from L2 (~125 kB
  per sample at H 384, 10 %; L2 gives ~77 B/ns there); reading the GRU's per-sample input
  columns as float16 too (18 kB less a sample) bought ~1 %, so the bytes are not all of it.
- Where a sample's time went on that Zen 3 before the changes below (the shipped 5 % voice, each
  piece in its own loop, min of 15): W_hh 0.91 us, the GRU update 1.29, the four output layers
  0.71, the two draws 0.56, the period inputs 0.26, the synthesis filter 0.06. The gates' exps skip the clamp and the flush
  to 0 that their already clamped inputs never need (:func:`_exp_core`); the output layers, with
  most block columns holding zero to two blocks, take their blocks in one flat loop
  (:func:`flat`). Together with the float16 columns: 5-8 % off the whole voice in paired runs
  in one process (the old kernels loaded beside the new), values unchanged.
- No SVML in this numba build, so ``exp`` is our own vectorisable one (Cody-Waite range
  reduction, Taylor polynomial of degree 7, 2**k built in the exponent bits); relative error
  below 1e-7 over the clamped range.

Engine block layout (converted at load from the file's, see :func:`wavern.engine.vocoder.to_engine`):
a matrix is a tuple ``(data, rowoff, colptr, kind)``: ``data`` flat, float32 or the bits of
float16 weights as uint16 (:func:`_w` widens them as it loads; half the bytes), block ``k`` at
``data[k*br*bc : (k+1)*br*bc]`` stored column by column (``bc`` columns of ``br`` rows);
``rowoff[k]`` uint32 first row of block ``k``; blocks of block column ``j`` are
``colptr[j] : colptr[j+1]`` (uint32); ``kind`` selects the block shape in :data:`BLOCK_SHAPES`.
The one-stream matvec also takes a flat form (:func:`flat`): ``(data, rowoff, colidx, kind + FLAT)``
with ``colidx[k]`` the block column of block ``k``.
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
from llvmlite import ir as llir  # noqa: E402
from numba import njit, types  # noqa: E402
from numba.core import cgutils  # noqa: E402
from numba.extending import intrinsic, overload  # noqa: E402

from wavern.dsp import PHASE_INPUT_GAIN  # noqa: E402
from wavern.errors import ParameterError  # noqa: E402

log = logging.getLogger(__name__)

#: True when numba compiles with the SLP vectoriser (see the module notes).
SLP_ACTIVE: bool = bool(numba.core.config.SLP_VECTORIZE)
if not SLP_ACTIVE:
    log.warning("numba SLP vectoriser is off (%s): the vocoder kernels will run 3-5x slower; "
                "set NUMBA_SLP_VECTORIZE=1 before anything imports numba",
                "numba was imported before wavern.engine.kernels" if _LATE else "NUMBA_SLP_VECTORIZE != 1")

__all__ = [
    "BLOCK_SHAPES", "FLAT", "MEASURED_GFLOPS", "SLP_ACTIVE", "WIDE_VECTORS", "AMD_CPU", "HOP", "N_CLASSES", "LANE_MULTIPLE",
    "spmv", "lane_spmm", "lanes", "lane_work_size", "conv1d", "conv_taps", "conv1d_taps", "vexp", "sample_class",
    "rng_state", "rng_states", "uniforms", "warmup", "cache_status", "flat",
]

# jit options, chosen once: cached, GIL released, numpy's error model (no branch per division).
# numba's cache key does not record the SLP setting: a process without it neither reads nor
# writes the cache, so that later processes never load its slow kernels.
_JIT = dict(nogil=True, cache=SLP_ACTIVE, error_model="numpy")
# numba freezes a global into the compiled kernel and keys its cache to this file alone, so the
# phase input's gain is written here too: an edit of wavern.dsp's alone would leave cached
# kernels on the old value while training used the new one.
_PHASE_GAIN = 8.0
if _PHASE_GAIN != PHASE_INPUT_GAIN:
    raise ImportError(f"engine/kernels.py's _PHASE_GAIN {_PHASE_GAIN} differs from wavern.dsp.PHASE_INPUT_GAIN "
                      f"{PHASE_INPUT_GAIN}: change both")
# Block products: FMA contraction only (no reassoc: it kept LLVM from vectorising, REFERENCES 7).
_FM_BLOCK = {"contract"}
# Guard-free arithmetic (gates, exp, softmax, fixed-order sums): contraction, no signed zeros,
# reciprocal; never reassoc, so every sum keeps the order written (the same in both layouts).
_FM_ARITH = {"contract", "nsz", "arcp"}
# Max of finite values may be reordered (it is exact in any order).
_FM_REDUCE = {"contract", "nsz", "arcp", "reassoc", "nnan", "ninf"}

U = np.uint64  # unsigned index arithmetic: numba then skips the negative-index wraparound

#: Block shapes the kernels support, by ``kind``: (rows, cols) of one block.
BLOCK_SHAPES: tuple[tuple[int, int], ...] = ((8, 4), (4, 4), (8, 1), (16, 4))
#: ``kind + FLAT``: the same block shape in the flat layout of the one-stream matvec (:func:`flat`).
FLAT = 4
#: True when numba compiles for 512-bit vectors (wavern/__init__.py sets NUMBA_CPU_FEATURES).
WIDE_VECTORS: bool = "-prefer-256-bit" in (numba.core.config.CPU_FEATURES or "")
#: Effective GFLOP/s of one block-sparse matvec (3H x H, H = 512, 10 % density, one core),
#: measured by ``bench/engine.py --blocks`` (docs/bench/engine.md); only their ratios matter:
#: they choose the engine block shape of each matrix at load (vocoder.choose_block_kind).
#: 16x4 as measured on an AVX-512 Xeon against 8x4 there: 1.17x with 512-bit vectors, 0.96x
#: with 256-bit ones (so a file pruned in 16x4 blocks runs as 8x4 blocks there without them); on an
#: AMD Zen 3 EPYC (AVX2 only) 1.48x with 256-bit vectors (28.8 against 19.4 GFLOP/s; the whole
#: random H 384 / 10 % vocoder 12-15 % faster), so on AMD CPUs a 16x4 file keeps its blocks.
def _amd_cpu() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return any(line.startswith("vendor_id") and "AuthenticAMD" in line for line in f)
    except OSError:
        return False


AMD_CPU: bool = _amd_cpu()
MEASURED_GFLOPS: dict[tuple[int, int], float] = {(8, 4): 60.0, (4, 4): 37.0, (8, 1): 29.0,
                                                 (16, 4): 70.0 if WIDE_VECTORS else 89.0 if AMD_CPU else 57.5}
#: A batch of B streams occupies ``lanes(B)`` lanes, B rounded up to this (one 256-bit vector).
LANE_MULTIPLE = 8

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
_BYTE = np.float32(127.5)  # network input b / 127.5 - 1

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
    """Split exp(v) into (p, bits): exp(v) = p * _f32_bits(bits).

    v is clamped to [-87, 88] (2**k stays a normal float32); below -87 p is 0, so exp flushes
    to 0 there (a class that far below the maximum logit is never drawn, as in float64).
    Callers multiply the two parts themselves, so the multiply-add they form with it is the
    same wherever this function is inlined.
    """
    p0 = _ONE if v >= _EXP_LO else _ZERO
    p, bits = _exp_core(min(max(v, _EXP_LO), _EXP_HI))
    return p * p0, bits


@njit(fastmath=_FM_ARITH, inline="always", **_JIT)
def _exp_core(v):
    """:func:`_exp_parts` for v already in [-87, 88] (the gates clamp to [-30, 30]): the same
    arithmetic less the clamp and the flush to 0, which do nothing there (p0 = 1 and x * 1 = x
    exactly); five vector instructions fewer per exp in the GRU update."""
    k = np.floor(v * _LOG2E + _HALF)
    r = v - k * _LN2_HI - k * _LN2_LO
    p = np.float32(1.0 / 5040.0)
    p = p * r + np.float32(1.0 / 720.0)
    p = p * r + np.float32(1.0 / 120.0)
    p = p * r + np.float32(1.0 / 24.0)
    p = p * r + np.float32(1.0 / 6.0)
    p = p * r + _HALF
    p = p * r + _ONE
    p = p * r + _ONE
    # 2**k as float32 bits: (k + 127) << 23, computed exactly in float32 then converted.
    bits = np.int32((k + np.float32(127.0)) * np.float32(8388608.0))
    return p, bits


@njit(fastmath=_FM_ARITH, **_JIT)
def _vexp(x, out):
    """out[i] <- exp(x[i]) for i < len(out)."""
    for i in range(U(out.shape[0])):
        p, bits = _exp_parts(x[i])
        out[i] = p * _f32_bits(bits)


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
# Block-sparse matrix x vector: y += M x[xoff : xoff + cols]. One block body per block shape,
# written out so all loads of a block precede its stores (module notes), and two loops over the
# blocks that call it: by block column (the column's inputs loaded once for all its blocks; the
# GRU's W_hh), or flat, each block with its own column index (no inner loop to leave: faster where
# most columns hold zero to two blocks, as in a row-pruned output layer, see :func:`flat`). Both
# take the blocks in the same order, so they give the same sums.

@njit(fastmath=_FM_BLOCK, inline="always", **_JIT)
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


@njit(fastmath=_FM_BLOCK, **_JIT)
def _spmv_8x4(data, rowoff, colptr, x, xoff, y):
    for j in range(U(colptr.shape[0] - 1)):
        xj = U(xoff) + j * U(4)
        x0 = x[xj]
        x1 = x[xj + U(1)]
        x2 = x[xj + U(2)]
        x3 = x[xj + U(3)]
        for k in range(U(colptr[j]), U(colptr[j + U(1)])):
            _block_8x4(data, k * U(32), x0, x1, x2, x3, y, U(rowoff[k]))


@njit(fastmath=_FM_BLOCK, **_JIT)
def _flat_8x4(data, rowoff, colidx, x, xoff, y):
    for k in range(U(rowoff.shape[0])):
        xj = U(xoff) + U(colidx[k]) * U(4)
        x0 = x[xj]
        x1 = x[xj + U(1)]
        x2 = x[xj + U(2)]
        x3 = x[xj + U(3)]
        _block_8x4(data, k * U(32), x0, x1, x2, x3, y, U(rowoff[k]))


@njit(fastmath=_FM_BLOCK, inline="always", **_JIT)
def _block_4x4(data, b, x0, x1, x2, x3, y, r):
    s0 = y[r] + _w(data, b) * x0 + _w(data, b + U(4)) * x1 + _w(data, b + U(8)) * x2 + _w(data, b + U(12)) * x3
    s1 = y[r + U(1)] + _w(data, b + U(1)) * x0 + _w(data, b + U(5)) * x1 + _w(data, b + U(9)) * x2 + _w(data, b + U(13)) * x3
    s2 = y[r + U(2)] + _w(data, b + U(2)) * x0 + _w(data, b + U(6)) * x1 + _w(data, b + U(10)) * x2 + _w(data, b + U(14)) * x3
    s3 = y[r + U(3)] + _w(data, b + U(3)) * x0 + _w(data, b + U(7)) * x1 + _w(data, b + U(11)) * x2 + _w(data, b + U(15)) * x3
    y[r] = s0
    y[r + U(1)] = s1
    y[r + U(2)] = s2
    y[r + U(3)] = s3


@njit(fastmath=_FM_BLOCK, **_JIT)
def _spmv_4x4(data, rowoff, colptr, x, xoff, y):
    for j in range(U(colptr.shape[0] - 1)):
        xj = U(xoff) + j * U(4)
        x0 = x[xj]
        x1 = x[xj + U(1)]
        x2 = x[xj + U(2)]
        x3 = x[xj + U(3)]
        for k in range(U(colptr[j]), U(colptr[j + U(1)])):
            _block_4x4(data, k * U(16), x0, x1, x2, x3, y, U(rowoff[k]))


@njit(fastmath=_FM_BLOCK, **_JIT)
def _flat_4x4(data, rowoff, colidx, x, xoff, y):
    for k in range(U(rowoff.shape[0])):
        xj = U(xoff) + U(colidx[k]) * U(4)
        x0 = x[xj]
        x1 = x[xj + U(1)]
        x2 = x[xj + U(2)]
        x3 = x[xj + U(3)]
        _block_4x4(data, k * U(16), x0, x1, x2, x3, y, U(rowoff[k]))


@njit(fastmath=_FM_BLOCK, inline="always", **_JIT)
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


@njit(fastmath=_FM_BLOCK, **_JIT)
def _spmv_8x1(data, rowoff, colptr, x, xoff, y):
    for j in range(U(colptr.shape[0] - 1)):
        xj = U(xoff) + j
        x0 = x[xj]
        for k in range(U(colptr[j]), U(colptr[j + U(1)])):
            _block_8x1(data, k * U(8), x0, y, U(rowoff[k]))


@njit(fastmath=_FM_BLOCK, **_JIT)
def _flat_8x1(data, rowoff, colidx, x, xoff, y):
    for k in range(U(rowoff.shape[0])):
        xj = U(xoff) + U(colidx[k])
        x0 = x[xj]
        _block_8x1(data, k * U(8), x0, y, U(rowoff[k]))


@njit(fastmath=_FM_BLOCK, inline="always", **_JIT)
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


@njit(fastmath=_FM_BLOCK, **_JIT)
def _spmv_16x4(data, rowoff, colptr, x, xoff, y):
    for j in range(U(colptr.shape[0] - 1)):
        xj = U(xoff) + j * U(4)
        x0 = x[xj]
        x1 = x[xj + U(1)]
        x2 = x[xj + U(2)]
        x3 = x[xj + U(3)]
        for k in range(U(colptr[j]), U(colptr[j + U(1)])):
            _block_16x4(data, k * U(64), x0, x1, x2, x3, y, U(rowoff[k]))


@njit(fastmath=_FM_BLOCK, **_JIT)
def _flat_16x4(data, rowoff, colidx, x, xoff, y):
    for k in range(U(rowoff.shape[0])):
        xj = U(xoff) + U(colidx[k]) * U(4)
        x0 = x[xj]
        x1 = x[xj + U(1)]
        x2 = x[xj + U(2)]
        x3 = x[xj + U(3)]
        _block_16x4(data, k * U(64), x0, x1, x2, x3, y, U(rowoff[k]))


@njit(**_JIT)
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

@njit(fastmath=_FM_BLOCK, inline="always", **_JIT)
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


@njit(fastmath=_FM_BLOCK, **_JIT)
def _spmm4_8x4(data, rowoff, colptr, X, xoff, Y):
    """:func:`_spmm4_rows8` for 8x4 blocks (weight (i, c) at k*32 + i + 8c)."""
    _spmm4_rows8(data, rowoff, colptr, X, xoff, Y, U(32), U(8), U(1))


@njit(fastmath=_FM_BLOCK, **_JIT)
def _spmm4_16x4(data, rowoff, colptr, X, xoff, Y):
    """:func:`_spmm4_rows8` for 16x4 blocks (weight (i, c) at k*64 + i + 16c), as two 8-row halves."""
    _spmm4_rows8(data, rowoff, colptr, X, xoff, Y, U(64), U(16), U(2))


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
    elif kind == 3:
        _spmm4_16x4(data, rowoff, colptr, X, xoff, Y)
        done = X.shape[0] // 4 * 4
    for q in range(done, X.shape[0]):
        _spmv(mat, X[q], xoff, Y[q])


# --------------------------------------------------------------------------------------------
# One stream: one half of the GRU update and one softmax draw.

@njit(fastmath=_FM_ARITH, **_JIT)
def _gru_half(gi, w_in, gh, h, lo, hi, xc, xf, xct):
    """GRU update of state rows ``lo:hi`` (one half), as torch.nn.GRU (gate order r, z, n).

    gi (3H) frame part of W_ih x + b_ih; w_in (3, 3H) the sample columns of W_ih (c_{t-1},
    f_{t-1}, c_t), float32 or float16 bits (:func:`_w`); gh (3H) W_hh h + b_hh from the old state; xc, xf, xct the scaled bytes
    (xct = 0 for the coarse half, whose c_t column is masked to 0 anyway). h updated in place; gh's
    r and z rows lo:hi end holding r and z.
    :func:`_lane_inputs` and :func:`_lane_gates` are the same arithmetic for a batch.
    """
    H = U(h.shape[0])
    w0, w1, w2 = w_in[0], w_in[1], w_in[2]
    # two passes: r and z (:func:`_sigmoid`) into gh's own r and z rows, then n and h'
    # (:func:`_update`). One pass with three exps and divisions spilled AVX2's 16 registers (the
    # one-stream voice ran ~10 % slower on a Zen 3); the values are the same.
    for ir in range(U(lo), U(hi)):
        iz = H + ir
        xr = gi[ir] + _w(w0, ir) * xc + _w(w1, ir) * xf + _w(w2, ir) * xct
        xz = gi[iz] + _w(w0, iz) * xc + _w(w1, iz) * xf + _w(w2, iz) * xct
        gh[ir] = _sigmoid(xr + gh[ir])
        gh[iz] = _sigmoid(xz + gh[iz])
    for ir in range(U(lo), U(hi)):
        iz = H + ir
        inn = H + iz
        xn = gi[inn] + _w(w0, inn) * xc + _w(w1, inn) * xf + _w(w2, inn) * xct
        h[ir] = _update(xn, gh[ir], gh[iz], gh[inn], h[ir])


@njit(fastmath=_FM_ARITH, inline="always", **_JIT)
def _sigmoid(v):
    """1 / (1 + exp(-v)), v clamped to [-30, 30] (see _GATE_LO): a GRU gate's r or z. It and
    :func:`_update` are inlined by numba into their callers (LLVM would keep them calls, and the
    loops scalar)."""
    p, bits = _exp_core(min(max(-v, _GATE_LO), _GATE_HI))
    return _ONE / (_ONE + p * _f32_bits(bits))


@njit(fastmath=_FM_ARITH, inline="always", **_JIT)
def _update(xn, r, z, ghn, h):
    """n = tanh(xn + r ghn) (clamped like :func:`_sigmoid`), h' = (1 - z) n + z h."""
    pn, bn = _exp_core(min(max(_TWO * (xn + r * ghn), _GATE_LO), _GATE_HI))
    nn = _ONE - _TWO / (pn * _f32_bits(bn) + _ONE)  # tanh
    return (_ONE - z) * nn + z * h


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
def _sum8(x):
    """Sum of x (length a multiple of 8) in a fixed order: chain r adds x[r], x[r+8], x[r+16],
    ... in turn; then ((c0 + c1) + (c2 + c3)) + ((c4 + c5) + (c6 + c7)). :func:`_lane_softmax`
    sums each lane in the same order."""
    s0, s1, s2, s3 = x[0], x[1], x[2], x[3]
    s4, s5, s6, s7 = x[4], x[5], x[6], x[7]
    for i in range(U(8), U(x.shape[0]), U(8)):
        s0 += x[i]
        s1 += x[i + U(1)]
        s2 += x[i + U(2)]
        s3 += x[i + U(3)]
        s4 += x[i + U(4)]
        s5 += x[i + U(5)]
        s6 += x[i + U(6)]
        s7 += x[i + U(7)]
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))


@njit(fastmath=_FM_ARITH, **_JIT)
def _copy(src, dst):
    """dst[:] = src (same length), as a loop LLVM vectorises."""
    for i in range(U(dst.shape[0])):
        dst[i] = src[i]


@njit(fastmath=_FM_ARITH, **_JIT)
def _relu(x):
    for i in range(U(x.shape[0])):
        x[i] = max(x[i], _ZERO)


@njit(fastmath=_FM_ARITH, **_JIT)
def _scaled_exp(logits, m, inv_temp, probs):
    """probs[k] <- exp((logits[k] - m) * inv_temp): softmax numerators with temperature."""
    for k in range(U(probs.shape[0])):
        p, bits = _exp_parts((logits[k] - m) * inv_temp)
        probs[k] = p * _f32_bits(bits)


@njit(fastmath=_FM_ARITH, **_JIT)
def _draw(logits, inv_temp, u, probs):
    """The class k of ``softmax(logits * inv_temp)`` by inverse CDF (docs/ARCHITECTURE.md):
    the first k with cumsum(p)[k] > u * sum(p); where rounding finds none, the last class with
    p > 0 (:func:`_last_possible`).

    The scan skips ahead 8 classes at a time (their sum) and walks one by one only inside the
    group where the threshold falls. len(logits) must be a multiple of 8. :func:`_lane_softmax`
    and :func:`_lane_scan` are the same arithmetic for one lane of a batch.
    """
    _scaled_exp(logits, _max(logits), inv_temp, probs)
    thr = u * np.float64(_sum8(probs))
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
            return _last_possible(probs, 1, 0, g + 8)  # the group crossed, its classes one by one did not
        acc += s8
    return _last_possible(probs, 1, 0, n)


@njit(inline="always", **_JIT)
def _last_possible(P, L, q, end):
    """The last class before ``end`` with a non-zero probability in lane q of P (n, L) (class 0
    if none). Where rounding leaves the scan's running sum a few ulp short of the threshold (the
    total is summed in another order), the draw ends here rather than on a class the softmax
    gave no chance: the shipped voice drew class 255 (a full-scale click) about once an hour."""
    k = end - 1
    while k > 0 and P[k * L + q] == 0:
        k -= 1
    return k


@njit(inline="always", **_JIT)
def _synth_sample(row, col0, order, hist, mu, inv_scale, code, ring, h):
    """One sample of the LPC synthesis filter (:func:`_lpc_synthesis`): the net's ``code`` for
    sample t -> (s_t as float64, the ring's new head). Updates ``hist`` (and ``ring``) in place."""
    n_ring = ring.shape[0]
    pred = 0.0
    for k in range(order):
        pred -= np.float64(row[col0 + k]) * hist[k]
    if mu > 0.0 or n_ring:
        base = pred
        if n_ring:
            lag = int(row[col0 + order])
            if lag > 0:
                base = pred + np.float64(row[col0 + order + 1]) * ring[(h - lag + 1) % n_ring]
        y = np.float64(code)
        if mu > 0.0:
            x = (32768.0 / mu) * np.expm1(abs(y) * inv_scale)
            y = x if y >= 0.0 else -x
        v = min(max(np.rint(base + y), -32768.0), 32767.0)
        if n_ring:
            h = (h + 1) % n_ring
            ring[h] = v - pred
    else:
        v = min(max(np.float64(code) + np.rint(pred), -32768.0), 32767.0)
    for k in range(order - 1, 0, -1):
        hist[k] = hist[k - 1]
    if order:
        hist[0] = v
    return v, h


@njit(**_JIT)
def _lpc_synthesis(out, gi, col0, order, frame0, start, hop, hist, mu, ring, head):
    """Add the linear prediction back to an LPC vocoder's excitation, in place (int16).

    ``s_t = clip(e_t + rint(p_t))``, or with ``mu`` > 0 (a mu-law coded excitation)
    ``s_t = clip(rint(p_t + l_t + expand(e_t)))`` (``wavern.dsp.mulaw_expand``; a linear code with
    a long-term predictor: ``clip(rint(p_t + l_t + e_t))``), with
    ``p_t = -sum_k a_k s_{t-k}`` in float64, summed in the
    order k = 1 .. order (as ``wavern.vocoder.model`` does in training and in its reference loop),
    ``a_k`` the float32 ``gi[frame, col0 + k - 1]`` of the sample's frame (``Vocoder.frame_inputs``
    appends them after the 3H gate inputs). ``hist`` (order,) float64: s_{t-1}, s_{t-2}, ...
    newest first, carried across calls. ``out[t]`` is sample ``start + t``.

    ``ring`` (LTP_MAX_LAG + 1,) float64, or empty without a long-term predictor: the last
    residuals ``r = s - p`` in a circle, ``r_{t-1}`` at ``ring[head[0]]`` and ``r_{t-k}`` k - 1
    places before it (its own head, not the stream position: a stream's position restarts at a
    sentence while its memories carry on); then the frame's columns ``col0 + order`` and ``+ 1``
    are its lag T and gain beta, and ``l_t = beta r_{t - T}`` (0 when T is 0).
    """
    h = head[0] if ring.shape[0] else 0
    inv_scale = np.log1p(mu) / 32767.0 if mu > 0.0 else 0.0  # mu-law: x = (32768 / mu) expm1(|y| inv_scale)
    for t in range(out.shape[0]):
        v, h = _synth_sample(gi[(start + t) // hop - frame0], col0, order, hist, mu, inv_scale, out[t], ring, h)
        out[t] = np.int16(v)
    if ring.shape[0]:
        head[0] = h


@njit(inline="always", **_JIT)
def _tap_input(ring, hd, lag, d, back_scale):
    """The period input of tap offset ``d``: float32(r_{t-T+d} / back_scale), r_{t-k} at
    ``ring[(hd - k + 1) % len(ring)]``."""
    return np.float32(ring[(hd - lag + 1 + d) % ring.shape[0]] / back_scale)


@njit(inline="always", **_JIT)
def _period_inputs(row, w_back, back_scale, lag_col, ring, hd, fb, w_phase, ph):
    """fb[:3H] = the frame's gate inputs ``row[:3H]`` plus ``w_back[j] * float32(r_{t-T+d_j} /
    back_scale)`` for each tap j (``d_j = j - taps // 2``; nothing where the frame's lag
    ``row[lag_col]`` is 0), r_{t-k} at ``ring[(hd - k + 1) % len(ring)]``.

    With ``w_phase`` (2K, 3H) rows (a phase-input vocoder), also ``w_phase[2k - 2] *
    float32(g sin(2 pi k phi)) + w_phase[2k - 1] * float32(g cos(2 pi k phi))`` for k = 1 .. K
    (g = ``wavern.dsp.PHASE_INPUT_GAIN``) where the frame has a lag, phi = ``ph[0]`` (float64 cycles); then ``ph[0]`` moves on to the next
    sample's phase by ``wavern.dsp.phase_step``: + 1 / T wrapped to [0, 1), or 0 without a lag."""
    n = fb.shape[0]
    lag = int(row[lag_col])
    n_harm = w_phase.shape[0] // 2
    if lag <= 0:
        for i in range(n):
            fb[i] = row[i]
        if n_harm:
            ph[0] = 0.0
    else:
        # fb = row + w_0 x_0 + w_1 x_1 + ..., each product and sum rounded in tap order (no FMA:
        # this loop compiles without fast-math), the first taps (1, 3 or 5; taps are odd) in
        # the pass that reads the frame's inputs, any further ones a pass each
        nt = w_back.shape[0]
        half = nt // 2
        x0 = _tap_input(ring, hd, lag, -half, back_scale)
        b0 = w_back[0]
        if nt == 1:
            for i in range(n):
                fb[i] = row[i] + _w(b0, i) * x0
        else:
            x1 = _tap_input(ring, hd, lag, 1 - half, back_scale)
            x2 = _tap_input(ring, hd, lag, 2 - half, back_scale)
            b1, b2 = w_back[1], w_back[2]
            if nt == 3:
                for i in range(n):
                    fb[i] = ((row[i] + _w(b0, i) * x0) + _w(b1, i) * x1) + _w(b2, i) * x2
            else:
                x3 = _tap_input(ring, hd, lag, 3 - half, back_scale)
                x4 = _tap_input(ring, hd, lag, 4 - half, back_scale)
                b3, b4 = w_back[3], w_back[4]
                for i in range(n):
                    fb[i] = ((((row[i] + _w(b0, i) * x0) + _w(b1, i) * x1) + _w(b2, i) * x2)
                             + _w(b3, i) * x3) + _w(b4, i) * x4
                for j in range(5, nt):
                    xb = _tap_input(ring, hd, lag, j - half, back_scale)
                    bj = w_back[j]
                    for i in range(n):
                        fb[i] += _w(bj, i) * xb
        if n_harm:
            phi = ph[0]
            for k in range(1, n_harm + 1):
                xs = np.float32(_PHASE_GAIN * np.sin(2.0 * np.pi * k * phi))
                xk = np.float32(_PHASE_GAIN * np.cos(2.0 * np.pi * k * phi))
                for i in range(n):
                    fb[i] += w_phase[2 * k - 2, i] * xs
                for i in range(n):
                    fb[i] += w_phase[2 * k - 1, i] * xk
            phi += 1.0 / lag
            ph[0] = phi - 1.0 if phi >= 1.0 else phi


@njit(inline="always", **_JIT)
def _sample_step(fr, net, inv_temp, h, c, f, rng, work, logits, t):
    """One sample of one stream: the GRU update from (c_{t-1}, f_{t-1}) = (c, f) and the frame's
    gate inputs ``fr``, then both draws; returns (c_t, f_t). ``h`` updated in place, logits
    recorded at ``logits[t]`` when ``logits`` has rows. Inlined into the one-stream kernels."""
    w_in, b_hh, R, O1, b1, O2, b2, O3, b3, O4, b4 = net
    z0 = np.int64(0)  # not a literal: literals would compile every callee a second time
    H = h.shape[0]
    hh = H // 2
    nc = b2.shape[0]
    gh = work[:3 * H]
    a = work[3 * H:3 * H + hh]
    lg = work[3 * H + hh:3 * H + hh + nc]
    probs = work[3 * H + hh + nc:3 * H + hh + 2 * nc]
    xc = np.float32(c) / _BYTE - _ONE
    xf = np.float32(f) / _BYTE - _ONE
    # gh = W_hh h + b_hh, all 3H rows from the old state (one block-sparse matvec)
    _copy(b_hh, gh)
    _spmv(R, h, z0, gh)
    # coarse half, then P(c_t) = softmax(O2 relu(O1 h_c + b1) + b2)
    _gru_half(fr, w_in, gh, h, z0, hh, xc, xf, _ZERO)
    _copy(b1, a)
    _spmv(O1, h, z0, a)
    _relu(a)
    _copy(b2, lg)
    _spmv(O2, a, z0, lg)
    if logits.shape[0] > 0:
        _copy(lg, logits[t, 0])
    c = _draw(lg, inv_temp, _next_uniform(rng, z0), probs)
    # fine half with c_t in its input, then P(f_t) from O3, O4
    xct = np.float32(c) / _BYTE - _ONE
    _gru_half(fr, w_in, gh, h, hh, H, xc, xf, xct)
    _copy(b3, a)
    _spmv(O3, h, hh, a)
    _relu(a)
    _copy(b4, lg)
    _spmv(O4, a, z0, lg)
    if logits.shape[0] > 0:
        _copy(lg, logits[t, 1])
    return c, _draw(lg, inv_temp, _next_uniform(rng, z0), probs)


@njit(**_JIT)
def _generate(gi, frame0, start, hop, net, inv_temp, h, prev, rng, out, logits, work):
    """Generate ``len(out)`` samples of one stream; successive calls continue one long call.

    gi (F, 3H) float32: per-frame ``W_ih[:, 3:] cond + b_ih`` for frames frame0 .. frame0+F-1;
    sample s = start + t uses frame s // hop. net = (w_in (3, 3H), b_hh (3H), R, O1, b1, O2,
    b2, O3, b3, O4, b4) with R, O* block-sparse tuples. State: h (H) float32, prev (2) int64
    (c_{t-1}, f_{t-1}), rng (1) uint64; all updated in place. out (n) int16. logits: (n, 2, 256)
    float32 to record the logits of every draw, or (0, 2, 256) not to. work float32 of at least
    3H + H/2 + 2*256.
    """
    c = prev[0]
    f = prev[1]
    for t in range(out.shape[0]):
        c, f = _sample_step(gi[(start + t) // hop - frame0], net, inv_temp, h, c, f, rng, work, logits, t)
        out[t] = np.int16(c * 256 + f - 32768)
    prev[0] = c
    prev[1] = f


@njit(**_JIT)
def _generate_period(gi, frame0, start, hop, net, inv_temp, h, prev, rng, out, logits, work,
                     w_back, back_scale, order, hist, mu, ring, head, w_phase, ph):
    """:func:`_generate` for a vocoder whose GRU also reads the residual one period back
    (``VocoderConfig.ltp_input``): that input depends on the samples of this very call, so the
    synthesis filter (:func:`_synth_sample`, as :func:`_lpc_synthesis` runs it) runs sample by
    sample here, and ``out`` receives the samples themselves, not the excitation.

    Before each draw the frame's gate inputs get ``w_back[j] * float32(r_{t-T+d_j} / back_scale)``
    for each tap j, ``d_j = j - taps // 2`` (``w_back`` (taps, 3H) the weight columns, in tap order, float32 or float16 bits;
    nothing where the frame has no lag), and with ``w_phase`` (2K, 3H) rows the glottal phase's
    harmonics (:func:`_period_inputs`; ``ph`` (1,) float64 the stream's phase, carried across
    calls; no rows: no phase input). The filter columns start
    at 3H in ``gi``; ``hist``, ``ring``, ``head`` as in :func:`_lpc_synthesis`. work float32 of
    at least 6H + H/2 + 2*256.
    """
    H = h.shape[0]
    col0 = 3 * H
    fb = work[3 * H + H // 2 + 2 * N_CLASSES:6 * H + H // 2 + 2 * N_CLASSES]  # frame inputs + period input
    hd = head[0]
    inv_scale = np.log1p(mu) / 32767.0 if mu > 0.0 else 0.0
    c = prev[0]
    f = prev[1]
    for t in range(out.shape[0]):
        row = gi[(start + t) // hop - frame0]
        _period_inputs(row, w_back, back_scale, col0 + order, ring, hd, fb, w_phase, ph)
        c, f = _sample_step(fb, net, inv_temp, h, c, f, rng, work, logits, t)
        v, hd = _synth_sample(row, col0, order, hist, mu, inv_scale, c * 256 + f - 32768, ring, hd)
        out[t] = np.int16(v)
    prev[0] = c
    prev[1] = f
    head[0] = hd


@njit(**_JIT)
def _generate_streams(gi, frame0, start, hop, net, inv_temp, h, prev, rng, out, logits, work, period):
    """Generate ``out.shape[1]`` samples for a few streams at once, stream-major.

    Like :func:`_generate` with a stream axis first: gi (B, F, 3H), h (B, H), prev (B, 2),
    rng (B), out (B, n), logits (B, n, 2, 256) or (B, 0, 2, 256). work float32 of at least
    B (3H + H/2 + 256 + 2) + 256. The block products take four streams per weight load
    (:func:`_spmm`), the rest is the one-stream code per stream, so stream s reproduces
    :func:`_generate` on gi[s], h[s], prev[s], rng[s:s+1] exactly. For small batches, where
    lanes (:func:`_generate_lanes`) would be mostly padding.

    ``period`` = (w_back (taps, 3H), back_scale, order, hist (B, order), mu, ring (B, R), head
    (B, 1), FB (B, 3H) float32 scratch, w_phase (2K, 3H), phase (B, 1) float64): with taps > 0
    each stream is :func:`_generate_period` (the period input, the phase input with K > 0 and the
    synthesis filter inside the loop; ``out`` gets the samples); with ``w_back`` of no rows the
    rest is not read.
    """
    w_in, b_hh, R, O1, b1, O2, b2, O3, b3, O4, b4 = net
    w_back, back_scale, order, hist, mu, ring, head, FB, w_phase, phase = period
    n_taps = w_back.shape[0]
    inv_scale = np.log1p(mu) / 32767.0 if mu > 0.0 else 0.0
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
            xc[q] = np.float32(prev[q, 0]) / _BYTE - _ONE
            xf[q] = np.float32(prev[q, 1]) / _BYTE - _ONE
            _copy(b_hh, GH[q])
            if n_taps:
                _period_inputs(gi[q, fi], w_back, back_scale, 3 * H + order, ring[q], head[q, 0], FB[q], w_phase,
                               phase[q])
        _spmm(R, h, z0, GH)
        for q in range(B):
            _gru_half(FB[q] if n_taps else gi[q, fi], w_in, GH[q], h[q], z0, hh, xc[q], xf[q], _ZERO)
            _copy(b1, A[q])
        _spmm(O1, h, z0, A)
        for q in range(B):
            _relu(A[q])
            _copy(b2, LG[q])
        _spmm(O2, A, z0, LG)
        for q in range(B):
            if record:
                _copy(LG[q], logits[q, t, 0])
            c = _draw(LG[q], inv_temp, _next_uniform(rng, q), probs)
            prev[q, 0] = c
            xct = np.float32(c) / _BYTE - _ONE
            _gru_half(FB[q] if n_taps else gi[q, fi], w_in, GH[q], h[q], hh, H, xc[q], xf[q], xct)
            _copy(b3, A[q])
        _spmm(O3, h, hh, A)
        for q in range(B):
            _relu(A[q])
            _copy(b4, LG[q])
        _spmm(O4, A, z0, LG)
        for q in range(B):
            if record:
                _copy(LG[q], logits[q, t, 1])
            f = _draw(LG[q], inv_temp, _next_uniform(rng, q), probs)
            prev[q, 1] = f
            code = prev[q, 0] * 256 + f - 32768
            if n_taps:
                v, head[q, 0] = _synth_sample(gi[q, fi], 3 * H, order, hist[q], mu, inv_scale, code, ring[q],
                                              head[q, 0])
                out[q, t] = np.int16(v)
            else:
                out[q, t] = np.int16(code)


def no_period(batch: int, hidden_size: int) -> tuple:
    """The ``period`` argument of :func:`_generate_streams` for a vocoder without the period input."""
    return (np.zeros((0, 3 * hidden_size), np.float32), 1.0, 0, np.zeros((batch, 0)), 0.0,
            np.zeros((batch, 0)), np.zeros((batch, 1), np.int64), np.zeros((batch, 0), np.float32),
            np.zeros((0, 3 * hidden_size), np.float32), np.zeros((batch, 1)))


# --------------------------------------------------------------------------------------------
# A batch in lanes: every vector (rows,) of B streams is stored (rows, L) flattened, row-major,
# stream s in lane s (module notes). Each function below does, lane by lane, exactly the float
# operations of its one-stream counterpart above.

@njit(**_JIT)
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


@njit(**_JIT)
def _lane_bias(b, Y, L):
    """Y[r, :] <- b[r] for every row r of Y (len(b), L)."""
    n = U(L)
    for r in range(U(b.shape[0])):
        v = b[r]
        o = r * n
        for q in range(n):
            Y[o + q] = v


@njit(**_JIT)
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


@njit(fastmath=_FM_ARITH, **_JIT)
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


@njit(fastmath=_FM_ARITH, **_JIT)
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


@njit(fastmath=_FM_ARITH, **_JIT)
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


@njit(fastmath=_FM_ARITH, **_JIT)
def _lane_relu(x):
    for i in range(U(x.shape[0])):
        x[i] = max(x[i], _ZERO)


def lane_work_size(hidden_size: int, n_lanes: int) -> int:
    """float32 scratch :func:`_generate_lanes` needs for H = ``hidden_size`` and L lanes."""
    H, L = int(hidden_size), int(n_lanes)
    return L * (9 * H + 3 + H // 2 + 2 * N_CLASSES + 16 + N_CLASSES // 8 + 1)


@njit(**_JIT)
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


# --------------------------------------------------------------------------------------------
# Dense products for the conditioning: one output row at a time, inputs in a fixed order.

@njit(**_JIT)
def _conv_rows(x, wt, b, taps, out):
    """out (T, Co) <- b + sum over taps k, then inputs i, of x[t + k - pad, i] wt[k, i, :].

    x (T, Ci) float32; wt (taps * Ci * Co) float32 = the Conv1d weight (Co, Ci, taps) transposed
    to (taps, Ci, Co); pad = (taps - 1) / 2, rows outside x are skipped (zero padding). Every
    output is one chain of fused multiply-adds in (tap, input) order, so row t depends only on
    x[t - pad : t + pad + 1], not on T, on threads or on alignment.
    """
    T = U(x.shape[0])
    Ci = U(x.shape[1])
    Co = U(out.shape[1])
    pad = (U(taps) - U(1)) // U(2)
    xf = x.reshape(-1)
    of = out.reshape(-1)
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
    _conv_rows(x, wt, b, k, out)
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


def vexp(x: np.ndarray) -> np.ndarray:
    """exp of a float32 array with the kernels' own exp (0 below -87, exp(88) above 88)."""
    x = np.ascontiguousarray(x, dtype=np.float32).ravel()
    out = np.empty_like(x)
    _vexp(x, out)
    return out


def sample_class(logits: np.ndarray, u: float, *, temperature: float = 1.0) -> int:
    """The class the kernels draw from ``logits`` (256,) with uniform ``u`` in [0, 1)."""
    logits = np.ascontiguousarray(logits, dtype=np.float32)
    if logits.ndim != 1 or logits.shape[0] < 8 or logits.shape[0] % 8:
        raise ParameterError(f"logits must be 1-D with a multiple of 8 classes, found shape {logits.shape}")
    if not 0.0 <= u < 1.0:
        raise ParameterError(f"u must lie in [0, 1), found {u}")
    inv = np.float32(1.0 / check_temperature(temperature))
    return int(_draw(logits, inv, float(u), np.empty(logits.shape[0], np.float32)))


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



def cache_status() -> tuple[str | None, int]:
    """(folder numba caches these kernels in, how many of this module's kernels have a build
    there that this process can load): numba's own choice of folder, beside the sources when
    writable, else its user-wide cache (~/.cache/numba, or NUMBA_CACHE_DIR). A build counts when
    its index is fresh (the source file unchanged) and holds an entry for this process's code
    generation (CPU name and features: a change of vector width, ``WAVERN_VECTOR_BITS``, compiles
    anew). (None, 0) when nothing is cached (no SLP vectoriser)."""
    path = getattr(getattr(_generate, "_cache", None), "_cache_path", None)
    if not path:
        return None, 0
    try:
        from numba.core.registry import cpu_target

        magic = cpu_target.target_context.codegen().magic_tuple()
        n = 0
        for obj in list(globals().values()):
            cache_file = getattr(getattr(obj, "_cache", None), "_cache_file", None)
            if getattr(obj, "py_func", None) is not None and cache_file is not None:
                n += any(key[1] == magic for key in cache_file._load_index())  # numba's private index
    except Exception:  # noqa: BLE001 - another numba's internals: count the index files instead
        try:
            n = sum(1 for name in os.listdir(path) if name.startswith("kernels.") and name.endswith(".nbi"))
        except OSError:
            n = 0
    return str(path), n


def warmup(*, half: bool | None = None) -> None:
    """Compile (or load from numba's cache) every kernel on tiny shapes of the runtime types.

    Call before a stream opens so the first chunk does not pay the compile. Types match what
    :mod:`wavern.engine.vocoder` passes (block weights and the per-sample input columns float32 or
    float16 bits, see ``Vocoder.half_weights``), so no later call compiles again. ``half``: only the kernels of
    float16 (True) or float32 (False) block weights, so two processes can fill an empty cache
    side by side (test.sh does: ~1 min on 2 cores here, against ~2 in one process).
    """
    rs = np.random.default_rng(0)
    H, hh, nc = 8, 4, N_CLASSES
    vexp(np.zeros(4, np.float32))
    sample_class(np.zeros(nc, np.float32), 0.5)
    uniforms(rng_state(0), 2)
    conv1d(np.zeros((5, 4), np.float32), np.zeros((8, 4, 3), np.float32), np.zeros(8, np.float32))
    for h in ((False, True) if half is None else (half,)):
        _warm_weights(rs, H, hh, nc, h)
    _lpc_synthesis(np.zeros(2, np.int16), np.zeros((1, 3 * H + 2), np.float32), 3 * H, 2, 0, 0, HOP,
                   np.zeros(2), 0.0, np.zeros(0), np.zeros(1, np.int64))  # LPC voices: the synthesis loop


def _warm_weights(rs: np.random.Generator, H: int, hh: int, nc: int, half: bool) -> None:
    """:func:`warmup` for the kernels that take block weights, of one weight type."""
    for kind, (br, bc) in enumerate(BLOCK_SHAPES):
        mat = _tiny_mat(H, H, br, bc, kind, rs, half)
        spmv(mat, np.ones(H, np.float32), np.zeros(H, np.float32))
        lane_spmm(mat, np.ones((H, 8), np.float32), np.zeros((H, 8), np.float32))
        _spmm(mat, np.ones((2, H), np.float32), 0, np.zeros((2, H), np.float32))

    cols = lambda n: np.zeros((n, 3 * H), np.uint16 if half else np.float32)  # noqa: E731 - input columns

    def net(kind: int) -> tuple:
        br, bc = BLOCK_SHAPES[kind]
        return (cols(3), np.zeros(3 * H, np.float32),
                _tiny_mat(3 * H, H, br, bc, kind, rs, half), _tiny_mat(hh, hh, br, bc, kind, rs, half),
                np.zeros(hh, np.float32), _tiny_mat(nc, hh, br, bc, kind, rs, half), np.zeros(nc, np.float32),
                _tiny_mat(hh, hh, br, bc, kind, rs, half), np.zeros(hh, np.float32),
                _tiny_mat(nc, hh, br, bc, kind, rs, half), np.zeros(nc, np.float32))

    inv = np.float32(1.0)
    gi = np.zeros((1, 3 * H), np.float32)
    _generate(gi, 0, 0, HOP, net(0), inv, np.zeros(H, np.float32), np.array([128, 0], np.int64),
              rng_state(0), np.zeros(2, np.int16), np.zeros((0, 2, nc), np.float32),
              np.zeros(3 * H + hh + 2 * nc, np.float32))
    periods = [no_period(2, H)]  # without the period input
    if half:  # a period voice's batch: its float16 columns are another type than no_period's float32
        periods.append((cols(0),) + no_period(2, H)[1:])
    for period in periods:
        _generate_streams(gi[None].repeat(2, 0), 0, 0, HOP, net(0), inv, np.zeros((2, H), np.float32),
                          np.zeros((2, 2), np.int64), rng_states(0, 2), np.zeros((2, 2), np.int16),
                          np.zeros((2, 0, 2, nc), np.float32), np.zeros(2 * (3 * H + hh + nc + 2) + nc, np.float32),
                          period)
    L = lanes(2)
    _generate_lanes(gi[None].repeat(2, 0), 0, 0, HOP, net(0), inv, np.zeros(H * L, np.float32),
                    np.zeros((2, 2), np.int64), rng_states(0, 2), np.zeros((2, 2), np.int16),
                    np.zeros((2, 0, 2, nc), np.float32), np.zeros(lane_work_size(H, L), np.float32))
    _generate_period(np.zeros((1, 3 * H + 4), np.float32), 0, 0, HOP, net(0), inv, np.zeros(H, np.float32),
                     np.array([128, 0], np.int64), rng_state(0), np.zeros(2, np.int16),
                     np.zeros((0, 2, nc), np.float32), np.zeros(6 * H + hh + 2 * nc, np.float32),
                     cols(1), 512.0, 2, np.zeros(2), 0.0, np.zeros(401),
                     np.zeros(1, np.int64), np.zeros((0, 3 * H), np.float32), np.zeros(1))  # the period input


def _tiny_mat(rows: int, cols: int, br: int, bc: int, kind: int, rs: np.random.Generator,
              half: bool = False) -> tuple:
    """A dense (every block stored) engine matrix of small random values (``half``: float16 bits)."""
    nrb, ncb = rows // br, cols // bc
    data = (rs.standard_normal(nrb * ncb * br * bc) * 0.1).astype(np.float16 if half else np.float32)
    if half:
        data = data.view(np.uint16)
    rowoff = np.tile(np.arange(nrb, dtype=np.uint32) * br, ncb)
    colptr = (np.arange(ncb + 1, dtype=np.uint32) * nrb).astype(np.uint32)
    return data, rowoff, colptr, kind
