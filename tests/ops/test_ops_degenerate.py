"""Degenerate shapes at the operator boundary: the mathematically right result (an empty sum is zero, an
empty tensor gives an empty tensor) without a launch, or a clear npusim error; mixed dtypes refused."""

from __future__ import annotations

import numpy as np
import pytest

import npusim as ns
from npusim import ops
from npusim.conv import conv2d
from npusim.kernels.matmul import run_matmul

pytestmark = pytest.mark.ops


@pytest.mark.parametrize("dt", [np.float16, np.int8])
@pytest.mark.parametrize("m,k,n", [(4, 0, 5), (0, 4, 5), (4, 3, 0), (0, 0, 0)])
def test_matmul_of_empty_shapes_is_zeros_or_empty(m, k, n, dt):
    a, b = np.ones((m, k), dt), np.ones((k, n), dt)
    args = (a, b) if dt == np.float16 else (a, b, np.ones(1, np.float32))
    r = ops.call("matmul", *args)
    assert r.out.shape == (m, n)
    assert r.out.dtype == (np.float32 if dt == np.float16 else np.float16)
    np.testing.assert_array_equal(r.out, np.zeros((m, n)))   # K = 0: an empty sum is 0, not NaN or -1
    assert r.launches == [] and r.profile.total_cycles == 0 and r.device_us == 0
    assert r.tiling.block_dim == 0


def test_the_kernel_helper_says_why_it_does_not_launch():
    with pytest.raises(ns.UsageError, match="nothing to launch.*zeros.*ops.call"):
        run_matmul(np.ones((4, 0), np.float16), np.ones((0, 5), np.float16))


@pytest.mark.parametrize("shape", [(3, 0), (0, 5), (2, 0, 4)])
def test_softmax_and_elementwise_ops_of_empty_tensors(shape):
    x = np.ones(shape, np.float16)
    for name, args in (("softmax", (x,)), ("relu", (x,)), ("add", (x, x))):
        r = ops.call(name, *args)
        assert r.out.shape == shape and r.out.size == 0 and r.launches == []


def test_conv2d_refuses_mixed_dtypes_like_torch():
    x = np.ones((1, 16, 8, 8), np.float16)
    for w in (np.ones((16, 16, 3, 3), np.float32), np.ones((16, 16, 3, 3), np.int8)):
        with pytest.raises(ns.DtypeError, match=f"input is float16 but the weight is {w.dtype}"):
            conv2d(x, w, padding=1)
    with pytest.raises(ns.DtypeError, match="input is int8 but the weight is float16"):
        conv2d(np.ones((1, 32, 8, 8), np.int8), np.ones((16, 32, 3, 3), np.float16))
    with pytest.raises(ops.OpError, match="does not support input dtypes"):
        ops.call("conv2d", x, np.ones((16, 16, 3, 3), np.float32))


@pytest.mark.parametrize("x_shape,w_shape", [((0, 16, 8, 8), (16, 16, 3, 3)), ((1, 0, 8, 8), (16, 0, 3, 3))])
def test_empty_convolutions_are_a_clear_error(x_shape, w_shape):
    x, w = np.ones(x_shape, np.float16), np.ones(w_shape, np.float16)
    with pytest.raises(ns.UsageError, match="every size must be >= 1"):
        conv2d(x, w, padding=1)
    with pytest.raises(ops.OpError, match="every size must be >= 1"):
        ops.call("conv2d", x, w)
