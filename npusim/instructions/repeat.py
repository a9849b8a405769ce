"""The mask / repeat form of the vector instructions, and the vector mask register [S2, 矢量计算通用说明].

A vector instruction's repeat form, ``op(dst, src..., mask, repeat_times, params)``, works on
``repeat_times`` repeats of 256 B: each repeat reads 8 blocks of 32 B, block ``b`` of repeat ``r`` at
``r * rep_stride + b * blk_stride`` blocks from the operand's start (strides of
:class:`BinaryRepeatParams` / :class:`UnaryRepeatParams`), and only the lanes the mask selects are
computed. ``mask`` is a count (the first ``mask`` lanes of each repeat, continuous mode) or a pair of
64-bit words ``[low, high]`` (bit i of low = lane i, bit i of high = lane 64 + i; bitwise mode). Masked-off
lanes of ``dst`` keep their value. :data:`MASK_PLACEHOLDER` takes the mask register instead
(:func:`set_vector_mask`); in counter mode (:func:`set_mask_count`) the register holds an element count
and ``repeat_times`` is ignored. Cost: :func:`npusim.costs.repeat_cycles` (a repeat takes its cycle
whatever its mask).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import costs
from ..core import current
from ..errors import UsageError
from ..pipes import Pipe
from ..sanitizer import call_site
from ._access import check_align, local, touch

V = int(Pipe.V)
MASK_PLACEHOLDER = -1   # Ascend C's MASK_PLACEHOLDER: "use the mask register"


class BinaryRepeatParams(NamedTuple):
    """BinaryRepeatParams{dstBlkStride, src0BlkStride, src1BlkStride, dstRepStride, src0RepStride,
    src1RepStride}: strides in 32 B blocks [S2]."""

    dst_blk_stride: int = 1
    src0_blk_stride: int = 1
    src1_blk_stride: int = 1
    dst_rep_stride: int = 8
    src0_rep_stride: int = 8
    src1_rep_stride: int = 8


class UnaryRepeatParams(NamedTuple):
    """UnaryRepeatParams{dstBlkStride, srcBlkStride, dstRepStride, srcRepStride}: strides in 32 B blocks."""

    dst_blk_stride: int = 1
    src_blk_stride: int = 1
    dst_rep_stride: int = 8
    src_rep_stride: int = 8


# --- the mask register (one per core) ---------------------------------------------------------------

def _state(core) -> dict:
    st = core.__dict__.get("_vector_mask")
    if st is None:
        st = core.__dict__["_vector_mask"] = {"counter": False, "mask": None}
    return st


def set_mask_count() -> None:
    """SetMaskCount: the mask register holds an element count (counter mode) until set_mask_norm."""
    core = current()
    core.scalar_issue()
    _state(core)["counter"] = True


def set_mask_norm() -> None:
    """SetMaskNorm: back to normal mode (the mask register holds lane bits)."""
    core = current()
    core.scalar_issue()
    _state(core)["counter"] = False


def set_vector_mask(high: int, low: int) -> None:
    """SetVectorMask(maskHigh, maskLow): normal mode, lane bits ``[low, high]``; counter mode, ``low`` is the
    number of elements (``set_vector_mask(0, count)``, as ``SetVectorMask<T, MaskMode::COUNTER>(0, count)``)."""
    core = current()
    core.scalar_issue()
    _state(core)["mask"] = (int(high), int(low))


def reset_mask() -> None:
    """ResetMask: every lane on."""
    core = current()
    core.scalar_issue()
    _state(core)["mask"] = None


def lanes_of(mask, lanes: int, op: str) -> np.ndarray:
    """The boolean lanes of one repeat that ``mask`` (a count or [low, high] words) selects."""
    if isinstance(mask, (int, np.integer)) and not isinstance(mask, bool):
        if not 1 <= mask <= lanes:
            raise UsageError(f"{op}: a continuous mask selects 1..{lanes} lanes of a repeat, got {mask}",
                             hint=f"mask = number of elements per 256 B repeat, at most {lanes} for this dtype")
        on = np.zeros(lanes, bool)
        on[:mask] = True
        return on
    try:
        low, high = (int(w) for w in (list(mask) + [0])[:2])
    except (TypeError, ValueError):
        raise UsageError(f"{op}: mask must be a lane count or two 64-bit words [low, high], not {mask!r}",
                         hint="mask = 64 (continuous) or mask = [0xFFFF, 0] (bitwise, lanes 0..15)") from None
    bits = [(low >> i) & 1 for i in range(64)] + [(high >> i) & 1 for i in range(64)]
    return np.array(bits[:lanes], bool)


def _resolve(core, mask, repeat_times, lanes: int, op: str):
    """(repeats, lanes mask per repeat as a (repeats, lanes) bool array)."""
    st = _state(core)
    if mask is MASK_PLACEHOLDER or (isinstance(mask, int) and mask == MASK_PLACEHOLDER):
        if st["counter"]:
            count = st["mask"][1] if st["mask"] else 0
            if count < 1:
                raise UsageError(f"{op}: counter mode with no element count", hint="set_vector_mask(0, count) first")
            reps = -(-count // lanes)
            on = np.zeros(reps * lanes, bool)
            on[:count] = True
            return reps, on.reshape(reps, lanes)
        m = st["mask"]
        one = np.ones(lanes, bool) if m is None else lanes_of([m[1], m[0]], lanes, op)
    else:
        one = lanes_of(mask, lanes, op)
    if not isinstance(repeat_times, (int, np.integer)) or not 0 <= repeat_times <= 255:
        raise UsageError(f"{op}: repeat_times must be an int in 0..255, got {repeat_times!r}",
                         hint="split longer work into several instructions of at most 255 repeats")
    return int(repeat_times), np.broadcast_to(one, (int(repeat_times), lanes))


def offsets(reps: int, lanes: int, epb: int, blk: int, rep: int) -> np.ndarray:
    """Element offset of every lane of every repeat: (reps, lanes)."""
    j = np.arange(lanes)
    return (np.arange(reps)[:, None] * rep * epb) + (j // epb) * blk * epb + j % epb


def _touch_runs(core, t, idx: np.ndarray, write: bool, vc, site, op: str) -> None:
    """Record the accessed elements as contiguous runs (masked-off lanes are not accessed)."""
    u = np.unique(idx)
    if not u.size:
        return
    breaks = np.flatnonzero(np.diff(u) != 1)
    starts = np.concatenate(([u[0]], u[breaks + 1]))
    ends = np.concatenate((u[breaks], [u[-1]])) + 1
    for a, b in zip(starts.tolist(), ends.tolist()):
        touch(core, t, a, b - a, write, V, vc, site, op)


def run(op: str, fn, dst, srcs, mask, repeat_times, strides, complex_op: bool = False, scalar=None) -> None:
    """Apply ``fn(*src_values[, scalar])`` lane-wise in the repeat form. ``strides``: ((blk, rep) of dst,
    then of each source)."""
    core = current()
    site = call_site()
    local(dst, op, "dst", ("UB",))
    for s in srcs:
        local(s, op, "source", ("UB",))
        if s.dtype != dst.dtype:
            raise UsageError(f"{op}: operands must share a dtype, got {dst.dtype.name} and {s.dtype.name}",
                             hint="cast() first")
    isz = dst.dtype.itemsize
    lanes, epb = 256 // isz, 32 // isz
    reps, on = _resolve(core, mask, repeat_times, lanes, op)
    idx = [offsets(reps, lanes, epb, b, r)[on] for b, r in strides]
    for t, i in zip((dst, *srcs), idx):
        t.check_usable(op, site, 0, int(i.max()) + 1 if i.size else 0)
        check_align(core, t, 32, op, site)
    if core.check:
        vc = core.epoch(V)
        for s, i in zip(srcs, idx[1:]):
            _touch_runs(core, s, i, False, vc, site, op)
        _touch_runs(core, dst, idx[0], True, vc, site, op)
    vals = [s.view()[i] for s, i in zip(srcs, idx[1:])]
    if scalar is not None:
        vals.append(np.asarray(scalar).astype(dst.dtype))
    if idx[0].size:
        dst.view()[idx[0]] = np.asarray(fn(*vals)).astype(dst.dtype)
    core.issue(V, costs.repeat_cycles(core.cfg, reps, complex_op), op, reps * 256, site)
    core.vector_ops += int(on.sum())
    core.vector_ideal_cycles += reps


def binary_strides(p) -> tuple:
    p = p or BinaryRepeatParams()
    return ((p.dst_blk_stride, p.dst_rep_stride), (p.src0_blk_stride, p.src0_rep_stride),
            (p.src1_blk_stride, p.src1_rep_stride))


def unary_strides(p) -> tuple:
    p = p or UnaryRepeatParams()
    return (p.dst_blk_stride, p.dst_rep_stride), (p.src_blk_stride, p.src_rep_stride)
