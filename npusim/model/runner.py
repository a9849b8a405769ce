"""Run a model graph: every op on the simulated NPU or on the host, as placed, with the copies between them.

``run_model(graph, x)`` does it in two steps:

1. :func:`execute` walks the nodes in order and computes every tensor: device ops really run on the
   simulator (their kernels' profiles are kept), host ops in numpy (their FLOPs and bytes are kept). What
   it records, an :class:`Execution`, does not depend on the host, the PCIe link or the launch cost.
2. :func:`schedule` places all of it on one timeline (:mod:`npusim.model.schedule`) for a
   :class:`~npusim.model.system.SystemConfig`: it keeps track of where each tensor lives, uploads or
   downloads a tensor only when an op needs it where it is not yet (a tensor is copied at most once each
   way), and returns a :class:`~npusim.model.metrics.ModelProfile`.

So ``profile.with_system(other)`` re-times the same inference for another host, link or launch overhead
without simulating a kernel again: exact, because a kernel's profile depends only on its inputs' shapes
and the NPU, never on what happens around it (the NPU itself must stay the same, launch overhead apart).

``evaluate(graph, x)`` is the plain float32 numpy reference of the same graph (every op on the host, no
timing, no dtype rounding): what the NPU run must match within tolerance.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..config import HardwareConfig
from ..errors import UsageError
from .graph import DEVICE, Graph
from . import memo as _memo
from .metrics import ModelProfile
from .opset import Launches, infer, spec
from .progress import Progress
from .schedule import Scheduler
from .system import DEFAULT_SYSTEM, SystemConfig

#: Graphs with at least this many nodes show their progress by default (a whole network takes seconds).
PROGRESS_NODES = 30


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


@dataclass(frozen=True)
class Step:
    """What one node did, whatever the host system: its kernels (device) or its work (host)."""

    node: str
    op: str
    placement: str
    inputs: tuple[str, ...]
    launches: Launches = ()
    """Device: the kernels in execution order, ``(name, profile, main)``."""
    host_flops: float = 0.0
    host_bytes: int = 0
    """Host: the FLOPs and the bytes read plus written that the host cost model counts."""


@dataclass
class Execution:
    """One inference computed (:func:`execute`): every node's :class:`Step`, the output, the tensors' sizes."""

    graph: Graph
    hardware: HardwareConfig
    steps: list[Step]
    output: np.ndarray
    shapes: dict[str, tuple]
    dtypes: dict[str, np.dtype]
    nbytes: dict[str, int]
    """Bytes of every tensor as it is stored (and copied) in its dtype."""
    wall_s: float = 0.0
    """Wall-clock seconds the simulation took (to show, never part of a figure)."""
    input_name: str = field(default="x")

    def schedule(self, system: SystemConfig | None = None, *, label: str = "") -> ModelProfile:
        """:func:`schedule` of this execution."""
        return schedule(self, system, label=label)


def execute(graph: Graph, x: np.ndarray, hardware: HardwareConfig | None = None, *,
            activation_dtype: str = "float16", sanitize: str = "error",
            progress: bool | None = None, memo: bool = True) -> Execution:
    """Compute every tensor of ``graph`` on the batch ``x``: device nodes on the simulated NPU ``hardware``
    (their kernels' profiles recorded), host nodes in numpy. ``progress``: a line per node in a terminal, a
    bar in a notebook (default: for graphs of :data:`PROGRESS_NODES` nodes or more). ``memo``: a device
    node whose kernels were simulated before for the same key (:mod:`npusim.model.memo`: op, shapes,
    dtypes, attributes, NPU, cold L2) reuses their profiles and computes its values on the host
    (``memo=False``: simulate every kernel). A node placed on the device whose op has no device kernel
    for its shapes raises a UsageError."""
    hardware = hardware or DEFAULT_SYSTEM.hardware
    graph.validate()
    if len(graph.inputs) != 1:
        raise UsageError(f"run_model takes graphs with one input; '{graph.name}' has {len(graph.inputs)}")
    x = np.asarray(x)
    shapes, dtypes = infer(graph, x.shape, activation_dtype)
    t0 = time.perf_counter()
    simulated = 0
    vals: dict[str, np.ndarray] = {}
    steps: list[Step] = []
    work = [n for n in graph.nodes if n.op not in ("input", "output")]
    show = len(graph) >= PROGRESS_NODES if progress is None else progress
    bar = Progress(len(work), f"{graph.name}, batch {x.shape[0]}", enabled=show)
    for node in graph.nodes:
        op = spec(node.op)
        if node.op == "input":
            vals[node.name] = np.ascontiguousarray(x.astype(dtypes[node.name]))
            continue
        if node.op == "output":
            continue
        bar.step(node.name)
        in_shapes = [shapes[i] for i in node.inputs]
        in_dtypes = [dtypes[i] for i in node.inputs]
        xs = [vals[i] for i in node.inputs]
        if node.placement == DEVICE:
            if not op.on_device(node, in_shapes, in_dtypes):
                bar.close()
                raise UsageError(f"node {node.name!r} ({node.describe()} on {in_shapes}) is placed on the device, "
                                 "but the NPU has no kernel for it; place it on the host")
            k = _memo.key(node, in_shapes, in_dtypes, hardware, sanitize) if memo else None
            launches = _memo.lookup(k)
            if launches is None:
                out, launches = op.device(node, xs, hardware, sanitize)
                _memo.store(k, list(launches))
                simulated += 1
            else:
                out = _memo.device_numerics(node, xs, dtypes[node.name])
            steps.append(Step(node.name, node.op, DEVICE, tuple(node.inputs), tuple(launches)))
        else:
            out = op.host(node, xs)
            flops, nbytes = op.host_cost(node, in_shapes, shapes[node.name], [d.itemsize for d in in_dtypes],
                                         dtypes[node.name].itemsize)
            steps.append(Step(node.name, node.op, node.placement, tuple(node.inputs), host_flops=float(flops),
                              host_bytes=int(nbytes)))
        vals[node.name] = np.ascontiguousarray(np.asarray(out).astype(dtypes[node.name], copy=False))
    dev = sum(1 for s in steps if s.placement == DEVICE)
    bar.close(f"{len(work)} ops in {time.perf_counter() - t0:.1f} s: {simulated} of the {dev} device ops simulated"
              + (f", {dev - simulated} reused (same kernel and shapes)" if dev > simulated else ""))
    nbytes = {name: int(np.prod(s, dtype=np.int64)) * dtypes[name].itemsize for name, s in shapes.items()}
    out_name = graph.output.inputs[0]
    return Execution(graph, hardware, steps, vals[out_name], shapes, dtypes, nbytes, time.perf_counter() - t0,
                     graph.inputs[0].name)


def schedule(run: Execution, system: SystemConfig | None = None, *, label: str = "") -> ModelProfile:
    """Place an :class:`Execution` on one timeline for ``system`` (the module docstring): the batch starts
    on the host, the result ends on the host."""
    system = system or DEFAULT_SYSTEM
    if system.hardware.replace(launch_overhead_us=run.hardware.launch_overhead_us).key != run.hardware.key:
        raise UsageError(f"the kernels were simulated on '{run.hardware.name}'; to time them on "
                         f"'{system.hardware.name}' (another NPU, not only another launch overhead), run the "
                         f"model again with run_model")
    if np.dtype(system.activation_dtype) != run.dtypes[run.input_name]:
        raise UsageError(f"the inference was computed with {run.dtypes[run.input_name].name} activations; for "
                         f"{system.activation_dtype} run the model again with run_model")
    sched = Scheduler(system)
    host_ready: dict[str, float] = {run.input_name: 0.0}   # tensor -> when it is on the host
    dev_ready: dict[str, float] = {}                       # tensor -> when it is on the device

    def download(t: str, node: str) -> None:
        if t not in host_ready:
            host_ready[t] = sched.copy("d2h", node, t, run.nbytes[t], dev_ready[t]).end_us

    def upload(t: str, node: str) -> None:
        if t not in dev_ready:
            dev_ready[t] = sched.copy("h2d", node, t, run.nbytes[t], host_ready[t]).end_us

    for s in run.steps:
        if s.placement == DEVICE:
            for t in dict.fromkeys(s.inputs):
                upload(t, s.node)
            for kname, prof, main in s.launches:
                sched.kernel(s.node, f"{s.node}:{kname}", prof, main=main)
            ready = max([dev_ready[t] for t in s.inputs], default=0.0)
            dev_ready[s.node] = sched.stream_free_us if s.launches else ready
        else:
            for t in dict.fromkeys(s.inputs):
                download(t, s.node)
            ev = sched.host(s.node, f"{s.node}:{s.op}", system.host_us(s.host_flops, s.host_bytes),
                            max(host_ready[t] for t in s.inputs), s.host_bytes)
            host_ready[s.node] = ev.end_us
    download(run.graph.output.inputs[0], run.graph.output.name)
    return ModelProfile(graph=run.graph, system=system, events=list(sched.events), output=run.output,
                        shapes=run.shapes, dtypes=run.dtypes, label=label or run.graph.name, execution=run)


def run_model(graph: Graph, x: np.ndarray, system: SystemConfig | None = None, *, label: str = "",
              sanitize: str = "error", progress: bool | None = None, memo: bool = True) -> ModelProfile:
    """Run ``graph`` on the batch ``x`` (its single input) and profile the whole inference:
    :func:`schedule` of :func:`execute` (see them for ``sanitize``, ``progress`` and ``memo``)."""
    system = system or DEFAULT_SYSTEM
    run = execute(graph, x, system.hardware, activation_dtype=system.activation_dtype, sanitize=sanitize,
                  progress=progress, memo=memo)
    return schedule(run, system, label=label)
