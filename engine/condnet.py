"""The vocoder's conditioning net in numpy: log-mel frames -> per-frame conditioning vectors.

Exactly the torch module of docs/ARCHITECTURE.md ("The WaveRNN", conditioning net):
``conv_in`` Conv1d(80 -> C, k 5, pad 2), then ``cond_blocks`` residual blocks
``x <- x + conv2(relu(conv1(relu(x))))`` with conv1 Conv1d(C -> C, k 3, pad 1) and conv2
Conv1d(C -> C, k 1). Zero padding at the ends, so a frame sees +-(2 + cond_blocks) frames.
Runs once per utterance (a few BLAS matrix products), not per sample.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from wavern.errors import ParameterError, VoiceFileError

__all__ = ["CondNet", "conv1d"]


def conv1d(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Same-length 1-D convolution over time with zero padding (torch Conv1d, odd kernel).

    Parameters
    ----------
    x : (T, C_in) float32, time first.
    weight : (C_out, C_in, K) float32, K odd; padding is (K - 1) / 2 on each side.
    bias : (C_out,) float32.

    Returns
    -------
    (T, C_out) float32: ``y[t, o] = bias[o] + sum_{i,k} weight[o, i, k] x[t + k - pad, i]``.
    """
    c_out, c_in, k = weight.shape
    if x.ndim != 2 or x.shape[1] != c_in:
        raise ParameterError(f"conv1d input must be (T, {c_in}), found {x.shape}")
    pad = (k - 1) // 2
    t = x.shape[0]
    xp = np.zeros((t + 2 * pad, c_in), dtype=np.float32)
    xp[pad:pad + t] = x
    cols = np.lib.stride_tricks.sliding_window_view(xp, k, axis=0)  # (T, C_in, K)
    return cols.reshape(t, c_in * k) @ weight.reshape(c_out, c_in * k).T + bias


@dataclasses.dataclass(frozen=True)
class CondNet:
    """Weights of the conditioning net; call it on a log-mel ``(T, 80)`` to get ``(T, C)``."""

    conv_in: tuple[np.ndarray, np.ndarray]  # (C, 80, 5), (C)
    blocks: tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], ...]  # conv1 w, b, conv2 w, b

    @property
    def channels(self) -> int:
        return int(self.conv_in[0].shape[0])

    @property
    def n_mels(self) -> int:
        return int(self.conv_in[0].shape[1])

    @classmethod
    def from_tensors(cls, dense: dict[str, np.ndarray], *, cond_blocks: int) -> "CondNet":
        """Take the ``cond.*`` tensors of a vocoder file (see vocoder/format.py); checks shapes."""
        def get(name: str, shape: tuple[int, ...]) -> np.ndarray:
            arr = dense.get(name)
            if arr is None:
                raise VoiceFileError(f"vocoder tensor '{name}' is missing")
            if tuple(arr.shape) != shape:
                raise VoiceFileError(f"vocoder tensor '{name}': expected shape {shape}, found {tuple(arr.shape)}")
            return np.ascontiguousarray(arr, dtype=np.float32)

        w_in = dense.get("cond.conv_in.weight")
        if w_in is None or w_in.ndim != 3:
            raise VoiceFileError("vocoder tensor 'cond.conv_in.weight' is missing or not 3-D")
        c, n_mels = int(w_in.shape[0]), int(w_in.shape[1])
        conv_in = (get("cond.conv_in.weight", (c, n_mels, 5)), get("cond.conv_in.bias", (c,)))
        blocks = tuple(
            (get(f"cond.blocks.{i}.conv1.weight", (c, c, 3)), get(f"cond.blocks.{i}.conv1.bias", (c,)),
             get(f"cond.blocks.{i}.conv2.weight", (c, c, 1)), get(f"cond.blocks.{i}.conv2.bias", (c,)))
            for i in range(cond_blocks))
        return cls(conv_in=conv_in, blocks=blocks)

    def __call__(self, mel: np.ndarray) -> np.ndarray:
        """mel (T, n_mels) -> cond (T, C) float32."""
        mel = np.asarray(mel, dtype=np.float32)
        if mel.ndim != 2 or mel.shape[1] != self.n_mels or mel.shape[0] < 1:
            raise ParameterError(f"mel must have shape (frames >= 1, {self.n_mels}), found {mel.shape}")
        if not np.all(np.isfinite(mel)):
            raise ParameterError("mel contains NaN or infinite values")
        x = conv1d(mel, *self.conv_in)  # (T, C)
        for w1, b1, w2, b2 in self.blocks:
            y = conv1d(np.maximum(x, 0.0), w1, b1)
            x = x + conv1d(np.maximum(y, 0.0), w2, b2)
        return np.ascontiguousarray(x, dtype=np.float32)
