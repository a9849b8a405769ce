"""Compare, CompareScalar and Select on UB tensors [S2 Compare, Compares, Select].

A mask holds one bit per element, least significant bit first, in a uint8 or int8 tensor (Ascend C
accepts both). ``compare`` must cover whole 256 B repeats (``count * sizeof(T)`` a multiple of 256 B);
``select`` has no such rule.
"""

from __future__ import annotations

from enum import Enum

import numpy as np

from ..core import current
from ..errors import AlignmentError, UsageError, report
from ..pipes import Pipe
from ..sanitizer import call_site, describe_tensor, format_site
from ._access import check_count, local, same_dtype, touch
from .vector import _done

V = int(Pipe.V)
_MASK_DTYPES = ("uint8", "int8")


class CMPMODE(Enum):
    """Comparison of compare(): LT, GT, EQ, LE, GE, NE."""

    LT = "lt"
    GT = "gt"
    EQ = "eq"
    LE = "le"
    GE = "ge"
    NE = "ne"


class SELMODE(Enum):
    """Select's mode: VSEL_CMPMASK_SPR (mode 0: the first 256 B / sizeof(T) / 8 bytes of sel_mask, one bit per
    lane of a 256 B repeat, serve every repeat), VSEL_TENSOR_SCALAR_MODE (1: src1 is a scalar),
    VSEL_TENSOR_TENSOR_MODE (2: src1 is a tensor; one bit per element)."""

    VSEL_CMPMASK_SPR = 0
    VSEL_TENSOR_SCALAR_MODE = 1
    VSEL_TENSOR_TENSOR_MODE = 2


_CMP = {CMPMODE.LT: np.less, CMPMODE.GT: np.greater, CMPMODE.EQ: np.equal, CMPMODE.LE: np.less_equal,
        CMPMODE.GE: np.greater_equal, CMPMODE.NE: np.not_equal}


def _mask_tensor(t, op: str, what: str):
    local(t, op, what, ("UB",))
    if t.dtype.name not in _MASK_DTYPES:
        raise UsageError(f"{op}: {what} must be a uint8 or int8 tensor (one bit per element), not "
                         f"{describe_tensor(t)}", hint="take the mask with alloc_tensor(ns.uint8)")
    return t


def _compare(op: str, dst_mask, src0, other, scalar, cmp_mode, count: int) -> None:
    core = current()
    site = call_site()
    count = check_count(count, op)
    _mask_tensor(dst_mask, op, "dst_mask")
    srcs = (src0,) if other is None else (src0, other)
    for s in srcs:
        local(s, op, "source", ("UB",))
    same_dtype(op, *srcs)
    if not isinstance(cmp_mode, CMPMODE):
        raise UsageError(f"{op}: cmp_mode must be a CMPMODE, not {cmp_mode!r}",
                         hint=f"{op}(mask, a, b, CMPMODE.LT, count): cmp_mode comes before count")
    isz = src0.dtype.itemsize
    if (count * isz) % 256:
        report(AlignmentError(f"{op} over {count} elements = {count * isz} B; compare works on whole 256 B "
                              f"repeats", hint=f"use a count that is a multiple of {256 // isz}",
                              where=format_site(site)), core.mode)
    nb = -(-count // 8)
    for t, c in (*((s, count) for s in srcs), (dst_mask, nb)):
        t.check_usable(op, site, 0, c)
    if core.check:
        vc = core.epoch(V)
        for s in srcs:
            touch(core, s, 0, count, False, V, vc, site, op)
        touch(core, dst_mask, 0, nb, True, V, vc, site, op)
    rhs = np.asarray(scalar).astype(src0.dtype) if other is None else other.view()[:count]
    bits = _CMP[cmp_mode](src0.view()[:count], rhs)
    dst_mask.view()[:nb] = np.packbits(bits, bitorder="little").view(dst_mask.dtype)
    _done(core, op, count, isz, site)


def compare(*args) -> None:
    """Compare: bit i of ``dst_mask`` (uint8 or int8, least significant bit first) = ``src0[i] <cmp> src1[i]``:
    ``compare(dst_mask, src0, src1, cmp_mode, count)``, ``count * sizeof(T)`` a multiple of 256 B [S2].
    ``compare(src0, src1, cmp_mode, mask, BinaryRepeatParams())`` compares one 256 B repeat into the compare
    mask register (128 bits; read it with :func:`get_cmp_mask`)."""
    if len(args) == 5 and isinstance(args[2], CMPMODE):
        return _compare_to_register(*args)
    if len(args) != 5:
        raise UsageError(f"compare takes 5 arguments, got {len(args)}",
                         hint="compare(dst_mask, src0, src1, CMPMODE.LT, count), or compare(src0, src1, CMPMODE.LT, "
                              "mask, BinaryRepeatParams()) into the mask register")
    dst_mask, src0, src1, cmp_mode, count = args
    _compare("compare", dst_mask, src0, src1, None, cmp_mode, count)


def _compare_to_register(src0, src1, cmp_mode, mask, params) -> None:
    from . import repeat
    core = current()
    site = call_site()
    op = "compare"
    for s in (src0, src1):
        local(s, op, "source", ("UB",))
    same_dtype(op, src0, src1)
    lanes = 256 // src0.dtype.itemsize
    on = repeat.lanes_of(mask, lanes, op)
    strides = repeat.binary_strides(params)
    idx = [repeat.offsets(1, lanes, 32 // src0.dtype.itemsize, b, r)[0] for b, r in strides[1:]]
    for s, i in zip((src0, src1), idx):
        s.check_usable(op, site, 0, int(i[on].max()) + 1)
    if core.check:
        vc = core.epoch(V)
        for s, i in zip((src0, src1), idx):
            repeat._touch_runs(core, s, i[on], False, vc, site, op)
    bits = np.zeros(128, bool)
    bits[:lanes] = on & _CMP[cmp_mode](src0.view()[idx[0]], src1.view()[idx[1]])
    core.__dict__["_cmp_mask"] = bits
    _done(core, op, lanes, src0.dtype.itemsize, site)


def get_cmp_mask(dst) -> None:
    """GetCmpMask: the compare mask register's 128 bits (16 bytes) into ``dst`` (a UB tensor)."""
    core = current()
    site = call_site()
    local(dst, "get_cmp_mask", "dst", ("UB",))
    d = dst.reinterpret_cast(np.uint8)
    d.check_usable("get_cmp_mask", site, 0, 16)
    bits = core.__dict__.get("_cmp_mask")
    if bits is None:
        raise UsageError("get_cmp_mask before any compare into the register",
                         hint="compare(src0, src1, cmp_mode, mask, BinaryRepeatParams()) first")
    if core.check:
        touch(core, d, 0, 16, True, V, core.epoch(V), site, "get_cmp_mask")
    d.view()[:16] = np.packbits(bits, bitorder="little")
    _done(core, "get_cmp_mask", 16, 1, site)


def set_cmp_mask(src) -> None:
    """SetCmpMask: load 128 bits (16 bytes of ``src``) into the compare mask register."""
    core = current()
    site = call_site()
    local(src, "set_cmp_mask", "src", ("UB",))
    s = src.reinterpret_cast(np.uint8)
    s.check_usable("set_cmp_mask", site, 0, 16)
    if core.check:
        touch(core, s, 0, 16, False, V, core.epoch(V), site, "set_cmp_mask")
    core.__dict__["_cmp_mask"] = np.unpackbits(s.view()[:16], bitorder="little").astype(bool)
    _done(core, "set_cmp_mask", 16, 1, site)


def compare_scalar(dst_mask, src0, scalar, cmp_mode: CMPMODE, count: int) -> None:
    """CompareScalar (Compares): bit i of ``dst_mask`` = ``src0[i] <cmp> scalar`` (the scalar rounded to the
    element type)."""
    _compare("compare_scalar", dst_mask, src0, None, scalar, cmp_mode, count)


def select(dst, sel_mask, src0, src1, *args) -> None:
    """Select: ``dst[i] = src0[i] if bit i of sel_mask else src1[i]``; ``src1`` may be a scalar.

    ``select(dst, sel_mask, src0, src1, count)`` or Ascend C's ``select(dst, sel_mask, src0, src1,
    SELMODE.VSEL_TENSOR_TENSOR_MODE, count)``; with ``VSEL_CMPMASK_SPR`` one repeat's bits of ``sel_mask``
    apply to every repeat. No 256 B rule (only compare has one)."""
    core = current()
    site = call_site()
    op = "select"
    if len(args) == 2 and isinstance(args[0], SELMODE):
        mode, count = args
    elif len(args) == 1 and not isinstance(args[0], SELMODE):
        mode, count = None, args[0]
    else:
        raise UsageError(f"select takes (dst, sel_mask, src0, src1, count) or (..., SELMODE, count), got "
                         f"{len(args)} argument(s) after src1",
                         hint="select(dst, mask, a, b, SELMODE.VSEL_TENSOR_TENSOR_MODE, count)")
    count = check_count(count, op)
    local(dst, op, "dst", ("UB",))
    local(src0, op, "src0", ("UB",))
    scalar = not hasattr(src1, "slot")
    if mode is SELMODE.VSEL_TENSOR_SCALAR_MODE and not scalar:
        raise UsageError("select: VSEL_TENSOR_SCALAR_MODE takes a scalar src1, not a tensor",
                         hint="use SELMODE.VSEL_TENSOR_TENSOR_MODE with a tensor src1")
    srcs = (src0,) if scalar else (src0, local(src1, op, "src1", ("UB",)))
    same_dtype(op, dst, *srcs)
    lanes = 256 // dst.dtype.itemsize
    spr = mode is SELMODE.VSEL_CMPMASK_SPR
    nb = lanes // 8 if spr else -(-count // 8)
    _mask_tensor(sel_mask, op, "sel_mask")
    for t, c in ((dst, count), (sel_mask, nb), *((s, count) for s in srcs)):
        t.check_usable(op, site, 0, c)
    if core.check:
        vc = core.epoch(V)
        for s in srcs:
            touch(core, s, 0, count, False, V, vc, site, op)
        touch(core, sel_mask, 0, nb, False, V, vc, site, op)
        touch(core, dst, 0, count, True, V, vc, site, op)
    bits = np.unpackbits(sel_mask.view()[:nb].view(np.uint8), bitorder="little").astype(bool)
    bits = np.resize(bits, count) if spr else bits[:count]
    other = np.asarray(src1).astype(dst.dtype) if scalar else src1.view()[:count]
    dst.view()[:count] = np.where(bits, src0.view()[:count], other)
    _done(core, op, count, dst.dtype.itemsize, site)
