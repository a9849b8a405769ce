"""Trace export (schema), charts (pure, no pyplot leak, numbers from the profile) and the explorer."""

from __future__ import annotations

import io
import json

import matplotlib.pyplot as plt
import pytest
from matplotlib.figure import Figure

from npusim import model as nm
from npusim.model import charts

pytestmark = pytest.mark.lab09


def test_trace_schema(after, tmp_path):
    path = tmp_path / "model.json"
    d = nm.to_chrome_trace(after, path)
    assert json.loads(path.read_text()) == json.loads(json.dumps(d))
    evs = d["traceEvents"]
    meta = [e for e in evs if e["ph"] == "M"]
    procs = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    model_pid = next(p for p, n in procs.items() if n.startswith("model:"))
    threads = {e["args"]["name"] for e in meta if e["name"] == "thread_name" and e["pid"] == model_pid}
    assert threads == {"host ops", "kernel launches", "PCIe copies", "device kernels"}
    model_x = [e for e in evs if e["ph"] == "X" and e["pid"] == model_pid]
    assert len(model_x) == len(after.events)
    for e in model_x:
        assert {"name", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e) and e["dur"] >= 0
        assert e["args"]["kind"] in ("host", "launch", "h2d", "d2h", "kernel")
    # every kernel has its per-pipe tracks, placed at its start on the model timeline
    for k in after.kernels():
        blocks = [n for n in procs.values() if n.startswith(f"{k.name}: block ")]
        assert len(blocks) == k.profile.block_dim
    starts = {k["name"]: k["start_us"] for k in d["otherData"]["kernels"]}
    assert all(starts[k.name] == pytest.approx(k.start_us) for k in after.kernels())
    assert d["otherData"]["model"]["model_time_us"] == pytest.approx(after.model_time_us)
    ts = [e["ts"] for e in evs if e["ph"] != "M"]
    assert ts == sorted(ts)
    small = nm.to_chrome_trace(after, pipes=False)
    assert len(small["traceEvents"]) < len(evs) and "kernels" not in small["otherData"]


def test_charts_are_pure_figures(before, after):
    plt.close("all")
    figs = [charts.timeline(before), charts.breakdown([before, after], ["before", "after"]),
            charts.op_utilization(before)]
    assert all(isinstance(f, Figure) for f in figs) and plt.get_fignums() == []
    for f in figs:
        f.savefig(io.BytesIO(), format="png")  # renders without pyplot


def _gid(fig, gid):
    """Artists with ``gid`` (a bar call gives its gid to every Rectangle)."""
    return [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == gid]


def test_breakdown_bars_are_the_breakdown(before, after):
    fig = charts.breakdown([before, after])
    for i, p in enumerate((before, after)):
        for cat, v in p.breakdown_us.items():
            bars = _gid(fig, f"breakdown|{i}|{cat}")
            assert sum(r.get_width() for r in bars) == pytest.approx(v)


def test_timeline_lanes_and_utilisation_lines(before):
    fig = charts.timeline(before)
    assert _gid(fig, "lane|device|device") and _gid(fig, "lane|PCIe|transfers") and _gid(fig, "lane|host|host")
    fig = charts.op_utilization(before)
    (line,) = _gid(fig, "model_util")
    assert line.get_ydata()[0] == pytest.approx(before.mac_utilization)
    bars = [r.get_height() for r in _gid(fig, "kernel_util")]
    assert bars == pytest.approx([r["kernel_util"] for r in before.op_rows() if r["kernel_util"] is not None])


def test_explorer_redraws_and_shows_errors(graph):
    pytest.importorskip("ipywidgets")
    from npusim import views

    x = nm.images(1)

    def run(fold: bool, pool_on_device: bool):
        g = nm.optimize(graph, fold_bn=fold, fuse_relu=fold, offload_ops=("maxpool",) if pool_on_device else ())
        if pool_on_device and not fold:
            raise ValueError("not in this test")
        return nm.run_model(g, x)

    ex = nm.ModelExplorer(run, [views.toggle("fold", False), views.toggle("pool_on_device", False)])
    assert ex.redraws == 1 and set(ex.last_figures) == {"timeline", "breakdown"}
    base = ex.baseline
    ex.controls["fold"].value = True
    assert ex.redraws == 2 and ex.last_profile.model_time_us < base.model_time_us
    assert "speed-up" in ex.table.value
    ex.controls["fold"].value = False
    ex.controls["pool_on_device"].value = True
    assert ex.last_error is not None and "not in this test" in ex.status.value and ex.redraws == 3
    with pytest.raises(Exception, match="at most 2"):
        nm.ModelExplorer(run, [views.toggle("fold")], charts=("timeline", "breakdown", "op_utilization"))
