"""Checks of lab 08 (into the framework), part 1: the backward formulas of a matmul and of a convolution's
input on the simulator, and gradient accumulation over micro-batches. The learner's own torch.library
operator and its verification are checked in :mod:`.lab08_custom_op`.

PyTorch is imported inside each check, never at import time: ``npusim.checks`` loads without PyTorch.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ._core import CheckFailed, call_learner, case_rng, compare, describe, fixed_rng, passed
from ._flow import Skeleton

__all__ = ["matmul_backward", "conv_grad_input", "grad_accumulation"]

_SETUP = "import numpy as np\nimport torch\nimport torch.nn.functional as F\nimport npusim.torch as nt\nfrom npusim import checks as check\nfrom npusim.torch import kernels as sim"
"""What a lab 08 skeleton needs outside the notebook: the lab's imports."""

HINTS = {
    "matmul-backward": (
        "A gradient has the shape of what it is the gradient of. dA is m x k and dC is m x n: which product "
        "of dC with A or B (transposed or not) has that shape? The same for dB.",
        "Each gradient is one matrix product of dC with the other operand, one of the two transposed: work "
        "out which by the shapes (m x n times what gives m x k?), then check it on a 1 x 1 case. Both "
        "products run on the simulator (sim.matmul on numpy arrays; .T transposes).",
        Skeleton(
            "def matmul_backward(a, b, grad):\n"
            "    grad_a = sim.matmul(___, ___)     # (m x n) @ (n x k)\n"
            "    grad_b = sim.matmul(___, ___)     # (k x m) @ (m x n)\n"
            "    return grad_a, grad_b\n",
            call="check.matmul_backward(matmul_backward)", setup=_SETUP),
    ),
    "conv-grad-input": (
        "The input gradient is a convolution of the output gradient with the flipped, transposed weights, "
        "after undoing the stride (zeros between pixels) and the padding. Section 4's picture shows one axis.",
        "Per axis: undo the stride (how many zeros between two gradient pixels?), then pad so that a stride-1 "
        "convolution with the flipped weights (sim.flip_weights) produces exactly the input's size: the top "
        "pad is how far the kernel reaches beyond the forward's own padding; the bottom pad also adds back "
        "the input rows the forward's last window never reached. sim.dilate_pad does zeros and pads; then "
        "one sim.conv2d with stride 1, padding 0 and the forward's dilation.",
        Skeleton(
            "def conv_grad_input(grad, w, input_hw, stride, padding, dilation):\n"
            "    pads = []\n"
            "    for size, out, k, s, p, d in zip(input_hw, grad.shape[2:], w.shape[2:], stride, padding, dilation):\n"
            "        top = ___\n"
            "        pads += [top, top + ___]   # the rows the forward's last window never reached\n"
            "    g = sim.dilate_pad(grad, stride, pads)\n"
            "    return sim.conv2d(g, sim.flip_weights(w), stride=1, padding=0, dilation=dilation)\n",
            call="check.conv_grad_input(conv_grad_input)", setup=_SETUP),
    ),
    "grad-accumulation": (
        "Gradients add up in .grad until something clears them. One optimiser step must see the full batch's "
        "mean gradient, built from micro-batches that each run forward and backward on their own.",
        "Clear the gradients once (when? .grad holds something stale when you are called), then one forward "
        "and one backward per micro-batch (x.tensor_split(micro_batches), the same for y), each loss weighted "
        "so that the sum of the micro-batches' gradients is the full batch's mean (mind a split that is not "
        "even), and one optimizer step at the end.",
        Skeleton(
            "def accumulate_step(model, optimizer, x, y, micro_batches):\n"
            "    ___                                  # before the first micro-batch\n"
            "    for xb, yb in zip(x.tensor_split(micro_batches), y.tensor_split(micro_batches)):\n"
            "        loss = F.cross_entropy(model(xb), yb) * ___\n"
            "        loss.backward()\n"
            "    optimizer.step()\n",
            call="check.grad_accumulation(accumulate_step)", setup=_SETUP),
    ),
}


def simulated_macs(rec) -> int:
    """Multiply-adds the simulator's compute kernels really did inside a ``sim.record()`` block (the
    operators' own kernels, not their layout transforms): a check compares it with what the exercise's
    products need, so host maths plus a token launch does not count as running on the simulator."""
    return sum(x.profile.algorithmic_macs for x in rec.launches if x.kernel == x.op)


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
_MATMUL_FIXED = [  # (m, k, n, dtype): one element, a square case (a missing transpose keeps the shapes), long K
    (1, 1, 1, np.float32), (5, 7, 3, np.float32), (16, 32, 8, np.float16), (33, 17, 20, np.float16),
    (8, 8, 8, np.float32), (2, 40, 64, np.float32), (24, 3, 1, np.float16),
]


def _matmul_cases() -> list[tuple]:
    rng = case_rng("matmul_backward", "random")
    return list(_MATMUL_FIXED) + [(*(int(v) for v in rng.integers(1, 48, 3)), (np.float32, np.float16)[i % 2])
                                  for i in range(2)]


def _matmul_causes(got: np.ndarray, a, b, g, label: str):
    """Which wrong formula ``got`` equals, if any (same shapes: a square case)."""
    alternatives = {"grad_a": [("A^T @ dC", lambda: a.T @ g, "that is dB: the two gradients are swapped"),
                               ("dC @ B", lambda: g @ b, "B is not transposed: dA = dC @ B^T"),
                               ("B^T @ dC", lambda: b.T @ g, "the operands are swapped: dA = dC @ B^T")],
                    "grad_b": [("dC @ B^T", lambda: g @ b.T, "that is dA: the two gradients are swapped"),
                               ("A @ dC", lambda: a @ g, "A is not transposed: dB = A^T @ dC"),
                               ("dC^T @ A", lambda: (g.T @ a), "that is dB^T: dB = A^T @ dC")]}[label]

    def causes(mm) -> str:
        for text, f, why in alternatives:
            try:
                alt = f()
            except ValueError:
                continue
            if alt.shape == got.shape and np.allclose(got, alt, rtol=1e-2, atol=1e-2 * np.abs(alt).max()):
                return f"Your {label} equals {text}: {why}."
        return "Look at dA = dC @ B^T (m x n times n x k) and dB = A^T @ dC (k x m times m x n)."

    return causes


def matmul_backward(fn: Callable) -> None:
    """Lab 08, exercise 1: ``fn(a, b, grad) -> (grad_a, grad_b)`` for ``c = a @ b``, numpy arrays, both
    products computed with the simulator's matmul (``sim.matmul``), on hidden shapes in fp32 and fp16."""
    __tracebackhide__ = True
    name = "matmul_backward"
    _torch(name)
    from ..torch import kernels as sim
    cases = _matmul_cases()
    for i, (m, k, n, dt) in enumerate(cases):
        rng = fixed_rng(name, i) if i < len(_MATMUL_FIXED) else case_rng(name, i)
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
                    causes=_matmul_causes(got.astype(np.float64), a64, b64, g64, label))
        need, done = 2 * m * k * n, simulated_macs(rec)
        if done < need:
            raise CheckFailed(name, f"on [{describe(case)}] the simulator did {done:,} multiply-adds in "
                                    f"{rec.calls} call(s); the two products need {need:,} ({m}x{n}x{k} each): both "
                                    f"must run on it, whole: use sim.matmul(x, y), not numpy's @")
    passed(name, f"{len(cases)} hidden shapes (1x1x1 to 33x17x20, one square), fp32 and fp16, on the simulator")


# --- exercise 2: conv grad_input ---------------------------------------------------------------------
_CONV_FIXED = [  # (n, cin, cout, h, w, k, stride, padding, dilation, dtype)
    (1, 1, 1, 3, 3, 1, 1, 0, 1, np.float32), (2, 3, 4, 7, 6, 3, 2, 1, 1, np.float32),
    (1, 2, 3, 8, 8, 3, 1, 2, 1, np.float16), (1, 2, 2, 9, 7, 3, 2, 0, 2, np.float32),
    (2, 4, 3, 6, 5, 2, 2, 1, 1, np.float16), (1, 2, 3, 5, 5, 1, 1, 1, 1, np.float32),
    (1, 3, 2, 8, 9, 3, 3, 1, 1, np.float32),
]


def _conv_cases() -> list[tuple]:
    rng = case_rng("conv_grad_input", "random")
    out = list(_CONV_FIXED)
    while len(out) < len(_CONV_FIXED) + 2:
        k, s, p, d = (int(v) for v in (rng.integers(1, 4), rng.integers(1, 4), rng.integers(0, 3), rng.integers(1, 3)))
        h, w = (int(v) for v in rng.integers(d * (k - 1) + 1, 12, 2))
        if (h + 2 * p - d * (k - 1) - 1) >= 0 and (w + 2 * p - d * (k - 1) - 1) >= 0:
            out.append((int(rng.integers(1, 3)), int(rng.integers(1, 5)), int(rng.integers(1, 5)), h, w, k, s, p,
                        d, (np.float32, np.float16)[len(out) % 2]))
    return out


def _conv_shape_cause(got_hw, hw, out_hw, k: int, s: int, p: int, d: int) -> str:
    """Which known mistake gives a result of spatial size ``got_hw`` (both axes agreeing), or the formula."""
    def size(n_in, n_out, zeros=True, extra=True, dil=d):
        top = d * (k - 1) - p
        bottom = top + ((n_in + 2 * p - d * (k - 1) - 1) - (n_out - 1) * s if extra else 0)
        spread = (n_out - 1) * (s if zeros else 1) + 1
        return spread + top + bottom - dil * (k - 1)

    for why, kw in (("no zeros sit between the grad's pixels: with stride s, insert s - 1 of them (sim.dilate_pad's "
                     "stride)", {"zeros": False}),
                    ("the bottom and right padding lack the input rows the forward's last window never reached",
                     {"extra": False}),
                    ("the convolution runs without the forward's dilation", {"dil": 1})):
        alt = tuple(size(n, o, **kw) for n, o in zip(hw, out_hw))
        if alt != tuple(hw) and alt == tuple(got_hw):
            return f"That is the size you get when {why}."
    return ("Look at the padding: top = dilation*(k-1) - padding, bottom = top + the rows the forward's last "
            "window never reached (negative means: crop)")


def _useful_taps(hw, out_hw, k: int, s: int, p: int, d: int) -> int:
    """Pairs (output pixel, kernel tap) of the forward whose tap lands on an input pixel, not on padding:
    the multiply-adds any way of computing the input gradient must do (per input and output channel)."""
    per_axis = [sum(1 for t in range(k) for o in range(n_out) if 0 <= o * s - p + t * d < n_in)
                for n_in, n_out in zip(hw, out_hw)]
    return per_axis[0] * per_axis[1]


def conv_grad_input(fn: Callable) -> None:
    """Lab 08, exercise 2: ``fn(grad, w, input_hw, stride, padding, dilation) -> grad_input`` (NCHW numpy)
    computed as one convolution on the simulator, on hidden shapes (strides 1-3, padding 0-2, dilation
    1-2, kernels 1-3, fp32 and fp16), against PyTorch's ``torch.nn.grad.conv2d_input``."""
    __tracebackhide__ = True
    name = "conv_grad_input"
    torch = _torch(name)
    from ..torch import kernels as sim
    cases = _conv_cases()
    for i, (n, cin, cout, h, w, k, s, p, d, dt) in enumerate(cases):
        rng = fixed_rng(name, i) if i < len(_CONV_FIXED) else case_rng(name, i)
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
                                    + _conv_shape_cause(got.shape[2:], (h, w), (ho, wo), k, s, p, d))
        rtol, atol = _tolerance(dt, cout * k * k)
        unflipped = torch.nn.grad.conv2d_input((n, cin, h, w), torch.from_numpy(
            np.ascontiguousarray(wt[:, :, ::-1, ::-1]).astype(np.float64)), torch.from_numpy(g.astype(np.float64)),
            s, p, d).numpy()
        why = ("Your result is that of kernels not rotated by 180 degrees: flip them in space too "
               "(sim.flip_weights)." if k > 1 and np.allclose(got, unflipped, rtol=rtol, atol=atol) else
               "Look at the weights: flipped in space (w[:, :, ::-1, ::-1]) and Cin/Cout swapped; the zeros "
               "between the grad's pixels (stride - 1 of them); the padding on each side.")
        compare(name, got, want, case, rtol=rtol, atol=atol, causes=why)
        need, done = n * cin * cout * _useful_taps((h, w), (ho, wo), k, s, p, d), simulated_macs(rec)
        if done < need:
            raise CheckFailed(name, f"on [{describe(case)}] " + (
                "no convolution ran on the simulator" if not done else
                f"the simulator did {done:,} multiply-adds; the gradient needs {need:,} (every pair of a "
                f"gradient pixel and a weight that the forward multiplied with an input pixel)") + ": compute the whole result with sim.conv2d(...)")
    passed(name, f"{len(cases)} hidden convolutions (stride up to 3, padding up to 2, dilation 2, "
                 f"1x1 with padding), fp32 and fp16")


# --- exercise 3: gradient accumulation ---------------------------------------------------------------
_ACC_CASES = [(8, 4, 12, 1), (7, 3, 10, 2)]   # (batch, micro_batches, image size, seed): one uneven split
_STALE = 7.0                                   # what .grad holds when the learner's step is called


def _grads(torch, model, x, y) -> list:
    """The mean cross-entropy gradient of ``model`` (PyTorch's own layers) on (x, y), per parameter."""
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    return [p.grad.detach().clone() for p in model.parameters()]


def _accumulation_causes(torch, got: list, seed: int, x, y, micro: int) -> str:
    """The mistake whose gradient ``got`` equals, computed from the micro-batches' own gradients."""
    from ..torch.training import tiny_cnn
    xs, ys = x.tensor_split(micro), y.tensor_split(micro)
    sizes = [len(xb) for xb in xs]
    parts = [_grads(torch, tiny_cnn(seed), xb, yb) for xb, yb in zip(xs, ys)]
    share = [n / len(x) for n in sizes]

    def mix(weights, plus=0.0):
        return [sum(w * g[j] for w, g in zip(weights, parts)) + plus for j in range(len(parts[0]))]

    candidates = [
        (mix(share, _STALE), "the step's gradient still contains what .grad held before the call: clear it "
                             "(optimizer.zero_grad()) once, before the first micro-batch"),
        (mix([0] * (micro - 1) + [share[-1]]), "only the last micro-batch's gradient is left: .grad is cleared "
                                               "inside the loop; clear it once, before the loop"),
        (mix([0] * (micro - 1) + [1]), "only the last micro-batch counts, unweighted: .grad is cleared inside the "
                                       "loop, and the losses need their share of the batch as weight"),
        (mix([1] * micro), f"the gradient is the sum of the {micro} micro-batches' mean gradients, {micro}x too "
                           f"large: weight each micro-batch's loss by its share of the batch, len(xb) / len(x)"),
    ]
    for weights in ([n for n in sizes], [n / micro for n in sizes]):
        candidates.append((mix(weights), f"the gradient is {weights[0] / share[0]:g} times too large, as a loss summed over the images (reduction='sum') "
                                         f"gives: each micro-batch's loss must be its images' share of the full "
                                         f"batch's MEAN, so divide a summed loss by len(x), not by the number "
                                         f"of micro-batches"))
    if len(set(sizes)) > 1:
        candidates.append((mix([1 / micro] * micro), f"every micro-batch weighs 1/{micro}, but the {len(x)} images "
                                                     f"split into micro-batches of {sizes}: weight each loss by "
                                                     f"len(xb) / len(x)"))
    for want, why in candidates:
        err = max(float((g - w).abs().max() / w.abs().max().clamp_min(1e-12)) for g, w in zip(got, want))
        if err < 1e-3:
            return why
    return "the gradient matches none of the usual mistakes: compare your loop with the full-batch mean loss"


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
    for batch, micro, size, seed in _ACC_CASES:
        case = {"batch": batch, "micro_batches": micro, "images": f"{size}x{size}"}
        x, y = shapes_dataset(batch, size=size, seed=seed)
        model = swap_modules(tiny_cnn(seed))
        before = [p.detach().clone() for p in model.parameters()]
        for p in model.parameters():
            p.grad = torch.full_like(p, _STALE)              # stale gradients from an earlier step
        opt = torch.optim.SGD(model.parameters(), lr=1.0)   # new = old - grad: the step shows the gradient
        steps = []
        real_step = opt.step
        opt.step = lambda *a, **k: (steps.append(1), real_step(*a, **k))[1]
        meter = SavedTensorMeter(model)
        with meter:
            call_learner(name, fn, model, opt, x, y, micro, case=case)
        if len(steps) != 1:
            raise CheckFailed(name, f"on [{describe(case)}] optimizer.step() ran {len(steps)} times; accumulate "
                                    f"the micro-batches' gradients and step once")
        got = [(b - p.detach()) for b, p in zip(before, model.parameters())]
        want = _grads(torch, tiny_cnn(seed), x, y)
        err = max(float((g - w).abs().max() / w.abs().max().clamp_min(1e-12)) for g, w in zip(got, want))
        if err > 1e-3:
            raise CheckFailed(name, f"on [{describe(case)}] the step's gradient differs from the full batch's mean "
                                    f"gradient by {err:.1%} (max relative): "
                                    + _accumulation_causes(torch, got, seed, x, y, micro))
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
