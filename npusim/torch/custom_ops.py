"""The simulated operators as PyTorch custom operators (``torch.library``), namespace ``npusim``.

=====================================  ===================================================================
``torch.ops.npusim.conv2d``            x (N,Cin,H,W), weight (Cout,Cin,Kh,Kw), bias?, stride, padding,
                                       dilation, relu, variant -> y (N,Cout,Ho,Wo); autograd below
``torch.ops.npusim.matmul``            a (M,K), b (K,N) -> (M,N); autograd: both grads are matmuls
``torch.ops.npusim.conv2d_grad_input`` the backward pieces of conv2d, each its own operator so that
``...conv2d_grad_weight``              the backward formula stays traceable (torch.compile / opcheck)
``...conv2d_grad_bias``                and each piece shows in a profile; all three are convolutions
                                       (see :mod:`npusim.torch.kernels` for the formulas)
=====================================  ===================================================================

Each operator has three parts, as an operator of torch_npu has:

- the **real implementation** turns the tensors into numpy arrays and calls the wrapping layer
  (:mod:`npusim.torch.kernels` -> :mod:`npusim.ops`): validation, shape inference, the tiling cache and the
  simulator all apply, and every launch is recorded (:func:`npusim.torch.record`);
- the **fake implementation** (what torch.compile, torch.export and FakeTensor use: shapes and dtypes, no
  data) asks the *same* operator declaration for the output shape (``OpDef.validate`` + ``infer_shape`` on
  zero-strided placeholder arrays, no tiling, no launch), so a bad call fails at trace time with the
  simulator's own message;
- the **autograd formula** (``torch.library.register_autograd``): ``setup_context`` saves only what the
  backward needs (``ctx.save_for_backward``, never tensors as ctx attributes, so autograd frees them
  right after backward) and ``backward`` calls the backward operators, which run on the simulator too.

Dtypes: float16 and float32 compute in their own dtype on the simulator (fp32 accumulation), float64 is
computed in float32 and returned as float64; every input must have the same dtype.
"""

import itertools
from typing import Optional, Sequence

import numpy as np
import torch
from torch import Tensor

from . import kernels as K

_NP = {torch.float16: np.float16, torch.float32: np.float32, torch.float64: np.float64}


def _np_dtype(t: Tensor, op: str) -> np.dtype:
    try:
        return K.compute_dtype(_NP[t.dtype])
    except KeyError:
        raise TypeError(f"npusim::{op} takes float16, float32 or float64 tensors, got {t.dtype}") from None


def _same_dtype(op: str, **tensors: Optional[Tensor]) -> np.dtype:
    given = {k: t for k, t in tensors.items() if t is not None}
    dtypes = {t.dtype for t in given.values()}
    if len(dtypes) != 1:
        shown = ", ".join(f"{k} is {t.dtype}" for k, t in given.items())
        raise TypeError(f"npusim::{op}: every input must have the same dtype, but {shown}")
    for t in given.values():
        if t.device.type not in ("cpu", "meta"):
            raise TypeError(f"npusim::{op} runs on the simulator from CPU tensors, got a tensor on {t.device}")
    return _np_dtype(next(iter(given.values())), op)


def _arr(t: Tensor) -> np.ndarray:
    return t.detach().contiguous().numpy()


def _tensor(a: np.ndarray, like: Tensor) -> Tensor:
    return torch.from_numpy(np.ascontiguousarray(a)).to(like.dtype)


def _in_backward() -> bool:
    try:
        return torch._C._current_autograd_node() is not None
    except AttributeError:  # pragma: no cover - older torch
        return False


def _ints(v: Sequence) -> list[int]:
    return [int(i) for i in v]


_namespaces = itertools.count(1)


def fresh_namespace(prefix: str = "mine") -> str:
    """A ``torch.library`` namespace that no operator of this process uses yet: ``"mine_1"``, ``"mine_2"``,
    ... Registering an operator name twice fails, so a notebook cell that registers an operator takes a
    fresh namespace each time it runs (``@torch.library.custom_op(f"{ns}::matmul16", ...)``)."""
    if not prefix.isidentifier():
        raise ValueError(f"a namespace is a Python identifier, got {prefix!r}")
    while True:
        ns = f"{prefix}_{next(_namespaces)}"
        if not list(getattr(torch.ops, ns)):   # no operator registered under it yet
            return ns


# --- conv2d ----------------------------------------------------------------------------------------
@torch.library.custom_op("npusim::conv2d", mutates_args=(), device_types="cpu")
def _conv2d(x: Tensor, weight: Tensor, bias: Optional[Tensor], stride: list[int], padding: list[int],
            dilation: list[int], relu: bool, variant: str) -> Tensor:
    _same_dtype("conv2d", x=x, weight=weight, bias=bias)
    y = K.conv2d(_arr(x), _arr(weight), None if bias is None else _arr(bias), stride, padding, dilation, relu,
                 variant)
    return _tensor(y, x)


def conv2d_shape(x_shape, w_shape, bias_shape, dtype, stride, padding, dilation, relu=False,
                 variant="img2col") -> tuple[int, ...]:
    """The output shape the conv2d operator's declaration infers (validation included, nothing runs)."""
    return K.infer_shapes("conv2d", (x_shape, dtype), (w_shape, dtype),
                          None if bias_shape is None else (bias_shape, dtype),
                          stride=tuple(_ints(stride)), padding=tuple(_ints(padding)),
                          dilation=tuple(_ints(dilation)), relu=bool(relu), variant=variant)[0]


@_conv2d.register_fake
def _conv2d_fake(x, weight, bias, stride, padding, dilation, relu, variant):
    dt = _same_dtype("conv2d", x=x, weight=weight, bias=bias)
    shape = conv2d_shape(x.shape, weight.shape, None if bias is None else bias.shape, dt, stride, padding,
                         dilation, relu, variant)
    return x.new_empty(shape)


@torch.library.custom_op("npusim::conv2d_grad_input", mutates_args=(), device_types="cpu")
def _conv2d_grad_input(grad: Tensor, weight: Tensor, input_size: list[int], stride: list[int],
                       padding: list[int], dilation: list[int], variant: str) -> Tensor:
    _same_dtype("conv2d_grad_input", grad=grad, weight=weight)
    return _tensor(K.conv2d_grad_input(_arr(grad), _arr(weight), tuple(input_size), stride, padding, dilation,
                                       variant), grad)


@_conv2d_grad_input.register_fake
def _conv2d_grad_input_fake(grad, weight, input_size, stride, padding, dilation, variant):
    dt = _same_dtype("conv2d_grad_input", grad=grad, weight=weight)
    g_shape, w_shape = _ints(grad.shape), _ints(weight.shape)
    pads, wf_shape = K.grad_input_plan(g_shape, w_shape, _ints(input_size), stride, padding, dilation)
    (sh, sw) = K.pair(stride)
    hp = (g_shape[2] - 1) * sh + 1 + pads[0] + pads[1]
    wp = (g_shape[3] - 1) * sw + 1 + pads[2] + pads[3]
    shape = K.infer_shapes("conv2d", ((g_shape[0], g_shape[1], hp, wp), dt), (wf_shape, dt), None,
                           stride=(1, 1), padding=(0, 0), dilation=K.pair(dilation), variant=variant)[0]
    return grad.new_empty(shape)


@torch.library.custom_op("npusim::conv2d_grad_weight", mutates_args=(), device_types="cpu")
def _conv2d_grad_weight(grad: Tensor, x: Tensor, kernel_size: list[int], stride: list[int],
                        padding: list[int], dilation: list[int], variant: str) -> Tensor:
    _same_dtype("conv2d_grad_weight", grad=grad, x=x)
    return _tensor(K.conv2d_grad_weight(_arr(grad), _arr(x), tuple(kernel_size), stride, padding, dilation,
                                        variant), grad)


@_conv2d_grad_weight.register_fake
def _conv2d_grad_weight_fake(grad, x, kernel_size, stride, padding, dilation, variant):
    dt = _same_dtype("conv2d_grad_weight", grad=grad, x=x)
    n, cout, ho, wo = _ints(grad.shape)
    nx, cin, h, w = _ints(x.shape)
    kh, kw = _ints(kernel_size)
    # the convolution it launches: x^T (Cin, N, H, W) with grad^T (Cout, N, Ho, Wo) as filters
    cin_, cout_, kh2, kw2 = K.infer_shapes("conv2d", ((cin, nx, h, w), dt), ((cout, n, ho, wo), dt), None,
                                           stride=K.pair(dilation), padding=K.pair(padding),
                                           dilation=K.pair(stride), variant=variant)[0]
    if kh2 < kh or kw2 < kw:
        raise ValueError(f"npusim::conv2d_grad_weight: grad {grad.shape} does not come from a convolution of "
                         f"x {x.shape} with a {kh}x{kw} kernel")
    return grad.new_empty((cout_, cin_, kh, kw))


@torch.library.custom_op("npusim::conv2d_grad_bias", mutates_args=(), device_types="cpu")
def _conv2d_grad_bias(grad: Tensor, variant: str) -> Tensor:
    _same_dtype("conv2d_grad_bias", grad=grad)
    return _tensor(K.conv2d_grad_bias(_arr(grad), variant), grad)


@_conv2d_grad_bias.register_fake
def _conv2d_grad_bias_fake(grad, variant):
    dt = _same_dtype("conv2d_grad_bias", grad=grad)
    n, cout, ho, wo = _ints(grad.shape)
    shape = K.infer_shapes("conv2d", ((cout, n, ho, wo), dt), ((1, n, ho, wo), dt), None, variant=variant)[0]
    return grad.new_empty((shape[0],))


def _conv2d_setup(ctx, inputs, output) -> None:
    """Save for backward only what the backward needs: x for grad_weight, w for grad_input, and the output
    when ReLU was fused (its sign is the ReLU mask; the next layer keeps that tensor anyway)."""
    x, weight, bias, stride, padding, dilation, relu, variant = inputs
    need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    ctx.conf = (list(stride), list(padding), list(dilation), relu, variant, bias is not None)
    ctx.x_hw = (x.shape[2], x.shape[3])
    ctx.k_hw = (weight.shape[2], weight.shape[3])
    ctx.save_for_backward(x if need_w else None, weight if need_x else None, output if relu else None)


def _conv2d_backward(ctx, grad):
    """grad_input, grad_weight, grad_bias, each an operator on the simulator. With ReLU fused, the grad is
    first masked where the output is 0 (a host select in PyTorch: ReLU's derivative, from the output)."""
    x, weight, y = ctx.saved_tensors
    stride, padding, dilation, relu, variant, has_bias = ctx.conf
    if relu:
        grad = torch.where(y > 0, grad, torch.zeros((), dtype=grad.dtype))
    gx = gw = gb = None
    if ctx.needs_input_grad[0]:
        gx = torch.ops.npusim.conv2d_grad_input(grad, weight, list(ctx.x_hw), stride, padding, dilation, variant)
    if ctx.needs_input_grad[1]:
        gw = torch.ops.npusim.conv2d_grad_weight(grad, x, list(ctx.k_hw), stride, padding, dilation, variant)
    if has_bias and ctx.needs_input_grad[2]:
        gb = torch.ops.npusim.conv2d_grad_bias(grad, variant)
    return gx, gw, gb, None, None, None, None, None


torch.library.register_autograd("npusim::conv2d", _conv2d_backward, setup_context=_conv2d_setup)


# --- matmul ----------------------------------------------------------------------------------------
@torch.library.custom_op("npusim::matmul", mutates_args=(), device_types="cpu")
def _matmul(a: Tensor, b: Tensor) -> Tensor:
    _same_dtype("matmul", a=a, b=b)
    role = "matmul.backward" if _in_backward() else "matmul"
    return _tensor(K.matmul(_arr(a), _arr(b), role=role, backward=role != "matmul"), a)


@_matmul.register_fake
def _matmul_fake(a, b):
    _same_dtype("matmul", a=a, b=b)
    # the shape rule of the matmul declaration (it does not depend on the dtype)
    shape = K.infer_shapes("matmul", (_ints(a.shape), np.float16), (_ints(b.shape), np.float16))[0]
    return a.new_empty(shape)


def _matmul_setup(ctx, inputs, output) -> None:
    a, b = inputs
    ctx.save_for_backward(a if ctx.needs_input_grad[1] else None, b if ctx.needs_input_grad[0] else None)


def _matmul_backward(ctx, grad):
    """C = A @ B: dA = dC @ B^T and dB = A^T @ dC, two more matmuls on the simulator."""
    a, b = ctx.saved_tensors
    ga = torch.ops.npusim.matmul(grad, b.t()) if ctx.needs_input_grad[0] else None
    gb = torch.ops.npusim.matmul(a.t(), grad) if ctx.needs_input_grad[1] else None
    return ga, gb


torch.library.register_autograd("npusim::matmul", _matmul_backward, setup_context=_matmul_setup)


# --- the functions users call ----------------------------------------------------------------------
def conv2d(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride=1, padding=0, dilation=1,
           relu: bool = False, variant: Optional[str] = None) -> Tensor:
    """``torch.nn.functional.conv2d`` (groups=1) on the simulated core, with ReLU fused when ``relu``;
    differentiable (the backward runs on the simulator too). ``variant``: one of npusim.conv's variants
    (default :data:`npusim.torch.options`.variant)."""
    return torch.ops.npusim.conv2d(x, weight, bias, list(K.pair(stride)), list(K.pair(padding)),
                                   list(K.pair(dilation)), bool(relu), variant or K.options.variant)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` for 2-D tensors on the simulated Cube; differentiable."""
    return torch.ops.npusim.matmul(a, b)


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``torch.nn.functional.linear`` on the simulated Cube. The bias is folded into the matmul: a column of
    ones is appended to x and the bias as one more input row of W^T, so that ``[x, 1] @ [W^T; b]`` adds it
    with fp32 accumulation, and its gradient (``1^T @ grad``) is part of the matmul's backward."""
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])
    wt = weight.t()
    if bias is not None:
        x2 = torch.cat([x2, torch.ones((x2.shape[0], 1), dtype=x2.dtype)], dim=1)
        wt = torch.cat([wt, bias.reshape(1, -1)], dim=0)
    return matmul(x2, wt).reshape(*lead, weight.shape[0])
