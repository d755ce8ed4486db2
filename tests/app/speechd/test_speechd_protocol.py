"""The output module against a stand-in server on pipes: what Speech Dispatcher sends, and worse.

The module runs in a thread with a tiny voice built in the test; audio comes back as 705
events (the server's own player, as 0.11+ servers offer), so every sample can be checked
against the voice's rendering of the same document. Nothing here asserts a time.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from speechd_harness import Harness, audio_of, codes
from wavern.app.speechd.module import ModuleConfig
from wavern.dsp import float_to_int16
from wavern.engine.chunk import SpeakConfig

LONG = " ".join(["The quick brown fox jumps over the lazy dog."] * 60)  # minutes of audio: still going when stopped


@pytest.fixture(scope="module")
def voice(tiny_voice):
    from wavern.engine.voice import Voice

    v = Voice.load(tiny_voice)
    yield v
    v.close()


@pytest.fixture
def h(voice):
    harness = Harness(voice)
    yield harness
    harness.close()


def test_init_answers_and_quit_ends(voice):
    h = Harness(voice)
    assert h.close() == 0


def test_a_first_command_other_than_init_ends_the_module(voice):
    h = Harness(voice, init=False)
    h.send("SPEAK")
    assert h.next() is None  # the output closes: nothing is said before INIT
    h.close()
    assert h.exit_code == 3


def test_message_audio_is_the_voice_s_rendering_and_marks_fall_between_words(h, voice):
    doc = '<speak>One two <mark name="middle"/>three four.<mark name="__spd_0"/> Five six.</speak>'
    assert h.speak(doc).text[-1] == "200 OK SPEAKING"
    items = h.until("702", "703", "704")
    assert codes(items)[0] == "701" and codes(items)[-1] == "702"
    marks = [i.text[0][4:] for i in items if i.code == "700"]
    assert marks == ["middle", "__spd_0"]
    expected = float_to_int16(voice.synthesize(doc, SpeakConfig()))
    np.testing.assert_array_equal(audio_of(items), expected)
    # each mark comes where the word after it starts: after every sample of the words before it
    words = [w for c in voice.stream(doc, SpeakConfig()) for w in c.word_timings]
    first_after = {m: next(w.start_sample for w in words if w.char_start > doc.index(f'"{m}"'))
                   for m in marks}
    at = 0
    for item in items:
        if item.code == "700":
            assert at == first_after[item.text[0][4:]]
        elif item.audio is not None:
            at += item.audio.size


def test_a_mark_after_the_last_word_comes_before_the_end(h):
    h.speak('<speak>Hello there.<mark name="__spd_0"/></speak>')
    items = h.until("702")
    assert codes(items)[-3:] == ["705", "700", "702"] and items[-2].text[0] == "700-__spd_0"


def test_stop_in_the_middle_of_a_long_message_ends_it_and_the_next_starts(h):
    h.speak(LONG)
    first = h.until("705")
    assert codes(first) == ["701", "705"]
    h.send("STOP")
    rest = h.until("702", "703")
    assert rest[-1].code == "703"
    total = sum(i.audio.size for i in first + rest if i.audio is not None)
    assert total < 22050 * 60  # far less than the message (its audio is minutes long)
    h.speak("Next one.")
    nxt = h.until("702", "703")
    assert codes(nxt)[0] == "701" and nxt[-1].code == "702" and audio_of(nxt).size > 0


def test_a_message_while_one_is_speaking_stops_the_first(h):
    h.speak(LONG)
    h.until("705")
    h.send("SPEAK", "Second.", ".")
    items = h.until("200")  # the 202, the first message's end, then the second's acknowledgement
    assert "703" in codes(items)
    assert codes(items).index("703") < codes(items).index("200")
    second = h.until("702", "703")
    assert codes(second)[0] == "701" and second[-1].code == "702"


def test_pause_stops_at_the_next_server_mark(h):
    doc = "<speak>" + "".join(f'Sentence number {k} is here.<mark name="__spd_{k}"/> ' for k in range(100)) \
          + "</speak>"
    h.speak(doc)
    h.until("705")
    h.send("PAUSE")
    items = h.until("702", "703", "704")
    assert items[-1].code == "704"
    assert items[-2].code == "700" and items[-2].text[0].startswith("700-__spd_")


def test_stop_with_nothing_speaking_is_silent_and_harmless(h):
    h.send("STOP", "PAUSE", "LIST VOICES")
    assert h.reply().code == "200"


def test_settings_out_of_range_and_malformed_lines_get_error_lines_and_the_module_stays_up(h):
    h.send("SET", "rate=250", "pitch=abc", "volume=-100", ".")
    assert h.reply().code == "203"
    r = h.reply()
    assert r.code == "303" and any("rate=250 is outside -100..100" in t for t in r.text)
    assert any("pitch=abc is not a number" in t for t in r.text)
    assert h.module.settings.volume == -100 and h.module.settings.rate == 0  # the good one applied
    h.send("SET", "no equals sign here", "voice=robot", ".")
    h.reply()
    r = h.reply()
    assert r.code == "302" and any("not name=value" in t for t in r.text) and any("voice=robot" in t for t in r.text)
    h.send("SET", "rate=NaN", "punctuation_mode=all", "cap_let_recogn=icon", "some_future_setting=3", ".")
    h.reply()
    assert h.reply().code == "303"
    assert h.module.settings.punctuation_mode == "all"  # unknown names are skipped, known ones kept
    h.send("FROBNICATE now")
    r = h.reply()
    assert r.code == "300" and "FROBNICATE" in r.text[0]
    h.send("")
    assert h.reply().code == "300"
    h.send("DEBUG sideways")
    assert h.reply().code == "302"
    h.send("LIST VOICES")
    assert h.reply().text[-1] == "200 OK VOICE LIST SENT"


def test_invalid_utf8_and_bad_messages_are_refused_with_a_reason(h):
    h.send(b"SPEAK", b"caf\xe9 au lait", b".")
    assert h.reply().code == "202"
    r = h.reply()
    assert r.code == "301" and "not valid UTF-8" in r.text[0] and "0xe9" in r.text[0]
    h.send("CHAR", "a", "b", ".")
    h.reply()
    assert h.reply().code == "305"
    h.send("SPEAK", "", ".")
    h.reply()
    assert h.reply().code == "301"
    assert h.speak("Still here.").code == "200"
    assert h.until("702", "703")[-1].code == "702"


def test_control_characters_are_dropped_and_the_rest_is_said(h, voice):
    h.speak("Bell\x07 and escape\x1b[0m here.")
    items = h.until("702")
    assert audio_of(items).size > 0


def test_text_that_says_nothing_still_begins_and_ends(h):
    h.speak('<speak>...<mark name="__spd_0"/></speak>')
    items = h.until("702", "703")
    assert codes(items) == ["701", "700", "702"]


def test_malformed_ssml_is_read_as_text(h):
    h.speak("<speak>Hello <b there</speak>")
    items = h.until("702", "703")
    assert items[-1].code == "702" and audio_of(items).size > 0


def test_char_and_key_are_spoken(h):
    for command, text in (("CHAR", "x"), ("CHAR", "space"), ("CHAR", "?"), ("KEY", "shift_kp-enter"), ("KEY", "a"),
                          ("SOUND_ICON", "message-new")):
        assert h.speak(text, command).code == "200"
        items = h.until("702", "703")
        assert items[-1].code == "702"
        if command != "SOUND_ICON":
            assert audio_of(items).size > 0, (command, text)
        else:
            assert "706" in codes(items)  # the server plays its own icon


def test_a_capital_with_icon_mode_has_a_click_first(h, voice):
    h.speak("a", "CHAR")
    plain = audio_of(h.until("702"))
    h.send("SET", "cap_let_recogn=icon", ".")
    h.reply(), h.reply()
    h.speak("A", "CHAR")
    capital = audio_of(h.until("702"))
    n = int(0.05 * voice.sample_rate)  # the click and its gap
    assert capital.size == plain.size + n
    assert np.abs(capital[:n // 2]).max() > 0


def test_volume_and_rate_reach_the_voice(h, voice):
    h.send("SET", "rate=50", "volume=-50", ".")
    h.reply(), h.reply()
    h.speak("Hello there.")
    got = audio_of(h.until("702"))
    expected = float_to_int16(voice.synthesize("<speak>Hello there.</speak>", SpeakConfig(speed=2.0, volume=0.5)))
    np.testing.assert_array_equal(got, expected)


def test_list_voices_lists_the_module_s_voice_and_filters_by_language(h):
    h.send("LIST VOICES")
    r = h.reply()
    assert "200-testvoice/en-us\ten-US\tnone" in r.text
    h.send("LIST VOICES en")
    assert "200-testvoice/en-us\ten-US\tnone" in h.reply().text
    h.send("LIST VOICES xx")
    assert h.reply().code == "304"


def test_paced_output_tells_marks_as_they_are_played_then_ends(voice):
    h = Harness(voice, config=ModuleConfig(audio="paced"), server_audio=False)
    try:
        h.send("AUDIO", "audio_output_method=alsa", "audio_alsa_device=default", ".")
        h.reply(), h.reply()
        doc = '<speak>One two.<mark name="__spd_0"/> Three four.<mark name="__spd_1"/></speak>'
        t0 = time.monotonic()
        h.speak(doc)
        items = h.until("702", "703")
        elapsed = time.monotonic() - t0
        assert codes(items) == ["701", "700", "700", "702"]  # no audio events: the module plays itself
        heard = voice.synthesize(doc, SpeakConfig()).size / voice.sample_rate
        assert elapsed >= heard * 0.9  # END waits for the audio to be played out (a lower bound only)
    finally:
        h.close()


def test_paced_output_stops_and_pauses(voice):
    h = Harness(voice, config=ModuleConfig(audio="paced"), server_audio=False)
    try:
        h.speak(LONG)
        h.until("701")
        h.send("STOP")
        assert h.until("702", "703")[-1].code == "703"
        doc = "<speak>" + "".join(f'Part {k}.<mark name="__spd_{k}"/> ' for k in range(30)) + "</speak>"
        h.speak(doc)
        h.until("701")
        h.send("PAUSE")
        items = h.until("702", "703", "704")
        assert items[-1].code == "704" and items[-2].text[0].startswith("700-__spd_")
    finally:
        h.close()


def test_quit_while_speaking_stops_and_answers(voice):
    h = Harness(voice)
    h.speak(LONG)
    h.until("705")
    h.send("QUIT")
    items = h.until("210")
    assert "703" in codes(items)
    assert h.close() == 0


def test_many_short_messages_in_a_row_each_get_exactly_one_end(h):
    for k in range(8):
        h.speak(f"Message {k}.")
        items = h.until("702", "703", "704")
        assert codes(items).count("701") == 1 and items[-1].code == "702"


def test_input_cut_off_in_a_message_or_a_line_ends_the_module_cleanly(voice):
    h = Harness(voice)
    h.send("SPEAK", "half a message without its dot")
    h._to.write(b"QUI")  # and a last line without its end
    h._to.close()
    h._run.join(60)
    assert h.exit_code == 0
    h._reader.join(60)
    h._from.close()
    h._module_in.close()
