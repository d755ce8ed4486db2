"""bench/block_shapes.py helpers: re-pruning a trainer to another block shape and keeping that mask
through the trainer's own steps, against a naive per-block ranking."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from wavern.dsp import MelConfig
from wavern.training.vocoder_data import VocoderData
from wavern.training.vocoder_trainer import VocoderTrainConfig, VocoderTrainer
from wavern.vocoder.config import VocoderConfig
from wavern.vocoder.model import WaveRNN
from wavern.vocoder.pruning import BlockPruner

torch.set_num_threads(1)

_spec = importlib.util.spec_from_file_location(
    "bench_block_shapes", Path(__file__).resolve().parents[2] / "bench" / "block_shapes.py")
bs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bs)

HOP = 16
VOC = VocoderConfig(hidden_size=64, cond_channels=8, cond_blocks=1, mel=MelConfig(hop_length=HOP),
                    target_density=0.25, prune_start_step=2, prune_ramp_steps=4, prune_every_steps=1)
SHAPES = [(16, 1), (4, 4), (8, 4), (16, 4)]


def _naive_keep(w: np.ndarray, br: int, bc: int, density: float) -> np.ndarray:
    """Keep the largest-L2 blocks, dropping floor((1 - density) * n) of them (one slab)."""
    rows, cols = w.shape
    norms = sorted((float(np.sqrt((w[i * br:(i + 1) * br, j * bc:(j + 1) * bc] ** 2).sum())), i, j)
                   for i in range(rows // br) for j in range(cols // bc))
    keep = np.ones_like(w, dtype=bool)
    for _, i, j in norms[:int(np.floor((1.0 - density) * len(norms) + 1e-9))]:
        keep[i * br:(i + 1) * br, j * bc:(j + 1) * bc] = False
    return keep


def _data(n_utts: int = 4, frames: int = 12, seed: int = 0) -> VocoderData:
    """In-memory stand-in for a corpus cache: noise audio, random mels, utterance 0 held out."""
    rng = np.random.default_rng(seed)
    n = frames * HOP
    return VocoderData(audio=(rng.standard_normal(n_utts * n) * 3000).astype(np.int16),
                       mels=rng.standard_normal((n_utts * (frames + 1), 80)).astype(np.float32),
                       sample_offsets=np.arange(n_utts + 1) * n, frame_offsets=np.arange(n_utts + 1) * (frames + 1),
                       held_out=np.arange(n_utts) == 0, ids=[str(i) for i in range(n_utts)], hop=HOP)


def _trainer(tmp_path) -> VocoderTrainer:
    cfg = VocoderTrainConfig(run_dir=str(tmp_path), vocoder=VOC, batch_size=4, segment_frames=2, threads=1,
                             bf16="off", progress=False, eval_batches=1)
    trainer = VocoderTrainer(cfg)
    trainer.data = _data()
    return trainer


@pytest.mark.parametrize("shape", SHAPES)
def test_fixed_density_config_holds_the_target_at_every_step(shape):
    voc = bs.fixed_density_config(VOC, shape, 0.1)
    assert voc.block_shape == shape and voc.hidden_size == VOC.hidden_size and voc.mel == VOC.mel
    torch.manual_seed(0)
    model = WaveRNN(voc)
    pruner = BlockPruner(model, voc)
    pruner.update_masks(pruner.target_sparsity(1))
    masks = {k: v.clone() for k, v in pruner.masks.items()}
    for step in (1, 2, 199, 200, 7000, 10**6):
        assert pruner.target_sparsity(step) == pytest.approx(0.9, abs=1e-12)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))  # an update that would reorder the blocks if masks were refreshed
        pruner.step(step)
        assert all(torch.equal(pruner.masks[k], m) for k, m in masks.items())


@pytest.mark.parametrize("shape", SHAPES)
def test_reprune_matches_naive_ranking_and_masks_hold_through_training(tmp_path, shape):
    trainer = _trainer(tmp_path)
    torch.manual_seed(3)
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.normal_(0.0, 0.3)
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    pruner = bs.reprune(trainer, shape, 0.25)
    br, bc = shape
    assert trainer.cfg.vocoder.block_shape == shape and trainer.pruner is pruner
    for name, slabs in (("gru.weight_hh_l0", 3), ("O1.weight", 1), ("O2.weight", 1), ("O3.weight", 1),
                        ("O4.weight", 1)):
        w = before[name].numpy()
        rows = w.shape[0] // slabs
        expect = np.concatenate([_naive_keep(w[i * rows:(i + 1) * rows], br, bc, 0.25) for i in range(slabs)])
        assert np.array_equal(pruner.masks[name].numpy(), expect), name
        p = dict(trainer.model.named_parameters())[name].detach().numpy()
        assert np.array_equal(p, np.where(expect, w, 0.0)), name  # pruned at once, kept weights untouched
    masks = {k: v.clone() for k, v in pruner.masks.items()}
    for _ in range(3):
        trainer.train_step()
    params = dict(trainer.model.named_parameters())
    for name, mask in masks.items():
        assert torch.equal(trainer.pruner.masks[name], mask), name
        assert bool((params[name].detach()[~mask] == 0).all()), name
        assert not torch.equal(params[name].detach()[mask], before[name][mask]), name  # it did train
    assert np.isfinite(trainer.evaluate()["eval_loss"])
