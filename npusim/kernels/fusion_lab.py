"""Lab 06 (Conv + ReLU fusion): a fused Conv2D + ReLU kernel whose block sizes and synchronisation are
the learner's.

The kernel is the img2col convolution of :mod:`npusim.conv.img2col` (bands of output rows, im2col tiles
built in L0A by ``load_data_3d``, K accumulated in L0C) with the ReLU in its epilogue, cut into
**stages**, each on one pipe, on plain buffers (``TBuf``) and **without any synchronisation**:

====================  ======  ==============================================================
stage                 pipe    buffers
====================  ======  ==============================================================
``load_band``         MTE2    GM -> band buffer ``b`` (L1): the input rows of one band
``load_step``         MTE1    band ``b`` / weights (L1) -> L0A and L0B buffers ``s``
``mmad``              M       L0A/L0B ``s`` -> accumulator ``c`` (L0C)
``fixpipe_out`` (A2)  FIX     L0C ``c`` -> GM, ReLU and the fp32 -> fp16 cast on the way
``drain_to_ub``       V       L0C ``c`` -> UB, :meth:`FusedStages.epilogue`, NZ -> ND rows in ``o``
``write_out``         MTE3    UB ``o`` -> GM
====================  ======  ==============================================================

Every buffer exists twice (index 0 and 1), so that a stage can fill one while the next stage reads the
other. A subclass writes :meth:`FusedStages.process` (the loop over bands, tiles and K steps, ordering
the stages with ``set_flag``/``wait_flag``) and :meth:`FusedStages.epilogue` (the vector instructions of
the classic core's epilogue). :class:`FusedConvRelu` is the reference. The weights and the constant
fractals (ones, bias) are loaded once by the constructor, ordered before MTE1 with event id 2: ids 0 and
1 of every HardEvent are the subclass's.

:func:`block_usage` says what a block ``(m, n, k)`` (positions per L0C tile, output channels per tile,
im2col columns per K step) reserves in each memory; :func:`reference_block` is the largest block that
fits with the most reuse; :func:`run_fused` / :func:`compare_fused` run the kernel (and the separate pair:
the same kernel without ReLU, then the ReLU kernel).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import npusim as ns
from npusim import formats

from ..conv import host
from ..conv.api import ConvResult
from ..conv.common import ceil_div, fractal, load_fractals, nz_to_nd, round_up, write_rows
from ..conv.fusion import FusionComparison, run_relu
from ..conv.geometry import ConvGeometry, my_items, work_items
from ..conv.tiling import ConvTiling

E = ns.HardEvent
CONST_EVENT_ID = 2
"""The event id the constructor uses for the weights' MTE2 -> MTE1 flag (ids 0 and 1 are the subclass's)."""
DRAIN_UB_BYTES = 4 + 2 + 2 * 2
"""UB bytes per tile element of the classic drain: the fp32 tile, its fp16 copy (NZ), two fp16 outputs."""


M_CAP = 256
""":func:`reference_block` takes at most this many positions per tile."""


class Block(NamedTuple):
    """Block sizes of the fused kernel (elements)."""

    m: int   # output positions per L0C tile (a multiple of 16)
    n: int   # output channels per L0C tile (a multiple of 16)
    k: int   # im2col columns per K step (a multiple of C0 = 16 for fp16)


class Band(NamedTuple):
    """One band of output rows, and the input rows it reads (image rows ``lo .. hi - 1``, then padding)."""

    n: int           # image
    ho0: int         # first output row
    rows: int        # output rows
    lo: int          # first image row read
    hi: int          # one past the last image row read (hi == lo: the band reads padding only)
    pad_top: int     # padding rows above row lo in the band's window
    pad_bottom: int  # padding rows below row hi - 1

    @property
    def has_input(self) -> bool:
        return self.hi > self.lo


class Tile(NamedTuple):
    """One L0C tile: positions ``m0 .. m0 + mt - 1`` of the band x output channels ``co0 .. co0 + cb - 1``
    (``co0`` is the output channel of the tile's column 0: where its columns land in an output row)."""

    m0: int
    mt: int
    co0: int
    cb: int


class Step(NamedTuple):
    """One Mmad of a tile: im2col columns ``k0 .. k0 + kt - 1`` (or the bias: ones x bias, k = 1)."""

    k0: int
    kt: int
    bias: bool
    first: bool      # starts the accumulator (the others add to it)


class BufferUse(NamedTuple):
    """``num`` buffers of ``nbytes`` in ``memory`` that a block makes the kernel reserve, and why (``formula``)."""

    name: str
    memory: str
    num: int
    nbytes: int
    formula: str


def band_rows(g: ConvGeometry, cfg: ns.HardwareConfig) -> int:
    """Output rows per band: the most (at most a quarter of the output, so that the next band's load
    overlaps this band's Mmads) whose input rows, all channels, fit L1 twice beside the resident weights
    and constants."""
    fixed = round_up(g.k1 * g.n1 * 512, 512) + round_up((1 + g.n1) * 512, 512)
    best = 0
    for r in range(1, max(1, ceil_div(g.ho, 4)) + 1):
        band = round_up(g.c1 * min(g.in_rows(r), g.h) * g.w * 32, 512)
        if fixed + 2 * band <= cfg.l1_bytes:
            best = r
    if not best:
        raise ns.CapacityError(f"lab 06's fused kernel keeps every weight in L1: {g.describe()} needs "
                               f"{fixed:,} B of weights and constants plus two bands of one output row, more "
                               f"than the {cfg.l1_bytes:,} B of L1 on '{cfg.name}'",
                               hint="use a layer with fewer channels (or npusim.conv.conv2d, which streams them)")
    return best


def block_usage(g: ConvGeometry, cfg: ns.HardwareConfig, block) -> list[BufferUse]:
    """The buffers the fused kernel reserves in L0A, L0B, L0C (and UB without Fixpipe) for ``block``."""
    m, n, k = block
    isz = g.isz
    out = [BufferUse("l0a", "L0A", 2, m * k * isz, f"2 x m x k x {isz} B = 2 x {m} x {k} x {isz}"),
           BufferUse("l0b", "L0B", 2, k * n * isz, f"2 x k x n x {isz} B = 2 x {k} x {n} x {isz}"),
           BufferUse("l0c", "L0C", 2, m * n * 4, f"2 x m x n x 4 B = 2 x {m} x {n} x 4")]
    if not cfg.has_fixpipe:
        out.append(BufferUse("drain", "UB", 1, m * n * DRAIN_UB_BYTES,
                             f"m x n x (4 + 2 + 2 x 2) B = {m} x {n} x {DRAIN_UB_BYTES}"))
    return out


def check_block(g: ConvGeometry, cfg: ns.HardwareConfig, block) -> Block:
    """``block`` as a :class:`Block`, or a UsageError / CapacityError saying what is wrong with it."""
    if not (isinstance(block, tuple) and len(block) == 3):
        raise ns.UsageError(f"a fused block is a tuple (m, n, k), not {block!r}")
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in block):
        raise ns.UsageError(f"the block's m, n and k must be ints, got {block!r}")
    m, n, k = (int(v) for v in block)
    bad = [f"{name}={v} must be a positive multiple of {q} ({why})" for name, v, q, why in (
        ("m", m, 16, "whole fractal rows of positions"), ("n", n, 16, "whole fractal columns of channels"),
        ("k", k, g.c0, f"whole C0 = {g.c0} channel blocks")) if v < q or v % q]
    bad += [f"{name}={v} is more than an Mmad's 4095" for name, v in (("m", m), ("n", n), ("k", k)) if v > 4095]
    if bad:
        raise ns.UsageError("fused block: " + "; ".join(bad))
    for use in block_usage(g, cfg, (m, n, k)):
        cap = cfg.memory_bytes(use.memory)
        if use.num * use.nbytes > cap:
            raise ns.CapacityError(f"fused block (m={m}, n={n}, k={k}) needs {use.num * use.nbytes:,} B of "
                                   f"{use.memory} ({use.formula}) but '{cfg.name}' has {cap:,} B",
                                   hint="use a smaller block", memory=use.memory,
                                   requested=use.num * use.nbytes, capacity=cap)
    return Block(m, n, k)


def reference_block(g: ConvGeometry, cfg: ns.HardwareConfig) -> Block:
    """A large block with much reuse: ``n`` = every output channel (one im2col tile serves them all) unless
    even 16 positions x C0 columns would not fit then; ``m`` = the most positions L0C (and UB) hold twice
    for that ``n`` (each weight tile serves them all), at most 256 (the last tile's drain, which nothing
    overlaps, grows with it) and balanced over a band; ``k`` = the longest K step L0A and L0B hold twice,
    in equal steps."""
    cfg = ns.get_config(cfg)
    c0, isz = g.c0, g.isz
    ub = cfg.ub_bytes if not cfg.has_fixpipe else None
    n_cap = min(cfg.l0b_bytes // (2 * c0 * isz), cfg.l0c_bytes // (2 * 16 * 4),
                ub // (16 * DRAIN_UB_BYTES) if ub else 4095) // 16 * 16
    n = min(round_up(g.cout, 16), n_cap)
    positions = band_rows(g, cfg) * g.wo
    m_cap = min(cfg.l0c_bytes // (2 * n * 4), cfg.l0a_bytes // (2 * c0 * isz),
                ub // (n * DRAIN_UB_BYTES) if ub else 4095, M_CAP) // 16 * 16
    m = round_up(ceil_div(positions, ceil_div(positions, m_cap)), 16)
    k_all = g.c1 * g.kk * c0
    k_cap = min(cfg.l0a_bytes // (2 * m * isz), cfg.l0b_bytes // (2 * n * isz), 4095) // c0 * c0
    k = round_up(ceil_div(k_all, ceil_div(k_all, k_cap)), c0)
    return Block(m, n, k)


class FusedStages:
    """The fused kernel's stages (see the module docstring); a subclass writes :meth:`process` and
    :meth:`epilogue`. ``self.fixpipe`` is True on A2 (the drain is one Fixpipe) and False on classic."""

    def __init__(self, x5, wz, const, y, g: ConvGeometry, block: Block, rows: int, has_bias: bool,
                 relu: bool = True):
        self.x5, self.y, self.g, self.block, self.rows = x5, y, g, block, rows
        self.has_bias, self.relu = has_bias, relu
        cfg = ns.get_core_config()
        self.fixpipe = cfg.has_fixpipe
        self.dt = x5.dtype
        self.fr = fractal(self.dt)
        m, n, k = block
        pipe = ns.TPipe()
        self.band_buf = [ns.TBuf(ns.TPosition.A1), ns.TBuf(ns.TPosition.A1)]
        self.l0a = [ns.TBuf(ns.TPosition.A2), ns.TBuf(ns.TPosition.A2)]
        self.l0b = [ns.TBuf(ns.TPosition.B2), ns.TBuf(ns.TPosition.B2)]
        self.l0c = [ns.TBuf(ns.TPosition.CO1), ns.TBuf(ns.TPosition.CO1)]
        self.w_buf, self.c_buf = ns.TBuf(ns.TPosition.B1), ns.TBuf(ns.TPosition.B1)
        band_bytes = g.c1 * min(g.in_rows(rows), g.h) * g.w * 32
        for b in self.band_buf:
            pipe.init_buffer(b, band_bytes)
        for buf, nbytes in ((self.l0a, m * k * g.isz), (self.l0b, k * n * g.isz), (self.l0c, m * n * 4)):
            for b in buf:
                pipe.init_buffer(b, nbytes)
        pipe.init_buffer(self.w_buf, g.k1 * g.n1 * 512)
        pipe.init_buffer(self.c_buf, (1 + g.n1) * 512)
        if not self.fixpipe:
            self.acc_ub, self.nz_ub = ns.TBuf(ns.TPosition.VECCALC), ns.TBuf(ns.TPosition.VECCALC)
            self.out_ub = [ns.TBuf(ns.TPosition.VECOUT), ns.TBuf(ns.TPosition.VECOUT)]
            pipe.init_buffer(self.acc_ub, m * n * 4)
            pipe.init_buffer(self.nz_ub, m * n * 2)
            for b in self.out_ub:
                pipe.init_buffer(b, m * n * 2)
        # the constants, once: MTE2 -> L1, then every MTE1 load of them waits (event id 2)
        self.w_l1, self.c_l1 = self.w_buf.get(self.dt), self.c_buf.get(self.dt)
        ns.data_copy(self.w_l1, wz, g.k1 * g.n1 * self.fr)
        ns.data_copy(self.c_l1, const, (1 + g.n1) * self.fr)
        ns.set_flag(E.MTE2_MTE1, CONST_EVENT_ID)
        ns.wait_flag(E.MTE2_MTE1, CONST_EVENT_ID)

    # --- the work: what to loop over ------------------------------------------------------------------
    def bands(self) -> list[Band]:
        """This block's bands, in order."""
        g = self.g
        out = []
        for n, ho0, rows in my_items(work_items(g, self.rows)):
            top = ho0 * g.sh - g.ph
            bottom = top + g.in_rows(rows)
            lo, hi = max(0, top), min(g.h, bottom)
            hi = max(hi, lo)
            out.append(Band(n, ho0, rows, lo, hi, lo - top, bottom - hi))
        return out

    def tiles(self, band: Band) -> list[Tile]:
        """The L0C tiles of a band: ``m`` positions x ``n`` output channels each (the last ones shorter)."""
        m, n, _ = self.block
        positions = band.rows * self.g.wo
        return [Tile(m0, min(m, positions - m0), co0, min(n, self.g.cout - co0))
                for m0 in range(0, positions, m) for co0 in range(0, self.g.cout, n)]

    def steps(self, band: Band) -> list[Step]:
        """The Mmads of each tile of ``band``: the bias first (when there is a bias, or when the band reads
        padding only and has no K work), then the K steps of ``k`` im2col columns."""
        g, k = self.g, self.block.k
        k_all = g.c1 * g.kk * g.c0
        out = [Step(0, 1, True, True)] if self.has_bias or not band.has_input else []
        if band.has_input:
            out += [Step(k0, min(k, k_all - k0), False, not out and k0 == 0) for k0 in range(0, k_all, k)]
        return out

    # --- the stages, one pipe each, no synchronisation --------------------------------------------------
    def load_band(self, b: int, band: Band) -> None:
        """MTE2: the band's image rows, all channels, GM -> band buffer ``b`` (nothing for a band of padding)."""
        g = self.g
        if not band.has_input:
            return
        ns.data_copy(self.band_buf[b].get(self.dt), self.x5[band.n * g.c1 * g.h * g.w * g.c0 + band.lo * g.w * g.c0:],
                     ns.DataCopyParams(block_count=g.c1, block_len=(band.hi - band.lo) * g.w,
                                       src_stride=(g.h - (band.hi - band.lo)) * g.w))

    def load_step(self, s: int, b: int, band: Band, tile: Tile, step: Step) -> None:
        """MTE1: the operands of one Mmad into L0A and L0B buffers ``s``: im2col columns of band buffer
        ``b`` and the matching weight rows, or (a bias step) a fractal of ones and the bias."""
        g = self.g
        a, bb = self.l0a[s].get(self.dt), self.l0b[s].get(self.dt)
        n1_0, n1_n = tile.co0 // 16, ceil_div(tile.cb, 16)
        if step.bias:
            load_fractals(a, self.c_l1, 0, ceil_div(tile.mt, 16), src_stride=0)
            load_fractals(bb, self.c_l1, 1 + n1_0, n1_n)
            return
        ns.load_data_3d(a, self.band_buf[b].get(self.dt), ns.LoadData3DParams(
            l1_h=band.hi - band.lo, l1_w=g.w, channel_size=g.c1 * g.c0, kh=g.kh, kw=g.kw,
            m_extension=round_up(tile.mt, 16), k_extension=step.kt, m_start=tile.m0, k_start=step.k0,
            stride_h=g.sh, stride_w=g.sw, dilation_h=g.dh, dilation_w=g.dw, pad_top=band.pad_top,
            pad_bottom=band.pad_bottom, pad_left=g.pw, pad_right=g.pw))
        k1_0, k1_n = step.k0 // g.c0, step.kt // g.c0
        if n1_n == g.n1:   # whole fractal rows of the weights: one run
            load_fractals(bb, self.w_l1, k1_0 * g.n1, k1_n * g.n1)
        else:
            for r in range(k1_n):
                load_fractals(bb[r * n1_n * self.fr:], self.w_l1, (k1_0 + r) * g.n1 + n1_0, n1_n)

    def mmad(self, c: int, s: int, tile: Tile, step: Step) -> None:
        """M: accumulator ``c`` (+)= L0A ``s`` @ L0B ``s``."""
        ns.mmad(self.l0c[c].get(ns.float32), self.l0a[s].get(self.dt), self.l0b[s].get(self.dt),
                ns.MmadParams(tile.mt, tile.cb, step.kt, cmatrix_init_val=step.first))

    def _dst(self, band: Band, tile: Tile):
        g = self.g
        return self.y[((band.n * g.ho + band.ho0) * g.wo + tile.m0) * g.cout + tile.co0:]

    def fixpipe_out(self, c: int, band: Band, tile: Tile) -> None:
        """FIX (A2): accumulator ``c`` -> GM as NHWC rows, with the ReLU and the cast to fp16 on the way."""
        ns.fixpipe(self._dst(band, tile), self.l0c[c].get(ns.float32),
                   ns.FixpipeParams(tile.mt, tile.cb, src_stride=round_up(tile.mt, 16), dst_stride=self.g.cout,
                                    relu=self.relu))

    def drain_to_ub(self, c: int, o: int, tile: Tile) -> None:
        """V (classic): accumulator ``c`` -> UB, :meth:`epilogue` into the output dtype, NZ -> ND rows in
        output buffer ``o``."""
        n1 = ceil_div(tile.cb, 16)
        rows = round_up(tile.mt, 16)
        count = n1 * rows * 16
        acc = self.acc_ub.get(ns.float32, count)
        ns.data_copy(acc, self.l0c[c].get(ns.float32, count), count)
        out = self.out_ub[o].get(self.y.dtype, count)
        nz = self.nz_ub.get(self.y.dtype, count) if n1 > 1 else out   # one block of 16 columns: NZ is ND
        self.epilogue(nz, acc, count)
        nz_to_nd(out, nz, tile.mt, n1, rows)

    def write_out(self, o: int, band: Band, tile: Tile) -> None:
        """MTE3 (classic): output buffer ``o`` -> GM as NHWC rows."""
        write_rows(self._dst(band, tile), self.out_ub[o].get(self.y.dtype), tile.mt, tile.cb,
                   ceil_div(tile.cb, 16), self.g.cout)

    # --- what a subclass writes ---------------------------------------------------------------------------
    def epilogue(self, dst, acc, count: int) -> None:
        """V (classic): ``dst`` (fp16, ``count`` elements) = the activated fp32 tile ``acc``."""
        raise ns.UsageError("FusedStages.epilogue: write it in your subclass (the classic core's epilogue)")

    def process(self) -> None:
        """Every band, tile and step through the stages, ordered by set_flag/wait_flag."""
        raise ns.UsageError("FusedStages.process: write it in your subclass (the loop and its flags)")


class FusedConvRelu(FusedStages):
    """The reference: every buffer pair used in turn (0, 1, 0, ...); a consumer's wait for its producer's
    flag before it reads, a producer's wait for its consumer's flag before it overwrites, the "free" flags
    set once before the loop and waited for once after it."""

    def epilogue(self, dst, acc, count: int) -> None:
        ns.cast(dst, acc, ns.RoundMode.CAST_RINT, count)
        if self.relu:
            ns.relu(dst, dst, count)       # after the cast: half the bytes of the fp32 tile

    def process(self) -> None:
        ready, free = (E.M_FIX, E.FIX_M) if self.fixpipe else (E.M_V, E.V_M)
        frees = [E.MTE1_MTE2, E.M_MTE1, free] + ([] if self.fixpipe else [E.MTE3_V])
        for i in (0, 1):
            for ev in frees:
                ns.set_flag(ev, i)
        n_steps = n_tiles = 0
        for nb, band in enumerate(self.bands()):
            b = nb % 2
            ns.wait_flag(E.MTE1_MTE2, b)
            self.load_band(b, band)
            ns.set_flag(E.MTE2_MTE1, b)
            ns.wait_flag(E.MTE2_MTE1, b)
            steps = self.steps(band)
            for tile in self.tiles(band):
                c = n_tiles % 2
                ns.wait_flag(free, c)
                for step in steps:
                    s = n_steps % 2
                    ns.wait_flag(E.M_MTE1, s)
                    self.load_step(s, b, band, tile, step)
                    ns.set_flag(E.MTE1_M, s)
                    ns.wait_flag(E.MTE1_M, s)
                    self.mmad(c, s, tile, step)
                    ns.set_flag(E.M_MTE1, s)
                    n_steps += 1
                ns.set_flag(ready, c)
                ns.wait_flag(ready, c)
                if self.fixpipe:
                    self.fixpipe_out(c, band, tile)
                else:
                    ns.wait_flag(E.MTE3_V, c)
                    self.drain_to_ub(c, c, tile)
                    ns.set_flag(E.V_MTE3, c)
                    ns.wait_flag(E.V_MTE3, c)
                    self.write_out(c, band, tile)
                    ns.set_flag(E.MTE3_V, c)
                ns.set_flag(free, c)
                n_tiles += 1
            ns.set_flag(E.MTE1_MTE2, b)
        for i in (0, 1):
            for ev in frees:
                ns.wait_flag(ev, i)


@ns.kernel
def fused_conv_relu(x5, wz, const, y, g: ConvGeometry, block: Block, rows: int, has_bias: bool,
                    kernel_class=FusedConvRelu, relu: bool = True) -> None:
    """NHWC ``y`` = relu(conv2d(``x5`` (NC1HWC0), ``wz`` (FRACTAL_Z)) [+ bias]) by ``kernel_class``."""
    kernel_class(x5, wz, const, y, g, block, rows, has_bias, relu).process()


def run_fused(x, w, bias=None, stride=1, padding=0, *, kernel=FusedConvRelu, block=None, config=None,
              relu: bool = True, sanitize: str = "error", block_dim: int = 1) -> ConvResult:
    """Conv2D (+ ReLU in the epilogue) of NCHW fp16 ``x`` by ``kernel`` (a :class:`FusedStages` subclass)
    with ``block`` (default :func:`reference_block`); the NCHW output is ``result.output``. The layout
    changes (NCHW -> NC1HWC0, weights -> FRACTAL_Z, NHWC -> NCHW) are host work here."""
    cfg = ns.get_config(config)
    x = np.asarray(x)
    g = ConvGeometry.of(x.shape, np.shape(w), stride, padding, 1, x.dtype)
    if g.dtype != "float16":
        raise ns.DtypeError(f"lab 06's fused kernel takes float16 inputs, not {g.dtype}")
    blk = check_block(g, cfg, block) if block is not None else reference_block(g, cfg)
    rows = band_rows(g, cfg)
    b = host.check_bias(bias, g)
    const = np.concatenate([host.ones_fractal(g), host.bias_row_zn(b if b is not None else np.zeros(g.cout,
                                                                                                 np.float16), g)])
    y = np.full((g.n, g.ho, g.wo, g.cout), np.nan, np.float16)
    res = ns.launch(fused_conv_relu, block_dim, formats.nchw_to_nc1hwc0(x), host.fractal_z_weights(w, g), const, y,
                    g, blk, rows, b is not None, kernel, relu, config=cfg, sanitize=sanitize, algorithmic_macs=g.macs,
                    auto_sync=False)   # lab 06 synchronises every pipe by hand
    tiling = ConvTiling(variant="img2col", rows=rows, cols=g.wo, cin_block=g.cin, cout_block=min(blk.n, g.cout),
                        m_tile=blk.m, k_tile=blk.k)
    out = np.ascontiguousarray(res["y"].transpose(0, 3, 1, 2))
    work = ("NCHW -> NC1HWC0 input, FRACTAL_Z weights and NHWC -> NCHW output: numpy on the host",)
    return ConvResult("img2col", out, res.profile, tiling, g, host_work=work)


def compare_fused(x, w, bias=None, stride=1, padding=0, *, kernel=FusedConvRelu, block=None, config=None,
                  sanitize: str = "error") -> FusionComparison:
    """``kernel`` with the ReLU fused against the separate pair (the reference kernel with the same block
    and no ReLU, then the ReLU kernel on its NHWC output): same block, so only the epilogue differs."""
    cfg = ns.get_config(config)
    if block is None:
        block = reference_block(ConvGeometry.of(np.shape(x), np.shape(w), stride, padding, 1, np.asarray(x).dtype), cfg)
    fused = run_fused(x, w, bias, stride, padding, kernel=kernel, block=block, config=cfg, sanitize=sanitize)
    sep = run_fused(x, w, bias, stride, padding, block=block, config=cfg, relu=False, sanitize=sanitize)
    nhwc, sep.separate["relu"] = run_relu(sep.output.transpose(0, 2, 3, 1), config=cfg, sanitize=sanitize)
    sep.output = np.ascontiguousarray(nhwc.transpose(0, 3, 1, 2))
    return FusionComparison(sep, fused)


__all__ = ["Block", "Band", "Tile", "Step", "FusedStages", "FusedConvRelu", "fused_conv_relu", "band_rows",
           "block_usage", "check_block", "reference_block", "run_fused", "compare_fused"]
