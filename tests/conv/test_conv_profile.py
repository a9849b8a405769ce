"""The story of the four variants, read from their profiles on the reference layer (1x64x56x56 -> 64, 3x3,
pad 1, fp16): less GM traffic per output, less MTE2 time, more Cube MAC utilization, in that order."""

import numpy as np
import pytest

import npusim as ns
import npusim.conv as conv

pytestmark = pytest.mark.conv


@pytest.fixture(scope="module")
def reference_layer():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 64, 56, 56)).astype(np.float16)
    w = (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float16)
    return {v: conv.conv2d(x, w, padding=1, variant=v) for v in conv.VARIANTS}


def test_all_variants_agree(reference_layer):
    base = reference_layer["img2col"].output.astype(np.float32)
    for v, r in reference_layer.items():
        np.testing.assert_allclose(r.output.astype(np.float32), base, rtol=2 ** -9, atol=2 ** -9)


def test_input_reuse_reads_less_gm_than_output_tiling(reference_layer):
    a, b = reference_layer["direct"], reference_layer["reuse"]
    assert b.gm_read_bytes < a.gm_read_bytes / 1.5
    assert b.profile.gm_bytes < a.profile.gm_bytes


def test_gm_bytes_per_output_and_mte2_time_fall_variant_by_variant(reference_layer):
    r = [reference_layer[v] for v in conv.VARIANTS]
    per_output = [x.gm_bytes_per_output for x in r]
    mte2 = [x.profile.pipe_busy_cycles["mte2"] for x in r]
    assert per_output == sorted(per_output, reverse=True), per_output
    assert mte2 == sorted(mte2, reverse=True), mte2
    # the layout variant's input arrives in long runs: fewer, longer MTE2 instructions than reuse
    n_mte2 = {v: sum(1 for i in reference_layer[v].profile.instructions if i.pipe == ns.Pipe.MTE2)
              for v in ("reuse", "layout")}
    assert n_mte2["layout"] < n_mte2["reuse"] / 2


def test_mac_utilization_rises_and_img2col_is_highest(reference_layer):
    util = {v: r.profile.mac_utilization for v, r in reference_layer.items()}
    assert util["direct"] < util["reuse"] < util["layout"] < util["img2col"], util
    assert max(util, key=util.get) == "img2col"
    assert util["img2col"] > 0.75
    assert reference_layer["img2col"].profile.critical_pipe == "cube"
    for v in ("direct", "reuse"):
        assert reference_layer[v].profile.critical_pipe == "mte2"
    # the re-read input copies of the row-wise variants mostly come from L2; img2col reads its band once
    assert reference_layer["layout"].profile.l2_hit_rate > 0.5
    assert reference_layer["img2col"].profile.l2_hit_rate < 0.2


def test_the_layout_transform_is_its_own_launch_with_its_own_profile(reference_layer):
    c = reference_layer["layout"]
    t = c.transforms["nchw_to_nc1hwc0"]
    assert isinstance(t, ns.Profile) and t.kernel == "nchw_to_nc1hwc0"
    assert c.profile.kernel == "conv2d_layout"
    # where it runs: DMA in (MTE2), a transpose on the Cube (MTE1 + M), Fixpipe out
    for pipe in ("mte2", "mte1", "cube", "fixp"):
        assert t.pipe_busy_cycles[pipe] > 0, pipe
    # what it costs: the input read once (plus the identity matrix), the padded NC1HWC0 image written once
    assert 64 * 56 * 56 * 2 <= t.path_bytes["GM->L1"] <= 64 * 56 * 56 * 2 + 32 * 1024
    assert t.path_bytes["L0C->GM"] + t.path_bytes.get("UB->GM", 0) == 4 * 58 * 58 * 16 * 2
    assert c.total_cycles == c.profile.total_cycles + t.total_cycles
    # none of its (identity) MACs are counted in the convolution
    assert c.profile.cube_macs == c.geometry.macs
    assert "transform nchw_to_nc1hwc0" in c.summary()


def test_img2col_reports_both_transforms_and_only_conv_macs(reference_layer):
    d = reference_layer["img2col"]
    assert set(d.transforms) == {"nchw_to_nc1hwc0", "nhwc_to_nchw"}
    assert d.profile.cube_macs == d.geometry.macs
    assert d.figures()["total_mac_utilization"] < d.profile.mac_utilization
    assert any("FRACTAL_Z" in h for h in d.host_work)
    assert d["y"] is d.output and d.outputs == {"y": d.output}


def test_integer_transforms_fall_back_to_element_dma():
    """int8 cannot make the round trip through the Cube: the transform runs on MTE2/MTE3 only."""
    x = np.arange(2 * 3 * 4 * 5, dtype=np.int64).reshape(2, 3, 4, 5).astype(np.int8)
    x5, prof = conv.to_nc1hwc0(x, (1, 1))
    assert prof.pipe_busy_cycles["cube"] == 0 and prof.pipe_busy_cycles["mte3"] > 0
    ref = np.zeros((2, 1, 6, 7, 32), np.int8)
    ref[:, 0, 1:5, 1:6, :3] = x.transpose(0, 2, 3, 1)
    np.testing.assert_array_equal(x5, ref)


# --- honest utilisation: the convolution's own MACs, not the Cube's padded ones ------------------------
@pytest.mark.parametrize("dtype,cin,c0,peak", [(np.float16, 3, 16, 4096), (np.int8, 1, 32, 8192)])
def test_mac_utilization_counts_the_convolutions_macs_not_the_padding(dtype, cin, c0, peak):
    rng = np.random.default_rng(cin)
    x = rng.integers(-3, 4, (1, cin, 16, 16)).astype(dtype)
    w = rng.integers(-3, 4, (16, cin, 3, 3)).astype(dtype)
    r = conv.conv2d(x, w, padding=1)
    p = r.profile
    macs = 16 * 16 * 16 * cin * 9                       # positions x Cout x Cin x Kh x Kw, by hand
    issued = 16 * 16 * 16 * 9 * c0                       # K padded to one C0 block per tap
    assert p.algorithmic_macs == r.geometry.macs == macs
    assert p.issued_macs == p.cube_macs == issued        # the Mmads asked for the padded K
    assert p.mac_waste == pytest.approx(1 - cin / c0)    # 13/16 of fp16, 31/32 of int8 is padding
    assert p.mac_utilization == pytest.approx(macs / (peak * p.total_cycles))
    assert p.issued_mac_utilization == pytest.approx(issued / (peak * p.total_cycles))
    assert p.issued_mac_utilization / p.mac_utilization == pytest.approx(c0 / cin)
    assert p.compute_bound_cycles == pytest.approx(macs / peak)   # the roofline counts useful work too
    assert p.total_cycles >= p.roofline_cycles


def test_resnet_stem_honest_utilisation():
    """1x3x224x224, 64 7x7 filters, stride 2, pad 3 (img2col): the Cube is busy, the work is not."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 224, 224)).astype(np.float16)
    w = (rng.standard_normal((64, 3, 7, 7)) / 12).astype(np.float16)
    p = conv.conv2d(x, w, stride=2, padding=3).profile
    macs = 64 * 112 * 112 * 3 * 49
    assert p.algorithmic_macs == macs
    assert p.mac_utilization == pytest.approx(macs / (4096 * p.total_cycles))
    assert 0.15 < p.mac_utilization < 0.20             # 17.2 % (it read 91.5 % when padding counted)
    assert p.issued_mac_utilization > 0.85
    assert p.mac_waste == pytest.approx(1 - 3 / 16)
