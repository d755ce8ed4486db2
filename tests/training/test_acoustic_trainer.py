"""Acoustic trainer on a small synthetic corpus: learning, bit-exact resume, SIGTERM, export, eval."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest
import torch

from wavern.conditioning.config import AcousticConfig, EncoderConfig
from wavern.conditioning.export import load_acoustic
from wavern.conditioning.frontend.phonemes import DEFAULT_SYMBOLS
from wavern.errors import CorpusError, ParameterError
from wavern.training import acoustic_trainer as at
from wavern.training.acoustic_trainer import (AcousticTrainConfig, corpus_global_mask, evaluate_acoustic,
                                              export_checkpoint, load_checkpoint, train_acoustic)
from wavern.training.corpus import load_corpus

torch.set_num_threads(1)

from corpus_factory import VOICES, make_fake_corpus


def _fake_corpus(root, n_utts: int = 24, seed: int = 0):
    """Mel = a fixed vector per phoneme plus noise: learnable in a few steps."""
    return make_fake_corpus(root, n_utts=n_utts, seed=seed, words=(1, 4), durations=(0, 600))


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    return _fake_corpus(tmp_path_factory.mktemp("corpus"))


def _model_cfg() -> AcousticConfig:
    enc = EncoderConfig(n_symbols=len(DEFAULT_SYMBOLS), d_model=24, n_layers=1, n_heads=2, window=4,
                        ffn_channels=32, dropout=0.1)
    return AcousticConfig(encoder=enc, speakers=tuple(sorted(VOICES)), speaker_dim=4, ref_channels=8, ref_layers=1,
                          peer_width=4, duration_channels=16, decoder_kind="window", decoder_layers=1,
                          decoder_d_model=24, decoder_heads=2, decoder_window=8, decoder_ffn_channels=32)


def _cfg(corpus_dir, out, **kw) -> AcousticTrainConfig:
    base = dict(corpus_dir=str(corpus_dir), out_dir=str(out), model=_model_cfg(), steps=4, batch_size=4,
                lr=3e-3, warmup_steps=2, device="cpu", log_every=1, eval_utterances=2, progress=False,
                export=False, checkpoint_every_s=1e9)
    base.update(kw)
    return AcousticTrainConfig(**base)


def test_corpus_global_mask_marks_anchors():
    syms = ["<bos>", "h", "ə", " ", "l", ",", "oʊ", ".", "b", "aɪ", "_", "<eos>"]
    want = [1, 1, 0, 0, 0, 1, 0, 1, 1, 0, 1, 1]
    assert corpus_global_mask(syms).astype(int).tolist() == want


@pytest.mark.parametrize("optimizer", ["adam", "yellowfin"])
def test_resume_is_bit_exact(corpus_dir, tmp_path, optimizer):
    straight = train_acoustic(_cfg(corpus_dir, tmp_path / "a", optimizer=optimizer))
    assert straight.finished and straight.step == 4
    half = train_acoustic(_cfg(corpus_dir, tmp_path / "b", optimizer=optimizer, steps=2))
    assert half.step == 2
    resumed = train_acoustic(_cfg(corpus_dir, tmp_path / "b", optimizer=optimizer))
    assert resumed.step == 4
    a = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=True)
    b = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)
    for name, t in a["model"].items():
        assert torch.equal(t, b["model"][name]), name
    rows_a = [r for r in at.MetricsLog(tmp_path / "a" / "metrics.jsonl").read() if r["kind"] == "train"]
    rows_b = [r for r in at.MetricsLog(tmp_path / "b" / "metrics.jsonl").read() if r["kind"] == "train"]
    assert [r["step"] for r in rows_b] == [1, 2, 3, 4]
    assert [r["loss"] for r in rows_a] == [r["loss"] for r in rows_b]


def test_resume_refuses_a_different_run(corpus_dir, tmp_path):
    train_acoustic(_cfg(corpus_dir, tmp_path, steps=1))
    with pytest.raises(ParameterError, match="seed"):
        train_acoustic(_cfg(corpus_dir, tmp_path, steps=2, seed=5))


def test_resume_takes_the_same_corpus_spelled_another_way_and_refuses_a_damaged_checkpoint(corpus_dir, tmp_path,
                                                                                          monkeypatch):
    train_acoustic(_cfg(corpus_dir, tmp_path / "run", steps=1))
    monkeypatch.chdir(corpus_dir.parent)
    again = train_acoustic(_cfg(f"{corpus_dir.name}/", tmp_path / "run", steps=2))  # relative, trailing slash
    assert again.step == 2
    ck = tmp_path / "run" / "checkpoint.pt"
    ck.write_bytes(ck.read_bytes()[:3000])
    with pytest.raises(ParameterError, match="not a readable acoustic checkpoint"):
        train_acoustic(_cfg(corpus_dir, tmp_path / "run", steps=3))


def test_training_learns_the_synthetic_corpus(corpus_dir, tmp_path):
    cfg = _cfg(corpus_dir, tmp_path, steps=60, batch_size=8, lr=1e-2, warmup_steps=5, export=True,
               eval_utterances=3)
    corpus = load_corpus(corpus_dir)
    torch.manual_seed(cfg.seed)
    result = train_acoustic(cfg)
    rows = [r for r in at.MetricsLog(tmp_path / "metrics.jsonl").read() if r["kind"] == "train"]
    first = np.mean([r["mel_l1"] for r in rows[:5]])
    last = np.mean([r["mel_l1"] for r in rows[-5:]])
    assert last < 0.6 * first, (first, last)
    ev = result.evaluation
    assert ev is not None and ev["n"] == 3 and np.isfinite([ev["mel_l1"], ev["mcd_dtw"]]).all()
    # the exported voice part loads and agrees with the checkpoint
    model, ckpt = load_checkpoint(tmp_path / "checkpoint.pt")
    loaded = load_acoustic(tmp_path / "acoustic.safetensors",
                           AcousticConfig.from_dict(json.loads((tmp_path / "acoustic_config.json").read_text())))
    ids, glob = np.array([1, 20, 21, 4, 22, 10, 2]), corpus_global_mask(["<bos>", "n", "t", " ", "s", ".", "<eos>"])
    np.testing.assert_array_equal(model.infer(ids, glob, speaker="en-gb")[0], loaded.infer(ids, glob, speaker="en-gb")[0])
    fusion = json.loads((tmp_path / "fusion.json").read_text())
    assert set(fusion) == {"token_fusion", "frame_fusion"} and len(fusion["token_fusion"]) == 3
    # evaluate_acoustic's mel_l1 is the teacher-forced mean |error| (an independent recomputation)
    rec = sorted((r for r in corpus.held_out), key=lambda r: r.id)[0]
    item = at._items([rec], at.SymbolTable.from_list(corpus.symbols), model.config.speakers, 256, 10 ** 9)[0]
    with torch.no_grad():
        out = model(torch.as_tensor(item.ids)[None], torch.as_tensor(item.is_global)[None],
                    torch.as_tensor(item.frames)[None], speaker=torch.tensor([item.speaker]))
    want = float(np.abs(out.mel[0].numpy() - rec.mel()).mean())
    assert evaluate_acoustic(model, corpus, 1)["mel_l1"] == pytest.approx(want, rel=1e-5)


def test_sigterm_checkpoints_and_stops(corpus_dir, tmp_path, monkeypatch):
    real = at._draw_batch
    calls = []

    def draw(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives during step 2
        return real(*a, **kw)

    monkeypatch.setattr(at, "_draw_batch", draw)

    def ours(signum, frame):  # the caller's handlers, put back when training returns
        raise AssertionError("the trainer's handler should have taken this signal")

    before = {sig: signal.signal(sig, ours) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        result = train_acoustic(_cfg(corpus_dir, tmp_path, steps=10))
        after = {sig: signal.getsignal(sig) for sig in before}
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    assert not result.finished and result.step == 2
    assert torch.load(tmp_path / "checkpoint.pt", weights_only=True)["step"] == 2
    assert all(handler is ours for handler in after.values())


def test_export_checkpoint_pruned(corpus_dir, tmp_path):
    train_acoustic(_cfg(corpus_dir, tmp_path / "run", steps=2))
    path = export_checkpoint(tmp_path / "run" / "checkpoint.pt", tmp_path / "voice", dtype=torch.float16, prune=True)
    model = load_acoustic(path)
    assert bool((model.token_fusion.peer_choice >= 0).all())
    mel, dur = model.infer(np.array([1, 20, 2]), np.array([True, False, True]), speaker=0)
    assert mel.shape == (dur.sum(), 80)


def test_train_config_is_strict():
    with pytest.raises(ParameterError, match="optimizer"):
        AcousticTrainConfig(corpus_dir="x", optimizer="sgd")
    with pytest.raises(ParameterError, match="unknown training config"):
        AcousticTrainConfig.from_dict({"corpus_dir": "x", "stepz": 3})
    cfg = AcousticTrainConfig(corpus_dir="x", model=_model_cfg())
    assert AcousticTrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_a_pitch_model_starts_from_a_mel_model(corpus_dir, tmp_path):
    train_acoustic(_cfg(corpus_dir, tmp_path / "mel", steps=2))
    source, _ = load_checkpoint(tmp_path / "mel" / "checkpoint.pt")
    result = train_acoustic(_cfg(corpus_dir, tmp_path / "pitch", steps=1, lr=1e-9, pitch=True,
                                 init_from=str(tmp_path / "mel" / "checkpoint.pt")))
    model, _ = load_checkpoint(tmp_path / "pitch" / "checkpoint.pt")
    assert model.config.pitch and model.config.n_out == 82 and result.step == 1
    for name, value in source.state_dict().items():  # one step at lr 1e-9 away from the source
        torch.testing.assert_close(model.state_dict()[name], value, atol=1e-6, rtol=0, msg=name)
    assert "pitch_l1" in result.last_loss and np.isfinite(result.last_loss["pitch_l1"])
    corpus = load_corpus(corpus_dir)
    ev = evaluate_acoustic(model, corpus, 2)
    assert np.isfinite(ev["pitch_l1"]) and np.isfinite(ev["mel_l1"])
    with pytest.raises(ParameterError, match="not an acoustic checkpoint"):
        train_acoustic(_cfg(corpus_dir, tmp_path / "bad", init_from=str(tmp_path / "mel" / "metrics.jsonl")))


def test_init_from_a_voice_folder_starts_from_its_acoustic_model(corpus_dir, tmp_path):
    """--init-from VOICE_DIR: the voice's float16 acoustic weights and config (a pitch model goes on
    as one); a folder that is not a voice is refused."""
    from wavern.conditioning.export import save_acoustic

    train_acoustic(_cfg(corpus_dir, tmp_path / "pitch", steps=2, pitch=True))
    source, _ = load_checkpoint(tmp_path / "pitch" / "checkpoint.pt")
    voice = tmp_path / "voice"
    voice.mkdir()
    save_acoustic(source, voice / "acoustic.safetensors", dtype=torch.float16)
    (voice / "voice.json").write_text(json.dumps({"acoustic": source.config.to_dict(),
                                                  "provenance": {"acoustic": {"step": 2}}}))
    result = train_acoustic(_cfg(corpus_dir, tmp_path / "next", steps=1, lr=1e-9, init_from=str(voice)))
    model, _ = load_checkpoint(tmp_path / "next" / "checkpoint.pt")
    assert model.config == source.config and model.config.pitch and result.step == 1
    for name, value in source.state_dict().items():  # float16 weights, one step at lr 1e-9 away
        torch.testing.assert_close(model.state_dict()[name], value, atol=2e-3, rtol=1e-3, msg=name)
    assert any(not torch.equal(model.state_dict()[k], v) for k, v in source.state_dict().items())  # rounded
    with pytest.raises(ParameterError, match="not a voice folder"):
        train_acoustic(_cfg(corpus_dir, tmp_path / "bad", init_from=str(tmp_path / "pitch")))


def test_a_prosody_model_starts_from_a_pitch_model_and_reads_each_records_settings(corpus_dir, tmp_path):
    from wavern.training.acoustic_trainer import prosody_of

    train_acoustic(_cfg(corpus_dir, tmp_path / "pitch", steps=1, pitch=True))
    result = train_acoustic(_cfg(corpus_dir, tmp_path / "prosody", steps=2, pitch=True, prosody=True,
                                 init_from=str(tmp_path / "pitch" / "checkpoint.pt")))
    model, _ = load_checkpoint(tmp_path / "prosody" / "checkpoint.pt")
    assert model.config.prosody and model.config.pitch and result.step == 2
    assert model.prosody_in.weight.abs().sum() > 0  # trained: the records' settings reached it
    r = load_corpus(corpus_dir).train[0]
    if r.rate is not None:
        np.testing.assert_array_equal(prosody_of(r), [r.rate, r.pitch, r.pitch_range])
    assert np.isfinite(evaluate_acoustic(model, load_corpus(corpus_dir), 2)["mel_l1"])


def test_a_finished_run_run_again_keeps_its_one_final_evaluation(corpus_dir, tmp_path):
    """`make voice` reruns every stage: a finished acoustic run returns the evaluation it wrote at its
    last step (the same numbers) and writes no second eval row."""
    first = train_acoustic(_cfg(corpus_dir, tmp_path / "a", export=True))
    again = train_acoustic(_cfg(corpus_dir, tmp_path / "a", export=True, resume=True))
    assert again.finished and again.step == first.step == 4
    assert again.evaluation == first.evaluation
    rows = [json.loads(x) for x in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["kind"] == "eval"] == [4]


def test_speakers_from_corpus_carries_a_model_over_to_a_corpus_of_other_voices(corpus_dir, tmp_path):
    """--speakers-from-corpus: the started-from model speaks the new corpus's one voice; its embedding
    starts at the mean of the old speakers', every other weight is the started-from model's."""
    import shutil

    train_acoustic(_cfg(corpus_dir, tmp_path / "multi", steps=2))
    source, _ = load_checkpoint(tmp_path / "multi" / "checkpoint.pt")
    teacher = tmp_path / "teacher_corpus"
    shutil.copytree(corpus_dir, teacher)
    meta = teacher / "metadata.jsonl"
    rows = [json.loads(line) for line in meta.read_text().splitlines()]
    meta.write_text("".join(json.dumps({**r, "voice": "joe"}) + "\n" for r in rows))
    with pytest.raises(CorpusError, match="speakers-from-corpus"):  # without it the corpus's voice is unknown
        train_acoustic(_cfg(teacher, tmp_path / "refused", steps=1, init_from=str(tmp_path / "multi" / "checkpoint.pt")))
    train_acoustic(_cfg(teacher, tmp_path / "joe", steps=1, lr=1e-9, speakers_from_corpus=True,
                        init_from=str(tmp_path / "multi" / "checkpoint.pt")))
    model, _ = load_checkpoint(tmp_path / "joe" / "checkpoint.pt")
    assert model.config.speakers == ("joe",) and source.config.speakers == tuple(sorted(VOICES))
    old = source.state_dict()
    torch.testing.assert_close(model.state_dict()["speaker_embed.weight"][0], old["speaker_embed.weight"].mean(0),
                               atol=1e-6, rtol=0)
    for name, value in old.items():
        if name != "speaker_embed.weight":
            torch.testing.assert_close(model.state_dict()[name], value, atol=1e-6, rtol=0, msg=name)
    with pytest.raises(ParameterError, match="init_from"):
        train_acoustic(_cfg(teacher, tmp_path / "alone", steps=1, speakers_from_corpus=True))
