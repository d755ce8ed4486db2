"""What the engine hands out: small chunks of audio and the settings of one request."""

from __future__ import annotations

import dataclasses

import numpy as np

from wavern.conditioning.config import PROSODY_DEFAULT, PROSODY_LIMITS
from wavern.dsp import float_to_int16
from wavern.errors import ParameterError

__all__ = ["AudioChunk", "SpeakConfig"]


@dataclasses.dataclass(frozen=True)
class AudioChunk:
    """A piece of an utterance, in order.

    Attributes:
        samples: float32 mono audio in [-1, 1], volume applied.
        sample_rate: Hz.
        start_sample: index of ``samples[0]`` within the whole request's audio.
        text_span: (start, end) character span of the original text this chunk voices
            (the sentence it belongs to).
        sentence_index: which sentence of the request.
        word_timings: on the first chunk of each sentence, when each of its words is heard (and again,
            for the words still to come, on the first chunk after a change of speed)
            (``WordTiming``: character span in the original text, absolute sample span).
    """

    samples: np.ndarray
    sample_rate: int
    start_sample: int
    text_span: tuple[int, int]
    sentence_index: int = 0
    word_timings: tuple = ()

    @property
    def duration_s(self) -> float:
        return self.samples.shape[0] / self.sample_rate

    def int16(self) -> np.ndarray:
        return float_to_int16(self.samples)


#: Accepted ranges of a request's settings (SpeakConfig; the live StreamControl; voice.json's defaults).
SPEED_RANGE = (0.25, 4.0)
VOLUME_RANGE = (0.0, 4.0)
TEMPERATURE_RANGE = (0.05, 2.0)
PAUSE_RANGE = (0.0, 5.0)


@dataclasses.dataclass(frozen=True)
class SpeakConfig:
    """How to speak one request; ``None`` means "the voice's default".

    speed: speaking rate factor, bigger = faster (durations are divided by it).
    volume: linear gain applied to the output.
    temperature: vocoder sampling temperature.
    pause_s: silence after each sentence (the last one too: a queue of requests keeps its rhythm), seconds.
    speaker: speaker name for multi-speaker voices.
    postfilter: False turns the voice's post-processing (formant post-filter and mel matching)
        off for this request (None: the voice's setting; True cannot add either to a voice).
    pitch: the voice's pitch level in espeak-ng's units (50 = its default; 25..75, the range the
        model was trained on, ``PROSODY_LIMITS``), for voices whose acoustic model reads prosody.
    pitch_range: how much the pitch moves, same units (50 default; 20..90; low is monotone).
    passes: mel-matching passes for this request (0..32; None: the voice's; 0: none, the post-filter
        stays): fewer passes, earlier first audio and more of the vocoder's own voicing; more,
        cleaner copy of the mel (docs/bench/melmatch.md). Ignored when ``postfilter`` is False.
    """

    speed: float = 1.0
    volume: float = 1.0
    temperature: float | None = None
    pause_s: float | None = None
    speaker: str | None = None
    postfilter: bool | None = None
    pitch: float | None = None
    pitch_range: float | None = None
    passes: int | None = None

    def __post_init__(self):
        for name in ("speed", "volume", "temperature", "pause_s", "pitch", "pitch_range"):
            v = getattr(self, name)
            optional = name not in ("speed", "volume")
            if (v is not None or not optional) and (
                    isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating))):
                raise ParameterError(f"{name} must be a number{' or None' if optional else ''}, found {v!r}")
        if self.speaker is not None and not isinstance(self.speaker, str):
            raise ParameterError(f"speaker must be a speaker's name (str) or None, found {self.speaker!r}")
        if self.passes is not None and (not isinstance(self.passes, (int, np.integer)) or isinstance(self.passes, bool)
                                        or not 0 <= self.passes <= 32):
            raise ParameterError(f"passes must be an integer in [0, 32] (unset: the voice's own), found {self.passes!r}")
        if self.postfilter is not None and not isinstance(self.postfilter, bool):
            raise ParameterError(f"postfilter must be True, False or None, found {self.postfilter!r}")
        if not SPEED_RANGE[0] <= self.speed <= SPEED_RANGE[1]:
            raise ParameterError(f"speed {self.speed} is outside [0.25, 4.0]")
        if not VOLUME_RANGE[0] <= self.volume <= VOLUME_RANGE[1]:
            raise ParameterError(f"volume {self.volume} is outside [0, 4]")
        if self.temperature is not None and not TEMPERATURE_RANGE[0] <= self.temperature <= TEMPERATURE_RANGE[1]:
            raise ParameterError(f"temperature {self.temperature} is outside [0.05, 2.0]")
        if self.pause_s is not None and not PAUSE_RANGE[0] <= self.pause_s <= PAUSE_RANGE[1]:
            raise ParameterError(f"pause_s {self.pause_s} is outside [0, 5] seconds")
        for name, (lo, hi) in (("pitch", PROSODY_LIMITS[1]), ("pitch_range", PROSODY_LIMITS[2])):
            v = getattr(self, name)
            if v is not None and not lo <= v <= hi:  # NaN fails too
                raise ParameterError(f"{name} {v} is outside [{lo:g}, {hi:g}], the range the voice was trained on")

    @property
    def prosody(self) -> tuple[float, float, float] | None:
        """(rate, pitch, pitch range) for the acoustic model, or None when neither is set.

        The rate stays espeak-ng's default: ``speed`` scales the durations instead."""
        if self.pitch is None and self.pitch_range is None:
            return None
        return (PROSODY_DEFAULT[0], PROSODY_DEFAULT[1] if self.pitch is None else float(self.pitch),
                PROSODY_DEFAULT[2] if self.pitch_range is None else float(self.pitch_range))


def scaled_speed(speed: float, factor: float) -> float:
    """A request's speed times an SSML piece's rate, kept in :data:`SPEED_RANGE`."""
    return speed if factor == 1.0 else min(max(speed * factor, SPEED_RANGE[0]), SPEED_RANGE[1])
