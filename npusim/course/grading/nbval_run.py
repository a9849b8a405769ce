"""Running one restored notebook under nbval, on the grader's side, with its kernel in the submission's
sandbox, and reading back what each cell did.

nbval (``python -m pytest --nbval-lax --nbval-current-env --nbval-cell-timeout=T``) names its items
``Cell N``, counting code cells from 0; the junit XML gives each item's outcome and the grader's plugin
logs each cell's error, output size and ``PASSED`` line. The whole run is killed after the notebook's
wall-clock limit.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from .plugin import ANSI, DEFAULT_OUTPUT_CAP
from .processes import kill_tree
from .sandbox import PYTHON, Sandbox


@dataclass
class CellRun:
    """What one code cell did, from the junit XML and the plugin's log."""

    number: int                         # nbval's "Cell N": code cells counted from 0
    outcome: str                        # "passed", "failed", "xfailed" (after a timeout), "not run"
    ename: str = ""
    evalue: str = ""
    timeout: bool = False
    kernel_died: bool = False           # the kernel died while this cell ran
    kernel_dead: bool = False           # the kernel was already dead when this cell was to run
    passed_line: str | None = ""        # None: this nbval does not expose the cell's output (trust junit)
    output_chars: int = 0
    output_capped: bool = False
    forged: str | None = None           # what the kernel said changed in the checks or the seed after it


@dataclass
class RunResult:
    """One nbval run of a notebook: per-cell results (by nbval's cell number) and how the run ended."""

    cells: dict[int, CellRun]
    notebook_timeout: bool = False
    returncode: int | None = None
    log_tail: str = ""
    junit_found: bool = False
    logged: int = 0                     # cells the plugin saw run (0 with results: the kernel never started)


LIVE: set[subprocess.Popen] = set()     # grading subprocesses running now (killed on Ctrl-C)
LIVE_LOCK = threading.Lock()


def read_junit(path: Path) -> dict[int, str] | None:
    """``{N: outcome}`` for nbval's items ``Cell N``; None when the file is missing or unreadable."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    out: dict[int, str] = {}
    for case in root.iter("testcase"):
        m = re.fullmatch(r"Cell (\d+)", case.get("name", ""))
        if not m:
            continue
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif (skipped := case.find("skipped")) is not None:
            outcome = "xfailed" if "xfail" in (skipped.get("type") or "") else "not run"
        else:
            outcome = "passed"
        out[int(m.group(1))] = outcome
    return out


def read_log(path: Path) -> dict[int, dict]:
    """``{N: record}`` from the plugin's JSON lines (the last record of a cell wins)."""
    records: dict[int, dict] = {}
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return records
    for line in lines:
        try:
            rec = json.loads(line)
            records[int(rec["cell"])] = rec
        except (ValueError, KeyError, TypeError):
            continue
    return records


def run_nbval(nb_path: Path, box: Sandbox, *, cell_timeout: float, notebook_timeout: float,
              output_cap: int = DEFAULT_OUTPUT_CAP) -> RunResult:
    """Run ``nb_path`` (inside ``box.grader``) under nbval, its kernel in ``box``; collect per-cell results.
    pytest and every result file are the grader's: the kernel can neither see nor touch them."""
    out = box.grader
    junit, log, console = out / "junit.xml", out / "cells.jsonl", out / "pytest.log"
    ini = out / "pytest.ini"
    ini.write_text("[pytest]\n", encoding="utf-8")
    argv = [*PYTHON, "-m", "pytest", nb_path.name,
            "-p", "nbval.plugin", "-p", "npusim.course.grading.plugin",
            "--nbval-lax", "--nbval-current-env", f"--nbval-cell-timeout={cell_timeout:g}",
            "-p", "no:cacheprovider", "-c", str(ini), "--rootdir", str(nb_path.parent),
            f"--junitxml={junit}", f"--npusim-grade-log={log}", f"--npusim-output-cap={output_cap}",
            f"--npusim-sandbox={box.kernel_spec()}",
            "-q", "--color=no", "-W", "ignore::DeprecationWarning"]
    with open(console, "wb") as sink:
        proc = subprocess.Popen(argv, cwd=nb_path.parent, stdout=sink, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=box.pytest_env(), start_new_session=True)
        with LIVE_LOCK:
            LIVE.add(proc)
        overrun = False
        try:
            proc.wait(timeout=notebook_timeout)
        except subprocess.TimeoutExpired:
            overrun = True
        finally:
            # also after a normal exit: the kernel's unshare and below it the kernel, the first process of
            # the submission's PID namespace, whose end ends every process of that namespace
            kill_tree(proc)
            with LIVE_LOCK:
                LIVE.discard(proc)
    try:
        with open(console, "rb") as f:
            f.seek(max(0, console.stat().st_size - 3000))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        tail = ""
    outcomes = read_junit(junit) if not overrun else None
    records = read_log(log)
    cells: dict[int, CellRun] = {}
    for n in sorted(set(outcomes or {}) | set(records)):
        rec = records.get(n, {})
        if outcomes is not None:
            outcome = outcomes.get(n, "not run")
        else:  # no junit (the run was stopped): what the plugin logged before that
            outcome = "failed" if rec.get("raised") else "passed"
        cells[n] = CellRun(n, outcome, rec.get("ename", ""), rec.get("evalue", ""), bool(rec.get("timeout")),
                           bool(rec.get("kernel_died")), bool(rec.get("kernel_dead")), rec.get("passed_line", ""),
                           int(rec.get("output_chars", 0)), bool(rec.get("output_capped")), rec.get("forged"))
    return RunResult(cells, overrun, None if overrun else proc.returncode, ANSI.sub("", tail),
                     outcomes is not None, len(records))
