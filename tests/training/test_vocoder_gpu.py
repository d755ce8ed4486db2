"""The GPU burst trainer, on the CPU: its mel equals wavern.dsp.log_mel, its sampler equals
VocoderData's, its audio coding is lossless, and a pack trains and resumes in the ordinary trainer."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from wavern.dsp import MelConfig, _window, int16_to_float, log_mel, mel_filterbank
from wavern.errors import ParameterError
from wavern.training.vocoder_data import VocoderData, build_cache
from wavern.training.vocoder_gpu import GpuSegments, _compress, log_mel_torch, pack, train, unpack_audio
from wavern.training.vocoder_trainer import COMPACT, VocoderTrainer, train_vocoder

from tests.training.test_vocoder_trainer import HOP, _cfg, _corpus

torch.set_num_threads(1)


@pytest.mark.parametrize("n", [0, 1, 300, 512, 513, 5000, 22050])
def test_log_mel_torch_equals_log_mel(n):
    cfg = MelConfig()
    rng = np.random.default_rng(n)
    audio = (rng.normal(0, 3000, n) * np.sin(np.arange(n) / 40.0)).clip(-32768, 32767).astype(np.int16)
    ref = log_mel(int16_to_float(audio), cfg)
    got = log_mel_torch(torch.from_numpy(audio), torch.from_numpy(mel_filterbank(cfg).copy()),
                        torch.from_numpy(_window(cfg.win_length, cfg.n_fft)), cfg).numpy()
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, atol=2e-3, rtol=0)
    assert np.abs(got - ref).mean() < 1e-4


def test_audio_coding_is_lossless_at_the_extremes():
    rng = np.random.default_rng(0)
    audio = np.concatenate([rng.integers(-32768, 32768, 5000), [32767, -32768, 32767, -32768, 0, -1]]).astype(np.int16)
    np.testing.assert_array_equal(unpack_audio(_compress(audio)), audio)


def _utterances(n_utts=6, seed=1):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3 * HOP, 30 * HOP, n_utts)
    audio = [(rng.normal(0, 2000, n)).astype(np.int16) for n in lengths]
    return audio, np.array([i % 3 == 0 for i in range(n_utts)])


def test_gpu_segments_draw_what_vocoder_data_draws():
    audio, held = _utterances()
    cfg = MelConfig(hop_length=HOP)
    fb, win = torch.from_numpy(mel_filterbank(cfg).copy()), torch.from_numpy(_window(cfg.win_length, cfg.n_fft))
    lengths = np.array([a.size for a in audio])
    flat = np.concatenate(audio)
    mels_np = np.concatenate([log_mel(int16_to_float(a), cfg) for a in audio])
    mels_t = torch.cat([log_mel_torch(torch.from_numpy(a), fb, win, cfg) for a in audio])
    ref = VocoderData(audio=flat, mels=mels_np, sample_offsets=np.concatenate([[0], np.cumsum(lengths)]),
                      frame_offsets=np.concatenate([[0], np.cumsum(1 + lengths // HOP)]), held_out=held,
                      ids=[str(i) for i in range(lengths.size)], hop=HOP)
    gpu = GpuSegments(torch.from_numpy(flat), mels_t, lengths, held, HOP)
    for held_out in (False, True):
        for seed in range(4):
            kw = dict(batch_size=7, segment_frames=5, mel_pad=3, held_out=held_out)
            a = ref.batch(np.random.default_rng(seed), **kw)
            b = gpu.batch(np.random.default_rng(seed), **kw)
            np.testing.assert_array_equal(b.audio.numpy(), a.audio)
            np.testing.assert_array_equal(b.prev.numpy(), a.prev)
            np.testing.assert_allclose(b.mel.numpy(), a.mel, atol=2e-3, rtol=0)
            assert b.audio.dtype == torch.int16 and b.prev.dtype == torch.int16
    from wavern.errors import CorpusError

    none_held = GpuSegments(torch.from_numpy(flat), mels_t, lengths, np.zeros_like(held), HOP)
    with pytest.raises(CorpusError, match="no held-out utterances"):  # (was numpy's ValueError)
        none_held.batch(np.random.default_rng(0), batch_size=2, segment_frames=5, mel_pad=3, held_out=True)


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpu")
    _corpus(root / "corpus")
    trainer = train_vocoder(_cfg(root / "corpus", root / "run", steps=8))  # past the pruning ramp
    cache = root / "cache"
    build_cache(root / "corpus", cache, trainer.cfg.vocoder.mel)
    meta = pack(cache, root / "run" / COMPACT, root / "pack", max_bytes=10_000, n_held=2)
    return root, trainer, meta


def test_pack_respects_its_byte_budget_and_keeps_held_out_utterances(packed):
    root, _, meta = packed
    index = json.loads((root / "cache" / "index.json").read_text())
    assert (root / "pack" / "audio.xz").stat().st_size == meta["audio_bytes"] <= 10_000
    assert sum(meta["held_out"]) == 2 and not all(meta["held_out"])
    held_ids = {i for i, h in zip(index["ids"], index["held_out"]) if h}
    assert all((uid in held_ids) == h for uid, h in zip(meta["ids"], meta["held_out"]))
    audio = np.load(root / "cache" / "audio.npy")
    offsets = index["sample_offsets"]
    got = unpack_audio((root / "pack" / "audio.xz").read_bytes())
    pos = 0
    for uid, n in zip(meta["ids"], meta["lengths"]):
        u = index["ids"].index(uid)
        np.testing.assert_array_equal(got[pos:pos + n], audio[offsets[u]:offsets[u + 1]])
        pos += n
    assert pos == got.size


def test_train_from_a_pack_moves_the_weights_and_resumes_in_the_trainer(packed, tmp_path):
    root, trainer, _ = packed
    report = train(root / "pack", tmp_path / "out", budget_s=6.0, reserve_s=0.5, shapes=((4, 3),),
                   eval_every_s=0.5, device="cpu", lr_peak=1e-3, lr_end=1e-4)
    assert report["start_step"] == 8 and report["end_step"] > 8
    assert report["batch_size"] == 4 and report["segment_frames"] == 3 and report["bf16"] is False
    assert [e["step"] for e in report["evals"]] == sorted(e["step"] for e in report["evals"])
    assert report["best_eval"] == min(e["eval_loss"] for e in report["evals"])
    again = VocoderTrainer(_cfg(root / "corpus", tmp_path / "again"))
    again.load(tmp_path / "out" / "last.pt")
    assert again.step == report["end_step"]
    moved = [k for k, v in trainer.model.state_dict().items() if not torch.allclose(again.model.state_dict()[k], v)]
    assert "gru.weight_hh_l0" in moved
    for name, mask in trainer.pruner.masks.items():  # the sparsity pattern is kept
        assert torch.equal(again.pruner.masks[name], mask)
        assert not again.model.get_parameter(name)[~mask].any()


def test_unmask_trains_the_pruned_weights(packed, tmp_path):
    root, trainer, _ = packed
    report = train(root / "pack", tmp_path / "out", budget_s=4.0, reserve_s=0.5, shapes=((4, 3),),
                   eval_every_s=10.0, device="cpu", unmask=True)
    assert report["unmask"] and report["end_step"] > report["start_step"]
    again = VocoderTrainer(_cfg(root / "corpus", tmp_path / "again"))
    again.load(tmp_path / "out" / "last.pt")
    w = again.model.gru.weight_hh_l0
    assert w[~trainer.pruner.masks["gru.weight_hh_l0"]].abs().sum() > 0


def test_gpu_segments_make_the_lpc_inputs_vocoder_data_makes():
    audio, held = _utterances(seed=3)
    cfg = MelConfig(hop_length=HOP)
    fb, win = torch.from_numpy(mel_filterbank(cfg).copy()), torch.from_numpy(_window(cfg.win_length, cfg.n_fft))
    lengths = np.array([a.size for a in audio])
    flat = np.concatenate(audio)
    mels_t = torch.cat([log_mel_torch(torch.from_numpy(a), fb, win, cfg) for a in audio])
    ref = VocoderData(audio=flat, mels=mels_t.numpy(), sample_offsets=np.concatenate([[0], np.cumsum(lengths)]),
                      frame_offsets=np.concatenate([[0], np.cumsum(1 + lengths // HOP)]), held_out=held,
                      ids=[str(i) for i in range(lengths.size)], hop=HOP)
    gpu = GpuSegments(torch.from_numpy(flat), mels_t, lengths, held, HOP)
    for order, seed in ((6, 0), (6, 1), (20, 2)):
        kw = dict(batch_size=9, segment_frames=4, mel_pad=2, lpc_order=order, mel_config=cfg)
        a = ref.batch(np.random.default_rng(seed), **kw)
        b = gpu.batch(np.random.default_rng(seed), **kw)
        np.testing.assert_array_equal(b.past.numpy(), a.past)
        np.testing.assert_allclose(b.lpc.numpy(), a.lpc, rtol=0, atol=1e-9)


def test_an_lpc_run_trains_from_a_pack(tmp_path):
    import dataclasses

    from tests.training.test_vocoder_trainer import VOC

    voc = dataclasses.replace(VOC, lpc_order=4, lpc_prediction_input=False)
    _corpus(tmp_path / "corpus")
    train_vocoder(_cfg(tmp_path / "corpus", tmp_path / "run", steps=8, vocoder=voc))
    build_cache(tmp_path / "corpus", tmp_path / "cache", voc.mel)
    pack(tmp_path / "cache", tmp_path / "run" / COMPACT, tmp_path / "pack", max_bytes=10_000, n_held=2)
    report = train(tmp_path / "pack", tmp_path / "out", budget_s=4.0, reserve_s=0.5, shapes=((4, 3), (8, 3)),
                   eval_every_s=10.0, device="cpu")
    assert report["end_step"] > 8 and len(report["shapes"]) == 2
    again = VocoderTrainer(_cfg(tmp_path / "corpus", tmp_path / "again", vocoder=voc))
    again.load(tmp_path / "out" / "last.pt")
    assert again.step == report["end_step"]


def test_gpu_segments_make_the_pitch_and_ltp_inputs_vocoder_data_makes():
    """A pitch vocoder with the long-term predictor: the mel's pitch channels, the longer past and the
    predictor rows with their (lag, gain) over the history frames, against VocoderData, at utterance
    starts (history before the utterance) and ends (frames past it)."""
    audio, held = _utterances(n_utts=8, seed=5)
    audio = [np.concatenate([a, (np.random.default_rng(i).normal(0, 2000, 40 * HOP)).astype(np.int16)])
             for i, a in enumerate(audio)]  # long enough for LTP_MAX_LAG of history inside some segments
    audio[1] = audio[1][:4 * HOP + 5]  # a training utterance shorter than a segment: frames past its end
    cfg = MelConfig(hop_length=HOP)
    fb, win = torch.from_numpy(mel_filterbank(cfg).copy()), torch.from_numpy(_window(cfg.win_length, cfg.n_fft))
    lengths = np.array([a.size for a in audio])
    flat = np.concatenate(audio)
    mels_t = torch.cat([log_mel_torch(torch.from_numpy(a), fb, win, cfg) for a in audio])
    rng = np.random.default_rng(9)  # log2(f0 / reference) and periodicity: voiced and unvoiced frames
    n = mels_t.shape[0]
    pitch = np.stack([rng.uniform(-1.5, 1.5, n), rng.uniform(0, 1, n)], 1).astype(np.float32)
    ref = VocoderData(audio=flat, mels=mels_t.numpy(), pitch=pitch,
                      sample_offsets=np.concatenate([[0], np.cumsum(lengths)]),
                      frame_offsets=np.concatenate([[0], np.cumsum(1 + lengths // HOP)]), held_out=held,
                      ids=[str(i) for i in range(lengths.size)], hop=HOP)
    gpu = GpuSegments(torch.from_numpy(flat), mels_t, lengths, held, HOP, torch.from_numpy(pitch))
    starts_seen = ends_seen = 0
    for ltp, seed in [(False, 0)] + [(True, s) for s in range(1, 13)]:  # seeded: the same draws every run
        kw = dict(batch_size=16, segment_frames=6, mel_pad=2, lpc_order=6, mel_config=cfg, pitch=True, ltp=ltp)
        a = ref.batch(np.random.default_rng(seed), **kw)
        b = gpu.batch(np.random.default_rng(seed), **kw)
        np.testing.assert_array_equal(b.audio.numpy(), a.audio)
        np.testing.assert_array_equal(b.past.numpy(), a.past)
        np.testing.assert_allclose(b.mel.numpy(), a.mel, rtol=0, atol=1e-6)
        np.testing.assert_allclose(b.lpc.numpy(), a.lpc, rtol=0, atol=1e-9)
        assert b.lpc.shape[2] == 6 + 1 + (2 if ltp else 0)
        if ltp:
            starts_seen += int((a.lpc[:, 0, 0] == 1).sum() and (a.lpc[:, 0, 1:] == 0).all(axis=1).sum())
            ends_seen += int((a.audio[:, -HOP:] == 0).all(axis=1).sum())
            assert (a.lpc[..., 7] > 0).any()  # some frames have a lag
    assert starts_seen and ends_seen
    with pytest.raises(ParameterError, match="pulse phase"):
        gpu.batch(np.random.default_rng(0), batch_size=2, segment_frames=2, mel_pad=0, lpc_order=6, pitch=True,
                  ltp=True, phase=True)
    bare = GpuSegments(torch.from_numpy(flat), mels_t, lengths, held, HOP)
    with pytest.raises(ParameterError, match="no pitch|has none"):
        bare.batch(np.random.default_rng(0), batch_size=2, segment_frames=2, mel_pad=0, pitch=True)


def test_a_period_input_run_trains_from_a_pack(tmp_path):
    """The shipped voice's kind of vocoder (LPC, pitch features, long-term predictor, the residuals one
    period back as inputs, faded): packed with its pitch features, trained, resumed by the CPU trainer."""
    import dataclasses

    from tests.training.test_vocoder_trainer import VOC
    from wavern.training.vocoder_data import build_pitch

    voc = dataclasses.replace(VOC, lpc_order=4, lpc_prediction_input=False, pitch=True, ltp=True, ltp_input=True,
                              ltp_input_taps=3)
    _corpus(tmp_path / "corpus")
    train_vocoder(_cfg(tmp_path / "corpus", tmp_path / "run", steps=8, vocoder=voc, period_input_fade=0.8))
    build_cache(tmp_path / "corpus", tmp_path / "cache", voc.mel)
    build_pitch(tmp_path / "cache", voc.mel)
    meta = pack(tmp_path / "cache", tmp_path / "run" / COMPACT, tmp_path / "pack", max_bytes=10_000, n_held=2)
    assert meta["pitch"] and np.load(tmp_path / "pack" / "pitch.npy").shape == (
        sum(1 + n // voc.mel.hop_length for n in meta["lengths"]), 2)
    report = train(tmp_path / "pack", tmp_path / "out", budget_s=5.0, reserve_s=0.5, shapes=((4, 3),),
                   eval_every_s=10.0, device="cpu")
    assert report["end_step"] > 8
    again = VocoderTrainer(_cfg(tmp_path / "corpus", tmp_path / "again", vocoder=voc, period_input_fade=0.8))
    again.load(tmp_path / "out" / "last.pt")
    assert again.step == report["end_step"]
    (tmp_path / "cache" / "pitch.npy").unlink()
    with pytest.raises(ParameterError, match="pitch.npy"):
        pack(tmp_path / "cache", tmp_path / "run" / COMPACT, tmp_path / "pack2", max_bytes=10_000, n_held=2)
