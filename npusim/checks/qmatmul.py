"""Lab 07's operator ``qmatmul``: the parts a learner wraps (the kernels and the host-side weight packing)
and a reference of each part the learner writes, which the checks combine with the learner's own.

``qmatmul`` is a QuantBatchMatmul-like operator: ``y = x @ w`` with ``x`` (m, k) and ``w`` (k, n), ReLU
fused when the attribute ``relu`` is set, in two dtype combinations:

========  ========  ==================  =========  =================================================
x         w         scale (optional)    y          what runs
========  ========  ==================  =========  =================================================
float16   float16   absent              float32    kernel 0: fp16 Cube, fp32 accumulation
int8      int8      float32, 1 or n     float16    kernel 1: int8 Cube, int32 accumulation, Fixpipe
                                                   multiplies column j by scale[j] on its way to GM
========  ========  ==================  =========  =================================================

Every tensor is ND (row-major). The kernels read m, n and k from the tensors they get (in Ascend C a kernel
gets addresses only and reads sizes from its tiling data): a TilingData holds only what the host decided,
``block_dim``, the tiling key (the kernel variant) and the fields ``blocks`` (a :class:`MatmulTiling`, in
elements) and ``relu``.
"""

from __future__ import annotations

import math
from typing import Callable, Hashable

import numpy as np

from .. import formats
from ..config import HardwareConfig
from ..errors import CapacityError
from ..kernels.matmul import MatmulTiling, matmul as matmul_kernel
from ..ops import InferContext, OpDef, TilingCache, TilingData, register
from ..ops.library import estimate_matmul_cycles

DOC = "y = relu?(x @ w): float16 -> float32, or int8 x int8 -> float16 dequantised by a per-column scale"


# --- the given parts: host-side packing and the two kernels ------------------------------------------
def pack_weights(ctx: InferContext, tiling: TilingData, inputs: list) -> list:
    """Host preparation before launch. The int8 kernel reads w as ZN fractals (packed once per weight, as
    a framework does) and one scale per output column, padded to whole 16-column fractals."""
    x, w, scale = inputs
    if tiling.tiling_key == 0:
        return [x, w]
    n = w.shape[1]
    per_col = np.zeros(-(-n // 16) * 16, np.float32)
    per_col[:n] = np.broadcast_to(scale.astype(np.float32), (n,))
    return [x, formats.nd_to_zn(w), per_col]


def fp16_kernel(x, w, y, tiling: TilingData) -> None:
    """Kernel 0: y (fp32) = relu?(x @ w) for float16 x and w."""
    matmul_kernel(x, w, y, x.shape[0], w.shape[1], x.shape[1], tiling.blocks, relu=tiling.relu)


def int8_kernel(x, w_zn, scale, y, tiling: TilingData) -> None:
    """Kernel 1: y (fp16) = relu?((x @ w) * scale[col]) for int8 x and packed int8 w."""
    matmul_kernel(x, w_zn, y, x.shape[0], y.shape[1], x.shape[1], tiling.blocks, b_packed=True,
                  deq_scale=scale, relu=tiling.relu)


def add_kernels(op: OpDef) -> OpDef:
    """Attach the given host preparation and kernels (tiling key 0: fp16, 1: int8) to ``op``."""
    op.prepare(pack_weights)
    op.kernel(0)(fp16_kernel)
    op.kernel(1)(int8_kernel)
    return op


def build(name: str, declare: Callable[[str], OpDef], infer_shape: Callable, infer_dtype: Callable,
          tiling: Callable) -> OpDef:
    """The operator from its parts: a declaration, shape and dtype inference, a host tiling function, and
    the given kernels."""
    op = declare(name)
    op.infer_shape(infer_shape)
    op.infer_dtype(infer_dtype)
    op.tiling(tiling)
    return add_kernels(op)


def predict_cycles(blocks: MatmulTiling, m: int, n: int, k: int, dtype: str, config: HardwareConfig,
                   block_dim: int) -> float:
    """The cost model's prediction of the kernel's cycles with ``blocks`` on ``block_dim`` cores (no
    simulation: MTE2, MTE1 and the Cube per K step, overlapped with two buffers)."""
    dt = np.dtype(dtype)
    return estimate_matmul_cycles(blocks, m, n, k, dt, config, block_dim, b_packed=dt == np.int8)


# --- the reference of each exercise --------------------------------------------------------------------
def declare(name: str = "qmatmul") -> OpDef:
    """Exercise 1: the declaration."""
    op = OpDef(name, DOC)
    op.input("x", ["float16", "int8"], ["ND", "ND"])
    op.input("w", ["float16", "int8"], ["ND", "ND"])
    op.input("scale", ["float32", "float32"], ["ND", "ND"], optional=True)
    op.output("y", ["float32", "float16"], ["ND", "ND"])
    op.attr("relu", bool, False, doc="ReLU on the result, applied in the Fixpipe")
    return op


def infer_shape(ctx: InferContext) -> list[tuple[int, ...]]:
    """Exercise 2: the output shape, refusing every call the kernels cannot run."""
    x, w, scale = ctx.input_shapes
    if len(x) != 2:
        ctx.fail(f"x must be 2-D (m, k), got shape {x}")
    if len(w) != 2:
        ctx.fail(f"w must be 2-D (k, n), got shape {w}")
    if x[1] != w[0]:
        ctx.fail(f"x is {x} and w is {w}: x has k={x[1]} columns but w has {w[0]} rows")
    int8 = ctx.input_dtypes[0] == np.int8
    if int8 and scale is None:
        ctx.fail("int8 inputs need 'scale', the dequantisation scale (1 or n float32 values)")
    if not int8 and scale is not None:
        ctx.fail("'scale' is for int8 inputs only: float16 inputs need no dequantisation")
    if scale is not None and (len(scale) != 1 or scale[0] not in (1, w[1])):
        ctx.fail(f"'scale' has shape {scale}: it must hold 1 value or n={w[1]} (one per column of w)")
    for needs, what in ((int8, "int8 inputs (dequantised in the Fixpipe)"), (ctx.attrs["relu"], "relu=True")):
        if needs and not ctx.config.has_fixpipe:
            ctx.fail(f"{what} need the Fixpipe, which the '{ctx.config.name}' core does not have")
    return [(x[0], w[1])]


def infer_dtype(ctx: InferContext) -> list[np.dtype]:
    """Exercise 2: the output dtype."""
    return [np.dtype(np.float16 if ctx.input_dtypes[0] == np.int8 else np.float32)]


def candidates(dtype: str) -> list[MatmulTiling]:
    """Block sizes worth trying: 16..256 rows and columns, K steps of whole fractals (32 for int8)."""
    k_steps = (32, 64, 128, 256) if np.dtype(dtype) == np.int8 else (16, 32, 64, 128, 256)
    sizes = (16, 32, 64, 128, 256)
    return [MatmulTiling(bm, bn, bk, bufs) for bm in sizes for bn in sizes for bk in k_steps for bufs in (1, 2)]


def tiling(ctx: InferContext) -> TilingData:
    """Exercise 3: search the legal block sizes for the fastest predicted time."""
    (m, k), (_, n) = ctx.input_shapes[0], ctx.input_shapes[1]
    dt, cfg = ctx.input_dtypes[0].name, ctx.config
    best = (math.inf, None, 0)
    for blocks in candidates(dt):
        try:
            blocks.check(cfg, dt, "float32")
        except CapacityError:
            continue
        block_dim = min(cfg.num_cores, -(-m // blocks.base_m) * -(-n // blocks.base_n))
        cycles = predict_cycles(blocks, m, n, k, dt, cfg, block_dim)
        if cycles < best[0]:
            best = (cycles, blocks, block_dim)
    _, blocks, block_dim = best
    return TilingData(block_dim=block_dim, tiling_key=int(dt == "int8"),
                      fields={"blocks": blocks, "relu": ctx.attrs["relu"]})


class BucketCache(TilingCache):
    """Exercise 4: m only counts through the 16-row fractals it fills; everything else exactly."""

    def key(self, ctx: InferContext) -> Hashable:
        (m, k), (_, n) = ctx.input_shapes[0], ctx.input_shapes[1]
        return ctx.op, -(-m // 16), n, k, ctx.input_dtypes[0].name, ctx.attrs["relu"], ctx.config.key


def quantize_per_channel(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exercise 5: symmetric int8 with one scale per column (an all-zero column gets scale 1)."""
    s = np.abs(w).max(axis=0) / 127
    s = np.where(s == 0, 1.0, s)
    return np.clip(np.rint(w / s), -127, 127).astype(np.int8), s.astype(np.float32)


def reference(name: str = "qmatmul_ref") -> OpDef:
    """The whole operator from the reference parts, registered as ``name``."""
    return register(build(name, declare, infer_shape, infer_dtype, tiling))
