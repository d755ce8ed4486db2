"""The one mel function against librosa's own pipeline, and the sample format round trips."""

import numpy as np
import pytest

from wavern.dsp import (DEFAULT_MEL, MelConfig, byte_to_unit, float_to_int16, frames_for_samples, int16_to_float,
                        join_coarse_fine, log_mel, split_coarse_fine)
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
