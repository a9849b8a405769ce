"""What the text of labs 00-04 says about the numbers next to it, asserted on the reference kernels with the
labs' own inputs (issue 29: a claim in prose is rendered from a cell or asserted by a test). Each test
names the sentence it holds true."""

from __future__ import annotations

import numpy as np
import pytest

import npusim as ns
from npusim import conv
from npusim.kernels.matmul import MatmulTiling, matmul
from npusim.kernels.vector_add import run_vector_add, vector_add

pytestmark = [pytest.mark.labs, pytest.mark.slow]


@pytest.mark.lab00
def test_lab00_an_8kb_copy_spends_about_a_third_of_its_time_starting():
    """Lab 00, after exercise 2: "an 8 KB copy spends about a third of its time starting"."""
    from npusim.checks.lab00_tour import simulated_copy_cycles

    share = ns.a2.gm_startup_cycles / simulated_copy_cycles(ns.a2, 8192)
    assert 0.30 <= share <= 0.37, share


@pytest.mark.lab00
def test_lab00_the_cube_does_64x_the_vector_units_flops():
    """Lab 00, section 2 (printed by its cell; the text says "far slower"): the ratio the cell prints."""
    assert ns.a2.cube_peak_flops("float16") / ns.a2.vector_peak_flops("float16") == pytest.approx(64)


@pytest.mark.lab01
def test_lab01_double_buffering_gains_little_on_an_add():
    """Lab 01, section 3: "The gain is small ... MTE2 is busy most of the time even with one buffer" (the
    exp + add speed-up that follows is printed by its own cell)."""
    x, y = np.random.default_rng(1).random((2, 1 << 17)).astype(np.float16)
    one = run_vector_add(x, y, tile=4096, buffer_num=1).profile
    two = run_vector_add(x, y, tile=4096, buffer_num=2).profile
    assert one.time_us / two.time_us < 1.2 and one.pipe_ratio["mte2"] > 0.85


@pytest.mark.lab01
def test_lab01_speed_up_follows_the_cores_then_each_core_adds_less():
    """Lab 01, after exercise 3: "while each core still gets about its port's rate, the speed-up follows
    the core count; from there on ... the achieved GB/s approach [the HBM bandwidth], and every added core
    adds less"; and the explorer: "every added core adds less achieved GM bandwidth than the one before"."""
    x, y = np.random.default_rng(2).random((2, 1 << 20)).astype(np.float16)
    cores = [1, 2, 4, 8, 12, 16, 24]
    ps = [ns.launch(vector_add, c, x, y, np.zeros_like(x), x.size, 4096, 2).profile for c in cores]
    speed = [ps[0].time_us / p.time_us for p in ps]
    assert speed[cores.index(8)] > 0.9 * 8 and speed[-1] < 0.75 * 24
    gbps = [p.gm_bytes / p.time_us / 1e3 for p in ps]
    per_core = [(b - a) / (cb - ca) for a, b, ca, cb in zip(gbps, gbps[1:], cores, cores[1:])]
    assert all(later < earlier for earlier, later in zip(per_core[3:], per_core[4:])), per_core
    assert gbps[-1] <= ns.a2.hbm_gb_per_s
    xe, ye = np.random.default_rng(3).random((2, 1 << 16)).astype(np.float16)
    dims = [1, 2, 4, 8, 16, 24]
    bw = [(p := ns.launch(vector_add, d, xe, ye, np.zeros_like(xe), xe.size, 4096, 2).profile).gm_bytes
          / p.time_us for d in dims]
    gain = [(b - a) / (db - da) for a, b, da, db in zip(bw, bw[1:], dims, dims[1:])]
    assert all(later < earlier for earlier, later in zip(gain, gain[1:])), gain


@pytest.mark.lab03
def test_lab03_the_longer_k_step_is_faster_and_no_exercise_1_tiling_reaches_the_target():
    """Lab 03, section 4: "the larger K step is faster" (the last two rows of the sweep); section 6: "The
    best tiling of your exercise-1 kernel does not get there" (65 %)."""
    from npusim.checks.lab03_matmul import REUSE_TARGET

    a, b = np.random.default_rng(0).standard_normal((2, 512, 512)).astype(np.float16)
    util = {}
    for s in [(128, 128, 64, 2), (128, 256, 64, 1), (128, 256, 128, 1)]:
        c = np.zeros((512, 512), np.float32)
        util[s] = ns.launch(matmul, 1, a, b, c, 512, 512, 512, MatmulTiling(*s)).profile.mac_utilization
    assert util[(128, 256, 128, 1)] > util[(128, 256, 64, 1)]
    assert max(util.values()) < REUSE_TARGET


@pytest.mark.lab04
def test_lab04_re_reads_hit_the_l2_and_the_transforms_are_a_large_share():
    """Lab 04, section 6: "most of the re-reads of steps a and b hit [the L2]"; "the two transposes take a
    large share of the convolution's own time"."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 64, 56, 56)).astype(np.float16)
    w = (rng.standard_normal((64, 64, 3, 3)) * np.sqrt(2 / (64 * 9))).astype(np.float16)
    res = {v: conv.conv2d(x, w, None, 1, 1, variant=v) for v in ("direct", "reuse", "img2col")}
    assert res["direct"].profile.l2_hit_rate > 0.5 and res["reuse"].profile.l2_hit_rate > 0.5
    f = res["img2col"].figures()
    assert f["total_us"] - f["time_us"] > 0.3 * f["time_us"]
