#!/usr/bin/env python3
"""Start the labs on a fresh machine: ``python3 start.py`` in this folder (``--help`` for the options).

1. Creates a virtualenv in ``.venv/`` (or uses the one there): no system Python is changed, which also
   avoids pip's "externally-managed-environment" refusal on Debian and Ubuntu.
2. Installs the course and everything every lab needs into it: ``pip install -e ".[lab]"`` (JupyterLab
   and PyTorch for labs 08 and 09; ``--extra test`` adds what the tests need), with PyTorch as a **CPU
   build**.
3. Runs ``npusim start``: JupyterLab with its file browser at this folder, ``labs/00_tour.ipynb`` open
   (as root, e.g. in a container, with ``--allow-root``). Ctrl-C stops it.

How the CPU build of PyTorch is chosen: pip is first asked, as a dry run (it reads package metadata and
downloads no wheel), what installing the pinned torch would bring. If that pulls NVIDIA's CUDA libraries
(PyPI's build for Linux: several GB), torch is installed from PyTorch's own CPU index
(https://download.pytorch.org/whl/cpu, as ``binder/requirements.txt`` does); otherwise (a CPU wheel
found locally, as on the course machines, or macOS and Windows, whose PyPI builds have no CUDA) as pip
found it. So PyTorch's index is only contacted when it is needed.

Only the standard library is used: this runs before anything is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def torch_pin() -> str:
    """The PyTorch release the course uses: Binder's pin (``torch==X+cpu``) without the ``+cpu``."""
    for line in (ROOT / "binder" / "requirements.txt").read_text().splitlines():
        if line.strip().startswith("torch=="):
            return line.strip().split("+")[0]
    return "torch"


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def run(cmd: list, what: str) -> None:
    print(f"start.py: {what}\n  $ {' '.join(map(str, cmd))}", flush=True)
    if subprocess.call([str(c) for c in cmd]) != 0:
        sys.exit(f"start.py: {what} failed (see above)")


def make_venv(venv: Path) -> Path:
    py = venv_python(venv)
    if py.exists():
        print(f"start.py: using the virtualenv {venv}", flush=True)
        return py
    print(f"start.py: creating a virtualenv in {venv}", flush=True)
    if subprocess.call([sys.executable, "-m", "venv", str(venv)]) != 0 or not py.exists():
        sys.exit("start.py: could not create the virtualenv. On Debian or Ubuntu, install Python's venv module "
                 "first (as root: apt-get install -y python3-venv), then run this again.")
    return py


def needs_cpu_index(py: Path, pin: str) -> bool:
    """Whether installing ``pin`` as pip resolves it here would bring CUDA libraries (a dry run)."""
    proc = subprocess.run([str(py), "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-", pin],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"start.py: pip could not resolve {pin} here ({proc.stderr.strip()[-300:]}); trying PyTorch's "
              "CPU index", flush=True)
        return True
    names = [item["metadata"]["name"].lower() for item in json.loads(proc.stdout or "{}").get("install", [])]
    return any(n.startswith("nvidia-") for n in names)


def install(py: Path, extras: list[str]) -> None:
    pin = torch_pin()
    try:
        import_ok = subprocess.call([str(py), "-c", "import torch"], stderr=subprocess.DEVNULL) == 0
    except OSError:
        import_ok = False
    if not import_ok:
        if needs_cpu_index(py, pin):
            run([py, "-m", "pip", "install", pin, "--index-url", CPU_INDEX],
                f"installing PyTorch's CPU build ({pin}) from {CPU_INDEX}")
        else:
            run([py, "-m", "pip", "install", pin], f"installing PyTorch ({pin}, a CPU build here)")
    run([py, "-m", "pip", "install", "-e", f"{ROOT}[{','.join(extras)}]"],
        f"installing the course with the extras {', '.join(extras)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Create/use .venv, install everything the labs need (PyTorch as a "
                                             "CPU build), start JupyterLab on labs/00_tour.ipynb.")
    ap.add_argument("--install-only", action="store_true", help="install, do not start JupyterLab")
    ap.add_argument("--extra", action="append", default=[], help="more extras to install (e.g. test, grade)")
    ap.add_argument("--venv", default=str(ROOT / ".venv"), help="the virtualenv (default: .venv here)")
    args, rest = ap.parse_known_args(argv)
    if sys.version_info < (3, 10):
        sys.exit(f"start.py: the labs need Python 3.10 or newer; this is {sys.version.split()[0]}")
    py = make_venv(Path(args.venv).resolve())
    install(py, ["lab", *args.extra])
    if args.install_only:
        print(f"start.py: installed. Start the labs with {Path(args.venv) / 'bin' / 'npusim'} start", flush=True)
        return 0
    npusim = py.parent / ("npusim.exe" if os.name == "nt" else "npusim")
    os.chdir(ROOT)
    return subprocess.call([str(npusim), "start", *rest])  # e.g. --no-browser, --port 8890


if __name__ == "__main__":
    sys.exit(main())
