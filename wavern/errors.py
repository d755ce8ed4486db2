"""One error root for everything wavern raises on purpose.

The CLI turns any :class:`WavernError` into a one-line message and exit code 2.
Messages quote the offending value and the limit, and name the fix.
"""


class WavernError(Exception):
    """Root of all errors raised deliberately by wavern."""


class ParameterError(WavernError, ValueError):
    """A caller passed an unusable value (text, option, file content)."""


class VoiceFileError(WavernError):
    """A voice folder or one of its files is missing, corrupt or mismatched."""


class AudioDeviceError(WavernError):
    """No usable audio output device, or the device failed while playing."""


class CorpusError(WavernError):
    """Building or loading a training corpus failed."""


class DiskFullError(WavernError, OSError):
    """Writing output failed because the disk (or quota) is full."""
