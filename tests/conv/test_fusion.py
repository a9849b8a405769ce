"""Conv2D + ReLU fusion and int8 dequantisation in the img2col kernel's drain (lab 06's package part).

- The fused kernel gives exactly the separate pair's output (conv kernel, then the vector ReLU kernel) on
  random shapes on both presets, and ReLU commutes with round-to-nearest on every fp32 value that matters.
- int8 x int8 -> int32, dequantised to fp16 with a per-tensor or per-channel scale (+ ReLU), is within fp16
  rounding of a float64 reference, on both presets.
- The fused kernel moves 2 x output bytes less over GM than the pair, and is faster.
- The tiling knows the epilogue's buffers; the conv2d operator fuses, or not, and dequantises.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import npusim as ns
import npusim.conv as conv
from conv_reference import conv2d_reference
from npusim import ops
from npusim.conv.common import Epilogue
from npusim.conv.fusion import chain, compare_fusion, dequant_scales, relu_commutes_with_rounding, run_relu

pytestmark = pytest.mark.conv

FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)


@st.composite
def layers(draw, max_c: int = 40, max_hw: int = 19):
    """Odd sizes, strides 1-3 (often 2), padding up to 3 (bands of padding only), batch 1-2, channel counts
    that are rarely multiples of 16, a bias or not, one to three blocks."""
    c = dict(n=draw(st.integers(1, 2)), cin=draw(st.integers(1, max_c)), cout=draw(st.integers(1, max_c)),
             h=draw(st.integers(1, max_hw)), w=draw(st.integers(1, max_hw)),
             kh=draw(st.integers(1, 5)), kw=draw(st.integers(1, 5)),
             stride=(draw(st.sampled_from([1, 2, 2, 3])), draw(st.sampled_from([1, 2, 2, 3]))),
             padding=(draw(st.integers(0, 3)), draw(st.integers(0, 3))),
             dilation=(draw(st.integers(1, 2)), 1),
             bias=draw(st.booleans()), block_dim=draw(st.integers(1, 3)), seed=draw(st.integers(0, 2 ** 16)))
    assume(c["h"] + 2 * c["padding"][0] >= c["dilation"][0] * (c["kh"] - 1) + 1)
    assume(c["w"] + 2 * c["padding"][1] >= c["kw"])
    return c


def float_inputs(c, dtype=np.float16):
    rng = np.random.default_rng(c["seed"])
    x = rng.standard_normal((c["n"], c["cin"], c["h"], c["w"])).astype(dtype)
    w = (rng.standard_normal((c["cout"], c["cin"], c["kh"], c["kw"])) / np.sqrt(c["cin"] * c["kh"] * c["kw"])
         ).astype(dtype)
    b = rng.standard_normal(c["cout"]).astype(dtype) if c["bias"] else None
    return x, w, b


def fusion(c, config, dtype=np.float16, **kw):
    x, w, b = float_inputs(c, dtype)
    return compare_fusion(x, w, b, c["stride"], c["padding"], c["dilation"], config=config,
                          block_dim=c["block_dim"], **kw), (x, w, b)


def assert_fused_equals_separate(cmp, inputs, c):
    x, w, b = inputs
    assert cmp.equal and cmp.same_bits
    assert cmp.fused.epilogue == Epilogue(relu=True) and not cmp.fused.separate
    assert list(cmp.separate.separate) == ["relu"] and not cmp.separate.epilogue
    ref = np.maximum(conv2d_reference(x, w, b, c["stride"], c["padding"], c["dilation"]), 0)
    k = c["cin"] * c["kh"] * c["kw"]
    tol = np.sqrt(k) * 2.0 ** -11
    np.testing.assert_allclose(cmp.fused.output.astype(np.float64), ref, rtol=tol, atol=2 * tol)
    # the round trip that fusion removes: the ReLU kernel's read and write of the output
    assert cmp.gm_bytes_saved == 2 * cmp.output_bytes
    assert cmp.relu_profile.gm_bytes == 2 * cmp.output_bytes
    assert cmp.separate.profile.gm_bytes == cmp.fused.profile.gm_bytes


# --- fused == separate ------------------------------------------------------------------------------
@settings(FAST, max_examples=25)
@given(c=layers())
def test_fused_equals_separate_on_a2(c):
    """ReLU inside Fixpipe: the same output, and the kernel costs nothing more than the plain convolution."""
    cmp, inputs = fusion(c, "a2")
    assert_fused_equals_separate(cmp, inputs, c)
    assert cmp.fused.profile.total_cycles == cmp.separate.profile.total_cycles   # ReLU rides in Fixpipe for free
    assert cmp.speedup > 1.0


@settings(FAST, max_examples=25)
@given(c=layers())
def test_fused_equals_separate_on_classic(c):
    """ReLU as a vector pass in UB, after the cast: the same output as the separate kernel."""
    cmp, inputs = fusion(c, "classic")
    assert_fused_equals_separate(cmp, inputs, c)
    # the epilogue is one vector instruction per tile, beside the cast every drain has
    ops_of = lambda p: [i.op for i in p.instructions]  # noqa: E731
    fused, plain = ops_of(cmp.fused.profile), ops_of(cmp.separate.profile)
    assert fused.count("relu") == fused.count("cast") == plain.count("cast") > 0 and "relu" not in plain


@pytest.mark.parametrize("config", ["a2", "classic"])
def test_fp32_output_and_explicit_tilings_fuse_exactly(config):
    """fp16 -> fp32 output (no cast in the drain: ReLU reads the accumulator), input channels split into
    blocks, weights streamed, one L1 buffer: the fused result is still the separate one."""
    c = dict(n=2, cin=40, cout=36, h=11, w=9, kh=3, kw=3, stride=(2, 1), padding=(1, 2), dilation=(1, 1),
             bias=True, block_dim=2, seed=7)
    x, w, b = float_inputs(c)
    g = conv.ConvGeometry.of(x.shape, w.shape, c["stride"], c["padding"], 1, "float16")
    t = conv.choose_tiling(g, config).replace(cin_block=16, weights_resident=False, l1_buffers=1, m_tile=32,
                                             k_tile=48)
    cmp = compare_fusion(x, w, b, c["stride"], c["padding"], tiling=t, config=config, block_dim=2)
    assert cmp.same_bits
    cmp32 = compare_fusion(x, w, b, c["stride"], c["padding"], out_dtype="float32", config=config)
    assert cmp32.fused.output.dtype == np.float32 and cmp32.same_bits
    if config == "a2":   # fp32 on A2's Cube
        x32, w32, b32 = (a.astype(np.float32) for a in (x, w, b))
        assert compare_fusion(x32, w32, b32, c["stride"], c["padding"], config=config).same_bits


def test_relu_commutes_with_round_to_nearest():
    """relu(round16(v)) == round16(relu(v)) for every fp32 v near each fp16 value and rounding midpoint, plus
    4M random fp32 bit patterns: why Fixpipe's order (ReLU, then cast) gives the separate pair's values."""
    assert relu_commutes_with_rounding(np.float16) > 4_000_000
    assert relu_commutes_with_rounding(ns.bfloat16, sample=1 << 18) > 1_000_000


def test_negative_zero_is_the_only_possible_bit_difference():
    """A tiny negative accumulator rounds to -0.0 in fp16; the vector ReLU max(-0.0, 0) keeps it, Fixpipe's
    ReLU before its cast gives +0.0: equal values, different sign bits (``same_bits`` counts them as equal).
    End to end the NHWC -> NCHW transform (I @ Y^T on the Cube) adds +0 terms, so conv2d's outputs match."""
    from npusim.numerics import cast

    acc = np.array([-2.0 ** -34, -0.0, 0.0, 2.0 ** -34, -1.0, 3.0], np.float32)
    fixpipe = cast(np.maximum(acc, np.float32(0)), np.float16)
    pair = np.maximum(cast(acc, np.float16), np.float16(0))
    assert np.array_equal(fixpipe, pair)
    assert np.signbit(pair[0]) and not np.signbit(fixpipe[0])
    assert np.signbit(run_relu(np.array([-0.0] * 16, np.float16))[0]).all()    # the vector ReLU keeps -0.0
    x = np.full((1, 1, 1, 1), 2.0 ** -24, np.float16)     # the smallest fp16 subnormal
    w = np.full((1, 1, 1, 1), -2.0 ** -10, np.float16)    # x * w = -2^-34: -0.0 in fp16
    for config in ("a2", "classic"):
        cmp = compare_fusion(x, w, config=config)
        assert cmp.same_bits and np.array_equal(cmp.fused.output.view(np.uint16), cmp.separate.output.view(np.uint16))


# --- GM bytes and time ----------------------------------------------------------------------------------
LAYERS = {  # (n, cin, h, w, cout, k, stride, pad)
    "resnet 3x3 64": (1, 64, 56, 56, 64, 3, 1, 1),
    "1x1 expand": (1, 32, 28, 28, 64, 1, 1, 0),
    "stem-like 3x3 s2": (1, 16, 64, 64, 32, 3, 2, 1),
    "deep 3x3 256": (1, 256, 14, 14, 256, 3, 1, 1),
}


@pytest.fixture(scope="module")
def layer_runs():
    out = {}
    rng = np.random.default_rng(11)
    for name, (n, cin, h, w, cout, k, s, p) in LAYERS.items():
        x = rng.standard_normal((n, cin, h, w)).astype(np.float16)
        wt = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float16)
        for cfg in ("a2", "classic"):
            out[name, cfg] = compare_fusion(x, wt, None, s, p, config=cfg)
    return out


@pytest.mark.parametrize("config", ["a2", "classic"])
@pytest.mark.parametrize("layer", list(LAYERS))
def test_fused_moves_less_and_is_faster(layer_runs, layer, config):
    cmp = layer_runs[layer, config]
    assert cmp.same_bits
    assert cmp.gm_bytes_saved == 2 * cmp.output_bytes
    assert cmp.fused_profile.gm_bytes < cmp.separate_profile.gm_bytes
    assert cmp.speedup > 1.02, cmp.summary()
    d = cmp.figures()
    assert d["time_saved_us"] == pytest.approx(d["separate_us"] - d["fused_us"])
    if config == "a2":
        assert d["epilogue_cost_us"] == 0.0
    else:
        assert 0.0 <= d["epilogue_cost_us"] < d["relu_us"]


def test_speedup_is_largest_where_the_conv_is_memory_bound(layer_runs):
    """The ReLU round trip is a fixed cost per output byte: it matters for a cheap 1x1 layer, hardly for a
    deep 3x3 one (compute-bound)."""
    for cfg in ("a2", "classic"):
        assert layer_runs["1x1 expand", cfg].speedup > 1.3
        assert layer_runs["deep 3x3 256", cfg].speedup < 1.1
        assert layer_runs["1x1 expand", cfg].speedup > layer_runs["resnet 3x3 64", cfg].speedup


def test_chain_puts_launches_end_to_end(layer_runs):
    cmp = layer_runs["1x1 expand", "a2"]
    conv_p, relu_p = cmp.separate.profile, cmp.relu_profile
    pair = chain([conv_p, relu_p])
    assert pair.total_cycles == conv_p.total_cycles + relu_p.total_cycles
    assert pair.gm_bytes == conv_p.gm_bytes + relu_p.gm_bytes
    assert pair.instruction_count == conv_p.instruction_count + relu_p.instruction_count
    assert min(i.start for i in pair.instructions if i.op == "relu") >= conv_p.total_cycles
    assert cmp.separate.total_cycles == pytest.approx(
        conv_p.total_cycles + relu_p.total_cycles + sum(t.total_cycles for t in cmp.separate.transforms.values()))
    fig = cmp.chart()
    assert {a.get_gid() for ax in fig.axes for a in ax.patches} >= {"conv_us", "relu_us", "fused_us"}
    assert "separate launch" not in cmp.fused.summary() and "separate relu kernel" in cmp.separate.summary()


def test_conv2d_relu_for_the_other_variants():
    x = np.random.default_rng(3).standard_normal((1, 5, 9, 9)).astype(np.float16)
    w = np.random.default_rng(4).standard_normal((7, 5, 3, 3)).astype(np.float16)
    base = conv.conv2d(x, w, padding=1, relu=True)
    for v in ("direct", "reuse", "layout"):
        r = conv.conv2d(x, w, padding=1, relu=True, fuse=False, variant=v)
        assert list(r.separate) == ["relu"] and (r.output >= 0).all()
        np.testing.assert_allclose(r.output.astype(np.float32), base.output.astype(np.float32), rtol=2e-3, atol=2e-3)
        with pytest.raises(ns.UsageError, match="img2col"):
            conv.conv2d(x, w, padding=1, relu=True, variant=v)


def test_run_relu_is_the_vector_kernel():
    y = np.random.default_rng(5).standard_normal((3, 7, 11)).astype(np.float16)
    out, prof = run_relu(y)
    assert np.array_equal(out, np.maximum(y, np.float16(0))) and prof.kernel == "relu"
    assert prof.gm_bytes == 2 * y.nbytes


# --- int8 dequantisation ------------------------------------------------------------------------------
def int8_reference(x, w, stride, padding, scale, relu, dilation=1):
    acc = conv2d_reference(x, w, None, stride, padding, dilation).astype(np.float64)
    s = np.asarray(scale, np.float64)
    ref = acc * (s if s.size == 1 else s[None, :, None, None])
    return np.maximum(ref, 0) if relu else ref


def assert_within_fp16_rounding(out, ref):
    """fp32 (scaled accumulator) then fp16, each rounded to nearest: within half an fp16 ulp and a hair."""
    assert out.dtype == np.float16 and np.isfinite(out).all()
    err = np.abs(out.astype(np.float64) - ref)
    bound = np.abs(ref) * (2.0 ** -11 + 2.0 ** -23) + 2.0 ** -25
    assert (err <= bound).all(), float((err / np.maximum(np.abs(ref), 2.0 ** -24)).max())


@pytest.mark.parametrize("config", ["a2", "classic"])
@settings(FAST, max_examples=8)
@given(c=layers(max_c=48, max_hw=14), per_channel=st.booleans(), relu=st.booleans())
def test_int8_dequant_within_fp16_rounding(config, c, per_channel, relu):
    rng = np.random.default_rng(c["seed"])
    x = rng.integers(-128, 128, (c["n"], c["cin"], c["h"], c["w"])).astype(np.int8)
    w = rng.integers(-128, 128, (c["cout"], c["cin"], c["kh"], c["kw"])).astype(np.int8)
    k = c["cin"] * c["kh"] * c["kw"]
    top = 4.0 / (128 * 128 * np.sqrt(k))   # outputs of a few units: well inside fp16
    scale = (rng.random(c["cout"]) * top + top / 8).astype(np.float32) if per_channel else np.float32(top)
    r = conv.conv2d(x, w, None, c["stride"], c["padding"], c["dilation"], relu=relu, deq_scale=scale, config=config,
                    block_dim=c["block_dim"])
    assert r.epilogue == Epilogue(relu=relu, dequant="channel" if per_channel and c["cout"] > 1 else "tensor")
    assert r.output.dtype == np.float16 and r.geometry.out_dtype == "float16"
    assert_within_fp16_rounding(r.output, int8_reference(x, w, c["stride"], c["padding"], scale, relu,
                                                         c["dilation"]))


@pytest.mark.parametrize("config", ["a2", "classic"])
def test_int8_per_channel_over_several_cout_blocks(config):
    """Cout 300: two Cout blocks, so the drain takes the scales of channels 256.. for the second (on classic
    the repeated-scale tile is rebuilt), and one of 1 x 1 kernels with many input channels."""
    rng = np.random.default_rng(9)
    for shape, k, s, p in (((1, 64, 10, 10), 300, 1, 1), ((2, 300, 5, 7), 20, 2, 0)):
        x = rng.integers(-128, 128, shape).astype(np.int8)
        w = rng.integers(-128, 128, (k, shape[1], 3 if k == 300 else 1, 3 if k == 300 else 1)).astype(np.int8)
        scale = (rng.random(k) * 1e-5 + 1e-6).astype(np.float32)
        r = conv.conv2d(x, w, None, s, p, relu=True, deq_scale=scale, config=config, block_dim=2)
        assert_within_fp16_rounding(r.output, int8_reference(x, w, s, p, scale, True))


def test_int8_fixpipe_and_vector_paths_agree():
    """A2 dequantises in Fixpipe (int32 x fp32 in wide arithmetic, one rounding to fp32), classic in UB (int32
    -> fp32 exactly, fp32 multiply): the same fp32, so the same fp16 bits while |acc| < 2^24."""
    rng = np.random.default_rng(12)
    x = rng.integers(-128, 128, (2, 24, 9, 9)).astype(np.int8)
    w = rng.integers(-128, 128, (40, 24, 3, 3)).astype(np.int8)
    for scale in (np.float32(3.1e-5), (rng.random(40) * 1e-4).astype(np.float32)):
        a2 = conv.conv2d(x, w, padding=1, relu=True, deq_scale=scale, config="a2")
        classic = conv.conv2d(x, w, padding=1, relu=True, deq_scale=scale, config="classic")
        assert np.array_equal(a2.output.view(np.uint16), classic.output.view(np.uint16))


def test_dequant_scale_errors():
    x = np.zeros((1, 4, 5, 5), np.int8)
    w = np.zeros((6, 4, 3, 3), np.int8)
    g = conv.ConvGeometry.of(x.shape, w.shape, dtype="int8", dequant=True)
    s, kind = dequant_scales(np.ones(6), g)
    assert kind == "channel" and s.dtype == np.float32 and s.size == 16 and not s[6:].any()
    assert dequant_scales(0.5, g)[1] == "tensor"
    for bad in (np.ones(5), np.ones((6, 1)), np.array([np.inf]), np.array(["a"])):
        with pytest.raises(ns.UsageError, match="deq_scale"):
            conv.conv2d(x, w, deq_scale=bad)
    with pytest.raises(ns.DtypeError, match="int8"):
        conv.conv2d(x.astype(np.float16), w.astype(np.float16), deq_scale=1.0)
    with pytest.raises(ns.DtypeError, match="deq_scale"):
        conv.conv2d(x, w, out_dtype="float16")             # fp16 from int8 needs the scale
    with pytest.raises(ns.UsageError, match="img2col"):
        conv.conv2d(x, w, deq_scale=1.0, variant="layout")


# --- tiling for the fused pipeline -----------------------------------------------------------------------
def test_tiling_knows_the_epilogue_buffers():
    g = conv.ConvGeometry.of((1, 64, 56, 56), (256, 64, 3, 3), 1, 1, dtype="int8", dequant=True)
    ep = Epilogue(relu=True, dequant="channel")
    for preset in ("a2", "classic"):
        cfg = ns.get_config(preset)
        t = conv.choose_tiling(g, cfg, "img2col", ep)
        t.check(g, cfg, ep)
        plan = t.plan(g, cfg, ep)
        assert plan["scale"].length == 256 * 4 and plan["scale"].memory == ("L1" if cfg.has_fixpipe else "UB")
        assert ("scale_tile" in plan) == (not cfg.has_fixpipe)
        assert all(v <= cfg.memory_bytes(m) for m, v in t.usage(g, cfg, ep).items())
        assert any("epilogue" in r for r in t.reasons)
    # on classic the repeated scales take UB from the drain: the plain tiling's M tile no longer fits
    cfg = ns.get_config("classic")
    plain = conv.choose_tiling(g, cfg, "img2col")
    fused = conv.choose_tiling(g, cfg, "img2col", ep)
    assert fused.m_tile < plain.m_tile
    with pytest.raises(ns.CapacityError, match="scale_tile"):
        plain.check(g, cfg, ep)
    # ReLU alone needs no buffer: the same tiling
    g16 = conv.ConvGeometry.of((1, 64, 56, 56), (64, 64, 3, 3), 1, 1)
    assert conv.choose_tiling(g16, cfg, "img2col", Epilogue(relu=True)) == conv.choose_tiling(g16, cfg, "img2col")


# --- the operator --------------------------------------------------------------------------------------
@pytest.mark.parametrize("config", ["a2", "classic"])
def test_conv2d_op_fuses_relu_unless_told_not_to(config):
    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 9, 13, 11)).astype(np.float16)
    w = (rng.standard_normal((20, 9, 3, 3)) / 9).astype(np.float16)
    b = rng.standard_normal(20).astype(np.float16)
    cache = ops.TilingCache()
    fused = ops.call("conv2d", x, w, b, stride=2, padding=1, relu=True, config=config, cache=cache)
    apart = ops.call("conv2d", x, w, b, stride=2, padding=1, relu=True, fuse=False, config=config, cache=cache)
    plain = ops.call("conv2d", x, w, b, stride=2, padding=1, config=config, cache=cache)
    assert np.array_equal(fused.out, apart.out) and np.array_equal(fused.out, np.maximum(plain.out, 0))
    assert [n for n, _ in fused.launches] == ["nchw_to_nc1hwc0", "conv2d", "nhwc_to_nchw"]  # execution order
    assert [n for n, _ in apart.launches] == ["nchw_to_nc1hwc0", "conv2d", "nhwc_to_nchw", "relu"]
    assert fused.tiling.epilogue == Epilogue(relu=True) and not apart.tiling.epilogue
    assert fused.device_us < apart.device_us
    assert cache.stats.misses == 3   # fuse is part of the tiling key


@pytest.mark.parametrize("config", ["a2", "classic"])
def test_conv2d_op_int8_with_scales(config):
    rng = np.random.default_rng(14)
    x = rng.integers(-128, 128, (1, 12, 8, 10)).astype(np.int8)
    w = rng.integers(-128, 128, (18, 12, 3, 3)).astype(np.int8)
    for scale in (np.array([2e-5], np.float32), (rng.random(18) * 4e-5).astype(np.float32)):
        for relu in (False, True):
            r = ops.call("conv2d", x, w, None, scale, padding=1, relu=relu, config=config)
            assert r.out.dtype == np.float16 and r.out.shape == (1, 18, 8, 10)
            assert "conv2d" in [n for n, _ in r.launches] and "relu" not in [n for n, _ in r.launches]
            assert_within_fp16_rounding(r.out, int8_reference(x, w, 1, 1, scale if scale.size > 1 else scale[0],
                                                              relu))
            assert r.tiling.epilogue.dequant == ("tensor" if scale.size == 1 else "channel")


def test_conv2d_op_clear_errors_on_scales():
    x = np.zeros((1, 4, 6, 6), np.int8)
    w = np.zeros((5, 4, 3, 3), np.int8)
    with pytest.raises(ops.OpError, match="need the dequantisation input 'scale'"):
        ops.call("conv2d", x, w)
    for bad in (np.ones(3, np.float32), np.ones((5, 1), np.float32), np.ones(6, np.float32)):
        with pytest.raises(ops.OpError, match=r"'scale' must have shape \(1,\) .* or \(5,\)"):
            ops.call("conv2d", x, w, None, bad)
    with pytest.raises(ops.OpError, match="supported: "):
        ops.call("conv2d", x, w, None, np.ones(5, np.float64))
    with pytest.raises(ops.OpError, match="float16 inputs take none"):
        ops.call("conv2d", x.astype(np.float16), w.astype(np.float16), None, np.ones(5, np.float32))
    with pytest.raises(ops.OpError, match="takes no bias"):
        ops.call("conv2d", x, w, np.zeros(5, np.int32), np.ones(5, np.float32))
    with pytest.raises(ops.OpError, match="img2col"):
        ops.call("conv2d", x, w, None, np.ones(5, np.float32), variant="layout")
