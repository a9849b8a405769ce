"""``npusim start``: JupyterLab for the labs, as a learner needs it.

The file browser is rooted at the repository (so ``docs/``, ``solutions/`` and the package files a lab
cites can be opened), ``labs/00_tour.ipynb`` opens first, and as root (a container) the server gets
``--allow-root`` instead of refusing to start. ``npusim start --check`` is what CI runs after a fresh
install: every lab's first cell (its imports) runs in a kernel of this Python, then the server is started
headless exactly as for a learner, asked for its status and for the first lab, and stopped.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

FIRST_LAB = "labs/00_tour.ipynb"
DEFAULT_PORT = 8888
#: JupyterLab settings every learner's server gets, as Binder's ``postBuild`` sets them: no news or update
#: toast over the labs.
OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"checkForUpdates": False, "fetchNews": "false"}}
#: Saving a notebook of ``solutions/`` keeps it without outputs (:mod:`npusim.course.save_hook`).
SAVE_HOOK = "npusim.course.save_hook.keep_solutions_clean"


def app_settings_dir(into: Path) -> Path:
    """A copy of this JupyterLab's application settings folder (``<prefix>/share/jupyter/lab/settings``: its
    ``overrides.json`` and the rest, if any) in ``into``, with :data:`OVERRIDES` merged into its
    ``overrides.json``: the server is pointed at the copy, so the Python environment's files are never
    changed."""
    from jupyterlab.commands import get_app_dir

    src = Path(get_app_dir()) / "settings"
    dst = Path(into) / "settings"
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    dst.mkdir(parents=True, exist_ok=True)
    path = dst / "overrides.json"
    try:
        settings = json.loads(path.read_text()) if path.exists() else {}
    except ValueError:
        settings = {}  # an unreadable overrides file: JupyterLab would ignore it too
    for plugin, values in OVERRIDES.items():
        settings.setdefault(plugin, {}).update(values)
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return dst


def server_command(root: Path, port: int, ip: str = "127.0.0.1", browser: bool = True,
                   token: str | None = None, retry_ports: bool = True, settings_dir: Path | None = None) -> list[str]:
    """The ``jupyter lab`` command line of :func:`main` (run with the working folder ``root``). The first
    lab is the server's default URL, not a file to open: so the URL the server prints (and opens) is the
    lab's, ``/lab/tree/labs/00_tour.ipynb?token=...``, not the Launcher's ``/lab?token=...``.
    ``settings_dir``: JupyterLab's application settings (:func:`app_settings_dir`)."""
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={root}", f"--ip={ip}", f"--port={port}",
           f"--LabApp.default_url=/lab/tree/{FIRST_LAB}", f"--ContentsManager.pre_save_hook={SAVE_HOOK}"]
    if settings_dir is not None:
        cmd.append(f"--LabApp.app_settings_dir={settings_dir}")
    if not retry_ports:
        cmd.append("--ServerApp.port_retries=0")
    if not browser:
        cmd.append("--no-browser")
    if token is not None:
        cmd.append(f"--IdentityProvider.token={token}")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # containers run as root; JupyterLab refuses that without the flag
    return cmd


def _root(args) -> Path:
    from .notebooks import find_root

    return Path(args.root).resolve() if args.root else find_root()


def main(args) -> int:
    """``npusim start`` (see the module docstring)."""
    try:
        root = _root(args)
    except FileNotFoundError as e:
        print(f"npusim start: {e}", file=sys.stderr)
        return 2
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        print("npusim start: JupyterLab is not installed in this Python; install the labs' extras: "
              f"{sys.executable} -m pip install -e '{root}[lab]' (or run `python3 start.py` in {root})",
              file=sys.stderr)
        return 2
    if args.check:
        return check(root)
    # a port the learner chose must not silently move to another
    settings = Path(tempfile.mkdtemp(prefix="npusim-lab-settings-"))
    cmd = server_command(root, args.port or DEFAULT_PORT, args.ip, browser=not args.no_browser,
                         retry_ports=args.port is None, settings_dir=app_settings_dir(settings))
    print(f"npusim start: JupyterLab at {root} (the file browser's root), opening {FIRST_LAB}: the URL to open "
          "is the line below ending in 00_tour.ipynb?token=...; stop it with Ctrl-C", flush=True)
    try:
        return subprocess.call(cmd, cwd=root)
    except KeyboardInterrupt:
        return 0
    finally:
        shutil.rmtree(settings, ignore_errors=True)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_answers(proc: subprocess.Popen, url: str, token: str, log: Path, timeout: float) -> str | None:
    """Poll the server's ``/api/status`` until it answers; None, or why not (it exited, or it did not answer
    in ``timeout`` seconds), with the end of its log."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            return f"jupyter lab exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=3) as r:
                if r.status == 200:
                    return None
        except OSError:
            pass
        if time.monotonic() > deadline:
            return f"jupyter lab did not answer in {timeout:.0f} s:\n{log.read_text()[-3000:]}"
        time.sleep(0.3)


def stop_server(proc: subprocess.Popen) -> None:
    """Stop a server we started, by its PID: SIGTERM (it shuts its kernels down), then SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def first_cells(root: Path, timeout: float = 180) -> list[str]:
    """Run the first code cell of every lab in its own kernel; the failures, in words."""
    from .runner import run_notebook

    failed = []
    labs = sorted((root / "labs").glob("*.ipynb"))
    for i, lab in enumerate(labs, 1):
        t0 = time.perf_counter()
        (res,) = run_notebook(lab, timeout=timeout, cells=1) or [None]
        ok = res is not None and res.status == "ok"
        print(f"  [{i}/{len(labs)}] {lab.relative_to(root)}: first cell "
              f"{'ran' if ok else 'FAILED'} ({time.perf_counter() - t0:.1f} s)", flush=True)
        if not ok:
            why = "no code cell" if res is None else f"{res.status} {res.ename}: {res.evalue}"
            failed.append(f"{lab.relative_to(root)}: {why}")
    if not labs:
        failed.append(f"no labs in {root / 'labs'}")
    return failed


def server_answers(root: Path, timeout: float = 120) -> list[str]:
    """Start the server as :func:`main` would (headless, a free port, a token), check that it prints the
    first lab's URL, serves that lab's page and the news toast turned off, stop it; the failures, in words."""
    port, token = free_port(), secrets.token_hex(16)
    tmp = Path(tempfile.mkdtemp(prefix="npusim-start-"))
    cmd = server_command(root, port, browser=False, token=token, retry_ports=False,
                         settings_dir=app_settings_dir(tmp))
    log = tmp / "jupyter-lab.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            why = wait_until_answers(proc, url, token, log, timeout)
            if why:
                return [why]
            failed = []
            if f"{url}/lab/tree/{FIRST_LAB}?token=" not in log.read_text():
                failed.append(f"the server did not print the URL of {FIRST_LAB}:\n{log.read_text()[-2000:]}")
            with urllib.request.urlopen(f"{url}/lab/tree/{FIRST_LAB}?token={token}", timeout=30) as r:
                page = r.read().decode("utf-8", "replace")
            if r.status != 200 or "JupyterLab" not in page:
                failed.append(f"/lab/tree/{FIRST_LAB} answered {r.status} without JupyterLab's page")
            with urllib.request.urlopen(f"{url}/api/contents/{FIRST_LAB}?token={token}&content=0", timeout=30) as r:
                if r.status != 200:
                    failed.append(f"the server cannot see {FIRST_LAB} (root_dir is not the repository?)")
            plugin = next(iter(OVERRIDES))
            with urllib.request.urlopen(f"{url}/lab/api/settings/{plugin}?token={token}", timeout=30) as r:
                schema = json.loads(r.read())["schema"]["properties"]
            for key, value in OVERRIDES[plugin].items():
                if schema.get(key, {}).get("default") != value:
                    failed.append(f"JupyterLab's setting {plugin}.{key} is not {value!r} (the news toast is on)")
            if not failed:
                print(f"  the server answered on port {port} with {FIRST_LAB} (pid {proc.pid}); stopping it",
                      flush=True)
            return failed
        finally:
            stop_server(proc)
            shutil.rmtree(tmp, ignore_errors=True)


def check(root: Path) -> int:
    """``npusim start --check``: 0 when every lab's first cell runs and the server answers."""
    t0 = time.perf_counter()
    print(f"npusim start --check: every lab's first cell, in a kernel of {sys.executable}", flush=True)
    failed = first_cells(root)
    print("npusim start --check: the server, headless", flush=True)
    failed += server_answers(root)
    for f in failed:
        print(f"FAILED {f}", file=sys.stderr)
    print(f"npusim start --check: {'failed' if failed else 'ok'} in {time.perf_counter() - t0:.0f} s")
    return 1 if failed else 0
