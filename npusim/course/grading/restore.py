"""Putting the canonical check cells back into a learner's notebook, where the lab has them."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from .labs import CHECK_TAG, Lab

# a learner cell that redefines the checks or prints a check's confirmation itself
_FORGERY = re.compile(r"PASSED\s|^\s*(?:check|checks)\s*(?:\.\s*\w+\s*)?=(?!=)|\bas\s+check\b", re.M)


@dataclass
class Restored:
    """The notebook to run (a new object), what the learner is told, and the gradebook's flags."""

    nb: Any
    notes: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)

    def __iter__(self):  # ``nb, notes = restore_checks(...)`` for callers that want just those two
        return iter((self.nb, self.notes))


def _clear_outputs(nb) -> None:
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            cell.outputs, cell.execution_count = [], None


def _forgeries(nb, lab: Lab) -> list[str]:
    """Ids of learner cells posing as checks: tagged ``check`` or named ``check-...`` without being one
    of the lab's checks, or (new or edited) code that prints a ``PASSED`` line or rebinds ``check``."""
    canonical = {c.get("source", "") for c in lab.cells}
    found = []
    for i, cell in enumerate(nb.cells):
        cid = cell.get("id")
        if cid in lab.check_ids or cell.get("cell_type") != "code":
            continue
        posing = bool(cid) and (CHECK_TAG in cell.get("metadata", {}).get("tags", []) or cid.startswith("check-"))
        source = cell.get("source", "")
        if posing or (source not in canonical and _FORGERY.search(source)):
            found.append(cid or f"#{i}")
    return found


def restore_checks(nb, lab: Lab) -> Restored:
    """A copy of ``nb`` whose check cells are the canonical ones, each after its exercise, with every output
    cleared.

    A check cell found by id is replaced wholesale (source, type, tags) where it sits, unless it sits above
    its exercise (the nearest code cell before it in the lab): then it moves to just after the exercise. A
    missing check is inserted after the nearest preceding cell (in the lab's order) that the notebook still
    has (and never above its exercise), else before the nearest following one, else at the end."""
    out = copy.deepcopy(nb)
    res = Restored(out)
    order = lab.cell_ids
    lab_code = {c.get("id") for c in lab.cells if c.get("cell_type") == "code"} - lab.check_ids
    for cid in _forgeries(out, lab):
        res.flags.append(f"forged {cid}")
        res.notes.append(f"the cell `{cid}` looks like a check or prints a check's PASSED line; it ran as an "
                         f"ordinary cell (a PASSED line counts only from the lab's own check cells)")
    if not any(c.get("id") for c in out.cells):
        res.notes.append("the notebook has no cell ids (saved by an old Jupyter?), so its check cells could not "
                         "be matched: the lab's checks were added at its end")
        res.flags.append("no cell ids")
        out.cells.extend(copy.deepcopy(spec.cell) for spec in lab.checks)
        _clear_outputs(out)
        return res

    def where(cell_id: str | None) -> int | None:
        return next((i for i, c in enumerate(out.cells) if c.get("id") == cell_id), None)

    for spec in lab.checks:
        canonical = copy.deepcopy(spec.cell)
        k = order.index(spec.id)
        exercise = next((cid for cid in reversed(order[:k]) if cid in lab_code and where(cid) is not None), None)
        hits = [i for i, c in enumerate(out.cells) if c.get("id") == spec.id]
        if any(out.cells[i].get("cell_type") != "code" or out.cells[i].get("source", "") != spec.cell.source
               or out.cells[i].get("metadata", {}).get("tags", []) != spec.cell.metadata.get("tags", [])
               for i in hits):
            res.flags.append(f"edited {spec.id}")
            res.notes.append(f"the check cell `{spec.id}` had been changed; it was graded as the lab has it")
        ex_at = where(exercise)
        below = [i for i in hits if ex_at is None or i > ex_at]
        for i in below:
            out.cells[i] = copy.deepcopy(canonical)
        for i in sorted(set(hits) - set(below), reverse=True):
            del out.cells[i]
        if below:
            continue
        if hits:
            res.flags.append(f"moved {spec.id}")
            res.notes.append(f"the check cell `{spec.id}` sat above its exercise (cell `{exercise}`); it was moved "
                             f"back to run after it")
        else:
            res.flags.append(f"deleted {spec.id}")
            res.notes.append(f"the check cell `{spec.id}` was missing; it was put back where the lab has it")
        have = {c.get("id"): i for i, c in enumerate(out.cells) if c.get("id")}
        before = next((have[cid] for cid in reversed(order[:k]) if cid in have), None)
        after = next((have[cid] for cid in order[k + 1:] if cid in have), None)
        position = before + 1 if before is not None else after if after is not None else len(out.cells)
        ex_at = where(exercise)
        if ex_at is not None:
            position = max(position, ex_at + 1)
        out.cells.insert(position, canonical)
    _clear_outputs(out)
    return res
