"""``npusim bench``: one JSON object per case, with the documented keys (speed targets are not asserted)."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.core

KEYS = {"kernel", "sim_s", "numpy_s", "ratio", "instructions", "sim_cycles"}


def _json_lines(stdout: str) -> dict:
    out = {}
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            d = json.loads(line)
            out[d.get("kernel")] = d
    return out


def test_bench_prints_vector_add_and_matmul_lines():
    # the two core cases only: the whole bench also runs every lab's explorer (minutes)
    proc = subprocess.run([sys.executable, "-m", "npusim.cli", "bench", "--repeat", "1", "--only", "vector_add",
                           "--only", "matmul"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = _json_lines(proc.stdout)
    assert {"vector_add", "matmul"} <= set(lines), proc.stdout
    for name in ("vector_add", "matmul"):
        d = lines[name]
        assert KEYS <= set(d), d
        assert d["kernel"] == name
        assert d["sim_s"] > 0 and d["numpy_s"] > 0
        assert d["ratio"] == pytest.approx(d["sim_s"] / d["numpy_s"], rel=0.05, abs=0.02)
        assert isinstance(d["instructions"], int) and d["instructions"] > 0
        assert isinstance(d["sim_cycles"], int) and d["sim_cycles"] > 0


def test_bench_only_one_case_and_unknown_case():
    proc = subprocess.run([sys.executable, "-m", "npusim.cli", "bench", "--repeat", "1", "--only", "matmul"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert set(_json_lines(proc.stdout)) == {"matmul"}
    bad = subprocess.run([sys.executable, "-m", "npusim.cli", "bench", "--repeat", "1", "--only", "nope"],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0
    assert "nope" in bad.stdout + bad.stderr


def test_bench_finds_the_cases_of_every_module_in_its_package(tmp_path, monkeypatch):
    import pkgutil

    import npusim.bench as bench

    cases = bench.load()
    assert {"vector_add", "matmul", "conv2d_img2col", "redraw_01_vector_add"} <= set(cases)
    assert {fn.__module__ for fn in cases.values()} == {
        f"npusim.bench.{m.name}" for m in pkgutil.iter_modules(bench.__path__)}
    # a module dropped into the package is all a new case needs
    (tmp_path / "dropped_in.py").write_text(
        "from npusim.bench import case\n\n\n@case('dropped_in')\ndef dropped_in(repeat):\n"
        "    return {'kernel': 'dropped_in', 'repeat': repeat}\n")
    monkeypatch.setattr(bench, "__path__", [*bench.__path__, str(tmp_path)])
    monkeypatch.setattr(bench, "CASES", dict(bench.CASES))
    try:
        assert bench.load()["dropped_in"](3) == {"kernel": "dropped_in", "repeat": 3}
    finally:
        sys.modules.pop("npusim.bench.dropped_in", None)
