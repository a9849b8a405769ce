"""Tiling of the Conv2D kernels: the block sizes, the buffers they need, and whether they are legal.

:class:`ConvTiling` holds the sizes (:func:`npusim.conv.choose_tiling`, in :mod:`.choose`, picks them
for one variant, one shape and one :class:`npusim.HardwareConfig`). :meth:`ConvTiling.plan` lists every on-chip buffer the kernel will
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
from .geometry import ConvGeometry, work_items

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
    cout_split: int = 1
    """img2col: groups of Cout blocks that are separate work items (run on different cores); 1 = every
    core computes all output channels of its bands."""
    staged: bool = False
    """img2col on several cores (:mod:`npusim.conv.staged`): each core holds its Cout group's weights in L1
    and starts after the first K piece of its first band and weights; the bands of a group are shared
    out over its cores by rows (:meth:`core_items`). False: every weight resident, items round-robin."""
    reasons: tuple[str, ...] = field(default=(), compare=False, repr=False)

    # --- derived sizes -------------------------------------------------------------------------------
    def cin_blocks(self, g: ConvGeometry) -> list[tuple[int, int]]:
        """``(first channel, channels)`` of each input channel block."""
        return [(c, min(self.cin_block, g.cin - c)) for c in range(0, g.cin, self.cin_block)]

    def cout_blocks(self, g: ConvGeometry) -> list[tuple[int, int]]:
        """``(first channel, channels)`` of each output channel block."""
        return [(c, min(self.cout_block, g.cout - c)) for c in range(0, g.cout, self.cout_block)]

    def group_blocks(self, g: ConvGeometry, grp: int) -> list[tuple[int, int]]:
        """The Cout blocks of group ``grp`` of ``cout_split`` (consecutive blocks, as equal as can be)."""
        blocks = self.cout_blocks(g)
        n = len(blocks)   # as equal as can be: group sizes differ by at most one block, none is empty
        return blocks[grp * n // self.cout_split:(grp + 1) * n // self.cout_split]

    def work_items(self, g: ConvGeometry) -> int:
        """Independent work items, one per block at most: bands x Cout groups."""
        return g.n * -(-g.ho // self.rows) * (self.cout_split if self.variant == "img2col" else 1)

    def group_n1(self, g: ConvGeometry) -> int:
        """Fractal columns (16 output channels each) of the largest Cout group."""
        return max(sum(-(-c // 16) for _, c in self.group_blocks(g, grp)) for grp in range(self.cout_split))

    def bands(self, g: ConvGeometry) -> list[tuple[int, int, int]]:
        """The bands ``(image, first output row, rows)``: ``rows`` rows each (the last one shorter); staged,
        ``ceil(Ho / rows)`` bands per image of as equal heights as can be (differing by one row at most),
        so that no core is left with a short band while others compute full ones."""
        if not self.staged:
            return work_items(g, self.rows)
        nb = -(-g.ho // self.rows)
        cuts = [g.ho * i // nb for i in range(nb + 1)]
        return [(n, cuts[i], cuts[i + 1] - cuts[i]) for n in range(g.n) for i in range(nb)]

    def core_items(self, g: ConvGeometry, idx: int, num: int) -> list[tuple[tuple[int, int, int], int]]:
        """The work items ``(band, Cout group)`` block ``idx`` of ``num`` computes, in order.

        Not staged: every ``num``-th item of the (band, group) list from ``idx``. Staged, with at least
        as many blocks as groups: block ``idx`` computes group ``idx % cout_split`` only (its weights stay
        in L1), and the bands go to the group's blocks longest first, each to the one with the fewest
        rows so far (ties: the lower index), so that their rows are as equal as the bands allow."""
        bands = self.bands(g)
        split = self.cout_split
        if not self.staged or num < split:
            return [(b, grp) for b in bands for grp in range(split)][idx::num]
        grp = idx % split
        members = list(range(grp, num, split))
        load = [0] * len(members)
        mine = []
        for i in sorted(range(len(bands)), key=lambda i: -bands[i][2]):
            j = load.index(min(load))
            load[j] += bands[i][2]
            if members[j] == idx:
                mine.append(i)
        return [(bands[i], grp) for i in sorted(mine)]

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
            if self.staged:   # the weights of one Cout group
                out.append(BufferPlan("weights", "L1", 1, g.k1 * self.group_n1(g) * F))
            elif self.weights_resident:
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
        n_cout = -(-g.cout // max(1, self.cout_block))
        if self.cout_split < 1 or self.cout_split > n_cout:
            bad.append(f"cout_split={self.cout_split} must be in 1..{n_cout} (the Cout blocks)")
        if self.cout_split > 1 and self.variant != "img2col":
            bad.append("cout_split (Cout groups on different cores) is img2col's only")
        if self.staged and (self.variant != "img2col" or self.cin_block < g.cin or not self.weights_resident):
            bad.append("staged (per-group weights in L1, a staged start) is img2col's, with every input channel "
                       "in one block and the weights resident")
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
            s += f" m_tile={self.m_tile} k_tile={self.k_tile}" + (f" cout_split={self.cout_split}"
                                                                   if self.cout_split > 1 else "") + (
                " staged" if self.staged else "")
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
