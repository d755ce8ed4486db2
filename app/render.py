"""`wavern render`: many texts to audio files, offline, resumable.

    wavern render book.txt --out-dir out/            # one item per line
    wavern render chapters.txt --paragraphs --out-dir out/ --format flac --sidecar srt
    wavern render items.jsonl items.csv --out-dir out/ --jobs 2
    cat lines.txt | wavern render - --out-dir out/
    wavern render items.jsonl --out-dir out/ --ray            # local Ray; --ray HOST:PORT for a cluster

Inputs: text files (one item per non-blank line, or per paragraph with ``--paragraphs``),
JSONL or CSV manifests (``id``, ``text``, optional ``voice``, ``speaker``, ``speed``, ``pitch``,
``pitch_range``, ``seed``, ``out``) and
stdin (``-``; a manifest when its first line starts with ``{``).

Each item goes to ``--out-dir/<id>.<format>`` (or the manifest's ``out``) with optional
word-timing sidecars beside it, and gets one row in ``--out-dir/results.jsonl``. Workers
(processes, or Ray actors) load each voice once and return audio; this process alone writes
files (temp file + rename) and then the row, so a row marked ``ok`` means the files are
complete. A rerun skips items with an ``ok`` row whose files exist and whose request (text,
settings, voice files, folding) is unchanged, so a killed batch resumes where it stopped;
failed items are tried again. A bad item is recorded as failed and the
batch goes on; a full disk stops it (exit 2) with nothing half-written left behind.

Workers get items in groups of about :data:`GROUP_SEGMENTS` folded vocoder segments (a sentence
is ~7-22) and generate a group's segments as shared batches, which lets the kernels run in
lanes; an item's audio is the same bytes whatever group it lands in, and its results row is
its own. A killed run loses at most the groups in flight.
Exit status: 0 all items done, 1 some items failed, 2 a problem with the whole batch.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import errno
import io
import json
import logging
import os
import re
import sys
import time
import unicodedata
import zlib
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Iterable, Iterator

from wavern.app.speak import decode_text
from wavern.conditioning.frontend.ssml import looks_like_ssml
from wavern.errors import DiskFullError, ParameterError, WavernError
from wavern.proc import exit_with_parent, sigterm_interrupts

__all__ = ["Job", "read_inputs", "render_main", "run_batch", "RenderWorker", "BatchSummary", "RESULTS_NAME",
           "GROUP_SEGMENTS"]

log = logging.getLogger(__name__)

RESULTS_NAME = "results.jsonl"
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg")
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_MANIFEST_FIELDS = ("id", "text", "voice", "speed", "out", "seed", "pitch", "pitch_range", "speaker")


# --------------------------------------------------------------------------------------------
# Items.

@dataclasses.dataclass(frozen=True)
class Job:
    """One item of a batch.

    id: unique name (the output file's stem unless ``out`` is given).
    text: what to say.
    voice: voice name or folder for this item; None = the batch's ``--voice``.
    speed: speaking rate; out: output path relative to the output folder (None = ``<id>.<format>``).
    seed: sampling seed (default: a hash of the id, so a rerun renders the same audio).
    source: ``file:line`` where the item came from, for messages.
    problem: why the item cannot be rendered, found while reading it (then it is recorded as failed).
    pitch, pitch_range: the voice's pitch level and movement in espeak-ng's units (``SpeakConfig``);
        None = the voice's default.
    speaker: one of the voice's speakers; None = its default.
    """

    id: str
    text: str
    voice: str | None = None
    speed: float = 1.0
    out: str | None = None
    seed: int = 0
    source: str = ""
    problem: str | None = None
    pitch: float | None = None
    pitch_range: float | None = None
    speaker: str | None = None

    def config(self):
        """The item's :class:`~wavern.engine.SpeakConfig` (ParameterError for values out of range)."""
        return _speak_config(dataclasses.asdict(self))


def _speak_config(job: dict):
    """The SpeakConfig of a job's fields (a :class:`Job` as a dict, as workers receive it)."""
    from wavern.engine import SpeakConfig

    return SpeakConfig(speed=job["speed"], pitch=job.get("pitch"), pitch_range=job.get("pitch_range"),
                       speaker=job.get("speaker"))


def _seed_for(item_id: str) -> int:
    return zlib.crc32(item_id.encode("utf-8")) & 0x7FFFFFFF


# A manifest field other than _MANIFEST_FIELDS is named once per input (a typo such as "sped"
# would otherwise change nothing, silently).
_warned_fields: set[tuple[str, str]] = set()


def _manifest_job(rec: object, default_id: str, source: str) -> Job:
    """A :class:`Job` from one manifest record; value problems become ``problem``, not errors."""
    if not isinstance(rec, dict):
        return Job(default_id, "", source=source, problem=f"a manifest row must be an object, found "
                                                          f"{type(rec).__name__}")
    where = source.rsplit(":", 1)[0]
    for key in rec:
        if key not in _MANIFEST_FIELDS and (where, str(key)) not in _warned_fields:
            _warned_fields.add((where, str(key)))
            what = "values beyond the header's columns" if key is None else f"field {key!r}"
            log.warning("%s: %s: not read by wavern (it reads %s); ignored", source, what, ", ".join(_MANIFEST_FIELDS))
    raw_id = rec.get("id")
    item_id = default_id if raw_id is None or str(raw_id).strip() == "" else str(raw_id).strip()
    text = rec.get("text")
    problem = None
    if not isinstance(text, str):
        problem, text = f"field 'text' must be a string, found {text!r}", ""
    speed = 1.0
    if rec.get("speed") not in (None, ""):
        try:
            speed = float(rec["speed"])
        except (TypeError, ValueError):
            problem = problem or f"field 'speed' must be a number, found {rec['speed']!r}"
    seed = _seed_for(item_id)
    if rec.get("seed") not in (None, ""):
        raw = rec["seed"]
        if isinstance(raw, str) and raw.strip().lstrip("+-").isdigit():
            raw = int(raw.strip())  # (a CSV's seeds are text)
        if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw < 2**63:
            seed = raw
        else:  # 1.5 or true were truncated to 1, 1e400 raised OverflowError
            problem = problem or f"field 'seed' must be an integer in [0, 2**63), found {rec['seed']!r}"
    prosody = {}
    for field in ("pitch", "pitch_range"):
        if rec.get(field) not in (None, ""):
            try:
                prosody[field] = float(rec[field])
            except (TypeError, ValueError):
                problem = problem or f"field '{field}' must be a number, found {rec[field]!r}"
    voice = rec.get("voice") or None
    out = rec.get("out") or None
    speaker = rec.get("speaker") or None
    return Job(item_id, text, None if voice is None else str(voice), speed, None if out is None else str(out),
               seed, source, problem, **prosody, speaker=None if speaker is None else str(speaker))


def _text_jobs(text: str, stem: str, name: str, *, paragraphs: bool) -> list[Job]:
    jobs = []
    if paragraphs:
        block: list[str] = []
        start, n = 0, 0
        for i, line in enumerate(text.splitlines() + [""], start=1):
            if line.strip():
                if not block:
                    start = i
                block.append(line.strip())
            elif block:
                n += 1
                jobs.append(Job(f"{stem}-{n:05d}", " ".join(block), seed=_seed_for(f"{stem}-{n:05d}"),
                                source=f"{name}:{start}"))
                block = []
    else:
        for i, line in enumerate(_lines(text), start=1):
            if line.strip():
                jobs.append(Job(f"{stem}-{i:05d}", line.strip(), seed=_seed_for(f"{stem}-{i:05d}"),
                                source=f"{name}:{i}"))
    return jobs


def _lines(text: str) -> list[str]:
    """Lines split at newlines only: JSON may hold a raw U+2028, and a form feed is no new line
    for an editor's line numbers."""
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]


def _jsonl_jobs(text: str, stem: str, name: str) -> list[Job]:
    jobs = []
    for i, line in enumerate(_lines(text), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as e:  # recorded as failed; the other rows are rendered
            why = e.msg if isinstance(e, json.JSONDecodeError) else "nested too deeply"
            jobs.append(Job(f"{stem}-{i:05d}", "", source=f"{name}:{i}", problem=(
                f"not a JSON object ({why}); every line of a JSONL manifest must be one object like "
                f"{{\"id\": \"a\", \"text\": \"Hello.\"}}")))
            continue
        jobs.append(_manifest_job(rec, f"{stem}-{i:05d}", f"{name}:{i}"))
    return jobs


def _csv_jobs(text: str, stem: str, name: str) -> list[Job]:
    reader = csv.DictReader(io.StringIO(text), strict=True)  # strict: a quote never closed is an error (it
    # swallowed every later row into one item's text, silently)
    fields = [f.strip() for f in (reader.fieldnames or [])]
    if "text" not in fields:
        raise ParameterError(f"{name}: a CSV manifest needs a header row with a 'text' column (and optionally "
                             f"{', '.join(f for f in _MANIFEST_FIELDS if f != 'text')}); found {fields}")
    reader.fieldnames = fields
    try:
        return [_manifest_job(rec, f"{stem}-{i:05d}", f"{name}:{i}") for i, rec in enumerate(reader, start=2)]
    except csv.Error as e:  # a field over csv's size limit, a quote never closed, a NUL byte, ...
        if "end of data" in str(e):
            raise ParameterError(f"{name}: the file ends inside a quoted field (a quote is never closed)") from None
        raise ParameterError(f"{name}: line {reader.line_num}: {e}") from None


def read_inputs(inputs: Iterable[str], *, paragraphs: bool = False, stdin: io.TextIOBase | None = None) -> list[Job]:
    """Read every input into jobs, in order.

    Args:
        inputs: paths of text files (``.txt`` or anything else), ``.jsonl``/``.ndjson`` and
            ``.csv`` manifests, or ``-`` for stdin. A text that begins with ``<speak`` or ``<?xml``
            is one SSML document, one item (id: the file's stem); a manifest's text may be SSML too.
        paragraphs: text files are split on blank lines instead of lines.
        stdin: where ``-`` reads from (default ``sys.stdin``).

    Raises:
        ParameterError: a missing or unreadable file, a malformed manifest, or two items with
            the same id or output.
    """
    jobs: list[Job] = []
    for inp in inputs:
        if inp == "-":
            source = stdin or sys.stdin
            if source is None:
                raise ParameterError("input -: standard input is closed")
            text = source.read().removeprefix("\ufeff")
            name, stem = "<stdin>", "stdin"
            kind = "jsonl" if text.lstrip().startswith("{") else "text"
        else:
            p = Path(inp)
            if p.is_dir():
                raise ParameterError(f"input {inp} is a folder")
            try:  # a pipe or a process substitution (<(...)) reads too
                data = p.read_bytes()
            except FileNotFoundError:
                raise ParameterError(f"input {inp}: no such file") from None
            except OSError as e:
                raise ParameterError(f"input {inp}: cannot read it ({e.strerror or e})") from None
            text = decode_text(data, f"input {inp}")  # as say --file: a BOM dropped, Windows-1252 named, binary refused
            name, stem = str(p), _safe_stem(p.stem)
            suffix = p.suffix.lower()
            kind = "jsonl" if suffix in (".jsonl", ".ndjson") else "csv" if suffix == ".csv" else "text"
        if kind == "text" and looks_like_ssml(text):  # an SSML document is one item, named after its file
            jobs.append(Job(stem, text.strip(), seed=_seed_for(stem), source=f"{name}:1"))
        elif kind == "jsonl":
            jobs.extend(_jsonl_jobs(text, stem, name))
        elif kind == "csv":
            jobs.extend(_csv_jobs(text, stem, name))
        else:
            jobs.extend(_text_jobs(text, stem, name, paragraphs=paragraphs))
    seen: dict[str, str] = {}
    for j in jobs:
        if j.id in seen:
            raise ParameterError(f"item id '{j.id}' appears twice ({seen[j.id]} and {j.source}); ids must be "
                                 f"unique within a batch")
        seen[j.id] = j.source
    return jobs


def _safe_stem(stem: str) -> str:
    """A file name's stem as the start of item ids: "my book" -> "my_book", "café" -> "cafe"."""
    ascii_stem = unicodedata.normalize("NFKD", stem).encode("ascii", "ignore").decode("ascii")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", ascii_stem).lstrip("._-")[:100]
    return safe or "input"


def _output_name(job: Job, fmt: str) -> str:
    """The item's audio path relative to the output folder; raises ParameterError if unusable."""
    if job.out is None:
        if not _SAFE_ID.match(job.id):
            raise ParameterError(f"id '{job.id}' is not a safe file name (letters, digits, '.', '_', '-', at most "
                                 f"128); give the item an 'out' path instead")
        return f"{job.id}.{fmt}"
    if "\x00" in job.out:
        raise ParameterError(f"out {job.out!r} holds a NUL character")
    try:
        os.fsencode(job.out)
    except UnicodeError:
        raise ParameterError(f"out {job.out!r} is not a name this file system can hold (a lone surrogate?)") from None
    p = Path(job.out)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise ParameterError(f"out '{job.out}' must be a relative path inside the output folder")
    if p.suffix.lower() not in AUDIO_SUFFIXES:
        raise ParameterError(f"out '{job.out}' must end in one of {', '.join(AUDIO_SUFFIXES)}")
    return p.as_posix()


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
                    voice, [UtteranceRequest(jobs[k]["text"], _speak_config(jobs[k]), jobs[k]["seed"]) for k in idx],
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


class _Grouper:
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


def _run_inline(grouper: _Grouper, voices: dict, fold: int | None, overlap: int | None,
                lexicon: dict | None = None) -> Iterator[dict]:
    worker = RenderWorker(voices, fold_frames=fold, overlap_frames=overlap, lexicon=lexicon)
    while group := grouper.next_group():
        yield from worker.render_group(group)


def _run_pool(grouper: _Grouper, voices: dict, fold: int | None, overlap: int | None, n: int,
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


def _run_ray(grouper: _Grouper, voices: dict, fold: int | None, overlap: int | None, n: int | None,
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


# --------------------------------------------------------------------------------------------
# The driver.

@dataclasses.dataclass
class BatchSummary:
    items: int = 0
    done: int = 0
    failed: int = 0
    skipped: int = 0
    audio_s: float = 0.0
    wall_s: float = 0.0

    @property
    def x_real_time(self) -> float:
        return self.audio_s / self.wall_s if self.wall_s > 0 else float("nan")


def _request_key(job: Job, voice_path: str, audio_name: str) -> str:
    """What decides an item's audio; a finished item whose key changed (edited text, other voice,
    speed, pitch, speaker or seed) is rendered again."""
    import hashlib

    what = [job.text, str(Path(voice_path).resolve()), job.speed, job.seed, audio_name]
    if job.pitch is not None or job.pitch_range is not None or job.speaker is not None:
        what += [job.pitch, job.pitch_range, job.speaker]  # (items from before these fields keep their key)
    what = json.dumps(what)
    return hashlib.sha1(what.encode("utf-8")).hexdigest()[:16]


def _render_key(voice_path: str, fold_frames: int, overlap_frames: int, lexicon: dict | None = None) -> str:
    """What decides every item's audio besides its request: the voice's files (a voice folder
    updated in place), the vocoder's folding and the lexicon's entries. Kept in its own ledger
    field so that rows from before it existed stay finished."""
    import hashlib

    what = [fold_frames, overlap_frames] + ([lexicon] if lexicon else [])
    h = hashlib.sha1(json.dumps(what, sort_keys=True, ensure_ascii=False).encode("utf-8"))
    folder = Path(voice_path)
    files = sorted(p for p in folder.iterdir() if p.suffix in (".json", ".safetensors") and p.is_file()) \
        if folder.is_dir() else [folder]
    for p in files:
        h.update(p.name.encode("utf-8") + b"\0")
        with p.open("rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
    return h.hexdigest()[:16]


def _sidecar_names(audio_name: str, sidecars: Iterable[str]) -> list[str]:
    stem = audio_name[: -len(Path(audio_name).suffix)]
    return [f"{stem}.words.json" if kind == "json" else f"{stem}.{kind}" for kind in sidecars]


def _write_item(res: dict, job: Job, out_dir: Path, audio_name: str, sidecars: list[str],
                request: str, render: str) -> dict:
    """Write an item's audio and sidecars (each atomically); return its ledger row."""
    from wavern.engine.audio_io import write_audio
    from wavern.engine.batch import srt_text, timing_json, vtt_text, write_text_atomic

    r = res["rendered"]
    audio_path = out_dir / audio_name
    try:
        audio_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise DiskFullError(f"disk full: cannot create {audio_path.parent}") from None
        raise
    need = 2 * r.samples.shape[0] + 4096  # 16-bit PCM plus headers: an upper bound for WAV, FLAC and OGG
    if _free_bytes(audio_path.parent) < need:
        raise DiskFullError(f"disk full: {audio_path} needs about {need // 1024} KiB, "
                            f"{_free_bytes(audio_path.parent) // 1024} KiB are free; free space and run again")
    try:
        write_audio(audio_path, r.samples, r.sample_rate)
    except DiskFullError:
        raise
    except Exception:
        # libsndfile reports a full disk as "System error." without errno; write_audio has removed
        # its temp file, so judge by the space left.
        if _free_bytes(audio_path.parent) < need:
            raise DiskFullError(f"disk full while writing {audio_path}; free space and run again") from None
        raise
    files = [audio_name]
    for kind, name in zip(sidecars, _sidecar_names(audio_name, sidecars)):
        if kind == "json":
            text = json.dumps(timing_json(job.id, job.text, r), ensure_ascii=False, indent=1)
        else:
            text = (srt_text if kind == "srt" else vtt_text)(job.text, r.word_timings, r.sample_rate)
        write_text_atomic(out_dir / name, text)
        files.append(name)
    return {"id": job.id, "status": "ok", "out": audio_name, "files": files, "samples": int(r.samples.shape[0]),
            "sample_rate": r.sample_rate, "duration_s": round(r.duration_s, 6), "compute_s": round(r.compute_s, 6),
            "rtf": round(r.compute_s / r.duration_s, 6) if r.duration_s else None,
            "cpu_s": round(res.get("cpu_s", 0.0), 6), "voice": res.get("voice"), "seed": job.seed,
            "source": job.source, "worker": res.get("worker"), "request": request, "render": render}


def _free_bytes(folder: Path) -> int:
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def _failed_row(job: Job, message: str, worker: str | None = None) -> dict:
    return {"id": job.id, "status": "failed", "error": message, "source": job.source, "worker": worker}


def run_batch(jobs: list[Job], *, out_dir: Path, fmt: str = "wav", voice: str | None = None,
              sidecars: Iterable[str] = (), workers: int | None = 1, ray_address: str | None = None,
              fold_frames: int | None = None, overlap_frames: int | None = None,
              group_segments: int = GROUP_SEGMENTS, progress: bool = False, lexicon=None) -> BatchSummary:
    """Render ``jobs`` into ``out_dir``, skipping finished ones; see the module docstring.

    Args:
        workers: processes (1 = in this process) or, with ``ray_address``, Ray actors (None = one per CPU).
        ray_address: ``"local"`` (start or join a local Ray), or a cluster address; None = no Ray.
        group_segments: a worker renders items in groups of about this many vocoder segments,
            generated as shared batches (1 = one item at a time). Audio does not depend on it.
        lexicon: a :class:`~wavern.conditioning.frontend.lexicon.Lexicon` every item is read with, or
            None; finished items are rendered again when its entries change.

    Raises:
        DiskFullError: the disk filled up; items finished so far are kept and recorded.
    """
    from wavern.app.voices import resolve_voice
    from wavern.engine.batch import DEFAULT_FOLD_FRAMES, DEFAULT_OVERLAP_FRAMES, ResultsLedger

    t0 = time.perf_counter()
    sidecars = list(dict.fromkeys(sidecars))
    for name, v, least in (("--fold-frames", fold_frames, 1), ("overlap_frames", overlap_frames, 0)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < least):
            raise ParameterError(f"{name} must be an integer >= {least}, found {v!r}")
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise DiskFullError(f"disk full: cannot create {out_dir}") from None
        raise ParameterError(f"--out-dir {out_dir}: cannot create it ({e.strerror})") from None
    with _exclusive(out_dir):  # one run at a time: each run rewrites the ledger from its own rows
        ledger = ResultsLedger(out_dir / RESULTS_NAME)
        if ledger.dropped_lines > 1 and not ledger.rows:  # (one torn line is what a killed run leaves)
            raise ParameterError(f"{out_dir / RESULTS_NAME} is not a wavern ledger (none of its lines is a result "
                                 f"row); render into another folder, or move that file away (nothing was changed)")
        try:
            ledger.compact()  # drop a torn last line before appending
        except DiskFullError:
            raise
        except OSError as e:
            raise ParameterError(f"--out-dir {out_dir}: cannot write there ({e.strerror or e})") from None
        summary = BatchSummary(items=len(jobs))
        default_voice = str(resolve_voice(voice))
        voices: dict[str, str] = {}
        render_keys: dict[str, str] = {}  # voice path -> _render_key
        lex_json = lexicon.to_json() if lexicon is not None and len(lexicon) else None
        fold = DEFAULT_FOLD_FRAMES if fold_frames is None else fold_frames
        overlap = DEFAULT_OVERLAP_FRAMES if overlap_frames is None else overlap_frames
        todo: list[tuple[Job, str, dict]] = []
        names: dict[str, str] = {}
        for job in jobs:
            problem = job.problem
            audio_name = ""
            if problem is None:
                try:
                    audio_name = _output_name(job, fmt)
                    if not job.text.strip():
                        raise ParameterError("nothing to say: the text is empty")
                    job.config()  # speed, pitch and pitch range in range (ParameterError)
                    vpath = default_voice if job.voice is None else str(resolve_voice(job.voice))
                except WavernError as e:
                    problem = str(e)
            outputs = [audio_name] + _sidecar_names(audio_name, sidecars) if problem is None else []
            if taken := next((name for name in outputs if name in names), None):
                problem = f"output {taken} is also an output of item '{names[taken]}'"
            if problem is not None:
                ledger.append(_failed_row(job, problem))
                summary.failed += 1
                continue
            names.update((name, job.id) for name in outputs)
            row = ledger.rows.get(job.id)
            request = _request_key(job, vpath, audio_name)
            if vpath not in render_keys:
                try:
                    render_keys[vpath] = _render_key(vpath, fold, overlap, lex_json)
                except OSError as e:
                    raise ParameterError(f"voice {vpath}: cannot read it ({e.strerror or e})") from None
            render = render_keys[vpath]
            if ledger.finished(job.id, out_dir) and row.get("request") == request \
                    and row.get("render", render) == render \
                    and set(_sidecar_names(audio_name, sidecars)) <= set(row.get("files", [])):
                summary.skipped += 1
                continue
            _remove_stale_parts(out_dir, audio_name)
            key = voices.setdefault(vpath, vpath)
            todo.append((job, audio_name, dict(dataclasses.asdict(job), voice_key=key, request=request,
                                               render=render)))
        if summary.skipped:
            log.info("%d item(s) already done in %s; skipped", summary.skipped, out_dir)
        by_id = {job.id: (job, name) for job, name, _ in todo}
        payload = [p for _, _, p in todo]
        by_payload = {p["id"]: p for p in payload}
        n_workers = min(workers or 1, len(payload)) if ray_address is None else (workers or 1)
        grouper = _Grouper(payload, workers=max(1, n_workers), segments=group_segments, fold_frames=fold_frames)
        if ray_address is not None:
            results = _run_ray(grouper, voices, fold_frames, overlap_frames, workers, ray_address, lex_json)
        elif n_workers > 1:
            results = _run_pool(grouper, voices, fold_frames, overlap_frames, n_workers, lex_json)
        else:
            results = _run_inline(grouper, voices, fold_frames, overlap_frames, lex_json)
        bar = _progress(len(payload), progress)
        try:
            for res in results:
                job, audio_name = by_id[res["id"]]
                if res["ok"]:
                    grouper.learn(by_payload[res["id"]], res["rendered"].samples.shape[0])
                    try:
                        sent = by_payload[res["id"]]
                        row = _write_item(res, job, out_dir, audio_name, sidecars, sent["request"], sent["render"])
                    except DiskFullError:
                        raise
                    except (OSError, WavernError) as e:  # this item's path is unusable ("x.wav" a folder, "sub" a
                        # file, a read-only mount, a name too long): the item fails, the batch goes on
                        why = (e.strerror or e) if isinstance(e, OSError) else str(e)
                        row = _failed_row(job, f"cannot write {audio_name}: {why}", res.get("worker"))
                        summary.failed += 1
                    else:
                        summary.done += 1
                        summary.audio_s += row["duration_s"]
                else:
                    row = _failed_row(job, res["error"], res.get("worker"))
                    summary.failed += 1
                ledger.append(row)
                if bar is not None:
                    el = time.perf_counter() - t0
                    bar.set_postfix_str(f"{summary.audio_s:.1f} s audio, {summary.audio_s / el:.1f}x real time",
                                        refresh=False)
                    bar.update(1)
        finally:
            results.close()
            if bar is not None:
                bar.close()
        ledger.compact()
        summary.wall_s = time.perf_counter() - t0
        return summary


@contextlib.contextmanager
def _exclusive(out_dir: Path):
    """Hold ``out_dir``'s render lock (an flock on the folder itself) for the block, or refuse:
    two runs into one folder would each rewrite results.jsonl from their own rows, and the rows
    of the run that finished first would be lost."""
    try:
        import fcntl
    except ImportError:  # (not POSIX: no folder locks; one run at a time is then the user's to keep)
        yield
        return
    try:
        fd = os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        raise ParameterError(f"--out-dir {out_dir}: cannot open it ({e.strerror or e})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ParameterError(f"another wavern render is writing into {out_dir}; wait for it to finish "
                                 f"or give another --out-dir") from None
        yield
    finally:
        os.close(fd)  # (releases the lock)


def _remove_stale_parts(out_dir: Path, audio_name: str) -> None:
    """Temp files a killed run may have left for this item's outputs (the names the writers use)."""
    for name in [audio_name] + _sidecar_names(audio_name, ("srt", "vtt", "json")):
        p = out_dir / name
        with contextlib.suppress(OSError):  # a path that cannot hold a file fails later, for this item only
            (p.parent / f".{p.name}.part").unlink(missing_ok=True)


def _progress(total: int, enabled: bool):
    if not enabled or total == 0:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="item", file=sys.stderr, dynamic_ncols=True, smoothing=0.1)


def render_main(args) -> int:
    """`wavern render` (argparse namespace from ``wavern.app.cli``); returns the exit status."""
    jobs = read_inputs(args.inputs, paragraphs=getattr(args, "paragraphs", False))
    if not jobs:
        raise ParameterError(f"no items found in {', '.join(args.inputs)}")
    for field in ("pitch", "pitch_range", "speaker"):  # --pitch etc.: for the items that do not set their own
        value = getattr(args, field, None)
        if value is not None:
            jobs = [j if getattr(j, field) is not None else dataclasses.replace(j, **{field: value}) for j in jobs]
    ray_address = getattr(args, "ray", None)
    workers = args.jobs if args.jobs is not None else (None if ray_address else os.cpu_count() or 1)
    if workers is not None and workers < 1:
        raise ParameterError(f"--jobs must be >= 1, found {workers}")
    quiet = getattr(args, "quiet", False)
    from wavern.app.speak import announce_first_compile
    from wavern.app.voices import load_lexicon

    if not quiet:
        announce_first_compile("50-120")  # the batch kernels too (an API reviewer's first 4 items took 51 s)

    lexicon = load_lexicon(getattr(args, "lexicon", None))
    with sigterm_interrupts():
        summary = run_batch(jobs, out_dir=Path(args.out_dir), fmt=args.format, voice=args.voice,
                            sidecars=getattr(args, "sidecar", None) or (), workers=workers, ray_address=ray_address,
                            fold_frames=getattr(args, "fold_frames", None),
                            progress=not quiet and sys.stderr.isatty(), lexicon=lexicon)
    if not quiet:
        print(f"{summary.done} rendered, {summary.skipped} already done, {summary.failed} failed of "
              f"{summary.items}; {summary.audio_s:.1f} s of audio in {summary.wall_s:.1f} s "
              f"({summary.x_real_time:.1f}x real time); results in {Path(args.out_dir) / RESULTS_NAME}",
              file=sys.stderr)
        if summary.failed:
            from wavern.engine.batch import ResultsLedger

            ids = {j.id for j in jobs}
            failed = [r for r in ResultsLedger(Path(args.out_dir) / RESULTS_NAME).rows.values()
                      if r.get("status") == "failed" and r.get("id") in ids]
            for r in failed[:10]:
                print(f"  failed {r['id']}: {r.get('error')}", file=sys.stderr)
            if len(failed) > 10:
                print(f"  ... and {len(failed) - 10} more (see {RESULTS_NAME})", file=sys.stderr)
    return 1 if summary.failed else 0
