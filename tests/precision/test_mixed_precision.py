"""npusim.kernels.mixed_precision (lab 05's kernels). The checks of lab 05 are tested by their wrong-solution
corpus, tests/labs/labcorpus/lab05.py."""

from __future__ import annotations

import numpy as np

from npusim.kernels.matmul import MatmulTiling
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npusim as ns
from npusim.kernels import mixed_precision as mp
from npusim.precision import double_thousandth

pytestmark = pytest.mark.lab05

FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None,
                max_examples=12)


def fp16_accumulation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The documented model, written independently: exact sums of 16-element K blocks, each rounded to fp16
    and added in order with fp16 rounding (where the K loop is split between Mmads does not matter)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    k = a.shape[1]
    out = None
    for k0 in range(0, k, 16):
        part = (a64[:, k0:k0 + 16] @ b64[k0:k0 + 16]).astype(np.float16)
        out = part if out is None else (out + part).astype(np.float16)
    return out


@FAST
@given(m=st.integers(1, 70), k=st.integers(1, 300), n=st.integers(1, 70), seed=st.integers(0, 1000))
def test_gemm_fp16_accumulator_matches_the_model(m, k, n, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    res = mp.run_gemm(a, b, acc_dtype="float16", tiling=MatmulTiling(32, 32, 48, 2))
    assert res["c"].dtype == np.float16
    np.testing.assert_array_equal(res["c"], fp16_accumulation(a, b))


@FAST
@given(m=st.integers(1, 70), k=st.integers(1, 300), n=st.integers(1, 70), seed=st.integers(0, 1000),
       dtype=st.sampled_from([np.float16, np.float32]), relu=st.booleans())
def test_gemm_fp32_accumulator(m, k, n, seed, dtype, relu):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    res = mp.run_gemm(a, b, acc_dtype="float32", out_dtype=np.float32, relu=relu)
    want = a.astype(np.float64) @ b.astype(np.float64)
    if relu:
        want = np.maximum(want, 0)
    np.testing.assert_allclose(res["c"], want, rtol=1e-5, atol=1e-5 * np.sqrt(k))
    assert res.profile.cube_dtype == np.dtype(dtype).name


def test_a2_refuses_an_fp16_accumulator_and_fp32_operands_need_fp32():
    a = np.ones((16, 16), np.float16)
    with pytest.raises(ns.DtypeError):
        mp.run_gemm(a, a, acc_dtype="float16", config=ns.a2)
    a32 = np.ones((16, 16), np.float32)
    with pytest.raises(ns.DtypeError):
        mp.run_gemm(a32, a32, acc_dtype="float16")
    with pytest.raises(ns.UsageError):
        mp.run_gemm(a, a32)


def test_fp32_operands_cost_four_times_the_cube():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 512))
    b = rng.standard_normal((512, 64))
    t16 = mp.run_gemm(a.astype(np.float16), b.astype(np.float16)).profile
    t32 = mp.run_gemm(a.astype(np.float32), b.astype(np.float32)).profile
    assert t32.cube_ideal_cycles == pytest.approx(4 * t16.cube_ideal_cycles)
    assert t32.time_us > 1.5 * t16.time_us


@pytest.mark.parametrize("shape,cout,relu", [((1, 16, 8, 8), 16, True), ((2, 5, 7, 9), 12, False),
                                             ((1, 32, 5, 6), 8, True)])
def test_conv_layer(shape, cout, relu):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float16)
    w = rng.standard_normal((cout, shape[1], 3, 3)).astype(np.float16)
    res = mp.conv_layer(x, w, out_dtype=np.float32, relu=relu)
    want = mp.conv_reference(x, w, relu=relu)
    assert res.output.shape == want.shape == (shape[0], cout, shape[2], shape[3])
    np.testing.assert_allclose(res.output, want, rtol=1e-5, atol=1e-4)
    assert res["y"] is res.output
    y16 = mp.conv_layer(x, w, relu=relu).output
    assert y16.dtype == np.float16 and double_thousandth(y16, want).passed


def test_fp16_accumulation_error_grows_with_k():
    rng = np.random.default_rng(1)
    errs = []
    for k in (16, 256, 4096):
        a = rng.standard_normal((32, k)).astype(np.float16)
        b = rng.standard_normal((k, 32)).astype(np.float16)
        exact = a.astype(np.float64) @ b.astype(np.float64)
        errs.append(np.linalg.norm(mp.run_gemm(a, b, acc_dtype="float16")["c"] - exact) / np.linalg.norm(exact))
    assert errs[0] < errs[1] < errs[2]
    assert errs[2] / errs[0] > 5          # about sqrt(4096 / 16) = 16, minus the output rounding


def test_vector_kernels():
    x = np.linspace(-1, 1, 4096)
    for dt in (np.float16, np.float32):
        xs = x.astype(dt)
        y = ns.launch(mp.polynomial, 1, xs, np.zeros_like(xs), xs.size, 3, 1024)["y"]
        p = ((0.5 * x + 0.5) * x + 0.5) * x + 0.5
        np.testing.assert_allclose(y, p, rtol=0, atol=4e-3 if dt == np.float16 else 1e-6)
    fast = ns.launch(mp.polynomial, 1, x.astype(np.float16), np.zeros(4096, np.float16), 4096).profile
    slow = ns.launch(mp.polynomial, 1, x.astype(np.float32), np.zeros(4096, np.float32), 4096).profile
    assert slow.pipe_busy_cycles["vec"] > 1.8 * fast.pipe_busy_cycles["vec"]
    g = np.array([1e-9, -3e-8, 1e-3, 70000.0] + [0.0] * 12, np.float32)    # 16 elements: whole 32 B blocks
    out = ns.launch(mp.scale_to_half, 1, g, np.zeros(16, np.float16), 16, 1.0)["g16"]
    assert out[0] == 0 and out[2] == np.float16(1e-3) and np.isinf(out[3])
    out = ns.launch(mp.scale_to_half, 1, g, np.zeros(16, np.float16), 16, 2.0 ** 16)["g16"]
    assert out[0] == np.float16(1e-9 * 2 ** 16) and out[1] == np.float16(-3e-8 * 2 ** 16)
    odd = np.linspace(-2, 2, 37).astype(np.float32)                           # a tail: DataCopyPad
    out = ns.launch(mp.scale_to_half, 1, odd, np.zeros(37, np.float16), 37, 4.0, 16)["g16"]
    np.testing.assert_array_equal(out, (odd * 4).astype(np.float16))
