"""`wavern bench`: the playback simulation against a tick-by-tick player, and a real run whose JSON
must follow the documented schema and add up with the audio it produced (values are not judged)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from wavern.app import cli
from wavern.app.bench import SCHEMA, bench_sentences, busy_processes, simulate_playback
from wavern.app.bench import main as bench_module_main
from wavern.errors import ParameterError

torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[2]
SR = 1000  # a sample rate where one sample is one millisecond


def tick_player(arrival_ms: list[int], samples: list[int]) -> tuple[list[int], int, int]:
    """Naive twin: step a player millisecond by millisecond. Returns (queued samples just before
    each arrival, underruns, ms spent waiting)."""
    arrivals = dict(zip(arrival_ms, samples))
    assert len(arrivals) == len(arrival_ms), "one arrival per tick in this twin"
    queued, started, waiting, underruns, waited, heads = 0, False, False, 0, 0, []
    total = sum(samples)
    played = 0
    for t in range(arrival_ms[-1] + total + 2):
        if t in arrivals:
            heads.append(queued if not waiting else 0)
            if waiting:
                underruns += 1
                waiting = False
            queued += arrivals[t]
            started = True
        if started and played < total:  # one sample (1 ms) per tick
            if queued > 0:
                queued -= 1
                played += 1
            else:
                waiting = True
                waited += 1
    return heads, underruns, waited


def test_simulated_player_matches_a_tick_by_tick_player():
    rng = np.random.default_rng(0)
    for _ in range(30):
        n = int(rng.integers(2, 12))
        samples = rng.integers(5, 60, n).tolist()
        arrival = np.cumsum(rng.integers(1, 70, n)).tolist()
        starts = np.concatenate([[0], np.cumsum(samples)[:-1]]).tolist()
        pb = simulate_playback(np.array(arrival) / 1000.0, starts, samples, SR)
        heads, underruns, waited = tick_player(arrival, samples)
        assert pb.underruns == underruns
        assert pb.underrun_s == pytest.approx(waited / 1000.0, abs=1e-9)
        # Headroom in the twin is clipped at 0 (an empty queue); the simulation keeps the sign.
        np.testing.assert_allclose(np.maximum(pb.headroom_s, 0.0), np.array(heads) / 1000.0, atol=1e-9)


def test_simulated_player_closed_forms():
    # 100 ms chunks every 50 ms: headroom grows by 50 ms per chunk, never runs dry.
    pb = simulate_playback([0.05 * k for k in range(5)], [100 * k for k in range(5)], [100] * 5, SR)
    np.testing.assert_allclose(pb.headroom_s, [0.05 * k for k in range(5)], atol=1e-12)
    np.testing.assert_allclose(pb.buffered_s, [0.1 + 0.05 * k for k in range(5)], atol=1e-12)
    assert (pb.underruns, pb.underrun_s) == (0, 0.0)
    # A chunk 100 ms late: one underrun of 0.1 s, and the player's clock shifts by it.
    pb = simulate_playback([0.0, 0.2, 0.25], [0, 100, 200], [100, 100, 100], SR)
    np.testing.assert_allclose(pb.headroom_s, [0.0, -0.1, 0.05], atol=1e-12)
    assert pb.underruns == 1 and pb.underrun_s == pytest.approx(0.1)
    with pytest.raises(ParameterError, match="contiguous"):
        simulate_playback([0.0, 0.1], [0, 50], [100, 100], SR)


def test_busy_processes_are_started_and_ended():
    with busy_processes(2) as procs:
        assert len(procs) == 2 and all(p.poll() is None for p in procs)
    assert all(p.returncode is not None for p in procs)


def test_shipped_sentences_are_varied():
    s = bench_sentences()
    lengths = sorted(len(x) for x in s)
    assert len(s) >= 15 and lengths[0] < 20 and lengths[-1] > 200


def _flat_keys(obj, prefix="") -> set[str]:
    keys = set()
    for k, v in obj.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict) and path != "system.cpu_features":
            keys |= _flat_keys(v, path + ".")
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            for item in v:
                keys |= _flat_keys(item, path + "[].")
        else:
            keys.add(path)
    return keys


@pytest.fixture(scope="module")
def bench_run(tiny_voice, tmp_path_factory):
    d = tmp_path_factory.mktemp("bench")
    sentences = d / "s.txt"
    sentences.write_text("Hello.\nThe second request is a little longer, with a comma.\nTwo sentences. Here.\n")
    from threadpoolctl import threadpool_limits

    from wavern.app.bench import _blas_threads

    with threadpool_limits(limits=2, user_api="blas"):  # the host's count: the voice runs at 1, gives 2 back
        rc = cli.main(["bench", "--voice", str(tiny_voice), "--sentences", str(sentences), "--repeat", "2",
                       "--json", str(d / "r.json"), "--plot", str(d / "r.png"), "--compare", "torch",
                       "--compare-frames", "3", "--load", "1"])
        assert _blas_threads() == 2
    assert rc == 0
    return json.loads((d / "r.json").read_text()), d, sentences.read_text().splitlines()


def test_json_follows_the_documented_schema(bench_run):
    res, d, _ = bench_run
    compare_keys = {k for k in SCHEMA if k.startswith("compare.")}
    realtime_keys = {k for k in SCHEMA if k.startswith("realtime.")}
    assert res["realtime"] is None  # no --realtime: null, its fields absent
    assert _flat_keys(res) == set(SCHEMA) - {"compare"} - realtime_keys  # compare is an object here
    assert compare_keys == {"compare." + k for k in res["compare"]}
    assert res["schema"] == "wavern-bench-latency" and res["schema_version"] == 1
    assert res["system"]["threads"]["blas"] == 1  # during the run (was read after close: the host's 2)
    assert res["system"]["threads"]["torch"] >= 1  # --compare torch loaded it
    doc = (ROOT / "docs" / "bench" / "latency.md").read_text()
    missing = [k for k in SCHEMA if f"`{k}`" not in doc]
    assert not missing, f"fields missing from docs/bench/latency.md: {missing}"
    assert (d / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_numbers_add_up_with_the_audio(bench_run, tiny_voice):
    from wavern.engine import Voice

    res, _, texts = bench_run
    sr = res["voice"]["sample_rate"]
    s = res["summary"]
    sents = res["sentences"]
    assert s["sentences"] == len(sents) == 2 * len(texts)
    assert [x["text"] for x in sents] == texts * 2
    voice = Voice.load(tiny_voice)
    for x in sents:
        chunks = [c for c in res["chunks"] if c["sentence"] == x["index"]]
        assert len(chunks) == x["chunks"] >= 1
        assert [c["start_sample"] for c in chunks] == list(np.cumsum([0] + [c["samples"] for c in chunks])[:-1])
        assert x["samples"] == sum(c["samples"] for c in chunks) == voice.synthesize(x["text"]).shape[0]
        assert x["audio_s"] == pytest.approx(x["samples"] / sr)
        assert x["compute_s"] == pytest.approx(sum(c["compute_s"] for c in chunks))
        assert x["rtf"] == pytest.approx(x["compute_s"] / x["audio_s"])
        assert x["first_audio_s"] == chunks[0]["arrival_s"] <= x["total_s"]
        assert x["compute_s"] <= x["total_s"]
        assert all(a["arrival_s"] <= b["arrival_s"] for a, b in zip(chunks, chunks[1:]))
        assert chunks[0]["headroom_s"] == 0.0
        if len(chunks) > 1:
            assert x["min_headroom_s"] == pytest.approx(min(c["headroom_s"] for c in chunks[1:]))
        assert x["underruns"] == sum(c["headroom_s"] < 0 for c in chunks)
    voice.close()
    assert s["samples"] == sum(x["samples"] for x in sents)
    assert s["audio_s"] == pytest.approx(s["samples"] / sr)
    assert s["compute_s"] == pytest.approx(sum(x["compute_s"] for x in sents))
    assert s["rtf"] == pytest.approx(s["compute_s"] / s["audio_s"])
    assert sum(x["total_s"] for x in sents) <= s["wall_s"]
    assert s["first_audio_s"]["p50"] == pytest.approx(np.median([x["first_audio_s"] for x in sents]))
    assert s["first_audio_s"]["max"] == max(x["first_audio_s"] for x in sents)
    assert s["underruns"] == sum(x["underruns"] for x in sents)
    assert s["chunk_load"]["max"] == pytest.approx(max(c["compute_s"] / (c["samples"] / sr) for c in res["chunks"]))
    assert s["device_underruns"] is None and s["peak_rss_mib"] > 0
    assert res["system"]["load_processes"] == 1 and res["system"]["sink"] == "null"
    assert res["timings"]["load_s"] > 0 and res["timings"]["warmup_s"] > 0
    c = res["compare"]
    assert c["frames"] == 3 and c["samples"] == 3 * 256
    assert c["speedup"] == pytest.approx(c["engine_samples_per_s"] / c["torch_samples_per_s"])
    # same weights, same uniforms: the streams agree (a float near-tie may flip one late draw, after
    # which they part; another random stream matched 0 of the 768 samples)
    assert c["matching_fraction"] >= 0.9


def test_device_bench_without_a_device_is_a_clear_error(tiny_voice, capsys):
    from wavern.engine.sinks import list_output_devices

    if list_output_devices():
        pytest.skip("this machine has an audio device")
    assert cli.main(["bench", "--voice", str(tiny_voice), "--device"]) == 2
    assert "audio" in capsys.readouterr().err


def test_realtime_run_plays_exactly_the_asked_audio_through_a_paced_sink(tiny_voice, tmp_path):
    """--realtime: the sentences as one text, request after request, cut at the target; the JSON
    follows the schema, and the paced sink's counters add up (values are not judged)."""
    sentences = tmp_path / "s.txt"
    sentences.write_text("Hello there.\nA second line.\n")
    out = tmp_path / "rt.json"
    rc = bench_module_main(["--voice", str(tiny_voice), "--sentences", str(sentences), "--realtime", "1.5",
                            "--buffer", "0.5", "--json", str(out)])
    assert rc == 0
    res = json.loads(out.read_text())
    assert res["compare"] is None  # no --compare: null, its fields absent; realtime is an object
    assert _flat_keys(res) == set(SCHEMA) - {k for k in SCHEMA if k.startswith("compare.")} - {"realtime"}
    rt, s = res["realtime"], res["summary"]
    sr = res["voice"]["sample_rate"]
    assert res["system"]["sink"] == "paced" and len(res["system"]["loadavg"]) == 3
    assert s["samples"] == round(1.5 * sr) and rt["audio_s"] == pytest.approx(1.5)
    assert rt["requests"] == len(res["sentences"]) >= 1
    assert all(x["text"] == "Hello there. A second line." for x in res["sentences"])
    assert rt["text_chars"] == len("Hello there. A second line.")
    assert rt["wall_s"] >= rt["audio_s"]  # the sink plays in real time, so the run cannot be shorter
    assert 0 < rt["blocks"] <= rt["wall_s"] * sr / rt["blocksize"] + 1
    assert 0 <= rt["underruns"] <= rt["blocks"]
    assert rt["underrun_s"] <= rt["underruns"] * rt["blocksize"] / sr + 1e-9
    h = rt["headroom_s"]
    assert 0 <= h["min"] <= h["p10"] <= h["p50"] <= rt["buffer_s"]
    assert rt["cpu_rtf"] == pytest.approx(rt["cpu_s"] / rt["audio_s"])


def test_realtime_options_are_checked(tiny_voice, capsys):
    assert bench_module_main(["--voice", str(tiny_voice), "--realtime", "0"]) == 2
    assert "--realtime must be > 0" in capsys.readouterr().err
    assert bench_module_main(["--voice", str(tiny_voice), "--realtime", "1", "--device"]) == 2
    assert "--device" in capsys.readouterr().err


def test_unwritable_json_or_plot_paths_are_refused_before_the_run(tiny_voice, tmp_path, monkeypatch, capsys):
    import wavern.app.bench as bench

    def no_run(*a, **kw):
        raise AssertionError("the bench ran before its output paths were checked")

    monkeypatch.setattr(bench, "run_bench", no_run)
    for flag, out, message in (("--json", tmp_path / "missing" / "x.json", "does not exist"),
                               ("--plot", tmp_path, "is a folder")):
        assert cli.main(["bench", "--voice", str(tiny_voice), flag, str(out)]) == 2
        err = capsys.readouterr().err
        assert f"{flag} {out}" in err and message in err


def test_plot_without_matplotlib_is_refused_before_the_run(tiny_voice, tmp_path, monkeypatch, capsys):
    import sys

    import wavern.app.bench as bench

    def no_run(*a, **kw):
        raise AssertionError("the bench ran although its plot could not be drawn")

    monkeypatch.setattr(bench, "run_bench", no_run)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    assert cli.main(["bench", "--voice", str(tiny_voice), "--plot", str(tmp_path / "b.png")]) == 2
    assert "--plot needs matplotlib" in capsys.readouterr().err
