"""Learner notebooks are generated from the worked solutions, so the two cannot drift.

``solutions/*.ipynb`` is the single source. In a code cell, the lines between ``### BEGIN SOLUTION`` and
``### END SOLUTION`` become ``raise NotImplementedError(...)`` at the same indentation; text after
``### BEGIN SOLUTION`` is the hint the learner sees. In a markdown cell, ``<!-- BEGIN SOLUTION -->`` ...
``<!-- END SOLUTION -->`` is removed. Cells tagged ``solution-only`` are dropped. Outputs and execution
counts are cleared; cell ids, tags and other metadata are kept. Files are written as Jupyter writes them
(``nbformat.writes(nb) + "\\n"``), so a staleness check can compare bytes.

A lab in ``labs/`` is the learner's once they work in it. Each generated lab records a fingerprint of its
content (``metadata.npusim``: cells, ids, sources and metadata, outputs excluded), so that a lab falls in one
of these states (:meth:`Course.status`):

- ``current``: byte for byte what ``labs make`` writes;
- ``ran``: the same content with outputs, execution counts or the cell metadata Jupyter adds (``execution``,
  ``collapsed``, ``scrolled``...): a learner ran it; nothing is stale;
- ``stale``: untouched since it was generated (its content still has its fingerprint), but ``solutions/``
  has changed since: ``labs make`` regenerates it;
- ``edited``: its content is not what was generated (a learner's work, or a lab without a fingerprint that
  differs): ``labs make`` refuses to overwrite it unless forced, and then keeps a copy in ``labs/.backup/``;
- ``missing``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import time
from dataclasses import dataclass, field
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


#: Cell metadata Jupyter adds or changes when a notebook is run or viewed: not part of a lab's content.
JUPYTER_CELL_KEYS = ("execution", "collapsed", "scrolled", "jupyter", "trusted", "editable", "deletable")
#: Where a generated lab keeps its fingerprint: ``metadata.npusim.fingerprint``.
STAMP = "npusim"


def content(nb: nbformat.NotebookNode) -> list:
    """What a lab says, without what running it adds: each cell's type, id, source and metadata (minus
    :data:`JUPYTER_CELL_KEYS`); no outputs, execution counts or notebook metadata."""
    return [(c.cell_type, c.get("id", ""), c.source,
             {k: v for k, v in c.get("metadata", {}).items() if k not in JUPYTER_CELL_KEYS}) for c in nb.cells]


def fingerprint(nb: nbformat.NotebookNode) -> str:
    """sha256 of :func:`content`."""
    return hashlib.sha256(json.dumps(content(nb), sort_keys=True, default=str).encode()).hexdigest()


def stamp(nb: nbformat.NotebookNode, source: str) -> nbformat.NotebookNode:
    """Record in ``nb``'s metadata the solution it was generated from and its fingerprint."""
    nb.metadata[STAMP] = {"generated_from": source, "fingerprint": fingerprint(nb),
                          "note": "generated by `npusim labs make`; edit freely: it will not overwrite your edits"}
    return nb


@dataclass
class MakeReport:
    """What :meth:`Course.make` did: files written (new, stale or only run before), files refused (edited,
    not forced) and backups made (forced)."""

    written: list[Path] = field(default_factory=list)
    refused: list[Path] = field(default_factory=list)
    backups: list[Path] = field(default_factory=list)


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

    @property
    def backup_dir(self) -> Path:
        return self.labs / ".backup"

    def expected(self) -> dict[Path, str]:
        """labs/ file -> its expected text."""
        out = {}
        for sol in self.notebooks():
            nb = nbformat.read(sol, as_version=4)
            lab = stamp(make_lab(nb, sol.name), f"solutions/{sol.name}")
            out[self.labs / sol.name] = dumps(lab)
        return out

    def status(self, path: Path, expected: str) -> str:
        """``current``, ``ran``, ``stale``, ``edited`` or ``missing`` (see the module docstring)."""
        if not path.exists():
            return "missing"
        text = path.read_text(encoding="utf-8")
        if text == expected:
            return "current"
        try:
            nb = nbformat.reads(text, as_version=4)
        except Exception:  # noqa: BLE001 - not a notebook any more: someone's edit, never overwritten
            return "edited"
        mine = content(nb)
        if mine == content(nbformat.reads(expected, as_version=4)):
            return "ran"
        recorded = nb.metadata.get(STAMP, {}).get("fingerprint")
        return "stale" if recorded == fingerprint(nb) else "edited"

    def make(self, force: bool = False) -> MakeReport:
        """Write labs/ from solutions/: missing, stale and merely-run labs are (re)written; an edited lab is
        refused, unless ``force``, which first copies it to ``labs/.backup/NAME-<time>.ipynb``."""
        self.labs.mkdir(exist_ok=True)
        report = MakeReport()
        for path, text in self.expected().items():
            state = self.status(path, text)
            if state == "current":
                continue
            if state == "edited":
                if not force:
                    report.refused.append(path)
                    continue
                self.backup_dir.mkdir(exist_ok=True)
                backup = self.backup_dir / f"{path.stem}-{time.strftime('%Y%m%d-%H%M%S')}{path.suffix}"
                backup.write_bytes(path.read_bytes())
                report.backups.append(backup)
            path.write_text(text, encoding="utf-8")
            report.written.append(path)
        return report

    def problems(self, strict: bool = False) -> list[str]:
        """Why labs/ is not what solutions/ generates (empty when it is): missing, stale or edited labs,
        extra labs, solution regions that do not pair up. ``strict`` (CI): labs must also be byte for byte
        as generated (no outputs) and solutions committed without outputs. A lab that was only run is
        fine unless ``strict``."""
        found = []
        try:
            expected = self.expected()
        except SolutionMarkupError as e:
            return [str(e)]
        for path, text in expected.items():
            rel = path.relative_to(self.root)
            state = self.status(path, text)
            if state == "missing":
                found.append(f"{rel} is missing (run `npusim labs make`)")
            elif state == "stale":
                found.append(f"{rel} is stale: solutions/{path.name} changed since it was generated "
                             f"(run `npusim labs make`)")
            elif state == "edited":
                found.append(f"{rel} differs from what solutions/{path.name} generates: it was edited "
                             f"(`npusim labs make` keeps it; `npusim labs make --force` replaces it and keeps "
                             f"a copy in {self.backup_dir.relative_to(self.root)}/)")
            elif state == "ran" and strict:
                found.append(f"{rel} differs from what `npusim labs make` writes only by outputs or metadata: "
                             f"commit labs as generated (run `npusim labs make`)")
        for extra in sorted(set(self.labs.glob("*.ipynb")) - set(expected)):
            found.append(f"{extra.relative_to(self.root)} has no solution in solutions/")
        if strict:
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
    raise FileNotFoundError(f"no course here ({here}): this works in a copy of the course repository, the "
                            "folder holding solutions/, labs/ and pyproject.toml (or below it); cd there, or "
                            "pass --root PATH")
