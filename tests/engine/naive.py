"""Slow, obvious twins of the engine's kernels, written from docs/ARCHITECTURE.md in float64.

Nothing here is fast or clever: dense matrices, Python loops, one sample at a time. The tests
compare the compiled engine against these on seeded random inputs.
"""

from __future__ import annotations

import numpy as np

from wavern.vocoder.format import BlockSparse

MASK64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def splitmix_outputs(seed: int, n: int) -> list[int]:
    """The first n outputs of splitmix64 seeded with ``seed`` (Python ints, 64-bit wrap)."""
    s = seed & MASK64
    outs = []
    for _ in range(n):
        s = (s + GAMMA) & MASK64
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        outs.append(z ^ (z >> 31))
    return outs


def uniforms(seed: int, n: int) -> np.ndarray:
    """(n, 2) float64: uniform = top 53 bits / 2**53, coarse then fine per sample."""
    outs = splitmix_outputs(seed, 2 * n)
    return np.array([(z >> 11) / 2.0 ** 53 for z in outs], dtype=np.float64).reshape(n, 2)


def softmax_cdf(logits: np.ndarray, temperature: float) -> np.ndarray:
    x = np.asarray(logits, np.float64) / temperature
    p = np.exp(x - x.max())
    p /= p.sum()
    return np.cumsum(p)


def draw(logits: np.ndarray, u: float, temperature: float = 1.0) -> int:
    """First k with cumsum(p)[k] > u * sum(p), clamped to 255."""
    cdf = softmax_cdf(logits, temperature)
    hits = np.nonzero(cdf > u * cdf[-1])[0]
    return int(hits[0]) if hits.size else len(cdf) - 1


def tie_margin(logits: np.ndarray, u: float, temperature: float = 1.0) -> float:
    """Distance of u from the nearest class boundary of the CDF (0 = exactly on a boundary)."""
    cdf = softmax_cdf(logits, temperature)
    return float(np.min(np.abs(cdf / cdf[-1] - u)))


def conv1d(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """torch.nn.Conv1d with padding (K-1)/2 on (T, C_in) -> (T, C_out), by explicit taps."""
    T = x.shape[0]
    c_out, c_in, k = w.shape
    pad = (k - 1) // 2
    y = np.tile(np.asarray(b, np.float64), (T, 1))
    for t in range(T):
        for tap in range(k):
            s = t + tap - pad
            if 0 <= s < T:
                y[t] += w[:, :, tap].astype(np.float64) @ x[s].astype(np.float64)
    return y


def condnet(mel: np.ndarray, dense: dict[str, np.ndarray], cond_blocks: int) -> np.ndarray:
    x = conv1d(mel, dense["cond.conv_in.weight"], dense["cond.conv_in.bias"])
    for i in range(cond_blocks):
        p = f"cond.blocks.{i}."
        y = conv1d(np.maximum(x, 0), dense[p + "conv1.weight"], dense[p + "conv1.bias"])
        x = x + conv1d(np.maximum(y, 0), dense[p + "conv2.weight"], dense[p + "conv2.bias"])
    return x


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def generate(dense: dict[str, np.ndarray], sparse: dict[str, BlockSparse], mel: np.ndarray, u: np.ndarray, *,
             cond_blocks: int, temperature: float = 1.0, forced: np.ndarray | None = None,
             n: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The WaveRNN generation loop of docs/ARCHITECTURE.md, sample by sample, in float64.

    ``forced`` (n, 2) optional (c_t, f_t) to feed back instead of the twin's own draws (teacher
    forcing), so the logits can be compared step by step with another implementation's run.
    Returns (samples int16 (n,), own draws (n, 2), logits (n, 2, 256)).
    """
    W = {k: v.astype(np.float64) for k, v in dense.items()}
    R = sparse["gru.weight_hh"].to_dense().astype(np.float64)
    O = {k: sparse[k].to_dense().astype(np.float64) for k in ("O1", "O2", "O3", "O4")}
    H = R.shape[1]
    hh = H // 2
    cond = condnet(mel, dense, cond_blocks)
    n = mel.shape[0] * 256 if n is None else n
    h = np.zeros(H)
    c_prev, f_prev = 128, 0
    samples = np.zeros(n, np.int16)
    draws = np.zeros((n, 2), np.int64)
    logits = np.zeros((n, 2, 256))
    coarse = np.r_[0:hh, H:H + hh, 2 * H:2 * H + hh]  # rows of r, z, n for the coarse half
    fine = coarse + hh

    def gru_rows(rows: np.ndarray, x: np.ndarray, gh: np.ndarray) -> np.ndarray:
        gi = W["gru.weight_ih"] @ x + W["gru.bias_ih"]
        third = len(rows) // 3
        r_rows, z_rows, n_rows = rows[:third], rows[third:2 * third], rows[2 * third:]
        r = sigmoid(gi[r_rows] + gh[r_rows])
        z = sigmoid(gi[z_rows] + gh[z_rows])
        nn = np.tanh(gi[n_rows] + r * gh[n_rows])
        return (1 - z) * nn + z * h[r_rows]  # r rows 0..H are the state's own indices

    for t in range(n):
        ct_frame = cond[t // 256]
        gh = R @ h + W["gru.bias_hh"]
        scale = lambda b: b / 127.5 - 1.0  # noqa: E731
        x = np.concatenate([[scale(c_prev), scale(f_prev), 0.0], ct_frame])  # c_t unknown yet: its
        h_c = gru_rows(coarse, x, gh)  # column is 0 for the coarse rows anyway
        lc = O["O2"] @ np.maximum(O["O1"] @ h_c + W["O1.bias"], 0) + W["O2.bias"]
        c = draw(lc, u[t, 0], temperature)
        c_in = forced[t, 0] if forced is not None else c
        x[2] = scale(c_in)
        h_f = gru_rows(fine, x, gh)
        lf = O["O4"] @ np.maximum(O["O3"] @ h_f + W["O3.bias"], 0) + W["O4.bias"]
        f = draw(lf, u[t, 1], temperature)
        f_in = forced[t, 1] if forced is not None else f
        h = np.concatenate([h_c, h_f])
        draws[t] = c, f
        logits[t] = lc, lf
        samples[t] = np.int16(c_in * 256 + f_in - 32768)
        c_prev, f_prev = c_in, f_in
    return samples, draws, logits


def crossfade(audio: np.ndarray, stride: int, overlap: int, length: int) -> np.ndarray:
    """Join folded segments sample by sample: weight of the newer segment is 0 over the first
    half of the overlap, then rises linearly to 1 (reaching 1 on the overlap's last sample)."""
    N = audio.shape[0]
    half = overlap // 2
    rise = overlap - half
    out = np.zeros(N * stride)
    for s in range(N * stride):
        i = s // stride  # segment owning s
        v = float(audio[i, s - i * stride + overlap])
        j = i + 1  # the next segment overlaps the last `overlap` samples of segment i's region
        if j < N and s >= j * stride - overlap:
            pos = s - (j * stride - overlap)
            w = 0.0 if pos < half else (pos - half + 1) / rise
            v = (1 - w) * v + w * float(audio[j, pos])
        out[s] = v
    return np.clip(np.rint(out[:length]), -32768, 32767).astype(np.int16)


def random_sparse(rows: int, cols: int, block: tuple[int, int], density: float, rng: np.random.Generator,
                  scale: float) -> BlockSparse:
    br, bc = block
    keep = rng.random((rows // br, cols // bc)) < density
    m = rng.standard_normal((rows, cols)) * scale
    m *= np.kron(keep, np.ones((br, bc)))
    return BlockSparse.from_dense(m.astype(np.float32), block)


def random_vocoder(*, H: int = 32, C: int = 8, cond_blocks: int = 1, block: tuple[int, int] = (8, 4),
                   density: float = 0.5, seed: int = 0, logit_scale: float = 3.0
                   ) -> tuple[dict[str, np.ndarray], dict[str, BlockSparse]]:
    """Random vocoder tensors in the file's form (vocoder/format.py), with the c_t mask applied.

    ``logit_scale`` widens the output layers so the softmaxes are peaked, as in a trained model
    (few near-ties between classes, so independent float implementations draw the same class).
    """
    rng = np.random.default_rng(seed)
    hh = H // 2
    f32 = lambda *s, sc: (rng.standard_normal(s) * sc).astype(np.float32)  # noqa: E731
    # fan-in scaled, so activations stay O(1) as in a trained net
    dense = {"cond.conv_in.weight": f32(C, 80, 5, sc=1 / np.sqrt(400)), "cond.conv_in.bias": f32(C, sc=0.1)}
    for i in range(cond_blocks):
        dense.update({f"cond.blocks.{i}.conv1.weight": f32(C, C, 3, sc=1 / np.sqrt(3 * C)),
                      f"cond.blocks.{i}.conv1.bias": f32(C, sc=0.1),
                      f"cond.blocks.{i}.conv2.weight": f32(C, C, 1, sc=0.5 / np.sqrt(C)),
                      f"cond.blocks.{i}.conv2.bias": f32(C, sc=0.1)})
    w_ih = f32(3 * H, 3 + C, sc=1.5 / np.sqrt(3 + C))
    for g in range(3):
        w_ih[g * H:g * H + hh, 2] = 0.0  # c_t reaches only the fine half
    dense.update({"gru.weight_ih": w_ih, "gru.bias_ih": f32(3 * H, sc=0.3), "gru.bias_hh": f32(3 * H, sc=0.3)})
    rs = 1.0 / np.sqrt(H * density)
    sparse = {"gru.weight_hh": random_sparse(3 * H, H, block, density, rng, 1.5 * rs)}
    os_ = 1.0 / np.sqrt(hh * density)
    for name, rows in (("O1", hh), ("O2", 256), ("O3", hh), ("O4", 256)):
        sc = os_ * (logit_scale if name in ("O2", "O4") else 1.5)
        sparse[name] = random_sparse(rows, hh, block, density, rng, sc)
        dense[f"{name}.bias"] = f32(rows, sc=0.1)
    return dense, sparse


def random_mel(frames: int, seed: int = 0) -> np.ndarray:
    """A smooth random log-mel (frames, 80) in the range of real speech."""
    rng = np.random.default_rng(seed)
    walk = np.cumsum(rng.standard_normal((frames, 80)) * 0.5, axis=0)
    return (np.tanh(walk / 4.0) * 4.0 - 5.0).astype(np.float32)  # within about [-9, -1]
