"""Bench: YellowFin against Adam and momentum SGD, loss against steps.

Run from the repository root::

    .venv/bin/python -m bench.yellowfin              # char-level GRU on assets/sentences/sotu.txt
    .venv/bin/python -m bench.yellowfin --steps 200 --seeds 0   # a quick look

It writes ``docs/bench/yellowfin.md`` (tables) and ``docs/bench/yellowfin.png`` (curves).

The comparison is reusable for other models (the acoustic model, the vocoder)::

    from bench.yellowfin import Task, compare_optimizers, default_optimizers, write_report
    task = Task(name="vocoder", make_model=lambda seed: ..., sample_batch=lambda gen: ...,
                loss=lambda model, batch: ..., heldout=[...])
    results = compare_optimizers(task, default_optimizers(), steps=1000, seeds=(0, 1, 2))

Baselines are tuned on a separate seed with a short run over a small learning-rate grid
(:func:`tune_lr`); YellowFin runs with its defaults, which is the point of it.  Each seed
gives every optimiser the same initial weights and the same sequence of batches.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from wavern.training.yellowfin import YellowFin

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[1]
TEXT_PATH = REPO / "assets" / "sentences" / "sotu.txt"

OptimizerFactory = Callable[[list[nn.Parameter], float | None], torch.optim.Optimizer]


@dataclasses.dataclass(frozen=True)
class Task:
    """What a comparison trains: a model family, its data and its loss.

    Attributes
    ----------
    name : str
        Shown in the report.
    make_model : callable(seed) -> nn.Module
        A fresh model whose initial weights depend only on ``seed``.
    sample_batch : callable(torch.Generator) -> batch
        One training batch drawn with the given generator.
    loss : callable(model, batch) -> scalar tensor
        Mean training loss of a batch.
    heldout : sequence of batches
        Fixed held-out batches; the held-out loss is the mean of ``loss`` over them.
    """

    name: str
    make_model: Callable[[int], nn.Module]
    sample_batch: Callable[[torch.Generator], Any]
    loss: Callable[[nn.Module, Any], torch.Tensor]
    heldout: Sequence[Any]


@dataclasses.dataclass(frozen=True)
class OptimizerSpec:
    """An optimiser to compare; ``lr_grid`` non-empty means: tune lr on it first."""

    name: str
    make: OptimizerFactory
    lr_grid: tuple[float, ...] = ()
    note: str = ""


@dataclasses.dataclass
class RunResult:
    """One optimiser, one seed."""

    optimizer: str
    seed: int
    lr: float | None
    eval_steps: list[int]
    heldout_loss: list[float]
    train_loss: list[float]           # mean training loss over each eval interval
    wall_s: float                     # training time, evaluations excluded
    diverged: bool = False
    tuner: list[dict[str, float]] = dataclasses.field(default_factory=list)  # YellowFin only

    def steps_to(self, target: float) -> int | None:
        """First evaluated step whose held-out loss is <= target (None if never)."""
        for step, loss in zip(self.eval_steps, self.heldout_loss):
            if loss <= target:
                return step
        return None


# --------------------------------------------------------------------------- running


def heldout_loss(task: Task, model: nn.Module) -> float:
    """Mean loss over the task's held-out batches, in eval mode, without gradients."""
    model.eval()
    with torch.no_grad():
        value = float(np.mean([float(task.loss(model, b)) for b in task.heldout]))
    model.train()
    return value


def run_training(task: Task, spec: OptimizerSpec, *, lr: float | None, steps: int, seed: int,
                 eval_every: int) -> RunResult:
    """Train ``task`` from ``seed`` for ``steps`` steps with one optimiser."""
    torch.manual_seed(seed)
    model = task.make_model(seed)
    opt = spec.make(list(model.parameters()), lr)
    gen = torch.Generator().manual_seed(10_000 + seed)   # the batch stream of this seed
    result = RunResult(spec.name, seed, lr, [0], [heldout_loss(task, model)], [math.nan], 0.0)
    interval: list[float] = []
    start = time.perf_counter()
    for step in range(1, steps + 1):
        batch = task.sample_batch(gen)
        opt.zero_grad(set_to_none=True)
        loss = task.loss(model, batch)
        loss.backward()
        opt.step()
        interval.append(float(loss.detach()))
        if not math.isfinite(interval[-1]):
            result.diverged = True
            logger.warning("%s seed %d lr %s diverged at step %d", spec.name, seed, lr, step)
            break
        if isinstance(opt, YellowFin):
            result.tuner.append({"step": float(step), **opt.tuner_stats()})
        if step % eval_every == 0 or step == steps:
            eval_start = time.perf_counter()
            result.eval_steps.append(step)
            result.heldout_loss.append(heldout_loss(task, model))
            start += time.perf_counter() - eval_start      # wall_s counts training only
            result.train_loss.append(float(np.mean(interval)))
            interval = []
    result.wall_s = time.perf_counter() - start
    return result


def tune_lr(task: Task, spec: OptimizerSpec, *, steps: int, seed: int,
            eval_every: int) -> tuple[float, list[tuple[float, float]]]:
    """Best lr of ``spec.lr_grid`` by final held-out loss of a short run on ``seed``."""
    scores = []
    for lr in spec.lr_grid:
        r = run_training(task, spec, lr=lr, steps=steps, seed=seed, eval_every=eval_every)
        final = math.inf if r.diverged else r.heldout_loss[-1]
        scores.append((lr, final))
        logger.info("tune %s lr=%g: held-out %.4f (%.0f s)", spec.name, lr, final, r.wall_s)
    return min(scores, key=lambda s: s[1])[0], scores


def compare_optimizers(task: Task, specs: Sequence[OptimizerSpec], *, steps: int,
                       seeds: Sequence[int] = (0, 1, 2), eval_every: int = 25,
                       tune_steps: int | None = None, tune_seed: int = 100,
                       ) -> tuple[list[RunResult], dict[str, Any]]:
    """Tune the baselines' lr, then run every optimiser on every seed.

    Returns
    -------
    results : list of RunResult
        One per (optimiser, seed).
    tuning : dict
        Per optimiser name: ``{"lr": chosen, "grid": [(lr, held-out loss), ...]}``.
    """
    tune_steps = tune_steps or max(eval_every, steps // 3)
    tuning: dict[str, Any] = {}
    results = []
    for spec in specs:
        lr = None
        if spec.lr_grid:
            lr, grid = tune_lr(task, spec, steps=tune_steps, seed=tune_seed, eval_every=eval_every)
            tuning[spec.name] = {"lr": lr, "grid": grid, "steps": tune_steps}
        for seed in seeds:
            r = run_training(task, spec, lr=lr, steps=steps, seed=seed, eval_every=eval_every)
            logger.info("%s seed %d: held-out %.4f after %d steps (%.0f s)", spec.name, seed,
                        r.heldout_loss[-1], r.eval_steps[-1], r.wall_s)
            results.append(r)
    return results, tuning


def default_optimizers() -> list[OptimizerSpec]:
    """YellowFin (defaults), Adam and momentum-0.9 SGD with lr tuned on a small grid."""
    return [
        OptimizerSpec("YellowFin", lambda ps, lr: YellowFin(ps), note="defaults, untuned"),
        OptimizerSpec("Adam", lambda ps, lr: torch.optim.Adam(ps, lr=lr),
                      lr_grid=(1e-3, 3e-3, 1e-2, 3e-2), note="betas (0.9, 0.999)"),
        OptimizerSpec("SGD+momentum", lambda ps, lr: torch.optim.SGD(ps, lr=lr, momentum=0.9),
                      lr_grid=(0.3, 1.0, 3.0), note="momentum 0.9"),
    ]


# --------------------------------------------------------------------------- the char-level GRU task


class CharGRU(nn.Module):
    """Embedding -> one GRU layer -> linear over the vocabulary."""

    def __init__(self, vocab: int, *, embed: int = 32, hidden: int = 128) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.gru = nn.GRU(embed, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h, _ = self.gru(self.embed(ids))           # (B, T, hidden)
        return self.head(h)                        # (B, T, vocab)


def char_lm_task(*, text_path: Path = TEXT_PATH, seq_len: int = 64, batch: int = 32,
                 hidden: int = 128, heldout_batches: int = 8) -> Task:
    """Next-character prediction on a sentence list: first 90 % of lines train, rest held out."""
    lines = text_path.read_text(encoding="utf-8").splitlines()
    split = int(0.9 * len(lines))
    train_text, test_text = "\n".join(lines[:split]), "\n".join(lines[split:])
    vocab = sorted(set(train_text) | set(test_text))
    index = {c: i for i, c in enumerate(vocab)}
    train = torch.tensor([index[c] for c in train_text], dtype=torch.long)
    test = torch.tensor([index[c] for c in test_text], dtype=torch.long)

    def windows(data: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        starts = torch.randint(0, len(data) - seq_len - 1, (batch,), generator=gen)
        return torch.stack([data[s:s + seq_len + 1] for s in starts.tolist()])  # (B, T+1)

    def loss(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
        logits = model(ids[:, :-1])                                          # (B, T, V)
        return nn.functional.cross_entropy(logits.reshape(-1, len(vocab)), ids[:, 1:].reshape(-1))

    fixed = torch.Generator().manual_seed(12345)
    return Task(name=f"char-level GRU ({hidden} units) on {text_path.name}",
                make_model=lambda seed: CharGRU(len(vocab), hidden=hidden),
                sample_batch=lambda gen: windows(train, gen), loss=loss,
                heldout=[windows(test, fixed) for _ in range(heldout_batches)])


# --------------------------------------------------------------------------- report


def _by_optimizer(results: Sequence[RunResult]) -> dict[str, list[RunResult]]:
    out: dict[str, list[RunResult]] = {}
    for r in results:
        out.setdefault(r.optimizer, []).append(r)
    return out


def default_target(results: Sequence[RunResult]) -> float:
    """The loosest of the optimisers' mean best held-out losses: every one reaches it."""
    groups = _by_optimizer(results)
    return max(float(np.mean([min(r.heldout_loss) for r in rs])) for rs in groups.values())


def write_report(task: Task, results: Sequence[RunResult], tuning: dict[str, Any],
                 specs: Sequence[OptimizerSpec], *, md_path: Path, png_path: Path,
                 command: str, target: float | None = None) -> str:
    """Write the markdown tables and the PNG of held-out loss against steps."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = _by_optimizer(results)
    target = default_target(results) if target is None else target
    notes = {s.name: s.note for s in specs}
    steps = max(r.eval_steps[-1] for r in results)
    seeds = sorted({r.seed for r in results})
    rows = ["| optimiser | lr | final held-out (mean ± sd) | best held-out | steps to "
            f"{target:.3f} (per seed) | mean steps to target | s / step |",
            "|---|---|---|---|---|---|---|"]
    for name, rs in groups.items():
        finals = [r.heldout_loss[-1] for r in rs]
        bests = [min(r.heldout_loss) for r in rs]
        hits = [r.steps_to(target) for r in rs]
        reached = [h for h in hits if h is not None]
        mean_hit = f"{np.mean(reached):.0f}" if len(reached) == len(hits) else \
            f"{len(reached)}/{len(hits)} reached"
        lr = "tuned each step" if name == "YellowFin" else f"{rs[0].lr:g}"
        per_step = np.mean([r.wall_s / max(1, r.eval_steps[-1]) for r in rs])
        rows.append(f"| {name} | {lr} | {np.mean(finals):.4f} ± {np.std(finals):.4f} | "
                    f"{np.mean(bests):.4f} | {', '.join('—' if h is None else str(h) for h in hits)}"
                    f" | {mean_hit} | {per_step:.3f} |")
    tune_rows = ["| optimiser | grid (lr: held-out loss) | chosen |", "|---|---|---|"]
    for name, t in tuning.items():
        grid = ", ".join(f"{lr:g}: {loss:.4f}" for lr, loss in t["grid"])
        tune_rows.append(f"| {name} ({notes.get(name, '')}) | {grid} | {t['lr']:g} |")
    yf = groups.get("YellowFin", [])
    yf_rows = []
    if yf and yf[0].tuner:
        yf_rows = ["| step | lr | mu | h_min | h_max | C | D |", "|---|---|---|---|---|---|---|"]
        marks = sorted({1, 10, 50, 100, 200, steps // 2, steps} & set(range(1, steps + 1)))
        for m in marks:
            vals = [next((s for s in r.tuner if s["step"] == m), None) for r in yf]
            vals = [v for v in vals if v is not None]
            if vals:
                mean = {k: float(np.mean([v[k] for v in vals])) for k in vals[0]}
                yf_rows.append(f"| {m} | {mean['lr']:.3g} | {mean['mu']:.3f} | {mean['h_min']:.3g}"
                               f" | {mean['h_max']:.3g} | {mean['C']:.3g} | {mean['D']:.3g} |")

    fig, axes = plt.subplots(1, 2 if yf_rows else 1, figsize=(12 if yf_rows else 7, 4.5))
    axes = np.atleast_1d(axes)
    for name, rs in groups.items():
        n = min(len(r.eval_steps) for r in rs)
        x = rs[0].eval_steps[:n]
        curves = np.array([r.heldout_loss[:n] for r in rs])
        line, = axes[0].plot(x, curves.mean(0), label=name)
        axes[0].fill_between(x, curves.min(0), curves.max(0), color=line.get_color(), alpha=0.2)
    axes[0].axhline(target, color="grey", linestyle=":", label=f"target {target:.3f}")
    axes[0].set(xlabel="step", ylabel="held-out loss (nats/char)", title=task.name)
    axes[0].set_ylim(top=min(axes[0].get_ylim()[1], 4.5))
    axes[0].legend()
    if yf_rows:
        s = np.array([[t["step"] for t in r.tuner] for r in yf])[0]
        axes[1].plot(s, np.mean([[t["lr"] for t in r.tuner] for r in yf], 0), label="lr")
        axes[1].set(xlabel="step", ylabel="YellowFin lr (mean of seeds)", yscale="log")
        twin = axes[1].twinx()
        twin.plot(s, np.mean([[t["mu"] for t in r.tuner] for r in yf], 0), color="C1", label="mu")
        twin.set(ylabel="YellowFin mu", ylim=(0, 1))
        axes[1].legend(loc="upper left")
        twin.legend(loc="upper right")
    fig.tight_layout()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=110)
    plt.close(fig)

    total_s = sum(r.wall_s for r in results)
    text = "\n".join([
        "# YellowFin against Adam and momentum SGD",
        "",
        f"Task: {task.name}; {steps} steps; seeds {seeds}; held-out loss on "
        f"{len(task.heldout)} fixed batches every {results[0].eval_steps[1]} steps.",
        f"Machine: {platform.machine()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s); {total_s:.0f} s of training in the main runs.",
        "",
        f"Command: `{command}`",
        "",
        "## Result",
        "",
        *rows,
        "",
        f"Target = the loosest mean best held-out loss among the optimisers ({target:.4f}), "
        "so every one can reach it; '—' means that seed never did.",
        "",
        f"![held-out loss against steps]({png_path.name})",
        "",
        "## Baseline tuning",
        "",
        "Each baseline's lr is the best of its grid by held-out loss after a short run on a "
        f"separate seed ({next(iter(tuning.values()))['steps'] if tuning else 0} steps). "
        "YellowFin is not tuned.",
        "",
        *tune_rows,
        "",
        *(["## YellowFin's tuned values (mean over seeds)", "", *yf_rows, ""] if yf_rows else []),
    ]) + "\n"
    md_path.parent.mkdir(parents=True, exist_ok=True)
    md_path.write_text(text, encoding="utf-8")
    return text


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--eval-every", type=int, default=25)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "bench" / "yellowfin.md")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(args.threads)
    task = char_lm_task(hidden=args.hidden)
    specs = default_optimizers()
    results, tuning = compare_optimizers(task, specs, steps=args.steps, seeds=args.seeds,
                                         eval_every=args.eval_every)
    command = " ".join([".venv/bin/python -m bench.yellowfin", *(sys.argv[1:] if argv is None else argv)])
    print(write_report(task, results, tuning, specs, md_path=args.out,
                       png_path=args.out.with_suffix(".png"), command=command))


if __name__ == "__main__":
    main()
