"""Reading NCHW on the Cube: where each (channel, row, tap) run of input comes from.

An NCHW row of positions becomes, in L1, the 32 B rows of NZ fractals (16 channels x 16 positions):
positions sit INSIDE the 32 B rows. A DMA writes whole 32 B rows, so it cannot leave a zero column at
the left of a row (padding), and it copies contiguous runs, so it cannot skip columns (a stride).

When the convolution has padding or a column stride, the kernel therefore first writes a padded,
column-phase copy of the rows it needs to a GM workspace, through UB (:class:`NchwStager`):

- each padded row is stored as ``sw`` phases of ``Q = ceil(Wp / sw)`` columns, phase ``f`` holding
  padded columns ``f, f + sw, f + 2 sw, ...``; the columns one tap reads are then one contiguous run;
- stride 1: ``data_copy_pad`` GM -> UB inserts the zero columns (left/right padding), UB -> GM writes
  the padded rows back (MTE2 then MTE3, long runs);
- stride > 1: every element gets its own 32 B UB slot (GM -> UB), and each phase is written back with a
  stride of ``sw`` slots (UB -> GM): one DMA burst per element each way, which the profile shows as slow
  (npusim has no gather or transpose instruction that would do better);
- padding rows (top/bottom) are written from a UB buffer of zeros.

The workspace has one slice per block (blocks never share it). A block stages a whole image the first
time it needs it, in few, long DMAs: each DMA costs a start-up, and many small ones add up. Its cost
is in the convolution's profile: it is part of what reading NCHW costs. Without padding and with
column stride 1 the kernel reads the NCHW input directly.
"""

from __future__ import annotations

import npusim as ns

from .common import ceil_div, round_up
from .geometry import ConvGeometry
from .tiling import STAGE_ROWS, needs_staging, stage_row_len


class NchwStager:
    """Where tap ``j`` of padded row ``r`` of channel ``c`` starts, staging rows on demand."""

    def __init__(self, pipe: ns.TPipe, x, ws, g: ConvGeometry, plan: dict):
        self.x, self.ws, self.g = x, ws, g
        self.dt = x.dtype
        self.staged = needs_staging(g)
        if not self.staged:   # read the NCHW input itself: rows are image rows, columns image columns
            self.src, self.plane, self.row_len = x, g.h * g.w, g.w
            return
        self.q = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT)   # MTE2 -> MTE3 through UB
        self.zeros = ns.TBuf(ns.TPosition.VECCALC)
        pipe.init_buffer(self.q, plan["stage"].num, plan["stage"].length)
        pipe.init_buffer(self.zeros, plan["zeros"].length)
        self.q_cols = ceil_div(g.wp, g.sw)
        self.row_len = stage_row_len(g)
        self.plane = g.hp * self.row_len
        self.src = ws[ns.get_block_idx() * g.n * g.cin * self.plane:]
        self.done = [False] * g.n     # image n is in the workspace
        self.zeros_ready = False

    def at(self, n: int, c: int, r: int, j: int, wo0: int):
        """The GM element where output column ``wo0`` of tap column ``j`` reads padded row ``r``."""
        g = self.g
        if not self.staged:
            return self.src[((n * g.cin + c) * g.h + r) * g.w + j * g.dw + wo0]
        col = j * g.dw
        return self.src[(n * g.cin + c) * self.plane + r * self.row_len + (col % g.sw) * self.q_cols
                        + col // g.sw + wo0]

    # --- staging --------------------------------------------------------------------------------------
    def need_rows(self, n: int, r_hi: int) -> None:
        """Make sure the rows up to ``r_hi`` of image ``n`` are staged. The first call stages the whole
        image, in as few DMAs as possible (every DMA costs a start-up), then orders MTE2 after it."""
        if not self.staged or self.done[n]:
            return
        g = self.g
        if not self.zeros_ready:
            z = self.zeros.get(self.dt)
            ns.duplicate(z, 0, z.size)
            ns.set_flag(ns.HardEvent.V_MTE3, 0)
            ns.wait_flag(ns.HardEvent.V_MTE3, 0)
            self.zeros_ready = True
        if g.ph:  # the padding rows of every channel: one DMA for the top ones, one for the bottom ones
            self.zero_rows(n, 0)
            self.zero_rows(n, g.ph + g.h)
        for c in range(g.cin):
            base = (n * g.cin + c) * self.plane
            if g.sw == 1:
                self.stage_rows_padded(n, c, base)
            else:
                for r in range(g.ph, g.ph + g.h):
                    self.stage_row_phases(n, c, base, r)
        self.done[n] = True
        ns.set_flag(ns.HardEvent.MTE3_MTE2, 0)   # the Cube's reads (MTE2) come after these writes (MTE3)
        ns.wait_flag(ns.HardEvent.MTE3_MTE2, 0)

    def zero_rows(self, n: int, r: int) -> None:
        """Padded rows ``[r, r + ph)`` of every channel of image ``n`` = 0: one block per channel, a plane apart."""
        g = self.g
        isz = self.dt.itemsize
        nbytes = g.ph * self.row_len * isz
        per = max(1, self.zeros.get(self.dt).nbytes // round_up(nbytes, 32))   # channels one DMA can serve
        for c in range(0, g.cin, per):
            k = min(per, g.cin - c)
            ns.data_copy_pad(self.src[(n * g.cin + c) * self.plane + r * self.row_len:], self.zeros.get(self.dt),
                             ns.DataCopyExtParams(k, nbytes, 0, self.plane * isz - nbytes))

    def write_zeros(self, dst: int, count: int) -> None:
        z = self.zeros.get(self.dt)
        for off in range(0, count, z.size):
            ns.data_copy_pad(self.src[dst + off:], z, min(z.size, count - off))

    def stage_rows_padded(self, n: int, c: int, base: int) -> None:
        """Stride 1: the channel's rows in, each padded with ``pw`` zeros on both sides by DataCopyPad, and out."""
        g = self.g
        isz = self.dt.itemsize
        for h in range(0, g.h, STAGE_ROWS):
            k = min(STAGE_ROWS, g.h - h)
            t = self.q.alloc_tensor(self.dt)
            ns.data_copy_pad(t, self.x[((n * g.cin + c) * g.h + h) * g.w:],
                             ns.DataCopyExtParams(k, g.w * isz, 0, 0),
                             ns.DataCopyPadExtParams(True, g.pw, g.pw, 0))
            self.q.enque(t)
            t = self.q.deque()
            ns.data_copy_pad(self.src[base + (g.ph + h) * self.row_len:], t, ns.DataCopyExtParams(k, g.wp * isz, 0, 0))
            self.q.free_tensor(t)

    def stage_row_phases(self, n: int, c: int, base: int, r: int) -> None:
        """Stride > 1: one image row into UB, one 32 B slot per element, then each phase out, every
        ``sw``-th slot; the phase's padding columns come from the zeros buffer."""
        g = self.g
        isz = self.dt.itemsize
        per_slot = 32 // isz
        t = self.q.alloc_tensor(self.dt)
        ns.data_copy_pad(t, self.x[((n * g.cin + c) * g.h + r - g.ph) * g.w:], ns.DataCopyExtParams(g.w, isz, 0, 0))
        self.q.enque(t)
        t = self.q.deque()
        row = base + r * self.row_len
        for f in range(g.sw):
            q_lo = max(0, ceil_div(g.pw - f, g.sw))                 # first phase column inside the image
            q_hi = min(self.q_cols, ceil_div(g.pw + g.w - f, g.sw))
            dst = row + f * self.q_cols
            if q_hi > q_lo:
                first_col = q_lo * g.sw + f - g.pw                  # its image column = its UB slot
                ns.data_copy_pad(self.src[dst + q_lo:], t[first_col * per_slot:],
                                 ns.DataCopyExtParams(q_hi - q_lo, isz, g.sw - 1, 0))
            else:
                q_hi = q_lo = 0
            if q_lo:
                self.write_zeros(dst, q_lo)
            if self.q_cols > q_hi:
                self.write_zeros(dst + q_hi, self.q_cols - q_hi)
        self.q.free_tensor(t)


def workspace_shape(g: ConvGeometry, block_dim: int) -> tuple[int, ...]:
    """GM workspace of the staged rows: one (N, Cin, Hp, sw * ceil(Wp / sw)) slice per block."""
    if not needs_staging(g):
        return (1,)
    return (block_dim, g.n, g.cin, g.hp, stage_row_len(g))


__all__ = ["NchwStager", "workspace_shape"]
