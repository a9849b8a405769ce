"""Variant c, reuse + layout: the band structure of the reuse variant, reading NC1HWC0.

The input was transformed NCHW -> NC1HWC0 by its own kernel (transform.py, with the padding written
in), so the 32 B row of a fractal is one position's C0 channels, exactly as L0B's ZN fractals want:

- one DMA per (width tap, C1 block) moves the whole band: a run of ``Wo * 32`` bytes per row (stride 1;
  a column stride becomes a gap between 32 B blocks, still one instruction per row);
- no transpose on the way to L0B, so fp32 and int8 work too;
- no staging: the padding is already in the data.
"""

from __future__ import annotations

import npusim as ns

from .common import ceil_div, fractal
from .geometry import ConvGeometry
from .rowwise import BandKernel
from .tiling import ConvTiling


class KernelLayout(BandKernel):
    def __init__(self, x5p, wz, const, y, g: ConvGeometry, t: ConvTiling, has_bias: bool):
        super().__init__(wz, const, y, g, t, has_bias, x5p.dtype)
        self.x5p = x5p

    def copy_in(self, job) -> None:
        """Kw copies of the band from the padded NC1HWC0 image (N, C1, Hp, Wp, C0): position ``wo`` of
        copy ``j`` is padded column ``wo * sw + j * dw``."""
        g, t = self.g, self.t
        (n, ho0, rows, wo0, cols), _, k = job
        ci0, cc = self.cins[k]
        cc1, w1 = ceil_div(cc, g.c0), ceil_div(cols, 16)
        band_rows, nrows = t.band_in_rows(g), g.in_rows(rows)
        r0 = ho0 * g.sh
        fr = fractal(self.dt)
        copies = self.q_in.alloc_tensor(self.dt)
        for j in range(g.kw):
            for c in range(cc1):
                c1 = ci0 // g.c0 + c
                src = (((n * g.c1 + c1) * g.hp + r0) * g.wp + wo0 * g.sw + j * g.dw) * g.c0
                dst = (j * band_rows * cc1 + c) * w1 * fr
                if g.sw == 1:   # every row of the band in one DMA: one Wo * 32 B run per row
                    ns.data_copy(copies[dst:], self.x5p[src:], ns.DataCopyParams(
                        block_count=nrows, block_len=cols, src_stride=g.wp - cols, dst_stride=cc1 * w1 * 16 - cols))
                else:           # every sw-th position: 32 B blocks with gaps, one DMA per row
                    for rr in range(nrows):
                        ns.data_copy(copies[dst + rr * cc1 * w1 * fr:], self.x5p[src + rr * g.wp * g.c0:],
                                     ns.DataCopyParams(block_count=cols, block_len=1, src_stride=g.sw - 1))
        self.q_in.enque(copies)


@ns.kernel
def conv2d_layout(x5p, wz, const, y, g: ConvGeometry, t: ConvTiling, has_bias: bool = False) -> None:
    """NCHW ``y`` = conv2d of the padded NC1HWC0 input ``x5p`` with FRACTAL_Z weights ``wz``."""
    KernelLayout(x5p, wz, const, y, g, t, has_bias).process()
