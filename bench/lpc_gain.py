"""How much of the corpus's waveform a linear predictor taken from the mel explains -> docs/bench/lpc_gain.md.

    .venv/bin/python bench/lpc_gain.py [--n-utts 20] [--orders 8,16,24]

The question behind it (docs/TRAINING.md, "What was tried"): the H 384, 10 %-dense WaveRNN stops improving
long before the voice's goals, and LPCNet reaches good quality with the same recurrent budget by
letting a per-frame linear predictor, computed from the acoustic features, carry the spectral
envelope, so the network only models the excitation ``e_t = s_t - round(p_t)``,
``p_t = -sum_k a_k s_{t-k}``. Here ``a`` is the order-p predictor of each frame's mel,
``wavern.dsp.mel_lpc`` (band magnitudes -> power spectrum -> autocorrelation with a 40 Hz lag
window -> Levinson; the post-filter's derivation, and the LPC vocoder's); sample ``j`` uses frame
``j // hop`` as the vocoder does. Reported over the first
``--n-utts`` held-out utterances (by id): the prediction gain ``10 log10(sum s^2 / sum e^2)``, the
rms and tails of ``e``, and the marginal entropy of the coarse byte of ``s`` and of ``e`` (the
target of the WaveRNN's first softmax, before any conditioning).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _entropy(x: np.ndarray) -> float:
    _, counts = np.unique(x, return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum())


def lpc_residual(s: np.ndarray, a: np.ndarray, hop: int) -> np.ndarray:
    """``e = s - round(p)`` for int samples ``s`` (n,) and per-frame predictors ``a`` (T, p + 1), a[:, 0] = 1."""
    from wavern.dsp import lpc_prediction

    return s.astype(np.float64) - np.round(lpc_prediction(s, a, hop))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "data" / "corpus")
    ap.add_argument("--n-utts", type=int, default=20)
    ap.add_argument("--orders", default="8,16,24")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench" / "lpc_gain.md")
    args = ap.parse_args()
    from wavern.dsp import DEFAULT_MEL, mel_lpc
    from wavern.training.corpus import load_corpus

    if not (args.corpus / "metadata.jsonl").is_file():
        print(f"[lpc_gain] no corpus at {args.corpus}: build it first (`.venv/bin/wavern corpus build data/corpus "
              "--utterances 2000 --seed 0`, as `make bench` does)")
        return 1
    held = sorted(load_corpus(args.corpus).held_out, key=lambda r: r.id)[:args.n_utts]
    audio = [r.audio() for r in held]
    mels = [np.load(args.corpus / "mels" / f"{r.id}.npy") for r in held]
    s = np.concatenate(audio).astype(np.float64)
    rows = []
    for order in (int(o) for o in args.orders.split(",")):
        e = np.concatenate([lpc_residual(x, mel_lpc(m, order, DEFAULT_MEL), DEFAULT_MEL.hop_length)
                            for x, m in zip(audio, mels)])
        coarse = lambda v: (np.clip(v, -32768, 32767).astype(np.int64) + 32768) >> 8  # noqa: E731
        rows.append((order, 10 * np.log10((s ** 2).sum() / (e ** 2).sum()), np.sqrt((e ** 2).mean()),
                     np.percentile(np.abs(e), 99), np.abs(e).max(), _entropy(coarse(s)), _entropy(coarse(e)),
                     float(np.mean(np.abs(e) > 32767))))
        print(f"[lpc_gain] order {order}: gain {rows[-1][1]:.2f} dB", flush=True)
    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    lines = [
        "## Linear prediction from the mel: how much of the waveform it explains",
        "",
        f"Command: `.venv/bin/python bench/lpc_gain.py --n-utts {args.n_utts} --orders {args.orders}` ({now}), "
        f"{len(held)} held-out utterances, {s.size / DEFAULT_MEL.sample_rate:.1f} s, signal rms {np.sqrt((s ** 2).mean()):.0f}. "
        "Predictor of each frame from its true log-mel (the post-filter's derivation, no bandwidth expansion), "
        "residual `e = s - round(p)`; entropies in nats of the marginal distribution of the coarse byte "
        "(upper 8 bits of the 16-bit sample).",
        "",
        "| order | prediction gain dB | rms of e | 99th pct abs e | max abs e | coarse entropy of s | coarse entropy of e | share of e clipped to int16 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]:.2f} | {r[2]:.0f} | {r[3]:.0f} | {r[4]:.0f} | {r[5]:.3f} | {r[6]:.3f} | {r[7]:.1e} |")
    lines += ["", "What it means for the vocoder: docs/TRAINING.md ('What was tried': the LPC vocoder).", ""]
    args.out.write_text("\n".join(lines))
    print(f"[lpc_gain] wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
