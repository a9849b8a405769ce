"""Vector add, the "hello world" of Ascend C: CopyIn -> Compute -> CopyOut through queues.

Written like the Ascend C sample (a class with init/process/copy_in/compute/copy_out), with tiling,
double buffering (``buffer_num=2``), several blocks, and a tail that is not a multiple of the tile.
"""

from __future__ import annotations

import numpy as np

import npusim as ns


def block_range(total: int, elem_bytes: int, block: int, blocks: int, align_bytes: int = 512) -> tuple[int, int]:
    """This block's share ``[start, start + length)`` of ``total`` elements: equal parts rounded up to
    ``align_bytes`` (default 512 B), so that every block starts on that boundary. DMA needs 32 B; GM serves
    512 B-aligned requests at full speed and others at about 70 % [S1, S4]."""
    align = max(1, align_bytes // elem_bytes)
    per = -(-total // blocks)
    per = -(-per // align) * align
    start = min(block * per, total)
    return start, max(0, min(per, total - start))


class KernelAdd:
    """``z = x + y`` for this block's part of the vectors."""

    def __init__(self, x: ns.GlobalTensor, y: ns.GlobalTensor, z: ns.GlobalTensor, total: int, tile: int,
                 buffer_num: int):
        self.dtype = x.dtype
        start, self.length = block_range(total, x.dtype.itemsize, ns.get_block_idx(), ns.get_block_num())
        self.x, self.y, self.z = x[start:], y[start:], z[start:]
        self.tile = tile
        self.pipe = ns.TPipe()
        self.in_x = ns.TQue(ns.TPosition.VECIN)
        self.in_y = ns.TQue(ns.TPosition.VECIN)
        self.out_z = ns.TQue(ns.TPosition.VECOUT)
        nbytes = tile * x.dtype.itemsize
        self.pipe.init_buffer(self.in_x, buffer_num, nbytes)
        self.pipe.init_buffer(self.in_y, buffer_num, nbytes)
        self.pipe.init_buffer(self.out_z, buffer_num, nbytes)

    def process(self) -> None:
        for offset in range(0, self.length, self.tile):
            count = min(self.tile, self.length - offset)
            self.copy_in(offset, count)
            self.compute(count)
            self.copy_out(offset, count)

    def copy_in(self, offset: int, count: int) -> None:
        x_local = self.in_x.alloc_tensor(self.dtype)
        y_local = self.in_y.alloc_tensor(self.dtype)
        if (count * self.dtype.itemsize) % 32 == 0:
            ns.data_copy(x_local, self.x[offset:], count)
            ns.data_copy(y_local, self.y[offset:], count)
        else:  # the tail: DataCopyPad moves any length
            ns.data_copy_pad(x_local, self.x[offset:], count)
            ns.data_copy_pad(y_local, self.y[offset:], count)
        self.in_x.enque(x_local)
        self.in_y.enque(y_local)

    def compute(self, count: int) -> None:
        x_local = self.in_x.deque()
        y_local = self.in_y.deque()
        z_local = self.out_z.alloc_tensor(self.dtype)
        ns.add(z_local, x_local, y_local, count)
        self.out_z.enque(z_local)
        self.in_x.free_tensor(x_local)
        self.in_y.free_tensor(y_local)

    def copy_out(self, offset: int, count: int) -> None:
        z_local = self.out_z.deque()
        if (count * self.dtype.itemsize) % 32 == 0:
            ns.data_copy(self.z[offset:], z_local, count)
        else:
            ns.data_copy_pad(self.z[offset:], z_local, count)
        self.out_z.free_tensor(z_local)


@ns.kernel
def vector_add(x, y, z, total: int, tile: int = 4096, buffer_num: int = 2) -> None:
    """``z[:total] = x[:total] + y[:total]``, split over the blocks, ``tile`` elements at a time."""
    KernelAdd(x, y, z, total, tile, buffer_num).process()


def run_vector_add(x: np.ndarray, y: np.ndarray, *, tile: int = 4096, buffer_num: int = 2, block_dim: int = 1,
                   config=None, sanitize: str = "error") -> ns.LaunchResult:
    """Launch :func:`vector_add` on new output memory; ``result["z"]`` is the sum."""
    z = np.zeros_like(x)
    return ns.launch(vector_add, block_dim, x, y, z, x.size, tile, buffer_num, config=config, sanitize=sanitize)
