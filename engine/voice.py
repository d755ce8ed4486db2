"""``Voice``: load once, then stream text to audio chunk by chunk.

    voice = Voice.load("assets/voices/default")
    for chunk in voice.stream("Hello there. How are you?", SpeakConfig(speed=1.1)):
        sink.write(chunk.samples)

Per request the front end turns the text into phoneme tokens, the acoustic model (numpy: a voice
never imports torch) renders one sentence at a time to log-mel, and the vocoder turns it into
samples chunk by chunk, its state carried across chunks and sentences; a worker thread prepares
the next sentence meanwhile. Streamed audio equals the one-shot rendering of the same mel, sample
for sample. :class:`StreamControl` changes speed, volume and pause on the next chunk, or stops.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import difflib
import logging
import os
import re
import time
from pathlib import Path
from typing import AsyncIterator, Iterator

import numpy as np

from wavern import INT8_ENV
from wavern.dsp import DEFAULT_MEL, copy_features, int16_to_float, soft_limit
from wavern.engine.blas_threads import PROCESS_THREADS, use_threads
from wavern.engine.chunk import AudioChunk, SpeakConfig
from wavern.engine.chunking import (BLOCK_SENTENCES, CHUNK_SAMPLES, FIRST_CHUNK_SAMPLES, GROW_SAMPLES, RAMP_SAMPLES,
                                    STOP_CHECK_SAMPLES, SpokenPart, WordTiming, chunk_samples, plan_blocks, retimed)
from wavern.engine.frame_windows import WindowedFrameInputs
from wavern.engine.stream_control import Live, StreamControl
from wavern.engine.voicefile import read_voice_json
from wavern.errors import ParameterError, VoiceFileError

_ESPEAK_NAME = re.compile(r"en(-[a-z0-9]+)*")  # an English espeak-ng voice name: en, en-us, en-gb-x-rp

__all__ = ["Voice", "StreamControl", "WordTiming", "SpokenPart", "plan_blocks", "chunk_samples", "use_threads",
           "RAMP_SAMPLES",
           # from chunking, importable here as before
           "BLOCK_SENTENCES", "CHUNK_SAMPLES", "FIRST_CHUNK_SAMPLES", "GROW_SAMPLES", "STOP_CHECK_SAMPLES", "retimed"]

log = logging.getLogger(__name__)

#: :meth:`Voice.vocode` cuts audio longer than two pieces into pieces of about this many seconds
#: (each ending at the quietest hop of its last VOCODE_SEARCH_S), so its memory does not grow with
#: the input: every stage (features, frame inputs, the folded batch, post-processing) holds a whole
#: piece, about 2 MB of peak memory per second of piece.
VOCODE_PIECE_S = 30.0
VOCODE_SEARCH_S = 5.0
_VOICES_OWN = object()  # Voice.apply_postfilter's default: the voice's own mel matching


def _load_melmatch(path, infer: dict, key: str, *, load: bool = True):
    """The :class:`MelMatch` of ``inference[key]`` (None when absent or null), its loops compiled
    now unless ``load=False`` (when another's load has brought them: they are the same functions)."""
    if infer.get(key) is None:
        return None
    from wavern.engine.melmatch import MelMatch, MelMatchConfig

    mm = MelMatch(MelMatchConfig.from_dict(infer[key]), DEFAULT_MEL)  # (settings checked by read_voice_json)
    if load:
        mm.load()  # its numba loops now, not in the first chunk of the first request (as the post-filter's)
    return mm


def quiet_cuts(x: np.ndarray, piece: int, search: int, hop: int) -> list[tuple[int, int]]:
    """``x`` cut into pieces of at most about ``piece`` samples, as (start, stop) pairs: one piece
    when ``len(x) <= 2 piece``; otherwise each piece ends at the hop boundary of least energy (sum
    of squares over the hop before it) among those in its last ``search`` samples, so cuts fall in
    pauses where speech has them, and the last two split what is left near its middle. Every piece
    but the last is a whole number of hops long."""
    n = len(x)
    if n <= 2 * piece:
        return [(0, n)]
    cuts, start = [], 0
    while n - start > 2 * piece:
        end = _quietest_end(x, start, start + max(hop, piece - search), start + piece, hop)
        cuts.append((start, end))
        start = end
    if n - start > piece:  # the rest, in two near-halves
        mid = start + (n - start) // 2
        end = _quietest_end(x, start, mid - search // 2, mid + search // 2, hop)
        cuts.append((start, end))
        start = end
    cuts.append((start, n))
    return cuts


def _quietest_end(x: np.ndarray, start: int, lo: int, hi: int, hop: int) -> int:
    """The hop boundary (counted from ``start``) in [lo, hi] whose preceding hop of ``x`` has the
    least energy."""
    ends = start + np.arange(-(-(lo - start) // hop), (hi - start) // hop + 1) * hop
    energy = [float(np.dot(x[e - hop:e].astype(np.float64), x[e - hop:e])) for e in ends]
    return int(ends[int(np.argmin(energy))])


class Voice:
    """A loaded voice: front end settings, acoustic model (numpy, :mod:`wavern.conditioning.runtime`)
    and vocoder (numba engine).

    Several threads may stream from one voice at once: each stream keeps its own state, so a
    stream gives the same samples as it would alone (tested); :meth:`close` lets running streams
    finish and refuses new ones.
    """

    def __init__(self, path: Path, meta: dict, acoustic, vocoder, table, *, threads: int | None = 1):
        self.path = path
        self.meta = meta
        self.acoustic = acoustic
        self.vocoder = vocoder
        self.table = table
        self.name: str = meta["name"]
        self.sample_rate: int = int(meta["dsp"]["sample_rate"])
        self.espeak_voice: str = meta.get("espeak_voice", "en-us")
        infer = meta.get("inference", {})
        self.default_temperature: float = float(infer.get("temperature", 1.0))
        self.default_speaker: str = infer.get("speaker") or acoustic.config.speakers[0]
        self.default_pause_s: float = float(infer.get("pause_s", 0.0))
        #: ``inference.ltp_gain_scale`` (default 1): in requests with mel matching, the vocoder samples
        #: with every frame's long-term predictor gain times this (:meth:`ltp_scale_for`).
        self.ltp_gain_scale: float = float(infer.get("ltp_gain_scale", 1.0))
        #: The formant post-filter on the vocoder's output (``inference.postfilter``); None = off.
        self.postfilter = None
        if infer.get("postfilter") is not None:
            from wavern.engine.postfilter import Postfilter, PostfilterConfig

            # (settings checked by read_voice_json, with the pitch stage's need for pitch features)
            self.postfilter = Postfilter(PostfilterConfig.from_dict(infer["postfilter"]), hop=vocoder.hop)
            self.postfilter.load()  # its numba loop now, not in the first chunk of the first request
        #: Mel matching after the post-filter (``inference.melmatch``, ``engine/melmatch.py``) of the
        #: acoustic model's mel (text → speech); None = off.
        self.melmatch = _load_melmatch(path, infer, "melmatch")
        #: ... of a mel measured from audio (copy synthesis: :meth:`vocode`, ``render_mel(measured=True)``),
        #: ``inference.melmatch_measured``; the voice's ``melmatch`` when the field is absent. A measured
        #: mel holds the harmonics band by band; a predicted one is smoother than speech, and matching it
        #: band by band would smooth the vocoder's harmonics away (docs/bench/melmatch.md).
        self.melmatch_measured = (_load_melmatch(path, infer, "melmatch_measured", load=self.melmatch is None)
                                  if "melmatch_measured" in infer else self.melmatch)
        self._melmatch_variants: dict = {}  # passes -> MelMatch, for requests that set SpeakConfig.passes
        if vocoder.lpc_order or self.postfilter is not None:  # their coefficients' loops now, not in a first chunk
            from wavern.dsp import load_loops

            load_loops()
        #: User pronunciations (a front-end ``Lexicon``) used by ``analyze`` and so by ``stream``;
        #: None = none. Assign a new object rather than mutating one a running stream may read.
        self.lexicon = None
        #: BLAS threads for this voice's work (:func:`use_threads`); None = the process's own.
        self.threads = threads
        self._holds_threads = PROCESS_THREADS.hold(threads)  # given back by close()
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="wavern-acoustic")
        self._closed = False

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, path: str | Path, *, threads: int | None = 1, int8: bool | None = None) -> "Voice":
        """Load a voice folder; refuses anything malformed with :class:`VoiceFileError`.

        ``threads``: BLAS threads for the acoustic model and the conditioning net
        (process-wide, see :func:`use_threads`, while any voice that set them is open; the
        process's own settings come back when the last one closes); 1 by default, the fastest
        first audio when another process holds a core (a two-thread BLAS pool spin-waits for a
        thread whose core another process holds: 50-110 ms per small product on a shared 2-core
        machine). None leaves the process's settings alone.

        ``int8``: the vocoder's products on its state in int8 (``Vocoder(int8=True)``; faster, and
        another numerical model, close to the float one: docs/VOICE.md); None: as the environment
        says (``WAVERN_INT8=1``, which ``wavern --int8`` sets).
        """
        from wavern.conditioning.config import AcousticConfig
        from wavern.conditioning.runtime import load_runtime
        from wavern.conditioning.frontend.phonemes import SymbolTable
        from wavern.engine.vocoder import Vocoder
        from wavern.vocoder.format import MAX_COND_BLOCKS, MAX_COND_CHANNELS, MAX_HIDDEN

        path = Path(path)
        meta = read_voice_json(path)
        try:
            acfg = AcousticConfig.from_dict(meta["acoustic"])
        except (ParameterError, TypeError, KeyError) as e:
            raise VoiceFileError(f"{path}/voice.json: field 'acoustic' is invalid ({e})") from None
        voc = meta["vocoder"]
        for field, top in (("hidden_size", MAX_HIDDEN), ("cond_channels", MAX_COND_CHANNELS),
                           ("cond_blocks", MAX_COND_BLOCKS)):
            if not isinstance(voc.get(field), int) or isinstance(voc.get(field), bool) or not 1 <= voc[field] <= top:
                raise VoiceFileError(f"{path}/voice.json: field 'vocoder.{field}' must be an integer in [1, {top}], "
                                     f"found {voc.get(field)!r}")
        lpc_order = voc.get("lpc_order", 0)
        if not isinstance(lpc_order, int) or isinstance(lpc_order, bool) or not 0 <= lpc_order <= 64:
            raise VoiceFileError(f"{path}/voice.json: field 'vocoder.lpc_order' must be an integer in [0, 64], "
                                 f"found {lpc_order!r}")
        if lpc_order and voc.get("lpc_prediction_input", True) is not False:
            raise VoiceFileError(f"{path}/voice.json: this vocoder takes the LPC prediction as an input "
                                 "(vocoder.lpc_prediction_input), which the engine does not run yet")
        excitation = voc.get("excitation", "linear")
        if excitation not in ("linear", "mulaw") or (excitation == "mulaw" and not lpc_order):
            raise VoiceFileError(f"{path}/voice.json: field 'vocoder.excitation' must be 'linear' or, with "
                                 f"lpc_order > 0, 'mulaw'; found {excitation!r}")
        pitch, ltp = voc.get("pitch", False), voc.get("ltp", False)
        if not isinstance(pitch, bool) or not isinstance(ltp, bool) or (ltp and not (pitch and lpc_order)):
            raise VoiceFileError(f"{path}/voice.json: fields 'vocoder.pitch' and 'vocoder.ltp' must be true or false, "
                                 f"ltp only with pitch and lpc_order > 0; found {pitch!r}, {ltp!r}")
        ltp_input, taps = voc.get("ltp_input", False), voc.get("ltp_input_taps", 1)
        if not isinstance(ltp_input, bool) or (ltp_input and not ltp):
            raise VoiceFileError(f"{path}/voice.json: field 'vocoder.ltp_input' must be true or false, true only "
                                 f"with ltp; found {ltp_input!r}")
        if pitch != acfg.pitch:
            raise VoiceFileError(f"{path}/voice.json: the vocoder {'reads' if pitch else 'does not read'} pitch "
                                 f"features but the acoustic model {'predicts' if acfg.pitch else 'does not predict'} "
                                 "them (vocoder.pitch, acoustic.pitch)")
        acoustic = load_runtime(path / "acoustic.safetensors", acfg)
        vocoder = Vocoder.load(path / "vocoder.safetensors", cond_blocks=voc["cond_blocks"],
                               hidden_size=voc["hidden_size"], cond_channels=voc["cond_channels"],
                               lpc_order=lpc_order, excitation=excitation, ltp=ltp, ltp_input=ltp_input,
                               ltp_input_taps=taps, phase_input=voc.get("phase_input", 0),
                               int8=os.environ.get(INT8_ENV, "") not in ("", "0") if int8 is None else bool(int8))
        try:
            table = SymbolTable(meta["symbols"])
        except Exception as e:  # noqa: BLE001 - any rejection of the table is a voice file problem
            raise VoiceFileError(f"{path}/voice.json: field 'symbols' is not a usable symbol table ({e})") from None
        if len(table) > acfg.encoder.n_symbols:
            raise VoiceFileError(f"{path}/voice.json: {len(table)} symbols but the acoustic model embeds only "
                                 f"{acfg.encoder.n_symbols}")
        return cls(path, meta, acoustic, vocoder, table, threads=threads)

    def __enter__(self) -> "Voice":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker thread; a stream running now finishes on its own thread, new ones are refused.
        (``with Voice.load(path) as voice:`` closes it at the end of the block.)"""
        if self._closed:
            return
        self._closed = True
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self._holds_threads:
            PROCESS_THREADS.release()

    def _prepare_next(self, mels) -> concurrent.futures.Future:
        """The next sentence, prepared on the worker thread (here, once the voice is closed)."""
        try:
            return self._executor.submit(_prepare, mels)
        except RuntimeError:  # closed: the executor takes no more work
            done = concurrent.futures.Future()
            try:
                done.set_result(_prepare(mels))
            except Exception as e:  # noqa: BLE001 - re-raised by result(), as the worker's would be
                done.set_exception(e)
            return done

    @property
    def speakers(self) -> tuple[str, ...]:
        return tuple(self.acoustic.config.speakers)

    def resolve_speaker(self, speaker: str | None) -> str:
        """``speaker``, or the voice's default for None; an unknown name raises :class:`ParameterError`
        naming the closest speakers (a voice may have dozens, so it does not list them all)."""
        if speaker is None or speaker == "":
            return self.default_speaker
        if speaker in self.speakers:
            return speaker
        close = difflib.get_close_matches(speaker, self.speakers, n=3, cutoff=0.5)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        shown = ", ".join(self.speakers) if len(self.speakers) <= 8 else \
            f"{', '.join(self.speakers[:6])}, ... (`wavern voices --speakers` lists all)"
        raise ParameterError(f"unknown speaker '{speaker}'; {hint}this voice has {len(self.speakers)}: {shown}")

    # ------------------------------------------------------------------ one request
    def espeak_voice_for(self, speaker: str | None) -> str:
        """The espeak-ng voice whose phonemes a speaker was trained on.

        Speakers of a multi-voice corpus are named by their espeak voice (``en-gb-x-rp+f3``);
        the accent (the part before ``+``) decides the phonemes, the variant does not.
        """
        if speaker and "+" in speaker:
            return speaker.split("+", 1)[0]
        if speaker and _ESPEAK_NAME.fullmatch(speaker):
            return speaker
        return self.espeak_voice  # a speaker of another kind, e.g. a teacher's ("en_US-joe-medium")

    def analyze(self, text: str, *, speaker: str | None = None, sentences=None, lexicon=_VOICES_OWN):
        """The front end's :class:`Utterance` of ``text`` (or of those of its ``sentences``) for a speaker."""
        from wavern.conditioning.frontend import analyze

        return analyze(text, voice=self.espeak_voice_for(speaker or self.default_speaker), table=self.table,
                       lexicon=self.lexicon if lexicon is _VOICES_OWN else lexicon, sentences=sentences)

    @property
    def has_prosody(self) -> bool:
        """Whether ``SpeakConfig.pitch`` / ``pitch_range`` apply: the acoustic model reads prosody."""
        return bool(self.acoustic.config.prosody)

    def prosody_of(self, config: SpeakConfig) -> tuple[float, float, float] | None:
        """The acoustic model's prosody for a request (None: the default), refused with
        :class:`ParameterError` when the request sets pitch on a voice that cannot change it."""
        prosody = config.prosody
        if prosody is not None and not self.has_prosody:
            raise ParameterError("this voice cannot change its pitch or pitch range: its acoustic model "
                                 "was trained without the prosody input")
        return prosody

    def sentence_parts(self, text: str, *, speaker: str, speed: float, after: int = -1,
                       sentences: list | None = None, prosody=None, lexicon=_VOICES_OWN) -> Iterator[SpokenPart]:
        """The request's sentences as mel, in order, analysed block by block (:func:`plan_blocks`).

        Both the stream and the offline renderer (``engine.batch``) take their mel from here, so
        they say the same thing. ``after``: skip the sentences up to and including this index
        (blocks wholly before it are not even analysed). ``sentences``: ``segment(text)`` when
        the caller already has it. ``prosody``: :meth:`prosody_of` the request. ``lexicon``: the
        one the request reads with (default: the voice's :attr:`lexicon` now).
        """
        from wavern.conditioning.stream import stream_mel
        from wavern.conditioning.frontend import segment

        if lexicon is _VOICES_OWN:  # one lexicon for the whole request, whatever is assigned meanwhile
            lexicon = self.lexicon
        if sentences is None:
            sentences = segment(text, lexicon=lexicon)  # ParameterError for nothing to say
        for first, end in plan_blocks(len(sentences)):
            if end - 1 <= after:
                continue
            # the block's own sentences, not its text segmented again (which can split otherwise
            # and so number, or drop, sentences wrongly); their spans are the request's
            utt = self.analyze(text, speaker=speaker, sentences=sentences[first:end], lexicon=lexicon)
            for part in stream_mel(self.acoustic, utt.ids, utt.is_global, utt.sentence_of, speaker=speaker,
                                   speed=speed, prosody=prosody):
                index = first + int(part.sentence)
                if index > after:
                    yield SpokenPart(utt, index, part)

    def stream(self, text: str, config: SpeakConfig | None = None, *, control: StreamControl | None = None,
               seed: int = 0, ssml: bool | None = None) -> Iterator[AudioChunk]:
        """Yield the audio of ``text`` as :class:`AudioChunk`s, in order, as soon as each is made.

        Args:
            text: any text; empty or unspeakable text raises :class:`ParameterError`.
            config: speed, volume, temperature, pause, speaker, pitch, pitch range (None fields: the
                voice's defaults; pitch on a voice without prosody input: :class:`ParameterError`).
            control: optional live controls, read before every chunk.
            seed: vocoder sampling seed (same seed, same audio).
            ssml: ``text`` is an SSML document (:mod:`wavern.conditioning.frontend.ssml`): its
                settings act on the request's, and the chunks' spans and word timings point into
                the markup. Bad markup raises :class:`ParameterError` here, before any audio.
                None (the default): SSML where the text begins with ``<speak`` or ``<?xml``
                (:func:`~wavern.conditioning.frontend.ssml.looks_like_ssml`); False: plain text always.
        """
        if self._closed:
            raise ParameterError(f"voice {self.name} is closed; load it again to speak")
        if config is not None and not isinstance(config, SpeakConfig):
            raise ParameterError(f"config must be a SpeakConfig (or None), found {type(config).__name__}")
        if control is not None and not isinstance(control, StreamControl):
            raise ParameterError(f"control must be a StreamControl (or None), found {type(control).__name__}")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise ParameterError(f"seed must be an integer, found {seed!r}")
        cfg = config or SpeakConfig()
        speaker = self.resolve_speaker(cfg.speaker)
        temperature = cfg.temperature if cfg.temperature is not None else self.default_temperature
        pause_s = cfg.pause_s if cfg.pause_s is not None else self.default_pause_s
        control = control or StreamControl()  # its None speed/volume: this request's, read live (never written)
        prosody = self.prosody_of(cfg)
        from wavern.conditioning.frontend import segment

        lexicon = self.lexicon  # the request's, for all its sentences (a later assignment: the next request's)
        postfilter = self.postfilter if cfg.postfilter is not False else None
        melmatch = self.melmatch_for(cfg)
        if ssml is None:
            from wavern.conditioning.frontend.ssml import looks_like_ssml

            ssml = isinstance(text, str) and looks_like_ssml(text)
        if ssml:
            doc = self._ssml(text, cfg, lexicon)
            return self._stream_ssml(doc, cfg, speaker, temperature, pause_s, control, seed, postfilter, melmatch,
                                     lexicon)
        sentences = segment(text, lexicon=lexicon)  # refuse bad text now, not at the first next()
        return self._stream(text, sentences, speaker, temperature, pause_s, Live(control, cfg), seed, postfilter,
                            prosody, melmatch, lexicon)

    def _ssml(self, text: str, cfg: SpeakConfig, lexicon):
        """The request's SSML document, every speaker it names checked; pitch marks on a voice
        that cannot change its pitch are dropped with a warning (the words are still said)."""
        from wavern.conditioning.config import PROSODY_DEFAULT
        from wavern.conditioning.frontend.ssml import parse_ssml

        base = cfg.prosody or PROSODY_DEFAULT
        doc = parse_ssml(text, lexicon=lexicon, pitch=base[1], pitch_range=base[2])
        for piece in doc.pieces:
            if piece.speaker is not None:
                self.resolve_speaker(piece.speaker)  # ParameterError naming the nearest speakers
        if not self.has_prosody and any(p.pitch is not None or p.pitch_range is not None for p in doc.pieces):
            log.warning("voice %s cannot change its pitch: the SSML document's pitch and range marks are ignored",
                        self.name)
        return doc

    def _piece_setup(self, piece, cfg: SpeakConfig, speaker: str, lexicon) -> tuple:
        """(speaker, prosody, lexicon) an SSML piece is spoken with: its own where it sets them (its
        pitch marks only on a voice that reads prosody), else the request's."""
        if self.has_prosody and (piece.pitch is not None or piece.pitch_range is not None):
            cfg = dataclasses.replace(cfg, pitch=piece.pitch, pitch_range=piece.pitch_range)
        return self.resolve_speaker(piece.speaker or speaker), self.prosody_of(cfg), piece.lexicon or lexicon

    def _stream_ssml(self, doc, cfg: SpeakConfig, speaker, temperature, pause_s, control, seed, postfilter,
                     melmatch, lexicon) -> Iterator[AudioChunk]:
        """An SSML document's pieces, each streamed as a request of its own (its settings on the
        request's, sampling seed ``seed + i``), one after the other, renumbered as one request."""
        position = sentence0 = 0
        if doc.lead_s > 0 and not control.stopped:
            gap = np.zeros(int(doc.lead_s * self.sample_rate), np.float32)
            yield AudioChunk(gap, self.sample_rate, 0, doc.pieces[0].source_span(0, 0), sentence_index=0)
            position = gap.size
        for i, piece in enumerate(doc.pieces):
            if control.stopped:
                return
            who, prosody, lex = self._piece_setup(piece, cfg, speaker, lexicon)
            # the request's pause after each of the piece's sentences but the last, which has the piece's own
            chunks = self._stream(piece.text, list(piece.sentences), who, temperature, pause_s,
                                  Live(control, cfg, speed_factor=piece.speed, volume_factor=piece.volume),
                                  seed + i, postfilter, prosody, melmatch, lex, last_pause=piece.silence_after)
            made = 0  # samples of this piece yielded
            try:
                for chunk in chunks:
                    yield dataclasses.replace(
                        chunk, start_sample=chunk.start_sample + position,
                        text_span=piece.source_span(*chunk.text_span),
                        sentence_index=chunk.sentence_index + sentence0,
                        word_timings=tuple(WordTiming(*piece.source_span(t.char_start, t.char_end),
                                                      t.start_sample + position, t.end_sample + position)
                                           for t in chunk.word_timings))
                    made = chunk.start_sample + chunk.samples.size
            finally:
                chunks.close()
            position += made
            sentence0 += len(piece.sentences)

    def ltp_scale_for(self, melmatch) -> float:
        """The long-term predictor gain factor (:meth:`Vocoder.frame_inputs`) of a request whose mel
        matching is ``melmatch``: the voice's ``inference.ltp_gain_scale`` where there is mel matching,
        1 (as the net was trained) where there is none. More of the period in the synthesis filter
        keeps the voice voiced, and mel matching puts back the spectral envelope it costs; without
        mel matching it costs intelligibility (docs/TRAINING.md, "What was tried")."""
        return self.ltp_gain_scale if melmatch is not None else 1.0

    def _stream(self, text, sentences, speaker, temperature, pause_s, control, seed,
                postfilter=None, prosody=None, melmatch=None, lexicon=None,
                last_pause=None) -> Iterator[AudioChunk]:
        """The stream of :meth:`stream`; ``last_pause``: the silence after the last sentence, as a
        function of the sentence pause in effect then (an SSML piece's own), instead of that pause."""
        voc = self.vocoder
        hop = voc.hop
        speed = control.speed
        mels = self.sentence_parts(text, speaker=speaker, speed=speed, sentences=sentences, prosody=prosody,
                                   lexicon=lexicon)
        pending = None  # the next sentence, being prepared by the worker
        state = voc.new_state(seed=seed)
        ltp_scale = self.ltp_scale_for(melmatch)
        pf_state = postfilter.new_state() if postfilter is not None else None
        position_total = 0  # samples yielded so far in this request
        k = 0  # chunks of audio yielded so far in this request
        try:
            spoken = next(mels, None)  # first sentence here: no thread hand-off before the first audio
            while spoken is not None:
                utt, part, s_idx = spoken.utt, spoken.part, spoken.sentence
                sentence = utt.sentences[min(int(part.sentence), len(utt.sentences) - 1)]
                span = (sentence.start, sentence.end)
                n_total = part.n_frames * hop
                if n_total:
                    timings = self._word_timings(utt, part, position_total)
                    timeline = timings  # the sentence's words as last timed (sent, or to be sent)
                    state.position = 0  # frame clock restarts per sentence; h and prev carry on
                    gi_cache = WindowedFrameInputs(voc, part, postfilter=postfilter,  # mel decoded as needed
                                                    ltp_gain_scale=ltp_scale)
                    # mel matching: one segment per sentence; its output trails the vocoder's by its lead
                    mm = melmatch.stream(gi_cache.rows, n_total) if melmatch is not None else None
                held = None  # mel-matched output not yet yielded (too little to start a player on, or cut)
                done = 0
                while done < n_total:
                    if control.stopped:
                        return
                    if control.speed != speed:  # re-render the rest of this sentence at the new speed
                        speed = control.speed
                        done, n_total, gi_cache, part = self._respeed(utt, part, speaker, speed, done, n_total,
                                                                      postfilter, prosody, ltp_scale)
                        state.position = done
                        if mm is not None:  # what was made at the old speed ends there; the rest is new
                            tail = mm.cut()
                            held = tail if held is None else np.concatenate([held, tail])
                            mm = melmatch.stream(gi_cache.rows, n_total - done, frame0=done // hop,
                                                 n_rows=gi_cache.n_frames - done // hop)
                        # the words still to come, at the new speed: sample `done` is heard once what was made
                        # at the old speed (and held back by mel matching) has played
                        lands = position_total + (held.size if held is not None else 0)
                        to_come = retimed(timeline, self._word_timings(utt, part, lands - done), lands)
                        timings = tuple(t for t in timings if t.start_sample < lands) + to_come  # (not sent yet)
                        timeline = tuple(t for t in timeline if t.start_sample < lands) + to_come
                        _close_after(pending, mels)
                        mels = self.sentence_parts(text, speaker=speaker, speed=speed, after=s_idx,
                                                   sentences=sentences, prosody=prosody, lexicon=lexicon)
                        pending = self._prepare_next(mels)
                        if done >= n_total:  # the switch came with the sentence's last chunk
                            break
                    n = min(chunk_samples(k), n_total - done)
                    if mm is not None and done == 0:  # nothing comes out before the passes' lead: one call
                        n = min(max(n, melmatch.lead_samples + FIRST_CHUNK_SAMPLES), n_total)
                    gi, frame0 = gi_cache.covering(done, n)
                    samples = np.empty(n, np.int16)
                    for a in range(0, n, STOP_CHECK_SAMPLES):
                        if a and control.stopped:
                            return
                        b = min(n, a + STOP_CHECK_SAMPLES)
                        voc.generate(gi, state, b - a, frame0=frame0, temperature=temperature, out=samples[a:b])
                    if pf_state is not None:  # its memories carry over chunks and sentences, like h
                        pf_state.position = done
                        samples = postfilter.apply(samples, gi_cache.coefs_covering(done, n), pf_state,
                                                   frame0=frame0)
                    if pending is None and (k + 1 >= len(RAMP_SAMPLES) or done + n >= n_total):
                        # past the ramp (or a short first sentence's end): the worker then competes with
                        # neither the ramp's CPU nor its GIL hand-offs
                        pending = self._prepare_next(mels)
                    if mm is not None:
                        out = mm.push(samples)
                        samples, held = (out if held is None else np.concatenate([held, out])), None
                        if samples.size < FIRST_CHUNK_SAMPLES and done + n < n_total:
                            held, samples = samples, samples[:0]  # a player would run dry on less: wait
                    k += 1
                    done += n
                    if samples.size == 0:  # mel matching still filling its window
                        continue
                    chunk = self._chunk(samples, control, position_total, span, s_idx, timings)
                    yield chunk
                    timings = ()  # a sentence's word timings come with its first audio
                    position_total += chunk.samples.size
                if held is not None and held.size and not control.stopped:  # a speed switch on the last chunk
                    chunk = self._chunk(held, control, position_total, span, s_idx, timings)
                    yield chunk
                    position_total += chunk.samples.size
                if n_total and not control.stopped:
                    gap_s = control.pause_s if control.pause_s is not None else pause_s
                    if last_pause is not None and s_idx == len(sentences) - 1:
                        gap_s = last_pause(gap_s)
                    if gap_s > 0:
                        gap = np.zeros(int(gap_s * self.sample_rate), np.float32)
                        yield AudioChunk(gap, self.sample_rate, position_total, span, sentence_index=s_idx)
                        position_total += gap.size
                # The next sentence: from the worker, or (an empty sentence: nobody asked) right here.
                spoken, pending = (next(mels, None) if pending is None else _result(pending, mels)), None
        finally:
            _close_after(pending, mels)

    def _chunk(self, samples: np.ndarray, control: Live, position: int, span, s_idx: int,
               timings) -> AudioChunk:
        audio = int16_to_float(samples)
        if control.volume != 1.0:
            audio = soft_limit(audio * np.float32(control.volume)).astype(np.float32)
        return AudioChunk(audio, self.sample_rate, position, span, sentence_index=s_idx, word_timings=timings)

    def _respeed(self, utt, part, speaker, speed, done, n_total, postfilter=None, prosody=None, ltp_scale=1.0):
        from wavern.conditioning.stream import stream_mel

        frac = done / max(n_total, 1)
        for p in stream_mel(self.acoustic, utt.ids, utt.is_global, utt.sentence_of, speaker=speaker, speed=speed,
                            prosody=prosody):
            if p.sentence == part.sentence:
                break
        else:  # pragma: no cover - the sentence always exists
            raise AssertionError("sentence vanished on re-render")
        hop = self.vocoder.hop
        n_new = p.n_frames * hop
        new_done = min(int(round(frac * p.n_frames)) * hop, n_new)
        return new_done, n_new, WindowedFrameInputs(self.vocoder, p, postfilter=postfilter,
                                                     ltp_gain_scale=ltp_scale), p

    def _word_timings(self, utt, part, offset: int) -> tuple[WordTiming, ...]:
        hop = self.vocoder.hop
        frames = np.asarray(part.durations)
        starts = np.concatenate([[0], np.cumsum(frames)])
        t0 = int(part.token_start)
        out = []
        prev = None
        for w in sorted(set(utt.word_of[t0:t0 + frames.size].tolist())):  # (np.unique imports numpy.ma: ~10 ms)
            if w < 0:
                continue
            idx = np.flatnonzero(utt.word_of[t0:t0 + frames.size] == w)
            a, b = offset + int(starts[idx[0]]) * hop, offset + int(starts[idx[-1] + 1]) * hop
            if prev is not None:  # words espeak spoke inside the one before ("of the"): its time, shared
                for m in range(prev[0] + 1, int(w)):
                    out.append(WordTiming(utt.words[m].start, utt.words[m].end, prev[1], prev[2]))
            word = utt.words[int(w)]
            out.append(WordTiming(word.start, word.end, a, b))
            prev = (int(w), a, b)
        if prev is not None:  # ... the sentence's last words too ("It was a.": espeak says "was a" as one)
            k = min(int(part.sentence), len(utt.sentences) - 1)
            last = sum(len(s.words) for s in utt.sentences[:k + 1]) - 1
            for m in range(prev[0] + 1, last + 1):
                out.append(WordTiming(utt.words[m].start, utt.words[m].end, prev[1], prev[2]))
        return tuple(out)

    # ------------------------------------------------------------------ conveniences
    def synthesize(self, text: str, config: SpeakConfig | None = None, *, seed: int = 0,
                   ssml: bool | None = None) -> np.ndarray:
        """The whole request as one float32 array (the stream, concatenated)."""
        parts = [c.samples for c in self.stream(text, config, seed=seed, ssml=ssml)]
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)

    def synthesize_wav(self, text: str, config: SpeakConfig | None = None, *, seed: int = 0,
                       format: str = "wav", ssml: bool | None = None) -> bytes:
        """:meth:`synthesize` as the bytes of an audio file: "wav" (16-bit PCM), "flac" or "ogg"."""
        from wavern.engine.audio_io import encode_audio

        return encode_audio(self.synthesize(text, config, seed=seed, ssml=ssml), self.sample_rate, format=format)

    async def astream(self, text: str, config: SpeakConfig | None = None, *, control: StreamControl | None = None,
                      seed: int = 0, ssml: bool | None = None) -> AsyncIterator[AudioChunk]:
        """:meth:`stream` for asyncio: ``async for chunk in voice.astream(text)``. Each chunk is made
        on a thread of the stream's own, so the loop serves other tasks meanwhile; the chunks
        are the same as the stream's. Bad text or settings raise here, before the first chunk.
        Leaving the loop early, or cancelling the task, stops the stream once the chunk being
        made is done (its thread is not interrupted; nothing is made after it)."""
        import asyncio
        import concurrent.futures

        gen = self.stream(text, config, control=control, seed=seed, ssml=ssml)
        done = object()
        making: concurrent.futures.Future | None = None
        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="wavern-astream")  # one thread: the
        try:  # stream's per-thread settings hold for all its chunks
            while True:
                making = pool.submit(next, gen, done)
                chunk = await asyncio.wrap_future(making)  # a cancel here leaves `making` running
                if chunk is done:
                    return
                yield chunk
        finally:
            # closed once the chunk in hand is made, by the thread that made it (at once if it is): a
            # generator still making a chunk cannot be closed from here, nor should the loop wait for it
            if making is not None:
                making.add_done_callback(lambda _: gen.close())
            else:
                gen.close()
            pool.shutdown(wait=False)

    def vocode(self, audio: np.ndarray, *, seed: int = 0, temperature: float | None = None,
               postfilter: bool = True) -> np.ndarray:
        """Copy synthesis: float audio → log-mel (and, for a pitch voice, its pitch features) →
        this voice's vocoder (folded, as :meth:`Vocoder.render`) and post-filter (unless
        ``postfilter=False``) → float32 audio. Audio longer than 2 × :data:`VOCODE_PIECE_S` goes
        piece by piece (:func:`quiet_cuts`; piece i with seed ``seed + i``), so memory stays that of
        one piece however long the input."""
        x = np.asarray(audio, np.float32)
        if x.ndim != 1 or x.size == 0:
            raise ParameterError(f"vocode expects mono audio with samples, found shape {x.shape}")
        from wavern.engine.batch import DEFAULT_FOLD_FRAMES

        out = []
        for i, (a, b) in enumerate(quiet_cuts(x, int(VOCODE_PIECE_S * self.sample_rate),
                                              int(VOCODE_SEARCH_S * self.sample_rate), self.vocoder.hop)):
            feats = copy_features(x[a:b], DEFAULT_MEL, pitch=self.acoustic.config.pitch)
            y = self.render_mel(feats, seed=seed + i, temperature=temperature,
                                fold_frames=DEFAULT_FOLD_FRAMES, postfilter=postfilter, measured=True)
            out.append(int16_to_float(y[: b - a]))
        return out[0] if len(out) == 1 else np.concatenate(out)

    def render_mel(self, mel: np.ndarray, *, seed: int = 0, temperature: float | None = None,
                   fold_frames: int | None = None, postfilter: bool = True, measured: bool = False) -> np.ndarray:
        """(T, n_mels) log-mel → (T * hop,) int16 through the vocoder, the post-filter and mel
        matching (those the voice has, unless ``postfilter=False``), as one segment. ``measured``:
        the mel was measured from audio (copy synthesis), so mel matching takes the voice's settings
        for that (:attr:`melmatch_measured`) rather than those for the acoustic model's mel.

        ``fold_frames``: None generates one stream, as the real-time path does; an int folds
        the mel into segments generated as a batch (:meth:`Vocoder.render`).
        """
        t = self.default_temperature if temperature is None else temperature
        mm = (self.melmatch_measured if measured else self.melmatch) if postfilter else None
        y = self.vocoder.render(mel, seed=seed, temperature=t, fold_frames=fold_frames,
                                ltp_gain_scale=self.ltp_scale_for(mm))
        if not postfilter:
            return y
        return self.apply_postfilter(y, mel, melmatch=mm)

    def melmatch_for(self, config: SpeakConfig | None):
        """The mel matching a request gets: the voice's, none (``postfilter=False`` or ``passes=0``), or
        the voice's settings (the defaults for a voice without) with ``config.passes`` passes."""
        if config is not None and config.postfilter is False:
            return None
        if config is None or config.passes is None:
            return self.melmatch
        if config.passes == 0:
            return None
        from wavern.engine.melmatch import MelMatch, MelMatchConfig

        base = self.melmatch.config if self.melmatch is not None else MelMatchConfig()
        if base.iterations == config.passes and self.melmatch is not None:
            return self.melmatch
        cached = self._melmatch_variants.get(config.passes)
        if cached is None:
            cached = MelMatch(dataclasses.replace(base, iterations=config.passes), DEFAULT_MEL)
            cached.load()
            self._melmatch_variants[config.passes] = cached
        return cached

    def apply_postfilter(self, samples: np.ndarray, mel: np.ndarray, segments=None, *,
                         melmatch=_VOICES_OWN) -> np.ndarray:
        """The voice's post-processing over a whole utterance's samples (int16), its frames from
        ``mel``: the formant post-filter (one pass, its memories carried through), then mel
        matching, one segment per entry of ``segments`` (sample counts, whole frames, summing to
        ``len(samples)``; default one), as the stream matches each sentence. A no-op for a voice
        with neither. ``melmatch``: another :class:`MelMatch` (or None) than the voice's."""
        if len(samples) == 0:
            return samples
        if self.postfilter is not None:
            samples = self.postfilter.apply(samples, self.postfilter.coefficients(mel), self.postfilter.new_state())
        mm = self.melmatch if melmatch is _VOICES_OWN else melmatch
        if mm is None:
            return samples
        hop = self.vocoder.hop
        segments = [len(samples)] if segments is None else [int(n) for n in segments]
        if sum(segments) != len(samples) or any(n < 0 or n % hop for n in segments[:-1]):
            raise ParameterError(f"segments {segments} do not split {len(samples)} samples into whole frames")
        out, at = [], 0
        for n in segments:
            f0 = at // hop
            out.append(mm.apply(samples[at:at + n], np.asarray(mel)[f0:f0 + -(-n // hop)]))
            at += n
        return np.concatenate(out)

    def warmup(self) -> float:
        """Compile and touch everything once (kernels, acoustic model); returns seconds taken."""
        t = time.perf_counter()
        for _ in self.stream("Hi. Yes.", SpeakConfig()):  # two sentences: the worker thread runs too
            pass
        return time.perf_counter() - t


def _close_after(pending: concurrent.futures.Future | None, mels) -> None:
    """Close the sentence generator ``mels`` once the worker's job on it (``pending``) is over,
    without waiting for it: a job already running closes it as it finishes, so a stop (or a change
    of speed) does not wait for the sentence being decoded (43 ms p90, 128 ms worst; soak review)."""
    if pending is None or pending.cancel():
        mels.close()
    else:
        pending.add_done_callback(lambda _: mels.close())


def _result(pending: concurrent.futures.Future, mels):
    """The worker's next sentence; here, when Voice.close cancelled the job before it started
    (it waited behind another stream's work)."""
    try:
        return pending.result()
    except concurrent.futures.CancelledError:
        return _prepare(mels)


def _prepare(mels):
    """The worker's job: the next sentence, its mel decoded whole (off the calling thread)."""
    spoken = next(mels, None)
    if spoken is not None:
        spoken.part.mel  # noqa: B018 - decodes the rest of its mel here, not on the calling thread
    return spoken


