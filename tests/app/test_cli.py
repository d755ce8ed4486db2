"""The CLI shell: every subcommand has accurate help, errors are one line with exit code 2."""

import subprocess
import sys
from pathlib import Path

import pytest

from wavern.app.cli import EXIT_USER_ERROR, build_parser, main

SUBCOMMANDS = ["say", "render", "bench", "gui", "voices", "corpus", "train", "vocode", "doctor", "speechd"]


def test_every_subcommand_is_registered():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(SUBCOMMANDS) <= set(sub.choices)


@pytest.mark.parametrize("cmd", SUBCOMMANDS)
def test_help_exits_zero(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        main([cmd, "--help"])
    assert e.value.code == 0
    assert cmd in capsys.readouterr().out


def test_bench_options_are_the_same_in_the_cli_and_the_module():
    import argparse

    from wavern.app.bench_options import add_bench_arguments

    ap = argparse.ArgumentParser()
    add_bench_arguments(ap)
    module_opts = {o for a in ap._actions for o in a.option_strings} - {"-h", "--help"}
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["bench"]
    cli_opts = {o for a in sub._actions for o in a.option_strings} - {"-h", "--help"}
    assert "--realtime" in cli_opts and cli_opts == module_opts


def test_user_error_is_one_line_exit_2(capsys, tmp_path):
    code = main(["say", "--file", str(tmp_path / "missing.txt")])
    err = capsys.readouterr().err
    assert code == EXIT_USER_ERROR
    assert err.startswith("wavern: error:") and err.count("\n") == 1 and "missing.txt" in err


def test_say_nothing_leaves_no_file_behind(tiny_voice, tmp_path, capsys, monkeypatch):
    """Empty or blank text is refused before any output is opened: no file, no temp file, whether
    --out names one or the missing sound card makes it write the fallback WAV."""
    from wavern.app import speak
    from wavern.engine import sinks
    from wavern.errors import AudioDeviceError

    def no_device(*args, **kwargs):
        raise AudioDeviceError("no audio output device found")

    monkeypatch.setattr(sinks, "DeviceSink", no_device)
    monkeypatch.setattr(speak, "FALLBACK_WAV", tmp_path / "hello.wav")
    for args in (["say", ""], ["say", "   \n\t "], ["say", "", "--out", str(tmp_path / "x.wav")],
                 ["say", " ", "--out", str(tmp_path / "x.flac")]):
        assert main([*args, "--voice", str(tiny_voice)]) == 2
        assert "nothing to say" in capsys.readouterr().err
        assert list(tmp_path.iterdir()) == [], args
    assert main(["say", "Something.", "--voice", str(tiny_voice)]) == 0  # the fallback itself still writes
    assert [p.name for p in tmp_path.iterdir()] == ["hello.wav"]
    assert "writing" in capsys.readouterr().err
    assert main(["say", "Again.", "--voice", str(tiny_voice)]) == 0
    assert "(replacing the one there)" in capsys.readouterr().err  # not silently
    # a device asked for by name that cannot be opened is an error, not a file nobody asked for
    before = (tmp_path / "hello.wav").read_bytes()
    assert main(["say", "Device test.", "--voice", str(tiny_voice), "--device", "foo"]) == 2
    assert "--device foo: no audio output device found" in capsys.readouterr().err
    assert (tmp_path / "hello.wav").read_bytes() == before


def test_bad_voice_folder_is_clear_error(capsys, tmp_path):
    code = main(["say", "hi", "--voice", str(tmp_path), "--out", str(tmp_path / "x.wav")])
    assert code == EXIT_USER_ERROR
    assert "voice.json" in capsys.readouterr().err


def test_train_unknown_setting_is_refused(capsys):
    from wavern.app.train_cli import config_from_args
    import argparse
    import dataclasses

    @dataclasses.dataclass
    class Cfg:
        steps: int = 1

    args = argparse.Namespace(overrides=["nope=1"], resume=False)
    from wavern.errors import ParameterError
    with pytest.raises(ParameterError, match="unknown setting 'nope'"):
        config_from_args(Cfg, args)
    args = argparse.Namespace(overrides=["steps=5"], resume=False, steps=None)
    assert config_from_args(Cfg, args).steps == 5


def test_train_catches_a_missing_setting_and_a_word_for_a_number(capsys):
    assert main(["train", "acoustic", "--run-dir", "/nonexistent/run"]) == EXIT_USER_ERROR
    assert "missing required setting(s) corpus_dir: give --corpus" in capsys.readouterr().err
    assert main(["train", "vocoder", "--corpus", "c", "--set", "steps=abc"]) == EXIT_USER_ERROR
    assert "--set steps: expected int" in capsys.readouterr().err
    assert main(["train", "vocoder", "--corpus", "c", "--resume", "--fresh"]) == EXIT_USER_ERROR
    assert "contradict" in capsys.readouterr().err


def test_train_fresh_turns_a_default_resume_off():
    import argparse
    import dataclasses

    from wavern.app.train_cli import config_from_args

    @dataclasses.dataclass
    class Cfg:
        corpus_dir: str
        resume: bool = True
        lr: float = 0.001

    base = dict(overrides=[], corpus_dir="c", run_dir=None, steps=None, batch_size=None, lr=None, optimizer=None,
                device=None, threads=None, seed=None)
    assert config_from_args(Cfg, argparse.Namespace(**base, resume=False, fresh=True)).resume is False
    assert config_from_args(Cfg, argparse.Namespace(**base, resume=False, fresh=False)).resume is True
    cfg = config_from_args(Cfg, argparse.Namespace(**{**base, "overrides": ["lr=1"]}, resume=False, fresh=False))
    assert cfg.lr == 1  # an int where a float is expected is fine


def test_outputs_that_cannot_be_written_are_refused_before_synthesis(tiny_voice, tmp_path, capsys, monkeypatch):
    from wavern.engine.voice import Voice

    def no_load(*args, **kwargs):
        raise AssertionError("the voice was loaded before the output was checked")

    monkeypatch.setattr(Voice, "load", no_load)
    (tmp_path / "d.wav").mkdir()
    wav = tmp_path / "in.wav"
    wav.write_bytes(b"")
    for args, message in ((["say", "Hi.", "--out", str(tmp_path / "d.wav")], "is a folder"),
                          (["say", "Hi.", "--out", str(tmp_path / "missing" / "x.wav")], "does not exist"),
                          (["say", "Hi.", "--out", str(tmp_path / "x.mp3")], "unsupported audio file type"),
                          (["vocode", str(wav), "-o", str(tmp_path / "missing" / "x.wav")], "does not exist"),
                          (["vocode", str(wav), "-o", str(tmp_path / "x.mp3")], "unsupported audio file type")):
        assert main([*args, "--voice", str(tiny_voice)]) == EXIT_USER_ERROR, args
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.wav", "in.wav"]


def test_text_files_not_in_utf8_are_read_with_a_warning_and_binary_refused(tmp_path, caplog):
    from wavern.app.speak import read_text_arg
    from wavern.errors import ParameterError

    (tmp_path / "latin.txt").write_bytes("Caf\u00e9 cr\u00e8me \u20ac5.".encode("cp1252"))
    (tmp_path / "bom.txt").write_bytes("\ufeffHello.".encode("utf-8"))
    (tmp_path / "bin.dat").write_bytes(bytes(range(256)) * 4)
    with caplog.at_level("WARNING"):
        assert read_text_arg(None, str(tmp_path / "latin.txt")) == "Caf\u00e9 cr\u00e8me \u20ac5."
    assert "not UTF-8 (byte 3: 0xe9)" in caplog.text
    assert read_text_arg(None, str(tmp_path / "bom.txt")) == "Hello."
    with pytest.raises(ParameterError, match="binary"):
        read_text_arg(None, str(tmp_path / "bin.dat"))


def test_a_voice_name_finds_the_installed_voice_even_beside_a_folder_of_that_name(tiny_voice, tmp_path,
                                                                                monkeypatch):
    import shutil

    from wavern.app.voices import resolve_voice

    shutil.copytree(tiny_voice, tmp_path / "voices" / "mine")
    monkeypatch.setenv("WAVERN_VOICES", str(tmp_path / "voices"))
    (tmp_path / "work" / "mine").mkdir(parents=True)  # a folder of that name here, with no voice in it
    monkeypatch.chdir(tmp_path / "work")
    assert resolve_voice("mine") == tmp_path / "voices" / "mine"


def test_doctor_runs_as_a_program():
    out = subprocess.run([sys.executable, "-m", "wavern.app.cli", "doctor"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    for name in ["python", "libraries", "cpu", "audio", "espeak-ng", "voices", "numba cache"]:
        assert name in out.stdout


def test_say_no_postfilter_is_the_vocoder_alone(tiny_voice, tmp_path):
    import json
    import shutil

    import numpy as np
    import soundfile as sf

    pf = tmp_path / "pfvoice"
    shutil.copytree(tiny_voice, pf)
    meta = json.loads((pf / "voice.json").read_text())
    meta["inference"]["postfilter"] = {"gamma_num": 0.8, "gamma_den": 0.95, "tilt": 0.3, "order": 16}
    (pf / "voice.json").write_text(json.dumps(meta))
    out = {}
    for name, voice, extra in (("plain", tiny_voice, []), ("on", pf, []), ("off", pf, ["--no-postfilter"])):
        path = tmp_path / f"{name}.wav"
        assert main(["say", "Hello there.", "--voice", str(voice), "--out", str(path), *extra]) == 0
        out[name] = sf.read(path, dtype="int16")[0]
    assert np.array_equal(out["off"], out["plain"])
    assert out["on"].shape == out["plain"].shape and not np.array_equal(out["on"], out["plain"])
    for name, extra in (("p0", ["--passes", "0"]), ("p2", ["--passes", "2"])):  # mel matching per request
        path = tmp_path / f"{name}.wav"
        assert main(["say", "Hello there.", "--voice", str(pf), "--out", str(path), *extra]) == 0
        out[name] = sf.read(path, dtype="int16")[0]
    assert np.array_equal(out["p0"], out["on"])  # the voice has no mel matching: 0 passes changes nothing
    assert out["p2"].shape == out["on"].shape and not np.array_equal(out["p2"], out["on"])


def test_vocode_writes_the_voices_copy_synthesis_with_and_without_post_processing(tiny_voice, tmp_path, capsys):
    import json
    import shutil

    import numpy as np
    import soundfile as sf

    from wavern.engine import Voice

    pf = tmp_path / "pfvoice"
    shutil.copytree(tiny_voice, pf)
    meta = json.loads((pf / "voice.json").read_text())
    meta["inference"]["postfilter"] = {"gamma_num": 0.8, "gamma_den": 0.95, "tilt": 0.3, "order": 16}
    (pf / "voice.json").write_text(json.dumps(meta))
    t = np.arange(int(0.3 * 22050)) / 22050
    src = (0.3 * np.sin(2 * np.pi * 180 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(np.float32)
    sf.write(tmp_path / "in.wav", src, 22050, subtype="PCM_16")
    v = Voice.load(pf)
    try:
        x = sf.read(tmp_path / "in.wav", dtype="float32")[0]
        for name, extra, post in (("on", [], True), ("off", ["--no-postfilter"], False)):
            out = tmp_path / f"{name}.wav"
            assert main(["vocode", str(tmp_path / "in.wav"), "-o", str(out), "--voice", str(pf), *extra]) == 0
            assert f"wrote {out} (0.30 s)" in capsys.readouterr().err
            got, sr = sf.read(out, dtype="int16")
            ref = np.clip(np.round(v.vocode(x, postfilter=post) * 32768.0), -32768, 32767).astype(np.int16)
            assert sr == 22050 and got.shape == (src.size,) and np.abs(got.astype(int) - ref).max() <= 1
            assert np.abs(got).max() > 0
    finally:
        v.close()
    on, off = (sf.read(tmp_path / f"{n}.wav", dtype="int16")[0] for n in ("on", "off"))
    assert not np.array_equal(on, off)  # the post-filter was applied, then not


def test_say_pitch_flags(tiny_voice, tiny_prosody_voice, tmp_path, capsys):
    import numpy as np
    import soundfile as sf

    from wavern.engine import SpeakConfig, Voice

    out = tmp_path / "high.wav"
    assert main(["say", "Higher now.", "--voice", str(tiny_prosody_voice), "--out", str(out), "--pitch", "70",
                 "--pitch-range", "25"]) == 0
    v = Voice.load(tiny_prosody_voice)
    try:  # the file holds the stream of that request (seed 0)
        ref = np.concatenate([c.int16() for c in v.stream("Higher now.", SpeakConfig(pitch=70, pitch_range=25))])
    finally:
        v.close()
    np.testing.assert_array_equal(sf.read(out, dtype="int16")[0], ref)
    capsys.readouterr()
    for voice, flags, what in ((tiny_prosody_voice, ["--pitch", "99"], "pitch 99.0 is outside [25, 75]"),
                               (tiny_voice, ["--pitch-range", "30"], "cannot change its pitch")):
        code = main(["say", "No.", "--voice", str(voice), "--out", str(tmp_path / "x.wav"), *flags])
        err = capsys.readouterr().err
        assert code == EXIT_USER_ERROR and err.startswith("wavern: error:") and what in err and err.count("\n") == 1


def test_say_speaker_flag(tiny_voice, tmp_path, capsys):
    import numpy as np
    import soundfile as sf

    from wavern.engine import SpeakConfig, Voice

    v = Voice.load(tiny_voice)
    try:
        name = v.speakers[-1]
        ref = np.concatenate([c.int16() for c in v.stream("Who speaks?", SpeakConfig(speaker=name))])
    finally:
        v.close()
    out = tmp_path / "s.wav"
    assert main(["say", "Who speaks?", "--voice", str(tiny_voice), "--out", str(out), "--speaker", name]) == 0
    np.testing.assert_array_equal(sf.read(out, dtype="int16")[0], ref)
    capsys.readouterr()
    code = main(["say", "No.", "--voice", str(tiny_voice), "--out", str(tmp_path / "x.wav"), "--speaker", "nobody"])
    err = capsys.readouterr().err
    assert code == EXIT_USER_ERROR and "unknown speaker 'nobody'" in err and err.count("\n") == 1


def test_say_reads_the_users_lexicon_or_the_one_given(tiny_voice, tmp_path, monkeypatch, capsys):
    import json

    import soundfile as sf

    from wavern.app.voices import user_lexicon

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert user_lexicon() == tmp_path / "config" / "wavern" / "lexicon.json"
    text = "Read the zyzzyva aloud."

    def say(name, *extra):
        out = tmp_path / f"{name}.wav"
        assert main(["say", text, "--voice", str(tiny_voice), "--out", str(out), *extra]) == 0
        return sf.read(out, dtype="int16")[0]

    plain = say("plain")
    user_lexicon().parent.mkdir(parents=True)
    user_lexicon().write_text(json.dumps({"zyzzyva": "zizzy vah"}), encoding="utf-8")
    fixed = say("fixed")  # the window's "Fix word" table, read by default
    assert fixed.shape != plain.shape or (fixed != plain).any()
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"zyzzyva": {"phonemes": "zˈɪzɪvə"}}), encoding="utf-8")
    given = say("given", "--lexicon", str(other))
    assert given.shape != fixed.shape or (given != fixed).any()
    assert main(["say", text, "--voice", str(tiny_voice), "--out", str(tmp_path / "x.wav"), "--lexicon",
                 str(tmp_path / "missing.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_say_reads_a_pipe_as_file_and_sigterm_leaves_no_partial_output(tiny_voice, tmp_path, capsys):
    import os
    import signal
    import threading
    import time
    from pathlib import Path

    fifo = tmp_path / "text.fifo"  # what a shell's <(echo ...) hands over: not a regular file
    os.mkfifo(fifo)
    threading.Thread(target=lambda: fifo.write_text("Through a pipe."), daemon=True).start()
    assert main(["say", "--file", str(fifo), "--voice", str(tiny_voice), "--out", str(tmp_path / "p.wav")]) == 0
    assert (tmp_path / "p.wav").is_file()  # (it said "no such file")
    assert main(["say", "--file", str(tmp_path), "--voice", str(tiny_voice), "--out", str(tmp_path / "q.wav")]) == 2
    assert "is a folder" in capsys.readouterr().err
    out = tmp_path / "long.wav"
    text = " ".join(f"Sentence number {i} takes a while to say." for i in range(200))
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-m", "wavern.app.cli", "say", text, "--voice", str(tiny_voice), "--out",
                             str(out)], cwd=root, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    part = tmp_path / ".long.wav.part"
    # audio flowing into the part file: the kernels compiled (a fresh numba cache compiles first)
    while not (part.exists() and part.stat().st_size > 65536):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert proc.returncode != 0 and not list(tmp_path.glob("*long.wav*"))  # (a .long.wav.part stayed)


def test_say_into_a_read_only_folder_is_a_clear_error(tiny_voice, tmp_path, capsys):
    from mounts import tmpfs

    with tmpfs(tmp_path / "ro", 64, read_only=True) as ro:
        assert main(["say", "Hi.", "--voice", str(tiny_voice), "--out", str(ro / "x.wav")]) == 2
        assert f"folder {ro} is not writable" in capsys.readouterr().err  # (an OSError traceback before)



def test_closed_or_full_standard_streams_are_clear_errors(tiny_voice, tmp_path):
    import shlex

    root = Path(__file__).resolve().parents[2]
    cli = [sys.executable, "-m", "wavern.app.cli"]
    voice = ["--voice", str(tiny_voice)]
    runs = [  # (command, shell redirections, message); tracebacks before (OSError, AttributeError)
        (cli + ["say", "Hi there.", "--out", "-"] + voice, "> /dev/full", "disk full while writing the audio to stdout"),
        (cli + ["say", "Hi there.", "--out", "-"] + voice, ">&-", "standard output is closed"),
        (cli + ["say", "--file", "-", "--out", str(tmp_path / "x.wav")] + voice, "<&-", "standard input is closed"),
        (cli + ["render", "-", "--out-dir", str(tmp_path / "o")] + voice, "<&-", "standard input is closed"),
    ]
    for cmd, redirect, message in runs:
        r = subprocess.run(["bash", "-c", f"{shlex.join(cmd)} {redirect}"], cwd=root, capture_output=True, timeout=120)
        err = r.stderr.decode()
        assert r.returncode == 2 and message in err and "Traceback" not in err, (redirect, err)


def test_train_help_offers_only_what_each_trainer_reads():
    import dataclasses
    import importlib

    from wavern.app.train_cli import _ALIASES, _COMMON, TRAINERS

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["train"]
    trainers = next(a for a in sub._actions if a.dest is not None and hasattr(a, "choices") and a.choices).choices
    for name, (module, cls, _, _) in TRAINERS.items():
        mod = importlib.import_module(module)
        fields = {f.name for f in dataclasses.fields(getattr(mod, cls))}
        offered = {o for a in trainers[name]._actions for o in a.option_strings}
        for flag, field, _, help_ in _COMMON:
            has = any(a in fields for a in _ALIASES.get(field, (field,)))
            assert (flag in offered) == has, (name, flag)  # (train voice offered --lr, then refused it)
        if "--optimizer" in offered:
            choices = [c.strip() for c in next(h for f, _, _, h in _COMMON if f == "--optimizer").split("|")]
            assert tuple(choices) == tuple(mod.OPTIMIZERS), name  # (it offered sgd)
    for bad in ("inf", "nan", "0", "-1e-3"):
        with pytest.raises(SystemExit) as e:
            main(["train", "acoustic", "--lr", bad])
        assert e.value.code == 2


def test_gui_without_a_display_says_so(monkeypatch, capsys):
    monkeypatch.setattr(sys, "platform", "linux")
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(var, raising=False)
    assert main(["gui"]) == 2  # (Qt aborted the process: exit 134, no word of why)
    assert "no display to open the window on" in capsys.readouterr().err


def test_output_and_input_paths_that_are_not_utf8_work(tiny_voice, tmp_path):
    import os

    odd = tmp_path / os.fsdecode(b"caf\xe9.wav")  # a Latin-1 name on a UTF-8 system (UnicodeEncodeError before)
    assert main(["say", "Hi.", "--voice", str(tiny_voice), "--out", str(odd)]) == 0
    assert os.fsencode(odd) in [os.fsencode(p) for p in tmp_path.iterdir()]
    assert main(["vocode", str(odd), "-o", str(tmp_path / os.fsdecode(b"\xff.flac")), "--voice", str(tiny_voice)]) == 0


def test_bench_buffer_and_corpus_voices_are_checked(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["bench", "--buffer", "nan"])
    assert e.value.code == 2
    assert main(["corpus", "build", str(tmp_path / "c"), "--utterances", "1", "--voices", ""]) == 2
    assert "an empty voice name" in capsys.readouterr().err and not (tmp_path / "c").exists()  # (it built one)


def test_say_leaves_a_pipe_named_as_output_alone(tiny_voice, tmp_path, capsys):
    import os
    import stat

    fifo = tmp_path / "x.wav"
    os.mkfifo(fifo)
    assert main(["say", "Hi.", "--voice", str(tiny_voice), "--out", str(fifo)]) == 2
    assert "is not a regular file" in capsys.readouterr().err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # (it was replaced by a regular file)


def test_version_and_python_dash_m(tmp_path):
    """`wavern --version` and `python -m wavern` (the same command), from outside the checkout."""
    import subprocess
    import sys

    import wavern

    for cmd in ([sys.executable, "-m", "wavern", "--version"],):
        r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.startswith(f"wavern {wavern.__version__} ("), (r.stdout, r.stderr)
    r = subprocess.run([sys.executable, "-m", "wavern", "voices", "--help"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "--speakers" in r.stdout


def test_a_fresh_cache_is_announced_once_before_the_first_compile(monkeypatch, capsys, tmp_path):
    """say and render say that the first run compiles (render: the batch kernels too, 50-120 s; an API
    reviewer's first render of 4 items waited 51 s in silence); with kernels cached, nothing."""
    from wavern.app import speak
    from wavern.engine import kernels

    monkeypatch.setattr(kernels, "cache_status", lambda **_: (str(tmp_path), 0))
    speak.announce_first_compile("50-120")
    assert "compiling the engine's kernels (once, about 50-120 s; cached after)" in capsys.readouterr().err
    monkeypatch.setattr(kernels, "cache_status", lambda **_: (str(tmp_path), 12))
    speak.announce_first_compile()
    assert capsys.readouterr().err == ""


def test_a_first_compile_is_done_before_the_request_and_changes_nothing_said(tiny_voice, tmp_path, monkeypatch,
                                                                             capsys):
    """With the kernels not compiled yet, say warms the voice up before the request (so the RTF it
    prints is the voice's, not numba's) and says how long that took; the audio is the same bytes."""
    from wavern.app import speak
    from wavern.engine import Voice, kernels

    warmed = []
    real = Voice.warmup
    monkeypatch.setattr(Voice, "warmup", lambda self: warmed.append(1) or real(self))
    out = {}
    for n in (12, 0):
        monkeypatch.setattr(kernels, "cache_status", lambda n=n, **_: (str(tmp_path), n))
        out[n] = tmp_path / f"c{n}.wav"
        assert main(["say", "The same words, twice.", "--voice", str(tiny_voice), "--out", str(out[n])]) == 0
        err = capsys.readouterr().err
        assert ("compiled in" in err) == (n == 0) and "RTF" in err, err
        assert len(warmed) == (n == 0)
    assert out[0].read_bytes() == out[12].read_bytes()


def test_say_speaks_ssml_by_its_start_or_by_flag_and_reports_bad_markup(tiny_voice, tmp_path, capsys):
    """SSML on the command line: found by its <speak>, forced with --ssml, read as text with --plain;
    bad markup is a clear error naming where, and no file is left behind."""
    import numpy as np
    import soundfile as sf

    from wavern.dsp import float_to_int16
    from wavern.engine import Voice

    src = '<speak>One. <break time="400ms"/><prosody rate="slow">Two.</prosody></speak>'
    outs = {}
    for name, flags in (("found", []), ("forced", ["--ssml"]), ("plain", ["--plain"])):
        out = tmp_path / f"{name}.wav"
        assert main(["say", src, "--voice", str(tiny_voice), "--out", str(out), *flags]) == 0
        outs[name], _ = sf.read(out, dtype="int16")
    with Voice.load(tiny_voice) as v:
        expected = float_to_int16(v.synthesize(src, ssml=True))
    assert np.array_equal(outs["found"], expected) and np.array_equal(outs["forced"], expected)
    assert outs["plain"].size != outs["found"].size
    bad = tmp_path / "bad.wav"
    assert main(["say", "<speak>Oops <prosody rate='zippy'>x</prosody></speak>", "--voice", str(tiny_voice),
                 "--out", str(bad)]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "SSML line 1, column" in err and "prosody rate 'zippy'" in err
    assert not bad.exists()
    assert main(["say", "Plain words.", "--ssml", "--voice", str(tiny_voice), "--out", str(bad)]) == EXIT_USER_ERROR
    assert "not well-formed" in capsys.readouterr().err


def test_only_the_process_command_line_freezes_the_collector_at_exit(monkeypatch, tmp_path, capsys):
    """main() (the `wavern` script, python -m wavern) leaves its objects to the OS at exit; main(argv)
    called by a program (these tests) does not touch the program's collector."""
    import atexit
    import gc

    registered = []
    monkeypatch.setattr(atexit, "register", lambda fn, *a, **k: registered.append(fn))
    missing = str(tmp_path / "missing.txt")
    assert main(["say", "--file", missing]) == EXIT_USER_ERROR and registered == []
    monkeypatch.setattr(sys, "argv", ["wavern", "say", "--file", missing])
    assert main() == EXIT_USER_ERROR and registered == [gc.freeze]


def test_python_m_wavern_say_writes_the_same_file_as_main(tiny_voice, tmp_path):
    """The process's own command (its collector frozen at exit) writes the whole file: the same
    bytes as main(argv) in this process."""
    out = subprocess.run([sys.executable, "-m", "wavern", "say", "Hello there.", "--voice", str(tiny_voice), "--out",
                          str(tmp_path / "a.wav")], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert main(["say", "Hello there.", "--voice", str(tiny_voice), "--out", str(tmp_path / "b.wav")]) == 0
    assert (tmp_path / "a.wav").read_bytes() == (tmp_path / "b.wav").read_bytes()
