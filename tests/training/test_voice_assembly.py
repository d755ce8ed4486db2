"""Assembling a voice folder from training runs (training/voice.py ``assemble_from_runs``): the
engine loads what it writes, with the chosen default speaker."""

from __future__ import annotations

import pytest
import torch

from wavern.errors import ParameterError

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from corpus_factory import make_fake_corpus
    from test_acoustic_trainer import _cfg as acoustic_cfg

    from wavern.training.acoustic_trainer import train_acoustic
    from wavern.training.vocoder_trainer import VocoderTrainConfig, train_vocoder
    from wavern.vocoder.config import VocoderConfig

    root = tmp_path_factory.mktemp("assembly")
    corpus = make_fake_corpus(root / "corpus", n_utts=12, seed=5, words=(1, 3), durations=(0, 600))
    train_acoustic(acoustic_cfg(corpus, root / "acoustic", steps=2))
    voc = VocoderConfig(hidden_size=32, cond_channels=8, cond_blocks=1, target_density=0.5, prune_start_step=0,
                        prune_ramp_steps=1, prune_every_steps=1)
    train_vocoder(VocoderTrainConfig(corpus_dir=str(corpus), run_dir=str(root / "vocoder"), vocoder=voc, steps=2,
                                     batch_size=2, segment_frames=2, threads=1, bf16="off",
                                     checkpoint_interval_s=float("inf"), eval_every_steps=0, progress=False,
                                     cache_dir=str(root / "cache")))
    return corpus, root / "acoustic" / "checkpoint.pt", root / "vocoder" / "checkpoint.pt"


def test_the_default_speaker_is_chosen_kept_and_checked(runs, tmp_path, monkeypatch):
    from wavern.engine import Voice
    from wavern.training import voice as tv

    corpus, ack, vck = runs
    kw = dict(acoustic_checkpoint=ack, vocoder_checkpoint=vck, corpus_dir=corpus, postfilter=False)
    speakers = list(Voice.load(tv.assemble_from_runs(tmp_path / "a", **kw)).speakers)
    assert len(speakers) >= 2 and tv.DEFAULT_SPEAKER not in speakers  # the fake corpus has other voices
    assert Voice.load(tmp_path / "a").default_speaker == speakers[0]  # no DEFAULT_SPEAKER: the first
    monkeypatch.setattr(tv, "DEFAULT_SPEAKER", speakers[-1])
    v = Voice.load(tv.assemble_from_runs(tmp_path / "b", **kw))
    assert v.default_speaker == speakers[-1]
    assert v.espeak_voice == speakers[-1].split("+")[0]
    assert Voice.load(tv.assemble_from_runs(tmp_path / "c", speaker=speakers[1], **kw)).default_speaker == speakers[1]
    with pytest.raises(ParameterError, match="not one of the model's"):
        tv.assemble_from_runs(tmp_path / "d", speaker="xx+m9", **kw)
    assert v.synthesize("Hello.", seed=0).size > 0
