"""Offline rendering of several items in shared vocoder batches (engine/batch.py,
``render_utterances``): each item's bytes equal its render alone, whatever its batch mates, and
a bad item fails alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wavern.engine.batch import MAX_TEXT_CHARS, UtteranceRequest, render_utterance, render_utterances
from wavern.engine.chunk import SpeakConfig
from wavern.errors import ParameterError

torch.set_num_threads(1)

FOLD = dict(fold_frames=12, overlap_frames=3)  # short segments: many streams from tiny texts

REQUESTS = [
    UtteranceRequest("Hello there.", None, 1),
    UtteranceRequest("A second item, a little longer. It has two sentences.", SpeakConfig(pause_s=0.05), 2),
    UtteranceRequest("Quick.", SpeakConfig(speed=2.5, volume=0.5), 3),
    UtteranceRequest("Warmer sampling here.", SpeakConfig(temperature=0.7), 4),
    UtteranceRequest("The last one is read slowly, word by word.", SpeakConfig(speed=0.8), 5),
]


@pytest.fixture(scope="module")
def voice(tiny_voice):
    from wavern.engine import Voice

    v = Voice.load(tiny_voice)
    yield v
    v.close()


@pytest.fixture(scope="module")
def alone(voice):
    return [render_utterance(voice, r.text, r.config, seed=r.seed, **FOLD) for r in REQUESTS]


def _same(a, b) -> None:
    np.testing.assert_array_equal(a.samples, b.samples)
    assert (a.sentences, a.word_timings, a.sample_rate) == (b.sentences, b.word_timings, b.sample_rate)


def test_items_render_the_same_bytes_whatever_they_are_batched_with(voice, alone, monkeypatch):
    sizes = []
    real = voice.vocoder.generate_batch
    monkeypatch.setattr(voice.vocoder, "generate_batch",
                        lambda gi, st, n, **kw: sizes.append(gi.shape[0]) or real(gi, st, n, **kw))
    for order in ([0, 1, 2, 3, 4], [4, 2], [3, 0, 1], [2]):
        sizes.clear()
        got = render_utterances(voice, [REQUESTS[i] for i in order], **FOLD)
        for i, r in zip(order, got):
            _same(r, alone[i])
        if order == [0, 1, 2, 3, 4]:
            assert max(sizes) >= 24  # the shared batch reached the lanes
            assert len(sizes) == 2  # item 3 (temperature 0.7) is batched apart from the rest
    got = render_utterances(voice, REQUESTS, **FOLD)
    walls = sum(r.compute_s for r in got)
    assert all(r.cpu_s > 0 and r.compute_s > 0 for r in got) and walls > 0


def test_unfolded_items_equal_render_utterance(voice):
    got = render_utterances(voice, REQUESTS[:3], fold_frames=None)
    for r, req in zip(got, REQUESTS[:3]):
        _same(r, render_utterance(voice, req.text, req.config, seed=req.seed, fold_frames=None))


def test_a_bad_item_fails_alone(voice, alone):
    reqs = [REQUESTS[0], UtteranceRequest("   "), REQUESTS[1], UtteranceRequest("x" * (MAX_TEXT_CHARS + 1)),
            UtteranceRequest("Fine.", SpeakConfig(speaker="nobody")), UtteranceRequest("🙂🙂")]
    got = render_utterances(voice, reqs, **FOLD)
    assert all(isinstance(e, ParameterError) for e in got[3:] + [got[1]])
    assert "nobody" in str(got[4]) and "speakable" in str(got[5]) and str(MAX_TEXT_CHARS) in str(got[3])
    _same(got[0], alone[0])
    _same(got[2], alone[1])


def test_a_failing_shared_batch_is_retried_item_by_item(voice, alone, monkeypatch):
    """If the shared batch raises (say, out of memory), every item is tried alone, and only the
    one that fails alone is reported failed."""
    real = voice.vocoder.render_many

    def flaky(gis, seeds, **kw):
        if len(gis) > 1:
            raise MemoryError("shared batch too big")
        if seeds[0] == REQUESTS[1].seed:
            raise RuntimeError("this item breaks the vocoder")
        return real(gis, seeds, **kw)

    monkeypatch.setattr(voice.vocoder, "render_many", flaky)
    got = render_utterances(voice, REQUESTS[:3], **FOLD)
    assert isinstance(got[1], RuntimeError)
    _same(got[0], alone[0])
    _same(got[2], alone[2])


# --------------------------------------------------------------------------------------------
# Word-timing sidecars on long audio (pure functions: hand-built timings, no voice needed).


def _hms(seconds_ms: int, sep: str) -> str:
    """HH:MM:SS<sep>mmm of a whole number of milliseconds, by hand."""
    h = seconds_ms // 3_600_000
    m = (seconds_ms // 60_000) % 60
    s = (seconds_ms // 1000) % 60
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{seconds_ms % 1000:03d}"


# sample rate 1000 Hz: a sample is a millisecond, so every time is exact
_LONG_TEXT = "one two three four"
_LONG_MS = [(0, 450), (400_000, 400_750), (3_723_456, 3_724_001), (39_599_999, 39_600_000)]


def _long_timings():
    from wavern.engine.voice import WordTiming

    spans, pos = [], 0
    for word in _LONG_TEXT.split():
        a = _LONG_TEXT.index(word, pos)
        spans.append((a, a + len(word)))
        pos = a + len(word)
    return tuple(WordTiming(ca, cb, a, b) for (ca, cb), (a, b) in zip(spans, _LONG_MS))


def test_srt_cues_are_numbered_from_one_with_hour_long_clock_times():
    from wavern.engine.batch import srt_text

    srt = srt_text(_LONG_TEXT, _long_timings(), 1000)
    blocks = srt.strip("\n").split("\n\n")
    words = _LONG_TEXT.split()
    assert len(blocks) == len(words)
    for n, (block, word, (a, b)) in enumerate(zip(blocks, words, _LONG_MS), start=1):
        # SubRip: the index line (from 1), the times line, the text line
        assert block.splitlines() == [str(n), f"{_hms(a, ',')} --> {_hms(b, ',')}", word]
    # 400 s is six minutes forty, 3723.456 s one hour two minutes three seconds
    assert "00:06:40,000 --> 00:06:40,750" in srt
    assert "01:02:03,456 --> 01:02:04,001" in srt
    assert "10:59:59,999 --> 11:00:00,000" in srt


def test_vtt_clock_times_past_an_hour():
    from wavern.engine.batch import vtt_text

    vtt = vtt_text(_LONG_TEXT, _long_timings(), 1000)
    assert vtt.startswith("WEBVTT\n\n")
    blocks = vtt[len("WEBVTT\n\n"):].strip("\n").split("\n\n")
    for block, word, (a, b) in zip(blocks, _LONG_TEXT.split(), _LONG_MS, strict=True):
        assert block.splitlines() == [f"{_hms(a, '.')} --> {_hms(b, '.')}", word]
    assert "00:06:40.000 --> 00:06:40.750" in vtt


def test_timing_json_sentences_carry_their_own_start_and_end():
    from wavern.engine.batch import RenderedUtterance, SentenceSpan, timing_json
    from wavern.engine.voice import WordTiming

    text = "Hi there. Bye now."
    sr = 100
    sentences = (SentenceSpan(0, 0, 9, 10, 250), SentenceSpan(1, 10, 18, 300, 520))
    words = (WordTiming(0, 2, 10, 80), WordTiming(3, 8, 90, 250), WordTiming(10, 13, 300, 400),
             WordTiming(14, 17, 410, 520))
    r = RenderedUtterance(np.zeros(600, np.int16), sr, sentences, words, compute_s=0.1)
    j = timing_json("x", text, r)
    assert j["samples"] == 600 and j["duration_s"] == 6.0 and j["sample_rate"] == sr
    assert j["sentences"] == [
        {"index": 0, "char_start": 0, "char_end": 9, "text": "Hi there.", "start_sample": 10, "end_sample": 250,
         "start_s": 0.1, "end_s": 2.5},
        {"index": 1, "char_start": 10, "char_end": 18, "text": "Bye now.", "start_sample": 300, "end_sample": 520,
         "start_s": 3.0, "end_s": 5.2},
    ]
    assert [(w["text"], w["start_sample"], w["end_sample"], w["start_s"], w["end_s"]) for w in j["words"]] == [
        ("Hi", 10, 80, 0.1, 0.8), ("there", 90, 250, 0.9, 2.5), ("Bye", 300, 400, 3.0, 4.0),
        ("now", 410, 520, 4.1, 5.2)]


def test_the_text_limit_admits_a_text_of_exactly_the_limit(voice):
    """(mutation audit) A text of max_chars characters is rendered; one more is refused."""
    from wavern.engine.batch import _prepare

    text = "Hello there, how are you?"
    assert _prepare(voice, text, None, seed=0, max_chars=len(text)).length > 0
    with pytest.raises(ParameterError, match=f"text is {len(text)} characters long; the limit is {len(text) - 1}"):
        _prepare(voice, text, None, seed=0, max_chars=len(text) - 1)


@pytest.mark.parametrize("T", [1, 11, 12, 13, 24, 25, 37])
def test_an_items_share_of_a_batch_counts_the_frames_the_vocoder_generates_for_it(T):
    """The compute time of a shared batch is split by each item's generated frames: one stream of
    T frames where it fits one segment, else every folded segment with its overlap (as
    ``fold_frame_inputs`` cuts them: the last one padded to full length)."""
    from wavern.engine.batch import _streams
    from wavern.engine.vocoder import fold_frame_inputs

    S, O = FOLD["fold_frames"], FOLD["overlap_frames"]
    segments = fold_frame_inputs(np.zeros((T, 2), np.float32), S, O)
    assert _streams(T, S, O) == (T if T <= S else segments.shape[0] * segments.shape[1])
    assert _streams(T, None, O) == T


def test_plain_texts_are_requests_with_the_voices_defaults_and_other_items_are_refused(voice):
    """(API review: a list of str came back as a list of AttributeErrors)"""
    got = render_utterances(voice, ["Hello there.", UtteranceRequest("Quick.", None, 0)], **FOLD)
    want = [render_utterance(voice, t, None, seed=0, **FOLD) for t in ("Hello there.", "Quick.")]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.samples, w.samples)
    with pytest.raises(ParameterError, match="list of texts"):
        render_utterances(voice, "Hello there.")
    with pytest.raises(ParameterError, match="found dict"):
        render_utterances(voice, [{"text": "Hello."}])


# --------------------------------------------------------------------------------------------
# SSML items.

def test_a_plain_ssml_item_renders_as_its_text(voice):
    text = "A second item, a little longer. It has two sentences."
    a = render_utterance(voice, f"<speak>{text}</speak>", SpeakConfig(pause_s=0.05), seed=2, **FOLD)
    b = render_utterance(voice, text, SpeakConfig(pause_s=0.05), seed=2, **FOLD)
    assert np.array_equal(a.samples, b.samples)
    assert [(s.start_sample, s.end_sample) for s in a.sentences] == [(s.start_sample, s.end_sample) for s in b.sentences]
    assert [t.char_start - len("<speak>") for t in a.word_timings] == [t.char_start for t in b.word_timings]


def test_ssml_pieces_take_their_rate_volume_and_breaks_and_span_the_markup(voice):
    sr = voice.sample_rate
    src = ('<speak><break time="100ms"/>Slow words here.<break time="300ms"/>'
           '<prosody rate="200%" volume="x-soft">Quick words there.</prosody> Normal end.</speak>')
    r = render_utterance(voice, src, SpeakConfig(pause_s=0.05), seed=7, **FOLD)
    first, quick, end = r.sentences
    assert [src[s.char_start:s.char_end] for s in r.sentences] == ["Slow words here.", "Quick words there.",
                                                                   "Normal end."]
    assert [s.index for s in r.sentences] == [0, 1, 2]
    # where each goes: the lead, the break (not the sentence pause), then the pause
    assert first.start_sample == int(0.1 * sr) and not r.samples[:first.start_sample].any()
    assert quick.start_sample == first.end_sample + int(0.3 * sr) and not r.samples[first.end_sample:quick.start_sample].any()
    assert end.start_sample == quick.end_sample + int(0.05 * sr)
    # the rate: as long as the same text rendered alone at twice the speed
    fast = render_utterance(voice, "Quick words there.", SpeakConfig(speed=2.0), seed=7, **FOLD).sentences[0]
    assert quick.end_sample - quick.start_sample == fast.end_sample - fast.start_sample
    # the volume, on that piece only: the same document at full volume, scaled there
    loud = render_utterance(voice, src.replace(' volume="x-soft"', ""), SpeakConfig(pause_s=0.05), seed=7, **FOLD)
    q = slice(quick.start_sample, quick.end_sample)
    assert np.array_equal(r.samples[q], np.clip(np.rint(loud.samples[q] * 0.25), -32768, 32767).astype(np.int16))
    rest = np.ones(r.samples.size, bool)
    rest[q] = False
    assert np.array_equal(r.samples[rest], loud.samples[rest]) and np.abs(loud.samples[q]).max() > 0
    words = [src[t.char_start:t.char_end] for t in r.word_timings]
    assert words == ["Slow", "words", "here", "Quick", "words", "there", "Normal", "end"]


def test_an_ssml_item_in_a_batch_is_its_render_alone_and_bad_markup_fails_alone(voice, alone):
    src = '<speak>Hi <sub alias="World Wide Web">WWW</sub>.<break time="50ms"/><emphasis>Now.</emphasis></speak>'
    reqs = [*REQUESTS[:2], UtteranceRequest(src, None, 9), UtteranceRequest("<speak>Bad <b></speak>", None, 1)]
    out = render_utterances(voice, reqs, **FOLD)
    assert np.array_equal(out[0].samples, alone[0].samples) and np.array_equal(out[1].samples, alone[1].samples)
    assert np.array_equal(out[2].samples, render_utterance(voice, src, seed=9, **FOLD).samples)
    assert isinstance(out[3], ParameterError) and "not well-formed" in str(out[3])
    as_text = render_utterances(voice, [UtteranceRequest(src, None, 9, ssml=False)], **FOLD)[0]
    assert as_text.samples.size > out[2].samples.size  # ssml=False: the tags read out as words too


def test_captions_of_an_ssml_item_show_its_words_not_its_markup(voice):
    from wavern.engine.batch import srt_text

    src = '<speak>Visit <sub alias="World Wide Web">WWW</sub> &amp; more.</speak>'
    r = render_utterance(voice, src, seed=0, **FOLD)
    cues = [block.splitlines()[2] for block in srt_text(src, r.word_timings, r.sample_rate).strip().split("\n\n")]
    assert cues == ["Visit", "WWW", "&", "more"]  # the alias's three words are one cue of the element's text
    src = '<speak>Visit <sub alias="World Wide Web"/> now.</speak>'  # an empty element: its alias
    r = render_utterance(voice, src, seed=0, **FOLD)
    cues = [block.splitlines()[2] for block in srt_text(src, r.word_timings, r.sample_rate).strip().split("\n\n")]
    assert cues == ["Visit", "World Wide Web", "now"]
