"""DataCopy (count, blocked), DataCopyPad and ND->NZ against numpy, with generated sizes and tails."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import npusim as ns
from npusim import formats

from core_helpers import BF16, FAST, assert_bits_equal, ceil_to, hand_gm, hand_gm_strided, rand, records

pytestmark = pytest.mark.core

H = ns.HardEvent
DTYPES = [np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.int8), np.dtype(np.int32), BF16]
dtypes = st.sampled_from(DTYPES)
SENTINEL = {np.dtype(np.float16): -7, np.dtype(np.float32): -7, np.dtype(np.int8): -7, np.dtype(np.int32): -7,
            BF16: -7}


def _filled(n, dtype, value=-7):
    return np.full(n, value, dtype=dtype)


# ---------------------------------------------------------------------------------------------------------
# data_copy, count form
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def copy_through_ub(x, y, count, src_off, dst_off, addrs):
    pipe = ns.TPipe()
    q = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT)
    pipe.init_buffer(q, 1, count * x.dtype.itemsize)
    t = q.alloc_tensor(x.dtype)
    addrs["x"], addrs["y"] = x[src_off:].byte_addr(), y[dst_off:].byte_addr()
    ns.data_copy(t, x[src_off:], count)
    q.enque(t)
    t = q.deque()
    ns.data_copy(y[dst_off:], t, count)
    q.free_tensor(t)


@FAST
@given(dtype=dtypes, blocks=st.integers(1, 300), src_off=st.integers(0, 37), dst_off=st.integers(0, 37),
       extra=st.integers(0, 20), seed=st.integers(0, 2**16))
def test_data_copy_count_roundtrip(dtype, blocks, src_off, dst_off, extra, seed):
    rng = np.random.default_rng(seed)
    count = blocks * 32 // dtype.itemsize
    x = rand(rng, src_off + count + extra, dtype, -100, 100)
    y = _filled(dst_off + count + extra, dtype)
    addrs = {}
    res = ns.launch(copy_through_ub, 1, x, y, count, src_off, dst_off, addrs)
    expected = _filled(y.size, dtype)
    expected[dst_off:dst_off + count] = x[src_off:src_off + count]
    assert_bits_equal(res["y"], expected, "y")
    # each copy takes the documented time: one GM burst of count * itemsize bytes at the port rate
    cfg, rate = ns.a2, ns.a2.gm_rate(1)
    nbytes = count * dtype.itemsize
    (cin,) = records(res, "data_copy", ns.Pipe.MTE2)
    (cout,) = records(res, "data_copy", ns.Pipe.MTE3)
    assert cin.end - cin.start == pytest.approx(hand_gm(cfg, [(addrs["x"], nbytes)], rate))
    assert cout.end - cout.start == pytest.approx(hand_gm(cfg, [(addrs["y"], nbytes)], rate))
    assert cout.start >= cin.end  # the queue orders the two copies
    assert cin.nbytes == cout.nbytes == nbytes
    assert res.profile.path_bytes == {"GM->UB": nbytes, "UB->GM": nbytes}


def test_data_copy_count_is_not_a_cast():
    @ns.kernel
    def k(x, y):
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, 64)
        ns.data_copy(b.get(ns.float32), x, 16)

    with pytest.raises(ns.UsageError, match="does not convert"):
        ns.launch(k, 1, np.zeros(16, np.float16), np.zeros(16, np.float16))


# ---------------------------------------------------------------------------------------------------------
# data_copy, blocked DataCopyParams (32 B units)
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def blocked_copy(x, y, p_in, p_out, ub_bytes, cap, addrs):
    pipe = ns.TPipe()
    b = ns.TBuf(ns.TPosition.VECCALC)
    pipe.init_buffer(b, ub_bytes)
    t = b.get(x.dtype)
    cap["before"] = t.to_numpy()
    addrs["x"], addrs["y"] = x.byte_addr(), y.byte_addr()
    ns.data_copy(t, x, p_in)
    cap["ub"] = t.to_numpy()
    ns.set_flag(H.MTE2_MTE3, 0)
    ns.wait_flag(H.MTE2_MTE3, 0)
    ns.data_copy(y, t, p_out)


def _scatter_blocks(dst: np.ndarray, src: np.ndarray, count: int, blen: int, src_pitch: int, dst_pitch: int,
                    src_base: int = 0, dst_base: int = 0) -> None:
    """Byte-level numpy oracle of a blocked copy."""
    for i in range(count):
        s, d = src_base + i * src_pitch, dst_base + i * dst_pitch
        dst[d:d + blen] = src[s:s + blen]


@FAST
@given(dtype=dtypes, count=st.integers(1, 12), blen=st.integers(1, 6), src_gap=st.integers(0, 5),
       ub_gap=st.integers(0, 4), out_gap=st.integers(0, 5), seed=st.integers(0, 2**16))
def test_data_copy_blocked_params(dtype, count, blen, src_gap, ub_gap, out_gap, seed):
    rng = np.random.default_rng(seed)
    isz = dtype.itemsize
    sp, up, op = (blen + src_gap) * 32, (blen + ub_gap) * 32, (blen + out_gap) * 32
    x = rand(rng, ((count - 1) * sp + blen * 32) // isz + 3, dtype, -100, 100)
    y = _filled(((count - 1) * op + blen * 32) // isz + 5, dtype)
    ub_bytes = (count - 1) * up + blen * 32
    p_in = ns.DataCopyParams(block_count=count, block_len=blen, src_stride=src_gap, dst_stride=ub_gap)
    p_out = ns.DataCopyParams(block_count=count, block_len=blen, src_stride=ub_gap, dst_stride=out_gap)
    cap, addrs = {}, {}
    res = ns.launch(blocked_copy, 1, x, y.copy(), p_in, p_out, ub_bytes, cap, addrs)
    # UB: the blocks land dst_stride * 32 B apart; the gaps keep what was there
    ub_expected = cap["before"].view(np.uint8).copy()
    _scatter_blocks(ub_expected, x.view(np.uint8), count, blen * 32, sp, up)
    np.testing.assert_array_equal(cap["ub"].view(np.uint8), ub_expected)
    # GM: the blocks land out_gap * 32 B apart; the rest of y is untouched
    y_expected = y.view(np.uint8).copy()
    _scatter_blocks(y_expected, x.view(np.uint8), count, blen * 32, sp, op)
    np.testing.assert_array_equal(res["y"].view(np.uint8), y_expected)
    cfg, rate = ns.a2, ns.a2.gm_rate(1)
    (cin,), (cout,) = records(res, pipe=ns.Pipe.MTE2), records(res, pipe=ns.Pipe.MTE3)
    assert cin.end - cin.start == pytest.approx(hand_gm_strided(cfg, addrs["x"], count, blen * 32, sp, rate))
    assert cout.end - cout.start == pytest.approx(hand_gm_strided(cfg, addrs["y"], count, blen * 32, op, rate))
    assert cin.nbytes == count * blen * 32


def test_data_copy_blocked_params_rejects_bad_counts():
    @ns.kernel
    def k(x, p):
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, 4096)
        ns.data_copy(b.get(ns.float16), x, p)

    x = np.zeros(2048, np.float16)
    for p in (ns.DataCopyParams(block_count=0, block_len=1), ns.DataCopyParams(block_count=1, block_len=0),
              ns.DataCopyParams(block_count=4096, block_len=1)):
        with pytest.raises(ns.UsageError, match="block_count"):
            ns.launch(k, 1, x, p)


# ---------------------------------------------------------------------------------------------------------
# other DataCopy routes: UB -> UB on the vector pipe, GM -> L1 -> UB on MTE2/MTE1
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def via_l1_and_ub(x, y, count):
    pipe = ns.TPipe()
    l1 = ns.TQue(ns.TPosition.A1)
    a = ns.TBuf(ns.TPosition.VECCALC)
    b = ns.TBuf(ns.TPosition.VECCALC)
    nbytes = count * x.dtype.itemsize
    pipe.init_buffer(l1, 1, nbytes)
    pipe.init_buffer(a, nbytes)
    pipe.init_buffer(b, nbytes)
    t = l1.alloc_tensor(x.dtype)
    ns.data_copy(t, x, count)                     # GM -> L1 (MTE2)
    l1.enque(t)
    t = l1.deque()
    ns.data_copy(a.get(x.dtype), t, count)        # L1 -> UB (MTE1)
    l1.free_tensor(t)
    ns.set_flag(H.MTE1_V, 0)
    ns.wait_flag(H.MTE1_V, 0)
    ns.data_copy(b.get(x.dtype), a.get(x.dtype), count)  # UB -> UB (V)
    ns.set_flag(H.V_MTE3, 0)
    ns.wait_flag(H.V_MTE3, 0)
    ns.data_copy(y, b.get(x.dtype), count)        # UB -> GM (MTE3)


@FAST
@given(dtype=dtypes, blocks=st.integers(1, 64), seed=st.integers(0, 2**16))
def test_data_copy_gm_l1_ub_ub_routes(dtype, blocks, seed):
    rng = np.random.default_rng(seed)
    count = blocks * 32 // dtype.itemsize
    x = rand(rng, count, dtype, -100, 100)
    res = ns.launch(via_l1_and_ub, 1, x, _filled(count, dtype), count)
    assert_bits_equal(res["y"], x, "y")
    cfg = ns.a2
    nbytes = count * dtype.itemsize
    (l1ub,) = records(res, pipe=ns.Pipe.MTE1)
    (ubub,) = records(res, pipe=ns.Pipe.V)
    assert l1ub.end - l1ub.start == pytest.approx(cfg.onchip_startup_cycles + nbytes / cfg.l1_to_ub_bytes_per_cycle)
    assert ubub.end - ubub.start == pytest.approx(cfg.vector_startup_cycles + -(-nbytes // cfg.vector_bytes_per_cycle))
    assert res.profile.path_bytes == {"GM->L1": nbytes, "L1->UB": nbytes, "UB->UB": nbytes, "UB->GM": nbytes}


@pytest.mark.parametrize("route,hint", [("gm_gm", "go through UB"), ("l1_l0a", "load_data")])
def test_data_copy_wrong_route_names_the_right_instruction(route, hint):
    @ns.kernel
    def k(x, y):
        pipe = ns.TPipe()
        l1, l0a = ns.TBuf(ns.TPosition.A1), ns.TBuf(ns.TPosition.A2)
        pipe.init_buffer(l1, 1024)
        pipe.init_buffer(l0a, 1024)
        if route == "gm_gm":
            ns.data_copy(y, x, 512)
        else:
            ns.data_copy(l0a.get(ns.float16), l1.get(ns.float16), 512)

    with pytest.raises(ns.UsageError, match=hint):
        ns.launch(k, 1, np.zeros(512, np.float16), np.zeros(512, np.float16))


# ---------------------------------------------------------------------------------------------------------
# data_copy_pad
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def pad_in(x, count, pad, ub_elems, cap, addrs):
    pipe = ns.TPipe()
    b = ns.TBuf()
    pipe.init_buffer(b, ub_elems * x.dtype.itemsize)
    t = b.get(x.dtype)
    cap["before"] = t.to_numpy()
    addrs["x"] = x.byte_addr()
    ns.data_copy_pad(t, x, count, pad)
    cap["ub"] = t.to_numpy()


@FAST
@given(dtype=dtypes, count=st.integers(1, 700), is_pad=st.booleans(), data=st.data(), seed=st.integers(0, 2**16))
def test_data_copy_pad_gm_to_ub_pads_the_block(dtype, count, is_pad, data, seed):
    rng = np.random.default_rng(seed)
    isz = dtype.itemsize
    left = data.draw(st.integers(0, 32 // isz), label="left")
    right = data.draw(st.integers(0, 32 // isz), label="right")
    value = data.draw(st.integers(-50, 50), label="padding_value")
    x = rand(rng, count, dtype, -100, 100)
    block = ceil_to((left + count + right) * isz, 32) // isz  # elements of the padded UB block
    ub_elems = block + 32 // isz
    pad = ns.DataCopyPadExtParams(is_pad=is_pad, left_padding=left, right_padding=right, padding_value=value)
    cap, addrs = {}, {}
    res = ns.launch(pad_in, 1, x, count, pad, ub_elems, cap, addrs)
    ub = cap["ub"]
    assert_bits_equal(ub[left:left + count], x, "data")
    if is_pad:
        fill = np.full(block, value, dtype=dtype)
        assert_bits_equal(ub[:left], fill[:left], "left padding")
        assert_bits_equal(ub[left + count:block], fill[left + count:], "right padding")
    assert_bits_equal(ub[block:], cap["before"][block:], "past the padded block")  # not written
    (r,) = records(res, "data_copy_pad")
    assert r.pipe == ns.Pipe.MTE2 and r.nbytes == count * isz
    assert r.end - r.start == pytest.approx(hand_gm(ns.a2, [(addrs["x"], count * isz)], ns.a2.gm_rate(1)))


@ns.kernel
def pad_roundtrip(x, y, count, dst_off):
    pipe = ns.TPipe()
    q = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT)
    pipe.init_buffer(q, 1, count * x.dtype.itemsize)
    t = q.alloc_tensor(x.dtype)
    ns.data_copy_pad(t, x, count)
    q.enque(t)
    t = q.deque()
    ns.data_copy_pad(y[dst_off:], t, count)
    q.free_tensor(t)


@FAST
@given(dtype=dtypes, count=st.integers(1, 1000), dst_off=st.integers(0, 40), extra=st.integers(0, 40),
       seed=st.integers(0, 2**16))
def test_data_copy_pad_ub_to_gm_writes_only_valid_bytes(dtype, count, dst_off, extra, seed):
    rng = np.random.default_rng(seed)
    x = rand(rng, count, dtype, -100, 100)
    y = _filled(dst_off + count + extra, dtype)
    res = ns.launch(pad_roundtrip, 1, x, y, count, dst_off)
    expected = _filled(y.size, dtype)
    expected[dst_off:dst_off + count] = x
    assert_bits_equal(res["y"], expected, "y")


@ns.kernel
def pad_strided(x, y, p_in, p_out, ub_bytes, cap, addrs):
    pipe = ns.TPipe()
    b = ns.TBuf()
    pipe.init_buffer(b, ub_bytes)
    t = b.get(x.dtype)
    cap["before"] = t.to_numpy()
    addrs["x"], addrs["y"] = x.byte_addr(), y.byte_addr()
    ns.data_copy_pad(t, x, p_in, ns.DataCopyPadExtParams(is_pad=True, padding_value=3))
    cap["ub"] = t.to_numpy()
    ns.set_flag(H.MTE2_MTE3, 0)
    ns.wait_flag(H.MTE2_MTE3, 0)
    ns.data_copy_pad(y, t, p_out)


@FAST
@given(dtype=dtypes, count=st.integers(1, 20), elems=st.integers(1, 70), gm_gap=st.integers(0, 50),
       ub_gap=st.integers(0, 3), out_gap=st.integers(0, 50), seed=st.integers(0, 2**16))
def test_data_copy_pad_strided_ext_params(dtype, count, elems, gm_gap, ub_gap, out_gap, seed):
    """GM->UB: block_len and src_stride in bytes, dst_stride in 32 B blocks; UB->GM: src_stride in blocks,
    dst_stride in bytes; every UB block is padded to 32 B."""
    rng = np.random.default_rng(seed)
    isz = dtype.itemsize
    blen, gs, os_ = elems * isz, gm_gap * isz, out_gap * isz
    ub_blk = ceil_to(blen, 32)
    gp, up, op = blen + gs, ub_blk + ub_gap * 32, blen + os_
    x = rand(rng, ((count - 1) * gp + blen) // isz, dtype, -100, 100)
    y = _filled(((count - 1) * op + blen) // isz + 3, dtype)
    ub_bytes = (count - 1) * up + ub_blk
    p_in = ns.DataCopyExtParams(block_count=count, block_len=blen, src_stride=gs, dst_stride=ub_gap)
    p_out = ns.DataCopyExtParams(block_count=count, block_len=blen, src_stride=ub_gap, dst_stride=os_)
    cap, addrs = {}, {}
    res = ns.launch(pad_strided, 1, x, y.copy(), p_in, p_out, ub_bytes, cap, addrs)
    ub_expected = cap["before"].copy()
    pad_block = np.full(ub_blk // isz, 3, dtype=dtype)
    for i in range(count):
        ub_expected[i * up // isz:(i * up + ub_blk) // isz] = pad_block
    ub_expected = ub_expected.view(np.uint8)
    _scatter_blocks(ub_expected, x.view(np.uint8), count, blen, gp, up)
    np.testing.assert_array_equal(cap["ub"].view(np.uint8), ub_expected)
    y_expected = y.view(np.uint8).copy()
    _scatter_blocks(y_expected, x.view(np.uint8), count, blen, gp, op)
    np.testing.assert_array_equal(res["y"].view(np.uint8), y_expected)
    cfg, rate = ns.a2, ns.a2.gm_rate(1)
    (cin,), (cout,) = records(res, pipe=ns.Pipe.MTE2), records(res, pipe=ns.Pipe.MTE3)
    assert cin.end - cin.start == pytest.approx(hand_gm_strided(cfg, addrs["x"], count, blen, gp, rate))
    assert cout.end - cout.start == pytest.approx(hand_gm_strided(cfg, addrs["y"], count, blen, op, rate))
    assert cin.nbytes == cout.nbytes == count * blen


def test_data_copy_pad_rejects_wrong_paths_and_padding():
    @ns.kernel
    def k(x, which):
        pipe = ns.TPipe()
        b, l1 = ns.TBuf(), ns.TBuf(ns.TPosition.A1)
        pipe.init_buffer(b, 1024)
        pipe.init_buffer(l1, 1024)
        if which == "l1":
            ns.data_copy_pad(l1.get(ns.float16), x, 10)
        elif which == "pad":
            ns.data_copy_pad(b.get(ns.float16), x, 10, ns.DataCopyPadExtParams(True, left_padding=17))
        else:
            ns.data_copy_pad(b.get(ns.float16), x, ns.DataCopyExtParams(block_count=1, block_len=3))

    x = np.zeros(64, np.float16)
    with pytest.raises(ns.UsageError, match="GM <-> UB"):
        ns.launch(k, 1, x, "l1")
    with pytest.raises(ns.UsageError, match="32 B"):
        ns.launch(k, 1, x, "pad")
    with pytest.raises(ns.UsageError, match="multiple"):
        ns.launch(k, 1, x, "len")


# ---------------------------------------------------------------------------------------------------------
# data_copy with Nd2NzParams (GM ND -> L1 NZ)
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def nd2nz(x, params, l1_elems, cap, addrs):
    pipe = ns.TPipe()
    b = ns.TBuf(ns.TPosition.A1)
    pipe.init_buffer(b, l1_elems * x.dtype.itemsize)
    t = b.get(x.dtype)
    cap["before"] = t.to_numpy()
    addrs["x"] = x.byte_addr()
    ns.data_copy(t, x, params)
    cap["l1"] = t.to_numpy()


@FAST
@given(dtype=dtypes, n=st.integers(1, 40), d=st.integers(1, 70), pitch_extra=st.integers(0, 9),
       seed=st.integers(0, 2**16))
def test_nd2nz_matches_formats_nd_to_nz(dtype, n, d, pitch_extra, seed):
    rng = np.random.default_rng(seed)
    src_d = d + pitch_extra
    x = rand(rng, n * src_d, dtype, -100, 100)
    nz = formats.nd_to_nz(x.reshape(n, src_d)[:, :d])
    l1_elems = nz.size + 64
    cap, addrs = {}, {}
    res = ns.launch(nd2nz, 1, x, ns.Nd2NzParams(n_value=n, d_value=d, src_d_value=src_d), l1_elems, cap, addrs)
    assert_bits_equal(cap["l1"][:nz.size], nz.reshape(-1), "NZ in L1")
    assert_bits_equal(cap["l1"][nz.size:], cap["before"][nz.size:], "past the fractals")
    # one GM burst per row, src_d elements apart
    isz = dtype.itemsize
    (r,) = records(res, pipe=ns.Pipe.MTE2)
    assert r.end - r.start == pytest.approx(hand_gm_strided(ns.a2, addrs["x"], n, d * isz, src_d * isz,
                                                            ns.a2.gm_rate(1)))
    assert res.profile.path_bytes == {"GM->L1": n * d * isz}


@FAST
@given(dtype=dtypes, n=st.integers(1, 35), d=st.integers(1, 40), nd_num=st.integers(1, 4),
       c0_extra=st.integers(0, 20), mat_gap=st.integers(0, 3), src_gap=st.integers(0, 30),
       seed=st.integers(0, 2**16))
def test_nd2nz_strides_and_several_matrices(dtype, n, d, nd_num, c0_extra, mat_gap, src_gap, seed):
    rng = np.random.default_rng(seed)
    isz = dtype.itemsize
    c0 = 32 // isz
    n16, d1 = ceil_to(n, 16), -(-d // c0)
    c0_stride = n + c0_extra                       # >= n_value, may be below or above n16
    rows = min(n16, c0_stride)                     # rows written per C0 column (data, then zeros)
    mat_stride = d1 * c0_stride * c0 + mat_gap * c0
    src_mat = n * d + src_gap
    x = rand(rng, (nd_num - 1) * src_mat + n * d, dtype, -100, 100)
    l1_elems = (nd_num - 1) * mat_stride + (d1 - 1) * c0_stride * c0 + rows * c0 + c0
    p = ns.Nd2NzParams(n_value=n, d_value=d, src_d_value=d, dst_nz_c0_stride=c0_stride, nd_num=nd_num,
                       src_nd_matrix_stride=src_mat, dst_nz_matrix_stride=mat_stride)
    cap, addrs = {}, {}
    res = ns.launch(nd2nz, 1, x, p, l1_elems, cap, addrs)
    # one GM burst per row of every matrix, one start-up for the instruction
    bursts = [(addrs["x"] + (i * src_mat + r * d) * isz, d * isz) for i in range(nd_num) for r in range(n)]
    (r,) = records(res, pipe=ns.Pipe.MTE2)
    assert r.end - r.start == pytest.approx(hand_gm(ns.a2, bursts, ns.a2.gm_rate(1)))
    expected = cap["before"].copy()
    for i in range(nd_num):
        mat = np.zeros((n16, d1 * c0), dtype)
        mat[:n, :d] = x[i * src_mat:i * src_mat + n * d].reshape(n, d)
        for j in range(d1):
            base = i * mat_stride + j * c0_stride * c0
            expected[base:base + rows * c0] = mat[:rows, j * c0:(j + 1) * c0].reshape(-1)
    assert_bits_equal(cap["l1"], expected, "L1")


def test_nd2nz_needs_l1_and_checks_c0_stride():
    @ns.kernel
    def k(x, where, p):
        pipe = ns.TPipe()
        b = ns.TBuf(ns.TPosition.A1 if where == "L1" else ns.TPosition.VECCALC)
        pipe.init_buffer(b, 4096)
        ns.data_copy(b.get(ns.float16), x, p)

    x = np.zeros(1024, np.float16)
    with pytest.raises(ns.UsageError, match="GM -> L1"):
        ns.launch(k, 1, x, "UB", ns.Nd2NzParams(1, 16, 16))
    with pytest.raises(ns.UsageError, match="dst_nz_c0_stride"):
        ns.launch(k, 1, x, "L1", ns.Nd2NzParams(1, 16, 16, dst_nz_c0_stride=8))
    with pytest.raises(ns.OutOfBoundsError, match="'x'"):
        ns.launch(k, 1, x, "L1", ns.Nd2NzParams(1, 33, 32))
