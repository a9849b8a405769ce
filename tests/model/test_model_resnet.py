"""ResNet-18 and the smaller ResNets: the graph is torch's module, it computes what torch computes on the
simulated NPU before and after the passes, and the whole network tells the lab's story (the structural
claims lab 09's text makes are asserted here)."""

from __future__ import annotations

import numpy as np
import pytest

from npusim import model as nm

pytestmark = pytest.mark.lab09


def _tol(ref: np.ndarray) -> float:
    return 1e-2 * max(1.0, float(np.abs(ref).max()))


def test_resnet18_structure_and_work():
    g = nm.resnet18()
    counts = {}
    for n in g:
        counts[n.op] = counts.get(n.op, 0) + 1
    assert counts == {"input": 1, "conv2d": 20, "batchnorm": 20, "relu": 17, "maxpool": 1, "add": 8, "avgpool": 1,
                      "flatten": 1, "linear": 1, "output": 1}
    params = sum(v.size for n in g for k, v in n.params.items() if k in ("w", "b", "gamma", "beta"))
    assert params == pytest.approx(11.69e6, rel=2e-3)  # torchvision's resnet18: 11,689,512 parameters
    shapes, _ = nm.infer(g, (1, 3, 224, 224))
    macs = sum(int(np.prod(shapes[n.name])) * int(np.prod(n.params["w"].shape[1:])) for n in g if n.op == "conv2d")
    macs += g.node("fc").params["w"].size
    assert macs == pytest.approx(1.82e9, rel=5e-3)  # the docstring's 1.82 GMACs per 224 x 224 image
    assert shapes["layer4_1_relu_1"] == (1, 512, 7, 7) and shapes["fc"] == (1, 1000)


def test_capture_of_the_torch_resnet_is_the_zoo_graph():
    torch = pytest.importorskip("torch")
    x = nm.images(2, 64)
    for blocks, width in (((1, 1), 8), ((2, 2, 2, 2), 64)):
        module = nm.ResNet(blocks, width, classes=10, seed=4)
        g = nm.capture(module, torch.from_numpy(x))
        want = nm.resnet(blocks, width, classes=10, seed=4)
        assert g.signature() == want.signature() and g.name == want.name
        with torch.no_grad():
            ref = module(torch.from_numpy(x)).numpy()
        assert np.abs(nm.evaluate(g, x) - ref).max() < 1e-4 * max(1.0, float(np.abs(ref).max()))


def test_a_small_resnet_on_the_npu_matches_the_reference_before_and_after_the_passes():
    g = nm.resnet((1, 1), width=8, classes=10, seed=1)
    x = nm.images(2, 32, seed=2)
    ref = nm.evaluate(g, x)
    before = nm.run_model(g, x, progress=False)
    after = nm.run_model(nm.optimize(g, input_shape=x.shape), x, progress=False)
    for p in (before, after):
        assert p.output.shape == (2, 10) and p.output.dtype == np.float32
        assert np.abs(p.output - ref).max() < _tol(ref)
    assert (after.uploads, after.downloads) == (1, 1) and after.host_us == 0
    assert all(n.placement == "device" for n in after.graph if n.op not in ("input", "output"))


def test_the_graph_needs_an_image_the_pools_can_halve():
    g = nm.optimize(nm.resnet((1, 1), width=8, classes=10), input_shape=(1, 3, 34, 34))
    assert g.node("maxpool").placement == "host"   # the stem gives 17 x 17: odd, no device max pool for it
    g = nm.optimize(nm.resnet((1, 1), width=8, classes=10), input_shape=(1, 3, 64, 64))
    assert g.node("maxpool").placement == "device" and g.node("avgpool").placement == "device"


@pytest.fixture(scope="module")
def story():
    """ResNet-18, one 224 x 224 image, as captured and after the passes (the lab's two profiles)."""
    g = nm.resnet18()
    x = nm.images(1, 224)
    before = nm.run_model(g, x, label="as captured", progress=False)
    after = nm.run_model(nm.optimize(g, input_shape=x.shape), x, label="after", progress=False)
    return g, x, before, after


@pytest.mark.slow
def test_resnet18_tells_the_labs_story(story):
    from npusim.checks.lab09_model import compute_bound_launch_us, copies_by_op

    g, x, before, after = story
    ref = nm.evaluate(g, x)
    assert np.abs(before.output - ref).max() < _tol(ref) and np.abs(after.output - ref).max() < _tol(ref)
    # "every BatchNorm: its input goes down, its output comes back up"; the batch and the result besides
    counts = copies_by_op(before)
    assert counts["batchnorm"] == 2 * 20 and max(counts, key=counts.get) == "batchnorm"
    assert counts == {"input": 1, "batchnorm": 40, "maxpool": 2, "avgpool": 1, "flatten": 1, "output": 1}
    assert (after.uploads, after.downloads) == (1, 1) and after.host_us == 0
    # "the device computes a little more than before (the pools run on it now)"; fewer launches
    assert before.device_compute_us < after.device_compute_us < 1.3 * before.device_compute_us
    assert after.launches < before.launches
    # the gain, and what limits the model afterwards: the launches (host bound)
    assert after.model_time_us < before.model_time_us / 1.25
    b = after.breakdown_us
    assert max(b, key=b.get) == "launch"
    # the gap of the story: the best convolution kernels run far above the model, before and after
    best = max(r["kernel_util"] for r in before.op_rows() if r["op"] == "conv2d")
    assert best > 10 * before.mac_utilization and best > 3 * after.mac_utilization
    assert after.mac_utilization > before.mac_utilization
    # exercise 5: cheap enough launches make the optimised model compute bound, never the captured one
    assert compute_bound_launch_us(before) == 0.0
    budget = compute_bound_launch_us(after)
    assert 0 < budget < after.system.launch_overhead_us
    assert after.with_system(after.system.with_launch_overhead(budget)).device_busy_ratio >= 0.5
