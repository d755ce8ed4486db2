"""Finding voices on disk: the shipped ones in ``assets/voices`` and the user's.

Search order: ``$WAVERN_VOICES`` (``os.pathsep``-separated folders), the user folder
``~/.local/share/wavern/voices``, then the voices shipped in the package. A name given to
``--voice`` resolves to the first folder of that name; a path is used as it is.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

from wavern.errors import ParameterError, VoiceFileError

__all__ = ["VoiceInfo", "voice_dirs", "find_voices", "voice_info", "resolve_voice", "DEFAULT_VOICE",
           "user_config_dir", "user_lexicon", "load_lexicon"]

#: Name of the voice used when none is asked for; the first valid shipped voice otherwise.
DEFAULT_VOICE = "default"
log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class VoiceInfo:
    name: str
    path: Path
    card: str  # first paragraph of MODEL_CARD.md, or ""
    error: str | None  # None when voice.json validates
    speakers: tuple[str, ...] = ()  # the acoustic model's speakers (voice.json), () when invalid
    default_speaker: str | None = None  # voice.json's inference.speaker (None: the first speaker)
    prosody: bool = False  # pitch and pitch range can be set (the acoustic model reads them)
    description: str = ""  # for a user: voice.json's description, else the card's first paragraph


def voice_dirs() -> list[Path]:
    dirs = [Path(p) for p in os.environ.get("WAVERN_VOICES", "").split(os.pathsep) if p]
    dirs.append(Path.home() / ".local" / "share" / "wavern" / "voices")
    import wavern.assets

    dirs.append(Path(wavern.assets.__file__).parent / "voices")
    return dirs


#: bytes of a MODEL_CARD.md read to find its first paragraph
CARD_BYTES = 64 << 10


def _card(path: Path) -> str:
    card = path / "MODEL_CARD.md"
    try:
        if not card.is_file():
            return ""
        with card.open("rb") as f:  # its first paragraph is all that is shown: a huge card is not read whole
            text = f.read(CARD_BYTES).decode("utf-8", errors="replace")
    except OSError:  # unreadable: no card to show
        return ""
    text = "".join(c if c.isprintable() or c in "\n\t" else " " for c in text)  # no escape codes to the terminal
    paras = [p.strip() for p in text.split("\n\n") if p.strip()]
    body = [p for p in paras if not p.startswith("#")]
    return " ".join(body[0].split()) if body else ""


def voice_info(path: str | Path) -> VoiceInfo:
    """One voice folder as a :class:`VoiceInfo`: its description (voice.json's ``description``, else
    its model card's first paragraph) and, when its ``voice.json`` does not validate, the error (the
    folder is still listed, marked broken)."""
    from wavern.engine.voicefile import read_voice_json

    path = Path(path)
    card = _card(path)
    try:
        meta = read_voice_json(path)
    except VoiceFileError as e:
        return VoiceInfo(path.name, path, card, str(e), description=card)
    acoustic = meta.get("acoustic", {})
    speakers = tuple(acoustic.get("speakers", ()))
    default = (meta.get("inference") or {}).get("speaker") or (speakers[0] if speakers else None)
    return VoiceInfo(path.name, path, card, None, speakers, default, bool(acoustic.get("prosody")),
                     " ".join(meta.get("description", "").split()) or card)


def find_voices() -> list[VoiceInfo]:
    """Every voice folder (one holding ``voice.json``) in the search path, validated cheaply."""
    seen: set[str] = set()
    out: list[VoiceInfo] = []
    for d in voice_dirs():
        try:
            subs = sorted(d.iterdir()) if d.is_dir() else []
        except OSError as e:  # a search folder the user may not read
            log.warning("voice folder %s: cannot list it (%s)", d, e.strerror or e)
            continue
        for sub in subs:
            try:
                holds = (sub / "voice.json").exists()
            except OSError:
                holds = True  # unreadable: listed, and voice_info says why
            if not holds or sub.name in seen:
                continue
            seen.add(sub.name)
            out.append(voice_info(sub))
    return out


def resolve_voice(name_or_path: str | None) -> Path:
    """Turn ``--voice`` (a name, a path, or None for the default) into a voice folder.

    A bare name (no path separator, not starting with '.') is an installed voice first
    (:func:`voice_dirs`), and only when none has that name a voice folder of that name here, so
    `--voice default` and no `--voice` speak with the same voice wherever they run; a path (``./x``,
    ``a/b``, ``~/v``) is that folder."""
    if name_or_path:
        p = Path(name_or_path).expanduser()
        looks_like_path = os.sep in name_or_path or name_or_path.startswith((".", "~"))
        if looks_like_path:
            if _holds_voice(p):
                return p
            raise VoiceFileError(f"{p} is not a voice folder (no voice.json in it)")
    wanted = name_or_path or DEFAULT_VOICE
    voices = find_voices()
    for v in voices:
        if v.name == wanted:
            return v.path
    if name_or_path and _holds_voice(p):  # not installed: a voice folder of that name here
        return p
    if name_or_path is None:
        valid = [v for v in voices if v.error is None]
        if valid:
            return valid[0].path
        raise VoiceFileError("no voice installed; run the README's first command (./setup.sh) to build one")
    names = ", ".join(v.name for v in voices) or "none"
    raise ParameterError(f"unknown voice '{wanted}'; installed voices: {names}")


def _holds_voice(folder: Path) -> bool:
    """``folder`` has a voice.json, or cannot be looked into (Voice.load then says what is wrong
    with it, unreadable included)."""
    try:
        return (folder / "voice.json").exists()
    except OSError:
        return True


def user_config_dir() -> Path:
    """``$XDG_CONFIG_HOME/wavern`` (``~/.config/wavern``): the user's lexicon.json (the window's
    "Fix word" table, which `say` and `render` read too)."""
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    return (Path(base) if os.path.isabs(base) else Path.home() / ".config") / "wavern"


def user_lexicon() -> Path:
    return user_config_dir() / "lexicon.json"


def load_lexicon(path: str | None):
    """``--lexicon``: the file given, or the user's lexicon.json when there is one (None without).

    Raises:
        ParameterError: the file given is missing, or a file is not a valid lexicon.
    """
    from wavern.conditioning.frontend.lexicon import Lexicon

    if path is None:
        p = user_lexicon()
        if not p.is_file():
            return None
    else:
        p = Path(path).expanduser()
    return Lexicon.load(p)

