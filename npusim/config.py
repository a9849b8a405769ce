"""Hardware configuration of the simulated Da Vinci AI core and chip.

Every number here is a documented default with its source; ``docs/hardware.md`` lists the facts and
the references (S1..S17) they come from. Configs are immutable: derive a variant with
:meth:`HardwareConfig.replace`, e.g. ``presets.a2.replace(ub_bytes=128 * 1024)``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

KB = 1024
MB = 1024 * KB

_CUBE_MACS_A2 = MappingProxyType({"float16": 4096, "bfloat16": 4096, "int8": 8192, "float32": 1024})
_CUBE_MACS_CLASSIC = MappingProxyType({"float16": 4096, "int8": 8192})


@dataclass(frozen=True)
class HardwareConfig:
    """One AI core (Cube + Vector + Scalar) and the chip it sits on.

    On the ``a2`` preset, as on a real A2 chip, the Cube (AIC) and Vector (AIV) units sit in separate
    cores, one AIC to two AIV, which exchange data through GM [S1] (``split_cores``): a vector-only kernel
    runs on AIV blocks, a Cube-only one on AIC blocks, a ``mix_aic_1_2`` kernel on both (see
    :mod:`npusim.cores`). A kernel whose one body uses both units runs on a coupled core as on the 910.

    Units are in the field names: ``_bytes`` bytes, ``_cycles`` core clock cycles, ``_bytes_per_cycle``
    bytes per core cycle, ``_gb_per_s`` 10^9 bytes per second, ``_ghz`` gigahertz, ``_us`` microseconds.
    """

    name: str
    clock_ghz: float
    """Core clock [S5: ``cube_freq=1800`` on 910B2; 910 derived as ~1.0 GHz from 256 TFLOPS]."""

    # --- compute units -------------------------------------------------------------------------
    cube_macs_per_cycle: Mapping[str, int] = field(default_factory=lambda: _CUBE_MACS_A2)
    """Cube multiply-accumulates per cycle by input dtype: fp16 16x16x16=4096, int8 16x32x16=8192,
    fp32 at 1/4 of fp16 on A2 and absent on 910 [S1, S5, S8]. A dtype missing here is unsupported."""
    cube_fp16_accumulate: bool = False
    """Whether Mmad may accumulate fp16 inputs into an fp16 L0C (910/310P: yes; A2: no) [S2 Mmad]."""
    vector_bytes_per_cycle: int = 256
    """Vector unit: one 256 B repeat per cycle (128 fp16 or 64 fp32 lanes) [S2, S5, S8]."""
    vector_complex_cycles_per_repeat: int = 4
    """exp/ln/sqrt/div/reciprocal cost this many cycles per 64 elements, in fp16 and fp32 alike
    ("Exp: same cost for half and float on A2" [S2]); the factor itself is not public (chosen)."""

    # --- on-chip buffers -----------------------------------------------------------------------
    ub_bytes: int = 192 * KB
    """Unified Buffer (VECIN/VECOUT/VECCALC) [S5]."""
    l1_bytes: int = 512 * KB
    """L1 buffer (A1/B1) [S5]."""
    l0a_bytes: int = 64 * KB
    """L0A, left matrix of the Cube (A2) [S5, S6]."""
    l0b_bytes: int = 64 * KB
    """L0B, right matrix of the Cube (B2) [S5, S6]."""
    l0c_bytes: int = 128 * KB
    """L0C, Cube accumulator (CO1) [S1, S5]."""

    # --- data paths (bytes per cycle per core) -------------------------------------------------
    gm_port_bytes_per_cycle: int = 64
    """Peak of one core's GM<->UB and GM->L1 DMA port (MTE2 reads, MTE3 writes) [S5, S6: UB<->GM 64;
    GM->L1 is not public for A2 and uses the same port]."""
    l1_to_l0a_bytes_per_cycle: int = 512
    """MTE1 L1->L0A [S6: 310/310P fixtures, borrowed for A2]."""
    l1_to_l0b_bytes_per_cycle: int = 256
    """MTE1 L1->L0B [S6]."""
    l1_to_ub_bytes_per_cycle: int = 128
    """MTE1 L1->UB [S6]."""
    fixpipe_bytes_per_cycle: int = 256
    """FIX L0C->GM/L1, counted on the bytes read from L0C [S6: L0C->UB 256, borrowed for Fixpipe]."""
    l0c_to_ub_bytes_per_cycle: int = 256
    """L0C->UB over the vector pipe on coupled cores without Fixpipe [S6]."""
    l2_bytes_per_cycle: int = 110
    """Read rate of one core from L2: what a GM read gets for the lines it finds in L2 [S5: L2 110
    B/cycle per core on 910B2]. Lines that miss come from HBM at ``gm_port_bytes_per_cycle``."""

    # --- L2 and HBM, shared by the cores of the chip (see npusim.l2, npusim.hbm) -----------------
    l2_bytes: int = 192 * MB
    """L2 cache shared by every core [S5, S9: 192 MB on 910B2/B3; "B4 real 168 MB"]."""
    l2_line_bytes: int = 512
    """Unit of L2 hits and misses: GM is served in 128/256/512 B requests, best 512 B-aligned [S1, S4]
    (the line size itself is not public: chosen)."""
    hbm_gb_per_s: float = 1600.0
    """HBM bandwidth of the whole chip, one budget for the reads and the writes of every core
    (10^9 B/s). A2: 1.6-1.8 TB/s [S4, S16]; 1.6 is the lower end, which the tuned Add on A2 nearly
    reaches (1.52 TB/s of reads plus writes at 97 % MTE2 busy [S4])."""

    # --- costs that are not public (chosen; see docs/cost-model.md) ----------------------------
    gm_startup_cycles: int = 64
    """Start-up latency of one GM DMA instruction. Chosen so that a 16 KB copy reaches 80 % of the port
    peak, matching "copies need >= 16 KB for peak bandwidth" [S4]."""
    gm_burst_overhead_cycles: int = 1
    """Extra cycles per contiguous GM burst (one per row of a strided or ND->NZ copy), the gap between
    two DMA requests: many short bursts are slow (chosen)."""
    gm_burst_granule_bytes: int = 32
    """A GM burst moves whole 32 B granules [S1]."""
    gm_efficient_align_bytes: int = 512
    """A GM burst runs at full rate when its address is aligned to min(512 B, its length rounded up to a
    power of two): GM serves 128/256/512 B requests [S1, S4]."""
    gm_unaligned_efficiency: float = 0.7
    """Rate factor for a burst that is not so aligned ("32 B alignment can drop to ~70 %") [S1, S4]."""
    onchip_startup_cycles: int = 16
    """Start-up latency of an on-chip move (MTE1, FIX from L0C, L0C->UB)."""
    cube_startup_cycles: int = 8
    """Start-up latency of one Mmad."""
    vector_startup_cycles: int = 4
    """Start-up latency of one vector instruction."""
    scalar_issue_cycles: int = 2
    """Scalar-unit cycles to issue any instruction (the S pipe is busy meanwhile)."""
    cross_core_flag_cycles: int = 64
    """From a CrossCoreSetFlag firing to the other core's CrossCoreWaitFlag seeing it. The signal goes through
    the chip's shared memory system (the cores "talk through GM" [S1]), so it is taken as one GM access's
    start-up, ``gm_startup_cycles`` (not public: chosen)."""
    scalar_access_cycles: int = 16
    """A scalar GetValue/SetValue on UB or GM (DCache access) [S1: DCache 32 KB]."""

    # --- alignment and limits ------------------------------------------------------------------
    ub_align_bytes: int = 32
    """UB addresses and DataCopy lengths: 32 B [S1, S2]."""
    l1_align_bytes: int = 32
    """L1 addresses on A2: 32 B (512 B on 910/310P) [S1]."""
    l0ab_align_bytes: int = 512
    """L0A/L0B addresses: one 512 B fractal [S1]."""
    l0c_align_bytes: int = 1024
    """Mmad destination in L0C starts on 1024 B (one 16x16 fp32 fractal) [S1]."""
    event_ids: int = 8
    """EventIDs per HardEvent for SetFlag/WaitFlag: 0-7 on A2, 0-3 on 910 [S2]."""
    instr_queue_depth: int = 32
    """Per-pipe instruction queue; the scalar unit stalls when it is full [S1]."""
    max_buffers: int = 64
    """Buffers one TPipe may initialise [S3, S12]."""
    has_fixpipe: bool = True
    """A2 drains L0C with Fixpipe (PIPE_FIX) to GM; 910 moves L0C->UB on the vector pipe [S1]."""

    # --- chip ----------------------------------------------------------------------------------
    num_cores: int = 24
    """AI cores on the chip; block_dim above this runs in waves [S5: 24 AIC on 910B1/B2]."""
    split_cores: bool = True
    """Whether each AI core is split into one Cube core (AIC: L1, L0A, L0B, L0C) and ``aiv_per_core``
    Vector cores (AIV: UB each), which exchange data through GM (A2: yes, ``dav-c220``; 910/310P: no,
    coupled) [S1]. Vector-only kernels then launch on up to ``vector_cores`` blocks at once."""
    aiv_per_core: int = 2
    """Vector cores per AI core on a split chip: AIC:AIV = 1:2, 48 AIV beside 24 AIC on 910B2 [S1, S5]."""
    launch_overhead_us: float = 20.0
    """Host-side cost of launching one kernel on the whole chip [S4: ~20-21 us]."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            kind = {"int": int, "float": (int, float), "bool": bool}.get(str(f.type))
            if kind is not None and (not isinstance(v, kind) or (kind is not bool and isinstance(v, bool))):
                raise ValueError(f"HardwareConfig.{f.name} must be {str(f.type)}, got {v!r}")
            if kind in (int, (int, float)) and v <= 0:
                raise ValueError(f"HardwareConfig.{f.name} must be > 0, got {v!r}")
        object.__setattr__(self, "cube_macs_per_cycle", MappingProxyType(dict(self.cube_macs_per_cycle)))
        object.__setattr__(self, "_key", tuple(
            tuple(sorted(v.items())) if isinstance(v, Mapping) else v
            for v in (getattr(self, f.name) for f in dataclasses.fields(self))))
        if self.gm_unaligned_efficiency > 1:
            raise ValueError("HardwareConfig.gm_unaligned_efficiency is a factor in (0, 1]")

    # ---------------------------------------------------------------------------------------------
    @property
    def key(self) -> tuple:
        """A hashable value that identifies this configuration (all fields), e.g. for caches."""
        return self._key

    def replace(self, **changes) -> "HardwareConfig":
        """A copy with some fields changed, e.g. ``a2.replace(name="a2-small-ub", ub_bytes=96*1024)``."""
        return dataclasses.replace(self, **changes)

    @property
    def chip_gm_bytes_per_cycle(self) -> float:
        """HBM bandwidth of the chip in bytes per core cycle: ``hbm_gb_per_s / clock_ghz``, shared by the
        reads (L2 misses) and the writes of every core."""
        return self.hbm_gb_per_s / self.clock_ghz

    def gm_rate(self, active_cores: int) -> float:
        """HBM bytes/cycle one core gets when ``active_cores`` cores stream at once and share the HBM
        equally: ``min(gm_port_bytes_per_cycle, chip_gm_bytes_per_cycle / active_cores)``. (The
        simulator shares it first come, first served; see :mod:`npusim.hbm`.)"""
        return min(self.gm_port_bytes_per_cycle, self.chip_gm_bytes_per_cycle / max(1, active_cores))

    @property
    def vector_cores(self) -> int:
        """Cores a vector-only kernel runs on at once (``GetCoreNumAiv``): ``num_cores * aiv_per_core`` on
        a split chip, else ``num_cores``."""
        return self.num_cores * self.aiv_per_core if self.split_cores else self.num_cores

    def cube_peak_flops(self, dtype: str = "float16") -> float:
        """Peak Cube FLOP/s of ONE core for an input dtype: 2 * MACs/cycle * clock."""
        return 2 * self.cube_macs_per_cycle[dtype] * self.clock_ghz * 1e9

    def vector_peak_flops(self, dtype: str = "float16") -> float:
        """Peak vector FLOP/s of ONE core: one operation per lane per cycle."""
        from .dtypes import itemsize

        return self.vector_bytes_per_cycle / itemsize(dtype) * self.clock_ghz * 1e9

    def memory_bytes(self, memory: str) -> int:
        """Capacity of ``"UB"``, ``"L1"``, ``"L0A"``, ``"L0B"``, ``"L0C"`` or ``"L2"`` in bytes."""
        return {"UB": self.ub_bytes, "L1": self.l1_bytes, "L0A": self.l0a_bytes,
                "L0B": self.l0b_bytes, "L0C": self.l0c_bytes, "L2": self.l2_bytes}[memory]

    def cycles_to_us(self, cycles: float) -> float:
        return cycles / (self.clock_ghz * 1e3)

    # notebook niceties --------------------------------------------------------------------------
    def rows(self) -> list[tuple[str, str]]:
        """(field, value) pairs for display."""
        out = []
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Mapping):
                v = ", ".join(f"{k}: {n}" for k, n in v.items())
            elif f.name.endswith("_bytes") and isinstance(v, int) and v >= KB:
                v = f"{v // MB} MB" if v % MB == 0 else f"{v // KB} KB" if v % KB == 0 else f"{v} B"
            out.append((f.name, str(v)))
        return out

    def __str__(self) -> str:
        w = max(len(k) for k, _ in self.rows())
        return "\n".join(f"{k:<{w}}  {v}" for k, v in self.rows())

    def _repr_html_(self) -> str:
        from .tables import table

        return table(self.rows(), header=("HardwareConfig " + self.name, ""))


a2 = HardwareConfig(name="a2", clock_ghz=1.8)
"""Default preset: a 910B-like (Atlas A2) chip, 24 AIC and 48 AIV cores (see class docstring)."""

classic = HardwareConfig(
    name="classic",
    clock_ghz=1.0,
    cube_macs_per_cycle=_CUBE_MACS_CLASSIC,
    cube_fp16_accumulate=True,
    ub_bytes=256 * KB,
    l1_bytes=1024 * KB,
    l0c_bytes=256 * KB,
    l1_align_bytes=512,
    event_ids=4,
    has_fixpipe=False,
    num_cores=32,
    split_cores=False,
    l2_bytes=32 * MB,
    l2_bytes_per_cycle=128,
    hbm_gb_per_s=1200.0,
)
"""A 910-like coupled core: 1 GHz, UB 256 KB, L1 1 MB, L0C 256 KB, no fp32 on the Cube, results leave L0C
through UB on the vector pipe (no Fixpipe), 4 EventIDs, 32 cores [S1, S5, S6, S9]; L2 32 MB [S9], read
from L2 at 128 B/cycle per core (the 310 fixture's L2 rate, same core generation [S6]), HBM ~1.2 TB/s
(secondary sources, unconfirmed [S16])."""

PRESETS: dict[str, HardwareConfig] = {"a2": a2, "classic": classic}


def get_config(config: "HardwareConfig | str | None" = None) -> HardwareConfig:
    """Resolve ``None`` (the default ``a2``), a preset name, or a config."""
    if config is None:
        return a2
    if isinstance(config, HardwareConfig):
        return config
    try:
        return PRESETS[config]
    except KeyError:
        raise ValueError(f"unknown preset {config!r}; choose one of {sorted(PRESETS)} "
                         "or pass a HardwareConfig") from None
