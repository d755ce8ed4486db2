"""Offline throughput: `wavern render` of 200 sentences on 2 worker processes -> docs/bench/render.md.

    .venv/bin/python bench/render.py                              # the shipped voice (else the tiny test voice)
    .venv/bin/python bench/render.py --hidden 384                 # also a random voice of the default vocoder size
    .venv/bin/python bench/render.py --voice PATH                 # that voice folder instead of the shipped one
    .venv/bin/python bench/render.py --hidden 384 --against REV   # each voice also at git revision REV (before)
    .venv/bin/python bench/render.py --count 50                   # fewer sentences
    .venv/bin/python bench/render.py --rounds 3                   # the --jobs run 3 times (median), as for issue 41

Runs the real CLI (`wavern render FILE --out-dir TMP --jobs 2`) in a subprocess on the first
``--count`` sentences of assets/sentences/sotu.txt and reports audio seconds produced per wall
second (x real time), and per CPU second of the whole process tree (the machine is shared, so
the CPU figure says what 2 free cores would do: audio / (CPU s / 2)). Process start-up (Python,
numba cache, voice load in each worker; before 013625a, importing torch too) is included in both.
With ``--against REV`` the package folders of REV are exported to a temp folder and run the
same way (PYTHONPATH), the checkouts taking turns round by round (the order reversed every
round); each checkout first renders two lines once so its numba cache is filled (not timed).

The checkout's own files are then checked against one ``--jobs 1`` rendering of the same lines
(a single process): every WAV must read back (soundfile: the voice's rate, mono, int16, as long as
results.jsonl says) and be the same bytes as the single process's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "bench" / "render.md"
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))
import machine  # noqa: E402
from checkout import export_checkout  # noqa: E402

from latency import pick_voice  # noqa: E402  (same voice choice as the latency benchmark)


# What `wavern render` writes (files, sidecars, results.jsonl, resuming): docs/ARCHITECTURE.md.



def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def vocoder_weights(voice: Path) -> int:
    """Stored weights of the block-sparse matrices (W_hh, O1-O4) that every sample multiplies."""
    from wavern.engine import Voice

    v = Voice.load(voice)
    try:
        return int(sum(v.vocoder.nnz_weights.values()))
    finally:
        v.close()


def render_once(voice: Path, sentences: Path, out: Path, jobs: int, env: dict | None = None) -> dict:
    cmd = [sys.executable, "-m", "wavern.app.cli", "render", str(sentences), "--out-dir", str(out),
           "--voice", str(voice), "--jobs", str(jobs), "-q"]
    print("$", shlex.join(cmd), flush=True)
    load0 = os.getloadavg()[0]
    cpu0, t0 = children_cpu(), time.perf_counter()
    subprocess.run(cmd, cwd=out.parent, check=True, env=env)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    ok = [r for r in rows if r["status"] == "ok"]
    audio = sum(r["duration_s"] for r in ok)
    return {"items": len(rows), "ok": len(ok), "audio_s": audio, "wall_s": wall, "cpu_s": cpu,
            "xrt_wall": audio / wall, "xrt_2cores_cpu": audio / (cpu / 2), "item_cpu_s": sum(r["cpu_s"] for r in ok),
            "load_start": load0, "load": os.getloadavg()[0]}


def _median_run(rs: list[dict]) -> dict:
    """The run of median wall-clock speed (the lower middle one of an even count), with every run's speed."""
    r = sorted(rs, key=lambda r: r["xrt_wall"])[(len(rs) - 1) // 2]
    return dict(r, all_xrt_wall=[x["xrt_wall"] for x in rs])


def identical_wavs(out: Path, other: Path) -> int:
    """How many of ``out``'s WAV files ``other`` holds with the same name and bytes."""
    return sum((other / w.name).is_file() and (other / w.name).read_bytes() == w.read_bytes() for w in out.glob("*.wav"))


def check_files(out: Path, single: Path) -> tuple[int, int, int]:
    """(WAV files in ``out``, of them readable as results.jsonl describes them, of them the same bytes
    as ``single``'s file of the same name)."""
    import soundfile as sf

    rows = {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    wavs = sorted(out.glob("*.wav"))
    valid = 0
    for w in wavs:
        info = sf.info(str(w))
        r = rows.get(w.stem)
        if (r is not None and info.channels == 1 and info.subtype == "PCM_16" and info.frames > 0
                and abs(info.frames / info.samplerate - r["duration_s"]) < 1e-3):
            valid += 1
    return len(wavs), valid, identical_wavs(out, single)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--voice", type=Path, default=None, help="voice folder (default: the shipped voice)")
    ap.add_argument("--hidden", type=int, nargs="*", default=[], help="also random voices of these hidden sizes")
    ap.add_argument("--against", metavar="REV", help="also run each voice at git revision REV ('before')")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each --jobs rendering (medians reported)")
    args = ap.parse_args()
    lines = (ROOT / "assets" / "sentences" / "sotu.txt").read_text().splitlines()[: args.count]
    rev = None
    if args.against:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.against], capture_output=True,
                             text=True, check=True).stdout.strip()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src = tmp / "sentences.txt"
        src.write_text("\n".join(lines) + "\n")
        warm = tmp / "warm.txt"
        warm.write_text("\n".join(lines[:2]) + "\n")
        checkouts = [("this checkout", None)]
        if rev:
            env = dict(os.environ, PYTHONPATH=str(export_checkout(rev, tmp / "before")))
            checkouts.append((f"before (`{rev}`)", env))
        voices = []
        for hidden in [None] + args.hidden:
            if hidden is None and args.voice is not None:
                voices.append((args.voice.resolve(), f"`{args.voice}`", f"`{args.voice}`"))
            elif hidden is None:
                path, desc = pick_voice(tmp, None, 0.1)
                voices.append((path, desc, f"`{path.relative_to(ROOT)}`" if path.is_relative_to(ROOT) else path.name))
            else:
                from voice_factory import make_tiny_voice

                path = make_tiny_voice(tmp / f"random_h{hidden}", hidden_size=hidden, density=0.1)
                voices.append((path, f"a random voice from `tests/voice_factory.py`: WaveRNN H={hidden}, W_hh "
                                     f"pruned to 10 % in 16x4 blocks, O1-O4 dense; tiny acoustic model",
                               f"the random H={hidden} voice"))
        voices = [(path, desc, short, vocoder_weights(path)) for path, desc, short in voices]
        for k, (_, env) in enumerate(checkouts):  # fill each checkout's numba cache (not timed)
            render_once(voices[0][0], warm, tmp / f"warm_{k}", 1, env)
        same, checks = [], []
        for v, (voice, desc, short, weights) in enumerate(voices):
            rs: dict[int, list] = {k: [] for k in range(len(checkouts))}
            for i in range(args.rounds):  # the checkouts take turns, the order reversed every round
                for k in range(len(checkouts)) if i % 2 == 0 else reversed(range(len(checkouts))):
                    label, env = checkouts[k]
                    out_dir = tmp / f"out_{v}_{k}" if i == 0 else tmp / f"out_{v}_{k}_{i}"
                    rs[k].append(render_once(voice, src, out_dir, args.jobs, env))
                    print(label, rs[k][-1], flush=True)
            rows += [(desc, weights, label, _median_run(rs[k])) for k, (label, _) in enumerate(checkouts)]
            single = tmp / f"single_{v}"
            render_once(voice, src, single, 1)
            checks.append((short, *check_files(tmp / f"out_{v}_0", single)))
            if rev:  # same seeds, same folding: the audio should be the same bytes
                same.append((short, identical_wavs(tmp / f"out_{v}_0", tmp / f"out_{v}_1"),
                             len(list((tmp / f"out_{v}_0").glob("*.wav")))))
    cmd = f".venv/bin/python bench/render.py --count {args.count} --jobs {args.jobs}" + (
        f" --rounds {args.rounds}" if args.rounds != 1 else "") + (
        f" --voice {args.voice}" if args.voice else "") + (
        f" --hidden {' '.join(map(str, args.hidden))}" if args.hidden else "") + (
        f" --against {args.against}" if args.against else "")
    out = ["## Offline rendering (`wavern render`)\n",
           f"`wavern render` of the first {args.count} sentences of `assets/sentences/sotu.txt` (one item per line) "
           f"with `--jobs {args.jobs}` worker processes, WAV output, folded batched vocoder (40-frame segments, "
           f"4-frame overlap). `{cmd}` ({machine.describe()}) runs the CLI in a subprocess. Wall time includes "
           f"every process's start-up; CPU: the whole process tree's, audio / (CPU s / 2) what 2 free cores would "
           f"do (load average at each run's start and end).\n",
           "| voice | vocoder weights per sample | code | items ok | audio s | wall s | x real time (wall) | CPU s | "
           "x real time on 2 free cores (CPU) | load avg |",
           "|---|---:|---|---|---|---|---|---|---|---|"]
    for desc, weights, label, r in rows:
        out.append(f"| {desc} | {weights:,} | {label} | {r['ok']}/{r['items']} | {r['audio_s']:.0f} | "
                   f"{r['wall_s']:.0f} | "
                   f"{r['xrt_wall']:.1f} | {r['cpu_s']:.0f} | **{r['xrt_2cores_cpu']:.1f}** | "
                   f"{r['load_start']:.1f} / {r['load']:.1f} |")
    if args.rounds > 1:
        out.append(f"\nEach row: the median run of {args.rounds} by wall clock; all ({args.rounds}): "
                   + "; ".join(f"{label} " + ", ".join(f"{x:.1f}" for x in r["all_xrt_wall"]) for _, _, label, r in rows)
                   + ".")
        for (desc, _, label, r), (_, _, other, o) in zip(rows[::2], rows[1::2]) if rev else ():
            ratio = [a / b for a, b in zip(r["all_xrt_wall"], o["all_xrt_wall"])]  # round by round: the same spell
            out.append(f"\n{label} / {other}, round by round: median {statistics.median(ratio):.2f} "
                       f"({min(ratio):.2f}-{max(ratio):.2f}).")
    against = {short: n_same for short, n_same, _ in same}
    for short, n, valid, n_same in checks:
        out.append(f"\n{short}, this checkout: {valid} of {n} WAV files valid (mono 16-bit, results.jsonl's length), "
                   f"{n_same} of {n} byte-identical to a `--jobs 1` rendering"
                   + (f", {against[short]} of {n} to `{rev}`'s." if short in against else "."))
    out.append("\nGoal (issue 41): >= 30x real time on 2 cores for 200 sentences by wall clock, the files valid and "
               "byte-identical to the single-process rendering. Workers render items in groups of about 32 vocoder "
               "segments (`GROUP_SEGMENTS`) as shared batches: in lanes, or stream-major for a period-input vocoder "
               "(the shipped voice; `kernels._generate_streams`), whose streams stop where their item ends.\n")
    DOC.write_text("\n".join(out) + "\n")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
