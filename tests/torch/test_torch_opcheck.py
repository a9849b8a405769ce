"""torch.library.opcheck on the custom operators; fake (shape-only) implementations give the wrapping
layer's own validation messages."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import npusim.torch  # noqa: E402,F401  (registers torch.ops.npusim.*)
from npusim.ops import OpError  # noqa: E402

pytestmark = pytest.mark.lab08
ops = torch.ops.npusim


def _t(*shape, dtype=torch.float32, grad=True, seed=0):
    gen = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=gen).to(dtype).requires_grad_(grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_opcheck_conv2d(dtype):
    cases = [
        (_t(2, 3, 6, 5, dtype=dtype), _t(4, 3, 3, 3, dtype=dtype), _t(4, dtype=dtype), [1, 1], [1, 1], [1, 1], True, "img2col"),
        (_t(1, 2, 7, 7, dtype=dtype), _t(3, 2, 3, 2, dtype=dtype), None, [2, 1], [0, 1], [1, 1], False, "img2col"),
        (_t(1, 2, 7, 7, dtype=dtype, grad=False), _t(3, 2, 3, 3, dtype=dtype), _t(3, dtype=dtype), [1, 1], [1, 1], [2, 2], False, "img2col"),
    ]
    for args in cases:
        torch.library.opcheck(ops.conv2d, args)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_opcheck_matmul(dtype):
    torch.library.opcheck(ops.matmul, (_t(5, 7, dtype=dtype), _t(7, 3, dtype=dtype)))
    torch.library.opcheck(ops.matmul, (_t(1, 20, dtype=dtype, grad=False), _t(20, 17, dtype=dtype)))


def test_opcheck_backward_operators():
    g, w, x = _t(1, 4, 3, 3, grad=False), _t(4, 2, 3, 3, grad=False), _t(1, 2, 6, 6, grad=False)
    torch.library.opcheck(ops.conv2d_grad_input, (g, w, [6, 6], [2, 2], [1, 1], [1, 1], "img2col"))
    torch.library.opcheck(ops.conv2d_grad_weight, (g, x, [3, 3], [2, 2], [1, 1], [1, 1], "img2col"))
    torch.library.opcheck(ops.conv2d_grad_bias, (g, "img2col"))


def test_fake_implementation_uses_the_operator_declaration():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x, w = torch.empty(2, 3, 9, 9), torch.empty(8, 3, 3, 3)
        y = npusim.torch.conv2d(x, w, stride=2, padding=1)
        assert y.shape == (2, 8, 5, 5)
        with pytest.raises(OpError, match="conv2d"):
            npusim.torch.conv2d(x, torch.empty(8, 4, 3, 3))      # Cin mismatch, refused at trace time
        with pytest.raises(OpError, match="inner sizes differ"):
            npusim.torch.matmul(torch.empty(3, 4), torch.empty(5, 2))
        assert npusim.torch.matmul(torch.empty(3, 4), torch.empty(4, 2)).shape == (3, 2)


def test_clear_errors_for_unsupported_dtypes():
    with pytest.raises(TypeError, match="same dtype"):
        npusim.torch.matmul(torch.ones(2, 2), torch.ones(2, 2, dtype=torch.float16))
    with pytest.raises(TypeError, match="float16, float32 or float64"):
        npusim.torch.matmul(torch.ones(2, 2, dtype=torch.bfloat16), torch.ones(2, 2, dtype=torch.bfloat16))


def test_fresh_namespace_lets_a_cell_register_again():
    made = []
    for _ in range(2):   # the same notebook cell, run twice
        ns = npusim.torch.fresh_namespace("cell")

        @torch.library.custom_op(f"{ns}::double", mutates_args=())
        def double(a: torch.Tensor) -> torch.Tensor:
            return a * 2

        made.append(ns)
    assert made[0] != made[1] and getattr(torch.ops, made[1]).double(torch.ones(2)).tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match="identifier"):
        npusim.torch.fresh_namespace("not a name")
