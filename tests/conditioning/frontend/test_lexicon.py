"""User lexicon: JSON format, case-insensitive lookup, validation, atomic save."""

import json

import pytest

from wavern.conditioning.frontend.lexicon import MAX_ENTRY_CHARS, Lexicon, LexiconEntry
from wavern.errors import ParameterError


def test_both_value_forms():
    lex = Lexicon({"nginx": "engine x", "GIF": {"phonemes": "dʒɪf"},
                   "Siobhan": {"respelling": "shiv awn", "phonemes": "ʃɪˈvɔːn"}})
    assert lex.lookup("nginx") == LexiconEntry(respelling="engine x")
    assert lex.lookup("gif") == LexiconEntry(phonemes="dʒɪf")
    assert lex.lookup("SIOBHAN") == LexiconEntry(respelling="shiv awn", phonemes="ʃɪˈvɔːn")
    assert lex.lookup("nope") is None
    assert len(lex) == 3 and "Gif" in lex and "nope" not in lex


def test_lookup_ignores_case_width_and_apostrophe_style():
    lex = Lexicon({"don't": "do not"})
    for form in ["don't", "DON'T", "don\u2019t", "ｄｏｎ'ｔ"]:
        assert lex.lookup(form) == LexiconEntry(respelling="do not"), form


def test_save_load_round_trip(tmp_path):
    lex = Lexicon({"nginx": "engine x", "GIF": {"phonemes": "dʒɪf"}})
    lex.set("Dr.", "drive")
    lex.set("tomato", phonemes="təˈmɑːtoʊ")
    path = tmp_path / "lexicon.json"
    lex.save(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data == {"nginx": "engine x", "gif": {"phonemes": "dʒɪf"}, "dr.": "drive",
                    "tomato": {"phonemes": "təˈmɑːtoʊ"}}
    assert "dʒɪf" in path.read_text(encoding="utf-8")  # IPA stays readable
    again = Lexicon.load(path)
    assert again.to_json() == lex.to_json()
    assert [p.name for p in tmp_path.iterdir()] == ["lexicon.json"]  # no temp file left


def test_set_replaces_and_remove():
    lex = Lexicon()
    lex.set("word", "first")
    lex.set("WORD", "second")
    assert len(lex) == 1 and lex.lookup("word").respelling == "second"
    assert lex.remove("Word") is True
    assert lex.remove("word") is False
    assert len(lex) == 0


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "not valid JSON.*line 1"),
    ("[1, 2]", "must hold a JSON object.*list"),
    ('{"a": 5}', "'a' must be a string or an object"),
    ('{"a": {"phonemes": 5}}', "phonemes must be a string"),
    ('{"a": {"ipa": "x"}}', "unknown field"),
    ('{"a": {}}', "empty object"),
    ('{"a": ""}', "empty"),
    ('{"two words": "x"}', "whitespace"),
    ('{"": "x"}', "empty after normalisation"),
    ('{"a": "line\\nbreak"}', "control characters"),
    ('{"a": "' + "x" * (MAX_ENTRY_CHARS + 1) + '"}', f"limit is {MAX_ENTRY_CHARS}"),
    ('{"a": ' + "[" * 100000 + "]" * 100000 + "}", "cannot be read"),  # (was RecursionError)
    ('{"a": ' + "1" * 5000 + "}", "cannot be read.*digits"),  # (was ValueError)
])
def test_bad_files_refused(tmp_path, content, message):
    path = tmp_path / "lexicon.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ParameterError, match=message):
        Lexicon.load(path)


def test_missing_file(tmp_path):
    with pytest.raises(ParameterError, match="does not exist"):
        Lexicon.load(tmp_path / "missing.json")


def test_not_utf8(tmp_path):
    path = tmp_path / "lexicon.json"
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(ParameterError, match="cannot read"):
        Lexicon.load(path)


def test_save_to_missing_folder(tmp_path):
    with pytest.raises(ParameterError, match="cannot write"):
        Lexicon({"a": "b"}).save(tmp_path / "no" / "such" / "lexicon.json")


def test_set_needs_something():
    with pytest.raises(ParameterError, match="respelling or phonemes"):
        Lexicon().set("word")
    with pytest.raises(ParameterError, match="must be a string"):
        Lexicon().set("word", 5)


def test_lookup_of_odd_input_is_none():
    lex = Lexicon({"a": "b"})
    assert lex.lookup("") is None
    assert lex.lookup("two words") is None


def test_set_refuses_phonemes_no_english_phoneme_matches_and_load_warns(tmp_path, caplog):
    import logging

    lex = Lexicon()
    with pytest.raises(ParameterError, match=r"'ɬ'.*no English phoneme"):
        lex.set("Llanelli", phonemes="ɬanˈɛɬi")
    lex.set("Siobhan", phonemes="ʃɪˈvɔːn")  # dictionary IPA is fine
    assert "siobhan" in lex and "llanelli" not in lex
    path = tmp_path / "lexicon.json"
    path.write_text('{"Llanelli": {"phonemes": "ɬanˈɛɬi"}, "GIF": "jif", "GIF": "gif"}', encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        loaded = Lexicon.load(path)  # a file is loaded, its problems named
    assert "llanelli" in loaded and loaded.lookup("gif").respelling == "gif"
    assert "'ɬ'" in caplog.text and "'GIF' appears twice" in caplog.text


def test_save_keeps_the_files_mode(tmp_path):
    import os
    import stat

    path = tmp_path / "lexicon.json"
    Lexicon({"a": "ay"}).save(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644  # (mkstemp's 0600 before)
    os.chmod(path, 0o664)
    Lexicon({"b": "bee"}).save(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o664



def test_an_entry_applies_to_its_possessive_with_the_ending_english_gives_it():
    """(text review: "Xyzzq's" ignored the entry for "Xyzzq")"""
    from wavern.conditioning.frontend.normalize import Context, read_token

    lex = Lexicon()
    lex.set("Siobhan", respelling="shiv awn", phonemes="ʃɪˈvɔːn")
    lex.set("Xyzzq", respelling="zizzik")
    lex.set("Trish", phonemes="tɹɪʃ")
    lex.set("Kit", phonemes="kɪt")
    assert read_token("Siobhan's", Context(), lexicon=lex).phonemes == "ʃɪˈvɔːnz"
    assert read_token("Siobhan's", Context(), lexicon=lex).spoken == "shiv awn's"
    assert read_token("Xyzzq's", Context(), lexicon=lex).spoken == "zizzik's"
    assert read_token("Trish's", Context(), lexicon=lex).phonemes == "tɹɪʃɪz"
    assert read_token("Kit's", Context(), lexicon=lex).phonemes == "kɪts"
    assert read_token("Bob's", Context(), lexicon=lex).phonemes is None
