"""Whole-model profiling on the simulated NPU, and graph-level fusion (lab 09).

::

    from npusim import model as nm
    g = nm.capture(nm.ResNet18(), x)           # torch.fx; or nm.resnet18(): the same graph without torch
    before = nm.run_model(g, x)                # every op on the NPU or the host, one timeline
    after = nm.run_model(nm.optimize(g, input_shape=x.shape), x)  # BN folded, ReLU fused, all on the device
    print(before.summary(), after.summary())
    nm.charts.timeline(before); nm.charts.breakdown([before, after]); nm.charts.placement(g)
    cheap = after.with_system(nm.SystemConfig(hardware=nm.DEFAULT_SYSTEM.hardware.replace(launch_overhead_us=2)))
    nm.to_chrome_trace(after, "model.json")    # open in ui.perfetto.dev

Modules: system (host, PCIe, NPU config), graph (the IR), opset (ops: host and device implementations,
costs), pooling (the device pooling kernels), schedule (the timeline rules), runner (execute, schedule,
run_model, evaluate), metrics (ModelProfile: every model-level metric), passes (fold_bn, fuse_conv_bn_relu,
offload, optimize), capture (torch.fx -> graph), zoo (the labs' small CNN), resnet (ResNet-18 and smaller
ResNets), memo (each kernel simulated once), story (lab 09's story setting), progress, trace (Perfetto),
placement (the placement chart), charts, explorer.
"""

from __future__ import annotations

from .capture import capture
from .graph import DEVICE, HOST, Graph, Node
from .metrics import CATEGORIES, LABELS, ModelProfile, metric_docs
from .opset import OPS, default_placement, infer
from .passes import OFFLOAD_OPS, Match, apply_match, find_conv_bn_relu, fold_bn, fuse_conv_bn_relu, offload, optimize
from .resnet import ResNet, ResNet18, resnet, resnet18
from .runner import Execution, Step, evaluate, execute, run_model, schedule
from .schedule import Event
from .system import DEFAULT_SYSTEM, SystemConfig
from .trace import to_chrome_trace
from .story import CONTRAST, STORY, Setting, story_runs
from . import memo, story
from .zoo import SmallCNN, images, small_cnn
from . import charts  # noqa: E402


def __getattr__(name: str):
    if name == "ModelExplorer":  # ipywidgets loads only when an explorer is wanted
        from .explorer import ModelExplorer

        return ModelExplorer
    raise AttributeError(f"module 'npusim.model' has no attribute {name!r}")

__all__ = ["capture", "DEVICE", "HOST", "Graph", "Node", "CATEGORIES", "LABELS", "ModelProfile", "metric_docs",
           "OPS", "default_placement", "infer", "OFFLOAD_OPS", "Match", "apply_match", "find_conv_bn_relu",
           "fold_bn", "fuse_conv_bn_relu", "offload", "optimize", "ResNet", "ResNet18", "resnet", "resnet18",
           "Execution", "Step", "evaluate", "execute", "run_model", "schedule", "Event", "DEFAULT_SYSTEM",
           "SystemConfig", "to_chrome_trace", "CONTRAST", "STORY", "Setting", "story_runs", "memo", "story", "SmallCNN", "images", "small_cnn", "charts", "ModelExplorer"]
