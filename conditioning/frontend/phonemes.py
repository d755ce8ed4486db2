"""The phoneme symbol table and the rule that turns espeak-ng events into tokens.

**Tokens.** One token per espeak-ng phoneme event, named by its IPA string exactly as espeak
emits it. Stress is *part of* the vowel token (``"ˈæ"``, ``"ˌæ"`` and ``"æ"`` are three
symbols), because espeak reports stress that way and one event then carries one duration;
every stressable vowel has all three forms in the table. Around the phonemes:

- ``<pad>`` (id 0), ``<bos>``, ``<eos>``, ``<unk>`` (the fallback for unknown symbols);
- ``" "`` a word boundary where espeak starts a new word without a pause (duration 0);
- pause tokens ``_ , ; : . ? !``: a run of espeak pause events, named by the strongest
  punctuation in the text between the words on either side (``_`` when there is none).

**Durations** (samples at 22 050 Hz) come from the event times; zero-length events are kept
with duration 0, and the samples before a sentence's first event go to the token before it
(``<bos>`` or the previous sentence's final pause), so durations sum to the audio length.

The table is a plain list (index = id) stored in ``voice.json["symbols"]``. New symbols are
only ever appended to :data:`DEFAULT_SYMBOLS`, so ids stay stable.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import numpy as np

from wavern.errors import ParameterError

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "UNK",
    "WORD",
    "PAUSE",
    "PUNCTUATION",
    "PAUSE_SYMBOLS",
    "STRESS_MARKS",
    "DEFAULT_SYMBOLS",
    "SymbolTable",
    "pause_symbol",
    "split_ipa",
    "normalize_ipa",
    "unknown_ipa",
]

log = logging.getLogger(__name__)

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
WORD = " "  # word boundary (so "".join(symbols) reads as spaced IPA)
PAUSE = "_"  # a pause with no punctuation in the text
# Strongest first: a pause between "done." and '"Then' is named "."; comma-like marks (quotes,
# brackets, dashes) all become ",".
PUNCTUATION = ("?", "!", ".", ";", ":", ",")
PAUSE_SYMBOLS = (PAUSE, *PUNCTUATION)
_COMMA_LIKE = frozenset("()[]\"-\u2013\u2014")
STRESS_MARKS = ("ˈ", "ˌ")  # primary, secondary

# Everything espeak-ng 1.52 emitted for en-us, en, en-gb-x-rp, en-gb-scotland, en-029 and
# en-us-nyc over assets/sentences/sotu.txt plus letters, numbers and loan words (most frequent
# first). Never stressed:
_PLAIN = (
    "n", "t", "s", "d", "ɹ", "k", "l", "m", "z", "ð", "v", "p", "w", "b", "f", "ʃ", "h", "r", "ɡ", "j",
    "ŋ", "əl", "dʒ", "tʃ", "ᵻ", "ɾ", "θ", "ʒ", "ʲ", "t̪", "ʍ", "ʔ", "n̩", "x",
)
# Seen with a stress mark at least once; the table holds each bare, with ˈ and with ˌ.
# ("a:" with an ASCII colon and "aa" are names espeak really emits for some voices.)
_STRESSABLE = (
    "ɪ", "ə", "ɛ", "ʌ", "a", "ɒ", "iː", "eɪ", "ɐ", "aɪ", "æ", "i", "uː", "ɔː", "aʊ", "oʊ", "ɑː", "ʊ", "ɜː",
    "iə", "ɚ", "e", "əʊ", "eː", "ɜ", "ɛə", "eə", "oː", "ʉ", "ɔ", "ɔːɹ", "ʌʉ", "əɪ", "ʉː", "oə", "ɔɪ", "ɔə",
    "aɪə", "aː", "ɑə", "o", "ɑːɹ", "ʊə", "ʌɹ", "a:", "aa", "ɛɹ", "ɪɹ", "ʊɹ", "ʉɹ", "əɹ", "aɪɚ",
)

DEFAULT_SYMBOLS: tuple[str, ...] = (
    PAD, BOS, EOS, UNK, WORD, *PAUSE_SYMBOLS, *_PLAIN,
    *(form for v in _STRESSABLE for form in (v, "ˈ" + v, "ˌ" + v)),
)


def pause_symbol(gap_text: str) -> str:
    """The pause token for the text between two words: its strongest punctuation, else ``_``."""
    marks = set(gap_text)
    for p in PUNCTUATION:
        if p in marks:
            return p
    if marks & _COMMA_LIKE:
        return ","
    return PAUSE


class SymbolTable:
    """An ordered, immutable list of symbols; the index of a symbol is its id.

    Args:
        symbols: the symbols in id order. ``symbols[0]`` must be ``<pad>``, symbols must be
            unique non-empty strings, and ``<bos>``, ``<eos>``, ``<unk>`` and the word
            boundary must be present.
    """

    def __init__(self, symbols: Sequence[str] = DEFAULT_SYMBOLS) -> None:
        symbols = tuple(symbols)
        if not symbols or symbols[0] != PAD:
            raise ParameterError(f"symbol 0 must be {PAD!r}, found {symbols[:1]!r}")
        bad = [s for s in symbols if not isinstance(s, str) or not s]
        if bad:
            raise ParameterError(f"symbols must be non-empty strings, found {bad[:5]!r}")
        index: dict[str, int] = {}
        for i, s in enumerate(symbols):
            if s in index:
                raise ParameterError(f"symbol {s!r} appears twice (ids {index[s]} and {i})")
            index[s] = i
        missing = [s for s in (BOS, EOS, UNK, WORD) if s not in index]
        if missing:
            raise ParameterError(f"symbol table lacks the required symbols {missing!r}")
        self._symbols = symbols
        self._index = index
        self._warned: set[str] = set()

    # ---------------------------------------------------------------- basic access
    @classmethod
    def default(cls) -> SymbolTable:
        """The table for the English espeak-ng voices (:data:`DEFAULT_SYMBOLS`)."""
        return cls(DEFAULT_SYMBOLS)

    @classmethod
    def from_list(cls, symbols: Sequence[str]) -> SymbolTable:
        """Rebuild from :meth:`to_list` (``voice.json["symbols"]``)."""
        if isinstance(symbols, (str, bytes)) or not isinstance(symbols, Sequence):
            raise ParameterError(f"a symbol table is a list of strings, found {type(symbols).__name__}")
        return cls(symbols)

    def to_list(self) -> list[str]:
        return list(self._symbols)

    @property
    def symbols(self) -> tuple[str, ...]:
        return self._symbols

    def __len__(self) -> int:
        return len(self._symbols)

    def __contains__(self, symbol: object) -> bool:
        return symbol in self._index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SymbolTable) and other._symbols == self._symbols

    def __hash__(self) -> int:
        return hash(self._symbols)

    def __repr__(self) -> str:
        return f"SymbolTable({len(self)} symbols)"

    def id(self, symbol: str) -> int:
        """The id of a known symbol (``KeyError`` otherwise; see :meth:`encode` for fallback)."""
        return self._index[symbol]

    @property
    def pad_id(self) -> int:
        return 0

    @property
    def bos_id(self) -> int:
        return self._index[BOS]

    @property
    def eos_id(self) -> int:
        return self._index[EOS]

    @property
    def unk_id(self) -> int:
        return self._index[UNK]

    # ---------------------------------------------------------------- encode / decode
    def canonical(self, symbol: str) -> str:
        """``symbol`` if known, else its fallback: without stress mark, then without length
        mark, then ``<unk>``. A fallback is logged once per symbol and table."""
        if symbol in self._index:
            return symbol
        candidates = [symbol.lstrip("".join(STRESS_MARKS))]
        candidates.append(candidates[0].replace("ː", ""))
        fallback = next((c for c in candidates if c and c in self._index), UNK)
        if symbol not in self._warned:
            self._warned.add(symbol)
            log.warning("unknown phoneme symbol %r mapped to %r", symbol, fallback)
        return fallback

    def encode(self, symbols: Iterable[str]) -> np.ndarray:
        """Symbols → ids, shape (N,) int64. Unknown symbols take their fallback (never raises)."""
        return np.fromiter((self._index[self.canonical(s)] for s in symbols), dtype=np.int64)

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Ids → symbols. Ids outside the table decode to ``<unk>`` with a logged warning."""
        out = []
        n = len(self._symbols)
        for i in ids:
            i = int(i)
            if 0 <= i < n:
                out.append(self._symbols[i])
            else:
                log.warning("phoneme id %d outside the table [0, %d); decoded as %r", i, n, UNK)
                out.append(UNK)
        return out


# Dictionary IPA written the usual ways, as espeak writes it: brackets, slashes, syllable dots,
# optional-sound parentheses and tie bars dropped; ASCII look-alikes and r-coloured or dark
# variants mapped to the table's symbols.
_IPA_DROP = str.maketrans("", "", "/[]().\u0361\u035c\u203f")
_IPA_MAP = {":": "ː", "g": "ɡ", "'": "ˈ", "\u02bc": "ˈ", "ɝ": "ɜː", "ɫ": "l", "ʧ": "tʃ", "ʤ": "dʒ"}


def normalize_ipa(ipa: str, table: SymbolTable) -> str:
    """Dictionary IPA -> espeak's IPA: :data:`_IPA_DROP` and :data:`_IPA_MAP`, and each stress mark
    moved from the start of its syllable to the vowel it stresses (``"ʃɪˈvɔːn"`` -> ``"ʃɪvˈɔːn"``:
    the table's stressed symbols are vowels); a mark with no vowel after it in its word is dropped."""
    vowel_starts = {s[1] for s in table.symbols if s[:1] in STRESS_MARKS and len(s) > 1}
    text = "".join(_IPA_MAP.get(c, c) for c in ipa.translate(_IPA_DROP))
    out: list[str] = []
    pending = ""
    for c in text:
        if c in STRESS_MARKS:
            pending = c
        elif c.isspace():
            pending = ""
            out.append(c)
        elif pending and c in vowel_starts:
            out.append(pending + c)
            pending = ""
        else:
            out.append(c)
    return "".join(out)


def unknown_ipa(ipa: str, table: SymbolTable) -> list[str]:
    """The pieces of ``ipa`` (after :func:`normalize_ipa`) that :func:`split_ipa` cannot map to a
    phoneme of ``table`` (they would be spoken as ``<unk>``)."""
    bad = []
    for piece in _split(normalize_ipa(ipa, table), table):
        if isinstance(piece, tuple):
            bad.append(piece[0])
    return bad


def split_ipa(ipa: str, table: SymbolTable) -> list[str]:
    """Split an IPA string (a lexicon entry) into table symbols by greedy longest match.

    The string is first brought to espeak's conventions (:func:`normalize_ipa`). Stress marks
    attach to the vowel that follows them (``"ˈæ"``), spaces become word boundaries, and
    characters that start no known symbol fall back through :meth:`SymbolTable.canonical` (never
    to a pause). A compound symbol that is a vowel plus ``l`` or ``ɹ`` (``"əl"``, ``"ɑːɹ"``) is
    taken only where no vowel follows, as espeak does: ``"həlˈoʊ"`` is ``h ə l ˈoʊ`` but
    ``"lˈɪɾəl"`` ends in ``əl``.
    """
    return [p[1] if isinstance(p, tuple) else p for p in _split(normalize_ipa(ipa, table), table)]


def _split(text: str, table: SymbolTable) -> list:
    """:func:`split_ipa`'s pieces: a symbol, or (the unknown text, its fallback symbol)."""
    longest = max(len(s) for s in table.symbols)
    vowels = {s[1:] for s in table.symbols if s[:1] in STRESS_MARKS}
    vowel_starts = {v[0] for v in vowels} | set(STRESS_MARKS)
    out: list = []
    i = 0
    text = text.strip()
    while i < len(text):
        if text[i].isspace():
            if out and out[-1] != WORD:
                out.append(WORD)
            i += 1
            continue
        for n in range(min(longest, len(text) - i), 0, -1):
            piece = text[i:i + n]
            compound = n > 1 and piece[-1] in "lɹ" and piece[:-1].lstrip("ˈˌ") in vowels
            if compound and i + n < len(text) and text[i + n] in vowel_starts:
                continue
            if piece in table and piece not in (PAD, BOS, EOS, UNK) and piece not in PAUSE_SYMBOLS:
                out.append(piece)
                i += n
                break
        else:
            stress = text[i] if text[i] in STRESS_MARKS else ""
            j = i + 1 if stress else i
            # an unknown vowel after a stress mark: keep the mark with the next character
            unknown = stress + text[j:j + 1]
            fallback = table.canonical(unknown)
            out.append(fallback if fallback != UNK and fallback not in PAUSE_SYMBOLS else (unknown, UNK))
            i = j + 1
    return out
