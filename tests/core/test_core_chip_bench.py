"""The chip benchmark cases run and print figures near the published ones (simulated cycles: exact)."""

import pytest

pytestmark = pytest.mark.core


def test_the_8192_squared_add_lands_near_the_published_264_us():
    from npusim.bench.chip import PUBLISHED_ADD_US, bench_chip_add

    d = bench_chip_add(1)
    assert d["cores"] == 48 and d["published_us"] == PUBLISHED_ADD_US == 264.0   # one wave on the 48 AIV
    assert 0.9 * PUBLISHED_ADD_US < d["time_us"] < 1.1 * PUBLISHED_ADD_US
    assert d["achieved_tb_per_s"] <= d["hbm_tb_per_s"]          # reads and writes share one HBM
    assert d["hbm_bytes"] == 3 * 8192 * 8192 * 2


def test_stem_and_stage_cases_report_their_figures():
    from npusim.bench.chip import RESNET_STAGES, bench_resnet_stages, bench_resnet_stem

    stem = bench_resnet_stem(1)
    assert 0.15 < stem["mac_utilization"] < 0.2 < 0.85 < stem["issued_mac_utilization"]
    stages = bench_resnet_stages(1)
    for hw, c in RESNET_STAGES:
        row = stages[f"{hw}x{hw}x{c}"]
        assert row["monotonic"] and len(row["mac_utilization"]) == 4


@pytest.mark.slow
def test_chip_ns_per_mac_case_compares_the_operator_path_with_run_matmul():
    from npusim.bench.chip import CHIP_NS_PER_MAC_TARGET, bench_chip_ns_per_mac

    d = bench_chip_ns_per_mac(1)
    chip, one = d["ops_matmul_1024_24_cores"], d["ops_matmul_1024_1_core"]
    assert chip["cores"] > 1 and one["cores"] == 1 and d["target_ratio"] == CHIP_NS_PER_MAC_TARGET == 1.5
    for row in (chip, one):   # CPU seconds, measured in this process: the ratio is what the bench reports
        assert row["cpu_ns_per_mac"] > 0
        assert row["ratio_to_run_matmul"] == pytest.approx(row["cpu_ns_per_mac"] / d["run_matmul_512_64tiles"]
                                                           ["cpu_ns_per_mac"], rel=0.02)
    assert d["meets_target"] == (chip["ratio_to_run_matmul"] <= 1.5)
