"""What the direct, reuse and layout variants share: one Mmad per (tap, output row), NCHW written out.

The convolution is a sum over the Kh x Kw taps of small matrix products (implicit GEMM)::

    y[co, ho, :] = sum over taps (i, j) of  W_ij[co, ci] @ X_ij[ci, ho, :]

where ``X_ij[ci, ho, wo] = x_padded[ci, ho*sh + i*dh, wo*sw + j*dw]``. Each Mmad multiplies

- A = the tap's weights, Cout block x Cin block, ZZ in L0A. A FRACTAL_Z fractal (16 output channels x
  C0 input channels, row-major) is also a ZZ fractal of the (Cout x K) matrix, so A is picked out of
  FRACTAL_Z with a strided ``load_data`` (one fractal row per Cin block, ``Kh*Kw*N1`` fractals apart);
- B = the input run of that tap and output row, Cin block x Wo positions, ZN in L0B;
- into C = the output row, Cout block x Wo, NZ in L0C, accumulated over taps and Cin blocks.

Because C's rows are output channels and its columns positions, Fixpipe writes it as NCHW rows directly
(``dst_stride = Ho * Wo``). The variants differ only in how B gets into L1 (see direct.py, reuse.py,
layout.py). A bias starts every accumulator: one Mmad with k = 1 of the bias column by a row of ones.
"""

from __future__ import annotations

import numpy as np

import npusim as ns

from .common import Drain, ceil_div, fractal, load_fractals, pipelined, round_up
from .geometry import ConvGeometry, my_items, work_items
from .tiling import ConvTiling


class RowConvKernel:
    """Queues, weights, bias and drain of the row-wise variants; subclasses feed B and loop."""

    input_buffer = "copies"    # name of the L1 input buffer in the tiling plan
    transpose = False          # NCHW fractals must be transposed on their way to L0B

    def __init__(self, wz, const, y, g: ConvGeometry, t: ConvTiling, has_bias: bool, in_dtype):
        self.wz, self.const, self.y = wz, const, y
        self.g, self.t, self.has_bias = g, t, has_bias
        self.dt = in_dtype
        self.acc_dt = ns.int32 if self.dt == ns.int8 else ns.float32
        self.fr = fractal(self.dt)
        self.plan = plan = t.plan(g, ns.get_core_config())
        self.pipe = ns.TPipe()
        self.q_in = ns.TQue(ns.TPosition.B1)
        self.q_w = ns.TQue(ns.TPosition.A1)
        self.q_const = ns.TQue(ns.TPosition.A1)
        self.q_a = ns.TQue(ns.TPosition.A2)
        self.q_b = ns.TQue(ns.TPosition.B2)
        self.q_acc = ns.TQue(ns.TPosition.CO1)
        for q, name in ((self.q_in, self.input_buffer), (self.q_w, "weights"), (self.q_const, "const"),
                        (self.q_a, "a"), (self.q_b, "b"), (self.q_acc, "acc")):
            self.pipe.init_buffer(q, plan[name].num, plan[name].length)
        self.w1 = ceil_div(t.cols, 16)          # fractal columns of one output row tile
        self.drain = Drain(self.pipe, self.acc_dt, y.dtype, round_up(t.cout_block, 16) * self.w1 * 16)

    # --- kernel frame -----------------------------------------------------------------------------
    def process(self) -> None:
        if self.t.weights_resident:
            self.w_l1 = self.load_resident(self.q_w, self.wz, self.g.k1 * self.g.n1 * self.fr)
        self.c_l1 = self.load_resident(self.q_const, self.const, (self.g.n1 + 1) * self.fr)
        self.run()
        if self.t.weights_resident:
            self.q_w.free_tensor(self.w_l1)
        self.q_const.free_tensor(self.c_l1)

    def run(self) -> None:
        raise NotImplementedError

    def load_resident(self, q, src, count: int):
        """GM -> L1 once (MTE2); MTE1 keeps the tensor until the end of the kernel."""
        t = q.alloc_tensor(self.dt)
        ns.data_copy(t, src, count)
        q.enque(t)
        return q.deque()

    # --- A: the weights of one tap -------------------------------------------------------------------
    def load_a(self, tap: int, ci0: int, cc: int, co0: int, cb: int):
        """W_tap[co0:co0+cb, ci0:ci0+cc] into L0A as ZZ: for each 16-row strip of output channels, the
        fractals of consecutive Cin blocks, which FRACTAL_Z keeps Kh*Kw*N1 fractals apart."""
        g = self.g
        cc1, m1 = ceil_div(cc, g.c0), ceil_div(cb, 16)
        c1_0, n1_0 = ci0 // g.c0, co0 // 16
        row = g.kk * g.n1                        # fractals from one Cin block to the next
        a = self.q_a.alloc_tensor(self.dt)
        if self.t.weights_resident:
            for m in range(m1):
                load_fractals(a[m * cc1 * self.fr:], self.w_l1, (c1_0 * g.kk + tap) * g.n1 + n1_0 + m, cc1, row)
        else:   # this tap's (Cin block x Cout block) piece: GM -> L1 (one run per Cin block), then L0A
            w = self.q_w.alloc_tensor(self.dt)
            ns.data_copy(w, self.wz[((c1_0 * g.kk + tap) * g.n1 + n1_0) * self.fr:],
                         ns.DataCopyParams(block_count=cc1, block_len=m1 * 16, src_stride=(row - m1) * 16))
            self.q_w.enque(w)
            w = self.q_w.deque()
            for m in range(m1):
                load_fractals(a[m * cc1 * self.fr:], w, m, cc1, m1)
            self.q_w.free_tensor(w)
        self.q_a.enque(a)
        return self.q_a.deque()

    # --- B and the Mmad ----------------------------------------------------------------------------------
    def mmad_row(self, acc, a, src_l1, start: int, cc: int, cb: int, cols: int, first: bool) -> None:
        """B = fractals ``start ..`` of ``src_l1`` (Cin block x cols, ZN order) -> L0B, then acc += A @ B."""
        b = self.q_b.alloc_tensor(self.dt)
        load_fractals(b, src_l1, start, ceil_div(cc, self.g.c0) * ceil_div(cols, 16), transpose=self.transpose)
        self.q_b.enque(b)
        b = self.q_b.deque()
        ns.mmad(acc, a, b, ns.MmadParams(cb, cols, cc, cmatrix_init_val=first))
        self.q_b.free_tensor(b)

    def start_accumulators(self, rows: int, co0: int, cb: int, cols: int) -> list:
        """One L0C accumulator per output row; with a bias, each starts as bias x ones (k = 1)."""
        accs = [self.q_acc.alloc_tensor(self.acc_dt) for _ in range(rows)]
        if self.has_bias:
            a = self.q_a.alloc_tensor(self.dt)
            load_fractals(a, self.c_l1, co0 // 16, ceil_div(cb, 16))                # bias column, ZZ
            self.q_a.enque(a)
            b = self.q_b.alloc_tensor(self.dt)
            load_fractals(b, self.c_l1, self.g.n1, ceil_div(cols, 16), src_stride=0)  # a row of ones, ZN
            self.q_b.enque(b)
            a, b = self.q_a.deque(), self.q_b.deque()
            for acc in accs:
                ns.mmad(acc, a, b, ns.MmadParams(cb, cols, 1))
            self.q_a.free_tensor(a)
            self.q_b.free_tensor(b)
        return accs

    def drain_rows(self, accs: list, n: int, ho0: int, co0: int, cb: int, wo0: int, cols: int) -> None:
        """Each output row's tile -> NCHW: ``cb`` channel rows of ``cols`` positions, a plane apart."""
        g = self.g
        for r, acc in enumerate(accs):
            self.q_acc.enque(acc)
            acc = self.q_acc.deque()
            self.drain(self.y[((n * g.cout + co0) * g.ho + ho0 + r) * g.wo + wo0:], acc, cb, cols,
                       round_up(cb, 16), g.ho * g.wo)
            self.q_acc.free_tensor(acc)


class BandKernel(RowConvKernel):
    """Input tiling with reuse: a band of output rows gets its input once (``copy_in``), in ``Kw``
    column-shifted copies (one per width tap); every height tap, output row and Cout block then takes
    its B from L1. A B tile is whole fractals, and each output row's positions start a new fractal
    column, so moving down ``i`` input rows is moving ``i`` fractal rows: no copy is needed per height
    tap. A shift by one column is not a whole fractal, hence the ``Kw`` copies.

    L1 layout of the copies: ``[j][band input row][Cin block of C0][fractal column]``, so that the
    B tile of one (tap, output row) is one run of ``C1b * W1`` fractals in ZN order (K outer)."""

    def run(self) -> None:
        g, t = self.g, self.t
        self.cins = t.cin_blocks(g)
        bands = my_items([(n, ho0, rows, wo0, cols) for n, ho0, rows in self.bands()
                          for wo0, cols in t.col_tiles(g)])
        couts = t.cout_blocks(g)
        if len(self.cins) == 1:   # all channels fit: one copy-in per band serves every Cout block
            jobs = [(band, couts, 0) for band in bands]
        else:                     # the accumulators outlive the copies: reload them per Cout block
            jobs = [(band, [co], k) for band in bands for co in couts for k in range(len(self.cins))]
        self.accs: dict[int, list] = {}
        pipelined(jobs, self.copy_in, self.compute, t.l1_buffers)

    def bands(self) -> list[tuple[int, int, int]]:
        """The bands of output rows, ``(image, first output row, rows)``, of every block."""
        return work_items(self.g, self.t.rows)

    def copy_in(self, job) -> None:
        raise NotImplementedError

    def band_row(self, r: int, i: int) -> int:
        """The band's input row (padded coordinates) that output row ``r`` of the band reads at height
        tap ``i``."""
        return r * self.g.sh + i * self.g.dh

    def compute(self, job) -> None:
        g, t = self.g, self.t
        (n, ho0, rows, wo0, cols), couts, k = job
        ci0, cc = self.cins[k]
        cc1, w1 = ceil_div(cc, g.c0), ceil_div(cols, 16)
        band_rows = t.band_in_rows(g)
        copies = self.q_in.deque()
        for co0, cb in couts:
            if k == 0:
                self.accs[co0] = self.start_accumulators(rows, co0, cb, cols)
            accs = self.accs[co0]
            for tap in range(g.kk):
                i, j = g.tap(tap)
                a = self.load_a(tap, ci0, cc, co0, cb)
                for r in range(rows):
                    row = self.band_row(r, i)
                    if not isinstance(row, (int, np.integer)) or not 0 <= row < band_rows:
                        raise ns.UsageError(f"band_row({r}, {i}) returned {row!r}; the band holds input rows "
                                            f"0..{band_rows - 1}")
                    start = (j * band_rows + int(row)) * cc1 * w1
                    self.mmad_row(accs[r], a, copies, start, cc, cb, cols,
                                  first=(k == 0 and tap == 0 and not self.has_bias))
                self.q_a.free_tensor(a)
            if k == len(self.cins) - 1:
                self.drain_rows(accs, n, ho0, co0, cb, wo0, cols)
        self.q_in.free_tensor(copies)
