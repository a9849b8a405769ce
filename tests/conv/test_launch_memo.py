"""The img2col convolution's memoised layout transforms (npusim.conv.launch_memo) give what a fresh
simulation gives: every launch's profile, the L2 the operator leaves, the output's bits."""

from __future__ import annotations

import numpy as np
import pytest

import npusim as ns
from npusim import ops
from npusim.conv import launch_memo
from npusim.conv import replay, transform

CONFIG = "a2"


@pytest.fixture(autouse=True)
def fresh():
    launch_memo.clear()
    yield
    launch_memo.clear()


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint32)


def _inputs(seed, shape=(2, 20, 9, 9), cout=24, dtype=np.float16, special=False):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    if special:
        x.flat[::37] = 0.0
        x.flat[5] = -0.0
        x.flat[11] = np.inf
    w = (rng.standard_normal((cout, shape[1], 3, 3)) * 0.2).astype(dtype)
    b = rng.standard_normal(cout).astype(dtype)
    return x, w, b


def _call(x, w, b, **attrs):
    r = ops.call("conv2d", x, w, b, stride=1, padding=1, config=CONFIG, sanitize="error", **attrs)
    return r.out.copy(), [(n, p) for n, p in r.launches]


def _l2_state(l2: ns.L2Cache) -> list:
    """The cache's lines, buffer by buffer in first-use order (not by host address: those differ)."""
    floor = l2.clock - l2.capacity_lines
    return [(b.nlines, np.maximum(b.arrays()[0] - l2.clock, floor - l2.clock).tolist(),
             np.where(b.arrays()[0] > floor, b.arrays()[1], 0.0).tolist()) for b in l2._buffers.values()]


@pytest.mark.parametrize("dtype", [np.float16, np.float32], ids=["float16", "float32"])
def test_a_reused_transform_is_the_fresh_simulation(dtype):
    """Call 2 (other values, same shapes; here a bias-free call with a fused ReLU, so the convolution
    itself is another launch) reuses call 1's input transform; its three profiles and its output equal a
    simulation of call 2 with the memo off."""
    x1, w1, b1 = _inputs(0, dtype=dtype)
    x2, w2, _ = _inputs(1, dtype=dtype, special=True)
    _call(x1, w1, b1)
    assert launch_memo.stats == {"hits": 0, "misses": 2}
    y_memo, l_memo = _call(x2, w2, None, relu=True)
    assert launch_memo.stats["hits"] >= 1, "the input transform of the same shape should be reused"
    with launch_memo.disabled():
        y_fresh, l_fresh = _call(x2, w2, None, relu=True)
    assert [n for n, _ in l_memo] == ["nchw_to_nc1hwc0", "conv2d", "nhwc_to_nchw"]
    assert l_memo == l_fresh, "a memoised transform (or the conv after it) differs from the fresh simulation"
    assert np.array_equal(_bits(y_memo), _bits(y_fresh)), "the output differs from the simulated bits"
    assert np.isnan(y_fresh).any(), "the inf input should have made NaNs (0 * inf in a transpose)"


def test_the_l2_left_behind_is_the_fresh_one():
    """Inside a shared L2 the operator's launches leave the cache as a simulation would (the next
    kernel would find the same lines), and the memo reuses launches there too."""
    x, w, b = _inputs(2)
    states, launches = [], []
    for memo_on in (True, True, False):
        with ns.shared_l2(CONFIG) as l2:
            if memo_on:
                launches.append(_call(x, w, b)[1])
            else:
                with launch_memo.disabled():
                    launches.append(_call(x, w, b)[1])
            states.append(_l2_state(l2))
    assert launch_memo.stats["hits"] == 2, "the second call in an empty shared L2 reuses both transforms"
    assert launches[1] == launches[2] and launches[0] == launches[2]
    assert states[1] == states[2], "the memoised launches left another L2 than the simulation"


def test_another_l2_state_or_shape_is_simulated():
    """A warm L2 (the input already there) is another key: the input transform is simulated, and faster
    than the cold one; another shape is simulated too."""
    x, w, b = _inputs(3)
    cold = _call(x, w, b)[1]
    with ns.shared_l2(CONFIG):
        _call(x, w, b)
        misses = launch_memo.stats["misses"]
        warm = _call(x, w, b)[1]
    assert launch_memo.stats["misses"] > misses, "the warm input transform should be simulated"
    assert warm[0][1].l2_hit_bytes > cold[0][1].l2_hit_bytes, "the warm input transform finds its input in L2"
    misses = launch_memo.stats["misses"]
    x2, w2, b2 = _inputs(4, shape=(2, 20, 7, 9))
    _call(x2, w2, b2)
    assert launch_memo.stats["misses"] == misses + 2, "another shape is simulated"


def test_host_transforms_are_the_device_bits():
    x, _, _ = _inputs(5, shape=(1, 40, 13, 11), special=True)
    x5, _ = transform.to_nc1hwc0(x, config=CONFIG, block_dim=3)
    assert np.array_equal(_bits(replay.to_nc1hwc0(x)), _bits(x5))
    y = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    out, _ = transform.to_nchw(y, config=CONFIG, block_dim=3)
    assert np.array_equal(_bits(replay.to_nchw(y)), _bits(out))
