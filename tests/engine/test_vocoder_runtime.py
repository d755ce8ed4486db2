"""The vocoder runtime against the float64 twin (naive.py) and the torch reference loop.

Random small vocoders (H = 32) keep this fast; the peaked output layers make near-ties between
classes rare, so independent float implementations draw the same samples for thousands of steps.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from wavern.engine import kernels as K
from wavern.engine.condnet import conv1d
from wavern.engine.vocoder import Vocoder, crossfade_segments, fold_frame_inputs, lane_split
from wavern.errors import ParameterError, VoiceFileError
from wavern.vocoder.format import BlockSparse, save_vocoder_tensors


def _load_naive():
    spec = importlib.util.spec_from_file_location("wavern_engine_tests_naive", Path(__file__).with_name("naive.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


naive = _load_naive()


@pytest.fixture(scope="module")
def small():
    dense, sparse = naive.random_vocoder(H=32, C=8, cond_blocks=2, block=(16, 4), density=0.5, seed=11)
    return dense, sparse, Vocoder(dense, sparse, cond_blocks=2)


def _bytes(samples: np.ndarray) -> np.ndarray:
    u = samples.astype(np.int64) + 32768
    return np.stack([u >> 8, u & 255], axis=1)


def test_conv1d_matches_explicit_taps():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((9, 6)).astype(np.float32)
    for k in (1, 3, 5):
        w = rng.standard_normal((4, 6, k)).astype(np.float32)
        b = rng.standard_normal(4).astype(np.float32)
        np.testing.assert_allclose(conv1d(x, w, b), naive.conv1d(x, w, b), rtol=1e-5, atol=1e-5)


def test_condnet_matches_twin_and_torch(small):
    dense, _, voc = small
    mel = naive.random_mel(12, seed=3)
    np.testing.assert_allclose(voc.cond(mel), naive.condnet(mel, dense, 2), rtol=1e-4, atol=1e-4)
    torch = pytest.importorskip("torch")
    conv_in = torch.nn.Conv1d(80, 8, 5, padding=2)
    conv_in.weight.data[:] = torch.from_numpy(dense["cond.conv_in.weight"])
    conv_in.bias.data[:] = torch.from_numpy(dense["cond.conv_in.bias"])
    with torch.no_grad():
        x = conv_in(torch.from_numpy(mel).T[None])
        for i in range(2):
            c1 = torch.nn.Conv1d(8, 8, 3, padding=1)
            c2 = torch.nn.Conv1d(8, 8, 1)
            for conv, name in ((c1, "conv1"), (c2, "conv2")):
                conv.weight.data[:] = torch.from_numpy(dense[f"cond.blocks.{i}.{name}.weight"])
                conv.bias.data[:] = torch.from_numpy(dense[f"cond.blocks.{i}.{name}.bias"])
            x = x + c2(torch.relu(c1(torch.relu(x))))
    np.testing.assert_allclose(voc.cond(mel), x[0].T.numpy(), rtol=1e-4, atol=1e-4)


def test_condnet_rejects_bad_input(small):
    _, _, voc = small
    with pytest.raises(ParameterError, match="80"):
        voc.cond(np.zeros((4, 79), np.float32))
    with pytest.raises(ParameterError, match="NaN"):
        voc.cond(np.full((4, 80), np.nan, np.float32))


@pytest.mark.parametrize("block", [(16, 4), (4, 4), (16, 1)])
def test_generator_matches_float64_twin(block):
    """Teacher-forced: the twin is fed the engine's samples, so every step's logits compare, and
    its own draws must equal the engine's wherever the CDF is not within 1e-5 of a tie."""
    dense, sparse = naive.random_vocoder(H=32, C=8, cond_blocks=1, block=block, density=0.5, seed=5)
    voc = Vocoder(dense, sparse, cond_blocks=1)
    mel = naive.random_mel(8, seed=1)
    n = 8 * 256
    logits = np.zeros((n, 2, 256), np.float32)
    out = voc.generate(voc.frame_inputs(mel), voc.new_state(seed=9), n, temperature=0.9, logits_out=logits)
    drawn = _bytes(out)
    u = naive.uniforms(9, n)
    _, twin_draws, twin_logits = naive.generate(dense, sparse, mel, u, cond_blocks=1, temperature=0.9, forced=drawn)
    np.testing.assert_allclose(logits, twin_logits, rtol=0, atol=2e-4 * np.abs(twin_logits).max())
    differ = np.argwhere(twin_draws != drawn)
    for t, j in differ:
        assert naive.tie_margin(twin_logits[t, j], u[t, j], 0.9) < 1e-5, (t, j)
    assert len(differ) <= 2
    assert len(np.unique(out)) > 50  # not stuck on one value


def test_generator_free_run_equals_twin(small):
    dense, sparse, voc = small
    mel = naive.random_mel(8, seed=2)
    n = 8 * 256
    out = voc.generate(voc.frame_inputs(mel), voc.new_state(seed=4), n)
    twin, _, _ = naive.generate(dense, sparse, mel, naive.uniforms(4, n), cond_blocks=2)
    np.testing.assert_array_equal(out, twin)


def test_chunked_generation_equals_one_call(small):
    _, _, voc = small
    gi = voc.frame_inputs(naive.random_mel(10, seed=5))
    n = 10 * 256
    one = voc.generate(gi, voc.new_state(seed=1), n)
    st = voc.new_state(seed=1)
    parts, rng = [], np.random.default_rng(0)
    while st.position < n:
        k = int(min(rng.integers(1, 700), n - st.position))
        first = st.position // 256  # a streaming caller may drop the frames already played
        parts.append(voc.generate(gi[first:], st, k, frame0=first))
    np.testing.assert_array_equal(np.concatenate(parts), one)


@pytest.mark.parametrize("B", [1, 5, 24, 35])
def test_batch_equals_single_streams(small, B):
    """One stream (1: the one-stream kernel), stream-major only (5: four through the
    shared-weight path, one through the matvec), all lanes (24), lanes + stream-major (35 = 32
    + 3): every stream equals its own single run, across a chunk boundary, with its logits and
    final state."""
    _, _, voc = small
    frames = 3
    gis = np.stack([voc.frame_inputs(naive.random_mel(frames, seed=s)) for s in range(B)])
    rngs = K.rng_states(99, B)
    n = frames * 256
    st = voc.new_batch_state(rngs)
    assert st.n_lanes == lane_split(B)
    first = voc.generate_batch(gis, st, 300)
    rest = voc.generate_batch(gis, st, n - 300)
    batch = np.concatenate([first, rest], axis=1)
    check = range(B) if B <= 5 else [s for s in (0, 17, 23, 31, 32, 34) if s < B]  # lanes at both ends, the rest
    logits_b = np.zeros((B, n, 2, 256), np.float32)
    voc.generate_batch(gis, voc.new_batch_state(rngs), n, logits_out=logits_b)
    for s in check:
        lg = np.zeros((n, 2, 256), np.float32)
        single_state = voc.new_state(rng=rngs[s])
        single = voc.generate(gis[s], single_state, n, logits_out=lg)
        np.testing.assert_array_equal(batch[s], single)
        np.testing.assert_array_equal(logits_b[s], lg)
        np.testing.assert_array_equal(st.h[s], single_state.h)
        np.testing.assert_array_equal(st.prev[s], single_state.prev)


@pytest.mark.parametrize("kind", [0, 1, 2, 3])
@pytest.mark.parametrize("B", [24, 6])
def test_batch_equals_single_streams_for_every_block_shape(kind, B):
    """Each engine layout (8x4, 4x4, 8x1, 16x4: chosen at load by the pruning pattern and the
    CPU's vectors), forced; in lanes (24) and stream-major (6)."""
    from wavern.engine.vocoder import to_engine

    dense, sparse = naive.random_vocoder(H=32, C=8, cond_blocks=1, block=(16, 4), density=0.5, seed=7)
    voc = Vocoder(dense, sparse, cond_blocks=1)
    net = list(voc._net)
    for i, name in zip((2, 3, 5, 7, 9), ("gru.weight_hh", "O1", "O2", "O3", "O4")):
        net[i] = to_engine(sparse[name], kind=kind)
    voc._net = tuple(net)
    n = 2 * 256
    gis = np.stack([voc.frame_inputs(naive.random_mel(2, seed=s)) for s in range(B)])
    rngs = K.rng_states(3, B)
    batch = voc.generate_batch(gis, voc.new_batch_state(rngs), n, temperature=0.8)
    for s in range(B):
        np.testing.assert_array_equal(batch[s], voc.generate(gis[s], voc.new_state(rng=rngs[s]), n, temperature=0.8))


def test_the_one_stream_kernels_take_sparse_output_layers_flat_with_the_same_samples():
    """``Vocoder.stream_net``: matrices averaging under ``FLAT_BELOW`` blocks per block column go
    flat (``kernels.flat``), the others keep their block columns; the samples are those of the
    column layout, and a replaced ``_net`` is taken up."""
    from wavern.engine.vocoder import FLAT_BELOW

    dense, sparse = naive.random_vocoder(H=64, C=8, cond_blocks=1, block=(16, 4), density=0.3, seed=5)
    voc = Vocoder(dense, sparse, cond_blocks=1)
    net = voc._net
    for i in (2, 3, 5, 7, 9):
        per_col = net[i][1].shape[0] / (net[i][2].shape[0] - 1)
        assert (voc.stream_net[i][3] >= K.FLAT) == (per_col < FLAT_BELOW), (i, per_col)
    assert voc.stream_net[2][3] < K.FLAT and voc.stream_net[3][3] >= K.FLAT  # W_hh by column, O1 flat
    gi = voc.frame_inputs(naive.random_mel(3, seed=2))
    flat = voc.generate(gi, voc.new_state(seed=4), 3 * 256)
    columns = tuple(list(net))  # stream_net forced to the block columns
    voc._net = voc._stream_net_of = voc._stream_net = columns
    np.testing.assert_array_equal(voc.generate(gi, voc.new_state(seed=4), 3 * 256), flat)
    voc._net = net  # another tuple: stream_net is made again
    assert voc.stream_net[3][3] >= K.FLAT


def test_lane_split():
    assert [lane_split(b) for b in (1, 8, 16, 23, 24, 31, 35, 40)] == [0, 0, 0, 0, 24, 24, 32, 40]


def test_crossfade_matches_twin():
    rng = np.random.default_rng(0)
    for stride, overlap in ((10, 4), (7, 3), (5, 0), (6, 6)):
        audio = rng.integers(-30000, 30000, (4, stride + overlap)).astype(np.int16)
        length = 4 * stride - 2
        np.testing.assert_array_equal(crossfade_segments(audio, stride, overlap, length),
                                      naive.crossfade(audio, stride, overlap, length))


def test_folded_render_is_a_batch_of_segments_crossfaded(small):
    _, _, voc = small
    mel = naive.random_mel(11, seed=6)
    S, O = 4, 2
    gi = voc.frame_inputs(mel)
    segs = fold_frame_inputs(gi, S, O)
    assert segs.shape == (3, S + O, gi.shape[1])
    np.testing.assert_array_equal(segs[1], gi[S - O:2 * S])
    rngs = K.rng_states(5, 3)
    singles = np.stack([voc.generate(np.ascontiguousarray(segs[i]), voc.new_state(rng=rngs[i]), (S + O) * 256)
                        for i in range(3)])
    expect = naive.crossfade(singles, S * 256, O * 256, 11 * 256)
    for threads in (1, 2):
        np.testing.assert_array_equal(voc.render(mel, seed=5, fold_frames=S, overlap_frames=O, threads=threads),
                                      expect)


def test_render_many_gives_each_item_what_it_gives_alone(small, monkeypatch):
    """Items of 0..80 frames (S = 8, O = 2): empty, one short stream run alone (2 frames), one
    riding in the batch padded (5), folded ones; 27 streams = 24 in lanes + 3 stream-major, also
    split over threads and over several calls. Every item's bytes equal its render alone,
    whatever it is batched with."""
    _, _, voc = small
    lengths = [0, 2, 5, 9, 13, 30, 64, 80]
    gis = [voc.frame_inputs(naive.random_mel(max(T, 1), seed=40 + T))[:T] for T in lengths]
    seeds = [100 + i for i in range(len(gis))]
    kw = dict(fold_frames=8, overlap_frames=2, temperature=0.9)
    alone = [voc.render_frame_inputs(g, seed=s, **kw) for g, s in zip(gis, seeds)]
    for g, a in zip(gis, alone):
        assert a.shape == (g.shape[0] * 256,)
    calls = []
    real = voc.generate_batch
    monkeypatch.setattr(voc, "generate_batch", lambda gi, st, n, **k: calls.append(gi.shape[0]) or real(gi, st, n, **k))
    for order, extra in (([0, 1, 2, 3, 4, 5, 6, 7], {}), ([7, 2, 5], {"threads": 2}),
                         ([6, 1, 3, 7], {"max_streams": 5})):
        calls.clear()
        got = voc.render_many([gis[i] for i in order], [seeds[i] for i in order], **kw, **extra)
        for i, g in zip(order, got):
            np.testing.assert_array_equal(g, alone[i])
        if not extra:
            assert calls == [27]  # 1 + 2 + 2 + 4 + 8 + 10 streams, one batch (the 2-frame item alone)
        elif "max_streams" in extra:
            assert max(calls) <= 5 and sum(calls) == 8 + 2 + 10
    unfolded = voc.render_many(gis[1:4], seeds[1:4], fold_frames=None)
    for g, s, u in zip(gis[1:4], seeds[1:4], unfolded):
        np.testing.assert_array_equal(u, voc.generate(g, voc.new_state(seed=s), g.shape[0] * 256))
    with pytest.raises(ParameterError, match="one seed per item"):
        voc.render_many(gis[:2], seeds[:1])


def test_unfolded_render_is_one_stream(small):
    _, _, voc = small
    mel = naive.random_mel(3, seed=7)
    one = voc.generate(voc.frame_inputs(mel), voc.new_state(seed=8), 3 * 256)
    np.testing.assert_array_equal(voc.render(mel, seed=8, fold_frames=None), one)
    np.testing.assert_array_equal(voc.render(mel, seed=8, fold_frames=40), one)


def test_generate_validates(small):
    _, _, voc = small
    gi = voc.frame_inputs(naive.random_mel(2))
    st = voc.new_state()
    with pytest.raises(ParameterError, match="need frames 0..2"):
        voc.generate(gi, st, 3 * 256)
    with pytest.raises(ParameterError, match="temperature"):
        voc.generate(gi, st, 10, temperature=-1)
    with pytest.raises(ParameterError, match="float32"):
        voc.generate(gi.astype(np.float64), st, 10)
    with pytest.raises(ParameterError, match="out"):
        voc.generate(gi, st, 10, out=np.zeros(9, np.int16))
    assert st.position == 0


def test_file_round_trip_and_strict_loading(tmp_path, small):
    dense, sparse, voc = small
    path = tmp_path / "vocoder.safetensors"
    save_vocoder_tensors(path, dense, sparse, dtype=np.float32)
    loaded = Vocoder.load(path, cond_blocks=2, hidden_size=32, cond_channels=8)
    mel = naive.random_mel(2)
    np.testing.assert_array_equal(loaded.render(mel, seed=3), voc.render(mel, seed=3))
    with pytest.raises(VoiceFileError, match="hidden_size is 64"):
        Vocoder.load(path, cond_blocks=2, hidden_size=64)
    bad = dict(dense)
    bad["gru.weight_ih"] = dense["gru.weight_ih"].copy()
    bad["gru.weight_ih"][0, 2] = 0.5
    with pytest.raises(VoiceFileError, match="must be 0"):
        Vocoder(bad, sparse, cond_blocks=2)
    wrong = dict(sparse)
    wrong["O2"] = BlockSparse.from_dense(np.ones((128, 16), np.float32), (16, 4))
    with pytest.raises(VoiceFileError, match="O2"):
        Vocoder(dense, wrong, cond_blocks=2)


# ---- the same bytes whatever the process, the buffers' alignment or the mel window ------------------

def _misaligned(a: np.ndarray, offset: int) -> np.ndarray:
    """A copy of ``a`` whose data starts ``offset`` bytes past a 64-byte boundary."""
    buf = np.empty(a.nbytes + 128, np.uint8)
    start = (-buf.ctypes.data) % 64 + offset
    out = buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    assert out.ctypes.data % 64 == offset
    return out


def test_generation_does_not_depend_on_buffer_alignment(small):
    _, _, voc = small
    mel = naive.random_mel(6, seed=8)
    n = 6 * 256
    gi = voc.frame_inputs(mel)
    ref = voc.generate(gi, voc.new_state(seed=2), n)
    gis = np.stack([gi] * 27)  # 24 in lanes, 3 stream-major
    ref_b = voc.generate_batch(gis, voc.new_batch_state(K.rng_states(2, 27)), n)
    for off in (4, 8, 20, 36):
        np.testing.assert_array_equal(voc.frame_inputs(_misaligned(mel, off)), gi)
        st = voc.new_state(seed=2)
        st.h, st.work = _misaligned(st.h, off), _misaligned(st.work, off)
        np.testing.assert_array_equal(voc.generate(_misaligned(gi, off), st, n), ref)
        bst = voc.new_batch_state(K.rng_states(2, 27))
        for name in ("h_lanes", "h_streams", "work_lanes", "work_streams"):
            setattr(bst, name, _misaligned(getattr(bst, name), off))
        np.testing.assert_array_equal(voc.generate_batch(_misaligned(gis, off), bst, n), ref_b)


def test_frame_inputs_of_a_window_equal_the_whole_mels_rows(small):
    """Row t depends only on its receptive field (2 + cond_blocks frames each side), exactly,
    for the conditioning net (one fixed-order forward, no BLAS) and the frame inputs built on it."""
    _, _, voc = small
    mel = naive.random_mel(50, seed=9)
    whole = voc.frame_inputs(mel)
    cond = voc.cond(mel)
    R = 2 + voc.cond_blocks
    for lo, hi in ((0, 20), (7, 31), (13, 50), (20, 29)):
        part = voc.frame_inputs(mel[lo:hi])
        a, z = (lo + R if lo else 0), (hi - R if hi < 50 else 50)
        np.testing.assert_array_equal(part[a - lo:z - lo], whole[a:z])
        np.testing.assert_array_equal(voc.cond(mel[lo:hi])[a - lo:z - lo], cond[a:z])
    np.testing.assert_allclose(whole, voc.cond(mel) @ voc._proj[0].reshape(voc.cond_channels, -1) + voc._proj[1],
                               rtol=1e-5, atol=1e-5)


_PROBE = """
import hashlib, sys
import numpy as np
pad = [np.empty(n, np.uint8) for n in {pads}]  # moves where numpy puts every later buffer
sys.path.insert(0, {here!r})
import naive
from wavern.engine import kernels as K
from wavern.engine.vocoder import Vocoder
dense, sparse = naive.random_vocoder(H=32, C=64, cond_blocks=2, block=(16, 4), density=0.5, seed=21)
voc = Vocoder(dense, sparse, cond_blocks=2)
mel = naive.random_mel(160, seed=3)
gi = voc.frame_inputs(mel)
audio = voc.render(mel, seed=5, fold_frames=16, overlap_frames=2)
print(hashlib.sha256(voc.cond(mel).tobytes() + gi.tobytes() + audio.tobytes()).hexdigest())
"""


def test_same_seed_same_bytes_in_other_processes():
    """engine issue #4 / render issue #9: a fresh process with other BLAS threads and other
    buffer addresses gives the same frame inputs and audio, byte for byte. (Before frame_inputs
    had its own fixed-order products, numpy's BLAS rounded the conditioning differently with 1
    and 2 threads, so this failed on a 2-core machine, and long renders eventually drew another
    sample and diverged; the vocoder kernels themselves never depended on alignment.)"""
    here = str(Path(__file__).parent)
    digests = set()
    for threads, pads in (("1", [1]), ("2", [3, 4099, 77]), ("2", [50000, 13])):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
        res = subprocess.run([sys.executable, "-c", _PROBE.format(pads=pads, here=here)], capture_output=True,
                             text=True, env=env, timeout=300)
        assert res.returncode == 0, res.stderr[-2000:]
        digests.add(res.stdout.strip().splitlines()[-1])
    assert len(digests) == 1, digests


# ---- the torch reference (wavern.vocoder) -------------------------------------------------------

def _torch_model(seed: int, lpc_order: int = 0, excitation: str = "linear", ltp: bool = False,
                 ltp_input: bool = False, taps: int = 1, phase: int = 0):
    torch = pytest.importorskip("torch")
    try:
        from wavern.vocoder.config import VocoderConfig
        from wavern.vocoder.model import WaveRNN
    except ImportError as e:  # the torch model is another part of the project
        pytest.skip(f"wavern.vocoder.model not importable: {e}")
    torch.manual_seed(seed)
    cfg = VocoderConfig(hidden_size=64, cond_channels=16, cond_blocks=1, block_rows=16, block_cols=4,
                        lpc_order=lpc_order, lpc_prediction_input=False, excitation=excitation,
                        pitch=ltp, ltp=ltp, ltp_input=ltp_input,
                        ltp_input_taps=taps, phase_input=phase)
    model = WaveRNN(cfg).eval()
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        # prune some blocks (as training would) and widen the heads so the softmaxes are peaked
        for name in ("gru.weight_hh_l0", "O1.weight", "O2.weight", "O3.weight", "O4.weight"):
            w = model.get_parameter(name)
            keep = rng.random((w.shape[0] // 16, w.shape[1] // 4)) < 0.5
            w.mul_(torch.from_numpy(np.kron(keep, np.ones((16, 4)))).float())
        model.gru.weight_hh_l0.mul_(2.0)
        model.O2.weight.mul_(30.0)
        model.O4.weight.mul_(30.0)
    return torch, cfg, model


def _export(cfg, model, path):
    """Write ``model`` as a vocoder file; return the torch model to compare with (same weights)."""
    try:
        from wavern.vocoder.export import export_vocoder, load_vocoder
    except ImportError:
        export_vocoder = None
    if export_vocoder is not None:  # the real path: float16 file, torch reloaded from the same file
        export_vocoder(model, path)
        return load_vocoder(path, cfg).eval()
    # until wavern.vocoder.export exists: the file format of docs/ARCHITECTURE.md by hand
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    dense = {k: v for k, v in sd.items() if k.startswith("cond.")}
    dense["gru.weight_ih"] = model.masked_weight_ih().detach().numpy()
    dense["gru.bias_ih"], dense["gru.bias_hh"] = sd["gru.bias_ih_l0"], sd["gru.bias_hh_l0"]
    sparse = {"gru.weight_hh": BlockSparse.from_dense(sd["gru.weight_hh_l0"], cfg.block_shape)}
    for o in ("O1", "O2", "O3", "O4"):
        sparse[o] = BlockSparse.from_dense(sd[f"{o}.weight"], cfg.block_shape)
        dense[f"{o}.bias"] = sd[f"{o}.bias"]
    save_vocoder_tensors(path, dense, sparse, dtype=np.float32)
    return model


def _engine_against_reference(tmp_path, *, model_seed: int, mel_seed: int, rng_seed: int, lpc_order: int = 0,
                              excitation: str = "linear", ltp: bool = False, ltp_input: bool = False,
                              taps: int = 1, phase: int = 0, voicing=None, ltp_gain_scale: float = 1.0):
    """The exported model in the engine and the torch reference loop, same uniforms: samples
    identical, logits to float32 rounding. Returns the engine's samples. With ``ltp`` the mel is
    followed by pitch features (a 110 Hz voice, periodicity falling from 0.99 to 0.4, or the
    12 frames' ``voicing``)."""
    torch, cfg, model = _torch_model(seed=model_seed, lpc_order=lpc_order, excitation=excitation, ltp=ltp,
                                     ltp_input=ltp_input, taps=taps, phase=phase)
    torch.set_num_threads(1)
    path = tmp_path / "vocoder.safetensors"
    model = _export(cfg, model, path)
    voc = Vocoder.load(path, cond_blocks=cfg.cond_blocks, hidden_size=cfg.hidden_size,
                       cond_channels=cfg.cond_channels, lpc_order=lpc_order, excitation=excitation, ltp=ltp,
                       ltp_input=ltp_input, ltp_input_taps=taps, phase_input=phase)
    frames = 12
    n = frames * 256
    mel = naive.random_mel(frames, seed=mel_seed)
    if ltp:
        q = np.linspace(0.99, 0.4, frames) if voicing is None else np.asarray(voicing, np.float64)
        pitch = np.stack([np.full(frames, np.log2(110 / 120)), q], axis=1)
        mel = np.ascontiguousarray(np.concatenate([mel, pitch.astype(np.float32)], axis=1))
    u = K.uniforms(K.rng_state(rng_seed), n)
    ref = model.infer(torch.from_numpy(mel), u, temperature=1.0, return_logits=True, ltp_gain_scale=ltp_gain_scale)
    logits = np.zeros((n, 2, 256), np.float32)
    out = voc.generate(voc.frame_inputs(mel, ltp_gain_scale=ltp_gain_scale), voc.new_state(seed=rng_seed), n,
                       logits_out=logits)
    np.testing.assert_array_equal(out, ref.samples.numpy())
    ref_logits = np.stack([ref.coarse_logits.numpy(), ref.fine_logits.numpy()], axis=1)
    np.testing.assert_allclose(logits, ref_logits, rtol=0, atol=1e-4 * np.abs(ref_logits).max())
    return out


def test_engine_equals_torch_reference_loop(tmp_path):
    out = _engine_against_reference(tmp_path, model_seed=3, mel_seed=4, rng_seed=21)
    assert len(np.unique(out)) > 100


# ---- the int8 products (kernels.int8) ------------------------------------------------------------

def _state_bytes(h: np.ndarray) -> np.ndarray:
    """floor(clamp(h, -1, 1) * 127 + 128.5), each step rounded to float32 (kernels.int8's rule)."""
    return np.floor((np.clip(h, -1, 1).astype(np.float32) * np.float32(127)).astype(np.float32) + np.float32(128.5))


def _int8_against_reference(tmp_path, *, frames: int = 24, **kw) -> np.ndarray:
    """Vocoder(int8=True) against the torch reference loop doing the same integer arithmetic for
    W_hh, O1 and O3 (``WaveRNN.infer(int8=True)``, written apart from the kernels), same uniforms.

    The two loops' states differ by float rounding (their exps differ), and where a state value
    lies that close to a rounding boundary its byte ``floor(h * 127 + 128.5)`` differs between
    them; from there on they are two runs of the int8 model, not one (a draw whose uniform falls
    in the logits' rounding gap parts them too). So, running the engine a sample per call: samples
    identical, logits to float32 rounding and every state byte equal up to the first step where
    they part, which must be one of those two cases and come after 1000 samples; and over the
    whole run (without a long-term predictor, whose samples give back their codes), the reference
    teacher-forced with the engine's samples gives its logits to within the quantisation's noise."""
    torch, cfg, model = _torch_model(seed=kw.pop("model_seed"), lpc_order=kw.get("lpc_order", 0),
                                     ltp=kw.get("ltp", False), ltp_input=kw.get("ltp_input", False),
                                     taps=kw.get("taps", 1))
    torch.set_num_threads(1)
    path = tmp_path / "vocoder.safetensors"
    model = _export(cfg, model, path)
    voc = Vocoder.load(path, cond_blocks=cfg.cond_blocks, hidden_size=cfg.hidden_size,
                       lpc_order=kw.get("lpc_order", 0), ltp=kw.get("ltp", False), ltp_input=kw.get("ltp_input", False),
                       ltp_input_taps=kw.get("taps", 1), int8=True)
    n = frames * 256
    mel = naive.random_mel(frames, seed=kw["mel_seed"])
    if kw.get("ltp"):
        pitch = np.stack([np.full(frames, np.log2(110 / 120)), np.linspace(0.99, 0.4, frames)], axis=1)
        mel = np.ascontiguousarray(np.concatenate([mel, pitch.astype(np.float32)], axis=1))
    u = K.uniforms(K.rng_state(kw["rng_seed"]), n)
    with torch.no_grad():
        ref, lc, lf, ref_h = (t.numpy() for t in model._reference_loop(torch.from_numpy(mel), u, int8=True))
    ref_logits = np.stack([lc, lf], axis=1)
    gi = voc.frame_inputs(mel)
    st = voc.new_state(seed=kw["rng_seed"])
    out, logits, h = np.empty(n, np.int16), np.zeros((n, 2, 256), np.float32), np.empty_like(ref_h)
    for t in range(n):
        voc.generate(gi, st, 1, out=out[t:t + 1], logits_out=logits[t:t + 1])
        h[t] = st.h
    np.testing.assert_array_equal(out, voc.generate(gi, voc.new_state(seed=kw["rng_seed"]), n))  # = one call
    tol = 1e-4 * np.abs(ref_logits).max()
    parted = (out != ref) | (_state_bytes(h) != _state_bytes(ref_h)).any(axis=1)
    first = int(np.argmax(parted)) if parted.any() else n
    assert first >= 1000, f"the engine and the reference part at sample {first}: pick other seeds"
    np.testing.assert_array_equal(out[:first], ref[:first])
    np.testing.assert_allclose(logits[:first], ref_logits[:first], rtol=0, atol=tol)
    if first < n:  # what parted them first, in the step's order: coarse half, c_t, fine half, f_t
        hh = h.shape[1] // 2
        flip = _state_bytes(h[first]) != _state_bytes(ref_h[first])
        codes = [(int(v) + 32768) >> 8 for v in (out[first], ref[first])]
        for half, head in ((slice(0, hh), 0), (slice(hh, None), 1)):
            if flip[half].any():  # a byte: the two values straddle a boundary, float rounding apart
                assert np.abs(h[first, half] - ref_h[first, half])[flip[half]].max() < 1e-5
                break
            if head == 0 and codes[0] != codes[1] or head == 1:  # a draw in the logits' rounding gap
                np.testing.assert_allclose(logits[first, head], ref_logits[first, head], rtol=0, atol=tol)
                break
    if not kw.get("ltp"):  # (a long-term predictor's sample does not give back its code exactly)
        with torch.no_grad():
            _, fc, ff, _ = model._reference_loop(torch.from_numpy(mel), forced_audio=torch.from_numpy(out),
                                                 int8=True)
        forced = np.stack([fc.numpy(), ff.numpy()], axis=1)
        np.testing.assert_allclose(logits, forced, rtol=0, atol=0.02 * np.abs(forced).max())
    return out


def test_int8_engine_equals_the_torch_loop_with_the_int8_product(tmp_path):
    out = _int8_against_reference(tmp_path, model_seed=3, mel_seed=4, rng_seed=21)
    assert len(np.unique(out)) > 100


def test_int8_period_input_engine_equals_the_torch_loop(tmp_path):
    """The shipped voice's kind (LPC, long-term predictor, five period taps) in int8: the period
    kernel (_generate_period) against the torch loop."""
    _int8_against_reference(tmp_path, model_seed=7, mel_seed=9, rng_seed=3, lpc_order=10, ltp=True,
                            ltp_input=True, taps=5)


@pytest.mark.parametrize("period", [False, True])
def test_int8_batches_and_chunks_equal_one_stream(small, tmp_path, period):
    """An int8 vocoder's batches (stream by stream products, no lanes; with the period input, the
    stream-major period kernel) give what one stream gives, bit for bit."""
    if period:
        _, cfg, model = _torch_model(seed=7, lpc_order=10, ltp=True, ltp_input=True, taps=5)
        _export(cfg, model, tmp_path / "vocoder.safetensors")
        voc = Vocoder.load(tmp_path / "vocoder.safetensors", cond_blocks=cfg.cond_blocks, lpc_order=10, ltp=True,
                           ltp_input=True, ltp_input_taps=5, int8=True)
    else:
        voc = Vocoder(*small[:2], cond_blocks=2, int8=True)
    assert voc.int8 and len(voc._net[2]) == K.INT8_LEN
    n = 3 * 256
    mels = [naive.random_mel(3, seed=s) for s in range(30)]
    if period:
        pitch = np.stack([np.full(3, np.log2(110 / 120)), np.full(3, 0.9)], axis=1).astype(np.float32)
        mels = [np.ascontiguousarray(np.concatenate([m, pitch], axis=1)) for m in mels]
    gis = np.stack([voc.frame_inputs(m) for m in mels])
    rngs = K.rng_states(5, len(mels))
    st = voc.new_batch_state(rngs)
    assert st.n_lanes == 0
    batch = np.concatenate([voc.generate_batch(gis, st, 300), voc.generate_batch(gis, st, n - 300)], axis=1)
    for s in (0, 13, len(mels) - 1):
        np.testing.assert_array_equal(batch[s], voc.generate(gis[s], voc.new_state(rng=rngs[s]), n))
    assert len(np.unique(batch)) > 100


# ---- LPC vocoders (the net makes the excitation, generation adds the mel's prediction back) -----

@pytest.fixture(scope="module")
def small_lpc(small):
    dense, sparse, _ = small
    return Vocoder(dense, sparse, cond_blocks=2, lpc_order=12)


def test_lpc_generation_is_the_excitation_plus_the_prediction(small, small_lpc):
    """The same net with and without LPC draws the same excitation (same RNG); the LPC one's
    samples are that excitation passed through the predictor, computed here independently."""
    plain = small[2]
    mel = naive.random_mel(6, seed=12)
    n = 6 * 256
    e = plain.generate(plain.frame_inputs(mel), plain.new_state(seed=3), n).astype(np.float64)
    gi = small_lpc.frame_inputs(mel)
    assert gi.shape == (6, 3 * 32 + 12)
    np.testing.assert_array_equal(gi[:, :96], plain.frame_inputs(mel))
    s = small_lpc.generate(gi, small_lpc.new_state(seed=3), n)
    np.testing.assert_array_equal(s, _lpc_synthesis_reference(e, mel, lambda p, code: code + np.rint(p)))
    assert not np.array_equal(s, e)


def _lpc_synthesis_reference(codes: np.ndarray, mel: np.ndarray, sample) -> np.ndarray:
    """Order-12 synthesis one sample at a time: ``s_t = clip(sample(p_t, code_t))`` with
    ``p_t = -sum_k a_k s_{t-k}`` from the mel's float32 predictors."""
    from wavern.dsp import DEFAULT_MEL, mel_lpc

    a = mel_lpc(mel, 12, DEFAULT_MEL).astype(np.float32).astype(np.float64)
    hist = np.zeros(12)
    out = np.empty(codes.size)
    for t in range(codes.size):
        p = 0.0
        for k in range(12):
            p -= a[t // 256, k + 1] * hist[k]
        out[t] = min(max(sample(p, float(codes[t])), -32768), 32767)
        hist = np.concatenate([[out[t]], hist[:-1]])
    return out


def test_lpc_chunks_batches_and_windows_equal_one_stream(small_lpc):
    voc = small_lpc
    mel = naive.random_mel(40, seed=13)
    gi = voc.frame_inputs(mel)
    n = 40 * 256
    one = voc.generate(gi, voc.new_state(seed=2), n)
    st = voc.new_state(seed=2)
    parts, rng = [], np.random.default_rng(1)
    while st.position < n:  # chunked, dropping played frames: the predictor history carries over
        k = int(min(rng.integers(1, 900), n - st.position))
        first = st.position // 256
        parts.append(voc.generate(gi[first:], st, k, frame0=first))
    np.testing.assert_array_equal(np.concatenate(parts), one)
    for B in (3, 24):  # stream-major and lanes
        rngs = K.rng_states(5, B)
        gis = np.stack([voc.frame_inputs(naive.random_mel(3, seed=s)) for s in range(B)])
        batch = voc.generate_batch(gis, voc.new_batch_state(rngs), 3 * 256)
        for s in (0, B - 1):
            np.testing.assert_array_equal(batch[s], voc.generate(gis[s], voc.new_state(rng=rngs[s]), 3 * 256))
    R = 2 + voc.cond_blocks  # a window's frame inputs (predictor columns included) equal the whole's rows
    part = voc.frame_inputs(mel[7:31])
    np.testing.assert_array_equal(part[R:24 - R], gi[7 + R:31 - R])


def test_lpc_engine_equals_torch_reference_loop(tmp_path):
    _engine_against_reference(tmp_path, model_seed=5, mel_seed=6, rng_seed=8, lpc_order=10)


def test_mulaw_lpc_engine_equals_torch_reference_loop(tmp_path):
    out = _engine_against_reference(tmp_path, model_seed=5, mel_seed=6, rng_seed=8, lpc_order=10, excitation="mulaw")
    assert len(np.unique(out)) > 100


def test_mulaw_lpc_generation_expands_the_code_before_adding_the_prediction(small):
    """Same net, same draws: the mu-law voice's samples are rint(p_t + expand(code_t)), computed
    here independently from the plain net's codes; a linear voice would add the code itself."""
    from wavern.dsp import mulaw_expand

    dense, sparse, plain = small
    voc = Vocoder(dense, sparse, cond_blocks=2, lpc_order=12, excitation="mulaw")
    mel = naive.random_mel(6, seed=12)
    n = 6 * 256
    code = plain.generate(plain.frame_inputs(mel), plain.new_state(seed=3), n)
    s = voc.generate(voc.frame_inputs(mel), voc.new_state(seed=3), n)
    np.testing.assert_array_equal(s, _lpc_synthesis_reference(code, mel, lambda p, y: np.rint(p + mulaw_expand(y))))
    with pytest.raises(VoiceFileError, match="excitation"):
        Vocoder(dense, sparse, cond_blocks=2, lpc_order=0, excitation="mulaw")


LTP_KINDS = pytest.mark.parametrize("excitation, ltp_input, taps, phase",
                                    [("mulaw", False, 1, 0), ("linear", False, 1, 0), ("linear", True, 1, 0),
                                     ("linear", True, 3, 0), ("linear", True, 5, 0), ("linear", True, 7, 0),
                                     ("linear", True, 5, 2)],
                                    ids=["mulaw", "linear", "linear+period-input", "linear+period-window3",
                                         "linear+period-window", "linear+period-window7",
                                         "linear+period-window+phase"])
# voiced, unvoiced (periodicity under 0.45: no lag), voiced again: a phase input restarts at 0
RE_VOICED = [0.99, 0.97, 0.95, 0.9, 0.3, 0.2, 0.3, 0.8, 0.9, 0.95, 0.97, 0.99]


@LTP_KINDS
def test_ltp_engine_equals_torch_reference_loop(tmp_path, excitation, ltp_input, taps, phase):
    out = _engine_against_reference(tmp_path, model_seed=5, mel_seed=6, rng_seed=8, lpc_order=10,
                                    excitation=excitation, ltp=True, ltp_input=ltp_input, taps=taps, phase=phase)
    assert len(np.unique(out)) > 100
    if phase:
        out2 = _engine_against_reference(tmp_path, model_seed=5, mel_seed=6, rng_seed=8, lpc_order=10,
                                         excitation=excitation, ltp=True, ltp_input=True, taps=taps, phase=phase,
                                         voicing=RE_VOICED)
        assert not np.array_equal(out, out2)


def test_a_scaled_ltp_gain_runs_as_in_the_torch_reference_loop(tmp_path):
    """A voice's inference.ltp_gain_scale: the engine with every frame's long-term gain x 1.6 (capped at
    0.95 where 0.99-periodic frames would pass it: 0.48 x 2.5) draws what the reference loop draws
    with the same factor, and other samples than at 1."""
    kw = dict(model_seed=5, mel_seed=6, rng_seed=8, lpc_order=10, excitation="linear", ltp=True, ltp_input=True,
              taps=5)
    base = _engine_against_reference(tmp_path, **kw)
    for scale in (1.6, 2.5):
        out = _engine_against_reference(tmp_path, **kw, ltp_gain_scale=scale)
        assert not np.array_equal(out, base)


def test_the_phase_input_changes_the_samples(tmp_path):
    """The same weights with the phase columns zeroed draw other samples: the phase is read."""
    torch, cfg, model = _torch_model(seed=7, lpc_order=10, ltp=True, ltp_input=True, taps=5, phase=2)
    path, flat = tmp_path / "phase.safetensors", tmp_path / "flat.safetensors"
    _export(cfg, model, path)
    with torch.no_grad():
        model.gru.weight_ih_l0[:, 8:12] = 0.0  # after c, f, c_t and the 5 taps
    _export(cfg, model, flat)
    pitch = np.stack([np.full(6, np.log2(100 / 120)), np.full(6, 0.95)], axis=1).astype(np.float32)
    mel = np.ascontiguousarray(np.concatenate([naive.random_mel(6, seed=1), pitch], axis=1))
    outs = []
    for p in (path, flat):
        voc = Vocoder.load(p, cond_blocks=cfg.cond_blocks, lpc_order=10, ltp=True, ltp_input=True,
                           ltp_input_taps=5, phase_input=2)
        outs.append(voc.generate(voc.frame_inputs(mel), voc.new_state(seed=3), 6 * 256))
    assert not np.array_equal(outs[0], outs[1])
    with pytest.raises(VoiceFileError, match="phase_input"):
        Vocoder.load(path, cond_blocks=cfg.cond_blocks, lpc_order=10, ltp=True, ltp_input=False, phase_input=2)
    with pytest.raises(VoiceFileError, match="weight_ih"):  # the file has the phase columns: K must say so
        Vocoder.load(path, cond_blocks=cfg.cond_blocks, lpc_order=10, ltp=True, ltp_input=True, ltp_input_taps=5)
    with pytest.raises(VoiceFileError, match=r"ltp_input_taps must be an odd integer in \[1, 19\]"):
        Vocoder.load(path, cond_blocks=cfg.cond_blocks, lpc_order=10, ltp=True, ltp_input=True, ltp_input_taps=21)


@LTP_KINDS
def test_ltp_chunks_and_batches_equal_one_stream(tmp_path, excitation, ltp_input, taps, phase):
    """The long-term predictor's residual memory (and a phase input's phase) carries across chunks
    and stays per stream."""
    _, cfg, model = _torch_model(seed=7, lpc_order=10, excitation=excitation, ltp=True, ltp_input=ltp_input,
                                 taps=taps, phase=phase)
    path = tmp_path / "vocoder.safetensors"
    _export(cfg, model, path)
    voc = Vocoder.load(path, cond_blocks=cfg.cond_blocks, lpc_order=10, excitation=excitation, ltp=True,
                       ltp_input=ltp_input, ltp_input_taps=taps, phase_input=phase)

    def feats(frames: int, seed: int) -> np.ndarray:
        q = np.full(frames, 0.97)
        q[frames // 2:frames // 2 + 1] = 0.3  # an unvoiced frame in the middle
        pitch = np.stack([np.full(frames, np.log2(90 / 120 + seed / 50)), q], axis=1)
        return np.ascontiguousarray(np.concatenate([naive.random_mel(frames, seed=seed), pitch.astype(np.float32)],
                                                   axis=1))

    gi = voc.frame_inputs(feats(10, 0))
    assert gi.shape[1] == voc.frame_width == 3 * cfg.hidden_size + 12 and gi[0, -2] == np.rint(22050 / 90)
    n = 10 * 256
    one = voc.generate(gi, voc.new_state(seed=2), n)
    st, parts, rng = voc.new_state(seed=2), [], np.random.default_rng(3)
    while st.position < n:
        k = int(min(rng.integers(1, 700), n - st.position))
        first = st.position // 256
        parts.append(voc.generate(gi[first:], st, k, frame0=first))
    np.testing.assert_array_equal(np.concatenate(parts), one)
    rngs = K.rng_states(5, 3)
    gis = np.stack([voc.frame_inputs(feats(4, s)) for s in range(3)])
    batch = voc.generate_batch(gis, voc.new_batch_state(rngs), 4 * 256)
    for s in range(3):
        np.testing.assert_array_equal(batch[s], voc.generate(gis[s], voc.new_state(rng=rngs[s]), 4 * 256))
    one = voc.generate_batch(gis[:1], voc.new_batch_state(rngs[:1]), 4 * 256)  # a batch of one
    np.testing.assert_array_equal(one[0], batch[0])


def _grouped_period_voice(tmp_path, monkeypatch, record) -> Vocoder:
    """A period-input vocoder (five taps) whose batches go through the stream-major kernel in groups
    of 3 streams; ``record(gi, args)`` sees every kernel call."""
    import wavern.engine.vocoder as V

    _, cfg, model = _torch_model(seed=7, lpc_order=10, excitation="linear", ltp=True, ltp_input=True, taps=5,
                                 phase=0)
    path = tmp_path / "vocoder.safetensors"
    _export(cfg, model, path)
    monkeypatch.setattr(V, "STREAM_GROUP", 3)
    real = K._generate_streams
    monkeypatch.setattr(K, "_generate_streams", lambda gi, *a: (record(gi, a), real(gi, *a))[1])
    return Vocoder.load(path, cond_blocks=cfg.cond_blocks, lpc_order=10, excitation="linear", ltp=True,
                        ltp_input=True, ltp_input_taps=5)


def test_a_period_voice_batch_runs_in_stream_groups_that_each_equal_one_stream(tmp_path, monkeypatch):
    """Streams of a period-input vocoder go through the kernel a group at a time (hundreds of
    streams at once left the cache); each still equals its own stream, across chunks and groups."""
    calls = []
    voc = _grouped_period_voice(tmp_path, monkeypatch, lambda gi, args: calls.append(gi.shape[0]))
    B, n = 7, 4 * 256
    rngs = K.rng_states(11, B)

    def feats(seed: int) -> np.ndarray:  # mel and pitch (an f0 around 90 Hz, voiced)
        pitch = np.stack([np.full(4, np.log2(90 / 120 + seed / 50)), np.full(4, 0.97)], axis=1)
        return np.ascontiguousarray(np.concatenate([naive.random_mel(4, seed=seed), pitch.astype(np.float32)], axis=1))

    gis = np.stack([voc.frame_inputs(feats(s)) for s in range(B)])
    st = voc.new_batch_state(rngs)
    batch = np.concatenate([voc.generate_batch(gis, st, 300), voc.generate_batch(gis, st, n - 300)], axis=1)
    assert calls == [3, 3, 1, 3, 3, 1]  # two chunks, each in groups of 3
    for s in range(B):
        np.testing.assert_array_equal(batch[s], voc.generate(gis[s], voc.new_state(rng=rngs[s]), n))


def test_a_period_voice_renders_only_the_samples_its_items_keep(tmp_path, monkeypatch):
    """render_many of a period-input vocoder: an item's last segment, and a short item riding in
    the batch, stop where the item ends rather than at O + S frames; every item still equals its
    segments made one by one at full length and crossfaded (the samples kept depend only on the
    frames before them), across stream groups and threads."""
    import naive

    made = []  # the samples of each kernel call (its ``out``)
    voc = _grouped_period_voice(tmp_path, monkeypatch, lambda gi, args: made.append(args[8].size))

    def feats(frames: int, seed: int) -> np.ndarray:  # mel and pitch (an f0 around 90 Hz; one unvoiced frame)
        q = np.full(frames, 0.97)
        q[frames // 3] = 0.3
        pitch = np.stack([np.full(frames, np.log2(90 / 120 + seed / 50)), q], axis=1)
        return np.ascontiguousarray(np.concatenate([naive.random_mel(frames, seed=seed), pitch.astype(np.float32)],
                                                   axis=1))

    S, O, hop = 4, 2, voc.hop
    lengths = [13, 3, 9, 8, 17]  # 13, 9, 17: a short last segment; 3: rides along (2 T >= O + S); 8: two whole
    gis = [voc.frame_inputs(feats(T, 30 + T)) for T in lengths]
    seeds = [50 + i for i in range(len(gis))]
    expect = []
    for g, seed in zip(gis, seeds):
        T = g.shape[0]
        if T <= S:
            expect.append(voc.generate(g, voc.new_state(seed=seed), T * hop))
            continue
        segs = fold_frame_inputs(g, S, O)
        rngs = K.rng_states(seed, segs.shape[0])
        singles = np.stack([voc.generate(np.ascontiguousarray(segs[i]), voc.new_state(rng=rngs[i]), (O + S) * hop)
                            for i in range(segs.shape[0])])
        expect.append(naive.crossfade(singles, S * hop, O * hop, T * hop))
    for threads in (1, 2):
        made.clear()
        got = voc.render_many(gis, seeds, fold_frames=S, overlap_frames=O, threads=threads)
        for g, e in zip(got, expect):
            np.testing.assert_array_equal(g, e)
        streams = 4 + 1 + 3 + 2 + 5  # ceil(T / S) segments of O + S frames a folded item, one the short item
        kept = sum(-(-T // S) * O + T for T in (13, 9, 8, 17)) + 3  # each segment's O lead frames, then T
        assert sum(made) == kept * hop < streams * (O + S) * hop


def test_a_period_voice_compiles_nothing_after_warmup(tmp_path):
    """The first chunk of a stream must not wait for numba: after ``kernels.warmup()`` a period-input
    voice's one-stream and batch paths run with the signatures warmup compiled."""
    if not hasattr(K._generate_period, "signatures"):
        pytest.skip("numba JIT disabled")
    _, cfg, model = _torch_model(seed=7, lpc_order=10, ltp=True, ltp_input=True, taps=5)
    path = tmp_path / "vocoder.safetensors"
    _export(cfg, model, path)
    voc = Vocoder.load(path, cond_blocks=cfg.cond_blocks, lpc_order=10, ltp=True, ltp_input=True, ltp_input_taps=5)
    K.warmup()
    kernels = (K._generate_period, K._generate_streams, K._generate, K._lpc_synthesis)
    before = [len(f.signatures) for f in kernels]
    pitch = np.stack([np.full(4, np.log2(100 / 120)), np.full(4, 0.95)], axis=1).astype(np.float32)
    gi = voc.frame_inputs(np.ascontiguousarray(np.concatenate([naive.random_mel(4, seed=1), pitch], axis=1)))
    voc.generate(gi, voc.new_state(seed=1), 4 * 256)
    voc.generate_batch(np.stack([gi, gi, gi]), voc.new_batch_state(K.rng_states(1, 3)), 4 * 256)
    assert [len(f.signatures) for f in kernels] == before


@pytest.mark.parametrize("ltp_input", [False, True])
def test_a_voice_files_weights_run_as_float16_with_the_float32_samples(tmp_path, ltp_input):
    """A voice file's block weights are float16 values: the engine keeps them as float16 bits
    (``Vocoder.half_weights``), and the per-sample input columns of W_ih with them; every path (one
    stream, stream-major batch, lanes) gives the bytes of the same weights stored as float32.
    Weights that are not float16 values stay float32."""
    from wavern.engine.vocoder import engine_dense, to_engine

    kw = dict(lpc_order=10, ltp=True, ltp_input=True, ltp_input_taps=5) if ltp_input else {}
    _, cfg, model = _torch_model(seed=11, lpc_order=kw.get("lpc_order", 0), ltp=ltp_input, ltp_input=ltp_input,
                                 taps=5 if ltp_input else 1)
    path = tmp_path / "vocoder.safetensors"
    _export(cfg, model, path)
    voc = Vocoder.load(path, cond_blocks=cfg.cond_blocks, **kw)
    assert voc.half_weights
    net16 = voc._net
    assert all(net16[i][0].dtype == np.uint16 for i in (2, 3, 5, 7, 9))
    assert net16[0].dtype == np.uint16  # the sample (and period) input columns too
    back16 = voc._w_back
    back32 = None if back16 is None else back16.view(np.float16).astype(np.float32)
    if ltp_input:
        assert back16.dtype == np.uint16 and back16.shape == (5, 3 * cfg.hidden_size)
    H, hh = cfg.hidden_size, cfg.hidden_size // 2
    shapes = {2: (3 * H, H), 3: (hh, hh), 5: (256, hh), 7: (hh, hh), 9: (256, hh)}
    net32 = list(net16)
    for i, shape in shapes.items():
        net32[i] = to_engine(engine_dense(net16[i], shape), kind=net16[i][3])
        assert net32[i][0].dtype == np.float32
    net32[0] = net16[0].view(np.float16).astype(np.float32)
    net32 = tuple(net32)

    def feats(frames: int, seed: int) -> np.ndarray:
        mel = naive.random_mel(frames, seed=seed)
        if not ltp_input:
            return mel
        pitch = np.stack([np.full(frames, np.log2(100 / 120 + seed / 40)), np.full(frames, 0.95)], axis=1)
        return np.ascontiguousarray(np.concatenate([mel, pitch.astype(np.float32)], axis=1))

    B = 3 if ltp_input else 26  # period voices run stream-major; 26 streams: 24 in lanes, 2 stream-major
    gis = np.stack([voc.frame_inputs(feats(3, s)) for s in range(B)])
    rngs = K.rng_states(4, B)
    out = {}
    for name, net, back in (("16", net16, back16), ("32", net32, back32)):
        voc._net, voc._w_back = net, back
        one = voc.generate(gis[0], voc.new_state(seed=9), 3 * 256, temperature=0.9)
        batch = voc.generate_batch(gis, voc.new_batch_state(rngs), 3 * 256, temperature=0.9)
        out[name] = (one, batch)
    np.testing.assert_array_equal(out["16"][0], out["32"][0])
    np.testing.assert_array_equal(out["16"][1], out["32"][1])
    assert np.unique(out["16"][1]).size > 50  # the streams made audio, not a constant

    dense, sparse = naive.random_vocoder(H=32, C=8, cond_blocks=1, block=(16, 4), density=0.5, seed=7)
    assert not Vocoder(dense, sparse, cond_blocks=1).half_weights


def test_declared_sizes_beyond_the_limits_are_refused_before_anything_is_allocated(tmp_path):
    """A block-sparse matrix declares its shape; a few-kB file declaring a huge one (one stored
    block) would be densified to gigabytes at load: refused first. So is a huge cond_blocks."""
    from wavern.vocoder.format import MAX_COND_BLOCKS, MAX_HIDDEN, load_vocoder_tensors

    dense, sparse = naive.random_vocoder(H=32, C=8, cond_blocks=1, block=(16, 4), density=0.5, seed=7)
    H = 2 * MAX_HIDDEN
    sparse["gru.weight_hh"] = BlockSparse(data=np.ones((1, 16, 4), np.float32), index=np.zeros((1, 2), np.int32),
                                          shape=(3 * H, H))
    with pytest.raises(VoiceFileError, match=f"at most {MAX_HIDDEN}"):
        Vocoder(dense, sparse, cond_blocks=1)
    with pytest.raises(VoiceFileError, match=rf"cond_blocks must be an integer in \[1, {MAX_COND_BLOCKS}\]"):
        load_vocoder_tensors(tmp_path / "any.safetensors", cond_blocks=MAX_COND_BLOCKS + 1)


@pytest.mark.parametrize("phase", [0, 2], ids=["five-taps", "five-taps+phase"])
def test_a_period_voice_batch_of_quads_equals_one_stream_each(tmp_path, phase):
    """Five taps without a phase input, the stream-major kernel makes the period inputs of the
    streams whose frames have a lag four at a time, any four (``kernels._period_inputs4``), the
    others and the one to three left over one by one; nine streams, each unvoiced over another
    stretch (so quads skip over it, and frame 0 leaves three over), and every stream equals its
    own one-stream generation."""
    _, cfg, model = _torch_model(seed=7, lpc_order=10, excitation="linear", ltp=True, ltp_input=True, taps=5,
                                 phase=phase)
    path = tmp_path / "vocoder.safetensors"
    _export(cfg, model, path)
    voc = Vocoder.load(path, cond_blocks=cfg.cond_blocks, lpc_order=10, excitation="linear", ltp=True,
                       ltp_input=True, ltp_input_taps=5, phase_input=phase)
    B, frames = 9, 8
    rngs = K.rng_states(13, B)

    def feats(seed: int) -> np.ndarray:
        q = np.full(frames, 0.97)
        q[seed % frames] = 0.2  # this stream's unvoiced frame: no lag there
        pitch = np.stack([np.full(frames, np.log2(80 / 120 + seed / 40)), q], axis=1)
        return np.ascontiguousarray(np.concatenate([naive.random_mel(frames, seed=seed), pitch.astype(np.float32)],
                                                   axis=1))

    gis = np.stack([voc.frame_inputs(feats(s)) for s in range(B)])
    lag_col = 3 * cfg.hidden_size + 10
    assert (gis[:, :, lag_col] == 0).sum() == B and (gis[:, :, lag_col] >= 1).sum() == B * (frames - 1)
    n = frames * 256
    batch = voc.generate_batch(gis, voc.new_batch_state(rngs), n)
    for s in range(B):
        np.testing.assert_array_equal(batch[s], voc.generate(gis[s], voc.new_state(rng=rngs[s]), n))
