"""Word error rate by an independent recogniser: PocketSphinx's bundled US-English model.

wavern never trains on it, so its mistakes measure how intelligible a voice is, not how close
it is to its teacher. Audio is resampled to the recogniser's 16 kHz; texts are compared as
lower-case words without punctuation (the reference is the *spoken* form: numbers, dates and
money already written out, as the voice read them).

>>> rec = Recognizer()                                               # doctest: +SKIP
>>> rec.transcribe(audio_22050_float)                                # doctest: +SKIP
'hello world'
>>> word_error_rate(["hello world"], ["hello word"])                 # doctest: +SKIP
0.5

Needs the ``eval`` extra (``pocketsphinx``, ``jiwer``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from wavern.errors import ParameterError

__all__ = ["Recognizer", "normalize_words", "word_error_rate", "RECOGNIZER_RATE"]

RECOGNIZER_RATE = 16000  # what the bundled acoustic model was trained on
_WORD = re.compile(r"[a-z0-9']+")


def normalize_words(text: str) -> str:
    """Lower-case words, apostrophes kept, everything else a separator."""
    return " ".join(_WORD.findall(text.lower().replace("\u2019", "'")))


def word_error_rate(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """Corpus-level WER: all edits over all reference words (texts normalised by :func:`normalize_words`)."""
    import jiwer

    if len(references) != len(hypotheses) or not references:
        raise ParameterError(f"need as many hypotheses as references (>0), found {len(hypotheses)} and "
                             f"{len(references)}")
    refs = [normalize_words(r) for r in references]
    if not all(refs):
        raise ParameterError("a reference has no words")
    hyps = [normalize_words(h) for h in hypotheses]
    return float(jiwer.wer(refs, hyps))


class Recognizer:
    """PocketSphinx with its default US-English acoustic model, dictionary and language model."""

    def __init__(self) -> None:
        try:
            from pocketsphinx import Decoder
        except ImportError as exc:
            raise ParameterError(f"the recogniser needs pocketsphinx: pip install -e '.[eval]' ({exc})") from None
        self._decoder = Decoder(samprate=RECOGNIZER_RATE, loglevel="FATAL")

    def transcribe(self, audio: np.ndarray, sample_rate: int = 22050) -> str:
        """Float audio in [-1, 1] (or int16) at ``sample_rate`` → the recognised words."""
        from scipy.signal import resample_poly

        x = np.asarray(audio)
        if x.dtype == np.int16:
            x = x.astype(np.float32) / 32768.0
        if x.ndim != 1:
            raise ParameterError(f"expected mono audio, found shape {x.shape}")
        g = math.gcd(int(sample_rate), RECOGNIZER_RATE)
        y = resample_poly(x.astype(np.float64), RECOGNIZER_RATE // g, int(sample_rate) // g)
        pcm = np.clip(np.round(y * 32767.0), -32768, 32767).astype(np.int16)
        d = self._decoder
        d.start_utt()
        d.process_raw(pcm.tobytes(), full_utt=True)
        d.end_utt()
        hyp = d.hyp()
        return hyp.hypstr if hyp is not None else ""
