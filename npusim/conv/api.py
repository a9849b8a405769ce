"""Host side: ``conv2d(x, w, ...)`` on NCHW numpy arrays, and the result with every profile.

Each ``run_*`` helper prepares the weights on the host (FRACTAL_Z: a constant, converted once, listed
in ``host_work``), runs the device-side layout transforms the variant needs as their own launches
(``transforms``, each with its own Profile), launches the convolution kernel (``profile``), and returns
the NCHW output.

==========  ============================  ========================  ==============================
variant     input read by the kernel      im2col built by            output written by the kernel
==========  ============================  ========================  ==============================
direct      NCHW (per tap, per block)     DMA + fractal transpose    NCHW (Fixpipe)
reuse       NCHW (once per band, Kw x)    DMA + fractal transpose    NCHW (Fixpipe)
layout      NC1HWC0, padded (transform)   DMA, no transpose          NCHW (Fixpipe)
img2col     NC1HWC0 (transform)           load_data_3d (MTE1)        NHWC, then NHWC->NCHW transform
==========  ============================  ========================  ==============================

``relu=True`` applies ReLU to the output: fused into the img2col kernel's drain (``fuse=True``, the
default: in Fixpipe on A2, in UB on 'classic'), or as a separate vector kernel launched after the
convolution (``fuse=False``; the only way for the other variants). ``deq_scale`` (int8 inputs, img2col)
dequantises the int32 accumulator to float16 in the drain: one fp32 scale, or one per output channel.
Separate launches are listed in ``ConvResult.separate`` with their Profiles (see :mod:`.fusion`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import npusim as ns

from . import host, launch_memo
from .common import Epilogue
from .direct import conv2d_direct
from .epilogue import chain, dequant_scales, run_relu
from .geometry import ConvGeometry, dtype_of
from .img2col import conv2d_img2col
from .layout import conv2d_layout
from .reuse import conv2d_reuse
from .staging import workspace_shape
from .choose import choose_tiling
from .tiling import VARIANTS, ConvTiling, needs_staging
from .transform import to_nc1hwc0


@dataclass
class ConvResult:
    """What ``conv2d`` returns: like :class:`npusim.LaunchResult` (``result["y"]``, ``.profile``) plus the
    transforms' profiles, the host work, the tiling and the geometry."""

    variant: str
    output: np.ndarray
    profile: ns.Profile
    tiling: ConvTiling
    geometry: ConvGeometry
    transforms: dict[str, ns.Profile] = field(default_factory=dict)
    host_work: tuple[str, ...] = ()
    separate: dict[str, ns.Profile] = field(default_factory=dict)
    """Launches after the convolution that are part of the operation, e.g. ``{"relu": profile}``."""
    epilogue: Epilogue = Epilogue()
    """What the convolution kernel's drain did on the way out of L0C (fused ReLU, dequantisation)."""

    @property
    def outputs(self) -> dict[str, np.ndarray]:
        return {"y": self.output}

    def __getitem__(self, name: str) -> np.ndarray:
        return self.outputs[name]

    # --- figures ------------------------------------------------------------------------------------
    @property
    def total_cycles(self) -> float:
        """Convolution plus device-side transforms and separate launches (ReLU), one after the other
        (launch overheads excluded)."""
        return (self.profile.total_cycles + sum(p.total_cycles for p in self.transforms.values())
                + sum(p.total_cycles for p in self.separate.values()))

    @property
    def kernels_profile(self) -> ns.Profile:
        """The convolution kernel and the separate launches after it (a ReLU kernel) on one timeline:
        the part that fusion changes. Just ``profile`` when nothing runs separately."""
        if not self.separate:
            return self.profile
        return chain([self.profile, *self.separate.values()])

    @property
    def total_time_us(self) -> float:
        return self.profile.config.cycles_to_us(self.total_cycles)

    @property
    def gm_bytes_per_output(self) -> float:
        """GM bytes the convolution kernel moved (in and out) per output element."""
        return self.profile.gm_bytes / self.output.size

    @property
    def gm_read_bytes(self) -> int:
        """GM bytes the convolution kernel read (GM->L1 and GM->UB)."""
        return sum(v for k, v in self.profile.path_bytes.items() if k.startswith("GM"))

    def figures(self) -> dict[str, float]:
        """The headline numbers of the convolution kernel, and of the whole (kernel + transforms)."""
        p = self.profile
        us = p.config.cycles_to_us
        d = {"mac_utilization": p.mac_utilization, "time_us": p.time_us, "gm_bytes": p.gm_bytes,
             "gm_read_bytes": self.gm_read_bytes, "gm_bytes_per_output": self.gm_bytes_per_output,
             "mte2_us": us(p.pipe_busy_cycles.get("mte2", 0.0) / p.active_cores),
             "critical_pipe": p.critical_pipe, "instructions": p.instruction_count}
        for name, tp in self.transforms.items():
            d[f"{name}_us"] = tp.time_us
        for name, tp in self.separate.items():
            d[f"{name}_us"] = tp.time_us
        d["total_us"] = self.total_time_us
        d["total_mac_utilization"] = p.cube_ideal_cycles / (p.active_cores * self.total_cycles)
        return d

    def summary(self) -> str:
        f = self.figures()
        ep = f", epilogue {self.epilogue.describe()} (fused)" if self.epilogue else ""
        lines = [f"conv2d[{self.variant}] {self.geometry.describe()} on '{self.profile.config.name}'{ep}",
                 f"  kernel: {f['time_us']:.2f} us, MAC utilization {f['mac_utilization']:.1%}, "
                 f"GM {f['gm_bytes']:,} B ({f['gm_bytes_per_output']:.2f} B per output), MTE2 busy "
                 f"{f['mte2_us']:.2f} us, critical pipe {f['critical_pipe']}"]
        for name, tp in self.transforms.items():
            busy = ", ".join(f"{k} {v:.0%}" for k, v in tp.pipe_ratio.items() if v >= 0.05 and k != "scalar")
            lines.append(f"  transform {name}: {tp.time_us:.2f} us, GM {tp.gm_bytes:,} B, busy: {busy}")
        for name, tp in self.separate.items():
            lines.append(f"  separate {name} kernel: {tp.time_us:.2f} us, GM {tp.gm_bytes:,} B")
        if self.transforms or self.separate:
            lines.append(f"  kernel + {'transforms' if self.transforms else 'separate launches'}: "
                         f"{self.total_time_us:.2f} us "
                         f"(MAC utilization over the whole: {f['total_mac_utilization']:.1%})")
        lines += [f"  host: {h}" for h in self.host_work]
        lines.append("  tiling: " + self.tiling.short())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


# --- preparation ---------------------------------------------------------------------------------
def _prepare(variant: str, x, w, bias, stride, padding, dilation, out_dtype, tiling, config,
             epilogue: Epilogue | None = None, dequant: bool = False):
    cfg = ns.get_config(config)
    x = np.asarray(x)
    w = np.asarray(w)
    if w.dtype != x.dtype:   # torch refuses mixed dtypes too; a silent cast would hide a mistake
        raise ns.DtypeError(f"conv2d: the input is {x.dtype} but the weight is {w.dtype}: both must have the "
                            f"same dtype", hint=f"cast one of them, e.g. w.astype(np.{x.dtype})")
    g = ConvGeometry.of(x.shape, w.shape, stride, padding, dilation, x.dtype, out_dtype, dequant=dequant)
    if tiling is None:
        t = choose_tiling(g, cfg, variant, epilogue)
    else:
        if not isinstance(tiling, ConvTiling):
            raise ns.UsageError(f"tiling must be a ConvTiling (see npusim.conv.choose_tiling), "
                                f"not {type(tiling).__name__}")
        if tiling.variant != variant:
            raise ns.UsageError(f"a tiling for '{tiling.variant}' was given to the '{variant}' variant")
        t = tiling
        t.check(g, cfg, epilogue)
    b = host.check_bias(bias, g)
    wz = host.fractal_z_weights(w, g)
    work = [f"weights (Cout, Cin, Kh, Kw) -> FRACTAL_Z, {wz.nbytes:,} B: converted once on the host, as a "
            f"model's constant weights are"]
    if b is not None:
        work.append("bias -> a 16 x C0 fractal tile per 16 output channels (a constant, like the weights)")
    return cfg, np.ascontiguousarray(x), g, t, b, wz, work


def _launch_result(variant, out, prof, t, g, transforms, work) -> ConvResult:
    return ConvResult(variant, out, prof, t, g, transforms, tuple(work))


def _rowwise_const(g: ConvGeometry, b) -> np.ndarray:
    """[bias column (ZZ, N1 fractals), ones fractal] for the row-wise variants."""
    bias = b if b is not None else np.zeros(g.cout, dtype=dtype_of(g.dtype))
    return np.concatenate([host.bias_column_zz(bias, g), host.ones_fractal(g)])


def _nchw_variant(kernel, variant, x, w, bias, stride, padding, dilation, out_dtype, tiling, config,
                  block_dim, sanitize) -> ConvResult:
    cfg, x, g, t, b, wz, work = _prepare(variant, x, w, bias, stride, padding, dilation, out_dtype, tiling, config)
    ws = np.empty(workspace_shape(g, block_dim), dtype=x.dtype)
    y = np.empty((g.n, g.cout, g.ho, g.wo), dtype=dtype_of(g.out_dtype))
    res = ns.launch(kernel, block_dim, x, ws, wz, _rowwise_const(g, b), y, g, t, b is not None, config=cfg,
                    sanitize=sanitize, algorithmic_macs=g.macs)
    if needs_staging(g):
        work.append(f"a GM workspace of {ws.nbytes:,} B for the padded rows (allocated, not filled: the "
                    f"kernel writes it)")
    return _launch_result(variant, res["y"], res.profile, t, g, {}, work)


# --- the four variants -----------------------------------------------------------------------------
def run_direct(x, w, bias=None, stride=1, padding=0, dilation=1, *, out_dtype=None, tiling=None, config=None,
               block_dim: int = 1, sanitize: str = "error") -> ConvResult:
    """Variant a (output tiling): every output block fetches its input straight from NCHW GM."""
    return _nchw_variant(conv2d_direct, "direct", x, w, bias, stride, padding, dilation, out_dtype, tiling,
                         config, block_dim, sanitize)


def run_reuse(x, w, bias=None, stride=1, padding=0, dilation=1, *, out_dtype=None, tiling=None, config=None,
              block_dim: int = 1, sanitize: str = "error") -> ConvResult:
    """Variant b (input tiling with reuse): each band of NCHW input is loaded once and shared."""
    return _nchw_variant(conv2d_reuse, "reuse", x, w, bias, stride, padding, dilation, out_dtype, tiling,
                         config, block_dim, sanitize)


def run_layout(x, w, bias=None, stride=1, padding=0, dilation=1, *, out_dtype=None, tiling=None, config=None,
               block_dim: int = 1, sanitize: str = "error") -> ConvResult:
    """Variant c (+ layout): NCHW -> padded NC1HWC0 on the device, then the reuse kernel on long runs."""
    cfg, x, g, t, b, wz, work = _prepare("layout", x, w, bias, stride, padding, dilation, out_dtype, tiling, config)
    x5p, tprof = to_nc1hwc0(x, (g.ph, g.pw), config=cfg, block_dim=block_dim, sanitize=sanitize)
    y = np.empty((g.n, g.cout, g.ho, g.wo), dtype=dtype_of(g.out_dtype))
    res = ns.launch(conv2d_layout, block_dim, x5p, wz, _rowwise_const(g, b), y, g, t, b is not None, config=cfg,
                    sanitize=sanitize, algorithmic_macs=g.macs)
    return _launch_result("layout", res["y"], res.profile, t, g, {"nchw_to_nc1hwc0": tprof}, work)


def run_img2col(x, w, bias=None, stride=1, padding=0, dilation=1, *, out_dtype=None, tiling=None, config=None,
                block_dim: int = 1, sanitize: str = "error", relu: bool = False, deq_scale=None,
                fuse: bool = True, drain=None) -> ConvResult:
    """Variant d (+ img2col on the Cube): NC1HWC0 input, load_data_3d, NHWC out, then NHWC -> NCHW.

    ``relu``: ReLU on the output, in the kernel's drain (``fuse=True``) or as a separate vector kernel on the
    NHWC output before the transform (``fuse=False``, listed in ``separate``). ``deq_scale`` (int8 inputs):
    dequantise the int32 accumulator in the drain with this fp32 scale (a number, or one per output
    channel); the output is then float16 (or ``out_dtype="float32"``). ``drain``: a class to use instead of
    :class:`~npusim.conv.common.Drain` (same constructor and call; lab 06 plugs its own in)."""
    dequant = deq_scale is not None
    if dequant:   # the scale's shape needs Cout: check it against the geometry first
        g0 = ConvGeometry.of(np.shape(x), np.shape(w), stride, padding, dilation, np.asarray(x).dtype, out_dtype,
                             dequant=True)
        scale, kind = dequant_scales(deq_scale, g0)
    else:
        scale, kind = None, None
    epilogue = Epilogue(relu=relu and fuse, dequant=kind)
    cfg, x, g, t, b, wz, work = _prepare("img2col", x, w, bias, stride, padding, dilation, out_dtype, tiling, config,
                                         epilogue, dequant)
    # the transforms are memoised by shapes and L2 state (launch_memo: the same profiles, L2 and bits)
    x5, p_in = launch_memo.to_nc1hwc0(x, config=cfg, block_dim=block_dim, sanitize=sanitize)
    bias_row = b if b is not None else np.zeros(g.cout, dtype=dtype_of(g.dtype))
    const = np.concatenate([host.ones_fractal(g), host.bias_row_zn(bias_row, g)])
    y = np.empty((g.n, g.ho, g.wo, g.cout), dtype=dtype_of(g.out_dtype))
    if dequant:
        work.append(f"dequantisation scale{'s' if kind == 'channel' else ''}: {kind}, fp32"
                    + (f", padded to {scale.size} channels" if kind == "channel" else ""))
    res = ns.launch(conv2d_img2col, block_dim, x5, wz, const, y, g, t, b is not None, epilogue or None, scale,
                    drain, config=cfg, sanitize=sanitize, algorithmic_macs=g.macs)
    y = res["y"]
    separate = {}
    if relu and not fuse:   # the separate pair: y goes to GM, and a vector kernel reads it back and writes it
        y, separate["relu"] = run_relu(y, config=cfg, block_dim=block_dim, sanitize=sanitize)
    out, p_out = launch_memo.to_nchw(y, config=cfg, block_dim=block_dim, sanitize=sanitize)
    r = _launch_result("img2col", out, res.profile, t, g, {"nchw_to_nc1hwc0": p_in, "nhwc_to_nchw": p_out}, work)
    r.separate, r.epilogue = separate, epilogue
    return r


RUNNERS = {"direct": run_direct, "reuse": run_reuse, "layout": run_layout, "img2col": run_img2col}


def conv2d(x, w, bias=None, stride=1, padding=0, dilation=1, *, variant: str = "img2col", out_dtype=None,
           tiling: ConvTiling | None = None, config=None, block_dim: int = 1, sanitize: str = "error",
           relu: bool = False, deq_scale=None, fuse: bool = True) -> ConvResult:
    """``torch.nn.functional.conv2d`` on the simulated core: ``x`` (N, Cin, H, W) and ``w`` (Cout, Cin, Kh, Kw)
    numpy arrays (fp16, fp32 on A2, or int8), NCHW output in ``result.output`` (also ``result["y"]``).

    ``variant`` is one of ``"direct"``, ``"reuse"``, ``"layout"``, ``"img2col"`` (see the module table);
    ``out_dtype`` defaults to the input dtype (int32 for int8; float16 when dequantised); ``tiling``
    defaults to :func:`choose_tiling`'s choice. ``relu``, ``fuse`` and ``deq_scale``: see the module
    docstring (fusion and dequantisation are img2col's; the other variants run ReLU separately)."""
    if variant not in RUNNERS:
        raise ns.UsageError(f"unknown conv2d variant {variant!r}; choose one of {VARIANTS}")
    if variant == "img2col":
        return run_img2col(x, w, bias, stride, padding, dilation, out_dtype=out_dtype, tiling=tiling, config=config,
                           block_dim=block_dim, sanitize=sanitize, relu=relu, deq_scale=deq_scale, fuse=fuse)
    if deq_scale is not None or (relu and fuse):
        what = "dequantisation (deq_scale)" if deq_scale is not None else "a fused ReLU"
        raise ns.UsageError(f"conv2d ({variant}): {what} is done in the img2col kernel's drain only: use "
                            f"variant='img2col'" + ("" if deq_scale is not None else
                                                    ", or fuse=False for a separate ReLU kernel"))
    res = RUNNERS[variant](x, w, bias, stride, padding, dilation, out_dtype=out_dtype, tiling=tiling,
                           config=config, block_dim=block_dim, sanitize=sanitize)
    if relu:
        res.output, res.separate["relu"] = run_relu(res.output, config=config, block_dim=block_dim,
                                                    sanitize=sanitize)
    return res
