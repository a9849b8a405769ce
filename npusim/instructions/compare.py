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


def compare(dst_mask, src0, src1, cmp_mode: CMPMODE, count: int) -> None:
    """Compare: bit i of ``dst_mask`` (uint8 or int8, least significant bit first) = ``src0[i] <cmp> src1[i]``.
    ``count * sizeof(T)`` must be a multiple of 256 B [S2]."""
    _compare("compare", dst_mask, src0, src1, None, cmp_mode, count)


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
