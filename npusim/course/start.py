"""``npusim start``: JupyterLab for the labs, as a learner needs it.

The file browser is rooted at the repository (so ``docs/``, ``solutions/`` and the package files a lab
cites can be opened), ``labs/00_tour.ipynb`` opens first, and as root (a container) the server gets
``--allow-root`` instead of refusing to start. ``npusim start --check`` is what CI runs after a fresh
install: every lab's first cell (its imports) runs in a kernel of this Python, then the server is started
headless exactly as for a learner, asked for its status and for the first lab, and stopped.
"""

from __future__ import annotations

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


def server_command(root: Path, port: int, ip: str = "127.0.0.1", browser: bool = True,
                   token: str | None = None, retry_ports: bool = True) -> list[str]:
    """The ``jupyter lab`` command line of :func:`main` (run with the working folder ``root``)."""
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={root}", f"--ip={ip}", f"--port={port}",
           FIRST_LAB]
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
    cmd = server_command(root, args.port or DEFAULT_PORT, args.ip, browser=not args.no_browser,
                         retry_ports=args.port is None)
    print(f"npusim start: JupyterLab at {root} (the file browser's root), opening {FIRST_LAB}; stop it with "
          "Ctrl-C", flush=True)
    try:
        return subprocess.call(cmd, cwd=root)
    except KeyboardInterrupt:
        return 0


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
    """Start the server as :func:`main` would (headless, a free port, a token), fetch its status and the
    first lab's page, stop it; the failures, in words."""
    port, token = free_port(), secrets.token_hex(16)
    cmd = server_command(root, port, browser=False, token=token, retry_ports=False)
    log = Path(tempfile.mkdtemp(prefix="npusim-start-")) / "jupyter-lab.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            why = wait_until_answers(proc, url, token, log, timeout)
            if why:
                return [why]
            with urllib.request.urlopen(f"{url}/lab/tree/{FIRST_LAB}?token={token}", timeout=30) as r:
                page = r.read().decode("utf-8", "replace")
            if r.status != 200 or "JupyterLab" not in page:
                return [f"/lab/tree/{FIRST_LAB} answered {r.status} without JupyterLab's page"]
            with urllib.request.urlopen(f"{url}/api/contents/{FIRST_LAB}?token={token}&content=0", timeout=30) as r:
                if r.status != 200:
                    return [f"the server cannot see {FIRST_LAB} (root_dir is not the repository?)"]
            print(f"  the server answered on port {port} with {FIRST_LAB} (pid {proc.pid}); stopping it", flush=True)
            return []
        finally:
            stop_server(proc)
            shutil.rmtree(log.parent, ignore_errors=True)


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
