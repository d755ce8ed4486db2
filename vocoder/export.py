"""Export a trained :class:`WaveRNN` to the engine's file format, and load it back.

The format is docs/ARCHITECTURE.md, "Vocoder file format" (written by
:func:`wavern.vocoder.format.save_vocoder_tensors`). Block-sparse matrices keep every block
that holds a non-zero weight, so a pruned model exports at its pruned density.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from wavern.errors import ParameterError, VoiceFileError
from wavern.vocoder.config import VocoderConfig
from wavern.vocoder.format import SPARSE_NAMES, BlockSparse, load_vocoder_tensors, save_vocoder_tensors
from wavern.vocoder.model import N_CLASSES, WaveRNN, coarse_input_mask

__all__ = ["export_vocoder", "load_vocoder", "expected_shapes"]

# file name -> parameter name in WaveRNN.state_dict()
_GRU_NAMES = {"gru.weight_ih": "gru.weight_ih_l0", "gru.bias_ih": "gru.bias_ih_l0",
              "gru.weight_hh": "gru.weight_hh_l0", "gru.bias_hh": "gru.bias_hh_l0"}


def _param_name(file_name: str) -> str:
    if file_name in _GRU_NAMES:
        return _GRU_NAMES[file_name]
    if file_name in SPARSE_NAMES:  # O1..O4 weights
        return f"{file_name}.weight"
    return file_name  # cond.*, O*.bias


def expected_shapes(config: VocoderConfig) -> dict[str, tuple[int, ...]]:
    """Shape of every tensor (file names, dense and block-sparse full shapes) for ``config``."""
    h, c, half, m = config.hidden_size, config.cond_channels, config.hidden_size // 2, config.n_features
    shapes: dict[str, tuple[int, ...]] = {"cond.conv_in.weight": (c, m, 5), "cond.conv_in.bias": (c,)}
    for i in range(config.cond_blocks):
        shapes.update({f"cond.blocks.{i}.conv1.weight": (c, c, 3), f"cond.blocks.{i}.conv1.bias": (c,),
                       f"cond.blocks.{i}.conv2.weight": (c, c, 1), f"cond.blocks.{i}.conv2.bias": (c,)})
    shapes.update({"gru.weight_ih": (3 * h, config.n_inputs + c), "gru.bias_ih": (3 * h,),
                   "gru.weight_hh": (3 * h, h), "gru.bias_hh": (3 * h,),
                   "O1": (half, half), "O1.bias": (half,), "O2": (N_CLASSES, half), "O2.bias": (N_CLASSES,),
                   "O3": (half, half), "O3.bias": (half,), "O4": (N_CLASSES, half), "O4.bias": (N_CLASSES,)})
    return shapes


def export_vocoder(model: WaveRNN, path: str | os.PathLike, *, dtype=np.float16) -> None:
    """Write ``model``'s weights to ``path`` (safetensors, ARCHITECTURE.md layout), atomically.

    Args:
        model: the trained vocoder (pruning masks already applied to its weights).
        path: destination ``vocoder.safetensors``.
        dtype: float16 (default, half the size) or float32.
    """
    if model.config.lpc_order and model.config.lpc_prediction_input:
        raise ParameterError(f"this vocoder models an LPC excitation (lpc_order {model.config.lpc_order}); the "
                             "engine's kernels do not run such models yet, so it cannot be exported")
    state = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    state["gru.weight_ih_l0"] = state["gru.weight_ih_l0"] * coarse_input_mask(
        model.config.hidden_size, model.config.cond_channels, model.config.n_inputs)
    shapes = expected_shapes(model.config)
    dense, sparse = {}, {}
    for name in shapes:
        arr = state[_param_name(name)].numpy()
        if name in SPARSE_NAMES:
            # Round first, so a block whose weights all round to 0 is dropped rather than stored as zeros.
            sparse[name] = BlockSparse.from_dense(arr.astype(dtype), model.config.block_shape)
        else:
            dense[name] = arr
    save_vocoder_tensors(path, dense, sparse, dtype=dtype)


def load_vocoder(path: str | os.PathLike, config: VocoderConfig) -> WaveRNN:
    """Rebuild a :class:`WaveRNN` from a vocoder file, refusing any tensor that does not fit ``config``.

    Raises:
        VoiceFileError: unreadable file, missing tensor, or a shape / block shape that differs from
            what ``config`` implies (the message names the tensor), or a non-zero weight where the
            coarse-input mask requires zero.
    """
    dense, sparse = load_vocoder_tensors(path, cond_blocks=config.cond_blocks)
    shapes = expected_shapes(config)
    state: dict[str, torch.Tensor] = {}
    for name, shape in shapes.items():
        if name in SPARSE_NAMES:
            bs = sparse[name]
            bs.validate(f"{os.fspath(path)}:{name}", expected_shape=shape)
            if bs.data.shape[0] and bs.block_shape != config.block_shape:
                raise VoiceFileError(f"{path}: tensor '{name}' has block shape {bs.block_shape}, the config "
                                     f"says {config.block_shape}")
            arr = bs.to_dense()
        else:
            arr = dense[name]
            if arr.shape != shape:
                raise VoiceFileError(f"{path}: tensor '{name}' has shape {arr.shape}, expected {shape} "
                                     f"for hidden_size={config.hidden_size}, cond_channels={config.cond_channels}")
        state[_param_name(name)] = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32))
    mask = coarse_input_mask(config.hidden_size, config.cond_channels, config.n_inputs)
    if bool((state["gru.weight_ih_l0"][mask == 0] != 0).any()):
        raise VoiceFileError(f"{path}: tensor 'gru.weight_ih' has non-zero weights in column 2 of the coarse "
                             "rows; the current coarse sample must not reach the coarse half")
    model = WaveRNN(config)
    model.load_state_dict(state, strict=True)
    model.eval()
    return model
