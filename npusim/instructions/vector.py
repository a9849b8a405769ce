"""Vector instructions on UB tensors (count form: the first ``count`` elements of each operand).

Arithmetic runs in the element type (fp16 math rounds like fp16 hardware); inf and NaN results are the
hardware's answer (kernels run with numpy's floating-point warnings off, see :func:`npusim.launch`).
Costs: :func:`costs.vector_cycles` and :func:`costs.reduce_cycles`. Ascend C's mask/repeat forms are not
modelled.
"""

from __future__ import annotations

import builtins
from enum import Enum

import numpy as np

from .. import costs, numerics
from .. import dtypes as _dt
from ..core import current
from ..errors import AlignmentError, OutOfBoundsError, UsageError, report
from ..numerics import RoundMode
from ..pipes import Pipe
from ..sanitizer import call_site, describe_tensor, format_site
from ._access import check_align, check_count, local, same_dtype, touch

V = int(Pipe.V)
_FLOATS = frozenset((_dt.float16, _dt.bfloat16, _dt.float32))
_NUMERIC = _FLOATS | {_dt.int32, _dt.int16}


def _names(allowed) -> str:
    return ", ".join(sorted(d.name for d in allowed))


def _prep(op: str, dst, srcs, count, allowed=_NUMERIC):
    core = current()
    site = call_site()
    count = check_count(count, op)
    local(dst, op, "dst", ("UB",))
    for s in srcs:
        local(s, op, "source", ("UB",))
    same_dtype(op, dst, *srcs)
    if dst.dtype not in allowed:
        raise UsageError(f"{op} works on {_names(allowed)}, not {dst.dtype.name} ({describe_tensor(dst)})",
                         hint=f"cast() to one of {_names(allowed)} first")
    for t in (dst, *srcs):
        t.check_usable(op, site, 0, count)
        check_align(core, t, 32, op, site)
    if core.check:
        vc = core.epoch(V)
        for s in srcs:
            touch(core, s, 0, count, False, V, vc, site, op)
        touch(core, dst, 0, count, True, V, vc, site, op)
    return core, site, count


def _done(core, op, count, isz, site, complex_op=False, flops_per_elem=1):
    core.issue(V, costs.vector_cycles(core.cfg, count, isz, complex_op), op, count * isz, site)
    core.vector_ops += count * flops_per_elem
    core.vector_ideal_cycles += count * isz / core.cfg.vector_bytes_per_cycle


def _fast_operands(core, count, *ts) -> bool:
    """All operands live UB tensors of one allowed dtype with ``count`` elements: the checks of
    :func:`_prep` pass (it runs when this says no, to report the problem)."""
    d = ts[0].dtype
    for t in ts:
        slot = getattr(t, "slot", None)
        if (slot is None or slot.memory.name != "UB" or t.dtype != d or slot.gen != t.gen or t.addr % 32
                or slot.state == "free" or slot.state == "enqueued" or count > t.size):
            return False
    return True


def _binary(op, fn, allowed=_NUMERIC):
    def instr(dst, src0, src1, count: int) -> None:
        core = current()
        if type(count) is int and count > 0 and dst.dtype in allowed and _fast_operands(core, count, dst, src0,
                                                                                          src1):
            site = call_site()
            if core.check:
                vc = core.epoch(V)
                ep = vc[V]
                blk = core.block_idx
                mode = core.mode
                for t, w in ((src0, False), (src1, False), (dst, True)):
                    lo = t.addr
                    t.slot.memory.tracker.access(lo, lo + count * t.dtype.itemsize, w, blk, V, vc, ep, site, op,
                                                 mode, key=t.slot.addr)
        else:
            core, site, count = _prep(op, dst, (src0, src1), count, allowed)
        fn(src0.view()[:count], src1.view()[:count], out=dst.view()[:count])
        _done(core, op, count, dst.dtype.itemsize, site, complex_op=(op == "div"))
    instr.__name__ = op
    instr.__doc__ = f"{op.capitalize()}: ``dst[i] = {op}(src0[i], src1[i])`` for i < count, in the element type."
    return instr


def _with_scalar(op, fn, allowed=_NUMERIC):
    def instr(dst, src, scalar, count: int) -> None:
        core, site, count = _prep(op, dst, (src,), count, allowed)
        fn(src.view()[:count], np.asarray(scalar).astype(dst.dtype), out=dst.view()[:count])
        _done(core, op, count, dst.dtype.itemsize, site)
    instr.__name__ = op
    instr.__doc__ = f"{op}: ``dst[i] = src[i] (op) scalar``; the scalar is first rounded to the element type."
    return instr


def _unary(op, fn, allowed=_FLOATS, complex_op=False):
    def instr(dst, src, count: int) -> None:
        core, site, count = _prep(op, dst, (src,), count, allowed)
        fn(src.view()[:count], out=dst.view()[:count])
        _done(core, op, count, dst.dtype.itemsize, site, complex_op)
    instr.__name__ = op
    instr.__doc__ = f"{op}: element-wise, computed in the element type."
    return instr


def _relu(x, out):
    np.maximum(x, x.dtype.type(0), out=out)


def _reciprocal(x, out):
    np.divide(x.dtype.type(1), x, out=out)


add = _binary("add", np.add)
sub = _binary("sub", np.subtract)
mul = _binary("mul", np.multiply)
div = _binary("div", np.divide, _FLOATS)
max = _binary("max", np.maximum)
min = _binary("min", np.minimum)
adds = _with_scalar("adds", np.add)
muls = _with_scalar("muls", np.multiply)
maxs = _with_scalar("maxs", np.maximum)
mins = _with_scalar("mins", np.minimum)
exp = _unary("exp", np.exp, complex_op=True)
ln = _unary("ln", np.log, complex_op=True)
sqrt = _unary("sqrt", np.sqrt, complex_op=True)
reciprocal = _unary("reciprocal", _reciprocal, complex_op=True)
abs = _unary("abs", np.abs, _NUMERIC)
relu = _unary("relu", _relu, _NUMERIC)


def _reduce(op: str, dst, src, tmp, count: int, fn) -> None:
    core = current()
    site = call_site()
    count = check_count(count, op)
    for t, w in ((dst, "dst"), (src, "src"), (tmp, "tmp")):
        local(t, op, w, ("UB",))
    same_dtype(op, dst, src, tmp)
    if dst.dtype not in _NUMERIC:
        raise UsageError(f"{op} works on {_names(_NUMERIC)}, not {dst.dtype.name} ({describe_tensor(dst)})",
                         hint=f"cast() to one of {_names(_NUMERIC)} first")
    isz = src.dtype.itemsize
    repeats = -(-count * isz // core.cfg.vector_bytes_per_cycle)
    tmp_need = -(-repeats * isz // 32) * 32 // isz  # one partial per 256 B repeat, 32 B aligned
    src.check_usable(op, site, 0, count)
    dst.check_usable(op, site, 0, 1)
    if tmp.size < tmp_need:
        raise OutOfBoundsError(f"{op} over {count} {src.dtype.name} elements needs a tmp buffer of at least "
                               f"{tmp_need} elements (one per 256 B repeat, 32 B aligned); {tmp.name} has "
                               f"{tmp.size}", hint="give the TBuf for tmp a larger length",
                               where=format_site(site), tensor=tmp.name)
    tmp.check_usable(op, site, 0, tmp_need)
    if core.check:
        vc = core.epoch(V)
        touch(core, src, 0, count, False, V, vc, site, op)
        touch(core, tmp, 0, tmp_need, True, V, vc, site, op)
        touch(core, dst, 0, 1, True, V, vc, site, op)
    x = src.view()[:count]
    dst.view()[0] = fn(x)
    core.issue(V, costs.reduce_cycles(core.cfg, count, isz), op, count * isz, site)
    core.vector_ops += count
    core.vector_ideal_cycles += count * isz / core.cfg.vector_bytes_per_cycle


def reduce_max(dst, src, tmp, count: int) -> None:
    """ReduceMax: ``dst[0] = max(src[:count])``; ``tmp`` holds the per-repeat partials."""
    _reduce("reduce_max", dst, src, tmp, count, np.max)


def reduce_sum(dst, src, tmp, count: int) -> None:
    """ReduceSum: ``dst[0] = sum(src[:count])`` as a pairwise tree in the element type."""
    _reduce("reduce_sum", dst, src, tmp, count, numerics.tree_sum)


def cast(dst, src, round_mode: RoundMode, count: int) -> None:
    """Cast: convert ``count`` elements to ``dst``'s dtype with ``round_mode`` (RoundMode.CAST_RINT ...)."""
    core = current()
    site = call_site()
    op = "cast"
    count = check_count(count, op)
    local(dst, op, "dst", ("UB",))
    local(src, op, "src", ("UB",))
    if not isinstance(round_mode, RoundMode):
        raise UsageError(f"cast: round_mode must be a RoundMode, not {round_mode!r}",
                         hint="cast(dst, src, RoundMode.CAST_RINT, count): round_mode comes before count")
    src.check_usable(op, site, 0, count)
    dst.check_usable(op, site, 0, count)
    if core.check:
        vc = core.epoch(V)
        touch(core, src, 0, count, False, V, vc, site, op)
        touch(core, dst, 0, count, True, V, vc, site, op)
    dst.view()[:count] = numerics.cast(src.view()[:count], dst.dtype, round_mode)
    isz = builtins.max(src.dtype.itemsize, dst.dtype.itemsize)
    _done(core, op, count, isz, site)


def duplicate(dst, scalar, count: int) -> None:
    """Duplicate: fill the first ``count`` elements with ``scalar`` (rounded to the element type)."""
    core, site, count = _prep("duplicate", dst, (), count, _NUMERIC | {_dt.int8, _dt.uint8})
    dst.view()[:count] = np.asarray(scalar).astype(dst.dtype)
    _done(core, "duplicate", count, dst.dtype.itemsize, site)


class CMPMODE(Enum):
    """Comparison of compare(): LT, GT, EQ, LE, GE, NE."""

    LT = "lt"
    GT = "gt"
    EQ = "eq"
    LE = "le"
    GE = "ge"
    NE = "ne"


_CMP = {CMPMODE.LT: np.less, CMPMODE.GT: np.greater, CMPMODE.EQ: np.equal, CMPMODE.LE: np.less_equal,
        CMPMODE.GE: np.greater_equal, CMPMODE.NE: np.not_equal}


def _check_256(core, op, count, isz, site):
    if (count * isz) % 256:
        report(AlignmentError(f"{op} over {count} elements = {count * isz} B; compare/select work on whole "
                              f"256 B repeats", hint=f"use a count that is a multiple of {256 // isz}",
                              where=format_site(site)), core.mode)


def compare(dst_mask, src0, src1, cmp_mode: CMPMODE, count: int) -> None:
    """Compare: bit i of ``dst_mask`` (uint8, least significant bit first) = ``src0[i] <cmp> src1[i]``.
    ``count * sizeof(T)`` must be a multiple of 256 B [S2]."""
    core = current()
    site = call_site()
    op = "compare"
    count = check_count(count, op)
    local(dst_mask, op, "dst_mask", ("UB",))
    for s in (src0, src1):
        local(s, op, "source", ("UB",))
    same_dtype(op, src0, src1)
    if dst_mask.dtype.name != "uint8":
        raise UsageError(f"compare: dst_mask must be a uint8 tensor (one bit per element), not "
                         f"{describe_tensor(dst_mask)}", hint="take the mask with alloc_tensor(ns.uint8)")
    if not isinstance(cmp_mode, CMPMODE):
        raise UsageError(f"compare: cmp_mode must be a CMPMODE, not {cmp_mode!r}",
                         hint="compare(mask, a, b, CMPMODE.LT, count): cmp_mode comes before count")
    _check_256(core, op, count, src0.dtype.itemsize, site)
    nb = -(-count // 8)
    for t, c in ((src0, count), (src1, count), (dst_mask, nb)):
        t.check_usable(op, site, 0, c)
    if core.check:
        vc = core.epoch(V)
        touch(core, src0, 0, count, False, V, vc, site, op)
        touch(core, src1, 0, count, False, V, vc, site, op)
        touch(core, dst_mask, 0, nb, True, V, vc, site, op)
    bits = _CMP[cmp_mode](src0.view()[:count], src1.view()[:count])
    dst_mask.view()[:nb] = np.packbits(bits, bitorder="little")
    _done(core, op, count, src0.dtype.itemsize, site)


def select(dst, sel_mask, src0, src1, count: int) -> None:
    """Select: ``dst[i] = src0[i] if bit i of sel_mask else src1[i]``; ``src1`` may be a scalar."""
    core = current()
    site = call_site()
    op = "select"
    count = check_count(count, op)
    local(dst, op, "dst", ("UB",))
    local(sel_mask, op, "sel_mask", ("UB",))
    local(src0, op, "src0", ("UB",))
    scalar = not hasattr(src1, "slot")
    srcs = (src0,) if scalar else (src0, local(src1, op, "src1", ("UB",)))
    same_dtype(op, dst, *srcs)
    _check_256(core, op, count, dst.dtype.itemsize, site)
    nb = -(-count // 8)
    for t, c in ((dst, count), (sel_mask, nb), *((s, count) for s in srcs)):
        t.check_usable(op, site, 0, c)
    if core.check:
        vc = core.epoch(V)
        for s in srcs:
            touch(core, s, 0, count, False, V, vc, site, op)
        touch(core, sel_mask, 0, nb, False, V, vc, site, op)
        touch(core, dst, 0, count, True, V, vc, site, op)
    bits = np.unpackbits(sel_mask.view()[:nb], count=count, bitorder="little").astype(bool)
    other = np.asarray(src1).astype(dst.dtype) if scalar else src1.view()[:count]
    dst.view()[:count] = np.where(bits, src0.view()[:count], other)
    _done(core, op, count, dst.dtype.itemsize, site)
