"""Lab 05 (FP16 precision): dynamic loss scaling, and a small network trained with fp16 gradients.

Training in fp16 stores the gradients as fp16. A large model's gradients are tiny (its loss is averaged
over millions of elements), so many fall below fp16's smallest subnormal (6e-8) and become 0, and training
stalls. **Loss scaling** multiplies the loss by a scale ``S`` before the backward pass: every gradient is
``S`` times larger and stays representable; the optimizer divides by ``S`` again (in fp32) before it
updates the fp32 master weights. Too large an ``S`` overflows (inf, then NaN); the right ``S`` changes
during training. A **dynamic** scaler (PyTorch's ``GradScaler``, torch_npu's ``torch.npu.amp``) finds it:

- gradients with an inf or a NaN anywhere: skip the step (the weights are not updated) and halve ``S``;
- otherwise: apply ``gradients / S``; after ``growth_interval`` such clean steps in a row, double ``S``.

:class:`DynamicLossScaler` is that rule (the reference of lab 05's exercise 3); :class:`FixedScale` is a
static scale. :func:`train` trains a two-layer MLP (a regression on a random teacher network) with fp32
master weights and fp16 forward and backward passes: fp16 operands, fp32 accumulation, fp16 results, the
arithmetic of the Cube's mixed path (here in numpy: the network is too small for the simulator to say
anything about its speed). The loss is weighted by :data:`LOSS_WEIGHT` (the learning rate divided by it,
so fp32 training is unchanged), which puts this small network's gradients where a large model's are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

LOSS_WEIGHT = 2.0 ** -16
"""Weight of the loss: this small network's gradients then span about 1e-9 .. 1e-6, as a large model's."""
F16, F32 = np.float16, np.float32


class DynamicLossScaler:
    """Dynamic loss scaling (the rule of the module docstring). ``scale`` multiplies the loss before the
    backward pass; :meth:`step` takes the fp16 gradients computed with it."""

    def __init__(self, scale: float = 2.0 ** 16, growth_interval: int = 2000):
        self.scale = float(scale)
        self.growth_interval = int(growth_interval)
        self.clean_steps = 0

    def step(self, grads16: list[np.ndarray]) -> list[np.ndarray] | None:
        """The true (unscaled) fp32 gradients to apply, or None when the step must be skipped; then the
        scale of the next step."""
        if not all(np.isfinite(g).all() for g in grads16):
            self.scale /= 2
            self.clean_steps = 0
            return None
        grads = [np.asarray(g).astype(F32) / F32(self.scale) for g in grads16]
        self.clean_steps += 1
        if self.clean_steps == self.growth_interval:
            self.scale *= 2
            self.clean_steps = 0
        return grads


class FixedScale:
    """A static loss scale: the gradients are always unscaled and applied, whatever they hold."""

    def __init__(self, scale: float):
        self.scale = float(scale)

    def step(self, grads16: list[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(g).astype(F32) / F32(self.scale) for g in grads16]


@dataclass
class TrainingRun:
    """What :func:`train` returns: the loss of every step, the scale each step used, the skipped steps, and
    the share of the output's nonzero gradients that became 0 when stored as fp16 (0 for fp32 runs)."""

    losses: np.ndarray
    scales: np.ndarray
    skipped: list[int] = field(default_factory=list)
    flushed: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def final_loss(self, last: int = 20) -> float:
        """Mean loss of the last ``last`` steps (NaN once the run has diverged)."""
        return float(np.mean(self.losses[-last:]))


def _mm16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fp16 operands, fp32 accumulation, fp16 result (the Cube's mixed path)."""
    return (a.astype(F32) @ b.astype(F32)).astype(F16)


def _problem(seed: int, samples: int = 2048, width: int = 32):
    r = np.random.default_rng(seed)
    x = r.standard_normal((samples, width)).astype(F32)
    a1 = r.standard_normal((width, width)) / np.sqrt(width)
    a2 = r.standard_normal((width, width)) / np.sqrt(width)
    t = (np.maximum(x @ a1, 0) @ a2).astype(F32)                      # the teacher's outputs
    w1 = (r.standard_normal((width, width)) / np.sqrt(width)).astype(F32)
    w2 = (r.standard_normal((width, width)) / np.sqrt(width) * 0.1).astype(F32)
    return x, t, [w1, w2], r


def train(scaler=None, *, steps: int = 300, seed: int = 0, fp32: bool = False, batch: int = 128,
          lr: float = 0.1) -> TrainingRun:
    """Train the MLP ``relu(x @ W1) @ W2`` for ``steps`` SGD steps (momentum 0.9, batches of ``batch``).
    ``fp32``: everything in fp32 (the reference). Else fp16 passes; ``scaler`` (None: no loss scaling) has
    a ``scale`` and a ``step(grads16)`` returning the fp32 gradients to apply, or None to skip the step."""
    x, t, weights, rng = _problem(seed)
    moms = [np.zeros_like(w) for w in weights]
    losses, scales, skipped, flushed = [], [], [], []
    rate = lr / LOSS_WEIGHT
    for i in range(steps):
        idx = rng.integers(0, len(x), batch)
        xb, tb = x[idx], t[idx]
        w1, w2 = weights
        scale = float(scaler.scale) if scaler is not None and not fp32 else 1.0
        scales.append(scale)
        with np.errstate(over="ignore", invalid="ignore"):
            if fp32:
                pre = xb @ w1
                h = np.maximum(pre, 0)
                err = h @ w2 - tb
            else:
                x16, w1_16, w2_16 = xb.astype(F16), w1.astype(F16), w2.astype(F16)
                pre = _mm16(x16, w1_16)
                h = np.maximum(pre, F16(0))
                err = _mm16(h, w2_16).astype(F32) - tb
            losses.append(float(np.mean(err ** 2)))
            gy = 2 * err / err.size * F32(LOSS_WEIGHT)                 # d(weighted loss) / d(output), fp32
            if fp32:
                grads = [xb.T @ ((gy @ w2.T) * (pre > 0)), h.T @ gy]
            else:
                gy16 = (gy * F32(scale)).astype(F16)                    # the scaled loss's gradient, stored fp16
                flushed.append(float(np.mean(gy16[gy != 0] == 0)))
                gh = np.where(pre > 0, _mm16(gy16, w2_16.T), F16(0))
                grads16 = [_mm16(x16.T, gh), _mm16(h.T, gy16)]
                grads = [g.astype(F32) for g in grads16] if scaler is None else scaler.step(grads16)
        if grads is None:
            skipped.append(i)
            continue
        for k, g in enumerate(grads):
            moms[k] = 0.9 * moms[k] + np.asarray(g, F32)
            weights[k] = weights[k] - rate * moms[k]
    return TrainingRun(np.array(losses), np.array(scales), skipped, np.array(flushed))


__all__ = ["LOSS_WEIGHT", "DynamicLossScaler", "FixedScale", "TrainingRun", "train"]
