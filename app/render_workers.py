"""`wavern render`'s workers: :class:`RenderWorker` (one per process or Ray actor, each voice loaded
once) and the ways of running it: in this process, in a process pool, on Ray; :class:`Grouper`
hands the items out in groups of about :data:`GROUP_SEGMENTS` vocoder segments."""

from __future__ import annotations

import logging
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Iterator

from wavern.app.render_inputs import speak_config
from wavern.errors import ParameterError, WavernError
from wavern.proc import exit_with_parent

__all__ = ["RenderWorker", "Grouper", "GROUP_SEGMENTS", "GROUP_MAX_ITEMS", "run_inline", "run_pool", "run_ray"]

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# Workers: the same class in a process pool and as a Ray actor.

class RenderWorker:
    """Renders jobs; loads each voice once, on first use.

    Args:
        voices: voice key -> a folder path, or the folder's files as ``{name: bytes}`` (for Ray
            nodes that do not share the driver's disk; written to a temp folder on first use).
        fold_frames, overlap_frames: the vocoder's folding (:func:`wavern.engine.batch.render_frames`).
        lexicon: pronunciations every voice uses, in lexicon.json's form (``Lexicon.to_json``), or None.
    """

    def __init__(self, voices: dict[str, str | dict[str, bytes]], *, fold_frames: int | None = None,
                 overlap_frames: int | None = None, lexicon: dict | None = None):
        from wavern.engine import batch
        from wavern.engine.voice import use_threads

        # One BLAS thread per worker: workers are the parallelism, and the acoustic model's float
        # sums then run in one order everywhere, so a pool, Ray and this process give the same audio.
        use_threads(1)
        self._sources = dict(voices)
        self._loaded: dict[str, object] = {}
        self._fold = batch.DEFAULT_FOLD_FRAMES if fold_frames is None else fold_frames
        self._overlap = batch.DEFAULT_OVERLAP_FRAMES if overlap_frames is None else overlap_frames
        self._lexicon = lexicon
        self._tmp = None

    def _voice(self, key: str):
        v = self._loaded.get(key)
        if v is None:
            from wavern.engine import Voice

            src = self._sources[key]
            if isinstance(src, dict):
                import tempfile

                if self._tmp is None:
                    self._tmp = tempfile.TemporaryDirectory(prefix="wavern-voice-")
                folder = Path(self._tmp.name) / f"v{len(self._loaded)}"
                folder.mkdir()
                for name, data in src.items():
                    (folder / name).write_bytes(data)
                src = folder
            v = self._loaded[key] = Voice.load(src)
            if self._lexicon is not None:
                from wavern.conditioning.frontend.lexicon import Lexicon

                v.lexicon = Lexicon(self._lexicon)
        return v

    def render(self, job: dict) -> dict:
        """Render one job (a :class:`Job` as a dict plus ``voice_key``); never raises for a bad item."""
        return self.render_group([job])[0]

    def render_group(self, jobs: list[dict]) -> list[dict]:
        """Render several jobs, their vocoder segments in shared batches; one result per job, in order.

        An item's audio does not depend on the others (:func:`wavern.engine.batch.render_utterances`);
        a bad item fails alone. Never raises for a bad item.
        """
        from wavern.engine.batch import UtteranceRequest, render_utterances

        worker = f"{os.uname().nodename}:{os.getpid()}"
        results: list[dict | None] = [None] * len(jobs)
        by_voice: dict[str, list[int]] = {}
        for k, job in enumerate(jobs):
            by_voice.setdefault(job["voice_key"], []).append(k)
        for key, idx in by_voice.items():
            try:
                voice = self._voice(key)
                rendered = render_utterances(
                    voice, [UtteranceRequest(jobs[k]["text"], speak_config(jobs[k]), jobs[k]["seed"]) for k in idx],
                    fold_frames=self._fold, overlap_frames=self._overlap)
            except Exception as e:  # noqa: BLE001 - the voice failed to load: its items fail, the rest go on
                rendered = [e] * len(idx)
            for k, r in zip(idx, rendered):
                job_id = jobs[k]["id"]
                if isinstance(r, WavernError):
                    results[k] = {"id": job_id, "ok": False, "error": str(r), "worker": worker}
                elif isinstance(r, Exception):
                    log.error("item %s failed", job_id, exc_info=r)
                    results[k] = {"id": job_id, "ok": False, "error": f"internal error: {type(r).__name__}: {r}",
                                  "worker": worker}
                else:
                    results[k] = {"id": job_id, "ok": True, "rendered": r, "voice": voice.name, "cpu_s": r.cpu_s,
                                  "worker": worker}
        return results  # type: ignore[return-value]


_WORKER: RenderWorker | None = None


def _pool_init(voices: dict, fold_frames: int | None, overlap_frames: int | None, log_level: int,
               lexicon: dict | None = None) -> None:
    global _WORKER
    logging.basicConfig(level=log_level, format="%(levelname)s %(name)s: %(message)s")
    exit_with_parent()  # a driver killed outright: this worker stops instead of rendering for nobody
    _WORKER = RenderWorker(voices, fold_frames=fold_frames, overlap_frames=overlap_frames, lexicon=lexicon)


def _pool_render(jobs: list[dict]) -> list[dict]:
    assert _WORKER is not None, "worker not initialised"
    return _WORKER.render_group(jobs)


#: Vocoder streams (folded segments) a group of items aims at: the kernels run in lanes from 24
#: streams and cost ~20 % less per stream at 32+ than at 4-16 (docs/bench/engine.md).
GROUP_SEGMENTS = 32
#: Most items in one group (bounds the work a killed run loses and a worker's memory).
GROUP_MAX_ITEMS = 16
#: Mel frames per character of text before any result has come back (the default voice speaks
#: ~19 characters per second, pauses included; a wrong guess only makes the first groups smaller
#: or larger).
_FRAMES_PER_CHAR = 4.5


class Grouper:
    """Cuts the jobs into groups of about ``segments`` vocoder segments each, in order.

    The segment count of an item is estimated from its text length, speed and the frames per
    character seen so far for its voice (:meth:`learn` from finished items). A group also
    holds at most ``max_items`` items and at most its worker's fair share of the jobs left, so
    that every worker gets work up to the end.
    """

    def __init__(self, jobs: list[dict], *, workers: int, segments: int, fold_frames: int | None,
                 max_items: int = GROUP_MAX_ITEMS):
        from wavern.engine.batch import DEFAULT_FOLD_FRAMES

        self._jobs = list(jobs)
        self._next = 0
        self.workers = max(1, int(workers))  # the Ray driver sets it once it knows
        self._segments = max(1, int(segments))
        self._max_items = max(1, int(max_items))
        self._fold = DEFAULT_FOLD_FRAMES if fold_frames is None else fold_frames
        self._rate: dict[str, tuple[float, float]] = {}  # voice key -> (frames, characters / speed)

    def learn(self, job: dict, samples: int) -> None:
        """Record how many samples an item of this text became."""
        frames, chars = self._rate.get(job["voice_key"], (0.0, 0.0))
        self._rate[job["voice_key"]] = (frames + samples / 256, chars + len(job["text"]) / job["speed"])

    def _estimate(self, job: dict) -> float:
        frames, chars = self._rate.get(job["voice_key"], (0.0, 0.0))
        per_char = frames / chars if chars > 0 else _FRAMES_PER_CHAR
        t = per_char * len(job["text"]) / job["speed"]
        return max(1.0, t / self._fold) if self._fold else 1.0

    def next_group(self) -> list[dict]:
        """The next group (empty when every job has been handed out)."""
        left = len(self._jobs) - self._next
        cap = min(self._max_items, -(-left // self.workers))
        group: list[dict] = []
        total = 0.0
        while self._next < len(self._jobs) and len(group) < cap and total < self._segments:
            job = self._jobs[self._next]
            self._next += 1
            group.append(job)
            total += self._estimate(job)
        return group


def run_inline(grouper: Grouper, voices: dict, fold: int | None, overlap: int | None,
                lexicon: dict | None = None) -> Iterator[dict]:
    worker = RenderWorker(voices, fold_frames=fold, overlap_frames=overlap, lexicon=lexicon)
    while group := grouper.next_group():
        yield from worker.render_group(group)


def run_pool(grouper: Grouper, voices: dict, fold: int | None, overlap: int | None, n: int,
              lexicon: dict | None = None) -> Iterator[dict]:
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")  # no fork of a process holding threads (torch, numba)
    ex = ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_pool_init,
                             initargs=(voices, fold, overlap, logging.getLogger().level, lexicon))
    running: set = set()
    try:
        while True:
            while len(running) < 2 * n:  # a short queue: results stream back, memory stays flat
                group = grouper.next_group()
                if not group:
                    break
                running.add(ex.submit(_pool_render, group))
            if not running:
                break
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                try:
                    res = fut.result()
                except BrokenProcessPool as e:
                    raise WavernError(f"a worker process died ({e}); finished items are kept, run the same "
                                      f"command again to resume") from None
                yield from res
    finally:
        for fut in running:
            fut.cancel()
        procs = list(getattr(ex, "_processes", {}).values())  # stop promptly on error or interrupt
        ex.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            if p.is_alive():
                p.terminate()


def _voice_files(path: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(Path(path).iterdir()) if p.is_file()}


def run_ray(grouper: Grouper, voices: dict, fold: int | None, overlap: int | None, n: int | None,
             address: str, lexicon: dict | None = None) -> Iterator[dict]:
    try:
        import ray
    except ImportError:
        raise ParameterError("--ray needs the optional dependency ray: pip install 'wavern[cluster]'") from None
    started = False
    if not ray.is_initialized():
        ray.init(address=None if address == "local" else address, include_dashboard=False,
                 logging_level=logging.WARNING)
        started = True
    actors: list = []
    try:
        # Voice files travel through the object store: nodes need wavern installed, not the voice.
        shipped = ray.put({key: _voice_files(path) for key, path in voices.items()})
        if n is None:
            n = max(1, int(ray.cluster_resources().get("CPU", 1)))
        actor_cls = ray.remote(num_cpus=1)(RenderWorker)
        actors = [actor_cls.remote(shipped, fold_frames=fold, overlap_frames=overlap, lexicon=lexicon)
                  for _ in range(n)]
        grouper.workers = n
        idle = list(actors)
        running: dict = {}
        while True:
            while idle:
                group = grouper.next_group()
                if not group:
                    break
                actor = idle.pop()
                running[actor.render_group.remote(group)] = actor
            if not running:
                break
            ready, _ = ray.wait(list(running), num_returns=1)
            for ref in ready:
                idle.append(running.pop(ref))
                try:
                    res = ray.get(ref)
                except ray.exceptions.RayError as e:
                    raise WavernError(f"a Ray worker failed ({type(e).__name__}: {str(e)[:300]}); finished items "
                                      f"are kept, run the same command again to resume") from None
                yield from res
    finally:
        for a in actors:
            ray.kill(a)
        if started:
            ray.shutdown()


