"""Phoneme encoder: ids -> hidden states, with Longformer attention so a paragraph is one sequence.

Embedding of the phoneme id, plus a learned "global token" embedding, plus sinusoidal positions
(any length), then ``n_layers`` pre-norm layers of

    x <- x + Dropout(LongformerSelfAttention(LN(x)))       window w, global tokens
    x <- x + Dropout(ConvFFN(LN(x)))                         conv k -> ReLU -> conv 1

and a final LayerNorm. Global tokens (REFERENCES §2) come from the front end's ``is_global``
(sentence starts, punctuation, anything a caller marks); the first token of every sequence is
made global too, so a window cut from the middle of a document still has its anchor. Padding
rows are exactly 0 after every layer, so a padded batch equals the single sequences.

The layer (:class:`PreNormLayer`) is shared with the frame decoder in ``acoustic.py``, which
plugs in other token mixers (strided attention, convolution).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from wavern.conditioning.attention import LongformerSelfAttention
from wavern.conditioning.config import EncoderConfig
from wavern.errors import ParameterError

__all__ = ["PhonemeEncoder", "PreNormLayer", "ConvFeedForward", "ConvMixer", "sinusoidal_positions",
           "global_mask_for"]


def sinusoidal_positions(n: int, d: int, *, device=None, dtype=torch.float32) -> torch.Tensor:
    """Transformer sinusoids (Vaswani et al.): (n, d), sin on even, cos on odd channels."""
    pos = torch.arange(n, device=device, dtype=torch.float64).unsqueeze(1)  # (n, 1)
    freq = torch.exp(torch.arange(0, d, 2, device=device, dtype=torch.float64) * (-math.log(10000.0) / d))
    table = torch.zeros(n, d, device=device, dtype=torch.float64)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq[: d // 2])
    return table.to(dtype)


def global_mask_for(is_global: torch.Tensor, padding_mask: torch.Tensor | None) -> torch.Tensor:
    """The encoder's global set: ``is_global`` plus each sequence's first token, minus padding."""
    g = is_global.to(torch.bool).clone()
    g[:, 0] = True
    if padding_mask is not None:
        g &= ~padding_mask
    return g


def _zero_padding(x: torch.Tensor, padding_mask: torch.Tensor | None) -> torch.Tensor:
    return x if padding_mask is None else x.masked_fill(padding_mask.unsqueeze(-1), 0.0)


class ConvFeedForward(nn.Module):
    """Position-wise FFN with a k-wide first convolution: (B, L, D) -> (B, L, D)."""

    def __init__(self, d_model: int, channels: int, kernel: int, dropout: float) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(d_model, channels, kernel, padding=kernel // 2)
        self.conv2 = nn.Conv1d(channels, d_model, 1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = _zero_padding(x, padding_mask).transpose(1, 2)  # (B, D, L); padding must not leak in
        x = self.dropout(torch.relu(self.conv1(x)))
        return self.conv2(x).transpose(1, 2)


class ConvMixer(nn.Module):
    """A convolution in the place of attention (the ``conv`` decoder kind): (B, L, D) -> (B, L, D)."""

    def __init__(self, d_model: int, kernel: int = 5) -> None:
        super().__init__()
        self.conv = nn.Conv1d(d_model, d_model, kernel, padding=kernel // 2)

    def forward(self, x: torch.Tensor, *, global_mask=None, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.conv(_zero_padding(x, padding_mask).transpose(1, 2)).transpose(1, 2)


class PreNormLayer(nn.Module):
    """``x + drop(mixer(LN(x)))``, then ``x + drop(ffn(LN(x)))``; padding rows stay 0.

    ``mixer`` is any module called as ``mixer(x, global_mask=..., padding_mask=...)``.
    """

    def __init__(self, mixer: nn.Module, d_model: int, ffn_channels: int, ffn_kernel: int, dropout: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.mixer = mixer
        self.norm2 = nn.LayerNorm(d_model)
        self.ffn = ConvFeedForward(d_model, ffn_channels, ffn_kernel, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, *, global_mask: torch.Tensor | None,
                padding_mask: torch.Tensor | None) -> torch.Tensor:
        x = x + self.dropout(self.mixer(self.norm1(x), global_mask=global_mask, padding_mask=padding_mask))
        x = x + self.dropout(self.ffn(self.norm2(x), padding_mask))
        return _zero_padding(x, padding_mask)


class PhonemeEncoder(nn.Module):
    """Phoneme ids -> text stream (B, N, d_model).

    Args:
        config: the encoder's shape; the only constructor argument.
    """

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.config = config
        d = config.d_model
        self.embed = nn.Embedding(config.n_symbols, d, padding_idx=config.pad_id)
        self.global_embed = nn.Embedding(2, d)  # tells the layers which tokens are the anchors
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(
            PreNormLayer(LongformerSelfAttention(d, config.n_heads, config.window), d, config.ffn_channels,
                         config.ffn_kernel, config.dropout)
            for _ in range(config.n_layers))
        self.norm = nn.LayerNorm(d)

    def forward(self, ids: torch.Tensor, is_global: torch.Tensor,
                padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Encode a (padded) batch.

        Args:
            ids: (B, N) int64 phoneme ids in [0, n_symbols).
            is_global: (B, N) bool, the front end's global tokens.
            padding_mask: (B, N) bool, True at padding; None = no padding.

        Returns:
            (B, N, d_model) float; padding rows are 0.
        """
        if ids.ndim != 2 or is_global.shape != ids.shape:
            raise ParameterError(f"ids and is_global must both be (B, N), found {tuple(ids.shape)} "
                                 f"and {tuple(is_global.shape)}")
        if ids.shape[1] == 0:
            raise ParameterError("cannot encode an empty sequence (N = 0)")
        n_sym = self.config.n_symbols
        if bool(((ids < 0) | (ids >= n_sym)).any()):
            bad = ids[(ids < 0) | (ids >= n_sym)][0].item()
            raise ParameterError(f"phoneme id {bad} is outside the symbol table [0, {n_sym}); "
                                 f"map unknown symbols through the voice's SymbolTable")
        g = global_mask_for(is_global, padding_mask)
        d = self.config.d_model
        x = self.embed(ids) + self.global_embed(g.long())  # (B, N, D)
        x = x + sinusoidal_positions(ids.shape[1], d, device=x.device, dtype=x.dtype).unsqueeze(0)
        x = _zero_padding(self.dropout(x), padding_mask)
        for layer in self.layers:
            x = layer(x, global_mask=g, padding_mask=padding_mask)
        return _zero_padding(self.norm(x), padding_mask)
