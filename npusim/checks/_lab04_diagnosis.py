"""Why a lab 04 answer is wrong, from the evidence its kernel left: the trace of the learner's band loads
and reads (exercise 1), the wrong elements of a transformed tensor (exercise 2), the first im2col tile
that differs from the reference tile (exercise 3), and the profile of a tiling (exercise 4).

Every function returns a sentence or two for a check's message; a cause is named only when the evidence
shows it (a read that finds another row than it needs, a tile that some wrong parameter reproduces
exactly, a measured share of padding).
"""

from __future__ import annotations

import numpy as np

from ..conv import ConvGeometry, ConvTiling
from ..conv.common import round_up
from ..conv.geometry import work_items
from .conv_lab.im2col import from_zz, im2col_tile as reference_tile

INT8_UNWRITTEN = 85
"""What an int8 output holds before the kernel writes it (NaN does not exist in int8)."""


def _span(values) -> str:
    v = sorted(set(values))
    if not v:
        return "none"
    return f"{v[0]}..{v[-1]}" if v == list(range(v[0], v[-1] + 1)) else ", ".join(map(str, v))


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[lo, hi] (inclusive) of the True runs of a 1-D mask."""
    b = np.concatenate(([False], flags, [False])).astype(np.int8)
    e = np.flatnonzero(np.diff(b))
    return [(int(lo), int(hi) - 1) for lo, hi in zip(e[::2], e[1::2])]


# --- exercise 1: the band's loads and reads ----------------------------------------------------------------

def _coverage(trace: dict, g: ConvGeometry) -> np.ndarray:
    count = np.zeros((g.n, g.ho), int)
    for n, ho0, rows in trace.get("bands", []):
        count[n, ho0:ho0 + rows] += 1
    return count


def _slots(entries) -> dict:
    return {(j, slot): row for j, slot, row in entries}


def _jobs(trace: dict, band) -> list[tuple]:
    """The copy-ins of ``band`` (image, first row, rows): [(Band, [(j, slot, row), ...]), ...] in order."""
    return [(b, e) for b, e in trace.get("loads", []) if tuple(b[:3]) == tuple(band)]


def _band_formula(g: ConvGeometry, band, answers: dict, slots: dict, j: int) -> str:
    """Which of the learner's two decisions explains a read that finds the wrong row (from all of them)."""
    n, ho0, rows = band

    def fits(f) -> bool:
        return all(s == f(r, i) for (r, i), s in answers.items())

    offsets = {row - slot for (jj, slot), row in slots.items() if jj == j}
    first = offsets.pop() if len(offsets) == 1 else None
    right = fits(lambda r, i: r * g.sh + i * g.dh)
    if right and first is not None and first != ho0 * g.sh:
        return (f"band_row is right, but slot s holds input row {first} + s: the band's first input row must be "
                f"the window start of its first output row {ho0}, which is padded row {ho0 * g.sh} "
                f"(input_rows / load_band).")
    if right:
        return "band_row is right, but load_band does not put the band's input rows into consecutive slots."
    if g.sh > 1 and fits(lambda r, i: r + i * g.dh):
        return (f"band_row ignores the stride: with stride {g.sh} the window of output row r starts {g.sh} input "
                f"rows below the window of row r - 1.")
    if g.dh > 1 and fits(lambda r, i: r * g.sh + i):
        return (f"band_row ignores the dilation: with dilation {g.dh} height tap i reads {g.dh} input rows below "
                f"tap i - 1.")
    if g.sh != g.dh and fits(lambda r, i: r * g.dh + i * g.sh):
        return "band_row swaps the stride and the dilation: the stride moves the window, the dilation spaces its taps."
    if first == ho0 * g.sh:
        return "load_band is right (slot s holds the band's first input row + s); band_row returns another slot."
    return "Neither the slot band_row returns nor the row load_band put there is the one this read needs."


def band_reads(trace: dict, g: ConvGeometry) -> str:
    """Why a band kernel's output is wrong: a row in no band, or the first read that finds the wrong row."""
    cover = _coverage(trace, g)
    for n in range(g.n):
        missing = _runs(cover[n] == 0)
        if missing:
            lo, hi = missing[0]
            return (f"Output rows {lo}..{hi} of image {n} are in no band: output_bands() must put every output row "
                    f"of every image in a band (the last band takes the rows that are left).")
    reads = trace.get("reads", {})
    for band in trace.get("bands", []):
        n, ho0, rows = band
        jobs = _jobs(trace, band)
        if not jobs:
            return (f"load_band loaded nothing for the band of output rows {ho0}..{ho0 + rows - 1} of image {n}: it "
                    f"must fill copies with load_row(copies, band, ...) for the band it is given.")
        slots = _slots(jobs[0][1])
        answers = reads.get(tuple(band), {})
        for (r, i), s in sorted(answers.items()):
            need = (ho0 + r) * g.sh + i * g.dh
            for j in range(g.kw):
                held = slots.get((j, s))
                if held == need:
                    continue
                where = (f"Output row {ho0 + r} of image {n} (row {r} of the band of output rows {ho0}..{ho0 + rows - 1})"
                         f" at height tap {i}, width tap {j} reads slot {s}, which ")
                filled = [row for (jj, _), row in slots.items() if jj == j]
                if not filled:
                    return where + (f"is empty: load_band loads no copy for width tap {j}. Every width tap needs its "
                                    f"own copy of the band's rows (taps 0..{g.kw - 1}).")
                if held is None:
                    tail = (": the band's last input rows, which its last output rows read at their lower taps, "
                            "are missing" if need > max(filled) else "")
                    return where + (f"load_band never filled; it needs input row {need}. For width tap {j} the band "
                                    f"loaded rows {_span(filled)}{tail}.")
                return where + f"holds input row {held}; it needs input row {need}. " + \
                    _band_formula(g, band, answers, slots, j)
        for b, entries in jobs[1:]:
            if _slots(entries) != slots:
                return (f"The band of output rows {ho0}..{ho0 + rows - 1} loads different rows for its Cin block "
                        f"{b.k} or columns {b.wo0}..: load_band must load the same rows for every band it is given.")
    return ("Every read finds the input row it needs in a slot your load_band filled: did load_row get the band "
            "load_band was called with (its Cin block and columns)?")


def band_load_excess(trace: dict, g: ConvGeometry, t: ConvTiling) -> str:
    """What makes a correct band kernel load more than each band's rows once per width tap ("" if nothing)."""
    cover = _coverage(trace, g)
    for n in range(g.n):
        twice = _runs(cover[n] > 1)
        if twice:
            lo, hi = twice[0]
            return (f"output rows {lo}..{hi} of image {n} are in more than one band: each band computes them again "
                    f"and loads their input rows again. output_bands() must put each output row in one band.")
    isz = np.dtype(g.dtype).itemsize
    cins = t.cin_blocks(g)
    mine = 0
    for (n, ho0, rows, wo0, cols, k), entries in trace.get("loads", []):
        per = cins[k][1] * cols * isz
        mine += len(entries) * per
        run = range(ho0 * g.sh, ho0 * g.sh + g.in_rows(rows))
        seen: dict = {}
        for j, slot, row in entries:
            seen[(j, slot)] = seen.get((j, slot), 0) + 1
            if row not in run:
                return (f"load_band loads input row {row} for the band of output rows {ho0}..{ho0 + rows - 1}, "
                        f"which none of its output rows reads (they read rows {run.start}..{run.stop - 1}).")
        dup = next(((j, s, c) for (j, s), c in seen.items() if c > 1), None)
        if dup:
            j, s, c = dup
            return (f"load_band fills slot {s} of width tap {j} {c} times for the band of output rows "
                    f"{ho0}..{ho0 + rows - 1}: load each row once per width tap.")
    per_cout = len(t.cout_blocks(g)) if len(cins) > 1 else 1    # split Cin: each Cout block loads its band again
    ref = per_cout * sum(g.kw * g.in_rows(rows) * cc * cols * isz for _, _, rows in work_items(g, t.rows)
                         for _, cols in t.col_tiles(g) for _, cc in cins)
    if mine > ref:
        return (f"your load_row calls move {mine:,} B where bands of {t.rows} rows (the tiling's) move {ref:,} B: "
                f"output_bands() makes {len(trace['bands'])} bands, bands of {t.rows} rows make "
                f"{len(work_items(g, t.rows))}. Neighbouring bands share input rows (the halo), and each band "
                f"loads its own, so more, shorter bands load more.")
    return ""


# --- exercise 2: the transformed tensor ---------------------------------------------------------------------

def transform(got: np.ndarray, want: np.ndarray, x: np.ndarray, slots: int) -> str:
    """Why an NC1HWC0 tensor is wrong, from which images, blocks, lanes and positions are wrong."""
    n, c, h, w = x.shape
    c1, c0 = want.shape[1], want.shape[-1]
    hw = h * w
    g, wt = got.reshape(n, c1, hw, c0), want.reshape(n, c1, hw, c0)
    if got.dtype == np.int8:
        bad, unwritten = g != wt, (g == INT8_UNWRITTEN) & (wt != INT8_UNWRITTEN)
    else:
        bad, unwritten = ~((g == wt) | (np.isnan(g) & np.isnan(wt))), np.isnan(g) & ~np.isnan(wt)
    channel = np.arange(c1)[:, None] * c0 + np.arange(c0)[None, :]          # (c1, lane) -> channel
    pad = np.broadcast_to((channel >= c)[None, :, None, :], bad.shape)
    if bad[pad].any() and not bad[~pad].any():
        what = ("were never written" if unwritten[pad].any() else
                f"hold non-zero values (e.g. {g[pad & bad].flat[0]})")
        return (f"Only the padding channels {c}..{c1 * c0 - 1} of the last C1 block are wrong: they {what}. They "
                f"must be zero (the Cube multiplies them with the weights too).")
    last = (slice(None), c1 - 1, slice(None), slice(0, c - (c1 - 1) * c0))  # the last block's real lanes
    if c % c0 and bad[last].all() and (g[last] == 0).all():
        return (f"The real channels of the last block ({(c1 - 1) * c0}..{c - 1}) are zero: the zeros of its padding "
                f"channels were written after them, over them. Write the zero block before the channels (MTE3 "
                f"runs its copies in order).")
    for b in range(1, n):
        if np.array_equal(g[0], wt[b], equal_nan=g.dtype.kind == "f") and not np.array_equal(wt[0], wt[b]):
            return (f"Image 0's place in x5 holds image {b}'s values: every image is written to image 0's place. "
                    f"Where does image b start in x5 (C1 = {c1} blocks per image)?")
    if hw > slots and (bad & ~pad)[:, :, slots:].any():
        def same(src_at, dst_at) -> bool:   # got is what rounds reading / writing there would give
            return np.array_equal(_rounds(x, want, slots, src_at, dst_at), got, equal_nan=got.dtype.kind == "f")

        if same(lambda p0: 0, lambda p0: p0 * c0):
            return (f"Positions {slots}.. of every channel plane hold the values of positions 0..: every round reads "
                    f"the plane from its start. Round p0 reads the plane from position p0 on.")
        if same(lambda p0: p0, lambda p0: p0):
            return (f"Round p0 of a channel lands p0 elements after the channel's first element, over the first "
                    f"round's positions: where does round p0 write? Its first element is position p0 of the "
                    f"channel's lane, C0 = {c0} elements per position.")
        if not (bad & ~pad)[:, :, :slots].any():
            if unwritten[:, :, slots:][~pad[:, :, slots:]].all():
                return (f"Positions {slots}..{hw - 1} of every channel plane were never written: a plane of {hw} "
                        f"positions takes {-(-hw // slots)} rounds of at most SLOTS = {slots} (one buffer holds "
                        f"SLOTS elements), and only the first one ran.")
            return (f"Positions 0..{slots - 1} are right, positions {slots}.. (the later rounds) are wrong: where does "
                    f"round p0 write? Its first element is position p0 of the channel's lane.")
    if n > 1 and not bad[0].any():
        first = int(np.flatnonzero(bad.any(axis=(1, 2, 3)))[0])
        return (f"Image 0 is right, image {first} is wrong: where does image b start, in x (it has C = {c} planes "
                f"per image) and in x5 (C1 = {c1} blocks per image)?")
    if c1 > 1 and not bad[:, 0].any():
        return (f"Block 0 (channels 0..{c0 - 1}) is right, the channels from {c0} on are wrong: channel ch belongs "
                f"to block ch // C0, lane ch % C0 (C0 = {c0} for {x.dtype.name}).")
    wrong_lanes = np.flatnonzero((bad & ~pad).any(axis=(0, 1, 2)))
    if unwritten[~pad].any():
        k = int(unwritten[~pad].sum())
        return (f"{k:,} elements of the real channels were never written, in lanes {_span(wrong_lanes)}: every "
                f"channel's plane lands in lane ch % C0 of its block, its positions C0 = {c0} elements apart.")
    return (f"The values are there but in the wrong places (lanes {_span(wrong_lanes)} of the blocks are wrong): "
            f"element (b, ch, p) goes to block ch // C0 of image b, position p, lane ch % C0, so the positions of "
            f"one channel land C0 = {c0} elements apart.")


def _rounds(x: np.ndarray, want: np.ndarray, slots: int, src_at, dst_at) -> np.ndarray:
    """What a transform writes whose round p0 of a channel reads from position ``src_at(p0)`` of the plane and
    writes from element ``dst_at(p0)`` after the channel's first one (positions C0 apart; padding zero)."""
    n, c, h, w = x.shape
    c1, c0 = want.shape[1], want.shape[-1]
    hw = h * w
    unwritten = np.nan if want.dtype.kind == "f" else INT8_UNWRITTEN
    out = np.zeros_like(want).reshape(-1)
    planes = x.reshape(n, c, hw)
    for b in range(n):
        for ch in range(c):
            if ch < (c1 - 1) * c0 or c % c0 == 0:   # the last block of a padded C starts as the zero block
                out[((b * c1 + ch // c0) * hw) * c0 + ch % c0 + np.arange(hw) * c0] = unwritten
            base = (b * c1 + ch // c0) * hw * c0 + ch % c0
            for p0 in range(0, hw, slots):
                cnt = min(slots, hw - p0)
                idx = base + dst_at(p0) + np.arange(cnt) * c0
                keep = idx < out.size
                out[idx[keep]] = planes[b, ch, src_at(p0):src_at(p0) + cnt][keep]
    return out.reshape(want.shape)


# --- exercise 3: the first wrong im2col tile -----------------------------------------------------------------

_FIELD = {
    "pad_top": "pad_top is the padding rows between the band's first window row and tile.first_row: only a band "
               "whose window starts above the image has any",
    "pad_bottom": "pad_bottom is the padding rows between the last row in L1 and the band's last window row",
    "pad_left": "pad_left/pad_right are the layer's padding columns, which are not in L1 either",
    "pad_right": "pad_left/pad_right are the layer's padding columns, which are not in L1 either",
    "stride_h": "the window moves stride_h input rows from one output row to the next",
    "stride_w": "the window moves stride_w input columns from one output column to the next",
    "dilation_h": "height tap i reads dilation_h rows below tap i - 1",
    "dilation_w": "width tap j reads dilation_w columns right of tap j - 1",
    "m_start": "m_start is this Mmad's first output position in the band (tile.m0)",
    "k_start": "k_start is this K step's first column in the Cin block that is in L1 (tile.k0)",
    "l1_h": "l1_h is the number of image rows in L1 (tile.l1_rows): padding rows are not there",
    "l1_w": "l1_w is the width of the image in L1 (W: the padding columns are not there)",
    "channel_size": "channel_size is the channels of the block in L1 (tile.cin) rounded up to whole C0",
    "kh": "kh and kw are the kernel's height and width",
    "kw": "kh and kw are the kernel's height and width",
    "m_extension": "m_extension is tile.m rounded up to whole fractal rows of 16",
    "k_extension": "k_extension is this K step's columns, tile.k (the last step of a block can be shorter than k_tile)",
}


def _candidates(p, g: ConvGeometry, t: ConvTiling, tile) -> list[dict]:
    """Plausible wrong parameter sets, each one or two fields away from the right ``p``, likeliest first."""
    c0 = g.c0
    k_base = (tile.cin0 // c0) * g.kk * c0
    options = [
        {"pad_top": g.ph}, {"pad_top": 0}, {"pad_top": 0, "pad_bottom": 0}, {"pad_top": g.ph, "pad_bottom": g.ph},
        {"pad_left": 0, "pad_right": 0},
        {"pad_top": 0, "pad_bottom": 0, "pad_left": 0, "pad_right": 0}, {"pad_top": g.pw}, {"pad_left": g.ph, "pad_right": g.ph},
        {"stride_h": 1, "stride_w": 1}, {"stride_h": 1}, {"stride_w": 1}, {"stride_h": g.sw, "stride_w": g.sh},
        {"dilation_h": 1, "dilation_w": 1}, {"dilation_h": 1}, {"dilation_w": 1},
        {"stride_h": g.dh, "stride_w": g.dw, "dilation_h": g.sh, "dilation_w": g.sw},
        {"m_start": 0}, {"m_start": tile.m0 + tile.ho0 * g.wo}, {"k_start": 0}, {"k_start": p.k_start + k_base},
        {"l1_h": g.in_rows(tile.rows)}, {"l1_h": g.h}, {"l1_h": tile.rows}, {"l1_w": g.wo}, {"l1_w": g.wp},
        {"channel_size": g.c1 * c0}, {"channel_size": c0}, {"kh": g.kw, "kw": g.kh},
        {"k_extension": t.k_tile}, {"m_extension": t.m_tile},
    ]
    return [o for o in options if any(getattr(p, k) != v for k, v in o.items())]


def _legal(q, c0: int) -> bool:
    ints = (q.l1_h, q.l1_w, q.kh, q.kw, q.stride_h, q.stride_w, q.dilation_h, q.dilation_w)
    return (min(ints) >= 1 and min(q.pad_top, q.pad_bottom, q.pad_left, q.pad_right, q.m_start, q.k_start) >= 0
            and q.channel_size % c0 == 0 and q.channel_size >= c0 and q.out_h >= 1 and q.out_w >= 1)


def im2col_error(trace: dict, g: ConvGeometry, message: str) -> str:
    """What a simulator error in the learner's load_data_3d means, when it read past the band in L1."""
    tile = trace.get("current")
    if tile is None or "load_data_3d" not in message or "q_band" not in message:
        return ""
    held = -(-tile.cin // g.c0) * g.c0
    return (f" (load_data_3d reads channel_size x l1_h x l1_w elements of the band in L1; this band holds the Cin "
            f"block's {tile.cin} channels rounded up to {held}, x {tile.l1_rows} image rows (no padding rows) x "
            f"{g.w} columns = {held * tile.l1_rows * g.w:,} elements: one of those three fields is larger than "
            f"what is in L1.)")


def im2col_tile(trace: dict, g: ConvGeometry, t: ConvTiling, brief: bool = False) -> str:
    """The first im2col tile the learner's load_data_3d built wrong, and the parameter that explains it."""
    rec = trace.get("tile")
    if rec is None:
        return "" if brief else "Every im2col tile your load_data_3d built is right."
    tile, p, image, got = rec
    c0 = g.c0
    desc = (f"The first wrong im2col tile: the band of output rows {tile.ho0}..{tile.ho0 + tile.rows - 1} (image "
            f"rows {tile.first_row}..{tile.first_row + tile.l1_rows - 1} in L1), positions {tile.m0}..{tile.m0 + tile.m - 1}, "
            f"columns {tile.k0}..{tile.k0 + tile.k - 1} of the Cin block of channels {tile.cin0}..{tile.cin0 + tile.cin - 1}.")
    for change in _candidates(p, g, t, tile):
        q = p._replace(**change)
        if _legal(q, c0) and np.array_equal(from_zz(got, q.m_extension, q.k_extension, c0),
                                             reference_tile(image, q, c0), equal_nan=got.dtype.kind == "f"):
            mine = ", ".join(f"{k}={v}" for k, v in change.items())
            need = ", ".join(f"{k}={getattr(p, k)}" for k in change)
            reasons = "; ".join(dict.fromkeys(_FIELD[k] for k in change))
            return desc + f" L0A holds what load_data_3d builds with {mine}; this tile needs {need}: {reasons}."
    want = reference_tile(image, p, c0)
    mine = from_zz(got, p.m_extension, p.k_extension, c0)
    if mine.size == 0:
        return desc + " L0A does not hold a whole tile of tile.m (rounded up to 16) x tile.k elements."
    diff = ~((mine == want) | (np.isnan(mine.astype(np.float64)) & np.isnan(want.astype(np.float64))))
    r, k = (int(v) for v in np.argwhere(diff)[0])
    m = p.m_start + r
    ho, wo = divmod(m, p.out_w)
    c1, rest = divmod(k + p.k_start, g.kk * c0)
    i, rest = divmod(rest, g.kw * c0)
    j, lane = divmod(rest, c0)
    hh, ww = ho * g.sh + i * g.dh - p.pad_top, wo * g.sw + j * g.dw - g.pw
    src = (f"input channel {tile.cin0 + c1 * c0 + lane}, image row {tile.first_row + hh}, column {ww}"
           if 0 <= hh < tile.l1_rows and 0 <= ww < g.w else "a padding zero")
    return desc + (f" Its row for position {m} (output row {tile.ho0 + ho}, column {wo}) and column {k + p.k_start} "
                   f"(tap ({i}, {j})) should hold {src} = {want[r, k]}, yours holds {mine[r, k]}; no single "
                   f"parameter explains it: compare each field of your LoadData3DParams with the tile.")


# --- exercise 4: what a tiling's time is made of ---------------------------------------------------------------

def _m_padding(t: ConvTiling, g: ConvGeometry) -> tuple[int, int, list[int]]:
    """(positions the Cube computes, real positions, the Mmad sizes that are not multiples of 16)."""
    computed = real = 0
    odd: list[int] = []
    for _, _, rows in work_items(g, t.rows):
        positions = rows * g.wo
        for m0 in range(0, positions, t.m_tile):
            mt = min(t.m_tile, positions - m0)
            computed += round_up(mt, 16)
            real += mt
            if mt % 16 and mt not in odd:
                odd.append(mt)
    return computed, real, odd


def _ends(profile) -> tuple[float, float]:
    """Cycles before the first Mmad and after the last one."""
    mm = [i for i in profile.instructions if i.op == "mmad"]
    if not mm:
        return 0.0, 0.0
    return min(i.start for i in mm), profile.total_cycles - max(i.end for i in mm)


def tiling_summary(profile, t: ConvTiling, g: ConvGeometry) -> str:
    if t.variant != "img2col":
        return f"the {t.variant} kernel"
    computed, real, _ = _m_padding(t, g)
    start, end = _ends(profile)
    return (f"the Cube computes {computed:,} positions for {real:,} ({1 - real / computed:.1%} M padding), "
            f"{start / profile.total_cycles:.1%} of the time passes before the first Mmad")


def tiling_time(mine, t: ConvTiling, default: ConvTiling, g: ConvGeometry) -> str:
    """What the measured time of ``t`` is made of, next to the default's, and the lever that is left."""
    if t.variant != "img2col":
        return (f"Measured: the {t.variant} kernel's critical pipe is {mine.critical_pipe} ({mine.pipe_ratio[mine.critical_pipe]:.0%} "
                f"busy); only the img2col kernel keeps the Cube busy on this layer: start from choose_tiling(g3).")
    computed, real, odd = _m_padding(t, g)
    d_computed, d_real, _ = _m_padding(default, g)
    start, end = _ends(mine)
    busy, ideal = mine.pipe_busy_cycles.get("cube", 0.0), mine.cube_ideal_cycles
    text = (f"Measured: the Cube is busy {busy / ideal - 1:.1%} longer than the useful MACs need; it computes "
            f"{computed:,} positions for {real:,} ({1 - real / computed:.1%} M padding; the default "
            f"{1 - d_real / d_computed:.1%})")
    if odd:
        text += f", because Mmads of {', '.join(map(str, odd))} positions are computed as whole fractal rows of 16"
    text += (f"; the start before the first Mmad takes {start / mine.total_cycles:.1%} of the time, the end after "
             f"the last {end / mine.total_cycles:.1%}. ")
    if computed > real:
        return text + "Every padded position costs Cube time: choose rows and m_tile so that every Mmad's m is a multiple of 16."
    return text + ("No M padding is left: what remains is the start and the end (a smaller first band arrives "
                   "sooner) and the Cube's per-Mmad start-up (larger Mmads pay it fewer times).")
