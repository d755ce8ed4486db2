"""Offline rendering: whole utterances through the folded, batched vocoder.

The streaming path (:meth:`Voice.stream`) generates one sample stream chunk by chunk, for
latency. Offline, latency does not matter and throughput does: :func:`render_utterance` runs the
acoustic model over the text sentence by sentence (as the stream does, same neighbours as
context), computes each sentence's vocoder frame inputs (the conditioning net sees the same
sentence edges as in the stream), then cuts the utterance's frames into overlapping segments
and generates them as one batch (REFERENCES section 1, "fold"; :func:`render_frames`).

With ``fold_frames=None`` the result is one stream and equals ``voice.synthesize(text)`` sample
for sample (tested, on the shipped voice too: the first voiced sentence's mel is decoded in the
stream's lazy passes, so it rounds as the stream's does), so folding is the only approximation
of the offline path.

A sentence folds into only ~7-22 segments, fewer than the 24+ streams from which the kernels
run in lanes (:func:`wavern.engine.vocoder.lane_split`); :func:`render_utterances` renders
several texts with their segments in shared batches, each item's bytes the same as alone.

The rest of this module is what a resumable batch needs besides audio: word-timing sidecars
(SRT, WebVTT, JSON) and :class:`ResultsLedger`, the append-only record of finished items.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import json
import logging
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from wavern.engine.chunk import VOLUME_RANGE, SpeakConfig, scaled_speed
from wavern.errors import DiskFullError, ParameterError
from wavern.fileio import is_disk_full

__all__ = ["RenderedUtterance", "SentenceSpan", "UtteranceRequest", "render_utterance", "render_utterances",
           "render_frames", "MAX_TEXT_CHARS",
           "srt_text", "vtt_text", "timing_json", "ResultsLedger", "write_text_atomic"]

log = logging.getLogger(__name__)

#: Longest text one item may hold (~15 minutes of speech); longer input should be split.
MAX_TEXT_CHARS = 20_000
DEFAULT_FOLD_FRAMES = 40  # ~0.46 s segments: batches of 4+ streams from 2 s of speech on
DEFAULT_OVERLAP_FRAMES = 4  # 46 ms cross-fade: a cold GRU state settles within ~20 ms


@dataclasses.dataclass(frozen=True)
class SentenceSpan:
    """One sentence of a rendered utterance: its text span and its samples (pause excluded)."""

    index: int
    char_start: int
    char_end: int
    start_sample: int
    end_sample: int


@dataclasses.dataclass(frozen=True)
class RenderedUtterance:
    """A whole utterance rendered offline.

    Attributes:
        samples: (n,) int16 mono audio.
        sample_rate: Hz.
        sentences: the voiced sentences in order (empty ones are skipped, as in the stream).
        word_timings: ``WordTiming`` of every word, absolute sample spans.
        compute_s: wall seconds spent (front end, acoustic model, vocoder); for an item rendered
            with others (:func:`render_utterances`), its own front end and acoustic model plus
            its share of the shared vocoder batches, in proportion to its vocoder streams.
        cpu_s: the same in CPU seconds of this process.
    """

    samples: np.ndarray
    sample_rate: int
    sentences: tuple[SentenceSpan, ...]
    word_timings: tuple
    compute_s: float
    cpu_s: float = 0.0

    @property
    def duration_s(self) -> float:
        return self.samples.shape[0] / self.sample_rate


def render_frames(vocoder, gi: np.ndarray, *, seed: int = 0, temperature: float = 1.0,
                  fold_frames: int | None = DEFAULT_FOLD_FRAMES, overlap_frames: int = DEFAULT_OVERLAP_FRAMES,
                  threads: int = 1) -> np.ndarray:
    """Generate all samples of precomputed frame inputs, folded into a batch.

    The same folding as :meth:`Vocoder.render` (segment ``i`` draws from
    ``rng_states(seed, N)[i]``), but on frame inputs the caller built, so that sentences keep
    their own conditioning edges.

    Parameters
    ----------
    vocoder : :class:`wavern.engine.vocoder.Vocoder`.
    gi : (T, 3H) float32 frame inputs (``vocoder.frame_inputs`` of each sentence, concatenated).
    seed, temperature : sampling.
    fold_frames : segment length S in frames; None (or T <= S) = one stream from ``rng_state(seed)``.
    overlap_frames : O, frames each segment is warmed up on before its own S frames.
    threads : the batch is split over this many threads (the kernels release the GIL).

    Returns
    -------
    (T * hop,) int16.
    """
    gi = np.ascontiguousarray(gi, dtype=np.float32)
    if gi.shape[0] == 0:
        return np.zeros(0, np.int16)
    return vocoder.render_frame_inputs(gi, seed=seed, temperature=temperature, fold_frames=fold_frames,
                                       overlap_frames=overlap_frames, threads=threads)


@dataclasses.dataclass(frozen=True)
class _Prepared:
    """An utterance up to the vocoder: its frame inputs and where each sentence goes."""

    gi: np.ndarray  # (T, 3H) float32, every voiced sentence's frame inputs, concatenated
    mel: np.ndarray | None  # (T, n_mels) their mel, kept for the post-filter (None: the voice has none)
    spans: tuple[SentenceSpan, ...]
    timings: tuple
    length: int  # output samples, pauses included
    volume: float | tuple  # the output's gain; an SSML document's: one per span
    temperature: float
    seed: int
    wall_s: float
    cpu_s: float
    melmatch: object = None  # the request's mel matching (Voice.melmatch_for), None: none


def _prepare(voice, text: str, config: SpeakConfig | None, *, seed: int, max_chars: int,
             ssml: bool | None = None) -> _Prepared:
    """Front end and acoustic model of one utterance, sentence by sentence, as the stream does
    (an SSML document piece by piece, each with its settings, its spans the markup's)."""
    t0, c0 = time.perf_counter(), time.process_time()
    if not isinstance(text, str):
        raise ParameterError(f"text must be a str, found {type(text).__name__}")
    if len(text) > max_chars:
        raise ParameterError(f"text is {len(text)} characters long; the limit is {max_chars} "
                             f"(split it into several items)")
    cfg = config or SpeakConfig()
    speaker = voice.resolve_speaker(cfg.speaker)
    temperature = cfg.temperature if cfg.temperature is not None else voice.default_temperature
    pause_s = cfg.pause_s if cfg.pause_s is not None else voice.default_pause_s
    sr = voice.sample_rate
    mm = voice.melmatch_for(cfg)
    acc = _Sentences(voice, voice.ltp_scale_for(mm))
    # The stream's own sentence source (ParameterError for empty or unspeakable text).
    prosody = voice.prosody_of(cfg)  # ParameterError for pitch on a voice without the input
    if ssml is None:
        from wavern.conditioning.frontend.ssml import looks_like_ssml

        ssml = looks_like_ssml(text)
    if ssml:
        doc = voice._ssml(text, cfg, voice.lexicon)
        acc.pos = int(doc.lead_s * sr)
        for piece in doc.pieces:
            who, piece_prosody, lex = voice._piece_setup(piece, cfg, speaker, voice.lexicon)
            parts = voice.sentence_parts(piece.text, speaker=who, speed=scaled_speed(cfg.speed, piece.speed),
                                         sentences=list(piece.sentences), prosody=piece_prosody, lexicon=lex)
            acc.add(parts, int(pause_s * sr), int(piece.silence_after(pause_s) * sr), len(piece.sentences),
                    piece.source_span, min(float(cfg.volume * piece.volume), VOLUME_RANGE[1]))
    else:
        acc.add(voice.sentence_parts(text, speaker=speaker, speed=cfg.speed, prosody=prosody),
                int(pause_s * sr), None, None, None, float(cfg.volume))
    if not acc.gis:
        raise ParameterError(f"nothing to say: the text {text[:40]!r} produced no audio frames")
    keep = (getattr(voice, "postfilter", None) is not None or mm is not None) and cfg.postfilter is not False
    mel = np.concatenate(acc.mels) if keep else None
    volumes = tuple(acc.volumes)
    return _Prepared(np.concatenate(acc.gis), mel, tuple(acc.spans), tuple(acc.timings), acc.pos,
                     volumes[0] if len(set(volumes)) == 1 else volumes, float(temperature), int(seed),
                     time.perf_counter() - t0, time.process_time() - c0, mm)


class _Sentences:
    """An utterance's voiced sentences as they are prepared: frame inputs, mel, where each goes."""

    def __init__(self, voice, ltp_gain_scale: float = 1.0):
        self.voice = voice
        self.ltp_gain_scale = ltp_gain_scale  # the stream's (Voice.ltp_scale_for its mel matching)
        self.gis, self.mels, self.spans, self.timings, self.volumes = [], [], [], [], []
        self.pos = 0  # output sample of the next sentence (pauses included)
        self.sentence0 = 0  # index of the first sentence of the next add()
        self.lazy = True  # the stream decodes its first voiced sentence's mel lazily (rows first), the rest whole

    def add(self, parts, gap: int, last_gap: int | None, n_sentences: int | None, source_span, volume: float) -> None:
        """``parts`` (``Voice.sentence_parts``), ``gap`` samples after each sentence (``last_gap``
        after the last of ``n_sentences``, where given); spans through ``source_span``."""
        voc = self.voice.vocoder
        hop = voc.hop
        for spoken in parts:
            utt, part = spoken.utt, spoken.part
            if self.lazy and part.n_frames:  # the same decode passes give the same float rounding as the stream
                part.rows(0, 1)
                self.lazy = False
            T = part.mel.shape[0]
            if T == 0:
                continue
            s_idx = spoken.sentence
            sentence = utt.sentences[min(int(part.sentence), len(utt.sentences) - 1)]
            timings = self.voice._word_timings(utt, part, self.pos)  # the stream's own rule
            span = (sentence.start, sentence.end)
            if source_span is not None:
                span = source_span(*span)
                timings = [dataclasses.replace(t, char_start=a, char_end=z) for t in timings
                           for a, z in [source_span(t.char_start, t.char_end)]]
            self.timings.extend(timings)
            self.spans.append(SentenceSpan(self.sentence0 + s_idx, span[0], span[1], self.pos, self.pos + T * hop))
            self.gis.append(voc.frame_inputs(part.mel, ltp_gain_scale=self.ltp_gain_scale))
            self.mels.append(part.mel)
            self.volumes.append(volume)
            last = last_gap is not None and n_sentences is not None and s_idx == n_sentences - 1
            self.pos += T * hop + (last_gap if last else gap)
        if n_sentences is not None:
            self.sentence0 += n_sentences


def _finish(voice, prep: _Prepared, voiced: np.ndarray, wall_s: float, cpu_s: float) -> RenderedUtterance:
    """Post-filter the voiced sentences, place them between their pauses and apply the volume."""
    if prep.mel is not None:  # one pass over the sentences in order (the stream's filter memories),
        # mel matching sentence by sentence, as the stream does
        voiced = voice.apply_postfilter(voiced, prep.mel, [sp.end_sample - sp.start_sample for sp in prep.spans],
                                        melmatch=prep.melmatch)
    if prep.length != voiced.shape[0] or prep.volume != 1.0:  # (a tuple of volumes is != 1.0)
        out = np.zeros(prep.length, np.int16)
        src = 0
        for sp in prep.spans:
            n = sp.end_sample - sp.start_sample
            out[sp.start_sample:sp.end_sample] = voiced[src:src + n]
            src += n
        if isinstance(prep.volume, tuple):  # an SSML document's pieces: each sentence its own volume
            for sp, v in zip(prep.spans, prep.volume):
                if v != 1.0:
                    seg = out[sp.start_sample:sp.end_sample].astype(np.float64) * v
                    out[sp.start_sample:sp.end_sample] = np.clip(np.rint(seg), -32768, 32767).astype(np.int16)
        elif prep.volume != 1.0:
            out = np.clip(np.rint(out.astype(np.float64) * prep.volume), -32768, 32767).astype(np.int16)
    else:
        out = voiced
    return RenderedUtterance(out, voice.sample_rate, prep.spans, prep.timings, prep.wall_s + wall_s,
                             prep.cpu_s + cpu_s)


def render_utterance(voice, text: str, config: SpeakConfig | None = None, *, seed: int = 0,
                     fold_frames: int | None = DEFAULT_FOLD_FRAMES, overlap_frames: int = DEFAULT_OVERLAP_FRAMES,
                     threads: int = 1, max_chars: int = MAX_TEXT_CHARS, ssml: bool | None = None) -> RenderedUtterance:
    """Render ``text`` with ``voice`` in one go: acoustic model per sentence, then the folded vocoder.

    Args:
        voice: a loaded :class:`wavern.engine.Voice`.
        text: the utterance; empty, unspeakable or longer than ``max_chars`` raises
            :class:`ParameterError`.
        config: speed, temperature, pause, speaker, pitch (``volume`` is applied too); None = defaults.
        seed: sampling seed (same seed, same audio).
        fold_frames, overlap_frames, threads: see :func:`render_frames`.
        ssml: the text is an SSML document (None: where it begins with ``<speak``, as
            :meth:`Voice.stream` decides); its pieces' settings, pauses and spans as in the stream.

    Returns:
        :class:`RenderedUtterance`. Pauses (``pause_s``) follow every sentence, as in the stream.
    """
    prep = _prepare(voice, text, config, seed=seed, max_chars=max_chars, ssml=ssml)
    t0, c0 = time.perf_counter(), time.process_time()
    voiced = render_frames(voice.vocoder, prep.gi, seed=seed, temperature=prep.temperature, fold_frames=fold_frames,
                           overlap_frames=overlap_frames, threads=threads)
    return _finish(voice, prep, voiced, time.perf_counter() - t0, time.process_time() - c0)


@dataclasses.dataclass(frozen=True)
class UtteranceRequest:
    """One item of :func:`render_utterances`: what :func:`render_utterance` takes for one text."""

    text: str
    config: SpeakConfig | None = None
    seed: int = 0
    ssml: bool | None = None  # None: SSML where the text begins with <speak or <?xml


def render_utterances(voice, requests: Sequence[UtteranceRequest | str], *,
                      fold_frames: int | None = DEFAULT_FOLD_FRAMES, overlap_frames: int = DEFAULT_OVERLAP_FRAMES,
                      threads: int = 1, max_chars: int = MAX_TEXT_CHARS) -> list[RenderedUtterance | Exception]:
    """Render several texts, their folded segments generated in shared vocoder batches.

    Item i's samples equal ``render_utterance(voice, text_i, config_i, seed=seed_i, ...)`` bit
    for bit, whichever items it is rendered with (:meth:`Vocoder.render_many`): batching several
    items fills the kernels' lanes (24+ streams; a sentence folds into ~7-22 segments), which
    is the whole point. Items are isolated: one that fails gets its exception in its place
    and the others render; should a shared vocoder batch fail, each of its items is retried
    alone, so an error stays with the item that raised it.

    Args:
        voice: a loaded :class:`wavern.engine.Voice`.
        requests: the items: :class:`UtteranceRequest`, or a plain text (the voice's defaults, seed 0).
        fold_frames, overlap_frames, threads, max_chars: as for :func:`render_utterance`.

    Returns:
        Per request, in order, its :class:`RenderedUtterance` or the exception it raised
        (:class:`ParameterError` for bad text, as :func:`render_utterance` raises).
    """
    if isinstance(requests, str):
        raise ParameterError("requests must be a list of texts or UtteranceRequests, found one str")
    requests = [UtteranceRequest(r) if isinstance(r, str) else r for r in requests]
    bad = next((r for r in requests if not isinstance(r, UtteranceRequest)), None)
    if bad is not None:
        raise ParameterError(f"each request must be an UtteranceRequest or a str, found {type(bad).__name__}")
    results: list[RenderedUtterance | Exception | None] = [None] * len(requests)
    prepared: dict[int, _Prepared] = {}
    for i, req in enumerate(requests):
        try:
            prepared[i] = _prepare(voice, req.text, req.config, seed=req.seed, max_chars=max_chars, ssml=req.ssml)
        except Exception as e:  # noqa: BLE001 - one bad item must not stop the others
            results[i] = e
    by_temperature: dict[float, list[int]] = {}
    for i, prep in prepared.items():
        by_temperature.setdefault(prep.temperature, []).append(i)
    voc = voice.vocoder
    kw = dict(fold_frames=fold_frames, overlap_frames=overlap_frames, threads=threads)
    for temperature, idx in by_temperature.items():
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            voiced = voc.render_many([prepared[i].gi for i in idx], [prepared[i].seed for i in idx],
                                     temperature=temperature, **kw)
        except Exception:  # noqa: BLE001 - find the item that fails, render the rest
            log.warning("a shared vocoder batch of %d items failed; rendering them one by one", len(idx),
                        exc_info=True)
            for i in idx:
                t1, c1 = time.perf_counter(), time.process_time()
                try:
                    (one,) = voc.render_many([prepared[i].gi], [prepared[i].seed], temperature=temperature, **kw)
                    results[i] = _finish(voice, prepared[i], one, time.perf_counter() - t1, time.process_time() - c1)
                except Exception as e:  # noqa: BLE001
                    results[i] = e
            continue
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        # Each item's share of the batch: its generated stream-samples (segments x segment length).
        work = np.array([_streams(prepared[i].gi.shape[0], fold_frames, overlap_frames) for i in idx], np.float64)
        share = work / work.sum()
        for k, i in enumerate(idx):
            try:  # the post-filter runs in _finish: an error there stays with its item
                results[i] = _finish(voice, prepared[i], voiced[k], wall * share[k], cpu * share[k])
            except Exception as e:  # noqa: BLE001
                results[i] = e
    return results  # type: ignore[return-value]


def _streams(T: int, fold_frames: int | None, overlap_frames: int) -> float:
    """Frames the vocoder generates for an item of T frames (its share of a batch)."""
    if fold_frames is None or T <= fold_frames:
        return float(T)
    return float(-(-T // fold_frames) * (fold_frames + overlap_frames))


# --------------------------------------------------------------------------------------------
# Word-timing sidecars.

def _clock(seconds: float, sep: str) -> str:
    ms = int(round(seconds * 1000.0))
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def shown_text(text: str, start: int, end: int, *, ssml: bool) -> str:
    """``text[start:end]`` as a caption shows it: whitespace runs as one space and, in an SSML
    document, without its tags and with its entities decoded (``<sub alias="x">WWW</sub>`` -> WWW)."""
    piece = text[start:end]
    if ssml:
        shown = html.unescape(re.sub(r"<[^>]*>?", " ", piece))
        if not shown.strip():  # an empty element said as words: <sub alias="World Wide Web"/>
            alias = re.search(r"""\balias\s*=\s*(["'])(.*?)\1""", piece, re.S)
            shown = html.unescape(alias.group(2)) if alias else shown
        piece = shown
    return " ".join(piece.split())


def _words(text: str, timings, sample_rate: int):
    """(start s, end s, word) per word; words with the same characters (an SSML element said as
    several words) are one cue."""
    from wavern.conditioning.frontend.ssml import looks_like_ssml

    ssml = looks_like_ssml(text)
    merged: list[list] = []
    for w in timings:
        if merged and merged[-1][2:] == [w.char_start, w.char_end]:
            merged[-1][1] = w.end_sample
        else:
            merged.append([w.start_sample, w.end_sample, w.char_start, w.char_end])
    for a, z, c0, c1 in merged:
        yield a / sample_rate, z / sample_rate, shown_text(text, c0, c1, ssml=ssml)


def srt_text(text: str, timings, sample_rate: int) -> str:
    """SubRip subtitles with one cue per word (``HH:MM:SS,mmm``, cues numbered from 1)."""
    cues = [f"{i}\n{_clock(a, ',')} --> {_clock(b, ',')}\n{word}\n"
            for i, (a, b, word) in enumerate(_words(text, timings, sample_rate), start=1)]
    return "\n".join(cues)


def vtt_text(text: str, timings, sample_rate: int) -> str:
    """WebVTT with one cue per word (``HH:MM:SS.mmm``)."""
    cues = [f"{_clock(a, '.')} --> {_clock(b, '.')}\n{word}\n" for a, b, word in _words(text, timings, sample_rate)]
    return "WEBVTT\n\n" + "\n".join(cues)


def timing_json(item_id: str, text: str, rendered: RenderedUtterance) -> dict:
    """Sentence and word timings of one item, in samples and seconds (see docs/bench/render.md)."""
    sr = rendered.sample_rate
    return {
        "id": item_id, "text": text, "sample_rate": sr, "samples": int(rendered.samples.shape[0]),
        "duration_s": rendered.duration_s,
        "sentences": [{"index": s.index, "char_start": s.char_start, "char_end": s.char_end,
                       "text": text[s.char_start:s.char_end], "start_sample": s.start_sample,
                       "end_sample": s.end_sample, "start_s": s.start_sample / sr, "end_s": s.end_sample / sr}
                      for s in rendered.sentences],
        "words": [{"char_start": w.char_start, "char_end": w.char_end, "text": text[w.char_start:w.char_end],
                   "start_sample": w.start_sample, "end_sample": w.end_sample, "start_s": w.start_sample / sr,
                   "end_s": w.end_sample / sr} for w in rendered.word_timings],
    }


def write_text_atomic(path: Path, text: str) -> Path:
    """Write a text file through a temp file renamed into place; a full disk leaves nothing behind.

    Raises:
        DiskFullError: no space (or quota) left; the temp file is removed.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.part")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):  # (on a read-only folder this fails too; keep the first error)
            tmp.unlink(missing_ok=True)
        if is_disk_full(e):
            raise DiskFullError(f"disk full while writing {path}; free space and run again") from None
        raise
    return path


# --------------------------------------------------------------------------------------------
# The ledger of a batch.

class ResultsLedger:
    """``results.jsonl`` of a batch: one JSON object per line, appended as items finish.

    Rows are written by one process (the batch driver) after an item's files are in place,
    so a row with ``status == "ok"`` whose files exist means the item is done. A run killed
    mid-append leaves at most one torn last line; :meth:`load` drops unparsable lines and
    :meth:`compact` rewrites the file atomically with one row per id (the latest).
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.rows: dict[str, dict] = {}
        self.dropped_lines = 0
        self.load()

    def load(self) -> None:
        self.rows, self.dropped_lines = {}, 0
        if not self.path.is_file():
            return
        for line in self.path.read_text(encoding="utf-8", errors="replace").split("\n"):  # not at U+2028
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                self.dropped_lines += 1
                continue
            if isinstance(row, dict) and isinstance(row.get("id"), str):
                self.rows[row["id"]] = row
            else:
                self.dropped_lines += 1
        if self.dropped_lines:
            log.warning("%s: ignored %d unreadable line(s) (a run was killed while writing?)", self.path,
                        self.dropped_lines)

    def finished(self, item_id: str, base: Path) -> bool:
        """True when the item has an ``ok`` row and every file the row names exists under ``base``."""
        row = self.rows.get(item_id)
        if row is None or row.get("status") != "ok":
            return False
        return all((Path(base) / f).is_file() for f in row.get("files", []))

    def compact(self) -> None:
        """Rewrite the file with one row per id, atomically."""
        write_text_atomic(self.path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.rows.values()))

    def append(self, row: dict) -> None:
        """Append one row and make it durable (flush + fsync) before returning."""
        line = json.dumps(row, ensure_ascii=False) + "\n"
        try:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            if is_disk_full(e):
                raise DiskFullError(f"disk full while recording results in {self.path}; free space and run "
                                    f"again (finished items are kept)") from None
            raise
        self.rows[row["id"]] = row
