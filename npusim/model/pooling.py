"""Device pooling kernels on NCHW, for the graph pass that moves pooling off the host: MaxPool 2x2/stride 2
(the labs' CNN), MaxPool 3x3/stride 2/padding 1 (the ResNet stem) and global average pooling (ResNet's
``AdaptiveAvgPool2d(1)``).

``npusim.ops`` has no pooling operator, so a framework would run these on the host. Each is one launch on
the vector unit. The catch is the horizontal neighbours: the vector unit works on contiguous, 32 B-aligned
runs. **Max pool** (stride 2, even H and W), per band of output rows of one (image, channel) plane:

1. one DataCopyPad brings the band's input rows, one burst per row, each row padded in UB to a multiple
   of 2 x 32 B (so that each half of it is whole 32 B blocks); for 3x3 / padding 1 a second one brings
   the same rows one element earlier (the input array gets one leading element for it);
2. horizontal: GatherMask's built-in patterns split every row into its even (``E``) and odd (``O``)
   columns, ``H = max(E, O)`` for the whole band; for 3x3 output column ``j`` also covers input column
   ``2j - 1``, the even columns of the shifted copy: ``H = max(H, E')`` except in the first column of every
   row (a select with a mask built once), whose left neighbour is padding;
3. vertical: each output row is the max of its 2 (or 3, padding clipped) rows of ``H``;
4. a UB -> GM ``data_copy_pad`` writes the output rows, one burst each.

(An earlier version let DataCopyPad de-interleave, one 1-element burst per input element: MTE2-bound,
ten times slower on ResNet-18's stem.)

**Global average pool**: ``(N*C)`` rows of ``H*W`` elements. Column ``k`` of every row (one element per
row, a 1-element block with a gap of ``H*W - 1`` elements) is gathered, cast to float32 and added to an
accumulator, so the sum runs in float32 over the ``H*W`` columns in order; then ``* 1/(H*W)``, a cast
back, and the same dense pack.

Real Ascend pooling runs on the NC1HWC0 (5HD) layout instead, where one position's 16 channels are one
32 B block and both directions are block-strided copies; here the tensors stay NCHW between ops.
"""

from __future__ import annotations

import numpy as np

import npusim as ns

from ..config import HardwareConfig, get_config
from ..profile import Profile

MAX_BLOCKS = 4095
"""Blocks one DataCopyPad moves at most (``block_count`` is 12 bits)."""
MAX_POOLS = ((2, 2, 0), (3, 2, 1))
"""(kernel, stride, padding) of the max pools the device runs."""


@ns.kernel
def maxpool(x, y, planes: int, h: int, w: int, k: int, pad: int, band: int) -> None:
    """``y`` (planes x ho x wo) = k x k / stride-2 max (padding ``pad``) of the planes x h x w elements of
    ``x`` from its element 1 (element 0 is a front pad: the shifted copy of 3x3 starts one element early)."""
    dt = x.dtype
    isz = dt.itemsize
    slot = 32 // isz                      # elements per 32 B block
    pitch = _round_up(w, 2 * slot)        # a row in UB, padded so that its even (odd) half is whole blocks
    half = pitch // 2                     # one row of E, O, H: whole blocks
    ho, wo = (h + 2 * pad - k) // 2 + 1, (w + 2 * pad - k) // 2 + 1
    bands = -(-ho // band)
    units = planes * bands
    per = -(-units // ns.get_block_num())
    u0 = min(ns.get_block_idx() * per, units)
    u1 = min(u0 + per, units)
    rows_in = 2 * band - 2 + k            # input rows of a full band
    lanes = 256 // isz                    # select and the fills work on whole 256 B repeats
    span_in, span = _round_up(rows_in * pitch, lanes), _round_up(rows_in * half, lanes)
    pipe = ns.TPipe()
    q_in, q_shift = ns.TQue(ns.TPosition.VECIN), ns.TQue(ns.TPosition.VECIN)
    q_out = ns.TQue(ns.TPosition.VECOUT)
    even, odd, hbuf, three, first = (ns.TBuf(ns.TPosition.VECCALC) for _ in range(5))
    pipe.init_buffer(q_in, 2, span_in * isz)
    for b in (even, odd, hbuf):
        pipe.init_buffer(b, span * isz)
    pipe.init_buffer(q_out, 2, _round_up(band * _round_up(wo, slot), lanes) * isz)
    row_copy = lambda n: ns.DataCopyExtParams(n, w * isz, 0, (pitch - _round_up(w, slot)) * isz // 32)
    if k == 3:
        pipe.init_buffer(q_shift, 2, span_in * isz)
    wr = _round_up(w, slot)
    for q in ((q_in, q_shift) if k == 3 else (q_in,)):
        # once per buffer: the gap at the end of every padded row, which no copy writes and GatherMask
        # reads (its values land in the unused end of each half row)
        bufs = [q.alloc_tensor(dt) for _ in range(2)]
        for t in bufs:
            ns.duplicate(t[rows_in * pitch:], 0.0, span_in - rows_in * pitch) if span_in > rows_in * pitch else None
            if pitch > wr:
                for r in range(rows_in):
                    ns.duplicate(t[r * pitch + wr:], 0.0, pitch - wr)
        for t in bufs:
            q.free_tensor(t)
    if k == 3:
        pipe.init_buffer(three, span * isz)
        # once per block: select reads whole 256 B repeats of hbuf and three past the band's last row: fill
        # both, so every byte it reads was written; and its mask: the first element of every input row
        ns.duplicate(hbuf.get(dt), 0.0, span)
        ns.duplicate(three.get(dt), 0.0, span)
        pipe.init_buffer(first, _round_up(span // 8, 32))
        mask = first.get(ns.uint8)
        ns.duplicate(mask, 0, mask.size)
        ns.set_flag(ns.HardEvent.V_S, 0)  # the scalar unit writes the bits after the vector unit cleared them
        ns.wait_flag(ns.HardEvent.V_S, 0)
        for r in range(rows_in):
            mask.set_value(r * half // 8, 1)
        ns.set_flag(ns.HardEvent.S_V, 0)  # ...and the vector unit reads them after that
        ns.wait_flag(ns.HardEvent.S_V, 0)
    for u in range(u0, u1):
        plane, b = divmod(u, bands)
        i0 = b * band
        n = min(band, ho - i0)
        r_lo = max(0, 2 * i0 - pad)
        r_hi = min(h, 2 * (i0 + n - 1) - pad + k)
        nr = r_hi - r_lo
        src = 1 + (plane * h + r_lo) * w
        # 1. the band's input rows, one burst per row, each padded to ``pitch`` in UB (for 3x3 also the same
        #    rows one element earlier: their even elements are the odd ones of the column before)
        xin = q_in.alloc_tensor(dt)
        ns.data_copy_pad(xin, x[src:], row_copy(nr))
        q_in.enque(xin)
        if k == 3:
            xs = q_shift.alloc_tensor(dt)
            ns.data_copy_pad(xs, x[src - 1:], row_copy(nr))
            q_shift.enque(xs)
        xin = q_in.deque()
        # 2. horizontal: even and odd columns apart (GatherMask), their max; for 3x3 / pad 1 also column
        #    2j - 1, except in the first column of each row (the mask), whose left neighbour is padding
        e, o, hmax = even.get(dt), odd.get(dt), hbuf.get(dt)
        ns.gather_mask(e, xin, 1, True, nr * pitch)
        ns.gather_mask(o, xin, 2, True, nr * pitch)
        q_in.free_tensor(xin)
        ns.max(hmax, e, o, nr * half)
        if k == 3:
            xs = q_shift.deque()
            t3 = three.get(dt)
            ns.gather_mask(e, xs, 1, True, nr * pitch)      # x[2j - 1] of every row
            q_shift.free_tensor(xs)
            ns.max(t3, hmax, e, nr * half)
            ns.select(hmax, first.get(ns.uint8), hmax, t3, _round_up(nr * half, lanes))
        # 3. vertical: rows 2i - pad .. 2i - pad + k - 1 of the plane, clipped to the image
        out = q_out.alloc_tensor(dt)
        orow = _round_up(wo, slot)
        for i in range(n):
            top = 2 * (i0 + i) - pad
            rows = [r - r_lo for r in range(max(top, 0), min(top + k, h))]
            dst = out[i * orow:]
            ns.max(dst, hmax[rows[0] * half:], hmax[rows[1 % len(rows)] * half:], wo)
            for r in rows[2:]:
                ns.max(dst, dst, hmax[r * half:], wo)
        q_out.enque(out)
        # 4. the output rows, one burst each
        out = q_out.deque()
        ns.data_copy_pad(y[(plane * ho + i0) * wo:], out, ns.DataCopyExtParams(n, wo * isz, 0, 0))
        q_out.free_tensor(out)


def _round_up(v: int, m: int) -> int:
    return -(-v // m) * m


@ns.kernel
def global_avgpool(x, y, rows: int, hw: int, tile: int) -> None:
    """``y[r] = mean(x[r, :hw])`` for ``rows`` rows of ``hw`` elements, summed in float32."""
    dt = x.dtype
    isz = dt.itemsize
    slot = 32 // isz
    per = -(-rows // ns.get_block_num())
    r0 = min(ns.get_block_idx() * per, rows)
    r1 = min(r0 + per, rows)
    pipe = ns.TPipe()
    q_col = ns.TQue(ns.TPosition.VECIN)
    q_out = ns.TQue(ns.TPosition.VECOUT)
    wide, acc = ns.TBuf(ns.TPosition.VECCALC), ns.TBuf(ns.TPosition.VECCALC)
    pipe.init_buffer(q_col, 2, tile * 32)
    pipe.init_buffer(q_out, 2, tile * 32)
    pipe.init_buffer(wide, tile * slot * 4)
    pipe.init_buffer(acc, tile * slot * 4)
    for r in range(r0, r1, tile):
        n = min(tile, r1 - r)
        count = n * slot                  # the elements of n blocks; the useful one is the first of each
        total = acc.get(ns.float32)
        ns.duplicate(total, 0.0, count)
        for col in range(hw):             # column col of every row: a 1-element block, gap hw - 1 elements
            c = q_col.alloc_tensor(dt)
            ns.data_copy_pad(c, x[r * hw + col:], ns.DataCopyExtParams(n, isz, (hw - 1) * isz, 0))
            q_col.enque(c)
            c = q_col.deque()
            if dt == ns.float32:
                ns.add(total, total, c, count)
            else:
                f = wide.get(ns.float32)
                ns.cast(f, c, ns.RoundMode.CAST_NONE, count)
                ns.add(total, total, f, count)
            q_col.free_tensor(c)
        ns.muls(total, total, 1.0 / hw, count)
        out = q_out.alloc_tensor(dt)
        if dt == ns.float32:
            ns.adds(out, total, 0.0, count)
        else:
            ns.cast(out, total, ns.RoundMode.CAST_RINT, count)
        q_out.enque(out)
        out = q_out.deque()
        ns.data_copy_pad(y[r:], out, ns.DataCopyExtParams(n, isz, 0, 0))
        q_out.free_tensor(out)


def supports(shape: tuple[int, ...], kernel: int, stride: int, padding: int = 0, dilation: int = 1,
             ceil_mode: bool = False) -> bool:
    """Whether :func:`maxpool_device` can run this max pooling: 2x2 / stride 2 or 3x3 / stride 2 / padding 1,
    on NCHW with even H and W."""
    return (len(shape) == 4 and (kernel, stride, padding) in MAX_POOLS and dilation == 1 and not ceil_mode
            and shape[2] % 2 == 0 and shape[3] % 2 == 0 and shape[2] >= kernel - 1 and shape[3] > 0)


def _blocks(units: int, cfg: HardwareConfig) -> int:
    return max(1, min(cfg.num_cores, units))


def maxpool_tiling(shape: tuple[int, ...], kernel: int, padding: int, cfg: HardwareConfig) -> tuple[int, int]:
    """(band, block_dim): output rows per band such that 2 x 2 gather buffers and the horizontal maxima (for
    3 x 3 also the shifted maxima) of its ``2 * band - 2 + kernel`` input rows (``W/2`` 32 B blocks each) and
    2 output buffers of ``W/2`` blocks per output row fit in UB, and a copy has at most 4095 blocks; one
    unit of work per (plane, band), up to the cores there are."""
    n, c, h, w = shape
    ho = (h + 2 * padding - kernel) // 2 + 1
    wo = (w + 2 * padding - kernel) // 2 + 1
    isz = 2
    pitch = -(-w // 32) * 32
    band = ho

    def ub(band):   # the input rows twice (and the shifted ones twice), E, O, H (and the 3-column maxima), out
        rows = 2 * band - 2 + kernel
        ins = (4 if kernel == 3 else 2) * rows * pitch * isz
        halves = (4 if kernel == 3 else 3) * rows * pitch // 2 * isz
        return ins + halves + 2 * band * (-(-wo // 16) * 16) * isz + 4096

    while band > 1 and (ub(band) > cfg.ub_bytes or 2 * band - 2 + kernel > MAX_BLOCKS):
        band -= 1
    return band, _blocks(n * c * -(-ho // band), cfg)


def maxpool_device(x: np.ndarray, kernel: int = 2, stride: int = 2, padding: int = 0,
                   config: HardwareConfig | str | None = None, sanitize: str = "error") -> tuple[np.ndarray, Profile]:
    """Max pooling of an NCHW array on the simulated chip: (output, the launch's Profile)."""
    cfg = get_config(config)
    if not supports(x.shape, kernel, stride, padding):
        raise ns.UsageError(f"maxpool_device runs {' and '.join(f'{k}x{k}/{s} pad {p}' for k, s, p in MAX_POOLS)} "
                            f"on NCHW with even H and W; got kernel={kernel}, stride={stride}, padding={padding} "
                            f"on {x.shape}")
    n, c, h, w = x.shape
    band, block_dim = maxpool_tiling(x.shape, kernel, padding, cfg)
    ho, wo = (h + 2 * padding - kernel) // 2 + 1, (w + 2 * padding - kernel) // 2 + 1
    y = np.zeros((n, c, ho, wo), x.dtype)
    xp = np.concatenate([np.zeros(1, x.dtype), x.ravel()])   # a front pad: 3x3's shifted copy starts at -1
    run = ns.launch(maxpool, block_dim, xp, y, n * c, h, w, kernel, padding, band, config=cfg, sanitize=sanitize)
    return run["y"], run.profile


def avgpool_tiling(shape: tuple[int, ...], cfg: HardwareConfig) -> tuple[int, int]:
    """(tile, block_dim): rows per tile such that, per row, 2 gathered and 2 output 32 B blocks and two float32
    work blocks of 64 B (the cast copy and the sum) fit in UB, and a copy has at most 4095 blocks; blocks of
    at least 16 rows, up to the cores there are."""
    n, c, _, _ = shape
    rows = n * c
    per_row = 2 * 32 + 2 * 32 + 2 * 64
    tile = max(1, min(MAX_BLOCKS, cfg.ub_bytes // per_row, rows))
    return tile, max(1, min(cfg.num_cores, -(-rows // 16)))


def avgpool_device(x: np.ndarray, config: HardwareConfig | str | None = None,
                   sanitize: str = "error") -> tuple[np.ndarray, Profile]:
    """Global average pooling (N, C, H, W) -> (N, C, 1, 1) on the simulated chip: (output, Profile)."""
    cfg = get_config(config)
    if x.ndim != 4 or x.dtype not in (np.float16, np.float32):
        raise ns.UsageError(f"avgpool_device takes an NCHW float16/float32 array, got {x.dtype} {x.shape}")
    n, c, h, w = x.shape
    tile, block_dim = avgpool_tiling(x.shape, cfg)
    y = np.zeros((n, c, 1, 1), x.dtype)
    run = ns.launch(global_avgpool, block_dim, np.ascontiguousarray(x), y, n * c, h * w, tile, config=cfg,
                    sanitize=sanitize)
    return run["y"], run.profile
