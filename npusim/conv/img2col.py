"""Variant d, img2col on the Cube: the input band is read once, MTE1 builds the im2col matrix on chip.

Data path (A2)::

    GM x (NC1HWC0) --MTE2, one DMA per band--> L1 band (C1 x rows x W x C0)
        --MTE1 load_data_3d--> L0A: im2col tile (m_tile positions x k_tile columns, ZZ)
    GM weights (FRACTAL_Z) --MTE2, once--> L1 --MTE1 load_data--> L0B: (k_tile x Cout block, ZN)
        --M mmad, K accumulated in L0C--> L0C (positions x Cout, NZ)
        --FIX fixpipe--> GM y (NHWC rows: one row of Cout values per output position)

``load_data_3d`` gathers every window element from the band in L1, with the padding built in, so the
input crosses the GM port once (plus the halo rows two bands share) however many taps the kernel has.
The K order of the im2col columns, ``(c1, kh, kw, c0)``, is the order of FRACTAL_Z weights, so a block
of input channels is a contiguous range of K (used when a band of all channels does not fit L1).

L0A only takes ``load_data_3d``, so the im2col matrix is the LEFT operand and each L0C tile is
(positions x Cout): Fixpipe writes NHWC rows. NCHW needs a transpose; it is the separate
:func:`npusim.conv.transform.to_nchw` launch (its own Profile), as Ascend's TransData is a separate op.
On the 'classic' preset the tiles leave through UB (vector pipe) instead of Fixpipe.

Fusion: an :class:`~npusim.conv.common.Epilogue` (ReLU, int8 dequantisation with a per-tensor or
per-channel scale) is applied by the drain, on the way out of L0C: inside Fixpipe on A2, as vector
instructions in UB on 'classic'. The output then crosses the GM port once, already activated, instead of
being written, read back by a ReLU kernel and written again. ``drain`` replaces the drain class (the
exercise of lab 06 plugs its own in).
"""

from __future__ import annotations

import npusim as ns

from .common import Drain, Epilogue, ceil_div, fractal, load_fractals, pipelined, round_up
from .geometry import ConvGeometry, my_items, work_items
from .tiling import ConvTiling


class KernelImg2col:
    """``y`` (N, Ho, Wo, Cout) = epilogue(conv(``x5`` (N, C1, H, W, C0), ``wz`` (FRACTAL_Z)) [+ bias])."""

    def __init__(self, x5, wz, const, y, g: ConvGeometry, t: ConvTiling, has_bias: bool,
                 epilogue: Epilogue | None = None, scale=None, drain=None):
        self.x5, self.wz, self.const, self.y = x5, wz, const, y
        self.g, self.t, self.has_bias = g, t, has_bias
        self.epilogue, self.scale = epilogue or Epilogue(), scale
        self.dt = x5.dtype
        self.acc_dt = ns.int32 if self.dt == ns.int8 else ns.float32
        plan = t.plan(g, ns.get_core_config(), self.epilogue)
        self.pipe = ns.TPipe()
        self.q_band = ns.TQue(ns.TPosition.A1)
        self.q_w = ns.TQue(ns.TPosition.B1)
        self.q_const = ns.TQue(ns.TPosition.B1)
        self.q_a = ns.TQue(ns.TPosition.A2)
        self.q_b = ns.TQue(ns.TPosition.B2)
        self.q_acc = ns.TQue(ns.TPosition.CO1)
        for q, name in ((self.q_band, "band"), (self.q_w, "weights"), (self.q_const, "const"), (self.q_a, "a"),
                        (self.q_b, "b"), (self.q_acc, "acc")):
            self.pipe.init_buffer(q, plan[name].num, plan[name].length)
        self.drain = (drain or Drain)(self.pipe, self.acc_dt, y.dtype, t.m_tile * round_up(t.cout_block, 16),
                                      epilogue=self.epilogue, channels=g.cout)
        self.fr = fractal(self.dt)      # elements per fractal

    # --- the whole kernel ----------------------------------------------------------------------------
    def process(self) -> None:
        g, t = self.g, self.t
        # a work item is a band of output rows and a group of Cout blocks (``t.cout_split`` groups), so that
        # a convolution whose bands alone do not fill the cores also splits over its output channels
        items = my_items([(band, grp) for band in work_items(g, t.rows) for grp in range(t.cout_split)])
        if not items:
            return
        if t.weights_resident:
            self.w_l1 = self.load_resident(self.q_w, self.wz, g.k1 * g.n1 * self.fr)
        self.c_l1 = self.load_resident(self.q_const, self.const, (1 + g.n1) * self.fr)
        if self.epilogue.dequant:
            self.drain.load_scales(self.scale)
        self.cins = t.cin_blocks(g)
        if len(self.cins) == 1:
            # the band holds every channel: one DMA per band, and every tile of the band reads it
            jobs = [(band, None, 0, grp) for band, grp in items]
        else:
            # a band of all channels does not fit L1: K is split into Cin blocks, accumulated in L0C,
            # and the band of each block is loaded again for each tile
            jobs = [(band, tile, k, grp) for band, grp in items for tile in self.tiles(band, grp)
                    for k in range(len(self.cins))]
        pipelined(jobs, self.copy_in_band, self.compute, t.l1_buffers)
        if t.weights_resident:
            self.q_w.free_tensor(self.w_l1)
        self.q_const.free_tensor(self.c_l1)

    def load_resident(self, q, src, count: int):
        """GM -> L1 once (MTE2); MTE1 keeps the tensor until the end of the kernel."""
        t = q.alloc_tensor(self.dt)
        ns.data_copy(t, src, count)
        q.enque(t)
        return q.deque()

    def tiles(self, band, grp: int = 0) -> list[tuple[int, int, int, int]]:
        """The L0C tiles of a band in Cout group ``grp``: ``(first position, positions, first Cout, Cout)``."""
        positions = band[2] * self.g.wo
        return [(m0, min(self.t.m_tile, positions - m0), co0, cb)
                for m0 in range(0, positions, self.t.m_tile) for co0, cb in self.t.group_blocks(self.g, grp)]

    # --- one band of output rows ----------------------------------------------------------------------
    def band_rows(self, ho0: int, rows: int) -> tuple[int, int, int, int]:
        """Image rows ``[lo, hi)`` the band reads, and the padding rows above / below them."""
        g = self.g
        top = ho0 * g.sh - g.ph                       # first input row of the window (may be < 0)
        bottom = top + g.in_rows(rows)                 # one past the last
        lo, hi = max(0, top), min(g.h, bottom)
        return lo, hi, lo - top, bottom - hi

    def copy_in_band(self, job) -> None:
        """The band's rows of one Cin block in ONE DMA: each C1 block's rows are one contiguous run."""
        g = self.g
        (n, ho0, rows), _, k, _ = job
        ci0, cc = self.cins[k]
        lo, hi, _, _ = self.band_rows(ho0, rows)
        t = self.q_band.alloc_tensor(self.dt)
        if hi > lo:
            ns.data_copy(t, self.x5[((n * g.c1 + ci0 // g.c0) * g.h + lo) * g.w * g.c0:],
                         ns.DataCopyParams(block_count=ceil_div(cc, g.c0), block_len=(hi - lo) * g.w,
                                           src_stride=(g.h - (hi - lo)) * g.w))
        self.q_band.enque(t)

    def compute(self, job) -> None:
        band, tile, k, grp = job
        x_l1 = self.q_band.deque()
        for tl in ([tile] if tile else self.tiles(band, grp)):
            self.compute_tile(band, tl, k, x_l1)
        self.q_band.free_tensor(x_l1)

    def compute_tile(self, band, tile, k: int, x_l1) -> None:
        """One L0C tile (positions x Cout block): its K steps for Cin block ``k``; the first block starts
        the accumulator (with the bias), the last one drains it."""
        g, t = self.g, self.t
        n, ho0, rows = band
        m0, mt, co0, cb = tile
        lo, hi, pad_top, pad_bottom = self.band_rows(ho0, rows)
        ci0, cc = self.cins[k]
        first = k == 0
        if first:
            self.acc = self.q_acc.alloc_tensor(self.acc_dt)
            if self.has_bias or hi <= lo:  # bias (or zeros) first: a band of padding rows has no K work
                self.bias_mmad(self.acc, mt, co0, cb)
                first = False
        if hi > lo:
            k_block = ceil_div(cc, g.c0) * g.kk * g.c0          # im2col columns of this Cin block
            k_base = (ci0 // g.c0) * g.kk * g.c0                 # where they start in FRACTAL_Z's K
            for k0 in range(0, k_block, t.k_tile):
                kt = min(t.k_tile, k_block - k0)
                self.mmad_step(self.acc, x_l1, band, k, m0, mt, k0, k_base + k0, kt, co0, cb, first)
                first = False
        if k == len(self.cins) - 1:
            self.q_acc.enque(self.acc)
            acc = self.q_acc.deque()
            self.drain(self.y[((n * g.ho + ho0) * g.wo + m0) * g.cout + co0:], acc, mt, cb, round_up(mt, 16), g.cout,
                       col0=co0)
            self.q_acc.free_tensor(acc)

    def mmad_step(self, acc, x_l1, band, k: int, m0, mt, k0, kw0, kt, co0, cb, first) -> None:
        """One K step: im2col columns ``k0..k0+kt`` of the band image -> L0A (load_data_3d), the matching
        FRACTAL_Z rows from ``kw0`` -> L0B, then one Mmad."""
        g = self.g
        a = self.q_a.alloc_tensor(self.dt)
        self.load_im2col(a, x_l1, band, k, m0, mt, k0, kt)
        self.q_a.enque(a)
        b = self.q_b.alloc_tensor(self.dt)
        self.load_weights(b, kw0 // g.c0, kt // g.c0, co0 // 16, ceil_div(cb, 16))
        self.q_b.enque(b)
        a, b = self.q_a.deque(), self.q_b.deque()
        ns.mmad(acc, a, b, ns.MmadParams(mt, cb, kt, cmatrix_init_val=first))
        self.q_a.free_tensor(a)
        self.q_b.free_tensor(b)

    def load_im2col(self, a, x_l1, band, k: int, m0: int, mt: int, k0: int, kt: int) -> None:
        """L0A ``a`` = rows ``m0 .. m0 + mt`` (output positions of the band) x columns ``k0 .. k0 + kt``
        (of Cin block ``k``) of the im2col matrix, built by MTE1 from the band's image rows in L1 with
        the padding rows and columns the DMA could not load (they are not in GM)."""
        g = self.g
        _, ho0, rows = band
        lo, hi, pad_top, pad_bottom = self.band_rows(ho0, rows)
        ns.load_data_3d(a, x_l1, ns.LoadData3DParams(
            l1_h=hi - lo, l1_w=g.w, channel_size=ceil_div(self.cins[k][1], g.c0) * g.c0, kh=g.kh, kw=g.kw,
            m_extension=round_up(mt, 16), k_extension=kt, m_start=m0, k_start=k0,
            stride_h=g.sh, stride_w=g.sw, dilation_h=g.dh, dilation_w=g.dw,
            pad_top=pad_top, pad_bottom=pad_bottom, pad_left=g.pw, pad_right=g.pw))

    def load_weights(self, b, k1_0: int, k1_n: int, n1_0: int, n1_n: int) -> None:
        """The (k1_n x n1_n) fractals of FRACTAL_Z starting at (k1_0, n1_0) into L0B, in ZN order."""
        n1_all = self.g.n1
        if self.t.weights_resident:
            w = self.w_l1
            if n1_n == n1_all:   # whole fractal rows: one contiguous run
                load_fractals(b, w, k1_0 * n1_all, k1_n * n1_all)
            else:
                for r in range(k1_n):
                    load_fractals(b[r * n1_n * self.fr:], w, (k1_0 + r) * n1_all + n1_0, n1_n)
            return
        # streamed: this (K x Cout) piece GM -> L1 (one run of n1_n fractals per fractal row), then L0B
        w = self.q_w.alloc_tensor(self.dt)
        ns.data_copy(w, self.wz[(k1_0 * n1_all + n1_0) * self.fr:],
                     ns.DataCopyParams(block_count=k1_n, block_len=n1_n * 16, src_stride=(n1_all - n1_n) * 16))
        self.q_w.enque(w)
        w = self.q_w.deque()
        load_fractals(b, w, 0, k1_n * n1_n)
        self.q_w.free_tensor(w)

    def bias_mmad(self, acc, mt: int, co0: int, cb: int) -> None:
        """acc = ones (mt x 1) @ bias (1 x cb): an Mmad with k = 1 starts every tile at the bias."""
        a = self.q_a.alloc_tensor(self.dt)
        load_fractals(a, self.c_l1, 0, ceil_div(mt, 16), src_stride=0)   # the same ones fractal, M1 times
        self.q_a.enque(a)
        b = self.q_b.alloc_tensor(self.dt)
        load_fractals(b, self.c_l1, 1 + co0 // 16, ceil_div(cb, 16))
        self.q_b.enque(b)
        a, b = self.q_a.deque(), self.q_b.deque()
        ns.mmad(acc, a, b, ns.MmadParams(mt, cb, 1))
        self.q_a.free_tensor(a)
        self.q_b.free_tensor(b)


@ns.kernel
def conv2d_img2col(x5, wz, const, y, g: ConvGeometry, t: ConvTiling, has_bias: bool = False,
                   epilogue: Epilogue | None = None, scale=None, drain=None) -> None:
    """NHWC ``y`` = conv2d of the NC1HWC0 input ``x5`` with FRACTAL_Z weights ``wz`` (see module doc), through
    the fused ``epilogue`` (``scale``: the GM fp32 dequantisation scales, 1 or Cout padded to 16 values)."""
    cls = STAGED[0] if t.staged else KernelImg2col   # staged: per-group weights, a staged start (.staged)
    cls(x5, wz, const, y, g, t, has_bias, epilogue, scale, drain).process()


STAGED: list = []
"""The staged kernel class (:mod:`.staged` registers it when npusim.conv is imported; no import cycle)."""
