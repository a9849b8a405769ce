"""What ``npusim start`` does when JupyterLab saves a notebook: the course's notebooks keep no trace of a run.

``solutions/`` is the source every lab is generated from and ``labs/`` is generated from it, both committed
without outputs (``npusim labs check --strict``). A learner who opens a lab or a solution and runs it would
otherwise have JupyterLab autosave its outputs, execution counts and kernel metadata into the repository,
and ``labs check --strict`` would fail after an ordinary session. :func:`keep_solutions_clean` is the
server's ``ContentsManager.pre_save_hook``: for a notebook directly under ``solutions/`` or ``labs/`` it
removes what running adds (outputs, execution counts, the cell metadata Jupyter writes, notebook metadata
changes), so a run saves the file as it was; an edit of a cell's source (the learner's answers) is still
saved. The outputs stay on screen; Run All draws them again after a reload (a saved explorer would not come
back anyway: its widgets need the kernel). Other notebooks (a learner's own) are saved as they are.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import nbformat

from .notebooks import JUPYTER_CELL_KEYS

SOLUTIONS = "solutions"
#: The folders whose notebooks are saved without what a run adds.
COURSE_FOLDERS = (SOLUTIONS, "labs")


def is_solution(path: str) -> bool:
    """Whether an API path (relative to the server's root, ``/``-separated) is a notebook directly under
    ``solutions/`` or ``labs/`` (:data:`COURSE_FOLDERS`)."""
    parts = PurePosixPath(path.strip("/")).parts
    return len(parts) == 2 and parts[0] in COURSE_FOLDERS and parts[1].endswith(".ipynb")


def strip_run(content: dict, on_disk: dict | None) -> dict:
    """``content`` (a notebook as JSON) without what a run adds; the metadata of ``on_disk`` (the file's
    version before this save, if any) is kept: notebook metadata, and each cell's Jupyter keys by cell id."""
    before = {c.get("id"): c.get("metadata", {}) for c in (on_disk or {}).get("cells", [])}
    for cell in content.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        meta = cell.setdefault("metadata", {})
        old = before.get(cell.get("id"), {})
        for key in JUPYTER_CELL_KEYS:
            if key in old:
                meta[key] = old[key]
            else:
                meta.pop(key, None)
    if on_disk is not None:
        content["metadata"] = on_disk.get("metadata", {})
    return content


def keep_solutions_clean(model: dict, path: str, contents_manager: Any = None, **_: Any) -> None:
    """JupyterLab's pre-save hook (``--ContentsManager.pre_save_hook``): see the module docstring."""
    if model.get("type") != "notebook" or not is_solution(path) or not isinstance(model.get("content"), dict):
        return
    on_disk = None
    if contents_manager is not None:
        try:
            on_disk = nbformat.read(contents_manager._get_os_path(path), as_version=4)
        except Exception:  # noqa: BLE001 - a new or unreadable file: nothing to keep, strip only
            on_disk = None
    strip_run(model["content"], on_disk)
