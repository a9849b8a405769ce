"""More vector instructions: Rsqrt, Sigmoid, Tanh, Power, LeakyRelu, Axpy, Not/And/Or, ShiftLeft/Right, Brcb,
Gather, GatherMask [S2; Sigmoid, Tanh and Power are Ascend C's high-level math APIs, one instruction here].

Each has the count form of :mod:`npusim.instructions.vector` (and the mask/repeat form where Ascend C's
basic API has one); costs in :func:`npusim.costs.vector_cycles` (transcendental ones as complex ops).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import costs
from .. import dtypes as _dt
from ..core import current
from ..errors import OutOfBoundsError, UsageError
from ..pipes import Pipe
from ..sanitizer import call_site, describe_tensor, format_site
from ._access import check_count, local, touch
from .vector import _FLOATS, _binary, _done, _prep, _unary, _with_scalar

V = int(Pipe.V)
_BITS = frozenset((_dt.int16, _dt.int32, _dt.uint8, _dt.int8))


def _rsqrt(x, out):
    np.divide(x.dtype.type(1), np.sqrt(x), out=out)


def _sigmoid(x, out):
    # in fp32 then rounded: the high-level API computes in the element type's wider helper buffer
    out[...] = (1.0 / (1.0 + np.exp(-x.astype(np.float32)))).astype(x.dtype)


def _tanh(x, out):
    out[...] = np.tanh(x.astype(np.float32)).astype(x.dtype)


def _not(x, out):
    np.invert(x, out=out)


rsqrt = _unary("rsqrt", _rsqrt, complex_op=True)
sigmoid = _unary("sigmoid", _sigmoid, complex_op=True)
tanh = _unary("tanh", _tanh, complex_op=True)
bitwise_not = _unary("not", _not, _BITS)
bitwise_and = _binary("and", np.bitwise_and, _BITS)
bitwise_or = _binary("or", np.bitwise_or, _BITS)
shift_left = _with_scalar("shift_left", np.left_shift, _BITS)
shift_right = _with_scalar("shift_right", np.right_shift, _BITS)


def _leaky(x, alpha, out=None):
    y = np.where(x >= 0, x, x * alpha)
    if out is None:
        return y
    out[...] = y


leaky_relu = _with_scalar("leaky_relu", _leaky, _FLOATS)
leaky_relu.__doc__ = "LeakyRelu: ``dst[i] = src[i] if src[i] >= 0 else src[i] * alpha`` (dst, src, alpha, count)."


def power(dst, src0, src1, count: int) -> None:
    """Power: ``dst[i] = src0[i] ** src1[i]`` (``src1`` may be a scalar), computed in float32 then rounded."""
    core = current()
    scalar = not hasattr(src1, "slot")
    core, site, count = _prep("power", dst, (src0,) if scalar else (src0, src1), count, _FLOATS)
    e = np.float32(src1) if scalar else src1.view()[:count].astype(np.float32)
    dst.view()[:count] = np.power(src0.view()[:count].astype(np.float32), e).astype(dst.dtype)
    _done(core, "power", count, dst.dtype.itemsize, site, complex_op=True)


def axpy(dst, src, scalar, count: int) -> None:
    """Axpy: ``dst[i] = src[i] * scalar + dst[i]`` (dst is read and written)."""
    core, site, count = _prep("axpy", dst, (src,), count, _FLOATS)
    if core.check:   # dst is also a source
        touch(core, dst, 0, count, False, V, core.vc[V], site, "axpy")
    d = dst.view()[:count]
    d[...] = (src.view()[:count] * np.asarray(scalar).astype(dst.dtype) + d).astype(dst.dtype)
    _done(core, "axpy", count, dst.dtype.itemsize, site, flops_per_elem=2)


class BrcbRepeatParams(NamedTuple):
    """BrcbRepeatParams{dstBlkStride, dstRepStride}: strides of the destination in 32 B blocks."""

    dst_blk_stride: int = 1
    dst_rep_stride: int = 8


def brcb(dst, src, repeat_times: int, params: BrcbRepeatParams = BrcbRepeatParams()) -> None:
    """Brcb: each repeat takes 8 elements of ``src`` and fills one 32 B block of ``dst`` with each."""
    core = current()
    site = call_site()
    op = "brcb"
    local(dst, op, "dst", ("UB",))
    local(src, op, "src", ("UB",))
    if src.dtype != dst.dtype or dst.dtype.itemsize not in (2, 4):
        raise UsageError(f"brcb: src and dst must share a 16- or 32-bit dtype, got {src.dtype.name} and "
                         f"{dst.dtype.name}", hint="brcb works on half/float/int16/int32")
    if not isinstance(repeat_times, int) or not 1 <= repeat_times <= 255:
        raise UsageError(f"brcb: repeat_times must be 1..255, got {repeat_times!r}", hint="8 source elements each")
    epb = 32 // dst.dtype.itemsize
    blocks = np.arange(repeat_times * 8)
    starts = (blocks // 8) * params.dst_rep_stride * epb + (blocks % 8) * params.dst_blk_stride * epb
    idx = (starts[:, None] + np.arange(epb)[None, :]).ravel()
    src.check_usable(op, site, 0, repeat_times * 8)
    dst.check_usable(op, site, 0, int(idx.max()) + 1)
    if core.check:
        from .repeat import _touch_runs
        vc = core.epoch(V)
        touch(core, src, 0, repeat_times * 8, False, V, vc, site, op)
        _touch_runs(core, dst, idx, True, vc, site, op)
    dst.view()[idx] = np.repeat(src.view()[:repeat_times * 8], epb)
    core.issue(V, costs.repeat_cycles(core.cfg, repeat_times), op, repeat_times * 256, site)
    core.vector_ops += repeat_times * 8 * epb


def gather(dst, src, src_offset, src_base_addr: int, count: int) -> None:
    """Gather: ``dst[i] = src[(src_base_addr + src_offset[i]) / sizeof(T)]``; ``src_offset`` is a uint32
    (int32 here) tensor of BYTE offsets from ``src``'s start."""
    core = current()
    site = call_site()
    op = "gather"
    count = check_count(count, op)
    for t, w in ((dst, "dst"), (src, "src"), (src_offset, "src_offset")):
        local(t, op, w, ("UB",))
    if src_offset.dtype.itemsize != 4 or src_offset.dtype.kind not in "iu":
        raise UsageError(f"gather: src_offset must be a 32-bit integer tensor of byte offsets, not "
                         f"{describe_tensor(src_offset)}", hint="alloc_tensor(ns.int32) for the offsets")
    isz = src.dtype.itemsize
    dst.check_usable(op, site, 0, count)
    src_offset.check_usable(op, site, 0, count)
    byte = src_base_addr + src_offset.view()[:count].astype(np.int64)
    if (byte % isz).any() or byte.min() < 0 or byte.max() + isz > src.nbytes:
        bad = int(byte[(byte % isz != 0) | (byte < 0) | (byte + isz > src.nbytes)][0])
        raise OutOfBoundsError(f"gather: a byte offset {bad} is not inside {describe_tensor(src)} ({src.nbytes} B) "
                               f"or not a multiple of {isz}", hint="offsets count bytes: element i is at i * sizeof(T)",
                               where=format_site(site), tensor=src.name)
    idx = byte // isz
    if core.check:
        from .repeat import _touch_runs
        vc = core.epoch(V)
        touch(core, src_offset, 0, count, False, V, vc, site, op)
        _touch_runs(core, src, idx, False, vc, site, op)
        touch(core, dst, 0, count, True, V, vc, site, op)
    dst.view()[:count] = src.view()[idx]
    _done(core, op, count, isz, site)


class GatherMaskParams(NamedTuple):
    """GatherMaskParams{src0BlockStride, repeatTimes, src0RepeatStride, src1RepeatStride}."""

    src0_block_stride: int = 1
    repeat_times: int = 1
    src0_repeat_stride: int = 8
    src1_repeat_stride: int = 0


_PATTERNS = {1: lambda j: j % 2 == 0, 2: lambda j: j % 2 == 1, 3: lambda j: j % 4 == 0, 4: lambda j: j % 4 == 1,
             5: lambda j: j % 4 == 2, 6: lambda j: j % 4 == 3, 7: lambda j: np.ones_like(j, bool)}


def gather_mask(dst, src0, src1_pattern, reduce_mode: bool, mask: int,
                params: GatherMaskParams = GatherMaskParams()) -> int:
    """GatherMask: pack the elements of ``src0`` that a pattern selects into ``dst``; returns how many
    (Ascend C's ``rsvdCnt``). ``src1_pattern``: 1..7 (1 even, 2 odd, 3-6 every 4th from 0..3, 7 all) or a
    uint tensor of bits (bit i selects element i). ``reduce_mode`` False: ``params.repeat_times`` whole
    256 B repeats; True: the first ``mask`` elements."""
    core = current()
    site = call_site()
    op = "gather_mask"
    local(dst, op, "dst", ("UB",))
    local(src0, op, "src0", ("UB",))
    isz = src0.dtype.itemsize
    lanes, epb = 256 // isz, 32 // isz
    if reduce_mode:
        n = check_count(mask, op)
        idx = np.arange(n)
    else:
        reps = params.repeat_times
        j = np.arange(lanes)
        idx = (np.arange(reps)[:, None] * params.src0_repeat_stride * epb
               + (j // epb) * params.src0_block_stride * epb + j % epb).ravel()
        n = idx.size
    if isinstance(src1_pattern, int):
        if src1_pattern not in _PATTERNS:
            raise UsageError(f"gather_mask: a built-in pattern is 1..7, not {src1_pattern}",
                             hint="1 even, 2 odd, 3-6 every 4th element from 0..3, 7 all; or a bit tensor")
        sel = _PATTERNS[src1_pattern](np.arange(n) % lanes)
    else:
        local(src1_pattern, op, "src1_pattern", ("UB",))
        nbytes = -(-n // 8)
        src1_pattern.check_usable(op, site, 0, -(-nbytes // src1_pattern.dtype.itemsize))
        raw = src1_pattern.view().view(np.uint8)[:nbytes]
        sel = np.unpackbits(raw, count=n, bitorder="little").astype(bool)
    src0.check_usable(op, site, 0, int(idx.max()) + 1)
    kept = idx[sel]
    dst.check_usable(op, site, 0, max(int(kept.size), 1))
    if core.check:
        from .repeat import _touch_runs
        vc = core.epoch(V)
        _touch_runs(core, src0, idx, False, vc, site, op)
        if kept.size:
            touch(core, dst, 0, int(kept.size), True, V, vc, site, op)
    dst.view()[:kept.size] = src0.view()[kept]
    reps = -(-n * isz // 256)
    core.issue(V, costs.repeat_cycles(core.cfg, reps), op, n * isz, site)
    core.vector_ops += n
    return int(kept.size)


__all__ = ["rsqrt", "sigmoid", "tanh", "power", "leaky_relu", "axpy", "bitwise_not", "bitwise_and", "bitwise_or",
           "shift_left", "shift_right", "brcb", "BrcbRepeatParams", "gather", "GatherMaskParams", "gather_mask"]
