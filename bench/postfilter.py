"""Cost of the formant post-filter (engine/postfilter.py) -> docs/bench/postfilter.md.

    .venv/bin/python bench/postfilter.py [--seconds 60] [--runs 5]

CPU time (``time.process_time``, one thread) of the per-frame coefficients (log-mel → LPC →
filter) and of the sample-by-sample filtering in 2048-sample chunks, as the stream calls it,
over ``--seconds`` of random frames; medians of ``--runs``. The random mel and noise input cost
what real ones do (no data-dependent branches).

With the corpus present (``--corpus``, default data/corpus), also what the filter does to held-out
copy synthesis: the voice's vocoder renders ``--n-utts`` held-out sentences from their true mel
once, then each setting filters the same audio, scored like docs/VOICE.md (STOI, PESQ-WB,
MCD-DTW, phone accuracy). The sentences are drawn with ``--seed`` 1, not docs/VOICE.md's 0, so the
setting was chosen on sentences the published numbers do not use.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench" / "postfilter.md")
    ap.add_argument("--voice", type=Path, default=ROOT / "assets" / "voices" / "espeak")
    ap.add_argument("--corpus", type=Path, default=ROOT / "data" / "corpus")
    ap.add_argument("--n-utts", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    from threadpoolctl import threadpool_limits

    from wavern.engine import kernels  # noqa: F401 - numba's vectoriser flag before numba loads
    from wavern.engine.postfilter import Postfilter

    pf = Postfilter()
    rng = np.random.default_rng(0)
    frames = int(args.seconds * 22050 / 256)
    mel = rng.normal(-4.0, 2.0, (frames, 80)).astype(np.float32)
    x = (rng.standard_normal(frames * 256) * 3000).astype(np.int16)
    pf.apply(x[:512], pf.coefficients(mel[:4]), pf.new_state())  # compile / load the numba cache
    coef_s, filt_s = [], []
    with threadpool_limits(1):
        for _ in range(args.runs):
            t = time.process_time()
            c = np.concatenate([pf.coefficients(mel[i:i + 16]) for i in range(0, frames, 16)])  # as the stream
            t1 = time.process_time()
            st = pf.new_state()
            for i in range(0, x.size, 2048):
                pf.apply(x[i:i + 2048], c[i // 256:], st, frame0=i // 256)
            coef_s.append(t1 - t)
            filt_s.append(time.process_time() - t1)
    c_us, f_us = np.median(coef_s) / frames * 1e6, np.median(filt_s) / frames * 1e6
    rtf = (np.median(coef_s) + np.median(filt_s)) / args.seconds
    load = os.getloadavg()
    lines = [
        "## Post-filter: cost and effect",
        "",
        f"`{' '.join(['.venv/bin/python', 'bench/postfilter.py', *sys.argv[1:]])}` "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load[0]:.2f}; CPU time, one "
        f"thread, median of {args.runs} runs over {args.seconds:g} s of frames).",
        "",
        "| part | CPU µs per frame (11.6 ms) |",
        "|---|---:|",
        f"| coefficients (mel → LPC → filter, 16-frame windows as the stream asks) | {c_us:.1f} |",
        f"| filtering (numba, sample by sample, 2048-sample chunks) | {f_us:.1f} |",
        f"| total, as real-time factor | {rtf:.4f} |",
    ]
    lines += quality(args) if (args.corpus / "metadata.jsonl").is_file() else [
        "", f"(No corpus at {args.corpus}: the quality table needs `wavern corpus build data/corpus --utterances 2000 "
        "--seed 0`.)"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def quality(args) -> list[str]:
    import torch

    torch.set_num_threads(1)
    from wavern.dsp import int16_to_float
    from wavern.engine.postfilter import Postfilter, PostfilterConfig
    from wavern.engine.voice import Voice
    from wavern.training.evaluate import evaluate_utterances, held_out_utterances

    voice = Voice.load(args.voice)
    utts = held_out_utterances(args.corpus, args.n_utts, seed=args.seed)
    pitch = voice.acoustic.config.pitch  # a pitch voice's vocoder reads the true audio's pitch too
    raw = {u.id: voice.vocoder.render(u.features(pitch), seed=0, fold_frames=None) for u in utts}
    settings = [None] + [PostfilterConfig(order=k) for k in (16, 32, 56, 72)] + [
        PostfilterConfig(gamma_den=0.95, order=56), PostfilterConfig(gamma_den=0.99, order=56),
        PostfilterConfig(gamma_num=0.7, gamma_den=0.95, order=56), PostfilterConfig(gamma_num=0.85, gamma_den=0.95, order=56),
        PostfilterConfig(gamma_num=0.9, gamma_den=0.95, tilt=0.2, order=56),
        PostfilterConfig(gamma_num=0.9, gamma_den=0.95, tilt=0.1, order=56),
        PostfilterConfig(gamma_num=0.92, gamma_den=0.96, tilt=0.2, order=56)]
    lines = ["", f"### What it does: held-out copy synthesis, {len(utts)} sentences (seed {args.seed}), voice "
             f"`{args.voice.name}` (vocoder step {voice.meta.get('provenance', {}).get('vocoder', {}).get('step')})",
             "", "| post-filter | STOI | PESQ-WB | MCD-DTW dB | phone accuracy |", "|---|---:|---:|---:|---:|"]
    shipped = voice.postfilter.config if voice.postfilter is not None else None
    for cfg in settings:
        def vocode(u, cfg=cfg):
            if cfg is None:
                return int16_to_float(raw[u.id])
            pf = Postfilter(cfg, hop=voice.vocoder.hop)
            return int16_to_float(pf.apply(raw[u.id], pf.coefficients(u.mel), pf.new_state()))

        r = evaluate_utterances(vocode, utts)
        name = "none (WaveRNN alone)" if cfg is None else (
            f"γ {cfg.gamma_num}/{cfg.gamma_den}, tilt {cfg.tilt}, order {cfg.order}"
            + (" (the voice's)" if shipped is not None  # its formant part: this table has no pitch features
               and dataclasses.replace(cfg, pitch_gain=shipped.pitch_gain) == shipped else ""))
        lines.append(f"| {name} | {r['stoi']:.3f} | {r['pesq_wb']:.3f} | {r['mcd_db']:.2f} | {r['phone_acc']:.3f} |")
        print(lines[-1], flush=True)
    voice.close()
    return lines


if __name__ == "__main__":
    sys.exit(main())
