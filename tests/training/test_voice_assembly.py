"""Assembling a voice folder from training runs (training/voice.py ``assemble_from_runs``): the
engine loads what it writes, with the chosen default speaker."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

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


def test_train_voice_builds_the_shipped_architecture_from_a_corpus(tmp_path):
    """`wavern train voice` (``build_voice``): the tiny preset has the default's architecture (a
    pitch + prosody acoustic model, the LPC vocoder with a long-term predictor and period inputs),
    trains both from nothing on an existing corpus and writes a voice the engine speaks with."""
    from corpus_factory import make_fake_corpus

    from wavern.engine import SpeakConfig, Voice
    from wavern.training.voice import PRESETS, SHIPPED_MELMATCH, SHIPPED_POSTFILTER, VoiceBuildConfig, build_voice

    for key in ("pitch", "prosody"):
        assert PRESETS["default"]["acoustic"]["model"][key] and PRESETS["tiny"]["acoustic"]["model"][key]
    for key in ("lpc_order", "ltp", "ltp_input", "ltp_input_taps", "excitation", "pitch"):
        assert PRESETS["tiny"]["vocoder"]["vocoder"][key] == PRESETS["default"]["vocoder"]["vocoder"][key]
    assert PRESETS["tiny"]["vocoder"]["period_input_fade"] == PRESETS["default"]["vocoder"]["period_input_fade"] > 0
    assert PRESETS["default"]["voices"] is None  # the builder's varied set of voices, as the shipped corpus
    corpus = make_fake_corpus(tmp_path / "corpus", n_utts=12, seed=4, words=(1, 3), durations=(0, 600))
    summary = build_voice(VoiceBuildConfig(preset="tiny", corpus_dir=str(corpus), run_dir=str(tmp_path / "runs"),
                                           out_dir=str(tmp_path / "voice"), acoustic_steps=2, vocoder_steps=2,
                                           threads=1))
    assert summary["acoustic"]["step"] == 2 and summary["vocoder"]["step"] == 2 and summary["build_wall_s"] > 0
    assert summary["acoustic"]["wall_s"] > 0 and summary["vocoder"]["wall_s"] > 0  # (the acoustic one read 0.0)
    assert "corpus of 12 sentences" in (tmp_path / "voice" / "MODEL_CARD.md").read_text()  # what it was built on
    with pytest.raises(ParameterError, match="holds a corpus of 12 utterances; this build asks for 20"):
        build_voice(VoiceBuildConfig(preset="tiny", corpus_dir=str(corpus), run_dir=str(tmp_path / "runs"),
                                     out_dir=str(tmp_path / "voice2"), utterances=20, acoustic_steps=2,
                                     vocoder_steps=2, threads=1))
    v = Voice.load(tmp_path / "voice")
    try:
        assert v.has_prosody and v.vocoder.ltp and v.vocoder.ltp_input_taps == 5 and v.vocoder.lpc_order == 16
        assert v.postfilter is not None and v.melmatch is not None and v.melmatch_measured is v.melmatch
        assert v.ltp_gain_scale == PRESETS["tiny"]["ltp_gain_scale"] == PRESETS["default"]["ltp_gain_scale"]
        assert v.synthesize("Hello there.", SpeakConfig(pitch=60, speaker="en-us"), seed=0).size > 0
    finally:
        v.close()
    shipped = json.loads((Path(__file__).parents[2] / "assets" / "voices" / "espeak" / "voice.json").read_text())
    assert SHIPPED_POSTFILTER == shipped["inference"]["postfilter"]
    assert SHIPPED_MELMATCH == shipped["inference"]["melmatch"]
    from wavern.engine.melmatch import MelMatchConfig
    from wavern.training.voice import SHIPPED_MELMATCH_MEASURED

    assert (MelMatchConfig.from_dict(SHIPPED_MELMATCH_MEASURED)
            == MelMatchConfig.from_dict(shipped["inference"]["melmatch_measured"]))
    assert PRESETS["default"]["melmatch_measured"] == SHIPPED_MELMATCH_MEASURED
    from wavern.training.voice import SHIPPED_LTP_GAIN_SCALE

    assert PRESETS["default"]["ltp_gain_scale"] == SHIPPED_LTP_GAIN_SCALE == shipped["inference"]["ltp_gain_scale"]


def test_assembly_writes_both_mel_matching_settings(runs, tmp_path):
    """``melmatch`` for the acoustic model's mel, ``melmatch_measured`` for a measured one: a dict,
    the defaults (True), none (False: null in voice.json), or as ``melmatch`` (None: absent)."""
    from wavern.engine import Voice
    from wavern.engine.melmatch import MelMatchConfig
    from wavern.training import voice as tv

    corpus, ack, vck = runs
    kw = dict(acoustic_checkpoint=ack, vocoder_checkpoint=vck, corpus_dir=corpus, postfilter=False,
              melmatch={"iterations": 2, "smooth": 1.5})
    for name, measured, want in (("a", {"iterations": 3}, MelMatchConfig(iterations=3)), ("b", True, MelMatchConfig()),
                                 ("c", False, None), ("d", None, MelMatchConfig(iterations=2, smooth=1.5))):
        v = Voice.load(tv.assemble_from_runs(tmp_path / name, melmatch_measured=measured, **kw))
        try:
            assert v.melmatch.config == MelMatchConfig(iterations=2, smooth=1.5)
            assert (v.melmatch_measured.config if v.melmatch_measured is not None else None) == want
            infer = json.loads((tmp_path / name / "voice.json").read_text())["inference"]
            assert ("melmatch_measured" in infer) == (measured is not None)
        finally:
            v.close()


def test_a_voice_folder_that_cannot_be_written_is_refused_before_training(tmp_path):
    """`wavern train voice` checks its output folder first: a read-only one (a pip install's
    site-packages) or one below a file fails in seconds, with no corpus built and nothing trained."""
    from mounts import tmpfs

    from wavern.training.voice import VoiceBuildConfig, build_voice

    (tmp_path / "file").write_text("x")
    corpus, runs = tmp_path / "corpus", tmp_path / "runs"
    with pytest.raises(ParameterError, match="is not a folder"):
        build_voice(VoiceBuildConfig(preset="tiny", corpus_dir=str(corpus), run_dir=str(runs),
                                     out_dir=str(tmp_path / "file" / "voice")))
    with tmpfs(tmp_path / "ro", 64, read_only=True) as ro:
        with pytest.raises(ParameterError, match="cannot write the voice"):
            build_voice(VoiceBuildConfig(preset="tiny", corpus_dir=str(corpus), run_dir=str(runs),
                                         out_dir=str(ro / "voices" / "tiny")))
    assert not corpus.exists() and not runs.exists()


def test_the_default_preset_builds_the_shipped_architecture():
    """`make voice` builds the shipped voice's architecture (docs say so): its acoustic model config
    (with the corpus's symbols and speakers) and its vocoder config equal the shipped voice.json's.
    (The preset's acoustic decoder had the code defaults: a model 2.1x the shipped one's size.)"""
    import wavern.assets
    from wavern.conditioning.config import AcousticConfig
    from wavern.training.voice import PRESETS
    from wavern.training.vocoder_trainer import SCHEDULE_FIELDS
    from wavern.vocoder.config import VocoderConfig

    shipped = json.loads((Path(wavern.assets.__file__).parent / "voices" / "espeak" / "voice.json").read_text())
    p = PRESETS["default"]
    m = dict(p["acoustic"]["model"])
    m["encoder"] = {**m["encoder"], "n_symbols": shipped["acoustic"]["encoder"]["n_symbols"]}
    m["speakers"] = shipped["acoustic"]["speakers"]
    assert AcousticConfig.from_dict(m) == AcousticConfig.from_dict(shipped["acoustic"])
    built = VocoderConfig.from_dict({**VocoderConfig().to_dict(), **p["vocoder"]["vocoder"]})
    # the same network at the same density; only where the pruning schedule ran may differ (the
    # shipped vocoder was carried to its density late in its run, docs/TRAINING.md)
    schedule = {k: getattr(built, k) for k in SCHEDULE_FIELDS if k != "target_density"}
    assert built == dataclasses.replace(VocoderConfig.from_dict(shipped["vocoder"]), **schedule)


def test_a_stage_that_stops_early_assembles_no_voice_and_a_rerun_continues(tmp_path, monkeypatch):
    """A stage stopped before its last step (here the acoustic model's time limit; a SIGTERM does
    the same) ends the build with TrainingStopped and writes no voice: it went on and wrote a
    half-trained one, exit code 0 (a helper's from-nothing build). The rerun resumes."""
    from corpus_factory import make_fake_corpus

    from wavern.training.voice import PRESETS, TrainingStopped, VoiceBuildConfig, build_voice

    tiny = {**PRESETS["tiny"], "acoustic": {**PRESETS["tiny"]["acoustic"], "time_limit_s": 1e-6}}
    monkeypatch.setitem(PRESETS, "tiny", tiny)
    corpus = make_fake_corpus(tmp_path / "corpus", n_utts=12, seed=4, words=(1, 3), durations=(0, 600))
    cfg = VoiceBuildConfig(preset="tiny", corpus_dir=str(corpus), run_dir=str(tmp_path / "runs"),
                           out_dir=str(tmp_path / "voice"), acoustic_steps=3, vocoder_steps=2, threads=1)
    with pytest.raises(TrainingStopped, match=r"acoustic model stopped at step \d of 3"):
        build_voice(cfg)
    assert not (tmp_path / "voice").exists() and not (tmp_path / "runs" / "vocoder").exists()
    assert (tmp_path / "runs" / "acoustic" / "checkpoint.pt").is_file()
    monkeypatch.setitem(PRESETS, "tiny", {**tiny, "acoustic": {k: v for k, v in tiny["acoustic"].items()
                                                              if k != "time_limit_s"}})
    summary = build_voice(cfg)  # the same command again: continues and finishes
    assert summary["acoustic"]["step"] == 3 and (tmp_path / "voice" / "voice.json").is_file()
    # the provenance holds the runs' held-out evaluations and their whole training time
    metrics = json.loads((tmp_path / "voice" / "voice.json").read_text())["provenance"]["metrics"]
    assert metrics["acoustic_held_out"]["step"] == 3 and "mel_l1" in metrics["acoustic_held_out"]
    assert metrics["vocoder_held_out"]["step"] == 2
    assert summary["build_wall_s"] == pytest.approx(summary["acoustic"]["wall_s"] + summary["vocoder"]["wall_s"],
                                                    abs=0.11)


def test_a_vocoder_run_of_another_configuration_is_refused_before_the_acoustic_stage(tmp_path):
    """A leftover runs/vocoder (another configuration) was refused only after the acoustic model
    had trained (days for the default preset): now at the start."""
    import torch as _torch

    from wavern.training.voice import PRESETS, VoiceBuildConfig, build_voice
    from wavern.vocoder.config import VocoderConfig

    runs = tmp_path / "runs"
    (runs / "vocoder").mkdir(parents=True)
    other = VocoderConfig(hidden_size=32, cond_channels=8, cond_blocks=1)
    _torch.save({"format": "x", "vocoder_config": other.to_dict()}, runs / "vocoder" / "checkpoint.pt")
    assert PRESETS["tiny"]["vocoder"]["vocoder"]["hidden_size"] != 32
    with pytest.raises(ParameterError, match="holds a vocoder run of another configuration.*hidden_size"):
        build_voice(VoiceBuildConfig(preset="tiny", corpus_dir=str(tmp_path / "nocorpus"), run_dir=str(runs),
                                     out_dir=str(tmp_path / "voice"), threads=1))
    assert not (runs / "acoustic").exists()
