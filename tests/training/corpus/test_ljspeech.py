"""The LJSpeech-layout loader, on a tiny dataset made here."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from wavern.errors import CorpusError
from wavern.training.corpus import load_ljspeech
from wavern.training.corpus.records import is_held_out


def _tone(rate: int, seconds: float, hz: float) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


@pytest.fixture
def lj(tmp_path):
    (tmp_path / "wavs").mkdir()
    sf.write(tmp_path / "wavs" / "LJ001-0001.wav", _tone(22050, 0.5, 440.0), 22050, subtype="PCM_16")
    sf.write(tmp_path / "wavs" / "LJ001-0002.wav", _tone(16000, 0.7, 440.0), 16000, subtype="PCM_16")
    stereo = np.stack([_tone(44100, 0.3, 1000.0), _tone(44100, 0.3, 1000.0)], axis=1)
    sf.write(tmp_path / "wavs" / "LJ001-0003.wav", stereo, 44100, subtype="PCM_16")
    (tmp_path / "metadata.csv").write_text(
        "LJ001-0001|Printing, in the only sense|Printing, in the only sense\n"
        "LJ001-0002|It was 1907.|It was nineteen oh seven.\n"
        "LJ001-0003|No normalised column\n",
        encoding="utf-8",
    )
    return tmp_path


def test_records(lj):
    c = load_ljspeech(lj)
    assert [r.id for r in c] == ["LJ001-0001", "LJ001-0002", "LJ001-0003"]
    r1, r2, r3 = c
    assert r2.text == "It was 1907." and r2.spoken == "It was nineteen oh seven."
    assert r3.spoken == r3.text == "No normalised column"
    for r in c:
        assert r.durations is None and r.phonemes is None and r.voice is None and r.mel_path is None
        assert r.held_out == is_held_out(r.text)
    assert r1.n_samples == 11025
    assert r2.n_samples == round(0.7 * 22050)  # 11200 samples at 16 kHz -> 15435.0 exactly
    assert r3.n_samples == round(0.3 * 22050)


def test_resampled_audio_matches_a_tone_made_at_22050(lj):
    r2 = load_ljspeech(lj)[1]
    a = r2.audio()
    assert a.dtype == np.int16 and a.size == r2.n_samples
    ref = _tone(22050, 0.7, 440.0)
    core = slice(500, a.size - 500)  # away from the filter's edge effects
    np.testing.assert_allclose(a[core] / 32768.0, ref[core], atol=2e-3)
    mel = r2.mel()
    assert mel.shape == (1 + a.size // 256, 80) and mel.dtype == np.float32


def test_stereo_is_averaged(lj):
    r3 = load_ljspeech(lj)[2]
    a = r3.audio() / 32768.0
    ref = _tone(22050, 0.3, 1000.0)
    core = slice(500, a.size - 500)
    np.testing.assert_allclose(a[core], ref[core], atol=3e-3)


def test_limit_and_errors(lj, tmp_path_factory):
    assert len(load_ljspeech(lj, limit=2)) == 2
    empty = tmp_path_factory.mktemp("empty")
    with pytest.raises(CorpusError, match="metadata.csv"):
        load_ljspeech(empty)
    (lj / "metadata.csv").write_text("LJ001-0009|missing audio|missing audio\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="LJ001-0009.wav"):
        load_ljspeech(lj)
    (lj / "metadata.csv").write_text("just one field\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="id|text|normalized"):
        load_ljspeech(lj)
