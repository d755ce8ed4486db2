"""Evaluate a whole voice on held-out corpus sentences → docs/VOICE.md (+ a history row per run).

Three views, all on sentences the training never saw (the corpus's held-out split):

- **copy synthesis**: the voice's vocoder (numba engine) from the true log-mel, against the
  true espeak audio: STOI, PESQ-WB, MCD-DTW, phone accuracy; Griffin-Lim (32 iterations) from
  the same mel as the yardstick.
- **acoustic model alone**: the predicted mel rendered with Griffin-Lim, scored by the phone
  classifier against the model's own predicted timings (so the acoustic model is judged
  without the vocoder).
- **end to end**: text → voice → audio, phone accuracy against the predicted timings, and
  MCD-DTW against espeak-ng's rendering of the same text with the same espeak voice.

    .venv/bin/python bench/eval_voice.py --voice assets/voices/espeak --n-utts 10

writes docs/bench/espeak_voice.md (docs/VOICE.md quotes it). Intelligibility by an independent
recogniser, beside the teacher, for a voice learnt from a teacher corpus (bench/intelligibility.py):

    .venv/bin/python bench/eval_voice.py --intelligibility [--voice assets/voices/default --corpus data/teacher]
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


def held_out_records(corpus_dir, n_utts: int, seed: int = 0) -> list:
    """The held-out corpus sentences every voice measurement here uses: ``n_utts`` of them drawn
    with ``seed`` from the split sorted by id, in id order."""
    from wavern.training.corpus import load_corpus

    held = sorted(load_corpus(corpus_dir).held_out, key=lambda r: r.id)
    pick = np.sort(np.random.default_rng(seed).choice(len(held), size=min(n_utts, len(held)), replace=False))
    return [held[i] for i in pick]


def voice_bench_parser(description: str, out_name: str) -> argparse.ArgumentParser:
    """The options of a bench that measures a voice on held-out sentences: ``--voice``, ``--corpus``,
    ``--n-utts`` and ``--out`` (default docs/bench/<out_name>)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--voice", default=str(ROOT / "assets" / "voices" / "espeak"))
    ap.add_argument("--corpus", default=str(ROOT / "data" / "corpus"))
    ap.add_argument("--n-utts", type=int, default=10)
    ap.add_argument("--out", default=str(ROOT / "docs" / "bench" / out_name))
    return ap


def voice_and_records(args) -> tuple:
    """The voice and the held-out sentences such a bench's ``args`` name (torch on one thread)."""
    import torch

    torch.set_num_threads(1)
    from wavern.engine import Voice

    return Voice.load(args.voice), held_out_records(args.corpus, args.n_utts)


def voiced_share(audio: np.ndarray) -> float:
    """The share of frames YIN (``wavern.dsp.pitch_track``) finds voiced in float audio."""
    from wavern.dsp import pitch_track

    return float(np.mean(pitch_track(audio)[:, 0] > 0))


def end_to_end(voice, records, *, seed: int = 0) -> dict:
    from wavern.conditioning.acoustic import stream_mel
    from wavern.dsp import griffin_lim, int16_to_float
    from wavern.training.evaluate import mcd_dtw, phone_accuracy

    hop = voice.vocoder.hop
    acc_e2e, acc_gl, mcd, secs, compute = [], [], [], 0.0, 0.0
    voiced, voiced_ref = [], []  # YIN's voiced share of frames: the voice's audio, the corpus's espeak-ng audio
    for r in records:
        speaker = r.voice if r.voice in voice.speakers else voice.default_speaker
        t = time.perf_counter()
        utt = voice.analyze(r.text, speaker=speaker)
        parts = list(stream_mel(voice.acoustic, utt.ids, utt.is_global, utt.sentence_of, speaker=speaker))
        mel = np.concatenate([p.mel for p in parts])
        durations = np.zeros(len(utt.symbols), np.int64)
        for p in parts:
            durations[p.token_start:p.token_start + len(p.durations)] = np.asarray(p.durations) * hop
        audio = int16_to_float(voice.render_mel(mel, seed=seed))  # one stream, as the real-time path
        compute += time.perf_counter() - t
        secs += audio.size / voice.sample_rate
        acc_e2e.append(phone_accuracy(audio, utt.symbols, durations))
        mel_only = mel[:, :voice.acoustic.config.n_mels]  # a pitch voice's frames end with pitch features
        acc_gl.append(phone_accuracy(griffin_lim(mel_only, n_iter=32), utt.symbols, durations))
        ref = int16_to_float(r.audio())
        mcd.append(mcd_dtw(ref, audio))
        voiced.append(voiced_share(audio))
        voiced_ref.append(voiced_share(ref))
    return {"phone_acc_end_to_end": float(np.mean(acc_e2e)), "phone_acc_acoustic_gl": float(np.mean(acc_gl)),
            "mcd_dtw_vs_espeak": float(np.mean(mcd)), "audio_seconds": secs, "rtf": compute / secs,
            "voiced_end_to_end": float(np.mean(voiced)), "voiced_espeak": float(np.mean(voiced_ref))}


_KEYS = ("stoi", "pesq_wb", "mcd_db", "phone_acc", "vde", "gpe")  # copy-synthesis metrics kept per run


def main() -> int:
    if "--intelligibility" in sys.argv[1:]:  # the word error rate against the teacher: bench/intelligibility.py
        sys.argv.remove("--intelligibility")
        sys.path.insert(0, str(ROOT / "bench"))
        import intelligibility

        return intelligibility.main()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--voice", default=str(ROOT / "assets" / "voices" / "espeak"))
    ap.add_argument("--corpus", default=str(ROOT / "data" / "corpus"))
    ap.add_argument("--n-utts", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "docs" / "bench" / "espeak_voice.md"))
    ap.add_argument("--history", default=str(ROOT / "docs" / "voice_history.jsonl"))
    ap.add_argument("--examples", default=str(ROOT / "docs" / "voice" / "espeak"),
                    help="folder for the 3 example WAVs, the spectrogram and the curve PNGs ('' to skip: "
                         "the doc then links none of them)")
    ap.add_argument("--keep-examples", action="store_true",
                    help="keep the example WAVs and the spectrogram already in --examples (they were made by an "
                         "earlier run: a run that only measures adds no audio to git) and redraw the curve only")
    ap.add_argument("--metrics", default=str(ROOT / "runs" / "vocoder" / "metrics.jsonl"),
                    help="the vocoder run's metrics JSONL: its held-out loss joins the curve when it exists")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from wavern.dsp import int16_to_float
    from wavern.engine.voice import Voice
    from wavern.training.evaluate import evaluate_copy_synthesis, evaluate_griffin_lim

    voice = Voice.load(args.voice)
    t0 = time.time()
    pitch = voice.acoustic.config.pitch  # a pitch voice copies the true audio's pitch features too
    copy = evaluate_copy_synthesis(  # what a user hears: the vocoder, post-filter and mel matching, if any
        lambda mel: int16_to_float(voice.render_mel(mel, seed=args.seed, measured=True)), args.corpus, args.n_utts, args.seed,
        pitch=pitch)
    raw = pf_only = None
    if voice.postfilter is not None or voice.melmatch is not None:  # the vocoder alone, as rows from before
        raw = evaluate_copy_synthesis(
            lambda mel: int16_to_float(voice.vocoder.render(mel, seed=args.seed, fold_frames=None)),
            args.corpus, args.n_utts, args.seed, pitch=pitch)
    if voice.postfilter is not None and voice.melmatch is not None:  # ... and with the post-filter alone
        pf = voice.postfilter
        pf_only = evaluate_copy_synthesis(
            lambda mel: int16_to_float(pf.apply(voice.vocoder.render(mel, seed=args.seed, fold_frames=None),
                                                pf.coefficients(mel), pf.new_state())),
            args.corpus, args.n_utts, args.seed, pitch=pitch)
    gl = evaluate_griffin_lim(args.corpus, args.n_utts, args.seed)
    records = held_out_records(args.corpus, args.n_utts, args.seed)
    e2e = end_to_end(voice, records, seed=args.seed)
    prov = voice.meta.get("provenance", {})
    row = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "acoustic_step": prov.get("acoustic", {}).get("step"), "vocoder_step": prov.get("vocoder", {}).get("step"),
           "vocoder_density": voice.vocoder.nnz_weights and
           round(sum(voice.vocoder.nnz_weights.values()) /
                 (3 * voice.vocoder.hidden_size ** 2 + 2 * (voice.vocoder.hidden_size // 2) ** 2
                  + 2 * 256 * voice.vocoder.hidden_size // 2), 3),
           "vocoder_lpc_order": voice.vocoder.lpc_order,  # 0: the net makes the samples; P: an LPC excitation
           "postfilter": voice.postfilter.config.to_dict() if voice.postfilter is not None else None,
           "melmatch": voice.melmatch.config.to_dict() if voice.melmatch is not None else None,
           "melmatch_measured": (voice.melmatch_measured.config.to_dict()  # copy synthesis's (a measured mel)
                                 if voice.melmatch_measured is not None else None),
           "ltp_gain_scale": voice.ltp_gain_scale,  # long-term gains x this where mel matched (Voice.ltp_scale_for)
           "vocoder_excitation": voice.vocoder.excitation,  # with LPC: "linear" or "mulaw" coded
           "vocoder_ltp": voice.vocoder.ltp,  # a long-term (pitch) predictor in the synthesis filter
           "vocoder_period_taps": voice.vocoder.ltp_input_taps,  # residuals around t - T the GRU reads (0: none)
           "vocoder_phase_harmonics": voice.vocoder.phase_input,  # sin / cos k phi of the glottal phase (0: none)
           "acoustic_prosody": voice.acoustic.config.prosody,  # reads espeak's rate / pitch / range
           "copy": {k: copy[k] for k in _KEYS},
           **({"copy_vocoder_only": {k: raw[k] for k in _KEYS}} if raw else {}),
           **({"copy_postfilter_only": {k: pf_only[k] for k in _KEYS}} if pf_only else {}),
           "griffin_lim": {k: gl[k] for k in _KEYS},
           "end_to_end": e2e, "n_utts": args.n_utts, "eval_wall_s": round(time.time() - t0, 1)}
    hist = Path(args.history)
    with hist.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    rows = [json.loads(line) for line in hist.read_text().splitlines() if line.strip()]
    cmd = "python bench/eval_voice.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    examples = None
    if args.examples:
        examples = write_examples(Path(args.examples), voice, records, rows,
                                  Path(args.metrics), seed=args.seed, remake=not args.keep_examples)
    write_doc(Path(args.out), row, rows, cmd, voice, examples)
    print(json.dumps(row, indent=1))
    return 0


def _rel(p: Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(ROOT))
    except ValueError:
        return str(p)


def write_examples(folder: Path, voice, records, rows: list[dict], metrics: Path, *, seed: int = 0,
                   remake: bool = True) -> dict:
    """Three end-to-end example WAVs (the shortest of the evaluated held-out sentences), one
    spectrogram PNG (espeak-ng / copy synthesis / end to end for the first example) and the curve
    of the history rows (and the run's held-out loss) against vocoder steps.

    ``remake=False`` keeps the WAVs and the spectrogram where all four exist (the texts are the
    same three sentences: the shortest of ``records``) and draws the curve only."""
    folder.mkdir(parents=True, exist_ok=True)
    picked = sorted(records, key=lambda r: len(r.text))[:3]
    texts = [r.text for r in picked]
    made = [folder / f"example_{k}.wav" for k in range(1, len(picked) + 1)] + [folder / "spectrogram.png"]
    if remake or not all(f.exists() for f in made):
        if not remake:
            print(f"[eval] {folder} lacks an example or its spectrogram: all are made again", flush=True)
        _write_audio_examples(folder, voice, picked, seed)
    _write_curve(folder, rows, metrics)
    return {"folder": folder, "texts": texts}


def _write_audio_examples(folder: Path, voice, picked, seed: int) -> None:
    """write_examples' WAVs of ``picked`` and the spectrogram of the first."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import soundfile as sf

    from wavern.dsp import copy_features, int16_to_float, log_mel

    for k, r in enumerate(picked, 1):
        audio = voice.synthesize(r.text, seed=seed)
        sf.write(folder / f"example_{k}.wav", audio, voice.sample_rate, subtype="PCM_16")
    first = picked[0]
    ref = int16_to_float(first.audio())
    mel = log_mel(ref)
    # a pitch voice copies the true audio's pitch too
    copy = int16_to_float(voice.render_mel(copy_features(ref, pitch=voice.acoustic.config.pitch), seed=seed,
                                            measured=True))
    e2e = sf.read(folder / "example_1.wav", dtype="float32")[0]
    fig, axes = plt.subplots(3, 1, figsize=(10, 7), sharex=True)
    for ax, (title, m) in zip(axes, (("espeak-ng (the training audio)", mel),
                                     ("vocoder copy synthesis (true mel → the voice as shipped)", log_mel(copy)),
                                     ("end to end (text → wavern)", log_mel(e2e)))):
        ax.imshow(m.T, origin="lower", aspect="auto", cmap="magma", vmin=mel.min(), vmax=mel.max())
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("mel bin")
    axes[-1].set_xlabel("frame (11.6 ms)")
    fig.suptitle(first.text, fontsize=9)
    fig.tight_layout()
    fig.savefig(folder / "spectrogram.png", dpi=60)
    plt.close(fig)


def _write_curve(folder: Path, rows: list[dict], metrics: Path) -> None:
    """write_examples' curve.png: the history rows, and the run's held-out loss from ``metrics``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not metrics.exists() and (folder / "curve.png").exists():  # its loss panel needs the run's metrics
        print(f"[eval] {metrics} not found: {folder / 'curve.png'} kept as it is", flush=True)
        return
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6))
    for order in sorted({r.get("vocoder_lpc_order", 0) for r in rows}):  # one set of curves per vocoder run kind
        run = [r for r in rows if r.get("vocoder_lpc_order", 0) == order]
        tag = f" LPC {order}" if order else ""
        steps = [r["vocoder_step"] for r in run]
        for key, label in (("phone_acc", "copy phone acc"), ("stoi", "copy STOI")):
            a1.plot(steps, [r.get("copy_vocoder_only", r["copy"])[key] for r in run], "o-",
                    label=label + tag + " (vocoder)")
            pf = [(r["vocoder_step"], r.get("copy_postfilter_only", r["copy"])[key]) for r in run
                  if r.get("postfilter")]
            if pf:
                a1.plot(*zip(*pf), "^", label=label + tag + " (+ post-filter)")
            mm = [(r["vocoder_step"], r["copy"][key]) for r in run if r.get("melmatch")]
            if mm:
                a1.plot(*zip(*mm), "*", ms=10, label=label + tag + " (+ mel matching)")
        a1.plot(steps, [r["end_to_end"]["phone_acc_end_to_end"] for r in run], "s-", label="end-to-end phone acc" + tag)
    a1.axhline(0.93, ls=":", c="gray")
    a1.set_xlabel("vocoder step")
    a1.set_ylim(0, 1)
    a1.legend(fontsize=8)
    a1.set_title("held-out sentences (docs/voice_history.jsonl)", fontsize=9)
    if metrics.exists():
        ev = [json.loads(line) for line in metrics.read_text().splitlines() if '"eval"' in line]
        ev = [e for e in ev if e.get("kind") == "eval"]
        a2.plot([e["step"] for e in ev], [e["eval_coarse"] for e in ev], label="coarse CE")
        a2.plot([e["step"] for e in ev], [e["eval_fine"] for e in ev], label="fine CE")
        a2.set_xlabel("vocoder step")
        a2.set_ylabel("nats")
        a2.legend(fontsize=8)
        a2.set_title("held-out teacher-forced loss (trainer)", fontsize=9)
    else:
        a2.set_axis_off()
    fig.tight_layout()
    fig.savefig(folder / "curve.png", dpi=80)
    plt.close(fig)


def kept_section(doc: Path, heading: str) -> list[str]:
    """The lines of ``doc``'s section under ``heading`` (up to the next ``## ``), with a blank line
    before: a section written by hand (the speed figures come from other benchmarks) that a rerun keeps."""
    if not doc.exists():
        return []
    lines = doc.read_text(encoding="utf-8").splitlines()
    if heading not in lines:
        return []
    start = lines.index(heading)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    body = lines[start:end]
    while body and not body[-1].strip():
        body.pop()
    return ["", *body]


def melmatch_label(d: dict) -> str:
    """A mel-matching settings dict as '8 × (cap 4, floor 0.001[, smooth 1.5])'."""
    return (f"{d.get('iterations', 1)} × (cap {d['cap']:g}, floor {d['floor']:g}"
            + (f", smooth {d['smooth']:g}" if d.get("smooth") else "") + ")")


def _pitch(m: dict) -> str:
    """The VDE and GPE cells of a metrics dict (empty for rows measured before they existed)."""
    return f"{m['vde']:.3f} | {m['gpe']:.3f}" if "vde" in m else " | "


def goal_lines(row: dict) -> list[str]:
    """The goals against this run's numbers: what a user hears (the whole waveform stage) and,
    where the voice post-processes, the WaveRNN alone, each ``met`` or ``not met``."""
    c, g, e, r0 = row["copy"], row["griffin_lim"], row["end_to_end"], row.get("copy_vocoder_only")
    goals = [("copy synthesis PESQ-WB above Griffin-Lim's", "pesq_wb", lambda v: v > g["pesq_wb"], "{:.2f}"),
             ("copy synthesis STOI ≥ 0.95", "stoi", lambda v: v >= 0.95, "{:.3f}"),
             ("copy synthesis phone accuracy ≥ 0.93", "phone_acc", lambda v: v >= 0.93, "{:.3f}")]
    verdict = lambda ok: "met" if ok else "**not met**"  # noqa: E731
    lines = ["", "| goal | the voice's waveform stage (what is heard) | the WaveRNN alone |", "|---|---|---|"]
    for label, key, ok, fmt in goals:
        alone = f"{fmt.format(r0[key])}: {verdict(ok(r0[key]))}" if r0 else ""
        lines.append(f"| {label} | {fmt.format(c[key])}: {verdict(ok(c[key]))} | {alone} |")
    pa = e["phone_acc_end_to_end"]
    lines.append(f"| end to end phone accuracy ≥ 0.85 | {pa:.3f}: {verdict(pa >= 0.85)} | |")
    return lines


def write_doc(out: Path, row: dict, rows: list[dict], cmd: str, voice, examples: dict | None = None) -> None:
    from wavern.dsp import LTP_GAIN_MAX

    c, g, e = row["copy"], row["griffin_lim"], row["end_to_end"]
    lines = [
        "# The default voice: measured quality",
        "",
        f"Voice `{voice.name}` ({_rel(voice.path)}), acoustic model at step {row['acoustic_step']}, vocoder at step "
        f"{row['vocoder_step']} (block density of the recurrent and output matrices {row['vocoder_density']}"
        + (f"; it models the excitation of an order-{row['vocoder_lpc_order']} linear predictor from the mel"
           + (" and of a long-term (pitch) predictor" if row.get("vocoder_ltp") else "")
           + (f", reading the {row['vocoder_period_taps']} residuals around one pitch period back"
              if row.get("vocoder_period_taps") else "")
           + (f" and the first {row['vocoder_phase_harmonics']} harmonics of the glottal phase"
              if row.get("vocoder_phase_harmonics") else "") + ", docs/ARCHITECTURE.md" if row.get("vocoder_lpc_order")
           else "") + ")"
        + ("; the acoustic model reads espeak's rate, pitch and range (their defaults unless a request sets pitch or pitch range)"
           if row.get("acoustic_prosody") else "") + ". "
        f"Measured {row['date']} on {row['n_utts']} held-out corpus sentences with `.venv/bin/{cmd}`.",
        "",
        "| | STOI | PESQ-WB | MCD-DTW dB | phone accuracy | voicing error | gross pitch error |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| vocoder copy synthesis (true mel → WaveRNN{' → post-filter' if row.get('postfilter') else ''}"
        f"{' → mel matching' if row.get('melmatch') else ''}) | "
        f"{c['stoi']:.3f} | {c['pesq_wb']:.2f} | {c['mcd_db']:.2f} | {c['phone_acc']:.3f} | {_pitch(c)} |",
        *([f"| the same without mel matching (WaveRNN → post-filter) | {r1['stoi']:.3f} | {r1['pesq_wb']:.2f} | "
           f"{r1['mcd_db']:.2f} | {r1['phone_acc']:.3f} | {_pitch(r1)} |"]
          if (r1 := row.get("copy_postfilter_only")) else []),
        *([f"| the same without post-processing (WaveRNN alone) | {r0['stoi']:.3f} | {r0['pesq_wb']:.2f} | "
           f"{r0['mcd_db']:.2f} | {r0['phone_acc']:.3f} | {_pitch(r0)} |"] if (r0 := row.get("copy_vocoder_only"))
          else []),
        f"| Griffin-Lim, 32 iterations (yardstick) | {g['stoi']:.3f} | {g['pesq_wb']:.2f} | {g['mcd_db']:.2f} | "
        f"{g['phone_acc']:.3f} | {_pitch(g)} |",
        f"| acoustic model alone (predicted mel → Griffin-Lim) | | | | {e['phone_acc_acoustic_gl']:.3f} | | |",
        f"| end to end (text → voice) | | | {e['mcd_dtw_vs_espeak']:.2f} (vs espeak-ng) | "
        f"{e['phone_acc_end_to_end']:.3f} | | |",
        *(["", f"Voiced share of frames (YIN), end to end: {e['voiced_end_to_end']:.2f}; espeak-ng's audio of the "
           f"same sentences: {e['voiced_espeak']:.2f} (the low, male voices lose the most: docs/BENCHMARKS.md, speakers)."]
          if "voiced_end_to_end" in e else []),
        "",
        "Goals (issue: default voice): copy synthesis PESQ-WB above Griffin-Lim's, STOI ≥ 0.95, phone accuracy "
        "≥ 0.93; end to end phone accuracy ≥ 0.85. Phone accuracy is the frame accuracy of the project's phone "
        "classifier (`assets/eval/`, 0.957 on true espeak audio, 0.06 on noise) against the espeak timings "
        "(copy synthesis) or the model's predicted timings (acoustic, end to end). MCD-DTW of noise-like audio "
        "is about 6.4 dB whatever it is, so it cannot rank very bad vocoders. Voicing error (VDE) and gross "
        "pitch error (GPE, > 20 % off where both are voiced) compare YIN pitch tracks (`wavern.dsp.pitch_track`) "
        "of the true and the copied audio: lower is better.",
        *goal_lines(row),
        *(["", "Post-filter: the engine's formant post-filter (`engine/postfilter.py`, γ {gamma_num} / {gamma_den}, "
            "tilt {tilt}, order {order}) is part of the voice (`voice.json`, `inference.postfilter`), so copy "
            "synthesis and end to end include it; the row without it measures the WaveRNN alone."
            .format(**row["postfilter"])
            + (" Its pitch stage comes first (pitch_gain {pitch_gain}): (x[n] + w x[n − T]) / (1 + w), T = sr / f0 "
               "and w = {pitch_gain} × periodicity from the frame's pitch features (the true audio's in copy "
               "synthesis, the acoustic model's end to end), a speech codec's long-term post-filter."
               .format(**row["postfilter"]) if row["postfilter"].get("pitch_gain") else "")]
          if row.get("postfilter") else []),
        *(["", "Mel matching (`engine/melmatch.py`, {iterations} × (cap {cap}, floor {floor}), `inference.melmatch`) "
            "comes after it: the output is analysed with the features' own STFT and each frame's mel band magnitudes "
            "are scaled to the conditioning mel's (gains clipped to [floor, cap]), then overlap-added back; "
            "{iterations} such passes in a row are {iterations} Griffin-Lim iterations started from the WaveRNN's "
            "audio instead of a random phase. It is signal processing, not the network: the rows without it show "
            "what the WaveRNN itself makes. It delays the stream by n_fft − hop samples a pass."
            .format(**{"iterations": 1, **row["melmatch"]})
            + (f" End to end (the acoustic model's mel, smoother across the bands than speech) the logs of a "
               f"frame's band gains are first averaged over {row['melmatch']['smooth']:g} bands (`smooth`), so the "
               "band envelope moves and the WaveRNN's harmonics stay; copy synthesis (a measured mel, "
               f"`inference.melmatch_measured`: {melmatch_label(row.get('melmatch_measured') or row['melmatch'])}) "
               "matches band by band." if row["melmatch"].get("smooth") else "")
            + (f" With mel matching the vocoder samples with its long-term predictor's gains × "
               f"{row['ltp_gain_scale']:g} (`inference.ltp_gain_scale`, capped at {LTP_GAIN_MAX:g}): the pitch loop of the "
               "synthesis filter keeps more of the period, so the voice stays voiced, and mel matching puts back "
               "the spectral envelope that costs; the rows without mel matching sample as the net was trained (× 1)."
               if row.get("ltp_gain_scale", 1.0) != 1.0 else "")] if row.get("melmatch") else []),
        *kept_section(out, "## Speed"),
    ]
    if examples:
        rel = _rel(examples["folder"])
        base = Path(rel).relative_to("docs") if rel.startswith("docs/") else Path(rel)
        lines += ["", "## Listen", "",
                  "End to end, text → this voice, held-out sentences (the same run as the table above):", ""]
        lines += [f"- [{base}/example_{k}.wav]({base}/example_{k}.wav): “{t}”"
                  for k, t in enumerate(examples["texts"], 1)]
        lines += ["", f"![spectrograms: espeak-ng, copy synthesis, end to end]({base}/spectrogram.png)", "",
                  f"Every run's row is in docs/voice_history.jsonl; their curve: [{base}/curve.png]({base}/curve.png)."]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
