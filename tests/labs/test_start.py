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
    assert f"--ServerApp.root_dir={ROOT}" in cmd and (ROOT / start.FIRST_LAB).exists()
    assert "--LabApp.default_url=/lab/tree/labs/00_tour.ipynb" in cmd   # the printed URL is the lab's
    assert f"--ContentsManager.pre_save_hook={start.SAVE_HOOK}" in cmd
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


def test_settings_turn_the_news_toast_off_and_keep_the_environments_overrides(tmp_path, monkeypatch):
    prefix = tmp_path / "prefix"
    (prefix / "settings").mkdir(parents=True)
    (prefix / "settings" / "overrides.json").write_text(json.dumps({"some/plugin:x": {"a": 1}}))
    import jupyterlab.commands

    monkeypatch.setattr(jupyterlab.commands, "get_app_dir", lambda: str(prefix))
    out = start.app_settings_dir(tmp_path / "run")
    got = json.loads((out / "overrides.json").read_text())
    assert got["some/plugin:x"] == {"a": 1}
    assert got["@jupyterlab/apputils-extension:notification"] == {"checkForUpdates": False, "fetchNews": "false"}
    assert json.loads((prefix / "settings" / "overrides.json").read_text()) == {"some/plugin:x": {"a": 1}}


def _server(root: Path, tmp: Path):
    import secrets

    port, token = start.free_port(), secrets.token_hex(8)
    cmd = start.server_command(root, port, browser=False, token=token, retry_ports=False,
                               settings_dir=start.app_settings_dir(tmp))
    log = tmp / "log"
    proc = subprocess.Popen(cmd, cwd=root, stdout=log.open("wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    assert start.wait_until_answers(proc, url, token, log, 120) is None
    return proc, url, token, log


@pytest.mark.slow
def test_a_learner_run_of_a_solution_leaves_solutions_unchanged_and_labs_check_clean(tmp_path):
    """JupyterLab saves a run solution (outputs, counts, kernel metadata) and a run lab through the real
    server: neither file's bytes change, `labs check --strict` stays clean; a source edit is kept."""
    import urllib.request

    import nbformat

    from npusim.course.notebooks import Course

    root = tmp_path / "repo"
    for sub in ("solutions", "labs"):
        (root / sub).mkdir(parents=True)
        for f in ("00_tour.ipynb",):
            (root / sub / f).write_bytes((ROOT / sub / f).read_bytes())
    before = (root / "solutions" / "00_tour.ipynb").read_bytes()
    lab_before = (root / "labs" / "00_tour.ipynb").read_bytes()
    proc, url, token, log = _server(root, tmp_path)
    try:
        assert f"{url}/lab/tree/labs/00_tour.ipynb?token=" in log.read_text()   # a given token prints as ...
        for path, edit in (("solutions/00_tour.ipynb", False), ("solutions/00_tour.ipynb", True),
                           ("labs/00_tour.ipynb", False)):
            nb = nbformat.read(root / path, as_version=4)
            code = [c for c in nb.cells if c.cell_type == "code"]
            for i, c in enumerate(code):
                c.execution_count = i + 1
                c.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"ran {i}\n")]
                c.metadata["execution"] = {"iopub.status.idle": "2026-01-01T00:00:00Z"}
                c.metadata["scrolled"] = True
            nb.metadata["language_info"] = {"name": "python", "version": "3.99.0"}
            if edit:
                code[0].source += "\n# my note"
            body = json.dumps({"type": "notebook", "format": "json", "content": nb}).encode()
            req = urllib.request.Request(f"{url}/api/contents/{path}?token={token}", data=body, method="PUT",
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as r:
                assert r.status == 200
            if not edit:   # a run leaves no trace
                assert (root / path).read_bytes() == (before if path.startswith("solutions") else lab_before), path
    finally:
        start.stop_server(proc)
    saved = nbformat.read(root / "solutions" / "00_tour.ipynb", as_version=4)
    assert saved.cells and all(c.outputs == [] and c.execution_count is None for c in saved.cells
                               if c.cell_type == "code")
    assert [c for c in saved.cells if c.cell_type == "code"][0].source.endswith("# my note")   # edits are kept
    (root / "solutions" / "00_tour.ipynb").write_bytes(before)
    assert Course(root).problems(strict=True) == []
