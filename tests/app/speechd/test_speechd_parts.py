"""The module's pure parts: protocol framing, 705 audio, settings mapping, message text, speakers,
install/uninstall in a scratch home."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest

from wavern.app.speechd import install as inst
from wavern.app.speechd import protocol as P
from wavern.app.speechd import settings as S
from wavern.app.speechd import text as T
from wavern.app.speechd.module import ModuleConfig
from wavern.app.speechd.voices import choose_speaker, split_voice_name
from wavern.errors import ParameterError


# --------------------------------------------------------------------------- protocol
def test_audio_event_round_trips_every_byte_value():
    x = np.arange(-32768, 32768, 7, dtype=np.int16)  # every high byte, newlines and escapes among them
    x = np.concatenate([x, np.array([0x0A0A, 0x7D7D, 0x0A7D, 0x7D0A], np.int16)])
    data = P.encode_audio(x, 22050)
    lines = data.rstrip(b"\n").split(b"\n")
    assert lines[-1] == b"705 AUDIO" and all(not ln.startswith(b"705 ") for ln in lines[:-1])
    got = P.decode_audio(lines)
    assert got.sample_rate == 22050
    np.testing.assert_array_equal(got.samples, x)


def test_block_reading_undoes_dot_stuffing_and_stops_at_the_dot():
    s = io.BytesIO(b"first\r\n..dotted\n.\nNEXT\n")
    assert P.read_block(s) == [b"first", b".dotted"]
    assert P.read_line(s) == b"NEXT"
    assert P.read_line(s) is None


def test_a_block_cut_off_by_the_end_of_input_is_none():
    assert P.read_block(io.BytesIO(b"text without its dot\n")) is None


def test_an_over_long_line_is_skipped_whole_and_reading_goes_on():
    s = io.BytesIO(b"x" * 100 + b"\nSTOP\n")
    with pytest.raises(P.BlockTooLong):
        P.read_line(s, limit=10)
    assert P.read_line(s) == b"STOP"


def test_replies_with_reasons_keep_one_line_each():
    r = P.Reply.with_reasons(P.Reply.BAD_PARAM, ["rate=2\nbad", "x"])
    assert r.splitlines() == ["303-rate=2 bad", "303-x", "303 ERROR INVALID PARAMETER OR VALUE"]


# --------------------------------------------------------------------------- settings
def test_mappings_span_the_voice_s_ranges():
    assert S.speed_of(-100) == 0.25 and S.speed_of(0) == 1.0 and S.speed_of(100) == 4.0
    assert S.gain_of(-100) == 0.0 and S.gain_of(0) == 1.0 and S.gain_of(100) == 2.0
    assert S.pitch_of(-100) == 25.0 and S.pitch_of(100) == 75.0
    assert S.pitch_range_of(-100) == 20.0 and S.pitch_range_of(100) == 90.0


@pytest.mark.parametrize("name,value", [("rate", "101"), ("pitch", "-101"), ("volume", "inf"), ("rate", "x"),
                                        ("punctuation_mode", "loud"), ("voice", "robot"),
                                        ("cap_let_recogn", "beep")])
def test_bad_settings_are_refused_naming_value_and_range(name, value):
    with pytest.raises(ParameterError, match=f"{name}={value}"):
        S.SpeechSettings().set(name, value)


def test_null_means_the_default_and_unknown_settings_are_skipped():
    s = S.SpeechSettings()
    s.set("synthesis_voice", "default/en+f1")
    s.set("synthesis_voice", "NULL")
    s.set("punctuation_mode", "NULL")
    s.set("brand_new", "7")
    assert s.synthesis_voice is None and s.punctuation_mode == "none"


def test_languages_pick_accents():
    assert S.accent_of("en-US") == "en-us" and S.accent_of("en_GB") == "en-gb-x-rp"
    assert S.accent_of("en-AU") == "en" and S.accent_of("fr") is None and S.accent_of("c") is None
    assert S.language_of("en-gb-scotland+f3") == "en-GB" and S.variant_of("en-us+m2") == "m2"


SPEAKERS = tuple(f"{a}+{v}" for a in ("en", "en-us", "en-gb-x-rp") for v in ("f1", "f2", "f3", "m1", "m3", "m6"))


def test_voice_types_pick_speakers_of_the_language_default_first():
    pick = lambda lang, vt: choose_speaker(SPEAKERS, "en+m6", language=lang, voice_type=vt)  # noqa: E731
    assert pick(None, "male1") == "en+m6"  # the voice's own default
    assert pick("c", "male2") == "en+m1"
    assert pick("en-US", "male1") == "en-us+m6"
    assert pick("en-GB", "female2") == "en-gb-x-rp+f2"
    assert pick("fr-FR", "female1") == "en+f1"  # no French: the default accent
    assert pick("en-US", "child_female") == "en-us+f3"
    assert choose_speaker(("en-us",), "en-us", language="en-GB", voice_type="female1") == "en-us"


def test_voice_names_split():
    assert split_voice_name("default/en-us+f3") == ("default", "en-us+f3")
    assert split_voice_name("default") == ("default", None)
    assert split_voice_name("en-us+f3") == (None, "en-us+f3")


# --------------------------------------------------------------------------- message text
def test_find_marks_gives_offsets_in_the_document():
    doc = '<speak>Hi <mark name="a"/>there.<mark name=\'b&amp;c\'/></speak>'
    assert T.find_marks(doc) == [(doc.index("<mark"), "a"), (doc.index("<mark name='"), "b&c")]


def test_chars_and_capitals():
    assert T.char_message("a").text == "<speak>a</speak>"
    assert T.char_message("?").text == "<speak>question mark</speak>"
    assert T.char_message("<").text == "<speak>less than</speak>"
    assert T.char_message("A").pitch_up > 0
    assert T.char_message("A", cap_let_recogn="spell").text == "<speak>capital A</speak>"
    assert T.char_message("A", cap_let_recogn="icon").click
    assert "grinning face" in T.char_message("\U0001F600").text


def test_keys_are_said_as_words():
    assert T.key_message("shift_kp-enter").text == "<speak>shift keypad enter</speak>"
    assert T.key_message("control_alt_delete").text == "<speak>control alt delete</speak>"
    assert T.key_message("f12").text == "<speak>F 12</speak>"
    assert T.key_message("_").text == "<speak>underscore</speak>"
    assert T.key_message("prior").text == "<speak>page up</speak>"
    assert T.key_message("kp-5").text == "<speak>keypad 5</speak>"
    assert T.key_message("kp-*").text == "<speak>keypad star</speak>"


def test_punctuation_modes_name_only_their_level_and_leave_marks_alone():
    doc = '<speak>a+b, (c) &amp; d.<mark name="__spd_0"/></speak>'
    none = T.speak_message(doc).text
    some = T.speak_message(doc, punctuation_mode="some").text
    most = T.speak_message(doc, punctuation_mode="most").text
    every = T.speak_message(doc, punctuation_mode="all").text
    assert none == doc
    assert "plus" in some and "and" in some and "paren" not in some and "comma" not in some
    assert "left paren" in most and "comma" not in most
    assert "comma" in every and "dot" in every
    for d in (some, most, every):
        assert T.find_marks(d) == [(d.index("<mark"), "__spd_0")]


def test_plain_text_is_escaped_and_control_characters_become_spaces():
    m = T.speak_message("a < b\x07 & c")
    assert m.text == "<speak>a &lt; b  &amp; c</speak>"


def test_spelling_spells():
    assert "h" in T.speak_message("<speak>hi you</speak>", spelling=True).text.split()


# --------------------------------------------------------------------------- configuration
def test_module_configuration_file(tmp_path):
    conf = tmp_path / "wavern.conf"
    conf.write_text('# comment\nWavernVoice "myvoice"\nwavernaudio device\nWavernCharPasses 2\nOther 1\n')
    c = ModuleConfig.read(conf, audio="null")
    assert (c.voice, c.audio, c.char_passes, c.passes) == ("myvoice", "null", 2, None)
    assert ModuleConfig.read(tmp_path / "missing.conf").audio == "auto"
    conf.write_text("WavernAudio loud\n")
    with pytest.raises(ParameterError, match="loud"):
        ModuleConfig.read(conf)


# --------------------------------------------------------------------------- install
@pytest.fixture
def home(tmp_path, monkeypatch):
    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    system = tmp_path / "system-speechd.conf"
    system.write_text("LogLevel 3\n#AddModule \"espeak\" \"sd_espeak\" \"espeak.conf\"\n")
    monkeypatch.setattr(inst, "SYSTEM_CONF", system)
    return tmp_path


def test_install_writes_the_module_where_speech_dispatcher_looks_and_uninstall_removes_it(home):
    done = inst.install(reload=False)
    p = inst.paths()
    assert p.module == home / "xdg_data_home" / ".." / "libexec" / "speech-dispatcher-modules" / "sd_wavern" \
        or p.module.resolve() == (home / "libexec" / "speech-dispatcher-modules" / "sd_wavern").resolve()
    assert os.access(p.module, os.X_OK) and "-m wavern.app.cli speechd" in p.module.read_text()
    assert p.config.is_file() and not p.speechd_conf.exists()  # the system's lists no modules: nothing to add
    assert inst.status()[0]
    assert any("module:" in line for line in done)
    inst.uninstall(reload=False)
    assert not p.module.exists() and not p.config.exists() and not inst.status()[0]


def test_install_adds_a_module_line_where_the_configuration_lists_modules(home):
    p = inst.paths()
    p.speechd_conf.parent.mkdir(parents=True)
    own = 'LogLevel 3\nAddModule "espeak-ng" "sd_espeak-ng" "espeak-ng.conf"\nDefaultModule espeak-ng\n'
    p.speechd_conf.write_text(own)
    inst.install(reload=False, default=True)
    text = p.speechd_conf.read_text()
    assert 'AddModule "wavern" "sd_wavern" "wavern.conf"' in text and "\nDefaultModule wavern\n" in text
    assert "#DefaultModule espeak-ng" in text
    inst.install(reload=False, default=True)  # twice: one block
    assert p.speechd_conf.read_text().count("AddModule \"wavern\"") == 1
    inst.uninstall(reload=False)
    assert p.speechd_conf.read_text().strip() == own.strip()


def test_install_default_creates_a_user_configuration_and_uninstall_removes_it(home):
    inst.install(reload=False, default=True)
    p = inst.paths()
    assert "DefaultModule wavern" in p.speechd_conf.read_text()
    inst.uninstall(reload=False)
    assert not p.speechd_conf.exists()


def test_install_keeps_an_edited_configuration(home):
    inst.install(reload=False)
    p = inst.paths()
    p.config.write_text('WavernVoice "mine"\n')
    inst.install(reload=False)
    assert p.config.read_text() == 'WavernVoice "mine"\n'
    inst.install(reload=False, voice="other")
    assert 'WavernVoice "other"' in p.config.read_text()


def test_status_says_when_the_interpreter_is_gone(home):
    inst.install(reload=False, python=str(home / "no-such-python"))
    ok, line = inst.status()
    assert not ok and "not there" in line


def test_probe_runs_the_installed_module(home, tiny_voice):
    inst.install(reload=False, voice=str(tiny_voice))
    ok, said = inst.probe()
    assert ok, said
    assert "testvoice" in said and "lists 0 voice" not in said


# --------------------------------------------------------------------------- doctor
def test_doctor_says_whether_the_module_is_installed_and_working(home, tiny_voice):
    from wavern.app import doctor

    def line():
        (c,) = [c for c in doctor.run_checks() if c.name == "speechd"]
        return c

    c = line()
    assert c.ok and "module not installed" in c.detail
    inst.install(reload=False, voice=str(tiny_voice))
    c = line()
    assert c.ok and "working, answers INIT" in c.detail
    inst.install(reload=False, python=str(home / "gone" / "python"))
    c = line()
    assert not c.ok and "not there" in c.detail
