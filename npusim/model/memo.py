"""Simulate each kernel once: the device ops' profiles, memoised by everything their timing depends on.

A kernel's profile depends on the operator, its inputs' shapes and dtypes, its attributes (stride,
padding, fused ReLU, variant...), whether it has a bias, the tiling (a function of all these and the NPU,
so not a separate key), the NPU configuration, the sanitizer mode and the L2 state at the launch; never
on the values it computes (no kernel of the library branches on data). The model runner launches every
kernel with a cold L2 (no :func:`npusim.shared_l2` around it), so the key is::

    (op, input shapes, input dtypes, attributes, parameter shapes, hardware.key, sanitize, "cold L2")

When a node's key was simulated before (a repeated layer of the network, or the same layer in another
setting of the explorer), :func:`npusim.model.runner.execute` reuses those profiles and computes the
node's output on the host instead (:func:`device_numerics`): the op in float32 with the device's inputs
(activations and weights rounded to the device dtype as the device op takes them), rounded to the
output dtype. The timing is then exactly the simulated one; the values agree with the simulated kernel
to the device's rounding (fp32 accumulation in another order), as ``tests/model/test_model_memo.py``
checks. Inside a ``shared_l2`` block (an L2 state the key cannot name) nothing is reused.
"""

from __future__ import annotations


import numpy as np

from ..config import HardwareConfig
from ..l2 import current_shared
from ..memo import BoundedCache, freeze
from .graph import Node
from .opset import Launches, spec

_CACHE: BoundedCache[Launches] = BoundedCache(2000)
"""Memoised launches by :func:`key`, for the whole Python session (a profile holds no GM data)."""


def key(node: Node, shapes: list[tuple], dtypes: list[np.dtype], hardware: HardwareConfig,
        sanitize: str) -> tuple | None:
    """The memo key of a device node (module docstring), or None when the L2 state is not cold."""
    if current_shared() is not None:
        return None
    params = tuple(sorted((k, tuple(np.shape(v))) for k, v in node.params.items()))
    return (node.op, tuple(map(tuple, shapes)), tuple(np.dtype(d).name for d in dtypes), freeze(node.attrs),
            params, hardware.key, sanitize, "cold L2")


def lookup(k: tuple | None) -> Launches | None:
    return _CACHE.get(k)


def store(k: tuple | None, launches: Launches) -> None:
    _CACHE.put(k, launches)


def clear() -> None:
    """Forget every memoised profile (the next run simulates every kernel again)."""
    _CACHE.clear()


def size() -> int:
    """Memoised nodes."""
    return len(_CACHE)


def device_numerics(node: Node, xs: list[np.ndarray], out_dtype: np.dtype) -> np.ndarray:
    """A device node's output computed on the host (module docstring): weights rounded to the activation
    dtype as the device op takes them, then the op in float32, rounded to ``out_dtype``."""
    if node.op in ("conv2d", "linear") and node.params:
        # conv2d: weights and bias in the input's dtype; linear: fp16 weights, its bias added in fp32
        as_dtype = {"conv2d": {"w": xs[0].dtype, "b": xs[0].dtype}, "linear": {"w": np.float16, "b": np.float32}}
        node = Node(node.name, node.op, list(node.inputs), dict(node.attrs),
                    {k: np.asarray(v).astype(as_dtype[node.op].get(k, np.float32)).astype(np.float32)
                     for k, v in node.params.items()}, node.placement)
    return np.asarray(spec(node.op).host(node, xs)).astype(out_dtype)
