"""`wavern doctor`: a true report of what this machine offers wavern.

Every line is read off the running system; nothing is assumed. Each check is isolated so
that one failing probe (no audio library, no espeak data) is reported, not raised.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import sys
from pathlib import Path
from typing import Callable

__all__ = ["Check", "run_checks", "format_report", "cpu_features", "TORCH_INSTALL"]

#: How to add torch (training, ``wavern bench --compare torch``) to an installation without it:
#: the pinned CPU build (PyPI's Linux wheel of torch pulls several GB of CUDA libraries).
TORCH_INSTALL = ("pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu, "
                 "or ./setup.sh in a checkout")


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def cpu_features() -> dict[str, bool]:
    """SIMD/matrix features from /proc/cpuinfo (Linux); empty dict elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
            break
    wanted = ["avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8"]
    return {f: f in flags for f in wanted}


def _python() -> Check:
    ok = sys.version_info >= (3, 11)
    return Check("python", ok, f"{platform.python_version()} ({sys.executable})")


def _versions() -> Check:
    import numba
    import numpy

    try:
        import torch
    except ModuleNotFoundError:  # speaking runs without it
        trainer = f"torch not installed (only training needs it: {TORCH_INSTALL})"
    else:
        trainer = f"torch {torch.__version__} ({torch.get_num_threads()} threads)"
    return Check("libraries", True, f"numpy {numpy.__version__}, numba {numba.__version__}, {trainer}")


def _cpu() -> Check:
    feats = cpu_features()
    have = [k for k, v in feats.items() if v]
    missing = [k for k, v in feats.items() if not v]
    detail = f"{os.cpu_count()} logical CPUs; has {', '.join(have) or 'none of the probed features'}"
    if missing:
        detail += f"; lacks {', '.join(missing)}"
    from wavern.engine import kernels

    detail += "; engine vectors: " + (("512-bit" if kernels.WIDE_VECTORS else "256-bit")
                                      + (" (16x4 blocks)" if kernels.KEEPS_16X4 else ""))
    detail += "; int8 products (--int8): " + ("AVX2 byte products" if kernels.TARGET_AVX2
                                              else "portable vector code (no AVX2: slower than float16)")
    return Check("cpu", True, detail)


def _audio() -> Check:
    try:
        import sounddevice as sd
    except OSError as e:  # PortAudio shared library missing
        return Check("audio", False, f"PortAudio not found ({e}); install libportaudio2. Output goes to files.")
    try:
        devices = sd.query_devices()
    except Exception as e:  # noqa: BLE001 - PortAudio raises assorted errors on broken setups
        return Check("audio", False, f"PortAudio could not list devices ({e}); output goes to files")
    outs = [d for d in devices if d.get("max_output_channels", 0) > 0]
    if not outs:
        return Check("audio", False, "no audio output device found; `wavern say` writes a WAV file instead")
    names = ", ".join(f"{d['name']} ({int(d['default_samplerate'])} Hz)" for d in outs[:4])
    return Check("audio", True, f"{len(outs)} output device(s): {names}")


def _espeak() -> Check:
    try:
        import espeakng_loader
    except ImportError as e:
        return Check("espeak-ng", False, f"espeakng-loader not installed ({e})")
    lib = Path(espeakng_loader.get_library_path())
    data = Path(espeakng_loader.get_data_path())
    ok = lib.is_file() and (data / "phontab").is_file()
    return Check("espeak-ng", ok, f"library {lib} ({'found' if lib.is_file() else 'MISSING'}), "
                                  f"data {data} ({'found' if (data / 'phontab').is_file() else 'MISSING'})")


def _voices() -> Check:
    from wavern.app.voices import find_voices

    found = find_voices()
    if not found:
        from wavern.app.voices import voice_dirs

        return Check("voices", False, f"no voices found (looked in {', '.join(str(d) for d in voice_dirs())})")
    parts = []
    all_ok = True
    for info in found:
        parts.append(f"{info.name} [{'valid' if info.error is None else 'INVALID: ' + info.error}]")
        all_ok &= info.error is None
    return Check("voices", all_ok, "; ".join(parts))


def _numba_cache() -> Check:
    from wavern.engine import kernels

    where, n = kernels.cache_status()
    if where is None:
        return Check("numba cache", False, "off (numba's SLP vectoriser is off): kernels compile in every process")
    writable = os.access(where if os.path.isdir(where) else os.path.dirname(where), os.W_OK)
    state = ("writable" if writable else "NOT writable: kernels recompile each run") + \
        ("" if n else "; empty: the first `wavern say` compiles the kernels, 20-40 s")
    return Check("numba cache", writable, f"{where} ({n} kernels cached for this CPU setting; {state})")


def _qt() -> Check:
    """The window's Qt binding, and whether it keeps Python's reference counts (PySide6 6.12.0 on
    Python 3.11 lost one to True per signal emitted: the window aborted after minutes)."""
    try:
        import PySide6
        from PySide6.QtCore import QObject, Signal
    except ImportError as e:
        return Check("qt", False, f"PySide6 not importable ({e}): `wavern gui` cannot start; the rest works")

    class _Probe(QObject):
        fired = Signal(object)

    probe = _Probe()
    before = sys.getrefcount(True)
    for i in range(20):
        probe.fired.emit(i)
    lost = before - sys.getrefcount(True)
    if lost >= 15:
        return Check("qt", False, f"PySide6 {PySide6.__version__} loses a reference per signal (the window would abort "
                                  "after minutes): pip install 'PySide6-Essentials<6.12'")
    return Check("qt", True, f"PySide6 {PySide6.__version__}")


def _speechd() -> Check:
    """Speech Dispatcher, wavern's module for it (`wavern speechd install`), and whether the module
    answers as the server would start it (loads the voice: a few seconds)."""
    from wavern.app.speechd import install as inst
    from wavern.app.speechd.server import daemon_version

    version = daemon_version()
    server = f"Speech Dispatcher {version}" if version else \
        "Speech Dispatcher not installed (Debian: apt-get install speech-dispatcher)"
    if not inst.paths().module.exists():
        return Check("speechd", True, f"{server}; wavern's module not installed (`wavern speechd install` makes "
                                      "wavern a system voice: spd-say, Orca)")
    installed, where = inst.status()
    if not installed:
        return Check("speechd", False, f"{server}; module {where}")
    ok, said = inst.probe()
    detail = f"{server}; module {where}: " + (f"working, {said}" if ok else f"NOT working: {said}")
    from wavern.app.speechd.ssip import SsipClient, SsipError, default_socket

    if default_socket().exists():
        try:
            with SsipClient(default_socket(), name="wavern:doctor:main", timeout_s=5.0) as c:
                listed = "wavern" in c.list_output_modules()
            detail += "; the running server lists it" if listed else \
                "; the running server does not list it yet (restart Speech Dispatcher, or log out and in)"
        except SsipError:
            pass
    return Check("speechd", ok, detail)


CHECKS: list[Callable[[], Check]] = [_python, _versions, _cpu, _audio, _qt, _espeak, _voices, _numba_cache, _speechd]


def run_checks() -> list[Check]:
    results = []
    for check in CHECKS:
        name = check.__name__.strip("_")
        try:
            results.append(check())
        except Exception as e:  # noqa: BLE001 - the doctor reports, it never crashes
            results.append(Check(name, False, f"check failed: {type(e).__name__}: {e}"))
    return results


def format_report(results: list[Check]) -> str:
    width = max(len(r.name) for r in results)
    lines = [f"{'ok ' if r.ok else '!! '} {r.name:<{width}}  {r.detail}" for r in results]
    return "\n".join(lines)
