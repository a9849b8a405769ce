"""Row-wise softmax on the vector unit, numerically stable: ``y = exp(x - max(x)) / sum(exp(x - max(x)))``.

Each block takes a range of rows. A row is processed in chunks of at most ``tile`` elements, so rows
longer than UB work too: pass 1 keeps a running maximum ``m`` and a running sum ``s`` ("online
softmax": when the maximum grows from ``m`` to ``m'``, the sum so far is rescaled by ``exp(m - m')``);
pass 2 writes ``exp(x - m) / s``. A row that fits one chunk is read once. fp16 inputs are computed in fp32.

Masked rows (attention masks write ``-inf``): a chunk whose values are all ``-inf`` while the running
maximum is still ``-inf`` adds nothing to the sum (``exp(-inf - (-inf))`` would be NaN), so a row that is
only partly masked is exact whichever chunks the mask covers. A row that is ``-inf`` everywhere has no
softmax; like ``torch.softmax`` the kernel writes NaN for it.

The scalar unit reads each reduction's result with ``get_value``, after a V -> S flag: the vector
unit's results are not visible to the scalar unit until then.
"""

from __future__ import annotations

import math

import numpy as np

import npusim as ns
from .common import copy


class KernelSoftmax:
    def __init__(self, x, y, rows: int, cols: int, tile: int, buffer_num: int):
        self.x, self.y, self.cols, self.tile = x, y, cols, tile
        self.dtype = x.dtype
        self.row0, self.nrows = _rows_of_block(rows)
        self.pipe = ns.TPipe()
        self.q_in = ns.TQue(ns.TPosition.VECIN)
        self.q_out = ns.TQue(ns.TPosition.VECOUT)
        self.work = ns.TBuf(ns.TPosition.VECCALC)   # fp32 copy of the chunk
        self.red = ns.TBuf(ns.TPosition.VECCALC)    # reduction result (one value, 32 B)
        self.tmp = ns.TBuf(ns.TPosition.VECCALC)    # reduction partials
        isz = x.dtype.itemsize
        self.pipe.init_buffer(self.q_in, buffer_num, tile * isz)
        self.pipe.init_buffer(self.q_out, buffer_num, tile * isz)
        self.pipe.init_buffer(self.work, tile * 4)
        self.pipe.init_buffer(self.red, 32)
        self.pipe.init_buffer(self.tmp, max(32, -(-tile * 4 // 256) * 4))

    def process(self) -> None:
        for r in range(self.row0, self.row0 + self.nrows):
            base = r * self.cols
            if self.cols <= self.tile:  # the row fits in UB: one read, one write
                w = self.load(base, 0, self.cols)
                m = self.reduce(ns.reduce_max, w, self.cols)
                self.store(base, 0, self.cols, self.exp_shifted(w, m, self.cols), None)
            else:
                m, s = self.statistics(base)
                self.normalise(base, m, s)

    def load(self, base: int, off: int, n: int):
        """CopyIn one chunk and return it as fp32 in the work buffer."""
        t = self.q_in.alloc_tensor(self.dtype)
        copy(t, self.x[base + off:], n)
        self.q_in.enque(t)
        t = self.q_in.deque()
        w = self.work.get(ns.float32)
        if self.dtype == ns.float32:
            ns.adds(w, t, 0.0, n)
        else:
            ns.cast(w, t, ns.RoundMode.CAST_NONE, n)
        self.q_in.free_tensor(t)
        return w

    def reduce(self, fn, w, n: int) -> float:
        """A vector reduction whose result the scalar unit reads back."""
        red = self.red.get(ns.float32)
        fn(red, w, self.tmp.get(ns.float32), n)
        ns.set_flag(ns.HardEvent.V_S, 0)   # make the vector result visible to the scalar unit
        ns.wait_flag(ns.HardEvent.V_S, 0)
        return red.get_value(0)

    def statistics(self, base: int) -> tuple[float, float]:
        """Pass 1: the row maximum and the sum of exp(x - max), chunk by chunk (online)."""
        m, s = -math.inf, 0.0
        for off in range(0, self.cols, self.tile):
            n = min(self.tile, self.cols - off)
            w = self.load(base, off, n)
            m_new = max(m, self.reduce(ns.reduce_max, w, n))
            if m_new == -math.inf:  # masked so far: nothing to add (and exp(-inf - (-inf)) is NaN)
                continue
            chunk_sum = self.reduce(ns.reduce_sum, self.exp_shifted(w, m_new, n), n)
            s = float(np.float32(s * math.exp(m - m_new) + chunk_sum))  # scalar unit, fp32
            m = m_new
        return m, s

    def exp_shifted(self, w, m: float, n: int):
        """w = exp(w - m), in place."""
        ns.adds(w, w, -m, n)
        ns.exp(w, w, n)
        return w

    def normalise(self, base: int, m: float, s: float) -> None:
        """Pass 2 (long rows only): y = exp(x - m) / s, chunk by chunk."""
        for off in range(0, self.cols, self.tile):
            n = min(self.tile, self.cols - off)
            self.store(base, off, n, self.exp_shifted(self.load(base, off, n), m, n), s)

    def store(self, base: int, off: int, n: int, w, s: float | None) -> None:
        """Divide by the sum (``None``: compute it from ``w`` first) and CopyOut."""
        if s is None:
            s = self.reduce(ns.reduce_sum, w, n)
        # a fully masked row: the sum is 0 (or NaN from a -inf max), and its softmax is NaN as in torch
        ns.muls(w, w, 1.0 / s if s > 0 else math.nan, n)
        o = self.q_out.alloc_tensor(self.dtype)
        if self.dtype == ns.float32:
            ns.adds(o, w, 0.0, n)
        else:
            ns.cast(o, w, ns.RoundMode.CAST_RINT, n)
        self.q_out.enque(o)
        o = self.q_out.deque()
        copy(self.y[base + off:], o, n)
        self.q_out.free_tensor(o)


def _rows_of_block(rows: int) -> tuple[int, int]:
    per = -(-rows // ns.get_block_num())
    start = min(ns.get_block_idx() * per, rows)
    return start, max(0, min(per, rows - start))


@ns.kernel
def softmax(x, y, rows: int, cols: int, tile: int = 4096, buffer_num: int = 2) -> None:
    """``y[r, :] = softmax(x[r, :])`` for ``rows x cols`` row-major fp16/fp32 data."""
    KernelSoftmax(x, y, rows, cols, tile, buffer_num).process()


def run_softmax(x: np.ndarray, *, tile: int = 4096, buffer_num: int = 2, block_dim: int = 1, config=None,
                sanitize: str = "error") -> ns.LaunchResult:
    """Launch :func:`softmax` over the rows of a 2-D array; ``result["y"]`` is the output."""
    rows, cols = x.shape
    y = np.zeros_like(x)
    return ns.launch(softmax, block_dim, np.ascontiguousarray(x), y, rows, cols, tile, buffer_num,
                     config=config, sanitize=sanitize, auto_sync=False)  # its V -> S flags are written by hand

