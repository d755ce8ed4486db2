"""wavern.engine: the real-time runtime.

``Voice.load(path)`` once, then ``voice.stream(text, SpeakConfig(...))`` yields
:class:`AudioChunk`s. Sinks (:mod:`wavern.engine.sinks`) play or write them; offline rendering
of many texts is :func:`render_utterances` (:mod:`wavern.engine.batch`). The numba kernels live
in :mod:`wavern.engine.kernels`, driven by :class:`wavern.engine.vocoder.Vocoder`. Heavy
submodules load on first use, so ``import wavern.engine`` stays cheap.
"""

from wavern.engine.chunk import AudioChunk, SpeakConfig

# name -> submodule that defines it, imported on first use
_LAZY = {
    "Voice": "voice", "StreamControl": "voice", "WordTiming": "voice",
    "FileSink": "sinks", "NullSink": "sinks", "DeviceSink": "sinks", "play": "sinks",
    "list_output_devices": "sinks",
    "UtteranceRequest": "batch", "RenderedUtterance": "batch", "render_utterance": "batch",
    "render_utterances": "batch",
}

__all__ = ["AudioChunk", "SpeakConfig", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"wavern.engine.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'wavern.engine' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
