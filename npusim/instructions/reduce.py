"""Reductions on UB tensors: ReduceMax/Min/Sum (with calIndex and a mask form), WholeReduce*, BlockReduce*
[S2 ReduceMax, ReduceMin, ReduceSum, WholeReduceSum, BlockReduceSum].

An index (calIndex, WholeReduceMax/Min) is stored in the element after the value, as the bits of an
unsigned integer of the element's width (read it with ``reinterpret_cast(ns.uint16)`` for half,
``ns.int32`` for float), as Ascend C stores it.
"""

from __future__ import annotations

from enum import Enum

import numpy as np

from .. import costs, numerics
from .. import dtypes as _dt
from ..core import current
from ..errors import OutOfBoundsError, UsageError
from ..pipes import Pipe
from ..sanitizer import call_site, describe_tensor, format_site
from ._access import check_count, local, same_dtype, touch
from .repeat import _resolve, _touch_runs, offsets

V = int(Pipe.V)
_NUMERIC = frozenset((_dt.float16, _dt.bfloat16, _dt.float32, _dt.int32, _dt.int16))
_UINT = {2: np.uint16, 4: np.uint32}


class ReduceOrder(Enum):
    """Where WholeReduceMax/Min put value and index: ORDER_VALUE_INDEX, ORDER_INDEX_VALUE, ORDER_ONLY_VALUE."""

    ORDER_VALUE_INDEX = 0
    ORDER_INDEX_VALUE = 1
    ORDER_ONLY_VALUE = 2


def _store_index(view, at: int, index: int) -> None:
    view[at:at + 1].view(_UINT[view.dtype.itemsize])[0] = index


def _check(op, dst, src, tmp):
    for t, w in ((dst, "dst"), (src, "src")) + (((tmp, "tmp"),) if tmp is not None else ()):
        local(t, op, w, ("UB",))
    same_dtype(op, dst, src, *(() if tmp is None else (tmp,)))
    if dst.dtype not in _NUMERIC:
        raise UsageError(f"{op} works on float16, bfloat16, float32, int16, int32, not {dst.dtype.name} "
                         f"({describe_tensor(dst)})", hint="cast() first")


def _reduce(op: str, dst, src, tmp, args, fn, arg_fn=None) -> None:
    """ReduceX(dst, src, tmp, count[, cal_index]) or ReduceX(dst, src, tmp, mask, repeat_times,
    src_rep_stride[, cal_index])."""
    core = current()
    site = call_site()
    _check(op, dst, src, tmp)
    isz = src.dtype.itemsize
    lanes = 256 // isz
    if len(args) in (3, 4):   # the mask form: every selected lane of every repeat
        mask, reps, rep_stride = args[:3]
        cal_index = bool(args[3]) if len(args) == 4 else False
        reps, on = _resolve(core, mask, reps, lanes, op)
        idx = offsets(reps, lanes, 32 // isz, 1, rep_stride)[on]
        repeats = reps
    elif len(args) in (1, 2):
        count = check_count(args[0], op)
        cal_index = bool(args[1]) if len(args) == 2 else False
        idx = np.arange(count)
        repeats = -(-count * isz // core.cfg.vector_bytes_per_cycle)
    else:
        raise UsageError(f"{op} takes (dst, src, tmp, count[, cal_index]) or (dst, src, tmp, mask, repeat_times, "
                         f"src_rep_stride[, cal_index]), got {3 + len(args)} arguments",
                         hint=f"{op}(dst, src, tmp, count) as Ascend C's {op.title().replace('_', '')}")
    if cal_index and arg_fn is None:
        raise UsageError(f"{op} has no index", hint="cal_index is for reduce_max and reduce_min")
    # tmp holds one partial per 256 B repeat (value and index with cal_index), 32 B aligned
    per = 2 if cal_index else 1
    tmp_need = -(-repeats * per * isz // 32) * 32 // isz
    n_idx = int(idx.max()) + 1 if idx.size else 0
    src.check_usable(op, site, 0, n_idx)
    dst.check_usable(op, site, 0, 2 if cal_index else 1)
    if tmp.size < tmp_need:
        raise OutOfBoundsError(f"{op} over {repeats} repeat(s) of {src.dtype.name} needs a tmp buffer of at least "
                               f"{tmp_need} elements (one {'value and index' if cal_index else 'partial'} per 256 B "
                               f"repeat, 32 B aligned); {tmp.name} has {tmp.size}",
                               hint="give the TBuf for tmp a larger length", where=format_site(site), tensor=tmp.name)
    tmp.check_usable(op, site, 0, tmp_need)
    if core.check:
        vc = core.epoch(V)
        _touch_runs(core, src, idx, False, vc, site, op)
        touch(core, tmp, 0, tmp_need, True, V, vc, site, op)
        touch(core, dst, 0, 2 if cal_index else 1, True, V, vc, site, op)
    x = src.view()[idx]
    d = dst.view()
    d[0] = fn(x)
    core.__dict__["_reduce_spr"] = d[0]   # the special register GetReduceRepeatSumSpr/MaxMinSpr read
    if cal_index:
        _store_index(d, 1, int(idx[arg_fn(x)]))
    n = int(idx.size)   # the count form: the elements; the mask form: whole repeats move through the unit
    moved = n * isz if len(args) < 3 else repeats * 256
    core.issue(V, costs.reduce_cycles(core.cfg, repeats * lanes, isz), op, moved, site)
    core.vector_ops += n
    core.vector_ideal_cycles += moved / core.cfg.vector_bytes_per_cycle


def reduce_max(dst, src, tmp, *args) -> None:
    """ReduceMax: ``dst[0] = max(src[:count])``, with ``cal_index`` its (first) index in ``dst[1]``; ``tmp``
    holds the per-repeat partials (value and index with cal_index). Mask form: ``reduce_max(dst, src, tmp,
    mask, repeat_times, src_rep_stride, cal_index)``."""
    _reduce("reduce_max", dst, src, tmp, args, np.max, np.argmax)


def reduce_min(dst, src, tmp, *args) -> None:
    """ReduceMin: as :func:`reduce_max` with the minimum."""
    _reduce("reduce_min", dst, src, tmp, args, np.min, np.argmin)


def reduce_sum(dst, src, tmp, *args) -> None:
    """ReduceSum: ``dst[0] = sum(src[:count])`` as a pairwise tree in the element type."""
    _reduce("reduce_sum", dst, src, tmp, args, numerics.tree_sum)


def _per_repeat(op, dst, src, mask, repeat_times, src_blk_stride, src_rep_stride, group: int):
    core = current()
    site = call_site()
    _check(op, dst, src, None)
    isz = src.dtype.itemsize
    lanes = 256 // isz
    reps, on = _resolve(core, mask, repeat_times, lanes, op)
    idx = offsets(reps, lanes, 32 // isz, src_blk_stride, src_rep_stride)
    if reps:
        src.check_usable(op, site, 0, int(idx[on].max()) + 1 if on.any() else 0)
    return core, site, reps, on, idx


def _finish(core, op, site, dst, src, idx, on, out_idx, reps):
    if core.check:
        vc = core.epoch(V)
        _touch_runs(core, src, idx[on], False, vc, site, op)
        _touch_runs(core, dst, out_idx, True, vc, site, op)
    core.issue(V, costs.reduce_cycles(core.cfg, max(reps, 1) * (256 // src.dtype.itemsize), src.dtype.itemsize),
               op, reps * 256, site)
    core.vector_ops += int(on.sum())
    core.vector_ideal_cycles += reps


def _whole(op, dst, src, mask, repeat_times, dst_rep_stride, src_blk_stride, src_rep_stride, fn, arg_fn=None,
           order=ReduceOrder.ORDER_VALUE_INDEX):
    core, site, reps, on, idx = _per_repeat(op, dst, src, mask, repeat_times, src_blk_stride, src_rep_stride, 1)
    width = 1 if arg_fn is None or order is ReduceOrder.ORDER_ONLY_VALUE else 2
    out_idx = np.array([r * dst_rep_stride * width + w for r in range(reps) for w in range(width)], int)
    dst.check_usable(op, site, 0, int(out_idx.max()) + 1 if out_idx.size else 0)
    _finish(core, op, site, dst, src, idx, on, out_idx, reps)
    sv, dv = src.view(), dst.view()
    for r in range(reps):
        x = sv[idx[r][on[r]]]
        base = r * dst_rep_stride * width
        if width == 1:
            dv[base] = fn(x)
        else:
            j = int(np.flatnonzero(on[r])[arg_fn(x)])   # the lane within the repeat
            vi, ii = (0, 1) if order is ReduceOrder.ORDER_VALUE_INDEX else (1, 0)
            dv[base + vi] = fn(x)
            _store_index(dv, base + ii, j)


def whole_reduce_sum(dst, src, mask, repeat_times: int, dst_rep_stride: int = 1, src_blk_stride: int = 1,
                     src_rep_stride: int = 8) -> None:
    """WholeReduceSum: ``dst[r * dst_rep_stride]`` = the sum of repeat r's selected lanes."""
    _whole("whole_reduce_sum", dst, src, mask, repeat_times, dst_rep_stride, src_blk_stride, src_rep_stride,
           numerics.tree_sum)


def whole_reduce_max(dst, src, mask, repeat_times: int, dst_rep_stride: int = 1, src_blk_stride: int = 1,
                     src_rep_stride: int = 8, order: ReduceOrder = ReduceOrder.ORDER_VALUE_INDEX) -> None:
    """WholeReduceMax: per repeat, the maximum and its lane index (``order``), pairs ``dst_rep_stride`` apart."""
    _whole("whole_reduce_max", dst, src, mask, repeat_times, dst_rep_stride, src_blk_stride, src_rep_stride,
           np.max, np.argmax, order)


def whole_reduce_min(dst, src, mask, repeat_times: int, dst_rep_stride: int = 1, src_blk_stride: int = 1,
                     src_rep_stride: int = 8, order: ReduceOrder = ReduceOrder.ORDER_VALUE_INDEX) -> None:
    """WholeReduceMin: as :func:`whole_reduce_max` with the minimum."""
    _whole("whole_reduce_min", dst, src, mask, repeat_times, dst_rep_stride, src_blk_stride, src_rep_stride,
           np.min, np.argmin, order)


def _block(op, dst, src, repeat_times, mask, dst_rep_stride, src_blk_stride, src_rep_stride, fn):
    core, site, reps, on, idx = _per_repeat(op, dst, src, mask, repeat_times, src_blk_stride, src_rep_stride, 8)
    epb = 32 // src.dtype.itemsize
    out_idx = np.array([r * dst_rep_stride * 8 + b for r in range(reps) for b in range(8)
                        if on[r][b * epb:(b + 1) * epb].any()], int)
    dst.check_usable(op, site, 0, int(out_idx.max()) + 1 if out_idx.size else 0)
    _finish(core, op, site, dst, src, idx, on, out_idx, reps)
    sv, dv = src.view(), dst.view()
    for r in range(reps):
        for b in range(8):
            sel = on[r][b * epb:(b + 1) * epb]
            if sel.any():
                dv[r * dst_rep_stride * 8 + b] = fn(sv[idx[r][b * epb:(b + 1) * epb][sel]])


def block_reduce_sum(dst, src, repeat_times: int, mask, dst_rep_stride: int = 1, src_blk_stride: int = 1,
                     src_rep_stride: int = 8) -> None:
    """BlockReduceSum: the sum of each 32 B block's selected lanes; repeat r's 8 results at
    ``dst[r * dst_rep_stride * 8:]``."""
    _block("block_reduce_sum", dst, src, repeat_times, mask, dst_rep_stride, src_blk_stride, src_rep_stride,
           numerics.tree_sum)


def block_reduce_max(dst, src, repeat_times: int, mask, dst_rep_stride: int = 1, src_blk_stride: int = 1,
                     src_rep_stride: int = 8) -> None:
    """BlockReduceMax: the maximum of each 32 B block's selected lanes."""
    _block("block_reduce_max", dst, src, repeat_times, mask, dst_rep_stride, src_blk_stride, src_rep_stride, np.max)


def block_reduce_min(dst, src, repeat_times: int, mask, dst_rep_stride: int = 1, src_blk_stride: int = 1,
                     src_rep_stride: int = 8) -> None:
    """BlockReduceMin: the minimum of each 32 B block's selected lanes."""
    _block("block_reduce_min", dst, src, repeat_times, mask, dst_rep_stride, src_blk_stride, src_rep_stride, np.min)


def get_reduce_repeat_sum_spr():
    """GetReduceRepeatSumSpr: the result of the last ReduceSum/ReduceMax/ReduceMin, from its special register
    (read by the scalar unit: order it after the reduction with a V -> S flag)."""
    core = current()
    v = core.__dict__.get("_reduce_spr")
    if v is None:
        raise UsageError("get_reduce_repeat_sum_spr before any reduction", hint="reduce_sum(...) first")
    core.scalar_issue()
    return v.item()
