"""InitGlobalMemory: fill a GM tensor with a value from a kernel (MTE3), e.g. to clear an output that blocks
then accumulate into with atomics [S2 InitGlobalMemory]."""

from __future__ import annotations

import numpy as np

from ..core import current
from ..errors import UsageError
from ..pipes import Pipe
from ..sanitizer import call_site
from ..tensor import GlobalTensor
from ._access import check_count, touch

MTE3 = int(Pipe.MTE3)


def init_global_memory(gm: GlobalTensor, size: int, value) -> None:
    """InitGlobalMemory(gmTensor, size, value): ``gm[:size] = value``, written like a copy UB -> GM (MTE3)."""
    core = current()
    site = call_site()
    if not isinstance(gm, GlobalTensor):
        raise UsageError(f"init_global_memory fills a GlobalTensor, not {type(gm).__name__}",
                         hint="init_global_memory(y_gm, count, 0)")
    size = check_count(size, "init_global_memory")
    gm.check_range(0, size, "init_global_memory", site)
    if core.check:
        touch(core, gm, 0, size, True, MTE3, core.epoch(MTE3), site, "init_global_memory")
    gm.buf.flat[gm.offset:gm.offset + size] = np.asarray(value).astype(gm.dtype)
    isz = gm.dtype.itemsize
    cost = core.memsys.write(core, gm, gm.offset * isz, 1, size * isz, size * isz)
    core.issue(MTE3, cost, "init_global_memory", size * isz, site)
    core.add_bytes("UB->GM", size * isz)
