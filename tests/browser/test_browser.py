"""A learner's view, end to end: JupyterLab serves the repository, headless Chromium (driven by the Python
playwright package) opens solutions/01_vector_add.ipynb, runs all cells, and moves the explorer's tile
slider with the keyboard; the chart and the metrics table must change.

Needs /usr/bin/chromium (`apt-get install -y chromium`) and `pip install playwright` (never
`playwright install`: it would download a browser of its own). Without them the test is skipped with the
reason, unless NPUSIM_REQUIRE_BROWSER=1 (CI sets it): then it fails instead."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "solutions/01_vector_add.ipynb"
CHROMIUM = os.environ.get("NPUSIM_CHROMIUM", "/usr/bin/chromium")  # Debian's; never a downloaded one
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                 "--disable-dev-shm-usage"]
ARTIFACTS = ROOT / "test-artifacts"   # gitignored
# JupyterLab user settings for the test: no news/update popup over the page, no autosave (the solution must
# stay without outputs), every cell kept in the DOM (no windowing), so selectors see the whole notebook.
SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"checkForUpdates": False, "fetchNews": "false"},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def _unavailable(reason: str) -> None:
    """Skip, or fail when the environment says the browser test must run."""
    if os.environ.get("NPUSIM_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason}; NPUSIM_REQUIRE_BROWSER=1 requires the real-browser test to run")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """Stop the server by its PID: SIGTERM (it shuts its kernels down), then SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture
def jupyter_lab(tmp_path, request):
    """JupyterLab on 127.0.0.1 at a free port with a token, serving the repository root; yields its URL."""
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        _unavailable("jupyterlab is not installed (pip install -e '.[test]')")
    settings_dir = tmp_path / "lab-settings"
    for name, value in SETTINGS.items():
        (settings_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (settings_dir / name).write_text(json.dumps(value))
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}  # kernels draw inline, as for a learner
    env.update(JUPYTERLAB_SETTINGS_DIR=str(settings_dir), JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
               JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    checkpoints = ROOT / "solutions" / ".ipynb_checkpoints"   # JupyterLab writes one when it opens a notebook
    if not checkpoints.exists():
        request.addfinalizer(lambda: shutil.rmtree(checkpoints, ignore_errors=True))
    port, token = _free_port(), secrets.token_hex(16)
    log = open(tmp_path / "jupyter-lab.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
                             "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", "--allow-root",
                             f"--ServerApp.root_dir={ROOT}"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    request.addfinalizer(lambda: (_stop(proc), log.close()))
    url = f"http://127.0.0.1:{port}"
    server_log = tmp_path / "jupyter-lab.log"
    deadline = time.monotonic() + 90
    while True:
        if proc.poll() is not None:
            pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{server_log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"jupyter lab did not answer in 90 s:\n{server_log.read_text()[-3000:]}")
        time.sleep(0.3)
    return {"url": url, "token": token, "log": server_log, "pid": proc.pid}


@pytest.fixture
def browser(request):
    """Headless Debian Chromium through the Python playwright package."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the Python package playwright is not installed (pip install -e '.[test]')")
    if not (os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        _unavailable(f"{CHROMIUM} is missing (apt-get install -y chromium)")
    pw = sync_playwright().start()
    request.addfinalizer(pw.stop)
    b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    request.addfinalizer(b.close)
    return b


def _chart_srcs(page) -> list[str]:
    return page.eval_on_selector_all(".widget-output img", "els => els.map(e => e.src)")


def _metrics(page) -> str:
    return page.inner_text("table.npusim-metrics")


def test_slider_redraws_chart_and_metrics(browser, jupyter_lab, capsys):
    t0 = time.perf_counter()
    solution = ROOT / NOTEBOOK
    digest = hashlib.sha256(solution.read_bytes()).hexdigest()
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    try:
        before, after = _run_all_and_move_slider(page, jupyter_lab)
    except Exception:
        failed = ARTIFACTS / "browser-01_vector_add-failure.png"
        page.screenshot(path=str(failed))
        with capsys.disabled():
            print(f"\nbrowser test failed: screenshot {failed}; server log {jupyter_lab['log']}")
        raise
    assert (before["readout"], after["readout"]) == ("4096", "8192"), "the tile slider did not step 4096 -> 8192"
    assert after["srcs"] and after["srcs"] != before["srcs"], "the chart image did not change"
    assert after["table"] != before["table"], "the metrics table did not change"

    shot = ARTIFACTS / "browser-01_vector_add-explorer.png"
    page.locator(".widget-slider").first.scroll_into_view_if_needed()
    page.screenshot(path=str(shot))
    page.close()
    assert hashlib.sha256(solution.read_bytes()).hexdigest() == digest, "the solution notebook was saved"
    with capsys.disabled():
        print(f"\nbrowser test: screenshot {shot}; {time.perf_counter() - t0:.1f} s in the browser")


def _run_all_and_move_slider(page, lab: dict) -> tuple[dict, dict]:
    """Open the notebook, run all cells, press ArrowRight on the tile slider; the explorer's state before
    and after (chart image sources, metrics table text, slider readout)."""
    page.goto(f"{lab['url']}/lab/tree/{NOTEBOOK}?token={lab['token']}&reset")
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    accept = page.locator(".jp-Dialog .jp-mod-accept")  # a cold server may ask which kernel to use
    try:
        accept.wait_for(timeout=3000)
        accept.click()
    except Exception:  # noqa: BLE001 - no dialog: nothing to accept
        pass
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']")

    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.click("[data-command='runmenu:run-all']")
    page.wait_for_selector(".widget-output img", timeout=120_000)
    page.wait_for_selector("table.npusim-metrics")
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
    text = page.inner_text(".jp-Notebook")
    assert "PASSED vector_add:" in text and "PASSED vector_add_fast:" in text, "not every cell ran cleanly"

    handle = page.locator(".widget-slider .noUi-handle").first
    readout = page.locator(".widget-slider .widget-readout").first
    handle.scroll_into_view_if_needed()
    before = {"srcs": _chart_srcs(page), "table": _metrics(page), "readout": readout.inner_text()}
    handle.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("old => { const s = [...document.querySelectorAll('.widget-output img')]"
                           ".map(e => e.src); return s.length > 0 && s.join() !== old.join(); }",
                           arg=before["srcs"], timeout=30_000)
    page.wait_for_function("old => { const t = document.querySelector('table.npusim-metrics');"
                           " return t && t.innerText !== old; }", arg=before["table"], timeout=30_000)
    after = {"srcs": _chart_srcs(page), "table": _metrics(page), "readout": readout.inner_text()}
    return before, after
