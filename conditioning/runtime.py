"""The acoustic model at inference, in numpy: what a loaded voice runs.

:class:`AcousticRuntime` computes what :class:`~wavern.conditioning.acoustic.AcousticModel`
computes in eval mode for one sequence (encoder, token fusion, durations, length regulator,
frame fusion, frame decoder, mel projection), from the same ``acoustic.safetensors``, without
importing torch: a voice loads in a second less (importing torch took 1.4 s of a 2.3 s
``Voice.load`` on the development machine) and a process that only speaks never maps libtorch.
The torch module stays the model that trains and the reference the tests hold this one to
(same weights, same inputs: the same durations and the mel to float rounding).

Only what inference needs: one sequence, no padding, no dropout. The durations are rounded from
sums of float32 predictions, so where a cumulative duration falls within ~1e-6 of a half frame the
two forms may round a token boundary apart: not seen in sentences (the tests, the shipped voice),
seen in two of four random 4096-token sequences (a review's search). The window decoder's last layer
runs on the rows asked for (:meth:`AcousticRuntime._mel_rows`, as
:meth:`~wavern.conditioning.acoustic.FrameDecoder.last_rows`), so a sentence's first audio does
not wait for its whole mel.

Attention (REFERENCES §2, §3) is computed by blocks of ``c`` queries against their ``c + w`` keys
(one matrix product per block and head, the band cut out by a mask), plus the global keys in the
same softmax; global rows attend over the whole sequence, with ``W_k`` and ``W_v`` moved to the
query side when there are few of them (see ``LongformerSelfAttention._global_rows``).
"""

from __future__ import annotations

import math
import os

import numpy as np

from wavern.conditioning.config import PROSODY_DEFAULT, PROSODY_SCALE, AcousticConfig
from wavern.conditioning.stream import LazyMel, check_request
from wavern.conditioning.weights import read_acoustic
from wavern.errors import VoiceFileError

__all__ = ["AcousticRuntime", "load_runtime", "sinusoids"]

_NORM_EPS = 1e-5  # torch's LayerNorm default
_MASKED = np.float32(-1e30)  # a masked score: exp() of it is 0 beside any real score, and never NaN


def load_runtime(path: str | os.PathLike, config: AcousticConfig | None = None) -> "AcousticRuntime":
    """Read ``acoustic.safetensors`` (checked as :func:`~wavern.conditioning.weights.read_acoustic`
    checks it) into an :class:`AcousticRuntime`.

    Raises:
        VoiceFileError: the file is missing, corrupt or does not match ``config``.
    """
    config, state = read_acoustic(path, config)
    return AcousticRuntime(config, state)


def sinusoids(n: int, d: int) -> np.ndarray:
    """Transformer sinusoids (n, d) float32, sin on even, cos on odd channels (float64 inside,
    as ``encoder.sinusoidal_positions``)."""
    pos = np.arange(n, dtype=np.float64)[:, None]
    freq = np.exp(np.arange(0, d, 2, dtype=np.float64) * (-math.log(10000.0) / d))
    table = np.zeros((n, d), np.float64)
    table[:, 0::2] = np.sin(pos * freq)
    table[:, 1::2] = np.cos(pos * freq[: d // 2])
    return table.astype(np.float32)


def _softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # 1 / (1 + e^-x) without overflow for very negative x


# ----------------------------------------------------------------------------- layers
class _Linear:
    __slots__ = ("wt", "b")

    def __init__(self, state: dict, name: str, *, bias: bool = True) -> None:
        self.wt = np.ascontiguousarray(state[f"{name}.weight"].T)  # (in, out): x @ wt
        self.b = state[f"{name}.bias"] if bias else None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        y = x @ self.wt
        if self.b is not None:
            y += self.b
        return y


class _Norm:
    __slots__ = ("g", "b")

    def __init__(self, state: dict, name: str) -> None:
        self.g, self.b = state[f"{name}.weight"], state[f"{name}.bias"]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = x - x.mean(axis=-1, keepdims=True)
        x /= np.sqrt((x * x).mean(axis=-1, keepdims=True) + _NORM_EPS)
        return x * self.g + self.b


class _Conv:
    """Conv1d over time with ``kernel // 2`` zeros each side (odd kernels): (L, C_in) -> (L, C_out)."""

    __slots__ = ("taps", "b", "pad")

    def __init__(self, state: dict, name: str) -> None:
        w = state[f"{name}.weight"]  # (out, in, k)
        self.taps = [np.ascontiguousarray(w[:, :, j].T) for j in range(w.shape[2])]  # each (in, out)
        self.b = state[f"{name}.bias"]
        self.pad = w.shape[2] // 2

    def __call__(self, x: np.ndarray) -> np.ndarray:
        n, pad = x.shape[0], self.pad
        if pad:
            x = np.concatenate([np.zeros((pad, x.shape[1]), np.float32), x, np.zeros((pad, x.shape[1]), np.float32)])
        y = x[:n] @ self.taps[0]
        for j in range(1, len(self.taps)):
            y += x[j:j + n] @ self.taps[j]
        y += self.b
        return y


def _band(q: np.ndarray, k: np.ndarray, v: np.ndarray, key_ok: np.ndarray, half: int,
          kg: np.ndarray | None = None, vg: np.ndarray | None = None) -> np.ndarray:
    """Banded attention of queries at positions ``0 .. S-1`` over keys at ``-half .. S-1+half``.

    Query ``i`` attends the keys at ``i - half .. i + half`` where ``key_ok``, plus every global
    key ``kg`` (one softmax over both).

    Args:
        q: (h, S, d) queries, already scaled by ``1 / sqrt(d)``.
        k, v: (h, S + 2 half, d).
        key_ok: (S + 2 half,) bool.
        half: the band's half width.
        kg, vg: (h, G, d) global keys and values, or None.

    Returns:
        (h, S, d).
    """
    h, s, d = q.shape
    c = max(8, min(2 * half, 64))  # queries per block
    nb = -(-s // c)
    width = c + 2 * half  # a block's keys
    rows = nb * c
    if rows > s:  # pad the queries to whole blocks, the keys with masked ones
        q = np.concatenate([q, np.zeros((h, rows - s, d), np.float32)], axis=1)
        extra = rows - s
        k = np.concatenate([k, np.zeros((h, extra, d), np.float32)], axis=1)
        v = np.concatenate([v, np.zeros((h, extra, d), np.float32)], axis=1)
        key_ok = np.concatenate([key_ok, np.zeros(extra, bool)])
    win = np.lib.stride_tricks.sliding_window_view
    kw = np.ascontiguousarray(win(k, width, axis=1)[:, ::c])  # (h, nb, d, width)
    vw = np.ascontiguousarray(win(v, width, axis=1)[:, ::c].transpose(0, 1, 3, 2))  # (h, nb, width, d)
    ok = win(key_ok, width)[::c]  # (nb, width)
    offset = np.arange(width)[None, :] - np.arange(c)[:, None]  # key column - query row
    allowed = (offset >= 0) & (offset <= 2 * half)  # (c, width): the band
    allowed = allowed[None, :, :] & ok[:, None, :]  # (nb, c, width)
    scores = q.reshape(h, nb, c, d) @ kw  # (h, nb, c, width)
    scores = np.where(allowed, scores, _MASKED)
    top = scores.max(axis=-1, keepdims=True)
    if kg is not None and kg.shape[1]:
        sg = (q @ kg.transpose(0, 2, 1)).reshape(h, nb, c, -1)  # (h, nb, c, G)
        top = np.maximum(top, sg.max(axis=-1, keepdims=True))
        eg = np.exp(sg - top)
    else:
        eg = None
    e = np.exp(scores - top)
    den = e.sum(axis=-1, keepdims=True)
    out = e @ vw  # (h, nb, c, d)
    if eg is not None:
        den += eg.sum(axis=-1, keepdims=True)
        out += (eg.reshape(h, rows, -1) @ vg).reshape(h, nb, c, d)
    out /= den
    return out.reshape(h, rows, d)[:, :s]


def _heads(x: np.ndarray, h: int) -> np.ndarray:
    """(S, D) -> (h, S, D / h)."""
    return x.reshape(x.shape[0], h, x.shape[1] // h).transpose(1, 0, 2)


def _merge(x: np.ndarray) -> np.ndarray:
    """(h, S, d) -> (S, h d)."""
    return x.transpose(1, 0, 2).reshape(x.shape[1], -1)


class _Longformer:
    """Longformer self-attention (window + global), as ``attention.LongformerSelfAttention``."""

    def __init__(self, state: dict, name: str, heads: int, window: int) -> None:
        self.q, self.k, self.v = (_Linear(state, f"{name}.{p}") for p in ("query", "key", "value"))
        self.qg = _Linear(state, f"{name}.query_global")
        self.kg = _Linear(state, f"{name}.key_global")
        self.vg = _Linear(state, f"{name}.value_global")
        self.out = _Linear(state, f"{name}.out")
        dim = self.q.wt.shape[0]
        self.h, self.d, self.half = heads, dim // heads, window // 2
        self.wk_g = state[f"{name}.key_global.weight"].reshape(heads, self.d, dim)  # per head (d, D)
        self.wv_g = np.ascontiguousarray(state[f"{name}.value_global.weight"].reshape(heads, self.d, dim)
                                         .transpose(0, 2, 1))  # per head (D, d)
        self.bv_g = state[f"{name}.value_global.bias"].reshape(heads, 1, self.d)

    def __call__(self, xn: np.ndarray, glob: np.ndarray) -> np.ndarray:
        """(S, D) normalised input, (S,) bool global -> (S, D)."""
        gpos = np.flatnonzero(glob)
        kg, vg = self.global_keys(xn[gpos])
        return self.out(self.rows(xn, 0, glob, 0, xn.shape[0], kg, vg, xn))

    def global_keys(self, xg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ordinary keys and values (h, G, d) of the global positions' normalised inputs."""
        return _heads(self.k(xg), self.h), _heads(self.v(xg), self.h)

    def rows(self, xs: np.ndarray, s0: int, glob_s: np.ndarray, p: int, q: int, kg: np.ndarray, vg: np.ndarray,
             xn_all) -> np.ndarray:
        """Attention rows ``[p, q)`` before the output projection: (q - p, D).

        ``xs`` is the normalised input at positions ``[s0, s0 + len(xs))``, which must hold
        ``[p - half, q + half)`` within the sequence; ``glob_s`` its global flags; ``kg``, ``vg``
        every global position's keys and values; ``xn_all()`` (or the array itself) the whole
        normalised sequence, needed only when a global row is among ``[p, q)``.
        """
        h, d, half = self.h, self.d, self.half
        n_q = q - p
        qh = _heads(self.q(xs[p - s0:q - s0]), h) * np.float32(d ** -0.5)
        lo, hi = max(s0, p - half), min(s0 + xs.shape[0], q + half)  # keys inside the sequence
        kv = xs[lo - s0:hi - s0]
        k = np.zeros((h, n_q + 2 * half, d), np.float32)
        v = np.zeros_like(k)
        at = lo - (p - half)
        k[:, at:at + kv.shape[0]] = _heads(self.k(kv), h)
        v[:, at:at + kv.shape[0]] = _heads(self.v(kv), h)
        ok = np.zeros(n_q + 2 * half, bool)
        ok[at:at + kv.shape[0]] = ~glob_s[lo - s0:hi - s0]  # global keys count once, among kg
        out = _merge(_band(qh, k, v, ok, half, kg, vg))
        inside = np.flatnonzero(glob_s[p - s0:q - s0])
        if inside.size:  # global rows attend everything and replace the local result
            xn = xn_all() if callable(xn_all) else xn_all
            out[inside] = self.global_rows(xn, inside + p)
        return out

    def global_rows(self, xn: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """Global rows at ``pos`` over the whole normalised sequence ``xn``: (G, D) before ``out``."""
        h, d, g = self.h, self.d, pos.size
        dim = xn.shape[1]
        qg = _heads(self.qg(xn[pos]), h) * np.float32(d ** -0.5)  # (h, G, d)
        if 2 * g * h > dim:
            kg, vg = _heads(self.kg(xn), h), _heads(self.vg(xn), h)
            rows = _softmax(qg @ kg.transpose(0, 2, 1)) @ vg
        else:  # q . (W_k x + b_k) = (W_k^T q) . x + const; sum p (W_v x + b_v) = W_v (sum p x) + b_v
            probs = _softmax((qg @ self.wk_g) @ xn.T)  # (h, G, T)
            rows = (probs @ xn) @ self.wv_g + self.bv_g
        return _merge(rows)


class _Strided:
    """Non-causal strided attention (``attention.StridedSelfAttention``, ``causal=False``)."""

    def __init__(self, state: dict, name: str, heads: int, stride: int) -> None:
        self.q, self.k, self.v, self.out = (_Linear(state, f"{name}.{p}") for p in ("query", "key", "value", "out"))
        self.h, self.stride = heads, stride
        self.d = self.q.wt.shape[0] // heads

    def __call__(self, xn: np.ndarray, glob=None) -> np.ndarray:
        h, s = self.h, xn.shape[0]
        stride = min(self.stride, max(s, 1))
        q = _heads(self.q(xn), h) * np.float32(self.d ** -0.5)
        k, v = _heads(self.k(xn), h), _heads(self.v(xn), h)
        n_local = (h + 1) // 2
        half = stride - 1
        pad = np.zeros((n_local, half, self.d), np.float32)
        ok = np.r_[np.zeros(half, bool), np.ones(s, bool), np.zeros(half, bool)]
        out = np.empty_like(q)
        out[:n_local] = _band(q[:n_local], np.concatenate([pad, k[:n_local], pad], axis=1),
                              np.concatenate([pad, v[:n_local], pad], axis=1), ok, half)
        for r in range(stride if n_local < h else 0):  # the strided heads: (i - j) mod stride == 0
            idx = np.arange(r, s, stride)
            probs = _softmax(q[n_local:, idx] @ k[n_local:, idx].transpose(0, 2, 1))
            out[n_local:, idx] = probs @ v[n_local:, idx]
        return self.out(_merge(out))


class _ConvMixer:
    def __init__(self, state: dict, name: str) -> None:
        self.conv = _Conv(state, f"{name}.conv")

    def __call__(self, xn: np.ndarray, glob=None) -> np.ndarray:
        return self.conv(xn)


class _Layer:
    """Pre-norm layer: ``x + mixer(LN(x))``, then ``x + FFN(LN(x))``."""

    def __init__(self, state: dict, name: str, mixer) -> None:
        self.norm1, self.norm2 = _Norm(state, f"{name}.norm1"), _Norm(state, f"{name}.norm2")
        self.mixer = mixer
        self.conv1, self.conv2 = _Conv(state, f"{name}.ffn.conv1"), _Conv(state, f"{name}.ffn.conv2")

    def ffn(self, x: np.ndarray) -> np.ndarray:
        return self.conv2(np.maximum(self.conv1(x), 0.0))

    def __call__(self, x: np.ndarray, glob: np.ndarray) -> np.ndarray:
        x = x + self.mixer(self.norm1(x), glob)
        return x + self.ffn(self.norm2(x))


class _Fusion:
    """Peer-attention fusion (``fusion.PeerFusion``) in its stored state, soft or pruned."""

    def __init__(self, state: dict, name: str, in_channels: tuple[int, ...], out: int, n_peers: int) -> None:
        self.choice = state[f"{name}.peer_choice"].tolist()
        self.alive = state[f"{name}.edge_alive"].tolist()
        self.mix = _softmax(state[f"{name}.peer_logit"])  # (n_in, n_peers)
        self.gate = _sigmoid(state[f"{name}.edge_logit"])
        self.peer_proj = [_Linear(state, f"{name}.peer_proj.{k}") for k in range(n_peers)]
        self.attend = [_Linear(state, f"{name}.attend.{j}") for j in range(len(in_channels))]
        self.in_proj = [None if c == out else _Linear(state, f"{name}.in_proj.{j}", bias=False)
                        for j, c in enumerate(in_channels)]

    def __call__(self, inputs: list[np.ndarray], peers: list[np.ndarray]) -> np.ndarray:
        """``inputs``: (L, C_j) or (1, C_j) each; ``peers``: (P_k,) each -> (L, out)."""
        on = [j for j in range(len(inputs)) if self.alive[j]]
        soft = any(self.choice[j] < 0 for j in on)
        needed = range(len(peers)) if soft else sorted({self.choice[j] for j in on})
        a_k = {k: self.peer_proj[k](peers[k]) for k in needed}
        out = None
        for j in on:
            a = a_k[self.choice[j]] if self.choice[j] >= 0 else sum(self.mix[j, k] * a_k[k] for k in range(len(peers)))
            att = _sigmoid(self.attend[j](a))  # (C_j,)
            term = self.gate[j] * inputs[j] * att
            if self.in_proj[j] is not None:
                term = self.in_proj[j](term)
            out = term if out is None else out + term
        length = max(x.shape[0] for x in inputs)  # (a 1-row input broadcasts along time)
        return np.broadcast_to(out, (length, out.shape[1])).astype(np.float32)


# ----------------------------------------------------------------------------- the model
class AcousticRuntime:
    """Text -> log-mel in numpy, from an ``AcousticModel``'s stored tensors (:func:`load_runtime`).

    Args:
        config: the model's shape.
        state: name -> array as :func:`~wavern.conditioning.weights.read_acoustic` returns it.

    Safe to call from several threads (it keeps no state between calls).
    """

    def __init__(self, config: AcousticConfig, state: dict[str, np.ndarray]) -> None:
        self.config = config
        enc = config.encoder
        d, dd = enc.d_model, config.decoder_d_model
        self._embed = state["encoder.embed.weight"]
        self._global_embed = state["encoder.global_embed.weight"]
        self._enc_layers = [_Layer(state, f"encoder.layers.{i}",
                                   _Longformer(state, f"encoder.layers.{i}.mixer", enc.n_heads, enc.window))
                            for i in range(enc.n_layers)]
        self._enc_norm = _Norm(state, "encoder.norm")
        self._speaker = state["speaker_embed.weight"]
        self._prosody = _Linear(state, "prosody_in") if config.prosody else None
        self._ref_null = state["reference.null"]
        self._ref_convs = [_Conv(state, f"reference.convs.{i}") for i in range(config.ref_layers)]
        self._ref_norm = _Norm(state, "reference.norm")
        s, r = config.speaker_dim, config.ref_channels
        self._token_fusion = _Fusion(state, "token_fusion", (d, s, r), d, 3)
        self._dur_convs = [_Conv(state, f"duration.convs.{i}") for i in range(2)]
        self._dur_norms = [_Norm(state, f"duration.norms.{i}") for i in range(2)]
        self._dur_proj = _Linear(state, "duration.proj")
        self._frame_in = _Linear(state, "frame_in")
        self._frame_pos = _Linear(state, "frame_pos")
        self._frame_fusion = _Fusion(state, "frame_fusion", (dd, s, r), dd, 4)

        def mixer(i: int):
            name = f"decoder.layers.{i}.mixer"
            if config.decoder_kind == "window":
                return _Longformer(state, name, config.decoder_heads, config.decoder_window)
            if config.decoder_kind == "strided":
                return _Strided(state, f"{name}.attn", config.decoder_heads, config.decoder_stride)
            return _ConvMixer(state, name)

        self._dec_layers = [_Layer(state, f"decoder.layers.{i}", mixer(i)) for i in range(config.decoder_layers)]
        self._dec_norm = _Norm(state, "decoder.norm")
        self._mel_out = _Linear(state, "mel_out")
        self._pitch_out = _Linear(state, "pitch_out") if config.pitch else None
        self._mel_mean, self._mel_std = state["mel_mean"], state["mel_std"]
        self._positions = {d: sinusoids(1024, d), dd: sinusoids(1024, dd)}

    def _sinusoids(self, n: int, d: int) -> np.ndarray:
        table = self._positions[d]
        if table.shape[0] < n:  # grown by doubling; every entry is computed on its own
            table = self._positions[d] = sinusoids(max(n, 2 * table.shape[0]), d)
        return table[:n]

    # -- pieces --------------------------------------------------------------
    def _style(self, speaker: int, reference: np.ndarray | None, prosody) -> tuple[np.ndarray, np.ndarray]:
        spk = self._speaker[speaker].copy()
        if self._prosody is not None:
            units = ((np.asarray(prosody if prosody is not None else PROSODY_DEFAULT, np.float32)
                      - np.asarray(PROSODY_DEFAULT, np.float32)) / np.asarray(PROSODY_SCALE, np.float32))
            spk += self._prosody(units)
        if reference is None:
            return spk, self._ref_null
        x = (reference - self._mel_mean) / self._mel_std
        for conv in self._ref_convs:
            x = np.maximum(conv(x), 0.0)
        return spk, self._ref_norm(x).mean(axis=0)

    def _encode(self, ids: np.ndarray, glob: np.ndarray, spk: np.ndarray, ref: np.ndarray):
        d = self.config.encoder.d_model
        x = self._embed[ids] + self._global_embed[glob.astype(np.int64)] + self._sinusoids(ids.size, d)
        for layer in self._enc_layers:
            x = layer(x, glob)
        text = self._enc_norm(x)
        text_pool = text.mean(axis=0)
        tokens = self._token_fusion([text, spk[None], ref[None]], [text_pool, spk, ref])
        x = tokens
        for conv, norm in zip(self._dur_convs, self._dur_norms):
            x = norm(np.maximum(conv(x), 0.0))
        log_d = self._dur_proj(x)[:, 0]
        return tokens, log_d, text_pool

    def _durations(self, log_d: np.ndarray, speed: float) -> np.ndarray:
        """``AcousticModel.predict_durations``: integer frames, rounded cumulatively, >= 1 in all."""
        if not np.isfinite(log_d).all():
            raise VoiceFileError("the acoustic model predicted non-finite durations: its weights are damaged")
        d = np.clip(np.expm1(log_d), 0.0, float(self.config.max_frames_per_token)).astype(np.float32)
        bounds = np.floor(np.cumsum(d.astype(np.float64)) / speed + 0.5).astype(np.int64)
        frames = np.diff(bounds, prepend=0)
        if frames.sum() == 0:  # e.g. a lone punctuation mark predicted as 0 frames: still 1 frame
            frames[int(np.argmax(d))] = 1
        return frames

    def _frames(self, tokens: np.ndarray, frames: np.ndarray, glob: np.ndarray, text_pool: np.ndarray,
                spk: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Length regulator + frame fusion: the decoder's input (T, D) and its global frames (T,)."""
        ends = np.cumsum(frames)
        t_len = int(ends[-1])
        idx = np.minimum(np.searchsorted(ends, np.arange(t_len), side="right"), frames.size - 1)
        dur = np.maximum(frames[idx], 1).astype(np.float32)
        rel = ((np.arange(t_len) - (ends - frames)[idx]).astype(np.float32) + np.float32(0.5)) / dur
        feats = np.stack([rel, np.log1p(dur)], axis=-1)
        dd = self.config.decoder_d_model
        x = self._frame_in(tokens[idx]) + self._frame_pos(feats) + self._sinusoids(t_len, dd)
        x = self._frame_fusion([x, spk[None], ref[None]], [x.mean(axis=0), text_pool, spk, ref])
        first = np.r_[True, idx[1:] != idx[:-1]]
        return x, first & glob[idx]

    def _project(self, h: np.ndarray) -> np.ndarray:
        mel = self._mel_out(h) * self._mel_std + self._mel_mean
        return mel if self._pitch_out is None else np.concatenate([mel, self._pitch_out(h)], axis=-1)

    # -- generation ----------------------------------------------------------
    def infer(self, ids, is_global, *, speaker: str | int, speed: float = 1.0,
              reference: np.ndarray | None = None, prosody=None) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`AcousticModel.infer <wavern.conditioning.acoustic.AcousticModel.infer>`:
        (mel (T, n_out) float32, durations (N,) int64 frames with ``sum == T``)."""
        lazy, frames = self.infer_lazy(ids, is_global, speaker=speaker, speed=speed, reference=reference,
                                       prosody=prosody)
        return lazy.full().copy(), frames

    def infer_lazy(self, ids, is_global, *, speaker: str | int, speed: float = 1.0,
                   reference: np.ndarray | None = None, prosody=None) -> tuple[LazyMel, np.ndarray]:
        """As :meth:`AcousticModel.infer_lazy <wavern.conditioning.acoustic.AcousticModel.infer_lazy>`:
        everything but the window decoder's last layer now, its rows on demand.

        Returns:
            (:class:`~wavern.conditioning.stream.LazyMel` of T frames, durations (N,) int64).
        """
        ids_a, glob, ref, pros = check_request(self.config, ids, is_global, speed=speed, reference=reference,
                                               prosody=prosody)
        spk_id = self.config.speaker_id(speaker)
        spk, style = self._style(spk_id, ref, pros)
        glob = glob.copy()
        glob[0] = True  # the encoder's global set: the first token anchors the sequence
        tokens, log_d, text_pool = self._encode(ids_a, glob, spk, style)
        frames = self._durations(log_d, float(speed))
        x, frame_glob = self._frames(tokens, frames, glob, text_pool, spk, style)
        if self.config.decoder_kind != "window" or not self._dec_layers:
            for layer in self._dec_layers:
                x = layer(x, frame_glob)
            return LazyMel.complete(self._project(self._dec_norm(x))), frames
        for layer in self._dec_layers[:-1]:
            x = layer(x, frame_glob)
        return LazyMel(self, x, frame_glob, n_frames=x.shape[0]), frames

    def _mel_rows(self, x: np.ndarray, glob: np.ndarray, start: int, stop: int, cache: dict) -> np.ndarray:
        """Rows ``[start, stop)`` of the mel from the last decoder layer's input (see :class:`LazyMel`).

        The layer's output row ``t`` reads the attention rows ``t - k .. t + k`` (its FFN, kernel
        ``2 k + 1``), an attention row the inputs within ``window / 2`` and every global frame, a
        global row all frames: so it runs on ``[start - k - w/2, stop + k + w/2)`` with the global
        frames' keys, and the whole normalised input only for a global row among the rows.
        """
        layer = self._dec_layers[-1]
        attn = layer.mixer
        n = x.shape[0]
        k = layer.conv1.pad
        p, q = max(0, start - k), min(n, stop + k)
        r0, r1 = max(0, p - attn.half), min(n, q + attn.half)
        if "keys" not in cache:
            gpos = np.flatnonzero(glob)
            cache["keys"] = attn.global_keys(layer.norm1(x[gpos]))

        def normed_all() -> np.ndarray:
            if "normed" not in cache:
                cache["normed"] = layer.norm1(x)
            return cache["normed"]

        kg, vg = cache["keys"]
        att = attn.out(attn.rows(layer.norm1(x[r0:r1]), r0, glob[r0:r1], p, q, kg, vg, normed_all))
        y = x[p:q] + att
        y = y + layer.ffn(layer.norm2(y))
        return self._project(self._dec_norm(y[start - p:stop - p]))
