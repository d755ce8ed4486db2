"""SSML documents read into pieces: text, settings, pauses, and spans back into the markup."""

import math

import pytest

from wavern.conditioning.frontend import Lexicon, analyze, segment
from wavern.conditioning.frontend.ssml import (
    BREAK_STRENGTHS,
    PARAGRAPH_PAUSE_S,
    PITCH_UNIT_RATIO,
    looks_like_ssml,
    parse_ssml,
)
from wavern.errors import ParameterError


def _spoken(doc):
    return [[s.spoken for s in p.sentences] for p in doc.pieces]


def _words_in_source(src, piece):
    return [src[slice(*piece.source_span(w.start, w.end))] for s in piece.sentences for w in s.words]


def test_plain_text_in_speak_is_one_piece_read_as_the_text():
    src = '<speak>Dr. Smith paid $12.50 on March 3, 2021. Then he left!</speak>'
    doc = parse_ssml(src)
    (piece,) = doc.pieces
    assert _spoken(doc) == [[s.spoken for s in segment("Dr. Smith paid $12.50 on March 3, 2021. Then he left!")]]
    assert (piece.speed, piece.volume, piece.pitch, piece.pitch_range, piece.speaker) == (1.0, 1.0, None, None, None)
    assert piece.silence_after(0.3) == 0.3 and doc.lead_s == 0.0
    words = [w.text for s in piece.sentences for w in s.words]
    assert _words_in_source(src, piece) == words and "Smith" in words  # plain text: word for word
    for s in piece.sentences:  # every sentence's span is the same text in the markup
        assert src[slice(*piece.source_span(s.start, s.end))] == s.text


def test_breaks_cut_pieces_and_set_the_silence_after_them():
    src = ('<speak><break time="250ms"/>One. <break time="1.5s"/><break strength="weak"/>Two<break/>three.'
           '<break strength="none"/> Four.</speak>')
    doc = parse_ssml(src)
    assert doc.lead_s == 0.25
    assert _spoken(doc) == [["One."], ["Two."], ["three."], ["Four."]]
    assert [p.silence_after(0.3) for p in doc.pieces] == [1.5 + BREAK_STRENGTHS["weak"], BREAK_STRENGTHS["medium"],
                                                          0.0, 0.3]


@pytest.mark.parametrize("time_attr, seconds", [("500ms", 0.5), ("2s", 2.0), ("0.75s", 0.75), ("3", 3.0)])
def test_break_times(time_attr, seconds):
    doc = parse_ssml(f'<speak>A b.<break time="{time_attr}"/>C d.</speak>')
    assert math.isclose(doc.pieces[0].silence_after(0.1), seconds)


def test_a_prosody_change_inside_a_sentence_has_no_pause_and_keeps_its_punctuation():
    src = '<speak>The <prosody rate="slow">big</prosody>, red dog barked. Then quiet.</speak>'
    doc = parse_ssml(src)
    assert [p.text.strip() for p in doc.pieces] == ["The", "big,", "red dog barked. Then quiet."]
    assert [p.speed for p in doc.pieces] == [1.0, 0.75, 1.0]
    assert [p.silence_after(0.4) for p in doc.pieces] == [0.0, 0.0, 0.4]


def test_sentences_and_paragraphs_end_pieces():
    src = '<speak><p><s>First one</s><s>second one</s></p><p>Next paragraph</p></speak>'
    doc = parse_ssml(src)
    assert _spoken(doc) == [["First one."], ["second one."], ["Next paragraph."]]
    assert [p.silence_after(0.2) for p in doc.pieces] == [0.2, PARAGRAPH_PAUSE_S, PARAGRAPH_PAUSE_S]
    assert doc.pieces[1].silence_after(1.0) == 1.0  # a paragraph pauses at least as long as a sentence


@pytest.mark.parametrize("rate, factor", [("x-slow", 0.5), ("medium", 1.0), ("150%", 1.5), ("+20%", 1.2),
                                          ("-25%", 0.75), ("2", 2.0), ("+0.5", 1.5)])
def test_prosody_rate(rate, factor):
    (piece,) = parse_ssml(f'<speak><prosody rate="{rate}">Words here.</prosody></speak>').pieces
    assert math.isclose(piece.speed, factor)


def test_nested_prosody_composes_and_pitch_counts_from_the_request():
    src = ('<speak><prosody rate="200%" volume="+6dB" pitch="+10%">'
           '<prosody rate="50%" pitch="-2st" range="x-high">Inner words.</prosody> Outer words.</prosody></speak>')
    inner, outer = parse_ssml(src, pitch=40.0, pitch_range=50.0).pieces
    up = math.log(1.1) / math.log(PITCH_UNIT_RATIO)
    assert math.isclose(outer.speed, 2.0) and math.isclose(inner.speed, 1.0)
    assert math.isclose(outer.volume, 10 ** (6 / 20)) and math.isclose(inner.volume, outer.volume)
    assert math.isclose(outer.pitch, 40.0 + up)
    assert math.isclose(inner.pitch, 40.0 + up - 2 * math.log(2) / 12 / math.log(PITCH_UNIT_RATIO))
    assert inner.pitch_range == 90.0 and outer.pitch_range is None
    # ~1 % a unit: +10 % is ~9.8 units, an octave ~71
    assert 9.5 < up < 10.0


def test_pitch_labels_and_limits():
    a, b, c = parse_ssml('<speak><prosody pitch="x-high">High.</prosody><prosody pitch="+80%">Higher.</prosody>'
                         '<prosody pitch="-60" range="-100">Low.</prosody></speak>').pieces
    assert a.pitch == 70.0 and b.pitch == 75.0  # clipped to the range the model was trained on
    assert c.pitch == 25.0 and c.pitch_range == 20.0


@pytest.mark.parametrize("volume, gain", [("silent", 0.0), ("soft", 0.5), ("-6dB", 10 ** (-6 / 20)), ("50%", 0.5),
                                          ("+50%", 1.5), ("x-loud", 2.0), ("50", 0.5), ("100", 1.0),
                                          ("+40dB", 4.0), ("+10000dB", 4.0), ("-10000dB", 0.0)])
def test_prosody_volume(volume, gain):
    (piece,) = parse_ssml(f'<speak><prosody volume="{volume}">Words.</prosody></speak>').pieces
    assert math.isclose(piece.volume, gain, abs_tol=1e-9)


def test_emphasis_is_slower_and_livelier():
    plain, strong, reduced = parse_ssml('<speak>Plain. <emphasis level="strong">Strong.</emphasis> '
                                        '<emphasis level="reduced">Reduced.</emphasis></speak>').pieces
    assert strong.speed < 1.0 < reduced.speed
    assert strong.pitch_range > 50.0 > reduced.pitch_range and plain.pitch_range is None


def test_say_as_sub_and_entities_map_back_to_their_element():
    src = ('<speak>Call <say-as interpret-as="characters">abc</say-as> at <say-as interpret-as="telephone">'
           '555-1234</say-as> about <sub alias="World Wide Web">WWW</sub> &amp; the <say-as '
           'interpret-as="ordinal">3</say-as> item.</speak>')
    (piece,) = parse_ssml(src).pieces
    (sentence,) = piece.sentences
    assert sentence.spoken == "Call A B C at five five five one two three four about World Wide Web and the third item."
    words = _words_in_source(src, piece)
    assert words[:4] == ["Call", '<say-as interpret-as="characters">abc</say-as>'] + \
        ['<say-as interpret-as="characters">abc</say-as>'] * 2
    assert '<sub alias="World Wide Web">WWW</sub>' in words and "&amp;" in words


def test_phoneme_says_the_ipa_for_that_word_only():
    ipa = "təˈmɑːtoʊ"
    src = f'<speak>I say <phoneme alphabet="ipa" ph="{ipa}">tomato</phoneme>, you say tomato.</speak>'
    (piece,) = parse_ssml(src).pieces
    reference = analyze("I say tomato, you say tomato.", voice="en")
    said = analyze(piece.text, voice="en", lexicon=piece.lexicon)
    own = analyze("I say tomato, you say tomato.", voice="en", lexicon=Lexicon({"tomato": {"phonemes": ipa}}))
    tom = [i for i, w in enumerate(reference.words) if w.text == "tomato"]
    assert len(tom) == 2
    # the marked word has the lexicon's phonemes, the second keeps espeak's
    first = [s for s, w in zip(said.symbols, said.word_of) if w == tom[0]]
    second = [s for s, w in zip(said.symbols, said.word_of) if w == tom[1]]
    assert first == [s for s, w in zip(own.symbols, own.word_of) if w == tom[0]]
    assert second == [s for s, w in zip(reference.symbols, reference.word_of) if w == tom[1]]
    assert first != second
    assert src[slice(*piece.source_span(said.words[tom[0]].start, said.words[tom[0]].end))].startswith("<phoneme")


def test_voice_sets_the_speaker_of_its_content():
    a, b, c = parse_ssml('<speak>Me first. <voice name="en+f3">Her turn.</voice> Me again.</speak>').pieces
    assert (a.speaker, b.speaker, c.speaker) == (None, "en+f3", None)


def test_whitespace_of_the_markup_is_no_pause():
    src = "<speak>\n  <p>\n    milk\n    eggs\n    bread\n  </p>\n</speak>"
    (piece,) = parse_ssml(src).pieces
    assert [s.spoken for s in piece.sentences] == [s.spoken for s in segment("milk eggs bread")]


def test_skipped_and_unknown_elements(caplog):
    src = ('<speak xmlns="http://www.w3.org/2001/10/synthesis" version="1.1"><meta name="a" content="b"/>'
           '<desc>not read</desc><mark name="here"/>Read <foo>this</foo> <lang xml:lang="fr">too</lang>.</speak>')
    (piece,) = parse_ssml(src).pieces
    assert [s.spoken for s in piece.sentences] == ["Read this too."]
    assert "<foo> is not supported" in caplog.text


@pytest.mark.parametrize("src, words", [
    ("<speak>Unclosed <prosody>text</speak>", "not well-formed"),
    ("<p>Not speak.</p>", "root element must be <speak>"),
    ("Plain text.", "not well-formed"),
    ('<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><speak>&b;</speak>',
     "document type"),
    ('<speak>A.<break time="2 minutes"/></speak>', "break time"),
    ('<speak>A.<break time="61s"/></speak>', "longer than 60"),
    ('<speak>A.<break strength="huge"/></speak>', "break strength"),
    ('<speak><prosody rate="zippy">A.</prosody></speak>', "prosody rate"),
    ('<speak><prosody rate="-100%">A.</prosody></speak>', "positive rate"),
    ('<speak><prosody pitch="120Hz">A.</prosody></speak>', "Hz"),
    ('<speak><prosody volume="loudest">A.</prosody></speak>', "prosody volume"),
    ('<speak><prosody volume="150">A.</prosody></speak>', "from 0 to 100"),
    ('<speak>Spell <say-as interpret-as="characters">AB<break time="1s"/>CD</say-as>.</speak>', "after it"),
    ('<speak><phoneme alphabet="x-sampa" ph="t@">A</phoneme>.</speak>', "only 'ipa'"),
    ('<speak><phoneme ph="ʘʘ">click</phoneme>.</speak>', "no English phoneme"),
    ('<speak><sub>WWW</sub>.</speak>', "alias"),
    ('<speak><say-as interpret-as="characters"><prosody>x</prosody></say-as>.</speak>', "plain text only"),
    ("<speak>  <break time='1s'/> ... </speak>", "nothing to say"),
])
def test_bad_documents_are_refused_with_where_and_why(src, words):
    with pytest.raises(ParameterError, match=words):
        parse_ssml(src)


def test_errors_name_the_line_and_column():
    with pytest.raises(ParameterError, match=r"line 3, column \d+: prosody rate"):
        parse_ssml('<speak>\nFine.\n<prosody rate="zippy">A.</prosody></speak>')


def test_a_huge_document_is_refused_before_parsing():
    with pytest.raises(ParameterError, match="limit"):
        parse_ssml("<speak>" + "word " * 1000 + "</speak>", max_chars=2000)


def test_non_ascii_text_keeps_its_spans():
    src = '<speak>Café — naïve “quotes” <prosody rate="fast">über fünf</prosody>. 😀 Done.</speak>'
    doc = parse_ssml(src)
    for piece in doc.pieces:
        for s in piece.sentences:
            for w in s.words:
                assert src[slice(*piece.source_span(w.start, w.end))] == w.text


@pytest.mark.parametrize("text, expected", [("<speak>Hi.</speak>", True), ('  <?xml version="1.0"?><speak/>', True),
                                            ("\ufeff<speak>", True), ("<ssml:speak>", True), ("Hi <speak>", False),
                                            ("<b>bold</b>", False), ("", False)])
def test_looks_like_ssml(text, expected):
    assert looks_like_ssml(text) is expected


# ---- found by a review of the first version (each failed there)

def test_an_empty_element_spans_itself():
    src = '<speak>I like <sub alias="World Wide Web"/> very much. <break time="1s"/>Bye.</speak>'
    piece = parse_ssml(src).pieces[0]
    words = _words_in_source(src, piece)
    assert words[2:5] == ['<sub alias="World Wide Web"/>'] * 3 and words[5:] == ["very", "much"]


def test_a_declared_encoding_is_not_obeyed_the_text_is_already_decoded():
    for decl in ('<?xml version="1.0" encoding="ISO-8859-1"?>', '<?xml version="1.0" encoding="bogus"?>'):
        (piece,) = parse_ssml(decl + "<speak>Café crème.</speak>").pieces
        assert [w.text for w in piece.sentences[0].words] == ["Café", "crème"]


def test_markup_may_start_after_white_space_and_keeps_its_spans():
    src = '\n  <?xml version="1.0"?>\n<speak>Hello <prosody rate="slow">there</prosody>.</speak>'
    doc = parse_ssml(src)
    assert [w for p in doc.pieces for w in _words_in_source(src, p)] == ["Hello", "there"]


def test_nested_loud_prosody_stays_at_most_four_times_as_loud():
    src = "<speak>" + '<prosody volume="x-loud">' * 50 + "Loud." + "</prosody>" * 50 + "</speak>"
    assert parse_ssml(src).pieces[0].volume == 4.0


def test_text_right_after_an_end_tag_finishes_its_word():
    a, b, c = parse_ssml("<speak><emphasis>John</emphasis>'s book. <prosody rate='slow'>Slow</prosody>ly.</speak>").pieces
    assert [w.text for w in a.sentences[0].words] == ["John's"] and a.speed < 1.0
    assert [w.text for w in b.sentences[0].words] == ["book"] and b.speed == 1.0
    assert [w.text for w in c.sentences[0].words] == ["Slowly"] and c.speed == 0.75


def test_a_paragraph_or_sentence_element_ends_the_sentence_before_it():
    first, _ = parse_ssml("<speak>Hello there<p>World is big.</p></speak>").pieces
    assert first.silence_after(0.3) == 0.3


def test_times_in_any_case_and_errors_with_where():
    assert parse_ssml('<speak>A b.<break time="500MS"/>C.</speak>').pieces[0].silence_after(0) == 0.5
    with pytest.raises(ParameterError, match=r"line 2, column \d+: break time"):
        parse_ssml('<speak>A.\n<break time="soon"/>B.</speak>')


def test_a_voice_without_a_name_keeps_the_speaker(caplog):
    (piece,) = parse_ssml('<speak>Me. <voice gender="female">Still me.</voice></speak>').pieces
    assert piece.speaker is None and len(piece.sentences) == 2 and "without a name" in caplog.text


@pytest.mark.parametrize("text", ["<speaker1> Hello there.", "<speakers> are loud.", "<?xmlish", "<speaking>"])
def test_plain_text_that_only_starts_like_markup_stays_plain(text):
    assert not looks_like_ssml(text)
