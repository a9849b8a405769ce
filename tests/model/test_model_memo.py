"""Memoised kernel profiles (npusim.model.memo): a reused kernel gives exactly the simulated timing, and the
host-computed values of a reused node agree with the simulated kernel's."""

from __future__ import annotations

import numpy as np
import pytest

import npusim as ns
from npusim import model as nm
from npusim.model import memo


@pytest.fixture(scope="module")
def resnet_small():
    return nm.resnet(blocks=(2, 1), width=16, classes=10)


def test_memo_reuses_kernels_with_the_same_timing(resnet_small):
    x = nm.images(2, 32)
    g = nm.optimize(resnet_small, input_shape=x.shape)
    memo.clear()
    full = nm.run_model(g, x, memo=False)
    assert memo.size() == 0
    first = nm.run_model(g, x)         # repeated layers inside the network are reused already
    n_first = memo.size()
    assert 0 < n_first < sum(1 for n in g.nodes if n.placement == nm.DEVICE and n.op != "flatten")
    again = nm.run_model(g, x)         # every kernel reused
    assert memo.size() == n_first
    for p in (first, again):
        assert p.model_time_us == full.model_time_us  # exactly: the same profiles
        assert [e.dur_us for e in p.events] == [e.dur_us for e in full.events]
        assert p.mac_utilization == full.mac_utilization
    ref = full.output.astype(np.float32)
    for p in (first, again):
        err = np.abs(p.output.astype(np.float32) - ref).max()
        assert err <= 2e-2 * max(1.0, float(np.abs(ref).max())), err


def test_reused_node_values_match_the_simulated_kernel():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 16, 10, 10)).astype(np.float16)
    node = nm.Node("c", "conv2d", ["x"], {"stride": 1, "padding": 1, "relu": True},
                   {"w": (rng.standard_normal((24, 16, 3, 3)) * 0.2).astype(np.float32),
                    "b": rng.standard_normal(24).astype(np.float32)}, nm.DEVICE)
    out, _ = nm.OPS["conv2d"].device(node, [x], ns.get_config("a2"), "error")
    host = memo.device_numerics(node, [x], np.dtype(np.float16))
    assert host.dtype == out.dtype and host.shape == out.shape
    # the same fp16 inputs, fp32 accumulation in another order: at most one fp16 rounding step apart
    np.testing.assert_allclose(host.astype(np.float32), out.astype(np.float32), rtol=2e-3, atol=2e-3)


def test_no_reuse_inside_shared_l2(resnet_small):
    node = next(n for n in resnet_small.nodes if n.op == "conv2d")
    cfg = ns.get_config("a2")
    assert memo.key(node, [(1, 3, 8, 8)], [np.dtype(np.float16)], cfg, "error") is not None
    with ns.shared_l2(cfg):
        assert memo.key(node, [(1, 3, 8, 8)], [np.dtype(np.float16)], cfg, "error") is None


def test_memoised_layout_transforms_give_the_fresh_simulation(resnet_small):
    """With node reuse off, the convs' layout transforms are still memoised (npusim.conv.launch_memo: by
    shapes and L2 state); the whole inference, before and after the passes, has the profiles and the
    output bits of a simulation with that memo off too."""
    from npusim.conv import launch_memo

    x = nm.images(2, 32)
    graphs = [resnet_small, nm.optimize(resnet_small, input_shape=x.shape)]
    launch_memo.clear()
    with_memo = [nm.run_model(g, x, memo=False, sanitize="off") for g in graphs]
    assert launch_memo.stats["hits"] > 0, "convs of one input shape should share their input transform"
    with launch_memo.disabled():
        fresh = [nm.run_model(g, x, memo=False, sanitize="off") for g in graphs]
    for m, f in zip(with_memo, fresh):
        assert [s.launches for s in m.execution.steps] == [s.launches for s in f.execution.steps]
        assert m.model_time_us == f.model_time_us
        assert np.array_equal(m.output, f.output)
