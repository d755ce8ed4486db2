"""Replaced-token-detection pre-training on a small synthetic corpus: labels, masking rate, donors,
learning, bit-exact resume, encoder export into the acoustic model."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from wavern.conditioning.acoustic import AcousticModel
from wavern.conditioning.config import AcousticConfig, EncoderConfig
from wavern.conditioning.frontend.phonemes import DEFAULT_SYMBOLS, SymbolTable
from wavern.errors import ParameterError
from wavern.training import pretrain as pt
from wavern.training.acoustic_trainer import AcousticTrainConfig, train_acoustic
from wavern.training.ngram import BidirectionalTrigram
from wavern.training.pretrain import (DonorBank, Example, PretrainConfig, ReplacedTokenDetector, choose_positions,
                                      corrupt, export_encoder, load_encoder_into, pool_frames, pretrain_encoder,
                                      special_ids)

torch.set_num_threads(1)

from corpus_factory import VOICES, make_fake_corpus

TABLE = SymbolTable.default()
SENTENCES = ["The cat sat on the mat.", "A dog ran home.", "Ships sail at night.", "We met at noon today.",
             "Nine men came in.", "She sells sea shells."]


def _fake_corpus(root, n_utts: int = 30, seed: int = 0):
    """Mel = a fixed vector per phoneme plus noise, so the audio tells which phoneme a token is."""
    make_fake_corpus(root, n_utts=n_utts, seed=seed, words=(2, 5), durations=(300, 900))
    (root / "sentences.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    return _fake_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def data(corpus_dir, tmp_path_factory):
    cfg = PretrainConfig(corpus_dir=str(corpus_dir), text_voices=(), bimodal_fraction=1.0, progress=False)
    return pt._load_data(cfg, tmp_path_factory.mktemp("run"))


def _enc_cfg() -> EncoderConfig:
    return EncoderConfig(n_symbols=len(DEFAULT_SYMBOLS), d_model=24, n_layers=1, n_heads=2, window=4,
                         ffn_channels=32, dropout=0.1)


def _cfg(corpus_dir, run_dir, **kw) -> PretrainConfig:
    base = dict(corpus_dir=str(corpus_dir), run_dir=str(run_dir), encoder=_enc_cfg(),
                sentences_path=str(corpus_dir / "sentences.txt"), text_voices=(), bimodal_fraction=1.0,
                steps=6, batch_size=4, lr=3e-3, warmup_steps=1, log_every=1, eval_sequences=4, progress=False,
                checkpoint_every_s=1e9)
    base.update(kw)
    return PretrainConfig(**base)


# ----------------------------------------------------------------------------- data and corruption
def test_pool_frames_is_the_mean_of_each_tokens_frames():
    rng = np.random.default_rng(0)
    frames = np.array([0, 3, 1, 0, 2])
    mel = rng.normal(size=(6, 4)).astype(np.float32)
    want = np.array([np.zeros(4), mel[0:3].mean(0), mel[3], np.zeros(4), mel[4:6].mean(0)])
    np.testing.assert_allclose(pool_frames(mel, frames), want, rtol=1e-6, atol=1e-6)


def test_masking_rate_is_about_fifteen_percent():
    rng = np.random.default_rng(0)
    cand = rng.random(120) < 0.8
    n = [choose_positions(cand, 0.15, rng) for _ in range(2000)]
    assert all(np.all(cand[p]) and np.unique(p).size == p.size for p in n)
    assert abs(np.mean([p.size for p in n]) / cand.sum() - 0.15) < 0.005


def test_labels_mark_exactly_the_positions_that_changed(data):
    rng = np.random.default_rng(3)
    n_masked = n_real = n_changed = n_same = 0
    for s in data.bi_train:
        for _ in range(4):
            c = corrupt(s, data.gen, data.bank, rng, special=data.special, mask_rate=0.15)
            np.testing.assert_array_equal(c.text_label, (c.ids != s.ids).astype(np.float32))
            assert not c.text_masked[data.special[s.ids]].any() and not c.audio_masked[data.special[s.ids]].any()
            assert np.array_equal(c.ids[~c.text_masked], s.ids[~c.text_masked])
            n_masked += int(c.text_masked.sum())
            n_real += int((~data.special[s.ids]).sum())
            n_changed += int(c.text_label.sum())
            n_same += int((c.text_masked & (c.text_label == 0)).sum())
            # audio: unmasked frames untouched; a masked position holds a donor's features, and
            # its label says whether the donor's phoneme differs
            assert np.array_equal(c.audio[~c.audio_masked], s.audio[~c.audio_masked])
            assert not c.audio_masked[s.frames == 0].any()
            for p in np.flatnonzero(c.audio_masked):
                hit = np.flatnonzero((data.bank.features == c.audio[p]).all(axis=1))
                assert hit.size >= 1
                donor = hit[0]
                assert data.bank.utt[donor] != s.utt  # from another utterance
                assert data.bank.voice[donor] == s.voice  # this corpus has every phoneme in every voice
                assert c.audio_label[p] == float(data.bank.symbol[donor] != s.ids[p])
            assert not c.audio_label[~c.audio_masked].any()
    assert abs(n_masked / n_real - 0.15) < 0.03
    assert n_changed > 0 and n_same > 0  # replacements happen, and a proposal equal to the original is "original"


def test_donor_bank_prefers_the_same_voice_and_never_the_same_utterance():
    feats = np.arange(6, dtype=np.float32)[:, None] * np.ones((1, 3), np.float32)
    ex = [Example(np.array([5, 6, 5]), np.zeros(3, bool), feats[:3], np.ones(3, np.int64), voice=0, utt=0),
          Example(np.array([6, 5, 6]), np.zeros(3, bool), feats[3:], np.ones(3, np.int64), voice=1, utt=1)]
    bank = DonorBank(ex, 10, np.zeros(10, bool))
    rng = np.random.default_rng(0)
    assert {bank.draw(5, 0, 1, rng) for _ in range(50)} == {0, 2}  # same voice, other utterance
    assert {bank.draw(6, 0, 0, rng) for _ in range(50)} == {3, 5}  # voice 0's only 6 is utt 0's: any voice
    assert bank.draw(5, 1, 0, rng) == 4 and bank.draw(7, 0, 0, rng) == -1
    assert bank.has_donor[[5, 6]].all() and not bank.has_donor[7]


def test_text_is_phonemised_once_and_cached(corpus_dir, tmp_path, monkeypatch):
    cfg = _cfg(corpus_dir, tmp_path, text_voices=("en-us",))
    train, held = pt._text_sequences(cfg, tmp_path, TABLE)
    assert len(train) + len(held) == len(SENTENCES)
    assert all(s.ids[0] == TABLE.bos_id and s.ids[-1] == TABLE.eos_id and s.is_global[0] for s in train)

    def boom(*a, **k):
        raise AssertionError("phonemised again despite the cache")

    monkeypatch.setattr(pt, "phonemize_sentences", boom)
    train2, _ = pt._text_sequences(cfg, tmp_path, TABLE)
    assert all(np.array_equal(a.ids, b.ids) for a, b in zip(train, train2))


# ----------------------------------------------------------------------------- model and training
def test_unimodal_rows_see_exactly_the_plain_encoder(data):
    torch.manual_seed(0)
    model = ReplacedTokenDetector(_enc_cfg()).eval()
    rng = np.random.default_rng(0)
    seqs = data.bi_train[:3]
    rows = [corrupt(s, data.gen, data.bank, rng, special=data.special) for s in seqs]
    batch = pt.collate(seqs, rows, 80)
    batch["has_audio"][1] = False
    with torch.no_grad():
        out = model(batch["ids"], batch["is_global"], batch["padding_mask"], audio=batch["audio"],
                    has_audio=batch["has_audio"])
        plain = model.encoder(batch["ids"], batch["is_global"], batch["padding_mask"])
    assert len(model.encoder.embed._forward_hooks) == 0  # the audio hook is removed after the call
    torch.testing.assert_close(out.text_logits[1], model.text_head(plain[1]).squeeze(-1))
    assert not torch.allclose(out.text_logits[0], model.text_head(plain[0]).squeeze(-1))


def test_loss_decreases_on_the_synthetic_corpus(corpus_dir, tmp_path, data):
    cfg = _cfg(corpus_dir, tmp_path, steps=80, batch_size=8)
    result = pretrain_encoder(cfg)
    assert result.step == 80 and result.evaluation is not None
    torch.manual_seed(cfg.seed)  # the trainer's initial weights
    model = ReplacedTokenDetector(cfg.encoder)
    seqs = data.bi_train  # fixed masks (the evaluation seed) over every training utterance
    before = pt.evaluate_pretrain(model, seqs, data.gen, data.bank, cfg, data.special)
    model.load_state_dict(torch.load(tmp_path / "checkpoint.pt", weights_only=True)["model"])
    after = pt.evaluate_pretrain(model, seqs, data.gen, data.bank, cfg, data.special)
    for key in ("text_rtd", "audio_rtd", "mlm"):
        assert after[key] < 0.7 * before[key], (key, before[key], after[key])
    assert after["mlm_acc"] > 0.5  # the aligned audio tells the phoneme


@pytest.mark.parametrize("optimizer", ["adam", "yellowfin"])
def test_resume_is_bit_exact(corpus_dir, tmp_path, optimizer):
    straight = pretrain_encoder(_cfg(corpus_dir, tmp_path / "a", optimizer=optimizer, bimodal_fraction=0.5,
                                     text_voices=("en-us",), export=False))
    pretrain_encoder(_cfg(corpus_dir, tmp_path / "b", optimizer=optimizer, bimodal_fraction=0.5,
                          text_voices=("en-us",), steps=3, export=False))
    resumed = pretrain_encoder(_cfg(corpus_dir, tmp_path / "b", optimizer=optimizer, bimodal_fraction=0.5,
                                    text_voices=("en-us",), export=False))
    assert straight.step == resumed.step == 6 and straight.last_loss == resumed.last_loss
    a = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)["model"]
    for k in a:
        assert torch.equal(a[k], b[k]), k
    rows = lambda p: [json.loads(x) for x in (p / "metrics.jsonl").read_text().splitlines()]  # noqa: E731
    strip = lambda r: {k: v for k, v in r.items() if k != "elapsed_s"}  # noqa: E731
    assert [strip(r) for r in rows(tmp_path / "a")] == [strip(r) for r in rows(tmp_path / "b")]


def test_resume_refuses_another_run(corpus_dir, tmp_path):
    pretrain_encoder(_cfg(corpus_dir, tmp_path, steps=1, export=False))
    with pytest.raises(ParameterError, match="mask_rate"):
        pretrain_encoder(_cfg(corpus_dir, tmp_path, steps=2, mask_rate=0.2))


# ----------------------------------------------------------------------------- export into the acoustic model
def test_exported_encoder_loads_into_a_fresh_acoustic_model(corpus_dir, tmp_path):
    torch.manual_seed(1)
    rtd = ReplacedTokenDetector(_enc_cfg())
    path = export_encoder(rtd, tmp_path / "encoder.safetensors", symbols=list(DEFAULT_SYMBOLS))
    acoustic = AcousticModel(AcousticConfig(encoder=dataclasses.replace(_enc_cfg(), dropout=0.2),
                                            speakers=tuple(VOICES)))
    load_encoder_into(acoustic.encoder, path, symbols=list(DEFAULT_SYMBOLS))
    want = rtd.encoder.state_dict()
    got = acoustic.encoder.state_dict()
    assert set(got) == set(want)
    for k in want:
        assert torch.equal(got[k], want[k]), k
    with pytest.raises(ParameterError, match="d_model=24"):
        load_encoder_into(AcousticModel(AcousticConfig(encoder=dataclasses.replace(_enc_cfg(), d_model=32),
                                                       speakers=("en-us",))).encoder, path)
    with pytest.raises(ParameterError, match="symbol table"):
        load_encoder_into(acoustic.encoder, path, symbols=list(DEFAULT_SYMBOLS[:-1]) + ["zz"])
    with pytest.raises(ParameterError, match="not found"):
        load_encoder_into(acoustic.encoder, tmp_path / "missing.safetensors")


def test_acoustic_trainer_starts_from_the_pretrained_encoder(corpus_dir, tmp_path):
    res = pretrain_encoder(_cfg(corpus_dir, tmp_path / "pre", steps=2))
    enc = torch.load(tmp_path / "pre" / "checkpoint.pt", weights_only=True)["model"]
    model = AcousticConfig(encoder=_enc_cfg(), speakers=tuple(sorted(VOICES)), speaker_dim=4, ref_channels=8,
                           ref_layers=1, peer_width=8, duration_channels=16, decoder_layers=1, decoder_d_model=16,
                           decoder_heads=2, decoder_window=4, decoder_ffn_channels=16)
    # lr 1e-12: the one step moves nothing measurably, so the trained encoder is the initial one
    cfg = AcousticTrainConfig(corpus_dir=str(corpus_dir), out_dir=str(tmp_path / "ac"), model=model, steps=1,
                              batch_size=2, lr=1e-12, progress=False, export=False, init_encoder=str(res.encoder_path))
    train_acoustic(cfg)
    got = torch.load(tmp_path / "ac" / "checkpoint.pt", weights_only=True)["model"]
    for k, v in enc.items():
        if k.startswith("encoder."):
            torch.testing.assert_close(got[k], v, rtol=0, atol=1e-8)


def test_config_is_strict():
    with pytest.raises(ParameterError, match="unknown pretrain config fields"):
        PretrainConfig.from_dict({"corpus_dir": "x", "bogus": 1})
    with pytest.raises(ParameterError, match="mask_rate"):
        PretrainConfig(corpus_dir="x", mask_rate=1.5)
    cfg = PretrainConfig(corpus_dir="x", text_voices=["en-us", "en"], encoder=_enc_cfg().to_dict())
    assert PretrainConfig.from_dict(cfg.to_dict()) == cfg and cfg.text_voices == ("en-us", "en")


def test_trigram_generator_fits_the_training_text(data):
    assert isinstance(data.gen, BidirectionalTrigram)
    for s in data.bi_train[:5]:  # every training trigram was counted
        p = np.concatenate([[0, 0], s.ids, [0, 0]])
        assert (data.gen.count(p[:-2], p[1:-1], p[2:]) > 0).all()
    assert not data.gen.allowed[special_ids(TABLE)].any()
