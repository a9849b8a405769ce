"""Tiling of the Conv2D kernels: block sizes that fit the core's buffers, and why they were chosen.

:func:`choose_tiling` picks sizes for one variant, one shape and one :class:`npusim.HardwareConfig`;
:class:`ConvTiling` holds them. :meth:`ConvTiling.plan` lists every on-chip buffer the kernel will
reserve (``init_buffer(queue, num, length)``): the kernels take their sizes from that same plan, so a
tiling that passes :meth:`ConvTiling.check` also fits when the kernel runs. ``explain()`` tells in plain
words what limited each size.

Sizes (all in elements):

- ``rows``: output rows per band (direct: per output block). A band reads ``in_rows(rows)`` input rows.
- ``cols``: output columns per tile (direct/reuse/layout: one Mmad computes one output row of
  ``cols`` positions); img2col always takes whole rows.
- ``cin_block`` / ``cout_block``: input / output channels per block.
- ``m_tile`` / ``k_tile`` (img2col): positions and im2col columns per Mmad.
- ``l1_buffers``, ``l0_buffers``, ``l0c_buffers``: 2 means double buffering.
- ``weights_resident``: the whole FRACTAL_Z weight tensor stays in L1 (else it is streamed per tile).

A fused epilogue (:class:`~npusim.conv.common.Epilogue`: ReLU, int8 dequantisation) has buffers of its
own: per-channel scales in L1 (A2) or UB (classic), and on 'classic' a UB tile of repeated scales beside
the drain's tiles. ``plan``, ``usage``, ``check`` and ``choose_tiling`` take the ``epilogue`` so that the
block sizes are chosen, and checked, for the pipeline that will run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import npusim as ns

from .common import FRACTAL_BYTES, Epilogue, ceil_div, round_up
from .geometry import ConvGeometry

VARIANTS = ("direct", "reuse", "layout", "img2col")
"""a: output tiling from NCHW; b: input tiling with reuse; c: + NC1HWC0 layout; d: + img2col on the Cube."""

_POSITION = {"L1": "A1/B1", "L0A": "A2", "L0B": "B2", "L0C": "CO1", "UB": "VECIN/VECOUT/VECCALC"}


@dataclass(frozen=True)
class BufferPlan:
    """One ``init_buffer(queue, num, length)`` of a kernel: ``num`` buffers of ``length`` bytes in ``memory``."""

    name: str
    memory: str
    num: int
    length: int


@dataclass(frozen=True)
class ConvTiling:
    """Block sizes and buffer counts of one Conv2D variant (see the module docstring)."""

    variant: str
    rows: int
    cols: int
    cin_block: int
    cout_block: int
    m_tile: int = 0
    k_tile: int = 0
    l1_buffers: int = 2
    l0_buffers: int = 2
    l0c_buffers: int = 1
    weights_resident: bool = True
    reasons: tuple[str, ...] = field(default=(), compare=False, repr=False)

    # --- derived sizes -------------------------------------------------------------------------------
    def cin_blocks(self, g: ConvGeometry) -> list[tuple[int, int]]:
        """``(first channel, channels)`` of each input channel block."""
        return [(c, min(self.cin_block, g.cin - c)) for c in range(0, g.cin, self.cin_block)]

    def cout_blocks(self, g: ConvGeometry) -> list[tuple[int, int]]:
        """``(first channel, channels)`` of each output channel block."""
        return [(c, min(self.cout_block, g.cout - c)) for c in range(0, g.cout, self.cout_block)]

    def col_tiles(self, g: ConvGeometry) -> list[tuple[int, int]]:
        """``(first column, columns)`` of each output column tile."""
        return [(c, min(self.cols, g.wo - c)) for c in range(0, g.wo, self.cols)]

    def band_in_rows(self, g: ConvGeometry) -> int:
        """Input rows one band holds in L1 (img2col: image rows, never more than H)."""
        r = g.in_rows(self.rows)
        return min(r, g.h) if self.variant == "img2col" else r

    # --- buffers -------------------------------------------------------------------------------------
    def plan(self, g: ConvGeometry, cfg: ns.HardwareConfig, epilogue: Epilogue | None = None) -> dict[str, BufferPlan]:
        """Every buffer the kernel reserves, by name (with the buffers of a fused ``epilogue``)."""
        F = FRACTAL_BYTES
        c0 = g.c0
        cb16 = round_up(self.cout_block, 16)
        out: list[BufferPlan] = []
        if self.variant == "img2col":
            cc1 = ceil_div(min(self.cin_block, g.cin), c0)
            out.append(BufferPlan("band", "L1", self.l1_buffers, cc1 * self.band_in_rows(g) * g.w * 32))
            if self.weights_resident:
                out.append(BufferPlan("weights", "L1", 1, g.k1 * g.n1 * F))
            else:
                out.append(BufferPlan("weights", "L1", self.l1_buffers, self.k_tile // c0 * (cb16 // 16) * F))
            out.append(BufferPlan("const", "L1", 1, (1 + g.n1) * F))
            out.append(BufferPlan("a", "L0A", self.l0_buffers, self.m_tile * self.k_tile * g.isz))
            out.append(BufferPlan("b", "L0B", self.l0_buffers, self.k_tile * cb16 * g.isz))
            out.append(BufferPlan("acc", "L0C", self.l0c_buffers, self.m_tile * cb16 * 4))
            drain_elems = self.m_tile * cb16
        else:
            cc1 = ceil_div(self.cin_block, c0)   # fractal rows of one tap's K
            m1 = cb16 // 16
            w1 = ceil_div(self.cols, 16)
            if self.variant == "direct":
                out.append(BufferPlan("window", "L1", self.l1_buffers, cc1 * w1 * F))
            else:
                out.append(BufferPlan("copies", "L1", self.l1_buffers, g.kw * self.band_in_rows(g) * cc1 * w1 * F))
            if self.weights_resident:
                out.append(BufferPlan("weights", "L1", 1, g.k1 * g.n1 * F))
            else:
                out.append(BufferPlan("weights", "L1", self.l1_buffers, cc1 * m1 * F))
            out.append(BufferPlan("const", "L1", 1, (1 + g.n1) * F))
            out.append(BufferPlan("a", "L0A", self.l0_buffers, m1 * max(cc1, 1) * F))
            out.append(BufferPlan("b", "L0B", self.l0_buffers, cc1 * w1 * F))
            out.append(BufferPlan("acc", "L0C", self.rows * self.l0c_buffers, cb16 * w1 * 16 * 4))
            drain_elems = cb16 * w1 * 16
            if self.variant in ("direct", "reuse") and needs_staging(g):
                out.extend(staging_plan(g))
        per_channel = epilogue is not None and epilogue.per_channel
        if per_channel:   # every output channel's fp32 scale, loaded once
            out.append(BufferPlan("scale", "L1" if cfg.has_fixpipe else "UB", 1, round_up(g.cout, 16) * 4))
        if not cfg.has_fixpipe:
            out.append(BufferPlan("drain_acc", "UB", 1, drain_elems * 4))
            out.append(BufferPlan("drain_nz", "UB", 1, drain_elems * g.osz))
            out.append(BufferPlan("drain_out", "UB", 2, drain_elems * g.osz))
            if per_channel:
                out.append(BufferPlan("scale_tile", "UB", 1, drain_elems * 4))
        return {b.name: b for b in out}

    def usage(self, g: ConvGeometry, cfg: ns.HardwareConfig, epilogue: Epilogue | None = None) -> dict[str, int]:
        """Bytes each memory will have reserved, with the allocator's alignment and 32 B rounding."""
        align = {"UB": cfg.ub_align_bytes, "L1": cfg.l1_align_bytes, "L0A": cfg.l0ab_align_bytes,
                 "L0B": cfg.l0ab_align_bytes, "L0C": cfg.l0c_align_bytes}
        top: dict[str, int] = {}
        for b in self.plan(g, cfg, epilogue).values():
            t = top.get(b.memory, 0)
            for _ in range(b.num):
                t = round_up(t, align[b.memory]) + round_up(b.length, 32)
            top[b.memory] = t
        return top

    # --- validation ----------------------------------------------------------------------------------
    def check(self, g: ConvGeometry, cfg: ns.HardwareConfig, epilogue: Epilogue | None = None) -> None:
        """Raise a UsageError (illegal size), DtypeError or CapacityError (does not fit) before launching."""
        check_dtype(self.variant, g, cfg)
        check_epilogue(self.variant, g, epilogue)
        c0 = g.c0
        if self.variant not in VARIANTS:
            raise ns.UsageError(f"unknown conv2d variant {self.variant!r}; choose one of {VARIANTS}")
        bad = []
        if self.rows < 1 or self.rows > g.ho:
            bad.append(f"rows={self.rows} must be in 1..{g.ho} (output rows)")
        if self.cols < 1 or self.cols > g.wo or (self.cols % 16 and self.cols != g.wo):
            bad.append(f"cols={self.cols} must be at most the output width {g.wo}, and a multiple of 16 "
                       f"unless it is the whole width")
        if self.variant == "img2col" and self.cols != g.wo:
            bad.append(f"img2col takes whole output rows: cols must be {g.wo}")
        if self.cin_block < 1 or (self.cin_block % c0 and self.cin_block < g.cin):
            bad.append(f"cin_block={self.cin_block} must be a multiple of C0={c0} or cover all {g.cin} channels")
        if self.cout_block < 1 or (self.cout_block % 16 and self.cout_block < g.cout):
            bad.append(f"cout_block={self.cout_block} must be a multiple of 16 or cover all {g.cout} channels")
        if self.variant == "img2col":
            if self.m_tile < 16 or self.m_tile % 16:
                bad.append(f"m_tile={self.m_tile} must be a positive multiple of 16 (whole fractal rows)")
            if self.k_tile < c0 or self.k_tile % c0:
                bad.append(f"k_tile={self.k_tile} must be a positive multiple of C0={c0}")
        if self.variant in ("direct", "reuse") and needs_staging(g) and g.pw * g.isz > 32:
            bad.append(f"padding {g.pw} columns = {g.pw * g.isz} B: DataCopyPad inserts at most 32 B per side")
        for name in ("l1_buffers", "l0_buffers", "l0c_buffers"):
            if getattr(self, name) < 1:
                bad.append(f"{name} must be >= 1")
        limit = 4095  # Mmad m/n/k and DataCopy block counts are 12-bit
        if max(self.m_tile, self.cols, round_up(self.cout_block, 16), self.k_tile) > limit:
            bad.append(f"tile sizes must stay <= {limit} (Mmad's m, n and k are 12-bit)")
        if bad:
            raise ns.UsageError(f"invalid conv2d tiling {self.short()} for {g.describe()}: " + "; ".join(bad))
        plan = self.plan(g, cfg, epilogue)
        nbuf = sum(b.num for b in plan.values())
        if nbuf > cfg.max_buffers:
            raise ns.CapacityError(f"conv2d tiling {self.short()} needs {nbuf} buffers; a TPipe holds at most "
                                   f"{cfg.max_buffers}", hint="use fewer rows per band")
        for mem, used in self.usage(g, cfg, epilogue).items():
            cap = cfg.memory_bytes(mem)
            if used > cap:
                parts = ", ".join(f"{b.name} {b.num} x {b.length} B" for b in plan.values() if b.memory == mem)
                with_ep = f" with the {epilogue.describe()} epilogue" if epilogue else ""
                raise ns.CapacityError(
                    f"conv2d tiling {self.short()}{with_ep} needs {used} B of {mem} ({_POSITION[mem]}) but "
                    f"'{cfg.name}' has {cap} B: {parts}",
                    hint="use smaller tiles or fewer buffers (or let choose_tiling pick)",
                    memory=mem, requested=used, capacity=cap)

    # --- words -----------------------------------------------------------------------------------------
    def short(self) -> str:
        s = f"{self.variant}: rows={self.rows} cols={self.cols} cin_block={self.cin_block} cout_block={self.cout_block}"
        if self.variant == "img2col":
            s += f" m_tile={self.m_tile} k_tile={self.k_tile}"
        return s + (f" buffers L1x{self.l1_buffers} L0x{self.l0_buffers} L0Cx{self.l0c_buffers}"
                    f"{'' if self.weights_resident else ' weights streamed'}")

    def explain(self) -> str:
        """Why these sizes: one line per decision, saying what limited it."""
        lines = [self.short()]
        lines += [f"- {r}" for r in self.reasons] or ["- (sizes given by the caller, not chosen)"]
        return "\n".join(lines)

    def replace(self, **changes) -> "ConvTiling":
        """A copy with some sizes changed (the reasons no longer apply and are dropped)."""
        return dataclasses.replace(self, reasons=(), **changes)


# --- staging of NCHW inputs (direct / reuse) ---------------------------------------------------------
def needs_staging(g: ConvGeometry) -> bool:
    """NCHW rows sit along the fractal's 32 B rows, so a DMA cannot insert zero columns or skip columns
    inside them: padding or a column stride needs the padded, column-phase copy (see staging.py)."""
    return (g.ph, g.pw, g.sw) != (0, 0, 1)


def stage_row_len(g: ConvGeometry) -> int:
    """Elements of one staged row: the padded row split into ``sw`` phases of ``ceil(Wp / sw)`` columns."""
    return g.sw * ceil_div(g.wp, g.sw)


STAGE_ROWS = 64
"""Input rows one staging DMA moves."""


def staging_plan(g: ConvGeometry) -> list[BufferPlan]:
    row_ub = round_up(g.wp * g.isz, 32)
    zero_row = round_up(max(g.ph * stage_row_len(g), ceil_div(g.wp, g.sw), 16) * g.isz, 32)
    zero_bytes = max(zero_row, min(g.cin * zero_row, 16 * 1024))   # padding rows of many channels per DMA
    if g.sw == 1:
        stage = BufferPlan("stage", "UB", 2, min(g.h, STAGE_ROWS) * row_ub)
    else:
        stage = BufferPlan("stage", "UB", 2, g.w * 32)  # one element per 32 B slot
    return [stage, BufferPlan("zeros", "UB", 1, zero_bytes)]


# --- dtypes ------------------------------------------------------------------------------------------
def check_dtype(variant: str, g: ConvGeometry, cfg: ns.HardwareConfig) -> None:
    """The Cube of ``cfg`` must take the input dtype; NCHW variants also need 16-bit fractal transposes."""
    if g.dtype not in cfg.cube_macs_per_cycle:
        raise ns.DtypeError(f"conv2d ({variant}): the '{cfg.name}' Cube does not take {g.dtype} inputs (it takes "
                            f"{', '.join(cfg.cube_macs_per_cycle)})",
                            hint="cast the inputs to float16 first" if g.dtype == "float32" else "")
    if variant in ("direct", "reuse") and g.isz != 2:
        raise ns.DtypeError(
            f"conv2d ({variant}) reads NCHW, whose rows are positions: every 16x16 fractal has to be "
            f"transposed on its way to L0B, and load_data(if_transpose) only transposes 16-bit types, "
            f"not {g.dtype}",
            hint="use the 'layout' or 'img2col' variant: NC1HWC0 fractals need no transpose")


def check_epilogue(variant: str, g: ConvGeometry, epilogue: Epilogue | None) -> None:
    """A fused epilogue exists in the img2col kernel; dequantisation needs int8 inputs and a float output."""
    if not epilogue:
        return
    if variant != "img2col":
        raise ns.UsageError(f"conv2d ({variant}): a fused epilogue ({epilogue.describe()}) is implemented in the "
                            f"img2col kernel only: use variant='img2col', or run ReLU as a separate kernel "
                            f"(fuse=False)")
    if epilogue.dequant and (g.dtype != "int8" or g.out_dtype not in ("float16", "float32")):
        raise ns.DtypeError(f"conv2d: dequantisation turns the int32 accumulator of int8 inputs into float16 or "
                            f"float32; this convolution is {g.dtype} -> {g.out_dtype}")


# --- choosing ---------------------------------------------------------------------------------------
def choose_tiling(g: ConvGeometry, cfg: ns.HardwareConfig | str | None = None, variant: str = "img2col",
                  epilogue: Epilogue | None = None) -> ConvTiling:
    """Legal, reasonably fast block sizes for ``variant`` on ``cfg`` (with the buffers of a fused
    ``epilogue``); see ``explain()`` for the why."""
    cfg = ns.get_config(cfg)
    if variant not in VARIANTS:
        raise ns.UsageError(f"unknown conv2d variant {variant!r}; choose one of {VARIANTS}")
    check_dtype(variant, g, cfg)
    check_epilogue(variant, g, epilogue)
    t = _choose_img2col(g, cfg, epilogue or None) if variant == "img2col" else _choose_rowwise(g, cfg, variant)
    t.check(g, cfg, epilogue)
    return t


def _fits(t: ConvTiling, g: ConvGeometry, cfg, epilogue: Epilogue | None = None) -> bool:
    use = t.usage(g, cfg, epilogue)
    return (all(v <= cfg.memory_bytes(m) for m, v in use.items())
            and sum(b.num for b in t.plan(g, cfg, epilogue).values()) <= cfg.max_buffers)


def _largest(lo: int, hi: int, ok) -> int | None:
    """The largest v in [lo, hi] with ok(v) (ok is monotone: true up to some point)."""
    best = None
    while lo <= hi:
        mid = (lo + hi) // 2
        if ok(mid):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def _choose_img2col(g: ConvGeometry, cfg, epilogue: Epilogue | None = None) -> ConvTiling:
    why: list[str] = []
    c0, isz = g.c0, g.isz
    cout16 = round_up(g.cout, 16)
    # N: every output channel in one Mmad tile, so that each im2col tile is built once
    cb = min(cout16, 256)
    cout_block = g.cout if cb >= g.cout else cb
    why.append(f"cout_block={cout_block}: " + ("all output channels in one Mmad tile, so every im2col tile "
               "in L0A is built once" if cout_block == g.cout else "256 output channels per tile keeps L0B/L0C "
               "room for large M and K tiles; the im2col tile is rebuilt for each Cout block"))
    # M: positions per Mmad, bounded by two accumulators in L0C (and, without Fixpipe, by the drain in UB)
    m_cap_l0c = cfg.l0c_bytes // (2 * cb * 4) // 16 * 16
    m_cap = max(16, min(m_cap_l0c, 256))
    per_channel = epilogue is not None and epilogue.per_channel
    if not cfg.has_fixpipe:   # the drain's UB tiles: fp32 acc, NZ and two outputs (+ the repeated scales)
        drain_bytes = 4 + 3 * g.osz + (4 if per_channel else 0)
        m_cap = max(16, min(m_cap, (cfg.ub_bytes - (round_up(g.cout, 16) * 4 if per_channel else 0))
                            // (cb * drain_bytes) // 16 * 16))
    w_res = g.k1 * g.n1 * FRACTAL_BYTES
    min_bands = 4 if g.n == 1 else 2
    rows_cap = max(1, ceil_div(g.ho, min_bands))

    def make(rows, cin_block, l1b, res, m_tile, k_tile):
        return ConvTiling("img2col", rows, g.wo, cin_block, cout_block, m_tile, k_tile, l1b, 2, 2, res)

    # the band: as many rows as L1 holds twice (all channels), else one buffer, and at last input channels
    # split into blocks; the weights stay in L1 unless streaming them costs less GM traffic than the
    # smaller band that keeping them leaves room for
    def gm_reads(rows, cin_block, res):
        bands = g.n * ceil_div(g.ho, rows)
        m_tiles = ceil_div(rows * g.wo, m_cap)
        band = round_up(g.cin, c0) * 32 // c0 * g.w * min(g.in_rows(rows), g.h)
        reloads = 1 if cin_block >= g.cin else m_tiles * ceil_div(g.cout, cout_block)
        return bands * band * reloads + (w_res if res else bands * m_tiles * w_res)

    found = None
    cin_options = [g.cin] + [c for c in range(round_up(g.cin, c0) - c0, 0, -c0) if c < g.cin]
    for cin_block in cin_options:
        for l1b in (2, 1):
            cands = []
            for res in (True, False):
                rows = _largest(1, rows_cap, lambda r: _fits(make(r, cin_block, l1b, res, 16, c0), g, cfg, epilogue))
                if rows is not None:
                    cands.append((gm_reads(rows, cin_block, res), not res, rows, cin_block, l1b, res))
            if cands:
                found = min(cands)
                alt = [c for c in cands if c is not found]
                break
        if found:
            break
    if found is None:
        raise ns.CapacityError(f"conv2d img2col: not even one output row of {g.describe()} with {c0} channels "
                               f"fits '{cfg.name}'", hint="this teaching kernel does not split the width of a band")
    est, _, rows, cin_block, l1b, resident = found
    found = (rows, cin_block, l1b, resident)
    rows, cin_block, l1b, resident = found
    k_block = ceil_div(cin_block, c0) * g.kk * c0            # im2col columns of one Cin block
    positions = rows * g.wo

    def mk_tiles(m_cap, k_cap):
        m_tile = round_up(ceil_div(positions, ceil_div(positions, m_cap)), 16)
        k_cap = max(c0, min(k_cap, cfg.l0a_bytes // (2 * m_tile * isz), cfg.l0b_bytes // (2 * cb * isz)) // c0 * c0)
        k_tile = round_up(ceil_div(k_block, ceil_div(k_block, k_cap)), c0)  # equal K steps, no small last one
        return m_tile, k_tile

    m_tile, k_tile = mk_tiles(m_cap, k_block)
    shrunk = []
    while not _fits(make(rows, cin_block, l1b, resident, m_tile, k_tile), g, cfg, epilogue):
        if k_tile > c0:                    # the larger tiles did not fit (streamed weight tiles in L1, or UB)
            m_tile, k_tile = mk_tiles(m_tile, max(c0, k_tile // 2))
            shrunk.append("k_tile")
        elif m_tile > 16:
            m_tile, k_tile = mk_tiles(max(16, m_tile // 2), c0)
            shrunk.append("m_tile")
        else:
            rows -= 1
            positions = rows * g.wo
            m_tile, k_tile = mk_tiles(m_cap, k_block)
            shrunk.append("rows")
    band_in = min(g.in_rows(rows), g.h)
    why.append(f"rows={rows}: a band of {rows} output rows reads {band_in} input rows "
               f"({ceil_div(cin_block, c0) * band_in * g.w * 32} B in L1)" +
               (", twice (double buffering: the next band's DMA runs during this band's Mmads)" if l1b == 2
                else ", once (no room for a second band buffer)") +
               (f"; capped at ceil(Ho / {min_bands}) so that there are at least {min_bands} bands to overlap"
                if rows == rows_cap and rows < g.ho else "; limited by L1 capacity" if rows < g.ho else
                "; the whole image fits"))
    why.append(f"cin_block={cin_block}: " + ("all input channels: the band is loaded once and every tile reads it"
               if cin_block >= g.cin else "a band of all channels does not fit L1: K is split into Cin blocks "
               "(contiguous in FRACTAL_Z's K) accumulated in L0C, and each block's band is loaded per tile"))
    why.append("weights: " + (f"the whole FRACTAL_Z tensor ({w_res} B) stays in L1, loaded once" if resident else
                              f"FRACTAL_Z ({w_res} B) is streamed from GM, one (k_tile x cout_block) piece per Mmad")
               + (f"; estimated GM reads {est:,} B, against {alt[0][0]:,} B the other way" if alt else
                  "" if resident else " (keeping it would leave no room for a band)"))
    why.append(f"m_tile={m_tile}: {positions} positions per band in {ceil_div(positions, m_tile)} equal Mmad tiles;"
               f" at most {m_cap} (" + (f"two {m_cap}x{cout_block} fp32 accumulators fill L0C {cfg.l0c_bytes} B"
                                        if m_cap == m_cap_l0c else "capped at 256, a large enough Mmad"
                                        if m_cap == 256 else f"the drain through UB ({cfg.ub_bytes} B) holds an "
                                        f"fp32 tile and three output-dtype copies" + (" and a tile of repeated fp32 "
                                        "scales" if per_channel else "")) + ")")
    why.append(f"k_tile={k_tile}: K = C1b*Kh*Kw*C0 = {k_block} per Cin block in {ceil_div(k_block, k_tile)} equal "
               f"steps, bounded by double-buffered {m_tile}x{k_tile} im2col tiles in L0A ({cfg.l0a_bytes} B) and "
               f"{k_tile}x{cout_block} weight tiles in L0B ({cfg.l0b_bytes} B)")
    if shrunk:
        why.append(f"shrunk {', '.join(dict.fromkeys(shrunk))} until everything fit")
    why.append("buffers: L0A/L0B x2 (load_data_3d for the next K step runs during this Mmad), L0C x2 "
               "(the drain of one tile overlaps the next tile's Mmads)")
    if epilogue:
        why.append(f"epilogue: {epilogue.describe()}, fused into the drain: " + (
            "Fixpipe does it on the way L0C -> GM, no buffer of its own" + (
                f" except the {round_up(g.cout, 16) * 4} B of per-channel scales in L1" if per_channel else "")
            if cfg.has_fixpipe else
            "vector instructions on the tile in UB before MTE3 writes it" + (
                f"; the per-channel scales ({round_up(g.cout, 16) * 4} B) and a tile of them repeated down the "
                f"rows (as large as the fp32 tile) share UB with the drain" if per_channel else
                " (in place: no extra buffer)")))
    t = make(rows, cin_block, l1b, resident, m_tile, k_tile)
    return dataclasses.replace(t, reasons=tuple(why))


def _choose_rowwise(g: ConvGeometry, cfg, variant: str) -> ConvTiling:
    why: list[str] = []
    c0 = g.c0
    cout16 = round_up(g.cout, 16)
    w16 = round_up(g.wo, 16)
    w_res = g.k1 * g.n1 * FRACTAL_BYTES
    cin_all = round_up(g.cin, c0)

    def gm_reads(rows, cols, cb, cin_block, res):
        """Estimated GM reads: the input copies (re-read per Cout block when Cin is split) + the weights."""
        blocks = g.n * ceil_div(g.ho, rows) * ceil_div(g.wo, cols)
        n_cout, split = ceil_div(g.cout, cb), cin_block < g.cin
        if variant == "direct":
            return blocks * n_cout * (g.kk * rows * round_up(g.cin, c0) * cols * g.isz + w_res // n_cout)
        copies = g.kw * g.in_rows(rows) * round_up(g.cin, c0) * cols * g.isz
        return blocks * copies * (n_cout if split else 1) + (w_res if res else blocks * w_res)

    def make(rows, cols, cb, cin_block, l1b, res):
        return ConvTiling(variant, rows, cols, cin_block, g.cout if cb >= g.cout else cb, 0, 0, l1b, 2, 1, res)

    # preferences, best first: a whole output row per Mmad (N = Wo), up to 128 output channels (M), all
    # input channels (K); shrink the column tile, then the Cout block, then the Cin block until it fits
    col_options = [g.wo if w16 <= 256 else 256] + [c for c in (128, 64, 32, 16) if c < min(g.wo, 256)]
    cb_options = [c for c in (min(cout16, 128), 64, 32, 16) if c <= min(cout16, 128)]
    cin_options = [g.cin] + [c for c in range(cin_all - c0, 0, -c0) if c < g.cin]
    best = None
    for cols in col_options:
        for cb in dict.fromkeys(cb_options):
            acc_row = round_up(cb, 16) * round_up(cols, 16) * 4
            max_rows = max(1, min(g.ho, cfg.l0c_bytes // acc_row, cfg.max_buffers - 16))
            for cin_block in cin_options:
                for l1b in (2, 1):
                    cands = []
                    for res in ((True, False) if variant != "direct" else (False,)):
                        rows = _largest(1, max_rows, lambda r: _fits(make(r, cols, cb, cin_block, l1b, res), g, cfg))
                        if rows is not None:
                            cands.append((gm_reads(rows, cols, cb, cin_block, res), not res, rows, res))
                    if cands:
                        est, _, rows, res = min(cands)
                        alt = [c[0] for c in cands if c[3] != res]
                        best = (rows, cols, cb, cin_block, l1b, res, max_rows, acc_row)
                        break
                if best:
                    break
            if best:
                break
        if best:
            break
    if best is None:
        raise ns.CapacityError(f"conv2d {variant}: no tiling of {g.describe()} fits '{cfg.name}'",
                               hint="even one output row of 16 columns x 16 channels does not fit")
    rows, cols, cb, cin_block, l1b, resident, max_rows, acc_row = best
    t = make(rows, cols, cb, cin_block, l1b, resident)
    shrunk = " (smaller than preferred: the larger tiles did not fit L0C/L1" + \
        ("/UB, where the tiles are drained" if not cfg.has_fixpipe else "") + ")"
    why.append(f"cols={cols}: " + ("a whole output row per Mmad (N = Wo" + (f", computed as {w16} by the Cube)"
               if w16 != g.wo else ")") if cols == g.wo else f"{cols} positions per Mmad; the row is split")
               + (shrunk if cols < col_options[0] else ""))
    why.append(f"cout_block={t.cout_block}: " + ("all output channels, so each input tile feeds one Mmad per tap "
               "and row" if t.cout_block == g.cout else f"{cb} output channels per tile (M of the Mmad); the input "
               "tiles are reused by every Cout block") + (shrunk if cb < cb_options[0] else ""))
    limit = "L0C (one fp32 accumulator per output row of the band)" if rows == max_rows and max_rows < g.ho else \
        "the output height" if rows == g.ho else "L1 capacity"
    if variant == "direct":
        why.append(f"rows={rows}: output rows per block, one L0C accumulator each ({acc_row} B); limited by {limit}")
        why.append("input: each (tap, output row) run is fetched from GM again (that is the point of this "
                   "variant), into a " + ("double-buffered" if l1b == 2 else "single") + " L1 tile")
    else:
        why.append(f"rows={rows}: output rows per band, one L0C accumulator each ({acc_row} B), all live "
                   f"while the taps sweep the band; limited by {limit}")
        why.append(f"copies: the band's {g.in_rows(rows)} input rows are loaded once per width tap ({g.kw} "
                   f"column-shifted copies: fractals move in 16-position units, so a one-column shift cannot "
                   f"be done on chip), " + ("double-buffered (the next band's DMA overlaps this band's Mmads)"
                                            if l1b == 2 else "single-buffered (no room for two in L1)"))
    why.append(f"cin_block={cin_block}: " + ("all input channels in one K block" if cin_block >= g.cin else
                                             "input channels split so that the tiles fit L1; L0C accumulates "
                                             "the blocks"))
    why.append("weights: " + (f"FRACTAL_Z ({w_res} B) stays in L1, loaded once" if resident else
                              "each (tap, Cin block, Cout block) piece is loaded from GM when needed"
                              + (" (direct re-reads everything per output block)" if variant == "direct" else ""))
               + (f"; estimated GM reads {est:,} B, against {alt[0]:,} B the other way" if alt else ""))
    return dataclasses.replace(t, reasons=tuple(why))
