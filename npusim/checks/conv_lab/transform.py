"""Lab 04, exercise 2: what the learner's NCHW -> NC1HWC0 DMA kernel uses, and the package's answer.

- :class:`ZeroWriter` writes zeros to GM from UB (the padding channels of the last C1 block).
- :data:`SLOTS` is the lab's buffer size in elements (one 32 B UB slot each).
- :func:`dma_to_nc1hwc0` is the reference kernel: data movement only, one element per slot.
"""

from __future__ import annotations

import numpy as np

import npusim as ns

SLOTS = 2048
"""Elements one UB buffer of the lab's transform holds: 2048 slots of 32 B = 64 KB."""


class ZeroWriter:
    """Writes zeros to GM on MTE3, from a UB buffer filled once by the vector unit.

    ``zeros = ZeroWriter(pipe, dtype)`` in a kernel's set-up, then ``zeros(dst, count)`` writes ``count``
    zero elements from ``dst`` on. The writes are MTE3 instructions, so later MTE3 copies to the same
    addresses happen after them (one pipe runs in order)."""

    def __init__(self, pipe: ns.TPipe, dtype, nbytes: int = 16 * 1024):
        self.buf = ns.TBuf(ns.TPosition.VECCALC)
        pipe.init_buffer(self.buf, nbytes)
        self.z = self.buf.get(np.dtype(dtype))
        ns.duplicate(self.z, 0, self.z.size)
        ns.set_flag(ns.HardEvent.V_MTE3, 0)       # the zeros are in UB before MTE3 reads them
        ns.wait_flag(ns.HardEvent.V_MTE3, 0)

    def __call__(self, dst, count: int) -> None:
        for off in range(0, count, self.z.size):
            ns.data_copy_pad(dst[off:], self.z, min(self.z.size, count - off))


@ns.kernel
def dma_to_nc1hwc0(x, x5, n: int, c: int, h: int, w: int) -> None:
    """x5 (N, C1, H, W, C0) = x (N, C, H, W) in NC1HWC0 by DMA only; channels c .. C1*C0-1 are zero.
    Each element gets its own 32 B UB slot on the way in and lands C0 elements after the previous one on
    the way out; a channel plane of more than SLOTS positions takes several rounds."""
    isz = x.dtype.itemsize
    c0 = 32 // isz
    c1 = -(-c // c0)
    hw = h * w
    pipe = ns.TPipe()
    q = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT)   # GM -> UB (MTE2) -> GM (MTE3)
    pipe.init_buffer(q, 2, SLOTS * 32)
    zeros = ZeroWriter(pipe, x.dtype)
    for b in range(n):
        if c % c0:
            zeros(x5[(b * c1 + c1 - 1) * hw * c0:], hw * c0)   # MTE3, before the channels (same pipe: in order)
        for ch in range(c):
            src = (b * c + ch) * hw
            dst = (b * c1 + ch // c0) * hw * c0 + ch % c0
            for p0 in range(0, hw, SLOTS):
                cnt = min(SLOTS, hw - p0)
                t = q.alloc_tensor(x.dtype)
                ns.data_copy_pad(t, x[src + p0:], ns.DataCopyExtParams(cnt, isz, 0, 0))
                q.enque(t)
                t = q.deque()
                ns.data_copy_pad(x5[dst + p0 * c0:], t, ns.DataCopyExtParams(cnt, isz, 0, (c0 - 1) * isz))
                q.free_tensor(t)


__all__ = ["SLOTS", "ZeroWriter", "dma_to_nc1hwc0"]
