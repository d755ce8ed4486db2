"""`wavern bench`: live latency through the real streaming path.

    wavern bench                              # shipped sentences, null sink, summary table
    wavern bench --json out.json --plot out.png
    wavern bench --load 1                     # one other core kept busy while measuring
    wavern bench --device                     # play through the real audio device
    wavern bench --compare torch              # engine vs the torch reference loop, same weights and mel
    wavern bench --realtime 600 --load 1      # 10 min of audio into a sink paced like a sound card

Each sentence of the set is one request: ``Voice.stream(text)`` is drained into a sink (a
:class:`NullSink`, or a :class:`DeviceSink` with ``--device``) and every chunk's arrival time
and compute time (the time spent inside the generator) are recorded. From those:

- time to first audio: from the call to the first chunk;
- RTF: compute time / audio time, per sentence;
- chunk load: a chunk's compute time / its audio duration (above 1, that chunk alone falls behind);
- buffer headroom: a simulated real-time player starts at the first chunk and plays on; the
  headroom when chunk k arrives is how much audio it still had queued (negative = it ran dry:
  an underrun, and the player waits). See :func:`simulate_playback`.

With ``--realtime SECONDS`` the sentences are joined into one long text, spoken request after
request (no pause between them) until SECONDS of audio are made, into a
:class:`~wavern.engine.sinks.PacedSink`: a thread drains the ring at the sample rate as the
sound card callback would and counts underruns with the callback's own code. The producer is
then paced by the ring (it waits when the buffer is full), as in the app.

The JSON layout is :data:`SCHEMA` (version :data:`SCHEMA_VERSION`), written out in
docs/bench/latency.md; the tests check that every emitted field is documented there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import itertools
import json
import logging
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from wavern.app.bench_options import add_bench_arguments
from wavern.errors import ParameterError
from wavern.fileio import check_output_file

__all__ = ["ChunkTiming", "SentenceRun", "Playback", "measure_sentence", "simulate_playback", "busy_processes",
           "run_bench", "bench_main", "bench_sentences", "add_bench_arguments", "SCHEMA", "SCHEMA_VERSION"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1

#: Every field of the JSON, dotted path -> meaning (``[]`` = each element of a list).
SCHEMA: dict[str, str] = {
    "schema": 'always "wavern-bench-latency"',
    "schema_version": f"integer, {SCHEMA_VERSION}; bumped when a field changes meaning or goes away",
    "created": "ISO 8601 UTC time of the run",
    "voice.name": "voice name from voice.json",
    "voice.path": "voice folder",
    "voice.sample_rate": "Hz",
    "voice.hidden_size": "WaveRNN hidden size H",
    "voice.flops_per_sample": "vocoder block-product FLOPs per sample (stored blocks only)",
    "system.python": "Python version",
    "system.platform": "platform.platform()",
    "system.cpu_count": "logical CPUs (os.cpu_count)",
    "system.cpu_features": "object: feature name -> bool, from wavern.app.doctor.cpu_features",
    "system.threads.blas": "BLAS threads (numpy's, which runs the acoustic model) during the run, threadpoolctl",
    "system.threads.torch": "torch.get_num_threads() during the run; null when torch was not loaded (the engine "
                            "does not use it; --compare torch loads it)",
    "system.threads.numba": "numba.get_num_threads() during the run",
    "system.threads.process": "OS threads of the process at the end of the run",
    "system.load_processes": "busy processes started by --load",
    "system.sink": '"null", "device" or "paced" (--realtime)',
    "system.loadavg": "1, 5 and 15 minute load averages (os.getloadavg) at the end of the run",
    "timings.load_s": "Voice.load wall seconds (the first load in the process: kernels from the numba cache)",
    "timings.warmup_s": "Voice.warmup wall seconds (first synthesis: compile or cache load, first acoustic pass)",
    "summary.sentences": "requests measured (sentences x repeat)",
    "summary.samples": "audio samples produced, all requests",
    "summary.audio_s": "audio seconds produced = samples / sample_rate",
    "summary.compute_s": "seconds spent inside the stream generators, all requests",
    "summary.wall_s": "wall seconds from the first call to the end of the last request",
    "summary.rtf": "compute_s / audio_s over all requests",
    "summary.first_audio_s.p50": "median time to first audio, seconds",
    "summary.first_audio_s.p90": "90th percentile time to first audio, seconds",
    "summary.first_audio_s.max": "worst time to first audio, seconds",
    "summary.rtf_per_sentence.p50": "median per-request RTF",
    "summary.rtf_per_sentence.p90": "90th percentile per-request RTF",
    "summary.rtf_per_sentence.max": "worst per-request RTF",
    "summary.chunk_compute_ms.p50": "median compute time of one chunk, ms",
    "summary.chunk_compute_ms.p90": "90th percentile chunk compute time, ms",
    "summary.chunk_compute_ms.p99": "99th percentile chunk compute time, ms",
    "summary.chunk_compute_ms.max": "worst chunk compute time, ms",
    "summary.chunk_load.p50": "median of chunk compute time / chunk audio duration",
    "summary.chunk_load.p90": "90th percentile of the same",
    "summary.chunk_load.p99": "99th percentile of the same",
    "summary.chunk_load.max": "worst chunk; above 1 that chunk took longer to make than to play",
    "summary.headroom_s.min": "least audio queued when a chunk arrived (after each request's first chunk); "
                              "negative = an underrun",
    "summary.headroom_s.p10": "10th percentile of the same, seconds",
    "summary.headroom_s.p50": "median of the same, seconds",
    "summary.underruns": "simulated underruns (a chunk arrived after the player needed it), all requests",
    "summary.underrun_s": "simulated seconds the player waited, all requests",
    "summary.device_underruns": "underruns counted by the device ring (--device), else null",
    "summary.peak_rss_mib": "peak resident memory of the process, MiB",
    "sentences[].index": "request number, 0-based",
    "sentences[].text": "the text",
    "sentences[].chars": "its length in characters",
    "sentences[].samples": "samples produced (= sum of its chunks' samples)",
    "sentences[].audio_s": "samples / sample_rate",
    "sentences[].chunks": "number of chunks",
    "sentences[].first_audio_s": "from the call to the first chunk, seconds",
    "sentences[].total_s": "from the call to the end of the stream, seconds",
    "sentences[].compute_s": "seconds inside the generator (= sum of its chunks' compute_s)",
    "sentences[].rtf": "compute_s / audio_s",
    "sentences[].min_headroom_s": "least headroom of its chunks after the first, seconds (null if one chunk)",
    "sentences[].underruns": "simulated underruns",
    "sentences[].underrun_s": "simulated waiting, seconds",
    "chunks[].sentence": "index of its request",
    "chunks[].start_sample": "first sample within the request",
    "chunks[].samples": "length",
    "chunks[].arrival_s": "from the request's call to the chunk's arrival, seconds",
    "chunks[].compute_s": "seconds inside the generator for this chunk",
    "chunks[].headroom_s": "audio the simulated player still had queued when it arrived, seconds",
    "compare": "null without --compare, else the object below",
    "compare.reference": '"torch": wavern.vocoder.model.WaveRNN.infer with the voice\'s vocoder weights',
    "compare.frames": "mel frames generated by both (from the first sentence's mel)",
    "compare.samples": "samples generated by both = frames x hop",
    "compare.engine_samples_per_s": "engine Vocoder.generate, one stream, median of 3 runs",
    "compare.torch_samples_per_s": "torch reference loop, one run",
    "compare.speedup": "engine_samples_per_s / torch_samples_per_s",
    "compare.matching_fraction": "fraction of identical samples (same uniforms; float rounding may flip a draw, "
                                 "after which the streams diverge)",
    "realtime": "null without --realtime, else the object below",
    "realtime.target_s": "audio seconds asked for (--realtime); the requests stop there",
    "realtime.text_chars": "characters of one request (the sentences joined by spaces)",
    "realtime.requests": "requests spoken back to back",
    "realtime.audio_s": "audio seconds made and played",
    "realtime.wall_s": "wall seconds from the first call until the sink had played everything",
    "realtime.cpu_s": "process CPU seconds over the same span (all threads)",
    "realtime.cpu_rtf": "cpu_s / audio_s",
    "realtime.blocksize": "samples per simulated sound card callback",
    "realtime.buffer_s": "ring capacity, seconds (how far generation may run ahead)",
    "realtime.blocks": "callbacks while audio was expected (from the first write until the producer was done; "
                       "the play-out of the last buffer after that cannot run dry and is not counted)",
    "realtime.underruns": "callbacks that found the ring short while audio was expected (the device's count)",
    "realtime.underrun_s": "seconds of zeros those callbacks played",
    "realtime.headroom_s.min": "least audio queued at a callback while audio was expected, seconds",
    "realtime.headroom_s.p10": "10th percentile of the same",
    "realtime.headroom_s.p50": "median of the same",
    "realtime.max_late_s": "latest the paced thread read a block after its due time while audio was expected "
                           "(the count's resolution: data that came within this lateness counted as on time)",
}


# --------------------------------------------------------------------------------------------
# Measuring one request.

@dataclasses.dataclass(frozen=True)
class ChunkTiming:
    sentence: int
    start_sample: int
    samples: int
    arrival_s: float  # since the request's call
    compute_s: float  # inside the generator for this chunk


@dataclasses.dataclass
class SentenceRun:
    index: int
    text: str
    sample_rate: int
    chunks: list[ChunkTiming]
    first_audio_s: float
    total_s: float

    @property
    def samples(self) -> int:
        return sum(c.samples for c in self.chunks)

    @property
    def audio_s(self) -> float:
        return self.samples / self.sample_rate

    @property
    def compute_s(self) -> float:
        return sum(c.compute_s for c in self.chunks)

    @property
    def rtf(self) -> float:
        return self.compute_s / self.audio_s if self.samples else float("nan")


def measure_sentence(voice, text: str, *, sink, index: int = 0, seed: int = 0,
                     max_samples: int | None = None, end_request: bool = False) -> SentenceRun:
    """Stream ``text`` into ``sink`` and time every chunk (the sink's own time is not compute).

    ``max_samples``: stop the request once this many samples are made (the last chunk is cut).
    """
    from wavern.engine import SpeakConfig

    chunks: list[ChunkTiming] = []
    made = 0
    t0 = time.perf_counter()
    it = voice.stream(text, SpeakConfig(), seed=seed)
    try:
        while max_samples is None or made < max_samples:
            t = time.perf_counter()
            try:
                chunk = next(it)
            except StopIteration:
                break
            now = time.perf_counter()
            x = chunk.samples if max_samples is None else chunk.samples[:max_samples - made]
            # a chunk cut at the target is charged only for the share of it kept (its load stays its own)
            compute = (now - t) * x.shape[0] / max(chunk.samples.shape[0], 1)
            chunks.append(ChunkTiming(index, int(chunk.start_sample), int(x.shape[0]), now - t0, compute))
            made += x.shape[0]
            sink.write(x)
    finally:
        it.close()
    if end_request:  # (--device) the sound card running dry before the next request is no underrun
        sink.end_request()
    total = time.perf_counter() - t0
    if not chunks:
        raise ParameterError(f"sentence {index} ({text[:40]!r}) produced no audio")
    return SentenceRun(index, text, voice.sample_rate, chunks, chunks[0].arrival_s, total)


@dataclasses.dataclass(frozen=True)
class Playback:
    """What a real-time player would have experienced (see :func:`simulate_playback`)."""

    headroom_s: np.ndarray  # (n_chunks,) audio still queued when chunk k arrived; [0] is 0
    buffered_s: np.ndarray  # (n_chunks,) audio queued just after chunk k arrived
    underruns: int
    underrun_s: float


def simulate_playback(arrival_s: Sequence[float], start_sample: Sequence[int], samples: Sequence[int],
                      sample_rate: int) -> Playback:
    """Replay chunk arrivals against a player that starts at the first chunk and never skips.

    The player needs sample ``s`` at ``a_0 + s / sr + W`` where ``W`` is the waiting so far.
    When chunk ``k`` arrives at ``a_k``, the headroom is ``h_k = a_0 + start_k / sr + W - a_k``;
    if ``h_k < 0`` the player ran dry (an underrun) and waits ``-h_k`` more (``W += -h_k``).
    The buffer just after the arrival holds ``(start_k + n_k) / sr - (a_k - a_0 - W)`` seconds.

    Args:
        arrival_s, start_sample, samples: per chunk, in order; chunks must be contiguous.
        sample_rate: Hz.
    """
    a = np.asarray(arrival_s, np.float64)
    s = np.asarray(start_sample, np.int64)
    n = np.asarray(samples, np.int64)
    if not (a.shape == s.shape == n.shape) or a.ndim != 1:
        raise ParameterError(f"arrival_s, start_sample and samples must be 1-D of one length, found {a.shape}, "
                             f"{s.shape}, {n.shape}")
    if a.size and (np.any(s[1:] != s[:-1] + n[:-1]) or np.any(np.diff(a) < 0)):
        raise ParameterError("chunks must be contiguous and arrive in order")
    head = np.zeros(a.size)
    buf = np.zeros(a.size)
    wait, underruns, waited = 0.0, 0, 0.0
    for k in range(a.size):
        need = a[0] + (s[k] - s[0]) / sample_rate + wait
        head[k] = need - a[k]
        if -1e-9 < head[k] < 0:  # float rounding of an exact arrival, not an underrun
            head[k] = 0.0
        if head[k] < 0:
            underruns += 1
            waited += -head[k]
            wait += -head[k]
        buf[k] = (s[k] - s[0] + n[k]) / sample_rate - (a[k] - a[0] - wait)
    return Playback(head, buf, underruns, waited)


# --------------------------------------------------------------------------------------------
# The run.

@contextlib.contextmanager
def busy_processes(n: int) -> Iterator[list[subprocess.Popen]]:
    """Keep ``n`` processes spinning (one core each, if the scheduler spreads them) while inside."""
    if n < 0:
        raise ParameterError(f"--load must be >= 0, found {n}")
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
             for _ in range(n)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def bench_sentences(path: str | os.PathLike | None = None) -> list[str]:
    """The non-blank lines of ``path``, or of the shipped set ``assets/bench/sentences.txt``."""
    if path is None:
        import wavern.assets

        path = Path(wavern.assets.__file__).parent / "bench" / "sentences.txt"
    p = Path(path)
    if not p.is_file():
        raise ParameterError(f"--sentences {p}: no such file")
    lines = [ln.strip() for ln in p.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    if not lines:
        raise ParameterError(f"{p} holds no sentences")
    return lines


def _pct(x, qs=(50, 90)) -> dict:
    x = np.asarray(x, np.float64)
    out = {f"p{q}": float(np.percentile(x, q)) if x.size else None for q in qs}
    out["max"] = float(x.max()) if x.size else None
    return out


def _blas_threads() -> int | None:
    """The threads numpy's BLAS (the acoustic model's) runs with; where it cannot be told apart, the
    most any loaded BLAS runs with (None: no BLAS found). Not simply the most: a BLAS loaded after the
    voice set its threads (scipy's, say, which the voice never multiplies with) keeps the host's count."""
    from threadpoolctl import threadpool_info

    blas = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    numpy_own = [lib["num_threads"] for lib in blas if "numpy" in Path(lib.get("filepath", "")).parent.name]
    counts = numpy_own or [lib["num_threads"] for lib in blas]
    return max(counts) if counts else None


def _os_threads() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    except OSError:
        pass
    import threading

    return threading.active_count()


def compare_torch(voice, mel: np.ndarray, *, seed: int = 0) -> dict:
    """Engine vs the torch reference loop on the same mel, weights and uniforms."""
    import torch

    from wavern.engine import kernels as K
    from wavern.vocoder.config import VocoderConfig
    from wavern.vocoder.export import load_vocoder

    voc = voice.vocoder
    n = mel.shape[0] * voc.hop
    temperature = voice.default_temperature
    gi = voc.frame_inputs(mel)
    times = []
    for _ in range(3):
        st = voc.new_state(seed=seed)
        t = time.perf_counter()
        ours = voc.generate(gi, st, n, temperature=temperature)
        times.append(time.perf_counter() - t)
    model = load_vocoder(voice.path / "vocoder.safetensors", VocoderConfig.from_dict(voice.meta["vocoder"])).eval()
    u = K.uniforms(K.rng_state(seed), n)
    t = time.perf_counter()
    with torch.no_grad():
        ref = model.infer(mel, u, temperature=temperature)
    t_ref = time.perf_counter() - t
    ref = np.asarray(ref.numpy() if hasattr(ref, "numpy") else ref, np.int16)
    eng = n / float(np.median(times))
    tor = n / t_ref
    return {"reference": "torch", "frames": int(mel.shape[0]), "samples": int(n), "engine_samples_per_s": eng,
            "torch_samples_per_s": tor, "speedup": eng / tor, "matching_fraction": float(np.mean(ours == ref))}


def run_bench(voice_path: str | os.PathLike, sentences: Sequence[str], *, repeat: int = 1, device: bool = False,
              load: int = 0, compare: str | None = None, compare_frames: int = 20, seed: int = 0,
              realtime_s: float | None = None, buffer_s: float = 4.0) -> dict:
    """Load the voice, warm it up, stream every sentence and return the result (layout: :data:`SCHEMA`).

    ``realtime_s``: instead, speak the sentences joined into one text, request after request,
    until this many seconds of audio are made, into a :class:`PacedSink` of ``buffer_s``.
    """
    import wavern.engine.kernels  # noqa: F401  first: it configures numba's vectoriser before numba loads

    import numba

    from wavern.app.doctor import cpu_features
    from wavern.engine import Voice
    from wavern.engine.sinks import DeviceSink, NullSink, PacedSink
    from wavern.engine.voicefile import read_voice_json

    if repeat < 1:
        raise ParameterError(f"--repeat must be >= 1, found {repeat}")
    if compare_frames < 1:
        raise ParameterError(f"--compare-frames must be >= 1, found {compare_frames}")
    if realtime_s is not None:
        if not realtime_s > 0:
            raise ParameterError(f"--realtime must be > 0 seconds, found {realtime_s}")
        if device:
            raise ParameterError("--realtime paces a silent sink; it cannot be combined with --device")
        if not buffer_s > 0:
            raise ParameterError(f"--buffer must be > 0 seconds, found {buffer_s}")
    sr = int(read_voice_json(Path(voice_path))["dsp"]["sample_rate"])
    if device:
        sink = DeviceSink(sample_rate=sr)  # no device: fail before the slow part
    elif realtime_s is not None:
        sink = PacedSink(sample_rate=sr, buffer_s=buffer_s)
    else:
        sink = NullSink(sr)
    try:
        t = time.perf_counter()
        voice = Voice.load(voice_path)
        load_s = time.perf_counter() - t
        warmup_s = voice.warmup()
    except BaseException:
        sink.abort()
        raise
    runs: list[SentenceRun] = []
    plays: list[Playback] = []
    if realtime_s is not None:
        text = " ".join(sentences)
        requests = itertools.repeat(text)  # as many as it takes: the loop stops at the target
        target = int(round(realtime_s * sr))
    else:
        requests = [t for _ in range(repeat) for t in sentences]
        target = None
    rt = None
    with busy_processes(load):
        t_all = time.perf_counter()
        c_all = time.process_time()
        made = 0
        try:
            for text in requests:
                if target is not None and made >= target:
                    break
                run = measure_sentence(voice, text, sink=sink, index=len(runs), seed=seed + len(runs),
                                       max_samples=None if target is None else target - made, end_request=device)
                made += run.samples
                runs.append(run)
                plays.append(simulate_playback([c.arrival_s for c in run.chunks],
                                               [c.start_sample for c in run.chunks],
                                               [c.samples for c in run.chunks], voice.sample_rate))
        except BaseException:
            sink.abort()
            raise
        wall_s = time.perf_counter() - t_all
        sink.close()
        if realtime_s is not None:
            rt = _realtime_summary(sink, realtime_s=realtime_s, text=text, runs=runs,
                                   wall_s=time.perf_counter() - t_all, cpu_s=time.process_time() - c_all)
        cmp = None
        if compare == "torch":
            from wavern.conditioning.stream import stream_mel

            utt = voice.analyze(sentences[0])
            mel = next(iter(stream_mel(voice.acoustic, utt.ids, utt.is_global, utt.sentence_of,
                                       speaker=voice.default_speaker))).mel
            cmp = compare_torch(voice, np.ascontiguousarray(mel[:compare_frames]), seed=seed)
        elif compare is not None:
            raise ParameterError(f"--compare {compare!r}: only 'torch' is supported")
    torch = sys.modules.get("torch")
    threads = {"blas": _blas_threads(), "torch": torch.get_num_threads() if torch is not None else None,
               "numba": numba.get_num_threads(), "process": _os_threads()}
    voice.close()  # (gives the process its own thread counts back: read them before)
    chunks = [c for run in runs for c in run.chunks]
    heads = [h for p in plays for h in p.headroom_s[1:]]
    samples = sum(r.samples for r in runs)
    compute = sum(r.compute_s for r in runs)
    out = {
        "schema": "wavern-bench-latency", "schema_version": SCHEMA_VERSION,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "voice": {"name": voice.name, "path": str(voice.path), "sample_rate": sr,
                  "hidden_size": voice.vocoder.hidden_size, "flops_per_sample": voice.vocoder.flops_per_sample},
        "system": {"python": platform.python_version(), "platform": platform.platform(), "cpu_count": os.cpu_count(),
                   "cpu_features": cpu_features(),
                   "threads": threads,
                   "load_processes": load, "sink": "device" if device else "paced" if rt else "null",
                   "loadavg": list(os.getloadavg())},
        "timings": {"load_s": load_s, "warmup_s": warmup_s},
        "summary": {
            "sentences": len(runs), "samples": samples, "audio_s": samples / sr, "compute_s": compute,
            "wall_s": wall_s, "rtf": compute / (samples / sr),
            "first_audio_s": _pct([r.first_audio_s for r in runs]),
            "rtf_per_sentence": _pct([r.rtf for r in runs]),
            "chunk_compute_ms": _pct([1e3 * c.compute_s for c in chunks], (50, 90, 99)),
            "chunk_load": _pct([c.compute_s / (c.samples / sr) for c in chunks], (50, 90, 99)),
            "headroom_s": {"min": float(min(heads)) if heads else None,
                           "p10": float(np.percentile(heads, 10)) if heads else None,
                           "p50": float(np.percentile(heads, 50)) if heads else None},
            "underruns": sum(p.underruns for p in plays), "underrun_s": sum(p.underrun_s for p in plays),
            "device_underruns": sink.underruns if device else None,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        },
        "sentences": [{"index": r.index, "text": r.text, "chars": len(r.text), "samples": r.samples,
                       "audio_s": r.audio_s, "chunks": len(r.chunks), "first_audio_s": r.first_audio_s,
                       "total_s": r.total_s, "compute_s": r.compute_s, "rtf": r.rtf,
                       "min_headroom_s": float(p.headroom_s[1:].min()) if len(r.chunks) > 1 else None,
                       "underruns": p.underruns, "underrun_s": p.underrun_s} for r, p in zip(runs, plays)],
        "chunks": [{"sentence": c.sentence, "start_sample": c.start_sample, "samples": c.samples,
                    "arrival_s": c.arrival_s, "compute_s": c.compute_s, "headroom_s": float(h)}
                   for r, p in zip(runs, plays) for c, h in zip(r.chunks, p.headroom_s)],
        "compare": cmp,
        "realtime": rt,
    }
    return out


def _realtime_summary(sink, *, realtime_s: float, text: str, runs: list[SentenceRun], wall_s: float,
                      cpu_s: float) -> dict:
    sr = sink.sample_rate
    audio_s = sum(r.samples for r in runs) / sr
    head = sink.headroom_samples() / sr
    return {"target_s": realtime_s, "text_chars": len(text), "requests": len(runs), "audio_s": audio_s,
            "wall_s": wall_s, "cpu_s": cpu_s, "cpu_rtf": cpu_s / audio_s if audio_s else None,
            "blocksize": sink.blocksize, "buffer_s": sink.ring.capacity / sr, "blocks": int(head.size),
            "underruns": sink.ring.underruns, "underrun_s": sink.ring.underrun_samples / sr,
            "headroom_s": {"min": float(head.min()) if head.size else None,
                           "p10": float(np.percentile(head, 10)) if head.size else None,
                           "p50": float(np.percentile(head, 50)) if head.size else None},
            "max_late_s": sink.max_late_s}


# --------------------------------------------------------------------------------------------
# Output for people.

def format_report(res: dict) -> str:
    s, t, sy = res["summary"], res["timings"], res["system"]
    feats = ", ".join(k for k, v in sy["cpu_features"].items() if v) or "none probed"
    lines = [
        f"voice {res['voice']['name']} (H={res['voice']['hidden_size']}), {s['sentences']} requests, "
        f"{s['audio_s']:.1f} s of audio, sink {sy['sink']}, {sy['load_processes']} busy process(es)",
        f"load {t['load_s']:.2f} s, warm-up {t['warmup_s']:.2f} s",
        f"time to first audio  p50 {1e3 * s['first_audio_s']['p50']:.0f} ms  p90 "
        f"{1e3 * s['first_audio_s']['p90']:.0f} ms  max {1e3 * s['first_audio_s']['max']:.0f} ms",
        f"RTF                  all {s['rtf']:.3f}  p50 {s['rtf_per_sentence']['p50']:.3f}  p90 "
        f"{s['rtf_per_sentence']['p90']:.3f}  max {s['rtf_per_sentence']['max']:.3f}",
        f"chunk compute        p50 {s['chunk_compute_ms']['p50']:.1f} ms  p99 {s['chunk_compute_ms']['p99']:.1f} ms;"
        f" load p50 {s['chunk_load']['p50']:.3f}  p99 {s['chunk_load']['p99']:.3f}  max {s['chunk_load']['max']:.3f}",
    ]
    h = s["headroom_s"]
    if h["min"] is not None:
        lines.append(f"buffer headroom      min {h['min']:.3f} s  p10 {h['p10']:.3f} s  p50 {h['p50']:.3f} s")
    lines.append(f"underruns            simulated {s['underruns']} ({s['underrun_s']:.3f} s)"
                 + (f", device {s['device_underruns']}" if s["device_underruns"] is not None else ""))
    lines.append(f"peak RSS {s['peak_rss_mib']:.0f} MiB; threads BLAS {sy['threads']['blas']}, numba "
                 f"{sy['threads']['numba']}, process {sy['threads']['process']}; {sy['cpu_count']} CPUs ({feats})")
    rt = res.get("realtime")
    if rt is not None:
        rh = rt["headroom_s"]
        lines.append(f"real time (paced)    {rt['audio_s']:.1f} s of audio in {rt['requests']} request(s) over "
                     f"{rt['wall_s']:.1f} s wall, CPU {rt['cpu_s']:.1f} s (RTF {rt['cpu_rtf']:.3f}); "
                     f"{rt['underruns']} underruns ({rt['underrun_s']:.3f} s) in {rt['blocks']} callbacks; "
                     f"headroom min {rh['min']:.3f} s p10 {rh['p10']:.3f} s; thread at most "
                     f"{1e3 * rt['max_late_s']:.1f} ms late")
    c = res["compare"]
    if c is not None:
        lines.append(f"vs torch loop        engine {c['engine_samples_per_s']:.0f} samples/s, torch "
                     f"{c['torch_samples_per_s']:.0f} samples/s: {c['speedup']:.1f}x over {c['samples']} samples "
                     f"({100 * c['matching_fraction']:.1f}% identical)")
    return "\n".join(lines)


def write_plot(res: dict, path: str | os.PathLike) -> Path:
    """PNG: per-request latency (first audio, total, audio length) and headroom over each request."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sents = res["sentences"]
    idx = np.arange(len(sents))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 7), constrained_layout=True)
    ax1.bar(idx - 0.2, [1e3 * s["first_audio_s"] for s in sents], 0.4, label="time to first audio")
    ax1.bar(idx + 0.2, [1e3 * s["compute_s"] for s in sents], 0.4, label="compute (whole request)")
    ax1.plot(idx, [1e3 * s["audio_s"] for s in sents], "k.", label="audio length")
    ax1.set_yscale("log")
    ax1.set_xlabel("request")
    ax1.set_ylabel("ms")
    ax1.set_title(f"{res['voice']['name']}: latency per request ({res['system']['sink']} sink, "
                  f"{res['system']['load_processes']} busy)")
    ax1.legend(fontsize=8)
    by = {}
    for c in res["chunks"]:
        by.setdefault(c["sentence"], []).append(c)
    for k, cs in by.items():
        ax2.plot([c["arrival_s"] for c in cs], [c["headroom_s"] for c in cs], lw=0.8, alpha=0.7)
    ax2.axhline(0.0, color="r", lw=1)
    ax2.set_xlabel("seconds since the request")
    ax2.set_ylabel("headroom when a chunk arrives (s)")
    ax2.set_title("buffer headroom over each request (below 0 = underrun)")
    out = Path(path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def bench_main(args) -> int:
    """`wavern bench` (argparse namespace from ``wavern.app.cli``); returns the exit status."""
    from wavern.app.voices import resolve_voice

    path = resolve_voice(args.voice)
    sentences = bench_sentences(getattr(args, "sentences", None))
    for flag, out in (("--json", args.json), ("--plot", getattr(args, "plot", None))):
        if out:  # before the run, not after its minutes
            check_output_file(flag, out)
    if getattr(args, "plot", None):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ParameterError("--plot needs matplotlib, which wavern does not install by itself: "
                                 "pip install matplotlib (or wavern's 'eval' extra)") from None
    res = run_bench(path, sentences, repeat=getattr(args, "repeat", 1), device=bool(args.device), load=args.load,
                    compare=args.compare, compare_frames=getattr(args, "compare_frames", 20),
                    realtime_s=getattr(args, "realtime", None), buffer_s=getattr(args, "buffer", 4.0))
    print(format_report(res))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    if getattr(args, "plot", None):
        print(f"wrote {write_plot(res, args.plot)}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m wavern.app.bench``: `wavern bench` with every option of :func:`add_bench_arguments`."""
    import argparse

    from wavern.errors import WavernError

    ap = argparse.ArgumentParser(prog="python -m wavern.app.bench", description=__doc__.splitlines()[0])
    add_bench_arguments(ap)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    try:
        return bench_main(args)
    except WavernError as e:
        print(f"wavern: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
