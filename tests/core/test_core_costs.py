"""The cost functions of npusim.costs against their documented formulas (written out in core_helpers)."""

import pytest
from hypothesis import given, strategies as st

import npusim as ns
from npusim import costs

from core_helpers import FAST, hand_burst_align, hand_cube, hand_gm, hand_onchip, hand_reduce, hand_vector

pytestmark = pytest.mark.core

configs = st.sampled_from([ns.a2, ns.classic])
rates = st.sampled_from([64.0, 48.0, 32.0, 17.5])


@FAST
@given(cfg=configs, first=st.integers(0, 4096), count=st.integers(0, 300), nbytes=st.integers(1, 3000),
       gap=st.integers(0, 2000), rate=rates)
def test_gm_dma_uniform_equals_the_per_burst_sum(cfg, first, count, nbytes, gap, rate):
    stride = nbytes + gap
    bursts = [(first + i * stride, nbytes) for i in range(count)]
    loop = costs.gm_dma_cycles(cfg, bursts, rate)
    assert loop == pytest.approx(hand_gm(cfg, bursts, rate))
    assert costs.gm_dma_cycles_uniform(cfg, first, count, nbytes, stride, rate) == pytest.approx(loop)


@pytest.mark.parametrize("nbytes,align", [(1, 32), (32, 32), (33, 64), (100, 128), (256, 256), (257, 512),
                                          (512, 512), (4096, 512)])
def test_burst_alignment_rule(nbytes, align):
    assert hand_burst_align(ns.a2, nbytes) == align
    # a burst at an address aligned to exactly that runs at full rate; half of it does not
    full = ns.a2.gm_burst_overhead_cycles + -(-nbytes // 32) * 32 / 64
    assert costs.gm_burst_cycles(ns.a2, 512 * 7 + align, nbytes, 64.0) == pytest.approx(full)
    if align > 32:
        slow = costs.gm_burst_cycles(ns.a2, 512 * 7 + align // 2, nbytes, 64.0)
        assert slow == pytest.approx(ns.a2.gm_burst_overhead_cycles + -(-nbytes // 32) * 32 / (64 * 0.7))


def test_gm_dma_with_no_bursts_costs_the_startup():
    assert costs.gm_dma_cycles_uniform(ns.a2, 0, 0, 64, 64, 64.0) == ns.a2.gm_startup_cycles
    assert costs.gm_dma_cycles(ns.a2, [], 64.0) == ns.a2.gm_startup_cycles


@FAST
@given(cfg=configs, count=st.integers(1, 100000), isz=st.sampled_from([1, 2, 4]), complex_op=st.booleans())
def test_vector_and_reduce_cycles(cfg, count, isz, complex_op):
    assert costs.vector_cycles(cfg, count, isz, complex_op) == hand_vector(cfg, count, isz, complex_op)
    assert costs.reduce_cycles(cfg, count, isz) == hand_reduce(cfg, count, isz)


def test_reduce_cycles_by_hand():
    # 1000 fp32 = 4000 B = 16 repeats: 4 + 16 + log2(16) + log2(64 lanes) = 4 + 16 + 4 + 6
    assert costs.reduce_cycles(ns.a2, 1000, 4) == 30
    # 64 fp16 = 128 B = one repeat: no tree, 128 lanes fold in 7 steps
    assert costs.reduce_cycles(ns.a2, 64, 2) == 4 + 1 + 0 + 7


@FAST
@given(m=st.integers(1, 600), n=st.integers(1, 600), k=st.integers(1, 600),
       dtype=st.sampled_from(["float16", "bfloat16", "int8", "float32"]))
def test_cube_cycles_pad_to_whole_fractals(m, n, k, dtype):
    assert costs.cube_cycles(ns.a2, m, n, k, dtype) == pytest.approx(hand_cube(ns.a2, m, n, k, dtype))


def test_cube_cycles_by_hand():
    # 16x16x16 fp16 is one cycle of the Cube; 17 rows pad to 32
    assert costs.cube_cycles(ns.a2, 16, 16, 16, "float16") == ns.a2.cube_startup_cycles + 1
    assert costs.cube_cycles(ns.a2, 17, 16, 16, "float16") == ns.a2.cube_startup_cycles + 2
    # int8: K0 = 32 and twice the MACs; fp32: K0 = 8 at a quarter of the rate
    assert costs.cube_cycles(ns.a2, 16, 16, 32, "int8") == ns.a2.cube_startup_cycles + 1
    assert costs.cube_cycles(ns.a2, 16, 16, 8, "float32") == ns.a2.cube_startup_cycles + 2


@FAST
@given(nbytes=st.integers(1, 1 << 20), rate=st.sampled_from([512, 256, 128]))
def test_onchip_cycles(nbytes, rate):
    assert costs.onchip_cycles(ns.a2, nbytes, rate) == pytest.approx(hand_onchip(ns.a2, nbytes, rate))


def test_scalar_costs_come_from_the_config():
    cfg = ns.a2.replace(scalar_issue_cycles=3, scalar_access_cycles=20)
    assert costs.scalar_issue_cycles(cfg) == 3
    assert costs.scalar_access_cycles(cfg) == 20
