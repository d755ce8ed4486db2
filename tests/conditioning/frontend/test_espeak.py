"""The espeak-ng binding: events, sample-accurate durations, errors."""

from __future__ import annotations

import numpy as np
import pytest

from wavern.conditioning.frontend import espeak
from wavern.conditioning.frontend.espeak import phonemize, synthesize
from wavern.errors import ParameterError, WavernError

SENTENCES = [
    "Yes, we did.",
    "The quick brown fox jumps over the lazy dog; really?",
    "Our trade with the Netherlands is highly beneficial to both countries.",
]


def test_version_and_rate():
    assert espeak.espeak_version().startswith("1.")
    s = synthesize("Hi.")
    assert s.sample_rate == 22050 == espeak.SAMPLE_RATE
    assert s.audio.dtype == np.int16 and s.audio.ndim == 1 and s.audio.size > 0


@pytest.mark.parametrize("voice", ["en-us", "en-gb-x-rp+f3", "en-029+m7"])
@pytest.mark.parametrize("text", SENTENCES)
def test_durations_tile_the_audio_exactly(text, voice):
    s = synthesize(text, voice=voice, rate=210, pitch=30, pitch_range=80)
    n = len(s.phonemes)
    assert n == s.starts.size == s.durations.size == s.text_positions.size > 3
    assert (np.diff(s.starts) >= 0).all()
    assert (s.durations >= 0).all()
    # durations are differences of the event samples, the last one running to the end
    assert np.array_equal(s.durations, np.diff(np.append(s.starts, s.audio.size)))
    assert s.lead_samples + int(s.durations.sum()) == s.audio.size


def test_pauses_are_near_silent():
    """Event samples are sample accurate: espeak's pause segments hold almost no energy."""
    s = synthesize("Yes, we did, and then, after all that, we went home.")
    a = s.audio.astype(np.float64)
    pause = np.zeros(a.size, bool)
    for name, start, dur in zip(s.phonemes, s.starts, s.durations):
        if name == "":
            pause[start:start + dur] = True
    assert pause.mean() > 0.1  # three commas and the end: a real share of the time
    assert (a[pause] ** 2).sum() < 0.02 * (a ** 2).sum()


def test_stress_is_part_of_the_vowel_and_pauses_are_empty():
    s = synthesize("Hello, world.")
    assert "ˈoʊ" in s.phonemes and "ˈɜː" in s.phonemes
    assert "ˈ" not in s.phonemes and "" in s.phonemes
    assert s.phonemes[-1] == ""  # the end pause


def test_text_positions_point_at_words():
    text = "Our trade with the Netherlands is highly beneficial."
    s = synthesize(text)
    word_starts = {i for i, c in enumerate(text) if c.isalpha() and (i == 0 or text[i - 1] == " ")}
    for name, pos in zip(s.phonemes, s.text_positions.tolist()):
        if name:
            assert pos in word_starts
    starts = [w.text_start for w in s.words]
    assert starts == sorted(starts) and set(starts) <= word_starts  # espeak may join a word to the next
    assert len(starts) >= len(word_starts) - 2


def test_phonemes_do_not_depend_on_prosody_or_history():
    text = SENTENCES[1]
    base = synthesize(text, voice="en-gb-scotland").phonemes
    for rate, pitch, rng in [(80, 0, 0), (450, 100, 100), (130, 70, 20)]:
        synthesize("Something else entirely, to change the state.", voice="en-us+f2", rate=300)
        assert synthesize(text, voice="en-gb-scotland+m3", rate=rate, pitch=pitch, pitch_range=rng).phonemes == base


@pytest.mark.parametrize("voice", ["en-us", "en-gb-scotland+m3", "en-029"])
def test_phoneme_events_are_the_synthesis_events(voice):
    """The audio-less path gives the events of a rendering at any rate: same names, same text
    positions (but the leading pause's, which espeak carries over from the previous call)."""
    for text in SENTENCES + ["Dr. Smith paid $12.50 on 3/4/2021, didn't he?", "A"]:
        for rate in (espeak.DEFAULT_RATE, 130, 230):
            syn = synthesize(text, voice=voice, rate=rate)
            ev = espeak.phoneme_events(text, voice=voice)
            assert ev.phonemes == syn.phonemes
            assert ev.text_positions.dtype == np.int64
            assert ev.text_positions[1:].tolist() == syn.text_positions[1:].tolist()
            if ev.phonemes[0]:  # a leading pause's position is the previous call's
                assert ev.text_positions[0] == syn.text_positions[0]


def test_phonemize_matches_synthesis_events():
    assert phonemize(SENTENCES[0], voice="en-us") == synthesize(SENTENCES[0], voice="en-us").phonemes


def test_empty_text():
    s = synthesize("")
    assert s.lead_samples + int(s.durations.sum()) == s.audio.size


@pytest.mark.parametrize(
    "kwargs",
    [{"voice": "xx-nonexistent"}, {"rate": 20}, {"rate": 1000}, {"pitch": -1}, {"pitch_range": 101},
     {"rate": 1.5}, {"pitch": True},
     # variants espeak would ignore, speaking the plain language under the wrong name
     {"voice": "en-us+zzz"}, {"voice": "en-us+F3"}, {"voice": "en-us+f3+m1"}, {"voice": "en-us+../en"}],
)
def test_bad_parameters(kwargs):
    with pytest.raises(ParameterError):
        synthesize("Hello.", **kwargs)
    assert synthesize("Hello.").audio.size > 0  # the library is still usable


def test_missing_library_names_the_path(monkeypatch, tmp_path):
    import espeakng_loader

    missing = tmp_path / "libespeak-ng.so"
    monkeypatch.setattr(espeakng_loader, "get_library_path", lambda: str(missing))
    with pytest.raises(WavernError, match="libespeak-ng.so"):
        espeak._locate()
