"""Fuzzing the front end: any text either segments with exact spans and a clean spoken
form, or is refused with ParameterError because there is nothing to say / it is too long."""

import unicodedata

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wavern.conditioning.frontend.sentences import MAX_SENTENCE_WORDS, Sentence, segment
from wavern.errors import ParameterError

FUZZ = settings(max_examples=1500, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SPOKEN_PUNCTUATION = set(" '-,;:.?!")


def allowed(c: str) -> bool:
    """Letters of any script, their combining marks, and a little punctuation."""
    return c in SPOKEN_PUNCTUATION or unicodedata.category(c)[0] in "LM"


def check(text: str, sentences: list[Sentence]) -> None:
    assert sentences
    pos = 0
    for s in sentences:
        assert text[s.start:s.end] == s.text
        assert pos <= s.start < s.end
        pos = s.end
        assert s.words
        wpos = s.start
        for w in s.words:
            assert text[w.start:w.end] == w.text
            assert wpos <= w.start < w.end <= s.end
            wpos = w.end
            assert s.spoken[w.spoken_start:w.spoken_end] == w.spoken != ""
        assert not any(c.isdigit() for c in s.spoken), s.spoken
        assert all(allowed(c) for c in s.spoken), s.spoken
        assert "  " not in s.spoken and s.spoken == s.spoken.strip()
        assert s.spoken[-1] in ".?!,;:" or s.spoken.endswith(s.words[-1].spoken)  # forced cut
        assert len(s.words) == 1 or len(s.spoken.split()) <= MAX_SENTENCE_WORDS


def run(text: str) -> None:
    try:
        sentences = segment(text)
    except ParameterError as exc:
        # only text with nothing speakable is refused; ASCII letters and digits always speak
        assert "nothing to say" in str(exc)
        assert not any(c.isascii() and c.isalnum() for c in text), text
        return
    check(text, sentences)


# every category, surrogates included
ANY_CHAR = st.characters(exclude_categories=())


@FUZZ
@given(st.text(ANY_CHAR, max_size=60))
def test_any_text(text):
    run(text)


PIECES = st.sampled_from([
    "Dr.", "Mr.", "St.", "U.S.", "e.g.", "i.e.", "etc.", "vs.", "No.", "J.", "a.m.", "p.m.", "Jr.",
    "Henry", "VIII", "I", "IV", "Chapter", "March", "the", "cat", "Smith", "Main", "www.example.com",
    "a.b@x.org", "https://x.io/a?b=1", "$", "£", "€", "%", "&", "+", "=", "@", "#", "°C", "km", "kg",
    "million", "pm", "AM", "...", "\u2026", ",", ";", ":", "!", "?", ".", "\"", "'", "(", ")", "-",
    "\u2014", "--", "/", "\n", "\n\n", "\t", " ", "\u00a0", "\U0001F600", "\u0301", "\ud800", "\x00",
    "\ufe0f", "\u200d", "\u4e2d", "\u0416", "\uff11", "\u00bd", "\u00b2", "\u2167", "\u00e9",
])
NUMBERS = st.one_of(
    st.integers(-10**20, 10**20).map(str),
    st.integers(0, 10**12).map(lambda n: f"{n:,}"),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(lambda x: f"{x:.3f}"),
    st.tuples(st.integers(0, 40), st.integers(0, 99)).map(lambda t: f"{t[0]}:{t[1]:02d}"),
    st.tuples(st.integers(0, 13), st.integers(0, 40), st.integers(0, 3000)).map(
        lambda t: f"{t[0]}/{t[1]}/{t[2]}"),
    st.tuples(st.integers(0, 3000), st.integers(0, 14), st.integers(0, 40)).map(
        lambda t: f"{t[0]}-{t[1]:02d}-{t[2]:02d}"),
    st.integers(0, 10**6).map(lambda n: f"{n}{['st', 'nd', 'rd', 'th', 's', 'km', '%', 'm', 'bn'][n % 9]}"),
    st.from_regex(r"[$£€¥]-?[0-9]{1,7}(\.[0-9]{1,3})?[kmMbn]?", fullmatch=True),
    st.from_regex(r"\+?[0-9]{1,4}([-.][0-9]{1,4}){1,4}", fullmatch=True),
    st.from_regex(r"[0-9]{1,3}/[0-9]{1,3}", fullmatch=True),
)
STRUCTURED = st.lists(st.one_of(PIECES, NUMBERS, st.text(ANY_CHAR, max_size=3)), max_size=40).map(
    lambda parts: "".join(p if i % 3 == 0 else p + " " for i, p in enumerate(parts)))


@FUZZ
@given(STRUCTURED)
def test_structured_text(text):
    run(text)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(["word", "Word", "1,000", "and", ",", "$5"]), min_size=100, max_size=400))
def test_long_run_on_sentences_are_bounded(parts):
    text = " ".join(parts)
    try:
        sentences = segment(text)
    except ParameterError:
        assert set(parts) == {","}
        return
    check(text, sentences)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(ANY_CHAR, min_size=1, max_size=30), st.integers(1, 29))
def test_oversize_is_refused(text, limit):
    if len(text) <= limit:
        return
    try:
        segment(text, max_chars=limit)
    except ParameterError as exc:
        assert f"{len(text):,} characters" in str(exc) and f"limit is {limit:,}" in str(exc)
    else:
        raise AssertionError("oversize text accepted")
