"""Small pieces every Conv2D kernel uses: moving whole fractals, draining L0C, and prefetching.

These run inside kernels and use only the public npusim API, like the kernels themselves.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

import npusim as ns

FRACTAL_BYTES = 512
"""One fractal: 16 rows of 32 B (16 x 16 fp16, 16 x 8 fp32, 16 x 32 int8)."""


def fractal(dtype) -> int:
    """Elements in one 512 B fractal of ``dtype``."""
    return FRACTAL_BYTES // np.dtype(dtype).itemsize


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def round_up(a: int, b: int) -> int:
    return -(-a // b) * b


def load_fractals(dst, src, start: int, count: int, src_stride: int = 1, transpose: bool = False) -> None:
    """``load_data`` of ``count`` fractals (L1 -> L0A/L0B), fractal ``start + i * src_stride`` to the i-th
    slot of ``dst``. One LoadData moves at most 255 fractals, so longer runs take several."""
    f = fractal(src.dtype)
    done = 0
    while done < count:
        n = min(255, count - done)
        ns.load_data(dst[done * f:], src, ns.LoadData2DParams(start_index=start + done * src_stride, repeat_times=n,
                                                              src_stride=src_stride, if_transpose=transpose))
        done += n


class Drain:
    """Moves a finished accumulator tile from L0C to GM as ND rows, cast to the output dtype.

    On A2 that is one Fixpipe (PIPE_FIX): NZ -> ND and the cast happen on the way out. The 'classic' core
    has no Fixpipe, so the vector pipe does it in UB: L0C -> UB (fp32 NZ), cast, then NZ -> ND by one
    blocked UB -> UB copy per 16-column block (a block holds 16 elements of every row), and MTE3 writes
    the rows out with one DataCopyPad: one burst per row, instead of one per row and 16 columns.
    """

    def __init__(self, pipe: ns.TPipe, acc_dtype, out_dtype, tile_elems: int, buffer_num: int = 2):
        self.via_ub = not ns.get_core_config().has_fixpipe
        if self.via_ub:
            osz = np.dtype(out_dtype).itemsize
            self.acc_ub = ns.TBuf(ns.TPosition.VECCALC)   # written and read by V only: no sync needed
            self.nz_ub = ns.TBuf(ns.TPosition.VECCALC)
            self.q_out = ns.TQue(ns.TPosition.VECOUT)     # V -> MTE3
            pipe.init_buffer(self.acc_ub, tile_elems * np.dtype(acc_dtype).itemsize)
            pipe.init_buffer(self.nz_ub, tile_elems * osz)
            pipe.init_buffer(self.q_out, buffer_num, tile_elems * osz)

    def __call__(self, dst, c_l0, m: int, n: int, src_rows: int, dst_stride: int) -> None:
        """Write rows ``0..m-1``, columns ``0..n-1`` of the NZ tile ``c_l0`` (``src_rows`` rows per 16-column
        block) to ``dst``, rows ``dst_stride`` elements apart."""
        if not self.via_ub:
            ns.fixpipe(dst, c_l0, ns.FixpipeParams(m, n, src_stride=src_rows, dst_stride=dst_stride))
            return
        n1 = ceil_div(n, 16)
        count = n1 * src_rows * 16
        acc = self.acc_ub.get(c_l0.dtype, count)
        ns.data_copy(acc, c_l0, count)
        out = self.q_out.alloc_tensor(dst.dtype)
        esz = out.dtype.itemsize
        nz = self.nz_ub.get(dst.dtype, count) if n1 > 1 else out
        if nz.dtype != acc.dtype:
            ns.cast(nz, acc, ns.RoundMode.CAST_RINT, count)
        else:
            ns.data_copy(nz, acc, count)
        unit = 16 * esz // 32   # one 16-element row of a block, in 32 B units
        for j in range(n1 if n1 > 1 else 0):   # NZ -> ND: block j's rows go to columns 16j..16j+15
            ns.data_copy(out[j * 16:], nz[j * src_rows * 16:],
                         ns.DataCopyParams(block_count=m, block_len=unit, src_stride=0, dst_stride=(n1 - 1) * unit))
        self.q_out.enque(out)
        out = self.q_out.deque()
        row = n1 * 16 * esz     # bytes between rows in UB
        if n * esz == row and dst_stride == n:   # rows follow each other in GM too: one plain copy
            ns.data_copy(dst, out, m * n)
        else:
            ns.data_copy_pad(dst, out, ns.DataCopyExtParams(block_count=m, block_len=n * esz,
                                                            src_stride=(row - round_up(n * esz, 32)) // 32,
                                                            dst_stride=(dst_stride - n) * esz))
        self.q_out.free_tensor(out)


def pipelined(jobs: Sequence, load: Callable, compute: Callable, depth: int) -> None:
    """Run ``compute(job)`` for every job, issuing ``load(next job)`` BEFORE ``compute(this job)``.

    Instructions are issued in program order, so the copy-in of tile i+1 only overlaps the compute of
    tile i if it is issued first: that is what double buffering means for a loop whose compute is many
    instructions long. ``load`` allocates and enqueues; ``compute`` dequeues, so the queue hands them
    over in order. With one buffer (``depth`` 1) nothing can be prefetched."""
    ahead = min(max(depth, 1), len(jobs)) - 1
    for i in range(ahead):
        load(jobs[i])
    for i, job in enumerate(jobs):
        if i + ahead < len(jobs):
            load(jobs[i + ahead])
        compute(job)
