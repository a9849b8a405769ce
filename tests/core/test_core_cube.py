"""The Cube data path against numpy: load_data (2D), load_data_3d (img2col), mmad and fixpipe."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import npusim as ns
from npusim import formats

from core_helpers import (BF16, FAST, assert_bits_equal, ceil_to, hand_cube, hand_gm_strided, hand_onchip,
                          ints_as, rand, records)

pytestmark = pytest.mark.core

H = ns.HardEvent
F = 512  # bytes of one fractal


# ---------------------------------------------------------------------------------------------------------
# load_data (2D): whole 512 B fractals L1 -> L0A / L0B
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def load2d(x, n_frac, p, to_l0b, l0_bytes, cap):
    pipe = ns.TPipe()
    l1 = ns.TBuf(ns.TPosition.A1)
    l0 = ns.TBuf(ns.TPosition.B2 if to_l0b else ns.TPosition.A2)
    pipe.init_buffer(l1, n_frac * F)
    pipe.init_buffer(l0, l0_bytes)
    ns.data_copy(l1.get(x.dtype), x, x.size)
    ns.set_flag(H.MTE2_MTE1, 0)
    ns.wait_flag(H.MTE2_MTE1, 0)
    t = l0.get(x.dtype)
    cap["before"] = t.to_numpy()
    ns.load_data(t, l1.get(x.dtype), p)
    cap["l0"] = t.to_numpy()


@FAST
@given(dtype=st.sampled_from([np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.int8)]),
       n_frac=st.integers(1, 12), data=st.data(), to_l0b=st.booleans(), seed=st.integers(0, 2**16))
def test_load_data_2d(dtype, n_frac, data, to_l0b, seed):
    transpose = dtype.itemsize == 2 and data.draw(st.booleans(), label="if_transpose")
    start = data.draw(st.integers(0, n_frac - 1), label="start_index")
    src_stride = data.draw(st.integers(0, 3), label="src_stride")
    max_rep = 1 + ((n_frac - 1 - start) // src_stride if src_stride else 5)
    repeat = data.draw(st.integers(1, max_rep), label="repeat_times")
    dst_gap = data.draw(st.integers(0, 2), label="dst_gap")
    rng = np.random.default_rng(seed)
    e = F // dtype.itemsize
    x = rand(rng, n_frac * e, dtype, -100, 100)
    l0_bytes = ((repeat - 1) * (1 + dst_gap) + 1) * F + F
    p = ns.LoadData2DParams(start_index=start, repeat_times=repeat, src_stride=src_stride, dst_gap=dst_gap,
                            if_transpose=transpose)
    cap = {}
    res = ns.launch(load2d, 1, x, n_frac, p, to_l0b, l0_bytes, cap)
    expected = cap["before"].copy()
    frac = x.reshape(n_frac, e)
    for i in range(repeat):
        f = frac[start + i * src_stride]
        if transpose:
            f = f.reshape(16, 16).T.reshape(-1)
        d = i * (1 + dst_gap)
        expected[d * e:(d + 1) * e] = f
    assert_bits_equal(cap["l0"], expected, "L0")
    (r,) = records(res, "load_data")
    cfg = ns.a2
    rate = cfg.l1_to_l0b_bytes_per_cycle if to_l0b else cfg.l1_to_l0a_bytes_per_cycle
    assert r.pipe == ns.Pipe.MTE1
    assert r.end - r.start == pytest.approx(hand_onchip(cfg, repeat * F, rate))
    assert res.profile.path_bytes[f"L1->{'L0B' if to_l0b else 'L0A'}"] == repeat * F


@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_load_data_transpose_needs_16_bit_fractals(dtype):
    x = np.zeros(F // np.dtype(dtype).itemsize, dtype)
    with pytest.raises(ns.DtypeError, match="if_transpose"):
        ns.launch(load2d, 1, x, 1, ns.LoadData2DParams(if_transpose=True), True, F, {})


def test_load_data_out_of_bounds_names_the_tensor():
    x = np.zeros(2 * 256, np.float16)
    with pytest.raises(ns.OutOfBoundsError, match="2 fractals"):
        ns.launch(load2d, 1, x, 2, ns.LoadData2DParams(start_index=1, repeat_times=2), False, 4 * F, {})


# ---------------------------------------------------------------------------------------------------------
# load_data_3d: img2col of an NC1HWC0 image in L1 into ZZ fractals in L0A
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def load3d(img, p, cap):
    pipe = ns.TPipe()
    l1 = ns.TBuf(ns.TPosition.A1)
    l0a = ns.TBuf(ns.TPosition.A2)
    pipe.init_buffer(l1, img.size * img.dtype.itemsize)
    pipe.init_buffer(l0a, p.m_extension * p.k_extension * img.dtype.itemsize)
    ns.data_copy(l1.get(img.dtype), img, img.size)
    ns.set_flag(H.MTE2_MTE1, 0)
    ns.wait_flag(H.MTE2_MTE1, 0)
    ns.load_data_3d(l0a.get(img.dtype), l1.get(img.dtype), p)
    cap["l0a"] = l0a.get(img.dtype).to_numpy()


def _im2col_k_order(chw: np.ndarray, kh, kw, stride, dilation, pads, pad_value, c0):
    """im2col with columns in LoadData3D's K order ((c1 * kh + i) * kw + j) * C0 + c0, built from
    formats.im2col on an image padded by hand with ``pad_value`` (pads = top, bottom, left, right)."""
    c, h, w = chw.shape
    top, bottom, left, right = pads
    xp = np.full((c, h + top + bottom, w + left + right), pad_value, chw.dtype)
    xp[:, top:top + h, left:left + w] = chw
    cols = formats.im2col(xp, kh, kw, stride=stride, padding=(0, 0), dilation=dilation)  # (M, C*kh*kw)
    m = cols.shape[0]
    c1 = c // c0
    return cols.reshape(m, c1, c0, kh, kw).transpose(0, 1, 3, 4, 2).reshape(m, c1 * kh * kw * c0)


@FAST
@given(dtype=st.sampled_from([np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.int8)]),
       c1=st.integers(1, 2), h=st.integers(1, 9), w=st.integers(1, 9), kh=st.integers(1, 3),
       kw=st.integers(1, 3), sh=st.integers(1, 2), sw=st.integers(1, 2), dh=st.integers(1, 2),
       dw=st.integers(1, 2), pads=st.tuples(*[st.integers(0, 2)] * 4), data=st.data(),
       seed=st.integers(0, 2**16))
def test_load_data_3d_matches_im2col(dtype, c1, h, w, kh, kw, sh, sw, dh, dw, pads, data, seed):
    top, bottom, left, right = pads
    ho = (h + top + bottom - dh * (kh - 1) - 1) // sh + 1
    wo = (w + left + right - dw * (kw - 1) - 1) // sw + 1
    if ho < 1 or wo < 1:
        return  # the window does not fit: covered by test_load_data_3d_rejects_bad_tiles
    c0 = 32 // dtype.itemsize
    rng = np.random.default_rng(seed)
    c = c1 * c0
    chw = rand(rng, (c, h, w), dtype, -100, 100)
    img = formats.nchw_to_nc1hwc0(chw[None])[0]          # (C1, H, W, C0)
    pad_value = data.draw(st.sampled_from([0, 7]), label="pad_value")
    full = _im2col_k_order(chw, kh, kw, (sh, sw), (dh, dw), pads, pad_value, c0)  # (Ho*Wo, K)
    m_total, k_total = full.shape
    m16 = ceil_to(m_total, 16)
    m_start = data.draw(st.sampled_from(range(0, m16, 16)), label="m_start")
    m_ext = data.draw(st.integers(1, (m16 - m_start) // 16 + 1), label="m_fractals") * 16
    k_start = data.draw(st.sampled_from(range(0, k_total, c0)), label="k_start")
    k_ext = data.draw(st.integers(1, (k_total - k_start) // c0), label="k_blocks") * c0
    p = ns.LoadData3DParams(l1_h=h, l1_w=w, channel_size=c, kh=kh, kw=kw, m_extension=m_ext, k_extension=k_ext,
                            m_start=m_start, k_start=k_start, stride_h=sh, stride_w=sw, dilation_h=dh,
                            dilation_w=dw, pad_top=top, pad_bottom=bottom, pad_left=left, pad_right=right,
                            pad_value=pad_value)
    assert (p.out_h, p.out_w) == (ho, wo)
    cap = {}
    res = ns.launch(load3d, 1, np.ascontiguousarray(img), p, cap)
    # rows past Ho*Wo (the padding of the last fractal row) read pad_value too
    mat = np.full((m_start + m_ext, k_total), pad_value, dtype)
    mat[:min(m_total, m_start + m_ext)] = full[:m_start + m_ext]
    tile = mat[m_start:m_start + m_ext, k_start:k_start + k_ext]
    assert_bits_equal(cap["l0a"], formats.nd_to_zz(tile).reshape(-1), "L0A")
    (r,) = records(res, "load_data_3d")
    nbytes = m_ext * k_ext * dtype.itemsize
    assert r.pipe == ns.Pipe.MTE1
    assert r.end - r.start == pytest.approx(hand_onchip(ns.a2, nbytes, ns.a2.l1_to_l0a_bytes_per_cycle))


def test_load_data_3d_rejects_bad_tiles():
    img = np.zeros((1, 4, 4, 16), np.float16)
    base = dict(l1_h=4, l1_w=4, channel_size=16, kh=3, kw=3, m_extension=16, k_extension=16)
    with pytest.raises(ns.AlignmentError, match="m_extension"):
        ns.launch(load3d, 1, img, ns.LoadData3DParams(**{**base, "m_extension": 8}), {})
    with pytest.raises(ns.AlignmentError, match="channel_size"):
        ns.launch(load3d, 1, img, ns.LoadData3DParams(**{**base, "channel_size": 8}), {})
    with pytest.raises(ns.UsageError, match="window"):
        ns.launch(load3d, 1, img, ns.LoadData3DParams(**{**base, "kh": 5}), {})


# ---------------------------------------------------------------------------------------------------------
# mmad: GM (ZZ / ZN) -> L1 -> L0A / L0B -> Cube -> L0C, read back with to_numpy()
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def cube(a_zz, b_zn, acc_dtype, steps, cap):
    """``steps``: list of (a_fractal_offset, b_fractal_offset, m, n, k, accumulate) over the fractals in
    L0A / L0B; L0C is captured after every step."""
    pipe = ns.TPipe()
    dt = a_zz.dtype
    a1, b1 = ns.TBuf(ns.TPosition.A1), ns.TBuf(ns.TPosition.B1)
    a2, b2 = ns.TBuf(ns.TPosition.A2), ns.TBuf(ns.TPosition.B2)
    c = ns.TBuf(ns.TPosition.CO1)
    na, nb = a_zz.size * dt.itemsize // F, b_zn.size * dt.itemsize // F
    for buf, nbytes in ((a1, na * F), (b1, nb * F), (a2, na * F), (b2, nb * F)):
        pipe.init_buffer(buf, nbytes)
    m_max = min(128, max(16, *(s[2] for s in steps)))
    n_max = min(128, max(16, *(s[3] for s in steps)))
    pipe.init_buffer(c, ceil_to(m_max, 16) * ceil_to(n_max, 16) * np.dtype(acc_dtype).itemsize)
    ns.data_copy(a1.get(dt), a_zz, a_zz.size)
    ns.data_copy(b1.get(dt), b_zn, b_zn.size)
    ns.set_flag(H.MTE2_MTE1, 0)
    ns.wait_flag(H.MTE2_MTE1, 0)
    ns.load_data(a2.get(dt), a1.get(dt), ns.LoadData2DParams(repeat_times=na))
    ns.load_data(b2.get(dt), b1.get(dt), ns.LoadData2DParams(repeat_times=nb))
    ns.set_flag(H.MTE1_M, 0)
    ns.wait_flag(H.MTE1_M, 0)
    e = F // dt.itemsize
    out = c.get(acc_dtype)
    cap["l0c"] = []
    for fa, fb, m, n, k, acc in steps:
        if acc is None:
            ns.mmad(out, a2.get(dt)[fa * e:], b2.get(dt)[fb * e:], m=m, n=n, k=k)
        else:
            ns.mmad(out, a2.get(dt)[fa * e:], b2.get(dt)[fb * e:], ns.MmadParams(m, n, k, cmatrix_init_val=not acc))
        cap["l0c"].append(out.to_numpy())


def _l0c_to_nd(l0c: np.ndarray, m: int, n: int) -> np.ndarray:
    m1, n1 = -(-m // 16), -(-n // 16)
    return formats.nz_to_nd(l0c[:m1 * n1 * 256].reshape(n1, m1, 16, 16), m, n)


def _exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The exact product (float64 / int64): products of <= 24-bit mantissas are exact in float64."""
    if a.dtype.kind in "iu":
        return a.astype(np.int64) @ b.astype(np.int64)
    return a.astype(np.float64) @ b.astype(np.float64)


def _run_two_products(dtype, acc_dtype, m, n, k, a1, b1, a2, b2, config="a2"):
    """C = A1 @ B1 (fresh), then C += A2 @ B2 (accumulate), then C = A2 @ B2 (fresh again)."""
    za = [formats.nd_to_zz(a).reshape(-1) for a in (a1, a2)]
    zb = [formats.nd_to_zn(b).reshape(-1) for b in (b1, b2)]
    fa, fb = za[0].size * dtype.itemsize // F, zb[0].size * dtype.itemsize // F
    steps = [(0, 0, m, n, k, False), (fa, fb, m, n, k, True), (fa, fb, m, n, k, None)]
    cap = {}
    res = ns.launch(cube, 1, np.concatenate(za), np.concatenate(zb), acc_dtype, steps, cap, config=config)
    return res, [_l0c_to_nd(c, m, n) for c in cap["l0c"]]


mnk = dict(m=st.integers(1, 70), n=st.integers(1, 70), k=st.integers(1, 90))


@FAST
@given(dtype=st.sampled_from(["float16", "bfloat16", "float32"]), **mnk, seed=st.integers(0, 2**16))
def test_mmad_float_inputs_accumulate_in_fp32_exactly(dtype, m, n, k, seed):
    """Small integer values: every product and sum is exact, so fp32 results must match bit for bit."""
    dt = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(seed)
    a1, a2 = ints_as(rng, (m, k), dt), ints_as(rng, (m, k), dt)
    b1, b2 = ints_as(rng, (k, n), dt), ints_as(rng, (k, n), dt)
    res, (c1, c2, c3) = _run_two_products(dt, np.float32, m, n, k, a1, b1, a2, b2)
    p1, p2 = _exact_matmul(a1, b1), _exact_matmul(a2, b2)
    np.testing.assert_array_equal(c1, p1.astype(np.float32))
    np.testing.assert_array_equal(c2, (p1 + p2).astype(np.float32))
    np.testing.assert_array_equal(c3, p2.astype(np.float32))
    # timing and work: padded fractals cost time, useful MACs are m*n*k
    cfg = ns.a2
    mm = records(res, "mmad")
    assert len(mm) == 3 and all(r.pipe == ns.Pipe.M for r in mm)
    for r in mm:
        assert r.end - r.start == pytest.approx(hand_cube(cfg, m, n, k, dtype))
    assert res.profile.cube_macs == 3 * m * n * k
    assert res.profile.cube_ideal_cycles == pytest.approx(3 * m * n * k / cfg.cube_macs_per_cycle[dtype])
    assert res.profile.cube_dtype == dtype


@FAST
@given(dtype=st.sampled_from(["float16", "bfloat16", "float32"]), **mnk, seed=st.integers(0, 2**16))
def test_mmad_float_random_values_round_once_into_fp32(dtype, m, n, k, seed):
    dt = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(seed)
    a1, a2 = rand(rng, (m, k), dt, -2, 2), rand(rng, (m, k), dt, -2, 2)
    b1, b2 = rand(rng, (k, n), dt, -2, 2), rand(rng, (k, n), dt, -2, 2)
    _, (c1, c2, c3) = _run_two_products(dt, np.float32, m, n, k, a1, b1, a2, b2)
    p1, p2 = _exact_matmul(a1, b1), _exact_matmul(a2, b2)
    # one rounding of the exact sum into fp32 (BLAS may sum in another order: allow a couple of ulps)
    np.testing.assert_allclose(c1, p1.astype(np.float32), rtol=2e-7 * 4, atol=1e-6)
    np.testing.assert_allclose(c2, (p1.astype(np.float32) + p2).astype(np.float32), rtol=4e-6, atol=1e-5)
    np.testing.assert_allclose(c3, p2.astype(np.float32), rtol=2e-7 * 4, atol=1e-6)


@FAST
@given(**mnk, seed=st.integers(0, 2**16), big=st.booleans())
def test_mmad_int8_accumulates_exactly_in_int32(m, n, k, seed, big):
    rng = np.random.default_rng(seed)
    lo, hi = (-128, 127) if big else (-5, 5)
    a1, a2 = rand(rng, (m, k), np.int8, lo, hi), rand(rng, (m, k), np.int8, lo, hi)
    b1, b2 = rand(rng, (k, n), np.int8, lo, hi), rand(rng, (k, n), np.int8, lo, hi)
    res, (c1, c2, c3) = _run_two_products(np.dtype(np.int8), np.int32, m, n, k, a1, b1, a2, b2)
    p1, p2 = _exact_matmul(a1, b1), _exact_matmul(a2, b2)
    np.testing.assert_array_equal(c1, p1.astype(np.int32))
    np.testing.assert_array_equal(c2, (p1 + p2).astype(np.int32))
    np.testing.assert_array_equal(c3, p2.astype(np.int32))
    for r in records(res, "mmad"):
        assert r.end - r.start == pytest.approx(hand_cube(ns.a2, m, n, k, "int8"))


def _fp16_accumulate(a: np.ndarray, b: np.ndarray, old: np.ndarray | None) -> np.ndarray:
    """The documented fp16 accumulator: each K0 = 16 block of K is summed exactly and rounded to fp16,
    then added to the running fp16 sum with fp16 rounding (starting from ``old`` when accumulating)."""
    k = a.shape[1]
    out = None if old is None else old.astype(np.float16)
    for j in range(0, k, 16):
        part = (a[:, j:j + 16].astype(np.float64) @ b[j:j + 16].astype(np.float64)).astype(np.float16)
        out = part if out is None else (out.astype(np.float64) + part.astype(np.float64)).astype(np.float16)
    return out


@FAST
@given(**mnk, seed=st.integers(0, 2**16))
def test_mmad_fp16_accumulator_on_classic(m, n, k, seed):
    dt = np.dtype(np.float16)
    rng = np.random.default_rng(seed)
    a1, a2 = rand(rng, (m, k), dt, -2, 2), rand(rng, (m, k), dt, -2, 2)
    b1, b2 = rand(rng, (k, n), dt, -2, 2), rand(rng, (k, n), dt, -2, 2)
    res, (c1, c2, c3) = _run_two_products(dt, np.float16, m, n, k, a1, b1, a2, b2, config="classic")
    e1 = _fp16_accumulate(a1, b1, None)
    assert_bits_equal(c1, e1, "fresh")
    assert_bits_equal(c2, _fp16_accumulate(a2, b2, e1), "accumulated")
    assert_bits_equal(c3, _fp16_accumulate(a2, b2, None), "fresh again")
    for r in records(res, "mmad"):
        assert r.end - r.start == pytest.approx(hand_cube(ns.classic, m, n, k, "float16"))


def test_fp16_accumulator_loses_accuracy_that_fp32_keeps():
    """The point of the FP16 lab: with long K the fp16 accumulator drifts, the fp32 one does not."""
    rng = np.random.default_rng(1)
    m, n, k = 16, 16, 1024 - 16 * 4
    a = rand(rng, (m, k), np.float16, 0, 1)
    b = rand(rng, (k, n), np.float16, 0, 1)
    exact = _exact_matmul(a, b)
    _, (c16, _, _) = _run_two_products(np.dtype(np.float16), np.float16, m, n, k, a, b, a, b, config="classic")
    _, (c32, _, _) = _run_two_products(np.dtype(np.float16), np.float32, m, n, k, a, b, a, b, config="a2")
    err16 = np.max(np.abs(c16 - exact) / exact)
    err32 = np.max(np.abs(c32 - exact) / exact)
    assert err32 < 1e-6 < 1e-4 < err16


@pytest.mark.parametrize("config,a_dt,c_dt,match", [
    ("classic", np.float32, np.float32, "does not take float32"),
    ("a2", np.float16, np.float16, "fp16 -> fp16 accumulation is not supported on 'a2'"),
    ("a2", np.int8, np.float32, "int8 inputs accumulate into int32"),
    ("a2", np.float16, np.int32, "float16 inputs accumulate into float32"),
])
def test_mmad_dtype_errors(config, a_dt, c_dt, match):
    a = np.zeros(F // np.dtype(a_dt).itemsize, a_dt)
    with pytest.raises(ns.DtypeError, match=match):
        ns.launch(cube, 1, a, a.copy(), c_dt, [(0, 0, 16, 16, 16, False)], {}, config=config)


def test_mmad_fp16_accumulation_can_be_enabled_on_a2_for_teaching():
    cfg = ns.a2.replace(name="a2-fp16acc", cube_fp16_accumulate=True)
    a = np.eye(16, dtype=np.float16)
    b = np.arange(256, dtype=np.float16).reshape(16, 16)
    cap = {}
    ns.launch(cube, 1, formats.nd_to_zz(a).reshape(-1), formats.nd_to_zn(b).reshape(-1), np.float16,
              [(0, 0, 16, 16, 16, False)], cap, config=cfg)
    assert_bits_equal(_l0c_to_nd(cap["l0c"][0], 16, 16), b, "I @ B")


def test_mmad_checks_sizes_and_operand_capacity():
    a = np.zeros(256, np.float16)
    with pytest.raises(ns.UsageError, match="m=0"):
        ns.launch(cube, 1, a, a.copy(), np.float32, [(0, 0, 0, 16, 16, False)], {})
    with pytest.raises(ns.UsageError, match=r"n=4096; each of m, n, k must be in 1\.\.4095"):
        ns.launch(cube, 1, a, a.copy(), np.float32, [(0, 0, 16, 4096, 16, False)], {})
    # m=32 needs two fractals of A but L0A holds one
    with pytest.raises(ns.OutOfBoundsError, match="needs 512 elements"):
        ns.launch(cube, 1, a, a.copy(), np.float32, [(0, 0, 32, 16, 16, False)], {})


# ---------------------------------------------------------------------------------------------------------
# fixpipe: L0C (NZ) -> GM (ND) with cast, ReLU and dequant scale
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def mmad_then_fixpipe(a_zz, b_zn, c, m, n, k, fp, scale_gm, addrs):
    """C = A @ B in L0C, then fixpipe(c, L0C, fp); a per-channel scale goes GM -> L1 first."""
    pipe = ns.TPipe()
    dt = a_zz.dtype
    acc = ns.int32 if dt == ns.int8 else ns.float32
    a1, b1 = ns.TBuf(ns.TPosition.A1), ns.TBuf(ns.TPosition.B1)
    a2, b2 = ns.TBuf(ns.TPosition.A2), ns.TBuf(ns.TPosition.B2)
    co1 = ns.TQue(ns.TPosition.CO1)
    na, nb = a_zz.size * dt.itemsize // F, b_zn.size * dt.itemsize // F
    for buf, nbytes in ((a1, na * F), (b1, nb * F), (a2, na * F), (b2, nb * F)):
        pipe.init_buffer(buf, nbytes)
    pipe.init_buffer(co1, 1, ceil_to(m, 16) * ceil_to(n, 16) * 4)
    ns.data_copy(a1.get(dt), a_zz, a_zz.size)
    ns.data_copy(b1.get(dt), b_zn, b_zn.size)
    if scale_gm is not None:
        sb = ns.TBuf(ns.TPosition.A1)
        pipe.init_buffer(sb, scale_gm.size * 4)
        ns.data_copy(sb.get(ns.float32), scale_gm, scale_gm.size)
        ns.set_flag(H.MTE2_FIX, 0)
        ns.wait_flag(H.MTE2_FIX, 0)
        fp = ns.FixpipeParams(fp.m, fp.n, fp.src_stride, fp.dst_stride, fp.relu, deq_scale=sb.get(ns.float32))
    ns.set_flag(H.MTE2_MTE1, 0)
    ns.wait_flag(H.MTE2_MTE1, 0)
    ns.load_data(a2.get(dt), a1.get(dt), ns.LoadData2DParams(repeat_times=na))
    ns.load_data(b2.get(dt), b1.get(dt), ns.LoadData2DParams(repeat_times=nb))
    ns.set_flag(H.MTE1_M, 0)
    ns.wait_flag(H.MTE1_M, 0)
    out = co1.alloc_tensor(acc)
    ns.mmad(out, a2.get(dt), b2.get(dt), m=m, n=n, k=k)
    co1.enque(out)
    out = co1.deque()
    addrs["c"] = c.byte_addr()
    ns.fixpipe(c, out, fp)
    co1.free_tensor(out)


def _identity_times(x: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """ZZ(I) and ZN(x): the Cube reproduces ``x`` exactly in L0C (every sum has one non-zero term)."""
    m = x.shape[0]
    return formats.nd_to_zz(np.eye(m, dtype=dtype)).reshape(-1), formats.nd_to_zn(x.astype(dtype)).reshape(-1)


@FAST
@given(m=st.integers(1, 40), n=st.integers(1, 40), relu=st.booleans(), gap=st.integers(0, 9),
       out=st.sampled_from(["float16", "bfloat16", "float32"]), seed=st.integers(0, 2**16))
def test_fixpipe_fp32_cast_rounds_to_nearest_even(m, n, relu, gap, out, seed):
    rng = np.random.default_rng(seed)
    out_dt = BF16 if out == "bfloat16" else np.dtype(out)
    # fp32 values between representable fp16/bf16 values, plus exact ties (the last test of RNE)
    x = rng.standard_normal((m, n)).astype(np.float32) * 3
    tie = (np.float32(1) + np.float32(2.0 ** -11)) * np.float32(rng.choice([-1, 1], size=(m, n)))  # fp16 tie
    x = np.where(rng.random((m, n)) < 0.25, tie, x).astype(np.float32)
    za, zb = _identity_times(x, np.float32)
    c = np.full((m, n + gap), -9, out_dt)
    fp = ns.FixpipeParams(m, n, dst_stride=n + gap, relu=relu)
    addrs = {}
    res = ns.launch(mmad_then_fixpipe, 1, za, zb, c.reshape(-1), m, n, m, fp, None, addrs)
    ref = np.maximum(x, 0) if relu else x
    expected = c.copy()
    expected[:, :n] = ref.astype(out_dt)  # numpy's float conversion is round-to-nearest-even
    assert_bits_equal(res["c"].reshape(m, n + gap), expected, "c")
    (r,) = records(res, pipe=ns.Pipe.FIX)
    assert r.op == ("fixpipe+relu" if relu else "fixpipe")
    cfg = ns.a2
    osz = out_dt.itemsize
    # the GM side writes into L2 at Fixpipe's rate (the write-back to HBM follows in the background)
    gm = hand_gm_strided(cfg, addrs["c"], m, n * osz, (n + gap) * osz, cfg.fixpipe_bytes_per_cycle)
    l0c = cfg.gm_startup_cycles + ceil_to(m, 16) * ceil_to(n, 16) * 4 / cfg.fixpipe_bytes_per_cycle
    assert r.end - r.start == pytest.approx(max(gm, l0c))
    assert res.profile.path_bytes["L0C->GM"] == m * n * osz


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_fixpipe_fp16_ties_round_to_even():
    # 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: even is 1. 1 + 3 * 2^-11: even is 1 + 2^-9.
    vals = np.array([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, -(1 + 2.0 ** -11), 2049.0, 2051.0, 65519.0, 65520.0,
                     1e-8, 3 * 2.0 ** -25], np.float64).astype(np.float32)
    expected = np.array([1.0, 1 + 2.0 ** -9, -1.0, 2048.0, 2052.0, 65504.0, np.inf, 0.0, 2.0 ** -23],
                        np.float16)
    x = np.zeros((16, 16), np.float32)
    x[0, :vals.size] = vals
    za, zb = _identity_times(x, np.float32)
    c = np.zeros(16 * 16, np.float16)
    res = ns.launch(mmad_then_fixpipe, 1, za, zb, c, 16, 16, 16, ns.FixpipeParams(16, 16), None, {})
    assert_bits_equal(res["c"][:vals.size], expected, "ties")


@FAST
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 64), relu=st.booleans(),
       mode=st.sampled_from(["none", "tensor", "channel"]), out=st.sampled_from(["float16", "int32", "float32"]),
       seed=st.integers(0, 2**16))
def test_fixpipe_int32_with_deq_scale(m, n, k, relu, mode, out, seed):
    if out == "int32" and mode != "none":
        return  # a dequant scale produces floats
    rng = np.random.default_rng(seed)
    a = rand(rng, (m, k), np.int8, -128, 127)
    b = rand(rng, (k, n), np.int8, -128, 127)
    acc = _exact_matmul(a, b).astype(np.int32)
    scale_gm = None
    if mode == "tensor":
        scale = np.float32(rng.uniform(1e-4, 1e-2))
        fp = ns.FixpipeParams(m, n, relu=relu, deq_scale=float(scale))
        scaled = (acc.astype(np.float64) * scale).astype(np.float32)
    elif mode == "channel":
        scale = rng.uniform(1e-4, 1e-2, size=n).astype(np.float32)
        scale_gm = np.zeros(ceil_to(n, 8), np.float32)  # a whole number of 32 B blocks for data_copy
        scale_gm[:n] = scale
        fp = ns.FixpipeParams(m, n, relu=relu)
        scaled = (acc.astype(np.float64) * scale.astype(np.float64)).astype(np.float32)
    else:
        fp = ns.FixpipeParams(m, n, relu=relu)
        scaled = acc
    ref = np.maximum(scaled, 0) if relu else scaled
    out_dt = np.dtype(out)
    c = np.zeros(m * n, out_dt)
    res = ns.launch(mmad_then_fixpipe, 1, formats.nd_to_zz(a).reshape(-1), formats.nd_to_zn(b).reshape(-1), c,
                    m, n, k, fp, scale_gm, {})
    assert_bits_equal(res["c"].reshape(m, n), ref.astype(out_dt), "c")


def test_fixpipe_dtype_and_route_errors():
    za, zb = _identity_times(np.ones((16, 16), np.float32), np.float32)
    with pytest.raises(ns.DtypeError, match="float32 results convert to"):
        ns.launch(mmad_then_fixpipe, 1, za, zb, np.zeros(256, np.int8), 16, 16, 16, ns.FixpipeParams(16, 16),
                  None, {})
    za, zb = _identity_times(np.ones((16, 16), np.float16), np.float16)
    with pytest.raises(ns.UsageError, match="no Fixpipe"):
        ns.launch(mmad_then_fixpipe, 1, za, zb, np.zeros(256, np.float32), 16, 16, 16, ns.FixpipeParams(16, 16),
                  None, {}, config="classic")
    with pytest.raises(ns.OutOfBoundsError, match="'c'"):
        ns.launch(mmad_then_fixpipe, 1, za, zb, np.zeros(255, np.float32), 16, 16, 16, ns.FixpipeParams(16, 16),
                  None, {})


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_fixpipe_overflow_to_inf_is_silent_like_vector_cast():
    x = np.full((16, 16), 1e6, np.float32)
    za, zb = _identity_times(x, np.float32)
    res = ns.launch(mmad_then_fixpipe, 1, za, zb, np.zeros(256, np.float16), 16, 16, 16,
                    ns.FixpipeParams(16, 16), None, {})
    assert np.all(np.isinf(res["c"]))


def test_fixpipe_src_stride_drains_part_of_a_taller_result():
    """L0C holds a 48-row result; fixpipe drains its first 20 rows (src_stride = rows of the NZ source)."""
    rng = np.random.default_rng(5)
    x = rng.integers(-50, 50, (48, 40)).astype(np.float32)
    za, zb = _identity_times(x, np.float32)

    @ns.kernel
    def k(a_zz, b_zn, c):
        pipe = ns.TPipe()
        bufs = [ns.TBuf(p) for p in (ns.TPosition.A1, ns.TPosition.B1, ns.TPosition.A2, ns.TPosition.B2)]
        for buf, t in zip(bufs, (a_zz, b_zn, a_zz, b_zn)):
            pipe.init_buffer(buf, t.size * 4)
        co1 = ns.TQue(ns.TPosition.CO1)
        pipe.init_buffer(co1, 1, 48 * 48 * 4)
        a1, b1, a2, b2 = (b.get(ns.float32) for b in bufs)
        ns.data_copy(a1, a_zz, a_zz.size)
        ns.data_copy(b1, b_zn, b_zn.size)
        ns.set_flag(H.MTE2_MTE1, 0)
        ns.wait_flag(H.MTE2_MTE1, 0)
        ns.load_data(a2, a1, ns.LoadData2DParams(repeat_times=a_zz.size // 128))
        ns.load_data(b2, b1, ns.LoadData2DParams(repeat_times=b_zn.size // 128))
        ns.set_flag(H.MTE1_M, 0)
        ns.wait_flag(H.MTE1_M, 0)
        out = co1.alloc_tensor(ns.float32)
        ns.mmad(out, a2, b2, m=48, n=40, k=48)
        co1.enque(out)
        out = co1.deque()
        ns.fixpipe(c, out, ns.FixpipeParams(20, 40, src_stride=48, relu=True))
        co1.free_tensor(out)

    res = ns.launch(k, 1, za, zb, np.full((20, 40), -1, np.float16))
    np.testing.assert_array_equal(res["c"], np.maximum(x[:20], 0).astype(np.float16))


@ns.kernel
def l0c_to_ub(a_zz, b_zn, c, m, n):
    """classic: L0C -> UB on the vector pipe (count form), then UB -> GM."""
    pipe = ns.TPipe()
    bufs = [ns.TBuf(p) for p in (ns.TPosition.A1, ns.TPosition.B1, ns.TPosition.A2, ns.TPosition.B2)]
    for buf, t in zip(bufs, (a_zz, b_zn, a_zz, b_zn)):
        pipe.init_buffer(buf, t.size * 2)
    co1, ub = ns.TQue(ns.TPosition.CO1), ns.TQue(ns.TPosition.VECOUT)
    count = -(-m // 16) * -(-n // 16) * 256
    pipe.init_buffer(co1, 1, count * 4)
    pipe.init_buffer(ub, 1, count * 4)
    a1, b1, a2, b2 = (b.get(ns.float16) for b in bufs)
    ns.data_copy(a1, a_zz, a_zz.size)
    ns.data_copy(b1, b_zn, b_zn.size)
    ns.set_flag(H.MTE2_MTE1, 0)
    ns.wait_flag(H.MTE2_MTE1, 0)
    ns.load_data(a2, a1, ns.LoadData2DParams(repeat_times=a_zz.size // 256))
    ns.load_data(b2, b1, ns.LoadData2DParams(repeat_times=b_zn.size // 256))
    ns.set_flag(H.MTE1_M, 0)
    ns.wait_flag(H.MTE1_M, 0)
    acc = co1.alloc_tensor(ns.float32)
    ns.mmad(acc, a2, b2, m=m, n=n, k=a_zz.size // (-(-m // 16) * 16))
    co1.enque(acc)
    acc = co1.deque()
    out = ub.alloc_tensor(ns.float32)
    ns.data_copy(out, acc, count)
    co1.free_tensor(acc)
    ub.enque(out)
    out = ub.deque()
    ns.data_copy(c, out, count)
    ub.free_tensor(out)


@pytest.mark.parametrize("m,n", [(16, 16), (20, 40)])
def test_l0c_to_ub_on_classic_runs_on_the_vector_pipe(m, n):
    rng = np.random.default_rng(m)
    k = 32
    a = ints_as(rng, (m, k), np.float16)
    b = ints_as(rng, (k, n), np.float16)
    za, zb = formats.nd_to_zz(a).reshape(-1), formats.nd_to_zn(b).reshape(-1)
    m1, n1 = -(-m // 16), -(-n // 16)
    c = np.zeros(m1 * n1 * 256, np.float32)
    res = ns.launch(l0c_to_ub, 1, za, zb, c, m, n, config="classic")
    nz = res["c"].reshape(n1, m1, 16, 16)
    np.testing.assert_array_equal(formats.nz_to_nd(nz, m, n), _exact_matmul(a, b).astype(np.float32))
    drain = [r for r in records(res, "data_copy") if r.pipe == ns.Pipe.V]
    assert len(drain) == 1
    nbytes = m1 * n1 * 256 * 4
    assert drain[0].end - drain[0].start == pytest.approx(hand_onchip(ns.classic, nbytes, ns.classic.l0c_to_ub_bytes_per_cycle))
    assert res.profile.path_bytes["L0C->UB"] == nbytes
    with pytest.raises(ns.UsageError, match="fixpipe"):  # a2 drains L0C with Fixpipe instead
        ns.launch(l0c_to_ub, 1, za, zb, c, m, n, config="a2")
