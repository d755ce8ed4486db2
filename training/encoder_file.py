"""The pre-trained encoder's file: :func:`export_encoder` writes a :class:`PhonemeEncoder`'s weights
as safetensors, :func:`load_encoder_into` checks and copies them into an encoder of the same shape
(``AcousticTrainConfig.init_encoder``)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import torch

from wavern.conditioning.config import EncoderConfig
from wavern.conditioning.encoder import PhonemeEncoder
from wavern.errors import ParameterError
from wavern.fileio import atomic_write
from wavern.training.rtd import ReplacedTokenDetector

__all__ = ["ENCODER_FORMAT", "ENCODER_FILE", "export_encoder", "load_encoder_into"]

ENCODER_FORMAT = "wavern-encoder"
ENCODER_FILE = "encoder.safetensors"

_SHAPE_FIELDS = tuple(f.name for f in dataclasses.fields(EncoderConfig) if f.name != "dropout")


def export_encoder(model: ReplacedTokenDetector | PhonemeEncoder, path: str | os.PathLike, *,
                   symbols: list[str] | None = None) -> Path:
    """Write the encoder's weights as safetensors (atomically), for :func:`load_encoder_into`.

    Tensors are the :class:`PhonemeEncoder` ``state_dict`` (float32) under its own names;
    metadata: ``format = "wavern-encoder"``, ``format_version = "1"``, ``config`` (the
    EncoderConfig as JSON) and ``symbols`` (the symbol table as JSON, when given).
    """
    from safetensors.torch import save_file

    enc = model.encoder if isinstance(model, ReplacedTokenDetector) else model
    tensors = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in enc.state_dict().items()}
    meta = {"format": ENCODER_FORMAT, "format_version": "1", "config": json.dumps(enc.config.to_dict())}
    if symbols is not None:
        meta["symbols"] = json.dumps(list(symbols), ensure_ascii=False)
    return atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=meta))


def load_encoder_into(encoder: PhonemeEncoder, path: str | os.PathLike, *, symbols: list[str] | None = None) -> None:
    """Copy pre-trained weights from ``path`` (an :func:`export_encoder` file) into ``encoder``.

    The file's EncoderConfig must equal ``encoder.config`` in every field but ``dropout`` (which
    holds no weights), and its symbol table must equal ``symbols`` when both are known.

    Raises:
        ParameterError: the file is missing, not an encoder file, or made for another shape or
            symbol table (naming the first differing field).
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file, safe_open

    path = Path(path)
    if not path.is_file():
        raise ParameterError(f"pre-trained encoder not found: {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise ParameterError(f"{path} is not a readable safetensors file: {exc}") from exc
    if meta.get("format") != ENCODER_FORMAT:
        raise ParameterError(f"{path} is not a pre-trained encoder (format {meta.get('format')!r}, expected "
                             f"{ENCODER_FORMAT!r}); export one with wavern.training.pretrain.export_encoder")
    cfg = EncoderConfig.from_dict(json.loads(meta["config"]))
    for name in _SHAPE_FIELDS:
        if getattr(cfg, name) != getattr(encoder.config, name):
            raise ParameterError(f"{path} holds an encoder with {name}={getattr(cfg, name)!r}, the model has "
                                 f"{name}={getattr(encoder.config, name)!r}; pre-train with the acoustic model's "
                                 f"encoder config")
    if symbols is not None and "symbols" in meta and json.loads(meta["symbols"]) != list(symbols):
        raise ParameterError(f"{path} was pre-trained with another symbol table than the corpus's")
    own = encoder.state_dict()
    if set(tensors) != set(own):
        raise ParameterError(f"{path}: tensor names differ from the encoder's: missing "
                             f"{sorted(set(own) - set(tensors))[:3]}, extra {sorted(set(tensors) - set(own))[:3]}")
    for k, v in tensors.items():
        if tuple(v.shape) != tuple(own[k].shape) or not bool(torch.isfinite(v).all()):
            raise ParameterError(f"{path}: tensor {k} has shape {tuple(v.shape)} (expected {tuple(own[k].shape)}) "
                                 f"or non-finite values")
    encoder.load_state_dict({k: v.to(own[k].dtype) for k, v in tensors.items()})


