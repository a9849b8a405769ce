"""Checks of lab 07 (from kernel to operator), part 1: the declaration of ``qmatmul`` (OpDef), its shape
and dtype inference, and per-channel int8 quantisation. The tiling and the tiling cache are in
:mod:`.lab07_tiling`; the operator's given parts and the reference of every part in :mod:`.qmatmul`."""

from __future__ import annotations

import re

import numpy as np

from ..config import a2, classic
from ..ops import OpDef, OpError, call, register
from ..ops.runtime import REGISTRY, get_workspace_size
from . import qmatmul as Q
from ._core import CheckFailed, NotFinished, call_learner, case_rng, describe, fixed_rng, passed
from ._flow import Skeleton

__all__ = ["qmatmul_opdef", "qmatmul_inference", "int8_accuracy"]

_SETUP = ("import numpy as np\nimport npusim as ns\nfrom npusim import checks as check\nfrom npusim import ops\n"
          "from npusim.checks import qmatmul\nfrom npusim.kernels.matmul import MatmulTiling")
"""What a lab 07 skeleton needs outside the notebook: the lab's imports."""

HINTS = {
    "qmatmul-opdef": (
        "Section 2 declares the add operator: one .input(...) per input, one .output(...), one .attr(...). "
        "The table of section 3 is the same information for qmatmul. Mind what makes a dtype combination.",
        "Three inputs in the order x, w, scale, one output y, one attribute relu. Each tensor gets a list of "
        "dtypes and a list of formats, one entry per combination: how do the lists of different tensors line "
        "up into combinations? What does a tensor that one combination never has still need, and how do you "
        "say that it may be absent?",
        Skeleton(
            "def declare_qmatmul(name='qmatmul'):\n"
            "    op = ops.OpDef(name, qmatmul.DOC)\n"
            "    op.input('x', ['float16', 'int8'], ['ND', 'ND'])\n"
            "    op.input('w', ___, ['ND', 'ND'])\n"
            "    op.input('scale', ___)                  # its dtypes, its formats, and that a call may omit it\n"
            "    op.output('y', ___, ['ND', 'ND'])      # what the Cube gives for fp16, what Fixpipe writes for int8\n"
            "    op.attr('relu', bool, False, doc='ReLU on the result, applied in the Fixpipe')\n"
            "    return op\n",
            call="check.qmatmul_opdef(declare_qmatmul)", setup=_SETUP),
    ),
    "qmatmul-infer": (
        "Inference runs before anything is launched: it is the operator's last chance to refuse a call the "
        "kernels cannot run, with a message that says which argument to change. Go through the table of "
        "section 3 and the kernels of section 4: what must hold for x, w, scale, relu and the hardware?",
        "Check the shapes before you use them (ranks first), then how x and w fit together, then what each "
        "combination needs of scale (present or absent, and how many values), then what the hardware must "
        "have for int8 and for relu. Refuse each with ctx.fail('...') naming the argument and the sizes. The "
        "output dtype follows from the combination (section 3's table).",
        Skeleton(
            "def qmatmul_shape(ctx):\n"
            "    x, w, scale = ctx.input_shapes\n"
            "    if len(x) != 2:\n"
            "        ctx.fail(f'x must be 2-D (m, k), got shape {x}')\n"
            "    if len(w) != 2:\n"
            "        ctx.fail(f'w must be 2-D (k, n), got shape {w}')\n"
            "    if ___:\n"
            "        ctx.fail(f'x is {x} and w is {w}: x has k={x[1]} columns but w has {w[0]} rows')\n"
            "    int8 = ctx.input_dtypes[0] == np.int8\n"
            "    ___          # refuse: int8 without scale, float16 with one, a scale of neither 1 nor n values,\n"
            "                 # int8 or relu on a core without a Fixpipe; each message names the argument\n"
            "    return [___]\n"
            "\n"
            "\n"
            "def qmatmul_dtype(ctx):\n"
            "    return [np.dtype(np.float16 if ___ else np.float32)]\n",
            call="check.qmatmul_inference(qmatmul_shape, qmatmul_dtype)", setup=_SETUP),
    ),
    "int8-accuracy": (
        "Section 7 showed what one scale for the whole matrix costs the columns with small weights. Give each "
        "column its own scale, and map each weight to the int8 level nearest to it.",
        "One scale per output column, chosen so that the column's largest magnitude lands on the largest "
        "level int8 symmetric quantisation uses; each weight becomes the level nearest to w / s (not the one "
        "toward zero), kept inside that range. What scale does a column of zeros get?",
        Skeleton(
            "def quantize_per_channel(w):\n"
            "    s = ___                          # one scale per column of w\n"
            "    s = np.where(s == 0, 1.0, s)\n"
            "    q = ___                          # the nearest int8 level of w / s, within the range\n"
            "    return q.astype(np.int8), s.astype(np.float32)\n",
            call="check.int8_accuracy(quantize_per_channel)", setup=_SETUP),
    ),
}

_SPEC_COMBOS = {(("float16", "float16", "float32"), ("float32",)), (("int8", "int8", "float32"), ("float16",))}


# --- exercise 1: the declaration -----------------------------------------------------------------------
def _arr(shape, dtype):
    """A placeholder array of ``shape`` (zero-strided: no memory), as lab 08's fake implementation uses."""
    return np.broadcast_to(np.zeros((), dtype), shape)


def _declared(check: str, declare) -> OpDef:
    op = call_learner(check, declare, "qmatmul_check", what="declare_qmatmul")
    if not isinstance(op, OpDef):
        raise CheckFailed(check, f"declare_qmatmul(name) must return the ops.OpDef it built, got "
                                 f"{type(op).__name__}")
    if op.name != "qmatmul_check":
        raise CheckFailed(check, f"declare_qmatmul(name) must name the operator by its argument (OpDef(name, ...)), "
                                 f"got {op.name!r}")
    return op


def _combinations(check: str, op: OpDef) -> set:
    counts = {d.name: len(d.dtypes) for d in op.inputs + op.outputs}
    fmts = {d.name: len(d.formats) for d in op.inputs + op.outputs}
    if len(set(counts.values())) != 1:
        raise CheckFailed(check, f"every input and output needs one dtype per combination, but the dtype lists "
                                 f"have lengths {counts}")
    if fmts != counts:
        raise CheckFailed(check, f"each formats list must be as long as its dtypes list (one format per "
                                 f"combination): dtypes {counts}, formats {fmts}")
    return set(op.combinations())


def _describe_combo(combo) -> str:
    (x, w, s), (y,) = combo
    return f"x {x}, w {w}, scale {s} -> y {y}"


def qmatmul_opdef(declare) -> None:
    """Lab 07, exercise 1: ``declare(name) -> OpDef`` declares qmatmul as the lab's table says: inputs x, w
    and an optional scale, output y, their two dtype combinations, ND formats, and the attribute relu."""
    __tracebackhide__ = True
    name = "qmatmul_opdef"
    op = _declared(name, declare)
    ins, outs = [d.name for d in op.inputs], [d.name for d in op.outputs]
    if ins != ["x", "w", "scale"] or outs != ["y"]:
        raise CheckFailed(name, f"the operator has inputs {ins} and outputs {outs}; the table has inputs "
                                f"['x', 'w', 'scale'] in that order (the order of the call's arguments) and one "
                                f"output ['y']")
    optional = {d.name: d.optional for d in op.inputs}
    if optional != {"x": False, "w": False, "scale": True}:
        wrong = [k for k, v in optional.items() if v != (k == "scale")]
        raise CheckFailed(name, f"optional inputs: {optional}. scale is absent in float16 calls, so only scale "
                                f"is optional (optional=True); x and w are always required. Look at: "
                                f"{', '.join(wrong)}")
    combos = _combinations(name, op)
    if combos != _SPEC_COMBOS:
        extra = sorted(_describe_combo(c) for c in combos - _SPEC_COMBOS)
        missing = sorted(_describe_combo(c) for c in _SPEC_COMBOS - combos)
        hint = ""
        if any(c[0][0] != c[0][1] for c in combos):
            hint = (" x and w disagree within a combination: the i-th dtypes of every list together form "
                    "combination i, so list them in the same order for x and w.")
        elif any(c[0][0] == "int8" and c[1][0] != "float16" for c in combos):
            hint = " int8 results leave the Cube as int32 and the Fixpipe dequantises them to float16."
        elif any(c[0][0] == "float16" and c[1][0] != "float32" for c in combos):
            hint = " float16 inputs accumulate in float32 in L0C, and kernel 0 writes that float32."
        raise CheckFailed(name, f"the dtype combinations differ from the table: yours include "
                                f"{extra or 'nothing else'}, but not {missing}.{hint}")
    for d in op.inputs + op.outputs:
        if set(d.formats) != {"ND"}:
            raise CheckFailed(name, f"'{d.name}' declares formats {list(d.formats)}; every tensor of qmatmul is "
                                    f"ND (row-major): the weight packing happens inside the operator")
    relu = op.attrs.get("relu")
    if relu is None or set(op.attrs) != {"relu"}:
        raise CheckFailed(name, f"attributes {sorted(op.attrs)}: the table has one, relu")
    kinds = relu.kind if isinstance(relu.kind, tuple) else (relu.kind,)
    if kinds != (bool,):
        raise CheckFailed(name, f"relu is declared as {relu.kind}; it is an on/off switch: bool")
    if relu.default is not False:
        raise CheckFailed(name, f"relu's default is {relu.default!r}: a call that does not ask for ReLU must not "
                                f"get one (default False)")
    # the declaration at work: the calls it lets through and refuses, before anything runs
    x16, w16 = _arr((4, 32), np.float16), _arr((32, 16), np.float16)
    x8, w8, s = _arr((4, 32), np.int8), _arr((32, 16), np.int8), _arr((16,), np.float32)
    for arrays, attrs, ok, what in (((x16, w16), {}, True, "float16 x and w without scale"),
                                    ((x8, w8, s), {"relu": True}, True, "int8 x and w with a float32 scale"),
                                    ((x16, w8), {}, False, "float16 x with int8 w"),
                                    ((x16.astype(np.float32), w16), {}, False, "float32 x"),
                                    ((x16, w16), {"relu": 1}, False, "relu=1 (an int)")):
        try:
            op.validate(arrays, attrs, (), a2)
            accepted = True
        except OpError:
            accepted = False
        if accepted != ok:
            raise CheckFailed(name, f"your declaration {'refuses' if ok else 'accepts'} a call with {what}")
    passed(name, "inputs, output, both dtype combinations, formats and the relu attribute as the table says")


# --- exercise 2: shape and dtype inference -------------------------------------------------------------
_SMALL_L0 = a2.replace(name="a2-small-l0", l0a_bytes=32 * 1024, l0b_bytes=32 * 1024, l0c_bytes=64 * 1024)


def _word(text: str, word: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", text) is not None


# (name, inputs as (shape, dtype) or None, attrs, config, words the message must contain (each a tuple of
# alternatives), what the call gets wrong)
_BAD_CALLS = [
    ("x-3d", [((2, 8, 16), np.float16), ((16, 8), np.float16)], {}, a2,
     [("x",), ("2-D", "2D", "2 dim", "two dim", "(2, 8, 16)", "3-D", "3 dim", "ndim")], "x has 3 dimensions"),
    ("w-1d", [((8, 16), np.float16), ((16,), np.float16)], {}, a2,
     [("w",), ("2-D", "2D", "2 dim", "two dim", "(16,)", "1-D", "1 dim", "ndim")], "w has 1 dimension"),
    ("inner", [((4, 7), np.float16), ((8, 3), np.float16)], {}, a2, [("x",), ("w",), ("7",), ("8",)],
     "x has 7 columns, w has 8 rows"),
    ("int8-no-scale", [((4, 32), np.int8), ((32, 16), np.int8)], {}, a2, [("scale",)],
     "int8 inputs without a scale"),
    ("fp16-scale", [((4, 32), np.float16), ((32, 16), np.float16), ((16,), np.float32)], {}, a2, [("scale",)],
     "a scale with float16 inputs"),
    ("scale-count", [((4, 32), np.int8), ((32, 12), np.int8), ((5,), np.float32)], {}, a2, [("scale",), ("12",)],
     "5 scale values for n=12 columns"),
    ("scale-2d", [((4, 32), np.int8), ((32, 12), np.int8), ((1, 12), np.float32)], {}, a2, [("scale",)],
     "a 2-D scale"),
    ("relu-classic", [((4, 32), np.float16), ((32, 16), np.float16)], {"relu": True}, classic,
     [("relu",), ("Fixpipe", "fixpipe", "classic")], "relu on the classic core, which has no Fixpipe"),
    ("int8-classic", [((4, 32), np.int8), ((32, 16), np.int8), ((16,), np.float32)], {}, classic,
     [("int8",), ("Fixpipe", "fixpipe", "classic")], "int8 on the classic core, which has no Fixpipe"),
]


def _good_calls() -> list[tuple]:
    """(m, k, n, dtype, scale values or None, relu, config): fixed edge cases plus random ones."""
    out = [(1, 1, 1, np.float16, None, False, a2), (5, 7, 3, np.float16, None, True, a2),
           (33, 64, 17, np.int8, 17, False, a2), (8, 32, 40, np.int8, 1, True, a2),
           (3, 20, 9, np.float16, None, False, classic)]
    rng = case_rng("qmatmul_inference", "random")
    for _ in range(4):
        dt = (np.float16, np.int8)[int(rng.integers(2))]
        m, k, n = (int(v) for v in rng.integers(1, 600, 3))
        out.append((m, k, n, dt, (n, 1)[int(rng.integers(2))] if dt == np.int8 else None, bool(rng.integers(2)),
                    (a2, _SMALL_L0)[int(rng.integers(2))]))
    return out


def _stage1(op_name: str, inputs, attrs, cfg):
    return get_workspace_size(op_name, *[None if i is None else _arr(*i) for i in inputs], config=cfg, **attrs)


def _public(e: BaseException | str, op_name: str) -> str:
    """An error's text as the learner's operator would give it: the check's internal operator name (its
    registry entry for this run) reads as ``qmatmul``."""
    return str(e).replace(op_name, "qmatmul")


def _reraise(e: BaseException):
    raise e


def _refusing(check: str, fn, what: str):
    """``fn(ctx)`` for the runtime: its OpErrors (ctx.fail) pass through as refusals; anything else is
    translated for the learner, as call_learner does."""
    def run(ctx):
        try:
            return fn(ctx)
        except OpError:
            raise
        except Exception as e:  # noqa: BLE001 - not finished, or the learner's own bug
            return call_learner(check, _reraise, e, what=what)
    return run


def _case_words(inputs, attrs, cfg) -> dict:
    names = ("x", "w", "scale")
    case = {n: f"{i[0]} {np.dtype(i[1]).name}" for n, i in zip(names, inputs) if i is not None}
    return {**case, **attrs, "config": cfg.name}


def qmatmul_inference(infer_shape, infer_dtype) -> None:
    """Lab 07, exercise 2: ``infer_shape(ctx) -> [shape]`` and ``infer_dtype(ctx) -> [dtype]`` give qmatmul's
    output on hidden valid calls, and refuse hidden bad calls with ``ctx.fail`` (an OpError) whose message
    names the argument to change (and the sizes involved)."""
    __tracebackhide__ = True
    name = "qmatmul_inference"
    op_name = "_qmatmul_inference_check"

    register(Q.build(op_name, Q.declare, _refusing(name, infer_shape, "qmatmul_shape"),
                     _refusing(name, infer_dtype, "qmatmul_dtype"), Q.tiling))
    try:
        for m, k, n, dt, scale, relu, cfg in _good_calls():
            inputs = [((m, k), dt), ((k, n), dt)] + ([((scale,), np.float32)] if scale else [])
            case = _case_words(inputs, {"relu": relu}, cfg)
            try:
                _, ex = _stage1(op_name, inputs, {"relu": relu}, cfg)
            except NotFinished:
                raise
            except CheckFailed as e:
                raise CheckFailed(name, f"on the valid call [{describe(case)}] {e.message}") from None
            except OpError as e:
                if "shape inference gave" in str(e):
                    raise CheckFailed(name, f"on [{describe(case)}] the shape inference must return a list with "
                                            f"one shape, the output's: {_public(e, op_name)}") from None
                raise CheckFailed(name, f"you refused a valid call [{describe(case)}]: {_public(e, op_name)}") from None
            except (TypeError, ValueError) as e:
                raise CheckFailed(name, f"on [{describe(case)}] the inference returned something unusable: "
                                        f"{_public(e, op_name)}. Return a list of one shape, e.g. [(m, n)], and a list of one "
                                        f"dtype") from None
            shape, dtype = ex.ctx.output_shapes[0], ex.ctx.output_dtypes[0]
            if shape != (m, n):
                raise CheckFailed(name, f"on [{describe(case)}] your output shape is {shape}, expected {(m, n)}: "
                                        f"y has x's rows (m) and w's columns (n)")
            want = np.dtype(np.float16 if dt == np.int8 else np.float32)
            if dtype != want:
                raise CheckFailed(name, f"on [{describe(case)}] your output dtype is {dtype.name}, expected "
                                        f"{want.name}: " + ("int8 results are dequantised to float16 in the "
                                                            "Fixpipe" if dt == np.int8 else
                                                            "float16 inputs accumulate in float32 (L0C)"))
        for key, inputs, attrs, cfg, words, what in _BAD_CALLS:
            case = _case_words(inputs, attrs, cfg)
            try:
                _stage1(op_name, inputs, attrs, cfg)
            except OpError as e:
                text = _public(e, op_name)
                missing = [alts for alts in words if not any(_word(text, a) for a in alts)]
                if missing:
                    need = " and ".join(repr(alts[0]) for alts in missing)
                    raise CheckFailed(name, f"on [{describe(case)}] ({what}) you refused the call with \"{text}\", "
                                            f"which does not say what to change: name {need} in the message "
                                            f"(the argument and the sizes involved)") from None
                continue
            except NotFinished:
                raise
            except CheckFailed as e:
                raise CheckFailed(name, f"on [{describe(case)}] ({what}): {e.message.rstrip('.')}. Refuse a call that "
                                        f"cannot work with ctx.fail('...'), which raises the OpError every "
                                        f"caller expects") from None
            except Exception as e:  # noqa: BLE001 - e.g. an IndexError from a 1-D shape
                raise CheckFailed(name, f"on [{describe(case)}] ({what}) the inference failed with "
                                        f"{type(e).__name__}: {_public(e, op_name)}. Check the shapes before using them, and "
                                        f"refuse with ctx.fail('...')") from None
            raise CheckFailed(name, f"you accepted a call that cannot work [{describe(case)}]: {what}. "
                                    f"The kernel would fail (or compute garbage) after launch; refuse it in "
                                    f"the inference with ctx.fail('...') naming the argument")
    finally:
        REGISTRY.pop(op_name, None)
    passed(name, f"{len(_good_calls())} hidden valid calls (int8 and float16, 1x1x1 to 600 wide, three cores) "
                 f"and {len(_BAD_CALLS)} bad ones, each refused naming its argument")


# --- exercise 5: per-channel int8 ----------------------------------------------------------------------
INT8_BAR = 0.03


def _int8_cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(what, x, w): column scales from 0.01 to 5 with an all-zero column; an outlier per column; random."""
    out = []
    rng = fixed_rng("int8_accuracy", "spread")
    w = rng.standard_normal((96, 40)) * rng.choice([0.01, 0.1, 1.0, 5.0], size=40)
    w[:, 7] = 0.0
    out.append(("48x96 @ 96x40, column scales 0.01 to 5, column 7 all zero", rng.standard_normal((48, 96)), w))
    rng = fixed_rng("int8_accuracy", "outliers")
    w = rng.standard_normal((200, 24)) * 0.05
    w[rng.integers(0, 200, 24), np.arange(24)] = rng.choice([-1.0, 1.0], 24) * 0.25
    out.append(("16x200 @ 200x24, one large weight per column", rng.standard_normal((16, 200)), w))
    rng = case_rng("int8_accuracy", "random")
    k, n = int(rng.integers(32, 300)), int(rng.integers(8, 64))
    w = rng.standard_normal((k, n)) * np.exp(rng.uniform(-4, 2, n))
    out.append((f"32x{k} @ {k}x{n}, random column scales", rng.standard_normal((32, k)), w))
    return [(what, x.astype(np.float32), w.astype(np.float32)) for what, x, w in out]


def _rounding(check: str, what: str, w: np.ndarray, q: np.ndarray, s: np.ndarray) -> None:
    """q must be the int8 level nearest to w / s, within ±127, and every column must use its full range."""
    r = w.astype(np.float64) / s.astype(np.float64)
    over = np.abs(r) > 127.5
    if over.any():
        i, j = np.argwhere(over)[0]
        raise CheckFailed(check, f"on [{what}] w[{i}, {j}] / s[{j}] = {r[i, j]:.1f} is beyond ±127: the scale "
                                 f"of column {j} is too small to represent its largest weight (s[j] = "
                                 f"max|w[:, j]| / 127 maps it to 127)")
    if int(q.min()) < -127:
        raise CheckFailed(check, f"on [{what}] some weights became -128: clip to [-127, 127] (symmetric "
                                 f"quantisation: the largest |w| maps to 127)")
    off = np.abs(q - r) > 0.5 + 1e-3
    if off.any():
        i, j = np.argwhere(off)[0]
        if np.array_equal(q[off], np.trunc(r[off])):
            why = ("truncates toward zero (astype(np.int8) drops the fraction): round to the nearest level "
                   "first (np.rint)")
        elif np.array_equal(q[off], np.floor(r[off])):
            why = "rounds down (floor): round to the nearest level"
        else:
            why = "is not the nearest int8 level of w / s"
        raise CheckFailed(check, f"on [{what}] w[{i}, {j}] / s[{j}] = {r[i, j]:.3f} became {int(q[i, j])}: "
                                 f"{int(off.sum()):,} of {q.size:,} weights are off by more than half a level. "
                                 f"Your quantisation {why}")
    live = np.abs(w).max(axis=0) > 0
    used = np.abs(q).max(axis=0)
    short = np.flatnonzero(live & (used < 127))
    if short.size:
        j = int(short[0])
        raise CheckFailed(check, f"on [{what}] column {j}'s largest weight became {int(used[j])}, not 127: it "
                                 f"uses ±{int(used[j])} of the ±127 levels ({short.size} column(s) like it). "
                                 f"One scale per column, s[j] = max|w[:, j]| / 127, gives every column its "
                                 f"full resolution")


def _int8_worst(check: str, op_name: str, quantize_per_channel) -> float:
    """Run the learner's quantisation on every hidden case; the worst column's error."""
    worst = 0.0
    for what, x, w in _int8_cases():
        got = call_learner(check, quantize_per_channel, w.copy(), case={"w": "x".join(map(str, w.shape))})
        if not (isinstance(got, tuple) and len(got) == 2):
            raise CheckFailed(check, f"quantize_per_channel must return a tuple (q, s), got {type(got).__name__}")
        q, s = got
        for label, arr, dtype, shape in (("q", q, np.int8, w.shape), ("s", s, np.float32, (w.shape[1],))):
            if not isinstance(arr, np.ndarray) or arr.dtype != dtype or arr.shape != shape:
                got_desc = (f"{arr.dtype.name} {arr.shape}" if isinstance(arr, np.ndarray) else type(arr).__name__)
                raise CheckFailed(check, f"on [{what}] {label} must be a {np.dtype(dtype).name} array of shape "
                                         f"{shape} (one scale per column of w), got {got_desc}")
        bad = ~np.isfinite(s) | (s <= 0)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            zero = " (that column is all zeros: max|w| / 127 = 0; give it any positive scale)" \
                if not np.abs(w[:, j]).any() else ""
            raise CheckFailed(check, f"on [{what}] s[{j}] = {float(s[j])!r}: every scale must be a positive "
                                     f"number{zero}")
        _rounding(check, what, w, q, s)
        sx = np.abs(x).max() / 127
        qx = np.clip(np.rint(x / sx), -127, 127).astype(np.int8)
        out = call(op_name, qx, q, (sx * s).astype(np.float32)).out.astype(np.float64)
        ref = x.astype(np.float64) @ w
        norm = np.linalg.norm(ref, axis=0)
        err = np.where(norm > 0, np.linalg.norm(out - ref, axis=0) / np.maximum(norm, 1e-30), 0.0)
        j = int(np.argmax(err))
        if err[j] > INT8_BAR:
            raise CheckFailed(check, f"on [{what}] output column {j} has a relative error of {err[j]:.1%} (bar "
                                     f"{INT8_BAR:.0%}) although its weights are quantised as asked")
        worst = max(worst, float(err[j]))
    return worst


def int8_accuracy(quantize_per_channel) -> None:
    """Lab 07, exercise 5: ``quantize_per_channel(w) -> (q, s)``: q int8 of w's shape, s float32, one per
    column; q is the nearest level of w / s within ±127, each column's largest weight maps to 127, and the
    int8 operator's every output column is within 3 % of the float result."""
    __tracebackhide__ = True
    name = "int8_accuracy"
    op = Q.reference("_qmatmul_int8_check")   # the lab's own parts: only the quantisation is the learner's
    try:
        worst = _int8_worst(name, op.name, quantize_per_channel)
    finally:
        REGISTRY.pop(op.name, None)
    passed(name, f"3 hidden matmuls: nearest-level rounding, full range per column, worst column "
                 f"{worst:.2%} from the float result (bar {INT8_BAR:.0%})")
