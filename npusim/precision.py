"""The accuracy bar of Ascend operators, "double thousandth" (双千分之一), as a reusable check.

An operator computed in fp16 passes when

1. each element's error is at most ``rtol`` = 0.1 % (0.001), and
2. at most ``max_fraction`` = 0.1 % of the elements are above that bar.

The error of one element, with ``a`` the actual value and ``e`` the expected (reference) value::

    error = |a - e| / max(|e|, floor)

For ``|e| >= floor`` this is the relative error. Near zero a relative error means nothing (any tiny
absolute difference is a huge relative one, and 0 vs 1e-9 is "infinitely" wrong), so below ``floor`` the
error is the absolute difference measured in units of the floor: such an element passes when
``|a - e| <= rtol * floor``. That is the **absolute floor**.

``floor`` defaults by the dtype of ``actual`` (the type the operator computed in): 2^-10 for fp16 and
bf16, 2^-20 for fp32 and everything else. These are the small-value thresholds of Huawei's MindStudio
accuracy tools (msprobe's "new precision standard") [S15]; MindStudio then applies a separate absolute
tolerance below the threshold, where this module keeps one continuous formula. With the fp16 floor a
correctly rounded fp16 result always passes: its relative rounding error is at most 2^-11 (0.049 %)
above the floor, and its absolute error at most 2^-22 (well under rtol * floor = 9.5e-7) below it. The
bar therefore measures what a kernel adds to the unavoidable rounding of its output.

Special values: where ``e`` is NaN, ``a`` must be NaN; where ``e`` is +-inf, ``a`` must be the same
infinity; where ``e`` is finite, ``a`` must be finite. A violated rule is an error of ``inf``. (An
operator that overflows to inf where the reference is finite has failed, however few such elements.)

The reference should be the exact result for the SAME inputs the operator received (e.g. a float64
convolution of the fp16 activations and weights): the bar judges the operator, not the quantisation of
its inputs, which is why Ascend applies it operator by operator and not to a whole network.

::

    from npusim.precision import double_thousandth
    rep = double_thousandth(y16, reference)
    rep.passed, rep.fraction_above, rep.max_error
    print(rep)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RTOL = 1e-3
"""The per-element bar: 0.1 %."""

MAX_FRACTION = 1e-3
"""The share of elements allowed above the bar: 0.1 %."""

FLOORS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -10, "float32": 2.0 ** -20}
"""Absolute floor of ``|expected|`` in the error's denominator, by the dtype of ``actual`` [S15]."""

DEFAULT_FLOOR = 2.0 ** -20
"""The floor for any dtype not in :data:`FLOORS` (float64, integers)."""


def default_floor(dtype) -> float:
    """The absolute floor for results of ``dtype`` (see the module docstring)."""
    return FLOORS.get(np.dtype(dtype).name, DEFAULT_FLOOR)


def element_errors(actual, expected, floor: float | None = None) -> np.ndarray:
    """The error of every element, ``|a - e| / max(|e|, floor)`` in float64, with the special-value rules
    of the module docstring (a violated rule is ``inf``; agreeing NaNs or infinities are 0)."""
    a_in = np.asarray(actual)
    e_in = np.asarray(expected)
    if a_in.shape != e_in.shape:
        raise ValueError(f"actual has shape {a_in.shape} but expected has shape {e_in.shape}")
    if floor is None:
        floor = default_floor(a_in.dtype)
    if not (floor > 0 and np.isfinite(floor)):
        raise ValueError(f"floor must be a positive finite number, got {floor!r}")
    a = a_in.astype(np.float64)
    e = e_in.astype(np.float64)
    finite_e = np.isfinite(e)
    both_finite = finite_e & np.isfinite(a)
    err = np.full(a.shape, np.inf)
    with np.errstate(invalid="ignore", over="ignore"):
        err[both_finite] = np.abs(a[both_finite] - e[both_finite]) / np.maximum(np.abs(e[both_finite]), floor)
    nan_e = np.isnan(e)
    err[nan_e & np.isnan(a)] = 0.0                 # the reference is NaN and so is the result: they agree
    inf_e = np.isinf(e)
    err[inf_e & (a == e)] = 0.0                     # the same infinity
    return err


@dataclass(frozen=True)
class Report:
    """The verdict of :func:`double_thousandth` and the numbers behind it."""

    passed: bool
    """``fraction_above <= max_fraction``."""
    fraction_above: float
    """Share of the elements whose error is above ``rtol`` (0 for an empty array)."""
    max_error: float
    """The largest element error (0 for an empty array; ``inf`` when a special-value rule is violated)."""
    n_above: int
    n_total: int
    worst_index: tuple
    """Index of the element with the largest error (``()`` for an empty array)."""
    rtol: float
    max_fraction: float
    floor: float

    def __bool__(self) -> bool:
        return self.passed

    def summary(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return (f"double thousandth: {verdict}: {self.n_above} of {self.n_total} elements "
                f"({self.fraction_above:.4%}) above {self.rtol:.1%} (allowed {self.max_fraction:.1%}); "
                f"max error {self.max_error:.3g} at {self.worst_index} (floor {self.floor:.3g})")

    def __str__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.passed else "#cf222e"
        return f"<span style='color:{colour}'><b>{'PASS' if self.passed else 'FAIL'}</b></span> " + \
            self.summary().split(": ", 2)[2]


def double_thousandth(actual, expected, *, rtol: float = RTOL, max_fraction: float = MAX_FRACTION,
                      floor: float | None = None) -> Report:
    """Ascend's accuracy bar: at most ``max_fraction`` of the elements may have an error above ``rtol``.

    ``actual``: the operator's output (its dtype picks the default ``floor``, see :func:`default_floor`);
    ``expected``: the exact result for the same inputs (float64 is best). Error and special values as in
    the module docstring; an element exactly at the bar (``error == rtol``) passes, and so does a share
    exactly equal to ``max_fraction``."""
    a = np.asarray(actual)
    if floor is None:
        floor = default_floor(a.dtype)
    err = element_errors(a, expected, floor)
    n = err.size
    if n == 0:
        return Report(True, 0.0, 0.0, 0, 0, (), rtol, max_fraction, float(floor))
    above = ~(err <= rtol)          # NaN errors cannot occur, but would count as above
    n_above = int(above.sum())
    frac = n_above / n
    worst = int(np.argmax(err))
    idx = tuple(int(i) for i in np.unravel_index(worst, err.shape))
    return Report(frac <= max_fraction, frac, float(err.flat[worst]), n_above, n, idx, rtol, max_fraction,
                  float(floor))


def relative_l2(actual, expected) -> float:
    """Norm-wise relative error ``||a - e||_2 / ||e||_2`` (one number per tensor: how far a whole layer's
    output is from the reference; inf when ``actual`` holds inf or NaN)."""
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if not np.isfinite(a).all():
        return float("inf")
    den = np.linalg.norm(e)
    num = np.linalg.norm(a - e)
    return float(num / den) if den else (0.0 if num == 0 else float("inf"))


__all__ = ["RTOL", "MAX_FRACTION", "FLOORS", "DEFAULT_FLOOR", "default_floor", "element_errors", "Report",
           "double_thousandth", "relative_l2"]
