"""The vocoder's conditioning net in numpy: log-mel frames -> per-frame conditioning vectors.

Exactly the torch module of docs/ARCHITECTURE.md ("The WaveRNN", conditioning net):
``conv_in`` Conv1d(80 -> C, k 5, pad 2), then ``cond_blocks`` residual blocks
``x <- x + conv2(relu(conv1(relu(x))))`` with conv1 Conv1d(C -> C, k 3, pad 1) and conv2
Conv1d(C -> C, k 1). Zero padding at the ends, so a frame sees +-(2 + cond_blocks) frames.
Runs once per utterance (or sentence), not per sample.

The convolutions are :func:`wavern.engine.kernels.conv1d_taps`: every output is one fixed chain
of fused multiply-adds, so frame t's vector depends only on the mel frames within its receptive
field, never on the mel's length, on how many threads numpy's BLAS uses or on buffer alignment.
This is the one forward of the net; :meth:`wavern.engine.vocoder.Vocoder.frame_inputs` builds
on it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from wavern.engine import kernels as K
from wavern.engine.kernels import conv1d
from wavern.errors import ParameterError, VoiceFileError

__all__ = ["CondNet", "conv1d"]


@dataclasses.dataclass(frozen=True)
class CondNet:
    """Weights of the conditioning net; call it on a log-mel ``(T, 80)`` to get ``(T, C)``.

    ``conv_in`` and ``blocks`` hold the weights in torch's layout (as in the file); the
    kernels' layout of the same weights is prepared once, at construction.
    """

    conv_in: tuple[np.ndarray, np.ndarray]  # (C, 80, 5), (C)
    blocks: tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], ...]  # conv1 w, b, conv2 w, b
    _taps: tuple = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        taps = (K.conv_taps(*self.conv_in),
                tuple((K.conv_taps(w1, b1), K.conv_taps(w2, b2)) for w1, b1, w2, b2 in self.blocks))
        object.__setattr__(self, "_taps", taps)

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
        """mel (T, n_mels) -> cond (T, C) float32; the same mel gives the same bytes in any process."""
        mel = np.asarray(mel, dtype=np.float32)
        if mel.ndim != 2 or mel.shape[1] != self.n_mels or mel.shape[0] < 1:
            raise ParameterError(f"mel must have shape (frames >= 1, {self.n_mels}), found {mel.shape}")
        if not np.all(np.isfinite(mel)):
            raise ParameterError("mel contains NaN or infinite values")
        zero = np.float32(0.0)
        conv_in, blocks = self._taps
        x = K.conv1d_taps(mel, conv_in)  # (T, C)
        for conv1, conv2 in blocks:
            y = K.conv1d_taps(np.maximum(x, zero), conv1)
            x = x + K.conv1d_taps(np.maximum(y, zero), conv2)
        return x
