"""The lab 09 checks pass a learner's own answers, refuse the package's, and fail wrong ones with a message for
the learner (the full wrong-solution corpus is tests/labs/labcorpus/lab09.py)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from npusim import checks as check
from npusim import model as nm

pytestmark = pytest.mark.lab09


def _fold(w, b, mean, var, gamma, beta, eps):
    """A learner's own fold (the package's is refused by the authorship rules)."""
    s = gamma / np.sqrt(var + eps)
    return w * s[:, None, None, None], ((0 if b is None else b) - mean) * s + beta


def test_fold_bn_check():
    check.fold_bn(_fold)
    with pytest.raises(check.CheckFailed, match="hands the work to npusim's `fold_bn`"):
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


def test_graph_pass_check_refuses_the_package_pass():
    # wrong passes the learner writes (one BatchNorm of two users folded, the input graph edited, ...) are
    # in tests/labs/labcorpus/lab09.py; here: the package's own pass, bare or wrapped, is not the learner's
    with pytest.raises(check.CheckFailed, match="hands the work to npusim's `fuse_conv_bn_relu`"):
        check.graph_pass(nm.fuse_conv_bn_relu)
    with pytest.raises(check.CheckFailed, match="hands the work to npusim's `fuse_conv_bn_relu`"):
        check.graph_pass(lambda g: nm.fuse_conv_bn_relu(g, relu=False))


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


def test_placement_passes_and_the_budget_references_are_refused():
    from npusim.checks import lab09_model as L

    with pytest.raises(check.CheckFailed, match="hands the work"):
        check.launch_budget(L.compute_bound_launch_us)
    with pytest.raises(check.CheckFailed, match="hands the work"):
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
