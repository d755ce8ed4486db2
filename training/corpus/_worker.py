"""The worker side of ``build_corpus``: render, check, write one shard of utterances.

The builder's forkserver preloads this module, so importing it warms what every fresh
worker process would otherwise redo per shard: the front end, librosa and the cached mel
filterbank (about 2 s). espeak-ng itself is *not* initialised here: each worker starts it
fresh, which is what makes a shard's audio independent of anything rendered before.
"""

from __future__ import annotations

import errno
from pathlib import Path

import numpy as np

import wavern.conditioning.frontend  # noqa: F401  (preloaded for the workers)
from wavern.dsp import DEFAULT_MEL, int16_to_float, log_mel, mel_filterbank
from wavern.errors import CorpusError, DiskFullError
from wavern.training.corpus.records import SAMPLE_RATE, write_wav

mel_filterbank(DEFAULT_MEL)  # warm the lru_cache (imports librosa) once, in the forkserver


def render_one(spec, out_dir: Path) -> tuple[dict, bool, float]:
    """Render, check against the tokens of a default-settings rendering (what ``analyze`` returns),
    write wav and mel; return (metadata, fell_back, seconds)."""
    from wavern.conditioning.frontend import render

    r = render(spec.text, voice=spec.voice, rate=spec.rate, pitch=spec.pitch, pitch_range=spec.pitch_range,
               noise_seed=spec.noise_seed)
    # Not ``analyze``: its fast events-only espeak pass leaves espeak's waveform state (carried
    # into the next call) different from a rendering's, and the corpus bytes would change with it.
    # A default-settings rendering has the same tokens (tested) and keeps the bytes of every build.
    reference = render(spec.text, voice=spec.voice).utterance.symbols
    fell_back = r.utterance.symbols != reference
    rate, pitch, prange = spec.rate, spec.pitch, spec.pitch_range
    if fell_back:
        from wavern.conditioning.frontend.espeak import DEFAULT_PITCH, DEFAULT_PITCH_RANGE, DEFAULT_RATE

        rate, pitch, prange = DEFAULT_RATE, DEFAULT_PITCH, DEFAULT_PITCH_RANGE
        r = render(spec.text, voice=spec.voice, rate=rate, pitch=pitch, pitch_range=prange,
                   noise_seed=spec.noise_seed)
        if r.utterance.symbols != reference:
            raise CorpusError(f"utterance {spec.id}: espeak tokens are not reproducible for {spec.text[:60]!r}")
    u = r.utterance
    meta = write_utterance(out_dir, spec, u, r.audio, np.asarray(r.durations), voice=spec.voice, rate=rate,
                           pitch=pitch, pitch_range=prange)
    return meta, fell_back, meta["n_samples"] / SAMPLE_RATE


def write_utterance(out_dir: Path, spec, u, pcm: np.ndarray, durations: np.ndarray, *, voice: str,
                    rate: int | None, pitch: int | None, pitch_range: int | None) -> dict:
    """Write one rendered utterance's wav and mel; return its ``metadata.jsonl`` record.

    ``u``: the front end's :class:`Utterance`; ``durations``: samples per token, tiling ``pcm``."""
    bounds = np.concatenate([[0], np.cumsum(durations)])
    spans = [{"start": int(w.start), "end": int(w.end), "token_start": t0, "token_end": t1,
              "sample_start": int(bounds[t0]), "sample_end": int(bounds[t1])}
             for w, (t0, t1) in zip(u.words, u.word_token_spans())]
    mel = log_mel(int16_to_float(pcm), DEFAULT_MEL)
    try:
        write_wav(out_dir / "wavs" / f"{spec.id}.wav", pcm)
        np.save(out_dir / "mels" / f"{spec.id}.npy", mel.astype(np.float32, copy=False))
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFullError(f"disk full while writing utterance {spec.id} to {str(out_dir)!r}") from exc
        raise
    return {
        "id": spec.id, "text": spec.text, "spoken": " ".join(s.spoken for s in u.sentences),
        "voice": voice, "rate": rate, "pitch": pitch, "pitch_range": pitch_range,
        "phonemes": u.symbols, "durations": [int(d) for d in durations], "word_spans": spans,
        "n_samples": int(pcm.size),
    }


def render_shard(args: tuple[list, str]) -> list[tuple[dict, bool, float]]:
    specs, out_dir = args
    return [render_one(spec, Path(out_dir)) for spec in specs]
