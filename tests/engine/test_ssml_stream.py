"""Voice.stream(..., ssml=True): each piece of the document sounds exactly as the same text
streamed alone with the piece's settings; breaks are exact silence; spans point into the markup."""

import numpy as np
import pytest

from wavern.conditioning.frontend import Lexicon
from wavern.engine.chunk import SpeakConfig
from wavern.engine.voice import StreamControl, Voice
from wavern.errors import ParameterError


@pytest.fixture(scope="module")
def voice(tiny_voice):
    v = Voice.load(tiny_voice)
    yield v
    v.close()


@pytest.fixture(scope="module")
def pitch_voice(tiny_prosody_voice):
    v = Voice.load(tiny_prosody_voice)
    yield v
    v.close()


def _alone(voice, text, seed, **cfg):
    return voice.synthesize(text, SpeakConfig(**cfg), seed=seed)


def test_a_plain_document_is_the_plain_text(voice):
    text = "Hello there. How are you today?"
    assert np.array_equal(voice.synthesize(f"<speak>{text}</speak>", ssml=True), voice.synthesize(text))


def test_pieces_sound_as_their_text_alone_with_their_settings_and_breaks_are_silence(voice):
    sr = voice.sample_rate
    src = ('<speak><break time="100ms"/>One two three.<break time="250ms"/>'
           '<prosody rate="200%" volume="-6dB">Four five six.</prosody> Seven eight.</speak>')
    got = voice.synthesize(src, SpeakConfig(pause_s=0.05), seed=4, ssml=True)
    lead = np.zeros(int(0.1 * sr), np.float32)
    one = _alone(voice, "One two three.", 4, pause_s=0.25)  # the break replaces the sentence pause
    four = _alone(voice, "Four five six.", 5, speed=2.0, volume=10 ** (-6 / 20), pause_s=0.05)
    seven = _alone(voice, "Seven eight.", 6, pause_s=0.05)
    assert np.array_equal(got, np.concatenate([lead, one, four, seven]))
    assert not got[:lead.size].any() and not got[lead.size + one.size - int(0.25 * sr):lead.size + one.size].any()


def test_the_requests_speed_and_a_live_control_multiply_the_pieces_rate(voice):
    src = '<speak><prosody rate="150%">Quick words now.</prosody></speak>'
    got = voice.synthesize(src, SpeakConfig(speed=1.2), seed=1, ssml=True)
    assert np.array_equal(got, _alone(voice, "Quick words now.", 1, speed=1.2 * 1.5))
    control = StreamControl(speed=2.0)  # the live control's speed, times the piece's 150 %
    live = np.concatenate([c.samples for c in voice.stream(src, control=control, seed=1, ssml=True)])
    assert np.array_equal(live, _alone(voice, "Quick words now.", 1, speed=3.0))
    control.speed = 3.0  # past SpeakConfig's range once multiplied: the fastest the voice speaks
    fastest = np.concatenate([c.samples for c in voice.stream(src, control=control, seed=1, ssml=True)])
    assert np.array_equal(fastest, _alone(voice, "Quick words now.", 1, speed=4.0))


def test_pitch_marks_reach_a_prosody_voice_and_are_ignored_by_another(voice, pitch_voice, caplog):
    src = '<speak><prosody pitch="x-high" range="low">Up here.</prosody></speak>'
    got = pitch_voice.synthesize(src, seed=2, ssml=True)
    assert np.array_equal(got, _alone(pitch_voice, "Up here.", 2, pitch=70.0, pitch_range=35.0))
    assert not np.array_equal(got, _alone(pitch_voice, "Up here.", 2))
    assert np.array_equal(voice.synthesize(src, seed=2, ssml=True), _alone(voice, "Up here.", 2))
    assert "cannot change its pitch" in caplog.text


def test_spans_and_word_timings_point_into_the_markup_and_chunks_follow_on(voice):
    src = ('<speak>First part here. <break time="200ms"/><prosody rate="fast">Second '
           '<sub alias="World Wide Web">WWW</sub> part</prosody>. Last words.</speak>')
    chunks = list(voice.stream(src, ssml=True))
    position = 0
    heard = []
    for c in chunks:
        assert c.start_sample == position
        position += c.samples.size
        heard += [(src[t.char_start:t.char_end], t.start_sample) for t in c.word_timings]
        assert 0 <= c.text_span[0] <= c.text_span[1] <= len(src)
    words = [w for w, _ in heard]
    assert words == ["First", "part", "here", "Second", '<sub alias="World Wide Web">WWW</sub>',
                     '<sub alias="World Wide Web">WWW</sub>', '<sub alias="World Wide Web">WWW</sub>', "part",
                     "Last", "words"]
    starts = [s for _, s in heard]
    assert starts == sorted(starts) and starts[-1] < position
    assert [c.sentence_index for c in chunks] == sorted(c.sentence_index for c in chunks)
    assert chunks[-1].sentence_index == 2  # three sentences, one a piece, numbered on across the pieces
    spans = {c.sentence_index: src[slice(*c.text_span)] for c in chunks}
    assert spans[0] == "First part here." and spans[2] == "Last words."


def test_voice_names_a_speaker_of_the_voice(voice):
    name = voice.speakers[0]
    src = f'<speak>Mine. <voice name="{name}">Theirs.</voice></speak>'
    got = voice.synthesize(src, seed=0, ssml=True)
    assert np.array_equal(got, np.concatenate([_alone(voice, "Mine.", 0), _alone(voice, "Theirs.", 1, speaker=name)]))
    with pytest.raises(ParameterError, match="speaker"):
        voice.stream('<speak><voice name="nobody-at-all">Hi.</voice></speak>', ssml=True)


def test_phoneme_entries_are_the_pieces_own_and_the_voices_lexicon_still_applies(voice):
    voice.lexicon = Lexicon({"wug": "engine x"})
    try:
        src = '<speak>A wug and <phoneme ph="ˈwʌɡ">wug</phoneme>.</speak>'
        got = voice.synthesize(src, seed=3, ssml=True)
        alone = voice.synthesize("A wug and wug.", seed=3)
        assert got.size != alone.size or not np.array_equal(got, alone)
        assert voice.lexicon.lookup("ssmlphonemea") is None  # the request's entry did not leak
    finally:
        voice.lexicon = Lexicon()


def test_bad_markup_is_refused_before_any_audio(voice):
    with pytest.raises(ParameterError, match="not well-formed"):
        voice.stream("<speak>Oops <break></speak>", ssml=True)
    with pytest.raises(ParameterError, match="nothing to say"):
        voice.stream("<speak><break time='1s'/></speak>", ssml=True)


def test_a_stop_ends_the_document_not_just_its_piece(voice):
    control = StreamControl()
    src = "<speak>One two three four.<break time='10ms'/>Five six seven eight.<break time='10ms'/>Nine ten.</speak>"
    got = []
    for c in voice.stream(src, control=control, ssml=True):
        got.append(c)
        control.stop()
    assert len(got) == 1


def test_markup_is_found_by_its_start_and_ssml_false_reads_it_as_text(voice):
    src = "<speak>Hello <break time='300ms'/> there.</speak>"
    found = voice.synthesize(src, seed=0)
    assert np.array_equal(found, voice.synthesize(src, seed=0, ssml=True))
    as_text = voice.synthesize(src, seed=0, ssml=False)  # the tags read out ("speak break time ...")
    assert as_text.size != found.size
    assert np.array_equal(voice.synthesize("Hi <speak> there.", seed=0), voice.synthesize("Hi <speak> there.", seed=0,
                                                                                          ssml=False))


# ---- found by a review of the first version (each failed there)

def test_a_live_pause_change_reaches_each_pieces_last_sentence_too(voice):
    src = "<speak>One two three. Four five six. Seven eight.</speak>"
    plain = "One two three. Four five six. Seven eight."

    def gaps(text, ssml):
        control = StreamControl()
        out = []
        for c in voice.stream(text, SpeakConfig(pause_s=0.2), control=control, seed=0, ssml=ssml):
            control.pause_s = 0.5  # from the first chunk on
            out.append(c)
        return [c.samples.size for c in out if not c.samples.any()]

    assert gaps(src, True) == gaps(plain, False) == [int(0.5 * voice.sample_rate)] * 3


def test_a_stop_before_the_first_chunk_yields_not_even_the_lead_silence(voice):
    control = StreamControl()
    gen = voice.stream('<speak><break time="2s"/>Hello.</speak>', control=control)
    control.stop()
    assert list(gen) == []


def test_a_piece_is_at_most_as_loud_as_the_loudest_request(voice):
    got = voice.synthesize('<speak><prosody volume="+40dB">Loud words.</prosody></speak>', seed=0)
    assert np.array_equal(got, _alone(voice, "Loud words.", 0, volume=4.0))
