"""wavern.engine: the real-time runtime.

``Voice.load(path)`` once, then ``voice.stream(text, SpeakConfig(...))`` yields
:class:`AudioChunk`s. Sinks (:mod:`wavern.engine.sinks`) play or write them. The numba
kernels live in :mod:`wavern.engine.kernels`, driven by :class:`wavern.engine.vocoder.Vocoder`.
Heavy submodules load on first use, so ``import wavern.engine`` stays cheap.
"""

from wavern.engine.chunk import AudioChunk, SpeakConfig

__all__ = ["AudioChunk", "SpeakConfig", "Voice", "StreamControl", "WordTiming"]


def __getattr__(name: str):
    if name in ("Voice", "StreamControl", "WordTiming"):
        from wavern.engine import voice

        return getattr(voice, name)
    raise AttributeError(f"module 'wavern.engine' has no attribute {name!r}")
