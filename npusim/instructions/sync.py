"""Hand-written synchronisation: SetFlag/WaitFlag between two pipes and PipeBarrier [S2]."""

from __future__ import annotations

from ..core import current
from ..pipes import HardEvent, Pipe


def set_flag(event: HardEvent, event_id: int = 0) -> None:
    """SetFlag: fires once everything issued so far on ``event.src`` has finished; never blocks."""
    current().set_flag(event, event_id)


def wait_flag(event: HardEvent, event_id: int = 0) -> None:
    """WaitFlag: ``event.dst`` waits until the matching set_flag fired, then clears it."""
    current().wait_flag(event, event_id)


def pipe_barrier(pipe: Pipe) -> None:
    """PipeBarrier: ``Pipe.ALL`` makes every pipe wait for all issued work; one pipe orders itself."""
    current().pipe_barrier(Pipe(pipe))
