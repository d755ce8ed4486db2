"""wavern: streaming neural text-to-speech for the desktop.

The root package holds only what every part shares: the error hierarchy
(:mod:`wavern.errors`) and the audio/feature definitions (:mod:`wavern.dsp`).
Subpackages: ``wavern.conditioning`` (text → mel), ``wavern.vocoder`` (WaveRNN in
torch), ``wavern.engine`` (real-time runtime), ``wavern.training``, ``wavern.app``.
"""

import os as _os
import sys as _sys

# numba vectorises the vocoder kernels only with its SLP pass on, and reads this switch once,
# when numba is first imported. Setting it here, in the root package every wavern import
# passes through, covers scripts that import numba-using modules (evaluation) before the
# kernels. A user's explicit setting wins.
_os.environ.setdefault("NUMBA_SLP_VECTORIZE", "1")


_OURS = "WAVERN_NUMBA_CPU_FEATURES"  # what wavern set NUMBA_CPU_FEATURES to (children tell it from a user's)

#: Set to 1, voices load with the vocoder's products on its state in int8 (``Voice.load``'s
#: ``int8``; ``wavern --int8`` sets it, so the processes a command starts do the same).
INT8_ENV = "WAVERN_INT8"


def wide_vector_features() -> str | None:
    """The NUMBA_CPU_FEATURES that let numba's LLVM use 512-bit vectors here, or None where the CPU
    has no AVX-512 (or LLVM cannot say): the host's own features, as numba would take them, plus
    ``-prefer-256-bit``.

    LLVM tunes Intel's AVX-512 server cores to prefer 256-bit vectors, so the vectoriser splits the
    engine's 16-row blocks and lane groups in two; without that preference the vocoder runs ~20 %
    faster there (docs/bench/engine.md). /proc/cpuinfo is read first, so CPUs without AVX-512 never
    load LLVM for this.
    """
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return None
    if " avx512f" not in flags:
        return None
    try:
        import llvmlite.binding as _ll

        features = _ll.get_host_cpu_features()
    except Exception:  # noqa: BLE001 - no LLVM to ask (missing or broken library): numba's defaults
        return None
    return features.flatten() + ",-prefer-256-bit" if features.get("avx512f") else None


def _allow_512_bit_vectors() -> None:
    """Set NUMBA_CPU_FEATURES to :func:`wide_vector_features`, read (like the SLP switch) when numba
    is first imported. A user's NUMBA_CPU_FEATURES, NUMBA_CPU_NAME or NUMBA_ENABLE_AVX=0, or
    WAVERN_VECTOR_BITS=256, leaves numba's default; so does a numba imported before wavern."""
    env = _os.environ
    if "numba" in _sys.modules:
        return
    if "NUMBA_CPU_FEATURES" in env and env.get("NUMBA_CPU_FEATURES") == env.get(_OURS):
        # set by wavern in a parent process (perhaps on another machine): this one decides afresh
        del env["NUMBA_CPU_FEATURES"], env[_OURS]
    if ("NUMBA_CPU_FEATURES" in env or "NUMBA_CPU_NAME" in env or env.get("NUMBA_ENABLE_AVX") == "0"
            or env.get("WAVERN_VECTOR_BITS") == "256"):
        return
    features = wide_vector_features()
    if features:
        env["NUMBA_CPU_FEATURES"] = env[_OURS] = features


_allow_512_bit_vectors()

from wavern.errors import (  # noqa: E402
    AudioDeviceError,
    CorpusError,
    DiskFullError,
    ParameterError,
    VoiceFileError,
    WavernError,
)

__version__ = "0.1.0"

__all__ = [
    "AudioDeviceError",
    "CorpusError",
    "DiskFullError",
    "ParameterError",
    "VoiceFileError",
    "WavernError",
    "__version__",
]
