"""Voices as Speech Dispatcher sees them: LIST VOICES, and the speaker a message's settings pick.

Every speaker of every installed voice is listed as ``VOICE/SPEAKER`` (``default/en-us+f3``)
with its language (``en-US``) and variant (``f3``). A client picks one by that name
(``synthesis_voice``), or by language and voice type (``male1``, ``female2``, ...):
:func:`choose_speaker`.
"""

from __future__ import annotations

import logging

from wavern.app.speechd import settings as S

__all__ = ["list_voices", "choose_speaker", "split_voice_name"]

log = logging.getLogger(__name__)


def list_voices(*, language: str | None = None, variant: str | None = None,
                also=None) -> list[tuple[str, str, str]]:
    """``(name, language, variant)`` of every speaker of every valid installed voice (and of the
    voice folder ``also``, the module's own, where it is not installed); with ``language``, those of
    that language (``en`` matches ``en-US`` too), with ``variant`` too, those of that variant."""
    from wavern.app.voices import find_voices, voice_info

    found = find_voices()
    if also is not None and all(v.name != voice_info(also).name for v in found):
        found.insert(0, voice_info(also))
    rows = []
    for info in found:
        if info.error is not None:
            continue
        for speaker in info.speakers:
            rows.append((f"{info.name}/{speaker}", S.language_of(speaker), S.variant_of(speaker)))
    if language:
        want = language.lower().replace("_", "-")
        rows = [r for r in rows if r[1].lower() == want or r[1].lower().split("-")[0] == want]
        if variant and variant.lower() != "none":
            rows = [r for r in rows if r[2].lower() == variant.lower()]
    return rows


def split_voice_name(name: str) -> tuple[str | None, str | None]:
    """``(voice, speaker)`` of a LIST VOICES name: ``default/en-us+f3`` -> both, ``default`` -> the
    voice alone, ``en-us+f3`` (a speaker of the current voice) -> the speaker alone."""
    if "/" in name:
        voice, _, speaker = name.rpartition("/")
        return voice or None, speaker or None
    if "+" in name or name.startswith("en"):
        return None, name
    return name, None


def choose_speaker(speakers: tuple[str, ...], default: str, *, language: str | None, voice_type: str) -> str:
    """The speaker a language and a voice type pick among a voice's ``speakers``.

    The accent is the language's where the voice has it, else the default speaker's. Among the
    accent's speakers, male ones (``+m``) and female ones (``+f``) are each ordered with the
    default's variant first, then by name: ``male1`` is the first male, ``male2`` the second, and
    so on (wrapping round); ``child_male`` / ``child_female`` the last of their kind. A voice
    without that kind: its default speaker, or the accent's first.
    """
    accent = S.accent_of(language)
    default_accent = default.split("+", 1)[0]
    mine = [s for s in speakers if s.split("+", 1)[0] == accent] if accent else []
    if not mine:
        accent = default_accent
        mine = [s for s in speakers if s.split("+", 1)[0] == accent] or [default]
    kind = "f" if "female" in voice_type else "m"
    own = S.variant_of(default)
    same = sorted((s for s in mine if S.variant_of(s).startswith(kind)),
                  key=lambda s: (S.variant_of(s) != own, s))
    if not same:
        return default if default in mine else mine[0]
    if voice_type.startswith("child"):
        return same[-1]
    k = int(voice_type[-1]) - 1 if voice_type[-1].isdigit() else 0
    return same[k % len(same)]
