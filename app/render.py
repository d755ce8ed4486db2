"""`wavern render`: many texts to audio files, offline, resumable.

    wavern render book.txt --out-dir out/            # one item per line
    wavern render chapters.txt --paragraphs --out-dir out/ --format flac --sidecar srt
    wavern render items.jsonl items.csv --out-dir out/ --jobs 2
    cat lines.txt | wavern render - --out-dir out/
    wavern render items.jsonl --out-dir out/ --ray            # local Ray; --ray HOST:PORT for a cluster

Inputs (:mod:`.render_inputs`): text files, JSONL or CSV manifests, stdin. Workers
(:mod:`.render_workers`: processes or Ray actors) load each voice once, render items in groups of
shared vocoder batches and return audio; this process alone writes the files (temp file, rename)
and then the item's row in ``results.jsonl``, so a killed batch resumes where it stopped and a bad
item fails alone. What it writes and when an item counts as done: docs/ARCHITECTURE.md. Exit
status: 0 all items done, 1 some failed, 2 the batch itself could not run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Iterable

from wavern.app.render_inputs import Job, output_name, read_inputs
from wavern.app.render_workers import GROUP_SEGMENTS, Grouper, RenderWorker, run_inline, run_pool, run_ray
from wavern.errors import DiskFullError, ParameterError, WavernError
from wavern.proc import sigterm_interrupts

__all__ = ["Job", "read_inputs", "render_main", "run_batch", "RenderWorker", "BatchSummary", "RESULTS_NAME",
           "GROUP_SEGMENTS"]

log = logging.getLogger(__name__)

RESULTS_NAME = "results.jsonl"

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
                    audio_name = output_name(job, fmt)
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
        grouper = Grouper(payload, workers=max(1, n_workers), segments=group_segments, fold_frames=fold_frames)
        if ray_address is not None:
            results = run_ray(grouper, voices, fold_frames, overlap_frames, workers, ray_address, lex_json)
        elif n_workers > 1:
            results = run_pool(grouper, voices, fold_frames, overlap_frames, n_workers, lex_json)
        else:
            results = run_inline(grouper, voices, fold_frames, overlap_frames, lex_json)
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
