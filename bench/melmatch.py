"""Mel matching and the post-filter's pitch stage on the shipped voice: quality with and without
them, their settings, what mel matching does in the pauses, and what it costs -> docs/bench/melmatch.md.

    .venv/bin/python bench/melmatch.py            # all settings on one draw, none / shipped on a second
    .venv/bin/python bench/melmatch.py --quick    # first draw, seed 0 only
    .venv/bin/python bench/melmatch.py --reuse    # the quality rows from docs/bench/melmatch.json, the rest anew
    .venv/bin/python bench/melmatch.py --cost-only  # only the cost, put into the page as it is

Every row is the espeak voice (assets/voices/espeak) with only its mel matching (``voice.melmatch``,
``voice.melmatch_measured``) or its post-filter's ``pitch_gain`` changed, measured
as ``bench/compare_vocoders.py`` measures (copy synthesis of held-out sentences from their true
features, end to end from text; means over the sampling seeds).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

SETTINGS = ({"off": True}, {"cap": 4.0, "floor": 1e-3, "iterations": 1}, {"cap": 2.0, "floor": 1e-3, "iterations": 1},
            {"cap": 4.0, "floor": 1e-3, "iterations": 3}, {"cap": 4.0, "floor": 1e-3, "iterations": 8},
            {"cap": 16.0, "floor": 1e-3, "iterations": 8},
            *({"cap": 4.0, "floor": 1e-3, "iterations": 8, "smooth": w} for w in (0.5, 1.0, 1.5, 2.0, 4.0)),
            {"cap": 4.0, "floor": 1e-3, "iterations": 3, "smooth": 1.5},
            {"cap": 4.0, "floor": 1e-3, "iterations": 16, "smooth": 1.5})
PITCH_GAINS = (0.0, 0.3, 0.7, 1.0)  # the post-filter's pitch stage, with the voice's mel matching (and its own)


def pauses(voice, corpus: Path, n: int = 6, seed: int = 0) -> list[tuple]:
    """Frames (one hop) of held-out copy synthesis binned by the true audio's frame energy: the
    median and 90th-percentile frame energy of the truth, of the output without mel matching and
    with it (dB re full scale; digital silence counts as -120)."""
    from wavern.dsp import int16_to_float
    from wavern.training.evaluate import held_out_utterances

    mm, hop = voice.melmatch_measured, voice.vocoder.hop
    et, e0, e1 = [], [], []
    for u in held_out_utterances(corpus, n, seed=seed)[:n]:
        feats = u.features(voice.acoustic.config.pitch)
        y = voice.vocoder.render(feats, seed=seed, temperature=voice.default_temperature, fold_frames=None)
        y0 = int16_to_float(voice.apply_postfilter(y, feats, melmatch=None))
        y1 = int16_to_float(voice.apply_postfilter(y, feats, melmatch=mm))
        k = min(len(y0), len(u.audio)) // hop
        frame = lambda x: np.mean(x[:k * hop].reshape(k, hop).astype(np.float64) ** 2, axis=1)  # noqa: E731
        et.append(frame(u.audio))
        e0.append(frame(y0))
        e1.append(frame(y1))
    et, e0, e1 = np.concatenate(et), np.concatenate(e0), np.concatenate(e1)
    db = lambda x: tuple(np.percentile(10 * np.log10(x + 1e-12), [50, 90]).tolist())  # noqa: E731
    out = []
    for lo, hi, name in ((-200, -60, "below -60 (pauses)"), (-60, -40, "-60 to -40"), (-40, -30, "-40 to -30"),
                         (-30, -20, "-30 to -20"), (-20, 0, "above -20")):
        sel = (10 * np.log10(et + 1e-12) >= lo) & (10 * np.log10(et + 1e-12) < hi)
        if sel.any():
            out.append((name, int(sel.sum()), db(et[sel]), db(e0[sel]), db(e1[sel])))
    return out


COST_SECONDS, COST_RUNS = 20.0, 5  # cost(): audio per run, timed runs


def cost(voice, seconds: float = COST_SECONDS, runs: int = COST_RUNS) -> tuple[float, float]:
    """CPU seconds of mel matching per second of audio (a whole segment, and pushed in the
    stream's chunk sizes), on random audio with a random mel: medians of ``runs``, the two ways
    alternating, after one untimed round."""
    from wavern.dsp import log_mel
    from wavern.engine.voice import chunk_samples

    rng = np.random.default_rng(0)
    n = int(seconds * voice.sample_rate) // voice.vocoder.hop * voice.vocoder.hop
    x = np.rint(rng.standard_normal(n) * 3000).astype(np.int16)
    mel = log_mel((rng.standard_normal(n) * 0.1).astype(np.float32))[:n // voice.vocoder.hop]
    times: tuple[list[float], list[float]] = ([], [])
    for r in range(runs + 1):
        t = time.process_time()
        voice.melmatch.apply(x, mel)
        whole = (time.process_time() - t) / seconds
        s = voice.melmatch.stream(lambda a, b: mel[a:b], n)
        t, at, k = time.process_time(), 0, 0
        while at < n:
            m = min(chunk_samples(k), n - at)
            s.push(x[at:at + m])
            at, k = at + m, k + 1
        if r:
            times[0].append(whole)
            times[1].append((time.process_time() - t) / seconds)
    return float(np.median(times[0])), float(np.median(times[1]))


def cost_only(voice_path: Path, out: Path) -> int:
    """Measure :func:`cost` again and put it into the page in place of its "Cost: ..." sentence and
    the header's date for it (the rest of the page, the quality tables, stays as it was)."""
    import re

    from wavern.engine import Voice

    voice = Voice.load(voice_path)
    passes = voice.melmatch.config.iterations
    whole, streamed = cost(voice)
    voice.close()
    page = out.read_text(encoding="utf-8")
    today = time.strftime("%Y-%m-%d", time.gmtime())
    sentence = (f"Cost: {1000 * whole:.1f} ms of CPU per second of audio for a whole segment, {1000 * streamed:.1f} ms "
                f"in the stream's chunks ({passes} passes, one thread, medians of {COST_RUNS} on {COST_SECONDS:g} s; "
                f"{today}, `--cost-only`).")
    page, n = re.subn(r"Cost: [^\n]*?\)\.", lambda _: sentence, page, count=1)
    if n != 1:
        print(f"[melmatch] no 'Cost: ...).' sentence in {out}: run the whole benchmark instead")
        return 1
    page = re.sub(r"pauses and cost (\d{4}-\d{2}-\d{2}) with `--reuse`", r"pauses \1 with `--reuse`", page)
    out.write_text(page, encoding="utf-8")
    print(sentence)
    print(f"wrote {out}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--voice", type=Path, default=ROOT / "assets" / "voices" / "espeak")
    ap.add_argument("--corpus", type=Path, default=ROOT / "data" / "corpus")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench" / "melmatch.md")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reuse", action="store_true", help="take the quality tables from the JSON beside --out")
    ap.add_argument("--cost-only", action="store_true",
                    help="measure only the cost and replace the page's cost sentence (no corpus, no torch)")
    args = ap.parse_args()
    if args.cost_only:
        return cost_only(args.voice, args.out)
    import torch

    torch.set_num_threads(1)
    from compare_vocoders import KEYS, measure
    from eval_voice import melmatch_label

    from wavern.engine import Voice
    from wavern.engine.melmatch import MelMatch, MelMatchConfig
    from wavern.engine.postfilter import Postfilter

    if not (args.corpus / "metadata.jsonl").is_file():
        print(f"[melmatch] no corpus at {args.corpus}: build it first (`wavern corpus build`)")
        return 1
    voice = Voice.load(args.voice)
    pf_shipped = voice.postfilter.config
    shipped = voice.melmatch.config if voice.melmatch is not None else MelMatchConfig()
    measured = voice.melmatch_measured.config if voice.melmatch_measured is not None else shipped
    both = {"text": shipped.to_dict(), "measured": measured.to_dict()}  # the voice's own pair
    draws = [(0, 10)] if args.quick else [(0, 10), (3, 16)]
    seeds = [0] if args.quick else [0, 1]
    saved = args.out.with_suffix(".json")
    rows, gl = [], {}
    measured_on = time.strftime("%Y-%m-%d", time.gmtime())  # the quality tables' date (a reuse: theirs)
    if args.reuse:
        d = json.loads(saved.read_text())
        rows, gl, seeds = d["rows"], {int(k): v for k, v in d["griffin_lim"].items()}, d["seeds"]
        measured_on = d.get("date", "2026-11-30")  # the JSON before dates were kept: that run's
    pitch_rows = [{"off": True, "pitch_gain": 0.0}, *({**both, "pitch_gain": g} for g in PITCH_GAINS)]
    for i, (draw, n_copy) in enumerate([] if args.reuse else draws):
        for s in (*SETTINGS, *pitch_rows, both) if i == 0 else (SETTINGS[0], pitch_rows[0], both):  # draw 2 checks
            voice.postfilter = Postfilter(dataclasses.replace(pf_shipped, pitch_gain=s.get("pitch_gain",
                                                                                        pf_shipped.pitch_gain)))
            if "text" in s:  # as shipped: copy synthesis with the measured-mel setting, end to end with the other
                voice.melmatch = MelMatch(MelMatchConfig(**s["text"]))
                voice.melmatch_measured = MelMatch(MelMatchConfig(**s["measured"]))
            else:  # one setting for both
                voice.melmatch = voice.melmatch_measured = None if s.get("off") else MelMatch(MelMatchConfig(**s))
            t0 = time.time()
            m = measure(voice, args.corpus, draw=draw, n_copy=n_copy, n_e2e=20, seeds=seeds)
            rows.append({"draw": draw, "n_copy": n_copy, "setting": s, **{k: round(m[k], 4) for k in KEYS},
                         "wall_s": round(time.time() - t0, 1)})
            print(json.dumps(rows[-1]), flush=True)
    from wavern.training.evaluate import evaluate_griffin_lim

    # Griffin-Lim from a random phase, the same numbers of projections, the first draw's copies
    for n_iter in [] if args.reuse else sorted({1, shipped.iterations, 3, 8, 32}):
        c = evaluate_griffin_lim(args.corpus, draws[0][1], draws[0][0], n_iter=n_iter)
        gl[n_iter] = {k: round(c[k], 4) for k in ("stoi", "pesq_wb", "mcd_db", "phone_acc", "vde", "gpe")}
        print(json.dumps({"griffin_lim": n_iter, **gl[n_iter]}), flush=True)
    if not args.reuse:
        saved.write_text(json.dumps({"rows": rows, "griffin_lim": gl, "seeds": seeds, "date": measured_on},
                                    indent=1) + "\n")
    voice.melmatch, voice.melmatch_measured = MelMatch(shipped), MelMatch(measured)
    voice.postfilter = Postfilter(pf_shipped)
    bins = pauses(voice, args.corpus)
    whole, streamed = cost(voice)
    voice.close()

    def name(s: dict) -> str:
        if s.get("off"):
            return "none"
        if "text" in s:
            return f"copy {melmatch_label(s['measured'])}, end to end {melmatch_label(s['text'])}"
        return melmatch_label(s)

    def pitch(s: dict) -> str:
        g = s.get("pitch_gain", pf_shipped.pitch_gain)
        tag = "**shipped** " if s == both else ""
        return tag + (f"{g:g}" if g else "none")

    cmd = "python bench/melmatch.py" + (" --quick" if args.quick else "")
    today = time.strftime("%Y-%m-%d", time.gmtime())
    when = (f"the quality tables and Griffin-Lim's of {measured_on} (`{saved.name}`, reused), the pauses and the "
            f"cost measured {today} with `--reuse`" if args.reuse else today)
    lines = ["## Mel matching (`engine/melmatch.py`) and the post-filter's pitch stage", "",
             f"Command: `.venv/bin/{cmd}` ({when}, this machine, training "
             "runs on the cores). The shipped voice with only its mel matching or its post-filter's pitch stage "
             "changed (the rest as shipped); copy synthesis of held-out "
             "sentences from their true features and end to end from text (20 sentences), as "
             f"`bench/compare_vocoders.py` measures, means over sampling seeds {seeds}. Draw: the selection seed "
             "of the held-out sentences (0 is docs/VOICE.md's).", "",
             "| draw | post-filter's pitch stage | mel matching | copy STOI | PESQ-WB | MCD dB | phone acc | VDE | GPE | "
             "e2e phone acc | e2e MCD vs espeak-ng | e2e voiced |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['draw']} ({r['n_copy']} copied) | {pitch(r['setting'])} | {name(r['setting'])} | "
                     f"{r['stoi']:.3f} | "
                     f"{r['pesq_wb']:.2f} | {r['mcd_db']:.2f} | {r['phone_acc']:.3f} | {r['vde']:.3f} | "
                     f"{r['gpe']:.3f} | {r['e2e_phone']:.3f} | {r['e2e_mcd']:.2f} | {r['e2e_voiced']:.3f} |")
    lines += ["", "Smooth w: the logs of a frame's band gains are averaged over the bands with a Gaussian of w bands "
              "before they are applied (`MelMatchConfig.smooth`), so the band envelope moves to the mel's and the "
              "vocoder's harmonics inside it stay. A mel measured from audio holds its harmonics band by band and "
              "gains from matching each band (copy synthesis); the acoustic model's mel is smoother than speech, "
              "and matching it band by band smooths the vocoder's harmonics away (YIN's voiced share of the end to "
              "end audio). The voice therefore keeps two settings: `inference.melmatch` for text → speech and "
              "`inference.melmatch_measured` for a measured mel (`wavern vocode`, copy synthesis).", "",
              "Post-filter's pitch stage g (`PostfilterConfig.pitch_gain`, engine/postfilter.py): before the formant "
              "filter, c[n] = (x[n] + w x[n − T]) / (1 + w) with T = sr / f0 and w = g × periodicity from the frame's "
              "pitch features (the true audio's in copy synthesis, the acoustic model's end to end), as the "
              "long-term post-filters of speech codecs: a signal periodic in T passes, the noise between the "
              "harmonics falls. Mel matching follows it."]
    lines += ["", "Griffin-Lim from a random phase (`wavern.dsp.griffin_lim`, the first draw's copied sentences, "
              "its phase seed 0), for the same numbers of projections: what the WaveRNN's audio is worth as the "
              "starting point.", "",
              "| Griffin-Lim iterations | copy STOI | PESQ-WB | MCD dB | phone acc | VDE | GPE |",
              "|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {n} | {m['stoi']:.3f} | {m['pesq_wb']:.2f} | {m['mcd_db']:.2f} | {m['phone_acc']:.3f} | "
              f"{m['vde']:.3f} | {m['gpe']:.3f} |" for n, m in gl.items()]
    lines += ["", "What it does in the pauses: frames of 6 held-out copy-synthesis sentences (seed 0) binned by "
              "the true audio's frame energy (dB re full scale; one frame = one hop; digital silence counts as "
              "-120), the median and the 90th percentile of the frames' energy in each bin:", "",
              "| true frame energy, dB | frames | true p50 / p90 | WaveRNN → post-filter | + mel matching |",
              "|---|---:|---:|---:|---:|"]
    lines += [f"| {b[0]} | {b[1]} | {b[2][0]:.1f} / {b[2][1]:.1f} | {b[3][0]:.1f} / {b[3][1]:.1f} | "
              f"{b[4][0]:.1f} / {b[4][1]:.1f} |" for b in bins]
    lines += ["", f"Cost (CPU time per second of audio, one thread, medians of {COST_RUNS} runs on {COST_SECONDS:g} s of "
              "random audio): "
              f"{1000 * whole:.1f} ms for a whole segment, "
              f"{1000 * streamed:.1f} ms pushed in the stream's chunk sizes, i.e. {whole:.4f} / {streamed:.4f} "
              f"of real time on top of the vocoder ({shipped.iterations} passes). Delay: each pass trails the one "
              "before by n_fft − hop = 768 samples (35 ms of audio), so the first audio of a request waits for "
              f"{shipped.iterations} × 768 + 512 samples of the vocoder's work, which the stream makes in one call "
              "(docs/bench/latency.md)."]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
