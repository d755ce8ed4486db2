"""Live controls of a stream: :class:`StreamControl` (speed, volume, pause, stop; a caller may change
them while the stream runs) and :class:`Live`, a request's view of one."""

from __future__ import annotations

import threading

from wavern.engine.chunk import PAUSE_RANGE, SPEED_RANGE, VOLUME_RANGE, SpeakConfig, scaled_speed
from wavern.errors import ParameterError

__all__ = ["StreamControl", "Live"]


def _checked(name: str, value: float | None, lo: float, hi: float) -> float | None:
    """``value`` as a float in [lo, hi] (SpeakConfig's range), or None; else ParameterError (NaN too)."""
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a number, found {value!r}") from None
    if not lo <= v <= hi:
        raise ParameterError(f"{name} {value} is outside [{lo:g}, {hi:g}]")
    return v


class _Checked:
    """An attribute holding None or a float in [lo, hi], checked on every assignment."""

    def __init__(self, lo: float, hi: float):
        self.lo, self.hi = lo, hi

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, obj, owner=None):
        return self if obj is None else obj.__dict__[self.name]

    def __set__(self, obj, value) -> None:
        obj.__dict__[self.name] = _checked(self.name, value, self.lo, self.hi)


class StreamControl:
    """Settings a caller (GUI thread) may change while a stream runs; read before each chunk.

    ``speed`` and ``volume`` None (the default): the request's :class:`SpeakConfig` values (the
    control is not written: one control may serve several requests); ``pause_s`` None: the request's
    or the voice's pause. :meth:`stop` ends every stream given this control until :meth:`reset`. Values are checked
    against :class:`SpeakConfig`'s ranges when set (ParameterError), so a bad one never reaches a chunk.
    """

    speed = _Checked(*SPEED_RANGE)  # SpeakConfig's ranges
    volume = _Checked(*VOLUME_RANGE)
    pause_s = _Checked(*PAUSE_RANGE)

    def __init__(self, *, speed: float | None = None, volume: float | None = None, pause_s: float | None = None):
        self.speed = speed
        self.volume = volume
        self.pause_s = pause_s  # silence after each sentence; None = the request's SpeakConfig/voice default
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def reset(self) -> None:
        """Undo :meth:`stop` for the streams given this control from now on (one that has already
        ended stays ended): a stop button's control may serve the next request."""
        self._stop.clear()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()


class Live:
    """A request's view of its :class:`StreamControl`: the control's values where set, the request's
    :class:`SpeakConfig` speed and volume where None. The caller's control is never written, so one
    control may serve request after request (each then takes its own SpeakConfig's speed)."""

    __slots__ = ("_control", "_speed", "_volume", "_speed_factor", "_volume_factor")

    def __init__(self, control: StreamControl, cfg: SpeakConfig, *, speed_factor: float = 1.0,
                 volume_factor: float = 1.0):
        self._control, self._speed, self._volume = control, cfg.speed, cfg.volume
        # an SSML piece's own rate and volume, on whatever the request or the control sets
        self._speed_factor, self._volume_factor = speed_factor, volume_factor

    @property
    def speed(self) -> float:
        v = self._control.speed
        return scaled_speed(self._speed if v is None else v, self._speed_factor)

    @property
    def volume(self) -> float:
        v = self._control.volume
        v = self._volume if v is None else v
        return v if self._volume_factor == 1.0 else min(v * self._volume_factor, VOLUME_RANGE[1])

    @property
    def pause_s(self) -> float | None:
        return self._control.pause_s

    @property
    def stopped(self) -> bool:
        return self._control.stopped


