"""What the acoustic model *is*: ``EncoderConfig`` and ``AcousticConfig``, stored in ``voice.json``.

Both are frozen dataclasses; every default carries the reason it was chosen. ``to_dict`` /
``from_dict`` are strict inverses: an unknown field is refused with :class:`ParameterError`, so a
voice written by a newer wavern is never "mostly loaded". Training options (steps, learning rate,
batch) live in the trainer's config (``wavern.training.acoustic_trainer``), not here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from wavern.dsp import MelConfig
from wavern.errors import ParameterError

__all__ = ["EncoderConfig", "AcousticConfig", "DECODER_KINDS", "POSITION_KINDS", "SPEED_LIMITS", "PROSODY_DEFAULT",
           "PROSODY_SCALE", "PROSODY_LIMITS", "PROSODY_NAMES", "check_prosody"]

#: espeak-ng's default rate (words per minute), pitch and pitch range (its DEFAULT_RATE,
#: DEFAULT_PITCH, DEFAULT_PITCH_RANGE): what an AcousticConfig.prosody model speaks with at inference
PROSODY_DEFAULT = (175.0, 50.0, 50.0)
#: ... and how far from them one unit of the model's prosody input is (about the corpus's spread)
PROSODY_SCALE = (50.0, 25.0, 35.0)
#: ... what a user may ask of it: the ranges the corpus draws each sentence's settings from
#: (training.corpus RATE_RANGE, PITCH_RANGE, PITCH_RANGE_RANGE); outside them the model would
#: extrapolate from nothing it has heard
PROSODY_LIMITS = ((130.0, 230.0), (25.0, 75.0), (20.0, 90.0))
PROSODY_NAMES = ("rate", "pitch", "pitch_range")


def check_prosody(prosody) -> tuple[float, float, float]:
    """Validate (rate, pitch, pitch range) in espeak-ng's units against :data:`PROSODY_LIMITS`."""
    try:
        values = tuple(float(v) for v in prosody)
    except (TypeError, ValueError):
        raise ParameterError(f"prosody must be three numbers (rate, pitch, pitch range), found {prosody!r}") from None
    if len(values) != 3:
        raise ParameterError(f"prosody must be three numbers (rate, pitch, pitch range), found {len(values)}")
    for name, v, (lo, hi) in zip(PROSODY_NAMES, values, PROSODY_LIMITS):
        if not lo <= v <= hi:  # NaN fails too
            raise ParameterError(f"{name} {v:g} is outside [{lo:g}, {hi:g}], the range the voice was trained on")
    return values

#: Frame-decoder layer kinds: sliding-window (Longformer, no global tokens), strided (Sparse
#: Transformer, non-causal; half the heads local, half strided), or convolution only.
DECODER_KINDS = ("window", "strided", "conv")
#: A duration clamp above this (~11.6 s a phoneme) is refused: a runaway prediction's frames are
#: held in memory (the shipped voice clamps at 200).
MAX_FRAMES_PER_TOKEN = 1000
MAX_SPEAKERS = 10000
#: Position encodings. Only sinusoids for now: they extend to any length, so a paragraph longer
#: than every training utterance still encodes (a learned table would stop at its size).
POSITION_KINDS = ("sinusoidal",)
#: The speeds (duration divisors) inference accepts: beyond them espeak-trained durations stop
#: sounding like speech.
SPEED_LIMITS = (0.25, 4.0)


_SCALAR_TYPES = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,)}
_TYPE_WORDS = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false"}


def _check_types(obj, what: str) -> None:
    """Each scalar field holds its annotated type (an int field no float or bool, a float field a
    number): a voice.json with ``"window": 4.0`` loaded, then failed at the first inference."""
    for f in dataclasses.fields(obj):
        kinds = _SCALAR_TYPES.get(f.type)
        v = getattr(obj, f.name)
        if kinds is not None and (not isinstance(v, kinds) or (isinstance(v, bool) and f.type != "bool")):
            raise ParameterError(f"{what} config field {f.name!r} must be {_TYPE_WORDS[f.type]}, found {v!r}")


def _check_fields(cls, d: Any, what: str) -> dict:
    if not isinstance(d, dict):
        raise ParameterError(f"{what} config must be a dict, found {type(d).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(d) - names
    if unknown:
        raise ParameterError(f"unknown {what} config fields {sorted(unknown)}; expected a subset of {sorted(names)}")
    return dict(d)


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    """Phoneme encoder: embedding + positions + pre-norm (Longformer attention + conv FFN) layers."""

    n_symbols: int = 128  # size of the phoneme symbol table (voice.json "symbols"); id 0 is padding
    d_model: int = 192  # width of the text stream; small enough to train on one CPU core
    n_layers: int = 4  # 4 x window 16 = a receptive field of ±32 tokens plus the global tokens
    n_heads: int = 2  # head_dim 96: few heads keep the banded kernels cheap on CPU
    window: int = 16  # two-sided Longformer window w (even): token i sees |i - j| <= w/2
    ffn_channels: int = 512  # hidden width of the position-wise feed-forward block
    ffn_kernel: int = 3  # conv FFN (FastSpeech): a kernel of 3 mixes neighbouring phonemes cheaply
    dropout: float = 0.1  # residual/FFN dropout while training; infer() runs in eval mode
    position: str = "sinusoidal"  # works at any length, so paragraphs longer than training ones encode
    pad_id: int = 0  # the symbol table reserves id 0 for padding

    def __post_init__(self) -> None:
        _check_types(self, "encoder")
        if self.n_symbols < 2:
            raise ParameterError(f"n_symbols must be >= 2 (padding + one symbol), found {self.n_symbols}")
        if self.d_model <= 0 or self.n_heads <= 0 or self.d_model % self.n_heads:
            raise ParameterError(
                f"d_model {self.d_model} must be a positive multiple of n_heads {self.n_heads}")
        if self.n_layers < 0:
            raise ParameterError(f"n_layers must be >= 0, found {self.n_layers}")
        if self.window < 2 or self.window % 2:
            raise ParameterError(f"window must be an even number >= 2 (two-sided), found {self.window}")
        if self.ffn_channels <= 0 or self.ffn_kernel <= 0 or self.ffn_kernel % 2 == 0:
            raise ParameterError(
                f"ffn_channels must be positive and ffn_kernel a positive odd number, "
                f"found {self.ffn_channels}, {self.ffn_kernel}")
        if not 0.0 <= self.dropout < 1.0:
            raise ParameterError(f"dropout must be in [0, 1), found {self.dropout}")
        if self.position not in POSITION_KINDS:
            raise ParameterError(f"position must be one of {POSITION_KINDS}, found {self.position!r}")
        if not 0 <= self.pad_id < self.n_symbols:
            raise ParameterError(f"pad_id must be in [0, {self.n_symbols}), found {self.pad_id}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EncoderConfig":
        """Strict inverse of :meth:`to_dict`; unknown fields raise :class:`ParameterError`."""
        return cls(**_check_fields(cls, d, "encoder"))


@dataclasses.dataclass(frozen=True)
class AcousticConfig:
    """Text -> log-mel model: encoder, peer-attention fusion, durations, frame decoder."""

    encoder: EncoderConfig = dataclasses.field(default_factory=EncoderConfig)
    speakers: tuple[str, ...] = ("en-us",)  # speaker table: id = index, name = espeak voice string
    speaker_dim: int = 64  # learned speaker embedding width (a peer and an input of the fusion)
    ref_channels: int = 128  # reference encoder width (convolutions over a reference clip's mel)
    ref_layers: int = 3  # k=3 conv layers: a ±3-frame view before the masked global average pool
    peer_width: int = 64  # common width of the peer vectors a_k (REFERENCES §4)
    prune_gate_threshold: float = 0.05  # prune(): drop an edge whose sigmoid gate is below this
    duration_channels: int = 256  # duration predictor: 2 x (conv k3 -> relu -> layernorm)
    duration_kernel: int = 3
    decoder_kind: str = "window"  # one of DECODER_KINDS
    decoder_layers: int = 4
    decoder_d_model: int = 192
    decoder_heads: int = 2
    decoder_window: int = 32  # frames (~370 ms) each side in total; phoneme-scale context
    decoder_stride: int = 16  # strided kind: l ~ sqrt(typical frames per sentence ~ 250)
    decoder_ffn_channels: int = 512
    decoder_ffn_kernel: int = 3
    dropout: float = 0.1  # duration predictor / decoder dropout while training
    max_infer_tokens: int = 4096  # longer inputs must go through stream_mel (bounded memory)
    max_frames_per_token: int = 200  # ~2.3 s: clamps a runaway duration prediction
    mel: MelConfig = dataclasses.field(default_factory=MelConfig)  # features the model predicts
    # True: each frame also gets the two pitch features (wavern.dsp.pitch_features: log2 f0 / 120 Hz,
    # periodicity) after its log-mel, from their own projection; a pitch vocoder (its long-term
    # predictor) needs them
    pitch: bool = False
    # True: the speaker stream also gets each utterance's espeak prosody settings (rate, pitch,
    # pitch range: PROSODY_DEFAULT is espeak-ng's own), which the corpus draws at random per
    # utterance: without them the model cannot know an utterance's pitch level and tempo (within
    # a voice they explain 85 % of the variance of its mean log f0 and 83 % of its phone rate) and
    # predicts their average: a flat pitch and a smoother mel. At inference the defaults.
    prosody: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.encoder, dict):
            object.__setattr__(self, "encoder", EncoderConfig.from_dict(self.encoder))
        if isinstance(self.mel, dict):
            object.__setattr__(self, "mel", MelConfig.from_dict(self.mel))
        if not isinstance(self.encoder, EncoderConfig):
            raise ParameterError(f"acoustic config 'encoder' must be a dict, found {self.encoder!r}")
        if not isinstance(self.mel, MelConfig):
            raise ParameterError(f"acoustic config 'mel' must be a dict, found {self.mel!r}")
        _check_types(self, "acoustic")
        if isinstance(self.speakers, list):
            object.__setattr__(self, "speakers", tuple(self.speakers))
        if not self.speakers or not all(isinstance(s, str) and s for s in self.speakers):
            raise ParameterError(f"speakers must be a non-empty tuple of voice names, found {self.speakers!r}")
        if len(set(self.speakers)) != len(self.speakers):
            raise ParameterError(f"speakers must be unique, found {self.speakers!r}")
        for name in ("speaker_dim", "ref_channels", "peer_width", "duration_channels", "decoder_d_model",
                     "decoder_heads", "decoder_ffn_channels", "decoder_stride", "max_infer_tokens",
                     "max_frames_per_token"):
            if getattr(self, name) <= 0:
                raise ParameterError(f"{name} must be positive, found {getattr(self, name)}")
        if self.max_frames_per_token > MAX_FRAMES_PER_TOKEN:  # a runaway duration's frames are held in memory
            raise ParameterError(f"max_frames_per_token must be at most {MAX_FRAMES_PER_TOKEN}, "
                                 f"found {self.max_frames_per_token}")
        if len(self.speakers) > MAX_SPEAKERS:
            raise ParameterError(f"at most {MAX_SPEAKERS} speakers, found {len(self.speakers)}")
        if self.ref_layers < 1 or self.decoder_layers < 0:
            raise ParameterError(
                f"ref_layers must be >= 1 and decoder_layers >= 0, found {self.ref_layers}, {self.decoder_layers}")
        for name in ("duration_kernel", "decoder_ffn_kernel"):
            k = getattr(self, name)
            if k <= 0 or k % 2 == 0:
                raise ParameterError(f"{name} must be a positive odd number, found {k}")
        if self.decoder_kind not in DECODER_KINDS:
            raise ParameterError(f"decoder_kind must be one of {DECODER_KINDS}, found {self.decoder_kind!r}")
        if self.decoder_d_model % self.decoder_heads:
            raise ParameterError(
                f"decoder_d_model {self.decoder_d_model} must be a multiple of decoder_heads {self.decoder_heads}")
        if self.decoder_kind == "strided" and self.decoder_heads % 2:
            raise ParameterError(
                f"a strided decoder splits heads between the local and the strided pattern; "
                f"decoder_heads must be even, found {self.decoder_heads}")
        if self.decoder_window < 2 or self.decoder_window % 2:
            raise ParameterError(f"decoder_window must be an even number >= 2, found {self.decoder_window}")
        if not 0.0 < self.prune_gate_threshold < 1.0:
            raise ParameterError(f"prune_gate_threshold must be in (0, 1), found {self.prune_gate_threshold}")
        if not 0.0 <= self.dropout < 1.0:
            raise ParameterError(f"dropout must be in [0, 1), found {self.dropout}")
        if not isinstance(self.pitch, bool):
            raise ParameterError(f"pitch must be true or false, found {self.pitch!r}")
        if not isinstance(self.prosody, bool):
            raise ParameterError(f"prosody must be true or false, found {self.prosody!r}")

    def approx_parameters(self) -> int:
        """About how many numbers the model holds (within a few tens of percent; tested against
        real models): the encoder and decoder layers, embeddings, duration predictor, reference
        encoder and fusions, from the config alone. Loading compares it with a file's tensors before
        building the model, so a config far bigger than its weights file is refused unallocated."""
        e = self.encoder

        def layer(d: int, ffn: int, k: int) -> int:  # attention (7 projections) + conv FFN + norms
            return 7 * (d * d + d) + ffn * d * k + ffn + d * ffn + d + 4 * d

        d, D = e.d_model, self.decoder_d_model
        enc = (e.n_symbols + 2) * d + e.n_layers * layer(d, e.ffn_channels, e.ffn_kernel) + 2 * d
        dec = self.decoder_layers * layer(D, self.decoder_ffn_channels, self.decoder_ffn_kernel) + 2 * D
        dur = self.duration_channels * (d + self.duration_channels) * self.duration_kernel + 6 * self.duration_channels
        ref = 3 * self.ref_channels * (self.n_mels + (self.ref_layers - 1) * self.ref_channels) + 4 * self.ref_channels
        fusion = 8 * self.peer_width * (d + D + self.speaker_dim + self.ref_channels + 8)
        rest = len(self.speakers) * self.speaker_dim + D * (d + self.n_out + 4)
        return int(enc + dec + dur + ref + fusion + rest)

    @property
    def n_mels(self) -> int:
        return self.mel.n_mels

    @property
    def hop_length(self) -> int:
        return self.mel.hop_length

    @property
    def n_out(self) -> int:
        """Channels of a predicted frame: the log-mel, then the two pitch features with ``pitch``."""
        return self.mel.n_mels + (2 if self.pitch else 0)

    def speaker_id(self, speaker: str | int) -> int:
        """Index of ``speaker`` (a voice name from :attr:`speakers`, or an index) in the table."""
        if isinstance(speaker, (int,)) and not isinstance(speaker, bool):
            if not 0 <= speaker < len(self.speakers):
                raise ParameterError(f"speaker index {speaker} is outside [0, {len(self.speakers)})")
            return int(speaker)
        try:
            return self.speakers.index(speaker)
        except ValueError:
            raise ParameterError(
                f"unknown speaker {speaker!r}; this model knows {list(self.speakers)}") from None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["encoder"] = self.encoder.to_dict()
        d["mel"] = self.mel.to_dict()
        d["speakers"] = list(self.speakers)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "AcousticConfig":
        """Strict inverse of :meth:`to_dict`; unknown fields raise :class:`ParameterError`."""
        d = _check_fields(cls, d, "acoustic")
        if "encoder" in d:
            d["encoder"] = EncoderConfig.from_dict(d["encoder"]) if isinstance(d["encoder"], dict) else d["encoder"]
        if "mel" in d:
            d["mel"] = MelConfig.from_dict(d["mel"]) if isinstance(d["mel"], dict) else d["mel"]
        if "speakers" in d and not isinstance(d["speakers"], (list, tuple)):
            raise ParameterError(f"acoustic config 'speakers' must be a list, found {type(d['speakers']).__name__}")
        return cls(**d)
