"""Mel matching: against a direct STFT / overlap-add reference, chunked == whole, what it does
to band energies and silence, settings and input errors, and in a voice (stream == render)."""

from __future__ import annotations

import numpy as np
import pytest

from wavern.dsp import DEFAULT_MEL, log_mel, mel_filterbank
from wavern.engine.chunk import SpeakConfig
from wavern.engine.melmatch import MelMatch, MelMatchConfig
from wavern.errors import ParameterError, VoiceFileError

HOP, N_FFT = DEFAULT_MEL.hop_length, DEFAULT_MEL.n_fft


def _reference(x: np.ndarray, mel: np.ndarray, cap: float, floor: float, smooth: float = 0.0) -> np.ndarray:
    """The definition, frame by frame with plain loops: reflect-pad, window, FFT, band gains (their
    logs averaged by a Gaussian over the band index, cut at the edges, when ``smooth``) spread over
    the bins by the filter weights, inverse FFT, window, overlap-add, divide by sum of w^2."""
    fb = mel_filterbank(DEFAULT_MEL).astype(np.float64)
    w = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)
    half = N_FFT // 2
    xp = np.pad(x.astype(np.float64), half, mode="reflect")
    n_frames = min(1 + len(x) // HOP, len(mel))
    acc = np.zeros(len(xp))
    norm = np.zeros(len(xp))
    for t in range(n_frames):
        spec = np.fft.rfft(xp[t * HOP:t * HOP + N_FFT] * w)
        gains = np.zeros(spec.size)
        band = np.zeros(fb.shape[0])
        for b in range(fb.shape[0]):
            have = float(np.sum(fb[b] * np.abs(spec)))
            band[b] = min(cap, max(floor, np.exp(mel[t, b]) / max(have, 1e-30)))
        if smooth:
            logs = np.log(band)
            for b in range(fb.shape[0]):
                k = np.array([np.exp(-0.5 * ((b - j) / smooth) ** 2) for j in range(fb.shape[0])])
                band[b] = np.exp(np.sum(k * logs) / np.sum(k))
        first = min(k for k in range(spec.size) if fb[:, k].sum() > 0)
        for k in range(spec.size):
            total = fb[:, k].sum()
            if total > 0:
                gains[k] = np.dot(fb[:, k], band) / total
            else:  # below the first band (DC): the bottom band's gain, never above 1; above fmax: the top's
                gains[k] = min(band[0], 1.0) if k < first else band[-1]
        acc[t * HOP:t * HOP + N_FFT] += np.fft.irfft(spec * gains, n=N_FFT) * w
        norm[t * HOP:t * HOP + N_FFT] += w * w
    return (acc / np.maximum(norm, 1e-3))[half:half + len(x)]


def _signal(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Noise as the 'vocoder output' and the mel of a two-tone signal with a pause as the target."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / 22050
    target = 0.3 * np.sin(2 * np.pi * 220 * t) + 0.1 * np.sin(2 * np.pi * 1800 * t)
    target[n // 3:n // 2] = 0.0  # a pause
    x = (0.05 * rng.standard_normal(n)).astype(np.float32)
    return x, log_mel(target.astype(np.float32))[:n // HOP]


def test_whole_segment_equals_the_direct_reference():
    x, mel = _signal(HOP * 24)
    cfg = MelMatchConfig(cap=4.0, floor=1e-3)
    got = MelMatch(cfg).apply(x, mel)
    want = _reference(x, mel, cfg.cap, cfg.floor)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)


def test_no_pass_raises_a_dc_offset_whatever_the_bands_ask():
    # The DC bin is in no band: it took the top band's gain, which a quiet top band pushes to the cap,
    # and nothing measured it again, so passes compounded it (the default voice at temperature 0.5:
    # thumps of 0.6 full scale)
    n = HOP * 64
    x = (0.01 + 0.02 * np.random.default_rng(3).standard_normal(n)).astype(np.float32)
    mel = log_mel(x)[:n // HOP].copy()
    mel[:, 40:] += np.log(4.0)  # the upper bands ask for 4 times the energy
    for passes in (1, 4):
        y = MelMatch(MelMatchConfig(cap=4.0, floor=1e-3, iterations=passes)).apply(x, mel)
        inner = slice(N_FFT, n - N_FFT)
        assert abs(float(y[inner].mean())) <= 1.05 * abs(float(x[inner].mean()))
    want = _reference(x, mel, 4.0, 1e-3)
    np.testing.assert_allclose(MelMatch(MelMatchConfig(cap=4.0, floor=1e-3)).apply(x, mel), want, atol=1e-6, rtol=0)


def test_a_long_segment_is_applied_in_blocks_against_the_direct_reference(monkeypatch):
    """apply() pushes a long segment in blocks (bounded memory); the result is still the definition."""
    from wavern.engine import melmatch as mm_mod

    monkeypatch.setattr(mm_mod, "APPLY_BLOCK", 3 * HOP + 17)  # blocks that end mid-frame
    x, mel = _signal(HOP * 24)
    cfg = MelMatchConfig(cap=4.0, floor=1e-3)
    got = MelMatch(cfg).apply(x, mel)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, _reference(x, mel, cfg.cap, cfg.floor), atol=1e-6, rtol=0)
    x16 = np.rint(x * 32768).astype(np.int16)
    two = MelMatch(MelMatchConfig(iterations=2))
    blocks = two.apply(x16, mel)
    monkeypatch.setattr(mm_mod, "APPLY_BLOCK", 1 << 30)
    assert blocks.dtype == np.int16 and np.array_equal(blocks, two.apply(x16, mel))  # 2 passes: one push the same
    for frames in (1, 5):  # the frames of a push filtered a few at a time: the same
        monkeypatch.setattr(mm_mod, "FILTER_BLOCK", frames)
        assert np.array_equal(two.apply(x16, mel), blocks)


@pytest.mark.parametrize("smooth", [0.7, 3.0])
def test_smoothed_gains_equal_the_direct_reference(smooth):
    x, mel = _signal(HOP * 20, seed=2)
    cfg = MelMatchConfig(cap=4.0, floor=1e-3, smooth=smooth)
    got = MelMatch(cfg).apply(x, mel)
    np.testing.assert_allclose(got, _reference(x, mel, cfg.cap, cfg.floor, smooth), atol=1e-6, rtol=0)
    assert np.max(np.abs(got - MelMatch(MelMatchConfig(cap=4.0, floor=1e-3)).apply(x, mel))) > 1e-3  # it acts


def test_smoothing_keeps_the_harmonics_a_smooth_mel_lacks():
    """A harmonic signal matched to a mel with its harmonics smoothed away (as an acoustic model
    predicts): band by band, the matching fills the gaps between the harmonics; with the log gains
    smoothed over a band or two, the envelope moves and the harmonic peaks stay."""
    n = HOP * 40
    t = np.arange(n) / 22050
    x = sum(np.sin(2 * np.pi * 120 * h * t) / h for h in range(1, 30)).astype(np.float32) * 0.1
    mel = log_mel(x)[:n // HOP]
    blurred = mel.copy()  # each frame's bands averaged with their neighbours: the harmonics' ripple gone
    for _ in range(6):
        blurred[:, 1:-1] = 0.25 * blurred[:, :-2] + 0.5 * blurred[:, 1:-1] + 0.25 * blurred[:, 2:]

    def ripple(y: np.ndarray) -> float:  # peak-to-valley of the harmonics below 1.5 kHz, in dB
        spec = np.abs(np.fft.rfft(y[n // 4:3 * n // 4] * np.hanning(n // 2)))
        f = np.fft.rfftfreq(n // 2, 1 / 22050)
        peaks = [spec[np.argmin(np.abs(f - 120 * h))] for h in range(2, 12)]
        valleys = [spec[np.argmin(np.abs(f - 120 * (h + 0.5)))] for h in range(2, 12)]
        return float(np.median(20 * np.log10(np.array(peaks) / np.array(valleys))))

    band = MelMatch(MelMatchConfig(iterations=8)).apply(x, blurred)
    smooth = MelMatch(MelMatchConfig(iterations=8, smooth=1.5)).apply(x, blurred)
    assert ripple(smooth) > ripple(band) + 6.0
    assert ripple(smooth) > ripple(x) - 6.0


@pytest.mark.parametrize("dtype", [np.int16, np.float32])
def test_any_chunking_equals_the_whole_segment(dtype):
    x, mel = _signal(HOP * 30 + 0, seed=1)
    if dtype == np.int16:
        x = np.rint(x * 32768).astype(np.int16)
    mm = MelMatch()
    whole = mm.apply(x, mel)
    rng = np.random.default_rng(5)
    for _ in range(3):
        s = mm.stream(lambda a, b: mel[a:b], len(x))
        cuts = np.sort(rng.choice(np.arange(1, len(x)), size=12, replace=False))
        parts = [s.push(p) for p in np.split(x, cuts)]
        assert s.done and all(p.dtype == whole.dtype for p in parts)
        assert np.array_equal(np.concatenate(parts), whole)
    for passes in (1, 3):  # the lead: m samples out need m + lead_samples in
        lead = MelMatch(MelMatchConfig(iterations=passes)).lead_samples
        s = MelMatch(MelMatchConfig(iterations=passes)).stream(lambda a, b: mel[a:b], len(x))
        assert lead == passes * (N_FFT - HOP) and s.push(x[:lead + 512 - 1]).size < 512
        s = MelMatch(MelMatchConfig(iterations=passes)).stream(lambda a, b: mel[a:b], len(x))
        assert s.push(x[:lead + 512]).size == 512
    s = mm.stream(lambda a, b: mel[a:b], len(x))
    first = s.push(x[:N_FFT // 2])  # not one frame's window yet: nothing out
    assert first.size == 0
    assert s.push(x[N_FFT // 2:N_FFT * 2]).size <= N_FFT * 2 - N_FFT // 2 - HOP  # the output trails


def test_a_stream_keeps_a_few_windows_not_the_sentence():
    """Each pass holds only the samples its next frames read and the sums not yet returned."""
    n = 22050 * 20
    x = (0.05 * np.random.default_rng(3).standard_normal(n)).astype(np.float32)
    mel = log_mel(x)[:n // HOP]
    s = MelMatch(MelMatchConfig(iterations=8)).stream(lambda a, b: mel[a:b], n)
    held = 0
    for i in range(0, n, 4096):
        s.push(x[i:i + 4096])
        held = max(held, *(p.x.size + p.acc.size + p.norm.size for p in s.passes))
    assert s.done and held <= 3 * (N_FFT + 4096)


def test_iterations_are_passes_in_a_row_and_stream_in_any_chunking():
    x, mel = _signal(HOP * 30, seed=6)
    one, three = MelMatch(), MelMatch(MelMatchConfig(iterations=3))
    want = one.apply(one.apply(one.apply(x, mel), mel), mel)
    np.testing.assert_allclose(three.apply(x, mel), want, atol=1e-6, rtol=0)  # float32 between passes either way
    x16 = np.rint(x * 32768).astype(np.int16)
    whole = three.apply(x16, mel)
    assert whole.dtype == np.int16
    s = three.stream(lambda a, b: mel[a:b], len(x))
    parts = [s.push(p) for p in np.array_split(x16, 9)]
    assert s.done and np.array_equal(np.concatenate(parts), whole)
    assert parts[0].size == 0 and parts[1].size == 0  # three passes: about 3 n_fft of delay
    s = three.stream(lambda a, b: mel[a:b], len(x))
    out = [s.push(x16[:HOP * 14 + 7]), s.cut()]
    assert s.done and np.array_equal(np.concatenate(out), three.apply(x16[:HOP * 14 + 7], mel[:14]))
    a, b = np.abs(log_mel(one.apply(x, mel)) - log_mel(x)).mean(), np.abs(log_mel(whole / 32768) - log_mel(x)).mean()
    assert b > a  # more passes move further from the input
    with pytest.raises(ParameterError, match="iterations"):
        MelMatchConfig(iterations=0)


def test_band_energies_move_to_the_mel_and_silence_is_cut():
    x, mel = _signal(HOP * 80, seed=2)
    y = MelMatch(MelMatchConfig(cap=1000.0, floor=1e-6)).apply(x, mel)
    before, after = log_mel(x)[:len(mel)], log_mel(y)[:len(mel)]
    inner = slice(3, len(mel) - 3)
    err_before = np.abs(before[inner] - mel[inner]).mean()
    err_after = np.abs(after[inner] - mel[inner]).mean()
    assert err_after < 0.5 * err_before  # one projection does not reach the mel exactly, but most of the way
    pause = slice(len(x) // 3 + N_FFT, len(x) // 2 - N_FFT)
    assert np.sqrt(np.mean(y[pause] ** 2)) < 0.01 * np.sqrt(np.mean(x[pause] ** 2))  # -40 dB where the mel is silent
    capped = MelMatch(MelMatchConfig(cap=1.0, floor=0.5)).apply(x, mel)
    assert np.sqrt(np.mean(capped[pause] ** 2)) >= 0.45 * np.sqrt(np.mean(x[pause] ** 2))  # the floor holds


def test_a_segment_cut_short_equals_a_shorter_segment():
    x, mel = _signal(HOP * 30, seed=3)
    mm = MelMatch()
    s = mm.stream(lambda a, b: mel[a:b], len(x))
    out = [s.push(x[:HOP * 7 + 100]), s.push(x[HOP * 7 + 100:HOP * 12])]
    out.append(s.cut())
    assert s.done
    assert np.array_equal(np.concatenate(out), mm.apply(x[:HOP * 12], mel[:12]))
    # a segment starting at a later frame reads its rows from there
    late = mm.stream(lambda a, b: mel[a:b], HOP * 10, frame0=12)
    assert np.array_equal(late.push(x[HOP * 12:HOP * 22]), mm.apply(x[HOP * 12:HOP * 22], mel[12:22]))


def test_a_mel_with_the_stfts_last_frame_is_matched_to_the_end():
    """A log_mel of the target has 1 + n // hop rows, one more than the tests above pass: the
    last frame is matched too, as the reference does (mutation audit: it was dropped unseen)."""
    rng = np.random.default_rng(5)
    n = HOP * 20
    t = np.arange(n) / 22050
    mel = log_mel((0.3 * np.sin(2 * np.pi * 330 * t)).astype(np.float32))
    assert len(mel) == 1 + n // HOP
    x = (0.05 * rng.standard_normal(n)).astype(np.float32)
    cfg = MelMatchConfig(cap=4.0, floor=1e-3)
    np.testing.assert_allclose(MelMatch(cfg).apply(x, mel), _reference(x, mel, cfg.cap, cfg.floor), atol=1e-6, rtol=0)


@pytest.mark.parametrize("n", [300, 500, 512, 600])
def test_a_segment_cut_within_its_first_window_equals_a_shorter_segment(n):
    """A speed change right after a request's first chunk (512 samples) cuts its segment inside
    the first window: the rest is made as for a segment that short, whose edge does not reflect
    (mutation audit: cut() kept the long segment's reflection)."""
    x, mel = _signal(HOP * 30, seed=4)
    mm = MelMatch()
    s = mm.stream(lambda a, b: mel[a:b], len(x))
    out = np.concatenate([s.push(x[:n]), s.cut()])
    assert s.done and out.shape == (n,)
    assert np.array_equal(out, mm.apply(x[:n], mel[:max(1, n // HOP)]))


def test_short_and_empty_segments():
    mm = MelMatch()
    x, mel = _signal(HOP * 8, seed=4)
    short = mm.apply(x[:HOP], mel[:1])  # shorter than half a window: zero padding, as log_mel
    assert short.shape == (HOP,) and np.all(np.isfinite(short))
    assert mm.apply(np.zeros(0, np.int16), mel[:0]).shape == (0,)


def test_settings_and_input_errors():
    assert MelMatchConfig.from_dict(MelMatchConfig(cap=2.0).to_dict()) == MelMatchConfig(cap=2.0)
    for bad in ({"cap": 0.5}, {"floor": 0.0}, {"floor": 2.0}, {"cap": float("inf")}, {"cap": True},
                {"cap": "4"}, {"iterations": 2.0}, {"iterations": 33}, {"smooth": -1.0}, {"smooth": 41.0},
                {"smooth": float("nan")}, {"smooth": "1"}):
        with pytest.raises(ParameterError, match="mel matching"):
            MelMatchConfig(**bad)
    with pytest.raises(ParameterError, match="keys"):
        MelMatchConfig.from_dict({"gain": 2.0})
    mm = MelMatch()
    x, mel = _signal(HOP * 8)
    with pytest.raises(ParameterError, match="mono"):
        mm.apply(x.reshape(2, -1), mel)
    s = mm.stream(lambda a, b: mel[a:b], len(x))
    with pytest.raises(ParameterError, match="pushed"):
        s.push(np.concatenate([x, x]))
    s.push(x[:10])
    with pytest.raises(ParameterError, match="not both"):
        s.push(np.zeros(10, np.int16))
    s = mm.stream(lambda a, b: mel[a:b, :40], len(x))
    with pytest.raises(ParameterError, match="mel rows"):
        s.push(x)


# ---------------------------------------------------------------- in a voice
@pytest.fixture(scope="module")
def mm_voice(tiny_voice, tmp_path_factory):
    from voice_factory import voice_with_inference

    from wavern.engine.voice import Voice

    v = Voice.load(voice_with_inference(tiny_voice, tmp_path_factory.mktemp("mmvoice") / "v",
                                        melmatch=MelMatchConfig().to_dict()))
    yield v
    v.close()


def test_stream_equals_render_sentence_by_sentence(mm_voice, tiny_voice):
    """Chunked and delayed, the stream equals the plain voice's audio matched sentence by sentence,
    and the one-stream render; word timings come with each sentence's first audio."""
    from wavern.engine.batch import render_utterance
    from wavern.engine.voice import Voice

    text = "The quick brown fox jumps over the lazy dog. It was not amused."
    plain = Voice.load(tiny_voice)
    try:
        raw = np.concatenate([c.samples for c in plain.stream(text, SpeakConfig(), seed=3)])
        parts = [s.part.mel for s in plain.sentence_parts(text, speaker=plain.default_speaker, speed=1.0)]
    finally:
        plain.close()
    chunks = list(mm_voice.stream(text, SpeakConfig(), seed=3))
    assert len({c.sentence_index for c in chunks}) == 2 and all(c.samples.size for c in chunks)
    assert [c.start_sample for c in chunks] == list(np.cumsum([0] + [c.samples.size for c in chunks[:-1]]))
    firsts = [i for i, c in enumerate(chunks) if i == 0 or c.sentence_index != chunks[i - 1].sentence_index]
    assert all(bool(c.word_timings) == (i in firsts) for i, c in enumerate(chunks))
    from wavern.engine.voice import FIRST_CHUNK_SAMPLES

    lasts = {i - 1 for i in firsts[1:]} | {len(chunks) - 1}
    assert all(c.samples.size >= FIRST_CHUNK_SAMPLES for i, c in enumerate(chunks) if i not in lasts)  # a player
    # starting on any chunk has 23 ms queued, not a sliver
    got = np.concatenate([c.samples for c in chunks])
    raw16 = np.rint(raw * 32768).astype(np.int16)
    at, want = 0, []
    for mel in parts:
        n = len(mel) * HOP
        want.append(mm_voice.melmatch.apply(raw16[at:at + n], mel))
        at += n
    want = np.concatenate(want).astype(np.float32) / 32768
    assert got.shape == want.shape == raw.shape
    assert np.abs(got - want).max() <= 1 / 32768 and np.mean(got != want) < 1e-3  # lazy vs whole mel rounding
    assert not np.allclose(got, raw)
    one = render_utterance(mm_voice, text, seed=3, fold_frames=None)
    assert np.array_equal(np.rint(got * 32768).astype(np.int16), one.samples)
    off = np.concatenate([c.samples for c in mm_voice.stream(text, SpeakConfig(postfilter=False), seed=3)])
    assert np.array_equal(off, raw)  # the request's post-processing switch turns it off too


def test_a_change_of_speed_mid_sentence_keeps_every_sample(mm_voice):
    from wavern.engine.voice import StreamControl

    text = "A rather long sentence, so that the speed can change in the middle of it without trouble."
    control = StreamControl()
    out = []
    for i, c in enumerate(mm_voice.stream(text, control=control, seed=1)):
        out.append(c)
        if i == 3:
            control.speed = 1.5
    assert [c.start_sample for c in out] == list(np.cumsum([0] + [c.samples.size for c in out[:-1]]))
    assert all(np.all(np.isfinite(c.samples)) for c in out)
    normal = sum(c.samples.size for c in mm_voice.stream(text, seed=1))
    assert sum(c.samples.size for c in out) < normal  # faster after the change


def test_a_change_of_speed_before_a_sentences_last_chunk_keeps_what_was_made(mm_voice):
    """The switch re-renders nothing of this sentence (its rest is one chunk, done at the old speed's
    share), so the mel matching's held-back output is all that is left of it: it must come out."""
    from wavern.engine.voice import CHUNK_SAMPLES, StreamControl

    text = "A rather long sentence, so that the speed can change near the end of it. Then another one."
    ref = list(mm_voice.stream(text, control=StreamControl(speed=0.25), seed=1))
    last = max(i for i, c in enumerate(ref) if c.sentence_index == 0)
    ref0 = sum(c.samples.size for c in ref if c.sentence_index == 0)
    control, out = StreamControl(speed=0.25), []
    for i, c in enumerate(mm_voice.stream(text, control=control, seed=1)):
        out.append(c)
        if i == last - 1:
            control.speed = 4.0
    got0 = sum(c.samples.size for c in out if c.sentence_index == 0)
    assert np.array_equal(np.concatenate([c.samples for c in out[:last]]),
                          np.concatenate([c.samples for c in ref[:last]]))  # the same up to the switch
    # the vocoder had made the mel matching's lead more than was heard: that comes out too, and only the
    # sentence's last chunk, never made, is missing
    made = sum(c.samples.size for c in ref[:last]) + mm_voice.melmatch.lead_samples
    assert got0 == made and 0 < ref0 - got0 <= CHUNK_SAMPLES
    assert [c.start_sample for c in out] == list(np.cumsum([0] + [c.samples.size for c in out[:-1]]))


def test_word_timings_after_a_change_of_speed_count_the_held_back_audio(mm_voice):
    """With mel matching, what was made at the old speed and held back plays first: the new timings
    start after it, and the last word ends where it does when the whole sentence is spoken faster."""
    from wavern.engine.voice import StreamControl

    text = "A rather long sentence, so that the speed can change in the middle of it without trouble."

    def last_word_gap(chunks):
        end = chunks[-1].start_sample + chunks[-1].samples.size
        latest = {(t.char_start, t.char_end): t for c in chunks for t in c.word_timings}  # the last sent wins
        return end - max(t.end_sample for t in latest.values())

    fast = list(mm_voice.stream(text, control=StreamControl(speed=1.5), seed=1))
    control, out = StreamControl(speed=1.0), []
    for i, c in enumerate(mm_voice.stream(text, control=control, seed=1)):
        out.append(c)
        if i == 3:
            control.speed = 1.5
    assert sum(bool(c.word_timings) for c in out) == 2
    assert abs(last_word_gap(out) - last_word_gap(fast)) <= 2 * HOP  # (the switch rounds to a frame)


def test_a_request_sets_the_number_of_passes(mm_voice, tiny_voice):
    """SpeakConfig.passes: the voice's settings with that many passes (0: none, the post-filter
    stays), in the stream and the renderer alike; a voice without mel matching gets the defaults."""
    from wavern.engine.batch import render_utterance
    from wavern.engine.voice import Voice

    text = "Hello there. How are you?"
    base = np.concatenate([c.samples for c in mm_voice.stream(text, seed=2)])
    one = np.concatenate([c.samples for c in mm_voice.stream(text, SpeakConfig(passes=1), seed=2)])
    assert np.array_equal(base, one)  # the voice's own setting is 1 pass
    three = [c.samples for c in mm_voice.stream(text, SpeakConfig(passes=3), seed=2)]
    none = np.concatenate([c.samples for c in mm_voice.stream(text, SpeakConfig(passes=0), seed=2)])
    off = np.concatenate([c.samples for c in mm_voice.stream(text, SpeakConfig(postfilter=False), seed=2)])
    assert np.array_equal(none, off)  # this voice has no formant post-filter: 0 passes is the vocoder alone
    raw16 = np.rint(none * 32768).astype(np.int16)
    got = np.rint(np.concatenate(three) * 32768).astype(np.int16)
    cfg = SpeakConfig(passes=3)
    assert np.array_equal(got, render_utterance(mm_voice, text, cfg, seed=2, fold_frames=None).samples)
    mm3 = mm_voice.melmatch_for(cfg)
    assert mm3.config.iterations == 3 and mm3 is mm_voice.melmatch_for(SpeakConfig(passes=3))  # cached
    assert not np.array_equal(got, raw16) and not np.array_equal(got, np.rint(base * 32768).astype(np.int16))
    plain = Voice.load(tiny_voice)
    try:
        assert plain.melmatch is None and plain.melmatch_for(SpeakConfig(passes=2)).config.iterations == 2
        assert plain.melmatch_for(SpeakConfig(passes=2, postfilter=False)) is None
    finally:
        plain.close()
    for bad in (-1, 33, 1.5, True):
        with pytest.raises(ParameterError, match="passes"):
            SpeakConfig(passes=bad)


def test_a_bad_melmatch_entry_is_a_voice_file_error(tiny_voice, tmp_path):
    from voice_factory import voice_with_inference

    from wavern.engine.voice import Voice

    with pytest.raises(VoiceFileError, match="inference.melmatch"):
        Voice.load(voice_with_inference(tiny_voice, tmp_path / "v", melmatch={"cap": 0.1}))
    with pytest.raises(VoiceFileError, match="inference.melmatch_measured"):
        Voice.load(voice_with_inference(tiny_voice, tmp_path / "w", melmatch={}, melmatch_measured={"smooth": -1}))


def test_a_measured_mel_takes_the_voices_measured_setting(tiny_voice, tmp_path):
    """``inference.melmatch_measured`` matches mels measured from audio (vocode, render_mel(measured=True));
    ``inference.melmatch`` the acoustic model's (the stream, render_mel); absent, one serves both;
    null, a measured mel gets none."""
    from voice_factory import voice_with_inference

    from wavern.dsp import copy_features
    from wavern.engine.voice import Voice

    x, _ = _signal(HOP * 40, seed=4)
    text = "Hello there."
    both = Voice.load(voice_with_inference(tiny_voice, tmp_path / "a", melmatch={"smooth": 1.5},
                                           melmatch_measured={"iterations": 2}))
    one = Voice.load(voice_with_inference(tiny_voice, tmp_path / "b", melmatch={"smooth": 1.5}))
    off = Voice.load(voice_with_inference(tiny_voice, tmp_path / "c", melmatch={"smooth": 1.5},
                                          melmatch_measured=None))
    try:
        assert both.melmatch.config == MelMatchConfig(smooth=1.5)
        assert both.melmatch_measured.config == MelMatchConfig(iterations=2)
        assert one.melmatch_measured is one.melmatch and off.melmatch_measured is None
        feats = copy_features(x, DEFAULT_MEL, pitch=both.acoustic.config.pitch)
        raw = both.vocoder.render(feats, seed=1, temperature=1.0, fold_frames=None)
        for v, mm in ((both, both.melmatch_measured), (one, one.melmatch), (off, None)):
            want = v.apply_postfilter(raw, feats, melmatch=mm)
            assert np.array_equal(v.render_mel(feats, seed=1, measured=True), want)
        text_mm = both.render_mel(feats, seed=1)
        assert np.array_equal(text_mm, both.apply_postfilter(raw, feats, melmatch=both.melmatch))
        assert not np.array_equal(text_mm, both.render_mel(feats, seed=1, measured=True))
        vocoded = both.vocode(x, seed=1)  # copy synthesis is a measured mel, rendered folded
        from wavern.engine.batch import DEFAULT_FOLD_FRAMES

        folded = both.vocoder.render(feats, seed=1, temperature=1.0, fold_frames=DEFAULT_FOLD_FRAMES)
        want = both.apply_postfilter(folded, feats, melmatch=both.melmatch_measured)
        assert np.array_equal(np.rint(vocoded * 32768).astype(np.int16), want[:x.size])
        # text → speech: the stream matches with the text setting (and its passes per request)
        a = np.concatenate([c.samples for c in both.stream(text, seed=2)])
        b = np.concatenate([c.samples for c in one.stream(text, seed=2)])
        assert np.array_equal(a, b)
        assert both.melmatch_for(SpeakConfig(passes=3)).config == MelMatchConfig(iterations=3, smooth=1.5)
    finally:
        for v in (both, one, off):
            v.close()


def test_int16_output_bends_peaks_the_gains_push_past_full_scale():
    from wavern.dsp import soft_limit

    n = HOP * 40
    t = np.arange(n) / 22050
    x = (0.6 * np.sin(2 * np.pi * 200 * t)).astype(np.float32)
    mel = log_mel(x)[:n // HOP] + np.log(1.8)  # asks for 1.8 times the level: peaks past full scale
    mm = MelMatch(MelMatchConfig(cap=4.0, floor=1e-3))
    as_float = mm.apply(x, mel)
    assert np.abs(as_float).max() > 1.02
    as_int = mm.apply(np.round(x * 32768).astype(np.int16), mel)
    want = np.rint(soft_limit(mm.apply(np.round(x * 32768).astype(np.int16).astype(np.float64) / 32768.0, mel)) * 32768)
    np.testing.assert_array_equal(as_int, np.clip(want, -32768, 32767).astype(np.int16))
    assert np.abs(as_int.astype(int)).max() < 32767  # bent, not squared off
