"""What a token's neighbours look like (:class:`Context`) and what it reads as (:class:`Reading`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Context", "Reading"]

# --------------------------------------------------------------------------- context

@dataclass(frozen=True)
class Context:
    """What a token's neighbours look like (prepared text; None across punctuation).

    Attributes
    ----------
    prev, next:
        The previous / next token when only spaces separate it from this one, else None.
    is_initial:
        This token starts a sentence (first token, or after . ? ! or a line break).
    prev_is_initial:
        The previous token starts a sentence.
    prev2:
        The token before `prev` when only spaces separate the three, else None.
    following:
        The next token whatever separates it (punctuation, a line break), or None at the end:
        what decides for the abbreviations that are also words ("Rev.\nSmith", "Fig. (3)").
    line_start:
        This token is the first on its line.
    """

    prev: str | None = None
    next: str | None = None
    prev2: str | None = None
    is_initial: bool = False
    prev_is_initial: bool = False
    following: str | None = None
    line_start: bool = False


@dataclass(frozen=True)
class Reading:
    """The spoken form of one token.

    Attributes
    ----------
    spoken:
        What to say; may be empty (the token is silent, e.g. a lone "*").
    phonemes:
        IPA from the lexicon, else None.
    may_end:
        The token ends in a period that may also end the sentence ("U.S.", "etc.", "J.").
    """

    spoken: str
    phonemes: str | None = None
    may_end: bool = False


