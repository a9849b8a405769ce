"""The reference kernels (vector_add, softmax, matmul) against numpy; the roofline invariant on generated
launches; determinism."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import npusim as ns
from npusim.kernels.matmul import MatmulTiling, run_matmul
from npusim.kernels.softmax import run_softmax
from npusim.kernels.vector_add import block_range, run_vector_add

from core_helpers import BF16, FAST, assert_bits_equal, ints_as, rand

pytestmark = pytest.mark.core

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)


# ---------------------------------------------------------------------------------------------------------
# vector_add
# ---------------------------------------------------------------------------------------------------------
@FAST
@given(dtype=st.sampled_from([F16, F32, np.dtype(np.int32)]), total=st.integers(1, 40000),
       tile=st.sampled_from([256, 1000, 2048, 4096]), buffer_num=st.integers(1, 2), block_dim=st.integers(1, 9),
       seed=st.integers(0, 2**16))
def test_vector_add_matches_numpy(dtype, total, tile, buffer_num, block_dim, seed):
    rng = np.random.default_rng(seed)
    x, y = rand(rng, total, dtype, -1000, 1000), rand(rng, total, dtype, -1000, 1000)
    res = run_vector_add(x, y, tile=tile, buffer_num=buffer_num, block_dim=block_dim)
    assert_bits_equal(res["z"], x + y, "z")
    p = res.profile
    isz = dtype.itemsize
    assert p.path_bytes["GM->UB"] == 2 * total * isz and p.path_bytes["UB->GM"] == total * isz
    assert p.vector_ops == total


@FAST
@given(total=st.integers(1, 100000), blocks=st.integers(1, 64), isz=st.sampled_from([1, 2, 4]))
def test_vector_add_block_range_covers_everything_once(total, blocks, isz):
    parts = [block_range(total, isz, b, blocks) for b in range(blocks)]
    covered = np.zeros(total, np.int32)
    for start, length in parts:
        covered[start:start + length] += 1
        if length:
            assert (start * isz) % 32 == 0  # every block's part starts on a DMA boundary
    np.testing.assert_array_equal(covered, 1)


def test_vector_add_with_more_blocks_than_cores_runs_in_waves():
    x = (np.arange(33 * 4096) % 100).astype(np.float16)
    res = run_vector_add(x, x, tile=4096, block_dim=33, config="classic")  # 32 cores
    np.testing.assert_array_equal(res["z"], x + x)
    ends = res.profile.block_end_cycles
    assert res.profile.active_cores == 32
    assert res.profile.total_cycles == pytest.approx(max(*ends, res.profile.hbm_drain_cycles))
    assert ends[32] > ends[0]  # block 32 ran after block 0 on core 0


# ---------------------------------------------------------------------------------------------------------
# softmax
# ---------------------------------------------------------------------------------------------------------
def softmax_ref(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@FAST
@given(dtype=st.sampled_from([F16, F32]), rows=st.integers(1, 6), cols=st.integers(1, 3000),
       tile=st.sampled_from([64, 256, 1000, 4096]), buffer_num=st.integers(1, 2), block_dim=st.integers(1, 4),
       scale=st.sampled_from([1.0, 8.0]), seed=st.integers(0, 2**16))
def test_softmax_matches_numpy(dtype, rows, cols, tile, buffer_num, block_dim, scale, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * scale).astype(dtype)
    res = run_softmax(x, tile=tile, buffer_num=buffer_num, block_dim=block_dim)
    y = res["y"]
    assert y.dtype == dtype
    ref = softmax_ref(x)
    if dtype == F16:  # computed in fp32, rounded once to fp16
        np.testing.assert_allclose(y.astype(np.float64), ref, rtol=1e-3, atol=6e-8)
    else:
        np.testing.assert_allclose(y, ref, rtol=2e-5, atol=1e-9)
    np.testing.assert_allclose(y.astype(np.float64).sum(axis=1), 1.0, rtol=2e-3 if dtype == F16 else 1e-5)


@pytest.mark.parametrize("dtype", [F16, F32])
def test_softmax_long_rows_take_the_online_two_pass_path(dtype):
    """A row of 5000 with 512-element tiles: pass 1 keeps a running max and rescaled sum, pass 2 writes;
    the row is read twice from GM."""
    rng = np.random.default_rng(7)
    rows, cols, tile = 3, 5000, 512
    x = (rng.standard_normal((rows, cols)) * 4).astype(dtype)
    x[1, 4321] = 30  # the maximum arrives late: the running sum must be rescaled
    res = run_softmax(x, tile=tile, block_dim=2)
    tol = dict(rtol=1e-3, atol=6e-8) if dtype == F16 else dict(rtol=2e-5, atol=1e-9)
    np.testing.assert_allclose(res["y"].astype(np.float64), softmax_ref(x), **tol)
    isz = dtype.itemsize
    assert res.profile.path_bytes["GM->UB"] == 2 * rows * cols * isz  # two passes over every row
    assert res.profile.path_bytes["UB->GM"] == rows * cols * isz
    short = run_softmax(x[:, :tile], tile=tile)  # a row that fits is read once
    assert short.profile.path_bytes["GM->UB"] == rows * tile * isz


@pytest.mark.parametrize("dtype", [F16, F32])
@pytest.mark.parametrize("cols, tile", [(600, 256), (100, 256), (3000, 1024)])
def test_softmax_masked_rows_follow_torch(dtype, cols, tile):
    """Attention masks: a row whose first chunks are all -inf is exact; a row that is -inf everywhere is NaN,
    as torch.softmax gives (the convention the kernel documents)."""
    torch = pytest.importorskip("torch")
    x = (np.random.default_rng(3).standard_normal((4, cols)) * 5).astype(dtype)
    x[0, :min(2 * tile, cols - 1)] = -np.inf    # masked first chunk(s), finite values after
    x[1, :] = -np.inf                           # fully masked
    x[2, ::3] = -np.inf
    y = run_softmax(x, tile=tile)["y"].astype(np.float64)
    want = torch.softmax(torch.tensor(x.astype(np.float64)), dim=1).numpy()
    assert np.isnan(y[1]).all() and np.isnan(want[1]).all()
    tol = dict(rtol=1e-3, atol=6e-8) if dtype == F16 else dict(rtol=2e-5, atol=1e-9)
    np.testing.assert_allclose(y[[0, 2, 3]], want[[0, 2, 3]], **tol)


def test_softmax_large_inputs_do_not_overflow():
    x = np.array([[1000.0, 999.0, -1000.0] * 100], np.float32)
    y = run_softmax(x, tile=64)["y"]
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, softmax_ref(x), rtol=2e-5, atol=1e-30)


# ---------------------------------------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------------------------------------
tilings = st.builds(MatmulTiling, base_m=st.sampled_from([16, 32, 48, 64]), base_n=st.sampled_from([16, 32, 64]),
                    base_k=st.sampled_from([16, 32, 64]), buffer_num=st.integers(1, 2))


@FAST
@given(m=st.integers(1, 100), n=st.integers(1, 100), k=st.integers(1, 130), tiling=tilings,
       block_dim=st.integers(1, 5), config=st.sampled_from(["a2", "classic"]),
       out=st.sampled_from(["float32", "float16"]), seed=st.integers(0, 2**16))
def test_matmul_exact_on_integer_data(m, n, k, tiling, block_dim, config, out, seed):
    rng = np.random.default_rng(seed)
    a, b = ints_as(rng, (m, k), F16, -3, 3), ints_as(rng, (k, n), F16, -3, 3)
    res = run_matmul(a, b, out_dtype=np.dtype(out), tiling=tiling, block_dim=block_dim, config=config)
    exact = a.astype(np.int64) @ b.astype(np.int64)  # |c| <= 9 * 130: exact in fp16 and fp32
    np.testing.assert_array_equal(res["c"], exact.astype(out))
    assert res.profile.cube_macs == m * n * k


@FAST
@given(m=st.integers(1, 90), n=st.integers(1, 90), k=st.integers(1, 200), tiling=tilings,
       block_dim=st.integers(1, 4), config=st.sampled_from(["a2", "classic"]),
       dtype=st.sampled_from(["float16", "bfloat16"]), seed=st.integers(0, 2**16))
def test_matmul_random_data(m, n, k, tiling, block_dim, config, dtype, seed):
    if dtype == "bfloat16" and config == "classic":
        return  # no bf16 on the 910 Cube: see test_matmul_bf16_on_classic_is_a_dtype_error
    dt = BF16 if dtype == "bfloat16" else F16
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((k, n)).astype(dt)
    res = run_matmul(a, b, tiling=tiling, block_dim=block_dim, config=config)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    # fp32 accumulation: each K tile is rounded once, then added in fp32
    np.testing.assert_allclose(res["c"], exact, rtol=1e-5, atol=1e-5 * np.sqrt(k))


def test_matmul_rejects_int8_with_a_clear_message():
    # the reference matmul transposes B per 16x16 fractal (16-bit types only); int8 runs in conv2d
    a = np.ones((40, 70), np.int8)
    with pytest.raises(ns.UsageError, match="16-bit"):
        run_matmul(a, a.T.copy(), out_dtype=np.int32)


def test_matmul_bf16_on_classic_is_a_dtype_error():
    a = np.ones((16, 16), BF16)
    with pytest.raises(ns.DtypeError, match="bfloat16"):
        run_matmul(a, a, config="classic")


def test_matmul_rejects_tilings_that_do_not_fit():
    a = np.ones((16, 16), np.float16)
    with pytest.raises(ns.CapacityError, match="L0A"):
        run_matmul(a, a, tiling=MatmulTiling(256, 64, 128, 2))


def test_matmul_distributes_tiles_over_blocks():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((130, 70)).astype(np.float16)
    b = rng.standard_normal((70, 100)).astype(np.float16)
    one = run_matmul(a, b, tiling=MatmulTiling(32, 32, 32, 2), block_dim=1)
    many = run_matmul(a, b, tiling=MatmulTiling(32, 32, 32, 2), block_dim=6)
    np.testing.assert_array_equal(one["c"], many["c"])
    assert many.profile.cube_macs == one.profile.cube_macs == 130 * 70 * 100
    assert many.profile.total_cycles < one.profile.total_cycles
    assert len(set(r[0] for r in many.profile.raw_records)) == 6  # every block did work


# ---------------------------------------------------------------------------------------------------------
# the roofline invariant, on generated launches
# ---------------------------------------------------------------------------------------------------------
configs = st.sampled_from([ns.a2, ns.classic, ns.a2.replace(name="a2-2core", num_cores=2),
                           ns.classic.replace(name="classic-3core", num_cores=3),
                           ns.a2.replace(name="a2-slow-gm", hbm_gb_per_s=4 * 24 * 1.8)])


def _assert_roofline(p):
    assert p.total_cycles >= max(p.compute_bound_cycles, p.memory_bound_cycles) * (1 - 1e-9), (
        p.total_cycles, p.compute_bound_cycles, p.memory_bound_cycles)
    assert p.roofline_efficiency <= 1 + 1e-9
    assert 0 <= p.mac_utilization <= 1 + 1e-9
    assert all(0 <= r <= 1 + 1e-9 for r in p.pipe_ratio.values())
    for bw in p.bandwidth.values():
        assert bw["efficiency"] <= 1 + 1e-9


@FAST
@given(kind=st.sampled_from(["vector_add", "softmax", "matmul"]), config=configs, block_dim=st.integers(1, 7),
       buffer_num=st.integers(1, 2), data=st.data())
def test_roofline_invariant(kind, config, block_dim, buffer_num, data):
    rng = np.random.default_rng(0)
    if kind == "vector_add":
        dtype = data.draw(st.sampled_from([F16, F32]), label="dtype")
        total = data.draw(st.integers(1, 30000), label="total")
        tile = data.draw(st.sampled_from([128, 512, 2000, 4096, 8192]), label="tile")
        x = rand(rng, total, dtype)
        p = run_vector_add(x, x, tile=tile, buffer_num=buffer_num, block_dim=block_dim, config=config).profile
    elif kind == "softmax":
        dtype = data.draw(st.sampled_from([F16, F32]), label="dtype")
        rows = data.draw(st.integers(1, 5), label="rows")
        cols = data.draw(st.integers(1, 2500), label="cols")
        tile = data.draw(st.sampled_from([64, 500, 4096]), label="tile")
        x = rand(rng, (rows, cols), dtype)
        p = run_softmax(x, tile=tile, buffer_num=buffer_num, block_dim=block_dim, config=config).profile
    else:
        m, n, k = (data.draw(st.integers(1, 150), label=s) for s in "mnk")
        tiling = data.draw(tilings, label="tiling")
        a, b = rand(rng, (m, k), F16), rand(rng, (k, n), F16)
        p = run_matmul(a, b, tiling=tiling, block_dim=block_dim, config=config).profile
    _assert_roofline(p)


def test_roofline_of_a_large_vector_add_is_memory_bound_and_close():
    x = np.ones(1 << 18, np.float16)
    p = run_vector_add(x, x, tile=8192, block_dim=8).profile
    _assert_roofline(p)
    assert p.bound == "memory"
    assert p.roofline_efficiency > 0.5  # double-buffered: MTE2 is busy most of the time


# ---------------------------------------------------------------------------------------------------------
# determinism
# ---------------------------------------------------------------------------------------------------------
def _launches():
    rng = np.random.default_rng(11)
    x = rng.standard_normal(10001).astype(np.float16)
    s = rng.standard_normal((3, 3000)).astype(np.float32)
    a, b = rng.standard_normal((70, 50)).astype(np.float16), rng.standard_normal((50, 90)).astype(np.float16)
    return {
        "vector_add": lambda **kw: run_vector_add(x, x, tile=1024, block_dim=3, **kw),
        "softmax": lambda **kw: run_softmax(s, tile=512, block_dim=2, **kw),
        "matmul": lambda **kw: run_matmul(a, b, tiling=MatmulTiling(32, 32, 32, 2), block_dim=4, **kw),
        "matmul_classic": lambda **kw: run_matmul(a, b, tiling=MatmulTiling(32, 32, 32, 2), block_dim=4,
                                                  config="classic", **kw),
    }


@pytest.mark.parametrize("name", ["vector_add", "softmax", "matmul", "matmul_classic"])
def test_the_same_launch_twice_is_identical(name):
    run = _launches()[name]
    r1, r2 = run(), run()
    p1, p2 = r1.profile, r2.profile
    assert p1.total_cycles == p2.total_cycles
    assert p1.raw_records == p2.raw_records
    assert p1.block_end_cycles == p2.block_end_cycles
    assert p1.pipe_busy_cycles == p2.pipe_busy_cycles
    assert p1.path_bytes == p2.path_bytes
    assert p1.metrics() == p2.metrics()
    assert r1.outputs.keys() == r2.outputs.keys()
    for k in r1.outputs:
        assert_bits_equal(np.ascontiguousarray(r1.outputs[k]), np.ascontiguousarray(r2.outputs[k]), k)


@pytest.mark.parametrize("name", ["vector_add", "softmax", "matmul"])
def test_the_sanitizer_does_not_change_timing_or_results(name):
    run = _launches()[name]
    checked, unchecked = run(), run(sanitize="off")
    assert checked.profile.total_cycles == unchecked.profile.total_cycles
    assert checked.profile.raw_records == unchecked.profile.raw_records
    for k in checked.outputs:
        assert_bits_equal(np.ascontiguousarray(checked.outputs[k]), np.ascontiguousarray(unchecked.outputs[k]), k)


def test_launch_keeps_keyword_arguments_after_skipped_defaults():
    seen = {}

    def k(x, a=1, b=2, c=3):
        seen.update(a=a, b=b, c=c)

    ns.launch(k, 1, np.zeros(8, np.float16), c=30)
    assert seen == {"a": 1, "b": 2, "c": 30}
