"""The conv2d operator (NCHW in and out, optional bias, ReLU, int8 dequantisation) on the four Conv2D
variants of :mod:`npusim.conv`. The call launches the layout transforms the variant needs around the
convolution kernel; ``OpResult.launches`` lists every launch.

- ``relu=True``: fused into the img2col kernel's drain (in Fixpipe on A2, in UB on 'classic') unless
  ``fuse=False``, which runs the ``relu`` operator as a separate launch after the convolution (as the
  other variants always do).
- int8 ``x`` and ``w`` with a float32 ``scale`` (1 value, or one per output channel): int8 x int8 ->
  int32 in L0C, dequantised to float16 in the drain (Fixpipe's ``deq_scale`` on A2), then ReLU if asked.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..conv import ConvGeometry, choose_tiling
from ..conv.api import conv2d as conv2d_runner
from ..conv.common import Epilogue
from ..conv.geometry import pair
from ..conv.tiling import VARIANTS
from ..errors import NpuSimError
from ..l2 import current_shared, shared_l2
from .opdef import InferContext, OpDef, TilingData
from .runtime import execute, get_workspace_size, register

conv2d = OpDef("conv2d", "y = conv2d(x, w) + bias, then ReLU if relu=True (fused into the img2col kernel unless "
                         "fuse=False); int8 x int8 dequantised to float16 with the 'scale' input; NCHW in and out")
conv2d.input("x", ["float16", "float32", "int8"], ["NCHW", "NCHW", "NCHW"])
conv2d.input("w", ["float16", "float32", "int8"], ["NCHW", "NCHW", "NCHW"])
conv2d.input("bias", ["float16", "float32", "int32"], ["ND", "ND", "ND"], optional=True)
conv2d.input("scale", ["float32", "float32", "float32"], ["ND", "ND", "ND"], optional=True)
conv2d.output("y", ["float16", "float32", "float16"], ["NCHW", "NCHW", "NCHW"])
_pair_ok = (int, tuple, list)
conv2d.attr("stride", _pair_ok, 1, doc="an int or (sh, sw) >= 1")
conv2d.attr("padding", _pair_ok, 0, doc="an int or (ph, pw) >= 0")
conv2d.attr("dilation", _pair_ok, 1, doc="an int or (dh, dw) >= 1")
conv2d.attr("relu", bool, False, doc="apply ReLU to the output")
conv2d.attr("fuse", bool, True, doc="ReLU in the img2col kernel's drain (True) or as a separate relu launch (False)")
conv2d.attr("variant", str, "img2col", check=lambda v: v in VARIANTS, doc=f"one of {VARIANTS}")


def _int8(ctx: InferContext) -> bool:
    return ctx.input_dtypes[0].name == "int8"


def geometry(ctx: InferContext) -> ConvGeometry:
    """The convolution's sizes from the call (raises a clear error for shapes that do not fit)."""
    x, w, bias, scale = ctx.input_shapes
    a = ctx.attrs
    int8 = _int8(ctx)
    try:
        for name in ("stride", "padding", "dilation"):
            pair(a[name], name)
        g = ConvGeometry.of(x, w, a["stride"], a["padding"], a["dilation"], ctx.input_dtypes[0].name,
                            dequant=int8)
    except NpuSimError as e:
        ctx.fail(str(e).split("\n")[0].removeprefix("conv2d: "))
    if bias is not None:
        if int8:
            ctx.fail("an int8 conv2d takes no bias here: the int32 bias would be added by Fixpipe, which npusim's "
                     "fixpipe does not model; fold it into the next layer or add it to the output")
        if tuple(bias) != (g.cout,):
            ctx.fail(f"bias must have shape ({g.cout},), one value per output channel, got {bias}")
    if int8:
        if scale is None:
            ctx.fail("int8 inputs need the dequantisation input 'scale': float32, 1 value (per tensor) or "
                     f"{g.cout} (one per output channel)")
        if len(scale) > 1 or (len(scale) == 1 and scale[0] not in (1, g.cout)):
            ctx.fail(f"'scale' must have shape (1,) (per tensor) or ({g.cout},) (one per output channel), got "
                     f"{tuple(scale)}")
        if a["variant"] != "img2col":
            ctx.fail(f"int8 dequantisation happens in the img2col kernel's drain; variant {a['variant']!r} "
                     f"cannot do it")
    elif scale is not None:
        ctx.fail(f"'scale' is the dequantisation scale of int8 inputs; {ctx.input_dtypes[0].name} inputs take none")
    return g


def epilogue(ctx: InferContext, g: ConvGeometry) -> Epilogue:
    """What the kernel's drain does: ReLU when fused, dequantisation for int8 (per tensor or channel)."""
    a = ctx.attrs
    scale = ctx.input_shapes[3]
    kind = None
    if _int8(ctx):
        kind = "tensor" if (len(scale) == 0 or scale[0] == 1) else "channel"
    fused_relu = a["relu"] and a["fuse"] and a["variant"] == "img2col"
    return Epilogue(relu=fused_relu, dequant=kind)


@conv2d.infer_shape
def _conv_shape(ctx: InferContext):
    g = geometry(ctx)
    return [(g.n, g.cout, g.ho, g.wo)]


@conv2d.tiling
def _conv_tiling(ctx: InferContext) -> TilingData:
    g = geometry(ctx)
    ep = epilogue(ctx, g)
    # img2col splits the work (images x bands of output rows x Cout groups) over all the chip's cores, as
    # production conv kernels do; the row-wise variants split bands only
    t = choose_tiling(g, ctx.config, ctx.attrs["variant"], ep or None, cores=ctx.config.num_cores)
    # one block per work item, up to the cores there are
    block_dim = max(1, min(ctx.config.num_cores, t.work_items(g)))
    return TilingData(block_dim=block_dim, fields={"geometry": g, "conv": t, "epilogue": ep})


@conv2d.prepare
def _conv_prepare(ctx: InferContext, tiling: TilingData, inputs: list) -> list:
    """Host-side: the dequantisation scale as a flat float32 vector (1 or Cout values); the kernel's runner
    pads it to whole 16-channel blocks (and packs the weights into FRACTAL_Z)."""
    x, w, bias, scale = inputs
    if scale is not None:
        scale = np.ascontiguousarray(scale, dtype=np.float32).reshape(-1)
    return [x, w, bias, scale]


@conv2d.run
def _conv_run(ctx: InferContext, tiling: TilingData, inputs: list, outputs: list, sanitize: str):
    x, w, bias, scale = inputs
    a = ctx.attrs
    fused_relu = tiling.epilogue.relu
    # the operator's launches run back to back on one L2: the convolution finds the layout transform's
    # output there (as on hardware, where TransData writes it into L2 just before), its weights come from HBM
    with contextlib.ExitStack() as stack:
        if current_shared() is None:
            stack.enter_context(shared_l2(ctx.config))
        res = conv2d_runner(x, w, bias, a["stride"], a["padding"], a["dilation"], variant=a["variant"],
                            tiling=tiling.conv, config=ctx.config, block_dim=tiling.block_dim, sanitize=sanitize,
                            relu=fused_relu, deq_scale=scale, fuse=True)
    # in execution order: the input layout transform, the convolution, the output transform
    before = [(k, v) for k, v in res.transforms.items() if k == "nchw_to_nc1hwc0"]
    after = [(k, v) for k, v in res.transforms.items() if k != "nchw_to_nc1hwc0"]
    launches = before + [("conv2d", res.profile)] + after
    y = res.output
    if a["relu"] and not fused_relu:  # unfused: a separate vector kernel reads y back from GM and writes it again
        _, ex = get_workspace_size("relu", y, config=ctx.config)
        rr = execute(ex, sanitize=sanitize)
        launches.append(("relu", rr.profile))
        y = rr.out
    np.copyto(outputs[0], y)
    return launches


register(conv2d)
