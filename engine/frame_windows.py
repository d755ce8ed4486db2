"""The vocoder's per-frame gate inputs of a sentence, computed window by window as the stream needs
them (:class:`WindowedFrameInputs`)."""

from __future__ import annotations

import numpy as np

__all__ = ["WindowedFrameInputs", "MEL_WINDOW_FRAMES"]

MEL_WINDOW_FRAMES = 16  # conditioning computed over windows of this many frames (+ context)


class WindowedFrameInputs:
    """The vocoder's per-frame gate inputs of a sentence, computed window by window.

    Window ``k`` covers frames ``[k W, (k + 1) W)`` and is computed from the mel frames
    ``[k W − R, (k + 1) W + R)`` (R = the conditioning net's receptive radius), so each window
    equals the corresponding rows of ``frame_inputs(whole mel)``: the zero padding at the
    sentence ends is reproduced by computing edge windows on the unpadded edges.

    ``mel``: a (T, n_mels) array, or a :class:`~wavern.conditioning.stream.SentenceMel`
    whose rows are decoded only when a window first needs them (so the first chunk waits for
    the first rows of the acoustic model's last layer, not for the whole sentence).
    """

    def __init__(self, vocoder, mel, window: int = MEL_WINDOW_FRAMES, *, postfilter=None,
                 ltp_gain_scale: float = 1.0):
        self.voc = vocoder
        self.postfilter = postfilter
        self.ltp_gain_scale = ltp_gain_scale
        if isinstance(mel, np.ndarray):
            self.mel = np.ascontiguousarray(mel, np.float32)
            self.n_frames = self.mel.shape[0]
            self._rows = lambda a, b: self.mel[a:b]
        else:
            self.n_frames = mel.n_frames
            self._rows = mel.rows
        self.window = window
        self.radius = 2 + vocoder.cond_blocks
        self._cache: dict[int, tuple[np.ndarray, np.ndarray | None]] = {}

    def _both(self, k: int) -> tuple[np.ndarray, np.ndarray | None]:
        w = self._cache.get(k)
        if w is None:
            T = self.n_frames
            a, b = k * self.window, min((k + 1) * self.window, T)
            lo, hi = max(0, a - self.radius), min(T, b + self.radius)
            rows = self._rows(lo, hi)
            gi = self.voc.frame_inputs(rows, ltp_gain_scale=self.ltp_gain_scale)
            coefs = None
            if self.postfilter is not None:  # frame t's filter depends on mel row t alone
                coefs = self.postfilter.coefficients(np.asarray(rows)[a - lo: b - lo])
            w = (np.ascontiguousarray(gi[a - lo: b - lo]), coefs)
            self._cache = {kk: vv for kk, vv in self._cache.items() if kk >= k - 1}
            self._cache[k] = w
        return w

    def _window(self, k: int) -> np.ndarray:
        return self._both(k)[0]

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Mel rows ``[start, stop)`` of the sentence (decoded as needed)."""
        return np.asarray(self._rows(start, stop))

    def coefs_covering(self, position: int, n: int) -> np.ndarray:
        """The post-filter coefficients of the frames :meth:`covering` returns (same first frame)."""
        hop = self.voc.hop
        k0, k1 = position // hop // self.window, (position + n - 1) // hop // self.window
        parts = [self._both(k)[1] for k in range(k0, k1 + 1)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def covering(self, position: int, n: int) -> tuple[np.ndarray, int]:
        hop = self.voc.hop
        f0, f1 = position // hop, (position + n - 1) // hop
        k0, k1 = f0 // self.window, f1 // self.window
        parts = [self._window(k) for k in range(k0, k1 + 1)]
        gi = parts[0] if len(parts) == 1 else np.ascontiguousarray(np.concatenate(parts))
        return gi, k0 * self.window
