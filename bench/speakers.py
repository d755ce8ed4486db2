"""Which of a multi-speaker voice's speakers sounds best: end-to-end quality per speaker.

    python bench/speakers.py [--voice DIR] [--n-utts 10] [--speakers en-us+f5,en-us+m1,...]
                             [--out docs/bench/speakers.md]

Every listed speaker (default: all of the voice's) says the same held-out corpus sentences (the
ones docs/VOICE.md uses: seed 0) through the acoustic model and the vocoder (``render_mel`` on the
streamed mel, sampling seed 0, the voice's post-filter), and espeak-ng renders them with that
speaker's espeak voice at its default settings. Per speaker: the phone classifier's frame accuracy
on the voice's audio (against the acoustic model's own durations, as eval_voice's end to end),
MCD-DTW against espeak-ng, and the voiced share of frames (YIN) of both: a speaker whose audio is
much less voiced than espeak-ng's whispers. The voice's default speaker (``voice.json``
``inference.speaker``) is chosen from this table.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np


def measure(voice, texts: list[str], speakers: list[str], seed: int = 0) -> list[dict]:
    from wavern.conditioning.acoustic import stream_mel
    from wavern.conditioning.frontend import render
    from eval_voice import voiced_share

    from wavern.dsp import int16_to_float
    from wavern.training.evaluate import mcd_dtw, phone_accuracy

    hop = voice.vocoder.hop
    rows = []
    for spk in speakers:
        acc, mcd, voiced, es_voiced = [], [], [], []
        for text in texts:
            utt = voice.analyze(text, speaker=spk)
            parts = list(stream_mel(voice.acoustic, utt.ids, utt.is_global, utt.sentence_of, speaker=spk))
            mel = np.concatenate([p.mel for p in parts])
            durations = np.zeros(len(utt.symbols), np.int64)
            for p in parts:
                durations[p.token_start:p.token_start + len(p.durations)] = np.asarray(p.durations) * hop
            audio = int16_to_float(voice.render_mel(mel, seed=seed))
            ref = int16_to_float(render(text, voice=spk).audio)
            acc.append(phone_accuracy(audio, utt.symbols, durations))
            mcd.append(mcd_dtw(ref, audio))
            voiced.append(voiced_share(audio))
            es_voiced.append(voiced_share(ref))
        rows.append({"speaker": spk, "phone_acc": float(np.mean(acc)), "mcd_vs_espeak": float(np.mean(mcd)),
                     "voiced": float(np.mean(voiced)), "espeak_voiced": float(np.mean(es_voiced))})
        print(json.dumps(rows[-1]), file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    from eval_voice import voice_and_records, voice_bench_parser

    ap = voice_bench_parser(__doc__.splitlines()[0], "speakers.md")
    ap.add_argument("--speakers", default=None, help="comma-separated (default: every speaker of the voice)")
    args = ap.parse_args(argv)
    voice, records = voice_and_records(args)
    speakers = args.speakers.split(",") if args.speakers else list(voice.speakers)
    t0 = time.time()
    rows = measure(voice, [r.text for r in records], speakers)
    rows.sort(key=lambda r: -r["phone_acc"])
    cmd = ".venv/bin/python bench/speakers.py " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    prov = voice.meta.get("provenance", {})
    lines = [
        "## Speakers of the default voice, end to end", "",
        f"`{cmd.strip()}` — {time.strftime('%Y-%m-%d', time.gmtime())}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores; {len(records)} held-out sentences ({time.time() - t0:.0f} s); acoustic step "
        f"{prov.get('acoustic', {}).get('step')}, vocoder step {prov.get('vocoder', {}).get('step')}; the voice's "
        f"default speaker {voice.default_speaker}.", "",
        "Each speaker says the same sentences: phone accuracy of the phone classifier, MCD-DTW (dB) against "
        "espeak-ng's rendering with that speaker's voice, and the voiced share of frames (YIN) of the voice's audio "
        "and of espeak-ng's. The best five, the default, and the worst three of the "
        f"{len(rows)} (all in `{Path(args.out).with_suffix('.json').name}`):", "",
        "| speaker | phone acc | MCD vs espeak-ng | voiced | espeak-ng voiced |",
        "|---|---:|---:|---:|---:|",
    ]

    def row(r: dict) -> str:
        return (f"| {r['speaker']} | {r['phone_acc']:.3f} | {r['mcd_vs_espeak']:.2f} | {r['voiced']:.2f} | "
                f"{r['espeak_voiced']:.2f} |")

    middle = [r for r in rows[5:-3] if r["speaker"] == voice.default_speaker]  # the default, if not listed already
    shown = rows if len(rows) <= 9 else rows[:5] + [None] + middle + [None] * bool(middle) + rows[-3:]
    lines += [row(r) if r is not None else "| … | | | | |" for r in shown]
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    Path(args.out).with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
