"""Checks of lab 05 (FP16 precision): the accuracy bar, and a layer that meets it."""

from __future__ import annotations

import math

import numpy as np

from ..kernels import mixed_precision as mp
from ..precision import default_floor
from ..precision import double_thousandth as _double_thousandth
from ._core import CheckFailed, call_learner, passed

__all__ = ["accuracy_bar", "fp16_layer"]


# --- exercise 1: the accuracy bar -------------------------------------------------------------------------

def _bar_cases() -> list[tuple[str, np.ndarray, np.ndarray, float]]:
    """(what the case tests, actual, expected, floor)."""
    rng = np.random.default_rng(500)
    cases = []
    e = rng.standard_normal(5000)
    cases.append(("small relative noise (about 0.03 %)", e * (1 + 3e-4 * rng.standard_normal(e.size)), e, 2.0 ** -20))
    cases.append(("relative noise of about 0.1 %", e * (1 + 1e-3 * rng.standard_normal(e.size)), e, 2.0 ** -20))
    e16 = (rng.standard_normal((40, 50)) * 3).astype(np.float64)
    a16 = e16.astype(np.float16)
    cases.append(("an fp16 result (a 2-D array), exactly rounded", a16, e16, 2.0 ** -10))
    z = np.zeros(1000)
    az = np.zeros(1000)
    az[:500] = 1e-7
    az[500:502] = 1e-5
    cases.append(("expected all zeros, actual tiny values (the floor decides)", az, z, 2.0 ** -10))
    at = np.full(2000, 1001.0)
    cases.append(("every element exactly at the bar (1001 vs 1000)", at, np.full(2000, 1000.0), 2.0 ** -20))
    two = np.full(2000, 1000.0)
    two[:2] = 1002.0
    cases.append(("2 of 2000 elements above the bar: exactly the allowed 0.1 %", two, np.full(2000, 1000.0), 2.0 ** -20))
    three = two.copy()
    three[2] = 1002.0
    cases.append(("3 of 2000 elements above the bar", three, np.full(2000, 1000.0), 2.0 ** -20))
    en = rng.standard_normal(3000)
    an = en.copy()
    en[:5] = np.nan
    an[:3] = np.nan                    # NaN where the reference is NaN: agreement
    an[3:5] = 0.0                      # a number where the reference is NaN: wrong
    cases.append(("NaN in the reference (matched by NaN, or not)", an, en, 2.0 ** -20))
    ei = rng.standard_normal(3000)
    ai = ei.copy()
    ei[:3] = np.inf
    ai[:3] = np.inf                    # the same infinity: agreement
    ei[3] = -np.inf
    ai[3] = np.inf                     # the wrong infinity
    cases.append(("inf in the reference (same sign, or not)", ai, ei, 2.0 ** -20))
    eo = rng.standard_normal(3000)
    ao = eo.copy()
    ao[7] = np.inf                     # an overflow where the reference is finite
    cases.append(("one overflow (inf) where the reference is finite", ao, eo, 2.0 ** -20))
    en2 = rng.standard_normal(4000)
    an2 = en2 * (1 + 2e-4)
    an2[10] = np.nan                   # NaN where the reference is a number
    cases.append(("one NaN where the reference is a number", an2, en2, 2.0 ** -20))
    return cases


def accuracy_bar(fn) -> None:
    """Lab 05, exercise 1: ``fn(actual, expected, floor) -> (passed, fraction_above, max_error)`` agrees with
    :func:`npusim.precision.double_thousandth` on hidden arrays (noise, fp16, zeros, NaN, inf, at the bar)."""
    __tracebackhide__ = True
    name = "accuracy_bar"
    cases = _bar_cases()
    for what, actual, expected, floor in cases:
        want = _double_thousandth(actual, expected, floor=floor)
        got = call_learner(name, fn, actual.copy(), expected.copy(), floor, case={"case": what},
                           what="your function")
        try:
            ok, frac, mx = got
            ok, frac, mx = bool(ok), float(frac), float(mx)
        except (TypeError, ValueError):
            raise CheckFailed(name, f"on the hidden case '{what}' expected a tuple (passed, fraction_above, "
                                    f"max_error), got {got!r}") from None
        same_max = (mx == want.max_error or (math.isfinite(mx) and math.isfinite(want.max_error)
                                             and abs(mx - want.max_error) <= 1e-9 * max(want.max_error, 1e-300)))
        if ok != want.passed or abs(frac - want.fraction_above) > 1e-12 or not same_max:
            raise CheckFailed(name, f"on the hidden case '{what}' ({actual.size} elements, floor {floor:.3g}) "
                                    f"expected passed={want.passed}, fraction_above={want.fraction_above:.6g}, "
                                    f"max_error={want.max_error:.6g}; got passed={ok}, fraction_above={frac:.6g}, "
                                    f"max_error={mx:.6g}. Look at: the error |a - e| / max(|e|, floor); an error "
                                    f"exactly at 0.001 passes, and so does a fraction exactly at 0.001; NaN and "
                                    f"inf follow the rules above the exercise.")
    passed(name, f"{len(cases)} hidden cases agree with npusim.precision.double_thousandth (zeros, NaN, inf, "
                 f"exactly at the bar)")


# --- exercise 2: meet the bar -----------------------------------------------------------------------------

_LAYER_CASES = [  # (what, x shape, Cout, input scale, weight std): K = Cin * 9
    ("64 channels, K = 576", (1, 64, 12, 12), 48, 1.0, None),
    ("outputs beyond fp16's range", (2, 16, 9, 7), 24, 3000.0, 1.0),
    ("small activations", (1, 32, 8, 10), 32, 1e-2, None),
    ("128 channels, K = 1152", (1, 128, 6, 6), 32, 1.0, None),
]


class _Recorder:
    """The ``conv`` the check hands to the learner's function: the package's conv_layer, recording what
    it was called with."""

    def __init__(self):
        self.calls: list[tuple[str, str]] = []

    def __call__(self, x, w, **kwargs):
        self.calls.append((np.asarray(x).dtype.name, np.asarray(w).dtype.name))
        return mp.conv_layer(x, w, **kwargs)


def fp16_layer(fn) -> None:
    """Lab 05, exercise 2: ``fn(x16, w16, conv) -> (y16, scale)`` runs a 3x3 convolution (padding 1) with
    fp16 operands on the Cube (through ``conv``) and returns fp16 values ``y16`` with ``y16 * scale``
    passing the double-thousandth bar against the exact result, on hidden layers."""
    __tracebackhide__ = True
    name = "fp16_layer"
    for i, (what, xs, cout, xscale, wstd) in enumerate(_LAYER_CASES):
        rng = np.random.default_rng(520 + i)
        cin = xs[1]
        std = wstd if wstd is not None else math.sqrt(2 / (cin * 9))
        x16 = (rng.standard_normal(xs) * xscale).astype(np.float16)
        w16 = (rng.standard_normal((cout, cin, 3, 3)) * std).astype(np.float16)
        case = f"'{what}': x {xs}, w {(cout, cin, 3, 3)}, K = {cin * 9}"
        rec = _Recorder()
        out = call_learner(name, fn, x16.copy(), w16.copy(), rec, case={"layer": case}, what="your function")
        try:
            y16, scale = out
            scale = float(scale)
        except (TypeError, ValueError):
            raise CheckFailed(name, f"expected a tuple (y16, scale), got {type(out).__name__}") from None
        y16 = np.asarray(y16)
        if not rec.calls:
            raise CheckFailed(name, f"on {case} your function never called `conv`: run the layer on the Cube "
                                    f"with conv(x, w, ...)")
        if any(c != ("float16", "float16") for c in rec.calls):
            raise CheckFailed(name, f"on {case} `conv` was called with {sorted(set(rec.calls))} operands; the "
                                    f"point is fp16 operands on the Cube (float16 x and w)")
        if y16.dtype != np.float16:
            raise CheckFailed(name, f"on {case} y16 is {y16.dtype}; activations are stored as float16 (half the "
                                    f"bytes of fp32): return float16 values and a scale")
        if y16.shape != (xs[0], cout, xs[2], xs[3]):
            raise CheckFailed(name, f"on {case} y16 has shape {y16.shape}, expected {(xs[0], cout, xs[2], xs[3])}")
        if not (math.isfinite(scale) and scale > 0):
            raise CheckFailed(name, f"on {case} the scale is {scale!r}; it must be a positive number")
        if not np.isfinite(y16).all():
            n = int((~np.isfinite(y16)).sum())
            raise CheckFailed(name, f"on {case} {n} values of y16 are inf or NaN: the output exceeds fp16's "
                                    f"largest value (65504). Look at: scaling (divide before, multiply after; by "
                                    f"what kind of number is that exact?), and what an fp16 accumulator does with "
                                    f"large partial sums.")
        want = mp.conv_reference(x16, w16)
        rep = _double_thousandth(y16.astype(np.float64) * scale, want, floor=default_floor(np.float16))
        if not rep.passed:
            raise CheckFailed(name, f"on {case} {rep.fraction_above:.2%} of the elements are more than 0.1 % off "
                                    f"(allowed 0.1 %), max error {rep.max_error:.3g}. Look at: the accumulator's "
                                    f"type (what does K do to an fp16 sum?), and whether your scaling rounds the "
                                    f"inputs (only powers of two scale fp16 exactly).")
    passed(name, f"{len(_LAYER_CASES)} hidden layers (K up to 1152, outputs beyond 65504, small activations) meet "
                 f"the double-thousandth bar with fp16 operands")
