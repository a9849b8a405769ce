"""Element-wise kernels on the vector unit (ReLU), in the same CopyIn -> Compute -> CopyOut shape as
vector add."""

from __future__ import annotations

import npusim as ns
from .common import copy
from .vector_add import block_range


class KernelUnary:
    """``y = op(x)`` for this block's part of a vector, ``tile`` elements at a time."""

    def __init__(self, x, y, total: int, tile: int, buffer_num: int, op) -> None:
        self.dtype, self.op, self.tile = x.dtype, op, tile
        start, self.length = block_range(total, x.dtype.itemsize, ns.get_block_idx(), ns.get_block_num())
        self.x, self.y = x[start:], y[start:]
        self.pipe = ns.TPipe()
        self.q_in, self.q_out = ns.TQue(ns.TPosition.VECIN), ns.TQue(ns.TPosition.VECOUT)
        self.pipe.init_buffer(self.q_in, buffer_num, tile * x.dtype.itemsize)
        self.pipe.init_buffer(self.q_out, buffer_num, tile * x.dtype.itemsize)

    def process(self) -> None:
        for off in range(0, self.length, self.tile):
            n = min(self.tile, self.length - off)
            t = self.q_in.alloc_tensor(self.dtype)
            copy(t, self.x[off:], n)
            self.q_in.enque(t)
            t = self.q_in.deque()
            o = self.q_out.alloc_tensor(self.dtype)
            self.op(o, t, n)
            self.q_out.enque(o)
            self.q_in.free_tensor(t)
            o = self.q_out.deque()
            copy(self.y[off:], o, n)
            self.q_out.free_tensor(o)


@ns.kernel
def relu(x, y, total: int, tile: int = 8192, buffer_num: int = 2) -> None:
    """``y[:total] = max(x[:total], 0)``."""
    KernelUnary(x, y, total, tile, buffer_num, ns.relu).process()


@ns.kernel
def scale(x, y, total: int, alpha: float, tile: int = 8192, buffer_num: int = 2) -> None:
    """``y[:total] = alpha * x[:total]``."""
    KernelUnary(x, y, total, tile, buffer_num, lambda o, t, n: ns.muls(o, t, alpha, n)).process()
