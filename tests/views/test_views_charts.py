"""Every chart draws exactly the profile's numbers, is labelled, renders, and leaks no figure."""

from __future__ import annotations

import io

import matplotlib.pyplot as plt
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.figure import Figure

import npusim as ns
from npusim.pipes import PIPE_ORDER, Pipe
from npusim import chartstyle as palette
from npusim.views import charts
from npusim.views.binning import busy_per_bin
from npusim.views.style import category_texts, legend_entries

pytestmark = pytest.mark.views


# --- reading figures back ------------------------------------------------------------------------

def patches(fig: Figure, gid: str) -> list:
    return [p for ax in fig.axes for p in ax.patches if p.get_gid() == gid]


def artists(fig: Figure, prefix: str) -> list:
    out = []
    for ax in fig.axes:
        out += [a for a in [*ax.collections, *ax.lines] if (a.get_gid() or "").startswith(prefix)]
    return out


def texts(fig: Figure) -> str:
    """All text on the figure: titles, labels, annotations, legend entries, bar labels."""
    parts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    return "\n".join(parts)


def polygon_area(path) -> float:
    x, y = path.vertices[:, 0], path.vertices[:, 1]
    return 0.5 * abs(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1)))


def lane_busy(profile, pipe: Pipe, block: int = 0) -> float:
    return sum(i.end - i.start for i in profile.instructions if i.pipe == pipe and i.block == block)


# --- all charts: labelled, legend, renders, no leak -------------------------------------------------

ALL = {
    "timeline": lambda p, q: charts.timeline(p),
    "timeline_all_blocks": lambda p, q: charts.timeline(p, block=None),
    "utilization": lambda p, q: charts.utilization(p),
    "bandwidth": lambda p, q: charts.bandwidth(p),
    "roofline": lambda p, q: charts.roofline([p, q]),
    "occupancy": lambda p, q: charts.occupancy(p),
    "compare": lambda p, q: charts.compare([p, q], ["a", "b"]),
}


#: Axes of categories (not quantities) need no unit.
CATEGORICAL = ("pipe", "data path", "speed-up")


@pytest.mark.parametrize("name", list(ALL))
def test_chart_is_labelled_renders_and_does_not_leak(name, mm, vadd):
    before = plt.get_fignums()
    fig = ALL[name](mm, vadd)
    assert isinstance(fig, Figure)
    assert plt.get_fignums() == before
    title = fig._suptitle.get_text() if fig._suptitle else ""
    axes = [ax for ax in fig.axes if ax.get_xlabel() or ax.get_ylabel()]
    assert axes
    assert title or any(ax.get_title(loc="left") or ax.get_title() for ax in fig.axes)
    for ax in axes:
        for label in (ax.get_xlabel(), ax.get_ylabel()):
            if label and not label.startswith(CATEGORICAL):
                assert "(" in label, f"{name}: axis label {label!r} has no unit"
    assert any(ax.get_legend() is not None or legend_entries(ax) for ax in fig.axes) or fig.legends
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:4] == b"\x89PNG"
    assert plt.get_fignums() == before


def test_launch_result_is_accepted(xy):
    from npusim.kernels.vector_add import run_vector_add

    res = run_vector_add(*xy, tile=4096)
    fig = charts.utilization(res)
    assert [p.get_height() for p in patches(fig, "pipe_ratio")] == [res.profile.pipe_ratio[p.msprof_name]
                                                                      for p in PIPE_ORDER]
    with pytest.raises(ns.UsageError):
        charts.utilization(42)


# --- utilization ---------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["vadd", "mm", "sm"])
def test_utilization_bars_are_pipe_ratio(which, request):
    prof = request.getfixturevalue(which)
    fig = charts.utilization(prof)
    bars = patches(fig, "pipe_ratio")
    assert [b.get_height() for b in bars] == [prof.pipe_ratio[p.msprof_name] for p in PIPE_ORDER]
    labels = category_texts(fig.axes[0], "x")
    assert labels == [charts.PIPE_LABELS[p] for p in PIPE_ORDER] + ["Cube MAC"]
    assert [b.get_height() for b in patches(fig, "mac_utilization")] == [prof.mac_utilization]
    # the critical pipe is outlined
    crit = [p.msprof_name for p in PIPE_ORDER].index(prof.critical_pipe)
    from matplotlib.colors import to_rgb

    assert bars[crit].get_linewidth() > 0 and bars[crit].get_edgecolor()[:3] == to_rgb(palette.ROLE["critical"])


# --- bandwidth -----------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["vadd", "mm", "sm"])
def test_bandwidth_bars_are_profile_bandwidth(which, request):
    prof = request.getfixturevalue(which)
    fig = charts.bandwidth(prof)
    paths = [p for p in ns.profile.PATHS if p in prof.bandwidth] + ["L2", "HBM"]   # the core's, then the chip's
    assert [b.get_height() for b in patches(fig, "achieved_gbps")] == [prof.bandwidth[p]["achieved_gbps"]
                                                                        for p in paths]
    # a peak bar is its value, or cut at the top of the axis (the chip's HBM against one core's paths)
    top = fig.axes[0].get_ylim()[1]
    peaks = [b for ax in fig.axes for b in ax.patches if (b.get_gid() or "").startswith("peak_gbps")]
    assert [b.get_height() for b in peaks] == [min(prof.bandwidth[p]["peak_gbps"], top) for p in paths]
    assert all((b.get_gid() == "peak_gbps|cut") == (prof.bandwidth[p]["peak_gbps"] > top) for b, p in zip(peaks, paths))
    ticks = [t.split("\n")[0] for t in category_texts(fig.axes[0], "x")]
    assert ticks == [p for p in ns.profile.PATHS if p in prof.bandwidth] + ["L2 hits", "HBM"]


def test_matmul_bandwidth_has_the_cube_paths(mm):
    ticks = [t.split("\n")[0] for t in category_texts(charts.bandwidth(mm).axes[0], "x")]
    assert ticks == ["GM->L1", "L1->L0A", "L1->L0B", "L0C->GM", "L2 hits", "HBM"]


# --- timeline ------------------------------------------------------------------------------------

def test_timeline_bars_are_the_instructions(mm):
    fig = charts.timeline(mm)
    ax = fig.axes[0]
    assert category_texts(ax, "y")[::-1][0].startswith("MTE2")
    lane_order = [t.rstrip(" *") for t in category_texts(ax, "y")][::-1]
    assert lane_order == [charts.PIPE_LABELS[p] for p in PIPE_ORDER]
    for pipe in (Pipe.MTE2, Pipe.M, Pipe.FIX):
        label = charts.PIPE_LABELS[pipe]
        bars = artists(fig, f"bars|{label}|")
        assert bars, f"no bars on {label}"
        widths = [np.ptp(path.vertices[:, 0]) for b in bars for path in b.get_paths()]
        n = sum(1 for i in mm.instructions if i.pipe == pipe)
        assert len(widths) == n
        assert sum(widths) == pytest.approx(lane_busy(mm, pipe))
        # busy cycles of a pipe are exactly its instruction durations
        assert sum(widths) == pytest.approx(mm.pipe_busy_cycles[pipe.msprof_name])
    # the legend lists every family in one fixed order; the families this launch used are not faded
    entries = legend_entries(ax)
    assert [label for label, _ in entries] == [f.label for f in charts.FAMILIES]
    used = {charts.family(i.op).label for i in mm.instructions}
    assert {label for label, opaque in entries if opaque} == used
    swatches = [c for c in ax.collections if c.get_gid() == "family_swatches"]
    assert len(swatches) == 1 and len(swatches[0].get_paths()) == len(charts.FAMILIES)


def test_an_operation_has_one_colour_in_every_chart(mm, vadd, sm):
    """A bar's colour is its operation family's, whatever else the kernel ran (no per-chart palette)."""
    from matplotlib.colors import to_hex

    seen: dict[str, set] = {}
    for prof in (mm, vadd, sm):
        fig = charts.timeline(prof)
        for bars in artists(fig, "bars|") + artists(fig, "bins|"):
            op = bars.get_gid().split("|")[2]
            seen.setdefault(op, set()).add(to_hex(bars.get_facecolor()[0]))
    assert {"data_copy", "mmad", "add", "ISSUE"} <= set(seen)
    for op, colours in seen.items():
        assert colours == {charts.op_colour(op)}, f"{op} drawn in {colours}"
    assert charts.op_colour("fixpipe+relu") == charts.op_colour("fixpipe")
    assert charts.op_colour("data_copy_pad") != charts.op_colour("data_copy")
    assert charts.family("some_new_op").label == "other"


def test_timeline_writes_total_time_and_critical_pipe(vadd):
    text = texts(charts.timeline(vadd))
    assert f"{vadd.time_us:.3f} us" in text
    assert f"{vadd.total_cycles:,.0f} cycles" in text
    assert f"critical pipe: {charts.pipe_label(vadd.critical_pipe)}" in text


def test_timeline_dense_lanes_are_binned(big):
    # (how fast a dense timeline draws is the benchmark's business, not a timed unit test's)
    fig = charts.timeline(big)
    fig.savefig(io.BytesIO(), format="png")
    assert not artists(fig, "bars|MTE2|"), "a lane of thousands of bars must be binned"
    for pipe in (Pipe.MTE2, Pipe.MTE3, Pipe.V):
        label = charts.PIPE_LABELS[pipe]
        bins = artists(fig, f"bins|{label}|")
        assert bins
        # polygon area / lane height (0.8) = busy cycles: the bins lose no time
        area = sum(polygon_area(path) for b in bins for path in b.get_paths())
        assert area / 0.8 == pytest.approx(lane_busy(big, pipe), rel=1e-6)
    assert any(t.endswith("*") for t in category_texts(fig.axes[0], "y"))


def test_timeline_all_blocks_has_lanes_per_core(vadd_multi):
    fig = charts.timeline(vadd_multi, block=None)
    labels = category_texts(fig.axes[0], "y")
    for c in range(vadd_multi.active_cores):
        assert any(lbl.startswith(f"core {c} MTE2") for lbl in labels)
    bars = artists(fig, "bars|core 3 MTE2|")
    widths = [np.ptp(path.vertices[:, 0]) for b in bars for path in b.get_paths()]
    assert sum(widths) == pytest.approx(lane_busy(vadd_multi, Pipe.MTE2, block=3))


def test_timeline_of_later_block_and_bad_block(vadd_multi):
    fig = charts.timeline(vadd_multi, block=2)
    assert "block 2 of 4" in texts(fig)
    with pytest.raises(ns.UsageError, match="block 9"):
        charts.timeline(vadd_multi, block=9)


@settings(max_examples=60, deadline=None, database=None)
@given(st.lists(st.tuples(st.floats(0, 1000), st.floats(0, 200)), max_size=40), st.integers(1, 30))
def test_busy_per_bin_matches_brute_force(intervals, nbins):
    s = np.array([a for a, _ in intervals], float)
    e = s + np.array([d for _, d in intervals], float)
    edges = np.linspace(0, 1300, nbins + 1)
    got = busy_per_bin(s, e, edges)
    want = [sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in zip(s, e)) for lo, hi in zip(edges, edges[1:])]
    assert got == pytest.approx(want, abs=1e-6)


# --- roofline ------------------------------------------------------------------------------------

def test_roofline_points_and_roofs(vadd, mm, sm):
    fig = charts.roofline([vadd, mm, sm], labels=["add", "mm", "softmax"])
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    for i, prof in enumerate((vadd, mm, sm)):
        (pt,) = artists(fig, f"point|{i}")
        assert (pt.get_xdata()[0], pt.get_ydata()[0]) == (prof.arithmetic_intensity, prof.achieved_flops)
    cfg = mm.config
    roofs = {line.get_gid().split("|")[1]: line for line in artists(fig, "roof|")}
    assert set(roofs) == {"Cube fp16", "Cube fp32", "Vector fp16"}
    assert roofs["Cube fp16"].get_ydata()[-1] == pytest.approx(cfg.cube_peak_flops("float16"))
    assert roofs["Vector fp16"].get_ydata()[-1] == pytest.approx(cfg.vector_peak_flops("float16"))
    # the slopes: reads from HBM (the GM bandwidth of the active cores), reads from L2, all ports at once
    slopes = {line.get_gid().split("|")[1]: line.get_ydata()[0] / line.get_xdata()[0] for line in artists(fig, "gm|")}
    assert slopes["HBM"] == pytest.approx(mm.peak_gm_bytes_per_s)
    assert slopes["L2"] == pytest.approx(cfg.l2_bytes_per_cycle * cfg.clock_ghz * 1e9)
    assert slopes["all ports"] > slopes["L2"]
    for i, prof in enumerate((vadd, mm, sm)):
        (own,) = artists(fig, f"own_roof|{i}")
        assert own.get_ydata()[0] == pytest.approx(prof.attainable_flops) and prof.attainable_flops >= prof.achieved_flops
    assert mm.peak_flops == pytest.approx(cfg.cube_peak_flops("float16") * mm.active_cores)
    legend = {t.get_text() for t in ax.get_legend().get_texts()}
    assert any(t.startswith("mm (") for t in legend)


def test_roofline_classic_has_no_fp32_cube_roof(vadd):
    fig = charts.roofline(vadd, config="classic")
    names = {line.get_gid().split("|")[1] for line in artists(fig, "roof|")}
    assert names == {"Cube fp16", "Vector fp16"}
    assert "classic" in texts(fig)


def test_roofline_roofs_scale_with_active_cores(vadd_multi):
    fig = charts.roofline(vadd_multi)
    (cube,) = [ln for ln in artists(fig, "roof|Cube fp16")]
    assert cube.get_ydata()[-1] == pytest.approx(vadd_multi.config.cube_peak_flops() * 4)


# --- occupancy -----------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["vadd", "mm"])
def test_occupancy_steps_are_the_events(which, request):
    prof = request.getfixturevalue(which)
    fig = charts.occupancy(prof)
    mems = sorted({m for b, _, m, _ in prof.occupancy_events if b == 0})
    for mem in mems:
        (live,) = artists(fig, f"live|{mem}")
        ev = sorted((t, d) for b, t, m, d in prof.occupancy_events if b == 0 and m == mem)
        # value after each distinct event time = running sum of the deltas up to it
        xs, ys = live.get_xdata(), live.get_ydata()
        for t in sorted({t for t, _ in ev}):
            want = sum(d for tt, d in ev if tt <= t) / 1024
            k = np.searchsorted(xs, t, side="right") - 1
            assert ys[k] == pytest.approx(want)
        assert max(ys) <= prof.reserved_bytes[mem] / 1024 + 1e-9
        (cap,) = artists(fig, f"capacity|{mem}")
        assert cap.get_ydata()[0] == prof.config.memory_bytes(mem) / 1024
        (res,) = artists(fig, f"reserved|{mem}")
        assert res.get_ydata()[0] == prof.reserved_bytes[mem] / 1024


def test_occupancy_shows_only_used_memories(vadd):
    fig = charts.occupancy(vadd)
    assert [ax.get_ylabel() for ax in fig.axes] == ["UB (KB)"]


# --- compare -------------------------------------------------------------------------------------

def test_compare_times_ratios_and_speedup(vadd, vadd_fast):
    fig = charts.compare([vadd, vadd_fast], ["tile 1024", "tile 4096"])
    assert [b.get_height() for b in patches(fig, "time_us")] == [vadd.time_us, vadd_fast.time_us]
    for i, prof in enumerate((vadd, vadd_fast)):
        assert [b.get_height() for b in patches(fig, f"pipe_ratio|{i}")] == [prof.pipe_ratio[p.msprof_name]
                                                                            for p in PIPE_ORDER]
    speedup = f"{vadd.time_us / vadd_fast.time_us:.2f}x"
    assert speedup in texts(fig)
    assert "1.00x" in texts(fig)


def test_compare_needs_two_profiles_and_matching_labels(vadd, vadd_fast):
    with pytest.raises(ns.UsageError):
        charts.compare([vadd])
    with pytest.raises(ns.UsageError):
        charts.compare([vadd, vadd_fast], ["only one"])


def test_roofline_ticks_are_plain_decimals_and_each_roof_has_its_label(vadd, mm, vadd_multi):
    import re

    for fig in (charts.roofline([vadd, mm]), charts.roofline(vadd_multi), charts.roofline(vadd, config="classic")):
        fig.canvas.draw()
        ax = fig.axes[0]
        ticks = [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels() if t.get_text()]
        assert ticks and all(re.fullmatch(r"[\d,]+(\.\d+)?", t) for t in ticks), ticks
        roofs = {line.get_gid() for line in artists(fig, "roof|")}
        labels = " ".join(t.get_text() for t in ax.texts if t.get_gid() == "roof_label")
        for gid in roofs:
            assert gid.split("|")[1] in labels, f"{gid} has no label on its line"
        # each memory slope is drawn once, as a line with its legend entry naming its pipe and rate
        slopes = artists(fig, "gm|")
        assert [g.get_gid().split("|")[1] for g in slopes] == ["HBM", "L2", "all ports"]
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert any(t.startswith("reads from HBM (MTE2)") and "GB/s" in t for t in legend)
        assert any(t.startswith("all ports: reads + writes") for t in legend)


def test_occupancy_axis_fits_what_is_reserved(vadd):
    fig = charts.occupancy(vadd)
    reserved = vadd.reserved_bytes["UB"] / 1024
    assert fig.axes[0].get_ylim()[1] == pytest.approx(reserved * 1.1)
    assert "above the axis" in texts(fig)
    full = charts.occupancy(vadd, scale="capacity")
    assert full.axes[0].get_ylim()[1] == pytest.approx(vadd.config.memory_bytes("UB") / 1024 * 1.1)
    with pytest.raises(ns.UsageError, match="scale"):
        charts.occupancy(vadd, scale="log")


def test_a_pinned_baseline_fixes_the_time_axis(xy, vadd, vadd_fast):
    """Against one baseline, a slower setting draws a longer timeline on the same axis, not a rescaled one."""
    from npusim.kernels.vector_add import run_vector_add

    slow = vadd  # tile 1024
    mid = run_vector_add(*xy, tile=2048, buffer_num=2).profile
    assert slow.total_cycles > mid.total_cycles > vadd_fast.total_cycles
    base = slow
    a, b = charts.timeline(mid, baseline=base), charts.timeline(vadd_fast, baseline=base)
    assert a.axes[0].get_xlim() == b.axes[0].get_xlim() == (0.0, base.total_cycles)
    (end,) = artists(a, "baseline_end")
    assert end.get_xdata()[0] == base.total_cycles
    # unpinned, each timeline fills its own axis
    assert charts.timeline(mid).axes[0].get_xlim()[1] == mid.total_cycles
    # a setting slower than the baseline extends the axis; the baseline's end stays marked
    c = charts.timeline(slow, baseline=vadd_fast)
    assert c.axes[0].get_xlim()[1] == slow.total_cycles
    assert artists(c, "baseline_end")[0].get_xdata()[0] == vadd_fast.total_cycles
    for chart in (charts.utilization, charts.bandwidth):
        marks = artists(chart(mid, baseline=base), "baseline")
        assert marks, f"{chart.__name__} does not mark the baseline"


def test_bandwidth_axis_fits_the_cores_paths_and_cuts_the_chips_hbm(vadd):
    """One core: the axis is scaled to its paths' peaks (a 20 % bar is a fifth of its peak bar, not a sliver
    under the chip's 1,600 GB/s); the HBM peak is drawn cut at the top, with its value written on it."""
    fig = charts.bandwidth(vadd)
    ax = fig.axes[0]
    bw = vadd.bandwidth
    core_peaks = [bw[p]["peak_gbps"] for p in bw if p not in ("L2", "HBM")]
    assert ax.get_ylim()[1] <= 2 * 1.15 * max(core_peaks) < bw["HBM"]["peak_gbps"]
    (cut,) = patches(fig, "peak_gbps|cut")
    assert cut.get_height() == pytest.approx(ax.get_ylim()[1])
    assert f"{bw['HBM']['peak_gbps']:,.0f}" in texts(fig)
    for bar, p in zip(patches(fig, "achieved_gbps"), [p for p in bw if p != "HBM"]):
        assert bar.get_height() == pytest.approx(bw[p]["achieved_gbps"])
