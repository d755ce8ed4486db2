"""Bidirectional trigram generator: probabilities against counts by hand and a naive twin; proposals."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from wavern.errors import ParameterError
from wavern.training.ngram import BidirectionalTrigram


def test_probabilities_match_counts_by_hand():
    # padded: [0 0 1 2 3 0 0] and [0 0 1 2 2 0 0]; C[1,2,3] = C[1,2,2] = 1, C[1,2,.] = 2
    m = BidirectionalTrigram.fit([np.array([1, 2, 3]), np.array([1, 2, 2])], n_symbols=5, k=0.5)
    np.testing.assert_allclose(m.forward_prob(1, 2), [1 / 9, 1 / 9, 1 / 3, 1 / 3, 1 / 9])  # (c + .5) / (2 + 2.5)
    # x followed by (2, 3): only x = 1, once; C[., 2, 3] = 1 -> (c + .5) / (1 + 2.5)
    np.testing.assert_allclose(m.backward_prob(2, 3), [1 / 7, 3 / 7, 1 / 7, 1 / 7, 1 / 7])
    # sequence start: (0, 0) is followed by 1 twice
    np.testing.assert_allclose(m.forward_prob(0, 0), [0.5 / 4.5, 2.5 / 4.5, 0.5 / 4.5, 0.5 / 4.5, 0.5 / 4.5])
    np.testing.assert_allclose(m.forward_prob(4, 4), np.full(5, 0.2))  # unseen context: uniform
    assert m.count(2, 2, 0) == 1 and m.count(2, 3, 0) == 1 and m.count(3, 3, 3) == 0


def _random_corpus(rng, n=60, v=12):
    # a small "grammar": each symbol has 3 possible successors, so contexts repeat
    succ = {s: rng.choice(np.arange(1, v), 3, replace=False) for s in range(1, v)}
    seqs = []
    for _ in range(n):
        s = [int(rng.integers(1, v))]
        for _ in range(int(rng.integers(3, 15))):
            s.append(int(rng.choice(succ[s[-1]])))
        seqs.append(np.array(s))
    return seqs


def test_probabilities_match_a_naive_twin():
    rng = np.random.default_rng(0)
    v, k = 12, 0.1
    seqs = _random_corpus(rng, v=v)
    m = BidirectionalTrigram.fit(seqs, n_symbols=v, k=k)
    tri = Counter()
    for s in seqs:
        p = [0, 0, *s.tolist(), 0, 0]
        tri.update(zip(p, p[1:], p[2:]))
    for a, b in [(0, 0), (3, 4), (int(seqs[0][0]), int(seqs[0][1])), (11, 11)]:
        ctx = sum(c for (x, y, _), c in tri.items() if (x, y) == (a, b))
        want = [(tri[(a, b, x)] + k) / (ctx + k * v) for x in range(v)]
        np.testing.assert_allclose(m.forward_prob(a, b), want)
        ctx_r = sum(c for (_, y, z), c in tri.items() if (y, z) == (a, b))
        want_r = [(tri[(x, a, b)] + k) / (ctx_r + k * v) for x in range(v)]
        np.testing.assert_allclose(m.backward_prob(a, b), want_r)
    # proposal = product of both directions on the support, normalised
    s = seqs[1]
    q = m.proposal(s, np.arange(s.size))
    p = [0, 0, *s.tolist(), 0, 0]
    for i in range(s.size):
        support = np.array([tri[(p[i + 1], x, p[i + 3])] > 0 for x in range(v)])
        support[0] = False
        raw = m.forward_prob(p[i], p[i + 1]) * m.backward_prob(p[i + 3], p[i + 4]) * support
        np.testing.assert_allclose(q[i], raw / raw.sum())


def test_replacements_are_always_seen_in_that_context():
    rng = np.random.default_rng(1)
    v = 12
    seqs = _random_corpus(rng, v=v)
    m = BidirectionalTrigram.fit(seqs, n_symbols=v, k=0.5, exclude=[1])
    tri, after, before = set(), set(), set()
    for s in seqs:
        p = [0, *s.tolist(), 0]
        tri.update(zip(p, p[1:], p[2:]))
        after.update(zip(p, p[1:]))
    before = after

    def check(seq, new):
        p = [0, *seq.tolist(), 0]
        for i, x in enumerate(new.tolist()):
            assert x not in (0, 1)  # never the boundary, never an excluded id
            if any((p[i], y, p[i + 2]) in tri for y in range(2, v)):  # tier 1 has an allowed symbol
                assert (p[i], x, p[i + 2]) in tri
            elif any((p[i], y) in after or (y, p[i + 2]) in before for y in range(2, v)):
                assert (p[i], x) in after or (x, p[i + 2]) in before
            else:
                assert any(x in t for t in seqs)

    for s in seqs[:20]:
        for _ in range(5):
            new = m.sample(s, np.arange(s.size), rng)
            check(s, new)
            # a training sequence whose original is allowed always has it in tier 1
            orig_ok = s != 1
            p = [0, *s.tolist(), 0]
            assert all((p[i], int(x), p[i + 2]) in tri for i, x in enumerate(new) if orig_ok[i])
    novel = np.array([5, 5, 5, 2, 9, 9, 3, 7])  # unseen trigrams: backs off to tier 2 or 3
    for _ in range(5):
        check(novel, m.sample(novel, np.arange(novel.size), rng))


def test_samples_follow_the_proposal():
    rng = np.random.default_rng(2)
    seqs = _random_corpus(rng)
    m = BidirectionalTrigram.fit(seqs, n_symbols=12, k=1.0)
    s = seqs[0]
    q = m.proposal(s, np.array([1]))[0]
    draws = m.sample(s, np.full(20000, 1), rng)
    freq = np.bincount(draws, minlength=12) / draws.size
    np.testing.assert_allclose(freq, q, atol=0.015)
    assert m.sample(s, np.array([1]), rng, restrict=np.zeros(12, bool))[0] == -1


def test_bad_input_is_refused():
    with pytest.raises(ParameterError, match="k > 0"):
        BidirectionalTrigram.fit([np.array([1, 2])], n_symbols=4, k=0.0)
    with pytest.raises(ParameterError, match=r"\[1, 4\)"):
        BidirectionalTrigram.fit([np.array([1, 4])], n_symbols=4)
    with pytest.raises(ParameterError, match="no sequences"):
        BidirectionalTrigram.fit([], n_symbols=4)


def _two_choice_model():
    """Corpus [1 2 1] x3 and [1 3 1]: between 1 and 1 the model has seen 2 three times and 3 once.

    At position 1 of [1, 2, 1] the contexts are (0, 1) on the left and (1, 0) on the right;
    with k = 1 and V = 4: P_f(2) = (3 + 1) / (4 + 4), P_f(3) = (1 + 1) / 8, P_b the same, so
    q = (1/2)^2 : (1/4)^2 = 0.8 : 0.2 over the support {2, 3}.
    """
    seqs = [np.array([1, 2, 1])] * 3 + [np.array([1, 3, 1])]
    return BidirectionalTrigram.fit(seqs, n_symbols=4, k=1.0)


@pytest.mark.parametrize("temperature", [0.5, 2.0, 4.0])
def test_sampling_temperature_reshapes_the_proposal_as_q_to_the_one_over_t(temperature):
    m = _two_choice_model()
    seq = np.array([1, 2, 1])
    np.testing.assert_allclose(m.proposal(seq, np.array([1]))[0], [0.0, 0.0, 0.8, 0.2])
    want = np.array([0.0, 0.0, 0.8, 0.2]) ** (1.0 / temperature)
    want /= want.sum()  # T = 2: 2/3 : 1/3; T = 0.5: 16/17 : 1/17
    rng = np.random.default_rng(11)
    draws = m.sample(seq, np.full(20000, 1), rng, temperature=temperature)
    freq = np.bincount(draws, minlength=4) / draws.size
    np.testing.assert_allclose(freq, want, atol=0.015)


def test_temperature_above_one_flattens_the_draws():
    m = _two_choice_model()
    seq = np.array([1, 2, 1])
    share = {}
    for t in (0.5, 1.0, 3.0):
        draws = m.sample(seq, np.full(20000, 1), np.random.default_rng(12), temperature=t)
        share[t] = float(np.mean(draws == 3))  # the less likely symbol
    assert share[0.5] < share[1.0] < share[3.0] < 0.5


def test_tier2_support_is_symbols_after_the_left_or_before_the_right_neighbour():
    # corpus [1 2] and [5 3]: 2 was seen right after 1, 5 right before 3, nothing between 1 and 3
    m = BidirectionalTrigram.fit([np.array([1, 2]), np.array([5, 3])], n_symbols=7, k=0.5)
    seq = np.array([1, 4, 3])
    got = m.support(seq, np.array([1]))[0]
    want = np.zeros(7, bool)
    want[[2, 5]] = True
    np.testing.assert_array_equal(got, want)
    q = m.proposal(seq, np.array([1]))[0]
    assert q[2] > 0 and q[5] > 0 and q.sum() == pytest.approx(1.0)
    assert np.all(q[[0, 1, 3, 4, 6]] == 0)
    # the right side alone: before 3 only 5 was seen (nothing ever followed 6)
    only_right = m.support(np.array([6, 4, 3]), np.array([1]))[0]
    np.testing.assert_array_equal(np.flatnonzero(only_right), [5])


def test_boundary_id_inside_a_training_sequence_is_refused():
    with pytest.raises(ParameterError, match=r"\[1, 4\)"):
        BidirectionalTrigram.fit([np.array([1, 2]), np.array([2, 0, 3])], n_symbols=4)
    with pytest.raises(ParameterError, match=r"\[1, 4\)"):
        BidirectionalTrigram.fit([np.array([0])], n_symbols=4)
