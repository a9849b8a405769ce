"""The img2col convolution split over all the chip's cores: bands of output rows x groups of Cout blocks,
over the batch. The split tilings fit, every output element is computed once and right, and a layer whose
bands alone do not fill the cores still uses all of them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import npusim as ns
import npusim.conv as conv
from npusim import ops
from npusim.conv.api import run_img2col

from conv_reference import conv2d_numpy

pytestmark = pytest.mark.conv


@st.composite
def geometries(draw):
    k = draw(st.sampled_from([1, 3, 7]))
    h = draw(st.integers(1, 60))
    s, p = draw(st.integers(1, 2)), draw(st.integers(0, 3))
    assume(h + 2 * p >= k)
    cin, cout = draw(st.integers(1, 512)), draw(st.integers(1, 512))
    return conv.ConvGeometry.of((draw(st.integers(1, 8)), cin, h, h), (cout, cin, k, k), s, p, 1, "float16")


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(g=geometries(), cores=st.sampled_from([2, 8, 24]))
def test_split_tilings_fit_and_never_leave_a_group_empty(g, cores):
    cfg = ns.get_config("a2")
    t = conv.choose_tiling(g, cfg, "img2col", cores=cores)
    t.check(g, cfg)
    for mem, used in t.usage(g, cfg).items():
        assert used <= cfg.memory_bytes(mem), (mem, used)
    groups = [t.group_blocks(g, i) for i in range(t.cout_split)]
    assert all(groups) and [b for grp in groups for b in grp] == t.cout_blocks(g)   # each block once
    assert t.work_items(g) == g.n * -(-g.ho // t.rows) * t.cout_split


# (n, cin, h, cout, k, stride, padding, bias, relu, forced changes): a ResNet layer4 conv at batch 1 (7 rows
# cannot fill 24 cores: Cout groups do), uneven groups, Cin split into blocks (each tile reloads its band),
# a batch that splits over images, the stem
CASES = [
    (1, 64, 7, 200, 3, 1, 1, True, True, {}),
    (1, 32, 9, 80, 3, 1, 1, False, False, {"cout_block": 16, "cout_split": 3}),
    (2, 48, 6, 64, 3, 1, 1, True, True, {"cin_block": 16, "cout_block": 32, "cout_split": 2, "staged": False}),
    (3, 16, 12, 24, 1, 2, 0, True, False, {}),
    (1, 3, 32, 64, 7, 2, 3, False, True, {}),
]


@pytest.mark.parametrize("case", CASES)
def test_split_convolution_is_right(case):
    n, cin, h, cout, k, s, p, bias, relu, changes = case
    rng = np.random.default_rng(cout)
    x = rng.standard_normal((n, cin, h, h)).astype(np.float16)
    w = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float16)
    b = rng.standard_normal(cout).astype(np.float16) if bias else None
    cfg = ns.get_config("a2")
    g = conv.ConvGeometry.of(x.shape, w.shape, s, p, 1, "float16")
    ep = conv.Epilogue(relu=relu) if relu else None
    t = conv.choose_tiling(g, cfg, "img2col", ep, cores=cfg.num_cores)
    if changes:
        t = dataclasses.replace(t, **changes)
    res = run_img2col(x, w, b, s, p, tiling=t, config=cfg, block_dim=min(cfg.num_cores, t.work_items(g)), relu=relu)
    want = conv2d_numpy(x, w, b, s, p)
    if relu:
        want = np.maximum(want, 0)
    np.testing.assert_allclose(res.output.astype(np.float64), want, rtol=2e-2, atol=2e-2)
    if changes.get("cout_split", 1) > 1:
        assert res.profile.block_dim > g.n * -(-g.ho // t.rows)   # more blocks than bands: the groups count


def test_a_small_image_conv_uses_the_whole_chip():
    """ResNet-18's layer4 conv at batch 1: 7 output rows; the operator still runs on all 24 Cube cores."""
    cfg = ns.get_config("a2")
    x = np.zeros((1, 512, 7, 7), np.float16)
    w = np.zeros((512, 512, 3, 3), np.float16)
    _, ex = ops.get_workspace_size("conv2d", x, w, stride=1, padding=1, config=cfg)
    t = ex.tiling.fields["conv"]
    assert ex.tiling.block_dim == cfg.num_cores and t.cout_split > 1
    assert "cores:" in t.explain()
