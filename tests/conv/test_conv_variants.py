"""Every variant computes torch's conv2d: random shapes, strides, padding, dilation, dtypes and presets."""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import npusim as ns
import npusim.conv as conv
from conv_reference import assert_conv_close, conv2d_reference

pytestmark = pytest.mark.conv

# derandomized (reproducible, and no example database written into the work tree), no deadline: a launch
# takes tens of milliseconds
FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)


@st.composite
def configs(draw, max_c: int = 40, max_hw: int = 20):
    """A Conv2D configuration in the ranges of the labs; the kernel window always fits the padded input."""
    c = dict(n=draw(st.integers(1, 2)), cin=draw(st.integers(1, max_c)), cout=draw(st.integers(1, max_c)),
             h=draw(st.integers(1, max_hw)), w=draw(st.integers(1, max_hw)),
             kh=draw(st.integers(1, 5)), kw=draw(st.integers(1, 5)),
             stride=(draw(st.integers(1, 3)), draw(st.integers(1, 3))),
             padding=(draw(st.integers(0, 2)), draw(st.integers(0, 2))),
             dilation=(draw(st.integers(1, 2)), draw(st.integers(1, 2))),
             bias=draw(st.booleans()), seed=draw(st.integers(0, 2 ** 16)))
    assume(c["h"] + 2 * c["padding"][0] >= c["dilation"][0] * (c["kh"] - 1) + 1)
    assume(c["w"] + 2 * c["padding"][1] >= c["dilation"][1] * (c["kw"] - 1) + 1)
    return c


def make_inputs(c, dtype):
    rng = np.random.default_rng(c["seed"])
    xs, ws = (c["n"], c["cin"], c["h"], c["w"]), (c["cout"], c["cin"], c["kh"], c["kw"])
    if np.dtype(dtype) == np.int8:
        return (rng.integers(-128, 128, xs).astype(np.int8), rng.integers(-128, 128, ws).astype(np.int8), None)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(c["cout"]).astype(dtype) if c["bias"] else None
    return x, w, b


def check(c, variant, dtype, config="a2", out_dtype=None, **kw):
    x, w, b = make_inputs(c, dtype)
    res = conv.conv2d(x, w, b, c["stride"], c["padding"], c["dilation"], variant=variant, config=config,
                      out_dtype=out_dtype, **kw)
    ref = conv2d_reference(x, w, b, c["stride"], c["padding"], c["dilation"])
    assert_conv_close(res.output, ref, dtype, c["cin"] * c["kh"] * c["kw"])
    assert res.output.dtype == np.dtype(out_dtype or ("int32" if np.dtype(dtype) == np.int8 else dtype))
    return res


@pytest.mark.parametrize("variant", conv.VARIANTS)
@settings(FAST, max_examples=10)
@given(c=configs(), fp32_out=st.booleans())
def test_fp16_on_a2(variant, c, fp32_out):
    check(c, variant, np.float16, out_dtype="float32" if fp32_out else None)


@pytest.mark.parametrize("variant", conv.VARIANTS)
@settings(FAST, max_examples=3)
@given(c=configs(max_c=24, max_hw=12))
def test_fp16_on_classic(variant, c):
    """No Fixpipe: every tile leaves L0C through UB on the vector pipe."""
    check(c, variant, np.float16, config="classic")


@pytest.mark.parametrize("variant", ["layout", "img2col"])
@settings(FAST, max_examples=5)
@given(c=configs(max_c=24, max_hw=14))
def test_fp32_on_a2(variant, c):
    check(c, variant, np.float32)


@pytest.mark.parametrize("variant", ["layout", "img2col"])
@settings(FAST, max_examples=5)
@given(c=configs(max_c=40, max_hw=12))
def test_int8_to_int32_is_exact(variant, c):
    c = dict(c, bias=False)
    check(c, variant, np.int8)


def test_reference_layer_shapes_of_cin_cout_not_multiples_of_16():
    c = dict(n=1, cin=19, cout=21, h=13, w=11, kh=3, kw=3, stride=(1, 1), padding=(1, 1), dilation=(1, 1),
             bias=True, seed=7)
    for v in conv.VARIANTS:
        check(c, v, np.float16)


@pytest.mark.parametrize("variant", conv.VARIANTS)
def test_fp32_on_classic_raises_the_simulators_dtype_error(variant):
    x = np.zeros((1, 4, 5, 5), np.float32)
    w = np.zeros((4, 4, 3, 3), np.float32)
    with pytest.raises(ns.DtypeError, match="'classic' Cube does not take float32"):
        conv.conv2d(x, w, variant=variant, config="classic")


@pytest.mark.parametrize("variant", ["direct", "reuse"])
@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_nchw_variants_explain_why_they_need_16_bit_types(variant, dtype):
    x = np.zeros((1, 4, 5, 5), dtype)
    w = np.zeros((4, 4, 3, 3), dtype)
    with pytest.raises(ns.DtypeError, match="if_transpose"):
        conv.conv2d(x, w, variant=variant)


def test_int8_bias_and_bad_arguments_are_usage_errors():
    x = np.zeros((1, 4, 5, 5), np.int8)
    w = np.zeros((4, 4, 3, 3), np.int8)
    with pytest.raises(ns.UsageError, match="bias"):
        conv.conv2d(x, w, np.zeros(4, np.int32))
    with pytest.raises(ns.UsageError, match="channels"):
        conv.conv2d(np.zeros((1, 3, 5, 5), np.float16), np.zeros((4, 4, 3, 3), np.float16))
    with pytest.raises(ns.UsageError, match="does not fit"):
        conv.conv2d(np.zeros((1, 4, 2, 2), np.float16), np.zeros((4, 4, 3, 3), np.float16))
    with pytest.raises(ns.DtypeError, match="int32"):
        conv.conv2d(x, w, out_dtype="float16")
    with pytest.raises(ns.UsageError, match="variant"):
        conv.conv2d(np.zeros((1, 4, 5, 5), np.float16), np.zeros((4, 4, 3, 3), np.float16), variant="winograd")


@pytest.mark.parametrize("variant", conv.VARIANTS)
def test_several_blocks_give_the_same_bits(variant):
    """Blocks split the bands (and output blocks); each one's arithmetic is unchanged."""
    c = dict(n=2, cin=20, cout=36, h=11, w=13, kh=3, kw=2, stride=(1, 2), padding=(1, 1), dilation=(2, 1),
             bias=True, seed=3)
    x, w, b = make_inputs(c, np.float16)
    args = (x, w, b, c["stride"], c["padding"], c["dilation"])
    one = conv.conv2d(*args, variant=variant)
    three = conv.conv2d(*args, variant=variant, block_dim=3)
    np.testing.assert_array_equal(one.output, three.output)
    assert three.profile.block_dim == 3


@pytest.mark.parametrize("variant,changes", [
    ("direct", dict(rows=3, cols=16, cin_block=16, cout_block=16, l1_buffers=1)),
    ("reuse", dict(rows=2, cols=16, cin_block=16, cout_block=32, weights_resident=False)),
    ("layout", dict(rows=4, cin_block=16, cout_block=16, l1_buffers=1, l0_buffers=1)),
    ("img2col", dict(rows=2, m_tile=32, k_tile=48, cout_block=16, weights_resident=False, l0c_buffers=1)),
    ("img2col", dict(rows=3, cin_block=16, m_tile=48, k_tile=32, l1_buffers=1)),
])
def test_small_user_tilings_split_every_dimension(variant, changes):
    """Cin blocks accumulate in L0C, Cout blocks and column tiles are separate tiles, streamed weights
    come from GM per tile: all give the same result."""
    c = dict(n=1, cin=40, cout=40, h=12, w=35, kh=3, kw=3, stride=(1, 1), padding=(1, 1), dilation=(1, 1),
             bias=True, seed=11)
    x, w, b = make_inputs(c, np.float16)
    g = conv.ConvGeometry.of(x.shape, w.shape, 1, 1, 1, x.dtype)
    t = conv.choose_tiling(g, "a2", variant).replace(**changes)
    res = conv.conv2d(x, w, b, 1, 1, variant=variant, tiling=t)
    assert res.tiling == t
    assert_conv_close(res.output, conv2d_reference(x, w, b, 1, 1), np.float16, 40 * 9)
