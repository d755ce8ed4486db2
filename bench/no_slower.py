"""Nothing else slows: `wavern bench`'s first audio and RTF, and the stop latency of a stream, for
this checkout against another git revision, in one run -> docs/bench/no_slower.md.

    .venv/bin/python bench/no_slower.py --against REV [--rounds 5] [--voice assets/voices/default]

Each round runs, for this checkout and for REV (``bench/checkout.py``; the order swapped every
round, so drift in the machine's load falls on both), in fresh processes:

- ``wavern bench --json`` on the shipped sentences with the null sink: first audio p50 and p90,
  RTF p50 (`wavern.app.bench`);
- :data:`STOP_PROBE`: ``Voice.stream`` of a long text on a consumer thread; after its first chunk
  the main thread waits a random 50-400 ms and calls ``StreamControl.stop()``; the stop latency
  is the time from that call to the end of the consumer's loop (what a stop button waits for
  before the engine is quiet: the rest of the chunk being computed). 20 stops a process.

Reports the medians over rounds of each figure per revision, and the round-by-round ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import machine  # noqa: E402
from checkout import export_checkout  # noqa: E402

STOP_PROBE = r"""
import json, random, sys, threading, time
from wavern.engine import Voice
from wavern.engine.stream_control import StreamControl
voice_path, n = sys.argv[1], int(sys.argv[2])
text = " ".join(["The old lighthouse keeper walked down to the harbour every morning."] * 6)
rnd = random.Random(7)
with Voice.load(voice_path) as v:
    for c in v.stream("Warm up."):
        pass
    lat = []
    for _ in range(n):
        control = StreamControl()
        first, done = threading.Event(), threading.Event()
        def consume():
            for c in v.stream(text, control=control):
                first.set()
            done.set()
        th = threading.Thread(target=consume)
        th.start()
        first.wait()
        time.sleep(rnd.uniform(0.05, 0.4))
        t = time.perf_counter()
        control.stop()
        done.wait()
        lat.append(time.perf_counter() - t)
        th.join()
print(json.dumps(lat))
"""


def _run(cmd: list[str], env: dict, cwd: str) -> str:
    res = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited {res.returncode}: {res.stderr[-2000:]}")
    return res.stdout


def measure(env: dict, cwd: str, voice: Path, tmp: Path, stops: int) -> dict:
    out = tmp / "bench.json"
    _run([sys.executable, "-m", "wavern", "bench", "--voice", str(voice), "--json", str(out)], env, cwd)
    s = json.loads(out.read_text())["summary"]
    lat = json.loads(_run([sys.executable, "-c", STOP_PROBE, str(voice), str(stops)], env, cwd).strip()
                     .splitlines()[-1])
    return {"first_p50": s["first_audio_s"]["p50"], "first_p90": s["first_audio_s"]["p90"],
            "rtf_p50": s["rtf_per_sentence"]["p50"], "stop_p50": statistics.median(lat),
            "stop_p90": statistics.quantiles(lat, n=10)[-1], "load": os.getloadavg()[0]}


FIGURES = (("first_p50", "first audio p50, ms", 1e3), ("rtf_p50", "RTF p50 (per sentence)", 1.0),
           ("stop_p50", "stop latency p50, ms", 1e3), ("stop_p90", "stop latency p90, ms", 1e3))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", metavar="REV", required=True, help="the git revision to compare with")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--stops", type=int, default=20, help="stops measured per process")
    ap.add_argument("--voice", type=Path, default=ROOT / "assets" / "voices" / "default")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench" / "no_slower.md")
    args = ap.parse_args()
    voice = args.voice.resolve()
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.against], capture_output=True,
                         text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="wavern-noslower-") as t:
        tmp = Path(t)
        base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        base["PYTHONPYCACHEPREFIX"] = str(tmp / "bytecode")
        base.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".numba_cache"))
        envs = {"this checkout": base, rev: dict(base, PYTHONPATH=str(export_checkout(rev, tmp / "against")))}
        cwd = str(tmp)  # outside the repository, so the export (or the installed package) is what runs
        for name, env in envs.items():  # bytecode and numba caches filled, not counted
            print(f"warming {name}", file=sys.stderr, flush=True)
            measure(env, cwd, voice, tmp, 2)
        runs: dict[str, list[dict]] = {n: [] for n in envs}
        names = list(envs)
        for i in range(args.rounds):
            for name in names if i % 2 == 0 else names[::-1]:
                runs[name].append(measure(envs[name], cwd, voice, tmp, args.stops))
            print(f"round {i + 1}: " + "; ".join(
                f"{n}: first {runs[n][-1]['first_p50'] * 1e3:.0f} ms, RTF {runs[n][-1]['rtf_p50']:.3f}, stop "
                f"{runs[n][-1]['stop_p50'] * 1e3:.1f} ms" for n in names), file=sys.stderr, flush=True)
    loads = [r["load"] for n in runs for r in runs[n]]
    cmd = " ".join(["bench/no_slower.py", *sys.argv[1:]])
    lines = ["## Nothing else slows: `wavern bench` and stop latency against the commit before", "",
             f"`.venv/bin/python {cmd}`: {machine.describe()} ({min(loads):.1f}-{max(loads):.1f} over the runs), "
             f"{args.rounds} rounds, both revisions in fresh processes taking turns: `wavern bench --json`, and "
             f"{args.stops} stops of a stream 50-400 ms after its first chunk (`StreamControl.stop()` to the "
             "stream's end). Medians over rounds; ratio: this checkout / the other, round by round.", "",
             f"| figure | this checkout | `{rev}` | ratio (range) |", "|---|---:|---:|---|"]
    for key, label, scale in FIGURES:
        a = [r[key] for r in runs["this checkout"]]
        b = [r[key] for r in runs[rev]]
        ratio = [x / y for x, y in zip(a, b)]
        lines.append(f"| {label} | {statistics.median(a) * scale:.{3 if scale == 1 else 1}f} | "
                     f"{statistics.median(b) * scale:.{3 if scale == 1 else 1}f} | {statistics.median(ratio):.2f} "
                     f"({min(ratio):.2f}-{max(ratio):.2f}) |")
    lines += ["", "Goal (issue 41): within noise of the commit before, in the same run."]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
