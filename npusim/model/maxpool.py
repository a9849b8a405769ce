"""A device MaxPool 2x2 / stride 2 on NCHW, for the graph pass that moves pooling off the host.

``npusim.ops`` has no pooling operator, so a framework would run MaxPool on the host. This one kernel (one
launch) does it on the vector unit. The catch is the horizontal pair: the vector unit works on contiguous,
32 B-aligned runs and has no gather, so the kernel lets DataCopyPad do the de-interleaving:

1. ``data_copy_pad`` GM -> UB of ``block_len = 1 element`` with a 1-element gap in GM: every **even**
   element of a run of input rows lands in its own 32 B UB block (the rest of the block is padding); the
   same from one element further on gives the **odd** elements. (Each element is its own GM burst: this
   is the DMA-bound part, and the profile shows MTE2 as the critical pipe.)
2. ``max(even, odd)`` over the padded blocks: the horizontal maximum of every pair, one block each;
3. ``max`` of the blocks of input rows ``2i`` and ``2i + 1``: the vertical maximum, one output row;
4. ``data_copy_pad`` UB -> GM of 1-element blocks packs the results densely into the output.

Real Ascend pooling runs on the NC1HWC0 (5HD) layout instead, where one position's 16 channels are one
32 B block and both directions are block-strided copies; here the tensors stay NCHW between ops.
"""

from __future__ import annotations

import numpy as np

import npusim as ns

from ..config import HardwareConfig, get_config
from ..profile import Profile


@ns.kernel
def maxpool2x2(x, y, rows_out: int, w: int, tile_rows: int) -> None:
    """``y`` (rows_out x w/2) = 2x2 / stride-2 max of ``x`` read as (2 * rows_out) rows of ``w``."""
    dt = x.dtype
    isz = dt.itemsize
    slot = 32 // isz                      # elements per 32 B UB block: one useful, the rest padding
    wo = w // 2
    per = -(-rows_out // ns.get_block_num())
    r0 = min(ns.get_block_idx() * per, rows_out)
    r1 = min(r0 + per, rows_out)
    pipe = ns.TPipe()
    q_even, q_odd = ns.TQue(ns.TPosition.VECIN), ns.TQue(ns.TPosition.VECIN)
    q_out = ns.TQue(ns.TPosition.VECOUT)
    pipe.init_buffer(q_even, 2, tile_rows * w * 32)
    pipe.init_buffer(q_odd, 2, tile_rows * w * 32)
    pipe.init_buffer(q_out, 2, tile_rows * wo * 32)
    for r in range(r0, r1, tile_rows):
        n = min(tile_rows, r1 - r)
        # 1. even and odd elements of 2n input rows, one per 32 B block (GM gap: one element)
        even, odd = q_even.alloc_tensor(dt), q_odd.alloc_tensor(dt)
        gather = ns.DataCopyExtParams(n * w, isz, isz, 0)
        ns.data_copy_pad(even, x[r * 2 * w:], gather)
        ns.data_copy_pad(odd, x[r * 2 * w + 1:], gather)
        q_even.enque(even)
        q_odd.enque(odd)
        even, odd = q_even.deque(), q_odd.deque()
        # 2. horizontal pairs
        ns.max(even, even, odd, n * w * slot)
        q_odd.free_tensor(odd)
        # 3. vertical pairs: blocks of row 2i and row 2i + 1
        out = q_out.alloc_tensor(dt)
        run = wo * slot
        for i in range(n):
            ns.max(out[i * run:], even[2 * i * run:], even[(2 * i + 1) * run:], run)
        q_even.free_tensor(even)
        q_out.enque(out)
        # 4. pack one element per block densely into GM
        out = q_out.deque()
        ns.data_copy_pad(y[r * wo:], out, ns.DataCopyExtParams(n * wo, isz, 0, 0))
        q_out.free_tensor(out)


def supports(shape: tuple[int, ...], kernel: int, stride: int, padding: int = 0, dilation: int = 1,
             ceil_mode: bool = False) -> bool:
    """Whether :func:`maxpool_device` can run this pooling: 2x2, stride 2, no padding, even H and W."""
    return (len(shape) == 4 and kernel == 2 and stride == 2 and padding == 0 and dilation == 1 and not ceil_mode
            and shape[2] % 2 == 0 and shape[3] % 2 == 0 and shape[2] > 0 and shape[3] > 0)


def tiling(shape: tuple[int, ...], itemsize: int, cfg: HardwareConfig) -> tuple[int, int]:
    """(tile_rows, block_dim): output rows per tile such that 2 x 2 input blocks of ``tile_rows * W`` 32 B
    slots and 2 output blocks of ``tile_rows * W/2`` slots fit in UB and a copy has at most 4095 blocks;
    blocks of at least 8 output rows, up to the cores there are."""
    n, c, h, w = shape
    rows_out = n * c * h // 2
    per_row = 2 * (2 * w * 32) + 2 * (w // 2) * 32
    tile = max(1, min(rows_out, 4095 // w, cfg.ub_bytes // per_row))
    block_dim = max(1, min(cfg.num_cores, -(-rows_out // 8)))
    return tile, block_dim


def maxpool_device(x: np.ndarray, config: HardwareConfig | str | None = None,
                   sanitize: str = "error") -> tuple[np.ndarray, Profile]:
    """MaxPool 2x2 / stride 2 of an NCHW array on the simulated core: (output, the launch's Profile)."""
    cfg = get_config(config)
    if not supports(x.shape, 2, 2):
        raise ns.UsageError(f"maxpool_device needs NCHW with even H and W, got {x.shape}")
    n, c, h, w = x.shape
    tile, block_dim = tiling(x.shape, x.dtype.itemsize, cfg)
    y = np.zeros((n, c, h // 2, w // 2), x.dtype)
    run = ns.launch(maxpool2x2, block_dim, np.ascontiguousarray(x), y, n * c * h // 2, w, tile, config=cfg,
                    sanitize=sanitize)
    return run["y"], run.profile
