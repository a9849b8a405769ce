"""binder/ resolves: a fresh virtualenv (no system packages) resolves binder/requirements.txt against the
package index from the repository root, as Binder's repo2docker does; repo2docker itself accepts the folder
and plans the image; postBuild writes the JupyterLab settings that turn off the news popup."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.binder

ROOT = Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"
NEWS = "@jupyterlab/apputils-extension:notification"


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, \
        f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory) -> Path:
    """A new virtualenv without the system's site-packages: only what pip resolves can be in it."""
    path = tmp_path_factory.mktemp("binder") / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(path)
    probe = subprocess.run([str(path / "bin" / "python"), "-c", "import numpy"], capture_output=True)
    assert probe.returncode != 0, "the venv sees the system's packages"
    return path


def test_runtime_and_requirements_files():
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"
    reqs = [line.strip() for line in (BINDER / "requirements.txt").read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")]
    assert "-e ." in reqs, "the labs need npusim itself, installed from the repository root"
    assert any(re.match(r"jupyterlab\b", r) for r in reqs)
    torch = [r for r in reqs if re.match(r"torch\b", r)]
    assert torch == ["torch==2.13.0+cpu"], "labs 08-09 need torch, and only its CPU build fits Binder"
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in reqs, "the CPU build is on PyTorch's index"
    assert not any(re.match(r"(tensorflow|jax)\b", r) for r in reqs)
    assert not (BINDER / "environment.yml").exists(), "environment.yml would win over requirements.txt"


def test_postbuild_is_strict_and_executable():
    text = (BINDER / "postBuild").read_text()
    assert text.startswith("#!/usr/bin/env bash\n") or text.startswith("#!/bin/bash\n")
    assert re.search(r"^set -e", text, re.M), "postBuild must stop at the first failing command"
    assert (BINDER / "postBuild").stat().st_mode & stat.S_IXUSR
    assert "overrides.json" in text and "checkForUpdates" in text and "fetchNews" in text


@pytest.mark.slow
def test_postbuild_writes_the_news_override(fresh_venv, tmp_path):
    """Run postBuild with the fresh venv's python first on PATH: it writes (and on a rerun, merges) the
    JupyterLab settings overrides in that environment, never in this one."""
    settings = fresh_venv / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"}}))
    env = {**os.environ, "PATH": f"{fresh_venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    for _ in range(2):
        _run(["bash", str(BINDER / "postBuild")], cwd=ROOT, env=env)
    data = json.loads(settings.read_text())
    assert data[NEWS] == {"checkForUpdates": False, "fetchNews": "false"}
    assert data["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}, "existing settings kept"
    conf = json.loads((fresh_venv / "etc" / "jupyter" / "jupyter_server_config.d" / "npusim.json").read_text())
    from npusim.course.start import SAVE_HOOK

    assert conf["ContentsManager"]["pre_save_hook"] == SAVE_HOOK   # as `npusim start` saves solutions/


@pytest.mark.slow
def test_requirements_resolve_in_a_fresh_venv(fresh_venv, tmp_path):
    """`pip install --dry-run -r binder/requirements.txt` from the repository root, as repo2docker runs it."""
    report = tmp_path / "report.json"
    # --retries 0: an index this machine cannot reach (PyTorch's) fails at once instead of retrying per package
    _run([str(fresh_venv / "bin" / "python"), "-m", "pip", "install", "--dry-run", "--quiet", "--retries", "0",
          "--timeout", "10", "--report", str(report), "-r", "binder/requirements.txt"], cwd=ROOT, timeout=600)
    installs = {i["metadata"]["name"].lower().replace("_", "-"): i for i in json.loads(report.read_text())["install"]}
    assert installs["npusim"]["download_info"]["dir_info"].get("editable") is True
    assert Path(installs["npusim"]["download_info"]["url"].removeprefix("file://")).resolve() == ROOT
    for need in ("jupyterlab", "ipywidgets", "ipykernel", "numpy", "matplotlib", "ml-dtypes"):
        assert need in installs, f"{need} is not installed on Binder"
    assert installs["jupyterlab"]["metadata"]["version"].startswith("4.")
    assert installs["torch"]["metadata"]["version"].endswith("+cpu"), "torch must be the CPU build"
    assert not [n for n in installs if n.startswith("nvidia-")], "no CUDA libraries on Binder"


@pytest.mark.slow
def test_repo2docker_accepts_the_folder(fresh_venv):
    """repo2docker (pip package jupyter-repo2docker) plans the image without building it (no Docker here):
    it picks Python 3.11, installs binder/requirements.txt after copying the repository (for `-e .`), and
    runs postBuild."""
    _run([str(fresh_venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "jupyter-repo2docker"],
         timeout=600)
    proc = _run([str(fresh_venv / "bin" / "repo2docker"), "--no-build", "--debug", "."], cwd=ROOT, timeout=300)
    out = proc.stdout + proc.stderr
    assert "python=3.11" in out, out[-2000:]
    copy_repo = out.index("COPY --chown=0:0 src/ ${REPO_DIR}/")
    install = out.index('pip install --no-cache-dir -r "binder/requirements.txt"')
    assert install > copy_repo, "`-e .` needs the repository copied before pip runs"
    assert re.search(r"binder/postBuild", out[copy_repo:]), "postBuild is not run"
