"""Host side of the convolution's epilogue (:class:`~npusim.conv.common.Epilogue`): the dequantisation
scales the fused drain reads, the separate ReLU launch when the ReLU is not fused, and :func:`chain`, which
puts such launches on one timeline. :mod:`npusim.conv.api` uses these; :mod:`npusim.conv.fusion` compares
fused against separate on top of both.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

import npusim as ns
from npusim.kernels.elementwise import relu as relu_kernel

from .common import round_up
from .geometry import ConvGeometry


def dequant_scales(deq_scale, g: ConvGeometry) -> tuple[np.ndarray, str]:
    """``deq_scale`` (a number, or an array of 1 or Cout values) -> (the fp32 array the kernel reads,
    ``"tensor"`` or ``"channel"``). Per-channel scales are padded with zeros to a multiple of 16 (whole
    16-channel blocks, as the L0C tile)."""
    s = np.asarray(deq_scale)
    if s.dtype.kind not in "fiu" or s.ndim > 1 or s.size not in (1, g.cout):
        raise ns.UsageError(f"conv2d: deq_scale must be a number or a 1-D float array of 1 value (per tensor) or "
                            f"{g.cout} values (one per output channel), got "
                            f"{s.dtype.name} array of shape {s.shape}")
    s = s.astype(np.float32).reshape(-1)
    if not np.isfinite(s).all():
        raise ns.UsageError("conv2d: deq_scale must be finite")
    if s.size == 1:
        return s.copy(), "tensor"
    out = np.zeros(round_up(g.cout, 16), np.float32)
    out[:g.cout] = s
    return out, "channel"


def relu_tile(total: int, itemsize: int, cfg: ns.HardwareConfig, block_dim: int = 1) -> int:
    """Tile of the separate ReLU kernel: the largest multiple of 512 B for which its two queues of two
    buffers fit in UB, and no larger than one block's share."""
    tile = cfg.ub_bytes // 4 // 512 * 512 // itemsize
    per_block = -(-total // block_dim)
    return max(256 // itemsize, min(tile, round_up(per_block * itemsize, 512) // itemsize))


def run_relu(y: np.ndarray, *, config=None, block_dim: int = 1, sanitize: str = "error",
             tile: int | None = None) -> tuple[np.ndarray, ns.Profile]:
    """The separate ReLU launch: ``max(y, 0)`` by the vector kernel, GM -> UB -> GM; returns the result
    (same shape) and the launch's Profile."""
    cfg = ns.get_config(config)
    flat = np.ascontiguousarray(y).reshape(-1)
    out = np.empty_like(flat)
    tile = tile or relu_tile(flat.size, flat.dtype.itemsize, cfg, block_dim)
    res = ns.launch(relu_kernel, block_dim, flat, out, flat.size, tile, 2, config=cfg, sanitize=sanitize)
    return res["y"].reshape(y.shape), res.profile


def chain(profiles: Sequence[ns.Profile], name: str | None = None) -> ns.Profile:
    """Launches that run one after the other, as ONE Profile: the second starts when the first ends (launch
    overheads excluded), so a timeline shows them in sequence, and busy cycles, bytes and work add up.
    Use launches with the same ``block_dim`` (the ratios divide by one number of cores)."""
    profs = list(profiles)
    if not profs:
        raise ns.UsageError("chain needs at least one Profile")
    if len(profs) == 1 and name is None:
        return profs[0]
    cfg = profs[0].config
    block_dim = max(p.block_dim for p in profs)
    starts, ends = [float("inf")] * block_dim, [0.0] * block_dim
    busy: dict[str, float] = {}
    paths: dict[str, int] = {}
    records: list[list[tuple]] = [[] for _ in range(block_dim)]
    occupancy: list[list[tuple]] = [[] for _ in range(block_dim)]
    reserved: dict[str, int] = {}
    block_reserved: list[dict[str, int]] = [{} for _ in range(block_dim)]
    t0 = 0.0
    for p in profs:
        for b in range(p.block_dim):
            starts[b] = min(starts[b], t0 + p.block_start_cycles[b])
            ends[b] = max(ends[b], t0 + p.block_end_cycles[b])
            for mem, v in (p.block_reserved_bytes[b] if b < len(p.block_reserved_bytes) else {}).items():
                block_reserved[b][mem] = max(block_reserved[b].get(mem, 0), v)
        for b, recs in enumerate(p.block_records):   # (pipe, start, end, op, nbytes, site)
            records[b] += [(r[0], r[1] + t0, r[2] + t0, *r[3:]) for r in recs]
        for b, evs in enumerate(p.block_occupancy):  # (time, memory, +/- bytes)
            occupancy[b] += [(e[0] + t0, *e[1:]) for e in evs]
        for k, v in p.pipe_busy_cycles.items():
            busy[k] = busy.get(k, 0.0) + v
        for k, v in p.path_bytes.items():
            paths[k] = paths.get(k, 0) + v
        for mem, v in p.reserved_bytes.items():
            reserved[mem] = max(reserved.get(mem, 0), v)
        t0 += p.total_cycles
    starts = [s if s != float("inf") else 0.0 for s in starts]
    return ns.Profile(
        kernel=name or " + ".join(p.kernel for p in profs), config=cfg, block_dim=block_dim, total_cycles=t0,
        block_start_cycles=starts, block_end_cycles=ends, pipe_busy_cycles=busy, path_bytes=paths,
        cube_macs=sum(p.cube_macs for p in profs), cube_ideal_cycles=sum(p.cube_ideal_cycles for p in profs),
        cube_dtype=next((p.cube_dtype for p in profs if p.cube_dtype), None),
        vector_ops=sum(p.vector_ops for p in profs), vector_ideal_cycles=sum(p.vector_ideal_cycles for p in profs),
        block_records=records, block_occupancy=occupancy, reserved_bytes=reserved,
        block_reserved_bytes=block_reserved,
        **{f: sum(getattr(p, f) for p in profs) for f in ("issued_macs", "algorithmic_macs", "l2_hit_bytes",
                                                          "l2_miss_bytes", "hbm_read_bytes", "hbm_write_bytes")})


__all__ = ["dequant_scales", "relu_tile", "run_relu", "chain"]
