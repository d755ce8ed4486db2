"""Offline throughput: `wavern render` of 200 sentences on 2 worker processes -> docs/bench/render.md.

    .venv/bin/python bench/render.py                   # shipped voice if any, else the tiny test voice
    .venv/bin/python bench/render.py --hidden 384      # also a random voice of the default vocoder size
    .venv/bin/python bench/render.py --count 50        # fewer sentences

Runs the real CLI (`wavern render FILE --out-dir TMP --jobs 2`) in a subprocess on the first
``--count`` sentences of assets/sentences/sotu.txt and reports audio seconds produced per wall
second (x real time), and per CPU second of the whole process tree (the machine is shared, so
the CPU figure says what 2 free cores would do: audio / (CPU s / 2)). Process start-up (Python,
torch, numba cache, voice load in each worker) is included in both.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "bench" / "render.md"
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from latency import pick_voice  # noqa: E402  (same voice choice as the latency benchmark)


FORMATS = """### What `wavern render` writes

- `OUT/<id>.<wav|flac|ogg>` (or the manifest's `out`, relative to OUT), 22 050 Hz mono 16-bit (Vorbis for OGG).
- With `--sidecar srt` / `--sidecar vtt`: `OUT/<id>.srt` / `.vtt`, one cue per word (SRT `HH:MM:SS,mmm`,
  WebVTT `HH:MM:SS.mmm`). With `--sidecar json`: `OUT/<id>.words.json` = `{id, text, sample_rate, samples,
  duration_s, sentences: [{index, char_start, char_end, text, start_sample, end_sample, start_s, end_s}],
  words: [{char_start, char_end, text, start_sample, end_sample, start_s, end_s}]}` (character offsets into
  the item's text; sentence spans exclude the pause after them).
- `OUT/results.jsonl`, one row per item: `{id, status: "ok", out, files, samples, sample_rate, duration_s,
  compute_s, rtf, cpu_s, voice, seed, source, worker, request}` or `{id, status: "failed", error, source, worker}`.
  Rows are appended as items finish (fsync'd) and the file is rewritten with one row per id at the start
  and end of a run.

Resuming: an item is skipped when its row says `ok`, its `files` all exist (with any sidecar asked
for now) and its `request` (a hash of text, voice folder, speed, seed and output name) is unchanged;
failed items are tried again. Files are written to `.<name>.part` and renamed, and the row is written
after the files, so a killed run never leaves an item that looks done but is not. Item ids: text files
give `<stem>-<line>` (or `<stem>-<paragraph>` with `--paragraphs`); editing one line re-renders only that
item. The seed of an item is a hash of its id (or the manifest's `seed`).
"""


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def render_once(voice: Path, sentences: Path, out: Path, jobs: int) -> dict:
    cmd = [sys.executable, "-m", "wavern.app.cli", "render", str(sentences), "--out-dir", str(out),
           "--voice", str(voice), "--jobs", str(jobs), "-q"]
    print("$", shlex.join(cmd), flush=True)
    cpu0, t0 = children_cpu(), time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    ok = [r for r in rows if r["status"] == "ok"]
    audio = sum(r["duration_s"] for r in ok)
    return {"items": len(rows), "ok": len(ok), "audio_s": audio, "wall_s": wall, "cpu_s": cpu,
            "xrt_wall": audio / wall, "xrt_2cores_cpu": audio / (cpu / 2), "item_cpu_s": sum(r["cpu_s"] for r in ok),
            "load": os.getloadavg()[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--hidden", type=int, nargs="*", default=[], help="also random voices of these hidden sizes")
    args = ap.parse_args()
    lines = (ROOT / "assets" / "sentences" / "sotu.txt").read_text().splitlines()[: args.count]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src = tmp / "sentences.txt"
        src.write_text("\n".join(lines) + "\n")
        for hidden in [None] + args.hidden:
            voice, desc = pick_voice(tmp, hidden, 0.1)
            r = render_once(voice, src, tmp / f"out_{hidden}", args.jobs)
            print(r, flush=True)
            rows.append((desc, r))
    cmd = f".venv/bin/python bench/render.py --count {args.count} --jobs {args.jobs}" + (
        f" --hidden {' '.join(map(str, args.hidden))}" if args.hidden else "")
    out = ["## Offline rendering (`wavern render`)\n",
           f"`wavern render` of the first {args.count} sentences of `assets/sentences/sotu.txt` (one item per line) "
           f"with `--jobs {args.jobs}` worker processes, WAV output, folded batched vocoder (40-frame segments, "
           f"4-frame overlap). Measured by `{cmd}`, which runs the CLI in a subprocess. Wall time includes start-up "
           f"of every process; CPU time is the whole process tree's. The machine is a shared 2-core box (the "
           f"load average is shown), so the CPU column, audio / (CPU s / 2), is what 2 free cores would do.\n",
           "| voice | items ok | audio s | wall s | x real time (wall) | CPU s | x real time on 2 free cores (CPU) "
           "| load avg |",
           "|---|---|---|---|---|---|---|---|"]
    for desc, r in rows:
        out.append(f"| {desc} | {r['ok']}/{r['items']} | {r['audio_s']:.0f} | {r['wall_s']:.0f} | "
                   f"{r['xrt_wall']:.1f} | {r['cpu_s']:.0f} | **{r['xrt_2cores_cpu']:.1f}** | {r['load']:.1f} |")
    out.append("\nThe goal is >= 20x real time on 2 cores. The random acoustic model speaks at its own random "
               "durations (~9 s of audio per sentence here), so audio seconds differ from a trained voice's; "
               "throughput per audio second depends on the vocoder size, which is the point of the H=384 row.\n")
    DOC.write_text("\n".join(out) + "\n" + FORMATS)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
