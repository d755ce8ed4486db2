"""Which pruning block shape keeps quality: 16x1 / 4x4 / 8x4 / 16x4 at 10 % density -> docs/bench/block_shapes.md.

From one trainer checkpoint, for each block shape: prune W_hh (per gate) and O1..O4 to the
density by block magnitude in one shot (``wavern.vocoder.pruning.BlockPruner``), measure the
held-out loss (the trainer's own ``evaluate``: fixed held-out segments, coarse + fine CE),
fine-tune ``--steps`` steps with the masks kept (the trainer's own ``train_step``: same seed,
same data order, same learning-rate schedule and precision for every shape), measure again,
export the model and time the engine on it (CPU time of one stream, median of 5 runs).

    .venv/bin/python bench/block_shapes.py --checkpoint /tmp/h15_start.pt --steps 400
    .venv/bin/python bench/block_shapes.py --checkpoint /tmp/h15_dense1762.pt --steps 200
    .venv/bin/python bench/block_shapes.py --engine-only    # re-time all exported files round-robin
    .venv/bin/python bench/block_shapes.py --doc-only       # rewrite the doc from the saved results

/tmp/h15_start.pt is a copy of runs/vocoder/checkpoint.pt; /tmp/h15_dense1762.pt is
``git show a4908f8:assets/training/vocoder-compact.pt`` (step 1762, before the pruning ramp).

Results accumulate in ``--work/results.json`` (one entry per checkpoint step and shape), so
start points can be run one at a time; the doc is rewritten from all of them after each run.
The corpus cache is opened read-only (it is never rebuilt here).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import shlex  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from wavern.training.vocoder_trainer import VocoderTrainConfig, VocoderTrainer, keep_freed_memory  # noqa: E402
from wavern.vocoder.config import BLOCK_SHAPES, VocoderConfig  # noqa: E402
from wavern.vocoder.pruning import BlockPruner  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SR = 22050
log = logging.getLogger("block_shapes")
VERDICT = "### Verdict"  # a section under this heading in the doc is written by hand and kept on rewrites


# ---- the reusable part (tested in tests/training/test_block_shapes.py) ------------------------------

def fixed_density_config(voc: VocoderConfig, block_shape: tuple[int, int], density: float) -> VocoderConfig:
    """``voc`` with another block shape and a pruning schedule that sits at ``density`` from step 1 on.

    With ``prune_start_step=0`` and ``prune_ramp_steps=1`` the target sparsity is ``1 - density``
    at every step >= 1, so :meth:`BlockPruner.step` never changes masks built for that sparsity:
    they stay fixed through fine-tuning.
    """
    return dataclasses.replace(voc, block_rows=block_shape[0], block_cols=block_shape[1],
                               target_density=density, prune_start_step=0, prune_ramp_steps=1)


def reprune(trainer: VocoderTrainer, block_shape: tuple[int, int], density: float) -> BlockPruner:
    """One-shot prune ``trainer``'s model to ``density`` in ``block_shape`` blocks, and keep it there.

    Replaces the trainer's vocoder config (:func:`fixed_density_config`) and pruner; the masks are
    built from the current weights by block L2 norm (per gate for W_hh, as in training) and
    applied. Later ``trainer.train_step()`` calls re-apply them after every optimiser step.

    Returns
    -------
    The new pruner (also ``trainer.pruner``).
    """
    voc = fixed_density_config(trainer.cfg.vocoder, block_shape, density)
    trainer.cfg = dataclasses.replace(trainer.cfg, vocoder=voc)
    pruner = BlockPruner(trainer.model, voc)
    pruner.update_masks(pruner.target_sparsity(max(trainer.step, 1)))
    pruner.apply()
    trainer.pruner = pruner
    return pruner


# ---- measuring ------------------------------------------------------------------------------------

def load_engine(st_path: Path, voc_cfg: VocoderConfig, mel: np.ndarray):
    """The engine's :class:`Vocoder` of an exported file and its frame inputs for ``mel`` (T, 80)."""
    from wavern.engine.vocoder import Vocoder

    voc = Vocoder.load(st_path, cond_blocks=voc_cfg.cond_blocks, hidden_size=voc_cfg.hidden_size,
                       cond_channels=voc_cfg.cond_channels)
    gi = voc.frame_inputs(np.ascontiguousarray(mel, np.float32))
    voc.generate(gi, voc.new_state(seed=1), 512)  # compiled (numba cache) and caches warm
    return voc, gi


def time_generate(voc, gi: np.ndarray, n_samples: int) -> float:
    """Samples per CPU-second (thread time) of one stream making ``n_samples`` from the start."""
    n = min(n_samples, gi.shape[0] * voc.hop)
    st = voc.new_state(seed=1)
    t = time.thread_time()
    voc.generate(gi, st, n)
    return n / (time.thread_time() - t)


def engine_info(voc) -> dict:
    return {"engine_blocks": {k: f"{br}x{bc}" for k, (br, bc) in voc.block_shapes.items()},
            "stored_weights": int(sum(voc.nnz_weights.values()))}


def engine_interleaved(results: list[dict], mel: np.ndarray, *, n_samples: int, rounds: int) -> None:
    """Re-time every result's exported file round-robin (``rounds`` passes over all files), so the
    neighbours' load falls on every shape alike; stores the medians in the results."""
    engines = [load_engine(Path(r["file"]), VocoderConfig.from_dict(r["vocoder_config"]), mel) for r in results]
    rates: list[list[float]] = [[] for _ in results]
    loads = []
    for _ in range(rounds):
        for i, (voc, gi) in enumerate(engines):
            rates[i].append(time_generate(voc, gi, n_samples))
        loads.append(os.getloadavg()[0])
    for r, rs, (voc, _) in zip(results, rates, engines):
        r.update(engine_samples_per_s=float(np.median(rs)), engine_runs=rounds, engine_interleaved=True,
                 engine_load=[min(loads), max(loads)], **engine_info(voc))


def open_trainer(checkpoint: Path, *, cache: Path, work: Path, eval_batches: int) -> VocoderTrainer:
    """A trainer with the run's settings (from the checkpoint), loaded from ``checkpoint``, data from
    the existing cache opened read-only (the trainer's ``open_data`` could rebuild it)."""
    from wavern.training.vocoder_data import VocoderData

    ck = torch.load(checkpoint, map_location="cpu", weights_only=False)
    tc = dict(ck["train_config"])
    tc["vocoder"] = VocoderConfig.from_dict(ck["vocoder_config"])
    tc.update(run_dir=str(work), cache_dir=str(cache), resume=False, init_from=None, progress=False,
              threads=1, eval_batches=eval_batches, export_at_end=False)
    cfg = VocoderTrainConfig(**tc)
    trainer = VocoderTrainer(cfg)
    trainer.load(checkpoint, exact=False)
    trainer.data = VocoderData.open(cache, hop=cfg.vocoder.hop_length)
    return trainer


def engine_mel(data, frames: int) -> np.ndarray:
    """``frames`` log-mel frames (T, 80) from the start of the first held-out utterance onward."""
    start = int(data.frame_offsets[data.split(True)[0]])
    return np.ascontiguousarray(data.mels[start:start + frames], np.float32)


def run_shape(checkpoint: Path, shape: tuple[int, int], args) -> dict:
    from wavern.vocoder.export import export_vocoder

    trainer = open_trainer(checkpoint, cache=args.cache, work=args.work, eval_batches=args.eval_batches)
    step0 = trainer.step
    before = trainer.evaluate()
    density_before = trainer.pruner.density()
    cpu0 = time.process_time()
    pruner = reprune(trainer, shape, args.density)
    pruned = trainer.evaluate()
    log.info("%s from step %d: density %.4f -> %.4f, held-out %.4f -> %.4f", shape, step0, density_before,
             pruner.density(), before["eval_loss"], pruned["eval_loss"])
    curve = [{"step": 0, **pruned}]
    train_rows = []
    for i in range(1, args.steps + 1):
        train_rows.append(trainer.train_step())
        if i % args.eval_every == 0 or i == args.steps:
            curve.append({"step": i, **trainer.evaluate()})
            log.info("%s step +%d: held-out %.4f (train %.4f)", shape, i, curve[-1]["eval_loss"],
                     float(np.mean([r["loss"] for r in train_rows[-args.eval_every:]])))
    fine_cpu = time.process_time() - cpu0
    kept = all(bool((p[~m] == 0).all()) for p, m in ((pruner.params[k], pruner.masks[k]) for k in pruner.masks))
    name = f"{shape[0]}x{shape[1]}"
    st_path = args.work / f"step{step0}_{name}.safetensors"
    export_vocoder(trainer.model, st_path)
    voc, gi = load_engine(st_path, trainer.cfg.vocoder, engine_mel(trainer.data, args.engine_frames))
    sps = float(np.median([time_generate(voc, gi, args.engine_samples) for _ in range(5)]))
    info = engine_info(voc)
    tail = [c["eval_loss"] for c in curve if c["step"] > args.steps - args.tail_steps]
    return {"checkpoint": str(checkpoint), "file": str(st_path), "vocoder_config": trainer.cfg.vocoder.to_dict(),
            "start_step": step0, "shape": name, "density": pruner.density(),
            "density_before": density_before, "before": before, "pruned": pruned, "curve": curve,
            "final": curve[-1], "tail_mean": float(np.mean(tail)), "tail_sd": float(np.std(tail)),
            "tail_n": len(tail), "tail_steps": args.tail_steps, "eval_batches": args.eval_batches,
            "steps": args.steps, "masks_kept": kept, "cpu_s": fine_cpu, "engine_samples_per_s": sps, **info,
            "load": os.getloadavg()[0], "date": time.strftime("%Y-%m-%d %H:%M"),
            "command": "bench/block_shapes.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])}


# ---- report ---------------------------------------------------------------------------------------

def write_doc(results: list[dict], out: Path) -> None:
    starts = sorted({r["start_step"] for r in results}, reverse=True)
    lines = ["## Pruning block shape vs quality (vocoder issue #3)", "",
             "The default vocoder (H = 384, C = 128) pruned in W_hh (per gate) and O1..O4 to 10 % of their "
             "blocks in each shape; W_ih, the biases and the conditioning net stay dense. *File block* is "
             "the pruning shape stored in `vocoder.safetensors`; the engine re-blocks it at load into "
             "8x4, 4x4 or 8x1 (`engine.vocoder.choose_block_kind`), which is the *engine block*.", ""]
    for s in starts:
        rows = sorted((r for r in results if r["start_step"] == s), key=lambda r: BLOCK_SHAPES.index(
            tuple(int(x) for x in r["shape"].split("x"))))
        r0 = rows[0]
        lines += [
            f"### From step {s} ("
            + ("dense" if r0["density_before"] >= 1.0 else f"density {r0['density_before']:.3f} in 16x4 blocks")
            + ", held-out loss "
            f"{r0['before']['eval_loss']:.3f})", "",
            f"Command: `.venv/bin/python {r0['command']}` ({r0['date']}). One-shot prune to "
            f"{r0['density']:.2f} density, then {r0['steps']} fine-tuning steps with the masks kept "
            "(1 thread, bf16 autocast, batch and learning-rate schedule of the run, the same data order "
            "for every shape). Held-out loss = CE(coarse) + CE(fine) in nats, the trainer's `evaluate` "
            f"on {r0['eval_batches']} fixed batches of held-out segments. *Tail mean* = mean (± sd) of "
            f"the held-out evaluations in the last {r0['tail_steps']} steps of fine-tuning "
            f"({r0['tail_n']} evaluations), less sensitive than the final value to the noise of the "
            "last few updates. Engine: the exported model re-blocked by the engine at load (*engine "
            "block*, *stored weights* of W_hh and O1..O4 including zeros inside stored blocks), one "
            f"stream of {r0.get('engine_n', 40000):,} samples, CPU time of the generating thread, "
            + (f"median of {r0['engine_runs']} runs taken round-robin over every file in this doc "
               f"(1-minute load {r0['engine_load'][0]:.1f}-{r0['engine_load'][1]:.1f}; engine of "
               f"{r0.get('engine_git', '?')})"
               if r0.get("engine_interleaved") else "median of 5 runs right after the row's training")
            + "; *load* = 1-minute load average when the row's training finished.", "",
            "| file block | engine block (W_hh) | density | held-out after prune (coarse / fine) | "
            "after fine-tune (final) | tail mean ± sd | engine stored weights | engine samples/s | "
            "RTF @ 22.05 kHz | load |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            p, f = r["pruned"], r["final"]
            lines.append(
                f"| {r['shape']} | {r['engine_blocks']['gru.weight_hh']} | {r['density']:.4f} | "
                f"{p['eval_loss']:.3f} ({p['eval_coarse']:.3f} / {p['eval_fine']:.3f}) | "
                f"{f['eval_loss']:.3f} ({f['eval_coarse']:.3f} / {f['eval_fine']:.3f}) | "
                f"{r['tail_mean']:.3f} ± {r['tail_sd']:.3f} | {r['stored_weights']:,} | "
                f"{r['engine_samples_per_s']:,.0f} | "
                f"{SR / r['engine_samples_per_s']:.3f} | {r['load']:.2f} |")
        lines += ["", "Held-out loss during fine-tuning (step after the prune: loss):", ""]
        for r in rows:
            lines.append(f"- {r['shape']}: " + ", ".join(f"{c['step']}: {c['eval_loss']:.3f}" for c in r["curve"]))
        lines.append("")
    if out.is_file() and VERDICT in out.read_text():  # the hand-written reading of the numbers stays
        lines.append(VERDICT + out.read_text().split(VERDICT, 1)[1].rstrip("\n") + "\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))


def _engine_git_state() -> str:
    """HEAD and whether engine/ has uncommitted changes (the engine timed is the working tree's)."""
    import subprocess

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    dirty = git("status", "--porcelain", "--", "engine")
    return git("rev-parse", "--short", "HEAD") + (" + uncommitted engine/ changes" if dirty else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", type=Path, help="trainer checkpoint (full or compact) to start from")
    ap.add_argument("--shapes", default="16x1,4x4,8x4,16x4")
    ap.add_argument("--density", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=400, help="fine-tuning steps per shape")
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--tail-steps", type=int, default=150, help="evaluations in the last this many steps are averaged")
    ap.add_argument("--eval-batches", type=int, default=16, help="held-out batches (of the run's batch size)")
    ap.add_argument("--cache", type=Path, default=ROOT / "runs" / "vocoder" / "cache")
    ap.add_argument("--work", type=Path, default=Path("/tmp/h15"))
    ap.add_argument("--engine-frames", type=int, default=200)
    ap.add_argument("--engine-samples", type=int, default=40_000)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench" / "block_shapes.md")
    ap.add_argument("--doc-only", action="store_true")
    ap.add_argument("--engine-only", action="store_true",
                    help="re-time every saved result's exported file round-robin, then rewrite the doc")
    ap.add_argument("--engine-rounds", type=int, default=7)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    args.work.mkdir(parents=True, exist_ok=True)
    res_path = args.work / "results.json"
    results = json.loads(res_path.read_text()) if res_path.is_file() else []
    if args.engine_only:
        from wavern.training.vocoder_data import VocoderData

        data = VocoderData.open(args.cache, hop=VocoderConfig().hop_length)
        for r in results:  # rows written before these fields were recorded
            br, bc = (int(x) for x in r["shape"].split("x"))
            r.setdefault("file", str(args.work / f"step{r['start_step']}_{r['shape']}.safetensors"))
            r.setdefault("vocoder_config", VocoderConfig(block_rows=br, block_cols=bc).to_dict())
        engine_interleaved(results, engine_mel(data, args.engine_frames), n_samples=args.engine_samples,
                           rounds=args.engine_rounds)
        state = _engine_git_state()
        for r in results:
            r.update(engine_n=args.engine_samples, engine_git=state)
        res_path.write_text(json.dumps(results, indent=1))
    elif not args.doc_only:
        if args.checkpoint is None:
            ap.error("--checkpoint is required unless --doc-only")
        keep_freed_memory()
        for name in args.shapes.split(","):
            shape = tuple(int(x) for x in name.lower().split("x"))
            r = run_shape(args.checkpoint, shape, args)
            results = [o for o in results if (o["start_step"], o["shape"]) != (r["start_step"], r["shape"])] + [r]
            res_path.write_text(json.dumps(results, indent=1))
    write_doc(results, args.out)
    log.info("wrote %s", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
