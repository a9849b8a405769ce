"""Graph passes: fold BatchNorm into the conv before it, fuse the ReLU after it, move what the device can run
onto the device. Every pass returns a new graph (its input is never changed) and is idempotent.

**BN folding.** Inference BatchNorm is an affine map per channel, ``y = (x - mean) * s + beta`` with
``s = gamma / sqrt(var + eps)``. After ``x = conv(input, w) + b`` it is again a convolution::

    w' = w * s[:, None, None, None]        b' = (b - mean) * s + beta      (b = 0 when the conv has none)

so the BN node disappears (no kernel, no host op, no copies). Folding happens once, on the host, in float32,
before the weights are converted for the device.

**ReLU fusion.** A ReLU whose only input is the conv's output becomes ``conv2d(relu=True)``: the conv op
applies it on the way out (on A2, in Fixpipe [S1]) instead of launching a vector kernel that reads the
whole tensor from GM and writes it back.

**Offload.** Nodes whose op the device can run for their shapes (the pooling kernels of
:mod:`npusim.model.pooling`; flatten, a reshape of a device tensor) are placed on the device, so tensors
stay there between consecutive device ops and copies happen only at the graph's ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from .graph import DEVICE, Graph, Node
from .opset import infer, spec


def fold_bn(w: np.ndarray, b: np.ndarray | None, mean: np.ndarray, var: np.ndarray, gamma: np.ndarray,
            beta: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Weights and bias of ``bn(conv(x, w) + b)`` as one conv: ``(w * s, (b - mean) * s + beta)`` with
    ``s = gamma / sqrt(var + eps)`` per output channel; float32."""
    s = (gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps))
    b0 = np.zeros_like(s) if b is None else b.astype(np.float64)
    return ((w.astype(np.float64) * s[:, None, None, None]).astype(np.float32),
            ((b0 - mean.astype(np.float64)) * s + beta.astype(np.float64)).astype(np.float32))


@dataclass(frozen=True)
class Match:
    """A conv, the BatchNorm that is its only user (or None), the ReLU after them (or None)."""

    conv: str
    bn: str | None
    relu: str | None


def _only_user(graph: Graph, name: str, op: str) -> Node | None:
    users = graph.users(name)
    if len(users) == 1 and users[0].op == op and users[0].inputs == [name]:
        return users[0]
    return None


def find_conv_bn_relu(graph: Graph, *, bn: bool = True, relu: bool = True) -> list[Match]:
    """Every conv2d followed by a BatchNorm that only it feeds and/or a ReLU that only the chain feeds.
    A conv that already applies ReLU, or a chain with neither, is not a match."""
    out = []
    for node in graph.nodes:
        if node.op != "conv2d" or node.attrs.get("relu"):
            continue
        tail = node.name
        bn_node = _only_user(graph, tail, "batchnorm") if bn else None
        if bn_node is not None:
            tail = bn_node.name
        relu_node = _only_user(graph, tail, "relu") if relu else None  # right after the conv, or after its BN
        if bn_node is not None or relu_node is not None:
            out.append(Match(node.name, bn_node.name if bn_node else None, relu_node.name if relu_node else None))
    return out


def apply_match(graph: Graph, m: Match, fold: Callable = fold_bn) -> None:
    """Rewrite one match in place: fold the BN into the conv's weights, set ``relu=True``, bypass both."""
    conv = graph.node(m.conv)
    if m.bn is not None:
        bn = graph.node(m.bn)
        p = bn.params
        w, b = fold(conv.params["w"], conv.params.get("b"), p["mean"], p["var"], p["gamma"], p["beta"],
                    bn.attrs.get("eps", 1e-5))
        conv.params = {"w": np.asarray(w, np.float32), "b": np.asarray(b, np.float32)}
        graph.bypass(m.bn)
        conv.fused.append(m.bn)
    if m.relu is not None:
        conv.attrs["relu"] = True
        graph.bypass(m.relu)
        conv.fused.append(m.relu)


def fuse_conv_bn_relu(graph: Graph, *, bn: bool = True, relu: bool = True, fold: Callable = fold_bn) -> Graph:
    """A new graph with every conv -> BatchNorm -> ReLU chain (or conv -> BN, conv -> ReLU) as one conv2d.
    ``bn=False`` leaves BatchNorms alone; ``relu=False`` leaves ReLUs alone."""
    g = graph.copy()
    for m in find_conv_bn_relu(g, bn=bn, relu=relu):
        apply_match(g, m, fold)
    return g


OFFLOAD_OPS = ("maxpool", "avgpool", "flatten")
"""Ops :func:`offload` moves to the device by default (every op with a device kernel that starts on the host)."""


def offload(graph: Graph, ops: Iterable[str] = OFFLOAD_OPS, input_shape: tuple | None = None,
            activation_dtype: str = "float16") -> Graph:
    """A new graph with the nodes of ``ops`` placed on the device where the device can run them. The
    shape check needs ``input_shape`` (default: the device can run them at any shape it supports, checked
    again when the model runs)."""
    g = graph.copy()
    ops = set(ops)
    shapes = dtypes = None
    if input_shape is not None:
        shapes, dtypes = infer(g, input_shape, activation_dtype)
    for n in g.nodes:
        if n.op not in ops or n.placement == DEVICE:
            continue
        s = spec(n.op)
        if s.device is None:
            continue
        if shapes is not None and not s.on_device(n, [shapes[i] for i in n.inputs], [dtypes[i] for i in n.inputs]):
            continue
        n.placement = DEVICE
    return g


def optimize(graph: Graph, *, fold_bn: bool = True, fuse_relu: bool = True,
             offload_ops: Iterable[str] = OFFLOAD_OPS, input_shape: tuple | None = None) -> Graph:
    """The whole graph pass: :func:`fuse_conv_bn_relu` then :func:`offload`. Idempotent."""
    g = fuse_conv_bn_relu(graph, bn=fold_bn, relu=fuse_relu) if (fold_bn or fuse_relu) else graph.copy()
    return offload(g, offload_ops, input_shape)
