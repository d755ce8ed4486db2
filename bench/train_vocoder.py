"""Teacher-forced WaveRNN training throughput on the CPU: the plain baseline against the tuned setup.

    .venv/bin/python bench/train_vocoder.py            # writes docs/bench/train_vocoder.md
    .venv/bin/python bench/train_vocoder.py --rounds 1 --steps 2   # quicker, noisier

A "step" is what the trainer does: forward, loss, backward, Adam step on random mel/audio of the
given batch (segments of ``segment`` samples). The configurations run interleaved in one process,
round after round, so a burst of load from elsewhere hits all of them; the table reports the
median and the best round of each (the best is closest to what an idle machine gives).

Baseline: hidden 256, batch 16 x 1024 samples, float32, 1 thread, the stock ``nn.GRU``.
Tuned: :func:`wavern.vocoder.gru.gru_sequence` (per-frame conditioning, hand-written backward with
one large ``dW_hh`` product), bfloat16 autocast (when the CPU has native bf16), 2 threads, larger
batch. Rows in between show what each change brings.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from wavern.training.vocoder_trainer import bf16_supported
from wavern.vocoder.config import VocoderConfig
from wavern.vocoder.model import WaveRNN

ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class Setup:
    name: str
    hidden: int
    batch: int
    segment: int
    threads: int
    bf16: bool
    impl: str  # "nn" (stock nn.GRU) or "loop" (gru_sequence)


def setups(bf16_ok: bool) -> list[Setup]:
    bf = bf16_ok
    return [
        Setup("baseline: nn.GRU, fp32, 1 thread", 256, 16, 1024, 1, False, "nn"),
        Setup("gru_sequence, fp32, 1 thread", 256, 16, 1024, 1, False, "loop"),
        Setup("gru_sequence, bf16, 1 thread", 256, 16, 1024, 1, bf, "loop"),
        Setup("gru_sequence, bf16, 1 thread, batch 32", 256, 32, 1024, 1, bf, "loop"),
        Setup("tuned: gru_sequence, bf16, 2 threads, batch 32", 256, 32, 1024, 2, bf, "loop"),
        Setup("tuned: gru_sequence, bf16, 2 threads, batch 64", 256, 64, 1024, 2, bf, "loop"),
        Setup("H 384 baseline: nn.GRU, fp32, 1 thread", 384, 16, 1024, 1, False, "nn"),
        Setup("H 384 long run: gru_sequence, bf16, 1 thread", 384, 16, 1024, 1, bf, "loop"),
        Setup("H 384 tuned: gru_sequence, bf16, 2 threads, batch 32", 384, 32, 1024, 2, bf, "loop"),
    ]


class Runner:
    """Model, optimiser and a fixed random batch for one setup."""

    def __init__(self, s: Setup) -> None:
        self.s = s
        torch.manual_seed(0)
        self.model = WaveRNN(VocoderConfig(hidden_size=s.hidden))
        self.model.gru_impl = s.impl
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-4)
        frames = s.segment // 256
        g = torch.Generator().manual_seed(1)
        self.pad = 5
        self.mel = torch.randn(s.batch, frames + 2 * self.pad, 80, generator=g) - 4.0
        # Speech-like bytes: a slow random walk, not white noise (keeps the coarse byte realistic).
        walk = torch.cumsum(torch.randn(s.batch, s.segment, generator=g) * 300, dim=1)
        self.audio = walk.clamp(-32768, 32767).to(torch.int16)

    def step(self) -> float:
        torch.set_num_threads(self.s.threads)
        ctx = torch.autocast("cpu", dtype=torch.bfloat16) if self.s.bf16 else contextlib.nullcontext()
        t = time.perf_counter()
        with ctx:
            loss = self.model.loss(self.mel, self.audio, mel_pad=self.pad)
        self.opt.zero_grad(set_to_none=True)
        loss.total.backward()
        self.opt.step()
        return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds over all setups")
    ap.add_argument("--steps", type=int, default=2, help="timed steps per setup per round (after 1 warm-up)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "bench" / "train_vocoder.md"))
    args = ap.parse_args(argv)
    bf16_ok = bf16_supported()
    runners = [Runner(s) for s in setups(bf16_ok)]
    times: dict[str, list[float]] = {r.s.name: [] for r in runners}
    for r in runners:
        r.step()  # warm-up (allocator, oneDNN kernels)
    load0 = os.getloadavg()
    for rnd in range(args.rounds):
        for r in runners:
            per = [r.step() for _ in range(args.steps)]
            times[r.s.name].append(statistics.median(per))
            print(f"round {rnd + 1}: {r.s.name}: {times[r.s.name][-1]:.3f} s/step", file=sys.stderr, flush=True)
    load1 = os.getloadavg()
    base = {256: None, 384: None}
    rows = []
    for r in runners:
        s, ts = r.s, times[r.s.name]
        samples = s.batch * s.segment
        med, best = samples / statistics.median(ts), samples / min(ts)
        if s.impl == "nn" and s.threads == 1 and not s.bf16:
            base[s.hidden] = (med, best)
        b = base[s.hidden]
        rows.append(f"| {s.name} | {s.hidden} | {s.batch} x {s.segment} | {'bf16' if s.bf16 else 'fp32'} | "
                    f"{s.threads} | {statistics.median(ts):.3f} | {med:,.0f} | {best:,.0f} | "
                    f"{med / b[0]:.2f}x | {best / b[1]:.2f}x |")
    cmd = "bench/train_vocoder.py" + (f" --rounds {args.rounds} --steps {args.steps}")
    text = "\n".join([
        "## Vocoder training throughput (teacher-forced, CPU)",
        "",
        f"Command: `.venv/bin/python {cmd}`. One step = forward + loss + backward + Adam on a batch of "
        "random mel / random-walk audio; setups interleaved round by round in one process.",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"native bf16: {bf16_ok}; load average {load0[0]:.1f} before, {load1[0]:.1f} after (the machine is shared).",
        "",
        "| setup | H | batch x samples | precision | threads | s/step (median) | samples/s (median) | "
        "samples/s (best round) | speed-up (median) | speed-up (best) |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "Speed-ups are against the baseline of the same hidden size. The best round is what an idle "
        "machine approaches; the median includes interference from other jobs (2 threads suffer most: "
        "an OpenMP thread that loses its core stalls every parallel region).",
        "",
    ])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
