"""The staged img2col kernel (npusim.conv.staged): per-group resident weights and a staged start give
the plain kernel's values bit for bit, every work item is computed once, and on the chip it starts the
Cube earlier than the plain kernel does."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import npusim as ns
import npusim.conv as conv
from npusim.conv.api import run_img2col

pytestmark = pytest.mark.conv

# (n, cin, h, cout, stride, padding, bias, relu, cores): two groups on 4 cores, fewer cores than groups
# (the weights are reloaded at group changes), one core, a stride-2 layer, bands with pad rows only
CASES = [(2, 32, 10, 64, 1, 1, True, True, 4), (1, 48, 8, 96, 1, 1, False, False, 2),
         (1, 16, 6, 32, 1, 1, True, False, 1), (2, 32, 9, 48, 2, 1, False, True, 6),
         (1, 16, 2, 32, 1, 3, True, True, 3)]


@pytest.mark.parametrize("case", CASES)
def test_staged_equals_the_plain_kernel_bit_for_bit(case):
    n, cin, h, cout, s, p, bias, relu, cores = case
    rng = np.random.default_rng(cin + cout)
    x = rng.standard_normal((n, cin, h, h)).astype(np.float16)
    w = (rng.standard_normal((cout, cin, 3, 3)) / np.sqrt(cin * 9)).astype(np.float16)
    b = rng.standard_normal(cout).astype(np.float16) if bias else None
    cfg = ns.get_config("a2")
    g = conv.ConvGeometry.of(x.shape, w.shape, s, p, 1, "float16")
    ep = conv.Epilogue(relu=relu) if relu else None
    t = conv.choose_tiling(g, cfg, "img2col", ep, cores=24)
    split = min(2, len(t.cout_blocks(g)))
    staged = dataclasses.replace(t, staged=True, cout_split=split, weights_resident=True, l1_buffers=2,
                                 cin_block=g.cin)
    plain = dataclasses.replace(staged, staged=False)
    out = {}
    for name, tt in (("staged", staged), ("plain", plain)):
        tt.check(g, cfg, ep)
        out[name] = run_img2col(x, w, b, s, p, tiling=tt, config=cfg, block_dim=min(cores, tt.work_items(g)),
                                relu=relu).output      # the race checker on: the flags order every read
    np.testing.assert_array_equal(out["staged"], out["plain"])


@pytest.mark.parametrize("num", [1, 3, 5, 24])
def test_core_items_cover_every_item_once_and_balance_rows(num):
    g = conv.ConvGeometry.of((3, 64, 28, 28), (128, 64, 3, 3), 1, 1, 1, "float16")
    t = conv.ConvTiling("img2col", 5, 28, 64, 64, 144, 64, cout_split=2, staged=True)
    got = [it for c in range(num) for it in t.core_items(g, c, num)]
    want = [(b, grp) for b in t.bands(g) for grp in range(2)]
    assert sorted(got) == sorted(want) and len(got) == len(want)
    assert max(r for _, _, r in t.bands(g)) - min(r for _, _, r in t.bands(g)) <= 1
    if num >= 2:
        rows = [sum(b[2] for b, _ in t.core_items(g, c, num)) for c in range(num)]
        per_group = [[r for c, r in enumerate(rows) if c % 2 == grp] for grp in range(2)]
        assert all(max(r) - min(r) <= max(b[2] for b in t.bands(g)) for r in per_group)


def test_the_chip_conv_is_staged_and_starts_the_cube_early():
    """ResNet-18's layer2 conv at batch 8 on 24 cores: the chosen tiling is staged, and its first Mmad
    starts before a tenth of the kernel's time (the plain kernel waits for every weight first)."""
    cfg = ns.get_config("a2")
    x = np.zeros((8, 128, 28, 28), np.float16)
    w = np.zeros((128, 128, 3, 3), np.float16)
    g = conv.ConvGeometry.of(x.shape, w.shape, 1, 1, 1, "float16")
    t = conv.choose_tiling(g, cfg, "img2col", None, cores=cfg.num_cores)
    assert t.staged and "staged:" in t.explain()
    times = {}
    for tt in (t, dataclasses.replace(t, staged=False, l1_buffers=2)):
        p = run_img2col(x, w, None, 1, 1, tiling=tt, config=cfg, block_dim=min(24, tt.work_items(g)),
                        sanitize="off").profile
        times[tt.staged] = (min(r[2] for r in p.raw_records if r[4] == "mmad"), p.total_cycles)
    assert times[True][0] < 0.1 * times[True][1] < times[False][0]
    assert times[True][1] < times[False][1]
