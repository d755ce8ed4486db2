"""Acoustic model: durations, length regulator, batching, inference, bad input, streaming, export."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from wavern.conditioning import acoustic as ac
from wavern.conditioning.acoustic import (AcousticModel, frames_from_samples, regulate, scale_durations,
                                          stream_mel)
from wavern.conditioning.config import AcousticConfig, EncoderConfig
from wavern.conditioning.export import expected_tensors, load_acoustic, save_acoustic
from wavern.errors import ParameterError, VoiceFileError

torch.set_num_threads(1)

N_SYM = 16
PUNCT = 15  # a "punctuation" id for the tests


def _config(kind: str = "window", **kw) -> AcousticConfig:
    enc = EncoderConfig(n_symbols=N_SYM, d_model=16, n_layers=1, n_heads=2, window=4, ffn_channels=24, dropout=0.1)
    base = dict(encoder=enc, speakers=("en-us", "en-gb"), speaker_dim=4, ref_channels=8, ref_layers=1,
                peer_width=4, duration_channels=16, decoder_kind=kind, decoder_layers=2, decoder_d_model=16,
                decoder_heads=2, decoder_window=6, decoder_stride=3, decoder_ffn_channels=24, dropout=0.1)
    base.update(kw)
    return AcousticConfig(**base)


def _model(kind: str = "window", seed: int = 0, **kw) -> AcousticModel:
    torch.manual_seed(seed)
    m = AcousticModel(_config(kind, **kw))
    with torch.no_grad():
        m.mel_mean.uniform_(-8, 0)
        m.mel_std.uniform_(1, 2)
    return m.eval()


# ----------------------------------------------------------------------------- durations
def test_frames_from_samples_sums_to_mel_length_and_rounds_boundaries():
    hop = 256
    samples = np.array([300, 0, 1000, 128, 5000])
    n_frames = 1 + samples.sum() // hop
    frames = frames_from_samples(samples, n_frames, hop=hop)
    assert frames.sum() == n_frames and (frames >= 0).all()
    bounds = np.cumsum(samples)
    naive = [int(np.floor(b / hop + 0.5)) for b in bounds[:-1]] + [n_frames]
    assert np.cumsum(frames).tolist() == naive
    rng = np.random.default_rng(0)
    for _ in range(50):
        s = rng.integers(0, 3000, rng.integers(1, 40))
        n = 1 + int(s.sum()) // hop
        f = frames_from_samples(s, n, hop=hop)
        assert f.sum() == n and (f >= 0).all()
        # every boundary within half a frame of the exact sample boundary (except the pinned last)
        assert np.all(np.abs(np.cumsum(f)[:-1] - np.cumsum(s)[:-1] / hop) <= 0.5)
    with pytest.raises(ParameterError):
        frames_from_samples([], 3, hop=hop)


@pytest.mark.parametrize("speed", [0.5, 1.0, 1.3, 2.0, 3.7])
def test_scale_durations_total_and_monotone(speed):
    d = torch.tensor([[3.0, 0.0, 7.0, 2.5, 11.0, 1.0]])
    out = scale_durations(d, speed)
    assert out.dtype == torch.int64 and bool((out >= 0).all())
    assert int(out.sum()) == int(np.floor(d.sum().item() / speed + 0.5))
    np.testing.assert_array_equal(np.cumsum(out[0].numpy()),
                                  np.floor(np.cumsum(d[0].numpy()) / speed + 0.5).astype(int))
    if speed == 1.0:
        ints = torch.tensor([[4, 0, 2, 9]])
        assert torch.equal(scale_durations(ints, 1.0), ints)


def test_regulate_matches_repeat_interleave():
    d = torch.tensor([[2, 0, 3, 1], [1, 4, 0, 0]])
    reg = regulate(d)
    assert reg.token_index.shape == (2, 6)
    for b in range(2):
        total = int(d[b].sum())
        want = torch.repeat_interleave(torch.arange(4), d[b])
        assert torch.equal(reg.token_index[b, :total], want)
        assert reg.padding_mask[b].tolist() == [t >= total for t in range(6)]
    # relative position inside the token: (k + 0.5) / d for the k-th frame
    torch.testing.assert_close(reg.features[0, 2:5, 0], torch.tensor([0.5, 1.5, 2.5]) / 3)
    torch.testing.assert_close(reg.features[0, 2:5, 1], torch.full((3,), float(np.log1p(3))))
    assert torch.all(reg.features[1, 5:] == 0)


# ----------------------------------------------------------------------------- forward / batching
@pytest.mark.parametrize("kind", ["window", "strided", "conv"])
def test_forward_shapes_and_padded_batch_equals_singles(kind):
    m = _model(kind)
    g = torch.Generator().manual_seed(1)
    lengths = [6, 3]
    ids = torch.zeros(2, 6, dtype=torch.long)
    glob = torch.zeros(2, 6, dtype=torch.bool)
    pad = torch.ones(2, 6, dtype=torch.bool)
    dur = torch.zeros(2, 6, dtype=torch.long)
    for b, n in enumerate(lengths):
        ids[b, :n] = torch.randint(1, N_SYM, (n,), generator=g)
        glob[b, :n] = torch.rand(n, generator=g) < 0.3
        dur[b, :n] = torch.randint(0, 5, (n,), generator=g)
        pad[b, :n] = False
    dur[:, 0] += 1
    spk = torch.tensor([0, 1])
    ref = torch.randn(2, 7, 80, generator=g)
    ref_pad = torch.zeros(2, 7, dtype=torch.bool)
    ref_pad[1, 4:] = True
    dur_padded = dur.clone()
    dur_padded[1, 3:] = 9  # durations under padding must be ignored
    out = m(ids, glob, dur_padded, speaker=spk, padding_mask=pad, reference=ref, reference_padding_mask=ref_pad)
    t_max = int(dur.sum(1).max())
    assert out.mel.shape == (2, t_max, 80) and out.log_durations.shape == (2, 6)
    for b, n in enumerate(lengths):
        one = m(ids[b:b + 1, :n], glob[b:b + 1, :n], dur[b:b + 1, :n], speaker=spk[b:b + 1],
                reference=ref[b:b + 1, :(7 if b == 0 else 4)])
        t = int(dur[b].sum())
        torch.testing.assert_close(out.mel[b:b + 1, :t], one.mel, atol=2e-5, rtol=1e-5)
        torch.testing.assert_close(out.log_durations[b:b + 1, :n], one.log_durations, atol=2e-5, rtol=1e-5)
        assert torch.all(out.mel[b, t:] == 0) and out.frame_padding_mask[b].tolist() == [i >= t for i in range(t_max)]


def test_loss_ignores_padding_and_trains():
    m = _model("conv")
    m.train()
    ids = torch.tensor([[1, 2, 3], [4, 5, 0]])
    pad = torch.tensor([[False, False, False], [False, False, True]])
    glob = torch.zeros_like(pad)
    dur = torch.tensor([[2, 1, 2], [1, 1, 0]])
    target = torch.randn(2, 5, 80)
    ref = torch.randn(2, 4, 80)
    out = m(ids, glob, dur, speaker=torch.tensor([0, 0]), padding_mask=pad, reference=ref,
            reference_present=torch.tensor([True, False]))
    loss = m.loss(out, target, dur, padding_mask=pad)
    keep = ~out.frame_padding_mask
    want_l1 = (out.mel - target).abs()[keep].mean()
    torch.testing.assert_close(loss.mel_l1, want_l1)
    want_mse = ((out.log_durations - torch.log1p(dur.float())) ** 2)[~pad].mean()
    torch.testing.assert_close(loss.duration_mse, want_mse)
    target2 = target.clone()
    target2[1, 2:] = 1e6  # frames past the second utterance's end
    torch.testing.assert_close(m.loss(out, target2, dur, padding_mask=pad).mel_l1, want_l1)
    loss.total.backward()
    no_grad = [n for n, p in m.named_parameters() if p.grad is None]
    assert no_grad == []


# ----------------------------------------------------------------------------- inference
def test_infer_contract_and_determinism():
    m = _model()
    m.train()  # infer must switch to eval itself (no dropout) and restore the mode
    ids = np.array([1, 5, 7, 3, PUNCT])
    glob = np.array([True, False, False, False, True])
    mel, dur = m.infer(ids, glob, speaker="en-gb")
    assert m.training
    assert mel.dtype == np.float32 and mel.shape == (int(dur.sum()), 80)
    assert dur.dtype == np.int64 and dur.shape == (5,) and (dur >= 0).all()
    mel2, dur2 = m.infer(ids, glob, speaker=1)
    np.testing.assert_array_equal(mel, mel2)
    np.testing.assert_array_equal(dur, dur2)


def test_infer_runs_a_partly_training_model_in_eval_mode_and_restores_it():
    m = _model()
    ids, glob = np.array([1, 5, 7, 3, PUNCT]), np.array([True, False, False, False, True])
    ref, _ = m.infer(ids, glob, speaker=0)
    m.decoder.train()  # the root in eval mode, a child training (dropout 0.1)
    mel, _ = m.infer(ids, glob, speaker=0)
    assert m.decoder.training and not m.training
    np.testing.assert_array_equal(mel, ref)


def test_position_table_slices_equal_fresh_tables():
    from wavern.conditioning.encoder import sinusoidal_positions

    for d in (16, 128):
        for n in (1, 7, 1023, 1024, 1025, 3000, 20):
            assert torch.equal(ac._positions(n, d, device="cpu", dtype=torch.float32), sinusoidal_positions(n, d))


def test_speed_scales_durations():
    m = _model()
    ids, glob = np.array([1, 2, 3, 4, 5, 6, 7, 8]), np.zeros(8, bool)
    _, d1 = m.infer(ids, glob, speaker=0)
    with torch.no_grad():
        _, log_d, _ = m.encode(torch.as_tensor(ids)[None], torch.as_tensor(glob)[None], speaker=torch.tensor([0]))
    raw = torch.expm1(log_d[0]).clamp(0, m.config.max_frames_per_token).double()
    for speed in (0.5, 2.0, 3.0):
        _, d = m.infer(ids, glob, speaker=0, speed=speed)
        assert d.sum() == max(1, int(np.floor(raw.sum().item() / speed + 0.5)))
    _, fast = m.infer(ids, glob, speaker=0, speed=2.0)
    _, slow = m.infer(ids, glob, speaker=0, speed=0.5)
    assert fast.sum() < d1.sum() < slow.sum()
    with pytest.raises(ParameterError, match="speed"):
        m.infer(ids, glob, speaker=0, speed=0.0)
    with pytest.raises(ParameterError, match="speed"):
        m.infer(ids, glob, speaker=0, speed=10.0)


def test_reference_changes_style_and_is_validated():
    m = _model()
    with torch.no_grad():
        m.token_fusion.attend[0].weight.normal_()  # make the style matter at init
        m.frame_fusion.edge_logit[2] = 3.0
    ids, glob = np.array([3, 4, 5]), np.zeros(3, bool)
    a, _ = m.infer(ids, glob, speaker=0)
    b, _ = m.infer(ids, glob, speaker=0, reference=np.random.default_rng(0).normal(-5, 2, (20, 80)))
    assert a.shape != b.shape or not np.allclose(a, b)
    with pytest.raises(ParameterError, match="reference"):
        m.infer(ids, glob, speaker=0, reference=np.zeros((5, 40)))
    bad = np.zeros((10, 80), np.float32)
    bad[3, 7] = -np.inf  # one is enough (it ended in an obscure torch error)
    for ref in (bad, np.full((10, 80), np.nan, np.float32)):
        with pytest.raises(ParameterError, match="reference mel holds NaN or infinite"):
            m.infer(ids, glob, speaker=0, reference=ref)


def test_bad_input_has_defined_behaviour():
    m = _model(max_infer_tokens=64)
    # a single phoneme and only punctuation: at least one frame, finite
    for ids, glob in ((np.array([4]), np.array([False])), (np.array([PUNCT] * 3), np.ones(3, bool))):
        mel, dur = m.infer(ids, glob, speaker=0)
        assert dur.sum() >= 1 and mel.shape[0] == dur.sum() and np.isfinite(mel).all()
    # even when every duration is predicted as 0 frames
    with torch.no_grad():
        m.duration.proj.bias.fill_(-30.0)
    mel, dur = m.infer(np.array([PUNCT]), np.array([True]), speaker=0)
    assert dur.tolist() == [1] and mel.shape == (1, 80)
    with pytest.raises(ParameterError, match="symbol table"):  # an unknown symbol id
        m.infer(np.array([1, N_SYM + 3]), np.zeros(2, bool), speaker=0)
    with pytest.raises(ParameterError, match="empty"):
        m.infer(np.array([], dtype=np.int64), np.array([], dtype=bool), speaker=0)
    with pytest.raises(ParameterError, match="max_infer_tokens"):
        m.infer(np.ones(65, np.int64), np.zeros(65, bool), speaker=0)
    with pytest.raises(ParameterError, match="unknown speaker"):
        m.infer(np.array([1]), np.array([False]), speaker="de")
    with pytest.raises(ParameterError, match="equal length"):
        m.infer(np.array([1, 2]), np.array([False]), speaker=0)


def test_longer_than_training_sequences_work():
    m = _model()
    n = 600  # the tests never trained, and real training crops utterances far shorter
    rng = np.random.default_rng(0)
    ids = rng.integers(1, N_SYM, n)
    mel, dur = m.infer(ids, rng.random(n) < 0.1, speaker=0)
    assert mel.shape == (dur.sum(), 80) and np.isfinite(mel).all()


# ----------------------------------------------------------------------------- streaming
def _paragraph():
    ids = np.array([1, 2, 3, PUNCT, 4, 5, PUNCT, 6, 7, 8, 9, PUNCT, 10, PUNCT])
    sent = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3])
    glob = (ids == PUNCT) | np.r_[True, np.diff(sent) > 0]
    return ids, glob, sent


def test_stream_mel_with_no_context_equals_sentence_by_sentence():
    m = _model()
    ids, glob, sent = _paragraph()
    parts = list(stream_mel(m, ids, glob, sent, speaker=0, context_sentences=0))
    assert [p.sentence for p in parts] == [0, 1, 2, 3]
    assert [p.token_start for p in parts] == [0, 4, 7, 12]
    for p in parts:
        sl = slice(p.token_start, p.token_start + len(p.durations))
        mel, dur = m.infer(ids[sl], glob[sl], speaker=0)
        np.testing.assert_array_equal(p.mel, mel)
        np.testing.assert_array_equal(p.durations, dur)


def _window_sizes(monkeypatch) -> list[int]:
    """The token count of every window stream_mel sends to infer_lazy, appended as it runs."""
    seen = []
    real = AcousticModel.infer_lazy

    def spy(self, i, g, **kw):
        seen.append(len(i))
        return real(self, i, g, **kw)

    monkeypatch.setattr(AcousticModel, "infer_lazy", spy)
    return seen


def test_stream_mel_windows_are_bounded(monkeypatch):
    m = _model()
    ids, glob, sent = _paragraph()
    seen = _window_sizes(monkeypatch)
    parts = list(stream_mel(m, ids, glob, sent, speaker=1, context_sentences=1))
    assert seen == [7, 12, 10, 7]  # sentences [0,1], [0,1,2], [1,2,3], [2,3]
    for p in parts:
        assert p.mel.shape == (p.durations.sum(), 80)
    assert sum(len(p.durations) for p in parts) == len(ids)
    with pytest.raises(ParameterError, match="non-decreasing"):
        list(stream_mel(m, ids, glob, sent[::-1], speaker=0))


def test_stream_mel_windows_over_the_token_limit_drop_their_farthest_sentences(monkeypatch):
    """Each window keeps as many neighbours as fit in max_infer_tokens (dropping the farther side
    first, the later one on a tie); the sentence's own frames equal those of the same narrower
    window run directly; a sentence alone over the limit is refused."""
    m = _model(max_infer_tokens=10)
    ids, glob, sent = _paragraph()  # sentences of 4, 3, 5 and 2 tokens
    seen = _window_sizes(monkeypatch)
    parts = list(stream_mel(m, ids, glob, sent, speaker=0, context_sentences=1))
    # windows [0,1] (7), [0,1,2] (12) -> [0,1] (7), [1,2,3] (10), [2,3] (7)
    assert seen == [7, 7, 10, 7]
    mel, dur = m.infer(ids[:7], glob[:7], speaker=0)  # sentence 1's window after the cut: sentences 0 and 1
    np.testing.assert_array_equal(parts[1].durations, dur[4:7])
    np.testing.assert_array_equal(parts[1].mel, mel[dur[:4].sum():])
    m2 = _model(max_infer_tokens=4)
    with pytest.raises(ParameterError, match="max_infer_tokens"):  # sentence 2 alone is 5 tokens
        list(stream_mel(m2, ids, glob, sent, speaker=0, context_sentences=1))


# ----------------------------------------------------------------------------- rows on demand
@pytest.mark.parametrize("layers", [0, 1, 3])
def test_last_rows_equal_the_whole_decoder(layers):
    """FrameDecoder.last_rows against the plain forward over the whole sequence: any window,
    global frames inside, at and beyond its edges (window 6: bands of 3 each side)."""
    m = _model(decoder_layers=layers)
    dec = m.decoder
    rng = np.random.default_rng(layers)
    n = 90
    x = torch.randn(1, n, 16)
    for trial in range(4):
        glob = torch.zeros(n, dtype=torch.bool)
        glob[rng.choice(n, size=int(rng.integers(0, 9)), replace=False)] = True
        glob[0] = trial % 2 == 0
        with torch.no_grad():
            x_last = dec.prefix(x, global_mask=glob[None], padding_mask=None)
            whole = dec(x, global_mask=glob[None], padding_mask=None)[0]
            cache: dict = {}
            for start, stop in [(0, 1), (0, 7), (3, 4), (5, 40), (40, 89), (88, 90), (0, 90), (17, 18)]:
                rows = dec.last_rows(x_last, glob, start, stop, cache)[0]
                np.testing.assert_allclose(rows.numpy(), whole[start:stop].numpy(), rtol=1e-5, atol=1e-5)


def _spy_mel_rows(monkeypatch) -> list[tuple[int, int]]:
    """Record the (start, stop) of every last-layer decode the model makes from now on."""
    calls = []
    real = AcousticModel._mel_rows

    def spy(self, x, g, start, stop, cache):
        calls.append((start, stop))
        return real(self, x, g, start, stop, cache)

    monkeypatch.setattr(AcousticModel, "_mel_rows", spy)
    return calls


def test_lazy_mel_rows_equal_the_one_shot_mel_and_decode_only_what_is_asked(monkeypatch):
    m = _model()
    rng = np.random.default_rng(5)
    ids = rng.integers(1, PUNCT, 60)
    ids[[0, 20, 41, 59]] = PUNCT
    glob = ids == PUNCT
    ref, dur = m.infer(ids, glob, speaker=0)
    t = ref.shape[0]
    assert t > 3 * ac.FIRST_DECODE_FRAMES
    calls = _spy_mel_rows(monkeypatch)
    lazy, dur2 = m.infer_lazy(ids, glob, speaker=0)
    np.testing.assert_array_equal(dur, dur2)
    assert calls == [] and lazy.n_frames == t and not lazy.started
    np.testing.assert_allclose(lazy.rows(10, 15), ref[10:15], rtol=0, atol=1e-5)
    np.testing.assert_allclose(lazy.rows(3, 12), ref[3:12], rtol=0, atol=1e-5)  # before and inside
    np.testing.assert_allclose(lazy.rows(30, 40), ref[30:40], rtol=0, atol=1e-5)  # a gap is filled too
    assert calls == [(10, 15), (3, 10), (15, 40)]
    np.testing.assert_allclose(lazy.full(), ref, rtol=0, atol=1e-5)
    assert calls[-2:] == [(0, 3), (40, t)]
    # full() before any row is the one-shot decode itself
    fresh, _ = m.infer_lazy(ids, glob, speaker=0)
    np.testing.assert_array_equal(fresh.full(), ref)
    with pytest.raises(ParameterError, match="outside"):
        fresh.rows(5, t + 1)


def test_sentence_rows_come_in_two_passes_and_equal_the_whole_sentence(monkeypatch):
    m = _model()
    rng = np.random.default_rng(6)
    ids = rng.integers(1, PUNCT, 90)
    ids[[29, 59, 89]] = PUNCT
    sent = np.repeat([0, 1, 2], 30)
    glob = (ids == PUNCT) | np.r_[True, np.diff(sent) > 0]
    whole = list(stream_mel(m, ids, glob, sent, speaker=0))
    calls = _spy_mel_rows(monkeypatch)
    for ref, part in zip(whole, stream_mel(m, ids, glob, sent, speaker=0)):
        n = part.n_frames
        assert n == ref.n_frames == ref.mel.shape[0] > 2 * ac.FIRST_DECODE_FRAMES
        calls.clear()
        first = part.rows(0, 5)
        assert [b - a for a, b in calls] == [ac.FIRST_DECODE_FRAMES]  # the first pass only
        rest = part.rows(20, n)
        assert len(calls) == 2 and calls[1][1] - calls[0][0] == n  # then the rest of the sentence, once
        part.rows(0, n)
        assert len(calls) == 2
        np.testing.assert_allclose(first, ref.mel[:5], rtol=0, atol=1e-5)
        np.testing.assert_allclose(rest, ref.mel[20:], rtol=0, atol=1e-5)
        np.testing.assert_allclose(part.mel, ref.mel, rtol=0, atol=1e-5)


@pytest.mark.parametrize("kind", ["strided", "conv"])
def test_other_decoders_decode_at_once(kind):
    m = _model(kind)
    ids, glob = np.array([1, 5, 7, 3, PUNCT, 4, 2]), np.array([True, False, False, False, True, False, False])
    lazy, dur = m.infer_lazy(ids, glob, speaker=0)
    ref, _ = m.infer(ids, glob, speaker=0)
    assert lazy.started
    np.testing.assert_array_equal(lazy.rows(1, 3), ref[1:3])


# ----------------------------------------------------------------------------- config
def test_acoustic_config_round_trip_and_strictness():
    cfg = _config("strided")
    d = json.loads(json.dumps(cfg.to_dict()))
    assert AcousticConfig.from_dict(d) == cfg
    with pytest.raises(ParameterError, match="unknown acoustic config fields"):
        AcousticConfig.from_dict({**d, "decoder_layer": 3})
    with pytest.raises(ParameterError, match="unknown encoder config fields"):
        AcousticConfig.from_dict({**d, "encoder": {**d["encoder"], "depth": 2}})
    with pytest.raises(ParameterError, match="decoder_kind"):
        _config("lstm")
    with pytest.raises(ParameterError, match="unique"):
        _config(speakers=("a", "a"))
    assert cfg.speaker_id("en-gb") == 1 and cfg.speaker_id(0) == 0
    with pytest.raises(ParameterError, match="outside"):
        cfg.speaker_id(2)


# ----------------------------------------------------------------------------- export
def test_export_round_trip_fp32_and_fp16(tmp_path):
    m = _model("strided")
    m.prune_fusion()
    ids, glob = np.array([1, 2, 3, 4]), np.array([True, False, False, True])
    mel, dur = m.infer(ids, glob, speaker=1)
    path = save_acoustic(m, tmp_path / "acoustic.safetensors")
    m2 = load_acoustic(path, m.config)
    assert not m2.training
    mel2, dur2 = m2.infer(ids, glob, speaker=1)
    np.testing.assert_array_equal(mel, mel2)
    np.testing.assert_array_equal(dur, dur2)
    assert torch.equal(m2.token_fusion.peer_choice, m.token_fusion.peer_choice)
    half = load_acoustic(save_acoustic(m, tmp_path / "half.safetensors", dtype=torch.float16))
    assert half.config == m.config
    for name, t in m.state_dict().items():
        torch.testing.assert_close(half.state_dict()[name], t, atol=2e-3 * (1 + t.abs().max().item()), rtol=1e-3)
    assert set(expected_tensors(m.config)) == set(m.state_dict())


def _write_raw(path, tensors, config):
    from safetensors.torch import save_file

    save_file(tensors, str(path), metadata={"format": "wavern-acoustic", "format_version": "1",
                                            "config": json.dumps(config.to_dict())})


def test_export_rejects_mismatched_and_corrupt_files(tmp_path):
    m = _model("conv")
    good = save_acoustic(m, tmp_path / "a.safetensors")
    with pytest.raises(VoiceFileError, match="decoder_layers"):  # voice.json disagrees with the weights
        load_acoustic(good, _config("conv", decoder_layers=3))
    with pytest.raises(VoiceFileError, match="not found"):
        load_acoustic(tmp_path / "missing.safetensors")
    corrupt = tmp_path / "corrupt.safetensors"
    corrupt.write_bytes(good.read_bytes()[:200])
    with pytest.raises(VoiceFileError, match="not a readable"):
        load_acoustic(corrupt)
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\xff" * 64)
    with pytest.raises(VoiceFileError):
        load_acoustic(garbage)

    state = {k: v.clone() for k, v in m.state_dict().items()}
    missing = dict(state)
    missing.pop("mel_out.weight")
    _write_raw(tmp_path / "missing_t.safetensors", missing, m.config)
    with pytest.raises(VoiceFileError, match="missing tensor.*mel_out.weight"):
        load_acoustic(tmp_path / "missing_t.safetensors")
    extra = {**state, "surprise": torch.zeros(2)}
    _write_raw(tmp_path / "extra.safetensors", extra, m.config)
    with pytest.raises(VoiceFileError, match="unexpected tensor.*surprise"):
        load_acoustic(tmp_path / "extra.safetensors")
    shaped = {**state, "mel_out.weight": torch.zeros(80, 17)}
    _write_raw(tmp_path / "shape.safetensors", shaped, m.config)
    with pytest.raises(VoiceFileError, match=r"mel_out.weight.*\(80, 17\).*\(80, 16\)"):
        load_acoustic(tmp_path / "shape.safetensors")
    nan = {**state, "mel_mean": torch.full((80,), float("nan"))}
    _write_raw(tmp_path / "nan.safetensors", nan, m.config)
    with pytest.raises(VoiceFileError, match="mel_mean.*NaN"):
        load_acoustic(tmp_path / "nan.safetensors")
    choice = {**state, "token_fusion.peer_choice": torch.tensor([0, 7, 1])}
    _write_raw(tmp_path / "choice.safetensors", choice, m.config)
    with pytest.raises(VoiceFileError, match="peer_choice"):
        load_acoustic(tmp_path / "choice.safetensors")
    from safetensors.torch import save_file

    save_file(state, str(tmp_path / "nometa.safetensors"))
    with pytest.raises(VoiceFileError, match="format"):
        load_acoustic(tmp_path / "nometa.safetensors")


@pytest.mark.parametrize("kind", ["window", "strided", "conv"])
def test_approx_parameters_is_within_a_few_tens_of_percent_of_the_model(kind):
    for kw in ({}, dict(decoder_layers=0), dict(decoder_ffn_channels=96, decoder_ffn_kernel=5), dict(pitch=True)):
        cfg = _config(kind, **kw)
        n = sum(t.numel() for t in AcousticModel(cfg).state_dict().values())
        assert 0.75 * n <= cfg.approx_parameters() <= 1.35 * n, (kind, kw, n, cfg.approx_parameters())


def test_a_config_far_bigger_than_its_weights_file_is_refused_before_the_model_is_built(tmp_path, monkeypatch):
    """A few-kB acoustic file whose config asks for a huge model (a hostile or broken voice) is
    refused from its config and the file's size, without allocating that model."""
    import wavern.conditioning.export as ex

    m = _model("window")
    state = {k: v.clone() for k, v in m.state_dict().items()}
    huge = _config("window", decoder_ffn_channels=4_000_000)
    _write_raw(tmp_path / "huge.safetensors", state, huge)

    def built(*a, **kw):
        raise AssertionError("the model was built")

    monkeypatch.setattr(ex, "AcousticModel", built)
    with pytest.raises(VoiceFileError, match=r"about [\d,]+ numbers, the file holds [\d,]+: not built"):
        load_acoustic(tmp_path / "huge.safetensors")
    with pytest.raises(ParameterError, match="max_frames_per_token must be at most 1000"):
        _config("window", max_frames_per_token=1001)
    with pytest.raises(ParameterError, match="at most 10000 speakers"):
        _config("window", speakers=tuple(f"s{i}" for i in range(10001)))


def test_a_pitch_model_predicts_the_pitch_features_after_the_mel():
    m = _model("window", pitch=True)
    plain = _model("window")
    missing, _ = m.load_state_dict(plain.state_dict(), strict=False)
    assert sorted(missing) == ["pitch_out.bias", "pitch_out.weight"]
    ids = torch.tensor([[1, 2, 3]])
    glob = torch.tensor([[True, False, False]])
    dur = torch.tensor([[3, 2, 4]])
    with torch.no_grad():
        out = m(ids, glob, dur, speaker=torch.tensor([0]))
        ref = plain(ids, glob, dur, speaker=torch.tensor([0]))
    assert out.mel.shape == (1, 9, 82) and ref.mel.shape == (1, 9, 80)
    torch.testing.assert_close(out.mel[..., :80], ref.mel)  # the mel is the plain model's
    target = torch.randn(1, 9, 82)
    loss = m.loss(out, target, dur, n_pitch=2)
    torch.testing.assert_close(loss.mel_l1, (out.mel - target)[..., :80].abs().mean())
    torch.testing.assert_close(loss.pitch_l1, (out.mel - target)[..., 80:].abs().mean())
    torch.testing.assert_close(loss.total, loss.mel_l1 + loss.duration_mse + loss.pitch_l1)
    heavy = m.loss(out, target, dur, n_pitch=2, pitch_weight=5.0)
    torch.testing.assert_close(heavy.total, loss.mel_l1 + loss.duration_mse + 5.0 * loss.pitch_l1)
    lazy, frames = m.infer_lazy(np.array([1, 2, 3, 4]), np.array([True, False, False, True]), speaker=0)
    whole = m.infer(np.array([1, 2, 3, 4]), np.array([True, False, False, True]), speaker=0)[0]
    assert whole.shape == (int(frames.sum()), 82)
    np.testing.assert_allclose(np.concatenate([lazy.rows(0, 3), lazy.rows(3, lazy.n_frames)]), whole, atol=2e-5)


def test_a_prosody_model_reads_the_utterances_espeak_settings():
    from wavern.conditioning.config import PROSODY_DEFAULT
    from wavern.conditioning.frontend.espeak import DEFAULT_PITCH, DEFAULT_PITCH_RANGE, DEFAULT_RATE

    assert PROSODY_DEFAULT == (DEFAULT_RATE, DEFAULT_PITCH, DEFAULT_PITCH_RANGE)
    with pytest.raises(ParameterError, match="prosody"):
        _config(prosody=1)
    m = _model("window", prosody=True)
    plain = _model("window")
    missing, _ = m.load_state_dict(plain.state_dict(), strict=False)
    assert sorted(missing) == ["prosody_in.bias", "prosody_in.weight"]
    ids, glob, dur = torch.tensor([[1, 2, 3]]), torch.tensor([[True, False, False]]), torch.tensor([[3, 2, 4]])
    slow_low = torch.tensor([[130.0, 25.0, 20.0]])
    with torch.no_grad():
        ref = plain(ids, glob, dur, speaker=torch.tensor([0])).mel
        # zero weights at first: the same function as the model it starts from, whatever the input
        torch.testing.assert_close(m(ids, glob, dur, speaker=torch.tensor([0]), prosody=slow_low).mel, ref)
        m.prosody_in.weight.normal_()
        default = m(ids, glob, dur, speaker=torch.tensor([0])).mel
        given = m(ids, glob, dur, speaker=torch.tensor([0]), prosody=torch.tensor([PROSODY_DEFAULT])).mel
        other = m(ids, glob, dur, speaker=torch.tensor([0]), prosody=slow_low).mel
    torch.testing.assert_close(default, given)  # no prosody: espeak-ng's defaults
    torch.testing.assert_close(default, ref)  # at the defaults the input is 0 (bias still 0)
    assert (other - default).abs().max() > 1e-3
    whole = m.infer(np.array([1, 2, 3, 4]), np.array([True, False, False, True]), speaker=0)[0]
    assert np.isfinite(whole).all()
    with pytest.raises(ParameterError, match="prosody"):
        m(ids, glob, dur, speaker=torch.tensor([0]), prosody=torch.tensor([1.0, 2.0, 3.0]))


def test_inference_takes_a_prosody_and_gives_the_forward_pass_with_it():
    from wavern.conditioning.config import PROSODY_DEFAULT, PROSODY_LIMITS, check_prosody

    m = _model("window", prosody=True)
    with torch.no_grad():
        m.prosody_in.weight.normal_()
    ids, glob = np.array([1, 2, 3, 4, 5]), np.array([True, False, False, False, True])
    high = (175.0, 72.0, 80.0)
    mel, dur = m.infer(ids, glob, speaker=0, prosody=high)
    with torch.no_grad():  # independent reference: the training forward pass, with the same durations
        ref = m(torch.as_tensor(ids).unsqueeze(0), torch.as_tensor(glob).unsqueeze(0), torch.as_tensor(dur).unsqueeze(0),
                speaker=torch.tensor([0]), prosody=torch.tensor([high])).mel[0]
    np.testing.assert_allclose(mel, ref.numpy(), atol=2e-5)
    default, dur0 = m.infer(ids, glob, speaker=0)
    np.testing.assert_array_equal(default, m.infer(ids, glob, speaker=0, prosody=PROSODY_DEFAULT)[0])
    assert dur0.tolist() != dur.tolist() or np.abs(mel - default).max() > 1e-3  # the setting is heard
    parts = list(ac.stream_mel(m, ids, glob, np.zeros(5, int), speaker=0, prosody=high, context_sentences=0))
    np.testing.assert_allclose(parts[0].mel, mel, atol=2e-5)
    # the limits are the corpus's draw ranges; outside them (or not three numbers) a clear error
    assert check_prosody([150, 30, 40]) == (150.0, 30.0, 40.0)
    for bad, what in (((175, 80, 50), "pitch 80 is outside"), ((100, 50, 50), "rate 100"),
                      ((175, 50, float("nan")), "pitch_range nan"), ((175, 50), "three numbers"),
                      ("loud", "three numbers"), (None, "three numbers")):
        with pytest.raises(ParameterError, match=what):
            check_prosody(bad)
    with pytest.raises(ParameterError, match="outside"):
        m.infer(ids, glob, speaker=0, prosody=(175, 50, 95))
    assert all(lo < d < hi for d, (lo, hi) in zip(PROSODY_DEFAULT, PROSODY_LIMITS))
    # a model without the input takes only the default, and says why otherwise
    plain = _model("window")
    np.testing.assert_array_equal(plain.infer(ids, glob, speaker=0, prosody=PROSODY_DEFAULT)[0],
                                  plain.infer(ids, glob, speaker=0)[0])
    with pytest.raises(ParameterError, match="no prosody input"):
        plain.infer(ids, glob, speaker=0, prosody=high)
