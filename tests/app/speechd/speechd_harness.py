"""A stand-in for Speech Dispatcher's server: the module in a thread, on pipes, its output parsed."""

from __future__ import annotations

import os
import queue
import threading

import numpy as np

from wavern.app.speechd.module import ModuleConfig, SpeechdModule
from wavern.app.speechd.protocol import decode_audio

TIMEOUT_S = 60.0  # generous: the machine may be busy; nothing here measures time


class Item:
    """One reply or event as the module wrote it: its lines, its final code, decoded audio (705)."""

    def __init__(self, lines: list[bytes]):
        self.lines = lines
        self.code = lines[-1][:3].decode()
        self.text = [ln.decode("utf-8", "replace") for ln in lines if not ln.startswith(b"705-AUDIO")]
        self.audio = decode_audio(lines).samples if self.code == "705" else None

    @property
    def event(self) -> bool:
        return self.code.startswith("7")

    def __repr__(self) -> str:
        return f"Item({self.text[-1]!r}{', %d samples' % self.audio.size if self.audio is not None else ''})"


class Harness:
    def __init__(self, voice, *, config: ModuleConfig | None = None, server_audio: bool = True, init: bool = True):
        r_in, w_in = os.pipe()
        r_out, w_out = os.pipe()
        self._to = os.fdopen(w_in, "wb", buffering=0)
        self._from = os.fdopen(r_out, "rb")
        self._module_in = os.fdopen(r_in, "rb")
        self._module_out = os.fdopen(w_out, "wb")
        self.module = SpeechdModule(self._module_in, self._module_out, config=config or ModuleConfig(), voice=voice)
        self.items: queue.Queue = queue.Queue()
        self.exit_code = None
        self._run = threading.Thread(target=self._serve, daemon=True)
        self._run.start()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if init:
            self.send("INIT")
            assert self.reply().code == "299"
            if server_audio:
                self.send("AUDIO", "audio_output_method=server", ".")
                assert self.reply().code == "207"
                assert self.reply().code == "203"

    def _serve(self) -> None:
        try:
            self.exit_code = self.module.run()
        finally:
            self._module_out.close()

    def _read(self) -> None:
        lines: list[bytes] = []
        while True:
            line = self._from.readline()
            if not line:
                self.items.put(None)
                return
            line = line[:-1]
            lines.append(line)
            if len(line) >= 4 and line[3:4] == b"-":
                continue
            self.items.put(Item(lines))
            lines = []

    def send(self, *lines: str | bytes) -> None:
        for ln in lines:
            self._to.write((ln if isinstance(ln, bytes) else ln.encode()) + b"\n")

    def next(self, timeout_s: float = TIMEOUT_S) -> Item | None:
        return self.items.get(timeout=timeout_s)

    def reply(self) -> Item:
        """The next item that is not an event (events of a message still ending are skipped)."""
        while True:
            item = self.next()
            assert item is not None, "the module closed its output"
            if not item.event:
                return item

    def until(self, *codes: str) -> list[Item]:
        """Items up to and including the first whose code is one of ``codes``."""
        out = []
        while True:
            item = self.next()
            assert item is not None, f"the module closed its output before {codes}: {out}"
            out.append(item)
            if item.code in codes:
                return out

    def speak(self, text: str, command: str = "SPEAK") -> Item:
        self.send(command, *[("." + ln if ln.startswith(".") else ln) for ln in text.split("\n")], ".")
        assert self.reply().code == "202"
        return self.reply()

    def close(self) -> int | None:
        try:
            self.send("QUIT")
        except (BrokenPipeError, ValueError):
            pass
        self._run.join(TIMEOUT_S)
        self._to.close()
        self._reader.join(TIMEOUT_S)
        self._from.close()
        self._module_in.close()
        return self.exit_code


def audio_of(items: list[Item]) -> np.ndarray:
    parts = [i.audio for i in items if i.audio is not None]
    return np.concatenate(parts) if parts else np.zeros(0, np.int16)


def codes(items: list[Item]) -> list[str]:
    return [i.code for i in items]
