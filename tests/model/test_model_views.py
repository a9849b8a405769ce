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
    bars = [r.get_height() for r in _gid(fig, "kernel_chip_util")]
    assert bars == pytest.approx([r["kernel_chip_util"] for r in before.op_rows() if r["kernel_util"] is not None])
    (dots,) = _gid(fig, "kernel_util")
    assert [y for _, y in dots.get_offsets()] == pytest.approx(
        [r["kernel_util"] for r in before.op_rows() if r["kernel_util"] is not None])


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


def test_a_model_run_started_by_the_explorer_shows_its_progress_there(graph, capsys):
    pytest.importorskip("ipywidgets")
    from npusim import views

    seen = []

    def run(fold: bool):
        return nm.run_model(nm.optimize(graph, fold_bn=fold), nm.images(1), progress=True)

    ex = nm.ModelExplorer(run, [views.toggle("fold", False)])
    ex.status.observe(lambda change: seen.append(change["new"]), names="value")
    ex.controls["fold"].value = True
    bars = [v for v in seen if "[" in v and "/" in v]
    assert len(bars) >= len([n for n in graph.nodes if n.op not in ("input", "output")]) // 2, seen[:3]
    assert "device ops simulated" in " ".join(seen)
    assert "device ops simulated" not in capsys.readouterr().err      # not on the terminal as well


@pytest.mark.parametrize("which", ["captured", "optimized", "resnet18"])
def test_placement_chart_is_readable_and_counts_the_copies(graph, which):
    from matplotlib.text import Text

    g = {"captured": graph, "optimized": nm.optimize(graph), "resnet18": nm.resnet18()}[which]
    plt.close("all")
    fig = charts.placement(g)
    assert plt.get_fignums() == []
    texts = [t for ax in fig.axes for t in ax.findobj(Text) if t.get_text()]
    boxes = [t for t in texts if str(t.get_gid()).startswith("node|")]
    assert len(boxes) == len(g)                                    # every node, batch and result included
    assert all(t.get_fontsize() >= 8 and t.get_rotation() == 0 for t in boxes)  # legible at 100 %, never rotated
    badges = sorted(int(t.get_text()) for t in texts if str(t.get_gid()).startswith("copy|"))
    assert badges == list(range(1, len(g.crossings()) + 1))         # every copy numbered once: countable
    assert fig.get_size_inches()[0] <= 15                           # wraps into strips instead of growing wide
    assert f"{len(g.crossings())} PCIe copies" in " ".join(t.get_text() for t in fig.texts)
    fig.savefig(io.BytesIO(), format="png")


def test_short_names():
    assert charts.short_name("layer2_0_downsample_0") == "2.0 down conv"
    assert charts.short_name("layer1_1_relu_1") == "1.1 relu_1" and charts.short_name("fc") == "fc"


def test_trace_links_launches_to_kernels_and_pipes(after):
    d = nm.to_chrome_trace(after, pipes=["conv1"])
    evs = d["traceEvents"]
    flows = {}
    for e in evs:
        if e["ph"] in ("s", "f"):
            flows.setdefault(e["id"], {})[e["ph"]] = e
    kernels = after.kernels()
    assert len(flows) == len(kernels) + len(after.kernels("conv1"))  # launch -> kernel, and kernel -> its pipes
    slices = [e for e in evs if e["ph"] == "X"]
    for pair in flows.values():
        assert set(pair) == {"s", "f"} and pair["f"]["bp"] == "e"
        for end in pair.values():  # each end lies inside a slice of its own track, which Perfetto binds it to
            assert any(x["pid"] == end["pid"] and x["tid"] == end["tid"] and x["ts"] <= end["ts"] <= x["ts"] + x["dur"]
                       for x in slices)
    blocks = {e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "process_name"}
    assert any(n.startswith("conv1:conv2d: block 0") for n in blocks)
    assert not any(n.startswith("conv2:") for n in blocks)           # only the named node's pipes
    with pytest.raises(Exception, match="not in the graph"):
        nm.to_chrome_trace(after, pipes=["nope"])
