"""How the kernels are compiled, in one place: numba's SLP vectoriser switched on before numba
loads, the jit and fast-math options, the CPU's vector width, and the constants the kernels share.

The package imports this module first, before anything of its own imports numba. :func:`kernel` is
``numba.njit`` with the engine's options (:data:`_JIT`) and a cache keyed to every file of the
package. Names with a leading underscore are private to the package.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from pathlib import Path

# numba vectorises the kernels' loops only with NUMBA_SLP_VECTORIZE=1 set before numba is first
# imported (it leaves the SLP vectoriser off by default: it once miscompiled); we set it here if
# nobody did. If numba was imported earlier without it, the kernels run correctly but 3-5x slower
# and SLP_ACTIVE is False.
if "numba" in sys.modules and os.environ.get("NUMBA_SLP_VECTORIZE") != "1":
    _LATE = True  # numba read its config already; setting the variable now changes nothing
else:
    _LATE = False
    os.environ.setdefault("NUMBA_SLP_VECTORIZE", "1")

from wavern.numba_cache import LoadOnlyCache, cached_njit, import_numba  # noqa: E402

numba = import_numba()  # (without its start's scipy and yaml imports)
import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

from wavern.dsp import PHASE_INPUT_GAIN, U  # noqa: E402,F401  (U: unsigned index arithmetic, the kernels' import)

log = logging.getLogger(__name__)

#: True when numba compiles with the SLP vectoriser (see above).
SLP_ACTIVE: bool = bool(numba.core.config.SLP_VECTORIZE)
if not SLP_ACTIVE:
    log.warning("numba SLP vectoriser is off (%s): the vocoder kernels will run 3-5x slower; "
                "set NUMBA_SLP_VECTORIZE=1 before anything imports numba",
                "numba was imported before wavern.engine.kernels" if _LATE else "NUMBA_SLP_VECTORIZE != 1")

# jit options, chosen once: cached, GIL released, numpy's error model (no branch per division).
# numba's cache key does not record the SLP setting: a process without it neither reads nor
# writes the cache, so that later processes never load its slow kernels.
_JIT = dict(nogil=True, cache=SLP_ACTIVE, error_model="numpy")
# Block products: FMA contraction only (no reassoc: it kept LLVM from vectorising, REFERENCES 7).
_FM_BLOCK = {"contract"}
# Guard-free arithmetic (gates, exp, softmax, fixed-order sums): contraction, no signed zeros,
# reciprocal; never reassoc, so every sum keeps the order written (the same in all layouts).
_FM_ARITH = {"contract", "nsz", "arcp"}
# Max of finite values may be reordered (it is exact in any order).
_FM_REDUCE = {"contract", "nsz", "arcp", "reassoc", "nnan", "ninf"}

# A kernel's compiled code holds the kernels it calls and the globals it reads, from any file of
# the package, while numba keys a cached build to the file its function is in: so every cached
# build is keyed to all of them (an edit of blocks.py recompiles gru.py's loops too).
SOURCE_DIGEST: str = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(Path(__file__).parent.glob("*.py")))
                                    ).hexdigest()[:16]
if LoadOnlyCache is not None:
    class _PackageCache(LoadOnlyCache):
        """numba's cache of one function (loaded without numba's compile set-up,
        :mod:`wavern.numba_cache`), its index keyed to :data:`SOURCE_DIGEST` as well."""

        def _index_key(self, sig, codegen):
            return super()._index_key(sig, codegen) + (SOURCE_DIGEST,)
else:  # pragma: no cover - another numba: its own cache, per file
    _PackageCache = None


def kernel(**options):
    """``numba.njit(**options)`` whose cached build (``cache=True``) is keyed to the package's sources."""
    cache = options.pop("cache", False)

    def wrap(fn):
        if cache and _PackageCache is not None:
            return cached_njit(fn, cache_class=_PackageCache, **options)
        return njit(cache=cache, **options)(fn)

    return wrap


# numba freezes a global into the compiled kernel and keys its cache to this package's files
# alone, so the phase input's gain is written here too: an edit of wavern.dsp's alone would leave
# cached kernels on the old value while training used the new one.
_PHASE_GAIN = 8.0
if _PHASE_GAIN != PHASE_INPUT_GAIN:
    raise ImportError(f"engine/kernels/jit.py's _PHASE_GAIN {_PHASE_GAIN} differs from wavern.dsp.PHASE_INPUT_GAIN "
                      f"{PHASE_INPUT_GAIN}: change both")

#: Block shapes the kernels support, by ``kind``: (rows, cols) of one block.
BLOCK_SHAPES: tuple[tuple[int, int], ...] = ((8, 4), (4, 4), (8, 1), (16, 4))
#: ``kind + FLAT``: the same block shape in the flat layout of the one-stream matvec (:func:`flat`).
FLAT = 4
#: True when numba compiles for 512-bit vectors: on AVX-512 CPUs wavern's import sets
#: NUMBA_CPU_FEATURES (``wavern.wide_vector_features``; LLVM's tuning for Intel's server cores
#: prefers 256), so 16x4 blocks are one vector per block column and a 16x4-pruned voice runs
#: ~20 % faster.
WIDE_VECTORS: bool = "-prefer-256-bit" in (numba.core.config.CPU_FEATURES or "")


# CPUs (LLVM names) with AVX2, for NUMBA_CPU_NAME: the int8 block product uses AVX2's byte
# products there (:mod:`.int8`), and portable vector code elsewhere.
_AVX2_CPU_NAMES = ("haswell", "broadwell", "skylake", "skylake-avx512", "cascadelake", "cooperlake", "cannonlake",
                   "icelake-client", "icelake-server", "tigerlake", "rocketlake", "alderlake", "raptorlake",
                   "meteorlake", "arrowlake", "lunarlake", "sapphirerapids", "emeraldrapids", "graniterapids",
                   "znver1", "znver2", "znver3", "znver4", "znver5", "x86-64-v3", "x86-64-v4", "core-avx2")


def _target_has_avx2() -> bool:
    """Whether the code numba compiles may use AVX2: NUMBA_CPU_FEATURES if set, else the CPU that
    NUMBA_CPU_NAME names, else this machine's CPU."""
    features = numba.core.config.CPU_FEATURES
    if features:
        return "+avx2" in features.split(",")
    name = numba.core.config.CPU_NAME
    if name and name != "host":
        return name in _AVX2_CPU_NAMES
    try:
        import llvmlite.binding as ll

        return bool(ll.get_host_cpu_features().get("avx2"))
    except Exception:  # noqa: BLE001 - no LLVM to ask (not x86, or a broken library): the portable code
        return False


#: True when the kernels compile for a CPU with AVX2 (the int8 product's vpmaddubsw).
TARGET_AVX2: bool = _target_has_avx2()

def _amd_cpu() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return any(line.startswith("vendor_id") and "AuthenticAMD" in line for line in f)
    except OSError:
        return False


AMD_CPU: bool = _amd_cpu()
#: Effective GFLOP/s of one block-sparse matvec (3H x H, H = 512, 10 % density, one core),
#: measured by ``bench/engine.py --blocks`` (docs/BENCHMARKS.md); only their ratios matter:
#: they choose the engine block shape of each matrix at load (vocoder.choose_block_kind).
#: 16x4 as measured on an AVX-512 Xeon against 8x4 there: 1.17x with 512-bit vectors, 0.96x
#: with 256-bit ones (so a file pruned in 16x4 blocks runs as 8x4 blocks there without them); on an
#: AMD Zen 3 EPYC (AVX2 only) 1.48x with 256-bit vectors (28.8 against 19.4 GFLOP/s; the whole
#: random H 384 / 10 % vocoder 12-15 % faster), so on AMD CPUs a 16x4 file keeps its blocks; on an
#: AMD Zen 4 EPYC with 512-bit vectors (its 512-bit operations run as two 256-bit halves) 0.91x
#: with float16 weights (56.1 against 61.6 GFLOP/s; the random H 512 / 10 % vocoder RTF 0.120
#: against 0.114, medians of 5 paired processes, 2026-12-06), so there it runs as 8x4.
MEASURED_GFLOPS: dict[tuple[int, int], float] = {
    (8, 4): 60.0, (4, 4): 37.0, (8, 1): 29.0,
    (16, 4): (55.0 if AMD_CPU else 70.0) if WIDE_VECTORS else (89.0 if AMD_CPU else 57.5)}
#: True where a file pruned in 16x4 blocks keeps them in the engine (elsewhere each runs as two 8x4
#: blocks: the same products, bit for bit).
KEEPS_16X4: bool = MEASURED_GFLOPS[(16, 4)] > MEASURED_GFLOPS[(8, 4)]
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


