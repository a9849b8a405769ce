"""Isolation per submission on the real labs: tampering submissions graded in one call between honest ones
cannot change anyone else's marks, are flagged ``tampered``, leave the course intact and leave no process
behind, as root and in copy isolation; the seed and strict mode reach every kernel; a loop that ignores
interrupts is stopped. (The hostile corpus, Dask over TLS and concurrent graders: test_hostile.py.)"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import tempfile
from pathlib import Path

import nbformat
import pytest

from fabricate import COPY, PEAK, course_copy, index, lab, ran, replace, solution, solve, tamperer, write
from npusim.cli import main as cli

pytestmark = [pytest.mark.grading, pytest.mark.slow]
ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0

# learner -> (lab, total, status); in grading order
CLASS = {
    "alice": ("01_vector_add", 3, "ok"),          # correct
    "mallory": ("00_tour", 0, "tampered"),        # deletes checks and a solution
    "oscar": ("00_tour", 0, "tampered"),          # plants a check module passing lab 01
    "trudy": ("00_tour", 0, "tampered"),          # rewrites the grader's pytest plugin
    "carol": ("01_vector_add", 0, "ok"),          # unattempted: the planted checks must not pass it
    "dave": ("01_vector_add", 3, "ok"),           # correct, graded after every tamperer
    "sam": ("98_seed", 1, "ok"),                  # the seed lab
}
ATTACKS = {"mallory": "delete-checks", "oscar": "fake-check", "trudy": "rewrite-plugin"}


def _tree_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(p.relative_to(folder).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def _left_behind(tmp: Path) -> list[int]:
    """Processes whose environment names a sandbox of this test's temporary folder (``HOME=...``)."""
    marker = f"{tmp}{os.sep}npusim-grade-"
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if marker.encode() in (entry / "environ").read_bytes() and int(entry.name) != os.getpid():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    """A course copy, the class's submissions (in grading order), and a private temporary
    folder for the grader's sandboxes (so that leftovers can be counted)."""
    base = tmp_path_factory.mktemp("isolation")
    course = course_copy(base / "course")
    subs = base / "submissions"
    subs.mkdir()
    notebooks = {"alice": ran(solution("01_vector_add")), "carol": lab("01_vector_add"),
                 "dave": solution("01_vector_add"),
                 "sam": nbformat.read(course / "solutions" / "98_seed.ipynb", as_version=4)}
    for learner, attack in ATTACKS.items():
        notebooks[learner] = tamperer(attack, course)
    paths = [write(notebooks[name], subs / f"{name}_{CLASS[name][0]}.ipynb") for name in CLASS]
    sandboxes = base / "tmp"
    sandboxes.mkdir()
    return {"course": course, "paths": paths, "base": base, "tmp": sandboxes, "hash": _tree_hash(course)}


def _grade(setting, name: str, *extra: str) -> dict:
    out = setting["base"] / name
    buf, err = io.StringIO(), io.StringIO()
    old_tmp, tempfile.tempdir = tempfile.tempdir, str(setting["tmp"])
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
            code = cli(["grade", *map(str, setting["paths"]), "--out-dir", str(out),
                        "--root", str(setting["course"]), "--timeout", "60", *extra])
    finally:
        tempfile.tempdir = old_tmp
    print(buf.getvalue(), err.getvalue())
    rows = {r["learner"]: r for r in csv.DictReader((out / "gradebook.csv").open(encoding="utf-8"))}
    return {"code": code, "rows": rows, "out": out, "stdout": buf.getvalue(), "stderr": err.getvalue(),
            "run": json.loads((out / "run.json").read_text(encoding="utf-8"))}


def _assert_class(result, setting, expected=CLASS):
    assert result["code"] == 0
    rows = result["rows"]
    assert list(rows) == list(expected), "one row per submission, in order"
    for learner, (lab_name, total, status) in expected.items():
        row = rows[learner]
        assert (row["lab"], int(row["total"]), row["status"]) == (lab_name, total, status), (learner, row)
    assert _tree_hash(setting["course"]) == setting["hash"], "the course folder changed"
    assert _left_behind(setting["tmp"]) == [], "a process of a submission outlived the grading"
    assert [p.name for p in setting["tmp"].iterdir()] == [], "sandboxes left"


@pytest.fixture(scope="module")
def local(setting):
    """The class in one call, two at a time, with a given seed."""
    return _grade(setting, "local", "--jobs", "2", "--seed", "4321")


def test_tamperers_cannot_change_anyone_elses_marks(local, setting):
    _assert_class(local, setting)
    rows = local["rows"]
    assert rows["carol"]["check-vector-add"] == "0" and rows["dave"]["check-vector-add-fast"] == "1"
    reason = {name: rows[name]["reason"] for name in ATTACKS}
    assert "npusim/checks/lab00_tour.py" in reason["mallory"] and "course:solutions/01_vector_add.ipynb" in reason[
        "mallory"]
    assert "npusim/checks/lab01_zfake.py" in reason["oscar"]
    assert "npusim/course/grading/plugin.py" in reason["trudy"]
    for name in ATTACKS:
        assert "tamper attempt" in rows[name]["flags"], rows[name]
        assert rows[name]["check-peak-tflops"] == "0", "a tampering submission scores nothing"


@pytest.mark.skipif(not ROOT_USER, reason="user isolation needs root (CI and this machine run as root)")
def test_as_root_each_submission_runs_as_its_own_user(local):
    assert local["run"]["isolation"].startswith("each submission's kernel as a user id of its own")
    assert "PID namespace" in local["stdout"] and local["run"]["course_repairs"] == []
    # nothing reached the course: every attempt was refused, so nothing was changed
    assert all("tampered" not in r["flags"].split("; ") for r in local["rows"].values())


def test_seed_and_strict_mode_reach_the_kernel_but_not_the_feedback(local):
    assert local["run"]["seed"] == 4321
    sam = (local["out"] / "feedback" / "sam.md").read_text(encoding="utf-8")
    assert "PASSED seed_echo: seed 4321 strict 1" in sam, "the fabricated check echoes what its kernel got"
    for path in (local["out"] / "feedback").glob("*.md"):
        if path.stem != "sam":
            assert "4321" not in path.read_text(encoding="utf-8"), path


def test_summary_per_learner(local):
    rows = list(csv.DictReader((local["out"] / "summary.csv").open(encoding="utf-8")))
    by = {r["learner"]: r for r in rows}
    assert sorted(by) == sorted(CLASS, key=str.casefold)
    assert (by["dave"]["01_vector_add"], by["dave"]["00_tour"], by["dave"]["total"]) == ("3", "", "3")
    assert by["dave"]["max"] == "3"                         # the labs dave handed in: 01 (3)
    assert "00_tour: tampered" in by["oscar"]["review"] and "tampered" not in by["alice"]["review"]
    assert "| mallory |" in (local["out"] / "summary.md").read_text(encoding="utf-8")


def test_copy_isolation_refuses_the_same_attacks(setting):
    """``--isolation copy`` (what a non-root grader gets): the kernel is root of a user namespace without
    capabilities, on read-only mounts: every attack is refused and reported, nothing needs repairing."""
    result = _grade(setting, "copy", "--isolation", "copy", "--jobs", "2")
    _assert_class(result, setting)
    rows = result["rows"]
    for name in ATTACKS:
        assert "tamper attempt" in rows[name]["flags"] and "tampered" not in rows[name]["flags"].split("; ")
    assert "tried to write npusim/checks/lab01_zfake.py" in rows["oscar"]["reason"]
    assert result["run"]["course_repairs"] == [] and isinstance(result["run"]["seed"], int)


def test_a_detached_process_and_a_loop_ignoring_interrupts(setting):
    """A daemon in a new session, a loop that ignores SIGINT (the kernel must be killed), and a check cell
    moved above its exercise: status ``timeout`` naming the hanging cell, the moved check scored after its
    exercise, nothing left running."""
    nb = solve(lab("00_tour"), "00_tour", PEAK)
    check = nb.cells.pop(index(nb, "check-peak-tflops"))
    nb.cells.insert(index(nb, PEAK), check)                     # the check now sits above its exercise
    replace(nb, COPY, "import signal, subprocess\n"
                      "subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
                      "signal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass")
    path = write(nb, setting["base"] / "hang_00_tour.ipynb")
    out = setting["base"] / "hang"
    old_tmp, tempfile.tempdir = tempfile.tempdir, str(setting["tmp"])
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            cli(["grade", str(path), "--out-dir", str(out), "--root", str(setting["course"]), "--timeout", "40"])
    finally:
        tempfile.tempdir = old_tmp
    row = next(csv.DictReader((out / "gradebook.csv").open(encoding="utf-8")))
    assert row["status"] == "timeout", row
    assert f"id {COPY}" in row["reason"] and "did not respond to the interrupt" in row["reason"], row["reason"]
    assert (row["check-peak-tflops"], row["check-copy-cycles"]) == ("1", "0"), row
    assert "moved check-peak-tflops" in row["flags"] and "sat above its exercise" in row["reason"]
    assert _left_behind(setting["tmp"]) == [], "the detached sleep outlived the grading"
