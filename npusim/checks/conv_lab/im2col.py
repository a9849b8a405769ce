"""Lab 04, exercise 3: the img2col kernel with its ``load_data_3d`` call left to the learner.

:class:`Im2colConv` is :class:`npusim.conv.img2col.KernelImg2col` whose one L1 -> L0A step, the
``load_data_3d`` that builds a tile of the im2col matrix from the band in L1, is a method a subclass
writes: ``load_3d(a, x_l1, tile)`` with an :class:`Im2colTile` that says which band, which image rows
are in L1, which Cin block, which output positions and which im2col columns. Everything else (the band's
DMA, the FRACTAL_Z weights, the Mmads, the drain) is the package's.

With a ``trace`` dict the kernel compares every tile the learner's call built with the tile
:func:`im2col_tile` computes from the same L1 image (a peek at L0A that costs no instruction), and keeps
the first one that differs: the check names the parameter that explains it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import npusim as ns

from ... import formats
from ...conv import host
from ...conv.api import ConvResult
from ...conv.common import ceil_div, round_up
from ...conv.geometry import ConvGeometry, dtype_of
from ...conv.img2col import KernelImg2col
from ...conv.tiling import ConvTiling
from .reference import prepare


class Im2colTile(NamedTuple):
    """One K step of one Mmad of the img2col kernel, as :meth:`Im2colConv.load_3d` receives it."""

    n: int           # image
    ho0: int         # the band: first output row ...
    rows: int        # ... and its number of output rows
    first_row: int   # image rows first_row .. first_row + l1_rows - 1 are in L1 (no padding rows: they
    l1_rows: int     # are not in GM); every C1 block of the band holds them, l1_rows x W x C0 each
    cin0: int        # the Cin block in L1: channels cin0 .. cin0 + cin - 1
    cin: int
    m0: int          # output positions m0 .. m0 + m - 1 of the band (position = row * Wo + column,
    m: int           # counted from the band's first output row)
    k0: int          # im2col columns k0 .. k0 + k - 1 of the block, in (c1, i, j, c0) order
    k: int


class Im2colConv(KernelImg2col):
    """The img2col kernel with its ``load_data_3d`` call left open (lab 04, exercise 3). A subclass writes
    ``load_3d(a, x_l1, tile)``: L0A tensor ``a`` = the im2col rows ``tile.m0 ..`` (rounded up to whole
    fractals) x columns ``tile.k0 ..`` of the band in the L1 tensor ``x_l1``."""

    trace: dict | None = None

    def load_3d(self, a, x_l1, tile: Im2colTile) -> None:
        raise NotImplementedError("load_3d: the im2col tile of this K step in L0A, built by load_data_3d")

    # --- what the package provides ------------------------------------------------------------------
    def load_im2col(self, a, x_l1, band, k: int, m0: int, mt: int, k0: int, kt: int) -> None:
        n, ho0, rows = band
        lo, hi, _, _ = self.band_rows(ho0, rows)
        ci0, cc = self.cins[k]
        tile = Im2colTile(n, ho0, rows, lo, hi - lo, ci0, cc, m0, mt, k0, kt)
        if self.trace is not None:
            self.trace["current"] = tile
        self.load_3d(a, x_l1, tile)
        if self.trace is not None and "tile" not in self.trace:
            self._compare(a, x_l1, tile)

    def expected_params(self, tile: Im2colTile) -> ns.LoadData3DParams:
        """The parameters of the package's own ``load_data_3d`` for ``tile`` (the check's reference)."""
        g = self.g
        _, _, pad_top, pad_bottom = self.band_rows(tile.ho0, tile.rows)
        return ns.LoadData3DParams(
            l1_h=tile.l1_rows, l1_w=g.w, channel_size=ceil_div(tile.cin, g.c0) * g.c0, kh=g.kh, kw=g.kw,
            m_extension=round_up(tile.m, 16), k_extension=tile.k, m_start=tile.m0, k_start=tile.k0,
            stride_h=g.sh, stride_w=g.sw, dilation_h=g.dh, dilation_w=g.dw,
            pad_top=pad_top, pad_bottom=pad_bottom, pad_left=g.pw, pad_right=g.pw)

    def _compare(self, a, x_l1, tile: Im2colTile) -> None:
        """Keep the first tile whose L0A content differs from the reference tile (a peek: no instruction)."""
        p = self.expected_params(tile)
        c0 = self.g.c0
        image = x_l1.view()[:x_l1.size].copy()      # the whole L1 buffer: a wrong call may read past the band
        got = a.view()[:a.size].copy()
        if not _same(from_zz(got, p.m_extension, p.k_extension, c0), im2col_tile(image, p, c0)):
            self.trace["tile"] = (tile, p, image, got)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def from_zz(flat: np.ndarray, m_ext: int, k_ext: int, c0: int) -> np.ndarray:
    """The (m_ext x k_ext) matrix held by the first ``m_ext * k_ext`` elements of a ZZ tile, or an empty
    array when the tile is smaller."""
    if flat.size < m_ext * k_ext or m_ext % 16 or k_ext % c0 or m_ext < 16 or k_ext < c0:
        return np.zeros((0, 0), flat.dtype)
    return flat[:m_ext * k_ext].reshape(m_ext // 16, k_ext // c0, 16, c0).transpose(0, 2, 1, 3).reshape(m_ext, k_ext)


def im2col_tile(image: np.ndarray, p: ns.LoadData3DParams, c0: int) -> np.ndarray:
    """What ``load_data_3d(p)`` builds from the flat NC1HWC0 ``image`` (C1 x l1_h x l1_w x C0), as an
    (m_extension x k_extension) matrix: row m = output position (row-major over the padded window grid),
    column k = ((c1 * kh + i) * kw + j) * C0 + c0; windows outside the image read ``pad_value``."""
    m = np.arange(p.m_start, p.m_start + p.m_extension)[:, None]
    k = np.arange(p.k_start, p.k_start + p.k_extension)[None, :]
    ho, wo = np.divmod(m, max(p.out_w, 1))
    c1, rest = np.divmod(k, p.kh * p.kw * c0)
    i, rest = np.divmod(rest, p.kw * c0)
    j, cc = np.divmod(rest, c0)
    h = ho * p.stride_h + i * p.dilation_h - p.pad_top
    w = wo * p.stride_w + j * p.dilation_w - p.pad_left
    inside = (m < p.out_h * p.out_w) & (h >= 0) & (h < p.l1_h) & (w >= 0) & (w < p.l1_w) & (c1 < p.channel_size // c0)
    idx = ((c1 * p.l1_h + h) * p.l1_w + w) * c0 + cc
    ok = inside & (idx < image.size)
    return np.where(ok, image[np.where(ok, idx, 0)], np.asarray(p.pad_value, image.dtype)).astype(image.dtype)


class ReferenceIm2col(Im2colConv):
    """The package's answer to exercise 3 (the tests' and the explorers' reference)."""

    def load_3d(self, a, x_l1, tile):
        ns.load_data_3d(a, x_l1, self.expected_params(tile))


@ns.kernel
def im2col_conv(x5, wz, const, y, g: ConvGeometry, t: ConvTiling, has_bias: bool, kernel_class,
                trace: dict | None = None) -> None:
    """NHWC ``y`` = conv2d of the NC1HWC0 input ``x5`` by ``kernel_class`` (an :class:`Im2colConv`
    subclass); ``trace`` (a dict) keeps the tile being built ("current") and the first wrong one ("tile":
    (Im2colTile, the right LoadData3DParams, the L1 image, the L0A content))."""
    k = kernel_class(x5, wz, const, y, g, t, has_bias)
    k.trace = trace
    k.process()


def im2col_conv_args(kernel_class, x, w, bias=None, stride=1, padding=0, dilation=1, *, out_dtype=None,
                     tiling: ConvTiling | None = None, config=None, trace: dict | None = None) -> tuple:
    """Everything :func:`im2col_conv` is launched with, prepared on the host (the NC1HWC0 input too):
    ``(args, geometry, tiling)``; the NHWC output ``args[3]`` is filled with NaN (int32: its minimum)."""
    cfg, x, g, t, b = prepare(kernel_class, Im2colConv, "img2col", x, w, bias, stride, padding, dilation, out_dtype,
                              tiling, config)
    bias_row = b if b is not None else np.zeros(g.cout, dtype=dtype_of(g.dtype))
    const = np.concatenate([host.ones_fractal(g), host.bias_row_zn(bias_row, g)])
    unwritten = np.iinfo(np.int32).min if g.out_dtype == "int32" else np.nan
    y = np.full((g.n, g.ho, g.wo, g.cout), unwritten, dtype=dtype_of(g.out_dtype))
    args = (formats.nchw_to_nc1hwc0(x), host.fractal_z_weights(w, g), const, y, g, t, b is not None, kernel_class,
            trace)
    return args, g, t


def run_im2col_conv(kernel_class, x, w, bias=None, stride=1, padding=0, dilation=1, *, out_dtype=None,
                    tiling: ConvTiling | None = None, config=None, sanitize: str = "error") -> ConvResult:
    """The img2col convolution kernel with ``kernel_class`` (an :class:`Im2colConv` subclass), on one
    core. The layout transforms are done on the host here (not timed): the profile is the kernel's."""
    cfg = ns.get_config(config)
    args, g, t = im2col_conv_args(kernel_class, x, w, bias, stride, padding, dilation, out_dtype=out_dtype,
                                  tiling=tiling, config=cfg)
    res = ns.launch(im2col_conv, 1, *args, config=cfg, sanitize=sanitize, algorithmic_macs=g.macs)
    work = (f"weights (Cout, Cin, Kh, Kw) -> FRACTAL_Z, {args[1].nbytes:,} B: converted once on the host",
            "input NCHW -> NC1HWC0 and output NHWC -> NCHW: on the host here (the package's conv2d runs "
            "them on the device, as their own launches)")
    return ConvResult("img2col", res["y"].transpose(0, 3, 1, 2).copy(), res.profile, t, g, {}, work)


__all__ = ["Im2colTile", "Im2colConv", "ReferenceIm2col", "im2col_conv", "im2col_conv_args", "run_im2col_conv",
           "im2col_tile", "from_zz"]
