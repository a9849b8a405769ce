"""npusim.precision: the double-thousandth bar against a straightforward numpy oracle, and its edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from npusim.precision import (DEFAULT_FLOOR, FLOORS, Report, default_floor, double_thousandth, element_errors,
                              relative_l2)

pytestmark = pytest.mark.lab05

FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None,
                max_examples=150)


def oracle(actual, expected, floor, rtol=1e-3, max_fraction=1e-3):
    """Element by element, in plain Python: the rules of the module docstring, written independently."""
    a = [float(v) for v in np.asarray(actual, dtype=np.float64).ravel()]
    e = [float(v) for v in np.asarray(expected, dtype=np.float64).ravel()]
    errs = []
    for x, y in zip(a, e):
        if math.isnan(y):
            errs.append(0.0 if math.isnan(x) else math.inf)
        elif math.isinf(y):
            errs.append(0.0 if x == y else math.inf)
        elif not math.isfinite(x):
            errs.append(math.inf)
        else:
            errs.append(abs(x - y) / max(abs(y), floor))
    if not errs:
        return True, 0.0, 0.0
    above = sum(1 for v in errs if v > rtol)
    frac = above / len(errs)
    return frac <= max_fraction, frac, max(errs)


finite = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False, width=64)
special = st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 1e-9, -1e-7, 65504.0])
values = st.one_of(finite, special)


@st.composite
def pairs(draw):
    """(actual, expected, floor): expected with specials; actual near it (noise up to a few 0.1 %), or equal,
    or independent, element by element."""
    n = draw(st.integers(0, 60))
    exp = np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=np.float64)
    kind = draw(st.lists(st.sampled_from(["equal", "noise", "other"]), min_size=n, max_size=n))
    noise = np.array(draw(st.lists(st.floats(-4e-3, 4e-3), min_size=n, max_size=n)), dtype=np.float64)
    other = np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=np.float64)
    with np.errstate(all="ignore"):
        act = np.where(np.array(kind) == "equal", exp,
                       np.where(np.array(kind) == "noise", exp * (1 + noise), other)) if n else exp.copy()
    floor = draw(st.sampled_from([2.0 ** -10, 2.0 ** -20, 1e-3, 1.0]))
    return act, exp, floor


@FAST
@given(pairs())
def test_matches_oracle(p):
    act, exp, floor = p
    rep = double_thousandth(act, exp, floor=floor)
    ok, frac, mx = oracle(act, exp, floor)
    assert rep.passed == ok
    assert rep.fraction_above == pytest.approx(frac, abs=1e-15)
    assert (rep.max_error == mx) or rep.max_error == pytest.approx(mx, rel=1e-12)
    assert rep.n_total == act.size and rep.n_above == round(frac * act.size)


@FAST
@given(hnp.arrays(np.float16, hnp.array_shapes(max_dims=3, max_side=12),
                  elements=st.floats(-60000, 60000, width=16, allow_nan=False, allow_infinity=False)))
def test_a_correctly_rounded_fp16_result_always_passes(x):
    """The floor 2^-10 is chosen so that rounding a float64 result to fp16 never fails the bar."""
    exact = x.astype(np.float64) * (1 + 1e-4)          # a float64 "true" value between fp16 numbers
    rounded = exact.astype(np.float16)
    rep = double_thousandth(rounded, exact)
    assert rep.floor == 2.0 ** -10
    assert rep.passed and rep.n_above == 0
    assert rep.max_error <= 2.0 ** -11 + 1e-15


@FAST
@given(hnp.arrays(np.float64, st.integers(1, 200), elements=st.floats(1e-3, 1e3)), st.integers(-20, 20))
def test_power_of_two_scaling_does_not_change_the_relative_part(e, k):
    e = e * np.where(np.arange(e.size) % 2, 1.0, -1.0)
    a = e * (1 + 5e-4)
    s = 2.0 ** k
    r1 = element_errors(a, e, floor=1e-300)
    r2 = element_errors(a * s, e * s, floor=1e-300)
    assert np.allclose(r1, r2, rtol=1e-12, atol=0)


def test_exactly_at_the_bar_passes():
    e = np.full(2000, 1000.0)
    rep = double_thousandth(np.full(2000, 1001.0), e)
    assert rep.passed and rep.max_error == 1e-3 and rep.n_above == 0
    a = e.copy()
    a[:2] = 1002.0                       # 2 of 2000 = exactly 0.1 %: still passes
    rep = double_thousandth(a, e)
    assert rep.passed and rep.fraction_above == 1e-3 and rep.n_above == 2
    a[2] = 1002.0                        # 3 of 2000: fails
    rep = double_thousandth(a, e)
    assert not rep.passed and rep.n_above == 3 and rep.worst_index == (0,)


def test_zeros_use_the_absolute_floor():
    e = np.zeros(1000)
    a = np.zeros(1000, dtype=np.float16)
    a[:10] = 1e-7                        # below rtol * floor = 9.5e-7: fine
    assert double_thousandth(a, e).passed
    a[:10] = 2e-6                        # above: 10 of 1000 = 1 %
    rep = double_thousandth(a, e)
    assert not rep.passed and rep.n_above == 10
    assert rep.max_error == pytest.approx(float(np.float16(2e-6)) / 2.0 ** -10)
    assert double_thousandth(np.zeros(5), np.zeros(5)).max_error == 0.0


def test_special_values():
    e = np.array([np.nan, np.nan, np.inf, -np.inf, np.inf, 1.0, 1.0, 0.0])
    a = np.array([np.nan, 0.0, np.inf, np.inf, 1e300, np.inf, np.nan, -0.0])
    err = element_errors(a, e, floor=1e-3)
    assert list(err) == [0.0, np.inf, 0.0, np.inf, np.inf, np.inf, np.inf, 0.0]
    rep = double_thousandth(a, e)
    assert not rep.passed and rep.max_error == np.inf and rep.n_above == 5
    # a single overflow anywhere in a large tensor is enough to fail the max error, not the fraction
    big = np.ones(10_000)
    out = big.copy()
    out[123] = np.inf
    rep = double_thousandth(out, big)
    assert rep.passed and rep.max_error == np.inf and rep.worst_index == (123,)


def test_default_floors_and_arguments():
    assert default_floor(np.float16) == FLOORS["float16"] == 2.0 ** -10
    assert default_floor("float32") == 2.0 ** -20
    assert default_floor(np.float64) == DEFAULT_FLOOR
    assert double_thousandth(np.ones(3, np.float32), np.ones(3)).floor == 2.0 ** -20
    with pytest.raises(ValueError):
        element_errors(np.ones(3), np.ones(4))
    with pytest.raises(ValueError):
        element_errors(np.ones(3), np.ones(3), floor=0.0)
    rep = double_thousandth(np.array([]), np.array([]))
    assert isinstance(rep, Report) and rep.passed and rep.n_total == 0 and rep.worst_index == ()
    rep = double_thousandth(np.ones((2, 3)) * 1.1, np.ones((2, 3)), rtol=0.2)
    assert rep.passed and "PASS" in str(rep) and "PASS" in rep._repr_html_() and bool(rep)


def test_bfloat16_inputs():
    import ml_dtypes
    e = np.linspace(-3, 3, 101)
    a = e.astype(ml_dtypes.bfloat16)
    rep = double_thousandth(a, e)
    assert rep.floor == 2.0 ** -10
    assert not rep.passed          # bf16 keeps 8 bits: its rounding alone is above 0.1 %


def test_relative_l2():
    e = np.array([3.0, 4.0])
    assert relative_l2(e, e) == 0.0
    assert relative_l2(e * 1.01, e) == pytest.approx(0.01)
    assert relative_l2(np.array([np.inf, 0]), e) == math.inf
    assert relative_l2(np.zeros(2), np.zeros(2)) == 0.0
    assert relative_l2(np.ones(2), np.zeros(2)) == math.inf
