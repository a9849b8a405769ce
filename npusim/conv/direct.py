"""Variant a, output tiling: every output block fetches the input it needs straight from GM.

An output block is ``rows`` output rows x ``cols`` columns x a Cout block. For each Cin block, tap and
output row, the block DMAs that tap's input run (all channels of the Cin block, ``cols`` positions)
from the NCHW tensor into L1, transposes it into L0B and accumulates one Mmad. Nothing is kept between
blocks, or between taps: the same input element is read again for every tap that touches it (Kh * Kw
times) and for every Cout block, and the weights are read again for every output block. This is the
baseline the other variants improve on; its profile shows high GM bytes per output and a busy MTE2.
"""

from __future__ import annotations

import npusim as ns

from .common import pipelined
from .geometry import ConvGeometry, my_items, work_items
from .reuse import nd2nz_channels
from .rowwise import RowConvKernel
from .staging import NchwStager
from .tiling import ConvTiling


class KernelDirect(RowConvKernel):
    input_buffer = "window"
    transpose = True

    def __init__(self, x, ws, wz, const, y, g: ConvGeometry, t: ConvTiling, has_bias: bool):
        super().__init__(wz, const, y, g, t, has_bias, x.dtype)
        self.stager = NchwStager(self.pipe, x, ws, g, self.plan)

    def run(self) -> None:
        g, t = self.g, self.t
        self.cins = t.cin_blocks(g)
        blocks = my_items([(n, ho0, rows, wo0, cols, co0, cb) for n, ho0, rows in work_items(g, t.rows)
                           for wo0, cols in t.col_tiles(g) for co0, cb in t.cout_blocks(g)])
        for block in blocks:
            n, ho0, rows, wo0, cols, co0, cb = block
            self.stager.need_rows(n, ho0 * g.sh + g.in_rows(rows))
            accs = self.start_accumulators(rows, co0, cb, cols)
            steps = [(k, tap, r) for k in range(len(self.cins)) for tap in range(g.kk) for r in range(rows)]
            pipelined(steps, lambda s: self.fetch(block, s), lambda s: self.compute(block, s, accs), t.l1_buffers)
            self.drain_rows(accs, n, ho0, co0, cb, wo0, cols)

    def fetch(self, block, step) -> None:
        """The input run of one (Cin block, tap, output row), GM -> L1 as NZ."""
        g = self.g
        n, ho0, _, wo0, cols, _, _ = block
        k, tap, r = step
        i, j = g.tap(tap)
        ci0, cc = self.cins[k]
        window = self.q_in.alloc_tensor(self.dt)
        row = (ho0 + r) * g.sh + i * g.dh
        nd2nz_channels(window, lambda c: self.stager.at(n, c, row, j, wo0), ci0, cc, cols, self.stager.plane)
        self.q_in.enque(window)

    def compute(self, block, step, accs) -> None:
        _, _, rows, _, cols, co0, cb = block
        k, tap, r = step
        ci0, cc = self.cins[k]
        if r == 0:
            self.a = self.load_a(tap, ci0, cc, co0, cb)   # this tap's weights, fetched for this block
        window = self.q_in.deque()
        self.mmad_row(accs[r], self.a, window, 0, cc, cb, cols,
                      first=(k == 0 and tap == 0 and not self.has_bias))
        self.q_in.free_tensor(window)
        if r == rows - 1:
            self.q_a.free_tensor(self.a)


@ns.kernel
def conv2d_direct(x, ws, wz, const, y, g: ConvGeometry, t: ConvTiling, has_bias: bool = False) -> None:
    """NCHW ``y`` = conv2d of the NCHW input ``x`` (``ws``: staging workspace) with FRACTAL_Z ``wz``."""
    KernelDirect(x, ws, wz, const, y, g, t, has_bias).process()
