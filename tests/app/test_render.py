"""`wavern render`: inputs, the offline renderer against the stream, sidecars, the ledger, and a batch
that survives bad items, a full disk, SIGKILL and Ray."""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from wavern.app import cli
from wavern.app.render import RESULTS_NAME, Job, read_inputs, run_batch
from wavern.dsp import float_to_int16
from wavern.engine.batch import (MAX_TEXT_CHARS, ResultsLedger, render_frames, render_utterance, srt_text,
                                 timing_json, vtt_text)
from wavern.errors import ParameterError

torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def voice(tiny_voice):
    from wavern.engine import Voice

    v = Voice.load(tiny_voice)
    yield v
    v.close()


def rows_of(out_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (out_dir / RESULTS_NAME).read_text().splitlines()]


def record_rendered(monkeypatch) -> list[str]:
    """Ids of the items the in-process worker renders from now on, in order."""
    from wavern.app import render as render_mod

    calls: list[str] = []
    real = render_mod.RenderWorker.render_group

    def spy(self, jobs):
        calls.extend(j["id"] for j in jobs)
        return real(self, jobs)

    monkeypatch.setattr(render_mod.RenderWorker, "render_group", spy)
    return calls


# ---------------------------------------------------------------------------------- inputs

def test_read_inputs_text_lines_paragraphs_manifests_and_stdin(tmp_path):
    (tmp_path / "book.txt").write_text("First line.\n\n  Second line.  \n")
    (tmp_path / "paras.txt").write_text("One a\none b.\n\n\nTwo.\n")
    (tmp_path / "m.jsonl").write_text('{"id": "x", "text": "Hi.", "speed": 1.5, "out": "sub/x.flac", "seed": 7}\n\n'
                                      '{"text": "No id."}\n')
    (tmp_path / "m.csv").write_text("id,text,speed\nc1,\"Hello, you.\",\nc2,Bye.,abc\n")
    jobs = read_inputs([str(tmp_path / "book.txt"), str(tmp_path / "m.jsonl"), str(tmp_path / "m.csv"), "-"],
                       stdin=io.StringIO("From stdin.\n"))
    by_id = {j.id: j for j in jobs}
    assert [j.id for j in jobs] == ["book-00001", "book-00003", "x", "m-00003", "c1", "c2", "stdin-00001"]
    assert by_id["book-00003"].text == "Second line." and by_id["book-00003"].source.endswith("book.txt:3")
    assert (by_id["x"].speed, by_id["x"].out, by_id["x"].seed) == (1.5, "sub/x.flac", 7)
    assert by_id["c1"].text == "Hello, you." and by_id["c1"].problem is None
    assert "speed" in by_id["c2"].problem  # a bad value fails that item only
    assert by_id["stdin-00001"].text == "From stdin."
    assert by_id["book-00001"].seed == read_inputs([str(tmp_path / "book.txt")])[0].seed  # stable across reads
    paras = read_inputs([str(tmp_path / "paras.txt")], paragraphs=True)
    assert [(j.id, j.text) for j in paras] == [("paras-00001", "One a one b."), ("paras-00002", "Two.")]
    piped = read_inputs(["-"], stdin=io.StringIO('{"id": "s", "text": "Manifest on stdin."}\n'))
    assert [(j.id, j.text) for j in piped] == [("s", "Manifest on stdin.")]


def test_read_inputs_refuses_broken_batches(tmp_path):
    (tmp_path / "dup.jsonl").write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n')
    (tmp_path / "bad.csv").write_text("id,words\n1,hello\n")
    with pytest.raises(ParameterError, match="appears twice"):
        read_inputs([str(tmp_path / "dup.jsonl")])
    with pytest.raises(ParameterError, match="'text' column"):
        read_inputs([str(tmp_path / "bad.csv")])
    with pytest.raises(ParameterError, match="no such file"):
        read_inputs([str(tmp_path / "missing.txt")])


def test_a_broken_manifest_line_fails_that_item_only(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "text": "x"}\nnot json\n{"id": "c", "text": "Oops\n'
                                        '{"id": "d", "text": "line\u2028separator"}\n', encoding="utf-8")
    jobs = read_inputs([str(tmp_path / "bad.jsonl")])
    assert [(j.id, j.source.rsplit(":", 1)[1]) for j in jobs] == [("a", "1"), ("bad-00002", "2"), ("bad-00003", "3"),
                                                                  ("d", "4")]
    assert jobs[0].problem is None and "not a JSON object" in jobs[1].problem and "not a JSON object" in jobs[2].problem
    assert jobs[3].problem is None and jobs[3].text == "line\u2028separator"  # valid JSON: one row
    (tmp_path / "t.txt").write_text("One\u000cstill one.\nTwo.\n")  # a form feed is no new line
    assert [(j.id, j.text) for j in read_inputs([str(tmp_path / "t.txt")])] == [("t-00001", "One\u000cstill one."),
                                                                              ("t-00002", "Two.")]


def test_byte_order_marks_and_odd_file_names(tmp_path):
    (tmp_path / "sheet.csv").write_bytes("\ufeffid,text\nc1,Hello.\n".encode("utf-8"))
    (tmp_path / "m.jsonl").write_bytes('\ufeff{"id": "j1", "text": "Hi."}\n'.encode("utf-8"))
    (tmp_path / "my book \u00e9t\u00e9.txt").write_text("A line.\n")
    (tmp_path / "\u6587.txt").write_text("Another.\n")
    jobs = read_inputs([str(tmp_path / n) for n in ("sheet.csv", "m.jsonl", "my book \u00e9t\u00e9.txt", "\u6587.txt")])
    assert [j.id for j in jobs] == ["c1", "j1", "my_book_ete-00001", "input-00001"]
    assert all(j.problem is None for j in jobs)
    piped = read_inputs(["-"], stdin=io.StringIO('\ufeff{"id": "s", "text": "Manifest."}\n'))
    assert [(j.id, j.text) for j in piped] == [("s", "Manifest.")]  # read as a manifest, not as text


# ---------------------------------------------------------------------------------- the renderer

def test_outputs_that_collide_or_cannot_be_written_fail_their_item_only(tiny_voice, tmp_path):
    out = tmp_path / "out"
    (out / "d.wav").mkdir(parents=True)  # a folder where an item's audio would go
    (out / "sub").write_text("a file where a folder would go")
    (out / RESULTS_NAME).write_text("")
    jobs = read_inputs(["-"], stdin=io.StringIO("\n".join(json.dumps(d) for d in [
        {"id": "one", "text": "Hello there.", "out": "a.wav"},
        {"id": "two", "text": "Good day.", "out": "a.flac"},  # its a.srt would overwrite one's
        {"id": "dir", "text": "Hello.", "out": "d.wav"},
        {"id": "under", "text": "Hello.", "out": "sub/x.wav"},
        {"id": "last", "text": "Still rendered."},
    ])))
    s = run_batch(jobs, out_dir=out, voice=str(tiny_voice), sidecars=["srt"], workers=1)
    rows = {r["id"]: r for r in rows_of(out)}
    assert (s.done, s.failed) == (2, 3) and {k for k, r in rows.items() if r["status"] == "ok"} == {"one", "last"}
    assert "a.srt is also an output of item 'one'" in rows["two"]["error"]
    assert "cannot write d.wav" in rows["dir"]["error"] and "cannot write sub/x.wav" in rows["under"]["error"]
    assert (out / "a.srt").read_text().count("Hello") == 1 and not list(out.rglob("*.part"))


def test_an_output_folder_that_cannot_be_written_is_a_clear_error(tiny_voice, tmp_path):
    out = tmp_path / "out"
    (out / f".{RESULTS_NAME}.part").mkdir(parents=True)  # the ledger's temp file cannot be created
    jobs = [Job("a", "Hello.")]
    with pytest.raises(ParameterError, match="cannot write there"):
        run_batch(jobs, out_dir=out, voice=str(tiny_voice), workers=1)


def test_sigterm_stops_a_batch_like_ctrl_c_and_workers_die_with_their_driver(tmp_path):
    from wavern.proc import sigterm_interrupts

    with pytest.raises(KeyboardInterrupt):
        with sigterm_interrupts():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    # A process watching its parent (as pool workers do) lives while the parent does, and exits when the
    # parent dies without cleaning up.
    # No sleeps to race with: the child says its pid once it watches, the parent dies when told.
    child = ("import os, time; from wavern.proc import exit_with_parent; exit_with_parent(poll_s=0.2); "
             "print(os.getpid(), flush=True); time.sleep(600)")
    parent = subprocess.Popen([sys.executable, "-c", "import os, subprocess, sys; subprocess.Popen([sys.executable, "
                               f"'-c', {child!r}]); sys.stdin.readline(); os._exit(0)"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    pid = int(parent.stdout.readline())
    assert parent.poll() is None and _alive(pid)
    parent.stdin.write("go\n")
    parent.stdin.flush()
    parent.wait(timeout=60)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.2)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state

def test_unfolded_render_equals_the_stream_with_pauses_and_word_timings(voice):
    from wavern.engine import SpeakConfig

    text = "Hello there, friend. How are you today? Fine."
    cfg = SpeakConfig(pause_s=0.05, speed=1.2)
    chunks = list(voice.stream(text, cfg, seed=3))
    ref = float_to_int16(np.concatenate([c.samples for c in chunks]))
    r = render_utterance(voice, text, cfg, seed=3, fold_frames=None)
    np.testing.assert_array_equal(r.samples, ref)
    assert r.word_timings == tuple(w for c in chunks for w in c.word_timings)
    assert len(r.sentences) == 3
    for s in r.sentences:  # each sentence starts where the stream's chunks of that sentence start
        assert min(c.start_sample for c in chunks if c.sentence_index == s.index) == s.start_sample
    gap = int(0.05 * voice.sample_rate)
    assert r.sentences[1].start_sample == r.sentences[0].end_sample + gap
    assert r.samples.shape[0] == r.sentences[-1].end_sample + gap


def test_folded_render_of_one_sentence_equals_vocoder_render(voice):
    from wavern.conditioning.stream import stream_mel

    text = "A single sentence that is long enough to be cut into several folded segments."
    r = render_utterance(voice, text, seed=11, fold_frames=12, overlap_frames=3)
    utt = voice.analyze(text)
    (part,) = list(stream_mel(voice.acoustic, utt.ids, utt.is_global, utt.sentence_of, speaker=voice.default_speaker))
    part.rows(0, 1)  # decoded as the renderer (and the stream) decode it: first rows, then the rest;
    # one pass over the whole sentence rounded one sample differently on a 2-core machine of session 11
    assert part.mel.shape[0] > 3 * 12
    ref = voice.vocoder.render(part.mel, seed=11, temperature=voice.default_temperature, fold_frames=12,
                               overlap_frames=3)
    np.testing.assert_array_equal(r.samples, ref)
    gi = voice.vocoder.frame_inputs(part.mel)
    np.testing.assert_array_equal(render_frames(voice.vocoder, gi, seed=11, fold_frames=12, overlap_frames=3,
                                                threads=2), ref)  # threads split the batch, same audio


def test_bad_texts_raise_parameter_error(voice):
    for text in ("", "   ", "🙂 ...", "x" * (MAX_TEXT_CHARS + 1)):
        with pytest.raises(ParameterError):
            render_utterance(voice, text)


def _parse_cues(text: str, sep: str) -> list[tuple[float, float, str]]:
    def secs(c: str) -> float:
        h, m, s = c.replace(sep, ".").split(":")
        return int(h) * 3600 + int(m) * 60 + float(s)

    cues = []
    for block in text.strip().split("\n\n"):
        lines = block.splitlines()
        if "-->" not in "".join(lines):
            continue
        i = next(k for k, line in enumerate(lines) if "-->" in line)
        a, b = lines[i].split(" --> ")
        cues.append((secs(a), secs(b), lines[i + 1]))
    return cues


def test_sidecars_carry_the_word_timings(voice):
    text = "Good morning. The rain has stopped."
    r = render_utterance(voice, text, seed=1)
    words = [(w.start_sample / r.sample_rate, w.end_sample / r.sample_rate, text[w.char_start:w.char_end])
             for w in r.word_timings]
    assert [w[2] for w in words] == ["Good", "morning", "The", "rain", "has", "stopped"]
    for cues in (_parse_cues(srt_text(text, r.word_timings, r.sample_rate), ","),
                 _parse_cues(vtt_text(text, r.word_timings, r.sample_rate), ".")):
        assert [c[2] for c in cues] == [w[2] for w in words]
        np.testing.assert_allclose([c[:2] for c in cues], [w[:2] for w in words], atol=5e-4)
    assert vtt_text(text, r.word_timings, r.sample_rate).startswith("WEBVTT\n\n")
    j = timing_json("id1", text, r)
    assert j["samples"] == r.samples.shape[0] and [w["text"] for w in j["words"]] == [w[2] for w in words]
    assert [s["text"] for s in j["sentences"]] == ["Good morning.", "The rain has stopped."]
    assert all(0 <= w["start_s"] < w["end_s"] <= j["duration_s"] for w in j["words"])


def test_ledger_drops_a_torn_line_and_compacts(tmp_path):
    p = tmp_path / RESULTS_NAME
    p.write_text('{"id": "a", "status": "failed"}\n{"id": "a", "status": "ok", "files": []}\n{"id": "b", "sta')
    led = ResultsLedger(p)
    assert led.dropped_lines == 1 and set(led.rows) == {"a"} and led.finished("a", tmp_path)
    led.compact()
    led.append({"id": "b", "status": "ok", "files": ["b.wav"]})
    assert not led.finished("b", tmp_path)  # its file is missing
    assert [json.loads(line)["id"] for line in p.read_text().splitlines()] == ["a", "b"]


def test_a_full_disk_while_recording_a_row_stops_the_batch_and_keeps_what_was_recorded(tiny_voice, tmp_path,
                                                                                        monkeypatch):
    from wavern.errors import DiskFullError

    inp = tmp_path / "t.txt"
    inp.write_text("One.\nTwo.\nThree.\n")
    out = tmp_path / "o"
    ledger = out / RESULTS_NAME
    real_open = open
    state = {"rows": 0}

    class HalfWritten:  # the ledger's second row finds the disk full halfway through its line
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, text):
            state["rows"] += 1
            if state["rows"] == 2:
                self.f.write(text[: len(text) // 2])
                self.f.flush()
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.f.write(text)

        def __getattr__(self, name):
            return getattr(self.f, name)

    def fake_open(path, mode="r", *a, **kw):
        f = real_open(path, mode, *a, **kw)
        return HalfWritten(f) if Path(path) == ledger and mode == "a" else f

    monkeypatch.setattr("builtins.open", fake_open)
    with pytest.raises(DiskFullError, match="disk full while recording results"):
        run_batch(read_inputs([str(inp)]), out_dir=out, voice=str(tiny_voice), workers=1)
    monkeypatch.setattr("builtins.open", real_open)
    done = ResultsLedger(ledger)
    assert done.dropped_lines == 1 and set(done.rows) == {"t-00001"} and done.finished("t-00001", out)
    calls = record_rendered(monkeypatch)
    s = run_batch(read_inputs([str(inp)]), out_dir=out, voice=str(tiny_voice), workers=1)
    assert (s.skipped, s.done) == (1, 2) and calls == ["t-00002", "t-00003"]
    assert ResultsLedger(ledger).dropped_lines == 0  # the torn line was compacted away


# ---------------------------------------------------------------------------------- the batch

def test_batch_renders_records_failures_and_skips_finished_items(tiny_voice, tmp_path, monkeypatch):
    jobs = read_inputs(["-"], stdin=io.StringIO("\n".join(json.dumps(d) for d in [
        {"id": "ok1", "text": "One small step."},
        {"id": "empty", "text": "  "},
        {"id": "emoji", "text": "🙂🙂"},
        {"id": "long", "text": "word " * (MAX_TEXT_CHARS // 5 + 1)},
        {"id": "fast", "text": "Quickly now.", "speed": 3.0, "out": "sub/fast.ogg"},
        {"id": "slow", "text": "Too slow.", "speed": 0.1},
        {"id": "../evil", "text": "Escape."},
        {"id": "esc", "text": "Escape.", "out": "../x.wav"},
        {"id": "novoice", "text": "Hello.", "voice": "no-such-voice"},
    ])))
    out = tmp_path / "out"
    s = run_batch(jobs, out_dir=out, voice=str(tiny_voice), sidecars=["srt", "json"], workers=1)
    assert (s.items, s.done, s.failed, s.skipped) == (9, 2, 7, 0)
    rows = {r["id"]: r for r in rows_of(out)}
    assert len(rows) == 9
    assert {k for k, r in rows.items() if r["status"] == "ok"} == {"ok1", "fast"}
    assert "long" in rows and str(MAX_TEXT_CHARS) in rows["long"]["error"]
    assert "speakable" in rows["emoji"]["error"] and "0.1" in rows["slow"]["error"]
    assert "no-such-voice" in rows["novoice"]["error"] and "relative path" in rows["esc"]["error"]
    assert rows["fast"]["files"] == ["sub/fast.ogg", "sub/fast.srt", "sub/fast.words.json"]
    for r in (rows["ok1"], rows["fast"]):
        info = sf.info(str(out / r["out"]))
        assert info.samplerate == r["sample_rate"] == 22050 and info.channels == 1
        assert info.frames == r["samples"]
        assert r["duration_s"] == pytest.approx(r["samples"] / 22050, abs=1e-5)
        assert r["rtf"] == pytest.approx(r["compute_s"] / r["duration_s"], rel=1e-4)
        assert all((out / f).is_file() for f in r["files"])
    data, _ = sf.read(str(out / "ok1.wav"), dtype="int16")
    assert data.shape[0] == rows["ok1"]["samples"] and np.abs(data).max() > 0
    assert not list(out.rglob("*.part"))

    # A rerun renders nothing that is done; a deleted output is rendered again; failed items are tried again.
    calls = record_rendered(monkeypatch)
    (out / "sub" / "fast.ogg").unlink()
    s2 = run_batch(jobs, out_dir=out, voice=str(tiny_voice), sidecars=["srt", "json"], workers=1)
    assert calls == ["emoji", "long", "fast"] and (s2.done, s2.skipped, s2.failed) == (1, 1, 7)
    assert len(rows_of(out)) == 9  # one row per id after the rerun


def test_cli_exit_codes_and_full_disk_stops_cleanly(tiny_voice, tmp_path, monkeypatch, capsys):
    inp = tmp_path / "lines.txt"
    inp.write_text("First item here.\nSecond item here.\nThird item here.\n")
    out = tmp_path / "out"
    real_write = sf.SoundFile.write
    state = {"n": 0}

    def full_after_one(self, data):
        state["n"] += 1
        if state["n"] >= 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(self, data)

    monkeypatch.setattr(sf.SoundFile, "write", full_after_one)
    rc = cli.main(["render", str(inp), "--out-dir", str(out), "--voice", str(tiny_voice), "--jobs", "1", "-q"])
    assert rc == 2 and "disk full" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["lines-00001.wav", RESULTS_NAME]  # no half file, no temp
    assert [r["id"] for r in rows_of(out)] == ["lines-00001"]
    monkeypatch.setattr(sf.SoundFile, "write", real_write)
    rc = cli.main(["render", str(inp), "--out-dir", str(out), "--voice", str(tiny_voice), "--jobs", "1", "-q"])
    assert rc == 0 and sorted(r["id"] for r in rows_of(out)) == ["lines-00001", "lines-00002", "lines-00003"]
    inp.write_text("Fine.\n...\n")
    rc = cli.main(["render", str(inp), "--out-dir", str(tmp_path / "o2"), "--voice", str(tiny_voice), "--jobs",
                   "1", "-q"])
    assert rc == 1  # an item failed, the rest rendered


def test_full_disk_on_a_tiny_filesystem(voice, tiny_voice, tmp_path):
    from mounts import tmpfs

    short, long_ = "Hi.", "This item is far too long to fit. " * 6
    first = render_utterance(voice, short, seed=0).samples.shape[0] * 2 + 44
    second = render_utterance(voice, long_, seed=0).samples.shape[0] * 2 + 44
    size_kb = (first + 16384) // 1024 + 8
    assert second > size_kb * 1024
    with tmpfs(tmp_path / "mnt", size_kb) as mnt:
        jobs = [Job("a", short, seed=0), Job("b", long_, seed=0), Job("c", short, seed=0)]
        from wavern.errors import DiskFullError

        with pytest.raises(DiskFullError, match="disk full"):
            run_batch(jobs, out_dir=mnt, voice=str(tiny_voice), workers=1)
        assert sorted(p.name for p in mnt.iterdir()) == ["a.wav", RESULTS_NAME]
        assert [r["id"] for r in rows_of(mnt)] == ["a"]
        assert sf.info(str(mnt / "a.wav")).frames == rows_of(mnt)[0]["samples"]


def test_killed_batch_resumes_without_redoing_or_corrupting(tiny_voice, tmp_path):
    text = ("The morning was grey and still. Birds sat on the wires. A bus went past, almost empty. "
            "Nobody spoke. The day had not decided what it wanted to be.")
    inp = tmp_path / "items.txt"
    inp.write_text("\n".join(f"Item {i}. {text}" for i in range(6)) + "\n")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "wavern.app.cli", "render", str(inp), "--out-dir", str(out), "--voice",
           str(tiny_voice), "-q", "--sidecar", "vtt"]
    proc = subprocess.Popen(cmd + ["--jobs", "1"], cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    results = out / RESULTS_NAME
    try:
        deadline = time.monotonic() + 300
        while not (results.is_file() and results.read_text().count("\n") >= 1):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the first item never finished"
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
    before = {r["id"]: r for r in rows_of(out)}
    assert 1 <= len(before) < 6
    # Resume with two worker processes (the spawn pool), here in-process to save one start-up.
    s = run_batch(read_inputs([str(inp)]), out_dir=out, voice=str(tiny_voice), sidecars=["vtt"], workers=2)
    assert (s.done, s.skipped, s.failed) == (6 - len(before), len(before), 0)
    rows = rows_of(out)
    ids = [f"items-{i:05d}" for i in range(1, 7)]
    assert sorted(x["id"] for x in rows) == ids  # each item exactly once
    for x in rows:
        assert x["status"] == "ok"
        if x["id"] in before:
            assert x == before[x["id"]]  # not redone
        info = sf.info(str(out / x["out"]))
        assert info.frames == x["samples"] and info.frames > 0
        assert (out / f"{x['id']}.vtt").read_text().startswith("WEBVTT")
    assert all(x["worker"].endswith(f":{proc.pid}") for x in before.values())
    assert all(not x["worker"].endswith((f":{proc.pid}", f":{os.getpid()}")) for x in rows if x["id"] not in before)
    assert sorted(p.name for p in out.iterdir()) == sorted([RESULTS_NAME] + [f"{i}.wav" for i in ids]
                                                           + [f"{i}.vtt" for i in ids])


def test_grouped_items_write_the_same_files_as_one_at_a_time(tiny_voice, tmp_path, monkeypatch):
    """render issue #9: the worker renders groups of items in shared vocoder batches; every
    item's files are the same bytes as when it is rendered alone, and a bad item in a group
    fails alone."""
    from wavern.app import render as render_mod

    texts = ["Good morning.", "The rain has stopped, and the streets are drying.", "🙂🙂", "Short.",
             "A fourth sentence for the group. It has two parts.", "Last."]
    jobs = [Job(f"g{i}", t, seed=10 + i) for i, t in enumerate(texts)]
    groups: list[list[str]] = []
    real = render_mod.RenderWorker.render_group
    monkeypatch.setattr(render_mod.RenderWorker, "render_group",
                        lambda self, js: groups.append([j["id"] for j in js]) or real(self, js))
    outs = {}
    for name, segments in (("alone", 1), ("grouped", 10_000)):
        groups.clear()
        out = outs[name] = tmp_path / name
        s = run_batch(jobs, out_dir=out, voice=str(tiny_voice), sidecars=["json"], workers=1, group_segments=segments)
        assert (s.done, s.failed) == (5, 1)
        assert groups == ([[j.id] for j in jobs] if segments == 1 else [[j.id for j in jobs]])
    rows = {name: {r["id"]: r for r in rows_of(out)} for name, out in outs.items()}
    assert "speakable" in rows["grouped"]["g2"]["error"]
    for j in jobs:
        if j.id == "g2":
            continue
        for f in rows["alone"][j.id]["files"]:
            assert (outs["alone"] / f).read_bytes() == (outs["grouped"] / f).read_bytes()
        assert rows["grouped"][j.id]["cpu_s"] > 0


def test_grouper_aims_at_the_segment_target_and_shares_the_tail():
    from wavern.app.render_workers import Grouper as _Grouper

    jobs = [{"id": str(i), "text": "x" * 100, "speed": 1.0, "voice_key": "v"} for i in range(20)]
    g = _Grouper(jobs, workers=2, segments=32, fold_frames=40)  # 100 chars ~ 450 frames ~ 11 segments
    sizes = [len(g.next_group())]
    assert sizes == [3]
    g.learn(jobs[0], 100 * 256 * 16)  # this voice makes 16 frames per character: 40 segments an item
    while grp := g.next_group():
        sizes.append(len(grp))
    assert sum(sizes) == 20 and sizes[1:3] == [1, 1]  # each item now fills a group on its own
    tail = _Grouper(jobs[:5], workers=2, segments=1000, fold_frames=40)
    assert [len(tail.next_group()) for _ in range(4)] == [3, 1, 1, 0]  # a fair share each, to the end


@pytest.fixture()
def local_ray():
    ray = pytest.importorskip("ray", reason="ray is not installed (optional extra 'cluster')")
    ray.init(num_cpus=1, include_dashboard=False, object_store_memory=80 * 2 ** 20, log_to_driver=False,
             configure_logging=False)
    yield ray
    ray.shutdown()


def test_ray_renders_the_same_batch_on_actors(local_ray, voice, tiny_voice, tmp_path):
    jobs = [Job("r1", "Rendered on a Ray actor.", seed=5), Job("r2", "And another one.", seed=6)]
    s = run_batch(jobs, out_dir=tmp_path, voice=str(tiny_voice), workers=1, ray_address="local")
    assert (s.done, s.failed) == (2, 0)
    rows = {r["id"]: r for r in rows_of(tmp_path)}
    assert all(not r["worker"].endswith(f":{os.getpid()}") for r in rows.values())
    for j in jobs:
        ref = render_utterance(voice, j.text, seed=j.seed)
        assert rows[j.id]["samples"] == ref.samples.shape[0] == sf.info(str(tmp_path / f"{j.id}.wav")).frames


def test_an_item_whose_request_changed_is_rendered_again(tiny_voice, tmp_path, monkeypatch):
    calls = record_rendered(monkeypatch)
    inp = tmp_path / "t.txt"
    inp.write_text("One.\nTwo.\n")

    def run(**kw) -> list[str]:
        calls.clear()
        run_batch(read_inputs([str(inp)]), out_dir=tmp_path / "o", voice=str(tiny_voice), workers=1, **kw)
        return list(calls)

    assert run() == ["t-00001", "t-00002"]
    assert run() == []
    inp.write_text("One.\nTwo, edited.\n")
    assert run() == ["t-00002"]  # same id, new text
    assert run(sidecars=["vtt"]) == ["t-00001", "t-00002"]  # a sidecar it does not have yet
    assert run(sidecars=["vtt"]) == [] and run() == []  # fewer sidecars than made: still done
    assert run(fmt="flac") == ["t-00001", "t-00002"]


def test_a_changed_voice_file_or_folding_renders_again_and_old_rows_stay_done(tiny_voice, tmp_path, monkeypatch):
    import shutil

    calls = record_rendered(monkeypatch)
    voice = tmp_path / "voice"
    shutil.copytree(tiny_voice, voice)
    inp = tmp_path / "t.txt"
    inp.write_text("One.\nTwo.\n")
    out = tmp_path / "o"

    def run(**kw) -> list[str]:
        calls.clear()
        run_batch(read_inputs([str(inp)]), out_dir=out, voice=str(voice), workers=1, **kw)
        return list(calls)

    assert run() == ["t-00001", "t-00002"] and run() == []
    assert run(fold_frames=7) == ["t-00001", "t-00002"]  # other folding: other audio
    assert run(fold_frames=7) == [] and run() == ["t-00001", "t-00002"]
    cfg = json.loads((voice / "voice.json").read_text())
    cfg["inference"] = dict(cfg.get("inference") or {}, temperature=0.5)
    (voice / "voice.json").write_text(json.dumps(cfg))  # the voice updated in place
    assert run() == ["t-00001", "t-00002"] and run() == []
    # a ledger written before the field existed: its finished items stay finished
    ledger = out / "results.jsonl"
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert all("render" in r for r in rows)
    ledger.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "render"}) + "\n" for r in rows))
    assert run() == []


def test_items_set_pitch_by_field_or_flag_and_a_changed_pitch_renders_again(tiny_voice, tiny_prosody_voice, tmp_path,
                                                                           monkeypatch, capsys):
    import hashlib

    from wavern.app.render import _request_key
    from wavern.engine import SpeakConfig, Voice

    inp = tmp_path / "items.jsonl"
    rows = [{"id": "high", "text": "Listen to the pitch.", "pitch": 70, "pitch_range": 80},
            {"id": "low", "text": "Listen to the pitch.", "pitch": 30, "seed": 1},
            {"id": "default", "text": "Listen to the pitch.", "seed": 1},
            {"id": "toohigh", "text": "No.", "pitch": 99},
            {"id": "word", "text": "No.", "pitch_range": "wide"}]
    inp.write_text("\n".join(json.dumps(r) for r in rows))
    jobs = read_inputs([str(inp)])
    assert [(j.pitch, j.pitch_range) for j in jobs[:3]] == [(70.0, 80.0), (30.0, None), (None, None)]
    out = tmp_path / "o"
    s = run_batch(jobs, out_dir=out, voice=str(tiny_prosody_voice), workers=1)
    assert (s.done, s.failed) == (3, 2)
    got = {r["id"]: r for r in rows_of(out)}
    assert "pitch 99" in got["toohigh"]["error"] and "'pitch_range' must be a number" in got["word"]["error"]
    audio = {k: sf.read(str(out / got[k]["out"]), dtype="int16")[0] for k in ("high", "low", "default")}
    v = Voice.load(tiny_prosody_voice)
    try:  # an item's audio is render_utterance with its settings (same seed, same segments)
        ref = render_utterance(v, rows[1]["text"], SpeakConfig(pitch=30), seed=1)
        np.testing.assert_array_equal(audio["low"], ref.samples)
    finally:
        v.close()
    assert audio["low"].shape != audio["default"].shape or not np.array_equal(audio["low"], audio["default"])
    # an item without the fields keeps the key it had before they existed (finished batches stay finished)
    j = jobs[2]
    old = hashlib.sha1(json.dumps([j.text, str(Path(tiny_prosody_voice).resolve()), j.speed, j.seed,
                                   "default.wav"]).encode("utf-8")).hexdigest()[:16]
    assert _request_key(j, str(tiny_prosody_voice), "default.wav") == old
    # --pitch fills the items that do not set their own; the changed ones render again
    calls = record_rendered(monkeypatch)
    assert cli.main(["render", str(inp), "--out-dir", str(out), "--voice", str(tiny_prosody_voice), "--jobs", "1",
                     "--quiet", "--pitch", "60"]) == 1  # the two bad items still fail
    assert calls == ["default"]  # the bad items fail before rendering, as before
    # a speaker by field or by --speaker; an unknown one fails its item alone
    named = tmp_path / "named.jsonl"
    named.write_text("\n".join(json.dumps(r) for r in [{"id": "who", "text": "Who speaks?"},
                                                         {"id": "nobody", "text": "No.", "speaker": "nobody"}]))
    assert read_inputs([str(named)])[1].speaker == "nobody"
    assert cli.main(["render", str(named), "--out-dir", str(tmp_path / "sp"), "--voice", str(tiny_prosody_voice),
                     "--jobs", "1", "--quiet", "--speaker", "en-us"]) == 1
    got = {r["id"]: r for r in rows_of(tmp_path / "sp")}
    assert got["who"]["status"] == "ok" and "unknown speaker 'nobody'" in got["nobody"]["error"]
    # a voice without the prosody input fails such items with the reason
    s = run_batch(jobs[:1], out_dir=tmp_path / "plain", voice=str(tiny_voice), workers=1)
    assert s.failed == 1 and "cannot change its pitch" in rows_of(tmp_path / "plain")[0]["error"]


def test_render_reads_a_lexicon_renders_again_when_it_changes_and_lists_failures(tiny_voice, tmp_path, monkeypatch,
                                                                                capsys):
    calls = record_rendered(monkeypatch)
    inp = tmp_path / "t.txt"
    inp.write_text("Read the zyzzyva aloud.\nPlain words here.\n!!!\n")
    lex = tmp_path / "lexicon.json"
    out = tmp_path / "o"

    def run(*extra) -> list[str]:
        calls.clear()
        assert cli.main(["render", str(inp), "--out-dir", str(out), "--voice", str(tiny_voice), "--jobs", "1",
                         *extra]) == 1  # the third line has nothing to say
        return sorted(calls)

    assert run() == ["t-00001", "t-00002", "t-00003"]
    err = capsys.readouterr().err
    assert "failed t-00003: " in err and "nothing to say" in err  # on the console, not only in the ledger
    plain = sf.read(out / "t-00001.wav", dtype="int16")[0]
    lex.write_text(json.dumps({"zyzzyva": "zizzy vah"}), encoding="utf-8")
    assert run("--lexicon", str(lex)) == ["t-00001", "t-00002", "t-00003"]  # another lexicon: everything again
    fixed = sf.read(out / "t-00001.wav", dtype="int16")[0]
    assert fixed.shape != plain.shape or (fixed != plain).any()
    assert run("--lexicon", str(lex)) == ["t-00003"]  # (failed items are tried again)
    # the same through pool workers
    calls.clear()
    lex.write_text(json.dumps({"zyzzyva": "zeezee vah"}), encoding="utf-8")
    assert cli.main(["render", str(inp), "--out-dir", str(tmp_path / "p"), "--voice", str(tiny_voice), "--jobs",
                     "2", "--lexicon", str(lex), "-q"]) == 1
    inline = tmp_path / "i"
    assert cli.main(["render", str(inp), "--out-dir", str(inline), "--voice", str(tiny_voice), "--jobs", "1",
                     "--lexicon", str(lex), "-q"]) == 1
    for name in ("t-00001.wav", "t-00002.wav"):
        assert (tmp_path / "p" / name).read_bytes() == (inline / name).read_bytes()


def test_an_unknown_manifest_field_is_named_once(tmp_path, caplog):
    import logging

    inp = tmp_path / "m.jsonl"
    inp.write_text("\n".join(json.dumps({"id": f"a{i}", "text": "Hi.", "sped": 2, "volume": 3}) for i in range(3)))
    with caplog.at_level(logging.WARNING):
        jobs = read_inputs([str(inp)])
    assert [j.speed for j in jobs] == [1.0, 1.0, 1.0]
    named = [r.getMessage() for r in caplog.records if "not read by wavern" in r.getMessage()]
    assert len(named) == 2 and "'sped'" in named[0] and "'volume'" in named[1] and "m.jsonl:1" in named[0]


def test_hostile_manifest_values_fail_their_item_or_the_call_with_a_clear_error(tiny_voice, tmp_path):
    deep = "[" * 100000 + "]" * 100000
    inp = tmp_path / "m.jsonl"
    inp.write_text("\n".join([
        json.dumps({"id": "ok", "text": "Fine."}),
        '{"id": "deep", "text": ' + deep + "}",
        '{"id": "huge", "text": "Hi.", "seed": 1e400}',
        json.dumps({"id": "half", "text": "Hi.", "seed": 1.5}),
        json.dumps({"id": "bool", "text": "Hi.", "seed": True}),
        json.dumps({"id": "strseed", "text": "Hi.", "seed": "7"}),
    ]))
    jobs = {j.id: j for j in read_inputs([str(inp)])}
    assert "nested too deeply" in jobs["m-00002"].problem  # (was RecursionError)
    for k in ("huge", "half", "bool"):
        assert "field 'seed' must be an integer" in jobs[k].problem, k  # (1e400: OverflowError; 1.5, true: 1)
    assert jobs["strseed"].problem is None and jobs["strseed"].seed == 7
    big = tmp_path / "big.csv"
    big.write_text("id,text\na," + "x" * 200_000 + "\n")
    with pytest.raises(ParameterError, match=r"big.csv: line \d+: field larger than field limit"):
        read_inputs([str(big)])
    open_quote = tmp_path / "q.csv"  # every later row went into item a's text, silently
    open_quote.write_text('id,text\na,"Hello there.\nb,Second line.\nc,Third.\n')
    with pytest.raises(ParameterError, match="q.csv: the file ends inside a quoted field"):
        read_inputs([str(open_quote)])
    inch = tmp_path / "inch.csv"  # a quote inside an unquoted field is still text
    inch.write_text('id,text\na,A 5" screen.\nb,"Quoted, with a comma."\n')
    assert [j.text for j in read_inputs([str(inch)])] == ['A 5" screen.', "Quoted, with a comma."]
    with pytest.raises(ParameterError, match="--fold-frames must be an integer >= 1"):
        run_batch([jobs["ok"]], out_dir=tmp_path / "o", voice=str(tiny_voice), fold_frames=0)
    # a NUL or a lone surrogate in 'out' fails that item alone (the batch died before rendering anything)
    bad = [Job("nul", "Hi.", out="a\x00b.wav", seed=0), Job("sur", "Hi.", out="a\ud800b.wav", seed=0),
           Job("fine", "Fine.", seed=0)]
    s = run_batch(bad, out_dir=tmp_path / "o2", voice=str(tiny_voice), workers=1)
    rows = {r["id"]: r for r in rows_of(tmp_path / "o2")}
    assert (s.done, s.failed) == (1, 2) and rows["fine"]["status"] == "ok"
    assert "NUL" in rows["nul"]["error"] and "surrogate" in rows["sur"]["error"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a read-only folder needs root")
def test_an_item_whose_folder_is_read_only_fails_alone(tiny_voice, tmp_path):
    out = tmp_path / "o"
    (out / "sub").mkdir(parents=True)
    r = subprocess.run(["mount", "--bind", "-o", "ro", str(out / "sub"), str(out / "sub")], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {r.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(out / "sub")], capture_output=True)
        jobs = [Job("a", "First.", out="sub/a.wav", seed=0), Job("b", "Second.", seed=0), Job("c", "Third.", seed=0)]
        s = run_batch(jobs, out_dir=out, voice=str(tiny_voice), workers=1)
        rows = {r["id"]: r for r in rows_of(out)}
        assert (s.done, s.failed) == (2, 1) and rows["b"]["status"] == rows["c"]["status"] == "ok"
        assert rows["a"]["status"] == "failed" and "cannot write sub/a.wav" in rows["a"]["error"]
    finally:
        subprocess.run(["umount", str(out / "sub")], check=False)


def test_text_inputs_are_read_as_say_reads_them(tmp_path, caplog):
    import logging
    import threading

    latin = tmp_path / "latin.txt"
    latin.write_bytes("Caf\xe9 au lait.\n".encode("cp1252"))
    with caplog.at_level(logging.WARNING):
        (job,) = read_inputs([str(latin)])
    assert job.text == "Café au lait." and "reading it as Windows-1252" in caplog.text  # (was 'Caf\ufffd')
    nul = tmp_path / "nul.txt"
    nul.write_bytes(b"a\x00b\n")
    with pytest.raises(ParameterError, match="binary file"):
        read_inputs([str(nul)])
    fifo = tmp_path / "lines.fifo"  # a shell's <(...): not a regular file ('no such file' before)
    os.mkfifo(fifo)
    threading.Thread(target=lambda: fifo.write_text("From a pipe.\n"), daemon=True).start()
    assert [j.text for j in read_inputs([str(fifo)])] == ["From a pipe."]
    with pytest.raises(ParameterError, match="is a folder"):
        read_inputs([str(tmp_path)])


def test_a_results_file_that_is_not_a_ledger_is_left_alone(tiny_voice, tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    theirs = "time,score\n1,2\n3,4\n"
    (out / RESULTS_NAME).write_text(theirs)
    with pytest.raises(ParameterError, match="is not a wavern ledger"):
        run_batch([Job("a", "Hi.", seed=0)], out_dir=out, voice=str(tiny_voice), workers=1)
    assert (out / RESULTS_NAME).read_text() == theirs  # (it was rewritten, empty)



def test_a_second_run_into_the_same_folder_is_refused_while_one_runs(tiny_voice, tmp_path):
    """Two runs into one folder each rewrote results.jsonl from their own rows: the first to finish
    lost its rows. A run holds the folder's lock (an flock on the folder); a second one is refused
    and changes nothing."""
    import fcntl

    out = tmp_path / "o"
    out.mkdir()
    held = os.open(out, os.O_RDONLY | os.O_DIRECTORY)  # another run holds the folder
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ParameterError, match="another wavern render is writing into"):
            run_batch([Job("a", "Hello.", seed=0)], out_dir=out, voice=str(tiny_voice))
        assert list(out.iterdir()) == []
    finally:
        os.close(held)
    s = run_batch([Job("a", "Hello.", seed=0)], out_dir=out, voice=str(tiny_voice))  # free again
    assert s.done == 1
    s = run_batch([Job("a", "Hello.", seed=0)], out_dir=out, voice=str(tiny_voice))  # and released after a run
    assert s.skipped == 1


def test_sources_name_the_line_an_item_starts_on_and_every_request_field_counts(tmp_path):
    """(mutation audit) A CSV row's source and default id count the header as line 1; a
    paragraph's source is its first line; each of text, voice, speed, seed, pitch, pitch range,
    speaker and output name changes the request key (a changed speaker kept the old audio)."""
    import dataclasses

    from wavern.app.render import _request_key

    (tmp_path / "paras.txt").write_text("One a\none b.\n\n\nTwo.\n")
    (tmp_path / "m.csv").write_text("id,text\nc1,Hello.\n,No id here.\n")
    paras = read_inputs([str(tmp_path / "paras.txt")], paragraphs=True)
    assert [j.source.rsplit(":", 1)[1] for j in paras] == ["1", "5"]
    rows = read_inputs([str(tmp_path / "m.csv")])
    assert [(j.id, j.source.rsplit(":", 1)[1]) for j in rows] == [("c1", "2"), ("m-00003", "3")]
    base = Job("a", "Hello.", speed=1.0, seed=3, pitch=50.0, pitch_range=50.0, speaker="en+m1")
    key = _request_key(base, "/voices/v", "a.wav")
    variants = [dataclasses.replace(base, text="Hello!"), dataclasses.replace(base, speed=1.1),
                dataclasses.replace(base, seed=4), dataclasses.replace(base, pitch=60.0),
                dataclasses.replace(base, pitch_range=40.0), dataclasses.replace(base, speaker="en+f2")]
    assert all(_request_key(j, "/voices/v", "a.wav") != key for j in variants)
    assert _request_key(base, "/voices/w", "a.wav") != key and _request_key(base, "/voices/v", "b.wav") != key


def test_an_ssml_file_is_one_item_and_a_manifests_text_may_be_ssml(tiny_voice, tmp_path):
    """wavern render: a file that begins with <speak is one SSML document, one item named after it;
    a manifest row's text may be SSML; the audio is the engine's render of the document, its
    captions show the words, not the markup; bad markup fails its item alone."""
    from wavern.engine import Voice
    from wavern.engine.batch import render_utterance

    doc = ('<?xml version="1.0"?>\n<speak>\n  <p>Chapter one.</p>\n  <p>It was a <emphasis>dark</emphasis> night. '
           '<break time="300ms"/> Visit <sub alias="World Wide Web">WWW</sub>.</p>\n</speak>\n')
    (tmp_path / "chapter1.ssml").write_text(doc)
    (tmp_path / "m.jsonl").write_text(json.dumps({"id": "row", "text": "<speak>Row <break time='100ms'/> two.</speak>"})
                                      + "\n" + json.dumps({"id": "bad", "text": "<speak>Bad <prosody></speak>"}) + "\n")
    jobs = read_inputs([str(tmp_path / "chapter1.ssml"), str(tmp_path / "m.jsonl")])
    assert [j.id for j in jobs] == ["chapter1", "row", "bad"] and jobs[0].text == doc.strip()
    out = tmp_path / "out"
    s = run_batch(jobs, out_dir=out, voice=str(tiny_voice), sidecars=["srt"], workers=1)
    assert (s.done, s.failed) == (2, 1)
    rows = {r["id"]: r for r in rows_of(out)}
    assert "not well-formed" in rows["bad"]["error"]
    data, _ = sf.read(str(out / "chapter1.wav"), dtype="int16")
    with Voice.load(tiny_voice) as v:
        ref = render_utterance(v, doc.strip(), jobs[0].config(), seed=jobs[0].seed)
    assert np.array_equal(data, ref.samples)
    cues = [b.splitlines()[2] for b in (out / "chapter1.srt").read_text().strip().split("\n\n")]
    # each cue a word of the document's text (the tiny random model may give a word no frames)
    assert cues[:2] == ["Chapter", "one"] and cues[-2:] == ["Visit", "WWW"] and "dark" in cues
    assert set(cues) <= {"Chapter", "one", "It", "was", "a", "dark", "night", "Visit", "WWW"}
