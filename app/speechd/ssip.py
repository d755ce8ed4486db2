"""A small SSIP client: what ``spd-say`` does, with the server's events timed as they arrive.

SSIP is Speech Dispatcher's client protocol (its manual, "SSIP"): ``CRLF``-ended lines over a
Unix socket; a reply is lines ``CODE-text`` ended by one ``CODE text``; with notifications on,
events (``7xx``: begin, end, index mark, stopped, paused) arrive between replies whenever they
happen. A reader thread sorts the two and stamps every event with ``time.monotonic()``, so the
benchmark and the end-to-end test can tell when the server began, marked and ended a message.

    with SsipClient(socket_path) as c:
        c.set("OUTPUT_MODULE", "wavern")
        msg = c.speak("Hello there.")
        c.wait_end(msg)
"""

from __future__ import annotations

import dataclasses
import os
import queue
import socket
import threading
import time
from pathlib import Path

from wavern.errors import ParameterError

__all__ = ["SsipClient", "SsipEvent", "SsipError", "default_socket"]


class SsipError(ParameterError):
    """The server refused a command, or did not answer."""


@dataclasses.dataclass(frozen=True)
class SsipEvent:
    """One event: ``kind`` begin, end, stopped, paused, index_mark, cancelled; ``t`` monotonic seconds."""

    kind: str
    message: int
    t: float
    mark: str | None = None


_EVENTS = {"700": "index_mark", "701": "begin", "702": "end", "703": "cancelled", "704": "paused",
           "705": "resumed"}
_FINAL = ("end", "cancelled", "stopped", "paused")


def default_socket() -> Path:
    """Where a user's Speech Dispatcher listens: ``SPEECHD_ADDRESS`` (``unix_socket:PATH``), else
    ``$XDG_RUNTIME_DIR/speech-dispatcher/speechd.sock``."""
    address = os.environ.get("SPEECHD_ADDRESS", "")
    if address.startswith("unix_socket:") and len(address) > len("unix_socket:"):
        return Path(address.split(":", 1)[1])
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    return Path(runtime) / "speech-dispatcher" / "speechd.sock"


class SsipClient:
    """One connection to a Speech Dispatcher server, notifications on.

    Raises:
        SsipError: the socket cannot be reached (no server), or the server refused the setup.
    """

    def __init__(self, path: str | Path | None = None, *, name: str = "wavern:bench:main", timeout_s: float = 10.0):
        self.path = Path(path) if path is not None else default_socket()
        self.timeout_s = timeout_s
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(str(self.path))
        except OSError as e:
            self._sock.close()
            raise SsipError(f"cannot reach Speech Dispatcher at {self.path}: {e.strerror or e}") from None
        self._replies: queue.Queue = queue.Queue()
        self._events: dict[int, list[SsipEvent]] = {}
        self._cond = threading.Condition()
        self._send_lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, name="ssip-reader", daemon=True)
        self._thread.start()
        self.command(f"SET self CLIENT_NAME {name}")
        self.command("SET self NOTIFICATION all on")

    # ---- plumbing
    def _read(self) -> None:
        buf = b""
        lines: list[str] = []
        while True:
            try:
                data = self._sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                self._replies.put(None)
                with self._cond:
                    self._cond.notify_all()
                return
            now = time.monotonic()
            buf += data
            while b"\r\n" in buf:
                raw, buf = buf.split(b"\r\n", 1)
                line = raw.decode("utf-8", "replace")
                lines.append(line)
                if len(line) >= 4 and line[3] == "-":
                    continue
                self._dispatch(lines, now)
                lines = []

    def _dispatch(self, lines: list[str], now: float) -> None:
        code = lines[-1][:3]
        if code in _EVENTS:
            body = [ln[4:] for ln in lines[:-1]]
            try:
                msg = int(body[0])
            except (IndexError, ValueError):
                msg = -1
            kind = _EVENTS[code]
            if code == "703":
                kind = "stopped" if "STOP" in lines[-1] else "cancelled"
            ev = SsipEvent(kind, msg, now, body[2] if kind == "index_mark" and len(body) > 2 else None)
            with self._cond:
                self._events.setdefault(msg, []).append(ev)
                self._cond.notify_all()
        else:
            self._replies.put(lines)

    def _send(self, data: str) -> None:
        with self._send_lock:
            self._sock.sendall(data.encode("utf-8"))

    def _reply(self) -> list[str]:
        try:
            lines = self._replies.get(timeout=self.timeout_s)
        except queue.Empty:
            raise SsipError(f"Speech Dispatcher did not answer within {self.timeout_s:g} s") from None
        if lines is None:
            raise SsipError("Speech Dispatcher closed the connection")
        return lines

    def command(self, line: str) -> list[str]:
        """Send one command line; its reply lines (SsipError for a 3xx/4xx reply)."""
        self._send(line + "\r\n")
        reply = self._reply()
        if reply[-1][:1] not in ("2",):
            raise SsipError(f"{line!r}: {' / '.join(reply)}")
        return reply

    # ---- what spd-say does
    def set(self, name: str, value) -> None:
        self.command(f"SET self {name} {value}")

    def speak(self, text: str) -> int:
        """Queue a message (SSIP SPEAK); its id. ``text`` may hold line breaks."""
        self.command("SPEAK")
        body = "\r\n".join("." + ln if ln.startswith(".") else ln for ln in text.split("\n"))
        self._send(body + "\r\n.\r\n")
        reply = self._reply()
        if not reply[-1].startswith("225"):
            raise SsipError(f"SPEAK: {' / '.join(reply)}")
        return self._id(reply)

    def char(self, c: str) -> int:
        """Queue a character (SSIP CHAR); its message id."""
        return self._id(self.command(f"CHAR {'space' if c == ' ' else c}"))

    def key(self, name: str) -> int:
        """Queue a key name (SSIP KEY, ``shift_a``); its message id."""
        return self._id(self.command(f"KEY {name}"))

    @staticmethod
    def _id(reply: list[str]) -> int:
        try:
            return int(reply[0][4:]) if len(reply) > 1 else -1
        except ValueError:
            return -1

    def stop(self) -> float:
        """STOP self; the monotonic time it was sent."""
        t = time.monotonic()
        self.command("STOP self")
        return t

    def cancel(self) -> float:
        t = time.monotonic()
        self.command("CANCEL self")
        return t

    def list_output_modules(self) -> list[str]:
        return [ln[4:] for ln in self.command("LIST OUTPUT_MODULES")[:-1]]

    def list_voices(self) -> list[tuple[str, ...]]:
        return [tuple(ln[4:].split("\t")) for ln in self.command("LIST SYNTHESIS_VOICES")[:-1]]

    # ---- events
    def events(self, message: int) -> list[SsipEvent]:
        with self._cond:
            return list(self._events.get(message, ()))

    def latest_message(self) -> int | None:
        """The id of the last message any event came for (CHAR and KEY replies carry no id)."""
        with self._cond:
            return max(self._events) if self._events else None

    def wait_for(self, message: int | None, kinds: tuple[str, ...], timeout_s: float | None = None,
                 after: float = 0.0) -> SsipEvent:
        """The first event of one of ``kinds`` for ``message`` (None: any message) stamped after ``after``.

        Raises:
            SsipError: none within the timeout.
        """
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.timeout_s)
        with self._cond:
            while True:
                pool = self._events.get(message, ()) if message is not None else \
                    [e for evs in self._events.values() for e in evs]
                for ev in sorted(pool, key=lambda e: e.t):
                    if ev.kind in kinds and ev.t >= after:
                        return ev
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SsipError(f"no {'/'.join(kinds)} event for message {message} within the timeout")
                self._cond.wait(left)

    def wait_end(self, message: int | None, timeout_s: float | None = None, after: float = 0.0) -> SsipEvent:
        """The message's last event (end, stopped, cancelled or paused)."""
        return self.wait_for(message, _FINAL, timeout_s, after)

    def close(self) -> None:
        try:
            self._send("QUIT\r\n")
        except OSError:
            pass
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join(timeout=2.0)

    def __enter__(self) -> "SsipClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
