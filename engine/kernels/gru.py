"""The WaveRNN's per-sample loop (Kalchbrenner et al. 2018, eqns 2-3; docs/ARCHITECTURE.md, "The
WaveRNN"): the GRU update, the two softmax draws, the LPC synthesis and the period inputs, for one
stream (:func:`_generate`, :func:`_generate_period`) and for a few streams stream-major
(:func:`_generate_streams`: (B, H) arrays, the block products load each weight once for four
streams, the rest is the one-stream code). :mod:`.lanes` runs many streams.

A vocoder whose GRU reads its own residual one pitch period back runs :func:`_generate_period`:
the same step (:func:`_sample_step`) with the synthesis filter (:func:`_synth_sample`) inside the
loop; the others add the prediction back afterwards (:func:`_lpc_synthesis`).

Where a sample's time went on a Zen 3 (the shipped 5 % voice, each piece in its own loop, min of
15), before the exps lost their clamp (:func:`_exp_core`) and the output layers took the flat loop
(:func:`~.blocks.flat`): W_hh 0.91 us, the GRU update 1.29, the four output layers 0.71, the two
draws 0.56, the period inputs 0.26, the synthesis filter 0.06. With the float16 input columns
(18 kB less a sample, ~1 %) those two gave 5-8 % off the whole voice in paired runs, values
unchanged. The matvecs stream their float16 weights from L2 (~125 kB a sample at H 384, 10 %).
"""

from __future__ import annotations

import numpy as np

from wavern.engine.kernels.blocks import _copy, _spmm, _spmv
from wavern.engine.kernels.fastexp import _exp_core, _exp_parts
from wavern.engine.kernels.int8 import _affine, _affine_streams
from wavern.engine.kernels.intrinsics import _f32_bits, _w
from wavern.engine.kernels.jit import (_BYTE, _FM_ARITH, _FM_REDUCE, _GATE_HI, _GATE_LO, _JIT, _ONE, _PHASE_GAIN, _TWO,
                                       _ZERO, N_CLASSES, U, kernel)
from wavern.engine.kernels.rng import _next_uniform
from wavern.errors import ParameterError

__all__ = ["sample_class", "check_temperature", "no_period"]

# --------------------------------------------------------------------------------------------
# One stream: one half of the GRU update and one softmax draw.

@kernel(fastmath=_FM_ARITH, **_JIT)
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


@kernel(fastmath=_FM_ARITH, inline="always", **_JIT)
def _sigmoid(v):
    """1 / (1 + exp(-v)), v clamped to [-30, 30] (see _GATE_LO): a GRU gate's r or z. It and
    :func:`_update` are inlined by numba into their callers (LLVM would keep them calls, and the
    loops scalar)."""
    p, bits = _exp_core(min(max(-v, _GATE_LO), _GATE_HI))
    return _ONE / (_ONE + p * _f32_bits(bits))


@kernel(fastmath=_FM_ARITH, inline="always", **_JIT)
def _update(xn, r, z, ghn, h):
    """n = tanh(xn + r ghn) (clamped like :func:`_sigmoid`), h' = (1 - z) n + z h."""
    pn, bn = _exp_core(min(max(_TWO * (xn + r * ghn), _GATE_LO), _GATE_HI))
    nn = _ONE - _TWO / (pn * _f32_bits(bn) + _ONE)  # tanh
    return (_ONE - z) * nn + z * h


@kernel(fastmath=_FM_REDUCE, **_JIT)
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


@kernel(fastmath=_FM_ARITH, **_JIT)
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


@kernel(fastmath=_FM_ARITH, **_JIT)
def _relu(x):
    for i in range(U(x.shape[0])):
        x[i] = max(x[i], _ZERO)


@kernel(fastmath=_FM_ARITH, **_JIT)
def _scaled_exp(logits, m, inv_temp, probs):
    """probs[k] <- exp((logits[k] - m) * inv_temp): softmax numerators with temperature."""
    for k in range(U(probs.shape[0])):
        p, bits = _exp_parts((logits[k] - m) * inv_temp)
        probs[k] = p * _f32_bits(bits)


@kernel(fastmath=_FM_ARITH, **_JIT)
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


@kernel(inline="always", **_JIT)
def _last_possible(P, L, q, end):
    """The last class before ``end`` with a non-zero probability in lane q of P (n, L) (class 0
    if none). Where rounding leaves the scan's running sum a few ulp short of the threshold (the
    total is summed in another order), the draw ends here rather than on a class the softmax
    gave no chance: the shipped voice drew class 255 (a full-scale click) about once an hour."""
    k = end - 1
    while k > 0 and P[k * L + q] == 0:
        k -= 1
    return k


@kernel(inline="always", **_JIT)
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


@kernel(**_JIT)
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


@kernel(inline="always", **_JIT)
def _tap_input(ring, hd, lag, d, back_scale):
    """The period input of tap offset ``d``: float32(r_{t-T+d} / back_scale), r_{t-k} at
    ``ring[(hd - k + 1) % len(ring)]``."""
    return np.float32(ring[(hd - lag + 1 + d) % ring.shape[0]] / back_scale)


@kernel(inline="always", **_JIT)
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


@kernel(inline="always", **_JIT)
def _five_taps(ring, hd, lag, back_scale):
    """The five tap inputs of :func:`_period_inputs` (offsets -2 .. 2), in tap order."""
    return (_tap_input(ring, hd, lag, -2, back_scale), _tap_input(ring, hd, lag, -1, back_scale),
            _tap_input(ring, hd, lag, 0, back_scale), _tap_input(ring, hd, lag, 1, back_scale),
            _tap_input(ring, hd, lag, 2, back_scale))


@kernel(inline="always", **_JIT)
def _period_inputs4(gi, q0, q1, q2, q3, fi, w_back, back_scale, lag_col, ring, head, FB):
    """:func:`_period_inputs` of five taps for streams q0, q1, q2, q3 at once, each with a lag and no
    phase input: ``FB[q] = gi[q, fi, :3H]`` plus the taps, each weight loaded (and widened) once for
    the four. Every value is the same expression, rounded in the same order, as the one-stream
    code's, so the sums are the same bits (tested)."""
    n = FB.shape[1]
    r0, r1, r2, r3 = gi[q0, fi], gi[q1, fi], gi[q2, fi], gi[q3, fi]
    g0, g1, g2, g3 = ring[q0], ring[q1], ring[q2], ring[q3]
    h0, h1, h2, h3 = head[q0, 0], head[q1, 0], head[q2, 0], head[q3, 0]
    l0, l1, l2, l3 = int(r0[lag_col]), int(r1[lag_col]), int(r2[lag_col]), int(r3[lag_col])
    a0, a1, a2, a3, a4 = _five_taps(g0, h0, l0, back_scale)
    b0, b1, b2, b3, b4 = _five_taps(g1, h1, l1, back_scale)
    c0, c1, c2, c3, c4 = _five_taps(g2, h2, l2, back_scale)
    d0, d1, d2, d3, d4 = _five_taps(g3, h3, l3, back_scale)
    f0, f1, f2, f3 = FB[q0], FB[q1], FB[q2], FB[q3]
    w0, w1, w2, w3, w4 = w_back[0], w_back[1], w_back[2], w_back[3], w_back[4]
    for i in range(n):
        v0, v1, v2, v3, v4 = _w(w0, i), _w(w1, i), _w(w2, i), _w(w3, i), _w(w4, i)
        f0[i] = ((((r0[i] + v0 * a0) + v1 * a1) + v2 * a2) + v3 * a3) + v4 * a4
        f1[i] = ((((r1[i] + v0 * b0) + v1 * b1) + v2 * b2) + v3 * b3) + v4 * b4
        f2[i] = ((((r2[i] + v0 * c0) + v1 * c1) + v2 * c2) + v3 * c3) + v4 * c4
        f3[i] = ((((r3[i] + v0 * d0) + v1 * d1) + v2 * d2) + v3 * d3) + v4 * d4


@kernel(inline="always", **_JIT)
def _no_period_input(row, lag_col, w_phase):
    """True where :func:`_period_inputs` would only copy the frame's gate inputs: no lag in the
    frame (``int(row[lag_col]) <= 0``) and no phase input. The kernels then read ``row`` itself
    (a third of the shipped voice's stream-samples skip a 3H copy); the values are the same."""
    return w_phase.shape[0] == 0 and not row[lag_col] >= 1.0


@kernel(inline="always", **_JIT)
def _gate_inputs(gi, q, fi, FB, n_taps, lag_col, w_phase):
    """Stream q's gate inputs in :func:`_generate_streams` this step: its frame's own row, or
    ``FB[q]`` where its period inputs were made."""
    row = gi[q, fi]
    return row if n_taps == 0 or _no_period_input(row, lag_col, w_phase) else FB[q]


@kernel(inline="always", **_JIT)
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
    # gh = W_hh h + b_hh, all 3H rows from the old state (one block-sparse matvec, float or int8;
    # the int8 products keep the state's bytes in work's last H/4 floats)
    xw = work[work.shape[0] - H // 4:]
    _affine(R, b_hh, h, z0, gh, xw)
    # coarse half, then P(c_t) = softmax(O2 relu(O1 h_c + b1) + b2)
    _gru_half(fr, w_in, gh, h, z0, hh, xc, xf, _ZERO)
    _affine(O1, b1, h, z0, a, xw)
    _relu(a)
    _copy(b2, lg)
    _spmv(O2, a, z0, lg)
    if logits.shape[0] > 0:
        _copy(lg, logits[t, 0])
    c = _draw(lg, inv_temp, _next_uniform(rng, z0), probs)
    # fine half with c_t in its input, then P(f_t) from O3, O4
    xct = np.float32(c) / _BYTE - _ONE
    _gru_half(fr, w_in, gh, h, hh, H, xc, xf, xct)
    _affine(O3, b3, h, hh, a, xw)
    _relu(a)
    _copy(b4, lg)
    _spmv(O4, a, z0, lg)
    if logits.shape[0] > 0:
        _copy(lg, logits[t, 1])
    return c, _draw(lg, inv_temp, _next_uniform(rng, z0), probs)


@kernel(**_JIT)
def _generate(gi, frame0, start, hop, net, inv_temp, h, prev, rng, out, logits, work):
    """Generate ``len(out)`` samples of one stream; successive calls continue one long call.

    gi (F, 3H) float32: per-frame ``W_ih[:, 3:] cond + b_ih`` for frames frame0 .. frame0+F-1;
    sample s = start + t uses frame s // hop. net = (w_in (3, 3H), b_hh (3H), R, O1, b1, O2,
    b2, O3, b3, O4, b4) with R, O* block-sparse tuples. State: h (H) float32, prev (2) int64
    (c_{t-1}, f_{t-1}), rng (1) uint64; all updated in place. out (n) int16. logits: (n, 2, 256)
    float32 to record the logits of every draw, or (0, 2, 256) not to. work float32 of at least
    3H + H/2 + 2*256, and H/4 more for an int8 W_hh (:mod:`.int8`; its last H/4 floats).
    """
    c = prev[0]
    f = prev[1]
    for t in range(out.shape[0]):
        c, f = _sample_step(gi[(start + t) // hop - frame0], net, inv_temp, h, c, f, rng, work, logits, t)
        out[t] = np.int16(c * 256 + f - 32768)
    prev[0] = c
    prev[1] = f


@kernel(**_JIT)
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
    at least 6H + H/2 + 2*256 (+ H/4 for an int8 W_hh, as :func:`_generate`).
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
        bare = _no_period_input(row, col0 + order, w_phase)
        if not bare:
            _period_inputs(row, w_back, back_scale, col0 + order, ring, hd, fb, w_phase, ph)
        c, f = _sample_step(row if bare else fb, net, inv_temp, h, c, f, rng, work, logits, t)
        v, hd = _synth_sample(row, col0, order, hist, mu, inv_scale, c * 256 + f - 32768, ring, hd)
        out[t] = np.int16(v)
    prev[0] = c
    prev[1] = f
    head[0] = hd


@kernel(**_JIT)
def _generate_streams(gi, frame0, start, hop, net, inv_temp, h, prev, rng, out, logits, work, period):
    """Generate ``out.shape[1]`` samples for a few streams at once, stream-major.

    Like :func:`_generate` with a stream axis first: gi (B, F, 3H), h (B, H), prev (B, 2),
    rng (B), out (B, n), logits (B, n, 2, 256) or (B, 0, 2, 256). work float32 of at least
    B (3H + H/2 + 256 + 2) + 256 (+ H/4 for an int8 W_hh: its product runs stream by stream). The block products take four streams per weight load
    (:func:`_spmm`), the rest is the one-stream code per stream, so stream s reproduces
    :func:`_generate` on gi[s], h[s], prev[s], rng[s:s+1] exactly. For small batches, where
    lanes (:func:`_generate_lanes`) would be mostly padding.

    ``period`` = (w_back (taps, 3H), back_scale, order, hist (B, order), mu, ring (B, R), head
    (B, 1), FB (B, 3H) float32 scratch, w_phase (2K, 3H), phase (B, 1) float64): with taps > 0
    each stream is :func:`_generate_period` (the period input, the phase input with K > 0 and the
    synthesis filter inside the loop; ``out`` gets the samples); with ``w_back`` of no rows the
    rest is not read. Five taps without a phase input, the period inputs of the streams whose
    frames have a lag are made four at a time (:func:`_period_inputs4`, a third less time than one
    by one at the shipped voice's size), the same values.
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
    by_four = n_taps == 5 and w_phase.shape[0] == 0  # the shipped voice's period input: four streams at a time
    lag_col = 3 * H + order
    for t in range(out.shape[1]):
        fi = (start + t) // hop - frame0
        for q in range(B):
            xc[q] = np.float32(prev[q, 0]) / _BYTE - _ONE
            xf[q] = np.float32(prev[q, 1]) / _BYTE - _ONE
        # period inputs: the streams with a lag four at a time (any four), the rest one by one
        waiting = 0  # streams with a lag not yet made: q0 (, q1, q2)
        q0 = q1 = q2 = 0
        for s in range(B if n_taps else 0):
            if _no_period_input(gi[s, fi], lag_col, w_phase):
                continue  # the GRU reads the frame's inputs themselves
            if not by_four:  # (by four, every stream left here has a lag)
                _period_inputs(gi[s, fi], w_back, back_scale, lag_col, ring[s], head[s, 0], FB[s], w_phase, phase[s])
            elif waiting == 3:
                _period_inputs4(gi, q0, q1, q2, s, fi, w_back, back_scale, lag_col, ring, head, FB)
                waiting = 0
            else:
                if waiting == 0:
                    q0 = s
                elif waiting == 1:
                    q1 = s
                else:
                    q2 = s
                waiting += 1
        for k in range(waiting):  # the one to three left over
            s = q0 if k == 0 else (q1 if k == 1 else q2)
            _period_inputs(gi[s, fi], w_back, back_scale, lag_col, ring[s], head[s, 0], FB[s], w_phase, phase[s])
        xw = work[work.shape[0] - H // 4:]
        _affine_streams(R, b_hh, h, z0, GH, xw)
        for q in range(B):
            _gru_half(_gate_inputs(gi, q, fi, FB, n_taps, lag_col, w_phase), w_in, GH[q], h[q],
                      z0, hh, xc[q], xf[q], _ZERO)
        _affine_streams(O1, b1, h, z0, A, xw)
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
            _gru_half(_gate_inputs(gi, q, fi, FB, n_taps, lag_col, w_phase), w_in, GH[q], h[q],
                      hh, H, xc[q], xf[q], xct)
        _affine_streams(O3, b3, h, hh, A, xw)
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


