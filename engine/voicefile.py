"""``voice.json``: reading and validating a voice's settings without loading weights.

Loading a voice runs no code: JSON plus safetensors. Every field is checked here and a bad
voice is refused with a :class:`VoiceFileError` that names the field, the value found and
what was expected. The runtime's :class:`wavern.dsp.MelConfig` must equal the voice's.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from wavern.dsp import DEFAULT_MEL, LTP_GAIN_SCALE_RANGE, MelConfig
from wavern.engine.chunk import PAUSE_RANGE, TEMPERATURE_RANGE
from wavern.errors import ParameterError, VoiceFileError

__all__ = ["FORMAT", "FORMAT_VERSION", "read_voice_json", "write_voice_json"]

FORMAT = "wavern-voice"
FORMAT_VERSION = 1
_REQUIRED = {
    "format": str,
    "format_version": int,
    "name": str,
    "dsp": dict,
    "symbols": list,
    "acoustic": dict,
    "vocoder": dict,
    "provenance": dict,
}


def read_voice_json(folder: str | Path, *, runtime_mel: MelConfig = DEFAULT_MEL) -> dict[str, Any]:
    """Read and validate ``folder/voice.json``; return the parsed dict.

    Raises:
        VoiceFileError: missing file, invalid JSON, a missing or mistyped field, a format
            version this runtime does not read, DSP settings that differ from ``runtime_mel``,
            or a broken symbol table.
    """
    path = Path(folder) / "voice.json"
    try:
        exists = path.is_file()
        if exists and path.stat().st_size > MAX_VOICE_JSON_BYTES:
            raise VoiceFileError(f"{path}: {path.stat().st_size} bytes, more than a voice.json holds "
                                 f"({MAX_VOICE_JSON_BYTES}); not read")
        raw = path.read_text(encoding="utf-8") if exists else ""
    except OSError as e:  # a folder or file the user may not read
        raise VoiceFileError(f"{path}: cannot read it ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise VoiceFileError(f"{path}: not valid JSON ({e})") from None
    if not exists:
        raise VoiceFileError(f"{path} not found: a voice is a folder with voice.json, acoustic.safetensors "
                             f"and vocoder.safetensors")
    try:
        meta = json.loads(raw)
    except (ValueError, RecursionError) as e:  # (ValueError: also a 5000-digit number)
        raise VoiceFileError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(meta, dict):
        raise VoiceFileError(f"{path}: expected a JSON object, found {type(meta).__name__}")
    for field, typ in _REQUIRED.items():
        if field not in meta:
            raise VoiceFileError(f"{path}: missing field '{field}'")
        if not isinstance(meta[field], typ) or (typ is int and isinstance(meta[field], bool)):
            raise VoiceFileError(f"{path}: field '{field}' must be {typ.__name__}, "
                                 f"found {type(meta[field]).__name__}")
    if meta["format"] != FORMAT:
        raise VoiceFileError(f"{path}: field 'format' is {meta['format']!r}, expected {FORMAT!r}")
    if meta["format_version"] != FORMAT_VERSION:
        raise VoiceFileError(f"{path}: field 'format_version' is {meta['format_version']}, this wavern reads "
                             f"version {FORMAT_VERSION}; upgrade wavern or re-export the voice")
    missing = [f.name for f in dataclasses.fields(MelConfig) if isinstance(meta["dsp"], dict) and f.name not in meta["dsp"]]
    if missing:  # (an empty "dsp" validated as the defaults, then the engine read a field it lacks)
        raise VoiceFileError(f"{path}: field 'dsp' lacks {', '.join(missing)}")
    try:
        mel = MelConfig.from_dict(meta["dsp"])
    except (ParameterError, TypeError) as e:
        raise VoiceFileError(f"{path}: field 'dsp' is invalid ({e})") from None
    if mel != runtime_mel:
        diffs = [f"{k}: voice {v!r} vs runtime {getattr(runtime_mel, k)!r}"
                 for k, v in mel.to_dict().items() if getattr(runtime_mel, k) != v]
        raise VoiceFileError(f"{path}: field 'dsp' differs from this runtime's feature settings "
                             f"({'; '.join(diffs)}); the voice was trained for other features and would sound wrong")
    symbols = meta["symbols"]
    if not symbols or not all(isinstance(s, str) for s in symbols):
        raise VoiceFileError(f"{path}: field 'symbols' must be a non-empty list of strings")
    if len(set(symbols)) != len(symbols):
        dup = sorted(s for s, n in collections.Counter(symbols).items() if n > 1)
        raise VoiceFileError(f"{path}: field 'symbols' has duplicates {dup[:5]}")
    _check_inference(path, meta.get("inference", {}), pitch=bool(meta["acoustic"].get("pitch")))
    speakers = meta["acoustic"].get("speakers")
    if speakers is not None and (not isinstance(speakers, list) or not speakers
                                 or not all(isinstance(s, str) and s for s in speakers)):
        raise VoiceFileError(f"{path}: field 'acoustic.speakers' must be a non-empty list of names, found {speakers!r}")
    for field, name in (("espeak_voice", meta.get("espeak_voice")),
                        ("inference.speaker", meta.get("inference", {}).get("speaker"))):
        if name is not None and not (isinstance(name, str) and _ESPEAK_NAME.fullmatch(name)):
            raise VoiceFileError(f"{path}: field '{field}' must be an espeak-ng voice name (letters, digits, "
                                 f"'-', '+', '_'), found {name!r}")
    bad = next((s for s in speakers or () if not _ESPEAK_NAME.fullmatch(s)), None)
    if bad is not None:  # (a speaker's name picks the espeak-ng voice its text is phonemised with)
        raise VoiceFileError(f"{path}: field 'acoustic.speakers' holds {bad!r}, not a speaker name (letters, "
                             f"digits, '-', '+', '_')")
    speaker = meta.get("inference", {}).get("speaker")
    if speaker is not None and speakers is not None and speaker not in speakers:
        raise VoiceFileError(f"{path}: field 'inference.speaker' {speaker!r} is not one of the voice's speakers "
                             f"(acoustic.speakers)")
    description = meta.get("description")
    if description is not None and not (isinstance(description, str) and description.strip()
                                        and len(description) <= MAX_DESCRIPTION_CHARS and description.isprintable()):
        raise VoiceFileError(f"{path}: field 'description' must be one line of text, 1 to {MAX_DESCRIPTION_CHARS} "
                             f"printable characters, found {str(description)[:60]!r}")
    return meta


#: an espeak-ng voice (and variant) name: no path, nothing espeak would read as a file
_ESPEAK_NAME = re.compile(r"[A-Za-z0-9_+-]{1,64}")


#: Longest ``description`` (optional: who speaks, what the voice is good at, its licence; what
#: ``wavern voices`` and the window show).
MAX_DESCRIPTION_CHARS = 600

#: voice.json files above this size are refused unread (the shipped one is ~20 kB)
MAX_VOICE_JSON_BYTES = 4 << 20

# inference.<field>: (low, high), SpeakConfig's ranges and the vocoder's LTP gain factor's
_INFERENCE_NUMBERS = {"temperature": TEMPERATURE_RANGE, "pause_s": PAUSE_RANGE, "ltp_gain_scale": LTP_GAIN_SCALE_RANGE}


def _check_inference(path: Path, infer: Any, *, pitch: bool) -> None:
    """The ``inference`` object: its numbers, speaker, and the post-filter's and mel matching's
    settings (so that `wavern voices` and `doctor` refuse what ``Voice.load`` would). ``pitch``: the
    acoustic model predicts pitch (a post-filter pitch stage needs it)."""
    from wavern.engine.melmatch import MelMatchConfig
    from wavern.engine.postfilter import PostfilterConfig

    if not isinstance(infer, dict):
        raise VoiceFileError(f"{path}: field 'inference' must be an object, found {type(infer).__name__}")
    for field, (lo, hi) in _INFERENCE_NUMBERS.items():
        v = infer.get(field)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi):
            raise VoiceFileError(f"{path}: field 'inference.{field}' must be a number in [{lo:g}, {hi:g}], "
                                 f"found {v!r}")
    speaker = infer.get("speaker")
    if speaker is not None and not isinstance(speaker, str):
        raise VoiceFileError(f"{path}: field 'inference.speaker' must be a speaker's name, found {speaker!r}")
    for key, cls in (("postfilter", PostfilterConfig), ("melmatch", MelMatchConfig),
                     ("melmatch_measured", MelMatchConfig)):
        if infer.get(key) is None:
            continue
        try:
            cfg = cls.from_dict(infer[key])
        except (ParameterError, TypeError) as e:
            raise VoiceFileError(f"{path}: field 'inference.{key}' is invalid ({e})") from None
        if key == "postfilter" and cfg.pitch_gain > 0 and not pitch:
            raise VoiceFileError(f"{path}: field 'inference.postfilter' has a pitch_gain, but the voice has no "
                                 "pitch features")


def write_voice_json(folder: str | Path, meta: dict[str, Any]) -> Path:
    """Write ``voice.json`` atomically after checking it would read back."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "voice.json"
    tmp = folder / "voice.json.tmp"
    tmp.write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    read_voice_json(folder)
    return path
