"""GTA mels: the acoustic model's teacher-forced output in the vocoder cache's frame order, and
the vocoder data mixing them in."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from wavern.conditioning.acoustic import frames_from_samples
from wavern.dsp import MelConfig
from wavern.errors import CorpusError
from wavern.training.acoustic_trainer import corpus_global_mask, load_checkpoint, train_acoustic
from wavern.training.corpus import load_corpus
from wavern.training.gta import build_gta_mels
from wavern.training.vocoder_data import VocoderData, build_cache

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from corpus_factory import make_fake_corpus
    from test_acoustic_trainer import _cfg

    root = tmp_path_factory.mktemp("gta")
    corpus = make_fake_corpus(root / "corpus", n_utts=12, seed=3, words=(1, 3), durations=(0, 600))
    train_acoustic(_cfg(corpus, root / "acoustic", steps=2))
    cache = build_cache(corpus, root / "cache", MelConfig())
    build_gta_mels(cache, root / "acoustic" / "checkpoint.pt", corpus_dir=corpus)
    return corpus, cache, root / "acoustic" / "checkpoint.pt"


def test_gta_mels_are_the_teacher_forced_prediction_in_cache_order(built):
    corpus_dir, cache, ck = built
    model, _ = load_checkpoint(ck)
    index = json.loads((cache / "index.json").read_text())
    gta = np.load(cache / "gta_mels.npy")
    true = np.load(cache / "mels.npy")
    assert gta.shape == true.shape
    records = {r.id: r for r in [*load_corpus(corpus_dir).train, *load_corpus(corpus_dir).held_out]}
    table_syms = json.loads((corpus_dir / "corpus.json").read_text())["symbols"]
    from wavern.conditioning.frontend.phonemes import SymbolTable

    table = SymbolTable(table_syms)
    for i in (0, len(index["ids"]) - 1):
        r = records[index["ids"][i]]
        lo, hi = index["frame_offsets"][i], index["frame_offsets"][i + 1]
        frames = frames_from_samples(r.durations, hi - lo, hop=256)
        with torch.no_grad():
            want = model(torch.as_tensor(table.encode(r.phonemes))[None],
                         torch.as_tensor(corpus_global_mask(r.phonemes))[None], torch.as_tensor(frames)[None],
                         speaker=torch.tensor([model.config.speakers.index(r.voice)])).mel[0].numpy()
        np.testing.assert_allclose(gta[lo:hi], want, atol=1e-5, rtol=0)
        assert np.abs(gta[lo:hi] - true[lo:hi]).mean() > 1e-3  # a prediction, not a copy
    assert json.loads((cache / "gta_mels.json").read_text())["predicted_utterances"] == len(index["ids"])


def test_batches_mix_in_gta_mels_only_when_asked(built):
    _, cache, _ = built
    data = VocoderData.open(cache, hop=256)
    kw = dict(batch_size=8, segment_frames=3, mel_pad=2)
    plain = data.batch(np.random.default_rng(4), **kw)
    zero = data.batch(np.random.default_rng(4), **kw, gta_prob=0.0)
    assert all(np.array_equal(a, b) for a, b in zip(plain, zero))  # same draws as before the option
    allg = data.batch(np.random.default_rng(4), **kw, gta_prob=1.0)
    assert np.array_equal(allg.audio, plain.audio)  # the same segments ...
    assert not np.array_equal(allg.mel, plain.mel)  # ... conditioned on the prediction
    utts, starts = data.split(False)[:2], np.array([0, 1])
    seg = data.segments(utts, starts, segment_frames=3, mel_pad=0, gta=np.array([True, False]))
    lo = data.frame_offsets[utts[0]]
    np.testing.assert_array_equal(seg.mel[0], data.gta_mels[lo:lo + 3])
    lo1 = data.frame_offsets[utts[1]] + 1
    np.testing.assert_array_equal(seg.mel[1], data.mels[lo1:lo1 + 3])
    data.gta_mels = None
    with pytest.raises(CorpusError, match="gta_mels.npy"):
        data.batch(np.random.default_rng(4), **kw, gta_prob=0.5)


def test_gta_prob_is_checked_and_parsed():
    from wavern.errors import ParameterError
    from wavern.training.vocoder_trainer import VocoderTrainConfig, _parse

    with pytest.raises(ParameterError, match="gta_prob"):
        VocoderTrainConfig(gta_prob=1.5)
    assert _parse(["--gta-prob", "0.5"]).gta_prob == 0.5 and _parse([]).gta_prob == 0.0


def test_a_pitch_models_gta_mel_is_its_mel_part(built, tmp_path):
    """A pitch-predicting acoustic model's output ends with two pitch channels: the GTA file keeps
    the cache's 80 mel channels (the trainer adds the true pitch features, as for a true mel)."""
    from test_acoustic_trainer import _cfg

    corpus_dir, cache, _ = built
    train_acoustic(_cfg(corpus_dir, tmp_path / "pitch", steps=1, pitch=True))
    import shutil

    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    build_gta_mels(copy, tmp_path / "pitch" / "checkpoint.pt", corpus_dir=corpus_dir)
    model, _ = load_checkpoint(tmp_path / "pitch" / "checkpoint.pt")
    index = json.loads((copy / "index.json").read_text())
    gta = np.load(copy / "gta_mels.npy")
    assert gta.shape == np.load(copy / "mels.npy").shape
    r = {x.id: x for x in [*load_corpus(corpus_dir).train, *load_corpus(corpus_dir).held_out]}[index["ids"][0]]
    lo, hi = index["frame_offsets"][0], index["frame_offsets"][1]
    from wavern.conditioning.frontend.phonemes import SymbolTable

    table = SymbolTable(json.loads((corpus_dir / "corpus.json").read_text())["symbols"])
    with torch.no_grad():
        out = model(torch.as_tensor(table.encode(r.phonemes))[None], torch.as_tensor(corpus_global_mask(r.phonemes))[None],
                    torch.as_tensor(frames_from_samples(r.durations, hi - lo, hop=256))[None],
                    speaker=torch.tensor([model.config.speakers.index(r.voice)])).mel[0].numpy()
    assert out.shape[1] == 82
    np.testing.assert_allclose(gta[lo:hi], out[:, :80], atol=1e-5, rtol=0)
