"""Speech Dispatcher: wavern's module against espeak-ng's own, side by side under one daemon
-> docs/bench/speechd.md.

    .venv/bin/python bench/speechd.py                   # 40 of each kind, 20 stops per module
    .venv/bin/python bench/speechd.py --n 10 --stops 5  # quicker
    .venv/bin/python bench/speechd.py --out /tmp/s.md   # elsewhere

One ``speech-dispatcher -s`` (wavern.app.speechd.server.LocalServer: its own folder, ALSA's
``null`` device, so nothing is heard) with both modules loaded. The messages a screen reader
sends most, characters (SSIP CHAR), single words and short sentences (SPEAK), go through an SSIP
client (what spd-say does, with the server's events timed as they arrive), the two modules taking
turns message by message so both see the same load:

- first audio: SPEAK (or CHAR) sent -> the server's BEGIN event. Both modules send BEGIN with
  their first audio buffer (the server's player starts on it), so this is client -> daemon ->
  module -> first audio in the daemon's player. For wavern also the module's own view (its
  record folder): message received -> first audio written to the pipe.
- spd-say: ``spd-say -o wavern WORD`` started -> wavern's first audio buffer (a process start and
  a connection each time, as a shell script or a key binding does).
- stop: a long message, STOP sent 100-300 ms after its BEGIN -> the server's CANCELED event (the
  module has stopped; the daemon drops its own queue at once). For wavern also STOP received
  -> 703 sent (no audio after it), and -> its speech thread free again.

ALSA's null device plays at once rather than in real time, so the daemon's player never waits:
first audio and stop are the software's own times, not a sound card's buffer.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
DOC = ROOT / "docs" / "bench" / "speechd.md"
VOICE = ROOT / "assets" / "voices" / "default"
MODULES = ("wavern", "espeak-ng")

CHARS = list("aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789.,?!;:-()@#")
WORDS = ["File", "Edit", "View", "Open", "Save", "Cancel", "Close", "Bookmarks", "Settings", "Search", "Reload",
         "Back", "Forward", "Home", "Downloads", "Terminal", "Desktop", "Documents", "Delete", "Rename", "Copy",
         "Paste", "Undo", "Redo", "Print", "Help", "About", "Quit", "Window", "Tab", "New", "Share", "Send", "Reply",
         "Inbox", "Archive", "Calendar", "Today", "Tomorrow", "Music"]
SENTENCES = ["Save changes before closing?", "Open file dialog.", "Three new messages.", "Battery at twenty percent.",
             "Connected to the network.", "Page loaded.", "Link, Read the documentation.",
             "Button, Cancel.", "Check box, not checked, Remember me.", "Heading level two, Installation.",
             "Menu bar, File.", "Entry, Search, type to search.", "Volume muted.", "Download complete.",
             "You have one unread message from Alex.", "Toggle button, pressed, Bold.",
             "List with five items.", "Dialog, Are you sure you want to delete this file?",
             "Tab, Settings, two of four.", "Slider, fifty percent, Brightness."]
LONG = " ".join(["The quick brown fox jumps over the lazy dog, and then it runs far away into the forest."] * 40)


def pct(xs, q):
    return float(np.percentile(np.asarray(xs, float), q)) if xs else float("nan")


def stats(xs) -> str:
    if not xs:
        return "—"
    return f"{pct(xs, 50):.1f} / {pct(xs, 90):.1f} / {max(xs):.1f}"


def recorded(rec: Path) -> list[dict]:
    path = rec / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def module_first_audio(events: list[dict], t0: float, t1: float) -> float | None:
    """wavern's own view of the message received in [t0, t1]: receive -> first audio, ms."""
    recv = next((e for e in events if e["event"] == "receive" and t0 <= e["t"] <= t1), None)
    if recv is None:
        return None
    first = next((e for e in events if e["event"] == "audio" and e["t"] >= recv["t"]), None)
    return None if first is None or first["t"] > t1 else (first["t"] - recv["t"]) * 1000.0


def run(args) -> dict:
    from wavern.app.speechd.server import LocalServer, daemon_version
    from wavern.app.speechd.ssip import SsipClient

    rng = random.Random(0)
    out: dict = {"first": {}, "module": {}, "stop": {}, "module_stop": [], "module_idle": [], "forward": [],
                 "spd_say": [],
                 "ended_first": {},
                 "version": daemon_version()}
    with tempfile.TemporaryDirectory(prefix="wavern-speechd-bench-") as tmp:
        rec = Path(tmp) / "rec"
        with LocalServer(Path(tmp) / "server", voice=str(args.voice), record=rec, espeak=True) as server, \
                SsipClient(server.socket, timeout_s=120) as c:

            def one(module: str, kind: str, item: str) -> tuple[float, float, float]:
                c.set("OUTPUT_MODULE", module)
                t0 = time.monotonic()
                msg = c.char(item) if kind == "characters" else c.speak(item)
                begin = c.wait_for(msg, ("begin",))
                end = c.wait_end(msg)
                return t0, (begin.t - t0) * 1000.0, end.t

            print("warming up both modules", file=sys.stderr)
            for module in MODULES:
                for text in ("Warm up.", "Hello there.", "Open file dialog.", "x"):
                    one(module, "words", text)
            kinds = {"characters": CHARS, "words": WORDS, "sentences": SENTENCES}
            for kind, items in kinds.items():
                picks = [items[i % len(items)] for i in range(args.n)]
                for i, item in enumerate(picks):
                    for module in (MODULES if i % 2 == 0 else MODULES[::-1]):
                        t0, first, t_end = one(module, kind, item)
                        out["first"].setdefault(module, {}).setdefault(kind, []).append(first)
                        if module == "wavern":
                            m = module_first_audio(recorded(rec), t0, t_end)
                            if m is not None:
                                out["module"].setdefault(kind, []).append(m)
                print(f"{kind}: done", file=sys.stderr)
            for i in range(args.stops):
                for module in (MODULES if i % 2 == 0 else MODULES[::-1]):
                    c.set("OUTPUT_MODULE", module)
                    msg = c.speak(LONG)
                    c.wait_for(msg, ("begin",))
                    time.sleep(rng.uniform(0.1, 0.3))
                    t_stop = c.stop()
                    end = c.wait_end(msg)
                    if end.kind != "cancelled":
                        out["ended_first"][module] = out["ended_first"].get(module, 0) + 1
                        continue
                    out["stop"].setdefault(module, []).append((end.t - t_stop) * 1000.0)
                    if module == "wavern":
                        ev = [e for e in recorded(rec) if e["t"] >= t_stop - 0.001]
                        got = next((e for e in ev if e["event"] == "stop_received"), None)
                        done = next((e for e in ev if e["event"] == "stop"), None)
                        for _ in range(100):  # the speech thread's last piece may still be running
                            idle = next((e for e in recorded(rec) if e["event"] == "idle" and e["t"] >= t_stop), None)
                            if idle:
                                break
                            time.sleep(0.01)
                        if got and done:
                            out["module_stop"].append((done["t"] - got["t"]) * 1000.0)
                            out["forward"].append((got["t"] - t_stop) * 1000.0)
                        if got and idle:
                            out["module_idle"].append((idle["t"] - got["t"]) * 1000.0)
            print("stops: done", file=sys.stderr)
            for i in range(args.n):
                word = WORDS[i % len(WORDS)]
                t0 = time.monotonic()
                subprocess.run(["spd-say", "-w", "-o", "wavern", word], env=server.env, check=True,
                               capture_output=True, timeout=60)
                m = next((e for e in recorded(rec) if e["event"] == "audio" and e["t"] >= t0), None)
                if m is not None:
                    out["spd_say"].append((m["t"] - t0) * 1000.0)
            print("spd-say: done", file=sys.stderr)
    return out


def report(r: dict, args, machine: str, command: str) -> str:
    lines = [
        "## Speech Dispatcher: wavern's module against espeak-ng's",
        "",
        f"`{command}` — {machine}; Speech Dispatcher {r['version']} (Debian), one daemon in single mode with "
        f"both modules, audio to ALSA's `null` device (played at once, so these are the software's times, "
        f"not a sound card's buffer). wavern: the shipped voice (`{Path(args.voice).name}`), audio through the "
        f"daemon's player (705 events); espeak-ng: Debian's `sd_espeak-ng`. The modules take turns message by "
        f"message. Milliseconds, p50 / p90 / max.",
        "",
        "| messages | n | wavern: SPEAK → BEGIN | espeak-ng: SPEAK → BEGIN | wavern module: received → first audio |",
        "|---|---|---|---|---|",
    ]
    for kind in ("characters", "words", "sentences"):
        w = r["first"].get("wavern", {}).get(kind, [])
        e = r["first"].get("espeak-ng", {}).get(kind, [])
        lines.append(f"| {kind} | {len(w)} | {stats(w)} | {stats(e)} | {stats(r['module'].get(kind, []))} |")
    allw = [x for k in r["first"].get("wavern", {}).values() for x in k]
    alle = [x for k in r["first"].get("espeak-ng", {}).values() for x in k]
    lines.append(f"| all | {len(allw)} | **{stats(allw)}** | {stats(alle)} | "
                 f"{stats([x for k in r['module'].values() for x in k])} |")
    lines += [
        "",
        "| stop | n | wavern: STOP → CANCELED | espeak-ng: STOP → CANCELED | wavern module: STOP received → "
        "703 sent / → synthesis stopped |",
        "|---|---|---|---|---|",
        f"| long message, 100-300 ms after BEGIN | {len(r['stop'].get('wavern', []))} | "
        f"**{stats(r['stop'].get('wavern', []))}** | {stats(r['stop'].get('espeak-ng', []))} | "
        f"{stats(r['module_stop'])} / {stats(r['module_idle'])} |",
        "",
        f"Of wavern's STOP → CANCELED, the daemon's passing STOP on to the module (client's STOP → module "
        f"received): {stats(r['forward'])} ms; the rest is the daemon's handling of 703.",
        "",
        "wavern answers STOP from its command thread: the daemon gets 703 at once and no audio of the message "
        "after it; the speech thread drops the piece it was computing (at most 2048 samples) and is then free "
        "for the next message.",
        "",
        f"`spd-say -w -o wavern WORD` (a process and a connection per message), process start → wavern's first "
        f"audio buffer: {stats(r['spd_say'])} ms over {len(r['spd_say'])} words.",
    ]
    ended = {k: v for k, v in r["ended_first"].items() if v}
    if ended:
        lines.append("")
        lines.append("Messages that ended before their STOP (not counted): "
                     + ", ".join(f"{k} {v}" for k, v in ended.items()) + ".")
    w90 = pct(allw, 90)
    s90 = pct(r["stop"].get("wavern", []), 90)
    m90 = pct(r["module_stop"], 90)
    e90 = pct(r["stop"].get("espeak-ng", []), 90)
    lines += [
        "",
        f"Goals (issue 39): first audio p90 ≤ 60 ms through the daemon — {w90:.1f} ms, "
        f"{'met' if w90 <= 60 else 'not met'}. Stop ≤ 20 ms — through the daemon p90 {s90:.1f} ms, "
        f"{'met' if s90 <= 20 else 'not met'}; the module's own part p90 {m90:.1f} ms, the rest is the daemon's "
        f"(espeak-ng's module under it: p90 {e90:.1f} ms).",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=40, help="messages of each kind per module")
    ap.add_argument("--stops", type=int, default=20, help="stops per module")
    ap.add_argument("--voice", default=str(VOICE))
    ap.add_argument("--out", default=str(DOC))
    ap.add_argument("--json", default=None, help="also write the raw numbers here")
    args = ap.parse_args(argv)
    from machine import describe

    machine = describe()
    command = "python bench/speechd.py" + "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
    r = run(args)
    r.update(machine=machine, command=command)
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1))
    text = report(r, args, machine, command)
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
