"""Block pruning: the sparsity schedule, block structure of the masks, masks kept through training."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wavern.dsp import MelConfig
from wavern.vocoder.config import VocoderConfig
from wavern.vocoder.model import WaveRNN
from wavern.vocoder.pruning import BlockPruner, block_mask, sparsity_at

torch.set_num_threads(1)


def test_schedule_values():
    kw = dict(target=0.9, start=100, ramp=1000)
    assert sparsity_at(0, **kw) == 0.0
    assert sparsity_at(100, **kw) == 0.0
    assert sparsity_at(600, **kw) == pytest.approx(0.9 * (1 - 0.5 ** 3))  # half way: 87.5 % of Z
    assert sparsity_at(350, **kw) == pytest.approx(0.9 * (1 - 0.75 ** 3))
    assert sparsity_at(1100, **kw) == pytest.approx(0.9)
    assert sparsity_at(5000, **kw) == pytest.approx(0.9)
    values = [sparsity_at(t, **kw) for t in range(0, 1300, 10)]
    assert all(b >= a for a, b in zip(values, values[1:]))  # never decreases


def _naive_block_mask(w: np.ndarray, br: int, bc: int, sparsity: float) -> np.ndarray:
    rows, cols = w.shape
    norms = []
    for i in range(rows // br):
        for j in range(cols // bc):
            norms.append((np.sqrt((w[i * br:(i + 1) * br, j * bc:(j + 1) * bc] ** 2).sum()), i, j))
    n_drop = int(np.floor(sparsity * len(norms)))
    dropped = sorted(norms)[:n_drop]
    mask = np.ones_like(w, dtype=bool)
    for _, i, j in dropped:
        mask[i * br:(i + 1) * br, j * bc:(j + 1) * bc] = False
    return mask


@pytest.mark.parametrize("block", [(16, 4), (4, 4), (16, 1), (8, 4)])
def test_block_mask_keeps_the_largest_blocks(block):
    br, bc = block
    w = torch.randn(64, 32, generator=torch.Generator().manual_seed(0))
    mask = block_mask(w, block, 0.7)
    expect = _naive_block_mask(w.numpy(), br, bc, 0.7)
    assert np.array_equal(mask.numpy(), expect)
    blocks = mask.reshape(64 // br, br, 32 // bc, bc)
    assert torch.all(blocks.all(dim=(1, 3)) == blocks.any(dim=(1, 3)))  # each block all-kept or all-dropped
    n_blocks = (64 // br) * (32 // bc)
    assert int(blocks.any(dim=(1, 3)).sum()) == n_blocks - int(np.floor(0.7 * n_blocks))


def _tiny(**kw) -> VocoderConfig:
    return VocoderConfig(hidden_size=64, cond_channels=8, cond_blocks=1, mel=MelConfig(hop_length=16), **kw)


def test_weight_hh_is_pruned_per_gate():
    cfg = _tiny(target_density=0.25)
    torch.manual_seed(0)
    m = WaveRNN(cfg)
    with torch.no_grad():
        m.gru.weight_hh_l0[128:] *= 10.0  # the n gate's slab dominates a global ranking
    pruner = BlockPruner(m, cfg)
    pruner.update_masks(0.75)
    mask = pruner.masks["gru.weight_hh_l0"]
    for gate in range(3):
        assert mask[gate * 64:(gate + 1) * 64].float().mean().item() == pytest.approx(0.25)
    for name in ("O1.weight", "O2.weight", "O3.weight", "O4.weight"):
        assert pruner.masks[name].float().mean().item() == pytest.approx(0.25, abs=0.02)


def test_masks_hold_through_optimiser_steps_and_state_round_trip():
    cfg = _tiny(target_density=0.2, prune_start_step=2, prune_ramp_steps=6, prune_every_steps=2)
    torch.manual_seed(1)
    m = WaveRNN(cfg)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    pruner = BlockPruner(m, cfg)
    g = torch.Generator().manual_seed(2)
    densities = []
    for step in range(1, 13):
        mel = torch.randn(2, 2, 80, generator=g)
        audio = torch.randint(-3000, 3000, (2, 32), generator=g, dtype=torch.int32).to(torch.int16)
        opt.zero_grad()
        m.loss(mel, audio).total.backward()
        opt.step()
        pruner.step(step)
        for name, p in pruner.params.items():
            assert torch.all(p[~pruner.masks[name]] == 0), (step, name)
        densities.append(pruner.density())
    assert densities[0] == 1.0
    assert all(b <= a for a, b in zip(densities, densities[1:]))
    assert densities[-1] == pytest.approx(0.2, abs=0.01)
    # Pruned weights are truly zero and a whole block at a time.
    w = m.O2.weight.detach()
    blocks = (w != 0).reshape(256 // 16, 16, 32 // 4, 4)
    assert torch.all(blocks.any(dim=(1, 3)) == pruner.masks["O2.weight"].reshape(16, 16, 8, 4).all(dim=(1, 3)))
    # Masks survive a state_dict round trip into a fresh pruner.
    other = BlockPruner(WaveRNN(cfg), cfg)
    other.load_state_dict(pruner.state_dict())
    assert other.sparsity == pruner.sparsity
    for name in pruner.masks:
        assert torch.equal(other.masks[name], pruner.masks[name])


def test_rows_head_pruning_keeps_every_group_of_classes():
    """Global ranking can empty whole groups of classes (rows of O2 / O4); "rows" keeps the same
    number of blocks in every row of blocks, the largest of each row, and leaves W_hh and O1/O3
    to the global rule."""
    from wavern.vocoder.pruning import block_mask_rows

    torch.manual_seed(1)
    w = torch.randn(64, 32)
    w[16:32] *= 0.01  # a quiet group of classes: global pruning drops it entirely
    assert not block_mask(w, (16, 4), 0.75)[16:32].any()
    m = block_mask_rows(w, (16, 4), 0.75)
    for r in range(4):
        kept = m[r * 16:(r + 1) * 16:16].reshape(8, 4)[:, 0]  # one flag per block column
        assert int(kept.sum()) == 2
        norms = w[r * 16:(r + 1) * 16].reshape(16, 8, 4).pow(2).sum(dim=(0, 2))
        assert set(torch.nonzero(kept).flatten().tolist()) == set(torch.topk(norms, 2).indices.tolist())
    cfg = _tiny(target_density=0.25, head_pruning="rows")
    torch.manual_seed(0)
    model = WaveRNN(cfg)
    with torch.no_grad():
        model.O2.weight[:16] *= 100.0
    pruner = BlockPruner(model, cfg)
    pruner.update_masks(0.75)
    o2 = pruner.masks["O2.weight"].float()
    assert all(o2[r * 16:(r + 1) * 16].mean().item() == pytest.approx(0.25) for r in range(256 // 16))
    glob = BlockPruner(WaveRNN(_tiny(target_density=0.25)), _tiny(target_density=0.25))
    glob.params["O2.weight"].data.copy_(model.O2.weight.data)
    glob.update_masks(0.75)
    assert glob.masks["O2.weight"][:16].float().mean().item() > 0.25  # the global rule favours the loud rows
    with pytest.raises(Exception, match="head_pruning"):
        _tiny(head_pruning="columns")


def _naive_regrow(mask: np.ndarray, score: np.ndarray, br: int, bc: int, n_keep: int) -> np.ndarray:
    """Revive the pruned blocks of largest summed score, one at a time, until ``n_keep`` are kept."""
    rows, cols = mask.shape
    mask = mask.copy()
    candidates = []
    for i in range(rows // br):
        for j in range(cols // bc):
            if not mask[i * br, j * bc]:
                candidates.append((-score[i * br:(i + 1) * br, j * bc:(j + 1) * bc].sum(), i * (cols // bc) + j, i, j))
    kept = int(mask[::br, ::bc].sum())
    for _, _, i, j in sorted(candidates)[:max(0, n_keep - kept)]:
        mask[i * br:(i + 1) * br, j * bc:(j + 1) * bc] = True
    return mask


@pytest.mark.parametrize("block", [(16, 4), (8, 8)])
def test_regrow_revives_the_pruned_blocks_of_largest_score(block):
    from wavern.vocoder.pruning import regrow_mask

    br, bc = block
    torch.manual_seed(3)
    w = torch.randn(64, 64)
    mask = block_mask(w, block, 0.9)
    score = torch.rand(64, 64)
    grown = regrow_mask(mask, score, block, 0.8)
    n_blocks = (64 // br) * (64 // bc)
    want = _naive_regrow(mask.numpy(), score.numpy(), br, bc, n_blocks - int(np.floor(0.8 * n_blocks + 1e-9)))
    assert np.array_equal(grown.numpy(), want)
    assert (grown | ~mask).all() and grown.sum() > mask.sum()  # every kept block stays kept
    assert torch.equal(grown, block_mask(w * grown, block, 0.8))  # what the pruning at 0.8 would keep
    assert torch.equal(regrow_mask(mask, score, block, 0.95), mask)  # already denser: unchanged


def test_regrow_by_rows_and_per_gate_keeps_the_pruning_structure():
    cfg = _tiny(target_density=0.25, head_pruning="rows")
    torch.manual_seed(0)
    model = WaveRNN(cfg)
    pruner = BlockPruner(model, cfg)
    pruner.update_masks(0.75)
    pruner.apply()
    with torch.no_grad():
        x = torch.randn(2, 8, model.gru.input_size)
        before = model.gru(x)[0]
    old = {k: m.clone() for k, m in pruner.masks.items()}
    scores = {name: torch.rand_like(p) for name, p in pruner.params.items()}
    pruner.regrow(0.5, scores)
    assert pruner.sparsity == 0.5 and pruner.density() == pytest.approx(0.5, abs=0.01)
    for name, m in pruner.masks.items():
        assert (m | ~old[name]).all()
    h = cfg.hidden_size
    whh = pruner.masks["gru.weight_hh_l0"].float()
    assert all(whh[g * h:(g + 1) * h].mean().item() == pytest.approx(0.5) for g in range(3))
    o2 = pruner.masks["O2.weight"].float()
    assert all(o2[r * 16:(r + 1) * 16].mean().item() == pytest.approx(0.5) for r in range(256 // 16))
    pruner.apply()  # the revived weights are zero: the same function
    with torch.no_grad():
        assert torch.equal(model.gru(x)[0], before)
    with pytest.raises(ValueError, match="only go down"):
        pruner.regrow(0.6, scores)


# ---------------------------------------------------------------- shrinking the hidden state
def _prunable(seed: int = 0) -> WaveRNN:
    """A tiny model (H 64: groups 0, 1 coarse, 2, 3 fine) with its matrices block-pruned to a half."""
    cfg = _tiny(target_density=0.5)
    torch.manual_seed(seed)
    m = WaveRNN(cfg)
    pruner = BlockPruner(m, cfg)
    pruner.update_masks(0.5)
    pruner.apply()
    return m.eval()


def _states_and_logits(m: WaveRNN, mel: torch.Tensor, audio: torch.Tensor):
    with torch.no_grad():
        hs = m.hidden(mel, audio)
        return hs, m._head_logits(hs)


def _freeze_units(m: WaveRNN, units: torch.Tensor, o1_rows: torch.Tensor, o3_rows: torch.Tensor) -> None:
    """In place: ``units`` of the hidden state stay at the initial 0 (update gate shut at 1, nothing in
    but biases), and O1's ``o1_rows`` / O3's ``o3_rows`` read nothing (a constant ReLU output)."""
    H = m.config.hidden_size
    with torch.no_grad():
        for gate in range(3):
            m.gru.weight_ih_l0[gate * H + units] = 0
            m.gru.weight_hh_l0[gate * H + units] = 0
        m.gru.bias_ih_l0[H + units] = 40.0  # z = 1 exactly in float32: h_t = h_{t-1} = 0
        m.gru.bias_hh_l0[H + units] = 0.0
        m.O1.weight[o1_rows] = 0
        m.O3.weight[o3_rows] = 0
        m.O1.bias[o1_rows] = torch.linspace(-0.5, 1.0, len(o1_rows))  # some ReLUs stay on, some off
        m.O3.bias[o3_rows] = torch.linspace(1.0, -0.5, len(o3_rows))


def _stats(hs: torch.Tensor, m: WaveRNN) -> dict:
    h = hs.reshape(-1, m.config.hidden_size)
    half = m.config.hidden_size // 2
    a1, a3 = torch.relu(m.O1(h[:, :half])), torch.relu(m.O3(h[:, half:]))
    return {"h_mean": h.mean(0), "o1_mean": a1.mean(0), "o1_sd": a1.std(0), "o3_mean": a3.mean(0),
            "o3_sd": a3.std(0)}


def test_shrink_hidden_is_exact_for_units_and_rows_that_never_vary():
    """Units 16..31 (coarse group 1) and 32..47 (fine group 2) never leave 0, and one 16-row group of
    each head's hidden layer reads nothing (its ReLU gives a constant, folded into O2's / O4's bias):
    the model without them (H 32, heads 16 wide) gives the same states and logits."""
    from wavern.vocoder.pruning import shrink_hidden, unit_group

    m = _prunable()
    assert unit_group(m.config) == 16
    units = torch.cat([torch.arange(16, 32), torch.arange(32, 48)])
    o1_rows, o3_rows = torch.arange(0, 16), torch.arange(16, 32)
    _freeze_units(m, units, o1_rows, o3_rows)
    with torch.no_grad():  # what the dead head rows send on matters (the check can fail)
        assert (m.O2.weight[:, o1_rows] @ torch.relu(m.O1.bias[o1_rows])).abs().max() > 0.01
        assert (m.O4.weight[:, o3_rows] @ torch.relu(m.O3.bias[o3_rows])).abs().max() > 0.01
    g = torch.Generator().manual_seed(3)
    mel = torch.randn(2, 6, 80, generator=g)
    audio = torch.randint(-20000, 20000, (2, 6 * 16), generator=g, dtype=torch.int32).to(torch.int16)
    hs, (lc, lf) = _states_and_logits(m, mel, audio)
    assert not hs[:, :, units].any()
    keep = torch.cat([torch.arange(0, 16), torch.arange(48, 64)])
    assert hs[:, :, keep].abs().max() > 0.3
    with torch.no_grad():
        small, record = shrink_hidden(m, [1, 2], _stats(hs, m))
    assert small.config.hidden_size == 32 and small.O1.weight.shape == (16, 16) and small.O2.weight.shape == (256, 16)
    assert record["unit_groups"] == [1, 2] and record["O1_row_groups"] == [0] and record["O3_row_groups"] == [1]
    hs2, (sc, sf) = _states_and_logits(small, mel, audio)
    torch.testing.assert_close(hs2, hs[:, :, keep], atol=2e-6, rtol=0)
    torch.testing.assert_close(sc, lc, atol=2e-5, rtol=0)
    torch.testing.assert_close(sf, lf, atol=2e-5, rtol=0)


def test_shrink_hidden_keeps_every_block_whole():
    """Each matrix of the smaller model is the original's kept rows and columns: its blocks are the
    original's blocks there, none split, none new."""
    from wavern.vocoder.pruning import shrink_hidden

    m = _prunable(seed=1)
    stats = {"h_mean": torch.randn(64), "o1_mean": torch.rand(32), "o1_sd": torch.rand(32),
             "o3_mean": torch.rand(32), "o3_sd": torch.rand(32)}
    with torch.no_grad():
        small, rec = shrink_hidden(m, [0, 3], stats)
    keep = torch.arange(16, 48)
    rows = torch.cat([gate * 64 + keep for gate in range(3)])
    big_hh = m.gru.weight_hh_l0.detach()
    sub = big_hh[rows][:, keep]
    # the bias takes the mean of what the dropped units sent on; the kept weights are unchanged
    torch.testing.assert_close(small.gru.weight_hh_l0.detach(), sub, rtol=0, atol=0)
    want_b = m.gru.bias_hh_l0.detach() + big_hh[:, torch.cat([torch.arange(16), torch.arange(48, 64)])] @ \
        stats["h_mean"][torch.cat([torch.arange(16), torch.arange(48, 64)])]
    torch.testing.assert_close(small.gru.bias_hh_l0.detach(), want_b[rows], atol=1e-5, rtol=0)
    o1_keep = torch.tensor([i for i in range(32) if i // 16 not in rec["O1_row_groups"]])
    torch.testing.assert_close(small.O1.weight.detach(), m.O1.weight.detach()[o1_keep][:, 16:32], rtol=0, atol=0)
    for w in (small.gru.weight_hh_l0, small.O1.weight, small.O2.weight, small.O3.weight, small.O4.weight):
        w = w.detach()
        blocks = (w != 0).reshape(w.shape[0] // 16, 16, w.shape[1] // 4, 4)
        assert torch.equal(blocks.any(dim=3).any(dim=1), blocks.all(dim=3).all(dim=1))  # whole or empty
    assert int((small.gru.weight_hh_l0 != 0).sum()) < int((big_hh != 0).sum())


@pytest.mark.parametrize("drop, match", [([0], "as many coarse"), ([0, 1, 2], "as many coarse"),
                                         ([0, 1, 2, 3], "no hidden units"), ([0, 9], "as many coarse")])
def test_shrink_hidden_refuses_an_uneven_or_empty_split(drop, match):
    from wavern.errors import ParameterError
    from wavern.vocoder.pruning import shrink_hidden

    m = _prunable()
    stats = {k: torch.zeros(64 if k == "h_mean" else 32) for k in ("h_mean", "o1_mean", "o1_sd", "o3_mean", "o3_sd")}
    with pytest.raises(ParameterError, match=match):
        shrink_hidden(m, drop, stats)
