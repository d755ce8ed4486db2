"""The engine goal's shape (issue 41): one stream of a random H 512 vocoder with 10 % of its blocks,
its RTF from the CPU time of the generating thread. ``bench/engine.py`` builds every random vocoder
with :func:`random_vocoder` and times one stream with :func:`engine_speed`; its ``--avx2`` runs
this file as a script, one fresh process per measurement (each with its own LLVM target).

It imports nothing of wavern's but ``Vocoder`` and ``BlockSparse``, which older revisions have too,
so ``bench/engine.py --avx2 --against REV`` can run it against an exported revision
(``PYTHONPATH``): the same work on both sides.

    python bench/goal_row.py [--runs 5] [--seconds 0.4] [--int8]   # prints {"rtf": ..., "cpu_name": ...}
"""

from __future__ import annotations

import argparse
import json
import time

from wavern.engine.vocoder import Vocoder  # first: numba must see NUMBA_SLP_VECTORIZE

import numba  # noqa: E402
import numpy as np  # noqa: E402

from wavern.vocoder.format import BlockSparse  # noqa: E402

SR = 22050
C, COND_BLOCKS = 128, 3  # VocoderConfig defaults
GOAL_H, GOAL_DENSITY = 512, 0.1


def random_vocoder(H: int, density: float, *, block=(16, 4), seed: int = 0):
    """Vocoder tensors in the file's form with blocks kept at random (fraction ``density``): float16
    values, as a voice file stores them (so the engine runs them as a voice's, ``Vocoder.half_weights``)."""
    rng = np.random.default_rng(seed)
    hh = H // 2
    g = lambda *s, sc: (rng.standard_normal(s) * sc).astype(np.float16).astype(np.float32)  # noqa: E731
    dense = {"cond.conv_in.weight": g(C, 80, 5, sc=0.05), "cond.conv_in.bias": g(C, sc=0.1)}
    for i in range(COND_BLOCKS):
        dense |= {f"cond.blocks.{i}.conv1.weight": g(C, C, 3, sc=1 / np.sqrt(3 * C)),
                  f"cond.blocks.{i}.conv1.bias": g(C, sc=0.1),
                  f"cond.blocks.{i}.conv2.weight": g(C, C, 1, sc=0.5 / np.sqrt(C)),
                  f"cond.blocks.{i}.conv2.bias": g(C, sc=0.1)}
    w_ih = g(3 * H, 3 + C, sc=1.5 / np.sqrt(3 + C))
    for gate in range(3):
        w_ih[gate * H:gate * H + hh, 2] = 0.0
    dense |= {"gru.weight_ih": w_ih, "gru.bias_ih": g(3 * H, sc=0.3), "gru.bias_hh": g(3 * H, sc=0.3)}

    def sparse_mat(rows: int, cols: int, sc: float) -> BlockSparse:
        br, bc = block
        keep = rng.random((rows // br, cols // bc)) < density
        m = g(rows, cols, sc=sc / np.sqrt(cols * density)) * np.kron(keep, np.ones(block, np.float32))
        return BlockSparse.from_dense(m, block)

    sparse = {"gru.weight_hh": sparse_mat(3 * H, H, 1.5)}
    for name, rows in (("O1", hh), ("O2", 256), ("O3", hh), ("O4", 256)):
        sparse[name] = sparse_mat(rows, hh, 1.5)
        dense[f"{name}.bias"] = g(rows, sc=0.1)
    return dense, sparse


def random_mel(frames: int, seed: int = 0) -> np.ndarray:
    walk = np.cumsum(np.random.default_rng(seed).standard_normal((frames, 80)) * 0.5, axis=0)
    return (np.tanh(walk / 4.0) * 4.0 - 5.0).astype(np.float32)


def engine_speed(voc: Vocoder, gi: np.ndarray, runs: int, seconds: float) -> float:
    """Median samples per CPU-second of one stream, each run ``seconds`` long (estimated)."""
    st = voc.new_state(seed=1)
    voc.generate(gi, st, 256)  # compiled already; warms caches
    t = time.thread_time()
    voc.generate(gi, voc.new_state(seed=1), 1024)
    per = max(time.thread_time() - t, 1e-6) / 1024
    n = int(min(max(seconds / per, 1024), gi.shape[0] * voc.hop))
    rates = []
    for _ in range(runs):
        st = voc.new_state(seed=1)
        t = time.thread_time()
        voc.generate(gi, st, n)
        rates.append(n / (time.thread_time() - t))
    return float(np.median(rates))


def goal_vocoder(int8: bool = False) -> tuple[Vocoder, np.ndarray]:
    """The goal shape's random vocoder and its frame inputs for 400 frames of random mel; with
    ``int8``, its W_hh h as the int8 product (``Vocoder(int8=True)``)."""
    dense, sparse = random_vocoder(GOAL_H, GOAL_DENSITY)
    voc = Vocoder(dense, sparse, cond_blocks=COND_BLOCKS, **({"int8": True} if int8 else {}))
    return voc, voc.frame_inputs(random_mel(400, seed=1))


def goal_rtf(runs: int, seconds: float, int8: bool = False) -> float:
    """The goal row's RTF: median of ``runs`` runs of about ``seconds`` of CPU each."""
    return SR / engine_speed(*goal_vocoder(int8), runs, seconds)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.4)
    ap.add_argument("--int8", action="store_true", help="W_hh h as the int8 product (this checkout's wavern)")
    args = ap.parse_args()
    print(json.dumps({"rtf": goal_rtf(args.runs, args.seconds, args.int8), "cpu_name": numba.core.config.CPU_NAME,
                      "cpu_features": numba.core.config.CPU_FEATURES}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
