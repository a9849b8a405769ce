"""Vector instructions on UB tensors (count form: the first ``count`` elements of each operand).

Arithmetic runs in the element type (fp16 math rounds like fp16 hardware); inf and NaN results are the
hardware's answer (kernels run with numpy's floating-point warnings off, see :func:`npusim.launch`).
Costs: :func:`costs.vector_cycles` and :func:`costs.reduce_cycles`. Ascend C's mask/repeat forms:
:mod:`npusim.instructions.repeat`.
"""

from __future__ import annotations

import builtins
import numpy as np

from .. import costs, numerics
from .. import dtypes as _dt
from ..core import current
from ..errors import UsageError
from ..numerics import RoundMode
from ..pipes import Pipe
from ..sanitizer import call_site, describe_tensor
from . import repeat
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


def _binary(op, fn, allowed=_NUMERIC, complex_op=False):
    def instr(dst, src0, src1, count: int, repeat_times: int | None = None,
              params: repeat.BinaryRepeatParams | None = None) -> None:
        if repeat_times is not None:   # the mask / repeat form: count is the mask
            return repeat.run(op, fn, dst, (src0, src1), count, repeat_times, repeat.binary_strides(params),
                              complex_op)
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
        _done(core, op, count, dst.dtype.itemsize, site, complex_op=complex_op)
    instr.__name__ = instr.__qualname__ = op   # Python's own TypeError then names the instruction
    instr.__doc__ = (f"{op.capitalize()}: ``dst[i] = {op}(src0[i], src1[i])`` for i < count, in the element type; "
                     f"or ``{op}(dst, src0, src1, mask, repeat_times, BinaryRepeatParams(...))``.")
    return instr


def _with_scalar(op, fn, allowed=_NUMERIC):
    def instr(dst, src, scalar, count: int, repeat_times: int | None = None,
              params: repeat.UnaryRepeatParams | None = None) -> None:
        if repeat_times is not None:
            return repeat.run(op, fn, dst, (src,), count, repeat_times, repeat.unary_strides(params), scalar=scalar)
        core, site, count = _prep(op, dst, (src,), count, allowed)
        fn(src.view()[:count], np.asarray(scalar).astype(dst.dtype), out=dst.view()[:count])
        _done(core, op, count, dst.dtype.itemsize, site)
    instr.__name__ = instr.__qualname__ = op   # Python's own TypeError then names the instruction
    instr.__doc__ = (f"{op}: ``dst[i] = src[i] (op) scalar``; the scalar is first rounded to the element type. "
                     f"Repeat form: ``{op}(dst, src, scalar, mask, repeat_times, UnaryRepeatParams(...))``.")
    return instr


def _unary(op, fn, allowed=_FLOATS, complex_op=False):
    def instr(dst, src, count: int, repeat_times: int | None = None,
              params: repeat.UnaryRepeatParams | None = None) -> None:
        if repeat_times is not None:
            return repeat.run(op, lambda x: _apply(fn, x), dst, (src,), count, repeat_times,
                              repeat.unary_strides(params), complex_op)
        core, site, count = _prep(op, dst, (src,), count, allowed)
        fn(src.view()[:count], out=dst.view()[:count])
        _done(core, op, count, dst.dtype.itemsize, site, complex_op)
    instr.__name__ = instr.__qualname__ = op   # Python's own TypeError then names the instruction
    instr.__doc__ = (f"{op}: element-wise, computed in the element type; repeat form "
                     f"``{op}(dst, src, mask, repeat_times, UnaryRepeatParams(...))``.")
    return instr


def _apply(fn, x):
    out = np.empty_like(x)
    fn(x, out=out)
    return out


def _relu(x, out):
    np.maximum(x, x.dtype.type(0), out=out)


def _reciprocal(x, out):
    np.divide(x.dtype.type(1), x, out=out)


add = _binary("add", np.add)
sub = _binary("sub", np.subtract)
mul = _binary("mul", np.multiply)
div = _binary("div", np.divide, _FLOATS, complex_op=True)
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
