"""Submissions: which files, which learner, which lab, and reading a notebook that may be broken."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Any, Iterable

import nbformat

from .labs import Lab


def expand(paths: Iterable[str]) -> list[Path]:
    """Submission paths; a folder gives every ``*.ipynb`` below it (not checkpoints)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(q for q in p.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts)
        else:
            out.append(p)
    return out


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
    the lab (``alice/01_vector_add.ipynb``) takes its folder's name; ``alice.ipynb`` -> ``alice``. Any
    script is kept (``José``, ``李雷``), in Unicode's composed form."""
    stem = path.name[:-len(".ipynb")] if path.name.lower().endswith(".ipynb") else path.stem
    if lab:
        stem = re.sub(re.escape(lab), " ", stem, flags=re.I)
    name = re.sub(r"[\s_.\-]+", " ", stem).strip().replace(" ", "_")
    if not name:
        name = next((p.name for p in path.resolve().parents
                     if p.name and p.name.lower() not in {"labs", "submissions", "submitted", "solutions"}),
                    path.name)
    return unicodedata.normalize("NFC", name)


def parse_notebook(data: bytes) -> tuple[Any, str]:
    """``(notebook, "")``, or ``(None, why)`` when ``data`` is not a readable notebook."""
    try:
        text = data.decode("utf-8")
        json.loads(text)
    except (UnicodeDecodeError, ValueError) as e:
        return None, f"not valid JSON: {e}"
    try:
        nb = nbformat.reads(text, as_version=4)
        if not isinstance(nb.get("cells"), list):
            raise ValueError("it has no list of cells")
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0]
        return None, f"not a notebook: {first[:200]}"
    return nb, ""
