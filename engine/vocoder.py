"""The vocoder at run time: load a vocoder file, convert it to the kernel layout, generate.

Typical streaming use (one utterance)::

    voc = Vocoder.load("voice/vocoder.safetensors", cond_blocks=2)
    gi = voc.frame_inputs(mel)                    # (T, 3H), once per utterance / sentence
    state = voc.new_state(seed=1)
    while state.position < len(gi) * voc.hop:
        chunk = voc.generate(gi, state, 1024)     # int16, continues where the last call ended

Successive ``generate`` calls on one state equal one long call. Offline rendering of a long
mel uses :meth:`Vocoder.render`, which folds it into overlapping segments generated as a batch
(REFERENCES section 1, "fold") and cross-fades them.

The engine stores each block-sparse matrix in its own block shape, chosen at load (see
:func:`to_engine`); the maths is docs/ARCHITECTURE.md, "The WaveRNN".
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from wavern.dsp import DEFAULT_MEL, LTP_INPUT_SCALE, LTP_MAX_LAG, LTP_MAX_TAPS, MU_LAW, ltp_params, mel_lpc
from wavern.engine import kernels as K
from wavern.engine.condnet import CondNet
from wavern.errors import ParameterError, VoiceFileError
from wavern.vocoder.format import MAX_HIDDEN, BlockSparse, load_vocoder_tensors

log = logging.getLogger(__name__)

__all__ = ["Vocoder", "VocoderState", "BatchState", "lane_split", "to_engine", "to_engine_int8", "int8_rows",
           "is_half_exact", "engine_dense", "choose_block_kind",
           "fold_frame_inputs", "crossfade_segments", "MAX_RENDER_STREAMS"]

_SPARSE = ("gru.weight_hh", "O1", "O2", "O3", "O4")
_INT8 = ("gru.weight_hh", "O1", "O3")  # the products on the state, which Vocoder(int8=True) runs in int8

#: Most streams one :meth:`Vocoder.render_many` batch call holds (about 200 KB of frame inputs
#: per stream at H = 384); larger item groups take several calls.
MAX_RENDER_STREAMS = 256


# --------------------------------------------------------------------------------------------
# File layout -> engine layout.

def _reblock(dense: np.ndarray, br: int, bc: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Blocks of ``dense`` (rows, cols) with a non-zero entry, column-major, each stored column by
    column. Returns data (nnzb*br*bc,) float32, rowoff (nnzb,) uint32, colptr (ncb+1,) uint32."""
    rows, cols = dense.shape
    nrb, ncb = rows // br, cols // bc
    blocks = dense.reshape(nrb, br, ncb, bc).transpose(2, 0, 3, 1)  # (ncb, nrb, bc, br)
    keep = np.any(blocks != 0, axis=(2, 3))
    cj, ri = np.nonzero(keep)  # column-major order
    data = np.ascontiguousarray(blocks[cj, ri], dtype=np.float32).reshape(-1)
    rowoff = (ri * br).astype(np.uint32)
    colptr = np.zeros(ncb + 1, dtype=np.uint32)
    colptr[1:] = np.cumsum(np.bincount(cj, minlength=ncb))
    return data, rowoff, colptr


def choose_block_kind(dense: np.ndarray) -> int:
    """The engine block shape (index into ``kernels.BLOCK_SHAPES``) with the least expected time.

    Expected time = stored weights after re-blocking (zeros inside kept blocks count) divided by
    the shape's measured speed (``kernels.MEASURED_GFLOPS``). A file pruned in 16x4 blocks runs
    as 16x4 where numba has 512-bit vectors (``kernels.WIDE_VECTORS``), else as 8x4; 8x4 (or 8x8,
    ...) keeps 8x4; 4x4 keeps 4x4; 16x1 becomes 8x1 without fill.
    """
    rows, cols = dense.shape
    best, best_cost = -1, np.inf
    for kind, (br, bc) in enumerate(K.BLOCK_SHAPES):
        if rows % br or cols % bc:
            continue
        nz = np.any(dense.reshape(rows // br, br, cols // bc, bc) != 0, axis=(1, 3)).sum()
        cost = nz * br * bc / K.MEASURED_GFLOPS[(br, bc)]
        if cost < best_cost:
            best, best_cost = kind, cost
    if best < 0:
        raise VoiceFileError(f"matrix shape {dense.shape} fits none of the engine block shapes {K.BLOCK_SHAPES}; "
                             "the hidden size must be a multiple of 8")
    return best


#: Where the one-stream kernels take a matrix's blocks in a flat loop (``kernels.flat``): below
#: this many blocks per block column on average. The shipped voice's output layers (0.6-0.7) ran
#: faster so, its W_hh (3.6) slower (``Vocoder.stream_net``; 2026-12-02, Zen 3).
FLAT_BELOW = 2.0
_MATS = (2, 3, 5, 7, 9)  # the block-sparse matrices' places in ``Vocoder._net``


def to_engine(m: BlockSparse | np.ndarray, *, kind: int | None = None, half: bool = False) -> tuple:
    """Convert a file block-sparse (or dense) matrix to the kernels' ``(data, rowoff, colptr, kind)``.

    ``half``: ``data`` holds the weights' float16 bits (uint16), half the bytes for the kernels to
    stream, widened to float32 as they are loaded; every weight must be a float16 exactly (as a
    voice file's are, see :func:`is_half_exact`), so the products are the float32 path's.
    """
    dense = m.to_dense() if isinstance(m, BlockSparse) else np.asarray(m)
    dense = np.asarray(dense, dtype=np.float32)
    if kind is None:
        kind = choose_block_kind(dense)
    br, bc = K.BLOCK_SHAPES[kind]
    if dense.shape[0] % br or dense.shape[1] % bc:
        raise ParameterError(f"matrix shape {dense.shape} is not a multiple of block shape {(br, bc)}")
    data, rowoff, colptr = _reblock(dense, br, bc)
    if half:
        if not is_half_exact(data):
            raise ParameterError("half: some weights are not float16 values; keep them float32")
        data = data.astype(np.float16).view(np.uint16)
    return data, rowoff, colptr, int(kind)


def int8_rows(dense: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The int8 product's weights (``kernels.int8``): per row ``s = max |w| / 63`` (1 for a row
    of zeros) and ``q = round(w / s)`` (half to even), in float32. Returns q (rows, cols) int8
    and s (rows,) float32."""
    w = np.asarray(dense, dtype=np.float32)
    s = np.max(np.abs(w), axis=1) / np.float32(K.Q_WEIGHT)
    s[s == 0] = np.float32(1.0)
    q = np.clip(np.rint(w / s[:, None]), -K.Q_WEIGHT, K.Q_WEIGHT).astype(np.int8)
    return q, s.astype(np.float32)


def to_engine_int8(m: BlockSparse | np.ndarray) -> tuple:
    """A file block-sparse (or dense) matrix as the int8 product's
    ``(data, colidx, rowptr, kind, fix, scale)`` (``kernels.int8``, by row groups): 16x4 blocks where the
    matrix's stored blocks are 16 rows tall, else 8x4. The weights are rounded (:func:`int8_rows`):
    this is another numerical model than the float one, close to it (docs/ARCHITECTURE.md)."""
    dense = m.to_dense() if isinstance(m, BlockSparse) else np.asarray(m, dtype=np.float32)
    rows, cols = dense.shape
    if rows % 8 or cols % 4:
        raise ParameterError(f"the int8 product needs 8 x 4 blocks: matrix shape {dense.shape} is not a multiple")
    q, s = int8_rows(dense)
    nonzero = dense != 0
    tall = rows % 16 == 0 and np.array_equal(
        np.any(nonzero.reshape(rows // 16, 16, cols // 4, 4), axis=(1, 3)).repeat(2, axis=0),
        np.any(nonzero.reshape(rows // 8, 8, cols // 4, 4), axis=(1, 3)))
    kind = 3 if tall else 0
    br = K.BLOCK_SHAPES[kind][0]
    # the blocks that hold a weight, from the float matrix (a weight that rounds to 0 keeps its
    # block), by row group and within it by column
    gi, cj = np.nonzero(np.any(nonzero.reshape(rows // br, br, cols // 4, 4), axis=(1, 3)))
    blocks = q.reshape(rows // br, br, cols // 4, 4)[gi, :, cj, :]  # (nnzb, br, 4): row by row
    data = np.ascontiguousarray(blocks, dtype=np.int8).reshape(-1)
    colidx = cj.astype(np.uint32)
    rowptr = np.zeros(rows // br + 1, np.uint32)
    rowptr[1:] = np.cumsum(np.bincount(gi, minlength=rows // br))
    fix = (-K.STATE_OFFSET * q.astype(np.int64).sum(axis=1)).astype(np.int32)
    scale = (s / np.float32(K.Q_STATE)).astype(np.float32)
    return data, colidx, rowptr, int(kind), fix, scale


def is_half_exact(weights: np.ndarray) -> bool:
    """True when every value of ``weights`` is a float16 (a voice file's always are)."""
    w = np.asarray(weights, dtype=np.float32)
    with np.errstate(over="ignore"):
        return bool(np.array_equal(w.astype(np.float16).astype(np.float32), w))


def _kernel_dense(a: np.ndarray, half: bool) -> np.ndarray:
    """A dense weight array as the kernels read it: C-contiguous float32, or with ``half`` (its
    values all float16) the uint16 bits of those float16 values (``kernels._w`` widens them)."""
    if half:
        return np.ascontiguousarray(a, dtype=np.float16).view(np.uint16)
    return np.ascontiguousarray(a, dtype=np.float32)


def engine_dense(mat: tuple, shape: tuple[int, int]) -> np.ndarray:
    """The dense matrix an engine tuple (or its ``kernels.flat`` form) stands for (for tests and checks)."""
    data, rowoff, colptr, kind = mat
    if data.dtype == np.uint16:
        data = data.view(np.float16).astype(np.float32)
    br, bc = K.BLOCK_SHAPES[kind % K.FLAT]
    out = np.zeros(shape, dtype=np.float32)
    blocks = data.reshape(-1, bc, br)
    if kind >= K.FLAT:  # one block column index per block
        cols = colptr
    else:
        cols = np.repeat(np.arange(colptr.shape[0] - 1), np.diff(colptr.astype(np.int64)))
    for k, j in enumerate(cols):
        r = int(rowoff[k])
        out[r:r + br, int(j) * bc:(int(j) + 1) * bc] = blocks[k].T
    return out


# --------------------------------------------------------------------------------------------
# Generator state.

@dataclasses.dataclass
class VocoderState:
    """Everything one stream carries between chunk calls (arrays updated in place).

    h: (H,) float32 GRU state; prev: (2,) int64 (c_{t-1}, f_{t-1}); rng: (1,) uint64 splitmix64
    state; position: index of the next sample of the utterance (frame = position // hop).
    work: the kernel's scratch, allocated once.
    """

    h: np.ndarray
    prev: np.ndarray
    rng: np.ndarray
    position: int
    work: np.ndarray
    lpc_hist: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))  # (P,) s_{t-1}.. (LPC)
    ltp_ring: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))  # (LTP_MAX_LAG + 1,) residuals
    ltp_head: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(1, np.int64))  # (1,): newest's slot
    phase: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(1))  # (1,) glottal phase (phase input)


#: Streams of a period-input vocoder generated together, a group after another: every sample step
#: of the stream-major kernel visits each stream's state (its residual ring of LTP_MAX_LAG + 1
#: float64, history, scratch), which for hundreds of streams no longer fits the core's cache
#: (shipped voice, this Xeon, interleaved: 4.3-4.6 us per sample per stream for 4-32 streams,
#: 5.2 for 128, 6.3 for 320, the batch `render_utterances` made of 24 items).
STREAM_GROUP = 16


def lane_split(batch_size: int) -> int:
    """How many of B streams run in lanes (``kernels._generate_lanes``); the rest run stream-major
    (``kernels._generate_streams``, four streams per weight load).

    Measured at H = 384 and 512, 10 % density, CPU time per sample per stream (docs/bench/engine.md,
    "Batches in lanes"): stream-major costs about the same from 4 to 48 streams; lanes cost more
    below 16 streams, about the same from 16 to 24 and 10-20 % less from 32 on. So: lanes from 24
    streams on, for the largest multiple of 8 (the 1-7 left over go stream-major).
    """
    B = int(batch_size)
    return 0 if B < 24 else B // K.LANE_MULTIPLE * K.LANE_MULTIPLE


@dataclasses.dataclass
class BatchState:
    """B streams advancing together (all at one position).

    The first ``n_lanes`` streams run in lanes (``kernels._generate_lanes``): ``h_lanes`` (H, L)
    float32, column s = stream s's GRU state (L = ``kernels.lanes(n_lanes)``; columns beyond are
    padding), ``work_lanes`` their scratch. The others (:func:`lane_split`) run stream-major
    (``kernels._generate_streams``): ``h_streams`` (B - n_lanes, H), ``work_streams``.
    prev: (B, 2) int64; rng: (B,) uint64; position: the next sample.
    """

    h_lanes: np.ndarray
    h_streams: np.ndarray
    prev: np.ndarray
    rng: np.ndarray
    position: int
    work_lanes: np.ndarray
    work_streams: np.ndarray
    lpc_hist: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 0)))  # (B, P) (LPC)
    ltp_ring: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 0)))  # (B, LTP_MAX_LAG + 1)
    ltp_head: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 1), np.int64))  # (B, 1)
    # (B, 3H) float32: each stream's gate inputs plus its period input (period-input vocoders)
    work_period: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 0), np.float32))
    phase: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 1)))  # (B, 1) glottal phases

    @property
    def batch_size(self) -> int:
        return int(self.prev.shape[0])

    @property
    def n_lanes(self) -> int:
        return self.batch_size - int(self.h_streams.shape[0])

    @property
    def h(self) -> np.ndarray:
        """(B, H) copy of the streams' GRU states."""
        return np.ascontiguousarray(np.concatenate([self.h_lanes[:, :self.n_lanes].T, self.h_streams]))


# --------------------------------------------------------------------------------------------
# The vocoder.

class Vocoder:
    """A WaveRNN vocoder in the engine's layout.

    Build with :meth:`load` (a ``vocoder.safetensors``) or :meth:`from_tensors` (what
    :func:`wavern.vocoder.format.load_vocoder_tensors` returns).
    """

    hop = K.HOP

    def __init__(self, dense: dict[str, np.ndarray], sparse: dict[str, BlockSparse], *, cond_blocks: int,
                 lpc_order: int = 0, excitation: str = "linear", ltp: bool = False, ltp_input: bool = False,
                 ltp_input_taps: int = 1, phase_input: int = 0, int8: bool = False):
        if not isinstance(lpc_order, int) or isinstance(lpc_order, bool) or not 0 <= lpc_order <= 64:
            raise VoiceFileError(f"vocoder lpc_order must be an integer in [0, 64], found {lpc_order!r}")
        if excitation not in ("linear", "mulaw") or (excitation == "mulaw" and not lpc_order):
            raise VoiceFileError(f"vocoder excitation must be 'linear' or (with lpc_order > 0) 'mulaw', "
                                 f"found {excitation!r} with lpc_order {lpc_order}")
        #: > 0: the net generates the excitation of this order's predictor from the mel, and
        #: generation adds the prediction back (``kernels._lpc_synthesis``).
        self.lpc_order = lpc_order
        #: "mulaw": the excitation is mu-law coded (``wavern.dsp.mulaw_compress``); "linear": it is not.
        self.excitation = excitation
        self._mu = MU_LAW if excitation == "mulaw" else 0.0
        if ltp and not lpc_order:
            raise VoiceFileError("a long-term predictor (vocoder ltp) needs lpc_order > 0")
        #: True: the features end with pitch features, from which each frame gets a long-term
        #: predictor (``wavern.dsp.ltp_params``) whose residual memory is in the stream state.
        self.ltp = bool(ltp)
        self._ring = LTP_MAX_LAG + 1 if ltp else 0
        if ltp_input and not ltp:
            raise VoiceFileError("the period input (vocoder ltp_input) needs a long-term predictor (ltp)")
        #: True: the GRU also reads the residuals around one period back (``kernels._generate_period``),
        #: so the synthesis filter runs inside the generation loop; batches run stream-major (no lanes).
        self.ltp_input = bool(ltp_input)
        if not isinstance(ltp_input_taps, int) or isinstance(ltp_input_taps, bool) or ltp_input_taps < 1 \
                or ltp_input_taps % 2 == 0 or ltp_input_taps > LTP_MAX_TAPS:
            raise VoiceFileError(f"vocoder ltp_input_taps must be an odd integer in [1, {LTP_MAX_TAPS}] (the window "
                                 f"stays in the residual history), found {ltp_input_taps!r}")
        #: how many residuals around one period back the GRU reads (r_{t-T+d}, |d| <= taps // 2)
        self.ltp_input_taps = int(ltp_input_taps) if ltp_input else 0
        if not isinstance(phase_input, int) or isinstance(phase_input, bool) or not 0 <= phase_input <= 8 \
                or (phase_input and not ltp_input):
            raise VoiceFileError(f"vocoder phase_input must be an integer in [0, 8], > 0 only with ltp_input; "
                                 f"found {phase_input!r}")
        #: K > 0: the GRU also reads sin / cos of the glottal phase's first K harmonics (the phase
        #: advances 1 / T a sample in voiced frames, ``kernels._period_inputs``)
        self.phase_input = int(phase_input)
        n_taps = 3 + self.ltp_input_taps
        n_in = n_taps + 2 * self.phase_input
        self.cond = CondNet.from_tensors(dense, cond_blocks=cond_blocks)
        self.cond_blocks = int(cond_blocks)
        whh = sparse.get("gru.weight_hh")
        if whh is None:
            raise VoiceFileError("vocoder tensor 'gru.weight_hh' is missing")
        h3, H = whh.shape
        if h3 != 3 * H or H % 2 or H > MAX_HIDDEN:  # (checked before a matrix of that size is made)
            raise VoiceFileError(f"gru.weight_hh must be (3H, H) with H even and at most {MAX_HIDDEN}, "
                                 f"found {whh.shape}")
        hh = H // 2
        C = self.cond.channels
        expect = {"gru.weight_hh": (3 * H, H), "O1": (hh, hh), "O3": (hh, hh),
                  "O2": (K.N_CLASSES, hh), "O4": (K.N_CLASSES, hh)}
        for name, shape in expect.items():
            if name not in sparse:
                raise VoiceFileError(f"vocoder tensor '{name}' is missing")
            sparse[name].validate(name, shape)
        w_ih = dense.get("gru.weight_ih")
        if w_ih is None or tuple(w_ih.shape) != (3 * H, n_in + C):
            raise VoiceFileError(f"gru.weight_ih: expected shape {(3 * H, n_in + C)}, "
                                 f"found {None if w_ih is None else tuple(w_ih.shape)}")
        coarse_rows = np.concatenate([np.arange(g * H, g * H + hh) for g in range(3)])
        leak = float(np.max(np.abs(w_ih[coarse_rows, 2])))
        if leak != 0.0:
            raise VoiceFileError(f"gru.weight_ih[coarse rows, 2] must be 0 (the current coarse sample feeds only "
                                 f"the fine half), found max |w| = {leak:g}; export the masked weights")

        def vec(name: str, n: int) -> np.ndarray:
            arr = dense.get(name)
            if arr is None or tuple(arr.shape) != (n,):
                raise VoiceFileError(f"vocoder tensor '{name}': expected shape {(n,)}, "
                                     f"found {None if arr is None else tuple(arr.shape)}")
            return np.ascontiguousarray(arr, dtype=np.float32)

        self.hidden_size = int(H)
        self.cond_channels = int(C)
        # The frame part of W_ih as a 1-tap convolution (3H, C, 1) after the conditioning net.
        self._proj = K.conv_taps(w_ih[:, n_in:, None], vec("gru.bias_ih", 3 * H))
        #: True: the block-sparse weights are all float16 values (a voice file's are), so the
        #: kernels read them as float16 (half the bytes per sample; the same products)
        self.half_weights = all(is_half_exact(sparse[name].data) for name in _SPARSE)
        #: True: the products that read the state (W_hh h, and O1, O3 on its halves) run as int8
        #: products (``kernels.int8``: int8 weights, the state in 8 bits; another numerical model,
        #: close to the float one). O2, O4 (on ReLU outputs) stay float.
        self.int8 = bool(int8)
        mats = {name: to_engine_int8(sparse[name]) if self.int8 and name in _INT8
                else to_engine(sparse[name], half=self.half_weights) for name in _SPARSE}
        self.block_shapes = {name: K.BLOCK_SHAPES[m[3]] for name, m in mats.items()}
        self.nnz_weights = {name: int(m[0].shape[0]) for name, m in mats.items()}
        # The per-sample input columns of W_ih (the samples, the period taps) go as float16 bits
        # too where the blocks do and they are float16 values: 18 kB less read per sample at H 384.
        half_in = self.half_weights and is_half_exact(w_ih[:, :n_taps])
        cols = lambda a, b: _kernel_dense(w_ih[:, a:b].T, half_in)  # noqa: E731 - (b - a, 3H)
        self._w_back = cols(3, n_taps) if ltp_input else None
        self._w_phase = np.ascontiguousarray(w_ih[:, n_taps:n_in].T, dtype=np.float32)  # (2K, 3H)
        self._net = (cols(0, 3),  # (3, 3H) sample columns
                     vec("gru.bias_hh", 3 * H),
                     mats["gru.weight_hh"], mats["O1"], vec("O1.bias", hh), mats["O2"], vec("O2.bias", K.N_CLASSES),
                     mats["O3"], vec("O3.bias", hh), mats["O4"], vec("O4.bias", K.N_CLASSES))
        log.info("vocoder H=%d C=%d, engine blocks %s", H, C, self.block_shapes)

    @classmethod
    def from_tensors(cls, dense: dict[str, np.ndarray], sparse: dict[str, BlockSparse], *,
                     cond_blocks: int, lpc_order: int = 0, excitation: str = "linear", ltp: bool = False,
                     ltp_input: bool = False, ltp_input_taps: int = 1, phase_input: int = 0,
                     int8: bool = False) -> "Vocoder":
        return cls(dense, sparse, cond_blocks=cond_blocks, lpc_order=lpc_order, excitation=excitation, ltp=ltp,
                   ltp_input=ltp_input, ltp_input_taps=ltp_input_taps, phase_input=phase_input, int8=int8)

    @classmethod
    def load(cls, path: str | os.PathLike, *, cond_blocks: int, hidden_size: int | None = None,
             cond_channels: int | None = None, lpc_order: int = 0, excitation: str = "linear",
             ltp: bool = False, ltp_input: bool = False, ltp_input_taps: int = 1,
             phase_input: int = 0, int8: bool = False) -> "Vocoder":
        """Read a vocoder file; ``hidden_size`` / ``cond_channels``, if given, must match it.
        ``int8``: run the products on the state as int8 products (:attr:`int8`)."""
        dense, sparse = load_vocoder_tensors(path, cond_blocks=cond_blocks)
        voc = cls(dense, sparse, cond_blocks=cond_blocks, lpc_order=lpc_order, excitation=excitation, ltp=ltp,
                  ltp_input=ltp_input, ltp_input_taps=ltp_input_taps, phase_input=phase_input, int8=int8)
        for name, want, got in (("hidden_size", hidden_size, voc.hidden_size),
                                ("cond_channels", cond_channels, voc.cond_channels)):
            if want is not None and want != got:
                raise VoiceFileError(f"{path}: vocoder.{name} is {want} in voice.json but {got} in the file")
        return voc

    # ---- per utterance ------------------------------------------------------------------------

    @property
    def flops_per_sample(self) -> int:
        """Multiply-adds x 2 of the block products per sample, counting stored blocks only."""
        return 2 * sum(self.nnz_weights.values())

    @property
    def frame_width(self) -> int:
        """Columns of :meth:`frame_inputs`: 3H gate inputs, then the LPC predictor's ``lpc_order``
        (and with ``ltp`` the long-term predictor's lag and gain)."""
        return 3 * self.hidden_size + self.lpc_order + (2 if self.ltp else 0)

    def frame_inputs(self, mel: np.ndarray, *, ltp_gain_scale: float = 1.0) -> np.ndarray:
        """Per-frame gate inputs ``W_ih[:, 3:] cond_t + b_ih`` (T, 3H) float32 of a log-mel (T, 80)
        (a pitch vocoder's features: (T, 82), the mel then the pitch features); an LPC vocoder
        appends each frame's predictor ``a_1 .. a_P`` (:func:`wavern.dsp.mel_lpc` of the mel
        channels, float32), and with ``ltp`` the frame's lag and gain (:func:`wavern.dsp.ltp_params`),
        so (T, :attr:`frame_width`): the frames carry them wherever they go (windows, folding, batches).
        ``ltp_gain_scale``: every frame's long-term gain times this (``ltp_params``' ``gain_scale``: a
        sampling-time setting, 1 as trained; a voice's ``inference.ltp_gain_scale`` in mel-matched requests).

        The conditioning net (:class:`~wavern.engine.condnet.CondNet`) and the projection run in
        ``kernels.conv1d_taps``: every output is one fixed chain of fused multiply-adds, so row t
        depends only on the mel frames within the receptive field of t, never on T, on how many
        threads numpy's BLAS uses or on buffer alignment. The same mel gives the same bytes in
        any process, and a window of the mel gives the whole mel's rows away from its edges.
        """
        gi = K.conv1d_taps(self.cond(mel), self._proj)  # (T, C) -> (T, 3H)
        if not self.lpc_order:
            return gi
        # the voice's dsp equals the runtime's (voicefile); row by row, so a window gives the whole's rows
        mel = np.asarray(mel)
        a = mel_lpc(mel[:, :DEFAULT_MEL.n_mels], self.lpc_order, DEFAULT_MEL)[:, 1:].astype(np.float32)
        parts = [gi, a]
        if self.ltp:  # the pitch features after the mel give each frame its (lag, gain)
            parts.append(ltp_params(mel[:, DEFAULT_MEL.n_mels:DEFAULT_MEL.n_mels + 2], DEFAULT_MEL,
                                    gain_scale=ltp_gain_scale))
        return np.ascontiguousarray(np.concatenate(parts, axis=1))

    @property
    def stream_net(self) -> tuple:
        """The weights as the one-stream kernels take them: ``_net`` with each matrix that averages
        fewer than :data:`FLAT_BELOW` blocks per block column in the flat matvec layout
        (``kernels.flat``: the same sums, no inner loop to leave; the row-pruned output layers).
        Made again whenever ``_net`` is replaced."""
        if getattr(self, "_stream_net_of", None) is not self._net:
            self._stream_net = tuple(
                K.flat(m) if i in _MATS and len(m) != K.INT8_LEN and m[1].shape[0] < FLAT_BELOW * (m[2].shape[0] - 1)
                else m
                for i, m in enumerate(self._net))
            self._stream_net_of = self._net
        return self._stream_net

    def new_state(self, *, seed: int = 0, rng: np.ndarray | None = None) -> VocoderState:
        """A fresh stream: h = 0, previous sample = digital silence (c 128, f 0), position 0."""
        H = self.hidden_size
        rng = K.rng_state(seed) if rng is None else np.array(rng, dtype=np.uint64).reshape(1)
        return VocoderState(h=np.zeros(H, np.float32), prev=np.array([128, 0], np.int64), rng=rng, position=0,
                            # the one-stream kernel's scratch (_generate_period's: 3H more, the period
                            # inputs; the int8 product's state bytes: H/4)
                            work=np.zeros((6 if self.ltp_input else 3) * H + H // 2 + 2 * K.N_CLASSES + H // 4,
                                          np.float32),
                            lpc_hist=np.zeros(self.lpc_order), ltp_ring=np.zeros(self._ring),
                            ltp_head=np.zeros(1, np.int64))

    def new_batch_state(self, rng: np.ndarray) -> BatchState:
        """B fresh streams, stream b drawing from ``rng[b]`` (see ``kernels.rng_states``)."""
        rng = np.array(rng, dtype=np.uint64).reshape(-1)
        B, H = rng.shape[0], self.hidden_size
        if B < 1:
            raise ParameterError("a batch needs at least one stream, found an empty rng array")
        prev = np.zeros((B, 2), np.int64)
        prev[:, 0] = 128
        nl = 0 if self.ltp_input or self.int8 else lane_split(B)  # (no int8 product in lanes)
        L = K.lanes(nl) if nl else 0
        ns = B - nl
        return BatchState(h_lanes=np.zeros((H, L), np.float32), h_streams=np.zeros((ns, H), np.float32),
                          prev=prev, rng=rng, position=0, work_lanes=np.zeros(K.lane_work_size(H, L), np.float32),
                          work_streams=np.zeros(ns * (3 * H + H // 2 + K.N_CLASSES + 2) + K.N_CLASSES + H // 4,
                                                np.float32),
                          lpc_hist=np.zeros((B, self.lpc_order)), ltp_ring=np.zeros((B, self._ring)),
                          ltp_head=np.zeros((B, 1), np.int64),
                          work_period=np.zeros((B, 3 * H if self.ltp_input else 0), np.float32),
                          phase=np.zeros((B, 1)))

    def _check_frames(self, gi: np.ndarray, ndim: int, frame0: int, position: int, n: int) -> None:
        if gi.dtype != np.float32 or gi.ndim != ndim or gi.shape[-1] != self.frame_width \
                or not gi.flags.c_contiguous:
            raise ParameterError(f"frame inputs must be C-contiguous float32 with {ndim} dims and last dim "
                                 f"{self.frame_width} (from frame_inputs), found {gi.dtype} {gi.shape}")
        if n < 0:
            raise ParameterError(f"n_samples must be >= 0, found {n}")
        first = position // self.hop
        last = (position + n - 1) // self.hop
        have = gi.shape[-2]
        if n and (first < frame0 or last >= frame0 + have):
            raise ParameterError(f"samples {position}..{position + n - 1} need frames {first}..{last}, "
                                 f"but the inputs hold frames {frame0}..{frame0 + have - 1}")

    def generate(self, gi: np.ndarray, state: VocoderState, n_samples: int, *, frame0: int = 0,
                 temperature: float = 1.0, out: np.ndarray | None = None,
                 logits_out: np.ndarray | None = None) -> np.ndarray:
        """Generate the next ``n_samples`` of one stream; advances ``state``.

        Parameters
        ----------
        gi : (F, frame_width) float32 from :meth:`frame_inputs`, holding frames ``frame0 .. frame0+F-1`` of
            the utterance (a streaming caller may drop frames already played).
        state : the stream, at ``state.position``.
        n_samples : samples to make; they must fall inside the frames held.
        temperature : softmax temperature, in [0.01, 10].
        out : optional (n_samples,) int16 to fill instead of a new array.
        logits_out : optional (n_samples, 2, 256) float32 receiving the coarse and fine logits.

        Returns
        -------
        (n_samples,) int16 samples (``out`` when given).
        """
        self._check_frames(gi, 2, frame0, state.position, n_samples)
        inv = np.float32(1.0 / K.check_temperature(temperature))
        out = _out_buffer(out, (n_samples,), np.int16)
        if logits_out is None:
            logits_out = np.zeros((0, 2, K.N_CLASSES), np.float32)
        else:
            _check_buffer(logits_out, (n_samples, 2, K.N_CLASSES), np.float32, "logits_out")
        if self.ltp_input:  # the net reads the samples' residual: the synthesis runs inside the loop
            K._generate_period(gi, int(frame0), int(state.position), self.hop, self.stream_net, inv, state.h, state.prev,
                               state.rng, out, logits_out, state.work, self._w_back, LTP_INPUT_SCALE,
                               self.lpc_order, state.lpc_hist, self._mu, state.ltp_ring, state.ltp_head,
                               self._w_phase, state.phase)
            state.position += n_samples
            return out
        K._generate(gi, int(frame0), int(state.position), self.hop, self.stream_net, inv, state.h, state.prev,
                    state.rng, out, logits_out, state.work)
        if self.lpc_order:  # the net made the excitation: add the prediction back
            K._lpc_synthesis(out, gi, 3 * self.hidden_size, self.lpc_order, int(frame0), int(state.position),
                             self.hop, state.lpc_hist, self._mu, state.ltp_ring, state.ltp_head)
        state.position += n_samples
        return out

    def generate_batch(self, gi: np.ndarray, state: BatchState, n_samples: int, *, frame0: int = 0,
                       temperature: float = 1.0, out: np.ndarray | None = None,
                       logits_out: np.ndarray | None = None) -> np.ndarray:
        """B streams at once: gi (B, F, frame_width) -> (B, n_samples) int16.

        Stream b gives exactly what :meth:`generate` gives on ``gi[b]`` with the same RNG state.
        ``logits_out``: optional (B, n_samples, 2, 256) float32. The streams run in lanes
        (``kernels._generate_lanes``: each weight is broadcast into up to 32 streams), except
        those :func:`lane_split` leaves to the stream-major kernel.
        """
        self._check_frames(gi, 3, frame0, state.position, n_samples)
        B = state.batch_size
        if gi.shape[0] != B:
            raise ParameterError(f"frame inputs hold {gi.shape[0]} streams but the state has {B}")
        inv = np.float32(1.0 / K.check_temperature(temperature))
        out = _out_buffer(out, (B, n_samples), np.int16)
        if logits_out is None:
            logits_out = np.zeros((B, 0, 2, K.N_CLASSES), np.float32)
        else:
            _check_buffer(logits_out, (B, n_samples, 2, K.N_CLASSES), np.float32, "logits_out")
        nl = state.n_lanes
        if self.ltp_input:  # stream-major only; each stream's synthesis runs inside its generation loop
            for a in range(0, B, STREAM_GROUP):  # the streams are independent: a group at a time, cache-sized
                g = slice(a, min(B, a + STREAM_GROUP))
                self._period_streams(gi, state, g, int(frame0), int(state.position), inv, out[g], logits_out[g])
            state.position += n_samples
            return out
        if B == 1:  # one stream: the one-stream kernel (fewer loads than the four-stream product)
            K._generate(gi[0], int(frame0), int(state.position), self.hop, self.stream_net, inv, state.h_streams[0],
                        state.prev[0], state.rng[0:1], out[0], logits_out[0], state.work_streams)
            self._synthesis(gi, state, frame0, out)
            state.position += n_samples
            return out
        if nl:
            K._generate_lanes(gi[:nl], int(frame0), int(state.position), self.hop, self._net, inv,
                              state.h_lanes.reshape(-1), state.prev[:nl], state.rng[:nl], out[:nl],
                              logits_out[:nl], state.work_lanes)
        if nl < B:
            K._generate_streams(gi[nl:], int(frame0), int(state.position), self.hop, self._net, inv, state.h_streams,
                                state.prev[nl:], state.rng[nl:], out[nl:], logits_out[nl:], state.work_streams,
                                K.no_period(B - nl, self.hidden_size))
        self._synthesis(gi, state, frame0, out)
        state.position += n_samples
        return out

    def _period_streams(self, gi: np.ndarray, state: BatchState, g: slice, frame0: int, position: int,
                        inv: np.float32, out: np.ndarray, logits_out: np.ndarray) -> None:
        """Streams ``g`` of a period-input vocoder's batch from sample ``position`` on, stream-major
        (``kernels._generate_streams``): ``out`` (streams, n) gets their next n samples."""
        period = (self._w_back, LTP_INPUT_SCALE, self.lpc_order, state.lpc_hist[g], self._mu,
                  state.ltp_ring[g], state.ltp_head[g], state.work_period[g], self._w_phase, state.phase[g])
        K._generate_streams(gi[g], frame0, position, self.hop, self._net, inv, state.h_streams[g], state.prev[g],
                            state.rng[g], out, logits_out, state.work_streams, period)

    def _generate_ragged(self, gi: np.ndarray, state: BatchState, needs: np.ndarray, inv: np.float32,
                         out: np.ndarray) -> None:
        """A fresh batch of a period-input vocoder where stream b makes only its first ``needs[b]``
        samples into ``out[b]`` (needs descending; the rest of each row is left as it was). Each group
        of :data:`STREAM_GROUP` runs in steps: all its streams still short of their need, up to the
        shortest of their needs. A sample depends only on the stream's past, so each stream's
        samples are those of :meth:`generate_batch`, bit for bit."""
        no_logits = np.zeros((gi.shape[0], 0, 2, K.N_CLASSES), np.float32)
        for a in range(0, gi.shape[0], STREAM_GROUP):
            b = min(gi.shape[0], a + STREAM_GROUP)
            t = 0
            while t < needs[a]:
                active = a + int(np.count_nonzero(needs[a:b] > t))  # a prefix: the needs descend
                end = int(needs[active - 1])
                g = slice(a, active)
                part = np.empty((active - a, end - t), np.int16)
                self._period_streams(gi, state, g, 0, t, inv, part, no_logits[g])
                out[g, t:end] = part
                t = end

    def _synthesis(self, gi: np.ndarray, state: BatchState, frame0: int, out: np.ndarray) -> None:
        """LPC vocoders: add each stream's prediction back to its excitation (in place)."""
        for b in range(out.shape[0] if self.lpc_order else 0):
            K._lpc_synthesis(out[b], gi[b], 3 * self.hidden_size, self.lpc_order, int(frame0), int(state.position),
                             self.hop, state.lpc_hist[b], self._mu, state.ltp_ring[b], state.ltp_head[b])

    # ---- offline ------------------------------------------------------------------------------

    def render(self, mel: np.ndarray, *, seed: int = 0, temperature: float = 1.0,
               fold_frames: int | None = 40, overlap_frames: int = 4, threads: int = 1,
               ltp_gain_scale: float = 1.0) -> np.ndarray:
        """Render a whole log-mel (T, 80) to (T * hop,) int16, folded for speed.

        With ``fold_frames=None`` (or a mel no longer than one segment) this is one stream with
        RNG ``rng_state(seed)``. Otherwise the frames are cut into N = ceil(T / fold_frames)
        segments; segment i covers frames [i S - O, (i+1) S) (S = fold_frames, O =
        overlap_frames; the inputs are edge-padded), all N run as one batch (split over
        ``threads`` threads), segment i drawing from ``rng_states(seed, N)[i]``, and
        :func:`crossfade_segments` joins them. ``ltp_gain_scale``: as :meth:`frame_inputs`.
        """
        return self.render_frame_inputs(self.frame_inputs(mel, ltp_gain_scale=ltp_gain_scale), seed=seed,
                                        temperature=temperature, fold_frames=fold_frames,
                                        overlap_frames=overlap_frames, threads=threads)

    def render_frame_inputs(self, gi: np.ndarray, *, seed: int = 0, temperature: float = 1.0,
                            fold_frames: int | None = 40, overlap_frames: int = 4, threads: int = 1) -> np.ndarray:
        """:meth:`render` on frame inputs the caller built, (T, 3H) float32 → (T * hop,) int16.

        For callers that compute the conditioning per sentence (each sentence keeps its own
        edges) and render the concatenation in one folded batch.
        """
        return self.render_many([gi], [seed], temperature=temperature, fold_frames=fold_frames,
                                overlap_frames=overlap_frames, threads=threads)[0]

    def render_many(self, gis: Sequence[np.ndarray], seeds: Sequence[int], *, temperature: float = 1.0,
                    fold_frames: int | None = 40, overlap_frames: int = 4, threads: int = 1,
                    max_streams: int = MAX_RENDER_STREAMS) -> list[np.ndarray]:
        """Render several utterances at once, their segments sharing batches; item i equals
        ``render_frame_inputs(gis[i], seed=seeds[i])`` bit for bit, whatever the other items.

        Each stream of a batch computes exactly what it would compute alone
        (:meth:`generate_batch`), so batching utterances together changes the speed (lanes from
        24 streams, :func:`lane_split`) and nothing else.

        Parameters
        ----------
        gis : per item, (T_i, 3H) float32 frame inputs.
        seeds : per item, its sampling seed.
        temperature : shared by all items.
        fold_frames, overlap_frames : S and O of :meth:`render`. Item i is cut into
            ceil(T_i / S) segments of O + S frames drawing from ``rng_states(seed_i, N_i)``;
            an item of T_i <= S frames (or every item when ``fold_frames`` is None) is one
            stream of its own length from ``rng_state(seed_i)``. Such a one-stream item of at
            least (O + S) / 2 frames rides along in the batch, its frames edge-padded to O + S
            and its first T_i hops kept (a sample depends only on the frames before it); a
            shorter one, or any item when nothing else is batched, runs alone.
        threads : each batch is split over this many threads (the kernels release the GIL).
        max_streams : at most this many streams per :meth:`generate_batch` call.

        Returns
        -------
        Per item, (T_i * hop,) int16.
        """
        if len(gis) != len(seeds):
            raise ParameterError(f"need one seed per item, found {len(gis)} items and {len(seeds)} seeds")
        if threads < 1:
            raise ParameterError(f"threads must be >= 1, found {threads}")
        if max_streams < 1:
            raise ParameterError(f"max_streams must be >= 1, found {max_streams}")
        gis = [np.ascontiguousarray(g, dtype=np.float32) for g in gis]
        D = self.frame_width
        for g in gis:
            if g.ndim != 2 or g.shape[1] != D:
                raise ParameterError(f"frame inputs must be (T, {D}) (from frame_inputs), found {g.shape}")
        folded = fold_frames is not None
        if folded:
            S, O = int(fold_frames), int(overlap_frames)
            if S < 1 or not 0 <= O <= S:
                raise ParameterError(f"need fold_frames >= 1 and 0 <= overlap_frames <= fold_frames, found {S}, {O}")
        out: list[np.ndarray | None] = [None] * len(gis)
        # Streams of the shared batch: frames (O + S, 3H), RNG state, the item each belongs to, and
        # the frames of it the item keeps (from its start: a sample depends only on the frames before it)
        frames, rngs, owner, kept = [], [], [], []
        alone = []
        for i, (g, seed) in enumerate(zip(gis, seeds)):
            T = g.shape[0]
            if T == 0:
                out[i] = np.zeros(0, np.int16)
            elif not folded:
                alone.append(i)
            elif T > S:
                segs = fold_frame_inputs(g, S, O)
                frames.extend(segs)
                rngs.extend(K.rng_states(seed, segs.shape[0]))
                owner.extend([i] * segs.shape[0])
                kept.extend([O + S] * (segs.shape[0] - 1) + [O + T - (segs.shape[0] - 1) * S])
            elif 2 * T >= O + S:
                frames.append(np.concatenate([g, np.repeat(g[-1:], O + S - T, axis=0)]))
                rngs.append(K.rng_state(seed)[0])
                owner.append(i)
                kept.append(T)
            else:
                alone.append(i)
        one_stream = {i for i in owner if gis[i].shape[0] <= S} if folded else set()
        if len(owner) == 1 and owner[0] in one_stream:  # nothing to share a batch with
            alone.append(owner.pop())
            frames, rngs = [], []
        for i in alone:
            out[i] = self.generate(gis[i], self.new_state(seed=seeds[i]), gis[i].shape[0] * self.hop,
                                   temperature=temperature)
        if owner:
            n = (O + S) * self.hop
            # A period-input vocoder's streams make only the samples kept (an item's last segment
            # and a short item stop where the item ends, not at O + S frames: 3.5 % of the frames at
            # fold 40 for bench/render.py's 200 sentences); its streams are put in order of that length,
            # longest first (a stable order: an item's segments keep theirs)
            ragged = self.ltp_input
            order = np.argsort(-np.array(kept), kind="stable") if ragged else np.arange(len(owner))
            frames = [frames[k] for k in order]
            rngs = np.array(rngs, dtype=np.uint64)[order]
            owner = [owner[k] for k in order]
            needs = np.array(kept, np.int64)[order] * self.hop
            audio = np.empty((len(owner), n), np.int16)
            inv = np.float32(1.0 / K.check_temperature(temperature))
            for lo in range(0, len(owner), max_streams):
                hi = min(lo + max_streams, len(owner))
                parts = np.array_split(np.arange(lo, hi), min(threads, hi - lo))

                def run(idx: np.ndarray) -> None:
                    seg = np.ascontiguousarray(np.stack([frames[k] for k in idx]))
                    rows = audio[idx[0]:idx[-1] + 1]
                    if ragged:
                        self._generate_ragged(seg, self.new_batch_state(rngs[idx]), needs[idx], inv, rows)
                    else:
                        self.generate_batch(seg, self.new_batch_state(rngs[idx]), n, temperature=temperature,
                                            out=rows)

                if len(parts) == 1:
                    run(parts[0])
                else:
                    with ThreadPoolExecutor(len(parts)) as pool:
                        list(pool.map(run, parts))
            owner = np.array(owner)
            for i in dict.fromkeys(owner.tolist()):
                rows = audio[owner == i]
                T = gis[i].shape[0]
                out[i] = (rows[0, :T * self.hop].copy() if i in one_stream
                          else crossfade_segments(rows, S * self.hop, O * self.hop, T * self.hop))
        return out


def fold_frame_inputs(gi: np.ndarray, fold_frames: int, overlap_frames: int) -> np.ndarray:
    """Cut (T, D) frame inputs into N = ceil(T / S) segments (N, O + S, D); segment i holds frames
    [i S - O, (i+1) S), edge-padded at both ends."""
    T = gi.shape[0]
    S, O = fold_frames, overlap_frames
    N = -(-T // S)
    padded = np.concatenate([np.repeat(gi[:1], O, axis=0), gi, np.repeat(gi[-1:], N * S - T, axis=0)])
    return np.stack([padded[i * S:i * S + O + S] for i in range(N)])


def crossfade_segments(audio: np.ndarray, stride: int, overlap: int, length: int) -> np.ndarray:
    """Join folded segments (N, overlap + stride) int16 into (length,) int16.

    Segment i starts at sample i*stride - overlap of the output. Over the ``overlap`` samples it
    shares with segment i-1, the first half keeps segment i-1 alone (segment i is still warming
    up from a cold state) and the second half fades linearly from i-1 to i. Segment 0's first
    ``overlap`` samples (edge padding) are dropped.
    """
    N, L = audio.shape
    if L != overlap + stride:
        raise ParameterError(f"segments must be overlap + stride = {overlap + stride} long, found {L}")
    out = np.zeros(N * stride, np.float64)
    half = overlap // 2
    ramp = np.zeros(overlap)
    if overlap - half:
        ramp[half:] = (np.arange(overlap - half) + 1) / (overlap - half)
    for i in range(N):
        seg = audio[i].astype(np.float64)
        start = i * stride - overlap
        if i == 0:
            out[:stride] = seg[overlap:]
            continue
        out[start:start + overlap] = (1.0 - ramp) * out[start:start + overlap] + ramp * seg[:overlap]
        out[i * stride:(i + 1) * stride] = seg[overlap:]
    return np.clip(np.rint(out[:length]), -32768, 32767).astype(np.int16)


def _out_buffer(out: np.ndarray | None, shape: tuple[int, ...], dtype) -> np.ndarray:
    if out is None:
        return np.empty(shape, dtype)
    _check_buffer(out, shape, dtype, "out")
    return out


def _check_buffer(arr: np.ndarray, shape: tuple[int, ...], dtype, name: str) -> None:
    if arr.shape != shape or arr.dtype != dtype or not arr.flags.c_contiguous or not arr.flags.writeable:
        raise ParameterError(f"{name} must be a writable C-contiguous {np.dtype(dtype).name} array of shape "
                             f"{shape}, found {arr.dtype} {arr.shape}")
