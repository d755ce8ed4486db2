"""Compile ahead (:func:`warmup`: every kernel on tiny shapes of the runtime types, mel matching's
transforms too) and say what numba's cache holds (:func:`cache_status`)."""

from __future__ import annotations

import os

import numpy as np

from wavern.engine.kernels import blocks, conv, fastexp, gru, jit, rng, stft
from wavern.engine.kernels import lanes as lanes_module
from wavern.engine.kernels.blocks import _spmm, spmv
from wavern.engine.kernels.conv import conv1d
from wavern.engine.kernels.fastexp import vexp
from wavern.engine.kernels.gru import _generate, _generate_period, _generate_streams, _lpc_synthesis, no_period, sample_class
from wavern.engine.kernels.jit import BLOCK_SHAPES, HOP, N_CLASSES
from wavern.engine.kernels.lanes import _generate_lanes, lane_spmm, lane_work_size, lanes
from wavern.engine.kernels.rng import rng_state, rng_states, uniforms

__all__ = ["warmup", "cache_status"]

def cache_status(*, at_most: int | None = None) -> tuple[str | None, int]:
    """(folder numba caches these kernels in, how many of the package's kernels have a build there
    that this process can load): numba's own choice of folder, beside the sources when writable,
    else its user-wide cache (~/.cache/numba, or NUMBA_CACHE_DIR). A build counts when its index
    is fresh (its source file unchanged) and holds an entry for this process's code generation
    (CPU name and features: a change of vector width, ``WAVERN_VECTOR_BITS``, compiles anew) and
    for the package's sources as they are (:data:`~.jit.SOURCE_DIGEST`). (None, 0) when nothing is
    cached (no SLP vectoriser). ``at_most``: stop counting there (``wavern say`` asks only whether
    any build is there: one index file read instead of one a kernel; 0.42 against 5.6-6.1 ms with
    35 kernels on 2026-12-06)."""
    path = getattr(getattr(_generate, "_cache", None), "_cache_path", None)
    if not path:
        return None, 0
    try:
        from numba.core.registry import cpu_target

        magic = cpu_target.target_context.codegen().magic_tuple()
        kernels = {id(obj): obj for module in (rng, fastexp, blocks, gru, lanes_module, conv, stft)
                   for obj in list(vars(module).values()) if getattr(obj, "py_func", None) is not None}
        n = 0
        for obj in kernels.values():
            if at_most is not None and n >= at_most:
                break
            cache_file = getattr(getattr(obj, "_cache", None), "_cache_file", None)
            if cache_file is not None:
                n += any(key[1] == magic and (jit._PackageCache is None or key[-1] == jit.SOURCE_DIGEST)
                         for key in cache_file._load_index())  # numba's private index
    except Exception:  # noqa: BLE001 - another numba's internals: count the index files instead
        try:
            n = sum(1 for name in os.listdir(path) if name.endswith(".nbi"))
            n = n if at_most is None else min(n, at_most)
        except OSError:
            n = 0
    return str(path), n


def warmup(*, half: bool | None = None) -> None:
    """Compile (or load from numba's cache) every kernel on tiny shapes of the runtime types.

    Call before a stream opens so the first chunk does not pay the compile. Types match what
    :mod:`wavern.engine.vocoder` passes (block weights and the per-sample input columns float32 or
    float16 bits, see ``Vocoder.half_weights``), so no later call compiles again. ``half``: only the kernels of
    float16 (True, with mel matching's transforms) or float32 (False) block weights, so two processes
    can fill an empty cache side by side (test.sh does: ~1 min on 2 cores here, against ~2 in one
    process).
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
    if half is not False:  # no block weights: warmed once, with the float16 kernels (test.sh warms the two apart)
        _warm_stft()


def _warm_stft() -> None:
    """Mel matching's transforms (:mod:`.stft`) with the types ``MelMatch`` passes them: float64
    samples, window and bins, int64 positions and offsets. Eight frames inside the segment take
    the lane path, the eight at its start the frame-by-frame one (reflected)."""
    plan = stft.RealFFTPlan(16)
    zr, zi, frames = plan.scratch()
    hop, width = 4, stft.block_width(8)
    n = 16 * hop + plan.n
    x, window = np.zeros(n), np.hanning(plan.n)
    xr, xi, mag, gain = (np.zeros((plan.m + 1) * width) for _ in range(4))
    acc, norm = np.zeros(n + 8 * hop + plan.n), np.zeros(n + 8 * hop + plan.n)
    for k0 in (0, 4):  # frames 0..7 reach before sample 0; 4..11 lie inside
        stft.analyse(x, 0, n, k0, 8, hop, True, window, *plan.tables, zr, zi, xr, xi, mag, width)
        stft.synthesise(xr, xi, gain, width, 8, *plan.tables, zr, zi, frames, window, acc, norm, k0 * hop, hop)


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
