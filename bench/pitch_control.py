"""What the pitch controls do to the default voice: f0 of its speech at several ``SpeakConfig``
pitch / pitch-range settings, next to espeak-ng's own rendering of the same text at the same settings.

    python bench/pitch_control.py [--voice DIR] [--n-utts 10] [--out docs/bench/pitch_control.md]

For each setting, held-out corpus sentences (the ones docs/VOICE.md uses: seed 0) are said by the
voice's default speaker (``render_utterance``, sampling seed 0) and by espeak-ng with that speaker's
voice at the same settings. Per sentence: the median f0 of the voiced frames and the spread (standard
deviation of their f0 in semitones), from the acoustic model's own pitch channels (a pitch voice) and
from YIN on espeak-ng's audio (``wavern.dsp.pitch_track``); the voiced share of the audio's frames of
both. The table gives means over the sentences.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np


SETTINGS = [(50, 50), (30, 50), (40, 50), (60, 50), (70, 50), (50, 20), (50, 90)]  # (pitch, pitch range)


def _f0_stats(f0: np.ndarray) -> tuple[float, float]:
    """Median (Hz) and spread (standard deviation in semitones) of the voiced frames' f0."""
    v = f0[f0 > 0]
    if v.size < 3:
        return float("nan"), float("nan")
    return float(np.median(v)), float(np.std(12 * np.log2(v)))


def measure(voice, records, settings=SETTINGS, seed: int = 0) -> list[dict]:
    from wavern.conditioning.acoustic import stream_mel
    from wavern.conditioning.frontend import render
    from eval_voice import voiced_share

    from wavern.dsp import PITCH_REFERENCE_HZ, int16_to_float, pitch_track
    from wavern.engine import SpeakConfig
    from wavern.engine.batch import render_utterance

    speaker = voice.default_speaker
    pitch_voice = voice.acoustic.config.pitch
    rows = []
    for pitch, prange in settings:
        model, ref, voiced, ref_voiced = [], [], [], []
        for r in records:
            if pitch_voice:  # the model's own pitch channels: log2(f0 / 120 Hz), periodicity
                utt = voice.analyze(r.text, speaker=speaker)
                mel = np.concatenate([p.mel for p in stream_mel(voice.acoustic, utt.ids, utt.is_global,
                                                                utt.sentence_of, speaker=speaker,
                                                                prosody=(175, pitch, prange))])
                f0 = np.where(mel[:, -1] > 0.5, PITCH_REFERENCE_HZ * np.exp2(mel[:, -2]), 0.0)
                model.append(_f0_stats(f0))
            out = render_utterance(voice, r.text, SpeakConfig(pitch=pitch, pitch_range=prange, speaker=speaker),
                                   seed=seed, fold_frames=None)
            voiced.append(voiced_share(int16_to_float(out.samples)))
            es = pitch_track(int16_to_float(render(r.text, voice=speaker, pitch=pitch, pitch_range=prange).audio))
            ref.append(_f0_stats(es[:, 0]))
            ref_voiced.append(float(np.mean(es[:, 0] > 0)))
        model_a = np.array(model) if model else np.full((1, 2), np.nan)
        ref_a = np.array(ref)
        rows.append({"pitch": pitch, "pitch_range": prange,
                     "model_median_f0_hz": float(np.nanmean(model_a[:, 0])),
                     "model_spread_semitones": float(np.nanmean(model_a[:, 1])),
                     "espeak_median_f0_hz": float(np.nanmean(ref_a[:, 0])),
                     "espeak_spread_semitones": float(np.nanmean(ref_a[:, 1])),
                     "audio_voiced": float(np.mean(voiced)), "espeak_voiced": float(np.mean(ref_voiced))})
        print(json.dumps(rows[-1]), file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    from eval_voice import voice_and_records, voice_bench_parser

    args = voice_bench_parser(__doc__.splitlines()[0], "pitch_control.md").parse_args(argv)
    voice, records = voice_and_records(args)
    if not voice.has_prosody:
        raise SystemExit(f"{args.voice}: this voice's acoustic model has no prosody input")
    t0 = time.time()
    rows = measure(voice, records)
    cmd = ".venv/bin/python bench/pitch_control.py " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    prov = voice.meta.get("provenance", {})
    lines = [
        "# Pitch controls of the default voice", "",
        f"Measured {time.strftime('%Y-%m-%d', time.gmtime())} with `{cmd.strip()}` "
        f"({len(records)} held-out sentences, {time.time() - t0:.0f} s; acoustic step "
        f"{prov.get('acoustic', {}).get('step')}, vocoder step {prov.get('vocoder', {}).get('step')}).", "",
        "`SpeakConfig(pitch=P, pitch_range=R)` (CLI `--pitch`, `--pitch-range`; the window's pitch and "
        "intonation sliders) sets the acoustic model's prosody input, in espeak-ng's units. The voice's default "
        f"speaker ({voice.default_speaker}) says each sentence; espeak-ng's rendering of the same text with that "
        "voice at the same settings is the target. Model: the acoustic model's predicted pitch channels (frames "
        "with periodicity > 0.5); espeak-ng: YIN on its audio. Mean over the sentences of each one's median f0 "
        "and f0 spread (standard deviation, semitones). Voiced: the share of frames YIN finds voiced in the "
        "voice's audio (vocoder and post-filter) and in espeak-ng's.", "",
        "| pitch | range | model median f0 (Hz) | espeak-ng median f0 (Hz) | model spread (st) | "
        "espeak-ng spread (st) | audio voiced | espeak-ng voiced |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['pitch']} | {r['pitch_range']} | {r['model_median_f0_hz']:.1f} | "
                     f"{r['espeak_median_f0_hz']:.1f} | {r['model_spread_semitones']:.2f} | "
                     f"{r['espeak_spread_semitones']:.2f} | {r['audio_voiced']:.2f} | {r['espeak_voiced']:.2f} |")
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    Path(args.out).with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
