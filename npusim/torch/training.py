"""A tiny training setup for lab 08: a synthetic data set of simple shapes, a small CNN, and a training
loop with fp16 compute and (dynamic) loss scaling that records what a learner wants to see per step.

Everything is seeded: the same call gives the same numbers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch
from torch import nn

from .kernels import Launch, Recording, record
from .modules import NPUConv2d, NPULinear, swap_modules
from ..views.explorer import report_progress

CLASSES = ("horizontal bar", "vertical bar", "hollow square")
FP16_TINY = 2.0 ** -24     # the smallest fp16 subnormal: anything below about half of it rounds to 0
FP16_NORMAL = 2.0 ** -14   # the smallest normal fp16: below it, precision is lost bit by bit


def shapes_dataset(n: int = 256, size: int = 16, seed: int = 0, noise: float = 0.2
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` grey ``size x size`` images (N, 1, H, W), float32, standardised, and their labels (N,) in
    0..2 (:data:`CLASSES`): a horizontal bar, a vertical bar or a hollow square of random size and place,
    plus Gaussian noise."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n, 1, size, size), np.float32)
    y = rng.integers(0, len(CLASSES), n)
    for i in range(n):
        length, thick = rng.integers(size * 3 // 8, size * 3 // 4), rng.integers(2, 4)
        r0, c0 = rng.integers(0, size - length + 1, 2)
        if y[i] == 0:
            r = rng.integers(0, size - thick + 1)
            x[i, 0, r:r + thick, c0:c0 + length] = 1
        elif y[i] == 1:
            c = rng.integers(0, size - thick + 1)
            x[i, 0, r0:r0 + length, c:c + thick] = 1
        else:
            x[i, 0, r0:r0 + length, c0:c0 + length] = 1
            x[i, 0, r0 + 1:r0 + length - 1, c0 + 1:c0 + length - 1] = 0
    x += rng.normal(0.0, noise, x.shape).astype(np.float32)
    x = (x - x.mean()) / x.std()
    return torch.from_numpy(x), torch.from_numpy(y)


def tiny_cnn(seed: int = 0, classes: int = len(CLASSES)) -> nn.Sequential:
    """A PyTorch CNN (PyTorch layers: pass it to :func:`~npusim.torch.swap_modules` to simulate it)."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveMaxPool2d(1), nn.Flatten(),
                         nn.Linear(8, classes))


def scale_text(scale: float) -> str:
    """A loss scale as people write it: ``2^20`` for a power of two (not 1.04858e+06), else the number."""
    exp = float(np.log2(scale)) if scale > 0 else float("nan")
    return f"2^{int(exp)}" if exp == int(exp) and exp not in (0.0, 1.0) else f"{scale:g}"


@dataclass
class TrainRun:
    """What :func:`train` measured, one entry per step: the loss, the loss scale used, whether the step
    was skipped (an inf/NaN gradient: the scale was too large), the share of non-zero gradient values
    that became 0 when cast to fp16 on their way into a simulated kernel (``flushed``, 0 in fp32) and that
    landed in fp16's subnormal range (``subnormal``), host seconds and simulated device microseconds.
    ``last_step`` holds the launches of the last step and ``profile`` the Profile of its slowest launch."""

    label: str
    losses: list[float] = field(default_factory=list)
    scales: list[float] = field(default_factory=list)
    skipped: list[bool] = field(default_factory=list)
    flushed: list[float] = field(default_factory=list)
    subnormal: list[float] = field(default_factory=list)
    host_s: list[float] = field(default_factory=list)
    device_us: list[float] = field(default_factory=list)
    last_step: Optional[Recording] = None

    @property
    def profile(self):
        slowest: Optional[Launch] = self.last_step.slowest() if self.last_step else None
        return None if slowest is None else slowest.profile


class _CastWatch:
    """Counts, at the output of every simulated layer, the gradient values a cast to fp16 flushes to zero
    or makes subnormal (only where the layer computes in fp16)."""

    def __init__(self, model: nn.Module) -> None:
        self.nonzero = self.flushed = self.subnormal = 0
        self.handles = [m.register_forward_hook(self._forward) for m in model.modules()
                        if isinstance(m, (NPUConv2d, NPULinear)) and m.compute_dtype == torch.float16]

    def _forward(self, module, args, out) -> None:
        if out.requires_grad:
            out.register_hook(self._grad)

    def _grad(self, g: torch.Tensor) -> None:
        a = g.detach().abs()
        nz = a > 0
        self.nonzero += int(nz.sum())
        self.flushed += int((nz & (a.half() == 0)).sum())
        self.subnormal += int((nz & (a < FP16_NORMAL) & (a.half() != 0)).sum())

    def take(self) -> tuple[float, float]:
        n = max(1, self.nonzero)
        out = (self.flushed / n, self.subnormal / n)
        self.nonzero = self.flushed = self.subnormal = 0
        return out

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def train(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, steps: int = 20, batch: int = 16,
          lr: float = 0.03, loss_scale: float = 1.0, dynamic: bool = True, label: str = "") -> TrainRun:
    """Train ``model`` with Adam for ``steps`` steps on consecutive batches of (x, y), cross-entropy loss.

    Loss scaling: the loss is multiplied by the scale before backward and the gradients divided by it
    before the step. With ``dynamic``, a step whose gradients hold an inf or NaN is skipped and the scale
    halved (what ``torch.amp.GradScaler`` does; it also doubles the scale after many good steps, which
    this short loop never reaches)."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    run = TrainRun(label or f"scale {scale_text(loss_scale)}")
    watch = _CastWatch(model)
    scale = float(loss_scale)
    try:
        for step in range(steps):
            report_progress(f"training {run.label}: step {step + 1} of {steps} on the simulator ...")
            i = (step * batch) % max(1, len(x) - batch + 1)
            xb, yb = x[i:i + batch], y[i:i + batch]
            t0 = time.perf_counter()
            with record() as rec:
                loss = nn.functional.cross_entropy(model(xb), yb)
                (loss * scale).backward()
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            finite = all(bool(torch.isfinite(g).all()) for g in grads)
            run.losses.append(loss.detach().item())
            run.scales.append(scale)
            run.skipped.append(not finite)
            if finite:
                for g in grads:
                    g.div_(scale)
                opt.step()
            elif dynamic:
                scale /= 2
            opt.zero_grad(set_to_none=True)
            f, s = watch.take()
            run.flushed.append(f)
            run.subnormal.append(s)
            run.host_s.append(time.perf_counter() - t0)
            run.device_us.append(rec.device_us)
            run.last_step = rec
    finally:
        watch.remove()
    return run


def pretrain(model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int = 150, batch: int = 16,
             lr: float = 0.03) -> list[float]:
    """Train a plain PyTorch model quickly (PyTorch's own CPU kernels, no simulation); returns the losses."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        i = (step * batch) % max(1, len(x) - batch + 1)
        loss = nn.functional.cross_entropy(model(x[i:i + batch]), y[i:i + batch])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach().item())
    return losses


@dataclass
class GradientReport:
    """Per simulated layer: the fp32 gradients arriving at its output (``grads``), and per loss scale the
    share of non-zero values an fp16 cast flushes to 0 (``flushed[scale][layer]``) and the relative error
    of every parameter gradient computed with fp16 compute against fp32 (``weight_error[scale][param]``)."""

    grads: dict[str, torch.Tensor]
    flushed: dict[float, dict[str, float]]
    weight_error: dict[float, dict[str, float]]
    loss: float


def fp16_gradient_report(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
                         scales: tuple[float, ...] = (1.0, 1024.0)) -> GradientReport:
    """One backward of ``model`` (a PyTorch model) on the simulator in fp32, then in fp16 compute at each
    loss scale: how many gradient values underflow, and how wrong the weight gradients come out."""
    ref = swap_modules(model)
    grads: dict[str, torch.Tensor] = {}

    def keep(name):
        def hook(module, args, out):
            out.register_hook(lambda g: grads.__setitem__(name, g.detach().clone()))
        return hook

    handles = [m.register_forward_hook(keep(n)) for n, m in ref.named_modules()
               if isinstance(m, (NPUConv2d, NPULinear))]
    loss = nn.functional.cross_entropy(ref(x), y)
    loss.backward()
    for h in handles:
        h.remove()
    ref_grads = {n: p.grad.clone() for n, p in ref.named_parameters()}
    flushed, errors = {}, {}
    for s in scales:
        nz = {n: g != 0 for n, g in grads.items()}
        flushed[s] = {n: float(((g * s).half() == 0)[nz[n]].float().mean()) if nz[n].any() else 0.0
                      for n, g in grads.items()}
        m16 = swap_modules(model, compute_dtype=torch.float16)
        (nn.functional.cross_entropy(m16(x), y) * s).backward()
        errors[s] = {n: float((p.grad / s - ref_grads[n]).norm() / ref_grads[n].norm().clamp_min(1e-30))
                     for n, p in m16.named_parameters()}
    return GradientReport(grads, flushed, errors, loss.detach().item())
