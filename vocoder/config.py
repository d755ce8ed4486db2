"""The vocoder's configuration: what a WaveRNN *is*, stored in ``voice.json["vocoder"]``.

Training options (steps, learning rate, batch) live in the trainer's config, not here;
the pruning schedule is here because it decides the exported block structure.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from wavern.dsp import LTP_MAX_LAG, LTP_MAX_TAPS, MelConfig
from wavern.errors import ParameterError
from wavern.vocoder.format import MAX_COND_BLOCKS, MAX_COND_CHANNELS, MAX_HIDDEN

__all__ = ["VocoderConfig", "BLOCK_SHAPES", "N_PITCH_FEATURES"]

N_PITCH_FEATURES = 2  # columns of wavern.dsp.pitch_features

#: Block shapes the pruner and the engine support (REFERENCES §7: 16x4 ran fastest).
BLOCK_SHAPES = ((16, 4), (8, 4), (4, 4), (16, 1))


@dataclasses.dataclass(frozen=True)
class VocoderConfig:
    """Shape of a dual-softmax WaveRNN (docs/ARCHITECTURE.md, "The WaveRNN").

    Every field is stored with the voice; loading rebuilds the model from these alone.
    """

    hidden_size: int = 384  # H; split into coarse/fine halves. 384 dense-equivalent cost at 10 % density
    cond_channels: int = 128  # C; width of the per-frame conditioning vector added to the GRU input
    cond_blocks: int = 3  # residual blocks: receptive field ±(2 + cond_blocks) = ±5 frames (~58 ms)
    block_rows: int = 16  # pruning block height; 16x4 is the engine's fastest layout (REFERENCES §7)
    block_cols: int = 4  # pruning block width
    target_density: float = 0.1  # fraction of blocks kept in W_hh and O1..O4 after the ramp
    prune_start_step: int = 2000  # let the dense net learn something before removing weights
    prune_ramp_steps: int = 8000  # S in z_t = Z (1 - (1 - (t - t0)/S)^3)
    prune_every_steps: int = 200  # mask refresh interval; masks are re-applied after every step
    mel: MelConfig = dataclasses.field(default_factory=MelConfig)  # features the net was trained on
    # > 0: the net models the excitation e_t = s_t - round(p_t) of an order-lpc_order predictor
    # p_t = -sum_k a_k s_{t-k} taken from each frame's mel (wavern.dsp.mel_lpc), LPCNet's split;
    # p_t / 32768 is a fourth GRU input. 0: the net models s_t itself (every shipped voice so far).
    lpc_order: int = 0
    # with lpc_order > 0: whether p_t / 32768 is a GRU input (LPCNet does this). Without it the net
    # is an ordinary 3-input WaveRNN of the excitation, and the prediction is added back after it
    # (an all-pole synthesis filter outside the network).
    lpc_prediction_input: bool = True
    # How the output layers O2 / O4 (one row per class) lose blocks: "global" keeps the largest
    # blocks of the whole matrix; "rows" keeps the same number in every row of blocks, so no group
    # of classes is left with a bias alone (an LPC excitation lives in a few central coarse
    # classes, which global pruning emptied in the first LPC run; docs/TRAINING.md).
    head_pruning: str = "global"
    # True: the conditioning net reads two pitch channels after the mel, wavern.dsp.pitch_features
    # (log2 f0 / 120 Hz filled in across unvoiced frames, YIN periodicity), LPCNet's pitch inputs:
    # without them the net must find the period in 80 mel bands and kept an LPC excitation
    # noise-like (docs/TRAINING.md).
    pitch: bool = False
    # with lpc_order > 0, how the excitation becomes the 16-bit value the softmaxes predict:
    # "linear" e_t = clip(s_t - rint(p_t)) (every shipped LPC voice so far); "mulaw" the mu-law
    # code (wavern.dsp.mulaw_compress, mu 255) of s_t - p_t, LPCNet's companding: the excitation
    # is spiky (median |e| 79, rms 463 on the corpus), so a linear code leaves its shape to the
    # fine byte (docs/TRAINING.md).
    excitation: str = "linear"
    # with LPC and pitch features: a long-term predictor beta_f r_{t - T_f} of the residual
    # r = s - p (wavern.dsp.ltp_params of each frame's pitch features) is taken out too, so the
    # net models the innovation and the synthesis filter carries the period (a linear code is
    # then rint(r_t - beta r_{t-T}), p unrounded).
    ltp: bool = False
    # with ltp: the residuals around one period back, r_{t-T+d} / wavern.dsp.LTP_INPUT_SCALE (0 where
    # the frame has no lag), as the last GRU input columns (ltp_input_taps of them): they tell the
    # net where the last period put its pulse, so it can draw this period's at the same place
    # (docs/TRAINING.md).
    ltp_input: bool = False
    # with ltp_input: how many residuals around t - T it reads, r_{t-T+d} for |d| <= taps // 2 (odd):
    # the pulse one period back is rarely at exactly t - T (a rounded lag of a gliding pitch: the largest
    # |r| within 8 samples of t - T is at t - T for 10 % of the pulses, within 2 for 35 %, measured by
    # bench/vocoder_diagnostics.py pulse-offsets), so a window lets the net find it
    ltp_input_taps: int = 1
    # with ltp_input: K > 0 adds the glottal phase phi_t as 2K more GRU inputs, g sin(2 pi k phi_t) and
    # g cos(2 pi k phi_t) for k = 1 .. K, g = wavern.dsp.PHASE_INPUT_GAIN (0 where the frame has no lag). In training phi comes from the
    # true residual's pulses (wavern.dsp.pulse_phase: 0 at each pulse, rising linearly to the next);
    # in generation it advances by 1 / T each sample of a voiced frame and restarts at 0 after an
    # unvoiced one (wavern.dsp.phase_step), so the net knows where the next pulse is due even when
    # its own last one came out weak (docs/TRAINING.md).
    phase_input: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.mel, dict):  # tolerate a nested dict (from_dict does this properly)
            object.__setattr__(self, "mel", MelConfig.from_dict(self.mel))
        for name in ("hidden_size", "cond_channels", "cond_blocks", "block_rows", "block_cols", "prune_start_step",
                     "prune_ramp_steps", "prune_every_steps"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise ParameterError(f"{name} must be an integer, found {v!r}")
        if not isinstance(self.target_density, (int, float)) or isinstance(self.target_density, bool):
            raise ParameterError(f"target_density must be a number, found {self.target_density!r}")
        h = self.hidden_size
        if h <= 0 or h % 2 or h > MAX_HIDDEN:
            raise ParameterError(f"hidden_size must be a positive even number <= {MAX_HIDDEN}, found {h}")
        if not 0 < self.cond_channels <= MAX_COND_CHANNELS:
            raise ParameterError(f"cond_channels must be in [1, {MAX_COND_CHANNELS}], found {self.cond_channels}")
        if not 1 <= self.cond_blocks <= MAX_COND_BLOCKS:  # the engine's conditioning net has at least one
            raise ParameterError(f"cond_blocks must be in [1, {MAX_COND_BLOCKS}], found {self.cond_blocks}")
        shape = (self.block_rows, self.block_cols)
        if shape not in BLOCK_SHAPES:
            raise ParameterError(f"block shape {shape} is not supported; choose one of {list(BLOCK_SHAPES)}")
        br, bc = shape
        half = h // 2
        # Every pruned matrix must tile exactly: W_hh gate slabs (H x H), O1/O3 (H/2 x H/2), O2/O4 (256 x H/2).
        if half % br or half % bc or 256 % br:
            raise ParameterError(
                f"hidden_size {h}: H/2 = {half} must be a multiple of the block shape {shape}; "
                f"use a multiple of {2 * max(br, bc)}")
        if not 0.0 < self.target_density <= 1.0:
            raise ParameterError(f"target_density must be in (0, 1], found {self.target_density}")
        if self.prune_start_step < 0 or self.prune_ramp_steps < 1 or self.prune_every_steps < 1:
            raise ParameterError(
                "prune_start_step must be >= 0 and prune_ramp_steps, prune_every_steps >= 1; found "
                f"{self.prune_start_step}, {self.prune_ramp_steps}, {self.prune_every_steps}")
        if not isinstance(self.lpc_order, int) or isinstance(self.lpc_order, bool) or not 0 <= self.lpc_order <= 64:
            raise ParameterError(f"lpc_order must be an integer in [0, 64], found {self.lpc_order!r}")
        if self.head_pruning not in ("global", "rows"):
            raise ParameterError(f"head_pruning must be 'global' or 'rows', found {self.head_pruning!r}")
        if not isinstance(self.lpc_prediction_input, bool):
            raise ParameterError(f"lpc_prediction_input must be true or false, found {self.lpc_prediction_input!r}")
        if self.excitation not in ("linear", "mulaw"):
            raise ParameterError(f"excitation must be 'linear' or 'mulaw', found {self.excitation!r}")
        if self.excitation == "mulaw" and not self.lpc_order:
            raise ParameterError("excitation 'mulaw' codes an LPC excitation: it needs lpc_order > 0")
        if not isinstance(self.pitch, bool):
            raise ParameterError(f"pitch must be true or false, found {self.pitch!r}")
        if not isinstance(self.ltp, bool):
            raise ParameterError(f"ltp must be true or false, found {self.ltp!r}")
        if self.ltp and not (self.lpc_order and self.pitch):
            raise ParameterError("ltp (a long-term predictor) needs lpc_order > 0 and pitch features")
        if not isinstance(self.ltp_input, bool):
            raise ParameterError(f"ltp_input must be true or false, found {self.ltp_input!r}")
        if self.ltp_input and not self.ltp:
            raise ParameterError("ltp_input (the residual one period back as an input) needs ltp")
        taps = self.ltp_input_taps
        if not isinstance(taps, int) or isinstance(taps, bool) or taps < 1 or taps % 2 == 0 or taps > LTP_MAX_TAPS:
            raise ParameterError(f"ltp_input_taps must be an odd integer in [1, {LTP_MAX_TAPS}], found {taps!r}")
        k = self.phase_input
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= 8:
            raise ParameterError(f"phase_input must be an integer in [0, 8], found {k!r}")
        if k and not self.ltp_input:
            raise ParameterError("phase_input (the glottal phase as an input) needs ltp_input")
        if self.mel.n_mels <= 0 or self.mel.hop_length <= 0:
            raise ParameterError(f"mel config needs positive n_mels and hop_length, found {self.mel}")

    @property
    def block_shape(self) -> tuple[int, int]:
        return self.block_rows, self.block_cols

    @property
    def input_names(self) -> tuple[str, ...]:
        """The per-sample GRU inputs before the conditioning, in column order: ``c_{t-1}, f_{t-1},
        c_t``, then ``p_t`` (LPC with the prediction input), then ``r_{t-T+d}`` for each offset d of
        :attr:`ltp_offsets` (``ltp_input``; "ltp_residual" is d = 0, "ltp_residual-1" d = -1, ...),
        then ``phase_sin1, phase_cos1, ..`` up to :attr:`phase_input`."""
        names = ("c_prev", "f_prev", "c_cur")
        if self.lpc_order and self.lpc_prediction_input:
            names += ("prediction",)
        for d in self.ltp_offsets:
            names += ("ltp_residual" + (f"{d:+d}" if d else ""),)
        for k in range(1, self.phase_input + 1):
            names += (f"phase_sin{k}", f"phase_cos{k}")
        return names

    @property
    def ltp_offsets(self) -> tuple[int, ...]:
        """The offsets d of the residuals ``r_{t-T+d}`` the GRU reads (none without ``ltp_input``)."""
        half = self.ltp_input_taps // 2
        return tuple(range(-half, half + 1)) if self.ltp_input else ()

    @property
    def n_inputs(self) -> int:
        """How many per-sample GRU inputs come before the conditioning (:attr:`input_names`)."""
        return len(self.input_names)

    @property
    def hop_length(self) -> int:
        return self.mel.hop_length

    @property
    def n_mels(self) -> int:
        return self.mel.n_mels

    @property
    def lpc_columns(self) -> int:
        """Columns of a frame's synthesis filter: ``1, a_1 .. a_P``, then with ``ltp`` its lag and gain."""
        return self.lpc_order + 1 + (2 if self.ltp else 0)

    @property
    def history_frames(self) -> int:
        """Frames before a training segment whose filters its first samples need: the one of the
        sample before it, or with ``ltp`` those of the LTP_MAX_LAG + 1 residual samples before it."""
        return -(-(LTP_MAX_LAG + 1) // self.hop_length) if self.ltp else 1

    @property
    def history_samples(self) -> int:
        """Samples before a training segment its first prediction needs."""
        return self.lpc_order + 1 + (LTP_MAX_LAG + 1 if self.ltp else 0)

    @property
    def n_features(self) -> int:
        """Channels of the conditioning input: the log-mel, then the pitch features (with ``pitch``)."""
        return self.mel.n_mels + (N_PITCH_FEATURES if self.pitch else 0)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["mel"] = self.mel.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "VocoderConfig":
        """Strict inverse of :meth:`to_dict`: unknown fields raise :class:`ParameterError`."""
        if not isinstance(d, dict):
            raise ParameterError(f"vocoder config must be a dict, found {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ParameterError(
                f"unknown vocoder config fields {sorted(unknown)}; expected a subset of {sorted(names)}")
        d = dict(d)
        if "mel" in d:
            if not isinstance(d["mel"], (dict, MelConfig)):
                raise ParameterError(f"vocoder config 'mel' must be a dict, found {type(d['mel']).__name__}")
            if isinstance(d["mel"], dict):
                d["mel"] = MelConfig.from_dict(d["mel"])
        return cls(**d)
