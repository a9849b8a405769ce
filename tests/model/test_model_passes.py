"""The graph pass: what it fuses and moves, what it must leave alone, idempotence, no side effects."""

from __future__ import annotations

import numpy as np
import pytest

from npusim import model as nm
from npusim.model.graph import Graph, Node

pytestmark = pytest.mark.lab09


def test_pass_fuses_and_offloads(graph):
    g = nm.optimize(graph)
    assert g.ops() == ["input", "conv2d", "maxpool", "conv2d", "maxpool", "conv2d", "add", "relu", "flatten",
                       "linear", "softmax", "output"]
    conv = {n.name: n for n in g if n.op == "conv2d"}
    assert conv["conv1"].attrs["relu"] and conv["conv2"].attrs["relu"] and not conv["conv3"].attrs.get("relu")
    assert conv["conv3"].fused == ["bn3"]  # its ReLU comes after the residual add: not fusable
    assert "b" in conv["conv1"].params and "b" not in graph.node("conv1").params
    assert all(n.placement == "device" for n in g if n.op not in ("input", "output"))


def test_pass_is_idempotent_and_leaves_its_input_alone(graph):
    sig = graph.signature()
    once = nm.optimize(graph)
    assert graph.signature() == sig
    assert nm.optimize(once).signature() == once.signature()
    assert nm.fuse_conv_bn_relu(once).signature() == once.signature()
    assert nm.find_conv_bn_relu(once) == []


def _conv_two_users() -> Graph:
    rng = np.random.default_rng(0)
    bn = {k: rng.uniform(0.5, 1.5, 4).astype(np.float32) for k in ("mean", "var", "gamma", "beta")}
    return nm.default_placement(Graph([
        Node("x", "input"),
        Node("c", "conv2d", ["x"], {"padding": 1}, {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32)}),
        Node("bn", "batchnorm", ["c"], {"eps": 1e-5}, bn),
        Node("s", "add", ["bn", "c"]),
        Node("r", "relu", ["s"]),
        Node("output", "output", ["r"])]))


def test_a_bn_whose_conv_has_another_user_is_not_folded():
    g = _conv_two_users()
    assert nm.find_conv_bn_relu(g) == []
    assert nm.fuse_conv_bn_relu(g).signature() == g.signature()
    x = nm.images(2, 8)
    assert np.abs(nm.run_model(nm.optimize(g), x).output - nm.evaluate(g, x)).max() < 2e-2


def test_partial_passes(graph):
    only_bn = nm.fuse_conv_bn_relu(graph, relu=False)
    assert only_bn.ops().count("batchnorm") == 0 and only_bn.ops().count("relu") == 3
    only_relu = nm.fuse_conv_bn_relu(graph, bn=False)  # every ReLU sits behind a BN: nothing to fuse
    assert only_relu.signature() == graph.signature()
    moved = nm.offload(graph, ("flatten",))
    assert [n.name for n in moved if n.placement == "device" and n.op in ("maxpool", "flatten")] == ["flatten"]


def test_offload_respects_what_the_kernel_supports():
    g = nm.small_cnn(image=34)  # pool1 sees 34 x 34, pool2 17 x 17: odd, no device kernel for it
    moved = nm.offload(g, input_shape=(2, 3, 34, 34))
    assert moved.node("pool1").placement == "device" and moved.node("pool2").placement == "host"
