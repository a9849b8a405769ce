"""Whole-model profiling on the simulated NPU, and graph-level fusion (lab 09).

::

    from npusim import model as nm
    g = nm.capture(torch_module, x)            # or nm.small_cnn(): the labs' CNN without torch
    before = nm.run_model(g, x)                # every op on the NPU or the host, one timeline
    after = nm.run_model(nm.optimize(g), x)    # BN folded, ReLU fused, pooling and flatten on the device
    print(before.summary(), after.summary())
    nm.charts.timeline(before); nm.charts.breakdown([before, after])
    nm.to_chrome_trace(after, "model.json")    # open in ui.perfetto.dev

Modules: system (host, PCIe, NPU config), graph (the IR), opset (ops: host and device implementations,
costs), maxpool (the device pooling kernel), schedule (the timeline rules), runner (run_model, evaluate),
metrics (ModelProfile: every model-level metric), passes (fold_bn, fuse_conv_bn_relu, offload, optimize),
capture (torch.fx -> graph), zoo (the labs' model), trace (Perfetto), charts, explorer.
"""

from __future__ import annotations

from .capture import capture
from .graph import DEVICE, HOST, Graph, Node
from .metrics import CATEGORIES, LABELS, ModelProfile, metric_docs
from .opset import OPS, default_placement, infer
from .passes import Match, apply_match, find_conv_bn_relu, fold_bn, fuse_conv_bn_relu, offload, optimize
from .runner import evaluate, run_model
from .schedule import Event
from .system import DEFAULT_SYSTEM, SystemConfig
from .trace import to_chrome_trace
from .zoo import SmallCNN, images, small_cnn
from . import charts  # noqa: E402


def __getattr__(name: str):
    if name == "ModelExplorer":  # ipywidgets loads only when an explorer is wanted
        from .explorer import ModelExplorer

        return ModelExplorer
    raise AttributeError(f"module 'npusim.model' has no attribute {name!r}")

__all__ = ["capture", "DEVICE", "HOST", "Graph", "Node", "CATEGORIES", "LABELS", "ModelProfile", "metric_docs",
           "OPS", "default_placement", "infer", "Match", "apply_match", "find_conv_bn_relu", "fold_bn",
           "fuse_conv_bn_relu", "offload", "optimize", "evaluate", "run_model", "Event", "DEFAULT_SYSTEM",
           "SystemConfig", "to_chrome_trace", "SmallCNN", "images", "small_cnn", "charts", "ModelExplorer"]
