"""One core's bounds for the engine's block-sparse products (``bench/engine.py``'s block table): its
FMA throughput, its read bandwidth at a working set of a given size, for float16 weights the rate
it widens them at, and the bound of a matvec, the lowest of these (the roofline: Williams,
Waterman, Patterson 2009, with an in-core ceiling).

- FMA throughput: numpy's float32 matrix product (sgemm) of 384 x 384 matrices on one BLAS thread,
  CPU time: what an optimised kernel reaches on this core (OpenBLAS's sgemm runs at 80-90 % of the
  FMA units' peak), measured rather than taken from a table of CPU models (a virtual machine's
  model name may not say which core it is).
- Read bandwidth: a compiled sum over a float32 buffer of the working set's size, read again and
  again: L1, L2 or L3 bandwidth as the size falls, main memory's past the last level.
- Widening (float16 weights only): a compiled loop that widens float16 weights kept in L1
  (``kernels._w``: vcvtph2ps on x86) and multiplies-adds each into independent partial
  sums, as the block products do with no other work: the FLOP rate the widening allows.
- A matvec reads its blocks, their row offsets and column pointers once, ``x`` (one vector), and
  reads and writes ``y``; it does 2 FLOPs per stored weight. Bound = min(FMA, bandwidth at the
  bytes it reads x FLOPs per byte, and for float16 weights the widening rate).
"""

from __future__ import annotations

import time

from wavern.engine.kernels.intrinsics import _w  # first: numba must see NUMBA_SLP_VECTORIZE

import numba  # noqa: E402
import numpy as np  # noqa: E402

__all__ = ["fma_gflops", "read_gbps", "half_fma_gflops", "matvec_bytes", "matvec_bound"]


@numba.njit(fastmath=True, nogil=True)
def _read_sum(x, reps):  # pragma: no cover - compiled
    s = np.float32(0.0)
    for _ in range(reps):
        for i in range(x.size):
            s += x[i]  # reassociated (fastmath): vectorised into independent partial sums
    return s


@numba.njit(fastmath=True, nogil=True)
def _half_fma(w, c, reps):  # pragma: no cover - compiled
    s = np.float32(0.0)
    for _ in range(reps):
        for i in range(w.size):
            s += _w(w, i) * c  # reassociated (fastmath): a vector of widened weights per FMA
    return s


def fma_gflops(runs: int = 5, n: int = 384) -> float:
    """GFLOP/s of a float32 n x n matrix product on one thread (call with BLAS limited to one thread)."""
    rs = np.random.default_rng(0)
    a, b = rs.standard_normal((n, n), np.float32), rs.standard_normal((n, n), np.float32)
    out = np.empty((n, n), np.float32)
    np.matmul(a, b, out=out)
    reps = 20
    res = []
    for _ in range(runs):
        t = time.thread_time()
        for _ in range(reps):
            np.matmul(a, b, out=out)
        res.append(reps * 2 * n ** 3 / (time.thread_time() - t) / 1e9)
    return float(np.median(res))


def read_gbps(nbytes: int, runs: int = 5) -> float:
    """GB/s of reading a buffer of ``nbytes`` again and again on this thread (about 50 ms a run)."""
    x = np.ones(max(16, nbytes // 4), np.float32)
    _read_sum(x, 1)
    reps = max(1, int(0.05 * 20e9 / x.nbytes))
    res = []
    for _ in range(runs):
        t = time.thread_time()
        _read_sum(x, reps)
        res.append(reps * x.nbytes / (time.thread_time() - t) / 1e9)
    return float(np.median(res))


def half_fma_gflops(runs: int = 5, nbytes: int = 16384) -> float:
    """GFLOP/s (2 a weight) of widening float16 weights held in L1 (``nbytes`` of them) and
    multiplying-adding each into a sum, on this thread (about 50 ms a run)."""
    w = (np.random.default_rng(0).standard_normal(nbytes // 2) * 0.1).astype(np.float16).view(np.uint16)
    c = np.float32(1.0001)
    _half_fma(w, c, 1)
    reps = max(1, int(0.05 * 30e9 / w.size))
    res = []
    for _ in range(runs):
        t = time.thread_time()
        _half_fma(w, c, reps)
        res.append(2 * reps * w.size / (time.thread_time() - t) / 1e9)
    return float(np.median(res))


def matvec_bytes(mat: tuple, rows: int, cols: int) -> int:
    """Bytes one matvec of a ``rows`` x ``cols`` engine matrix ``(data, rowoff, colptr or colidx,
    kind)`` reads: its blocks, their row offsets and column pointers (or indices), ``x`` (4 bytes a
    column) and ``y`` (read and written: 8 bytes a row)."""
    data, rowoff, colptr, _ = mat
    return int(data.nbytes + rowoff.nbytes + colptr.nbytes + 4 * cols + 8 * rows)


def matvec_bound(flops: float, nbytes: int, fma: float, bandwidth: float,
                 widen: float | None = None) -> tuple[float, str]:
    """(bound GFLOP/s, "FMA", "memory" or "widening"): the lowest of the FMA throughput, bandwidth x
    FLOPs per byte and, for float16 weights, the widening rate ``widen`` (:func:`half_fma_gflops`)."""
    ceilings = [(fma, "FMA"), (bandwidth * flops / nbytes, "memory")] + ([(widen, "widening")] if widen else [])
    return min(ceilings, key=lambda c: c[0])
