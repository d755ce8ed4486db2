"""The shipped voices as a user finds them: the natural default learnt from its teacher, the espeak
one beside it with its speakers, and the live controls working on the default."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from wavern.dsp import pitch_track
from wavern.engine import SpeakConfig, Voice

VOICES = Path(__file__).resolve().parents[2] / "assets" / "voices"
TEXT = "The kettle clicked off, and the kitchen went quiet again."


@pytest.fixture(scope="module")
def default_voice():
    voice = Voice.load(VOICES / "default")
    yield voice
    voice.close()


def _median_f0(audio: np.ndarray) -> float:
    f0 = pitch_track(audio)[:, 0]
    return float(np.median(f0[f0 > 0]))


def test_the_default_voice_learnt_from_the_teacher_and_the_espeak_voice_is_kept():
    default = json.loads((VOICES / "default" / "voice.json").read_text())
    assert default["provenance"]["corpus"]["source"] == "piper"
    assert default["acoustic"]["speakers"] == ["en_US-joe-medium"] and default["espeak_voice"] == "en-us"
    assert "Piper" in default["description"] and "CC0" in default["description"]
    espeak = json.loads((VOICES / "espeak" / "voice.json").read_text())
    assert espeak["name"] == "espeak" and len(espeak["acoustic"]["speakers"]) == 72
    assert espeak["inference"]["speaker"] in espeak["acoustic"]["speakers"]


def test_live_controls_work_on_the_default_voice(default_voice):
    """Speed, volume, pitch and pitch range change what they name, against the same request at defaults."""
    v = default_voice
    base = v.synthesize(TEXT, SpeakConfig())
    fast = v.synthesize(TEXT, SpeakConfig(speed=1.5))
    assert 0.55 < fast.size / base.size < 0.8
    loud = v.synthesize(TEXT, SpeakConfig(volume=0.5))
    np.testing.assert_allclose(loud, base * 0.5, atol=2 / 32768)
    low, high = (_median_f0(v.synthesize(TEXT, SpeakConfig(pitch=p))) for p in (30, 70))
    assert high > _median_f0(base) * 1.03 and low < _median_f0(base) / 1.03, (low, _median_f0(base), high)
    # pitch range: the spread of the acoustic model's own f0 channel, what the vocoder is given
    from wavern.conditioning.acoustic import stream_mel
    from wavern.dsp import PITCH_REFERENCE_HZ

    def spread(prange: float) -> float:  # standard deviation of the voiced frames' f0, semitones
        utt = v.analyze(TEXT)
        mel = np.concatenate([p.mel for p in stream_mel(v.acoustic, utt.ids, utt.is_global, utt.sentence_of,
                                                         speaker=v.default_speaker, prosody=(175, 50, prange))])
        f0 = PITCH_REFERENCE_HZ * np.exp2(mel[mel[:, -1] > 0.5, -2])
        return float(np.std(12 * np.log2(f0)))

    assert spread(90) > spread(20) * 1.2, (spread(20), spread(90))


def test_word_timings_and_stop_on_the_default_voice(default_voice):
    from wavern.engine import StreamControl

    chunks = list(default_voice.stream(TEXT))
    words = [w for c in chunks for w in c.word_timings]
    assert [TEXT[w.char_start:w.char_end] for w in words][:3] == ["The", "kettle", "clicked"]
    assert len(words) == len(TEXT.split())
    total = sum(c.samples.size for c in chunks)
    assert all(a.end_sample <= b.start_sample + 1 for a, b in zip(words, words[1:]))
    assert 0 < words[0].start_sample and words[-1].end_sample <= total
    control = StreamControl()
    got = []
    for c in default_voice.stream(TEXT + " " + TEXT, control=control):
        got.append(c)
        control.stop()
    assert len(got) == 1 and got[0].samples.size < total  # nothing after a stop


def test_the_default_voice_in_int8_sounds_like_itself(default_voice, monkeypatch):
    """Voice.load(int8=True) (or WAVERN_INT8=1) runs the vocoder's products on its state in int8:
    other samples than the float voice's with the same seed, but a spectrum as close to the float
    voice's as two float renderings with different seeds are to each other."""
    from wavern.dsp import log_mel

    monkeypatch.setenv("WAVERN_INT8", "1")
    with Voice.load(VOICES / "default") as v8:
        assert v8.vocoder.int8 and not default_voice.vocoder.int8
        cfg = SpeakConfig(postfilter=False)  # the vocoder's own output
        a8 = v8.synthesize(TEXT, cfg, seed=1)
    with Voice.load(VOICES / "default", int8=False) as vf:  # the keyword wins over the environment
        assert not vf.vocoder.int8
    af, af2 = (default_voice.synthesize(TEXT, cfg, seed=s) for s in (1, 2))
    assert a8.shape == af.shape and not np.array_equal(a8, af)
    m8, mf, mf2 = (log_mel(a) for a in (a8, af, af2))
    gap = float(np.mean(np.abs(m8 - mf)))
    seeds = float(np.mean(np.abs(mf2 - mf)))
    assert gap < 1.5 * seeds, (gap, seeds)
