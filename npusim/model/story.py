"""Lab 09's story setting: where a fast convolution and a slow model meet, in the chip's numbers.

The story (a practitioner's diagnosis): a Conv2D operator reached about 80 % of the chip's peak, the whole
model only about 40 %, because the convolutions' outputs went to the host for normalisation and back;
fusing what could be fused and keeping the data on the device made the model about 25 % faster.

:data:`STORY` is the setting lab 09 and ``npusim bench --only resnet18`` measure it in, and
:func:`story_runs` runs it: the model as captured (BatchNorm, the pools and flatten on the host, every
other op on the device) and after :func:`npusim.model.optimize` (BatchNorm folded into the conv, ReLU
fused into its drain, everything on the device). :data:`CONTRAST` is batch 1, the launch-bound view.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from .graph import Graph
from .metrics import ModelProfile
from .passes import optimize
from .resnet import resnet18
from .runner import run_model
from .system import SystemConfig
from .zoo import images


@dataclass(frozen=True)
class Setting:
    """A model run's setting: the batch, the image size and the system around the NPU."""

    batch: int
    image: int
    system: SystemConfig = field(default_factory=SystemConfig)
    why: str = ""

    def describe(self) -> str:
        s = self.system
        return (f"ResNet-18 inference, batch {self.batch} at {self.image} x {self.image}, NPU '{s.hardware.name}' "
                f"({s.hardware.num_cores} Cube cores), PCIe {s.pcie_bytes_per_s / 1e9:g} GB/s + "
                f"{s.pcie_latency_us:g} us per copy, host {s.host_bytes_per_s / 1e9:g} GB/s + "
                f"{s.host_op_overhead_us:g} us per op, {s.launch_overhead_us:g} us per launch")


STORY = Setting(batch=8, image=224, system=SystemConfig())
"""The story setting: ResNet-18 inference at batch 8, 224 x 224, the default system (PCIe 4.0, one host
core, eager 20 us launches), BatchNorm, the pools and flatten on the host as captured. Batch 8 is where
the large convolutions' work fills the chip: every one of the 24 Cube cores gets several work items
(bands of output rows x Cout groups), while the whole inference still simulates in about a minute."""

CONTRAST = Setting(batch=1, image=224, system=SystemConfig())
"""One image: the launch-bound contrast."""


def story_runs(setting: Setting = STORY, graph: Graph | None = None, *, progress: bool | None = None,
               sanitize: str = "error") -> tuple[ModelProfile, ModelProfile]:
    """``(before, after)``: the graph (default ResNet-18) as captured and after :func:`optimize`, run in
    ``setting``. ``sanitize="off"`` skips the race checker (the timing is the same; lab 09 runs the
    library's kernels with it on at batch 1 first)."""
    g = graph or resnet18()
    x = images(setting.batch, setting.image)
    before = run_model(g, x, setting.system, label=f"as captured, batch {setting.batch}", progress=progress,
                       sanitize=sanitize)
    after = run_model(optimize(g, input_shape=x.shape), x, setting.system,
                      label=f"after the passes, batch {setting.batch}", progress=progress, sanitize=sanitize)
    return before, after


def figures(before: ModelProfile, after: ModelProfile) -> dict[str, float]:
    """The story's numbers: the conv kernels' chip utilisation (max, median, after the passes), the model's
    chip utilisation before and after, and the speed-up ``before.model_time_us / after.model_time_us``."""
    convs = [r["kernel_chip_util"] for r in after.op_rows() if r["op"] == "conv2d"]
    return {"conv_chip_util_max": max(convs), "conv_chip_util_median": statistics.median(convs),
            "model_chip_util_before": before.mac_utilization, "model_chip_util_after": after.mac_utilization,
            "speedup": before.model_time_us / after.model_time_us}
