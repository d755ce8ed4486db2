"""wavern: streaming neural text-to-speech for the desktop.

The root package holds only what every part shares: the error hierarchy
(:mod:`wavern.errors`) and the audio/feature definitions (:mod:`wavern.dsp`).
Subpackages: ``wavern.conditioning`` (text → mel), ``wavern.vocoder`` (WaveRNN in
torch), ``wavern.engine`` (real-time runtime), ``wavern.training``, ``wavern.app``.
"""

from wavern.errors import (
    AudioDeviceError,
    CorpusError,
    DiskFullError,
    ParameterError,
    VoiceFileError,
    WavernError,
)

__version__ = "0.1.0"

__all__ = [
    "AudioDeviceError",
    "CorpusError",
    "DiskFullError",
    "ParameterError",
    "VoiceFileError",
    "WavernError",
    "__version__",
]
