"""WaveRNN in torch: the teacher-forced training form and the per-sample reference loop.

Both follow docs/ARCHITECTURE.md ("The WaveRNN"), which the numba engine implements too:

- a conditioning net turns the log-mel (T, 80) into ``cond`` (T, C), one vector per frame;
- an ``nn.GRU(3 + C, H)`` reads ``x_t = [c_{t-1}, f_{t-1}, c_t, cond_{t // hop}]`` (bytes scaled
  to [-1, 1]); the column of ``c_t`` is masked out of the coarse rows of r, z and n, so the
  coarse half never sees the sample it predicts;
- two heads map the halves of h to 256-way logits for the coarse and the fine byte.

Training (:meth:`WaveRNN.forward`) runs the fused ``nn.GRU`` over known samples; generation
(:meth:`WaveRNN.infer`) is the slow, obvious loop the engine is tested against.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from wavern.dsp import (LTP_INPUT_SCALE, LTP_MAX_LAG, MU_CODE_SCALE, MU_LAW, PHASE_INPUT_GAIN, ltp_params, mel_lpc,
                        mulaw_compress, mulaw_expand, phase_step)
from wavern.errors import ParameterError
from wavern.vocoder.config import VocoderConfig
from wavern.vocoder.gru import gru_sequence

__all__ = ["WaveRNN", "ConditioningNet", "VocoderLoss", "InferResult", "coarse_input_mask", "split_bytes",
           "sample_class"]

N_CLASSES = 256  # one byte per softmax
C_INIT, F_INIT = 128, 0  # c_{-1}, f_{-1}: the bytes of digital silence (x = 0)
COARSE_INPUT_INIT = 30.0  # U(±a) initial weights of the coarse byte inputs (see WaveRNN.__init__)
FINE_INPUT_INIT = 1.0  # U(±a) for the fine byte input


class VocoderLoss(NamedTuple):
    total: torch.Tensor  # coarse + fine, nats per sample (against the data)
    coarse: torch.Tensor
    fine: torch.Tensor
    # what training minimises: ``total``, or with a teacher's soft targets the mix of
    # :meth:`WaveRNN.loss` (its cross-entropy against the teacher is ``soft``)
    objective: torch.Tensor | None = None
    soft: torch.Tensor | None = None


class InferResult(NamedTuple):
    samples: torch.Tensor  # (n,) int16
    coarse_logits: torch.Tensor  # (n, 256) float32, before the temperature
    fine_logits: torch.Tensor  # (n, 256)


class ResBlock(nn.Module):
    """``x + conv2(relu(conv1(relu(x))))`` with a k=3 and a k=1 convolution."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv1d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C, T) -> (B, C, T)
        return x + self.conv2(F.relu(self.conv1(F.relu(x))))


class ConditioningNet(nn.Module):
    """Per-frame conditioning: features (B, T, n_features) -> (B, T, C); zero padding at the ends.

    The features are the log-mel, followed by the pitch features when the config has ``pitch``.
    """

    def __init__(self, n_mels: int, channels: int, n_blocks: int) -> None:
        super().__init__()
        self.conv_in = nn.Conv1d(n_mels, channels, 5, padding=2)
        self.blocks = nn.ModuleList(ResBlock(channels) for _ in range(n_blocks))

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        x = self.conv_in(mel.transpose(1, 2))  # (B, C, T)
        for block in self.blocks:
            x = block(x)
        return x.transpose(1, 2)  # (B, T, C)


def coarse_input_mask(hidden_size: int, cond_channels: int, n_inputs: int = 3) -> torch.Tensor:
    """(3H, n_inputs + C) float mask: 0 at [coarse rows of r, z and n, column 2 (c_t)], 1 elsewhere."""
    h, half = hidden_size, hidden_size // 2
    mask = torch.ones(3 * h, n_inputs + cond_channels)
    for gate in range(3):  # nn.GRU row order: r, z, n
        mask[gate * h:gate * h + half, 2] = 0.0
    return mask


def split_bytes(audio: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """int16-valued samples (any integer dtype) -> (coarse, fine) int64 bytes in [0, 255]."""
    if audio.dtype.is_floating_point or audio.dtype == torch.bool:
        raise ParameterError(f"audio must hold int16 sample values, found dtype {audio.dtype}")
    u = audio.to(torch.int64) + 32768
    return u >> 8, u & 255


def _unit(b: torch.Tensor) -> torch.Tensor:
    """Byte -> network input in [-1, 1] (``b / 127.5 - 1``, as ``wavern.dsp.byte_to_unit``)."""
    return b.to(torch.float32) / 127.5 - 1.0


def sample_class(logits: torch.Tensor, u: float, temperature: float) -> int:
    """ARCHITECTURE.md's sampling rule: the first k with ``cumsum(p)[k] > u * sum(p)``, clamped to 255.

    ``p = softmax(logits / temperature)``, computed in float64 from the float32 logits.
    """
    p = torch.softmax(logits.to(torch.float64) / temperature, dim=0)
    cs = torch.cumsum(p, dim=0)
    k = int(torch.searchsorted(cs, torch.tensor([u * float(cs[-1])], dtype=torch.float64), right=True))
    return min(k, N_CLASSES - 1)


INT8_WEIGHT_LEVELS = 63  # the engine's int8 product (wavern.engine.kernels.int8): |q| <= 63 a side
INT8_STATE_LEVELS = 127  # the state's byte: floor(h * 127 + 128.5)


def int8_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A weight matrix as the engine's int8 product holds it: per row ``s = max |w| / 63`` (1 for
    a row of zeros), ``q = round(w / s)`` (half to even), float32 arithmetic. Returns q (rows,
    cols) as float64 integers and ``d = s / 127`` (rows,) float32, the dequantisation factor."""
    w = w.detach().float()
    s = w.abs().amax(dim=1) / INT8_WEIGHT_LEVELS
    s = torch.where(s == 0, torch.ones_like(s), s)
    q = torch.round(w / s[:, None]).clamp(-INT8_WEIGHT_LEVELS, INT8_WEIGHT_LEVELS)
    return q.double(), s / INT8_STATE_LEVELS


def int8_product(q: torch.Tensor, d: torch.Tensor, h: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``b + W h`` as the engine's int8 product computes it: the state as bytes
    ``floor(clamp(h, -1, 1) * 127 + 128.5)`` (each step rounded to float32), the integer sums
    ``q (u - 128)`` exact, then ``b + d * float32(sum)`` (two float32 roundings)."""
    u = torch.floor(h.float().clamp(-1.0, 1.0) * INT8_STATE_LEVELS + 128.5)
    acc = q @ (u.double() - 128.0)  # exact: integers far below 2**53
    return b.float() + d * acc.float()


class WaveRNN(nn.Module):
    """Dual-softmax WaveRNN conditioned on a log-mel spectrogram.

    Args:
        config: the model's shape; the only constructor argument.
    """

    def __init__(self, config: VocoderConfig) -> None:
        super().__init__()
        self.config = config
        h, c, half = config.hidden_size, config.cond_channels, config.hidden_size // 2
        self.n_in = n_in = config.n_inputs
        self.cond = ConditioningNet(config.n_features, c, config.cond_blocks)
        self.gru = nn.GRU(n_in + c, h, batch_first=True)
        self.O1 = nn.Linear(half, half)
        self.O2 = nn.Linear(half, N_CLASSES)
        self.O3 = nn.Linear(half, half)
        self.O4 = nn.Linear(half, N_CLASSES)
        #: "loop" (default): :func:`gru_sequence`, per-frame conditioning; "nn": the stock nn.GRU.
        self.gru_impl = "loop"
        self.register_buffer("input_mask", coarse_input_mask(h, c, n_in), persistent=False)
        with torch.no_grad():
            w_ih = self.gru.weight_ih_l0
            # Byte inputs get a much larger initial scale than nn.GRU's U(±1/sqrt(H)): speech at
            # typical levels (rms ~3000 of 32768) moves the coarse inputs by only ±0.1, so with the
            # default init c_{t-1} barely reaches the gates and training sits for thousands of steps
            # at the marginal coarse entropy (~3.3 nats on the espeak corpus). Measured (H 128,
            # batch 8, lr 1e-3, identical batches), coarse CE after 400 steps: default 3.12,
            # U(±3) 2.45, U(±10) 1.99, U(±30) 1.84; a larger f_{t-1} scale (±3) changed nothing.
            w_ih[:, 0].uniform_(-COARSE_INPUT_INIT, COARSE_INPUT_INIT)  # c_{t-1}
            w_ih[:, 1].uniform_(-FINE_INPUT_INIT, FINE_INPUT_INIT)  # f_{t-1}
            w_ih[:, 2].uniform_(-COARSE_INPUT_INIT, COARSE_INPUT_INIT)  # c_t (fine rows only)
            for col in range(3, n_in):  # p_t / 32768, r_{t-T+d} / 512: at the samples' scale, like c_{t-1}
                w_ih[:, col].uniform_(-COARSE_INPUT_INIT, COARSE_INPUT_INIT)
            w_ih.mul_(self.input_mask)  # masked entries are exactly 0 in the stored weight too

    @property
    def hop_length(self) -> int:
        return self.config.hop_length

    def _gru_loop(self, bytes_in: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """The GRU via :func:`gru_sequence`: (B, N, 3) bytes, (B, T, C) cond -> (N, B, H) states.

        The conditioning part of the input term is computed once per frame and broadcast
        over its ``hop`` samples; the input term stays float32 even under autocast (the fine
        byte needs ~1/256 resolution there), only the recurrent products follow autocast.
        """
        b, n, _ = bytes_in.shape
        t_frames, hop = cond.shape[1], self.hop_length
        w_ih = self.masked_weight_ih()
        with torch.autocast(bytes_in.device.type, enabled=False):
            frame = cond.float() @ w_ih[:, self.n_in:].T + self.gru.bias_ih_l0  # (B, T, 3H)
            per_sample = bytes_in.transpose(0, 1) @ w_ih[:, :self.n_in].T  # (N, B, 3H)
            gi = per_sample.view(t_frames, hop, b, -1) + frame.transpose(0, 1)[:, None]
        mm_dtype = torch.float32
        if torch.is_autocast_enabled(bytes_in.device.type):
            mm_dtype = torch.get_autocast_dtype(bytes_in.device.type)
        return gru_sequence(gi.reshape(n, b, -1), self.gru.weight_hh_l0, self.gru.bias_hh_l0,
                            matmul_dtype=mm_dtype)

    def masked_weight_ih(self) -> torch.Tensor:
        """``W_ih`` with the c_t column of the coarse rows zeroed, (3H, n_inputs + C)."""
        return self.gru.weight_ih_l0 * self.input_mask

    # ------------------------------------------------------------------ training form
    def forward(self, mel: torch.Tensor, audio: torch.Tensor, *, prev_audio: torch.Tensor | None = None,
                mel_pad: int = 0, past: torch.Tensor | None = None,
                lpc: torch.Tensor | None = None,
                phase: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced logits for every sample.

        Args:
            mel: (B, T + 2 mel_pad, n_features) float log-mel (and pitch features, with ``config.pitch``).
            audio: (B, T * hop) int16 samples; sample ``j`` belongs to frame ``j // hop``.
            prev_audio: (B,) int16, the sample before ``audio[:, 0]`` (default: silence,
                i.e. ``c_{-1} = 128, f_{-1} = 0`` as at the start of generation).
            mel_pad: context frames on each side of ``mel``; the conditioning is computed
                over them and cropped, so a training segment sees its true neighbours.
            past, lpc: with ``config.lpc_order = P > 0`` (and only then): ``past`` (B, P + 1) the
                P + 1 samples before ``audio[:, 0]`` (zeros before an utterance's start; its last
                column replaces ``prev_audio``), ``lpc`` (B, T + 1, P + 1) float64 the predictors
                (:func:`wavern.dsp.mel_lpc`) of the frame before the segment (row 0; ``[1, 0, ...]``
                before an utterance's start) and of its T frames. With ``config.ltp`` they reach
                further back and each row ends with the frame's lag and gain: ``past``
                (B, ``config.history_samples``), ``lpc`` (B, T + ``config.history_frames``,
                ``config.lpc_columns``), as ``VocoderData.segments`` makes them.
            phase: with ``config.phase_input`` (and only then): (B, T * hop) float, each sample's glottal
                phase in cycles (:func:`wavern.dsp.pulse_phase`).

        Returns:
            (coarse_logits, fine_logits), each (B, T * hop, 256) float; with LPC they are the
            distributions of the excitation's bytes (:meth:`targets`).
        """
        coarse_logits, fine_logits = self.logits(mel, audio, prev_audio=prev_audio, mel_pad=mel_pad,
                                                 past=past, lpc=lpc, phase=phase)
        return coarse_logits.transpose(0, 1), fine_logits.transpose(0, 1)

    def loss(self, mel: torch.Tensor, audio: torch.Tensor, *, prev_audio: torch.Tensor | None = None,
             mel_pad: int = 0, input_audio: torch.Tensor | None = None, past: torch.Tensor | None = None,
             lpc: torch.Tensor | None = None, period_scale: torch.Tensor | None = None,
             phase: torch.Tensor | None = None, period_draws: torch.Tensor | None = None,
             soft_logits: tuple[torch.Tensor, torch.Tensor] | None = None, soft_weight: float = 0.0) -> VocoderLoss:
        """Mean cross-entropy (nats per sample) of the coarse and the fine byte, and their sum.

        Arguments as :meth:`hidden`. A uniform guess scores 2 ln 256 ≈ 11.09. With LPC the bytes
        are the excitation's; given the past samples it is a shift of the sample by an integer,
        so the two models' losses measure the same thing and compare directly.

        ``soft_logits``: a teacher's (coarse, fine) logits for the same batch, time-major (N, B, 256)
        (its :meth:`logits` with the same arguments): knowledge distillation. ``objective`` is then
        ``(1 - soft_weight) * total + soft_weight * soft``, ``soft`` the cross-entropy of this model's
        two distributions against the teacher's (both fine distributions given the true coarse byte,
        as teacher forcing has them); ``total`` stays the loss against the data.
        """
        inputs, target = self._inputs(audio, prev_audio, input_audio, past, lpc, period_scale, phase, period_draws)
        coarse_logits, fine_logits = self._head_logits(self._states(mel, inputs, mel_pad, audio.shape))
        coarse, fine = split_bytes(target.t())  # (N, B), time-major like the logits
        ce_c = F.cross_entropy(coarse_logits.reshape(-1, N_CLASSES).float(), coarse.reshape(-1))
        ce_f = F.cross_entropy(fine_logits.reshape(-1, N_CLASSES).float(), fine.reshape(-1))
        total = ce_c + ce_f
        if soft_logits is None:
            return VocoderLoss(total, ce_c, ce_f, total)
        if not 0.0 <= soft_weight <= 1.0:
            raise ParameterError(f"soft_weight must be in [0, 1], found {soft_weight}")
        soft = total.new_zeros(())
        for mine, theirs in zip((coarse_logits, fine_logits), soft_logits):
            if tuple(theirs.shape) != tuple(mine.shape):
                raise ParameterError(f"soft logits must be time-major {tuple(mine.shape)}, found {tuple(theirs.shape)}")
            p = F.softmax(theirs.detach().float(), dim=-1)
            soft = soft - (p * F.log_softmax(mine.float(), dim=-1)).sum(-1).mean()
        return VocoderLoss(total, ce_c, ce_f, (1.0 - soft_weight) * total + soft_weight * soft, soft)

    def logits(self, mel: torch.Tensor, audio: torch.Tensor, *, prev_audio: torch.Tensor | None = None,
               mel_pad: int = 0, input_audio: torch.Tensor | None = None, past: torch.Tensor | None = None,
               lpc: torch.Tensor | None = None, period_scale: torch.Tensor | None = None,
               phase: torch.Tensor | None = None, period_draws: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced (coarse, fine) logits, time-major (N, B, 256) each, with every argument of
        :meth:`loss` (:meth:`forward` takes fewer and is batch-major): a teacher's for ``soft_logits``."""
        inputs, _ = self._inputs(audio, prev_audio, input_audio, past, lpc, period_scale, phase, period_draws)
        return self._head_logits(self._states(mel, inputs, mel_pad, audio.shape))

    def targets(self, audio: torch.Tensor, *, prev_audio: torch.Tensor | None = None,
                past: torch.Tensor | None = None, lpc: torch.Tensor | None = None) -> torch.Tensor:
        """(B, N) int64 values the two softmaxes predict: the samples, or with LPC the excitation
        ``e_t = clip(s_t - round(p_t))``, its mu-law code (``excitation="mulaw"``), or with ``ltp``
        the code of the innovation ``r_t - beta r_{t-T}`` (docs/ARCHITECTURE.md)."""
        return self._inputs(audio, prev_audio, None, past, lpc)[1]

    def hidden(self, mel: torch.Tensor, audio: torch.Tensor, *, prev_audio: torch.Tensor | None = None,
               mel_pad: int = 0, input_audio: torch.Tensor | None = None, past: torch.Tensor | None = None,
               lpc: torch.Tensor | None = None, period_scale: torch.Tensor | None = None,
               phase: torch.Tensor | None = None, period_draws: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher-forced GRU states h_1..h_N, time-major (N, B, H); arguments as :meth:`forward`.

        ``input_audio`` (B, N) int16, optional: the samples fed back as the previous-sample inputs
        ``c_{t-1}, f_{t-1}`` (default: ``audio`` itself). A noisy copy of ``audio`` there, with the
        clean ``audio`` as targets and as the fine half's ``c_t``, trains the model to return to
        the clean signal after its own sampling errors (LPCNet's noise injection). With LPC the
        noise ``input_audio - audio`` is added to the fed-back excitation codes instead (the
        predictor and the targets stay clean), so it is in code units (mu-law codes with "mulaw").

        ``period_scale`` (B,) float, optional, with ``config.ltp_input``: each row's period input
        (the residuals around one period back) multiplied by it, targets and filters unchanged, so
        the model learns to make a full pulse after a weak one of its own (the trainer's
        ``--period-input-fade``).

        ``phase`` (B, N) float, with ``config.phase_input`` (required then): the glottal phase of
        every sample (:func:`wavern.dsp.pulse_phase`), read as ``PHASE_INPUT_GAIN`` times sin / cos of
        its first harmonics.

        ``period_draws`` (B, N) int, optional, with ``config.ltp_input`` and the linear code: the
        model's own draws (:meth:`draw`) of the innovation codes of samples 0 .. N-1. Where the
        period reaches back into the segment, the residual there becomes the one those draws make
        (the true residual plus draw minus true code), in the period input and in the long-term
        prediction alike, and the targets become the innovations that lead from that residual back
        to the true signal: what running free asks of the model after a pulse of its own (the
        trainer's ``--period-input-self``). Draws equal to the true codes change nothing.
        """
        inputs, _ = self._inputs(audio, prev_audio, input_audio, past, lpc, period_scale, phase, period_draws)
        return self._states(mel, inputs, mel_pad, audio.shape)

    def _inputs(self, audio, prev_audio, input_audio, past, lpc,
                period_scale=None, phase=None, period_draws=None) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, N, n_inputs) float per-sample GRU inputs and the (B, N) int64 targets."""
        if audio.ndim != 2:
            raise ParameterError(f"expected audio (B, T * {self.hop_length}), found {tuple(audio.shape)}")
        if audio.dtype.is_floating_point or audio.dtype == torch.bool:
            raise ParameterError(f"audio must hold int16 sample values, found dtype {audio.dtype}")
        b, n = audio.shape
        order = self.config.lpc_order
        if period_scale is not None:
            if not self.config.ltp_input:
                raise ParameterError("period_scale scales the period input: this vocoder has none (ltp_input)")
            if tuple(period_scale.shape) != (b,):
                raise ParameterError(f"period_scale must be (B,) = ({b},), found {tuple(period_scale.shape)}")
        if period_draws is not None:
            if not self.config.ltp_input or self.config.excitation != "linear":
                raise ParameterError("period_draws replace the residual one period back: they need a vocoder with "
                                     "the period input (ltp_input) and the linear excitation code")
            if tuple(period_draws.shape) != (b, n) or period_draws.dtype.is_floating_point:
                raise ParameterError(f"period_draws must be (B, N) = ({b}, {n}) integer codes, found "
                                     f"{tuple(period_draws.shape)} {period_draws.dtype}")
        if self.config.phase_input:
            if phase is None or tuple(phase.shape) != (b, n):
                raise ParameterError(f"a phase-input vocoder needs phase (B, N) = ({b}, {n}), found "
                                     f"{None if phase is None else tuple(phase.shape)}")
        elif phase is not None:
            raise ParameterError("phase is an input of a phase-input vocoder (phase_input > 0); this one has none")
        if order:
            return self._lpc_inputs(audio, past, lpc, input_audio, period_scale, phase, period_draws)
        if past is not None or lpc is not None:
            raise ParameterError("past/lpc are inputs of an LPC vocoder (lpc_order > 0); this one has lpc_order 0")
        if prev_audio is None:
            prev_audio = torch.zeros(b, 1, dtype=torch.int64, device=audio.device)  # x = 0: (128, 0)
        seq = torch.cat([prev_audio.reshape(b, 1).to(torch.int64), audio.to(torch.int64)], dim=1)
        c_all, f_all = split_bytes(seq)  # (B, N + 1)
        if input_audio is not None:
            if input_audio.shape != audio.shape:
                raise ParameterError(f"input_audio must have audio's shape {tuple(audio.shape)}, "
                                     f"found {tuple(input_audio.shape)}")
            c_in, f_in = split_bytes(torch.cat([prev_audio.reshape(b, 1).to(torch.int64),
                                                input_audio[:, :-1].to(torch.int64)], dim=1))
        else:
            c_in, f_in = c_all[:, :-1], f_all[:, :-1]
        return _unit(torch.stack([c_in, f_in, c_all[:, 1:]], dim=-1)), seq[:, 1:]  # (B, N, 3)

    def _lpc_inputs(self, audio, past, lpc, input_audio, period_scale=None,
                    phase=None, period_draws=None) -> tuple[torch.Tensor, torch.Tensor]:
        b, n = audio.shape
        cfg = self.config
        order, hop = cfg.lpc_order, self.hop_length
        n_past, k_rows, n_cols = cfg.history_samples, cfg.history_frames, cfg.lpc_columns
        if past is None or lpc is None:
            raise ParameterError(f"an LPC vocoder (lpc_order {order}) needs past (B, {n_past}) and lpc "
                                 f"(B, frames + {k_rows}, {n_cols})")
        t_frames = -(-n // hop)
        if tuple(past.shape) != (b, n_past) or lpc.ndim != 3 or lpc.shape[0] != b or lpc.shape[2] != n_cols \
                or lpc.shape[1] < t_frames + k_rows:
            raise ParameterError(f"past must be (B, {n_past}) and lpc (B, >= {t_frames + k_rows}, {n_cols}); found "
                                 f"{tuple(past.shape)} and {tuple(lpc.shape)}")
        m = n_past - order  # predicted samples before the segment: 1, or with ltp LTP_MAX_LAG + 1
        s = torch.cat([past.to(torch.int64), audio.to(torch.int64)], dim=1).to(torch.float64)  # s_{-n_past} ..
        j = torch.arange(-m, n, device=audio.device)
        rows = torch.div(j, hop, rounding_mode="floor") + k_rows  # the frame of sample j
        # (B, m + N, columns): the filters of samples -m .. N-1, rounded to float32 as the engine keeps them
        a = lpc.to(torch.float32).to(torch.float64)[:, rows]
        pred = torch.zeros(b, n + m, dtype=torch.float64, device=audio.device)
        for k in range(1, order + 1):  # p_j = -sum_k a_k s_{j-k}, summed in this order (the engine's too)
            pred -= a[..., k] * s[:, order - k:order - k + n + m]
        if cfg.excitation == "mulaw" or cfg.ltp:  # the code of s - p (minus the long-term prediction), p unrounded
            x = r = s[:, order:] - pred  # the residual r_j, j = -m .. N-1
            if cfg.ltp:  # i_j = r_j - beta_j r_{j - T_j} for j = -1 .. N-1 (T = 0 where beta = 0)
                q = torch.arange(m - 1, m + n, device=audio.device)
                lag = a[:, m - 1:, order + 1].to(torch.int64)
                long_term = a[:, m - 1:, order + 2] * torch.gather(r, 1, q[None] - lag)
                x = r[:, m - 1:] - long_term
                if period_draws is not None:  # the residual the draws make, r_j + (draw_j - i_j) for j >= 0,
                    true_codes = torch.clamp(torch.round(x[:, 1:]), -32768, 32767)  # stands one period back
                    drawn = torch.cat([r[:, :m], r[:, m:] + (period_draws.to(torch.float64) - true_codes)], dim=1)
                    long_term = a[:, m - 1:, order + 2] * torch.gather(drawn, 1, q[None] - lag)
                    x, r = r[:, m - 1:] - long_term, drawn  # targets: from the drawn past to the true r_j
            if cfg.excitation == "mulaw":
                x = torch.sign(x) * MU_CODE_SCALE * torch.log1p(MU_LAW * x.abs() / 32768.0)
            e = torch.clamp(torch.round(x), -32768, 32767).to(torch.int64)
        else:
            pred = torch.round(pred)
            e = torch.clamp(s[:, order:] - pred, -32768, 32767).to(torch.int64)  # e_{-1} .. e_{N-1}
        pred = pred[:, m - 1:]  # p_{-1} .. p_{N-1}
        if cfg.ltp:  # the prediction input (lpc_prediction_input) is the whole prediction
            pred = pred + long_term
        if cfg.ltp_input:  # r_{t-T+d} for t = 0 .. N-1, 0 where the frame has no lag
            lag0 = lag[:, 1:]
            at = q[None, 1:] - lag0  # (t - T where there is a lag; t itself, masked, where not)
            period_back = [torch.gather(r, 1, at + d * (lag0 > 0)) * (lag0 > 0) for d in cfg.ltp_offsets]
        c_all, f_all = split_bytes(e)
        c_in, f_in = c_all[:, :-1], f_all[:, :-1]
        if input_audio is not None:  # the noise it carries goes onto the fed-back codes (in code units)
            if input_audio.shape != audio.shape:
                raise ParameterError(f"input_audio must have audio's shape {tuple(audio.shape)}, "
                                     f"found {tuple(input_audio.shape)}")
            noise = input_audio.to(torch.int64) - audio.to(torch.int64)
            fed = torch.cat([e[:, :1], torch.clamp(e[:, 1:-1] + noise[:, :-1], -32768, 32767)], dim=1)
            c_in, f_in = split_bytes(fed)
        columns = [_unit(c_in), _unit(f_in), _unit(c_all[:, 1:])]
        if cfg.lpc_prediction_input:
            columns.append((pred[:, 1:] / 32768.0).to(torch.float32))
        for back in period_back if cfg.ltp_input else ():
            if period_scale is not None:
                back = back * period_scale.to(back.dtype)[:, None]
            columns.append((back / LTP_INPUT_SCALE).to(torch.float32))
        if cfg.phase_input:  # PHASE_INPUT_GAIN sin / cos of k phi, k = 1 .. K, where the frame has a lag
            angle = 2.0 * math.pi * phase.to(torch.float64)
            voiced = (lag[:, 1:] > 0).to(torch.float64) * PHASE_INPUT_GAIN
            for k in range(1, cfg.phase_input + 1):
                columns.append((torch.sin(k * angle) * voiced).to(torch.float32))
                columns.append((torch.cos(k * angle) * voiced).to(torch.float32))
        return torch.stack(columns, dim=-1), e[:, 1:]  # (B, N, n_inputs)

    def _states(self, mel: torch.Tensor, bytes_in: torch.Tensor, mel_pad: int, audio_shape) -> torch.Tensor:
        """The GRU over per-sample inputs (B, N, n_inputs) and the mel: (N, B, H)."""
        b, n = audio_shape
        if mel.ndim != 3 or mel.shape[0] != b or mel.shape[2] != self.config.n_features:
            raise ParameterError(
                f"expected mel (B, T, {self.config.n_features}) and audio (B, T * {self.hop_length}), found "
                f"{tuple(mel.shape)} and {tuple(audio_shape)}")
        cond = self.cond(mel)  # (B, T + 2p, C)
        if mel_pad:
            cond = cond[:, mel_pad:cond.shape[1] - mel_pad]
        t_frames = cond.shape[1]
        if n != t_frames * self.hop_length:
            raise ParameterError(
                f"audio has {n} samples but {t_frames} mel frames need {t_frames * self.hop_length} "
                f"(hop {self.hop_length})")
        if self.gru_impl == "nn":  # the stock fused nn.GRU over the full (n_inputs + C) input
            cond_s = cond.repeat_interleave(self.hop_length, dim=1)  # (B, N, C)
            x = torch.cat([bytes_in.to(cond_s.dtype), cond_s], dim=-1)  # (B, N, n_inputs + C)
            hs, _ = functional_call(self.gru, {"weight_ih_l0": self.masked_weight_ih()}, (x,))  # (B, N, H)
            return hs.transpose(0, 1)
        return self._gru_loop(bytes_in, cond)  # (N, B, H)

    def _head_logits(self, hs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        half = self.config.hidden_size // 2
        return self.O2(F.relu(self.O1(hs[..., :half]))), self.O4(F.relu(self.O3(hs[..., half:])))

    @torch.no_grad()
    def draw(self, mel: torch.Tensor, audio: torch.Tensor, *, generator: torch.Generator | None = None,
             temperature: float = 1.0, **inputs) -> torch.Tensor:
        """Teacher-forced draws, (B, N) int64, of what the two softmaxes predict at every sample (values
        as :meth:`targets`): the coarse byte from its distribution given the true past, the fine byte from
        its own given the true coarse byte. ``inputs``: as :meth:`forward` (``prev_audio``, ``mel_pad``,
        ``past``, ``lpc``, ``phase``). The stand-in for the model's own samples in ``period_draws``.
        """
        coarse_logits, fine_logits = self.logits(mel, audio, **inputs)

        def pick(logits: torch.Tensor) -> torch.Tensor:  # (N, B, 256) -> (N, B): sample_class's rule
            cs = torch.cumsum(torch.softmax(logits.reshape(-1, N_CLASSES).float() / temperature, dim=-1), dim=-1)
            u = torch.rand(cs.shape[0], 1, generator=generator, device=cs.device) * cs[:, -1:]
            k = torch.searchsorted(cs, u, right=True)  # 28x faster than torch.multinomial here
            return torch.clamp(k, max=N_CLASSES - 1).reshape(logits.shape[:2])

        return (pick(coarse_logits) * 256 + pick(fine_logits) - 32768).t().contiguous()

    # ------------------------------------------------------------------ generation (reference)
    def frame_gates(self, mel: torch.Tensor) -> torch.Tensor:
        """Per-frame input gate term ``W_ih[:, 3:] cond_t + b_ih``, (T, 3H), for mel (T, n_features)."""
        cond = self.cond(mel[None].to(torch.float32))[0]  # (T, C)
        return cond @ self.masked_weight_ih()[:, self.n_in:].T + self.gru.bias_ih_l0

    @torch.no_grad()
    def infer(self, mel: torch.Tensor, uniforms, *, temperature: float = 1.0, return_logits: bool = False,
              ltp_gain_scale: float = 1.0, int8: bool = False):
        """Generate audio one sample at a time, exactly as docs/ARCHITECTURE.md orders it.

        This is the slow reference the engine is checked against, not a fast path.

        Args:
            mel: (T, n_features) log-mel, then the pitch features with ``config.pitch`` (tensor or array).
            uniforms: (T * hop, 2) float64 in [0, 1); ``[t, 0]`` draws c_t, ``[t, 1]`` draws f_t.
            temperature: softmax temperature (> 0).
            return_logits: also return the (pre-temperature) logits of both heads.
            ltp_gain_scale: with ``config.ltp``, every frame's long-term predictor gain times this
                (:func:`wavern.dsp.ltp_params`' ``gain_scale``; the engine's ``Vocoder.ltp_gain_scale``).
            int8: the products on the state (``W_hh h``, O1 and O3 on its halves) as the engine's
                int8 products (:func:`int8_product`; the engine's ``Vocoder(int8=True)``).

        Returns:
            (T * hop,) int16 tensor, or with ``return_logits`` an :class:`InferResult`
            (samples, coarse_logits, fine_logits) — the samples field is the same tensor.
        """
        result = self._reference_loop(mel, uniforms, temperature=temperature, ltp_gain_scale=ltp_gain_scale,
                                      int8=int8)
        return result[0] if not return_logits else InferResult(*result[:3])

    def _reference_loop(self, mel, uniforms=None, *, temperature: float = 1.0,
                        forced_audio: torch.Tensor | None = None, ltp_gain_scale: float = 1.0,
                        int8: bool = False):
        """The per-sample loop. ``forced_audio`` (n,) replaces sampling (teacher forcing, for tests).

        Returns (samples int16 (n,), coarse_logits (n, 256), fine_logits (n, 256), states (n, H)).
        """
        mel = torch.as_tensor(mel, dtype=torch.float32)
        if mel.ndim != 2 or mel.shape[1] != self.config.n_features:
            raise ParameterError(f"mel must have shape (frames, {self.config.n_features}), found {tuple(mel.shape)}")
        if not (temperature > 0 and math.isfinite(temperature)):
            raise ParameterError(f"temperature must be a positive finite number, found {temperature}")
        hop, h = self.hop_length, self.config.hidden_size
        half = h // 2
        n = mel.shape[0] * hop
        if forced_audio is None:
            u = torch.as_tensor(uniforms, dtype=torch.float64)
            if u.shape != (n, 2):
                raise ParameterError(f"uniforms must have shape ({n}, 2) for {mel.shape[0]} frames, "
                                     f"found {tuple(u.shape)}")
            if bool(((u < 0) | (u >= 1)).any()):
                raise ParameterError("uniforms must lie in [0, 1)")
            u = u.tolist()
        else:
            forced = [int(v) for v in forced_audio.reshape(-1)[:n]]
        order = self.config.lpc_order
        mulaw = self.config.excitation == "mulaw"
        if order:  # the predictor of every frame, from the same mel (float64, sample loop below)
            lpc = mel_lpc(mel[:, :self.config.n_mels].numpy(), order, self.config.mel).astype(np.float32).astype(np.float64).tolist()
            hist = [0.0] * order  # s_{t-1}, s_{t-2}, ... newest first
        ltp = self.config.ltp
        if ltp:  # each frame's (lag, gain) from its pitch features, and the residual r = s - p so far
            n_mels = self.config.n_mels
            lag_gain = ltp_params(mel[:, n_mels:n_mels + 2].numpy(), self.config.mel,
                                  gain_scale=ltp_gain_scale).astype(np.float64).tolist()
            resid = [0.0] * (LTP_MAX_LAG + 1)  # r_{t-1}, r_{t-2}, ... newest first (0 before the start)
        param = next(self.parameters())
        gi_frames = self.frame_gates(mel.to(param.device))  # (T, 3H)
        w_ih = self.masked_weight_ih()
        w_bytes = w_ih[:, 0:2]  # columns of c_{t-1}, f_{t-1}
        w_cur = w_ih[:, 2]  # column of c_t (0 on coarse rows)
        names = self.config.input_names
        w_pred = w_ih[:, names.index("prediction")] if "prediction" in names else None  # p_t / 32768 (LPC)
        offsets = self.config.ltp_offsets  # r_{t-T+d} / scale, one column per offset d
        n_phase = 2 * self.config.phase_input  # sin / cos k phi columns, last
        n_back = len(names) - n_phase
        w_back = w_ih[:, n_back - len(offsets):n_back] if offsets else None
        w_phase = w_ih[:, n_back:len(names)] if n_phase else None
        phi = 0.0  # the generation-time glottal phase (wavern.dsp.phase_step)
        w_hh, b_hh = self.gru.weight_hh_l0, self.gru.bias_hh_l0
        if int8:  # the products on the state as the engine's int8 ones; O2, O4 stay float
            q_hh, d_hh = int8_rows(w_hh)
            q1, d1 = int8_rows(self.O1.weight)
            q3, d3 = int8_rows(self.O3.weight)
            head_c = lambda x: self.O2(F.relu(int8_product(q1, d1, x, self.O1.bias)))  # noqa: E731
            head_f = lambda x: self.O4(F.relu(int8_product(q3, d3, x, self.O3.bias)))  # noqa: E731
        else:
            head_c = lambda x: self.O2(F.relu(self.O1(x)))  # noqa: E731
            head_f = lambda x: self.O4(F.relu(self.O3(x)))  # noqa: E731
        rows_c = torch.cat([torch.arange(g * h, g * h + half) for g in range(3)])  # coarse rows of r, z, n
        rows_f = rows_c + half

        def gate_half(gi: torch.Tensor, gh: torch.Tensor, h_prev: torch.Tensor) -> torch.Tensor:
            r = torch.sigmoid(gi[:half] + gh[:half])
            z = torch.sigmoid(gi[half:2 * half] + gh[half:2 * half])
            cand = torch.tanh(gi[2 * half:] + r * gh[2 * half:])
            return (1 - z) * cand + z * h_prev

        state = torch.zeros(h, device=param.device)
        c_prev, f_prev = C_INIT, F_INIT
        samples = torch.empty(n, dtype=torch.int16)
        logits_c = torch.empty(n, N_CLASSES)
        logits_f = torch.empty(n, N_CLASSES)
        states = torch.empty(n, h)
        for t in range(n):
            # all 3H rows: one matvec
            gh = int8_product(q_hh, d_hh, state, b_hh) if int8 else w_hh @ state + b_hh
            prev = _unit(torch.tensor([c_prev, f_prev], device=param.device))
            gi = gi_frames[t // hop] + w_bytes @ prev  # without c_t
            pred = 0.0
            if order:  # p_t = -sum_k a_k s_{t-k} in float64 (rounded half to even for a linear code)
                a = lpc[t // hop]
                for k in range(1, order + 1):
                    pred -= a[k] * hist[k - 1]
                if not (mulaw or ltp):
                    pred = float(round(pred))
            long_term = 0.0
            if ltp:  # beta r_{t - T}
                lag, gain = lag_gain[t // hop]
                long_term = gain * resid[int(lag) - 1] if lag else 0.0
            if w_pred is not None:  # the whole prediction, short and long term, as an input
                gi = gi + w_pred * torch.tensor((pred + long_term) / 32768.0, dtype=torch.float32, device=param.device)
            if w_back is not None:  # the residuals around one period back
                back = [resid[int(lag) - 1 - d] / LTP_INPUT_SCALE if lag else 0.0 for d in offsets]
                gi = gi + w_back @ torch.tensor(back, dtype=torch.float32, device=param.device)
            if w_phase is not None:
                if lag:
                    harm = []
                    for k in range(1, n_phase // 2 + 1):
                        harm += [PHASE_INPUT_GAIN * math.sin(2.0 * math.pi * k * phi),
                                 PHASE_INPUT_GAIN * math.cos(2.0 * math.pi * k * phi)]
                    gi = gi + w_phase @ torch.tensor(harm, dtype=torch.float32, device=param.device)
                phi = phase_step(phi, lag)
            if forced_audio is not None:  # the bytes of the forced sample (its excitation with LPC)
                if mulaw:
                    code = int(mulaw_compress(forced[t] - pred - long_term))
                elif ltp:
                    code = int(min(max(np.rint(forced[t] - pred - long_term), -32768), 32767))
                else:
                    code = min(max(forced[t] - int(pred), -32768), 32767)
                forced_c, forced_f = divmod(code + 32768, 256)
            hc = gate_half(gi[rows_c], gh[rows_c], state[:half])
            lc = head_c(hc)
            c_t = forced_c if forced_audio is not None else sample_class(lc, u[t][0], temperature)
            gi_f = gi[rows_f] + w_cur[rows_f] * _unit(torch.tensor(c_t, device=param.device))
            hf = gate_half(gi_f, gh[rows_f], state[half:])
            lf = head_f(hf)
            f_t = forced_f if forced_audio is not None else sample_class(lf, u[t][1], temperature)
            state = torch.cat([hc, hf])
            value = c_t * 256 + f_t - 32768
            if order:  # s_t = e_t + round(p_t), or round(p_t + expand(e_t)) for a mu-law code
                if mulaw:
                    value = int(np.rint(pred + long_term + float(mulaw_expand(value))))
                elif ltp:
                    value = int(np.rint(pred + long_term + value))
                else:
                    value = value + int(pred)
                value = min(max(value, -32768), 32767)
                hist = [float(value)] + hist[:-1]
                if ltp:
                    resid = [value - pred] + resid[:-1]
            samples[t] = value
            logits_c[t], logits_f[t], states[t] = lc.cpu(), lf.cpu(), state.cpu()
            c_prev, f_prev = c_t, f_t
        return samples, logits_c, logits_f, states
