"""Cost of the formant post-filter (engine/postfilter.py) -> docs/bench/postfilter.md.

    .venv/bin/python bench/postfilter.py [--seconds 60] [--runs 5]

CPU time (``time.process_time``, one thread) of the per-frame coefficients (log-mel → LPC →
filter) and of the sample-by-sample filtering in 2048-sample chunks, as the stream calls it,
over ``--seconds`` of random frames; medians of ``--runs``. The random mel and noise input cost
what real ones do (no data-dependent branches).
"""

from __future__ import annotations

import argparse
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
            c = pf.coefficients(mel)
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
        "## Post-filter cost",
        "",
        f"`{' '.join(['.venv/bin/python', 'bench/postfilter.py', *sys.argv[1:]])}` "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load[0]:.2f}; CPU time, one "
        f"thread, median of {args.runs} runs over {args.seconds:g} s of frames).",
        "",
        "| part | CPU µs per frame (11.6 ms) |",
        "|---|---:|",
        f"| coefficients (mel → LPC → filter, vectorised over frames) | {c_us:.1f} |",
        f"| filtering (numba, sample by sample, 2048-sample chunks) | {f_us:.1f} |",
        f"| total, as real-time factor | {rtf:.4f} |",
        "",
        "Its effect on quality is in docs/VOICE.md (copy synthesis with and without it).",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
