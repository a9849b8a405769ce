"""Checks of lab 08 (into the framework): backward formulas on the simulator, gradient accumulation over
micro-batches, and an autograd Function that releases what it saved.

PyTorch is imported inside each check, never at import time: ``npusim.checks`` loads without PyTorch.
"""

from __future__ import annotations

import gc
import weakref
from typing import Callable

import numpy as np

from ._core import CheckFailed, call_learner, compare, describe, passed

__all__ = ["matmul_backward", "conv_grad_input", "grad_accumulation", "no_leak"]


def _torch(name: str):
    try:
        import torch
        import npusim.torch  # noqa: F401
    except ImportError as e:
        raise CheckFailed(name, f"this check needs PyTorch: {e}") from None
    return torch


def _tolerance(dtype, k: int) -> tuple[float, float]:
    """(rtol, atol) for a sum of k products of unit-size values computed in ``dtype`` with fp32 accumulation."""
    if np.dtype(dtype) == np.float16:
        return 4e-3, 4e-3 * np.sqrt(k)
    return 2e-5, 2e-5 * np.sqrt(k)


# --- exercise 1: matmul backward ---------------------------------------------------------------------
_MATMUL_CASES = [  # (m, k, n, dtype)
    (1, 1, 1, np.float32), (5, 7, 3, np.float32), (16, 32, 8, np.float16), (33, 17, 20, np.float16),
    (2, 40, 64, np.float32), (24, 3, 1, np.float16),
]


def matmul_backward(fn: Callable) -> None:
    """Lab 08, exercise 1: ``fn(a, b, grad) -> (grad_a, grad_b)`` for ``c = a @ b``, numpy arrays, both
    products computed with the simulator's matmul (``sim.matmul``), on hidden shapes in fp32 and fp16."""
    __tracebackhide__ = True
    name = "matmul_backward"
    _torch(name)
    from ..torch import kernels as sim
    for i, (m, k, n, dt) in enumerate(_MATMUL_CASES):
        rng = np.random.default_rng(80 + i)
        a, b, g = (rng.standard_normal(s).astype(dt) for s in ((m, k), (k, n), (m, n)))
        case = {"a": f"{m}x{k}", "b": f"{k}x{n}", "dtype": np.dtype(dt).name}
        with sim.record() as rec:
            out = call_learner(name, fn, a.copy(), b.copy(), g.copy(), case=case)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise CheckFailed(name, f"return the pair (grad_a, grad_b), got {type(out).__name__}")
        a64, b64, g64 = a.astype(np.float64), b.astype(np.float64), g.astype(np.float64)
        for label, got, want, kk in (("grad_a", out[0], g64 @ b64.T, n), ("grad_b", out[1], a64.T @ g64, m)):
            got = np.asarray(got)
            if got.shape != want.shape:
                raise CheckFailed(name, f"on [{describe(case)}] {label} has shape {got.shape}, expected "
                                        f"{want.shape} (a gradient has the shape of its input). Look at which "
                                        f"operand is transposed: dA = dC @ B^T, dB = A^T @ dC")
            rtol, atol = _tolerance(dt, kk)
            compare(name, got, want, {**case, "output": label}, rtol=rtol, atol=atol,
                    look_at="dA = dC @ B^T (m x n times n x k) and dB = A^T @ dC (k x m times m x n)")
        if rec.calls < 2:
            raise CheckFailed(name, f"on [{describe(case)}] the simulator ran {rec.calls} operator call(s); both "
                                    f"products must run on it: use sim.matmul(x, y), not numpy's @")
    passed(name, f"{len(_MATMUL_CASES)} hidden shapes (1x1x1 to 33x17x20), fp32 and fp16, on the simulator")


# --- exercise 2: conv grad_input ---------------------------------------------------------------------
_CONV_CASES = [  # (n, cin, cout, h, w, k, stride, padding, dilation, dtype)
    (1, 1, 1, 3, 3, 1, 1, 0, 1, np.float32), (2, 3, 4, 7, 6, 3, 2, 1, 1, np.float32),
    (1, 2, 3, 8, 8, 3, 1, 2, 1, np.float16), (1, 2, 2, 9, 7, 3, 2, 0, 2, np.float32),
    (2, 4, 3, 6, 5, 2, 2, 1, 1, np.float16), (1, 2, 3, 5, 5, 1, 1, 1, 1, np.float32),
    (1, 3, 2, 8, 9, 3, 3, 1, 1, np.float32),
]


def conv_grad_input(fn: Callable) -> None:
    """Lab 08, exercise 2: ``fn(grad, w, input_hw, stride, padding, dilation) -> grad_input`` (NCHW numpy)
    computed as one convolution on the simulator, on hidden shapes (strides 1-3, padding 0-2, dilation
    1-2, kernels 1-3, fp32 and fp16), against PyTorch's ``torch.nn.grad.conv2d_input``."""
    __tracebackhide__ = True
    name = "conv_grad_input"
    torch = _torch(name)
    from ..torch import kernels as sim
    for i, (n, cin, cout, h, w, k, s, p, d, dt) in enumerate(_CONV_CASES):
        rng = np.random.default_rng(90 + i)
        ho, wo = sim.conv_output_hw((h, w), (k, k), s, p, d)
        g = rng.standard_normal((n, cout, ho, wo)).astype(dt)
        wt = rng.standard_normal((cout, cin, k, k)).astype(dt)
        case = {"input": f"{n}x{cin}x{h}x{w}", "kernel": f"{cout}x{cin}x{k}x{k}", "stride": s, "padding": p,
                "dilation": d, "dtype": np.dtype(dt).name}
        with sim.record() as rec:
            got = call_learner(name, fn, g.copy(), wt.copy(), (h, w), (s, s), (p, p), (d, d), case=case)
        want = torch.nn.grad.conv2d_input((n, cin, h, w), torch.from_numpy(wt.astype(np.float64)),
                                          torch.from_numpy(g.astype(np.float64)), s, p, d).numpy()
        got = np.asarray(got)
        if got.shape != want.shape:
            raise CheckFailed(name, f"on [{describe(case)}] the result has shape {got.shape}, expected {want.shape}. "
                                    f"Look at the padding: top = dilation*(k-1) - padding, bottom = top + the rows "
                                    f"the forward's last window never reached (negative means: crop)")
        rtol, atol = _tolerance(dt, cout * k * k)
        compare(name, got, want, case, rtol=rtol, atol=atol,
                look_at="the weights: flipped in space (w[:, :, ::-1, ::-1]) and Cin/Cout swapped; the zeros "
                        "between the grad's pixels (stride - 1 of them); the padding on each side")
        if not any(x.op == "conv2d" for x in rec.launches):
            raise CheckFailed(name, f"on [{describe(case)}] no convolution ran on the simulator: compute the "
                                    f"result with sim.conv2d(...)")
    passed(name, f"{len(_CONV_CASES)} hidden convolutions (stride up to 3, padding up to 2, dilation 2, "
                 f"1x1 with padding), fp32 and fp16")


# --- exercise 3: gradient accumulation ---------------------------------------------------------------
_ACC_CASES = [(8, 4, 12, 1), (7, 3, 10, 2)]   # (batch, micro_batches, image size, seed)


def grad_accumulation(fn: Callable) -> None:
    """Lab 08, exercise 3: ``fn(model, optimizer, x, y, micro_batches)`` makes ONE optimizer step whose
    gradient is the full batch's (mean cross-entropy over all of x), running forward and backward one
    micro-batch at a time, so that what is saved for backward is about one micro-batch's worth. Whatever
    ``.grad`` holds when it is called must not count."""
    __tracebackhide__ = True
    name = "grad_accumulation"
    torch = _torch(name)
    from ..torch import SavedTensorMeter, swap_modules
    from ..torch.training import shapes_dataset, tiny_cnn
    F = torch.nn.functional
    for batch, micro, size, seed in _ACC_CASES:
        case = {"batch": batch, "micro_batches": micro, "images": f"{size}x{size}"}
        x, y = shapes_dataset(batch, size=size, seed=seed)
        ref = tiny_cnn(seed)
        model = swap_modules(ref)
        before = [p.detach().clone() for p in model.parameters()]
        for p in model.parameters():
            p.grad = torch.full_like(p, 7.0)            # stale gradients from an earlier step
        opt = torch.optim.SGD(model.parameters(), lr=1.0)   # new = old - grad: the step shows the gradient
        steps = []
        real_step = opt.step
        opt.step = lambda *a, **k: (steps.append(1), real_step(*a, **k))[1]
        meter = SavedTensorMeter(model)
        with meter:
            call_learner(name, fn, model, opt, x, y, micro, case=case)
        # the full-batch gradient, with PyTorch's own layers
        F.cross_entropy(ref(x), y).backward()
        if len(steps) != 1:
            raise CheckFailed(name, f"on [{describe(case)}] optimizer.step() ran {len(steps)} times; accumulate "
                                    f"the micro-batches' gradients and step once")
        got = [(b - p.detach()) for b, p in zip(before, model.parameters())]
        want = [p.grad for p in ref.parameters()]
        ratio = float(sum((g * w).sum() for g, w in zip(got, want)) / sum((w * w).sum() for w in want))
        err = max(float((g - w).abs().max() / w.abs().max().clamp_min(1e-12)) for g, w in zip(got, want))
        if err > 1e-3:
            stale = max(float((g - w - 7.0).abs().max() / w.abs().max().clamp_min(1e-12)) for g, w in zip(got, want))
            if stale < 1e-3:
                hint = "call optimizer.zero_grad() before the first micro-batch (stale gradients were in .grad)"
            elif abs(ratio - micro) < 0.05 * micro:
                hint = (f"the gradient is {micro}x too large: each micro-batch's loss must be weighted by its share "
                        f"of the batch (the full-batch loss is a mean over all {batch} images)")
            elif 0.05 < ratio < 1 / micro + 0.1:
                hint = "only one micro-batch seems to count: zero_grad only once, before the loop"
            else:
                hint = (f"weight each micro-batch's loss by its share of the batch, len(xb) / len(x): with {batch} "
                        f"images in {micro} micro-batches they are not all the same size")
            raise CheckFailed(name, f"on [{describe(case)}] the step's gradient differs from the full batch's by "
                                    f"{err:.1%} (max relative); expected the full-batch mean gradient. Look at: {hint}")
        full = SavedTensorMeter(model)
        with full:
            out = model(x)
        peak_full = full.peak_bytes
        del out
        if meter.peak_bytes > 0.75 * peak_full:
            raise CheckFailed(name, f"on [{describe(case)}] the gradients are right, but {meter.peak_bytes:,} B were "
                                    f"held for backward at the peak, {meter.peak_bytes / peak_full:.0%} of the full "
                                    f"batch's {peak_full:,} B: run backward on each micro-batch before the next "
                                    f"forward (one loss.backward() per micro-batch), so only one is held at a time")
    passed(name, f"{len(_ACC_CASES)} hidden batches (one split unevenly): full-batch gradient, one step, "
                 f"memory held for backward about one micro-batch's")


# --- exercise 4: an autograd Function that does not leak --------------------------------------------
def no_leak(fn_cls) -> None:
    """Lab 08, exercise 4: ``fn_cls.apply(a, b)`` (a torch.autograd.Function) returns ``a @ b`` in fp32,
    computed in fp16 on the simulator, with a backward on the simulator; the tensors it saves must be
    released by the backward (no tensor kept as a ctx attribute), and gradients accumulate over two uses."""
    __tracebackhide__ = True
    name = "no_leak"
    torch = _torch(name)
    from ..torch import kernels as sim
    gen = torch.Generator().manual_seed(8)
    a = torch.randn(6, 5, generator=gen, requires_grad=True)
    b1 = torch.randn(5, 4, generator=gen, requires_grad=True)
    b2 = torch.randn(5, 4, generator=gen, requires_grad=True)
    g1, g2 = torch.randn(6, 4, generator=gen), torch.randn(6, 4, generator=gen)
    keep = {id(t) for t in (a, b1, b2)}
    refs: list[tuple[weakref.ref, tuple]] = []
    saved_inputs: list[str] = []

    def pack(t):
        if id(t) in keep:
            saved_inputs.append(str(tuple(t.shape)))
        else:
            refs.append((weakref.ref(t), tuple(t.shape)))
        return t

    case = {"a": "6x5", "b": "5x4", "uses": 2}
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        c1 = call_learner(name, fn_cls.apply, a, b1, case=case, what="your forward")
        c2 = call_learner(name, fn_cls.apply, a, b2, case=case, what="your forward")
    for c, b in ((c1, b1), (c2, b2)):
        if not isinstance(c, torch.Tensor) or tuple(c.shape) != (6, 4):
            raise CheckFailed(name, f"forward must return a (6, 4) tensor, got "
                                    f"{getattr(c, 'shape', type(c).__name__)}")
        if c.dtype != torch.float32 or c.grad_fn is None:
            raise CheckFailed(name, f"forward must return an fp32 tensor that autograd tracks (got {c.dtype}, "
                                    f"grad_fn={c.grad_fn}): return a torch tensor from forward")
        want = a.detach().half().double() @ b.detach().half().double()
        compare(name, c.detach().numpy(), want.numpy(), case, rtol=4e-3, atol=4e-3 * 5 ** 0.5,
                look_at="forward: c = a @ b with a and b cast to fp16 (sim.matmul on the fp16 arrays)")
    gc.collect()
    gc.disable()
    try:
        with sim.record() as rec:
            call_learner(name, lambda: ((c1 * g1).sum() + (c2 * g2).sum()).backward(), case=case, what="your backward")
        stored = sorted({k for c in (c1, c2) for k, v in vars(c.grad_fn).items() if isinstance(v, torch.Tensor)})
        alive = [shape for r, shape in refs if r() is not None]
    finally:
        gc.enable()
    if stored:
        raise CheckFailed(name, f"tensors are stored as ctx attributes ({', '.join('ctx.' + s for s in stored)}): "
                                f"autograd cannot free them after backward, they live as long as the graph (and "
                                f"an output stored on its own ctx is a reference cycle). Use "
                                f"ctx.save_for_backward(...) and ctx.saved_tensors")
    if alive:
        raise CheckFailed(name, f"after backward, {len(alive)} tensor(s) saved for it are still alive "
                                f"(shapes {alive}): something outside autograd keeps them (a global, a list, a "
                                f"closure?). Save them with ctx.save_for_backward only")
    if rec.calls < 2:
        raise CheckFailed(name, f"the backward ran {rec.calls} simulated operator call(s); compute both gradients "
                                f"with the simulator (your matmul_backward from exercise 1)")
    ga = (g1.double() @ b1.detach().half().double().T + g2.double() @ b2.detach().half().double().T)
    for label, got, want, kk in (("a.grad (two uses, accumulated)", a.grad, ga, 8),
                                 ("b1.grad", b1.grad, a.detach().half().double().T @ g1.double(), 6)):
        if got is None:
            raise CheckFailed(name, f"{label} is None: backward must return one gradient per input of forward")
        if got.dtype != torch.float32:
            raise CheckFailed(name, f"{label} is {got.dtype}; return gradients in the inputs' dtype (fp32)")
        compare(name, got.numpy(), want.numpy(), {**case, "gradient": label}, rtol=4e-3, atol=4e-3 * kk ** 0.5,
                look_at="backward: the grad arrives in fp32, cast it to fp16 for the simulator; return "
                        "(grad_a, grad_b) cast back to fp32")
    passed(name, f"fp16 matmul on the simulator, gradients right and accumulated over two uses, "
                 f"{len(refs)} saved tensor(s) released by backward, none kept on ctx")
