"""Learner notebooks are generated from the worked solutions, so the two cannot drift.

``solutions/*.ipynb`` is the single source. In a code cell, the lines between ``### BEGIN SOLUTION`` and
``### END SOLUTION`` become ``raise NotImplementedError(...)`` at the same indentation; text after
``### BEGIN SOLUTION`` is the hint the learner sees. In a markdown cell, ``<!-- BEGIN SOLUTION -->`` ...
``<!-- END SOLUTION -->`` is removed. Cells tagged ``solution-only`` are dropped. Outputs and execution
counts are cleared; cell ids, tags and other metadata are kept. Files are written as Jupyter writes them
(``nbformat.writes(nb) + "\\n"``), so a staleness check can compare bytes.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

BEGIN = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION:?(?P<hint>.*)$")
END = re.compile(r"^[ \t]*### END SOLUTION\s*$")
MD_REGION = re.compile(r"<!-- BEGIN SOLUTION -->.*?<!-- END SOLUTION -->\n?", re.S)
SOLUTION_ONLY = "solution-only"


class SolutionMarkupError(ValueError):
    """A solution notebook's BEGIN/END markers do not pair up."""


def strip_code(source: str, where: str = "") -> str:
    """Replace each solution region of a code cell by a ``raise NotImplementedError`` with its hint."""
    out: list[str] = []
    region = None
    for line in source.split("\n"):
        m = BEGIN.match(line)
        if m:
            if region is not None:
                raise SolutionMarkupError(f"{where}: nested ### BEGIN SOLUTION")
            region = m
            continue
        if END.match(line):
            if region is None:
                raise SolutionMarkupError(f"{where}: ### END SOLUTION without BEGIN")
            indent = region.group("indent")
            hint = region.group("hint").strip() or "write this part"
            out.append(f"{indent}# YOUR CODE HERE: {hint}")
            out.append(f"{indent}raise NotImplementedError({hint!r})")
            region = None
            continue
        if region is None:
            out.append(line)
    if region is not None:
        raise SolutionMarkupError(f"{where}: ### BEGIN SOLUTION without END")
    return "\n".join(out)


def has_solution(source: str) -> bool:
    return any(BEGIN.match(line) for line in source.split("\n"))


def make_lab(solution: nbformat.NotebookNode, name: str = "") -> nbformat.NotebookNode:
    """The learner version of a solution notebook (a new object; the input is untouched)."""
    nb = copy.deepcopy(solution)
    cells = []
    for i, cell in enumerate(nb.cells):
        if SOLUTION_ONLY in cell.get("metadata", {}).get("tags", []):
            continue
        if cell.cell_type == "code":
            cell.source = strip_code(cell.source, f"{name} cell {i}")
            cell.outputs = []
            cell.execution_count = None
        elif cell.cell_type == "markdown":
            cell.source = MD_REGION.sub("", cell.source)
        cell.get("metadata", {}).pop("execution", None)
        cells.append(cell)
    nb.cells = cells
    return nb


def clean_solution(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A solution without outputs (how solutions are committed)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.get("metadata", {}).pop("execution", None)
    return nb


def dumps(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


@dataclass
class Course:
    """The repository layout: ``solutions/`` in, ``labs/`` out."""

    root: Path

    @property
    def solutions(self) -> Path:
        return self.root / "solutions"

    @property
    def labs(self) -> Path:
        return self.root / "labs"

    def notebooks(self) -> list[Path]:
        return sorted(p for p in self.solutions.glob("*.ipynb"))

    def expected(self) -> dict[Path, str]:
        """labs/ file -> its expected text."""
        out = {}
        for sol in self.notebooks():
            nb = nbformat.read(sol, as_version=4)
            out[self.labs / sol.name] = dumps(make_lab(nb, sol.name))
        return out

    def make(self) -> list[Path]:
        """Write labs/ from solutions/; returns the files that changed."""
        self.labs.mkdir(exist_ok=True)
        changed = []
        for path, text in self.expected().items():
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
                changed.append(path)
        return changed

    def problems(self) -> list[str]:
        """Why labs/ is not current (empty when it is): stale or missing labs, extra labs, solutions
        committed with outputs, solution regions that do not pair up."""
        found = []
        try:
            expected = self.expected()
        except SolutionMarkupError as e:
            return [str(e)]
        for path, text in expected.items():
            if not path.exists():
                found.append(f"{path.relative_to(self.root)} is missing (run `npusim labs make`)")
            elif path.read_text(encoding="utf-8") != text:
                found.append(f"{path.relative_to(self.root)} is stale (run `npusim labs make`)")
        for extra in sorted(set(self.labs.glob("*.ipynb")) - set(expected)):
            found.append(f"{extra.relative_to(self.root)} has no solution in solutions/")
        for sol in self.notebooks():
            text = sol.read_text(encoding="utf-8")
            if dumps(clean_solution(nbformat.reads(text, as_version=4))) != text:
                found.append(f"{sol.relative_to(self.root)} has outputs or execution counts: "
                             f"clear them (`npusim labs make --clean-solutions`)")
        return found

    def clean_solutions(self) -> list[Path]:
        changed = []
        for sol in self.notebooks():
            text = sol.read_text(encoding="utf-8")
            new = dumps(clean_solution(nbformat.reads(text, as_version=4)))
            if new != text:
                sol.write_text(new, encoding="utf-8")
                changed.append(sol)
        return changed


def find_root(start: Path | None = None) -> Path:
    """The course root: the nearest folder upwards holding ``solutions/`` and ``pyproject.toml``."""
    here = (start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if (p / "solutions").is_dir() and (p / "pyproject.toml").exists():
            return p
    raise FileNotFoundError("no course root found: run this inside the repository (a folder with "
                            "solutions/ and pyproject.toml), or pass --root")
