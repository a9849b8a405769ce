"""Variant b, input tiling with reuse: each band's NCHW input is loaded into L1 once and shared.

Where the direct variant fetches the input of every (tap, output row) again from GM, this one loads the
rows of a band once per width tap (``Kw`` column-shifted copies, see :class:`BandKernel`) and takes
every height tap, every output row and every Cout block from L1. The weights stay in L1 for the whole
kernel. GM bytes per output drop by about ``Kh * Cout blocks``; what remains slow is NCHW itself: one
DMA burst per (channel, row) of ``Wo`` elements, fractals that need transposing, and, with padding or
a column stride, the staging pass through UB (staging.py).
"""

from __future__ import annotations

import npusim as ns

from .common import ceil_div, fractal
from .geometry import ConvGeometry
from .rowwise import BandKernel
from .staging import NchwStager
from .tiling import ConvTiling


class KernelReuse(BandKernel):
    transpose = True   # NZ fractals of (channels x positions) -> ZN fractals of B: a 16x16 transpose

    def __init__(self, x, ws, wz, const, y, g: ConvGeometry, t: ConvTiling, has_bias: bool):
        super().__init__(wz, const, y, g, t, has_bias, x.dtype)
        self.stager = NchwStager(self.pipe, x, ws, g, self.plan)

    def copy_in(self, job) -> None:
        """Kw copies of the band: per (width tap, input row), the row runs of all channels of the Cin
        block, GM -> L1 as NZ (``nd_num`` strips of 16 channels)."""
        g, t = self.g, self.t
        (n, ho0, rows, wo0, cols), _, k = job
        ci0, cc = self.cins[k]
        cc1, w1 = ceil_div(cc, 16), ceil_div(cols, 16)
        band_rows, nrows = t.band_in_rows(g), g.in_rows(rows)
        r0 = ho0 * g.sh                               # first input row, padded coordinates
        self.stager.need_rows(n, r0 + nrows)
        copies = self.q_in.alloc_tensor(self.dt)
        for j in range(g.kw):
            for rr in range(nrows):
                dst = copies[(j * band_rows + rr) * cc1 * w1 * fractal(self.dt):]
                nd2nz_channels(dst, lambda c: self.stager.at(n, c, r0 + rr, j, wo0), ci0, cc, cols,
                               self.stager.plane)
        self.q_in.enque(copies)


def nd2nz_channels(dst, src_at, ci0: int, cc: int, cols: int, plane: int) -> None:
    """``cc`` channel runs of ``cols`` elements (``plane`` apart in GM) -> L1 as NZ strips of 16 channels
    (each strip ``ceil(cols / 16)`` fractals), zero-padded to whole fractals."""
    full, tail = divmod(cc, 16)
    strip = ceil_div(cols, 16) * fractal(dst.dtype)
    if full:
        ns.data_copy(dst, src_at(ci0), ns.Nd2NzParams(n_value=16, d_value=cols, src_d_value=plane, nd_num=full,
                                                     src_nd_matrix_stride=16 * plane, dst_nz_matrix_stride=strip))
    if tail:
        ns.data_copy(dst[full * strip:], src_at(ci0 + 16 * full),
                     ns.Nd2NzParams(n_value=tail, d_value=cols, src_d_value=plane))


@ns.kernel
def conv2d_reuse(x, ws, wz, const, y, g: ConvGeometry, t: ConvTiling, has_bias: bool = False) -> None:
    """NCHW ``y`` = conv2d of the NCHW input ``x`` (``ws``: staging workspace) with FRACTAL_Z ``wz``."""
    KernelReuse(x, ws, wz, const, y, g, t, has_bias).process()
