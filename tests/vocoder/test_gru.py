"""gru_sequence (hand-written backward) against torch.nn.GRU: values and every gradient."""

from __future__ import annotations

import pytest
import torch

from wavern.vocoder.gru import gru_sequence

torch.set_num_threads(1)


def _reference(n=40, b=3, i=6, h=8, seed=0):
    torch.manual_seed(seed)
    gru = torch.nn.GRU(i, h)
    with torch.no_grad():
        gru.weight_hh_l0.mul_(4.0)  # saturating gates: exercises every term of the backward
    x = torch.randn(n, b, i, requires_grad=True)
    h0 = torch.randn(b, h, requires_grad=True)
    weight = torch.randn(n, b, h)
    return gru, x, h0, weight


def test_values_and_gradients_match_nn_gru():
    gru, x, h0, weight = _reference()
    out, _ = gru(x, h0[None])
    (out * weight).sum().backward()
    ref = {"x": x.grad.clone(), "h0": h0.grad.clone(), **{k: p.grad.clone() for k, p in gru.named_parameters()}}
    x.grad = h0.grad = None
    gru.zero_grad()
    gi = x @ gru.weight_ih_l0.T + gru.bias_ih_l0  # the input term the caller precomputes
    got_out = gru_sequence(gi, gru.weight_hh_l0, gru.bias_hh_l0, h0)
    torch.testing.assert_close(got_out, out, atol=1e-6, rtol=0)
    (got_out * weight).sum().backward()
    got = {"x": x.grad, "h0": h0.grad, **{k: p.grad for k, p in gru.named_parameters()}}
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], atol=1e-5, rtol=1e-5, msg=k)


def test_a_second_backward_through_the_same_graph_gives_the_same_gradients():
    gru, x, h0, weight = _reference()
    gi = x @ gru.weight_ih_l0.T + gru.bias_ih_l0
    loss = (gru_sequence(gi, gru.weight_hh_l0, gru.bias_hh_l0, h0) * weight).sum()
    first = torch.autograd.grad(loss, [x, h0, gru.weight_hh_l0], retain_graph=True)
    second = torch.autograd.grad(loss, [x, h0, gru.weight_hh_l0])  # raised: a saved tensor was changed in place
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_bfloat16_products_stay_close():
    gru, x, h0, weight = _reference(seed=1)
    gi = (x @ gru.weight_ih_l0.T + gru.bias_ih_l0).detach()
    ref = gru_sequence(gi, gru.weight_hh_l0, gru.bias_hh_l0, h0)
    low = gru_sequence(gi, gru.weight_hh_l0, gru.bias_hh_l0, h0, matmul_dtype=torch.bfloat16)
    assert low.dtype == torch.float32  # the state itself stays float32
    err = (low - ref).abs().max().item()
    assert 0 < err < 0.05


def test_default_initial_state_is_zero_and_shapes_are_checked():
    gru, x, _, _ = _reference(seed=2)
    gi = x @ gru.weight_ih_l0.T + gru.bias_ih_l0
    out, _ = gru(x)
    torch.testing.assert_close(gru_sequence(gi, gru.weight_hh_l0, gru.bias_hh_l0), out, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="disagree"):
        gru_sequence(gi[..., :-1], gru.weight_hh_l0, gru.bias_hh_l0)
