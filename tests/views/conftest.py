"""Shared fixtures of the views tests: small profiles of the reference kernels, Agg backend, leak guard."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported anywhere: no GUI in tests

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from npusim.kernels.matmul import MatmulTiling, run_matmul  # noqa: E402
from npusim.kernels.softmax import run_softmax  # noqa: E402
from npusim.kernels.vector_add import run_vector_add  # noqa: E402


def _xy(n: int):
    rng = np.random.default_rng(0)
    return rng.random(n).astype(np.float16), rng.random(n).astype(np.float16)


@pytest.fixture(scope="session")
def xy():
    """The vector-add lab's inputs: 65,536 fp16 elements each."""
    return _xy(65536)


@pytest.fixture(scope="session")
def vadd(xy):
    return run_vector_add(*xy, tile=1024, buffer_num=2).profile


@pytest.fixture(scope="session")
def vadd_fast(xy):
    return run_vector_add(*xy, tile=4096, buffer_num=2).profile


@pytest.fixture(scope="session")
def vadd_multi(xy):
    return run_vector_add(*xy, tile=1024, buffer_num=2, block_dim=4).profile


@pytest.fixture(scope="session")
def mm():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 128)).astype(np.float16)
    b = rng.standard_normal((128, 128)).astype(np.float16)
    return run_matmul(a, b, tiling=MatmulTiling(64, 64, 64, 2)).profile


@pytest.fixture(scope="session")
def sm():
    x = np.random.default_rng(2).standard_normal((16, 1024)).astype(np.float16)
    return run_softmax(x, tile=1024).profile


@pytest.fixture(scope="session")
def big():
    """A launch with more than 10,000 instructions (dense timeline lanes)."""
    x, y = _xy(1 << 20)
    prof = run_vector_add(x, y, tile=256, buffer_num=2).profile
    assert prof.instruction_count > 10_000
    return prof


@pytest.fixture(autouse=True)
def no_figure_leak():
    """No test may leave a figure registered with pyplot."""
    before = plt.get_fignums()
    yield
    assert plt.get_fignums() == before, "a figure leaked into pyplot"
