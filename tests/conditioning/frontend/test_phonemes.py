"""Symbol table and the front end's token sequence (analyze / render)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from wavern.conditioning.frontend import Lexicon, analyze, render
from wavern.conditioning.frontend.phonemes import (
    BOS,
    DEFAULT_SYMBOLS,
    EOS,
    PAD,
    PAUSE_SYMBOLS,
    UNK,
    WORD,
    SymbolTable,
    pause_symbol,
    split_ipa,
    unknown_ipa,
)
from wavern.errors import ParameterError


# ----------------------------------------------------------------------------- SymbolTable
def test_table_layout_and_round_trip():
    t = SymbolTable.default()
    assert t.symbols[0] == PAD and t.pad_id == 0
    assert len(set(t.symbols)) == len(t)
    for s in (BOS, EOS, UNK, WORD, *PAUSE_SYMBOLS, "ˈæ", "ˌæ", "æ"):
        assert s in t
    back = SymbolTable.from_list(json.loads(json.dumps(t.to_list(), ensure_ascii=False)))
    assert back == t and back.to_list() == list(DEFAULT_SYMBOLS)
    ids = t.encode(t.symbols)
    assert ids.dtype == np.int64 and np.array_equal(ids, np.arange(len(t)))
    assert t.decode(ids) == list(t.symbols)


def test_unknown_symbols_fall_back_with_a_warning(caplog):
    t = SymbolTable.default()
    with caplog.at_level(logging.WARNING):
        ids = t.encode(["ˈn", "ɪːː", "ʘ", "n"])
    assert t.decode(ids) == ["n", "ɪ", UNK, "n"]
    assert "'ʘ'" in caplog.text and "'ˈn'" in caplog.text
    with caplog.at_level(logging.WARNING):
        assert t.decode([len(t), -1]) == [UNK, UNK]
    assert "outside the table" in caplog.text


@pytest.mark.parametrize(
    "symbols",
    [[], ["x", PAD, BOS, EOS, UNK, WORD], [PAD, BOS, EOS, UNK, WORD, "a", "a"], [PAD, BOS, EOS, WORD], [PAD, BOS, ""]],
)
def test_invalid_tables_are_refused(symbols):
    with pytest.raises(ParameterError):
        SymbolTable(symbols)


def test_pause_symbol():
    assert pause_symbol(", ") == ","
    assert pause_symbol('." ') == "."
    assert pause_symbol("? ") == "?"
    assert pause_symbol("; ") == ";"
    assert pause_symbol(" (") == ","
    assert pause_symbol("  ") == "_"


def test_split_ipa():
    t = SymbolTable.default()
    assert split_ipa("həlˈoʊ wˈɜːld", t) == ["h", "ə", "l", "ˈoʊ", WORD, "w", "ˈɜː", "l", "d"]
    assert split_ipa("tʃˈɑːɹdʒ", t) == ["tʃ", "ˈɑːɹ", "dʒ"]
    assert split_ipa("lˈɪɾəl", t) == ["l", "ˈɪ", "ɾ", "əl"]
    assert split_ipa("sˈɑːɹi", t) == ["s", "ˈɑː", "ɹ", "i"]
    assert split_ipa("ʘa", t) == [UNK, "a"]


# ----------------------------------------------------------------------------- analyze
def _check_structure(u, table=None):
    table = table or SymbolTable.default()
    n = len(u.symbols)
    assert u.symbols[0] == BOS and u.symbols[-1] == EOS
    assert u.ids.shape == u.is_global.shape == u.word_of.shape == u.sentence_of.shape == (n,)
    assert u.ids.dtype == np.int64 and u.word_of.dtype == np.int64 and u.is_global.dtype == bool
    assert np.array_equal(u.ids, table.encode(u.symbols))
    assert (np.diff(u.sentence_of) >= 0).all()
    for i, s in enumerate(u.symbols):
        if s in (BOS, EOS, WORD) or s in PAUSE_SYMBOLS:
            assert u.word_of[i] == -1
        else:
            assert 0 <= u.word_of[i] < len(u.words)
        if s in (BOS, EOS) or s in PAUSE_SYMBOLS or (i > 0 and u.sentence_of[i] != u.sentence_of[i - 1]):
            assert u.is_global[i]
    # a word's phonemes are contiguous and words come in order
    firsts = [int(np.flatnonzero(u.word_of == w)[0]) for w in range(len(u.words)) if (u.word_of == w).any()]
    assert firsts == sorted(firsts)


def test_analyze_hello_world():
    u = analyze("Hello, world.")
    _check_structure(u)
    assert [w.text for w in u.words] == ["Hello", "world"]
    assert "".join(u.symbols) == "<bos>həlˈoʊ,wˈɜːld.<eos>"
    assert u.symbols.index(",") < u.symbols.index("w")
    assert int(u.is_global.sum()) == 5  # bos, first token, ",", ".", eos


def test_word_boundaries_and_question():
    u = analyze("Did you see that?")
    _check_structure(u)
    assert u.symbols.count(WORD) >= 2
    assert u.symbols[-2] == "?"


def test_render_durations_sum_and_match_analyze():
    text = "We came, we saw; and then, quite suddenly, we left."
    r = render(text, voice="en-gb-x-rp+f4", rate=220, pitch=70, pitch_range=30)
    assert r.durations.shape == (len(r.utterance.symbols),)
    assert (r.durations >= 0).all() and int(r.durations.sum()) == r.audio.size
    assert r.utterance.symbols == analyze(text, voice="en-gb-x-rp+f4").symbols
    # pauses carry the silence: they are long, word boundaries are instantaneous
    sym = np.array(r.utterance.symbols, dtype=object)
    assert (r.durations[sym == WORD] == 0).all()
    assert r.durations[np.isin(sym, [",", ";", "."])].min() > 1000


def test_analyze_equals_the_rendered_tokens():
    """analyze takes espeak's events without audio (at its fastest rate); every field of the
    utterance equals the one render gives at espeak's defaults (and so the corpus's)."""
    from pathlib import Path

    sotu = Path(__file__).resolve().parents[3] / "assets" / "sentences" / "sotu.txt"
    lines = [line for line in sotu.read_text().splitlines() if line.strip()][::250]
    texts = lines + ["Dr. Smith paid $12.50 on 3/4/2021 at 10:30am. Really?!", "I.B.M., NASA; e.g. the U.S.A.",
                     "\"Quoted,\" she said (bracketed) -- yes... 1st, 2nd and 21st.", "A", "42"]
    for voice in ("en-us", "en-gb-x-rp+f4", "en-us-nyc"):
        for text in texts:
            a, b = render(text, voice=voice).utterance, analyze(text, voice=voice)
            assert b.symbols == a.symbols, (voice, text)
            assert b.words == a.words and b.sentences == a.sentences
            for field in ("ids", "is_global", "word_of", "sentence_of"):
                np.testing.assert_array_equal(getattr(b, field), getattr(a, field))


def test_multi_sentence_structure():
    r = render("Go home. Now, please!")
    u = r.utterance
    _check_structure(u)
    assert len(u.sentences) == 2 and set(u.sentence_of.tolist()) == {0, 1}
    first_of_second = int(np.flatnonzero(u.sentence_of == 1)[0])
    assert u.is_global[first_of_second]
    assert u.symbols[first_of_second - 1] == "." and u.symbols[-2] == "!" and "," in u.symbols
    assert int(r.durations.sum()) == r.audio.size


def test_normalised_words_map_back_to_written_words():
    """"$12.50" is said as five espeak words; all their phonemes belong to the one written word,
    with word boundaries (espeak may also pause) between them."""
    u = analyze("He paid $12.50 today.")
    _check_structure(u)
    texts = [w.text for w in u.words]
    w = texts.index("$12.50")
    idx = np.flatnonzero(u.word_of == w)
    span = u.symbols[idx[0]:idx[-1] + 1]
    assert span.count(WORD) >= 3
    assert all(u.word_of[idx[0] + i] == w for i, s in enumerate(span) if s != WORD and s not in PAUSE_SYMBOLS)


def test_lexicon_override_replaces_a_words_tokens():
    lex = Lexicon({"tomato": {"phonemes": "təmˈɑːtəʊ"}})
    plain = render("Say tomato now.")
    r = render("Say tomato now.", lexicon=lex)
    u = r.utterance
    _check_structure(u)
    w = [x.text for x in u.words].index("tomato")
    assert [s for s, k in zip(u.symbols, u.word_of) if k == w] == ["t", "ə", "m", "ˈɑː", "t", "əʊ"]
    assert int(r.durations.sum()) == r.audio.size
    assert u.symbols != plain.utterance.symbols


@pytest.mark.parametrize(("written", "espeak_style"), [
    ("ʃɪˈvɔːn", "ʃɪvˈɔːn"),  # stress before the syllable, as dictionaries write it
    ("təˈmɑːtoʊ", "təmˈɑːtoʊ"),
    ("tə.ˈmɑː.təʊ", "təmˈɑːtəʊ"),  # syllable dots are no pauses
    ("/təˈmeɪtoʊ/", "təmˈeɪtoʊ"),
    ("[ˈhɛloʊ]", "hˈɛloʊ"),
    ("ˈt͡ʃɪp", "tʃˈɪp"),  # a tie bar
    ("ˈgɝl", "ɡˈɜːl"),  # ASCII g, r-coloured vowel
    ("ˈbɑ:l", "bˈɑːl"),  # ASCII colon
    ("ˈɛndʒɪn ˈɛks", "ˈɛndʒɪn ˈɛks"),
])
def test_dictionary_ipa_splits_as_espeaks_ipa(written, espeak_style):
    table = SymbolTable.default()
    assert split_ipa(written, table) == split_ipa(espeak_style, table)
    assert UNK not in split_ipa(written, table) and not set(split_ipa(written, table)) & set(PAUSE_SYMBOLS)
    assert unknown_ipa(written, table) == []
    assert unknown_ipa("ɬaʁ", table) == ["ɬ", "ʁ"]  # no English phoneme: named, spoken as <unk>


def test_an_override_tomato_in_dictionary_ipa_keeps_its_stress_and_no_pause():
    r = render("Say tomato now.", lexicon=Lexicon({"tomato": {"phonemes": "tə.ˈmɑː.təʊ"}}))
    u = r.utterance
    _check_structure(u)
    w = [x.text for x in u.words].index("tomato")
    assert [s for s, k in zip(u.symbols, u.word_of) if k == w] == ["t", "ə", "m", "ˈɑː", "t", "əʊ"]


def test_a_multi_word_entry_gives_its_word_boundary_no_duration():
    r = render("I like nginx a lot.", lexicon=Lexicon({"nginx": {"phonemes": "ˈɛndʒɪn ˈɛks"}}))
    u = r.utterance
    _check_structure(u)
    w = [x.text for x in u.words].index("nginx")
    idx = np.flatnonzero(u.word_of == w)
    inner = [i for i in range(idx[0], idx[-1] + 1) if u.symbols[i] == WORD]
    assert len(inner) == 1 and r.durations[inner[0]] == 0
    assert int(r.durations.sum()) == r.audio.size


def test_an_override_on_words_espeak_joins_keeps_every_word(caplog):
    plain = analyze("There are many.")
    assert not any(k == 1 for k in plain.word_of)  # espeak speaks "there are" as one word
    for word in ("there", "are"):
        with caplog.at_level(logging.WARNING):
            u = analyze("There are many.", lexicon=Lexicon({word: {"phonemes": "ðˈɛɹ"}}))
        assert u.symbols == plain.symbols  # not applied (was: "are" gone, or silently ignored)
        assert "not applied" in caplog.text
        caplog.clear()


def test_unknown_phoneme_in_a_small_table_does_not_crash(caplog):
    small = SymbolTable([s for s in DEFAULT_SYMBOLS if s not in ("ð", "ˈɛ")])
    with caplog.at_level(logging.WARNING):
        u = analyze("Then they went.", table=small)
    _check_structure(u, small)
    assert "ð" not in u.symbols and "ˈɛ" not in u.symbols
    assert UNK in u.symbols and "ɛ" in u.symbols  # ð has no fallback; ˈɛ loses its stress


def test_empty_text_is_refused():
    with pytest.raises(ParameterError):
        analyze("   ")


def test_bad_arguments():
    with pytest.raises(ParameterError):
        analyze(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        analyze("Hi.", voice="")
