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
# bench/attention.py prints its tables (docs/bench/attention.md is kept by hand, with its command): not rerun
# here, where its half hour would change nothing in the docs
SECTIONS = ["engine", "train_vocoder", "attention", "yellowfin", "pretrain", "eval_vocoder", "render", "latency",
            "cold_start", "postfilter", "melmatch", "lpc_gain", "speakers", "pitch_control"]  # BENCHMARKS.md's order
HAND_KEPT = ["attention"]
ORDER = [name for name in SECTIONS if name not in HAND_KEPT]  # what `make bench` reruns


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


def gather() -> Path:
    sections = sorted((ROOT / "docs" / "bench").glob("*.md"), key=lambda p: (
        SECTIONS.index(p.stem) if p.stem in SECTIONS else len(SECTIONS), p.stem))
    out = ROOT / "docs" / "BENCHMARKS.md"
    parts = ["# Benchmarks\n",
             "Every number below was measured by the command shown with it, on the project's 2-core development "
             "machine of the day (shared with other jobs, so noisy). That machine has changed between sessions (an "
             "AMD EPYC, Zen 5, until 2026-11-30 and again from 11:00 UTC on 2026-12-01; an Intel Xeon, Emerald "
             "Rapids, 2.1 GHz, before that on 2026-12-01, slower for this code; from the evening of 2026-12-01 an "
             "AMD EPYC Zen 3 with AVX2 and no AVX-512, under the same model name as the Zen 5 and slower still: the "
             "sections measured since name its family, model and vector instructions): compare a rerun only with a "
             "section that names its CPU, and read each section for how "
             "many runs its figures are the median of. This file is assembled from "
             "`docs/bench/*.md` by `bench/run_all.py`. `make bench` reruns the scripts in its `ORDER` "
             f"({', '.join(ORDER)}) with their default arguments; a section measured with other arguments "
             "(e.g. `--against REV`, `--empty-cache`) or by another script (acoustic, block shapes, optimizers, "
             "the LPC vocoder's experiments, the GPU run) names its own command, which is the one that "
             f"reproduces it; {', '.join(HAND_KEPT)} is run by hand with the command its section gives. Several "
             "need the corpus (`make bench` builds it first: `wavern corpus build data/corpus --utterances 2000`).\n"]
    for p in sections:
        parts.append(_relink(_nest(p.read_text().strip())) + "\n")
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
