"""Mutation testing of the checks: run a check on the solution and on wrong variants of it.

A corpus module (``labNN.py``) names its lab, the solution cells each check needs (set-up and exercise
cells, by cell id), and a list of :class:`Wrong` variants. A variant edits the solution's own text
(``edits``: ``(old, new)`` replacements, each of which must apply exactly once) or replaces whole cells,
so the corpus follows the solution and fails loudly when the solution changes under it. The harness runs
the cells in a fresh namespace (magics stripped), then the check cell, in strict mode (failing checks
raise ``CheckFailed``).
"""

from __future__ import annotations

import contextlib
import io
import linecache
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import nbformat

from npusim.course.executor import strip_magics

ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Wrong:
    """A plausible wrong solution of one check, and what its failure message must say."""

    name: str
    check: str                                   # the check cell's id, e.g. "check-vector-add"
    expect: tuple[str, ...] | str                # keyword(s) the message must contain (case-insensitive)
    edits: tuple[tuple[str, str], ...] = ()      # (old, new) replacements in the check's cells
    cells: dict = field(default_factory=dict)    # cell id -> replacement source
    why: str = ""                                # the mistake, in words

    @property
    def keywords(self) -> tuple[str, ...]:
        return (self.expect,) if isinstance(self.expect, str) else tuple(self.expect)


@lru_cache(maxsize=None)
def notebook(lab: str) -> dict[str, str]:
    """cell id -> source of ``solutions/<lab>.ipynb``, in order."""
    nb = nbformat.read(ROOT / "solutions" / f"{lab}.ipynb", as_version=4)
    return {c.id: c.source for c in nb.cells if c.cell_type == "code"}


def sources(lab: str, cell_ids: list[str], wrong: Wrong | None = None) -> list[tuple[str, str]]:
    cells = notebook(lab)
    missing = [c for c in cell_ids if c not in cells]
    if missing:
        raise LookupError(f"{lab}: cells {missing} are not in the solution (renamed?)")
    out = [(cid, wrong.cells.get(cid, cells[cid]) if wrong else cells[cid]) for cid in cell_ids]
    if wrong:
        unknown = set(wrong.cells) - set(cell_ids)
        if unknown:
            raise LookupError(f"{wrong.name}: replaces cells {unknown} that the check does not run")
        for old, new in wrong.edits:
            hits = sum(src.count(old) for _, src in out)
            if hits != 1:
                raise LookupError(f"{wrong.name}: the edit {old!r} matches {hits} times in the solution cells "
                                  f"(it must match once: has the solution changed?)")
            out = [(cid, src.replace(old, new)) for cid, src in out]
    return out


def _run_cell(lab: str, cid: str, src: str, ns: dict) -> None:
    # a file name outside the package, with its source in linecache: messages name it as a learner's cell
    name = f"/notebook/{lab}/{cid}.py"
    src = strip_magics(src)
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    exec(compile(src, name, "exec"), ns)


def run_check(lab: str, cell_ids: list[str], check_cell: str, wrong: Wrong | None = None,
              extra: tuple[str, str] | None = None) -> str:
    """Run the cells, then ``extra`` (a cell id and source of the test's own, e.g. a shortcut), then the
    check cell; returns what the check printed. Raises what the check raised."""
    ns: dict = {"__name__": "__main__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for cid, src in sources(lab, cell_ids, wrong) + ([extra] if extra else []):
            _run_cell(lab, cid, src, ns)
        _run_cell(lab, check_cell, notebook(lab)[check_cell], ns)
    return out.getvalue()
