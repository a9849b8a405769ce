"""What an instructor gets: the CSV gradebook (one row per submission), the per-learner summary (CSV and
Markdown), one Markdown feedback file per learner, and the run record (seed, isolation, timings)."""

from __future__ import annotations

import csv
import json
import re
import unicodedata
from pathlib import Path
from typing import Any

from .labs import Lab
from .scoring import Grade

# a spreadsheet evaluates a cell starting with one of these (OWASP "CSV injection")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")
_UNSAFE_IN_NAME = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|]+')
_WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)), *(f"LPT{i}" for i in range(10))}


def fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def csv_cell(value: Any) -> str:
    """``value`` as text a spreadsheet shows rather than evaluates (a leading ``'`` before ``=+-@``...)."""
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def _write_csv(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow([csv_cell(h) for h in header])
        w.writerows([[csv_cell(v) for v in row] for row in rows])


def check_columns(grades: list[Grade], labs: dict[str, Lab]) -> list[tuple[str, str, str]]:
    """``(lab, check id, column name)`` for every check of the labs graded, in lab then cell order; a
    check id used by two labs gets the lab as a prefix."""
    seen = [name for name in labs if any(g.lab == name for g in grades)]
    pairs = [(name, spec.id) for name in seen for spec in labs[name].checks]
    ids = [cid for _, cid in pairs]
    return [(lab, cid, cid if ids.count(cid) == 1 else f"{lab}/{cid}") for lab, cid in pairs]


def write_gradebook(grades: list[Grade], labs: dict[str, Lab], out: Path) -> None:
    """One row per submission: learner, lab, file, one column per check, total, max, status, reason,
    flags, seconds."""
    columns = check_columns(grades, labs)
    rows = []
    for g in grades:
        points = {(g.lab, c.id): fmt(c.points) for c in g.checks}
        rows.append([g.learner, g.lab or "", str(g.path), *[points.get((lab, cid), "") for lab, cid, _ in columns],
                     fmt(g.total), fmt(g.max_points), g.status, g.reason, "; ".join(dict.fromkeys(g.flags)),
                     f"{g.seconds:.1f}"])
    _write_csv(out, ["learner", "lab", "file", *[c for _, _, c in columns], "total", "max", "status", "reason",
                     "flags", "seconds"], rows)


# --- per learner, across labs -------------------------------------------------------------------------

def summary_rows(grades: list[Grade], labs: dict[str, Lab]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the per-learner summary: the best total per lab graded (blank: not submitted),
    the total over those labs, its maximum (over the labs this learner handed in), and what needs a look (statuses other than ``ok``, flags)."""
    lab_names = [name for name in labs if any(g.lab == name for g in grades)]
    by_learner: dict[str, list[Grade]] = {}
    for g in grades:
        by_learner.setdefault(g.learner, []).append(g)
    rows = []
    for learner in sorted(by_learner, key=str.casefold):
        gs = by_learner[learner]
        best: dict[str, Grade] = {}
        review = []
        for g in gs:
            if g.lab in lab_names and (g.lab not in best or g.total > best[g.lab].total):
                best[g.lab] = g
            if g.status != "ok":
                review.append(f"{g.lab or g.path.name}: {g.status}")
            review += [f"{g.lab or g.path.name}: {flag}" for flag in dict.fromkeys(g.flags)]
        review += [f"{name}: {n} files" for name in lab_names
                   if (n := sum(g.lab == name for g in gs)) > 1]
        total = sum(g.total for g in best.values())
        max_total = sum(labs[name].max_points for name in best)      # the labs this learner handed in
        rows.append([learner, *[fmt(best[n].total) if n in best else "" for n in lab_names], fmt(total),
                     fmt(max_total), str(len(best)), "; ".join(review)])
    return ["learner", *lab_names, "total", "max", "labs", "review"], rows


def _md(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`").replace("\n", " ")


def write_summary(grades: list[Grade], labs: dict[str, Lab], folder: Path) -> tuple[Path, Path]:
    """``summary.csv`` and ``summary.md`` in ``folder``."""
    header, rows = summary_rows(grades, labs)
    csv_path, md_path = folder / "summary.csv", folder / "summary.md"
    _write_csv(csv_path, header, rows)
    lines = ["# Grading summary", "",
             f"{len(rows)} learner(s), {len(grades)} submission(s). Points per lab are each learner's best "
             f"submission; `review` lists statuses other than `ok` and the grader's flags.", "",
             "| " + " | ".join(_md(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md(v) for v in row) + " |" for row in rows]
    md_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return csv_path, md_path


# --- feedback for learners ------------------------------------------------------------------------------

def _fence(text: str) -> str:
    """``text`` in a fenced block whose fence no line of it can close."""
    longest = max((len(m) for m in re.findall(r"`{3,}|~{3,}", text)), default=0)
    fence = "~" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def feedback_markdown(learner: str, grades: list[Grade]) -> str:
    """One learner's feedback: per lab, the points per check and each failed check's message (never the
    grading seed, the flags or the instructor's reasons beyond what the learner is told)."""
    lines = [f"# Feedback for {learner}", ""]
    for g in grades:
        title = g.lab or "an unknown lab"
        unit = "point" if g.max_points == 1 else "points"
        lines += [f"## {title}: {fmt(g.total)} of {fmt(g.max_points)} {unit}", "",
                  f"File: `{g.path.name}`", ""]
        if g.lab is None or not g.checks:
            lines += [f"This notebook could not be graded: {g.reason}.", ""]
            continue
        lines += ["| Check | Points | Result |", "|---|---|---|"]
        for c in g.checks:
            ok = c.points >= c.max_points
            detail = c.message.replace("|", "\\|") if ok else "not passed (below)"
            lines.append(f"| `{c.id}` | {fmt(c.points)} / {fmt(c.max_points)} | {detail} |")
        lines.append("")
        if g.notes:
            lines += ["What the grader noticed:", ""] + [f"- {n}." for n in dict.fromkeys(g.notes)] + [""]
        for c in g.checks:
            if c.points < c.max_points:
                lines += [f"### `{c.id}`: not passed", "", _fence(c.message), ""]
    return "\n".join(lines).rstrip() + "\n"


def safe_filename(name: str, limit: int = 120) -> str:
    """A file name that keeps the learner's name in any script (``José``, ``李雷``): composed Unicode,
    without path separators, control or reserved characters, at most ``limit`` UTF-8 bytes."""
    name = _UNSAFE_IN_NAME.sub("_", unicodedata.normalize("NFC", name)).strip(" ._")
    while len(name.encode("utf-8")) > limit:
        name = name[:-1]
    if name.split(".")[0].upper() in _WINDOWS_RESERVED:
        name = f"_{name}"
    return name or "learner"


def write_feedback(grades: list[Grade], folder: Path) -> list[Path]:
    """One Markdown file per learner in ``folder`` (``<learner>.md``; ``-2``... when two names would give
    the same file on a case-insensitive file system)."""
    folder.mkdir(parents=True, exist_ok=True)
    by_learner: dict[str, list[Grade]] = {}
    for g in grades:
        by_learner.setdefault(g.learner, []).append(g)
    written, used = [], set()
    for learner, gs in by_learner.items():
        base = safe_filename(learner)
        name, k = base, 1
        while name.casefold() in used:
            k += 1
            name = f"{base}-{k}"
        used.add(name.casefold())
        path = folder / f"{name}.md"
        path.write_text(feedback_markdown(learner, gs), encoding="utf-8")
        written.append(path)
    return written


def write_run_record(path: Path, record: dict) -> Path:
    """The run record (``run.json``): the seed that reproduces the marks, the isolation used, timings."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
