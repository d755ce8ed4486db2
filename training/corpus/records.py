"""Corpus records, the reader with validation, the held-out rule and the LJSpeech loader.

On-disk layout of a built corpus (``build_corpus``)::

    out_dir/corpus.json       build parameters, espeak version, mel config, symbol table
    out_dir/metadata.jsonl    one JSON object per utterance (see ``METADATA_KEYS``)
    out_dir/wavs/{id}.wav     int16, 22 050 Hz, mono
    out_dir/mels/{id}.npy     float32 (1 + n_samples // 256, 80) from ``wavern.dsp.log_mel``

An LJSpeech-layout folder (``metadata.csv`` with ``id|text|normalized`` lines and
``wavs/{id}.wav``) loads into the same :class:`CorpusRecord` type, with ``phonemes``,
``durations`` and ``voice`` left ``None`` and the audio resampled to 22 050 Hz on read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import wave
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wavern.dsp import DEFAULT_MEL, MelConfig, float_to_int16, frames_for_samples, int16_to_float, log_mel
from wavern.errors import CorpusError

__all__ = [
    "CORPUS_FORMAT",
    "CORPUS_FORMAT_VERSION",
    "METADATA_KEYS",
    "HELD_OUT_PER_MILLE",
    "CorpusRecord",
    "Corpus",
    "is_held_out",
    "load_corpus",
    "load_ljspeech",
    "read_wav",
    "write_wav",
]

log = logging.getLogger(__name__)

CORPUS_FORMAT = "wavern-corpus"
CORPUS_FORMAT_VERSION = 1
SAMPLE_RATE = DEFAULT_MEL.sample_rate
METADATA_KEYS = (
    "id", "text", "spoken", "voice", "rate", "pitch", "pitch_range", "phonemes", "durations", "word_spans",
    "n_samples",
)
# Held out for evaluation: 30 in 1000 texts, chosen by a hash of the text, so the same
# sentence is never in both splits (even when rendered with several voices) and every trainer
# agrees without sharing a list.
HELD_OUT_PER_MILLE = 30


def is_held_out(text: str) -> bool:
    """The fixed split rule: ``blake2b(text) mod 1000 < HELD_OUT_PER_MILLE`` (about 3 %)."""
    digest = hashlib.blake2b(" ".join(text.split()).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 1000 < HELD_OUT_PER_MILLE


# ----------------------------------------------------------------------------- wav io
def write_wav(path: Path, audio: np.ndarray, sample_rate: int = SAMPLE_RATE) -> None:
    """Write int16 mono PCM (stdlib ``wave``: byte-identical for identical audio)."""
    a = np.asarray(audio)
    if a.dtype != np.int16 or a.ndim != 1:
        raise CorpusError(f"write_wav expects int16 mono audio, found {a.dtype} with shape {a.shape}")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(a.astype("<i2").tobytes())


def read_wav(path: Path, *, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Read a wav as int16 mono at ``sample_rate`` (channels averaged, resampled if needed)."""
    import soundfile as sf

    try:
        x, sr = sf.read(str(path), dtype="float32", always_2d=True)
    except (OSError, RuntimeError) as exc:  # soundfile raises LibsndfileError (a RuntimeError)
        raise CorpusError(f"cannot read audio {str(path)!r}: {exc}") from exc
    x = x.mean(axis=1)
    if sr != sample_rate:
        from scipy.signal import resample_poly

        g = math.gcd(int(sr), sample_rate)
        x = resample_poly(x, sample_rate // g, int(sr) // g).astype(np.float32)
    return float_to_int16(x)


# ----------------------------------------------------------------------------- records
@dataclasses.dataclass(frozen=True)
class CorpusRecord:
    """One utterance of a corpus.

    Attributes:
        id: unique within the corpus; also the file stem of its wav and mel.
        text: the original text; ``spoken``: its normalised form (what espeak read).
        voice, rate, pitch, pitch_range: the espeak-ng rendering (``None`` for recordings).
        phonemes: token strings, ``<bos>`` ... ``<eos>`` (``None`` when not known).
        durations: (N,) int64 samples per token, summing to ``n_samples`` (``None`` if unknown).
        word_spans: per word ``{"start", "end"}`` (chars in ``text``), ``{"token_start",
            "token_end"}`` and ``{"sample_start", "sample_end"}``; ``None`` if unknown.
        n_samples: audio length at 22 050 Hz.
        wav_path: the audio file; ``mel_path``: the stored log-mel, or ``None`` (computed on read).
    """

    id: str
    text: str
    spoken: str
    voice: str | None
    rate: int | None
    pitch: int | None
    pitch_range: int | None
    phonemes: tuple[str, ...] | None
    durations: np.ndarray | None
    word_spans: tuple[dict, ...] | None
    n_samples: int
    wav_path: Path
    mel_path: Path | None = None

    @property
    def held_out(self) -> bool:
        return is_held_out(self.text)

    @property
    def n_frames(self) -> int:
        return frames_for_samples(self.n_samples)

    def audio(self) -> np.ndarray:
        """(n_samples,) int16 at 22 050 Hz."""
        a = read_wav(self.wav_path)
        if a.size != self.n_samples:
            raise CorpusError(f"{str(self.wav_path)!r} has {a.size} samples, metadata says {self.n_samples}")
        return a

    def mel(self, cfg: MelConfig = DEFAULT_MEL) -> np.ndarray:
        """(1 + n_samples // hop, n_mels) float32 log-mel: the stored one, or computed."""
        if self.mel_path is None:
            return log_mel(int16_to_float(self.audio()), cfg)
        try:
            m = np.load(self.mel_path)
        except (OSError, ValueError) as exc:
            raise CorpusError(f"cannot read mel {str(self.mel_path)!r}: {exc}") from exc
        expect = (frames_for_samples(self.n_samples, cfg), cfg.n_mels)
        if m.shape != expect or m.dtype != np.float32:
            raise CorpusError(f"mel {str(self.mel_path)!r} is {m.dtype}{m.shape}, expected float32{expect}")
        return m

    def to_metadata(self) -> dict[str, Any]:
        """The ``metadata.jsonl`` object of this record (keys in ``METADATA_KEYS`` order)."""
        return {
            "id": self.id, "text": self.text, "spoken": self.spoken, "voice": self.voice, "rate": self.rate,
            "pitch": self.pitch, "pitch_range": self.pitch_range,
            "phonemes": list(self.phonemes) if self.phonemes is not None else None,
            "durations": self.durations.tolist() if self.durations is not None else None,
            "word_spans": list(self.word_spans) if self.word_spans is not None else None,
            "n_samples": self.n_samples,
        }


@dataclasses.dataclass(frozen=True)
class Corpus:
    """A loaded corpus: its folder, ``corpus.json`` (``{}`` for LJSpeech) and records in file order."""

    root: Path
    info: dict
    records: tuple[CorpusRecord, ...]

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[CorpusRecord]:
        return iter(self.records)

    def __getitem__(self, i: int) -> CorpusRecord:
        return self.records[i]

    @property
    def train(self) -> list[CorpusRecord]:
        return [r for r in self.records if not r.held_out]

    @property
    def held_out(self) -> list[CorpusRecord]:
        return [r for r in self.records if r.held_out]

    @property
    def symbols(self) -> list[str] | None:
        """The symbol table the phonemes were written with (``None`` for recordings)."""
        return self.info.get("symbols")

    @property
    def total_seconds(self) -> float:
        return sum(r.n_samples for r in self.records) / SAMPLE_RATE


# ----------------------------------------------------------------------------- reader
def _fail(where: str, msg: str) -> CorpusError:
    return CorpusError(f"{where}: {msg}")


def _expect(where: str, obj: dict, key: str, types: type | tuple[type, ...], *, nullable: bool = False) -> Any:
    if key not in obj:
        raise _fail(where, f"missing field {key!r}")
    v = obj[key]
    if v is None and nullable:
        return None
    if isinstance(v, bool) or not isinstance(v, types):
        names = types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
        raise _fail(where, f"field {key!r} must be {names}{' or null' if nullable else ''}, found {v!r:.60}")
    return v


def _parse_record(root: Path, where: str, obj: Any, symbols: set[str] | None) -> CorpusRecord:
    if not isinstance(obj, dict):
        raise _fail(where, f"expected a JSON object, found {type(obj).__name__}")
    rid = _expect(where, obj, "id", str)
    if not rid or "/" in rid or "\\" in rid or rid.startswith("."):
        raise _fail(where, f"id {rid!r} is not a plain file stem")
    text = _expect(where, obj, "text", str)
    spoken = _expect(where, obj, "spoken", str)
    voice = _expect(where, obj, "voice", str, nullable=True)
    rate, pitch, prange = (_expect(where, obj, k, int, nullable=True) for k in ("rate", "pitch", "pitch_range"))
    n = _expect(where, obj, "n_samples", int)
    if n < 0:
        raise _fail(where, f"n_samples must be >= 0, found {n}")
    phonemes = _expect(where, obj, "phonemes", list, nullable=True)
    durations = _expect(where, obj, "durations", list, nullable=True)
    if phonemes is not None:
        if not all(isinstance(p, str) for p in phonemes):
            raise _fail(where, "phonemes must be a list of strings")
        if symbols is not None:
            unknown = sorted({p for p in phonemes if p not in symbols})
            if unknown:
                raise _fail(where, f"phonemes {unknown[:5]!r} are not in the corpus symbol table")
    dur = None
    if durations is not None:
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in durations):
            raise _fail(where, "durations must be non-negative integers (samples)")
        dur = np.asarray(durations, np.int64)
        if phonemes is None or len(phonemes) != len(dur):
            raise _fail(where, f"{len(dur)} durations for {None if phonemes is None else len(phonemes)} phonemes")
        if int(dur.sum()) != n:
            raise _fail(where, f"durations sum to {int(dur.sum())} samples, n_samples is {n}")
    spans = _expect(where, obj, "word_spans", list, nullable=True)
    if spans is not None and not all(isinstance(s, dict) for s in spans):
        raise _fail(where, "word_spans must be a list of objects")
    return CorpusRecord(
        id=rid, text=text, spoken=spoken, voice=voice, rate=rate, pitch=pitch, pitch_range=prange,
        phonemes=tuple(phonemes) if phonemes is not None else None, durations=dur,
        word_spans=tuple(spans) if spans is not None else None, n_samples=n,
        wav_path=root / "wavs" / f"{rid}.wav", mel_path=root / "mels" / f"{rid}.npy",
    )


def load_corpus(path: str | Path, *, check_files: bool = True) -> Corpus:
    """Read and validate a corpus folder written by ``build_corpus``.

    Checks ``corpus.json`` (format, version, mel config against the runtime's), every
    metadata line (fields, types, durations summing to ``n_samples``, phonemes in the symbol
    table, unique ids) and, with ``check_files``, that every wav and mel file exists.

    Raises:
        CorpusError: naming the file, the line and what is wrong.
    """
    root = Path(path)
    info_path = root / "corpus.json"
    if not info_path.is_file():
        raise CorpusError(f"{str(root)!r} is not a corpus: {str(info_path)!r} is missing (build it with build_corpus)")
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorpusError(f"{str(info_path)!r} is not valid JSON: {exc}") from exc
    if not isinstance(info, dict) or info.get("format") != CORPUS_FORMAT:
        raise CorpusError(f"{str(info_path)!r}: format must be {CORPUS_FORMAT!r}, found {info.get('format')!r}"
                          if isinstance(info, dict) else f"{str(info_path)!r}: expected a JSON object")
    if info.get("format_version") != CORPUS_FORMAT_VERSION:
        raise CorpusError(f"{str(info_path)!r}: format_version {info.get('format_version')!r} is not supported "
                          f"(expected {CORPUS_FORMAT_VERSION})")
    try:
        mel = MelConfig.from_dict(info.get("mel", {}))
    except Exception as exc:  # ParameterError or TypeError from a malformed dict
        raise CorpusError(f"{str(info_path)!r}: bad mel config: {exc}") from exc
    if mel != DEFAULT_MEL:
        raise CorpusError(f"{str(info_path)!r}: mel config {mel} differs from the runtime's {DEFAULT_MEL}; rebuild")
    symbols = info.get("symbols")
    if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
        raise CorpusError(f"{str(info_path)!r}: 'symbols' must be a list of strings")
    meta_path = root / "metadata.jsonl"
    records = _read_jsonl(root, meta_path, set(symbols))
    expected = info.get("utterances")
    if isinstance(expected, int) and expected != len(records):
        raise CorpusError(f"{str(meta_path)!r} has {len(records)} utterances, corpus.json says {expected}")
    if check_files:
        for r in records:
            for p in (r.wav_path, r.mel_path):
                if p is not None and not p.is_file():
                    raise CorpusError(f"utterance {r.id!r}: file {str(p)!r} is missing")
    return Corpus(root=root, info=info, records=tuple(records))


def _read_jsonl(root: Path, meta_path: Path, symbols: set[str] | None) -> list[CorpusRecord]:
    try:
        lines = meta_path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CorpusError(f"cannot read {str(meta_path)!r}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{str(meta_path)!r} is not UTF-8: {exc}") from exc
    records: list[CorpusRecord] = []
    seen: set[str] = set()
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{meta_path}:{no}"
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise CorpusError(f"{where}: not valid JSON ({exc})") from exc
        rec = _parse_record(root, where, obj, symbols)
        if rec.id in seen:
            raise CorpusError(f"{where}: duplicate id {rec.id!r}")
        seen.add(rec.id)
        records.append(rec)
    return records


# ----------------------------------------------------------------------------- LJSpeech
def load_ljspeech(path: str | Path, *, limit: int | None = None) -> Corpus:
    """Read an LJSpeech-layout folder into :class:`CorpusRecord` s (durations ``None``).

    ``metadata.csv`` holds ``id|text|normalized`` lines (the third field optional; it becomes
    ``spoken``). Audio of any rate or channel count is averaged to mono and resampled to
    22 050 Hz when read; ``n_samples`` is the length after resampling.
    """
    import soundfile as sf

    root = Path(path)
    meta = root / "metadata.csv"
    if not meta.is_file():
        raise CorpusError(f"{str(root)!r} is not an LJSpeech-layout folder: {str(meta)!r} is missing")
    try:
        lines = meta.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"cannot read {str(meta)!r}: {exc}") from exc
    records: list[CorpusRecord] = []
    seen: set[str] = set()
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) < 2 or not parts[0].strip():
            raise CorpusError(f"{meta}:{no}: expected 'id|text|normalized', found {line[:80]!r}")
        rid, text = parts[0].strip(), parts[1]
        spoken = "|".join(parts[2:]) if len(parts) > 2 and parts[2].strip() else text
        if rid in seen:
            raise CorpusError(f"{meta}:{no}: duplicate id {rid!r}")
        seen.add(rid)
        wav = root / "wavs" / f"{rid}.wav"
        try:
            inf = sf.info(str(wav))
        except (OSError, RuntimeError) as exc:
            raise CorpusError(f"{meta}:{no}: audio {str(wav)!r} is missing or unreadable: {exc}") from exc
        n = inf.frames if inf.samplerate == SAMPLE_RATE else _resampled_length(inf.frames, inf.samplerate)
        records.append(CorpusRecord(
            id=rid, text=text, spoken=spoken, voice=None, rate=None, pitch=None, pitch_range=None,
            phonemes=None, durations=None, word_spans=None, n_samples=n, wav_path=wav, mel_path=None,
        ))
        if limit is not None and len(records) >= limit:
            break
    return Corpus(root=root, info={}, records=tuple(records))


def _resampled_length(frames: int, rate: int) -> int:
    """Length of ``scipy.signal.resample_poly`` output: ceil(frames * up / down)."""
    g = math.gcd(int(rate), SAMPLE_RATE)
    up, down = SAMPLE_RATE // g, int(rate) // g
    return -(-frames * up // down)


def records_to_jsonl(records: Sequence[CorpusRecord]) -> str:
    """Serialise records as ``metadata.jsonl`` text (used by the builder and by tests)."""
    return "".join(json.dumps(r.to_metadata(), ensure_ascii=False) + "\n" for r in records)
