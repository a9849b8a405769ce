"""The model on the simulated NPU computes what torch (and the float32 numpy reference) computes, before
and after the graph pass; BatchNorm folding is exact algebra."""

from __future__ import annotations

import numpy as np
import pytest

from npusim import model as nm
from npusim.errors import UsageError
from npusim.model.opset import batchnorm_host, conv2d_host, maxpool_host

pytestmark = pytest.mark.lab09


def _tol(ref: np.ndarray) -> float:
    """fp16 activations: about 1e-2 of the largest value (fp16 has 11 bits of mantissa; errors add up)."""
    return 1e-2 * max(1.0, float(np.abs(ref).max()))


def test_matches_torch_before_and_after_the_pass():
    torch = pytest.importorskip("torch")
    module = nm.SmallCNN(softmax=False)
    x = nm.images(3, seed=1)
    with torch.no_grad():
        want = module(torch.from_numpy(x)).numpy()
    g = nm.capture(module, torch.from_numpy(x))
    assert np.abs(nm.evaluate(g, x) - want).max() < 1e-4  # the numpy reference is torch in float32
    for graph in (g, nm.optimize(g)):
        got = nm.run_model(graph, x).output
        assert got.shape == want.shape and got.dtype == np.float32
        assert np.abs(got - want).max() < _tol(want)


def test_capture_gives_the_zoo_graph():
    torch = pytest.importorskip("torch")
    x = nm.images(2)
    g = nm.capture(nm.SmallCNN(seed=3), torch.from_numpy(x))
    assert g.signature() == nm.small_cnn(seed=3).signature()
    assert [n.placement for n in g if n.op == "batchnorm"] == ["host"] * 3


def test_capture_refuses_unsupported_ops():
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Sigmoid())
    with pytest.raises(UsageError, match="Sigmoid"):
        nm.capture(model, torch.zeros(1, 3, 8, 8))


def test_fused_graph_equals_unfused(graph, batch, before, after):
    ref = nm.evaluate(graph, batch)
    assert np.abs(nm.evaluate(nm.optimize(graph), batch) - ref).max() < 1e-5  # folding is exact in float32
    assert np.abs(after.output - before.output).max() < _tol(ref)
    assert np.abs(after.output - ref).max() < _tol(ref)


@pytest.mark.parametrize("seed", range(6))
def test_bn_folding_on_random_statistics(seed):
    rng = np.random.default_rng(seed)
    cout, cin, k = rng.integers(1, 9), rng.integers(1, 6), int(rng.choice([1, 3, 5]))
    w = rng.standard_normal((cout, cin, k, k)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32) if seed % 2 else None
    mean, beta = rng.normal(0, 2, cout).astype(np.float32), rng.normal(0, 2, cout).astype(np.float32)
    var = rng.uniform(1e-3, 5, cout).astype(np.float32)
    gamma = rng.uniform(-2, 2, cout).astype(np.float32)
    eps = float(rng.choice([1e-5, 1e-3, 0.1]))
    wf, bf = nm.fold_bn(w, b, mean, var, gamma, beta, eps)
    assert wf.dtype == np.float32 and bf.shape == (cout,)
    x = rng.standard_normal((2, cin, k + 4, k + 3)).astype(np.float32)
    want = batchnorm_host(conv2d_host(x, w, b, padding=k // 2), mean, var, gamma, beta, eps)
    got = conv2d_host(x, wf, bf, padding=k // 2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("shape,dtype", [((4, 16, 32, 32), np.float16), ((2, 3, 6, 10), np.float32),
                                         ((1, 1, 2, 2), np.float16), ((3, 5, 8, 4), np.float16),
                                         ((1, 8, 28, 30), np.float16)])
@pytest.mark.parametrize("kernel,padding", [(2, 0), (3, 1)])
def test_device_maxpool_is_exact(shape, dtype, kernel, padding):
    from npusim.model.pooling import maxpool_device

    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    y, prof = maxpool_device(x, kernel, 2, padding)
    want = maxpool_host(x, kernel, 2, padding).astype(dtype)   # max is exact: no rounding anywhere
    assert y.dtype == x.dtype and np.array_equal(y, want)
    # one burst per input row: every input byte crosses the GM port once (3x3: twice, the shifted copy,
    # plus the halo row two bands share), never an element at a time
    copies = 1 if kernel == 2 else 2
    assert prof.path_bytes["GM->UB"] <= copies * 1.5 * x.nbytes


def test_device_maxpool_refuses_what_it_cannot_run():
    from npusim.model.pooling import maxpool_device

    with pytest.raises(UsageError, match="even H and W"):
        maxpool_device(np.zeros((1, 2, 5, 4), np.float16), 3, 2, 1)
    with pytest.raises(UsageError, match="kernel=3, stride=1"):
        maxpool_device(np.zeros((1, 2, 4, 4), np.float16), 3, 1, 1)


@pytest.mark.parametrize("shape,dtype", [((1, 512, 7, 7), np.float16), ((3, 5, 2, 3), np.float32),
                                         ((2, 20, 1, 1), np.float16)])
def test_device_global_avgpool(shape, dtype):
    from npusim.model.pooling import avgpool_device

    x = (np.random.default_rng(1).standard_normal(shape) * 10).astype(dtype)
    y, prof = avgpool_device(x)
    want = x.astype(np.float64).mean(axis=(2, 3), keepdims=True)
    assert y.shape == want.shape and y.dtype == x.dtype
    # summed in float32, rounded once to the output dtype: within half an ulp of it (plus float32 sums)
    ulp = np.spacing(np.abs(want).astype(dtype)).astype(np.float64)
    assert np.all(np.abs(y - want) <= 0.5 * ulp + 1e-6 * np.abs(want) + 1e-7)


def test_a_host_only_op_placed_on_the_device_is_refused(graph, batch):
    g = graph.copy()
    g.node("bn1").placement = "device"
    with pytest.raises(UsageError, match="no kernel"):
        nm.run_model(g, batch)
