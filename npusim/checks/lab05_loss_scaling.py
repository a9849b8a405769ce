"""Checks of lab 05 (FP16 precision), exercise 3: a dynamic loss scaler, on hidden gradient streams and in
training."""

from __future__ import annotations

import numpy as np

from ..kernels import loss_scaling as ls
from ._core import CheckFailed, call_learner, case_rng, fixed_rng, hidden_seed, passed
from ._flow import Skeleton

__all__ = ["loss_scaler"]

HINTS = {
    "loss-scaler": (
        "Section 6's rule, as PyTorch's GradScaler applies it after every backward pass: look at this step's "
        "gradients; skip and back off, or unscale, apply and maybe grow. The gradients you return are fp32 "
        "(the master weights are).",
        "step has two branches. A step whose gradients cannot be used (which values make a gradient unusable, "
        "and in how many of the parameters must you look?) is skipped: the scale backs off. Otherwise the "
        "gradients are unscaled in float32 (by which scale: the one they were computed with, or the next?), "
        "and the step counts as clean; after growth_interval clean steps in a row the scale grows. The "
        "scaler has to remember something between steps for that.",
        Skeleton(
            "class MyLossScaler:\n"
            "    def __init__(self, scale=2.0 ** 16, growth_interval=2000):\n"
            "        self.scale = float(scale)\n"
            "        self.growth_interval = growth_interval\n"
            "        self.clean_steps = 0\n"
            "\n"
            "    def step(self, grads16):\n"
            "        if ___:                        # this step's gradients cannot be used\n"
            "            self.scale /= 2\n"
            "            self.clean_steps = ___\n"
            "            return None\n"
            "        grads = [___ for g in grads16]\n"
            "        self.clean_steps += 1\n"
            "        if ___:\n"
            "            self.scale *= 2\n"
            "            self.clean_steps = 0\n"
            "        return grads\n",
            call="check.loss_scaler(MyLossScaler)",
            setup="import numpy as np\nfrom npusim import checks as check"),
    ),
}


def _grads(rng, size: float, shapes=((8, 8), (24,))) -> list[np.ndarray]:
    """True (fp32) gradients of two parameters, magnitudes spread log-normally around ``size``."""
    return [(rng.choice([-1.0, 1.0], s) * size * 10.0 ** rng.normal(0, 0.7, s)).astype(np.float32) for s in shapes]


def _stream(kind: str, rng) -> tuple[float, int, list]:
    """(initial scale, growth_interval, steps): each step is ``(true gradients, specials)`` where specials
    are ``(parameter, value)`` pairs written into the fp16 gradients after scaling (an inf or NaN that
    does not depend on the scale)."""
    clean = [(_grads(rng, 1e-4), ()) for _ in range(12)]
    if kind == "clean steps, growth every 5":
        return 2.0 ** 10, 5, clean
    if kind == "an overflow burst (3 steps in a row) between clean steps":
        burst = [(_grads(rng, 1e-4) + [], ()) for _ in range(3)]
        for g, _ in burst:
            g[0][0] = 1e3                            # x 2^16 overflows; halving 3 times is not enough either
        return 2.0 ** 16, 4, clean[:3] + burst + clean[3:10]
    if kind == "a NaN (and no inf) in one gradient":
        return 2.0 ** 8, 3, clean[:4] + [(_grads(rng, 1e-4), ((1, np.nan),))] + clean[4:8]
    if kind == "-inf in the second parameter only":
        return 2.0 ** 8, 3, clean[:2] + [(_grads(rng, 1e-4), ((1, -np.inf),))] + clean[2:6]
    if kind == "a gradient exactly at fp16's largest finite value":
        g = _grads(rng, 1e-4)
        g[1][3] = np.float32(65504.0 / 2.0 ** 12)      # x 2^12: exactly 65504, finite
        g2 = _grads(rng, 1e-4)
        g2[1][5] = np.float32(65520.0 / 2.0 ** 12)     # rounds to inf in fp16
        return 2.0 ** 12, 50, clean[:2] + [(g, ())] + clean[2:4] + [(g2, ())] + clean[4:6]
    if kind == "a subnormal tail: tiny gradients, the scale must grow":
        return 2.0 ** 3, 2, [(_grads(rng, 3e-9), ()) for _ in range(12)]
    if kind == "growth_interval 1":
        return 1.0, 1, clean[:8]
    if kind == "an overflow resets the count of clean steps":
        over = _grads(rng, 1e-4)
        over[0][1] = 1e9
        return 2.0 ** 6, 3, clean[:2] + [(over, ())] + clean[2:8]
    raise KeyError(kind)


STREAMS = ("clean steps, growth every 5", "an overflow burst (3 steps in a row) between clean steps",
           "a NaN (and no inf) in one gradient", "-inf in the second parameter only",
           "a gradient exactly at fp16's largest finite value", "a subnormal tail: tiny gradients, the scale must grow",
           "growth_interval 1", "an overflow resets the count of clean steps")


def _random_stream(rng) -> tuple[float, int, list]:
    steps = []
    for _ in range(int(rng.integers(20, 40))):
        g = _grads(rng, float(10.0 ** rng.uniform(-9, -3)))
        specials = ()
        if rng.random() < 0.15:
            g[int(rng.integers(2))][0] = np.float32(1e8)
        elif rng.random() < 0.05:
            specials = ((int(rng.integers(2)), float(rng.choice([np.nan, np.inf, -np.inf]))),)
        steps.append((g, specials))
    return float(2.0 ** int(rng.integers(0, 24))), int(rng.integers(1, 8)), steps


def _to_half(grads, specials, scale: float) -> list[np.ndarray]:
    """What the backward pass stores: each gradient times the scale, rounded to fp16 (inf beyond 65504)."""
    with np.errstate(over="ignore"):
        out = [(g * np.float32(scale)).astype(np.float16) for g in grads]
    for p, v in specials:
        out[p][2] = v
    return out


def _specials(g16: list[np.ndarray]) -> str:
    parts = []
    for p, g in enumerate(g16):
        kinds = [k for k, m in (("NaN", np.isnan(g)), ("+inf", np.isposinf(g)), ("-inf", np.isneginf(g))) if m.any()]
        if kinds:
            parts.append(f"{' and '.join(kinds)} in parameter {p + 1}")
    return ", ".join(parts)


def _scale_of(name: str, scaler, where: str) -> float:
    s = getattr(scaler, "scale", None)
    if isinstance(s, bool) or not isinstance(s, (int, float, np.integer, np.floating)):
        raise CheckFailed(name, f"{where} self.scale must be a number, got {type(s).__name__} {s!r}")
    return float(s)


def _grads_cause(got: np.ndarray, g16: np.ndarray, old: float, new: float) -> str:
    """Which known mistake gives ``got`` from the fp16 gradient ``g16``."""
    g32 = g16.astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        known = [((g16 / np.float16(old)).astype(np.float32) if old < 65504 else None,
                  "you divided in fp16: the small gradients (the subnormal tail) lose their bits or become 0; "
                  "convert to float32 first, then divide"),
                 (g32, "they are still scaled: divide by self.scale"),
                 (g32 * np.float32(old), "you multiplied by the scale: divide by it"),
                 (g32 / np.float32(new) if new != old else None,
                  "you divided by the updated scale: unscale with the scale these gradients were computed with, "
                  "before you change it")]
    for value, why in known:
        if value is not None and np.array_equal(got.astype(np.float32), value, equal_nan=True):
            return why
    return "the true gradient is the fp16 gradient, in float32, divided by the scale it was computed with"


def _run_stream(name: str, cls, label: str, init: float, interval: int, steps: list) -> None:
    ref = ls.DynamicLossScaler(init, interval)
    mine = call_learner(name, cls, scale=init, growth_interval=interval, case={"stream": label},
                        what="your class")
    history = []
    for i, (grads, specials) in enumerate(steps):
        where = f"in the hidden stream '{label}' (initial scale {init:g}, growth_interval {interval}), step {i}"
        old = _scale_of(name, mine, where + ":")
        g16 = _to_half(grads, specials, old)
        want = ref.step([g.copy() for g in g16])
        got = call_learner(name, mine.step, [g.copy() for g in g16], case={"stream": label, "step": i},
                           what="your step()")
        new = _scale_of(name, mine, where + ", after step():")
        bad = _specials(g16)
        if want is None and got is not None:
            raise CheckFailed(name, f"{where}: the fp16 gradients hold {bad}, so the step must be skipped (return "
                                    f"None) and the scale halved; your step() returned gradients. np.isfinite is "
                                    f"False for inf, -inf and NaN alike, and every parameter's array counts.")
        if want is not None and got is None:
            big = max(float(np.abs(g).max()) for g in g16)
            why = (" 65504 is fp16's largest FINITE value: test for inf/NaN with np.isfinite, not with a threshold."
                   if big == 65504 else "")
            raise CheckFailed(name, f"{where}: every fp16 gradient is finite (the largest is {big:g}), but your "
                                    f"step() skipped it (returned None).{why}")
        if got is not None:
            if not isinstance(got, (list, tuple)) or len(got) != len(want):
                raise CheckFailed(name, f"{where}: step() must return a list of {len(want)} arrays (one per "
                                        f"parameter) or None, got {type(got).__name__}")
            for p, (a, b) in enumerate(zip(got, want)):
                a = np.asarray(a)
                if a.dtype != np.float32 or a.shape != b.shape:
                    raise CheckFailed(name, f"{where}: parameter {p + 1}'s gradient is {a.dtype.name} of shape "
                                            f"{a.shape}; the fp32 master weights need float32 of shape {b.shape}")
                if not np.array_equal(a, b):
                    raise CheckFailed(name, f"{where}: parameter {p + 1}'s gradient is wrong (expected "
                                            f"{b.reshape(-1)[0]:.6g} at its first element, got "
                                            f"{a.reshape(-1)[0]:.6g}): " + _grads_cause(a, g16[p], old, ref.scale
                                                                                        if want is not None else old))
        history.append(f"{old:g}" + (" skip" if want is None else ""))
        if new != ref.scale:
            if want is None:
                what = (f"a skipped step halves the scale: expected {ref.scale:g}, your scale is {new:g}" +
                        (" (unchanged)" if new == old else ""))
            elif ref.scale == 2 * old:
                what = (f"this is clean step number {interval} in a row (growth_interval), so the scale doubles: "
                        f"expected {ref.scale:g}, your scale is {new:g}")
            elif new == 2 * old:
                since = max((j for j, h in enumerate(history[:-1]) if h.endswith("skip")), default=None)
                n = ref.clean_steps
                what = (f"your scale doubled to {new:g}, but only {n} clean step{'s' if n != 1 else ''} in a row "
                        f"{'have' if n != 1 else 'has'} passed "
                        f"(growth_interval is {interval})" +
                        (f"; the overflow at step {since} resets the count" if since is not None else
                         "; after a growth the count starts again from 0"))
            else:
                what = f"expected the scale {ref.scale:g} for the next step, your scale is {new:g}"
            raise CheckFailed(name, f"{where}: {what}. Scales so far: {', '.join(history[-8:])}.")


TRAIN_TARGET = 1.10
"""The network trained in fp16 with the learner's scaler must end within this factor of the fp32 loss."""


def loss_scaler(cls) -> None:
    """Lab 05, exercise 3: ``cls(scale=..., growth_interval=...)`` with ``step(grads16) -> fp32 grads | None``
    follows the dynamic loss-scaling rule on hidden gradient streams (overflow bursts, NaN and -inf, a
    gradient at 65504, a subnormal tail, growth intervals, random streams from the grading seed) and trains
    the lab's network in fp16 to within :data:`TRAIN_TARGET` of its fp32 loss."""
    __tracebackhide__ = True
    name = "loss_scaler"
    if not isinstance(cls, type):
        raise CheckFailed(name, f"pass your class (MyLossScaler), not {type(cls).__name__}")
    streams = [(k, *_stream(k, fixed_rng(name, k))) for k in STREAMS]
    rng = case_rng(name, "random")
    streams += [(f"random stream {i + 1}", *_random_stream(rng)) for i in range(3)]
    for label, init, interval, steps in streams:
        _run_stream(name, cls, label, init, interval, steps)
    seed = 1000 + hidden_seed() % 1000
    run32 = ls.train(fp32=True, seed=seed)
    scaler = call_learner(name, cls, scale=2.0 ** 40, growth_interval=20, case={"training seed": seed},
                          what="your class")
    mine = call_learner(name, ls.train, scaler, seed=seed, case={"training seed": seed}, what="your scaler")
    ratio = mine.final_loss() / run32.final_loss()
    if not ratio <= TRAIN_TARGET:
        raise CheckFailed(name, f"the streams pass, but the lab's network (training seed {seed}) ends at loss "
                                f"{mine.final_loss():.4g} in fp16 with your scaler against {run32.final_loss():.4g} in "
                                f"fp32 ({len(mine.skipped)} steps skipped); the target is {TRAIN_TARGET}x.")
    passed(name, f"{len(streams)} hidden gradient streams follow the rule; the network trains in fp16 to "
                 f"{ratio:.3f}x its fp32 loss ({len(mine.skipped)} of {len(mine.losses)} steps skipped)")
