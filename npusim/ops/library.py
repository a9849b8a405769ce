"""The registered operators: add, relu, softmax, matmul (float and int8). conv2d (+relu) registers in
:mod:`npusim.ops.conv`.

Each host tiling function reads shapes and the hardware and returns TilingData; the bigger ones search
candidate tilings with the cost model, which is why caching them pays off.
"""

from __future__ import annotations

import numpy as np

from .. import formats
from ..config import HardwareConfig
from ..kernels.elementwise import relu as relu_kernel
from ..kernels.matmul import MatmulTiling, matmul as matmul_kernel
from ..kernels.matmul_tiling import choose_matmul_tiling, estimate_matmul_cycles  # noqa: F401  (the host tiling)
from ..kernels.softmax import softmax as softmax_kernel
from ..kernels.vector_add import vector_add
from .opdef import InferContext, OpDef, TilingData
from .runtime import register

FLOATS = ["float16", "float32"]


def elementwise_tiling(total: int, itemsize: int, queues: int, cfg: HardwareConfig) -> TilingData:
    """Blocks and tile for a streaming element-wise kernel: enough blocks to keep every vector core (48 AIV
    on a2) busy with at least 8 KB each, and the largest 512 B-multiple tile for which ``queues`` x 2 buffers fit in UB (no
    launch for an empty tensor)."""
    if total == 0:
        return TilingData(block_dim=0, fields={"total": 0, "tile": 0, "buffer_num": 2})
    block_dim = max(1, min(cfg.vector_cores, total * itemsize // 8192))
    per_block = -(-total // block_dim)
    tile = cfg.ub_bytes // (queues * 2) // 512 * 512 // itemsize
    tile = max(256 // itemsize, min(tile, -(-per_block * itemsize // 512) * 512 // itemsize))
    return TilingData(block_dim=block_dim, fields={"total": total, "tile": tile, "buffer_num": 2})


def _same_shapes(ctx: InferContext) -> list[tuple[int, ...]]:
    first = ctx.input_shapes[0]
    for s in ctx.input_shapes[1:]:
        if s is not None and s != first:
            ctx.fail(f"inputs must have the same shape, got {first} and {s} (no broadcasting)")
    return [first]


# --- add -------------------------------------------------------------------------------------------
add = OpDef("add", "z = x + y, element-wise, same shapes")
add.input("x", FLOATS).input("y", FLOATS).output("z", FLOATS)
add.infer_shape(_same_shapes)


@add.tiling
def _add_tiling(ctx: InferContext) -> TilingData:
    return elementwise_tiling(int(np.prod(ctx.input_shapes[0])), ctx.input_dtypes[0].itemsize, 3, ctx.config)


@add.kernel(0)
def _add_kernel(x, y, z, tiling):
    vector_add(x, y, z, tiling.total, tiling.tile, tiling.buffer_num)


# --- relu ------------------------------------------------------------------------------------------
relu = OpDef("relu", "y = max(x, 0), element-wise")
relu.input("x", FLOATS).output("y", FLOATS)
relu.infer_shape(_same_shapes)


@relu.tiling
def _relu_tiling(ctx: InferContext) -> TilingData:
    return elementwise_tiling(int(np.prod(ctx.input_shapes[0])), ctx.input_dtypes[0].itemsize, 2, ctx.config)


@relu.kernel(0)
def _relu_kernel(x, y, tiling):
    relu_kernel(x, y, tiling.total, tiling.tile, tiling.buffer_num)


# --- softmax ---------------------------------------------------------------------------------------
softmax = OpDef("softmax", "row-wise softmax over the last axis")
softmax.input("x", FLOATS).output("y", FLOATS)
softmax.attr("axis", int, -1, check=lambda a: a == -1, doc="only the last axis (-1) is supported")


@softmax.infer_shape
def _softmax_shape(ctx: InferContext):
    if len(ctx.input_shapes[0]) < 1:
        ctx.fail("softmax needs at least one dimension")
    return [ctx.input_shapes[0]]


@softmax.tiling
def _softmax_tiling(ctx: InferContext) -> TilingData:
    shape = ctx.input_shapes[0]
    cols = shape[-1]
    rows = int(np.prod(shape[:-1]))
    if rows * cols == 0:    # an empty tensor: an empty softmax
        return TilingData(block_dim=0, fields={"rows": rows, "cols": cols})
    isz = ctx.input_dtypes[0].itemsize
    # UB: 2 x in + 2 x out tiles (input dtype) + one fp32 work tile + small reduction buffers
    per_elem = 4 * isz + 4
    tile = (ctx.config.ub_bytes - 4096) // per_elem // 256 * 256
    tile = min(tile, -(-cols // 64) * 64)
    return TilingData(block_dim=max(1, min(rows, ctx.config.vector_cores)),
                      fields={"rows": rows, "cols": cols, "tile": tile, "buffer_num": 2})


@softmax.kernel(0)
def _softmax_kernel(x, y, tiling):
    softmax_kernel(x, y, tiling.rows, tiling.cols, tiling.tile, tiling.buffer_num)


# --- matmul ----------------------------------------------------------------------------------------
matmul = OpDef("matmul", "c = a @ b; fp16/bf16 -> fp32, or int8 x int8 -> int32 dequantised to fp16 with "
                         "a per-column scale (input 'scale') in Fixpipe")
matmul.input("a", ["float16", "bfloat16", "int8"]).input("b", ["float16", "bfloat16", "int8"])
matmul.input("scale", ["float32", "float32", "float32"], optional=True)
matmul.output("c", ["float32", "float32", "float16"])
matmul.attr("tiling", MatmulTiling, None, doc="force these block sizes (e.g. a tiling tuned for one shape) "
                                              "instead of searching per shape")


@matmul.infer_shape
def _matmul_shape(ctx: InferContext):
    a, b, scale = ctx.input_shapes
    if len(a) != 2 or len(b) != 2:
        ctx.fail(f"a and b must be 2-D, got {a} and {b}")
    if a[1] != b[0]:
        ctx.fail(f"inner sizes differ: a is {a}, b is {b} (a.shape[1] must equal b.shape[0])")
    int8 = ctx.input_dtypes[0].name == "int8"
    if int8 and scale is None:
        ctx.fail("int8 inputs need the dequantisation scale input: one float32 per output column, or one value")
    if int8 and not ctx.config.has_fixpipe:
        ctx.fail(f"int8 matmul dequantises in the Fixpipe, which the '{ctx.config.name}' core does not have "
                 f"(conv2d's int8 path dequantises on the vector unit there)")
    if scale is not None and (not int8 or (len(scale) != 1 or scale[0] not in (1, b[1]))):
        ctx.fail(f"'scale' is for int8 inputs and has 1 or {b[1]} values (one per output column), got {scale}")
    return [(a[0], b[1])]


@matmul.tiling
def _matmul_tiling(ctx: InferContext) -> TilingData:
    (m, k), (_, n) = ctx.input_shapes[0], ctx.input_shapes[1]
    dt = ctx.input_dtypes[0].name
    if min(m, n, k) == 0:   # an empty product (zeros, K = 0) or an empty result: nothing to launch
        return TilingData(block_dim=0, tiling_key=1 if dt == "int8" else 0, fields={"m": m, "n": n, "k": k})
    forced = ctx.attrs["tiling"]
    in_dt = dt if dt != "bfloat16" else "float16"
    if forced is None:
        tiling, block_dim = choose_matmul_tiling(m, n, k, in_dt, ctx.config, b_packed=dt == "int8")
    else:
        forced.check(ctx.config, in_dt, "float32", k)
        tiling = forced
        block_dim = min(ctx.config.num_cores, len(forced.regions(m, n)))
    return TilingData(block_dim=block_dim, tiling_key=1 if dt == "int8" else 0,
                      fields={"m": m, "n": n, "k": k, "matmul": tiling})


@matmul.prepare
def _matmul_prepare(ctx: InferContext, tiling: TilingData, inputs: list) -> list:
    a, b, scale = inputs
    if tiling.tiling_key == 0:
        return [a, b]
    n = b.shape[1]
    n16 = -(-n // 16) * 16
    per_col = np.zeros(n16, np.float32)
    per_col[:n] = np.broadcast_to(scale.astype(np.float32), (n,))
    return [a, formats.nd_to_zn(b), per_col]  # weights packed into L0B's ZN fractals, scales padded


@matmul.kernel(0)
def _matmul_float(a, b, c, tiling):
    matmul_kernel(a, b, c, tiling.m, tiling.n, tiling.k, tiling.matmul)


@matmul.kernel(1)
def _matmul_quant(a, b_zn, scale, c, tiling):
    matmul_kernel(a, b_zn, c, tiling.m, tiling.n, tiling.k, tiling.matmul, b_packed=True, deq_scale=scale)


for _op in (add, relu, softmax, matmul):
    register(_op)
