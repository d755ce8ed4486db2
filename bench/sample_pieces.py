"""Where a vocoder sample's time goes (``bench/engine.py``'s table of pieces).

Each piece of the per-sample loop runs in a loop of its own with the vocoder's weights, as the
kernels call it: the recurrent product W_hh h (with its bias copy), the GRU update (both halves),
the four output layers (biases, ReLUs and block products) and the two draws, these on logits the
vocoder itself produced (the scan's length depends on where the probability lies). The whole
loop is timed as it runs, and what the pieces leave of it is the rest: for a period-input voice,
its period inputs and synthesis filter, and for every loop, its own bookkeeping (the state's bytes,
the random numbers, calls). The rest may also hold how the pieces' data push each other out of the
caches, so it moves from run to run: it came out below 0 in a run where the pieces alone took
longer than in the loop. On the shared host each number moves too (the goal row's W_hh piece: 2.5 to
3.8 us over seven runs on 2026-12-06).
CPU time of this thread, median of alternating runs.
"""

from __future__ import annotations

import time

import numba
import numpy as np

from wavern.engine import kernels as K
from wavern.engine.kernels.blocks import _spmm, _spmv
from wavern.engine.kernels.gru import _copy, _draw, _gru_half, _relu
from wavern.engine.kernels.int8 import _affine, _affine_streams
from wavern.engine.kernels.jit import _JIT, _ZERO

PIECES = ("W_hh h + b_hh", "GRU update (both halves)", "output layers O1-O4", "two draws")

_J = dict(_JIT, cache=False)  # the bench's own loops: compiled in each run, nothing left in the cache
# (the helpers inlined, so that each piece makes the kernels' own calls and no more)


@numba.njit(inline="always", **_J)
def _product(M, X, xoff, Y):
    """Y += M X[:, xoff:] as the kernels run it: the matvec for one stream, else four streams a load."""
    if X.shape[0] == 1:
        _spmv(M, X[0], xoff, Y[0])
    else:
        _spmm(M, X, xoff, Y)


@numba.njit(**_J)
def _t_recurrent(R, b_hh, h, gh, xw, n):
    """gh = W_hh h + b_hh as the kernels run it: float (one stream, or four streams a weight load)
    or int8 (the state's bytes, the product, the dequantisation; stream by stream)."""
    for _ in range(n):
        if h.shape[0] == 1:
            _affine(R, b_hh, h[0], np.int64(0), gh[0], xw)
        else:
            _affine_streams(R, b_hh, h, np.int64(0), gh, xw)


@numba.njit(**_J)
def _t_gru(fr, w_in, gh, h, n):
    z0 = np.int64(0)
    H = h.shape[1]
    hh = H // 2
    for _ in range(n):
        for q in range(h.shape[0]):
            _gru_half(fr[q], w_in, gh[q], h[q], z0, hh, np.float32(0.1), np.float32(-0.2), _ZERO)
            _gru_half(fr[q], w_in, gh[q], h[q], hh, H, np.float32(0.1), np.float32(-0.2), np.float32(0.3))


@numba.njit(inline="always", **_J)
def _head(Oa, ba, Ob, bb, h, xoff, a, lg, xw):
    """One softmax's logits for every stream: a = relu(Oa h[:, xoff:] + ba) (float or int8, as the
    kernels run it), lg = Ob a + bb."""
    if h.shape[0] == 1:
        _affine(Oa, ba, h[0], xoff, a[0], xw)
    else:
        _affine_streams(Oa, ba, h, xoff, a, xw)
    for q in range(h.shape[0]):
        _relu(a[q])
        _copy(bb, lg[q])
    _product(Ob, a, np.int64(0), lg)


@numba.njit(**_J)
def _t_outputs(O1, b1, O2, b2, O3, b3, O4, b4, h, a, lg, xw, n):
    hh = np.int64(h.shape[1] // 2)
    for _ in range(n):
        _head(O1, b1, O2, b2, h, np.int64(0), a, lg, xw)
        _head(O3, b3, O4, b4, h, hh, a, lg, xw)


@numba.njit(**_J)
def _t_draws(logits, us, probs, B, n):
    """2 B draws a step, over the recorded (m, 2, 256) logits in turn."""
    acc = 0
    m = logits.shape[0]
    i = 0
    for _ in range(n):
        for _q in range(B):
            acc += _draw(logits[i % m, 0], np.float32(1.0), us[i % us.shape[0]], probs)
            acc += _draw(logits[i % m, 1], np.float32(1.0), us[(i + 7) % us.shape[0]], probs)
            i += 1
    return acc


def measure(voc, whole, logits: np.ndarray, B: int, *, n: int, runs: int) -> dict:
    """Microseconds per sample (per stream, for B streams stream-major) of each piece of
    :data:`PIECES` and of ``whole()`` (which returns the stream-samples it made), medians of ``runs``
    alternating rounds; ``logits`` (m, 2, 256) float32 that the vocoder produced."""
    net = voc.stream_net if B == 1 else voc._net
    w_in, b_hh, R, O1, b1, O2, b2, O3, b3, O4, b4 = net
    H = voc.hidden_size
    rng = np.random.default_rng(0)
    h = np.tanh(rng.standard_normal((B, H)) * 0.5).astype(np.float32)  # a state: in (-1, 1)
    gh = np.zeros((B, 3 * H), np.float32)
    fr = (rng.standard_normal((B, 3 * H)) * 0.5).astype(np.float32)
    a = np.zeros((B, H // 2), np.float32)
    lg = np.zeros((B, b2.shape[0]), np.float32)
    us = rng.random(4099)
    probs = np.zeros(K.N_CLASSES, np.float32)
    logits = np.ascontiguousarray(logits, np.float32)
    calls = [(_t_recurrent, (R, b_hh, h, gh, np.zeros(H // 4, np.float32))), (_t_gru, (fr, w_in, gh, h)),
             (_t_outputs, (O1, b1, O2, b2, O3, b3, O4, b4, h, a, lg, np.zeros(H // 4, np.float32))), (_t_draws, (logits, us, probs, B))]
    for fn, args in calls:  # compile
        fn(*args, 2)
    got: dict[str, list[float]] = {k: [] for k in (*PIECES, "whole")}
    for r in range(runs + 1):  # the first round warms up
        for name, (fn, args) in (zip(PIECES, calls) if r % 2 == 0 else list(zip(PIECES, calls))[::-1]):
            t = time.thread_time()
            fn(*args, n)
            if r:
                got[name].append((time.thread_time() - t) / (n * B) * 1e6)
        t = time.thread_time()
        made = whole()
        if r:
            got["whole"].append((time.thread_time() - t) / made * 1e6)
    out = {k: float(np.median(v)) for k, v in got.items()}
    out["rest"] = out["whole"] - sum(out[k] for k in PIECES)
    return out


def one_stream(voc, gi: np.ndarray, *, n: int = 20000, runs: int = 5) -> dict:
    """:func:`measure` for ``Vocoder.generate`` on frame inputs ``gi`` (one stream, its
    ``stream_net``), whole = ``n`` samples of ``generate`` from a fresh state."""
    n = min(n, gi.shape[0] * voc.hop)
    rec = np.zeros((min(n, 4096), 2, K.N_CLASSES), np.float32)
    voc.generate(gi, voc.new_state(seed=1), rec.shape[0], logits_out=rec)

    def whole() -> int:
        voc.generate(gi, voc.new_state(seed=1), n)
        return n

    return measure(voc, whole, rec, 1, n=n, runs=runs)


def streams(voc, gis: np.ndarray, *, n: int = 4096, runs: int = 5) -> dict:
    """:func:`measure` for ``Vocoder.generate_batch`` of ``gis`` (B, F, width), B streams
    stream-major (B < 24, see ``vocoder.lane_split``), whole = ``n`` samples of each."""
    B = gis.shape[0]
    n = min(n, gis.shape[1] * voc.hop)
    rec = np.zeros((B, min(n, 2048), 2, K.N_CLASSES), np.float32)
    voc.generate_batch(gis, voc.new_batch_state(K.rng_states(1, B)), rec.shape[1], logits_out=rec)

    def whole() -> int:
        voc.generate_batch(gis, voc.new_batch_state(K.rng_states(1, B)), n)
        return n * B

    return measure(voc, whole, rec.reshape(-1, 2, K.N_CLASSES), B, n=max(1, n // 4), runs=runs)
