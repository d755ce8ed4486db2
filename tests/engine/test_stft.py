"""The lane FFTs of mel matching (engine/kernels/stft.py) against numpy's FFT."""

import os
import subprocess
import sys

import numpy as np
import pytest

from wavern.dsp import MelConfig
from wavern.engine.kernels import stft
from wavern.errors import ParameterError

L = stft.LANES


def _lanes(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(LANES, m) complex frames -> the flat (real, imaginary) rows of the lane layout."""
    return np.ascontiguousarray(z.real.T).ravel(), np.ascontiguousarray(z.imag.T).ravel()


def _frames(zr: np.ndarray, zi: np.ndarray) -> np.ndarray:
    return (zr + 1j * zi).reshape(-1, L).T


@pytest.mark.parametrize("m", [2, 4, 8, 16, 32, 64, 512, 1024])
def test_the_complex_transform_and_its_inverse_equal_numpys(m):
    rng = np.random.default_rng(m)
    z = rng.standard_normal((L, m)) + 1j * rng.standard_normal((L, m))
    t = np.arange(m)
    cr, ci = np.cos(2 * np.pi * t / m), -np.sin(2 * np.pi * t / m)
    zr, zi = _lanes(z)
    stft.dif(zr, zi, m, cr, ci)
    got = _frames(zr, zi)[:, stft.digit_reversal(m)]  # bin k lies in row digit_reversal(m)[k]
    want = np.fft.fft(z, axis=1)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-13 * np.abs(want).max())
    stft.dit(zr, zi, m, cr, ci)
    np.testing.assert_allclose(_frames(zr, zi), m * z, rtol=0, atol=1e-13 * m * np.abs(z).max())
    # the inverse on its own: a spectrum in digit-reversed rows -> m times numpy's ifft
    spec = rng.standard_normal((L, m)) + 1j * rng.standard_normal((L, m))
    rows = np.empty_like(spec)
    rows[:, stft.digit_reversal(m)] = spec
    zr, zi = _lanes(rows)
    stft.dit(zr, zi, m, cr, ci)
    np.testing.assert_allclose(_frames(zr, zi), m * np.fft.ifft(spec, axis=1), rtol=0,
                               atol=1e-13 * np.abs(spec).max() * m)


@pytest.mark.parametrize("n", [8, 16, 64, 1024, 2048])
def test_real_frames_bins_and_back_equal_numpys_rfft_and_irfft(n):
    plan = stft.RealFFTPlan(n)
    m = plan.m
    width, col = 3 * L, L  # the second lane group of a block of three
    rng = np.random.default_rng(n)
    x = rng.standard_normal((L, n))
    zr, zi = _lanes(x[:, 0::2] + 1j * x[:, 1::2])
    stft.dif(zr, zi, m, plan.cr, plan.ci)
    xr, xi, mag = (np.full((m + 1) * width, np.nan) for _ in range(3))
    stft.rfft_post(zr, zi, plan.pos, plan.rc, plan.rs, xr, xi, mag, col, width)
    group = lambda a: a.reshape(m + 1, width)[:, col:col + L].T  # noqa: E731
    want = np.fft.rfft(x, axis=1)
    tol = 1e-13 * np.abs(want).max()
    np.testing.assert_allclose(group(xr) + 1j * group(xi), want, rtol=0, atol=tol)
    np.testing.assert_allclose(group(mag), np.abs(want), rtol=0, atol=tol)
    assert not np.any(group(xi)[:, [0, m]])  # DC and Nyquist exactly real, as irfft_pre needs
    rows = xr.reshape(m + 1, width)
    assert np.isnan(rows[:, :col]).all() and np.isnan(rows[:, col + L:]).all()  # other groups untouched
    g = rng.uniform(0.0, 4.0, xr.size)
    stft.irfft_pre(xr, xi, g, col, width, plan.pos, plan.rc, plan.rs, zr, zi)
    stft.dit(zr, zi, m, plan.cr, plan.ci)
    z = _frames(zr, zi) / m
    got = np.empty((L, n))
    got[:, 0::2], got[:, 1::2] = z.real, z.imag
    want2 = np.fft.irfft(want * group(g), n=n, axis=1)
    np.testing.assert_allclose(got, want2, rtol=0, atol=1e-13 * np.abs(want2).max())


def _stft_reference(x, n_fft, hop, k0, count, reflect):
    """Frames k0.. of x as log_mel pads them (reflect, else zeros), Hann-windowed, through numpy."""
    from wavern.dsp import _window

    w = _window(n_fft, n_fft).astype(np.float64)
    pad = np.pad(x, n_fft // 2, mode="reflect" if reflect else "constant")
    frames = np.stack([pad[(k0 + j) * hop:(k0 + j) * hop + n_fft] for j in range(count)]) * w
    return np.fft.rfft(frames, axis=1), w


@pytest.mark.parametrize("n_fft, n_samples, k0, count, reflect", [
    (512, 4000, 0, 11, True),  # the left edge, a partial lane group
    (512, 4000, 5, 8, True),  # inside: one whole group (the transposes)
    (512, 4000, 9, 7, True),  # to the right edge
    (512, 300, 0, 2, False),  # shorter than half a window: zeros, no reflection
    (8, 200, 3, 16, True),  # n/2 = 4, not a multiple of 8: element by element throughout
])
def test_analyse_and_synthesise_equal_a_numpy_stft_and_overlap_add(n_fft, n_samples, k0, count, reflect):
    hop = n_fft // 4
    plan = stft.RealFFTPlan(n_fft)
    rng = np.random.default_rng(n_samples + k0)
    x = rng.standard_normal(n_samples)
    width = stft.block_width(count)
    xr, xi, mag = (np.zeros((plan.m + 1) * width) for _ in range(3))
    zr, zi, frames = plan.scratch()
    tables = plan.tables
    from wavern.dsp import _window

    window = _window(n_fft, n_fft).astype(np.float64)
    x0 = max(0, k0 * hop - n_fft // 2)  # a stream keeps only the samples from the first its frames read
    stft.analyse(x[x0:], x0, n_samples, k0, count, hop, reflect, window, *tables, zr, zi, xr, xi, mag, width)
    want, w = _stft_reference(x, n_fft, hop, k0, count, reflect)
    cols = lambda a: a.reshape(plan.m + 1, width)[:, :count].T  # noqa: E731  (frames by bins)
    tol = 1e-12 * np.abs(want).max()
    np.testing.assert_allclose(cols(xr) + 1j * cols(xi), want, rtol=0, atol=tol)
    np.testing.assert_allclose(cols(mag), np.abs(want), rtol=0, atol=tol)
    g = rng.uniform(0.5, 2.0, xr.size)
    acc, norm = np.zeros(7 + n_fft + count * hop), np.zeros(7 + n_fft + count * hop)
    stft.synthesise(xr, xi, g, width, count, *tables, zr, zi, frames, window, acc, norm, 7, hop)
    frames = np.fft.irfft(want * cols(g), n=n_fft, axis=1)
    want_acc, want_norm = np.zeros_like(acc), np.zeros_like(norm)
    for j in range(count):
        want_acc[7 + j * hop:7 + j * hop + n_fft] += w * frames[j]
        want_norm[7 + j * hop:7 + j * hop + n_fft] += w * w
    np.testing.assert_allclose(acc, want_acc, rtol=0, atol=1e-12 * np.abs(want_acc).max())
    np.testing.assert_allclose(norm, want_norm, rtol=0, atol=1e-14)


def test_a_frames_result_does_not_depend_on_its_lane_or_its_group():
    """Every lane computes the same operations: the same frame in lane 0 of a group of eight and in
    lane 5 of a group of six gives the same bits (mel matching's output then does not depend on how
    its frames were blocked)."""
    n_fft, hop = 256, 64
    plan = stft.RealFFTPlan(n_fft)
    tables = plan.tables
    x = np.random.default_rng(1).standard_normal(3000)
    window = np.hanning(n_fft + 1)[:-1]
    out = []
    for k0, count, lane in ((10, 8, 0), (5, 6, 5)):  # frame 10 either way
        width = stft.block_width(count)
        xr, xi, mag = (np.zeros((plan.m + 1) * width) for _ in range(3))
        zr, zi, frames = plan.scratch()
        stft.analyse(x, 0, x.size, k0, count, hop, True, window, *tables, zr, zi, xr, xi, mag, width)
        out.append(np.stack([a.reshape(plan.m + 1, width)[:, lane] for a in (xr, xi, mag)]))
    assert np.array_equal(out[0], out[1])


def test_plans_and_mel_matching_refuse_sizes_that_are_not_powers_of_two():
    from wavern.engine.melmatch import MelMatch

    with pytest.raises(ValueError, match="power of two"):
        stft.RealFFTPlan(1000)
    with pytest.raises(ParameterError, match="power of two"):
        MelMatch(mel_config=MelConfig(n_fft=1000, win_length=1000))
    assert stft.RealFFTPlan(8).m == 4


def test_the_uncompiled_twins_give_numpys_bins():
    """Under NUMBA_DISABLE_JIT the butterflies and the transposes are plain Python (coverage,
    debugging): the same transforms."""
    code = (
        "import numpy as np\n"
        "from wavern.engine.kernels import stft\n"
        "p = stft.RealFFTPlan(32); L = stft.LANES\n"
        "x = np.random.default_rng(0).standard_normal((L, 32))\n"
        "zr = np.ascontiguousarray(x[:, 0::2].T).ravel(); zi = np.ascontiguousarray(x[:, 1::2].T).ravel()\n"
        "stft.dif(zr, zi, p.m, p.cr, p.ci)\n"
        "xr, xi, mag = (np.zeros((p.m + 1) * L) for _ in range(3))\n"
        "stft.rfft_post(zr, zi, p.pos, p.rc, p.rs, xr, xi, mag, 0, L)\n"
        "X = (xr + 1j * xi).reshape(p.m + 1, L).T\n"
        "g = np.ones((p.m + 1) * L)\n"
        "stft.irfft_pre(xr, xi, g, 0, L, p.pos, p.rc, p.rs, zr, zi)\n"
        "stft.dit(zr, zi, p.m, p.cr, p.ci)\n"
        "y = np.empty((L, 32)); y[:, 0::2] = zr.reshape(p.m, L).T / p.m; y[:, 1::2] = zi.reshape(p.m, L).T / p.m\n"
        "x2 = np.random.default_rng(1).standard_normal(400); w = np.hanning(33)[:-1]\n"
        "xr2, xi2, mag2 = (np.zeros((p.m + 1) * L) for _ in range(3)); zr, zi, fr = p.scratch()\n"
        "stft.analyse(x2, 0, 400, 2, L, 16, True, w, p.pos, p.cr, p.ci, p.rc, p.rs, zr, zi, xr2, xi2, mag2, L)\n"
        "ref = np.fft.rfft(np.stack([x2[(2 + j) * 16 - 16:(2 + j) * 16 + 16] for j in range(L)]) * w, axis=1)\n"
        "acc, nrm = np.zeros(400), np.zeros(400)\n"
        "stft.synthesise(xr2, xi2, np.ones_like(xr2), L, L, p.pos, p.cr, p.ci, p.rc, p.rs, zr, zi, fr, w, acc, nrm, 0, 16)\n"
        "want = np.zeros(400)\n"
        "for j in range(L): want[j * 16:j * 16 + 32] += w * np.fft.irfft(ref[j], n=32)\n"
        "print(np.abs(X - np.fft.rfft(x, axis=1)).max(), np.abs(y - x).max(),\n"
        "      np.abs((xr2 + 1j * xi2).reshape(p.m + 1, L).T - ref).max(), np.abs(acc - want).max())\n"
    )
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    errs = [float(v) for v in out.stdout.split()]  # bins, round trip, a block's bins, its overlap-add
    assert len(errs) == 4 and max(errs) < 1e-12, errs
