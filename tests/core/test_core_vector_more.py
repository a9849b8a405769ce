"""The instructions of issue 27 item 5 (and 2): repeat/mask forms, reductions, Compare/Select, more ops, against
numpy; their usage errors name the Ascend C signature (item 8)."""

from __future__ import annotations

import numpy as np
import pytest

import npusim as ns

H = ns.HardEvent


@ns.kernel
def on_ub(fn, n_out, a, b=None, c=None, d=None):
    """Copy every GM argument into its own UB buffer, run ``fn(*tensors)``, copy them all back."""
    gms = [g for g in (a, b, c, d) if g is not None]
    pipe = ns.TPipe()
    bufs = [ns.TBuf() for _ in gms]
    ts = []
    for b, g in zip(bufs, gms):
        pipe.init_buffer(b, max(g.size * g.dtype.itemsize, 32))
        t = b.get(g.dtype)
        ns.data_copy(t, g, g.size)
        ts.append(t)
    ns.set_flag(H.MTE2_V, 0)
    ns.wait_flag(H.MTE2_V, 0)
    n_out["value"] = fn(*ts)
    ns.set_flag(H.V_MTE3, 0)
    ns.wait_flag(H.V_MTE3, 0)
    for t, g in zip(ts, gms):
        ns.data_copy(g, t, g.size)


def run(fn, *arrays):
    out = {}
    arrays = [np.ascontiguousarray(a) for a in arrays]
    ns.launch(on_ub, 1, fn, out, *arrays)
    return arrays, out.get("value")


RNG = np.random.default_rng(7)


def test_repeat_form_with_strides_and_a_bitwise_mask():
    x = RNG.standard_normal(256).astype(np.float32)
    y = RNG.standard_normal(256).astype(np.float32)
    z = np.full(256, -1, np.float32)
    # 2 repeats of 64 fp32 lanes; lanes 0..7 and 32..39; src rep stride 8 blocks, dst 16 blocks
    mask = [0xFF | (0xFF << 32), 0]
    (_, _, zo), _ = run(lambda a, b, c: ns.add(c, a, b, mask, 2, ns.BinaryRepeatParams(1, 1, 1, 16, 8, 8)), x, y, z)
    want = z.copy()
    for r in range(2):
        for lane in list(range(8)) + list(range(32, 40)):
            want[r * 128 + lane] = x[r * 64 + lane] + y[r * 64 + lane]
    np.testing.assert_array_equal(zo, want)


def test_counter_mode_processes_exactly_the_count():
    x = RNG.standard_normal(256).astype(np.float16)
    z = np.zeros(256, np.float16)

    def body(a, c):
        ns.set_mask_count()
        ns.set_vector_mask(0, 200)
        ns.muls(c, a, 2.0, ns.MASK_PLACEHOLDER, 1, ns.UnaryRepeatParams())
        ns.set_mask_norm()
        ns.reset_mask()

    (_, zo), _ = run(body, x, z)
    np.testing.assert_array_equal(zo[:200], (x[:200] * np.float16(2)))
    assert not zo[200:].any()


def test_reduce_min_with_a_mask_and_cal_index():
    x = RNG.permutation(128).astype(np.float16)
    d = np.zeros(16, np.float16)
    w = np.zeros(16, np.float16)
    (_, do, _), _ = run(lambda a, dst, tmp: ns.reduce_min(dst, a, tmp, [0xF, 0], 1, 8, True), x, d, w)
    assert do[0] == x[:4].min() and do[1:2].view(np.uint16)[0] == int(np.argmin(x[:4]))
    (_, do, _), _ = run(lambda a, dst, tmp: ns.reduce_max(dst, a, tmp, 128, True), x, d, w)
    assert do[0] == 127 and do[1:2].view(np.uint16)[0] == int(np.argmax(x))


def test_reduce_max_with_index_needs_room_for_value_and_index():
    x = np.arange(2048, dtype=np.float32)
    d = np.zeros(8, np.float32)
    tmp = np.zeros(32, np.float32)   # 32 repeats: 32 partials fit, 64 (value and index) do not
    run(lambda a, dst, t: ns.reduce_max(dst, a, t, 2048), x, d, tmp)
    with pytest.raises(ns.OutOfBoundsError, match="value and index"):
        run(lambda a, dst, t: ns.reduce_max(dst, a, t, 2048, True), x, d, tmp)


def test_whole_and_block_reductions():
    x = RNG.standard_normal(256).astype(np.float32)   # 4 repeats of 64 lanes
    d = np.zeros(64, np.float32)
    (_, do), _ = run(lambda a, dst: ns.whole_reduce_sum(dst, a, 64, 4, 1, 1, 8), x, d)
    np.testing.assert_allclose(do[:4], x.reshape(4, 64).sum(1), rtol=1e-5)
    (_, do), _ = run(lambda a, dst: ns.whole_reduce_max(dst, a, 64, 4, 1, 1, 8), x, d)
    np.testing.assert_array_equal(do[0:8:2], x.reshape(4, 64).max(1))
    assert list(do[1:8:2].view(np.uint32)) == list(x.reshape(4, 64).argmax(1))
    (_, do), _ = run(lambda a, dst: ns.block_reduce_sum(dst, a, 4, 64, 1, 1, 8), x, d)
    np.testing.assert_allclose(do[:32], x.reshape(32, 8).sum(1), rtol=1e-5)
    (_, do), _ = run(lambda a, dst: ns.block_reduce_max(dst, a, 4, 64, 1, 1, 8), x, d)
    np.testing.assert_array_equal(do[:32], x.reshape(32, 8).max(1))


def test_brcb_gather_and_gather_mask():
    x = RNG.standard_normal(16).astype(np.float32)
    d = np.zeros(128, np.float32)
    (_, do), _ = run(lambda a, dst: ns.brcb(dst, a, 2, ns.BrcbRepeatParams(1, 8)), x, d)
    np.testing.assert_array_equal(do, np.repeat(x, 8))
    src = RNG.standard_normal(64).astype(np.float32)
    off = (RNG.permutation(64)[:16] * 4).astype(np.int32)
    g = np.zeros(16, np.float32)
    (_, _, go), _ = run(lambda s, o, dst: ns.gather(dst, s, o, 0, 16), src, off, g)
    np.testing.assert_array_equal(go, src[off // 4])
    out = np.zeros(64, np.float32)
    (_, mo), cnt = run(lambda s, dst: ns.gather_mask(dst, s, 1, False, 0, ns.GatherMaskParams(1, 1, 8, 0)), src, out)
    assert cnt == 32
    np.testing.assert_array_equal(mo[:32], src[0::2])


@pytest.mark.parametrize("name, ref", [
    ("rsqrt", lambda x: 1 / np.sqrt(x)), ("sigmoid", lambda x: 1 / (1 + np.exp(-x))), ("tanh", np.tanh)])
def test_transcendental_unaries(name, ref):
    x = (RNG.random(64) + 0.5).astype(np.float32)
    d = np.zeros(64, np.float32)
    (_, do), _ = run(lambda a, dst: getattr(ns, name)(dst, a, 64), x, d)
    np.testing.assert_allclose(do, ref(x.astype(np.float64)), rtol=1e-6)


def test_axpy_leaky_relu_power_logic_and_shifts():
    x = RNG.standard_normal(64).astype(np.float32)
    y = RNG.standard_normal(64).astype(np.float32)
    (_, yo), _ = run(lambda a, b: ns.axpy(b, a, 3.0, 64), x, y.copy())
    np.testing.assert_allclose(yo, x * 3 + y, rtol=1e-6)
    (_, yo), _ = run(lambda a, b: ns.leaky_relu(b, a, 0.1, 64), x, y.copy())
    np.testing.assert_allclose(yo, np.where(x >= 0, x, x * np.float32(0.1)), rtol=1e-6)
    (_, yo), _ = run(lambda a, b: ns.power(b, a, 2.0, 64), x, y.copy())
    np.testing.assert_allclose(yo, x * x, rtol=1e-6)
    i = RNG.integers(0, 1000, 64).astype(np.int16)
    j = RNG.integers(0, 1000, 64).astype(np.int16)
    (_, _, o), _ = run(lambda a, b, c: (ns.bitwise_and(c, a, b, 64), ns.bitwise_or(c, c, a, 64)), i, j, j.copy())
    np.testing.assert_array_equal(o, (i & j) | i)
    (_, o), _ = run(lambda a, c: (ns.shift_left(c, a, 2, 64), ns.bitwise_not(c, c, 64)), i, j.copy())
    np.testing.assert_array_equal(o, ~(i << 2))


def test_compare_takes_int8_masks_compare_scalar_and_select_modes():
    x = RNG.standard_normal(128).astype(np.float16)
    y = RNG.standard_normal(128).astype(np.float16)
    m = np.zeros(32, np.int8)
    z = np.zeros(128, np.float16)

    def body(a, b, mask, out):
        ns.compare(mask, a, b, ns.CMPMODE.LT, 128)
        ns.select(out, mask, a, b, ns.SELMODE.VSEL_TENSOR_TENSOR_MODE, 100)   # no 256 B rule for select

    (_, _, mo, zo), _ = run(body, x, y, m, z)
    np.testing.assert_array_equal(np.unpackbits(mo.view(np.uint8), bitorder="little")[:128].astype(bool), x < y)
    np.testing.assert_array_equal(zo[:100], np.minimum(x, y)[:100])
    (_, mo), _ = run(lambda a, mask: ns.compare_scalar(mask, a, 0.0, ns.CMPMODE.GT, 128), x, m)
    np.testing.assert_array_equal(np.unpackbits(mo.view(np.uint8), bitorder="little")[:128].astype(bool), x > 0)

    m2 = np.zeros(32, np.uint8)
    m2[:16] = RNG.integers(0, 256, 16)   # mode 0: one repeat's bits (128 fp16 lanes = 16 B) for every repeat
    z2 = np.zeros(256, np.float16)
    x2, y2 = np.concatenate([x, x]), np.concatenate([y, y])
    (_, _, _, zo), _ = run(lambda a, b, mask, out: ns.select(out, mask, a, b, ns.SELMODE.VSEL_CMPMASK_SPR, 256),
                           x2, y2, m2, z2)
    bits = np.tile(np.unpackbits(m2[:16], bitorder="little").astype(bool), 2)
    np.testing.assert_array_equal(zo, np.where(bits, x2, y2))


def test_a_call_that_does_not_match_names_the_ascend_c_signature():
    x = np.zeros(64, np.float32)
    with pytest.raises(ns.UsageError, match=r"add\(\) missing 2 required positional arguments.*must match "
                                           r"add\(dst, src0, src1, count") as e:
        run(lambda a: ns.add(a, a), x)
    assert "Ascend C: Add(dst, src0, src1, count)" in str(e.value) and "<locals>" not in str(e.value)
    with pytest.raises(ns.UsageError, match=r"Ascend C: WholeReduceSum"):
        run(lambda a: ns.whole_reduce_sum(a, a, 64, 1, 1, 1, 8, 9), x)


def test_event_ids_alloc_fetch_release():
    @ns.kernel
    def k(out):
        pipe = ns.TPipe()
        a = pipe.alloc_event_id(H.V_MTE3)
        b = ns.alloc_event_id(H.V_MTE3)
        out["ids"] = (a, b, ns.fetch_event_id(H.V_MTE3), ns.fetch_event_id(H.MTE2_V))
        ns.set_flag(H.V_MTE3, b)
        ns.wait_flag(H.V_MTE3, b)
        ns.release_event_id(H.V_MTE3, a)
        out["after"] = ns.fetch_event_id(H.V_MTE3)
        ns.release_event_id(H.V_MTE3, a)   # twice

    got = {}
    with pytest.raises(ns.SyncError, match=r"release_event_id\(V_MTE3, 0\): that id was not allocated"):
        ns.launch(k, 1, got)
    assert got == {"ids": (0, 1, 2, 0), "after": 0}
