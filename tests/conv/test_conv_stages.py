"""The four ResNet stages (56x56x64 ... 7x7x512, 3x3, pad 1, batch 1, fp16): the variants rise in order on
every stage, and each default tiling is close to the best legal one a sweep finds."""

import numpy as np
import pytest

import npusim as ns
import npusim.conv as conv
from npusim.bench.chip import RESNET_STAGES
from npusim.conv.geometry import ConvGeometry
from npusim.conv.sweep import candidates, sweep

pytestmark = pytest.mark.conv


def _layer(hw, c, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float16)
    w = (rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float16)
    return x, w


@pytest.mark.parametrize("hw,c", RESNET_STAGES, ids=[f"{h}x{h}x{c}" for h, c in RESNET_STAGES])
def test_direct_reuse_layout_img2col_rise_on_every_stage(hw, c):
    x, w = _layer(hw, c)
    util = [conv.conv2d(x, w, padding=1, variant=v).profile.mac_utilization for v in conv.VARIANTS]
    assert util == sorted(util) and util[0] < util[-1], dict(zip(conv.VARIANTS, util))


SMALL_GRIDS = {   # around the defaults, a few values per size (the full grid is npusim.conv.sweep.GRID)
    "img2col": {"rows": (2, 7, 14), "m_tile": (64, 128), "k_tile": (64, 128), "cout_block": (128, 0),
                "cin_block": (0,), "weights_resident": (False,), "l1_buffers": (2,)},
    "layout": {"rows": (4, 7, 14), "cols": (0,), "cout_block": (64, 128), "cin_block": (0, 128),
               "weights_resident": (False,), "l1_buffers": (1, 2)},
}


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(SMALL_GRIDS))
def test_the_default_tiling_is_within_10_percent_of_the_best_of_a_sweep(variant):
    x, w = _layer(14, 256)
    g = ConvGeometry.of(x.shape, w.shape, 1, 1, 1, x.dtype, None)
    cands = candidates(g, ns.a2, variant, SMALL_GRIDS[variant])
    default = conv.choose_tiling(g, ns.a2, variant)
    assert default in cands and len(cands) >= 4
    trials = sweep(x, w, cands, padding=1)
    best = trials[0]
    mine = next(t for t in trials if t.tiling == default)
    assert mine.time_us <= 1.10 * best.time_us, (default.short(), best.tiling.short(), mine.time_us, best.time_us)
    assert trials == sorted(trials, key=lambda t: t.time_us)
