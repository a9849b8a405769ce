"""The machine around the NPU: the host CPU, the PCIe link, and the NPU's :class:`~npusim.HardwareConfig`.

Every number is a documented default (units in the field name). Sources and confidence, as in
``docs/hardware.md`` (H: vendor documentation or a standard, M: measured by third parties, L: chosen by us):

==========================  ========  =====================================================================
field                       default   where it comes from
==========================  ========  =====================================================================
``pcie_bytes_per_s``        25e9      PCIe 4.0 x16 is 16 GT/s x 16 lanes x 128b/130b = 31.5 GB/s per
                                      direction (PCI-SIG; H); copies reach 20-40 % less in practice
                                      (TLP headers, flow control, DMA setup; M), so 25 GB/s effective.
``pcie_latency_us``         10        fixed cost of one host<->device copy: the driver call, DMA set-up and
                                      completion of ``aclrtMemcpy`` from pageable memory, which returns only
                                      when the copy is done (CANN aclrtMemcpyAsync doc; the 10 us is L).
``host_bytes_per_s``        10e9      one host core streaming through memory (read + write), as a framework's
                                      element-wise CPU op does (L).
``host_flops``              50e9      one host core, fp32 vectorised (L); only matters for compute-heavy host
                                      ops, none of which the labs' models put on the host.
``host_op_overhead_us``     5         framework dispatch of one CPU op (PyTorch's operator micro-benchmarks
                                      time small CPU ops at 2-4 us end to end; M/L).
``hardware``                ``a2``    the NPU; ``hardware.launch_overhead_us`` (20 us [S4]) is the host-side
                                      cost of each kernel launch.
``activation_dtype``        float16   dtype of the activations on the device (and of host copies of them).
==========================  ========  =====================================================================
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ..config import HardwareConfig, a2, get_config


@dataclass(frozen=True)
class SystemConfig:
    """Host, PCIe link and NPU of a model run (see the module docstring for every default's source)."""

    pcie_bytes_per_s: float = 25e9
    """Effective bandwidth of one host<->device copy (PCIe 4.0 x16, ~80 % of 31.5 GB/s)."""
    pcie_latency_us: float = 10.0
    """Fixed cost of one host<->device copy (driver + DMA set-up + completion)."""
    host_bytes_per_s: float = 10e9
    """Bytes per second one host core reads plus writes in an element-wise op."""
    host_flops: float = 50e9
    """Floating-point operations per second of one host core."""
    host_op_overhead_us: float = 5.0
    """Framework dispatch cost of every host op (also of a no-op reshape)."""
    hardware: HardwareConfig = field(default_factory=lambda: a2)
    """The simulated NPU (its ``launch_overhead_us`` is charged for every kernel launch)."""
    activation_dtype: str = "float16"
    """Dtype of activations between ops (the classifier's matmul writes float32)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "hardware", get_config(self.hardware))
        for f in ("pcie_bytes_per_s", "host_bytes_per_s", "host_flops"):
            if not getattr(self, f) > 0:
                raise ValueError(f"SystemConfig.{f} must be > 0, got {getattr(self, f)!r}")
        for f in ("pcie_latency_us", "host_op_overhead_us"):
            if not getattr(self, f) >= 0:
                raise ValueError(f"SystemConfig.{f} must be >= 0, got {getattr(self, f)!r}")
        np.dtype(self.activation_dtype)

    def replace(self, **changes) -> "SystemConfig":
        """A copy with some fields changed, e.g. ``SystemConfig().replace(pcie_bytes_per_s=50e9)``."""
        return dataclasses.replace(self, **changes)

    @property
    def launch_overhead_us(self) -> float:
        """Host time to launch one kernel: ``hardware.launch_overhead_us``."""
        return self.hardware.launch_overhead_us

    def with_launch_overhead(self, us: float) -> "SystemConfig":
        """A copy whose kernel launches cost ``us`` microseconds each (e.g. 2 for a replayed graph)."""
        return self.replace(hardware=self.hardware.replace(launch_overhead_us=float(us)))

    def transfer_us(self, nbytes: int) -> float:
        """One host<->device copy: ``pcie_latency_us + nbytes / pcie_bytes_per_s``."""
        return self.pcie_latency_us + nbytes / self.pcie_bytes_per_s * 1e6

    def host_us(self, flops: float, nbytes: float) -> float:
        """One host op: ``host_op_overhead_us + max(flops / host_flops, nbytes / host_bytes_per_s)``
        (a roofline of one host core), where ``nbytes`` counts what the op reads and writes."""
        return self.host_op_overhead_us + max(flops / self.host_flops, nbytes / self.host_bytes_per_s) * 1e6

    def rows(self) -> list[tuple[str, str]]:
        return [(f.name, str(getattr(self, f.name)) if f.name != "hardware" else self.hardware.name)
                for f in dataclasses.fields(self)]


DEFAULT_SYSTEM = SystemConfig()
