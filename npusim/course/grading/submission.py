"""Grading one submission: read it (never write it), restore its checks, run it in its sandbox, verify the
course copy it ran against, score it."""

from __future__ import annotations

import secrets
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .labs import Lab
from .nbval_run import run_nbval
from .plugin import DEFAULT_OUTPUT_CAP, clip
from .restore import restore_checks
from .sandbox import Isolation, Limits, Sandbox
from .scoring import Grade, empty_checks, first_forged, mark_tampered, score
from .snapshot import Snapshot
from .submissions import lab_from_ids, lab_from_name, learner_name, parse_notebook

DEFAULT_CELL_TIMEOUT = 120.0
_INSTALLED = Path(__file__).resolve().parents[2]     # the npusim package this grader runs from


def default_notebook_timeout(cell_timeout: float) -> float:
    """The whole notebook's wall-clock limit when none is given: 3 cell limits, at least 10 minutes."""
    return max(600.0, 3 * cell_timeout)


@dataclass(frozen=True)
class Options:
    """How each submission of a run is graded (the same on every machine of a cluster)."""

    cell_timeout: float = DEFAULT_CELL_TIMEOUT
    notebook_timeout: float | None = None
    output_cap: int = DEFAULT_OUTPUT_CAP
    seed: int | None = None             # NPUSIM_CHECK_SEED of every kernel (None: a fresh secret one per run)
    limits: Limits = field(default_factory=Limits)
    keep: str | None = None             # (debugging) keep each restored notebook and raw results here


def grade_submission(path: Path, labs: dict[str, Lab], snapshot: Snapshot, isolation: Isolation,
                     options: Options = Options(), data: bytes | None = None) -> Grade:
    """Grade one submission (``data``: its bytes, else read from ``path``); never raises and never writes
    to ``path``."""
    t0 = time.perf_counter()
    grade = Grade(path, learner_name(path, None), None)
    try:
        _grade_into(grade, path, data, labs, snapshot, isolation, options)
    except Exception as e:  # a grader bug must not lose the row
        grade.status = "grader-error"
        grade.reasons.append(f"{type(e).__name__}: {e}")
    grade.seconds = time.perf_counter() - t0
    return grade


def _grade_into(grade: Grade, path: Path, data: bytes | None, labs: dict[str, Lab], snapshot: Snapshot,
                isolation: Isolation, options: Options) -> None:
    by_name = lab_from_name(path, labs)
    if by_name:
        grade.lab, grade.learner = by_name.name, learner_name(path, by_name.name)
        grade.max_points = by_name.max_points
    if data is None:
        try:
            data = path.read_bytes()
        except OSError as e:
            grade.status = "missing-file"
            grade.reasons.append(f"cannot read the file: {e.strerror or e}")
            if by_name:
                grade.checks = empty_checks(by_name, "not graded: the file could not be read")
            return
    nb, problem = parse_notebook(data)
    if nb is None:
        grade.status = "invalid-notebook"
        grade.reasons.append(f"the file is {clip(problem, 400)}")
        if by_name:
            grade.checks = empty_checks(by_name, "not graded: the file is not a readable notebook (broken JSON?)")
        return
    lab = lab_from_ids(nb, labs) or by_name
    if lab is None:
        grade.status = "unknown-lab"
        grade.reasons.append("no lab shares cell ids with it and its file name names none")
        return
    if by_name and by_name is not lab:
        grade.reasons.append(f"the file name names {by_name.name} but the cells are those of {lab.name}")
        grade.flags.append("name mismatch")
    grade.lab, grade.learner, grade.max_points = lab.name, learner_name(path, lab.name), lab.max_points
    ids = set(lab.cell_ids) - lab.check_ids
    grade.sources = {c["id"]: c.get("source", "") for c in nb.cells
                     if c.get("cell_type") == "code" and c.get("id") in ids}
    restored = restore_checks(nb, lab)
    grade.notes.extend(restored.notes)
    grade.reasons.extend(restored.notes)
    grade.flags.extend(restored.flags)
    notebook_timeout = options.notebook_timeout or default_notebook_timeout(options.cell_timeout)
    # the kernel cannot see these folders at all; the audit hook still reports what it aims at them
    protect = {str(snapshot.root): "course:"}
    for package in {snapshot.package_dir, _INSTALLED} - {snapshot.root / "npusim"}:
        protect[str(package)] = f"{package}/"
    seed = options.seed if options.seed is not None else secrets.randbits(32)
    watch = [str(p) for p in (snapshot.package_dir, snapshot.root / "solutions", _INSTALLED)]
    box = Sandbox(isolation, snapshot, seed=seed, limits=options.limits, protect=protect, watch=watch)
    try:
        nb_path = box.grader / f"{lab.name}.ipynb"
        nbformat.write(restored.nb, nb_path)
        run = run_nbval(nb_path, box, cell_timeout=options.cell_timeout, notebook_timeout=notebook_timeout,
                        output_cap=options.output_cap)
        changed, attempts = snapshot.changes(box.lib), box.attempts()
        if options.keep:  # debugging aid: the restored notebook and the raw results (the grader's files only)
            shutil.copytree(box.grader, Path(options.keep) / f"{grade.learner}_{lab.name}", symlinks=True,
                            dirs_exist_ok=True)
    finally:
        box.close()
    checks, status, reasons, run_notes = score(lab, restored.nb, run, options.cell_timeout, notebook_timeout,
                                               options.output_cap)
    grade.checks, grade.status = checks, status
    if status == "forged":
        forged = first_forged(run)
        grade.flags.append(f"forged In [{forged.number + 1}] ({_cell_id(restored.nb, forged.number)}): {forged.forged}")
    grade.reasons[:0] = reasons
    grade.notes.extend(run_notes)
    if changed or attempts:
        mark_tampered(grade, changed, attempts)


def _cell_id(nb, number: int) -> str:
    code = [c for c in nb.cells if c.get("cell_type") == "code"]
    return f"cell {code[number].get('id', '?')}" if number < len(code) else f"code cell {number}"
