"""The LPC vocoder (VocoderConfig.lpc_order > 0): the excitation against an independent numpy
residual, teacher forcing against the per-sample reference loop, the data's past samples and
predictors against the corpus store, and the clear errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from wavern.dsp import MelConfig, log_mel, mel_lpc, mulaw_compress
from wavern.errors import ParameterError
from wavern.training.vocoder_data import VocoderData
from wavern.vocoder.config import VocoderConfig
from wavern.vocoder.export import export_vocoder
from wavern.vocoder.model import WaveRNN, split_bytes

torch.set_num_threads(1)

HOP = 16
ORDER = 6
MEL = MelConfig(hop_length=HOP)
LPC = VocoderConfig(hidden_size=32, cond_channels=8, cond_blocks=1, mel=MEL, lpc_order=ORDER)
EXCITATION_ONLY = dataclasses.replace(LPC, lpc_prediction_input=False)  # p_t not a GRU input
MULAW = dataclasses.replace(EXCITATION_ONLY, excitation="mulaw")  # the excitation mu-law coded
VARIANTS = pytest.mark.parametrize("cfg", [LPC, EXCITATION_ONLY, MULAW], ids=["p-input", "excitation-only", "mulaw"])


def _speech_like(n: int, seed: int) -> np.ndarray:
    """A resonant (predictable) signal: white noise through two resonators, int16."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 600, n)
    y = np.zeros(n)
    for t in range(n):
        y[t] = x[t] + 1.6 * (y[t - 1] if t >= 1 else 0) - 0.8 * (y[t - 2] if t >= 2 else 0)
    return np.clip(y, -32768, 32767).astype(np.int16)


def _utterance(frames: int, seed: int = 0):
    audio = _speech_like(frames * HOP, seed)
    mel = log_mel(audio.astype(np.float32) / 32768, MEL)[:frames]
    return audio, mel


def _model(seed: int = 0, cfg: VocoderConfig = LPC) -> WaveRNN:
    torch.manual_seed(seed)
    m = WaveRNN(cfg)
    with torch.no_grad():
        m.gru.weight_hh_l0.mul_(3.0)
    return m


def _whole_utterance_lpc(mel: np.ndarray) -> torch.Tensor:
    """(1, T + 1, P + 1): no prediction before the start, then every frame's predictor."""
    first = np.zeros((1, ORDER + 1))
    first[0, 0] = 1.0
    return torch.from_numpy(np.concatenate([first, mel_lpc(mel, ORDER, MEL)]))[None]


def test_config_counts_the_prediction_input_and_checks_the_order():
    assert LPC.n_inputs == 4 and dataclasses.replace(LPC, lpc_order=0).n_inputs == 3
    assert EXCITATION_ONLY.n_inputs == 3
    assert WaveRNN(LPC).gru.weight_ih_l0.shape == (3 * 32, 4 + 8)
    assert WaveRNN(EXCITATION_ONLY).gru.weight_ih_l0.shape == (3 * 32, 3 + 8)
    with pytest.raises(ParameterError, match="lpc_prediction_input"):
        dataclasses.replace(LPC, lpc_prediction_input=1)
    with pytest.raises(ParameterError, match="needs lpc_order"):
        dataclasses.replace(LPC, lpc_order=0, excitation="mulaw")
    with pytest.raises(ParameterError, match="excitation"):
        dataclasses.replace(LPC, excitation="alaw")
    assert VocoderConfig.from_dict({k: v for k, v in MULAW.to_dict().items() if k != "excitation"}).excitation \
        == "linear"
    assert VocoderConfig.from_dict({k: v for k, v in LPC.to_dict().items() if k != "lpc_order"}).lpc_order == 0
    assert VocoderConfig.from_dict(LPC.to_dict()) == LPC
    for bad in (-1, 65, 2.0, True):
        with pytest.raises(ParameterError, match="lpc_order"):
            dataclasses.replace(LPC, lpc_order=bad)


@pytest.mark.parametrize("cfg", [LPC, MULAW], ids=["linear", "mulaw"])
def test_targets_are_the_residual_of_the_mel_predictor(cfg):
    audio, mel = _utterance(12)
    a = mel_lpc(mel, ORDER, MEL).astype(np.float32).astype(np.float64)  # stored as float32, summed in float64
    s = audio.astype(np.float64)
    residual = np.empty(s.size)
    for t in range(s.size):  # independent: one sample at a time, zero history before the start
        p = 0.0
        for k in range(1, ORDER + 1):
            p -= a[t // HOP, k] * (s[t - k] if t >= k else 0.0)
        residual[t] = s[t] - (np.round(p) if cfg.excitation == "linear" else p)
    expected = residual if cfg.excitation == "linear" else mulaw_compress(residual)
    m = _model(cfg=cfg)
    got = m.targets(torch.from_numpy(audio)[None], past=torch.zeros(1, ORDER + 1, dtype=torch.int16),
                    lpc=_whole_utterance_lpc(mel))
    np.testing.assert_array_equal(got[0].numpy(), expected)
    assert np.sqrt(np.mean(residual ** 2)) < 0.6 * np.sqrt(np.mean(s ** 2))  # it predicts something


@VARIANTS
@pytest.mark.parametrize("impl", ["loop", "nn"])
def test_teacher_forced_matches_the_reference_loop(impl, cfg):
    m = _model(cfg=cfg)
    m.gru_impl = impl
    audio_np, mel = _utterance(6, seed=3)
    mel_t, audio = torch.from_numpy(mel), torch.from_numpy(audio_np)[None]
    lpc = _whole_utterance_lpc(mel)
    past = torch.zeros(1, ORDER + 1, dtype=torch.int16)
    with torch.no_grad():
        states = m.hidden(mel_t[None], audio, past=past, lpc=lpc)[:, 0]
        coarse, fine = m(mel_t[None], audio, past=past, lpc=lpc)
        loss = m.loss(mel_t[None], audio, past=past, lpc=lpc)
    samples, ref_c, ref_f, ref_states = m._reference_loop(mel_t, forced_audio=audio[0])
    assert torch.equal(samples, audio[0])
    assert ref_states.abs().max() > 0.3
    torch.testing.assert_close(states, ref_states, atol=2e-6, rtol=0)
    torch.testing.assert_close(coarse[0], ref_c, atol=2e-5, rtol=0)
    torch.testing.assert_close(fine[0], ref_f, atol=2e-5, rtol=0)
    c, f = split_bytes(m.targets(audio, past=past, lpc=lpc)[0])
    torch.testing.assert_close(loss.coarse, F.cross_entropy(coarse[0], c))
    torch.testing.assert_close(loss.fine, F.cross_entropy(fine[0], f))


@VARIANTS
def test_generation_adds_the_prediction_back(cfg):
    """Free-running samples are s_t = clip(e_t + round(p_t)): where nothing clipped, the excitation
    of the generated audio is exactly what was drawn, so teacher forcing on it reproduces the
    loop's logits up to the first clipped sample."""
    m = _model(seed=2, cfg=cfg)
    with torch.no_grad():
        for lin in (m.O2, m.O4):  # a narrow, centred excitation: no clipping in this short run
            lin.weight.mul_(0.0)
            lin.bias.copy_(-((torch.arange(256) - 128.0) ** 2) / 8.0)
    _, mel = _utterance(4, seed=6)
    mel_t = torch.from_numpy(mel)
    res = m.infer(mel_t, np.random.default_rng(1).random((4 * HOP, 2)), return_logits=True)
    assert res.samples.abs().max() < 32767
    e = m.targets(res.samples[None], past=torch.zeros(1, ORDER + 1, dtype=torch.int16),
                  lpc=_whole_utterance_lpc(mel))[0]
    c, _ = split_bytes(e)
    assert c.min() >= 100 and c.max() <= 156  # the drawn coarse bytes of a narrow excitation
    assert not torch.equal(e, res.samples.to(torch.int64))  # the prediction was added back
    with torch.no_grad():
        coarse, fine = m(mel_t[None], res.samples[None], past=torch.zeros(1, ORDER + 1, dtype=torch.int16),
                         lpc=_whole_utterance_lpc(mel))
    torch.testing.assert_close(coarse[0], res.coarse_logits, atol=2e-5, rtol=0)
    torch.testing.assert_close(fine[0], res.fine_logits, atol=2e-5, rtol=0)


def test_a_segment_inside_an_utterance_sees_the_same_excitation_as_the_whole():
    """past and lpc row 0 carry what the segment cannot see: its targets equal the whole's."""
    audio, mel = _utterance(10, seed=5)
    m = _model()
    whole = m.targets(torch.from_numpy(audio)[None], past=torch.zeros(1, ORDER + 1, dtype=torch.int16),
                      lpc=_whole_utterance_lpc(mel))[0]
    f0, t = 4, 3
    a = mel_lpc(mel, ORDER, MEL)
    seg = m.targets(torch.from_numpy(audio[f0 * HOP:(f0 + t) * HOP])[None],
                    past=torch.from_numpy(audio[f0 * HOP - ORDER - 1:f0 * HOP])[None],
                    lpc=torch.from_numpy(a[f0 - 1:f0 + t])[None])[0]
    assert torch.equal(seg, whole[f0 * HOP:(f0 + t) * HOP])


def test_vocoder_data_gives_past_samples_and_predictors_of_the_conditioning_mel():
    utts = [_utterance(n, seed=n) for n in (9, 14)]
    lengths = np.array([a.size for a, _ in utts])
    data = VocoderData(audio=np.concatenate([a for a, _ in utts]), mels=np.concatenate([m for _, m in utts]),
                       sample_offsets=np.concatenate([[0], np.cumsum(lengths)]),
                       frame_offsets=np.concatenate([[0], np.cumsum(lengths // HOP)]),
                       held_out=np.array([False, False]), ids=["a", "b"], hop=HOP)
    b = data.segments(np.array([0, 1, 1]), np.array([0, 5, 1]), segment_frames=3, mel_pad=2, lpc_order=ORDER,
                      mel_config=MEL)
    assert b.past.shape == (3, ORDER + 1) and b.lpc.shape == (3, 4, ORDER + 1)
    np.testing.assert_array_equal(b.past[0], 0)  # utterance start: silence, no prediction
    np.testing.assert_array_equal(b.lpc[0, 0], np.eye(ORDER + 1)[0])
    audio1, mel1 = utts[1]
    np.testing.assert_array_equal(b.past[1], audio1[5 * HOP - ORDER - 1:5 * HOP])
    np.testing.assert_array_equal(b.past[2], audio1[HOP - ORDER - 1:HOP])
    c = data.segments(np.array([1]), np.array([0]), segment_frames=2, mel_pad=0, lpc_order=HOP + 3, mel_config=MEL)
    d = data.segments(np.array([1]), np.array([1]), segment_frames=2, mel_pad=0, lpc_order=HOP + 3, mel_config=MEL)
    np.testing.assert_array_equal(d.past[0], np.concatenate([np.zeros(4, np.int16), audio1[:HOP]]))  # 16 exist
    np.testing.assert_allclose(d.lpc[0], mel_lpc(mel1, HOP + 3, MEL)[0:3], rtol=0, atol=1e-9)  # row 0 from the store
    np.testing.assert_array_equal(c.lpc[0, 0], np.eye(HOP + 4)[0])
    np.testing.assert_allclose(b.lpc[1], mel_lpc(mel1, ORDER, MEL)[4:8], rtol=0, atol=1e-9)
    np.testing.assert_allclose(b.lpc[2], mel_lpc(mel1, ORDER, MEL)[0:4], rtol=0, atol=1e-9)
    plain = data.segments(np.array([1]), np.array([5]), segment_frames=3, mel_pad=2)
    assert plain.past is None and plain.lpc is None


def test_lpc_inputs_are_required_and_refused_where_they_do_not_belong(tmp_path):
    audio, mel = _utterance(4)
    m = _model()
    with pytest.raises(ParameterError, match="needs past"):
        m.loss(torch.from_numpy(mel)[None], torch.from_numpy(audio)[None])
    with pytest.raises(ParameterError, match="past must be"):
        m.loss(torch.from_numpy(mel)[None], torch.from_numpy(audio)[None], past=torch.zeros(1, 3, dtype=torch.int16),
               lpc=_whole_utterance_lpc(mel))
    plain = WaveRNN(dataclasses.replace(LPC, lpc_order=0))
    with pytest.raises(ParameterError, match="lpc_order 0"):
        plain.loss(torch.from_numpy(mel)[None], torch.from_numpy(audio)[None],
                   past=torch.zeros(1, ORDER + 1, dtype=torch.int16), lpc=_whole_utterance_lpc(mel))
    with pytest.raises(ParameterError, match="cannot be exported"):
        export_vocoder(m, "/nonexistent/vocoder.safetensors")
    export_vocoder(_model(cfg=EXCITATION_ONLY), tmp_path / "vocoder.safetensors")  # an ordinary 3-input net


@pytest.mark.parametrize("cfg", [EXCITATION_ONLY, MULAW], ids=["linear", "mulaw"])
def test_input_noise_moves_the_fed_back_codes_only(cfg):
    """LPCNet's noise injection with LPC: the noise (input_audio - audio) lands on the excitation
    codes fed back as c_{t-1}, f_{t-1}; the targets, c_t and the predictor stay clean."""
    audio_np, mel = _utterance(5, seed=4)
    audio = torch.from_numpy(audio_np)[None]
    noise = torch.from_numpy(np.random.default_rng(0).integers(-900, 900, audio.shape))
    past, lpc = torch.zeros(1, ORDER + 1, dtype=torch.int16), _whole_utterance_lpc(mel)
    m = _model(cfg=cfg)
    clean_in, target = m._inputs(audio, None, None, past, lpc)
    noisy_in, noisy_target = m._inputs(audio, None, (audio.to(torch.int64) + noise).to(torch.int16), past, lpc)
    assert torch.equal(target, noisy_target)
    fed = torch.clamp(target[:, :-1] + noise[:, :-1], -32768, 32767)  # fed back at samples 1 .. N-1
    c, f = split_bytes(fed)
    expect = torch.stack([c / 127.5 - 1, f / 127.5 - 1], dim=-1).float()
    torch.testing.assert_close(noisy_in[:, 1:, :2], expect, rtol=0, atol=0)
    torch.testing.assert_close(noisy_in[0, :1], clean_in[0, :1], rtol=0, atol=0)  # e_{-1}: before the start
    torch.testing.assert_close(noisy_in[..., 2], clean_in[..., 2], rtol=0, atol=0)  # c_t stays the truth
    assert not torch.equal(noisy_in, clean_in)


# ---- the long-term (pitch) predictor ------------------------------------------------------------
LTP = dataclasses.replace(MULAW, pitch=True, ltp=True)
LINEAR_LTP = dataclasses.replace(EXCITATION_ONLY, pitch=True, ltp=True)
LTP_INPUT = dataclasses.replace(LINEAR_LTP, lpc_prediction_input=True)  # p_t + beta r_{t-T} a GRU input
LTP_BACK = dataclasses.replace(LINEAR_LTP, ltp_input=True)  # r_{t-T} a GRU input
LTP_VARIANTS = pytest.mark.parametrize("cfg", [LTP, LINEAR_LTP, LTP_INPUT, LTP_BACK,
                                               dataclasses.replace(LTP_BACK, ltp_input_taps=5)],
                                       ids=["mulaw", "linear", "input", "back", "back-window"])
LAG = 40  # samples: the synthetic pitch period below (a few frames of HOP 16)


def _pitched(frames: int, seed: int = 0, lag: int = LAG):
    """A speech-like signal, its features (mel + synthetic pitch features: lag 40, periodicity 0.95
    in the second half, unvoiced before), and the whole-utterance past / filters of an LTP model."""
    from wavern.dsp import PITCH_REFERENCE_HZ, ltp_params

    n, half = frames * HOP, frames // 2 * HOP
    x = np.random.default_rng(seed).normal(0, 600, n)
    x[half:] = 0.0
    x[half::lag] = 8000.0  # glottal-like pulses every lag samples in the second half
    y = np.zeros(n)
    for t in range(n):  # the resonators of _speech_like
        y[t] = x[t] + 1.6 * (y[t - 1] if t >= 1 else 0) - 0.8 * (y[t - 2] if t >= 2 else 0)
    audio = np.clip(y, -32768, 32767).astype(np.int16)
    mel = log_mel(audio.astype(np.float32) / 32768, MEL)[:frames]
    pitch = np.zeros((frames, 2), np.float32)
    pitch[:, 0] = np.log2(22050 / lag / PITCH_REFERENCE_HZ)
    pitch[frames // 2:, 1] = 0.95
    feats = np.concatenate([mel, pitch], axis=1)
    k = LTP.history_frames
    rows = np.zeros((k + frames, LTP.lpc_columns))
    rows[:k, 0] = 1.0  # before the start: no prediction, no long-term prediction
    rows[k:, :ORDER + 1] = mel_lpc(mel, ORDER, MEL)
    rows[k:, ORDER + 1:] = ltp_params(pitch, MEL)
    past = torch.zeros(1, LTP.history_samples, dtype=torch.int16)
    return audio, feats, past, torch.from_numpy(rows)[None]


def test_ltp_config_and_params():
    from wavern.dsp import ltp_params

    assert LTP.lpc_columns == ORDER + 3 and LTP.history_samples == ORDER + 1 + 401
    assert LTP.history_frames == -(-401 // HOP)
    with pytest.raises(ParameterError, match="ltp"):
        dataclasses.replace(MULAW, ltp=True)  # no pitch features
    with pytest.raises(ParameterError, match="ltp"):
        VocoderConfig(pitch=True, ltp=True)  # no LPC
    params = ltp_params(np.array([[0.0, 0.95], [1.0, 0.7], [0.0, 0.3], [-5.0, 0.9], [0.0, 1.0]], np.float32))
    np.testing.assert_allclose(params[:, 0], [np.rint(22050 / 120), np.rint(22050 / 240), 0, 391, np.rint(22050 / 120)])
    np.testing.assert_allclose(params[:, 1], [0.48, 0.225, 0.0, 0.39, 0.48], atol=1e-6)
    feats = np.array([[0.0, 0.95], [1.0, 0.7], [0.0, 0.3], [-5.0, 0.9], [0.0, 1.0]], np.float32)
    for k, want in ((1.5, [0.72, 0.3375, 0.0, 0.585, 0.72]), (2.5, [0.95, 0.5625, 0.0, 0.95, 0.95]),
                    (0.0, [0.0] * 5)):
        scaled = ltp_params(feats, gain_scale=k)  # a sampling-time factor, capped at LTP_GAIN_MAX
        np.testing.assert_allclose(scaled[:, 1], want, atol=1e-6)
        np.testing.assert_array_equal(scaled[:, 0], params[:, 0])  # the lags of the unscaled gains, even at 0
    with pytest.raises(ParameterError, match="LTP gain scale"):
        ltp_params(feats, gain_scale=3.5)


def _residual_one_period_back(audio, rows, offset: int = 0):
    """Independently, one sample at a time (zero history before the start): the residual
    r = s - p of the short-term predictor, and r_{t-T+offset} and beta of each sample's frame."""
    a = rows[0].numpy().astype(np.float32).astype(np.float64)
    k = LTP.history_frames
    s = audio.astype(np.float64)
    r, back, gain = np.zeros(s.size), np.zeros(s.size), np.zeros(s.size)
    for t in range(s.size):
        row = a[k + t // HOP]
        p = 0.0
        for j in range(1, ORDER + 1):
            p -= row[j] * (s[t - j] if t >= j else 0.0)
        r[t] = s[t] - p
        lag, gain[t] = int(row[ORDER + 1]), row[ORDER + 2]
        back[t] = r[t - lag + offset] if lag and t >= lag - offset else 0.0
    return r, back, gain


@LTP_VARIANTS
def test_ltp_targets_are_the_innovation_of_both_predictors(cfg):
    audio, feats, past, rows = _pitched(12)
    r, back, gain = _residual_one_period_back(audio, rows)
    innovation = r - gain * back
    m = _model(cfg=cfg)
    got = m.targets(torch.from_numpy(audio)[None], past=past, lpc=rows)[0].numpy()
    code = mulaw_compress(innovation) if cfg.excitation == "mulaw" else np.clip(np.rint(innovation), -32768, 32767)
    np.testing.assert_array_equal(got, code)
    voiced = slice(6 * HOP + LAG, None)  # where the long-term predictor works, it removes something
    assert np.sum(innovation[voiced] ** 2) < np.sum(r[voiced] ** 2)


@LTP_VARIANTS
@pytest.mark.parametrize("impl", ["loop", "nn"])
def test_ltp_teacher_forced_matches_the_reference_loop_and_generation_adds_both_back(impl, cfg):
    m = _model(cfg=cfg)
    m.gru_impl = impl
    audio_np, feats, past, rows = _pitched(8, seed=3)
    mel_t, audio = torch.from_numpy(feats), torch.from_numpy(audio_np)[None]
    with torch.no_grad():
        coarse, fine = m(mel_t[None], audio, past=past, lpc=rows)
    samples, ref_c, ref_f, _ = m._reference_loop(mel_t, forced_audio=audio[0])
    assert torch.equal(samples, audio[0])
    torch.testing.assert_close(coarse[0], ref_c, atol=2e-5, rtol=0)
    torch.testing.assert_close(fine[0], ref_f, atol=2e-5, rtol=0)
    with torch.no_grad():  # free running: teacher forcing on the generated audio gives the loop's logits back
        for lin in (m.O2, m.O4):
            lin.weight.mul_(0.0)
            lin.bias.copy_(-((torch.arange(256) - 128.0) ** 2) / 8.0)
    res = m.infer(mel_t, np.random.default_rng(1).random((8 * HOP, 2)), return_logits=True)
    with torch.no_grad():
        coarse, fine = m(mel_t[None], res.samples[None], past=past, lpc=rows)
    torch.testing.assert_close(coarse[0], res.coarse_logits, atol=2e-5, rtol=0)
    torch.testing.assert_close(fine[0], res.fine_logits, atol=2e-5, rtol=0)


def test_the_widest_period_window_at_the_longest_lag_stays_inside_the_history():
    from wavern.dsp import LTP_INPUT_SCALE, LTP_MAX_LAG, LTP_MAX_TAPS

    cfg = dataclasses.replace(LTP_BACK, ltp_input_taps=LTP_MAX_TAPS)  # r_{t-T-9} .. r_{t-T+9}
    audio_np, feats, _, rows = _pitched(40, seed=4, lag=4000)  # a pitch far below the lowest lag
    assert int(rows[0, -1, ORDER + 1]) == LTP_MAX_LAG - LTP_MAX_TAPS // 2
    past = torch.zeros(1, cfg.history_samples, dtype=torch.int16)
    m = _model(cfg=cfg)
    mel_t, audio = torch.from_numpy(feats), torch.from_numpy(audio_np)[None]
    with torch.no_grad():
        coarse, fine = m(mel_t[None], audio, past=past, lpc=rows)
    _, ref_c, ref_f, _ = m._reference_loop(mel_t, forced_audio=audio[0])  # (raised IndexError at lag 400)
    torch.testing.assert_close(coarse[0], ref_c, atol=2e-5, rtol=0)
    torch.testing.assert_close(fine[0], ref_f, atol=2e-5, rtol=0)
    inputs, _ = m._inputs(audio, None, None, past, rows)
    _, oldest, _ = _residual_one_period_back(audio_np, rows, offset=-(LTP_MAX_TAPS // 2))
    np.testing.assert_allclose(inputs[0, :, 3].numpy() * LTP_INPUT_SCALE, oldest, rtol=1e-5, atol=1e-3)
    assert np.count_nonzero(oldest) > 0


@LTP_VARIANTS
def test_ltp_segment_inside_an_utterance_sees_the_same_innovation_as_the_whole(cfg):
    audio, feats, past0, rows = _pitched(40, seed=5)
    m = _model(cfg=cfg)
    whole = m.targets(torch.from_numpy(audio)[None], past=past0, lpc=rows)[0]
    k, n_past = LTP.history_frames, LTP.history_samples
    f0, t = 30, 4  # far enough in for a full history
    seg = m.targets(torch.from_numpy(audio[f0 * HOP:(f0 + t) * HOP])[None],
                    past=torch.from_numpy(audio[f0 * HOP - n_past:f0 * HOP])[None],
                    lpc=rows[:, f0:f0 + k + t])[0]
    assert torch.equal(seg, whole[f0 * HOP:(f0 + t) * HOP])


def test_ltp_input_is_the_residual_one_period_back():
    from wavern.dsp import LTP_INPUT_SCALE

    assert LTP_BACK.input_names == ("c_prev", "f_prev", "c_cur", "ltp_residual") and LTP_BACK.n_inputs == 4
    assert dataclasses.replace(LTP_BACK, lpc_prediction_input=True).n_inputs == 5
    with pytest.raises(ParameterError, match="ltp_input"):
        dataclasses.replace(EXCITATION_ONLY, ltp_input=True)
    audio, feats, past, rows = _pitched(12, seed=2)
    _, back, _ = _residual_one_period_back(audio, rows)
    m = _model(cfg=LTP_BACK)
    inputs, _ = m._inputs(torch.from_numpy(audio)[None], None, None, past, rows)
    np.testing.assert_allclose(inputs[0, :, 3].numpy(), back / LTP_INPUT_SCALE, rtol=1e-6, atol=1e-7)
    window = dataclasses.replace(LTP_BACK, ltp_input_taps=3)  # r_{t-T-1}, r_{t-T}, r_{t-T+1}
    assert window.input_names[3:] == ("ltp_residual-1", "ltp_residual", "ltp_residual+1")
    inputs, _ = _model(cfg=window)._inputs(torch.from_numpy(audio)[None], None, None, past, rows)
    for col, d in ((3, -1), (4, 0), (5, 1)):
        _, shifted, _ = _residual_one_period_back(audio, rows, offset=d)
        np.testing.assert_allclose(inputs[0, :, col].numpy(), shifted / LTP_INPUT_SCALE, rtol=1e-6, atol=1e-7)
    with pytest.raises(ParameterError, match="ltp_input_taps"):
        dataclasses.replace(LTP_BACK, ltp_input_taps=2)
    # period_scale (the trainer's --period-input-fade) scales those columns only, row by row
    a2 = torch.from_numpy(np.stack([audio, audio]))
    p2, r2 = past.expand(2, -1), rows.expand(2, -1, -1)
    wm = _model(cfg=window)
    plain, t0 = wm._inputs(a2, None, None, p2, r2)
    faded, t1 = wm._inputs(a2, None, None, p2, r2, torch.tensor([1.0, 0.25]))
    assert torch.equal(t0, t1) and torch.equal(faded[0], plain[0]) and torch.equal(faded[1, :, :3], plain[1, :, :3])
    np.testing.assert_allclose(faded[1, :, 3:].numpy(), 0.25 * plain[1, :, 3:].numpy(), rtol=1e-6, atol=1e-8)
    with pytest.raises(ParameterError, match="period_scale"):
        wm._inputs(a2, None, None, p2, r2, torch.tensor([1.0]))
    with pytest.raises(ParameterError, match="no period input|has none"):
        _model(cfg=dataclasses.replace(window, ltp_input=False))._inputs(
            torch.from_numpy(audio)[None], None, None, past, rows, torch.tensor([0.5]))
    assert np.count_nonzero(back) > 0 and np.all(back[:6 * HOP] == 0)  # unvoiced first half: no lag


def test_period_draws_stand_in_for_the_residual_one_period_back():
    """period_draws (the trainer's --period-input-self) against a sample-by-sample reference: where the
    period reaches into the segment, the residual there is r_j + (d_j - i_j); the period input and the
    long-term prediction read it, and the target is the innovation from it to the true r_t."""
    from wavern.dsp import LTP_INPUT_SCALE

    audio, feats, past, rows = _pitched(12, seed=4)
    cfg = dataclasses.replace(LTP_BACK, ltp_input_taps=3)
    m = _model(cfg=cfg)
    a1 = torch.from_numpy(audio)[None]
    true_codes = m.targets(a1, past=past, lpc=rows)
    draws = true_codes + torch.from_numpy(np.random.default_rng(7).integers(-900, 900, audio.size))[None]
    inputs, targets = m._inputs(a1, None, None, past, rows, period_draws=draws)
    r, true_back, gain = _residual_one_period_back(audio, rows)
    a = rows[0].numpy().astype(np.float32).astype(np.float64)
    lags = a[LTP.history_frames + np.arange(audio.size) // HOP, ORDER + 1].astype(int)
    own = r + (draws[0].numpy() - np.clip(np.rint(r - gain * true_back), -32768, 32767))
    for t in range(audio.size):  # the history before the segment is zero here: no lag reaches past it
        lag = lags[t]
        back = own[t - lag] if lag and t >= lag else 0.0
        assert targets[0, t] == np.clip(np.rint(r[t] - gain[t] * back), -32768, 32767)
        for col, d in ((3, -1), (4, 0), (5, 1)):
            want = own[t - lag + d] if lag and t >= lag - d else 0.0
            w = want / LTP_INPUT_SCALE
            assert abs(float(inputs[0, t, col]) - w) <= 1e-6 * max(1.0, abs(w))
    assert np.count_nonzero(lags) > 0 and not torch.equal(targets, true_codes)
    same_in, same_t = m._inputs(a1, None, None, past, rows, period_draws=true_codes)  # the true codes: no change
    plain_in, plain_t = m._inputs(a1, None, None, past, rows)
    assert torch.equal(same_t, plain_t)
    torch.testing.assert_close(same_in, plain_in, rtol=0, atol=1e-6)
    with pytest.raises(ParameterError, match="period_draws must be"):
        m._inputs(a1, None, None, past, rows, period_draws=draws[:, :-1])
    with pytest.raises(ParameterError, match="period input"):
        _model(cfg=LINEAR_LTP)._inputs(a1, None, None, past, rows, period_draws=draws)


def test_draw_samples_each_byte_from_its_teacher_forced_softmax():
    """A head that puts all mass on one class draws it; a flat head draws all 256 about equally."""
    audio, feats, past, rows = _pitched(8, seed=6)
    m = _model(cfg=LTP_BACK)
    mel, a1 = torch.from_numpy(feats)[None], torch.from_numpy(audio)[None]
    with torch.no_grad():
        m.O2.weight.zero_()
        m.O2.bias.copy_(torch.where(torch.arange(256) == 131, 50.0, -50.0))  # coarse: always 131
        m.O4.weight.zero_()
        m.O4.bias.zero_()  # fine: uniform
    d = m.draw(mel, a1, generator=torch.Generator().manual_seed(0), past=past, lpc=rows)
    assert d.shape == a1.shape and d.dtype == torch.int64
    coarse, fine = split_bytes(d)
    assert torch.all(coarse == 131)
    counts = np.bincount(fine.numpy().ravel(), minlength=256)
    n = fine.numel()  # chi-square of a fair 256-sided die, 255 degrees of freedom: 99.9th percentile 330
    assert np.sum((counts - n / 256) ** 2 / (n / 256)) < 330
    again = m.draw(mel, a1, generator=torch.Generator().manual_seed(0), past=past, lpc=rows)
    assert torch.equal(d, again)


# ---- the glottal phase input --------------------------------------------------------------------
LTP_PHASE = dataclasses.replace(LTP_BACK, ltp_input_taps=3, phase_input=2)


def _generation_phase(rows: torch.Tensor, n: int) -> np.ndarray:
    """The phase generation gives sample t (wavern.dsp.phase_step over the frames' lags)."""
    from wavern.dsp import phase_step

    lags = rows[0, LTP.history_frames:, ORDER + 1].numpy()
    out, phi = np.zeros(n), 0.0
    for t in range(n):
        out[t] = phi
        phi = phase_step(phi, float(lags[t // HOP]))
    return out


def test_phase_input_columns_are_its_harmonics_where_voiced():
    assert LTP_PHASE.input_names[6:] == ("phase_sin1", "phase_cos1", "phase_sin2", "phase_cos2")
    assert LTP_PHASE.n_inputs == 10
    with pytest.raises(ParameterError, match="phase_input"):
        dataclasses.replace(LINEAR_LTP, phase_input=1)  # no period input
    with pytest.raises(ParameterError, match="phase_input"):
        dataclasses.replace(LTP_PHASE, phase_input=9)
    audio, feats, past, rows = _pitched(12, seed=2)
    phase = torch.from_numpy(np.random.default_rng(0).random((1, audio.size)))
    m = _model(cfg=LTP_PHASE)
    inputs, _ = m._inputs(torch.from_numpy(audio)[None], None, None, past, rows, None, phase)
    from wavern.dsp import PHASE_INPUT_GAIN

    voiced = (np.arange(audio.size) >= 6 * HOP) * PHASE_INPUT_GAIN  # _pitched: the second half has a lag
    ang = 2 * np.pi * phase[0].numpy()
    for col, want in ((6, np.sin(ang)), (7, np.cos(ang)), (8, np.sin(2 * ang)), (9, np.cos(2 * ang))):
        np.testing.assert_allclose(inputs[0, :, col].numpy(), want * voiced, atol=1e-5)
    plain, _ = _model(cfg=dataclasses.replace(LTP_PHASE, phase_input=0))._inputs(
        torch.from_numpy(audio)[None], None, None, past, rows)
    assert torch.equal(inputs[..., :6], plain)
    with pytest.raises(ParameterError, match="phase"):
        m._inputs(torch.from_numpy(audio)[None], None, None, past, rows)
    with pytest.raises(ParameterError, match="phase"):
        _model(cfg=LTP_BACK)._inputs(torch.from_numpy(audio)[None], None, None, past, rows, None, phase)


def test_phase_teacher_forced_with_the_generation_phase_matches_the_reference_loop():
    """The reference loop advances its phase by 1 / T a voiced sample (from 0 where the voicing
    starts); teacher forcing with that phase gives its logits."""
    m = _model(cfg=LTP_PHASE)
    audio_np, feats, past, rows = _pitched(8, seed=3)
    phase = _generation_phase(rows, audio_np.size)
    assert phase[4 * HOP - 1] == 0 and phase[4 * HOP] == 0 and phase[4 * HOP + 1] == pytest.approx(1 / LAG)
    assert phase[4 * HOP + LAG] == pytest.approx(0, abs=1e-9) or phase[4 * HOP + LAG] == pytest.approx(1, abs=1e-9)
    mel_t, audio = torch.from_numpy(feats), torch.from_numpy(audio_np)[None]
    with torch.no_grad():
        coarse, fine = m(mel_t[None], audio, past=past, lpc=rows, phase=torch.from_numpy(phase)[None])
        off, _ = m(mel_t[None], audio, past=past, lpc=rows, phase=torch.from_numpy((phase + 0.5) % 1)[None])
    samples, ref_c, ref_f, _ = m._reference_loop(mel_t, forced_audio=audio[0])
    torch.testing.assert_close(coarse[0], ref_c, atol=2e-5, rtol=0)
    torch.testing.assert_close(fine[0], ref_f, atol=2e-5, rtol=0)
    assert (off[0] - ref_c).abs().max() > 1e-2  # another phase: other logits
