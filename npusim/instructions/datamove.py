"""Data movement: DataCopy (GM<->UB, GM->L1, ND->NZ), DataCopyPad, LoadData 2D/3D (Fixpipe: fixpipe.py)."""

from __future__ import annotations

import numpy as np

from .. import costs
from ..chipsync import atomic_op, store
from ..core import current
from ..errors import AlignmentError, DtypeError, OutOfBoundsError, UsageError, report
from ..params import DataCopyExtParams, DataCopyPadExtParams, DataCopyParams, LoadData2DParams, LoadData3DParams, Nd2NzParams
from ..pipes import Pipe
from ..sanitizer import call_site, describe_tensor, format_site
from ..tensor import GlobalTensor, LocalTensor
from ._access import check_align, check_count, local, touch_bytes

MTE1, MTE2, MTE3, V, FIX = int(Pipe.MTE1), int(Pipe.MTE2), int(Pipe.MTE3), int(Pipe.V), int(Pipe.FIX)

# (source memory, destination memory) -> (pipe, path name)
_ROUTES = {
    ("GM", "UB"): (MTE2, "GM->UB"),
    ("GM", "L1"): (MTE2, "GM->L1"),
    ("UB", "GM"): (MTE3, "UB->GM"),
    ("L1", "UB"): (MTE1, "L1->UB"),
    ("UB", "UB"): (V, "UB->UB"),
    ("L0C", "UB"): (V, "L0C->UB"),
}
_WRONG_ROUTE_HINT = {
    ("L1", "L0A"): "use load_data (2D) or load_data_3d to move L1 -> L0A",
    ("L1", "L0B"): "use load_data to move L1 -> L0B",
    ("L0C", "GM"): "use fixpipe to move results L0C -> GM",
    ("GM", "L0A"): "GM data reaches L0A through L1: data_copy GM->L1, then load_data",
    ("GM", "L0B"): "GM data reaches L0B through L1: data_copy GM->L1, then load_data",
    ("GM", "GM"): "GM->GM is not a DataCopy: go through UB (or L1)",
}


def _mem(t) -> str:
    if isinstance(t, GlobalTensor):
        return "GM"
    if isinstance(t, LocalTensor):
        return t.slot.memory.name
    raise UsageError(f"expected a GlobalTensor or LocalTensor, got {type(t).__name__} {t!r:.60}",
                     hint="copies take a kernel argument's GlobalTensor (or a slice of it) or a local tensor "
                          "from alloc_tensor/deque/TBuf.get")


def _raw(t) -> tuple[np.ndarray, int, int]:
    """(byte array, byte offset of the tensor in it, bytes available from there)."""
    if isinstance(t, LocalTensor):
        return t.slot.memory.buf, t.addr, t.nbytes
    isz = t.dtype.itemsize
    return t.buf.raw, t.offset * isz, (t.buf.flat.size - t.offset) * isz


def _view(buf: np.ndarray, offset: int, shape, strides, dtype=np.uint8) -> np.ndarray:
    """A strided view of a byte buffer (10x cheaper than numpy's as_strided); bounds are checked before."""
    return np.ndarray(shape, dtype, buf, offset, strides)


def _strided(buf: np.ndarray, base: int, nblk: int, blen: int, pitch: int) -> np.ndarray:
    if nblk == 1:
        return buf[base:base + blen]
    return _view(buf, base, (nblk, blen), (pitch, 1))


def _align_of(core, mem: str) -> int:
    cfg = core.cfg
    return {"UB": cfg.ub_align_bytes, "L1": cfg.l1_align_bytes, "L0A": cfg.l0ab_align_bytes,
            "L0B": cfg.l0ab_align_bytes, "L0C": 64}[mem]


def _gm_past_end_hint(lo: int, total: int, nblk: int, blen: int, pitch: int) -> str:
    """What a GM copy past the end can come from, as far as the copy itself shows it."""
    if lo < 0:
        return "GM offsets count from the first element and must be >= 0"
    if lo >= total:
        return (f"the copy starts at byte {lo}, at or past the end of the tensor: its offset (the index you "
                f"slice GM with) is too large")
    if nblk > 1 and pitch > blen:
        return (f"its {nblk} blocks of {blen} B, {pitch} B apart (a gap of {pitch - blen} B), span "
                f"{(nblk - 1) * pitch + blen} B from byte {lo}: the gap between the blocks or the start offset is "
                f"too large for this tensor, or there are too many blocks")
    return ("either the count is too long (a last tile is shorter than the others: min(tile, total - offset)) or "
            "the offset is too large (the earlier tiles already cover the part before it)")


def _load3d_extent_hint(p, dst) -> str:
    """Why the im2col tile a load_data_3d builds does not fit its destination: which extension is larger
    than what the image and the destination allow."""
    k_all = p.channel_size * p.kh * p.kw
    if p.k_start + p.k_extension > k_all:
        return (f"k_start + k_extension = {p.k_start + p.k_extension} columns, but the image in L1 has only "
                f"channel_size x kh x kw = {k_all} columns of im2col: k_extension is the K of this step (what is "
                f"left of it at the last step), not more")
    return (f"the tile is m_extension x k_extension = {p.m_extension} x {p.k_extension} elements and the "
            f"destination holds {dst.size}: one of the extensions is larger than the tile the Mmad needs "
            f"(m_extension: this Mmad's positions rounded up to 16; k_extension: this K step's columns)")


def _check_span(t, nblk: int, blen: int, pitch: int, op: str, site, what: str) -> None:
    need = (nblk - 1) * pitch + blen
    if isinstance(t, LocalTensor):
        t.check_usable(op, site)
        if need > t.nbytes:
            raise OutOfBoundsError(
                f"{op}: {what} {t.name} holds {t.nbytes} B but the copy spans {need} B "
                f"({nblk} block(s) of {blen} B, {pitch} B apart)",
                hint="copy fewer or shorter blocks, or allocate a larger buffer",
                where=format_site(site), tensor=t.name)
    else:
        isz = t.dtype.itemsize
        lo = t.offset * isz
        total = t.buf.nbytes
        if lo < 0 or lo + need > total:
            raise OutOfBoundsError(
                f"GM out of bounds: {op} touches bytes [{lo}, {lo + need}) of '{t.name}' "
                f"({total} B = {t.buf.flat.size} {t.dtype.name}); {lo + need - total} B past the end",
                hint=_gm_past_end_hint(lo, total, nblk, blen, pitch),
                where=format_site(site), tensor=t.name, range=(lo, lo + need), size=total)


def _move(core, dst, src, nblk, blen, src_pitch, dst_pitch, route, op, site) -> None:
    """Copy ``nblk`` blocks of ``blen`` bytes; the common body of every DataCopy form."""
    pipe, path = route
    smem, dmem = path.split("->")
    to_gm = dmem == "GM"
    if core.check:
        vc = core.epoch(pipe)
        end_s = (nblk - 1) * src_pitch + blen
        end_d = (nblk - 1) * dst_pitch + blen
        touch_bytes(core, src, 0, end_s, False, pipe, vc, site, op, src_pitch, blen, nblk)
        touch_bytes(core, dst, 0, end_d, True, pipe, vc, site, atomic_op(core, op) if to_gm else op, dst_pitch,
                    blen, nblk)
    sbuf, sbase, _ = _raw(src)
    dbuf, dbase, _ = _raw(dst)
    d, s = _strided(dbuf, dbase, nblk, blen, dst_pitch), _strided(sbuf, sbase, nblk, blen, src_pitch)
    if to_gm:
        store(core, d, s, dst.dtype, site)
    else:
        np.copyto(d, s)
    total = nblk * blen
    cost = _route_cost(core, path, src, dst, nblk, blen, src_pitch, dst_pitch, total)
    core.issue(pipe, cost, op, total, site)
    core.add_bytes(path, total)


def _gm_offset(g: GlobalTensor) -> int:
    return g.offset * g.dtype.itemsize


def _route_cost(core, path, src, dst, nblk, blen, src_pitch, dst_pitch, total):
    cfg = core.cfg
    if path.startswith("GM"):  # GM DMAs are timed by the launch's L2 and HBM (npusim.memsys)
        return core.memsys.read(core, src, _gm_offset(src), nblk, blen, src_pitch if nblk > 1 else blen)
    if path.endswith("GM"):
        return core.memsys.write(core, dst, _gm_offset(dst), nblk, blen, dst_pitch if nblk > 1 else blen)
    if path == "UB->UB":
        return costs.vector_cycles(cfg, total, 1)
    rate = {"L1->UB": cfg.l1_to_ub_bytes_per_cycle, "L0C->UB": cfg.l0c_to_ub_bytes_per_cycle}[path]
    return costs.onchip_cycles(cfg, total, rate)


def _route(core, dst, src, op, site):
    smem, dmem = _mem(src), _mem(dst)
    route = _ROUTES.get((smem, dmem))
    if route is None or (smem == "L0C" and core.cfg.has_fixpipe):
        hint = _WRONG_ROUTE_HINT.get((smem, dmem), "")
        if smem == "L0C" and dmem == "UB":
            hint = f"{core.cfg.name} drains L0C with fixpipe (L0C -> GM); L0C -> UB exists on 'classic'"
        raise UsageError(f"{op} cannot move {smem} -> {dmem} (from {describe_tensor(src)} to "
                         f"{describe_tensor(dst)})",
                         hint=hint or f"DataCopy moves {', '.join(sorted(r[1] for r in _ROUTES.values()))}")
    if src.dtype != dst.dtype:
        local_t = dst if isinstance(dst, LocalTensor) else src
        other = src if local_t is dst else dst
        raise UsageError(f"{op}: source is {src.dtype.name} but destination is {dst.dtype.name} (from "
                         f"{describe_tensor(src)} to {describe_tensor(dst)}); DataCopy does not convert",
                         hint=f"allocate the local tensor as {other.dtype.name} (alloc_tensor(ns.{other.dtype.name})) "
                              f"and cast() in UB if you need {local_t.dtype.name}; fixpipe converts L0C results"
                         if isinstance(other, GlobalTensor) else
                         "copy between tensors of one dtype and cast() in UB (fixpipe converts L0C results)")
    for t, mem in ((src, smem), (dst, dmem)):
        if mem != "GM":
            check_align(core, t, _align_of(core, mem), op, site)
    return route


_FREE, _QUEUED = "free", "enqueued"


def _fast_copy(core, dst, src, count: int, site) -> bool:
    """The common case of data_copy, GM <-> UB or GM -> L1 contiguous and valid, in one tight function.
    Returns False (doing nothing) whenever anything is unusual: the general path then handles it, with
    its messages."""
    if type(src) is GlobalTensor and type(dst) is LocalTensor:
        g, loc, load = src, dst, True
    elif type(src) is LocalTensor and type(dst) is GlobalTensor and core.atomic is None:
        g, loc, load = dst, src, False
    else:
        return False
    mem = loc.slot.memory
    if mem.name == "UB":
        pipe, path = (MTE2, "GM->UB") if load else (MTE3, "UB->GM")
    elif mem.name == "L1" and load:
        pipe, path = MTE2, "GM->L1"
    else:
        return False
    cfg = core.cfg
    isz = g.dtype.itemsize
    nbytes = count * isz
    slot = loc.slot
    if (g.dtype != loc.dtype or nbytes % 32 or loc.addr % (cfg.ub_align_bytes if mem.name == "UB" else
                                                           cfg.l1_align_bytes)
            or g.offset < 0 or g.offset + count > g.buf.flat.size or count > g.size
            or slot.gen != loc.gen or slot.state == _FREE or slot.state == _QUEUED or count > loc.size):
        return False
    if core.check:
        vc = core.epoch(pipe)
        ep = vc[pipe]
        blk = core.block_idx
        glo = g.offset * isz
        g_w = not load
        g.buf.tracker.access(glo, glo + nbytes, g_w, blk, pipe, vc, ep, site, "data_copy", core.mode)
        mem.tracker.access(loc.addr, loc.addr + nbytes, load, blk, pipe, vc, ep, site, "data_copy", core.mode,
                           key=slot.addr)
    gv = g.buf.flat[g.offset:g.offset + count]
    lv = loc.view()[:count]
    if load:
        np.copyto(lv, gv)
    else:
        np.copyto(gv, lv)
    gm = core.memsys
    off = g.offset * isz
    cost = gm.read(core, g, off, 1, nbytes, nbytes) if load else \
        gm.write(core, g, off, 1, nbytes, nbytes)
    core.issue(pipe, cost, "data_copy", nbytes, site)
    core.path_bytes[path] = core.path_bytes.get(path, 0) + nbytes
    return True


def data_copy(dst, src, arg) -> None:
    """DataCopy. ``arg`` is an element count (contiguous), a :class:`DataCopyParams` (blocked/strided,
    32 B units), or an :class:`Nd2NzParams` (GM ND -> L1 NZ).

    Paths: GM->UB and GM->L1 on MTE2, UB->GM on MTE3, L1->UB on MTE1, UB->UB on V, and L0C->UB on V on
    cores without Fixpipe. A count form must move a multiple of 32 B: hardware silently truncates the
    rest, npusim reports it (see data_copy_pad for tails).
    """
    core = current()
    site = call_site()
    if type(arg) is int and arg > 0 and _fast_copy(core, dst, src, arg, site):
        return
    if isinstance(arg, Nd2NzParams):
        return _nd2nz(core, dst, src, arg, site)
    route = _route(core, dst, src, "data_copy", site)
    if isinstance(arg, DataCopyParams):
        p = arg
        if p.block_count < 1 or p.block_len < 1 or p.block_count > 4095 or p.src_stride < 0 or p.dst_stride < 0:
            raise UsageError(f"data_copy: DataCopyParams needs 1 <= block_count <= 4095, block_len >= 1 and "
                             f"gaps (src_stride, dst_stride) >= 0 (hardware strides are unsigned), got {p}",
                             hint="block_len and the strides count 32 B units; the strides are the gaps between "
                                  "blocks (not their pitch); split more than 4095 blocks into several copies")
        blen = p.block_len * 32
        sp, dp = (p.block_len + p.src_stride) * 32, (p.block_len + p.dst_stride) * 32
        _check_span(src, p.block_count, blen, sp, "data_copy", site, "source")
        _check_span(dst, p.block_count, blen, dp, "data_copy", site, "destination")
        return _move(core, dst, src, p.block_count, blen, sp, dp, route, "data_copy", site)
    count = check_count(arg, "data_copy")
    isz = src.dtype.itemsize
    nbytes = count * isz
    if nbytes % 32:
        report(AlignmentError(
            f"data_copy of {count} {src.dtype.name} elements = {nbytes} B, not a multiple of 32 B "
            f"({_mem(src)} -> {_mem(dst)}): real hardware silently drops the last {nbytes % 32} B",
            hint=f"copy a multiple of {32 // isz} elements, or use data_copy_pad for a tail of any length",
            where=format_site(site), count=count, nbytes=nbytes), core.mode)
        nbytes -= nbytes % 32  # what the hardware does when the error is only a warning
        count = nbytes // isz
        if not count:
            return
    for t, what in ((src, "source"), (dst, "destination")):
        if isinstance(t, GlobalTensor):
            t.check_range(0, count, "data_copy", site)
        else:
            t.check_usable("data_copy", site, 0, count)
    _move(core, dst, src, 1, nbytes, nbytes, nbytes, route, "data_copy", site)


def data_copy_pad(dst, src, params, pad_params: DataCopyPadExtParams | None = None) -> None:
    """DataCopyPad between GM and UB for lengths that are not a multiple of 32 B.

    ``params`` is an element count (one block) or a :class:`DataCopyExtParams` (``block_len`` in bytes).
    GM->UB: each UB block is padded up to 32 B, with ``pad_params.padding_value`` when ``is_pad``.
    UB->GM: only the valid bytes are written to GM.
    """
    core = current()
    site = call_site()
    smem, dmem = _mem(src), _mem(dst)
    if (smem, dmem) not in (("GM", "UB"), ("UB", "GM")):
        raise UsageError(f"data_copy_pad moves GM <-> UB, not {smem} -> {dmem} (from {describe_tensor(src)} to "
                         f"{describe_tensor(dst)})",
                         hint="a matrix goes GM -> L1 with data_copy(dst, src, Nd2NzParams(...)) (it pads to whole "
                              "fractals itself), other GM -> L1 data with data_copy and a count or DataCopyParams"
                         if dmem == "L1" else "use data_copy for this path")
    route = _route(core, dst, src, "data_copy_pad", site)
    isz = src.dtype.itemsize
    if isinstance(params, DataCopyParams):
        raise UsageError("data_copy_pad takes an element count or DataCopyExtParams (block_len in bytes), "
                         "not DataCopyParams (32 B units, for data_copy)",
                         hint="DataCopyExtParams(block_count, block_len_bytes, src_stride, dst_stride)")
    if not isinstance(params, DataCopyExtParams):
        params = DataCopyExtParams(1, check_count(params, "data_copy_pad") * isz, 0, 0)
    p = params
    pad = pad_params or DataCopyPadExtParams()
    if not (1 <= p.block_count <= 4095) or p.block_len < 1 or p.block_len % isz or p.src_stride < 0 or p.dst_stride < 0:
        raise UsageError(f"data_copy_pad: need 1 <= block_count <= 4095 and block_len a positive multiple "
                         f"of {isz} B ({src.dtype.name}); got {p}",
                         hint="DataCopyExtParams.block_len counts bytes (elements x itemsize), and its strides "
                              "are gaps >= 0")
    if pad.left_padding * isz > 32 or pad.right_padding * isz > 32:
        raise UsageError(f"data_copy_pad: left_padding and right_padding are at most 32 B each, got "
                         f"{pad.left_padding} and {pad.right_padding} {src.dtype.name} elements",
                         hint=f"pad at most {32 // isz} {src.dtype.name} elements on each side")
    if smem == "GM":
        ub_blk = -(-(pad.left_padding * isz + p.block_len + pad.right_padding * isz) // 32) * 32
        gm_pitch, ub_pitch = p.block_len + p.src_stride, ub_blk + p.dst_stride * 32
        _check_span(src, p.block_count, p.block_len, gm_pitch, "data_copy_pad", site, "source")
        _check_span(dst, p.block_count, ub_blk, ub_pitch, "data_copy_pad", site, "destination")
        pipe, path = route
        if core.check:
            vc = core.epoch(pipe)
            touch_bytes(core, src, 0, (p.block_count - 1) * gm_pitch + p.block_len, False, pipe, vc, site,
                        "data_copy_pad", gm_pitch, p.block_len, p.block_count)
            touch_bytes(core, dst, 0, (p.block_count - 1) * ub_pitch + ub_blk, True, pipe, vc, site,
                        "data_copy_pad", ub_pitch, ub_blk, p.block_count)
        sbuf, sbase, _ = _raw(src)
        dbuf, dbase, _ = _raw(dst)
        d = _strided(dbuf, dbase, p.block_count, ub_blk, ub_pitch).reshape(p.block_count, ub_blk)
        left = pad.left_padding * isz
        pad_value = pad.padding_value if pad.is_pad else core.__dict__.get("_pad_value")
        if pad_value is not None:   # is_pad's value, else the one set_pad_value set (SetPadValue)
            fill = np.full(ub_blk // isz, pad_value, dtype=dst.dtype).view(np.uint8)
            d[...] = fill
        d[:, left:left + p.block_len] = _strided(sbuf, sbase, p.block_count, p.block_len,
                                                 gm_pitch).reshape(p.block_count, p.block_len)
        cost = core.memsys.read(core, src, _gm_offset(src), p.block_count, p.block_len, gm_pitch)
    else:
        ub_blk = -(-p.block_len // 32) * 32
        ub_pitch, gm_pitch = ub_blk + p.src_stride * 32, p.block_len + p.dst_stride
        _check_span(src, p.block_count, ub_blk, ub_pitch, "data_copy_pad", site, "source")
        _check_span(dst, p.block_count, p.block_len, gm_pitch, "data_copy_pad", site, "destination")
        pipe, path = route
        if core.check:
            vc = core.epoch(pipe)
            touch_bytes(core, src, 0, (p.block_count - 1) * ub_pitch + p.block_len, False, pipe, vc, site,
                        "data_copy_pad", ub_pitch, p.block_len, p.block_count)
            touch_bytes(core, dst, 0, (p.block_count - 1) * gm_pitch + p.block_len, True, pipe, vc, site,
                        atomic_op(core, "data_copy_pad"), gm_pitch, p.block_len, p.block_count)
        sbuf, sbase, _ = _raw(src)
        dbuf, dbase, _ = _raw(dst)
        store(core, _strided(dbuf, dbase, p.block_count, p.block_len, gm_pitch),
              _strided(sbuf, sbase, p.block_count, p.block_len, ub_pitch), dst.dtype, site)
        cost = core.memsys.write(core, dst, _gm_offset(dst), p.block_count, p.block_len, gm_pitch)
    total = p.block_count * p.block_len
    core.issue(pipe, cost, "data_copy_pad", total, site)
    core.add_bytes(path, total)


def _nd2nz(core, dst, src, p: Nd2NzParams, site) -> None:
    op = "data_copy(nd2nz)"
    if not isinstance(src, GlobalTensor) or _mem(dst) != "L1":
        raise UsageError(f"{op}: ND->NZ copies GM -> L1 (A1/B1), not {_mem(src)} -> {_mem(dst)} (from "
                         f"{describe_tensor(src)} to {describe_tensor(dst)})",
                         hint="give Nd2NzParams only to a copy from a GlobalTensor into an A1/B1 tensor")
    if src.dtype != dst.dtype:
        raise UsageError(f"{op}: source is {src.dtype.name}, destination {dst.dtype.name} (from "
                         f"{describe_tensor(src)} to {describe_tensor(dst)})",
                         hint=f"allocate the L1 tensor as {src.dtype.name}: Nd2Nz does not convert")
    check_align(core, dst, core.cfg.l1_align_bytes, op, site)
    n, d = p.n_value, p.d_value
    if n < 1 or d < 1 or p.nd_num < 1:
        raise UsageError(f"{op}: n_value, d_value and nd_num must be >= 1, got {p}",
                         hint="n_value is the rows, d_value the columns of each ND matrix; skip empty tiles")
    if p.dst_nz_n_stride != 1:
        raise UsageError(f"{op}: dst_nz_n_stride {p.dst_nz_n_stride} is not modelled (only 1: rows follow each other)",
                         hint="Nd2NzParams{ndNum, nValue, dValue, srcNdMatrixStride, srcDValue, dstNzC0Stride, 1, ...}")
    isz = src.dtype.itemsize
    c0 = 32 // isz
    src_d = p.src_d_value or d
    n16 = -(-n // 16) * 16
    c0_stride = p.dst_nz_c0_stride or n16
    if c0_stride < n:
        raise UsageError(f"{op}: dst_nz_c0_stride ({c0_stride}) must be >= n_value ({n})",
                         hint=f"dst_nz_c0_stride is the rows of one C0 column in L1: leave it 0 (n rounded up to "
                              f"16 = {n16}) or give at least n_value")
    rows = min(n16, c0_stride)  # rows written per C0 column: the data, then zeros up to 16
    d1 = -(-d // c0)
    nd = p.nd_num
    mat_stride = p.dst_nz_matrix_stride or d1 * c0_stride * c0
    src_mat = p.src_nd_matrix_stride
    src.check_range(0, (nd - 1) * src_mat + (n - 1) * src_d + d, op, site)
    dst.check_usable(op, site, 0, (nd - 1) * mat_stride + (d1 - 1) * c0_stride * c0 + rows * c0, hint=lambda: (
        f"Nd2Nz pads each matrix to whole 16 x C0 fractals: n_value={n} rows become {rows}, d_value={d} columns "
        f"{d1 * c0} (C0 = {c0} for {src.dtype.name}), so each matrix takes {rows} x {d1 * c0} = "
        f"{rows * d1 * c0} elements in L1; size the buffer for ceil(n/16)*16 x ceil(d/C0)*C0 elements per matrix"))
    # the nd matrices' rows form one evenly strided run when the matrices follow each other in GM
    rows_uniform = nd == 1 or src_mat == n * src_d
    pipe = MTE2
    if core.check:
        vc = core.epoch(pipe)
        if rows_uniform:
            touch_bytes(core, src, 0, ((nd * n - 1) * src_d + d) * isz, False, pipe, vc, site, op,
                        src_d * isz, d * isz, nd * n)
        else:
            for i in range(nd):
                so = i * src_mat * isz
                touch_bytes(core, src, so, so + ((n - 1) * src_d + d) * isz, False, pipe, vc, site, op,
                            src_d * isz, d * isz, n)
        col = c0_stride * c0 * isz
        if c0_stride == rows and mat_stride == d1 * rows * c0:  # one contiguous block of fractals
            touch_bytes(core, dst, 0, nd * mat_stride * isz, True, pipe, vc, site, op)
        else:
            for i in range(nd):
                do = i * mat_stride * isz
                touch_bytes(core, dst, do, do + (d1 - 1) * col + rows * c0 * isz, True, pipe, vc, site, op,
                            col, rows * c0 * isz, d1)
    block = _view(src.buf.raw, src.offset * isz, (nd, n, d), (src_mat * isz, src_d * isz, isz), src.dtype)
    out = _view(dst.slot.memory.buf, dst.addr, (nd, d1, rows, c0),
                (mat_stride * isz, c0_stride * c0 * isz, c0 * isz, isz), src.dtype)
    if d % c0:  # a partial C0 column: build the zero-padded rows first
        padded = np.zeros((nd, n, d1 * c0), dtype=src.dtype)
        padded[:, :, :d] = block
        block = padded
    out[:, :, :n, :] = block.reshape(nd, n, d1, c0).transpose(0, 2, 1, 3)
    if n < rows:
        out[:, :, n:, :] = 0
    off = _gm_offset(src)
    if rows_uniform:
        cost = core.memsys.read(core, src, off, nd * n, d * isz, src_d * isz)
    else:
        cost = core.memsys.read_runs(core, src, [(off + i * src_mat * isz, n, d * isz, src_d * isz) for i in range(nd)])
    total = nd * n * d * isz
    core.issue(pipe, cost, op, total, site)
    core.add_bytes("GM->L1", total)


def load_data(dst: LocalTensor, src: LocalTensor, params: LoadData2DParams) -> None:
    """LoadData 2D: move whole 512 B fractals L1 -> L0A/L0B on MTE1 (see :class:`LoadData2DParams`)."""
    core = current()
    site = call_site()
    op = "load_data"
    local(src, op, "source", ("L1",))
    local(dst, op, "destination", ("L0A", "L0B"))
    if src.dtype != dst.dtype:
        raise UsageError(f"{op}: source is {src.dtype.name}, destination {dst.dtype.name} (from "
                         f"{describe_tensor(src)} to {describe_tensor(dst)})",
                         hint="LoadData does not convert: allocate the L0A/L0B tensor with the L1 tensor's dtype")
    p = params
    if p.repeat_times < 1 or p.repeat_times > 255 or p.src_stride < 0 or p.dst_gap < 0 or p.start_index < 0:
        raise UsageError(f"{op}: need 1 <= repeat_times <= 255 and non-negative strides, got {p}",
                         hint="repeat_times counts 512 B fractals: load more than 255 with several load_data "
                              "calls (start_index moves on by repeat_times * src_stride)")
    isz = src.dtype.itemsize
    if p.if_transpose and isz != 2:
        raise DtypeError(f"{op}: if_transpose works on 16x16 fp16/bf16 fractals, not {src.dtype.name}",
                         hint="store B as N x K (transposed) in GM so that NZ in L1 is already L0B's ZN "
                              "layout, or use FRACTAL_Z weights", where=format_site(site))
    check_align(core, dst, core.cfg.l0ab_align_bytes, op, site)
    check_align(core, src, 32, op, site)
    F = 512
    src_end = (p.start_index + (p.repeat_times - 1) * p.src_stride + 1) * F
    dst_pitch = (1 + p.dst_gap) * F
    dst_end = (p.repeat_times - 1) * dst_pitch + F
    src.check_usable(op, site)
    dst.check_usable(op, site)
    if src_end > src.nbytes or dst_end > dst.nbytes:
        bad, have, need = (src, src.nbytes, src_end) if src_end > src.nbytes else (dst, dst.nbytes, dst_end)
        raise OutOfBoundsError(f"{op}: {describe_tensor(bad)} has {have} B ({have // F} fractals; its buffer "
                               f"{bad.slot.nbytes} B) but the load needs {need} B ({-(-need // F)} fractals)",
                               hint="LoadData moves whole 512 B fractals (16 rows x 32 B): a matrix of m rows "
                                    "takes ceil(m/16) fractal rows, so size buffers for m rounded up to 16; "
                                    "check start_index, repeat_times and the strides",
                               where=format_site(site), tensor=bad.name)
    pipe = MTE1
    src_pitch = max(p.src_stride, 1) * F
    if core.check:
        vc = core.epoch(pipe)
        # a fractal of L1 is defined once the copy into L1 wrote some of it: its other rows are padding the
        # Cube computes on and the mmad's m, n, k leave out (initcheck at fractal grain)
        touch_bytes(core, src, p.start_index * F, src_end, False, pipe, vc, site, op,
                    src_pitch if p.src_stride else 0, F, p.repeat_times if p.src_stride else 1, grain=F)
        touch_bytes(core, dst, 0, dst_end, True, pipe, vc, site, op, dst_pitch, F, p.repeat_times)
    e = F // isz
    sv = _view(src.slot.memory.buf, src.addr + p.start_index * F, (p.repeat_times, e), (p.src_stride * F, isz),
               src.dtype)
    dv = _view(dst.slot.memory.buf, dst.addr, (p.repeat_times, e), (dst_pitch, isz), dst.dtype)
    if p.if_transpose:
        dv[...] = sv.reshape(p.repeat_times, 16, 16).transpose(0, 2, 1).reshape(p.repeat_times, e)
    else:
        dv[...] = sv
    dst.slot.memory.written()
    nbytes = p.repeat_times * F
    l0 = dst.slot.memory.name
    rate = core.cfg.l1_to_l0a_bytes_per_cycle if l0 == "L0A" else core.cfg.l1_to_l0b_bytes_per_cycle
    core.issue(pipe, costs.onchip_cycles(core.cfg, nbytes, rate), op, nbytes, site)
    core.add_bytes(f"L1->{l0}", nbytes)


_IMG2COL_CACHE: dict = {}


def _img2col_index(p: LoadData3DParams, c0: int):
    key = (p, c0)
    hit = _IMG2COL_CACHE.get(key)
    if hit is not None:
        return hit
    ho_n, wo_n = p.out_h, p.out_w
    m = np.arange(p.m_start, p.m_start + p.m_extension)[:, None]
    k = np.arange(p.k_start, p.k_start + p.k_extension)[None, :]
    ho, wo = m // max(wo_n, 1), m % max(wo_n, 1)
    ci = k % c0
    t = k // c0
    j = t % p.kw
    i = (t // p.kw) % p.kh
    c1 = t // (p.kw * p.kh)
    h = ho * p.stride_h - p.pad_top + i * p.dilation_h
    w = wo * p.stride_w - p.pad_left + j * p.dilation_w
    c1_n = p.channel_size // c0
    valid = (m < ho_n * wo_n) & (h >= 0) & (h < p.l1_h) & (w >= 0) & (w < p.l1_w) & (c1 < c1_n)
    idx = np.where(valid, ((c1 * p.l1_h + h) * p.l1_w + w) * c0 + ci, 0)
    if len(_IMG2COL_CACHE) > 256:
        _IMG2COL_CACHE.clear()
    _IMG2COL_CACHE[key] = (idx, valid)
    return idx, valid


def load_data_3d(dst: LocalTensor, src: LocalTensor, params: LoadData3DParams) -> None:
    """LoadData 3D (img2col): build ZZ fractals of the im2col matrix in L0A from an NC1HWC0 image in L1
    on MTE1 (see :class:`LoadData3DParams`)."""
    core = current()
    site = call_site()
    op = "load_data_3d"
    local(src, op, "source", ("L1",))
    local(dst, op, "destination", ("L0A",))
    if src.dtype != dst.dtype:
        raise UsageError(f"{op}: source is {src.dtype.name}, destination {dst.dtype.name} (from "
                         f"{describe_tensor(src)} to {describe_tensor(dst)})",
                         hint="img2col does not convert: allocate the L0A tensor with the L1 image's dtype")
    p = params
    isz = src.dtype.itemsize
    c0 = 32 // isz
    if p.m_extension % 16 or p.k_extension % c0 or p.k_start % c0 or p.m_extension < 16 or p.k_extension < c0:
        raise AlignmentError(f"{op}: m_extension must be a positive multiple of 16 and k_start/k_extension "
                             f"multiples of C0={c0} for {src.dtype.name}; got m_extension={p.m_extension}, "
                             f"k_start={p.k_start}, k_extension={p.k_extension}",
                             hint="round the tile up to whole fractals", where=format_site(site))
    if p.channel_size % c0 or p.channel_size < c0:
        raise AlignmentError(f"{op}: channel_size ({p.channel_size}) must be a multiple of C0={c0}: the L1 "
                             f"image is NC1HWC0 with channels padded to C0",
                             hint=f"give the padded channel count: ceil(channels / {c0}) * {c0}",
                             where=format_site(site))
    if min(p.l1_h, p.l1_w, p.kh, p.kw, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w) < 1 or min(
            p.pad_top, p.pad_bottom, p.pad_left, p.pad_right, p.m_start) < 0:
        raise UsageError(f"{op}: image size, kernel, strides and dilations must be >= 1 and pads/m_start >= 0, "
                         f"got {p}", hint="check the LoadData3DParams fields: sizes >= 1, paddings >= 0")
    if p.out_h < 1 or p.out_w < 1:
        raise UsageError(f"{op}: the window does not fit the padded image (output {p.out_h} x {p.out_w})",
                         hint="the kernel (with dilation) must fit l1_h + pad_top + pad_bottom rows and "
                              "l1_w + pad_left + pad_right columns")
    check_align(core, dst, core.cfg.l0ab_align_bytes, op, site)
    img = p.channel_size * p.l1_h * p.l1_w
    src.check_usable(op, site, 0, img)
    dst.check_usable(op, site, 0, p.m_extension * p.k_extension, hint=lambda: _load3d_extent_hint(p, dst))
    pipe = MTE1
    if core.check:
        vc = core.epoch(pipe)
        # the K columns (C1, Kh, Kw, C0) read only their C1 blocks of the image: a kernel may still be
        # filling the others (a staged conv loads its first band C1 block by C1 block)
        per_c1 = p.kh * p.kw * c0
        c1_lo, c1_hi = p.k_start // per_c1, min(-(-(p.k_start + p.k_extension) // per_c1), p.channel_size // c0)
        plane = p.l1_h * p.l1_w * c0 * isz
        touch_bytes(core, src, c1_lo * plane, max(c1_lo, c1_hi) * plane, False, pipe, vc, site, op)
        touch_bytes(core, dst, 0, p.m_extension * p.k_extension * isz, True, pipe, vc, site, op)
    idx, valid = _img2col_index(p, c0)
    flat = src.view()[:img]
    pad = np.asarray(p.pad_value, dtype=src.dtype)
    mat = np.where(valid, flat[idx], pad)
    m1, k1 = p.m_extension // 16, p.k_extension // c0
    dst.view()[:p.m_extension * p.k_extension].reshape(m1, k1, 16, c0)[...] = \
        mat.reshape(m1, 16, k1, c0).transpose(0, 2, 1, 3)
    dst.slot.memory.written()
    nbytes = p.m_extension * p.k_extension * isz
    core.issue(pipe, costs.onchip_cycles(core.cfg, nbytes, core.cfg.l1_to_l0a_bytes_per_cycle), op, nbytes, site)
    core.add_bytes("L1->L0A", nbytes)


def set_pad_value(value) -> None:
    """SetPadValue: the value data_copy_pad writes into the padding of blocks whose DataCopyPadExtParams
    has ``is_pad`` False (before it, the padding holds whatever UB held)."""
    core = current()
    core.scalar_issue()
    core.__dict__["_pad_value"] = value
