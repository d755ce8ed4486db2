"""Speech Dispatcher's output-module protocol: reading commands, writing replies, events and audio.

The server starts a module as ``sd_NAME CONFIGFILE`` and talks to it over the module's standard
input and output, one ``LF``-terminated line at a time (an SSIP dialect, see Speech Dispatcher's
manual, "Communication Protocol for Output Modules"):

- Commands: ``INIT``, ``AUDIO``, ``SET``, ``LOGLEVEL`` (each followed by ``name=value`` lines and a
  lone ``.``), ``SPEAK`` / ``CHAR`` / ``KEY`` / ``SOUND_ICON`` (followed by the text and a lone
  ``.``; a text line that begins with ``.`` has one more ``.`` in front), ``STOP`` and ``PAUSE``
  (no reply, ever), ``LIST VOICES [language [variant]]``, ``DEBUG ON file`` / ``DEBUG OFF``, ``QUIT``.
- Replies: ``2xx`` ok, ``3xx`` the server's error, ``4xx`` the module's. A reply may span lines:
  every line but the last has ``-`` after the code, the last a space (the server reads up to it).
- Events, written whenever the module has them, but never between a command and its reply:
  ``700`` index mark (``700-name`` then ``700 INDEX MARK``), ``701 BEGIN``, ``702 END``,
  ``703 STOP``, ``704 PAUSE``, ``705`` audio for the server to play, ``706`` a sound icon.

Everything here is pure (bytes in, bytes out), so tests check it without a module running.
"""

from __future__ import annotations

import dataclasses
import re
from typing import BinaryIO

import numpy as np

__all__ = ["Reply", "read_line", "read_block", "encode_audio", "decode_audio", "event", "mark_event",
           "icon_event", "parse_assignment", "BlockTooLong", "MAX_LINE_BYTES", "MAX_BLOCK_BYTES",
           "TEXT_COMMANDS"]

#: Longest line read; a longer one is read to its end and refused (a bound on memory, not on use:
#: Speech Dispatcher sends a message's text as the client wrote its lines).
MAX_LINE_BYTES = 1 << 20
#: Longest text or settings block (the lines between a command and its ``.``), bytes.
MAX_BLOCK_BYTES = 8 << 20

#: Commands followed by a text block, with the kind of message each sends.
TEXT_COMMANDS = {"SPEAK": "text", "CHAR": "char", "KEY": "key", "SOUND_ICON": "icon"}


class Reply:
    """The module's reply lines (code and wording as Speech Dispatcher's own modules write them)."""

    LOADED = "299 OK LOADED SUCCESSFULLY"
    CANT_INIT = "399 ERR CANT INIT MODULE"
    RECEIVING_MESSAGE = "202 OK RECEIVING MESSAGE"
    SPEAKING = "200 OK SPEAKING"
    CANT_SPEAK = "301 ERROR CANT SPEAK"
    RECEIVING_SETTINGS = "203 OK RECEIVING SETTINGS"
    SETTINGS_RECEIVED = "203 OK SETTINGS RECEIVED"
    RECEIVING_AUDIO = "207 OK RECEIVING AUDIO SETTINGS"
    AUDIO_INITIALIZED = "203 OK AUDIO INITIALIZED"
    RECEIVING_LOGLEVEL = "207 OK RECEIVING LOGLEVEL SETTINGS"
    LOGLEVEL_SET = "203 OK LOGLEVEL SET"
    VOICE_LIST_SENT = "200 OK VOICE LIST SENT"
    CANT_LIST_VOICES = "304 CANT LIST VOICES"
    BAD_SYNTAX = "302 ERROR BAD SYNTAX"
    BAD_PARAM = "303 ERROR INVALID PARAMETER OR VALUE"
    MORE_THAN_ONE_LINE = "305 DATA MORE THAN ONE LINE"
    UNKNOWN_COMMAND = "300 ERR UNKNOWN COMMAND"
    MODULE_ERROR = "300 MODULE ERROR"
    CANT_OPEN_DEBUG = "303 CANT OPEN CUSTOM DEBUG FILE"
    QUIT = "210 OK QUIT"

    @staticmethod
    def with_reasons(final: str, reasons: list[str] | tuple[str, ...]) -> str:
        """``final`` preceded by one ``CODE-reason`` line per reason (a multi-line reply)."""
        code = final[:3]
        lines = [f"{code}-{_one_line(r)}" for r in reasons]
        return "\n".join([*lines, final])


def _one_line(text: str) -> str:
    """``text`` fit for one protocol line: no line breaks or other control characters."""
    return "".join(c if c.isprintable() else " " for c in str(text)).strip() or "(no detail)"


class BlockTooLong(Exception):
    """A line or a block went over its limit; it was read to its end (the stream stays in step)."""


def read_line(stream: BinaryIO, *, limit: int = MAX_LINE_BYTES) -> bytes | None:
    """The next line without its ``\\n`` (and a ``\\r`` before it); None at the end of input.

    A line longer than ``limit`` is read to its end and raises :class:`BlockTooLong`. A last
    line cut off by the end of input (no ``\\n``) is returned as it is.
    """
    line = stream.readline(limit + 1)
    if not line:
        return None
    if len(line) > limit and not line.endswith(b"\n"):
        while True:  # skip the rest of the line, so the next read starts on a new one
            more = stream.readline(limit)
            if not more or more.endswith(b"\n"):
                break
        raise BlockTooLong(f"a line longer than {limit} bytes")
    line = line[:-1] if line.endswith(b"\n") else line
    return line[:-1] if line.endswith(b"\r") else line


def read_block(stream: BinaryIO, *, limit: int = MAX_BLOCK_BYTES) -> list[bytes] | None:
    """The lines up to a lone ``.``, one leading ``.`` taken off each (dot-stuffing); None when
    the input ends first. Over ``limit`` bytes in all: read to its ``.``, then :class:`BlockTooLong`."""
    lines: list[bytes] = []
    size = 0
    too_long: str | None = None
    while True:
        try:
            line = read_line(stream)
        except BlockTooLong as e:
            too_long = str(e)
            continue
        if line is None:
            return None
        if line == b".":
            break
        if line.startswith(b"."):
            line = line[1:]
        size += len(line) + 1
        if size > limit:
            too_long = too_long or f"more than {limit} bytes"
            continue
        lines.append(line)
    if too_long:
        raise BlockTooLong(too_long)
    return lines


_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)")


def parse_assignment(line: str) -> tuple[str, str] | None:
    """``name=value`` as ``(name, value)``; None where the line is not of that form."""
    m = _ASSIGNMENT.fullmatch(line.strip())
    return (m.group(1), m.group(2).strip()) if m else None


def event(code: int, word: str) -> bytes:
    """A one-line event such as ``701 BEGIN``."""
    return f"{code} {word}\n".encode()


def mark_event(name: str) -> bytes:
    """``700`` index mark event for the mark ``name``."""
    return f"700-{_one_line(name)}\n700 INDEX MARK\n".encode("utf-8", "replace")


def icon_event(name: str) -> bytes:
    """``706``: ask the server to play its sound icon ``name``."""
    return f"706-{_one_line(name)}\n706 ICON\n".encode("utf-8", "replace")


_ESC = 0x7D


def encode_audio(samples: np.ndarray, sample_rate: int) -> bytes:
    """A ``705`` event carrying ``samples`` (int16 mono) for the server to play.

    Header lines give the format (16 bits, one channel, the rate, the count, little-endian); the
    data follows ``705-AUDIO`` and a NUL byte, escaped HDLC-style so it holds no ``\\n``: every
    ``\\n`` or ``0x7D`` byte becomes ``0x7D`` followed by the byte with its bit 5 flipped.
    """
    x = np.ascontiguousarray(samples, dtype="<i2")
    data = x.tobytes()
    # (escape the escape byte first, or the escapes of newlines would be escaped again)
    data = data.replace(b"\x7d", b"\x7d\x5d").replace(b"\n", b"\x7d\x2a")
    head = (f"705-bits=16\n705-num_channels=1\n705-sample_rate={int(sample_rate)}\n"
            f"705-num_samples={x.size}\n705-big_endian=0\n705-AUDIO\x00").encode()
    return head + data + b"\n705 AUDIO\n"


@dataclasses.dataclass(frozen=True)
class DecodedAudio:
    samples: np.ndarray  # int16
    sample_rate: int


def decode_audio(lines: list[bytes]) -> DecodedAudio:
    """The audio of a ``705`` event, given its lines as read (without their ``\\n``), the last
    being ``705 AUDIO``: for tests and tools that stand in for the server."""
    params: dict[str, int] = {}
    data = None
    for line in lines[:-1]:
        if line.startswith(b"705-AUDIO\x00"):
            data = line[len(b"705-AUDIO\x00"):]
        elif line.startswith(b"705-") and b"=" in line:
            k, v = line[4:].split(b"=", 1)
            params[k.decode()] = int(v)
    if data is None or lines[-1] != b"705 AUDIO":
        raise ValueError(f"not a 705 audio event: {lines[:1]!r}...")
    out = bytearray()
    i = 0
    while i < len(data):
        b = data[i]
        if b == _ESC:
            out.append(data[i + 1] ^ 0x20)
            i += 2
        else:
            out.append(b)
            i += 1
    dtype = ">i2" if params.get("big_endian") else "<i2"
    samples = np.frombuffer(bytes(out), dtype=dtype).astype(np.int16)
    if samples.size != params.get("num_samples", samples.size) or params.get("bits", 16) != 16:
        raise ValueError(f"705 audio: {samples.size} samples of {params}")
    return DecodedAudio(samples, params.get("sample_rate", 0))
