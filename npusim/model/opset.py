"""The ops a model graph may hold: shape and dtype inference, a host (numpy) implementation with its cost,
and, where the NPU has one, a device implementation that runs on the simulator.

=========  =======================================  ==============================================  =======
op         device implementation (launches)         host implementation (cost model counts)         default
=========  =======================================  ==============================================  =======
conv2d     ``npusim.ops`` conv2d (+bias, relu)      im2col + matmul (2 x MACs, in + out + w)        device
batchnorm  none: the NPU op library lacks it        ``(x - mean) / sqrt(var + eps) * gamma + beta``  host
relu       ``npusim.ops`` relu                      max(x, 0) (1 FLOP, in + out)                    device
add        ``npusim.ops`` add                       x + y (1 FLOP, 2 in + out)                      device
maxpool    :mod:`.pooling` (2x2/s2, 3x3/s2/p1)      window max (k*k FLOP per output, in + out)      host
avgpool    :mod:`.pooling` (global average)         mean over H, W (1 FLOP per input, in + out)     host
flatten    a reshape of the device tensor: free     a view: only the dispatch overhead              host
linear     ``npusim.ops`` matmul, then add bias     x @ w.T + b (2 x MACs, in + out + w)            device
softmax    ``npusim.ops`` softmax (last axis)       exp / sum (5 FLOP per element, in + out)        device
=========  =======================================  ==============================================  =======

Defaults mirror a framework whose NPU op library has conv2d, relu, add, matmul and softmax only: the rest
falls back to the host. :func:`npusim.model.passes.offload` moves maxpool, avgpool and flatten to the
device.
Host ops compute in float32 and round their result to the tensor's dtype; weights are constants,
converted (dtype, layout, broadcast bias) once when the model is loaded, so that work is not timed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import ops
from ..config import HardwareConfig
from ..errors import UsageError
from ..profile import Profile
from . import pooling as _pooling
from .graph import DEVICE, HOST, Graph, Node

Launches = list[tuple[str, Profile, bool]]
"""A device op's kernels in execution order: (name, profile, main), ``main`` marking the kernel that does
the op's useful Cube work (not a layout transform or a separate ReLU)."""

#: Main kernels of the Cube operators (an op's other launches are layout transforms or a separate ReLU).
CUBE_KERNELS = frozenset({"conv2d", "matmul"})


def in_order(launches: list[tuple[str, Profile]], cube: bool) -> Launches:
    """``OpResult.launches`` (already in execution order), each marked whether it is the op's Cube kernel."""
    return [(name, prof, cube and name in CUBE_KERNELS) for name, prof in launches]


def pair(v) -> tuple[int, int]:
    """``3`` -> ``(3, 3)``; a pair stays a pair."""
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise UsageError(f"expected an int or a pair, got {v!r}")
        return int(v[0]), int(v[1])
    return int(v), int(v)


def _numel(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


# --- host implementations (float32) ------------------------------------------------------------------
def conv2d_host(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride=1, padding=0, dilation=1,
                relu: bool = False) -> np.ndarray:
    """NCHW convolution in float32 (im2col with numpy), the reference of the device op."""
    (sh, sw), (ph, pw), (dh, dw) = pair(stride), pair(padding), pair(dilation)
    x = np.pad(x.astype(np.float32), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    cout, cin, kh, kw = w.shape
    n, _, h, wd = x.shape
    ho, wo = (h - dh * (kh - 1) - 1) // sh + 1, (wd - dw * (kw - 1) - 1) // sw + 1
    cols = np.empty((n, cin, kh, kw, ho, wo), np.float32)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = x[:, :, i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw]
    y = np.einsum("nckluv,ockl->nouv", cols, w.astype(np.float32), optimize=True)
    if b is not None:
        y += b.astype(np.float32)[None, :, None, None]
    return np.maximum(y, 0) if relu else y


def batchnorm_host(x, mean, var, gamma, beta, eps) -> np.ndarray:
    """Inference BatchNorm over the channel axis 1: ``(x - mean) / sqrt(var + eps) * gamma + beta``."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    scale = (gamma / np.sqrt(var + eps)).astype(np.float32)
    return (x.astype(np.float32) - mean.reshape(shape)) * scale.reshape(shape) + beta.reshape(shape)


def maxpool_host(x, kernel, stride, padding=0) -> np.ndarray:
    (kh, kw), (sh, sw), (ph, pw) = pair(kernel), pair(stride), pair(padding)
    x = np.pad(x.astype(np.float32), ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=-np.inf)
    n, c, h, w = x.shape
    ho, wo = (h - kh) // sh + 1, (w - kw) // sw + 1
    out = np.full((n, c, ho, wo), -np.inf, np.float32)
    for i in range(kh):
        for j in range(kw):
            np.maximum(out, x[:, :, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw], out=out)
    return out


def avgpool_host(x) -> np.ndarray:
    """Global average pooling (``AdaptiveAvgPool2d(1)``): the mean over H and W, shape (N, C, 1, 1)."""
    return x.astype(np.float32).mean(axis=(2, 3), keepdims=True)


def softmax_host(x) -> np.ndarray:
    x = x.astype(np.float32)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# --- the op table --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OpSpec:
    """What the runner needs to know about one op (see the module table)."""

    name: str
    shape: Callable[[Node, list[tuple]], tuple]
    host: Callable[[Node, list[np.ndarray]], np.ndarray]
    host_cost: Callable[[Node, list[tuple], tuple, list[int], int], tuple[float, float]]
    device: Callable[[Node, list[np.ndarray], HardwareConfig, str], tuple[np.ndarray, Launches]] | None = None
    """``device(node, inputs, hardware, sanitize) -> (output, launches)``: the op on the simulated NPU."""
    device_ok: Callable[[Node, list[tuple], list[np.dtype]], bool] = lambda node, shapes, dtypes: True
    default_placement: str = HOST
    float32_out: bool = False

    def on_device(self, node: Node, shapes: list[tuple], dtypes: list[np.dtype]) -> bool:
        """Whether the device can run this node (an implementation exists and the shapes fit it)."""
        return self.device is not None and self.device_ok(node, shapes, dtypes)


def _io_bytes(in_shapes, out_shape, in_isz, out_isz) -> int:
    return sum(_numel(s) * i for s, i in zip(in_shapes, in_isz)) + _numel(out_shape) * out_isz


# conv2d -----------------------------------------------------------------------------------------------
def _conv_shape(node, shapes):
    n, c, h, w = shapes[0]
    cout, cin, kh, kw = node.params["w"].shape
    if cin != c:
        raise UsageError(f"{node.name}: conv2d weight has {cin} input channels, its input {c}")
    (sh, sw), (ph, pw), (dh, dw) = (pair(node.attrs.get(k, d)) for k, d in
                                    (("stride", 1), ("padding", 0), ("dilation", 1)))
    return (n, cout, (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1)


def _conv_host(node, xs):
    a = node.attrs
    return conv2d_host(xs[0], node.params["w"], node.params.get("b"), a.get("stride", 1), a.get("padding", 0),
                       a.get("dilation", 1), bool(a.get("relu", False)))


def _conv_cost(node, shapes, out, isz, osz):
    w = node.params["w"]
    macs = _numel(out) * _numel(w.shape[1:])
    return 2.0 * macs, _io_bytes(shapes, out, isz, osz) + w.size * isz[0]


def _conv_device(node, xs, cfg, sanitize):
    x = xs[0]
    a = node.attrs
    b = node.params.get("b")
    r = ops.call("conv2d", x, node.params["w"].astype(x.dtype), None if b is None else b.astype(x.dtype),
                 stride=a.get("stride", 1), padding=a.get("padding", 0), dilation=a.get("dilation", 1),
                 relu=bool(a.get("relu", False)), variant=a.get("variant", "img2col"), config=cfg, sanitize=sanitize)
    return r.out, in_order(r.launches, cube=True)


def _float_act(node, shapes, dtypes):
    return all(np.dtype(d).name in ("float16", "float32") for d in dtypes)


# batchnorm --------------------------------------------------------------------------------------------
def _bn_host(node, xs):
    p = node.params
    return batchnorm_host(xs[0], p["mean"], p["var"], p["gamma"], p["beta"], node.attrs.get("eps", 1e-5))


def _elementwise_cost(flops_per_elem):
    def cost(node, shapes, out, isz, osz):
        return flops_per_elem * _numel(out), _io_bytes(shapes, out, isz, osz)
    return cost


# relu / add / softmax ---------------------------------------------------------------------------------
def _same(node, shapes):
    for s in shapes[1:]:
        if tuple(s) != tuple(shapes[0]):
            raise UsageError(f"{node.name}: {node.op} needs inputs of one shape (no broadcasting), got {shapes}")
    return tuple(shapes[0])


def _relu_device(node, xs, cfg, sanitize):
    r = ops.call("relu", xs[0], config=cfg, sanitize=sanitize)
    return r.out, in_order(r.launches, cube=False)


def _add_device(node, xs, cfg, sanitize):
    r = ops.call("add", xs[0], xs[1].astype(xs[0].dtype), config=cfg, sanitize=sanitize)
    return r.out, in_order(r.launches, cube=False)


def _softmax_ok(node, shapes, dtypes):
    dim = node.attrs.get("dim", -1)
    return dim in (-1, len(shapes[0]) - 1) and _float_act(node, shapes, dtypes)


def _softmax_device(node, xs, cfg, sanitize):
    r = ops.call("softmax", xs[0], config=cfg, sanitize=sanitize)
    return r.out, in_order(r.launches, cube=False)


# maxpool ----------------------------------------------------------------------------------------------
def _pool_shape(node, shapes):
    n, c, h, w = shapes[0]
    (kh, kw), (sh, sw), (ph, pw) = (pair(node.attrs[k]) for k in ("kernel", "stride", "padding"))
    return (n, c, (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1)


def _pool_host(node, xs):
    a = node.attrs
    return maxpool_host(xs[0], a["kernel"], a["stride"], a["padding"])


def _pool_cost(node, shapes, out, isz, osz):
    kh, kw = pair(node.attrs["kernel"])
    return kh * kw * _numel(out), _io_bytes(shapes, out, isz, osz)


def _pool_ok(node, shapes, dtypes):
    k, s, p = (pair(node.attrs[key]) for key in ("kernel", "stride", "padding"))
    square = k[0] == k[1] and s[0] == s[1] and p[0] == p[1]
    return (square and _pooling.supports(tuple(shapes[0]), k[0], s[0], p[0]) and _float_act(node, shapes, dtypes))


def _pool_device(node, xs, cfg, sanitize):
    k, s, p = (pair(node.attrs[key])[0] for key in ("kernel", "stride", "padding"))
    y, prof = _pooling.maxpool_device(xs[0], k, s, p, config=cfg, sanitize=sanitize)
    return y, [(f"maxpool{k}x{k}", prof, False)]


# avgpool (global) -------------------------------------------------------------------------------------
def _avgpool_shape(node, shapes):
    n, c, _, _ = shapes[0]
    return (n, c, 1, 1)


def _avgpool_cost(node, shapes, out, isz, osz):
    return float(_numel(shapes[0])), _io_bytes(shapes, out, isz, osz)


def _avgpool_device(node, xs, cfg, sanitize):
    y, prof = _pooling.avgpool_device(xs[0], config=cfg, sanitize=sanitize)
    return y, [("avgpool", prof, False)]


# flatten ----------------------------------------------------------------------------------------------
def _flatten_shape(node, shapes):
    s = shapes[0]
    return (s[0], _numel(s[1:]))


def _flatten_host(node, xs):
    return xs[0].reshape(xs[0].shape[0], -1)


def _flatten_device(node, xs, cfg, sanitize):
    return xs[0].reshape(xs[0].shape[0], -1), []  # a reshape of a contiguous tensor: no kernel, no copy


# linear -----------------------------------------------------------------------------------------------
def _linear_shape(node, shapes):
    s = shapes[0]
    out_f, in_f = node.params["w"].shape
    if len(s) != 2 or s[1] != in_f:
        raise UsageError(f"{node.name}: linear takes (N, {in_f}), got {s}")
    return (s[0], out_f)


def _linear_host(node, xs):
    y = xs[0].astype(np.float32) @ node.params["w"].astype(np.float32).T
    b = node.params.get("b")
    return y + b.astype(np.float32) if b is not None else y


def _linear_cost(node, shapes, out, isz, osz):
    w = node.params["w"]
    return 2.0 * _numel(out) * w.shape[1], _io_bytes(shapes, out, isz, osz) + w.size * isz[0]


def _linear_ok(node, shapes, dtypes):
    return np.dtype(dtypes[0]).name == "float16"  # the Cube multiplies fp16 (fp32 out); no fp32 matmul op


def _linear_device(node, xs, cfg, sanitize):
    x = xs[0]
    w_t = np.ascontiguousarray(node.params["w"].T.astype(np.float16))  # a constant: prepared at load time
    r = ops.call("matmul", x, w_t, config=cfg, sanitize=sanitize)
    launches = in_order(r.launches, cube=True)
    y = r.out
    b = node.params.get("b")
    if b is not None:  # npusim.ops add does not broadcast: the bias row is repeated once, at load time
        rb = ops.call("add", y, np.ascontiguousarray(np.broadcast_to(b.astype(y.dtype), y.shape)), config=cfg,
                      sanitize=sanitize)
        launches += in_order(rb.launches, cube=False)
        y = rb.out
    return y, launches


def _passthrough_shape(node, shapes):
    return tuple(shapes[0])


OPS: dict[str, OpSpec] = {
    "input": OpSpec("input", _passthrough_shape, lambda n, xs: xs[0], lambda *a: (0.0, 0.0)),
    "output": OpSpec("output", _passthrough_shape, lambda n, xs: xs[0], lambda *a: (0.0, 0.0)),
    "conv2d": OpSpec("conv2d", _conv_shape, _conv_host, _conv_cost, _conv_device, _float_act, DEVICE),
    "batchnorm": OpSpec("batchnorm", _passthrough_shape, _bn_host, _elementwise_cost(2)),
    "relu": OpSpec("relu", _same, lambda n, xs: np.maximum(xs[0].astype(np.float32), 0), _elementwise_cost(1),
                   _relu_device, _float_act, DEVICE),
    "add": OpSpec("add", _same, lambda n, xs: xs[0].astype(np.float32) + xs[1].astype(np.float32),
                  _elementwise_cost(1), _add_device, _float_act, DEVICE),
    "maxpool": OpSpec("maxpool", _pool_shape, _pool_host, _pool_cost, _pool_device, _pool_ok, HOST),
    "avgpool": OpSpec("avgpool", _avgpool_shape, lambda n, xs: avgpool_host(xs[0]), _avgpool_cost, _avgpool_device,
                      _float_act, HOST),
    "flatten": OpSpec("flatten", _flatten_shape, _flatten_host, lambda *a: (0.0, 0.0), _flatten_device,
                      lambda n, s, d: True, HOST),
    "linear": OpSpec("linear", _linear_shape, _linear_host, _linear_cost, _linear_device, _linear_ok, DEVICE,
                     float32_out=True),
    "softmax": OpSpec("softmax", _passthrough_shape, lambda n, xs: softmax_host(xs[0]), _elementwise_cost(5),
                      _softmax_device, _softmax_ok, DEVICE),
}
"""Every op a graph may hold, by name."""


def spec(op: str) -> OpSpec:
    try:
        return OPS[op]
    except KeyError:
        raise UsageError(f"unknown op {op!r}; a model graph supports {sorted(OPS)}") from None


def infer(graph: Graph, input_shapes: dict[str, tuple] | tuple,
          activation_dtype: str = "float16") -> tuple[dict[str, tuple], dict[str, np.dtype]]:
    """Shapes and dtypes of every tensor for the given input shape(s) (one shape: the single input)."""
    if not isinstance(input_shapes, dict):
        ins = graph.inputs
        if len(ins) != 1:
            raise UsageError(f"graph '{graph.name}' has {len(ins)} inputs: pass a dict of shapes")
        input_shapes = {ins[0].name: tuple(input_shapes)}
    act = np.dtype(activation_dtype)
    shapes: dict[str, tuple] = {}
    dtypes: dict[str, np.dtype] = {}
    for node in graph.nodes:
        s = spec(node.op)
        if node.op == "input":
            shapes[node.name] = tuple(int(d) for d in input_shapes[node.name])
            dtypes[node.name] = act
            continue
        in_shapes = [shapes[i] for i in node.inputs]
        shapes[node.name] = tuple(int(d) for d in s.shape(node, in_shapes))
        if s.float32_out:
            dtypes[node.name] = np.dtype(np.float32)
        else:
            dtypes[node.name] = dtypes[node.inputs[0]]
    return shapes, dtypes


def default_placement(graph: Graph) -> Graph:
    """A copy with every node at its op's default placement (the fallback picture of a framework whose NPU
    library has only conv2d, relu, add, matmul and softmax)."""
    g = graph.copy()
    for n in g.nodes:
        n.placement = spec(n.op).default_placement if n.op not in ("input", "output") else HOST
    return g
