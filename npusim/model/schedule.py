"""The model timeline: when each host op, copy, kernel launch and kernel runs.

The rules (one host thread, one PCIe link, one device stream, as an eager framework drives one NPU):

1. The **host thread** does one thing at a time, in graph order: a host op, a copy, or a kernel launch.
2. A **kernel launch** costs the host ``launch_overhead_us`` (``HardwareConfig``, 20 us on A2 [S4]) and is
   asynchronous: the host goes on with the next launch while the kernel waits or runs.
3. The **device stream** runs its work in issue order: a kernel starts when its launch is done and the
   stream's previous work (kernels, copies) has finished, and runs for its profile's ``time_us``.
4. A **copy** (host-to-device upload or device-to-host download) goes over the link, in stream order, and
   is synchronous for the host (``aclrtMemcpy`` from pageable memory returns when the copy is done): it
   starts when the host is free, the stream has drained and the data is ready, and lasts
   ``pcie_latency_us + bytes / pcie_bytes_per_s``.
5. A **host op** starts when the host is free and its inputs are on the host, and lasts
   :meth:`SystemConfig.host_us` of the bytes and FLOPs it handles.

Time 0 is when the input batch is on the host; the model time ends when the result is back on the host.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..profile import Profile
from .system import SystemConfig

#: Event kinds and the timeline lane each is drawn on.
LANE_OF = {"host": "host", "launch": "launch", "h2d": "PCIe", "d2h": "PCIe", "kernel": "device"}
#: Lanes, top to bottom.
LANES = ("host", "launch", "PCIe", "device")


@dataclass(frozen=True)
class Event:
    """One span of the model timeline (microseconds from the start of the inference)."""

    kind: str
    """``"host"`` (host op), ``"launch"`` (kernel launch on the host), ``"h2d"``/``"d2h"`` (copies),
    ``"kernel"`` (a kernel on the device)."""
    name: str
    node: str
    """The graph node this belongs to (for a copy: the node that needed it)."""
    start_us: float
    end_us: float
    nbytes: int = 0
    tensor: str = ""
    profile: Profile | None = None
    """The kernel's profile (kernels and their launches)."""
    main: bool = False
    """A kernel that does the op's useful Cube work (the conv2d / matmul kernel, not a layout transform)."""

    @property
    def lane(self) -> str:
        return LANE_OF[self.kind]

    @property
    def dur_us(self) -> float:
        return self.end_us - self.start_us


class Scheduler:
    """Places events by the module's rules. ``host_free_us``: when the host thread is next free;
    ``stream_free_us``: when the device stream's queued work ends."""

    def __init__(self, system: SystemConfig) -> None:
        self.system = system
        self.host_free_us = 0.0
        self.stream_free_us = 0.0
        self.events: list[Event] = []

    def _add(self, ev: Event) -> Event:
        self.events.append(ev)
        return ev

    def copy(self, kind: str, node: str, tensor: str, nbytes: int, ready_us: float) -> Event:
        """Rule 4: an upload (``"h2d"``) or download (``"d2h"``) of ``nbytes``."""
        start = max(self.host_free_us, self.stream_free_us, ready_us)
        end = start + self.system.transfer_us(nbytes)
        self.host_free_us = self.stream_free_us = end
        arrow = "H2D" if kind == "h2d" else "D2H"
        return self._add(Event(kind, f"{arrow} {tensor}", node, start, end, nbytes, tensor))

    def host(self, node: str, name: str, us: float, ready_us: float, nbytes: int = 0) -> Event:
        """Rule 5: a host op of ``us`` microseconds."""
        start = max(self.host_free_us, ready_us)
        self.host_free_us = start + us
        return self._add(Event("host", name, node, start, start + us, nbytes))

    def kernel(self, node: str, name: str, profile: Profile, main: bool = False) -> tuple[Event, Event]:
        """Rules 2-3: the launch on the host, then the kernel on the device stream."""
        ls = self.host_free_us
        le = ls + self.system.launch_overhead_us
        self.host_free_us = le
        ks = max(le, self.stream_free_us)
        ke = ks + profile.time_us
        self.stream_free_us = ke
        launch = self._add(Event("launch", name, node, ls, le, 0, "", profile, main))
        run = self._add(Event("kernel", name, node, ks, ke, profile.gm_bytes, "", profile, main))
        return launch, run
