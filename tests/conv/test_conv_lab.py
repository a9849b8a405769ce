"""npusim.checks.conv_lab (lab 04's hooks around npusim.conv) and the premises of lab 04's exercises (its
checks are tested against their wrong-solution corpus, tests/labs/labcorpus/lab04.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import npusim as ns
import npusim.conv as conv
from conv_reference import conv2d_numpy
from npusim import formats
from npusim.conv import ConvGeometry, choose_tiling
from npusim.checks.conv_lab import (SLOTS, BandConv, Im2colConv, Im2colTile, ReferenceBand, ReferenceIm2col,
                                    ZeroWriter, band_conv, band_conv_args, conv2d_float64, dma_to_nc1hwc0,
                                    explore_tiling, im2col_conv, im2col_conv_args, run_band_conv, run_im2col_conv)

pytestmark = pytest.mark.conv

FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None,
                max_examples=10)


@st.composite
def layers(draw):
    c = dict(n=draw(st.integers(1, 2)), cin=draw(st.integers(1, 36)), cout=draw(st.integers(1, 36)),
             h=draw(st.integers(1, 14)), w=draw(st.integers(1, 20)), kh=draw(st.integers(1, 4)),
             kw=draw(st.integers(1, 4)), stride=(draw(st.integers(1, 2)), draw(st.integers(1, 2))),
             padding=(draw(st.integers(0, 1)), draw(st.integers(0, 1))),
             dilation=(draw(st.integers(1, 2)), draw(st.integers(1, 2))), seed=draw(st.integers(0, 999)))
    assume(c["h"] + 2 * c["padding"][0] >= c["dilation"][0] * (c["kh"] - 1) + 1)
    assume(c["w"] + 2 * c["padding"][1] >= c["dilation"][1] * (c["kw"] - 1) + 1)
    return c


def _layer_args(c: dict, bias: bool, dtype) -> tuple:
    """(x, w, bias, stride, padding, dilation) of a drawn layer."""
    rng = np.random.default_rng(c["seed"])
    x = rng.standard_normal((c["n"], c["cin"], c["h"], c["w"])).astype(dtype)
    w = rng.standard_normal((c["cout"], c["cin"], c["kh"], c["kw"])).astype(dtype)
    b = rng.standard_normal(c["cout"]).astype(dtype) if bias else None
    return x, w, b, c["stride"], c["padding"], c["dilation"]


def _same_run(mine, ref) -> None:
    """Two launches of the same kernel: same output, same bytes on every path, same time."""
    np.testing.assert_array_equal(mine.output, ref.output)
    assert mine.profile.path_bytes == ref.profile.path_bytes
    assert mine.profile.total_cycles == ref.profile.total_cycles


@FAST
@given(layers(), st.booleans())
def test_reference_band_is_the_reuse_kernel(c, bias):
    """The answer to exercise 1, run through BandConv, is the package's reuse kernel."""
    args = _layer_args(c, bias, np.float16)
    mine = run_band_conv(ReferenceBand, *args, out_dtype="float32")
    _same_run(mine, conv.run_reuse(*args, out_dtype="float32"))
    np.testing.assert_allclose(mine.output, conv2d_float64(*args), rtol=1e-5, atol=1e-3)


def test_conv2d_float64_is_the_tests_reference():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 9, 8))
    w = rng.standard_normal((4, 5, 3, 2))
    b = rng.standard_normal(4)
    for s, p, d in ((1, 0, 1), ((2, 1), (1, 2), (1, 2)), (3, 1, 2)):
        np.testing.assert_allclose(conv2d_float64(x, w, b, s, p, d), conv2d_numpy(x, w, b, s, p, d), rtol=1e-12)


def test_band_hooks_report_mistakes():
    x = np.ones((1, 8, 6, 6), np.float16)
    w = np.ones((8, 8, 3, 3), np.float16)

    class TooMany(ReferenceBand):
        def load_band(self, copies, band):
            self.load_row(copies, band, 0, self.slots, 0)

    class BadRow(ReferenceBand):
        def band_row(self, r, i):
            return r + i + 100

    class BadTap(ReferenceBand):
        def load_band(self, copies, band):
            self.load_row(copies, band, self.g.kw, 0, 0)

    class OutsideThePadding(ReferenceBand):
        def load_band(self, copies, band):
            self.load_row(copies, band, 0, 0, -1)

    class LongBand(ReferenceBand):
        def output_bands(self):
            return [(0, 0, self.g.ho + 1)]

    class NotAList(ReferenceBand):
        def output_bands(self):
            return 3

    for cls, words in ((TooMany, "holds"), (BadRow, "band_row"), (BadTap, "width tap"),
                       (OutsideThePadding, "padded input has rows"), (LongBand, "does not fit"), (NotAList, "list")):
        with pytest.raises(ns.UsageError, match=words):
            run_band_conv(cls, x, w, None, 1, 1)
    with pytest.raises(NotImplementedError):
        run_band_conv(BandConv, x, w, None, 1, 1)
    with pytest.raises(ns.UsageError):
        run_band_conv(object, x, w, None, 1, 1)
    g = ConvGeometry.of(x.shape, w.shape, 1, 1)
    with pytest.raises(ns.UsageError, match="reuse"):
        run_band_conv(ReferenceBand, x, w, None, 1, 1, tiling=choose_tiling(g, None, "layout"))


def test_band_trace_records_what_the_kernel_did():
    x = np.random.default_rng(0).standard_normal((1, 8, 9, 6)).astype(np.float16)
    w = np.random.default_rng(1).standard_normal((8, 8, 3, 3)).astype(np.float16)
    g = ConvGeometry.of(x.shape, w.shape, 2, 1)
    t = choose_tiling(g, None, "reuse").replace(rows=2)
    trace: dict = {}
    args, g, t = band_conv_args(ReferenceBand, x, w, None, 2, 1, tiling=t, trace=trace)
    ns.launch(band_conv, 1, *args)
    assert trace["bands"] == [(0, 0, 2), (0, 2, 2), (0, 4, 1)]
    band, loads = trace["loads"][1]
    assert tuple(band[:3]) == (0, 2, 2)
    assert sorted(loads) == [(j, s, 4 + s) for j in range(3) for s in range(g.in_rows(2))]
    assert trace["reads"][(0, 4, 1)] == {(0, 0): 0, (0, 1): 1, (0, 2): 2}


@FAST
@given(layers(), st.booleans(), st.sampled_from(["float16", "float32"]))
def test_reference_im2col_is_the_img2col_kernel(c, bias, dtype):
    """The answer to exercise 3, run through Im2colConv, is the package's img2col kernel (same output, bytes
    and time), and every tile it builds is the tile the check's reference computes."""
    args = _layer_args(c, bias, dtype)
    _same_run(run_im2col_conv(ReferenceIm2col, *args, out_dtype="float32"), conv.run_img2col(*args, out_dtype="float32"))
    trace: dict = {}
    launch_args, _, _ = im2col_conv_args(ReferenceIm2col, *args, out_dtype="float32", trace=trace)
    ns.launch(im2col_conv, 1, *launch_args)
    assert "tile" not in trace and isinstance(trace["current"], Im2colTile)


def test_im2col_trace_keeps_the_first_wrong_tile():
    class NoPadding(ReferenceIm2col):
        def load_3d(self, a, x_l1, tile):
            ns.load_data_3d(a, x_l1, self.expected_params(tile)._replace(pad_top=0, pad_bottom=0))

    x = np.random.default_rng(0).standard_normal((1, 16, 8, 8)).astype(np.float16)
    w = np.random.default_rng(1).standard_normal((16, 16, 3, 3)).astype(np.float16)
    trace: dict = {}
    args, _, _ = im2col_conv_args(NoPadding, x, w, None, 1, 1, trace=trace)
    ns.launch(im2col_conv, 1, *args)
    tile, params, image, got = trace["tile"]
    assert tile.ho0 == 0 and params.pad_top == 1
    with pytest.raises(NotImplementedError):
        run_im2col_conv(Im2colConv, x, w, None, 1, 1)
    with pytest.raises(ns.UsageError, match="Im2colConv"):
        run_im2col_conv(ReferenceBand, x, w, None, 1, 1)


@pytest.mark.parametrize("variant", conv.VARIANTS)
def test_explore_tiling(variant):
    small = ConvGeometry.of((1, 64, 4, 20), (32, 64, 3, 3), 1, 1)
    t = explore_tiling(small, variant, rows=100, cols=100, cin_block=128, cout_block=128)   # clipped to the layer
    assert t.rows == small.ho and t.cols == small.wo and t.cin_block == 64 and t.cout_block == 32
    g = ConvGeometry.of((1, 64, 20, 20), (32, 64, 3, 3), 1, 1)
    t = explore_tiling(g, variant, rows=4, cols=100, cin_block=128, cout_block=128)
    assert t.variant == variant and t.rows == 4 and t.cols == g.wo
    assert t.cin_block == g.cin and t.cout_block == g.cout
    t.check(g, ns.a2)
    t = explore_tiling(g, variant, rows=2, cols=16, cin_block=32, cout_block=16)
    assert t.rows == 2 and t.cin_block == 32 and t.cout_block == 16
    assert t.cols == (g.wo if variant == "img2col" else 16)
    x = np.random.default_rng(1).standard_normal((1, 64, 20, 20)).astype(np.float16)
    w = np.random.default_rng(2).standard_normal((32, 64, 3, 3)).astype(np.float16)
    res = conv.conv2d(x, w, None, 1, 1, variant=variant, tiling=t, out_dtype="float32")
    np.testing.assert_allclose(res.output, conv2d_float64(x, w, None, 1, 1), rtol=1e-4, atol=1e-3)
    with pytest.raises(ns.UsageError):
        explore_tiling(g, variant, rows=2, cols=16, cin_block=20, cout_block=16)   # not a multiple of C0


def test_explore_tiling_shrinks_img2col_tiles_until_they_fit():
    g = ConvGeometry.of((1, 256, 28, 28), (256, 256, 3, 3), 1, 1, 1, "float32")
    base = choose_tiling(g, None, "img2col")
    t = explore_tiling(g, "img2col", rows=base.rows, cols=28, cin_block=64, cout_block=256)
    use = t.usage(g, ns.a2)
    assert all(v <= ns.a2.memory_bytes(m) for m, v in use.items())
    assert t.k_tile <= base.k_tile and t.cin_block == 64
    with pytest.raises(ns.CapacityError):     # a band of all 28 rows and 256 channels cannot fit L1
        explore_tiling(g, "img2col", rows=28, cols=28, cin_block=256, cout_block=256)


@ns.kernel
def _zeros_kernel(y, count: int):
    pipe = ns.TPipe()
    ZeroWriter(pipe, y.dtype, nbytes=1024)(y, count)


@pytest.mark.parametrize("dtype,count", [(np.float16, 1), (np.float32, 1000), (np.int8, 4097)])
def test_zero_writer(dtype, count):
    y = np.full(count + 5, 7, dtype)
    out = ns.launch(_zeros_kernel, 1, y, count)["y"]
    assert (out[:count] == 0).all() and (out[count:] == 7).all()


# --- lab 04's reference transform and the premises of its exercises (marker lab04) -----------------------

@pytest.mark.lab04
def test_dma_transform_is_exact_on_a_big_plane():
    x = np.random.default_rng(0).standard_normal((1, 5, 50, 47)).astype(np.float16)   # H*W > SLOTS
    assert 50 * 47 > SLOTS
    want = formats.nchw_to_nc1hwc0(x)
    out = ns.launch(dma_to_nc1hwc0, 1, x, np.full(want.shape, np.nan, np.float16), *x.shape)["x5"]
    np.testing.assert_array_equal(out, want)


@pytest.mark.lab04
def test_the_tiling_exercise_has_m_padding_to_remove():
    """Exercise 4 of lab 04 asks for a tiling 3 % faster than the img2col default on TILING_LAYER; the lever
    is M padding. If the default stops padding M on this layer, the exercise needs another layer."""
    from npusim.checks._lab04_diagnosis import _m_padding
    from npusim.checks.lab04_conv import TILING_LAYER

    xs, ws, stride, pad = TILING_LAYER
    g = ConvGeometry.of(xs, ws, stride, pad)
    computed, real, odd = _m_padding(choose_tiling(g, None, "img2col"), g)
    assert computed > real and odd, "the default img2col tiling of TILING_LAYER no longer pads M: change the layer"
    assert _m_padding(choose_tiling(g, None, "img2col").replace(rows=4, m_tile=112), g)[:2] == (real, real)


@pytest.mark.lab04
def test_the_explorer_starts_where_every_single_move_is_legal():
    """Every slider of lab 04's explorer, moved alone from its start value, gives a tiling that fits."""
    import ast

    from pathlib import Path

    import nbformat

    nb = nbformat.read(Path(__file__).resolve().parents[2] / "solutions" / "04_conv2d.ipynb", as_version=4)
    src = next(c.source for c in nb.cells if c.cell_type == "code" and "views.Explorer(" in c.source)
    sliders = {}
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("choice", "int_choice"):
            name, options = ast.literal_eval(node.args[0]), node.args[1]
            values = list(conv.VARIANTS) if isinstance(options, ast.Call) else ast.literal_eval(options)
            start = ast.literal_eval(next(k.value for k in node.keywords if k.arg == "value"))
            sliders[name] = (values, start)
    assert set(sliders) == {"variant", "dtype", "rows", "cols", "cin_block", "cout_block"}
    start = {k: v[1] for k, v in sliders.items()}
    for name, (values, _) in sliders.items():
        for v in values:
            s = dict(start, **{name: v})
            g = ConvGeometry.of((1, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1, s["dtype"])
            explore_tiling(g, s["variant"], s["rows"], s["cols"], s["cin_block"], s["cout_block"])   # raises if not
