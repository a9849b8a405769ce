"""Checks of lab 07 (from kernel to operator): shape inference, tiling legality, int8 accuracy."""

from __future__ import annotations

import numpy as np

from ..config import a2, classic
from ..conv import ConvGeometry
from ..errors import NpuSimError
from ..kernels.elementwise import scale as scale_kernel
from ..ops import InferContext, OpDef, TilingData, call, register
from ..ops.runtime import REGISTRY, TilingCache
from ._core import CheckFailed, NotFinished, call_learner, passed

__all__ = ["conv_shape", "scale_tiling", "int8_accuracy", "scale_op"]

_CONV_CASES = [  # (x shape, w shape, stride, padding, dilation)
    ((1, 3, 32, 32), (8, 3, 3, 3), 1, 1, 1), ((2, 16, 15, 17), (4, 16, 3, 3), 2, 1, 1),
    ((1, 1, 7, 7), (1, 1, 7, 7), 1, 0, 1), ((1, 4, 9, 9), (2, 4, 3, 3), 1, 0, 2),
    ((3, 8, 10, 6), (5, 8, 1, 1), (2, 1), (0, 0), 1), ((1, 2, 5, 5), (2, 2, 3, 3), 1, (2, 0), (1, 2)),
    ((1, 2, 4, 4), (2, 2, 5, 5), 1, 0, 1),   # does not fit: expect ValueError
    ((1, 3, 8, 8), (4, 2, 3, 3), 1, 1, 1),   # channel mismatch: expect ValueError
]


def conv_shape(fn) -> None:
    """``fn(x_shape, w_shape, stride, padding, dilation)`` returns conv2d's NCHW output shape, and raises
    ValueError when the call cannot work (channels differ, or the kernel does not fit)."""
    __tracebackhide__ = True
    name = "conv_shape"
    for x, w, s, p, d in _CONV_CASES:
        case = f"x={x}, w={w}, stride={s}, padding={p}, dilation={d}"
        try:
            g = ConvGeometry.of(x, w, s, p, d)
            want = (g.n, g.cout, g.ho, g.wo)
        except NpuSimError:
            want = ValueError
        try:
            got = fn(x, w, s, p, d)
        except NotImplementedError as e:
            raise NotFinished(name, f"not finished yet: {e}") from None
        except ValueError as e:
            if want is ValueError:
                continue
            raise CheckFailed(name, f"for {case} you raised ValueError({e}), but the output shape is {want}") from None
        if want is ValueError:
            raise CheckFailed(name, f"for {case} you returned {got}, but this call cannot work: raise ValueError "
                                    f"(look at: input channels must match, and the dilated kernel must fit the "
                                    f"padded input)")
        if tuple(got) != want:
            raise CheckFailed(name, f"for {case} expected {want}, got {tuple(got)}. Look at: "
                                    f"out = (in + 2*pad - dilation*(k-1) - 1) // stride + 1, per axis; an int "
                                    f"stride/padding/dilation applies to both axes")
    passed(name, f"{len(_CONV_CASES)} hidden calls, two of them invalid")


def scale_op(tiling_fn, name: str = "scale") -> OpDef:
    """The lab's element-wise ``y = alpha * x`` operator with ``tiling_fn`` as its host tiling function
    (tiling fields used by the kernel: ``tile`` and ``buffer_num``)."""
    op = OpDef(name, "y = alpha * x, element-wise")
    op.input("x", ["float16", "float32"]).output("y", ["float16", "float32"])
    op.attr("alpha", float, 1.0)
    op.infer_shape(lambda ctx: [ctx.input_shapes[0]])
    op.tiling(tiling_fn)

    @op.kernel(0)
    def _kernel(x, y, tiling):
        scale_kernel(x, y, x.size, tiling.alpha, tiling.tile, tiling.buffer_num)

    return op


def _legal(t, ctx: InferContext) -> str:
    cfg, isz = ctx.config, ctx.input_dtypes[0].itemsize
    if not isinstance(t, TilingData):
        return f"the tiling function must return a TilingData, not {type(t).__name__}"
    f = t.fields
    for key in ("tile", "buffer_num", "alpha"):
        if key not in f:
            return f"TilingData.fields has no '{key}' (the kernel reads tiling.tile, tiling.buffer_num, tiling.alpha)"
    if not isinstance(t.block_dim, int) or not 1 <= t.block_dim <= cfg.num_cores:
        return f"block_dim={t.block_dim!r}: it must be an int from 1 to {cfg.num_cores} (the cores of '{cfg.name}')"
    if f["buffer_num"] not in (1, 2):
        return f"buffer_num={f['buffer_num']!r}: 1 or 2"
    tile = f["tile"]
    if not isinstance(tile, int) or tile < 1 or (tile * isz) % 32:
        return f"tile={tile!r}: a positive number of elements that makes whole 32 B blocks ({32 // isz} elements)"
    need = 2 * f["buffer_num"] * tile * isz
    if need > cfg.ub_bytes:
        return (f"tile={tile} with {f['buffer_num']} buffers needs 2 queues x {f['buffer_num']} x {tile * isz} B = "
                f"{need} B of UB, but '{cfg.name}' has {cfg.ub_bytes} B")
    return ""


def scale_tiling(fn) -> None:
    """``fn(ctx) -> TilingData`` is a legal tiling of the scale operator on hidden shapes, dtypes and
    hardware, the results are right, and a large input uses several cores."""
    __tracebackhide__ = True
    name = "scale_tiling"
    small_ub = a2.replace(name="a2-small-ub", ub_bytes=32 * 1024, num_cores=4)
    cases = [((1,), np.float16, a2), ((7, 9), np.float32, a2), ((4096,), np.float16, classic),
             ((3, 100, 33), np.float16, small_ub), ((1 << 20,), np.float16, a2), ((65537,), np.float32, small_ub)]
    op_name = "_check_scale"
    problems: list[str] = []

    def checked(ctx: InferContext) -> TilingData:
        t = call_learner(name, fn, ctx)
        msg = _legal(t, ctx)
        if msg:
            problems.append(f"on [shape={ctx.input_shapes[0]}, dtype={ctx.input_dtypes[0].name}, "
                            f"config={ctx.config.name}] {msg}")
            raise CheckFailed(name, problems[-1])
        return t

    register(scale_op(checked, op_name))
    try:
        for i, (shape, dt, cfg) in enumerate(cases):
            x = np.random.default_rng(i).standard_normal(shape).astype(dt)
            try:
                r = call(op_name, x, alpha=0.5, config=cfg, cache=TilingCache(0))
            except NpuSimError as e:
                raise CheckFailed(name, f"on [shape={shape}, dtype={np.dtype(dt).name}, config={cfg.name}] the "
                                        f"operator failed: {type(e).__name__}: {e}") from None
            if not np.array_equal(r.out, (x * dt(0.5)).astype(dt)):
                raise CheckFailed(name, f"on [shape={shape}, config={cfg.name}] the result is wrong: does the "
                                        f"tiling cover every element?")
            if x.size == 1 << 20 and r.tiling.block_dim < 2:
                raise CheckFailed(name, f"a {x.size:,}-element input ran on block_dim={r.tiling.block_dim}: give "
                                        f"a large input several cores")
    finally:
        REGISTRY.pop(op_name, None)
    passed(name, f"{len(cases)} hidden shapes/dtypes/configs, all legal and correct")


INT8_BAR = 0.03


def int8_accuracy(quantize_per_channel) -> None:
    """``quantize_per_channel(w) -> (w_int8, scales)`` (one scale per column of w) makes the int8 matmul
    meet the bar: every output column's relative L2 error <= 3 % against the float reference."""
    __tracebackhide__ = True
    name = "int8_accuracy"
    rng = np.random.default_rng(77)
    for case in range(3):
        m, k, n = [(48, 96, 40), (16, 200, 24), (64, 64, 16)][case]
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = (rng.standard_normal((k, n)) * rng.choice([0.01, 0.1, 1.0, 5.0], size=n)).astype(np.float32)
        sx = np.abs(x).max() / 127
        qx = np.clip(np.rint(x / sx), -127, 127).astype(np.int8)
        qw, sw = call_learner(name, quantize_per_channel, w)
        qw, sw = np.asarray(qw), np.asarray(sw, dtype=np.float32).reshape(-1)
        if qw.dtype != np.int8 or qw.shape != w.shape or sw.shape != (n,):
            raise CheckFailed(name, f"expected an int8 array of shape {w.shape} and {n} scales, got "
                                    f"{qw.dtype} {qw.shape} and {sw.shape}")
        out = call("matmul", qx, qw, (sx * sw).astype(np.float32)).out.astype(np.float64)
        ref = x.astype(np.float64) @ w
        err = np.linalg.norm(out - ref, axis=0) / np.maximum(np.linalg.norm(ref, axis=0), 1e-30)
        worst = int(np.argmax(err))
        if err[worst] > INT8_BAR:
            raise CheckFailed(name, f"on a hidden {m}x{k} @ {k}x{n} matmul, output column {worst} has a relative "
                                    f"error of {err[worst]:.1%} (bar {INT8_BAR:.0%}); its weights span "
                                    f"±{np.abs(w[:, worst]).max():.3g}. Look at: a scale per column, "
                                    f"max|w[:, j]| / 127, so that small columns keep their resolution")
    passed(name, f"3 hidden matmuls: every output column within {INT8_BAR:.0%} of the float result")
