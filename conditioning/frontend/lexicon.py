"""A user pronunciation lexicon: respellings or IPA for words the rules get wrong.

``lexicon.json`` maps a word to either a respelling (plain text that the normaliser reads
instead of the word) or an object with IPA phonemes::

    {"nginx": "engine x", "GIF": {"phonemes": "dʒɪf"}, "Siobhan": {"respelling": "shiv awn"}}

Keys are single tokens as written (no spaces; apostrophes, hyphens and periods allowed) and
match case-insensitively after Unicode normalisation (NFKC, curly apostrophes straightened),
so "NGINX", "nginx" and "ｎｇｉｎｘ" share one entry. An object may hold ``respelling``,
``phonemes`` or both; with phonemes the front end keeps the respelling (or the word) as the
spoken text and attaches the IPA to the word as an override.
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from wavern.errors import DiskFullError, ParameterError

from .characters import prepare

__all__ = ["Lexicon", "LexiconEntry", "MAX_ENTRY_CHARS"]

log = logging.getLogger(__name__)

MAX_ENTRY_CHARS = 200
"""Longest key, respelling or phoneme string accepted (a word, not a paragraph)."""


@dataclass(frozen=True)
class LexiconEntry:
    """How to say one word.

    Attributes
    ----------
    respelling:
        Text read instead of the word ("engine x"), or None to read the word itself.
    phonemes:
        IPA used instead of espeak's own phonemes for the word, or None.
    """

    respelling: str | None = None
    phonemes: str | None = None

    def to_json(self) -> str | dict[str, str]:
        """The JSON value: a bare string for a respelling alone, else an object."""
        if self.phonemes is None and self.respelling is not None:
            return self.respelling
        out: dict[str, str] = {}
        if self.respelling is not None:
            out["respelling"] = self.respelling
        if self.phonemes is not None:
            out["phonemes"] = self.phonemes
        return out


def _key(word: str) -> str:
    if not isinstance(word, str):
        raise ParameterError(f"lexicon word must be a string, got {type(word).__name__}")
    key = prepare(word.strip()).casefold()
    if not key:
        raise ParameterError(f"lexicon word {word!r} is empty after normalisation")
    if any(c.isspace() for c in key):
        raise ParameterError(f"lexicon word {word!r} contains whitespace; entries are single words")
    if len(key) > MAX_ENTRY_CHARS:
        raise ParameterError(f"lexicon word is {len(key)} characters long; the limit is {MAX_ENTRY_CHARS}")
    return key


def _check_text(word: str, field: str, value: object) -> str:
    if not isinstance(value, str):
        raise ParameterError(f"lexicon entry {word!r}: {field} must be a string, got {type(value).__name__}")
    text = value.strip()
    if not text or not text.isprintable():
        raise ParameterError(f"lexicon entry {word!r}: {field} {value!r} is empty or has control characters")
    if len(text) > MAX_ENTRY_CHARS:
        raise ParameterError(
            f"lexicon entry {word!r}: {field} is {len(text)} characters long; the limit is {MAX_ENTRY_CHARS}")
    return text


def _entry(word: str, value: object) -> LexiconEntry:
    """Validate one JSON value (string or object) into an entry."""
    if isinstance(value, LexiconEntry):
        value = value.to_json()
    if isinstance(value, str):
        return LexiconEntry(respelling=_check_text(word, "respelling", value))
    if isinstance(value, Mapping):
        unknown = set(value) - {"respelling", "phonemes"}
        if unknown:
            raise ParameterError(
                f"lexicon entry {word!r}: unknown field(s) {sorted(unknown)}; use 'respelling' or 'phonemes'")
        if not value:
            raise ParameterError(f"lexicon entry {word!r} is an empty object; give 'respelling' or 'phonemes'")
        return LexiconEntry(
            respelling=_check_text(word, "respelling", value["respelling"]) if "respelling" in value else None,
            phonemes=_check_text(word, "phonemes", value["phonemes"]) if "phonemes" in value else None,
        )
    raise ParameterError(
        f"lexicon entry {word!r} must be a string or an object with 'phonemes', got {type(value).__name__}")


def _mode_of(path: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o644  # a new file: readable by all, as a plain open() under the usual umask makes it


@functools.cache
def _default_table():
    from .phonemes import SymbolTable

    return SymbolTable.default()


def _unknown_phonemes(ipa: str) -> list[str]:
    from .phonemes import unknown_ipa

    return unknown_ipa(ipa, _default_table())


class Lexicon:
    """Case-insensitive word -> :class:`LexiconEntry` map with JSON load/save.

    Parameters
    ----------
    entries:
        Initial entries, in the JSON form (``{"word": "respelling"}`` or
        ``{"word": {"phonemes": "IPA"}}``) or as :class:`LexiconEntry` values.
    """

    def __init__(self, entries: Mapping[str, str | Mapping[str, str] | LexiconEntry] | None = None) -> None:
        self._entries: dict[str, LexiconEntry] = {}
        for word, value in (entries or {}).items():
            key = _key(word)
            if key in self._entries:
                log.warning("lexicon: %r repeats an earlier entry (case-insensitive); the later one wins", word)
            self._entries[key] = entry = _entry(word, value)
            if entry.phonemes is not None and (bad := _unknown_phonemes(entry.phonemes)):
                log.warning("lexicon entry %r: phonemes %r hold %s, which no English phoneme matches; spoken as "
                            "unknown", word, entry.phonemes, ", ".join(map(repr, bad)))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Lexicon:
        """Read ``lexicon.json``.

        Raises
        ------
        ParameterError
            The file is missing or unreadable, is not valid JSON, is not an object, or
            holds an invalid entry (the message names the entry).
        """
        path = Path(path)
        try:
            raw = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ParameterError(f"lexicon file {str(path)!r} does not exist") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ParameterError(f"cannot read lexicon file {str(path)!r}: {exc}") from None
        def pairs(items: list) -> dict:
            seen = set()
            for k, _ in items:
                if k in seen:
                    log.warning("lexicon file %s: %r appears twice; the later entry wins", path, k)
                seen.add(k)
            return dict(items)

        try:
            data = json.loads(raw, object_pairs_hook=pairs)
        except json.JSONDecodeError as exc:
            raise ParameterError(
                f"lexicon file {str(path)!r} is not valid JSON: {exc.msg} at line {exc.lineno} "
                f"column {exc.colno}") from None
        except (ValueError, RecursionError) as exc:  # a 5000-digit number; nesting deeper than Python's stack
            raise ParameterError(f"lexicon file {str(path)!r} cannot be read: {exc}") from None
        if not isinstance(data, dict):
            raise ParameterError(
                f"lexicon file {str(path)!r} must hold a JSON object (word -> pronunciation), "
                f"found {type(data).__name__}")
        return cls(data)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write ``lexicon.json`` atomically (sorted keys, UTF-8, readable IPA).

        Raises
        ------
        DiskFullError
            The disk or quota is full.
        ParameterError
            The path cannot be written.
        """
        path = Path(path)
        text = json.dumps(self.to_json(), ensure_ascii=False, indent=2, sort_keys=True) + "\n"
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(prefix=".lexicon-", suffix=".tmp", dir=path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(tmp, _mode_of(path))  # mkstemp makes 0600; keep the file's own mode
            os.replace(tmp, path)
            tmp = None
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskFullError(f"disk full while writing lexicon {str(path)!r}") from exc
            raise ParameterError(f"cannot write lexicon file {str(path)!r}: {exc}") from None
        finally:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)

    def to_json(self) -> dict[str, str | dict[str, str]]:
        """The entries in the file's JSON form (keys normalised and lower-case)."""
        return {key: entry.to_json() for key, entry in self._entries.items()}

    def lookup(self, word: str) -> LexiconEntry | None:
        """The entry for `word` (any case or Unicode width), or None."""
        try:
            return self._entries.get(_key(word))
        except ParameterError:
            return None

    def set(self, word: str, respelling: str | None = None, *, phonemes: str | None = None) -> None:
        """Add or replace the entry for `word`; give a respelling, phonemes or both.

        Raises
        ------
        ParameterError
            Both are None, or either is empty, too long or not a string, or the phonemes hold a
            sound the voices' symbol table lacks (it would be spoken as ``<unk>``).
        """
        if respelling is None and phonemes is None:
            raise ParameterError(f"lexicon entry {word!r}: give a respelling or phonemes (both are None)")
        value: dict[str, str] = {}
        if respelling is not None:
            value["respelling"] = respelling
        if phonemes is not None:
            value["phonemes"] = phonemes
        entry = _entry(word, value)
        if entry.phonemes is not None and (bad := _unknown_phonemes(entry.phonemes)):
            raise ParameterError(f"lexicon entry {word!r}: phonemes {entry.phonemes!r} hold {', '.join(map(repr, bad))}, "
                                 f"which no English phoneme matches (use IPA such as 'təˈmɑːtoʊ')")
        self._entries[_key(word)] = entry

    def remove(self, word: str) -> bool:
        """Remove the entry for `word`; return whether there was one."""
        try:
            return self._entries.pop(_key(word), None) is not None
        except ParameterError:
            return False

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and self.lookup(word) is not None

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __repr__(self) -> str:
        return f"Lexicon({len(self._entries)} entries)"
