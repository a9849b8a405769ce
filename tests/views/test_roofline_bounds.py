"""The roofline bounds: no launch plots above its own roof (``Profile.attainable_flops``), and no own roof is
above the lines the chart draws (the "all ports" slope and the compute roofs). Launches: the labs' reference
kernels on the settings the labs use (aliased and distinct inputs, L2 hits, several cores, both presets),
and a random sample of kernels and tilings."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npusim.kernels.matmul import MatmulTiling, run_matmul
from npusim.kernels.softmax import run_softmax
from npusim.kernels.vector_add import run_vector_add
from npusim.views import charts
from npusim.views.roofline_chart import memory_roofs, roofs

pytestmark = pytest.mark.views
RNG = np.random.default_rng(7)


def _f16(*shape):
    return RNG.standard_normal(shape).astype(np.float16)


def drawn_bound(fig, i: int) -> float:
    """The FLOP/s the chart's lines allow at point ``i``'s intensity: the lowest of the highest compute roof
    and the "all ports" slope, read back from the drawn lines."""
    ax = fig.axes[0]
    (pt,) = [ln for ln in ax.lines if ln.get_gid() == f"point|{i}"]
    x = pt.get_xdata()[0]
    slope = max(ln.get_ydata()[0] / ln.get_xdata()[0] for ln in ax.lines if (ln.get_gid() or "").startswith("gm|"))
    top = max(ln.get_ydata()[-1] for ln in ax.lines if (ln.get_gid() or "").startswith("roof|"))
    return min(top, slope * x)


def assert_bounded(profiles) -> None:
    fig = charts.roofline(profiles)
    for i, p in enumerate(profiles):
        assert p.achieved_flops <= p.attainable_flops * (1 + 1e-9), (i, p.kernel, p.roofline_efficiency)
        assert p.attainable_flops <= drawn_bound(fig, i) * (1 + 1e-9), (i, p.kernel)
        (pt,) = [ln for ln in fig.axes[0].lines if ln.get_gid() == f"point|{i}"]
        (own,) = [ln for ln in fig.axes[0].lines if ln.get_gid() == f"own_roof|{i}"]
        assert own.get_ydata()[0] == pytest.approx(p.attainable_flops) and pt.get_ydata()[0] <= own.get_ydata()[0]


def lab_launches():
    """What the labs plot or explore: lab 00's three points, lab 01's tiles and cores (aliased inputs hit
    L2), lab 02's softmax, lab 03's tilings, on a2 and classic."""
    x, y = _f16(1 << 16), _f16(1 << 16)
    a, b = _f16(256, 256), _f16(256, 512)
    out = [run_vector_add(x, y, tile=8192).profile, run_vector_add(x, x, tile=8192).profile,
           run_vector_add(x, y, tile=512, buffer_num=1).profile, run_vector_add(x, y, tile=4096, block_dim=8).profile,
           run_vector_add(x, x, tile=2048, block_dim=24).profile, run_vector_add(x, y, tile=8192, config="classic").profile,
           run_softmax(_f16(16, 1024), tile=1024).profile,
           run_matmul(a, a, tiling=MatmulTiling(128, 128, 64, 2)).profile,
           run_matmul(a, b, tiling=MatmulTiling(256, 64, 64, 2, step_n=2, depth_a1=4), out_dtype=np.float16).profile,
           run_matmul(a, a, tiling=MatmulTiling(64, 64, 64, 2), block_dim=4).profile,
           run_matmul(a, a, tiling=MatmulTiling(64, 64, 64, 2), config="classic").profile]
    return out


def test_no_lab_launch_is_above_its_roof():
    launches = lab_launches()
    assert_bounded(launches[:6])         # vector kernels together (one chart: the chart's lines are shared)
    assert_bounded(launches[6:10])       # softmax and the a2 matmuls
    assert_bounded(launches[10:])        # classic


def test_lab_00_shows_a_compute_bound_and_a_memory_bound_point():
    x, y = _f16(1 << 18), _f16(1 << 18)
    a, b = _f16(512, 512), _f16(512, 1024)
    add = run_vector_add(x, y, tile=8192).profile
    big = run_matmul(a, b, tiling=MatmulTiling(256, 64, 64, 2, step_n=2, depth_a1=8), out_dtype=np.float16).profile
    assert add.bound == "memory" and big.bound == "compute"
    assert_bounded([add, big])


def test_memory_roofs_are_the_cost_models_rates():
    from npusim.config import get_config

    cfg = get_config("a2")
    clock = cfg.clock_ghz * 1e9
    one = {k: r for k, _, r in memory_roofs(cfg, 1)}
    assert one["HBM"] == pytest.approx(cfg.gm_port_bytes_per_cycle * clock)
    assert one["L2"] == pytest.approx(cfg.l2_bytes_per_cycle * clock)
    assert one["all ports"] == pytest.approx((cfg.l2_bytes_per_cycle + cfg.gm_port_bytes_per_cycle) * clock)
    chip = {k: r for k, _, r in memory_roofs(cfg, 24)}
    assert chip["HBM"] == pytest.approx(cfg.hbm_gb_per_s * 1e9)          # 24 ports exceed the chip's HBM
    assert [n for n, _ in roofs(cfg, 1, ["int8"])] == ["Cube fp16", "Cube fp32", "Cube int8", "Vector fp16"]


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["add", "add_alias", "softmax", "matmul"]), tile=st.sampled_from([256, 1024, 4096]),
       buffers=st.sampled_from([1, 2]), cores=st.sampled_from([1, 2, 8]),
       base=st.sampled_from([(64, 64, 64), (128, 64, 32), (32, 128, 64), (128, 128, 64)]),
       preset=st.sampled_from(["a2", "classic"]))
def test_random_kernels_and_tilings_stay_under_their_roofs(kind, tile, buffers, cores, base, preset):
    if kind.startswith("add"):
        x = _f16(1 << 14)
        p = run_vector_add(x, x if kind == "add_alias" else _f16(1 << 14), tile=tile, buffer_num=buffers,
                           block_dim=cores, config=preset).profile
    elif kind == "softmax":
        p = run_softmax(_f16(8, 1024), tile=min(tile, 1024), buffer_num=buffers, block_dim=cores, config=preset).profile
    else:
        p = run_matmul(_f16(128, 128), _f16(128, 256), tiling=MatmulTiling(*base, buffers), block_dim=cores,
                       config=preset).profile
    assert_bounded([p])
