"""The conv2d operator (NCHW in and out, optional bias and ReLU) on the four Conv2D variants of
:mod:`npusim.conv`. The call launches the layout transforms the variant needs around the convolution kernel;
``OpResult.launches`` lists every launch."""

from __future__ import annotations

import numpy as np

from ..conv import ConvGeometry, choose_tiling
from ..conv.api import RUNNERS
from ..conv.geometry import pair
from ..conv.tiling import VARIANTS
from ..errors import NpuSimError
from .opdef import InferContext, OpDef, TilingData
from .runtime import execute, get_workspace_size, register

conv2d = OpDef("conv2d", "y = conv2d(x, w) + bias, then ReLU if relu=True; NCHW in and out")
conv2d.input("x", ["float16", "float32"], ["NCHW", "NCHW"])
conv2d.input("w", ["float16", "float32"], ["NCHW", "NCHW"])
conv2d.input("bias", ["float16", "float32"], ["ND", "ND"], optional=True)
conv2d.output("y", ["float16", "float32"], ["NCHW", "NCHW"])
_pair_ok = (int, tuple, list)
conv2d.attr("stride", _pair_ok, 1, doc="an int or (sh, sw) >= 1")
conv2d.attr("padding", _pair_ok, 0, doc="an int or (ph, pw) >= 0")
conv2d.attr("dilation", _pair_ok, 1, doc="an int or (dh, dw) >= 1")
conv2d.attr("relu", bool, False, doc="apply ReLU to the output")
conv2d.attr("variant", str, "img2col", check=lambda v: v in VARIANTS, doc=f"one of {VARIANTS}")


def geometry(ctx: InferContext) -> ConvGeometry:
    """The convolution's sizes from the call (raises a clear error for shapes that do not fit)."""
    x, w, bias = ctx.input_shapes
    a = ctx.attrs
    try:
        for name in ("stride", "padding", "dilation"):
            pair(a[name], name)
        g = ConvGeometry.of(x, w, a["stride"], a["padding"], a["dilation"], ctx.input_dtypes[0].name)
    except NpuSimError as e:
        ctx.fail(str(e).split("\n")[0].removeprefix("conv2d: "))
    if bias is not None and tuple(bias) != (g.cout,):
        ctx.fail(f"bias must have shape ({g.cout},), one value per output channel, got {bias}")
    return g


@conv2d.infer_shape
def _conv_shape(ctx: InferContext):
    g = geometry(ctx)
    return [(g.n, g.cout, g.ho, g.wo)]


@conv2d.tiling
def _conv_tiling(ctx: InferContext) -> TilingData:
    g = geometry(ctx)
    t = choose_tiling(g, ctx.config, ctx.attrs["variant"])
    # one block per image and band of output rows, up to the cores there are
    block_dim = max(1, min(ctx.config.num_cores, g.n * -(-g.ho // max(1, t.rows))))
    return TilingData(block_dim=block_dim, fields={"geometry": g, "conv": t})


@conv2d.run
def _conv_run(ctx: InferContext, tiling: TilingData, inputs: list, outputs: list, sanitize: str):
    x, w, bias = inputs
    a = ctx.attrs
    res = RUNNERS[a["variant"]](x, w, bias, a["stride"], a["padding"], a["dilation"], tiling=tiling.conv,
                                config=ctx.config, block_dim=tiling.block_dim, sanitize=sanitize)
    launches = [("conv2d", res.profile)] + list(res.transforms.items())
    y = res.output
    if a["relu"]:  # unfused: a separate vector kernel reads y back from GM and writes it again
        _, ex = get_workspace_size("relu", y, config=ctx.config)
        rr = execute(ex, sanitize=sanitize)
        launches.append(("relu", rr.profile))
        y = rr.out
    np.copyto(outputs[0], y)
    return launches


register(conv2d)
