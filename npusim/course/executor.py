"""Run a notebook's code cells in this process, in one namespace, without a kernel.

What a test or a benchmark needs when it wants a lab's objects (its explorer, its kernels) rather than its
outputs: each cell's source with IPython magics (``%...``, ``!...``) removed is ``exec``-ed in a namespace
whose ``__name__`` is ``"__main__"`` (as in a kernel, so ``check.finished`` sees notebook-defined code as
the learner's), with ``display`` stubbed and stdout and stderr captured. Cells tagged ``check`` are skipped by default:
a check runs hidden inputs, which a benchmark does not need.

::

    nb = run_cells("solutions/01_vector_add.ipynb", until=is_explorer_cell)
    explorer = nb.explorers()["explorer"]

The test harness of the wrong-solution corpus (``tests/labs/labcorpus/harness.py``) uses
:func:`strip_magics` and :func:`exec_source` for its own cell selection.
"""

from __future__ import annotations

import contextlib
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import nbformat

#: Cell tags skipped by default.
SKIP_TAGS = ("check",)


def strip_magics(source: str) -> str:
    """The source without IPython magic and shell lines (``%matplotlib inline``, ``!pip ...``)."""
    return "\n".join(line for line in source.split("\n") if not line.lstrip().startswith(("%", "!")))


def exec_source(source: str, namespace: dict, name: str) -> None:
    """Execute one cell's source (magics stripped) in ``namespace``; ``name`` appears in tracebacks."""
    exec(compile(strip_magics(source), f"<{name}>", "exec"), namespace)  # noqa: S102 - running a lab is the job


def new_namespace() -> dict:
    """A namespace as a kernel's: ``__name__`` is ``"__main__"``; ``display`` shows nothing."""
    return {"__name__": "__main__", "display": lambda *args, **kwargs: None}


def is_explorer_cell(cell: nbformat.NotebookNode) -> bool:
    """A cell that builds an explorer (``views.Explorer(...)`` or ``nm.ModelExplorer(...)``)."""
    return "Explorer(" in cell.source


@dataclass
class ExecutedNotebook:
    """The outcome of :func:`run_cells`: the namespace, the cells run (by id) and what they printed
    (stdout and stderr together)."""

    path: Path
    namespace: dict
    ran: list[str] = field(default_factory=list)
    stdout: str = ""

    def explorers(self) -> dict[str, Any]:
        """Every explorer object in the namespace, by variable name."""
        from ..model.explorer import ModelExplorer
        from ..views.explorer import Explorer

        return {k: v for k, v in self.namespace.items() if isinstance(v, (Explorer, ModelExplorer))}


def code_cells(path: str | Path) -> list[nbformat.NotebookNode]:
    """The code cells of a notebook, in order."""
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def run_cells(path: str | Path, *, until: Callable[[nbformat.NotebookNode], bool] | None = None,
              skip_tags: Iterable[str] = SKIP_TAGS, namespace: dict | None = None,
              cwd: str | Path | None = None) -> ExecutedNotebook:
    """Execute the notebook's code cells in order, skipping cells with a tag in ``skip_tags``, up to and
    including the last cell for which ``until(cell)`` is true (every cell if ``until`` is None). The working
    folder is the notebook's (or ``cwd``) while the cells run, as in a kernel. An exception in a cell
    propagates, its traceback naming the notebook and the cell id."""
    path = Path(path)
    cells = code_cells(path)
    if until is not None:
        last = max((i for i, c in enumerate(cells) if until(c)), default=None)
        if last is None:
            raise LookupError(f"{path.name}: no code cell matches {getattr(until, '__name__', until)}")
        cells = cells[:last + 1]
    skip = set(skip_tags)
    ns = new_namespace() if namespace is None else namespace
    out = ExecutedNotebook(path, ns)
    buf = io.StringIO()
    old = os.getcwd()
    try:
        os.chdir(cwd or path.parent)
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            for cell in cells:
                if skip & set(cell.get("metadata", {}).get("tags", [])):
                    continue
                exec_source(cell.source, ns, f"{path.name} {cell.get('id', '')}")
                out.ran.append(cell.get("id", ""))
    finally:
        os.chdir(old)
        out.stdout = buf.getvalue()
    return out
