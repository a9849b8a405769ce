"""The matmul's TilingData and its host tiling function, as Ascend's Matmul tiling describes a kernel.

:class:`MatmulTiling` holds, in elements:

- ``base_m x base_n x base_k``: one Mmad (baseM/baseN/baseK), an L0A tile ``base_m x base_k``, an L0B
  tile ``base_k x base_n`` and an fp32 accumulator ``base_m x base_n`` in L0C;
- ``step_ka`` / ``step_kb``: how many ``base_k`` steps of A / B one GM->L1 copy brings (stepKa/stepKb):
  fewer, larger DMAs;
- ``step_n``: base blocks side by side in N that share each A tile (stepN): one A tile in L1 and L0A
  feeds ``step_n`` Mmads, each into its own accumulator;
- ``depth_a1`` / ``depth_b1``: L1 buffers for A / B tiles (depthA1/depthB1): 2 double-buffers; when
  ``depth_a1`` holds every A tile of the K loop, those stay in L1 while the core walks along N;
- ``buffer_num`` (L0A/L0B) and ``l0c_buffers``: 2 double-buffers;
- ``single_core_m x single_core_n`` (singleCoreM/singleCoreN): the block of C each core computes, a
  grid over the output; 0 means output tiles dealt round-robin to the blocks.

:func:`choose_matmul_tiling` picks all of them for a shape and a chip (``ops.call("matmul")`` does, on
every new shape); :func:`estimate_matmul_cycles` is the cost model it ranks candidates with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import numpy as np

import npusim as ns

from .. import costs

KB = 1024


def _up(v: int, m: int) -> int:
    return -(-v // m) * m


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class MatmulTiling:
    """Block sizes (elements) and buffer counts of :func:`npusim.kernels.matmul.matmul` (see the module
    docstring). The defaults are the simple kernel: one base block per output tile, one K step per copy."""

    base_m: int = 64
    base_n: int = 64
    base_k: int = 64
    buffer_num: int = 2
    step_ka: int = 1
    step_kb: int = 1
    step_n: int = 1
    depth_a1: int = 0
    """0: ``buffer_num`` buffers, A tiles streamed; given: L1 keeps up to this many A tiles, all of the K
    loop when they fit (see :meth:`a_resident`)."""
    depth_b1: int = 0
    """0: ``buffer_num``."""
    l0c_buffers: int = 0
    """0: ``max(buffer_num, step_n)``."""
    single_core_m: int = 0
    single_core_n: int = 0
    stagger_k: bool = False
    """Cores that share A rows or B columns start their K loops at different K (by their place in the
    grid), so they do not ask L2 for the same lines at the same moment: one fetches a line from HBM, the
    others find it in L2 later (cores hitting the same 512 B lines at once are serialised [S4])."""

    # --- derived --------------------------------------------------------------------------------------
    @property
    def a1(self) -> int:
        return self.depth_a1 or self.buffer_num

    @property
    def b1(self) -> int:
        return self.depth_b1 or self.buffer_num

    @property
    def l0c(self) -> int:
        return self.l0c_buffers or max(self.buffer_num, self.step_n)

    def a_resident(self, k: int) -> bool:
        """Whether every A tile of the K loop stays in L1 across the N loop: ``depth_a1`` was given and
        holds them all."""
        return bool(self.depth_a1) and _cdiv(max(k, 1), self.step_ka * self.base_k) <= self.depth_a1

    def regions(self, m: int, n: int) -> list[tuple[int, int, int, int, int]]:
        """The blocks of C the cores take, ``(row, rows, col, cols, place)``: the single_core grid, else
        one per output tile group (``base_m x step_n * base_n``); ``place`` = grid row + grid column."""
        rm = self.single_core_m or self.base_m
        rn = self.single_core_n or self.base_n * self.step_n
        return [(i, min(rm, m - i), j, min(rn, n - j), i // rm + j // rn)
                for i in range(0, m, rm) for j in range(0, n, rn)]

    def k_order(self, k: int, place: int) -> list[int]:
        """The K steps of a region, in the order it takes them: from 0, or with ``stagger_k`` rotated by
        ``place`` whole copies of A and B (the copies stay aligned)."""
        steps = list(range(0, k, self.base_k))
        if not self.stagger_k:
            return steps
        unit = math.lcm(self.step_ka, self.step_kb)          # in K steps
        units = _cdiv(len(steps), unit)
        first = (place % units) * unit
        return steps[first:] + steps[:first]

    def buffers(self, k: int, in_dtype, out_dtype, cfg: ns.HardwareConfig) -> dict[str, int]:
        """Bytes each on-chip memory needs (what :meth:`check` compares with the config)."""
        isz = np.dtype(in_dtype).itemsize
        k0 = 32 // isz
        m16, n16 = _up(self.base_m, 16), _up(self.base_n, 16)
        bkk = _up(self.base_k, k0)
        ka = _up(min(self.step_ka * self.base_k, max(k, 1)), k0)
        kb = _up(min(self.step_kb * self.base_k, max(k, 1)), 16 if isz == 2 else k0)
        gw16 = _up(self.step_n * self.base_n, 16)
        acc = 4   # fp32 or int32 accumulators (an fp16 one, lab 05's, needs less)
        need = {"L1": self.a1 * m16 * ka * isz + self.b1 * kb * gw16 * isz,
                "L0A": self.buffer_num * m16 * bkk * isz,
                "L0B": self.buffer_num * self.step_n * bkk * n16 * isz,
                "L0C": self.l0c * m16 * n16 * acc}
        if not cfg.has_fixpipe:
            need["UB"] = m16 * n16 * (acc + np.dtype(out_dtype).itemsize)
        return need

    def check(self, cfg: ns.HardwareConfig, in_dtype, out_dtype, k: int | None = None) -> None:
        """Raise a UsageError (illegal sizes) or CapacityError (does not fit) before launching."""
        isz = np.dtype(in_dtype).itemsize
        k0 = 32 // isz
        bad = [f"{f}={getattr(self, f)} must be >= 1" for f in ("base_m", "base_n", "base_k", "buffer_num",
                                                               "step_ka", "step_kb", "step_n")
               if getattr(self, f) < 1]
        bad += [f"{f}={getattr(self, f)} must be >= 0" for f in ("depth_a1", "depth_b1", "l0c_buffers",
                                                                "single_core_m", "single_core_n")
                if getattr(self, f) < 0]
        if (self.step_ka > 1 or self.step_kb > 1) and self.base_k % k0:
            bad.append(f"base_k={self.base_k} must be a multiple of K0={k0} when several K steps share a copy "
                       f"(step_ka/step_kb > 1)")
        if self.step_n > 1 and self.base_n % 16:
            bad.append(f"base_n={self.base_n} must be a multiple of 16 when base blocks share an A tile (step_n > 1)")
        if self.l0c < self.step_n:
            bad.append(f"l0c_buffers={self.l0c} cannot hold the {self.step_n} accumulators of step_n={self.step_n}")
        for f, unit in (("single_core_m", self.base_m), ("single_core_n", self.base_n * self.step_n)):
            v = getattr(self, f)
            if v and v % unit:
                bad.append(f"{f}={v} must be a multiple of {unit}")
        if max(self.base_m, self.base_n, self.base_k) > 4095:
            bad.append("base_m, base_n and base_k must be <= 4095 (Mmad's m, n, k are 12-bit)")
        if bad:
            raise ns.UsageError(f"invalid matmul tiling {self.short()}: " + "; ".join(bad))
        for mem, b in self.buffers(k if k is not None else self.step_ka * self.base_k, in_dtype, out_dtype,
                                   cfg).items():
            if b > cfg.memory_bytes(mem):
                raise ns.CapacityError(
                    f"matmul tiling {self.short()} needs {b} B of {mem}, which has {cfg.memory_bytes(mem)} B",
                    hint="use smaller base blocks, fewer K steps per copy (step_ka/step_kb) or fewer buffers",
                    memory=mem, requested=b)

    def __repr__(self) -> str:
        """The four base fields, then only the fields that differ from their defaults."""
        extra = [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)[4:] if getattr(self, f.name) != f.default]
        return (f"MatmulTiling(base_m={self.base_m}, base_n={self.base_n}, base_k={self.base_k}, "
                f"buffer_num={self.buffer_num}" + "".join(", " + e for e in extra) + ")")

    def short(self) -> str:
        s = f"{self.base_m}x{self.base_n}x{self.base_k}"
        extra = [f"{f}={getattr(self, f)}" for f in ("step_ka", "step_kb", "step_n") if getattr(self, f) != 1]
        extra += [f"{f}={getattr(self, f)}" for f in ("depth_a1", "depth_b1", "l0c_buffers", "single_core_m",
                                                      "single_core_n", "stagger_k") if getattr(self, f)]
        return s + f" x{self.buffer_num}" + (" " + " ".join(extra) if extra else "")


def estimate_matmul_cycles(t: MatmulTiling, m: int, n: int, k: int, in_dtype, cfg: ns.HardwareConfig,
                           block_dim: int, b_packed: bool = False) -> float:
    """Predicted kernel cycles of a tiling, from the cost model (no simulation).

    The busiest core's output groups times the time of one group: the slowest of its MTE2 copies (A
    and B tiles, those re-read served by L2), its MTE1 splits and its Mmads, plus, with one L0C buffer
    per accumulator, the Fixpipe drain the next group waits for. L2 hits: every line after its first read
    by the chip."""
    isz = np.dtype(in_dtype).itemsize
    k0 = 32 // isz
    regions = t.regions(m, n)
    cores = min(block_dim, cfg.num_cores)
    per_core = [0] * cores
    for r, (_, rm, _, rn, _) in enumerate(regions):
        per_core[r % cores] += _cdiv(rm, t.base_m) * _cdiv(rn, t.base_n * t.step_n)
    groups = max(per_core)
    tm, gw = min(t.base_m, m), min(t.base_n * t.step_n, n)
    tn = min(t.base_n, n)
    steps = _cdiv(k, t.base_k)
    ka, kb = min(t.step_ka * t.base_k, k), min(t.step_kb * t.base_k, k)
    # L2 hit fraction of the reads: each line is fetched once by the chip, re-read by the other groups
    total_read = sum(per_core) * (tm * k + k * gw) * isz
    hit = max(0.0, 1.0 - (m * k + k * n) * isz / max(total_read, 1))
    a_f, a_w = costs.gm_dma_parts(cfg, 0, tm, ka * isz, k * isz)
    if b_packed:
        b_f, b_w = costs.gm_dma_parts(cfg, 0, _cdiv(kb, k0), _cdiv(gw, 16) * 512, _cdiv(n, 16) * 512)
    else:
        b_f, b_w = costs.gm_dma_parts(cfg, 0, kb, gw * isz, n * isz)
    a_copies = 0 if t.a_resident(k) else _cdiv(k, ka)
    mte2 = a_copies * costs.gm_read_cycles(cfg, a_f, a_w, hit) + _cdiv(k, kb) * costs.gm_read_cycles(cfg, b_f, b_w, hit)
    frac_a, frac_b = _up(tm, 16) * _up(t.base_k, k0) * isz, _up(t.base_k, k0) * _up(tn, 16) * isz
    mte1 = steps * (costs.onchip_cycles(cfg, frac_a, cfg.l1_to_l0a_bytes_per_cycle)
                    + t.step_n * costs.onchip_cycles(cfg, frac_b, cfg.l1_to_l0b_bytes_per_cycle))
    dt = np.dtype(in_dtype).name
    cube = steps * t.step_n * costs.cube_cycles(cfg, tm, tn, t.base_k, dt if dt in cfg.cube_macs_per_cycle else "float16")
    drain = costs.gm_dma_cycles_uniform(cfg, 0, tm, tn * 4, n * 4, cfg.fixpipe_bytes_per_cycle) * t.step_n
    stall = drain if t.l0c < 2 * t.step_n else 0.0
    group = max(mte2, mte1, cube + stall)
    first = costs.gm_read_cycles(cfg, a_f, a_w, 0.0) + costs.gm_read_cycles(cfg, b_f, b_w, 0.0)  # cold start
    if t.a_resident(k):   # each row of groups first loads its A tiles
        rows = _cdiv(groups, max(1, _cdiv(t.single_core_n or gw, gw)))
        first += rows * _cdiv(k, ka) * costs.gm_read_cycles(cfg, a_f, a_w, 0.0)
    return first + groups * group + drain


def _grid(base: MatmulTiling, m: int, n: int, cores: int) -> MatmulTiling:
    """``base`` with the single_core grid of at most ``cores`` regions (whole output groups) that gives the
    busiest core the fewest groups; ties: more regions (the work spread over more cores), then the
    squarest (the least A and B per core)."""
    gm_units, gn_units = _cdiv(m, base.base_m), _cdiv(n, base.base_n * base.step_n)
    best, key = base, None
    for gm in range(1, min(cores, gm_units) + 1):
        for gn in range(1, min(cores // gm, gn_units) + 1):
            rm, rn = _cdiv(gm_units, gm), _cdiv(gn_units, gn)
            k = (rm * rn, -gm * gn, rm * base.base_m + rn * base.base_n * base.step_n)
            if key is None or k < key:
                key = k
                best = replace(base, single_core_m=rm * base.base_m, single_core_n=rn * base.base_n * base.step_n,
                               stagger_k=gm * gn > 1)
    return best


def choose_matmul_tiling(m: int, n: int, k: int, in_dtype, cfg: ns.HardwareConfig,
                         b_packed: bool = False) -> tuple[MatmulTiling, int]:
    """The host tiling: base blocks, K steps per copy, L1/L0 buffers and the core grid for ``m x n x k``
    on ``cfg``; returns the tiling and the block_dim (one block per region of the grid).

    Candidates follow Ascend's Matmul tiling: 128 x 256 base blocks (one fp32 accumulator fills L0C), or
    128 x 128 and smaller with double-buffered accumulators (and A kept in L1 across N when K is short),
    each shrunk to small matrices; base_k 64 to 256; 1 to 8 K steps per copy of A and B. Each gets the
    single_core grid of up to ``num_cores`` regions that balances the cores best; the fastest by
    :func:`estimate_matmul_cycles` wins (ties: the earlier candidate)."""
    dt = np.dtype(in_dtype)
    isz = dt.itemsize
    k0 = 32 // isz
    if min(m, n, k) < 1:
        raise ns.UsageError(f"matmul tiling needs m, n, k >= 1, got {m} x {n} x {k}",
                            hint="an empty matmul has nothing to launch: ops.call('matmul') returns zeros")
    m16, n16, kk0 = _up(m, 16), _up(n, 16), _up(k, k0)
    best, best_est = None, math.inf
    grids: dict[tuple, MatmulTiling] = {}
    for bm, bn, l0c in ((128, 256, 1), (128, 128, 2), (64, 128, 2), (64, 64, 2), (32, 32, 2), (16, 16, 2)):
        bm, bn = min(bm, m16), min(bn, n16)
        for bk in dict.fromkeys(min(_up(v, k0), kk0) for v in (64, 128, 256)):
            for ska, skb in ((8, 4), (4, 4), (2, 2), (1, 1)):
                t = MatmulTiling(bm, bn, bk, 2, step_ka=ska, step_kb=skb, l0c_buffers=l0c)
                chunks = _cdiv(k, ska * bk)
                for base in (t, replace(t, depth_a1=max(2, chunks))) if chunks <= 8 else (t,):
                    try:
                        base.check(cfg, dt, np.float32, k)
                    except (ns.CapacityError, ns.UsageError):
                        continue
                    gkey = (bm, bn, base.step_n)
                    if gkey not in grids:
                        grids[gkey] = _grid(base, m, n, cfg.num_cores)
                    g = grids[gkey]
                    cand = replace(base, single_core_m=g.single_core_m, single_core_n=g.single_core_n,
                                   stagger_k=g.stagger_k)
                    block_dim = min(cfg.num_cores, len(cand.regions(m, n)))
                    est = estimate_matmul_cycles(cand, m, n, k, dt, cfg, block_dim, b_packed)
                    if est < best_est * (1 - 1e-9):
                        best, best_est = (cand, block_dim), est
    if best is None:
        raise ns.CapacityError(f"no matmul tiling of {m} x {n} x {k} ({dt.name}) fits '{cfg.name}'",
                               hint="this is a bug of the host tiling: every shape should have one")
    return best
