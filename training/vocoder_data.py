"""Training data for the vocoder: a one-time flat cache of a corpus and segment batches from it.

The corpus (``wavern.training.corpus``; ``metadata.jsonl`` with ``id``, ``text``,
``n_samples``; ``wavs/{id}.wav`` int16 22 050 Hz mono; ``mels/{id}.npy`` float32
(1 + n // 256, 80)) is read once into three files under ``cache_dir``::

    audio.npy   int16   (total_samples,)      all utterances back to back
    mels.npy    float32 (total_frames, 80)    all log-mels back to back
    index.json  ids, offsets, lengths, held-out flags, and a fingerprint of the corpus
    pitch.npy   float32 (total_frames, 2)     wavern.dsp.pitch_features of each utterance
                                              (added by :func:`build_pitch` for a pitch vocoder)
    phase.npy   float16 (total_samples,)      wavern.dsp.pulse_phase of each utterance's
                                              residual (:func:`build_phase`, phase-input vocoders)

Both arrays are memory-mapped, so a batch is a handful of slices. The cache is rebuilt when
the fingerprint (size and mtime of ``metadata.jsonl``, hop and mel count) changes.

Held-out rule: the corpus module's :func:`wavern.training.corpus.is_held_out` on the
utterance's ``text`` (about 3 %; the same rule every trainer uses); utterances without a text
fall back to the same hash of their id.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import os
import shutil
from pathlib import Path
from typing import NamedTuple

import numpy as np

from wavern.dsp import MelConfig
from wavern.errors import CorpusError, DiskFullError

__all__ = ["VocoderBatch", "VocoderData", "build_cache", "build_pitch", "build_phase"]

log = logging.getLogger(__name__)

_CACHE_VERSION = 1


class VocoderBatch(NamedTuple):
    mel: np.ndarray  # (B, T + 2 pad, n_mels [+ 2 pitch]) float32; frames outside the utterance are 0
    audio: np.ndarray  # (B, T * hop) int16; samples past the end are 0 (silence)
    prev: np.ndarray  # (B,) int16: the sample before audio[:, 0] (0 at an utterance start)
    # With an LPC vocoder (lpc_order P > 0), else None:
    past: np.ndarray | None = None  # (B, P + 1) int16: the P + 1 samples before audio[:, 0] (0 before the start)
    lpc: np.ndarray | None = None  # (B, T + 1, P + 1) float64: predictors of the frame before and of the T frames
    # (with ltp: past (B, history_samples), lpc (B, T + history_frames, P + 3), see VocoderData.segments)
    phase: np.ndarray | None = None  # (B, T * hop) float32 glottal phase in cycles (phase-input vocoders)


def _fingerprint(corpus_dir: Path, mel: MelConfig) -> dict:
    st = (corpus_dir / "metadata.jsonl").stat()
    return {"version": _CACHE_VERSION, "metadata_size": st.st_size, "metadata_mtime_ns": st.st_mtime_ns,
            "hop_length": mel.hop_length, "n_mels": mel.n_mels}


def _held_out(obj: dict) -> bool:
    from wavern.training.corpus import is_held_out

    text = obj.get("text")
    return bool(is_held_out(text if isinstance(text, str) and text else str(obj["id"])))


def _read_wav_int16(path: Path) -> np.ndarray:
    import soundfile as sf

    try:
        x, sr = sf.read(str(path), dtype="int16", always_2d=True)
    except (OSError, RuntimeError) as exc:
        raise CorpusError(f"cannot read audio {str(path)!r}: {exc}") from exc
    if x.shape[1] != 1:
        raise CorpusError(f"{str(path)!r}: expected mono audio, found {x.shape[1]} channels")
    return x[:, 0]


def build_cache(corpus_dir: str | os.PathLike, cache_dir: str | os.PathLike, mel: MelConfig) -> Path:
    """Flatten the corpus into ``cache_dir`` (skipped when an up-to-date cache is there)."""
    corpus_dir, cache_dir = Path(corpus_dir), Path(cache_dir)
    meta = corpus_dir / "metadata.jsonl"
    if not meta.is_file():
        raise CorpusError(f"{str(meta)!r} not found: build the corpus first (wavern.training.corpus.build_corpus)")
    fp = _fingerprint(corpus_dir, mel)
    index_path = cache_dir / "index.json"
    if index_path.is_file():
        try:
            if json.loads(index_path.read_text())["fingerprint"] == fp:
                return cache_dir
        except (ValueError, KeyError):
            pass
    entries = []
    for no, line in enumerate(meta.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            entries.append((str(obj["id"]), int(obj["n_samples"]), _held_out(obj)))
        except (ValueError, KeyError, TypeError) as exc:
            raise CorpusError(f"{meta}:{no}: bad metadata line ({exc})") from exc
    if not entries:
        raise CorpusError(f"{str(meta)!r} lists no utterances")
    hop = mel.hop_length
    n_samples = np.array([e[1] for e in entries], np.int64)
    n_frames = 1 + n_samples // hop
    s_off = np.concatenate([[0], np.cumsum(n_samples)])
    f_off = np.concatenate([[0], np.cumsum(n_frames)])
    tmp = cache_dir.with_name(cache_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        audio = _reserved_memmap(tmp / "audio.npy", np.int16, (int(s_off[-1]),))
        mels = _reserved_memmap(tmp / "mels.npy", np.float32, (int(f_off[-1]), mel.n_mels))
    except DiskFullError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for i, (uid, n, _) in enumerate(entries):
        a = _read_wav_int16(corpus_dir / "wavs" / f"{uid}.wav")
        if a.size != n:
            raise CorpusError(f"utterance {uid!r}: wav has {a.size} samples, metadata says {n}")
        m_path = corpus_dir / "mels" / f"{uid}.npy"
        try:
            m = np.load(m_path)
        except (OSError, ValueError) as exc:
            raise CorpusError(f"cannot read mel {str(m_path)!r}: {exc}") from exc
        if m.shape != (n_frames[i], mel.n_mels):
            raise CorpusError(f"mel {str(m_path)!r} has shape {m.shape}, expected {(int(n_frames[i]), mel.n_mels)}")
        audio[s_off[i]:s_off[i + 1]] = a
        mels[f_off[i]:f_off[i + 1]] = m
    audio.flush()
    mels.flush()
    del audio, mels
    index = {"fingerprint": fp, "ids": [e[0] for e in entries], "held_out": [e[2] for e in entries],
             "sample_offsets": s_off.tolist(), "frame_offsets": f_off.tolist()}
    (tmp / "index.json").write_text(json.dumps(index))
    shutil.rmtree(cache_dir, ignore_errors=True)
    cache_dir.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, cache_dir)
    log.info("cached %d utterances (%.1f min of audio) in %s", len(entries), s_off[-1] / mel.sample_rate / 60,
             cache_dir)
    return cache_dir


def build_pitch(cache_dir: str | os.PathLike, mel: MelConfig) -> Path:
    """Add ``pitch.npy`` to a cache: :func:`wavern.dsp.pitch_features` of every utterance's
    :func:`wavern.dsp.pitch_track`, frame-aligned with ``mels.npy`` (skipped when present and
    newer than the cache's index). 27 s of CPU for the corpus's 197 minutes of audio."""
    from wavern.dsp import audio_pitch_features, int16_to_float

    cache_dir = Path(cache_dir)
    out = cache_dir / "pitch.npy"
    index_path = cache_dir / "index.json"
    if out.is_file() and out.stat().st_mtime_ns >= index_path.stat().st_mtime_ns:
        return out
    index = json.loads(index_path.read_text())
    audio = np.load(cache_dir / "audio.npy", mmap_mode="r")
    s_off, f_off = index["sample_offsets"], index["frame_offsets"]
    tmp = cache_dir / "pitch.tmp.npy"
    feats = _reserved_memmap(tmp, np.float32, (f_off[-1], 2))
    for i in range(len(index["ids"])):
        utt = audio_pitch_features(int16_to_float(audio[s_off[i]:s_off[i + 1]]), mel)
        if utt.shape[0] != f_off[i + 1] - f_off[i]:
            raise CorpusError(f"utterance {index['ids'][i]!r}: {utt.shape[0]} pitch frames, "
                              f"{f_off[i + 1] - f_off[i]} mel frames")
        feats[f_off[i]:f_off[i + 1]] = utt
    feats.flush()
    del feats
    os.replace(tmp, out)
    log.info("pitch features of %d utterances in %s", len(index["ids"]), out)
    return out


def build_phase(cache_dir: str | os.PathLike, mel: MelConfig, lpc_order: int) -> Path:
    """Add ``phase.npy`` to a cache with ``pitch.npy``: :func:`wavern.dsp.pulse_phase` of every
    utterance's residual ``s - p`` (its mel's order-``lpc_order`` predictor, rounded to float32
    as the vocoder keeps it) at the lags of its pitch features, float16 per sample (skipped when
    present and newer than ``pitch.npy``; the file does not record ``lpc_order``: delete it to
    rebuild for another order). 38 s for the corpus on this machine."""
    from wavern.dsp import lpc_prediction, ltp_params, mel_lpc, pulse_phase

    cache_dir = Path(cache_dir)
    out, pitch_path = cache_dir / "phase.npy", cache_dir / "pitch.npy"
    if not pitch_path.is_file():
        raise CorpusError(f"{pitch_path} is missing: the phase needs the pitch features (build_pitch) first")
    if out.is_file() and out.stat().st_mtime_ns >= pitch_path.stat().st_mtime_ns:
        return out
    index = json.loads((cache_dir / "index.json").read_text())
    audio = np.load(cache_dir / "audio.npy", mmap_mode="r")
    mels = np.load(cache_dir / "mels.npy", mmap_mode="r")
    pitch = np.load(pitch_path, mmap_mode="r")
    s_off, f_off, hop = index["sample_offsets"], index["frame_offsets"], mel.hop_length
    tmp = cache_dir / "phase.tmp.npy"
    phase = _reserved_memmap(tmp, np.float16, (s_off[-1],))
    for i in range(len(index["ids"])):
        s = np.asarray(audio[s_off[i]:s_off[i + 1]], np.float64)
        a = mel_lpc(np.asarray(mels[f_off[i]:f_off[i + 1]]), lpc_order, mel).astype(np.float32)
        lags = ltp_params(np.asarray(pitch[f_off[i]:f_off[i + 1]]), mel)[:, 0]
        phase[s_off[i]:s_off[i + 1]] = pulse_phase(s - lpc_prediction(s, a, hop), lags, hop)
    phase.flush()
    del phase
    os.replace(tmp, out)
    log.info("pulse phase of %d utterances in %s", len(index["ids"]), out)
    return out


def _reserved_memmap(path: Path, dtype, shape: tuple) -> np.ndarray:
    """A new ``.npy`` memmap whose disk space is reserved now: a memmap's file is sparse, and a full
    disk met while writing its pages kills the process with SIGBUS, not an error. No space: the file
    is removed and :class:`DiskFullError` raised."""
    arr = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
    size = path.stat().st_size
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            return arr  # a file system that cannot reserve: written as before
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        del arr
        path.unlink(missing_ok=True)
        raise DiskFullError(f"disk full: the vocoder cache's {path.name} needs {size / 1e6:.0f} MB in {path.parent}; "
                            f"free space or give the cache another folder") from None
    finally:
        os.close(fd)
    return arr


@dataclasses.dataclass
class VocoderData:
    """Segment sampler over a cache made by :func:`build_cache`.

    A training segment is ``segment_frames`` whole frames of one utterance: the audio of those
    frames, the sample before them, and the log-mel with ``mel_pad`` context frames each side.
    Utterances are drawn with probability proportional to their frame count (every frame
    equally likely), start frames uniformly.
    """

    audio: np.ndarray  # memmap (total_samples,) int16
    mels: np.ndarray  # memmap (total_frames, n_mels) float32
    sample_offsets: np.ndarray  # (U + 1,)
    frame_offsets: np.ndarray  # (U + 1,)
    held_out: np.ndarray  # (U,) bool
    ids: list[str]
    hop: int
    gta_mels: np.ndarray | None = None  # memmap like ``mels``: the acoustic model's GTA mel (training.gta)
    pitch: np.ndarray | None = None  # memmap (total_frames, 2): pitch features (:func:`build_pitch`)
    phase: np.ndarray | None = None  # memmap (total_samples,) float16: pulse phase (:func:`build_phase`)

    @classmethod
    def open(cls, cache_dir: str | os.PathLike, *, hop: int) -> "VocoderData":
        cache_dir = Path(cache_dir)
        index = json.loads((cache_dir / "index.json").read_text())
        if index["fingerprint"]["hop_length"] != hop:
            raise CorpusError(f"cache {cache_dir} was built for hop {index['fingerprint']['hop_length']}, not {hop}")
        gta, pitch, phase = cache_dir / "gta_mels.npy", cache_dir / "pitch.npy", cache_dir / "phase.npy"
        return cls(audio=np.load(cache_dir / "audio.npy", mmap_mode="r"),
                   pitch=np.load(pitch, mmap_mode="r") if pitch.is_file() else None,
                   phase=np.load(phase, mmap_mode="r") if phase.is_file() else None,
                   mels=np.load(cache_dir / "mels.npy", mmap_mode="r"),
                   gta_mels=np.load(gta, mmap_mode="r") if gta.is_file() else None,
                   sample_offsets=np.asarray(index["sample_offsets"], np.int64),
                   frame_offsets=np.asarray(index["frame_offsets"], np.int64),
                   held_out=np.asarray(index["held_out"], bool), ids=list(index["ids"]), hop=hop)

    def split(self, held_out: bool) -> np.ndarray:
        """Indices of the training (``held_out=False``) or held-out utterances."""
        return np.nonzero(self.held_out == held_out)[0]

    def batch(self, rng: np.random.Generator, *, batch_size: int, segment_frames: int, mel_pad: int,
              held_out: bool = False, gta_prob: float = 0.0, lpc_order: int = 0,
              mel_config: MelConfig | None = None, pitch: bool = False, ltp: bool = False,
              phase: bool = False) -> VocoderBatch:
        """Draw ``batch_size`` random segments from one split with the generator ``rng``.

        ``gta_prob``: each segment's mel is the GTA mel (:mod:`wavern.training.gta`) with this
        probability, else the true one; at 0 (the default) ``rng`` draws exactly as before.
        ``lpc_order`` > 0: also the samples before each segment and the frames' predictors
        (:meth:`segments`; ``mel_config`` the features', default :data:`wavern.dsp.DEFAULT_MEL`).
        ``pitch``: the pitch features follow the mel channels (the truth's, also with a GTA mel).
        ``phase``: also each sample's pulse phase (:func:`build_phase`).
        """
        utts = self.split(held_out)
        if utts.size == 0:
            raise CorpusError(f"the corpus has no {'held-out' if held_out else 'training'} utterances")
        n_samples = self.sample_offsets[utts + 1] - self.sample_offsets[utts]
        full_frames = np.maximum(n_samples // self.hop, 1)
        pick = rng.choice(utts.size, size=batch_size, p=full_frames / full_frames.sum())
        starts = rng.integers(0, np.maximum(full_frames[pick] - segment_frames, 0) + 1)
        gta = None
        if gta_prob > 0:
            if self.gta_mels is None:
                raise CorpusError("gta_prob > 0 but the cache has no gta_mels.npy: build it with "
                                  "`python -m wavern.training.gta CACHE ACOUSTIC_CHECKPOINT`")
            gta = rng.random(batch_size) < gta_prob
        return self.segments(utts[pick], starts, segment_frames=segment_frames, mel_pad=mel_pad, gta=gta,
                             lpc_order=lpc_order, mel_config=mel_config, pitch=pitch, ltp=ltp, phase=phase)

    def segments(self, utts: np.ndarray, start_frames: np.ndarray, *, segment_frames: int,
                 mel_pad: int, gta: np.ndarray | None = None, lpc_order: int = 0,
                 mel_config: MelConfig | None = None, pitch: bool = False, ltp: bool = False,
                 phase: bool = False) -> VocoderBatch:
        """The segments of utterances ``utts`` starting at frames ``start_frames`` (their mel from
        ``gta_mels`` where ``gta`` is True).

        With ``lpc_order`` P > 0, ``past`` holds the P + 1 samples before each segment and ``lpc``
        the predictors (:func:`wavern.dsp.mel_lpc`) of the frame before it and of its frames, from
        the same mel the segment is conditioned on; before an utterance's first frame the
        predictor is ``[1, 0, ...]`` (no prediction) and the samples are 0. With ``ltp`` (needs
        ``pitch``) ``past`` reaches LTP_MAX_LAG + 1 samples further back, ``lpc`` starts that
        many samples' frames before the segment and each row ends with the frame's
        :func:`wavern.dsp.ltp_params` (lag, gain): ``VocoderConfig.history_samples`` /
        ``history_frames`` / ``lpc_columns``. With ``phase`` the batch also has each sample's pulse
        phase (0 past the utterance's end).
        """
        b, t, hop = len(utts), segment_frames, self.hop
        if phase and self.phase is None:
            raise CorpusError("the pulse phase asked for but the cache has no phase.npy: "
                              "run wavern.training.vocoder_data.build_phase on it")
        phases = np.zeros((b, t * hop), np.float32) if phase else None
        n_mels = self.mels.shape[1]
        if pitch and self.pitch is None:
            raise CorpusError("pitch features asked for but the cache has no pitch.npy: "
                              "run wavern.training.vocoder_data.build_pitch on it")
        n_feat = n_mels + (self.pitch.shape[1] if pitch else 0)
        mel = np.zeros((b, t + 2 * mel_pad, n_feat), np.float32)
        audio = np.zeros((b, t * hop), np.int16)
        prev = np.zeros(b, np.int16)
        for i, (u, f0) in enumerate(zip(utts, start_frames)):
            s_lo, s_hi = self.sample_offsets[u], self.sample_offsets[u + 1]
            a0 = s_lo + f0 * hop
            seg = self.audio[a0:min(a0 + t * hop, s_hi)]
            audio[i, :seg.size] = seg
            if phase:
                phases[i, :seg.size] = self.phase[a0:a0 + seg.size]
            if f0 > 0:
                prev[i] = self.audio[a0 - 1]
            m_lo, m_hi = self.frame_offsets[u], self.frame_offsets[u + 1]
            lo, hi = m_lo + f0 - mel_pad, m_lo + f0 + t + mel_pad  # wanted frame range
            c_lo, c_hi = max(lo, m_lo), min(hi, m_hi)
            if c_hi > c_lo:
                src = self.gta_mels if gta is not None and gta[i] else self.mels
                mel[i, c_lo - lo:c_hi - lo, :n_mels] = src[c_lo:c_hi]
                if pitch:
                    mel[i, c_lo - lo:c_hi - lo, n_mels:] = self.pitch[c_lo:c_hi]
        if not lpc_order:
            if phase:
                raise CorpusError("the pulse phase is an input of an LPC vocoder with ltp: pass lpc_order and ltp")
            return VocoderBatch(mel, audio, prev)
        from wavern.dsp import DEFAULT_MEL, LTP_MAX_LAG, ltp_params, mel_lpc

        if ltp and not pitch:
            raise CorpusError("a long-term predictor (ltp) is computed from the pitch features: pass pitch=True")
        cfg = mel_config or DEFAULT_MEL
        k = -(-(LTP_MAX_LAG + 1) // hop) if ltp else 1  # frames before the segment (VocoderConfig.history_frames)
        n_past = lpc_order + 1 + (LTP_MAX_LAG + 1 if ltp else 0)  # VocoderConfig.history_samples
        past = np.zeros((b, n_past), np.int16)
        rows = np.zeros((b, t + k, n_feat), np.float32)  # the k frames before the segment, then its frames
        before = np.zeros((b, t + k), bool)  # frames before the utterance's first
        for i, (u, f0) in enumerate(zip(utts, start_frames)):
            a0 = self.sample_offsets[u] + f0 * hop
            lo = max(self.sample_offsets[u], a0 - n_past)
            if a0 > lo:
                past[i, n_past - (a0 - lo):] = self.audio[lo:a0]
            src = self.gta_mels if gta is not None and gta[i] else self.mels
            for j, f in enumerate(range(f0 - k, f0)):
                if f < 0:
                    before[i, j] = True
                    continue
                rows[i, j, :n_mels] = src[self.frame_offsets[u] + f]
                if pitch:
                    rows[i, j, n_mels:] = self.pitch[self.frame_offsets[u] + f]
        rows[:, k:] = mel[:, mel_pad:mel_pad + t]
        lpc = mel_lpc(rows[..., :n_mels].reshape(-1, n_mels), lpc_order, cfg).reshape(b, t + k, lpc_order + 1)
        if ltp:
            params = ltp_params(rows[..., n_mels:].reshape(-1, rows.shape[2] - n_mels), cfg)
            lpc = np.concatenate([lpc, params.reshape(b, t + k, 2).astype(np.float64)], axis=2)
        lpc[before] = 0.0
        lpc[before, 0] = 1.0
        return VocoderBatch(mel, audio, prev, past, lpc, phases)
