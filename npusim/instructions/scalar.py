"""GetValue/SetValue: one element read or written by the scalar unit (PIPE_S).

The scalar unit reaches UB and GM through its data cache; data written by another pipe needs a flag
(e.g. HardEvent.V_S) before the scalar may read it, and the other way round (S_V, S_MTE3). With
``launch(..., auto_sync=True)`` (the default, as the compiler's ``--cce-auto-sync``) those flags are
inserted as the compiler inserts them (:mod:`npusim.instructions.autosync`).
"""

from __future__ import annotations

import numpy as np

from .. import costs
from ..core import current
from ..errors import UsageError
from ..sanitizer import call_site, describe_tensor
from ..tensor import GlobalTensor, install_scalar_unit
from ._access import touch
from .autosync import after_scalar_write, before_scalar_access

S = 0


def _check(t, index: int, op: str, site) -> int:
    if not isinstance(index, (int, np.integer)):
        raise UsageError(f"{op}: index must be an int, not {type(index).__name__}",
                         hint="pass an element index as an int, e.g. t.get_value(0)")
    index = int(index)
    if isinstance(t, GlobalTensor):
        t.check_range(index, 1, op, site)
    else:
        if t.slot.memory.name != "UB":
            raise UsageError(f"{op}: the scalar unit reaches UB and GM, not {t.slot.memory.name} "
                             f"({describe_tensor(t)})",
                             hint="copy the data to UB (or drain L0C to GM) first and read it there")
        t.check_usable(op, site, index, 1)
    return index


def _arr(t):
    return t.buf.flat[t.offset:t.offset + t.size] if isinstance(t, GlobalTensor) else t.view()


def scalar_get(t, index: int):
    core = current()
    site = call_site()
    index = _check(t, index, "get_value", site)
    if core.auto_sync:
        before_scalar_access(core, t, index, False, site)
    if core.check:
        vc = core.epoch(S)
        touch(core, t, index, 1, False, S, vc, site, "get_value")
        # the value is in a register before the scalar unit issues anything else: every later instruction,
        # on any pipe, comes after this read (a scalar *write* may linger in the cache: that needs a flag)
        e = vc[S]
        for p_vc in core.vc:
            if p_vc[S] < e:
                p_vc[S] = e
    core.scalar_op(costs.scalar_access_cycles(core.cfg), "get_value", site)
    return _arr(t)[index].item() if t.dtype.kind != "V" else float(_arr(t)[index])


def scalar_set(t, index: int, value) -> None:
    core = current()
    site = call_site()
    index = _check(t, index, "set_value", site)
    if core.auto_sync:
        before_scalar_access(core, t, index, True, site)
    if core.check:
        touch(core, t, index, 1, True, S, core.epoch(S), site, "set_value")
        if core.auto_sync:
            after_scalar_write(core)
    core.scalar_op(costs.scalar_access_cycles(core.cfg), "set_value", site)
    _arr(t)[index] = np.asarray(value).astype(t.dtype)


install_scalar_unit(scalar_get, scalar_set)
