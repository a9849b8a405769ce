"""GM as the DMAs of a launch see it: the shared L2 (:mod:`npusim.l2`) in front of one HBM.

Every GM DMA instruction (MTE2 reads, MTE3 and Fixpipe writes) is timed here when its pipe starts it:

- a read looks its lines up in L2; hits stream at ``l2_bytes_per_cycle``, misses and waits at the core's
  ``gm_port_bytes_per_cycle`` (:func:`npusim.costs.gm_read_cycles`); the lines it fetches (whole
  ``l2_line_bytes`` lines) also need HBM time, and the read ends no earlier than that;
- a write ends when its data is in L2 (write-back with allocate, :func:`npusim.costs.gm_write_cycles`);
  its bytes are written back to HBM in the background, ahead of the core's later misses, and the launch
  ends when the last of them is in HBM (``drained``).

The chip's HBM moves ``chip_gm_bytes_per_cycle`` for all cores, reads and writes together
(:class:`HbmBudget`): per :data:`WINDOW` cycles, first come, first served, each DMA spreading its HBM bytes
over its own transfer. The launch presents the DMAs of its cores in simulated time order
(:mod:`npusim.interleave`), so first come is fair between streaming cores and lets a core that fetches
data the others share go at its port's pace while the HBM has room. Measured against equal static
shares and against serial simulation on the 8192 x 8192 Add and a 2048^3 matmul: docs/cost-model.md.

When three GM pipes per active core at their ports cannot fill half the HBM (one or two cores on
``a2``), DMAs within a port's rate skip the books: that bandwidth is set aside for them.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from . import costs
from .config import HardwareConfig
from .l2 import L2Cache, line_span

WINDOW = 64
"""Cycles per HBM accounting window (chosen): within a window the bytes are not spread in time, so a
launch can beat ``hbm_bytes / chip_gm_bytes_per_cycle`` by at most one window."""


class HbmBudget:
    """The chip's HBM over time: ``chip_gm_bytes_per_cycle`` per cycle for every core's misses and
    write-backs together, handed out per :data:`WINDOW` first come, first served (the launch presents
    the cores' GM DMAs in time order, see :mod:`npusim.interleave`)."""

    def __init__(self, cfg: HardwareConfig, reserved_bytes_per_cycle: float = 0.0):
        self.capacity = (costs.hbm_share_bytes_per_cycle(cfg, 1) - reserved_bytes_per_cycle) * WINDOW
        self.used: list[float] = []

    def transfer(self, t0: float, nbytes: float, rate: float) -> float:
        """Move ``nbytes`` from time ``t0`` at up to ``rate`` bytes/cycle with what the windows have
        left; returns when the last byte has moved."""
        used, cap = self.used, self.capacity
        t, left = t0, nbytes
        w = int(t // WINDOW)
        need = w + 2 + int(left / (rate * WINDOW))
        if need >= len(used):
            used.extend([0.0] * (need + 256 - len(used)))
        while True:
            w_end = (w + 1) * WINDOW
            room = cap - used[w]
            span = w_end - t
            can = rate * span
            if room < can:
                can = room
            if can >= left:
                used[w] += left
                return t + left / (rate if rate * span <= room else room / span)
            if can > 0:
                used[w] += can
                left -= can
            t = w_end
            w += 1
            if w >= len(used):
                used.extend([0.0] * 256)


class MemorySystem:
    """The L2 and HBM of one launch; collects the launch's L2 and HBM byte counts."""

    def __init__(self, cfg: HardwareConfig, active_cores: int, l2: L2Cache | None = None):
        self.cfg = cfg
        self.l2 = l2 if l2 is not None else L2Cache(cfg)
        if self.l2.line_bytes != cfg.l2_line_bytes:
            raise ValueError("the L2 cache was made for a different line size than this launch's config")
        self.l2.begin_launch()
        self.active = active_cores
        # when three GM pipes per core (MTE2, MTE3, FIX) at their ports cannot fill half the HBM, DMAs
        # within a port's rate skip the books: that bandwidth is set aside for them
        port = cfg.gm_port_bytes_per_cycle
        self.free_rate = port if 3 * port * active_cores <= cfg.chip_gm_bytes_per_cycle / 2 else 0.0
        self.startup = cfg.gm_startup_cycles
        self.hbm = HbmBudget(cfg, 3 * self.free_rate * active_cores)
        self.line = cfg.l2_line_bytes
        self.buffers: dict[int, object] = {}   # id(GmBuffer) -> its lines in L2 (L2Cache.buffer)
        self.l2_hit_bytes = 0      # read bytes found in L2
        self.l2_miss_bytes = 0     # read bytes that came from (or waited for) HBM
        self.hbm_read_bytes = 0    # lines fetched from HBM
        self.hbm_write_bytes = 0   # bytes written back to HBM
        self.drained = 0.0         # when the last written-back byte is in HBM
        self.sync = None           # Interleaver.sync of a multi-core launch: GM accesses in time order
        # costs.gm_dma_parts depends on a DMA's address only modulo its burst alignment, a power of two
        # dividing ``period``: a tile loop's DMAs repeat a few shapes, each computed once (0: no memo)
        g, period = cfg.gm_burst_granule_bytes, max(cfg.gm_efficient_align_bytes, cfg.gm_burst_granule_bytes)
        self._period = period if not (g & (g - 1) or period & (period - 1)) else 0
        self._parts: dict[tuple, tuple[float, float, int]] = {}

    def _hbm(self, block: int, start: float, cycles: float, nbytes: int) -> float:
        """End of a DMA of ``cycles`` started at ``start`` whose ``nbytes`` cross the HBM on the channel
        of block ``block``'s core, spread over its transfer (after its start-up)."""
        span = cycles - self.startup
        rate = nbytes / span if span > 1.0 else float(nbytes)
        if rate <= self.free_rate:   # within the bandwidth set aside for port-rate DMAs
            return start + cycles
        t = self.hbm.transfer(start + self.startup, nbytes, rate)
        return t if t > start + cycles else start + cycles

    def register(self, buf) -> None:
        """A launch argument (GmBuffer): its L2 lines are those of its host memory."""
        arr = buf.array
        self.buffers[id(buf)] = self.l2.buffer((arr.__array_interface__["data"][0], arr.nbytes),
                                               -(-max(buf.nbytes, 1) // self.line))

    def dma_parts(self, addr: int, count: int, nbytes: int, stride: int) -> tuple[float, float, int]:
        """``(fixed, weighted)`` of :func:`npusim.costs.gm_dma_parts` for a DMA at GM byte ``addr``, and the
        bytes it moves in whole bursts (``count * nbytes`` rounded up to the granule per burst)."""
        period = self._period
        if not period:
            g0 = self.cfg.gm_burst_granule_bytes
            return (*costs.gm_dma_parts(self.cfg, addr, count, nbytes, stride), count * -(-nbytes // g0) * g0)
        k = (addr % period, count, nbytes, stride)
        p = self._parts.get(k)
        if p is None:
            g0 = self.cfg.gm_burst_granule_bytes
            p = self._parts[k] = (*costs.gm_dma_parts(self.cfg, addr, count, nbytes, stride),
                                  count * -(-nbytes // g0) * g0)
        return p

    def read(self, core, g, first: int, count: int, nbytes: int, stride: int) -> Callable[[float], float]:
        """Cost of a GM read of ``count`` bursts of ``nbytes``, ``stride`` apart, from byte ``first`` of
        the GlobalTensor ``g``'s buffer, for the block running on ``core``: a function of the start time (see
        :meth:`npusim.core.Core.issue`)."""
        fixed, weighted, moved = self.dma_parts(g.buf.addr + first, count, nbytes, stride)
        line = self.line
        if count == 1 or stride == nbytes:
            lines = slice(first // line, (first + count * nbytes - 1) // line + 1)
        else:
            lines = line_span(first, count, nbytes, stride, line)
        return self._read_cost(core, g, fixed, weighted, moved, lines)

    def read_runs(self, core, g, runs: list[tuple[int, int, int, int]]) -> Callable[[float], float]:
        """Like :meth:`read` for one DMA made of several ``(first, count, nbytes, stride)`` runs."""
        cfg = self.cfg
        fixed = cfg.gm_startup_cycles
        weighted = 0.0
        moved = 0
        g0 = cfg.gm_burst_granule_bytes
        spans = []
        for first, count, nbytes, stride in runs:
            f, w = costs.gm_dma_parts(cfg, g.buf.addr + first, count, nbytes, stride)
            fixed += f - cfg.gm_startup_cycles
            weighted += w
            moved += count * -(-nbytes // g0) * g0
            sp = line_span(first, count, nbytes, stride, self.line)
            spans.append(np.arange(sp.start, sp.stop) if isinstance(sp, slice) else sp)
        return self._read_cost(core, g, fixed, weighted, moved, np.unique(np.concatenate(spans)))

    def _read_cost(self, core, g, fixed: float, weighted: float, moved: int, lines) -> Callable[[float], float]:
        lb = self.buffers[id(g.buf)]
        n = max(lines.stop - lines.start if type(lines) is slice else lines.size, 1)
        l2, sync, cfg, line = self.l2, self.sync, self.cfg, self.line

        def cost(start: float) -> float:
            if sync is not None:
                sync(core, start)
            hits, waits, misses, handle = l2.read(lb, lines, start)
            cycles = costs.gm_read_cycles(cfg, fixed, weighted, hits / n)
            end = self._hbm(core.block_idx, start, cycles, misses * line) if misses else start + cycles
            l2.settle(handle, end)
            hit_bytes = moved * hits // n
            self.l2_hit_bytes += hit_bytes
            self.l2_miss_bytes += moved - hit_bytes
            self.hbm_read_bytes += misses * line
            return end - start
        return cost

    def write(self, core, g, first: int, count: int, nbytes: int, stride: int, floor: float = 0.0,
              rate: float | None = None) -> Callable[[float], float]:
        """Cost of a GM write, like :meth:`read`: it ends when its data is in L2 (write-back with
        allocate); its bytes then reach HBM on the core's channel, ahead of the core's later misses.
        ``floor`` is a lower bound on the cycles from another limit of the instruction (Fixpipe's L0C
        read); ``rate`` the path's write rate (default: the port's, see :func:`npusim.costs.gm_write_cycles`)."""
        cfg = self.cfg
        fixed, weighted, _ = self.dma_parts(g.buf.addr + first, count, nbytes, stride)
        lb = self.buffers[id(g.buf)]
        lines = line_span(first, count, nbytes, stride, self.line)
        total = count * nbytes
        l2, sync = self.l2, self.sync

        def cost(start: float) -> float:
            if sync is not None:
                sync(core, start)
            cycles = max(costs.gm_write_cycles(cfg, fixed, weighted, rate), floor)
            if total:   # written back in the background: takes the core's HBM share, but the DMA is done
                drained = self._hbm(core.block_idx, start, cycles, total)
                if drained > self.drained:
                    self.drained = drained
            l2.write(lb, lines, start + cycles)
            self.hbm_write_bytes += total
            return cycles
        return cost
