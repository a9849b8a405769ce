"""``npusim grade``: mark learner notebooks against the course's check cells.

For each submission the grader

1. reads it (never writes it: the file is byte-identical afterwards) and tells its lab from its cell ids,
   or failing that from its file name;
2. builds a temporary copy in which every check cell (code cells tagged ``check`` in ``solutions/``) is
   the canonical one, matched by cell id: an edited check is replaced, a deleted one is re-inserted at its
   solution position relative to the neighbouring cell ids; all outputs are cleared;
3. runs that copy with nbval (``python -m pytest --nbval-lax --nbval-current-env --nbval-cell-timeout=T``)
   in a subprocess, in a temporary folder, under a wall-clock limit for the whole notebook (the process
   group is killed on overrun);
4. reads each cell's result from pytest's junit XML (nbval names items ``Cell N``, counting code cells from
   0) and maps check cells back to their ids: a check scores its points (1, or ``metadata.points`` of the
   solution's check cell) when its cell ran without error and printed its ``PASSED`` line.

Grading never stops at a bad submission: broken JSON, an unknown lab, a cell timeout, a crashed kernel or
a huge output each give the submission's row a status and a reason. Results go to a CSV gradebook (one row
per submission) and one Markdown feedback file per learner holding each failed check's learner-facing
message (the ``CheckFailed`` text; never a traceback).

This module is also the small pytest plugin loaded into the grading subprocess
(``-p npusim.course.grading``): it notices a dead kernel within a second instead of waiting for the cell
timeout, caps the output a cell may send, and records each cell's error name, message and ``PASSED`` line.

A notebook runs arbitrary code: grade untrusted submissions in a throwaway container or account.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import nbformat

from .notebooks import find_root, make_lab

CHECK_TAG = "check"
DEFAULT_CELL_TIMEOUT = 120.0
DEFAULT_OUTPUT_CAP = 10_000_000        # characters of output one cell may send before the rest is cut
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_MAX_MESSAGE = 4000                     # characters of an error message kept for feedback


# --- the course's labs and their checks --------------------------------------------------------------

@dataclass(frozen=True)
class CheckSpec:
    """One canonical check cell of a lab."""

    id: str
    points: float
    cell: Any                           # the canonical cell (a NotebookNode), as the learner's lab has it


@dataclass
class Lab:
    """A lab as the grader needs it: its canonical cells (the learner version) and its checks."""

    name: str                           # the notebook's stem, e.g. "01_vector_add"
    cells: list                         # the learner version's cells (make_lab of the solution)
    checks: list[CheckSpec]

    @property
    def cell_ids(self) -> list[str]:
        return [c.get("id", "") for c in self.cells]

    @property
    def max_points(self) -> float:
        return sum(c.points for c in self.checks)


def load_labs(root: Path, problems: list[str] | None = None) -> dict[str, Lab]:
    """Every lab of ``root/solutions`` with its check cells (tagged ``check``, with a cell id). A solution
    that cannot be read is skipped and described in ``problems`` (or raises when that is None)."""
    labs: dict[str, Lab] = {}
    for path in sorted((root / "solutions").glob("*.ipynb")):
        try:
            solution = nbformat.read(path, as_version=4)
            learner = make_lab(solution, path.name)   # check cells exactly as the learner received them
        except Exception as e:
            if problems is None:
                raise
            problems.append(f"{path.name} skipped: {type(e).__name__}: {e}")
            continue
        points = {c.get("id"): c.get("metadata", {}).get("points", 1) for c in solution.cells}
        checks = [CheckSpec(c["id"], float(points.get(c["id"], 1)), c) for c in learner.cells
                  if c.cell_type == "code" and CHECK_TAG in c.get("metadata", {}).get("tags", []) and c.get("id")]
        labs[path.stem] = Lab(path.stem, list(learner.cells), checks)
    return labs


def default_root() -> Path:
    """The course root: found from the current folder, else the checkout this package is installed from."""
    try:
        return find_root()
    except FileNotFoundError:
        here = Path(__file__).resolve().parents[2]
        if (here / "solutions").is_dir():
            return here
        raise


# --- which lab, which learner ------------------------------------------------------------------------

def lab_from_name(path: Path, labs: dict[str, Lab]) -> Lab | None:
    """The lab whose stem (e.g. ``01_vector_add``) appears in the file name; the longest wins."""
    name = path.name.lower()
    found = [lab for stem, lab in labs.items() if stem.lower() in name]
    return max(found, key=lambda lab: len(lab.name)) if found else None


def lab_from_ids(nb, labs: dict[str, Lab]) -> Lab | None:
    """The lab sharing the most cell ids with the notebook (None when none does, or on a tie)."""
    ids = {c.get("id") for c in nb.cells if c.get("id")}
    scores = sorted(((len(ids & set(lab.cell_ids)), lab.name) for lab in labs.values()), reverse=True)
    if not scores or scores[0][0] == 0 or (len(scores) > 1 and scores[0][0] == scores[1][0]):
        return None
    return labs[scores[0][1]]


def learner_name(path: Path, lab: str | None) -> str:
    """The learner, from the file name: ``alice_01_vector_add.ipynb`` -> ``alice``; a file named just like
    the lab (``alice/01_vector_add.ipynb``) takes its folder's name; ``alice.ipynb`` -> ``alice``."""
    stem = path.name[:-len(".ipynb")] if path.name.lower().endswith(".ipynb") else path.stem
    if lab:
        stem = re.sub(re.escape(lab), " ", stem, flags=re.I)
    name = re.sub(r"[\s_.\-]+", " ", stem).strip().replace(" ", "_")
    if name:
        return name
    for parent in path.resolve().parents:
        if parent.name and parent.name.lower() not in {"labs", "submissions", "submitted", "solutions"}:
            return parent.name
    return path.name


# --- restoring the check cells ---------------------------------------------------------------------

def restore_checks(nb, lab: Lab) -> tuple[Any, list[str]]:
    """A copy of ``nb`` whose check cells are the canonical ones, with every output cleared.

    A check cell found by id is replaced wholesale (source, type, tags); a missing one is inserted after
    the nearest preceding cell (in the lab's order) that the notebook still has, else before the nearest
    following one, else at the end. Returns the copy and notes for the learner."""
    out = copy.deepcopy(nb)
    notes: list[str] = []
    order = lab.cell_ids
    has_ids = any(c.get("id") for c in out.cells)
    if not has_ids:
        notes.append("the notebook has no cell ids (saved by an old Jupyter?), so its check cells could not be "
                     "matched: the lab's checks were added at its end")
    for spec in lab.checks:
        canonical = copy.deepcopy(spec.cell)
        canonical.outputs, canonical.execution_count = [], None
        hits = [i for i, c in enumerate(out.cells) if c.get("id") == spec.id]
        if hits:
            for i in hits:
                old = out.cells[i]
                if old.get("cell_type") != "code" or old.get("source", "") != spec.cell.source:
                    notes.append(f"the check cell `{spec.id}` had been changed; it was graded as the lab has it")
                out.cells[i] = copy.deepcopy(canonical)
            continue
        position = len(out.cells)
        have = {c.get("id"): i for i, c in enumerate(out.cells) if c.get("id")}
        k = order.index(spec.id)
        before = next((have[i] for i in reversed(order[:k]) if i in have), None)
        after = next((have[i] for i in order[k + 1:] if i in have), None)
        if before is not None:
            position = before + 1
        elif after is not None:
            position = after
        out.cells.insert(position, canonical)
        if has_ids:
            notes.append(f"the check cell `{spec.id}` was missing; it was put back where the lab has it")
    for cell in out.cells:
        if cell.get("cell_type") == "code":
            cell.outputs, cell.execution_count = [], None
    return out, notes


# --- running one notebook with nbval ----------------------------------------------------------------

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


@dataclass
class RunResult:
    """One nbval run of a notebook: per-cell results (by nbval's cell number) and how the run ended."""

    cells: dict[int, CellRun]
    notebook_timeout: bool = False
    returncode: int | None = None
    log_tail: str = ""
    junit_found: bool = False
    logged: int = 0                     # cells the plugin saw run (0 with results: the kernel never started)


_LIVE: set[subprocess.Popen] = set()    # grading subprocesses running now (killed on Ctrl-C)
_LIVE_LOCK = threading.Lock()


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (read from /proc; empty where there is none)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*") if Path("/proc").is_dir() else []:
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill_tree(proc: subprocess.Popen) -> None:
    """Kill the grading subprocess, its process group and every descendant (the kernel runs in a session
    of its own, and a learner's code may have started more)."""
    mine = os.getpgrp()
    pids = _descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)   # its own session (start_new_session): pgid == pid
    except (ProcessLookupError, PermissionError, OSError):
        pass
    for pid in [proc.pid, *pids]:
        try:
            pgid = os.getpgid(pid)
            if pgid != mine:
                os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _subprocess_env(tmp: Path) -> dict[str, str]:
    """The grading subprocess's environment: this one without pytest's variables (an outer run's
    ``PYTEST_ADDOPTS=--junitxml=...`` must not redirect its report), with a private IPython folder."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "JPY_", "COV_CORE_")) and k not in {"PYTHONBREAKPOINT"}}
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",   # only nbval and this plugin: a hermetic pytest
               PYTHONDONTWRITEBYTECODE="1",
               IPYTHONDIR=str(tmp / "ipython"),       # no learner startup files; no shared history database
               MPLBACKEND="Agg",
               NPUSIM_STRICT="1")                    # failing checks raise, so nbval records their message
    return env


def _read_junit(path: Path) -> dict[int, str] | None:
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


def _read_log(path: Path) -> dict[int, dict]:
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


def run_notebook_nbval(nb_path: Path, out_dir: Path, *, cell_timeout: float, notebook_timeout: float,
                       output_cap: int = DEFAULT_OUTPUT_CAP) -> RunResult:
    """Run ``nb_path`` under nbval in a subprocess (its cwd: the notebook's folder) and collect per-cell
    results. The whole run is killed (process group and descendants) after ``notebook_timeout`` s."""
    junit, log, console = out_dir / "junit.xml", out_dir / "cells.jsonl", out_dir / "pytest.log"
    ini = out_dir / "pytest.ini"
    ini.write_text("[pytest]\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "pytest", nb_path.name,
           "-p", "nbval.plugin", "-p", "npusim.course.grading",
           "--nbval-lax", "--nbval-current-env", f"--nbval-cell-timeout={cell_timeout:g}",
           "-p", "no:cacheprovider", "-c", str(ini), "--rootdir", str(nb_path.parent),
           f"--junitxml={junit}", f"--npusim-grade-log={log}", f"--npusim-output-cap={output_cap}",
           "-q", "--color=no", "-W", "ignore::DeprecationWarning"]
    with open(console, "wb") as sink:
        proc = subprocess.Popen(cmd, cwd=nb_path.parent, stdout=sink, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=_subprocess_env(out_dir), start_new_session=True)
        with _LIVE_LOCK:
            _LIVE.add(proc)
        overrun = False
        try:
            proc.wait(timeout=notebook_timeout)
        except subprocess.TimeoutExpired:
            overrun = True
        finally:
            _kill_tree(proc)    # also after a normal exit: whatever is left in its process group
            with _LIVE_LOCK:
                _LIVE.discard(proc)
    try:
        with open(console, "rb") as f:
            f.seek(max(0, console.stat().st_size - 3000))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        tail = ""
    outcomes = _read_junit(junit) if not overrun else None
    records = _read_log(log)
    cells: dict[int, CellRun] = {}
    for n in sorted(set(outcomes or {}) | set(records)):
        rec = records.get(n, {})
        if outcomes is not None:
            outcome = outcomes.get(n, "not run")
        else:  # no junit (the run was stopped): what the plugin logged before that
            outcome = "failed" if rec.get("raised") else "passed"
        cells[n] = CellRun(n, outcome, rec.get("ename", ""), rec.get("evalue", ""), bool(rec.get("timeout")),
                           bool(rec.get("kernel_died")), bool(rec.get("kernel_dead")), rec.get("passed_line", ""),
                           int(rec.get("output_chars", 0)), bool(rec.get("output_capped")))
    return RunResult(cells, overrun, None if overrun else proc.returncode, _ANSI.sub("", tail),
                     outcomes is not None, len(records))


# --- scoring ----------------------------------------------------------------------------------------

@dataclass
class CheckResult:
    """One check's points and its learner-facing message."""

    id: str
    points: float
    max_points: float
    message: str                        # learner-facing: the PASSED line, the CheckFailed text, or why not run


@dataclass
class Grade:
    """One submission's row of the gradebook."""

    path: Path
    learner: str
    lab: str | None
    checks: list[CheckResult] = field(default_factory=list)
    max_points: float = 0.0
    status: str = "ok"
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)     # for the learner (restored checks, cut output...)
    seconds: float = 0.0

    @property
    def total(self) -> float:
        return sum(c.points for c in self.checks)

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


def _first_line(source: str) -> str:
    line = next((s for s in source.splitlines() if s.strip()), "")
    return line if len(line) <= 60 else line[:57] + "..."


def _describe_cell(number: int, cells: list) -> str:
    """``code cell 7 (id 00_tou-9e6a55b6: `while True: ...`)`` for the gradebook and feedback."""
    code = [c for c in cells if c.get("cell_type") == "code"]
    if number >= len(code):
        return f"code cell {number}"
    cell = code[number]
    return f"code cell {number} (id {cell.get('id', '?')}: `{_first_line(cell.get('source', ''))}`)"


def _clip(text: str, limit: int = _MAX_MESSAGE) -> str:
    text = _ANSI.sub("", text or "").strip()
    return text if len(text) <= limit else text[:limit] + " [...]"


def score(lab: Lab, nb, run: RunResult, cell_timeout: float, notebook_timeout: float,
          output_cap: int = DEFAULT_OUTPUT_CAP) -> tuple[list[CheckResult], str, list[str], list[str]]:
    """Points per check of ``lab`` from ``run`` of the restored notebook ``nb``; also the submission's
    status, reasons (for the gradebook) and notes (for the learner)."""
    code_ids = [c.get("id") for c in nb.cells if c.get("cell_type") == "code"]
    status, reasons, notes = "ok", [], []
    dead = next((c for c in run.cells.values() if c.kernel_died or c.kernel_dead), None)
    stuck = next((c for c in run.cells.values() if c.timeout), None)
    if run.notebook_timeout:
        status = "notebook-timeout"
        reasons.append(f"the notebook did not finish within {notebook_timeout:g} s and was stopped")
    elif dead is not None:
        status = "kernel-died"
        reasons.append(f"the Python kernel stopped (crashed or exited) in {_describe_cell(dead.number, nb.cells)}; "
                       f"the cells after it did not run")
    elif stuck is not None:
        status = "timeout"
        reasons.append(f"{_describe_cell(stuck.number, nb.cells)} did not finish within the {cell_timeout:g} s "
                       f"cell time limit")
    elif not run.junit_found or (run.cells and not run.logged):
        status = "grader-error"
        reasons.append(f"no cell ran (pytest exited with code {run.returncode}): {run.log_tail[-300:]!r}")
        notes.append("the grader could not run this notebook (a problem on the grading side: your instructor "
                     "will look at it)")
    for cell in run.cells.values():
        if cell.output_capped:
            note = (f"{_describe_cell(cell.number, nb.cells)} printed {cell.output_chars / 1e6:.1f} million "
                    f"characters of output; only the first {output_cap / 1e6:.1f} million were kept")
            reasons.append(note)
            notes.append(note)
    if status in ("kernel-died", "timeout", "notebook-timeout"):
        notes.append(reasons[0])

    results = []
    for spec in lab.checks:
        number = code_ids.index(spec.id) if spec.id in code_ids else None
        cell = run.cells.get(number) if number is not None else None
        points, message = 0.0, ""
        if cell is None or cell.outcome == "not run":
            why = ("the notebook was stopped before it" if run.notebook_timeout else
                   "the kernel had stopped" if dead is not None else "the notebook stopped before it")
            message = f"did not run: {why}"
        elif cell.outcome == "passed":
            if cell.passed_line or cell.passed_line is None:
                points, message = spec.points, cell.passed_line or "passed"
            else:
                message = ("the check cell ran without error but did not print its PASSED line (was `check` "
                           "redefined or the check function replaced?)")
        elif cell.kernel_died:
            message = "did not finish: the Python kernel stopped (crashed or exited) while the check ran"
        elif cell.kernel_dead:
            message = "did not run: the Python kernel had stopped (crashed or exited) in an earlier cell"
        elif cell.timeout:
            message = f"did not finish within the {cell_timeout:g} s cell time limit (an endless loop?)"
        elif cell.ename == "CheckFailed":
            message = cell.evalue
        elif cell.ename:
            message = (f"the check could not run: {cell.ename}: {_first_line(cell.evalue) or '(no message)'}"
                       + (" (did the exercise's cell run? is its function still there?)"
                          if cell.ename == "NameError" else ""))
        else:
            message = "did not pass: " + ("the kernel had stopped" if dead is not None else "the cell failed")
        results.append(CheckResult(spec.id, points, spec.points, message))
    return results, status, reasons, notes


def _empty_checks(lab: Lab, why: str) -> list[CheckResult]:
    return [CheckResult(s.id, 0.0, s.points, why) for s in lab.checks]


def grade_submission(path: Path, labs: dict[str, Lab], *, cell_timeout: float = DEFAULT_CELL_TIMEOUT,
                     notebook_timeout: float | None = None, output_cap: int = DEFAULT_OUTPUT_CAP,
                     keep: Path | None = None) -> Grade:
    """Grade one submission; never raises and never writes to ``path``."""
    t0 = time.perf_counter()
    notebook_timeout = notebook_timeout or default_notebook_timeout(cell_timeout)
    grade = Grade(path, learner_name(path, None), None)
    try:
        _grade_into(grade, path, labs, cell_timeout, notebook_timeout, output_cap, keep)
    except Exception as e:  # a grader bug must not lose the row
        grade.status = "grader-error"
        grade.reasons.append(f"{type(e).__name__}: {e}")
    grade.seconds = time.perf_counter() - t0
    return grade


def _grade_into(grade: Grade, path: Path, labs: dict[str, Lab], cell_timeout: float, notebook_timeout: float,
                output_cap: int, keep: Path | None) -> None:
    by_name = lab_from_name(path, labs)
    if by_name:
        grade.lab, grade.learner = by_name.name, learner_name(path, by_name.name)
        grade.max_points = by_name.max_points
    try:
        data = path.read_bytes()
    except OSError as e:
        grade.status = "missing-file"
        grade.reasons.append(f"cannot read the file: {e.strerror or e}")
        if by_name:
            grade.checks = _empty_checks(by_name, "not graded: the file could not be read")
        return
    try:
        text = data.decode("utf-8")
        json.loads(text)
    except (UnicodeDecodeError, ValueError) as e:
        nb, problem = None, f"not valid JSON: {e}"
    else:
        try:
            nb, problem = nbformat.reads(text, as_version=4), ""
            if not isinstance(nb.get("cells"), list):
                raise ValueError("it has no list of cells")
        except Exception as e:
            nb, problem = None, f"not a notebook: {_clip(str(e), 200).splitlines()[0]}"
    if nb is None:
        grade.status = "invalid-notebook"
        grade.reasons.append(f"the file is {problem}")
        if by_name:
            grade.checks = _empty_checks(by_name, "not graded: the file is not a readable notebook (broken JSON?)")
        return
    lab = lab_from_ids(nb, labs) or by_name
    if lab is None:
        grade.status = "unknown-lab"
        grade.reasons.append("no lab shares cell ids with it and its file name names none")
        return
    if by_name and by_name is not lab:
        grade.reasons.append(f"the file name names {by_name.name} but the cells are those of {lab.name}")
    grade.lab, grade.learner, grade.max_points = lab.name, learner_name(path, lab.name), lab.max_points
    restored, notes = restore_checks(nb, lab)
    grade.notes.extend(notes)
    grade.reasons.extend(notes)
    with tempfile.TemporaryDirectory(prefix="npusim-grade-", ignore_cleanup_errors=True) as tmp:
        work, out = Path(tmp) / "nb", Path(tmp) / "out"
        work.mkdir()
        out.mkdir()
        nb_path = work / f"{lab.name}.ipynb"
        nbformat.write(restored, nb_path)
        run = run_notebook_nbval(nb_path, out, cell_timeout=cell_timeout, notebook_timeout=notebook_timeout,
                                 output_cap=output_cap)
        if keep is not None:  # debugging aid: keep the restored notebook and the raw results
            dest = keep / f"{grade.learner}_{lab.name}"
            shutil.copytree(tmp, dest, dirs_exist_ok=True)
    checks, status, reasons, run_notes = score(lab, restored, run, cell_timeout, notebook_timeout, output_cap)
    grade.checks, grade.status = checks, status
    grade.reasons[:0] = reasons
    grade.notes.extend(run_notes)


def default_notebook_timeout(cell_timeout: float) -> float:
    """The whole notebook's wall-clock limit when none is given: 3 cell limits, at least 10 minutes."""
    return max(600.0, 3 * cell_timeout)


def grade_all(paths: Iterable[Path], labs: dict[str, Lab], *, jobs: int = 1, progress=None,
              **options: Any) -> list[Grade]:
    """Grade ``paths`` with up to ``jobs`` at once; rows come back in the order of ``paths``."""
    paths = list(paths)
    grades: list[Grade | None] = [None] * len(paths)
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        futures = {pool.submit(grade_submission, p, labs, **options): i for i, p in enumerate(paths)}
        for fut in as_completed(futures):
            i = futures[fut]
            grades[i] = fut.result()
            if progress:
                progress(grades[i])
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        with _LIVE_LOCK:
            for proc in list(_LIVE):
                _kill_tree(proc)
        raise
    pool.shutdown()
    return [g for g in grades if g is not None]


# --- outputs ----------------------------------------------------------------------------------------

def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def check_columns(grades: list[Grade], labs: dict[str, Lab]) -> list[tuple[str, str, str]]:
    """``(lab, check id, column name)`` for every check of the labs graded, in lab then cell order; a
    check id used by two labs gets the lab as a prefix."""
    seen = [name for name in labs if any(g.lab == name for g in grades)]
    pairs = [(name, spec.id) for name in seen for spec in labs[name].checks]
    ids = [cid for _, cid in pairs]
    return [(lab, cid, cid if ids.count(cid) == 1 else f"{lab}/{cid}") for lab, cid in pairs]


def write_gradebook(grades: list[Grade], labs: dict[str, Lab], out: Path) -> None:
    """The CSV gradebook: learner, lab, file, one column per check, total, max, status, reason, seconds."""
    columns = check_columns(grades, labs)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["learner", "lab", "file", *[c for _, _, c in columns], "total", "max", "status", "reason",
                    "seconds"])
        for g in grades:
            points = {(g.lab, c.id): _fmt(c.points) for c in g.checks}
            w.writerow([g.learner, g.lab or "", str(g.path), *[points.get((lab, cid), "") for lab, cid, _ in columns],
                        _fmt(g.total), _fmt(g.max_points), g.status, g.reason, f"{g.seconds:.1f}"])


def _fence(text: str) -> str:
    """``text`` in a fenced block whose fence no line of it can close."""
    longest = max((len(m) for m in re.findall(r"`{3,}|~{3,}", text)), default=0)
    fence = "~" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def feedback_markdown(learner: str, grades: list[Grade]) -> str:
    """One learner's feedback: per lab, the points per check and each failed check's message."""
    lines = [f"# Feedback for {learner}", ""]
    for g in grades:
        title = g.lab or "an unknown lab"
        unit = "point" if g.max_points == 1 else "points"
        lines += [f"## {title}: {_fmt(g.total)} of {_fmt(g.max_points)} {unit}", "",
                  f"File: `{g.path.name}`", ""]
        if g.lab is None or not g.checks:
            lines += [f"This notebook could not be graded: {g.reason}.", ""]
            continue
        lines += ["| Check | Points | Result |", "|---|---|---|"]
        for c in g.checks:
            ok = c.points >= c.max_points
            detail = c.message.replace("|", "\\|") if ok else "not passed (below)"
            lines.append(f"| `{c.id}` | {_fmt(c.points)} / {_fmt(c.max_points)} | {detail} |")
        lines.append("")
        if g.notes:
            lines += ["What the grader noticed:", ""] + [f"- {n}." for n in dict.fromkeys(g.notes)] + [""]
        for c in g.checks:
            if c.points < c.max_points:
                lines += [f"### `{c.id}`: not passed", "", _fence(c.message), ""]
    return "\n".join(lines).rstrip() + "\n"


def _safe_filename(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "learner"


def write_feedback(grades: list[Grade], folder: Path) -> list[Path]:
    """One Markdown file per learner in ``folder`` (``<learner>.md``)."""
    folder.mkdir(parents=True, exist_ok=True)
    by_learner: dict[str, list[Grade]] = {}
    for g in grades:
        by_learner.setdefault(g.learner, []).append(g)
    written, used = [], set()
    for learner, gs in by_learner.items():
        base = _safe_filename(learner)
        name, k = base, 1
        while name.lower() in used:
            k += 1
            name = f"{base}-{k}"
        used.add(name.lower())
        path = folder / f"{name}.md"
        path.write_text(feedback_markdown(learner, gs), encoding="utf-8")
        written.append(path)
    return written


# --- the command ------------------------------------------------------------------------------------

def expand(paths: Iterable[str]) -> list[Path]:
    """Submission paths; a folder gives every ``*.ipynb`` below it (not checkpoints)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(q for q in p.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts)
        else:
            out.append(p)
    return out


def main(args: argparse.Namespace) -> int:
    """``npusim grade``: grade, print one line per submission, write the gradebook and the feedback."""
    try:
        import nbval  # noqa: F401  (the grading subprocess needs it)
    except ImportError:
        print("npusim grade needs pytest and nbval: pip install -e '.[grade]'", file=sys.stderr)
        return 2
    root = Path(args.root).resolve() if args.root else default_root()
    problems: list[str] = []
    labs = load_labs(root, problems)
    for problem in problems:
        print(f"warning: solutions/{problem}", file=sys.stderr)
    if not labs:
        print(f"no labs in {root / 'solutions'}", file=sys.stderr)
        return 2
    paths = expand(args.submissions)
    if not paths:
        print("no submissions given", file=sys.stderr)
        return 2
    keep = Path(args.keep) if args.keep else None
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()

    def progress(g: Grade) -> None:
        with lock:
            print(f"{g.learner:<16} {g.lab or '?':<16} {_fmt(g.total):>4}/{_fmt(g.max_points):<4} "
                  f"{g.status:<16} {g.seconds:6.1f} s  {g.path}", flush=True)

    t0 = time.perf_counter()
    grades = grade_all(paths, labs, jobs=args.jobs, progress=progress, cell_timeout=args.timeout,
                       notebook_timeout=args.notebook_timeout, keep=keep)
    out = Path(args.out)
    write_gradebook(grades, labs, out)
    files = write_feedback(grades, Path(args.feedback_dir))
    print(f"graded {len(grades)} submission(s) in {time.perf_counter() - t0:.1f} s with {args.jobs} job(s); "
          f"gradebook: {out}; feedback: {len(files)} file(s) in {args.feedback_dir}/")
    return 0


# --- the pytest plugin of the grading subprocess (-p npusim.course.grading) -----------------------------

class KernelDied(RuntimeError):
    """The kernel process ended while a cell ran."""


_STATE: dict[str, Any] = {"log": None, "cap": DEFAULT_OUTPUT_CAP, "chars": 0, "capped": False}


def pytest_addoption(parser) -> None:
    group = parser.getgroup("npusim-grade", "npusim grade (internal)")
    group.addoption("--npusim-grade-log", default=None, help="write one JSON line per executed cell here")
    group.addoption("--npusim-output-cap", type=int, default=DEFAULT_OUTPUT_CAP,
                    help="characters of output a cell may send before the rest is dropped")


def pytest_configure(config) -> None:
    log = config.getoption("npusim_grade_log", None)
    if not log:
        return
    _STATE["log"] = Path(log)
    _STATE["cap"] = int(config.getoption("npusim_output_cap"))
    _patch_nbval()


def _patch_nbval() -> None:
    """Make nbval's kernel notice a dead kernel within a second, and bound what a cell's output costs."""
    from nbval.kernel import RunningKernel

    if getattr(RunningKernel, "_npusim_patched", False) or not all(
            hasattr(RunningKernel, name) for name in ("get_message", "await_reply", "is_alive")):
        return  # another nbval: run without the patches (a dead kernel then costs a cell timeout)
    get_message = RunningKernel.get_message

    def bounded_get_message(self, stream, timeout=None):
        msg = get_message(self, stream, timeout=timeout)
        if stream == "iopub":
            _bound_output(msg)
        return msg

    def await_reply(self, msg_id, timeout=None):
        deadline = None if timeout is None else time.monotonic() + float(timeout)
        while True:
            wait = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if wait <= 0:
                raise queue.Empty
            try:
                msg = self.get_message(stream="shell", timeout=wait)
            except queue.Empty:
                if not self.is_alive():
                    raise KernelDied("the Python kernel stopped (crashed or exited) while this cell ran") from None
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                if msg["content"]["status"] == "aborted":
                    raise RuntimeError("Kernel aborted execution request")
                return

    RunningKernel.get_message = bounded_get_message
    RunningKernel.await_reply = await_reply
    RunningKernel._npusim_patched = True


def _bound_output(msg: dict) -> None:
    """Count a cell's output; past the cap, drop the text and data (keep the message's shape). Error
    messages are always clipped."""
    kind, content = msg.get("msg_type"), msg.get("content", {})
    if kind == "error":
        content["evalue"] = _clip(str(content.get("evalue", "")), _MAX_MESSAGE)
        tb = [str(t) for t in content.get("traceback", [])][-30:]
        content["traceback"] = [t[:2000] for t in tb]
        return
    if kind == "stream":
        size = len(content.get("text", ""))
    elif kind in ("display_data", "execute_result", "update_display_data"):
        size = sum(len(v) if isinstance(v, str) else len(json.dumps(v)) for v in content.get("data", {}).values())
    else:
        return
    _STATE["chars"] += size
    if _STATE["chars"] > _STATE["cap"]:
        first = not _STATE["capped"]
        _STATE["capped"] = True
        note = "\n[npusim grade: output cut here]\n" if first else ""
        if kind == "stream":
            content["text"] = note
        else:
            content["data"] = {"text/plain": note}


def pytest_runtest_setup(item) -> None:
    _STATE["chars"], _STATE["capped"] = 0, False


def pytest_runtest_makereport(item, call) -> None:
    """Log what the cell did (its error, its PASSED line, its output size) after it ran."""
    if call.when != "call" or _STATE["log"] is None or not hasattr(item, "cell_num"):
        return
    outs = getattr(item, "test_outputs", None)
    seen = outs is not None
    outs = outs or []
    err = next((o for o in outs if o.get("output_type") == "error"), None)
    stdout = "".join(o.get("text", "") for o in outs if o.get("output_type") == "stream" and o.get("name") == "stdout")
    passed = next((line for line in stdout.splitlines() if line.startswith("PASSED ")), "")
    exc = call.excinfo.value if call.excinfo is not None else None
    text = ""
    if exc is not None:
        args = getattr(exc, "args", ())
        text = str(args[1]) if type(exc).__name__ == "NbCellError" and len(args) > 1 else str(exc)
    rec = {
        "cell": item.cell_num,
        "raised": exc is not None,
        "ename": err.get("ename", "") if err else (type(exc).__name__ if exc is not None else ""),
        "evalue": _clip(err.get("evalue", "") if err else text),
        "timeout": "Timeout of" in text,
        "kernel_died": isinstance(exc, KernelDied),
        "kernel_dead": "Kernel dead" in text,   # it had died in an earlier cell
        "passed_line": passed[:500] if seen else None,
        "output_chars": _STATE["chars"],
        "output_capped": _STATE["capped"],
    }
    with open(_STATE["log"], "a", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")
