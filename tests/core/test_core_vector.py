"""Vector instructions and scalar GetValue/SetValue against numpy, in fp16 and fp32, with odd counts."""

import math
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import pytest
from hypothesis import given, strategies as st

import npusim as ns

from core_helpers import BF16, FAST, assert_bits_equal, ceil_to, hand_reduce, hand_vector, rand, records

pytestmark = pytest.mark.core

H = ns.HardEvent
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
floats = st.sampled_from([F16, F32])
counts = st.integers(1, 1500)


@ns.kernel
def vec(x0, x1, y, count, body, out_dtype):
    """GM -> UB (MTE2), ``body(dst, a, b, count)`` on V, UB -> GM (MTE3); any count (DataCopyPad)."""
    pipe = ns.TPipe()
    bufs = [ns.TBuf() for _ in range(3)]
    for b, dt in zip(bufs, (x0.dtype, x1.dtype, out_dtype)):
        pipe.init_buffer(b, ceil_to(count * np.dtype(dt).itemsize, 32) + 256)
    a, b, d = bufs[0].get(x0.dtype), bufs[1].get(x1.dtype), bufs[2].get(out_dtype)
    ns.data_copy_pad(a, x0, count)
    ns.data_copy_pad(b, x1, count)
    ns.set_flag(H.MTE2_V, 0)
    ns.wait_flag(H.MTE2_V, 0)
    body(d, a, b, count)
    ns.set_flag(H.V_MTE3, 0)
    ns.wait_flag(H.V_MTE3, 0)
    ns.data_copy_pad(y, d, count)


def run_vec(body, x0, x1=None, out_dtype=None, count=None):
    x1 = x0.copy() if x1 is None else x1
    out_dtype = np.dtype(out_dtype or x0.dtype)
    count = x0.size if count is None else count
    y = np.zeros(count, out_dtype)
    return ns.launch(vec, 1, x0, x1, y, count, body, out_dtype)


def sample(rng, n, dtype, kind="any"):
    """Random values with a varied exponent; ``kind``: any, nonzero, positive."""
    mag = np.exp2(rng.uniform(-6, 6, n)) * rng.uniform(1, 2, n)
    if dtype == F16:
        mag = np.minimum(mag, 200)
    sign = 1.0 if kind == "positive" else rng.choice([-1.0, 1.0], n)
    x = (mag * sign).astype(dtype)
    if kind == "any":
        x[rng.random(n) < 0.02] = 0
    return x


def exact(f, *xs, dtype):
    """The correctly rounded result of f in ``dtype``: computed in float64, rounded once. For + - * / and
    sqrt of fp16/fp32 operands float64 is wide enough that this single rounding is exact IEEE."""
    with np.errstate(all="ignore"):
        return f(*[x.astype(np.float64) for x in xs]).astype(dtype)


# ---------------------------------------------------------------------------------------------------------
# element-wise binary, with scalar, unary
# ---------------------------------------------------------------------------------------------------------
BINARY = {"add": (ns.add, np.add), "sub": (ns.sub, np.subtract), "mul": (ns.mul, np.multiply),
          "div": (ns.div, np.divide), "max": (ns.max, np.maximum), "min": (ns.min, np.minimum)}


@FAST
@given(op=st.sampled_from(sorted(BINARY)), dtype=floats, count=counts, seed=st.integers(0, 2**16))
def test_binary_ops_are_correctly_rounded(op, dtype, count, seed):
    rng = np.random.default_rng(seed)
    instr, ref = BINARY[op]
    a = sample(rng, count, dtype)
    b = sample(rng, count, dtype, "nonzero" if op == "div" else "any")
    res = run_vec(lambda d, x, y, n: instr(d, x, y, n), a, b)
    with np.errstate(all="ignore"):
        assert_bits_equal(res["y"], ref(a, b), f"{op} vs numpy {dtype} math")
    assert_bits_equal(res["y"], exact(ref, a, b, dtype=dtype), f"{op} vs IEEE")
    (r,) = records(res, pipe=ns.Pipe.V)
    assert r.op == op
    assert r.end - r.start == pytest.approx(hand_vector(ns.a2, count, dtype.itemsize, complex_op=(op == "div")))
    assert res.profile.vector_ops == count
    assert res.profile.vector_ideal_cycles == pytest.approx(count * dtype.itemsize / 256)


@FAST
@given(op=st.sampled_from(["add", "sub", "mul", "max", "min"]),
       dtype=st.sampled_from([np.dtype(np.int32), np.dtype(np.int16)]), count=counts, seed=st.integers(0, 2**16))
def test_binary_ops_on_integers_wrap_like_numpy(op, dtype, count, seed):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, count, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, count, endpoint=True).astype(dtype)
    instr, ref = BINARY[op]
    res = run_vec(lambda d, x, y, n: instr(d, x, y, n), a, b)
    wide = ref(a.astype(np.int64), b.astype(np.int64))
    np.testing.assert_array_equal(res["y"], wide.astype(dtype))  # two's complement wrap-around


SCALAR = {"adds": (ns.adds, np.add), "muls": (ns.muls, np.multiply), "maxs": (ns.maxs, np.maximum),
          "mins": (ns.mins, np.minimum)}


@FAST
@given(op=st.sampled_from(sorted(SCALAR)), dtype=floats, count=counts,
       scalar=st.floats(-100, 100, allow_nan=False), seed=st.integers(0, 2**16))
def test_scalar_ops_round_the_scalar_to_the_element_type_first(op, dtype, count, scalar, seed):
    rng = np.random.default_rng(seed)
    instr, ref = SCALAR[op]
    a = sample(rng, count, dtype)
    res = run_vec(lambda d, x, y, n: instr(d, x, scalar, n), a)
    s = np.array([scalar]).astype(dtype)  # a python float is first rounded to the element type
    assert_bits_equal(res["y"], exact(ref, a, np.broadcast_to(s, a.shape), dtype=dtype), op)
    (r,) = records(res, pipe=ns.Pipe.V)
    assert r.end - r.start == pytest.approx(hand_vector(ns.a2, count, dtype.itemsize))


def test_adds_rounds_the_scalar_before_adding():
    # 1 + 2^-11 is not an fp16: it rounds to 1.0 first, so 2048 + s = 2049 -> 2048 (not 2050)
    a = np.full(16, 2048, np.float16)
    res = run_vec(lambda d, x, y, n: ns.adds(d, x, 1 + 2.0 ** -11, n), a)
    np.testing.assert_array_equal(res["y"], np.full(16, 2049, np.float16))  # 2049 rounds to even 2048
    assert res["y"][0] == 2048


UNARY = {"exp": (ns.exp, np.exp, "any", True), "ln": (ns.ln, np.log, "positive", True),
         "sqrt": (ns.sqrt, np.sqrt, "positive", True), "reciprocal": (ns.reciprocal, lambda x: 1 / x, "nonzero", True),
         "abs": (ns.abs, np.abs, "any", False), "relu": (ns.relu, lambda x: np.where(x > 0, x, x.dtype.type(0)), "any", False)}
IEEE_EXACT = {"sqrt", "reciprocal", "abs", "relu"}


@FAST
@given(op=st.sampled_from(sorted(UNARY)), dtype=floats, count=counts, seed=st.integers(0, 2**16))
def test_unary_ops_equal_numpy_math_in_the_element_type(op, dtype, count, seed):
    rng = np.random.default_rng(seed)
    instr, ref, kind, complex_op = UNARY[op]
    a = sample(rng, count, dtype, kind)
    if op == "exp":
        a = (a.astype(np.float64) % 10).astype(dtype)  # stay inside the fp16 range
    res = run_vec(lambda d, x, y, n: instr(d, x, n), a)
    with np.errstate(all="ignore"):
        expected = ref(a).astype(dtype)          # numpy math in the element type
    assert_bits_equal(res["y"], expected, f"{op} vs numpy {dtype} math")
    if op in IEEE_EXACT:
        assert_bits_equal(res["y"], exact(ref, a, dtype=dtype), f"{op} vs IEEE")
    else:  # exp/ln: numpy's own float16/float32 routines, a few units in the last place from float64
        ulp = np.spacing(np.abs(exact(ref, a, dtype=dtype))).astype(np.float64)
        assert np.all(np.abs(res["y"].astype(np.float64) - ref(a.astype(np.float64))) <= 4 * ulp)
    (r,) = records(res, pipe=ns.Pipe.V)
    assert r.end - r.start == pytest.approx(hand_vector(ns.a2, count, dtype.itemsize, complex_op=complex_op))


def test_complex_ops_cost_the_same_in_fp16_and_fp32_and_simple_ops_do_not():
    n = 1024
    t = {}
    for dt in (F16, F32):
        x = np.ones(n, dt)
        t["exp", dt] = records(run_vec(lambda d, a, b, c: ns.exp(d, a, c), x), pipe=ns.Pipe.V)[0]
        t["add", dt] = records(run_vec(lambda d, a, b, c: ns.add(d, a, b, c), x), pipe=ns.Pipe.V)[0]
    dur = {k: r.end - r.start for k, r in t.items()}
    cfg = ns.a2
    assert dur["exp", F16] == dur["exp", F32] == cfg.vector_startup_cycles + cfg.vector_complex_cycles_per_repeat * n // 64
    assert dur["add", F16] == cfg.vector_startup_cycles + n * 2 // 256
    assert dur["add", F32] == cfg.vector_startup_cycles + n * 4 // 256


@FAST
@given(dtype=st.sampled_from([np.dtype(np.int32), np.dtype(np.int16)]), count=counts, seed=st.integers(0, 2**16))
def test_abs_and_relu_on_integers(dtype, count, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-1000, 1000, count).astype(dtype)
    np.testing.assert_array_equal(run_vec(lambda d, x, y, n: ns.abs(d, x, n), a)["y"], np.abs(a))
    np.testing.assert_array_equal(run_vec(lambda d, x, y, n: ns.relu(d, x, n), a)["y"], np.maximum(a, 0))


def test_operand_dtypes_must_match_and_float_only_ops_reject_ints():
    a = np.ones(16, np.float16)
    with pytest.raises(ns.UsageError, match="share a dtype"):
        run_vec(lambda d, x, y, n: ns.add(d, x, y, n), a, np.ones(16, np.float32))
    with pytest.raises(ns.UsageError, match="exp works on"):
        run_vec(lambda d, x, y, n: ns.exp(d, x, n), np.ones(16, np.int32))
    with pytest.raises(ns.UsageError, match="count"):
        run_vec(lambda d, x, y, n: ns.add(d, x, y, 0), a)


# ---------------------------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def reduce_kernel(x, y, count, fn, tmp_elems):
    pipe = ns.TPipe()
    src, dst, tmp = ns.TBuf(), ns.TBuf(), ns.TBuf()
    pipe.init_buffer(src, ceil_to(count * x.dtype.itemsize, 32))
    pipe.init_buffer(dst, 32)
    pipe.init_buffer(tmp, max(32, tmp_elems * x.dtype.itemsize))
    ns.data_copy_pad(src.get(x.dtype), x, count)
    ns.set_flag(H.MTE2_V, 0)
    ns.wait_flag(H.MTE2_V, 0)
    fn(dst.get(x.dtype), src.get(x.dtype), tmp.get(x.dtype, tmp_elems), count)
    ns.set_flag(H.V_MTE3, 0)
    ns.wait_flag(H.V_MTE3, 0)
    ns.data_copy_pad(y, dst.get(x.dtype), 1)


def tmp_elems_needed(count, isz):
    """One partial per 256 B repeat, 32 B aligned (the documented tmp size)."""
    repeats = -(-count * isz // 256)
    return ceil_to(repeats * isz, 32) // isz


@FAST
@given(dtype=floats, count=st.integers(1, 5000), seed=st.integers(0, 2**16))
def test_reduce_max(dtype, count, seed):
    rng = np.random.default_rng(seed)
    x = sample(rng, count, dtype)
    res = ns.launch(reduce_kernel, 1, x, np.zeros(1, dtype), count, ns.reduce_max,
                    tmp_elems_needed(count, dtype.itemsize))
    assert_bits_equal(res["y"], np.max(x, keepdims=True), "max")
    (r,) = records(res, pipe=ns.Pipe.V)
    assert r.end - r.start == pytest.approx(hand_reduce(ns.a2, count, dtype.itemsize))


@FAST
@given(dtype=floats, count=st.integers(1, 3000), seed=st.integers(0, 2**16))
def test_reduce_sum_is_exact_when_every_partial_sum_is_representable(dtype, count, seed):
    rng = np.random.default_rng(seed)
    if dtype == F16:
        count = min(count, 2048)  # every integer up to 2048 is an fp16
    x = rng.integers(-1, 2, count).astype(dtype)  # |every partial sum| <= count: exact
    res = ns.launch(reduce_kernel, 1, x, np.zeros(1, dtype), count, ns.reduce_sum,
                    tmp_elems_needed(count, dtype.itemsize))
    assert res["y"][0] == x.astype(np.float64).sum()
    (r,) = records(res, pipe=ns.Pipe.V)
    assert r.end - r.start == pytest.approx(hand_reduce(ns.a2, count, dtype.itemsize))


@FAST
@given(count=st.integers(2, 5000), seed=st.integers(0, 2**16))
def test_reduce_sum_fp32_is_accurate(count, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, count).astype(np.float32)
    res = ns.launch(reduce_kernel, 1, x, np.zeros(1, np.float32), count, ns.reduce_sum,
                    tmp_elems_needed(count, 4))
    # a pairwise tree in fp32: error bound ~ log2(n) ulps of the sum
    assert res["y"][0] == pytest.approx(x.astype(np.float64).sum(), rel=2e-7 * (math.log2(count) + 1))


def test_reduce_needs_a_large_enough_tmp():
    x = np.ones(1024, np.float32)
    need = tmp_elems_needed(1024, 4)  # 16 repeats -> 16 fp32 partials
    assert need == 16
    with pytest.raises(ns.OutOfBoundsError, match="tmp buffer of at least 16 elements"):
        ns.launch(reduce_kernel, 1, x, np.zeros(1, np.float32), 1024, ns.reduce_sum, 8)


# ---------------------------------------------------------------------------------------------------------
# cast with every RoundMode
# ---------------------------------------------------------------------------------------------------------
def _table(dtype):
    """Every finite value of a 16-bit float type, sorted (as float64), with its bit pattern."""
    pats = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    with np.errstate(invalid="ignore"):
        vals = pats.view(dtype).astype(np.float64)
    ok = np.isfinite(vals) & ~((vals == 0) & (pats != 0))  # one zero (+0)
    order = np.argsort(vals[ok], kind="stable")
    return vals[ok][order], pats[ok][order]


TABLES = {"float16": _table(F16), "bfloat16": _table(BF16)}


def round_to_16bit(x: np.ndarray, dtype, mode: ns.RoundMode) -> np.ndarray:
    """Oracle: pick the neighbour the rounding mode asks for from the sorted table of all values."""
    vals, pats = TABLES[np.dtype(dtype).name]
    x = x.astype(np.float64)
    hi_i = np.searchsorted(vals, x, side="left")
    lo_i = np.searchsorted(vals, x, side="right") - 1
    lo, hi = vals[lo_i], vals[np.minimum(hi_i, vals.size - 1)]
    is_exact = lo == x
    hi = np.where(is_exact, lo, hi)
    d_lo, d_hi = x - lo, hi - x
    even_lo = (pats[lo_i] & 1) == 0
    M = ns.RoundMode
    if mode in (M.CAST_RINT, M.CAST_NONE):
        r = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(even_lo, lo, hi)))
    elif mode == M.CAST_ROUND:
        r = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(x > 0, hi, lo)))
    elif mode == M.CAST_FLOOR:
        r = lo
    elif mode == M.CAST_CEIL:
        r = hi
    elif mode == M.CAST_TRUNC:
        r = np.where(x > 0, lo, hi)
    elif mode == M.CAST_ODD:
        r = np.where(is_exact, lo, np.where(even_lo, hi, lo))
    r = np.where(is_exact, x, r)
    return np.copysign(r, x)  # a result that rounds to zero keeps the sign of x


def _cast_body(mode):
    return lambda d, a, b, n: ns.cast(d, a, mode, n)


@FAST
@given(target=st.sampled_from(["float16", "bfloat16"]), mode=st.sampled_from(list(ns.RoundMode)),
       count=st.integers(1, 800), seed=st.integers(0, 2**16))
def test_cast_fp32_to_16_bit_floats_with_every_round_mode(target, mode, count, seed):
    rng = np.random.default_rng(seed)
    tdt = BF16 if target == "bfloat16" else F16
    vals, _ = TABLES[target]
    lim = 60000.0 if target == "float16" else 1e30
    x = (np.exp2(rng.uniform(-26 if target == "float16" else -60, np.log2(lim), count))
         * rng.choice([-1, 1], count)).astype(np.float32)
    # a quarter of the elements are exact ties between two neighbours, and some are exact values
    i = rng.integers(0, vals.size - 1, count)
    mid = ((vals[i] + vals[i + 1]) / 2).astype(np.float32)
    pick = rng.random(count)
    x = np.where(pick < 0.25, mid, np.where(pick < 0.35, vals[i].astype(np.float32), x)).astype(np.float32)
    _check_cast(x, tdt, mode)


def _check_cast(x, tdt, mode):
    vals, _ = TABLES[tdt.name]
    x = x[np.abs(x.astype(np.float64)) <= vals[-1]]  # finite results only
    if x.size == 0:
        return
    res = run_vec(_cast_body(mode), x, out_dtype=tdt)
    got = res["y"]
    expected = round_to_16bit(x, tdt, mode)
    bad = np.flatnonzero(got.astype(np.float64) != expected)
    assert not bad.size, f"{mode}: x={x[bad[0]]!r} got {got[bad[0]]!r} expected {expected[bad[0]]!r}"
    if x.dtype.kind == "f":
        assert np.array_equal(np.signbit(got), np.signbit(x))
    (r,) = records(res, pipe=ns.Pipe.V)
    isz = max(x.dtype.itemsize, tdt.itemsize)  # the widest operand counts
    assert r.end - r.start == pytest.approx(hand_vector(ns.a2, x.size, isz))


@FAST
@given(pair=st.sampled_from([("float16", "bfloat16"), ("bfloat16", "float16"), ("int32", "float16"),
                             ("int32", "bfloat16"), ("int16", "float16")]),
       mode=st.sampled_from(list(ns.RoundMode)), count=st.integers(1, 800), seed=st.integers(0, 2**16))
def test_cast_between_16_bit_floats_and_from_ints_with_every_round_mode(pair, mode, count, seed):
    rng = np.random.default_rng(seed)
    src = BF16 if pair[0] == "bfloat16" else np.dtype(pair[0])
    tdt = BF16 if pair[1] == "bfloat16" else np.dtype(pair[1])
    if src.kind == "i":
        info = np.iinfo(src)
        x = rng.integers(max(info.min, -70000), min(info.max, 70000), count).astype(src)
    else:
        x = (np.exp2(rng.uniform(-30, 16, count)) * rng.choice([-1, 1], count)).astype(src)
    _check_cast(x, tdt, mode)


def test_cast_rint_overflows_to_inf_and_floor_saturates():
    x = np.array([65519, 65520, 70000, -70000] * 4, np.float32)
    rint = run_vec(_cast_body(ns.RoundMode.CAST_RINT), x, out_dtype=F16)["y"]
    np.testing.assert_array_equal(rint[:4], np.array([65504, np.inf, np.inf, -np.inf], np.float16))
    floor = run_vec(_cast_body(ns.RoundMode.CAST_FLOOR), x, out_dtype=F16)["y"]
    np.testing.assert_array_equal(floor[:4], np.array([65504, 65504, 65504, -np.inf], np.float16))


def _int_oracle(x: np.ndarray, dtype, mode) -> np.ndarray:
    M = ns.RoundMode
    f = {M.CAST_RINT: round, M.CAST_FLOOR: math.floor, M.CAST_CEIL: math.ceil, M.CAST_TRUNC: math.trunc,
         M.CAST_NONE: math.trunc,
         M.CAST_ROUND: lambda v: int(Decimal(v).quantize(Decimal(1), rounding=ROUND_HALF_UP))}[mode]
    info = np.iinfo(dtype)
    return np.array([min(info.max, max(info.min, f(float(v)))) for v in x], dtype)


@FAST
@given(src=floats, target=st.sampled_from([np.dtype(np.int32), np.dtype(np.int16), np.dtype(np.int8)]),
       mode=st.sampled_from([m for m in ns.RoundMode if m != ns.RoundMode.CAST_ODD]),
       count=st.integers(1, 600), seed=st.integers(0, 2**16))
def test_cast_float_to_int_rounds_and_saturates(src, target, mode, count, seed):
    rng = np.random.default_rng(seed)
    lim = min(3 * np.iinfo(target).max, 60000)
    x = rng.uniform(-lim, lim, count)
    halves = np.round(rng.uniform(-300, 300, count)) + 0.5
    x = np.where(rng.random(count) < 0.3, halves, x).astype(src)
    res = run_vec(_cast_body(mode), x, out_dtype=target)
    np.testing.assert_array_equal(res["y"], _int_oracle(x, target, mode))


@FAST
@given(src=st.sampled_from([F16, BF16]), mode=st.sampled_from(list(ns.RoundMode)), count=counts,
       seed=st.integers(0, 2**16))
def test_cast_widening_to_fp32_is_exact_in_every_mode(src, mode, count, seed):
    rng = np.random.default_rng(seed)
    x = rand(rng, count, src, -1000, 1000)
    res = run_vec(_cast_body(mode), x, out_dtype=F32)
    assert_bits_equal(res["y"], x.astype(np.float32), "widening")


def test_cast_needs_a_round_mode():
    with pytest.raises(ns.UsageError, match="RoundMode"):
        run_vec(lambda d, a, b, n: ns.cast(d, a, "rint", n), np.ones(16, np.float32), out_dtype=F16)


# ---------------------------------------------------------------------------------------------------------
# duplicate, compare + select
# ---------------------------------------------------------------------------------------------------------
@FAST
@given(dtype=st.sampled_from([F16, F32, np.dtype(np.int32), np.dtype(np.int16), np.dtype(np.int8),
                              np.dtype(np.uint8)]),
       count=counts, scalar=st.integers(-100, 100), frac=st.sampled_from([0.0, 0.1, 1 / 3]))
def test_duplicate_fills_count_elements(dtype, count, scalar, frac):
    value = scalar + frac if dtype.kind == "f" else scalar % 256 if dtype.kind == "u" else scalar
    x = np.zeros(count + 40, dtype)
    res = run_vec(lambda d, a, b, n: (ns.duplicate(d, 1, n), ns.duplicate(d, value, n - 40)),
                  x, out_dtype=dtype, count=count + 40)
    y = res["y"]
    assert_bits_equal(y[:count], np.full(count, np.array(value).astype(dtype), dtype), "duplicate")
    assert np.all(y[count:] == 1)  # nothing past count is written


CMP = {ns.CMPMODE.LT: np.less, ns.CMPMODE.GT: np.greater, ns.CMPMODE.EQ: np.equal, ns.CMPMODE.LE: np.less_equal,
       ns.CMPMODE.GE: np.greater_equal, ns.CMPMODE.NE: np.not_equal}


@ns.kernel
def compare_select(x0, x1, y, mask_out, count, mode, scalar):
    pipe = ns.TPipe()
    a, b, d, m = ns.TBuf(), ns.TBuf(), ns.TBuf(), ns.TBuf()
    nbytes = count * x0.dtype.itemsize
    for buf in (a, b, d):
        pipe.init_buffer(buf, nbytes)
    pipe.init_buffer(m, ceil_to(count // 8, 32))
    dt = x0.dtype
    ns.data_copy(a.get(dt), x0, count)
    ns.data_copy(b.get(dt), x1, count)
    ns.set_flag(H.MTE2_V, 0)
    ns.wait_flag(H.MTE2_V, 0)
    mask = m.get(ns.uint8)
    ns.compare(mask, a.get(dt), b.get(dt), mode, count)
    ns.select(d.get(dt), mask, a.get(dt), b.get(dt) if scalar is None else scalar, count)
    ns.set_flag(H.V_MTE3, 0)
    ns.wait_flag(H.V_MTE3, 0)
    ns.data_copy(y, d.get(dt), count)
    ns.data_copy_pad(mask_out, mask, count // 8)


@FAST
@given(dtype=floats, repeats=st.integers(1, 12), mode=st.sampled_from(list(ns.CMPMODE)),
       use_scalar=st.booleans(), seed=st.integers(0, 2**16))
def test_compare_and_select(dtype, repeats, mode, use_scalar, seed):
    rng = np.random.default_rng(seed)
    count = repeats * 256 // dtype.itemsize
    a = rng.integers(-3, 4, count).astype(dtype)   # many equal pairs for EQ/LE/GE
    b = rng.integers(-3, 4, count).astype(dtype)
    scalar = 0.5 if use_scalar else None
    res = ns.launch(compare_select, 1, a, b, np.zeros(count, dtype), np.zeros(count // 8, np.uint8), count, mode,
                    scalar)
    cond = CMP[mode](a, b)
    mask = np.array([sum(int(cond[8 * i + j]) << j for j in range(8)) for i in range(count // 8)], np.uint8)
    np.testing.assert_array_equal(res["mask_out"], mask)  # bit i of the mask, least significant bit first
    other = np.full(count, scalar, dtype) if use_scalar else b
    assert_bits_equal(res["y"], np.where(cond, a, other), "select")
    cmp_rec, sel_rec = records(res, pipe=ns.Pipe.V)
    assert (cmp_rec.op, sel_rec.op) == ("compare", "select")
    assert cmp_rec.end - cmp_rec.start == pytest.approx(hand_vector(ns.a2, count, dtype.itemsize))


def test_compare_needs_whole_256_byte_repeats():
    a = np.ones(64, np.float16)  # 128 B
    with pytest.raises(ns.AlignmentError, match="256 B"):
        ns.launch(compare_select, 1, a, a, np.zeros(64, np.float16), np.zeros(8, np.uint8), 64, ns.CMPMODE.LT,
                  None)


# ---------------------------------------------------------------------------------------------------------
# scalar GetValue / SetValue
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def scalar_kernel(x, y, out, idx, value):
    pipe = ns.TPipe()
    b = ns.TBuf()
    pipe.init_buffer(b, x.size * x.dtype.itemsize)
    t = b.get(x.dtype)
    ns.data_copy(t, x, x.size)
    ns.set_flag(H.MTE2_V, 0)
    ns.wait_flag(H.MTE2_V, 0)
    ns.muls(t, t, 2.0, x.size)
    ns.set_flag(H.V_S, 0)                 # vector results become visible to the scalar unit
    ns.wait_flag(H.V_S, 0)
    out["ub"] = t.get_value(idx)
    out["gm"] = x.get_value(idx)
    t.set_value(idx, value)
    ns.set_flag(H.S_MTE3, 0)               # the scalar write reaches UB before MTE3 reads it
    ns.wait_flag(H.S_MTE3, 0)
    ns.data_copy(y, t, x.size)
    ns.set_flag(H.MTE3_S, 0)
    ns.wait_flag(H.MTE3_S, 0)
    y.set_value(x.size - 1 - idx, value)  # SetValue on GM


@FAST
@given(dtype=st.sampled_from([F16, F32, BF16]), n32=st.integers(1, 20), data=st.data(), seed=st.integers(0, 2**16))
def test_get_value_and_set_value(dtype, n32, data, seed):
    n = n32 * 32 // dtype.itemsize
    idx = data.draw(st.integers(0, n - 1), label="index")
    value = data.draw(st.floats(-1000, 1000, allow_nan=False), label="value")
    rng = np.random.default_rng(seed)
    x = rand(rng, n, dtype, -100, 100)
    out = {}
    res = ns.launch(scalar_kernel, 1, x, np.zeros(n, dtype), out, idx, value)
    doubled = (x.astype(np.float64) * 2).astype(dtype)
    assert isinstance(out["ub"], float) and isinstance(out["gm"], float)
    assert out["ub"] == float(doubled[idx])
    assert out["gm"] == float(x[idx])
    expected = doubled.copy()
    v = np.array([value]).astype(dtype)[0]  # the value is rounded to the element type
    expected[idx] = v
    if n - 1 - idx != idx:
        expected[n - 1 - idx] = v
    assert_bits_equal(res["y"], expected, "y")
    scalar_ops = [r for r in records(res, pipe=ns.Pipe.S) if r.op in ("get_value", "set_value")]
    assert [r.op for r in scalar_ops] == ["get_value", "get_value", "set_value", "set_value"]
    assert all(r.end - r.start == ns.a2.scalar_access_cycles for r in scalar_ops)


def test_get_value_on_int_tensors_returns_int_and_checks_bounds():
    @ns.kernel
    def k(x, out):
        out.append(x.get_value(3))
        x.get_value(x.size)

    out = []
    with pytest.raises(ns.OutOfBoundsError, match=r"elements \[8, 9\) of 'x', which has 8 elements"):
        ns.launch(k, 1, np.arange(8, dtype=np.int32), out)
    assert out == [3] and isinstance(out[0], int)


def test_get_value_without_v_s_flag_is_a_race_without_auto_sync():
    @ns.kernel
    def k(x):
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, 64)
        t = b.get(ns.float32)
        ns.duplicate(t, 1.0, 16)
        t.get_value(0)

    with pytest.raises(ns.RaceError, match=r"RAW hazard.*PIPE_S read \(get_value\).*PIPE_V write \(duplicate\)"):
        ns.launch(k, 1, np.zeros(16, np.float32), auto_sync=False)
