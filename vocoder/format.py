"""The vocoder file format: what ``vocoder.safetensors`` holds, readable with numpy alone.

This module is the contract between the torch side (``wavern.vocoder``) and the runtime
(``wavern.engine``); it imports neither torch nor numba. See docs/ARCHITECTURE.md,
"Vocoder file format".

A block-sparse matrix ``M`` is stored as ``M.data`` (nnzb, br, bc), ``M.index`` (nnzb, 2)
int32 (block_row, block_col) sorted column-major (by block_col, then block_row), and
``M.shape`` int64 [rows, cols].
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

from wavern.errors import ParameterError, VoiceFileError
from wavern.fileio import atomic_write

__all__ = ["BlockSparse", "SPARSE_NAMES", "dense_names", "save_vocoder_tensors", "load_vocoder_tensors",
           "MAX_HIDDEN", "MAX_COND_CHANNELS", "MAX_COND_BLOCKS"]

# Limits a vocoder file's sizes must keep (far above any CPU-real-time vocoder), checked before any
# memory is allocated from them: a few-kB file must not ask for gigabytes (a 3H x H matrix with one
# stored block is densified at load).
MAX_HIDDEN = 4096
MAX_COND_CHANNELS = 4096
MAX_COND_BLOCKS = 16

#: Matrices stored block-sparse.
SPARSE_NAMES = ("gru.weight_hh", "O1", "O2", "O3", "O4")


@dataclasses.dataclass(frozen=True)
class BlockSparse:
    """A block-sparse matrix: ``data[k]`` is the block at (``index[k,0]``, ``index[k,1]``)."""

    data: np.ndarray  # (nnzb, br, bc) float
    index: np.ndarray  # (nnzb, 2) int32 (block_row, block_col), column-major order
    shape: tuple[int, int]  # (rows, cols) of the full matrix

    @property
    def block_shape(self) -> tuple[int, int]:
        return int(self.data.shape[1]), int(self.data.shape[2])

    @property
    def density(self) -> float:
        br, bc = self.block_shape
        return self.data.shape[0] * br * bc / (self.shape[0] * self.shape[1])

    @classmethod
    def from_dense(cls, m: np.ndarray, block_shape: tuple[int, int]) -> "BlockSparse":
        """Keep every block that has a non-zero entry."""
        m = np.asarray(m)
        br, bc = block_shape
        rows, cols = m.shape
        if rows % br or cols % bc:
            raise ValueError(f"matrix shape {m.shape} is not a multiple of block shape {block_shape}")
        blocks = m.reshape(rows // br, br, cols // bc, bc).transpose(2, 0, 1, 3)  # (ncb, nrb, br, bc)
        keep = np.any(blocks != 0, axis=(2, 3))  # (ncb, nrb)
        bc_idx, br_idx = np.nonzero(keep)  # row-major over (col, row) = column-major order
        index = np.stack([br_idx, bc_idx], axis=1).astype(np.int32)
        return cls(data=np.ascontiguousarray(blocks[bc_idx, br_idx]), index=index, shape=(rows, cols))

    def to_dense(self) -> np.ndarray:
        br, bc = self.block_shape
        out = np.zeros(self.shape, dtype=self.data.dtype)
        for (r, c), blk in zip(self.index, self.data):
            out[r * br:(r + 1) * br, c * bc:(c + 1) * bc] = blk
        return out

    def validate(self, name: str, expected_shape: tuple[int, int] | None = None) -> None:
        """Raise :class:`VoiceFileError` naming ``name`` if the triple is inconsistent."""
        if self.data.ndim != 3:
            raise VoiceFileError(f"{name}.data must have 3 dims (nnzb, br, bc), found shape {self.data.shape}")
        if self.index.ndim != 2 or self.index.shape[1] != 2 or self.index.shape[0] != self.data.shape[0]:
            raise VoiceFileError(
                f"{name}.index must have shape ({self.data.shape[0]}, 2), found {self.index.shape}")
        if expected_shape is not None and tuple(self.shape) != tuple(expected_shape):
            raise VoiceFileError(f"{name}.shape: expected {tuple(expected_shape)}, found {tuple(self.shape)}")
        br, bc = self.block_shape
        rows, cols = self.shape
        if br <= 0 or bc <= 0 or rows % br or cols % bc:
            raise VoiceFileError(f"{name}: shape {self.shape} is not a multiple of block shape {(br, bc)}")
        if self.index.size:
            if self.index.min() < 0 or self.index[:, 0].max() >= rows // br or self.index[:, 1].max() >= cols // bc:
                raise VoiceFileError(f"{name}.index has block coordinates outside the {rows}x{cols} matrix")
            key = self.index[:, 1].astype(np.int64) * (rows // br) + self.index[:, 0]
            if np.any(np.diff(key) <= 0):
                raise VoiceFileError(f"{name}.index must be sorted column-major without duplicates")
        if not np.all(np.isfinite(self.data)):
            raise VoiceFileError(f"{name}.data contains NaN or infinite values")


def dense_names(cond_blocks: int) -> list[str]:
    """Names of the dense tensors a vocoder with ``cond_blocks`` residual blocks must hold."""
    names = ["cond.conv_in.weight", "cond.conv_in.bias"]
    for i in range(cond_blocks):
        for conv in ("conv1", "conv2"):
            names += [f"cond.blocks.{i}.{conv}.weight", f"cond.blocks.{i}.{conv}.bias"]
    names += ["gru.weight_ih", "gru.bias_ih", "gru.bias_hh"]
    names += [f"{o}.bias" for o in ("O1", "O2", "O3", "O4")]
    return names


def save_vocoder_tensors(path: str | os.PathLike, dense: dict[str, np.ndarray],
                         sparse: dict[str, BlockSparse], *, dtype=np.float16) -> None:
    """Write dense and block-sparse tensors to one safetensors file, atomically."""
    from safetensors.numpy import save_file

    tensors: dict[str, np.ndarray] = {}

    def cast(name: str, arr) -> np.ndarray:
        with np.errstate(over="ignore"):
            out = np.ascontiguousarray(np.asarray(arr).astype(dtype))
        if not np.isfinite(out).all():  # the loader refuses non-finite weights: say so now, not then
            src = np.asarray(arr, np.float64)
            if not np.isfinite(src).all():
                raise ParameterError(f"{name} holds NaN or inf weights")
            raise ParameterError(f"{name}: a weight of magnitude {float(np.abs(src).max()):.4g} does not fit "
                                 f"{np.dtype(dtype).name}; export in float32")
        return out

    for name, arr in dense.items():
        tensors[name] = cast(name, arr)
    for name, bs in sparse.items():
        tensors[f"{name}.data"] = cast(name, bs.data)
        tensors[f"{name}.index"] = np.ascontiguousarray(bs.index.astype(np.int32))
        tensors[f"{name}.shape"] = np.asarray(bs.shape, dtype=np.int64)
    atomic_write(path, lambda tmp: save_file(tensors, str(tmp)))


def load_vocoder_tensors(path: str | os.PathLike, *, cond_blocks: int) -> tuple[dict[str, np.ndarray], dict[str, BlockSparse]]:
    """Read a vocoder file into float32 dense tensors and :class:`BlockSparse` matrices.

    Checks presence, dtypes and internal consistency; the caller checks shapes against its
    config. Any problem raises :class:`VoiceFileError` naming the file and tensor.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    path = Path(path)
    if isinstance(cond_blocks, bool) or not isinstance(cond_blocks, int) or not 1 <= cond_blocks <= MAX_COND_BLOCKS:
        raise VoiceFileError(f"{path}: the vocoder's cond_blocks must be an integer in [1, {MAX_COND_BLOCKS}], "
                             f"found {cond_blocks!r}")
    if not path.is_file():
        raise VoiceFileError(f"vocoder file not found: {path}")
    try:
        raw = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as e:
        raise VoiceFileError(f"{path}: not a readable safetensors file ({e})") from None
    expected = set(dense_names(cond_blocks)) | {f"{n}.{p}" for n in SPARSE_NAMES for p in ("data", "index", "shape")}
    if extra := sorted(set(raw) - expected):
        raise VoiceFileError(f"{path}: tensor(s) {extra[:4]} that a vocoder with cond_blocks={cond_blocks} does not "
                             f"have: the voice's config does not describe these weights")
    dense: dict[str, np.ndarray] = {}
    for name in dense_names(cond_blocks):
        if name not in raw:
            raise VoiceFileError(f"{path}: missing tensor '{name}'")
        arr = raw[name]
        if not np.issubdtype(arr.dtype, np.floating):
            raise VoiceFileError(f"{path}: tensor '{name}' must be floating point, found {arr.dtype}")
        if not np.all(np.isfinite(arr)):
            raise VoiceFileError(f"{path}: tensor '{name}' contains NaN or infinite values")
        dense[name] = arr.astype(np.float32)
    sparse: dict[str, BlockSparse] = {}
    for name in SPARSE_NAMES:
        parts = [f"{name}.data", f"{name}.index", f"{name}.shape"]
        missing = [p for p in parts if p not in raw]
        if missing:
            raise VoiceFileError(f"{path}: missing tensor(s) {missing}")
        shape = raw[f"{name}.shape"]
        if shape.shape != (2,):
            raise VoiceFileError(f"{path}: '{name}.shape' must hold 2 values, found shape {shape.shape}")
        bs = BlockSparse(data=raw[f"{name}.data"].astype(np.float32),
                         index=raw[f"{name}.index"].astype(np.int32),
                         shape=(int(shape[0]), int(shape[1])))
        bs.validate(f"{path.name}:{name}")
        sparse[name] = bs
    return dense, sparse
