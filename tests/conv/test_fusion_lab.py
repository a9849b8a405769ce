"""Lab 06's fused Conv + ReLU kernel (npusim.kernels.fusion_lab): stages synchronised by hand.

- The reference synchronisation gives the separate pair's output bit for bit (and the float64 result
  within fp16 rounding) on random layers, both presets, with bias, strides and bands of padding only.
- Blocks: check_block names the memory and the formula that overflows, reference_block always fits, and
  an undersized block is much slower (the lab's speed target).
- Synchronisation: a kernel without flags races, one without the final waits leaves stray flags, and the
  stages without a process() say what to write.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import npusim as ns
from conv_reference import conv2d_reference
from npusim.conv import ConvGeometry
from npusim.kernels import fusion_lab as fl

pytestmark = [pytest.mark.conv, pytest.mark.lab06]

FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None,
                max_examples=20)


@st.composite
def layers(draw):
    c = dict(n=draw(st.integers(1, 2)), cin=draw(st.integers(1, 40)), cout=draw(st.integers(1, 70)),
             h=draw(st.integers(1, 15)), w=draw(st.integers(1, 15)), k=draw(st.sampled_from([1, 2, 3, 5])),
             stride=draw(st.integers(1, 3)), padding=draw(st.integers(0, 3)), bias=draw(st.booleans()),
             seed=draw(st.integers(0, 2 ** 16)))
    assume(min(c["h"], c["w"]) + 2 * c["padding"] >= c["k"])
    return c


def inputs(c):
    rng = np.random.default_rng(c["seed"])
    x = rng.standard_normal((c["n"], c["cin"], c["h"], c["w"])).astype(np.float16)
    w = (rng.standard_normal((c["cout"], c["cin"], c["k"], c["k"])) / np.sqrt(c["cin"] * c["k"] ** 2)).astype(np.float16)
    b = rng.standard_normal(c["cout"]).astype(np.float16) if c["bias"] else None
    return x, w, b


@settings(FAST)
@given(c=layers(), config=st.sampled_from(["a2", "classic"]))
def test_reference_synchronisation_equals_the_separate_pair(c, config):
    x, w, b = inputs(c)
    cmp = fl.compare_fused(x, w, b, c["stride"], c["padding"], config=config)
    assert cmp.same_bits
    assert cmp.gm_bytes_saved == 2 * cmp.output_bytes
    ref = np.maximum(conv2d_reference(x, w, b, c["stride"], c["padding"]), 0)
    tol = np.sqrt(c["cin"] * c["k"] ** 2) * 2.0 ** -11
    np.testing.assert_allclose(cmp.fused.output.astype(np.float64), ref, rtol=tol, atol=2 * tol)


def test_bands_of_padding_only_start_from_the_bias():
    """1 x 1 kernel, padding 3, stride 2: the first and last bands read padding only; their steps are the
    bias alone, their load_band moves nothing, and their outputs are relu(bias)."""
    x, w, b = inputs(dict(n=1, cin=4, h=5, w=5, cout=3, k=1, bias=True, seed=3))
    g = ConvGeometry.of(x.shape, w.shape, 2, 3)
    seen = []

    class Spy(fl.FusedConvRelu):
        def process(self):
            seen.extend((band, self.steps(band)) for band in self.bands())
            super().process()

    res = fl.run_fused(x, w, b, 2, 3, kernel=Spy)
    empty = [(band, steps) for band, steps in seen if not band.has_input]
    assert empty and all(len(s) == 1 and s[0].bias and s[0].first for _, s in empty)
    assert all(steps[0].first and not any(s.first for s in steps[1:]) for _, steps in seen)
    rows = [r for band, _ in empty for r in range(band.ho0, band.ho0 + band.rows)]
    np.testing.assert_array_equal(res.output[0][:, rows, :],
                                  np.broadcast_to(np.maximum(b, 0)[:, None, None], (3, len(rows), g.wo)))


def test_check_block_names_what_is_wrong():
    g = ConvGeometry.of((1, 32, 28, 28), (256, 32, 3, 3), 1, 1)
    with pytest.raises(ns.UsageError, match="n=250 must be a positive multiple of 16"):
        fl.check_block(g, ns.a2, (64, 250, 64))
    with pytest.raises(ns.UsageError, match="ints"):
        fl.check_block(g, ns.a2, (64.0, 256, 64))
    with pytest.raises(ns.CapacityError, match=r"L0A \(2 x m x k x 2 B = 2 x 256 x 128 x 2\)"):
        fl.check_block(g, ns.a2, (256, 16, 128))
    with pytest.raises(ns.CapacityError, match="of UB"):
        fl.check_block(g, ns.classic, (128, 256, 32))        # fits L0C on classic, not the drain in UB
    fl.check_block(g, ns.a2, (64, 256, 32))                 # A2 has no drain in UB


@pytest.mark.parametrize("config", ["a2", "classic"])
def test_reference_block_fits_and_undersized_blocks_are_slow(config):
    cfg = ns.get_config(config)
    x, w, _ = inputs(dict(n=1, cin=32, h=28, w=28, cout=32, k=3, bias=False, seed=1))
    g = ConvGeometry.of(x.shape, w.shape, 1, 1)
    ref = fl.reference_block(g, cfg)
    assert fl.check_block(g, cfg, ref) == ref
    assert ref.n == 32 and ref.m <= fl.band_rows(g, cfg) * g.wo + 15
    t_ref = fl.run_fused(x, w, None, 1, 1, config=cfg).profile.total_cycles
    t_small = fl.run_fused(x, w, None, 1, 1, block=(16, 16, 16), config=cfg).profile.total_cycles
    assert t_small > 5 * t_ref


def test_reference_block_fits_random_layers():
    rng = np.random.default_rng(0)
    for _ in range(60):
        k = int(rng.choice([1, 3, 5]))
        n, cin, h, w = (int(rng.integers(1, 3)), int(rng.integers(1, 129)), int(rng.integers(k, 40)),
                        int(rng.integers(k, 40)))
        g = ConvGeometry.of((n, cin, h, w), (int(rng.integers(1, 600)), cin, k, k), int(rng.integers(1, 3)), k // 2)
        try:
            cfg = (ns.a2, ns.classic)[int(rng.integers(2))]
            fl.band_rows(g, cfg)
        except ns.CapacityError:
            continue
        blk = fl.reference_block(g, cfg)
        fl.check_block(g, cfg, blk)


def test_weights_that_do_not_fit_l1_are_refused_clearly():
    g = ConvGeometry.of((1, 256, 14, 14), (512, 256, 3, 3), 1, 1)
    with pytest.raises(ns.CapacityError, match="keeps every weight in L1"):
        fl.band_rows(g, ns.a2)


def test_synchronisation_mistakes_are_caught():
    x, w, _ = inputs(dict(n=1, cin=8, h=9, w=9, cout=20, k=3, bias=False, seed=2))

    class NoFlags(fl.FusedConvRelu):
        def process(self):
            for band in self.bands():
                self.load_band(0, band)
                for tile in self.tiles(band):
                    for step in self.steps(band):
                        self.load_step(0, 0, band, tile, step)
                        self.mmad(0, 0, tile, step)
                    self.fixpipe_out(0, band, tile)

    class NoFinalWaits(fl.FusedConvRelu):
        def process(self):
            E = ns.HardEvent
            ns.set_flag(E.FIX_M, 0)
            ns.wait_flag(E.FIX_M, 0)
            ns.set_flag(E.FIX_M, 1)                  # never waited for

    with pytest.raises(ns.RaceError, match="RAW"):
        fl.run_fused(x, w, None, 1, 1, kernel=NoFlags, config="a2")
    with pytest.raises(ns.SyncError, match="unpaired set_flag"):
        fl.run_fused(x, w, None, 1, 1, kernel=NoFinalWaits, config="a2")
    with pytest.raises(ns.UsageError, match="write it in your subclass"):
        fl.run_fused(x, w, None, 1, 1, kernel=fl.FusedStages, config="a2")


def test_fused_kernel_takes_fp16_only():
    x, w, _ = inputs(dict(n=1, cin=8, h=9, w=9, cout=20, k=3, bias=False, seed=2))
    with pytest.raises(ns.DtypeError, match="float16"):
        fl.run_fused(x.astype(np.float32), w.astype(np.float32))
