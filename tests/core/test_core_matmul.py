"""The reference matmul as Ascend tiles it: every tiling feature against numpy on odd shapes, the host
tiling legal for any shape, never faster than the roofline; and the interleaving of a launch's blocks."""

import itertools
import threading

import numpy as np
import pytest
from hypothesis import given, strategies as st

import npusim as ns
from npusim import ops
from npusim.kernels.matmul import MatmulTiling, run_matmul
from npusim.kernels.matmul_tiling import choose_matmul_tiling

from core_helpers import FAST

pytestmark = pytest.mark.core

SHAPES = [(1, 1, 1), (16, 16, 16), (100, 70, 130), (257, 129, 300), (33, 513, 200), (64, 96, 512)]
TILINGS = [
    MatmulTiling(64, 32, 32, 2, step_ka=2, step_kb=3),
    MatmulTiling(32, 32, 32, 2, step_n=2),
    MatmulTiling(32, 64, 32, 2, step_ka=4, step_kb=2, step_n=2, depth_a1=8),                 # A kept in L1
    MatmulTiling(32, 32, 16, 2, step_ka=2, step_kb=2, step_n=2, single_core_m=64, single_core_n=128,
                 stagger_k=True),
    MatmulTiling(128, 128, 64, 2, step_ka=4, step_kb=4, step_n=2, l0c_buffers=2),
    MatmulTiling(128, 256, 64, 2, step_ka=8, step_kb=4, l0c_buffers=1, single_core_m=128, single_core_n=256,
                 stagger_k=True),
]


def _ints(rng, shape, dt=np.float16):
    return rng.integers(-3, 4, shape).astype(dt)   # small integers: every sum is exact in fp32


@pytest.mark.parametrize("t", TILINGS, ids=lambda t: t.short())
def test_every_tiling_feature_matches_numpy_on_odd_shapes(t):
    rng = np.random.default_rng(1)
    for (m, k, n), (config, block_dim) in itertools.product(SHAPES, (("a2", 3), ("classic", 2))):
        a, b = _ints(rng, (m, k)), _ints(rng, (k, n))
        r = run_matmul(a, b, tiling=t, block_dim=block_dim, config=config)
        np.testing.assert_array_equal(r["c"], a.astype(np.float32) @ b.astype(np.float32),
                                      err_msg=f"{m}x{k}x{n} {t.short()} {config}")


@FAST
@given(m=st.integers(1, 700), n=st.integers(1, 700), k=st.integers(1, 1500),
       dtype=st.sampled_from(["float16", "int8"]), cores=st.sampled_from([1, 3, 24]))
def test_the_host_tiling_is_legal_for_every_shape(m, n, k, dtype, cores):
    cfg = ns.a2.replace(name=f"a2-{cores}", num_cores=cores)
    t, block_dim = choose_matmul_tiling(m, n, k, dtype, cfg, b_packed=dtype == "int8")
    t.check(cfg, np.dtype(dtype), np.float32, k)
    assert 1 <= block_dim <= cores and block_dim == min(cores, len(t.regions(m, n)))
    covered = sum(rm * rn for _, rm, _, rn, _ in t.regions(m, n))
    assert covered == m * n   # the regions tile C exactly once


@pytest.mark.parametrize("m,k,n", [(100, 70, 130), (300, 513, 17), (64, 2048, 64)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8"])
def test_ops_matmul_on_odd_shapes(m, k, n, dtype):
    import ml_dtypes

    rng = np.random.default_rng(m)
    dt = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "int8": np.int8}[dtype]
    a, b = _ints(rng, (m, k), dt), _ints(rng, (k, n), dt)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if dtype == "int8":
        scale = np.full(n, 0.5, np.float32)
        r = ops.call("matmul", a, b, scale)
        np.testing.assert_allclose(r.out.astype(np.float64), (ref * 0.5).astype(np.float16), rtol=1e-3)
    else:
        r = ops.call("matmul", a, b)
        np.testing.assert_array_equal(r.out, ref.astype(np.float32))
    p = r.profile
    assert p.total_cycles >= p.roofline_cycles * (1 - 1e-9)
    assert p.mac_utilization <= 1


def test_chip_matmul_uses_l2_and_stays_above_its_roofline():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((512, 512)).astype(np.float16), rng.standard_normal((512, 512)).astype(np.float16)
    r = ops.call("matmul", a, b)
    p = r.profile
    assert r.tiling.block_dim > 1
    np.testing.assert_allclose(r.out, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-2)
    assert p.l2_hit_rate > 0.5                                   # A and B lines are fetched once
    assert p.hbm_read_bytes <= (a.nbytes + b.nbytes) * 1.05
    assert p.total_cycles >= p.roofline_cycles * (1 - 1e-9)
    assert all(bw["efficiency"] <= 1 + 1e-9 for bw in p.bandwidth.values())


def test_a_single_core_keeps_a_in_l1_across_n():
    t, block_dim = choose_matmul_tiling(1024, 1024, 1024, "float16", ns.a2.replace(name="a2-1", num_cores=1))
    assert block_dim == 1 and t.a_resident(1024)


# --- interleaving the blocks of a launch ---------------------------------------------------------------
def test_interleaved_launches_are_deterministic():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((384, 256)).astype(np.float16), rng.standard_normal((256, 384)).astype(np.float16)
    t = MatmulTiling(128, 128, 64, 2, single_core_m=128, single_core_n=128, stagger_k=True)
    runs = [run_matmul(a, b, tiling=t, block_dim=9).profile for _ in range(2)]
    assert runs[0].total_cycles == runs[1].total_cycles
    assert runs[0].block_end_cycles == runs[1].block_end_cycles
    assert runs[0].raw_records == runs[1].raw_records


@ns.kernel
def fails_in_block_3(x, n):
    pipe = ns.TPipe()
    b = ns.TBuf()
    pipe.init_buffer(b, n * 2)
    ns.data_copy(b.get(ns.float16), x[ns.get_block_idx() * n:], n)
    if ns.get_block_idx() == 3:
        ns.data_copy(b.get(ns.float16), x[10 * n:], n)   # past the end


def test_an_error_in_one_block_reaches_the_caller_and_no_thread_is_left():
    before = threading.active_count()
    with pytest.raises(ns.OutOfBoundsError, match="GM out of bounds"):
        ns.launch(fails_in_block_3, 6, np.zeros(6 * 256, np.float16), 256)
    assert threading.active_count() == before
    assert ns.launch(fails_in_block_3, 3, np.zeros(3 * 256, np.float16), 256).profile.block_dim == 3
