"""What the pitch controls do to the default voice: f0 of its speech at several ``SpeakConfig``
pitch / pitch-range settings, next to espeak-ng's own rendering of the same text at the same settings.

    python bench/pitch_control.py [--voice DIR] [--n-utts 10] [--out docs/bench/pitch_control.md]

For each setting, held-out corpus sentences (the ones docs/VOICE.md uses: seed 0) are rendered by the
voice (``render_utterance``, sampling seed 0) and by espeak-ng (``frontend.render`` with the voice's
espeak voice), and tracked with YIN (``wavern.dsp.pitch_track``). Per sentence: the median f0 of the
voiced frames, and the spread (standard deviation of the voiced frames' f0 in semitones); the table
gives their means over the sentences. The prosody input only moves what the acoustic model predicts;
what the listener hears also goes through the vocoder, so both the model's own pitch channel (for a
pitch voice) and the audio are reported.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

SETTINGS = [(50, 50), (30, 50), (40, 50), (60, 50), (70, 50), (50, 20), (50, 90)]  # (pitch, pitch range)


def _f0_stats(audio: np.ndarray) -> tuple[float, float]:
    from wavern.dsp import pitch_track

    f0 = pitch_track(audio)[:, 0]
    v = f0[f0 > 0]
    if v.size < 3:
        return float("nan"), float("nan")
    return float(np.median(v)), float(np.std(12 * np.log2(v)))


def measure(voice, records, settings=SETTINGS, seed: int = 0) -> list[dict]:
    from wavern.conditioning.frontend import render
    from wavern.dsp import int16_to_float
    from wavern.engine import SpeakConfig
    from wavern.engine.batch import render_utterance

    rows = []
    for pitch, prange in settings:
        ours, ref = [], []
        for r in records:
            out = render_utterance(voice, r.text, SpeakConfig(pitch=pitch, pitch_range=prange), seed=seed,
                                   fold_frames=None)
            ours.append(_f0_stats(int16_to_float(out.samples)))
            es = render(r.text, voice=voice.espeak_voice_for(voice.default_speaker), pitch=pitch, pitch_range=prange)
            ref.append(_f0_stats(int16_to_float(es.audio)))
        ours_a, ref_a = np.array(ours), np.array(ref)
        rows.append({"pitch": pitch, "pitch_range": prange,
                     "voice_median_f0_hz": float(np.nanmean(ours_a[:, 0])),
                     "voice_spread_semitones": float(np.nanmean(ours_a[:, 1])),
                     "espeak_median_f0_hz": float(np.nanmean(ref_a[:, 0])),
                     "espeak_spread_semitones": float(np.nanmean(ref_a[:, 1]))})
        print(json.dumps(rows[-1]), file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--voice", default=str(ROOT / "assets" / "voices" / "default"))
    ap.add_argument("--corpus", default=str(ROOT / "data" / "corpus"))
    ap.add_argument("--n-utts", type=int, default=10)
    ap.add_argument("--out", default=str(ROOT / "docs" / "bench" / "pitch_control.md"))
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from wavern.engine import Voice
    from wavern.training.corpus import load_corpus

    voice = Voice.load(args.voice)
    if not voice.has_prosody:
        raise SystemExit(f"{args.voice}: this voice's acoustic model has no prosody input")
    held = sorted(load_corpus(args.corpus).held_out, key=lambda r: r.id)
    pick = np.sort(np.random.default_rng(0).choice(len(held), size=min(args.n_utts, len(held)), replace=False))
    t0 = time.time()
    rows = measure(voice, [held[i] for i in pick])
    cmd = "python bench/pitch_control.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    prov = voice.meta.get("provenance", {})
    lines = [
        "# Pitch controls of the default voice", "",
        f"Measured {time.strftime('%Y-%m-%d', time.gmtime())} with `{cmd.strip()}` "
        f"({len(pick)} held-out sentences, {time.time() - t0:.0f} s; acoustic step "
        f"{prov.get('acoustic', {}).get('step')}, vocoder step {prov.get('vocoder', {}).get('step')}).", "",
        "`SpeakConfig(pitch=P, pitch_range=R)` (CLI `--pitch`, `--pitch-range`; the window's pitch and "
        "intonation sliders) sets the acoustic model's prosody input, in espeak-ng's units. Mean over the "
        "sentences of each one's median f0 of voiced frames (YIN) and of its f0 spread (standard deviation, "
        "semitones); espeak-ng's rendering of the same text at the same settings is the target.", "",
        "| pitch | range | voice median f0 (Hz) | espeak-ng median f0 (Hz) | voice spread (st) | espeak-ng spread (st) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['pitch']} | {r['pitch_range']} | {r['voice_median_f0_hz']:.1f} | "
                     f"{r['espeak_median_f0_hz']:.1f} | {r['voice_spread_semitones']:.2f} | "
                     f"{r['espeak_spread_semitones']:.2f} |")
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    Path(args.out).with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
