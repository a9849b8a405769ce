"""The grader's parts without a kernel: gradebook escaping and names, the summary, statuses after a hang,
check cells moved or forged, snapshot hashes, isolation choice (the sandbox's parts: test_trust_units)."""

from __future__ import annotations

import copy
import csv
import os
from pathlib import Path

import pytest

from fabricate import COPY, PEAK, PREDICT, ROOT, TRY_COPY, index, lab, solve
from npusim.course.grading import (CellRun, CheckResult, Grade, RunResult, Snapshot, choose_isolation, csv_cell,
                                   load_labs, restore_checks, safe_filename, score, summary_rows, write_feedback,
                                   write_gradebook)

pytestmark = pytest.mark.grading


@pytest.fixture(scope="module")
def labs():
    return load_labs(ROOT)


def _grade(learner, lab_name, points, status="ok", flags=()):
    checks = [CheckResult(cid, p, 1, "PASSED" if p else "failed") for cid, p in points.items()]
    return Grade(Path(f"{learner}_{lab_name}.ipynb"), learner, lab_name, checks, float(len(points)), status,
                 flags=list(flags))


def test_csv_cells_cannot_become_formulas(tmp_path, labs):
    assert [csv_cell(v) for v in ["=2+3", "+1", "-x", "@SUM(A1)", "\tx", "alice", "2"]] == [
        "'=2+3", "'+1", "'-x", "'@SUM(A1)", "'\tx", "alice", "2"]
    g = _grade("=2+3", "00_tour", {"check-peak-tflops": 1, "check-copy-cycles": 0})
    g.reasons.append("=HYPERLINK(\"http://x\")")
    write_gradebook([g], labs, tmp_path / "gb.csv")
    row = next(csv.DictReader((tmp_path / "gb.csv").open(encoding="utf-8")))
    assert row["learner"] == "'=2+3" and row["reason"].startswith("'=") and row["total"] == "1"


def test_feedback_files_keep_unicode_names(tmp_path, labs):
    names = ["José", "李雷", "Zoë", "zoë", "a/b", "CON", "..", "x" * 300]
    files = write_feedback([_grade(n, "00_tour", {"check-peak-tflops": 1}) for n in names], tmp_path)
    stems = [p.stem for p in files]
    assert stems[:4] == ["José", "李雷", "Zoë", "zoë-2"], "same name on a case-insensitive disk gets -2"
    assert stems[4] == "a_b" and stems[5] == "_CON" and stems[6] == "learner"
    assert len(stems[7].encode()) <= 120 and all(p.parent == tmp_path for p in files)
    assert safe_filename("Ｊｏｓé") == safe_filename("Ｊｏｓé")  # composed form either way
    assert "# Feedback for 李雷" in files[1].read_text(encoding="utf-8")


def test_summary_takes_each_learners_best_and_lists_what_needs_a_look(labs):
    grades = [_grade("ann", "00_tour", {"check-peak-tflops": 1, "check-copy-cycles": 0}),
              _grade("ann", "00_tour", {"check-peak-tflops": 1, "check-copy-cycles": 1}),
              _grade("ann", "01_vector_add", {"check-vector-add": 0, "check-vector-add-fast": 0}, "timeout"),
              _grade("ben", "01_vector_add", {"check-vector-add": 1, "check-vector-add-fast": 1},
                     flags=["edited check-vector-add"])]
    header, rows = summary_rows(grades, labs)
    assert header == ["learner", "00_tour", "01_vector_add", "total", "max", "labs", "review"]
    ann, ben = rows
    assert ann[:6] == ["ann", "2", "0", "2", "5", "2"]  # lab 00 has 2 checks, lab 01 has 3
    assert "01_vector_add: timeout" in ann[6] and "00_tour: 2 files" in ann[6]
    # the maximum counts the labs each learner handed in: ben handed in lab 01 only
    assert ben[:6] == ["ben", "", "2", "2", "3", "1"] and ben[6] == "01_vector_add: edited check-vector-add"


def test_a_hang_that_kills_the_kernel_is_a_timeout_of_the_hanging_cell(labs):
    tour = labs["00_tour"]
    nb = restore_checks(solve(lab("00_tour"), "00_tour", PEAK), tour).nb
    code = [c["id"] for c in nb.cells if c.cell_type == "code"]
    hang, after = code.index(COPY), code.index("check-copy-cycles")
    cells = {i: CellRun(i, "passed", passed_line="PASSED x" if code[i] == "check-peak-tflops" else "")
             for i in range(hang)}
    cells[hang] = CellRun(hang, "failed", timeout=True, evalue="Timeout of 5 seconds exceeded")
    cells[after] = CellRun(after, "failed", kernel_dead=True, evalue="Kernel dead on test start")
    checks, status, reasons, _ = score(tour, nb, RunResult(cells, junit_found=True, logged=len(cells)), 5, 100)
    assert status == "timeout" and f"id {COPY}" in reasons[0] and "was stopped" in reasons[0]
    assert [c.points for c in checks] == [1, 0] and "earlier cell hit the time limit" in checks[1].message


def test_a_check_moved_above_its_exercise_goes_back_after_it(labs):
    tour = labs["00_tour"]
    nb = solve(lab("00_tour"), "00_tour", PEAK, COPY, PREDICT)
    order = [c["id"] for c in nb.cells]
    moved = copy.deepcopy(nb)
    cell = moved.cells.pop(index(moved, "check-copy-cycles"))
    moved.cells.insert(index(moved, PEAK), cell)                 # above both exercises
    res = restore_checks(moved, tour)
    ids = [c["id"] for c in res.nb.cells]
    assert ids.index("check-copy-cycles") == ids.index(TRY_COPY) + 1
    assert res.flags == ["moved check-copy-cycles"] and "sat above its exercise" in res.notes[0]
    # a scratch cell between exercise and check is left where it is (the check still runs after it)
    scratch = copy.deepcopy(nb)
    scratch.cells.insert(index(scratch, COPY) + 1, copy.deepcopy(nb.cells[index(nb, COPY)]))
    scratch.cells[index(scratch, COPY) + 1]["id"] = "scratch"
    res = restore_checks(scratch, tour)
    assert [c["id"] for c in res.nb.cells].index("check-copy-cycles") == order.index("check-copy-cycles") + 1
    assert res.flags == []


def test_forged_checks_are_flagged(labs):
    tour = labs["00_tour"]
    nb = solve(lab("00_tour"), "00_tour", PEAK, COPY)
    nb.cells[index(nb, PEAK)].source += "\ncheck.copy_cycles = lambda f: print('PASSED copy_cycles: 5 copies')"
    extra = copy.deepcopy(nb.cells[index(nb, "check-copy-cycles")])
    extra["id"] = "check-bonus"
    nb.cells.append(extra)
    res = restore_checks(nb, tour)
    assert res.flags == [f"forged {PEAK}", "forged check-bonus"]


def test_snapshot_finds_what_changed_in_a_copy_and_in_the_course(tmp_path):
    course = tmp_path / "course"
    (course / "npusim" / "checks").mkdir(parents=True)
    (course / "npusim" / "__init__.py").write_text("")
    (course / "npusim" / "checks" / "lab00.py").write_text("A = 1\n")
    (course / "solutions").mkdir()
    (course / "solutions" / "00_x.ipynb").write_text("{}")
    snap = Snapshot.take(course)
    assert "sitecustomize.py" in snap.package and len(snap.digest) == 64
    dest = snap.write(tmp_path / "copy")
    assert not os.access(dest / "npusim" / "checks" / "lab00.py", os.W_OK) or os.geteuid() == 0
    assert oct((dest / "npusim" / "checks").stat().st_mode & 0o777) == "0o555"
    assert snap.changes(dest) == []
    for d in (dest, dest / "npusim", dest / "npusim" / "checks"):
        d.chmod(0o755)
    (dest / "npusim" / "checks" / "lab00.py").unlink()
    (dest / "npusim" / "checks" / "lab01_fake.py").write_text("")
    assert sorted(snap.changes(dest)) == ["added npusim/checks/lab01_fake.py", "deleted npusim/checks/lab00.py"]
    (course / "solutions" / "00_x.ipynb").write_text("{ }")
    (course / "npusim" / "checks" / "lab02.py").write_text("")
    assert snap.course_changes() == ["changed solutions/00_x.ipynb", "added npusim/checks/lab02.py"]
    assert len(snap.restore_course()) == 2 and snap.course_changes() == []


def test_isolation_choice():
    with pytest.raises(ValueError, match="--isolation must be"):
        choose_isolation("docker")
    iso = choose_isolation("copy")
    assert iso.name == "copy" and "network namespace (loopback only)" in iso.describe()
    if os.geteuid() != 0:
        with pytest.raises(ValueError, match="needs root"):
            choose_isolation("user")
    else:
        assert choose_isolation("auto").user
