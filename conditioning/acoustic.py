"""The acoustic model: phoneme ids -> log-mel frames, with per-token durations.

Reading order (FastSpeech-style, non-autoregressive):

1. :class:`~wavern.conditioning.encoder.PhonemeEncoder` -> text stream (B, N, D).
2. Token fusion (:class:`~wavern.conditioning.fusion.PeerFusion`): the text stream, the speaker
   embedding and the reference-clip style vector, peer-attended, summed to (B, N, D).
3. :class:`DurationPredictor` -> ``log(1 + frames)`` per token.
4. Length regulator (:func:`regulate`): token ``i`` is repeated ``d_i`` frames; each frame also
   gets its relative position inside its token and the token's length.
5. Frame fusion (a second ``PeerFusion``) and :class:`FrameDecoder` (pre-norm layers whose
   mixer is window attention, strided attention or a convolution) -> 80-bin log-mel.

Durations are integer frames. Corpus durations come in samples; :func:`frames_from_samples`
turns them into frames by rounding the cumulative sample boundaries to the hop and pinning the
last boundary to the mel length, so the durations sum to exactly the number of mel frames.
Speed control divides durations by ``speed`` the same cumulative way (:func:`scale_durations`).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from wavern.conditioning.attention import LongformerSelfAttention, StridedSelfAttention
from wavern.conditioning.config import AcousticConfig
from wavern.conditioning.encoder import ConvMixer, PhonemeEncoder, PreNormLayer, global_mask_for, sinusoidal_positions
from wavern.conditioning.fusion import PeerFusion, ReferenceEncoder, masked_mean
from wavern.errors import ParameterError

__all__ = ["AcousticModel", "AcousticOutput", "AcousticLoss", "DurationPredictor", "FrameDecoder", "SentenceMel",
           "frames_from_samples", "scale_durations", "regulate", "stream_mel", "SPEED_LIMITS"]

log = logging.getLogger(__name__)

SPEED_LIMITS = (0.25, 4.0)  # beyond these espeak-trained durations stop sounding like speech


# ----------------------------------------------------------------------------- durations
def frames_from_samples(durations_samples, n_frames: int, *, hop: int) -> np.ndarray:
    """Per-token durations in samples -> integer frames summing to exactly ``n_frames``.

    Token boundaries ``b_i = cumsum(samples)`` become frame boundaries ``round(b_i / hop)``
    (frame t renders samples [t hop, (t + 1) hop)); the last boundary is set to ``n_frames``
    (= 1 + n_samples // hop for a centred STFT), which absorbs the extra centred frame.

    Args:
        durations_samples: (N,) non-negative integers.
        n_frames: mel length the durations must cover.
        hop: hop length in samples.

    Returns:
        (N,) int64 frames, non-negative, ``sum == n_frames``.
    """
    d = np.asarray(durations_samples, dtype=np.int64)
    if d.ndim != 1 or d.size == 0 or (d < 0).any():
        raise ParameterError(f"durations must be a non-empty 1-D array of non-negative samples, found {d!r}")
    bounds = np.floor(np.cumsum(d) / hop + 0.5).astype(np.int64)
    bounds = np.minimum(bounds, n_frames)
    bounds[-1] = n_frames
    return np.diff(bounds, prepend=0)


def scale_durations(durations: torch.Tensor, speed: float = 1.0) -> torch.Tensor:
    """Divide (possibly fractional) durations by ``speed`` and round cumulatively to frames.

    ``F_i = round(sum_{m <= i} d_m / speed)``, ``out_i = F_i - F_{i-1}``: the total is the
    rounded total (never drifting by one frame per token), and each output is >= 0.

    Args:
        durations: (..., N) float or int frames, >= 0.
        speed: > 0; bigger is faster.

    Returns:
        (..., N) int64 frames.
    """
    bounds = torch.floor(torch.cumsum(durations.to(torch.float64), dim=-1) / speed + 0.5).to(torch.int64)
    return torch.diff(bounds, dim=-1, prepend=torch.zeros_like(bounds[..., :1]))


class Regulated(NamedTuple):
    token_index: torch.Tensor  # (B, T) int64: the token each frame belongs to
    padding_mask: torch.Tensor  # (B, T) bool, True past the utterance's last frame
    features: torch.Tensor  # (B, T, 2): position inside the token in (0, 1), log(1 + token frames)


def regulate(durations: torch.Tensor, *, n_frames: int | None = None) -> Regulated:
    """The length regulator's index: which token every output frame repeats.

    Args:
        durations: (B, N) int64 frames (padding tokens must have 0).
        n_frames: output length T (default: the longest total).

    Returns:
        :class:`Regulated`; gather ``x[b, token_index[b, t]]`` to expand token features.
    """
    d = durations.to(torch.int64)
    ends = torch.cumsum(d, dim=1)  # (B, N)
    totals = ends[:, -1]
    t_len = int(totals.max()) if n_frames is None else int(n_frames)
    t = torch.arange(t_len, device=d.device).unsqueeze(0).expand(d.shape[0], -1).contiguous()  # (B, T)
    idx = torch.searchsorted(ends, t, right=True).clamp_max(d.shape[1] - 1)  # first token ending after t
    pad = t >= totals.unsqueeze(1)
    starts = ends - d
    dur = d.gather(1, idx).clamp_min(1).to(torch.float32)
    rel = ((t - starts.gather(1, idx)).to(torch.float32) + 0.5) / dur
    feats = torch.stack([rel, torch.log1p(dur)], dim=-1).masked_fill(pad.unsqueeze(-1), 0.0)
    return Regulated(idx, pad, feats)


# ----------------------------------------------------------------------------- modules
class DurationPredictor(nn.Module):
    """FastSpeech duration predictor: 2 x (conv k -> ReLU -> LayerNorm -> dropout) -> linear.

    Predicts ``log(1 + frames)`` per token: (B, N, D) -> (B, N).
    """

    def __init__(self, d_model: int, channels: int, kernel: int, dropout: float) -> None:
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv1d(d_model, channels, kernel, padding=kernel // 2),
                                    nn.Conv1d(channels, channels, kernel, padding=kernel // 2)])
        self.norms = nn.ModuleList([nn.LayerNorm(channels), nn.LayerNorm(channels)])
        self.dropout = nn.Dropout(dropout)
        self.proj = nn.Linear(channels, 1)
        with torch.no_grad():  # start near a typical phoneme (~6 frames = 70 ms), not at 0 frames
            self.proj.bias.fill_(math.log1p(6.0))

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        for conv, norm in zip(self.convs, self.norms):
            if padding_mask is not None:
                x = x.masked_fill(padding_mask.unsqueeze(-1), 0.0)
            x = self.dropout(norm(torch.relu(conv(x.transpose(1, 2)).transpose(1, 2))))
        out = self.proj(x).squeeze(-1)  # (B, N)
        return out if padding_mask is None else out.masked_fill(padding_mask, 0.0)


class _StridedMixer(nn.Module):
    """Non-causal strided attention behind the mixer call convention (no global tokens)."""

    def __init__(self, d_model: int, n_heads: int, stride: int) -> None:
        super().__init__()
        self.attn = StridedSelfAttention(d_model, n_heads, stride, causal=False)

    def forward(self, x, *, global_mask=None, padding_mask=None):
        return self.attn(x, padding_mask=padding_mask)


class FrameDecoder(nn.Module):
    """Frame decoder: pre-norm layers over (B, T, D) frames, then LayerNorm."""

    def __init__(self, config: AcousticConfig) -> None:
        super().__init__()
        d = config.decoder_d_model

        def mixer() -> nn.Module:
            if config.decoder_kind == "window":
                return LongformerSelfAttention(d, config.decoder_heads, config.decoder_window)
            if config.decoder_kind == "strided":
                return _StridedMixer(d, config.decoder_heads, config.decoder_stride)
            return ConvMixer(d)

        self.layers = nn.ModuleList(
            PreNormLayer(mixer(), d, config.decoder_ffn_channels, config.decoder_ffn_kernel, config.dropout)
            for _ in range(config.decoder_layers))
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor, *, global_mask: torch.Tensor | None,
                padding_mask: torch.Tensor | None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, global_mask=global_mask, padding_mask=padding_mask)
        return self.norm(x)


class AcousticOutput(NamedTuple):
    mel: torch.Tensor  # (B, T, n_mels) log-mel; padding frames 0
    log_durations: torch.Tensor  # (B, N) predicted log(1 + frames); padding 0
    frame_padding_mask: torch.Tensor  # (B, T) bool


class AcousticLoss(NamedTuple):
    total: torch.Tensor  # mel_l1 + duration_weight * duration_mse
    mel_l1: torch.Tensor  # mean |log-mel error| over real frames and bins (natural-log units)
    duration_mse: torch.Tensor  # mean squared error of log(1 + frames) over real tokens


class SentenceMel(NamedTuple):
    """One sentence of a streamed paragraph (see :func:`stream_mel`)."""

    sentence: int  # the sentence's index (the front end's ``sentence_of`` value)
    token_start: int  # index of its first token in the paragraph
    mel: np.ndarray  # (T, n_mels) float32
    durations: np.ndarray  # (n_tokens,) int64 frames of its tokens; sum == T


# ----------------------------------------------------------------------------- the model
class AcousticModel(nn.Module):
    """Text -> log-mel with peer-attention fusion of a speaker/style stream.

    Args:
        config: the model's shape; the only constructor argument.
    """

    def __init__(self, config: AcousticConfig) -> None:
        super().__init__()
        self.config = config
        enc, d_dec = config.encoder, config.decoder_d_model
        d = enc.d_model
        self.encoder = PhonemeEncoder(enc)
        self.speaker_embed = nn.Embedding(len(config.speakers), config.speaker_dim)
        self.reference = ReferenceEncoder(config.n_mels, config.ref_channels, config.ref_layers)
        self.token_fusion = PeerFusion(
            (d, config.speaker_dim, config.ref_channels), (d, config.speaker_dim, config.ref_channels), d,
            peer_width=config.peer_width, gate_threshold=config.prune_gate_threshold,
            names=("text", "speaker", "reference"), peer_names=("text", "speaker", "reference"))
        self.duration = DurationPredictor(d, config.duration_channels, config.duration_kernel, config.dropout)
        self.frame_in = nn.Linear(d, d_dec)
        self.frame_pos = nn.Linear(2, d_dec)  # position inside the token, token length
        self.frame_fusion = PeerFusion(
            (d_dec, config.speaker_dim, config.ref_channels), (d_dec, d, config.speaker_dim, config.ref_channels),
            d_dec, peer_width=config.peer_width, gate_threshold=config.prune_gate_threshold,
            names=("frames", "speaker", "reference"), peer_names=("frames", "text", "speaker", "reference"))
        self.decoder = FrameDecoder(config)
        self.mel_out = nn.Linear(d_dec, config.n_mels)
        # Per-bin log-mel statistics of the training corpus (the trainer sets them); the network
        # predicts normalised mel, so its output layer starts at the corpus mean.
        self.register_buffer("mel_mean", torch.zeros(config.n_mels))
        self.register_buffer("mel_std", torch.ones(config.n_mels))

    # -- pieces --------------------------------------------------------------
    def _style(self, speaker: torch.Tensor, batch: int, reference: torch.Tensor | None,
               reference_padding_mask: torch.Tensor | None, reference_present: torch.Tensor | None):
        spk = self.speaker_embed(speaker)  # (B, S)
        if reference is not None:
            reference = (reference - self.mel_mean) / self.mel_std
        ref = self.reference(reference, reference_padding_mask, batch_size=batch, present=reference_present)  # (B, R)
        return spk, ref

    def encode(self, ids: torch.Tensor, is_global: torch.Tensor, *, speaker: torch.Tensor,
               padding_mask: torch.Tensor | None = None, reference: torch.Tensor | None = None,
               reference_padding_mask: torch.Tensor | None = None,
               reference_present: torch.Tensor | None = None):
        """Encoder + token fusion + duration prediction.

        Returns:
            (tokens (B, N, D), log_durations (B, N), context) where context carries the style
            vectors and the pooled text for the decoder.
        """
        text = self.encoder(ids, is_global, padding_mask)  # (B, N, D)
        spk, ref = self._style(speaker, ids.shape[0], reference, reference_padding_mask, reference_present)
        text_pool = masked_mean(text, padding_mask)  # (B, D)
        tokens = self.token_fusion([text, spk.unsqueeze(1), ref.unsqueeze(1)], [text_pool, spk, ref])
        if padding_mask is not None:
            tokens = tokens.masked_fill(padding_mask.unsqueeze(-1), 0.0)
        log_d = self.duration(tokens, padding_mask)
        glob = global_mask_for(is_global, padding_mask)
        return tokens, log_d, (spk, ref, text_pool, glob)

    def decode(self, tokens: torch.Tensor, durations: torch.Tensor, context) -> tuple[torch.Tensor, torch.Tensor]:
        """Length regulator + frame fusion + decoder: -> (mel (B, T, n_mels), frame padding (B, T))."""
        spk, ref, text_pool, glob = context
        reg = regulate(durations)
        if reg.padding_mask.shape[1] == 0:
            raise ParameterError("the durations add up to 0 frames; nothing to decode")
        idx = reg.token_index
        x = tokens.gather(1, idx.unsqueeze(-1).expand(-1, -1, tokens.shape[-1]))  # (B, T, D)
        t_len, d_dec = idx.shape[1], self.config.decoder_d_model
        x = self.frame_in(x) + self.frame_pos(reg.features)
        x = x + sinusoidal_positions(t_len, d_dec, device=x.device, dtype=x.dtype).unsqueeze(0)
        fpad = reg.padding_mask
        x = x.masked_fill(fpad.unsqueeze(-1), 0.0)
        x = self.frame_fusion([x, spk.unsqueeze(1), ref.unsqueeze(1)], [masked_mean(x, fpad), text_pool, spk, ref])
        x = x.masked_fill(fpad.unsqueeze(-1), 0.0)
        # The first frame of every global token is a global frame: sentence starts and pauses
        # carry prosody across the whole window, as in the encoder.
        first = F.pad(reg.token_index[:, 1:] != reg.token_index[:, :-1], (1, 0), value=True)
        frame_glob = first & glob.gather(1, idx) & ~fpad
        h = self.decoder(x, global_mask=frame_glob, padding_mask=fpad)
        mel = self.mel_out(h) * self.mel_std + self.mel_mean
        return mel.masked_fill(fpad.unsqueeze(-1), 0.0), fpad

    # -- training form -------------------------------------------------------
    def forward(self, ids: torch.Tensor, is_global: torch.Tensor, durations: torch.Tensor, *,
                speaker: torch.Tensor, padding_mask: torch.Tensor | None = None,
                reference: torch.Tensor | None = None, reference_padding_mask: torch.Tensor | None = None,
                reference_present: torch.Tensor | None = None) -> AcousticOutput:
        """Teacher-forced pass with known durations.

        Args:
            ids: (B, N) int64 phoneme ids; is_global: (B, N) bool.
            durations: (B, N) int64 frames (0 at padding).
            speaker: (B,) int64 speaker ids.
            padding_mask: (B, N) bool, True at padding tokens.
            reference: (B, T_ref, n_mels) log-mel of reference clips, or None.
            reference_padding_mask: (B, T_ref) bool.
            reference_present: (B,) bool; False rows use the "no reference" style.

        Returns:
            :class:`AcousticOutput` with T = max total duration.
        """
        if padding_mask is not None:
            durations = durations.masked_fill(padding_mask, 0)
        tokens, log_d, ctx = self.encode(ids, is_global, speaker=speaker, padding_mask=padding_mask,
                                         reference=reference, reference_padding_mask=reference_padding_mask,
                                         reference_present=reference_present)
        mel, fpad = self.decode(tokens, durations, ctx)
        return AcousticOutput(mel, log_d, fpad)

    @staticmethod
    def loss(out: AcousticOutput, mel: torch.Tensor, durations: torch.Tensor, *,
             padding_mask: torch.Tensor | None = None, duration_weight: float = 1.0) -> AcousticLoss:
        """Masked mel L1 plus duration MSE in ``log(1 + frames)``.

        Args:
            out: the forward pass.
            mel: (B, T, n_mels) target log-mel (T as in ``out``; padding frames ignored).
            durations: (B, N) target frames.
            padding_mask: (B, N) bool token padding.
        """
        keep = (~out.frame_padding_mask).unsqueeze(-1).to(mel.dtype)  # (B, T, 1)
        n_mels = mel.shape[-1]
        mel_l1 = ((out.mel - mel).abs() * keep).sum() / (keep.sum() * n_mels).clamp_min(1.0)
        target = torch.log1p(durations.to(out.log_durations.dtype))
        tok = torch.ones_like(target) if padding_mask is None else (~padding_mask).to(target.dtype)
        dur_mse = (((out.log_durations - target) ** 2) * tok).sum() / tok.sum().clamp_min(1.0)
        return AcousticLoss(mel_l1 + duration_weight * dur_mse, mel_l1, dur_mse)

    # -- generation ----------------------------------------------------------
    def predict_durations(self, log_durations: torch.Tensor, *, speed: float = 1.0) -> torch.Tensor:
        """Predicted ``log(1 + frames)`` -> integer frames at ``speed`` (>= 1 frame in total)."""
        d = torch.expm1(log_durations).clamp(0.0, float(self.config.max_frames_per_token))
        frames = scale_durations(d, speed)
        empty = frames.sum(dim=-1) == 0
        if bool(empty.any()):  # e.g. a lone punctuation mark predicted as 0 frames: still 1 frame
            longest = torch.argmax(d, dim=-1)
            frames[empty, longest[empty]] = 1
        return frames

    @torch.no_grad()
    def infer(self, ids, is_global, *, speaker: str | int, speed: float = 1.0,
              reference: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Synthesise one sequence (a sentence or a few).

        Args:
            ids: (N,) int phoneme ids, 1 <= N <= ``config.max_infer_tokens``.
            is_global: (N,) bool global tokens (the front end's ``Utterance.is_global``).
            speaker: a voice name from ``config.speakers`` or its index.
            speed: duration divisor in ``SPEED_LIMITS``; bigger is faster.
            reference: optional (T_ref, n_mels) log-mel of a reference clip for the style.

        Returns:
            (mel (T, n_mels) float32, durations (N,) int64 frames with ``sum == T``).
        """
        ids_t, glob_t = self._check_sequence(ids, is_global)
        if not (SPEED_LIMITS[0] <= float(speed) <= SPEED_LIMITS[1]):
            raise ParameterError(f"speed {speed} is outside [{SPEED_LIMITS[0]}, {SPEED_LIMITS[1]}]")
        spk = torch.tensor([self.config.speaker_id(speaker)])
        ref = None
        if reference is not None:
            ref = torch.as_tensor(np.asarray(reference, np.float32))
            if ref.ndim != 2 or ref.shape[1] != self.config.n_mels or ref.shape[0] == 0:
                raise ParameterError(
                    f"reference mel must have shape (frames >= 1, {self.config.n_mels}), found {tuple(ref.shape)}")
            ref = ref.unsqueeze(0)
        device = self.mel_mean.device
        with _eval_mode(self):
            tokens, log_d, ctx = self.encode(ids_t.to(device), glob_t.to(device), speaker=spk.to(device),
                                             reference=None if ref is None else ref.to(device))
            frames = self.predict_durations(log_d, speed=float(speed))
            mel, _ = self.decode(tokens, frames, ctx)
        return mel[0].float().cpu().numpy(), frames[0].cpu().numpy().astype(np.int64)

    def _check_sequence(self, ids, is_global) -> tuple[torch.Tensor, torch.Tensor]:
        ids_a = np.asarray(ids)
        glob_a = np.asarray(is_global)
        if ids_a.ndim != 1 or glob_a.shape != ids_a.shape:
            raise ParameterError(f"ids and is_global must be 1-D of equal length, found shapes "
                                 f"{ids_a.shape} and {glob_a.shape}")
        n = ids_a.shape[0]
        if n == 0:
            raise ParameterError("nothing to say: the phoneme sequence is empty")
        if n > self.config.max_infer_tokens:
            raise ParameterError(f"{n} tokens exceed max_infer_tokens {self.config.max_infer_tokens}; "
                                 f"use stream_mel to synthesise long text a few sentences at a time")
        if not np.issubdtype(ids_a.dtype, np.integer):
            raise ParameterError(f"ids must be integers, found dtype {ids_a.dtype}")
        return (torch.as_tensor(ids_a.astype(np.int64)).unsqueeze(0),
                torch.as_tensor(glob_a.astype(bool)).unsqueeze(0))

    # -- fusion --------------------------------------------------------------
    def prune_fusion(self, *, gate_threshold: float | None = None) -> dict:
        """Prune both peer fusions (argmax peer, weak edges dropped); returns what was kept."""
        return {"token_fusion": self.token_fusion.prune(gate_threshold=gate_threshold),
                "frame_fusion": self.frame_fusion.prune(gate_threshold=gate_threshold)}

    def connection_tables(self) -> dict[str, list[dict]]:
        return {"token_fusion": self.token_fusion.connection_table(),
                "frame_fusion": self.frame_fusion.connection_table()}


@contextlib.contextmanager
def _eval_mode(module: nn.Module):
    was = module.training
    module.eval()
    try:
        yield
    finally:
        module.train(was)


# ----------------------------------------------------------------------------- streaming
def stream_mel(model: AcousticModel, ids, is_global, sentence_of, *, speaker: str | int, speed: float = 1.0,
               reference: np.ndarray | None = None, context_sentences: int = 1) -> Iterator[SentenceMel]:
    """Yield a paragraph's mel one sentence at a time, with bounded memory.

    Sentence ``s`` is synthesised inside a window of sentences ``[s - c, s + c]`` (c =
    ``context_sentences``) so that the encoder's global tokens and the decoder see its
    neighbours; only sentence ``s``'s frames are kept. Memory is bounded by the window, not the
    paragraph; compute is ``(2c + 1)`` times a single pass (c = 0: every sentence alone).

    Args:
        ids, is_global: (N,) the paragraph's tokens.
        sentence_of: (N,) non-decreasing sentence index of every token.
        speaker, speed, reference: as in :meth:`AcousticModel.infer`.
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
    for s in range(n_sent):
        lo, hi = max(0, s - context_sentences), min(n_sent - 1, s + context_sentences)
        w0, w1 = starts[lo], ends[hi]
        glob = glob_a[w0:w1].copy()
        glob[starts[s] - w0] = True  # the sentence start anchors its own window
        mel, frames = model.infer(ids_a[w0:w1], glob, speaker=speaker, speed=speed, reference=reference)
        bounds = np.concatenate([[0], np.cumsum(frames)])
        t0, t1 = bounds[starts[s] - w0], bounds[ends[s] - w0]
        yield SentenceMel(int(sent[starts[s]]), int(starts[s]), mel[t0:t1],
                          frames[starts[s] - w0:ends[s] - w0])
