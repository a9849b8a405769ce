"""Lab 09's story setting (npusim.model.story): what the lab's text says about it, asserted on the same runs."""

from __future__ import annotations

import pytest

from npusim import model as nm

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs():
    graph = nm.resnet18()
    return nm.story_runs(nm.CONTRAST, graph), nm.story_runs(nm.STORY, graph, sanitize="off")


def test_batch_1_is_launch_and_size_bound(runs):
    (before, after), _ = runs
    launch = after.system.launch_overhead_us
    convs = [e for e in after.kernels() if e.main and e.node != "fc"]
    assert convs and all(e.dur_us < launch for e in convs)          # every conv kernel ends before its launch would
    # split over the chip (bands x Cout groups) even at one image: at least 3/4 of the Cube cores each
    assert all(e.profile.active_cores >= 0.75 * e.profile.chip_cores for e in convs if e.node.startswith("layer"))
    assert max(e.profile.chip_mac_utilization for e in convs) < 0.4   # too little work to fill the chip
    b = after.breakdown_us
    assert max(b, key=b.get) == "launch"


def test_the_story_setting_figures_and_their_explanations(runs):
    (b1, a1), (before, after) = runs
    f = nm.story.figures(before, after)
    f1 = nm.story.figures(b1, a1)
    # the big convolutions fill the chip at batch 8, far better than at batch 1, within the story's 80 % +- 8
    assert 0.72 <= f["conv_chip_util_max"] <= 0.88 and f["conv_chip_util_max"] > 1.8 * f1["conv_chip_util_max"]
    assert f["conv_chip_util_median"] < f["conv_chip_util_max"]
    # the host round trips: the model far below the story's 40 %, the passes far above its +25 %
    assert f["model_chip_util_before"] < 0.05 and f["speedup"] > 1.35
    assert f["model_chip_util_after"] > 5 * f["model_chip_util_before"]
    # line 2: a conv output's trip to the host and back costs many times the conv
    c = "layer1_0_conv1"
    conv_us = next(e for e in before.kernels(c) if e.main).dur_us
    trip = sum(e.dur_us for e in before.events if (e.kind == "d2h" and e.tensor == c)
               or (e.kind == "host" and e.node == "layer1_0_bn1") or (e.kind == "h2d" and e.tensor == "layer1_0_bn1"))
    assert trip > 20 * conv_us
    # line 3: the layout transforms cost a large share of the Cube kernels, most kernels are shorter than a launch
    ks = after.kernels()
    cube = sum(e.dur_us for e in ks if e.main)
    transforms = sum(e.dur_us for e in ks if e.name.endswith(("nchw_to_nc1hwc0", "nhwc_to_nchw")))
    assert transforms > 0.3 * cube
    assert sum(e.dur_us < after.system.launch_overhead_us for e in ks) > len(ks) / 2
    # line 1: the best conv is staged: its first Mmad waits only for the first K piece of its weights and bands
    best = max((e for e in ks if e.main and e.node != "fc"), key=lambda e: e.profile.chip_mac_utilization)
    first = min(r[2] for r in best.profile.raw_records if r[4] == "mmad")
    assert 0 < first / best.profile.total_cycles < 0.1
