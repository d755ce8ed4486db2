"""ctypes binding to libespeak-ng (from the ``espeakng-loader`` wheel).

espeak-ng keeps global state (one voice, one callback, one set of parameters), so a process
holds exactly one library instance: a lazily initialised module-level singleton, and every
synthesis runs under one lock. Worker processes (the corpus builder) each get their own.

The library runs in ``AUDIO_OUTPUT_SYNCHRONOUS`` mode with phoneme events whose names are IPA
(``espeakINITIALIZE_PHONEME_EVENTS | espeakINITIALIZE_PHONEME_IPA``). Every event carries the
sample index at which it happens (``espeak_EVENT.sample``, counted at the library's native
22 050 Hz), so phoneme boundaries are sample accurate; ``audio_position`` is only in
milliseconds and is not used.

What one synthesis returns (:class:`Synthesis`) is the raw event stream: phoneme names exactly
as espeak emits them, with stress marks fused to the vowel (``"ˈoʊ"``) and pauses as empty
names, plus word events. Turning that into model tokens is :mod:`.phonemes`' job.

Only the events (:func:`phoneme_events`): espeak emits an event when its wave generator reaches
it, so the audio is still made, but at :data:`EVENTS_RATE` words per minute (its fastest native
rate, half the samples of the default rate, half the time) and not copied out. The phoneme
names and the characters they point at do not depend on the rate (espeak-ng's phoneme list is
built before lengths are set; checked on 5 036 sentences for en-us and 1 000 lines for each
other English accent: identical events, but the position of a sentence's leading pause, which
espeak carries over from the previous call whatever the rate).
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import threading
from pathlib import Path

import numpy as np

from wavern.errors import ParameterError, WavernError

__all__ = [
    "SAMPLE_RATE",
    "WordEvent",
    "Synthesis",
    "PhonemeEvents",
    "synthesize",
    "phoneme_events",
    "phonemize",
    "espeak_version",
    "data_path",
    "DEFAULT_RATE",
    "DEFAULT_PITCH",
    "DEFAULT_PITCH_RANGE",
    "EVENTS_RATE",
]

log = logging.getLogger(__name__)

SAMPLE_RATE = 22050  # espeak-ng's native output rate; checked against espeak_Initialize's answer

# espeak-ng's own defaults (speak_lib.h): words per minute, pitch 0..100, range 0..100.
DEFAULT_RATE = 175
DEFAULT_PITCH = 50
DEFAULT_PITCH_RANGE = 50
RATE_LIMITS = (80, 450)  # espeak-ng clamps outside these
# phoneme_events renders at this rate: the fastest espeak-ng makes natively (at 450 and above
# it renders at 175 and time-stretches with sonic, which took longer than the default rate).
EVENTS_RATE = 449
PITCH_LIMITS = (0, 100)

# speak_lib.h constants (espeak-ng 1.52)
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INIT_PHONEME_EVENTS = 0x0001
_INIT_PHONEME_IPA = 0x0002
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_ENDPAUSE = 0x1000  # a full pause after the last clause, so sentences concatenate naturally
_EV_LIST_TERMINATED = 0
_EV_WORD = 1
_EV_PHONEME = 7
_P_RATE, _P_PITCH, _P_RANGE = 1, 3, 4
_EE_OK = 0


class _Event(ctypes.Structure):
    """``espeak_EVENT`` from speak_lib.h; the id union is read as raw 8 bytes."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),  # character position, counted from 1
        ("length", ctypes.c_int),  # word length in characters (word events)
        ("audio_position", ctypes.c_int),  # milliseconds (not used)
        ("sample", ctypes.c_int),  # sample index within this synthesis
        ("user_data", ctypes.c_void_p),
        ("id", ctypes.c_ubyte * 8),  # union {int number; char *name; char string[8]}
    ]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event))


@dataclasses.dataclass(frozen=True)
class WordEvent:
    """espeak's word event: where a word starts in the text and in the audio."""

    text_start: int  # 0-based character offset into the synthesised text
    length: int  # characters as espeak counts them (unreliable around apostrophes)
    sample: int  # sample index at which espeak starts the word


@dataclasses.dataclass(frozen=True)
class Synthesis:
    """The raw result of one :func:`synthesize` call.

    Attributes:
        audio: (n_samples,) int16 at :data:`SAMPLE_RATE`.
        phonemes: one IPA name per phoneme event, in order; ``""`` is a pause.
            Stress marks are part of the vowel's name (``"ˈæ"``, ``"ˌɪ"``).
        text_positions: (n_events,) int64, 0-based character offset of the word (or, for
            pauses, the punctuation) espeak attributes the event to.
        starts: (n_events,) int64, sample at which each event starts; non-decreasing.
        durations: (n_events,) int64, ``starts[i+1] - starts[i]``, the last one running to the
            end of the audio. ``starts[0] + durations.sum() == len(audio)``. About 2 % are 0.
        words: the word events, in order.
    """

    audio: np.ndarray
    phonemes: list[str]
    text_positions: np.ndarray
    starts: np.ndarray
    durations: np.ndarray
    words: list[WordEvent]

    @property
    def lead_samples(self) -> int:
        """Samples before the first phoneme event (the onset espeak attributes to no phoneme)."""
        return int(self.starts[0]) if len(self.starts) else len(self.audio)

    @property
    def sample_rate(self) -> int:
        return SAMPLE_RATE


@dataclasses.dataclass(frozen=True)
class PhonemeEvents:
    """espeak's phoneme events for a text without its audio (:func:`phoneme_events`).

    Attributes:
        phonemes: as :attr:`Synthesis.phonemes`.
        text_positions: (n_events,) int64, as :attr:`Synthesis.text_positions`.
    """

    phonemes: list[str]
    text_positions: np.ndarray


class _Collector:
    """Receives the synthesis callback's audio (unless ``keep_audio`` is False) and events for one call."""

    def __init__(self, *, keep_audio: bool = True) -> None:
        self.keep_audio = keep_audio
        self.chunks: list[np.ndarray] = []
        self.events: list[tuple[int, int, int, int, bytes]] = []

    def __call__(self, wav, n_samples, events) -> int:
        if self.keep_audio and n_samples > 0 and wav:
            self.chunks.append(np.ctypeslib.as_array(wav, shape=(n_samples,)).copy())
        i = 0
        while events and events[i].type != _EV_LIST_TERMINATED:
            ev = events[i]
            if ev.type in (_EV_PHONEME, _EV_WORD):
                self.events.append((ev.type, ev.text_position, ev.length, ev.sample, bytes(ev.id)))
            i += 1
        return 0  # 0 = continue synthesis


class _Library:
    """The one espeak-ng instance of this process."""

    def __init__(self) -> None:
        lib_path, self.data_path = _locate()
        try:
            lib = ctypes.CDLL(lib_path)
        except OSError as exc:
            raise WavernError(f"could not load libespeak-ng from {lib_path!r}: {exc}") from exc
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_Info.argtypes = [ctypes.c_void_p]
        lib.espeak_Info.restype = ctypes.c_char_p
        lib.espeak_SetSynthCallback.argtypes = [_CALLBACK]
        lib.espeak_SetSynthCallback.restype = None
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetVoiceByName.restype = ctypes.c_int
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_SetParameter.restype = ctypes.c_int
        lib.espeak_Synth.argtypes = [
            ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint, ctypes.c_uint,
            ctypes.c_void_p, ctypes.c_void_p,
        ]
        lib.espeak_Synth.restype = ctypes.c_int
        lib.espeak_Synchronize.restype = ctypes.c_int
        # espeak draws breath/aspiration noise from its own generator (seeded from the clock
        # at start-up) and from libc rand(); seeding both per call makes audio reproducible.
        self.set_rand_seed = getattr(lib, "espeak_ng_SetRandSeed", None)
        if self.set_rand_seed is not None:
            self.set_rand_seed.argtypes = [ctypes.c_long]
            self.set_rand_seed.restype = ctypes.c_int
        else:
            log.warning("libespeak-ng %s has no espeak_ng_SetRandSeed: its audio noise is not reproducible",
                        lib_path)
        self.libc_srand = ctypes.CDLL(None).srand
        self.libc_srand.argtypes = [ctypes.c_uint]
        self.libc_srand.restype = None
        rate = lib.espeak_Initialize(
            _AUDIO_OUTPUT_SYNCHRONOUS, 0, self.data_path.encode(), _INIT_PHONEME_EVENTS | _INIT_PHONEME_IPA
        )
        if rate != SAMPLE_RATE:
            raise WavernError(
                f"espeak_Initialize with data {self.data_path!r} returned {rate}, expected sample rate {SAMPLE_RATE}"
            )
        self.lib = lib
        self.version = lib.espeak_Info(None).decode()
        self.collector: _Collector | None = None
        self._callback = _CALLBACK(self._dispatch)  # kept referenced for the life of the process
        lib.espeak_SetSynthCallback(self._callback)
        self.voice: str | None = None
        self.lock = threading.Lock()
        log.debug("espeak-ng %s initialised from %s", self.version, self.data_path)

    def _dispatch(self, wav, n_samples, events) -> int:
        if self.collector is None:
            return 0
        return self.collector(wav, n_samples, events)

    def set_voice(self, voice: str) -> None:
        if voice == self.voice:
            return
        if "+" in voice:  # espeak ignores a variant it lacks (the plain language speaks): refuse it
            variant = voice.split("+", 1)[1]
            if "+" in variant or "/" in variant or not (Path(self.data_path) / "voices" / "!v" / variant).is_file():
                self.voice = None
                raise ParameterError(
                    f"espeak-ng has no voice variant {variant!r} (in {voice!r}); variants are files of "
                    f"{Path(self.data_path) / 'voices' / '!v'}, e.g. 'm1'..'m7', 'f1'..'f5'")
        err = self.lib.espeak_SetVoiceByName(voice.encode())
        if err != _EE_OK:
            self.voice = None
            raise ParameterError(
                f"espeak-ng has no voice {voice!r} (error {err}); use a language with an optional "
                f"variant such as 'en-us' or 'en-gb-x-rp+f3'"
            )
        self.voice = voice

    def set_parameter(self, which: int, value: int) -> None:
        err = self.lib.espeak_SetParameter(which, int(value), 0)
        if err != _EE_OK:
            raise WavernError(f"espeak_SetParameter({which}, {value}) failed with error {err}")


_instance: _Library | None = None
_instance_lock = threading.Lock()


def _locate() -> tuple[str, str]:
    """Library file and data folder from espeakng-loader, checked to exist."""
    try:
        import espeakng_loader
    except ImportError as exc:
        raise WavernError(
            "the Python package 'espeakng-loader' (which ships libespeak-ng and its data) is not "
            "installed; run `pip install 'espeakng-loader>=0.2'`"
        ) from exc
    lib_path = Path(espeakng_loader.get_library_path())
    data = Path(espeakng_loader.__file__).parent / "espeak-ng-data"
    if not lib_path.is_file():
        raise WavernError(f"libespeak-ng not found: looked for {str(lib_path)!r} (from espeakng-loader)")
    if not (data / "phontab").is_file():
        raise WavernError(f"espeak-ng data not found: looked for {str(data / 'phontab')!r} (from espeakng-loader)")
    return str(lib_path), str(data)


def _library() -> _Library:
    global _instance
    if _instance is None:
        with _instance_lock:
            if _instance is None:
                _instance = _Library()
    return _instance


def espeak_version() -> str:
    """Version string of the loaded libespeak-ng (e.g. ``"1.52.0"``)."""
    return _library().version


def data_path() -> str:
    """The espeak-ng-data folder the library was initialised with."""
    return _library().data_path


def _check_int(name: str, value: int, limits: tuple[int, int]) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ParameterError(f"{name} must be an integer, found {value!r}")
    if not limits[0] <= value <= limits[1]:
        raise ParameterError(f"{name} {value} is outside [{limits[0]}, {limits[1]}]")
    return int(value)


def synthesize(
    text: str,
    *,
    voice: str = "en-us",
    rate: int = DEFAULT_RATE,
    pitch: int = DEFAULT_PITCH,
    pitch_range: int = DEFAULT_PITCH_RANGE,
    noise_seed: int = 0,
) -> Synthesis:
    """Render ``text`` with espeak-ng and return audio plus phoneme and word events.

    The text is plain UTF-8 (no SSML); a full pause follows the last clause.

    Reproducibility: the noise generators are seeded with ``noise_seed`` on every call (this
    also reseeds libc ``rand()`` for the process). espeak-ng additionally carries waveform state
    (pitch-flutter phase and the like) from one call to the next, so the *audio* of a call
    depends on what this process rendered before (:func:`phoneme_events` calls included); the
    phoneme names and their order do not. A fresh process replaying the same calls gives
    identical audio.

    Args:
        text: what to say; one sentence is the intended unit.
        voice: ``language`` or ``language+variant`` (``"en-us"``, ``"en-gb-x-rp+f3"``).
        rate: words per minute, 80..450.
        pitch: base pitch, 0..100.
        pitch_range: pitch variation, 0..100 (0 is monotone).
        noise_seed: seed of espeak's noise for this call (0..2**31-1).

    Returns:
        The :class:`Synthesis`; its events are sample accurate.
    """
    rate = _check_int("rate", rate, RATE_LIMITS)
    pitch = _check_int("pitch", pitch, PITCH_LIMITS)
    pitch_range = _check_int("pitch_range", pitch_range, PITCH_LIMITS)
    noise_seed = _check_int("noise_seed", noise_seed, (0, 2**31 - 1))
    collector = _Collector()
    _run(text, voice, rate, pitch, pitch_range, noise_seed, collector)
    return _assemble(collector)


def phoneme_events(text: str, *, voice: str = "en-us") -> PhonemeEvents:
    """espeak's phoneme events for ``text``, the same as :func:`synthesize` gives, without its audio.

    Rendered at :data:`EVENTS_RATE` (half the audio of the default rate) and the audio is not
    copied out; the names and text positions equal those of a synthesis at any rate (see the
    module docstring; the leading pause's position is carried over from the previous call in
    either case). Sample positions are not returned: they would be those of the fast rendering.
    """
    collector = _Collector(keep_audio=False)
    _run(text, voice, EVENTS_RATE, DEFAULT_PITCH, DEFAULT_PITCH_RANGE, None, collector)
    names: list[str] = []
    positions: list[int] = []
    for kind, text_position, _length, _sample, raw in collector.events:
        if kind == _EV_PHONEME:
            names.append(_event_name(raw))
            positions.append(max(text_position - 1, 0))
    return PhonemeEvents(phonemes=names, text_positions=np.asarray(positions, np.int64))


def _run(text: str, voice: str, rate: int, pitch: int, pitch_range: int, noise_seed: int | None,
         collector: _Collector) -> None:
    """One espeak_Synth call under the library lock, its callbacks into ``collector``.

    ``noise_seed`` None leaves espeak's noise generators alone (their draws change no event).
    """
    if not isinstance(text, str):
        raise ParameterError(f"text must be a str, found {type(text).__name__}")
    if "\x00" in text:
        raise ParameterError("text contains a NUL character")
    lib = _library()
    data = text.encode("utf-8")
    with lib.lock:
        lib.set_voice(voice)
        lib.set_parameter(_P_RATE, rate)
        lib.set_parameter(_P_PITCH, pitch)
        lib.set_parameter(_P_RANGE, pitch_range)
        if noise_seed is not None:
            if lib.set_rand_seed is not None:
                lib.set_rand_seed(noise_seed)
            lib.libc_srand(noise_seed)
        lib.collector = collector
        try:
            err = lib.lib.espeak_Synth(data, len(data) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8 | _ENDPAUSE, None, None)
            if err == _EE_OK:
                err = lib.lib.espeak_Synchronize()
        finally:
            lib.collector = None
    if err != _EE_OK:
        raise WavernError(f"espeak_Synth failed with error {err} for voice {voice!r} on text {text[:60]!r}")


def _event_name(raw: bytes) -> str:
    return raw.split(b"\x00", 1)[0].decode("utf-8", errors="replace")


def _assemble(collector: _Collector) -> Synthesis:
    audio = np.concatenate(collector.chunks).astype(np.int16) if collector.chunks else np.zeros(0, np.int16)
    n = len(audio)
    names: list[str] = []
    positions: list[int] = []
    starts: list[int] = []
    words: list[WordEvent] = []
    for kind, text_position, length, sample, raw in collector.events:
        sample = min(max(sample, 0), n)
        if kind == _EV_WORD:
            words.append(WordEvent(text_start=max(text_position - 1, 0), length=length, sample=sample))
            continue
        names.append(_event_name(raw))
        positions.append(max(text_position - 1, 0))
        starts.append(max(sample, starts[-1]) if starts else sample)  # guard monotonicity
    starts_a = np.asarray(starts, np.int64)
    durations = np.diff(np.append(starts_a, n)) if len(starts_a) else np.zeros(0, np.int64)
    return Synthesis(
        audio=audio,
        phonemes=names,
        text_positions=np.asarray(positions, np.int64),
        starts=starts_a,
        durations=durations.astype(np.int64),
        words=words,
    )


def phonemize(text: str, *, voice: str = "en-us") -> list[str]:
    """espeak-ng's phoneme names for ``text`` (``""`` = pause), from the synthesis event path.

    The names are exactly those a corpus rendering of the same text and voice carries
    (:func:`phoneme_events`).
    """
    return phoneme_events(text, voice=voice).phonemes
