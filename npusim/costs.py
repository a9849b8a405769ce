"""The cost model: how many cycles every instruction takes. All timing formulas live here.

Each function gives its formula and the source of its constants (see ``docs/cost-model.md`` and
``HardwareConfig``). Results are deterministic integers-or-floats of core cycles; the pipes that run the
instructions, and the waits between pipes, are in :mod:`npusim.core`.
"""

from __future__ import annotations

import math

from .config import HardwareConfig


def burst_align(cfg: HardwareConfig, nbytes: int) -> int:
    """The alignment a GM burst needs to run at full rate: ``min(512 B, its length rounded up to a power
    of two >= 32 B)``. GM serves 128/256/512 B requests, best when each starts on its own size [S1, S4]."""
    a = max(cfg.gm_burst_granule_bytes, 1 << max(nbytes - 1, 0).bit_length())
    return min(a, max(cfg.gm_efficient_align_bytes, cfg.gm_burst_granule_bytes))


def gm_burst_cycles(cfg: HardwareConfig, gm_addr: int, nbytes: int, rate: float) -> float:
    """Cycles of one contiguous GM burst of ``nbytes`` at byte address ``gm_addr``:

    ``gm_burst_overhead_cycles + ceil(nbytes / 32) * 32 / (rate * eff)`` with ``eff = 1`` when
    ``gm_addr`` is a multiple of :func:`burst_align`, else ``gm_unaligned_efficiency`` (0.7) [S1, S4:
    GM requests are 128/256/512 B; 32 B-aligned traffic can drop to ~70 %].
    """
    g = cfg.gm_burst_granule_bytes
    moved = -(-nbytes // g) * g
    eff = 1.0 if gm_addr % burst_align(cfg, nbytes) == 0 else cfg.gm_unaligned_efficiency
    return cfg.gm_burst_overhead_cycles + moved / (rate * eff)


def gm_dma_cycles(cfg: HardwareConfig, bursts, rate: float) -> float:
    """Cycles of one GM DMA instruction (MTE2 GM->UB/L1, MTE3 UB->GM, FIX L0C->GM):

    ``gm_startup_cycles + sum(gm_burst_cycles(b) for b in bursts)``. ``bursts`` is an iterable of
    ``(gm_byte_address, nbytes)``; a strided copy has one burst per block, so short blocks pay the
    per-burst overhead and the 32 B granule many times. ``rate`` is :meth:`HardwareConfig.gm_rate`,
    capped by the path's own port where that is slower.
    """
    return cfg.gm_startup_cycles + sum(gm_burst_cycles(cfg, a, n, rate) for a, n in bursts)


def gm_dma_cycles_uniform(cfg: HardwareConfig, first_addr: int, count: int, nbytes: int,
                          stride_bytes: int, rate: float) -> float:
    """:func:`gm_dma_cycles` for ``count`` bursts of ``nbytes`` each, ``stride_bytes`` apart (the usual
    strided copy), computed without a Python loop over the bursts. Same formula; blocks that follow each
    other without a gap (``stride_bytes == nbytes``) are one contiguous burst. Equals
    ``fixed + weighted / rate`` of :func:`gm_dma_parts`."""
    fixed, weighted = gm_dma_parts(cfg, first_addr, count, nbytes, stride_bytes)
    return fixed + weighted / rate


def gm_dma_parts(cfg: HardwareConfig, first_addr: int, count: int, nbytes: int,
                 stride_bytes: int) -> tuple[float, float]:
    """The two parts of a GM DMA of ``count`` bursts of ``nbytes``, ``stride_bytes`` apart:
    ``fixed = gm_startup_cycles + bursts * gm_burst_overhead_cycles`` and ``weighted = sum over bursts of
    ceil(bytes / 32) * 32 / eff`` (bytes, each unaligned burst weighing 1 / 0.7 times its size). At a
    rate of ``r`` bytes per cycle the DMA takes ``fixed + weighted / r`` (:func:`gm_read_cycles`,
    :func:`gm_write_cycles`)."""
    if count <= 0:
        return float(cfg.gm_startup_cycles), 0.0
    g = cfg.gm_burst_granule_bytes
    if count == 1 or stride_bytes == nbytes:  # one contiguous burst (back-to-back blocks are one)
        nbytes *= count
        moved = -(-nbytes // g) * g
        aligned = first_addr % burst_align(cfg, nbytes) == 0
        return (cfg.gm_startup_cycles + cfg.gm_burst_overhead_cycles,
                moved if aligned else moved / cfg.gm_unaligned_efficiency)
    align = burst_align(cfg, nbytes)
    if stride_bytes % align == 0 or count == 1:
        n_aligned = count if first_addr % align == 0 else 0
    else:
        # addresses first + i*stride (mod align) cycle with period align / gcd(stride, align)
        period = align // math.gcd(stride_bytes % align, align)
        hits = sum(1 for i in range(min(period, count)) if (first_addr + i * stride_bytes) % align == 0)
        full, rest = divmod(count, period)
        n_aligned = hits * full + sum(1 for i in range(rest) if (first_addr + i * stride_bytes) % align == 0)
    moved = -(-nbytes // g) * g
    weighted = moved * (n_aligned + (count - n_aligned) / cfg.gm_unaligned_efficiency)
    return cfg.gm_startup_cycles + count * cfg.gm_burst_overhead_cycles, weighted


def gm_read_cycles(cfg: HardwareConfig, fixed: float, weighted: float, hit_fraction: float) -> float:
    """Cycles of a GM read (MTE2 GM->UB/L1) whose lines hit L2 for ``hit_fraction`` of them:
    ``fixed + weighted * (hit_fraction / l2_bytes_per_cycle + (1 - hit_fraction) / gm_port_bytes_per_cycle)``
    (see :func:`gm_dma_parts`): hits stream from L2 at 110 B/cycle [S5], the rest from HBM at the
    core's port rate. The missing lines also need the core's share of the HBM
    (:func:`hbm_share_bytes_per_cycle`)."""
    return fixed + weighted * (hit_fraction / cfg.l2_bytes_per_cycle
                               + (1.0 - hit_fraction) / cfg.gm_port_bytes_per_cycle)


def gm_write_cycles(cfg: HardwareConfig, fixed: float, weighted: float, rate: float | None = None) -> float:
    """Cycles of a GM write into L2: ``fixed + weighted / rate`` (see :func:`gm_dma_parts`), ``rate`` the
    path's: ``gm_port_bytes_per_cycle`` for MTE3 UB->GM [S6: UB->GM 64], ``fixpipe_bytes_per_cycle`` for
    Fixpipe L0C->GM [S6: L0C->GM (FIX) 256]. The write is done when its data is in L2 (write-back); its
    write-back to HBM takes the chip's HBM (:func:`hbm_share_bytes_per_cycle`) afterwards."""
    return fixed + weighted / (rate or cfg.gm_port_bytes_per_cycle)


def hbm_share_bytes_per_cycle(cfg: HardwareConfig, active_cores: int) -> float:
    """HBM bytes per cycle each of ``active_cores`` cores gets for its L2 misses and its writes together:
    an equal share of the chip's HBM, ``chip_gm_bytes_per_cycle / active_cores`` (``hbm_gb_per_s /
    clock_ghz`` for the chip [S4, S16]). One core alone is limited by its ports, not by this."""
    return cfg.chip_gm_bytes_per_cycle / max(1, active_cores)


def onchip_cycles(cfg: HardwareConfig, nbytes: int, rate: float) -> float:
    """Cycles of an on-chip move (MTE1 L1->L0A/L0B/UB, Fixpipe L0C->L1, L0C->UB):
    ``onchip_startup_cycles + nbytes / rate`` with the path's rate from ``HardwareConfig`` [S6]."""
    return cfg.onchip_startup_cycles + nbytes / rate


def cube_cycles(cfg: HardwareConfig, m: int, n: int, k: int, in_dtype: str) -> float:
    """Cycles of one Mmad: ``cube_startup_cycles + M' * N' * K' / cube_macs_per_cycle[dtype]``.

    M', N' are m, n rounded up to 16 and K' is k rounded up to K0 = 32 B / element size: the Cube works
    on whole fractals, so padding costs time [S1, S5: 16x16x16 fp16 per cycle, 16x32x16 int8, fp32 1/4].
    """
    k0 = 32 // _ITEMSIZE[in_dtype]
    padded = _ceil_to(m, 16) * _ceil_to(n, 16) * _ceil_to(k, k0)
    return cfg.cube_startup_cycles + padded / cfg.cube_macs_per_cycle[in_dtype]


def vector_cycles(cfg: HardwareConfig, count: int, itemsize: int, complex_op: bool = False) -> float:
    """Cycles of one vector instruction over ``count`` elements:

    ``vector_startup_cycles + repeats`` with ``repeats = ceil(count * itemsize / 256)`` (one 256 B
    repeat per cycle [S2]; ``itemsize`` is the widest operand). Complex ops (exp, ln, sqrt, div,
    reciprocal) take ``vector_complex_cycles_per_repeat * ceil(count / 64)`` instead, the same for fp16
    and fp32 [S2: Exp costs the same in half and float on A2].
    """
    if complex_op:
        return cfg.vector_startup_cycles + cfg.vector_complex_cycles_per_repeat * -(-count // 64)
    return cfg.vector_startup_cycles + -(-count * itemsize // cfg.vector_bytes_per_cycle)


def repeat_cycles(cfg: HardwareConfig, repeats: int, complex_op: bool = False) -> float:
    """Cycles of a vector instruction in its mask/repeat form: ``vector_startup_cycles + repeats`` (one
    256 B repeat per cycle whatever its mask selects: masked-off lanes still take the repeat [S2, 矢量计算
    通用说明]); complex ops (exp, ln, sqrt, rsqrt, div, ...) take ``vector_complex_cycles_per_repeat`` per
    64 lanes of each repeat, as in :func:`vector_cycles`."""
    if complex_op:
        per = cfg.vector_complex_cycles_per_repeat * (cfg.vector_bytes_per_cycle // 4 // 64)
        return cfg.vector_startup_cycles + per * repeats
    return cfg.vector_startup_cycles + repeats


def reduce_cycles(cfg: HardwareConfig, count: int, itemsize: int) -> float:
    """Cycles of ReduceMax/ReduceSum over ``count`` elements: a pass over the data, then a tree over the
    per-repeat partials: ``vector_startup_cycles + repeats + ceil(log2(repeats)) + lanes_log``, where
    ``repeats = ceil(count * itemsize / 256)`` and ``lanes_log = log2(256 / itemsize)`` (the last
    repeat folds its lanes). Chosen: the reduction algorithm of the hardware is not public."""
    repeats = -(-count * itemsize // cfg.vector_bytes_per_cycle)
    tree = math.ceil(math.log2(repeats)) if repeats > 1 else 0
    lanes = int(math.log2(cfg.vector_bytes_per_cycle // itemsize))
    return cfg.vector_startup_cycles + repeats + tree + lanes


def scalar_issue_cycles(cfg: HardwareConfig) -> float:
    """Scalar cycles to issue one instruction of any pipe: ``scalar_issue_cycles`` (chosen)."""
    return cfg.scalar_issue_cycles


def scalar_access_cycles(cfg: HardwareConfig) -> float:
    """A GetValue/SetValue through the scalar unit's data cache: ``scalar_access_cycles`` (chosen)."""
    return cfg.scalar_access_cycles


def _ceil_to(x: int, m: int) -> int:
    return -(-x // m) * m


_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "int8": 1, "int32": 4, "uint8": 1, "int16": 2}


def cross_core_flag_cycles(cfg: HardwareConfig) -> float:
    """Latency of a cross-core flag (CrossCoreSetFlag -> CrossCoreWaitFlag): ``cross_core_flag_cycles``
    (chosen: one GM access's start-up; the cores exchange data and signals through GM [S1])."""
    return cfg.cross_core_flag_cycles


def sync_all_cycles(cfg: HardwareConfig) -> float:
    """SyncAll after the last core has arrived: ``2 * cross_core_flag_cycles``, a set to every core and the
    wait for it to come back (chosen: SyncAll is built on the cross-core flags [S2]; no public latency)."""
    return 2 * cfg.cross_core_flag_cycles
