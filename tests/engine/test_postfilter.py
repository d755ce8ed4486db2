"""Formant post-filter: against scipy's lfilter, chunk invariance, the envelope it reads from a
mel, what it does to noise in spectral valleys, and its place in a voice's every path."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from scipy.signal import lfilter

from wavern.dsp import MelConfig, log_mel
from wavern.engine.chunk import SpeakConfig
from wavern.engine.postfilter import Postfilter, PostfilterConfig, postfilter_coefficients
from wavern.errors import ParameterError, VoiceFileError

SR = 22050


def _resonance(n: int, freq: float, seed: int = 0, *, bw: float = 80.0) -> np.ndarray:
    """White noise through a two-pole resonance at ``freq`` Hz (a one-formant 'vowel')."""
    r = np.exp(-np.pi * bw / SR)
    a = [1.0, -2 * r * np.cos(2 * np.pi * freq / SR), r * r]
    x = lfilter([1.0], a, np.random.default_rng(seed).standard_normal(n))
    return (0.3 * x / np.abs(x).max()).astype(np.float32)


@pytest.mark.parametrize("order", [4, 2, 7, 13])  # the filter sums in chains of four, the rest one by one
def test_constant_coefficients_equal_scipy_lfilter_of_the_whole_filter(order):
    pf = Postfilter(PostfilterConfig(order=order), hop=32)
    rng = np.random.default_rng(1)
    a = np.array([1.0, -0.9, 0.5, -0.2, 0.1]) if order == 4 else np.poly(0.9 * rng.uniform(-1, 1, order))
    lag = np.arange(order + 1)
    num, den = 0.7 * a * 0.8 ** lag, a * 0.95 ** lag
    tilt = np.zeros(order + 1)
    tilt[:2] = 1.0, -0.3
    coefs = np.tile(np.stack([num, den, tilt, np.zeros(order + 1)])[None], (10, 1, 1))
    x = rng.standard_normal(320)
    y = pf.apply(x.astype(np.float32), coefs, pf.new_state())
    ref = lfilter(np.convolve(num, [1.0, -0.3]), den, x.astype(np.float32).astype(np.float64))
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.int16, np.float32])
def test_chunked_filtering_is_bit_identical_to_one_pass(dtype):
    mel = log_mel(np.concatenate([_resonance(3000, 500), _resonance(3000, 1500, 1)]))
    pf = Postfilter()
    coefs = pf.coefficients(mel)
    assert coefs.shape == (mel.shape[0], 4, PostfilterConfig().order + 1)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(mel.shape[0] * 256) * 0.1
    x = (x * 32767).astype(np.int16) if dtype == np.int16 else x.astype(np.float32)
    whole = pf.apply(x, coefs, pf.new_state())
    assert whole.dtype == (np.int16 if dtype == np.int16 else np.float32)
    state, parts, i = pf.new_state(), [], 0
    while i < x.size:
        n = int(rng.integers(1, 700))
        f0 = max(0, (i // 256) - 2)  # each call gets the coefficients from some earlier frame on
        parts.append(pf.apply(x[i:i + n], coefs[f0:], state, frame0=f0))
        i += n
    assert np.array_equal(np.concatenate(parts), whole)


def test_the_tilt_row_compensates_the_formant_filters_low_pass_tilt():
    """Row 2 of every frame is 1 - tilt z^-1 (a gentle high-frequency lift): with its sign
    flipped the voice darkened audibly and no other test noticed (mutation audit)."""
    cfg = PostfilterConfig(tilt=0.3)
    mel = log_mel(_resonance(4000, 800))
    rows = Postfilter(cfg).coefficients(mel)[:, 2]
    expect = np.zeros(cfg.order + 1)
    expect[:2] = 1.0, -0.3
    assert np.array_equal(rows, np.tile(expect, (len(mel), 1)))


def test_audio_past_the_last_frame_of_coefficients_uses_that_frame():
    """apply's promise: frames past ``coefs`` use its last frame (mutation audit: without the
    clamp numba read past the array and the output turned NaN)."""
    mel = log_mel(_resonance(3000, 600))
    pf = Postfilter()
    coefs = pf.coefficients(mel)
    x = (np.random.default_rng(3).standard_normal((len(mel) + 6) * 256) * 0.1).astype(np.float32)
    padded = np.concatenate([coefs, np.repeat(coefs[-1:], 6, axis=0)])
    got = pf.apply(x, coefs, pf.new_state())
    assert np.all(np.isfinite(got))
    assert np.array_equal(got, pf.apply(x, padded, pf.new_state()))


def test_envelope_peaks_at_the_formant_and_target_spectrum_energy_is_kept():
    for freq in (400.0, 1200.0, 2500.0):
        x = _resonance(22050, freq)
        mel = log_mel(x)
        coefs = postfilter_coefficients(mel, PostfilterConfig())
        den = coefs[len(coefs) // 2, 1] / PostfilterConfig().gamma_den ** np.arange(coefs.shape[2])  # A(z)
        freqs = np.fft.rfftfreq(4096, 1 / SR)
        env = 1 / np.abs(np.fft.rfft(den, 4096))
        assert abs(freqs[np.argmax(env)] - freq) < 0.1 * freq + 60
        pf = Postfilter()
        y = pf.apply(x, coefs, pf.new_state())
        ratio = np.sqrt(np.mean(y[2048:-2048] ** 2) / np.mean(x[2048:-2048] ** 2))
        assert 0.8 < ratio < 1.25  # g_t: a signal with the target spectrum keeps its energy


def test_noise_in_the_valleys_is_reduced():
    """Formant + white noise, filtered with the clean formant's mel: the noise between the
    formants drops more than the formant does (the point of the filter)."""
    clean = _resonance(44100, 700.0, bw=120.0)
    noise = np.random.default_rng(5).standard_normal(clean.size).astype(np.float32) * 0.01
    pf = Postfilter()
    coefs = pf.coefficients(log_mel(clean))
    f_clean = pf.apply(clean, coefs, pf.new_state())
    f_noise = pf.apply(noise, coefs, pf.new_state())  # linear filter: each part filtered alone

    total_before = 10 * np.log10(np.sum(clean ** 2) / np.sum(noise ** 2))
    total_after = 10 * np.log10(np.sum(f_clean ** 2) / np.sum(f_noise ** 2))
    assert total_after > total_before + 3.0


def test_numpy_filterbank_equals_the_feature_filterbank():
    from wavern.dsp import mel_filterbank
    from wavern.engine.postfilter import slaney_filterbank

    for cfg in (MelConfig(), MelConfig(n_mels=40, fmax=11025.0, n_fft=512, win_length=512)):
        np.testing.assert_allclose(slaney_filterbank(cfg), mel_filterbank(cfg), rtol=1e-5, atol=1e-8)


def test_config_and_input_errors():
    with pytest.raises(ParameterError, match="gamma"):
        PostfilterConfig(gamma_num=0.95, gamma_den=0.9)
    with pytest.raises(ParameterError, match="tilt"):
        PostfilterConfig(tilt=1.0)
    with pytest.raises(ParameterError, match="keys"):
        PostfilterConfig.from_dict({"gamma": 0.5})
    assert PostfilterConfig.from_dict(PostfilterConfig().to_dict()) == PostfilterConfig()
    with pytest.raises(ParameterError, match="mel must have shape"):
        postfilter_coefficients(np.zeros((4, 10)))
    pf = Postfilter()
    with pytest.raises(ParameterError, match="coefs must have shape"):
        pf.apply(np.zeros(10, np.int16), np.zeros((2, 3, 5)), pf.new_state())
    with pytest.raises(ParameterError, match="mono"):
        pf.apply(np.zeros((2, 10), np.int16), pf.coefficients(np.zeros((2, 80))), pf.new_state())
    silent = pf.coefficients(np.full((3, 80), np.log(MelConfig().log_floor)))
    assert np.isfinite(silent).all()  # digital silence gives a usable filter
    np.testing.assert_allclose(silent[:, 1, 1:], 0, atol=2e-3)  # flat spectrum: no resonance
    bad = np.full((4, 80), -3.0)
    bad[1, 5], bad[2, 7] = np.nan, np.inf
    coefs = pf.coefficients(bad)
    assert np.isfinite(coefs).all()  # a broken frame acts as silence instead of poisoning the memory
    x = (np.random.default_rng(0).standard_normal(4 * 256) * 3000).astype(np.int16)
    assert np.abs(pf.apply(x, coefs, pf.new_state())).max() > 0
    with pytest.raises(ParameterError, match="order"):
        PostfilterConfig(order=56.0)
    with pytest.raises(ParameterError, match="numbers"):
        PostfilterConfig(gamma_num="0.8")
    a = pf.coefficients(np.random.default_rng(1).normal(-4, 2, (40, 80)))
    b = np.concatenate([pf.coefficients(m) for m in np.split(np.random.default_rng(1).normal(-4, 2, (40, 80)), 5)])
    assert np.array_equal(a, b)  # frame by frame: how many frames go in together does not matter


# ---------------------------------------------------------------- the long-term (pitch) stage
def _pitch_only(lag_weight: np.ndarray, order: int = 4) -> np.ndarray:
    """Coefficients whose formant part is the identity and whose pitch stage is ``lag_weight`` (T, 2)."""
    coefs = np.zeros((len(lag_weight), 4, order + 1))
    coefs[:, 0, 0] = coefs[:, 1, 0] = coefs[:, 2, 0] = 1.0
    coefs[:, 3, :2] = lag_weight
    return coefs


def test_pitch_stage_equals_the_direct_formula_in_any_chunking():
    """c[n] = (x[n] + w x[n - T]) / (1 + w), T fractional (linear interpolation), per frame; zero past
    before the stream's first sample; the same whatever the chunking."""
    rng = np.random.default_rng(4)
    n_frames, hop = 30, 64
    lw = np.stack([rng.uniform(55, 368, n_frames), rng.uniform(0, 1, n_frames)], axis=1)
    lw[5, 1] = 0.0  # an unvoiced frame: no stage
    x = rng.standard_normal(n_frames * hop)
    n = np.arange(x.size)
    lag, w = lw[n // hop, 0], lw[n // hop, 1]
    at = n - lag
    j = np.floor(at).astype(int)
    fr = at - j
    past = np.where(j >= 0, (1 - fr) * x[np.clip(j, 0, None)] + fr * x[np.clip(j + 1, 0, None)], 0.0)
    want = np.where(j >= 0, (x + w * past) / (1 + w), x)
    pf = Postfilter(PostfilterConfig(order=4), hop=hop)
    coefs = _pitch_only(lw)
    np.testing.assert_allclose(pf.apply(x.astype(np.float32).astype(np.float64), coefs, pf.new_state()),
                               want, rtol=0, atol=1e-5)
    whole = pf.apply(x.astype(np.float32), coefs, pf.new_state())
    state, parts, i = pf.new_state(), [], 0
    while i < x.size:
        k = int(rng.integers(1, 300))
        parts.append(pf.apply(x[i:i + k].astype(np.float32), coefs, state))
        i += k
    assert np.array_equal(np.concatenate(parts), whole)


def test_pitch_stage_passes_the_period_and_cuts_white_noise_by_the_closed_form():
    """A signal periodic in T comes out unchanged (past its first period); white noise's power is
    scaled by (1 + w^2) / (1 + w)^2."""
    lag, w, hop = 147.0, 0.5, 256  # 150 Hz at 22050 Hz: a whole number of samples
    t = np.arange(hop * 200)
    periodic = sum(np.sin(2 * np.pi * h * t / lag + h) / h for h in range(1, 20))
    pf = Postfilter(PostfilterConfig(order=4), hop=hop)
    coefs = _pitch_only(np.tile([[lag, w]], (200, 1)))
    y = pf.apply(periodic, coefs, pf.new_state())
    np.testing.assert_allclose(y[int(lag) + 1:], periodic[int(lag) + 1:], atol=1e-5)
    noise = np.random.default_rng(0).standard_normal(t.size)
    ratio = np.mean(pf.apply(noise, coefs, pf.new_state()) ** 2) / np.mean(noise ** 2)
    assert abs(ratio - (1 + w * w) / (1 + w) ** 2) < 0.02


def test_pitch_stage_reads_the_pitch_features():
    """From a pitch voice's frames (80 mel bands, log2(f0 / 120 Hz), periodicity): T = sr / f0 with
    f0 clipped to 60-400 Hz, w = pitch_gain × periodicity; frames without pitch features refused."""
    from wavern.engine.postfilter import pitch_stage

    feats = np.zeros((4, 82))
    feats[:, 80] = [0.0, 1.0, -3.0, 3.0]  # 120, 240, 15 (-> 60), 960 (-> 400) Hz
    feats[:, 81] = [1.0, 0.5, 0.0, 2.0]
    pf = Postfilter(PostfilterConfig(pitch_gain=0.6))
    c = pf.coefficients(feats)
    np.testing.assert_allclose(c[:, 3, :2], [[SR / 120, 0.6], [SR / 240, 0.3], [SR / 60, 0.0], [SR / 400, 0.6]])
    assert np.array_equal(c[:, :3], Postfilter().coefficients(feats)[:, :3])  # the formant part is unchanged
    np.testing.assert_allclose(pitch_stage(feats[:, 80:], 0.6, SR), c[:, 3, :2])
    assert np.all(Postfilter().coefficients(feats)[:, 3] == 0)  # no pitch_gain: no stage
    with pytest.raises(ParameterError, match="pitch features"):
        pf.coefficients(feats[:, :80])
    for bad in (-0.1, 1.5, "0.5", True):
        with pytest.raises(ParameterError, match="pitch_gain"):
            PostfilterConfig(pitch_gain=bad)


def test_a_pitch_stage_in_a_voice_streams_as_it_renders(tiny_voice, tmp_path):
    """A pitch voice with a pitch_gain: the stream equals the renderer (the stage's past runs on
    across sentences in both); a voice without pitch features refuses a pitch_gain."""
    from voice_factory import make_tiny_voice, voice_with_inference

    from wavern.engine.batch import render_utterance
    from wavern.engine.voice import Voice

    with pytest.raises(VoiceFileError, match="pitch_gain"):
        Voice.load(voice_with_inference(tiny_voice, tmp_path / "nopitch", postfilter={"pitch_gain": 0.5}))
    base = make_tiny_voice(tmp_path / "pitch", seed=2, lpc_order=8, excitation="mulaw", ltp=True)
    v = Voice.load(voice_with_inference(base, tmp_path / "v", postfilter={"pitch_gain": 0.5}))
    plain = Voice.load(voice_with_inference(base, tmp_path / "p", postfilter={"pitch_gain": 0.0}))
    try:
        text = "The quick brown fox jumps over the lazy dog. It was not amused."
        for cfg in (SpeakConfig(), SpeakConfig(pause_s=0.05)):
            got = np.concatenate([c.samples for c in v.stream(text, cfg, seed=3)])
            one = render_utterance(v, text, cfg, seed=3, fold_frames=None).samples.astype(np.float32) / 32768
            assert got.shape == one.shape
            assert np.abs(got - one).max() <= 1 / 32768 and np.mean(got != one) < 1e-3  # lazy vs whole mel rounding
            other = np.concatenate([c.samples for c in plain.stream(text, cfg, seed=3)])
            assert got.shape == other.shape and np.abs(got - other).max() > 1e-3  # the stage acts
    finally:
        v.close()
        plain.close()


# ---------------------------------------------------------------- in a voice
@pytest.fixture(scope="module")
def pf_voice(tiny_voice, tmp_path_factory):
    from voice_factory import voice_with_inference

    from wavern.engine.voice import Voice

    v = Voice.load(voice_with_inference(tiny_voice, tmp_path_factory.mktemp("pfvoice") / "v",
                                        postfilter=PostfilterConfig().to_dict()))
    yield v
    v.close()


def test_stream_equals_one_pass_over_the_unfiltered_stream(pf_voice, tiny_voice):
    """Two sentences, chunked, windowed: the post-filtered stream equals the plain voice's stream
    filtered in one pass with the coefficients of the sentences' mel."""
    from wavern.engine.voice import Voice

    text = "The quick brown fox jumps over the lazy dog. It was not amused."
    plain = Voice.load(tiny_voice)
    try:
        raw = np.concatenate([c.samples for c in plain.stream(text, SpeakConfig(), seed=3)])
        mel = np.concatenate([s.part.mel for s in plain.sentence_parts(text, speaker=plain.default_speaker,
                                                                         speed=1.0)])
    finally:
        plain.close()
    chunks = list(pf_voice.stream(text, SpeakConfig(), seed=3))
    assert len({c.sentence_index for c in chunks}) == 2 and len(chunks) > 4
    got = np.concatenate([c.samples for c in chunks])
    raw16 = np.rint(raw * 32768).astype(np.int16)
    pf = pf_voice.postfilter
    want = pf.apply(raw16, pf.coefficients(mel), pf.new_state()).astype(np.float32) / 32768
    assert got.shape == want.shape
    # The stream's mel comes from the acoustic decoder's lazy last layer (first rows first), this
    # one from a whole pass: equal to float rounding, so a rare sample rounds the other way.
    assert np.abs(got - want).max() <= 1 / 32768 and np.mean(got != want) < 1e-3
    assert not np.allclose(got, raw)
    off = np.concatenate([c.samples for c in pf_voice.stream(text, SpeakConfig(postfilter=False), seed=3)])
    assert np.array_equal(off, raw)  # a request can turn it off
    with pytest.raises(ParameterError, match="postfilter"):
        SpeakConfig(postfilter="yes")


def test_render_and_render_mel_use_the_filter(pf_voice):
    from wavern.engine.batch import render_utterance

    text = "Hello there."
    out = render_utterance(pf_voice, text, seed=1)
    mel = np.concatenate([s.part.mel for s in pf_voice.sentence_parts(text, speaker=pf_voice.default_speaker,
                                                                       speed=1.0)])
    from wavern.engine.batch import render_frames

    raw = render_frames(pf_voice.vocoder, pf_voice.vocoder.frame_inputs(mel), seed=1)
    assert np.array_equal(out.samples, pf_voice.apply_postfilter(raw, mel))
    assert not np.array_equal(out.samples, raw)
    assert np.array_equal(render_utterance(pf_voice, text, SpeakConfig(postfilter=False), seed=1).samples, raw)
    one = pf_voice.render_mel(mel, seed=4)
    assert np.array_equal(one, pf_voice.apply_postfilter(pf_voice.vocoder.render(mel, seed=4, fold_frames=None), mel))


def test_stream_equals_the_unfolded_render_with_pauses(pf_voice):
    from wavern.engine.batch import UtteranceRequest, render_utterance, render_utterances

    text = "Hello there, friend. How are you today? Fine."
    cfg = SpeakConfig(pause_s=0.05)  # (volume: the stream scales float32, the renderer int16; not compared)
    streamed = np.concatenate([c.samples for c in pf_voice.stream(text, cfg, seed=3)])
    one = render_utterance(pf_voice, text, cfg, seed=3, fold_frames=None)
    assert np.array_equal(np.rint(streamed * 32768).astype(np.int16), one.samples)
    folded = render_utterance(pf_voice, text, cfg, seed=3)
    both = render_utterances(pf_voice, [UtteranceRequest(text, cfg, 3), UtteranceRequest("Yes.", None, 1)])
    assert np.array_equal(both[0].samples, folded.samples)  # in a shared batch or alone: the same bytes


def test_vocode_filters_unless_told_not_to(pf_voice):
    x = np.random.default_rng(0).standard_normal(4000).astype(np.float32) * 0.1
    on, off = pf_voice.vocode(x, seed=2), pf_voice.vocode(x, seed=2, postfilter=False)
    from wavern.dsp import log_mel

    raw = pf_voice.vocoder.render(log_mel(x), seed=2)
    assert np.array_equal(off, raw[:4000].astype(np.float32) / 32768)
    assert np.array_equal(on, pf_voice.apply_postfilter(raw, log_mel(x))[:4000].astype(np.float32) / 32768)


def test_a_bad_postfilter_entry_is_a_voice_file_error(tiny_voice, tmp_path):
    from wavern.engine.voice import Voice

    path = tmp_path / "v"
    shutil.copytree(tiny_voice, path)
    meta = json.loads((path / "voice.json").read_text())
    meta["inference"]["postfilter"] = {"gamma_num": 0.99, "gamma_den": 0.5}
    (path / "voice.json").write_text(json.dumps(meta))
    with pytest.raises(VoiceFileError, match="inference.postfilter"):
        Voice.load(path)


def test_shipped_voice_stream_equals_unfolded_render():
    """On a trained voice one flipped draw makes the waveforms part for good, so this needs the
    renderer's mel to round exactly as the stream's (the first sentence decoded lazily, as the
    stream does). A first sentence longer than two lazy passes (96 frames) and a second one."""
    from pathlib import Path

    from wavern.engine.batch import render_utterance
    from wavern.engine.voice import Voice

    voice = Voice.load(Path(__file__).resolve().parents[2] / "assets" / "voices" / "default")
    try:
        text = ("This first sentence has enough words in it to last for more than ninety six frames of mel. "
                "And a second one.")
        for pf in (False, None):
            cfg = SpeakConfig(postfilter=pf)
            streamed = np.rint(voice.synthesize(text, cfg, seed=3) * 32768).astype(np.int16)
            assert np.array_equal(streamed, render_utterance(voice, text, cfg, seed=3, fold_frames=None).samples)
    finally:
        voice.close()
