"""Offline rendering of several items in shared vocoder batches (engine/batch.py,
``render_utterances``): each item's bytes equal its render alone, whatever its batch mates, and
a bad item fails alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wavern.engine.batch import MAX_TEXT_CHARS, UtteranceRequest, render_utterance, render_utterances
from wavern.engine.chunk import SpeakConfig
from wavern.errors import ParameterError

torch.set_num_threads(1)

FOLD = dict(fold_frames=12, overlap_frames=3)  # short segments: many streams from tiny texts

REQUESTS = [
    UtteranceRequest("Hello there.", None, 1),
    UtteranceRequest("A second item, a little longer. It has two sentences.", SpeakConfig(pause_s=0.05), 2),
    UtteranceRequest("Quick.", SpeakConfig(speed=2.5, volume=0.5), 3),
    UtteranceRequest("Warmer sampling here.", SpeakConfig(temperature=0.7), 4),
    UtteranceRequest("The last one is read slowly, word by word.", SpeakConfig(speed=0.8), 5),
]


@pytest.fixture(scope="module")
def voice(tiny_voice):
    from wavern.engine import Voice

    v = Voice.load(tiny_voice)
    yield v
    v.close()


@pytest.fixture(scope="module")
def alone(voice):
    return [render_utterance(voice, r.text, r.config, seed=r.seed, **FOLD) for r in REQUESTS]


def _same(a, b) -> None:
    np.testing.assert_array_equal(a.samples, b.samples)
    assert (a.sentences, a.word_timings, a.sample_rate) == (b.sentences, b.word_timings, b.sample_rate)


def test_items_render_the_same_bytes_whatever_they_are_batched_with(voice, alone, monkeypatch):
    sizes = []
    real = voice.vocoder.generate_batch
    monkeypatch.setattr(voice.vocoder, "generate_batch",
                        lambda gi, st, n, **kw: sizes.append(gi.shape[0]) or real(gi, st, n, **kw))
    for order in ([0, 1, 2, 3, 4], [4, 2], [3, 0, 1], [2]):
        sizes.clear()
        got = render_utterances(voice, [REQUESTS[i] for i in order], **FOLD)
        for i, r in zip(order, got):
            _same(r, alone[i])
        if order == [0, 1, 2, 3, 4]:
            assert max(sizes) >= 24  # the shared batch reached the lanes
            assert len(sizes) == 2  # item 3 (temperature 0.7) is batched apart from the rest
    got = render_utterances(voice, REQUESTS, **FOLD)
    walls = sum(r.compute_s for r in got)
    assert all(r.cpu_s > 0 and r.compute_s > 0 for r in got) and walls > 0


def test_unfolded_items_equal_render_utterance(voice):
    got = render_utterances(voice, REQUESTS[:3], fold_frames=None)
    for r, req in zip(got, REQUESTS[:3]):
        _same(r, render_utterance(voice, req.text, req.config, seed=req.seed, fold_frames=None))


def test_a_bad_item_fails_alone(voice, alone):
    reqs = [REQUESTS[0], UtteranceRequest("   "), REQUESTS[1], UtteranceRequest("x" * (MAX_TEXT_CHARS + 1)),
            UtteranceRequest("Fine.", SpeakConfig(speaker="nobody")), UtteranceRequest("🙂🙂")]
    got = render_utterances(voice, reqs, **FOLD)
    assert all(isinstance(e, ParameterError) for e in got[3:] + [got[1]])
    assert "nobody" in str(got[4]) and "speakable" in str(got[5]) and str(MAX_TEXT_CHARS) in str(got[3])
    _same(got[0], alone[0])
    _same(got[2], alone[1])


def test_a_failing_shared_batch_is_retried_item_by_item(voice, alone, monkeypatch):
    """If the shared batch raises (say, out of memory), every item is tried alone, and only the
    one that fails alone is reported failed."""
    real = voice.vocoder.render_many

    def flaky(gis, seeds, **kw):
        if len(gis) > 1:
            raise MemoryError("shared batch too big")
        if seeds[0] == REQUESTS[1].seed:
            raise RuntimeError("this item breaks the vocoder")
        return real(gis, seeds, **kw)

    monkeypatch.setattr(voice.vocoder, "render_many", flaky)
    got = render_utterances(voice, REQUESTS[:3], **FOLD)
    assert isinstance(got[1], RuntimeError)
    _same(got[0], alone[0])
    _same(got[2], alone[2])
