"""Speech Dispatcher's settings (``SET``) and how each maps onto a wavern voice.

The server sends every setting before every message. Numbers run from -100 to 100 (0: the
default); the rest are words. Mapping, one place (docs/SPEECHD.md has the same table):

================  =====================================================================
``rate``          speed factor ``2 ** (rate / 50)``: -100 -> 0.25, 0 -> 1, 50 -> 2, 100 -> 4
``pitch``         pitch level 50 + 25 * pitch / 100 (espeak-ng's units, 25..75), on voices whose
                  acoustic model reads pitch; ignored (with a log line) on the others
``pitch_range``   50 + 30 * r / 100 below 0 (down to 20, flat), 50 + 40 * r / 100 above (90)
``volume``        gain ``(volume + 100) / 100``: -100 silent, 0 the voice's level, 100 twice it (as
                  Speech Dispatcher's espeak-ng module: both are as loud at one setting)
``voice``         male1..3, female1..3, child_male, child_female: the voice's speakers of the
                  chosen accent whose variant is male (``+m``) or female (``+f``), the voice's
                  own default first; a child voice is the last of its kind
``language``      ``en-US`` -> the ``en-us`` accent, ``en-GB`` -> ``en-gb-x-rp``, ``en`` -> ``en``;
                  a language the voice lacks: the voice's default accent
``synthesis_voice``  a name from LIST VOICES (``VOICE/SPEAKER``, or a voice's name alone); it wins
                  over ``voice`` and ``language``
``punctuation_mode``  none / some / most / all: which punctuation is said by name (the server
                  usually does this itself and then sends ``none``)
``spelling_mode`` on: messages are spelled letter by letter
``cap_let_recogn``  none / spell / icon: how a capital letter said alone sounds (a higher
                  pitch, the word "capital", a click)
================  =====================================================================
"""

from __future__ import annotations

import dataclasses
import logging
import math

from wavern.errors import ParameterError

__all__ = ["SpeechSettings", "speed_of", "gain_of", "pitch_of", "pitch_range_of", "accent_of",
           "language_of", "variant_of", "VOICE_TYPES", "PUNCTUATION_MODES", "CAPITAL_MODES"]

log = logging.getLogger(__name__)

VOICE_TYPES = ("male1", "male2", "male3", "female1", "female2", "female3", "child_male", "child_female")
PUNCTUATION_MODES = ("none", "some", "most", "all")
CAPITAL_MODES = ("none", "spell", "icon")
_NUMBERS = ("rate", "pitch", "pitch_range", "volume")


def speed_of(rate: int) -> float:
    """Speech Dispatcher's rate (-100..100) as a speed factor (0.25..4)."""
    return float(2.0 ** (rate / 50.0))


def gain_of(volume: int) -> float:
    """Speech Dispatcher's volume (-100..100) as an output gain (0..2; peaks above full scale are
    bent, not clipped: the stream's soft limiter)."""
    return (volume + 100) / 100.0


def pitch_of(pitch: int) -> float:
    """Speech Dispatcher's pitch (-100..100) as the voice's pitch level (25..75, 50 its own)."""
    return 50.0 + 25.0 * pitch / 100.0


def pitch_range_of(pitch_range: int) -> float:
    """Speech Dispatcher's pitch range (-100..100) as the voice's (20..90, 50 its own)."""
    return 50.0 + (30.0 if pitch_range < 0 else 40.0) * pitch_range / 100.0


#: BCP 47 language tag (lower case) -> espeak-ng accent of the voice's speakers
_ACCENTS = {"en-us": "en-us", "en-gb": "en-gb-x-rp", "en-uk": "en-gb-x-rp", "en-scotland": "en-gb-scotland",
            "en-gb-scotland": "en-gb-scotland", "en-029": "en-029", "en": "en"}
#: espeak-ng accent -> the language tag listed for it
_LANGUAGES = {"en": "en", "en-us": "en-US", "en-us-nyc": "en-US", "en-gb-x-rp": "en-GB", "en-gb-scotland": "en-GB",
              "en-029": "en-029"}


def accent_of(language: str | None) -> str | None:
    """The espeak-ng accent asked for by a language tag (``en-US``, ``en_GB``); None for none."""
    if not language:
        return None
    tag = language.strip().replace("_", "-").lower()
    while tag:
        if tag in _ACCENTS:
            return _ACCENTS[tag]
        tag = tag.rpartition("-")[0]
    return None


def language_of(speaker: str) -> str:
    """The language tag a speaker is listed under (``en-gb-x-rp+f3`` -> ``en-GB``)."""
    accent = speaker.split("+", 1)[0]
    return _LANGUAGES.get(accent, accent if accent.startswith("en") else "en")


def variant_of(speaker: str) -> str:
    """The variant a speaker is listed with (``en-us+f3`` -> ``f3``; ``none`` without one)."""
    return speaker.split("+", 1)[1] if "+" in speaker else "none"


@dataclasses.dataclass
class SpeechSettings:
    """The settings of the next message, as the server last sent them (strings as sent, lower case)."""

    rate: int = 0
    pitch: int = 0
    pitch_range: int = 0
    volume: int = 0
    punctuation_mode: str = "none"
    spelling_mode: str = "off"
    cap_let_recogn: str = "none"
    voice: str = "male1"
    language: str | None = None
    synthesis_voice: str | None = None

    def set(self, name: str, value: str) -> None:
        """Apply one ``name=value`` line of a SET block.

        Raises:
            ParameterError: a number that is not one or is outside -100..100, a word outside the
                setting's choices (the message quotes it and the accepted range).
        """
        if name in _NUMBERS:
            try:
                v = float(value)
            except ValueError:
                raise ParameterError(f"{name}={value} is not a number (expected -100..100)") from None
            if not math.isfinite(v) or not -100 <= v <= 100:
                raise ParameterError(f"{name}={value} is outside -100..100")
            setattr(self, name, int(round(v)))
            return
        word = value.strip()
        if name in ("language", "synthesis_voice"):
            setattr(self, name, None if word in ("", "NULL") else word)
            return
        choices = {"punctuation_mode": PUNCTUATION_MODES, "spelling_mode": ("on", "off"),
                   "cap_let_recogn": CAPITAL_MODES, "voice": VOICE_TYPES}.get(name)
        if choices is None:  # a setting this module does not know (a newer server): not an error
            log.info("ignoring setting %s=%s", name, value)
            return
        if word == "NULL":  # "not set": the module's default
            setattr(self, name, SpeechSettings.__dataclass_fields__[name].default)
            return
        if word.lower() not in choices:
            raise ParameterError(f"{name}={value} is not one of {', '.join(choices)}")
        setattr(self, name, word.lower())
