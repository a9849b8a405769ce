"""Shared helpers of the npusim.torch tests (imported only after pytest.importorskip("torch"))."""

from __future__ import annotations

import torch
import torch.nn.functional as F

#: relative tolerance on max|got - ref| / max|ref| per compute dtype. fp32: the simulator accumulates in
#: fp32 in a different order than PyTorch (a few ulps); fp16: one rounding of the fp32 accumulator to fp16
#: (half an ulp, 2^-11 ~ 4.9e-4) plus the fp16 rounding of the grad and of intermediate results.
REL_TOL = {torch.float32: 2e-6 * 8, torch.float16: 4e-3, torch.float64: 2e-6 * 8}


def max_err(got: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(max abs error, max abs error / max |ref|)."""
    got, ref = got.detach().double(), ref.detach().double()
    err = (got - ref).abs().max().item() if got.numel() else 0.0
    scale = max(ref.abs().max().item() if ref.numel() else 0.0, 1e-30)
    return err, err / scale


def assert_close(name: str, got: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> tuple[float, float]:
    assert got.shape == ref.shape, f"{name}: shape {tuple(got.shape)}, expected {tuple(ref.shape)}"
    abs_err, rel = max_err(got, ref)
    assert rel <= REL_TOL[dtype], f"{name} ({dtype}): max abs error {abs_err:.3g}, relative {rel:.3g}"
    return abs_err, rel


def torch_conv_grads(x, w, b, g, stride, padding, dilation, relu, dtype=torch.float64):
    """PyTorch's own output and gradients (in ``dtype``) of conv2d (+ReLU) for upstream grad ``g``."""
    xs, ws = x.detach().to(dtype).requires_grad_(), w.detach().to(dtype).requires_grad_()
    bs = None if b is None else b.detach().to(dtype).requires_grad_()
    y = F.conv2d(xs, ws, bs, stride, padding, dilation)
    if relu:
        y = F.relu(y)
    y.backward(g.to(dtype))
    return y.detach(), xs.grad, ws.grad, None if bs is None else bs.grad
