"""The profile of one model inference, and every model-level metric, each defined once with its formula.

Kernel-level metrics (``Profile.mac_utilization`` etc.) stay as :mod:`npusim.profile` defines them; the
model-level ones put the same useful work over the **model time** instead of the kernel time:

- ``model_time_us`` = end of the last event (the result is back on the host); time 0 = batch on the host.
Every model-level utilisation is **of the whole chip** (:mod:`npusim.profile`'s second utilisation):

- ``cube_ideal_us`` = sum over the Cube ops' main kernels (conv2d, matmul; not their layout transforms)
  of ``cube_ideal_cycles / chip_cores``, in us: their useful MACs at the peak of all the chip's Cube cores.
- ``mac_utilization`` = ``cube_ideal_us / model_time_us``. For one kernel alone with nothing around it,
  this is that kernel's ``Profile.chip_mac_utilization``.
- ``breakdown_us``: every instant of the model time is given to the first category active then, in the
  order device compute (a kernel runs), transfers (a copy runs), host (a host op runs), launch (the host
  launches a kernel while the device has nothing to run), idle (none of these); so the five parts sum to
  ``model_time_us`` exactly, and a launch hidden behind a running kernel costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import UsageError
from .graph import Graph
from .schedule import Event
from .system import SystemConfig
from ..tables import html_table, text_table

#: Breakdown categories, in priority order, and their labels.
CATEGORIES = ("device", "transfers", "host", "launch", "idle")
LABELS = {"device": "device compute", "transfers": "transfers (PCIe)", "host": "host ops",
          "launch": "kernel launch", "idle": "idle"}
_CATEGORY_OF = {"kernel": "device", "h2d": "transfers", "d2h": "transfers", "host": "host", "launch": "launch"}


def category(ev: Event) -> str:
    """The breakdown category of an event kind."""
    return _CATEGORY_OF[ev.kind]


def cube_ideal_us(ev: Event) -> float:
    """Useful Cube time of a kernel event on the whole chip: ``cube_ideal_cycles / chip_cores`` in us (0
    unless ``main``)."""
    p = ev.profile
    if not ev.main or p is None or not p.cube_ideal_cycles:
        return 0.0
    return p.config.cycles_to_us(p.cube_ideal_cycles / p.chip_cores)


@dataclass
class ModelProfile:
    """What one inference did (``events`` on one timeline, ``output``) and the model-level metrics."""

    graph: Graph
    system: SystemConfig
    events: list[Event]
    output: np.ndarray
    shapes: dict[str, tuple] = field(default_factory=dict, repr=False)
    dtypes: dict[str, np.dtype] = field(default_factory=dict, repr=False)
    label: str = "model"
    execution: Any = field(default=None, repr=False, compare=False)
    """The :class:`~npusim.model.runner.Execution` this was scheduled from (None for a hand-made profile)."""

    def with_system(self, system: SystemConfig, label: str | None = None) -> "ModelProfile":
        """The same inference timed for another host, PCIe link or launch overhead (``system``; the NPU
        itself unchanged): its kernels are not simulated again, only placed on a new timeline."""
        if self.execution is None:
            raise UsageError("this profile was not made by run_model: it has no kernels to re-time")
        return self.execution.schedule(system, label=self.label if label is None else label)

    # --- time --------------------------------------------------------------------------------------
    @property
    def model_time_us(self) -> float:
        """End of the last event: from the batch on the host to the result back on the host (us)."""
        return max((e.end_us for e in self.events), default=0.0)

    @property
    def batch(self) -> int:
        """Images in the batch (first dimension of the input)."""
        ins = self.graph.inputs
        return int(self.shapes[ins[0].name][0]) if ins and self.shapes else 0

    def _sum(self, kinds) -> float:
        return sum(e.dur_us for e in self.events if e.kind in kinds)

    @property
    def device_compute_us(self) -> float:
        """Sum of kernel times (one stream: kernels never overlap)."""
        return self._sum(("kernel",))

    @property
    def transfer_us(self) -> float:
        """Sum of host<->device copy times (latency + bytes / bandwidth each)."""
        return self._sum(("h2d", "d2h"))

    @property
    def host_us(self) -> float:
        """Sum of host op times."""
        return self._sum(("host",))

    @property
    def launch_us(self) -> float:
        """Host time spent launching kernels: ``launches x launch_overhead_us`` (hidden or not)."""
        return self._sum(("launch",))

    @property
    def device_busy_ratio(self) -> float:
        """``device_compute_us / model_time_us``: the share of the inference in which a kernel runs."""
        return self.device_compute_us / self.model_time_us if self.model_time_us else 0.0

    @cached_property
    def breakdown_us(self) -> dict[str, float]:
        """Exclusive time per category (module docstring): device, transfers, host, launch, idle; sums to
        ``model_time_us``."""
        out = dict.fromkeys(CATEGORIES, 0.0)
        t_end = self.model_time_us
        cuts = sorted({0.0, t_end, *(e.start_us for e in self.events), *(e.end_us for e in self.events)})
        spans = [(e.start_us, e.end_us, CATEGORIES.index(category(e))) for e in self.events if e.end_us > e.start_us]
        for a, b in zip(cuts, cuts[1:]):
            if b <= a:
                continue
            mid = (a + b) / 2
            active = [c for s, e, c in spans if s <= mid < e]
            out[CATEGORIES[min(active)] if active else "idle"] += b - a
        return out

    # --- counts ------------------------------------------------------------------------------------
    @property
    def uploads(self) -> int:
        """Host-to-device copies."""
        return sum(1 for e in self.events if e.kind == "h2d")

    @property
    def downloads(self) -> int:
        """Device-to-host copies."""
        return sum(1 for e in self.events if e.kind == "d2h")

    @property
    def transfer_bytes(self) -> int:
        """Bytes copied over the link, both ways."""
        return sum(e.nbytes for e in self.events if e.kind in ("h2d", "d2h"))

    @property
    def launches(self) -> int:
        """Kernel launches."""
        return sum(1 for e in self.events if e.kind == "kernel")

    # --- Cube --------------------------------------------------------------------------------------
    @property
    def cube_ideal_us(self) -> float:
        """Useful Cube work at peak (module docstring), summed over the Cube ops' main kernels (us)."""
        return sum(cube_ideal_us(e) for e in self.events if e.kind == "kernel")

    @property
    def mac_utilization(self) -> float:
        """Model-level Cube utilisation of the whole chip: ``cube_ideal_us / model_time_us``."""
        return self.cube_ideal_us / self.model_time_us if self.model_time_us else 0.0

    @property
    def device_mac_utilization(self) -> float:
        """Chip Cube utilisation while the device computes: ``cube_ideal_us / device_compute_us``."""
        return self.cube_ideal_us / self.device_compute_us if self.device_compute_us else 0.0

    # --- per op ------------------------------------------------------------------------------------
    def kernels(self, node: str | None = None) -> list[Event]:
        """Kernel events (of one node, or all), in order."""
        return [e for e in self.events if e.kind == "kernel" and (node is None or e.node == node)]

    def macs(self, node: str) -> int:
        """Multiply-accumulates of a conv2d or linear node at this batch (its output elements times its
        weights' fan-in; 0 for other ops): the op's work, whatever kernel computed it."""
        n = self.graph.node(node)
        if n.op not in ("conv2d", "linear") or node not in self.shapes:
            return 0
        w = n.params["w"]
        return int(np.prod(self.shapes[node], dtype=np.int64)) * int(np.prod(w.shape[1:], dtype=np.int64))

    def op_rows(self) -> list[dict]:
        """Per node: where it ran, its launches, device / launch / host / copy time, and for Cube ops their
        MACs (:meth:`macs`), their useful work at the chip's peak (``cube_ideal_us``), the main kernel's
        cores (``cores``), its utilisation of the cores it used (``kernel_util``, ``Profile.mac_utilization``)
        and of the whole chip (``kernel_chip_util``, ``Profile.chip_mac_utilization``), and the op's chip
        utilisation ``cube_ideal_us / its kernels' time`` (``op_util``: layout transforms and a separate ReLU
        count against it)."""
        rows = []
        for node in self.graph.nodes:
            if node.op in ("input", "output"):
                continue
            evs = [e for e in self.events if e.node == node.name]
            ks = [e for e in evs if e.kind == "kernel"]
            main = next((e for e in ks if e.main), None)
            dev = sum(e.dur_us for e in ks)
            ideal = sum(cube_ideal_us(e) for e in ks)
            rows.append({
                "node": node.name, "op": node.op, "fused": list(node.fused), "placement": node.placement,
                "launches": len(ks), "device_us": dev,
                "launch_us": sum(e.dur_us for e in evs if e.kind == "launch"),
                "host_us": sum(e.dur_us for e in evs if e.kind == "host"),
                "transfer_us": sum(e.dur_us for e in evs if e.kind in ("h2d", "d2h")),
                "macs": self.macs(node.name),
                "cube_ideal_us": ideal,
                "cores": main.profile.active_cores if main is not None else None,
                "kernel_util": main.profile.mac_utilization if main is not None else None,
                "kernel_chip_util": main.profile.chip_mac_utilization if main is not None else None,
                "op_util": ideal / dev if main is not None and dev else None,
            })
        return rows

    # --- presentation ------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """The headline numbers as a flat dict."""
        d = {"model_time_us": self.model_time_us, "mac_utilization": self.mac_utilization,
             "device_busy_ratio": self.device_busy_ratio, "cube_ideal_us": self.cube_ideal_us,
             "device_compute_us": self.device_compute_us, "transfer_us": self.transfer_us,
             "host_us": self.host_us, "launch_us": self.launch_us, "launches": self.launches,
             "uploads": self.uploads, "downloads": self.downloads, "transfer_bytes": self.transfer_bytes}
        for k, v in self.breakdown_us.items():
            d[f"breakdown_{k}_us"] = v
        return d

    def _rows(self) -> list[tuple[str, str]]:
        t = self.model_time_us or 1.0
        rows = [("model", f"{self.label} ({len(self.graph)} nodes, batch {self.batch})"),
                ("model time", f"{self.model_time_us:,.1f} us"),
                ("Cube utilisation (chip)", f"{self.mac_utilization:.2%}  (Cube ideal {self.cube_ideal_us:.2f} us "
                                             f"on all {self.system.hardware.num_cores} cores)"),
                ("device busy", f"{self.device_busy_ratio:.1%}")]
        for k, v in self.breakdown_us.items():
            rows.append((f"  {LABELS[k]}", f"{v:,.1f} us ({v / t:.0%})"))
        rows += [("launches", f"{self.launches} x {self.system.launch_overhead_us:g} us"),
                 ("copies", f"{self.uploads} up, {self.downloads} down, {self.transfer_bytes:,} B")]
        return rows

    def summary(self) -> str:
        rows = self._rows()
        w = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)

    def op_table(self) -> str:
        """The per-op rows as text (see :meth:`op_rows`)."""
        return text_table([_op_cells(r) for r in self.op_rows()], _OP_HEADER)

    def __str__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        return (html_table(self._rows(), ("ModelProfile", self.label))
                + html_table([_op_cells(r) for r in self.op_rows()], _OP_HEADER, title="per op"))


_OP_HEADER = ("node", "op", "runs on", "launches", "device us", "launch us", "host us", "copy us", "cores",
              "kernel util (its cores)", "kernel util (chip)", "op util (chip)")


def _op_cells(r: dict) -> tuple:
    pct = lambda v: "-" if v is None else f"{v:.1%}"  # noqa: E731
    what = r["op"] + (f" (+{'+'.join(r['fused'])})" if r["fused"] else "")
    return (r["node"], what, r["placement"], r["launches"], f"{r['device_us']:.2f}", f"{r['launch_us']:.0f}",
            f"{r['host_us']:.1f}", f"{r['transfer_us']:.1f}", "-" if r["cores"] is None else r["cores"],
            pct(r["kernel_util"]), pct(r["kernel_chip_util"]), pct(r["op_util"]))


def metric_docs() -> dict[str, str]:
    """Every model-level metric's name and formula (the property docstrings)."""
    out = {}
    for name in dir(ModelProfile):
        attr = getattr(ModelProfile, name)
        if isinstance(attr, (property, cached_property)) and attr.__doc__ and not name.startswith("_"):
            out[name] = " ".join(attr.__doc__.split())
    return out
