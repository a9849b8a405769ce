"""``npusim bench`` case of a whole model: one ResNet-18 inference on the simulator.

``resnet18``: batch 1 at 224 x 224, after the graph pass (BatchNorm folded, ReLU fused, the whole chain on
the device: 40 ops, 80 kernel launches), every kernel simulated with numerics, timing and the sanitizer on,
as a learner runs it in lab 09. ``sim_s`` is the median wall time of one inference (``cpu_s`` the process
CPU time beside it: on a loaded machine the wall time counts the other jobs too); the numpy floor is the
float32 reference of the same graph (``nm.evaluate``: every op in numpy, no simulation). The model's own
figures (model time, Cube utilisation, launches) come from the same run. Progress goes to stderr.
"""

from __future__ import annotations

import statistics
import time

from . import case, line

TARGET_SIM_S = 5.0
"""A learner's inference should take a few seconds on a 2-core machine (lab 09's budget is 60 s in all)."""


@case("resnet18")
def bench_resnet18(repeat: int) -> dict:
    """One ResNet-18 inference (batch 1, 224 x 224, after the graph pass) on the simulated chip."""
    from ..model import evaluate, images, optimize, run_model
    from ..model.resnet import resnet18

    x = images(1, 224)
    graph = optimize(resnet18(), input_shape=x.shape)
    runs = max(1, min(repeat, 3))   # a run takes seconds: three are enough for a median
    walls, cpus, prof = [], [], None
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        prof = run_model(graph, x, progress=True)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    t0 = time.perf_counter()
    ref = evaluate(graph, x)
    floor_s = time.perf_counter() - t0
    err = float(abs(prof.output - ref).max())
    assert err <= 2e-2 * max(1.0, float(abs(ref).max())), f"ResNet-18 on the simulator is off by {err}"
    return line("resnet18", statistics.median(walls), floor_s, None, model="resnet18 batch 1 224x224, optimized",
                cpu_s=round(statistics.median(cpus), 3), runs=runs, nodes=len(graph), launches=prof.launches,
                model_time_us=round(prof.model_time_us, 1), mac_utilization=round(prof.mac_utilization, 4),
                device_compute_us=round(prof.device_compute_us, 1), target_sim_s=TARGET_SIM_S,
                cpu_ns_per_mac=round(statistics.median(cpus) * 1e9 / sum(prof.macs(n.name) for n in graph), 4))
