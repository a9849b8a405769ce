"""The compiler's automatic synchronisation (``--cce-auto-sync``, on by default in kernel projects).

BiSheng inserts, and only inserts, the syncs between the scalar unit and MTE2, MTE3 and the vector unit
(both directions), and the barriers between vector instructions; the queues of the framework order the
other pipe pairs, and everything else (MTE2 <-> V without a queue, the Cube pipes, Fixpipe) stays the
programmer's job [S19: BiSheng compiler guide, "支持自动同步" / "Automatic Synchronization"].

In npusim, ``launch(..., auto_sync=True)`` (the default) does the same:

- before a ``get_value``/``set_value``, for each of V, MTE2, MTE3 with an earlier, unordered access of the
  same bytes (what the race checker would report), a ``set_flag``/``wait_flag`` of ``HardEvent.P_S``: the
  scalar unit waits until that pipe's work issued so far has finished. Both flags cost their issue, and the
  wait is drawn on the S lane as ``auto_sync P_S``. With ``sanitize="off"`` nothing records accesses, so
  the scalar unit then waits for every unfinished V/MTE2/MTE3 instruction (a superset of the compiler's);
- after a ``set_value``, V, MTE2 and MTE3 are ordered after the write (the compiler's ``S_P`` flag before
  the next instruction that uses it). It costs no time here: a pipe gets an instruction only after the
  scalar unit has issued it, which is after the write;
- V -> V barriers: the vector pipe completes in order in this model already, so they cost nothing.

``auto_sync=False`` is a kernel built without the option: every flag is the kernel's own.
"""

from __future__ import annotations

from ..pipes import HardEvent, Pipe

S, V, MTE2, MTE3 = int(Pipe.S), int(Pipe.V), int(Pipe.MTE2), int(Pipe.MTE3)
_PIPES = (V, MTE2, MTE3)
_EVENT = {V: HardEvent.V_S, MTE2: HardEvent.MTE2_S, MTE3: HardEvent.MTE3_S}


def before_scalar_access(core, t, index: int, write: bool, site) -> None:
    """The flags the compiler puts before the scalar unit reads (or writes) element ``index`` of ``t``."""
    tracker, lo, key = _where(t, index)
    if tracker is not None:
        found = tracker.unordered_pipes(lo, lo + t.dtype.itemsize, write, core.block_idx, S, core.vc[S], key)
    for p in _PIPES:
        if tracker is not None and p not in found:
            continue
        if tracker is None and core.fire_time(p) <= core.scalar_t:
            continue   # no access records (sanitize="off"): only the pipes with unfinished work
        core.scalar_issue()                       # set_flag(P_S)
        fire, vc = core.fire_time(p), list(core.vc[p])
        core.scalar_issue()                       # wait_flag(P_S)
        start = core.scalar_t
        core.wait_until(S, fire, vc)
        core.records.append((S, start, max(start, fire), f"auto_sync {_EVENT[p].name}", 0, site))


def after_scalar_write(core) -> None:
    """The S -> V/MTE2/MTE3 flags the compiler puts after a ``set_value``: those pipes are ordered after it."""
    e = core.vc[S][S]
    for p in _PIPES:
        vc = core.vc[p]
        if vc[S] < e:
            vc[S] = e


def _where(t, index: int):
    """(tracker, byte address, bucket key) of element ``index`` of ``t``."""
    slot = getattr(t, "slot", None)
    if slot is not None:
        return slot.memory.tracker, t.addr + index * t.dtype.itemsize, slot.addr
    return t.buf.tracker, (t.offset + index) * t.dtype.itemsize, None
