"""Shared checks of every instruction: tensor state, bounds, alignment, and the race checker's accesses."""

from __future__ import annotations

from ..errors import AlignmentError, UsageError, report
from ..sanitizer import describe_tensor, format_site
from ..tensor import GlobalTensor, LocalTensor


def touch(core, t, start: int, count: int, write: bool, pipe: int, vc, site, op: str) -> None:
    """Record that ``pipe`` reads or writes elements [start, start+count) of ``t`` (races are reported)."""
    isz = t.dtype.itemsize
    if type(t) is LocalTensor:
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
    if type(t) is LocalTensor:
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


#: the positions whose tensors live in each memory, for hints
POSITIONS = {"UB": "VECIN/VECOUT/VECCALC", "L1": "A1/B1", "L0A": "A2", "L0B": "B2", "L0C": "CO1"}


def local(t, op: str, what: str, memories: tuple[str, ...]) -> LocalTensor:
    if type(t) is LocalTensor and t.slot.memory.name in memories:
        return t
    need = "/".join(memories)
    at = "/".join(POSITIONS[m] for m in memories)
    if not isinstance(t, LocalTensor):
        gm = isinstance(t, GlobalTensor)
        raise UsageError(f"{op}: {what} must be a LocalTensor in {need}, not "
                         f"{describe_tensor(t) if gm else type(t).__name__}",
                         hint=f"{op} works on on-chip tensors: copy GM data into {need} first (data_copy), and use "
                              f"a tensor from alloc_tensor/deque or TBuf.get at {at}" if gm else
                              f"pass a tensor from alloc_tensor/deque or TBuf.get at {at}")
    mem = t.slot.memory.name
    if mem not in memories:
        hint = f"use a tensor from a queue or TBuf at {at}"
        if mem == "L0C" and "UB" in memories:
            cfg = t.slot.memory.core.cfg
            hint = (f"on '{cfg.name}' results leave L0C through fixpipe (L0C -> GM; relu and deq_scale ride "
                    f"along); to post-process them in UB, fixpipe to GM, then data_copy GM -> UB"
                    if cfg.has_fixpipe else "move L0C -> UB first: data_copy(ub_tensor, l0c_tensor, count) on the "
                                            "vector pipe")
        raise UsageError(f"{op}: {what} {describe_tensor(t)} is in {mem}; {op} needs it in {need}", hint=hint)
    return t


def check_count(count, op: str) -> int:
    if not isinstance(count, (int,)) or isinstance(count, bool) or count <= 0:
        try:
            import numpy as np

            if isinstance(count, np.integer) and count > 0:
                return int(count)
        except ImportError:  # pragma: no cover
            pass
        raise UsageError(f"{op}: count must be a positive number of elements, got {count!r}",
                         hint="pass the number of elements as an int > 0 (a tile of zero elements needs no "
                              "instruction: skip it)")
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
            raise UsageError(f"{op}: operands must share a dtype; got {describe_tensor(ts[0])} and "
                             f"{describe_tensor(t)}",
                             hint=f"cast() one of them first, e.g. cast(t_{d.name}, t_{t.dtype.name}, "
                                  f"RoundMode.CAST_RINT, count), or allocate both as {d.name}")


__all__ = ["touch", "touch_bytes", "local", "check_count", "check_align", "same_dtype", "GlobalTensor"]
