"""Live latency benchmark: `wavern bench` on the shipped sentences -> docs/bench/latency.md (+ .png).

    .venv/bin/python bench/latency.py                 # shipped voice if any, else a tiny test voice
    .venv/bin/python bench/latency.py --hidden 384    # a random voice with the default vocoder size
    .venv/bin/python bench/latency.py --realtime 0    # skip the 10-minute real-time run
    .venv/bin/python bench/latency.py --realtime-json r.json  # take that run from an earlier JSON
    .venv/bin/python bench/latency.py --realtime-keep REV     # keep the doc's real-time section (run at REV)
    .venv/bin/python bench/latency.py --schema-only   # rewrite only the JSON schema section
    .venv/bin/python bench/latency.py --first-audio --against REV   # first audio, CPU and wall, vs REV

Runs `wavern bench` four ways: alone, with one other core kept busy (``--load 1``), with
``--compare torch``, and on multi-sentence texts (the shipped lines joined, 5 to 40 sentences
long); then ``--realtime 600 --load 1`` (10 minutes of audio through a sink paced like a sound
card: ~10 min of wall clock, little CPU). The JSON of each goes to a temp folder, the plot of the
first to docs/bench/latency.png, and the tables plus the JSON schema (from
``wavern.app.bench.SCHEMA``) to docs/bench/latency.md.

``--first-audio`` measures only the time to the first chunk, in wall and CPU time (the process's,
all threads), of every shipped line and of texts of 1 to 40 lines, in fresh processes; with
``--against REV`` the processes of this checkout take turns with those of git revision REV (so
both see the same load), and the table of both replaces the "First audio" section of the doc.
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "bench" / "latency.md"
SENTENCES = ROOT / "assets" / "bench" / "sentences.txt"
VOICE = ROOT / "assets" / "voices" / "default"
FIRST_AUDIO_HEAD = "### First audio: wall and CPU time"
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
import machine  # noqa: E402
from checkout import export_checkout  # noqa: E402


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


def _word_range() -> str:
    """Fewest to most words in a line of the benchmark's sentence set."""
    lines = [ln for ln in SENTENCES.read_text(encoding="utf-8").splitlines() if ln.strip()]
    counts = [len(ln.split()) for ln in lines]
    return f"{min(counts)} to {max(counts)}"


def schema_section() -> str:
    from wavern.app.bench import SCHEMA, SCHEMA_VERSION

    rows = "\n".join(f"| `{k}` | {v} |" for k, v in SCHEMA.items())
    return (f"### JSON schema (`wavern bench --json`, version {SCHEMA_VERSION})\n\n"
            "Stable: fields are only added; a change of meaning or a removal bumps `schema_version`. "
            "`[]` marks each element of a list. Times are wall-clock seconds from `time.perf_counter`.\n\n"
            f"| field | meaning |\n|---|---|\n{rows}\n")


def run(cmd: list[str]) -> dict:
    print("$", shlex.join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)
    return json.loads(Path(cmd[cmd.index("--json") + 1]).read_text())


def multi_sentence_texts(sentences: list[str]) -> list[str]:
    """Texts of 5, 10, 20 and 40 of the shipped lines (rotated so each starts with a different line)."""
    n = len(sentences)
    return [" ".join(sentences[(start + i) % n] for i in range(count))
            for start, count in ((5, 5), (12, 10), (17, 20), (18, 40))]


def slow_chunks(r: dict) -> str:
    """Which chunks took longer to make than to play (chunk load above 1), in words."""
    sr = r["voice"]["sample_rate"]
    by_request: dict[int, list[dict]] = {}
    for c in r["chunks"]:
        by_request.setdefault(c["sentence"], []).append(c)
    first = ramp = other = 0
    for cs in by_request.values():
        for i, c in enumerate(cs):
            if c["compute_s"] * sr > c["samples"]:
                if i == 0:
                    first += 1
                elif i < 5:
                    ramp += 1
                else:
                    other += 1
    n = first + ramp + other
    return (f"{n} of {len(r['chunks'])} chunks took longer to make than to play: {first} first chunks of a request, "
            f"{ramp} of the next four (the ramp of small chunks) and {other} later ones")


def results_section(runs: dict[str, dict], voice_desc: str, cmds: dict[str, str],
                    realtime: tuple[dict, str] | None = None, realtime_text: str | None = None) -> str:
    from wavern.app.bench import bench_sentences

    def row(name: str, r: dict) -> str:
        s, t = r["summary"], r["timings"]
        h = s["headroom_s"]
        load = r["system"].get("loadavg")
        return (f"| {name} | {s['sentences']} | {t['load_s']:.2f} | {t['warmup_s']:.2f} | "
                f"{1e3 * s['first_audio_s']['p50']:.0f} / {1e3 * s['first_audio_s']['p90']:.0f} / "
                f"{1e3 * s['first_audio_s']['max']:.0f} | {s['rtf_per_sentence']['p50']:.3f} / "
                f"{s['rtf_per_sentence']['p90']:.3f} | {s['chunk_load']['p50']:.3f} / {s['chunk_load']['p99']:.3f} | "
                f"{h['min']:.3f} / {h['p10']:.3f} | {s['underruns']} | {s['peak_rss_mib']:.0f} | "
                f"{'?' if load is None else f'{load[0]:.1f}'} |")

    first = next(iter(runs.values()))
    sy = first["system"]
    feats = ", ".join(k for k, v in sy["cpu_features"].items() if v)
    lines = [
        f"Voice: {voice_desc}. Requests: the {first['summary']['sentences']} lines of "
        f"`assets/bench/sentences.txt` ({_word_range()} words), each through `Voice.stream` into a null sink; the "
        f"multi-sentence run joins them into texts of 5, 10, 20 and 40 lines. {machine.describe()} ({feats}), "
        f"Python {sy['python']}, BLAS threads {sy['threads']['blas']}, numba threads {sy['threads']['numba']}; "
        f"shared (load average at each run's end, last column); `--load 1` spins a process on the other core.\n",
        "| run | requests | load s | warm-up s | first audio ms p50 / p90 / max | RTF p50 / p90 | "
        "chunk load p50 / p99 | headroom s min / p10 | underruns (simulated) | peak RSS MiB | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [row(name, r) for name, r in runs.items()]
    lines.append("")
    lines += [f"- {name}: `{cmd}`" for name, cmd in cmds.items()]
    c = next((r["compare"] for r in runs.values() if r["compare"]), None)
    if c:
        lines.append(f"\nEngine vs torch reference loop (same weights, mel and uniforms, {c['samples']} samples, one "
                     f"run): engine {c['engine_samples_per_s']:.0f} samples/s, torch {c['torch_samples_per_s']:.0f} "
                     f"samples/s, **{c['speedup']:.0f}x**; {100 * c['matching_fraction']:.1f}% of samples identical "
                     "(once float rounding flips a draw, the streams diverge).")
    if realtime is not None:
        r, cmd = realtime
        rt, s = r["realtime"], r["summary"]
        rh = rt["headroom_s"]
        lines += [
            "",
            "### Ten minutes in real time",
            "",
            f"`{cmd}`: the {len(bench_sentences())} shipped lines joined into one text of {rt['text_chars']} "
            f"characters, spoken {rt['requests']} times back to back (the last cut at the target) into a "
            f"`PacedSink`: a thread wakes every 10 ms and reads every {rt['blocksize']}-sample block due by the "
            f"clock with the device callback's own code (`AudioRing.read_into`), so an underrun is counted exactly "
            f"as the sound card callback counts it. The ring holds {rt['buffer_s']:.2f} s, so generation runs at "
            f"most that far ahead. With `--load 1` a spinning process holds the other core; wavern competes "
            f"with it (and other jobs: load average "
            f"{r['system']['loadavg'][0]:.1f} at the end).",
            "",
            "| audio s | wall s | CPU s (RTF) | callbacks | underruns | underrun s | headroom s min / p10 / p50 | "
            "chunk load p50 / p90 / p99 / max | first audio ms max | thread late ms max |",
            "|---|---|---|---|---|---|---|---|---|---|",
            f"| {rt['audio_s']:.1f} | {rt['wall_s']:.1f} | {rt['cpu_s']:.1f} ({rt['cpu_rtf']:.3f}) | {rt['blocks']} | "
            f"**{rt['underruns']}** | {rt['underrun_s']:.3f} | {rh['min']:.3f} / {rh['p10']:.3f} / {rh['p50']:.3f} | "
            f"{s['chunk_load']['p50']:.3f} / {s['chunk_load']['p90']:.3f} / {s['chunk_load']['p99']:.3f} / "
            f"{s['chunk_load']['max']:.3f} | {1e3 * s['first_audio_s']['max']:.0f} | {1e3 * rt['max_late_s']:.1f} |",
            "",
            "Headroom is the audio queued at each callback while the producer was still at work (the play-out of "
            "the last buffer is not counted). Chunk load is a chunk's compute time over its audio duration; "
            f"{slow_chunks(r)}. The simulated-player underruns of this run's JSON (`summary.underruns`) do not "
            "apply here: that player starts empty at each request, while the paced sink still holds the previous "
            "request's audio.",
        ]
    if realtime is None and realtime_text:
        lines += ["", realtime_text.rstrip("\n")]
    lines.append("\n![latency per request and headroom](latency.png)\n")
    return "\n".join(lines)



# ---- first audio, wall and CPU, this checkout against another --------------------------------
def first_audio_texts(lines: list[str]) -> dict[str, list[str]]:
    """The requests: every shipped line alone, and texts of 1 to 40 lines (four starting lines each)."""
    n = len(lines)
    multi = [" ".join(lines[(start + i) % n] for i in range(count))
             for count in (1, 2, 5, 10, 20, 40) for start in (0, 6, 12, 18)]
    return {"lines": lines, "texts": multi}


def first_audio_child(repeats: int) -> None:
    """In this process: load the voice, warm up, then time every request's first chunk ``repeats``
    times; prints one JSON line {group: [[wall_s, cpu_s] per request, median of the repeats]}."""
    import numpy as np

    from wavern.engine.voice import Voice

    lines = [ln.strip() for ln in SENTENCES.read_text(encoding="utf-8").splitlines() if ln.strip()]
    voice = Voice.load(os.environ.get("WAVERN_BENCH_VOICE", VOICE))  # another revision's: its own voice folder
    voice.warmup()
    out = {}
    for group, texts in first_audio_texts(lines).items():
        rows = []
        for text in texts:
            walls, cpus = [], []
            for _ in range(repeats):
                t, c = time.perf_counter(), time.process_time()
                it = voice.stream(text)
                next(it)
                walls.append(time.perf_counter() - t)
                cpus.append(time.process_time() - c)
                it.close()
            rows.append([float(np.median(walls)), float(np.median(cpus))])
        out[group] = rows
    voice.close()
    print(json.dumps(out))


def first_audio_breakdown_child(repeats: int) -> None:
    """In this process: CPU time (this thread) of each stage of the first chunk of the longest
    shipped line; prints one JSON line {stage: ms (median of ``repeats``)}."""
    import functools

    import numpy as np

    from wavern.conditioning import acoustic
    from wavern.conditioning import frontend
    from wavern.engine import melmatch
    from wavern.engine.voice import Voice

    lines = [ln.strip() for ln in SENTENCES.read_text(encoding="utf-8").splitlines() if ln.strip()]
    text = max(lines, key=lambda ln: len(frontend.segment(ln)[0].text))
    voice = Voice.load(VOICE)
    voice.warmup()
    spent: dict[str, list[float]] = {}

    def timed(owner, name: str, label: str) -> None:
        real = getattr(owner, name)

        @functools.wraps(real)
        def wrapper(*a, **k):
            t = time.thread_time()
            try:
                return real(*a, **k)
            finally:
                spent.setdefault(label, []).append(time.thread_time() - t)
        setattr(owner, name, wrapper)

    for owner, name, label in [
            (frontend, "segment", "segment the text"), (voice, "analyze", "espeak-ng events + tokens"),
            (acoustic.AcousticModel, "encode", "encoder + durations"),
            (acoustic.AcousticModel, "_frames", "length regulator + frame fusion"),
            (acoustic.FrameDecoder, "prefix", "decoder layers but the last (all frames)"),
            (acoustic.AcousticModel, "_mel_rows", "last decoder layer, first rows"),
            (voice.vocoder, "frame_inputs", "vocoder conditioning net"),
            (voice.vocoder, "generate", "vocoder, first chunk (512 samples, + the lead of mel matching if any)"),
            (melmatch.MelMatchStream, "push", "mel matching, first chunk")]:
        timed(owner, name, label)
    total = []
    for _ in range(repeats):
        c = time.process_time()
        it = voice.stream(text)
        next(it)
        total.append(time.process_time() - c)
        it.close()
    out = {label: 1e3 * float(np.median(v)) * len(v) / repeats for label, v in spent.items()}
    out["total (process CPU)"] = 1e3 * float(np.median(total))
    out["_words"] = len(frontend.segment(text)[0].words)
    voice.close()
    print(json.dumps(out))


def first_audio_compare(against: str | None, rounds: int, repeats: int) -> dict:
    """Fresh processes of this checkout (and of ``against``) taking turns, ``rounds`` each; per
    request the median over rounds, then p50 / p90 / max over the requests of each group."""
    import numpy as np

    cmd = [sys.executable, str(Path(__file__).resolve()), "--first-audio-child", "--repeats", str(repeats)]
    runs: dict[str, list[dict]] = {"this": [], "before": []}
    load: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        envs = {"this": dict(os.environ)}
        if against:  # its code and its voice folder (a voice.json may name settings older code refuses)
            pkg = export_checkout(against, Path(tmp), folders=("wavern", "engine", "vocoder", "conditioning"))
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", against, str(VOICE.relative_to(ROOT))],
                                     capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
            envs["before"] = dict(os.environ, PYTHONPATH=str(pkg),
                                  WAVERN_BENCH_VOICE=str(Path(tmp) / VOICE.relative_to(ROOT)))
        for r in range(rounds):
            for which, env in envs.items():
                res = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
                if res.returncode:
                    raise SystemExit(f"{which} round {r + 1} failed:\n{res.stderr[-3000:]}")
                runs[which].append(json.loads(res.stdout.strip().splitlines()[-1]))
                load.append(os.getloadavg()[0])
                print(f"round {r + 1}/{rounds} {which}: done (load {load[-1]:.1f})", flush=True)
    res = subprocess.run([*cmd[:-3], "--first-audio-breakdown", "--repeats", "15"], capture_output=True, text=True,
                         check=True)
    breakdown = json.loads(res.stdout.strip().splitlines()[-1])
    load.append(os.getloadavg()[0])
    summary: dict = {"rounds": rounds, "repeats": repeats, "against": against, "breakdown": breakdown,
                     "load_min": min(load), "load_max": max(load), "results": {}}
    for which, rs in runs.items():
        if not rs:
            continue
        res = {}
        for group in rs[0]:
            per = np.median(np.array([r[group] for r in rs]), axis=0)  # (requests, 2): median over rounds
            res[group] = {kind: {"p50": float(np.percentile(per[:, i], 50)), "p90": float(np.percentile(per[:, i], 90)),
                                 "max": float(per[:, i].max())} for i, kind in enumerate(("wall", "cpu"))}
            res[group]["n"] = int(per.shape[0])
        summary["results"][which] = res
    return summary


def first_audio_section(summary: dict, cmd: str) -> str:
    """The doc's "First audio" section from :func:`first_audio_compare`."""
    groups = {"lines": "the 20 shipped lines", "texts": "texts of 1-40 lines"}
    names = {"this": "this checkout", "before": f"before (`{summary['against']}`)"}
    head = ("| checkout | requests | wall ms p50 / p90 / max | CPU ms p50 / p90 / max |\n"
            "|---|---|---|---|")
    rows = []
    for group, label in groups.items():
        for which in ("before", "this"):
            r = summary["results"].get(which, {}).get(group)
            if r is None:
                continue
            w, c = r["wall"], r["cpu"]
            rows.append(f"| {names[which]} | {label} ({r['n']}) | {1e3 * w['p50']:.1f} / {1e3 * w['p90']:.1f} / "
                        f"{1e3 * w['max']:.1f} | {1e3 * c['p50']:.1f} / {1e3 * c['p90']:.1f} / {1e3 * c['max']:.1f} |")
    b = dict(summary["breakdown"])
    words = b.pop("_words")
    total = b.pop("total (process CPU)")
    stages = "; ".join(f"{label} {ms:.1f}" for label, ms in b.items())
    note = (f"Where the CPU goes in this checkout, for the longest first sentence of the shipped lines ({words} "
            f"words), ms (this thread, median of 15; the analysis includes its own segmentation of the block): "
            f"{stages}; total {total:.1f} (the process). The decoder's "
            "window attention has global frames (sentence starts, pauses), and each global row attends to every "
            "frame, so all layers but the last must run over the whole sentence before any mel row is exact; "
            "the last layer runs on the rows the vocoder asks for (`SentenceMel.rows`: 48, then the rest after "
            "the chunk ramp), equal to the one-shot decode within 4e-6 in log-mel. espeak-ng is asked for its "
            "events only (`espeak.phoneme_events`: rendered at 449 words per minute, audio not copied).")
    return "\n".join([
        FIRST_AUDIO_HEAD, "",
        f"`{cmd}`: time from `Voice.stream(text)` to its first chunk, wall (`perf_counter`) and CPU "
        "(`process_time`, all threads of the process), in fresh processes of the shipped voice (each "
        "checkout's own `assets/voices/default`: same networks, its settings) after "
        f"`warmup()`; every request {summary['repeats']} times per process (median), "
        f"{summary['rounds']} processes per checkout taking turns (median per request), then percentiles over "
        "the requests. The texts of 1-40 lines start at lines 1, 7, 13 and 19 (24 texts). "
        f"{machine.describe()}; 1-minute load average {summary['load_min']:.1f}-{summary['load_max']:.1f} during "
        "the runs.", "", head, *rows, "", note, ""])


def write_first_audio_section(section: str) -> None:
    """Put ``section`` in the doc in place of its old "First audio" section (else before the schema)."""
    text = DOC.read_text() if DOC.is_file() else ""
    if FIRST_AUDIO_HEAD in text:
        before, rest = text.split(FIRST_AUDIO_HEAD, 1)
        after = rest[rest.index("\n### "):] if "\n### " in rest else ""
        text = before + section + after
    elif "### JSON schema" in text:
        before, after = text.split("### JSON schema", 1)
        text = before + section + "\n### JSON schema" + after
    else:
        text += "\n" + section
    DOC.write_text(text)


def old_realtime_section(rev: str) -> str | None:
    """The doc's "Ten minutes in real time" section, kept (with a note naming ``rev``) when the
    other tables are regenerated without the 10-minute run."""
    text = DOC.read_text() if DOC.is_file() else ""
    head = "### Ten minutes in real time"
    if head not in text:
        return None
    rest = text.split(head, 1)[1]
    ends = [rest.index(m) for m in ("\nEngine vs torch", "\n![", "\n### ") if m in rest]
    body = rest[:min(ends)] if ends else rest
    note = f"\n\n(Kept from the run at `{rev}`: not re-run with the tables above.)"
    if "(Kept from the run at" in body:
        body = body[:body.index("\n\n(Kept from the run at")]
    return head + body.rstrip("\n") + note + "\n"


def old_first_audio_section() -> str | None:
    """The doc's current "First audio" section, kept when the other tables are regenerated."""
    text = DOC.read_text() if DOC.is_file() else ""
    if FIRST_AUDIO_HEAD not in text:
        return None
    rest = text.split(FIRST_AUDIO_HEAD, 1)[1]
    return FIRST_AUDIO_HEAD + (rest[:rest.index("\n### ")] if "\n### " in rest else rest).rstrip("\n") + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=None, help="random voice of this hidden size")
    ap.add_argument("--density", type=float, default=0.1)
    ap.add_argument("--realtime", type=float, default=600.0, metavar="SECONDS",
                    help="audio seconds of the paced real-time run (0: skip it)")
    ap.add_argument("--realtime-json", metavar="PATH",
                    help="take the real-time run from this JSON (python -m wavern.app.bench --realtime 600 --load 1 "
                         "--json PATH) instead of running it")
    ap.add_argument("--realtime-keep", metavar="REV",
                    help="keep the doc's real-time section as it is (measured at git revision REV) instead of a run")
    ap.add_argument("--schema-only", action="store_true")
    ap.add_argument("--first-audio", action="store_true", help="measure only the time to the first chunk")
    ap.add_argument("--against", metavar="REV", help="with --first-audio: also measure git revision REV")
    ap.add_argument("--rounds", type=int, default=3, help="with --first-audio: processes per checkout")
    ap.add_argument("--repeats", type=int, default=3, help="with --first-audio: each request's runs per process")
    ap.add_argument("--first-audio-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--first-audio-breakdown", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.first_audio_child:
        first_audio_child(args.repeats)
        return 0
    if args.first_audio_breakdown:
        first_audio_breakdown_child(args.repeats)
        return 0
    if args.first_audio:
        summary = first_audio_compare(args.against, args.rounds, args.repeats)
        cmd = (".venv/bin/python bench/latency.py --first-audio" + (f" --against {args.against}" if args.against
               else "") + f" --rounds {args.rounds} --repeats {args.repeats}")
        section = first_audio_section(summary, cmd)
        print(section)
        write_first_audio_section(section)
        print(f"wrote {DOC}")
        return 0
    head = ("## Live latency (`wavern bench`)\n\n"
            "Through the real streaming path; chunk load: a chunk's compute time / its audio; headroom: the audio "
            "a simulated player holds as each chunk arrives (below 0 an underrun). Measured by "
            f"`.venv/bin/python bench/latency.py{'' if args.hidden is None else f' --hidden {args.hidden}'}` "
            "(which runs the `wavern bench` commands below).\n\n")
    if args.schema_only:
        old = DOC.read_text() if DOC.is_file() else head
        body = old.split("### JSON schema")[0].rstrip() + "\n\n"
        DOC.write_text(body + schema_section())
        print(f"wrote {DOC}")
        return 0
    from wavern.app.bench import bench_sentences

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        voice, desc = pick_voice(tmp, args.hidden, args.density)
        multi = tmp / "multi.txt"
        multi.write_text("\n".join(multi_sentence_texts(bench_sentences())) + "\n")
        base = [sys.executable, "-m", "wavern.app.cli", "bench", "--voice", str(voice)]
        plot = ROOT / "docs" / "bench" / "latency.png"
        cmds = {"alone": base + ["--json", str(tmp / "a.json"), "--plot", str(plot)],
                "one core busy": base + ["--load", "1", "--json", str(tmp / "b.json")],
                "with --compare torch": base + ["--compare", "torch", "--compare-frames", "40",
                                                "--json", str(tmp / "c.json")],
                "multi-sentence texts": base + ["--sentences", str(multi), "--json", str(tmp / "d.json")]}
        runs = {name: run(cmd) for name, cmd in cmds.items()}

        def shown(cmd: list[str]) -> str:
            i, prog = ((cmd.index("bench"), "wavern bench ") if "bench" in cmd
                       else (cmd.index("wavern.app.bench"), "python -m wavern.app.bench "))
            return (prog + shlex.join(cmd[i + 1:])).replace(str(tmp), "$TMP").replace(str(ROOT) + "/", "")

        realtime = None
        if args.realtime_json:
            r = json.loads(Path(args.realtime_json).read_text())
            voice_arg = str(Path(r["voice"]["path"])).replace(str(ROOT) + "/", "")
            realtime = (r, f"python -m wavern.app.bench --voice {voice_arg} --realtime {r['realtime']['target_s']:g} "
                           f"--load {r['system']['load_processes']} --json $TMP/r.json")
        elif args.realtime > 0 and not args.realtime_keep:
            cmd = [sys.executable, "-m", "wavern.app.bench", "--voice", str(voice), "--realtime", f"{args.realtime:g}",
                   "--load", "1", "--json", str(tmp / "r.json")]
            realtime = (run(cmd), shown(cmd))
        kept = old_first_audio_section()
        kept_rt = old_realtime_section(args.realtime_keep) if args.realtime_keep and realtime is None else None
        DOC.write_text(head + results_section(runs, desc, {k: shown(v) for k, v in cmds.items()}, realtime,
                                              kept_rt) + "\n"
                       + (kept + "\n" if kept else "") + schema_section())
    print(f"wrote {DOC} ({platform.node()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
