"""Streaming a paragraph's mel: one sentence at a time, its rows decoded on demand.

Torch-free, shared by the two forms of the acoustic model that infer: the torch module
(:class:`~wavern.conditioning.acoustic.AcousticModel`, training and reference) and the numpy
runtime (:class:`~wavern.conditioning.runtime.AcousticRuntime`, what a loaded voice runs). Both
provide ``config``, ``infer_lazy`` and ``_mel_rows``, which is all :func:`stream_mel`,
:class:`LazyMel` and :class:`SentenceMel` use.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np

from wavern.conditioning.config import PROSODY_DEFAULT, SPEED_LIMITS, check_prosody
from wavern.errors import ParameterError

__all__ = ["FIRST_DECODE_FRAMES", "LazyMel", "SentenceMel", "stream_mel", "check_request", "REFERENCE_LIMIT"]

#: A reference clip's log-mel values beyond this are refused: natural-log mel powers of audio lie
#: within about [-12, 10], and values far outside overflow the style encoder's sums.
REFERENCE_LIMIT = 100.0

# A streamed sentence's rows come in two passes of the window decoder's last layer
# (SentenceMel.rows): first the rows asked for, at least FIRST_DECODE_FRAMES, then all the rest
# at once, since every pass pays a band of context rows on both sides and a fixed overhead
# (~2 ms). 48 frames cover the vocoder's conditioning windows through the engine's chunk ramp
# (its first 17 frames: windows of 16 frames plus a receptive radius up to 16), so the second
# pass comes after the ramp; 48 rather than 32 rows cost ~0.15 ms more on the first pass.
# A sentence of at most 2 * FIRST_DECODE_FRAMES frames is decoded in one pass.
FIRST_DECODE_FRAMES = 48


class LazyMel:
    """The log-mel of one inferred sequence, its rows decoded when first asked for.

    Made by ``infer_lazy`` of either model form: it holds the input of the window decoder's last
    layer and runs that layer (and the mel projection) only on the rows asked for (the model's
    ``_mel_rows``; :meth:`~wavern.conditioning.acoustic.FrameDecoder.last_rows`). Rows decoded
    in parts equal the one-shot decode to float rounding (max |error| ~4e-6 in log-mel on the
    shipped voice; tested); :meth:`full` before any :meth:`rows`, or ``rows(0, n_frames)``, is
    the one-shot decode itself. Safe to share between threads. The arrays returned are views of
    one buffer: do not modify them.
    """

    def __init__(self, model, x, is_global, *, n_frames: int | None = None, mel: np.ndarray | None = None) -> None:
        self._model, self._x, self._is_global = model, x, is_global
        if mel is not None:  # already decoded
            self.n_frames = int(mel.shape[0])
            self._mel, self._lo, self._hi = mel, 0, self.n_frames
        else:
            self.n_frames = int(n_frames)  # the rows of x: (1, T, D) for torch, (T, D) for numpy
            self._mel = np.zeros((self.n_frames, model.config.n_out), np.float32)
            self._lo = self._hi = 0  # rows [lo, hi) are decoded; none yet
        self._cache: dict = {}
        self._lock = threading.Lock()

    @classmethod
    def complete(cls, mel: np.ndarray) -> "LazyMel":
        """A LazyMel whose rows are all known: (T, n_mels)."""
        return cls(None, None, None, mel=np.ascontiguousarray(mel, np.float32))

    @property
    def n_mels(self) -> int:
        return int(self._mel.shape[1])

    @property
    def started(self) -> bool:
        """Whether any row is decoded."""
        return self._hi > self._lo

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Mel rows ``[start, stop)``: (stop - start, n_mels) float32, decoding those missing."""
        if not 0 <= start <= stop <= self.n_frames:
            raise ParameterError(f"rows [{start}, {stop}) outside the {self.n_frames} frames of this mel")
        with self._lock:
            if start < stop and not (self._lo <= start and stop <= self._hi):
                if self._lo == self._hi:  # nothing yet
                    self._decode(start, stop)
                    self._lo, self._hi = start, stop
                else:  # the decoded rows stay one range: fill any gap too
                    if start < self._lo:
                        self._decode(start, self._lo)
                        self._lo = start
                    if stop > self._hi:
                        self._decode(self._hi, stop)
                        self._hi = stop
                if self._hi - self._lo == self.n_frames:
                    self._x = self._cache = None  # all decoded: let the layer input go
        return self._mel[start:stop]

    def full(self) -> np.ndarray:
        """All rows (T, n_mels): in one pass if none was decoded yet, else the missing ones."""
        return self.rows(0, self.n_frames)

    def _decode(self, start: int, stop: int) -> None:
        self._mel[start:stop] = self._model._mel_rows(self._x, self._is_global, start, stop, self._cache)


class SentenceMel:
    """One sentence of a streamed paragraph (see :func:`stream_mel`).

    Its mel comes from the :class:`LazyMel` of the window it was synthesised in: :meth:`rows`
    decodes on demand (the rows asked for, at least :data:`FIRST_DECODE_FRAMES`, then the rest
    of the sentence in one pass), so the first rows are ready before the last layer has run
    over the whole sentence; :attr:`mel` is the whole sentence.

    Attributes:
        sentence: the sentence's index (the front end's ``sentence_of`` value).
        token_start: index of its first token in the paragraph.
        durations: (n_tokens,) int64 frames of its tokens; ``sum == n_frames``.
        n_frames: T, its number of mel frames.
    """

    __slots__ = ("sentence", "token_start", "durations", "n_frames", "_source", "_offset", "_ready")

    def __init__(self, sentence: int, token_start: int, durations: np.ndarray, source: LazyMel,
                 offset: int = 0) -> None:
        self.sentence, self.token_start, self.durations = int(sentence), int(token_start), durations
        self.n_frames = int(np.asarray(durations).sum())
        if not 0 <= offset <= offset + self.n_frames <= source.n_frames:
            raise ParameterError(f"sentence frames [{offset}, {offset + self.n_frames}) outside the "
                                 f"{source.n_frames} frames of its window")
        self._source, self._offset = source, int(offset)  # its frames: source rows [offset, offset + T)
        self._ready = 0  # rows [0, ready) were asked of the source

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Its mel rows ``[start, stop)``: (stop - start, n_mels) float32."""
        n = self.n_frames
        if not 0 <= start <= stop <= n:
            raise ParameterError(f"rows [{start}, {stop}) outside the {n} frames of sentence {self.sentence}")
        if stop > self._ready:
            first_pass = self._ready == 0 and n > 2 * FIRST_DECODE_FRAMES
            want = min(n, max(stop, FIRST_DECODE_FRAMES)) if first_pass else n
            self._source.rows(self._offset, self._offset + want)
            self._ready = want
        return self._source.rows(self._offset + start, self._offset + stop)

    @property
    def mel(self) -> np.ndarray:
        """(T, n_mels) float32, the whole sentence (with the window's one-shot decode if no row was asked)."""
        if self.n_frames and not self._source.started:
            self._source.full()
        return self.rows(0, self.n_frames)

    def __repr__(self) -> str:
        return (f"SentenceMel(sentence={self.sentence}, token_start={self.token_start}, "
                f"n_frames={self.n_frames})")


def stream_mel(model, ids, is_global, sentence_of, *, speaker: str | int, speed: float = 1.0,
               reference: np.ndarray | None = None, context_sentences: int = 1,
               prosody=None) -> Iterator[SentenceMel]:
    """Yield a paragraph's mel one sentence at a time, with bounded memory.

    Sentence ``s`` is synthesised inside a window of sentences ``[s - c, s + c]`` (c =
    ``context_sentences``) so that the encoder's global tokens and the decoder see its
    neighbours; only sentence ``s``'s frames are kept. A window longer than the model's
    ``max_infer_tokens`` drops its farthest sentences until it fits (a sentence alone over the
    limit is a :class:`ParameterError`). Memory is bounded by the window, not the
    paragraph; compute is ``(2c + 1)`` times a single pass (c = 0: every sentence alone).

    Args:
        model: an :class:`~wavern.conditioning.acoustic.AcousticModel` or an
            :class:`~wavern.conditioning.runtime.AcousticRuntime`.
        ids, is_global: (N,) the paragraph's tokens.
        sentence_of: (N,) non-decreasing sentence index of every token.
        speaker, speed, reference, prosody: as in ``model.infer_lazy``.
        context_sentences: c >= 0.

    Yields:
        :class:`SentenceMel` in order; concatenating their mels gives the paragraph. A sentence
        whose tokens were all predicted 0 frames yields an empty (0, n_mels) mel.

    Example::

        utt = frontend.analyze(text, voice="en-us")
        for part in stream_mel(model, utt.ids, utt.is_global, utt.sentence_of, speaker="en-us"):
            vocode(part.mel)
    """
    ids_a, glob_a, sent = np.asarray(ids), np.asarray(is_global), np.asarray(sentence_of)
    if ids_a.ndim != 1 or glob_a.shape != ids_a.shape or sent.shape != ids_a.shape:
        raise ParameterError(f"ids, is_global and sentence_of must be 1-D of equal length, found "
                             f"{ids_a.shape}, {glob_a.shape}, {sent.shape}")
    if ids_a.size == 0:
        raise ParameterError("nothing to say: the phoneme sequence is empty")
    if (np.diff(sent) < 0).any():
        raise ParameterError("sentence_of must be non-decreasing (tokens in reading order)")
    if context_sentences < 0:
        raise ParameterError(f"context_sentences must be >= 0, found {context_sentences}")
    change = np.flatnonzero(np.diff(sent)) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [ids_a.size]])
    n_sent = starts.size
    limit = model.config.max_infer_tokens
    for s in range(n_sent):
        lo, hi = max(0, s - context_sentences), min(n_sent - 1, s + context_sentences)
        while ends[hi] - starts[lo] > limit and (lo < s or hi > s):  # over the model's limit (long gibberish):
            if hi - s >= s - lo:  # drop the farther neighbour, the later one on a tie
                hi -= 1
            else:
                lo += 1
        w0, w1 = starts[lo], ends[hi]
        if w1 - w0 > limit:
            raise ParameterError(f"sentence {s} alone is {w1 - w0} phoneme tokens, over the acoustic model's "
                                 f"max_infer_tokens {limit}: split it")
        glob = glob_a[w0:w1].copy()
        glob[starts[s] - w0] = True  # the sentence start anchors its own window
        lazy, frames = model.infer_lazy(ids_a[w0:w1], glob, speaker=speaker, speed=speed, reference=reference,
                                        prosody=prosody)
        bounds = np.concatenate([[0], np.cumsum(frames)])
        yield SentenceMel(int(sent[starts[s]]), int(starts[s]), frames[starts[s] - w0:ends[s] - w0], lazy,
                          offset=int(bounds[starts[s] - w0]))


def check_request(config, ids, is_global, *, speed: float, reference, prosody):
    """The checks both model forms make on an ``infer_lazy`` request, with the same messages.

    Returns:
        (ids (N,) int64, is_global (N,) bool, reference (T, n_mels) float32 or None, prosody:
        (rate, pitch, range) for a ``config.prosody`` model, None for the default).
    """
    ids_a = np.asarray(ids)
    glob_a = np.asarray(is_global)
    if ids_a.ndim != 1 or glob_a.shape != ids_a.shape:
        raise ParameterError(f"ids and is_global must be 1-D of equal length, found shapes "
                             f"{ids_a.shape} and {glob_a.shape}")
    n = ids_a.shape[0]
    if n == 0:
        raise ParameterError("nothing to say: the phoneme sequence is empty")
    if n > config.max_infer_tokens:
        raise ParameterError(f"{n} tokens exceed max_infer_tokens {config.max_infer_tokens}; "
                             f"use stream_mel to synthesise long text a few sentences at a time")
    if not np.issubdtype(ids_a.dtype, np.integer):
        raise ParameterError(f"ids must be integers, found dtype {ids_a.dtype}")
    n_sym = config.encoder.n_symbols
    bad = (ids_a < 0) | (ids_a >= n_sym)
    if bad.any():
        raise ParameterError(f"phoneme id {ids_a[bad][0]} is outside the symbol table [0, {n_sym}); "
                             f"map unknown symbols through the voice's SymbolTable")
    if not (SPEED_LIMITS[0] <= float(speed) <= SPEED_LIMITS[1]):
        raise ParameterError(f"speed {speed} is outside [{SPEED_LIMITS[0]}, {SPEED_LIMITS[1]}]")
    ref = None
    if reference is not None:
        ref = np.asarray(reference, np.float32)
        if ref.ndim != 2 or ref.shape[1] != config.n_mels or ref.shape[0] == 0:
            raise ParameterError(
                f"reference mel must have shape (frames >= 1, {config.n_mels}), found {tuple(ref.shape)}")
        if not np.isfinite(ref).all():
            raise ParameterError("reference mel holds NaN or infinite values")
        if np.abs(ref).max() > REFERENCE_LIMIT:
            raise ParameterError(f"reference mel holds values beyond ±{REFERENCE_LIMIT:g} (up to {np.abs(ref).max():.3g}); "
                                 f"it must be a log-mel, as wavern.dsp.log_mel makes (about -12 to 10)")
    values = None
    if prosody is not None:
        values = check_prosody(prosody)
        if not config.prosody:
            if values != PROSODY_DEFAULT:
                raise ParameterError("this voice's acoustic model has no prosody input (trained without "
                                     "--prosody): its rate, pitch and pitch range cannot be set")
            values = None
    return ids_a.astype(np.int64), glob_a.astype(bool), ref, values
