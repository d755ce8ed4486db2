"""``acoustic.safetensors``: the acoustic model's weights, written and read with shape validation.

The file holds every tensor of :class:`~wavern.conditioning.acoustic.AcousticModel`'s
``state_dict`` under its own name (float16 or float32 for floating tensors; the pruning
buffers ``*.peer_choice`` stay int64), plus string metadata::

    format = "wavern-acoustic", format_version = "1", config = <AcousticConfig.to_dict() as JSON>

Loading runs no code (safetensors only). It rebuilds the model from the config (the one passed
in, which in a voice comes from ``voice.json["acoustic"]``, or else the file's own), then
compares every expected name, shape and dtype kind with the file; anything missing, extra,
misshapen, non-finite or unreadable raises :class:`VoiceFileError` naming the file and tensor.
A config that disagrees with the file's own is refused too, naming the first differing field.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import torch

from wavern.conditioning.acoustic import AcousticModel
from wavern.conditioning.config import AcousticConfig
from wavern.errors import ParameterError, VoiceFileError
from wavern.fileio import atomic_write

__all__ = ["save_acoustic", "load_acoustic", "expected_tensors", "FORMAT", "FORMAT_VERSION"]

log = logging.getLogger(__name__)

FORMAT = "wavern-acoustic"
FORMAT_VERSION = 1
_FLOAT_DTYPES = (torch.float16, torch.float32)


def expected_tensors(config: AcousticConfig) -> dict[str, tuple[tuple[int, ...], bool]]:
    """Name -> (shape, is_floating) of every tensor an ``acoustic.safetensors`` for ``config`` holds."""
    with torch.device("meta"):  # shapes only: no memory (but the meta path imports torch._dynamo, ~1 s once)
        model = AcousticModel(config)
    return _tensor_specs(model)


def _tensor_specs(model: torch.nn.Module) -> dict[str, tuple[tuple[int, ...], bool]]:
    return {k: (tuple(v.shape), v.dtype.is_floating_point) for k, v in model.state_dict().items()}


def save_acoustic(model: AcousticModel, path: str | os.PathLike, *, dtype: torch.dtype = torch.float32) -> Path:
    """Write ``model`` to ``path`` (atomically: a temporary file, then a rename).

    Args:
        model: the model to store.
        path: destination file, conventionally ``<voice>/acoustic.safetensors``.
        dtype: storage type of floating tensors, float32 (default) or float16.

    Returns:
        The path written.
    """
    from safetensors.torch import save_file

    if dtype not in _FLOAT_DTYPES:
        raise ParameterError(f"dtype must be one of {_FLOAT_DTYPES}, found {dtype}")
    tensors = {}
    for name, t in model.state_dict().items():
        t = t.detach().cpu()
        tensors[name] = (t.to(dtype) if t.dtype.is_floating_point else t).contiguous()
    meta = {"format": FORMAT, "format_version": str(FORMAT_VERSION),
            "config": json.dumps(model.config.to_dict(), sort_keys=True)}
    path = atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=meta))
    log.info("wrote %s (%d tensors, %s)", path, len(tensors), dtype)
    return path


def _first_difference(a: dict, b: dict, prefix: str = "") -> str | None:
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            return prefix + key
        if isinstance(a[key], dict) and isinstance(b[key], dict):
            sub = _first_difference(a[key], b[key], prefix + key + ".")
            if sub:
                return sub
        elif a[key] != b[key]:
            return prefix + key
    return None


def load_acoustic(path: str | os.PathLike, config: AcousticConfig | None = None, *,
                  device: str | torch.device = "cpu") -> AcousticModel:
    """Read ``acoustic.safetensors`` into an :class:`AcousticModel` (float32, eval mode).

    Args:
        path: the file.
        config: the model's config (a voice's ``voice.json["acoustic"]``); None uses the file's own.
        device: where to put the model.

    Raises:
        VoiceFileError: missing/corrupt file, wrong format, config mismatch, or any tensor
            missing, extra, misshapen, of the wrong kind, or non-finite.
    """
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    if not path.is_file():
        raise VoiceFileError(f"acoustic model file not found: {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise VoiceFileError(f"{path}: not a readable safetensors file ({e})") from None
    if meta.get("format") != FORMAT:
        raise VoiceFileError(f"{path}: metadata 'format' is {meta.get('format')!r}, expected {FORMAT!r}")
    if meta.get("format_version") != str(FORMAT_VERSION):
        raise VoiceFileError(f"{path}: format_version {meta.get('format_version')!r} is not supported "
                             f"(this wavern reads {FORMAT_VERSION})")
    try:
        stored = json.loads(meta["config"])
        file_config = AcousticConfig.from_dict(stored)
    except (KeyError, ValueError, RecursionError, ParameterError, TypeError) as e:  # (ValueError: JSON's too)
        raise VoiceFileError(f"{path}: metadata 'config' is missing or invalid ({e})") from None
    if config is None:
        config = file_config
    elif config != file_config:
        field = _first_difference(config.to_dict(), file_config.to_dict())
        raise VoiceFileError(f"{path}: acoustic config field '{field}' differs between voice.json and the "
                             f"weights file; re-export the voice")
    held = sum(t.numel() for t in tensors.values())
    if config.approx_parameters() > 4 * held + (1 << 20):  # before building: the file bounds the memory
        raise VoiceFileError(f"{path}: the config describes a model of about {config.approx_parameters():,} "
                             f"numbers, the file holds {held:,}: not built")
    model = AcousticModel(config)  # built once and its shapes read from it: no meta-device pass at start-up
    expected = _tensor_specs(model)
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    if missing:
        raise VoiceFileError(f"{path}: missing tensor(s) {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    if extra:
        raise VoiceFileError(f"{path}: unexpected tensor(s) {extra[:5]}{' ...' if len(extra) > 5 else ''}")
    state = {}
    for name, (shape, floating) in expected.items():
        t = tensors[name]
        if tuple(t.shape) != shape:
            raise VoiceFileError(f"{path}: tensor '{name}' has shape {tuple(t.shape)}, expected {shape}")
        if floating:
            if t.dtype not in _FLOAT_DTYPES:
                raise VoiceFileError(f"{path}: tensor '{name}' must be float16 or float32, found {t.dtype}")
            t = t.to(torch.float32)
            if not bool(torch.isfinite(t).all()):
                raise VoiceFileError(f"{path}: tensor '{name}' contains NaN or infinite values")
        elif t.dtype.is_floating_point:
            raise VoiceFileError(f"{path}: tensor '{name}' must be an integer tensor, found {t.dtype}")
        state[name] = t
    _check_pruning(path, model, state)
    model.load_state_dict(state, strict=True)
    return model.to(device).eval()


def _check_pruning(path: Path, model: AcousticModel, state: dict[str, torch.Tensor]) -> None:
    """The pruning buffers must name real peers and leave at least one live edge."""
    for prefix, fusion in (("token_fusion", model.token_fusion), ("frame_fusion", model.frame_fusion)):
        choice = state[f"{prefix}.peer_choice"]
        alive = state[f"{prefix}.edge_alive"]
        n_peers = len(fusion.peer_channels)
        if bool(((choice < -1) | (choice >= n_peers)).any()):
            raise VoiceFileError(f"{path}: '{prefix}.peer_choice' holds {choice.tolist()}, "
                                 f"each must be -1 (soft) or a peer index below {n_peers}")
        if not bool(((alive == 0) | (alive == 1)).all()) or not bool(alive.any()):
            raise VoiceFileError(f"{path}: '{prefix}.edge_alive' must be 0/1 with at least one 1, "
                                 f"found {alive.tolist()}")
