"""`wavern render`'s inputs: text files, JSONL and CSV manifests and stdin read into :class:`Job`s,
each with its output name (:func:`read_inputs`, :func:`output_name`)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import logging
import os
import re
import sys
import unicodedata
import zlib
from pathlib import Path
from typing import Iterable

from wavern.app.speak import decode_text
from wavern.conditioning.frontend.ssml import looks_like_ssml
from wavern.errors import ParameterError

__all__ = ["Job", "read_inputs", "output_name", "speak_config", "AUDIO_SUFFIXES"]

log = logging.getLogger(__name__)

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
        return speak_config(dataclasses.asdict(self))


def speak_config(job: dict):
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


def output_name(job: Job, fmt: str) -> str:
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


