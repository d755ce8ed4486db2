"""The engine's compiled kernels against slow obvious twins (tests/engine/naive.py) and closed forms."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from wavern.engine import kernels as K
from wavern.engine.vocoder import choose_block_kind, engine_dense, int8_rows, is_half_exact, to_engine, to_engine_int8
from wavern.vocoder.format import BlockSparse

from wavern.errors import ParameterError


def _load_naive():
    spec = importlib.util.spec_from_file_location("wavern_engine_tests_naive", Path(__file__).with_name("naive.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


naive = _load_naive()
KINDS = list(range(len(K.BLOCK_SHAPES)))


def test_exp_matches_numpy_to_float32_precision():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-87, 88, 5000), [0.0, -1e-8, 1e-8, -87.0, 88.0, 0.5 * np.log(2)]]).astype(np.float32)
    ref = np.exp(x.astype(np.float64))
    assert np.max(np.abs(K.vexp(x) / ref - 1.0)) < 3e-7


def test_exp_saturates_outside_float32_range():
    x = np.array([-1e4, -100.0, -87.5, 100.0, 1e4], np.float32)
    out = K.vexp(x)
    assert np.all(out[:3] == 0.0)
    np.testing.assert_allclose(out[3:], np.exp(88.0), rtol=3e-7)


def _random_engine_pattern(rows, cols, br, bc, density, rng):
    keep = rng.random((rows // br, cols // bc)) < density
    keep[0, 0] = True
    m = rng.standard_normal((rows, cols)).astype(np.float32) * np.kron(keep, np.ones((br, bc), np.float32))
    return m


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("density", [1.0, 0.3, 0.0])
def test_spmv_matches_dense_product(kind, density):
    rng = np.random.default_rng(kind * 10 + int(density * 10))
    br, bc = K.BLOCK_SHAPES[kind]
    rows, cols = 48, 32
    m = _random_engine_pattern(rows, cols, br, bc, density, rng) if density else np.zeros((rows, cols), np.float32)
    mat = to_engine(m, kind=kind)
    x = rng.standard_normal(cols + 8).astype(np.float32)
    y0 = rng.standard_normal(rows).astype(np.float32)
    for xoff in (0, 8):
        y = K.spmv(mat, x, y0.copy(), xoff=xoff)
        ref = y0.astype(np.float64) + m.astype(np.float64) @ x[xoff:xoff + cols].astype(np.float64)
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


# ---- the int8 products (kernels.int8) ----------------------------------------------------------

def _int8_case(br: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A (96, 64) matrix pruned in br x 4 blocks with a row of zeros and weights that round to 0;
    a state with values beyond +-1, at 0 and at +-1; a bias."""
    W = _random_engine_pattern(96, 64, br, 4, 0.3, rng)
    W[5] = 0.0
    W[9, W[9] != 0] *= 1e-4
    W[9, np.flatnonzero(W[9])[:1]] = 3.0  # the rest of row 9 rounds to 0
    h = np.tanh(rng.standard_normal(64) * 2).astype(np.float32)
    h[:6] = [1.0, -1.0, 0.0, 1.7, -3.0, 0.5 / 127]
    return W, h, rng.standard_normal(96).astype(np.float32)


@pytest.mark.parametrize("br", [8, 16])
def test_int8_product_is_the_exact_integer_sums_then_two_roundings(br):
    """spmv_int8 against the rule written out in numpy (docs/ARCHITECTURE.md, "The int8
    products"): bytes floor(clamp(h) * 127 + 128.5), exact sums of q (u - 128) in int64, then
    b + d * float32(sum) rounded twice; bit for bit. The block shape follows the matrix's."""
    rng = np.random.default_rng(br)
    W, h, b = _int8_case(br, rng)
    mat = to_engine_int8(W)
    assert mat[3] == (3 if br == 16 else 0) and mat[0].dtype == np.int8
    q, s = int8_rows(W)
    assert s[5] == 1.0 and not q[5].any() and np.count_nonzero(q[9]) == 1
    assert np.abs(q).max() == K.Q_WEIGHT
    u = np.floor((np.clip(h, -1, 1) * np.float32(127)).astype(np.float32) + np.float32(128.5)).astype(np.int64)
    np.testing.assert_array_equal(K.state_bytes(h), u)
    assert u[0] == 255 and u[1] == 1 and u[2] == 128 and u[3] == 255 and u[4] == 1
    acc = q.astype(np.int64) @ (u - 128)
    d = (s / np.float32(127)).astype(np.float32)
    want = (b + (d * acc.astype(np.float32)).astype(np.float32)).astype(np.float32)
    np.testing.assert_array_equal(K.spmv_int8(mat, h, b), want)
    np.testing.assert_allclose(K.spmv_int8(mat, h, b), b + W @ np.clip(h, -1, 1), rtol=0,
                               atol=0.02 * np.abs(W).sum(axis=1).max())  # close to the float product


def test_int8_product_equals_the_torch_references():
    """The engine's int8 product and the torch reference loop's (wavern.vocoder.model.int8_rows,
    int8_product: written apart) give the same bits."""
    torch = pytest.importorskip("torch")
    from wavern.vocoder.model import int8_product
    from wavern.vocoder.model import int8_rows as torch_rows

    rng = np.random.default_rng(3)
    for br in (8, 16):
        W, h, b = _int8_case(br, rng)
        q, d = torch_rows(torch.from_numpy(W))
        eq, es = int8_rows(W)
        np.testing.assert_array_equal(q.numpy(), eq)
        np.testing.assert_array_equal(d.numpy(), (es / np.float32(127)).astype(np.float32))
        got = int8_product(q, d, torch.from_numpy(h), torch.from_numpy(b)).numpy()
        np.testing.assert_array_equal(K.spmv_int8(to_engine_int8(W), h, b), got)


def test_int8_block_portable_code_equals_avx2s():
    """The int8 row-group product in portable LLVM vector code and with AVX2's byte products
    (vpmaddubsw, vpmaddwd) give the same sums, and they are the integer ones (fix included)."""
    import numba

    from wavern.engine.kernels.intrinsics import _q8_group

    if numba.config.DISABLE_JIT:
        pytest.skip("the intrinsics compile only under numba")
    variants = [False] + ([True] if K.TARGET_AVX2 else [])
    rng = np.random.default_rng(4)
    w = rng.integers(-63, 64, size=6 * 64).astype(np.int8)
    w[:64] = 63  # the largest pair sums: 2 * 255 * 63
    xw = rng.integers(-2**31, 2**31, size=5).astype(np.int32)
    xw[0] = -1  # four bytes of 255
    colidx = np.array([0, 3, 1, 4, 2, 0, 1, 1, 3, 2, 4, 0], np.uint32)  # a column twice in a row too
    for rows in (8, 16):
        k = w.shape[0] // (rows * 4)
        fix = rng.integers(-1000, 1000, size=rows).astype(np.int32)
        ref = fix.astype(np.int64) + sum(
            w[rows * 4 * j:rows * 4 * (j + 1)].reshape(rows, 4).astype(np.int64)
            @ xw[colidx[j]:colidx[j] + 1].view(np.uint8).astype(np.int64) for j in range(k))
        for avx2 in variants:
            group = _q8_group(rows, avx2)

            @numba.njit
            def run(acc, w, colidx, xw, n, fix, group=group):
                group(acc, np.int64(0), w, colidx, xw, np.int64(0), np.int64(n), fix)

            acc = np.zeros(rows, np.float32)
            run(acc, w, colidx[:k], xw, k, fix)
            np.testing.assert_array_equal(acc.view(np.int32), ref)


def test_int8_product_validates():
    rng = np.random.default_rng(5)
    W, h, b = _int8_case(8, rng)
    mat = to_engine_int8(W)
    with pytest.raises(ParameterError, match="6-tuple"):
        K.spmv_int8(to_engine(W, kind=0), h, b)
    bad = (mat[0].copy(), *mat[1:])
    bad[0][0] = 64
    with pytest.raises(ParameterError, match="saturate"):
        K.spmv_int8(bad, h, b)
    with pytest.raises(ParameterError, match="columns past"):
        K.spmv_int8(mat, h[:60], b)
    with pytest.raises(ParameterError, match="rows of the output"):
        K.spmv_int8(mat, h, b[:90])
    with pytest.raises(ParameterError, match="8 x 4 blocks"):
        to_engine_int8(np.ones((12, 8), np.float32))

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n_lanes", [8, 13, 16, 24, 40, 72])
def test_lane_spmm_equals_spmv_per_lane_bit_for_bit(kind, n_lanes):
    """Every lane group width (32, 24, 16, 8, one by one) gives each lane the matvec's bytes."""
    rng = np.random.default_rng(kind * 100 + n_lanes)
    br, bc = K.BLOCK_SHAPES[kind]
    m = _random_engine_pattern(64, 32, br, bc, 0.4, rng)
    mat = to_engine(m, kind=kind)
    X = rng.standard_normal((40, n_lanes)).astype(np.float32)
    Y0 = rng.standard_normal((64, n_lanes)).astype(np.float32)
    Y = K.lane_spmm(mat, X, Y0.copy(), xoff=8)
    for s in range(n_lanes):
        y = K.spmv(mat, np.ascontiguousarray(X[:, s]), np.ascontiguousarray(Y0[:, s]), xoff=8)
        np.testing.assert_array_equal(Y[:, s], y)
    ref = Y0.astype(np.float64) + m.astype(np.float64) @ X[8:40].astype(np.float64)
    np.testing.assert_allclose(Y, ref, rtol=1e-5, atol=1e-5)


def _assert_same_products(a: tuple, b: tuple, rows: int, rng: np.random.Generator, *, x_scale: float = 1.0,
                          n_lanes: int = 24, n_streams: int = 6) -> None:
    """Engine matrices ``a`` and ``b`` (rows x 32) give the same bytes in the matvec, in lanes and
    four streams at a time (the streams past a multiple of four one by one), x at offset 8."""
    x = rng.standard_normal(40).astype(np.float32) * x_scale
    y0 = rng.standard_normal(rows).astype(np.float32)
    np.testing.assert_array_equal(K.spmv(a, x, y0.copy(), xoff=8), K.spmv(b, x, y0.copy(), xoff=8))
    X = rng.standard_normal((40, n_lanes)).astype(np.float32)
    Y0 = rng.standard_normal((rows, n_lanes)).astype(np.float32)
    np.testing.assert_array_equal(K.lane_spmm(a, X, Y0.copy(), xoff=8), K.lane_spmm(b, X, Y0.copy(), xoff=8))
    XS = np.ascontiguousarray(X.T[:n_streams])
    Ya, Yb = np.ascontiguousarray(Y0.T[:n_streams]), np.ascontiguousarray(Y0.T[:n_streams])
    K._spmm(a, XS, 8, Ya)
    K._spmm(b, XS, 8, Yb)
    np.testing.assert_array_equal(Ya, Yb)
    for s in range(n_streams):
        np.testing.assert_array_equal(Ya[s], K.spmv(b, XS[s], np.ascontiguousarray(Y0[:, s]), xoff=8))


@pytest.mark.parametrize("kind", KINDS)
def test_float16_weights_give_the_float32_products_bit_for_bit(kind):
    """Weights that are float16 values, stored as their float16 bits (``to_engine(half=True)``):
    the matvec, four streams at a time and lanes give exactly the float32-stored matrix's bytes."""
    rng = np.random.default_rng(500 + kind)
    br, bc = K.BLOCK_SHAPES[kind]
    m = _random_engine_pattern(64, 32, br, bc, 0.4, rng).astype(np.float16).astype(np.float32)
    m[0, 0] = 65504.0  # the largest half, and one below the smallest normal
    m[br - 1, 0] = 2.0 ** -24
    mat32, mat16 = to_engine(m, kind=kind), to_engine(m, kind=kind, half=True)
    assert mat16[0].dtype == np.uint16 and mat16[0].nbytes * 2 == mat32[0].nbytes
    np.testing.assert_array_equal(engine_dense(mat16, m.shape), m)
    _assert_same_products(mat16, mat32, 64, rng, x_scale=1e-3)


@pytest.mark.parametrize("half", [False, True])
def test_16x4_blocks_give_the_8x4_products_bit_for_bit(half):
    """A matrix pruned in 16x4 blocks (as training prunes) run as 16x4 engine blocks or as twice
    as many 8x4 ones: the matvec, four streams at a time and lanes give the same bytes, so the
    shape chosen at load never changes a sample."""
    rng = np.random.default_rng(7 + half)
    m = _random_engine_pattern(96, 32, 16, 4, 0.35, rng).astype(np.float16).astype(np.float32)
    wide, narrow = to_engine(m, kind=3, half=half), to_engine(m, kind=0, half=half)
    assert narrow[0].size == wide[0].size and narrow[1].size == 2 * wide[1].size
    _assert_same_products(wide, narrow, 96, rng, n_lanes=13, n_streams=7)


@pytest.mark.parametrize("half", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_the_flat_layout_gives_the_column_layouts_products_bit_for_bit(kind, half):
    """``kernels.flat``: the blocks in one loop, each with its own column index, as the one-stream
    kernels take sparse output layers. Same dense matrix, and the matvec's bytes, for patterns with
    empty block columns, full ones, and none stored at all; the batch products refuse it."""
    rng = np.random.default_rng(900 + kind + 10 * half)
    br, bc = K.BLOCK_SHAPES[kind]
    for density in (0.0, 0.08, 0.5, 1.0):
        m = _random_engine_pattern(64, 48, br, bc, density, rng) if density else np.zeros((64, 48), np.float32)
        m = m.astype(np.float16).astype(np.float32)
        col = to_engine(m, kind=kind, half=half)
        fl = K.flat(col)
        assert fl[3] == kind + K.FLAT and fl[2].shape == fl[1].shape and K.flat(fl) is fl
        np.testing.assert_array_equal(engine_dense(fl, m.shape), m)
        x = rng.standard_normal(48 + 4).astype(np.float32)
        y0 = rng.standard_normal(64).astype(np.float32)
        for xoff in (0, 4):
            np.testing.assert_array_equal(K.spmv(fl, x, y0.copy(), xoff=xoff), K.spmv(col, x, y0.copy(), xoff=xoff))
        ref = y0.astype(np.float64) + m.astype(np.float64) @ x[4:].astype(np.float64)
        np.testing.assert_allclose(K.spmv(fl, x, y0.copy(), xoff=4), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(ParameterError, match="block kind"):
        K.lane_spmm(fl, np.ones((48, 8), np.float32), np.zeros((64, 8), np.float32))
    with pytest.raises(ParameterError, match="one column index per block"):
        K.spmv((fl[0], fl[1], fl[2][:-1], fl[3]), x, y0.copy())
    with pytest.raises(ParameterError, match="outside x"):
        K.spmv(fl, x[:40], y0.copy())


def test_half_weights_must_be_float16_values():
    with pytest.raises(ParameterError, match="not float16"):
        to_engine(np.full((8, 8), 0.1, np.float32), kind=0, half=True)
    assert is_half_exact(np.float32([0.5, -2.0, 65504.0, 0.0]))
    assert not is_half_exact(np.float32([0.1])) and not is_half_exact(np.float32([70000.0]))
    assert not is_half_exact(np.float32([np.nan]))


def test_lanes_round_up_to_eight():
    assert [K.lanes(b) for b in (1, 7, 8, 9, 16, 17, 33)] == [8, 8, 8, 16, 16, 24, 40]
    with pytest.raises(ParameterError, match=">= 1"):
        K.lanes(0)


@pytest.mark.parametrize("n_lanes", [8, 24, 32])
def test_lane_softmax_and_scan_draw_what_draw_draws(n_lanes):
    """Per lane, the lane softmax + scan picks exactly the class of the one-stream _draw, near
    ties included (same float operations in the same order), for many uniforms."""
    rng = np.random.default_rng(n_lanes)
    nc = K.N_CLASSES
    logits = (rng.standard_normal((n_lanes, nc)) * rng.choice([0.1, 1.0, 8.0], (n_lanes, 1))).astype(np.float32)
    inv = np.float32(1.0 / 0.7)
    LG = np.ascontiguousarray(logits.T).reshape(-1)
    P = np.zeros(nc * n_lanes, np.float32)
    G = np.zeros(nc // 8 * n_lanes, np.float32)
    TOT = np.zeros(n_lanes, np.float32)
    K._lane_softmax(LG, inv, P, np.zeros(8 * n_lanes, np.float32), np.zeros(8 * n_lanes, np.float32), G, TOT, n_lanes)
    probs = np.zeros(nc, np.float32)
    for q in range(n_lanes):
        for u in rng.random(20):
            assert K._lane_scan(P, G, TOT[q], u, q, n_lanes) == K._draw(logits[q], inv, u, probs)
        np.testing.assert_array_equal(P[q::n_lanes], probs)  # the numerators too, bit for bit


def test_conv1d_matches_twin_and_does_not_depend_on_the_window():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((23, 12)).astype(np.float32)
    for k in (1, 3, 5):
        w = rng.standard_normal((20, 12, k)).astype(np.float32)
        b = rng.standard_normal(20).astype(np.float32)
        y = K.conv1d(x, w, b)
        np.testing.assert_allclose(y, naive.conv1d(x, w, b), rtol=1e-5, atol=1e-5)
        pad = (k - 1) // 2
        for lo, hi in ((0, 9), (3, 17), (5, 23), (0, 1)):
            part = K.conv1d(x[lo:hi], w, b)  # rows away from the window's edges: same bytes
            a = lo + pad if lo else 0
            z = max(a, hi - pad if hi < 23 else 23)
            np.testing.assert_array_equal(part[a - lo:z - lo], y[a:z])
    with pytest.raises(ParameterError, match="odd"):
        K.conv1d(x, np.zeros((4, 12, 2), np.float32), np.zeros(4, np.float32))


_K16 = 3 if K.KEEPS_16X4 else 0  # 16x4 where it is the faster layout (kernels.MEASURED_GFLOPS)


@pytest.mark.parametrize("file_block,kind", [((16, 4), _K16), ((8, 4), 0), ((8, 8), 0),
                                             ((4, 4), 1), ((16, 1), 2), ((32, 4), _K16)])
def test_file_blocks_convert_without_fill(file_block, kind):
    rng = np.random.default_rng(1)
    bs = naive.random_sparse(96, 32, file_block, 0.2, rng, 1.0)
    dense = bs.to_dense()
    assert choose_block_kind(dense) == kind
    mat = to_engine(bs)
    assert mat[3] == kind
    np.testing.assert_array_equal(engine_dense(mat, dense.shape), dense)
    assert mat[0].size == np.count_nonzero(dense)  # no zero-filled blocks


def test_unstructured_file_reblocks_exactly():
    rng = np.random.default_rng(2)
    m = (rng.standard_normal((32, 16)) * (rng.random((32, 16)) < 0.05)).astype(np.float32)
    bs = BlockSparse.from_dense(m, (1, 1))
    mat = to_engine(bs)
    np.testing.assert_array_equal(engine_dense(mat, m.shape), m)


def test_block_kind_needs_a_fitting_shape():
    with pytest.raises(Exception, match="multiple of 8"):
        choose_block_kind(np.ones((6, 6), np.float32))


def test_uniforms_are_splitmix64_and_resume_across_calls():
    st = K.rng_state(12345)
    a = K.uniforms(st, 3)
    b = K.uniforms(st, 4)
    np.testing.assert_array_equal(np.concatenate([a, b]), naive.uniforms(12345, 7))
    assert np.all((a >= 0) & (a < 1))


def test_rng_states_are_splitmix_outputs():
    assert K.rng_states(7, 4).tolist() == naive.splitmix_outputs(7, 4)
    assert K.rng_state(-1)[0] == np.uint64(2 ** 64 - 1)


def test_uniforms_look_uniform():
    u = K.uniforms(K.rng_state(3), 50000).ravel()
    hist = np.histogram(u, bins=10, range=(0, 1))[0]
    expected = u.size / 10
    chi2 = float(np.sum((hist - expected) ** 2 / expected))
    assert chi2 < 40.0  # 9 degrees of freedom; p < 1e-5 beyond this


def test_draw_matches_inverse_cdf_twin():
    rng = np.random.default_rng(4)
    checked = 0
    for i in range(600):
        logits = (rng.standard_normal(256) * rng.choice([0.1, 1.0, 5.0, 30.0])).astype(np.float32)
        u = float(rng.random())
        temp = float(rng.choice([0.3, 1.0, 1.7]))
        if naive.tie_margin(logits, u, temp) < 1e-5:
            continue  # a float32 and a float64 CDF may legitimately split a near-tie differently
        assert K.sample_class(logits, u, temperature=temp) == naive.draw(logits, u, temp), (i, u, temp)
        checked += 1
    assert checked > 550


def test_draw_edges():
    logits = np.full(256, -1e4, np.float32)
    logits[7] = 0.0
    assert K.sample_class(logits, 0.0) == 7  # classes with (flushed) zero probability are never drawn
    assert K.sample_class(logits, 1.0 - 2.0 ** -53) == 7
    flat = np.zeros(256, np.float32)
    assert K.sample_class(flat, 0.0) == 0
    assert K.sample_class(flat, 0.999999) == 255
    assert K.sample_class(flat, 0.5) == naive.draw(flat, 0.5) == 128


def _gap(probs: np.ndarray) -> float:
    """The share of [0, 1) where u * total (the 8-chain total) exceeds the scan's final running sum
    (groups of 8 summed as the scan sums them, in float32): rounding, a few ulp wide or none."""
    f = np.float32
    acc = f(0)
    for g in range(0, probs.size, 8):
        p = probs[g:g + 8]
        acc = f(acc + f(f(f(p[0] + p[1]) + f(p[2] + p[3])) + f(f(p[4] + p[5]) + f(p[6] + p[7]))))
    return 1.0 - float(acc) / float(K._sum8(probs))


def test_a_draw_in_the_rounding_gap_takes_a_possible_class_in_one_stream_and_in_lanes():
    # A coarse-like softmax, its top classes impossible; u placed where the running sum of the scan
    # never reaches u * total. The old scan fell back to class 255: a full-scale click.
    rng = np.random.default_rng(0)
    L, q, checked = 4, 2, 0
    P, MX, S8 = np.empty(256 * L, np.float32), np.empty(8 * L, np.float32), np.empty(8 * L, np.float32)
    G, TOT = np.empty(32 * L, np.float32), np.empty(L, np.float32)
    probs = np.empty(256, np.float32)
    for _ in range(2000):
        logits = np.full(256, -200.0, np.float32)
        centre, w = rng.integers(60, 150), rng.integers(8, 60)
        logits[centre - w // 2:centre + w // 2] = rng.normal(0, rng.uniform(0.1, 3), w // 2 * 2)
        K._scaled_exp(logits, K._max(logits), np.float32(1.0), probs)
        width = _gap(probs)
        if width <= 0:
            continue
        u = 1.0 - width / 2
        k = K.sample_class(logits, u)
        K._lane_softmax(np.ascontiguousarray(np.repeat(logits, L)), np.float32(1.0), P, MX, S8, G, TOT, L)
        assert K._lane_scan(P, G, TOT[q], u, q, L) == k  # a lane draws as one stream does
        assert probs[k] > 0 and k == np.flatnonzero(probs)[-1], (k, u)  # the last possible class
        checked += 1
    assert checked > 200


def test_wrappers_validate():
    with pytest.raises(ParameterError, match="temperature"):
        K.sample_class(np.zeros(256, np.float32), 0.5, temperature=0.0)
    with pytest.raises(ParameterError, match=r"\[0, 1\)"):
        K.sample_class(np.zeros(256, np.float32), 1.0)
    mat = to_engine(np.ones((8, 8), np.float32), kind=0)
    with pytest.raises(ParameterError, match="outside x"):
        K.spmv(mat, np.ones(8, np.float32), np.zeros(8, np.float32), xoff=4)
    with pytest.raises(ParameterError, match="lanes"):
        K.lane_spmm(mat, np.ones((8, 8), np.float32), np.zeros((8, 16), np.float32))
    with pytest.raises(ParameterError, match="float32"):
        K.spmv(mat, np.ones(8, np.float64), np.zeros(8, np.float32))
    with pytest.raises(ParameterError, match="uint64"):
        K.uniforms(np.zeros(1, np.int64), 3)


def test_warmup_compiles_everything():
    K.warmup()
    for f in (K._generate, K._generate_lanes, K._generate_streams, K._spmv, K._spmm, K._lane_spmm, K._conv_rows,
              K._fill_uniforms):
        if hasattr(f, "signatures"):  # absent under NUMBA_DISABLE_JIT=1
            assert f.signatures
    for f in (K._generate, K._generate_lanes, K._generate_streams, K._generate_period, K._spmv, K._lane_spmm):
        if hasattr(f, "signatures"):  # block weights as float32 and as float16 bits (voice files)
            sigs = [str(sig) for sig in f.signatures]
            assert any("uint16" in sig for sig in sigs) and any("uint16" not in sig for sig in sigs), f


def test_warmup_compiles_mel_matching_as_a_voice_runs_it():
    """After warmup(), mel matching (a voice's load, then a request of its own sizes) compiles
    nothing more: warmup gave the transforms the types MelMatch passes."""
    from wavern.engine.kernels import stft
    from wavern.engine.melmatch import MelMatch, MelMatchConfig

    if not hasattr(stft.analyse, "signatures"):
        pytest.skip("numba JIT disabled")
    K.warmup()
    before = [len(f.signatures) for f in (stft.analyse, stft.synthesise)]
    assert before == [1, 1]
    mm = MelMatch(MelMatchConfig(iterations=2))
    mm.load()
    rng = np.random.default_rng(3)
    mm.apply((rng.standard_normal(3000) * 3000).astype(np.int16), rng.standard_normal((12, 80)).astype(np.float32))
    assert [len(f.signatures) for f in (stft.analyse, stft.synthesise)] == before


def _import_flag(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_SLP_VECTORIZE"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip() + "|" + res.stderr


def test_slp_vectoriser_is_switched_on_only_when_kernels_import_numba_first():
    first = _import_flag("import wavern.engine.kernels as K; print(K.SLP_ACTIVE)")
    assert first.startswith("True|")
    late = _import_flag("import numba; import wavern.engine.kernels as K; print(K.SLP_ACTIVE)")
    assert late.startswith("False|") and "SLP vectoriser is off" in late


def test_512_bit_vectors_are_allowed_exactly_where_the_cpu_has_them():
    """wavern's import adds -prefer-256-bit to the host's own features, as numba would read them,
    on AVX-512 CPUs only; a user's setting, WAVERN_VECTOR_BITS=256 or a numba imported first
    leave numba's default (and the 8x4 blocks)."""
    import llvmlite.binding as ll

    host = ll.get_host_cpu_features()
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CPU_FEATURES", "WAVERN_VECTOR_BITS", "WAVERN_NUMBA_CPU_FEATURES")}
    code = "import os, wavern.engine.kernels as K; print(K.WIDE_VECTORS, os.environ.get('NUMBA_CPU_FEATURES', ''))"

    def run(extra: dict, prefix: str = "") -> tuple[str, str]:
        res = subprocess.run([sys.executable, "-c", prefix + code], capture_output=True, text=True,
                             env=env | extra, timeout=120)
        assert res.returncode == 0, res.stderr
        flag, _, features = res.stdout.strip().partition(" ")
        return flag, features

    flag, features = run({})
    if host.get("avx512f"):
        assert flag == "True" and features == host.flatten() + ",-prefer-256-bit"
    else:
        assert flag == "False" and features == ""
    assert run({"WAVERN_VECTOR_BITS": "256"}) == ("False", "")
    assert run({"NUMBA_CPU_FEATURES": host.flatten()}) == ("False", host.flatten())
    assert run({}, prefix="import numba; ") == ("False", "")
    if host.get("avx512f"):  # a child of a wavern process decides afresh (it may run on another machine)
        ours = host.flatten() + ",-prefer-256-bit"
        inherited = {"NUMBA_CPU_FEATURES": ours, "WAVERN_NUMBA_CPU_FEATURES": ours}
        assert run(inherited | {"WAVERN_VECTOR_BITS": "256"}) == ("False", "")
        assert run(inherited) == ("True", ours)


def test_cache_status_counts_the_builds_this_process_can_load(tmp_path):
    """The first-compile notice reads cache_status(): a build for other CPU features (another
    vector width) is not one this process can load (session 15's review saw a silent 78 s compile
    after WAVERN_VECTOR_BITS=256, with the 512-bit builds counted)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CPU_FEATURES", "WAVERN_VECTOR_BITS", "WAVERN_NUMBA_CPU_FEATURES")}
    env["NUMBA_CACHE_DIR"] = str(tmp_path)

    def status(code: str = "", **extra: str) -> tuple[bool, int]:
        res = subprocess.run([sys.executable, "-c", "import numpy as np, wavern.engine.kernels as K; " + code
                              + "print(K.WIDE_VECTORS, K.cache_status()[1])"],
                             capture_output=True, text=True, env=env | extra, timeout=300)
        assert res.returncode == 0, res.stderr
        wide, n = res.stdout.split()
        return wide == "True", int(n)

    assert status()[1] == 0
    wide, n = status("K.vexp(np.zeros(4, np.float32)); ")  # compiles and caches vexp (and what it calls)
    assert n >= 1
    assert status() == (wide, n)  # a later process loads the same builds
    # other features: nothing to load, though the index files are there (without AVX-512 the
    # setting changes nothing)
    assert status(WAVERN_VECTOR_BITS="256") == (False, 0 if wide else n)



def test_cache_status_stops_counting_at_at_most():
    """``wavern say`` only asks whether any build is cached (``at_most=1``): the count stops there."""
    K.warmup()
    where, full = K.cache_status()
    if where is None:
        pytest.skip("numba's cache is off (no SLP vectoriser)")
    assert full >= 30  # every kernel warmup compiles, mel matching's transforms among them
    assert [K.cache_status(at_most=m)[1] for m in (1, 3, full + 5)] == [1, 3, full]


def test_a_cached_kernel_is_keyed_to_every_file_of_the_package(tmp_path):
    """A kernel's build holds the kernels it calls from the package's other files, and numba checks
    only its own file: a build made from other sources of the package (here: another digest) is not
    loaded, though its file is unchanged."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    code = ("import numpy as np, wavern.engine.kernels as K, wavern.engine.kernels.jit as J, "
            "wavern.engine.kernels.fastexp as E; {}K.vexp(np.zeros(4, np.float32)); "
            "print(K.cache_status()[1], sum(E._vexp.stats.cache_hits.values()))")

    def run(before: str = "") -> tuple[int, int]:
        res = subprocess.run([sys.executable, "-c", code.format(before)], capture_output=True, text=True, env=env,
                             timeout=300)
        assert res.returncode == 0, res.stderr
        counted, hits = res.stdout.split()
        return int(counted), int(hits)

    n, hits = run()
    assert n >= 1 and hits == 0  # compiled and cached (vexp's kernel and the one it calls)
    assert run() == (n, 1)  # loaded
    assert run("J.SOURCE_DIGEST = 'edited'; ") == (n, 0)  # other sources: compiled again (and cached)

def test_kernels_compiled_without_the_slp_vectoriser_stay_out_of_the_cache(tmp_path):
    # numba's cache key does not record the setting: cached slow kernels would be loaded later by
    # processes that report SLP_ACTIVE
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_SLP_VECTORIZE"}
    env["NUMBA_CACHE_DIR"] = str(tmp_path)
    draw = "import numpy as np; K.sample_class(np.zeros(256, np.float32), 0.5); print(K.SLP_ACTIVE)"
    res = subprocess.run([sys.executable, "-c", "import numba; import wavern.engine.kernels as K; " + draw],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0 and res.stdout.strip() == "False", res.stderr
    assert not list(tmp_path.rglob("*.nbi"))
    res = subprocess.run([sys.executable, "-c", "import wavern.engine.kernels as K; " + draw],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0 and res.stdout.strip() == "True", res.stderr
    assert list(tmp_path.rglob("*.nbi"))  # the vectorised ones are cached


@pytest.mark.parametrize("taps", [1, 3, 5, 7, 9])
def test_the_period_input_adds_each_taps_product_in_tap_order(taps):
    """The fused pass (the first 1/3/5 taps with the copy of the frame's inputs) against a numpy
    twin that rounds every product and every sum to float32 in tap order, as the one-pass-per-tap
    code did: the same bytes (the diff reviewer found samples blind to a reordered sum)."""
    rng = np.random.default_rng(taps)
    n3 = 48
    row = rng.standard_normal(n3 + 4).astype(np.float32)
    row[n3 + 2] = 37.0  # the frame's lag (column lag_col)
    w_back = rng.standard_normal((taps, n3)).astype(np.float32)
    ring = rng.standard_normal(101) * 3000.0
    for hd in (0, 50, 100):
        fb = np.zeros(n3, np.float32)
        K._period_inputs(row, w_back, 512.0, n3 + 2, ring, hd, fb, np.zeros((0, n3), np.float32), np.zeros(1))
        want = row[:n3].copy()
        for j in range(taps):
            x = np.float32(ring[(hd - 37 + 1 + j - taps // 2) % ring.shape[0]] / 512.0)
            want = (want + (w_back[j] * x).astype(np.float32)).astype(np.float32)
        np.testing.assert_array_equal(fb, want)
    fb = np.zeros(n3, np.float32)  # no lag: the frame's inputs as they are
    row[n3 + 2] = 0.0
    K._period_inputs(row, w_back, 512.0, n3 + 2, ring, 0, fb, np.zeros((0, n3), np.float32), np.zeros(1))
    np.testing.assert_array_equal(fb, row[:n3])
