"""Event ids for hand-written flags: AllocEventID, FetchEventID, ReleaseEventID [S2 TPipe].

Each core has ``HardwareConfig.event_ids`` ids per HardEvent. ``alloc_event_id(E)`` takes the lowest free
one until ``release_event_id(E, id)`` gives it back; ``fetch_event_id(E)`` tells the lowest free one
without taking it (Ascend C's FetchEventID, for a flag used and released at once). They are also methods
of TPipe (``pipe.alloc_event_id(HardEvent.V_MTE3)``), as in ``GetTPipePtr()->AllocEventID<...>()``.
"""

from __future__ import annotations

from ..core import current
from ..errors import SyncError, UsageError, report
from ..memory import TPipe
from ..pipes import HardEvent
from ..sanitizer import call_site, format_site


def _pool(core, event) -> set:
    if not isinstance(event, HardEvent):
        raise UsageError(f"event ids belong to a HardEvent, not {event!r}",
                         hint="alloc_event_id(HardEvent.V_MTE3), as AllocEventID<HardEvent::V_MTE3>()")
    pools = core.__dict__.setdefault("_event_ids", {})
    return pools.setdefault(event, set())


def fetch_event_id(event: HardEvent) -> int:
    """FetchEventID: the lowest id of ``event`` no alloc_event_id holds (not taken)."""
    core = current()
    used = _pool(core, event)
    free = [i for i in range(core.cfg.event_ids) if i not in used]
    if not free:
        report(SyncError(f"fetch_event_id({event.name}): all {core.cfg.event_ids} ids are allocated in block "
                         f"{core.block_idx}", hint="release_event_id the ids you no longer need",
                         where=format_site(call_site()), event=event), core.mode)
        return 0
    return free[0]


def alloc_event_id(event: HardEvent) -> int:
    """AllocEventID: take the lowest free id of ``event`` until release_event_id."""
    core = current()
    i = fetch_event_id(event)
    _pool(core, event).add(i)
    return i


def release_event_id(event: HardEvent, event_id: int) -> None:
    """ReleaseEventID: give back an id taken by alloc_event_id."""
    core = current()
    used = _pool(core, event)
    if event_id not in used:
        report(SyncError(f"release_event_id({event.name}, {event_id}): that id was not allocated in block "
                         f"{core.block_idx}", hint="release only ids returned by alloc_event_id, once each",
                         where=format_site(call_site()), event=event, event_id=event_id), core.mode)
        return
    used.discard(event_id)


TPipe.alloc_event_id = lambda self, event: alloc_event_id(event)
TPipe.fetch_event_id = lambda self, event: fetch_event_id(event)
TPipe.release_event_id = lambda self, event, event_id: release_event_id(event, event_id)


def get_tpipe_ptr() -> TPipe:
    """GetTPipePtr: the kernel's TPipe, for its event-id methods (``get_tpipe_ptr().fetch_event_id(E)``)."""
    core = current()
    pipe = core.__dict__.get("_tpipe")
    if pipe is None:
        pipe = core.__dict__["_tpipe"] = TPipe()
    return pipe
