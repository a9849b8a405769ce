"""Capture a ``torch.nn.Module`` as a model graph with ``torch.fx`` (needs torch; nothing else here does).

``torch.fx.symbolic_trace`` records the module's forward as a graph of calls. Each call becomes one
:class:`~npusim.model.graph.Node` with the module's parameters as float32 numpy arrays:

=====================================================  ===========  ===========================================
torch                                                  op           kept
=====================================================  ===========  ===========================================
``nn.Conv2d`` (groups=1, zero padding)                 conv2d       weight, bias, stride, padding, dilation
``nn.BatchNorm2d`` (eval: running statistics)          batchnorm    running_mean/var, weight, bias, eps
``nn.ReLU``, ``F.relu``, ``torch.relu``, ``.relu()``   relu
``nn.MaxPool2d``, ``F.max_pool2d``                     maxpool      kernel, stride, padding (no dilation/ceil)
``nn.AdaptiveAvgPool2d``, ``F.adaptive_avg_pool2d``   avgpool      output size 1 (global average) only
``nn.Flatten``, ``torch.flatten``, ``.flatten()``      flatten      from dim 1 to the end only
``nn.Linear``                                          linear       weight, bias
``+``, ``torch.add``                                   add          two tensors of one shape
``nn.Softmax``, ``F.softmax``, ``torch.softmax``       softmax      over the last dimension
``nn.Identity``, ``nn.Dropout`` (eval)                 (removed)
=====================================================  ===========  ===========================================

Anything else raises a UsageError naming the call. Nodes start at their op's default placement
(:func:`npusim.model.opset.default_placement`).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..errors import UsageError
from .graph import Graph, Node
from .opset import default_placement, infer


def _np(t) -> np.ndarray | None:
    return None if t is None else t.detach().cpu().numpy().astype(np.float32).copy()


def _one(v) -> Any:
    """A pair of equal ints -> the int (for readable attributes)."""
    if isinstance(v, (tuple, list)) and len(v) == 2 and v[0] == v[1]:
        return int(v[0])
    return tuple(int(a) for a in v) if isinstance(v, (tuple, list)) else int(v)


def _flatten_ok(start: int, end: int, where: str) -> None:
    if start != 1 or end != -1:
        raise UsageError(f"{where}: only flatten(start_dim=1, end_dim=-1) is supported, got ({start}, {end})")


def _global_pool_ok(size, where: str) -> None:
    if size not in (1, (1, 1), [1, 1]):
        raise UsageError(f"{where}: only adaptive average pooling to 1 x 1 (global) is supported, got {size!r}")


def capture(module, example_input, name: str | None = None) -> Graph:
    """The model graph of ``module`` (put in eval mode) for inputs shaped like ``example_input``."""
    import torch
    import torch.fx
    import torch.nn as nn
    import torch.nn.functional as F

    module.eval()
    gm = torch.fx.symbolic_trace(module)
    mods = dict(gm.named_modules())
    nodes: list[Node] = []
    alias: dict[str, str] = {}  # removed nodes (identity, dropout) -> the tensor they pass on

    def src(a) -> str:
        if not isinstance(a, torch.fx.Node):
            raise UsageError(f"only tensors produced by the model can be op inputs, got {a!r}")
        return alias.get(a.name, a.name)

    def arg(n, i, key, default):
        if len(n.args) > i:
            return n.args[i]
        return n.kwargs.get(key, default)

    for n in gm.graph.nodes:
        where = f"{n.op} {n.target}"
        if n.op == "placeholder":
            nodes.append(Node(n.name, "input"))
        elif n.op == "output":
            out = n.args[0]
            if isinstance(out, (tuple, list)):
                if len(out) != 1:
                    raise UsageError("the model must return one tensor")
                out = out[0]
            nodes.append(Node("output", "output", [src(out)]))
        elif n.op == "call_module":
            m = mods[n.target]
            x = src(n.args[0])
            if isinstance(m, (nn.Identity, nn.Dropout)):
                alias[n.name] = x
            elif isinstance(m, nn.Conv2d):
                if m.groups != 1 or m.padding_mode != "zeros" or isinstance(m.padding, str):
                    raise UsageError(f"{n.target}: only groups=1, zero padding given as numbers is supported")
                params = {"w": _np(m.weight)}
                if m.bias is not None:
                    params["b"] = _np(m.bias)
                nodes.append(Node(n.name, "conv2d", [x], {"stride": _one(m.stride), "padding": _one(m.padding),
                                                           "dilation": _one(m.dilation)}, params))
            elif isinstance(m, nn.BatchNorm2d):
                if m.running_mean is None:
                    raise UsageError(f"{n.target}: BatchNorm without running statistics cannot be inferred")
                params = {"mean": _np(m.running_mean), "var": _np(m.running_var),
                          "gamma": _np(m.weight) if m.weight is not None else np.ones(m.num_features, np.float32),
                          "beta": _np(m.bias) if m.bias is not None else np.zeros(m.num_features, np.float32)}
                nodes.append(Node(n.name, "batchnorm", [x], {"eps": float(m.eps)}, params))
            elif isinstance(m, nn.ReLU):
                nodes.append(Node(n.name, "relu", [x]))
            elif isinstance(m, nn.MaxPool2d):
                if _one(m.dilation) != 1 or m.ceil_mode or m.return_indices:
                    raise UsageError(f"{n.target}: MaxPool2d with dilation, ceil_mode or indices is not supported")
                nodes.append(Node(n.name, "maxpool", [x], {"kernel": _one(m.kernel_size),
                                                            "stride": _one(m.stride or m.kernel_size),
                                                            "padding": _one(m.padding)}))
            elif isinstance(m, nn.AdaptiveAvgPool2d):
                _global_pool_ok(m.output_size, n.target)
                nodes.append(Node(n.name, "avgpool", [x]))
            elif isinstance(m, nn.Flatten):
                _flatten_ok(m.start_dim, m.end_dim, n.target)
                nodes.append(Node(n.name, "flatten", [x]))
            elif isinstance(m, nn.Linear):
                params = {"w": _np(m.weight)}
                if m.bias is not None:
                    params["b"] = _np(m.bias)
                nodes.append(Node(n.name, "linear", [x], {}, params))
            elif isinstance(m, nn.Softmax):
                nodes.append(Node(n.name, "softmax", [x], {"dim": -1 if m.dim is None else int(m.dim)}))
            else:
                raise UsageError(f"{where}: {type(m).__name__} is not supported (see npusim.model.capture)")
        elif n.op == "call_function":
            f = n.target
            if f in (operator.add, torch.add):
                if len(n.args) != 2 or n.kwargs.get("alpha", 1) != 1:
                    raise UsageError(f"{where}: only a + b of two tensors is supported")
                nodes.append(Node(n.name, "add", [src(n.args[0]), src(n.args[1])]))
            elif f in (F.relu, torch.relu):
                nodes.append(Node(n.name, "relu", [src(n.args[0])]))
            elif f is F.adaptive_avg_pool2d:
                _global_pool_ok(arg(n, 1, "output_size", None), where)
                nodes.append(Node(n.name, "avgpool", [src(n.args[0])]))
            elif f is torch.flatten:
                _flatten_ok(arg(n, 1, "start_dim", 0), arg(n, 2, "end_dim", -1), where)
                nodes.append(Node(n.name, "flatten", [src(n.args[0])]))
            elif f in (F.softmax, torch.softmax):
                nodes.append(Node(n.name, "softmax", [src(n.args[0])], {"dim": int(arg(n, 1, "dim", -1))}))
            elif f is F.max_pool2d:
                k = arg(n, 1, "kernel_size", None)
                nodes.append(Node(n.name, "maxpool", [src(n.args[0])],
                                  {"kernel": _one(k), "stride": _one(arg(n, 2, "stride", None) or k),
                                   "padding": _one(arg(n, 3, "padding", 0))}))
            else:
                raise UsageError(f"{where}: the function {getattr(f, '__name__', f)} is not supported")
        elif n.op == "call_method":
            x = src(n.args[0])
            if n.target == "relu":
                nodes.append(Node(n.name, "relu", [x]))
            elif n.target == "flatten":
                _flatten_ok(arg(n, 1, "start_dim", 0), arg(n, 2, "end_dim", -1), where)
                nodes.append(Node(n.name, "flatten", [x]))
            elif n.target == "softmax":
                nodes.append(Node(n.name, "softmax", [x], {"dim": int(arg(n, 1, "dim", -1))}))
            else:
                raise UsageError(f"{where}: the method .{n.target}() is not supported")
        else:
            raise UsageError(f"{where}: not supported")
    graph = Graph(nodes, name or type(module).__name__)
    graph.validate()
    shapes, _ = infer(graph, tuple(example_input.shape))
    for node in graph.nodes:  # softmax over dim 1 of a 2-D tensor is the last dim
        if node.op == "softmax" and node.attrs["dim"] == len(shapes[node.name]) - 1:
            node.attrs["dim"] = -1
    return default_placement(graph)
