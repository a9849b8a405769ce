"""ResNets for the whole-model lab: ResNet-18 (He et al. 2015, torchvision's layout) and smaller ResNet-style
nets for quick runs, as graphs built without torch and as the equivalent ``torch.nn.Module``.

::

    conv1 7x7/2 (3 -> w) -> bn1 -> relu -> maxpool 3x3/2 pad 1
    layer1..layer4: BasicBlocks (3x3 conv -> BN -> ReLU -> 3x3 conv -> BN, + the block's input -> ReLU),
                    w, 2w, 4w, 8w channels; the first block of layers 2-4 halves H and W (stride 2) and
                    its shortcut is a 1x1/2 conv -> BN ("downsample")
    avgpool (global) -> flatten -> fc (8w -> classes)

``resnet18()`` is ``resnet((2, 2, 2, 2), width=64)``: 20 convolutions (17 3x3, the 7x7 stem, three 1x1
shortcuts), 20 BatchNorms, 1.82 GMACs per 224 x 224 image. The graph does not depend on the image size
(the average pool is global): any size from 32 x 32 up, a multiple of 32, runs.

Node names are the ones ``torch.fx`` gives the module (``layer2_0_downsample_0``, ``add_3``, ...), so
``capture(ResNet(...), x)`` and ``resnet(...)`` build the same graph, parameters included. Weights are
He-normal; BatchNorm statistics are random but realistic (as :mod:`npusim.model.zoo`), so folding them
changes the weights for real. The convolutions have no bias (BatchNorm follows), as in torchvision.
"""

from __future__ import annotations

import numpy as np

from .graph import Graph, Node
from .opset import default_placement
from .zoo import _bn_params, _conv_w, load_params

RESNET18_BLOCKS = (2, 2, 2, 2)


def resnet(blocks: tuple[int, ...] = RESNET18_BLOCKS, width: int = 64, classes: int = 1000, seed: int = 0,
           name: str | None = None) -> Graph:
    """A ResNet of BasicBlocks as a graph (no torch needed): ``blocks[i]`` blocks in stage ``i`` with
    ``width * 2**i`` channels; random weights from ``seed``; default placement."""
    if not blocks or any(b < 1 for b in blocks) or width < 1:
        from ..errors import UsageError

        raise UsageError(f"resnet needs at least one stage of >= 1 block and width >= 1, got blocks={blocks}, "
                         f"width={width}")
    rng = np.random.default_rng(seed)
    nodes: list[Node] = [Node("x", "input")]
    adds = 0

    def add(name, op, inputs, attrs=None, params=None):
        nodes.append(Node(name, op, list(inputs), dict(attrs or {}), dict(params or {})))
        return name

    def conv(name, src, cin, cout, k, stride):
        return add(name, "conv2d", [src], {"stride": stride, "padding": k // 2, "dilation": 1},
                   {"w": _conv_w(rng, cout, cin, k)})

    def bn(name, src, c):
        return add(name, "batchnorm", [src], {"eps": 1e-5}, _bn_params(rng, c))

    t = conv("conv1", "x", 3, width, 7, 2)
    t = bn("bn1", t, width)
    t = add("relu", "relu", [t])
    t = add("maxpool", "maxpool", [t], {"kernel": 3, "stride": 2, "padding": 1})
    cin = width
    for stage, count in enumerate(blocks):
        cout = width * 2 ** stage
        for b in range(count):
            p = f"layer{stage + 1}_{b}_"
            stride = 2 if stage > 0 and b == 0 else 1
            skip = t
            t = conv(p + "conv1", t, cin, cout, 3, stride)
            t = bn(p + "bn1", t, cout)
            t = add(p + "relu", "relu", [t])
            t = conv(p + "conv2", t, cout, cout, 3, 1)
            t = bn(p + "bn2", t, cout)
            if stride != 1 or cin != cout:
                skip = conv(p + "downsample_0", skip, cin, cout, 1, stride)
                skip = bn(p + "downsample_1", skip, cout)
            t = add("add" if adds == 0 else f"add_{adds}", "add", [t, skip])
            adds += 1
            t = add(p + "relu_1", "relu", [t])
            cin = cout
    t = add("avgpool", "avgpool", [t])
    t = add("flatten", "flatten", [t])
    fc = {"w": (rng.standard_normal((classes, cin)) / np.sqrt(cin)).astype(np.float32),
          "b": rng.normal(0, 0.1, classes).astype(np.float32)}
    t = add("fc", "linear", [t], {}, fc)
    add("output", "output", [t])
    default = "resnet18" if (tuple(blocks), width) == (RESNET18_BLOCKS, 64) else \
        f"resnet{2 * sum(blocks) + 2}-w{width}"
    return default_placement(Graph(nodes, name or default))


def resnet18(classes: int = 1000, seed: int = 0) -> Graph:
    """ResNet-18 (torchvision's layout, 11.7 M parameters at 1000 classes) as a graph."""
    return resnet(RESNET18_BLOCKS, 64, classes, seed)


def ResNet(blocks: tuple[int, ...] = RESNET18_BLOCKS, width: int = 64, classes: int = 1000, seed: int = 0):
    """The same ResNet as a ``torch.nn.Module`` in eval mode, with the parameters of
    ``resnet(blocks, width, classes, seed)`` (torchvision's module layout and names)."""
    import torch
    import torch.nn as nn

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                               if stride != 1 or cin != cout else None)

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            identity = self.downsample(x) if self.downsample is not None else x
            return self.relu(out + identity)

    class ResNetModule(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.relu = nn.ReLU()
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            cin = width
            for stage, count in enumerate(blocks):
                cout = width * 2 ** stage
                layer = []
                for b in range(count):
                    layer.append(BasicBlock(cin, cout, 2 if stage > 0 and b == 0 else 1))
                    cin = cout
                setattr(self, f"layer{stage + 1}", nn.Sequential(*layer))
            self.stages = len(blocks)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(cin, classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            for i in range(self.stages):
                x = getattr(self, f"layer{i + 1}")(x)
            return self.fc(torch.flatten(self.avgpool(x), 1))

    graph = resnet(blocks, width, classes, seed)
    ResNetModule.__name__ = ResNetModule.__qualname__ = graph.name  # capture() names the graph after the class
    model = ResNetModule()
    load_params(model, graph)
    return model.eval()


def ResNet18(classes: int = 1000, seed: int = 0):
    """ResNet-18 as a ``torch.nn.Module`` with the parameters of ``resnet18(classes, seed)``."""
    return ResNet(RESNET18_BLOCKS, 64, classes, seed)
