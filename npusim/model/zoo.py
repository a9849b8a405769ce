"""The labs' model: a small CNN for 3 x 32 x 32 images, as a torch module and as a graph built without torch.

::

    conv1 3->c1 3x3 -> bn1 -> relu1 -> pool1 2x2          (c1 x 16 x 16)
    conv2 c1->c2 3x3 -> bn2 -> relu2 -> pool2 2x2         (c2 x 8 x 8)
    conv3 c2->c2 3x3 -> bn3 -> add(pool2) -> relu3        (a residual block)
    flatten -> fc (c2 * 8 * 8 -> classes) -> softmax

Four weight layers (3 conv, 1 linear). The convs have no bias (BatchNorm follows), as in ResNets.
Weights are He-normal, BatchNorm statistics random but realistic (mean ~ N(0, 0.2), var in [0.5, 2],
gamma in [0.5, 1.5], beta ~ N(0, 0.2)), so folding them changes the weights for real. ``SmallCNN(seed=s)``
holds exactly the parameters of ``small_cnn(seed=s)``: ``capture(SmallCNN(), x)`` gives the same graph.
The lab's real network, ResNet-18, is in :mod:`npusim.model.resnet`.
"""

from __future__ import annotations

import numpy as np

from .graph import Graph, Node
from .opset import default_placement


def _bn_params(rng: np.random.Generator, c: int) -> dict[str, np.ndarray]:
    return {"mean": rng.normal(0, 0.2, c).astype(np.float32), "var": rng.uniform(0.5, 2.0, c).astype(np.float32),
            "gamma": rng.uniform(0.5, 1.5, c).astype(np.float32), "beta": rng.normal(0, 0.2, c).astype(np.float32)}


def _conv_w(rng: np.random.Generator, cout: int, cin: int, k: int = 3) -> np.ndarray:
    return (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)


def small_cnn(channels: tuple[int, int] = (16, 32), classes: int = 10, image: int = 32, residual: bool = True,
              softmax: bool = True, seed: int = 0) -> Graph:
    """The labs' CNN as a graph (no torch needed), random weights from ``seed``, default placement."""
    rng = np.random.default_rng(seed)
    c1, c2 = channels
    n: list[Node] = [Node("x", "input")]

    def add(name, op, inputs, attrs=None, params=None):
        n.append(Node(name, op, list(inputs), dict(attrs or {}), dict(params or {})))
        return name

    conv = {"stride": 1, "padding": 1, "dilation": 1}
    pool = {"kernel": 2, "stride": 2, "padding": 0}
    t = add("conv1", "conv2d", ["x"], conv, {"w": _conv_w(rng, c1, 3)})
    t = add("bn1", "batchnorm", [t], {"eps": 1e-5}, _bn_params(rng, c1))
    t = add("relu1", "relu", [t])
    t = add("pool1", "maxpool", [t], pool)
    t = add("conv2", "conv2d", [t], conv, {"w": _conv_w(rng, c2, c1)})
    t = add("bn2", "batchnorm", [t], {"eps": 1e-5}, _bn_params(rng, c2))
    t = add("relu2", "relu", [t])
    skip = t = add("pool2", "maxpool", [t], pool)
    if residual:
        t = add("conv3", "conv2d", [t], conv, {"w": _conv_w(rng, c2, c2)})
        t = add("bn3", "batchnorm", [t], {"eps": 1e-5}, _bn_params(rng, c2))
        t = add("add", "add", [t, skip])
        t = add("relu3", "relu", [t])
    t = add("flatten", "flatten", [t])
    feat = c2 * (image // 4) ** 2
    fc = {"w": (rng.standard_normal((classes, feat)) / np.sqrt(feat)).astype(np.float32),
          "b": rng.normal(0, 0.1, classes).astype(np.float32)}
    t = add("fc", "linear", [t], {}, fc)
    if softmax:
        t = add("softmax", "softmax", [t], {"dim": -1})
    add("output", "output", [t])
    return default_placement(Graph(n, "small_cnn"))


def images(batch: int = 4, image: int = 32, seed: int = 0) -> np.ndarray:
    """A batch of random 3-channel images, float32 in [-1, 1] (normalised pixels)."""
    return np.random.default_rng(seed).uniform(-1, 1, (batch, 3, image, image)).astype(np.float32)


def SmallCNN(channels: tuple[int, int] = (16, 32), classes: int = 10, image: int = 32, residual: bool = True,
             softmax: bool = True, seed: int = 0):
    """The same CNN as a ``torch.nn.Module`` in eval mode, with the parameters of ``small_cnn(..., seed)``."""
    import torch
    import torch.nn as nn

    class SmallCNN(nn.Module):  # noqa: N801 (the module class; this function builds it)
        def __init__(self) -> None:
            super().__init__()
            c1, c2 = channels
            self.residual, self.use_softmax = residual, softmax
            self.conv1, self.bn1 = nn.Conv2d(3, c1, 3, padding=1, bias=False), nn.BatchNorm2d(c1)
            self.relu1, self.pool1 = nn.ReLU(), nn.MaxPool2d(2)
            self.conv2, self.bn2 = nn.Conv2d(c1, c2, 3, padding=1, bias=False), nn.BatchNorm2d(c2)
            self.relu2, self.pool2 = nn.ReLU(), nn.MaxPool2d(2)
            if residual:
                self.conv3, self.bn3 = nn.Conv2d(c2, c2, 3, padding=1, bias=False), nn.BatchNorm2d(c2)
                self.relu3 = nn.ReLU()
            self.flatten = nn.Flatten()
            self.fc = nn.Linear(c2 * (image // 4) ** 2, classes)

        def forward(self, x):
            x = self.pool1(self.relu1(self.bn1(self.conv1(x))))
            x = self.pool2(self.relu2(self.bn2(self.conv2(x))))
            if self.residual:
                x = self.relu3(self.bn3(self.conv3(x)) + x)
            x = self.fc(self.flatten(x))
            return torch.softmax(x, dim=-1) if self.use_softmax else x

    model = SmallCNN()
    load_params(model, small_cnn(channels, classes, image, residual, softmax, seed))
    return model.eval()


def load_params(model, graph: Graph) -> None:
    """Copy a graph's parameters into the torch module it was built for (node name = the module's path with
    ``_`` for ``.``, as ``torch.fx`` names it): conv and linear weights and biases, BatchNorm statistics."""
    import torch
    import torch.nn as nn

    with torch.no_grad():
        for path, m in model.named_modules():
            name = path.replace(".", "_")
            if not path or name not in graph:
                continue
            p = graph.node(name).params
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.from_numpy(p["mean"]))
                m.running_var.copy_(torch.from_numpy(p["var"]))
                m.weight.copy_(torch.from_numpy(p["gamma"]))
                m.bias.copy_(torch.from_numpy(p["beta"]))
            elif isinstance(m, (nn.Conv2d, nn.Linear)):
                m.weight.copy_(torch.from_numpy(p["w"]))
                if m.bias is not None:
                    m.bias.copy_(torch.from_numpy(p["b"]))
