"""Fixpipe (A2, PIPE_FIX): L0C (NZ) -> GM (ND), with dequantisation, a cast and ReLU on the way [S1, S2]."""

from __future__ import annotations

import numpy as np

from ..chipsync import atomic_op, store
from ..core import current
from ..dtypes import NAMES
from ..errors import DtypeError, UsageError
from ..numerics import RoundMode, cast
from ..params import CO2Layout, FixpipeParams, FixpipeParamsV220, QuantMode
from ..pipes import Pipe
from ..sanitizer import call_site, describe_tensor, format_site
from ..tensor import GlobalTensor, LocalTensor
from ._access import local, touch_bytes
from .datamove import _gm_offset, _view

FIX = int(Pipe.FIX)


def fixpipe(dst: GlobalTensor, src: LocalTensor, params, config: CO2Layout = CO2Layout.ROW_MAJOR) -> None:
    """Fixpipe (A2, PIPE_FIX): drain an m x n NZ result from L0C to ND rows in GM, with an optional
    per-tensor/per-channel dequant scale, a cast to ``dst``'s dtype (round to nearest even) and ReLU.

    ``params``: :class:`FixpipeParams` (npusim's keywords) or Ascend C's :class:`FixpipeParamsV220`
    (``n_size, m_size, src_stride, dst_stride, relu_en, quant_pre, deq_scalar, nd_num, ...``), whose
    ``nd_num`` matrices are drained one after another. ``config``: ``CFG_ROW_MAJOR`` (ND, the default);
    ``CFG_NZ`` output is not modelled."""
    if config is not CO2Layout.ROW_MAJOR:
        raise UsageError(f"fixpipe: only CFG_ROW_MAJOR (NZ -> ND) output is modelled, not {config!r}",
                         hint="drain to ND rows: fixpipe(dst, src, params) or fixpipe(dst, src, params, CFG_ROW_MAJOR)")
    if isinstance(params, FixpipeParamsV220):
        v = params
        if v.nd_num < 1:
            raise UsageError(f"fixpipe: nd_num must be >= 1, got {v.nd_num}", hint="nd_num counts the NZ matrices")
        scale = v.deq_scalar if v.quant_pre in (QuantMode.DEQF16,) else None
        one = FixpipeParams(v.m_size, v.n_size, v.src_stride or None, v.dst_stride or None, bool(v.relu_en), scale)
        for i in range(v.nd_num):   # one ND matrix after another (one instruction each here)
            _fixpipe(dst[i * v.dst_nd_stride:] if i else dst, src[i * v.src_nd_stride * 256:] if i else src, one)
        return
    if not isinstance(params, FixpipeParams):
        raise UsageError(f"fixpipe: params must be FixpipeParams or FixpipeParamsV220, not {params!r}",
                         hint="fixpipe(c_gm, c_l0c, FixpipeParamsV220(n, m, ceil(m/16)*16, n)) or "
                              "FixpipeParams(m, n, dst_stride=row_length)")
    _fixpipe(dst, src, params)


def _fixpipe(dst, src, params: FixpipeParams) -> None:
    core = current()
    site = call_site()
    op = "fixpipe"
    if not core.cfg.has_fixpipe:
        raise UsageError(f"{op}: the '{core.cfg.name}' core has no Fixpipe",
                         hint="move L0C -> UB with data_copy(ub_tensor, l0c_tensor, count) on the vector pipe, "
                              "then UB -> GM")
    local(src, op, "source", ("L0C",))
    if not isinstance(dst, GlobalTensor):
        raise UsageError(f"{op}: destination must be a GlobalTensor (L0C -> GM), not "
                         f"{describe_tensor(dst) if isinstance(dst, LocalTensor) else type(dst).__name__}",
                         hint="fixpipe(c_gm[offset:], c_l0c, FixpipeParams(m, n, dst_stride=row_length))")
    p = params
    m, n = p.m, p.n
    if m < 1 or n < 1:
        raise UsageError(f"{op}: m and n must be >= 1, got m={m}, n={n}",
                         hint="skip the drain of an empty tile")
    src_m = p.src_stride or -(-m // 16) * 16
    if src_m % 16 or src_m < m:
        raise UsageError(f"{op}: src_stride ({src_m}) must be a multiple of 16 and >= m ({m})",
                         hint="src_stride is the rows of the NZ tile in L0C (m rounded up to 16); leave it 0")
    dst_stride = p.dst_stride or n
    n1 = -(-n // 16)
    sdt, ddt = NAMES[src.dtype], NAMES[dst.dtype]
    if sdt == "float32" and ddt not in ("float16", "bfloat16", "float32"):
        raise DtypeError(f"{op}: float32 results convert to float16, bfloat16 or float32, not {ddt} (GM "
                         f"'{dst.name}')", hint="pass a float16, bfloat16 or float32 output array",
                         where=format_site(site))
    if sdt == "int32" and ddt not in ("float16", "int32", "float32", "bfloat16"):
        raise DtypeError(f"{op}: int32 results convert to float16/bfloat16/float32 (with deq_scale) or stay "
                         f"int32, not {ddt} (GM '{dst.name}')",
                         hint="pass an int32 output array, or a float one with FixpipeParams(deq_scale=...)",
                         where=format_site(site))
    if sdt == "float16" and ddt != "float16":
        raise DtypeError(f"{op}: an fp16 accumulator drains as float16 only, not {ddt} (GM '{dst.name}')",
                         hint="pass a float16 output array, or accumulate in float32", where=format_site(site))
    src.check_usable(op, site, 0, n1 * src_m * 16)
    osz = dst.dtype.itemsize
    dst.check_range(0, (m - 1) * dst_stride + n, op, site)
    pipe = FIX
    scale = p.deq_scale
    if isinstance(scale, LocalTensor):
        local(scale, op, "deq_scale", ("L1",))
        scale.check_usable(op, site, 0, n)
        if NAMES[scale.dtype] != "float32":
            raise DtypeError(f"{op}: deq_scale must be float32, not {describe_tensor(scale)}",
                             hint="copy the scales into an L1 tensor allocated as float32",
                             where=format_site(site))
    if core.check:
        vc = core.epoch(pipe)
        touch_bytes(core, src, 0, n1 * src_m * 16 * src.dtype.itemsize, False, pipe, vc, site, op)
        if isinstance(scale, LocalTensor):
            touch_bytes(core, scale, 0, n * 4, False, pipe, vc, site, op)
        touch_bytes(core, dst, 0, ((m - 1) * dst_stride + n) * osz, True, pipe, vc, site, atomic_op(core, op),
                    dst_stride * osz, n * osz, m)
    nz = src.view()[:n1 * src_m * 16].reshape(n1, src_m, 16)
    res = nz.transpose(1, 0, 2).reshape(src_m, n1 * 16)[:m, :n]
    if scale is not None:
        sv = scale.view()[:n] if isinstance(scale, LocalTensor) else np.float32(scale)
        res = (res.astype(np.float64) * sv).astype(np.float32)
    if p.relu:
        res = np.maximum(res, res.dtype.type(0))
    out = cast(res, dst.dtype, RoundMode.CAST_RINT) if res.dtype != dst.dtype else res
    store(core, _view(dst.buf.raw, dst.offset * osz, (m, n), (dst_stride * osz, osz), dst.dtype), out, dst.dtype,
          site)
    l0c_bytes = src_m * n1 * 16 * src.dtype.itemsize
    cfg = core.cfg
    cost = core.memsys.write(core, dst, _gm_offset(dst), m, n * osz, dst_stride * osz,
                             floor=cfg.gm_startup_cycles + l0c_bytes / cfg.fixpipe_bytes_per_cycle,
                             rate=cfg.fixpipe_bytes_per_cycle)
    core.issue(pipe, cost, op + ("+relu" if p.relu else ""), m * n * osz, site)
    core.add_bytes("L0C->GM", m * n * osz)
