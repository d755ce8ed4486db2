"""Evaluation metrics against closed forms and naive twins; the phone classifier on a tone task."""

import math

import numpy as np
import pytest

from wavern.dsp import log_mel
from wavern.errors import ParameterError
from wavern.training import evaluate as ev

SR = 22050


# --------------------------------------------------------------------------- helpers


def _speechlike(seconds: float = 2.0, seed: int = 0) -> np.ndarray:
    """Harmonic complex at 120 Hz with gliding formant-like emphasis and 4 Hz syllabic bursts."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    f0 = 120 * (1 + 0.1 * np.sin(2 * np.pi * 0.7 * t))
    phase = 2 * np.pi * np.cumsum(f0) / SR
    formant = 700 + 500 * np.sin(2 * np.pi * 1.3 * t + rng.uniform(0, 6))
    x = np.zeros_like(t)
    for k in range(1, 30):
        fk = k * f0
        x += np.exp(-((fk - formant) / 400) ** 2) * np.sin(k * phase) + 0.1 / k * np.sin(k * phase)
    env = np.clip(np.sin(2 * np.pi * 4 * t), 0, None) ** 0.5
    x = x * env
    return (0.3 * x / np.abs(x).max()).astype(np.float32)


def _naive_dtw(cost):
    """O(n·m) DTW written the obvious way: accumulated cost table, then walk back."""
    n, m = cost.shape
    inf = float("inf")
    acc = [[inf] * (m + 1) for _ in range(n + 1)]
    acc[0][0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            acc[i][j] = cost[i - 1][j - 1] + min(acc[i - 1][j - 1], acc[i - 1][j], acc[i][j - 1])
    path, i, j = [(n - 1, m - 1)], n, m
    while (i, j) != (1, 1):
        options = [(acc[i - 1][j - 1], i - 1, j - 1), (acc[i - 1][j], i - 1, j), (acc[i][j - 1], i, j - 1)]
        _, i, j = min(options, key=lambda o: o[0])  # first minimum: diagonal, then up, then left
        path.append((i - 1, j - 1))
    return np.array(path[::-1]), acc[n][m]


# --------------------------------------------------------------------------- DTW and MCD


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (6, 1), (9, 9), (13, 21), (40, 17)])
def test_dtw_matches_naive_twin(shape):
    rng = np.random.default_rng(sum(shape))
    cost = rng.random(shape)
    path, total = ev.dtw_align(cost)
    ref_path, ref_total = _naive_dtw(cost)
    np.testing.assert_array_equal(path, ref_path)
    assert total == pytest.approx(ref_total, rel=1e-12)
    assert total == pytest.approx(cost[path[:, 0], path[:, 1]].sum(), rel=1e-12)
    steps = np.diff(path, axis=0)
    assert set(map(tuple, steps)) <= {(0, 1), (1, 0), (1, 1)}


def test_dtw_recovers_a_time_warp():
    a = np.sin(np.linspace(0, 6, 50))[:, None]
    b = np.repeat(a, 2, axis=0)  # every frame twice
    path, total = ev.dtw_align(np.abs(a - b.T))
    assert total == pytest.approx(0.0, abs=1e-12)
    assert len(path) == 100


def test_dtw_rejects_bad_cost():
    with pytest.raises(ParameterError):
        ev.dtw_align(np.zeros((0, 3)))
    with pytest.raises(ParameterError):
        ev.dtw_align(np.array([[1.0, np.nan]]))


def test_mel_cepstra_match_the_cosine_series():
    rng = np.random.default_rng(1)
    mel = rng.standard_normal((4, 80))
    c = ev.mel_cepstra(mel, n_ceps=24)
    k = np.arange(80)
    for m in (1, 5, 24):
        expected = (mel * np.cos(np.pi * m * (k + 0.5) / 80)).sum(1) / 80
        np.testing.assert_allclose(c[:, m - 1], expected, atol=1e-12)


def test_mcd_zero_for_identical_and_gain_invariant():
    x = _speechlike()
    mel = log_mel(x)
    assert ev.mcd_dtw_mel(mel, mel) == 0.0
    assert ev.mcd_dtw(x, x) == 0.0
    mel64 = mel.astype(np.float64)
    assert ev.mcd_dtw_mel(mel64, mel64 + 1.7) == pytest.approx(0.0, abs=1e-9)  # a gain only moves c0


def test_mcd_closed_form_for_a_pure_cepstral_offset():
    rng = np.random.default_rng(2)
    mel = np.cumsum(rng.standard_normal((30, 80)), axis=0) * 3  # frames far apart: DTW stays diagonal
    a = 0.2
    k = np.arange(80)
    shifted = mel + a * np.cos(np.pi * 3 * (k + 0.5) / 80)  # Δc_3 = a / 2, every other Δc = 0
    assert ev.mcd_dtw_mel(mel, shifted) == pytest.approx(ev.MCD_CONSTANT * a / 2, rel=1e-9)
    assert ev.MCD_CONSTANT == pytest.approx(10 * math.sqrt(2) / math.log(10))


def test_mcd_and_lsd_grow_with_distortion():
    x = _speechlike()
    rng = np.random.default_rng(3)
    noise = rng.standard_normal(x.size).astype(np.float32)
    mcd = [ev.mcd_dtw(x, x + s * noise) for s in (0.001, 0.01, 0.05)]
    lsd = [ev.log_spectral_distance(x, x + s * noise) for s in (0.001, 0.01, 0.05)]
    assert 0 < mcd[0] < mcd[1] < mcd[2]
    assert 0 < lsd[0] < lsd[1] < lsd[2]
    assert ev.log_spectral_distance(x, x) == 0.0


def test_stoi_and_pesq_order_clean_above_noisy():
    x = _speechlike(3.0)
    rng = np.random.default_rng(4)
    noise = rng.standard_normal(x.size).astype(np.float32)
    stoi = [ev.stoi_score(x, x + s * noise) for s in (0.0, 0.01, 0.1)]
    pesq = [ev.pesq_wb(x, x + s * noise) for s in (0.0, 0.01, 0.1)]
    assert stoi[0] == pytest.approx(1.0, abs=1e-6)
    assert stoi[0] > stoi[1] > stoi[2]
    assert pesq[0] > 4.4 and pesq[0] > pesq[1] > pesq[2]
    # a shorter degraded signal is zero-padded, a longer one cut: same lengths either way
    assert ev.stoi_score(x, np.concatenate([x, x[:500]])) == pytest.approx(1.0, abs=1e-6)


def _pulses(f0_hz: float, seconds: float = 1.0, sr: int = 22050) -> np.ndarray:
    """A decaying-resonance pulse train at a fixed f0 (voiced), float32."""
    n = int(seconds * sr)
    pulses = np.zeros(n)
    pulses[::int(round(sr / f0_hz))] = 1.0
    kernel = np.exp(-np.arange(200) / 30.0) * np.sin(2 * np.pi * 700 * np.arange(200) / sr)
    x = np.convolve(pulses, kernel)[:n]
    return (0.5 * x / np.abs(x).max()).astype(np.float32)


def test_pitch_errors_separate_voicing_and_octave_mistakes():
    voiced = _pulses(120.0)
    assert ev.pitch_errors(voiced, voiced) == (0.0, 0.0)
    noise = (0.1 * np.random.default_rng(0).standard_normal(voiced.size)).astype(np.float32)
    vde, _ = ev.pitch_errors(voiced, noise)
    assert vde > 0.9  # every voiced frame lost its voicing
    vde, gpe = ev.pitch_errors(voiced, _pulses(240.0))
    assert vde < 0.1 and gpe > 0.9  # voiced in both, an octave off
    vde, gpe = ev.pitch_errors(voiced, _pulses(126.0))
    assert vde < 0.1 and gpe == 0.0  # 5 % off is not a gross error
    assert math.isnan(ev.pitch_errors(noise, noise[::-1].copy())[1])  # nothing voiced in both


def test_coarse_only_keeps_the_high_byte():
    x = _speechlike(0.5)
    y = ev.coarse_only(x)
    err = np.abs(y - x)
    assert err.max() <= 129 / 32768 and err.max() > 64 / 32768
    np.testing.assert_array_equal(ev.coarse_only(y), y)


# --------------------------------------------------------------------------- labels


def test_base_phone_collapses_marks():
    assert ev.base_phone("ˈaɪ") == "aɪ"
    assert ev.base_phone("ˌiː") == "i"
    assert ev.base_phone("n̩") == "n"
    assert ev.base_phone("ˈa:") == "a" and ev.base_phone("r") == "ɹ" and ev.base_phone("t̪") == "t"
    for tok in ("", ",", ".", " ", "_", "<bos>", "<eos>", "|"):
        assert ev.base_phone(tok) == ev.SILENCE


def test_frame_labels_against_naive_lookup():
    rng = np.random.default_rng(5)
    toks = ["ˈa", "b", "", "c", "d", "ˌe"]
    durs = rng.integers(0, 2000, len(toks))
    durs[2] = 0
    n_samples = int(durs.sum())
    n_frames = 1 + n_samples // 256
    got = ev.frame_labels(toks, durs, n_frames)
    starts = np.concatenate([[0], np.cumsum(durs)[:-1]])
    for t in range(n_frames):
        s = min(256 * t, n_samples - 1)
        i = [k for k in range(len(toks)) if starts[k] <= s < starts[k] + durs[k]][0]
        assert got[t] == ev.base_phone(toks[i])
    with pytest.raises(ParameterError):
        ev.frame_labels(["a"], [1, 2], 3)


# --------------------------------------------------------------------------- phone classifier


TONES = {"ˈa": 300.0, "i": 1200.0, "u": 3000.0}


def _tone_utterance(rng: np.random.Generator):
    toks, durs, parts = [], [], []
    for _ in range(9):
        tok = str(rng.choice(list(TONES)))
        n = int(rng.integers(2000, 6000))
        t = np.arange(n) / SR
        parts.append(0.3 * np.sin(2 * np.pi * TONES[tok] * t + rng.uniform(0, 6)) * rng.uniform(0.5, 1.0))
        toks.append(tok)
        durs.append(n)
    x = np.concatenate(parts).astype(np.float32)
    return x, toks, np.array(durs)


@pytest.fixture(scope="module")
def tone_classifier():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    rng = np.random.default_rng(6)
    mels, labels = [], []
    for _ in range(16):
        x, toks, durs = _tone_utterance(rng)
        mel = log_mel(x)
        mels.append(mel)
        labels.append(ev.frame_labels(toks, durs, mel.shape[0]))
    return ev.fit_phone_classifier(mels, labels, context=2, hidden=32, epochs=4, batch_size=64,
                                   min_class_frames=10, seed=0)


def test_classifier_learns_tones_and_scores_noise_at_chance(tone_classifier):
    assert sorted(tone_classifier.config.classes) == ["a", "i", "u"]
    rng = np.random.default_rng(7)
    clean, noise = [], []
    for _ in range(4):
        x, toks, durs = _tone_utterance(rng)
        clean.append(ev.phone_accuracy(x, toks, durs, classifier=tone_classifier))
        n = (0.1 * rng.standard_normal(x.size)).astype(np.float32)
        noise.append(ev.phone_accuracy(n, toks, durs, classifier=tone_classifier))
    assert min(clean) > 0.95
    assert np.mean(noise) < 0.55  # three balanced classes: chance is about 1/3


def test_classifier_training_is_deterministic(tone_classifier):
    rng = np.random.default_rng(6)
    mels, labels = [], []
    for _ in range(16):
        x, toks, durs = _tone_utterance(rng)
        mel = log_mel(x)
        mels.append(mel)
        labels.append(ev.frame_labels(toks, durs, mel.shape[0]))
    again = ev.fit_phone_classifier(mels, labels, context=2, hidden=32, epochs=4, batch_size=64,
                                    min_class_frames=10, seed=0)
    for a, b in zip(again.net.state_dict().values(), tone_classifier.net.state_dict().values()):
        assert (a == b).all()


def test_classifier_save_load_round_trip(tone_classifier, tmp_path):
    import torch

    x, toks, durs = _tone_utterance(np.random.default_rng(8))
    mel = log_mel(x)
    ev.save_phone_classifier(tone_classifier, tmp_path / "clf", dtype="float32", provenance={"note": "test"})
    back = ev.load_phone_classifier(tmp_path / "clf.json")
    assert back.config == tone_classifier.config
    np.testing.assert_array_equal(back.predict(mel), tone_classifier.predict(mel))
    windows = torch.from_numpy(tone_classifier.padded(mel)).unfold(0, 5, 1).transpose(1, 2)
    with torch.no_grad():
        assert torch.equal(back.logits(windows), tone_classifier.logits(windows))
    ev.save_phone_classifier(tone_classifier, tmp_path / "half.safetensors")
    half = ev.load_phone_classifier(tmp_path / "half")
    assert (half.predict(mel) == tone_classifier.predict(mel)).mean() > 0.98
    with pytest.raises(ParameterError):
        ev.load_phone_classifier(tmp_path / "missing.json")


def test_evaluate_utterances_identity_and_degraded(tone_classifier):
    rng = np.random.default_rng(9)
    utts = []
    for i in range(2):
        x, toks, durs = _tone_utterance(rng)
        utts.append(ev.EvalUtterance(id=f"u{i}", audio=x, mel=log_mel(x), phonemes=tuple(toks), durations=durs))
    same = ev.evaluate_utterances(lambda u: u.audio, utts, classifier=tone_classifier,
                                  metrics=["stoi", "mcd_db", "lsd_db", "phone_acc"])
    assert same["n_utts"] == 2 and same["ids"] == ["u0", "u1"]
    assert same["mcd_db"] == 0.0 and same["lsd_db"] == 0.0 and same["stoi"] == pytest.approx(1.0, abs=1e-6)
    assert same["phone_acc"] > 0.95
    noisy = ev.evaluate_utterances(lambda u: (0.2 * rng.standard_normal(u.audio.size)).astype(np.float32), utts,
                                   classifier=tone_classifier, metrics=["mcd_db", "phone_acc"])
    assert noisy["mcd_db"] > 1.0 and noisy["phone_acc"] < 0.6
    with pytest.raises(ParameterError):
        ev.evaluate_utterances(lambda u: u.audio, utts, metrics=["bogus"])


# --------------------------------------------------------------------------- on a tiny real corpus


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    """Ten espeak utterances: sentences picked so that three fall in the corpus's held-out split."""
    from wavern.training.corpus import build_corpus, default_sentences_path, is_held_out

    lines = [s for s in default_sentences_path().read_text(encoding="utf-8").splitlines() if len(s.split()) <= 8]
    held = [s for s in lines if is_held_out(s)][:3]
    train = [s for s in lines if not is_held_out(s)][:7]
    root = tmp_path_factory.mktemp("corpus")
    (root / "sentences.txt").write_text("\n".join(held + train) + "\n", encoding="utf-8")
    build_corpus(root / "c", utterances=10, seed=0, single_voice="en-us", jobs=1, progress=False,
                 sentences_path=root / "sentences.txt")
    return root / "c"


def test_train_and_copy_synthesis_on_a_corpus(tiny_corpus, tmp_path):
    import torch

    torch.set_num_threads(1)
    clf, prov = ev.train_phone_classifier(tiny_corpus, tmp_path / "clf", epochs=3, hidden=32, min_class_frames=5)
    assert prov["train_utterances"] == 7 and prov["held_out_utterances"] == 3
    assert 0.0 < prov["held_out_frame_accuracy"] <= 1.0
    assert ev.load_phone_classifier(tmp_path / "clf.json").config == clf.config
    utts = ev.held_out_utterances(tiny_corpus, 2, seed=1)
    assert len(utts) == 2 and utts == sorted(utts, key=lambda u: u.id)
    assert all(int(u.durations.sum()) == u.audio.size and u.mel.shape == (1 + u.audio.size // 256, 80)
               for u in utts)
    same = ev.evaluate_copy_synthesis(lambda mel: log_mel_inverse_identity(mel, utts), tiny_corpus, 2, seed=1,
                                      classifier=clf, metrics=["mcd_db", "lsd_db", "phone_acc"])
    assert same["mcd_db"] == 0.0 and same["lsd_db"] == 0.0
    gl = ev.evaluate_griffin_lim(tiny_corpus, 2, seed=1, classifier=clf)
    assert 0.0 < gl["mcd_db"] and gl["stoi"] > 0.8
    coarse = ev.evaluate_coarse_only(tiny_corpus, 2, seed=1, classifier=clf)
    assert coarse["stoi"] > 0.95 and 2.0 < coarse["pesq_wb"] < 4.5
    with pytest.raises(ParameterError):
        ev.held_out_utterances(tiny_corpus, 4)


def log_mel_inverse_identity(mel, utts):
    """The true audio of the utterance whose mel this is (an exact 'vocoder' for the identity check)."""
    for u in utts:
        if u.mel.shape == mel.shape and np.array_equal(u.mel, mel):
            return u.audio
    raise AssertionError("unknown mel")


def test_copy_features_append_the_true_audios_pitch():
    from wavern.dsp import pitch_features, pitch_track

    x = _pulses(120.0, seconds=0.5)
    u = ev.EvalUtterance(id="u", audio=x, mel=log_mel(x), phonemes=("a",), durations=np.array([x.size]))
    assert u.features() is u.mel
    f = u.features(pitch=True)
    assert f.shape == (u.mel.shape[0], 82) and f.dtype == np.float32
    np.testing.assert_array_equal(f[:, :80], u.mel)
    np.testing.assert_array_equal(f[:, 80:], pitch_features(pitch_track(x)))


# --------------------------------------------------------------------------- definitions pinned down


def test_gpe_counts_errors_above_twenty_percent():
    """GPE is the share of frames voiced in both whose f0 differs by more than 20 %."""
    voiced = _pulses(120.0)
    vde, gpe = ev.pitch_errors(voiced, _pulses(162.0))  # 35 % high: gross
    assert vde < 0.1 and gpe > 0.9
    vde, gpe = ev.pitch_errors(voiced, _pulses(138.0))  # 15 % high: not gross
    assert vde < 0.1 and gpe == 0.0
    # against the definition, written out on the pitch tracks of a signal whose second half is 35 % high
    from wavern.dsp import pitch_track

    half = voiced.size // 2
    deg = np.concatenate([voiced[:half], _pulses(162.0)[half:]])
    r = pitch_track(voiced.astype(np.float64), ev.DEFAULT_MEL)[:, 0]
    d = pitch_track(deg.astype(np.float64), ev.DEFAULT_MEL)[:, 0]
    both = [k for k in range(r.size) if r[k] > 0 and d[k] > 0]
    want = sum(abs(d[k] / r[k] - 1.0) > 0.2 for k in both) / len(both)
    assert 0.3 < want < 0.7
    assert ev.pitch_errors(voiced, deg)[1] == pytest.approx(want, abs=1e-12)


def _naive_lsd(ref: np.ndarray, deg: np.ndarray, floor: float = 1e-3) -> float:
    """LSD written from its definition with librosa's centred Hann STFT (reflect padding):
    for each frame, the RMS over bins of the dB power difference; then the mean over frames."""
    import librosa

    def power_db(x):
        spec = librosa.stft(x.astype(np.float64), n_fft=1024, hop_length=256, win_length=1024, window="hann",
                            center=True, pad_mode="reflect")
        return 20.0 * np.log10(np.maximum(np.abs(spec), floor))  # (bins, frames)

    diff = power_db(ref) - power_db(deg)
    per_frame = [math.sqrt(float(np.mean(diff[:, t] ** 2))) for t in range(diff.shape[1])]
    return float(np.mean(per_frame))


def test_log_spectral_distance_is_per_frame_rms_then_mean_over_frames():
    x = _speechlike(1.0, seed=3)
    rng = np.random.default_rng(10)
    t = np.arange(x.size) / SR
    # a gain that changes over time and coloured noise: the dB difference varies by frame and by bin
    noise = np.convolve(rng.standard_normal(x.size), np.ones(8) / 8, mode="same")
    y = (x * (1.0 + 2.0 * (t > 0.6)) + 0.01 * noise).astype(np.float32)
    want = _naive_lsd(x.astype(np.float64), y.astype(np.float64))
    assert ev.log_spectral_distance(x, y) == pytest.approx(want, rel=1e-9)
    # a pure gain of 2 (magnitudes well above the floor) is 20 log10(2) dB in every bin of every frame
    tone = (0.5 * np.sin(2 * np.pi * 441.0 * np.arange(SR // 2) / SR)) + 0.1 * rng.standard_normal(SR // 2)
    assert ev.log_spectral_distance(tone, 2 * tone) == pytest.approx(20 * math.log10(2), rel=1e-9)


def test_mcd_is_the_mean_over_the_warped_path():
    """Test frames each repeated twice, with a pure cepstral offset: the DTW path pairs every
    reference frame with its two copies (2n steps, each costing |Δc|), so the mean over the path
    is the offset's MCD, MCD_CONSTANT · a/2, not twice it (the sum over n reference frames)."""
    rng = np.random.default_rng(2)
    mel = np.cumsum(rng.standard_normal((30, 80)), axis=0) * 3  # frames far apart
    a = 0.2
    k = np.arange(80)
    shifted = mel + a * np.cos(np.pi * 3 * (k + 0.5) / 80)
    warped = np.repeat(shifted, 2, axis=0)  # (60, 80)
    assert ev.mcd_dtw_mel(mel, warped) == pytest.approx(ev.MCD_CONSTANT * a / 2, rel=1e-9)
    # the other way round (the reference is the longer one): the same
    assert ev.mcd_dtw_mel(np.repeat(mel, 2, axis=0), shifted) == pytest.approx(ev.MCD_CONSTANT * a / 2, rel=1e-9)


def test_frame_labels_on_exact_token_ends():
    """Frame t's centre is sample 256 t; a centre on a token's end belongs to the next token
    (token k holds samples [start_k, end_k)), and a zero-length token labels no frame."""
    assert ev.frame_labels(["a", "b", "c"], [256, 512, 256], 5) == ["a", "b", "b", "c", "c"]
    assert ev.frame_labels(["a", "b", "c"], [256, 0, 300], 3) == ["a", "c", "c"]
    assert ev.frame_labels(["a", "b", "c"], [0, 512, 512], 5) == ["b", "b", "c", "c", "c"]


def _constant_classifier(classes, predict):
    """A PhoneClassifier whose output layer ignores its input and always prefers ``predict``."""
    import torch

    clf = ev.PhoneClassifier(ev.PhoneClassifierConfig(classes=tuple(classes), context=1, hidden=4, n_layers=1))
    last = clf.net[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.zero_()
        last.bias[classes.index(predict)] = 1.0
    return clf


# durations (samples) of sil, a, sil, i: frame centres 0, 256, ..., 5376 (22 frames) fall in
# [0, 1000): 4 frames sil; [1000, 3000): 8 frames a; [3000, 4000): 4 sil; [4000, 5500): 6 i
_TOKS = ("<bos>", "ˈa", ",", "i")
_DURS = np.array([1000, 2000, 1000, 1500])


def test_phone_accuracy_can_leave_silence_frames_out():
    clf = _constant_classifier(["sil", "a", "i"], "a")  # says "a" for every frame
    mel = np.zeros((22, 80), np.float32)
    assert ev.frame_labels(_TOKS, _DURS, 22) == ["sil"] * 4 + ["a"] * 8 + ["sil"] * 4 + ["i"] * 6
    assert ev.phone_accuracy_mel(mel, _TOKS, _DURS, classifier=clf) == pytest.approx(8 / 22)
    assert ev.phone_accuracy_mel(mel, _TOKS, _DURS, classifier=clf, exclude_silence=True) == pytest.approx(8 / 14)
    always_sil = _constant_classifier(["sil", "a", "i"], "sil")
    assert ev.phone_accuracy_mel(mel, _TOKS, _DURS, classifier=always_sil) == pytest.approx(8 / 22)
    assert ev.phone_accuracy_mel(mel, _TOKS, _DURS, classifier=always_sil, exclude_silence=True) == 0.0


def test_evaluate_utterances_reports_phone_accuracy_without_silence():
    clf = _constant_classifier(["sil", "a", "i"], "i")
    rng = np.random.default_rng(13)
    audio = (0.1 * rng.standard_normal(int(_DURS.sum()))).astype(np.float32)  # log_mel: 22 frames
    utts = [ev.EvalUtterance(id=f"u{j}", audio=audio, mel=log_mel(audio), phonemes=_TOKS, durations=_DURS)
            for j in range(2)]
    got = ev.evaluate_utterances(lambda u: u.audio, utts, classifier=clf, metrics=["phone_acc"])
    assert got["phone_acc"] == pytest.approx(12 / 44)  # the 6 "i" frames of each
    assert got["phone_acc_no_sil"] == pytest.approx(12 / 28)


def test_evaluate_utterances_gpe_skips_an_utterance_with_nothing_voiced_in_both():
    """GPE is NaN for an utterance with no frame voiced in both; the mean over utterances skips it."""
    voiced = _pulses(120.0)
    noise = (0.1 * np.random.default_rng(0).standard_normal(voiced.size)).astype(np.float32)
    utts = [ev.EvalUtterance(id=i, audio=x, mel=log_mel(x), phonemes=("a",), durations=np.array([x.size]))
            for i, x in (("voiced", voiced), ("noise", noise))]
    octave = _pulses(240.0)

    def render(u):
        return octave if u.id == "voiced" else noise[::-1].copy()

    per = [ev.pitch_errors(u.audio, render(u)) for u in utts]
    assert math.isnan(per[1][1]) and per[0][1] > 0.9
    got = ev.evaluate_utterances(render, utts, metrics=["vde", "gpe"])
    assert got["gpe"] == pytest.approx(per[0][1])
    assert got["vde"] == pytest.approx((per[0][0] + per[1][0]) / 2)
