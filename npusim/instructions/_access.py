"""Shared checks of every instruction: tensor state, bounds, alignment, and the race checker's accesses."""

from __future__ import annotations

from ..errors import AlignmentError, UsageError, report
from ..sanitizer import format_site
from ..tensor import GlobalTensor, LocalTensor


def touch(core, t, start: int, count: int, write: bool, pipe: int, vc, site, op: str) -> None:
    """Record that ``pipe`` reads or writes elements [start, start+count) of ``t`` (races are reported)."""
    isz = t.dtype.itemsize
    if isinstance(t, LocalTensor):
        slot = t.slot
        tracker = slot.memory.tracker
        if tracker is not None:
            lo = t.addr + start * isz
            tracker.access(lo, lo + count * isz, write, core.block_idx, pipe, vc, vc[pipe], site, op, core.mode,
                           key=slot.addr)
    else:
        tracker = t.buf.tracker
        if tracker is not None:
            lo = (t.offset + start) * isz
            tracker.access(lo, lo + count * isz, write, core.block_idx, pipe, vc, vc[pipe], site, op, core.mode)


def touch_bytes(core, t, lo_byte: int, hi_byte: int, write: bool, pipe: int, vc, site, op: str,
                pitch: int = 0, blen: int = 0, nblk: int = 1, grain: int = 0) -> None:
    """Like :func:`touch` for a byte range relative to the start of ``t``; with ``pitch``, only the
    ``nblk`` blocks of ``blen`` bytes every ``pitch`` bytes inside it. ``grain``: see AccessTracker.access."""
    if isinstance(t, LocalTensor):
        tracker = t.slot.memory.tracker
        base = t.addr
        key = t.slot.addr
    else:
        tracker = t.buf.tracker
        base = t.offset * t.dtype.itemsize
        key = None
    if tracker is not None:
        tracker.access(base + lo_byte, base + hi_byte, write, core.block_idx, pipe, vc, vc[pipe], site, op,
                       core.mode, pitch, blen, nblk, key, grain)


def local(t, op: str, what: str, memories: tuple[str, ...]) -> LocalTensor:
    if not isinstance(t, LocalTensor):
        raise UsageError(f"{op}: {what} must be a LocalTensor in {'/'.join(memories)}, not "
                         f"{type(t).__name__}")
    if t.slot.memory.name not in memories:
        raise UsageError(f"{op}: {what} is at {t.position.name} ({t.slot.memory.name}); {op} needs it in "
                         f"{'/'.join(memories)}")
    return t


def check_count(count, op: str) -> int:
    if not isinstance(count, (int,)) or isinstance(count, bool) or count <= 0:
        try:
            import numpy as np

            if isinstance(count, np.integer) and count > 0:
                return int(count)
        except ImportError:  # pragma: no cover
            pass
        raise UsageError(f"{op}: count must be a positive number of elements, got {count!r}")
    return count


def check_align(core, t: LocalTensor, align: int, op: str, site, what: str = "address") -> None:
    if t.addr % align:
        report(AlignmentError(
            f"{op}: {t.name} starts at {t.slot.memory.name} address {t.addr:#x}, which is not {align} B aligned",
            hint=f"offset local tensors by multiples of {align // t.dtype.itemsize} {t.dtype.name} elements "
                 f"({align} B)", where=format_site(site), tensor=t.name, address=t.addr, align=align),
            core.mode)


def same_dtype(op: str, *ts) -> None:
    d = ts[0].dtype
    for t in ts[1:]:
        if t.dtype != d:
            raise UsageError(f"{op}: operands must share a dtype; got {ts[0].name} {d.name} and "
                             f"{t.name} {t.dtype.name} (use cast() first)")


__all__ = ["touch", "touch_bytes", "local", "check_count", "check_align", "same_dtype", "GlobalTensor"]
