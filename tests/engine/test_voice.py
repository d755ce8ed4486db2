"""Voice.load / Voice.stream end to end on a tiny random voice: streaming equals one-shot,
controls act on the next chunk, the next sentence is prepared while the current one plays,
and broken voices are refused with a message naming the problem."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from wavern.dsp import int16_to_float
from wavern.engine.chunk import SpeakConfig
from wavern.engine.voice import CHUNK_SAMPLES, FIRST_CHUNK_SAMPLES, StreamControl, Voice
from wavern.errors import ParameterError, VoiceFileError


@pytest.fixture(scope="module")
def voice(tiny_voice):
    v = Voice.load(tiny_voice)
    yield v
    v.close()


def test_stream_chunks_are_contiguous_and_spanned(voice):
    text = "Hello there. How are you today?"
    chunks = list(voice.stream(text, SpeakConfig()))
    assert chunks[0].samples.shape[0] == FIRST_CHUNK_SAMPLES
    assert all(c.samples.shape[0] <= CHUNK_SAMPLES for c in chunks)
    pos = 0
    for c in chunks:
        assert c.start_sample == pos and c.sample_rate == 22050 and c.samples.dtype == np.float32
        pos += c.samples.shape[0]
        a, b = c.text_span
        assert 0 <= a < b <= len(text)
    assert {c.sentence_index for c in chunks} == {0, 1}
    assert text[slice(*chunks[0].text_span)].startswith("Hello")
    timed = [t for c in chunks for t in c.word_timings]
    assert [text[t.char_start:t.char_end] for t in timed] == ["Hello", "there", "How", "are", "you", "today"]
    assert all(t.start_sample < t.end_sample <= pos for t in timed)


def test_streamed_equals_one_shot_and_seams_do_not_click(voice):
    from wavern.conditioning.stream import stream_mel

    text = "The quick brown fox jumps over the lazy dog."
    streamed = [c.samples for c in voice.stream(text, SpeakConfig(), seed=7)]
    utt = voice.analyze(text)
    parts = list(stream_mel(voice.acoustic, utt.ids, utt.is_global, utt.sentence_of, speaker="en-us"))
    mel = np.concatenate([p.mel for p in parts])
    voc = voice.vocoder
    one_shot = voc.generate(voc.frame_inputs(mel), voc.new_state(seed=7), mel.shape[0] * voc.hop)
    y = np.concatenate(streamed)
    # The windowed conditioning equals the whole-sentence one to float32 rounding (BLAS sums
    # windows of different sizes in different orders) ...
    from wavern.engine.frame_windows import WindowedFrameInputs as _WindowedFrameInputs
    win = _WindowedFrameInputs(voc, mel)
    whole = voc.frame_inputs(mel)
    for pos in range(0, mel.shape[0] * voc.hop, 1000):
        gi, f0 = win.covering(pos, 1)
        np.testing.assert_allclose(gi[pos // voc.hop - f0], whole[pos // voc.hop], rtol=1e-5, atol=1e-5)
    # ... so the audio is the same sample for sample, but for the rare draw that lands within
    # a rounding error of a class boundary.
    ref = int16_to_float(one_shot)
    assert y.shape == ref.shape
    assert np.mean(y != ref) < 1e-3
    # Seam energy: the jump across each chunk boundary is no larger than the signal's typical jump.
    seams = np.cumsum([s.shape[0] for s in streamed])[:-1]
    d = np.abs(np.diff(y))
    assert d[seams - 1].mean() <= 3 * d.mean() + 1e-6


def test_same_seed_same_audio_and_seed_matters(voice):
    a = voice.synthesize("Seeds matter.", seed=1)
    b = voice.synthesize("Seeds matter.", seed=1)
    c = voice.synthesize("Seeds matter.", seed=2)
    np.testing.assert_array_equal(a, b)
    assert a.shape == c.shape and not np.array_equal(a, c)


def test_next_sentence_is_prepared_while_current_plays(voice, monkeypatch):
    started = {}
    real = voice.sentence_parts

    def spy(text, **kw):
        def gen():
            for spoken in real(text, **kw):
                yield spoken
                started.setdefault(spoken.sentence + 1, threading.Event()).set()
        return gen()

    monkeypatch.setattr(voice, "sentence_parts", spy)
    from wavern.engine.voice import RAMP_SAMPLES

    it = voice.stream("This first sentence is long enough, with a great many words in it, that its audio "
                      "outlasts the whole ramp of small chunks at the start. Second one follows.", SpeakConfig())
    ramp = [next(it) for _ in RAMP_SAMPLES]  # the worker waits for the ramp (see the test below)
    assert all(c.sentence_index == 0 for c in ramp)
    # Nobody asks for more audio now; the worker must still produce sentence 1 on its own.
    ev = started.setdefault(1, threading.Event())
    assert ev.wait(timeout=60), "sentence 1 was not prepared while sentence 0 was being played"
    it.close()


def test_controls_act_on_next_chunk(voice):
    ctl = StreamControl(volume=1.0)
    text = "A somewhat longer sentence, so that there are several chunks to play."
    ref = voice.synthesize(text, seed=3)
    out = []
    for i, c in enumerate(voice.stream(text, SpeakConfig(), control=ctl, seed=3)):
        out.append(c.samples)
        if i == 1:
            ctl.volume = 0.5
    y = np.concatenate(out)
    n0 = out[0].shape[0] + out[1].shape[0]
    np.testing.assert_array_equal(y[:n0], ref[:n0])
    np.testing.assert_allclose(y[n0:], np.clip(ref[n0:] * 0.5, -1, 1), atol=1e-7)

    ctl = StreamControl()
    got = []
    for i, c in enumerate(voice.stream(text, SpeakConfig(), control=ctl)):
        got.append(c)
        if i == 1:
            ctl.stop()
    assert len(got) == 2  # nothing after the stop


def test_a_stop_during_a_large_chunk_ends_the_stream_within_one_piece(voice, monkeypatch):
    """Chunks grow to 8192 samples, but the vocoder makes them in pieces of STOP_CHECK_SAMPLES and a
    stop between pieces ends the stream there: no more vocoder work, no chunk. Without a stop the
    pieces give the samples one call gives."""
    from wavern.engine.voice import GROW_SAMPLES, RAMP_SAMPLES, STOP_CHECK_SAMPLES

    text = ("A sentence long enough to outlast the ramp and the growing chunks by a good way, so that the "
            "stream reaches its largest chunks, and then it goes on a little longer still, to be sure of it.")
    ref = voice.synthesize(text, seed=5)
    calls = []
    real = voice.vocoder.generate
    ctl = StreamControl()
    big = len(RAMP_SAMPLES) + len(GROW_SAMPLES)  # the first chunk at the cap

    def generate(gi, state, n, **kw):
        calls.append(n)
        out = real(gi, state, n, **kw)
        if stop_at is not None and len(calls) == stop_at:
            ctl.stop()
        return out

    monkeypatch.setattr(voice.vocoder, "generate", generate)
    stop_at = None
    whole = [c.samples for c in voice.stream(text, SpeakConfig(), seed=5)]
    np.testing.assert_array_equal(np.concatenate(whole), ref)
    assert max(calls) <= STOP_CHECK_SAMPLES and len(whole) > big + 1, (calls, len(whole))
    calls.clear()
    got = []
    for i, c in enumerate(voice.stream(text, SpeakConfig(), control=ctl, seed=5)):
        got.append(c)
        if i == big - 1:
            stop_at = len(calls) + 1  # the first piece of the next (a cap-sized) chunk stops the stream
    assert len(got) == big and len(calls) == stop_at  # not one more piece, not one more chunk


def test_a_stop_after_a_sentence_skips_its_pause(voice):
    text = "First one. Second one."
    ctl = StreamControl(pause_s=2.0)
    got = []
    for c in voice.stream(text, control=ctl):
        got.append(c)
        if c.sentence_index == 0 and c.start_sample + c.samples.size == _sentence_end(voice, text, 0):
            ctl.stop()
    assert got and all(np.any(c.samples != 0) for c in got)  # no 2 s of silence after the stop


def _sentence_end(voice, text: str, index: int) -> int:
    chunks = [c for c in voice.stream(text) if c.sentence_index == index]
    return chunks[-1].start_sample + chunks[-1].samples.size


def test_blocks_keep_the_requests_sentences_and_a_change_of_speed_skips_none(voice):
    # The line-length rule for "go\nOn" reads the line before it: a block's text segmented again split
    # "Then words go" from "On here." (five sentences for four, indices repeated) and a change of speed
    # in "On here." skipped the block holding "Third one."
    from wavern.conditioning.frontend import segment

    text = "This opening sentence of the text is rather long indeed. Then words go\nOn here. Third one. Fourth one."
    sentences = [s.text for s in segment(text)]
    assert len(sentences) == 4
    plain = list(voice.stream(text, seed=1))
    assert sorted({c.sentence_index for c in plain}) == [0, 1, 2, 3]
    assert [text[slice(*c.text_span)] for c in plain if c.samples.size][-1] == "Fourth one."
    control = StreamControl()
    heard, switched = [], False
    for c in voice.stream(text, control=control, seed=1):
        span = text[slice(*c.text_span)]
        if not heard or heard[-1] != span:
            heard.append(span)
        if not switched and span == "Then words go\nOn here.":
            control.speed, switched = 1.5, True
    assert switched and heard == sentences


def test_close_while_the_next_sentence_waits_behind_other_work_still_finishes_the_stream(tiny_voice):
    import threading

    v = Voice.load(tiny_voice)
    text = "One. Two. Three."
    ref = v.synthesize(text, seed=4)
    gate = threading.Event()
    v._executor.submit(gate.wait)  # another stream's work holds the voice's one worker
    out, closed_mid_stream = [], False
    try:
        for c in v.stream(text, seed=4):
            out.append(c.samples)
            if c.sentence_index == 0 and not v._closed and v._executor._work_queue.qsize() > 0:
                v.close()  # cancels the queued next-sentence job (it raised CancelledError)
                closed_mid_stream = True
                gate.set()
    finally:
        gate.set()
        v.close()
    assert closed_mid_stream and np.array_equal(np.concatenate(out), ref)


@pytest.mark.parametrize("text", ["One of the best. It is in the house to the left.",
                                  "It was a. Then it is in the."])  # joined words ending a sentence, too
def test_every_word_gets_a_timing_even_one_espeak_speaks_inside_the_word_before(voice, text):
    utt = voice.analyze(text)
    merged = [w.text for i, w in enumerate(utt.words) if i not in set(utt.word_of.tolist())]
    assert merged  # espeak joins some ("of the", "in the"): they have no phonemes of their own
    timings = [t for c in voice.stream(text, seed=0) for t in c.word_timings]
    assert [text[t.char_start:t.char_end] for t in timings] == [w.text for w in utt.words]
    by_word = {(t.char_start, t.char_end): (t.start_sample, t.end_sample) for t in timings}
    for i, w in enumerate(utt.words):  # a joined word shares the time of the word it was spoken in
        if w.text in merged and i not in set(utt.word_of.tolist()):
            host = utt.words[max(j for j in utt.word_of.tolist() if 0 <= j < i)]
            assert by_word[(w.start, w.end)] == by_word[(host.start, host.end)]


def test_a_lexicon_assigned_during_a_stream_is_the_next_requests(voice):
    from wavern.conditioning.frontend.lexicon import Lexicon

    text = "First one here. Tomato soup. Tomato again. Tomato once more. Tomato last."
    before = np.concatenate([c.samples for c in voice.stream(text, seed=1)])
    got = []
    try:
        for i, c in enumerate(voice.stream(text, seed=1)):
            got.append(c.samples)
            if i == 0:
                voice.lexicon = Lexicon({"tomato": "banana split"})
        after = np.concatenate([c.samples for c in voice.stream(text, seed=1)])
    finally:
        voice.lexicon = None
    assert np.array_equal(np.concatenate(got), before)  # the running stream kept its own
    assert after.shape != before.shape or not np.array_equal(after, before)  # the next one reads the new


def test_a_loud_volume_bends_peaks_instead_of_clipping_them(voice):
    from wavern.dsp import soft_limit

    text = "Louder words here."
    plain = np.concatenate([c.samples for c in voice.stream(text, SpeakConfig(), seed=2)])
    loud = np.concatenate([c.samples for c in voice.stream(text, SpeakConfig(volume=4.0), seed=2)])
    np.testing.assert_allclose(loud, soft_limit(plain.astype(np.float64) * 4.0), atol=1e-6, rtol=0)
    assert not np.allclose(loud, np.clip(plain * 4.0, -1.0, 1.0), atol=1e-3)  # (it was clipped)


def test_a_control_without_speed_or_volume_takes_the_requests(voice):
    text = "Quick words here."
    fast = sum(c.samples.size for c in voice.stream(text, SpeakConfig(speed=2.0), seed=1))
    with_control = list(voice.stream(text, SpeakConfig(speed=2.0, volume=0.5), control=StreamControl(), seed=1))
    assert sum(c.samples.size for c in with_control) == fast
    quiet = np.concatenate([c.samples for c in voice.stream(text, SpeakConfig(speed=2.0, volume=0.5), seed=1)])
    assert np.array_equal(np.concatenate([c.samples for c in with_control]), quiet)
    explicit = StreamControl(speed=1.0)
    slow = sum(c.samples.size for c in voice.stream(text, SpeakConfig(speed=2.0), control=explicit, seed=1))
    assert slow > fast  # the control's own value wins


@pytest.mark.parametrize(("field", "bad"), [("speed", 0.0), ("speed", float("nan")), ("speed", 100.0),
                                            ("volume", float("nan")), ("volume", -1.0), ("pause_s", float("inf")),
                                            ("pause_s", 60.0), ("speed", "fast")])
def test_stream_control_refuses_values_speak_config_refuses(field, bad):
    ctl = StreamControl()
    with pytest.raises(ParameterError, match=field):
        setattr(ctl, field, bad)
    with pytest.raises(ParameterError, match=field):
        StreamControl(**{field: bad})


def test_a_closed_voice_finishes_its_stream_and_refuses_new_ones(tiny_voice):
    v = Voice.load(tiny_voice)
    text = "One sentence here. Another sentence there. And a third one."
    ref = np.concatenate([c.samples for c in v.stream(text, seed=4)])
    out = []
    for i, c in enumerate(v.stream(text, seed=4)):
        out.append(c.samples)
        if i == 1:
            v.close()
    assert np.array_equal(np.concatenate(out), ref)  # the rest prepared on the stream's own thread
    with pytest.raises(ParameterError, match="closed"):
        v.stream("Hi.")


def test_blocks_cover_every_sentence_once():
    from wavern.engine.voice import BLOCK_SENTENCES, plan_blocks

    for n in range(0, 40):
        blocks = plan_blocks(n)
        covered = [i for a, b in blocks for i in range(a, b)]
        assert covered == list(range(n))
        if n:
            assert blocks[0] == (0, 1)  # first audio waits for one sentence only
            assert max(b - a for a, b in blocks) <= max(BLOCK_SENTENCES)


def test_long_text_spans_and_timings_point_into_the_original(voice):
    text = "  One. Two words here! Three, four? Five is here. Six; seven. Eight nine. Ten."
    chunks = list(voice.stream(text))
    assert sorted({c.sentence_index for c in chunks}) == list(range(7))
    words = [text[t.char_start:t.char_end] for c in chunks for t in c.word_timings]
    assert words[:4] == ["One", "Two", "words", "here"] and words[-1] == "Ten"
    starts = [t.start_sample for c in chunks for t in c.word_timings]
    assert starts == sorted(starts)


def test_speed_change_mid_sentence_shortens_the_rest(voice):
    text = "A somewhat longer sentence, so that there are several chunks to play."
    slow = sum(c.samples.size for c in voice.stream(text, SpeakConfig(speed=1.0)))
    ctl = StreamControl(speed=1.0)
    total = 0
    for i, c in enumerate(voice.stream(text, SpeakConfig(), control=ctl)):
        total += c.samples.size
        if i == 0:
            ctl.speed = 2.0
    assert total < slow


def test_word_timings_are_sent_again_after_a_change_of_speed(voice):
    """Faster after the second chunk: the words still to come get new timings, inside the (shorter)
    audio actually made; the words already under way keep theirs."""
    text = "A somewhat longer sentence, so that there are several chunks to play."
    ctl = StreamControl(speed=1.0)
    chunks = []
    for i, c in enumerate(voice.stream(text, control=ctl, seed=2)):
        chunks.append(c)
        if i == 1:
            ctl.speed = 2.0
    end = chunks[-1].start_sample + chunks[-1].samples.size
    sent = [c.word_timings for c in chunks if c.word_timings]
    assert len(sent) == 2  # with the first chunk, and again after the change
    first, again = sent
    switch = chunks[2].start_sample
    latest = {(t.char_start, t.char_end): t for t in first + again}  # a word's last timing wins
    final = sorted(latest.values(), key=lambda t: t.start_sample)
    assert all(t.start_sample >= switch for t in again) and again  # only words still to come
    assert final[-1].end_sample <= end < first[-1].end_sample  # the old timings ran past the shortened audio
    assert [text[t.char_start:t.char_end] for t in final] == [text[t.char_start:t.char_end] for t in first]
    assert [t.start_sample for t in final] == sorted(t.start_sample for t in final)


@pytest.mark.parametrize("switch_after", range(6))
@pytest.mark.parametrize("speed", [2.0, 0.6])
def test_after_a_change_of_speed_each_word_is_timed_once(voice, switch_after, speed):
    """Whichever chunk the change lands on, slower or faster: the words begun when it lands keep their
    timings and are not sent again, every word not begun is sent again (none lost, none twice), and
    the new timings start where the change lands (this voice has no mel matching holding audio back)."""
    text = "A somewhat longer sentence, so that there are several chunks to play."
    ctl = StreamControl(speed=1.0)
    chunks = []
    for i, c in enumerate(voice.stream(text, control=ctl, seed=2)):
        chunks.append(c)
        if i == switch_after:
            ctl.speed = speed
    sent = [c.word_timings for c in chunks if c.word_timings]
    if len(sent) == 1:  # the change came after the sentence's last chunk was made
        return
    first, again = sent
    lands = chunks[switch_after + 1].start_sample
    kept = [t for t in first if t.start_sample < lands]
    spans = [(t.char_start, t.char_end) for t in kept + list(again)]
    assert spans == [(t.char_start, t.char_end) for t in first]  # each word once, in order
    assert all(t.start_sample >= lands for t in again)


def test_words_still_to_come_are_the_old_timelines_and_start_where_the_change_lands():
    """(test_window's change of speed failed once in a full run on a loaded machine, the window's
    word starts out of order; this is a cause that fits, not one seen there) The new timeline puts
    the landing sample at the same fraction of the
    sentence, not at a word boundary, so a word just after it by the old timing ("b") can start
    just before it by the new: it was neither kept nor sent again, and its old start stayed after
    the next word's new one. Which words are to come is the old timeline's call; none starts early."""
    from wavern.engine.voice import WordTiming, retimed

    old = (WordTiming(0, 1, 0, 900), WordTiming(2, 3, 1000, 1900), WordTiming(4, 5, 2000, 2900))
    new = (WordTiming(0, 1, 0, 500), WordTiming(2, 3, 950, 1400), WordTiming(4, 5, 1400, 1900))  # faster
    assert retimed(old, new, 1000) == (WordTiming(2, 3, 1000, 1400), WordTiming(4, 5, 1400, 1900))
    assert retimed(old, new, 990) == (WordTiming(2, 3, 990, 1400), WordTiming(4, 5, 1400, 1900))
    assert retimed(old, new, 1001) == (WordTiming(4, 5, 1400, 1900),)  # "b" begun: it keeps its old timing
    squeezed = retimed(old, (WordTiming(2, 3, 800, 990), WordTiming(4, 5, 990, 1200)), 1000)
    assert squeezed == (WordTiming(2, 3, 1000, 1000), WordTiming(4, 5, 1000, 1200))  # never before the landing
    assert retimed(old, new, 3000) == ()


@pytest.mark.parametrize("switches", [(1, 3), (0, 2), (2, 4)])
def test_two_changes_of_speed_time_each_word_once_in_order(voice, switches):
    """Twice in a sentence (a slider moved in steps): after each change the words not begun are
    sent again, so what a player keeps (the latest timing of each word, as the window replaces
    the re-sent suffix) is every word once, in the text's order, at increasing samples."""
    text = "A somewhat longer sentence, so that there are several chunks to play."
    ctl = StreamControl(speed=1.0)
    kept, speeds = [], iter([2.0, 0.7])
    for i, c in enumerate(voice.stream(text, control=ctl, seed=2)):
        if c.word_timings:
            first = (c.word_timings[0].char_start, c.word_timings[0].char_end)
            at = next((k for k, t in enumerate(kept) if (t.char_start, t.char_end) == first), len(kept))
            kept[at:] = c.word_timings
        if i in switches:
            ctl.speed = next(speeds)
    words = [(t.char_start, t.char_end) for t in kept]
    assert len(words) == len(set(words)) and words == sorted(words)
    assert [text[a:b] for a, b in words] == text.rstrip(".").replace(",", "").split()
    assert [t.start_sample for t in kept] == sorted(t.start_sample for t in kept)


@pytest.mark.parametrize("text", ["", "   \n\t", "😀🎉", "..."])
def test_nothing_to_say_is_parameter_error(voice, text):
    with pytest.raises(ParameterError, match="nothing to say"):
        list(voice.stream(text))


def test_unknown_speaker_error_names_the_closest_and_not_all_72(voice, monkeypatch):
    names = tuple(f"{accent}+{v}{i}" for accent in ("en", "en-us", "en-gb-x-rp") for v in "fm" for i in range(1, 13))
    monkeypatch.setattr(voice.acoustic, "config", dataclasses.replace(voice.acoustic.config, speakers=names))
    assert voice.resolve_speaker("en-us+f3") == "en-us+f3"
    assert voice.resolve_speaker(None) == voice.resolve_speaker("") == voice.default_speaker
    with pytest.raises(ParameterError, match=r"unknown speaker 'en-us\+f33'; did you mean en-us\+f3") as e:
        list(voice.stream("Hello.", SpeakConfig(speaker="en-us+f33")))
    assert "72:" in str(e.value) and "en-gb-x-rp+m12" not in str(e.value) and "--speakers" in str(e.value)
    with pytest.raises(ParameterError, match="unknown speaker 'zzzz'; this voice has 72") as e:
        voice.resolve_speaker("zzzz")
    assert "did you mean" not in str(e.value)


def test_odd_unicode_speaks(voice):
    y = voice.synthesize("Caf\u00e9 \u202e na\u00efve \ud800 \x07 Stra\u00dfe 42%.")
    assert y.size > 0 and np.all(np.isfinite(y))


def test_vocode_keeps_length(voice):
    x = 0.3 * np.sin(np.arange(5000) / 20).astype(np.float32)
    y = voice.vocode(x)
    assert y.shape == x.shape and y.dtype == np.float32


def test_quiet_cuts_cover_the_audio_and_fall_in_its_pauses():
    from wavern.engine.voice import quiet_cuts

    rng = np.random.default_rng(0)
    hop, piece, search = 256, 100 * 256, 20 * 256
    x = rng.standard_normal(1000 * 256 + 77).astype(np.float32)
    pauses = [90 * 256, 183 * 256, 281 * 256, 370 * 256, 460 * 256, 555 * 256, 650 * 256, 745 * 256]
    for p in pauses:  # a silent hop in each piece's search window
        x[p - hop:p] = 0.0
    cuts = quiet_cuts(x, piece, search, hop)
    assert cuts[0][0] == 0 and cuts[-1][1] == len(x)
    assert all(b == c for (_, b), (c, _) in zip(cuts, cuts[1:]))  # contiguous
    assert all(b - a <= piece + search // 2 for a, b in cuts)
    assert all((b - a) % hop == 0 for a, b in cuts[:-1])
    ends = [b for _, b in cuts[:-1]]
    assert ends[:len(pauses)] == pauses[:len(ends)]  # each cut in the pause within its reach
    assert quiet_cuts(x[:2 * piece], piece, search, hop) == [(0, 2 * piece)]  # short input: one piece


def test_long_vocode_goes_piece_by_piece(voice, monkeypatch):
    """Audio longer than two pieces is vocoded piece by piece: the result is the pieces' own
    copy syntheses (piece i with seed + i), joined."""
    import wavern.engine.voice as V

    rng = np.random.default_rng(1)
    t = np.arange(int(3.1 * 22050))
    x = (0.3 * np.sin(t / 15) * (rng.random(t.size) < 0.97)).astype(np.float32)
    x[int(0.85 * 22050):int(0.9 * 22050)] = 0.0  # pauses for the cuts
    x[int(1.7 * 22050):int(1.75 * 22050)] = 0.0
    monkeypatch.setattr(V, "VOCODE_PIECE_S", 1.0)
    monkeypatch.setattr(V, "VOCODE_SEARCH_S", 0.3)
    cuts = V.quiet_cuts(x, 22050, int(0.3 * 22050), 256)
    assert len(cuts) >= 3
    y = voice.vocode(x, seed=5)
    monkeypatch.setattr(V, "VOCODE_PIECE_S", 100.0)  # each piece alone: one piece
    parts = [voice.vocode(x[a:b], seed=5 + i) for i, (a, b) in enumerate(cuts)]
    assert y.shape == x.shape
    np.testing.assert_array_equal(y, np.concatenate(parts))


def _copy(src, tmp_path):
    dst = tmp_path / "v"
    shutil.copytree(src, dst)
    return dst


def test_truncated_vocoder_file_is_refused(tiny_voice, tmp_path):
    d = _copy(tiny_voice, tmp_path)
    raw = (d / "vocoder.safetensors").read_bytes()
    (d / "vocoder.safetensors").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(VoiceFileError, match="vocoder.safetensors"):
        Voice.load(d)


def test_mismatched_dsp_is_refused(tiny_voice, tmp_path):
    d = _copy(tiny_voice, tmp_path)
    meta = json.loads((d / "voice.json").read_text())
    meta["dsp"]["hop_length"] = 200
    (d / "voice.json").write_text(json.dumps(meta))
    with pytest.raises(VoiceFileError, match="hop_length"):
        Voice.load(d)


def test_mismatched_vocoder_size_is_refused(tiny_voice, tmp_path):
    d = _copy(tiny_voice, tmp_path)
    meta = json.loads((d / "voice.json").read_text())
    meta["vocoder"]["hidden_size"] = 128
    (d / "voice.json").write_text(json.dumps(meta))
    with pytest.raises(VoiceFileError, match="hidden_size"):
        Voice.load(d)


def test_missing_acoustic_and_bad_json_are_refused(tiny_voice, tmp_path):
    d = _copy(tiny_voice, tmp_path)
    (d / "acoustic.safetensors").unlink()
    with pytest.raises(VoiceFileError, match="acoustic"):
        Voice.load(d)
    (d / "voice.json").write_text("{not json")
    with pytest.raises(VoiceFileError, match="not valid JSON"):
        Voice.load(d)


def _edited(src, tmp_path, name: str, edit) -> Path:
    d = tmp_path / name
    shutil.copytree(src, d)
    meta = json.loads((d / "voice.json").read_text())
    edit(meta)
    (d / "voice.json").write_text(json.dumps(meta) if isinstance(meta, dict) else meta)
    return d


@pytest.mark.parametrize(("name", "edit", "message"), [
    ("list", lambda m: m.update(inference=[1]), "'inference' must be an object"),
    ("hot", lambda m: m["inference"].update(temperature="hot"), "inference.temperature"),
    ("pause", lambda m: m["inference"].update(pause_s=1e9), "inference.pause_s"),
    ("ltp", lambda m: m["inference"].update(ltp_gain_scale=9), "inference.ltp_gain_scale"),
    ("speaker", lambda m: m["inference"].update(speaker=5), "inference.speaker"),
    ("speakers", lambda m: m["acoustic"].update(speakers="abc"), "acoustic.speakers"),
    ("blocks", lambda m: m["vocoder"].update(cond_blocks=0), "cond_blocks"),
    ("window", lambda m: m["acoustic"]["encoder"].update(window=4.0), "'window' must be an integer, found 4.0"),
    ("heads", lambda m: m["acoustic"].update(decoder_heads=2.0), "'decoder_heads' must be an integer"),
    ("encoder", lambda m: m["acoustic"].update(encoder=None), "'encoder' must be a dict, found None"),
    ("mel", lambda m: m["acoustic"].update(mel=None), "'mel' must be a dict, found None"),
    ("hidden", lambda m: m["vocoder"].update(hidden_size=64.0), "vocoder.hidden_size' must be an integer"),
])
def test_a_mistyped_or_mismatched_voice_json_is_refused_by_name(tiny_voice, tmp_path, name, edit, message):
    with pytest.raises(VoiceFileError, match=message):
        Voice.load(_edited(tiny_voice, tmp_path, name, edit))


def test_vocoder_weights_the_config_does_not_describe_are_refused(tiny_voice, tmp_path):
    from safetensors.numpy import load_file, save_file

    d = _copy(tiny_voice, tmp_path)
    tensors = load_file(str(d / "vocoder.safetensors"))
    tensors["cond.blocks.1.conv1.weight"] = tensors["cond.blocks.0.conv1.weight"]  # a block the config lacks
    save_file(tensors, str(d / "vocoder.safetensors"))
    with pytest.raises(VoiceFileError, match=r"cond\.blocks\.1\.conv1\.weight.*cond_blocks=1"):
        Voice.load(d)


def test_a_voice_json_too_deep_or_with_a_huge_number_is_a_voice_file_error(tiny_voice, tmp_path):
    from wavern.engine.voicefile import read_voice_json

    for name, text in (("deep", "[" * 100000 + "]" * 100000), ("huge", '{"format": ' + "9" * 5000 + "}")):
        d = tmp_path / name
        d.mkdir()
        (d / "voice.json").write_text(text)
        with pytest.raises(VoiceFileError, match="not valid JSON"):
            read_voice_json(d)


# ----------------------------------------------------------------------------- first audio
def test_chunk_schedule_starts_small_and_ramps_to_the_cap():
    from wavern.engine.voice import GROW_SAMPLES, RAMP_SAMPLES, chunk_samples

    n = len(RAMP_SAMPLES) + len(GROW_SAMPLES)
    sizes = [chunk_samples(k) for k in range(n + 8)]
    assert sizes[0] == FIRST_CHUNK_SAMPLES and sizes[:len(RAMP_SAMPLES)] == list(RAMP_SAMPLES)
    assert sizes[n - 1] < CHUNK_SAMPLES and sizes[n:] == [CHUNK_SAMPLES] * 8
    assert sizes == sorted(sizes) and all(s % 256 == 0 for s in sizes)  # whole frames
    assert all(b <= 1.5 * a for a, b in zip(sizes, sizes[1:]))  # no step the bound below could not take
    # The documented bound: a player starting at chunk 0 never runs dry while the wall-clock
    # RTF is <= 0.73, checked by stepping a player chunk by chunk (exact rational arithmetic).
    from fractions import Fraction

    for r, ok in ((Fraction(73, 100), True), (Fraction(75, 100), False)):
        made = played_until = Fraction(0)  # seconds of audio made; when the player needs the next chunk
        dry = False
        for j, n in enumerate(sizes):
            if j == 0:
                played_until = Fraction(n)  # the player starts at chunk 0's arrival (time 0)
                continue
            made += r * n  # chunk j arrives after r * n more samples' worth of compute
            dry |= made > played_until
            played_until += n
        assert dry is not ok, r
    assert chunk_samples(10_000) == CHUNK_SAMPLES
    with pytest.raises(ParameterError, match="chunk index"):
        chunk_samples(-1)


def test_stream_chunks_follow_the_schedule_across_sentences(voice):
    from wavern.engine.voice import chunk_samples

    text = "A first sentence of a few words. And a second one, a little longer than the first."
    chunks = list(voice.stream(text, seed=2))
    lengths = [c.samples.shape[0] for c in chunks]
    by_sentence = {}
    for c in chunks:
        by_sentence.setdefault(c.sentence_index, []).append(c.samples.shape[0])
    k = 0
    for s, ls in sorted(by_sentence.items()):
        for i, n in enumerate(ls):
            if i < len(ls) - 1:
                assert n == chunk_samples(k)  # every chunk but a sentence's last is full size
            else:
                assert 0 < n <= chunk_samples(k)
            k += 1
    assert lengths[0] == FIRST_CHUNK_SAMPLES


def _one_call_per_sentence(voice, text: str, seed: int) -> np.ndarray:
    """Independent reference: each sentence's whole mel through one generate call, state carried."""
    voc = voice.vocoder
    state = voc.new_state(seed=seed)
    ref = []
    for spoken in voice.sentence_parts(text, speaker=voice.default_speaker, speed=1.0):
        mel = spoken.part.mel
        if mel.shape[0] == 0:
            continue
        state.position = 0
        ref.append(voc.generate(voc.frame_inputs(mel), state, mel.shape[0] * voc.hop))
    return int16_to_float(np.concatenate(ref))


def test_streamed_sentences_equal_one_generate_call_per_sentence(voice):
    text = "The first sentence is here. A second, longer sentence follows it. Third."
    y = np.concatenate([c.samples for c in voice.stream(text, seed=11)])
    ref = _one_call_per_sentence(voice, text, seed=11)
    assert y.shape == ref.shape
    assert np.mean(y != ref) < 1e-3  # as above: only a draw on a rounding boundary may flip


def test_first_sentence_runs_on_the_calling_thread_and_the_worker_waits_for_the_ramp(voice, monkeypatch):
    """No hand-off before the first audio; no other work during the ramp of small chunks."""
    from wavern.engine.voice import RAMP_SAMPLES

    events = []
    real_parts = voice.sentence_parts
    real_generate = voice.vocoder.generate

    def parts(text, **kw):
        gen = real_parts(text, **kw)

        def spy():
            while True:
                events.append(("part", threading.current_thread().name))
                try:
                    item = next(gen)
                except StopIteration:
                    return
                yield item
        return spy()

    def generate(*a, **k):
        events.append(("generate", threading.current_thread().name))
        return real_generate(*a, **k)

    monkeypatch.setattr(voice, "sentence_parts", parts)
    monkeypatch.setattr(voice.vocoder, "generate", generate)
    caller = threading.current_thread().name
    long_first = ("This first sentence is long enough, with a great many words in it, that its audio "
                  "outlasts the whole ramp of small chunks at the start. Then another one.")
    chunks = list(voice.stream(long_first, seed=0))
    first_sentence = [c for c in chunks if c.sentence_index == 0]
    assert len(first_sentence) > len(RAMP_SAMPLES)
    assert events[0] == ("part", caller)  # the first sentence: analysed right here
    worker = [i for i, (kind, name) in enumerate(events) if kind == "part" and name != caller]
    assert worker, "the next sentence was not prepared by the worker"
    # The worker starts only once the ramp's chunks are made, all of them on the calling thread
    # (it may get the CPU a few chunks later still).
    before = events[1:worker[0]]
    assert {kind for kind, _ in before} == {"generate"} and len(before) >= len(RAMP_SAMPLES)
    assert all(name == caller for _, name in before)
    assert chunks[0].samples.shape[0] == FIRST_CHUNK_SAMPLES


def test_first_chunk_waits_only_for_the_first_rows_of_the_last_decoder_layer(voice, monkeypatch):
    """The first chunk needs the mel of the first conditioning window: the acoustic model's last
    layer runs on its first rows only; the rest of the sentence is decoded once, later."""
    from wavern.conditioning import stream as ac
    from wavern.conditioning.runtime import AcousticRuntime

    from wavern.engine.voice import RAMP_SAMPLES

    calls = []
    chunks = []
    real = AcousticRuntime._mel_rows

    def spy(self, x, g, start, stop, cache):
        calls.append((start, stop, x.shape[0], threading.current_thread().name, len(chunks)))
        return real(self, x, g, start, stop, cache)

    monkeypatch.setattr(AcousticRuntime, "_mel_rows", spy)
    text = ("This first sentence is long enough, with a great many words in it, that its mel has "
            "far more frames than the first conditioning windows need, several times over in fact.")
    it = voice.stream(text, seed=4)
    chunks.append(next(it))
    caller = threading.current_thread().name
    (start, stop, frames, name, _), = calls
    assert (start, stop) == (0, ac.FIRST_DECODE_FRAMES) and frames > 2 * ac.FIRST_DECODE_FRAMES
    assert name == caller
    chunks.extend(it)
    assert [c[:2] for c in calls] == [(0, ac.FIRST_DECODE_FRAMES), (ac.FIRST_DECODE_FRAMES, frames)]
    assert calls[1][4] >= len(RAMP_SAMPLES)  # the second pass comes after the ramp of small chunks


def test_voice_runs_blas_single_threaded_by_default(tiny_voice):
    from threadpoolctl import threadpool_info, threadpool_limits

    from wavern.engine.voice import use_threads

    with threadpool_limits(limits=2, user_api="blas"):  # (given back: see the next-but-one test)
        v = Voice.load(tiny_voice)
        try:
            assert v.threads == 1
            assert {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"} == {1}
        finally:
            v.close()
    with pytest.raises(ParameterError, match="threads"):
        use_threads(0)


def test_speaking_never_imports_torch(tiny_voice, tmp_path):
    """The acoustic model runs in numpy: loading a voice and streaming from it leaves torch (1.4 s
    to import, most of a cold start) unloaded."""
    code = ("import sys\n"
            "from wavern.engine import Voice\n"
            f"with Voice.load({str(tiny_voice)!r}) as v:\n"
            "    n = sum(c.samples.size for c in v.stream('Hello there. Two sentences.', seed=1))\n"
            "print(n, 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    n, torch_loaded = out.stdout.split()
    assert int(n) > 0 and torch_loaded == "False"


@pytest.fixture(scope="module", params=["linear", "mulaw", "mulaw+ltp", "linear+ltp+input"])
def lpc_voice(tmp_path_factory, request):
    from voice_factory import make_tiny_voice

    kind = request.param.split("+")
    path = make_tiny_voice(tmp_path_factory.mktemp("voices") / "lpcvoice", lpc_order=16, seed=3,
                           excitation=kind[0], ltp="ltp" in kind, ltp_input="input" in kind)
    v = Voice.load(path)
    yield v
    v.close()


def test_lpc_voice_streams_what_one_generate_call_per_sentence_makes(lpc_voice):
    """An LPC voice (the vocoder makes the excitation; the prediction is added back, its memory
    carried across chunks and sentences like h): streamed == one call per sentence, and the
    offline renderer (unfolded) == the stream."""
    from wavern.engine.batch import render_utterance

    voice = lpc_voice
    assert voice.vocoder.lpc_order == 16 and voice.vocoder.excitation == voice.meta["vocoder"]["excitation"]
    text = "The first sentence is here. A second one follows."
    y = np.concatenate([c.samples for c in voice.stream(text, seed=4)])
    ref = _one_call_per_sentence(voice, text, seed=4)
    assert y.shape == ref.shape
    # As for any voice, a draw may flip on a rounding boundary (the stream's mel is decoded
    # window by window); here a prediction may also round the other way, which moves a sample by
    # one step and fades through the predictor's memory: count only larger differences.
    assert np.mean(np.abs(y - ref) > 4 / 32768) < 1e-3
    rendered = render_utterance(voice, text, seed=4, fold_frames=None)
    np.testing.assert_array_equal(int16_to_float(rendered.samples), y)  # the renderer decodes as the stream
    x = (0.3 * np.sin(2 * np.pi * 150 * np.arange(6000) / 22050)).astype(np.float32)
    copied = voice.vocode(x)  # copy synthesis (a pitch voice tracks the pitch of x itself)
    assert copied.shape == x.shape and np.isfinite(copied).all()


def test_voice_with_a_prediction_input_vocoder_is_refused(tiny_voice, tmp_path):
    bad = tmp_path / "v"
    shutil.copytree(tiny_voice, bad)
    meta = json.loads((bad / "voice.json").read_text())
    meta["vocoder"].update(lpc_order=16, lpc_prediction_input=True)
    (bad / "voice.json").write_text(json.dumps(meta))
    with pytest.raises(VoiceFileError, match="lpc_prediction_input"):
        Voice.load(bad)
    meta["vocoder"]["lpc_order"] = "16"
    (bad / "voice.json").write_text(json.dumps(meta))
    with pytest.raises(VoiceFileError, match="lpc_order"):
        Voice.load(bad)
    meta["vocoder"].update(lpc_order=0, lpc_prediction_input=False, excitation="mulaw")
    (bad / "voice.json").write_text(json.dumps(meta))
    with pytest.raises(VoiceFileError, match="excitation"):
        Voice.load(bad)
    meta["vocoder"].update(excitation="linear", pitch=True)
    (bad / "voice.json").write_text(json.dumps(meta))
    with pytest.raises(VoiceFileError, match="pitch"):
        Voice.load(bad)
    meta["vocoder"].update(pitch=False, ltp_input=True)  # the period input without a long-term predictor
    (bad / "voice.json").write_text(json.dumps(meta))
    with pytest.raises(VoiceFileError, match="ltp_input"):
        Voice.load(bad)


@pytest.fixture(scope="module")
def prosody_voice(tiny_prosody_voice):
    v = Voice.load(tiny_prosody_voice)
    yield v
    v.close()


def test_pitch_settings_reach_the_acoustic_model_in_stream_and_render(prosody_voice, monkeypatch):
    from wavern.conditioning import stream as ac
    from wavern.engine.batch import render_utterance

    v = prosody_voice
    assert v.has_prosody
    text = "Pitch and intonation. Set per request."
    cfg = SpeakConfig(pitch=70, pitch_range=85)
    assert cfg.prosody == (175.0, 70.0, 85.0) and SpeakConfig(pitch=30).prosody == (175.0, 30.0, 50.0)
    assert SpeakConfig().prosody is None
    y = np.concatenate([c.samples for c in v.stream(text, cfg, seed=5)])
    # reference: the sentences' mel asked with the prosody, each through one generate call
    voc, state, ref = v.vocoder, v.vocoder.new_state(seed=5), []
    for spoken in v.sentence_parts(text, speaker=v.default_speaker, speed=1.0, prosody=(175, 70, 85)):
        mel = spoken.part.mel
        state.position = 0
        ref.append(voc.generate(voc.frame_inputs(mel), state, mel.shape[0] * voc.hop))
    ref = int16_to_float(np.concatenate(ref))
    assert y.shape == ref.shape and np.mean(y != ref) < 1e-3
    plain = np.concatenate([c.samples for c in v.stream(text, seed=5)])
    assert plain.shape != y.shape or np.mean(plain != y) > 0.1  # the setting changes what is said
    rendered = render_utterance(v, text, cfg, seed=5, fold_frames=None)
    assert rendered.samples.shape == y.shape
    # a live speed change re-renders the rest of the sentence with the same pitch settings
    seen = []
    real = ac.stream_mel
    monkeypatch.setattr(ac, "stream_mel", lambda *a, **k: (seen.append(k.get("prosody")), real(*a, **k))[1])
    ctl = StreamControl(speed=1.0)
    for i, _ in enumerate(v.stream(text, cfg, control=ctl)):
        if i == 0:
            ctl.speed = 1.5
    assert len(seen) >= 3 and set(seen) == {(175.0, 70.0, 85.0)}


def test_pitch_settings_are_checked_and_refused_by_a_voice_without_them(voice):
    for kw, what in ((dict(pitch=80), "pitch 80 is outside"), (dict(pitch_range=10), "pitch_range 10"),
                     (dict(pitch=float("nan")), "pitch nan")):
        with pytest.raises(ParameterError, match=what):
            SpeakConfig(**kw)
    assert not voice.has_prosody
    with pytest.raises(ParameterError, match="cannot change its pitch"):
        voice.stream("Hello.", SpeakConfig(pitch=60))  # at the call, not at the first chunk
    from wavern.engine.batch import render_utterance

    with pytest.raises(ParameterError, match="cannot change its pitch"):
        render_utterance(voice, "Hello.", SpeakConfig(pitch_range=30))


@pytest.mark.parametrize(("field", "value", "message"), [
    ("espeak_voice", "../../tmp/x", "must be an espeak-ng voice name"),
    ("inference.speaker", "en/../../x", "must be an espeak-ng voice name"),
    ("inference.speaker", "en-zz", "is not one of the voice's speakers"),
    ("acoustic.speakers", ["en-us", "en/../x"], "not a speaker name"),
])
def test_voice_and_speaker_names_that_are_not_names_are_refused(tiny_voice, tmp_path, field, value, message):
    """Names go to espeak-ng as voice names: a path-like one gave every word as one vowel."""
    import json

    from wavern.engine.voicefile import read_voice_json

    v = _copy(tiny_voice, tmp_path)
    meta = json.loads((v / "voice.json").read_text())
    node, _, key = field.rpartition(".")
    (meta[node] if node else meta)[key] = value
    (v / "voice.json").write_text(json.dumps(meta))
    with pytest.raises(VoiceFileError, match=message):
        read_voice_json(v)


def test_one_voice_streams_from_several_threads_at_once(voice):
    """Each stream has its own state: two threads synthesising at once get what one thread gets
    alone, sample for sample (the window's worker, library users)."""
    import threading

    texts = ["First thread speaks now.", "The second one says something else."]
    alone = [voice.synthesize(t, seed=3) for t in texts]
    got: dict[int, list] = {0: [], 1: []}

    def run(i):
        for _ in range(3):
            got[i].append(voice.synthesize(texts[i], seed=3))

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in (0, 1):
        assert len(got[i]) == 3 and all(np.array_equal(y, alone[i]) for y in got[i])


def test_one_stream_control_serves_request_after_request_with_each_ones_speed(voice):
    """(API review: stream() wrote the first request's speed into the caller's control, so a reused
    control ran every later request at that speed) The control's None speed is each request's own."""
    control = StreamControl()
    n = {}
    for speed in (1.0, 2.0, 1.0):
        n.setdefault(speed, []).append(
            sum(c.samples.shape[0] for c in voice.stream("Hello there.", SpeakConfig(speed=speed), control=control)))
    assert control.speed is None and control.volume is None
    assert n[1.0][0] == n[1.0][1] and n[2.0][0] < 0.7 * n[1.0][0]
    control.speed = 2.0  # a value set on the control wins over the request's
    assert sum(c.samples.shape[0] for c in voice.stream("Hello there.", SpeakConfig(speed=1.0), control=control)) \
        == n[2.0][0]


def test_closing_the_last_voice_gives_the_process_its_thread_counts_back(tiny_voice):
    """(API review: Voice.load left a host program at one BLAS thread for good) Voices with
    their own thread count hold the process's settings while any is open, and the last close
    restores what was there before; it runs in a fresh process, the settings being process-wide."""
    code = f"""
from threadpoolctl import threadpool_info, threadpool_limits
from wavern.engine import Voice
blas = lambda: sorted({{lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}})
threadpool_limits(limits=2, user_api="blas")
before = blas()
a = Voice.load({str(tiny_voice)!r}, threads=1)
b = Voice.load({str(tiny_voice)!r}, threads=1)
held = blas()
a.close(); a.close()
one_left = blas()
with b:
    pass
print(before, held, one_left, blas())
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    before, held, one_left, after = eval(res.stdout.strip().replace("] [", "], ["))  # noqa: S307 - our own output
    assert before == [2] and held == one_left == [1]
    assert after == before


@pytest.mark.parametrize("kw, match", [
    (dict(speed="1.2"), "speed must be a number"), (dict(speed=None), "speed must be a number"),
    (dict(volume=True), "volume must be a number"), (dict(pitch="high"), "pitch must be a number or None"),
    (dict(temperature=[1]), "temperature must be a number or None"),
    (dict(speaker=3), "speaker must be a speaker's name"),
])
def test_settings_of_the_wrong_type_are_parameter_errors(kw, match):
    """(API review: a raw TypeError escaped wavern.errors for these)"""
    with pytest.raises(ParameterError, match=match):
        SpeakConfig(**kw)


def test_stream_refuses_a_config_control_or_seed_of_the_wrong_type_before_it_starts(voice):
    with pytest.raises(ParameterError, match="config must be a SpeakConfig"):
        voice.stream("Hello.", {"speed": 2})
    with pytest.raises(ParameterError, match="control must be a StreamControl"):
        voice.stream("Hello.", control=object())
    with pytest.raises(ParameterError, match="seed must be an integer"):
        voice.stream("Hello.", seed="x")


def test_the_engine_package_lists_and_exports_its_public_names():
    """(API review: dir(wavern.engine) missed Voice; sinks and batch rendering were not importable from it)"""
    import wavern.engine as E
    from wavern.engine import batch, sinks, voice

    assert set(E.__all__) <= set(dir(E))
    for name in E.__all__:
        assert getattr(E, name) is getattr({"voice": voice, "sinks": sinks, "batch": batch}.get(
            E._LAZY.get(name, ""), E), name)
    assert {"Voice", "FileSink", "NullSink", "render_utterances", "UtteranceRequest"} <= set(E.__all__)


def test_closing_a_stream_does_not_wait_for_the_sentence_the_worker_is_decoding(voice, monkeypatch):
    """(soak review: a stop waited up to 128 ms for the next sentence's decode) The worker's job is
    held on an event; closing the stream returns while it is still held, and the job, let go,
    closes the sentence generator itself."""
    import wavern.engine.voice as vmod

    held, entered = threading.Event(), threading.Event()
    real = vmod._prepare

    def slow_prepare(mels):
        entered.set()
        held.wait(30)
        return real(mels)

    monkeypatch.setattr(vmod, "_prepare", slow_prepare)
    closed = []
    real_parts = Voice.sentence_parts

    def watched_parts(self, *a, **kw):  # the sentence generator, noting when it is closed
        try:
            yield from real_parts(self, *a, **kw)
        finally:
            closed.append(threading.current_thread().name)

    monkeypatch.setattr(Voice, "sentence_parts", watched_parts)
    release = threading.Timer(20, held.set)  # only a guard: the old code blocked in close() until this
    release.start()
    try:
        gen = voice.stream("First sentence here. Second one. Third one.", SpeakConfig(), seed=1)
        for _ in gen:
            if entered.is_set():
                break
        assert entered.wait(20)
        gen.close()
        assert not held.is_set() and closed == []  # back while the worker was still inside its job
    finally:
        held.set()
        release.cancel()
    voice._executor.submit(lambda: None).result(timeout=30)  # the worker's queue, in order: its job is done
    assert len(closed) == 1 and closed[0].startswith("wavern-acoustic")  # closed there, once
    # the voice still speaks afterwards, the same as ever
    again = np.concatenate([c.samples for c in voice.stream("Second one.", SpeakConfig(), seed=1)])
    assert again.size > 0


def test_a_stopped_control_serves_the_next_request_after_reset(voice):
    """(API review: no way to reuse a stop button's control)"""
    control = StreamControl()
    control.stop()
    assert list(voice.stream("Hello there.", control=control)) == []
    control.reset()
    assert not control.stopped
    assert sum(c.samples.size for c in voice.stream("Hello there.", control=control)) > 0


# --------------------------------------------------------------------------- asyncio and bytes

def test_astream_gives_the_streams_chunks_and_leaves_the_event_loop_free(voice):
    import asyncio

    text = "A somewhat longer sentence, so that there are several chunks. And a second one."
    want = list(voice.stream(text, seed=4))

    async def main():
        ticks = 0
        running = True

        async def ticker():
            nonlocal ticks
            while running:
                ticks += 1
                await asyncio.sleep(0)

        t = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        start = ticks
        got = [c async for c in voice.astream(text, seed=4)]
        during = ticks - start
        running = False
        await t
        return got, during

    got, during = asyncio.run(main())
    assert len(got) == len(want) > 2
    for a, b in zip(got, want):
        assert a.start_sample == b.start_sample and a.word_timings == b.word_timings
        np.testing.assert_array_equal(a.samples, b.samples)
    # a synchronous generator behind the async one would give the ticker no turn until the end
    assert during >= len(got)


def test_astream_refuses_bad_text_and_a_cancelled_one_leaves_the_voice_as_it_was(voice):
    import asyncio

    async def refused():
        with pytest.raises(ParameterError, match="nothing to say"):
            async for _ in voice.astream("   "):
                pass

    asyncio.run(refused())
    text = "A somewhat longer sentence, so that there are several chunks. And a second one."

    async def cancelled():
        first = asyncio.Event()

        async def consume():
            async for _ in voice.astream(text, seed=1):
                first.set()
                await asyncio.sleep(3600)  # the consumer hangs: cancelled here

        task = asyncio.create_task(consume())
        await first.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def broken_off():
        async for c in voice.astream(text, seed=1):
            break  # leaving the loop: the generator is closed by asyncio's finaliser
        return c

    async def cancelled_while_making():
        """Cancelled while a chunk is being made (a timeout does this): CancelledError, not the
        generator's "already executing", and the stream is closed once that chunk is done."""
        closed = threading.Event()
        real = voice._stream

        def watched(*a, **k):
            gen = real(*a, **k)
            try:
                yield from gen
            finally:
                closed.set()

        voice._stream = watched
        try:
            making = threading.Event()
            real_generate = voice.vocoder.generate

            def slow_generate(*a, **k):
                making.set()
                time.sleep(0.05)
                return real_generate(*a, **k)

            voice.vocoder.generate = slow_generate
            task = asyncio.create_task(_drain(voice.astream(text, seed=1)))
            await asyncio.get_running_loop().run_in_executor(None, making.wait)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.get_running_loop().run_in_executor(None, closed.wait, 10.0)
            assert closed.is_set()
        finally:
            del voice._stream, voice.vocoder.generate

    baseline = threading.active_count()
    asyncio.run(cancelled())
    asyncio.run(cancelled_while_making())
    first_chunk = asyncio.run(broken_off())
    np.testing.assert_array_equal(first_chunk.samples, next(iter(voice.stream(text, seed=1))).samples)
    again = np.concatenate([c.samples for c in voice.stream(text, seed=1)])
    np.testing.assert_array_equal(again, voice.synthesize(text, seed=1))
    assert threading.active_count() <= baseline + 1  # (asyncio.run's executor threads are joined)


async def _drain(agen):
    async for _ in agen:
        pass


def test_synthesize_wav_is_the_synthesized_audio_as_a_file(voice):
    import io

    import soundfile as sf

    text = "Hello there."
    audio = voice.synthesize(text, seed=3)
    data = voice.synthesize_wav(text, seed=3)
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    pcm, sr = sf.read(io.BytesIO(data), dtype="int16")
    assert sr == voice.sample_rate and pcm.shape == audio.shape
    expect, _ = sf.read(io.BytesIO(_wav_via_file(audio, sr)), dtype="int16")
    np.testing.assert_array_equal(pcm, expect)  # what write_audio puts in a .wav file
    flac, sr = sf.read(io.BytesIO(voice.synthesize_wav(text, seed=3, format="flac")), dtype="int16")
    np.testing.assert_array_equal(flac, pcm)  # lossless
    with pytest.raises(ParameterError, match="unsupported audio file type"):
        voice.synthesize_wav(text, format="mp3")


def _wav_via_file(audio, sr):
    import tempfile

    from wavern.engine.audio_io import write_audio

    with tempfile.TemporaryDirectory() as d:
        return write_audio(Path(d) / "a.wav", audio, sr).read_bytes()


def test_a_voices_ltp_gain_scale_acts_in_mel_matched_requests_only(tmp_path):
    """inference.ltp_gain_scale: a mel-matched request samples with every frame's long-term gain
    scaled (stream, renderer and copy synthesis draw other samples than at scale 1); a request
    without mel matching (postfilter=False, passes=0) draws exactly what the unscaled voice does."""
    from voice_factory import make_tiny_voice, voice_with_inference

    from wavern.engine.batch import render_utterance

    base = make_tiny_voice(tmp_path / "base", lpc_order=16, seed=3, excitation="linear", ltp=True, ltp_input=True)
    mm = {"cap": 4.0, "floor": 0.001, "iterations": 2}
    plain = voice_with_inference(base, tmp_path / "plain", melmatch=mm)
    scaled = voice_with_inference(base, tmp_path / "scaled", melmatch=mm, ltp_gain_scale=1.8)
    text = "A voiced sentence is here."

    def streamed(v, cfg=None):
        return np.concatenate([c.samples for c in v.stream(text, cfg, seed=4)])

    x = (0.3 * np.sin(2 * np.pi * 110 * np.arange(8000) / 22050)).astype(np.float32)
    with Voice.load(plain) as a, Voice.load(scaled) as b:
        assert (a.ltp_gain_scale, b.ltp_gain_scale) == (1.0, 1.8)
        assert b.ltp_scale_for(b.melmatch) == 1.8 and b.ltp_scale_for(None) == 1.0
        assert not np.array_equal(streamed(a), streamed(b))
        assert not np.array_equal(render_utterance(a, text, seed=4).samples, render_utterance(b, text, seed=4).samples)
        assert not np.array_equal(a.vocode(x, seed=1), b.vocode(x, seed=1))
        for cfg in (SpeakConfig(postfilter=False), SpeakConfig(passes=0)):
            np.testing.assert_array_equal(streamed(a, cfg), streamed(b, cfg))
            np.testing.assert_array_equal(render_utterance(a, text, cfg, seed=4).samples,
                                          render_utterance(b, text, cfg, seed=4).samples)
        np.testing.assert_array_equal(a.vocode(x, seed=1, postfilter=False), b.vocode(x, seed=1, postfilter=False))


def test_an_lpc_voice_loads_the_coefficient_loops_with_itself_not_in_its_first_chunk(tmp_path, monkeypatch):
    """wavern.dsp's Levinson and mel-to-power loops compile (or load from numba's cache) when an LPC
    voice loads, as its post-filter's and mel matching's do: a first chunk paid ~570 ms for them
    on an empty cache, ~10 ms from it."""
    from voice_factory import make_tiny_voice
    from wavern import dsp

    plain = make_tiny_voice(tmp_path / "plain", seed=3)
    lpc = make_tiny_voice(tmp_path / "lpc", lpc_order=16, seed=3)
    for path, loads in ((plain, False), (lpc, True)):
        for loop in (dsp._levinson, dsp._band_power):
            monkeypatch.setattr(loop, "fn", None)  # as in a new process
        v = Voice.load(path)
        try:
            assert (dsp._levinson.fn is not None, dsp._band_power.fn is not None) == (loads, loads), path
        finally:
            v.close()
