"""The lab 09 checks pass the reference solutions and fail wrong ones with a message for the learner."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from npusim import checks as check
from npusim import model as nm

pytestmark = pytest.mark.lab09


def test_fold_bn_check():
    check.fold_bn(nm.fold_bn)

    def forgets_the_mean(w, b, mean, var, gamma, beta, eps):
        s = gamma / np.sqrt(var + eps)
        return w * s[:, None, None, None], (0 if b is None else b) * s + beta

    with pytest.raises(check.CheckFailed, match="folded bias is wrong"):
        check.fold_bn(forgets_the_mean)

    def unfinished(*args):
        raise NotImplementedError("s = gamma / sqrt(var + eps)")

    with pytest.raises(check.CheckFailed, match="not finished"):
        check.fold_bn(unfinished)


def test_graph_pass_check():
    check.graph_pass(nm.fuse_conv_bn_relu)
    with pytest.raises(check.CheckFailed, match="relu1"):
        check.graph_pass(lambda g: nm.fuse_conv_bn_relu(g, relu=False))

    with pytest.raises(check.CheckFailed, match="changed the graph it was given"):
        check.graph_pass(_mutate)

    def greedy(g):  # folds a BatchNorm even when the conv output has another user
        g = g.copy()
        for conv in [n for n in g if n.op == "conv2d"]:
            for bn in [u for u in g.users(conv.name) if u.op == "batchnorm"]:
                p = bn.params
                conv.params = dict(zip("wb", nm.fold_bn(conv.params["w"], conv.params.get("b"), p["mean"], p["var"],
                                                        p["gamma"], p["beta"], bn.attrs["eps"])))
                g.bypass(bn.name)
            for r in [u for u in g.users(conv.name) if u.op == "relu"]:
                conv.attrs["relu"] = True
                g.bypass(r.name)
        return g

    with pytest.raises(check.CheckFailed, match="must stay"):
        check.graph_pass(greedy)


def _mutate(g):
    """Edits the caller's graph before fusing a copy."""
    g.nodes[1].attrs["relu"] = True
    return nm.fuse_conv_bn_relu(g)


def test_importing_the_package_needs_no_torch():
    code = ("import sys, npusim.model, npusim.checks; "
            "assert 'torch' not in sys.modules and 'npusim.torch' not in sys.modules, sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)
