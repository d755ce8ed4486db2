"""The engine's compiled loops (numba): block-sparse products, the GRU step, sampling, the RNG.

The WaveRNN per-sample loop (Kalchbrenner et al. 2018, eqns 2-3; docs/ARCHITECTURE.md, "The
WaveRNN") runs whole inside compiled code, a chunk of samples per call; Python touches only
chunks. :mod:`wavern.engine.vocoder` drives it. Public wrappers (``spmv``, ``lane_spmm``,
``conv1d``, ``uniforms``, ``sample_class``, ...) validate and allocate; the private ``_name``
kernels take arrays and scalars, write into preallocated buffers and never raise.

The parts: :mod:`.jit` (how they compile, shared constants; imported first), :mod:`.rng`,
:mod:`.fastexp`, :mod:`.intrinsics` (LLVM code numba does not write), :mod:`.blocks` (the
block-sparse products and the engine's matrix layout), :mod:`.int8` (the int8 products on the
product), :mod:`.gru` (one stream, a few streams),
:mod:`.lanes` (many streams), :mod:`.conv`, :mod:`.stft` (mel matching's transforms, eight frames
at a time), :mod:`.warmup` (compile ahead, cache status).

Every output value is computed by the same sequence of float operations in the one-stream,
stream-major and lane layouts (same fused multiply-adds in the same order, sums in fixed chains,
no ``reassoc``), so a batch reproduces single streams bit for bit, and none depends on where
numpy put the buffers.
"""

# jit first: it sets numba's vectoriser flag before numba is imported
from wavern.engine.kernels.jit import (AMD_CPU, BLOCK_SHAPES, FLAT, HOP, KEEPS_16X4, LANE_MULTIPLE, MEASURED_GFLOPS,  # isort: skip
                                       N_CLASSES, SLP_ACTIVE, TARGET_AVX2, WIDE_VECTORS)
from wavern.engine.kernels.blocks import flat, spmv
from wavern.engine.kernels.conv import conv1d, conv1d_taps, conv_taps
from wavern.engine.kernels.fastexp import vexp
from wavern.engine.kernels.gru import check_temperature, no_period, sample_class
from wavern.engine.kernels.int8 import INT8_LEN, Q_STATE, Q_WEIGHT, STATE_OFFSET, spmv_int8, state_bytes
from wavern.engine.kernels.lanes import lane_spmm, lane_work_size, lanes
from wavern.engine.kernels.rng import rng_state, rng_states, uniforms
from wavern.engine.kernels.warmup import cache_status, warmup

# The private kernels wavern.engine.vocoder calls (and the tests compare with their slow twins)
from wavern.engine.kernels.blocks import _spmm, _spmv  # noqa: F401
from wavern.engine.kernels.conv import _conv_rows  # noqa: F401
from wavern.engine.kernels.gru import (_draw, _generate, _generate_period, _generate_streams,  # noqa: F401
                                       _lpc_synthesis, _max, _period_inputs, _scaled_exp, _sum8)
from wavern.engine.kernels.intrinsics import _w  # noqa: F401
from wavern.engine.kernels.lanes import _generate_lanes, _lane_scan, _lane_softmax, _lane_spmm  # noqa: F401
from wavern.engine.kernels.rng import _fill_uniforms  # noqa: F401

__all__ = [
    "BLOCK_SHAPES", "FLAT", "MEASURED_GFLOPS", "KEEPS_16X4", "SLP_ACTIVE", "WIDE_VECTORS", "AMD_CPU", "HOP", "N_CLASSES", "LANE_MULTIPLE",
    "spmv", "lane_spmm", "lanes", "lane_work_size", "conv1d", "conv_taps", "conv1d_taps", "vexp", "sample_class",
    "rng_state", "rng_states", "uniforms", "warmup", "cache_status", "flat", "check_temperature", "no_period",
    "TARGET_AVX2", "INT8_LEN", "Q_STATE", "Q_WEIGHT", "STATE_OFFSET", "spmv_int8", "state_bytes",
]
