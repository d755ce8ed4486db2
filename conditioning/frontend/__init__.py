"""The text front end: text → sentences → espeak-ng phoneme tokens.

``analyze(text)`` is the one call inference makes; ``render(text, ...)`` is the same path
with espeak's audio and per-token durations kept, which is what the training corpus stores.
Both take espeak-ng's phoneme events for each sentence's spoken form (``render`` from
:func:`espeak.synthesize`, ``analyze`` from :func:`espeak.phoneme_events`, which keeps no
audio and renders at espeak's fastest rate) and turn them into tokens by one rule (see
:mod:`.phonemes`), so for the same text and espeak voice the token sequence of ``analyze``
equals the one stored in the corpus. espeak-ng's phoneme choice does not depend on rate,
pitch or pitch range (checked by the corpus builder on every utterance against ``analyze``).

The token sequence of an utterance::

    <bos> [sentence 1 tokens] [sentence 2 tokens] ... <eos>

where a sentence's tokens are its phoneme tokens in espeak's order, a word boundary ``" "``
wherever espeak starts a new word without a pause (espeak joins some pairs, "there are", into
one word), and one pause token (``_ , ; : . ? !``) per run of espeak pause events, named by
the punctuation around it (each sentence ends with one).
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
from collections.abc import Sequence

import numpy as np

from wavern.conditioning.frontend import espeak
from wavern.conditioning.frontend.espeak import (
    DEFAULT_PITCH,
    DEFAULT_PITCH_RANGE,
    DEFAULT_RATE,
    SAMPLE_RATE,
    Synthesis,
    phonemize,
    synthesize,
)
from wavern.conditioning.frontend.lexicon import Lexicon
from wavern.conditioning.frontend.phonemes import (
    BOS,
    EOS,
    PAUSE_SYMBOLS,
    WORD,
    SymbolTable,
    pause_symbol,
    split_ipa,
)
from wavern.conditioning.frontend.sentences import Sentence, Word, segment
from wavern.errors import ParameterError

__all__ = [
    "analyze",
    "render",
    "Utterance",
    "Rendering",
    "SymbolTable",
    "synthesize",
    "phonemize",
    "Synthesis",
    "SAMPLE_RATE",
    "espeak",
    "segment",
    "Sentence",
    "Word",
    "Lexicon",
]

log = logging.getLogger(__name__)

_DEFAULT_TABLE: SymbolTable | None = None


def _default_table() -> SymbolTable:
    global _DEFAULT_TABLE
    if _DEFAULT_TABLE is None:
        _DEFAULT_TABLE = SymbolTable.default()
    return _DEFAULT_TABLE


@dataclasses.dataclass(frozen=True)
class Utterance:
    """The front end's output for one text.

    Attributes:
        sentences: the sentences from ``segment`` (text spans, spoken form, words).
        words: every word of every sentence, flattened in order; ``word_of`` indexes it.
        symbols: (N,) token strings, ``<bos>`` first and ``<eos>`` last.
        ids: (N,) int64 ids in the symbol table.
        is_global: (N,) bool: ``<bos>``, ``<eos>``, each sentence's first token, pause tokens.
        word_of: (N,) int64 index into ``words`` of the word a phoneme token belongs to,
            -1 for word boundaries, pauses, ``<bos>`` and ``<eos>``.
        sentence_of: (N,) int64 sentence index, non-decreasing; ``<bos>`` is in sentence 0,
            ``<eos>`` in the last.
        voice: the espeak-ng voice the phonemes came from.
    """

    sentences: tuple[Sentence, ...]
    words: tuple[Word, ...]
    symbols: list[str]
    ids: np.ndarray
    is_global: np.ndarray
    word_of: np.ndarray
    sentence_of: np.ndarray
    voice: str

    def __len__(self) -> int:
        return len(self.symbols)

    def word_token_spans(self) -> list[tuple[int, int]]:
        """``(first, end)`` token range of each word (``(t, t)`` for a word without phonemes)."""
        spans = []
        cursor = 1
        for w in range(len(self.words)):
            idx = np.flatnonzero(self.word_of == w)
            if idx.size:
                spans.append((int(idx[0]), int(idx[-1]) + 1))
                cursor = int(idx[-1]) + 1
            else:
                spans.append((cursor, cursor))
        return spans


@dataclasses.dataclass(frozen=True)
class Rendering:
    """:class:`Utterance` plus espeak's audio and the duration of every token.

    Attributes:
        utterance: the tokens (identical to ``analyze`` of the same text and voice).
        audio: (n_samples,) int16 at 22 050 Hz, the sentences' renderings concatenated.
        durations: (N,) int64 samples per token, >= 0, ``durations.sum() == len(audio)``.
    """

    utterance: Utterance
    audio: np.ndarray
    durations: np.ndarray


# ----------------------------------------------------------------------------- events → tokens
def _word_index(words: Sequence[Word], starts: list[int], position: int) -> int:
    """The word a phoneme event at ``position`` (into ``spoken``) belongs to, or -1."""
    if not words:
        return -1
    i = bisect.bisect_right(starts, position) - 1
    if i >= 0 and position < words[i].spoken_end:
        return i
    return i + 1 if i + 1 < len(words) else i  # in a gap: the next word (or the last)


def _gap_text(spoken: str, prev_pos: int | None, next_pos: int | None) -> str:
    """Text between the end of the espeak word at ``prev_pos`` and the one at ``next_pos``."""
    k = 0
    if prev_pos is not None:
        k = prev_pos
        while k < len(spoken) and (spoken[k].isalnum() or spoken[k] in "'\u2019-"):
            k += 1
    hi = len(spoken) if next_pos is None else max(next_pos, k)
    return spoken[k:hi]


def _sentence_tokens(sentence: Sentence, names: list[str], positions: list[int], durations: Sequence[int],
                     table: SymbolTable) -> list[tuple[str, int, int]]:
    """One sentence's ``(symbol, local_word, duration)`` tokens from its phoneme events
    (names, text positions, durations in samples; the durations change no symbol)."""
    words = tuple(sentence.words)
    starts = [w.spoken_start for w in words]
    # 1. events → items [symbol (None = pause), word, duration, espeak word position]; pause
    #    runs merged
    items: list[list] = []
    for name, pos, dur in zip(names, positions, durations):
        if name == "":
            if items and items[-1][0] is None:
                items[-1][2] += dur
            else:
                items.append([None, -1, dur, pos])
        else:
            items.append([table.canonical(name), _word_index(words, starts, pos), dur, pos])
    # 2. lexicon overrides replace a word's phonemes (its total duration spread evenly)
    for w, word in enumerate(words):
        if word.phonemes:
            items = _apply_override(items, w, split_ipa(word.phonemes, table), words)
    # 3. name pauses by the punctuation around them; a word boundary wherever espeak starts a
    #    new word (its phoneme events point at the word's first character) without a pause
    out: list[tuple[str, int, int]] = []
    for k, (sym, w, dur, pos) in enumerate(items):
        if sym is None:
            prev_pos = next((items[j][3] for j in range(k - 1, -1, -1) if items[j][0] is not None), None)
            next_pos = next((items[j][3] for j in range(k + 1, len(items)) if items[j][0] is not None), None)
            out.append((pause_symbol(_gap_text(sentence.spoken, prev_pos, next_pos)), -1, dur))
            continue
        if sym == WORD:  # from a lexicon override with several words
            out.append((WORD, -1, dur))
            continue
        if k > 0 and items[k - 1][0] is not None and items[k - 1][3] != pos and out[-1][0] != WORD:
            out.append((WORD, -1, 0))
        out.append((sym, w, dur))
    return out


def _apply_override(items: list[list], w: int, symbols: list[str], words: Sequence[Word]) -> list[list]:
    idx = [i for i, it in enumerate(items) if it[0] is not None and it[1] == w]
    if not idx or not symbols:
        log.warning("lexicon entry for %r not applied: espeak spoke it as part of the word before it",
                    words[w].text)
        return items
    nxt = w + 1
    if nxt < len(words) and words[nxt].spoken and not any(it[1] == nxt for it in items if it[0] is not None):
        # espeak joined the next word to this one ("there are"): their phonemes cannot be told
        # apart, and replacing them all would drop the next word
        log.warning("lexicon entry for %r not applied: espeak joins it with %r", words[w].text, words[nxt].text)
        return items
    lo, hi = idx[0], idx[-1] + 1
    total = sum(it[2] for it in items[lo:hi] if it[0] is not None)
    pauses = [it for it in items[lo:hi] if it[0] is None]  # keep any pause inside the word
    n_sounds = sum(s != WORD for s in symbols) or 1  # a word boundary inside the entry lasts 0
    share, extra = divmod(total, n_sounds)
    pos = items[lo][3]
    new, k = [], 0
    for s in symbols:
        new.append([s, w, 0 if s == WORD else share + (1 if k < extra else 0), pos])
        k += s != WORD
    return items[:lo] + new + pauses + items[hi:]


def _check_voice(voice: str) -> str:
    if not isinstance(voice, str) or not voice.strip():
        raise ParameterError(f"voice must be an espeak-ng voice name such as 'en-us', found {voice!r}")
    return voice.strip()


class _Tokens:
    """The token sequence of an utterance, built sentence by sentence (``render`` and ``analyze``)."""

    def __init__(self) -> None:
        self.words: list[Word] = []
        self.symbols: list[str] = [BOS]
        self.durations: list[int] = [0]
        self.word_of: list[int] = [-1]
        self.sentence_of: list[int] = [0]
        self.is_global: list[bool] = [True]

    def add(self, s: int, sentence: Sentence, tokens: list[tuple[str, int, int]], lead: int = 0) -> None:
        base = len(self.words) - len(sentence.words)
        self.durations[-1] += lead  # onset before the first event: to the token before
        for k, (sym, w, dur) in enumerate(tokens):
            self.symbols.append(sym)
            self.durations.append(dur)
            self.word_of.append(base + w if w >= 0 else -1)
            self.sentence_of.append(s)
            self.is_global.append(k == 0 or sym in PAUSE_SYMBOLS)

    def utterance(self, sentences: tuple[Sentence, ...], table: SymbolTable, voice: str) -> Utterance:
        return Utterance(
            sentences=sentences,
            words=tuple(self.words),
            symbols=self.symbols + [EOS],
            ids=table.encode(self.symbols + [EOS]),
            is_global=np.asarray(self.is_global + [True], bool),
            word_of=np.asarray(self.word_of + [-1], np.int64),
            sentence_of=np.asarray(self.sentence_of + [max(len(sentences) - 1, 0)], np.int64),
            voice=voice,
        )


def _prepare(text, voice: str, lexicon: Lexicon | None, table: SymbolTable | None):
    """What :func:`render` and :func:`analyze` both start with: checked text and voice, the
    symbol table, the sentences."""
    if not isinstance(text, str):
        raise ParameterError(f"text must be a str, found {type(text).__name__}")
    return _check_voice(voice), table or _default_table(), tuple(segment(text, lexicon=lexicon))

def render(
    text: str,
    *,
    voice: str = "en-us",
    rate: int = DEFAULT_RATE,
    pitch: int = DEFAULT_PITCH,
    pitch_range: int = DEFAULT_PITCH_RANGE,
    noise_seed: int = 0,
    lexicon: Lexicon | None = None,
    table: SymbolTable | None = None,
) -> Rendering:
    """Segment ``text``, render every sentence with espeak-ng and tokenise its events.

    Args:
        text: any text; ``segment`` splits it into sentences, each rendered on its own
            (empty or unspeakable text raises ``ParameterError``).
        voice: espeak-ng ``language[+variant]``.
        rate, pitch, pitch_range: espeak-ng parameters (they change timing, not tokens).
        noise_seed: seeds espeak's noise; sentence ``k`` uses ``noise_seed + k``.
        lexicon: passed to ``segment``; a word's IPA ``phonemes`` override replaces its tokens
            (split by :func:`.phonemes.split_ipa`, the word's duration shared evenly).
        table: symbol table for ids (default :meth:`SymbolTable.default`).

    Returns:
        :class:`Rendering` with ``durations.sum() == len(audio)``.
    """
    voice, table, sentences = _prepare(text, voice, lexicon, table)
    out = _Tokens()
    audio: list[np.ndarray] = []
    for s, sentence in enumerate(sentences):
        out.words.extend(sentence.words)
        if not sentence.spoken.strip():
            continue
        syn = synthesize(sentence.spoken, voice=voice, rate=rate, pitch=pitch, pitch_range=pitch_range,
                         noise_seed=(noise_seed + s) % 2**31)
        audio.append(syn.audio)
        tokens = _sentence_tokens(sentence, syn.phonemes, syn.text_positions.tolist(), syn.durations.tolist(), table)
        out.add(s, sentence, tokens, lead=syn.lead_samples)
    out.durations.append(0)  # <eos>
    audio_a = np.concatenate(audio) if audio else np.zeros(0, np.int16)
    dur_a = np.asarray(out.durations, np.int64)
    assert dur_a.sum() == audio_a.size and (dur_a >= 0).all(), "token durations must tile the audio"
    return Rendering(utterance=out.utterance(sentences, table, voice), audio=audio_a, durations=dur_a)


def analyze(
    text: str, *, voice: str = "en-us", lexicon: Lexicon | None = None, table: SymbolTable | None = None,
    sentences: Sequence[Sentence] | None = None,
) -> Utterance:
    """Text → :class:`Utterance` (tokens, ids, global flags, word and sentence maps).

    The token sequence equals the one :func:`render` (and so the corpus) produces for the same
    text and espeak voice. Only espeak's phoneme events are taken
    (:func:`espeak.phoneme_events`: no audio kept, about half the time of a rendering).

    ``sentences``: some of ``segment(text)``'s sentences (spans in ``text``), to analyse just
    those: a slice of the text segmented again can split otherwise (a rule that reads the
    line before the slice), so a caller working block by block passes the sentences it has.
    """
    if sentences is not None:
        if not isinstance(text, str):
            raise ParameterError(f"text must be a str, found {type(text).__name__}")
        voice, table, sentences = _check_voice(voice), table or _default_table(), tuple(sentences)
    else:
        voice, table, sentences = _prepare(text, voice, lexicon, table)
    out = _Tokens()
    for s, sentence in enumerate(sentences):
        out.words.extend(sentence.words)
        if not sentence.spoken.strip():
            continue
        ev = espeak.phoneme_events(sentence.spoken, voice=voice)
        zeros = [0] * len(ev.phonemes)
        out.add(s, sentence, _sentence_tokens(sentence, ev.phonemes, ev.text_positions.tolist(), zeros, table))
    return out.utterance(sentences, table, voice)
