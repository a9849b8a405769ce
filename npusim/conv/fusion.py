"""Operator fusion, Conv2D + ReLU (and int8 dequantisation): the host side (the story of lab 06).

**The separate pair.** The convolution kernel writes ``y`` to GM; a vector ReLU kernel
(:func:`npusim.kernels.elementwise.relu`) reads it back (MTE2), computes ``max(y, 0)`` in UB and writes
it again (MTE3): the output crosses the GM port three times, and a second launch is paid.

**The fused kernel.** The img2col kernel applies the ReLU in its drain, on the way out of L0C (an
:class:`~npusim.conv.common.Epilogue`): inside Fixpipe on A2 (``FixpipeParams(relu=True)``, no extra
instruction), as one vector pass over each tile in UB on 'classic' (after the cast, in the output dtype).
The output crosses the GM port once. The same mechanism dequantises int8 convolutions: int8 x int8 ->
int32 in L0C, times an fp32 scale (one per tensor, or one per output channel) in Fixpipe, cast to fp16.

**Exactly the same answer.** The pair computes ``relu(round16(acc))``, the fused kernel on A2
``round16(relu(acc))`` (Fixpipe's order) and on 'classic' ``relu(round16(acc))`` again. Round to nearest
is monotone and maps 0 to 0, so both give the same value for every fp32 ``acc``
(``relu_commutes_with_rounding`` checks every fp32 value near each fp16 value and rounding midpoint).
The one possible difference is the sign of a zero: a tiny negative accumulator rounds to -0.0 in fp16,
and the vector ReLU ``max(-0.0, 0)`` keeps it, where Fixpipe's ReLU before the cast gives +0.0. They
compare equal (``-0.0 == 0.0``), and the NHWC -> NCHW transform (I @ Y^T on the Cube, which adds +0
terms) turns -0.0 into +0.0 anyway, so conv2d's NCHW outputs come out with the same bits
(:attr:`FusionComparison.same_bits` counts the two zeros as equal either way).

- :func:`compare_fusion` runs both on the same inputs and returns a :class:`FusionComparison` (outputs,
  profiles, time and GM bytes saved, and :meth:`FusionComparison.chart`).
- :func:`run_relu` is the separate ReLU launch; :func:`chain` puts several launches on one timeline;
  :func:`dequant_scales` checks and packs the scales of an int8 convolution (all three live in
  :mod:`npusim.conv.epilogue`, below the runners of :mod:`npusim.conv.api`, and are re-exported here).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

import npusim as ns

from .api import ConvResult, run_img2col
from .common import Epilogue
from .epilogue import chain, dequant_scales, relu_tile, run_relu  # noqa: F401  (re-exported: lab 06, tests)
from .geometry import ConvGeometry
from .choose import choose_tiling
from ..chartstyle import readable


def relu_commutes_with_rounding(dtype=np.float16, sample: int = 1 << 22, seed: int = 0) -> int:
    """Check ``relu(round(x)) == round(relu(x))`` (as values: the sign of a zero may differ) for fp32 ``x``,
    with the simulator's cast to ``dtype`` (round to nearest even): every fp32 value within 3 ulps of each
    finite ``dtype`` value and of each midpoint between neighbouring ones (where rounding decides), +-0,
    the fp32 infinities, and ``sample`` random fp32 bit patterns (every exponent). Returns how many values
    were checked; raises AssertionError with the first counterexample."""
    from npusim.numerics import cast

    width = np.dtype(dtype).itemsize
    every = np.arange(1 << (8 * width), dtype=np.uint64).astype({2: np.uint16, 1: np.uint8}[width]).view(dtype)
    with np.errstate(invalid="ignore"):
        grid = np.unique(every[np.isfinite(every)].astype(np.float64))
    mids = (grid[:-1] + grid[1:]) / 2                     # exact in fp32: one more bit than the dtype has
    near = np.concatenate([grid, mids]).astype(np.float32)
    pts = [near]
    up, down = near, near
    for _ in range(3):
        up, down = np.nextafter(up, np.float32(np.inf)), np.nextafter(down, np.float32(-np.inf))
        pts += [up, down]
    rng = np.random.default_rng(seed)
    pts.append(rng.integers(0, 1 << 32, sample, dtype=np.uint64).astype(np.uint32).view(np.float32))
    pts.append(np.array([0.0, -0.0, np.inf, -np.inf], np.float32))
    xs = np.concatenate(pts)
    xs = xs[~np.isnan(xs)]
    with np.errstate(over="ignore", invalid="ignore"):
        one = cast(np.maximum(xs, np.float32(0)), dtype)            # ReLU, then round (Fixpipe's order)
        two = np.maximum(cast(xs, dtype), np.array(0, dtype))        # round, then ReLU (the separate pair)
    bad = one != two
    if bad.any():
        i = int(np.argmax(bad))
        raise AssertionError(f"ReLU and rounding do not commute at x = {float(xs[i])!r}: {one[i]!r} vs {two[i]!r}")
    return int(xs.size)


# ================================================================================================
# Fused against separate
# ================================================================================================


@dataclass
class FusionComparison:
    """The same Conv2D + ReLU run twice: ``separate`` (conv kernel, then the ReLU kernel) and ``fused``
    (ReLU in the conv kernel's drain). Both are :class:`~npusim.conv.api.ConvResult`; the layout transforms
    around them are the same launches on the same data, so the comparison is the kernels'."""

    separate: "ConvResult"
    fused: "ConvResult"

    # --- profiles -------------------------------------------------------------------------------
    @cached_property
    def separate_profile(self) -> ns.Profile:
        """The conv kernel and the ReLU kernel on one timeline."""
        return self.separate.kernels_profile

    @cached_property
    def fused_profile(self) -> ns.Profile:
        """The fused conv kernel (nothing runs after it)."""
        return self.fused.kernels_profile

    @property
    def relu_profile(self) -> ns.Profile:
        return self.separate.separate["relu"]

    # --- figures --------------------------------------------------------------------------------
    @property
    def equal(self) -> bool:
        """The two outputs have the same values (NaN nowhere; -0.0 == 0.0)."""
        a, b = self.separate.output, self.fused.output
        return a.shape == b.shape and bool(np.array_equal(a, b))

    @property
    def same_bits(self) -> bool:
        """Bit for bit the same, once -0.0 is counted as +0.0 (see the module docstring)."""
        a, b = self.separate.output, self.fused.output
        z = np.zeros((), a.dtype)
        return a.shape == b.shape and bool(np.array_equal((a + z).view(np.uint8), (b + z).view(np.uint8)))

    @property
    def output_bytes(self) -> int:
        return int(self.fused.output.nbytes)

    @property
    def gm_bytes_saved(self) -> int:
        """GM bytes the pair moves and the fused kernel does not: the ReLU kernel's read and write of y."""
        return self.separate_profile.gm_bytes - self.fused_profile.gm_bytes

    @property
    def time_saved_us(self) -> float:
        return self.separate_profile.time_us - self.fused_profile.time_us

    @property
    def speedup(self) -> float:
        """Kernel time of the pair / kernel time of the fused kernel (launch overheads excluded)."""
        return self.separate_profile.total_cycles / self.fused_profile.total_cycles

    def figures(self) -> dict[str, float]:
        s, f, r = self.separate_profile, self.fused_profile, self.relu_profile
        conv = self.separate.profile
        return {"conv_us": conv.time_us, "relu_us": r.time_us, "separate_us": s.time_us, "fused_us": f.time_us,
                "speedup": self.speedup, "time_saved_us": self.time_saved_us,
                "epilogue_cost_us": f.time_us - conv.time_us,
                "separate_gm_bytes": s.gm_bytes, "fused_gm_bytes": f.gm_bytes, "gm_bytes_saved": self.gm_bytes_saved,
                "output_bytes": self.output_bytes, "conv_bound": conv.bound,
                "conv_critical_pipe": conv.critical_pipe, "fused_critical_pipe": f.critical_pipe}

    def summary(self) -> str:
        d = self.figures()
        g = self.fused.geometry
        return (f"conv2d + ReLU, {g.describe()} on '{self.fused.profile.config.name}' "
                f"(block_dim {self.fused.profile.block_dim}):\n"
                f"  separate: conv {d['conv_us']:.2f} us + relu {d['relu_us']:.2f} us = {d['separate_us']:.2f} us, "
                f"GM {d['separate_gm_bytes']:,} B\n"
                f"  fused:    {d['fused_us']:.2f} us (the epilogue costs {d['epilogue_cost_us']:+.2f} us), "
                f"GM {d['fused_gm_bytes']:,} B\n"
                f"  saved:    {d['time_saved_us']:.2f} us ({d['speedup']:.2f}x), {d['gm_bytes_saved']:,} B of GM "
                f"traffic = {d['gm_bytes_saved'] / d['output_bytes']:.2f} x the output; outputs "
                f"{'identical' if self.same_bits else 'equal' if self.equal else 'DIFFERENT'}")

    def __str__(self) -> str:
        return self.summary()

    def chart(self):
        """Separate vs fused: kernel time (conv and ReLU stacked) and GM bytes by path."""
        return fusion_chart(self)


def compare_fusion(x, w, bias=None, stride=1, padding=0, dilation=1, *, out_dtype=None, tiling=None,
                   config=None, block_dim: int = 1, sanitize: str = "error", drain=None) -> FusionComparison:
    """Run conv2d + ReLU (img2col variant) twice on the same inputs: ReLU as a separate kernel, and fused
    into the conv kernel's drain (``drain``: a replacement for the built-in Drain class, for the fused run).
    The tiling (default: :func:`choose_tiling` for the fused pipeline) is the same for both, so only the
    epilogue differs."""
    cfg = ns.get_config(config)
    if tiling is None:   # the same block sizes for both: those chosen for the fused pipeline
        g = ConvGeometry.of(np.shape(x), np.shape(w), stride, padding, dilation, np.asarray(x).dtype, out_dtype)
        tiling = choose_tiling(g, cfg, "img2col", Epilogue(relu=True))
    kw = dict(out_dtype=out_dtype, tiling=tiling, config=cfg, block_dim=block_dim, sanitize=sanitize, relu=True)
    sep = run_img2col(x, w, bias, stride, padding, dilation, fuse=False, **kw)
    fus = run_img2col(x, w, bias, stride, padding, dilation, fuse=True, drain=drain, **kw)
    return FusionComparison(sep, fus)


# ================================================================================================
# The chart
# ================================================================================================


def fusion_chart(cmp: FusionComparison):
    """Two panels: kernel time of the pair (conv + ReLU, stacked) and of the fused kernel, with the
    speed-up; GM bytes per path of each, with the bytes saved. A matplotlib Figure."""
    from matplotlib.figure import Figure

    from .. import chartstyle as palette

    sep, fus, relu = cmp.separate.profile, cmp.fused_profile, cmp.relu_profile
    fig = Figure(figsize=(10.0, 3.6), dpi=80)
    # each panel's legend beside it, never over its bars (the fused bar is as tall as the pair on some layers)
    ax = fig.add_axes((0.07, 0.18, 0.25, 0.62))
    ax2 = fig.add_axes((0.55, 0.18, 0.27, 0.62))
    x = [0, 1]
    ax.bar(x[0], sep.time_us, color=palette.series(1), label="conv kernel", gid="conv_us")
    ax.bar(x[0], relu.time_us, bottom=sep.time_us, color=palette.series(2), label="ReLU kernel", gid="relu_us")
    bar = ax.bar(x[1], fus.time_us, color=palette.series(3), label="fused kernel", gid="fused_us")
    ax.bar_label(bar, labels=[f"{cmp.speedup:.2f}x"], fontsize="small", fontweight="bold")
    ax.set_xticks(x)
    ax.set_xticklabels(["separate", "fused"])
    ax.set_ylim(0, max(sep.time_us + relu.time_us, fus.time_us) * 1.25)
    ax.set_ylabel("kernel time (us)")
    ax.set_title("time", loc="left", fontsize="medium")
    ax.legend(fontsize="small", frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    paths = sorted({k for p in (cmp.separate_profile, fus) for k in p.path_bytes if "GM" in k})
    for i, p in enumerate((cmp.separate_profile, fus)):
        bottom = 0
        for k in paths:
            v = p.path_bytes.get(k, 0) / 1024
            ax2.bar(i, v, bottom=bottom, color=palette.path(k), label=k if i == 0 else None,
                    gid=f"gm_bytes|{i}|{k}")
            bottom += v
    ax2.set_xticks(x)
    ax2.set_xticklabels(["separate", "fused"])
    ax2.set_ylabel("GM traffic (KiB)")
    ax2.set_title(f"GM bytes: {cmp.gm_bytes_saved / 1024:,.0f} KiB saved "
                  f"({cmp.gm_bytes_saved / cmp.output_bytes:.1f} x the output)", loc="left", fontsize="medium")
    ax2.legend(fontsize="small", frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    g = cmp.fused.geometry
    fig.suptitle(f"conv2d + ReLU {g.n}x{g.cin}x{g.h}x{g.w} -> {g.cout}, {g.kh}x{g.kw} on "
                 f"'{fus.config.name}': fused {cmp.speedup:.2f}x", x=0.07, ha="left", fontsize="large")
    return readable(fig)


__all__ = ["compare_fusion", "FusionComparison", "run_relu", "chain", "dequant_scales", "relu_tile",
           "relu_commutes_with_rounding", "fusion_chart"]

