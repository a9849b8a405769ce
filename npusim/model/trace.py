"""Chrome trace-event JSON of a whole inference, for Perfetto (ui.perfetto.dev) and chrome://tracing.

Built on :class:`npusim.views.trace.TraceBuilder`. Process ``model: <label>`` has one track per lane of the
model timeline (host ops, kernel launches, PCIe copies, device kernels), one complete event per
:class:`~npusim.model.schedule.Event` with its node, bytes and kind in ``args``. With ``pipes=True`` every
kernel is added at its start time by :meth:`TraceBuilder.add_profile`: one process per block, one track per
pipe (MTE2, MTE1, M, V, FIX, MTE3, S), named ``<node>:<kernel>: block b (core c)``, exactly as a kernel
trace of the earlier labs. Flow arrows (``"ph": "s"`` / ``"f"``, category ``launch``) link each kernel
launch on the host to its kernel on the device track, and (with ``pipes``) that kernel to the first
instruction of its block 0, so following one launch into its pipes is a click in Perfetto.
``otherData.model`` holds the model-level metrics (:meth:`ModelProfile.metrics`).
"""

from __future__ import annotations

import os
from typing import Iterable

from ..errors import UsageError
from ..views.charts import PIPE_LABELS
from ..views.trace import TraceBuilder
from .metrics import ModelProfile, category
from .schedule import LANES

#: Track names of the model process, in display order.
TRACKS = {"host": "host ops", "launch": "kernel launches", "PCIe": "PCIe copies", "device": "device kernels"}


def _with_pipes(profile: ModelProfile, pipes: bool | Iterable[str]) -> list:
    """The kernel events whose blocks and pipes are exported: all, none, or those of the named nodes."""
    if pipes is True or pipes is False:
        return profile.kernels() if pipes else []
    names = set(pipes)
    unknown = names - {n.name for n in profile.graph.nodes}
    if unknown:
        raise UsageError(f"pipes= names nodes that are not in the graph: {sorted(unknown)}")
    return [e for e in profile.kernels() if e.node in names]


def add_model(tb: TraceBuilder, profile: ModelProfile, pipes: bool | Iterable[str] = True) -> int:
    """Add one inference to a builder; returns the pid of its model process. ``pipes``: export every
    kernel's blocks and pipes (True), none (False), or those of the kernels of the named nodes."""
    pid = tb.process(f"model: {profile.label}", sort_index=0)
    tids = {lane: tb.thread(pid, TRACKS[lane], sort_index=i) for i, lane in enumerate(LANES)}
    launches = [e for e in profile.events if e.kind == "launch"]
    for e in profile.events:
        args = {"node": e.node, "kind": e.kind, "category": category(e)}
        if e.nbytes:
            args["bytes"] = e.nbytes
        if e.tensor:
            args["tensor"] = e.tensor
        if e.profile is not None:
            args["kernel_us"] = round(e.profile.time_us, 6)
            args["block_dim"] = e.profile.block_dim
            if e.main:
                args["mac_utilization"] = round(e.profile.mac_utilization, 6)
        tb.complete(pid, tids[e.lane], e.name, e.start_us, e.dur_us, cat=e.kind, args=args)
    flows = 0
    for launch, k in zip(launches, profile.kernels()):  # the scheduler adds a launch, then its kernel
        flows += 1
        _flow(tb, flows, (pid, tids["launch"], launch.start_us, launch.dur_us),
              (pid, tids["device"], k.start_us, k.dur_us))
    for e in _with_pipes(profile, pipes):
        tb.add_profile(e.profile, name=e.name, start_us=e.start_us)
        first = min(e.profile.instructions, key=lambda i: (i.block, i.start), default=None)
        if first is not None and first.block == 0:
            flows += 1
            to_us = e.profile.config.cycles_to_us
            bpid = tb.process(f"{e.name}: block 0 (core 0)")
            _flow(tb, flows, (pid, tids["device"], e.start_us, e.dur_us),
                  (bpid, tb.thread(bpid, PIPE_LABELS[first.pipe]), e.start_us + to_us(first.start),
                   to_us(first.end - first.start)))
    tb.other_data["model"] = {"label": profile.label, **profile.metrics()}
    return pid


def _flow(tb: TraceBuilder, fid: int, src: tuple, dst: tuple) -> None:
    """A flow arrow from the slice ``src`` to the slice ``dst`` (each ``(pid, tid, start_us, dur_us)``): both
    ends sit inside their slice, which Perfetto binds them to."""
    for ph, (p, t, start, dur) in (("s", src), ("f", dst)):
        ev = {"name": "launch", "cat": "launch", "ph": ph, "id": fid, "pid": p, "tid": t,
              "ts": round(start + dur / 2, 6)}
        if ph == "f":
            ev["bp"] = "e"
        tb.events.append(ev)


def to_chrome_trace(profile: ModelProfile, path: str | os.PathLike | None = None, *,
                    pipes: bool | Iterable[str] = True) -> dict:
    """The trace dict of one inference (written to ``path`` if given). ``pipes=False`` keeps only the four
    model tracks (a much smaller file); a list of node names keeps the pipes of those nodes' kernels only (a
    whole network's instructions make a file of many MB)."""
    tb = TraceBuilder()
    add_model(tb, profile, pipes)
    return tb.write(path) if path is not None else tb.to_dict()
