"""Scoring: a check's points from what its cell did, and the submission's status, reasons and notes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .labs import Lab
from .nbval_run import CellRun, RunResult
from .plugin import DEFAULT_OUTPUT_CAP, clip


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
    flags: list[str] = field(default_factory=list)     # for the instructor: edited/moved/forged checks...
    sources: dict[str, str] = field(default_factory=dict)   # the lab's code cells as handed in (by cell id)
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
    return f"code cell {number} (In [{number + 1}], id {cell.get('id', '?')}: `{_first_line(cell.get('source', ''))}`)"


def first_forged(run: RunResult) -> CellRun | None:
    """The first cell after which the kernel reported the checks or the seed changed."""
    return next((run.cells[n] for n in sorted(run.cells) if run.cells[n].forged), None)


def score(lab: Lab, nb, run: RunResult, cell_timeout: float, notebook_timeout: float,
          output_cap: int = DEFAULT_OUTPUT_CAP) -> tuple[list[CheckResult], str, list[str], list[str]]:
    """Points per check of ``lab`` from ``run`` of the restored notebook ``nb``; also the submission's
    status, reasons (for the gradebook) and notes (for the learner)."""
    code_ids = [c.get("id") for c in nb.cells if c.get("cell_type") == "code"]
    status, reasons, notes = "ok", [], []
    ordered = [run.cells[n] for n in sorted(run.cells)]
    dead = next((c for c in ordered if c.kernel_died or c.kernel_dead), None)
    stuck = next((c for c in ordered if c.timeout), None)
    stopped = stuck is not None and dead is not None and stuck.number <= dead.number  # killed after a hang
    if run.notebook_timeout:
        status = "notebook-timeout"
        reasons.append(f"the notebook did not finish within {notebook_timeout:g} s and was stopped")
    elif stuck is not None and (dead is None or stopped):
        status = "timeout"
        reasons.append(f"{_describe_cell(stuck.number, nb.cells)} did not finish within the {cell_timeout:g} s "
                       f"cell time limit" + ("; the kernel did not respond to the interrupt and was stopped, so "
                                             "the cells after it did not run" if stopped else ""))
    elif dead is not None:
        status = "kernel-died"
        reasons.append(f"the Python kernel stopped (crashed or exited) in {_describe_cell(dead.number, nb.cells)}; "
                       f"the cells after it did not run")
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
    forged = first_forged(run)
    if forged is not None:
        status = "forged"
        where = _describe_cell(forged.number, nb.cells)
        reasons.insert(0, f"after {where} the checks or the seed were not as imported ({forged.forged}); every "
                          f"mark from that cell on is withheld")
        notes.append(f"after {where} the course's checks or their hidden seed had been changed from inside the "
                     f"notebook, so no check from there on was scored; your instructor will look at it")

    results = []
    for spec in lab.checks:
        number = code_ids.index(spec.id) if spec.id in code_ids else None
        cell = run.cells.get(number) if number is not None else None
        points, message = 0.0, ""
        if cell is None or cell.outcome == "not run":
            why = ("the notebook was stopped before it" if run.notebook_timeout else
                   "the kernel was stopped after a cell hit the time limit" if stopped else
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
            message = ("did not run: the kernel was stopped after an earlier cell hit the time limit" if stopped
                       else "did not run: the Python kernel had stopped (crashed or exited) in an earlier cell")
        elif cell.timeout:
            message = f"did not finish within the {cell_timeout:g} s cell time limit (an endless loop?)"
        elif cell.ename in ("CheckFailed", "NotFinished"):
            message = cell.evalue
        elif cell.ename:
            message = (f"the check could not run: {cell.ename}: {_first_line(cell.evalue) or '(no message)'}"
                       + (" (did the exercise's cell run? is its function still there?)"
                          if cell.ename == "NameError" else ""))
        else:
            message = "did not pass: " + ("the kernel had stopped" if dead is not None else "the cell failed")
        if forged is not None and number is not None and number >= forged.number:
            points, message = 0.0, (f"withheld: the checks or their seed were changed from inside the notebook "
                                    f"at In [{forged.number + 1}]")
        results.append(CheckResult(spec.id, points, spec.points, message))
    return results, status, reasons, notes


def empty_checks(lab: Lab, why: str) -> list[CheckResult]:
    """Every check of ``lab`` at 0 points, with ``why`` as its message."""
    return [CheckResult(s.id, 0.0, s.points, why) for s in lab.checks]


def mark_tampered(grade: Grade, changed: list[str], attempts: list[str]) -> None:
    """Status ``tampered``: the submission changed the course (``changed``) or tried to (``attempts``,
    refused or not). Its checks score nothing: they may have run against checks it had replaced."""
    what = [*changed, *(f"tried to {a}" for a in attempts)]
    grade.reasons.insert(0, "it changed or tried to change the course used for grading: " + "; ".join(what[:12])
                         + ("; ..." if len(what) > 12 else ""))
    grade.flags += (["tampered"] if changed else []) + (["tamper attempt"] if attempts else [])
    if grade.status == "tampered":
        return
    grade.status = "tampered"
    note = ("your notebook changed or tried to change the course's checks or the grader's files, so it was not "
            "scored; your instructor will look at it")
    grade.notes.append(note)
    if grade.lab is not None and grade.checks:
        for c in grade.checks:
            c.points, c.message = 0.0, "not scored: " + note
