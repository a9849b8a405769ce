"""npusim.checks.conv_lab (lab 04's hooks around npusim.conv) and the checks of lab 04."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import npusim as ns
import npusim.conv as conv
from conv_reference import conv2d_numpy
from npusim import checks as check
from npusim import formats
from npusim.conv import ConvGeometry, choose_tiling
from npusim.checks.conv_lab import (BandConv, ReferenceBand, ZeroWriter, conv2d_float64, explore_tiling,
                                    run_band_conv)

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


@FAST
@given(layers(), st.booleans())
def test_reference_band_is_the_reuse_kernel(c, bias):
    """The answer to exercise 1, run through BandConv, is the package's reuse kernel: same output, same
    bytes, same time."""
    rng = np.random.default_rng(c["seed"])
    x = rng.standard_normal((c["n"], c["cin"], c["h"], c["w"])).astype(np.float16)
    w = rng.standard_normal((c["cout"], c["cin"], c["kh"], c["kw"])).astype(np.float16)
    b = rng.standard_normal(c["cout"]).astype(np.float16) if bias else None
    args = (x, w, b, c["stride"], c["padding"], c["dilation"])
    mine = run_band_conv(ReferenceBand, *args, out_dtype="float32")
    ref = conv.run_reuse(*args, out_dtype="float32")
    np.testing.assert_array_equal(mine.output, ref.output)
    assert mine.profile.path_bytes == ref.profile.path_bytes
    assert mine.profile.total_cycles == ref.profile.total_cycles
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
            for j in range(self.g.kw):
                for row in range(self.slots + 1):
                    self.load_row(copies, band, j, row)

    class BadRow(ReferenceBand):
        def band_row(self, r, i):
            return r + i + 100

    class BadTap(ReferenceBand):
        def load_band(self, copies, band):
            self.load_row(copies, band, self.g.kw, 0)

    with pytest.raises(ns.UsageError, match="holds"):
        run_band_conv(TooMany, x, w, None, 1, 1)
    with pytest.raises(ns.UsageError, match="band_row"):
        run_band_conv(BadRow, x, w, None, 1, 1)
    with pytest.raises(ns.UsageError, match="width tap"):
        run_band_conv(BadTap, x, w, None, 1, 1)
    with pytest.raises(NotImplementedError):
        run_band_conv(BandConv, x, w, None, 1, 1)
    with pytest.raises(ns.UsageError):
        run_band_conv(object, x, w, None, 1, 1)
    g = ConvGeometry.of(x.shape, w.shape, 1, 1)
    with pytest.raises(ns.UsageError, match="reuse"):
        run_band_conv(ReferenceBand, x, w, None, 1, 1, tiling=choose_tiling(g, None, "layout"))


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


# --- the checks of lab 04 (marker lab04) ---------------------------------------------------------------

SLOTS = 2048


@ns.kernel
def dma_transform(x, x5, n: int, c: int, h: int, w: int) -> None:
    isz = x.dtype.itemsize
    c0 = 32 // isz
    c1 = -(-c // c0)
    hw = h * w
    pipe = ns.TPipe()
    q = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT)
    pipe.init_buffer(q, 2, SLOTS * 32)
    zeros = ZeroWriter(pipe, x.dtype)
    for b in range(n):
        if c % c0:
            zeros(x5[(b * c1 + c1 - 1) * hw * c0:], hw * c0)
        for ch in range(c):
            src = (b * c + ch) * hw
            dst = (b * c1 + ch // c0) * hw * c0 + ch % c0
            for p0 in range(0, hw, SLOTS):
                cnt = min(SLOTS, hw - p0)
                t = q.alloc_tensor(x.dtype)
                ns.data_copy_pad(t, x[src + p0:], ns.DataCopyExtParams(cnt, isz, 0, 0))
                q.enque(t)
                t = q.deque()
                ns.data_copy_pad(x5[dst + p0 * c0:], t, ns.DataCopyExtParams(cnt, isz, 0, (c0 - 1) * isz))
                q.free_tensor(t)


@pytest.mark.lab04
def test_dma_transform_is_exact_on_a_big_plane():
    x = np.random.default_rng(0).standard_normal((1, 5, 50, 47)).astype(np.float16)   # H*W > SLOTS
    want = formats.nchw_to_nc1hwc0(x)
    out = ns.launch(dma_transform, 1, x, np.full(want.shape, np.nan, np.float16), *x.shape)["x5"]
    np.testing.assert_array_equal(out, want)


@pytest.mark.lab04
def test_lab04_checks_accept_the_solutions(capsys):
    check.conv_reuse(ReferenceBand)
    check.nc1hwc0_transform(dma_transform)
    g = ConvGeometry.of((1, 128, 28, 28), (128, 128, 3, 3), 1, 1)
    check.conv_tiling(lambda: choose_tiling(g).replace(rows=4))
    out = capsys.readouterr().out
    assert out.count("PASSED") == 3


@pytest.mark.lab04
def test_lab04_checks_reject_wrong_answers():
    class NoStride(ReferenceBand):
        def band_row(self, r, i):
            return r + i

    class Twice(ReferenceBand):              # correct, but loads every row twice
        def load_band(self, copies, band):
            super().load_band(copies, band)
            super().load_band(copies, band)

    with pytest.raises(check.CheckFailed, match="elements are wrong"):
        check.conv_reuse(NoStride)
    with pytest.raises(check.CheckFailed, match="once per width tap"):
        check.conv_reuse(Twice)
    with pytest.raises(check.CheckFailed, match="not finished"):
        check.conv_reuse(BandConv)
    with pytest.raises(check.CheckFailed, match="BandConv"):
        check.conv_reuse(42)

    @ns.kernel
    def no_padding(x, x5, n, c, h, w):       # forgets the zero padding channels
        isz = x.dtype.itemsize
        c0 = 32 // isz
        c1 = -(-c // c0)
        pipe = ns.TPipe()
        q = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT)
        pipe.init_buffer(q, 2, SLOTS * 32)
        for b in range(n):
            for ch in range(c):
                t = q.alloc_tensor(x.dtype)
                ns.data_copy_pad(t, x[(b * c + ch) * h * w:], ns.DataCopyExtParams(h * w, isz, 0, 0))
                q.enque(t)
                t = q.deque()
                ns.data_copy_pad(x5[(b * c1 + ch // c0) * h * w * c0 + ch % c0:], t,
                                 ns.DataCopyExtParams(h * w, isz, 0, (c0 - 1) * isz))
                q.free_tensor(t)

    with pytest.raises(check.CheckFailed, match="never written"):
        check.nc1hwc0_transform(no_padding)
    g = ConvGeometry.of((1, 128, 28, 28), (128, 128, 3, 3), 1, 1)
    with pytest.raises(check.CheckFailed, match="1 % faster"):
        check.conv_tiling(choose_tiling(g))
    with pytest.raises(check.CheckFailed, match="does not run"):
        check.conv_tiling(choose_tiling(g).replace(rows=28, m_tile=256, k_tile=512))
    with pytest.raises(check.CheckFailed, match="ConvTiling"):
        check.conv_tiling(lambda: "rows=4")
