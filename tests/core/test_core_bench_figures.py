"""``npusim bench`` figures of issue 18: us per simulated instruction, the targets met or not, and the
scaling case's cost per element / per MAC (speed targets themselves are printed, not asserted)."""

import pytest

pytestmark = pytest.mark.core


def test_line_reports_us_per_instruction_over_every_launch_and_whether_targets_are_met():
    from npusim.bench import line

    d = line("k", 0.010, 0.004, None, instructions=2000, target_sim_s=0.020, target_ratio=3.0)
    assert d["us_per_instruction"] == 5.0 and d["ratio"] == 2.5 and d["meets_targets"] is True
    d = line("k", 0.010, 0.002, None, instructions=1000, instructions_total=4000, target_sim_s=0.020,
             target_ratio=3.0)
    assert d["us_per_instruction"] == 2.5      # the case's launches together
    assert d["meets_targets"] is False         # ratio 5 > 3
    assert line("k", 0.03, 0.02, None, target_sim_s=0.020)["meets_targets"] is False
    assert "us_per_instruction" not in line("k", 0.01, 0.01, None)


def test_scaling_case_prints_cost_per_unit_for_each_size(monkeypatch):
    from npusim.bench import scaling

    monkeypatch.setattr(scaling, "VECTOR_SIZES", (1 << 13, 1 << 15))
    monkeypatch.setattr(scaling, "MATMUL_SIZES", (64, 128))
    d = scaling.bench_scaling(1)
    assert d["vector_add_elements"] == [1 << 13, 1 << 15] and d["matmul_sizes"] == [64, 128]
    for key in ("vector_add_ns_per_element", "matmul_ns_per_mac"):
        assert len(d[key]) == 2 and all(v > 0 for v in d[key])
    assert d["vector_add_growth"] == pytest.approx(max(d["vector_add_ns_per_element"])
                                                   / min(d["vector_add_ns_per_element"]), abs=0.01)
    assert d["matmul_growth"] >= 1.0


def test_compare_triton_is_a_named_case_that_says_what_it_needs(monkeypatch):
    import builtins
    import subprocess
    import sys

    import npusim.bench as bench
    from npusim.bench import compare_triton

    assert "compare_triton" in bench.load() and "compare_triton" in bench.SLOW   # not in a plain `npusim bench`
    real_import = builtins.__import__

    def no_triton(name, *args, **kwargs):
        if name == "triton" or name.startswith("triton."):
            raise ImportError("No module named 'triton'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_triton)
    out = compare_triton.bench_compare_triton(1)
    assert out["kernel"] == "compare_triton" and "pip install triton" in out["error"]
    monkeypatch.setattr(builtins, "__import__", real_import)
    help_text = subprocess.run([sys.executable, "-m", "npusim.cli", "bench", "--help"], capture_output=True,
                               text=True, check=True).stdout
    assert "--compare" in help_text and "compare_triton" in help_text
