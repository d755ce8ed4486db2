"""Bench: YellowFin against Adam and tuned momentum SGD on wavern's own models, loss against steps.

Run from the repository root (one thread, a few seeds, a short equal budget)::

    .venv/bin/python -m bench.optimizers                          # both tasks, 3 seeds
    .venv/bin/python -m bench.optimizers --tasks vocoder --steps 60 --seeds 0   # a quick look

Two tasks, each a small version of a real model trained on the real corpus (``data/corpus``):

- **acoustic**: :class:`~wavern.conditioning.acoustic.AcousticModel` with a tiny config,
  batches drawn by the acoustic trainer's own data code (``_items`` / ``_draw_batch``: length-
  bucketed utterances with reference clips), loss = mel L1 + duration MSE (the trainer's).
- **vocoder**: :class:`~wavern.vocoder.model.WaveRNN` with hidden 128, teacher-forced segment
  batches from the vocoder trainer's data cache (``runs/vocoder/cache``, built from the corpus
  when missing), loss = CE(coarse) + CE(fine) in nats per sample, float32, no pruning.

The machinery is ``bench.yellowfin``'s: the baselines' lr is tuned on a small grid on a separate
seed (:func:`~bench.yellowfin.tune_lr`), then every optimiser runs the same seeds with the same
initial weights and the same batch sequence (:func:`~bench.yellowfin.compare_optimizers`).
The optimisers run bare (no warm-up, no clipping, constant lr), unlike the trainers. It
writes ``docs/bench/optimizers.md`` (tables) and ``docs/bench/optimizers.png`` (curves).
"""

from __future__ import annotations

import argparse
import logging
import platform
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from bench.yellowfin import (OptimizerSpec, RunResult, Task, compare_optimizers, default_target, write_report)
from wavern.training.yellowfin import YellowFin

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "data" / "corpus"
VOCODER_CACHE = REPO / "runs" / "vocoder" / "cache"


def _numpy_rng(gen: torch.Generator) -> np.random.Generator:
    """A numpy generator drawn from the task's torch generator (the harness hands out torch ones)."""
    return np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=gen)))


# --------------------------------------------------------------------------- acoustic


def acoustic_task(*, corpus_dir: Path = CORPUS, batch: int = 8, d_model: int = 64, heldout_batches: int = 4,
                  max_frames: int = 600) -> Task:
    """A tiny acoustic model on the corpus, batches from the acoustic trainer's data code."""
    from wavern.conditioning.acoustic import AcousticModel
    from wavern.conditioning.config import AcousticConfig, EncoderConfig
    from wavern.conditioning.frontend.phonemes import SymbolTable
    from wavern.training import acoustic_trainer as at
    from wavern.training.corpus import load_corpus

    corpus = load_corpus(corpus_dir)
    table = SymbolTable.from_list(corpus.symbols)
    voices = tuple(sorted({r.voice for r in corpus.train if r.voice is not None}))
    enc = EncoderConfig(n_symbols=len(table), d_model=d_model, n_layers=2, n_heads=2, window=16,
                        ffn_channels=2 * d_model)
    model_cfg = AcousticConfig(encoder=enc, speakers=voices, speaker_dim=16, ref_channels=32, ref_layers=1,
                               duration_channels=d_model, decoder_d_model=d_model, decoder_layers=2,
                               decoder_heads=2, decoder_ffn_channels=2 * d_model)
    train_cfg = at.AcousticTrainConfig(corpus_dir=str(corpus_dir), model=model_cfg, batch_size=batch,
                                       max_frames=max_frames)
    items = at._items(corpus.train, table, voices, model_cfg.hop_length, max_frames)
    held = at._items(corpus.held_out, table, voices, model_cfg.hop_length, max_frames)

    def by_speaker(its):
        out: dict[int, list[int]] = {}
        for i, it in enumerate(its):
            out.setdefault(it.speaker, []).append(i)
        return out

    train_spk, held_spk = by_speaker(items), by_speaker(held)
    mean, std = at._mel_stats(items, model_cfg.n_mels)
    cpu = torch.device("cpu")

    def make_model(seed: int) -> AcousticModel:
        model = AcousticModel(model_cfg)
        model.mel_mean.copy_(torch.from_numpy(mean))
        model.mel_std.copy_(torch.from_numpy(std))
        return model

    def sample(gen: torch.Generator):
        return at._draw_batch(items, train_spk, train_cfg, _numpy_rng(gen), model_cfg.n_mels, cpu)

    def loss(model, b) -> torch.Tensor:
        out = model(b["ids"], b["is_global"], b["durations"], speaker=b["speaker"], padding_mask=b["padding_mask"],
                    reference=b["reference"], reference_padding_mask=b["reference_padding_mask"],
                    reference_present=b["reference_present"])
        return model.loss(out, b["mel"][:, :out.mel.shape[1]], b["durations"], padding_mask=b["padding_mask"]).total

    fixed = np.random.default_rng(12345)
    heldout = [at._draw_batch(held, held_spk, train_cfg, fixed, model_cfg.n_mels, cpu) for _ in range(heldout_batches)]
    n_params = sum(p.numel() for p in make_model(0).parameters())
    return Task(name=f"acoustic model (d {d_model}, {n_params / 1e3:.0f} k params), batch {batch}, "
                     f"{len(items)} train / {len(held)} held-out utterances",
                make_model=make_model, sample_batch=sample, loss=loss, heldout=heldout)


# --------------------------------------------------------------------------- vocoder


def vocoder_task(*, corpus_dir: Path = CORPUS, cache_dir: Path = VOCODER_CACHE, hidden: int = 128,
                 batch: int = 16, segment_frames: int = 2, heldout_batches: int = 4) -> Task:
    """WaveRNN (hidden ``hidden``) on teacher-forced segments from the vocoder trainer's cache."""
    from wavern.training.vocoder_data import VocoderData, build_cache
    from wavern.vocoder.config import VocoderConfig
    from wavern.vocoder.model import WaveRNN

    cfg = VocoderConfig(hidden_size=hidden, cond_channels=64, cond_blocks=2)
    build_cache(corpus_dir, cache_dir, cfg.mel)  # a no-op when the cache is up to date
    data = VocoderData.open(cache_dir, hop=cfg.hop_length)
    pad = 2 + cfg.cond_blocks

    def tensors(b):
        return torch.from_numpy(b.mel), torch.from_numpy(b.audio), torch.from_numpy(b.prev)

    def sample(gen: torch.Generator):
        return tensors(data.batch(_numpy_rng(gen), batch_size=batch, segment_frames=segment_frames, mel_pad=pad))

    def loss(model, b) -> torch.Tensor:
        mel, audio, prev = b
        return model.loss(mel, audio, prev_audio=prev, mel_pad=pad).total

    fixed = np.random.default_rng(12345)
    heldout = [tensors(data.batch(fixed, batch_size=batch, segment_frames=segment_frames, mel_pad=pad,
                                  held_out=True)) for _ in range(heldout_batches)]
    n_params = sum(p.numel() for p in WaveRNN(cfg).parameters())
    return Task(name=f"WaveRNN (hidden {hidden}, {n_params / 1e3:.0f} k params), batch {batch} x "
                     f"{segment_frames * cfg.hop_length} samples",
                make_model=lambda seed: WaveRNN(cfg), sample_batch=sample, loss=loss, heldout=heldout)


# --------------------------------------------------------------------------- optimisers


def optimizers(task: str) -> list[OptimizerSpec]:
    """YellowFin (defaults, untuned), Adam and momentum-0.9 SGD with lr tuned on a 4-point grid.

    Half-decade grids around what a short look found stable (the trainers use Adam at 1e-3);
    momentum SGD at 0.03 already diverged on the acoustic model.
    """
    sgd_grid = (1e-3, 3e-3, 1e-2, 3e-2) if task == "acoustic" else (0.03, 0.1, 0.3, 1.0)
    return [
        OptimizerSpec("YellowFin", lambda ps, lr: YellowFin(ps), note="defaults, untuned"),
        OptimizerSpec("Adam", lambda ps, lr: torch.optim.Adam(ps, lr=lr), lr_grid=(3e-4, 1e-3, 3e-3, 1e-2),
                      note="betas (0.9, 0.999)"),
        OptimizerSpec("SGD+momentum", lambda ps, lr: torch.optim.SGD(ps, lr=lr, momentum=0.9), lr_grid=sgd_grid,
                      note="momentum 0.9"),
    ]


TASKS = {"acoustic": acoustic_task, "vocoder": vocoder_task}
READING = "## Reading"  # from this heading on, docs/bench/optimizers.md is written by hand


# --------------------------------------------------------------------------- report


def _section(task: Task, results: Sequence[RunResult], tuning: dict, specs: Sequence[OptimizerSpec],
             command: str) -> str:
    """``bench.yellowfin.write_report``'s tables for one task, as a section of the combined page."""
    with tempfile.TemporaryDirectory() as tmp:
        text = write_report(task, results, tuning, specs, md_path=Path(tmp) / "r.md", png_path=Path(tmp) / "r.png",
                            command=command)
    lines = [ln for ln in text.splitlines()[1:] if not ln.startswith(("![", "Command:", "Machine:"))]
    text = "\n".join(lines).strip()
    return re.sub(r"^## ", "### ", text, flags=re.M)


def _plot(sections: list[tuple[str, Task, Sequence[RunResult]]], png: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(sections), figsize=(6.5 * len(sections), 4.5), squeeze=False)
    for ax, (key, task, results) in zip(axes[0], sections):
        groups: dict[str, list[RunResult]] = {}
        for r in results:
            groups.setdefault(r.optimizer, []).append(r)
        for name, rs in groups.items():
            n = min(len(r.eval_steps) for r in rs)
            x = rs[0].eval_steps[:n]
            curves = np.array([r.heldout_loss[:n] for r in rs])
            line, = ax.plot(x, curves.mean(0), label=f"{name}" + ("" if rs[0].lr is None else f" (lr {rs[0].lr:g})"))
            ax.fill_between(x, curves.min(0), curves.max(0), color=line.get_color(), alpha=0.2)
        target = default_target(results)
        ax.axhline(target, color="grey", linestyle=":", label=f"target {target:.3f}")
        unit = "mel L1 + duration MSE" if key == "acoustic" else "CE coarse + fine (nats/sample)"
        finite = [v for r in results for v in r.heldout_loss[1:] if np.isfinite(v)]
        if finite:  # the step-0 loss would flatten the rest of the curves
            lo, hi = min(finite), np.percentile(finite, 95)
            ax.set_ylim(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
        title = "acoustic model (tiny)" if key == "acoustic" else "WaveRNN (hidden 128)"
        ax.set(xlabel="step", ylabel=f"held-out loss ({unit})", title=f"{title}: mean and range of seeds")
        ax.legend(fontsize=8)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=["acoustic", "vocoder"])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--eval-every", type=int, default=25)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "bench" / "optimizers.md")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(args.threads)
    command = " ".join([".venv/bin/python -m bench.optimizers", *(sys.argv[1:] if argv is None else argv)])
    start = time.perf_counter()
    sections, texts = [], []
    for key in args.tasks:
        t0 = time.perf_counter()
        task = TASKS[key]()
        specs = optimizers(key)
        results, tuning = compare_optimizers(task, specs, steps=args.steps, seeds=args.seeds,
                                             eval_every=args.eval_every)
        sections.append((key, task, results))
        texts.append(f"## {key}: {task.name}\n\n{_section(task, results, tuning, specs, command)}\n\n"
                     f"Wall time of this task, tuning and evaluations included: {time.perf_counter() - t0:.0f} s.\n")
        log.info("%s done in %.0f s", key, time.perf_counter() - t0)
    png = args.out.with_suffix(".png")
    _plot(sections, png)
    page = "\n".join([
        "# Optimisers on wavern's models: YellowFin, Adam, tuned momentum SGD",
        "",
        f"Command: `{command}` ({time.perf_counter() - start:.0f} s in all).",
        f"Machine: {platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
        "on a CPU shared with other jobs (so the s / step column is only indicative).",
        "",
        f"![held-out loss against steps]({png.name})",
        "",
        *texts,
        "",
    ])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.out.is_file():  # a hand-written reading of the numbers is kept across reruns (check it still holds)
        old = args.out.read_text(encoding="utf-8")
        if READING in old:
            page += old[old.index(READING):]
    args.out.write_text(page, encoding="utf-8")
    print(page)


if __name__ == "__main__":
    main()
