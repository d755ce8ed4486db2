"""Sparse attention against dense float64 masked references (REFERENCES.md §2, §3)."""

import math

import pytest
import torch

from wavern.conditioning.attention import (
    LongformerSelfAttention,
    StridedSelfAttention,
    longformer_attention,
    strided_attention,
)
from wavern.errors import ParameterError

torch.set_num_threads(1)


# --- dense references: the full N x N mask, plain softmax attention ------------------------


def _softmax_attention(q, k, v, allow):
    """allow (..., N, M) bool; rows with no allowed key must not occur."""
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(s.masked_fill(~allow, -math.inf), dim=-1) @ v


def dense_longformer(q, k, v, q_g, k_g, v_g, window, global_mask, padding_mask):
    n = q.shape[2]
    i = torch.arange(n)
    is_global = global_mask & ~padding_mask
    band = (i[:, None] - i[None, :]).abs() <= window // 2
    allow = (band[None] | is_global[:, None, :]) & ~padding_mask[:, None, :]
    # padding rows see themselves only to stay finite; they are zeroed below
    allow = allow | (padding_mask[:, :, None] & torch.eye(n, dtype=torch.bool))
    allow_g = ~padding_mask[:, None, :] | torch.eye(n, dtype=torch.bool)
    local = _softmax_attention(q, k, v, allow[:, None])
    glob = _softmax_attention(q_g, k_g, v_g, allow_g[:, None])
    out = torch.where(is_global[:, None, :, None], glob, local)
    return out.masked_fill(padding_mask[:, None, :, None], 0.0)


def dense_strided(q, k, v, stride, causal, padding_mask):
    h, n = q.shape[1], q.shape[2]
    i = torch.arange(n)
    diff = i[:, None] - i[None, :]  # i - j
    if causal:
        local = (diff >= 0) & (diff < stride)
        strided = (diff >= 0) & (diff % stride == 0)
    else:
        local = diff.abs() < stride
        strided = diff % stride == 0
    n_local = (h + 1) // 2
    pattern = torch.stack([local] * n_local + [strided] * (h - n_local))  # (h, N, N)
    allow = pattern[None] & ~padding_mask[:, None, None, :]
    allow = allow | (padding_mask[:, None, :, None] & torch.eye(n, dtype=torch.bool))
    out = _softmax_attention(q, k, v, allow)
    return out.masked_fill(padding_mask[:, None, :, None], 0.0)


def _inputs(b, h, n, d, count=6, *, seed=0, grad=False):
    gen = torch.Generator().manual_seed(seed)
    return [
        torch.randn(b, h, n, d, dtype=torch.float64, generator=gen).requires_grad_(grad)
        for _ in range(count)
    ]


def _masks(b, n, lengths, n_global, *, seed=0):
    """Padding after each length; n_global random global tokens per row ('all' = every one)."""
    gen = torch.Generator().manual_seed(seed)
    padding = torch.arange(n)[None, :] >= torch.tensor(lengths)[:, None]
    if n_global == "all":
        return torch.ones(b, n, dtype=torch.bool), padding
    glob = torch.zeros(b, n, dtype=torch.bool)
    for row in range(b):
        glob[row, torch.randperm(n, generator=gen)[:n_global]] = True
    return glob, padding


def _peak_bytes(fn):
    """Peak bytes held by torch's CPU allocator while fn runs (allocations and frees, in order)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())
    held = peak = 0
    for e in events:
        held += e.nbytes()
        peak = max(peak, held)
    return peak


# --- Longformer ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n, window, lengths, n_global",
    [
        (50, 2, [50, 31, 7], 0),  # smallest window, padded batch
        (100, 16, [100, 93, 40], 1),
        (77, 10, [77, 60, 3], 5),  # N not a multiple of the window
        (130, 64, [130, 129, 1], "all"),  # every token global (a one-token row too)
        (40, 64, [40, 33, 12], 3),  # N shorter than the window
        (700, 512, [700, 517, 250], 4),
        (300, 512, [300, 200, 100], 2),  # N shorter than the largest window
    ],
)
def test_longformer_matches_dense_reference(n, window, lengths, n_global):
    xs = _inputs(3, 2, n, 8, seed=n + window)
    glob, padding = _masks(3, n, lengths, n_global, seed=window)
    got = longformer_attention(*xs, window=window, global_mask=glob, padding_mask=padding)
    want = dense_longformer(*xs, window, glob, padding)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_longformer_padding_anywhere_matches_dense_reference():
    xs = _inputs(2, 3, 150, 4, seed=4)
    gen = torch.Generator().manual_seed(4)
    padding = torch.rand(2, 150, generator=gen) < 0.3  # left, right and inside
    glob = torch.rand(2, 150, generator=gen) < 0.05
    got = longformer_attention(*xs, window=20, global_mask=glob, padding_mask=padding)
    want = dense_longformer(*xs, 20, glob, padding)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    got = strided_attention(*xs[:3], stride=6, causal=False, padding_mask=padding)
    want = dense_strided(*xs[:3], 6, False, padding)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_longformer_padding_global_is_padding():
    xs = _inputs(1, 2, 30, 4)
    glob, padding = _masks(1, 30, [25], 2)
    glob[0, 27] = True  # global and padding: padding wins
    got = longformer_attention(*xs, window=4, global_mask=glob, padding_mask=padding)
    glob_without = glob.clone()
    glob_without[0, 27] = False
    want = longformer_attention(*xs, window=4, global_mask=glob_without, padding_mask=padding)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert got[0, :, 25:].abs().max() == 0


def test_longformer_padded_batch_equals_single_runs():
    xs = _inputs(2, 2, 90, 4, seed=3)
    glob, padding = _masks(2, 90, [90, 61], 3, seed=3)
    batch = longformer_attention(*xs, window=20, global_mask=glob, padding_mask=padding)
    single = longformer_attention(
        *(x[1:2, :, :61] for x in xs), window=20, global_mask=glob[1:2, :61]
    )
    torch.testing.assert_close(batch[1:2, :, :61], single, rtol=1e-12, atol=1e-12)


def test_longformer_gradients_match_dense_reference():
    xs = _inputs(3, 2, 70, 4, seed=5, grad=True)
    glob, padding = _masks(3, 70, [70, 50, 9], 3, seed=5)
    up = torch.randn(3, 2, 70, 4, dtype=torch.float64)
    got = torch.autograd.grad(
        (longformer_attention(*xs, window=12, global_mask=glob, padding_mask=padding) * up).sum(),
        xs,
    )
    want = torch.autograd.grad((dense_longformer(*xs, 12, glob, padding) * up).sum(), xs)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-12)


def test_longformer_many_global_tokens_across_blocks_and_sequences_match_dense_reference():
    # every 4th token global: each sequence's global keys are seen from many query blocks, whose
    # gradients add up per sequence (batch x heads sequences)
    n = 300
    xs = _inputs(2, 3, n, 4, seed=9, grad=True)
    padding = torch.arange(n)[None, :] >= torch.tensor([n, 211])[:, None]
    glob = (torch.arange(n) % 4 == 1)[None, :].expand(2, n).clone()
    up = torch.randn(2, 3, n, 4, dtype=torch.float64)
    out = longformer_attention(*xs, window=6, global_mask=glob, padding_mask=padding)
    want = dense_longformer(*xs, 6, glob, padding)
    torch.testing.assert_close(out, want, rtol=1e-10, atol=1e-12)
    got = torch.autograd.grad((out * up).sum(), xs)
    ref = torch.autograd.grad((want * up).sum(), xs)
    for g, w in zip(got, ref):
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-12)


def test_a_window_or_stride_longer_than_the_text_costs_no_more_than_the_text():
    n = 50
    xs = _inputs(1, 2, n, 8)
    glob = torch.zeros(1, n, dtype=torch.bool)
    glob[0, 0] = True
    small = longformer_attention(*xs, window=2 * (n - 1), global_mask=glob)
    huge = longformer_attention(*xs, window=8192, global_mask=glob)
    torch.testing.assert_close(huge, small, rtol=0, atol=0)
    peak_small = _peak_bytes(lambda: longformer_attention(*xs, window=2 * (n - 1), global_mask=glob))
    assert _peak_bytes(lambda: longformer_attention(*xs, window=8192, global_mask=glob)) < 2 * peak_small
    q, k, v = xs[:3]
    torch.testing.assert_close(strided_attention(q, k, v, stride=4096), strided_attention(q, k, v, stride=n),
                               rtol=0, atol=0)
    peak_small = _peak_bytes(lambda: strided_attention(q, k, v, stride=n))
    assert _peak_bytes(lambda: strided_attention(q, k, v, stride=4096)) < 2 * peak_small


def test_longformer_gradcheck():
    xs = _inputs(2, 1, 21, 3, seed=7, grad=True)
    glob, padding = _masks(2, 21, [21, 15], 2, seed=7)
    assert torch.autograd.gradcheck(
        lambda *a: longformer_attention(*a, window=6, global_mask=glob, padding_mask=padding), xs
    )


def test_longformer_gradcheck_with_dropout():
    xs = _inputs(1, 1, 19, 3, seed=8, grad=True)
    glob, padding = _masks(1, 19, [17], 2, seed=8)

    def fn(*a):
        torch.manual_seed(0)  # the same dropout masks on every call
        return longformer_attention(
            *a, window=4, global_mask=glob, padding_mask=padding, dropout_p=0.3
        )

    assert torch.autograd.gradcheck(fn, xs)
    plain = longformer_attention(*xs, window=4, global_mask=glob, padding_mask=padding)
    assert (fn(*xs) - plain).abs().max() > 1e-3  # dropout did drop something


def test_longformer_without_global_tokens_gives_zero_global_gradients():
    xs = _inputs(2, 2, 33, 4, grad=True)
    out = longformer_attention(*xs, window=8)
    grads = torch.autograd.grad(out.sum(), xs)
    assert all(g is not None for g in grads)
    assert all(g.abs().max() == 0 for g in grads[3:])
    want = dense_longformer(*xs, 8, *_masks(2, 33, [33, 33], 0))
    torch.testing.assert_close(out, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n_global", [1, 5])  # 2 G h <= D: factored global rows; else direct
def test_longformer_module_matches_function(n_global):
    torch.manual_seed(0)
    layer = LongformerSelfAttention(16, 4, window=6).double()
    x = torch.randn(2, 25, 16, dtype=torch.float64, requires_grad=True)
    glob, padding = _masks(2, 25, [25, 18], n_global)

    def heads(t):
        return t.view(2, 25, 4, 4).transpose(1, 2)

    names = ("query", "key", "value", "query_global", "key_global", "value_global")
    projected = [heads(getattr(layer, name)(x)) for name in names]
    want = dense_longformer(*projected, 6, glob, padding)
    want = layer.out(want.transpose(1, 2).reshape(2, 25, 16))
    got = layer(x, global_mask=glob, padding_mask=padding)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    up = torch.randn_like(got)
    inputs = [x, *layer.parameters()]
    got_grads = torch.autograd.grad((got * up).sum(), inputs)
    want_grads = torch.autograd.grad((want * up).sum(), inputs)
    for g, w in zip(got_grads, want_grads):
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("n_global", [0, 1])
def test_longformer_module_gives_every_parameter_a_gradient(n_global):
    layer = LongformerSelfAttention(8, 2, window=4)
    glob = torch.zeros(1, 10, dtype=torch.bool)
    glob[0, :n_global] = True
    layer(torch.randn(1, 10, 8), global_mask=glob).sum().backward()
    names = [name for name, _ in layer.named_parameters()]
    zero = {"key_global.bias"} if n_global else {name for name in names if "global" in name}
    for name, p in layer.named_parameters():
        assert p.grad is not None, name
        assert (p.grad.abs().max() == 0) == (name in zero), name


def test_longformer_module_matches_hugging_face():
    modeling = pytest.importorskip("transformers.models.longformer.modeling_longformer")
    from transformers import LongformerConfig

    torch.manual_seed(0)
    layer = LongformerSelfAttention(32, 4, window=16)
    config = LongformerConfig(
        hidden_size=32, num_attention_heads=4, attention_window=[16], attention_probs_dropout_prob=0
    )
    hf = modeling.LongformerSelfAttention(config, layer_id=0)
    hf.load_state_dict({k: v for k, v in layer.state_dict().items() if not k.startswith("out.")})
    x = torch.randn(2, 64, 32)  # Hugging Face needs N to be a multiple of the window
    glob, padding = _masks(2, 64, [64, 45], 3, seed=1)
    hf_mask = torch.zeros(2, 64)  # its convention: -10000 padding, 0 local, +10000 global
    hf_mask[glob] = 10000.0
    hf_mask[padding] = -10000.0
    (want,) = hf(
        x,
        attention_mask=hf_mask,
        is_index_masked=hf_mask < 0,
        is_index_global_attn=hf_mask > 0,
        is_global_attn=True,
    )
    want = layer.out(want.masked_fill(padding[..., None], 0.0))  # its padding rows are not 0
    got = layer(x, global_mask=glob, padding_mask=padding)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_longformer_half_precision_inputs_are_attended_in_float32():
    xs = [x.bfloat16().requires_grad_() for x in _inputs(2, 2, 40, 8)]
    glob, padding = _masks(2, 40, [40, 30], 2)
    out = longformer_attention(*xs, window=8, global_mask=glob, padding_mask=padding)
    assert out.dtype == torch.bfloat16
    want = dense_longformer(*(x.double() for x in xs), 8, glob, padding)
    torch.testing.assert_close(out.double(), want, rtol=2e-2, atol=2e-2)  # bf16 rounding of out
    grads = torch.autograd.grad(out.float().sum(), xs)
    assert all(g.dtype == torch.bfloat16 and torch.isfinite(g).all() for g in grads)


def test_longformer_allocates_no_n_by_n_tensor():
    n, window = 16384, 32
    xs = [torch.randn(1, 1, n, 8, requires_grad=True) for _ in range(6)]
    glob = torch.zeros(1, n, dtype=torch.bool)
    glob[0, [0, 5000, 9999]] = True

    def run(m):
        parts = (x[:, :, :m] for x in xs)
        longformer_attention(*parts, window=window, global_mask=glob[:, :m]).sum().backward()

    peak = _peak_bytes(lambda: run(n))
    assert peak < n * n / 16  # a dense bool mask alone would take n * n bytes
    assert peak < 6 * _peak_bytes(lambda: run(n // 4))  # linear (4x), not quadratic (16x)


def test_longformer_rejects_bad_arguments():
    xs = _inputs(1, 1, 8, 2)
    with pytest.raises(ParameterError, match="even"):
        longformer_attention(*xs, window=3)
    with pytest.raises(ParameterError, match="even"):
        longformer_attention(*xs, window=0)
    with pytest.raises(ParameterError, match="even"):
        longformer_attention(*xs, window=4.0)
    for p in (1.0, -0.1, float("nan")):
        with pytest.raises(ParameterError, match="dropout_p"):
            longformer_attention(*xs, window=2, dropout_p=p)
    with pytest.raises(ParameterError, match="global_mask"):
        longformer_attention(*xs, window=2, global_mask=torch.zeros(1, 9, dtype=torch.bool))
    with pytest.raises(ParameterError, match="padding_mask"):
        longformer_attention(*xs, window=2, padding_mask=torch.zeros(1, 8))
    with pytest.raises(ParameterError, match="differ"):
        longformer_attention(*xs[:5], xs[5][..., :1], window=2)
    with pytest.raises(ParameterError, match="multiple"):
        LongformerSelfAttention(10, 3, window=4)
    with pytest.raises(ParameterError, match=r"\(B, N, 8\)"):
        LongformerSelfAttention(8, 2, window=4)(torch.randn(1, 5, 6))


# --- strided --------------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(
    "n, heads, stride, lengths",
    [
        (64, 2, 8, [64, 64]),
        (70, 4, 8, [70, 51]),  # N not a multiple of the stride, padding
        (45, 3, 5, [45, 20]),  # odd number of heads: two local, one strided
        (30, 1, 4, [30, 30]),  # one head: local only
        (40, 2, 1, [40, 33]),  # stride 1: local sees itself, strided sees everything
        (20, 2, 32, [20, 9]),  # stride longer than N
    ],
)
def test_strided_matches_dense_reference(n, heads, stride, lengths, causal):
    q, k, v = _inputs(2, heads, n, 8, 3, seed=n + stride)
    padding = torch.arange(n)[None, :] >= torch.tensor(lengths)[:, None]
    got = strided_attention(q, k, v, stride=stride, causal=causal, padding_mask=padding)
    want = dense_strided(q, k, v, stride, causal, padding)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("causal", [True, False])
def test_strided_gradcheck(causal):
    xs = _inputs(2, 2, 17, 3, 3, seed=9, grad=True)
    padding = torch.arange(17)[None, :] >= torch.tensor([17, 12])[:, None]
    assert torch.autograd.gradcheck(
        lambda *a: strided_attention(*a, stride=4, causal=causal, padding_mask=padding), xs
    )


def test_strided_gradients_match_dense_reference():
    xs = _inputs(2, 4, 50, 4, 3, seed=11, grad=True)
    padding = torch.arange(50)[None, :] >= torch.tensor([50, 37])[:, None]
    up = torch.randn(2, 4, 50, 4, dtype=torch.float64)
    for causal in (True, False):
        got = strided_attention(*xs, stride=7, causal=causal, padding_mask=padding)
        want = dense_strided(*xs, 7, causal, padding)
        got_grads = torch.autograd.grad((got * up).sum(), xs)
        want_grads = torch.autograd.grad((want * up).sum(), xs)
        for g, w in zip(got_grads, want_grads):
            torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-12)


def test_strided_module_matches_function():
    torch.manual_seed(0)
    layer = StridedSelfAttention(12, 3, stride=4, causal=False).double()
    x = torch.randn(2, 23, 12, dtype=torch.float64)
    padding = torch.arange(23)[None, :] >= torch.tensor([23, 14])[:, None]

    def heads(t):
        return t.view(2, 23, 3, 4).transpose(1, 2)

    q, k, v = (heads(getattr(layer, name)(x)) for name in ("query", "key", "value"))
    want = layer.out(dense_strided(q, k, v, 4, False, padding).transpose(1, 2).reshape(2, 23, 12))
    torch.testing.assert_close(layer(x, padding_mask=padding), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("causal", [True, False])
def test_strided_allocates_no_n_by_n_tensor(causal):
    n, stride = 16384, 128
    xs = [torch.randn(1, 2, n, 8, requires_grad=True) for _ in range(3)]

    def run(m):
        strided_attention(*(x[:, :, :m] for x in xs), stride=stride, causal=causal).sum().backward()

    assert _peak_bytes(lambda: run(n)) < n * n / 16


def test_strided_rejects_bad_arguments():
    q, k, v = _inputs(1, 2, 8, 2, 3)
    with pytest.raises(ParameterError, match="stride"):
        strided_attention(q, k, v, stride=0)
    with pytest.raises(ParameterError, match="stride"):
        strided_attention(q, k, v, stride=2.5)
    with pytest.raises(ParameterError, match="multiple"):
        StridedSelfAttention(10, 4, stride=3)
