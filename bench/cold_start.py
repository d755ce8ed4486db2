"""Cold start: a fresh process from ``import wavern`` to the first streamed chunk -> docs/bench/cold_start.md.

    .venv/bin/python bench/cold_start.py [--runs 5] [--voice assets/voices/default]

Each run is a new Python process (so numba and the voice load from scratch) that imports
``wavern.engine``, calls ``Voice.load`` and takes the first chunk of ``voice.stream``. The numba
cache is whatever this checkout has (filled by ``./setup.sh``'s first sentence); ``--empty-cache``
points NUMBA_CACHE_DIR at a fresh folder instead, i.e. the very first start after installing.
Times are wall clock inside the process (interpreter start-up, ~50 ms, not included).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import machine  # noqa: E402

PROBE = """
import json, sys, time
t0 = time.perf_counter()
from wavern.engine import Voice
t1 = time.perf_counter()
v = Voice.load(sys.argv[1])
t2 = time.perf_counter()
for chunk in v.stream("Hello there, how are you today?"):
    break
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "first_chunk_s": t3 - t2, "total_s": t3 - t0,
                  "cpu_s": time.process_time()}))
"""


def run_once(voice: Path, env: dict) -> dict:
    with tempfile.TemporaryDirectory() as tmp:  # run outside the repository: the installed package is what runs
        res = subprocess.run([sys.executable, "-c", PROBE, str(voice)], cwd=tmp, env=env, capture_output=True,
                             text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--voice", type=Path, default=ROOT / "assets" / "voices" / "default")
    ap.add_argument("--empty-cache", action="store_true", help="also runs with an empty numba cache")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench" / "cold_start.md")
    args = ap.parse_args()
    voice = args.voice.resolve()
    rows = []
    warm_env = dict(os.environ)
    warm_env.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".numba_cache"))
    run_once(voice, warm_env)  # make sure the cache is filled for this checkout (not counted)
    runs = [run_once(voice, warm_env) for _ in range(args.runs)]
    rows.append(("numba cache filled (every start after the first)", runs))
    if args.empty_cache:
        empty = []
        for _ in range(max(1, args.runs // 2)):
            with tempfile.TemporaryDirectory() as cache:
                empty.append(run_once(voice, dict(os.environ, NUMBA_CACHE_DIR=cache)))
        rows.append(("empty numba cache (the first start after installing)", empty))
    load = os.getloadavg()
    lines = [
        "## Cold start: a new process to the first audio chunk",
        "",
        f"`{' '.join(['.venv/bin/python', 'bench/cold_start.py', *sys.argv[1:]])}` "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {machine.cpu_name()}, {os.cpu_count()} CPUs, "
        f"commit {machine.commit()}, voice `{voice.name}`, load average {load[0]:.2f} at the end). Each run is a "
        "fresh Python process: import "
        "`wavern.engine`, `Voice.load`, first chunk of `voice.stream(\"Hello there, how are you today?\")`. "
        "Medians; wall clock inside the process.",
        "",
        "| start | runs | import s | Voice.load s | first chunk s | total s | CPU s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, rs in rows:
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        lines.append(f"| {name} | {len(rs)} | {med['import_s']:.2f} | {med['load_s']:.2f} | "
                     f"{med['first_chunk_s']:.2f} | **{med['total_s']:.2f}** | {med['cpu_s']:.2f} |")
    lines += ["", "Goal (engine issue): cold start to first audio <= 2 s. `Voice.load` reads the voice and builds its "
              "acoustic model (numpy) and vocoder; torch is not imported (before 013625a its import was most of "
              "`Voice.load`: 1.90 s in all then, 0.74 s after, fresh processes taking turns on an AMD EPYC, "
              "2026-12-01). With an empty numba cache the first chunk pays for compiling the kernels."]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
