"""Vocoder trainer on a tiny synthetic corpus: the cache, bit-exact resume, SIGTERM, compact checkpoints."""

from __future__ import annotations

import dataclasses
import json
import os
import signal

import numpy as np
import pytest
import soundfile as sf
import torch

from wavern.dsp import MelConfig, int16_to_float, pitch_features, pitch_track
from wavern.errors import CorpusError, ParameterError
from wavern.training.corpus import is_held_out
from wavern.training.vocoder_data import VocoderData, build_cache, build_pitch
from wavern.training.vocoder_trainer import (CHECKPOINT, COMPACT, VocoderTrainConfig, VocoderTrainer, lr_at,
                                             train_vocoder)
from wavern.vocoder.config import VocoderConfig
from wavern.vocoder.export import load_vocoder

torch.set_num_threads(1)

HOP = 16
MEL = MelConfig(hop_length=HOP)
VOC = VocoderConfig(hidden_size=32, cond_channels=8, cond_blocks=1, mel=MEL, target_density=0.25,
                    prune_start_step=2, prune_ramp_steps=4, prune_every_steps=1)
# an LPC vocoder with the long-term predictor and the residual one period back as an input
PERIOD = dataclasses.replace(VOC, lpc_order=4, lpc_prediction_input=False, pitch=True, ltp=True, ltp_input=True)


def _corpus(root, n_utts: int = 10, seed: int = 0):
    """Sine tones of random pitch with a mel that is a (noisy) function of the pitch."""
    rng = np.random.default_rng(seed)
    (root / "wavs").mkdir(parents=True)
    (root / "mels").mkdir()
    texts, i = [], 0
    while sum(is_held_out(t) for t in texts) < 2 or len(texts) < n_utts:
        t = f"tone number {i}"
        i += 1
        if is_held_out(t) or sum(not is_held_out(x) for x in texts) < n_utts - 2:
            texts.append(t)
    rows = []
    for k, text in enumerate(texts):
        n = int(rng.integers(5 * HOP, 20 * HOP)) + int(rng.integers(0, HOP))
        f = rng.uniform(200, 2000)
        audio = (8000 * np.sin(2 * np.pi * f * np.arange(n) / 22050)).astype(np.int16)
        uid = f"u{k:03d}"
        sf.write(root / "wavs" / f"{uid}.wav", audio, 22050, subtype="PCM_16")
        mel = (rng.normal(0, 0.1, (1 + n // HOP, 80)) + np.log(f) * np.linspace(-1, 1, 80)).astype(np.float32)
        np.save(root / "mels" / f"{uid}.npy", mel)
        rows.append({"id": uid, "text": text, "n_samples": n})
    (root / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    rows = _corpus(root)
    return root, rows


def _cfg(corpus_root, run_dir, **kw) -> VocoderTrainConfig:
    base = dict(corpus_dir=str(corpus_root), run_dir=str(run_dir), vocoder=VOC, steps=8, batch_size=3,
                segment_frames=3, lr=3e-3, warmup_steps=2, threads=1, bf16="off", seed=7,
                checkpoint_interval_s=float("inf"), eval_every_steps=4, eval_batches=1, log_every_steps=2,
                progress=False, cache_dir=str(run_dir.parent / "cache"))
    base.update(kw)
    return VocoderTrainConfig(**base)


# ---------------------------------------------------------------- data
def test_cache_segments_equal_the_files(corpus, tmp_path):
    root, rows = corpus
    build_cache(root, tmp_path / "cache", MEL)
    data = VocoderData.open(tmp_path / "cache", hop=HOP)
    assert data.ids == [r["id"] for r in rows]
    assert list(data.held_out) == [is_held_out(r["text"]) for r in rows]
    u, f0, t, pad = 3, 2, 4, 2
    batch = data.segments(np.array([u, 0]), np.array([f0, 0]), segment_frames=t, mel_pad=pad)
    audio, _ = sf.read(root / "wavs" / f"{rows[u]['id']}.wav", dtype="int16")
    mel = np.load(root / "mels" / f"{rows[u]['id']}.npy")
    assert np.array_equal(batch.audio[0], audio[f0 * HOP:(f0 + t) * HOP])
    assert batch.prev[0] == audio[f0 * HOP - 1] and batch.prev[1] == 0
    assert np.array_equal(batch.mel[0], mel[f0 - pad:f0 + t + pad])
    assert np.all(batch.mel[1, :pad] == 0)  # before the utterance start: zero context
    first = np.load(root / "mels" / f"{rows[0]['id']}.npy")
    assert np.array_equal(batch.mel[1, pad:], first[:t + pad])
    # Random batches come from the right split.
    b = data.batch(np.random.default_rng(0), batch_size=5, segment_frames=2, mel_pad=1, held_out=True)
    assert b.audio.shape == (5, 2 * HOP) and b.mel.shape == (5, 4, 80)


def test_cache_is_rebuilt_when_the_corpus_changes_and_checks_files(tmp_path):
    root = tmp_path / "c"
    rows = _corpus(root, n_utts=4, seed=1)
    build_cache(root, tmp_path / "cache", MEL)
    stamp = (tmp_path / "cache" / "audio.npy").stat().st_mtime_ns
    build_cache(root, tmp_path / "cache", MEL)  # up to date: untouched
    assert (tmp_path / "cache" / "audio.npy").stat().st_mtime_ns == stamp
    np.save(root / "mels" / f"{rows[0]['id']}.npy", np.zeros((3, 80), np.float32))
    with open(root / "metadata.jsonl", "a") as fh:  # touching the metadata invalidates the cache
        fh.write("\n")
    with pytest.raises(CorpusError, match="mel .* has shape"):
        build_cache(root, tmp_path / "cache", MEL)
    with pytest.raises(CorpusError, match="not found"):
        build_cache(tmp_path / "nowhere", tmp_path / "cache2", MEL)


# ---------------------------------------------------------------- training
def test_resume_is_bit_exact(corpus, tmp_path):
    root, _ = corpus
    straight_losses: list[float] = []
    straight = train_vocoder(_cfg(root, tmp_path / "a"), on_step=lambda tr, row: straight_losses.append(row["loss"]))
    assert straight.step == 8 and straight.pruner.sparsity == pytest.approx(0.75)
    split_losses: list[float] = []
    first = train_vocoder(_cfg(root, tmp_path / "b", steps=4), on_step=lambda tr, row: split_losses.append(row["loss"]))
    assert first.step == 4
    second = train_vocoder(_cfg(root, tmp_path / "b", resume=True),
                           on_step=lambda tr, row: split_losses.append(row["loss"]))
    assert second.step == 8
    assert split_losses == straight_losses
    for k, v in straight.model.state_dict().items():
        assert torch.equal(second.model.state_dict()[k], v), k
    for name, m in straight.pruner.masks.items():
        assert torch.equal(second.pruner.masks[name], m)
    # Metrics and the exported vocoder are there.
    rows = [json.loads(x) for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if r["kind"] == "train"]
    assert [r["step"] for r in train_rows] == [2, 4, 6, 8]
    assert {"loss", "coarse", "fine", "density", "lr", "samples_per_s", "wall_s"} <= set(train_rows[0])
    assert any(r["kind"] == "eval" for r in rows)
    model = load_vocoder(tmp_path / "b" / "vocoder.safetensors", VOC)
    assert model.config == VOC


def test_sigterm_checkpoints_and_resume_continues_exactly(corpus, tmp_path):
    root, _ = corpus
    straight = train_vocoder(_cfg(root, tmp_path / "a", steps=6))

    def stop_at_3(trainer, row):
        if trainer.step == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    stopped = train_vocoder(_cfg(root, tmp_path / "b", steps=6), on_step=stop_at_3)
    assert stopped.step == 3
    assert torch.load(tmp_path / "b" / CHECKPOINT, weights_only=False)["step"] == 3
    assert not (tmp_path / "b" / "vocoder.safetensors").exists()
    resumed = train_vocoder(_cfg(root, tmp_path / "b", steps=6, resume=True))
    for k, v in straight.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[k], v), k


def test_compact_checkpoint_is_small_and_restarts_training(corpus, tmp_path):
    root, _ = corpus
    trainer = train_vocoder(_cfg(root, tmp_path / "a", steps=5))
    compact = tmp_path / "a" / COMPACT
    full = tmp_path / "a" / CHECKPOINT
    assert compact.stat().st_size < 0.7 * full.stat().st_size
    again = VocoderTrainer(_cfg(root, tmp_path / "b"))
    again.load(compact, exact=False)
    assert again.step == 5
    for k, v in trainer.model.state_dict().items():
        torch.testing.assert_close(again.model.state_dict()[k], v, atol=2e-3, rtol=1e-3, msg=k)
    for name, m in trainer.pruner.masks.items():
        assert torch.equal(again.pruner.masks[name], m)
    cont = train_vocoder(_cfg(root, tmp_path / "c", steps=7, init_from=str(compact)))
    assert cont.step == 7


def test_training_lowers_the_loss(corpus, tmp_path):
    root, _ = corpus
    losses: list[float] = []
    vocoder = dataclasses.replace(VOC, prune_start_step=10_000)
    train_vocoder(_cfg(root, tmp_path / "a", steps=40, batch_size=4, lr=1e-2, vocoder=vocoder, eval_every_steps=0,
                       export_at_end=False), on_step=lambda tr, row: losses.append(row["loss"]))
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 1.0


def test_resume_refuses_a_different_model(corpus, tmp_path):
    root, _ = corpus
    train_vocoder(_cfg(root, tmp_path / "a", steps=1, eval_every_steps=0))
    other = dataclasses.replace(VOC, hidden_size=64)
    with pytest.raises(ParameterError, match="different vocoder config"):
        train_vocoder(_cfg(root, tmp_path / "a", steps=2, vocoder=other, resume=True))


def test_lr_schedule():
    cfg = VocoderTrainConfig(lr=1e-3, warmup_steps=10, lr_half_life_steps=100, lr_min=1e-4)
    assert lr_at(0, cfg) == pytest.approx(1e-4)
    assert lr_at(10, cfg) == pytest.approx(1e-3 * 0.5 ** 0.1)
    assert lr_at(100, cfg) == pytest.approx(5e-4)
    assert lr_at(10_000, cfg) == pytest.approx(1e-4)
    with pytest.raises(ParameterError):
        VocoderTrainConfig(optimizer="sgd")


def test_yellowfin_optimizer_trains_and_resumes(corpus, tmp_path):
    root, _ = corpus
    straight = train_vocoder(_cfg(root, tmp_path / "a", steps=4, optimizer="yellowfin", eval_every_steps=0))
    train_vocoder(_cfg(root, tmp_path / "b", steps=2, optimizer="yellowfin", eval_every_steps=0))
    resumed = train_vocoder(_cfg(root, tmp_path / "b", steps=4, optimizer="yellowfin", eval_every_steps=0,
                                 resume=True))
    assert type(resumed.optimizer).__name__ == "YellowFin"
    for k, v in straight.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[k], v), k


def test_noisy_inputs_draw_a_std_per_row_and_stay_int16():
    from wavern.training.vocoder_trainer import noisy_inputs

    audio = np.zeros((64, 4000), np.int16)
    audio[0] = 32767  # clipped, not wrapped
    rng = np.random.default_rng(3)
    noisy = noisy_inputs(audio, rng, 300.0)
    assert noisy.dtype == np.int16 and noisy.shape == audio.shape
    assert noisy[0].max() == 32767 and noisy[0].min() > 30000
    std = noisy[1:].astype(np.float64).std(axis=1)
    assert std.max() <= 300 * 1.1 and std.min() < 60 and std.max() > 240  # spread over U(0, 300)
    again = noisy_inputs(audio, np.random.default_rng(3), 300.0)
    assert np.array_equal(noisy, again)


def test_input_noise_trains_and_is_checked(corpus, tmp_path):
    root, _ = corpus
    with pytest.raises(ParameterError, match="input_noise"):
        _cfg(root, tmp_path / "bad", input_noise=-1.0)
    clean = VocoderTrainer(_cfg(root, tmp_path / "clean", steps=2))
    noisy = VocoderTrainer(_cfg(root, tmp_path / "noisy", steps=2, input_noise=2000.0))
    for t in (clean, noisy):
        t.open_data()
    a, b = clean.train_step(), noisy.train_step()
    assert np.isfinite(b["loss"]) and b["loss"] != a["loss"]  # same weights and batch: only the inputs differ
    from wavern.training.vocoder_trainer import _parse

    assert _parse(["--input-noise", "256"]).input_noise == 256.0 and _parse([]).input_noise == 0.0
    period = ["--lpc-order", "16", "--pitch", "--ltp", "--ltp-input"]
    assert _parse(period + ["--period-input-fade", "0.8"]).period_input_fade == 0.8
    assert _parse([]).period_input_fade == 0
    with pytest.raises(ParameterError, match="period_input_fade needs"):
        _cfg(root, tmp_path / "bad2", period_input_fade=0.5)  # this vocoder has no period input


def test_lpc_vocoder_trains_resumes_and_is_not_exported(corpus, tmp_path):
    root, _ = corpus
    voc = dataclasses.replace(VOC, lpc_order=4)
    trainer = train_vocoder(_cfg(root, tmp_path / "run", vocoder=voc, steps=6))
    assert trainer.step == 6
    assert not (tmp_path / "run" / "vocoder.safetensors").exists()  # the engine cannot run it yet
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if r["kind"] == "eval"]
    assert evals and all(np.isfinite(r["eval_loss"]) for r in evals)
    again = train_vocoder(_cfg(root, tmp_path / "run", vocoder=voc, steps=8, resume=True))
    assert again.step == 8
    straight = train_vocoder(_cfg(root, tmp_path / "straight", vocoder=voc, steps=8))
    for k, v in straight.model.state_dict().items():  # resume is still bit-exact with LPC inputs
        assert torch.equal(again.model.state_dict()[k], v), k


def test_pitch_cache_rows_are_each_utterances_pitch_features(corpus, tmp_path):
    root, rows = corpus
    build_cache(root, tmp_path / "cache", MEL)
    build_pitch(tmp_path / "cache", MEL)
    data = VocoderData.open(tmp_path / "cache", hop=HOP)
    u, f0, t, pad = 3, 2, 4, 2
    audio, _ = sf.read(root / "wavs" / f"{rows[u]['id']}.wav", dtype="int16")
    feats = pitch_features(pitch_track(int16_to_float(audio), MEL))
    mel = np.load(root / "mels" / f"{rows[u]['id']}.npy")
    batch = data.segments(np.array([u]), np.array([f0]), segment_frames=t, mel_pad=pad, pitch=True)
    assert batch.mel.shape == (1, t + 2 * pad, 82)
    np.testing.assert_array_equal(batch.mel[0, :, :80], mel[f0 - pad:f0 + t + pad])
    np.testing.assert_array_equal(batch.mel[0, :, 80:], feats[f0 - pad:f0 + t + pad])
    plain = data.segments(np.array([u]), np.array([f0]), segment_frames=t, mel_pad=pad, lpc_order=4, mel_config=MEL)
    with_pitch = data.segments(np.array([u]), np.array([f0]), segment_frames=t, mel_pad=pad, lpc_order=4,
                               mel_config=MEL, pitch=True)
    np.testing.assert_array_equal(with_pitch.lpc, plain.lpc)  # the predictor reads the mel channels only
    no_pitch = VocoderData.open(tmp_path / "cache", hop=HOP)
    no_pitch.pitch = None
    with pytest.raises(CorpusError, match="pitch.npy"):
        no_pitch.segments(np.array([u]), np.array([f0]), segment_frames=t, mel_pad=pad, pitch=True)


def test_pitch_model_starts_from_a_model_without_pitch_as_the_same_function(corpus, tmp_path):
    root, _ = corpus
    voc = dataclasses.replace(VOC, lpc_order=4, lpc_prediction_input=False)
    plain = train_vocoder(_cfg(root, tmp_path / "plain", vocoder=voc, steps=3, eval_every_steps=0))
    pitched_cfg = _cfg(root, tmp_path / "pitch", vocoder=dataclasses.replace(voc, pitch=True), steps=5,
                       init_from=str(tmp_path / "plain" / CHECKPOINT), eval_every_steps=0)
    widened = VocoderTrainer(pitched_cfg)
    widened.load(tmp_path / "plain" / CHECKPOINT, exact=False)
    assert widened.step == 3
    w = widened.model.cond.conv_in.weight
    assert w.shape[1] == 82 and not w[:, 80:].any()
    widened.open_data()
    batch = widened._batch(np.random.default_rng(1))
    mel, audio, prev, past, lpc, _ = widened._to_tensors(batch)
    assert mel.shape[-1] == 82 and mel[..., 80:].abs().sum() > 0
    with torch.no_grad():
        a = widened.model.loss(mel, audio, mel_pad=widened.mel_pad, past=past, lpc=lpc).total
        b = plain.model.loss(mel[..., :80], audio, mel_pad=widened.mel_pad, past=past, lpc=lpc).total
    assert float(a) == float(b)
    moments = widened.optimizer.state[widened.model.cond.conv_in.weight]
    assert moments["exp_avg"].shape == w.shape and not moments["exp_avg"][:, 80:].any()
    trained = train_vocoder(pitched_cfg)  # and it trains on from there
    assert trained.step == 5 and trained.model.cond.conv_in.weight[:, 80:].abs().sum() > 0
    with pytest.raises(ParameterError, match="different vocoder config"):  # resuming exactly stays strict
        VocoderTrainer(pitched_cfg).load(tmp_path / "plain" / CHECKPOINT, exact=True)


def test_a_mulaw_run_continues_a_linear_lpc_run_and_the_flags_reach_the_config(corpus, tmp_path):
    from wavern.training.vocoder_trainer import _parse

    root, _ = corpus
    linear = dataclasses.replace(VOC, lpc_order=4, lpc_prediction_input=False)
    first = train_vocoder(_cfg(root, tmp_path / "linear", vocoder=linear, steps=3, eval_every_steps=0))
    mulaw_cfg = _cfg(root, tmp_path / "mulaw", vocoder=dataclasses.replace(linear, excitation="mulaw"), steps=5,
                     init_from=str(tmp_path / "linear" / CHECKPOINT), eval_every_steps=0)
    start = VocoderTrainer(mulaw_cfg)
    start.load(tmp_path / "linear" / CHECKPOINT, exact=False)
    for k, v in first.model.state_dict().items():  # the same network, now predicting mu-law codes
        assert torch.equal(start.model.state_dict()[k], v), k
    assert train_vocoder(mulaw_cfg).step == 5
    with pytest.raises(ParameterError, match="different vocoder config"):
        VocoderTrainer(mulaw_cfg).load(tmp_path / "linear" / CHECKPOINT, exact=True)
    cfg = _parse(["--lpc-order", "16", "--no-lpc-input", "--excitation", "mulaw", "--pitch"])
    assert (cfg.vocoder.lpc_order, cfg.vocoder.excitation, cfg.vocoder.pitch) == (16, "mulaw", True)
    assert _parse([]).vocoder.excitation == "linear" and not _parse([]).vocoder.pitch


def test_input_noise_reaches_an_lpc_model(corpus, tmp_path):
    root, _ = corpus
    voc = dataclasses.replace(VOC, lpc_order=4, lpc_prediction_input=False, excitation="mulaw")
    clean = VocoderTrainer(_cfg(root, tmp_path / "clean", vocoder=voc, steps=2))
    noisy = VocoderTrainer(_cfg(root, tmp_path / "noisy", vocoder=voc, steps=2, input_noise=2000.0))
    for t in (clean, noisy):
        t.open_data()
    a, b = clean.train_step(), noisy.train_step()
    assert np.isfinite(b["loss"]) and b["loss"] != a["loss"]  # same weights and batch: only the fed-back codes differ


def test_sample_nll_puts_mulaw_and_linear_losses_on_one_scale(corpus, tmp_path):
    from wavern.dsp import mulaw_log_slope

    root, _ = corpus
    linear = dataclasses.replace(VOC, lpc_order=4, lpc_prediction_input=False)
    tr = VocoderTrainer(_cfg(root, tmp_path / "lin", vocoder=linear, eval_batches=2))
    tr.open_data()
    ev = tr.evaluate()
    assert ev["eval_sample_nll"] == ev["eval_loss"]
    mu = VocoderTrainer(_cfg(root, tmp_path / "mu", vocoder=dataclasses.replace(linear, excitation="mulaw"),
                             eval_batches=2))
    mu.open_data()
    ev = mu.evaluate()
    codes = [mu.model.targets(torch.from_numpy(b.audio), past=torch.from_numpy(b.past), lpc=torch.from_numpy(b.lpc))
             for b in mu.eval_batches()]
    slope = np.mean(np.concatenate([mulaw_log_slope(c.numpy()).ravel() for c in codes]))
    assert abs(slope) > 0.1
    assert ev["eval_sample_nll"] == pytest.approx(ev["eval_loss"] - slope, abs=1e-9)


def test_evaluate_measures_another_model_on_the_run_s_own_held_out_batches(corpus, tmp_path):
    """evaluate(model=...) (what training.shrink checks a smaller copy with): a copy of the run's model
    scores exactly the run's loss on the same batches, a changed copy another one, and the batches
    are those a fresh trainer of the same seed draws."""
    import copy

    root, _ = corpus
    tr = VocoderTrainer(_cfg(root, tmp_path / "a", eval_batches=2))
    tr.open_data()
    own = tr.evaluate()
    twin = copy.deepcopy(tr.model)
    assert tr.evaluate(model=twin) == own
    with torch.no_grad():
        twin.O2.bias[:8].add_(1.0)  # a few coarse logits (a shift of them all would change nothing)
    assert tr.evaluate(model=twin)["eval_loss"] != own["eval_loss"]
    assert tr.evaluate() == own  # the run's own model untouched
    other = VocoderTrainer(_cfg(root, tmp_path / "b", eval_batches=2))
    other.open_data()
    for a, b in zip(tr.eval_batches(), other.eval_batches(), strict=True):
        assert all((x is None and y is None) or np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_an_ltp_run_starts_from_a_mulaw_run_and_trains(corpus, tmp_path):
    root, _ = corpus
    mulaw = dataclasses.replace(VOC, lpc_order=4, lpc_prediction_input=False, excitation="mulaw")
    first = train_vocoder(_cfg(root, tmp_path / "mu", vocoder=mulaw, steps=2, eval_every_steps=0))
    ltp = dataclasses.replace(mulaw, pitch=True, ltp=True)
    cfg = _cfg(root, tmp_path / "ltp", vocoder=ltp, steps=4, init_from=str(tmp_path / "mu" / CHECKPOINT),
               eval_every_steps=2)
    start = VocoderTrainer(cfg)
    start.load(tmp_path / "mu" / CHECKPOINT, exact=False)
    torch.testing.assert_close(start.model.cond.conv_in.weight[:, :80], first.model.cond.conv_in.weight)
    start.open_data()
    batch = start._batch(np.random.default_rng(0))
    assert batch.past.shape == (3, ltp.history_samples) and batch.lpc.shape[1:] == (3 + ltp.history_frames, 7)
    trained = train_vocoder(cfg)
    assert trained.step == 4
    rows = [json.loads(x) for x in (tmp_path / "ltp" / "metrics.jsonl").read_text().splitlines()]
    assert all(np.isfinite(r["eval_sample_nll"]) for r in rows if r["kind"] == "eval")
    from wavern.training.vocoder_trainer import _parse

    assert _parse(["--lpc-order", "16", "--excitation", "mulaw", "--pitch", "--ltp"]).vocoder.ltp
    window = _parse(["--lpc-order", "16", "--pitch", "--ltp", "--ltp-input", "--ltp-input-taps", "5"]).vocoder
    assert window.ltp_input and window.ltp_offsets == (-2, -1, 0, 1, 2)


@pytest.mark.parametrize("before, after, cols", [
    ({}, {"lpc_prediction_input": True}, [3]),  # p_t + beta r_{t-T}
    ({}, {"ltp_input": True}, [3]),  # r_{t-T}
    ({"lpc_prediction_input": True}, {"ltp_input": True}, [4]),  # r_{t-T} after p_t
    ({"ltp_input": True}, {"ltp_input_taps": 3}, [3, 5]),  # r_{t-T-1}, r_{t-T+1} around r_{t-T}
    ({"ltp_input": True, "ltp_input_taps": 3}, {"phase_input": 2}, [6, 7, 8, 9]),  # sin / cos k phi after them
], ids=["prediction", "period-back", "period-back-after-prediction", "period-window", "phase"])
def test_a_new_input_joins_a_running_ltp_model(corpus, tmp_path, before, after, cols):
    root, _ = corpus
    ltp = dataclasses.replace(VOC, **{"lpc_order": 4, "lpc_prediction_input": False, "pitch": True, "ltp": True,
                                      **before})
    first = train_vocoder(_cfg(root, tmp_path / "ltp", vocoder=ltp, steps=2, eval_every_steps=0))
    fed = dataclasses.replace(ltp, **after)
    cfg = _cfg(root, tmp_path / "fed", vocoder=fed, steps=4, init_from=str(tmp_path / "ltp" / CHECKPOINT),
               eval_every_steps=0)
    start = VocoderTrainer(cfg)
    start.load(tmp_path / "ltp" / CHECKPOINT, exact=False)
    w, w0 = start.model.gru.weight_ih_l0, first.model.gru.weight_ih_l0
    assert w.shape[1] == w0.shape[1] + len(cols) and not w[:, cols].any()
    kept = [c for c in range(w.shape[1]) if c not in cols]
    assert torch.equal(w[:, kept], w0)
    assert start.optimizer.state[w]["exp_avg"].shape == w.shape
    start.open_data()
    mel, audio, prev, past, lpc, phase = start._to_tensors(start._batch(np.random.default_rng(2)))
    assert (phase is not None) == bool(fed.phase_input)
    if phase is not None:  # the pulse phase of voiced samples (the corpus's vowels) is not all 0
        assert phase.min() >= 0 and phase.max() < 1 and float(phase.std()) > 0.1
    with torch.no_grad():  # a zero weight on the new input: the same function
        a = start.model.loss(mel, audio, mel_pad=start.mel_pad, past=past, lpc=lpc, phase=phase).total
        b = first.model.loss(mel, audio, mel_pad=start.mel_pad, past=past, lpc=lpc).total
    assert float(a) == float(b)
    assert train_vocoder(cfg).step == 4


def test_period_input_fade_changes_only_the_period_inputs_of_a_step(corpus, tmp_path):
    root, _ = corpus
    runs = {}
    for name, fade in (("plain", 0.0), ("faded", 1.0)):
        t = VocoderTrainer(_cfg(root, tmp_path / name, vocoder=PERIOD, steps=2, period_input_fade=fade))
        t.open_data()
        with torch.no_grad():  # the period input's weights are zero at the start: make them matter
            t.model.gru.weight_ih_l0[:, 3].normal_()
        runs[name] = t
    for t in runs.values():  # same seed: the same weights and batch
        torch.testing.assert_close(t.model.gru.weight_ih_l0, runs["plain"].model.gru.weight_ih_l0)
    a, b = runs["plain"].train_step(), runs["faded"].train_step()
    assert np.isfinite(b["loss"]) and b["loss"] != a["loss"]


def test_period_input_drop_zeroes_the_period_input_of_some_segments(corpus, tmp_path):
    root, _ = corpus
    t = VocoderTrainer(_cfg(root, tmp_path / "drop", vocoder=PERIOD, steps=2, period_input_drop=0.5))
    t.open_data()
    seen = []
    real = t.model.loss

    def spy(*args, **kwargs):  # the scale each segment's period input gets (the model runs as ever)
        seen.append(kwargs["period_scale"].numpy().copy())
        return real(*args, **kwargs)

    t.model.loss = spy
    for _ in range(2):
        t.train_step()
    scales = np.concatenate(seen)
    assert set(np.unique(scales)) == {0.0, 1.0} and 0 < (scales == 0).sum() < scales.size
    with pytest.raises(ParameterError, match="period_input_drop"):
        _cfg(root, tmp_path / "x", vocoder=dataclasses.replace(PERIOD, ltp_input=False), period_input_drop=0.5)


def test_period_input_self_feeds_the_models_own_draws_to_some_segments(corpus, tmp_path):
    """--period-input-self: the chosen segments get the model's teacher-forced draws, the rest their
    true codes (which change nothing); the step trains; the option needs a linear-code period input."""
    root, _ = corpus
    t = VocoderTrainer(_cfg(root, tmp_path / "self", vocoder=PERIOD, steps=3, period_input_self=0.5))
    t.open_data()
    seen = []
    real = t.model.loss

    def spy(mel, audio, **kwargs):  # which rows got draws other than their true codes
        true = t.model.targets(audio, past=kwargs["past"], lpc=kwargs["lpc"])
        seen.append((kwargs["period_draws"] != true).any(dim=1).numpy())
        return real(mel, audio, **kwargs)

    t.model.loss = spy
    losses = [t.train_step()["loss"] for _ in range(3)]
    own = np.concatenate(seen)
    assert np.all(np.isfinite(losses)) and 0 < own.sum() < own.size
    from wavern.training.vocoder_trainer import _parse

    period = ["--lpc-order", "16", "--pitch", "--ltp", "--ltp-input"]
    assert _parse(period + ["--period-input-self", "0.3"]).period_input_self == 0.3
    with pytest.raises(ParameterError, match="period_input_self needs"):
        _cfg(root, tmp_path / "x", vocoder=dataclasses.replace(PERIOD, ltp_input=False), period_input_self=0.5)
    with pytest.raises(ParameterError, match="period_input_self must"):
        _cfg(root, tmp_path / "y", vocoder=PERIOD, period_input_self=1.5)


def test_init_from_a_voice_folder_starts_from_its_vocoder(corpus, tmp_path):
    """--init-from VOICE_DIR: the voice's float16 weights, its blocks as the pruning masks, the step of
    its provenance; training goes on inside those masks. A voice of another config is refused."""
    import json

    from wavern.vocoder.export import export_vocoder, load_vocoder

    root, _ = corpus
    first = train_vocoder(_cfg(root, tmp_path / "run", steps=8))  # past the pruning ramp (2 + 4)
    voice = tmp_path / "voice"
    voice.mkdir()
    export_vocoder(first.model, voice / "vocoder.safetensors")
    (voice / "voice.json").write_text(json.dumps({"vocoder": VOC.to_dict(),
                                                  "provenance": {"vocoder": {"step": first.step}}}))
    t = VocoderTrainer(_cfg(root, tmp_path / "next", steps=10, init_from=str(voice)))
    t.load(voice, exact=False)
    want = load_vocoder(voice / "vocoder.safetensors", VOC).state_dict()
    for k, v in t.model.state_dict().items():
        torch.testing.assert_close(v, want[k], rtol=0, atol=0)
    assert t.step == first.step == 8
    for name, mask in first.pruner.masks.items():
        assert torch.equal(t.pruner.masks[name], mask), name
    assert abs(t.pruner.density() - first.pruner.density()) < 1e-9
    again = train_vocoder(_cfg(root, tmp_path / "next", steps=10, init_from=str(voice)))
    assert again.step == 10
    for name, mask in first.pruner.masks.items():  # still inside the voice's blocks
        assert torch.equal(again.pruner.masks[name], mask)
        assert not again.model.get_parameter(name)[~mask].any()
    other = VocoderTrainer(_cfg(root, tmp_path / "other", vocoder=dataclasses.replace(VOC, hidden_size=64)))
    with pytest.raises(ParameterError, match="different config"):
        other.load(voice, exact=False)
    with pytest.raises(ParameterError, match="not a voice folder"):
        other.load(tmp_path / "run", exact=False)


def test_a_denser_model_regrows_blocks_from_a_finished_run(corpus, tmp_path):
    """init_from a run whose pruning is done, with a higher target density: the blocks the squared
    gradient ranks highest come back with zero weights (the same function), the old ones stay, and
    training goes on at the new density."""
    root, _ = corpus
    first = train_vocoder(_cfg(root, tmp_path / "sparse", steps=7, eval_every_steps=0))
    assert first.pruner.density() == pytest.approx(0.25, abs=0.02)
    denser = dataclasses.replace(VOC, target_density=0.5)
    cfg = _cfg(root, tmp_path / "dense", vocoder=denser, steps=9, init_from=str(tmp_path / "sparse" / CHECKPOINT),
               eval_every_steps=0)
    start = VocoderTrainer(cfg)
    start.load(tmp_path / "sparse" / CHECKPOINT, exact=False)
    assert start.pruner.density() == pytest.approx(0.5, abs=0.02)
    w = start.model.gru.weight_hh_l0
    old, new = first.pruner.masks["gru.weight_hh_l0"], start.pruner.masks["gru.weight_hh_l0"]
    assert (new | ~old).all() and torch.equal(w.detach(), first.model.gru.weight_hh_l0.detach())
    v = start.optimizer.state[w]["exp_avg_sq"]
    revived = new & ~old
    assert v[revived].mean() > v[~new].mean()  # the revived blocks had the larger squared gradients
    start.open_data()
    mel, audio, prev, past, lpc, phase = start._to_tensors(start._batch(np.random.default_rng(2)))
    with torch.no_grad():
        a = start.model.loss(mel, audio, mel_pad=start.mel_pad, past=past, lpc=lpc).total
        b = first.model.loss(mel, audio, mel_pad=start.mel_pad, past=past, lpc=lpc).total
    assert float(a) == float(b)
    done = train_vocoder(cfg)
    assert done.step == 9 and done.pruner.density() == pytest.approx(0.5, abs=0.02)
    assert done.model.gru.weight_hh_l0[revived].abs().sum() > 0  # the revived weights train


@pytest.mark.parametrize("source", ["voice", "compact"])
def test_a_sparser_model_prunes_on_from_a_finished_run(corpus, tmp_path, source):
    """init_from a finished run (its voice folder or compact checkpoint) with a lower target density
    and the schedule moved to its step: the masks stay as they were until the schedule's cubic
    passes their sparsity, then only the run's own blocks are pruned further (none revived), down
    to the new density; the changed schedule is not refused as a different model."""
    import json

    from wavern.vocoder.export import export_vocoder

    root, _ = corpus
    first = train_vocoder(_cfg(root, tmp_path / "run", steps=8, eval_every_steps=0))
    assert first.pruner.density() == pytest.approx(0.25, abs=0.02)
    if source == "voice":
        start_from = tmp_path / "voice"
        start_from.mkdir()
        export_vocoder(first.model, start_from / "vocoder.safetensors")
        (start_from / "voice.json").write_text(json.dumps({"vocoder": VOC.to_dict(),
                                                           "provenance": {"vocoder": {"step": first.step}}}))
    else:
        start_from = tmp_path / "run" / "compact.pt"
        first.save_compact(start_from)
    # the cubic 0.875 (1 - (1 - f)^3) passes 0.75 at f ~ 0.48: from step 8 on for start 4, ramp 8
    sparser = dataclasses.replace(VOC, target_density=0.125, prune_start_step=4, prune_ramp_steps=8)
    cfg = _cfg(root, tmp_path / "sparse", vocoder=sparser, steps=13, init_from=str(start_from), eval_every_steps=0)
    t = VocoderTrainer(cfg)
    t.load(start_from, exact=False)
    assert t.step == 8 and t.pruner.sparsity == pytest.approx(0.75)
    for name, mask in first.pruner.masks.items():
        assert torch.equal(t.pruner.masks[name], mask), name
    seen = []
    done = train_vocoder(cfg, on_step=lambda tr, _: seen.append(tr.pruner.density()))
    assert done.step == 13 and done.pruner.density() == pytest.approx(0.125, abs=0.02)
    assert seen == sorted(seen, reverse=True) and seen[0] <= first.pruner.density() + 1e-9
    for name, old in first.pruner.masks.items():
        new = done.pruner.masks[name]
        assert not (new & ~old).any(), name  # no block came back
        assert not done.model.get_parameter(name)[~new].any()
    w = "gru.weight_hh_l0"  # the largest: the one a tiny model prunes further in whole blocks
    assert done.pruner.masks[w].sum() < first.pruner.masks[w].sum()


def test_a_used_run_dir_is_refused_without_resume_or_fresh_and_nothing_is_lost(corpus, tmp_path):
    root, _ = corpus
    first = train_vocoder(_cfg(root, tmp_path / "run", steps=3))
    ck = tmp_path / "run" / "checkpoint.pt"
    before, metrics = ck.read_bytes(), (tmp_path / "run" / "metrics.jsonl").read_text()
    with pytest.raises(ParameterError, match="already holds a run.*--resume.*--fresh"):
        train_vocoder(_cfg(root, tmp_path / "run", steps=1))
    assert ck.read_bytes() == before and (tmp_path / "run" / "metrics.jsonl").read_text() == metrics
    again = train_vocoder(_cfg(root, tmp_path / "run", steps=1, fresh=True))
    assert first.step == 3 and again.step == 1 and torch.load(ck, weights_only=False)["step"] == 1
    with pytest.raises(ParameterError, match="contradict"):
        _cfg(root, tmp_path / "run", resume=True, fresh=True)


@pytest.mark.parametrize("damage", ["truncate", "empty", "text"])
def test_a_damaged_checkpoint_is_a_clear_error_on_resume(corpus, tmp_path, damage):
    root, _ = corpus
    train_vocoder(_cfg(root, tmp_path / "run", steps=2))
    ck = tmp_path / "run" / "checkpoint.pt"
    raw = ck.read_bytes()
    ck.write_bytes({"truncate": raw[:5000], "empty": b"", "text": b"not a checkpoint"}[damage])
    with pytest.raises(ParameterError, match="not a readable vocoder checkpoint.*truncated"):
        train_vocoder(_cfg(root, tmp_path / "run", steps=4, resume=True))


def test_a_vocoder_config_given_as_json_is_a_vocoder_config(corpus, tmp_path):
    root, _ = corpus
    cfg = _cfg(root, tmp_path / "run", vocoder={"hidden_size": 32})
    assert isinstance(cfg.vocoder, VocoderConfig) and cfg.vocoder.hidden_size == 32
    assert cfg.vocoder.lpc_order == VocoderConfig().lpc_order  # the rest: the defaults


def test_a_cache_that_cannot_fit_is_a_disk_full_error_not_a_bus_error(tmp_path):
    """The memmap's space is reserved up front (a sparse file meeting a full disk dies of SIGBUS)."""
    from wavern.errors import DiskFullError
    from wavern.training.vocoder_data import _reserved_memmap

    from mounts import tmpfs

    with tmpfs(tmp_path / "tiny", 256) as mnt:
        ok = _reserved_memmap(mnt / "small.npy", np.int16, (1000,))
        ok[:] = 7
        del ok
        with pytest.raises(DiskFullError, match="needs 2 MB"):
            _reserved_memmap(mnt / "big.npy", np.int16, (1_000_000,))
        assert sorted(p.name for p in mnt.iterdir()) == ["small.npy"]  # nothing left filling the disk
        assert np.load(mnt / "small.npy")[0] == 7


def test_the_last_step_is_evaluated_once_even_when_a_finished_run_is_run_again(corpus, tmp_path):
    """steps = 8 with an evaluation every 4: one eval row at 4 and one at 8 (the end's evaluation
    is the eval step's), and a rerun of the finished run adds no row."""
    root, _ = corpus

    def evals() -> list[int]:
        lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
        return [r["step"] for r in map(json.loads, lines) if r["kind"] == "eval"]

    train_vocoder(_cfg(root, tmp_path / "run"))
    assert evals() == [4, 8]
    again = train_vocoder(_cfg(root, tmp_path / "run", resume=True))
    assert again.step == 8 and evals() == [4, 8]


def test_shrink_vocoder_drops_the_cheapest_groups_and_a_run_continues_from_it(corpus, tmp_path):
    """training.shrink on a trained H 64 run: every unit group's cost measured, the cheapest of each
    half removed, a voice folder of H 32 written whose held-out loss is the one reported, and a
    fine-tune of H 32 starts from it (--init-from) inside its blocks."""
    from voice_factory import make_tiny_voice  # tests/ is on sys.path (conftest.py)

    from wavern.training.shrink import shrink_vocoder

    root, _ = corpus
    wide = dataclasses.replace(VOC, hidden_size=64)
    cfg = _cfg(root, tmp_path / "run", vocoder=wide, steps=8, eval_batches=2)
    first = train_vocoder(cfg)
    voice = make_tiny_voice(tmp_path / "voice")
    out = tmp_path / "small"
    rep = shrink_vocoder(tmp_path / "run" / CHECKPOINT, out, to_hidden=32, cfg=cfg, voice=voice)
    assert rep["hidden_from"] == 64 and rep["hidden_to"] == 32 and rep["step"] == first.step == 8
    costs = rep["costs"]
    assert len(costs) == 4 and len(set(costs)) == 4
    assert rep["unit_groups"] == [int(np.argmin(costs[:2])), 2 + int(np.argmin(costs[2:]))]
    assert json.loads((out / "shrink.json").read_text())["unit_groups"] == rep["unit_groups"]
    meta = json.loads((out / "voice.json").read_text())
    assert meta["vocoder"]["hidden_size"] == 32 and meta["provenance"]["vocoder"]["shrunk"]["unit_groups"] == rep["unit_groups"]
    small = dataclasses.replace(cfg, vocoder=dataclasses.replace(wide, hidden_size=32), run_dir=str(tmp_path / "ft"),
                                init_from=str(out), steps=10)
    t = VocoderTrainer(small)
    t.load(out, exact=False)
    t.open_data()
    assert abs(t.evaluate()["eval_loss"] - rep["held_out_loss_after"]) < 0.02  # the voice holds float16 weights
    assert t.step == 8
    masks = {k: v.clone() for k, v in t.pruner.masks.items()}
    done = train_vocoder(small)
    assert done.step == 10
    for name, mask in masks.items():
        assert not done.model.get_parameter(name)[~mask].any(), name
    with pytest.raises(ParameterError, match="multiple of 32"):
        shrink_vocoder(tmp_path / "run" / CHECKPOINT, tmp_path / "bad", to_hidden=48, cfg=cfg, voice=voice)


# ---------------------------------------------------------------- distillation
def _period_batch(tr):
    tr.open_data()
    return tr._to_tensors(tr.eval_batches()[0])


def test_soft_targets_follow_their_closed_forms(corpus, tmp_path):
    """WaveRNN.loss with a teacher's logits: a teacher sure of the data's bytes scores the data loss,
    a uniform one scores the mean of -ln q over the classes, and the objective mixes as documented;
    logits() is the loss's own path (its cross-entropy against targets() is the loss)."""
    import torch.nn.functional as F

    from wavern.vocoder.model import split_bytes

    root, _ = corpus
    tr = VocoderTrainer(_cfg(root, tmp_path / "a", vocoder=PERIOD))
    mel, audio, prev, past, lpc, phase = _period_batch(tr)
    m = tr.model.eval()
    kw = dict(prev_audio=prev, mel_pad=tr.mel_pad, past=past, lpc=lpc)
    with torch.no_grad():
        plain = m.loss(mel, audio, **kw)
        lc, lf = m.logits(mel, audio, **kw)
        coarse, fine = split_bytes(m.targets(audio, prev_audio=prev, past=past, lpc=lpc).t())
        ce = (F.cross_entropy(lc.reshape(-1, 256), coarse.reshape(-1))
              + F.cross_entropy(lf.reshape(-1, 256), fine.reshape(-1)))
        torch.testing.assert_close(ce, plain.total)
        sure = tuple(F.one_hot(t, 256).float() * 1e4 for t in (coarse, fine))  # all mass on the data's byte
        got = m.loss(mel, audio, **kw, soft_logits=sure, soft_weight=0.25)
        torch.testing.assert_close(got.soft, plain.total)
        torch.testing.assert_close(got.total, plain.total)  # still the loss against the data
        uniform = (torch.zeros_like(lc), torch.zeros_like(lf))
        got = m.loss(mel, audio, **kw, soft_logits=uniform, soft_weight=0.25)
        want = 0.0  # mean over positions and classes of -ln q, in float64
        for x in (lc.double().numpy(), lf.double().numpy()):
            top = x.max(-1, keepdims=True)
            log_q = x - top - np.log(np.exp(x - top).sum(-1, keepdims=True))
            want += float(np.mean(-log_q))
        assert float(got.soft) == pytest.approx(want, rel=1e-5)
        assert float(got.objective) == pytest.approx(0.75 * float(plain.total) + 0.25 * want, rel=1e-5)
        with pytest.raises(ParameterError, match="soft_weight"):
            m.loss(mel, audio, **kw, soft_logits=uniform, soft_weight=1.5)
        with pytest.raises(ParameterError, match="time-major"):
            m.loss(mel, audio, **kw, soft_logits=(lc.transpose(0, 1), lf), soft_weight=0.5)


def test_a_run_distils_from_a_larger_teacher_and_weight_zero_changes_nothing(corpus, tmp_path):
    """A teacher of another size (a checkpoint of its own run) trains a student: the train rows gain
    'soft', the teacher's weights stay as loaded, and the soft targets move the student's weights;
    at distill_weight 0 the run is the plain run bit for bit. A teacher with other inputs is refused."""
    from wavern.training.vocoder_trainer import load_teacher

    root, _ = corpus
    big = dataclasses.replace(PERIOD, hidden_size=64)
    train_vocoder(_cfg(root, tmp_path / "teacher", vocoder=big, steps=4))
    teacher_ck = str(tmp_path / "teacher" / CHECKPOINT)
    before = {k: v.clone() for k, v in load_teacher(teacher_ck, PERIOD).state_dict().items()}

    rows: list[dict] = []
    taught = train_vocoder(_cfg(root, tmp_path / "taught", vocoder=PERIOD, steps=4, distill_from=teacher_ck,
                                distill_weight=0.5), on_step=lambda tr, row: rows.append(row))
    assert all(np.isfinite(r["soft"]) and r["soft"] > 0 for r in rows)
    for k, v in taught.teacher.state_dict().items():
        assert torch.equal(v, before[k]), k
    logged = [json.loads(x) for x in (tmp_path / "taught" / "metrics.jsonl").read_text().splitlines()]
    assert all("soft" in r for r in logged if r["kind"] == "train")

    plain = train_vocoder(_cfg(root, tmp_path / "plain", vocoder=PERIOD, steps=4))
    off = train_vocoder(_cfg(root, tmp_path / "off", vocoder=PERIOD, steps=4, distill_from=teacher_ck,
                             distill_weight=0.0))
    for k, v in plain.model.state_dict().items():
        assert torch.equal(off.model.state_dict()[k], v), k
    assert any(not torch.equal(taught.model.state_dict()[k], v) for k, v in plain.model.state_dict().items())

    with pytest.raises(ParameterError, match="lpc_order"):
        load_teacher(teacher_ck, dataclasses.replace(PERIOD, lpc_order=6))
    with pytest.raises(ParameterError, match="distill_weight"):
        _cfg(root, tmp_path / "bad", vocoder=PERIOD, distill_from=teacher_ck, distill_weight=2.0)
