"""The start command: `python3 start.py` (the bootstrap: venv, install, PyTorch's CPU build) and
`npusim start` (JupyterLab at the repository root on lab 00, as root too). CI runs the whole command's
install part in a fresh virtualenv and `npusim start --check` (.ci/run); these tests check the decisions."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from npusim.course import start

pytestmark = pytest.mark.labs
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bootstrap():
    spec = importlib.util.spec_from_file_location("start_py", ROOT / "start.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_server_is_rooted_at_the_repository_and_opens_lab_00(monkeypatch):
    monkeypatch.setattr(start.os, "geteuid", lambda: 1000)
    cmd = start.server_command(ROOT, 8890, browser=False, retry_ports=False)
    assert cmd[:3] == [sys.executable, "-m", "jupyterlab"]
    assert f"--ServerApp.root_dir={ROOT}" in cmd and "labs/00_tour.ipynb" in cmd and (ROOT / start.FIRST_LAB).exists()
    assert "--no-browser" in cmd and "--ServerApp.port_retries=0" in cmd and "--allow-root" not in cmd
    monkeypatch.setattr(start.os, "geteuid", lambda: 0)   # a container's root
    assert "--allow-root" in start.server_command(ROOT, 8888)


def test_start_outside_a_course_says_what_it_needs(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "npusim.cli", "start"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "solutions/" in proc.stderr and "--root" in proc.stderr


def _pip_report(*names: str) -> str:
    return json.dumps({"install": [{"metadata": {"name": n, "version": "1"}} for n in names]})


def test_bootstrap_takes_torch_from_the_cpu_index_only_when_pip_would_bring_cuda(bootstrap, monkeypatch):
    def fake(stdout, rc=0):
        return lambda cmd, **kw: SimpleNamespace(returncode=rc, stdout=stdout, stderr="no network")

    monkeypatch.setattr(bootstrap.subprocess, "run", fake(_pip_report("torch", "sympy", "nvidia-cublas-cu12")))
    assert bootstrap.needs_cpu_index(Path("python"), "torch==2.13.0")       # PyPI's Linux build
    monkeypatch.setattr(bootstrap.subprocess, "run", fake(_pip_report("torch", "sympy", "filelock")))
    assert not bootstrap.needs_cpu_index(Path("python"), "torch==2.13.0")   # a local CPU wheel, macOS
    monkeypatch.setattr(bootstrap.subprocess, "run", fake("", rc=1))
    assert bootstrap.needs_cpu_index(Path("python"), "torch==2.13.0")       # not found: try the CPU index
    assert bootstrap.torch_pin() == "torch==2.13.0"                          # Binder's pin, without +cpu
    assert bootstrap.CPU_INDEX in (ROOT / "binder" / "requirements.txt").read_text()


def test_bootstrap_installs_in_order_and_passes_options_to_npusim_start(bootstrap, monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(bootstrap, "run", lambda cmd, what: calls.append([str(c) for c in cmd]))
    monkeypatch.setattr(bootstrap, "needs_cpu_index", lambda py, pin: True)
    monkeypatch.setattr(bootstrap.subprocess, "call", lambda cmd, **kw: calls.append(["call", *map(str, cmd)]) or 1)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    assert bootstrap.main(["--venv", str(venv), "--no-browser", "--port", "8890"]) == 1
    pip = [c for c in calls if "pip" in c]
    assert pip[0][-3:] == ["torch==2.13.0", "--index-url", bootstrap.CPU_INDEX]   # before the course
    assert pip[1][-2:] == ["-e", f"{ROOT}[lab]"]
    assert calls[-1][-4:] == ["start", "--no-browser", "--port", "8890"]
