"""Run a model graph: every op on the simulated NPU or on the host, as placed, with the copies between them.

``run_model(graph, x)`` walks the nodes in order, computes every tensor (device ops really run on the
simulator, host ops in numpy), keeps track of where each tensor lives, uploads or downloads a tensor only
when an op needs it where it is not yet (a tensor is copied at most once each way), and places all of it
on one timeline (:mod:`npusim.model.schedule`). The result is a :class:`~npusim.model.metrics.ModelProfile`.

``evaluate(graph, x)`` is the plain float32 numpy reference of the same graph (every op on the host, no
timing, no dtype rounding): what the NPU run must match within tolerance.
"""

from __future__ import annotations

import numpy as np

from ..errors import UsageError
from .graph import DEVICE, Graph
from .metrics import ModelProfile
from .opset import infer, spec
from .schedule import Scheduler
from .system import DEFAULT_SYSTEM, SystemConfig


def evaluate(graph: Graph, x: np.ndarray) -> np.ndarray:
    """The graph's output in float32 numpy, every op on the host (the reference of :func:`run_model`)."""
    graph.validate()
    vals: dict[str, np.ndarray] = {}
    for node in graph.nodes:
        if node.op == "input":
            vals[node.name] = np.asarray(x, np.float32)
            continue
        vals[node.name] = np.asarray(spec(node.op).host(node, [vals[i] for i in node.inputs]), np.float32)
    return vals[graph.output.name]


def run_model(graph: Graph, x: np.ndarray, system: SystemConfig | None = None, *, label: str = "") -> ModelProfile:
    """Run ``graph`` on the batch ``x`` (its single input) and profile the whole inference.

    The batch starts on the host in ``system.activation_dtype``; the result ends on the host. A node placed
    on the device whose op has no device implementation for its shapes raises a UsageError.
    """
    system = system or DEFAULT_SYSTEM
    graph.validate()
    if len(graph.inputs) != 1:
        raise UsageError(f"run_model takes graphs with one input; '{graph.name}' has {len(graph.inputs)}")
    x = np.asarray(x)
    shapes, dtypes = infer(graph, x.shape, system.activation_dtype)
    hw = system.hardware
    sched = Scheduler(system)
    on_host: dict[str, np.ndarray] = {}
    on_device: dict[str, np.ndarray] = {}
    host_ready: dict[str, float] = {}
    dev_ready: dict[str, float] = {}

    def download(t: str, node: str) -> None:
        if t not in on_host:
            ev = sched.copy("d2h", node, t, on_device[t].nbytes, dev_ready[t])
            on_host[t] = on_device[t].copy()
            host_ready[t] = ev.end_us

    def upload(t: str, node: str) -> None:
        if t not in on_device:
            ev = sched.copy("h2d", node, t, on_host[t].nbytes, host_ready[t])
            on_device[t] = on_host[t].copy()
            dev_ready[t] = ev.end_us

    result = None
    for node in graph.nodes:
        op = spec(node.op)
        if node.op == "input":
            on_host[node.name] = np.ascontiguousarray(x.astype(dtypes[node.name]))
            host_ready[node.name] = 0.0
            continue
        if node.op == "output":
            download(node.inputs[0], node.name)
            result = on_host[node.inputs[0]]
            continue
        in_shapes = [shapes[i] for i in node.inputs]
        in_dtypes = [dtypes[i] for i in node.inputs]
        if node.placement == DEVICE:
            if not op.on_device(node, in_shapes, in_dtypes):
                raise UsageError(f"node {node.name!r} ({node.describe()} on {in_shapes}) is placed on the device, "
                                 "but the NPU has no kernel for it; place it on the host")
            for t in dict.fromkeys(node.inputs):
                upload(t, node.name)
            out, launches = op.device(node, [on_device[t] for t in node.inputs], hw)
            for kname, prof, main in launches:
                sched.kernel(node.name, f"{node.name}:{kname}", prof, main=main)
            ready = max([dev_ready[t] for t in node.inputs], default=0.0)
            on_device[node.name] = np.ascontiguousarray(out.astype(dtypes[node.name], copy=False))
            dev_ready[node.name] = sched.stream_free_us if launches else ready
        else:
            for t in dict.fromkeys(node.inputs):
                download(t, node.name)
            xs = [on_host[t] for t in node.inputs]
            out = np.asarray(op.host(node, xs)).astype(dtypes[node.name])
            flops, nbytes = op.host_cost(node, in_shapes, shapes[node.name], [d.itemsize for d in in_dtypes],
                                         dtypes[node.name].itemsize)
            ev = sched.host(node.name, f"{node.name}:{node.op}", system.host_us(flops, nbytes),
                            max(host_ready[t] for t in node.inputs), int(nbytes))
            on_host[node.name] = np.ascontiguousarray(out)
            host_ready[node.name] = ev.end_us
    assert result is not None
    return ModelProfile(graph=graph, system=system, events=list(sched.events), output=result, shapes=shapes,
                        dtypes=dtypes, label=label or graph.name)
