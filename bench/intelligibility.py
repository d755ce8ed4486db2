"""Intelligibility against the teacher: word error rate by an independent recogniser, every row
beside the teacher's own figure measured in the same run → docs/bench/intelligibility.md.

On held-out sentences of a teacher corpus (`wavern corpus build --source piper`), PocketSphinx
(its bundled US-English model, 16 kHz) transcribes:

- the teacher's own audio (the corpus's recording of the sentence);
- wavern end to end (text → the voice → audio), with MCD-DTW and F0 RMSE against the teacher's
  audio and the duration ratio (wavern's length / the teacher's);
- copy synthesis: the teacher's audio → log-mel → the voice's whole waveform stage, and the
  WaveRNN alone (no post-filter, no mel matching);
- optionally other voices end to end (``--compare VOICE_DIR``), e.g. the espeak-trained one.

    .venv/bin/python bench/intelligibility.py --voice assets/voices/default --corpus data/teacher --n-utts 40
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

# The bounds, as margins over the teacher's WER measured in the same run.
GOALS = {"end_to_end": 0.03, "copy_synthesis": 0.01, "wavernn_alone": 0.08}


def f0_rmse_dtw(reference: np.ndarray, test: np.ndarray) -> float:
    """F0 RMSE in Hz over the DTW path of the two signals' mel cepstra, frames voiced in both."""
    from scipy.spatial.distance import cdist

    from wavern.dsp import log_mel, pitch_track
    from wavern.training.audio_metrics import dtw_align, mel_cepstra

    path, _ = dtw_align(cdist(mel_cepstra(log_mel(reference)), mel_cepstra(log_mel(test))))
    fa, fb = pitch_track(reference)[:, 0], pitch_track(test)[:, 0]
    i, j = path[:, 0], path[:, 1]
    both = (fa[i] > 0) & (fb[j] > 0)
    return float(np.sqrt(np.mean((fa[i][both] - fb[j][both]) ** 2))) if both.any() else float("nan")


def measure(voice_dir: str, corpus_dir: str, n_utts: int, *, compare: list[str], seed: int = 0,
            int8: bool = False) -> dict:
    from eval_voice import held_out_records

    from wavern.dsp import int16_to_float
    from wavern.engine import Voice
    from wavern.training.audio_metrics import mcd_dtw
    from wavern.training.recognize import Recognizer, word_error_rate

    records = held_out_records(corpus_dir, n_utts, seed)
    refs = [r.spoken for r in records]
    teacher_audio = [int16_to_float(r.audio()) for r in records]
    rec = Recognizer()
    voice = Voice.load(voice_dir, int8=False)
    rows: dict[str, dict] = {}

    def wer_of(audios) -> tuple[float, list[str]]:
        hyps = [rec.transcribe(a, voice.sample_rate) for a in audios]
        return word_error_rate(refs, hyps), hyps

    t0 = time.perf_counter()
    rows["teacher"] = {"wer": wer_of(teacher_audio)[0]}
    voices = [("", voice)] + ([("_int8", Voice.load(voice_dir, int8=True))] if int8 else [])
    for tag, v in voices:  # the voice as it ships, then (--int8) with the int8 products on the state
        e2e = [v.synthesize(r.text, seed=seed) for r in records]
        wer, e2e_hyps = wer_of(e2e)
        if not tag:  # the examples: the voice as it ships
            hyps = e2e_hyps
        rows["end_to_end" + tag] = {
            "wer": wer,
            "mcd_dtw_db": float(np.mean([mcd_dtw(t, a) for t, a in zip(teacher_audio, e2e)])),
            "f0_rmse_hz": float(np.nanmean([f0_rmse_dtw(t, a) for t, a in zip(teacher_audio, e2e)])),
            "duration_ratio": float(sum(a.size for a in e2e) / sum(t.size for t in teacher_audio)),
        }
        rows["copy_synthesis" + tag] = {"wer": wer_of([v.vocode(t, seed=seed) for t in teacher_audio])[0]}
        rows["wavernn_alone" + tag] = {"wer": wer_of([v.vocode(t, seed=seed, postfilter=False)
                                                     for t in teacher_audio])[0]}
    for other in compare:
        v = Voice.load(other)
        audios = [v.synthesize(r.text, seed=seed) for r in records]
        rows[f"compare:{Path(other).name}"] = {
            "wer": word_error_rate(refs, [rec.transcribe(a, v.sample_rate) for a in audios]),
            "mcd_dtw_db": float(np.mean([mcd_dtw(t, a) for t, a in zip(teacher_audio, audios)])),
        }
    t = rows["teacher"]["wer"]
    for key, margin in GOALS.items():
        for k in (key, key + "_int8"):
            if k in rows:
                rows[k]["goal"] = f"<= {t + margin:.3f}"
                rows[k]["met"] = bool(rows[k]["wer"] <= t + margin + 1e-12)
    words = sum(len(r.split()) for r in refs)
    return {"rows": rows, "n_utts": len(records), "words": words, "wall_s": time.perf_counter() - t0,
            "examples": [{"text": r, "wavern": h} for r, h in list(zip(refs, hyps))[:5]]}


def write_examples(folder: Path, voice_dir: str, corpus_dir: str, n: int = 3, *, seed: int = 0) -> list[str]:
    """``teacher_K.wav`` (the corpus's audio) and ``example_K.wav`` (wavern, end to end) for the first ``n``
    held-out sentences of 4-12 words, and ``spectrogram.png`` of the first (teacher above, wavern below)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import soundfile as sf
    from eval_voice import held_out_records

    from wavern.dsp import int16_to_float, log_mel
    from wavern.engine import Voice

    voice = Voice.load(voice_dir)
    picked = [r for r in held_out_records(corpus_dir, 200, seed) if 4 <= len(r.text.split()) <= 12][:n]
    folder.mkdir(parents=True, exist_ok=True)
    for k, r in enumerate(picked, 1):
        sf.write(folder / f"teacher_{k}.wav", int16_to_float(r.audio()), voice.sample_rate, subtype="PCM_16")
        sf.write(folder / f"example_{k}.wav", voice.synthesize(r.text, seed=seed), voice.sample_rate,
                 subtype="PCM_16")
    ref = log_mel(int16_to_float(picked[0].audio()))
    ours = log_mel(sf.read(folder / "example_1.wav", dtype="float32")[0])
    fig, axes = plt.subplots(2, 1, figsize=(10, 5), sharex=True)
    for ax, (title, m) in zip(axes, (("the teacher (Piper en_US-joe-medium)", ref), ("wavern, end to end", ours))):
        ax.imshow(m.T, origin="lower", aspect="auto", cmap="magma", vmin=ref.min(), vmax=ref.max())
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("mel bin")
    axes[-1].set_xlabel("frame (11.6 ms)")
    fig.suptitle(picked[0].text, fontsize=9)
    fig.tight_layout()
    fig.savefig(folder / "spectrogram.png", dpi=60)
    plt.close(fig)
    voice.close()
    return [r.text for r in picked]


def write_doc(out: Path, result: dict, cmd: str, voice_dir: str, corpus_dir: str) -> None:
    from machine import describe

    rows = result["rows"]
    names = {"teacher": "the teacher (its own audio)", "end_to_end": "wavern end to end (text → audio)",
             "copy_synthesis": "copy synthesis: the voice's waveform stage", "wavernn_alone":
             "copy synthesis: the WaveRNN alone"}
    names |= {k + "_int8": v.replace("wavern", "wavern, int8 products,", 1) if k == "end_to_end" else v + ", int8 products"
              for k, v in list(names.items())[1:]}
    lines = [
        "# Intelligibility against the teacher",
        "",
        f"`{cmd}`",
        "",
        f"{describe()}; {time.strftime('%Y-%m-%d %H:%M')}. Voice `{voice_dir}`, corpus `{corpus_dir}`: "
        f"{result['n_utts']} held-out sentences ({result['words']} words). Recogniser: PocketSphinx 5.1.1, "
        "its bundled US-English model and language model, audio resampled to 16 kHz; WER over all words "
        "(lower case, punctuation dropped) against the spoken form of the text.",
        "",
        "| what speaks | WER | goal | met | MCD-DTW vs teacher (dB) | F0 RMSE vs teacher (Hz) | duration ratio |",
        "|---|---:|---:|:---:|---:|---:|---:|",
    ]
    for key, row in rows.items():
        label = names.get(key, f"`{key.split(':', 1)[1]}` end to end" if key.startswith("compare:") else key)

        def f(k, fmt="{:.3f}"):
            return fmt.format(row[k]) if k in row else ""

        lines.append(f"| {label} | {row['wer']:.3f} | {row.get('goal', '')} | "
                     f"{'yes' if row.get('met') else ('no' if 'met' in row else '')} | {f('mcd_dtw_db', '{:.2f}')} | "
                     f"{f('f0_rmse_hz', '{:.1f}')} | {f('duration_ratio')} |")
    lines += ["", "### Examples", "", "First sentences, as the recogniser heard wavern end to end:", ""]
    lines += [f"- {e['text']!r} → {e['wavern']!r}" for e in result["examples"]]
    if result.get("example_texts"):
        rel = Path("..") / "voice"
        lines += ["", "Listen (held-out sentences; teacher / wavern):", ""]
        lines += [f"{k}. {t!r}: [teacher]({rel / f'teacher_{k}.wav'}) / [wavern]({rel / f'example_{k}.wav'})"
                  for k, t in enumerate(result["example_texts"], 1)]
        lines += ["", f"![spectrograms, teacher above, wavern below]({rel / 'spectrogram.png'})"]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--voice", default=str(ROOT / "assets" / "voices" / "default"))
    ap.add_argument("--corpus", default=str(ROOT / "data" / "teacher"))
    ap.add_argument("--n-utts", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compare", action="append", default=[], help="another voice folder, end to end")
    ap.add_argument("--out", default=str(ROOT / "docs" / "bench" / "intelligibility.md"))
    ap.add_argument("--int8", action="store_true", help="also the voice with the int8 products on the vocoder's "
                    "state (Voice.load(int8=True)), on the same sentences")
    ap.add_argument("--examples", default=None, help="write 3 example WAVs (teacher / wavern) and a spectrogram "
                    "here, e.g. docs/voice")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    result = measure(args.voice, args.corpus, args.n_utts, compare=args.compare, seed=args.seed, int8=args.int8)
    if args.examples:
        result["example_texts"] = write_examples(Path(args.examples), args.voice, args.corpus, seed=args.seed)
    cmd = "python bench/intelligibility.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    write_doc(Path(args.out), result, cmd, args.voice, args.corpus)
    print(json.dumps(result["rows"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
