"""Peer-attention fusion (REFERENCES §4) against a naive float64 twin; pruning; reference encoder."""

from __future__ import annotations

import pytest
import torch

from wavern.conditioning.fusion import PeerFusion, ReferenceEncoder, masked_mean
from wavern.errors import ParameterError

torch.set_num_threads(1)

IN = (6, 3, 5)
PEERS = (6, 3, 5, 4)
OUT = 6


def _fusion(seed: int = 0) -> PeerFusion:
    torch.manual_seed(seed)
    f = PeerFusion(IN, PEERS, OUT, peer_width=7, gate_threshold=0.1, names=("text", "spk", "ref"),
                   peer_names=("text", "spk", "ref", "extra"))
    with torch.no_grad():  # move off the symmetric initialisation so the twin is tested for real
        f.edge_logit.normal_()
        f.peer_logit.normal_()
    return f


def _inputs(seed: int = 1, b: int = 2, length: int = 5):
    g = torch.Generator().manual_seed(seed)
    inputs = [torch.randn(b, length, IN[0], generator=g), torch.randn(b, 1, IN[1], generator=g),
              torch.randn(b, 1, IN[2], generator=g)]
    peers = [torch.randn(b, c, generator=g) for c in PEERS]
    return inputs, peers


def _naive(f: PeerFusion, inputs, peers):
    """REFERENCES §4 written out per connection j and peer k, float64."""
    def lin(m, x):
        return x.double() @ m.weight.double().T + (m.bias.double() if m.bias is not None else 0.0)

    a_k = [lin(f.peer_proj[k], peers[k]) for k in range(len(peers))]
    total = 0.0
    for j, y in enumerate(inputs):
        w = torch.softmax(f.peer_logit[j].double(), 0)
        a = sum(w[k] * a_k[k] for k in range(len(peers)))
        att = torch.sigmoid(lin(f.attend[j], a))[:, None, :]
        term = torch.sigmoid(f.edge_logit[j].double()) * y.double() * att
        if isinstance(f.in_proj[j], torch.nn.Linear):
            term = lin(f.in_proj[j], term)
        total = total + term
    return total


def test_soft_fusion_matches_naive_twin():
    f = _fusion()
    inputs, peers = _inputs()
    got = f(inputs, peers)
    assert got.shape == (2, 5, OUT)
    torch.testing.assert_close(got.double(), _naive(f, inputs, peers), atol=1e-5, rtol=1e-5)


def test_initial_gates_are_one_half_and_weights_uniform():
    f = PeerFusion(IN, PEERS, OUT, peer_width=7)
    assert f.gates().shape == (3,) and torch.allclose(f.gates(), torch.full((3,), 0.5))
    w = f.peer_weights()
    assert w.shape == (3, 4) and torch.allclose(w, torch.full((3, 4), 0.25))
    table = f.connection_table()
    assert [row["input"] for row in table] == ["in0", "in1", "in2"]
    assert table[0]["peers"] == {"peer0": 0.25, "peer1": 0.25, "peer2": 0.25, "peer3": 0.25}


def test_attention_is_channelwise_per_connection():
    f = _fusion()
    inputs, peers = _inputs()
    # Scaling one channel of the text input scales exactly that channel's contribution.
    with torch.no_grad():
        f.edge_logit[1:] = -200.0  # only the text edge is open (gates underflow to 0)
    base = f(inputs, peers)
    inputs2 = [inputs[0].clone(), inputs[1], inputs[2]]
    inputs2[0][..., 2] *= 3.0
    diff = f(inputs2, peers) - base  # text in_proj is Identity (6 == OUT)
    torch.testing.assert_close(diff[..., 2], 2.0 * base[..., 2])
    torch.testing.assert_close(diff[..., [0, 1, 3, 4, 5]], torch.zeros(2, 5, 5))


def test_pruned_equals_soft_when_softmax_is_one_hot():
    f = _fusion(3)
    with torch.no_grad():
        f.peer_logit.copy_(torch.tensor([[200.0, 0, 0, 0], [0, 0, 200.0, 0], [0, 0, 0, 200.0]]))
        f.edge_logit.copy_(torch.tensor([0.3, -1.0, 2.0]))  # all gates above the threshold 0.1
    inputs, peers = _inputs(4)
    soft = f(inputs, peers)
    kept = f.prune()
    assert kept == {"text": "text", "spk": "ref", "ref": "extra"}
    assert f.pruned and f.peer_choice.tolist() == [0, 2, 3]
    assert torch.equal(f(inputs, peers), soft)


def test_prune_drops_weak_edges_and_keeps_equivalence_when_the_gate_is_zero():
    f = _fusion(5)
    with torch.no_grad():
        f.peer_logit.copy_(torch.tensor([[0, 200.0, 0, 0], [200.0, 0, 0, 0], [0, 0, 200.0, 0]]))
        f.edge_logit.copy_(torch.tensor([1.0, -200.0, 0.0]))  # the speaker edge's gate is 0
    inputs, peers = _inputs(6)
    soft = f(inputs, peers)
    kept = f.prune()
    assert kept["spk"] is None and f.edge_alive.tolist() == [1.0, 0.0, 1.0]
    torch.testing.assert_close(f(inputs, peers), soft, atol=0, rtol=0)
    assert f.gates()[1].item() == 0.0


def test_prune_with_soft_weights_changes_output_and_never_drops_every_edge():
    f = _fusion(7)
    inputs, peers = _inputs(8)
    soft = f(inputs, peers)
    with torch.no_grad():
        f.edge_logit.fill_(-10.0)  # every gate below threshold
    f.prune()
    assert int(f.edge_alive.sum()) == 1
    with torch.no_grad():
        f.edge_logit.fill_(0.0)
    assert not torch.allclose(f(inputs, peers), soft, atol=1e-4)
    with pytest.raises(ParameterError, match="gate_threshold"):
        f.prune(gate_threshold=1.5)


def test_prune_state_survives_state_dict():
    f = _fusion(9)
    f.prune()
    g = PeerFusion(IN, PEERS, OUT, peer_width=7, gate_threshold=0.1)
    g.load_state_dict(f.state_dict())
    inputs, peers = _inputs(10)
    torch.testing.assert_close(g(inputs, peers), f(inputs, peers))


def test_wrong_number_of_inputs_is_refused():
    f = _fusion()
    inputs, peers = _inputs()
    with pytest.raises(ParameterError, match="expected 3 inputs"):
        f(inputs[:2], peers)


def test_masked_mean_ignores_padding():
    x = torch.tensor([[[1.0], [3.0], [100.0]]])
    assert masked_mean(x, torch.tensor([[False, False, True]])).item() == 2.0
    assert masked_mean(x, None).item() == pytest.approx(104 / 3)


def test_reference_encoder_padding_null_and_present():
    torch.manual_seed(0)
    ref = ReferenceEncoder(4, 8, 2)
    with torch.no_grad():
        ref.null.normal_()
    g = torch.Generator().manual_seed(1)
    mel = torch.randn(2, 9, 4, generator=g)
    pad = torch.zeros(2, 9, dtype=torch.bool)
    pad[1, 6:] = True
    batched = ref(mel, pad)
    assert batched.shape == (2, 8)
    torch.testing.assert_close(batched[1:], ref(mel[1:, :6]), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(ref(None, batch_size=3), ref.null.expand(3, -1))
    mixed = ref(mel, pad, present=torch.tensor([True, False]))
    torch.testing.assert_close(mixed[0], batched[0])
    torch.testing.assert_close(mixed[1], ref.null)
    with pytest.raises(ParameterError, match="batch_size"):
        ref(None)
