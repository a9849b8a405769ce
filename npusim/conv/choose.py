"""Choosing a Conv2D tiling: block sizes for one variant, shape and config, and the reasons.

:func:`choose_tiling` returns a :class:`~npusim.conv.tiling.ConvTiling` whose ``explain()`` says what
limited each size. The choice ranks a few candidates with a cost estimate of the GM traffic and the
Cube work (:func:`estimate_cycles`); :mod:`.sweep` checks it against simulated tilings.

With ``cores`` (the operator layer passes the chip's Cube cores), img2col is split over the chip as
production conv kernels are: the work items are bands of output rows x groups of Cout blocks
(``ConvTiling.cout_split``), over the batch, and :func:`_split_img2col` picks the band height, Cout
block and groups whose busiest core is estimated fastest, so that a convolution whose bands alone do not
fill the cores (one small image) still runs on all of them.
"""

from __future__ import annotations

import dataclasses

import npusim as ns

from .. import costs

from .common import FRACTAL_BYTES, Epilogue, ceil_div, round_up
from .geometry import ConvGeometry, work_items
from .tiling import VARIANTS, ConvTiling, check_dtype, check_epilogue


def choose_tiling(g: ConvGeometry, cfg: ns.HardwareConfig | str | None = None, variant: str = "img2col",
                  epilogue: Epilogue | None = None, cores: int | None = None) -> ConvTiling:
    """Legal, reasonably fast block sizes for ``variant`` on ``cfg`` (with the buffers of a fused
    ``epilogue``); see ``explain()`` for the why. ``cores`` (img2col): the cores the launch will use; the
    work is then cut into enough items (bands of output rows x groups of Cout blocks, over the batch) to
    keep them all busy, as production conv kernels split batch, output rows and Cout over the chip's cores."""
    cfg = ns.get_config(cfg)
    if variant not in VARIANTS:
        raise ns.UsageError(f"unknown conv2d variant {variant!r}; choose one of {VARIANTS}")
    check_dtype(variant, g, cfg)
    check_epilogue(variant, g, epilogue)
    if variant == "img2col":
        t = _choose_img2col(g, cfg, epilogue or None) if not cores or cores <= 1 else \
            _split_img2col(g, cfg, epilogue or None, int(cores))
    else:
        t = _choose_rowwise(g, cfg, variant)
    t.check(g, cfg, epilogue)
    return t


def _busiest_core(g: ConvGeometry, cfg, t: ConvTiling, reads: int, compute: float, cores: int) -> tuple[float, int]:
    """Estimated cycles of the busiest core, and the work items: items go round-robin to the blocks (as
    ``my_items`` hands them out); an item's Mmads are its share of ``compute`` (output rows x channels),
    its load its share of ``reads`` (at the core's share of the GM bandwidth); the first load is not
    hidden, then each item costs the slower of its load and its Mmads (double-buffered bands)."""
    groups = [sum(c for _, c in t.group_blocks(g, grp)) for grp in range(t.cout_split)]
    items = [(rows, ch) for _, _, rows in work_items(g, t.rows) for ch in groups]
    active = min(len(items), cores)
    rate = cfg.gm_rate(active)
    unit_mmad = compute / (g.n * g.ho * g.cout)
    in_rows = sum(g.in_rows(rows) for rows, _ in items)
    busiest = 0.0
    for c in range(active):
        mine = items[c::active]
        loads = [reads * g.in_rows(rows) / in_rows / rate for rows, _ in mine]
        busy = loads[0] + sum(max(ld, unit_mmad * rows * ch) for ld, (rows, ch) in zip(loads, mine))
        busiest = max(busiest, busy)
    return busiest, len(items)


def _staged(g: ConvGeometry, cfg, epilogue: Epilogue | None, t: ConvTiling) -> ConvTiling | None:
    """``t`` as a staged tiling (:mod:`.staged`): every input channel in the band, the core's Cout group's
    weights resident, three band buffers if L1 holds them, else two; None when it does not fit."""
    if t.cin_block < g.cin or t.l0c_buffers < 2:
        return None
    for l1b in (3, 2):
        s = dataclasses.replace(t, staged=True, weights_resident=True, l1_buffers=l1b, reasons=t.reasons)
        if _fits(s, g, cfg, epilogue):
            return s
    return None


def _busiest_staged(g: ConvGeometry, cfg, t: ConvTiling, compute: float, cores: int) -> tuple[float, int]:
    """Estimated cycles of the busiest core of a staged tiling, and the work items: the core's items as
    :meth:`ConvTiling.core_items` deals them; its Mmads (its share of ``compute`` by rows and channels),
    or, if slower, its group's weights at the GM port and its bands at the L2 rate (the transform that
    wrote them leaves them there), plus the first piece's load."""
    active = min(t.work_items(g), cores)
    unit_mmad = compute / (g.n * g.ho * g.cout)
    band_bytes = lambda rows: round_up(g.cin, g.c0) * g.isz * g.w * min(g.in_rows(rows), g.h)
    busiest = 0.0
    for c in range(active):
        mine = t.core_items(g, c, active)
        if not mine:
            continue
        chans = [sum(cb for _, cb in t.group_blocks(g, grp)) for _, grp in mine]
        mm = sum(unit_mmad * band[2] * ch for (band, _), ch in zip(mine, chans))
        groups = len({grp for _, grp in mine})   # weight (re)loads
        w = groups * g.k1 * t.group_n1(g) * FRACTAL_BYTES
        data = w / cfg.gm_port_bytes_per_cycle + sum(band_bytes(b[2]) for b, _ in mine) / cfg.l2_bytes_per_cycle
        first = (w / 8 + band_bytes(mine[0][0][2]) / 8) / cfg.gm_port_bytes_per_cycle + 2 * cfg.gm_startup_cycles
        busiest = max(busiest, first + max(mm, data))
    return busiest, t.work_items(g)


def _split_img2col(g: ConvGeometry, cfg, epilogue: Epilogue | None, cores: int) -> ConvTiling:
    """The img2col tiling for ``cores`` cores: among Cout blocks of 256 to 64 channels, Cout groups and band
    heights that give about one to four items per core, the lowest estimated time of the busiest core:
    the first item's band load (not hidden), then ``ceil(items / cores)`` items, each the slower of its
    load (at ``gm_rate(active cores)``) and its Mmads / im2col builds."""
    cout16 = round_up(g.cout, 16)
    cands: dict[tuple[int, int, int], None] = {}
    for cb in dict.fromkeys(c for c in (min(cout16, 256), 192, 128, 96, 64) if c <= cout16):
        n_cout = ceil_div(g.cout, g.cout if cb >= g.cout else cb)
        for split in range(1, n_cout + 1):
            for waves in (1, 2, 3, 4):
                bands = ceil_div(waves * cores, g.n * split)
                rows = max(1, ceil_div(g.ho, bands))
                cands[(cb, split, min(rows, g.ho))] = None
    best = None
    for cb, split, rows in cands:
        try:
            _, reads, compute, t = _img2col_with(g, cfg, epilogue, cb, rows_cap=rows)
        except ns.CapacityError:
            continue
        t = dataclasses.replace(t, cout_split=min(split, len(t.cout_blocks(g))))
        staged = _staged(g, cfg, epilogue, t)
        if staged is not None:   # any staged tiling goes before the plain ones (see _busiest_staged)
            busiest, items = _busiest_staged(g, cfg, staged, compute, cores)
            key = (0, busiest, items)
            t = staged
        else:
            busiest, items = _busiest_core(g, cfg, t, reads, compute, cores)
            key = (1, busiest, items)
        if best is None or key < best[0]:
            best = (key, t, items)
    if best is None:
        return _choose_img2col(g, cfg, epilogue)
    (_, busiest, _), t, items = best
    if t.staged:   # the staged line tells where the weights are
        t = dataclasses.replace(t, reasons=tuple(r for r in t.reasons if not r.startswith("weights:")) + (
            f"staged: each core keeps its Cout group's weights ({g.k1 * t.group_n1(g) * FRACTAL_BYTES} B) in L1 "
            f"and starts after the first of {min(8, ceil_div(g.k1 * g.c0, t.k_tile))} K pieces of its first "
            f"band(s) and weights; {t.l1_buffers} band buffers (npusim.conv.staged)",))
    why = (f"cores: {items} work items (bands of {t.rows} rows x {t.cout_split} Cout group(s)"
           f"{f' x {g.n} images' if g.n > 1 else ''}) on {min(items, cores)} of {cores} cores, estimated "
           f"{busiest:,.0f} cycles for the busiest core (its first band's load, then ceil(items / cores) "
           f"items, each the slower of its load and its Mmads)")
    return dataclasses.replace(t, reasons=t.reasons + (why,))


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
    """The Cout block decides the rest: as many output channels as one Mmad takes (256), or 128 so that
    twice as many positions share each weight tile (fewer passes over weights that do not fit L1). Each
    option is completed and the one with the lower estimated time wins."""
    cout16 = round_up(g.cout, 16)
    options = [min(cout16, 256)] + ([128] if cout16 > 128 else [])
    done = []
    for cb in options:
        try:
            est, _, _, t = _img2col_with(g, cfg, epilogue, cb)
            done.append((est, t))
        except ns.CapacityError:
            if cb == options[-1] and not done:
                raise
    (est, t), *others = sorted(done, key=lambda d: d[0])
    if others:
        t = dataclasses.replace(t, reasons=t.reasons + (
            f"chosen over cout_block={others[0][1].cout_block}: estimated {est:,.0f} against {others[0][0]:,.0f} "
            f"cycles (the slower of the GM reads at the port rate and the Cube's Mmads)",))
    return t


def _img2col_with(g: ConvGeometry, cfg, epilogue: Epilogue | None, cb: int,
                  rows_cap: int | None = None) -> tuple[float, int, float, ConvTiling]:
    """The img2col tiling with Cout blocks of ``cb`` (bands of at most ``rows_cap`` rows): its estimated
    cycles on one core, its GM read bytes apart from streamed weights, the cycles of its Mmads, im2col
    builds and streamed weight reads (from L2), and the tiling."""
    why: list[str] = []
    c0, isz = g.c0, g.isz
    cout_block = g.cout if cb >= g.cout else cb
    why.append(f"cout_block={cout_block}: " + ("all output channels in one Mmad tile, so every im2col tile "
               "in L0A is built once" if cout_block == g.cout else f"{cb} output channels per tile keeps L0B/L0C "
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
    explicit = rows_cap is not None
    rows_cap = max(1, ceil_div(g.ho, min_bands)) if rows_cap is None else rows_cap

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
                # resident weights: bands overlap their loads; streamed ones are read again for every band
                cap = rows_cap if res or explicit else g.ho
                rows = _largest(1, cap, lambda r: _fits(make(r, cin_block, l1b, res, 16, c0), g, cfg, epilogue))
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
               ("; capped so that the bands and Cout groups fill the cores (last line)" if explicit and
                rows == rows_cap and rows < g.ho else
                f"; capped at ceil(Ho / {min_bands}) so that there are at least {min_bands} bands to overlap"
                if rows == rows_cap and rows < g.ho and resident else "; limited by L1 capacity" if rows < g.ho
                else "; the whole image" + ("" if resident else " (streamed weights are read once per band)")))
    why.append(f"cin_block={cin_block}: " + ("all input channels: the band is loaded once and every tile reads it"
               if cin_block >= g.cin else "a band of all channels does not fit L1: K is split into Cin blocks "
               "(contiguous in FRACTAL_Z's K) accumulated in L0C, and each block's band is loaded per tile"))
    why.append("weights: " + (f"the whole FRACTAL_Z tensor ({w_res} B) stays in L1, loaded once" if resident else
                              f"FRACTAL_Z ({w_res} B) is streamed from GM, one (k_tile x cout_block) piece per Mmad")
               + (f"; estimated GM reads {est:,} B, against {alt[0][0]:,} B the other way" if alt else
                  "" if resident else " (keeping it would leave no room for a band)"))
    n_m = ceil_div(positions, m_tile)
    last_m = positions - (n_m - 1) * m_tile
    cut = ("one Mmad tile" if n_m == 1 else f"{n_m} Mmad tiles of {m_tile}" + (
        "" if last_m == m_tile else f", the last {last_m} (computed as {ceil_div(last_m, 16) * 16}: the Cube "
                                    f"works on whole 16-row fractals)"))
    why.append(f"m_tile={m_tile}: {positions} positions per band in {cut};"
               f" at most {m_cap} (" + (f"two {m_cap}x{cout_block} fp32 accumulators fill L0C {cfg.l0c_bytes} B"
                                        if m_cap == m_cap_l0c else "capped at 256, a large enough Mmad"
                                        if m_cap == 256 else f"the drain through UB ({cfg.ub_bytes} B) holds an "
                                        f"fp32 tile and three output-dtype copies" + (" and a tile of repeated fp32 "
                                        "scales" if per_channel else "")) + ")")
    n_k = ceil_div(k_block, k_tile)
    last_k = k_block - (n_k - 1) * k_tile
    why.append(f"k_tile={k_tile}: K = C1b*Kh*Kw*C0 = {k_block} per Cin block in {n_k} step(s)"
               + ("" if last_k == k_tile else f", the last {last_k}")
               + f", bounded by double-buffered {m_tile}x{k_tile} im2col tiles in L0A ({cfg.l0a_bytes} B) and "
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
    # estimate: the slower of the GM reads at the port's rate and the Cube's Mmads
    bands = g.n * ceil_div(g.ho, rows)
    tiles = bands * ceil_div(positions, m_tile) * ceil_div(g.cout, cout_block)
    k_steps = len(t.cin_blocks(g)) * ceil_div(ceil_div(cin_block, c0) * g.kk * c0, k_tile)
    cube = tiles * k_steps * costs.cube_cycles(cfg, m_tile, cout_block, k_tile, g.dtype)
    reads = bands * round_up(g.cin, c0) * isz * g.w * min(g.in_rows(rows), g.h) + \
        (w_res if resident else tiles * w_res // ceil_div(g.cout, cout_block))
    # MTE1 builds each im2col tile once per Cout block, and loads each weight tile (L1 -> L0B)
    mte1 = tiles * k_steps * (m_tile * k_tile * isz / cfg.l1_to_l0a_bytes_per_cycle
                              + k_tile * round_up(cout_block, 16) * isz / cfg.l1_to_l0b_bytes_per_cycle)
    est = max(reads / cfg.gm_port_bytes_per_cycle, cube)
    if explicit:   # the split's candidates differ in Cout blocks, whose im2col tiles MTE1 rebuilds
        est = max(est, mte1)
    # on several cores the streamed weight pieces, read by every core, come from L2: their time goes
    # with the Mmads' (each core its share), the bands' with the GM reads
    w_reads = 0 if resident else tiles * w_res // ceil_div(g.cout, cout_block)
    compute = max(cube, mte1, w_reads / cfg.l2_bytes_per_cycle)
    return est, reads - w_reads, compute, dataclasses.replace(t, reasons=tuple(why))


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
    def cycles(rows, cols, cb, cin_block, res):
        """Estimated time: the slower of the GM reads at the port's rate and the Cube's Mmads."""
        blocks = g.n * ceil_div(g.ho, rows) * ceil_div(g.wo, cols)
        mmads = blocks * rows * g.kk * ceil_div(g.cin, cin_block) * ceil_div(g.cout, cb)
        cube = mmads * costs.cube_cycles(cfg, min(cb, cout16), cols, min(cin_block, round_up(g.cin, c0)), g.dtype)
        return max(gm_reads(rows, cols, cb, cin_block, res) / cfg.gm_port_bytes_per_cycle, cube)

    # for the widest column tile that fits: every Cout block, Cin block, L1 buffer count and weight
    # placement with the most rows that fit. All input channels in one block first (a split reloads the
    # band's input for every Cout block), then the lowest estimated time (ties: the earlier option);
    # direct: the first that fits in the order of preference
    best = None
    for cols in col_options:
        options = []
        for i, cb in enumerate(dict.fromkeys(cb_options)):
            acc_row = round_up(cb, 16) * round_up(cols, 16) * 4
            max_rows = max(1, min(g.ho, cfg.l0c_bytes // acc_row, cfg.max_buffers - 16))
            for j, cin_block in enumerate(cin_options):
                for l1b in (2, 1):
                    cands = []
                    for res in ((True, False) if variant != "direct" else (False,)):
                        rows = _largest(1, max_rows, lambda r: _fits(make(r, cols, cb, cin_block, l1b, res), g, cfg))
                        if rows is not None:
                            cands.append((gm_reads(rows, cols, cb, cin_block, res), not res, rows, res))
                    for est, _, rows, res in cands:
                        alt = [c[0] for c in cands if c[3] != res]
                        # direct re-reads its input for every block anyway: the preference order decides
                        rank = (i, j, -l1b, est) if variant == "direct" else \
                            (j > 0, cycles(rows, cols, cb, cin_block, res), i, j, -l1b, not res)
                        options.append((*rank,
                                        (rows, cols, cb, cin_block, l1b, res, max_rows, acc_row, est, alt)))
        if options:
            *best, est, alt = min(options)[-1]
            best = tuple(best)
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
