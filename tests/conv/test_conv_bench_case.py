"""The ``conv2d_img2col`` case of ``npusim bench``."""

import pytest

import npusim.bench as bench

pytestmark = pytest.mark.conv


def test_conv2d_img2col_case_registers_and_reports_the_figures():
    import npusim.bench.conv  # noqa: F401  (registers the case)

    line = bench.CASES["conv2d_img2col"](1)
    for key in ("kernel", "sim_s", "numpy_s", "ratio", "instructions", "sim_cycles", "mac_utilization", "target_sim_s"):
        assert key in line, key
    assert line["kernel"] == "conv2d_img2col" and line["target_sim_s"] == 0.060   # issue 18
    assert line["mac_utilization"] > 0.75
    assert line["sim_s"] > 0 and line["numpy_s"] > 0
