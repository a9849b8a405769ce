"""Checks of lab 04 (blocked Conv2D): input tiling with reuse, the NCHW -> NC1HWC0 transform, and a
tiling that beats the package's default."""

from __future__ import annotations

import numpy as np

from .. import conv, formats
from ..conv import ConvGeometry, ConvTiling, choose_tiling
from ..errors import NpuSimError
from ..launch import launch
from .conv_lab import BandConv, ReferenceBand, band_conv, band_conv_args, conv2d_float64
from ._core import CheckFailed, call_learner, compare, describe, passed, run_kernel

__all__ = ["conv_reuse", "nc1hwc0_transform", "conv_tiling"]


def _gm_reads(profile) -> int:
    return sum(v for k, v in profile.path_bytes.items() if k.startswith("GM"))


# --- exercise 1: input tiling with reuse -----------------------------------------------------------------

_REUSE_CASES = [  # (x shape, w shape, stride, padding, dilation, tiling changes)
    ((1, 20, 9, 11), (24, 20, 3, 3), 1, 1, 1, None),
    ((2, 16, 8, 8), (16, 16, 3, 3), 2, 1, 1, None),
    ((1, 33, 7, 10), (40, 33, 2, 3), 1, 0, 2, None),
    ((1, 3, 12, 12), (8, 3, 5, 5), (1, 2), 2, 1, None),
    ((1, 40, 10, 20), (32, 40, 3, 3), 1, 1, 1, {"rows": 3, "cin_block": 16}),
    ((1, 24, 9, 40), (48, 24, 3, 3), 1, 1, 1, {"rows": 4, "cols": 32, "cout_block": 16}),
]


def conv_reuse(kernel_class) -> None:
    """Lab 04, exercise 1: ``kernel_class`` (a :class:`~npusim.checks.conv_lab.BandConv` subclass with
    ``load_band`` and ``band_row``) computes Conv2D on hidden layers, and reads fewer GM bytes than the
    output-tiling (direct) variant: each input row of a band is loaded once per width tap."""
    __tracebackhide__ = True
    name = "conv_reuse"
    if not (isinstance(kernel_class, type) and issubclass(kernel_class, BandConv)):
        raise CheckFailed(name, f"expected your class (derived from BandConv), got {kernel_class!r}. Pass the "
                                f"class itself: check.conv_reuse(MyReuse)")
    ratios = []
    for i, (xs, wsh, stride, pad, dil, change) in enumerate(_REUSE_CASES):
        rng = np.random.default_rng(400 + i)
        x = rng.standard_normal(xs).astype(np.float16)
        w = rng.standard_normal(wsh).astype(np.float16)
        g = ConvGeometry.of(xs, wsh, stride, pad, dil, "float16", "float32")
        tiling = choose_tiling(g, None, "reuse")
        if change:
            tiling = tiling.replace(**change)
        case = {"input": "x".join(map(str, xs)), "weights": "x".join(map(str, wsh)), "stride": stride,
                "padding": pad, "dilation": dil, "band rows": tiling.rows,
                "Cin blocks": len(tiling.cin_blocks(g)), "Cout blocks": len(tiling.cout_blocks(g))}
        args, g, t = band_conv_args(kernel_class, x, w, None, stride, pad, dil, out_dtype="float32", tiling=tiling)
        run = run_kernel(name, band_conv, 1, *args, case=case)
        want = conv2d_float64(x, w, None, stride, pad, dil)
        k = g.cin * g.kk
        compare(name, run["y"], want, case, rtol=1e-5, atol=1e-5 * np.sqrt(k),
                look_at="band_row (which band row does output row r read at height tap i, with a stride and a "
                        "dilation?) and load_band (every row the band needs, for every width tap j)")
        got = _gm_reads(run.profile)
        ref_args, _, _ = band_conv_args(ReferenceBand, x, w, None, stride, pad, dil, out_dtype="float32",
                                        tiling=tiling)
        once = _gm_reads(launch(band_conv, 1, *ref_args).profile)
        same_blocks = choose_tiling(g, None, "direct").replace(rows=t.rows, cols=t.cols, cin_block=t.cin_block,
                                                                cout_block=t.cout_block)
        direct = conv.run_direct(x, w, None, stride, pad, dil, out_dtype="float32",
                                 tiling=same_blocks).gm_read_bytes
        if got >= direct:
            raise CheckFailed(name, f"on [{describe(case)}] your kernel read {got:,} B from GM, the output-tiling "
                                    f"variant with the same blocks {direct:,} B: no reuse yet. Look at: load each input row of the "
                                    f"band once per width tap, not once per (tap, output row).")
        if got > once:
            raise CheckFailed(name, f"on [{describe(case)}] your kernel read {got:,} B from GM; loading each of the "
                                    f"band's {g.in_rows(t.rows)} input rows once per width tap reads {once:,} B. "
                                    f"Look at: rows loaded twice, or more rows than the band needs "
                                    f"((rows - 1) * stride + (Kh - 1) * dilation + 1).")
        ratios.append(got / direct)
    passed(name, f"{len(_REUSE_CASES)} hidden layers (stride 2, dilation 2, 5x5, split Cin and Cout blocks); "
                 f"GM reads {np.mean(ratios):.0%} of the output-tiling variant's (same blocks) on average")


# --- exercise 2: the layout transform ---------------------------------------------------------------------

_TRANSFORM_CASES = [  # (shape, dtype): channels not multiples of C0, odd H and W, one row, int8, fp32
    ((1, 3, 5, 7), np.float16), ((2, 20, 3, 9), np.float16), ((1, 16, 4, 4), np.float16),
    ((1, 17, 1, 33), np.float32), ((1, 40, 13, 11), np.int8), ((3, 33, 2, 5), np.float16),
]


def nc1hwc0_transform(kernel) -> None:
    """Lab 04, exercise 2: ``kernel(x, x5, n, c, h, w)`` writes ``x5`` (N, C1, H, W, C0) =
    ``npusim.formats.nchw_to_nc1hwc0(x)``, zeros in the padding channels, with a clean sanitizer."""
    __tracebackhide__ = True
    name = "nc1hwc0_transform"
    for i, (shape, dt) in enumerate(_TRANSFORM_CASES):
        rng = np.random.default_rng(440 + i)
        if dt == np.int8:
            x = rng.integers(-128, 128, shape).astype(np.int8)
        else:
            x = (rng.standard_normal(shape) * 10).astype(dt)
        want = formats.nchw_to_nc1hwc0(x)
        x5 = np.full(want.shape, 85 if dt == np.int8 else np.nan, dtype=dt)   # never-written bytes show
        n, c, h, w = shape
        c0 = 32 // np.dtype(dt).itemsize
        case = {"shape (N, C, H, W)": shape, "dtype": np.dtype(dt).name, "C0": c0,
                "padding channels": -c % c0}
        run = run_kernel(name, kernel, 1, x, x5, n, c, h, w, case=case)
        compare(name, run["x5"], want, case,
                look_at="where channel ch of image b goes: block ch // C0, lane ch % C0, positions C0 apart; "
                        "and the padding channels of the last block, which must be zero")
    passed(name, f"{len(_TRANSFORM_CASES)} hidden tensors (fp16, fp32, int8; C not a multiple of C0; odd H, W)")


# --- exercise 3: beat the default tiling ------------------------------------------------------------------

TILING_LAYER = ((1, 128, 28, 28), (128, 128, 3, 3), 1, 1)
"""The layer of exercise 3: ResNet-50 stage 3, 1x128x28x28 -> 128, 3x3, pad 1, fp16."""

TILING_MARGIN = 0.99
"""Your kernel time must be at most this fraction of the default's."""


def tiling_layer_inputs() -> tuple[np.ndarray, np.ndarray]:
    """The (fixed) fp16 input and weights of :data:`TILING_LAYER`."""
    xs, wsh, _, _ = TILING_LAYER
    rng = np.random.default_rng(4)
    x = rng.standard_normal(xs).astype(np.float16)
    w = (rng.standard_normal(wsh) * np.sqrt(2 / (wsh[1] * 9))).astype(np.float16)
    return x, w


def conv_tiling(tiling) -> None:
    """Lab 04, exercise 3: ``tiling`` (a ConvTiling, or a function returning one) makes the Conv2D kernel of
    its variant at least 1 % faster than ``choose_tiling``'s img2col default on 1x128x28x28 -> 128."""
    __tracebackhide__ = True
    name = "conv_tiling"
    if callable(tiling) and not isinstance(tiling, ConvTiling):
        tiling = call_learner(name, tiling)
    if not isinstance(tiling, ConvTiling):
        raise CheckFailed(name, f"expected a ConvTiling (e.g. choose_tiling(g).replace(rows=...)), got {tiling!r}")
    x, w = tiling_layer_inputs()
    _, _, stride, pad = TILING_LAYER
    g = ConvGeometry.of(x.shape, w.shape, stride, pad)
    default = choose_tiling(g, None, "img2col")
    base = conv.conv2d(x, w, None, stride, pad, variant="img2col", tiling=default).profile
    try:
        res = conv.conv2d(x, w, None, stride, pad, variant=tiling.variant, tiling=tiling)
    except NpuSimError as e:
        raise CheckFailed(name, f"the tiling {tiling.short()} does not run on {g.describe()}: "
                                f"{type(e).__name__}: {e}") from None
    if not np.isfinite(res.output).all():
        raise CheckFailed(name, f"the tiling {tiling.short()} produced inf or NaN")
    mine = res.profile
    if mine.time_us > TILING_MARGIN * base.time_us:
        raise CheckFailed(name, f"your tiling takes {mine.time_us:.2f} us ({mine.mac_utilization:.1%} Cube "
                                f"utilisation), the default {base.time_us:.2f} us ({base.mac_utilization:.1%}); "
                                f"the target is {TILING_MARGIN * base.time_us:.2f} us (1 % faster). Look at: the "
                                f"timeline's start and end: what runs before the first Mmad and after the last "
                                f"one, and how the band size changes that.")
    passed(name, f"{tiling.short()}: {mine.time_us:.2f} us against the default's {base.time_us:.2f} us "
                 f"({base.time_us / mine.time_us - 1:.1%} faster, {mine.mac_utilization:.1%} Cube utilisation)")
