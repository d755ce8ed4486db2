"""Random numbers: splitmix64 (Steele, Lea, Flood 2014) with explicit state, uniforms in [0, 1)
with 53 random bits. ``uniforms(rng_state(seed), n)`` gives the draws the generators consume."""

from __future__ import annotations

import numpy as np

from wavern.engine.kernels.jit import _GAMMA, _JIT, _MIX1, _MIX2, _TWO_M53, U, kernel
from wavern.errors import ParameterError

__all__ = ["rng_state", "rng_states", "uniforms"]

# --------------------------------------------------------------------------------------------
# Random numbers: splitmix64 with explicit state, uniforms in [0, 1) with 53 random bits.

@kernel(**_JIT)
def _next_uniform(state, i):
    """Advance ``state[i]`` (uint64) and return a float64 uniform in [0, 1)."""
    s = state[i] + _GAMMA
    state[i] = s
    z = (s ^ (s >> U(30))) * _MIX1
    z = (z ^ (z >> U(27))) * _MIX2
    z = z ^ (z >> U(31))
    return np.float64(z >> U(11)) * _TWO_M53


@kernel(**_JIT)
def _fill_uniforms(state, out):
    """out (n, 2) float64 <- the next 2n uniforms of ``state[0]``, row by row."""
    z0 = np.int64(0)
    for t in range(out.shape[0]):
        out[t, 0] = _next_uniform(state, z0)
        out[t, 1] = _next_uniform(state, z0)



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



