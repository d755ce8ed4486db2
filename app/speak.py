"""`wavern say` and `wavern vocode`: thin shells over ``Voice.stream`` and the sinks."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from wavern.errors import AudioDeviceError, ParameterError
from wavern.fileio import check_output_file

__all__ = ["read_text_arg", "decode_text", "say", "vocode_file", "FALLBACK_WAV"]

log = logging.getLogger(__name__)

#: Where `wavern say` writes when there is no audio device and no --out.
FALLBACK_WAV = Path("hello.wav")


def check_output(out: str) -> Path:
    """``--out``/``-o`` as a file path, refused before any synthesis when it cannot be written:
    a folder, a missing folder, or a type other than WAV, FLAC or OGG."""
    from wavern.engine.audio_io import format_for

    p = check_output_file("output", out)
    format_for(p)
    return p


def decode_text(data: bytes, where: str) -> str:
    """Text from bytes: UTF-8 (a BOM dropped); other text as Windows-1252 with a warning; binary refused."""
    if b"\x00" in data[:65536]:
        raise ParameterError(f"{where} looks like a binary file (it has NUL bytes), not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        log.warning("%s is not UTF-8 (byte %d: 0x%02x); reading it as Windows-1252", where, e.start,
                    data[e.start])
        return data.decode("cp1252", errors="replace")


def read_text_arg(text: str | None, file: str | None) -> str:
    """The text to speak from the positional argument or ``--file`` (``-`` = stdin)."""
    if text is not None and file is not None:
        raise ParameterError("give the text either as an argument or with --file, not both")
    if file is not None:
        if file == "-":
            if sys.stdin is None:
                raise ParameterError("--file -: standard input is closed")
            return decode_text(sys.stdin.buffer.read(), "stdin")
        p = Path(file)
        if p.is_dir():
            raise ParameterError(f"--file {file} is a folder")
        try:  # a pipe or a process substitution (<(...)) reads too, not only a regular file
            data = p.read_bytes()
        except FileNotFoundError:
            raise ParameterError(f"--file {file}: no such file") from None
        except OSError as e:
            raise ParameterError(f"--file {file}: cannot read it ({e.strerror or e})") from None
        return decode_text(data, f"--file {file}")
    if text is None:
        if sys.stdin is not None and not sys.stdin.isatty():
            return decode_text(sys.stdin.buffer.read(), "stdin")
        raise ParameterError("nothing to say: give TEXT, --file PATH, or pipe text on stdin")
    return text


def announce_first_compile(seconds: str = "20-40") -> bool:
    """Say so when the engine's kernels are not compiled yet (a fresh install): the first request
    waits ``seconds`` for numba (20-40 s to speak, 50-120 s to render in batches: faster CPUs the
    first figure), silent otherwise. True when it said so."""
    from wavern.engine.kernels import cache_status

    where, n = cache_status(at_most=1)
    if where is not None and n == 0:
        print(f"wavern: compiling the engine's kernels (once, about {seconds} s; cached after)", file=sys.stderr)
        return True
    return False


def say(text: str, *, out: str | None, voice: str | None, speed: float = 1.0, volume: float = 1.0,
        temperature: float | None = None, device: str | None = None, postfilter: bool | None = None,
        pitch: float | None = None, pitch_range: float | None = None, speaker: str | None = None,
        passes: int | None = None, lexicon: str | None = None, ssml: bool | None = None) -> int:
    """Speak ``text``: to the sound card, to a file, or as raw s16le to stdout. ``lexicon``: a
    lexicon.json (default: the user's, :func:`wavern.app.voices.user_lexicon`, when there is one).
    ``ssml``: the text is SSML (None: where it begins with ``<speak``; False: never)."""
    from wavern.app.voices import load_lexicon, resolve_voice

    path = resolve_voice(voice)
    lex = load_lexicon(lexicon)
    if out is not None and out != "-":
        check_output(out)
    from wavern.engine import SpeakConfig, Voice
    from wavern.engine.sinks import DeviceSink, FileSink, RawStdoutSink, play

    cfg = SpeakConfig(speed=speed, volume=volume, temperature=temperature, postfilter=postfilter, pitch=pitch,
                      pitch_range=pitch_range, speaker=speaker, passes=passes)  # bad settings fail before loading
    compiling = announce_first_compile()
    t0 = time.perf_counter()
    v = Voice.load(path)
    v.lexicon = lex
    if compiling:  # compile before the request, so that the RTF it reports is the voice's, not numba's
        v.warmup()
        print(f"wavern: compiled in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    chunks = v.stream(text, cfg, ssml=ssml)  # checks the text (ParameterError for nothing to say) before a file is opened
    if out == "-":
        if sys.stdout is None:
            raise ParameterError("--out -: standard output is closed")
        sink = RawStdoutSink(sys.stdout.buffer)
    elif out is not None:
        sink = FileSink(Path(out), sample_rate=v.sample_rate)
    else:
        try:
            sink = DeviceSink(sample_rate=v.sample_rate, device=device)
        except AudioDeviceError as e:
            if device is not None:  # the device asked for by name: its problem, not a file nobody asked for
                raise AudioDeviceError(f"--device {device}: {e}") from None
            replacing = " (replacing the one there)" if FALLBACK_WAV.exists() else ""
            print(f"wavern: no audio device ({e}); writing {FALLBACK_WAV}{replacing} instead; --out names "
                  f"another file", file=sys.stderr)
            sink = FileSink(FALLBACK_WAV, sample_rate=v.sample_rate)
    stats = play(chunks, sink)
    if isinstance(sink, FileSink):
        print(f"wrote {sink.path} ({stats.audio_seconds:.2f} s of audio, RTF {stats.rtf:.3f})", file=sys.stderr)
    return 0


def vocode_file(inp: str, outp: str, *, voice: str | None, postfilter: bool = True) -> int:
    """Copy synthesis: read a WAV, compute its log-mel, render it with the voice's vocoder (and
    its post-filter unless ``postfilter=False``)."""
    from wavern.app.voices import resolve_voice
    from wavern.engine import Voice
    from wavern.engine.audio_io import read_audio, write_audio

    out = check_output(outp)  # before minutes of vocoding, not after
    v = Voice.load(resolve_voice(voice))
    audio = read_audio(Path(inp), sample_rate=v.sample_rate)
    samples = v.vocode(audio, postfilter=postfilter)
    write_audio(out, samples, v.sample_rate)
    print(f"wrote {outp} ({len(samples) / v.sample_rate:.2f} s)", file=sys.stderr)
    return 0
