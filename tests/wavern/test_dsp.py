"""The one mel function against librosa's own pipeline, and the sample format round trips."""

import numpy as np
import pytest

from wavern.dsp import (DEFAULT_MEL, MelConfig, byte_to_unit, float_to_int16, frames_for_samples, int16_to_float,
                        join_coarse_fine, log_mel, mulaw_compress, mulaw_expand, mulaw_log_slope, pitch_features, pitch_track,
                        split_coarse_fine)
from wavern.errors import ParameterError


def test_log_mel_matches_librosa():
    import librosa

    rng = np.random.default_rng(0)
    t = np.arange(22050) / 22050
    x = (0.3 * np.sin(2 * np.pi * 220 * t) + 0.05 * rng.standard_normal(t.size)).astype(np.float32)
    ours = log_mel(x)
    ref = librosa.feature.melspectrogram(y=x, sr=22050, n_fft=1024, hop_length=256, win_length=1024, power=1.0,
                                         n_mels=80, fmin=0, fmax=8000, center=True, pad_mode="reflect")
    ref = np.log(np.maximum(ref, 1e-5)).T
    assert ours.shape == ref.shape == (frames_for_samples(x.size), 80)
    np.testing.assert_allclose(ours, ref, atol=2e-3)


def test_log_mel_silence_is_floor_and_short_input_works():
    cfg = DEFAULT_MEL
    assert np.allclose(log_mel(np.zeros(1000, np.float32)), np.log(cfg.log_floor))
    assert log_mel(np.zeros(10, np.float32)).shape == (1, 80)
    assert log_mel(np.zeros(0, np.float32)).shape == (1, 80)


@pytest.mark.parametrize("bad", [np.zeros((2, 100), np.float32), np.zeros(100, np.int16)])
def test_log_mel_rejects_bad_input(bad):
    with pytest.raises(ParameterError):
        log_mel(bad)


def test_coarse_fine_round_trip_all_values():
    x = np.arange(-32768, 32768, dtype=np.int64).astype(np.int16)
    c, f = split_coarse_fine(x)
    assert c.min() == 0 and c.max() == 255 and f.min() == 0 and f.max() == 255
    assert c[0] == 0 and c[-1] == 255 and split_coarse_fine(np.int16([0]))[0][0] == 128
    np.testing.assert_array_equal(join_coarse_fine(c, f), x)
    u = byte_to_unit(np.array([0, 255]))
    np.testing.assert_allclose(u, [-1.0, 1.0])


def test_float_int16_round_trip():
    x = np.arange(-32768, 32768, 7, dtype=np.int64).astype(np.int16)
    np.testing.assert_array_equal(float_to_int16(int16_to_float(x)), x)
    assert float_to_int16(np.array([2.0, -2.0])).tolist() == [32767, -32768]


def test_mel_config_strict_dict():
    assert MelConfig.from_dict(DEFAULT_MEL.to_dict()) == DEFAULT_MEL
    with pytest.raises(ParameterError, match="unknown"):
        MelConfig.from_dict({**DEFAULT_MEL.to_dict(), "bogus": 1})


# ---------------------------------------------------------------- pitch
def _glide(seconds: float = 1.5, f_lo: float = 80.0, f_hi: float = 250.0, sr: int = 22050):
    """A glottal-like pulse train (decaying resonance per period) whose f0 glides exponentially."""
    n = int(seconds * sr)
    f0 = f_lo * (f_hi / f_lo) ** (np.arange(n) / n)
    phase = np.cumsum(f0 / sr)
    pulses = np.diff(np.floor(phase), prepend=0.0)  # 1 at the first sample of every period
    kernel = np.exp(-np.arange(200) / 30.0) * np.sin(2 * np.pi * 700 * np.arange(200) / sr)
    x = np.convolve(pulses, kernel)[:n]
    return (0.5 * x / np.abs(x).max()).astype(np.float32), f0


def test_pitch_track_follows_a_glide_and_agrees_with_librosa_yin():
    import librosa

    x, f0 = _glide()
    track = pitch_track(x)
    assert track.shape == (frames_for_samples(x.size), 2) and track.dtype == np.float32
    centres = np.arange(track.shape[0]) * DEFAULT_MEL.hop_length
    inner = slice(4, -4)  # away from the zero-padded ends
    truth = f0[centres[inner]]
    np.testing.assert_allclose(track[inner, 0], truth, rtol=0.015)
    assert track[inner, 1].min() > 0.9
    ref = librosa.yin(x, fmin=60, fmax=400, sr=22050, frame_length=1024, hop_length=256, center=True)
    np.testing.assert_allclose(track[inner, 0], ref[inner], rtol=0.02)


def test_pitch_track_noise_silence_and_bad_input():
    noise = np.random.default_rng(0).standard_normal(22050).astype(np.float32) * 0.1
    track = pitch_track(noise)
    assert (track[:, 0] > 0).mean() < 0.05 and track[:, 1].mean() < 0.5
    silent = pitch_track(np.zeros(5000, np.float32))
    assert not silent.any()
    assert pitch_track(np.zeros(0, np.float32)).shape == (1, 2)
    with pytest.raises(ParameterError):
        pitch_track(np.zeros(100, np.int16))
    with pytest.raises(ParameterError):
        pitch_track(np.zeros(100, np.float32), fmin=500, fmax=400)


def test_pitch_features_fill_unvoiced_frames_from_their_neighbours():
    track = np.array([[0, 0.1], [120, 0.9], [0, 0.2], [0, 0.2], [480, 0.95], [0, 0.0]], np.float32)
    feats = pitch_features(track)
    np.testing.assert_allclose(feats[:, 0], [0, 0, 2 / 3, 4 / 3, 2, 2], atol=1e-6)  # octaves above 120 Hz
    np.testing.assert_array_equal(feats[:, 1], track[:, 1])
    assert not pitch_features(np.zeros((3, 2), np.float32)).any()
    with pytest.raises(ParameterError):
        pitch_features(np.zeros((3, 3), np.float32))


def test_mulaw_codes_are_monotone_and_invert_small_values_exactly():
    x = np.arange(-32768, 32768)
    y = mulaw_compress(x)
    assert y.min() == -32767 and y.max() == 32767 and np.all(np.diff(y) >= 0)
    assert np.array_equal(mulaw_compress(-x[1:]), -y[1:])  # odd
    back = np.rint(mulaw_expand(y))
    small = np.abs(x) < 2000
    np.testing.assert_array_equal(back[small], x[small])
    assert np.max(np.abs(back - x)) <= 3  # the coarsest codes, near full scale
    np.testing.assert_allclose(mulaw_expand(mulaw_compress([0.0, 0.3, -1234.5])), [0, 0.3, -1234.5], atol=0.12)  # half a code
    assert y[32768 + 1] - y[32768] > 40  # near zero, one unit of x is many codes


def test_mulaw_log_slope_is_the_derivative_of_the_code():
    def code(v):  # the unrounded mu-law curve, written out independently
        return np.sign(v) * 32767 * np.log1p(255 * np.abs(v) / 32768) / np.log1p(255)

    x, h = np.array([0.0, 3.0, 80.0, 1940.0, 20000.0]), 0.01
    numeric = (code(x + h) - code(x - h)) / (2 * h)
    np.testing.assert_allclose(mulaw_log_slope(mulaw_compress(x)), np.log(numeric), atol=0.01)


def test_pulse_phase_finds_jittered_pulses_and_phase_step_runs_one_cycle_a_period():
    from wavern.dsp import phase_step, pulse_phase

    hop, rng = 64, np.random.default_rng(0)
    n = 40 * hop
    lags = np.zeros(40)
    lags[5:30] = 100  # voiced frames 5..29: samples 320 .. 1919
    pulses = [340]
    while pulses[-1] + 130 < 30 * hop:
        pulses.append(pulses[-1] + int(rng.integers(85, 116)))  # jitter of +-15 % around the lag
    r = rng.normal(0, 30, n)
    r[pulses] += 3000.0
    phase = pulse_phase(r, lags, hop)
    assert phase.dtype == np.float32 and phase.shape == (n,)
    assert np.all(phase[:5 * hop] == 0) and np.all(phase[30 * hop:] == 0)  # unvoiced: 0
    for a, b in zip(pulses[:-1], pulses[1:]):  # 0 at each pulse, linear to the next
        np.testing.assert_allclose(phase[a:b], (np.arange(a, b) - a) / (b - a), atol=1e-3)
    np.testing.assert_allclose(phase[320:340], np.mod((np.arange(320, 340) - 340) / 100, 1), atol=1e-3)
    assert not pulse_phase(r, np.zeros(40), hop).any()
    with pytest.raises(ParameterError):
        pulse_phase(r[None], lags, hop)
    phi = 0.0
    for _ in range(100):
        phi = phase_step(phi, 100)
    assert phi == pytest.approx(0.0, abs=1e-9) or phi == pytest.approx(1.0, abs=1e-9)
    assert phase_step(0.995, 100) == pytest.approx(0.005) and phase_step(0.7, 0) == 0.0


def test_lpc_prediction_is_the_predictor_sum_sample_by_sample():
    from wavern.dsp import lpc_prediction, mel_lpc

    rng = np.random.default_rng(3)
    s = rng.normal(0, 3000, 700).astype(np.int16)
    a = mel_lpc(log_mel(s / 32768.0), 8)
    want = np.zeros(s.size)
    for t in range(s.size):  # silence before the first sample; frames past the end use the last
        row = a[min(t // 256, a.shape[0] - 1)]
        want[t] = -sum(row[k] * float(s[t - k]) for k in range(1, 9) if t >= k)
    np.testing.assert_allclose(lpc_prediction(s, a, 256), want, rtol=0, atol=1e-9)


def test_soft_limit_leaves_the_signal_below_its_knee_and_bends_peaks_below_full_scale():
    from wavern.dsp import soft_limit

    x = np.linspace(-4.0, 4.0, 80001)
    y = soft_limit(x)
    inside = np.abs(x) <= 0.9
    assert np.array_equal(y[inside], x[inside])  # untouched below the knee
    assert np.all(np.abs(y) <= 1.0) and np.all(np.diff(y) >= 0)  # never past full scale, order kept
    assert np.all(np.abs(y[np.abs(x) < 2.0]) < 1.0) and np.all(np.diff(y[np.abs(x) < 2.0]) > 0)
    assert np.array_equal(soft_limit(-x), -y)
    slope = np.diff(y) / np.diff(x)
    k = np.searchsorted(x, 0.9)
    assert abs(slope[k] - 1.0) < 1e-3 and slope[-1] < 1e-3  # slope 1 at the knee, flat far above it
    assert soft_limit(np.array([0.95]))[0] == pytest.approx(0.9 + 0.1 * np.tanh(0.5))


_BLAS_SCRIPT = """
import threading, numpy as np
from threadpoolctl import threadpool_limits, threadpool_info
from wavern.dsp import log_mel

def counts():
    return {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

x = (np.random.default_rng(0).standard_normal(22050 * 4) * 0.1).astype(np.float32)
threadpool_limits(2, user_api="blas")
ref = log_mel(x)
start = counts()
bad = [0]

def run():
    for _ in range(150):
        bad[0] += not np.array_equal(log_mel(x), ref)

ts = [threading.Thread(target=run) for _ in range(2)]
[t.start() for t in ts]
[t.join() for t in ts]
import json
print(json.dumps([start, counts(), bad[0]]))
"""


def test_log_mel_from_threads_leaves_the_process_blas_threads_as_they_were():
    """log_mel limits BLAS to one thread for its product; from two threads at once (a fresh
    process, as a reviewer's script) the process's BLAS thread count comes back as it was (it
    stayed at 1: each thread restored what it found, the other's limit) and every result has
    the one-thread product's bytes."""
    import subprocess
    import sys

    import json

    r = subprocess.run([sys.executable, "-c", _BLAS_SCRIPT], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    start, after, bad = json.loads(r.stdout.strip().splitlines()[-1])
    if 2 not in start.values():
        pytest.skip(f"no BLAS here that runs 2 threads ({start})")
    assert after == start and bad == 0, (start, after, bad)


def test_an_absurd_finite_mel_value_is_silence_not_an_overflow():
    """mel_power_spectrum clamps log values to 20: one glitching frame at 800 overflowed exp, the
    post-filter's coefficients turned NaN and the NaN stuck in its memory (mutation audit)."""
    from wavern import dsp

    mel = np.full((3, DEFAULT_MEL.n_mels), -3.0)
    mel[1, 10] = 800.0
    p = dsp.mel_power_spectrum(mel)
    assert np.all(np.isfinite(p))
    top = dsp.mel_power_spectrum(np.full((1, DEFAULT_MEL.n_mels), 20.0))
    assert p[1].max() <= top.max() * (1 + 1e-9)  # no louder than a frame at the clamp everywhere


def _toeplitz_solution(r: np.ndarray) -> np.ndarray:
    """The normal equations R a = -r solved directly (numpy's LU): the reference for Levinson."""
    p = r.size - 1
    R = np.array([[r[abs(i - j)] for j in range(p)] for i in range(p)])
    return np.concatenate([[1.0], np.linalg.solve(R, -r[1:])])


def test_levinson_solves_the_normal_equations_frame_by_frame():
    from wavern import dsp

    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 3000)) * np.linspace(0.5, 4.0, 6)[:, None]
    x[:, 1:] += 0.9 * x[:, :-1]  # coloured, so the predictors are far from zero
    for order in (1, 2, 7, 16, 56):
        r = np.stack([[np.dot(xx[:xx.size - k], xx[k:]) for k in range(order + 1)] for xx in x])
        a = dsp.levinson(r)
        assert a.shape == (6, order + 1) and np.all(a[:, 0] == 1.0)
        for t in range(6):
            np.testing.assert_allclose(a[t], _toeplitz_solution(r[t]), rtol=0, atol=1e-8)
            np.testing.assert_array_equal(dsp.levinson(r[t:t + 1])[0], a[t])  # no frame depends on another


def test_levinson_recovers_an_autoregressive_process_and_nothing_beyond_its_order():
    """The exact autocorrelation of x_t = 1.2 x_{t-1} - 0.7 x_{t-2} + 0.2 x_{t-3} + e_t, from its
    impulse response: order 3 gives A(z) = 1 - 1.2 z^-1 + 0.7 z^-2 - 0.2 z^-3, higher orders zeros after it."""
    from wavern import dsp

    want = np.array([1.0, -1.2, 0.7, -0.2])
    h = np.zeros(4000)
    h[0] = 1.0
    for t in range(1, h.size):
        h[t] = -sum(want[k] * h[t - k] for k in range(1, 4) if t - k >= 0)
    r = np.array([[np.dot(h[:h.size - k], h[k:]) for k in range(9)]])
    a = dsp.levinson(r)[0]
    np.testing.assert_allclose(a[:4], want, atol=1e-9)
    np.testing.assert_allclose(a[4:], 0.0, atol=1e-9)


def test_levinson_refuses_a_shape_it_cannot_read():
    from wavern import dsp
    from wavern.errors import ParameterError

    with pytest.raises(ParameterError, match="autocorrelations"):
        dsp.levinson(np.ones(5))


def test_mel_power_spectrum_is_the_band_interpolation_squared_row_by_row():
    from wavern import dsp

    rng = np.random.default_rng(4)
    mel = rng.normal(-3.0, 2.0, (37, DEFAULT_MEL.n_mels))
    interp, _ = dsp._band_interpolation(DEFAULT_MEL)
    p = dsp.mel_power_spectrum(mel)
    np.testing.assert_allclose(p, (np.exp(mel) @ interp) ** 2, rtol=1e-12, atol=0)
    for t in (0, 17, 36):
        np.testing.assert_array_equal(dsp.mel_power_spectrum(mel[t:t + 1])[0], p[t])
