"""Small pieces every Conv2D kernel uses: moving whole fractals, draining L0C, and prefetching.

These run inside kernels and use only the public npusim API, like the kernels themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class Epilogue:
    """What happens to a finished accumulator tile on its way out of L0C, before it reaches GM.

    In this order: ``dequant`` (int32 -> float with one fp32 scale for the whole tensor, ``"tensor"``, or
    one per output channel, ``"channel"``), then the cast to the output dtype (round to nearest even),
    then ``relu``. On A2 all of it is Fixpipe's work (``FixpipeParams(relu=..., deq_scale=...)``, which
    applies ReLU before its cast: the same values, since ReLU commutes with round-to-nearest); on the
    'classic' core it is vector instructions in UB between L0C -> UB and the copy out.
    ``Epilogue()`` (nothing) is the plain drain."""

    relu: bool = False
    dequant: str | None = None

    def __post_init__(self) -> None:
        if self.dequant not in (None, "tensor", "channel"):
            raise ns.UsageError(f"Epilogue.dequant must be None, 'tensor' or 'channel', not {self.dequant!r}")

    def __bool__(self) -> bool:
        return self.relu or self.dequant is not None

    @property
    def per_channel(self) -> bool:
        return self.dequant == "channel"

    def describe(self) -> str:
        parts = [f"dequant (per-{self.dequant} scale)"] if self.dequant else []
        parts += ["ReLU"] if self.relu else []
        return " + ".join(parts) or "none"


def nz_to_nd(out, nz, m: int, n1: int, src_rows: int) -> None:
    """UB -> UB on the vector pipe: the NZ tile ``nz`` (``n1`` blocks of ``src_rows`` rows x 16) to ND rows
    of ``n1 * 16`` elements in ``out``, one blocked copy per 16-column block (a block holds 16 elements of
    every row). With one block, NZ is already ND: nothing to do when ``out`` is ``nz``, else one plain copy."""
    if n1 == 1:
        if out is not nz:
            ns.data_copy(out, nz, src_rows * 16)
        return
    unit = 16 * out.dtype.itemsize // 32   # one 16-element row of a block, in 32 B units
    for j in range(n1):
        ns.data_copy(out[j * 16:], nz[j * src_rows * 16:],
                     ns.DataCopyParams(block_count=m, block_len=unit, src_stride=0, dst_stride=(n1 - 1) * unit))


def write_rows(dst, out, m: int, n: int, n1: int, dst_stride: int) -> None:
    """UB -> GM on MTE3: ``m`` ND rows of ``out`` (``n1 * 16`` elements apart in UB), ``n`` elements each,
    to ``dst`` (rows ``dst_stride`` elements apart): one DataCopyPad, one burst per row (one plain
    DataCopy when the rows follow each other in GM too)."""
    esz = out.dtype.itemsize
    row = n1 * 16 * esz     # bytes between rows in UB
    if n * esz == row and dst_stride == n:
        ns.data_copy(dst, out, m * n)
    else:
        ns.data_copy_pad(dst, out, ns.DataCopyExtParams(block_count=m, block_len=n * esz,
                                                        src_stride=(row - round_up(n * esz, 32)) // 32,
                                                        dst_stride=(dst_stride - n) * esz))


class Drain:
    """Moves a finished accumulator tile from L0C to GM as ND rows, through an :class:`Epilogue`, cast to
    the output dtype.

    On A2 that is one Fixpipe (PIPE_FIX): NZ -> ND, dequantisation, ReLU and the cast happen on the way
    out. The 'classic' core has no Fixpipe, so the vector pipe does it in UB: L0C -> UB (NZ), int32 ->
    fp32 and the scale for a dequantisation, the cast, ReLU (in the output dtype: the narrowest pass),
    then NZ -> ND by one blocked UB -> UB copy per 16-column block, and MTE3 writes the rows out with
    one DataCopyPad: one burst per row, instead of one per row and 16 columns.

    Scales (dequantisation) are loaded once by :meth:`load_scales`: per tensor, the scalar unit reads
    the one value from GM; per channel, MTE2 copies all of them to L1 (A2, read by Fixpipe) or UB
    (classic), and one MTE2 -> FIX (MTE2 -> V) flag orders that copy before the first drain. Nothing
    overwrites them later, so no flag is needed the other way (FIX -> MTE2).
    ``channels`` is the number of output channels (the scale vector, padded to 16).
    """

    def __init__(self, pipe: ns.TPipe, acc_dtype, out_dtype, tile_elems: int, buffer_num: int = 2,
                 epilogue: Epilogue | None = None, channels: int = 0):
        self.via_ub = not ns.get_core_config().has_fixpipe
        self.epilogue = epilogue or Epilogue()
        self.channels16 = round_up(max(channels, 1), 16)
        self.scale_value = None
        ep = self.epilogue
        if ep.per_channel:
            self.scale_buf = ns.TBuf(ns.TPosition.VECCALC if self.via_ub else ns.TPosition.A1)
            pipe.init_buffer(self.scale_buf, self.channels16 * 4)
        if self.via_ub:
            osz = np.dtype(out_dtype).itemsize
            self.acc_ub = ns.TBuf(ns.TPosition.VECCALC)   # written and read by V only: no sync needed
            self.nz_ub = ns.TBuf(ns.TPosition.VECCALC)
            self.q_out = ns.TQue(ns.TPosition.VECOUT)     # V -> MTE3
            pipe.init_buffer(self.acc_ub, tile_elems * np.dtype(acc_dtype).itemsize)
            pipe.init_buffer(self.nz_ub, tile_elems * osz)
            pipe.init_buffer(self.q_out, buffer_num, tile_elems * osz)
            if ep.per_channel:   # the scales repeated down the rows of each 16-channel block, as the tile
                self.scale_tile = ns.TBuf(ns.TPosition.VECCALC)
                pipe.init_buffer(self.scale_tile, tile_elems * 4)
                self.tile_key = None

    # --- scales ------------------------------------------------------------------------------------
    def load_scales(self, scale) -> None:
        """Bring the dequantisation scales on chip (a GM float32 tensor of 1, or ``channels`` padded to
        16, values); call once before the first drain."""
        ep = self.epilogue
        if ep.dequant == "tensor":
            self.scale_value = scale.get_value(0)     # scalar unit, from GM: a register for the kernel
        elif ep.per_channel:
            s = self.scale_buf.get(ns.float32, self.channels16)
            ns.data_copy(s, scale, self.channels16)
            event = ns.HardEvent.MTE2_V if self.via_ub else ns.HardEvent.MTE2_FIX
            ns.set_flag(event, 0)      # the scales are in L1 (UB)...
            ns.wait_flag(event, 0)     # ...before Fixpipe (the vector unit) reads them
            self.scales = s

    def fixpipe_scale(self, col0: int):
        """Fixpipe's ``deq_scale``: None, the per-tensor value, or the L1 scales from channel ``col0``."""
        if self.epilogue.per_channel:
            return self.scales[col0:]
        return self.scale_value

    def expand_scales(self, col0: int, n1: int, rows: int):
        """The per-channel scales of channels ``col0 ..`` laid out like an NZ tile of ``n1`` blocks of
        ``rows`` rows (each row of block j holds the scales of channels col0 + 16j ..): one vector Mul
        then scales a whole tile. Built on the vector pipe from the scales in UB: the first row of every
        block, then doubling copies (rows 0..r -> r..2r); rebuilt only when the tile's shape changes."""
        key = (col0, n1, rows)
        t = self.scale_tile.get(ns.float32, n1 * rows * 16)
        if self.tile_key == key:
            return t
        two = 2   # one row of 16 fp32 = 2 x 32 B
        ns.data_copy(t, self.scales[col0:], ns.DataCopyParams(block_count=n1, block_len=two, src_stride=0,
                                                              dst_stride=two * (rows - 1)))
        r = 1
        while r < rows:
            c = min(r, rows - r)
            ns.data_copy(t[r * 16:], t, ns.DataCopyParams(block_count=n1, block_len=two * c,
                                                          src_stride=two * (rows - c), dst_stride=two * (rows - c)))
            r += c
        self.tile_key = key
        return t

    # --- the drain ---------------------------------------------------------------------------------
    def __call__(self, dst, c_l0, m: int, n: int, src_rows: int, dst_stride: int, col0: int = 0) -> None:
        """Write rows ``0..m-1``, columns ``0..n-1`` of the NZ tile ``c_l0`` (``src_rows`` rows per 16-column
        block) to ``dst``, rows ``dst_stride`` elements apart; ``col0`` is the output channel of column 0
        (for per-channel scales)."""
        ep = self.epilogue
        if not self.via_ub:
            ns.fixpipe(dst, c_l0, ns.FixpipeParams(m, n, src_stride=src_rows, dst_stride=dst_stride, relu=ep.relu,
                                                   deq_scale=self.fixpipe_scale(col0) if ep.dequant else None))
            return
        n1 = ceil_div(n, 16)
        count = n1 * src_rows * 16
        acc = self.acc_ub.get(c_l0.dtype, count)
        ns.data_copy(acc, c_l0, count)                       # L0C -> UB (V)
        if ep.dequant:
            acc = self.dequantise(acc, count, col0, n1, src_rows)
        out = self.q_out.alloc_tensor(dst.dtype)             # waits until MTE3 has written this buffer out
        nz = self.nz_ub.get(dst.dtype, count) if n1 > 1 else out
        if nz.dtype != acc.dtype:
            ns.cast(nz, acc, ns.RoundMode.CAST_RINT, count)
            if ep.relu:
                ns.relu(nz, nz, count)                       # after the cast: fewer bytes, same values
        elif ep.relu:
            ns.relu(nz, acc, count)
        else:
            ns.data_copy(nz, acc, count)
        nz_to_nd(out, nz, m, n1, src_rows)
        self.q_out.enque(out)                                # V -> MTE3
        out = self.q_out.deque()
        write_rows(dst, out, m, n, n1, dst_stride)
        self.q_out.free_tensor(out)                          # MTE3 -> V: the buffer may be reused

    def dequantise(self, acc, count: int, col0: int, n1: int, rows: int):
        """int32 -> fp32 in place, times the scale (vector pipe); returns the fp32 view."""
        f = acc.reinterpret_cast(ns.float32)
        ns.cast(f, acc, ns.RoundMode.CAST_RINT, count)
        if self.epilogue.per_channel:
            ns.mul(f, f, self.expand_scales(col0, n1, rows), count)
        else:
            ns.muls(f, f, self.scale_value, count)
        return f


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
