"""The explorer driven in-process, as a notebook would drive it, without a browser or a kernel."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

import npusim as ns
from npusim.kernels.vector_add import run_vector_add
from npusim.pipes import PIPE_ORDER
from npusim.views import Explorer, charts, choice, int_choice, int_range, metrics_table, toggle

pytestmark = pytest.mark.views

TILES = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768]


def heights(fig, gid):
    return [p.get_height() for ax in fig.axes for p in ax.patches if p.get_gid() == gid]


@pytest.fixture
def explorer(xy):
    x, y = xy

    def run(tile: int, buffer_num: int):
        return run_vector_add(x, y, tile=tile, buffer_num=buffer_num)

    return Explorer(run, [int_choice("tile", TILES, value=1024), choice("buffer_num", [1, 2], value=2)],
                    charts=("timeline", "utilization"), metrics=("time_us", "total_cycles", "mte2_ratio"))


def test_first_draw_happens_on_construction(explorer, vadd):
    assert explorer.redraws == 1
    assert explorer.last_error is None
    assert explorer.params == {"tile": 1024, "buffer_num": 2}
    assert explorer.last_profile.total_cycles == vadd.total_cycles
    assert set(explorer.last_figures) == {"timeline", "utilization"}
    outs = explorer.output.outputs
    assert len(outs) == 2 and all("image/png" in o["data"] for o in outs)
    assert "time_us" in explorer.table.value and "change" not in explorer.table.value


def test_slider_change_redraws_with_new_data(explorer, vadd_fast):
    before = heights(explorer.last_figures["utilization"], "pipe_ratio")
    old_png = explorer.output.outputs[0]["data"]["image/png"]
    explorer.controls["tile"].value = 4096
    assert explorer.redraws == 2
    after = heights(explorer.last_figures["utilization"], "pipe_ratio")
    assert after != before
    # the explorer shows exactly what the plain functions give
    assert after == [vadd_fast.pipe_ratio[p.msprof_name] for p in PIPE_ORDER]
    assert heights(charts.utilization(vadd_fast), "pipe_ratio") == after
    assert explorer.output.outputs[0]["data"]["image/png"] != old_png
    assert set(explorer.last_timing) == {"run", "charts", "render", "table"}


def test_overflowing_tile_shows_the_message_and_keeps_the_charts(explorer):
    figs, outs, redraws = dict(explorer.last_figures), explorer.output.outputs, explorer.redraws
    profile = explorer.last_profile
    explorer.controls["tile"].value = 32768  # 3 queues x 2 buffers x 64 KB > 192 KB of UB
    assert isinstance(explorer.last_error, ns.CapacityError)
    assert explorer.redraws == redraws
    assert explorer.last_figures == figs and explorer.output.outputs is outs
    assert explorer.last_profile is profile
    status = explorer.status.value
    assert "UB overflow" in status and "CapacityError" in status and "Traceback" not in status
    assert "tile=32768" in status
    # a valid value again clears the message and redraws
    explorer.controls["tile"].value = 2048
    assert explorer.redraws == redraws + 1 and explorer.last_error is None and explorer.status.value == ""


def test_other_exceptions_show_type_and_message(xy):
    def fn(n: int):
        if n > 1:
            raise ValueError("n too large for this demo")
        return run_vector_add(*xy, tile=4096)

    ex = Explorer(fn, {"n": int_range("n", 1, 3).widget}, charts=("bandwidth",))
    ex.controls["n"].value = 2
    assert ex.redraws == 1 and isinstance(ex.last_error, ValueError)
    assert "ValueError: n too large" in ex.status.value


def test_pin_baseline_adds_the_change_column(explorer):
    explorer.pin()
    assert explorer.baseline is explorer.last_profile
    assert explorer.baseline_params == {"tile": 1024, "buffer_num": 2}
    base_time = explorer.baseline.time_us
    explorer.controls["tile"].value = 4096
    table = explorer.table.value
    assert "change" in table and "baseline" in table
    speedup = base_time / explorer.last_profile.time_us
    assert f"({speedup:.2f}x)" in table
    assert table == metrics_table(explorer.last_profile, explorer.baseline,
                                  ["time_us", "total_cycles", "mte2_ratio"])
    explorer.unpin()
    assert "change" not in explorer.table.value


def test_compare_chart_appears_once_a_baseline_is_pinned(xy):
    ex = Explorer(lambda tile: run_vector_add(*xy, tile=tile), [int_choice("tile", [1024, 4096])],
                  charts=("utilization", "compare"))
    assert set(ex.last_figures) == {"utilization"}
    ex.pin()
    ex.controls["tile"].value = 4096
    fig = ex.last_figures["compare"]
    times = heights(fig, "time_us")
    assert times == [ex.baseline.time_us, ex.last_profile.time_us]


def test_controls_only_offer_valid_values():
    c = int_choice("tile", [256, 512, 1024], value=512)
    assert c.widget.options == (256, 512, 1024) and c.widget.value == 512
    with pytest.raises(Exception):
        c.widget.value = 300
    with pytest.raises(ns.UsageError):
        int_choice("tile", [256, 512], value=300)
    with pytest.raises(ns.UsageError):
        int_range("tile", 256, 1000, 256)
    r = int_range("tile", 256, 1024, 256, value=512)
    assert r.widget.step == 256 and r.widget.value == 512
    d = choice("config", {"A2": "a2", "910": "classic"}, value="classic")
    assert d.widget.value == "classic" and d.widget.label == "910"
    t = toggle("fuse", True, description="fusion")
    assert t.widget.value is True and t.widget.description == "fusion"


def test_unknown_chart_is_a_usage_error():
    with pytest.raises(ns.UsageError, match="unknown chart"):
        Explorer(lambda: None, [], charts=("pie",))


def test_metrics_table_formats_and_deltas(vadd, vadd_fast):
    plain = metrics_table(vadd)
    assert "<table" in plain and f"{vadd.time_us:,.3f} us" in plain and "change" not in plain
    table = metrics_table(vadd_fast, vadd, ["time_us", "mte2_ratio"])
    assert f"({vadd.time_us / vadd_fast.time_us:.2f}x)" in table
    pp = (vadd_fast.pipe_ratio["mte2"] - vadd.pipe_ratio["mte2"]) * 100
    assert f"{pp:+.1f} pp" in table
    with pytest.raises(ns.UsageError, match="unknown metric"):
        metrics_table(vadd, keys=["speed"])
    # every fraction as a percentage (lab 01's table showed "l2_hit_rate 0" beside "mac_utilization 0.0%")
    shares = metrics_table(vadd, keys=["l2_hit_rate", "chip_mac_utilization", "mac_utilization"])
    assert shares.count("0.0%") == 3, shares


def test_widget_displays():
    ex = Explorer(lambda: None, [], charts=())
    assert isinstance(ex.last_error, ns.UsageError)  # None is not a profile: reported, not raised
    bundle = ex._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_computing_is_shown_and_the_old_charts_stay_until_the_new_ones_are_ready(explorer):
    seen = []
    old = explorer.output.outputs
    explorer.status.observe(lambda ch: seen.append(("status", ch["new"], explorer.output.outputs is old)), "value")
    explorer.output.observe(lambda ch: seen.append(("charts", explorer.output._dom_classes)), "outputs")
    explorer.controls["tile"].value = 2048
    assert seen[0][0] == "status" and "computing tile=2048" in seen[0][1] and seen[0][2], seen[:2]
    assert "npusim-busy" not in explorer.output._dom_classes
    charts_at = next(i for i, e in enumerate(seen) if e[0] == "charts")
    assert charts_at > 0 and seen[charts_at][1] == ("npusim-busy",)  # dimmed until the swap
    assert seen[-1] == ("status", "", False)


def test_a_setting_seen_before_is_redrawn_from_the_cache(xy):
    from npusim.views import explorer as ex_mod

    calls = []

    def run(tile: int):
        calls.append(tile)
        return run_vector_add(*xy, tile=tile)

    ex = Explorer(run, [int_choice("tile", [1024, 2048, 4096])], charts=("timeline",))
    first = ex.output.outputs
    ex.controls["tile"].value = 2048
    ex.controls["tile"].value = 1024
    assert calls == [1024, 2048] and ex.last_cached and ex.output.outputs == first and ex.redraws == 3
    ex_mod._forget_all()  # what running any notebook cell does
    ex.controls["tile"].value = 2048
    assert calls == [1024, 2048, 2048] and not ex.last_cached
    off = Explorer(run, [int_choice("tile", [1024, 2048])], charts=("timeline",), cache=0)
    off.controls["tile"].value = 2048
    off.controls["tile"].value = 1024
    assert calls[-3:] == [1024, 2048, 1024] and not off.last_cached


def test_pinning_fixes_the_axes_and_does_not_rerun(xy):
    calls = []

    def run(tile: int):
        calls.append(tile)
        return run_vector_add(*xy, tile=tile)

    ex = Explorer(run, [int_choice("tile", [1024, 2048, 4096])], charts=("timeline", "bandwidth"))
    ex.pin()
    assert calls == [1024] and ex.baseline is ex.last_profile
    span = ex.baseline.total_cycles
    for tile in (2048, 4096):
        ex.controls["tile"].value = tile
        assert ex.last_profile.total_cycles < span
        assert ex.last_figures["timeline"].axes[0].get_xlim() == (0.0, span)
    ex.unpin()
    assert calls == [1024, 2048, 4096]
    assert ex.last_figures["timeline"].axes[0].get_xlim()[1] == ex.last_profile.total_cycles
def test_busy_message_shows_while_the_function_runs():
    seen, holder = [], {}

    def run(n: int):
        if "explorer" in holder:
            seen.append(holder["explorer"].status.value)
        return run_vector_add(np.ones(n, np.float16), np.ones(n, np.float16), tile=256)

    holder["explorer"] = explorer = Explorer(run, [int_choice("n", [256, 512])], charts=(), busy="simulating...")
    explorer.controls["n"].value = 512
    assert seen and "simulating..." in seen[-1]
    assert explorer.status.value == ""       # cleared once the charts are drawn
    quiet = Explorer(run, [int_choice("n", [256])], charts=())
    assert quiet.busy is None and quiet.status.value == ""


def test_long_work_reports_its_progress_on_the_status_line():
    from npusim.views.explorer import report_progress

    assert report_progress("nobody listens") is False      # outside a redraw the caller reports its own way
    seen, holder = [], {}

    def run(n: int):
        for step in range(2):
            assert report_progress(f"step {step + 1} of 2") is True
            if "explorer" in holder:
                seen.append(holder["explorer"].status.value)
        return run_vector_add(np.ones(n, np.float16), np.ones(n, np.float16), tile=256)

    holder["explorer"] = explorer = Explorer(run, [int_choice("n", [256, 512])], charts=())
    explorer.controls["n"].value = 512
    assert ["step 1 of 2" in seen[0], "step 2 of 2" in seen[1]] == [True, True], seen
    assert explorer.status.value == "" and report_progress("after") is False


def test_a_labs_own_chart_is_shown_readable(vadd):
    """A chart function of the notebook (lab 05's error histogram, lab 04's comparison) gets the package's
    minimum text size, and its texts stay inside the figure the explorer shows uncropped."""
    from matplotlib.text import Text

    from npusim.views.layout import texts_outside
    from npusim.views.style import MIN_POINTS

    def own_chart(profile):
        fig = Figure(figsize=(3.0, 2.0), dpi=80)
        ax = fig.subplots()
        ax.hist([1, 2, 2, 3], 3)
        ax.set_xlabel("a label", fontsize=7)
        ax.set_title("a title")
        fig.subplots_adjust(left=0.1, bottom=0.15, right=0.99, top=0.9)   # tight for 7 pt, not for 10.8
        return fig

    own_chart.__module__ = "__main__"   # as when defined in a notebook cell
    ex = Explorer(lambda tile: vadd, [int_choice("tile", [1024])], charts=[own_chart])
    fig = ex.last_figures["own_chart"]
    fig.canvas.draw()
    assert min(t.get_fontsize() for t in fig.findobj(Text) if t.get_text()) >= MIN_POINTS
    assert texts_outside(fig) == []
