"""``acoustic.safetensors``: the torch acoustic model's weights, written and read back.

The format and every check on reading are in :mod:`wavern.conditioning.weights` (torch-free,
shared with the numpy runtime a voice runs): the file is read and checked there, then loaded
into an :class:`~wavern.conditioning.acoustic.AcousticModel` built from its config.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import torch

from wavern.conditioning.acoustic import AcousticModel
from wavern.conditioning.config import AcousticConfig
from wavern.conditioning.weights import FORMAT, FORMAT_VERSION, read_acoustic
from wavern.errors import ParameterError
from wavern.fileio import atomic_write

__all__ = ["save_acoustic", "load_acoustic", "expected_tensors", "FORMAT", "FORMAT_VERSION"]

log = logging.getLogger(__name__)

_FLOAT_DTYPES = (torch.float16, torch.float32)


def expected_tensors(config: AcousticConfig) -> dict[str, tuple[tuple[int, ...], bool]]:
    """Name -> (shape, is_floating) of every tensor of the torch model for ``config`` (its ``state_dict``):
    the reference :func:`wavern.conditioning.weights.tensor_specs` is tested against."""
    with torch.device("meta"):  # shapes only: no memory (but the meta path imports torch._dynamo, ~1 s once)
        model = AcousticModel(config)
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
    config, arrays = read_acoustic(path, config)
    model = AcousticModel(config)
    state = {name: torch.from_numpy(a) for name, a in arrays.items()}
    model.load_state_dict(state, strict=True)
    return model.to(device).eval()

