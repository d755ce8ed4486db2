"""End to end through the real Speech Dispatcher daemon (Debian's speech-dispatcher; setup.sh --dev).

The daemon runs in single mode in a temporary folder (its configuration, socket, logs and XDG
folders there), loads wavern's module with a tiny voice built in the test, and plays to ALSA's
``null`` device; the module records what it sends (``WavernRecord``). The daemon is stopped by the
fixture whatever happens (its whole process group). Nothing here asserts a time.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from wavern.dsp import float_to_int16
from wavern.engine.chunk import SpeakConfig

pytestmark = pytest.mark.skipif(
    shutil.which("speech-dispatcher") is None or shutil.which("spd-say") is None,
    reason="speech-dispatcher (and spd-say) not installed: apt-get install speech-dispatcher, or ./setup.sh --dev")

LONG = " ".join(["The quick brown fox jumps over the lazy dog."] * 60)


@pytest.fixture(scope="module")
def voice(tiny_voice):
    from wavern.engine.voice import Voice

    v = Voice.load(tiny_voice)
    yield v
    v.close()


@pytest.fixture(scope="module")
def server(tiny_voice, tmp_path_factory):
    from wavern.app.speechd.server import LocalServer

    folder = tmp_path_factory.mktemp("speechd")
    s = LocalServer(folder, voice=str(tiny_voice), record=folder / "rec")
    try:
        s.start()
        yield s
    finally:
        s.stop()


def recorded(server) -> tuple[list[dict], np.ndarray]:
    rec = Path(server.record)
    events = [json.loads(line) for line in (rec / "events.jsonl").read_text().splitlines()]
    audio = np.frombuffer((rec / "audio.s16").read_bytes(), "<i2").astype(np.int16)
    return events, audio


def message(events: list[dict], text_part: str) -> list[dict]:
    """The events of the last message whose text holds ``text_part``, from its arrival to its end."""
    start = max(i for i, e in enumerate(events) if e["event"] == "receive" and text_part in e["text"])
    ident = events[start]["id"]
    out = []
    for e in events[start:]:
        if e["event"] == "audio" or e.get("id") in (ident, None) or e["event"] == "mark":
            out.append(e)
        if e["event"] in ("end", "stop", "pause") and e.get("id") == ident:
            return out
    raise AssertionError(f"message {ident} never ended: {out[-3:]}")


def test_spd_say_speaks_with_wavern_and_the_audio_is_the_voice_s(server, voice):
    r = subprocess.run(["spd-say", "-w", "-o", "wavern", "Hello there. How are you?"], env=server.env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.stderr, server.log_tail())
    events, audio = recorded(server)
    ev = message(events, "Hello there.")
    kinds = [e["event"] for e in ev if e["event"] != "audio"]
    assert kinds == ["receive", "begin", "mark", "end"]  # the server marks every sentence end followed by more
    marks = [e["name"] for e in ev if e["event"] == "mark"]
    assert marks == ["__spd_0"]
    text = ev[0]["text"]  # the document as the server sent it (its marks in it)
    got = audio[ev[1]["sample"]:ev[-1]["sample"]]
    # spd-say's defaults: rate 0 (speed 1), volume 0 (gain 1), the voice's default speaker
    np.testing.assert_array_equal(got, float_to_int16(voice.synthesize(text, SpeakConfig())))
    assert ev[2]["sample"] < ev[-1]["sample"]  # the first mark falls inside the audio, between sentences


def test_index_marks_arrive_at_the_client_in_order_with_their_positions(server, voice):
    from wavern.app.speechd.ssip import SsipClient

    doc = '<speak>One two <mark name="first"/>three four <mark name="second"/>five six.</speak>'
    with SsipClient(server.socket) as c:
        c.set("OUTPUT_MODULE", "wavern")
        c.set("SSML_MODE", "on")
        msg = c.speak(doc)
        end = c.wait_end(msg, timeout_s=120)
        seen = [(e.kind, e.mark) for e in c.events(msg)]
    assert end.kind == "end"
    assert seen[0] == ("begin", None) and seen[-1] == ("end", None)
    assert [m for k, m in seen if k == "index_mark"][:2] == ["first", "second"]
    events, _ = recorded(server)
    ev = message(events, 'name="first"')
    sent = ev[0]["text"]
    words = [w for ch in voice.stream(sent, SpeakConfig()) for w in ch.word_timings]
    begin = ev[1]["sample"]
    for e in ev:
        if e["event"] == "mark" and e["name"] in ("first", "second"):
            at = sent.index(f'name="{e["name"]}"')
            assert e["sample"] - begin == next(w.start_sample for w in words if w.char_start > at)


def test_stop_ends_a_long_message_and_the_next_one_is_spoken(server):
    from wavern.app.speechd.ssip import SsipClient

    with SsipClient(server.socket) as c:
        c.set("OUTPUT_MODULE", "wavern")
        msg = c.speak(LONG)
        c.wait_for(msg, ("begin",), timeout_s=120)
        c.stop()
        assert c.wait_end(msg, timeout_s=60).kind == "cancelled"
        nxt = c.speak("Next.")
        assert c.wait_end(nxt, timeout_s=120).kind == "end"
    events, _ = recorded(server)
    ev = message(events, "The quick brown fox")
    assert ev[-1]["event"] == "stop" and any(e["event"] == "stop_received" for e in ev)


def test_chars_and_keys_through_the_daemon(server):
    for args in (["-c", "x"], ["-k", "shift_a"]):
        r = subprocess.run(["spd-say", "-w", "-o", "wavern", *args], env=server.env, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
    events, _ = recorded(server)
    kinds = [e["kind"] for e in events if e["event"] == "receive"][-2:]
    assert kinds in (["char", "key"], ["text", "key"])  # the server may turn a character into a word


def test_the_daemon_lists_wavern_and_its_voices(server):
    r = subprocess.run(["spd-say", "-O"], env=server.env, capture_output=True, text=True, timeout=60)
    assert "wavern" in r.stdout.split()
    r = subprocess.run(["spd-say", "-o", "wavern", "-L"], env=server.env, capture_output=True, text=True, timeout=60)
    assert "testvoice/en-us" in r.stdout
