"""Checks of lab 05 (FP16 precision): the accuracy bar, and a layer that meets it (the loss scaler's check is
in :mod:`.lab05_loss_scaling`)."""

from __future__ import annotations

import math

import numpy as np

from ..kernels import mixed_precision as mp
from ..precision import default_floor
from ..precision import double_thousandth as _double_thousandth
from ._core import CheckFailed, call_learner, case_rng, describe, fixed_rng, passed
from ._flow import Skeleton

__all__ = ["accuracy_bar", "fp16_layer"]

HINTS = {
    "accuracy-bar": (
        "Section 4 is the whole specification: one error per element, then a count. Work in float64, and "
        "handle the special values before you divide: they are the rules that break a naive formula.",
        "Give every element an error that stays inf unless a rule says otherwise; compute the formula only "
        "where it means something; then set to 0 the errors of the special values that agree. Only then "
        "count: the share of elements above the bar, and the verdict on that share (mind which comparisons "
        "are strict: the text says what 'at the bar' means). An empty array passes.",
        Skeleton(
            "def my_double_thousandth(actual, expected, floor):\n"
            "    a = np.asarray(actual, dtype=np.float64)\n"
            "    e = np.asarray(expected, dtype=np.float64)\n"
            "    err = np.full(a.shape, np.inf)\n"
            "    both = ___                       # where the formula means something\n"
            "    err[both] = np.abs(a[both] - e[both]) / ___\n"
            "    err[___] = 0.0                   # both NaN: they agree\n"
            "    err[___] = 0.0                   # the same infinity\n"
            "    if err.size == 0:\n"
            "        return True, 0.0, 0.0\n"
            "    fraction = ___\n"
            "    return bool(fraction <= 1e-3), float(fraction), float(err.max())\n",
            call="check.accuracy_bar(my_double_thousandth)",
            setup="import numpy as np\nfrom npusim import checks as check"),
    ),
    "fp16-layer": (
        "Two things can push a layer off the bar (section 2 and section 5): what the accumulator does with a "
        "long K, and values that leave fp16's range. The Cube's output must be fp16: any scaling happens "
        "before the Cube, and must not cost bits of the inputs.",
        "Choose the accumulator that keeps only the output's rounding. Then deal with range: run the layer, "
        "look at what came out, and if it does not fit fp16, make the input smaller by a factor that costs "
        "no bits and try again; return the output with the factor you used. Which factors cost no bits, and "
        "why should the factor be as small as possible (section 5's gain-0.25 stack)?",
        Skeleton(
            "def fp16_layer(x16, w16, conv):\n"
            "    scale = 1.0\n"
            "    for _ in range(64):\n"
            "        xs = (x16.astype(np.float32) / scale).astype(np.float16)\n"
            "        y16 = conv(xs, w16, acc_dtype=___, out_dtype=np.float16).output\n"
            "        if ___:                       # the output fits fp16\n"
            "            return y16, scale\n"
            "        scale = ___                   # the next divisor: exact, and as small as possible\n"
            "    raise ValueError('no power of two makes this layer fit fp16')\n",
            call="check.fp16_layer(fp16_layer)",
            setup="import numpy as np\nfrom npusim import checks as check"),
    ),
}


# --- exercise 1: the accuracy bar -------------------------------------------------------------------------

def _bar_cases() -> list[tuple[str, np.ndarray, np.ndarray, float, str]]:
    """(what the case tests, actual, expected, floor, the rule it tests, in words)."""
    rng = fixed_rng("accuracy_bar", "fixed")
    generic = "the error is |a - e| / max(|e|, floor), in float64"
    cases = []
    e = rng.standard_normal(5000)
    cases.append(("small relative noise (about 0.03 %)", e * (1 + 3e-4 * rng.standard_normal(e.size)), e, 2.0 ** -20,
                  generic))
    cases.append(("relative noise of about 0.1 %", e * (1 + 1e-3 * rng.standard_normal(e.size)), e, 2.0 ** -20,
                  generic + "; the fraction is the share of elements strictly above 1e-3"))
    e16 = (rng.standard_normal((40, 50)) * 3).astype(np.float64)
    a16 = e16.astype(np.float16)
    a16[7, :3] *= np.float16(1.01)
    cases.append(("an fp16 result (a 2-D array of 2000), rounded, 3 elements 1 % off", a16, e16, 2.0 ** -10,
                  "the fraction counts every element of a 2-D array (err.size, not len())"))
    z = np.zeros(1000)
    az = np.zeros(1000)
    az[:500] = 1e-7
    az[500:502] = 1e-5
    cases.append(("expected all zeros, actual tiny values (the floor decides)", az, z, 2.0 ** -10,
                  "where |e| is below the floor the error is |a - e| / floor: max(|e|, floor) in the denominator"))
    cases.append(("every element exactly at the bar (1001 vs 1000)", np.full(2000, 1001.0), np.full(2000, 1000.0),
                  2.0 ** -20, "an error exactly at 0.001 is not above the bar: count err > 1e-3, not >="))
    two = np.full(2000, 1000.0)
    two[:2] = 1002.0
    cases.append(("2 of 2000 elements above the bar: exactly the allowed 0.1 %", two, np.full(2000, 1000.0),
                  2.0 ** -20, "a fraction exactly at 0.1 % passes: fraction <= 1e-3, not <"))
    three = two.copy()
    three[2] = 1002.0
    cases.append(("3 of 2000 elements above the bar", three, np.full(2000, 1000.0), 2.0 ** -20,
                  "3 of 2000 is 0.15 %, more than the allowed 0.1 %: the layer fails"))
    en = rng.standard_normal(3000)
    an = en.copy()
    en[:5] = np.nan
    an[:3] = np.nan
    an[3:5] = 0.0
    cases.append(("NaN in the reference (matched by NaN, or not)", an, en, 2.0 ** -20,
                  "where e is NaN, a NaN agrees (error 0) and a number is an error (inf)"))
    ei = rng.standard_normal(3000)
    ai = ei.copy()
    ei[:3] = np.inf
    ai[:3] = np.inf
    ei[3] = -np.inf
    ai[3] = np.inf
    cases.append(("inf in the reference (same sign, or not)", ai, ei, 2.0 ** -20,
                  "where e is an infinity, the same infinity agrees (error 0) and anything else is an error (inf)"))
    eo = rng.standard_normal(3000)
    ao = eo.copy()
    ao[7] = np.inf
    cases.append(("one overflow (inf) where the reference is finite", ao, eo, 2.0 ** -20,
                  "where e is finite, an inf in a is an error of inf (the max error is inf)"))
    en2 = rng.standard_normal(4000)
    an2 = en2 * (1 + 2e-4)
    an2[10] = np.nan
    cases.append(("one NaN where the reference is a number", an2, en2, 2.0 ** -20,
                  "where e is finite, a NaN in a is an error of inf, not NaN (np.max of NaN is NaN)"))
    cases.append(("an empty array", np.zeros(0), np.zeros(0), 2.0 ** -20,
                  "an empty array passes, with fraction 0 and max error 0"))
    r = case_rng("accuracy_bar", "random")
    for i in range(3):
        n = int(r.integers(500, 5000))
        e = r.standard_normal(n) * 10.0 ** r.uniform(-6, 3)
        a = e * (1 + r.uniform(1e-4, 3e-3) * r.standard_normal(n))
        for special in (np.nan, np.inf, -np.inf):
            k = r.integers(0, 4)
            a[r.integers(0, n, k)] = special
        floor = float(2.0 ** -int(r.choice([10, 20])))
        cases.append((f"random case {i + 1}: noise, a few NaN and inf", a, e, floor, generic + ", with the NaN and "
                      "inf rules"))
    return cases


def _bar_result(name: str, got, what: str) -> tuple[bool, float, float]:
    try:
        ok, frac, mx = got
    except (TypeError, ValueError):
        raise CheckFailed(name, f"on the hidden case '{what}' expected a tuple (passed, fraction_above, max_error), "
                                f"got {type(got).__name__} {got!r:.80}") from None
    if not isinstance(ok, (bool, np.bool_)):
        raise CheckFailed(name, f"on the hidden case '{what}' passed must be a bool, got {type(ok).__name__} {ok!r}")
    try:
        return bool(ok), float(frac), float(mx)
    except (TypeError, ValueError):
        raise CheckFailed(name, f"on the hidden case '{what}' fraction_above and max_error must be numbers, got "
                                f"{frac!r} and {mx!r}") from None


def accuracy_bar(fn) -> None:
    """Lab 05, exercise 1: ``fn(actual, expected, floor) -> (passed, fraction_above, max_error)`` agrees with
    :func:`npusim.precision.double_thousandth` on hidden arrays (noise, fp16, zeros, NaN, inf, exactly at
    the bar, empty, random ones from the grading seed)."""
    __tracebackhide__ = True
    name = "accuracy_bar"
    cases = _bar_cases()
    for what, actual, expected, floor, rule in cases:
        want = _double_thousandth(actual, expected, floor=floor)
        got = call_learner(name, fn, actual.copy(), expected.copy(), floor, case={"case": what},
                           what="your function")
        ok, frac, mx = _bar_result(name, got, what)
        same_max = (mx == want.max_error or (math.isfinite(mx) and math.isfinite(want.max_error)
                                             and abs(mx - want.max_error) <= 1e-9 * max(want.max_error, 1e-300)))
        if ok == want.passed and abs(frac - want.fraction_above) <= 1e-12 and same_max:
            continue
        if frac == want.n_above != want.fraction_above:
            cause = ("Your fraction_above is the number of elements above the bar; it is their share (divide by "
                     "the number of elements).")
        else:
            cause = f"This case tests that {rule}."
        raise CheckFailed(name, f"on the hidden case '{what}' ({actual.size} elements, floor {floor:.3g}) expected "
                                f"passed={want.passed}, fraction_above={want.fraction_above:.6g}, "
                                f"max_error={want.max_error:.6g}; got passed={ok}, fraction_above={frac:.6g}, "
                                f"max_error={mx:.6g}. {cause}")
    passed(name, f"{len(cases)} hidden cases agree with npusim.precision.double_thousandth (zeros, NaN, inf, "
                 f"exactly at the bar, empty, random)")


# --- exercise 2: meet the bar -----------------------------------------------------------------------------

_LAYER_FIXED = [  # (what, x shape, Cout, input scale, weight std): K = Cin * 9
    ("64 channels, K = 576", (1, 64, 12, 12), 48, 1.0, None),
    ("outputs beyond fp16's range", (2, 16, 9, 7), 24, 3000.0, 1.0),
    ("small activations", (1, 32, 8, 10), 32, 1e-2, None),
    ("128 channels, K = 1152", (1, 128, 6, 6), 32, 1.0, None),
]
TINY = float(np.finfo(np.float16).tiny)


def _layer_cases() -> list[tuple]:
    r = case_rng("fp16_layer", "random")
    out = list(_LAYER_FIXED)
    for i in range(2):
        cin = int(r.choice([16, 32, 48, 64, 96]))
        out.append((f"random layer {i + 1}", (int(r.integers(1, 3)), cin, int(r.integers(4, 10)),
                                              int(r.integers(4, 10))),
                    int(r.integers(8, 48)), float(10.0 ** r.uniform(-2, 3.3)), None))
    return out


class _Recorder:
    """The ``conv`` the check hands to the learner's function: the package's conv_layer, recording what it
    was called with and what it returned."""

    def __init__(self):
        self.calls: list[dict] = []

    def __call__(self, x, w, **kwargs):
        res = mp.conv_layer(x, w, **kwargs)
        self.calls.append({"x": np.asarray(x), "w": np.asarray(w), "kwargs": dict(kwargs), "y": res.output})
        return res


def _subnormal(a: np.ndarray) -> int:
    """Nonzero values below fp16's smallest normal number (6.1e-5), and zeros that were not zero before."""
    a = np.abs(np.asarray(a, np.float64))
    return int(((a < TINY) & (a > 0)).sum())


def _layer_causes(rec: _Recorder, x16, w16, scale: float, y16=None, want=None) -> str:
    """Why ``y16 * scale`` misses the bar, from what the learner's function did (the recorded calls)."""
    causes = []
    last = rec.calls[-1]
    if y16 is not None and want is not None:
        got = y16.astype(np.float64) * scale
        big = np.isfinite(got) & (np.abs(want) > 1e-2 * np.abs(want).max()) & (got != 0)
        ratio = float(np.median(want[big] / got[big])) if big.any() else 1.0
        if ratio > 0 and abs(ratio - 1) > 0.01 and abs(math.log2(ratio) - round(math.log2(ratio))) < 0.01:
            return (f"y16 * scale is {ratio:g}x too {'small' if ratio > 1 else 'large'} everywhere: the scale you "
                    f"return ({scale:g}) is not the divisor your input was divided by (return that one).")
    acc = np.dtype(last["kwargs"].get("acc_dtype", "float32")).name
    if acc == "float16":
        causes.append("your conv accumulates in fp16 (acc_dtype='float16'): every partial sum of the K products "
                      "is rounded to fp16, and the error grows with K (section 2): an fp32 accumulator keeps "
                      "only the output's rounding")
    xs, ws = last["x"], last["w"]
    base_sub, now_sub = _subnormal(x16) + _subnormal(w16), _subnormal(xs) + _subnormal(ws)
    flushed = int(((xs == 0) & (x16 != 0)).sum()) if xs.shape == x16.shape else 0
    if now_sub + flushed > 2 * base_sub + 10:
        causes.append(f"your scaled operands hold {now_sub:,} subnormal values (below 6.1e-5) and {flushed:,} that "
                      f"became 0, against {base_sub:,} subnormal in x16 and w16 themselves: dividing by a power of "
                      f"two is exact only while the result stays a normal number; there fp16 keeps fewer bits. "
                      f"Divide only when the output would overflow, by the smallest power of two that is enough")
    if math.frexp(scale)[0] != 0.5:
        causes.append(f"your scale {scale:g} is not a power of two: x / scale is rounded to fp16 (up to 2^-11 of "
                      f"every input)")
    return ("; and ".join(causes)[:1].upper() + "; and ".join(causes)[1:] + ".") if causes else \
        (f"Look at the operands of your last conv call (x {last['x'].dtype.name} from "
         f"{float(np.min(last['x'])):.3g} to {float(np.max(last['x'])):.3g}, w {last['w'].dtype.name}) and at "
         f"its accumulator ({acc}).")


def fp16_layer(fn) -> None:
    """Lab 05, exercise 2: ``fn(x16, w16, conv) -> (y16, scale)`` runs a 3x3 convolution (padding 1) with
    fp16 operands on the Cube (through ``conv``) writing fp16, and returns that fp16 output ``y16`` with
    ``y16 * scale`` passing the double-thousandth bar against the exact result, on hidden layers."""
    __tracebackhide__ = True
    name = "fp16_layer"
    cases = _layer_cases()
    for i, (what, xs, cout, xscale, wstd) in enumerate(cases):
        rng = fixed_rng(name, i) if i < len(_LAYER_FIXED) else case_rng(name, i)
        cin = xs[1]
        std = wstd if wstd is not None else math.sqrt(2 / (cin * 9))
        x16 = (np.clip(rng.standard_normal(xs), -6, 6) * xscale).astype(np.float16)
        w16 = (rng.standard_normal((cout, cin, 3, 3)) * std).astype(np.float16)
        case = {"layer": f"{what}: x {xs}, w {(cout, cin, 3, 3)}, K = {cin * 9}"}
        words = describe(case)
        rec = _Recorder()
        out = call_learner(name, fn, x16.copy(), w16.copy(), rec, case=case, what="your function")
        try:
            y16, scale = out
            scale = float(scale)
        except (TypeError, ValueError):
            raise CheckFailed(name, f"expected a tuple (y16, scale), got {type(out).__name__}") from None
        if not rec.calls:
            raise CheckFailed(name, f"on [{words}] your function never called `conv`: run the layer on the Cube "
                                    f"with conv(x, w, ...)")
        for c in rec.calls:
            if (c["x"].dtype, c["w"].dtype) != (np.float16, np.float16):
                raise CheckFailed(name, f"on [{words}] `conv` was called with {c['x'].dtype.name} x "
                                        f"{c['w'].dtype.name} operands; the point is fp16 operands on the Cube "
                                        f"(float16 x and w)")
            out_dt = np.dtype(c["kwargs"].get("out_dtype") or c["x"].dtype).name
            if out_dt != "float16":
                raise CheckFailed(name, f"on [{words}] your conv writes {out_dt} from the Cube (out_dtype="
                                        f"{out_dt}): the layer's output must leave the Cube as fp16 (half the bytes, "
                                        f"and what the next layer reads), so scaling and casting it on the host "
                                        f"afterwards does not count. Choose the scale before the Cube.")
        y16 = np.asarray(y16)
        if y16.dtype != np.float16 or y16.shape != (xs[0], cout, xs[2], xs[3]):
            raise CheckFailed(name, f"on [{words}] y16 is {y16.dtype.name} of shape {y16.shape}; expected the "
                                    f"fp16 output of shape {(xs[0], cout, xs[2], xs[3])}")
        if not any(np.array_equal(y16, c["y"], equal_nan=True) for c in rec.calls):
            raise CheckFailed(name, f"on [{words}] y16 is not what the Cube wrote (it differs from every output "
                                    f"`conv` returned): return the fp16 output as it comes out of conv(...).output")
        if not (math.isfinite(scale) and scale > 0):
            raise CheckFailed(name, f"on [{words}] the scale is {scale!r}; it must be a positive number")
        if not np.isfinite(y16).all():
            n = int((~np.isfinite(y16)).sum())
            raise CheckFailed(name, f"on [{words}] {n} values of y16 are inf or NaN: this layer's output exceeds "
                                    f"fp16's largest value (65504). Scale its input down until the output fits "
                                    f"(check the output for inf, and try again).")
        want = mp.conv_reference(x16, w16)
        rep = _double_thousandth(y16.astype(np.float64) * scale, want, floor=default_floor(np.float16))
        if not rep.passed:
            raise CheckFailed(name, f"on [{words}] {rep.fraction_above:.2%} of the elements of y16 * scale are more "
                                    f"than 0.1 % off (allowed 0.1 %), max error {rep.max_error:.3g}. "
                                    + _layer_causes(rec, x16, w16, scale, y16, want))
    passed(name, f"{len(cases)} hidden layers (K up to 1152, outputs beyond 65504, small activations) meet the "
                 f"double-thousandth bar with fp16 operands and an fp16 output")
