"""The course's labs as the grader needs them: each lab's canonical cells and its check cells."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import nbformat

from ..notebooks import find_root, make_lab

CHECK_TAG = "check"


@dataclass(frozen=True)
class CheckSpec:
    """One canonical check cell of a lab."""

    id: str
    points: float
    cell: Any                           # the canonical cell (a NotebookNode), as the learner's lab has it


@dataclass
class Lab:
    """A lab: its canonical cells (the learner version) and its checks."""

    name: str                           # the notebook's stem, e.g. "01_vector_add"
    cells: list                         # the learner version's cells (make_lab of the solution)
    checks: list[CheckSpec]

    @property
    def cell_ids(self) -> list[str]:
        return [c.get("id", "") for c in self.cells]

    @property
    def check_ids(self) -> set[str]:
        return {c.id for c in self.checks}

    @property
    def max_points(self) -> float:
        return sum(c.points for c in self.checks)


def labs_from_solutions(solutions: Mapping[str, bytes], problems: list[str] | None = None) -> dict[str, Lab]:
    """Every lab of ``{file name: notebook bytes}`` with its check cells (code cells tagged ``check`` with
    a cell id). A solution that cannot be read is skipped and described in ``problems`` (or raises when
    that is None)."""
    labs: dict[str, Lab] = {}
    for name in sorted(solutions):
        stem = name[:-len(".ipynb")]
        try:
            solution = nbformat.reads(solutions[name].decode("utf-8"), as_version=4)
            learner = make_lab(solution, name)   # check cells exactly as the learner received them
        except Exception as e:
            if problems is None:
                raise
            problems.append(f"{name} skipped: {type(e).__name__}: {e}")
            continue
        points = {c.get("id"): c.get("metadata", {}).get("points", 1) for c in solution.cells}
        checks = [CheckSpec(c["id"], float(points.get(c["id"], 1)), c) for c in learner.cells
                  if c.cell_type == "code" and CHECK_TAG in c.get("metadata", {}).get("tags", []) and c.get("id")]
        labs[stem] = Lab(stem, list(learner.cells), checks)
    return labs


def load_labs(root: Path, problems: list[str] | None = None) -> dict[str, Lab]:
    """Every lab of ``root/solutions`` (see :func:`labs_from_solutions`)."""
    return labs_from_solutions({p.name: p.read_bytes() for p in sorted((root / "solutions").glob("*.ipynb"))},
                               problems)


def default_root() -> Path:
    """The course root: found from the current folder, else the checkout this package is installed from."""
    try:
        return find_root()
    except FileNotFoundError:
        here = Path(__file__).resolve().parents[3]
        if (here / "solutions").is_dir():
            return here
        raise
