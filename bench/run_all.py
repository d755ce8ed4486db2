"""`make bench`: run every benchmark, then gather their reports into docs/BENCHMARKS.md.

Each benchmark script writes its own markdown section to docs/bench/<name>.md (with the exact
command that reproduces it). This script runs them in order (or only those named on the
command line) and concatenates the sections, so docs/BENCHMARKS.md is never edited by hand.

    .venv/bin/python bench/run_all.py                 # run all, then gather
    .venv/bin/python bench/run_all.py --gather-only   # only rebuild docs/BENCHMARKS.md
    .venv/bin/python bench/run_all.py engine attention
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# docs/BENCHMARKS.md's sections, in its order: docs/bench/<name>.md, written by bench/<name>.py
SECTIONS = ["intelligibility", "teacher_speed", "engine", "latency", "cold_start", "render", "no_slower", "speechd",
            "melmatch", "postfilter", "pitch_control", "speakers", "train_vocoder", "attention", "yellowfin", "optimizers",
            "pretrain", "lpc_gain", "block_shapes"]
# run by hand with the command their section gives: attention takes half an hour and changes nothing in the docs,
# block_shapes needs a vocoder checkpoint that git does not hold, optimizers ~15 minutes of training,
# intelligibility the teacher corpus (`make natural-voice` builds it), speechd Debian's speech-dispatcher,
# no_slower a git revision to compare with (--against)
HAND_KEPT = ["intelligibility", "speechd", "attention", "optimizers", "block_shapes", "no_slower"]
ORDER = [name for name in SECTIONS if name not in HAND_KEPT]  # what `make bench` reruns
# a section's reference part, kept in docs/bench/<name>.md and left out of BENCHMARKS.md (results only)
REFERENCE_HEADINGS = {"### JSON schema": "The `--json` schema: docs/bench/latency.md.",
                      "### Ten minutes in real time": "Ten minutes into a sink paced like a sound card with the "
                      "other core busy, and first audio in fresh processes (wall, CPU, where it goes): "
                      "docs/bench/latency.md.",
                      "### Random vocoders, block shapes, batches, start": "Random vocoders of every size against "
                      "the torch loop, block shapes against the roofline, batches in lanes, a sample by piece, "
                      "start-up: docs/bench/engine.md.",
                      "### First audio: wall and CPU time": "",  # (in the ten-minute run's pointer)
                      "### Where the start-up goes": "Where the start-up goes, part by part: docs/bench/cold_start.md.",
                      "### Examples": "What the recogniser heard, and the example WAVs: docs/bench/intelligibility.md."}


def _nest(md: str) -> str:
    """Shift a section's headings so its top level becomes ``##`` and the rest sit below it;
    a section without a heading gets one from its file name."""
    import re

    levels = [len(m.group(1)) for m in re.finditer(r"^(#+) ", md, flags=re.M)]
    if not levels:
        return md
    shift = 2 - min(levels)
    first = True

    def repl(m):
        nonlocal first
        n = len(m.group(1)) + shift
        if not first:
            n = max(n, 3)
        first = False
        return "#" * n + " "

    return re.sub(r"^(#+) ", repl, md, flags=re.M)


def _relink(text: str) -> str:
    """A section's relative links (``![..](latency.png)``) point from docs/bench/; here, from docs/."""
    def fix(m: re.Match) -> str:
        link = m[1]
        if re.match(r"[a-z]+:|/|#", link):
            return m[0]
        return f"]({link[3:]})" if link.startswith("../") else f"](bench/{link})"  # ../X from docs/bench: X

    return re.sub(r"\]\(([^)\s]+)\)", fix, text)


def _results_only(name: str, md: str) -> str:
    """``md`` without its reference subsections (REFERENCE_HEADINGS), each replaced by a pointer."""
    for heading, pointer in REFERENCE_HEADINGS.items():
        if heading in md:
            before, rest = md.split(heading, 1)
            after = rest[rest.index("\n### "):] if "\n### " in rest else ""
            md = before.rstrip() + ("\n\n" + pointer if pointer else "") + "\n" + after
    return md


def gather() -> Path:
    """docs/BENCHMARKS.md from the sections in SECTIONS (each script's current result; git keeps older ones)."""
    out = ROOT / "docs" / "BENCHMARKS.md"
    parts = ["# Benchmarks\n",
             "The current result of each benchmark, with the command, machine and date that reproduce it; the "
             "machine is the project's shared 2-core one of that day, so compare a rerun only with a section naming "
             "the same CPU. Gathered from `docs/bench/<name>.md` by `bench/run_all.py`; `make bench` reruns all "
             f"but {', '.join(HAND_KEPT)} (by hand). The voice's quality: docs/VOICE.md.\n"]
    for name in SECTIONS:
        p = ROOT / "docs" / "bench" / f"{name}.md"
        if p.is_file():
            parts.append(_relink(_nest(_results_only(name, p.read_text().strip()))) + "\n")
    out.write_text("\n".join(parts))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {', '.join(ORDER)})")
    ap.add_argument("--gather-only", action="store_true")
    args = ap.parse_args()
    failed = []
    if not args.gather_only:
        for name in args.names or ORDER:
            script = ROOT / "bench" / f"{name}.py"
            if not script.is_file():
                print(f"[bench] {name}: no bench/{name}.py yet, skipped", flush=True)
                continue
            t = time.time()
            print(f"[bench] {name} ...", flush=True)
            rc = subprocess.call([sys.executable, str(script)], cwd=ROOT)
            print(f"[bench] {name} finished rc={rc} in {time.time() - t:.0f} s", flush=True)
            if rc:
                failed.append(name)
    print(f"[bench] wrote {gather()}")
    if failed:
        print(f"[bench] FAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
