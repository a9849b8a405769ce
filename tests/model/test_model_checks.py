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


def test_the_hidden_inputs_are_adversarial():
    from npusim.checks import lab09_model as L

    # exercise 5: one budget below the eager 20 us, one above it (a search capped at 20 fails), one none
    budgets = [L.compute_bound_launch_us(L._budget_profile(what)) for what in L._BUDGET]
    assert 0 < budgets[0] < 20 < budgets[1] and budgets[2] == 0.0
    # exercise 1: the wrong attributions and a hard-coded answer give other counts than the right one
    first = L._hidden_profile(L._HIDDEN[0])
    right = L.copies_by_op(first)
    assert right != L._by(first, lambda e: first.graph.node(e.node).op)
    assert right != {"batchnorm": 40, "maxpool": 2, "input": 1, "avgpool": 1, "flatten": 1, "output": 1}
    assert abs(L.launch_share(first) - first.launch_us / first.model_time_us) > 1e-3  # hidden launches exist
    # exercise 3: folding alone does not reach the speed-up target, the whole pass does
    from npusim.checks.lab09_passes import SPEEDUP_TARGET

    cnn = nm.small_cnn(channels=(8, 16), image=16, seed=7, softmax=False)
    x = nm.images(3, 16, seed=11)
    base = nm.run_model(cnn, x).model_time_us
    assert base / nm.run_model(nm.fuse_conv_bn_relu(cnn, relu=False), x).model_time_us < SPEEDUP_TARGET
    assert base / nm.run_model(nm.fuse_conv_bn_relu(cnn), x).model_time_us > SPEEDUP_TARGET


def test_placement_and_budget_checks_pass_the_references():
    from npusim.checks import lab09_model as L

    check.launch_budget(L.compute_bound_launch_us)
    check.read_profile(L.copies_by_op, L.launch_share)

    def place(graph, shape):
        g = graph.copy()
        shapes, dtypes = nm.infer(g, shape)
        for n in g:
            if n.op not in ("input", "output"):
                ok = nm.OPS[n.op].on_device(n, [shapes[i] for i in n.inputs], [dtypes[i] for i in n.inputs])
                n.placement = "device" if ok else "host"
        return g

    check.placement(place)
    with pytest.raises(check.CheckFailed, match="not finished"):
        check.launch_budget(lambda p: (_ for _ in ()).throw(NotImplementedError("the budget")))
