"""Live latency benchmark: `wavern bench` on the shipped sentences -> docs/bench/latency.md (+ .png).

    .venv/bin/python bench/latency.py                 # shipped voice if any, else a tiny test voice
    .venv/bin/python bench/latency.py --hidden 384    # a random voice with the default vocoder size
    .venv/bin/python bench/latency.py --schema-only   # rewrite only the JSON schema section

Runs the real CLI (`wavern bench`) three ways: alone, with one other core kept busy
(``--load 1``) and with ``--compare torch``; the JSON of each goes to a temp folder, the plot of
the first to docs/bench/latency.png, and the tables plus the JSON schema (from
``wavern.app.bench.SCHEMA``) to docs/bench/latency.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "bench" / "latency.md"
sys.path.insert(0, str(ROOT / "tests"))

from wavern.app.bench import SCHEMA, SCHEMA_VERSION  # noqa: E402


def pick_voice(tmp: Path, hidden: int | None, density: float) -> tuple[Path, str]:
    """The shipped voice when there is one (and no --hidden), else a random voice from voice_factory."""
    shipped = sorted(p.parent for p in (ROOT / "assets" / "voices").glob("*/voice.json"))
    if shipped and hidden is None:
        return shipped[0], f"the shipped voice `{shipped[0].relative_to(ROOT)}`"
    from voice_factory import make_tiny_voice

    h = hidden or 64
    path = make_tiny_voice(tmp / f"random_h{h}", hidden_size=h, density=density)
    return path, (f"a random voice from `tests/voice_factory.py` (no voice is shipped in assets/voices yet): "
                  f"WaveRNN H={h} at {density:.0%} block density, tiny acoustic model; speed depends on "
                  f"shapes, not on training")


def schema_section() -> str:
    rows = "\n".join(f"| `{k}` | {v} |" for k, v in SCHEMA.items())
    return (f"### JSON schema (`wavern bench --json`, version {SCHEMA_VERSION})\n\n"
            "Stable: fields are only added; a change of meaning or a removal bumps `schema_version`. "
            "`[]` marks each element of a list. Times are wall-clock seconds from `time.perf_counter`.\n\n"
            f"| field | meaning |\n|---|---|\n{rows}\n")


def run(cmd: list[str]) -> dict:
    print("$", shlex.join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)
    return json.loads(Path(cmd[cmd.index("--json") + 1]).read_text())


def results_section(runs: dict[str, dict], voice_desc: str, cmds: dict[str, str]) -> str:
    def row(name: str, r: dict) -> str:
        s, t = r["summary"], r["timings"]
        h = s["headroom_s"]
        return (f"| {name} | {t['load_s']:.2f} | {t['warmup_s']:.2f} | {1e3 * s['first_audio_s']['p50']:.0f} / "
                f"{1e3 * s['first_audio_s']['p90']:.0f} | {s['rtf_per_sentence']['p50']:.3f} / "
                f"{s['rtf_per_sentence']['p90']:.3f} | {s['chunk_load']['p50']:.3f} / {s['chunk_load']['p99']:.3f} | "
                f"{h['min']:.3f} / {h['p10']:.3f} | {s['underruns']} | {s['peak_rss_mib']:.0f} |")

    first = next(iter(runs.values()))
    sy = first["system"]
    feats = ", ".join(k for k, v in sy["cpu_features"].items() if v)
    lines = [
        f"Voice: {voice_desc}. Sentences: the {first['summary']['sentences']} lines of "
        f"`assets/bench/sentences.txt` (1 to 60 words), each its own request through `Voice.stream` into a null "
        f"sink. Machine: {sy['cpu_count']} CPUs ({feats}), Python {sy['python']}, torch threads "
        f"{sy['threads']['torch']}, numba threads {sy['threads']['numba']}; shared with other jobs (load average "
        f"{os.getloadavg()[0]:.1f} at the end), so these wall times measure contention as much as wavern.\n",
        "| run | load s | warm-up s | first audio ms p50 / p90 | RTF p50 / p90 | chunk load p50 / p99 | "
        "headroom s min / p10 | underruns | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [row(name, r) for name, r in runs.items()]
    lines.append("")
    lines += [f"- {name}: `{cmd}`" for name, cmd in cmds.items()]
    c = next((r["compare"] for r in runs.values() if r["compare"]), None)
    if c:
        lines.append(f"\nEngine vs torch reference loop (same weights, mel and uniforms, {c['samples']} samples, one "
                     f"run): engine {c['engine_samples_per_s']:.0f} samples/s, torch {c['torch_samples_per_s']:.0f} "
                     f"samples/s, **{c['speedup']:.0f}x**; {100 * c['matching_fraction']:.1f}% of samples identical.")
    lines.append("\n![latency per request and headroom](latency.png)\n")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=None, help="random voice of this hidden size")
    ap.add_argument("--density", type=float, default=0.1)
    ap.add_argument("--schema-only", action="store_true")
    args = ap.parse_args()
    head = ("## Live latency (`wavern bench`)\n\n"
            "Through the real streaming path: time to first audio, RTF (compute / audio), chunk load (a chunk's "
            "compute time / its audio duration), buffer headroom of a simulated real-time player (audio still "
            "queued when each chunk arrives; below 0 is an underrun) and peak memory. Measured by "
            f"`.venv/bin/python bench/latency.py{'' if args.hidden is None else f' --hidden {args.hidden}'}` "
            "(which runs the three `wavern bench` commands below).\n\n")
    if args.schema_only:
        old = DOC.read_text() if DOC.is_file() else head
        body = old.split("### JSON schema")[0].rstrip() + "\n\n"
        DOC.write_text(body + schema_section())
        print(f"wrote {DOC}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        voice, desc = pick_voice(tmp, args.hidden, args.density)
        base = [sys.executable, "-m", "wavern.app.cli", "bench", "--voice", str(voice)]
        plot = ROOT / "docs" / "bench" / "latency.png"
        cmds = {"alone": base + ["--json", str(tmp / "a.json"), "--plot", str(plot)],
                "one core busy": base + ["--load", "1", "--json", str(tmp / "b.json")],
                "with --compare torch": base + ["--compare", "torch", "--compare-frames", "40",
                                                "--json", str(tmp / "c.json")]}
        runs = {name: run(cmd) for name, cmd in cmds.items()}
        shown = {name: "wavern bench " + shlex.join(cmd[cmd.index("bench") + 1:]).replace(str(tmp), "$TMP")
                 .replace(str(ROOT) + "/", "") for name, cmd in cmds.items()}
        DOC.write_text(head + results_section(runs, desc, shown) + "\n" + schema_section())
    print(f"wrote {DOC} ({platform.node()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
