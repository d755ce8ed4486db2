"""PhonemeEncoder against a dense float64 twin, padded batches, positions, bad input."""

from __future__ import annotations

import math

import pytest
import torch

from wavern.conditioning.config import EncoderConfig
from wavern.conditioning.encoder import PhonemeEncoder, global_mask_for, sinusoidal_positions
from wavern.errors import ParameterError

torch.set_num_threads(1)

CFG = EncoderConfig(n_symbols=12, d_model=16, n_layers=2, n_heads=2, window=4, ffn_channels=24, ffn_kernel=3,
                    dropout=0.0)


def _encoder(seed: int = 0, cfg: EncoderConfig = CFG) -> PhonemeEncoder:
    torch.manual_seed(seed)
    return PhonemeEncoder(cfg).eval()


# ----------------------------------------------------------------------------- dense twin
def _dense_longformer(attn, x, glob, window):
    """HF Longformer semantics with a full mask, float64, one sequence (N, D), no padding."""
    n, dim = x.shape
    h = attn.n_heads
    hd = dim // h

    def proj(lin):
        return (x @ lin.weight.double().T + lin.bias.double()).view(n, h, hd).transpose(0, 1)  # (h, N, hd)

    q, k, v = proj(attn.query), proj(attn.key), proj(attn.value)
    qg, kg, vg = proj(attn.query_global), proj(attn.key_global), proj(attn.value_global)
    i = torch.arange(n)
    allowed = ((i[:, None] - i[None, :]).abs() <= window // 2) | glob[None, :]  # local rows
    s = (q / math.sqrt(hd)) @ k.transpose(1, 2)
    out = torch.softmax(s.masked_fill(~allowed, -math.inf), -1) @ v  # (h, N, hd)
    sg = (qg / math.sqrt(hd)) @ kg.transpose(1, 2)  # global rows see every token
    out_g = torch.softmax(sg, -1) @ vg
    out = torch.where(glob[None, :, None], out_g, out)
    y = out.transpose(0, 1).reshape(n, dim)
    return y @ attn.out.weight.double().T + attn.out.bias.double()


def _ln(mod, x):
    return torch.nn.functional.layer_norm(x, mod.normalized_shape, mod.weight.double(), mod.bias.double(), mod.eps)


def _conv(conv, x):  # x (N, C) -> (N, C')
    return torch.nn.functional.conv1d(x.T[None], conv.weight.double(), conv.bias.double(),
                                      padding=conv.padding)[0].T


def _dense_encoder(enc: PhonemeEncoder, ids: torch.Tensor, is_global: torch.Tensor) -> torch.Tensor:
    """The encoder's documented computation, written out with a dense attention, float64."""
    n = ids.shape[0]
    d = enc.config.d_model
    glob = is_global.clone()
    glob[0] = True  # the sequence start is always global
    x = enc.embed.weight.double()[ids] + enc.global_embed.weight.double()[glob.long()]
    pos = torch.tensor([[math.sin(p / 10000 ** (2 * (c // 2) / d)) if c % 2 == 0 else
                         math.cos(p / 10000 ** (2 * (c // 2) / d)) for c in range(d)] for p in range(n)],
                       dtype=torch.float64)
    x = x + pos
    for layer in enc.layers:
        x = x + _dense_longformer(layer.mixer, _ln(layer.norm1, x), glob, enc.config.window)
        hid = torch.relu(_conv(layer.ffn.conv1, _ln(layer.norm2, x)))
        x = x + _conv(layer.ffn.conv2, hid)
    return _ln(enc.norm, x)


@pytest.mark.parametrize("n", [1, 3, 9, 23])
def test_encoder_matches_dense_twin(n):
    enc = _encoder(1)
    g = torch.Generator().manual_seed(n)
    ids = torch.randint(1, CFG.n_symbols, (n,), generator=g)
    is_global = torch.rand(n, generator=g) < 0.2
    got = enc(ids[None], is_global[None])[0].double()
    want = _dense_encoder(enc, ids, is_global)
    torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)


def test_padded_batch_equals_single_sequences():
    enc = _encoder(2)
    g = torch.Generator().manual_seed(5)
    lengths = [7, 13, 2]
    n = max(lengths)
    ids = torch.zeros(3, n, dtype=torch.long)
    glob = torch.zeros(3, n, dtype=torch.bool)
    pad = torch.ones(3, n, dtype=torch.bool)
    for b, ln in enumerate(lengths):
        ids[b, :ln] = torch.randint(1, CFG.n_symbols, (ln,), generator=g)
        glob[b, :ln] = torch.rand(ln, generator=g) < 0.3
        glob[b, ln:] = True  # padding that claims to be global is still padding
        pad[b, :ln] = False
    batched = enc(ids, glob, pad)
    for b, ln in enumerate(lengths):
        single = enc(ids[b:b + 1, :ln], glob[b:b + 1, :ln])
        torch.testing.assert_close(batched[b:b + 1, :ln], single, atol=1e-5, rtol=1e-5)
        assert torch.all(batched[b, ln:] == 0)


def test_global_mask_adds_sequence_start_and_drops_padding():
    is_global = torch.tensor([[False, True, False, True]])
    pad = torch.tensor([[False, False, False, True]])
    assert global_mask_for(is_global, pad).tolist() == [[True, True, False, False]]


def test_sinusoidal_positions_closed_form():
    table = sinusoidal_positions(50, 8)
    assert table.shape == (50, 8)
    assert table[7, 2].item() == pytest.approx(math.sin(7 / 10000 ** (2 / 8)), abs=1e-6)
    assert table[7, 3].item() == pytest.approx(math.cos(7 / 10000 ** (2 / 8)), abs=1e-6)


def test_positions_make_order_matter_and_long_sequences_encode():
    enc = _encoder(3)
    ids = torch.tensor([[3, 4, 5, 6]])
    a = enc(ids, torch.zeros_like(ids, dtype=torch.bool))
    b = enc(ids.flip(1), torch.zeros_like(ids, dtype=torch.bool)).flip(1)
    assert not torch.allclose(a, b, atol=1e-3)
    n = 700  # far longer than anything the window or a test "trained" on
    long = enc(torch.randint(1, CFG.n_symbols, (1, n)), torch.zeros(1, n, dtype=torch.bool))
    assert long.shape == (1, n, CFG.d_model) and bool(torch.isfinite(long).all())


@pytest.mark.parametrize("bad", [-1, CFG.n_symbols])
def test_out_of_table_ids_are_refused(bad):
    enc = _encoder()
    with pytest.raises(ParameterError, match=str(bad)):
        enc(torch.tensor([[1, bad]]), torch.zeros(1, 2, dtype=torch.bool))


def test_empty_sequence_is_refused():
    with pytest.raises(ParameterError, match="empty"):
        _encoder()(torch.zeros(1, 0, dtype=torch.long), torch.zeros(1, 0, dtype=torch.bool))


def test_config_is_strict():
    assert EncoderConfig.from_dict(CFG.to_dict()) == CFG
    with pytest.raises(ParameterError, match="unknown"):
        EncoderConfig.from_dict({**CFG.to_dict(), "n_layer": 3})
    with pytest.raises(ParameterError, match="window"):
        EncoderConfig(window=5)
    with pytest.raises(ParameterError, match="n_heads"):
        EncoderConfig(d_model=10, n_heads=3)
