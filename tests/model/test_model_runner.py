"""run_model = execute (kernels simulated once) + schedule (the timeline for one system): re-timing a profile
for another host, link or launch cost is exact; the copies follow the placement; long runs show progress."""

from __future__ import annotations

import numpy as np
import pytest

from npusim import model as nm
from npusim.errors import UsageError

pytestmark = pytest.mark.lab09


def _events(p):
    return [(e.kind, e.name, e.node, e.start_us, e.end_us, e.nbytes, e.tensor) for e in p.events]


@pytest.mark.parametrize("change", [dict(pcie_bytes_per_s=50e9), dict(pcie_latency_us=1.0),
                                    dict(host_bytes_per_s=20e9, host_op_overhead_us=2.5), "launch"])
def test_retiming_equals_running_again(graph, batch, before, change):
    system = (nm.DEFAULT_SYSTEM.with_launch_overhead(2.0) if change == "launch"
              else nm.DEFAULT_SYSTEM.replace(**change))
    again = nm.run_model(graph, batch, system, memo=False)  # simulated again, not reused
    retimed = before.with_system(system)
    assert _events(retimed) == _events(again)       # the same timeline, event by event
    assert retimed.model_time_us != before.model_time_us
    assert retimed.breakdown_us == again.breakdown_us and np.array_equal(retimed.output, again.output)
    assert retimed.label == before.label


def test_retiming_refuses_another_npu_or_dtype(before):
    with pytest.raises(UsageError, match="another NPU"):
        before.with_system(nm.SystemConfig(hardware="classic"))
    with pytest.raises(UsageError, match="float16 activations"):
        before.with_system(nm.SystemConfig(activation_dtype="float32"))
    hand_made = nm.ModelProfile(before.graph, before.system, before.events, before.output)
    with pytest.raises(UsageError, match="not made by run_model"):
        hand_made.with_system(nm.DEFAULT_SYSTEM)


def test_an_execution_does_not_depend_on_the_system(graph, batch):
    run = nm.execute(graph, batch, progress=False)
    assert [s.node for s in run.steps] == [n.name for n in graph if n.op not in ("input", "output")]
    conv = next(s for s in run.steps if s.op == "conv2d")
    assert conv.placement == "device" and [k for k, _, _ in conv.launches] == ["nchw_to_nc1hwc0", "conv2d",
                                                                              "nhwc_to_nchw"]
    bn = next(s for s in run.steps if s.op == "batchnorm")
    assert bn.placement == "host" and not bn.launches and bn.host_bytes > 0
    assert run.nbytes["x"] == batch.astype(np.float16).nbytes


@pytest.mark.parametrize("passes", ["captured", "folded", "optimized"])
def test_the_copies_are_the_placements_crossings(graph, batch, passes):
    g = {"captured": graph, "folded": nm.fuse_conv_bn_relu(graph),
         "optimized": nm.optimize(graph, input_shape=batch.shape)}[passes]
    p = nm.run_model(g, batch, progress=False)
    assert [(e.tensor, e.kind, e.node) for e in p.events if e.kind in ("h2d", "d2h")] == g.crossings()


def test_census_counts_ops_by_placement(graph):
    text = graph.census()
    assert text.startswith(f"{graph.name}: {len(graph) - 2} ops")
    assert "batchnorm      3  host" in text and "conv2d         3  device" in text


def test_progress_in_a_terminal(graph, batch, capsys):
    nm.memo.clear()
    nm.run_model(graph, batch, progress=True)
    err = capsys.readouterr().err
    assert err.count("\r") == len(graph) - 2 + 1 and err.endswith("\n")   # a line per op, then the summary
    dev = sum(1 for n in graph.nodes if n.placement == nm.DEVICE)
    assert f"ops in " in err.splitlines()[-1] and f"{dev} of the {dev} device ops simulated" in err and "conv1" in err
    nm.run_model(graph, batch, progress=True)  # again: every device op reused, and the line says so
    assert f"0 of the {dev} device ops simulated, {dev} reused" in capsys.readouterr().err
    nm.run_model(graph, batch, progress=False)
    assert capsys.readouterr().err == ""
    nm.run_model(graph, batch)  # a small graph: no progress by default
    assert capsys.readouterr().err == ""
