"""The numpy acoustic runtime against the torch model it mirrors: same weights and inputs give the
same durations and the same mel to float rounding, whole and row by row, for every decoder kind,
soft and pruned fusion, pitch, prosody and reference clips; the file checks; the shipped voice."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from wavern.conditioning.acoustic import AcousticModel
from wavern.conditioning.config import AcousticConfig, EncoderConfig
from wavern.conditioning.export import expected_tensors, load_acoustic, save_acoustic
from wavern.conditioning.runtime import AcousticRuntime, load_runtime, sinusoids
from wavern.conditioning.encoder import sinusoidal_positions
from wavern.conditioning.stream import stream_mel
from wavern.conditioning.weights import read_acoustic, tensor_specs
from wavern.errors import ParameterError, VoiceFileError

torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[2]
N_SYM = 16
PUNCT = 15
ATOL = 2e-4  # log-mel; the two differ by float32 rounding in a different order of sums


def _config(kind: str = "window", **kw) -> AcousticConfig:
    enc = EncoderConfig(n_symbols=N_SYM, d_model=16, n_layers=2, n_heads=2, window=4, ffn_channels=24)
    base = dict(encoder=enc, speakers=("en-us", "en-gb", "en-sc"), speaker_dim=4, ref_channels=8, ref_layers=2,
                peer_width=4, duration_channels=16, decoder_kind=kind, decoder_layers=2, decoder_d_model=12,
                decoder_heads=2, decoder_window=6, decoder_stride=3, decoder_ffn_channels=20)
    base.update(kw)
    return AcousticConfig(**base)


def _pair(kind: str = "window", *, seed: int = 0, prune: bool = False, **kw) -> tuple[AcousticModel, AcousticRuntime]:
    """A torch model with every parameter random (gates and peer logits too), and the runtime of its weights."""
    torch.manual_seed(seed)
    m = AcousticModel(_config(kind, **kw))
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(torch.randn_like(p) * (0.5 if p.dim() > 1 else 0.3))
        m.duration.proj.bias.fill_(1.6)  # about 4 frames a token
        m.mel_mean.uniform_(-8, 0)
        m.mel_std.uniform_(1, 2)
    if prune:
        m.prune_fusion(gate_threshold=0.3)
    m.eval()
    state = {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}
    return m, AcousticRuntime(m.config, state)


def _sequence(n: int, seed: int, *, every: int = 7) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, PUNCT, n)
    ids[::every] = PUNCT
    return ids, ids == PUNCT


def _same(torch_out, np_out) -> None:
    (mel_t, dur_t), (mel_n, dur_n) = torch_out, np_out
    np.testing.assert_array_equal(dur_n, dur_t)
    assert mel_n.shape == mel_t.shape and mel_n.dtype == np.float32
    np.testing.assert_allclose(mel_n, mel_t, rtol=0, atol=ATOL)


# ----------------------------------------------------------------------------- the file's tensors
@pytest.mark.parametrize("kind", ["window", "strided", "conv"])
def test_tensor_specs_from_the_config_equal_the_torch_models_state_dict(kind):
    for kw in ({}, dict(decoder_layers=0), dict(pitch=True, prosody=True), dict(decoder_d_model=16),
               dict(speaker_dim=16, ref_channels=16, ref_layers=1, duration_kernel=5, decoder_ffn_kernel=5)):
        cfg = _config(kind, **kw)
        assert tensor_specs(cfg) == expected_tensors(cfg), (kind, kw)


def test_sinusoids_equal_the_encoders_table():
    for n, d in ((1, 4), (50, 16), (3000, 12)):
        np.testing.assert_array_equal(sinusoids(n, d), sinusoidal_positions(n, d).numpy())


def test_load_runtime_reads_what_save_acoustic_wrote_and_refuses_a_bad_file(tmp_path):
    m, rt = _pair("window", prune=True, pitch=True)
    path = save_acoustic(m, tmp_path / "acoustic.safetensors")
    ids, glob = _sequence(20, 1)
    _same(m.infer(ids, glob, speaker=1), load_runtime(path, m.config).infer(ids, glob, speaker=1))
    half = load_runtime(save_acoustic(m, tmp_path / "half.safetensors", dtype=torch.float16))
    _same(load_acoustic(tmp_path / "half.safetensors").infer(ids, glob, speaker=2), half.infer(ids, glob, speaker=2))
    with pytest.raises(VoiceFileError, match="decoder_layers"):
        load_runtime(path, _config("window", prune_gate_threshold=0.05, pitch=True, decoder_layers=3))
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(path.read_bytes()[:300])
    with pytest.raises(VoiceFileError, match="not a readable"):
        load_runtime(broken)
    config, state = read_acoustic(path)
    assert config == m.config and state["token_fusion.peer_choice"].dtype == np.int64
    assert all(a.dtype == np.float32 for k, a in state.items() if not k.endswith("peer_choice"))


# ----------------------------------------------------------------------------- against torch
@pytest.mark.parametrize("kind", ["window", "strided", "conv"])
@pytest.mark.parametrize("prune", [False, True])
def test_runtime_equals_the_torch_model(kind, prune):
    m, rt = _pair(kind, prune=prune, seed=3)
    for n, seed, every in ((1, 0, 7), (5, 1, 2), (33, 2, 7), (90, 3, 11), (40, 4, 1000)):
        ids, glob = _sequence(n, seed, every=every)
        for speaker in (0, "en-sc"):
            _same(m.infer(ids, glob, speaker=speaker), rt.infer(ids, glob, speaker=speaker))
    ids, glob = _sequence(50, 5)
    for speed in (0.25, 0.8, 1.7, 4.0):
        _same(m.infer(ids, glob, speaker=1, speed=speed), rt.infer(ids, glob, speaker=1, speed=speed))


def test_pitch_prosody_and_reference_clips_reach_the_runtime_as_the_model():
    m, rt = _pair("window", seed=4, pitch=True, prosody=True)
    ids, glob = _sequence(30, 6)
    ref = np.random.default_rng(7).normal(-4, 2, (25, 80)).astype(np.float32)
    for kw in ({}, dict(prosody=(140.0, 30.0, 80.0)), dict(reference=ref), dict(reference=ref[:1], speed=1.3)):
        a, b = m.infer(ids, glob, speaker=2, **kw), rt.infer(ids, glob, speaker=2, **kw)
        _same(a, b)
        assert b[0].shape[1] == 82
    base, slow = rt.infer(ids, glob, speaker=2)[0], rt.infer(ids, glob, speaker=2, prosody=(140.0, 30.0, 80.0))[0]
    assert base.shape != slow.shape or not np.allclose(base, slow, atol=1e-3)  # the settings matter


def test_rows_on_demand_equal_the_whole_mel_and_the_torch_rows():
    """Rows decoded in parts (with global frames inside and outside the parts, few and many of them:
    both ways of computing global rows) equal the one-shot decode and torch's rows."""
    for every, n in ((9, 70), (2, 40)):
        m, rt = _pair("window", seed=5)
        ids, glob = _sequence(n, 8, every=every)
        whole, dur = rt.infer(ids, glob, speaker=0)
        lazy, dur2 = rt.infer_lazy(ids, glob, speaker=0)
        lazy_t, _ = m.infer_lazy(ids, glob, speaker=0)
        np.testing.assert_array_equal(dur, dur2)
        t = lazy.n_frames
        assert t == whole.shape[0] > 60
        for a, b in ((10, 15), (3, 12), (30, 40), (t - 5, t), (0, t)):
            np.testing.assert_allclose(lazy.rows(a, b), whole[a:b], rtol=0, atol=1e-5)
            np.testing.assert_allclose(lazy.rows(a, b), lazy_t.rows(a, b), rtol=0, atol=ATOL)


def test_stream_mel_gives_the_same_sentences_from_either_model():
    m, rt = _pair("window", seed=6)
    ids, _ = _sequence(120, 9)
    sent = np.repeat(np.arange(4), 30)
    glob = (ids == PUNCT) | np.r_[True, np.diff(sent) > 0]
    parts_t = list(stream_mel(m, ids, glob, sent, speaker=1))
    parts_n = list(stream_mel(rt, ids, glob, sent, speaker=1))
    assert [p.sentence for p in parts_n] == [0, 1, 2, 3]
    for a, b in zip(parts_t, parts_n):
        np.testing.assert_array_equal(a.durations, b.durations)
        np.testing.assert_allclose(b.rows(0, 5), a.rows(0, 5), rtol=0, atol=ATOL)
        np.testing.assert_allclose(b.mel, a.mel, rtol=0, atol=ATOL)


def test_bad_input_is_refused_as_the_model_refuses_it():
    m, rt = _pair("window")
    ids, glob = _sequence(10, 1)
    cases = [
        (dict(ids=[], is_global=[]), "empty"),
        (dict(ids=ids, is_global=glob[:-1]), "equal length"),
        (dict(ids=ids.astype(float), is_global=glob), "integers"),
        (dict(ids=np.r_[ids, N_SYM], is_global=np.r_[glob, False]), "outside the symbol table"),
        (dict(ids=ids, is_global=glob, speed=5.0), "speed"),
        (dict(ids=ids, is_global=glob, speaker="xx"), "unknown speaker"),
        (dict(ids=ids, is_global=glob, reference=np.zeros((0, 80))), "reference mel must have shape"),
        (dict(ids=ids, is_global=glob, reference=np.full((3, 80), np.nan)), "NaN"),
        (dict(ids=ids, is_global=glob, prosody=(140.0, 50.0, 50.0)), "no prosody input"),
    ]
    for kw, match in cases:
        kw = {"speaker": 0, **kw}
        for model in (m, rt):
            with pytest.raises(ParameterError, match=match):
                model.infer(**kw)
    long_ids = np.ones(m.config.max_infer_tokens + 1, np.int64)
    with pytest.raises(ParameterError, match="max_infer_tokens"):
        rt.infer(long_ids, long_ids == 0, speaker=0)


# ----------------------------------------------------------------------------- the shipped voice
def test_the_shipped_voice_runs_the_same_in_numpy_as_in_torch():
    from wavern.conditioning.frontend import analyze
    from wavern.conditioning.frontend.phonemes import SymbolTable

    voice = ROOT / "assets" / "voices" / "default"
    meta = json.loads((voice / "voice.json").read_text())
    cfg = AcousticConfig.from_dict(meta["acoustic"])
    model = load_acoustic(voice / "acoustic.safetensors", cfg)
    rt = load_runtime(voice / "acoustic.safetensors", cfg)
    text = ("Hello there, how are you today? The quick brown fox jumps over the lazy dog. "
            "It costs $12.50, about 3 km away.")
    utt = analyze(text, voice=meta.get("espeak_voice", "en-us"), table=SymbolTable(meta["symbols"]))
    for speaker in (cfg.speakers[0], cfg.speakers[-1]):
        parts_t = list(stream_mel(model, utt.ids, utt.is_global, utt.sentence_of, speaker=speaker))
        parts_n = list(stream_mel(rt, utt.ids, utt.is_global, utt.sentence_of, speaker=speaker))
        assert len(parts_n) == len(parts_t) == 3
        for a, b in zip(parts_t, parts_n):
            np.testing.assert_array_equal(a.durations, b.durations)
            np.testing.assert_allclose(b.mel, a.mel, rtol=0, atol=1e-4)


def test_a_fusion_pruned_down_to_its_style_inputs_still_gives_every_token_and_frame():
    """(review) Pruning keeps the edge with the largest gate, which may be the speaker's: the torch
    model's infer then gave one duration for the whole sequence; both forms now broadcast."""
    m, _ = _pair("window", seed=30)
    with torch.no_grad():
        m.token_fusion.edge_logit.copy_(torch.tensor([-6.0, 2.0, 2.0]))
        m.frame_fusion.edge_logit.copy_(torch.tensor([-6.0, 2.0, -6.0]))
    m.prune_fusion(gate_threshold=0.3)
    assert m.token_fusion.edge_alive.tolist() == [0, 1, 1] and m.frame_fusion.edge_alive.tolist() == [0, 1, 0]
    rt = AcousticRuntime(m.config, {k: v.detach().numpy().copy() for k, v in m.state_dict().items()})
    ids, glob = _sequence(20, 2, every=5)
    _same(m.infer(ids, glob, speaker=0), rt.infer(ids, glob, speaker=0))
    assert rt.infer(ids, glob, speaker=0)[1].shape == (20,)


def test_extreme_gates_and_absurd_references_and_a_zero_mel_std_are_handled(tmp_path):
    import warnings

    m, _ = _pair("window", seed=31)
    with torch.no_grad():
        m.frame_fusion.edge_logit.copy_(torch.tensor([-100.0, 3.0, 3.0]))
    state = {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (1 / (1 + exp(100)) warned of an overflow)
        rt = AcousticRuntime(m.config, state)
        ids, glob = _sequence(12, 3)
        _same(m.infer(ids, glob, speaker=0), rt.infer(ids, glob, speaker=0))
    for model in (m, rt):
        with pytest.raises(ParameterError, match="must be a log-mel"):
            model.infer(ids, glob, speaker=0, reference=np.full((4, 80), 1e19, np.float32))
    with torch.no_grad():
        m.mel_std.zero_()
    path = save_acoustic(m, tmp_path / "flat.safetensors")
    for load in (load_runtime, load_acoustic):
        with pytest.raises(VoiceFileError, match="mel_std' must be positive"):
            load(path)
