"""Ring buffer against a naive queue, sinks' file safety, the streaming resampler against one-shot."""

import errno
import io
import threading
import time

import numpy as np
import pytest
import soundfile as sf
from scipy.signal import resample_poly

from wavern.engine.audio_io import read_audio, write_audio
from wavern.engine.chunk import AudioChunk, SpeakConfig
from wavern.engine.ring import AudioRing
from wavern.engine.sinks import FileSink, NullSink, RawStdoutSink, StreamingResampler, play
from wavern.errors import DiskFullError, ParameterError


def test_ring_matches_naive_queue_with_wraparound():
    rng = np.random.default_rng(1)
    ring = AudioRing(100)  # rounds up to 128
    assert ring.capacity == 128
    expected: list[float] = []
    got: list[float] = []
    for _ in range(300):
        n_in = int(rng.integers(0, 60))
        x = rng.standard_normal(n_in).astype(np.float32)
        free = ring.capacity - ring.queued
        x = x[:free]
        assert ring.write(x, timeout_s=0) == x.size
        expected.extend(x.tolist())
        out = np.full(int(rng.integers(1, 50)), 7.0, np.float32)
        queued = ring.queued
        n = ring.read_into(out)
        assert n == min(out.size, queued)  # all it holds, up to the request
        got.extend(out[:n].tolist())
        assert np.all(out[n:] == 0.0)  # shortfall zero-filled
    assert len(got) + ring.queued == len(expected) and len(got) > len(expected) // 2
    np.testing.assert_array_equal(np.array(got, np.float32), np.array(expected[: len(got)], np.float32))


def test_ring_counts_underruns_and_pauses_and_clears():
    ring = AudioRing(64)
    out = np.zeros(16, np.float32)
    ring.read_into(out)
    assert ring.underruns == 1 and ring.underrun_samples == 16
    ring.write(np.ones(40, np.float32))
    ring.paused = True
    assert ring.read_into(out) == 0 and np.all(out == 0) and ring.queued == 40
    ring.paused = False
    assert ring.read_into(out) == 16 and np.all(out == 1)
    ring.clear()
    assert ring.read_into(out) == 0 and ring.queued == 0
    ring.finished = True
    before = ring.underruns
    ring.read_into(out)
    assert ring.underruns == before  # no underrun once the producer is done


def test_ring_counts_a_partial_shortfall_and_the_lowest_headroom_per_request():
    """(mutation audit) A read that finds 10 of 16 samples is 6 samples short, not 16; the
    lowest level the consumer found is kept, and reset_stats starts a request's count afresh."""
    ring = AudioRing(64)
    out = np.zeros(16, np.float32)
    ring.write(np.ones(10, np.float32))
    assert ring.read_into(out) == 10
    assert (ring.underruns, ring.underrun_samples) == (1, 6)
    ring.write(np.ones(60, np.float32))
    ring.read_into(out)  # found 60
    ring.read_into(out)  # found 44
    assert ring.min_headroom == 10  # the lowest level a read found (10; then 60 and 44)
    ring.reset_stats()
    assert (ring.underruns, ring.underrun_samples, ring.min_headroom) == (0, 0, ring.capacity)
    ring.read_into(out)  # found 28
    ring.read_into(out)  # found 12
    assert ring.min_headroom == 12


def test_ring_producer_waits_for_consumer_thread():
    ring = AudioRing(256)
    data = np.arange(5000, dtype=np.float32)
    got = []

    def consume():
        out = np.zeros(64, np.float32)
        while sum(len(g) for g in got) < data.size:
            n = ring.read_into(out)
            got.append(out[:n].copy())

    t = threading.Thread(target=consume)
    t.start()
    assert ring.write(data) == data.size
    t.join(timeout=30)
    np.testing.assert_array_equal(np.concatenate(got), data)


@pytest.mark.parametrize("rates", [(22050, 48000), (22050, 44100), (22050, 16000)])
def test_streaming_resampler_equals_one_shot(rates):
    x = np.random.default_rng(0).standard_normal(12000).astype(np.float32)
    r = StreamingResampler(*rates)
    parts, i = [], 0
    for n in [1, 57, 2000, 3, 5000, 4939]:
        parts.append(r.process(x[i:i + n]))
        i += n
    parts.append(r.flush())
    np.testing.assert_allclose(np.concatenate(parts), resample_poly(x, r.up, r.down), atol=1e-6)


def _chunks(n_chunks=3, size=1000):
    for i in range(n_chunks):
        yield AudioChunk(np.full(size, 0.1 * (i + 1), np.float32), 22050, i * size, (0, 5))


def test_file_sink_writes_atomically(tmp_path):
    out = tmp_path / "a.flac"
    stats = play(_chunks(), FileSink(out, sample_rate=22050))
    assert stats.chunks == 3 and abs(stats.audio_seconds - 3000 / 22050) < 1e-9
    data, sr = sf.read(out)
    assert sr == 22050 and data.shape == (3000,)
    assert abs(data[-1] - 0.3) < 1e-3
    assert not list(tmp_path.glob(".*part"))


def test_file_sink_disk_full_leaves_nothing(tmp_path, monkeypatch):
    out = tmp_path / "b.wav"
    sink = FileSink(out, sample_rate=22050)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sink._f, "write", full)
    with pytest.raises(DiskFullError, match="disk full"):
        play(_chunks(), sink)
    assert not out.exists() and not list(tmp_path.iterdir())


def test_generator_error_aborts_file_sink(tmp_path):
    out = tmp_path / "c.wav"

    def bad():
        yield from _chunks(1)
        raise RuntimeError("model exploded")

    with pytest.raises(RuntimeError):
        play(bad(), FileSink(out, sample_rate=22050))
    assert not out.exists() and not list(tmp_path.iterdir())


def test_raw_sink_is_s16le():
    buf = io.BytesIO()
    play(_chunks(1, 4), RawStdoutSink(buf))
    assert np.frombuffer(buf.getvalue(), "<i2").tolist() == [3277] * 4


def test_raw_sink_clips_past_full_scale_instead_of_wrapping():
    """`say --out -` with a loud passage (volume above 1): samples beyond full scale are clipped,
    not wrapped into clicks of the opposite sign (mutation audit)."""
    buf = io.BytesIO()
    RawStdoutSink(buf).write(np.array([0.5, 1.2, -1.5, -1.0, 0.999985], np.float32))
    assert np.frombuffer(buf.getvalue(), "<i2").tolist() == [16384, 32767, -32768, -32768, 32767]


def test_null_sink_keeps_audio():
    sink = NullSink(keep=True)
    play(_chunks(2, 10), sink)
    assert sink.samples_written == 20 and sink.audio.shape == (20,)


def test_read_audio_downmixes_resamples_and_rejects_garbage(tmp_path):
    stereo = np.stack([np.full(16000, 0.5), np.full(16000, -0.1)], axis=1)
    sf.write(tmp_path / "s.wav", stereo, 16000)
    x = read_audio(tmp_path / "s.wav", sample_rate=22050)
    assert x.ndim == 1 and abs(len(x) - 22050) <= 1 and abs(np.median(x) - 0.2) < 1e-3
    (tmp_path / "bad.wav").write_bytes(b"RIFF\x00\x00garbage")
    with pytest.raises(ParameterError, match="not a readable audio file"):
        read_audio(tmp_path / "bad.wav", sample_rate=22050)
    sf.write(tmp_path / "t.wav", np.zeros(1000), 22050)
    raw = (tmp_path / "t.wav").read_bytes()
    (tmp_path / "trunc.wav").write_bytes(raw[:30])
    with pytest.raises(ParameterError):
        read_audio(tmp_path / "trunc.wav", sample_rate=22050)
    with pytest.raises(ParameterError, match="unsupported audio file type"):
        write_audio(tmp_path / "x.mp3", np.zeros(10, np.float32), 22050)
    for bad in (np.nan, np.inf):  # a float file can hold them
        sf.write(tmp_path / "nan.wav", np.r_[np.zeros(100), bad].astype(np.float32), 22050, subtype="FLOAT")
        with pytest.raises(ParameterError, match="NaN or infinite samples"):
            read_audio(tmp_path / "nan.wav", sample_rate=22050)
    sf.write(tmp_path / "slow.wav", np.zeros(3000, np.float32), 1)  # 1 Hz: 3000 s once resampled
    with pytest.raises(ParameterError, match=r"sample rate 1 Hz is outside \[4000, 384000\]"):
        read_audio(tmp_path / "slow.wav", sample_rate=22050)


def test_speak_config_limits():
    with pytest.raises(ParameterError, match="speed"):
        SpeakConfig(speed=0)
    with pytest.raises(ParameterError, match="volume"):
        SpeakConfig(volume=-1)


@pytest.mark.skipif(not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() != 0,
                    reason="mounting a tiny filesystem needs root")
def test_real_full_disk_is_disk_full_error(tmp_path):
    """A real ENOSPC from libsndfile (a bare 'System error.') is reported as DiskFullError."""
    import subprocess

    mnt = tmp_path / "tiny"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        big = np.zeros(22050 * 10, np.float32)  # 10 s of 16-bit audio: 441 kB > 64 kB
        with pytest.raises(DiskFullError):
            write_audio(mnt / "a.wav", big, 22050)
        assert list(mnt.iterdir()) == []
        with pytest.raises(DiskFullError):
            play(iter([AudioChunk(big, 22050, 0, (0, 1))]), FileSink(mnt / "b.wav", sample_rate=22050))
        assert list(mnt.iterdir()) == []
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


# ----------------------------------------------------------------------------- paced sink


def test_paced_sink_counts_a_too_slow_producer_like_the_card():
    """Producer writes 10 samples every 20 ticks; the card takes 10 every 10: every other block is short."""
    from wavern.engine.sinks import PacedSink

    now = [0.0]
    sr, block = 1000, 10  # one sample per millisecond, a block every 10 ms
    sink = PacedSink(sample_rate=sr, blocksize=block, buffer_s=1.0, prefill_s=0.0, clock=lambda: now[0], start=False)
    writes = {t: 10 for t in range(0, 200, 20)}  # ticks (ms) -> samples
    for ms in range(0, 200):
        now[0] = ms / sr
        if ms in writes:
            sink.write(np.full(writes[ms], ms, np.float32))
        sink.pump(now[0])
    # Blocks 0, 2, 4, ... find the 10 fresh samples; 1, 3, 5, ... find nothing (an underrun each).
    assert sink.blocks == 20
    assert sink.underruns == 10 and sink.ring.underrun_samples == 100
    assert sink.played_samples == 100
    heads = sink.headroom_samples()
    assert heads.tolist() == [10, 0] * 10
    sink.end_request()
    now[0] = 0.5
    sink.pump(now[0])
    assert sink.underruns == 10  # dry after the request's end is not an underrun
    sink.abort()


@pytest.mark.parametrize("prefill", [0, 25])
def test_paced_sink_matches_a_naive_card_on_random_schedules(prefill):
    from wavern.engine.sinks import PacedSink

    rng = np.random.default_rng(3)
    sr, block = 1000, 16
    for trial in range(20):
        writes = {}
        t = int(rng.integers(0, 30))
        for _ in range(int(rng.integers(3, 30))):
            writes[t] = int(rng.integers(1, 60))
            t += int(rng.integers(1, 40))
        n_blocks = t // block + 40
        now = [0.0]
        sink = PacedSink(sample_rate=sr, blocksize=block, buffer_s=4.0, prefill_s=prefill / sr, clock=lambda: now[0],
                         start=False)
        for ms in range(n_blocks * block):
            now[0] = ms / sr
            if ms in writes:
                sink.write(np.ones(writes[ms], np.float32))
            if ms == max(writes):
                sink.end_request()
            sink.pump(now[0])
        # Twin: step block by block; playing from the first write until the last one, once
        # `prefill` samples were queued (or everything was written).
        queued, started, done, rolling, under, heads = 0, False, False, False, 0, []
        for k in range(n_blocks):
            for ms in range((k - 1) * block + 1 if k else 0, k * block + 1):
                if ms in writes:
                    queued += writes[ms]
                    started = True
                    done = ms == max(writes)
            rolling = rolling or (started and (queued >= prefill or done))
            if not rolling:
                continue  # pre-roll: silence, nothing consumed
            playing = started and not done
            if playing:
                heads.append(queued)
                under += queued < block
            queued -= min(queued, block)
        assert sink.underruns == under, trial
        assert sink.headroom_samples().tolist() == heads, trial
        assert sink.played_samples == sum(writes.values())
        sink.abort()


def test_paced_sink_thread_follows_its_clock():
    """The clock thread consumes exactly the blocks its (fake) clock says are due."""
    import time

    from wavern.engine.sinks import PacedSink

    # The sink's start (its first clock reading) is t = 0, where block 0 falls due; the thread then
    # sees t = -5 ms until the samples are written, or a busy machine could let it read block 0
    # empty before the write.
    now = [-0.005]
    readings = iter([0.0])
    sink = PacedSink(sample_rate=1000, blocksize=10, buffer_s=1.0, prefill_s=0.0, wake_s=0.001,
                     clock=lambda: next(readings, now[0]), keep=True)
    try:
        sink.write(np.arange(35, dtype=np.float32))
        now[0] = 0.025  # blocks 0, 1, 2 are due (read at 0, 10 and 20 ms)
        deadline = time.monotonic() + 30  # a safety net for a stuck thread, not a speed threshold
        while sink.blocks < 3 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert sink.blocks == 3 and sink.underruns == 0
        np.testing.assert_array_equal(sink.played, np.arange(30, dtype=np.float32))
        now[0] = 0.045  # blocks 3 and 4: 5 samples left, then nothing: two short blocks
        while sink.blocks < 5 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert sink.blocks == 5 and sink.underruns == 2
    finally:
        sink.abort()
    assert not sink._thread.is_alive()


def test_paced_sink_is_idle_until_the_first_write_and_drains_on_close():
    from wavern.engine.sinks import PacedSink

    now = [0.0]
    sink = PacedSink(sample_rate=1000, blocksize=10, clock=lambda: now[0], start=False)
    now[0] = 1.0
    sink.pump(now[0])  # 101 blocks of waiting for the first audio: latency, not underruns
    assert sink.blocks == 101 and sink.underruns == 0 and sink.headroom_samples().size == 0
    with pytest.raises(ParameterError, match="blocksize"):
        PacedSink(sample_rate=1000, blocksize=0, start=False)


def test_a_card_reading_during_the_first_write_still_waits_for_the_pre_roll():
    """Review: the flag ``finished`` went False only after the copy, so a card read right after
    the copy of a first chunk shorter than the pre-roll saw a finished request and played it
    at once, skipping the pre-roll. The card is made to read exactly there."""
    from wavern.engine.sinks import PacedSink

    sr = 1000
    now = [0.0]
    sink = PacedSink(sample_rate=sr, blocksize=10, prefill_s=0.04, clock=lambda: now[0], start=False)
    real = sink.ring.write

    def write_then_card_reads(x, **kw):
        n = real(x, **kw)
        now[0] += 0.01
        sink.pump(now[0])  # the card's callback between the copy and the caller's next statement
        return n

    sink.ring.write = write_then_card_reads
    sink.write(np.ones(20, np.float32))  # half the 40-sample pre-roll
    assert sink.ring.priming and sink.played_samples == 0 and sink.ring.queued == 20
    sink.write(np.ones(20, np.float32))  # the pre-roll is there: it plays
    assert not sink.ring.priming and sink.played_samples > 0 and sink.underruns == 0


def test_voice_stream_through_a_paced_sink_plays_every_sample(tiny_voice):
    """Real stream, real clock thread (20x faster than real time): what the card played is the stream."""
    import time

    from wavern.engine import Voice
    from wavern.engine.sinks import PacedSink

    voice = Voice.load(tiny_voice)
    try:
        text = "Two short sentences. Here they are."
        ref = voice.synthesize(text, seed=5)
        sink = PacedSink(sample_rate=22050, keep=True, clock=lambda: 20.0 * time.perf_counter())
        stats = play(voice.stream(text, seed=5), sink)
        np.testing.assert_array_equal(sink.played, ref)
        assert stats.underruns == sink.ring.underruns
    finally:
        voice.close()


def test_ring_pre_roll_waits_for_the_margin_then_plays_and_rearms_after_a_request():
    ring = AudioRing(256, prefill=40)
    out = np.full(10, 7.0, np.float32)
    ring.write(np.ones(30, np.float32))
    assert ring.read_into(out) == 0 and np.all(out == 0) and ring.priming  # 30 < 40: silence
    assert ring.underruns == 0 and ring.queued == 30
    ring.write(np.ones(20, np.float32))  # 50 queued: the stream starts
    assert [ring.read_into(out) for _ in range(5)] == [10] * 5 and not ring.priming
    assert ring.read_into(out) == 0 and ring.underruns == 1  # mid-stream shortfall: an underrun
    ring.finished = True
    assert ring.read_into(out) == 0 and ring.underruns == 1 and ring.priming  # request over: pre-roll again
    ring.finished = False
    ring.write(np.ones(10, np.float32))
    assert ring.read_into(out) == 0 and ring.underruns == 1  # 10 < 40: silence again
    ring.finished = True  # a request shorter than the pre-roll still plays
    assert ring.read_into(out) == 10 and np.all(out == 1)
    with pytest.raises(ValueError, match="prefill"):
        AudioRing(64, prefill=65)


def test_closing_a_paused_paced_sink_drops_its_queue_instead_of_waiting_forever():
    import threading

    from wavern.engine.sinks import PacedSink

    sink = PacedSink(sample_rate=1000, blocksize=10, buffer_s=5.0, prefill_s=0.0, wake_s=0.001)
    sink.write(np.ones(2000, np.float32))  # 2 s of audio queued, at the sink's real clock
    sink.pause()
    closer = threading.Thread(target=sink.close, daemon=True)
    closer.start()
    closer.join(timeout=30)  # a safety net for a hang, not a speed threshold: paused, it plays nothing
    assert not closer.is_alive() and not sink._thread.is_alive()
    assert sink.ring.queued > 0  # dropped, not played out


def _fake_sounddevice(monkeypatch, state):
    """A sounddevice with one 22050 Hz output whose stream calls back from a thread while
    ``state['plugged']``."""
    import sys
    import threading
    import types

    sd = types.ModuleType("sounddevice")

    def query_devices(device=None, kind=None):
        d = {"name": "fake", "max_output_channels": 2, "default_samplerate": 22050.0}
        return d if kind else [d]

    class OutputStream:
        def __init__(self, samplerate, channels, dtype, device, blocksize, callback):
            self.bs, self.cb, self.active, self._quit = blocksize, callback, False, threading.Event()

        def start(self):
            self.active = True

            def run():
                buf = np.zeros((self.bs, 1), np.float32)
                while not self._quit.is_set() and state["plugged"]:
                    self.cb(buf, self.bs, None, None)
                    time.sleep(0.001)
                self.active = False

            threading.Thread(target=run, daemon=True).start()

        def stop(self):
            self._quit.set()

        abort = stop

        def close(self):
            pass

    sd.query_devices, sd.OutputStream = query_devices, OutputStream
    sd.check_output_settings = lambda **kw: None
    monkeypatch.setitem(sys.modules, "sounddevice", sd)


def test_a_device_that_stops_calling_back_is_an_error_not_a_hang(monkeypatch):
    import wavern.engine.sinks as sinks
    from wavern.errors import AudioDeviceError

    state = {"plugged": True}
    _fake_sounddevice(monkeypatch, state)
    monkeypatch.setattr(sinks, "DEVICE_STALL_S", 0.3)
    sink = sinks.DeviceSink(sample_rate=22050, buffer_s=0.1)
    sink.write(np.full(22050, 0.1, np.float32))  # a second through a 0.1 s ring: the card keeps taking it
    sink.pause(True)  # paused, the card still calls back (reading silence): waiting is not a failure
    done = threading.Event()
    threading.Thread(target=lambda: (sink.write(np.full(8192, 0.1, np.float32)), done.set()), daemon=True).start()
    time.sleep(0.6)
    assert not done.is_set()  # waiting for room past the stall time, the device alive
    sink.pause(False)
    assert done.wait(10)
    state["plugged"] = False  # unplugged: no more callbacks
    t0 = time.monotonic()
    with pytest.raises(AudioDeviceError, match="stopped taking audio"):
        sink.write(np.full(22050, 0.1, np.float32))
    assert time.monotonic() - t0 < 30  # (a bound on the test, not a speed claim)
    sink.abort()


def test_paced_sink_lateness_counts_only_blocks_read_while_playing():
    """(mutation audit) bench's "ms late" is how late the card read blocks while a request
    played: a pump that catches up on a second of idle blocks is not lateness."""
    from wavern.engine.sinks import PacedSink

    now = [0.0]
    sink = PacedSink(sample_rate=1000, blocksize=10, buffer_s=1.0, prefill_s=0.0, clock=lambda: now[0], start=False)
    now[0] = 1.0
    sink.pump(now[0])  # 101 idle blocks read a whole second late: not playing
    assert sink.blocks == 101 and sink.max_late_s == 0.0
    sink.write(np.zeros(200, np.float32))  # a request: 20 blocks of audio
    now[0] = 1.2 + 0.005  # the next 20 blocks are due by 1.2 s; read 5 ms after the last is due
    sink.pump(now[0])
    assert 0.005 - 1e-9 <= sink.max_late_s <= 0.2 + 1e-9
