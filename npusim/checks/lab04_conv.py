"""Checks of lab 04 (blocked Conv2D): the input-reuse blocking, the NCHW -> NC1HWC0 transform, the img2col
kernel's ``load_data_3d`` call, and a tiling that beats the package's default.

Each check runs a ladder of fixed hidden inputs, each adding one difficulty to the ones before (so a
failure can say what the failing input adds), then random ones drawn from the grading seed. The kernels
run with a trace (:mod:`.conv_lab`): what the learner's code loaded and read, or the first im2col tile
it built wrong, from which :mod:`._lab04_diagnosis` names the cause.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .. import conv, formats
from ..conv import ConvGeometry, ConvTiling, choose_tiling
from ..conv.common import round_up
from ..errors import NpuSimError
from ..launch import launch
from . import _lab04_diagnosis as why
from ._lab04_hints import HINTS  # noqa: F401  (collected by npusim.checks)
from ._core import CheckFailed, call_learner, case_rng, compare, describe, fixed_rng, passed, run_kernel
from ._work import require_work
from .conv_lab import (SLOTS, BandConv, Im2colConv, ReferenceIm2col, band_conv, band_conv_args, conv2d_float64,
                       im2col_conv, im2col_conv_args)

__all__ = ["conv_reuse", "nc1hwc0_transform", "conv_img2col", "conv_tiling"]



def _shape(s) -> str:
    return "x".join(map(str, s))


def _conv_case(feature: str, g: ConvGeometry, t: ConvTiling, **extra) -> dict:
    case = {"case": feature, "input": _shape((g.n, g.cin, g.h, g.w)), "weights": _shape((g.cout, g.cin, g.kh, g.kw)),
            "stride": (g.sh, g.sw), "padding": (g.ph, g.pw), "dilation": (g.dh, g.dw), "dtype": g.dtype,
            "band rows": t.rows}
    case.update(extra)
    return case


def _ladder(passed_features: list[str], feature: str) -> str:
    """What a failing fixed input adds to the ones that passed (the evidence for where to look)."""
    if not passed_features:
        return ""
    return (f" The hidden inputs before this one passed ({'; '.join(passed_features)}); this one adds: "
            f"{feature}.")


class _adds:
    """``with _adds(name, ladder, more):`` appends ``more(message)`` and the ladder sentence to a failure
    (not to "not finished")."""

    def __init__(self, name: str, ladder: str, more=lambda message: ""):
        self.name, self.ladder, self.more = name, ladder, more

    def __enter__(self) -> None:
        return None

    def __exit__(self, etype, exc, tb) -> bool:
        if type(exc) is CheckFailed:
            extra = self.more(exc.message) + self.ladder
            if extra:
                raise CheckFailed(self.name, exc.message + extra) from None
        return False


def _inputs(rng, xs, ws, dtype):
    if np.dtype(dtype) == np.int8:
        return rng.integers(-8, 8, xs).astype(np.int8), rng.integers(-8, 8, ws).astype(np.int8)
    return rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)


def _tolerance(g: ConvGeometry) -> tuple[float, float]:
    k = g.cin * g.kk
    return (0.0, 0.0) if g.dtype == "int8" else (1e-5, 1e-5 * np.sqrt(k))


def _random_layer(rng, max_c: int = 40, max_hw: int = 16):
    """A random layer whose window fits: (x shape, w shape, stride, padding, dilation)."""
    while True:
        n, cin, cout = int(rng.integers(1, 3)), int(rng.integers(1, max_c + 1)), int(rng.integers(1, max_c + 1))
        h, w = (int(v) for v in rng.integers(3, max_hw + 1, 2))
        kh, kw = (int(v) for v in rng.integers(1, 6, 2))
        s = tuple(int(v) for v in rng.integers(1, 3, 2))
        d = tuple(int(v) for v in rng.integers(1, 3, 2))
        p = tuple(int(v) for v in rng.integers(0, 3, 2))
        if h + 2 * p[0] >= d[0] * (kh - 1) + 1 and w + 2 * p[1] >= d[1] * (kw - 1) + 1:
            return (n, cin, h, w), (cout, cin, kh, kw), s, p, d


def _class_of(name: str, kernel_class, base: type, example: str) -> None:
    if not (isinstance(kernel_class, type) and issubclass(kernel_class, base)):
        raise CheckFailed(name, f"expected your class (derived from {base.__name__}), got {kernel_class!r}. Pass "
                                f"the class itself: {example}")


# --- exercise 1: input tiling with reuse -----------------------------------------------------------------

_REUSE_CASES = [  # (what it adds, x shape, w shape, stride, padding, dilation, tiling changes)
    ("bands of 4 output rows, the last one shorter", (1, 20, 9, 11), (24, 20, 3, 3), 1, 1, 1, {"rows": 4}),
    ("stride 2", (2, 16, 13, 8), (16, 16, 3, 3), 2, 1, 1, {"rows": 3}),
    ("dilation 2", (1, 12, 14, 10), (16, 12, 3, 3), 1, 2, 2, {"rows": 4}),
    ("a 5x5 kernel, column stride 2", (1, 3, 12, 12), (8, 3, 5, 5), (1, 2), 2, 1, {"rows": 3}),
    ("stride 2 and dilation 2 together", (1, 8, 17, 9), (16, 8, 3, 3), 2, 1, 2, {"rows": 3}),
    ("two images, a 2x3 kernel, no padding, height dilation 2", (2, 16, 9, 12), (16, 16, 2, 3), 1, 0, (2, 1),
     {"rows": 2}),
    ("input and output channels split into blocks", (1, 40, 10, 20), (32, 40, 3, 3), 1, 1, 1,
     {"rows": 3, "cin_block": 16, "cout_block": 16}),
    ("output rows cut into column tiles", (1, 24, 9, 40), (48, 24, 3, 3), 1, 1, 1,
     {"rows": 4, "cols": 32, "cout_block": 16}),
]


def _reuse_cases() -> list[tuple]:
    rng = case_rng("conv_reuse", "random")
    out = list(_REUSE_CASES)
    for _ in range(2):
        xs, ws, s, p, d = _random_layer(rng)
        g = ConvGeometry.of(xs, ws, s, p, d, "float16", "float32")
        rows = int(rng.integers(1, choose_tiling(g, None, "reuse").rows + 1))
        out.append(("a random layer", xs, ws, s, p, d, {"rows": rows}))
    return out


def conv_reuse(kernel_class) -> None:
    """Lab 04, exercise 1: ``kernel_class`` (a :class:`~npusim.checks.conv_lab.BandConv` subclass) computes
    Conv2D on hidden layers (bands with a shorter last one, stride 2, dilation 2, 5x5, split Cin and Cout
    blocks, column tiles, random layers), and its loads read no more than each band's input rows once per
    width tap (fewer GM bytes than the output-tiling variant)."""
    __tracebackhide__ = True
    name = "conv_reuse"
    _class_of(name, kernel_class, BandConv, "check.conv_reuse(MyReuse)")
    cases = _reuse_cases()
    done: list[str] = []
    for i, (feature, xs, ws, stride, pad, dil, change) in enumerate(cases):
        x, w = _inputs(fixed_rng(name, i) if i < len(_REUSE_CASES) else case_rng(name, i), xs, ws, np.float16)
        g = ConvGeometry.of(xs, ws, stride, pad, dil, "float16", "float32")
        t = choose_tiling(g, None, "reuse").replace(**change)
        case = _conv_case(feature, g, t, **{"Cin blocks": len(t.cin_blocks(g)), "Cout blocks": len(t.cout_blocks(g)),
                                            "column tiles": len(t.col_tiles(g))})
        trace: dict = {}
        args, g, t = band_conv_args(kernel_class, x, w, None, stride, pad, dil, out_dtype="float32", tiling=t,
                                    trace=trace)
        with _adds(name, _ladder(done, feature) if i < len(_REUSE_CASES) else ""):
            try:
                run = run_kernel(name, band_conv, 1, *args, case=case)
            except CheckFailed as e:
                # the sanitizer stops a kernel whose Cube reads L1 rows nobody loaded: say which rows and why
                diag = why.band_reads(trace, g) if "UninitializedReadError" in e.message else ""
                if not diag:
                    raise
                raise CheckFailed(name, f"on [{describe(case)}] the Cube read band rows that were never loaded "
                                        f"into L1 (the simulator stopped your kernel: UninitializedReadError). "
                                        f"{diag}") from None
            rtol, atol = _tolerance(g)
            compare(name, run["y"], conv2d_float64(x, w, None, stride, pad, dil), case, rtol=rtol, atol=atol,
                    causes=lambda mm: why.band_reads(trace, g))
            extra = why.band_load_excess(trace, g, t)
            if extra:
                raise CheckFailed(name, f"on [{describe(case)}] the output is right, but {extra}")
        if i == 0:
            direct_t = choose_tiling(g, None, "direct").replace(rows=t.rows, cols=t.cols, cin_block=t.cin_block,
                                                                cout_block=t.cout_block)
            direct = conv.run_direct(x, w, None, stride, pad, dil, out_dtype="float32", tiling=direct_t).gm_read_bytes
            got = sum(v for k, v in run.profile.path_bytes.items() if k.startswith("GM"))
        done.append(feature)
    passed(name, f"{len(cases)} hidden layers (a shorter last band, stride 2, dilation 2, 5x5, split Cin and Cout "
                 f"blocks, column tiles, random layers); every band row loaded once per width tap: on the first "
                 f"layer {got:,} GM bytes read against {direct:,} for output tiling with the same blocks")


# --- exercise 2: the layout transform ---------------------------------------------------------------------

_TRANSFORM_CASES = [  # (what it adds, shape, dtype)
    ("fewer channels than C0", (1, 3, 5, 7), np.float16),
    ("exactly C0 channels", (1, 16, 4, 4), np.float16),
    ("two images, two C1 blocks (channels from C0 on), odd W", (2, 20, 3, 9), np.float16),
    ("fp32 (C0 = 8), one row", (1, 17, 1, 33), np.float32),
    ("int8 (C0 = 32)", (1, 40, 13, 11), np.int8),
    ("three images, three C1 blocks", (3, 33, 2, 5), np.float16),
    (f"a channel plane of 2,350 positions, more than the SLOTS = {SLOTS} of one buffer", (1, 3, 50, 47), np.float16),
    (f"a plane of exactly 2 x SLOTS positions, fp32", (1, 9, 64, 64), np.float32),
    ("planes of 4,095 positions, int8, two images", (2, 5, 45, 91), np.int8),
]


def _transform_cases() -> list[tuple]:
    rng = case_rng("nc1hwc0_transform", "random")
    out = list(_TRANSFORM_CASES)
    for _ in range(2):
        dt = (np.float16, np.float32, np.int8)[int(rng.integers(3))]
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 41)), int(rng.integers(1, 80)), int(rng.integers(1, 80)))
        out.append(("a random tensor", shape, dt))
    return out


def nc1hwc0_transform(kernel) -> None:
    """Lab 04, exercise 2: ``kernel(x, x5, n, c, h, w)`` writes ``x5`` (N, C1, H, W, C0) =
    ``npusim.formats.nchw_to_nc1hwc0(x)``, zeros in the padding channels, with a clean sanitizer, on fp16,
    fp32 and int8 tensors, channel counts that are not multiples of C0, odd H and W, and channel planes of
    more than ``SLOTS`` positions."""
    __tracebackhide__ = True
    name = "nc1hwc0_transform"
    cases = _transform_cases()
    done: list[str] = []
    for i, (feature, shape, dt) in enumerate(cases):
        rng = fixed_rng(name, i) if i < len(_TRANSFORM_CASES) else case_rng(name, i)
        x = (rng.integers(-128, 128, shape) if dt == np.int8 else rng.standard_normal(shape) * 10).astype(dt)
        want = formats.nchw_to_nc1hwc0(x)
        x5 = np.full(want.shape, why.INT8_UNWRITTEN if dt == np.int8 else np.nan, dtype=dt)
        n, c, h, w = shape
        c0 = 32 // np.dtype(dt).itemsize
        case = {"case": feature, "shape (N, C, H, W)": shape, "dtype": np.dtype(dt).name, "C0": c0,
                "positions per plane": h * w, "padding channels": -c % c0}
        with _adds(name, _ladder(done, feature) if i < len(_TRANSFORM_CASES) else ""):
            run = run_kernel(name, kernel, 1, x, x5, n, c, h, w, case=case)
            got = run["x5"]
            compare(name, got, want, case, causes=lambda mm: why.transform(got, want, x, SLOTS))
            # every element through UB by the kernel's own DMA (the padding channels come from ZeroWriter)
            require_work(name, run.profile, case, moved={"GM->UB": x.nbytes, "UB->GM": x.nbytes},
                         how="data_copy_pad GM -> UB and UB -> GM")
        done.append(feature)
    passed(name, f"{len(cases)} hidden tensors (fp16, fp32, int8; C not a multiple of C0; odd H and W; planes of "
                 f"up to {max(s[2] * s[3] for _, s, _ in cases):,} positions, more than one buffer's {SLOTS})")


# --- exercise 3: the img2col kernel's load_data_3d ---------------------------------------------------------

_IMG2COL_CASES = [  # (what it adds, x shape, w shape, stride, padding, dilation, dtype, tiling changes)
    ("one band, one Mmad of 20 positions, no padding", (1, 16, 6, 7), (16, 16, 3, 3), 1, 0, 1, "float16",
     {"rows": 4, "m_tile": 32}),
    ("padding 1", (1, 16, 6, 7), (16, 16, 3, 3), 1, 1, 1, "float16", {"rows": 6, "m_tile": 48}),
    ("several bands (padding above the first only, below the last only)", (1, 16, 11, 9), (16, 16, 3, 3), 1, 1,
     1, "float16", {"rows": 3, "m_tile": 32}),
    ("several Mmads per band (the last one shorter)", (1, 16, 8, 9), (24, 16, 3, 3), 1, 1, 1, "float16",
     {"rows": 4, "m_tile": 16}),
    ("several K steps", (1, 32, 7, 7), (24, 32, 3, 3), 1, 1, 1, "float16", {"rows": 4, "k_tile": 96}),
    ("stride 2", (1, 16, 13, 11), (16, 16, 3, 3), 2, 1, 1, "float16", {"rows": 2}),
    ("dilation 2", (1, 16, 12, 12), (16, 16, 3, 3), 1, 2, 2, "float16", {"rows": 3}),
    ("a 5x5 kernel, padding (2, 1), column stride 2", (1, 8, 10, 13), (16, 8, 5, 5), (1, 2), (2, 1), 1, "float16",
     {"rows": 3}),
    ("input channels split into blocks (the last one 8 channels)", (1, 40, 8, 8), (16, 40, 3, 3), 1, 1, 1,
     "float16", {"rows": 4, "cin_block": 16}),
    ("fp32 (C0 = 8)", (1, 12, 7, 9), (8, 12, 3, 3), 1, 1, 1, "float32", {"rows": 3}),
    ("int8 (C0 = 32)", (1, 40, 6, 6), (16, 40, 3, 3), 1, 1, 1, "int8", {"rows": 3}),
]


def _img2col_tiling(g: ConvGeometry, change: dict) -> ConvTiling:
    """The default img2col tiling with ``change``; the Mmad tiles shrunk to the band when it is smaller."""
    t = choose_tiling(g, None, "img2col")
    rows = change.get("rows", t.rows)
    m_tile = change.get("m_tile", min(t.m_tile, round_up(rows * g.wo, 16)))
    return t.replace(**{**change, "m_tile": m_tile})


def _img2col_cases() -> list[tuple]:
    rng = case_rng("conv_img2col", "random")
    out = list(_IMG2COL_CASES)
    for _ in range(2):
        xs, ws, s, p, d = _random_layer(rng)
        g = ConvGeometry.of(xs, ws, s, p, d)
        rows = int(rng.integers(1, choose_tiling(g, None, "img2col").rows + 1))
        out.append(("a random layer", xs, ws, s, p, d, "float16", {"rows": rows}))
    return out


def _l0a_bytes(profile) -> int:
    return profile.path_bytes.get("L1->L0A", 0)


def conv_img2col(kernel_class) -> None:
    """Lab 04, exercise 3: ``kernel_class`` (an :class:`~npusim.checks.conv_lab.Im2colConv` subclass) builds
    every im2col tile with ``load_data_3d`` (bands, several Mmads and K steps, stride, dilation, 5x5,
    asymmetric padding, Cin blocks, fp32, int8, random layers): the output is the convolution, and L1 -> L0A
    moves no more bytes than the tiles need."""
    __tracebackhide__ = True
    name = "conv_img2col"
    _class_of(name, kernel_class, Im2colConv, "check.conv_img2col(MyImg2col)")
    cases = _img2col_cases()
    done: list[str] = []
    for i, (feature, xs, ws, stride, pad, dil, dt, change) in enumerate(cases):
        x, w = _inputs(fixed_rng(name, i) if i < len(_IMG2COL_CASES) else case_rng(name, i), xs, ws, dt)
        out_dtype = "int32" if dt == "int8" else "float32"
        g = ConvGeometry.of(xs, ws, stride, pad, dil, dt, out_dtype)
        t = _img2col_tiling(g, change)
        case = _conv_case(feature, g, t, **{"Mmad positions (m_tile)": t.m_tile, "K step (k_tile)": t.k_tile,
                                            "Cin blocks": len(t.cin_blocks(g))})
        trace: dict = {}
        args, g, t = im2col_conv_args(kernel_class, x, w, None, stride, pad, dil, out_dtype=out_dtype, tiling=t,
                                      trace=trace)
        with _adds(name, _ladder(done, feature) if i < len(_IMG2COL_CASES) else "",
                   more=lambda message: why.im2col_error(trace, g, message) + (
                       " " + why.im2col_tile(trace, g, t, brief=True)).rstrip()):
            run = run_kernel(name, im2col_conv, 1, *args, case=case)
        rtol, atol = _tolerance(g)
        want = conv2d_float64(x, w, None, stride, pad, dil).transpose(0, 2, 3, 1)
        with _adds(name, _ladder(done, feature) if i < len(_IMG2COL_CASES) else ""):
            compare(name, run["y"], want, case, rtol=rtol, atol=atol, causes=lambda mm: " " + why.im2col_tile(trace, g, t))
        ref_args = im2col_conv_args(ReferenceIm2col, x, w, None, stride, pad, dil, out_dtype=out_dtype, tiling=t)[0]
        ref = _l0a_bytes(launch(im2col_conv, 1, *ref_args).profile)
        got = _l0a_bytes(run.profile)
        if got > ref:
            raise CheckFailed(name, f"on [{describe(case)}] the output is right, but your load_data_3d calls move "
                                    f"{got:,} B from L1 to L0A where the tiles need {ref:,} B: each tile is "
                                    f"tile.m positions rounded up to whole fractal rows of 16 (the last Mmad of a "
                                    f"band is shorter than m_tile) by tile.k columns; a larger m_extension or "
                                    f"k_extension builds rows or columns that no Mmad reads.")
        done.append(feature)
    passed(name, f"{len(cases)} hidden layers (bands, several Mmads and K steps, stride 2, dilation 2, 5x5 with "
                 f"padding (2, 1), Cin blocks, fp32, int8, random layers); L1 -> L0A moves exactly the tiles")


# --- exercise 4: beat the default tiling ------------------------------------------------------------------

TILING_LAYER = ((1, 128, 28, 28), (128, 128, 3, 3), 1, 1)
"""The layer of exercise 4: ResNet-50 stage 3, 1x128x28x28 -> 128, 3x3, pad 1, fp16."""

TILING_SPEEDUP = 0.03
"""The kernel must be at least this much faster than the img2col default of the day (time <= 97 %)."""


def tiling_layer_inputs() -> tuple[np.ndarray, np.ndarray]:
    """The (fixed) fp16 input and weights of :data:`TILING_LAYER`."""
    xs, wsh, _, _ = TILING_LAYER
    rng = np.random.default_rng(4)
    x = rng.standard_normal(xs).astype(np.float16)
    w = (rng.standard_normal(wsh) * np.sqrt(2 / (wsh[1] * 9))).astype(np.float16)
    return x, w


@lru_cache(maxsize=4)
def _run_tiling(t: ConvTiling):
    x, w = tiling_layer_inputs()
    _, _, stride, pad = TILING_LAYER
    return conv.conv2d(x, w, None, stride, pad, variant=t.variant, tiling=t)


def conv_tiling(tiling) -> None:
    """Lab 04, exercise 4: ``tiling`` (a ConvTiling, or a function returning one) makes the Conv2D kernel of
    its variant at least 3 % faster than ``choose_tiling``'s img2col default on 1x128x28x28 -> 128."""
    __tracebackhide__ = True
    name = "conv_tiling"
    if callable(tiling) and not isinstance(tiling, ConvTiling):
        tiling = call_learner(name, tiling)
    if not isinstance(tiling, ConvTiling):
        raise CheckFailed(name, f"expected a ConvTiling (e.g. choose_tiling(g3).replace(rows=...)), got {tiling!r}")
    xs, ws, stride, pad = TILING_LAYER
    g = ConvGeometry.of(xs, ws, stride, pad)
    default = choose_tiling(g, None, "img2col")
    base = _run_tiling(default)
    try:
        res = _run_tiling(tiling)
    except NpuSimError as e:
        raise CheckFailed(name, f"the tiling {tiling.short()} does not run on {g.describe()}: "
                                f"{type(e).__name__}: {e}") from None
    if not np.allclose(res.output.astype(np.float64), base.output.astype(np.float64), rtol=1e-2, atol=2e-2):
        raise CheckFailed(name, f"the tiling {tiling.short()} gives a different output from the default's")
    mine, ref = res.profile, base.profile
    target = (1 - TILING_SPEEDUP) * ref.time_us
    if mine.time_us > target:
        raise CheckFailed(name, f"your tiling takes {mine.time_us:.2f} us ({mine.mac_utilization:.1%} MAC "
                                f"utilisation), the default {ref.time_us:.2f} us ({ref.mac_utilization:.1%}); the "
                                f"target is {target:.2f} us ({TILING_SPEEDUP:.0%} faster). "
                                + why.tiling_time(mine, tiling, default, g))
    passed(name, f"{tiling.short()}: {mine.time_us:.2f} us against the default's {ref.time_us:.2f} us "
                 f"({ref.time_us / mine.time_us - 1:.1%} faster, {mine.mac_utilization:.1%} MAC utilisation); "
                 + why.tiling_summary(mine, tiling, g))
