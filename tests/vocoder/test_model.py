"""WaveRNN: config, teacher-forced form vs the per-sample reference loop, the coarse-input mask."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from wavern.dsp import MelConfig, split_coarse_fine
from wavern.errors import ParameterError
from wavern.vocoder.config import VocoderConfig
from wavern.vocoder.model import WaveRNN, coarse_input_mask, sample_class

torch.set_num_threads(1)

HOP = 16
TINY = VocoderConfig(hidden_size=32, cond_channels=8, cond_blocks=1, mel=MelConfig(hop_length=HOP))


def _model(seed: int = 0, cfg: VocoderConfig = TINY) -> WaveRNN:
    torch.manual_seed(seed)
    m = WaveRNN(cfg)
    with torch.no_grad():  # larger recurrent weights than the default init: states move more
        m.gru.weight_hh_l0.mul_(3.0)
    return m


def _inputs(b: int, frames: int, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    mel = torch.randn(b, frames, 80, generator=g)
    audio = torch.randint(-32768, 32768, (b, frames * HOP), generator=g, dtype=torch.int32).to(torch.int16)
    return mel, audio


# ---------------------------------------------------------------- config
def test_config_round_trip_and_strictness():
    cfg = VocoderConfig(hidden_size=64, block_rows=8, block_cols=4, mel=MelConfig(hop_length=128))
    d = cfg.to_dict()
    assert d["mel"]["hop_length"] == 128
    assert VocoderConfig.from_dict(d) == cfg
    with pytest.raises(ParameterError, match="unknown vocoder config fields"):
        VocoderConfig.from_dict({**d, "hidden": 3})
    with pytest.raises(ParameterError, match="unknown mel"):
        VocoderConfig.from_dict({**d, "mel": {**d["mel"], "foo": 1}})
    with pytest.raises(ParameterError, match="even"):
        VocoderConfig(hidden_size=33)
    with pytest.raises(ParameterError, match="multiple of the block shape"):
        VocoderConfig(hidden_size=40)  # H/2 = 20 is not a multiple of 16
    with pytest.raises(ParameterError, match="block shape"):
        VocoderConfig(block_rows=3)
    with pytest.raises(ParameterError, match="target_density"):
        VocoderConfig(target_density=0.0)
    # a word or a float where an integer belongs is named (they passed, then failed far away)
    for field, value in (("hidden_size", 64.0), ("cond_blocks", 1.5), ("cond_channels", 8.0),
                         ("prune_every_steps", 2.5), ("block_rows", True)):
        with pytest.raises(ParameterError, match=f"{field} must be an integer"):
            VocoderConfig.from_dict({**d, field: value})
    with pytest.raises(ParameterError, match="target_density must be a number"):
        VocoderConfig.from_dict({**d, "target_density": "0.1"})
    with pytest.raises(ParameterError, match=r"cond_blocks must be in \[1, 16\]"):  # the engine cannot load 0
        VocoderConfig(cond_blocks=0)


def test_parameter_shapes_follow_architecture():
    m = WaveRNN(VocoderConfig())  # defaults: H 384, C 128, 3 blocks
    sd = m.state_dict()
    assert sd["cond.conv_in.weight"].shape == (128, 80, 5)
    assert sd["cond.blocks.2.conv1.weight"].shape == (128, 128, 3)
    assert sd["cond.blocks.2.conv2.weight"].shape == (128, 128, 1)
    assert sd["gru.weight_ih_l0"].shape == (3 * 384, 3 + 128)
    assert sd["gru.weight_hh_l0"].shape == (3 * 384, 384)
    assert sd["O1.weight"].shape == (192, 192) and sd["O2.weight"].shape == (256, 192)
    assert sd["O3.weight"].shape == (192, 192) and sd["O4.weight"].shape == (256, 192)


# ---------------------------------------------------------------- teacher forcing vs the loop
@pytest.mark.parametrize("impl", ["loop", "nn"])
def test_teacher_forced_matches_reference_loop(impl):
    m = _model()
    m.gru_impl = impl
    mel, audio = _inputs(1, 5)
    with torch.no_grad():
        states = m.hidden(mel, audio)[:, 0]  # (N, H)
        coarse_logits, fine_logits = m(mel, audio)
    samples, ref_c, ref_f, ref_states = m._reference_loop(mel[0], forced_audio=audio[0])
    assert torch.equal(samples, audio[0])
    assert ref_states.abs().max() > 0.3  # the test would be weak with tiny states
    torch.testing.assert_close(states, ref_states, atol=2e-6, rtol=0)
    torch.testing.assert_close(coarse_logits[0], ref_c, atol=2e-5, rtol=0)
    torch.testing.assert_close(fine_logits[0], ref_f, atol=2e-5, rtol=0)


def test_mel_context_of_the_receptive_field_reproduces_full_utterance_conditioning():
    """The trainer pads segments with 2 + cond_blocks context frames: the cropped conditioning
    then equals the conditioning computed over the whole utterance."""
    m = _model()
    mel, audio = _inputs(2, 12)
    pad, f0, t = 2 + TINY.cond_blocks, 4, 4
    with torch.no_grad():
        full_cond = m.cond(mel)[:, f0:f0 + t]
        seg_cond = m.cond(mel[:, f0 - pad:f0 + t + pad])[:, pad:pad + t]
        short_cond = m.cond(mel[:, f0 - 1:f0 + t + 1])[:, 1:1 + t]
    torch.testing.assert_close(seg_cond, full_cond, atol=1e-5, rtol=0)
    assert not torch.allclose(short_cond, full_cond, atol=1e-3)  # too little context differs at the edges
    seg = audio[:, f0 * HOP:(f0 + t) * HOP]
    window = mel[:, f0 - pad:f0 + t + pad]
    with torch.no_grad():
        silent = m.hidden(window, seg, mel_pad=pad)
        explicit = m.hidden(window, seg, prev_audio=torch.zeros(2, dtype=torch.int16), mel_pad=pad)
        prev = m.hidden(window, seg, prev_audio=audio[:, f0 * HOP - 1], mel_pad=pad)
    assert torch.equal(silent, explicit)  # the default previous sample is digital silence
    assert not torch.allclose(prev[0], silent[0])  # a real previous sample changes the first step


def test_infer_samples_follow_the_sampling_rule():
    m = _model(seed=3)
    mel, _ = _inputs(1, 3, seed=4)
    u = np.random.default_rng(0).random((3 * HOP, 2))
    res = m.infer(mel[0], u, temperature=0.8, return_logits=True)
    assert res.samples.dtype == torch.int16 and res.samples.shape == (3 * HOP,)
    assert torch.equal(m.infer(mel[0], u, temperature=0.8), res.samples)
    coarse, fine = split_coarse_fine(res.samples.numpy())
    for t in range(3 * HOP):  # naive numpy twin of the rule in ARCHITECTURE.md
        for k, (logits, picked) in enumerate(((res.coarse_logits[t], coarse[t]), (res.fine_logits[t], fine[t]))):
            z = logits.double().numpy() / 0.8
            p = np.exp(z - z.max())
            cs = np.cumsum(p)
            expect = min(int(np.argmax(cs > u[t, k] * cs[-1])), 255)
            assert picked == expect
    # The logits of generation are the teacher-forced logits of the generated audio.
    with torch.no_grad():
        cl, fl = m(mel, res.samples[None])
    torch.testing.assert_close(cl[0], res.coarse_logits, atol=2e-5, rtol=0)
    torch.testing.assert_close(fl[0], res.fine_logits, atol=2e-5, rtol=0)


def test_infer_initial_state_is_silence():
    m = _model(seed=5)
    mel, _ = _inputs(1, 1, seed=6)
    res = m.infer(mel[0], np.full((HOP, 2), 0.5), return_logits=True)
    # Teacher forcing with the default prev_audio (x = 0 -> c = 128, f = 0) and h0 = 0.
    with torch.no_grad():
        cl, _ = m(mel, res.samples[None])
    torch.testing.assert_close(cl[0, 0], res.coarse_logits[0], atol=1e-5, rtol=0)


def test_sample_class_edges():
    logits = torch.tensor([0.0, -1e9, 0.0] + [-1e9] * 253)
    assert sample_class(logits, 0.0, 1.0) == 0
    assert sample_class(logits, 0.49, 1.0) == 0
    assert sample_class(logits, 0.51, 1.0) == 2
    assert sample_class(torch.zeros(256), 1 - 1e-17, 1.0) == 255


def test_infer_rejects_bad_arguments():
    m = _model()
    mel, _ = _inputs(1, 2)
    with pytest.raises(ParameterError, match="uniforms"):
        m.infer(mel[0], np.zeros((5, 2)))
    with pytest.raises(ParameterError, match="temperature"):
        m.infer(mel[0], np.zeros((2 * HOP, 2)), temperature=0.0)
    with pytest.raises(ParameterError, match="mel"):
        m.infer(mel[0, :, :40], np.zeros((2 * HOP, 2)))


# ---------------------------------------------------------------- the coarse-input mask
def test_coarse_outputs_do_not_depend_on_current_coarse_sample():
    m = _model(seed=7)
    mel, audio = _inputs(1, 2, seed=8)
    t = 11
    other = audio.clone()
    c, f = split_coarse_fine(audio[0, t].numpy())
    other[0, t] = int(((c + 77) % 256) * 256 + f - 32768)  # change only c_t
    with torch.no_grad():
        ca, fa = m(mel, audio)
        cb, fb = m(mel, other)
    assert torch.equal(ca[0, :t + 1], cb[0, :t + 1])  # coarse logits up to and including t
    assert torch.equal(fa[0, :t], fb[0, :t])
    assert not torch.allclose(fa[0, t], fb[0, t])  # the fine head does see c_t


@pytest.mark.parametrize("impl", ["loop", "nn"])
def test_masked_weights_get_no_gradient_and_stay_zero(impl):
    m = _model(seed=9)
    m.gru_impl = impl
    mask = coarse_input_mask(32, 8)
    assert int((mask == 0).sum()) == 3 * 16
    assert torch.all(m.gru.weight_ih_l0[mask == 0] == 0)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    for s in range(3):
        mel, audio = _inputs(2, 2, seed=10 + s)
        opt.zero_grad()
        m.loss(mel, audio).total.backward()
        g = m.gru.weight_ih_l0.grad
        assert torch.all(g[mask == 0] == 0) and g[mask == 1].abs().max() > 0
        opt.step()
    assert torch.all(m.gru.weight_ih_l0[mask == 0] == 0)


def test_loop_and_nn_gru_give_the_same_loss_and_gradients():
    mel, _ = _inputs(3, 6, seed=12)
    _, audio = _inputs(3, 4, seed=12)
    prev = torch.tensor([5, -7, 300], dtype=torch.int16)
    grads = []
    for impl in ("loop", "nn"):
        m = _model(seed=13)
        m.gru_impl = impl
        loss = m.loss(mel, audio, prev_audio=prev, mel_pad=1)
        loss.total.backward()
        grads.append((loss, {k: p.grad for k, p in m.named_parameters()}))
    (la, ga), (lb, gb) = grads
    torch.testing.assert_close(la.total, lb.total, atol=1e-6, rtol=0)
    for k in ga:
        torch.testing.assert_close(ga[k], gb[k], atol=1e-6, rtol=1e-4, msg=k)


def test_loss_is_the_sum_of_two_cross_entropies():
    m = _model(seed=14)
    mel, audio = _inputs(2, 2, seed=15)
    loss = m.loss(mel, audio)
    cl, fl = m(mel, audio)
    c, f = split_coarse_fine(audio.numpy())
    ce_c = F.cross_entropy(cl.reshape(-1, 256), torch.from_numpy(c).reshape(-1))
    ce_f = F.cross_entropy(fl.reshape(-1, 256), torch.from_numpy(f).reshape(-1))
    torch.testing.assert_close(loss.coarse, ce_c)
    torch.testing.assert_close(loss.fine, ce_f)
    torch.testing.assert_close(loss.total, ce_c + ce_f)


def test_forward_rejects_mismatched_lengths():
    m = _model()
    mel, audio = _inputs(1, 3)
    with pytest.raises(ParameterError, match="samples but"):
        m(mel, audio[:, :-1])
    with pytest.raises(ParameterError, match="int16"):
        m(mel, audio.float())


# ---------------------------------------------------------------- noise injection (input_audio)
def test_input_audio_feeds_only_the_previous_sample_inputs():
    """With ``input_audio`` X, the states are those of teacher forcing on X whenever X and the
    targets A share their coarse bytes (the fine half's c_t comes from A); the loss still scores A."""
    m = _model()
    mel, audio = _inputs(2, 4)
    g = torch.Generator().manual_seed(5)
    fine = torch.randint(0, 256, audio.shape, generator=g)
    same_coarse = (((audio.to(torch.int64) + 32768) >> 8 << 8) + fine - 32768).to(torch.int16)
    assert not torch.equal(same_coarse, audio)
    with torch.no_grad():
        torch.testing.assert_close(m.hidden(mel, audio, input_audio=audio), m.hidden(mel, audio), atol=0, rtol=0)
        noisy = m.hidden(mel, audio, input_audio=same_coarse)
        torch.testing.assert_close(noisy, m.hidden(mel, same_coarse), atol=0, rtol=0)
        assert not torch.allclose(noisy, m.hidden(mel, audio), atol=1e-3)
        half = TINY.hidden_size // 2
        coarse_logits = m.O2(F.relu(m.O1(noisy[..., :half])))
        fine_logits = m.O4(F.relu(m.O3(noisy[..., half:])))
        c, f = (torch.as_tensor(b, dtype=torch.int64) for b in split_coarse_fine(audio.t().numpy()))
        expected = (F.cross_entropy(coarse_logits.reshape(-1, 256), c.reshape(-1))
                    + F.cross_entropy(fine_logits.reshape(-1, 256), f.reshape(-1)))
        torch.testing.assert_close(m.loss(mel, audio, input_audio=same_coarse).total, expected, atol=1e-5, rtol=0)
    # the last input sample is never fed back (it would feed sample N + 1)
    tail = audio.clone()
    tail[:, -1] = 0
    with torch.no_grad():
        torch.testing.assert_close(m.hidden(mel, audio, input_audio=tail), m.hidden(mel, audio), atol=0, rtol=0)
    with pytest.raises(ParameterError, match="input_audio must have audio's shape"):
        m.hidden(mel, audio, input_audio=audio[:, :-1])
