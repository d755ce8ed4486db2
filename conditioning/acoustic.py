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
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from wavern.conditioning.attention import LongformerSelfAttention, StridedSelfAttention
from wavern.conditioning.config import PROSODY_DEFAULT, PROSODY_SCALE, SPEED_LIMITS, AcousticConfig  # noqa: F401
from wavern.conditioning.encoder import ConvMixer, PhonemeEncoder, PreNormLayer, global_mask_for, sinusoidal_positions
from wavern.conditioning.fusion import PeerFusion, ReferenceEncoder, masked_mean
from wavern.conditioning.stream import FIRST_DECODE_FRAMES, LazyMel, SentenceMel, check_request, stream_mel  # noqa: F401
from wavern.errors import ParameterError

__all__ = ["AcousticModel", "AcousticOutput", "AcousticLoss", "DurationPredictor", "FrameDecoder", "LazyMel",
           "SentenceMel", "frames_from_samples", "scale_durations", "regulate", "stream_mel", "SPEED_LIMITS"]

log = logging.getLogger(__name__)


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
        x = self.prefix(x, global_mask=global_mask, padding_mask=padding_mask)
        if len(self.layers):
            x = self.layers[-1](x, global_mask=global_mask, padding_mask=padding_mask)
        return self.norm(x)

    def prefix(self, x: torch.Tensor, *, global_mask: torch.Tensor | None,
               padding_mask: torch.Tensor | None) -> torch.Tensor:
        """All layers but the last: (B, T, D) -> (B, T, D), the last layer's input."""
        for layer in self.layers[:-1]:
            x = layer(x, global_mask=global_mask, padding_mask=padding_mask)
        return x

    def last_rows(self, x: torch.Tensor, is_global: torch.Tensor, start: int, stop: int,
                  cache: dict) -> torch.Tensor:
        """Rows ``[start, stop)`` of the output from the last layer's input, computing only what they need.

        For the window decoder (and none), one sequence without padding. Output row ``t`` of the
        last layer reads the attention rows ``t - k .. t + k`` (its FFN, kernel ``2 k + 1``); a local
        attention row reads the keys within ``window / 2`` and every global frame; a global row
        reads all keys. So the layer runs on the frames ``[start - k - w, stop + k + w)`` plus the
        global frames outside them (global keys are attended once wherever they sit in the
        sequence), and the global rows among ``[start - k, stop + k)`` are recomputed over all
        frames (:func:`_global_rows`). Equal to ``forward`` to float rounding.

        Args:
            x: (1, T, D) the last layer's input (:meth:`prefix`).
            is_global: (T,) bool global frames.
            start, stop: ``0 <= start < stop <= T``.
            cache: a dict kept by the caller across calls on the same ``x``.

        Returns:
            (1, stop - start, D) rows of ``forward(x)``.
        """
        if not len(self.layers):
            return self.norm(x[:, start:stop])
        layer = self.layers[-1]
        attn = layer.mixer
        if not isinstance(attn, LongformerSelfAttention):
            raise ParameterError(f"rows on demand need the window decoder, found {type(attn).__name__}")
        n = x.shape[1]
        half, k = attn.window // 2, layer.ffn.conv1.kernel_size[0] // 2
        p, q = max(0, start - k), min(n, stop + k)  # the attention rows the FFN reads
        r0, r1 = max(0, p - half), min(n, q + half)  # their band keys
        if "global_pos" not in cache:
            cache["global_pos"] = torch.nonzero(is_global).squeeze(1)
        gpos = cache["global_pos"]
        rows = torch.cat([torch.arange(r0, r1), gpos[(gpos < r0) | (gpos >= r1)]])
        xs = x[:, rows]  # (1, S, D): the slice, then the global frames outside it
        att = attn(layer.norm1(xs), global_mask=is_global[rows].unsqueeze(0), padding_mask=None)[:, p - r0:q - r0]
        inside = gpos[(gpos >= p) & (gpos < q)]
        if inside.numel():  # these rows attended over the slice only: redo them over all frames
            if "normed" not in cache:
                cache["normed"] = layer.norm1(x)
            att = att.clone()
            att[0, inside - p] = _global_rows(attn, cache["normed"], inside)[0]
        y = x[:, p:q] + att
        y = y + layer.ffn(layer.norm2(y))
        return self.norm(y[:, start - p:stop - p])


def _global_rows(attn: LongformerSelfAttention, xn: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Longformer's global rows at ``pos`` over every frame of ``xn``, after the output projection.

    ``softmax(q_g k_g^T / sqrt(d)) v_g`` per head (REFERENCES §2), with ``k_g`` and ``v_g``
    never formed for all frames: ``q . (W_k x + b_k) = (W_k^T q) . x + const`` (the constant
    drops out of the softmax) and ``sum_n p_n (W_v x_n + b_v) = W_v (sum_n p_n x_n) + b_v``.

    Args:
        attn: the layer's attention module.
        xn: (1, T, D) its (normalised) input; no padding.
        pos: (G,) int64 global positions.

    Returns:
        (1, G, D).
    """
    dim = xn.shape[-1]
    h = attn.n_heads
    d, g = dim // h, pos.numel()
    q = attn.query_global(xn[0, pos]).view(g, h, d).transpose(0, 1) * d**-0.5  # (h, G, d)
    qk = q @ attn.key_global.weight.view(h, d, dim)  # (h, G, D)
    probs = torch.softmax(qk @ xn[0].T, dim=-1)  # (h, G, T)
    rows = (probs @ xn[0]) @ attn.value_global.weight.view(h, d, dim).transpose(1, 2)  # (h, G, d)
    rows = rows + attn.value_global.bias.view(h, 1, d)
    return attn.out(rows.transpose(0, 1).reshape(1, g, dim))


class AcousticOutput(NamedTuple):
    mel: torch.Tensor  # (B, T, n_out) log-mel (then the pitch features with config.pitch); padding frames 0
    log_durations: torch.Tensor  # (B, N) predicted log(1 + frames); padding 0
    frame_padding_mask: torch.Tensor  # (B, T) bool


class AcousticLoss(NamedTuple):
    total: torch.Tensor  # mel_l1 + duration_weight * duration_mse (+ pitch_l1)
    mel_l1: torch.Tensor  # mean |log-mel error| over real frames and bins (natural-log units)
    duration_mse: torch.Tensor  # mean squared error of log(1 + frames) over real tokens
    pitch_l1: torch.Tensor | float = 0.0  # mean |pitch feature error| over real frames (with pitch targets)


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
        self.pitch_out = nn.Linear(d_dec, 2) if config.pitch else None  # the pitch features (config.pitch)
        # config.prosody: the utterance's espeak rate / pitch / range, added to the speaker vector;
        # zero at first, so a model without it goes on as the same function
        self.prosody_in = nn.Linear(3, config.speaker_dim) if config.prosody else None
        if self.prosody_in is not None:
            nn.init.zeros_(self.prosody_in.weight)
            nn.init.zeros_(self.prosody_in.bias)
        # Per-bin log-mel statistics of the training corpus (the trainer sets them); the network
        # predicts normalised mel, so its output layer starts at the corpus mean.
        self.register_buffer("mel_mean", torch.zeros(config.n_mels))
        self.register_buffer("mel_std", torch.ones(config.n_mels))

    # -- pieces --------------------------------------------------------------
    def _style(self, speaker: torch.Tensor, batch: int, reference: torch.Tensor | None,
               reference_padding_mask: torch.Tensor | None, reference_present: torch.Tensor | None,
               prosody: torch.Tensor | None = None):
        spk = self.speaker_embed(speaker)  # (B, S)
        if self.prosody_in is not None:  # (B, 3) rate, pitch, range; None: espeak-ng's defaults
            if prosody is None:
                prosody = torch.tensor(PROSODY_DEFAULT, device=spk.device).expand(batch, 3)
            if prosody.shape != (batch, 3):
                raise ParameterError(f"prosody must be (batch, 3) rate, pitch, range; found {tuple(prosody.shape)}")
            units = (prosody.to(spk.dtype) - torch.tensor(PROSODY_DEFAULT, device=spk.device)) / \
                torch.tensor(PROSODY_SCALE, device=spk.device)
            spk = spk + self.prosody_in(units)
        if reference is not None:
            reference = (reference - self.mel_mean) / self.mel_std
        ref = self.reference(reference, reference_padding_mask, batch_size=batch, present=reference_present)  # (B, R)
        return spk, ref

    def encode(self, ids: torch.Tensor, is_global: torch.Tensor, *, speaker: torch.Tensor,
               padding_mask: torch.Tensor | None = None, reference: torch.Tensor | None = None,
               reference_padding_mask: torch.Tensor | None = None,
               reference_present: torch.Tensor | None = None, prosody: torch.Tensor | None = None):
        """Encoder + token fusion + duration prediction.

        Returns:
            (tokens (B, N, D), log_durations (B, N), context) where context carries the style
            vectors and the pooled text for the decoder.
        """
        text = self.encoder(ids, is_global, padding_mask)  # (B, N, D)
        spk, ref = self._style(speaker, ids.shape[0], reference, reference_padding_mask, reference_present, prosody)
        text_pool = masked_mean(text, padding_mask)  # (B, D)
        tokens = self.token_fusion([text, spk.unsqueeze(1), ref.unsqueeze(1)], [text_pool, spk, ref])
        if padding_mask is not None:
            tokens = tokens.masked_fill(padding_mask.unsqueeze(-1), 0.0)
        log_d = self.duration(tokens, padding_mask)
        glob = global_mask_for(is_global, padding_mask)
        return tokens, log_d, (spk, ref, text_pool, glob)

    def decode(self, tokens: torch.Tensor, durations: torch.Tensor, context) -> tuple[torch.Tensor, torch.Tensor]:
        """Length regulator + frame fusion + decoder: -> (mel (B, T, n_mels), frame padding (B, T))."""
        x, frame_glob, fpad = self._frames(tokens, durations, context)
        h = self.decoder(x, global_mask=frame_glob, padding_mask=fpad)
        return self._project(h).masked_fill(fpad.unsqueeze(-1), 0.0), fpad

    def _project(self, h: torch.Tensor) -> torch.Tensor:
        """Decoder states (B, T, D) -> frames (B, T, n_out): the log-mel, then the pitch features."""
        mel = self.mel_out(h) * self.mel_std + self.mel_mean
        return mel if self.pitch_out is None else torch.cat([mel, self.pitch_out(h)], dim=-1)

    def _frames(self, tokens: torch.Tensor, durations: torch.Tensor, context):
        """Length regulator + frame fusion: the decoder's input (B, T, D), global frames, padding (B, T)."""
        spk, ref, text_pool, glob = context
        reg = regulate(durations)
        if reg.padding_mask.shape[1] == 0:
            raise ParameterError("the durations add up to 0 frames; nothing to decode")
        idx = reg.token_index
        x = tokens.gather(1, idx.unsqueeze(-1).expand(-1, -1, tokens.shape[-1]))  # (B, T, D)
        t_len, d_dec = idx.shape[1], self.config.decoder_d_model
        x = self.frame_in(x) + self.frame_pos(reg.features)
        x = x + _positions(t_len, d_dec, device=x.device, dtype=x.dtype).unsqueeze(0)
        fpad = reg.padding_mask
        x = x.masked_fill(fpad.unsqueeze(-1), 0.0)
        x = self.frame_fusion([x, spk.unsqueeze(1), ref.unsqueeze(1)], [masked_mean(x, fpad), text_pool, spk, ref])
        x = x.masked_fill(fpad.unsqueeze(-1), 0.0)
        # The first frame of every global token is a global frame: sentence starts and pauses
        # carry prosody across the whole window, as in the encoder.
        first = F.pad(reg.token_index[:, 1:] != reg.token_index[:, :-1], (1, 0), value=True)
        frame_glob = first & glob.gather(1, idx) & ~fpad
        return x, frame_glob, fpad

    # -- training form -------------------------------------------------------
    def forward(self, ids: torch.Tensor, is_global: torch.Tensor, durations: torch.Tensor, *,
                speaker: torch.Tensor, padding_mask: torch.Tensor | None = None,
                reference: torch.Tensor | None = None, reference_padding_mask: torch.Tensor | None = None,
                reference_present: torch.Tensor | None = None, prosody: torch.Tensor | None = None) -> AcousticOutput:
        """Teacher-forced pass with known durations.

        Args:
            ids: (B, N) int64 phoneme ids; is_global: (B, N) bool.
            durations: (B, N) int64 frames (0 at padding).
            speaker: (B,) int64 speaker ids.
            padding_mask: (B, N) bool, True at padding tokens.
            reference: (B, T_ref, n_mels) log-mel of reference clips, or None.
            reference_padding_mask: (B, T_ref) bool.
            reference_present: (B,) bool; False rows use the "no reference" style.
            prosody: (B, 3) float espeak rate, pitch, pitch range of each utterance (a
                ``config.prosody`` model; None: :data:`PROSODY_DEFAULT`).

        Returns:
            :class:`AcousticOutput` with T = max total duration.
        """
        if padding_mask is not None:
            durations = durations.masked_fill(padding_mask, 0)
        tokens, log_d, ctx = self.encode(ids, is_global, speaker=speaker, padding_mask=padding_mask,
                                         reference=reference, reference_padding_mask=reference_padding_mask,
                                         reference_present=reference_present, prosody=prosody)
        mel, fpad = self.decode(tokens, durations, ctx)
        return AcousticOutput(mel, log_d, fpad)

    @staticmethod
    def loss(out: AcousticOutput, mel: torch.Tensor, durations: torch.Tensor, *,
             padding_mask: torch.Tensor | None = None, duration_weight: float = 1.0,
             n_pitch: int = 0, pitch_weight: float = 1.0) -> AcousticLoss:
        """Masked mel L1 plus duration MSE in ``log(1 + frames)`` (plus the pitch features' L1).

        Args:
            out: the forward pass.
            mel: (B, T, n_out) target log-mel (T as in ``out``; padding frames ignored); with
                ``n_pitch`` its last ``n_pitch`` channels are pitch features, whose mean |error|
                is ``pitch_l1`` (added to the total with ``pitch_weight``), not part of ``mel_l1``.
            durations: (B, N) target frames.
            padding_mask: (B, N) bool token padding.
        """
        keep = (~out.frame_padding_mask).unsqueeze(-1).to(mel.dtype)  # (B, T, 1)
        n_mels = mel.shape[-1] - n_pitch
        err = (out.mel - mel).abs() * keep
        mel_l1 = err[..., :n_mels].sum() / (keep.sum() * n_mels).clamp_min(1.0)
        target = torch.log1p(durations.to(out.log_durations.dtype))
        tok = torch.ones_like(target) if padding_mask is None else (~padding_mask).to(target.dtype)
        dur_mse = (((out.log_durations - target) ** 2) * tok).sum() / tok.sum().clamp_min(1.0)
        if not n_pitch:
            return AcousticLoss(mel_l1 + duration_weight * dur_mse, mel_l1, dur_mse)
        pitch_l1 = err[..., n_mels:].sum() / (keep.sum() * n_pitch).clamp_min(1.0)
        return AcousticLoss(mel_l1 + duration_weight * dur_mse + pitch_weight * pitch_l1, mel_l1, dur_mse, pitch_l1)

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

    def infer(self, ids, is_global, *, speaker: str | int, speed: float = 1.0,
              reference: np.ndarray | None = None, prosody=None) -> tuple[np.ndarray, np.ndarray]:
        """Synthesise one sequence (a sentence or a few): :meth:`infer_lazy`, decoded at once.

        Returns:
            (mel (T, n_mels) float32, durations (N,) int64 frames with ``sum == T``).
        """
        lazy, frames = self.infer_lazy(ids, is_global, speaker=speaker, speed=speed, reference=reference,
                                       prosody=prosody)
        return lazy.full().copy(), frames

    @torch.inference_mode()  # as no_grad, ~4 % faster here (no version counters or view tracking)
    def infer_lazy(self, ids, is_global, *, speaker: str | int, speed: float = 1.0,
                   reference: np.ndarray | None = None, prosody=None) -> tuple[LazyMel, np.ndarray]:
        """Synthesise one sequence up to the last decoder layer; its mel rows come on demand.

        Args:
            ids: (N,) int phoneme ids, 1 <= N <= ``config.max_infer_tokens``.
            is_global: (N,) bool global tokens (the front end's ``Utterance.is_global``).
            speaker: a voice name from ``config.speakers`` or its index.
            speed: duration divisor in ``SPEED_LIMITS``; bigger is faster.
            reference: optional (T_ref, n_mels) log-mel of a reference clip for the style.
            prosody: optional (rate, pitch, pitch range) in espeak-ng's units within
                ``PROSODY_LIMITS``, for a ``config.prosody`` model (None: ``PROSODY_DEFAULT``).
                A model without the input accepts only the default.

        Encoder, durations and every decoder layer but the last run now (a window decoder's
        global frames see the whole sequence, so those layers need all frames); the last layer
        runs for the rows a caller asks, :class:`LazyMel`. Other decoder kinds decode at once.

        Returns:
            (:class:`LazyMel` of T frames, durations (N,) int64 frames with ``sum == T``).
        """
        ids_a, glob_a, ref_a, pros_v = check_request(self.config, ids, is_global, speed=speed, reference=reference,
                                                     prosody=prosody)
        ids_t, glob_t = torch.from_numpy(ids_a).unsqueeze(0), torch.from_numpy(glob_a).unsqueeze(0)
        spk = torch.tensor([self.config.speaker_id(speaker)])
        pros = None if pros_v is None else torch.tensor([pros_v], dtype=torch.float32)
        ref = None if ref_a is None else torch.tensor(ref_a).unsqueeze(0)
        device = self.mel_mean.device
        with _eval_mode(self):
            tokens, log_d, ctx = self.encode(ids_t.to(device), glob_t.to(device), speaker=spk.to(device),
                                             reference=None if ref is None else ref.to(device),
                                             prosody=None if pros is None else pros.to(device))
            frames = self.predict_durations(log_d, speed=float(speed))
            durations = frames[0].cpu().numpy().astype(np.int64)
            if self.config.decoder_kind != "window":
                mel, _ = self.decode(tokens, frames, ctx)
                return LazyMel.complete(mel[0].float().cpu().numpy()), durations
            x, frame_glob, fpad = self._frames(tokens, frames, ctx)
            x = self.decoder.prefix(x, global_mask=frame_glob, padding_mask=None)  # one sequence: no padding
        return LazyMel(self, x, frame_glob[0], n_frames=x.shape[1]), durations

    def _mel_rows(self, x: torch.Tensor, is_global: torch.Tensor, start: int, stop: int, cache: dict) -> np.ndarray:
        """Rows ``[start, stop)`` of the mel from the last decoder layer's input (see :class:`LazyMel`)."""
        dec = self.decoder
        with torch.inference_mode(), _eval_mode(self):
            if start == 0 and stop == x.shape[1] and len(dec.layers):  # the whole sequence: as decode does it
                h = dec.norm(dec.layers[-1](x, global_mask=is_global.unsqueeze(0), padding_mask=None))
            else:
                h = dec.last_rows(x, is_global, start, stop, cache)
            mel = self._project(h)
        return mel[0].float().cpu().numpy()

    # -- fusion --------------------------------------------------------------
    def prune_fusion(self, *, gate_threshold: float | None = None) -> dict:
        """Prune both peer fusions (argmax peer, weak edges dropped); returns what was kept."""
        return {"token_fusion": self.token_fusion.prune(gate_threshold=gate_threshold),
                "frame_fusion": self.frame_fusion.prune(gate_threshold=gate_threshold)}

    def connection_tables(self) -> dict[str, list[dict]]:
        return {"token_fusion": self.token_fusion.connection_table(),
                "frame_fusion": self.frame_fusion.connection_table()}


_POSITIONS: dict[tuple, torch.Tensor] = {}


def _positions(n: int, d: int, *, device, dtype) -> torch.Tensor:
    """``sinusoidal_positions(n, d)`` from a table kept per (d, device, dtype) and grown by
    doubling: every entry is computed on its own, so a slice equals a fresh table (tested)."""
    key = (d, str(device), dtype)
    table = _POSITIONS.get(key)
    if table is None or table.shape[0] < n:
        size = max(n, 2 * table.shape[0] if table is not None else 1024)
        table = _POSITIONS[key] = sinusoidal_positions(size, d, device=device, dtype=dtype)
    return table[:n]


@contextlib.contextmanager
def _eval_mode(module: nn.Module):
    """Eval mode inside; after, every submodule is back in its own mode. Only the modules in
    training mode are touched (``eval()`` sets every one, ~0.8 ms for the shipped model)."""
    training = [m for m in module.modules() if m.training]
    for m in training:
        m.training = False
    try:
        yield
    finally:
        for m in training:
            m.training = True
