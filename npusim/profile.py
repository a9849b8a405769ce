"""The profile of one launch, and every metric npusim prints, each defined once with its formula.

Names follow msprof where it has one (PipeUtilization's ``cube``, ``vec``, ``scalar``, ``mte1``, ``mte2``,
``mte3``, ``fixp`` ratios; ``aic_mac_ratio``) [S12]. "Active cores" = ``min(block_dim, cores of the
kernel's kind)`` (:attr:`Profile.active_cores`).

**Two utilisations.** Every Cube utilisation npusim prints is one of these two, and says which:

- *of the cores the launch used*, :attr:`Profile.mac_utilization` = ``cube_ideal_cycles / (active_cores *
  total_cycles)``: how well the kernel uses the cores it runs on (msprof's per-block ``aic_mac_ratio``);
- *of the whole chip*, :attr:`Profile.chip_mac_utilization` = ``cube_ideal_cycles / (chip_cores *
  total_cycles)``: the same work over every core of the kind the kernel uses (a Cube kernel: the chip's
  Cube cores, the 24 AIC of A2) for the launch's time; a kernel on 4 of 24 cores is at most 1/6 of it.
  Model-level figures (:mod:`npusim.model.metrics`) are chip-level.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import NamedTuple

from .config import HardwareConfig
from .core import ISSUE
from .memsys import WINDOW
from .pipes import PIPE_ORDER, Pipe

#: Data paths and the pipe that carries each.
PATHS = {
    "GM->UB": Pipe.MTE2, "GM->L1": Pipe.MTE2, "L1->L0A": Pipe.MTE1, "L1->L0B": Pipe.MTE1,
    "L1->UB": Pipe.MTE1, "L0C->GM": Pipe.FIX, "L0C->UB": Pipe.V, "UB->GM": Pipe.MTE3, "UB->UB": Pipe.V,
}


class Instr(NamedTuple):
    """One executed instruction on the timeline (cycles from the launch start)."""

    block: int
    pipe: Pipe
    start: float
    end: float
    op: str
    nbytes: int
    file: str
    line: int


@dataclasses.dataclass
class Profile:
    """What one launch did and how long it took. Build it with :func:`npusim.launch`."""

    kernel: str
    config: HardwareConfig
    block_dim: int
    total_cycles: float
    block_start_cycles: list[float]
    block_end_cycles: list[float]
    pipe_busy_cycles: dict[str, float]
    path_bytes: dict[str, int]
    cube_macs: int
    cube_ideal_cycles: float
    cube_dtype: str | None
    vector_ops: int
    vector_ideal_cycles: float
    block_records: list[list[tuple]] = dataclasses.field(repr=False, default_factory=list)
    block_occupancy: list[list[tuple]] = dataclasses.field(repr=False, default_factory=list)
    reserved_bytes: dict[str, int] = dataclasses.field(default_factory=dict)
    block_reserved_bytes: list[dict[str, int]] = dataclasses.field(repr=False, default_factory=list)
    issued_macs: int = 0
    """MACs the Cube computed: every Mmad's m, n, k rounded up to whole fractals (16, 16, K0)."""
    algorithmic_macs: int = 0
    """The operation's useful MACs: what the launcher declared (``launch(..., algorithmic_macs=)``, e.g.
    a convolution's N*Cout*Ho*Wo*Cin*Kh*Kw), else the sum of the Mmads' m*n*k."""
    l2_hit_bytes: int = 0
    """GM read bytes found in L2."""
    l2_miss_bytes: int = 0
    """GM read bytes that came from HBM (or waited for another core's fetch of the same lines)."""
    hbm_read_bytes: int = 0
    """Bytes fetched from HBM into L2: whole ``l2_line_bytes`` lines."""
    hbm_write_bytes: int = 0
    """Bytes written back from L2 to HBM."""
    hbm_drain_cycles: float = 0.0
    """When the last written-back byte reached HBM; the launch ends no earlier (``total_cycles``)."""
    kernel_type: str = "coupled"
    """Which cores the blocks ran on (:mod:`npusim.cores`): aiv_only, aic_only, mix_aic_1_2 or coupled."""
    cores: int = 0
    """Cores that ran at once (AIVs and AICs count one each; 0: ``min(block_dim, num_cores)``)."""

    @classmethod
    def idle(cls, kernel: str, config: HardwareConfig) -> "Profile":
        """The profile of a launch that did not happen (nothing to compute): zero cycles, no work."""
        return cls(kernel=kernel, config=config, block_dim=0, total_cycles=0.0, block_start_cycles=[],
                   block_end_cycles=[], pipe_busy_cycles={}, path_bytes={}, cube_macs=0, cube_ideal_cycles=0.0,
                   cube_dtype=None, vector_ops=0, vector_ideal_cycles=0.0)

    @cached_property
    def raw_records(self) -> list[tuple]:
        """Every timeline record as ``(block, pipe, start, end, op, nbytes, (file, line))``."""
        return [(b, *r) for b, recs in enumerate(self.block_records) for r in recs]

    @cached_property
    def occupancy_events(self) -> list[tuple]:
        """Live-tensor events ``(block, time, memory, +/- bytes)`` (alloc_tensor adds, free_tensor removes)."""
        return [(b, *e) for b, evs in enumerate(self.block_occupancy) for e in evs]

    @property
    def total(self) -> float:
        """Kernel time in cycles (``total_cycles``): the latest end of any block on any core, or of the
        write-back of its results to HBM (``hbm_drain_cycles``) if that is later."""
        return self.total_cycles

    # --- time -------------------------------------------------------------------------------------
    @property
    def active_cores(self) -> int:
        """Cores that ran blocks at once: ``min(block_dim, cores of the kernel's kind)`` (48 AIV for a vector
        kernel on a2, 24 AIC or coupled cores; a mix block counts its AIC and two AIVs)."""
        return self.cores or min(self.block_dim, self.config.num_cores)

    @property
    def chip_cores(self) -> int:
        """Cores of the kind the kernel uses on the whole chip, the denominator of the chip-level
        utilisation: ``config.num_cores`` (the AI cores; for a Cube kernel on A2 its 24 Cube cores, AIC)."""
        return self.config.num_cores

    @property
    def time_us(self) -> float:
        """Kernel time in microseconds: ``total_cycles / (clock_ghz * 1000)``. Excludes launch overhead."""
        return self.config.cycles_to_us(self.total_cycles)

    # --- pipes ------------------------------------------------------------------------------------
    @property
    def pipe_ratio(self) -> dict[str, float]:
        """Busy ratio per pipe (msprof's ``*_ratio``): ``busy cycles summed over blocks /
        (active_cores * total_cycles)``, in [0, 1]."""
        denom = self.active_cores * self.total_cycles or 1.0
        return {k: v / denom for k, v in self.pipe_busy_cycles.items()}

    @property
    def critical_pipe(self) -> str:
        """The pipe with the largest busy ratio (the one to speed up first); ``scalar`` only if alone."""
        busy = {k: v for k, v in self.pipe_busy_cycles.items() if k != "scalar" and v > 0}
        if not busy:
            return "scalar"
        return max(busy, key=busy.get)

    # --- Cube -------------------------------------------------------------------------------------
    @property
    def mac_utilization(self) -> float:
        """Cube MAC utilization of the cores the launch used, useful work only: ``algorithmic_macs / (cube_macs_per_cycle[dtype] *
        active_cores * total_cycles)`` (``cube_ideal_cycles / (active_cores * total_cycles)``). Padding to
        whole fractals (zero channels, a K0 tail), helper Mmads (a bias row) and idle cycles all lower it.
        A mix kernel counts its AIC cores only (:attr:`cube_cores`)."""
        denom = self.cube_cores * self.total_cycles or 1.0
        return self.cube_ideal_cycles / denom

    @property
    def cube_cores(self) -> int:
        """Cores with a Cube that ran at once: ``active_cores``, of which a mix kernel's AICs only."""
        n = self.active_cores
        return n // (1 + self.config.aiv_per_core) if self.kernel_type == "mix_aic_1_2" else n

    @property
    def chip_mac_utilization(self) -> float:
        """Cube MAC utilization of the whole chip: ``cube_ideal_cycles / (chip_cores * total_cycles)``, i.e.
        ``mac_utilization * active_cores / chip_cores``: the cores the launch left idle count against it."""
        denom = self.chip_cores * self.total_cycles or 1.0
        return self.cube_ideal_cycles / denom

    @property
    def issued_mac_utilization(self) -> float:
        """What the Cube computed, padding included: ``issued_macs / (cube_macs_per_cycle[dtype] *
        active_cores * total_cycles)``; near msprof's ``aic_mac_ratio`` when the Cube runs full fractals."""
        if not self.issued_macs or not self.cube_dtype:
            return 0.0
        peak = self.config.cube_macs_per_cycle[self.cube_dtype]
        return self.issued_macs / (peak * (self.cube_cores * self.total_cycles or 1.0))

    @property
    def mac_waste(self) -> float:
        """Share of the issued MACs that did no useful work: ``1 - algorithmic_macs / issued_macs``
        (0 when the Cube was not used)."""
        return 1.0 - self.algorithmic_macs / self.issued_macs if self.issued_macs else 0.0

    @property
    def stream_time_us(self) -> float:
        """Time per call when the same kernel is launched back to back without waiting (the host enqueues
        the next launch while this one runs, as a benchmark loop does): ``max(time_us,
        config.launch_overhead_us)``; a kernel shorter than the launch overhead waits for the host."""
        return max(self.time_us, self.config.launch_overhead_us)

    @property
    def stream_mac_utilization(self) -> float:
        """Cube utilisation of the whole chip for such a stream of calls (what a loop of back-to-back
        calls measures on hardware): ``cube_ideal_cycles / (chip_cores * stream cycles)``, the
        stream cycles being ``stream_time_us`` in cycles."""
        stream = self.stream_time_us * self.config.clock_ghz * 1e3
        return self.cube_ideal_cycles / (self.chip_cores * stream) if stream else 0.0

    @property
    def flops(self) -> float:
        """Useful floating-point (or integer) operations: ``2 * cube MACs + vector element operations``."""
        return 2.0 * self.cube_macs + self.vector_ops

    # --- memory -----------------------------------------------------------------------------------
    @property
    def gm_bytes(self) -> int:
        """Bytes moved to or from GM (all paths that start or end at GM)."""
        return sum(v for k, v in self.path_bytes.items() if "GM" in k)

    @property
    def l2_hit_rate(self) -> float:
        """Share of the GM read bytes found in L2: ``l2_hit_bytes / (l2_hit_bytes + l2_miss_bytes)``."""
        reads = self.l2_hit_bytes + self.l2_miss_bytes
        return self.l2_hit_bytes / reads if reads else 0.0

    @property
    def hbm_bytes(self) -> int:
        """Bytes that crossed the HBM interface: ``hbm_read_bytes + hbm_write_bytes``."""
        return self.hbm_read_bytes + self.hbm_write_bytes

    def path_peak_bytes_per_cycle(self, path: str) -> float:
        """Peak of a path for the whole launch: ``rate * active_cores``. GM reads: the rate their L2
        hit mix allows one core, ``1 / (h / l2_bytes_per_cycle + (1 - h) / gm_port_bytes_per_cycle)``
        with ``h = l2_hit_rate``; GM writes: :meth:`HardwareConfig.gm_rate` (the port, capped by an equal
        share of the HBM); ``"HBM"``: ``chip_gm_bytes_per_cycle`` (all cores, reads and writes);
        ``"L2"``: ``l2_bytes_per_cycle * active_cores``."""
        cfg = self.config
        n = self.active_cores
        if path == "HBM":
            return cfg.chip_gm_bytes_per_cycle
        if path == "L2":
            return cfg.l2_bytes_per_cycle * n
        if path.startswith("GM"):
            h = self.l2_hit_rate
            return n / (h / cfg.l2_bytes_per_cycle + (1.0 - h) / cfg.gm_port_bytes_per_cycle)
        if "GM" in path:
            return cfg.gm_rate(n) * n
        rate = {"L1->L0A": cfg.l1_to_l0a_bytes_per_cycle, "L1->L0B": cfg.l1_to_l0b_bytes_per_cycle,
                "L1->UB": cfg.l1_to_ub_bytes_per_cycle, "L0C->UB": cfg.l0c_to_ub_bytes_per_cycle,
                "UB->UB": cfg.vector_bytes_per_cycle}[path]
        return rate * n

    @property
    def bandwidth(self) -> dict[str, dict[str, float]]:
        """Per path: ``bytes``, ``achieved_gbps = bytes / time``, ``peak_gbps`` (see
        :meth:`path_peak_bytes_per_cycle`, times the clock) and ``efficiency = achieved / peak``; plus
        ``"L2"`` (the GM read bytes served by L2) and ``"HBM"`` (``hbm_bytes``, reads and writes) when GM
        was used."""
        out = {}
        secs = self.time_us * 1e-6 or 1e-30
        extra = {"L2": self.l2_hit_bytes, "HBM": self.hbm_bytes} if self.gm_bytes else {}
        for path, b in {**self.path_bytes, **extra}.items():
            peak = self.path_peak_bytes_per_cycle(path) * self.config.clock_ghz
            ach = b / secs / 1e9
            out[path] = {"bytes": b, "achieved_gbps": ach, "peak_gbps": peak, "efficiency": ach / peak}
        return out

    # --- roofline ---------------------------------------------------------------------------------
    @property
    def arithmetic_intensity(self) -> float:
        """FLOP per GM byte: ``flops / gm_bytes`` (inf when nothing touched GM)."""
        return self.flops / self.gm_bytes if self.gm_bytes else float("inf")

    @property
    def peak_flops(self) -> float:
        """Peak FLOP/s of the unit the kernel relies on, for ``active_cores`` cores: the Cube at the input
        dtype of its Mmads when it used the Cube, else the vector unit at fp16."""
        n = self.active_cores
        if self.cube_macs:
            return self.config.cube_peak_flops(self.cube_dtype or "float16") * n
        return self.config.vector_peak_flops("float16") * n

    @property
    def peak_gm_bytes_per_s(self) -> float:
        """GM bandwidth of the launch from HBM: ``gm_rate(active_cores) * active_cores * clock`` (the
        cores' ports, capped by the chip's HBM)."""
        n = self.active_cores
        return self.config.gm_rate(n) * n * self.config.clock_ghz * 1e9

    @property
    def achieved_flops(self) -> float:
        """``flops / time``."""
        return self.flops / (self.time_us * 1e-6) if self.total_cycles else 0.0

    @property
    def bound(self) -> str:
        """Roofline verdict: ``"compute"`` when arithmetic intensity >= the ridge point
        ``peak_flops / peak_gm_bytes_per_s``, else ``"memory"``."""
        return "compute" if self.arithmetic_intensity >= self.peak_flops / self.peak_gm_bytes_per_s else "memory"

    @property
    def compute_bound_cycles(self) -> float:
        """Lower bound from compute: ``max(cube ideal cycles, vector ideal cycles) / active_cores``; ideal
        cycles are useful work at peak rate (m*n*k / MACs per cycle; bytes / 256 B per cycle)."""
        return max(self.cube_ideal_cycles, self.vector_ideal_cycles) / self.active_cores

    @property
    def memory_bound_cycles(self) -> float:
        """Lower bound from GM: the largest of ``hbm_bytes / chip_gm_bytes_per_cycle - WINDOW`` (one HBM
        for the chip, budgeted per ``npusim.memsys.WINDOW`` cycles), the GM reads at their fastest (``(l2_hit_bytes / l2_bytes_per_cycle + the other read
        bytes / gm_port_bytes_per_cycle) / active_cores``) and each GM write pipe's bytes /
        (active_cores * gm_port_bytes_per_cycle)."""
        cfg = self.config
        n = self.active_cores
        per_pipe: dict[Pipe, int] = {}
        for path, b in self.path_bytes.items():
            if "GM" in path:
                per_pipe[PATHS[path]] = per_pipe.get(PATHS[path], 0) + b
        if not per_pipe:
            return 0.0
        bounds = [self.hbm_bytes / cfg.chip_gm_bytes_per_cycle - WINDOW]
        for pipe, b in per_pipe.items():
            if pipe == Pipe.MTE2:
                hit = min(self.l2_hit_bytes, b)
                bounds.append((hit / cfg.l2_bytes_per_cycle + (b - hit) / cfg.gm_port_bytes_per_cycle) / n)
            else:
                bounds.append(b / (n * cfg.gm_port_bytes_per_cycle))
        return max(bounds)

    @property
    def roofline_cycles(self) -> float:
        """``max(compute_bound_cycles, memory_bound_cycles)``: no kernel can be faster."""
        return max(self.compute_bound_cycles, self.memory_bound_cycles)

    @property
    def attainable_flops(self) -> float:
        """The roof of this launch: ``flops / roofline_cycles`` (in FLOP/s), the FLOP/s no launch with its
        work and its bytes per path (reads, writes, L2 hits) can exceed; its roofline point lies below it
        (``achieved_flops / attainable_flops = roofline_efficiency``)."""
        secs = self.roofline_cycles / (self.config.clock_ghz * 1e9)
        return self.flops / secs if secs else float("inf")

    @property
    def roofline_efficiency(self) -> float:
        """``roofline_cycles / total_cycles``: 1.0 means the kernel runs at its roofline."""
        return self.roofline_cycles / self.total_cycles if self.total_cycles else 0.0

    # --- timeline ---------------------------------------------------------------------------------
    @cached_property
    def instructions(self) -> list[Instr]:
        """The timeline: every instruction of every block, ordered by start time, and the scalar unit's
        issue work as ``ISSUE`` spans on the S lane (their ``nbytes`` is the number of instructions issued)."""
        out = [Instr(b, Pipe(p), s, e, op, nb, site[0], site[1]) for (b, p, s, e, op, nb, site) in self.raw_records]
        out.sort(key=lambda r: (r.start, r.pipe))
        return out

    @property
    def instruction_count(self) -> int:
        """Instructions executed (the scalar unit's ``ISSUE`` spans on the S lane are not counted)."""
        return sum(1 for recs in self.block_records for r in recs if r[3] != ISSUE)

    # --- presentation -----------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """The headline numbers as a flat dict (for tables, checks and benchmarks)."""
        d = {"time_us": self.time_us, "total_cycles": self.total_cycles, "instructions": self.instruction_count,
             "mac_utilization": self.mac_utilization, "chip_mac_utilization": self.chip_mac_utilization,
             "gm_bytes": self.gm_bytes,
             "l2_hit_rate": self.l2_hit_rate, "hbm_bytes": self.hbm_bytes,
             "arithmetic_intensity": self.arithmetic_intensity, "roofline_efficiency": self.roofline_efficiency}
        for k, v in self.pipe_ratio.items():
            d[f"{k}_ratio"] = v
        return d

    def _rows(self) -> list[tuple[str, str]]:
        rows = [("kernel", self.kernel), ("config", self.config.name),
                ("blocks", f"{self.block_dim} on {self.active_cores} core(s)"
                           + {"aiv_only": " (AIV)", "aic_only": " (AIC)", "mix_aic_1_2": " (AIC + 2 AIV each)"}.get(
                               self.kernel_type, "")),
                ("time", f"{self.time_us:.3f} us ({self.total_cycles:,.0f} cycles)"),
                ("bound", f"{self.bound} (roofline efficiency {self.roofline_efficiency:.1%})"),
                ("critical pipe", self.critical_pipe)]
        for p in PIPE_ORDER:
            k = p.msprof_name
            if self.pipe_busy_cycles.get(k):
                rows.append((f"{k} ratio", f"{self.pipe_ratio[k]:.1%}"))
        if self.cube_macs:
            rows.append(("cube MAC utilization", f"{self.mac_utilization:.1%} of the {self.active_cores} core(s) "
                                                 f"used, {self.chip_mac_utilization:.1%} of the chip's "
                                                 f"{self.chip_cores} ({self.cube_dtype}; issued "
                                                 f"{self.issued_mac_utilization:.1%}, {self.mac_waste:.0%} "
                                                 f"of it padding)"))
        if self.gm_bytes:
            rows.append(("L2 / HBM", f"L2 hit rate {self.l2_hit_rate:.1%}; HBM {self.hbm_read_bytes:,} B read, "
                                     f"{self.hbm_write_bytes:,} B written"))
        for path, bw in self.bandwidth.items():
            rows.append((f"{path}", f"{bw['bytes']:,} B, {bw['achieved_gbps']:.1f} / {bw['peak_gbps']:.1f} GB/s "
                                    f"({bw['efficiency']:.0%})"))
        rows.append(("arithmetic intensity", f"{self.arithmetic_intensity:.2f} FLOP/B"))
        return rows

    def summary(self) -> str:
        """A plain-text summary for printing."""
        rows = self._rows()
        w = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)

    def __str__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        from .tables import table

        return table(self._rows(), header=("Profile", self.kernel))


def metric_docs() -> dict[str, str]:
    """Every metric's name and formula (the property docstrings), for documentation and chart labels."""
    out = {"total_cycles": " ".join((Profile.total.__doc__ or "").split()),
           "instructions": " ".join((Profile.instruction_count.__doc__ or "").split())}
    for name in dir(Profile):
        if name in ("total", "instruction_count"):
            continue
        attr = getattr(Profile, name)
        if isinstance(attr, (property, cached_property)) and attr.__doc__ and not name.startswith("_"):
            out[name] = " ".join(attr.__doc__.split())
    return out

