"""wavern: streaming neural text-to-speech for the desktop.

The root package holds only what every part shares: the error hierarchy
(:mod:`wavern.errors`) and the audio/feature definitions (:mod:`wavern.dsp`).
Subpackages: ``wavern.conditioning`` (text → mel), ``wavern.vocoder`` (WaveRNN in
torch), ``wavern.engine`` (real-time runtime), ``wavern.training``, ``wavern.app``.
"""

import os as _os

# numba vectorises the vocoder kernels only with its SLP pass on, and reads this switch once,
# when numba is first imported. Setting it here, in the root package every wavern import
# passes through, covers scripts that import numba-using modules (evaluation) before the
# kernels. A user's explicit setting wins.
_os.environ.setdefault("NUMBA_SLP_VECTORIZE", "1")

from wavern.errors import (  # noqa: E402
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
