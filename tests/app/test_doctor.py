"""`wavern doctor`: each line read off the system, probes faked where the machine cannot vary."""

from __future__ import annotations

import json
import os
import shutil
import sys
import types
from pathlib import Path

import pytest

from wavern.app import doctor


def _fake_sounddevice(monkeypatch, devices=None, error: Exception | None = None):
    sd = types.ModuleType("sounddevice")

    def query_devices():
        if error is not None:
            raise error
        return devices

    sd.query_devices = query_devices
    monkeypatch.setitem(sys.modules, "sounddevice", sd)


def _check(name: str) -> doctor.Check:
    (found,) = [c for c in doctor.run_checks() if c.name == name]
    return found


def test_audio_line_names_the_output_devices_or_their_absence(monkeypatch):
    _fake_sounddevice(monkeypatch, [{"name": "mic", "max_output_channels": 0, "default_samplerate": 48000.0}])
    c = _check("audio")
    assert not c.ok and c.detail.startswith("no audio output device found")
    _fake_sounddevice(monkeypatch, [{"name": "mic", "max_output_channels": 0, "default_samplerate": 48000.0},
                                    {"name": "Speakers", "max_output_channels": 2, "default_samplerate": 44100.0}])
    c = _check("audio")
    assert c.ok and c.detail == "1 output device(s): Speakers (44100 Hz)"
    _fake_sounddevice(monkeypatch, error=RuntimeError("Error querying device -1"))
    c = _check("audio")
    assert not c.ok and "could not list devices (Error querying device -1)" in c.detail


def test_audio_line_on_this_machine_agrees_with_portaudio():
    try:
        import sounddevice as sd

        outs = [d for d in sd.query_devices() if d.get("max_output_channels", 0) > 0]
    except Exception:  # noqa: BLE001 - no PortAudio or a broken one: the doctor must say not ok
        outs = []
    assert _check("audio").ok == bool(outs)


def test_voices_line_lists_valid_and_invalid_voices_and_where_it_looked(tiny_voice, tmp_path, monkeypatch):
    monkeypatch.setattr("wavern.app.voices.voice_dirs", lambda: [tmp_path / "none"])
    c = _check("voices")
    assert not c.ok and c.detail == f"no voices found (looked in {tmp_path / 'none'})"
    shutil.copytree(tiny_voice, tmp_path / "v" / "good")
    bad = tmp_path / "v" / "bad"
    shutil.copytree(tiny_voice, bad)
    meta = json.loads((bad / "voice.json").read_text())
    meta["inference"] = [1]
    (bad / "voice.json").write_text(json.dumps(meta))
    monkeypatch.setattr("wavern.app.voices.voice_dirs", lambda: [tmp_path / "v"])
    c = _check("voices")
    assert not c.ok and c.detail.startswith("bad [INVALID: ") and c.detail.endswith("; good [valid]")


def test_numba_cache_line_is_numbas_own_folder_and_counts_the_kernels_cached_for_this_cpu(tmp_path):
    """The folder numba really caches the kernels in (here NUMBA_CACHE_DIR's; beside the sources or
    ~/.cache/numba otherwise, whichever numba picks) and how many of this module's kernels have a
    build in it that this process loads (an index file of another name or module is not one)."""
    import subprocess
    import sys

    code = ("from wavern.app.doctor import _numba_cache; c = _numba_cache(); "
            "print(c.ok); print(c.detail)")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))

    def check(prefix: str = "") -> tuple[str, str]:
        r = subprocess.run([sys.executable, "-c", prefix + code], env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        ok, detail = r.stdout.strip().splitlines()[-2:]
        return ok, detail

    ok, detail = check()
    where = detail.split(" (")[0]
    assert ok == "True" and Path(where).parent == tmp_path
    assert "(0 kernels cached for this CPU setting; writable; empty: the first `wavern say` compiles" in detail
    Path(where).mkdir(parents=True, exist_ok=True)
    for name in ("kernels._generate-1.py311.nbi", "other.f-1.py311.nbi"):
        (Path(where) / name).write_bytes(b"")
    assert check()[1].startswith(f"{where} (0 kernels cached")
    check("import numpy as np, wavern.engine.kernels as K; K.vexp(np.zeros(4, np.float32)); ")
    ok, detail = check()
    n = int(detail.split(" (")[1].split()[0])
    assert ok == "True" and n >= 1 and detail == f"{where} ({n} kernels cached for this CPU setting; writable)"


def test_cpu_features_are_the_flags_of_proc_cpuinfo():
    path = Path("/proc/cpuinfo")
    if not path.is_file():
        assert doctor.cpu_features() == {}
        return
    line = next(x for x in path.read_text().splitlines() if x.startswith("flags"))
    flags = set(line.split(":", 1)[1].split())
    feats = doctor.cpu_features()
    assert feats and all(v == (k in flags) for k, v in feats.items())
    from wavern.engine import kernels

    assert not kernels.WIDE_VECTORS or "avx512f" in flags
    assert kernels.TARGET_AVX2 == ("avx2" in flags)  # the tests compile for this CPU
    detail = doctor._cpu().detail
    assert ("engine vectors: " + (("512-bit" if kernels.WIDE_VECTORS else "256-bit")
                                  + (" (16x4 blocks)" if kernels.KEEPS_16X4 else ""))) in detail
    assert detail.endswith("int8 products (--int8): " + ("AVX2 byte products" if kernels.TARGET_AVX2
                                                         else "portable vector code (no AVX2: slower than float16)"))


def test_a_probe_that_raises_is_reported_not_raised(monkeypatch):
    def broken():
        raise ValueError("probe exploded")

    monkeypatch.setattr(doctor, "CHECKS", [doctor._python, broken])
    results = doctor.run_checks()
    assert results[1] == doctor.Check("broken", False, "check failed: ValueError: probe exploded")
    report = doctor.format_report(results).splitlines()
    assert report[0].startswith("ok  python") and report[1] == "!!  broken  check failed: ValueError: probe exploded"


@pytest.mark.parametrize("name", ["python", "libraries", "cpu", "espeak-ng"])
def test_the_other_lines_hold_on_this_machine(name):
    c = _check(name)
    assert c.ok, c.detail
    if name == "python":
        assert sys.executable in c.detail
