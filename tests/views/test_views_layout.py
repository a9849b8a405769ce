"""Every chart type of the package is readable as drawn: no text leaves the figure (the explorer shows
figures uncropped), no legend covers data, no two texts overlap (lab 08's charts: tests/torch/
test_torch_training.py). And the checker itself catches each."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from npusim import views
from npusim.views import charts
from npusim.views.layout import (labels_outside_axes, labels_over_markers, layout_problems, legend_overlaps,
                                 overlapping_texts, texts_outside, tidy)

pytestmark = pytest.mark.views


@pytest.fixture(scope="module")
def conv_pair():
    """Two Conv2D variants of one layer (their timelines have mmad, fixpipe, load_data and layout copies)."""
    from npusim import conv

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16, 14, 14)).astype(np.float16)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float16)
    return [conv.conv2d(x, w, None, 1, 1, variant=v).profile for v in ("img2col", "direct")]


PROFILE_CHARTS = {
    "timeline": lambda p, q: charts.timeline(p),
    "timeline_pinned": lambda p, q: charts.timeline(p, baseline=q),
    "timeline_all_blocks": lambda p, q: charts.timeline(p, block=None),
    "utilization": lambda p, q: charts.utilization(p, baseline=q),
    "bandwidth": lambda p, q: charts.bandwidth(p, baseline=q),
    "roofline": lambda p, q: charts.roofline([p, q], baseline=q),
    "occupancy": lambda p, q: charts.occupancy(p, baseline=q),
    "occupancy_capacity": lambda p, q: charts.occupancy(p, scale="capacity"),
    "compare": lambda p, q: charts.compare([q, p], ["baseline", "current"]),
}


@pytest.mark.parametrize("kernel", ["vadd", "mm", "sm", "big", "vadd_multi", "conv"])
@pytest.mark.parametrize("name", list(PROFILE_CHARTS))
def test_profile_charts_are_readable(name, kernel, request, vadd_fast, conv_pair):
    prof = conv_pair[0] if kernel == "conv" else request.getfixturevalue(kernel)
    other = conv_pair[1] if kernel == "conv" else vadd_fast
    assert layout_problems(PROFILE_CHARTS[name](prof, other)) == []


def test_core_diagram_is_readable():
    for preset in ("a2", "classic"):
        assert texts_outside(views.core_diagram(preset)) == []


def test_model_charts_are_readable():
    from npusim import model as nm

    graph = nm.small_cnn()
    before = nm.run_model(graph, nm.images(2), label="as captured")
    after = nm.run_model(nm.optimize(graph), nm.images(2), label="after the pass")
    for fig in (nm.charts.timeline(before), nm.charts.breakdown([before, after], ["before", "after"])):
        assert layout_problems(fig) == []
    assert layout_problems(nm.charts.op_utilization(before)) == []
    # lab 09's placement chart of the ResNet-18 as captured (46 copies, three into one add) and optimised
    resnet = nm.resnet18()
    for g in (graph, nm.optimize(graph), resnet, nm.optimize(resnet, input_shape=(1, 3, 224, 224))):
        assert layout_problems(nm.charts.placement(g)) == []


def test_model_op_chart_labels_clear_its_dots():
    from npusim import model as nm

    assert labels_over_markers(nm.charts.op_utilization(nm.run_model(nm.small_cnn(), nm.images(2)))) == []


def test_roofline_labels_clear_the_points_lab_00_plots():
    """Lab 00's roofline cell: a matmul's point sat on the Cube fp32 roof's label."""
    from npusim.kernels.matmul import MatmulTiling, run_matmul
    from npusim.kernels.vector_add import run_vector_add

    x, y = np.random.default_rng(0).random((2, 1 << 18)).astype(np.float16)
    a = np.random.default_rng(1).standard_normal((2, 512, 512)).astype(np.float16)[0]
    b2 = np.random.default_rng(3).standard_normal((512, 1024)).astype(np.float16)
    profs = [run_vector_add(x, y, tile=8192).profile, run_matmul(a, a, tiling=MatmulTiling(128, 128, 64, 2)).profile,
             run_matmul(a, b2, out_dtype=np.float16, tiling=MatmulTiling(256, 64, 64, 2, step_n=2, depth_a1=8)).profile]
    assert layout_problems(charts.roofline(profs, labels=["vector add", "matmul 512³", "matmul, A kept in L1"])) == []


# --- the checker catches what it claims to -----------------------------------------------------------

def _bars_under_legend() -> Figure:
    fig = Figure(figsize=(4, 3), dpi=80)
    ax = fig.add_axes((0.15, 0.15, 0.8, 0.75))
    ax.bar([0, 1, 2], [1.0, 1.0, 1.0], label="tall bars")
    ax.set_ylim(0, 1.05)
    ax.legend(loc="upper right")
    return fig


def test_checker_sees_a_legend_over_bars_and_tidy_moves_it():
    fig = _bars_under_legend()
    found = legend_overlaps(fig)
    assert found and "covers patch" in found[0]
    tidy(fig)
    assert legend_overlaps(fig) == [] and texts_outside(fig) == []


def test_checker_sees_a_legend_over_a_line():
    fig = Figure(figsize=(4, 3), dpi=80)
    ax = fig.add_axes((0.15, 0.15, 0.8, 0.75))
    ax.plot([0, 1], [0, 1], label="diagonal")
    ax.plot([0, 1], [1, 0], label="other diagonal")
    ax.legend(loc="center")
    assert any("covers line" in p for p in legend_overlaps(fig))


def test_checker_sees_text_outside_and_tidy_fits_it():
    fig = Figure(figsize=(4, 2), dpi=80)
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))  # no room for labels
    ax.plot([0, 1], [0, 1])
    ax.set_xlabel("a label below the figure")
    assert any("leaves the figure" in p for p in texts_outside(fig))
    tidy(fig)
    assert texts_outside(fig) == []


def test_checker_sees_overlapping_texts_and_tidy_flips_annotations():
    fig = Figure(figsize=(4, 3), dpi=80)
    ax = fig.add_axes((0.15, 0.15, 0.8, 0.75))
    ax.plot([0.0, 1.0], [0.0, 1.0], "o")
    ax.text(0.5, 0.5, "one label")
    ax.text(0.52, 0.5, "another label")
    assert overlapping_texts(fig)
    ax.texts[1].remove()
    ax.annotate("a long label past the edge", (1.0, 1.0), textcoords="offset points", xytext=(4, -10))
    assert labels_outside_axes(fig) == ["label 'a long label past the edge' crosses the edge of its axes"]
    tidy(fig)
    frame = ax.get_window_extent()
    box = ax.texts[-1].get_window_extent()
    assert box.x1 <= frame.x1 + 1 and layout_problems(fig) == []


def test_checker_sees_a_label_over_a_point_and_a_boxed_badge_over_a_box():
    fig = Figure(figsize=(4, 3), dpi=80)
    ax = fig.add_axes((0.15, 0.15, 0.8, 0.75))
    ax.plot([0.5], [0.5], "o", markersize=10, gid="point")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.text(0.5, 0.5, "over the point", ha="center", va="center")
    assert labels_over_markers(fig) == ["label 'over the point' covers the marker of point"]
    ax.texts[0].set_position((0.5, 0.9))
    assert labels_over_markers(fig) == []
    # two numbered badges whose glyphs are apart but whose circles touch (lab 09's copies 18 and 19)
    for x, n in ((0.30, "18"), (0.36, "19")):
        ax.text(x, 0.2, n, ha="center", va="center", bbox={"boxstyle": "circle,pad=0.3", "fc": "red"})
    assert any("'18' and '19' overlap" in p for p in overlapping_texts(fig))


def test_fusion_chart_is_readable():
    from npusim.conv.fusion import compare_fusion

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16, 14, 14)).astype(np.float16)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float16)
    assert layout_problems(compare_fusion(x, w, padding=1).chart()) == []


@pytest.mark.parametrize("name", ["timeline", "utilization", "bandwidth", "roofline", "occupancy", "compare"])
def test_no_text_is_smaller_than_the_minimum(name, vadd, vadd_fast):
    """Every text of every chart type, tick labels included (made when the figure is drawn), is at least
    ``style.MIN_POINTS``."""
    from matplotlib.text import Text

    from npusim.views.style import MIN_POINTS

    fig = PROFILE_CHARTS[name](vadd, vadd_fast)
    fig.canvas.draw()
    small = {(t.get_text(), t.get_fontsize()) for t in fig.findobj(Text) if t.get_text() and t.get_visible()
             and t.get_fontsize() < MIN_POINTS}
    assert not small, small


def test_placement_copy_badges_read_in_order_and_apart():
    """Lab 09's placement chart numbers the PCIe copies in the order they happen: along a strip the badges
    must read 1, 2, 3 ... left to right, and no two may touch."""
    from npusim import model as nm
    from npusim.views.layout import _extent, _renderer

    fig = nm.charts.placement(nm.resnet18())
    renderer = _renderer(fig)
    badges = sorted((int(t.get_gid().split("|")[1]), _extent(t, renderer)) for ax in fig.axes for t in ax.texts
                    if (t.get_gid() or "").startswith("copy|"))
    problems = []
    for (n, a), (m, b) in zip(badges, badges[1:]):
        if abs(a.y0 - b.y0) < 40 and b.x0 < a.x0:   # same strip, the later copy further left
            problems.append(f"copy {m} is left of copy {n}")
    for i, (n, a) in enumerate(badges):
        problems += [f"copies {n} and {m} overlap" for m, b in badges[i + 1:] if a.overlaps(b)]
    assert problems == []
