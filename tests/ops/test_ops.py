"""The operator wrapping layer: declarations, validation, inference, the two-stage call, the tiling cache,
and every registered operator against a numpy oracle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import npusim as ns
from npusim import ops
from npusim.kernels.matmul import MatmulTiling
from npusim.ops.opdef import OpDef

pytestmark = pytest.mark.ops
SETTINGS = settings(max_examples=12, deadline=None, derandomize=True, database=None)


def conv_ref(x, w, b=None, stride=1, padding=0, dilation=1):
    """float64 NCHW convolution (direct loops over the kernel taps)."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    n, c, h, wd = x.shape
    co, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    ho = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1
    wo = (wd + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
    y = np.zeros((n, co, ho, wo))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dilation:i * dilation + stride * (ho - 1) + 1:stride,
                       j * dilation:j * dilation + stride * (wo - 1) + 1:stride]
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return y + (0 if b is None else b.astype(np.float64)[None, :, None, None])


@given(shape=st.lists(st.integers(1, 300), min_size=1, max_size=3), dt=st.sampled_from([np.float16, np.float32]))
@SETTINGS
def test_add_and_relu_match_numpy(shape, dt):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(dt)
    y = rng.standard_normal(shape).astype(dt)
    assert np.array_equal(ops.call("add", x, y, cache=ops.TilingCache()).out, x + y)
    assert np.array_equal(ops.call("relu", x).out, np.maximum(x, 0))


@given(rows=st.integers(1, 5), cols=st.integers(1, 3000), dt=st.sampled_from([np.float16, np.float32]))
@SETTINGS
def test_softmax_matches_numpy(rows, cols, dt):
    x = (np.random.default_rng(cols).standard_normal((rows, cols)) * 8).astype(dt)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    want = e / e.sum(1, keepdims=True)
    got = ops.call("softmax", x).out
    np.testing.assert_allclose(got, want, rtol=2e-3 if dt == np.float16 else 1e-4, atol=1e-4 if dt == np.float16 else 1e-7)


@given(m=st.integers(1, 80), k=st.integers(1, 80), n=st.integers(1, 80))
@SETTINGS
def test_matmul_float_and_int8(m, k, n):
    rng = np.random.default_rng(m * 10000 + k * 100 + n)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    np.testing.assert_allclose(ops.call("matmul", a, b).out, a.astype(np.float64) @ b.astype(np.float64),
                               rtol=1e-5, atol=1e-5 * np.sqrt(k))
    qa = rng.integers(-127, 128, (m, k)).astype(np.int8)
    qb = rng.integers(-127, 128, (k, n)).astype(np.int8)
    scale = (rng.random(n) * 1e-3).astype(np.float32)
    got = ops.call("matmul", qa, qb, scale).out
    want = (qa.astype(np.int64) @ qb.astype(np.int64)) * scale.astype(np.float64)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max() + 1e-6)
    one = ops.call("matmul", qa, qb, np.array([2e-3], np.float32)).out  # per-tensor scale
    np.testing.assert_allclose(one, (qa.astype(np.int64) @ qb) * 2e-3, rtol=1e-3, atol=1e-3 * np.abs(one).max() + 1e-6)


@given(n=st.integers(1, 2), cin=st.integers(1, 20), cout=st.integers(1, 20), hw=st.integers(3, 12),
       k=st.sampled_from([1, 3]), stride=st.integers(1, 2), pad=st.integers(0, 1), relu=st.booleans(),
       bias=st.booleans())
@SETTINGS
def test_conv2d_op_matches_reference(n, cin, cout, hw, k, stride, pad, relu, bias):
    rng = np.random.default_rng(cin * 100 + cout)
    x = rng.standard_normal((n, cin, hw, hw)).astype(np.float16)
    w = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float16)
    b = rng.standard_normal(cout).astype(np.float16) if bias else None
    r = ops.call("conv2d", x, w, b, stride=stride, padding=pad, relu=relu)
    want = conv_ref(x, w, b, stride, pad)
    if relu:
        want = np.maximum(want, 0)
    assert r.out.shape == want.shape and r.out.dtype == np.float16
    np.testing.assert_allclose(r.out, want, rtol=4e-3, atol=4e-3)
    names = [n for n, _ in r.launches]
    assert names[names.index("conv2d") - 1] == "nchw_to_nc1hwc0" and r.profile is dict(r.launches)["conv2d"]
    assert r.device_us >= r.profile.time_us


def test_validation_messages():
    a = np.ones((4, 3), np.float16)
    with pytest.raises(ops.OpError, match="no operator named"):
        ops.call("nope", a)
    with pytest.raises(ops.OpError, match="inner sizes differ"):
        ops.call("matmul", a, a)
    with pytest.raises(ops.OpError, match="supported: "):
        ops.call("add", a.astype(np.int32), a.astype(np.int32))
    with pytest.raises(ops.OpError, match="same shape"):
        ops.call("add", a, a[:2])
    with pytest.raises(ops.OpError, match="unknown attribute"):
        ops.call("relu", a, alpha=1.0)
    with pytest.raises(ops.OpError, match="axis=0 is not valid"):
        ops.call("softmax", a, axis=0)
    with pytest.raises(ops.OpError, match="takes 3 inputs"):
        ops.call("matmul", a, a, a, a)
    with pytest.raises(ops.OpError, match="need the dequantisation scale"):
        ops.call("matmul", a.astype(np.int8), a.T.astype(np.int8))
    with pytest.raises(ops.OpError, match="bias must have shape"):
        ops.call("conv2d", np.ones((1, 2, 5, 5), np.float16), np.ones((3, 2, 3, 3), np.float16),
                 np.ones(2, np.float16))
    with pytest.raises(ns.CapacityError):
        ops.call("matmul", np.ones((16, 16), np.float16), np.ones((16, 16), np.float16),
                 tiling=MatmulTiling(256, 256, 256, 2))


def test_two_stage_call_and_output_argument():
    a = np.random.default_rng(0).standard_normal((40, 30)).astype(np.float16)
    b = np.random.default_rng(1).standard_normal((30, 20)).astype(np.float16)
    ws, ex = ops.get_workspace_size("matmul", a, b, cache=ops.TilingCache())
    assert ws == 0 and ex.outputs[0].shape == (40, 20) and ex.outputs[0].dtype == np.float32
    assert not ex.outputs[0].any()  # nothing ran yet
    res = ops.execute(ex)
    assert res.out is ex.outputs[0] and res.out.any()
    out = np.empty((40, 20), np.float32)
    _, ex2 = ops.get_workspace_size("matmul", a, b, out=[out])
    assert ops.execute(ex2).out is out
    with pytest.raises(ops.OpError, match="output 'c' must be float32"):
        ops.get_workspace_size("matmul", a, b, out=[np.empty((40, 20), np.float16)])


def test_tiling_cache_hits_misses_and_lru():
    cache = ops.TilingCache(capacity=2)
    x = {n: np.ones(n * 100, np.float16) for n in (1, 2, 3)}
    for n in (1, 2, 1, 3, 2, 1):   # 1 2 1 hit, 3 evicts 2, 2 miss evicts 1, 1 miss
        ops.call("relu", x[n], cache=cache)
    s = cache.stats
    assert (s.hits, s.misses, s.evictions) == (1, 5, 3)
    assert s.hit_rate == pytest.approx(1 / 6)
    assert s.saved_s >= 0 and s.tiling_s > 0
    off = ops.TilingCache(capacity=0)
    ops.call("relu", x[1], cache=off)
    ops.call("relu", x[1], cache=off)
    assert off.stats.misses == 2 and not off.entries


def test_cache_key_depends_on_hardware_and_attrs():
    cache = ops.TilingCache()
    a = np.ones((32, 32), np.float16)
    r1 = ops.call("matmul", a, a, cache=cache)
    r2 = ops.call("matmul", a, a, cache=cache, config="classic")
    r3 = ops.call("matmul", a, a, cache=cache, tiling=MatmulTiling(16, 16, 16, 1))
    r4 = ops.call("matmul", a, a, cache=cache)
    assert [r.cache_hit for r in (r1, r2, r3, r4)] == [False, False, False, True]


def test_a_cache_subclass_chooses_its_key():
    class ByElementCount(ops.TilingCache):
        def key(self, ctx):   # relu's tiling depends on the number of elements only
            return ctx.op, int(np.prod(ctx.input_shapes[0])), ctx.input_dtypes[0].name, ctx.config.key

    cache = ByElementCount()
    x = np.arange(600, dtype=np.float16) - 300
    r1 = ops.call("relu", x.reshape(20, 30), cache=cache)
    r2 = ops.call("relu", x.reshape(30, 20), cache=cache)
    r3 = ops.call("relu", x.astype(np.float32).reshape(30, 20), cache=cache)
    assert [r.cache_hit for r in (r1, r2, r3)] == [False, True, False]
    assert np.array_equal(r2.out, np.maximum(x, 0).reshape(30, 20))
    assert ops.TilingCache().key(ops.get_workspace_size("relu", x)[1].ctx) == ops.runtime.cache_key(
        ops.get_workspace_size("relu", x)[1].ctx)


def test_register_needs_inference_tiling_and_kernel():
    op = OpDef("half_done").input("x", ["float16"]).output("y", ["float16"])
    with pytest.raises(ops.OpError, match="needs infer_shape, tiling"):
        ops.register(op)


def test_int8_matmul_needs_a_fixpipe():
    a = np.ones((16, 32), np.int8)
    with pytest.raises(ops.OpError, match="Fixpipe"):
        ops.call("matmul", a, a.T.copy(), np.ones(16, np.float32), config="classic")
